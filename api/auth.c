/*
 * auth.c - bearer tokens, scopes and key prefixes; see auth.h for the
 * contract.  Pure: the token file arrives as text (service/ reads it), the
 * time and the client address with the request.
 */
#include "api/auth.h"

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
    { API_SCOPE_READ, "read" },
    { API_SCOPE_WRITE, "write" },
    { API_SCOPE_RATELIMIT, "ratelimit" },
    { API_SCOPE_ADMIN, "admin" },
    { API_SCOPE_REPLICATE, "replicate" },
};
#define NSCOPES (sizeof(scope_names) / sizeof(scope_names[0]))

static const char *const access_names[API_ACCESS__COUNT] = {
    [API_ACCESS_UNSET] = "unset",   [API_ACCESS_PUBLIC] = "public", [API_ACCESS_METRICS] = "metrics",
    [API_ACCESS_TOKEN] = "token",   [API_ACCESS_READ] = "read",     [API_ACCESS_WRITE] = "write",
    [API_ACCESS_RATELIMIT] = "ratelimit", [API_ACCESS_ADMIN] = "admin", [API_ACCESS_REPLICATE] = "replicate",
};

const char *api_access_name(api_access_t c)
{
    return (unsigned)c < API_ACCESS__COUNT ? access_names[c] : "unset";
}

unsigned api_access_scopes(api_access_t c)
{
    switch (c) {
    case API_ACCESS_READ: return API_SCOPE_READ;
    case API_ACCESS_WRITE: return API_SCOPE_WRITE;
    case API_ACCESS_RATELIMIT: return API_SCOPE_RATELIMIT | API_SCOPE_WRITE;
    case API_ACCESS_ADMIN: return API_SCOPE_ADMIN;
    case API_ACCESS_REPLICATE: return API_SCOPE_REPLICATE;
    default: return 0;
    }
}

/* ------------------------------------------------------------------------ */
/* Refusals, for /metrics                                                   */
/* ------------------------------------------------------------------------ */

/* Process-wide, as the route counters of service/metrics.c: one server per
 * process. */
enum { REFUSED_UNAUTHORIZED, REFUSED_SCOPE, REFUSED_PREFIX, REFUSED_THROTTLED, REFUSED__COUNT };
static const char *const refused_names[REFUSED__COUNT] = { "unauthorized", "scope", "prefix", "throttled" };
static _Atomic uint64_t refused[REFUSED__COUNT];

static void count_refusal(int why) { atomic_fetch_add_explicit(&refused[why], 1, memory_order_relaxed); }

void api_auth_metrics(const api_auth_t *a, wbuf_t *out)
{
    if (!a)
        return;
    static const char head[] = "# HELP tally_auth_refused_total Requests refused by authentication: no or an unknown "
                               "token (401), a scope or a key prefix the token lacks (403), too many unknown tokens "
                               "from one address (429).\n"
                               "# TYPE tally_auth_refused_total counter\n";
    wbuf_put_bytes(out, head, sizeof(head) - 1);
    for (int i = 0; i < REFUSED__COUNT; i++) {
        char line[96];
        int n = snprintf(line, sizeof(line), "tally_auth_refused_total{reason=\"%s\"} %llu\n", refused_names[i],
                         (unsigned long long)atomic_load_explicit(&refused[i], memory_order_relaxed));
        wbuf_put_bytes(out, line, (size_t)n);
    }
}

/* ------------------------------------------------------------------------ */
/* Hashing                                                                  */
/* ------------------------------------------------------------------------ */

void api_token_hash(const char *token, size_t len, uint8_t out[API_TOKEN_SHA256_LEN])
{
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, len, (const uint8_t *)token);
    sha256_digest(&c, API_TOKEN_SHA256_LEN, out);
}

void api_token_hash_hex(const char *token, size_t len, char out[2 * API_TOKEN_SHA256_LEN + 1])
{
    uint8_t d[API_TOKEN_SHA256_LEN];
    api_token_hash(token, len, d);
    for (size_t i = 0; i < API_TOKEN_SHA256_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* ------------------------------------------------------------------------ */
/* The token file                                                           */
/* ------------------------------------------------------------------------ */

static void tokens_free(api_tokens_t *t)
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

void api_tokens_release(api_tokens_t *t)
{
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        tokens_free(t);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > API_TOKEN_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._:@-", c)) ||
            c == 0)
            return false;
    }
    return true;
}

