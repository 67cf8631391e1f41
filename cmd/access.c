/*
 * access.c - tokens, scopes and key prefixes; see access.h for the
 * contract.  The time and the client address come with the request.
 */
#include "cmd/access.h"

#include <nettle/sha2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/window.h"

/* ------------------------------------------------------------------------ */
/* Names                                                                    */
/* ------------------------------------------------------------------------ */

static const struct {
    unsigned bit;
    const char *name;
} scope_names[] = {
    { CMD_SCOPE_READ, "read" },
    { CMD_SCOPE_WRITE, "write" },
    { CMD_SCOPE_RATELIMIT, "ratelimit" },
    { CMD_SCOPE_ADMIN, "admin" },
    { CMD_SCOPE_REPLICATE, "replicate" },
};
#define NSCOPES (sizeof(scope_names) / sizeof(scope_names[0]))

static const char *const access_names[CMD_ACCESS__COUNT] = {
    [CMD_ACCESS_UNSET] = "unset",   [CMD_ACCESS_PUBLIC] = "public", [CMD_ACCESS_METRICS] = "metrics",
    [CMD_ACCESS_TOKEN] = "token",   [CMD_ACCESS_READ] = "read",     [CMD_ACCESS_WRITE] = "write",
    [CMD_ACCESS_RATELIMIT] = "ratelimit", [CMD_ACCESS_ADMIN] = "admin", [CMD_ACCESS_REPLICATE] = "replicate",
};

const char *cmd_access_name(cmd_access_t c)
{
    return (unsigned)c < CMD_ACCESS__COUNT ? access_names[c] : "unset";
}

unsigned cmd_access_scopes(cmd_access_t c)
{
    switch (c) {
    case CMD_ACCESS_READ: return CMD_SCOPE_READ;
    case CMD_ACCESS_WRITE: return CMD_SCOPE_WRITE;
    case CMD_ACCESS_RATELIMIT: return CMD_SCOPE_RATELIMIT | CMD_SCOPE_WRITE;
    case CMD_ACCESS_ADMIN: return CMD_SCOPE_ADMIN;
    case CMD_ACCESS_REPLICATE: return CMD_SCOPE_REPLICATE;
    default: return 0;
    }
}

const char *cmd_scope_name(unsigned bit)
{
    for (size_t k = 0; k < NSCOPES; k++)
        if (bit & scope_names[k].bit)
            return scope_names[k].name;
    return NULL;
}

unsigned cmd_scope_bit(const char *name, size_t len)
{
    for (size_t k = 0; k < NSCOPES; k++)
        if (strlen(scope_names[k].name) == len && memcmp(scope_names[k].name, name, len) == 0)
            return scope_names[k].bit;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Refusals, for /metrics                                                   */
/* ------------------------------------------------------------------------ */

/* Process-wide, as the route counters of service/metrics.c: one server per
 * process. */
static const char *const refused_names[CMD_REFUSED__COUNT] = { "unauthorized", "scope", "prefix", "throttled" };
static _Atomic uint64_t refused[CMD_REFUSED__COUNT];

void cmd_auth_count_refusal(cmd_refusal_t why) { atomic_fetch_add_explicit(&refused[why], 1, memory_order_relaxed); }

void cmd_auth_metrics(const cmd_auth_t *a, wbuf_t *out)
{
    if (!a)
        return;
    static const char head[] = "# HELP tally_auth_refused_total Requests refused by authentication: no or an unknown "
                               "token (401), a scope or a key prefix the token lacks (403), too many unknown tokens "
                               "from one address (429).\n"
                               "# TYPE tally_auth_refused_total counter\n";
    wbuf_put_bytes(out, head, sizeof(head) - 1);
    for (int i = 0; i < CMD_REFUSED__COUNT; i++) {
        char line[96];
        int n = snprintf(line, sizeof(line), "tally_auth_refused_total{reason=\"%s\"} %llu\n", refused_names[i],
                         (unsigned long long)atomic_load_explicit(&refused[i], memory_order_relaxed));
        wbuf_put_bytes(out, line, (size_t)n);
    }
}

/* ------------------------------------------------------------------------ */
/* Tokens                                                                   */
/* ------------------------------------------------------------------------ */

void cmd_token_hash(const char *token, size_t len, uint8_t out[CMD_TOKEN_SHA256_LEN])
{
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, len, (const uint8_t *)token);
    sha256_digest(&c, CMD_TOKEN_SHA256_LEN, out);
}

