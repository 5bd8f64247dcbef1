#!/usr/bin/env bash
# gen-man.sh SBX OUTDIR VERSION - writes the man pages sbx.1 and sbx-COMMAND.1
# (one per command in 'sbx --help') into OUTDIR with help2man, from the
# binary's own --help, so the pages say what --help says. Run by the build.
set -euo pipefail
sbx=$1 out=$2 version=$3
command -v help2man >/dev/null || { echo "gen-man.sh: help2man is not installed" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# help2man reads a SYNOPSIS from "Usage:" lines: sbx prints "usage:"
# (and "or:" starting each further form)
printf '#!/bin/sh\n"%s" "$@" | sed -e "1s/^usage:/Usage:/" -e "2,/^\$/s/^       sbx /  or: sbx /"\n' \
    "$sbx" >"$tmp/sbx"
chmod 755 "$tmp/sbx"
# "  NAME  summary" lines of the Commands: section
"$sbx" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)  *\(.*\)$/\1 \2/p' >"$tmp/commands"
[ -s "$tmp/commands" ] || { echo "gen-man.sh: no commands in '$sbx --help'" >&2; exit 1; }
see_also=".BR sbx (1)"
while read -r name _; do
    [ "$name" = help ] && continue
    see_also="$see_also,
.BR sbx-$name (1)"
done <"$tmp/commands"
docs="The documentation in
.I share/doc/sbx
under the install prefix (README.md, operations.md, architecture.md, ...)."

page() { # NAME SUMMARY PROGRAM...: OUT/NAME.1
    local name=$1 summary=$2
    shift 2
    printf '[SEE ALSO]\n%s\n.PP\n%s\n' "$see_also" "$docs" >"$tmp/include"
    help2man --no-info --no-discard-stderr --version-string="$version" --name="$summary" \
        --section=1 --source="sbx $version" --include="$tmp/include" "$*" >"$tmp/page"
    # the title and NAME of a command's page are sbx-COMMAND (as git-commit(1))
    local title
    title=$(echo "$name" | tr '[:lower:]' '[:upper:]')
    sed -e "s/^\.TH SBX /.TH $title /" -e "s/^sbx $(echo "${name#sbx-}") \\\\- /$name \\\\- /" \
        "$tmp/page" >"$out/$name.1"
}
page sbx "runs each task in its own fresh, limited, egress-filtered sandbox" "$tmp/sbx"
while read -r name summary; do
    [ "$name" = help ] && continue
    page "sbx-$name" "$summary" "$tmp/sbx" "$name"
done <"$tmp/commands"
