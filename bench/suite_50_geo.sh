# suite_50_geo.sh - GET /geo/nearby on a 1M-member set against Redis GEOSEARCH
# on the same points, same run, no pipelining (one request in flight per
# connection on both sides).  Target (issue 6): >= 1.0x Redis.
#
# Points: bench/geo_points (1M seeded points around Beijing, ~26 per km^2);
# Redis is loaded with redis-cli --pipe (GEOADD of 1000 points), tallyd with
# POST /geo/{key} of 10 000 points (the batch limit).  The query, a 1.1 km
# radius around (116.5, 40.0), returns ~100 members; both answers are checked
# to hold the same members before timing.
set -eu
. bench/lib.sh

N=${GEO_POINTS:-1000000}
KEY=bench:geo
LON=116.5 LAT=40.0 RADIUS=1.1
D=$BENCH_TMP/geo
mkdir -p "$D"
"$BUILD/bench/geo_points" "$N" "$D"
now() { date +%s.%N; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.0f", n / (b - a) }'; }

# ---------------------------------------------------------------- Redis --
start_redis
t0=$(now)
out=$(rcli --pipe <"$D/redis.resp")
t1=$(now)
case "$out" in *"errors: 0"*) ;; *) echo "bench: redis-cli --pipe: $out" >&2; exit 1 ;; esac
[ "$(rcli ZCARD $KEY)" = "$N" ] || { echo "bench: Redis holds $(rcli ZCARD $KEY) members, not $N" >&2; exit 1; }
redis_load=$(rate "$N" "$t0" "$t1")
rcli GEOSEARCH $KEY FROMLONLAT $LON $LAT BYRADIUS $RADIUS km | sort >"$D/redis.members"
nres=$(wc -l <"$D/redis.members")
reqs=$((BENCH_SECONDS * 25000))
set -- $(redis_bench -n "$reqs" GEOSEARCH $KEY FROMLONLAT $LON $LAT BYRADIUS $RADIUS km)
redis_rps=$1 redis_p99=$2
set -- $(redis_bench -n "$reqs" GEOSEARCH $KEY FROMLONLAT $LON $LAT BYRADIUS $RADIUS km WITHDIST ASC)
redis_d_rps=$1 redis_d_p99=$2
set -- $(redis_bench -n "$reqs" GEOSEARCH $KEY FROMLONLAT $LON $LAT BYRADIUS $RADIUS km WITHDIST WITHHASH WITHCOORD ASC)
redis_a_rps=$1
stop_redis

# --------------------------------------------------------------- tallyd --
start_tallyd --journal off --snapshot-interval 0
t0=$(now)
for f in "$D"/tally-*.json; do
    curl -sf -o /dev/null --data-binary @"$f" -H 'Content-Type: application/json' \
        "http://127.0.0.1:$TALLY_PORT/geo/$KEY" || { echo "bench: loading $f failed" >&2; exit 1; }
done
t1=$(now)
tally_load=$(rate "$N" "$t0" "$t1")
url="http://127.0.0.1:$TALLY_PORT/geo/nearby?key=$KEY&lon=$LON&lat=$LAT&radius=$RADIUS&unit=km"
curl -sf "$url" | tr '{' '\n' | sed -n 's/.*"member":"\([^"]*\)".*/\1/p' | sort >"$D/tally.members"
if ! cmp -s "$D/redis.members" "$D/tally.members"; then
    echo "bench: tally and Redis answer different members" >&2
    exit 1
fi
set -- $(wrk_run "$url")
tally_rps=$1 tally_p99=$2
set -- $(wrk_run "$url&withdist=1&sort=asc")
tally_d_rps=$1 tally_d_p99=$2
set -- $(wrk_run "$url&withdist=1&withhash=1&withcoord=1&sort=asc")
tally_a_rps=$1
mem=$(curl -sf "http://127.0.0.1:$TALLY_PORT/keys/$KEY" | sed -n 's/.*"memory_bytes":\([0-9]*\).*/\1/p')
stop_tallyd

record "geo load: redis-cli --pipe GEOADD x1000 (points/s)" "$redis_load" points/s
record "geo load: POST /geo/{key} x10000 (points/s)" "$tally_load" points/s
record "geo set memory, $N members (bytes/member)" "$((mem / N))" B/member
record "geo nearby results per query" "$nres" members
record "redis GEOSEARCH 1M, ~100 results p99" "$redis_p99" ms
record "tally GET /geo/nearby 1M, ~100 results p99" "$tally_p99" ms
record "tally GET /geo/nearby 1M, ~100 results (req/s)" "$tally_rps" req/s "redis GEOSEARCH BYRADIUS" "$redis_rps" 1.0
chart vs_redis "GET /geo/nearby" "Redis GEOSEARCH" "$ratio"
record "tally /geo/nearby withdist sort=asc (req/s)" "$tally_d_rps" req/s "redis GEOSEARCH WITHDIST ASC" "$redis_d_rps" 1.0
record "tally /geo/nearby withdist,hash,coord asc (req/s)" "$tally_a_rps" req/s "redis GEOSEARCH WITHDIST WITHHASH WITHCOORD" "$redis_a_rps" 1.0
