/* options.c - see options.h.  One table describes every setting: its flag,
 * its environment variable, how it parses, and its help line. */
#include "service/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/cidr.h"
#include "service/etcd.h"
#include "service/log.h"

typedef enum { K_INT, K_STR, K_SIZE, K_BOOL_ONOFF, K_SHARDS, K_POLICY, K_FSYNC, K_LEVEL, K_FLAG } kind_t;

typedef struct opt_def {
    const char *flag;
    const char *env;
    kind_t kind;
    size_t offset;
    long min, max;               /* for K_INT; max is the buffer size for K_STR */
    const char *help;
} opt_def_t;

#define OFF(f) offsetof(tally_opts_t, f)
#define CAP(f) ((long)sizeof(((tally_opts_t *)0)->f))

static const opt_def_t defs[] = {
    { "port", "TALLY_PORT", K_INT, OFF(port), 0, 65535, "TCP port to listen on (default 8080; 0 picks a free port)" },
    { "resp-port", "TALLY_RESP_PORT", K_INT, OFF(resp_port), 0, 65535, "TCP port to speak the Redis protocol (RESP2/RESP3) on, for redis-cli and Redis clients, on the same --bind address (default: off; 0 picks a free port; with --tls-cert it speaks TLS only, with the same certificate and client CAs)" },
    { "grpc-port", "TALLY_GRPC_PORT", K_INT, OFF(grpc_port), 0, 65535, "TCP port to serve gRPC on over HTTP/2 - Envoy's rate limit service (ShouldRateLimit) and grpc.health.v1 - on the same --bind address; TLS with ALPN h2 with --tls-cert, else cleartext HTTP/2 with prior knowledge (default: off; 0 picks a free port)" },
    { "bind", "TALLY_BIND", K_STR, OFF(bind), 0, CAP(bind), "address to listen on (default 127.0.0.1; 0.0.0.0 for all IPv4)" },
    { "threads", "TALLY_THREADS", K_INT, OFF(threads), 1, 1024, "HTTP worker threads (default: online cores)" },
    { "data-dir", "TALLY_DATA_DIR", K_STR, OFF(data_dir), 0, CAP(data_dir), "directory for snapshot and journal (default ./data)" },
    { "in-memory", "TALLY_IN_MEMORY", K_FLAG, OFF(in_memory), 0, 0, "keep no files: state is lost on exit" },
    { "max-body", "TALLY_MAX_BODY", K_SIZE, OFF(body_limit), 0, 0, "largest request body (default 1mb, at most 1gb; larger gets 413)" },
    { "max-url", "TALLY_MAX_URL", K_SIZE, OFF(max_url), 0, 0, "longest request URL (default 16kb; longer gets 414)" },
    { "timeout", "TALLY_TIMEOUT", K_INT, OFF(conn_timeout), 1, 86400, "seconds before an idle connection is closed (default 60)" },
    { "max-connections", "TALLY_MAX_CONNECTIONS", K_INT, OFF(max_connections), 1, 1000000, "concurrent connections (default 10000)" },
    { "max-connections-per-ip", "TALLY_MAX_CONNECTIONS_PER_IP", K_INT, OFF(max_conn_per_ip), 0, 1000000, "concurrent connections from one client address (default 0: half of --max-connections)" },
    { "header-timeout", "TALLY_HEADER_TIMEOUT", K_INT, OFF(header_timeout), 1, 3600, "seconds a connection has to send a complete request head, and the longest a body may go without a byte (default 10)" },
    { "shutdown-timeout", "TALLY_SHUTDOWN_TIMEOUT", K_INT, OFF(shutdown_timeout), 0, 3600, "seconds to let in-flight requests finish on SIGTERM (default 10)" },
    { "shards", "TALLY_SHARDS", K_SHARDS, OFF(shard_bits), 0, 0, "keyspace shards, a power of two 1..4096 (default 256)" },
    { "maxmemory", "TALLY_MAXMEMORY", K_SIZE, OFF(maxmemory), 0, 0, "memory limit for keys and values, e.g. 512mb (default 0: none)" },
    { "maxmemory-policy", "TALLY_MAXMEMORY_POLICY", K_POLICY, OFF(policy), 0, 0, "noeviction | allkeys-lru | volatile-lru (default noeviction)" },
    { "max-value-size", "TALLY_MAX_VALUE_SIZE", K_SIZE, OFF(max_value), 0, 0, "largest value one key may hold, e.g. 64mb: a request that would create or grow a value past it gets 400, and one request reads at most 4 times it from its sources (default 512mb, as Redis's bulk limit; 0: none)" },
    { "max-answer-size", "TALLY_MAX_ANSWER_SIZE", K_SIZE, OFF(max_answer), 0, 0, "largest answer one request may build (ranges, lists, dumps, raw values), e.g. 16mb; larger gets 400: read it in pages (default 64mb; 0: none)" },
    { "snapshot-interval", "TALLY_SNAPSHOT_INTERVAL", K_INT, OFF(snapshot_interval), 0, 86400 * 365, "seconds between snapshots when anything changed (default 60; 0: only on demand and exit)" },
    { "journal", "TALLY_JOURNAL", K_BOOL_ONOFF, OFF(journal), 0, 0, "on | off: journal every change (default on)" },
    { "fsync", "TALLY_FSYNC", K_FSYNC, OFF(fsync), 0, 0, "always | everysec | no: when the journal reaches the disk (default everysec)" },
    { "journal-timeout", "TALLY_JOURNAL_TIMEOUT", K_INT, OFF(journal_timeout), 1, 3600, "seconds a change waits for a failing disk before it is answered 503 (default 5)" },
    { "config", "TALLY_CONFIG", K_STR, OFF(config), 0, CAP(config), "JSON file of named rate-limit policies (reloaded on SIGHUP and POST /admin/reload)" },
    { "rls-config", "TALLY_RLS_CONFIG", K_STR, OFF(rls_config), 0, CAP(rls_config), "envoyproxy/ratelimit's YAML configuration for Envoy's rate limit service: a file, or a directory of *.yaml/*.yml (loaded and checked even without --grpc-port; reloaded on SIGHUP and POST /admin/reload)" },
    { "rls-charge-all", "TALLY_RLS_CHARGE_ALL", K_FLAG, OFF(rls_charge_all), 0, 0, "Envoy's rate limit service charges every matched descriptor that fits even when another is over its limit, as envoyproxy/ratelimit does (without it a request is all or nothing)" },
    { "rls-response-headers", "TALLY_RLS_RESPONSE_HEADERS", K_FLAG, OFF(rls_response_headers), 0, 0, "Envoy's rate limit service adds x-ratelimit-limit, -remaining and -reset to its answers, as envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED (the IETF RateLimit fields are always added)" },
    { "pid-file", "TALLY_PID_FILE", K_STR, OFF(pid_file), 0, CAP(pid_file), "write the process id to this file once listening; removed on exit (default: none)" },
    { "log-level", "TALLY_LOG_LEVEL", K_LEVEL, OFF(log_level), 0, 0, "error | warn | info | debug (default info)" },
    /* transport, browsers and proxies */
    { "tls-cert", "TALLY_TLS_CERT", K_STR, OFF(tls_cert), 0, CAP(tls_cert), "PEM certificate (chain) to serve HTTPS with, TLS 1.2+ only; needs --tls-key; reloaded on SIGHUP and when the file changes" },
    { "tls-key", "TALLY_TLS_KEY", K_STR, OFF(tls_key), 0, CAP(tls_key), "PEM private key of --tls-cert" },
    { "tls-client-ca", "TALLY_TLS_CLIENT_CA", K_STR, OFF(tls_client_ca), 0, CAP(tls_client_ca), "PEM CA certificates: every client must present a certificate they issued (mTLS)" },
    { "allow-origin", "TALLY_ALLOW_ORIGIN", K_STR, OFF(allow_origin), 0, CAP(allow_origin), "browser origins allowed to call tallyd, comma-separated (e.g. https://app.example.com; * for any), answered with CORS headers (default none: a request with an Origin header gets 403)" },
    { "allow-host", "TALLY_ALLOW_HOST", K_STR, OFF(allow_host), 0, CAP(allow_host), "Host names accepted when bound to loopback, besides IP literals and localhost, comma-separated (others get 421)" },
    { "trusted-proxies", "TALLY_TRUSTED_PROXIES", K_STR, OFF(trusted_proxies), 0, CAP(trusted_proxies), "proxies whose X-Forwarded-For/X-Real-IP {ip} believes, comma-separated addresses or CIDRs (default none: {ip} is the peer address)" },
    /* authentication */
    { "tokens", "TALLY_TOKENS", K_STR, OFF(tokens), 0, CAP(tokens), "JSON file of bearer tokens (hashes, scopes, key prefixes); every route but /healthz and /readyz then needs one (reloaded on SIGHUP and POST /admin/reload)" },
    { "metrics-public", "TALLY_METRICS_PUBLIC", K_FLAG, OFF(metrics_public), 0, 0, "with --tokens, serve /metrics without a token" },
    { "insecure-no-auth", "TALLY_INSECURE_NO_AUTH", K_FLAG, OFF(insecure_no_auth), 0, 0, "serve a non-loopback --bind without --tokens (anyone who reaches the port can do anything)" },
    { "auth-fail-limit", "TALLY_AUTH_FAIL_LIMIT", K_INT, OFF(auth_fail_limit), 0, 1000000, "unknown tokens a minute from one client address before it gets 429 (default 10; 0: no limit)" },
    /* replication */
    { "replica-of", "TALLY_REPLICA_OF", K_STR, OFF(replica_of), 0, CAP(replica_of), "follow this primary (base URL, e.g. http://10.0.0.1:8080): load its snapshot, apply its changes, refuse changes with 421" },
    { "replica-token", "TALLY_REPLICA_TOKEN", K_STR, OFF(replica_token), 0, CAP(replica_token), "bearer token (scope replicate) this node presents to its primary and its --peers; visible in ps: prefer --replica-token-file" },
    { "replica-token-file", "TALLY_REPLICA_TOKEN_FILE", K_STR, OFF(replica_token_file), 0, CAP(replica_token_file), "file holding that token (one line; not readable by other users); re-read on SIGHUP and POST /admin/reload" },
    { "repl-backlog", "TALLY_REPL_BACKLOG", K_SIZE, OFF(repl_backlog), 0, 0, "bytes of recent changes a primary keeps for replicas that reconnect (default 64mb; further behind: a new snapshot)" },
    { "min-replicas-ack", "TALLY_MIN_REPLICAS_ACK", K_INT, OFF(min_replicas_ack), 0, 32, "answer a change only once this many replicas hold it, else take it back (default 0: asynchronous); fewer connected: 503, not applied" },
    { "min-replicas-timeout", "TALLY_MIN_REPLICAS_TIMEOUT", K_INT, OFF(min_replicas_timeout), 1, 600000, "milliseconds a change waits for --min-replicas-ack before it is taken back and answered 503, not applied (default 1000)" },
    { "peers", "TALLY_PEERS", K_STR, OFF(peers), 0, CAP(peers), "the other nodes of this replication group, comma-separated base URLs (needs --peer-secret-file), asked every second for their role and epoch: a read-only view in /info (peers_state); their answers never change this node's role or epoch (failover: --coordinator)" },
    { "peer-secret-file", "TALLY_PEER_SECRET_FILE", K_STR, OFF(peer_secret_file), 0, CAP(peer_secret_file), "the replication group's shared secret (at least 32 bytes, the same file on every node, not readable by other users): signs this node's answers to its peers and checks theirs; re-read on SIGHUP and POST /admin/reload" },
    /* the coordinator (docs/replication.md) */
    { "coordinator", "TALLY_COORDINATOR", K_STR, OFF(coordinator), 0, CAP(coordinator), "etcd://host:port[,host:port...] (etcds:// for TLS): elect this replication group's primary in etcd (a leader key under a lease, the epoch its revision) and follow it, unattended; needs --advertise-url and a data directory; not with --replica-of" },
    { "coordinator-prefix", "TALLY_COORDINATOR_PREFIX", K_STR, OFF(coordinator_prefix), 0, CAP(coordinator_prefix), "the etcd key prefix of this replication group: one group per prefix (default /tally)" },
    { "coordinator-ttl", "TALLY_COORDINATOR_TTL", K_INT, OFF(coordinator_ttl), 1, 300, "seconds of the etcd lease the primary holds its key under; a primary that cannot renew it stops taking changes before it expires (default 5)" },
    { "advertise-url", "TALLY_ADVERTISE_URL", K_STR, OFF(advertise_url), 0, CAP(advertise_url), "this node's base URL as the group and the proxies reach it (e.g. http://10.0.0.1:8080): replicas follow the primary there; it names this node in etcd" },
    { "coordinator-cacert", "TALLY_COORDINATOR_CACERT", K_STR, OFF(coordinator_cacert), 0, CAP(coordinator_cacert), "PEM CA certificates that signed etcd's member certificates (etcds://; default: the system's)" },
    { "coordinator-cert", "TALLY_COORDINATOR_CERT", K_STR, OFF(coordinator_cert), 0, CAP(coordinator_cert), "PEM client certificate presented to etcd (its --client-cert-auth); needs --coordinator-key" },
    { "coordinator-key", "TALLY_COORDINATOR_KEY", K_STR, OFF(coordinator_key), 0, CAP(coordinator_key), "PEM private key of --coordinator-cert" },
    { "coordinator-user", "TALLY_COORDINATOR_USER", K_STR, OFF(coordinator_user), 0, CAP(coordinator_user), "etcd user (etcd's authentication); needs --coordinator-password-file" },
    { "coordinator-password-file", "TALLY_COORDINATOR_PASSWORD_FILE", K_STR, OFF(coordinator_password_file), 0, CAP(coordinator_password_file), "file holding that user's password (one line; not readable by other users)" },
    /* cluster (deploy/cluster/README.md) */
    { "cluster", "TALLY_CLUSTER", K_STR, OFF(cluster), 0, CAP(cluster), "the cluster map: nodes, their slots, an epoch (deploy/cluster/README.md); this node then serves only its slots. FILE: reloaded on SIGHUP and POST /admin/reload, PUT /admin/cluster rewrites it; etcd[:PREFIX] (with --coordinator): read from etcd's key PREFIX/map (PREFIX: /tally/cluster when not given) and watched, changed by tally-reshard --coordinator" },
    { "cluster-node", "TALLY_CLUSTER_NODE", K_STR, OFF(cluster_node), 0, CAP(cluster_node), "this node's name in the --cluster map" },
    { "haproxy-config", "TALLY_HAPROXY_CONFIG", K_FLAG, OFF(haproxy_config), 0, 0, "print the HAProxy 2.6 configuration that routes to the --cluster map's nodes, and exit" },
    { "haproxy-slots", "TALLY_HAPROXY_SLOTS", K_FLAG, OFF(haproxy_slots), 0, 0, "print the slot map file that configuration reads (slot ranges -> backends) for the --cluster map, and exit" },
    { "haproxy-lua", "TALLY_HAPROXY_LUA", K_FLAG, OFF(haproxy_lua), 0, 0, "print the Lua script that configuration loads (the slot converter, tally-slot.lua beside the slot map file), and exit" },
    { "haproxy-map", "TALLY_HAPROXY_MAP", K_STR, OFF(haproxy_map), 0, CAP(haproxy_map), "with --haproxy-config: where HAProxy reads the slot map file (default /etc/haproxy/tally-slots.map)" },
    { "haproxy-socket", "TALLY_HAPROXY_SOCKET", K_STR, OFF(haproxy_socket), 0, CAP(haproxy_socket), "with --haproxy-config: where HAProxy opens its admin socket, for tally-reshard --haproxy-socket (default /run/haproxy/tally.sock)" },
    { "access-log", "TALLY_ACCESS_LOG", K_STR, OFF(access_log), 0, CAP(access_log), "write one JSON line per HTTP request and per Redis-port command to FILE, or - for stdout (reopened on SIGHUP)" },
};

