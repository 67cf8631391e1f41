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
# The three primaries (alone, with a replica, with a replica and
# --min-replicas-ack 1) and their replicas run side by side and are measured
# in BENCH_ROUNDS interleaved rounds (as suite_10 and suite_70: one run of
# each, a minute apart, compares moments as much as configurations); each
# ratio is the median of its per-round ratios to the primary alone.  The idle
# servers of a round only wait on their long polls.  The replica's lag is
# sampled in a run of its own after the rounds.
start_tallyd
alone_port=$TALLY_PORT alone_pid=$TALLY_PID alone_dir=$TALLY_DIR
start_tallyd
start_replica "$TALLY_PORT"
wait_synced
one_port=$TALLY_PORT one_pid=$TALLY_PID one_dir=$TALLY_DIR
one_rpid=$REPLICA_PID one_rdir=$REPLICA_DIR
start_tallyd --min-replicas-ack 1
start_replica "$TALLY_PORT"
wait_synced
ack_port=$TALLY_PORT ack_pid=$TALLY_PID ack_dir=$TALLY_DIR
ack_rpid=$REPLICA_PID ack_rdir=$REPLICA_DIR
throttle_rounds "$BENCH_TMP/rounds.raw" "$alone_port:$alone_pid" "$one_port:$one_pid:$one_rpid" "$ack_port:$ack_pid"
rfile="$BENCH_TMP/rounds.replication"
# ALONE ONE ACK ACK_P99 (req/s, ms), ONE/ALONE ACK/ALONE, ALONE_CPU/ONE_CPU, ONE_REPLICA_CPU (us)
awk '{ printf "%s %s %s %s %.4f %.4f %.4f %.2f\n", $1, $5, $9, $10,
              ($1 > 0 ? $5 / $1 : 0), ($1 > 0 ? $9 / $1 : 0), ($7 > 0 ? $3 / $7 : 0), $8 }' "$BENCH_TMP/rounds.raw" >"$rfile"
# the replica's lag under the same load, in a run of its own: the sampler
# (a curl every 100 ms) takes CPU that the rounds above do not charge
: >"$BENCH_TMP/lag.txt"
( while :; do
      curl -sf "http://127.0.0.1:$one_port/metrics" | awk '/^tally_replica_lag_ms\{/ { print $2 }' >>"$BENCH_TMP/lag.txt"
      sleep 0.1
  done ) &
sampler=$!
wrk_run "http://127.0.0.1:$one_port/throttle" bench/lua/throttle_post.lua >/dev/null
kill $sampler
wait $sampler 2>/dev/null || true
REPLICA_PID=$one_rpid REPLICA_DIR=$one_rdir stop_replica
REPLICA_PID=$ack_rpid REPLICA_DIR=$ack_rdir stop_replica
TALLY_PID=$alone_pid TALLY_DIR=$alone_dir stop_tallyd
TALLY_PID=$one_pid TALLY_DIR=$one_dir stop_tallyd
TALLY_PID=$ack_pid TALLY_DIR=$ack_dir stop_tallyd
record "POST /throttle, no replica (req/s, median of $BENCH_ROUNDS rounds)" "$(median "$rfile" 1)" req/s
record "POST /throttle, 1 replica attached (req/s, median)" "$(median "$rfile" 2)" req/s
record_rounds "POST /throttle, 1 replica attached vs no replica" "$rfile" 5 0.80 "both on the server core"
chart overhead "1 replica attached" "no replica" "$ratio"
record_rounds "the primary's own CPU per request, alone over with a replica" "$rfile" 7 -
record "the replica's CPU per record applied (us, median)" "$(median "$rfile" 8)" us
p99=$(sort -n "$BENCH_TMP/lag.txt" | awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; print NR ? v[i] : 0 }')
record "replica lag under that load, p99 of samples (ms)" "$p99" ms
record "POST /throttle, --min-replicas-ack 1 (req/s, median)" "$(median "$rfile" 3)" req/s
record_rounds "POST /throttle, --min-replicas-ack 1 vs no replica" "$rfile" 6 -
chart overhead "1 replica, --min-replicas-ack 1" "no replica" "$ratio"
record "POST /throttle, --min-replicas-ack 1, p99 (ms, median of rounds)" "$(median "$rfile" 4)" ms

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
