# bench/lib.sh - shared helpers for the benchmark suites (sourced, POSIX sh).
#
# Fairness: on this 2-core machine every server (tallyd, redis-server, the
# bare libmicrohttpd program) runs pinned to CPU $SERVER_CPU and every load
# generator (wrk, redis-benchmark) to CPU $CLIENT_CPU, so each comparison is
# one core of server against one core of client, in the same run.

: "${BUILD:=build/release}"
: "${SERVER_CPU:=0}"
: "${CLIENT_CPU:=1}"
: "${BENCH_SECONDS:=10}"
: "${BENCH_CONNS:=50}"
# suites measured in interleaved rounds (suite_10, suite_20): how many, and
# each round's share of BENCH_SECONDS (at least 1 s)
: "${BENCH_ROUNDS:=5}"
ROUND_SECONDS=$((BENCH_SECONDS / BENCH_ROUNDS))
[ "$ROUND_SECONDS" -ge 1 ] || ROUND_SECONDS=1
: "${RESULTS:=$BUILD/bench/results.tsv}"
# the figures the charts draw (bench/charts.sh), one row each; see chart()
: "${CHARTS:=$BUILD/bench/charts.tsv}"
TALLYD=$BUILD/tallyd
BENCH_TMP=${BENCH_TMP:-$(mktemp -d /tmp/tally-bench-XXXXXX)}
export BUILD RESULTS CHARTS BENCH_TMP

# Background servers are started as `$ON_SERVER prog &` (not through a shell
# function) so that $! is the server's own pid.
ON_SERVER="taskset -c $SERVER_CPU"
on_server() { taskset -c "$SERVER_CPU" "$@"; }
on_client() { taskset -c "$CLIENT_CPU" "$@"; }
freeport() { "$BUILD/bench/freeport"; }

wait_http() {   # wait_http PORT PATH (WAIT_SCHEME=https for a TLS server: its test certificate is not checked)
    i=0
    while [ $i -lt 500 ]; do
        if curl -sfk -o /dev/null "${WAIT_SCHEME:-http}://127.0.0.1:$1$2"; then return 0; fi
        i=$((i + 1)); sleep 0.02
    done
    echo "bench: server on port $1 did not answer $2" >&2; return 1
}

# start_tallyd [extra flags...]: sets TALLY_PORT, TALLY_PID, TALLY_DIR
start_tallyd() {
    TALLY_PORT=$(freeport)
    TALLY_DIR=$(mktemp -d "$BENCH_TMP/data-XXXXXX")
    $ON_SERVER "$TALLYD" --port "$TALLY_PORT" --data-dir "$TALLY_DIR" --threads "${TALLY_THREADS:-1}" \
        --log-level warn "$@" 2>>"$BENCH_TMP/tallyd.log" &
    TALLY_PID=$!
    wait_http "$TALLY_PORT" /readyz
}
stop_tallyd() { kill "$TALLY_PID" 2>/dev/null; wait "$TALLY_PID" 2>/dev/null; rm -rf "$TALLY_DIR"; }

# redis_gcra: Redis running the GCRA of bench/lua/gcra.lua by EVALSHA over
# 100 000 keys (a fresh server, started and stopped here); prints "RPS P99_MS"
redis_gcra() {
    start_redis
    sha=$(rcli SCRIPT LOAD "$(cat bench/lua/gcra.lua)")
    redis_bench -n $((BENCH_SECONDS * 40000)) -r 100000 EVALSHA "$sha" 1 user:__rand_int__ 15 30 60 1
    stop_redis
}

# start_bare MODE THREADS [POOL]: the bare libmicrohttpd server
# (bench/bare_mhd.c, fixed or honest; POOL: its per-connection memory pool
# in bytes, libmicrohttpd's default 32 KiB if absent); sets BARE_PORT, BARE_PID.  A free port can be taken
# before the server binds it: then another one.
start_bare() {
    for try in 1 2 3 4 5; do
        BARE_PORT=$(freeport)
        $ON_SERVER "$BUILD/bench/bare_mhd" "$BARE_PORT" "$2" "$1" ${3:-} 2>/dev/null &
        BARE_PID=$!
        sleep 0.1
        kill -0 $BARE_PID 2>/dev/null && break
    done
    wait_http "$BARE_PORT" /
}
stop_bare() { kill "$BARE_PID" 2>/dev/null; wait "$BARE_PID" 2>/dev/null || true; }