/* A string member of a token (required). */
static const char *member_string(json_t *o, const char *name, size_t i, size_t *len, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, name);
    if (!v || !json_is_string(v)) {
        snprintf(err, errlen, "tokens[%zu].%s: %s", i, name, v ? "must be a string" : "is required");
        return NULL;
    }
    *len = json_string_length(v);
    return json_string_value(v);
}

static bool parse_scopes(json_t *arr, size_t i, unsigned *out, char *err, size_t errlen)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        snprintf(err, errlen, "tokens[%zu].scopes: %s", i,
                 !arr ? "is required (read, write, ratelimit, admin, replicate)"
                      : "must be a non-empty array of read, write, ratelimit, admin, replicate");
        return false;
    }
    *out = 0;
    size_t j;
    json_t *s;
    json_array_foreach(arr, j, s) {
        unsigned bit = 0;
        for (size_t k = 0; json_is_string(s) && k < NSCOPES; k++)
            if (strcmp(json_string_value(s), scope_names[k].name) == 0)
                bit = scope_names[k].bit;
        if (!bit) {
            snprintf(err, errlen,
                     "tokens[%zu].scopes[%zu]: %s%.40s%s is not a scope (read, write, ratelimit, admin, replicate)",
                     i, j, json_is_string(s) ? "\"" : "", json_is_string(s) ? json_string_value(s) : "a non-string",
                     json_is_string(s) ? "\"" : "");
            return false;
        }
        if (*out & bit) {
            snprintf(err, errlen, "tokens[%zu].scopes[%zu]: \"%s\" is listed twice", i, j, json_string_value(s));
            return false;
        }
        *out |= bit;
    }
    return true;
}

static bool parse_prefixes(json_t *arr, size_t i, api_token_t *t, char *err, size_t errlen)
{
    if (!arr)
        return true;
    size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
    if (n == 0 || n > API_TOKEN_PREFIXES_MAX) {
        snprintf(err, errlen,
                 "tokens[%zu].prefixes: must be an array of 1 to %d key prefixes (leave it out to allow every key)", i,
                 API_TOKEN_PREFIXES_MAX);
        return false;
    }
    t->prefixes = calloc(n, sizeof(*t->prefixes));
    t->prefix_len = calloc(n, sizeof(*t->prefix_len));
    if (!t->prefixes || !t->prefix_len) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    for (size_t j = 0; j < n; j++) {
        json_t *s = json_array_get(arr, j);
        const char *why;
        if (!json_is_string(s) || !api_key_ok(json_string_value(s), json_string_length(s), &why)) {
            snprintf(err, errlen, "tokens[%zu].prefixes[%zu]: %s", i, j,
                     json_is_string(s) ? why : "must be a string (the start of the keys allowed)");
            return false;
        }
        t->prefix_len[j] = json_string_length(s);
        t->prefixes[j] = malloc(t->prefix_len[j] + 1);
        if (!t->prefixes[j]) {
            snprintf(err, errlen, "out of memory");
            return false;
        }
        memcpy(t->prefixes[j], json_string_value(s), t->prefix_len[j] + 1);
        t->nprefixes = j + 1;
    }
    return true;
}

static bool parse_token(json_t *o, size_t i, api_token_t *t, char *err, size_t errlen)
{
    if (!json_is_object(o)) {
        snprintf(err, errlen, "tokens[%zu]: must be an object {\"name\",\"sha256\",\"scopes\",\"prefixes\"}", i);
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (strcmp(k, "name") && strcmp(k, "sha256") && strcmp(k, "scopes") && strcmp(k, "prefixes")) {
            snprintf(err, errlen, "tokens[%zu]: unknown member \"%.60s\" (name, sha256, scopes, prefixes)", i, k);
            return false;
        }
    }
    size_t nlen, hlen;
    const char *name = member_string(o, "name", i, &nlen, err, errlen);
    if (!name)
        return false;
    if (!name_ok(name, nlen)) {
        snprintf(err, errlen, "tokens[%zu].name: 1 to %d letters, digits or ._:@- characters", i,
                 API_TOKEN_NAME_MAX);
        return false;
    }
    memcpy(t->name, name, nlen + 1);
    const char *hex = member_string(o, "sha256", i, &hlen, err, errlen);
    if (!hex)
        return false;
    bool hex_ok = hlen == 2 * API_TOKEN_SHA256_LEN;
    for (size_t j = 0; hex_ok && j < API_TOKEN_SHA256_LEN; j++) {
        int hi = hexval(hex[2 * j]), lo = hexval(hex[2 * j + 1]);
        hex_ok = hi >= 0 && lo >= 0;
        if (hex_ok)
            t->sha256[j] = (uint8_t)(hi << 4 | lo);
    }
    if (!hex_ok) {
        snprintf(err, errlen, "tokens[%zu].sha256: must be the 64 hex digits of the token's SHA-256 "
                 "(print it with: tallyd --hash-token < token-file)", i);
        return false;
    }
    return parse_scopes(json_object_get(o, "scopes"), i, &t->scopes, err, errlen) &&
           parse_prefixes(json_object_get(o, "prefixes"), i, t, err, errlen);
}

