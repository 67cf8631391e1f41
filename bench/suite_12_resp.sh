# suite_12_resp.sh - the Redis protocol's port (--resp-port) against
# redis-server, both driven by redis-benchmark with the same commands over
# 100 000 keys: CL.THROTTLE against Redis running the same GCRA in Lua
# (EVALSHA bench/lua/gcra.lua: redis-cell's command is a module Debian does
# not ship), and the native commands PFADD, SETBIT, INCR and GEOSEARCH
# (10 000 members around Berlin, the 10 nearest within 500 m) on both.
# Each unpipelined and with -P 16 (16 commands in flight per connection,
# as client libraries' pipelines and envoyproxy/ratelimit send them).
# Targets (issue 40): CL.THROTTLE >= 2x Redis+Lua unpipelined and >= 3x
# with -P 16; every native command >= 1.0x Redis.
#
# Interleaved rounds, as suite_10: tallyd and redis-server run side by
# side pinned to the server core, redis-benchmark on the client core; each
# row is BENCH_ROUNDS rounds, tally and Redis back to back in alternating
# order; the ratio is the median of the rounds' own ratios.  Each row also
# gives the servers' CPU per request (all threads, schedstat): unpipelined,
# one core of redis-benchmark is the limit for both servers (about 80 000
# requests a second here, whichever answers), and CPU per request is then
# what tells them apart.
#
# Then both cores: tallyd --threads 2 on CPUs 0-1 against redis-server
# (one thread executes its commands) on the same CPUs, redis-benchmark
# with two threads on them too: what a second core buys tally when client
# and servers share the machine.  Reported, no target.
set -eu
. bench/lib.sh

# the sorted-set load both sides get before GEOSEARCH: 10 000 members on a
# 100 x 100 grid of about 100 m around Berlin's centre (a search of 500 m
# sorts about 80 of them and answers the 10 nearest)
geo_load() {
    awk 'BEGIN { for (i = 0; i < 10000; i++)
                   printf "GEOADD geo %.6f %.6f m%d\n", 13.35 + (i % 100) * 0.0015, 52.47 + int(i / 100) * 0.0009, i }' |
        redis-cli -p "$1" >/dev/null
}

start_tallyd_resp() {
    TALLY_RESP=$(freeport)
    start_tallyd --resp-port "$TALLY_RESP" "$@"
    i=0
    until redis-cli -p "$TALLY_RESP" PING >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -lt 200 ] || { echo "bench: tallyd's RESP port did not answer" >&2; return 1; }
        sleep 0.05
    done
}

# rb PORT PID PIPELINE N CMD...: redis-benchmark's "RPS P99" for one test,
# and the server's CPU per request (us, all its threads: what the server
# costs even when the one-core load generator is the limit, as unpipelined)
rb() {
    rb_port=$1 rb_pid=$2 rb_pipe=$3 rb_n=$4
    shift 4
    rb_c0=$(cpu_ns "$rb_pid")
    rb_out=$(REDIS_PORT=$rb_port redis_bench -P "$rb_pipe" -n "$rb_n" -r 100000 "$@")
    rb_c1=$(cpu_ns "$rb_pid")
    echo "$rb_out" | awk -v c0="$rb_c0" -v c1="$rb_c1" -v n="$rb_n" '{ printf "%s %s %.3f\n", $1, $2, (c1 - c0) / n / 1000 }'
}

# resp_rounds FILE PIPELINE N TALLY_CMD -- REDIS_CMD: BENCH_ROUNDS rounds,
# one line each: "TALLY_RPS TALLY_P99 TALLY_CPU REDIS_RPS REDIS_P99
# REDIS_CPU RATIO CPU_RATIO" (CPU_RATIO: Redis's CPU per request over
# tally's, higher is better for tally)
resp_rounds() {
    rr_file=$1 rr_pipe=$2 rr_n=$3
    shift 3
    rr_t="" rr_r=""
    while [ "$1" != "--" ]; do rr_t="$rr_t $1"; shift; done
    shift
    rr_r="$*"
    : >"$rr_file"
    rb "$TALLY_RESP" "$TALLY_PID" "$rr_pipe" $((rr_n / 4)) $rr_t >/dev/null    # warm-up
    rb "$REDIS_PORT0" "$REDIS_PID" "$rr_pipe" $((rr_n / 4)) $rr_r >/dev/null
    r=1
    while [ "$r" -le "$BENCH_ROUNDS" ]; do
        if [ $((r % 2)) = 1 ]; then
            t=$(rb "$TALLY_RESP" "$TALLY_PID" "$rr_pipe" "$rr_n" $rr_t)
            x=$(rb "$REDIS_PORT0" "$REDIS_PID" "$rr_pipe" "$rr_n" $rr_r)
        else
            x=$(rb "$REDIS_PORT0" "$REDIS_PID" "$rr_pipe" "$rr_n" $rr_r)
            t=$(rb "$TALLY_RESP" "$TALLY_PID" "$rr_pipe" "$rr_n" $rr_t)
        fi
        echo "$t $x" | awk '{ printf "%s %s %s %s %s %s %.4f %.4f\n", $1, $2, $3, $4, $5, $6,
                                   ($4 > 0 ? $1 / $4 : 0), ($3 > 0 ? $6 / $3 : 0) }' >>"$rr_file"
        r=$((r + 1))
    done
}

