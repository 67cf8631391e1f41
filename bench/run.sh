#!/bin/sh
# bench/run.sh - runs every bench/suite_*.sh in order and prints the summary.
# Each suite compares tally with its reference (Redis, a bare libmicrohttpd
# server, its own journal-off figure) in the same run.  `make bench` calls it.
# BENCH_ONLY=throttle runs only suites whose name contains "throttle".
# At the end bench/charts.sh draws the charts of $CHARTS: into docs/img/
# after a run of every suite (the charts docs/benchmarks.md shows), into
# $BUILD/bench/charts/ after a BENCH_ONLY run (CHARTS_DIR overrides both).
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
mkdir -p "$(dirname "$RESULTS")" "$(dirname "$CHARTS")"
: >"$RESULTS"
trap 'rm -rf "$BENCH_TMP"' EXIT
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit+changes"
# the run's identity heads the charts' figures (bench/charts.sh prints it on each chart)
{
    printf '# date\t%s\n' "$(date -u +%Y-%m-%d)"
    printf '# commit\t%s\n' "$commit"
    printf '# machine\t%s\n' "$machine"
    printf '# bench_seconds\t%s\n' "$BENCH_SECONDS"
    printf '# suites\t%s\n' "${BENCH_ONLY:-all}"
} >"$CHARTS"
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

if [ -z "${BENCH_ONLY:-}" ]; then charts_dir=${CHARTS_DIR:-docs/img}; else charts_dir=${CHARTS_DIR:-$BUILD/bench/charts}; fi
sh bench/charts.sh "$CHARTS" "$charts_dir"
