#!/usr/bin/env bash
# The upload pipeline against the least a server could do with the same file (issue #17 point 4):
# one pack uploaded to a release npub-server (received, fsynced in staging, validated by
# npub-core, hashed, renamed into the store, recorded), against `sha256sum` + `cp` + `sync` of the
# same file into the same filesystem (hashed, copied, made durable). A B A B pairs, each pair its
# own pack (different filler, different digest, so nothing is deduplicated); prints each pair's
# ratio, the median and the spread.
#
#   bench/upload.sh [PAIRS] [WEIGHTS_BYTES]       (defaults 9 and 16777216: a 16 MiB pack)
#
# Both sides run on the same cores (the server's worker count 1, pinned with curl to CPU 0 on a
# multi-core machine; the baseline pinned there too). Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
pairs=${1:-9}
weights_bytes=${2:-16777216}
target=${CARGO_TARGET_DIR:-target}
command -v curl >/dev/null || { echo "bench/upload.sh: needs curl" >&2; exit 1; }
cargo build --release -q -p npub-server -p npub-loadgen
SERVER_BIN="$target/release/npub-server"
loadgen="$target/release/npub-loadgen"
pin="" cpu=""
[ "$(nproc)" -ge 2 ] && pin="taskset -c 0" cpu=0

bench_work

pack_src=../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite
for i in $(seq 1 "$pairs"); do
    "$loadgen" make-pack --from "$pack_src" --weights-bytes "$weights_bytes" --fill "$i" \
        --out "$work/p$i.npub" > /dev/null
done
pack_bytes=$(stat -c %s "$work/p1.npub")

TOKIO_WORKER_THREADS=1 SERVER_CPUS=$cpu start_server --max-upload-bytes $((pack_bytes * 2))
curl -sf -o /dev/null -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    -d '{"name":"bench"}' "$url/api/v1/models"

echo "date=$(date -u +%Y-%m-%dT%H:%MZ) pairs=$pairs pack_bytes=$pack_bytes $(uptime | sed 's/.*load/load/')"
mkdir -p "$work/data/copies"
now() { date +%s.%N; }
for i in $(seq 1 "$pairs"); do
    t0=$(now)
    status=$($pin curl -s -o "$work/up.json" -w '%{http_code}' -H "Authorization: Bearer $admin" \
        --data-binary "@$work/p$i.npub" "$url/api/v1/models/bench/versions/1.0.$i")
    t1=$(now)
    [ "$status" = 201 ] || { echo "upload $i: HTTP $status: $(cat "$work/up.json")" >&2; exit 1; }
    $pin sha256sum "$work/p$i.npub" > /dev/null
    $pin cp "$work/p$i.npub" "$work/data/copies/$i.npub"
    $pin sync "$work/data/copies/$i.npub"
    t2=$(now)
    python3 -c "
s, b = $t1 - $t0, $t2 - $t1
print(f'RESULT label=upload#$i server_s={s:.4f} baseline_s={b:.4f} server_MBps={$pack_bytes / s / 1e6:.1f} baseline_MBps={$pack_bytes / b / 1e6:.1f} ratio={b / s:.2f}')"
done | tee "$work/results"
python3 - "$work/results" <<'PY'
import statistics, sys
rows = [dict(kv.split("=", 1) for kv in l.split()[1:]) for l in open(sys.argv[1]) if l.startswith("RESULT")]
ratios = [float(r["ratio"]) for r in rows]
s = statistics.median(float(r["server_MBps"]) for r in rows)
b = statistics.median(float(r["baseline_MBps"]) for r in rows)
print(f"SUMMARY upload: server {s:.0f} MB/s vs sha256sum+cp+sync {b:.0f} MB/s (medians); "
      f"speed ratio median {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]")
PY
echo "end $(uptime | sed 's/.*load/load/')"
