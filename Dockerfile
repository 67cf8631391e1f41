# tallyd container image: build on Debian 12, run on a slim Debian 12 as a
# non-root user, data on a volume, listening on all interfaces inside the
# container - so every request but /healthz and /readyz needs a token, from
# the token file mounted as a secret at /run/secrets/tally-tokens
# (docs/security.md; tallyd refuses to start without it).
#   Build: docker build -t tally .
#   Run:   docker run -p 8080:8080 -v tally-data:/data \
#            -v "$PWD/tokens.json:/run/secrets/tally-tokens:ro" tally
#   (Compose: a `secrets:` entry named tally-tokens lands at the same path.)
# HTTPS: mount a certificate and key read-only and name them, e.g.
#   -v /etc/tally/tls:/tls:ro -e TALLY_TLS_CERT=/tls/tls.crt -e TALLY_TLS_KEY=/tls/tls.key
# (the health check below then needs https://; the files are reloaded on change)

FROM debian:12 AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc make libc6-dev pkg-config \
      libmicrohttpd-dev libgnutls28-dev libjansson-dev libroaring-dev libxxhash-dev zlib1g-dev libjemalloc-dev nettle-dev libyaml-dev \
      libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler \
      libcurl4-openssl-dev \
      libglib2.0-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# every directory tallyd is built from (make dockerfile-check, in make
# test, fails when a source directory is missing here)
COPY core core
COPY cmd cmd
COPY resp resp
COPY redis redis
COPY rls rls
COPY grpc grpc
COPY proto proto
COPY api api
COPY service service
COPY tools/registry.sh tools/registry.sh
COPY tools/reshard tools/reshard
COPY Makefile .
RUN make -j"$(nproc)" build/release/tallyd build/release/tally-reshard

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libmicrohttpd12 libjansson4 libroaring0 libxxhash0 libjemalloc2 libnettle8 libcurl4 libyaml-0-2 libnghttp2-14 libprotobuf-c1 libglib2.0-0 tzdata curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 tally \
 && useradd --system --uid 10001 --gid tally --home-dir /data --shell /usr/sbin/nologin tally \
 && mkdir -p /data && chown tally:tally /data
COPY --from=build /src/build/release/tallyd /usr/local/bin/tallyd
# the resharding tool, also what seeds the cluster's map in etcd (deploy/cluster)
COPY --from=build /src/build/release/tally-reshard /usr/local/bin/tally-reshard
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8080
ENV TALLY_BIND=0.0.0.0 \
    TALLY_PORT=8080 \
    TALLY_DATA_DIR=/data \
    TALLY_TOKENS=/run/secrets/tally-tokens
HEALTHCHECK --interval=10s --timeout=2s --start-period=30s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
# SIGTERM stops accepting, finishes in-flight requests, snapshots, exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/tallyd"]
