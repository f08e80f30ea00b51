#!/usr/bin/env bash
# Functional-model inference time (npu-model, `cargo bench -p npu-model --bench run`) against the
# TFLite reference interpreter (tflite-runtime 2.14, OpResolverType.BUILTIN_REF) on the same model
# and the same input, on this machine, reference measured before and after each model's bench.
# Prints medians and the ratio docs/performance.md quotes (target: model <= 1x the reference).
#
#   TFLITE=venv/bin/python bench/npu_model.sh
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
TFLITE="${TFLITE:-${NPUB_REFERENCE_PYTHON:-/work/venvs/tflite/bin/python}}"
models=npu-model/tests/models
est() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['median']['point_estimate']/1000)" "$1"; }
printf '%-10s %14s %14s %8s\n' model "npu-model µs" "reference µs" ratio
for m in small_net kernels fc; do
  src="$models/src/$m.tflite"
  [ -f "$src" ] || src="../shared/fixtures/vela/models/$m.tflite"
  set_dir="$models/ref/$m/set-0"
  before=$("$TFLITE" bench/npu_model/reference_time.py "$src" "$set_dir")
  cargo bench -q -p npu-model --bench run -- --warm-up-time 1 --measurement-time 5 "npu_model/$m\$" >/dev/null 2>&1
  after=$("$TFLITE" bench/npu_model/reference_time.py "$src" "$set_dir")
  ours=$(est "$target/criterion/npu_model/$m/new/estimates.json")
  python3 - "$m" "$ours" "$before" "$after" <<'PY'
import sys
m, ours, before, after = sys.argv[1], *map(float, sys.argv[2:])
ref = (before + after) / 2
print(f"{m:<10} {ours:14.1f} {ref:14.1f} {ours / ref:7.2f}x   (reference {before:.1f} / {after:.1f})")
PY
done
