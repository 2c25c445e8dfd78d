#!/bin/sh
# user-docs.sh - the README and the manual pages speak to users: they tune
# nothing through the environment (libmla reads none; experimental settings
# are parameters, mla_experimental(3)), use no kernel-engineering terms
# (doc/design.md), and the README states no speed of its own but points to
# doc/performance.md, where speed is a ratio against FlashMLA measured in the
# same run.
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
readme=$top_srcdir/README.md
status=0
fail() { echo "FAIL: $*"; status=1; }

set -- "$readme" "$top_srcdir"/man/*.[1-9]
for f in "$@"; do
    [ -r "$f" ] || { echo "FAIL: cannot read $f"; exit 1; }
done

# The variables libmla once read, an MLA_ variable set on a command line or
# named with .Ev (which is for the CUDA driver's), setenv and getenv; and,
# whatever the case, any "environment variable".
envtune='MLA_KERNEL|MLA_CPU_THREADS|(^|[^A-Za-z0-9_])MLA_[A-Z0-9_]+=|\.Ev +MLA_|[gs]etenv'
envword='environment variables?'
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
    bad -s "$f" "$envtune" "tunes through the environment (experimental settings are parameters: mla_experimental(3))"
    bad -i "$f" "$envword" "speaks of environment variables (libmla reads none; ENVIRONMENT lists the CUDA driver's)"
    bad -s "$f" "$jargon" "uses kernel-engineering terms (they belong in doc/design.md)"
done
bad -i "$readme" "$speed" "states a speed; speed is reported in doc/performance.md, against FlashMLA"
grep -q 'doc/performance\.md' "$readme" || fail "README.md does not point to doc/performance.md"

[ $status -eq 0 ] && echo "PASS: $# user documents"
exit $status
