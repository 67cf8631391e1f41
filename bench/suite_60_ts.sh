# suite_60_ts.sh - /ts against the same time series kept in a Redis sorted
# set (Redis here has no RedisTimeSeries module): the seed lecture's pattern,
# score = timestamp (ms), member = "timestamp:value".
#   1. ingest: POST /ts/{key} with 1000 samples a request vs ZADD with 1000
#      score/member pairs a command (50 connections each, no pipelining);
#   2. memory: one day of 1-second samples of a slowly changing value
#      (86 400), bytes/sample: our series' memory_bytes vs Redis used_memory
#      delta; target <= 2 bytes/sample;
#   3. range-aggregation latency (one connection, one query at a time): avg
#      over hourly buckets of the whole day and over minute buckets of its
#      last hour, vs ZRANGEBYSCORE + the same bucketing in a Lua script
#      (EVALSHA), so both answer in-process;
#   4. MRANGE of 100 series by label among 10 000: the label index against
#      the scan the same query costs without it;
#   5. the core alone (bench/ts_micro.c): ns per append, out-of-order insert,
#      decode; and the compaction cost per ingested sample (1 and 3 rules
#      applied after every add, as POST /ts does) against the plain append.
set -eu
. bench/lib.sh

T0=1686697976000
DAY=86400
ONE_DAY_MS=$((DAY * 1000))
END=$((T0 + ONE_DAY_MS - 1000))

# One day of a temperature that moves by 0.1 in ~10% of the seconds: JSON
# bodies of 1000 samples for tally, ZADD commands of 1000 pairs for Redis.
awk -v t0=$T0 -v n=$DAY -v out="$BENCH_TMP" 'BEGIN {
    srand(42); v = 21.0; body = ""; zadd = ""
    for (i = 0; i < n; i++) {
        if (rand() < 0.1) v += (rand() < 0.5 ? 0.1 : -0.1)
        t = sprintf("%.0f", t0 + i * 1000); s = sprintf("%.1f", v)
        body = body (i % 1000 ? "," : "") "[" t "," s "]"
        zadd = zadd " " t " " t ":" s
        if (i % 1000 == 999 || i == n - 1) {
            print "{\"samples\":[" body "]}" > (out "/day.json")
            print "ZADD day" zadd > (out "/day.redis")
            body = ""; zadd = ""
        }
    }
}'

# ---------------------------------------------------------------- Redis --
start_redis
set -- $(awk 'BEGIN { for (i = 0; i < 1000; i++) printf "__rand_int__ __rand_int__:2%d.%d ", i % 3, i % 10 }')
set -- $(redis_bench -n $((BENCH_SECONDS * 100)) -r 2147483647 ZADD zingest "$@")
redis_ingest=$(awk -v r="$1" 'BEGIN { printf "%.0f", r * 1000 }')
redis_ingest_p99=$2
rcli DEL zingest >/dev/null
before=$(rcli INFO memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
rcli <"$BENCH_TMP/day.redis" >/dev/null
after=$(rcli INFO memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
[ "$(rcli ZCARD day)" = "$DAY" ] || { echo "bench: redis has $(rcli ZCARD day) samples, not $DAY" >&2; exit 1; }
redis_bps=$(awk -v a="$before" -v b="$after" -v n=$DAY 'BEGIN { printf "%.2f", (b - a) / n }')
sha=$(rcli SCRIPT LOAD "$(cat bench/lua/ts_zset_avg.lua)")
# latency: one connection, one query at a time (mean = 1000 / rate)
conns=$BENCH_CONNS
BENCH_CONNS=1
set -- $(redis_bench -n $((BENCH_SECONDS * 3 + 5)) EVALSHA "$sha" 1 day $T0 $END 3600000)
redis_day_rps=$1 redis_day_p99=$2
set -- $(redis_bench -n $((BENCH_SECONDS * 150)) EVALSHA "$sha" 1 day $((END - 3600000)) $END 60000)
redis_hour_rps=$1 redis_hour_p99=$2
BENCH_CONNS=$conns
stop_redis
record "redis ZADD 1000 pairs/command (samples/s)" "$redis_ingest" samples/s
record "redis ZADD 1000 pairs/command p99" "$redis_ingest_p99" ms
record "redis zset memory, 1 day of 1-s samples" "$redis_bps" bytes/sample
ms() { awk -v r="$1" 'BEGIN { if (r > 0) printf "%.3f", 1000 / r; else print 0 }'; }
record "redis EVALSHA zset day -> 24 hourly avgs, mean" "$(ms "$redis_day_rps")" ms
record "redis EVALSHA zset day -> 24 hourly avgs, p99" "$redis_day_p99" ms
record "redis EVALSHA zset last hour -> 60 minute avgs, mean" "$(ms "$redis_hour_rps")" ms
record "redis EVALSHA zset last hour -> 60 minute avgs, p99" "$redis_hour_p99" ms

# ---------------------------------------------------------------- tally --
start_tallyd --in-memory
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/ts_ingest.lua)
ingest=$(awk -v r="$1" 'BEGIN { printf "%.0f", r * 1000 }')
ingest_p99=$2
while read -r body; do
    printf '%s' "$body" | curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary @- "http://127.0.0.1:$TALLY_PORT/ts/day"
done <"$BENCH_TMP/day.json"
info=$(curl -sf "http://127.0.0.1:$TALLY_PORT/ts/day")
samples=$(printf '%s' "$info" | sed 's/.*"samples":\([0-9]*\).*/\1/')
[ "$samples" = "$DAY" ] || { echo "bench: tally has $samples samples, not $DAY" >&2; exit 1; }
bps=$(printf '%s' "$info" | sed 's/.*"bytes_per_sample":\([0-9.e+-]*\).*/\1/')
bps=$(awk -v b="$bps" 'BEGIN { printf "%.2f", b }')
BENCH_CONNS=1
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/ts/day/range?from=$T0&to=$END&agg=avg&bucket_ms=3600000")
day_rps=$1 day_p99=$2
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/ts/day/range?from=$((END - 3600000))&to=$END&agg=avg&bucket_ms=60000")
hour_rps=$1 hour_p99=$2
BENCH_CONNS=$conns
stop_tallyd

# durability on: the same ingest with the journal (fsync everysec)
start_tallyd
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/ts_ingest.lua)
ingest_journal=$(awk -v r="$1" 'BEGIN { printf "%.0f", r * 1000 }')
stop_tallyd

