#!/usr/bin/env bash
# code-stats.sh: the size figures of issue 31, item 6, for the tree it runs in.
# Lines of core/src/runner and core/src/sandbox, functions over 100 lines,
# the widest-included runner header, and where a record's state is assigned.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: scripts/code-stats.sh [--json] [--list]

Prints, for the source tree the script lives in:
  lines          lines of core/src/runner and core/src/sandbox (.c and .h)
  long functions functions of core/ over 100 lines (--list names them)
  runner_int.h   its lines and how many runner files include it (0 and 0:
                 gone, split into module headers)
  headers        the runner header included by the most runner .c files and
                 the largest runner header: lines, includers; (added) the
                 runner headers included by more than half of the runner's
                 .c files (issue 31: none)
  state writes   a job's or task's state assigned in core/src/runner outside
                 the move functions (jobstate.c), and in core/src/mcp (the
                 MCP server's own job table until issue 31: 0 since)

Needs universal-ctags (Debian: apt-get install universal-ctags) for the
function lengths. Compare two commits by running it in two checkouts.

  --json   one JSON object on stdout
  --list   also list each function over 100 lines (file:line name length)
  --help   this text
EOF
}

json=0
list=0
for a in "$@"; do
	case "$a" in
	--json) json=1 ;;
	--list) list=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		echo "code-stats.sh: unknown argument '$a' (see --help)" >&2
		exit 2
		;;
	esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v ctags >/dev/null || {
	echo "code-stats.sh: ctags not found (apt-get install universal-ctags)" >&2
	exit 1
}

count_lines() { find "$1" -name '*.[ch]' -print0 | xargs -0 cat | wc -l; }
runner_lines=$(count_lines core/src/runner)
sandbox_lines=$(count_lines core/src/sandbox)

# Function lengths from ctags' line/end fields.
long=$(find core -name '*.c' -print0 | xargs -0 ctags --fields=+ne --c-kinds=f -o - 2>/dev/null |
	awk -F'\t' '{
		s = ""; e = "";
		for (i = 4; i <= NF; i++) {
			if ($i ~ /^line:/) s = substr($i, 6);
			if ($i ~ /^end:/) e = substr($i, 5);
		}
		if (s != "" && e != "" && e - s + 1 > 100)
			printf "%s:%s %s %d\n", $2, s, $1, e - s + 1;
	}' | sort)
long_n=$(printf '%s' "$long" | grep -c . || true)

int_h=core/src/runner/runner_int.h
if [ -f "$int_h" ]; then
	int_lines=$(wc -l <"$int_h")
	int_users=$(grep -l -E "#include \"(runner/)?runner_int.h\"" core/src/runner/*.c | wc -l || true)
else
	int_lines=0
	int_users=0
fi
runner_c=$(find core/src/runner -name '*.c' | wc -l)
# Each runner header: lines and how many runner .c files include it; the
# widest-included one and the largest one.
hdr_stats=$(for h in core/src/runner/*.h; do
	b=$(basename "$h")
	n=$(grep -l -E "#include \"(runner/)?$b\"" core/src/runner/*.c | wc -l || true)
	printf '%s %d %d\n' "$b" "$(wc -l <"$h")" "$n"
done)
read -r wide_h wide_lines wide_users < <(printf '%s\n' "$hdr_stats" | sort -k3,3nr -k2,2nr | head -1)
read -r big_h big_lines big_users < <(printf '%s\n' "$hdr_stats" | sort -k2,2nr -k3,3nr | head -1)
over_half=$(printf '%s\n' "$hdr_stats" | awk -v n="$runner_c" '$3 * 2 > n { printf "%s%s", sep, $1; sep = "," }')
# Records' states (jobs, tasks) assigned outside the move functions
# (runner/jobstate.c), as tests/unit/check_state_moves.sh counts them, and
# those in core/src/mcp (the MCP server's own job table, mcp/backend_embedded.c,
# until issue 31 removed it: the MCP tools use the runner's records).
assign='->state[[:space:]]*=([^=]|$)'
state_writes=$(grep -nE -- "$assign" core/src/runner/*.c core/src/runner/*.h |
	grep -v '^core/src/runner/jobstate\.c:' | grep -vE 'api_list\.c:[0-9]+:[[:space:]]*f->state = ' |
	wc -l || true)
mcp_writes=$(cat core/src/mcp/*.c | grep -cE -- "$assign" || true)
if [ "$json" = 1 ]; then
	printf '{"runner_lines":%d,"sandbox_lines":%d,"functions_over_100":%d,' \
		"$runner_lines" "$sandbox_lines" "$long_n"
	printf '"runner_int_h_lines":%d,"runner_int_h_includers":%d,"runner_c_files":%d,' \
		"$int_lines" "$int_users" "$runner_c"
	printf '"widest_header":"%s","widest_header_lines":%d,"widest_header_includers":%d,' \
		"$wide_h" "$wide_lines" "$wide_users"
	printf '"largest_header":"%s","largest_header_lines":%d,"largest_header_includers":%d,' \
		"$big_h" "$big_lines" "$big_users"
	printf '"headers_over_half":"%s",' "$over_half"
	printf '"state_assignments":%d,"mcp_state_assignments":%d}\n' "$state_writes" "${mcp_writes:-0}"
else
	printf 'lines          core/src/runner %d, core/src/sandbox %d\n' "$runner_lines" "$sandbox_lines"
	printf 'long functions %d over 100 lines in core/\n' "$long_n"
	if [ -f "$int_h" ]; then
		printf 'runner_int.h   %d lines, included by %d of %d runner .c files\n' \
			"$int_lines" "$int_users" "$runner_c"
	else
		printf 'runner_int.h   gone (split into module headers)\n'
	fi
	printf 'widest header  %s, %d lines, included by %d of %d runner .c files\n' \
		"$wide_h" "$wide_lines" "$wide_users" "$runner_c"
	printf 'largest header %s, %d lines, included by %d of %d runner .c files\n' \
		"$big_h" "$big_lines" "$big_users" "$runner_c"
	printf 'over half      %s\n' "${over_half:-none} (runner headers included by more than half of the runner .c files)"
	printf 'state writes   %d in core/src/runner outside the move functions; %d in core/src/mcp (the MCP server'"'"'s own job table)\n' \
		"$state_writes" "${mcp_writes:-0}"
fi
if [ "$list" = 1 ] && [ -n "$long" ]; then
	printf '%s\n' "$long" >&2
fi