# start_redis: sets REDIS_PORT, REDIS_PID (no persistence: we compare compute)
start_redis() {
    REDIS_PORT=$(freeport)
    $ON_SERVER redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$BENCH_TMP" --logfile "$BENCH_TMP/redis.log" "$@" >/dev/null 2>&1 &
    REDIS_PID=$!
    i=0
    until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -gt 500 ] && { echo "bench: redis did not start" >&2; return 1; }; sleep 0.02
    done
}
stop_redis() { kill "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null; }
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }

# wrk_run URL [lua-script]: prints "RPS P99_MS REQUESTS" (for
# ${WRK_SECONDS:-$BENCH_SECONDS} seconds)
wrk_run() {
    out=$(on_client wrk -t"${WRK_THREADS:-1}" -c"$BENCH_CONNS" -d"${WRK_SECONDS:-$BENCH_SECONDS}s" --latency ${2:+-s "$2"} "$1" 2>&1)
    rps=$(printf '%s\n' "$out" | awk '/Requests\/sec/ {print $2}')
    nreq=$(printf '%s\n' "$out" | awk '/requests in/ {print $1}')
    p99=$(printf '%s\n' "$out" | awk '$1=="99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}')
    errs=$(printf '%s\n' "$out" | awk '/Non-2xx|Socket errors/')
    [ -n "$errs" ] && echo "bench: wrk: $errs" >&2
    echo "${rps:-0} ${p99:-0} ${nreq:-0}"
}

# server_cpu_us PID COMMAND...: runs COMMAND (a wrk_run) and prints its
# output followed by the server's CPU time per request in microseconds (all
# of the server's threads, from /proc/PID/task/*/schedstat).  CPU per request
# moves far less than throughput when other jobs share the machine: it does
# not count the time the server waits for a starved load generator.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
server_cpu_us() {
    pid=$1
    shift
    c0=$(cpu_ns "$pid")
    out=$("$@")
    c1=$(cpu_ns "$pid")
    echo "$out" | awk -v c0="$c0" -v c1="$c1" '{ printf "%s %s %s %.2f\n", $1, $2, $3, ($3 > 0 ? (c1 - c0) / $3 / 1000 : 0) }'
}

# openloop_half PORT PEAK_RPS KIND: latency at half of PEAK_RPS, open loop
# (bench/openloop.c: each latency counted from when the request was due),
# after a 1 s warm-up at the same rate.  Three runs of $OL_SECONDS seconds
# (3 by default); prints the run with the median p99 as "P50 P99 P999 RATE"
# (ms, ms, ms, requests/s achieved).  On a shared machine one run can catch
# another job's burst on either core; the median of three does not.
: "${OL_SECONDS:=3}"
openloop_half() {
    half=$(awk -v r="$2" 'BEGIN { printf "%d", r / 2 }')
    for run in 1 2 3; do
        on_client "$BUILD/bench/openloop" "$1" "$half" "$OL_SECONDS" "$BENCH_CONNS" "$3" 1
    done | awk '{ print $8, $4, $8, $10, $2 }' | sort -n | sed -n 2p | cut -d' ' -f2-
}

# redis_bench [redis-benchmark args...]: prints "RPS P99_MS" for the one test run
redis_bench() {
    out=$(on_client redis-benchmark -p "$REDIS_PORT" -c "$BENCH_CONNS" ${REDIS_BENCH_THREADS:+--threads "$REDIS_BENCH_THREADS"} --csv "$@" 2>/dev/null | tail -1)
    echo "$out" | awk -F'","' '{gsub(/"/,"",$2); gsub(/"/,"",$7); print $2, $7}'
}

# round_order ROUND WORD...: the words as given in odd rounds, reversed in
# even ones, so that interleaved rounds alternate which server goes first
round_order() {
    if [ $(($1 % 2)) = 1 ]; then shift; echo "$@"; else shift; printf '%s\n' "$@" | tac | tr '\n' ' '; fi
}

