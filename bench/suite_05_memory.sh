#!/bin/sh
# suite_05_memory.sh - memory per key, tally against Redis 7, same run.
#
# For each kind of key, a fresh server (tallyd with --resp-port; a
# redis-server without persistence) is loaded with MEM_KEYS keys of 10-byte
# names, and the suite reports per key:
#   accounted  tally's /info memory_bytes growth; Redis's used_memory growth
#   rss        the process's resident set growth (VmRSS), for both
# and records the RSS ratio Redis/tally (>= 2.0: tally at most half of Redis).
# With the counters loaded it also times a snapshot of them and a restart
# loading it (tally: POST /admin/snapshot's duration_ms, restart to /readyz;
# Redis: SAVE, restart until PING answers PONG).
#
# The equivalent keys (issue 44):
#   gcra            tally CL.THROTTLE key 15 30 3600 1 (GCRA, redis-cell's form; a
#                   state that outlives the load: none expires while it runs);
#                   Redis SET key <tat> PX 3600000 (what bench/lua/gcra.lua stores;
#                   an hour, so that none expires while the load runs either:
#                   with 60 s, a 10M load slower than a minute on a loaded
#                   machine left Redis with fewer keys than counted)
#   sliding_window  tally POST /throttle {"algorithm":"sliding_window"} in
#                   batches; Redis HSET key start <ms> curr 1 prev 0 + PEXPIRE
#   counter         INCR key, both
#   counter_ttl     INCR key + EXPIRE key 3600, both
#   hll_small       PFADD key a b c, both (sparse HLLs)
#
# Loading goes through `redis-cli --pipe` (RESP, both servers) and, for the
# sliding window, HTTP batches of 10 000 from python3.  MEM_KEYS=10000000
# runs the 10M rows (about 10 minutes and 3 GB of RAM on the reference
# machine; make bench runs the 1M rows); MEM_ONLY=counter runs only the
# kinds whose name contains it.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
: "${MEM_KEYS:=1000000}"
: "${MEM_ONLY:=}"
TALLY_PID= REDIS_PID=
trap '[ -z "$TALLY_PID" ] || stop_tallyd; [ -z "$REDIS_PID" ] || stop_redis; rm -rf "$BENCH_TMP"' EXIT
mkdir -p "$(dirname "$RESULTS")"

