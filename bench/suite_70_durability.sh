# suite_70_durability.sh - what durability costs.
#  1. /throttle throughput under each --fsync policy, as a ratio to --journal off
#     (target: everysec costs <= 10%).
#  2. Snapshot of ~1 GB of state: save time, load time (restart to /readyz), and
#     the longest any request waited while the snapshot ran (wrk's max latency
#     during the snapshot vs. without one). Targets: save <= 3 s, load <= 3 s,
#     no request stalled > 10 ms.
set -eu
. bench/lib.sh

# -- 1. journal overhead ------------------------------------------------------
# The four servers (journal off, then --fsync no, everysec, always) run side
# by side and are measured in BENCH_ROUNDS interleaved rounds (as suite_10:
# on a shared machine one run of each, minutes apart, compares moments as
# much as policies); each policy's ratio is the median of its per-round
# ratios to journal off.
servers="" pids="" dirs=""
for mode in off no everysec always; do
    if [ "$mode" = off ]; then start_tallyd --journal off; else start_tallyd --fsync "$mode"; fi
    servers="$servers $TALLY_PORT:$TALLY_PID" pids="$pids $TALLY_PID" dirs="$dirs $TALLY_DIR"
done
throttle_rounds "$BENCH_TMP/rounds.raw" $servers
jfile="$BENCH_TMP/rounds.journal"
# OFF NO EVERYSEC ALWAYS (req/s), then each policy over journal off
awk '{ printf "%s %s %s %s %.4f %.4f %.4f\n", $1, $5, $9, $13,
              ($1 > 0 ? $5 / $1 : 0), ($1 > 0 ? $9 / $1 : 0), ($1 > 0 ? $13 / $1 : 0) }' "$BENCH_TMP/rounds.raw" >"$jfile"
set -- $dirs
for TALLY_PID in $pids; do
    TALLY_DIR=$1
    shift
    stop_tallyd
done
record "POST /throttle, journal off (req/s, median of $BENCH_ROUNDS rounds)" "$(median "$jfile" 1)" req/s
col=2
for mode in no everysec always; do
    record "POST /throttle, fsync $mode (req/s, median)" "$(median "$jfile" "$col")" req/s
    target=-
    [ "$mode" = everysec ] && target=0.90
    record_rounds "POST /throttle, fsync $mode vs journal off" "$jfile" $((col + 3)) "$target"
    chart overhead "journal, --fsync $mode" "journal off" "$ratio"
    col=$((col + 1))
done

# -- 2. a snapshot of ~1 GB ---------------------------------------------------
# State: Bloom filters reserved for 1M items at 0.1% error (~1.8 MB each).
GB_FILTERS=${GB_FILTERS:-560}
start_tallyd --snapshot-interval 0
i=0
while [ $i -lt "$GB_FILTERS" ]; do
    curl -sf -o /dev/null -XPUT "http://127.0.0.1:$TALLY_PORT/bloom/big$i" \
        --json '{"capacity":1000000,"error_rate":0.001,"scaling":false}'
    i=$((i + 1))
done
mem=$(curl -sf "http://127.0.0.1:$TALLY_PORT/info" | sed -n 's/.*"memory_bytes":\([0-9]*\).*/\1/p')
record "state held in memory (bytes)" "$mem" bytes

# baseline: the worst request latency of a run without a snapshot
base=$(on_client wrk -t1 -c"$BENCH_CONNS" -d5s --latency -s bench/lua/throttle_get.lua "http://127.0.0.1:$TALLY_PORT/" |
       awk '$1=="Latency" {print $4}')
# the same load while a snapshot runs
on_client wrk -t1 -c"$BENCH_CONNS" -d8s --latency -s bench/lua/throttle_get.lua "http://127.0.0.1:$TALLY_PORT/" \
    >"$BENCH_TMP/wrk-snap.txt" &
wrk_pid=$!
sleep 2
snap=$(curl -sf -XPOST "http://127.0.0.1:$TALLY_PORT/admin/snapshot")
wait $wrk_pid
during=$(awk '$1=="Latency" {print $4}' "$BENCH_TMP/wrk-snap.txt")
to_ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; printf "%.2f", v }'; }
save_ms=$(echo "$snap" | sed -n 's/.*"duration_ms":\([0-9.]*\).*/\1/p')
bytes=$(echo "$snap" | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p')
hold=$(echo "$snap" | sed -n 's/.*"max_shard_lock_ms":\([0-9.]*\).*/\1/p')
record "snapshot size (bytes)" "$bytes" bytes
record "snapshot save time (ms)" "$save_ms" ms
record "longest shard lock held by the snapshot (ms)" "$hold" ms
record "max request latency without snapshot (ms)" "$(to_ms "$base")" ms
record "max request latency during snapshot (ms)" "$(to_ms "$during")" ms

# load: restart on the same directory, time to /readyz
kill "$TALLY_PID"; wait "$TALLY_PID" 2>/dev/null || true
t0=$(date +%s%N)
$ON_SERVER "$TALLYD" --port "$TALLY_PORT" --data-dir "$TALLY_DIR" --threads 1 --log-level warn 2>>"$BENCH_TMP/tallyd.log" &
TALLY_PID=$!
wait_http "$TALLY_PORT" /readyz
t1=$(date +%s%N)
record "snapshot load time, restart to ready (ms)" "$(( (t1 - t0) / 1000000 ))" ms
stop_tallyd
