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
#
# Interleaved rounds (issue 20).  On a shared machine the CPU a server gets
# drifts by tens of percent within a minute, so one measurement of tallyd
# followed by one of a reference compares two moments as much as two
# servers.  tallyd, the honest bare server and redis-server therefore run
# side by side (all pinned to the server core; only the one under load
# works), and each route is measured in BENCH_ROUNDS rounds of about
# BENCH_SECONDS / BENCH_ROUNDS seconds (at least 1), the three back to back
# in each round, in alternating order.  Each round gives ratios of
# neighbours; the figures are the medians over the rounds: throughput of
# each server, the throughput ratios, and the ratio of server CPU per
# request (all the server's threads, /proc/PID/task/*/schedstat: the bare
# server's over tallyd's, 1.0 being the bare server's cost).
set -eu
. bench/lib.sh

# the fixed bare server: what libmicrohttpd alone costs (context, no target)
start_bare fixed "${TALLY_THREADS:-1}"
set -- $(wrk_run "http://127.0.0.1:$BARE_PORT/throttle" bench/lua/throttle_post.lua)
fixed_rps=$1
stop_bare
record "bare libmicrohttpd fixed body (req/s)" "$fixed_rps" req/s

# the hook's policy: a limit never reached, keyed by the path (as suite_20)
cat >"$BENCH_TMP/hook_policies.json" <<JSON
{"policies": {"bench": {"algorithm": "sliding_window", "max_count": 1000000000, "period": 60,
                        "key": "{path}", "deny_status": 403}}}
JSON
start_bare honest "${TALLY_THREADS:-1}"
start_tallyd --config "$BENCH_TMP/hook_policies.json"
start_redis
redis_sha=$(rcli SCRIPT LOAD "$(cat bench/lua/gcra.lua)")
redis_bench -n 100000 -r 100000 EVALSHA "$redis_sha" 1 user:__rand_int__ 15 30 60 1 >/dev/null   # warm-up

# one_server PID PORT PATH SCRIPT: "RPS P99 CPU_US" of one round
one_server() {
    set -- $(server_cpu_us "$1" wrk_run "http://127.0.0.1:$2$3" "$4")
    echo "$1 $2 $4"
}

# redis_round: Redis running the same GCRA by EVALSHA over 100 000 keys
# for about a round: "RPS"
redis_round() {
    set -- $(redis_bench -n $((ROUND_SECONDS * 50000)) -r 100000 EVALSHA "$redis_sha" 1 user:__rand_int__ 15 30 60 1)
    echo "$1"
}

# rounds KIND PATH SCRIPT: interleaved rounds into $BENCH_TMP/rounds.KIND,
# one line each: "TALLY_RPS TALLY_P99 TALLY_CPU BARE_RPS BARE_P99 BARE_CPU
# RPS_RATIO CPU_RATIO REDIS_RPS REDIS_RATIO"; a warm-up of each server first
rounds() {
    kind=$1 path=$2 script=$3 rfile="$BENCH_TMP/rounds.$1"
    : >"$rfile"
    WRK_SECONDS=1
    wrk_run "http://127.0.0.1:$TALLY_PORT$path" "$script" >/dev/null
    wrk_run "http://127.0.0.1:$BARE_PORT$path" "$script" >/dev/null
    WRK_SECONDS=$ROUND_SECONDS
    r=1
    while [ "$r" -le "$BENCH_ROUNDS" ]; do
        if [ $((r % 2)) = 1 ]; then
            t=$(one_server "$TALLY_PID" "$TALLY_PORT" "$path" "$script")
            b=$(one_server "$BARE_PID" "$BARE_PORT" "$path" "$script")
            x=$(redis_round)
        else
            x=$(redis_round)
            b=$(one_server "$BARE_PID" "$BARE_PORT" "$path" "$script")
            t=$(one_server "$TALLY_PID" "$TALLY_PORT" "$path" "$script")
        fi
        echo "$t $b $x" | awk '{ printf "%s %s %s %s %s %s %.4f %.4f %s %.4f\n", $1, $2, $3, $4, $5, $6,
                                   ($4 > 0 ? $1 / $4 : 0), ($3 > 0 ? $6 / $3 : 0), $7, ($7 > 0 ? $1 / $7 : 0) }' >>"$rfile"
        r=$((r + 1))
    done
    unset WRK_SECONDS
}

