#!/bin/sh
# man-sections.sh - what mandoc's lint does not check in the manual pages:
#  - the page footer names libmla and its version (.Os), and groff titles
#    the page without "BSD" (groff 1.22 does unless doc-volume-operating-
#    system is emptied before .Dt);
#  - RETURN VALUES and ERRORS name the same failure codes, each a real
#    mla_status_t;
#  - SEE ALSO lists every page the text refers to, libmla(3) and libmla(3)
#    every page, the create/destroy and set/get partners each other, and no
#    page that does not exist.
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
header=$top_srcdir/include/mla.h
status=0
fail() { echo "FAIL: $*"; status=1; }

[ -n "${PACKAGE_VERSION:-}" ] || { echo "FAIL: PACKAGE_VERSION is not set"; exit 1; }
set -- "$top_srcdir"/man/*.[1-9]
[ -e "$1" ] || { echo "FAIL: no manual pages under $top_srcdir/man"; exit 1; }
codes=$(sed -n 's/^[[:space:]]*\(MLA_STATUS_[A-Z_]*\)[[:space:]]*=.*/\1/p' "$header")
[ -n "$codes" ] || { echo "FAIL: no MLA_STATUS_ codes in $header"; exit 1; }

# Names of the pages, as "name(section)".
pages=$(for p in "$@"; do b=${p##*/}; echo "${b%.*}(${b##*.})"; done)

# section PAGE NAME: the lines of section NAME.
section() { awk -v s="$2" '/^\.Sh /{on = ($0 == ".Sh " s); next} on' "$1"; }
# xrefs: "name(section)" of each .Xr line on standard input, sorted.
xrefs() { sed -n 's/^\.Xr \([^ ]*\) \([0-9]\).*/\1(\2)/p' | LC_ALL=C sort -u; }

for p in "$@"; do
    b=${p##*/}
    self="${b%.*}(${b##*.})"

    # Footer and title.
    grep -qx "\.Os libmla $PACKAGE_VERSION" "$p" ||
        fail "$b: want \".Os libmla $PACKAGE_VERSION\" (for a new version: sed -i 's/^\.Os .*/.Os libmla VERSION/' man/*)"
    awk '/^\.ds doc-volume-operating-system$/{ds = 1} /^\.Dt /{exit !ds} END{}' "$p" ||
        fail "$b: \".ds doc-volume-operating-system\" (empty) must come before .Dt"

    # RETURN VALUES and ERRORS.
    rv=$(section "$p" "RETURN VALUES" | sed -n 's/^\.It Dv \(MLA_STATUS_[A-Z_]*\).*/\1/p' |
        grep -vx MLA_STATUS_SUCCESS | LC_ALL=C sort -u)
    er=$(section "$p" "ERRORS" | sed -n 's/^\.It Bq Dv \(MLA_STATUS_[A-Z_]*\).*/\1/p' | LC_ALL=C sort -u)
    for c in $rv $er; do
        printf '%s\n' "$codes" | grep -qx "$c" || fail "$b: $c is not a status code of mla.h"
    done
    if grep -q '^\.Sh ERRORS' "$p"; then
        [ -n "$er" ] || fail "$b: ERRORS names no status code"
        for c in $rv; do
            printf '%s\n' "$er" | grep -qx "$c" || fail "$b: $c is in RETURN VALUES but not in ERRORS"
        done
        for c in $er; do
            printf '%s\n' "$rv" | grep -qx "$c" || fail "$b: $c is in ERRORS but not in RETURN VALUES"
        done
    fi

    # SEE ALSO.
    if ! grep -q '^\.Sh SEE ALSO' "$p"; then
        fail "$b: no SEE ALSO"
        continue
    fi
    see=$(section "$p" "SEE ALSO" | xrefs)
    body=$(awk '/^\.Sh /{skip = ($0 == ".Sh SEE ALSO")} !skip' "$p" | xrefs)
    for x in $body; do
        [ "$x" = "$self" ] && continue
        printf '%s\n' "$see" | grep -qxF "$x" || fail "$b: refers to $x, which SEE ALSO lacks"
    done
    for x in $see; do
        case $x in
        mla*|libmla*) printf '%s\n' "$pages" | grep -qxF "$x" || fail "$b: SEE ALSO names $x, which has no page" ;;
        esac
    done
    if [ "$self" = "libmla(3)" ]; then
        for x in $pages; do
            [ "$x" = "$self" ] && continue
            printf '%s\n' "$see" | grep -qxF "$x" || fail "$b: SEE ALSO lacks $x"
        done
    else
        printf '%s\n' "$see" | grep -qxF "libmla(3)" || fail "$b: SEE ALSO lacks libmla(3)"
    fi
    case $self in
    *_create\(3\)) partner=$(echo "$self" | sed 's/_create(/_destroy(/') ;;
    *_destroy\(3\)) partner=$(echo "$self" | sed 's/_destroy(/_create(/') ;;
    *_set_*) partner=$(echo "$self" | sed 's/_set_/_get_/') ;;
    *_get_*) partner=$(echo "$self" | sed 's/_get_/_set_/') ;;
    *) partner= ;;
    esac
    if [ -n "$partner" ] && printf '%s\n' "$pages" | grep -qxF "$partner"; then
        printf '%s\n' "$see" | grep -qxF "$partner" || fail "$b: SEE ALSO lacks its partner $partner"
    fi
done

# How man(1) shows them: man-db formats mdoc with groff.
if command -v groff >/dev/null 2>&1; then
    for p in "$@"; do
        out=$(groff -mandoc -Tutf8 "$p" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/.\x08//g')
        first=$(printf '%s\n' "$out" | sed -n 1p)
        last=$(printf '%s\n' "$out" | sed -n '$p')
        case $first in *BSD*) fail "${p##*/}: groff titles it \"$first\"" ;; esac
        case $last in *"libmla $PACKAGE_VERSION"*) ;; *) fail "${p##*/}: groff footer \"$last\"" ;; esac
    done
else
    echo "note: groff not found; rendering not checked"
fi

[ $status -eq 0 ] && echo "PASS: $# pages: footers, RETURN VALUES against ERRORS, SEE ALSO"
exit $status
