# Shared by the bench scripts (sourced, not run).

# wait_listening PID OUT ERR: waits until the npub-server started as PID prints its banner to the
# file OUT, then prints the URL it listens on. Fails, showing ERR, if the server exits or never
# names an address (20 s).
wait_listening() {
    local pid=$1 out=$2 err=$3 url
    for _ in $(seq 1 400); do
        grep -q "listening on" "$out" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { echo "npub-server exited at start:" >&2; cat "$err" >&2; return 1; }
        read -rt 0.05 < /dev/zero || true
    done
    url=$(sed -n 's/^npub-server listening on //p' "$out" | head -1)
    [ -n "$url" ] || { echo "npub-server did not start within 20 s:" >&2; cat "$err" >&2; return 1; }
    echo "$url"
}
