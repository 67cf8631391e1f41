#!/bin/sh
# Checks the man page against the binary: groff renders it without a single
# warning, and every option and environment variable `tallyd --help` prints
# is in the rendered page (tools/check-config.sh checks docs/configuration.md).
# Usage: sh tools/check-man.sh man/tallyd.8 build/release/tallyd
set -eu
page=$1
tallyd=$2

warnings=$(groff -man -ww -z "$page" 2>&1)
if [ -n "$warnings" ]; then
    echo "man: $page: groff warns:" >&2
    echo "$warnings" >&2
    exit 1
fi
text=$(groff -man -Tascii -P-cbou "$page" 2>/dev/null)

help=$("$tallyd" --help)
# options: "  --name V   TALLY_NAME ...", plus the commands of the usage lines
flags=$(printf '%s\n' "$help" | sed -n 's/^ *\(tallyd \)\{0,1\}\(--[a-z-]*\).*/\2/p' | sort -u)
envs=$(printf '%s\n' "$help" | grep -o 'TALLY_[A-Z_]*' | sort -u)
[ -n "$flags" ] && [ -n "$envs" ] || { echo "man: could not read the options from $tallyd --help" >&2; exit 1; }

missing=""
for f in $flags $envs; do
    printf '%s\n' "$text" | grep -q -- "$f" || missing="$missing $f"
done
if [ -n "$missing" ]; then
    echo "man: $page does not describe:$missing (tallyd --help has them)" >&2
    exit 1
fi
echo "man: $page renders cleanly and covers $(printf '%s\n' $flags $envs | wc -l) options and variables of --help"
