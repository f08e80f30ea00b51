#!/usr/bin/env bash
# Device poll throughput with one and with two npub-server replicas on one PostgreSQL (the
# topology of deploy/local-cluster.sh: PostgreSQL in a temp dir, s3s-fs, two replicas), against
# the embedded default (one server on its SQLite file), in one invocation on the same machine
# (issue #16, point 6):
#
#   1. SQLite default: one server, N devices, saturated "nothing new" polls
#   2. PostgreSQL, one replica: the same load against replica A alone
#   3. PostgreSQL, two replicas: the same load split over A and B at once (two load generators)
#   4. during 2 and 3, PostgreSQL's committed transactions and CPU time: a poll is answered from
#      the replica's memory, so they must stay flat however many polls are served
#
#   bench/replicas.sh [DEVICES]                           (default 1000)
#
# Environment: CONNECTIONS (64) keep-alive connections in total, RUN_SECONDS (5) per run, RUNS (3)
# runs of each (the median is reported). Every run must end with 0 errors or the script fails.
# On a 2-core machine the replicas, PostgreSQL and the load generators share both cores, so two
# replicas cannot double one replica's figure here; what the figures show is the cost per poll
# and that the database is off the poll path. Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
devices=${1:-1000}
connections=${CONNECTIONS:-64}
seconds=${RUN_SECONDS:-5}
runs=${RUNS:-3}
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
target=${CARGO_TARGET_DIR:-target}

cargo build --release -q -p npub-server -p npub-loadgen
server_bin="$(realpath "$target/release/npub-server")"
loadgen="$target/release/npub-loadgen"

# A work directory and trap of its own (start_server uses the directory): the cluster in it has
# to be taken down too.
work=$(mktemp -d)
chmod 755 "$work"
export NPUB_CLUSTER_DIR="$work/cluster"
pid=""
cleanup() {
    kill_server
    deploy/local-cluster.sh down || true
    rm -rf "$work"
}
trap cleanup EXIT
fact() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "date=$(date -u +%Y-%m-%dT%H:%MZ) devices=$devices connections=$connections seconds=$seconds runs=$runs"
echo "cores=$(nproc) $(uptime | sed 's/.*load/load/')"
"$loadgen" make-pack --from ../shared/fixtures/vela/vela_out/u55_256/tflite/small_net_vela.tflite \
    --fill 1 --out "$work/v1.npub" >/dev/null

# 1. The embedded default.
SERVER_BIN=$server_bin NPUB_MAX_CONNECTIONS=$((2 * connections + 64)) start_server
facts=$("$loadgen" setup --url "$url" --token "$admin" --pack "$work/v1.npub" --devices "$devices" \
    --tokens "$work/sqlite.tokens")
path="/api/v1/device/manifest?seq=$(fact "$facts" SEQUENCE)"
sat() { "$loadgen" saturate --seconds "$seconds" --expect 204 --path "$path" "$@"; }
sqlite_rps="" sqlite_us=""
for i in $(seq 1 "$runs"); do
    r=$(sat --label "sqlite#$i" --url "$url" --tokens "$work/sqlite.tokens" \
        --connections "$connections" --pids "$pid")
    echo "$r"
    sqlite_rps+=" $(field "$r" rps)" sqlite_us+=" $(field "$r" server_us_per_req)"
done
kill_server

# 2 and 3. Two replicas on one PostgreSQL, started by deploy/local-cluster.sh (the deployment's
# own topology: PostgreSQL, s3s-fs and both replicas), not by start_server.
NPUB_SERVER_BIN="$server_bin" NPUB_LOG=warn \
    NPUB_REPLICA_ARGS="--max-connections $((2 * connections + 64))" \
    deploy/local-cluster.sh up >"$work/cluster.env"
. <(sed -n 's/^\(REPLICA_A\|REPLICA_B\|ADMIN_TOKEN\|DATABASE_URL\)=/\1=/p' "$work/cluster.env")
pid_a=$(cat "$NPUB_CLUSTER_DIR/replica-a.pid")
pid_b=$(cat "$NPUB_CLUSTER_DIR/replica-b.pid")
facts=$("$loadgen" setup --url "$REPLICA_A" --token "$ADMIN_TOKEN" --pack "$work/v1.npub" \
    --devices "$devices" --tokens "$work/pg.tokens")
path="/api/v1/device/manifest?seq=$(fact "$facts" SEQUENCE)"
# B learns of the devices and the deployment through LISTEN/NOTIFY; wait until it answers.
last_token=$(tail -n 1 "$work/pg.tokens")
for _ in $(seq 1 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $last_token" "$REPLICA_B$path")" = 204 ] && break
    read -rt 0.05 < /dev/zero || true
done
pg_commits() {
    "$pg_bin/psql" -qAt "$DATABASE_URL" -c \
        "SELECT xact_commit FROM pg_stat_database WHERE datname = 'npub'"
}
pg_cpu_ms() {
    local tick total=0 pid master
    tick=$(getconf CLK_TCK)
    # This cluster's postmaster and its backends only (other clusters may run on the machine).
    master=$(head -n 1 "$NPUB_CLUSTER_DIR/pg/data/postmaster.pid")
    for pid in $master $(pgrep -P "$master" || true); do
        [ -r "/proc/$pid/stat" ] || continue
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo $((total * 1000 / tick))
}
# Half the tokens to each replica in the two-replica runs.
split -n l/2 -d "$work/pg.tokens" "$work/pg.tokens."
one_rps="" one_us="" two_rps="" two_us="" commits="" cpu=""
for i in $(seq 1 "$runs"); do
    c0=$(pg_commits) p0=$(pg_cpu_ms)
    r=$(sat --label "pg_one#$i" --url "$REPLICA_A" --tokens "$work/pg.tokens" \
        --connections "$connections" --pids "$pid_a")
    c1=$(pg_commits) p1=$(pg_cpu_ms)
    echo "$r pg_commits=$((c1 - c0)) pg_cpu_ms=$((p1 - p0))"
    one_rps+=" $(field "$r" rps)" one_us+=" $(field "$r" server_us_per_req)"
    commits+=" $((c1 - c0))" cpu+=" $((p1 - p0))"

    sat --label "pg_two_a#$i" --url "$REPLICA_A" --tokens "$work/pg.tokens.00" \
        --connections $((connections / 2)) --pids "$pid_a" >"$work/two_a" &
    la=$!
    sat --label "pg_two_b#$i" --url "$REPLICA_B" --tokens "$work/pg.tokens.01" \
        --connections $((connections / 2)) --pids "$pid_b" >"$work/two_b" &
    lb=$!
    wait "$la" "$lb"
    ra=$(cat "$work/two_a") rb=$(cat "$work/two_b")
    echo "$ra"; echo "$rb"
    two_rps+=" $(python3 -c "print($(field "$ra" rps) + $(field "$rb" rps))")"
    two_us+=" $(python3 -c "print(round(($(field "$ra" server_us_per_req) + $(field "$rb" server_us_per_req)) / 2, 2))")"
done
echo "SUMMARY sqlite_default: $(median <<<"$sqlite_rps") polls/s, $(median <<<"$sqlite_us") us CPU per poll (medians of $runs)"
echo "SUMMARY postgres_one_replica: $(median <<<"$one_rps") polls/s, $(median <<<"$one_us") us CPU per poll; PostgreSQL during a run: $(median <<<"$commits") commits, $(median <<<"$cpu") ms CPU"
echo "SUMMARY postgres_two_replicas: $(median <<<"$two_rps") polls/s in total, $(median <<<"$two_us") us CPU per poll"
echo "end $(uptime | sed 's/.*load/load/')"
