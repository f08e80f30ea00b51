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
        work=$(mktemp -d)
        # The systemd default soft limit; the hard limit too, so that it cannot be raised.
        (ulimit -n 1024; exec env NPUB_ADMIN_TOKEN="npub_op_bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
            NPUB_LOG=error "$bin" --data-dir "$work/data" --listen 127.0.0.1:0) \
            > "$work/out" 2> "$work/err" &
        pid=$!
        url=$(wait_listening "$pid" "$work/out" "$work/err")
        echo "== $bin, $mode"
        python3 bench/floods/flood.py "$url" "$mode"
        kill "$pid"; wait "$pid" 2>/dev/null || true
        rm -rf "$work"
    done
done
