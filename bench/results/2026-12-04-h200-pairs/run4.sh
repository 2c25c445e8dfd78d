#!/bin/bash
# final pair form (coupled free barriers, L2 prefetch one tile ahead): A/B against the
# single-CTA wide kernel, a phase trace, then the full device-check.
set -u
R=$PWD
export CHECK_CFLAGS="-I$R/.carry/check/include" CHECK_LIBS="$R/.carry/check/lib/libcheck.a $R/.carry/check/lib/libsubunit.a -lrt -lm -pthread" DEVICE_CHECK_PLAIN=1 JOBS=16
DEVICE_CHECK_BUILD_ONLY=1 MLA_CUDA_ARCHS=90a OUT= bash tools/device-check > /tmp/build.txt 2>&1
L=$R/device-check-build/lib
gcc -std=gnu11 -O2 -pthread -Iinclude -Ikernels -Itools -o /tmp/mla-bench tools/mla-bench.c tools/problem.c tools/devmem.c -L$L -lmla -lm -ldl || exit 1
mkdir -p /tmp/v/n /tmp/v/t && cp -L $L/libmla.so.1 /tmp/v/n/
MLA_NVCC_FLAGS=-DMLA_TRACE bash device-check-build/build.sh > /tmp/b-t.txt 2>&1 && cp -L $L/libmla.so.1 /tmp/v/t/
B="/tmp/mla-bench --no-ceilings --check-requests 2 --iters 20"
{
for r in 1 2; do
  for k in hopper-pair hopper-wide; do
    echo "== round $r $k b132 s8192"
    LD_LIBRARY_PATH=/tmp/v/n MLA_KERNEL=$k timeout 100 $B --format fp8,fp8/g0,fp8-ds-mla --heads 128 --batch 132 --seq-len 8192 | grep -E "^fp8|FAIL"
  done
done
for k in hopper-pair hopper-wide; do
  echo "== $k b64 s4096 q1,2c; b1 s4096"
  LD_LIBRARY_PATH=/tmp/v/n MLA_KERNEL=$k timeout 100 $B --format fp8,fp8-ds-mla --heads 128 --batch 64 --seq-len 4096 --q-len 1,2 --causal | grep -E "^fp8|FAIL"
  LD_LIBRARY_PATH=/tmp/v/n MLA_KERNEL=$k timeout 60 $B --format fp8 --heads 128 --batch 1 --seq-len 4096 | grep -E "^fp8|FAIL"
done
echo "== auto (the default) b132 s8192"
LD_LIBRARY_PATH=/tmp/v/n timeout 100 $B --format fp8,fp8-ds-mla --heads 128 --batch 132 --seq-len 8192 | grep -E "^fp8|FAIL"
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
{
for k in hopper-pair hopper-wide; do
  for f in fp8 fp8-ds-mla; do
    echo "== trace $k $f"
    LD_LIBRARY_PATH=/tmp/v/t MLA_KERNEL=$k timeout 100 /tmp/mla-bench --no-ceilings --check-requests 1 --iters 2 --warmup 1 --format $f --heads 128 --batch 132 --seq-len 8192 2>&1 | grep -E "TRACE|PHASE" | tail -7
  done
done
} > $OUT/trace.txt 2>&1
DEVICE_CHECK_TEST_TIMEOUT=240 OUT=$OUT/check timeout 330 bash tools/device-check > $OUT/device-check.txt 2>&1
tail -14 $OUT/device-check.txt
