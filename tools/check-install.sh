#!/bin/sh
# `make install` into a scratch DESTDIR (PREFIX=/usr, as a distribution
# package would) and back out: every file lands with its mode, the installed
# binary runs, the unit file points at it and passes `systemd-analyze verify`
# (which also finds the installed man page) with an exposure score of at most
# 1.5 from `systemd-analyze security`, and `make uninstall` leaves no file.
# Usage: sh tools/check-install.sh   (from the repository root)
set -eu
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
fail() { echo "install: $*" >&2; exit 1; }

make --no-print-directory -s install DESTDIR="$stage" PREFIX=/usr >/dev/null
for f in usr/bin/tallyd usr/share/man/man8/tallyd.8 usr/lib/systemd/system/tallyd.service \
         usr/share/doc/tally/README.md usr/share/doc/tally/docs/configuration.md usr/share/doc/tally/openapi.yaml usr/share/doc/tally/examples/policies.json \
         usr/share/doc/tally/monitoring/grafana-dashboard.json usr/share/doc/tally/monitoring/alerts.yml; do
    [ -f "$stage/$f" ] || fail "make install did not install /$f"
done
[ -x "$stage/usr/bin/tallyd" ] || fail "/usr/bin/tallyd is not executable"
"$stage/usr/bin/tallyd" --version | grep -q '^tallyd ' || fail "the installed tallyd --version does not answer"
unit="$stage/usr/lib/systemd/system/tallyd.service"
grep -q '^ExecStart=/usr/bin/tallyd$' "$unit" || fail "the installed unit does not run /usr/bin/tallyd"

if command -v systemd-analyze >/dev/null 2>&1; then
    # verify resolves ExecStart= on this machine: point it at the staged binary
    sed "s|^ExecStart=/usr/bin/tallyd|ExecStart=$stage/usr/bin/tallyd|" "$unit" > "$stage/tallyd.service"
    MANPATH="$stage/usr/share/man" systemd-analyze verify "$stage/tallyd.service" ||
        fail "systemd-analyze verify refuses the unit"
    MANPATH="$stage/usr/share/man" systemd-analyze security --offline=yes --threshold=15 "$stage/tallyd.service" \
        > "$stage/security.txt" 2>&1 || { cat "$stage/security.txt" >&2; fail "the unit's exposure is above 1.5"; }
    verified="verified ($(tail -n 1 "$stage/security.txt" | sed 's/^[^:]*: //'))"
else
    verified="not verified: systemd-analyze is not installed (make deps-test installs systemd)"
fi

make --no-print-directory -s uninstall DESTDIR="$stage" PREFIX=/usr >/dev/null
left=$(find "$stage/usr" -type f | sed "s|^$stage||")
[ -z "$left" ] || fail "make uninstall left: $left"
echo "install: make install/uninstall with DESTDIR and PREFIX=/usr check out; unit $verified"
