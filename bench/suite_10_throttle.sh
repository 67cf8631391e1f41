# suite_10_throttle.sh - /throttle and /hook/{policy} against Redis running
# the same GCRA in Lua (EVALSHA) and against a bare libmicrohttpd server.
# The bare server runs in two modes (bench/bare_mhd.c): "fixed" answers a
# constant body, "honest" does what any real handler must (keeps the body,
# looks up Content-Type, keeps per-request state, answers a formatted body
# and the five RateLimit headers).  Targets (issues 2 and 20): >= 1.5x
# Redis+Lua; POST /throttle >= 0.85x and GET /throttle/{key} and GET
# /hook/{policy} >= 0.9x the honest bare server, in the same run; the fixed
# bare server's ratios are reported next to them.  Latency at half of each
# server's own peak (DESIGN §5: p99 <= 1 ms), open loop, for POST and GET
# on tallyd and on the honest bare server.
set -eu
. bench/lib.sh

set -- $(redis_gcra)
redis_rps=$1 redis_p99=$2
record "redis EVALSHA gcra.lua (req/s)" "$redis_rps" req/s
record "redis EVALSHA gcra.lua p99" "$redis_p99" ms

# tallyd's libmicrohttpd pool per connection at the default --max-url (16
# KiB + 8 KiB for headers, service/server.c); the bare servers use
# libmicrohttpd's default (32 KiB) unless given it.  libmicrohttpd zeroes
# the pool before every request, so its size is a cost per request: the
# honest server is also measured with tallyd's pool, and both ratios given.
TALLY_POOL=24576

# bare_run MODE [POOL]: the bare server's POST and GET (the same wrk scripts):
# "POST_RPS GET_RPS POST_CPU_US GET_CPU_US" (server CPU per request); for
# the honest one with the default pool, its latency at half of its own
# peaks into $BENCH_TMP/ol_bare
bare_run() {
    mode=$1 pool=${2:-}
    start_bare "$mode" "${TALLY_THREADS:-1}" $pool
    set -- $(server_cpu_us $BARE_PID wrk_run "http://127.0.0.1:$BARE_PORT/throttle" bench/lua/throttle_post.lua)
    post=$1 post_cpu=$4
    set -- $(server_cpu_us $BARE_PID wrk_run "http://127.0.0.1:$BARE_PORT/" bench/lua/throttle_get.lua)
    get=$1 get_cpu=$4
    if [ "$mode" = honest ] && [ -z "$pool" ]; then
        { openloop_half "$BARE_PORT" "$post" throttle_post; openloop_half "$BARE_PORT" "$get" throttle_get; } \
            >"$BENCH_TMP/ol_bare"
    fi
    stop_bare
    echo "$post $get $post_cpu $get_cpu"
}
set -- $(bare_run fixed)
bare_rps=$1
set -- $(bare_run honest)
honest_post_rps=$1 honest_get_rps=$2 honest_post_cpu=$3 honest_get_cpu=$4
set -- $(bare_run honest $TALLY_POOL)
pool_post_rps=$1 pool_get_rps=$2 pool_post_cpu=$3 pool_get_cpu=$4
record "bare libmicrohttpd fixed body (req/s)" "$bare_rps" req/s
record "bare libmicrohttpd honest POST (req/s)" "$honest_post_rps" req/s
record "bare libmicrohttpd honest GET (req/s)" "$honest_get_rps" req/s
record "bare honest POST, tallyd's pool (req/s)" "$pool_post_rps" req/s
record "bare honest GET, tallyd's pool (req/s)" "$pool_get_rps" req/s

# the hook's policy: a limit never reached, keyed by the path (as suite_20)
cat >"$BENCH_TMP/hook_policies.json" <<JSON
{"policies": {"bench": {"algorithm": "sliding_window", "max_count": 1000000000, "period": 60,
                        "key": "{path}", "deny_status": 403}}}
