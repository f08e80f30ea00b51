#!/usr/bin/env bash
# npub-server's own TLS against nginx with TLS 1.3, in one invocation on the same cores (issue 33,
# point 6, server side):
#
#   1. a P-256 certificate (a test CA and a server certificate for 127.0.0.1, made here with
#      `openssl`), the same files for both servers
#   2. npub-server with `--tls-cert/--tls-key` (TLS 1.3 only, its session tickets); nginx with
#      `ssl_protocols TLSv1.3`, session tickets, `sendfile`, and kTLS asked for
#      (`ssl_conf_command Options KTLS`: used when the kernel has the `tls` module, else
#      OpenSSL falls back to user-space records; the script says which)
#   3. in A B A B pairs (server, nginx, server, nginx, …):
#        resumed   polls/s, each poll a NEW connection resuming the client's session from a
#                  ticket (what a device does every poll interval): connect, handshake, one
#                  "nothing new" poll (204), close_notify, close
#        full      the same with no ticket kept: every handshake full (X25519, certificate,
#                  ECDSA P-256 signature)
#        full_p256 the same with a P-256 key exchange: what the Cortex-M firmware does on every
#                  poll (embedded-tls offers secp256r1 only and cannot resume)
#        pack      MB/s of the 1 MB-class pack over keep-alive TLS connections
#      the median of each kind's pair ratios, and their spread
#
#   bench/https.sh [DEVICES]                                          (default 1000)
#
# The cipher suite and key exchange are fixed by the client, which offers only
# TLS_AES_128_GCM_SHA256 and one group, X25519 unless said (`bench/loadgen/src/tls.rs`); nginx is
# also told the suite. The client (npub-loadgen, rustls on ring) counts how every handshake went and the tickets
# it was sent: a resumed run with a full handshake in its measured window fails, as does any
# error. Environment: CLIENTS (32) concurrent short connections of the handshake runs,
# CONNECTIONS (16) keep-alive connections of the pack runs, RUN_SECONDS (5) each, PAIRS (5),
# PROFILE (unset; a directory: `perf record` the first server run of each kind into it),
# SERVER_BIN (the npub-server to measure; default: this tree's release build), NO_BUILD (set:
# use the binaries in target/release as they are).
# Server and nginx run with the same worker count pinned to the same cores; the load generator
# gets the other half of the machine. Needs Debian's nginx and openssl. Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
devices=${1:-1000}
clients=${CLIENTS:-32}
connections=${CONNECTIONS:-16}
seconds=${RUN_SECONDS:-5}
pairs=${PAIRS:-5}
target=${CARGO_TARGET_DIR:-target}
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "bench/https.sh: nginx not found (apt-get install nginx-light)" >&2; exit 1; }
command -v openssl > /dev/null || { echo "bench/https.sh: openssl not found" >&2; exit 1; }

split_cores bench/https.sh

# Built one at a time: together, cargo unifies their dependencies' features and rebuilds both.
if [ -z "${NO_BUILD:-}" ]; then
    [ -n "${SERVER_BIN:-}" ] || cargo build --release -q -p npub-server
    cargo build --release -q -p npub-loadgen
fi
server_bin=${SERVER_BIN:-$target/release/npub-server}
loadgen="$target/release/npub-loadgen"
lg() { taskset -c "$load_cpus" "$loadgen" "$@"; }

work=$(mktemp -d)
server_pid=""
nginx_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# kTLS: the kernel's `tls` module (CONFIG_TLS) shows itself in /proc/net/tls_stat.
if [ -r /proc/net/tls_stat ]; then
    ktls="kernel has kTLS"
else
    config_tls=$(zcat /proc/config.gz 2>/dev/null | grep '^# CONFIG_TLS is not set' || true)
    ktls="no kTLS in this kernel (no /proc/net/tls_stat${config_tls:+; $config_tls})"
fi
tls_stat() { [ -r /proc/net/tls_stat ] && awk '$1 == "TlsTxSw" || $1 == "TlsTxDevice" { printf "%s=%s ", $1, $2 }' /proc/net/tls_stat; true; }

