#!/bin/sh
# stalls.sh FILE: the slow requests bench/openloop wrote to OL_SLOW=FILE,
# grouped into the stalls behind them: requests due within 3 ms of each
# other are one stall.  One line per stall ("<due s> <requests> <worst ms>",
# by time), then a summary.  A stall that comes back at a fixed period is
# something periodic (a timer, a once-a-second fsync); one that the bare
# server (bench/bare_mhd.c) shows as well is the machine's.
#
#   OL_SLOW=/tmp/slow build/release/bench/openloop PORT 40000 10 50 throttle_post 1
#   sh bench/stalls.sh /tmp/slow
set -eu
sort -g "$1" | awk '
    function flush() { if (n) printf "%9.4f %6d %7.2f\n", start, n, worst; total += n; stalls++; if (n >= 80) { big++; inbig += n } }
    NR == 1 || $1 - last > 0.003 { flush(); start = $1; n = 0; worst = 0 }
    { n++; if ($2 > worst) worst = $2; last = $1 }
    END { flush(); printf "%d stalls, %d requests over 0.3 ms; %d stalls of 80 or more requests, %d requests in them\n", stalls, total, big, inbig }'