rss_kb() { awk '/^VmRSS:/ { print $2 }' /proc/"$1"/status; }
tally_mem() { curl -sf "http://127.0.0.1:$TALLY_PORT/info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["keyspace"]["memory_bytes"])'; }
redis_mem() { redis-cli -p "$REDIS_PORT" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }'; }

# gen KIND SERVER: the RESP commands loading MEM_KEYS keys of KIND, on stdout
gen() {
    python3 - "$1" "$2" "$MEM_KEYS" <<'EOF'
import sys
kind, server, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = sys.stdout.buffer
def cmd(*a):
    b = [b"*%d\r\n" % len(a)]
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        b.append(b"$%d\r\n%s\r\n" % (len(x), x))
    return b"".join(b)
chunk = []
for i in range(n):
    k = b"k:%08d" % i          # 10 bytes
    if kind == "gcra":
        chunk.append(cmd(b"CL.THROTTLE", k, 15, 30, 3600, 1) if server == "tally"
                     else cmd(b"SET", k, 1700000000000000 + i, b"PX", 3600000))
    elif kind == "sliding_window":
        chunk.append(cmd(b"HSET", k, b"start", 1700000000000 + i, b"curr", 1, b"prev", 0))
        chunk.append(cmd(b"PEXPIRE", k, 120000))
    elif kind == "counter":
        chunk.append(cmd(b"INCR", k))
    elif kind == "counter_ttl":
        chunk.append(cmd(b"INCR", k))
        chunk.append(cmd(b"EXPIRE", k, 3600))
    elif kind == "hll_small":
        chunk.append(cmd(b"PFADD", k, b"a", b"b", b"c"))
    if len(chunk) >= 4096:
        out.write(b"".join(chunk)); chunk = []
out.write(b"".join(chunk))
EOF
}

# http_sliding PORT: MEM_KEYS sliding-window limiters over HTTP batches
http_sliding() {
    on_client python3 - "$1" "$MEM_KEYS" <<'EOF'
import http.client, json, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port)
for lo in range(0, n, 10000):
    reqs = [{"key": "k:%08d" % i, "algorithm": "sliding_window", "max_count": 100, "period": 60}
            for i in range(lo, min(n, lo + 10000))]
    c.request("POST", "/throttle", json.dumps({"requests": reqs}), {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    if r.status != 200:
        sys.exit("POST /throttle batch: HTTP %d" % r.status)
EOF
}

per_key() { awk -v a="$1" -v b="$2" -v n="$MEM_KEYS" 'BEGIN { printf "%.1f", (b - a) / n }'; }

for kind in gcra sliding_window counter counter_ttl hll_small; do
    case "$kind" in *"$MEM_ONLY"*) ;; *) continue ;; esac
    t0=$(date +%s)
    TALLY_RESP=$(freeport)
    start_tallyd --resp-port "$TALLY_RESP" --snapshot-interval 0
    m0=$(tally_mem); r0=$(rss_kb "$TALLY_PID")
    if [ "$kind" = sliding_window ]; then
        http_sliding "$TALLY_PORT"
    else
        gen "$kind" tally | on_client redis-cli -p "$TALLY_RESP" --pipe >/dev/null
    fi
    m1=$(tally_mem); r1=$(rss_kb "$TALLY_PID")
    if [ "$kind" = counter ]; then
        snap=$(curl -sf -XPOST "http://127.0.0.1:$TALLY_PORT/admin/snapshot")
        t_save=$(echo "$snap" | sed -n 's/.*"duration_ms":\([0-9.]*\).*/\1/p')
        kill "$TALLY_PID"; wait "$TALLY_PID" 2>/dev/null || true
        ts0=$(date +%s%N)
        $ON_SERVER "$TALLYD" --port "$TALLY_PORT" --data-dir "$TALLY_DIR" --threads 1 --log-level warn \
            --snapshot-interval 0 2>>"$BENCH_TMP/tallyd.log" &
        TALLY_PID=$!
        wait_http "$TALLY_PORT" /readyz
        t_load=$(( ($(date +%s%N) - ts0) / 1000000 ))
        [ "$(curl -sf "http://127.0.0.1:$TALLY_PORT/info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["keyspace"]["keys"])')" = "$MEM_KEYS" ] ||
            { echo "suite_05: the snapshot did not load every key" >&2; exit 1; }
    fi
    stop_tallyd
    TALLY_PID=
    rm -f "$BENCH_TMP/dump.rdb"
    start_redis
    u0=$(redis_mem); s0=$(rss_kb "$REDIS_PID")
    gen "$kind" redis | on_client redis-cli -p "$REDIS_PORT" --pipe >/dev/null
    u1=$(redis_mem); s1=$(rss_kb "$REDIS_PID")
    if [ "$kind" = counter ]; then
        ts0=$(date +%s%N)
        rcli SAVE >/dev/null
        r_save=$(( ($(date +%s%N) - ts0) / 1000000 ))
        stop_redis
        ts0=$(date +%s%N)
        $ON_SERVER redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$BENCH_TMP" --logfile "$BENCH_TMP/redis.log" >/dev/null 2>&1 &
        REDIS_PID=$!
        until [ "$(rcli ping 2>/dev/null)" = PONG ]; do sleep 0.01; done
        r_load=$(( ($(date +%s%N) - ts0) / 1000000 ))
        [ "$(rcli dbsize)" = "$MEM_KEYS" ] || { echo "suite_05: Redis did not load every key" >&2; exit 1; }
        rm -f "$BENCH_TMP/dump.rdb"
        record "snapshot save time, ${MEM_KEYS} counters (ms)" "$t_save" ms "Redis SAVE" "$r_save"
        record "snapshot load time, ${MEM_KEYS} counters, restart to ready (ms)" "$t_load" ms "Redis restart to PONG" "$r_load"
    fi
    stop_redis
    REDIS_PID=
    ta=$(per_key "$m0" "$m1"); tr=$(per_key "$((r0 * 1024))" "$((r1 * 1024))")
    ra=$(per_key "$u0" "$u1"); rr=$(per_key "$((s0 * 1024))" "$((s1 * 1024))")
    ratio=$(awk -v t="$tr" -v r="$rr" 'BEGIN { printf "%.3f", r / t }')
    case "$kind" in gcra | counter) target=2.0 ;; *) target=- ;; esac
    record_ratio "memory per key $kind, ${MEM_KEYS} keys (Redis RSS / tally RSS)" "$ratio" "$target" \
        "tally $ta B accounted, $tr B RSS; Redis $ra B used, $rr B RSS; $(($(date +%s) - t0)) s"
done