void cmd_token_hash_hex(const char *token, size_t len, char out[2 * CMD_TOKEN_SHA256_LEN + 1])
{
    uint8_t d[CMD_TOKEN_SHA256_LEN];
    cmd_token_hash(token, len, d);
    for (size_t i = 0; i < CMD_TOKEN_SHA256_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

cmd_tokens_t *cmd_tokens_new(size_t n)
{
    cmd_tokens_t *t = calloc(1, sizeof(*t));
    if (!t || !(t->v = calloc(n ? n : 1, sizeof(*t->v))) || !(t->by_digest = calloc(n ? n : 1, sizeof(*t->by_digest)))) {
        if (t)
            free(t->v);
        free(t);
        return NULL;
    }
    atomic_init(&t->refs, 1);
    return t;
}

static void tokens_free(cmd_tokens_t *t)
{
    for (size_t i = 0; i < t->n; i++) {
        for (size_t j = 0; j < t->v[i].nprefixes; j++)
            free(t->v[i].prefixes[j]);
        free(t->v[i].prefixes);
        free(t->v[i].prefix_len);
    }
    free(t->v);
    free(t->by_digest);
    free(t);
}

void cmd_tokens_release(cmd_tokens_t *t)
{
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        tokens_free(t);
}

static int by_digest_cmp(const void *a, const void *b)
{
    const cmd_token_t *x = *(const cmd_token_t *const *)a, *y = *(const cmd_token_t *const *)b;
    return memcmp(x->sha256, y->sha256, CMD_TOKEN_SHA256_LEN);
}

void cmd_tokens_index(cmd_tokens_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        t->by_digest[i] = &t->v[i];
    qsort(t->by_digest, t->n, sizeof(*t->by_digest), by_digest_cmp);
}

/* Whether two digests are equal, in time independent of where they differ:
 * the differences of all four words are OR-ed before one test (nettle's
 * memeql_sec does the same a byte at a time, with a volatile read each,
 * ~75 ns here against ~2). */
static bool digest_equal(const uint8_t a[CMD_TOKEN_SHA256_LEN], const uint8_t b[CMD_TOKEN_SHA256_LEN])
{
    uint64_t diff = 0;
    for (size_t i = 0; i < CMD_TOKEN_SHA256_LEN; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        diff |= x ^ y;
    }
    return diff == 0;
}

/* The token whose digest is d: a binary search of the digests (what its
 * timing could tell is where a SHA-256 digest of the guess sorts, which says
 * nothing of a token), then the one candidate compared in constant time. */
static const cmd_token_t *token_find(const cmd_tokens_t *t, const uint8_t d[CMD_TOKEN_SHA256_LEN])
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(t->by_digest[mid]->sha256, d, CMD_TOKEN_SHA256_LEN) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->n && digest_equal(t->by_digest[lo]->sha256, d))
        return t->by_digest[lo];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Failed attempts per client address                                      */
/* ------------------------------------------------------------------------ */

#define FAIL_SLOTS 1024              /* addresses remembered; the oldest is forgotten first */
#define FAIL_PROBE 8
#define FAIL_PERIOD_NS (60 * INT64_C(1000000000))

typedef struct fail_slot {
    char addr[48];
    window_state_t st;
} fail_slot_t;

struct cmd_auth {
    pthread_mutex_t mu;              /* guards `tokens` (the pointer; the set is immutable) */
    cmd_tokens_t *tokens;
    _Atomic uint64_t generation;     /* installs so far */
    bool metrics_public;
    window_params_t fail;            /* max_count 0: no limit */
    pthread_mutex_t fail_mu;
    _Atomic int64_t last_fail_ns;    /* no lookup at all when nothing failed lately */
    fail_slot_t slots[FAIL_SLOTS];
};

static size_t addr_hash(const char *a)
{
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a: spreads addresses, no secret needed */
    for (; *a; a++)
        h = (h ^ (unsigned char)*a) * 1099511628211ULL;
    return (size_t)(h % FAIL_SLOTS);
}

/* The slot of addr; with `create`, a free or the stalest slot is taken.
 * Called under fail_mu. */
static fail_slot_t *fail_slot(cmd_auth_t *a, const char *addr, bool create)
{
    size_t h = addr_hash(addr);
    fail_slot_t *victim = NULL;
    for (size_t i = 0; i < FAIL_PROBE; i++) {
        fail_slot_t *s = &a->slots[(h + i) % FAIL_SLOTS];
        if (strcmp(s->addr, addr) == 0)
            return s;
        if (!victim || s->st.start < victim->st.start)
            victim = s;
    }
    if (!create)
        return NULL;
    snprintf(victim->addr, sizeof(victim->addr), "%s", addr);
    memset(&victim->st, 0, sizeof(victim->st));
    return victim;
}

/* True when the address has used up its failures; *retry_ns is when it may
 * try again. */
static bool fail_blocked(cmd_auth_t *a, const char *addr, int64_t now_ns, int64_t *retry_ns)
{
    int64_t last = atomic_load_explicit(&a->last_fail_ns, memory_order_relaxed);
    if (a->fail.max_count == 0 || last == 0 || now_ns - last > 2 * FAIL_PERIOD_NS)
        return false;
    rl_result_t r = { .allowed = true };
    int64_t expire;
    pthread_mutex_lock(&a->fail_mu);
    fail_slot_t *s = fail_slot(a, addr, false);
    if (s) {
        window_state_t probe = s->st;   /* asking changes nothing */
        sliding_window_update(&a->fail, &probe, now_ns, 1, &r, &expire);
    }
    pthread_mutex_unlock(&a->fail_mu);
    *retry_ns = r.retry_after_ns;
    return !r.allowed;
}

static void fail_record(cmd_auth_t *a, const char *addr, int64_t now_ns)
{
    if (a->fail.max_count == 0)
        return;
    rl_result_t r;
    int64_t expire;
    pthread_mutex_lock(&a->fail_mu);
    sliding_window_update(&a->fail, &fail_slot(a, addr, true)->st, now_ns, 1, &r, &expire);
    pthread_mutex_unlock(&a->fail_mu);
    atomic_store_explicit(&a->last_fail_ns, now_ns, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* The server's state                                                       */
/* ------------------------------------------------------------------------ */

cmd_auth_t *cmd_auth_create(int fail_limit, bool metrics_public)
{
    cmd_auth_t *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->fail_mu, NULL);
    a->metrics_public = metrics_public;
    a->fail.max_count = fail_limit > 0 ? fail_limit : 0;
    a->fail.period_ns = FAIL_PERIOD_NS;
    return a;
}

void cmd_auth_free(cmd_auth_t *a)
{
    if (!a)
        return;
    cmd_tokens_release(a->tokens);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->fail_mu);
    free(a);
}

void cmd_auth_install(cmd_auth_t *a, cmd_tokens_t *t)
{
    pthread_mutex_lock(&a->mu);
    cmd_tokens_t *old = a->tokens;
    a->tokens = t;
    atomic_fetch_add_explicit(&a->generation, 1, memory_order_release);
    pthread_mutex_unlock(&a->mu);
    cmd_tokens_release(old);
}

static cmd_tokens_t *tokens_acquire(cmd_auth_t *a)
{
    pthread_mutex_lock(&a->mu);
    cmd_tokens_t *t = a->tokens;
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&a->mu);
    return t;
}