echo "date=$(date -u +%Y-%m-%dT%H:%MZ) devices=$devices clients=$clients connections=$connections seconds=$seconds pairs=$pairs"
echo "cores=$cpus serve_cpus=$serve_cpus load_cpus=$load_cpus workers=$workers $(uptime | sed 's/.*load/load/')"
echo "kernel=$(uname -r) $ktls; $("$nginx" -v 2>&1); $(openssl version)"

# The certificate: a P-256 test CA, and a P-256 server certificate for 127.0.0.1 it signs.
pki="$work/pki"
mkdir -p "$pki"
p256=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${p256[@]}" -keyout "$pki/ca.key" -out "$pki/ca.pem" -days 2 \
    -subj "/CN=npub bench CA" 2> /dev/null
openssl req "${p256[@]}" -keyout "$pki/server.key" -out "$pki/server.csr" \
    -subj "/CN=npub bench server" 2> /dev/null
openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -out "$pki/server.pem" \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') 2> /dev/null
cert="$pki/server.pem" key="$pki/server.key"
echo "certificate: $(openssl x509 -in "$cert" -noout -text | grep -m1 'Public Key Algorithm' | sed 's/^ *//'), $(openssl x509 -in "$cert" -noout -text | grep -m1 'NIST CURVE' | sed 's/^ *//')"

pack_src=../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite
lg make-pack --from "$pack_src" --fill 1 --out "$work/v1.npub" > /dev/null

# npub-server: TLS on --listen, the operator API on a plain --admin-listen for the setup.
admin="npub_op_bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
NPUB_ADMIN_TOKEN="$admin" NPUB_LOG=warn NPUB_MAX_CONNECTIONS=4096 NPUB_MAX_CONNECTIONS_PER_PEER=4096 \
    TOKIO_WORKER_THREADS=$workers taskset -c "$serve_cpus" \
    "$server_bin" --data-dir "$work/data" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --tls-cert "$cert" --tls-key "$key" > "$work/server.out" 2> "$work/server.err" &
server_pid=$!
url=$(wait_listening "$server_pid" "$work/server.out" "$work/server.err")
admin_url=$(sed -n 's/^ *admin: *\(http:[^ ]*\).*/\1/p' "$work/server.out" | head -1)
case "$url" in https://*) ;; *) echo "bench/https.sh: the server does not speak TLS: $url" >&2; exit 1 ;; esac

facts=$(lg setup --url "$admin_url" --token "$admin" --pack "$work/v1.npub" --devices "$devices" \
    --tokens "$work/tokens")
fact() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
sha=$(fact "$facts" SHA256)
seq=$(fact "$facts" SEQUENCE)
pack_bytes=$(stat -c %s "$work/v1.npub")

# nginx as production runs it (bench/lib.sh's settings), with TLS 1.3 only on the same
# certificate: session tickets (keys of its own, as the server's), sendfile, kTLS if offered.
nginx_start "$nginx" "$work/nginx" "$(free_port)" "$workers" "$serve_cpus" "$work/v1.npub" \
    "$cert" "$key"

results="$work/results"
run() { lg "$@" --cert "$cert" | tee -a "$results"; }
poll_path="/api/v1/device/manifest?seq=$seq"
hs() { run handshakes --clients "$clients" --seconds "$seconds" --tokens "$work/tokens" --expect 204 "$@"; }
sat() { run saturate --connections "$connections" --seconds "$seconds" --tokens "$work/tokens" "$@"; }
# PROFILE=DIR: the first server run of each kind under `perf record` (cpu-clock samples), the
# report's top symbols into DIR/https-KIND.txt.
profiled() {
    if [ -z "${PROFILE:-}" ] || [ "$1" != 1 ]; then shift 2; "$@"; return; fi
    mkdir -p "$PROFILE"
    local kind=$2
    perf record -q -e cpu-clock -F 2000 -g -p "$server_pid" -o "$PROFILE/https-$kind.data" 2> /dev/null &
    local perf_pid=$!
    shift 2
    "$@"
    kill -INT "$perf_pid"; wait "$perf_pid" || true
    perf report -i "$PROFILE/https-$kind.data" --no-children --sort dso,symbol --stdio 2> /dev/null \
        | grep -v "^#" | grep -v "^ *|" | grep -v "^ *-" | sed "s/  */ /g" | grep -v "^ *$" \
        | head -60 > "$PROFILE/https-$kind.txt" || true
}
before=$(tls_stat)
for i in $(seq 1 "$pairs"); do
    profiled "$i" resumed hs --resume tickets --label "server_resumed#$i" --url "$url" \
        --path "$poll_path" --pids "$server_pid"
    hs --resume tickets --label "nginx_resumed#$i" --url "$nginx_url" --path /poll --pids "$nginx_pids"
