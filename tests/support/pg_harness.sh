#!/usr/bin/env bash
# pg_harness.sh - PostgreSQL 15 for the tests (docs/testing.md): one cluster
# per test run, one database per test.
#
#   pg_harness.sh start DIR            the run's cluster in DIR (the ctest fixture pg_cluster)
#   pg_harness.sh stop DIR             stops it and removes DIR
#   pg_harness.sh exec CMD [ARG...]    CMD with a database of its own
#   pg_harness.sh exec --private CMD   CMD with a cluster of its own (for the
#                                      tests that stop or restart the server)
#
# A cluster: initdb as the unprivileged user `nobody` when run as root
# (PostgreSQL refuses root), a unix socket in its directory only
# (listen_addresses = ''), one superuser `sbx` whose random password is checked
# (scram-sha-256). `exec` uses the run's cluster when SBX_TEST_PG_SHARED names
# its directory and it answers: a fresh database there for CMD, dropped
# (WITH (FORCE)) afterwards whatever CMD did. Otherwise, or with --private, a
# cluster in a fresh temporary directory, stopped and removed afterwards.
# CMD runs with
#   SBX_TEST_PG_DSN        postgresql://sbx@/DB?host=DIR  (no password in it)
#   SBX_TEST_PG_PASSWORD   the password; its NAME goes in runner.database_password_env
#   SBX_TEST_PG_DIR        the cluster's directory
#   SBX_TEST_PG_CTL        (a private cluster only) `$SBX_TEST_PG_CTL stop|start|restart`
# and exec exits with CMD's status. PG_BINDIR overrides /usr/lib/postgresql/15/bin.
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

# psql as sbx on the cluster in DIR (its maintenance database).
pg_do() {
    PGPASSWORD=$(cat "$1/password") "$bindir/psql" -q -X -v ON_ERROR_STOP=1 -h "$1" -U sbx \
        -d postgres -c "$2" >/dev/null
}

# Makes and starts a cluster in DIR (absent or empty); its password in DIR/password.
cluster_init() {
    local dir=$1 password
    mkdir -p "$dir"
    chmod 0700 "$dir"
    if [ "$(id -u)" = 0 ]; then
        chown nobody:nogroup "$dir"
    fi
    password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    printf '%s\n' "$password" >"$dir/pw"
    [ "$(id -u)" != 0 ] || chown nobody:nogroup "$dir/pw"
    as_owner "$bindir/initdb" -D "$dir/data" -U sbx --pwfile="$dir/pw" \
        --auth-local=scram-sha-256 --auth-host=reject -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
        {
            cat "$dir/initdb.log" >&2
            die "initdb in $dir failed (its log above)"
        }
    mv "$dir/pw" "$dir/password"
    cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$dir'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
EOF
    ctl "$dir" start || {
        tail -n 20 "$dir/log" >&2
        die "the server in $dir did not start (the last lines of $dir/log above)"
    }
}

# 0 when the cluster in DIR answers.
cluster_up() {
    [ -f "$1/password" ] && [ -f "$1/data/postmaster.pid" ] &&
        as_owner "$bindir/pg_ctl" -D "$1/data" status >/dev/null 2>&1
}

private=0
case "${1:-}" in
start)
    [ $# = 2 ] || die "usage: pg_harness.sh start DIR"
    [ -x "$bindir/initdb" ] || die "no PostgreSQL 15 server in $bindir (Debian package postgresql-15)"
    dir=$2
    # a cluster left by an interrupted run goes first
    if [ -f "$dir/data/postmaster.pid" ]; then
        ctl "$dir" stop || true
    fi
    rm -rf "$dir"
    cluster_init "$dir"
    echo "pg_harness: the run's cluster is up in $dir"
    exit 0
    ;;
stop)
    [ $# = 2 ] || die "usage: pg_harness.sh stop DIR"
    dir=$2
    if [ -f "$dir/data/postmaster.pid" ]; then
        ctl "$dir" stop || {
            tail -n 20 "$dir/log" >&2
            die "the server in $dir did not stop (the last lines of $dir/log above)"
        }
    fi
    rm -rf "$dir"
    exit 0
    ;;
exec)
    shift
    if [ "${1:-}" = --private ]; then
        private=1
        shift
    fi
    [ $# -gt 0 ] || die "usage: pg_harness.sh exec [--private] CMD [ARG...]"
    ;;
ctl)
    ctl "$2" "$3"
    exit 0
    ;;
*)
    die "usage: pg_harness.sh start DIR | stop DIR | exec [--private] CMD [ARG...]"
    ;;
esac

[ -x "$bindir/initdb" ] || die "no PostgreSQL 15 server in $bindir (Debian package postgresql-15)"

shared=${SBX_TEST_PG_SHARED:-}
if [ "$private" = 0 ] && [ -n "$shared" ] && cluster_up "$shared"; then
    # a database of its own in the run's cluster
    dir=$shared
    db=t_$$_$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
    pg_do "$dir" "CREATE DATABASE $db" || die "CREATE DATABASE $db in $dir failed"
    cleanup() {
        pg_do "$dir" "DROP DATABASE IF EXISTS $db WITH (FORCE)" ||
            echo "pg_harness: dropping database $db in $dir failed" >&2
    }
    trap cleanup EXIT
    export SBX_TEST_PG_DSN="postgresql://sbx@/$db?host=$dir"
    unset SBX_TEST_PG_CTL
else
    if [ "$private" = 0 ] && [ -n "$shared" ]; then
        echo "pg_harness: the run's cluster in $shared does not answer: a private one" >&2
    fi
    dir=$(mktemp -d /tmp/sbx-pg.XXXXXX)
    cleanup() {
        if [ -f "$dir/data/postmaster.pid" ]; then
            ctl "$dir" stop || true
        fi
        rm -rf "$dir"
    }
    trap cleanup EXIT
    cluster_init "$dir"
    pg_do "$dir" 'CREATE DATABASE sbx'
    export SBX_TEST_PG_DSN="postgresql://sbx@/sbx?host=$dir"
    export SBX_TEST_PG_CTL="$self ctl $dir"
fi
SBX_TEST_PG_PASSWORD=$(cat "$dir/password")
export SBX_TEST_PG_PASSWORD
export SBX_TEST_PG_DIR=$dir
set +e
"$@"
rc=$?
set -e
exit $rc
