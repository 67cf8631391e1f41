# suite_78_replay.sh - how fast journal records are applied: at start-up
# (replay of the journal a kill -9 left, records per second from tallyd's
# own "N journal records replayed ... ready in T ms" line) and on a replica
# catching up (stopped with SIGSTOP while the primary takes a load, then
# resumed: records applied per second until it holds them all).  The load is
# POST /throttle over 100 000 keys (bench/lua/throttle_post.lua), one
# record per request.  No reference: the figures are reported, and compared
# before/after a change of the record format (HACKING.md).
set -eu
. bench/lib.sh

# -- 1. start-up replay --------------------------------------------------------
start_tallyd --snapshot-interval 0 --fsync no
on_client wrk -t1 -c"$BENCH_CONNS" -d"${BENCH_SECONDS}s" -s bench/lua/throttle_post.lua \
    "http://127.0.0.1:$TALLY_PORT/throttle" >/dev/null
kill -9 "$TALLY_PID"
wait "$TALLY_PID" 2>/dev/null || true
log="$BENCH_TMP/replay.log"
$ON_SERVER "$TALLYD" --port "$TALLY_PORT" --data-dir "$TALLY_DIR" --snapshot-interval 0 2>"$log" &
TALLY_PID=$!
wait_http "$TALLY_PORT" /readyz
line=$(grep -m1 'journal records replayed' "$log" || true)
records=$(printf '%s\n' "$line" | sed -n 's/.*, \([0-9]*\) journal records replayed.*/\1/p')
ms=$(printf '%s\n' "$line" | sed -n 's/.* ready in \([0-9.]*\) ms.*/\1/p')
stop_tallyd
record "journal records replayed at start" "${records:-0}" records
record "journal replay at start (records/s)" \
    "$(awk -v n="${records:-0}" -v ms="${ms:-0}" 'BEGIN { printf "%.0f", (ms > 0 ? n * 1000 / ms : 0) }')" records/s

# -- 2. a replica catching up ------------------------------------------------------
start_tallyd --snapshot-interval 0 --fsync no --repl-backlog 1gb
PRIMARY_PORT=$TALLY_PORT PRIMARY_PID=$TALLY_PID PRIMARY_DIR=$TALLY_DIR
start_tallyd --snapshot-interval 0 --replica-of "http://127.0.0.1:$PRIMARY_PORT"
REPLICA_PORT=$TALLY_PORT REPLICA_PID=$TALLY_PID
applied() {
    curl -sf "http://127.0.0.1:$REPLICA_PORT/metrics" | awk '$1 == "tally_replication_applied_total" { print $2 }'
}
synced() {
    curl -sf "http://127.0.0.1:$REPLICA_PORT/metrics" | awk '$1 == "tally_replication_full_syncs_total" { print $2 }'
}
i=0   # the replica holds the primary's snapshot: from then on the primary keeps its records
until [ "$(synced)" = 1 ] || [ $i -ge 500 ]; do i=$((i + 1)); sleep 0.02; done
before=$(applied)
kill -STOP "$REPLICA_PID"
on_client wrk -t1 -c"$BENCH_CONNS" -d"${BENCH_SECONDS}s" -s bench/lua/throttle_post.lua \
    "http://127.0.0.1:$PRIMARY_PORT/throttle" >/dev/null
# the stream's records (replication.records: the first "records" of /info)
want=$(curl -sf "http://127.0.0.1:$PRIMARY_PORT/info" | sed 's/.*"replication":{//' |
       sed -n 's/^"role":[^,]*,"epoch":[0-9]*,"run":"[^"]*","offset":[0-9]*,"records":\([0-9]*\).*/\1/p')
t0=$(date +%s%N)
kill -CONT "$REPLICA_PID"
i=0
while [ "$(applied)" -lt "$((before + want))" ] 2>/dev/null && [ $i -lt 6000 ]; do i=$((i + 1)); sleep 0.01; done
t1=$(date +%s%N)
got=$(( $(applied) - before ))
kill "$REPLICA_PID" "$PRIMARY_PID" 2>/dev/null
wait "$REPLICA_PID" "$PRIMARY_PID" 2>/dev/null || true
rm -rf "$PRIMARY_DIR" "$TALLY_DIR"
record "replica catch-up: records applied" "$got" records
record "replica apply rate (records/s)" "$(awk -v n="$got" -v ns=$((t1 - t0)) 'BEGIN { printf "%.0f", (ns > 0 ? n * 1e9 / ns : 0) }')" records/s
