#!/usr/bin/env bash
# Prints the figures quoted in docs/manifest.md: .text of each binary (and minus the runtime-only
# baseline), for compact and default SHA, then the stack depth measured under QEMU (MPS3 AN547,
# Cortex-M55, the closest Armv8.1-M machine QEMU models to the RA8P1's Cortex-M85).
set -euo pipefail
cd "$(dirname "$0")"
# Default: inside the repository's ignored /target, never next to this file.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(pwd)/../../target/measure}"
out="$CARGO_TARGET_DIR/thumbv8m.main-none-eabihf/release"
size_tool=$(command -v llvm-size || command -v size)

text() { "$size_tool" -A "$out/$1" | awk '$1 == ".text" { print $2 }'; }
rodata() { "$size_tool" -A "$out/$1" | awk '$1 == ".rodata" { print $2 }'; }
# compiler-builtins' memcpy/memset family: every firmware links them, whatever it verifies.
mem_routines() {
  nm -S -t d "$out/$1" | awk '$3 ~ /^[tT]$/ && $4 ~ /(^__aeabi_mem|^memcpy$|^memset$|^memmove$|^memcmp$|^bcmp$|compiler_builtins3mem)/ { s += $2 } END { print s + 0 }'
}

echo "(.rodata holds the fixtures a binary uses: manifest 280 bytes, public key 32, pack ~2.1 KB)"
for sha in compact default; do
  if [ "$sha" = compact ]; then flags=(); else flags=(--no-default-features); fi
  cargo build --quiet --release --bins "${flags[@]}"
  base=$(text baseline)
  for bin in manifest_only deployment release_check npu1_stream; do
    t=$(text "$bin")
    echo "sha=$sha $bin: .text $t bytes ($((t - base)) above the $base-byte runtime baseline;" \
      "$(mem_routines "$bin") of it compiler-builtins mem*), .rodata $(rodata "$bin") bytes"
  done
  if [ "$sha" = compact ] && command -v qemu-system-arm >/dev/null; then
    timeout 120 qemu-system-arm -machine mps3-an547 -nographic \
      -semihosting-config enable=on,target=native -kernel "$out/stack"
  fi
done
