#!/bin/sh
# Installs what building, testing and benchmarking tally needs on Debian 12.
# As root it runs apt-get for the missing packages; otherwise it prints the
# exact command and fails, so nothing is half-installed.
set -eu

PKGS="gcc make pkg-config
libmicrohttpd-dev libjansson-dev libroaring-dev libxxhash-dev libjemalloc-dev
libcmocka-dev libcurl4-openssl-dev
clang libclang-rt-14-dev
redis-server redis-tools nginx wrk yamllint curl procps"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    missing="$missing nodejs npm"
fi

if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "deps: installing:$missing"
        export DEBIAN_FRONTEND=noninteractive
        # Packages such as redis-server and nginx would start system services
        # on install; tally's tests start their own on free ports instead.
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
            chmod +x /usr/sbin/policy-rc.d
            trap 'rm -f /usr/sbin/policy-rc.d' EXIT
        fi
        apt-get update -qq
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing
    else
        echo "deps: missing Debian packages:$missing" >&2
        echo "deps: run as root:  apt-get install -y$missing" >&2
        exit 1
    fi
fi

# The OpenAPI validator (npm, pinned by package-lock.json).
dir=$(dirname "$0")/openapi
if [ ! -d "$dir/node_modules/@seriousme/openapi-schema-validator" ] || [ ! -d "$dir/node_modules/yaml" ]; then
    echo "deps: installing the OpenAPI validator (npm ci)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
