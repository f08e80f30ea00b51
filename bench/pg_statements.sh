#!/usr/bin/env bash
# The longest statements the server runs on PostgreSQL with a large fleet: what the request-scale
# limits of server/src/db/timeouts.rs must stay above. Starts deploy/local-cluster.sh (PostgreSQL,
# s3s-fs, two replicas) with PostgreSQL logging every statement of 10 ms or more, provisions N
# devices (10 groups) through replica A, uploads a pack, deploys to two groups (one of them staged),
# has R devices of each poll and report, asks the dashboard's requests and listings, restarts
# replica B (its start reads every device for the poll snapshot), then prints the slowest
# statements PostgreSQL logged, slowest first.
#
#   bench/pg_statements.sh [DEVICES] [REPORTERS]                   (default 100000, 50)
#
# Server binary: NPUB_SERVER_BIN, else target/debug/npub-server (the statements' time is
# PostgreSQL's own, whatever the build). Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
devices=${1:-100000}
reporters=${2:-50}
pack=../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite
tmp=$(mktemp -d /tmp/npub-pg-statements.XXXXXX)
export NPUB_CLUSTER_DIR=$tmp/cluster
chmod 755 "$tmp"
trap 'deploy/local-cluster.sh down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
env_lines=$(deploy/local-cluster.sh up)
field() { sed -n "s/^$1=//p" <<<"$env_lines"; }
a=$(field REPLICA_A)
admin=$(field ADMIN_TOKEN)
db_url=$(field DATABASE_URL)
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
"$pg_bin/psql" -q -d "$db_url" -c "ALTER SYSTEM SET log_min_duration_statement = 10" \
    -c "SELECT pg_reload_conf()" >/dev/null
echo "# bench/pg_statements.sh $devices $reporters, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$a" "$admin" "$devices" "$reporters" "$pack" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import benchlib
url, admin, n, reporters, pack = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def call(method, path, token, body=None):
    return benchlib.call(url, method, path, token, body)

tokens = benchlib.provision(url, admin, n, lambda i: {
    "id": f"dev-{i:06d}", "group": f"g{i % 10}", "accelerator": "ethos-u55-256"})
benchlib.upload(url, admin, pack)
for group, policy in (("g0", None), ("g1", {"batches": [50, 100], "success_threshold": 1.0,
                                             "failure_threshold": 1.0})):
    benchlib.rollout(url, admin, tokens, n, group, policy, reporters)
for path in ("/api/v1/fleet/summary", "/api/v1/deployments", "/api/v1/deployments/1",
             "/api/v1/deployments/1/timeline", "/api/v1/devices", "/api/v1/devices?group=g3",
             "/api/v1/devices?q=dev-05", "/api/v1/devices?not_seen_minutes=0", "/api/v1/devices?status=failed", "/api/v1/audit"):
    status, answer = call("GET", path, admin)
    assert status == 200, (path, status, answer)
PY
deploy/local-cluster.sh kill b >/dev/null
deploy/local-cluster.sh start b >/dev/null
# The last-seen flush of the reporters' polls (every 10 s by default).
sleep 11
echo "# per statement (its first 100 characters): the slowest run PostgreSQL logged, in ms, and how many runs took 10 ms or more"
cat "$NPUB_CLUSTER_DIR"/pg/*.log | python3 -c '
import re, sys
worst = {}
for line in sys.stdin:
    m = re.search(r"duration: ([0-9.]+) ms +(?:statement|(?:execute|parse|bind) [^:]*): *(.*)", line)
    if m:
        ms, sql = float(m.group(1)), " ".join(m.group(2).split())[:100]
        top, n = worst.get(sql, (0.0, 0))
        worst[sql] = (max(top, ms), n + 1)
for sql, (top, n) in sorted(worst.items(), key=lambda kv: -kv[1][0])[:12]:
    print(f"{top:9.1f}  {n:5d}  {sql}")
'
