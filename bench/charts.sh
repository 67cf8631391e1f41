#!/bin/sh
# bench/charts.sh - draws the benchmark charts (SVG, gnuplot) from the
# figures `make bench` wrote; docs/benchmarks.md shows them.
#
# Usage: sh bench/charts.sh CHARTS.tsv OUTDIR
#
# CHARTS.tsv (bench/lib.sh's chart() writes it, bench/run.sh its header):
#   # date<TAB>2026-12-01            the run's identity, printed on every chart
#   # commit<TAB>33b97d7
#   # machine<TAB>2 cores, AMD EPYC ..., Linux 6.1
#   # bench_seconds<TAB>4
#   # suites<TAB>all
#   CHART<TAB>GROUP<TAB>SERIES<TAB>VALUE   one figure a row
#
# The charts, each drawn only when the file has rows for it (a BENCH_ONLY
# run has some):
#   throughput.svg  requests a second of each headline route, tally against
#                   its references (chart "throughput": GROUP the route,
#                   SERIES the server), clustered bars
#   latency.svg     latency percentiles at half of peak, open loop, in ms on
#                   a log scale with the 1 ms target (chart "latency": GROUP
#                   the server and route, SERIES p50, p99, p99.9)
#   vs_redis.svg    tally's throughput over Redis's, route by route (chart
#                   "vs_redis": GROUP the route, SERIES the Redis command)
#   overhead.svg    throughput with durability and replication over without
#                   (chart "overhead": GROUP the setting, SERIES its baseline)
# Anything gnuplot says on stderr fails the script (tools/check-charts.sh
# renders a fixed file in `make test` so the script cannot rot).
set -eu
[ $# -eq 2 ] || { echo "usage: sh bench/charts.sh CHARTS.tsv OUTDIR" >&2; exit 2; }
in=$1
out=$2
[ -r "$in" ] || { echo "charts: cannot read $in" >&2; exit 1; }
command -v gnuplot >/dev/null 2>&1 || { echo "charts: gnuplot is not installed (make deps-bench)" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d /tmp/tally-charts-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# meta KEY: a header value, with the characters gnuplot strings cannot hold dropped
meta() { awk -F'\t' -v k="# $1" '$1 == k { v = $2 } END { gsub(/[\047"\\]/, "", v); print v }' "$in"; }
footer="tally $(meta commit), $(meta date); $(meta machine); BENCH_SECONDS=$(meta bench_seconds)"

# matrix CHART FILE: the chart's rows as a table, GROUP down and SERIES
# across, in the order they first appear ("NaN" where a figure is absent),
# tab-separated with a header line; prints the number of series
matrix() {
    awk -F'\t' -v c="$1" '
        /^#/ || $1 != c { next }
        !($2 in gi) { gi[$2] = ++ng; g[ng] = $2 }
        !($3 in si) { si[$3] = ++ns; s[ns] = $3 }
        { v[gi[$2], si[$3]] = $4 }
        END {
            if (!ng) exit
            printf "route"; for (j = 1; j <= ns; j++) printf "\t%s", s[j]; printf "\n"
            for (i = 1; i <= ng; i++) {
                printf "%s", g[i]
                for (j = 1; j <= ns; j++) printf "\t%s", ((i, j) in v ? v[i, j] : "NaN")
                printf "\n"
            }
            print ns > "/dev/stderr"
        }' "$in" >"$2" 2>"$2.n"
    cat "$2.n"
}

# bars CHART FILE: one bar a row, "GROUP vs SERIES" and the value, under a
# header line; prints the number of bars
bars() {
    awk -F'\t' -v c="$1" 'BEGIN { print "bar\tvalue" } !/^#/ && $1 == c { printf "%s vs %s\t%s\n", $2, $3, $4; n++ }
                          END { print n + 0 > "/dev/stderr" }' "$in" 2>"$2.n" >"$2"
    cat "$2.n"
}

# plot NAME: runs the gnuplot program on stdin, writing OUTDIR/NAME.svg;
# any word from gnuplot fails the script
plot() {
    { cat <<GP
set terminal svg size 880,${height:-440} dynamic font "sans,12" background rgb "white"
set output "$out/$1.svg"
set datafile separator "\t"
set datafile missing "NaN"
set datafile columnheaders
set label 99 "$footer" at screen 0.01, screen 0.025 left font "sans,9" textcolor rgb "#666666" noenhanced
set border 3
set tics nomirror
set grid ytics linecolor rgb "#dddddd"
set key noenhanced above horizontal
GP
      cat; } >"$tmp/$1.gp"
    if ! gnuplot "$tmp/$1.gp" >"$tmp/$1.log" 2>&1 || [ -s "$tmp/$1.log" ]; then
        echo "charts: gnuplot failed on $1:" >&2
        cat "$tmp/$1.log" >&2
        exit 1
    fi
    echo "charts: $out/$1.svg"
}

# clustered FILE K VALUE FORMAT: the plot command of clustered bars from a
# matrix() table of K series: a cluster a row (its label under it), a bar a
# series, the value (a gnuplot expression of column(i)) printed on each bar
clustered() {
    cat <<GP
set xtics scale 0 noenhanced
set style fill solid 0.85 border -1
set boxwidth 0.8 / $2 absolute
bx(i) = \$0 + (i - 2 - ($2 - 1) / 2.0) * 0.8 / $2
i = 2
plot "$1" using 0:($3):xtic(1) with dots linecolor rgb "#ffffffff" notitle, \
     for [i=2:$2 + 1] "$1" using (bx(i)):($3) with boxes linecolor i title columnheader(i), \
     for [i=2:$2 + 1] "$1" using (bx(i)):($3):(sprintf($4, $3)) with labels offset 0, 0.6 font "sans,10" notitle
GP
}

# hbars NAME TITLE XLABEL N [log]: horizontal bars of ratios from
# $tmp/NAME.tsv (N rows), with the line at 1 (the reference); "log" draws
# the ratios on a logarithmic axis (for ratios from about 1 to 100 and
# more), each bar drawn from 1 (the reference) to its ratio
hbars() {
    if [ "${5:-}" = log ]; then
        base=1
        axis="set logscale x 2
set xrange [(STATS_min < 0.5 ? STATS_min / 2 : 0.25):STATS_max * 2]
set xtics (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)"
    else
        base=0
        axis="set xrange [0:(STATS_max > 1 ? STATS_max : 1) * 1.18]"
    fi
    height=$((150 + 34 * $4)) plot "$1" <<GP
stats "$tmp/$1.tsv" using 2 nooutput
set title "$2" noenhanced
set xlabel "$3" noenhanced
set grid noytics xtics
set border 1
set ytics scale 0 noenhanced
set yrange [$4 - 0.4:-0.6]
$axis
set lmargin $(awk -F'\t' '{ if (length($1) > m) m = length($1) } END { print m + 2 }' "$tmp/$1.tsv")
set bmargin 5
set arrow 1 from 1, graph 0 to 1, graph 1 nohead dashtype 2 linecolor rgb "#444444"
set style fill solid 0.85 border -1
unset key
plot "$tmp/$1.tsv" using ($base):0:($base):2:(\$0 - 0.32):(\$0 + 0.32):ytic(1) with boxxyerror linecolor rgb "#2f6db5", \
     "" using 2:0:(sprintf(" %.2f", \$2)) with labels left font "sans,11"
GP
}

drawn=0

k=$(matrix throughput "$tmp/throughput.tsv")
if [ -n "$k" ]; then
    plot throughput <<GP
set title "Rate limiting: requests a second on one server core (higher is better)"
set ylabel "thousand requests a second"
set yrange [0:*]
set offsets 0.5, 0.5, 0, 0
set bmargin 5
$(clustered "$tmp/throughput.tsv" "$k" "column(i) / 1000" '"%.0f"')
GP
    drawn=$((drawn + 1))
fi

k=$(matrix latency "$tmp/latency.tsv")
if [ -n "$k" ]; then
    plot latency <<GP
set title "POST /throttle and GET /throttle/{key} at half of peak throughput, open loop (lower is better)" noenhanced
set ylabel "milliseconds (log scale)"
set logscale y
set yrange [0.01:*]
set offsets 0.5, 1.3, 0, 0
set bmargin 5
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dashtype 2 linecolor rgb "#444444"
set label 1 "p99 target: 1 ms" at graph 0.99, first 1.2 right font "sans,10" textcolor rgb "#444444"
$(clustered "$tmp/latency.tsv" "$k" "column(i)" '"%.2g"')
GP
    drawn=$((drawn + 1))
fi

n=$(bars vs_redis "$tmp/vs_redis.tsv")
if [ "$n" -gt 0 ]; then
    hbars vs_redis "tally against Redis: the same work, the same run" \
        "tally / Redis, log scale (1 = as fast; higher is better)" "$n" log
    drawn=$((drawn + 1))
fi

n=$(bars overhead "$tmp/overhead.tsv")
if [ "$n" -gt 0 ]; then
    hbars overhead "The cost of durability and replication: POST /throttle throughput" \
        "throughput over the same server without it (1 = free)" "$n"
    drawn=$((drawn + 1))
fi

[ "$drawn" -gt 0 ] || { echo "charts: $in has no figures to draw" >&2; exit 1; }
