#!/bin/sh
# demo.sh - mla-demo says what ran: without a GPU it names the CPU reference
# and the reason (in a build without CUDA, that build, not the CUDA driver),
# reports only what it measured (no rates, no "PASS" for a reference checked
# against itself); mla-bench gives the same reason.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}
demo=$top_builddir/tools/mla-demo
bench=$top_builddir/tools/mla-bench
status=0
fail() { echo "FAIL: $*"; status=1; }

build=$("$demo" --version | sed -n 2p)
echo "build: $build"
small="--batch 1 --seq-len 64 --heads 16 --seed 1"

# shellcheck disable=SC2086
out=$("$demo" $small 2>&1) || fail "mla-demo exited with $?"
printf '%s\n' "$out"
case $out in *"PASS (ref)"*) fail "mla-demo calls the reference checked against itself a PASS" ;; esac
if printf '%s\n' "$out" | grep -q '^gpu '; then
    printf '%s\n' "$out" | grep -q '^gpu .* PASS (' || fail "the GPU row has no verdict"
else
    row=$(printf '%s\n' "$out" | grep '^cpu ') || fail "no cpu row"
    case $row in *" finite") ;; *) fail "the cpu row does not say what was checked: $row" ;; esac
    case $row in *0.000*) fail "the cpu row reports rates: $row" ;; esac
    printf '%s\n' "$out" | grep -q '^backend: the CPU reference (.*)$' ||
        fail "mla-demo does not say it ran the CPU reference, and why"
    case $build in
    *cuda=none*)
        printf '%s\n' "$out" | grep -q 'built without the CUDA backend' ||
            fail "mla-demo does not say the library was built without CUDA"
        case $out in *libcuda*) fail "mla-demo blames libcuda in a build without CUDA" ;; esac
        # shellcheck disable=SC2086
        bout=$("$bench" $small --format bf16 --iters 1 --warmup 0 2>&1) ||
            fail "mla-bench exited with $?"
        case $bout in
        *"built without the CUDA backend"*) ;;
        *) fail "mla-bench does not say the library was built without CUDA" ;;
        esac
        case $bout in *libcuda*) fail "mla-bench blames libcuda in a build without CUDA" ;; esac
        ;;
    esac
fi

# shellcheck disable=SC2086
out=$("$demo" --cpu $small 2>&1) || fail "mla-demo --cpu exited with $?"
printf '%s\n' "$out" | grep -q '^backend: the CPU reference (asked for with --cpu)$' ||
    fail "mla-demo --cpu does not say the CPU was asked for"

[ $status -eq 0 ] && echo "PASS: mla-demo says what ran"
exit $status
