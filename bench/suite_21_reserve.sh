# suite_21_reserve.sh - a reserve+settle pair (POST /throttle with
# "reserve": true, then POST /throttle/{key}/settle) against one plain GCRA
# decision (POST /throttle), same parameters (redis-cell's README limit,
# 100 000 keys), in the server's CPU per operation.
# Target (issue 42): the pair <= 2.2x one decision's server CPU.
#
# One tallyd; interleaved rounds (as suite_10/suite_20): each round measures
# the plain decision and the pairs back to back, in alternating order, and
# the figure is the median of the per-round ratios.  The pairs need each
# connection's answers read in order (bench/lua/reserve_settle.lua), so both
# loads run with one connection: a fair comparison of the two, whose
# absolute CPU per request is higher than with the other suites' 50
# connections (no batching of wake-ups).
set -eu
. bench/lib.sh

start_tallyd
export RL_PREFIX=plain: RL_PARAMS='"max_burst":15,"count_per_period":30,"period":60'
one() {   # one SCRIPT: "RPS CPU_US_PER_REQUEST"
    set -- $(BENCH_CONNS=1 server_cpu_us "$TALLY_PID" wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" "$1")
    echo "$1 $4"
}
WRK_SECONDS=1
one bench/lua/ratelimit_post.lua >/dev/null   # warm-up: both key spaces made
one bench/lua/reserve_settle.lua >/dev/null
WRK_SECONDS=$ROUND_SECONDS
: >"$BENCH_TMP/rounds.reserve"
r=1
while [ "$r" -le "$BENCH_ROUNDS" ]; do
    for kind in $(round_order "$r" plain pair); do
        if [ "$kind" = plain ]; then one bench/lua/ratelimit_post.lua; else one bench/lua/reserve_settle.lua; fi \
            >"$BENCH_TMP/round.$kind"
    done
    # per round: plain CPU, pair CPU (two requests), pair / plain, plain / pair (the recorded ratio)
    paste -d' ' "$BENCH_TMP/round.plain" "$BENCH_TMP/round.pair" |
        awk '{ pair = 2 * $4; printf "%s %.2f %.4f %.4f\n", $2, pair, (pair > 0 ? pair / $2 : 0), ($2 > 0 ? $2 / pair : 0) }' \
        >>"$BENCH_TMP/rounds.reserve"
    r=$((r + 1))
done
unset WRK_SECONDS
stop_tallyd

record "tally POST /throttle gcra server CPU (us/decision, 1 conn)" "$(median "$BENCH_TMP/rounds.reserve" 1)" us
record "tally reserve+settle pair server CPU (us/pair, 1 conn)" "$(median "$BENCH_TMP/rounds.reserve" 2)" us
record "reserve+settle pair / one gcra decision, CPU (median)" "$(median "$BENCH_TMP/rounds.reserve" 3)" x
record_rounds "one gcra decision / reserve+settle pair, CPU" "$BENCH_TMP/rounds.reserve" 4 0.4545 \
    "target: the pair <= 2.2x a decision"
