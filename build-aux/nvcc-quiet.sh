#!/bin/sh
# nvcc-quiet.sh - run nvcc, keeping ptxas's C7519 notes out of the build log
# unless the build is verbose.
# SPDX-License-Identifier: MIT
#
# Usage: nvcc-quiet.sh VERBOSE NVCC [ARG...]
#
# For every wgmma whose registers it has to fence, ptxas prints
# "ptxas info : (C7519) warpgroup.arrive is injected ..." (18 lines for
# the sm_90a kernels).  No ptxas or nvcc option turns these off: not -w,
# and -warn-spills does not cause them.  With VERBOSE 0 they are dropped
# and every other line (warnings, spills, errors) is kept; with VERBOSE 1
# (make V=1, configure --disable-silent-rules) nothing is dropped.  The
# exit status is nvcc's.

if [ "$#" -lt 2 ]; then
    echo "usage: $0 VERBOSE NVCC [ARG...]" >&2
    exit 2
fi
verbose=$1
shift
log=$(mktemp) || exit 1
"$@" 2>"$log"
rc=$?
if [ "$verbose" = 1 ]; then
    cat "$log" >&2
else
    grep -v '^ptxas info *: (C7519) ' "$log" >&2
fi
rm -f "$log"
exit $rc
