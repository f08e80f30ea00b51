#!/usr/bin/env bash
# The topology of deploy/compose.yaml on this machine, without containers: a PostgreSQL cluster
# in a temp dir (Debian's postgresql-15 binaries), s3s-fs on loopback as the S3-compatible pack
# store, and two npub-server replicas on loopback ports sharing both. The replica tests
# (server/tests/cluster) drive the cluster through this script.
#
#   deploy/local-cluster.sh up            start everything, print the lines below, return
#   deploy/local-cluster.sh down          stop everything and remove the cluster's directory
#   deploy/local-cluster.sh env           print the lines below again
#   deploy/local-cluster.sh kill a|b      kill -9 one replica (a crash, not a shutdown)
#   deploy/local-cluster.sh start a|b     start a replica again, on the same port
#   deploy/local-cluster.sh db-stop       stop PostgreSQL (fast shutdown: clients are cut off)
#   deploy/local-cluster.sh db-start      start it again, on the same port
#
# `up` prints, one per line:
#   REPLICA_A=http://127.0.0.1:PORT  REPLICA_B=http://127.0.0.1:PORT  ADMIN_TOKEN=npub_op_…
#   DATABASE_URL=postgres://…  S3_ENDPOINT=http://127.0.0.1:PORT  CLUSTER_DIR=/tmp/…
#
# Environment:
#   NPUB_CLUSTER_DIR   the cluster's directory (default /tmp/npub-local-cluster); `down` removes it
#   NPUB_SERVER_BIN    the npub-server binary (default target/debug/npub-server, built if missing)
#   NPUB_S3S_FS        the s3s-fs binary (default: on PATH, else ~/.cargo/bin/s3s-fs)
#   PG_BIN             PostgreSQL's binaries (default /usr/lib/postgresql/15/bin)
#   NPUB_REPLICA_ARGS  extra arguments for both replicas (e.g. "--last-seen-flush 1")
#
# PostgreSQL refuses to run as root: as root, the cluster runs as `nobody`, in a directory that
# user owns. Everything listens on 127.0.0.1 only; PostgreSQL trusts loopback connections (a test
# cluster, never a production one).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
dir="${NPUB_CLUSTER_DIR:-/tmp/npub-local-cluster}"
pg_bin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
bucket=npub-packs
s3_access=npub-local-access
s3_secret=npub-local-secret-0123456789

die() { echo "local-cluster.sh: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
# Waits up to 30 s for `$@` to succeed; a process that died meanwhile ends the wait at once.
wait_for() {
    local pidfile=$1 what=$2; shift 2
    for _ in $(seq 1 300); do
        "$@" >/dev/null 2>&1 && return 0
        if [ -n "$pidfile" ] && ! alive "$pidfile"; then
            die "$what exited; its log: $(tail -n 20 "$dir/$what.log" 2>/dev/null)"
        fi
        read -rt 0.1 < /dev/zero || true
    done
    die "$what did not come up within 30 s"
}

# PostgreSQL's commands, as the cluster's owner.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        # From /, which `nobody` can enter (it may not be able to enter the caller's directory).
        (cd / && runuser -u nobody -- "$@")
    else
        "$@"
    fi
}

s3s_fs_bin() {
    if [ -n "${NPUB_S3S_FS:-}" ]; then echo "$NPUB_S3S_FS"; return; fi
    command -v s3s-fs && return
    local cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs"
    [ -x "$cargo_bin" ] && { echo "$cargo_bin"; return; }
    die "s3s-fs is not installed: cargo install --locked s3s-fs --version 0.14.1 --features binary"
}

server_bin() {
    local bin="${NPUB_SERVER_BIN:-$root/target/debug/npub-server}"
    if [ ! -x "$bin" ]; then
        (cd "$root" && cargo build -q -p npub-server) || die "building npub-server failed"
    fi
    echo "$bin"
}

load() {
    [ -f "$dir/cluster.env" ] || die "no cluster in $dir (run: deploy/local-cluster.sh up)"
    # shellcheck disable=SC1091
    . "$dir/cluster.env"
}

print_env() {
    load
    echo "REPLICA_A=http://127.0.0.1:$PORT_A"
    echo "REPLICA_B=http://127.0.0.1:$PORT_B"
    echo "ADMIN_TOKEN=$ADMIN_TOKEN"
    echo "DATABASE_URL=$DATABASE_URL"
    echo "S3_ENDPOINT=$S3_ENDPOINT"
    echo "CLUSTER_DIR=$dir"
}

db_start() {
    load
    as_owner "$pg_bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/postgres.log" -w -t 30 \
        -o "-p $PG_PORT -k $dir/pg -c listen_addresses=127.0.0.1" start >/dev/null \
        || die "PostgreSQL did not start: $(tail -n 20 "$dir/pg/postgres.log")"
}

db_stop() {
    load
    as_owner "$pg_bin/pg_ctl" -D "$dir/pg/data" -m fast -w -t 30 stop >/dev/null
}

