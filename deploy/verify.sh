#!/usr/bin/env bash
# Checks deploy/npub-server.service with `systemd-analyze verify`, against a real binary.
#
#   bash deploy/verify.sh path/to/npub-server
#
# systemd-analyze insists that ExecStart= exists, so the unit is checked as a copy whose
# ExecStart= points at the given binary. Exits non-zero on any complaint, or if the unit's
# `systemd-analyze security` exposure rises above 2.0.
set -euo pipefail
bin="$(realpath "${1:?usage: verify.sh path/to/npub-server}")"
here="$(cd "$(dirname "$0")" && pwd)"
test -x "$bin" || { echo "verify.sh: $bin is not an executable" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sed "s|^ExecStart=.*|ExecStart=$bin|" "$here/npub-server.service" > "$work/npub-server.service"
out="$(systemd-analyze verify "$work/npub-server.service" 2>&1)" || { echo "$out" >&2; exit 1; }
# verify exits 0 on some warnings; treat any output about this unit as a failure.
if grep -F "npub-server.service" <<<"$out"; then
    exit 1
fi
# And the hardening stays where it is: exposure 1.2 today; fail if it regresses past 2.0.
systemd-analyze security --offline=true --threshold=20 --no-pager "$work/npub-server.service" \
    | tail -n 1
echo "deploy/npub-server.service: systemd-analyze verify and security OK"
