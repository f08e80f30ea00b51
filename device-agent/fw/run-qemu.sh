#!/usr/bin/env bash
# Builds the firmware and boots it on QEMU's Cortex-M55 board (mps3-an547) with user-mode
# networking, so that it pulls its packs from a real npub server on this machine:
#
#   device-agent/fw/run-qemu.sh --server http://127.0.0.1:8080 --token TOKEN \
#       --trust signing.key.pub [--root root.key.pub] --flash dev1.nor [--once] [--window-kib N] [--slot-kib N] \
#       [--release-trust alice.key.pub ...] [--release-root release-root.key.pub]
#
# The firmware prints what it does (boot, DHCP, poll, download, verify, bind, report). The
# server's address is rewritten for the guest: in QEMU's user network 10.0.2.2 is the host's
# loopback. --trust, --root, --release-trust, --release-root and --flash are host files, opened by the firmware through semihosting; the
# flash file is created blank and keeps the slots and the journal across runs: killing QEMU is a
# power cut, running this again on the same file is a reboot. Flags are those of fw/src/args.rs.
# NPUB_FW_ELF=path skips the build and boots that image. Ctrl-A X quits QEMU.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --server)
      [ $# -ge 2 ] || { echo "run-qemu.sh: --server needs a URL" >&2; exit 2; }
      url="$2"
      url="${url/:\/\/127.0.0.1/://10.0.2.2}"
      url="${url/:\/\/localhost/://10.0.2.2}"
      args+=(--server "$url")
      shift 2
      ;;
    --trust | --root | --flash | --release-trust | --release-root)
      [ $# -ge 2 ] || { echo "run-qemu.sh: $1 needs a file" >&2; exit 2; }
      args+=("$1" "$(realpath -m -- "$2")")
      shift 2
      ;;
    *)
      args+=("$1")
      shift
      ;;
  esac
done
for a in "${args[@]}"; do
  case "$a" in
    *[[:space:]]*) echo "run-qemu.sh: '$a': the firmware's command line cannot hold spaces" >&2; exit 2 ;;
  esac
done
if [ -n "${NPUB_FW_ELF:-}" ]; then
  elf="$NPUB_FW_ELF"
else
  target="${CARGO_TARGET_DIR:-$here/target}"
  (cd "$here" && cargo build --release --quiet --target-dir "$target")
  elf="$target/thumbv8m.main-none-eabihf/release/device-agent-fw"
fi
exec qemu-system-arm -M mps3-an547 -nographic -monitor none -serial null \
  -semihosting-config enable=on,target=native \
  -nic user,model=lan9118 \
  -kernel "$elf" -append "${args[*]}"
