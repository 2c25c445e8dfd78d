#!/bin/sh
# configure-check.sh - configure stops, and says how to go on, when the check
# library is missing; with --disable-tests it goes on without the unit tests.
# Runs configure in a scratch directory, so it needs a source tree that is
# not configured in place (a VPATH build, as CI's sanitizer build and make
# distcheck are); in an in-place build it skips.
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
src=$(cd "$top_srcdir" && pwd) || exit 1

if [ -f "$src/config.status" ]; then
    echo "SKIP: $src is configured in place; configure runs only in VPATH builds"
    exit 77
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/no-pc" "$tmp/a" "$tmp/b"
fail() {
    echo "FAIL: $*"
    for f in "$tmp"/a/out "$tmp"/b/out; do [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
    exit 1
}

# An empty pkg-config search path hides check; nothing else may supply it.
PKG_CONFIG_LIBDIR=$tmp/no-pc PKG_CONFIG_PATH=
export PKG_CONFIG_LIBDIR PKG_CONFIG_PATH
unset CHECK_CFLAGS CHECK_LIBS

if (cd "$tmp/a" && "$src/configure" --without-cuda >out 2>&1); then
    fail "configure succeeded without the check library"
fi
grep -q 'error: the unit tests need the check library' "$tmp/a/out" ||
    fail "configure failed, but not with the message about the check library"
grep -q -- '--disable-tests' "$tmp/a/out" ||
    fail "the message does not mention --disable-tests"

(cd "$tmp/b" && "$src/configure" --without-cuda --disable-tests >out 2>&1) ||
    fail "configure --disable-tests failed without the check library"
grep -q 'unit tests: *no (--disable-tests)' "$tmp/b/out" ||
    fail "configure --disable-tests does not report the unit tests as disabled"

echo "PASS: configure stops without check, and goes on with --disable-tests"
