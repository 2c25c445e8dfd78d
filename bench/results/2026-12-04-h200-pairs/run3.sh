#!/bin/bash
# pair kernel, decoupled free barriers: L2 prefetch distance 0/1/2 against the wide kernel; then device-check.
set -u
R=$PWD
export PATH=$PATH:/usr/local/cuda/bin
export CHECK_CFLAGS="-I$R/.carry/check/include" CHECK_LIBS="$R/.carry/check/lib/libcheck.a $R/.carry/check/lib/libsubunit.a -lrt -lm -pthread" DEVICE_CHECK_PLAIN=1 JOBS=16
DEVICE_CHECK_BUILD_ONLY=1 MLA_CUDA_ARCHS=90a OUT= bash tools/device-check > /tmp/build.txt 2>&1
L=$R/device-check-build/lib
gcc -std=gnu11 -O2 -pthread -Iinclude -Ikernels -Itools -o /tmp/mla-bench tools/mla-bench.c tools/problem.c tools/devmem.c -L$L -lmla -lm -ldl || exit 1
for v in 0 1 2; do
  MLA_NVCC_FLAGS="-DMLA_PAIR_PREFETCH_AHEAD=$v" bash device-check-build/build.sh > /tmp/b-$v.txt 2>&1 || { echo build $v failed; tail /tmp/b-$v.txt; }
  mkdir -p /tmp/v/$v && cp -L $L/libmla.so.1 /tmp/v/$v/
done
B="/tmp/mla-bench --no-ceilings --check-requests 1 --iters 20"
{
for r in 1 2; do
  for v in 0 1 2 w; do
    k=hopper-pair; lib=$v; [ $v = w ] && { k=hopper-wide; lib=1; }
    echo "== round $r ahead=$v $k"
    LD_LIBRARY_PATH=/tmp/v/$lib MLA_KERNEL=$k timeout 100 $B --format fp8,fp8-ds-mla --heads 128 --batch 132 --seq-len 8192 | grep -E "^fp8|FAIL"
  done
done
for v in 0 1 2 w; do
  k=hopper-pair; lib=$v; [ $v = w ] && { k=hopper-wide; lib=1; }
  echo "== b64 s4096 q1,2c ahead=$v $k"
  LD_LIBRARY_PATH=/tmp/v/$lib MLA_KERNEL=$k timeout 100 $B --format fp8,fp8-ds-mla --heads 128 --batch 64 --seq-len 4096 --q-len 1,2 --causal | grep -E "^fp8|FAIL"
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
DEVICE_CHECK_TEST_TIMEOUT=240 OUT=$OUT/check timeout 330 bash tools/device-check > $OUT/device-check.txt 2>&1
tail -14 $OUT/device-check.txt