static int by_digest_cmp(const void *a, const void *b)
{
    const api_token_t *x = *(const api_token_t *const *)a, *y = *(const api_token_t *const *)b;
    return memcmp(x->sha256, y->sha256, API_TOKEN_SHA256_LEN);
}

api_tokens_t *api_tokens_parse(const char *text, size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "line %d, column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    api_tokens_t *t = NULL;
    json_t *arr = json_is_object(root) ? json_object_get(root, "tokens") : NULL;
    json_t *deny_all = json_is_object(root) ? json_object_get(root, "deny_all") : NULL;
    if (!arr || !json_is_array(arr) || json_object_size(root) != 1 + (deny_all != NULL)) {
        snprintf(err, errlen, "the file must be an object with one member, \"tokens\": an array of tokens "
                 "(and, for an empty array only, \"deny_all\": true)");
        goto out;
    }
    size_t n = json_array_size(arr);
    /* An empty list refuses every request, admin included (SIGHUP is then
     * the only way back): taken only when the file says it means it. */
    if (deny_all && (!json_is_true(deny_all) || n)) {
        snprintf(err, errlen, "deny_all: only true, and only with an empty \"tokens\" array");
        goto out;
    }
    if (n == 0 && !deny_all) {
        snprintf(err, errlen, "tokens: the array is empty, which would refuse every request (admin included, "
                 "so only SIGHUP could load tokens again); write \"deny_all\": true beside it to mean that");
        goto out;
    }
    if (n > API_TOKENS_MAX) {
        snprintf(err, errlen, "tokens: at most %d tokens", API_TOKENS_MAX);
        goto out;
    }
    t = calloc(1, sizeof(*t));
    if (!t || !(t->v = calloc(n ? n : 1, sizeof(*t->v))) || !(t->by_digest = calloc(n ? n : 1, sizeof(*t->by_digest)))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    atomic_init(&t->refs, 1);
    for (size_t i = 0; i < n; i++) {
        t->n = i + 1;
        if (!parse_token(json_array_get(arr, i), i, &t->v[i], err, errlen))
            goto fail;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(t->v[j].name, t->v[i].name) == 0) {
                snprintf(err, errlen, "tokens[%zu].name: \"%s\" is also the name of tokens[%zu]", i, t->v[i].name, j);
                goto fail;
            }
            if (memcmp(t->v[j].sha256, t->v[i].sha256, API_TOKEN_SHA256_LEN) == 0) {
                snprintf(err, errlen, "tokens[%zu].sha256: the same token as tokens[%zu] (\"%s\")", i, j,
                         t->v[j].name);
                goto fail;
            }
        }
        t->by_digest[i] = &t->v[i];
    }
    qsort(t->by_digest, n, sizeof(*t->by_digest), by_digest_cmp);
    goto out;
fail:
    if (t)
        tokens_free(t);
    t = NULL;
out:
    json_decref(root);
    return t;
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

struct api_auth {
    pthread_mutex_t mu;              /* guards `tokens` (the pointer; the set is immutable) */
    api_tokens_t *tokens;
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
static fail_slot_t *fail_slot(api_auth_t *a, const char *addr, bool create)
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

/* The client address of a request ("" when unknown), asked only when a
 * failure is involved: most requests never need it. */
static const char *client_addr(const api_req_t *req)
{
    const char *addr = req->client_ip ? req->client_ip(req->hctx) : NULL;
    return addr ? addr : "";
}

/* True when the request's address has used up its failures; *retry_ns is
 * when it may try again. */
static bool fail_blocked(api_auth_t *a, const api_req_t *req, int64_t *retry_ns)
{
    int64_t now_ns = req->now_ns;
    int64_t last = atomic_load_explicit(&a->last_fail_ns, memory_order_relaxed);
    if (a->fail.max_count == 0 || last == 0 || now_ns - last > 2 * FAIL_PERIOD_NS)
        return false;
    const char *addr = client_addr(req);
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

static void fail_record(api_auth_t *a, const api_req_t *req)
{
    if (a->fail.max_count == 0)
        return;
    const char *addr = client_addr(req);
    int64_t now_ns = req->now_ns;
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

api_auth_t *api_auth_create(int fail_limit, bool metrics_public)
{
    api_auth_t *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->fail_mu, NULL);
    a->metrics_public = metrics_public;
    a->fail.max_count = fail_limit > 0 ? fail_limit : 0;
    a->fail.period_ns = FAIL_PERIOD_NS;
    return a;
}

void api_auth_free(api_auth_t *a)
{
    if (!a)
        return;
    api_tokens_release(a->tokens);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->fail_mu);
    free(a);
}

void api_auth_install(api_auth_t *a, api_tokens_t *t)
{
    pthread_mutex_lock(&a->mu);
    api_tokens_t *old = a->tokens;
    a->tokens = t;
    pthread_mutex_unlock(&a->mu);
    api_tokens_release(old);
}

static api_tokens_t *tokens_acquire(api_auth_t *a)
{
    pthread_mutex_lock(&a->mu);
    api_tokens_t *t = a->tokens;
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&a->mu);
    return t;
}

