/*
 * access.h - who may do what: bearer tokens with scopes and key prefixes
 * (`--tokens FILE`), the way Redis ACLs give users command categories and
 * key patterns (`~tenant:*`).  The checks every protocol shares; how a
 * token arrives (HTTP's Authorization header, RESP's AUTH) and how the file
 * is parsed (api/auth.c) are the front-ends'.
 *
 * Only the SHA-256 of a token is kept (`tallyd --hash-token` prints it); a
 * token presented is hashed, its digest looked up among the known ones
 * (sorted: a binary search, whose timing can only tell where the digest of a
 * guess sorts - nothing about any token) and the candidate compared in
 * constant time.
 *
 * Every operation names an access class; the scopes a class accepts:
 *
 *   PUBLIC     /healthz, /readyz           no token at all
 *   METRICS    /metrics                    any token (none with --metrics-public)
 *   TOKEN      GET /, /info                any token; /info's details need admin
 *   READ       every read of data          read
 *   WRITE      every change of data        write
 *   RATELIMIT  decisions, the gateway hook ratelimit or write
 *   ADMIN      operating the server        admin
 *   REPLICATE  the replication stream      replicate (what --replica-token
 *                                          presents to a primary and to the
 *                                          --peers; admin does not grant it)
 *
 * replicate is apart from admin both ways: a replica's token, on every node
 * of a group, reads the whole keyspace and its stream but cannot operate,
 * change or promote anything; an operator's admin token does not silently
 * make its holder a replica (nor satisfy --min-replicas-ack with a poller
 * that stores nothing).
 *
 * `prefixes` (optional) restricts every key a request touches: the key
 * handle (cmd/keys.h) refuses a key outside them before locking anything,
 * so every key an operation names is checked by the same code.
 *
 * A client address that sent `fail_limit` unknown tokens within a minute
 * gets TOO_MANY_REQUESTS for its unknown tokens until the sliding minute
 * (core/window.h) lets it try again; a valid token from the same address is
 * never refused for others' failures.
 *
 * Concurrency: the token set is replaced whole on reload; a request holds a
 * reference to the set it was identified with until it is answered, so a
 * reload never frees a token in use.
 */
#ifndef TALLY_CMD_ACCESS_H
#define TALLY_CMD_ACCESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cmd.h"

#define CMD_SCOPE_READ 1u
#define CMD_SCOPE_WRITE 2u
#define CMD_SCOPE_RATELIMIT 4u
#define CMD_SCOPE_ADMIN 8u
#define CMD_SCOPE_REPLICATE 16u
#define CMD_SCOPES_ALL 31u           /* every bit above */

#define CMD_TOKEN_NAME_MAX 64        /* longest token name */
#define CMD_TOKEN_SHA256_LEN 32
#define CMD_TOKEN_MAX_LEN 4096       /* longest bearer token accepted */
#define CMD_TOKENS_MAX 10000         /* tokens in a file */
#define CMD_TOKEN_PREFIXES_MAX 256   /* prefixes of one token */

/* Who may run an operation: every operation names one class. */
typedef enum cmd_access {
    CMD_ACCESS_UNSET = 0,        /* not a class: an operation must name one of the others */
    CMD_ACCESS_PUBLIC,           /* never needs a token */
    CMD_ACCESS_METRICS,          /* any token, none with --metrics-public */
    CMD_ACCESS_TOKEN,            /* any valid token */
    CMD_ACCESS_READ,             /* scope read: reads data */
    CMD_ACCESS_WRITE,            /* scope write: changes data */
    CMD_ACCESS_RATELIMIT,        /* scope ratelimit (or write): decisions, the gateway hook */
    CMD_ACCESS_ADMIN,            /* scope admin: operating the server */
    CMD_ACCESS_REPLICATE,        /* scope replicate: the replication stream */
    CMD_ACCESS__COUNT
} cmd_access_t;

struct cmd_token {
    char name[CMD_TOKEN_NAME_MAX + 1];
    uint8_t sha256[CMD_TOKEN_SHA256_LEN];
    unsigned scopes;             /* CMD_SCOPE_* */
    char **prefixes;             /* NULL when every key is allowed */
    size_t *prefix_len;
    size_t nprefixes;
};

struct cmd_tokens {
    cmd_token_t *v;              /* in file order */
    cmd_token_t **by_digest;     /* the same, sorted by sha256 (the lookup) */
    size_t n;
    _Atomic unsigned refs;
};

/* An empty set for n tokens (one reference, the caller's), to be filled
 * (v[0..n), then cmd_tokens_index); NULL when out of memory. */
cmd_tokens_t *cmd_tokens_new(size_t n);
/* Sorts the digests for the lookup, once v[0..n) are filled. */
void cmd_tokens_index(cmd_tokens_t *t);
/* Drops a reference; the set is freed with its last one.  NULL-safe. */
void cmd_tokens_release(cmd_tokens_t *t);

