#!/usr/bin/env bash
# trace builds: HEAD and HEAD with half the converter's rows skipped (timing bound only; wrong results)
set -u
T0=$(date +%s)
DEVICE_CHECK_BUILD_ONLY=1 DEVICE_CHECK_PLAIN=1 MLA_CUDA_ARCHS=90a JOBS=16 OUT= bash tools/device-check > /dev/null 2>&1
mkdir -p .carry/v/tr .carry/v/half
MLA_NVCC_FLAGS="-DMLA_TRACE" bash device-check-build/build.sh > /dev/null 2>&1; cp device-check-build/lib/libmla.so.1 .carry/v/tr/
MLA_NVCC_FLAGS="-DMLA_TRACE -DMLA_EXP_HALF_ROWS" bash device-check-build/build.sh > /dev/null 2>&1; cp device-check-build/lib/libmla.so.1 .carry/v/half/
echo "built $(( $(date +%s) - T0 ))s"
gcc -std=gnu11 -O2 -pthread -Iinclude -Ikernels -Itools -o .carry/v/mla-bench tools/mla-bench.c tools/problem.c tools/devmem.c .carry/v/tr/libmla.so.1 -lm -ldl
for r in 1 2; do for v in tr half; do for f in fp8 fp8-ds-mla; do
  LD_LIBRARY_PATH=.carry/v/$v timeout 120 .carry/v/mla-bench --no-ceilings --check-requests 1 --iters 2 --warmup 1 --format $f --heads 128 --batch 132 --seq-len 8192 > $OUT/h_${v}_${f}_$r.log 2>&1
  echo "== $v $f round $r"; grep "^TRACE" $OUT/h_${v}_${f}_$r.log | awk '{print $3, $4}' | tr '\n' ' '; echo
  grep "PHASE wide 1[2-5]" $OUT/h_${v}_${f}_$r.log | awk '{s[$3]+=$4; n[$3]++} END {for (k in s) printf "%s:%d ", k, s[k]/n[k]; print ""}'
  grep "^fp8" $OUT/h_${v}_${f}_$r.log
done; done; done
echo "done $(( $(date +%s) - T0 ))s"