const char *fsync_mode_name(fsync_mode_t m)
{
    return m == FSYNC_ALWAYS ? "always" : m == FSYNC_NO ? "no" : "everysec";
}

static bool parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return false;
    uint64_t mul = 1;
    if (*end) {
        if (!strcasecmp(end, "b")) mul = 1;
        else if (!strcasecmp(end, "k") || !strcasecmp(end, "kb")) mul = 1ULL << 10;
        else if (!strcasecmp(end, "m") || !strcasecmp(end, "mb")) mul = 1ULL << 20;
        else if (!strcasecmp(end, "g") || !strcasecmp(end, "gb")) mul = 1ULL << 30;
        else return false;
    }
    if (v > UINT64_MAX / mul)
        return false;
    *out = v * mul;
    return true;
}

static bool set_opt(tally_opts_t *o, const opt_def_t *d, const char *v, char *err, size_t errlen)
{
    char *p = (char *)o + d->offset;
    switch (d->kind) {
    case K_INT: {
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < d->min || x > d->max) {
            snprintf(err, errlen, "--%s: '%s' is not an integer between %ld and %ld", d->flag, v, d->min, d->max);
            return false;
        }
        *(int *)p = (int)x;
        return true;
    }
    case K_STR: {
        if (strlen(v) >= (size_t)d->max) {
            snprintf(err, errlen, "--%s: value too long", d->flag);
            return false;
        }
        strcpy(p, v);
        return true;
    }
    case K_SIZE: {
        uint64_t x;
        if (!parse_size(v, &x)) {
            snprintf(err, errlen, "--%s: '%s' is not a size (e.g. 1048576, 512kb, 64mb, 2gb)", d->flag, v);
            return false;
        }
        if (d->offset == OFF(maxmemory) || d->offset == OFF(max_value) || d->offset == OFF(max_answer))
            *(uint64_t *)p = x;
        else
            *(size_t *)p = (size_t)x;
        return true;
    }
    case K_BOOL_ONOFF:
        if (!strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1"))
            *(bool *)p = true;
        else if (!strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0"))
            *(bool *)p = false;
        else {
            snprintf(err, errlen, "--%s: '%s' must be on or off", d->flag, v);
            return false;
        }
        return true;
    case K_FLAG:
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on"))
            *(bool *)p = true;
        else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off") || !*v)
            *(bool *)p = false;
        else {
            snprintf(err, errlen, "%s: '%s' must be 1 or 0", d->env, v);
            return false;
        }
        return true;
    case K_SHARDS: {
        char *end;
        long x = strtol(v, &end, 10);
        if (end == v || *end || x < 1 || x > 4096 || (x & (x - 1))) {
            snprintf(err, errlen, "--%s: '%s' must be a power of two from 1 to 4096", d->flag, v);
            return false;
        }
        unsigned bits = 0;
        while ((1L << bits) < x)
            bits++;
        o->shard_bits = bits;
        return true;
    }
    case K_POLICY:
        if (!strcmp(v, "noeviction")) o->policy = KS_NOEVICTION;
        else if (!strcmp(v, "allkeys-lru")) o->policy = KS_ALLKEYS_LRU;
        else if (!strcmp(v, "volatile-lru")) o->policy = KS_VOLATILE_LRU;
        else {
            snprintf(err, errlen, "--%s: '%s' must be noeviction, allkeys-lru or volatile-lru", d->flag, v);
            return false;
        }
        return true;
    case K_FSYNC:
        if (!strcmp(v, "always")) o->fsync = FSYNC_ALWAYS;
        else if (!strcmp(v, "everysec")) o->fsync = FSYNC_EVERYSEC;
        else if (!strcmp(v, "no")) o->fsync = FSYNC_NO;
        else {
            snprintf(err, errlen, "--%s: '%s' must be always, everysec or no", d->flag, v);
            return false;
        }
        return true;
    case K_LEVEL: {
        int l = log_level_parse(v);
        if (l < 0) {
            snprintf(err, errlen, "--%s: '%s' must be error, warn, info or debug", d->flag, v);
            return false;
        }
        o->log_level = l;
        return true;
    }
    }
    return false;
}

static void defaults(tally_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->port = 8080;
    o->resp_port = -1;
    o->grpc_port = -1;
    strcpy(o->bind, "127.0.0.1");
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = n > 0 ? (int)n : 1;
    strcpy(o->data_dir, "./data");
    o->body_limit = 1 << 20;
    o->max_url = 16 << 10;
    o->conn_timeout = 60;
    o->max_connections = 10000;
    o->header_timeout = 10;
    o->shutdown_timeout = 10;
    o->shard_bits = 8;
    o->policy = KS_NOEVICTION;
    o->max_value = 512ULL << 20;
    o->max_answer = 64ULL << 20;
    o->snapshot_interval = 60;
    o->journal = true;
    o->fsync = FSYNC_EVERYSEC;
    o->journal_timeout = 5;
    o->log_level = LOG_INFO;
    o->auth_fail_limit = 10;
    o->repl_backlog = 64 << 20;
    o->min_replicas_timeout = 1000;
    snprintf(o->coordinator_prefix, sizeof(o->coordinator_prefix), "/tally");
    o->coordinator_ttl = 5;
}

/* The transport block's rules between options (files are read at start). */
int opts_peers_split(const char *list, char out[][OPTS_PEER_URL_MAX], char *err, size_t errlen)
{
    int n = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *start = p;
        p += len + (p[len] == ',');
        while (len && (*start == ' ' || *start == '\t'))
            start++, len--;
        while (len && (start[len - 1] == ' ' || start[len - 1] == '\t' || start[len - 1] == '/'))
            len--;
        if (!len)
            continue;
        if (n == OPTS_PEERS_MAX || len >= OPTS_PEER_URL_MAX ||
            (strncmp(start, "http://", 7) != 0 && strncmp(start, "https://", 8) != 0)) {
            snprintf(err, errlen, "--peers: '%.*s' %s", (int)(len > 80 ? 80 : len), start,
                     n == OPTS_PEERS_MAX ? "is one peer too many (at most 16)"
                                         : "is not a base URL (http://host:port or https://host:port)");
            return -1;
        }
        memcpy(out[n], start, len);
        out[n][len] = '\0';
        n++;
    }
    return n;
}

