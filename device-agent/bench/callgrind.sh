#!/usr/bin/env bash
# Instructions per byte of the device-agent install pipeline (download, program, journal, the one
# verification pass over the slot as it sits in flash, bind) against SHA-256 + FNV-1a alone over
# the same bytes, counted by callgrind (Debian's valgrind). Target: ≤ 1.15×.
#
#   device-agent/bench/callgrind.sh        (from the repository root; needs `apt-get install valgrind`)
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "valgrind is not installed: apt-get install -y valgrind" >&2; exit 1; }

cargo build --release -p device-agent --no-default-features --example pipeline
bin="${CARGO_TARGET_DIR:-target}/release/examples/pipeline"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

count() { # mode function -> instructions inside that function (and what it calls)
  valgrind --tool=callgrind --callgrind-out-file="$out/$1.cg" --collect-atstart=no \
    --toggle-collect="pipeline::$2" "$bin" "$1" >"$out/$1.txt" 2>/dev/null
  callgrind_annotate "$out/$1.cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

install=$(count install run_install)
baseline=$(count baseline run_baseline)
bytes=$(awk '/pack bytes/ { print $3 }' "$out/install.txt")
awk -v i="$install" -v b="$baseline" -v n="$bytes" 'BEGIN {
  printf "pack: %d bytes\n", n
  printf "install pipeline:  %12d instructions  %6.2f per byte\n", i, i / n
  printf "sha256 + fnv1a:    %12d instructions  %6.2f per byte\n", b, b / n
  printf "ratio: %.3fx (target <= 1.15x)\n", i / b
}'