size_t cmd_auth_token_count(cmd_auth_t *a)
{
    cmd_tokens_t *t = tokens_acquire(a);
    size_t n = t ? t->n : 0;
    cmd_tokens_release(t);
    return n;
}

uint64_t cmd_auth_generation(cmd_auth_t *a) { return atomic_load_explicit(&a->generation, memory_order_acquire); }

bool cmd_auth_refind(cmd_auth_t *a, const cmd_token_t *old, cmd_tokens_t **set, const cmd_token_t **token)
{
    cmd_tokens_t *s = tokens_acquire(a);
    const cmd_token_t *t = s ? token_find(s, old->sha256) : NULL;
    if (!t) {
        cmd_tokens_release(s);
        return false;
    }
    *set = s;
    *token = t;
    return true;
}

bool cmd_auth_metrics_public(const cmd_auth_t *a) { return a->metrics_public; }

bool cmd_auth_identify(cmd_auth_t *a, const char *tok, size_t tlen, const char *(*client_addr)(void *ud), void *ud,
                       int64_t now_ns, cmd_tokens_t **set, const cmd_token_t **token, cmd_err_t *err)
{
    uint8_t d[CMD_TOKEN_SHA256_LEN];
    if (tok)
        cmd_token_hash(tok, tlen, d);
    cmd_tokens_t *s = tok ? tokens_acquire(a) : NULL;
    const cmd_token_t *t = s ? token_find(s, d) : NULL;
    if (t) {
        *set = s;
        *token = t;
        return true;
    }
    cmd_tokens_release(s);
    /* Only failures are held off: a valid token is never refused for what
     * others behind the same address (a gateway, a NAT) sent. */
    const char *addr = client_addr ? client_addr(ud) : NULL;
    if (!addr)
        addr = "";
    int64_t retry_ns;
    if (fail_blocked(a, addr, now_ns, &retry_ns)) {
        cmd_auth_count_refusal(CMD_REFUSED_THROTTLED);
        int64_t sec = rl_ceil_div(retry_ns, INT64_C(1000000000));
        cmd_err_set(err, CMD_E_TOO_MANY_REQUESTS, NULL,
                    "too many requests with unknown tokens from this address; retry in %lld s",
                    (long long)(sec > 0 ? sec : 1));
        err->retry_after = (int)(sec > 0 ? sec : 1);
        return false;
    }
    fail_record(a, addr, now_ns);
    cmd_auth_count_refusal(CMD_REFUSED_UNAUTHORIZED);
    cmd_err_set(err, CMD_E_UNAUTHORIZED, NULL, "%s",
                tok ? "unknown token" : "the Authorization header must be: Bearer <token>");
    return false;
}

