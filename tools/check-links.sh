#!/bin/sh
# Checks the docs' links: every relative link and every anchor in the
# Markdown files given (files and directories of them) resolves, by
# remark-validate-links (pinned in tools/openapi; headings slugged as GitHub
# does), and every page of docs/ is linked from README.md, so none is an
# orphan a reader cannot reach.
# Usage: sh tools/check-links.sh README.md HACKING.md docs deploy/...
set -eu
cd "$(dirname "$0")/.."
remark=tools/openapi/node_modules/.bin/remark
[ -x "$remark" ] || { echo "links: $remark is missing (make deps-test installs it)" >&2; exit 1; }
# --frail: a warning fails; --quiet: only files with a finding are named
"$remark" --rc-path tools/openapi/links.remarkrc.json --frail --quiet --no-stdout --no-color "$@"

orphans=""
for page in docs/*.md; do
    grep -q "](${page})\|](${page}#" README.md || orphans="$orphans $page"
done
if [ -n "$orphans" ]; then
    echo "links: README.md does not link to:$orphans" >&2
    exit 1
fi
echo "links: every relative link and anchor of $* resolves; README.md links to every page of docs/"
