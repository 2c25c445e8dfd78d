#!/bin/bash
# final tree: mla-bench with the default choice, then the full device-check.
set -u
R=$PWD
export CHECK_CFLAGS="-I$R/.carry/check/include" CHECK_LIBS="$R/.carry/check/lib/libcheck.a $R/.carry/check/lib/libsubunit.a -lrt -lm -pthread" DEVICE_CHECK_PLAIN=1 JOBS=16
DEVICE_CHECK_TEST_TIMEOUT=200 OUT=$OUT/check timeout 280 bash tools/device-check > $OUT/device-check.txt 2>&1
L=$R/device-check-build/lib
gcc -std=gnu11 -O2 -pthread -Iinclude -Ikernels -Itools -o /tmp/mla-bench tools/mla-bench.c tools/problem.c tools/devmem.c -L$L -lmla -lm -ldl || exit 1
B="/tmp/mla-bench --no-ceilings --check-requests 2 --iters 20"
{
echo "== default choice, h128 b132 s8192"
LD_LIBRARY_PATH=$L timeout 60 $B --format fp8,fp8/g0,fp8-ds-mla --heads 128 --batch 132 --seq-len 8192 | grep -E "^fp8|^bf16|FAIL"
echo "== default choice, h128 b64 s4096 q1,2c; b1 s4096"
LD_LIBRARY_PATH=$L timeout 40 $B --format fp8,fp8-ds-mla --heads 128 --batch 64 --seq-len 4096 --q-len 1,2 --causal | grep -E "^fp8|FAIL"
LD_LIBRARY_PATH=$L timeout 20 $B --format fp8 --heads 128 --batch 1 --seq-len 4096 | grep -E "^fp8|FAIL"
} > $OUT/bench.txt 2>&1
tail -14 $OUT/device-check.txt
cat $OUT/bench.txt
