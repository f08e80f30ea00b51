#!/usr/bin/env bash
# Upload-burst memory benchmark (issues #11 point 5, #31 point 3): BURSTS times, UPLOADS clients
# upload a pack (the conv1 command stream with its weights region padded to PACK_BYTES) to one
# release npub-server at once; prints the server's RSS when idle, then for every burst its peak
# RSS (VmHWM, reset before the burst) and its RSS once the burst is answered, each also as MiB
# above idle. Targets: every peak <= 64 MiB above idle, and no growth from burst to burst.
#
#   bench/upload_rss.sh [UPLOADS] [PACK_BYTES] [BURSTS]      (defaults 64 16777216 10)
#
# SERVER_BIN=path runs that binary instead of building this tree's (a baseline run side by
# side). The server runs with --max-uploads UPLOADS so that every upload of a burst is taken
# (the default, 16, answers the rest 503 before reading them). Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
uploads=${1:-64}
pack_bytes=${2:-16777216}
bursts=${3:-10}
target=${CARGO_TARGET_DIR:-target}
command -v curl >/dev/null || { echo "bench/upload_rss.sh: needs curl" >&2; exit 1; }

if [ -z "${SERVER_BIN:-}" ]; then
    cargo build --release -q --locked -p npub-server
    SERVER_BIN="$target/release/npub-server"
fi
case_dir=../shared/fixtures/vela/cases/conv1_u55_256
[ -d "$case_dir" ] || case_dir=/work/shared/fixtures/vela/cases/conv1_u55_256

bench_work

# The pack, as npub-core's build_pack lays it out: header, three region descriptors (baked
# weights, scratch 704, scratch 0), the command stream, the weights padded with zeros.
python3 - "$case_dir" "$pack_bytes" "$work/vision.npub" <<'PY'
import struct, sys
case, want, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cmd = open(f"{case}/cmd.bin", "rb").read()
weights = open(f"{case}/weights.bin", "rb").read()
align = lambda n: (n + 15) // 16 * 16
cmd_offset = align(32 + 3 * 16)
data_offset = align(cmd_offset + len(cmd))
weights += bytes(max(0, want - data_offset - len(weights)))
total = data_offset + len(weights)
table = struct.pack("<4I", 0, 1, len(weights), data_offset)          # weights, baked
table += struct.pack("<4I", 1, 0, 704, 0) + struct.pack("<4I", 1, 0, 0, 0)  # scratch, runtime
payload = table + bytes(cmd_offset - 32 - len(table)) + cmd
payload += bytes(data_offset - 32 - len(payload)) + weights
h = 0x811C9DC5
for b in payload:
    h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
header = struct.pack("<8I", 0x3155504E, 1, total, 3, cmd_offset, len(cmd), 4, h)
open(out, "wb").write(header + payload)
PY

start_server --max-uploads "$uploads" --min-free-space 0
auth=(-H "Authorization: Bearer $admin")

curl -sf "${auth[@]}" -H 'content-type: application/json' -d '{"name":"vision"}' \
    "$url/api/v1/models" > /dev/null
# One upload first: the pack is valid, and the server has touched every code path once.
curl -sf "${auth[@]}" --data-binary "@$work/vision.npub" \
    "$url/api/v1/models/vision/versions/warmup" > /dev/null

kib() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$pid/status"; }
sleep 1
idle=$(kib VmRSS)
echo "pack:        $(stat -c %s "$work/vision.npub") bytes, $bursts bursts of $uploads concurrent uploads"
echo "idle RSS:    $((idle / 1024)) MiB"
echo "burst  answers            peak MiB (above idle)  after MiB (above idle)  after: anon/file MiB"
worst=0
for b in $(seq 1 "$bursts"); do
    echo 5 > "/proc/$pid/clear_refs"   # VmHWM := VmRSS
    : > "$work/codes"
    for i in $(seq 1 "$uploads"); do
        curl -s -o /dev/null -w '%{http_code}\n' "${auth[@]}" --data-binary "@$work/vision.npub" \
            "$url/api/v1/models/vision/versions/b$b-$i" >> "$work/codes" &
    done
    wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
    peak=$(kib VmHWM)
    sleep 1
    after=$(kib VmRSS)
    [ $((peak - idle)) -gt "$worst" ] && worst=$((peak - idle))
    printf '%5d  %-18s %8d (%4d)          %8d (%4d)           %d/%d\n' "$b" \
        "$(sort "$work/codes" | uniq -c | awk '{printf "%sx%s ", $1, $2}')" \
        $((peak / 1024)) $(((peak - idle) / 1024)) $((after / 1024)) $(((after - idle) / 1024)) \
        $(($(kib RssAnon) / 1024)) $(($(kib RssFile) / 1024))
done
echo "worst peak:  $((worst / 1024)) MiB above idle (target <= 64)"
