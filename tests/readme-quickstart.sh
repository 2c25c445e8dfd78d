#!/bin/sh
# readme-quickstart.sh - the README's quick start is two one-line commands,
# and the first works as written both for root on a machine without sudo
# and for a user with sudo: it runs with stand-ins for sudo, apt-get and
# the build steps that log who ran them, under sh and under bash.  (CI runs
# both commands for real, as whichever of the two it is.)
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
readme=$top_srcdir/README.md
block=$top_srcdir/tests/readme-block.sh
status=0
fail() { echo "FAIL: $*"; status=1; }

n=$(sh "$block" "$readme" "Quick start" sh count)
[ "$n" = 2 ] || { echo "FAIL: the README's quick start has $n commands, not 2"; exit 1; }
cmd1=$(sh "$block" "$readme" "Quick start" sh 1)
cmd2=$(sh "$block" "$readme" "Quick start" sh 2)
for c in "$cmd1" "$cmd2"; do
    [ "$(printf '%s\n' "$c" | wc -l)" -eq 1 ] || fail "not one line: $c"
done
printf 'command 1: %s\ncommand 2: %s\n' "$cmd1" "$cmd2"

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# stub NAME BODY: a program NAME in $tmp/bin that logs "root NAME ARGS" or
# "user NAME ARGS" (by FAKE_UID) to $LOG, then runs BODY.
# shellcheck disable=SC2016
stub() {
    printf '#!/bin/sh\nwho=user; [ "$FAKE_UID" = 0 ] && who=root\necho "$who ${0##*/} $*" >>"$LOG"\n%s\n' \
        "$2" >"$tmp/bin/$1"
    chmod +x "$tmp/bin/$1"
}

# run SHELL VARIANT: run command 1, then command 2, as root without sudo
# (VARIANT root) or as a user with sudo (VARIANT sudo); the log in $LOG.
run() {
    rm -rf "${tmp:?}/bin" "${tmp:?}/src"
    mkdir -p "$tmp/bin" "$tmp/src/tools"
    for p in sh nproc; do
        ln -s "$(command -v "$p")" "$tmp/bin/$p" || return 1
    done
    # apt-get needs root, and its lists before it installs.
    # shellcheck disable=SC2016
    stub apt-get '[ "$FAKE_UID" = 0 ] || { echo "apt-get: permission denied" >&2; exit 100; }
case $1 in
update) : >"$APT_LISTS" ;;
install) [ -f "$APT_LISTS" ] || { echo "apt-get: no package lists" >&2; exit 100; } ;;
esac'
    stub autoreconf ''
    stub make ''
    if [ "$2" = sudo ]; then
        # shellcheck disable=SC2016
        stub sudo 'FAKE_UID=0 exec "$@"'
        uid=1000
    else
        uid=0
    fi
    # ./configure and ./tools/mla-demo only log.
    stub configure ''
    mv "$tmp/bin/configure" "$tmp/src/configure"
    stub mla-demo ''
    mv "$tmp/bin/mla-demo" "$tmp/src/tools/mla-demo"
    LOG=$tmp/log
    : >"$LOG"
    (cd "$tmp/src" && env -i PATH="$tmp/bin" LOG="$LOG" APT_LISTS="$tmp/lists" FAKE_UID=$uid \
        "$1" -c "$cmd1" && env -i PATH="$tmp/bin" LOG="$LOG" FAKE_UID=$uid "$1" -c "$cmd2")
}

for shell in sh bash; do
    sh_path=$(command -v "$shell") || { echo "no $shell: skipped"; continue; }
    for variant in root sudo; do
        rm -f "$tmp/lists"
        what="$shell, $variant"
        run "$sh_path" "$variant" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "$what: the commands failed"; }
        log=$(cat "$tmp/log")
        printf '%s:\n%s\n' "$what" "$(printf '%s\n' "$log" | sed 's/^/    /')"
        # Who ran what, in order, without the arguments.
        steps=$(printf '%s\n' "$log" | awk '{ s = $1 " " $2; if ($2 == "apt-get") s = s " " $3; print s }' |
            grep -v '^user sudo$' | tr '\n' ';')
        if [ "$variant" = root ]; then
            want="root apt-get update;root apt-get install;root autoreconf;root configure;root make;root mla-demo;root make;"
        else
            want="root apt-get update;root apt-get install;user autoreconf;user configure;user make;user mla-demo;user make;"
        fi
        [ "$steps" = "$want" ] || fail "$what: ran $steps; want $want"
        printf '%s\n' "$log" | grep -q ' apt-get install .*-y' || fail "$what: apt-get install without -y"
        printf '%s\n' "$log" | grep -qx '[a-z]* make check' || fail "$what: command 2 is not make check"
    done
done

[ $status -eq 0 ] && echo "PASS: the quick start works as root and with sudo"
exit $status
