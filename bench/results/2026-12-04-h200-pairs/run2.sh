#!/bin/bash
# pair kernel: why slower.  cluster occupancy; traces of pair and wide;
# variants: remote stores instead of bulk copies, L2 prefetch of the next half tile.
set -u
R=$PWD
export PATH=$PATH:/usr/local/cuda/bin
nvcc -o /tmp/probe exp/probe.cu && /tmp/probe | tee $OUT/probe.txt
export DEVICE_CHECK_PLAIN=1 JOBS=16
DEVICE_CHECK_BUILD_ONLY=1 MLA_CUDA_ARCHS=90a OUT= bash tools/device-check > /tmp/build.txt 2>&1
L=$R/device-check-build/lib
gcc -std=gnu11 -O2 -pthread -Iinclude -Ikernels -Itools -o /tmp/mla-bench tools/mla-bench.c tools/problem.c tools/devmem.c -L$L -lmla -lm -ldl || exit 1
mkdir -p /tmp/v
for v in base stores prefetch both trace; do
  case $v in
    base) F="";; stores) F="-DMLA_EXP_PAIR_STORES";; prefetch) F="-DMLA_EXP_PAIR_PREFETCH";;
    both) F="-DMLA_EXP_PAIR_STORES -DMLA_EXP_PAIR_PREFETCH";; trace) F="-DMLA_TRACE";;
  esac
  MLA_NVCC_FLAGS="$F" bash device-check-build/build.sh > /tmp/b-$v.txt 2>&1 || { echo build $v failed; tail /tmp/b-$v.txt; }
  mkdir -p /tmp/v/$v && cp -L $L/libmla.so.1 /tmp/v/$v/
done
B="/tmp/mla-bench --no-ceilings --check-requests 1 --iters 20"
{
for r in 1 2; do
  for v in base stores prefetch both; do
    for k in hopper-pair hopper-wide; do
      [ $v != base ] && [ $k = hopper-wide ] && continue
      echo "== round $r $v $k"
      LD_LIBRARY_PATH=/tmp/v/$v MLA_KERNEL=$k timeout 100 $B --format fp8,fp8-ds-mla --heads 128 --batch 132 --seq-len 8192 | grep -E "^fp8|FAIL"
    done
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
{
for k in hopper-pair hopper-wide; do
  for f in fp8 fp8-ds-mla; do
    echo "== trace $k $f"
    LD_LIBRARY_PATH=/tmp/v/trace MLA_KERNEL=$k timeout 100 /tmp/mla-bench --no-ceilings --check-requests 1 --iters 2 --warmup 1 --format $f --heads 128 --batch 132 --seq-len 8192 2>&1 | grep -E "TRACE|PHASE" | tail -12
  done
done
} > $OUT/trace.txt 2>&1
cat $OUT/trace.txt