/* ------------------------------------------------------------------------ */
/* The checks of a request                                                  */
/* ------------------------------------------------------------------------ */

/* "DELETE /throttle/{key}": what the request is called in messages. */
static void what_of(const cmd_ctx_t *ctx, char *out, size_t n)
{
    snprintf(out, n, "%s%s%s", ctx->what_verb, ctx->what_verb[0] ? " " : "", ctx->what_name);
}

bool cmd_access_check(cmd_ctx_t *ctx, cmd_access_t access)
{
    unsigned need = cmd_access_scopes(access);
    const cmd_token_t *t = ctx->token;
    if (!t || !need || (t->scopes & need))
        return true;
    bool both = need == (CMD_SCOPE_RATELIMIT | CMD_SCOPE_WRITE);
    const char *one = cmd_scope_name(need);
    cmd_auth_count_refusal(CMD_REFUSED_SCOPE);
    char what[160];
    what_of(ctx, what, sizeof(what));
    cmd_fail(ctx, CMD_E_FORBIDDEN, NULL, "token \"%s\" lacks scope %s, needed by %s", t->name,
             both ? "ratelimit (or write)" : one, what);
    ctx->err.scope = both ? "ratelimit" : one;
    return false;
}

bool cmd_access_admin(const cmd_ctx_t *ctx) { return !ctx->token || (ctx->token->scopes & CMD_SCOPE_ADMIN); }

bool cmd_require_read(cmd_ctx_t *ctx, const char *what)
{
    if (!ctx->token || (ctx->token->scopes & CMD_SCOPE_READ))
        return true;
    cmd_auth_count_refusal(CMD_REFUSED_SCOPE);
    char sent[160];
    what_of(ctx, sent, sizeof(sent));
    cmd_fail(ctx, CMD_E_FORBIDDEN, NULL, "token \"%s\" lacks scope read, needed by %s (a read, though sent to %s)",
             ctx->token->name, what, sent);
    ctx->err.scope = "read";
    return false;
}

bool cmd_key_visible(const cmd_ctx_t *ctx, const char *key, size_t len)
{
    const cmd_token_t *t = ctx->token;
    if (!t || !t->nprefixes)
        return true;
    for (size_t i = 0; i < t->nprefixes; i++)
        if (len >= t->prefix_len[i] && memcmp(key, t->prefixes[i], t->prefix_len[i]) == 0)
            return true;
    return false;
}

bool cmd_key_allowed(cmd_ctx_t *ctx, const char *key, size_t len)
{
    if (cmd_key_visible(ctx, key, len))
        return true;
    const cmd_token_t *t = ctx->token;
    cmd_auth_count_refusal(CMD_REFUSED_PREFIX);
    char list[200] = "";
    size_t used = 0;
    for (size_t i = 0; i < t->nprefixes && used < sizeof(list) - 1; i++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s\"%.*s\"", i ? ", " : "",
                         (int)(t->prefix_len[i] > 40 ? 40 : t->prefix_len[i]), t->prefixes[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return cmd_fail(ctx, CMD_E_FORBIDDEN, NULL, "key \"%.*s%s\" is outside the prefixes of token \"%s\": %s",
                    (int)(len > 100 ? 100 : len), key, len > 100 ? "..." : "", t->name, list);
}

bool cmd_keys_allowed(cmd_ctx_t *ctx, const ks_key_t *keys, size_t n)
{
    for (size_t i = 0; ctx->token && i < n; i++)
        if (!cmd_key_allowed(ctx, keys[i].p, keys[i].len))
            return false;
    return true;
}
