# Shared by the bench scripts (sourced, not run).

# wait_listening PID OUT ERR: waits until the npub-server started as PID prints its banner to the
# file OUT, then prints the URL it listens on. Fails, showing ERR, if the server exits or never
# names an address (20 s).
wait_listening() {
    local pid=$1 out=$2 err=$3 url
    for _ in $(seq 1 400); do
        grep -q "listening on" "$out" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { echo "npub-server exited at start:" >&2; cat "$err" >&2; return 1; }
        read -rt 0.05 < /dev/zero || true
    done
    url=$(sed -n 's/^npub-server listening on //p' "$out" | head -1)
    [ -n "$url" ] || { echo "npub-server did not start within 20 s:" >&2; cat "$err" >&2; return 1; }
    echo "$url"
}

# free_port: a TCP port free on 127.0.0.1 now.
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# nginx_conf DIR PORT WORKERS [MASTER [CERT KEY]]: writes DIR/nginx.conf, nginx as production
# runs it (`sendfile`, `tcp_nopush`, `tcp_nodelay`, `open_file_cache`, keep-alive), WORKERS worker
# processes, listening on 127.0.0.1:PORT: `/poll` is a `return 204` with the same poll-interval
# header as the server's, `/pack` is DIR/www/pack.npub. MASTER `off`: one process, no master
# (what valgrind can follow). With CERT and KEY (PEM files, copied into DIR): TLS 1.3 only on
# that certificate, TLS_AES_128_GCM_SHA256, session tickets (keys of its own), kTLS asked for
# (`ssl_conf_command Options KTLS`: used when the kernel has the `tls` module, else OpenSSL
# falls back to user-space records).
nginx_conf() {
    local dir=$1 port=$2 workers=$3 master=${4:-on} cert=${5:-} key=${6:-} tls="" ssl=""
    mkdir -p "$dir/logs" "$dir/www" "$dir/tmp"
    if [ -n "$cert" ]; then
        cp "$cert" "$dir/server.pem"
        cp "$key" "$dir/server.key"
        chmod 644 "$dir/server.pem" "$dir/server.key"
        ssl=" ssl"
        tls="
    ssl_certificate $dir/server.pem;
    ssl_certificate_key $dir/server.key;
    ssl_protocols TLSv1.3;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    ssl_conf_command Options KTLS;
    ssl_session_tickets on;
    ssl_session_timeout 12h;"
    fi
    cat > "$dir/nginx.conf" <<CONF
worker_processes $workers;
master_process $master;
worker_rlimit_nofile 20000;
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    open_file_cache_errors on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    client_body_temp_path $dir/tmp;
    proxy_temp_path $dir/tmp;
    fastcgi_temp_path $dir/tmp;
    uwsgi_temp_path $dir/tmp;
    scgi_temp_path $dir/tmp;$tls
    server {
        listen 127.0.0.1:$port$ssl backlog=1024;
        location = /poll { add_header Npub-Poll-Interval 60 always; return 204; }
        location = /pack { alias $dir/www/pack.npub; default_type application/octet-stream; }
    }
}
CONF
}

# nginx_start NGINX DIR PORT WORKERS CPUS PACK [CERT KEY]: nginx_conf's nginx (WORKERS workers,
# TLS with CERT and KEY) serving PACK as /pack, pinned to CPUS, started in the background and
# waited for until /poll answers (10 s). Sets nginx_pid (the master), nginx_pids (it and its
# workers, comma-separated, for the load generator's CPU count) and nginx_url.
nginx_start() {
    local bin=$1 dir=$2 port=$3 workers=$4 cpus=$5 pack=$6 cert=${7:-} key=${8:-} scheme=http
    nginx_conf "$dir" "$port" "$workers" on "$cert" "$key"
    cp "$pack" "$dir/www/pack.npub"
    # nginx's workers drop root for an unprivileged user, who must be able to reach the files.
    chmod 755 "$(dirname "$dir")" "$dir" "$dir/www"
    chmod 644 "$dir/www/pack.npub"
    [ -n "$cert" ] && scheme=https
    taskset -c "$cpus" "$bin" -p "$dir" -c "$dir/nginx.conf" &
    nginx_pid=$!
    for _ in $(seq 1 200); do
        curl -sk -o /dev/null "$scheme://127.0.0.1:$port/poll" && break
        read -rt 0.05 < /dev/zero || true
    done
    nginx_pids=$(echo "$nginx_pid" $(pgrep -P "$nginx_pid") | tr ' ' ',')
    nginx_url="$scheme://127.0.0.1:$port"
}

