#!/bin/sh
# bench/run.sh - runs every bench/suite_*.sh in order and prints the summary.
# Each suite compares tally with its reference (Redis, a bare libmicrohttpd
# server, its own journal-off figure) in the same run.  `make bench` calls it.
# BENCH_ONLY=throttle runs only suites whose name contains "throttle".
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"
trap 'rm -rf "$BENCH_TMP"' EXIT
echo "tally benchmarks: $(nproc) cores, server on CPU $SERVER_CPU, load generator on CPU $CLIENT_CPU, ${BENCH_SECONDS}s per run"
echo "machine: $(uname -srm); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for s in bench/suite_*.sh; do
    case "$s" in *"${BENCH_ONLY:-}"*) ;; *) continue ;; esac
    echo
    echo "== $(basename "$s" .sh)"
    sh "$s"
done
echo
echo "Summary (also in $RESULTS):"
awk -F'\t' '$8 != "" { printf "  %-52s ratio %-6s target >= %-5s %s\n", $1, $6, $7, $8 }' "$RESULTS"
