# suite_75_replication.sh - what replication costs (README "Replication").
#  1. POST /throttle on a primary with no replica, with one replica attached,
#     and with --min-replicas-ack 1 (every answer waits for the replica's
#     acknowledgement), as ratios to the primary alone.
#  2. The replica's lag under that load: /info's lag_ms of the replica,
#     sampled every 100 ms while wrk runs, p99 of the samples.
#  3. Time for a new replica to resynchronise from a primary holding ~1 GB
#     (560 Bloom filters of ~1.8 MB, created fast through the API): from the
#     replica's start to caught up (the snapshot taken on the primary, sent,
#     checked and loaded), in seconds and in MB/s of the primary's state and
#     of the snapshot bytes sent.  REPL_GB_FILTERS=N scales it.
# Every server runs on the server CPU: the replica's work is part of the cost.
set -eu
. bench/lib.sh

start_replica() {   # start_replica PRIMARY_PORT: sets REPLICA_PORT, REPLICA_PID, REPLICA_DIR
    REPLICA_PORT=$(freeport)
    REPLICA_DIR=$(mktemp -d "$BENCH_TMP/replica-XXXXXX")
    $ON_SERVER "$TALLYD" --port "$REPLICA_PORT" --data-dir "$REPLICA_DIR" --threads 1 --log-level warn \
        --replica-of "http://127.0.0.1:$1" 2>>"$BENCH_TMP/tallyd.log" &
    REPLICA_PID=$!
    wait_http "$REPLICA_PORT" /readyz
}
stop_replica() { kill "$REPLICA_PID" 2>/dev/null; wait "$REPLICA_PID" 2>/dev/null; rm -rf "$REPLICA_DIR"; }
synced() {   # the replica loaded a snapshot and has applied every record
    curl -sf "http://127.0.0.1:$REPLICA_PORT/info" | grep -q '"synced": *true' &&
        [ "$(curl -sf "http://127.0.0.1:$TALLY_PORT/info" | sed -n 's/.*"lag_records":\([0-9]*\).*/\1/p')" = 0 ]
}
wait_synced() {
    i=0
    until synced; do i=$((i + 1)); [ $i -gt 30000 ] && { echo "bench: replica never caught up" >&2; return 1; }; sleep 0.01; done
}

# -- 1 and 2. throughput with replicas, lag --------------------------------------
start_tallyd
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post.lua)
alone=$1
stop_tallyd
record "POST /throttle, no replica (req/s)" "$alone" req/s

start_tallyd
start_replica "$TALLY_PORT"
wait_synced
: >"$BENCH_TMP/lag.txt"
( while :; do
      curl -sf "http://127.0.0.1:$TALLY_PORT/metrics" | awk '/^tally_replica_lag_ms\{/ { print $2 }' >>"$BENCH_TMP/lag.txt"
      sleep 0.1
  done ) &
sampler=$!
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post.lua)
kill $sampler; wait $sampler 2>/dev/null || true
record "POST /throttle, 1 replica attached (req/s)" "$1" req/s "no replica" "$alone" 0.80
p99=$(sort -n "$BENCH_TMP/lag.txt" | awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; print NR ? v[i] : 0 }')
record "replica lag under that load, p99 of samples (ms)" "$p99" ms
stop_replica
stop_tallyd

start_tallyd --min-replicas-ack 1
start_replica "$TALLY_PORT"
wait_synced
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post.lua)
record "POST /throttle, --min-replicas-ack 1 (req/s)" "$1" req/s "no replica" "$alone"
record "POST /throttle, --min-replicas-ack 1, p99 (ms)" "$2" ms
stop_replica
stop_tallyd

# -- 3. a new replica of ~1 GB -------------------------------------------------
REPL_GB_FILTERS=${REPL_GB_FILTERS:-560}   # Bloom filters of ~1.8 MB each, as suite_70
start_tallyd --snapshot-interval 0
i=0
while [ $i -lt "$REPL_GB_FILTERS" ]; do
    curl -sf -o /dev/null -XPUT "http://127.0.0.1:$TALLY_PORT/bloom/big$i" \
        --json '{"capacity":1000000,"error_rate":0.001,"scaling":false}'
    i=$((i + 1))
done
mem=$(curl -sf "http://127.0.0.1:$TALLY_PORT/info" | sed -n 's/.*"memory_bytes":\([0-9]*\).*/\1/p')
record "state on the primary (bytes)" "$mem" bytes
t0=$(date +%s%N)
start_replica "$TALLY_PORT"
wait_synced
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
[ "$ms" -gt 0 ] || ms=1
snap=$(curl -sf "http://127.0.0.1:$REPLICA_PORT/info" | sed -n 's/.*"last_snapshot_bytes":\([0-9]*\).*/\1/p')
record "resynchronise a replica of that state (s)" "$(awk -v m="$ms" 'BEGIN { printf "%.2f", m / 1000 }')" s
record "resynchronise: state per second (MB/s)" "$(awk -v b="$mem" -v m="$ms" 'BEGIN { printf "%.0f", b / 1e6 / (m / 1000) }')" MB/s
[ -n "$snap" ] && record "resynchronise: snapshot bytes per second (MB/s)" \
    "$(awk -v b="$snap" -v m="$ms" 'BEGIN { printf "%.0f", b / 1e6 / (m / 1000) }')" MB/s
stop_replica
stop_tallyd
