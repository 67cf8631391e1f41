# suite_35_cms_topk_tdigest.sh - /cms, /topk and /tdigest over HTTP: batched
# adds and queries (1000 items a request) and single-item requests, in items
# per second, against the structures' own speed measured in the same run by
# bench/freq_micro (ns per operation, no HTTP).  The ratio "HTTP / core" is
# the share of the sketch's raw speed that survives HTTP, JSON and locking.
#
# Redis reference: the redis-server installed here has no RedisBloom module,
# so there is no CMS.*/TOPK.*/TDIGEST.* to run.  Point REDISBLOOM at a
# redisbloom.so to add pipelined redis-benchmark -P 16 figures of
# CMS.INCRBY, TOPK.ADD and TDIGEST.ADD (1 item per command) to the same run.
set -eu
. bench/lib.sh

# -- core speed -----------------------------------------------------------------
"$BUILD/bench/freq_micro" "${MICRO_SECONDS:-0.5}" >"$BENCH_TMP/freq_micro.txt"
sed '/^--$/,$d' "$BENCH_TMP/freq_micro.txt"
core_ns() { awk -v n="$1" 'f && $1 == n { print $2 } /^--$/ { f = 1 }' "$BENCH_TMP/freq_micro.txt"; }
core_ips() { awk -v ns="$(core_ns "$1")" 'BEGIN { printf "%.0f", 1e9 / ns }'; }
for op in cms_incr cms_query topk100_add topk100_query tdigest_add tdigest_quantile; do
    record "core $op (ns/op)" "$(core_ns $op)" ns
done

# -- HTTP -------------------------------------------------------------------------
start_tallyd
curl -sf -o /dev/null -XPUT "http://127.0.0.1:$TALLY_PORT/cms/bench_cms" --json '{"error":0.001,"probability":0.002}'
curl -sf -o /dev/null -XPUT "http://127.0.0.1:$TALLY_PORT/topk/bench_topk" --json '{"k":100,"width":461,"depth":5}'
curl -sf -o /dev/null -XPUT "http://127.0.0.1:$TALLY_PORT/tdigest/bench_tdigest" --json '{"compression":100}'

# http_items KIND BATCH: prints "ITEMS_PER_S REQ_PER_S P99_MS"
http_items() {
    set -- "$1" "$2" $(FREQ_KIND=$1 FREQ_BATCH=$2 FREQ_KEY="bench_${1%%_*}" \
                       wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/freq_batch.lua)
    awk -v r="$3" -v b="$2" -v p="$4" 'BEGIN { printf "%.0f %.0f %s\n", r * b, r, p }'
}

# kind          label                                   core op to compare with
for row in "cms_add|POST /cms (increments)|cms_incr" \
           "cms_count|POST /cms/{key}/count|cms_query" \
           "topk_add|POST /topk (adds)|topk100_add" \
           "topk_query|POST /topk/{key}/query|topk100_query" \
           "tdigest_add|POST /tdigest (values)|tdigest_add" \
           "tdigest_quantile|GET /tdigest/{key}/quantile|tdigest_quantile"; do
    kind=${row%%|*}; rest=${row#*|}; label=${rest%%|*}; op=${rest#*|}
    batch=1000
    # a GET carries its batch in the query string: libmicrohttpd keeps every
    # parameter in the connection's 32 KB memory pool and drops the connection
    # beyond roughly 400 of them, so quantiles go 200 a request
    [ "$kind" = tdigest_quantile ] && batch=200
    set -- $(http_items "$kind" "$batch")
    record "tally $label, $batch a request (items/s)" "$1" items/s "core $op (items/s)" "$(core_ips "$op")"
    record "tally $label, $batch a request p99" "$3" ms
    set -- $(http_items "$kind" 1)
    record "tally $label, 1 a request (req/s)" "$2" req/s
done
stop_tallyd

# -- Redis with RedisBloom, when available ----------------------------------------
if [ -n "${REDISBLOOM:-}" ] && [ -f "$REDISBLOOM" ]; then
    start_redis --loadmodule "$REDISBLOOM"
    rcli CMS.INITBYPROB bench 0.001 0.002 >/dev/null
    rcli TOPK.RESERVE bench 100 461 5 0.9 >/dev/null
    rcli TDIGEST.CREATE bench COMPRESSION 100 >/dev/null
    n=$((BENCH_SECONDS * 100000))
    set -- $(redis_bench -P 16 -n "$n" -r 100000 CMS.INCRBY bench user:__rand_int__ 1)
    record "redis CMS.INCRBY -P 16 (items/s)" "$1" items/s
    set -- $(redis_bench -P 16 -n "$n" -r 100000 TOPK.ADD bench user:__rand_int__)
    record "redis TOPK.ADD -P 16 (items/s)" "$1" items/s
    set -- $(redis_bench -P 16 -n "$n" -r 100000 TDIGEST.ADD bench __rand_int__)
    record "redis TDIGEST.ADD -P 16 (items/s)" "$1" items/s
    stop_redis
else
    echo "(no RedisBloom module here - set REDISBLOOM=/path/to/redisbloom.so for a Redis reference)"
fi
