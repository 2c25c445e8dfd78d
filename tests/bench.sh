#!/bin/sh
# bench.sh - mla-bench on the CPU backend: every length distribution, in
# mla_decode calls and in steps of mla_schedule and mla_decode_scheduled
# layers, checked and timed, with both bandwidth ceilings and well-formed
# JSON, CSV and SVG files; the guard fails a corrupted output; bad options
# exit 2.  In builds with CUDA, ptxas accepts the read probe's PTX and
# keeps it within 32 registers (four 512-thread blocks per SM).
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
bench=$top_builddir/tools/mla-bench
status=0
fail() { echo "FAIL: $*"; status=1; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

small="--cpu --seed 7 --heads 16 --batch 1,5 --seq-len 40 --iters 1 --warmup 0"
# run NAME ARGS...: mla-bench with the small grid, output in $tmp/NAME.*
run() {
    name=$1
    shift
    # shellcheck disable=SC2086
    "$bench" $small "$@" --json "$tmp/$name.json" --csv "$tmp/$name.csv" --svg "$tmp/$name.svg" \
        >"$tmp/$name.out" 2>"$tmp/$name.err"
}

for mode in calls steps; do
    extra=""
    [ $mode = steps ] && extra="--layers 3"
    # shellcheck disable=SC2086
    run $mode --format bf16,fp8 --lengths fixed,normal,flashmla,mix $extra ||
        { cat "$tmp/$mode.out" "$tmp/$mode.err"; fail "mla-bench ($mode) exited with $?"; continue; }
    out=$tmp/$mode.out
    rows=$(grep -c ' PASS (' "$out")
    [ "$rows" -eq 16 ] || { cat "$out"; fail "$mode: $rows passing rows, want 16"; }
    for lens in fixed normal flashmla mix; do
        grep -q "^bf16 .* $lens " "$out" || fail "$mode: no row with lengths $lens"
    done
    grep -q '^# read ceiling [0-9.]* TB/s, measured: host read' "$out" ||
        fail "$mode: no measured read ceiling"
    grep -q '^# copy ceiling [0-9.]* TB/s, measured: host memcpy' "$out" ||
        fail "$mode: no measured copy ceiling"
    head -n 20 "$out" | grep -q '%read.*%copy' || fail "$mode: the table has no %read and %copy"
    grep -q '"read_tbs": [0-9]' "$tmp/$mode.json" || fail "$mode: no read_tbs in the JSON"
    grep -q '"read_bw_pct": [0-9]' "$tmp/$mode.json" || fail "$mode: no read_bw_pct in the JSON"
    grep -q '"lengths": "mix"' "$tmp/$mode.json" || fail "$mode: no mix lengths in the JSON"
    if ! grep -q '<svg ' "$tmp/$mode.svg" || ! grep -q '</svg>' "$tmp/$mode.svg"; then
        fail "$mode: the SVG is incomplete"
    fi
    # Every CSV row has the header's columns (quoted fields hold commas).
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$tmp/$mode.csv" "$tmp/$mode.json" "$tmp/$mode.svg" <<'EOF' || fail "$mode: malformed output files"
import csv, json, sys, xml.dom.minidom
rows = list(csv.reader(open(sys.argv[1])))
assert len(rows) == 17 and all(len(r) == len(rows[0]) for r in rows), "CSV columns"
d = json.load(open(sys.argv[2]))
assert len(d["shapes"]) == 16, "JSON shapes"
xml.dom.minidom.parse(sys.argv[3])
EOF
    fi
done

grep -q '"timing": "calls"' "$tmp/calls.json" || fail "calls: the JSON does not say calls"
grep -q '"timing": "steps", "layers": 3' "$tmp/steps.json" ||
    fail "steps: the JSON does not say steps of 3 layers"
grep -q '"schedule_us": [0-9]' "$tmp/steps.json" || fail "steps: no mla_schedule time"
grep -q '"schedule_us": null' "$tmp/calls.json" || fail "calls: a schedule time outside steps"
grep -q '^# time: .* 3 mla_decode_scheduled layers.* per layer' "$tmp/steps.out" ||
    fail "steps: the header does not say the times are per layer"

# FlashMLA's lengths are at least q_len; mix keeps the mean and is uneven.
run lens --format bf16 --batch 32 --seq-len 8 --q-len 4 --lengths flashmla,mix --no-ceilings ||
    fail "mla-bench (lengths) exited with $?"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/lens.json" <<'EOF' || fail "length distributions"
import json, sys
s = {x["lengths"]: x for x in json.load(open(sys.argv[1]))["shapes"]}
assert s["flashmla"]["s_k_min"] >= 4, s["flashmla"]
m = s["mix"]
assert abs(m["s_k_mean"] - 8) < 0.5 and m["s_k_max"] >= 8 * m["s_k_min"], m
EOF
fi

# The guard fails a corrupted output, in steps too.
# shellcheck disable=SC2086
if "$bench" $small --format bf16 --layers 2 --corrupt-check --no-ceilings >"$tmp/c.out" 2>&1; then
    fail "--corrupt-check passed"
fi
grep -q 'FAIL' "$tmp/c.out" || fail "--corrupt-check does not report FAIL"

for bad in "--lengths normal,foo" "--layers 2000" "--layers -1" "--lengths ,"; do
    # shellcheck disable=SC2086
    "$bench" $bad >/dev/null 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "mla-bench $bad exits with $rc, want 2"
done

# The read probe's PTX, as the tool embeds it.
ptxas=""
if [ "${MLA_HAVE_CUDA:-no}" = yes ] && [ -n "${NVCC:-}" ]; then
    ptxas=$(dirname "$NVCC")/ptxas
fi
if [ -x "$ptxas" ]; then
    printf '#include <stdio.h>\nextern const char mla_bench_read_ptx[];\nint main(void){return fputs(mla_bench_read_ptx, stdout) < 0;}\n' \
        >"$tmp/dump.c"
    if ! ${CC:-cc} -I"$top_srcdir/include" -I"$top_srcdir/tools" -I"$top_srcdir/tools/bench" \
        -o "$tmp/dump" "$tmp/dump.c" "$top_srcdir/tools/bench/read_ptx.c" ||
        ! "$tmp/dump" >"$tmp/read.ptx"; then
        fail "cannot print the read probe's PTX"
    fi
    if "$ptxas" -arch=sm_90a -v -o "$tmp/read.cubin" "$tmp/read.ptx" >"$tmp/ptxas.log" 2>&1; then
        regs=$(sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' "$tmp/ptxas.log")
        echo "read probe: sm_90a, $regs registers"
        if [ -z "$regs" ] || [ "$regs" -gt 32 ]; then
            fail "the read probe uses ${regs:-an unknown number of} registers (more than 32)"
        fi
    else
        cat "$tmp/ptxas.log"
        fail "ptxas rejects the read probe's PTX"
    fi
else
    echo "read probe's PTX not compiled: no ptxas in this build"
fi

[ $status -eq 0 ] && echo "PASS: mla-bench on the CPU backend, every length distribution, calls and steps"
exit $status
