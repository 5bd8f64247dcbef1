#!/usr/bin/env bash
# pg_harness.sh - a private PostgreSQL 15 cluster for one test run.
#
#   pg_harness.sh exec CMD [ARG...]
#
# Makes a cluster in a fresh temporary directory (initdb as the unprivileged
# user `nobody` when run as root: PostgreSQL refuses root), listening on a unix
# socket in that directory only (listen_addresses = ''), with one superuser
# `sbx` whose random password is checked (scram-sha-256). Runs CMD with
#   SBX_TEST_PG_DSN        postgresql://sbx@/sbx?host=DIR  (no password in it)
#   SBX_TEST_PG_PASSWORD   the password; its NAME goes in runner.database_password_env
#   SBX_TEST_PG_DIR        the cluster (for tests that stop and start it)
#   SBX_TEST_PG_CTL        a command: `$SBX_TEST_PG_CTL stop|start|restart`
# then stops the cluster and removes the directory, whatever CMD did, and
# exits with CMD's status. PG_BINDIR overrides /usr/lib/postgresql/15/bin.
set -euo pipefail

bindir=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
self=$(readlink -f "$0")

die() {
    echo "pg_harness: $*" >&2
    exit 2
}

# Runs a server binary as the cluster's owner.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
    else
        "$@"
    fi
}

ctl() {
    local dir=$1 what=$2
    case "$what" in
    start)
        as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null
        ;;
    stop)
        as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
        ;;
    restart)
        as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -m fast -w -t 60 restart >/dev/null
        ;;
    *) die "ctl: unknown action '$what'" ;;
    esac
}

case "${1:-}" in
exec)
    shift
    [ $# -gt 0 ] || die "usage: pg_harness.sh exec CMD [ARG...]"
    ;;
ctl)
    ctl "$2" "$3"
    exit 0
    ;;
*)
    die "usage: pg_harness.sh exec CMD [ARG...]"
    ;;
esac

[ -x "$bindir/initdb" ] || die "no PostgreSQL 15 server in $bindir (Debian package postgresql-15)"

dir=$(mktemp -d /tmp/sbx-pg.XXXXXX)
chmod 0700 "$dir"
if [ "$(id -u)" = 0 ]; then
    chown nobody:nogroup "$dir"
fi
cleanup() {
    if [ -f "$dir/data/postmaster.pid" ]; then
        ctl "$dir" stop || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
printf '%s\n' "$password" >"$dir/pw"
[ "$(id -u)" != 0 ] || chown nobody:nogroup "$dir/pw"
as_owner "$bindir/initdb" -D "$dir/data" -U sbx --pwfile="$dir/pw" \
    --auth-local=scram-sha-256 --auth-host=reject -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
    {
        cat "$dir/initdb.log" >&2
        die "initdb failed"
    }
rm -f "$dir/pw"
cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$dir'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
EOF
ctl "$dir" start || {
    cat "$dir/log" >&2
    die "the server did not start"
}
export SBX_TEST_PG_PASSWORD=$password
PGPASSWORD=$password "$bindir/psql" -q -X -h "$dir" -U sbx -d postgres \
    -c 'CREATE DATABASE sbx' >/dev/null
export SBX_TEST_PG_DSN="postgresql://sbx@/sbx?host=$dir"
export SBX_TEST_PG_DIR=$dir
export SBX_TEST_PG_CTL="$self ctl $dir"
set +e
"$@"
rc=$?
set -e
exit $rc
