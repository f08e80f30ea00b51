#!/usr/bin/env bash
# Instructions a "nothing new" poll costs in user space, npub-server against nginx's `return 204`,
# counted by callgrind: a figure that does not move with the machine or its neighbours, where
# `bench/fleet.sh`'s polls/s and CPU per request do (its ratio is the claim; this says where a
# gap comes from). The kernel's share is not counted: both make the same system calls per poll
# (one `recv`, one `send`/`writev`; `strace -c` in docs/performance.md).
#
#   bench/poll_instructions.sh [DEVICES]                              (default 10000)
#
# The server's count is split into SHA-256 of the token (valgrind hides SHA-NI, so the portable
# code runs here: more instructions than on the machine itself), the SQLite worker (the last-seen
# flush: a row per device at most every 30 s, not per poll, so its share depends on how many
# devices the window reaches) and the rest. Each side's idle cost per second (its timers, measured
# in an idle window first) is taken off. Environment: CONNECTIONS (16), RUN_SECONDS (10),
# IDLE_SECONDS (5).
# Needs valgrind and Debian's nginx. Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
devices=${1:-10000}
connections=${CONNECTIONS:-16}
seconds=${RUN_SECONDS:-10}
idle=${IDLE_SECONDS:-5}
target=${CARGO_TARGET_DIR:-target}
command -v valgrind > /dev/null || { echo "bench/poll_instructions.sh: needs valgrind" >&2; exit 1; }
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "bench/poll_instructions.sh: nginx not found (apt-get install nginx-light)" >&2; exit 1; }
cargo build --release -q -p npub-server -p npub-loadgen
SERVER_BIN="$target/release/npub-server"
loadgen="$target/release/npub-loadgen"
cpus=$(nproc)
serve_cpu=0 load_cpu=$((cpus > 1 ? 1 : 0))
lg() { taskset -c "$load_cpu" "$loadgen" "$@"; }

# The scratch directory, removed on exit with start_server's server (stop_server).
bench_work
echo "date=$(date -u +%Y-%m-%dT%H:%MZ) devices=$devices connections=$connections seconds=$seconds $(valgrind --version)"

# Provision the fleet with the server running natively, then count over the same data
# ($work/data, start_server's).
pack_src=../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite
lg make-pack --from "$pack_src" --fill 1 --out "$work/v1.npub" > /dev/null
start_server
facts=$(lg setup --url "$url" --token "$admin" --pack "$work/v1.npub" --devices "$devices" \
    --tokens "$work/tokens")
seq=$(echo "$facts" | tr ' ' '\n' | sed -n 's/^SEQUENCE=//p')
kill_server

# count LABEL URL PATH OUT -- COMMAND...: runs COMMAND under callgrind with instrumentation off,
# warms it up, counts RUN_SECONDS of saturated polls, and prints `requests=N`.
count() {
    local label=$1 base=$2 path=$3 out=$4
    shift 5
    taskset -c "$serve_cpu" valgrind --tool=callgrind --callgrind-out-file="$out" \
        --instr-atstart=no "$@" > "$work/$label.out" 2> "$work/$label.err" &
    pid=$!
    if [ "$label" = server ]; then
        base=$(wait_listening "$pid" "$work/$label.out" "$work/$label.err")
    else
        for _ in $(seq 1 200); do
            curl -s -o /dev/null "$base$path" && break
            read -rt 0.1 < /dev/zero || true
        done
    fi
    lg saturate --connections "$connections" --seconds 3 --tokens "$work/tokens" --label warm \
        --url "$base" --path "$path" --expect 204 > /dev/null
    # An idle window first (dump 1): what the process spends per second on its own (timers,
    # the runtime), taken off the loaded window (dump 2) in proportion to its length.
    local t0 t1 t2
    t0=$(date +%s.%N)
    callgrind_control -i on "$pid" > /dev/null
    read -rt "$idle" < /dev/zero || true
    callgrind_control -d "$pid" > /dev/null
    t1=$(date +%s.%N)
    lg saturate --connections "$connections" --seconds "$seconds" --tokens "$work/tokens" \
        --label "$label" --url "$base" --path "$path" --expect 204 > "$work/$label.load"
    callgrind_control -d "$pid" > /dev/null
    t2=$(date +%s.%N)
    callgrind_control -i off "$pid" > /dev/null
    echo "$t0 $t1 $t2" > "$work/$label.times"
    kill -TERM "$pid"
    # nginx without a master process under valgrind may not take TERM at once.
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; read -rt 0.1 < /dev/zero || true; done
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
    grep -o "errors=0" "$work/$label.load" > /dev/null \
        || { echo "bench/poll_instructions.sh: $label run had errors:" >&2; cat "$work/$label.load" >&2; exit 1; }
    grep -o "requests=[0-9]*" "$work/$label.load"
}

# The environment before the function, not through `env`: valgrind does not follow an exec.
# Not start_server: the server runs under callgrind, which `count` drives.
server_req=$(NPUB_ADMIN_TOKEN="$admin" NPUB_LOG=warn TOKIO_WORKER_THREADS=1 \
    count server "" "/api/v1/device/manifest?seq=$seq" "$work/server.cg" -- \
    "$SERVER_BIN" --data-dir "$work/data" --listen 127.0.0.1:0)

nport=$(free_port)
nginx_conf "$work/nginx" "$nport" 1 off
nginx_req=$(count nginx "http://127.0.0.1:$nport" /poll "$work/nginx.cg" -- \
    "$nginx" -p "$work/nginx" -c "$work/nginx/nginx.conf")

python3 - "$work" "${server_req#requests=}" "${nginx_req#requests=}" <<'PY'
import re, subprocess, sys
work, server_req, nginx_req = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def annotate(path, inclusive):
    args = ["callgrind_annotate", "--threshold=100"] + (["--inclusive=yes"] if inclusive else []) + [path]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout.splitlines()
def num(line):
    return int(line.split()[0].replace(",", ""))
def total(path):
    return next(num(l) for l in annotate(path, False) if "PROGRAM TOTALS" in l)
def inclusive(path, pattern):
    return sum(num(l) for l in annotate(path, True) if re.search(pattern, l))
def loaded(label):
    """Instructions of the loaded window less the idle rate over its length, and the idle rate."""
    t0, t1, t2 = (float(t) for t in open(f"{work}/{label}.times").read().split())
    idle_rate = total(f"{work}/{label}.cg.1") / (t1 - t0)
    return total(f"{work}/{label}.cg.2") - idle_rate * (t2 - t1), idle_rate
s, s_idle = loaded("server")
sha = inclusive(f"{work}/server.cg.2", r"sha2::sha256::compress256 \[")
sql = inclusive(f"{work}/server.cg.2", r"sqlx-sqlite.*worker\.rs:std::sys::backtrace::__rust_begin_short_backtrace")
n, n_idle = loaded("nginx")
rest = s - sha - sql
print(f"RESULT label=server requests={server_req} instr_per_poll={s / server_req:.0f} sha256={sha / server_req:.0f} "
      f"sqlite_flush={sql / server_req:.0f} rest={rest / server_req:.0f} idle_instr_per_s={s_idle:.0f}")
print(f"RESULT label=nginx requests={nginx_req} instr_per_poll={n / nginx_req:.0f} idle_instr_per_s={n_idle:.0f}")
print(f"SUMMARY instructions per poll in user space: server {rest / server_req:.0f} "
      f"(+ SHA-256 {sha / server_req:.0f} portable, + last-seen flush {sql / server_req:.0f}) "
      f"vs nginx {n / nginx_req:.0f}")
PY
