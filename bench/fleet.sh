#!/usr/bin/env bash
# A fleet of N simulated devices against npub-server, and the same load against nginx configured as
# production runs it, in one invocation on the same cores (issue #17):
#
#   1. provisioning: N devices through the API, one token each; server RSS at idle
#   2. steady polls: N devices polling once a minute = N/60 polls/s, Poisson jitter, a new
#      connection per poll (what a device does), p50/p99/p99.9
#   3. saturated, in A B A B pairs (server, nginx, server, nginx, …): "nothing new" polls against
#      nginx's `return 204`, pack downloads against nginx's `sendfile` of the same file; the median
#      of the pair ratios and their spread
#   4. a deployment wave: a new pack deployed to the first 10 % of the fleet (a staged rollout's
#      first batch); every device polls once, and the offered ones all download it at once
#   5. server RSS: peak (VmHWM) and at the end; then idle again after a restart over the same data
#
#   bench/fleet.sh [DEVICES]                                         (default 1000)
#
# Environment: CONNECTIONS (64) keep-alive connections of the saturated runs, RUN_SECONDS (5) each,
# PAIRS (3) A B pairs per comparison, STEADY_SECONDS (60), RATE (DEVICES/60), WAVE_PERCENT (10),
# PROFILE (unset; a directory: `perf record` the first server run of each kind into it).
# Server and nginx run with the same worker count pinned to the same cores; the load generator
# gets the other half of the machine (on 2 cores: server/nginx on CPU 0, load on CPU 1). Every run
# must end with 0 errors or the script fails. Needs Debian's nginx (`apt-get install nginx-light`).
# Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
devices=${1:-1000}
connections=${CONNECTIONS:-64}
seconds=${RUN_SECONDS:-5}
pairs=${PAIRS:-3}
steady_seconds=${STEADY_SECONDS:-60}
rate=${RATE:-$(python3 -c "print(max($devices / 60, 1))")}
wave_percent=${WAVE_PERCENT:-10}
target=${CARGO_TARGET_DIR:-target}
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "bench/fleet.sh: nginx not found (apt-get install nginx-light)" >&2; exit 1; }

# Half the cores serve (server or nginx, never both at once), the rest load.
split_cores bench/fleet.sh

cargo build --release -q -p npub-server -p npub-loadgen
server_bin="$target/release/npub-server"
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
rss() { awk -v k="$2:" '$1 == k { print int($2 / 1024) }' "/proc/$1/status"; }

echo "date=$(date -u +%Y-%m-%dT%H:%MZ) devices=$devices connections=$connections seconds=$seconds pairs=$pairs"
echo "cores=$cpus serve_cpus=$serve_cpus load_cpus=$load_cpus workers=$workers $(uptime | sed 's/.*load/load/')"

# Two 1 MB-class packs from the same real Vela compilation (different filler, different digest).
pack_src=../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite
lg make-pack --from "$pack_src" --fill 1 --out "$work/v1.npub" > /dev/null
lg make-pack --from "$pack_src" --fill 2 --out "$work/v2.npub" > /dev/null

# npub-server: its banner's first line names the address. Enough connections for the wave.
admin="npub_op_bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
wave_devices=$(( (devices * wave_percent + 99) / 100 ))
NPUB_ADMIN_TOKEN="$admin" NPUB_LOG=warn NPUB_MAX_CONNECTIONS=$((wave_devices + 2 * connections + 64)) \
    TOKIO_WORKER_THREADS=$workers taskset -c "$serve_cpus" \
    "$server_bin" --data-dir "$work/data" --listen 127.0.0.1:0 > "$work/server.out" 2> "$work/server.err" &
server_pid=$!
url=$(wait_listening "$server_pid" "$work/server.out" "$work/server.err")

facts=$(lg setup --url "$url" --token "$admin" --pack "$work/v1.npub" --devices "$devices" \
    --tokens "$work/tokens")
fact() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
sha=$(fact "$facts" SHA256)
seq=$(fact "$facts" SEQUENCE)
pack_bytes=$(stat -c %s "$work/v1.npub")
results="$work/results"
echo "RESULT label=provision devices=$devices seconds=$(fact "$facts" PROVISION_SECONDS) pack_bytes=$pack_bytes" | tee -a "$results"
echo "RESULT label=rss_idle devices=$devices rss_mb=$(rss $server_pid VmRSS) peak_mb=$(rss $server_pid VmHWM)" | tee -a "$results"

# nginx as production runs it: sendfile, tcp_nopush, open_file_cache, keep-alive; same workers,
# same cores. Its 204 carries the same poll-interval header as the server's.
nginx_start "$nginx" "$work/nginx" "$(free_port)" "$workers" "$serve_cpus" "$work/v1.npub"

run() { lg "$@" | tee -a "$results"; }
poll_path="/api/v1/device/manifest?seq=$seq"

run steady --label steady_poll --url "$url" --path "$poll_path" --tokens "$work/tokens" \
    --expect 204 --rate "$rate" --seconds "$steady_seconds" --pids "$server_pid"