# Starts replica $1 (a or b) on its port and waits until /readyz answers 200.
start_replica() {
    load
    local name=$1 port
    case "$name" in a) port=$PORT_A ;; b) port=$PORT_B ;; *) die "replica: a or b, not $name" ;; esac
    alive "$dir/replica-$name.pid" && die "replica $name is running already"
    # A restart's banner is the one to wait for: keep the earlier lives' logs aside.
    [ -f "$dir/replica-$name.log" ] && cat "$dir/replica-$name.log" >>"$dir/replica-$name.old.log" \
        && : >"$dir/replica-$name.log"
    # shellcheck disable=SC2086
    NPUB_ADMIN_TOKEN="$ADMIN_TOKEN" NPUB_DATABASE_URL="$DATABASE_URL" \
        NPUB_PACK_STORE="s3://$bucket/packs" NPUB_KEY_ENCRYPTION_KEY="$KEK" \
        AWS_ENDPOINT="$S3_ENDPOINT" AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true \
        AWS_ACCESS_KEY_ID="$s3_access" AWS_SECRET_ACCESS_KEY="$s3_secret" \
        NPUB_LOG="${NPUB_LOG:-info,sqlx=warn}" \
        setsid "$SERVER_BIN" --data-dir "$dir/replica-$name" --listen "127.0.0.1:$port" \
        ${NPUB_REPLICA_ARGS:-} >"$dir/replica-$name.log" 2>&1 </dev/null &
    echo $! >"$dir/replica-$name.pid"
    # Its own banner first: a health answer alone could come from another process on the port.
    wait_for "$dir/replica-$name.pid" "replica-$name" \
        grep -q "listening on http://127.0.0.1:$port" "$dir/replica-$name.log"
    wait_for "$dir/replica-$name.pid" "replica-$name" \
        curl -sf -o /dev/null "http://127.0.0.1:$port/readyz"
}

kill_replica() {
    load
    local name=$1
    alive "$dir/replica-$name.pid" || die "replica $name is not running"
    local pid
    pid=$(cat "$dir/replica-$name.pid")
    kill -9 "$pid"
    while kill -0 "$pid" 2>/dev/null; do read -rt 0.05 < /dev/zero || true; done
    rm -f "$dir/replica-$name.pid"
}

up() {
    [ -e "$dir" ] && die "$dir exists: run \`deploy/local-cluster.sh down\` first (or set NPUB_CLUSTER_DIR)"
    [ -x "$pg_bin/initdb" ] || die "$pg_bin/initdb not found (apt-get install postgresql-15, or set PG_BIN)"
    local s3s server
    s3s=$(s3s_fs_bin)
    server=$(server_bin)
    mkdir -p "$dir/pg" "$dir/s3/$bucket"
    # What `down` looks for before it removes anything.
    : > "$dir/.npub-local-cluster"
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown nobody "$dir/pg"
    # The token is created once, by whichever replica starts first; the other finds it.
    local token
    token="npub_op_local-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    # The replicas share the signing keys through the database, sealed under this key
    # (server/src/keys/secrets.rs): both must be given the same one.
    local kek
    kek=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
    local pg_port s3_port
    pg_port=$(free_port)
    s3_port=$(free_port)
    cat >"$dir/cluster.env" <<ENV
PG_PORT=$pg_port
PORT_A=$(free_port)
PORT_B=$(free_port)
ADMIN_TOKEN=$token
KEK=$kek
DATABASE_URL=postgres://npub@127.0.0.1:$pg_port/npub
S3_ENDPOINT=http://127.0.0.1:$s3_port
SERVER_BIN=$server
ENV
    as_owner "$pg_bin/initdb" -D "$dir/pg/data" -U npub --auth=trust -E UTF8 --no-instructions \
        >"$dir/pg/initdb.log" 2>&1 || die "initdb failed: $(tail -n 20 "$dir/pg/initdb.log")"
    db_start
    as_owner "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U npub npub

    RUST_LOG=info NO_COLOR=1 setsid "$s3s" --host 127.0.0.1 --port "$s3_port" --access-key "$s3_access" \
        --secret-key "$s3_secret" "$dir/s3" >"$dir/s3s-fs.log" 2>&1 </dev/null &
    echo $! >"$dir/s3s-fs.pid"
    wait_for "$dir/s3s-fs.pid" s3s-fs grep -q "server is running at http://127.0.0.1:$s3_port" "$dir/s3s-fs.log"

    start_replica a
    start_replica b
    print_env
}

down() {
    [ -d "$dir" ] || return 0
    # NPUB_CLUSTER_DIR pointed at the wrong directory must not be emptied by `rm -rf`.
    [ -f "$dir/.npub-local-cluster" ] \
        || die "$dir was not made by \`deploy/local-cluster.sh up\` (no .npub-local-cluster in it): not removing it"
    for name in replica-a replica-b s3s-fs; do
        if alive "$dir/$name.pid"; then
            local pid
            pid=$(cat "$dir/$name.pid")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; read -rt 0.05 < /dev/zero || true; done
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    if [ -f "$dir/pg/data/postmaster.pid" ]; then
        as_owner "$pg_bin/pg_ctl" -D "$dir/pg/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    env) print_env ;;
    kill) kill_replica "${2:?kill a|b}" ;;
    start) start_replica "${2:?start a|b}" ;;
    db-stop) db_stop ;;
    db-start) db_start ;;
    *) sed -n '2,30p' "$0" >&2; exit 2 ;;
esac
