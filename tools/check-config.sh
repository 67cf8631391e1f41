#!/bin/sh
# Checks docs/configuration.md against the binary: every option `tallyd
# --help` prints has a row in the page's table with the environment variable
# --help names and, where --help states a default, that default, so the
# page cannot fall behind a new or changed flag (tools/check-man.sh does the
# same for the man page).
# Usage: sh tools/check-config.sh docs/configuration.md build/release/tallyd
set -eu
page=$1
tallyd=$2

help=$("$tallyd" --help)
# option lines: "  --name [V]   TALLY_NAME   text (default X; ...)"
rows=$(printf '%s\n' "$help" | sed -n 's/^  \(--[a-z-]*\)\( V\)\{0,1\} *\(TALLY_[A-Z_]*\) *\(.*\)$/\1 \3 \4/p')
[ -n "$rows" ] || { echo "config: could not read the options from $tallyd --help" >&2; exit 1; }

bad=""
n=0
while read -r flag env text; do
    n=$((n + 1))
    # the page's row: | `--flag` | `TALLY_X` | default | meaning |
    row=$(grep -F -- "| \`$flag\` |" "$page" | head -n 1 || true)
    if [ -z "$row" ]; then bad="$bad\n  $flag: no row in the table"; continue; fi
    cell_env=$(printf '%s\n' "$row" | awk -F'|' '{ print $3 }' | tr -d ' `')
    [ "$cell_env" = "$env" ] || bad="$bad\n  $flag: the page says ${cell_env:-nothing} for its variable, --help says $env"
    # "(default X; ...)", "(default: X)", "(default X: ...)", "(default X, ...)"
    def=$(printf '%s\n' "$text" | sed -n 's/.*(default:\{0,1\} \([^;:,)]*\).*/\1/p')
    if [ -n "$def" ]; then
        cell_def=$(printf '%s\n' "$row" | awk -F'|' '{ print $4 }' | tr -d '`')
        case "$cell_def" in
        *"$def"*) ;;
        *) bad="$bad\n  $flag: the page's default is '$(echo $cell_def)', --help says '$def'" ;;
        esac
    fi
done <<EOF_ROWS
$rows
EOF_ROWS

if [ -n "$bad" ]; then
    printf 'config: %s does not match %s --help:%b\n' "$page" "$tallyd" "$bad" >&2
    exit 1
fi
echo "config: $page documents all $n options of --help with their variables and defaults"
