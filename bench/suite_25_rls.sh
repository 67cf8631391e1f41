# suite_25_rls.sh - Envoy's rate limit service: ShouldRateLimit over gRPC
# (--grpc-port, HTTP/2) against the HTTP hook Envoy's ext_authz would ask
# (GET /hook/{policy}, HTTP/1.1), same tallyd, same run, one server core.
#
# gRPC: h2load (nghttp2-client) posting a prepared gRPC-framed
# RateLimitRequest (domain bench, one descriptor, or three), 10 streams a
# connection (-m 10) over $BENCH_CONNS / 10 connections; HTTP: wrk GET
# /hook/bench/<path> over $BENCH_CONNS connections.  Both decide one fixed
# key each request (h2load sends one body; the hook gets one path), fixed
# window, a limit never reached.  Interleaved rounds as suite_10: the three
# back to back in each round, in alternating order; the figures are the
# medians of the per-round ratios.  Target (issue 41): ShouldRateLimit
# with one descriptor >= 1.2x the hook's decisions a second; with three,
# the descriptors decided a second against the hook's decisions (context,
# same target); p99 at half of the one-descriptor peak (target <= 1 ms,
# DESIGN §5), paced by h2load.  tallyd's own counter (tally_rls_hits_total, total_hits)
# checks that the calls were decided, not refused.
set -eu
. bench/lib.sh

command -v h2load >/dev/null 2>&1 || { echo "suite_25: h2load missing (make deps-bench installs nghttp2-client)" >&2; exit 1; }

cat >"$BENCH_TMP/rls_bench.yaml" <<YAML
domain: bench
descriptors:
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 2000000000}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2000000000}
  - key: method
    rate_limit: {unit: minute, requests_per_unit: 2000000000}
YAML
cat >"$BENCH_TMP/rls_hook.json" <<JSON
{"policies": {"bench": {"algorithm": "fixed_window", "max_count": 2000000000, "period": 60,
                        "key": "{path}", "deny_status": 403}}}
JSON
# the gRPC bodies: the 5-byte prefix and a RateLimitRequest, encoded by hand
# (field 1 domain, field 2 descriptors, each with field 1 entries {1 key, 2 value})
python3 - "$BENCH_TMP" <<'PY'
import struct, sys
def ld(tag, b): return bytes([tag]) + bytes([len(b)]) + b
def entry(k, v): return ld(0x0a, ld(0x0a, k.encode()) + ld(0x12, v.encode()))
def req(pairs):
    m = ld(0x0a, b"bench")
    for k, v in pairs:
        m += ld(0x12, entry(k, v))
    return b"\x00" + struct.pack(">I", len(m)) + m
open(sys.argv[1] + "/rls1.bin", "wb").write(req([("path", "/api/v1/items")]))
open(sys.argv[1] + "/rls3.bin", "wb").write(req([("path", "/api/v1/items"), ("user", "u-42"), ("method", "GET")]))
PY

GRPC_PORT=$(freeport)
start_tallyd --grpc-port "$GRPC_PORT" --rls-config "$BENCH_TMP/rls_bench.yaml" --config "$BENCH_TMP/rls_hook.json"
RLS_URL="http://127.0.0.1:$GRPC_PORT/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HOOK_URL="http://127.0.0.1:$TALLY_PORT/hook/bench/api/v1/items"

# h2load_run BODY: "RPS REQUESTS" over ${H2_SECONDS:-$ROUND_SECONDS} seconds
h2load_run() {
    out=$(on_client h2load -t 1 -c $((BENCH_CONNS / 10 > 0 ? BENCH_CONNS / 10 : 1)) -m 10 -D "${H2_SECONDS:-$ROUND_SECONDS}" \
        -H 'content-type: application/grpc' -H 'te: trailers' -d "$1" "$RLS_URL" 2>&1)
    rps=$(printf '%s\n' "$out" | awk '/^finished in/ { gsub(/,/, ""); print $4 }')
    done_n=$(printf '%s\n' "$out" | awk '/^requests:/ { print $8 }')
    bad=$(printf '%s\n' "$out" | awk '/^status codes:/ { gsub(/,/, ""); print $5 + $7 + $9 }')
    [ "${bad:-0}" = 0 ] || echo "bench: h2load: non-2xx answers: $(printf '%s\n' "$out" | grep '^status codes')" >&2
    echo "${rps:-0} ${done_n:-0}"
}
total_hits() {
    curl -s "http://127.0.0.1:$TALLY_PORT/metrics" |
        awk '/^tally_rls_hits_total/ && /result="total_hits"/ { s += $NF } END { printf "%.0f", s }'
}

