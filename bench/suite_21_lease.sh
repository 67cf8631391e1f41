# suite_21_lease.sh - concurrency leases (issue 42): an acquire + release pair
# (POST /lease/{key}, DELETE /lease/{key}/{id}) against one plain GCRA
# decision (POST /throttle), on the same tallyd in interleaved rounds, by the
# server's CPU per operation (lib.sh's server_cpu_us: all its threads'
# CPU over the requests answered).
# Target (issue 42): a pair costs at most 2.2x one decision, i.e. one
# decision's CPU over a pair's >= 1/2.2 = 0.45.
set -eu
. bench/lib.sh

start_tallyd
gcra_run() {
    RL_PREFIX=gcra: RL_PARAMS='"max_burst":15,"count_per_period":30,"period":60'
    export RL_PREFIX RL_PARAMS
    server_cpu_us "$TALLY_PID" wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/ratelimit_post.lua
}
lease_run() {
    LEASE_KEY=bench-lease
    export LEASE_KEY
    server_cpu_us "$TALLY_PID" wrk_run "http://127.0.0.1:$TALLY_PORT/" bench/lua/lease_pair.lua
}
WRK_SECONDS=1
gcra_run >/dev/null   # warm-up: the key space made
lease_run >/dev/null
WRK_SECONDS=$ROUND_SECONDS
: >"$BENCH_TMP/rounds.lease"
r=1
while [ "$r" -le "$BENCH_ROUNDS" ]; do
    for which in $(round_order "$r" gcra lease); do
        "${which}_run" >"$BENCH_TMP/round.$which"
    done
    # per round: GCRA rps, p99, us/decision; lease rps, p99, us/request, us/pair; decision over pair
    g=$(awk '{ print $1, $2, $4 }' "$BENCH_TMP/round.gcra")
    l=$(awk '{ print $1, $2, $4, 2 * $4 }' "$BENCH_TMP/round.lease")
    echo "$g $l" | awk '{ printf "%s %.4f\n", $0, ($7 > 0 ? $3 / $7 : 0) }' >>"$BENCH_TMP/rounds.lease"
    r=$((r + 1))
done
unset WRK_SECONDS
stop_tallyd

f=$BENCH_TMP/rounds.lease
record "tally POST /throttle gcra server CPU (us/decision, median)" "$(median "$f" 3)" us
record "tally lease acquire+release server CPU (us/pair, median)" "$(median "$f" 7)" us
record "tally lease acquire/release (req/s, median of rounds)" "$(median "$f" 4)" req/s
record "tally lease acquire/release p99" "$(median "$f" 5)" ms
record_rounds "tally lease pair vs one GCRA decision, CPU" "$f" 8 0.45 "a decision's CPU over a pair's (<= 2.2x: >= 0.45)"
