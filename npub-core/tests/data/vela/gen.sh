#!/usr/bin/env bash
# Regenerates every file in this directory. Needs python3 (3.11 was used) and network access to PyPI.
# Usage: bash gen.sh [VENV_DIR]   (run from anywhere; writes next to this script)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shared="$here/../../../../../shared/fixtures/vela"
venv="${1:-/tmp/vela-env}"
[ -x "$venv/bin/vela" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q ethos-u-vela==5.2.0; }
py="$venv/bin/python"; vela="$venv/bin/vela"
out="$(mktemp -d)"
cd "$here"

# Models with operators Vela leaves on the CPU.
"$py" gen_test_models.py "$shared/scripts" models
for m in cpu_tail two_parts; do
  "$vela" --accelerator-config ethos-u55-256 --output-dir "$out" "models/$m.tflite" >/dev/null
  cp "$out/${m}_vela.tflite" .
done
"$py" multi_ethos_u.py two_parts_vela.tflite multi_ethos_u_vela.tflite

# The shared fixtures' LUT model (sigmoid: a lookup table DMA'd into SHRAM), both output formats.
mkdir -p lut_u55_256
"$vela" --accelerator-config ethos-u55-256 --output-dir "$out" "$shared/models/lut.tflite" >/dev/null
"$vela" --accelerator-config ethos-u55-256 --output-format raw --output-dir "$out" "$shared/models/lut.tflite" >/dev/null
cp "$out/lut_vela.tflite" "$out/lut_vela.npz" lut_u55_256/

# conv1 for every accelerator configuration Vela knows (config word -> accel mapping).
mkdir -p accel
for a in ethos-u55-32 ethos-u55-64 ethos-u55-128 ethos-u55-256 ethos-u65-256 ethos-u65-512; do
  "$vela" --accelerator-config "$a" --output-dir "$out/$a" "$shared/models/conv1.tflite" >/dev/null
  cp "$out/$a/conv1_vela.tflite" "accel/conv1_${a}_vela.tflite"
done
rm -rf "$out"
"$venv/bin/pip" list 2>/dev/null | grep -Ei '^(ethos-u-vela|flatbuffers|numpy) ' > versions.txt
