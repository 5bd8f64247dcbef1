#!/usr/bin/env bash
# check-format.sh - every tracked C file matches .clang-format (clang-format 14,
# Debian 12's). Prints the files that differ and exits 1; `--fix` formats them.
# scripts/test.sh runs it first, so CI fails on an unformatted file.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
-h | --help)
    echo "usage: scripts/check-format.sh [--fix]"
    echo "Checks every tracked .c/.h file against .clang-format; --fix rewrites those that differ."
    exit 0
    ;;
esac
command -v clang-format >/dev/null || {
    echo "check-format.sh: clang-format not found (apt-get install clang-format)" >&2
    exit 2
}
bad=()
while IFS= read -r f; do
    clang-format --style=file "$f" | cmp -s - "$f" || bad+=("$f")
done < <(git ls-files '*.c' '*.h')
if [ ${#bad[@]} -eq 0 ]; then
    echo "check-format.sh: all files match .clang-format" >&2
    exit 0
fi
if [ "${1:-}" = "--fix" ]; then
    clang-format -i --style=file "${bad[@]}"
    echo "check-format.sh: formatted ${#bad[@]} files" >&2
    exit 0
fi
printf 'check-format.sh: differs from .clang-format: %s\n' "${bad[@]}" >&2
echo "check-format.sh: ${#bad[@]} files differ (scripts/check-format.sh --fix)" >&2
exit 1