size_t api_auth_token_count(api_auth_t *a)
{
    api_tokens_t *t = tokens_acquire(a);
    size_t n = t ? t->n : 0;
    api_tokens_release(t);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Checking a request                                                       */
/* ------------------------------------------------------------------------ */

/* The token of an `Authorization: Bearer <token>` header (RFC 6750 §2.1:
 * the scheme is case-insensitive); NULL when the header has another form. */
static const char *bearer_of(const char *h, size_t *len)
{
    static const char scheme[] = "bearer";
    for (size_t i = 0; i < 6; i++)   /* ASCII case folding: no locale on the hot path */
        if ((h[i] | 0x20) != scheme[i])
            return NULL;
    if (h[6] != ' ' && h[6] != '\t')
        return NULL;
    const char *p = h + 6;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0 || n > API_TOKEN_MAX_LEN)
        return NULL;
    *len = n;
    return p;
}

/* Whether two digests are equal, in time independent of where they differ:
 * the differences of all four words are OR-ed before one test (nettle's
 * memeql_sec does the same a byte at a time, with a volatile read each,
 * ~75 ns here against ~2). */
static bool digest_equal(const uint8_t a[API_TOKEN_SHA256_LEN], const uint8_t b[API_TOKEN_SHA256_LEN])
{
    uint64_t diff = 0;
    for (size_t i = 0; i < API_TOKEN_SHA256_LEN; i += 8) {
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
static const api_token_t *token_find(const api_tokens_t *t, const uint8_t d[API_TOKEN_SHA256_LEN])
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(t->by_digest[mid]->sha256, d, API_TOKEN_SHA256_LEN) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->n && digest_equal(t->by_digest[lo]->sha256, d))
        return t->by_digest[lo];
    return NULL;
}

static void unauthorized(api_resp_t *resp, const char *error, const char *msg)
{
    count_refusal(REFUSED_UNAUTHORIZED);
    api_error(resp, API_E_UNAUTHORIZED, "%s", msg);
    if (error)
        api_add_header(resp, "WWW-Authenticate", "Bearer realm=\"tally\", error=\"%s\"", error);
    else
        api_add_header(resp, "WWW-Authenticate", "Bearer realm=\"tally\"");
}

/* The 403 of a token without the scope a route needs (RFC 6750 §3.1). */
static void insufficient_scope(const api_req_t *req, api_resp_t *resp, unsigned need)
{
    const char *one = NULL;
    for (size_t k = 0; k < NSCOPES; k++)
        if (need & scope_names[k].bit) {
            one = scope_names[k].name;
            break;
        }
    bool both = need == (API_SCOPE_RATELIMIT | API_SCOPE_WRITE);
    count_refusal(REFUSED_SCOPE);
    api_error(resp, API_E_FORBIDDEN, "token \"%s\" lacks scope %s, needed by %s %s", req->token->name,
              both ? "ratelimit (or write)" : one, api_method_name(req->route->method), req->route->pattern);
    api_add_header(resp, "WWW-Authenticate", "Bearer realm=\"tally\", error=\"insufficient_scope\", scope=\"%s\"",
                   both ? "ratelimit" : one);
}