done
for i in $(seq 1 "$pairs"); do
    profiled "$i" full hs --resume never --label "server_full#$i" --url "$url" --path "$poll_path" \
        --pids "$server_pid"
    hs --resume never --label "nginx_full#$i" --url "$nginx_url" --path /poll --pids "$nginx_pids"
done
for i in $(seq 1 "$pairs"); do
    profiled "$i" full_p256 hs --resume never --kx p256 --label "server_full_p256#$i" --url "$url" \
        --path "$poll_path" --pids "$server_pid"
    hs --resume never --kx p256 --label "nginx_full_p256#$i" --url "$nginx_url" --path /poll \
        --pids "$nginx_pids"
done
for i in $(seq 1 "$pairs"); do
    profiled "$i" pack sat --label "server_pack#$i" --url "$url" --path "/api/v1/device/packs/$sha" \
        --expect-bytes "$pack_bytes" --pids "$server_pid"
    sat --label "nginx_pack#$i" --url "$nginx_url" --path /pack --expect-bytes "$pack_bytes" \
        --pids "$nginx_pids"
done
echo "kTLS records: before ${before:-none} after $(tls_stat)"
echo "end $(uptime | sed 's/.*load/load/')"

python3 - "$results" <<'PY'
import statistics, sys
r = {}
for line in open(sys.argv[1]):
    if not line.startswith("RESULT"):
        continue
    f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    r[f["label"]] = f
for kind, key, what in (("resumed", "rps", "resumed polls/s"), ("full", "rps", "full handshakes/s"),
                        ("full_p256", "rps", "full handshakes/s"), ("pack", "MBps", "pack MB/s")):
    ratios, i = [], 1
    while f"server_{kind}#{i}" in r:
        ratios.append(float(r[f"server_{kind}#{i}"][key]) / float(r[f"nginx_{kind}#{i}"][key]))
        i += 1
    runs = lambda who: [r[f"{who}_{kind}#{j}"] for j in range(1, i)]
    med = lambda who, k: statistics.median(float(x[k]) for x in runs(who))
    spread = " ".join(f"{x:.2f}" for x in ratios)
    line = (f"SUMMARY {kind}: server {med('server', key):.0f} vs nginx {med('nginx', key):.0f} {what} "
            f"(medians); ratio median {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] "
            f"pairs {spread} (target >= 1.0); CPU/request server {med('server', 'server_us_per_req'):.1f} us, "
            f"nginx {med('nginx', 'server_us_per_req'):.1f} us; loadgen CPU {med('server', 'loadgen_cpu_pct'):.0f} % "
            f"/ {med('nginx', 'loadgen_cpu_pct'):.0f} %")
    if kind != "pack":
        res = lambda who: sum(int(x["resumed"]) for x in runs(who))
        full = lambda who: sum(int(x["full"]) for x in runs(who))
        tix = lambda who: med(who, "tickets_per_handshake")
        line += (f"; handshakes resumed/full server {res('server')}/{full('server')}, nginx "
                 f"{res('nginx')}/{full('nginx')}; tickets per handshake server {tix('server'):.2f}, "
                 f"nginx {tix('nginx'):.2f}; suite {runs('server')[0]['suite']} / {runs('nginx')[0]['suite']}")
    print(line)
PY