static bool opts_peers_check(const char *list, char *err, size_t errlen)
{
    char urls[OPTS_PEERS_MAX][OPTS_PEER_URL_MAX];
    return opts_peers_split(list, urls, err, errlen) >= 0;
}

/* --coordinator and its companions. */
static bool opts_coordinator_check(const tally_opts_t *o, char *err, size_t errlen)
{
    bool any = o->coordinator_cacert[0] || o->coordinator_cert[0] || o->coordinator_key[0] || o->coordinator_user[0] ||
               o->coordinator_password_file[0] || o->advertise_url[0];
    if (!o->coordinator[0]) {
        if (any) {
            snprintf(err, errlen, "--advertise-url and the --coordinator-* options go with --coordinator");
            return false;
        }
        return true;
    }
    char why[300];
    if (etcd_parse_endpoints(o->coordinator, NULL, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "--coordinator: %s (etcd://host:port[,host:port...] or etcds://...)", why);
        return false;
    }
    if (strncmp(o->coordinator, "etcd://", 7) != 0 && strncmp(o->coordinator, "etcds://", 8) != 0) {
        snprintf(err, errlen, "--coordinator: '%s' must start with etcd:// or etcds://", o->coordinator);
        return false;
    }
    if (!o->advertise_url[0] ||
        (strncmp(o->advertise_url, "http://", 7) != 0 && strncmp(o->advertise_url, "https://", 8) != 0)) {
        snprintf(err, errlen, "--coordinator needs --advertise-url http(s)://host:port: how the group and the proxies "
                 "reach this node");
        return false;
    }
    if (o->coordinator_prefix[0] != '/' || strlen(o->coordinator_prefix) < 2) {
        snprintf(err, errlen, "--coordinator-prefix: '%s' must start with / and name something (e.g. /tally/group-a)",
                 o->coordinator_prefix);
        return false;
    }
    if (o->in_memory) {
        snprintf(err, errlen, "--coordinator needs a data directory, not --in-memory (it keeps the epoch there)");
        return false;
    }
    if (o->replica_of[0]) {
        snprintf(err, errlen, "--coordinator and --replica-of: keep one (with --coordinator, etcd names the primary "
                 "every node follows)");
        return false;
    }
    if (!o->coordinator_cert[0] != !o->coordinator_key[0]) {
        snprintf(err, errlen, "--coordinator-cert and --coordinator-key go together");
        return false;
    }
    if (!o->coordinator_user[0] != !o->coordinator_password_file[0]) {
        snprintf(err, errlen, "--coordinator-user and --coordinator-password-file go together");
        return false;
    }
    return true;
}