sat() { run saturate --connections "$connections" --seconds "$seconds" --tokens "$work/tokens" "$@"; }
# PROFILE=DIR: the first server run of each kind under `perf record` (cpu-clock samples), the
# report's top symbols into DIR/KIND.txt: where a shortfall's time goes.
profiled() {
    if [ -z "${PROFILE:-}" ] || [ "$1" != 1 ]; then shift 2; "$@"; return; fi
    mkdir -p "$PROFILE"
    local kind=$2
    perf record -q -e cpu-clock -F 2000 -p "$server_pid" -o "$PROFILE/$kind.data" 2> /dev/null &
    local perf_pid=$!
    shift 2
    "$@"
    kill -INT "$perf_pid"; wait "$perf_pid" || true
    perf report -i "$PROFILE/$kind.data" --no-children --sort dso,symbol --stdio 2> /dev/null \
        | grep -v "^#" | sed "s/  */ /g" | grep -v "^ *$" | head -60 > "$PROFILE/$kind.txt" || true
}
for i in $(seq 1 "$pairs"); do
    profiled "$i" poll sat --label "server_poll#$i" --url "$url" --path "$poll_path" --expect 204 \
        --pids "$server_pid"
    sat --label "nginx_poll#$i" --url "$nginx_url" --path /poll --expect 204 --pids "$nginx_pids"
done
for i in $(seq 1 "$pairs"); do
    profiled "$i" pack sat --label "server_pack#$i" --url "$url" --path "/api/v1/device/packs/$sha" \
        --expect-bytes "$pack_bytes" --pids "$server_pid"
    sat --label "nginx_pack#$i" --url "$nginx_url" --path /pack --expect-bytes "$pack_bytes" \
        --pids "$nginx_pids"
done

wave=$(lg deploy --url "$url" --token "$admin" --pack "$work/v2.npub" --version 2.0.0 \
    --batches "$wave_percent,100")
run wave --label wave --url "$url" --tokens "$work/tokens" --seq "$seq" \
    --sha256 "$(fact "$wave" SHA256)" --pack-bytes "$(stat -c %s "$work/v2.npub")" \
    --connections "$connections" --pids "$server_pid"
echo "RESULT label=rss_end devices=$devices rss_mb=$(rss $server_pid VmRSS) peak_mb=$(rss $server_pid VmHWM)" | tee -a "$results"
# The same fleet after a restart: what a server holding N devices costs without the
# provisioning's transient memory (100 snapshot rebuilds) behind it.
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
NPUB_LOG=warn TOKIO_WORKER_THREADS=$workers taskset -c "$serve_cpus" \
    "$server_bin" --data-dir "$work/data" --listen 127.0.0.1:0 > "$work/server2.out" 2>> "$work/server.err" &
server_pid=$!
wait_listening "$server_pid" "$work/server2.out" "$work/server.err" > /dev/null
read -rt 2 < /dev/zero || true
echo "RESULT label=rss_restart devices=$devices rss_mb=$(rss $server_pid VmRSS) peak_mb=$(rss $server_pid VmHWM)" | tee -a "$results"
echo "end $(uptime | sed 's/.*load/load/')"

python3 - "$results" <<'PY'
import statistics, sys
r = {}
for line in open(sys.argv[1]):
    if not line.startswith("RESULT"):
        continue
    f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    r[f["label"]] = f
def pairs(kind, key):
    out, i = [], 1
    while f"server_{kind}#{i}" in r:
        out.append(float(r[f"server_{kind}#{i}"][key]) / float(r[f"nginx_{kind}#{i}"][key]))
        i += 1
    return out
for kind, key, goal in (("poll", "rps", 0.9), ("pack", "MBps", 1.0)):
    ratios = pairs(kind, key)
    med = statistics.median(ratios)
    spread = " ".join(f"{x:.2f}" for x in ratios)
    s = statistics.median(float(r[k][key]) for k in r if k.startswith(f"server_{kind}#"))
    n = statistics.median(float(r[k][key]) for k in r if k.startswith(f"nginx_{kind}#"))
    cs = statistics.median(float(r[k]["server_us_per_req"]) for k in r if k.startswith(f"server_{kind}#"))
    cn = statistics.median(float(r[k]["server_us_per_req"]) for k in r if k.startswith(f"nginx_{kind}#"))
    print(f"SUMMARY {kind}: server {s:.0f} vs nginx {n:.0f} {key} (medians); ratio median {med:.2f}x "
          f"[{min(ratios):.2f}-{max(ratios):.2f}] pairs {spread} (target >= {goal}); "
          f"CPU/request server {cs:.1f} us, nginx {cn:.1f} us")
st = r["steady_poll"]
print(f"SUMMARY steady: {st['rps']}/s p50 {st['p50_ms']} ms p99 {st['p99_ms']} ms p99.9 {st['p999_ms']} ms "
      f"(target p99 <= 5 ms)")
p = r["provision"]
i, e, x = r["rss_idle"], r["rss_end"], r["rss_restart"]
print(f"SUMMARY provisioning: {p['devices']} devices, one token each, in {p['seconds']} s; server RSS "
      f"idle {i['rss_mb']} MB (peak so far {i['peak_mb']} MB), after the run {e['rss_mb']} MB, "
      f"peak {e['peak_mb']} MB; idle after a restart {x['rss_mb']} MB "
      f"(target idle <= 150 MB + packs)")
w = r["wave"]
print(f"SUMMARY wave: {w['downloads']}/{w['offered']} devices downloaded in {w['completion_s']} s, "
      f"{w['errors']} errors")
PY