rounds post /throttle bench/lua/throttle_post.lua
rounds get / bench/lua/throttle_get.lua
export PATH_PREFIX=/hook/bench/
rounds hook / bench/lua/random_path.lua

# DESIGN §5: p99 <= 1 ms at half of peak throughput, measured open-loop (each
# latency counted from when the request was due, so queueing shows); each
# server at half of its own median peak
ol_post=$(openloop_half "$TALLY_PORT" "$(median "$BENCH_TMP/rounds.post" 1)" throttle_post)
ol_get=$(openloop_half "$TALLY_PORT" "$(median "$BENCH_TMP/rounds.get" 1)" throttle_get)
ol_bare_post=$(openloop_half "$BARE_PORT" "$(median "$BENCH_TMP/rounds.post" 4)" throttle_post)
ol_bare_get=$(openloop_half "$BARE_PORT" "$(median "$BENCH_TMP/rounds.get" 4)" throttle_get)
stop_tallyd
stop_bare
stop_redis

# record_ol NAME LABEL "P50 P99 P999 RATE": the three percentiles of one
# open-loop run (LABEL: its bar group in the latency chart)
record_ol() {
    label=$2
    set -- "$1" $3
    record "$1 at half of peak ($5/s): p50" "$2" ms
    record "$1 at half of peak ($5/s): p99" "$3" ms
    record "$1 at half of peak ($5/s): p99.9" "$4" ms
    chart latency "$label" p50 "$2"
    chart latency "$label" p99 "$3"
    chart latency "$label" p99.9 "$4"
}

# report KIND LABEL TARGET: one route's medians
report() {
    f="$BENCH_TMP/rounds.$1"
    t_rps=$(median "$f" 1) b_rps=$(median "$f" 4)
    record "tally $2 (req/s, median of $BENCH_ROUNDS rounds)" "$t_rps" req/s
    record "tally $2 p99 (ms, median of rounds)" "$(median "$f" 2)" ms
    record "redis EVALSHA gcra.lua, same rounds (req/s, median)" "$(median "$f" 9)" req/s
    record_rounds "tally $2 vs redis EVALSHA gcra.lua" "$f" 10 1.5
    chart vs_redis "$2" "Redis EVALSHA GCRA in Lua" "$ratio"
    record "bare honest, same requests (req/s, median)" "$b_rps" req/s
    chart throughput "$2" tally "$t_rps"
    chart throughput "$2" "bare libmicrohttpd server" "$b_rps"
    chart throughput "$2" "Redis, GCRA in Lua" "$(median "$f" 9)"
    record "tally $2 server CPU (us/request, median)" "$(median "$f" 3)" us
    record "bare honest server CPU (us/request, median)" "$(median "$f" 6)" us
    record_rounds "tally $2 vs bare honest, throughput" "$f" 7 "$3"
    record_rounds "tally $2 vs bare honest, CPU per request" "$f" 8 "$3" "bare's CPU over tally's"
    record "tally $2 vs bare fixed body (context)" "$t_rps" req/s "bare libmicrohttpd fixed body" "$fixed_rps"
}
report post "POST /throttle" 0.85
report get "GET /throttle/{key}" 0.9
report hook "GET /hook/{policy}" 0.9
record_ol "tally POST /throttle, open loop," "tally POST" "$ol_post"
record_ol "tally GET /throttle/{key}, open loop," "tally GET" "$ol_get"
record_ol "bare honest POST, open loop," "bare server POST" "$ol_bare_post"
record_ol "bare honest GET, open loop," "bare server GET" "$ol_bare_get"