/* The SHA-256 of a token, and its lowercase hex (65 bytes with the NUL). */
void cmd_token_hash(const char *token, size_t len, uint8_t out[CMD_TOKEN_SHA256_LEN]);
void cmd_token_hash_hex(const char *token, size_t len, char out[2 * CMD_TOKEN_SHA256_LEN + 1]);

/* Names, for messages, `tallyd --routes` and tests. */
const char *cmd_access_name(cmd_access_t c);
/* The scopes that grant a class (0: any token, or none for PUBLIC). */
unsigned cmd_access_scopes(cmd_access_t c);
/* The name of a scope bit ("read"...), and the bit of a name (0: none). */
const char *cmd_scope_name(unsigned bit);
unsigned cmd_scope_bit(const char *name, size_t len);

/* ------------------------------------------------------------------------ */
/* The server's state                                                       */
/* ------------------------------------------------------------------------ */

/* fail_limit: unknown tokens a minute from one client address before they
 * are held off (0: no limit). */
cmd_auth_t *cmd_auth_create(int fail_limit, bool metrics_public);
void cmd_auth_free(cmd_auth_t *a);
/* Installs a token set (takes the caller's reference); the previous set is
 * released once no request holds it. */
void cmd_auth_install(cmd_auth_t *a, cmd_tokens_t *t);
size_t cmd_auth_token_count(cmd_auth_t *a);
/* Changes with every cmd_auth_install: a connection that identified its
 * caller once (the Redis port's AUTH) sees a reload by it. */
uint64_t cmd_auth_generation(cmd_auth_t *a);
/* The token with old's secret in the installed set (its scopes and
 * prefixes as reloaded), and the set (a reference to release); false when
 * the reload removed it. */
bool cmd_auth_refind(cmd_auth_t *a, const cmd_token_t *old, cmd_tokens_t **set, const cmd_token_t **token);
bool cmd_auth_metrics_public(const cmd_auth_t *a);

/* The refusals counted for /metrics. */
typedef enum cmd_refusal { CMD_REFUSED_UNAUTHORIZED, CMD_REFUSED_SCOPE, CMD_REFUSED_PREFIX, CMD_REFUSED_THROTTLED,
                           CMD_REFUSED__COUNT } cmd_refusal_t;
void cmd_auth_count_refusal(cmd_refusal_t why);
/* Appends tally_auth_refused_total{reason} (nothing when a is NULL). */
void cmd_auth_metrics(const cmd_auth_t *a, wbuf_t *out);

/* Identifies the caller by the token it presents (tok NULL: it presented
 * something that is not a token).  True with *token (and the set it
 * belongs to, a reference the caller releases with cmd_tokens_release once
 * answered); false with err set: UNAUTHORIZED for an unknown token (the
 * failure counted against the client's address, which client_addr(ud)
 * gives only then: computing it costs), or TOO_MANY_REQUESTS when that
 * address already used up its failures (err.retry_after). */
bool cmd_auth_identify(cmd_auth_t *a, const char *tok, size_t tlen, const char *(*client_addr)(void *ud), void *ud,
                       int64_t now_ns, cmd_tokens_t **set, const cmd_token_t **token, cmd_err_t *err);

/* ------------------------------------------------------------------------ */
/* The checks of a request                                                  */
/* ------------------------------------------------------------------------ */

/* Whether ctx's token grants `access`: false with FORBIDDEN naming the
 * scope (err.scope) and the request (ctx->what). */
bool cmd_access_check(cmd_ctx_t *ctx, cmd_access_t access);
/* Whether the caller may see server details: authentication off, replay,
 * or a token with scope admin. */
bool cmd_access_admin(const cmd_ctx_t *ctx);
/* A change's answer is part of the change - the value a counter reaches,
 * the bit a SETBIT replaced, what a BITFIELD SET replaced - so the write
 * scope sees it.  But a request that changes nothing and only reads (a
 * counter moved by 0, a BITFIELD GET) is a read: true when the caller may
 * read (no tokens, replay, or a token with scope read); else false with
 * FORBIDDEN naming `what`. */
bool cmd_require_read(cmd_ctx_t *ctx, const char *what);
/* Whether the caller's prefixes allow the key (no error set). */
bool cmd_key_visible(const cmd_ctx_t *ctx, const char *key, size_t len);
/* The same, false with FORBIDDEN naming the key and the token's prefixes. */
bool cmd_key_allowed(cmd_ctx_t *ctx, const char *key, size_t len);
bool cmd_keys_allowed(cmd_ctx_t *ctx, const ks_key_t *keys, size_t n);

#endif
