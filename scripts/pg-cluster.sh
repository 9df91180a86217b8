#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback, for the tests of the postgres
# backend. Installs PostgreSQL from Debian when it is missing.
#
#   scripts/pg-cluster.sh start DIR   initdb + start in DIR (created), on a
#                                     free port; writes DIR/env
#   scripts/pg-cluster.sh stop DIR    stop the cluster and remove DIR
#
# DIR/env exports what the tests read:
#   DSH_TEST_POSTGRES_URL    postgresql://USER@127.0.0.1:PORT/postgres
#   DSH_TEST_POSTGRES_STOP   a command that stops the server (fast mode)
#   DSH_TEST_POSTGRES_START  a command that starts it again on the same port
# The server runs as a non-root user: the caller, or (as root) the
# `postgres` user of Debian's package, created when absent.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

pg_bin() {
    local d
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && { echo "$d"; return 0; }
    done
    return 1
}

ensure_postgres() {
    pg_bin >/dev/null && return 0
    echo "==> installing postgresql from Debian" >&2
    local sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq >&2
    # The package's own cluster is not used (and not started here).
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq postgresql >&2
    pg_bin >/dev/null
}

# as_user CMD...: run CMD as the cluster's user.
as_user() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$PG_USER" -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

cmd=${1:?usage: pg-cluster.sh start|stop DIR}
dir=${2:?usage: pg-cluster.sh start|stop DIR}

if [ "$(id -u)" = 0 ]; then
    PG_USER=postgres
else
    PG_USER=$(id -un)
fi

case "$cmd" in
start)
    ensure_postgres
    ensure_commands python3:python3 # picks the free port below
    bin=$(pg_bin)
    if [ -f "$dir/env" ] && as_user "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        echo "PostgreSQL already runs in $dir" >&2
        exit 0
    fi
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
        # Only a stopped cluster this script made is thrown away.
        [ -f "$dir/data/PG_VERSION" ] ||
            { echo "pg-cluster: $dir is not empty and holds no cluster of this script" >&2; exit 1; }
        rm -rf "$dir"
    fi
    if [ "$(id -u)" = 0 ] && ! id "$PG_USER" >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ "$(id -u)" = 0 ] && chown "$PG_USER" "$dir"
    port=$(free_port)
    as_user "$bin/initdb" -D "$dir/data" -U "$PG_USER" --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    opts="-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=on"
    start="$bin/pg_ctl -D $dir/data -l $dir/server.log -w -o '$opts' start"
    stop="$bin/pg_ctl -D $dir/data -m fast -w stop"
    if [ "$(id -u)" = 0 ]; then
        start="runuser -u $PG_USER -- $start"
        stop="runuser -u $PG_USER -- $stop"
    fi
    sh -c "$start" >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    {
        echo "export DSH_TEST_POSTGRES_URL='postgresql://$PG_USER@127.0.0.1:$port/postgres'"
        echo "export DSH_TEST_POSTGRES_STOP=\"$stop\""
        echo "export DSH_TEST_POSTGRES_START=\"$start\""
    } >"$dir/env"
    echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port ($dir)" >&2
    ;;
stop)
    [ -f "$dir/data/PG_VERSION" ] || exit 0
    bin=$(pg_bin)
    as_user "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
        # Only a stopped cluster this script made is thrown away.
        [ -f "$dir/data/PG_VERSION" ] ||
            { echo "pg-cluster: $dir is not empty and holds no cluster of this script" >&2; exit 1; }
        rm -rf "$dir"
    fi
    ;;
*)
    echo "usage: pg-cluster.sh start|stop DIR" >&2
    exit 2
    ;;
esac