bool api_auth_check(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_auth_t *a = srv->auth;
    api_access_t access = req->route->access;
    if (!a || req->replay || access == API_ACCESS_PUBLIC || (access == API_ACCESS_METRICS && a->metrics_public))
        return true;
    const char *h = req->header ? req->header(req->hctx, "Authorization") : NULL;
    if (!h) {
        unauthorized(resp, NULL, "this route needs a token: send Authorization: Bearer <token>");
        return false;
    }
    size_t tlen;
    const char *tok = bearer_of(h, &tlen);
    uint8_t d[API_TOKEN_SHA256_LEN];
    if (tok)
        api_token_hash(tok, tlen, d);
    api_tokens_t *set = tok ? tokens_acquire(a) : NULL;
    const api_token_t *t = set ? token_find(set, d) : NULL;
    if (!t) {
        api_tokens_release(set);
        /* Only failures are held off: a valid token is never refused for
         * what others behind the same address (a gateway, a NAT) sent. */
        int64_t retry_ns;
        if (fail_blocked(a, req, &retry_ns)) {
            count_refusal(REFUSED_THROTTLED);
            int64_t s = rl_ceil_div(retry_ns, INT64_C(1000000000));
            api_error(resp, API_E_TOO_MANY_REQUESTS,
                      "too many requests with unknown tokens from this address; retry in %lld s",
                      (long long)(s > 0 ? s : 1));
            api_add_header(resp, "Retry-After", "%lld", (long long)(s > 0 ? s : 1));
            return false;
        }
        fail_record(a, req);
        unauthorized(resp, "invalid_token",
                     tok ? "unknown token" : "the Authorization header must be: Bearer <token>");
        return false;
    }
    req->token = t;
    req->tokens = set;
    memcpy(resp->token_name, t->name, strlen(t->name) + 1);   /* names fit: API_TOKEN_NAME_MAX */
    unsigned need = api_access_scopes(access);
    size_t klen;
    const char *key = req->route->flags & API_ROUTE_KEY_TEMPLATE ? NULL : api_path_param(req, "key", &klen);
    if (need && !(t->scopes & need))
        insufficient_scope(req, resp, need);
    else if (!key || api_auth_key_allowed(req, resp, key, klen))
        return true;   /* the path key is checked here too: before any handler evicts for room
                          (a policy's input is checked once resolved, by the handler) */
    api_auth_done(req);
    return false;
}

void api_auth_done(api_req_t *req)
{
    api_tokens_release(req->tokens);
    req->tokens = NULL;
    req->token = NULL;
}

bool api_auth_admin(const api_req_t *req)
{
    return !req->token || (req->token->scopes & API_SCOPE_ADMIN);
}

bool api_auth_require_read(const api_req_t *req, api_resp_t *resp, const char *what)
{
    if (!req->token || (req->token->scopes & API_SCOPE_READ))
        return true;
    count_refusal(REFUSED_SCOPE);
    api_error(resp, API_E_FORBIDDEN, "token \"%s\" lacks scope read, needed by %s (a read, though sent to %s %s)",
              req->token->name, what, api_method_name(req->route->method), req->route->pattern);
    api_add_header(resp, "WWW-Authenticate", "Bearer realm=\"tally\", error=\"insufficient_scope\", scope=\"read\"");
    return false;
}

bool api_auth_key_visible(const api_req_t *req, const char *key, size_t len)
{
    const api_token_t *t = req->token;
    if (!t || !t->nprefixes)
        return true;
    for (size_t i = 0; i < t->nprefixes; i++)
        if (len >= t->prefix_len[i] && memcmp(key, t->prefixes[i], t->prefix_len[i]) == 0)
            return true;
    return false;
}

bool api_auth_key_allowed(const api_req_t *req, api_resp_t *resp, const char *key, size_t len)
{
    if (api_auth_key_visible(req, key, len))
        return true;
    const api_token_t *t = req->token;
    count_refusal(REFUSED_PREFIX);
    char list[200] = "";
    size_t used = 0;
    for (size_t i = 0; i < t->nprefixes && used < sizeof(list) - 1; i++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s\"%.*s\"", i ? ", " : "",
                         (int)(t->prefix_len[i] > 40 ? 40 : t->prefix_len[i]), t->prefixes[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    api_error(resp, API_E_FORBIDDEN, "key \"%.*s%s\" is outside the prefixes of token \"%s\": %s",
              (int)(len > 100 ? 100 : len), key, len > 100 ? "..." : "", t->name, list);
    return false;
}

bool api_auth_keys_allowed(const api_req_t *req, api_resp_t *resp, const ks_key_t *keys, size_t n)
{
    for (size_t i = 0; req->token && i < n; i++)
        if (!api_auth_key_allowed(req, resp, keys[i].p, keys[i].len))
            return false;
    return true;
}
