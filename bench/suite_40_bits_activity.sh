# suite_40_bits_activity.sh - /bits and /activity against Redis in the same run.
#
#  1. /bits single-operation throughput without pipelining: POST setbit (and
#     GET getbit) over 100 000 keys vs redis-benchmark SETBIT (GETBIT), 50
#     connections each.  Target (issue 5): setbit >= 1.0x Redis SETBIT.
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
# Besides requests per second, each server's CPU time per operation (utime +
# stime over the run / operations): on a busy machine it is steadier than
# throughput, and on one server core throughput is its inverse.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
us_per_op() { awk -v t="$1" -v hz="$(getconf CLK_TCK)" -v n="$2" 'BEGIN { printf "%.2f", t / hz / n * 1e6 }'; }
nreq=$((BENCH_SECONDS * 40000))
start_redis
c0=$(cpu_ticks "$REDIS_PID")
set -- $(redis_bench -n "$nreq" -r 100000 SETBIT bits:__rand_int__ 12345 1)
redis_set=$1
c1=$(cpu_ticks "$REDIS_PID")
set -- $(redis_bench -n "$nreq" -r 100000 GETBIT bits:__rand_int__ 12345)
redis_get=$1
c2=$(cpu_ticks "$REDIS_PID")
stop_redis
redis_set_us=$(us_per_op $((c1 - c0)) "$nreq")
redis_get_us=$(us_per_op $((c2 - c1)) "$nreq")
record "redis SETBIT, no pipelining (req/s)" "$redis_set" req/s
record "redis GETBIT, no pipelining (req/s)" "$redis_get" req/s
record "redis SETBIT CPU per operation" "$redis_set_us" us
record "redis GETBIT CPU per operation" "$redis_get_us" us

start_tallyd   # default persistence (journal on, fsync everysec), as suite_10
c0=$(cpu_ticks "$TALLY_PID")
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/bits_setbit.lua)
tally_set=$1 tally_set_p99=$2
c1=$(cpu_ticks "$TALLY_PID")
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/bits_getbit.lua)
tally_get=$1
c2=$(cpu_ticks "$TALLY_PID")
stop_tallyd
tally_set_us=$(us_per_op $((c1 - c0)) "$(awk -v r="$tally_set" -v s="$BENCH_SECONDS" 'BEGIN { print int(r * s) }')")
tally_get_us=$(us_per_op $((c2 - c1)) "$(awk -v r="$tally_get" -v s="$BENCH_SECONDS" 'BEGIN { print int(r * s) }')")
record "tally POST /bits/{key}/setbit p99" "$tally_set_p99" ms
record "tally POST /bits/{key}/setbit (req/s)" "$tally_set" req/s "redis SETBIT" "$redis_set" 1.0
record "tally GET /bits/{key}/getbit (req/s)" "$tally_get" req/s "redis GETBIT" "$redis_get"
# as "redis CPU per tally CPU": >= 1.0 means tally spends no more per operation
record "setbit CPU per operation, redis/tally" "$(awk -v a="$redis_set_us" -v b="$tally_set_us" 'BEGIN { printf "%.2f", a / b }')" x \
    "(tally $tally_set_us us, redis $redis_set_us us)" 1
record "getbit CPU per operation, redis/tally" "$(awk -v a="$redis_get_us" -v b="$tally_get_us" 'BEGIN { printf "%.2f", a / b }')" x \
    "(tally $tally_get_us us, redis $redis_get_us us)" 1

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
