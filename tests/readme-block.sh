#!/bin/sh
# readme-block.sh - print a fenced block of the README, so that tests and CI
# run what the README says, as it says it.
# SPDX-License-Identifier: MIT
#
# Usage: readme-block.sh README SECTION LANG N
#        readme-block.sh README SECTION LANG count
#
# Prints the Nth (from 1) block fenced as ```LANG in the "## SECTION..."
# part of README (up to the next "## " heading), without its fences, or
# with "count" the number of such blocks.  Exit status 1 when there is no
# such section or block.

if [ "$#" -ne 4 ]; then
    echo "usage: $0 README SECTION LANG N|count" >&2
    exit 2
fi
awk -v sect="## $2" -v lang="$3" -v want="$4" '
    inblock && /^```[[:space:]]*$/ { inblock = 0; next }
    inblock { if (mine && n == want) { print; found = 1 } next }
    /^```/ { inblock = 1; mine = insect && $0 == "```" lang; n += mine; next }
    /^## / { insect = index($0, sect) == 1 }
    END {
        if (want == "count") { print n + 0; exit 0 }
        exit !found
    }' "$1"