static bool opts_transport_check(const tally_opts_t *o, char *err, size_t errlen)
{
    if (!o->tls_cert[0] != !o->tls_key[0]) {
        snprintf(err, errlen, "--tls-cert and --tls-key go together (a certificate and its private key)");
        return false;
    }
    if (o->tls_client_ca[0] && !o->tls_cert[0]) {
        snprintf(err, errlen, "--tls-client-ca needs --tls-cert and --tls-key (client certificates are a TLS feature)");
        return false;
    }
    cidr_set_t set;
    char why[160];
    if (!cidr_parse(o->trusted_proxies, &set, why, sizeof(why))) {
        snprintf(err, errlen, "--trusted-proxies: %s", why);
        return false;
    }
    cidr_set_free(&set);
    if ((o->replica_of[0] || o->min_replicas_ack) && o->in_memory) {
        snprintf(err, errlen, "replication (--replica-of, --min-replicas-ack) needs a data directory, not --in-memory");
        return false;
    }
    if (o->min_replicas_ack && !o->journal) {
        snprintf(err, errlen, "--min-replicas-ack needs --journal on (an answer waits for the journal, then for the replicas)");
        return false;
    }
    if (o->replica_of[0] && strncmp(o->replica_of, "http://", 7) != 0 && strncmp(o->replica_of, "https://", 8) != 0) {
        snprintf(err, errlen, "--replica-of: '%s' is not a base URL (http://host:port or https://host:port)", o->replica_of);
        return false;
    }
    if (o->peers[0] && o->in_memory) {
        snprintf(err, errlen, "--peers needs a data directory, not --in-memory (it names a replication group)");
        return false;
    }
    if (!opts_peers_check(o->peers, err, errlen))
        return false;
    if (o->peers[0] && !o->peer_secret_file[0]) {
        snprintf(err, errlen, "--peers needs --peer-secret-file FILE: the group's shared secret, which signs every "
                 "answer a peer gives (make one with: head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE; the "
                 "same file on every node)");
        return false;
    }
    if (o->replica_token[0] && o->replica_token_file[0]) {
        snprintf(err, errlen, "--replica-token and --replica-token-file both give the token: keep one (the file, "
                 "which ps does not show)");
        return false;
    }
    if (!opts_coordinator_check(o, err, errlen))
        return false;
    if (o->repl_backlog < 65536) {
        snprintf(err, errlen, "--repl-backlog: at least 64kb");
        return false;
    }
    return true;
}

