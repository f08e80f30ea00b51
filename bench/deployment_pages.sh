#!/usr/bin/env bash
# A deployment's own pages with a large rollout: what `GET /api/v1/deployments/{id}`, its
# `…/timeline`, its `…/devices` pages and the list `GET /api/v1/deployments` cost the server while an operator watches it. Provisions
# N devices in ONE group (the worst case: a rollout to the whole fleet) through the API on the
# embedded default (SQLite), uploads a pack, deploys it to the group in batches [5, 25, 100],
# has R offered devices report `installed` and R/4 report `failed`, then asks each route below
# 20 times and prints the first answer apart (after the reports nothing is kept yet on a server
# that caches) and the median, p95 and max of the other 19 (the whole request over loopback,
# client included: an upper bound of the server's time). Last, a digest of the answers with
# their times left out, so that two binaries can be shown to answer alike (ANSWERS line; with
# ANSWERS_OUT=file the answers themselves are appended there, to diff). Then the first request
# after each of 30 fleet changes (AFTER-CHANGE lines: renames, provisionings, moves).
#
#   bench/deployment_pages.sh [DEVICES] [REPORTERS]                 (default 100000, 200)
#
# Server binary: SERVER_BIN, else target/release/npub-server (built here). Compare two binaries
# with bench/ab.sh. Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
devices=${1:-100000}
reporters=${2:-200}
pack=../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite
start_server
echo "# bench/deployment_pages.sh $devices $reporters, $SERVER_BIN, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$url" "$admin" "$devices" "$reporters" "$pack" "${ANSWERS_OUT:-}" <<'PY'
import hashlib, json, statistics, sys, time
sys.path.insert(0, "bench")
import benchlib
url, admin, n, reporters, pack = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
answers_out = sys.argv[6]

def call(method, path, token, body=None, raw=None, ctype="application/json"):
    return benchlib.call(url, method, path, token, body, raw, ctype)

tokens = benchlib.provision(url, admin, n, lambda i: {
    "id": f"dev-{i:06d}", "group": "fleet",
    "accelerator": "ethos-u55-256" if i % 50 else "ethos-u55-128"})
benchlib.upload(url, admin, pack)
status, made = call("POST", "/api/v1/deployments", admin,
                    {"model": "kws", "version": "1.0.0", "group": "fleet",
                     "rollout": {"batches": [5, 25, 100], "success_threshold": 1.0,
                                 "failure_threshold": 1.0}})
assert status == 201, (status, made)
made = json.loads(made)
dep, sequence = made["id"], made["sequence"]
done = {"installed": 0, "failed": 0}
want = {"installed": reporters, "failed": reporters // 4}
for i in range(n):
    state = "installed" if done["installed"] < want["installed"] else "failed"
    if done[state] == want[state]:
        break
    token = tokens.get(f"dev-{i:06d}")
    status, _ = call("GET", "/api/v1/device/manifest?seq=0", token)
    if status != 200:
        continue  # in a batch not open, or another accelerator
    status, answer = call("POST", "/api/v1/device/status", token, {"sequence": sequence, "state": state})
    assert status == 204, (status, answer)
    done[state] += 1
print(f"deployment {dep}: {done['installed']} installed, {done['failed']} failed reports")

_, first = call("GET", f"/api/v1/deployments/{dep}/devices?limit=100", admin)
deep = json.loads(first)["next_cursor"]
# A cursor deep into the list: position n/2 (cursors are positions, hex of the decimal text).
mid = "".join(f"{b:02x}" for b in str(n // 2).encode())
routes = [
    f"/api/v1/deployments/{dep}",
    f"/api/v1/deployments/{dep}/timeline",
    f"/api/v1/deployments/{dep}/devices?limit=100",
    f"/api/v1/deployments/{dep}/devices?limit=100&cursor={deep}",
    f"/api/v1/deployments/{dep}/devices?limit=100&cursor={mid}",
    f"/api/v1/deployments/{dep}/devices?limit=100&state=failed",
    f"/api/v1/deployments/{dep}/devices?limit=100&state=skipped&cursor={mid}",
    "/api/v1/deployments",
]

def scrub(v):
    """An answer without its times and signing key id (they differ from one run to the next)."""
    if isinstance(v, dict):
        return {k: scrub(x) for k, x in v.items()
                if not (k.endswith("_at") or k.endswith("_at_ms") or k in ("at", "points", "key_id"))}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    return v

digest = hashlib.sha256()
for path in routes:
    times, body = [], None
    for _ in range(20):
        t = time.perf_counter()
        status, body = call("GET", path, admin)
        times.append((time.perf_counter() - t) * 1000)
        assert status == 200, (path, status, body)
    answer = json.dumps(scrub(json.loads(body)), sort_keys=True, indent=1)
    digest.update(answer.encode())
    if answers_out:
        with open(answers_out, "a") as f:
            f.write(f"== {path}\n{answer}\n")
    first, rest = times[0], sorted(times[1:])
    label = path.replace(f"/api/v1/deployments/{dep}", "{id}")
    print(f"RESULT {label:58s} first {first:8.2f} ms  median {statistics.median(rest):8.2f} ms"
          f"  p95 {benchlib.percentile(rest, 95):8.2f} ms  max {rest[-1]:8.2f} ms")
print(f"ANSWERS {digest.hexdigest()[:16]}")

# The first request after a fleet change (a new generation, so nothing kept answers as it is): a
# target renamed, a device provisioned into the group, a target moved out, 10 of each; which
# route is asked first after the change turns round, and only that first request is counted.
after_routes = [
    f"/api/v1/deployments/{dep}",
    f"/api/v1/deployments/{dep}/devices?limit=100",
    "/api/v1/deployments",
]
changes = []
for k in range(10):
    changes.append(("rename", "PATCH", f"/api/v1/devices/dev-{k + 1:06d}", {"name": f"renamed-{k}"}))
    changes.append(("provision", "POST", "/api/v1/devices",
                    {"devices": [{"id": f"late-{k}", "group": "fleet", "accelerator": "ethos-u55-256"}]}))
    changes.append(("move out", "PATCH", f"/api/v1/devices/dev-{k + 101:06d}", {"group": "elsewhere"}))
after = {}
for i, (kind, method, path, body) in enumerate(changes):
    status, answer = call(method, path, admin, body)
    assert status in (200, 201), (kind, status, answer)
    route = after_routes[i % len(after_routes)]
    t = time.perf_counter()
    status, answer = call("GET", route, admin)
    assert status == 200, (route, status, answer)
    label = route.replace(f"/api/v1/deployments/{dep}", "{id}")
    after.setdefault(label, []).append((time.perf_counter() - t) * 1000)
for label, times in after.items():
    times.sort()
    print(f"AFTER-CHANGE {label:52s} n {len(times):2d}  median {statistics.median(times):8.2f} ms"
          f"  max {times[-1]:8.2f} ms")
PY