# throttle_rounds FILE SERVER...: POST /throttle on each SERVER (PORT:PID,
# or PORT:PID:PID2 to measure a second process too, say its replica) after a
# warm-up, in BENCH_ROUNDS interleaved rounds (round_order); one line a
# round in FILE, for each SERVER in the order given: "RPS P99 CPU_US
# PID2_US" (CPU per request of PID and of PID2; 0 without PID2).
throttle_rounds() {
    tr_file=$1
    shift
    tr_servers="$*"
    for s in $tr_servers; do
        WRK_SECONDS=1 wrk_run "http://127.0.0.1:${s%%:*}/throttle" bench/lua/throttle_post.lua >/dev/null
    done
    : >"$tr_file"
    tr_r=1
    while [ "$tr_r" -le "$BENCH_ROUNDS" ]; do
        for s in $(round_order "$tr_r" $tr_servers); do
            IFS=: read -r port pid pid2 <<EOF_SERVER
$s
EOF_SERVER
            c0=$( [ -n "$pid2" ] && cpu_ns "$pid2" || echo 0)
            set -- $(WRK_SECONDS=$ROUND_SECONDS server_cpu_us "$pid" wrk_run "http://127.0.0.1:$port/throttle" bench/lua/throttle_post.lua)
            c1=$( [ -n "$pid2" ] && cpu_ns "$pid2" || echo 0)
            echo "$s $1 $2 $4" | awk -v c0="$c0" -v c1="$c1" -v n="$3" '{ print $0, (n > 0 ? (c1 - c0) / n / 1000 : 0) }'
        done >"$BENCH_TMP/round"
        for s in $tr_servers; do
            awk -v s="$s" '$1 == s { printf "%s %s %s %s ", $2, $3, $4, $5 }' "$BENCH_TMP/round"
        done >>"$tr_file"
        echo >>"$tr_file"
        tr_r=$((tr_r + 1))
    done
}

# median FILE COLUMN: the median of a column of numbers (interleaved rounds)
median() {
    awk -v c="$2" '{ print $c }' "$1" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# record_ratio NAME RATIO TARGET DETAIL: a ratio measured as such (say the
# median of per-round ratios), with its target (- for none); DETAIL says
# what it is.
record_ratio() {
    verdict=$(awk -v r="$2" -v t="$3" 'BEGIN { print t == "-" ? "" : (r + 0 >= t + 0) ? "met" : "MISSED" }')
    ratio=$(awk -v r="$2" 'BEGIN { printf "%.2f", r }')
    printf '%-52s ratio %5s  target >= %-5s %s  (%s)\n' "$1" "$ratio" "$3" "$verdict" "$4"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$ratio" ratio "$4" "" "$ratio" "$3" "$verdict" >>"$RESULTS"
}

# record_rounds NAME FILE COLUMN TARGET [WHAT]: record_ratio of the median of
# a column of per-round ratios (one line a round), every round's listed
record_rounds() {
    record_ratio "$1" "$(median "$2" "$3")" "$4" \
        "${5:+$5, }median of $(wc -l <"$2" | tr -d ' ') per-round ratios: $(awk -v c="$3" '{ printf "%s%.2f", (NR > 1 ? " " : ""), $c }' "$2")"
}

# record NAME VALUE UNIT [REFERENCE_NAME REFERENCE_VALUE TARGET_RATIO]
# Appends a row to $RESULTS and prints it; with a reference, the ratio
# value/reference and whether it meets the target.  record, record_ratio
# and record_rounds leave the ratio they printed in $ratio (for chart).
record() {
    name=$1 value=$2 unit=$3 refname=${4:-} refval=${5:-} target=${6:-}
    if [ -n "$refval" ]; then
        ratio=$(awk -v a="$value" -v b="$refval" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
        verdict=""
        [ -n "$target" ] && verdict=$(awk -v r="$ratio" -v t="$target" 'BEGIN { print (r + 0 >= t + 0) ? "met" : "MISSED" }')
        printf '%-52s %12s %-8s vs %-34s %12s  ratio %5s  target >= %-5s %s\n' "$name" "$value" "$unit" "$refname" "$refval" "$ratio" "${target:--}" "$verdict"
    else
        ratio="" verdict=""
        printf '%-52s %12s %s\n' "$name" "$value" "$unit"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$value" "$unit" "$refname" "$refval" "$ratio" "$target" "$verdict" >>"$RESULTS"
}

# chart CHART GROUP SERIES VALUE: one figure for bench/charts.sh, appended to
# $CHARTS as a tab-separated row (the file's format is described there).
# CHART is one of the charts it draws (throughput, latency, vs_redis,
# overhead); GROUP a bar group or a bar (a route); SERIES what the bar
# measures (tally, a reference, a percentile).  An empty VALUE is skipped.
chart() {
    [ -n "$4" ] || return 0
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$CHARTS"
}
