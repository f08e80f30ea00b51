#!/usr/bin/env bash
# Connection floods (issue #31 point 1): /healthz answers and latency while one address holds
# 1,100 idle connections, and while 5,000 connections from one address reopen as soon as they are
# closed, against a release npub-server started with the systemd default of 1,024 open files.
#
#   bench/floods.sh [BASELINE_BIN]
#
# Runs this tree's release build, and BASELINE_BIN too when given (an earlier build, side by
# side). Not part of `cargo test` (the tests assert that health answers; this measures how fast).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q --locked -p npub-server
bins=("$target/release/npub-server")
[ -n "${1:-}" ] && bins+=("$1")

for bin in "${bins[@]}"; do
    for mode in idle reopen; do
        # The systemd default soft limit; the hard limit too, so that it cannot be raised. A
        # fresh data directory for each run (stop_server removes it).
        SERVER_BIN=$bin SERVER_NOFILE=1024 SERVER_LOG=error start_server
        echo "== $bin, $mode"
        python3 bench/floods/flood.py "$url" "$mode"
        stop_server
    done
done
