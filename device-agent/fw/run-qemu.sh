#!/usr/bin/env bash
# Builds the firmware and boots it on QEMU's Cortex-M55 board (mps3-an547) with user-mode
# networking, so that it pulls its packs from a real npub server on this machine:
#
#   device-agent/fw/run-qemu.sh --server http://127.0.0.1:8080 --token TOKEN \
#       --trust signing.key.pub [--root root.key.pub] --flash dev1.nor [--once] [--window-kib N] [--slot-kib N] \
#       [--release-trust alice.key.pub ...] [--release-root release-root.key.pub] \
#       [--ca ca.pem [--tls-seed HEX]] [--pcap FILE] [--boot-check]
#
# The firmware prints what it does (boot, DHCP, poll, download, verify, bind, report). The
# server's address is rewritten for the guest: in QEMU's user network 10.0.2.2 is the host's
# loopback. --trust, --root, --release-trust, --release-root and --flash are host files, opened by the firmware through semihosting; the
# flash file is created blank and keeps the slots and the journal across runs: killing QEMU is a
# power cut, running this again on the same file is a reboot. Flags are those of fw/src/args.rs.
# With an https:// server, --ca names the PEM file the server is checked against (its CA's
# certificate, its own certificate or its PUBLIC KEY, P-256); the handshake's random generator is
# seeded from the host's /dev/urandom unless --tls-seed gives 64 hex digits. That seed is a DEMO:
# QEMU's board has no TRNG, a device seeds from its own. --pcap FILE records every frame of the
# guest's NIC (QEMU's filter-dump) into FILE, to see what crosses the wire.
# NPUB_QEMU_EXTRA adds QEMU flags (docs/performance.md: -icount shift=0 for the handshake's count
# and for the boot check's: --boot-check makes boot verify the slot's signed manifest again and
# print its time, "boot: N ms (boot check on)").
# NPUB_FW_ELF=path skips the build and boots that image. Ctrl-A X quits QEMU.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
args=()
ca=""
seed=""
pcap=""
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
    --ca)
      [ $# -ge 2 ] || { echo "run-qemu.sh: --ca needs a file" >&2; exit 2; }
      ca="$(realpath -m -- "$2")"
      args+=(--ca "$ca")
      shift 2
      ;;
    --tls-seed)
      [ $# -ge 2 ] || { echo "run-qemu.sh: --tls-seed needs 64 hex digits" >&2; exit 2; }
      seed="$2"
      shift 2
      ;;
    --pcap)
      [ $# -ge 2 ] || { echo "run-qemu.sh: --pcap needs a file" >&2; exit 2; }
      pcap="$(realpath -m -- "$2")"
      shift 2
      ;;
    *)
      args+=("$1")
      shift
      ;;
  esac
done
if [ -n "$ca" ]; then
  if [ -z "$seed" ]; then
    seed="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
    echo "run-qemu.sh: TLS seed from the host's /dev/urandom (DEMO: QEMU's board has no TRNG)" >&2
  fi
  args+=(--tls-seed "$seed")
fi
nic=(-nic user,model=lan9118)
if [ -n "$pcap" ]; then
  nic=(-netdev user,id=n0 -net nic,model=lan9118,netdev=n0
    -object "filter-dump,id=dump0,netdev=n0,file=$pcap")
fi
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
  "${nic[@]}" ${NPUB_QEMU_EXTRA:-} \
  -kernel "$elf" -append "${args[*]}"
