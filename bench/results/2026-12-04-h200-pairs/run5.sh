#!/bin/bash
# pair E4M3 with the seesaw consumers: smoke, A/B against the single-CTA wide kernel, device-check.
set -u
R=$PWD
export CHECK_CFLAGS="-I$R/.carry/check/include" CHECK_LIBS="$R/.carry/check/lib/libcheck.a $R/.carry/check/lib/libsubunit.a -lrt -lm -pthread" DEVICE_CHECK_PLAIN=1 JOBS=16
DEVICE_CHECK_BUILD_ONLY=1 MLA_CUDA_ARCHS=90a OUT= bash tools/device-check > /tmp/build.txt 2>&1
L=$R/device-check-build/lib
gcc -std=gnu11 -O2 -pthread -Iinclude -Ikernels -Itools -o /tmp/mla-bench tools/mla-bench.c tools/problem.c tools/devmem.c -L$L -lmla -lm -ldl || exit 1
mkdir -p /tmp/v/n && cp -L $L/libmla.so.1 /tmp/v/n/
B="/tmp/mla-bench --no-ceilings --check-requests 2 --iters 20"
LD_LIBRARY_PATH=/tmp/v/n MLA_KERNEL=hopper-pair timeout 60 $B --format fp8,fp8/g32 --heads 128 --batch 16 --seq-len 2048 > $OUT/smoke.txt 2>&1
rc=$?; echo "smoke rc=$rc"; grep -E "^fp8|FAIL" $OUT/smoke.txt
[ $rc -eq 0 ] || exit 1
{
for r in 1 2; do
  for k in hopper-pair hopper-wide; do
    echo "== round $r $k b132 s8192"
    LD_LIBRARY_PATH=/tmp/v/n MLA_KERNEL=$k timeout 100 $B --format fp8,fp8/g0 --heads 128 --batch 132 --seq-len 8192 | grep -E "^fp8|FAIL"
  done
done
for k in hopper-pair hopper-wide; do
  echo "== $k b64 s4096 q1,2c; b1 s4096"
  LD_LIBRARY_PATH=/tmp/v/n MLA_KERNEL=$k timeout 100 $B --format fp8 --heads 128 --batch 64 --seq-len 4096 --q-len 1,2 --causal | grep -E "^fp8|FAIL"
  LD_LIBRARY_PATH=/tmp/v/n MLA_KERNEL=$k timeout 60 $B --format fp8 --heads 128 --batch 1,8 --seq-len 4096 | grep -E "^fp8|FAIL"
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
DEVICE_CHECK_TEST_TIMEOUT=200 OUT=$OUT/check timeout 300 bash tools/device-check > $OUT/device-check.txt 2>&1
tail -14 $OUT/device-check.txt