# warm-up
H2_SECONDS=1 h2load_run "$BENCH_TMP/rls1.bin" >/dev/null
WRK_SECONDS=1 wrk_run "$HOOK_URL" >/dev/null

rfile="$BENCH_TMP/rounds.rls"
: >"$rfile"
hits0=$(total_hits) calls=0
r=1
while [ "$r" -le "$BENCH_ROUNDS" ]; do
    for what in $(round_order "$r" one three hook); do
        case $what in
        one) set -- $(h2load_run "$BENCH_TMP/rls1.bin"); one=$1 calls=$((calls + $2)) ;;
        three) set -- $(h2load_run "$BENCH_TMP/rls3.bin"); three=$1 calls=$((calls + 3 * $2)) ;;
        hook) set -- $(WRK_SECONDS=$ROUND_SECONDS wrk_run "$HOOK_URL"); hook=$1 ;;
        esac
    done
    echo "$one $three $hook" | awk '{ printf "%s %s %s %.4f %.4f\n", $1, $2, $3, ($3 > 0 ? $1 / $3 : 0), ($3 > 0 ? 3 * $2 / $3 : 0) }' >>"$rfile"
    r=$((r + 1))
done
hits=$(( $(total_hits) - hits0 ))

# p99 at half of the median peak (one descriptor): h2load's --rps paces each
# connection; --log-file has every call's latency (microseconds, 3rd column).
# h2load paces within its streams, so this is nearer an open loop than wrk's
# closed one, not the same as bench/openloop.c's.
h2_conns=$((BENCH_CONNS / 10 > 0 ? BENCH_CONNS / 10 : 1))
half=$(awk -v r="$(median "$rfile" 1)" -v c="$h2_conns" 'BEGIN { printf "%d", r / 2 / c }')
on_client h2load -t 1 -c "$h2_conns" -m 10 --rps "$half" -D 3 --log-file "$BENCH_TMP/h2load.log" \
    -H 'content-type: application/grpc' -H 'te: trailers' -d "$BENCH_TMP/rls1.bin" "$RLS_URL" >/dev/null 2>&1
p99_half=$(awk -F'\t' '{ print $3 / 1000 }' "$BENCH_TMP/h2load.log" | sort -g |
    awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; print (NR ? v[i] : 0) }')
rate_half=$(awk 'END { printf "%d", NR / 3 }' "$BENCH_TMP/h2load.log")
stop_tallyd
[ "$hits" -ge $((calls * 9 / 10)) ] || echo "bench: suite_25: only $hits descriptors decided of $calls sent (answers were errors?)" >&2

record "ShouldRateLimit, 1 descriptor, h2load -m 10 (calls/s, median)" "$(median "$rfile" 1)" calls/s
record "ShouldRateLimit, 3 descriptors, h2load -m 10 (calls/s, median)" "$(median "$rfile" 2)" calls/s
record "GET /hook/{policy}, wrk HTTP/1.1, same rounds (req/s, median)" "$(median "$rfile" 3)" req/s
record_rounds "ShouldRateLimit 1 descriptor vs GET /hook/{policy}" "$rfile" 4 1.2 "decisions a second"
record_rounds "ShouldRateLimit 3 descriptors vs GET /hook/{policy}" "$rfile" 5 1.2 "descriptors decided a second"
record "ShouldRateLimit, 1 descriptor, at half of peak ($rate_half/s): p99" "$p99_half" ms
