#!/usr/bin/env bash
# Device status reports with a large fleet: what one report costs the server while a rollout
# runs. Provisions N devices (10 groups) through the API on the embedded default (SQLite),
# uploads a pack, then for two deployments (group g0: one batch of 100 %; group g1: batches
# [50, 100], thresholds that never open the second) has R devices of the group poll and report
# `downloading` then `installed`, and prints the median and p95 of each kind of report (the whole
# request over loopback, client included), then times the dashboard's requests with both
# rollouts active.
#
#   bench/reports.sh [DEVICES] [REPORTERS]                         (default 100000, 200)
#
# Server binary: SERVER_BIN, else target/release/npub-server (built here). Run it once with the
# binary before a change as SERVER_BIN and once after, back to back. Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
devices=${1:-100000}
reporters=${2:-200}
pack=../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite
start_server
echo "# bench/reports.sh $devices $reporters, $SERVER_BIN, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$url" "$admin" "$devices" "$reporters" "$pack" <<'PY'
import json, statistics, sys, time
sys.path.insert(0, "bench")
import benchlib
url, admin, n, reporters, pack = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def call(method, path, token, body=None, raw=None, ctype="application/json"):
    return benchlib.call(url, method, path, token, body, raw, ctype)

tokens = benchlib.provision(url, admin, n, lambda i: {
    "id": f"dev-{i:06d}", "group": f"g{i % 10}", "accelerator": "ethos-u55-256"})
benchlib.upload(url, admin, pack)

def rollout(group, policy):
    timings = benchlib.rollout(url, admin, tokens, n, group, policy, reporters)
    kind = "staged [50, 100]" if policy else "one batch"
    for state, times in timings.items():
        times.sort()
        p50 = statistics.median(times)
        p95 = benchlib.percentile(times, 95)
        print(f"RESULT {kind:17s} {state:12s} p50 {p50:8.2f} ms  p95 {p95:8.2f} ms  ({len(times)} reports)")

rollout("g0", None)
rollout("g1", {"batches": [50, 100], "success_threshold": 1.0, "failure_threshold": 1.0})

# The dashboard with these two rollouts active: what an operator's page load asks. The summary
# is asked 20 times, as a dashboard left open does: its first answer apart (after a fleet change
# it reads and ranks each rollout's group), then the median, p95 and max of the other 19.
times = []
for _ in range(20):
    t = time.perf_counter()
    status, _ = call("GET", "/api/v1/fleet/summary", admin)
    times.append((time.perf_counter() - t) * 1000)
    assert status == 200, status
first, rest = times[0], sorted(times[1:])
print(f"RESULT {'/api/v1/fleet/summary x20':34s} first {first:8.2f} ms  then median {statistics.median(rest):8.2f} ms"
      f"  p95 {benchlib.percentile(rest, 95):8.2f} ms  max {rest[-1]:8.2f} ms")
for path in ("/api/v1/fleet/summary", "/api/v1/deployments/1/timeline", "/api/v1/deployments/2"):
    times = []
    for _ in range(5):
        t = time.perf_counter()
        status, _ = call("GET", path, admin)
        times.append((time.perf_counter() - t) * 1000)
        assert status == 200, (path, status)
    print(f"RESULT {path:34s} median {statistics.median(times):8.2f} ms  max {max(times):8.2f} ms  (5 requests)")
PY
