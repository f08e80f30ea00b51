#!/usr/bin/env bash
# A B pairs: runs a bench script PAIRS times with each of two npub-server binaries, alternating
# which goes first (A B, B A, A B, …) so that a drift in the machine's load falls on both, and
# tags every line the script prints with the binary it ran ("A " or "B ").
#
#   bench/ab.sh A_BIN B_BIN PAIRS SCRIPT [ARGS…]
#   e.g. bench/ab.sh /tmp/npub-server-main target/release/npub-server 3 bench/deployment_pages.sh 100000
#
# Build the "before" binary from the commit to compare with in a worktree of its own and copy it
# out (`cargo build --release -p npub-server`), so that each side is the binary its commit makes.
# Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 4 ] || { sed -n 2,10p "$0" >&2; exit 2; }
a=$1 b=$2 pairs=$3 script=$4
shift 4
echo "# bench/ab.sh: A=$a B=$b, $pairs pairs of $script $*, $(date -u +%FT%TZ), $(nproc) cores"
for i in $(seq 1 "$pairs"); do
    if [ $((i % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
    for side in $order; do
        if [ "$side" = A ]; then bin=$a; else bin=$b; fi
        echo "# pair $i, $side, load $(cut -d' ' -f1-3 /proc/loadavg)"
        SERVER_BIN="$bin" "$script" "$@" | sed "s/^/$side /"
    done
done
