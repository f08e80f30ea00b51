#!/usr/bin/env bash
# Regenerates the functional model's test fixtures (committed; `cargo test` needs no Python):
#   src/*.tflite                      the models of gen.py (seeded, deterministic)
#   vela/<version>/u55_<macs>/*.tflite Vela's output for each model, Vela version and U55 size
#   ref/<model>/set-<k>/input-<i>.bin  seeded random inputs
#   ref/<model>/set-<k>/output-<j>.bin TFLite's reference kernels' outputs for them
# The shared fixture models (conv1, two_io, lut, small_net) are compiled and referenced too.
#
#   VELA5=venv/bin VELA4=venv/bin TFLITE=venv/bin/python npu-model/tests/models/build.sh
#
# VELA5 needs ethos-u-vela 5.2.0, VELA4 ethos-u-vela 4.4.1, TFLITE tflite-runtime 2.14 and
# numpy < 2 (see docs/performance.md for the venvs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shared="$here/../../../../shared/fixtures/vela/models"
VELA5="${VELA5:-/work/venvs/vela5/bin}"
VELA4="${VELA4:-/work/venvs/vela4/bin}"
TFLITE="${TFLITE:-/work/venvs/tflite/bin/python}"
SETS=3
cd "$here"

"$VELA5/python" gen.py src >/dev/null
models=(src/*.tflite "$shared/conv1.tflite" "$shared/two_io.tflite" "$shared/lut.tflite")
rm -rf vela ref
for ver in 5.2.0 4.4.1; do
  bin="$VELA5"; [ "$ver" = 4.4.1 ] && bin="$VELA4"
  for macs in 32 64 128 256; do
    out="vela/$ver/u55_$macs"
    for m in "${models[@]}"; do
      "$bin/vela" --accelerator-config "ethos-u55-$macs" --output-dir "$out" "$m" >/dev/null
    done
    rm -f "$out"/*.csv
  done
done
# small_net (137 KB of weights) once per Vela version, on the size the shared fixtures lack.
"$VELA5/vela" --accelerator-config ethos-u55-64 --output-dir vela/5.2.0/u55_64 "$shared/small_net.tflite" >/dev/null
"$VELA4/vela" --accelerator-config ethos-u55-256 --output-dir vela/4.4.1/u55_256 "$shared/small_net.tflite" >/dev/null
rm -f vela/*/*/*.csv

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for m in "${models[@]}" "$shared/small_net.tflite"; do
  name="$(basename "$m" .tflite)"
  # Seeded inputs: the model's own input shapes and dtypes, uniform bytes.
  "$TFLITE" - "$m" "ref/$name" "$SETS" <<'PY'
import os, sys
import numpy as np
from tflite_runtime.interpreter import Interpreter
model, root, sets = sys.argv[1], sys.argv[2], int(sys.argv[3])
ins = Interpreter(model_path=model).get_input_details()
rng = np.random.default_rng(sum(map(ord, os.path.basename(model))))
for k in range(sets):
    d = os.path.join(root, f"set-{k}")
    os.makedirs(d, exist_ok=True)
    for i, t in enumerate(ins):
        n = int(np.prod(t["shape"])) * np.dtype(t["dtype"]).itemsize
        rng.integers(0, 256, size=n, dtype=np.uint8).tofile(os.path.join(d, f"input-{i}.bin"))
PY
  "$TFLITE" "$here/../../reference/reference.py" "$m" "ref/$name" >/dev/null
done
echo "fixtures rebuilt in $here"
