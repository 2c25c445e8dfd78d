#!/bin/bash
# pair kernel: smoke, A/B against the single-CTA wide kernel, device-check
set -u
R=$PWD
export CHECK_CFLAGS="-I$R/.carry/check/include" CHECK_LIBS="$R/.carry/check/lib/libcheck.a $R/.carry/check/lib/libsubunit.a -lrt -lm -pthread" DEVICE_CHECK_PLAIN=1 JOBS=16
DEVICE_CHECK_BUILD_ONLY=1 MLA_CUDA_ARCHS=90a OUT= bash tools/device-check > $OUT/build.txt 2>&1
L=$R/device-check-build/lib
gcc -std=gnu11 -O2 -pthread -Iinclude -Ikernels -Itools -o /tmp/mla-bench tools/mla-bench.c tools/problem.c tools/devmem.c -L$L -lmla -Wl,-rpath,$L -lm -ldl || exit 1
B="/tmp/mla-bench --no-ceilings --check-requests 2 --iters 20"
MLA_KERNEL=hopper-pair timeout 90 $B --format fp8 --heads 128 --batch 16 --seq-len 2048 > $OUT/smoke.txt 2>&1
rc=$?; echo "smoke rc=$rc"; tail -5 $OUT/smoke.txt
[ $rc -eq 0 ] || exit 1
{
for r in 1 2; do
 for k in auto hopper-wide; do
  echo "== round $r MLA_KERNEL=$k"
  MLA_KERNEL=$k timeout 120 $B --format fp8,fp8-ds-mla --heads 128 --batch 132 --seq-len 8192
 done
done
for k in auto hopper-wide; do
  echo "== MLA_KERNEL=$k b64 s4096, q 1/2 causal, b1"
  MLA_KERNEL=$k timeout 120 $B --format fp8,fp8-ds-mla --heads 128 --batch 64 --seq-len 4096 --q-len 1,2 --causal
  MLA_KERNEL=$k timeout 60 $B --format fp8 --heads 128 --batch 1 --seq-len 4096
done
} > $OUT/ab.txt 2>&1
grep -E "^==|fp8" $OUT/ab.txt | grep -v "^#" | cut -c1-150
DEVICE_CHECK_TEST_TIMEOUT=240 OUT=$OUT/check timeout 400 bash tools/device-check > $OUT/device-check.txt 2>&1
tail -22 $OUT/device-check.txt
