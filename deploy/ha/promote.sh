#!/bin/sh
# promote.sh - fail over to a replica: promote it, then point every other
# node at it.  Run by an operator or an orchestrator that decided the
# primary is gone, for a group run without --coordinator.  With
# --coordinator (deploy/kubernetes/statefulset.yaml) etcd elects the new
# primary by itself and the nodes refuse /admin/promote: this script is not
# used (deploy/README.md, "Failures, unattended").
#
#   deploy/ha/promote.sh [-t TOKEN_FILE] NEW_PRIMARY_URL [OTHER_NODE_URL...]
#
# 1. POST NEW_PRIMARY_URL/admin/promote: the replica stops following, takes a
#    new epoch (written to its data directory), snapshots, takes changes.
# 2. POST OTHER/admin/replicate?primary=NEW_PRIMARY_URL on every other node:
#    replicas follow the new primary (a fresh snapshot); a former primary
#    that still runs stops taking changes at once and resynchronises.  A node
#    that does not answer is reported.  Nodes run with --peers (every node of
#    the group listed) and --peer-secret-file (the group's secret): when it
#    comes back, even started as a primary, it asks its peers first, and once
#    a majority of them reports the new epoch it follows the new primary by
#    itself, taking no change meanwhile (docs/replication.md) - which is
#    why this step matters: the nodes told here are that majority.  A node
#    run without --peers must be started with --replica-of NEW_PRIMARY_URL
#    (or this step run for it): until then it takes changes, since a
#    replica's newer epoch does not fence it.
# HAProxy (deploy/ha/haproxy.cfg) sends changes to the new primary at its
# next health check of /readyz?role=primary.
#
# TOKEN_FILE holds an admin token (when the nodes run with --tokens): the
# operator's, not the replicas' (scope replicate), which cannot promote.
# Exit status: 0 promoted and every other node told; 1 promotion failed;
# 2 promoted, but some node did not answer.
set -u

auth=""
if [ "${1:-}" = "-t" ]; then
    [ $# -ge 2 ] || { echo "promote.sh: -t needs a token file" >&2; exit 1; }
    auth="Authorization: Bearer $(cat "$2")"
    shift 2
fi
[ $# -ge 1 ] || { echo "usage: promote.sh [-t TOKEN_FILE] NEW_PRIMARY_URL [OTHER_NODE_URL...]" >&2; exit 1; }
new=${1%/}
shift

post() {
    if [ -n "$auth" ]; then
        curl -sS --max-time 10 -X POST -H "$auth" -w '\n%{http_code}' "$1"
    else
        curl -sS --max-time 10 -X POST -w '\n%{http_code}' "$1"
    fi
}

out=$(post "$new/admin/promote") || { echo "promote.sh: $new did not answer" >&2; exit 1; }
code=$(printf '%s\n' "$out" | tail -n 1)
if [ "$code" != 200 ]; then
    echo "promote.sh: $new refused the promotion ($code): $(printf '%s\n' "$out" | head -n 1)" >&2
    exit 1
fi
echo "promoted $new: $(printf '%s\n' "$out" | head -n 1)"

status=0
for node in "$@"; do
    node=${node%/}
    if out=$(post "$node/admin/replicate?primary=$new") && [ "$(printf '%s\n' "$out" | tail -n 1)" = 200 ]; then
        echo "$node now follows $new"
    else
        echo "promote.sh: $node did not follow $new (down?): with --peers it follows $new by itself when it returns; without, start it with --replica-of $new" >&2
        status=2
    fi
done
exit $status
