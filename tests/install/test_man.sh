#!/usr/bin/env bash
# test_man.sh SBX MANDIR - a man page for sbx and for every command of
# 'sbx --help'; each renders with 'man -l' without warnings, is named
# sbx-COMMAND, and holds every option its command's --help lists.
set -euo pipefail
sbx=$1 dir=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
cmds=$("$sbx" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' | grep -vx help)
[ -n "$cmds" ] || fail "no commands in sbx --help"
n=0
for c in "" $cmds; do
    page=$dir/sbx${c:+-$c}.1
    [ -s "$page" ] || fail "no man page $page"
    err=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || fail "man -l $page failed"
    [ -z "$err" ] || fail "man -l $page: $err"
    text=$(MANWIDTH=200 MAN_KEEP_FORMATTING=0 man -l "$page" 2>/dev/null | col -b)
    # here-strings, not 'echo | grep -q': grep -q exits at its first match and
    # echo's SIGPIPE then fails the pipeline under pipefail (seen under load)
    grep -qE "^ +sbx${c:+-$c} - " <<<"$text" || fail "$page: NAME is not sbx${c:+-$c}"
    # every long option of the command's --help is in its page
    for o in $("$sbx" ${c:+"$c"} --help | grep -oE -- '(^|[[ ])--[a-z][a-z-]*' | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
        grep -qF -- "$o" <<<"$text" || fail "$page lacks $o of 'sbx $c --help'"
    done
    n=$((n + 1))
done
echo "ok: $n man pages render and match --help"
