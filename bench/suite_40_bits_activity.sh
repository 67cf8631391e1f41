# suite_40_bits_activity.sh - /bits and /activity against Redis in the same run.
#
#  1. /bits single-operation throughput without pipelining: POST setbit (and
#     GET getbit) over 100 000 keys vs redis-benchmark SETBIT (GETBIT), 50
#     connections each, in interleaved rounds.  Target (issue 5): setbit >=
#     1.0x Redis SETBIT (the median of the per-round ratios).
#     (redis-benchmark pads __rand_int__ with zeros, which SETBIT refuses as an
#     offset, so both sides pick a random key of 100 000 and set bit 12345.)
#  2. Activity: ACTIVITY_USERS users (default 10M) x ACTIVITY_DAYS days (365),
#     each user active on a day with p = 10%, p = 1%, or in runs of
#     consecutive ids ("clustered", ~10%).  Redis holds one bit string per day
#     (raw SETs) and counts a window with BITOP OR + BITCOUNT; tallyd holds the
#     key as per-day Roaring bitmaps (bulk-loaded with POST
#     /activity/{key}/import) and counts with GET /activity/{key}/count.  Both
#     are fed the same generated days and must give the same counts.  tallyd
#     runs --in-memory here (Redis has no persistence either; a journal would
#     write every imported day to disk).
#     Targets: 365-day window >= 5x faster than Redis; memory <= Redis's
#     used_memory at p = 10% and <= 25% of it at p = 1%.
#
# The 100M-user run (12.5 MB per day per side, ~10 GB of RAM for both) is a
# manual one:  ACTIVITY_USERS=100000000 BENCH_ONLY=bits_activity make bench
set -eu
. bench/lib.sh
ACTIVITY_USERS=${ACTIVITY_USERS:-10000000}
ACTIVITY_DAYS=${ACTIVITY_DAYS:-365}

# -- 1. /bits single operations ------------------------------------------------
# tallyd and redis-server run side by side and are measured in BENCH_ROUNDS
# interleaved rounds (as suite_10: on a shared machine one measurement of
# each, a minute apart, compares two moments as much as two servers); the
# figures are medians over the rounds, the ratios medians of per-round
# ratios.  Besides requests per second, each server's CPU time per operation
# (all its threads, /proc/PID/task/*/schedstat): steadier than throughput
# on a busy machine, and on one server core throughput is its inverse.
start_redis
start_tallyd   # default persistence (journal on, fsync everysec), as suite_10
rfile="$BENCH_TMP/rounds.bits"
: >"$rfile"
# redis_n N CMD...: redis-benchmark running CMD N times over 100 000 keys,
# as "RPS P99 N" (wrk_run's shape, for server_cpu_us)
redis_n() {
    n=$1
    shift
    echo "$(redis_bench -n "$n" -r 100000 "$@") $n"
}
# redis_op CMD...: "RPS CPU_US" of redis-benchmark running CMD for about a round
redis_op() {
    set -- $(server_cpu_us "$REDIS_PID" redis_n $((ROUND_SECONDS * 90000)) "$@")
    echo "$1 $4"
}
# tally_op SCRIPT: "RPS P99 CPU_US" of wrk running SCRIPT for a round
tally_op() {
    set -- $(WRK_SECONDS=$ROUND_SECONDS server_cpu_us "$TALLY_PID" wrk_run "http://127.0.0.1:$TALLY_PORT/" "$1")
    echo "$1 $2 $4"
}
redis_op SETBIT bits:__rand_int__ 12345 1 >/dev/null   # warm-up: the keys exist on both sides
WRK_SECONDS=1 wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/bits_setbit.lua >/dev/null
r=1
while [ "$r" -le "$BENCH_ROUNDS" ]; do
    if [ $((r % 2)) = 1 ]; then
        rs=$(redis_op SETBIT bits:__rand_int__ 12345 1); ts=$(tally_op bench/lua/bits_setbit.lua)
        rg=$(redis_op GETBIT bits:__rand_int__ 12345); tg=$(tally_op bench/lua/bits_getbit.lua)
    else
        ts=$(tally_op bench/lua/bits_setbit.lua); rs=$(redis_op SETBIT bits:__rand_int__ 12345 1)
        tg=$(tally_op bench/lua/bits_getbit.lua); rg=$(redis_op GETBIT bits:__rand_int__ 12345)
    fi
    # TSET TSET_P99 TSET_US RSET RSET_US TGET TGET_P99 TGET_US RGET RGET_US, then
    # the ratios: set req/s, get req/s, set CPU (redis/tally), get CPU (redis/tally)
    echo "$ts $rs $tg $rg" | awk '{ printf "%s %s %s %s %s %s %s %s %s %s %.4f %.4f %.4f %.4f\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
                                           ($4 > 0 ? $1 / $4 : 0), ($9 > 0 ? $6 / $9 : 0),
                                           ($3 > 0 ? $5 / $3 : 0), ($8 > 0 ? $10 / $8 : 0) }' >>"$rfile"
    r=$((r + 1))
