#!/bin/sh
# examples.sh - every example compiles, without warnings, against this
# build's libmla, and every example that is a program runs:
#  - examples/*.c run and print the "Expected output:" of their comment;
#  - the README shows each of its C examples as the examples/ file itself,
#    and the expected output of each in a ```text block;
#  - the EXAMPLES of the manual pages: programs are run and must exit 0,
#    fragments (functions) are compiled.  Those that include <cuda.h> are
#    compiled only in builds with CUDA.
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
CC=${CC:-cc}
libdir=$(cd "$top_builddir/lib/.libs" && pwd) || { echo "FAIL: build the library first"; exit 1; }
readme=$top_srcdir/README.md
block=$top_srcdir/tests/readme-block.sh
status=0
fail() { echo "FAIL: $*"; status=1; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The flags a user would add; CFLAGS and LDFLAGS carry the build's
# sanitizers, if any.
# shellcheck disable=SC2086
cc_obj() { $CC -std=gnu11 -Wall -Wextra -Werror ${CFLAGS:-} -I"$top_srcdir/include" "$@"; }
# shellcheck disable=SC2086
cc_prog() {
    cc_obj ${LDFLAGS:-} "$@" -L"$libdir" -Wl,-rpath,"$libdir" -lmla
}
# expected FILE: the lines after " * Expected output:" in FILE's comment.
expected() {
    sed -n '/^ \* Expected output:$/,/^ \*$/{/^ \*     /s/^ \*     //p}' "$1"
}

n_run=0
n_built=0
n_skipped=0

# ---- examples/ --------------------------------------------------------------
for src in "$top_srcdir"/examples/*.c; do
    name=${src##*/}
    want=$(expected "$src")
    [ -n "$want" ] || { fail "examples/$name: no \"Expected output:\" in its comment"; continue; }
    if ! cc_prog -o "$tmp/${name%.c}" "$src" >"$tmp/cc.log" 2>&1; then
        cat "$tmp/cc.log"; fail "examples/$name does not compile"; continue
    fi
    got=$("$tmp/${name%.c}") || fail "examples/$name exits with $?"
    if [ "$got" != "$want" ]; then
        printf 'want:\n%s\ngot:\n%s\n' "$want" "$got"
        fail "examples/$name does not print its expected output"
    fi
    n_run=$((n_run + 1))
done

# ---- README -----------------------------------------------------------------
sed -n '/^## /s/^## //p' "$readme" >"$tmp/sections"
shown=0
while IFS= read -r sect; do
    n=$(sh "$block" "$readme" "$sect" c count)
    i=1
    while [ "$i" -le "$n" ]; do
        sh "$block" "$readme" "$sect" c "$i" >"$tmp/readme.c"
        match=
        for src in "$top_srcdir"/examples/*.c; do
            cmp -s "$tmp/readme.c" "$src" && match=$src
        done
        if [ -z "$match" ]; then
            fail "README.md, \"$sect\": C example $i is not a file of examples/ as it stands"
        else
            shown=$((shown + 1))
            # Its expected output, as a ```text block of the same section.
            k=1
            found=
            while sh "$block" "$readme" "$sect" text "$k" >"$tmp/text"; do
                [ "$(cat "$tmp/text")" = "$(expected "$match")" ] && found=1
                k=$((k + 1))
            done
            [ -n "$found" ] ||
                fail "README.md, \"$sect\": no \`\`\`text block with the output of ${match##*/}"
        fi
        i=$((i + 1))
    done
done <"$tmp/sections"
[ "$shown" -gt 0 ] || fail "README.md shows no example of examples/"

# ---- manual pages -------------------------------------------------------------
have_cuda_h=
if [ "${MLA_HAVE_CUDA:-no}" = yes ]; then
    # shellcheck disable=SC2086
    echo '#include <cuda.h>' | cc_obj ${CUDA_CPPFLAGS:-} -x c -c -o /dev/null - 2>/dev/null &&
        have_cuda_h=1
fi
for page in "$top_srcdir"/man/*.[1-9]; do
    name=${page##*/}
    # The literal blocks of EXAMPLES, mdoc escapes undone, one file each.
    rm -f "$tmp"/ex-*.c
    awk -v dir="$tmp" '
        /^\.Sh / { on = ($0 == ".Sh EXAMPLES"); next }
        on && /^\.Bd -literal/ { n++; f = sprintf("%s/ex-%d.c", dir, n); lit = 1; next }
        lit && /^\.Ed/ { lit = 0; next }
        lit { gsub(/\\e/, "\\"); gsub(/\\&/, ""); print > f }
    ' "$page"
    for ex in "$tmp"/ex-*.c; do
        [ -f "$ex" ] || continue
        grep -q '^#include' "$ex" || continue
        what="$name, EXAMPLES block ${ex##*/ex-}"
        what=${what%.c}
        cuda=
        if grep -q '^#include <cuda\.h>' "$ex"; then
            if [ -z "$have_cuda_h" ]; then
                echo "skipped: $what (needs cuda.h; a build with CUDA compiles it)"
                n_skipped=$((n_skipped + 1))
                continue
            fi
            cuda=${CUDA_CPPFLAGS:-}
        fi
        if grep -q '^main(' "$ex"; then
            # shellcheck disable=SC2086
            if ! cc_prog $cuda -o "$tmp/prog" "$ex" >"$tmp/cc.log" 2>&1; then
                cat "$tmp/cc.log"; fail "$what does not compile"; continue
            fi
            "$tmp/prog" >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; fail "$what exits with $?"; }
            n_run=$((n_run + 1))
        else
            # shellcheck disable=SC2086
            if ! cc_obj $cuda -c -o "$tmp/frag.o" "$ex" >"$tmp/cc.log" 2>&1; then
                cat "$tmp/cc.log"; fail "$what does not compile"; continue
            fi
            n_built=$((n_built + 1))
        fi
    done
done

echo "$n_run programs run, $n_built fragments compiled, $n_skipped skipped"
[ $status -eq 0 ] && echo "PASS: examples"
exit $status
