#!/bin/sh
# user-docs.sh - the README and the manual pages speak to users: they name
# none of the development overrides (doc/internals.md), use no kernel-
# engineering terms (doc/design.md), and the README states no speed of its
# own but points to doc/performance.md, where speed is a ratio against
# FlashMLA measured in the same run.
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
readme=$top_srcdir/README.md
status=0
fail() { echo "FAIL: $*"; status=1; }

set -- "$readme" "$top_srcdir"/man/*.[1-9]
for f in "$@"; do
    [ -r "$f" ] || { echo "FAIL: cannot read $f"; exit 1; }
done

overrides='MLA_KERNEL|MLA_CPU_THREADS'
jargon='wgmma|mma\.sync|(^|[^A-Za-z])TMA([^A-Za-z]|$)|warpgroup|seesaw|mbarrier|setmaxnreg|(^|[^A-Za-z])CTAs?([^A-Za-z]|$)'
speed='[0-9][0-9.,]*[ -]?(us|µs|ms|TB/s|GB/s|TFLOP/s)([^A-Za-z]|$)|[0-9.]+x (faster|slower)'

# bad GREP-OPTION FILE PATTERN WHY: fail with each line of FILE that matches
# the extended regular expression PATTERN.
bad() {
    hits=$(grep -n -E "$1" "$3" "$2")
    [ -z "$hits" ] && return 0
    printf '%s\n' "$hits" | sed "s|^|${2#"$top_srcdir"/}:|"
    fail "${2#"$top_srcdir"/} $4"
}
for f in "$@"; do
    bad -s "$f" "$overrides" "names a development override (they belong in doc/internals.md)"
    bad -s "$f" "$jargon" "uses kernel-engineering terms (they belong in doc/design.md)"
done
bad -i "$readme" "$speed" "states a speed; speed is reported in doc/performance.md, against FlashMLA"
grep -q 'doc/performance\.md' "$readme" || fail "README.md does not point to doc/performance.md"

[ $status -eq 0 ] && echo "PASS: $# user documents"
exit $status
