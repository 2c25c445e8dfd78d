#!/bin/sh
# abi-diff.sh - the built library's ABI equals the committed abidw baseline.
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
ABIDIFF=${ABIDIFF:-abidiff}
if ! command -v "$ABIDIFF" >/dev/null 2>&1; then
    echo "abi-diff: abidiff not found (package abigail-tools)"
    exit 77
fi
lib=$(ls "$top_builddir"/lib/.libs/libmla.so.1.* 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "abi-diff: library not built" >&2; exit 99; }
base="$top_srcdir/abi/libmla.abi"
[ -f "$base" ] || { echo "abi-diff: missing baseline $base" >&2; exit 1; }
"$ABIDIFF" --headers-dir1 "$top_srcdir/include" --headers-dir2 "$top_srcdir/include" \
    "$base" "$lib"
rc=$?
case $rc in
0) echo "abi-diff: no ABI change against abi/libmla.abi"; exit 0 ;;
1|2) echo "abi-diff: abidiff failed to run (rc $rc)" >&2; exit 99 ;;
*) echo "abi-diff: ABI changed (abidiff rc $rc); see above" >&2; exit 1 ;;
esac
