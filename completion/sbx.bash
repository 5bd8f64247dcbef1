# bash completion for sbx (installed as share/bash-completion/completions/sbx).
# The words come from sbx itself, so they stay true to it: commands and global
# options from 'sbx --help', a command's subcommands and options from
# 'sbx COMMAND --help', instance names from 'sbx config check --json', task
# ids from 'sbx task list'.

# _sbx_words SBX [--config FILE] WHAT [ARG]: prints candidate words, one a line.
_sbx_words()
{
    local sbx=$1 what=$2 cmd=$3
    local -a cfg=()
    [ -n "${_sbx_config:-}" ] && cfg=(--config "$_sbx_config")
    case $what in
    commands)
        "$sbx" --help 2>/dev/null | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' ;;
    globals)
        "$sbx" --help 2>/dev/null | sed -n '/^Global options:/,/^$/p' |
            grep -oE -- '(^| )--?[a-z][a-z-]*' | tr -d ' ' ;;
    subcommands)
        "$sbx" "$cmd" --help 2>/dev/null |
            sed -n "s/^\(usage:\)\{0,1\} *sbx $cmd \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\2/p" | sort -u ;;
    options)
        "$sbx" "$cmd" --help 2>/dev/null | grep -oE -- '(^|[[ ])--[a-z][a-z-]*' |
            grep -oE -- '--[a-z][a-z-]*' | sort -u ;;
    provider | credential)
        "$sbx" "${cfg[@]}" config check --json 2>/dev/null | awk -v kind="$what" -F'"' '
            $2 == "name" { name = $4 } $2 == "kind" && $4 == kind { print name }' ;;
    tasks)
        "$sbx" "${cfg[@]}" task list 2>/dev/null | awk 'NR > 1 { print $1 }' ;;
    esac
}

_sbx()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local sbx=${COMP_WORDS[0]} cmd="" sub="" i w words="" dashdash=0
    local _sbx_config=""
    COMPREPLY=()
    # the command, its subcommand, --config, and whether "--" came before the cursor
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [ "$w" = -- ]; then dashdash=1; break; fi
        case ${COMP_WORDS[i-1]} in
        --config) _sbx_config=$w; continue ;;
        --log-level | --log-format) continue ;;
        esac
        case $w in
        -*) ;;
        *) if [ -z "$cmd" ]; then cmd=$w; elif [ -z "$sub" ]; then sub=$w; fi ;;
        esac
    done
    if [ $dashdash = 1 ]; then # the sandbox's command: a program name, then files
        if [ "${COMP_WORDS[COMP_CWORD-1]}" = -- ]; then
            mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
        else
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        fi
        return 0
    fi
    case $prev in
    --provider) words=$(_sbx_words "$sbx" provider) ;;
    --credentials) words=$(_sbx_words "$sbx" credential) ;;
    --task) words=$(_sbx_words "$sbx" tasks) ;;
    --pool) words="ci agent" ;;
    --class) words="light heavy" ;;
    --client) words="claude-code opencode all" ;;
    --log-level) words="error warn info debug" ;;
    --log-format) words="text json" ;;
    --worktree | --project | --cache | --dir)
        mapfile -t COMPREPLY < <(compgen -d -- "$cur"); return 0 ;;
    --config | --definition | --job | --out | --label | --env | --runs | --command)
        mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return 0 ;;
    *)
        if [ -z "$cmd" ]; then
            case $cur in
            -*) words=$(_sbx_words "$sbx" globals) ;;
            *) words=$(_sbx_words "$sbx" commands) ;;
            esac
        else
            case $cur in
            -*) words="$(_sbx_words "$sbx" options "$cmd") --help" ;;
            *)
                local subs
                subs=$(_sbx_words "$sbx" subcommands "$cmd")
                if [ -n "$subs" ] && [ -z "$sub" ]; then
                    words=$subs
                elif { [ "$cmd" = exec ] || [ "$cmd" = port ] || [ "$cmd" = attach ]; } && [ -z "$sub" ]; then
                    words=$(_sbx_words "$sbx" tasks)
                elif [ "$cmd" = task ] && case $sub in end|files|pause|resume) true ;; *) false ;; esac; then
                    words=$(_sbx_words "$sbx" tasks)
                elif [ "$cmd" = help ] && [ -z "$sub" ]; then
                    words=$(_sbx_words "$sbx" commands)
                else
                    mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return 0
                fi ;;
            esac
        fi ;;
    esac
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
    return 0
}
complete -F _sbx sbx
