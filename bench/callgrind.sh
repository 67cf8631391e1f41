#!/bin/sh
# bench/callgrind.sh - user-space instructions per request of tallyd and of
# the bare libmicrohttpd server (bench/bare_mhd.c), counted by valgrind's
# callgrind over a fixed number of keep-alive requests.  Not part of
# `make bench`: a developer's tool for the request path (issue 20), for
# machines whose VM exposes no hardware counters (`perf stat -e
# instructions` unavailable) and where a shared CPU makes times noisy.
# Instruction counts do not move with the machine's load.
#
# Usage: sh bench/callgrind.sh [N]   (N requests per route, 20000 by default)
# Environment: BUILD (build/release), CG_SERVERS ("tallyd honest fixed"),
#   CG_KINDS ("throttle_post throttle_get hook_get"; also limiter_post and
#   policy_post, bench/openloop.c), BARE_POOL (bytes:
#   the bare server's MHD_OPTION_CONNECTION_MEMORY_LIMIT, MHD's default
#   if unset), CG_OUT (a directory to keep the callgrind files in).
# Prints one line per server and route: "SERVER KIND INSTRUCTIONS/REQUEST
# WITHOUT_MEMSET/REQUEST ALLOCATIONS/REQUEST".  The second count leaves out
# libc's memset, almost all of it libmicrohttpd zeroing its per-connection
# pool before each request: valgrind counts each byte of that `rep stosb` as
# an instruction, the CPU clears the pool in a small fraction of the time,
# so the second count is the one that tracks CPU time.  Allocations are
# calls of malloc, calloc and realloc (libc's strdup and the libraries' own
# included).
# Each count is every thread of the server, from just before the N requests
# (after N warm-up requests of the same kind, so keys exist) to just after.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${1:-20000}
: "${CG_SERVERS:=tallyd honest fixed}"
: "${CG_KINDS:=throttle_post throttle_get hook_get}"
OUT=${CG_OUT:-$BENCH_TMP/cg}
mkdir -p "$OUT"
cat >"$BENCH_TMP/hook_policies.json" <<JSON
{"policies": {"bench": {"algorithm": "sliding_window", "max_count": 1000000000, "period": 60,
                        "key": "{path}", "deny_status": 403}}}
JSON

# cg_total FILE: the "totals:" (or "summary:") instruction count of a dump
cg_total() { awk '/^(totals|summary):/ { print $2; exit }' "$1"; }
# cg_allocs FILE: calls of malloc, calloc and realloc in a dump (callgrind
# names a function "(id) name" the first time, "(id)" after)
cg_allocs() {
    awk '/^c?fn=/ { s = $0; sub(/^c?fn=/, "", s); id = s; sub(/\).*/, ")", id); nm = s; sub(/^\([0-9]+\) ?/, "", nm)
                    if (nm != "") name[id] = nm; else nm = name[id]
                    if ($0 ~ /^cfn=/) callee = nm }
         /^calls=/ { split($0, a, /[= ]/); if (callee ~ /^(malloc|calloc|realloc)$/) n += a[2]; callee = "" }
         END { print n + 0 }' "$1"
}

for server in $CG_SERVERS; do
    for kind in $CG_KINDS; do
        case "$server:$kind" in tallyd:*|*:throttle_post|*:throttle_get) ;; *) continue ;; esac   # the bare server has one GET and one POST
        port=$(freeport)
        cgf="$OUT/$server.$kind.out"
        rm -f "$cgf"*
        if [ "$server" = tallyd ]; then
            dir=$(mktemp -d "$BENCH_TMP/data-XXXXXX")
            valgrind --tool=callgrind --callgrind-out-file="$cgf" \
                "$TALLYD" --port "$port" --data-dir "$dir" --threads 1 --log-level warn \
                --config "$BENCH_TMP/hook_policies.json" 2>>"$BENCH_TMP/valgrind.log" &
        else
            valgrind --tool=callgrind --callgrind-out-file="$cgf" \
                "$BUILD/bench/bare_mhd" "$port" 1 "$server" ${BARE_POOL:-} 2>>"$BENCH_TMP/valgrind.log" &
        fi
        pid=$!
        i=0
        until curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; do
            i=$((i + 1)); [ $i -gt 600 ] && { echo "callgrind.sh: $server did not start" >&2; exit 1; }; sleep 0.1
        done
        "$BUILD/bench/openloop" "$port" "$N" 1 "$BENCH_CONNS" "$kind" >/dev/null   # warm-up
        callgrind_control -z "$pid" >/dev/null 2>&1
        r=$("$BUILD/bench/openloop" "$port" "$N" 1 "$BENCH_CONNS" "$kind")
        callgrind_control -d "$pid" >/dev/null 2>&1
        kill "$pid"; wait "$pid" 2>/dev/null || true
        [ "$server" = tallyd ] && rm -rf "$dir"
        errors=$(echo "$r" | awk '{ print $NF }')
        [ "$errors" = 0 ] || echo "callgrind.sh: $server $kind: $errors answers were not 2xx/429" >&2
        # the dump taken after the N requests is the one with the highest number
        dump=$(ls -v "$cgf".* | grep -E '\.[0-9]+$' | tail -1)
        total=$(cg_total "$dump")
        allocs=$(cg_allocs "$dump")
        memset=$(callgrind_annotate --auto=no --threshold=100 "$dump" 2>/dev/null |
                 awk '/:__memset_[a-z0-9_]* / { gsub(/,/, "", $1); m += $1 } END { print m + 0 }')
        echo "$server $kind $(awk -v t="$total" -v m="$memset" -v a="$allocs" -v n="$N" \
                                  'BEGIN { printf "%.0f %.0f %.1f", t / n, (t - m) / n, a / n }')"
    done
done
