#!/bin/sh
# abi-symbols.sh - the exported dynamic symbols equal tests/libmla.symbols.
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
lib=$(ls "$top_builddir"/lib/.libs/libmla.so.1.* 2>/dev/null | head -n 1)
if [ -z "$lib" ]; then
    echo "abi-symbols: no lib/.libs/libmla.so.1.* built" >&2
    exit 99
fi
command -v nm >/dev/null 2>&1 || { echo "abi-symbols: nm not found"; exit 77; }
tmp=${TMPDIR:-/tmp}/abi-symbols.$$
trap 'rm -f "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '{print $NF}' | LC_ALL=C sort -u > "$tmp"
if ! diff -u "$top_srcdir/tests/libmla.symbols" "$tmp"; then
    echo "abi-symbols: exported symbols differ from tests/libmla.symbols" >&2
    echo "(a deliberate change: update lib/libmla.map, MLA_LT_VERSION and run make abi-update)" >&2
    exit 1
fi
echo "abi-symbols: $(wc -l < "$tmp") symbols match"