JSON
start_tallyd --config "$BENCH_TMP/hook_policies.json"
set -- $(server_cpu_us $TALLY_PID wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post.lua)
post_rps=$1 post_p99=$2 post_cpu=$4
set -- $(server_cpu_us $TALLY_PID wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/throttle_get.lua)
get_rps=$1 get_p99=$2 get_cpu=$4
export PATH_PREFIX=/hook/bench/
set -- $(server_cpu_us $TALLY_PID wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/random_path.lua)
hook_rps=$1 hook_p99=$2 hook_cpu=$4
# DESIGN §5: p99 <= 1 ms at half of peak throughput, measured open-loop (each
# latency counted from when the request was due, so queueing shows)
ol_post=$(openloop_half "$TALLY_PORT" "$post_rps" throttle_post)
ol_get=$(openloop_half "$TALLY_PORT" "$get_rps" throttle_get)
stop_tallyd
record "tally POST /throttle p99" "$post_p99" ms
record "tally GET /throttle/{key} p99" "$get_p99" ms
record "tally GET /hook/{policy} p99" "$hook_p99" ms
# record_ol NAME "P50 P99 P999 RATE": the three percentiles of one open-loop run
record_ol() {
    set -- "$1" $2
    record "$1 at half of peak ($5/s): p50" "$2" ms
    record "$1 at half of peak ($5/s): p99" "$3" ms
    record "$1 at half of peak ($5/s): p99.9" "$4" ms
}
record_ol "tally POST /throttle, open loop," "$ol_post"
record_ol "tally GET /throttle/{key}, open loop," "$ol_get"
record_ol "bare honest POST, open loop," "$(sed -n 1p "$BENCH_TMP/ol_bare")"
record_ol "bare honest GET, open loop," "$(sed -n 2p "$BENCH_TMP/ol_bare")"
record "tally POST /throttle (req/s)" "$post_rps" req/s "redis EVALSHA gcra.lua" "$redis_rps" 1.5
record "tally GET /throttle/{key} (req/s)" "$get_rps" req/s "redis EVALSHA gcra.lua" "$redis_rps" 1.5
record "tally GET /hook/{policy} (req/s)" "$hook_rps" req/s "redis EVALSHA gcra.lua" "$redis_rps" 1.5
record "tally POST /throttle vs bare MHD honest" "$post_rps" req/s "bare libmicrohttpd honest POST" "$honest_post_rps" 0.85
record "tally GET /throttle/{key} vs bare MHD honest" "$get_rps" req/s "bare libmicrohttpd honest GET" "$honest_get_rps" 0.9
record "tally GET /hook/{policy} vs bare MHD honest" "$hook_rps" req/s "bare libmicrohttpd honest GET" "$honest_get_rps" 0.9
# server CPU per request (lower is better, so the ratio is the reference's
# over tally's: 1.0 would be the bare server's cost)
record "tally POST /throttle server CPU (us/request)" "$post_cpu" us
record "tally GET /throttle/{key} server CPU (us/request)" "$get_cpu" us
record "tally GET /hook/{policy} server CPU (us/request)" "$hook_cpu" us
record "bare honest POST server CPU (us/request)" "$honest_post_cpu" us
record "bare honest GET server CPU (us/request)" "$honest_get_cpu" us
record "CPU/request: bare honest POST over tally POST" "$honest_post_cpu" us "tally POST /throttle" "$post_cpu"
record "CPU/request: bare honest GET over tally GET" "$honest_get_cpu" us "tally GET /throttle/{key}" "$get_cpu"
record "CPU/request: bare honest GET over tally hook" "$honest_get_cpu" us "tally GET /hook/{policy}" "$hook_cpu"
record "bare honest POST server CPU, tallyd's pool (us/request)" "$pool_post_cpu" us
record "bare honest GET server CPU, tallyd's pool (us/request)" "$pool_get_cpu" us
record "tally POST /throttle vs bare honest, same pool" "$post_rps" req/s "bare honest POST, tallyd's pool" "$pool_post_rps"
record "tally GET /throttle/{key} vs bare honest, same pool" "$get_rps" req/s "bare honest GET, tallyd's pool" "$pool_get_rps"
record "tally GET /hook/{policy} vs bare honest, same pool" "$hook_rps" req/s "bare honest GET, tallyd's pool" "$pool_get_rps"
record "CPU/request: bare honest POST (same pool) over tally" "$pool_post_cpu" us "tally POST /throttle" "$post_cpu"
record "CPU/request: bare honest GET (same pool) over tally" "$pool_get_cpu" us "tally GET /throttle/{key}" "$get_cpu"
record "CPU/request: bare honest GET (same pool) over hook" "$pool_get_cpu" us "tally GET /hook/{policy}" "$hook_cpu"
record "tally POST /throttle vs bare MHD fixed body" "$post_rps" req/s "bare libmicrohttpd fixed body" "$bare_rps"
record "tally GET /throttle/{key} vs bare MHD fixed body" "$get_rps" req/s "bare libmicrohttpd fixed body" "$bare_rps"
record "tally GET /hook/{policy} vs bare MHD fixed body" "$hook_rps" req/s "bare libmicrohttpd fixed body" "$bare_rps"
