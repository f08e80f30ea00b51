#!/usr/bin/env bash
# What the upload proof (issue 37) adds to an upload: the 1 MB-class model (small_net: its Vela
# output packs to 1,180,496 bytes) uploaded R times with its source model (multipart `source`:
# the pack run by the functional model and the source by TFLite's reference kernels, on the
# server's default number of seeded inputs) and R times without, alternating A B A B, to one
# release server on the embedded default. Prints each upload's wall time over loopback (client
# included) and the medians.
#
#   bench/proof.sh [REPEATS]                                                   (default 5)
#
# Server binary: SERVER_BIN, else target/release/npub-server (built here). The reference
# interpreter: NPUB_REFERENCE_VENV (default ~/.cache/npub/tflite-2.14, as .ci/run makes it).
# Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
repeats=${1:-5}
venv=${NPUB_REFERENCE_VENV:-$HOME/.cache/npub/tflite-2.14}
fixtures=../shared/fixtures/vela
start_server --reference-python "$venv/bin/python"
echo "# bench/proof.sh $repeats, $SERVER_BIN, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$url" "$admin" "$repeats" "$fixtures" <<'PY'
import json, statistics, sys, time, uuid
sys.path.insert(0, "bench")
import benchlib
url, admin, repeats, fixtures = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pack = open(f"{fixtures}/vela_out/u55_256/tflite/small_net_vela.tflite", "rb").read()
source = open(f"{fixtures}/models/small_net.tflite", "rb").read()

def call(method, path, data, ctype):
    return benchlib.call(url, method, path, admin, raw=data, ctype=ctype)

def form(parts):
    b = uuid.uuid4().hex
    body = b""
    for name, data in parts:
        body += (f"--{b}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{name}.tflite\"\r\n"
                 f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
    return body + f"--{b}--\r\n".encode(), f"multipart/form-data; boundary={b}"

assert call("POST", "/api/v1/models", json.dumps({"name": "kws"}).encode(), "application/json")[0] == 201
times = {"without": [], "with source": []}
n = 0
for i in range(repeats):
    for kind in ("without", "with source"):
        n += 1
        parts = [("pack", pack)] + ([("source", source)] if kind == "with source" else [])
        body, ctype = form(parts)
        t = time.perf_counter()
        status, answer = call("POST", f"/api/v1/models/kws/versions/1.0.{n}", body, ctype)
        took = (time.perf_counter() - t) * 1000
        assert status == 201, (status, answer)
        proof = json.loads(answer).get("proof")
        times[kind].append(took)
        summary = "" if proof is None else json.dumps(proof)[:120]
        print(f"RUN {kind:12s} {took:8.1f} ms  {summary}")
a, b = statistics.median(times["without"]), statistics.median(times["with source"])
print(f"RESULT upload without source: median {a:.1f} ms; with source: median {b:.1f} ms; "
      f"the proof adds {b - a:.1f} ms ({b / a:.1f}x)")
PY