opts_action_t opts_parse(tally_opts_t *o, int argc, char **argv, const char **check_file, char *err,
                         size_t errlen)
{
    defaults(o);
    const size_t ndefs = sizeof(defs) / sizeof(defs[0]);
    for (size_t i = 0; i < ndefs; i++) {
        const char *v = getenv(defs[i].env);
        if (v && !set_opt(o, &defs[i], v, err, errlen))
            return OPTS_ERROR;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return OPTS_HELP;
        if (!strcmp(a, "--version"))
            return OPTS_VERSION;
        if (!strcmp(a, "--routes"))
            return OPTS_ROUTES;
        if (!strcmp(a, "--hash-token"))
            return OPTS_HASH_TOKEN;
        if (!strcmp(a, "--check")) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "--check needs a FILE");
                return OPTS_ERROR;
            }
            if (i + 2 < argc) {
                snprintf(err, errlen, "--check takes one FILE; unexpected argument '%s' (check one file at a time)",
                         argv[i + 2]);
                return OPTS_ERROR;
            }
            *check_file = argv[i + 1];
            return OPTS_CHECK;
        }
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s' (see --help)", a);
            return OPTS_ERROR;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const opt_def_t *d = NULL;
        for (size_t j = 0; j < ndefs; j++)
            if (strlen(defs[j].flag) == nlen && !strncmp(defs[j].flag, name, nlen))
                d = &defs[j];
        if (!d) {
            snprintf(err, errlen, "unknown option '%s' (see --help)", a);
            return OPTS_ERROR;
        }
        const char *v;
        if (d->kind == K_FLAG) {
            v = eq ? eq + 1 : "1";
        } else if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "option '%s' needs a value", a);
                return OPTS_ERROR;
            }
            v = argv[++i];
        }
        if (!set_opt(o, d, v, err, errlen))
            return OPTS_ERROR;
    }
    if (o->body_limit == 0 || o->max_url < 256) {
        snprintf(err, errlen, "--max-body must be > 0 and --max-url >= 256");
        return OPTS_ERROR;
    }
    if (o->body_limit > TALLY_MAX_BODY_MAX) {
        snprintf(err, errlen, "--max-body is at most 1gb (a request's journal record must stay within one record)");
        return OPTS_ERROR;
    }
    if (!opts_transport_check(o, err, errlen))
        return OPTS_ERROR;
    if (!o->in_memory && !o->data_dir[0]) {
        snprintf(err, errlen, "--data-dir is empty (use --in-memory to run without files)");
        return OPTS_ERROR;
    }
    return OPTS_RUN;
}