# bench_work: sets work, a fresh scratch directory, and pid (no server yet), with an EXIT trap
# that stops the server and removes the directory (stop_server). For a script that writes files
# before its server starts; start_server calls it when work is not set. A script that makes its
# own work directory and EXIT trap instead has that trap call kill_server.
bench_work() {
    work=$(mktemp -d)
    pid=""
    trap stop_server EXIT
}

# start_server [ARG...]: builds target/release/npub-server unless SERVER_BIN names a binary, starts
# it on the embedded default (SQLite in $work/data, fresh unless the script put one there) on
# 127.0.0.1:0 with a random operator token, waits until it listens, and sets SERVER_BIN, work
# (bench_work's unless already set), pid, admin (the token) and url. Its stdout and stderr go to
# $work/out and $work/err. Each ARG is passed to the server after --data-dir and --listen
# (`start_server --max-uploads 64`). Also read:
#
# | variable        | effect                                                       | unset       |
# |-----------------|--------------------------------------------------------------|-------------|
# | SERVER_CPUS     | pins the server to these CPUs (`taskset -c SERVER_CPUS`)      | not pinned  |
# | SERVER_NOFILE   | its open-file limit, soft and hard (`ulimit -n`)              | the shell's |
# | SERVER_LOG      | its NPUB_LOG                                                  | `warn`      |
#
# Any other variable set on the call reaches the server's environment
# (`TOKIO_WORKER_THREADS=1 start_server`). The server's pid is the process itself, not a wrapper
# (the wrappers exec), so /proc/$pid is the server's.
start_server() {
    if [ -z "${SERVER_BIN:-}" ]; then
        cargo build --release -q -p npub-server
        SERVER_BIN="${CARGO_TARGET_DIR:-target}/release/npub-server"
    fi
    [ -n "${work:-}" ] || bench_work
    admin="npub_op_bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    local pin=()
    [ -z "${SERVER_CPUS:-}" ] || pin=(taskset -c "$SERVER_CPUS")
    (
        [ -z "${SERVER_NOFILE:-}" ] || ulimit -n "$SERVER_NOFILE"
        exec env NPUB_ADMIN_TOKEN="$admin" NPUB_LOG="${SERVER_LOG:-warn}" "${pin[@]}" \
            "$SERVER_BIN" --data-dir "$work/data" --listen 127.0.0.1:0 "$@"
    ) > "$work/out" 2> "$work/err" &
    pid=$!
    url=$(wait_listening "$pid" "$work/out" "$work/err")
}

# kill_server: stops start_server's server, if one runs, and waits for it; keeps work (its data
# directory can be started again).
kill_server() {
    if [ -n "${pid:-}" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=""
    fi
}

# stop_server: what bench_work's EXIT trap runs: kill_server, then removes work (so that the next
# start_server starts on a fresh one).
stop_server() {
    kill_server
    [ -z "${work:-}" ] || rm -rf "$work"
    work=""
}

# split_cores SCRIPT: sets cpus; serve_cpus and load_cpus, the first and the second half of the
# machine (for `taskset -c`: the servers measured, the load generator); workers, the servers'
# worker count (half the cores). On one core everything shares it, and SCRIPT says so.
split_cores() {
    cpus=$(nproc)
    if [ "$cpus" -ge 2 ]; then
        half=$((cpus / 2))
        serve_cpus="0-$((half - 1))"
        load_cpus="$half-$((cpus - 1))"
        workers=$half
    else
        serve_cpus=0 load_cpus=0 workers=1
        echo "$1: one core: the load generator shares it with the server" >&2
    fi
}
