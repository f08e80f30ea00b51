#!/usr/bin/env bash
# Paged, filtered listings with a large fleet (issue 36 item 1: every page and filter ≤ 50 ms of
# server time at 100,000 devices). Provisions N devices (10 groups, three accelerators, names
# "Unit <n>") through the API on the embedded default (SQLite), writes an audit entry per
# device, then asks each listing below R times over loopback and prints the median and p95 of the
# whole request (client included: an upper bound of the server's time).
#
#   bench/listing.sh [DEVICES] [REPEATS]                          (default 100000, 20)
#
# Server binary: SERVER_BIN, else target/release/npub-server (built here). Not part of
# `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
devices=${1:-100000}
repeats=${2:-20}
start_server
echo "# bench/listing.sh $devices $repeats at $(git rev-parse --short HEAD), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$url" "$admin" "$devices" "$repeats" <<'PY'
import json, statistics, sys, time, urllib.request
sys.path.insert(0, "bench")
import benchlib
url, token, n, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
H = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
def call(method, path, body=None):
    req = urllib.request.Request(url + path, method=method, headers=H,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req) as r:
        return r.status, r.read()
accels = ["ethos-u55-256", "ethos-u55-128", "ethos-u55-64"]
benchlib.provision(url, token, n, lambda i: {
    "id": f"dev-{i:06d}", "name": f"Unit {i}", "group": f"g{i % 10}", "accelerator": accels[i % 3]})
_, first = call("GET", "/api/v1/devices?limit=100")
deep = json.loads(first)["next_cursor"]
# A cursor deep into the list: the page after device n/2.
mid = "".join(f"{b:02x}" for b in f"dev-{n // 2:06d}".encode())
queries = [
    ("first page", "/api/v1/devices?limit=100"),
    ("second page", f"/api/v1/devices?limit=100&cursor={deep}"),
    ("a page in the middle", f"/api/v1/devices?limit=100&cursor={mid}"),
    ("group", "/api/v1/devices?group=g7&limit=100"),
    ("group, middle", f"/api/v1/devices?group=g7&limit=100&cursor={mid}"),
    ("status new", "/api/v1/devices?status=new&limit=100"),
    ("status failed (none)", "/api/v1/devices?status=failed&limit=100"),
    ("accelerator", "/api/v1/devices?accelerator=ethos-u55-64&limit=100"),
    ("version (none run it)", "/api/v1/devices?version=9.9.9&limit=100"),
    ("not seen 1 min (all)", "/api/v1/devices?not_seen_minutes=0&limit=100"),
    ("not seen 1 day (none)", "/api/v1/devices?not_seen_minutes=1440&limit=100"),
    ("text, common", "/api/v1/devices?q=unit%201&limit=100"),
    ("text, rare", "/api/v1/devices?q=unit%2099999&limit=100"),
    ("group + status + accelerator", "/api/v1/devices?group=g3&status=new&accelerator=ethos-u55-128&limit=100"),
    ("audit, first page", "/api/v1/audit?limit=100"),
    ("audit by action", "/api/v1/audit?action=device.create&limit=100"),
    ("audit by action prefix", "/api/v1/audit?action=device.&limit=100"),
    ("audit since", "/api/v1/audit?since=2000-01-01T00:00:00Z&limit=100"),
]
worst = 0.0
for label, path in queries:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        status, body = call("GET", path)
        times.append((time.perf_counter() - t) * 1000)
        assert status == 200, (path, status)
    times.sort()
    p50 = statistics.median(times)
    p95 = benchlib.percentile(times, 95)
    worst = max(worst, p95)
    items = len(json.loads(body)["items"])
    print(f"RESULT {label:32s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  ({items} items)")
print(f"SUMMARY worst p95 {worst:.2f} ms over {len(queries)} listings at {n} devices (target 50 ms)")
PY
