#!/bin/sh
# Renders the benchmark charts (bench/charts.sh) from a small fixed charts
# file and checks the SVGs: gnuplot said nothing (charts.sh fails if it
# does), each chart is a complete SVG document, and each holds the run's
# identity and the routes of its rows, so a change to the script or to
# gnuplot that breaks a chart fails `make test` rather than the next bench.
# Usage: sh tools/check-charts.sh tests/fixtures/bench/charts.tsv OUTDIR
set -eu
in=$1
out=$2
rm -rf "$out"
sh bench/charts.sh "$in" "$out" >/dev/null
commit=$(awk -F'\t' '$1 == "# commit" { print $2 }' "$in")
n=0
for chart in $(awk -F'\t' '!/^#/ { print $1 }' "$in" | sort -u); do
    svg=$out/$chart.svg
    [ -s "$svg" ] || { echo "charts: $svg was not drawn" >&2; exit 1; }
    head -c 200 "$svg" | grep -q '<svg' || head -c 400 "$svg" | grep -q '<?xml' ||
        { echo "charts: $svg does not start as an SVG document" >&2; exit 1; }
    tail -c 100 "$svg" | grep -q '</svg>' || { echo "charts: $svg is cut short" >&2; exit 1; }
    grep -q "$commit" "$svg" || { echo "charts: $svg does not name the run's commit $commit" >&2; exit 1; }
    # every group of the chart is written on it (gnuplot escapes & < > in text)
    awk -F'\t' -v c="$chart" '!/^#/ && $1 == c { print $2 }' "$in" | sort -u | while IFS= read -r group; do
        text=$(printf '%s' "$group" | sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g')
        grep -qF -- "$text" "$svg" || { echo "charts: $svg lacks '$group'" >&2; exit 1; }
    done
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "charts: $in has no rows" >&2; exit 1; }
echo "charts: bench/charts.sh drew the $n charts of $in"
