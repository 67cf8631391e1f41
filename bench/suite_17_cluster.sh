# suite_17_cluster.sh - the cost of a cluster (issue 17), in the same run:
#   slot check      GET /throttle/{key} on a tallyd started with --cluster
#                   (owning every slot) against the same without --cluster;
#   proxy hop       the same through HAProxy configured by
#                   `tallyd --cluster FILE --haproxy-config` (routing key,
#                   hash tag, crc32, slot map lookup -> backend) against
#                   direct, and the hop's cost per request (the difference
#                   of the two inverse throughputs);
#   slot in HAProxy the Lua converter the configuration uses (lua.tally_slot:
#                   CRC16 as Redis Cluster) against HAProxy's native crc32
#                   (the function before it) in the same configuration
#                   otherwise: HAProxy's CPU time per request, in
#                   BENCH_ROUNDS interleaved rounds, and the difference.
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
"$TALLYD" --haproxy-lua >"$BENCH_TMP/tally-slot.lua"
"$TALLYD" --cluster "$map" --haproxy-slots >"$slots"
"$TALLYD" --cluster "$map" --haproxy-config --haproxy-map "$slots" --haproxy-socket "$BENCH_TMP/haproxy.sock" |
    sed "s/^    bind :8080\$/    bind 127.0.0.1:$HA_PORT/" >"$cfg"
$ON_SERVER haproxy -q -f "$cfg" &
HA_PID=$!
sleep 2   # health checks mark the backend up
set -- $(wrk_run "http://127.0.0.1:$HA_PORT/throttle/x" bench/lua/throttle_get.lua)
proxy_rps=$1 proxy_p99=$2
kill "$HA_PID" 2>/dev/null; wait "$HA_PID" 2>/dev/null || true

# the slot in HAProxy: the Lua converter against native crc32 (the same
# configuration with the slot line replaced), HAProxy's CPU per request
sed "s/var(txn.rkey),lua.tally_slot/var(txn.rkey),'regsub(\"^[^{]*\\\\{([^}]+)\\\\}.*\$\",\"\\\\1\")',crc32,mod(16384)/" \
    "$cfg" >"$BENCH_TMP/haproxy-crc32.cfg"
grep -q 'crc32,mod(16384)' "$BENCH_TMP/haproxy-crc32.cfg" || { echo "bench: the crc32 variant was not made" >&2; exit 1; }
haproxy -q -c -f "$BENCH_TMP/haproxy-crc32.cfg"
lua_us=0 crc_us=0 lua_rps=0 crc_rps=0
r=1
while [ "$r" -le "$BENCH_ROUNDS" ]; do
    for v in lua crc32; do
        if [ "$v" = lua ]; then c=$cfg; else c=$BENCH_TMP/haproxy-crc32.cfg; fi
        $ON_SERVER haproxy -q -f "$c" &
        HA_PID=$!
        sleep 2
        set -- $(WRK_SECONDS=$ROUND_SECONDS server_cpu_us "$HA_PID" wrk_run "http://127.0.0.1:$HA_PORT/throttle/x" \
            bench/lua/throttle_get.lua)
        kill "$HA_PID" 2>/dev/null; wait "$HA_PID" 2>/dev/null || true
        if [ "$v" = lua ]; then
            lua_us=$(awk -v a="$lua_us" -v b="$4" 'BEGIN { print a + b }'); lua_rps=$(awk -v a="$lua_rps" -v b="$1" 'BEGIN { print a + b }')
        else
            crc_us=$(awk -v a="$crc_us" -v b="$4" 'BEGIN { print a + b }'); crc_rps=$(awk -v a="$crc_rps" -v b="$1" 'BEGIN { print a + b }')
        fi
    done
    r=$((r + 1))
done
stop_tallyd
lua_us=$(awk -v a="$lua_us" -v n="$BENCH_ROUNDS" 'BEGIN { printf "%.2f", a / n }')
crc_us=$(awk -v a="$crc_us" -v n="$BENCH_ROUNDS" 'BEGIN { printf "%.2f", a / n }')
record "HAProxy CPU per request, slot by Lua CRC16 (lua.tally_slot)" "$lua_us" us "same with native crc32" "$crc_us"
record "through HAProxy, slot by Lua CRC16 (req/s)" "$(awk -v a="$lua_rps" -v n="$BENCH_ROUNDS" 'BEGIN { printf "%.0f", a / n }')" \
    req/s "same with native crc32" "$(awk -v a="$crc_rps" -v n="$BENCH_ROUNDS" 'BEGIN { printf "%.0f", a / n }')"
record "HAProxy CPU per request added by the Lua slot (Lua - crc32)" \
    "$(awk -v a="$lua_us" -v b="$crc_us" 'BEGIN { printf "%.2f", a - b }')" us

record "tally GET /throttle/{key} direct, cluster p99" "$cluster_p99" ms
record "tally GET /throttle/{key} through HAProxy p99" "$proxy_p99" ms
record "tally GET /throttle/{key} with --cluster (req/s)" "$cluster_rps" req/s "same without --cluster" "$plain_rps"
record "tally GET /throttle/{key} through HAProxy (req/s)" "$proxy_rps" req/s "same direct to the node" "$cluster_rps"
record "HAProxy hop, time per request added (1/proxied - 1/direct)" \
    "$(awk -v p="$proxy_rps" -v d="$cluster_rps" 'BEGIN { printf "%.1f", 1e6 / p - 1e6 / d }')" us
