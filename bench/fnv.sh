#!/usr/bin/env bash
# FNV-1a and parse+bind throughput of npub-core against a plain `gcc -O3` C FNV-1a loop over a
# buffer of the same length, run side by side on this machine. Prints bytes/s and the ratios the
# README quotes (target: Rust FNV-1a >= 0.9x C; parse+bind <= 1.1x FNV-1a alone).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
cargo bench -p npub-core --bench format -- --warm-up-time 1 --measurement-time 4 npu1 >/dev/null
est() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['median']['point_estimate'])" "$1"; }
dir=$(ls -d "$target"/criterion/npu1/fnv1a/* | head -1)
len=$(basename "$dir")
rust_fnv=$(est "$dir/new/estimates.json")
rust_pb=$(est "$(ls -d "$target"/criterion/npu1/parse_bind/* | head -1)/new/estimates.json")
gcc -O3 -o "$target/fnv1a_c" bench/fnv/fnv1a.c
c_fnv=$("$target/fnv1a_c" "$len" 300)
python3 - "$len" "$rust_fnv" "$rust_pb" "$c_fnv" <<'PY'
import sys
n, rf, rp, cf = (float(x) for x in sys.argv[1:])
gbs = lambda ns: n / ns  # bytes per ns = GB/s
print(f"payload bytes           {int(n)}")
print(f"C gcc -O3 FNV-1a        {gbs(cf):.3f} GB/s")
print(f"npub-core FNV-1a        {gbs(rf):.3f} GB/s   ratio vs C {cf/rf:.3f}x (target >= 0.9)")
print(f"npub-core parse + bind  {gbs(rp):.3f} GB/s   time vs FNV-1a alone {rp/rf:.3f}x (target <= 1.1)")
PY
