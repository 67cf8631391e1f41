# suite_30_uv_bloom.sh - /uv and /bloom adds against Redis PFADD, plus the
# core micro-benchmark of HyperLogLog, Bloom and Cuckoo (ns per operation).
# Targets (issue 4): batched adds (1000 items a request) >= 2x Redis PFADD
# pipelined (redis-benchmark -P 16) in items/s; one item a request on /uv
# >= 1.0x Redis PFADD without pipelining.
set -eu
. bench/lib.sh

BATCH=${BATCH:-1000}
export BATCH

start_redis
n=$((BENCH_SECONDS * 150000))
set -- $(redis_bench -n "$n" -r 1000000 -P 16 PFADD uvbench __rand_int__)
redis_p16=$1
set -- $(redis_bench -n $((BENCH_SECONDS * 30000)) -r 1000000 PFADD uvbench1 __rand_int__)
redis_p1=$1 redis_p1_p99=$2
stop_redis
record "redis PFADD pipelined -P 16 (items/s)" "$redis_p16" items/s
record "redis PFADD no pipelining (items/s)" "$redis_p1" items/s

start_tallyd
# a filter sized for the run, so the bench measures adds, not growth
curl -sf -o /dev/null -X PUT "http://127.0.0.1:$TALLY_PORT/bloom/bfbench" --json '{"capacity":2000000,"error_rate":0.01}'
BENCH_CONNS_SAVED=$BENCH_CONNS
BENCH_CONNS=${BATCH_CONNS:-8}
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/uv/uvbench" bench/lua/items_batch.lua)
uv_batch_rps=$1 uv_batch_p99=$2
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/bloom/bfbench" bench/lua/items_batch.lua)
bloom_batch_rps=$1 bloom_batch_p99=$2
BENCH_CONNS=$BENCH_CONNS_SAVED
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/uv/uvsingle" bench/lua/items_single.lua)
uv_single_rps=$1 uv_single_p99=$2
stop_tallyd

uv_items=$(awk -v r="$uv_batch_rps" -v b="$BATCH" 'BEGIN { printf "%.0f", r * b }')
bloom_items=$(awk -v r="$bloom_batch_rps" -v b="$BATCH" 'BEGIN { printf "%.0f", r * b }')
record "tally POST /uv $BATCH items/request p99" "$uv_batch_p99" ms
record "tally POST /bloom $BATCH items/request p99" "$bloom_batch_p99" ms
record "tally POST /uv 1 item/request p99" "$uv_single_p99" ms
record "tally POST /uv $BATCH items/request (items/s)" "$uv_items" items/s "redis PFADD -P 16" "$redis_p16" 2.0
chart vs_redis "POST /uv, $BATCH items a request" "Redis PFADD pipelined" "$ratio"
record "tally POST /bloom $BATCH items/request (items/s)" "$bloom_items" items/s "redis PFADD -P 16" "$redis_p16" 2.0
chart vs_redis "POST /bloom, $BATCH items a request" "Redis PFADD pipelined" "$ratio"
record "tally POST /uv 1 item/request (items/s)" "$uv_single_rps" items/s "redis PFADD no pipelining" "$redis_p1" 1.0
chart vs_redis "POST /uv, 1 item a request" "Redis PFADD" "$ratio"

# core micro-benchmark: one row per structure and operation
on_server "$BUILD/bench/sketch_micro" | while read -r name value; do
    record "core $name (ns/op)" "$value" ns/op
done
