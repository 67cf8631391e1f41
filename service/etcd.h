/* A small client of etcd's v3 API through its HTTP/JSON gateway (etcd 3.4+:
 * POST /v3/kv/range, /v3/kv/put, /v3/kv/deleterange, /v3/kv/txn,
 * /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke, /v3/watch,
 * /v3/auth/authenticate), with libcurl and jansson and nothing else of tally.
 *
 * Endpoints: a list of members ("host:port,host:port", or the URL form
 * etcd://host:port,host:port / etcds://... for TLS).  A request goes to the
 * member that answered last; on a transport error, a timeout, or an answer
 * meaning "this member cannot serve now" (gRPC Unavailable / DeadlineExceeded
 * / an HTTP 5xx) it is sent to the next member, each member tried at most once
 * per call.  An answer that is an error of the request itself (bad argument,
 * lease not found, permission denied...) is returned, not retried.
 *
 * Credentials: with a user and password the client authenticates
 * (/v3/auth/authenticate) on first use and sends the token in the
 * Authorization header; a token etcd no longer accepts is renewed once and
 * the request sent again.  TLS: a CA file to verify the members, and a client
 * certificate and key for etcd's --client-cert-auth.
 *
 * Keys and values are byte strings (pointer + length; NUL bytes allowed);
 * revisions, lease ids and TTLs are int64.  Every call returns 0 on success or
 * -1 with a message in the client's error buffer (etcd_error), and never
 * leaves half-filled results allocated.  A client may be used from several
 * threads at once (each call has its own connection; the shared state is
 * locked); etcd_watch blocks its caller until its callback says stop.
 */
#ifndef TALLY_ETCD_H
#define TALLY_ETCD_H

#include <stddef.h>
#include <stdint.h>

typedef struct etcd_client etcd_client_t;

typedef struct {
    /* "host:port[,host:port...]" or "etcd://..." / "etcds://..." (the
     * latter sets tls).  Required. */
    const char *endpoints;
    int tls;                 /* https to the members */
    const char *cacert;      /* PEM file of the CA that signed the members' certificates (NULL: system CAs) */
    const char *cert;        /* client certificate (PEM) for --client-cert-auth, with key */
    const char *key;
    const char *user;        /* etcd user and password (NULL: no authentication) */
    const char *password;
    long timeout_ms;         /* whole-request bound per member tried (0: 2000) */
    long connect_timeout_ms; /* TCP/TLS connect bound per member (0: min(timeout, 1000)) */
} etcd_config_t;

/* One key-value as etcd returns it. */
typedef struct {
    char *key;
    size_t key_len;
    char *value;
    size_t value_len;
    int64_t create_revision;
    int64_t mod_revision;
    int64_t version;
    int64_t lease;
} etcd_kv_t;

/* The result of a range (and of one operation of a transaction). */
typedef struct {
    etcd_kv_t *kvs;
    size_t n;
    int64_t revision; /* the store's revision when the answer was made */
    int64_t count;    /* range: keys matched; delete: keys deleted */
} etcd_range_t;

/* Compare of a transaction: target of key <result> the number (or value). */
typedef enum { ETCD_TARGET_VERSION, ETCD_TARGET_CREATE, ETCD_TARGET_MOD, ETCD_TARGET_VALUE, ETCD_TARGET_LEASE } etcd_target_t;
typedef enum { ETCD_CMP_EQUAL, ETCD_CMP_GREATER, ETCD_CMP_LESS, ETCD_CMP_NOT_EQUAL } etcd_cmp_op_t;
typedef struct {
    const char *key;
    size_t key_len;
    etcd_target_t target;
    etcd_cmp_op_t op;
    int64_t number;    /* VERSION, CREATE, MOD, LEASE */
    const char *value; /* VALUE */
    size_t value_len;
} etcd_cmp_t;

/* Operation of a transaction. */
typedef enum { ETCD_OP_GET, ETCD_OP_PUT, ETCD_OP_DELETE } etcd_op_kind_t;
typedef struct {
    etcd_op_kind_t kind;
    const char *key;
    size_t key_len;
    int prefix;        /* GET, DELETE: every key starting with key */
    const char *value; /* PUT */
    size_t value_len;
    int64_t lease;     /* PUT: 0 for none */
} etcd_op_t;

