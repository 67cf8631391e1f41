/*
 * auth.h - who may call what: bearer tokens with scopes and key prefixes
 * (`--tokens FILE`), the way Redis ACLs give users command categories and
 * key patterns (`~tenant:*`).
 *
 * The token file is JSON (api_tokens_parse reads text; service/ reads the
 * file and reloads it on SIGHUP and POST /admin/reload):
 *
 *   {"tokens":[{"name":"gateway","sha256":"<hex SHA-256 of the token>",
 *               "scopes":["ratelimit"],"prefixes":["api:"]}, ...]}
 *
 * Only the SHA-256 of a token is kept (`tallyd --hash-token` prints it);
 * a request's `Authorization: Bearer <token>` is hashed, its digest looked
 * up among the known ones (sorted: a binary search, whose timing can only
 * tell where the digest of a guess sorts - nothing about any token) and the
 * candidate compared in constant time.  Comparing with every digest in
 * constant time instead would cost a comparison per token per request.
 *
 * Every route names an access class (api_access_t in api.h); the scopes a
 * class accepts:
 *
 *   PUBLIC     /healthz, /readyz           no token at all
 *   METRICS    /metrics                    any token (none with --metrics-public)
 *   TOKEN      GET /, /info                any token; /info's details need admin
 *   READ       every GET of data           read
 *   WRITE      every change of data        write
 *   RATELIMIT  /throttle decisions, /hook  ratelimit or write
 *   ADMIN      /admin/..., DELETE /keys/{k} admin
 *   REPLICATE  /replication/snapshot,      replicate (what --replica-token
 *              /replication/log,           presents to a primary and to the
 *              /replication/epoch          --peers; admin does not grant it)
 *
 * replicate is apart from admin both ways: a replica's token, on every
 * node of a group, reads the whole keyspace and its stream but cannot
 * operate, change or promote anything; an operator's admin token does not
 * silently make its holder a replica (nor satisfy --min-replicas-ack with a
 * poller that stores nothing).
 * `prefixes` (optional) restricts every key a request touches: the key
 * handle (api_keys_lock, api/key.c) refuses a key outside them before
 * locking anything, so every path, body, `sources`, `union`, `requests` and
 * policy-resolved key is checked by the same code; GET /keys lists only keys
 * under them.
 *
 * Answers: no token, or one not known -> 401 with WWW-Authenticate: Bearer;
 * a known token without the scope or outside its prefixes -> 403 naming what
 * is missing.  Both come before the handler runs (or, for a key, before it
 * touches one), so a refused request changes nothing and journals nothing.
 * A client address that sent `fail_limit` unknown tokens within a minute
 * gets 429 on every request that needs a token until the sliding minute
 * (core/window.h, the sliding_window algorithm of /throttle) lets it try
 * again.
 *
 * Concurrency: the token set is replaced whole on reload; a request holds a
 * reference to the set it was authenticated with until api_dispatch
 * returns, so a reload never frees a token in use.
 */
#ifndef TALLY_AUTH_H
#define TALLY_AUTH_H

#include <stdatomic.h>

#include "api/api.h"

#define API_SCOPE_READ 1u
#define API_SCOPE_WRITE 2u
#define API_SCOPE_RATELIMIT 4u
#define API_SCOPE_ADMIN 8u
#define API_SCOPE_REPLICATE 16u
#define API_SCOPES_ALL 31u           /* every bit above */

#define API_TOKEN_SHA256_LEN 32
#define API_TOKEN_MAX_LEN 4096       /* longest bearer token accepted */
#define API_TOKENS_MAX 10000         /* tokens in a file */
#define API_TOKEN_PREFIXES_MAX 256   /* prefixes of one token */

struct api_token {
    char name[API_TOKEN_NAME_MAX + 1];
    uint8_t sha256[API_TOKEN_SHA256_LEN];
    unsigned scopes;             /* API_SCOPE_* */
    char **prefixes;             /* NULL when every key is allowed */
    size_t *prefix_len;
    size_t nprefixes;
};

struct api_tokens {
    api_token_t *v;              /* in file order */
    api_token_t **by_digest;     /* the same, sorted by sha256 (the lookup) */
    size_t n;
    _Atomic unsigned refs;
};

/* Parses a token file's text.  Returns the set (one reference, the
 * caller's) or NULL with a message naming the offending member
 * ("tokens[2].scopes[0]: unknown scope ..."); duplicate names or hashes, an
 * unknown member, a bad hash, an empty scope list and an empty prefix are
 * refused, and so is an empty token list (it would refuse every request,
 * admin included) unless the file also holds "deny_all": true. */
api_tokens_t *api_tokens_parse(const char *text, size_t len, char *err, size_t errlen);
/* Drops a reference; the set is freed with its last one.  NULL-safe. */
void api_tokens_release(api_tokens_t *t);

/* The SHA-256 of a token, and its lowercase hex (65 bytes with the NUL). */
void api_token_hash(const char *token, size_t len, uint8_t out[API_TOKEN_SHA256_LEN]);
void api_token_hash_hex(const char *token, size_t len, char out[2 * API_TOKEN_SHA256_LEN + 1]);

/* The authentication state of a server.  fail_limit: unknown tokens a
 * minute from one client address before 429 (0: no limit). */
api_auth_t *api_auth_create(int fail_limit, bool metrics_public);
void api_auth_free(api_auth_t *a);
/* Installs a token set (takes the caller's reference); the previous set is
 * released once no request holds it. */
void api_auth_install(api_auth_t *a, api_tokens_t *t);
size_t api_auth_token_count(api_auth_t *a);

/* The router's one call, after the route is matched: true when the request
 * may go on (then the token set is held until api_auth_done); false with
 * 401, 403 or 429 set and nothing held. */
bool api_auth_check(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void api_auth_done(api_req_t *req);

/* Appends tally_auth_refused_total{reason} (nothing when authentication
 * is off). */
void api_auth_metrics(const api_auth_t *a, wbuf_t *out);

/* Whether the caller may see server details (/info): authentication off,
 * replay, or a token with scope admin. */
bool api_auth_admin(const api_req_t *req);
/* A change's answer is part of the change - the value a counter reaches,
 * the bit a SETBIT replaced, what a BITFIELD SET replaced - so the write
 * scope sees it.  But a request on a write route that only reads (a
 * counter moved by 0, a BITFIELD GET) is a read: true when the caller may
 * read (no tokens, a replayed record, or a token with scope read); else
 * false with 403 naming `what` answered. */
bool api_auth_require_read(const api_req_t *req, api_resp_t *resp, const char *what);
/* Whether the caller's prefixes allow the key (no answer set). */
bool api_auth_key_visible(const api_req_t *req, const char *key, size_t len);

/* Names, for messages, `tallyd --routes` and tests. */
const char *api_access_name(api_access_t c);
/* The scopes that grant a class (0: any token, or none for PUBLIC). */
unsigned api_access_scopes(api_access_t c);

#endif
