/*
 * options.h - tallyd's settings: defaults, then TALLY_* environment
 * variables, then command-line flags (the last word wins).
 */
#ifndef TALLY_OPTIONS_H
#define TALLY_OPTIONS_H

/* The largest --max-body: a request's journal record (URL, query, body)
 * must stay below the journal's record bound (JOURNAL_MAX_RECORD). */
#define TALLY_MAX_BODY_MAX ((size_t)1 << 30)

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/keyspace.h"

typedef enum fsync_mode { FSYNC_ALWAYS, FSYNC_EVERYSEC, FSYNC_NO } fsync_mode_t;

typedef struct tally_opts {
    int port;                    /* --port, TALLY_PORT: 8080 */
    int grpc_port;               /* --grpc-port, TALLY_GRPC_PORT: gRPC over HTTP/2 (service/grpc_server.h); -1 = off (default) */
    int resp_port;               /* --resp-port, TALLY_RESP_PORT: the Redis protocol's port; -1 = off (default) */
    char bind[64];               /* --bind, TALLY_BIND: 127.0.0.1 */
    int threads;                 /* --threads, TALLY_THREADS: online cores */
    char data_dir[512];          /* --data-dir, TALLY_DATA_DIR: ./data */
    bool in_memory;              /* --in-memory, TALLY_IN_MEMORY: no files at all */
    size_t body_limit;           /* --max-body, TALLY_MAX_BODY: 1 MiB, at most TALLY_MAX_BODY_MAX */
    size_t max_url;              /* --max-url, TALLY_MAX_URL: 16 KiB */
    int conn_timeout;            /* --timeout, TALLY_TIMEOUT: idle connection seconds, 60 */
    int max_connections;         /* --max-connections, TALLY_MAX_CONNECTIONS: 10000 */
    int max_conn_per_ip;         /* --max-connections-per-ip, TALLY_MAX_CONNECTIONS_PER_IP: 0 = half of max-connections */
    int header_timeout;          /* --header-timeout, TALLY_HEADER_TIMEOUT: 10 s for a complete request head */
    int shutdown_timeout;        /* --shutdown-timeout, TALLY_SHUTDOWN_TIMEOUT: 10 s for in-flight requests */
    unsigned shard_bits;         /* --shards, TALLY_SHARDS: 256 (power of two) */
    uint64_t maxmemory;          /* --maxmemory, TALLY_MAXMEMORY: 0 = unlimited */
    ks_evict_policy_t policy;    /* --maxmemory-policy, TALLY_MAXMEMORY_POLICY: noeviction */
    uint64_t max_value;          /* --max-value-size, TALLY_MAX_VALUE_SIZE: 512 MiB a key's value, 0 = none */
    uint64_t max_answer;         /* --max-answer-size, TALLY_MAX_ANSWER_SIZE: 64 MiB an answer, 0 = none */
    int snapshot_interval;       /* --snapshot-interval, TALLY_SNAPSHOT_INTERVAL: 60 s, 0 = never periodic */
    bool journal;                /* --journal on|off, TALLY_JOURNAL: on */
    fsync_mode_t fsync;          /* --fsync always|everysec|no, TALLY_FSYNC: everysec */
    int journal_timeout;         /* --journal-timeout, TALLY_JOURNAL_TIMEOUT: 5 s before a change that cannot be journaled gets 503 */
    char config[512];            /* --config, TALLY_CONFIG: policies file, optional */
    char rls_config[512];        /* --rls-config, TALLY_RLS_CONFIG: envoyproxy/ratelimit's YAML (file or directory) */
    bool rls_charge_all;         /* --rls-charge-all, TALLY_RLS_CHARGE_ALL: envoyproxy/ratelimit's charging */
    bool rls_response_headers;   /* --rls-response-headers, TALLY_RLS_RESPONSE_HEADERS: x-ratelimit-* */
    char pid_file[512];          /* --pid-file, TALLY_PID_FILE: optional */
    int log_level;               /* --log-level, TALLY_LOG_LEVEL: info */
    /* Transport and browsers (issue 15; see service/tls.h, api/guard.h, core/cidr.h) */
    char tls_cert[512];          /* --tls-cert, TALLY_TLS_CERT: PEM certificate chain; serves HTTPS only */
    char tls_key[512];           /* --tls-key, TALLY_TLS_KEY: PEM private key of --tls-cert */
    char tls_client_ca[512];     /* --tls-client-ca, TALLY_TLS_CLIENT_CA: PEM CAs; clients must present a cert */
    char allow_origin[1024];     /* --allow-origin, TALLY_ALLOW_ORIGIN: browser origins allowed (CORS), default none */
    char allow_host[1024];       /* --allow-host, TALLY_ALLOW_HOST: Host names accepted besides IPs and localhost */
    char trusted_proxies[1024];  /* --trusted-proxies, TALLY_TRUSTED_PROXIES: CIDRs whose X-Forwarded-For is believed */
    /* Authentication (api/auth.h, docs/security.md). */
    char tokens[512];            /* --tokens, TALLY_TOKENS: token file; none = no authentication */
    bool metrics_public;         /* --metrics-public, TALLY_METRICS_PUBLIC: /metrics without a token */
    char cluster[512];           /* --cluster, TALLY_CLUSTER: the cluster map file, or etcd[:PREFIX]; none = not in a cluster */
    char cluster_node[64];       /* --cluster-node, TALLY_CLUSTER_NODE: this node's name in the map */
    bool haproxy_config;         /* --haproxy-config: print the HAProxy configuration of --cluster and exit */
    bool haproxy_slots;          /* --haproxy-slots: print HAProxy's slot map file of --cluster and exit */
    bool haproxy_lua;            /* --haproxy-lua: print the configuration's Lua slot converter and exit */
    char haproxy_map[512];       /* --haproxy-map: the slot map file that configuration reads */
    char haproxy_socket[512];    /* --haproxy-socket: HAProxy's admin socket in that configuration */
    bool insecure_no_auth;       /* --insecure-no-auth, TALLY_INSECURE_NO_AUTH: serve a non-loopback
                                    address without --tokens */
    int auth_fail_limit;         /* --auth-fail-limit, TALLY_AUTH_FAIL_LIMIT: unknown tokens a minute
                                    per client address before 429; 10, 0 = no limit */
    char access_log[512];        /* --access-log, TALLY_ACCESS_LOG: FILE or - (stdout); none */
    /* Replication (service/repl.h, docs/replication.md). */
    char replica_of[512];        /* --replica-of, TALLY_REPLICA_OF: the primary's base URL; none = primary */
    char replica_token[256];     /* --replica-token, TALLY_REPLICA_TOKEN: a replicate token of the primary
                                    (visible in ps: prefer the file) */
    char replica_token_file[512];  /* --replica-token-file, TALLY_REPLICA_TOKEN_FILE: the same, read from a
                                      file (trailing newline trimmed; re-read on reload) */
    char peer_secret_file[512];  /* --peer-secret-file, TALLY_PEER_SECRET_FILE: the replication group's shared
                                    secret (>= 32 bytes) that signs peers' answers; required with --peers */
    size_t repl_backlog;         /* --repl-backlog, TALLY_REPL_BACKLOG: 64 MiB of records for reconnects */
    int min_replicas_ack;        /* --min-replicas-ack, TALLY_MIN_REPLICAS_ACK: 0 = asynchronous */
    int min_replicas_timeout;    /* --min-replicas-timeout, TALLY_MIN_REPLICAS_TIMEOUT: 1000 ms */
    char peers[2048];            /* --peers, TALLY_PEERS: the other nodes of the replication group,
                                    comma-separated base URLs, asked for /info's read-only view of the group */
    /* The coordinator (service/coord.h): failover through etcd. */
    char coordinator[1024];      /* --coordinator, TALLY_COORDINATOR: etcd://host:port[,...] or etcds://...; none */
    char coordinator_prefix[256];  /* --coordinator-prefix, TALLY_COORDINATOR_PREFIX: the group's keys; /tally */
    int coordinator_ttl;         /* --coordinator-ttl, TALLY_COORDINATOR_TTL: the lease's seconds; 5 */
    char advertise_url[512];     /* --advertise-url, TALLY_ADVERTISE_URL: how the group and proxies reach this node */
    char coordinator_cacert[512];  /* --coordinator-cacert: CA of etcd's member certificates */
    char coordinator_cert[512];  /* --coordinator-cert, --coordinator-key: client certificate for etcd */
    char coordinator_key[512];
    char coordinator_user[128];  /* --coordinator-user, --coordinator-password-file: etcd credentials */
    char coordinator_password_file[512];
} tally_opts_t;

typedef enum opts_action {
    OPTS_RUN,
    OPTS_HELP,
    OPTS_VERSION,
    OPTS_ROUTES,
    OPTS_CHECK,
    OPTS_HASH_TOKEN,
    OPTS_ERROR
} opts_action_t;

/* Fills *o from defaults, environment and argv.  For OPTS_CHECK, *check_file
 * is the file to verify; for OPTS_ERROR, err holds the message. */
opts_action_t opts_parse(tally_opts_t *o, int argc, char **argv, const char **check_file, char *err,
                         size_t errlen);
void opts_usage(FILE *out);

#define OPTS_PEERS_MAX 16
#define OPTS_PEER_URL_MAX 512
/* Splits --peers (comma-separated base URLs) into out[], trailing '/'
 * removed.  Returns how many, or -1 with err when an entry is not an
 * http(s) URL, is too long, or there are more than OPTS_PEERS_MAX. */
int opts_peers_split(const char *list, char out[][OPTS_PEER_URL_MAX], char *err, size_t errlen);
const char *fsync_mode_name(fsync_mode_t m);

#endif
