#!/usr/bin/env bash
# Device-API load benchmark: N simulated devices (own tokens, round robin) polling npub-server over
# loopback, and downloading the deployed pack; then the same load generator against nginx serving
# a static 204 and the same pack file. Prints requests/s, p50/p99 and both ratios
# (targets: polls >= 0.5x nginx's static rate; downloads >= 0.8x nginx's throughput).
#
#   bench/fleet.sh [DEVICES] [CONCURRENCY] [SECONDS]      (defaults 1000 64 5)
#
# Needs Debian's nginx (`apt-get install nginx-light`). Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
devices=${1:-1000}
concurrency=${2:-64}
seconds=${3:-5}
target=${CARGO_TARGET_DIR:-target}
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "bench/fleet.sh: nginx not found (apt-get install nginx-light)" >&2; exit 1; }

cargo build --release -q -p npub-server -p npub-loadgen
server_bin="$target/release/npub-server"
loadgen="$target/release/npub-loadgen"

work=$(mktemp -d)
server_pid=""
nginx_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# npub-server on a free port; its banner's first line names the address.
admin="npub_op_bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
NPUB_ADMIN_TOKEN="$admin" NPUB_LOG=warn "$server_bin" --data-dir "$work/data" --listen 127.0.0.1:0 \
    > "$work/server.out" 2> "$work/server.err" &
server_pid=$!
for _ in $(seq 1 200); do
    grep -q "listening on" "$work/server.out" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
    read -rt 0.05 < /dev/zero || true
done
url=$(sed -n 's/^npub-server listening on //p' "$work/server.out" | head -1)
[ -n "$url" ] || { echo "server did not start" >&2; cat "$work/server.err" >&2; exit 1; }

pack_src=../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite
facts=$("$loadgen" setup --url "$url" --token "$admin" --pack "$pack_src" --devices "$devices" \
    --tokens "$work/tokens")
sha=$(echo "$facts" | sed -n 's/.*SHA256=\([0-9a-f]*\).*/\1/p')
seq=$(echo "$facts" | sed -n 's/.*SEQUENCE=\([0-9]*\).*/\1/p')
curl -sf -H "Authorization: Bearer $admin" -o "$work/pack.npub" \
    "$url/api/v1/models/bench/versions/1.0.0/npub"
pack_bytes=$(stat -c %s "$work/pack.npub")

# nginx: the same static answers, generated config, loopback only.
nport=$(free_port)
mkdir -p "$work/nginx/logs" "$work/nginx/www"
cp "$work/pack.npub" "$work/nginx/www/pack.npub"
# nginx's workers drop root for an unprivileged user, who must be able to reach the file.
chmod 755 "$work" "$work/nginx" "$work/nginx/www"
chmod 644 "$work/nginx/www/pack.npub"
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes auto;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $work/nginx/tmp;
    proxy_temp_path $work/nginx/tmp;
    fastcgi_temp_path $work/nginx/tmp;
    uwsgi_temp_path $work/nginx/tmp;
    scgi_temp_path $work/nginx/tmp;
    server {
        listen 127.0.0.1:$nport;
        location = /poll { return 204; }
        location = /pack { alias $work/nginx/www/pack.npub; default_type application/octet-stream; }
    }
}
CONF
mkdir -p "$work/nginx/tmp"
"$nginx" -p "$work/nginx" -c "$work/nginx/nginx.conf" &
nginx_pid=$!
for _ in $(seq 1 200); do
    curl -s -o /dev/null "http://127.0.0.1:$nport/poll" && break
    read -rt 0.05 < /dev/zero || true
done

run() { "$loadgen" run --concurrency "$concurrency" --seconds "$seconds" "$@" | tee -a "$work/results"; }
echo "devices=$devices concurrency=$concurrency seconds=$seconds pack_bytes=$pack_bytes sequence=$seq"
run --label server_poll --url "$url" --path "/api/v1/device/manifest?seq=$seq" --tokens "$work/tokens" --expect 204
run --label nginx_poll --url "http://127.0.0.1:$nport" --path /poll --expect 204
run --label server_pack --url "$url" --path "/api/v1/device/packs/$sha" --tokens "$work/tokens"
run --label nginx_pack --url "http://127.0.0.1:$nport" --path /pack

python3 - "$work/results" <<'PY'
import sys
r = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    r[f["label"]] = f
poll = float(r["server_poll"]["rps"]) / float(r["nginx_poll"]["rps"])
pack = float(r["server_pack"]["MBps"]) / float(r["nginx_pack"]["MBps"])
print(f"poll ratio     server/nginx = {poll:.2f}x (target >= 0.5)")
print(f"download ratio server/nginx = {pack:.2f}x (target >= 0.8)")
PY