record "tally POST /ts 1000 samples/request p99" "$ingest_p99" ms
record "tally ts memory, 1 day of 1-s samples" "$bps" bytes/sample
record "tally GET /ts range day -> 24 hourly avgs, mean" "$(ms "$day_rps")" ms
record "tally GET /ts range day -> 24 hourly avgs, p99" "$day_p99" ms
record "tally GET /ts range last hour -> 60 minute avgs, mean" "$(ms "$hour_rps")" ms
record "tally GET /ts range last hour -> 60 minute avgs, p99" "$hour_p99" ms
record "tally POST /ts 1000 samples/request (samples/s)" "$ingest" samples/s "redis ZADD 1000 pairs" "$redis_ingest" 1.0
chart vs_redis "POST /ts, 1000 samples a request" "Redis ZADD" "$ratio"
record "tally POST /ts, journal on (samples/s)" "$ingest_journal" samples/s "redis ZADD 1000 pairs" "$redis_ingest"
record "tally range day -> 24 hourly avgs, 1 conn (req/s)" "$day_rps" req/s "redis EVALSHA zset" "$redis_day_rps" 1.0
chart vs_redis "GET /ts range, a day in hourly averages" "Redis sorted set + Lua" "$ratio"
record "tally range last hour -> 60 minute avgs, 1 conn (req/s)" "$hour_rps" req/s "redis EVALSHA zset" "$redis_hour_rps" 1.0
record "memory: redis zset bytes/sample over tally's" "$redis_bps" ratio "tally bytes/sample" "$bps" 10
record "memory target: 2 bytes/sample over tally's" 2 ratio "tally bytes/sample" "$bps" 1.0

# MRANGE by label over 10 000 series (100 groups of 100, 3 samples each):
# the 100 of one group through the label index, against the same query
# answered by a scan of every key (the first query after a restart from the
# snapshot: the loaded series are not indexed yet, so it scans, indexing them)
start_tallyd
P=$TALLY_PORT
g=0
while [ $g -lt 100 ]; do
    curl -sf -o /dev/null -X PUT --json "{\"labels\":{\"group\":\"g$g\",\"fleet\":\"all\"}}" "http://127.0.0.1:$P/ts/m${g}_[0-99]"
    curl -sf -o /dev/null -X POST --json '{"samples":[[1000,1],[2000,2],[3000,3]]}' "http://127.0.0.1:$P/ts/m${g}_[0-99]"
    g=$((g + 1))
done
MRANGE="http://127.0.0.1:$P/mts/range?filter=group%3Dg42&agg=sum&bucket_ms=1000"
n=$(curl -sf "$MRANGE" | grep -o '"key"' | wc -l)
[ "$n" = 100 ] || { echo "bench: MRANGE answered $n series, not 100" >&2; exit 1; }
kill "$TALLY_PID"; wait "$TALLY_PID" 2>/dev/null || true
$ON_SERVER "$TALLYD" --port "$P" --data-dir "$TALLY_DIR" --threads "${TALLY_THREADS:-1}" --log-level warn \
    2>>"$BENCH_TMP/tallyd.log" &
TALLY_PID=$!
wait_http "$P" /readyz
scan_ms=$(curl -sf -o /dev/null -w '%{time_total}' "$MRANGE" | awk '{ printf "%.3f", $1 * 1000 }')
BENCH_CONNS=1
set -- $(wrk_run "$MRANGE")
mrange_rps=$1 mrange_p99=$2
BENCH_CONNS=$conns
stop_tallyd
record "tally MRANGE 100 of 10 000 series by label, index, mean" "$(ms "$mrange_rps")" ms
record "tally MRANGE 100 of 10 000 series by label, index, p99" "$mrange_p99" ms
record "MRANGE by a scan (ms, one query) over by the index (speed-up)" "$scan_ms" ms "the label index, mean" "$(ms "$mrange_rps")" 1.0

# the core alone (no HTTP), one CPU
on_server "$BUILD/bench/ts_micro" >"$BENCH_TMP/ts_micro.tsv"
while IFS='	' read -r name value unit; do
    record "$name" "$value" "$unit"
done <"$BENCH_TMP/ts_micro.tsv"
# compaction cost per ingested sample: with rules over without, same run
plain=$(awk -F'\t' '$1 == "core ts_add one sample in order" { print $2 }' "$BENCH_TMP/ts_micro.tsv")
for n in "1 compaction rule" "3 compaction rules"; do
    v=$(awk -F'\t' -v n="core ts_add one sample in order + $n" '$1 == n { print $2 }' "$BENCH_TMP/ts_micro.tsv")
    record "compaction: ingest + $n over plain ingest (ns/sample)" "$v" ns/sample "plain ts_add" "$plain"
done
