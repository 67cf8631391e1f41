# suite_17_cluster.sh - the cost of a cluster (issue 17), in the same run:
#   slot check      GET /throttle/{key} on a tallyd started with --cluster
#                   (owning every slot) against the same without --cluster;
#   proxy hop       the same through HAProxy configured by
#                   `tallyd --cluster FILE --haproxy-config` (routing key,
#                   hash tag, crc32, slot map lookup -> backend) against
#                   direct, and the hop's cost per request (the difference
#                   of the two inverse throughputs).
# HAProxy runs on the server's CPU: on this 2-core machine the hop's CPU is
# taken from tallyd, which is what one proxy in front of one node costs.
# Scaling with N nodes is not measurable here; deploy/cluster/README.md
# gives the estimate and its reasoning.
set -eu
. bench/lib.sh

command -v haproxy >/dev/null || { echo "bench: haproxy is not installed (make deps-bench)"; exit 0; }
map=$BENCH_TMP/cluster.map
cfg=$BENCH_TMP/haproxy.cfg
slots=$BENCH_TMP/tally-slots.map

start_tallyd --in-memory
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/throttle/x" bench/lua/throttle_get.lua)
plain_rps=$1
stop_tallyd

TALLY_PORT=$(freeport)
printf 'epoch 1\nnode n1 127.0.0.1:%s\nslots n1 0-16383\n' "$TALLY_PORT" >"$map"
TALLY_DIR=$(mktemp -d "$BENCH_TMP/data-XXXXXX")
$ON_SERVER "$TALLYD" --port "$TALLY_PORT" --in-memory --threads "${TALLY_THREADS:-1}" --log-level warn \
    --cluster "$map" --cluster-node n1 2>>"$BENCH_TMP/tallyd.log" &
TALLY_PID=$!
wait_http "$TALLY_PORT" /readyz
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/throttle/x" bench/lua/throttle_get.lua)
cluster_rps=$1 cluster_p99=$2

HA_PORT=$(freeport)
"$TALLYD" --cluster "$map" --haproxy-slots >"$slots"
"$TALLYD" --cluster "$map" --haproxy-config --haproxy-map "$slots" --haproxy-socket "$BENCH_TMP/haproxy.sock" |
    sed "s/^    bind :8080\$/    bind 127.0.0.1:$HA_PORT/" >"$cfg"
$ON_SERVER haproxy -q -f "$cfg" &
HA_PID=$!
sleep 2   # health checks mark the backend up
set -- $(wrk_run "http://127.0.0.1:$HA_PORT/throttle/x" bench/lua/throttle_get.lua)
proxy_rps=$1 proxy_p99=$2
kill "$HA_PID" 2>/dev/null; wait "$HA_PID" 2>/dev/null || true
stop_tallyd

record "tally GET /throttle/{key} direct, cluster p99" "$cluster_p99" ms
record "tally GET /throttle/{key} through HAProxy p99" "$proxy_p99" ms
record "tally GET /throttle/{key} with --cluster (req/s)" "$cluster_rps" req/s "same without --cluster" "$plain_rps"
record "tally GET /throttle/{key} through HAProxy (req/s)" "$proxy_rps" req/s "same direct to the node" "$cluster_rps"
record "HAProxy hop, time per request added (1/proxied - 1/direct)" \
    "$(awk -v p="$proxy_rps" -v d="$cluster_rps" 'BEGIN { printf "%.1f", 1e6 / p - 1e6 / d }')" us
