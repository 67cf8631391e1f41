#!/bin/sh
# Installs the Debian packages one task needs on Debian 12, in sets:
#
#   sh tools/deps.sh build   compiling tallyd (make, make run); GLib reads tzdata (calendar windows);
#                              libyaml reads --rls-config; nghttp2
#                              serves --grpc-port, protobuf-c (and its compiler, protoc-c, at build
#                              time) its messages; libcurl is the
#                              replication client (service/replica.c)
#   sh tools/deps.sh test    + what `make test` runs: cmocka, libcurl, the
#                              reference redis-server, redis-cli and python3-redis (it_resp), nginx, yamllint, promtool,
#                              systemd-analyze, groff, haproxy (it_replication's
#                              failover test, it_cluster*), iproute2 (it_cluster_ns's
#                              network namespaces), Node.js + the npm tools
#                              in tools/openapi (pinned by package-lock.json),
#                              gnuplot-nox (the charts' test), python3-grpcio, python3-grpc-tools,
#                              python3-hpack and nghttp2-client's h2load (it_grpc),
#                              etcd-server and etcd-client (test_etcd, it_etcd, it_cluster_etcd: --coordinator)
#   sh tools/deps.sh bench   + what `make bench` runs: wrk, redis-benchmark, nginx,
#                              gnuplot-nox (bench/charts.sh draws its charts),
#                              libhiredis-dev (bench/resp_micro.c's reference parser)
#   sh tools/deps.sh fuzz    + clang and its libFuzzer runtime (make fuzz)
#   sh tools/deps.sh valgrind + cmocka and valgrind (make valgrind)
#
# Each set includes `build`.  As root it runs apt-get for what is missing;
# otherwise it prints the exact command and fails, so nothing is
# half-installed.  Only the test set uses the npm registry.
set -eu

set_name=${1:-build}
BUILD="gcc make pkg-config libglib2.0-dev
libmicrohttpd-dev libgnutls28-dev libjansson-dev libroaring-dev libxxhash-dev zlib1g-dev libjemalloc-dev nettle-dev
libcurl4-openssl-dev libyaml-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler"
case "$set_name" in
build) PKGS="$BUILD" ;;
test) PKGS="$BUILD libcmocka-dev libcurl4-openssl-dev curl openssl procps
redis-server redis-tools python3-redis nginx haproxy iproute2 yamllint prometheus systemd groff-base gnuplot-nox
python3-grpcio python3-grpc-tools python3-hpack nghttp2-client etcd-server etcd-client" ;;
bench) PKGS="$BUILD redis-server redis-tools nginx haproxy wrk curl procps gnuplot-nox libhiredis-dev nghttp2-client" ;;
fuzz) PKGS="$BUILD clang libclang-rt-14-dev" ;;
valgrind) PKGS="$BUILD libcmocka-dev valgrind" ;;
*) echo "deps: unknown set '$set_name' (build, test, bench, fuzz or valgrind)" >&2; exit 2 ;;
esac

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
if [ "$set_name" = test ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
    missing="$missing nodejs npm"
fi

if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "deps ($set_name): installing:$missing"
        export DEBIAN_FRONTEND=noninteractive
        # Packages such as redis-server, nginx and prometheus would start
        # system services on install; tally's tests start their own on free
        # ports instead.
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
            chmod +x /usr/sbin/policy-rc.d
            trap 'rm -f /usr/sbin/policy-rc.d' EXIT
        fi
        apt-get update -qq
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing
    else
        echo "deps: missing Debian packages for '$set_name':$missing" >&2
        echo "deps: run as root:  apt-get install -y$missing" >&2
        exit 1
    fi
fi

if [ "$set_name" = test ]; then
    # The npm tools (Redocly CLI, the OpenAPI schema validator, yaml), pinned
    # by tools/openapi/package-lock.json.  Redocly CLI needs Node.js >= 20.19.
    node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' || {
        echo "deps: Node.js $(node --version) is too old for Redocly CLI (>= 20.19 needed)" >&2
        exit 1
    }
    dir=$(dirname "$0")/openapi
    if ! (cd "$dir" && npm ls --depth=0 >/dev/null 2>&1); then
        echo "deps: installing the npm tools in $dir (npm ci)"
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    fi
fi
