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

# nginx_conf DIR PORT WORKERS [MASTER]: writes DIR/nginx.conf, nginx as production runs it
# (`sendfile`, `tcp_nopush`, `tcp_nodelay`, `open_file_cache`, keep-alive), WORKERS worker
# processes, listening on 127.0.0.1:PORT: `/poll` is a `return 204` with the same poll-interval
# header as the server's, `/pack` is DIR/www/pack.npub. MASTER `off`: one process, no master
# (what valgrind can follow).
nginx_conf() {
    local dir=$1 port=$2 workers=$3 master=${4:-on}
    mkdir -p "$dir/logs" "$dir/www" "$dir/tmp"
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
    scgi_temp_path $dir/tmp;
    server {
        listen 127.0.0.1:$port backlog=1024;
        location = /poll { add_header Npub-Poll-Interval 60 always; return 204; }
        location = /pack { alias $dir/www/pack.npub; default_type application/octet-stream; }
    }
}
CONF
}
