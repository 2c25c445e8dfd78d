#!/bin/sh
# nvcc-quiet.sh - the build's kernel rule prints no ptxas info lines unless
# asked: a fatbin of kernels/sm90/hopper.cu (the sm_90a kernels, for which ptxas
# reports each warpgroup.arrive it injects) is built with the Makefile's own
# rule, once quiet and once with V=1.  Skips in builds without CUDA.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}

if [ "${MLA_HAVE_CUDA:-no}" != yes ]; then
    echo "SKIP: built without CUDA"
    exit 77
fi

dir=tests/nvcc-quiet.d
# The suffix rule .cu.fatbin builds any X.fatbin from X.cu with the
# kernels' include path, so a one-line sm90.cu stands for hopper.cu.
srcdir_abs=$(cd "${top_srcdir:-.}" && pwd) || exit 1
cd "$top_builddir" || exit 1
rm -rf "$dir"
mkdir -p "$dir" || exit 1
trap 'rm -rf "$top_builddir/$dir"' EXIT
echo "#include \"$srcdir_abs/kernels/sm90/hopper.cu\"" >"$dir/sm90.cu"
unset MAKEFLAGS MFLAGS

${MAKE:-make} --no-print-directory V=0 "$dir/sm90.fatbin" >"$dir/quiet.log" 2>&1 || {
    cat "$dir/quiet.log"; echo "FAIL: the quiet build failed"; exit 1; }
rm -f "$dir/sm90.fatbin"
${MAKE:-make} --no-print-directory V=1 "$dir/sm90.fatbin" >"$dir/verbose.log" 2>&1 || {
    cat "$dir/verbose.log"; echo "FAIL: the V=1 build failed"; exit 1; }

status=0
if grep -q '^ptxas info' "$dir/quiet.log"; then
    grep '^ptxas info' "$dir/quiet.log" | head -n 3
    echo "FAIL: the quiet build prints $(grep -c '^ptxas info' "$dir/quiet.log") ptxas info lines"
    status=1
fi
n=$(grep -c '^ptxas info *: (C7519)' "$dir/verbose.log")
echo "quiet build: $(wc -l <"$dir/quiet.log") lines; V=1: $n C7519 lines"
[ $status -eq 0 ] && echo "PASS: no ptxas info lines unless V=1"
exit $status