void opts_usage(FILE *out)
{
    fprintf(out,
            "tallyd - rate limiting and analytics primitives over HTTP/JSON\n\n"
            "Usage: tallyd [options]\n"
            "       tallyd --check FILE   verify a snapshot or journal file and print what it holds\n"
            "       tallyd --routes       print the HTTP routes served, with the access class and command of each\n"
            "       tallyd --hash-token   print the SHA-256 (hex) of the token read from stdin, for --tokens\n"
            "       tallyd --version\n\n"
            "Options (each also read from the environment variable shown; flags win):\n");
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        char left[64];
        snprintf(left, sizeof(left), "--%s%s", defs[i].flag, defs[i].kind == K_FLAG ? "" : " V");
        fprintf(out, "  %-24s %-26s %s\n", left, defs[i].env, defs[i].help);
    }
    fprintf(out,
            "\nSignals: SIGTERM/SIGINT stop accepting, finish in-flight requests, snapshot, exit 0;\n"
            "         SIGHUP reloads --config, --rls-config, --tokens, --cluster, the TLS files and\n"
            "         --replica-token-file and --peer-secret-file (as does POST /admin/reload)\n"
            "         and reopens --access-log.\n"
            "Files in --data-dir: snapshot.tly (the latest snapshot), journal.<seq>.tlj (changes\n"
            "since), LOCK (held while tallyd runs).\n");
}