/* The result of a transaction: which branch ran, the store's revision after
 * it, and one etcd_range_t per operation of that branch (GET: the keys;
 * DELETE: count = keys deleted; PUT: empty). */
typedef struct {
    int succeeded;
    int64_t revision;
    etcd_range_t *results;
    size_t n;
} etcd_txn_result_t;

/* A watch event. */
typedef enum { ETCD_EVENT_PUT, ETCD_EVENT_DELETE } etcd_event_kind_t;
typedef struct {
    etcd_event_kind_t kind;
    const etcd_kv_t *kv; /* for DELETE: key and mod_revision only */
} etcd_event_t;

/* Parses an endpoint list (see etcd_config_t.endpoints) without connecting:
 * 0 if it is valid; *tls (may be NULL) set from the scheme. */
int etcd_parse_endpoints(const char *endpoints, int *tls, char *err, size_t errlen);

/* A client of the members listed (no request is made yet).  NULL with a
 * message in err when the configuration is invalid. */
etcd_client_t *etcd_open(const etcd_config_t *cfg, char *err, size_t errlen);
void etcd_close(etcd_client_t *c);

/* The message of the calling thread's last failed call (of any client). */
const char *etcd_error(const etcd_client_t *c);

/* Reads one key (*found 0 if absent; kv filled when found; free with
 * etcd_kv_free).  *revision (may be NULL): the store's revision. */
int etcd_get(etcd_client_t *c, const char *key, size_t key_len, etcd_kv_t *kv, int *found, int64_t *revision);
/* Every key starting with prefix, in key order (free with etcd_range_free). */
int etcd_get_prefix(etcd_client_t *c, const char *prefix, size_t prefix_len, etcd_range_t *out);
/* Writes a key (lease 0: none).  *revision (may be NULL): the store's
 * revision after the write. */
int etcd_put(etcd_client_t *c, const char *key, size_t key_len, const char *value, size_t value_len,
             int64_t lease, int64_t *revision);
/* Deletes a key (or every key starting with it); *deleted (may be NULL). */
int etcd_delete(etcd_client_t *c, const char *key, size_t key_len, int prefix, int64_t *deleted);
/* A transaction: if every compare holds, the success operations run, else
 * the failure ones (free with etcd_txn_free). */
int etcd_txn(etcd_client_t *c, const etcd_cmp_t *cmps, size_t ncmp, const etcd_op_t *success, size_t nsuccess,
             const etcd_op_t *failure, size_t nfailure, etcd_txn_result_t *out);

/* Leases.  grant: a lease of ttl seconds (*granted_ttl may be NULL).
 * keepalive: renews it; *ttl (may be NULL) is the TTL granted again, 0 when
 * the lease no longer exists (then the call still returns 0).  revoke: ends
 * it and deletes its keys (a lease already gone is not an error). */
int etcd_lease_grant(etcd_client_t *c, int64_t ttl, int64_t *id, int64_t *granted_ttl);
int etcd_lease_keepalive(etcd_client_t *c, int64_t id, int64_t *ttl);
int etcd_lease_revoke(etcd_client_t *c, int64_t id);

/* Watches a key (or prefix) from start_revision (0: from now).  Blocks,
 * calling cb for each event in order, until cb returns nonzero (then 0 is
 * returned), *stop becomes nonzero (checked about once a second; 0), or
 * the stream fails (-1; the caller watches again from the revision after the
 * last event it saw).  *next_revision (may be NULL) is set to the revision
 * after the last event delivered, for resuming.  The watch is cancelled by
 * etcd when its revision was compacted (-1 with that message). */
typedef int (*etcd_watch_cb)(void *arg, const etcd_event_t *ev, int64_t revision);
int etcd_watch(etcd_client_t *c, const char *key, size_t key_len, int prefix, int64_t start_revision,
               etcd_watch_cb cb, void *arg, volatile int *stop, int64_t *next_revision);

void etcd_kv_free(etcd_kv_t *kv);
void etcd_range_free(etcd_range_t *r);
void etcd_txn_free(etcd_txn_result_t *t);

#endif