done
stop_tallyd
stop_redis
record "redis SETBIT, no pipelining (req/s, median of $BENCH_ROUNDS rounds)" "$(median "$rfile" 4)" req/s
record "redis GETBIT, no pipelining (req/s, median)" "$(median "$rfile" 9)" req/s
record "redis SETBIT CPU per operation (median)" "$(median "$rfile" 5)" us
record "redis GETBIT CPU per operation (median)" "$(median "$rfile" 10)" us
record "tally POST /bits/{key}/setbit (req/s, median)" "$(median "$rfile" 1)" req/s
record "tally POST /bits/{key}/setbit p99 (ms, median)" "$(median "$rfile" 2)" ms
record "tally GET /bits/{key}/getbit (req/s, median)" "$(median "$rfile" 6)" req/s
record "tally POST /bits/{key}/setbit CPU per operation (median)" "$(median "$rfile" 3)" us
record "tally GET /bits/{key}/getbit CPU per operation (median)" "$(median "$rfile" 8)" us
record_rounds "tally POST /bits/{key}/setbit vs redis SETBIT" "$rfile" 11 1.0
chart vs_redis "POST /bits/{key}/setbit" "Redis SETBIT" "$ratio"
record_rounds "tally GET /bits/{key}/getbit vs redis GETBIT" "$rfile" 12 -
chart vs_redis "GET /bits/{key}/getbit" "Redis GETBIT" "$ratio"
# as "redis CPU per tally CPU": >= 1.0 means tally spends no more per operation
record_rounds "setbit CPU per operation, redis/tally" "$rfile" 13 -
record_rounds "getbit CPU per operation, redis/tally" "$rfile" 14 -

# -- 2. activity: N users x 365 days ------------------------------------------
val() { printf '%s\n' "$out" | awk -F'\t' -v k="$1" '$1 == k { print $2 }'; }
for variant in p10 p1 clustered; do
    start_redis
    start_tallyd --in-memory
    out=$(on_client "$BUILD/bench/activity_load" "$TALLY_PORT" "$REDIS_PORT" "$variant" "$ACTIVITY_USERS" \
        "$ACTIVITY_DAYS") || { stop_tallyd; stop_redis; echo "bench: activity_load $variant failed" >&2; exit 1; }
    stop_tallyd
    stop_redis
    tag="activity $variant, $ACTIVITY_USERS users x $ACTIVITY_DAYS days"
    record "$tag: active (user, day) pairs" "$(val ids_total)" ids
    record "$tag: load into redis (SET)" "$(val load_redis_s)" s
    record "$tag: load into tally (import)" "$(val load_tally_s)" s
    mr=$(val memory_redis) mt=$(val memory_tally)
    record "$tag: redis used_memory" "$mr" bytes
    record "$tag: tally memory_bytes" "$mt" bytes
    # memory as "redis bytes per tally byte": >= 1.0 means tally uses no more
    target=""
    [ "$variant" = p10 ] && target=1.0
    [ "$variant" = p1 ] && target=4.0
    record "$tag: memory, redis/tally" "$(awk -v a="$mr" -v b="$mt" 'BEGIN { printf "%.3f", a / b }')" x \
        "(1.0 = equal)" 1 $target
    for w in 7 30 365; do
        [ -n "$(val "tally_ms_$w")" ] || continue
        record "$tag: $w-day window, users" "$(val "users_$w")" users
        record "$tag: $w-day window, redis BITOP OR+BITCOUNT" "$(val "redis_ms_$w")" ms
        [ "$w" = 365 ] && target_w=5.0 || target_w=""
        record "$tag: $w-day window, tally count (speed-up)" \
            "$(awk -v r="$(val "redis_ms_$w")" -v t="$(val "tally_ms_$w")" 'BEGIN { printf "%.2f", r / t }')" x \
            "(1.0 = as fast as redis; tally $(val "tally_ms_$w") ms)" 1 $target_w
    done
done
