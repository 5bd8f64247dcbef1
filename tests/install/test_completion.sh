#!/usr/bin/env bash
# test_completion.sh SBX SOURCE_DIR - the bash and zsh completion (completion/)
# offer the right words for a few prefixes: commands, subcommands, options,
# fixed values, instance names from the configuration, task ids from 'sbx task list'.
set -euo pipefail
sbx=$1 src=$2
tmp=$(mktemp -d /tmp/sbx-completion-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
unset SBX_CONFIG
# a configuration with an instance of its own, and a state dir with one live task
cat >"$tmp/sbx.conf" <<CONF
state_dir = "$tmp/state";
providers = { ci-docker = { plugin = "provider_docker"; }; };
CONF
mkdir -p "$tmp/state/tasks/t-0123456789ab"
echo '{"task": "t-0123456789ab", "state": "running", "pool": "agent", "provider": "docker"}' \
    >"$tmp/state/tasks/t-0123456789ab/task.json"
mkdir -p "$tmp/state/tasks/t-0123456789ab/runner" # its keeper's runner (issue 31)
: >"$tmp/state/tasks/t-0123456789ab/runner/runner.sock"
"$sbx" --config "$tmp/sbx.conf" task list | grep t-0123456789ab >/dev/null || { echo "FAIL: task list" >&2; exit 1; }

# CASES: "WORDS (the last one is being completed)|expected words, sorted"
cases=(
    "ta|task"
    "task |allow deny end files fork list pause resume snapshot start"
    "snapshot |ls rm"
    "task end t-|t-0123456789ab"
    "task pause t-|t-0123456789ab"
    "exec |t-0123456789ab"
    "port |t-0123456789ab"
    "exec t-0123456789ab --|--env --help --json --keep --tty"
    "attach |t-0123456789ab"
    "run --pro|--provider"
    "run --provider ci|ci-docker"
    "run --provider |ci-docker daytona docker e2b host opensandbox"
    "run --credentials |agentvault infisical"
    "run --pool |agent ci"
    "submit --class |heavy light"
    "agents |setup"
    "agents setup --cl|--client"
    "policy |check eval test"
    "help ru|run"
    "--log-l|--log-level"
    "--log-level |debug error info warn"
    "config |check keys"
    "config check --j|--json"
    "job x --f|--follow"
)
fails=0
check() { # SHELL CASE GOT
    local want=${2#*|} got
    got=$(echo "$3" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//')
    if [ "$got" != "$want" ]; then
        echo "FAIL ($1): sbx ${2%%|*}<TAB>: got '$got', want '$want'" >&2
        fails=$((fails + 1))
    fi
}
for c in "${cases[@]}"; do
    line=${c%%|*}
    read -r -a words <<<"$line"
    [ "${line: -1}" = " " ] && words+=("")
    got=$(bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _sbx
                   printf "%s " "${COMPREPLY[@]}"' \
        _ "$src/completion/sbx.bash" "$sbx" --config "$tmp/sbx.conf" "${words[@]}" || true)
    check bash "$c" "$got"
    # zsh: the completion function with compadd standing in for the completion system
    got=$(zsh -f -c 'compadd() { while [[ $1 == -* ]]; do [[ $1 == -- ]] && { shift; break; }; shift; done
                     local w; for w in "$@"; do [[ $w == ${words[CURRENT]}* ]] && print -r -- $w; done; }
                     _files() { }; _command_names() { }
                     source <(sed "\$d" "$1"); shift; words=("$@"); CURRENT=$#; _sbx' \
        _ "$src/completion/_sbx" "$sbx" --config "$tmp/sbx.conf" "${words[@]}" || true)
    check zsh "$c" "$got"
done
[ "$fails" = 0 ] || exit 1
echo "ok: ${#cases[@]} prefixes in bash and zsh"
