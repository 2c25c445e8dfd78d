#!/bin/sh
# man-coverage.sh - every exported symbol and every MLA_API function has a
# manual page man/NAME.3.
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
symbols=$top_srcdir/tests/libmla.symbols
header=$top_srcdir/include/mla.h
status=0

check() { # $1: function name, $2: where it was found
    if [ ! -f "$top_srcdir/man/$1.3" ]; then
        echo "missing: man/$1.3 (for $1 in $2)"
        status=1
    fi
}

for f in "$symbols" "$header"; do
    if [ ! -r "$f" ]; then
        echo "FAIL: cannot read $f"
        exit 1
    fi
done

# Lines such as "mla_decode@@MLA_1.0"; version nodes alone ("MLA_1.0") have no @.
names=$(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)@.*/\1/p' "$symbols")
for n in $names; do
    check "$n" tests/libmla.symbols
done

# Declarations such as "MLA_API mla_status_t mla_decode(mla_plan_t *plan, ...":
# the name is the identifier right before the first "(" after MLA_API.
api=$(sed -n 's/^[[:space:]]*MLA_API[[:space:]][^(]*[^A-Za-z0-9_(]\([A-Za-z_][A-Za-z0-9_]*\)[[:space:]]*(.*/\1/p' "$header")
decls=$(grep -c '^[[:space:]]*MLA_API[[:space:]]' "$header")
if [ -z "$api" ] || [ "$(printf '%s\n' "$api" | wc -l)" -ne "$decls" ]; then
    echo "FAIL: could not parse the $decls MLA_API declarations of $header" \
        "(keep each name and its \"(\" on the MLA_API line)"
    exit 1
fi
for n in $api; do
    check "$n" include/mla.h
done

# The two lists must name the same functions, or one of them is stale.
for n in $api; do
    printf '%s\n' "$names" | grep -qx "$n" ||
        { echo "not exported: $n (declared MLA_API in include/mla.h)"; status=1; }
done
for n in $names; do
    printf '%s\n' "$api" | grep -qx "$n" ||
        { echo "not declared: $n (in tests/libmla.symbols, not MLA_API in include/mla.h)"; status=1; }
done

[ $status -eq 0 ] && echo "PASS: $(printf '%s\n' "$api" | wc -l) functions documented"
exit $status