# row NAME PIPELINE TARGET CHART_GROUP TALLY_CMD -- REDIS_CMD
# (record, in bench/lib.sh, sets name, value, unit...: this keeps its own)
row() {
    row_name=$1 row_pipe=$2 row_target=$3 row_group=$4
    shift 4
    row_n=$((ROUND_SECONDS * (row_pipe > 1 ? 400000 : 60000) / ${ROW_SLOWER:-1}))
    row_f="$BENCH_TMP/resp.$(echo "$row_name" | tr -c 'A-Za-z0-9' _)"
    resp_rounds "$row_f" "$row_pipe" "$row_n" "$@"
    record "RESP $row_name, tally (req/s, median of $BENCH_ROUNDS rounds)" "$(median "$row_f" 1)" req/s
    record "RESP $row_name, redis (req/s, median)" "$(median "$row_f" 4)" req/s
    record "RESP $row_name, p99 tally (ms, median)" "$(median "$row_f" 2)" ms
    record "RESP $row_name, p99 redis (ms, median)" "$(median "$row_f" 5)" ms
    record "RESP $row_name, server CPU tally (us/request, median)" "$(median "$row_f" 3)" us
    record "RESP $row_name, server CPU redis (us/request, median)" "$(median "$row_f" 6)" us
    record_rounds "RESP $row_name, tally vs redis, CPU per request" "$row_f" 8 "$row_target" "redis's CPU over tally's"
    record_rounds "RESP $row_name, tally vs redis" "$row_f" 7 "$row_target"
    chart vs_redis "RESP $row_group" "Redis" "$ratio"
}

one_core() {
    start_redis
    REDIS_PORT0=$REDIS_PORT
    sha=$(rcli SCRIPT LOAD "$(cat bench/lua/gcra.lua)")
    start_tallyd_resp
    geo_load "$TALLY_RESP"
    geo_load "$REDIS_PORT0"
    for p in 1 16; do
        if [ "$p" = 1 ]; then tt=2 tn=1; else tt=3 tn=1; fi
        row "CL.THROTTLE vs EVALSHA gcra.lua, -P $p" "$p" "$tt" "CL.THROTTLE -P $p" \
            CL.THROTTLE user:__rand_int__ 15 30 60 1 -- EVALSHA "$sha" 1 user:__rand_int__ 15 30 60 1
        row "PFADD, -P $p" "$p" "$tn" "PFADD -P $p" PFADD hll el:__rand_int__ -- PFADD hll el:__rand_int__
        row "SETBIT, -P $p" "$p" "$tn" "SETBIT -P $p" SETBIT bits:__rand_int__ 12345 1 -- SETBIT bits:__rand_int__ 12345 1
        row "INCR, -P $p" "$p" "$tn" "INCR -P $p" INCR counter:__rand_int__ -- INCR counter:__rand_int__
        ROW_SLOWER=8   # a search costs both sides about 8 of the other commands
        row "GEOSEARCH 10 nearest, -P $p" "$p" "$tn" "GEOSEARCH -P $p" \
            GEOSEARCH geo FROMLONLAT 13.4 52.51 BYRADIUS 500 m ASC COUNT 10 -- \
            GEOSEARCH geo FROMLONLAT 13.4 52.51 BYRADIUS 500 m ASC COUNT 10
        ROW_SLOWER=1
    done
    stop_tallyd
    stop_redis
}

two_cores() {
    SERVER_CPU=0,1 CLIENT_CPU=0,1 REDIS_BENCH_THREADS=2 TALLY_THREADS=2
    ON_SERVER="taskset -c $SERVER_CPU"
    export REDIS_BENCH_THREADS
    start_redis
    REDIS_PORT0=$REDIS_PORT
    sha=$(rcli SCRIPT LOAD "$(cat bench/lua/gcra.lua)")
    start_tallyd_resp
    for p in 1 16; do
        tc_n=$((ROUND_SECONDS * (p > 1 ? 400000 : 60000)))
        tc_f="$BENCH_TMP/resp2.$p"
        resp_rounds "$tc_f" "$p" "$tc_n" CL.THROTTLE user:__rand_int__ 15 30 60 1 -- EVALSHA "$sha" 1 user:__rand_int__ 15 30 60 1
        record "2 cores: RESP CL.THROTTLE -P $p, tally --threads 2 (req/s, median)" "$(median "$tc_f" 1)" req/s
        record "2 cores: redis EVALSHA gcra.lua -P $p (req/s, median)" "$(median "$tc_f" 4)" req/s
        record_rounds "2 cores: RESP CL.THROTTLE -P $p vs redis EVALSHA" "$tc_f" 7 -
        tc_f="$BENCH_TMP/resp2i.$p"
        resp_rounds "$tc_f" "$p" "$tc_n" INCR counter:__rand_int__ -- INCR counter:__rand_int__
        record_rounds "2 cores: RESP INCR -P $p, tally --threads 2 vs redis" "$tc_f" 7 -
    done
    stop_tallyd
    stop_redis
}

one_core
two_cores
