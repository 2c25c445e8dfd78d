#!/bin/sh
# man-lint.sh - lint every manual page with mandoc (skipped without mandoc).
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
MANDOC=${MANDOC:-mandoc}

if ! command -v "$MANDOC" >/dev/null 2>&1; then
    echo "SKIP: mandoc not found"
    exit 77
fi

set -- "$top_srcdir"/man/*.[1-9]
if [ ! -e "$1" ]; then
    echo "FAIL: no manual pages under $top_srcdir/man"
    exit 1
fi

status=0
for page in "$@"; do
    # -Wwarning: report warnings and worse; any output at all is a failure.
    out=$("$MANDOC" -Tlint -Wwarning "$page" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || [ -n "$out" ]; then
        printf '%s\n' "$out"
        echo "FAIL: $page (mandoc exit $rc)"
        status=1
    fi
done
[ $status -eq 0 ] && echo "PASS: $# pages clean"
exit $status
