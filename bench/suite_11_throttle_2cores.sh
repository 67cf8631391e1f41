# suite_11_throttle_2cores.sh - the same /throttle load with both cores
# shared: tallyd with --threads 2, single-threaded redis-server and the bare
# libmicrohttpd server (honest mode, 2 threads) each on CPUs 0-1, and the
# load generators (wrk with 2 threads, redis-benchmark with 2 threads) on the
# same two CPUs.  Redis executes commands on one thread, so this shows what
# a second core buys each of them on a 2-core machine where client and
# server compete for the same cores; it is not a one-core-each comparison
# (suite_10 is).  Reported, no target.
set -eu
SERVER_CPU=0,1 CLIENT_CPU=0,1 WRK_THREADS=2 REDIS_BENCH_THREADS=2 TALLY_THREADS=2
export WRK_THREADS REDIS_BENCH_THREADS TALLY_THREADS
. bench/lib.sh

set -- $(redis_gcra)
redis_rps=$1 redis_p99=$2
record "2 cores: redis EVALSHA gcra.lua (req/s)" "$redis_rps" req/s
record "2 cores: redis EVALSHA gcra.lua p99" "$redis_p99" ms

start_bare honest 2
set -- $(wrk_run "http://127.0.0.1:$BARE_PORT/throttle" bench/lua/throttle_post.lua)
bare_rps=$1
stop_bare
record "2 cores: bare libmicrohttpd honest, 2 threads (req/s)" "$bare_rps" req/s

start_tallyd
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post.lua)
post_rps=$1 post_p99=$2
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/throttle_get.lua)
get_rps=$1 get_p99=$2
stop_tallyd
record "2 cores: tally --threads 2 POST /throttle p99" "$post_p99" ms
record "2 cores: tally --threads 2 GET /throttle/{key} p99" "$get_p99" ms
record "2 cores: tally --threads 2 POST /throttle (req/s)" "$post_rps" req/s "redis EVALSHA gcra.lua, 2 cores" "$redis_rps"
record "2 cores: tally --threads 2 GET /throttle/{key} (req/s)" "$get_rps" req/s "redis EVALSHA gcra.lua, 2 cores" "$redis_rps"
record "2 cores: tally --threads 2 POST /throttle vs bare" "$post_rps" req/s "bare libmicrohttpd honest, 2 threads" "$bare_rps"
