# suite_11_throttle_2cores.sh - the same /throttle load with both cores
# shared: tallyd with --threads 2, single-threaded redis-server and the bare
# libmicrohttpd server (honest mode, 2 threads) each on CPUs 0-1, and the
# load generators (wrk with 2 threads, redis-benchmark with 2 threads) on the
# same two CPUs.  Redis executes commands on one thread, so this shows what
# a second core buys each of them on a 2-core machine where client and
# server compete for the same cores; it is not a one-core-each comparison
# (suite_10 is).  Reported, no target.
#
# Interleaved rounds, as suite_10: the three servers run side by side and
# each round measures Redis, the bare server's POST and tallyd's POST and
# GET back to back (in alternating order), BENCH_ROUNDS rounds of about
# BENCH_SECONDS / BENCH_ROUNDS seconds; the figures are medians over the
# rounds, the ratios medians of each round's own ratios.  A single run of
# each, one after the other, moved by tens of percent from run to run.
# The rounds send each of the 100 000 keys more requests than the limit
# (30 a minute after a burst of 16) allows, so the later rounds get some
# 429s, which wrk reports as non-2xx: a refusal costs tallyd what an
# allowance does (one header more).
set -eu
SERVER_CPU=0,1 CLIENT_CPU=0,1 WRK_THREADS=2 REDIS_BENCH_THREADS=2 TALLY_THREADS=2
export WRK_THREADS REDIS_BENCH_THREADS TALLY_THREADS
. bench/lib.sh

start_redis
redis_sha=$(rcli SCRIPT LOAD "$(cat bench/lua/gcra.lua)")
redis_bench -n 100000 -r 100000 EVALSHA "$redis_sha" 1 user:__rand_int__ 15 30 60 1 >/dev/null   # warm-up
start_bare honest 2
start_tallyd
WRK_SECONDS=1
wrk_run "http://127.0.0.1:$BARE_PORT/throttle" bench/lua/throttle_post.lua >/dev/null
wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post.lua >/dev/null
WRK_SECONDS=$ROUND_SECONDS

# one round, one line: "REDIS_RPS REDIS_P99 BARE_RPS POST_RPS POST_P99 GET_RPS GET_P99"
redis_2c() { redis_bench -n $((ROUND_SECONDS * 50000)) -r 100000 EVALSHA "$redis_sha" 1 user:__rand_int__ 15 30 60 1; }
bare_2c() { wrk_run "http://127.0.0.1:$BARE_PORT/throttle" bench/lua/throttle_post.lua | cut -d' ' -f1; }
post_2c() { wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post.lua | cut -d' ' -f1-2; }
get_2c() { wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/throttle_get.lua | cut -d' ' -f1-2; }
rfile="$BENCH_TMP/rounds.2cores"
: >"$rfile"
r=1
while [ "$r" -le "$BENCH_ROUNDS" ]; do
    if [ $((r % 2)) = 1 ]; then
        x=$(redis_2c) b=$(bare_2c) p=$(post_2c) g=$(get_2c)
    else
        g=$(get_2c) p=$(post_2c) b=$(bare_2c) x=$(redis_2c)
    fi
    echo "$x $b $p $g" | awk '{ printf "%s %s %s %s %s %s %s %.4f %.4f %.4f\n", $1, $2, $3, $4, $5, $6, $7,
                                ($1 > 0 ? $4 / $1 : 0), ($1 > 0 ? $6 / $1 : 0), ($3 > 0 ? $4 / $3 : 0) }' >>"$rfile"
    r=$((r + 1))
done
unset WRK_SECONDS
stop_tallyd
stop_bare
stop_redis

record "2 cores: redis EVALSHA gcra.lua (req/s, median of $BENCH_ROUNDS rounds)" "$(median "$rfile" 1)" req/s
record "2 cores: redis EVALSHA gcra.lua p99" "$(median "$rfile" 2)" ms
record "2 cores: bare libmicrohttpd honest, 2 threads (req/s, median)" "$(median "$rfile" 3)" req/s
record "2 cores: tally --threads 2 POST /throttle (req/s, median)" "$(median "$rfile" 4)" req/s
record "2 cores: tally --threads 2 POST /throttle p99" "$(median "$rfile" 5)" ms
record "2 cores: tally --threads 2 GET /throttle/{key} (req/s, median)" "$(median "$rfile" 6)" req/s
record "2 cores: tally --threads 2 GET /throttle/{key} p99" "$(median "$rfile" 7)" ms
record_rounds "2 cores: tally POST /throttle vs redis EVALSHA gcra.lua" "$rfile" 8 -
record_rounds "2 cores: tally GET /throttle/{key} vs redis EVALSHA gcra.lua" "$rfile" 9 -
record_rounds "2 cores: tally POST /throttle vs bare honest" "$rfile" 10 -
