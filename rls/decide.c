/*
 * decide.c - ShouldRateLimit on the command layer.
 *
 * Each descriptor of a request is matched as envoyproxy/ratelimit matches
 * (config_impl.go GetLimit): level by level, an entry looks up key_value,
 * then the level's wildcard values in file order, then the key alone (one
 * bucket per value sent); the rule applies when it sits where the
 * request's last entry lands (a request with more or fewer entries than
 * the configuration's path matches nothing).  A request's own limit
 * (RateLimitOverride) replaces the configured one for a known domain.
 * Then, as constructLimitsToCheck does: a named rule another matched rule
 * `replaces` is dropped, unlimited rules answer OK with limit_remaining
 * UINT32_MAX and no current_limit, and a descriptor nothing matched
 * answers OK without current_limit.
 *
 * Every descriptor left becomes an item of one THROTTLE.BATCH (admitted
 * with cmd_admit, run with cmd_call: scope, prefixes, slots, writable,
 * journal) on the key
 *
 *     rls:{DOMAIN}_KEY1_VALUE1_KEY2_VALUE2_PERIOD[_ALGORITHM]
 *
 * (envoyproxy/ratelimit's cache key, DOMAIN_KEY_VALUE_..._, with the
 * period in seconds where it puts the window's start, the algorithm when
 * not fixed_window; a share_threshold wildcard puts its pattern for the
 * value).  The {DOMAIN} hash tag puts every key of a domain in one
 * cluster slot, so a request is one node's, atomically.  By default the
 * batch is all or nothing: when one descriptor is over its limit, none is
 * charged.  charge_all (per domain, or rls_options_t) charges each
 * descriptor that fits, as envoyproxy/ratelimit does (it charges even
 * those over their limit; tally never counts a refused hit).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/admit.h"
#include "cmd/def.h"
#include "cmd/throttle.h"
#include "rls/rls_int.h"

#define RLS_DESCRIPTORS_MAX CMD_THROTTLE_BATCH_MAX   /* descriptors in one request */

struct rls {
    cmd_server_t *srv;
    rls_options_t opt;
    pthread_mutex_t lock;          /* guards `set` (swapped by reloads) */
    rls_set_t *set;
    rls_metrics_t *metrics;
};

void rls_params(throttle_algo_t algo, uint32_t rpu, int64_t period_s, throttle_params_t *p)
{
    memset(p, 0, sizeof(*p));
    p->algo = algo;
    int64_t period_ns = period_s * NS_PER_SEC;
    switch (algo) {
    case THROTTLE_GCRA:
        p->u.gcra.max_burst = (int64_t)rpu - 1;
        p->u.gcra.count = rpu;
        p->u.gcra.period_ns = period_ns;
        break;
    case THROTTLE_TOKEN_BUCKET:
        p->u.tb.capacity = rpu;
        p->u.tb.rate_micro = ((int64_t)rpu * 1000000 + period_s - 1) / period_s;
        break;
    case THROTTLE_SLIDING_LOG:
        p->u.log.max_count = rpu;
        p->u.log.period_ns = period_ns;
        break;
    default:
        p->u.win.max_count = rpu;
        p->u.win.period_ns = period_ns;
        break;
    }
}

/* ================================================ the service's state == */

static void attach(rls_t *r, rls_set_t *s)
{
    for (size_t i = 0; s && i < s->nrules; i++) {
        rls_rule_t *u = s->rules[i];
        u->series = rls_metrics_series(r->metrics, u->domain, u->full_key, strlen(u->full_key));
    }
}

rls_t *rls_new(cmd_server_t *srv, const rls_options_t *opt, rls_set_t *initial)
{
    rls_t *r = calloc(1, sizeof(*r));
    if (!r || !(r->metrics = rls_metrics_new())) {
        free(r);
        return NULL;
    }
    r->srv = srv;
    if (opt)
        r->opt = *opt;
    pthread_mutex_init(&r->lock, NULL);
    attach(r, initial);
    r->set = initial;
    return r;
}

void rls_free(rls_t *r)
{
    if (!r)
        return;
    rls_set_release(r->set);
    rls_metrics_free(r->metrics);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

void rls_swap(rls_t *r, rls_set_t *s)
{
    attach(r, s);   /* before it is published: the set is the caller's alone until then */
    pthread_mutex_lock(&r->lock);
    rls_set_t *old = r->set;
    r->set = s;
    pthread_mutex_unlock(&r->lock);
    rls_set_release(old);
}

rls_set_t *rls_current(rls_t *r)
{
    pthread_mutex_lock(&r->lock);
    rls_set_t *s = r->set;
    rls_set_retain(s);
    pthread_mutex_unlock(&r->lock);
    return s;
}

size_t rls_set_domains(const rls_set_t *s)
{
    return s ? s->ndomains : 0;
}

size_t rls_set_rules(const rls_set_t *s)
{
    return s ? s->nrules : 0;
}

void rls_metrics_render(rls_t *r, wbuf_t *out)
{
    rls_metrics_render_into(r->metrics, out);
}

/* =========================================================== matching == */

/* envoyproxy/ratelimit's wildcardMatch: each '*' of the pattern matches
 * any run of bytes; the first literal part is a prefix, the last a suffix,
 * the middle ones found in order in between. */
static bool wild_match(const char *pat, const char *v, size_t vlen)
{
    const char *star = strchr(pat, '*');
    if (!star)
        return strlen(pat) == vlen && !memcmp(pat, v, vlen);
    size_t pre = (size_t)(star - pat);
    const char *last = strrchr(pat, '*') + 1;
    size_t suf = strlen(last), fixed = 0;
    for (const char *p = pat; *p; p++)
        fixed += *p != '*';
    if (vlen < fixed || memcmp(v, pat, pre) || memcmp(v + vlen - suf, last, suf))
        return false;
    const char *rem = v + pre, *end = v + vlen - suf;
    for (const char *part = star + 1; part < last;) {
        const char *next = strchr(part, '*');
        size_t pl = (size_t)(next - part);
        const char *hit = pl ? memmem(rem, (size_t)(end - rem), part, pl) : rem;
        if (!hit)
            return false;
        rem = hit + pl;
        part = next + 1;
    }
    return true;
}

/* The child of `level` an entry reaches (NULL: none); *wild: through a wildcard. */
static const rls_node_t *child_of(const rls_node_t *level, const rls_entry_t *e, const char *kv, size_t kvlen,
                                  bool *wild)
{
    *wild = false;
    for (size_t i = 0; i < level->nchildren; i++) {
        const rls_node_t *c = &level->children[i];
        if (strlen(c->final) == kvlen && !memcmp(c->final, kv, kvlen))
            return c;
    }
    for (size_t i = 0; i < level->nchildren; i++) {
        const rls_node_t *c = &level->children[i];
        if (c->wildcard && wild_match(c->final, kv, kvlen)) {
            *wild = true;
            return c;
        }
    }
    for (size_t i = 0; i < level->nchildren; i++) {
        const rls_node_t *c = &level->children[i];
        if (!c->value && strlen(c->key) == e->key.len && !memcmp(c->key, e->key.p, e->key.len))
            return c;
    }
    return NULL;
}

/* What one descriptor is decided by. */
typedef enum kind { K_NONE, K_UNLIMITED, K_ZERO, K_ITEM } kind_t;

typedef struct plan {
    kind_t kind;
    const rls_rule_t *rule;        /* NULL with an override */
    rls_limit_t limit;             /* what current_limit says */
    throttle_algo_t algo;
    int64_t period_s;
    bool shadow;
    int64_t quantity;
    size_t item;                   /* K_ITEM: its item */
    size_t series;
    char *key;                     /* K_ITEM, K_ZERO: the limiter's key (the series of detailed metrics) */
    size_t klen;
} plan_t;

/* Appends to a growing string (false: out of memory). */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf_t;

static void sb_put(sbuf_t *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf_t *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* Matches descriptor d; fills the rule found, or none.  `patterns[i]`: the
 * value the key uses for entry i (a share_threshold wildcard's pattern). */
static const rls_rule_t *match(const rls_domain_t *dom, const rls_descriptor_t *d, const char **patterns,
                               sbuf_t *kv)
{
    const rls_node_t *level = &dom->root;
    const rls_rule_t *rule = NULL;
    for (size_t i = 0; i < d->nentries; i++) {
        const rls_entry_t *e = &d->entries[i];
        kv->len = 0;
        sb_put(kv, e->key.p, e->key.len);
        sb_put(kv, "_", 1);
        sb_put(kv, e->value.p, e->value.len);
        if (kv->oom)
            return NULL;
        bool wild;
        const rls_node_t *next = child_of(level, e, kv->p, kv->len, &wild);
        if (next && wild && next->share_threshold)
            patterns[i] = next->value;
        if (next && next->rule && i == d->nentries - 1)
            rule = next->rule;
        if (!next || !next->nchildren)
            break;
        level = next;
    }
    return rule;
}

/* The limiter's key of a descriptor (see the top of the file). */
static bool key_of(const rls_request_t *q, const rls_descriptor_t *d, const char *const *patterns, int64_t period_s,
                   throttle_algo_t algo, sbuf_t *b)
{
    b->len = 0;
    sb_str(b, "rls:{");
    sb_put(b, q->domain.p, q->domain.len);
    sb_put(b, "}", 1);
    for (size_t i = 0; i < d->nentries; i++) {
        sb_put(b, "_", 1);
        sb_put(b, d->entries[i].key.p, d->entries[i].key.len);
        sb_put(b, "_", 1);
        if (patterns && patterns[i])
            sb_str(b, patterns[i]);
        else
            sb_put(b, d->entries[i].value.p, d->entries[i].value.len);
    }
    char tail[48];
    snprintf(tail, sizeof(tail), "_%lld", (long long)period_s);
    sb_str(b, tail);
    if (algo != THROTTLE_FIXED_WINDOW) {
        sb_put(b, "_", 1);
        sb_str(b, throttle_algo_name(algo));
    }
    return !b->oom;
}

/* envoyproxy/ratelimit's detailed metric key: domain.key_value.key2_value2. */
static bool detailed_key(const rls_request_t *q, const rls_descriptor_t *d, const char *const *patterns, sbuf_t *b)
{
    b->len = 0;
    sb_put(b, q->domain.p, q->domain.len);
    for (size_t i = 0; i < d->nentries; i++) {
        sb_put(b, ".", 1);
        sb_put(b, d->entries[i].key.p, d->entries[i].key.len);
        if (patterns[i]) {
            sb_put(b, "_", 1);
            sb_str(b, patterns[i]);
        } else if (d->entries[i].value.len) {
            sb_put(b, "_", 1);
            sb_put(b, d->entries[i].value.p, d->entries[i].value.len);
        }
    }
    return !b->oom;
}

/* ============================================================ headers == */

/* A structured-field string's bytes: printable ASCII, '"' and '\' escaped. */
static void sf_string(sbuf_t *b, const char *s, size_t n)
{
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"' || c == '\\')
            sb_put(b, "\\", 1);
        if ((unsigned char)c < 0x20 || (unsigned char)c > 0x7e)
            c = '_';
        sb_put(b, &c, 1);
    }
    sb_put(b, "\"", 1);
}

static bool add_header(rls_result_t *res, size_t *cap, const char *name, char *value)
{
    if (!value)
        return false;
    if (res->nheaders == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        rls_header_t *h = realloc(res->headers, c * sizeof(*h));
        if (!h) {
            free(value);
            return false;
        }
        res->headers = h;
        *cap = c;
    }
    char *n = strdup(name);
    if (!n) {
        free(value);
        return false;
    }
    res->headers[res->nheaders].name = n;
    res->headers[res->nheaders++].value = value;
    return true;
}

static char *fmt_u64(uint64_t v)
{
    char s[24];
    snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
    return strdup(s);
}

/* The IETF draft's RateLimit-Policy ("name";q=LIMIT;w=WINDOW_S) and
 * RateLimit ("name";r=REMAINING;t=RESET_S), one list member per descriptor
 * with a limit; envoyproxy/ratelimit's three headers of the descriptor
 * closest to its limit when asked. */
static bool headers(rls_t *r, const rls_request_t *q, const plan_t *plans, rls_result_t *res)
{
    size_t cap = 0;
    sbuf_t pol = { 0 }, cur = { 0 };
    long best = -1;
    uint32_t best_rem = UINT32_MAX;
    for (size_t i = 0; i < res->n; i++) {
        const rls_status_t *st = &res->statuses[i];
        if (!st->has_limit)
            continue;
        const plan_t *p = &plans[i];
        if (st->limit_remaining < best_rem) {
            best = (long)i;
            best_rem = st->limit_remaining;
        }
        if (st->code == RLS_CODE_OVER_LIMIT) {
            best = (long)i;
            best_rem = 0;
        }
        const char *name = p->rule ? (p->rule->name ? p->rule->name : p->rule->full_key) : NULL;
        char num[96];
        for (sbuf_t *b = &pol; b; b = b == &pol ? &cur : NULL) {
            if (b->len)
                sb_put(b, ", ", 2);
            if (name) {
                sf_string(b, name, strlen(name));
            } else {   /* a request's own limit: the domain's */
                sf_string(b, q->domain.p, q->domain.len);
            }
        }
        snprintf(num, sizeof(num), ";q=%u;w=%lld", st->current_limit.requests_per_unit, (long long)p->period_s);
        sb_str(&pol, num);
        snprintf(num, sizeof(num), ";r=%u;t=%lld", st->limit_remaining, (long long)((st->reset_ms + 999) / 1000));
        sb_str(&cur, num);
    }
    bool ok = !pol.oom && !cur.oom;
    if (ok && pol.len) {
        ok = add_header(res, &cap, "ratelimit-policy", pol.p);
        pol.p = NULL;
        ok = ok && add_header(res, &cap, "ratelimit", cur.p);
        cur.p = NULL;
    }
    if (ok && r->opt.ratelimit_headers && best >= 0) {
        const rls_status_t *st = &res->statuses[best];
        ok = add_header(res, &cap, "x-ratelimit-limit", fmt_u64(st->current_limit.requests_per_unit)) &&
             add_header(res, &cap, "x-ratelimit-remaining", fmt_u64(st->limit_remaining)) &&
             add_header(res, &cap, "x-ratelimit-reset", fmt_u64((uint64_t)(st->reset_ms + 999) / 1000));
    }
    free(pol.p);
    free(cur.p);
    return ok;
}

/* ========================================================== decisions == */

static bool bad(cmd_ctx_t *ctx, const char *field, const char *msg)
{
    return cmd_fail(ctx, CMD_E_BAD_REQUEST, field, "%s", msg);
}

void rls_result_free(rls_result_t *res)
{
    if (!res)
        return;
    for (size_t i = 0; i < res->nheaders; i++) {
        free(res->headers[i].name);
        free(res->headers[i].value);
    }
    free(res->headers);
    free(res->statuses);
    rls_set_release(res->held);
    memset(res, 0, sizeof(*res));
}

/* Resolves every descriptor to its plan (no state touched). */
static bool plan_all(rls_t *r, cmd_ctx_t *ctx, const rls_request_t *q, const rls_domain_t *dom, plan_t *plans,
                     const char **patterns, size_t *nitems)
{
    sbuf_t kv = { 0 };
    bool ok = true;
    *nitems = 0;
    for (size_t i = 0; i < q->n && ok; i++) {
        const rls_descriptor_t *d = &q->descriptors[i];
        plan_t *p = &plans[i];
        memset(patterns, 0, (d->nentries ? d->nentries : 1) * sizeof(*patterns));
        p->quantity = d->has_hits_addend ? (d->hits_addend > INT64_MAX ? INT64_MAX : (int64_t)d->hits_addend)
                                         : (q->hits_addend ? (int64_t)q->hits_addend : 1);
        p->series = RLS_SERIES_MAX + 1;   /* none */
        if (!dom || !d->nentries)
            continue;
        if (d->has_limit) {
            if (!rls_unit_seconds(d->limit.unit)) {
                ok = bad(ctx, "descriptors.limit.unit", "a descriptor's limit override needs a known unit");
                break;
            }
            p->kind = d->limit.requests_per_unit ? K_ITEM : K_ZERO;
            p->limit.requests_per_unit = d->limit.requests_per_unit;
            p->limit.unit = d->limit.unit;
            p->algo = THROTTLE_FIXED_WINDOW;
            p->period_s = rls_unit_seconds(d->limit.unit);
            char o[] = "override";
            p->series = rls_metrics_series(r->metrics, dom->name, o, sizeof(o) - 1);
            continue;
        }
        const rls_rule_t *u = match(dom, d, patterns, &kv);
        if (kv.oom) {
            ok = cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
            break;
        }
        if (!u)
            continue;
        p->rule = u;
        if (u->unlimited) {
            p->kind = K_UNLIMITED;
            p->series = u->series;   /* counted: what unlimited rules are for */
            continue;
        }
        p->kind = u->requests_per_unit ? K_ITEM : K_ZERO;
        p->limit.name.p = u->name ? u->name : "";
        p->limit.name.len = u->name ? strlen(u->name) : 0;
        p->limit.requests_per_unit = u->requests_per_unit;
        p->limit.unit = u->unit;
        p->algo = u->algo;
        p->period_s = u->period_s;
        p->shadow = u->shadow;
        p->series = u->series;
        if (u->detailed) {
            sbuf_t dk = { 0 };
            if (detailed_key(q, d, patterns, &dk))
                p->series = rls_metrics_series(r->metrics, u->domain, dk.p, dk.len);
            free(dk.p);
        }
        /* the key now: the patterns are this descriptor's */
        sbuf_t kb = { 0 };
        if (!key_of(q, d, patterns, p->period_s, p->algo, &kb)) {
            free(kb.p);
            ok = cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
            break;
        }
        p->key = kb.p;
        p->klen = kb.len;
    }
    free(kv.p);
    if (!ok)
        return false;
    /* replaces: a named rule another matched rule replaces is dropped */
    for (size_t i = 0; i < q->n; i++) {
        const rls_rule_t *u = plans[i].rule;
        if (!u || !u->name || plans[i].kind == K_NONE)
            continue;
        for (size_t j = 0; j < q->n && plans[i].kind != K_NONE; j++) {
            const rls_rule_t *o = plans[j].rule;
            for (size_t k = 0; o && k < o->nreplaces; k++)
                if (!strcmp(o->replaces[k], u->name)) {
                    plans[i].kind = K_NONE;
                    break;
                }
        }
    }
    /* keys of overrides (made after matching, which an override skips) */
    for (size_t i = 0; i < q->n; i++) {
        plan_t *p = &plans[i];
        if (p->kind == K_NONE || p->kind == K_UNLIMITED) {
            free(p->key);
            p->key = NULL;
            continue;
        }
        if (!p->key) {
            sbuf_t kb = { 0 };
            if (!key_of(q, &q->descriptors[i], NULL, p->period_s, p->algo, &kb)) {
                free(kb.p);
                return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
            }
            p->key = kb.p;
            p->klen = kb.len;
        }
        if (p->kind == K_ITEM)
            p->item = (*nitems)++;
    }
    return true;
}

static void count(rls_t *r, const plan_t *p, bool over)
{
    if (p->series > RLS_SERIES_MAX)
        return;
    rls_series_t *s = rls_metrics_at(r->metrics, p->series);
    uint64_t q = (uint64_t)p->quantity;
    atomic_fetch_add_explicit(&s->total_hits, q, memory_order_relaxed);
    if (over) {
        atomic_fetch_add_explicit(&s->over_limit, q, memory_order_relaxed);
        if (p->shadow)
            atomic_fetch_add_explicit(&s->shadow_mode, q, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&s->within_limit, q, memory_order_relaxed);
    }
}

bool rls_should_rate_limit(rls_t *r, cmd_ctx_t *ctx, const rls_request_t *q, rls_result_t *res)
{
    memset(res, 0, sizeof(*res));
    if (!q->domain.len)
        return bad(ctx, "domain", "rate limit domain must not be empty");
    if (!q->n)
        return bad(ctx, "descriptors", "rate limit descriptor list must not be empty");
    if (q->n > RLS_DESCRIPTORS_MAX)
        return bad(ctx, "descriptors", "more than 10000 descriptors in one request");
    rls_set_t *set = rls_current(r);
    if (!set) {
        cmd_fail(ctx, CMD_E_UNAVAILABLE, NULL, "no rate limit configuration loaded");
        return false;
    }
    size_t maxe = 1;
    for (size_t i = 0; i < q->n; i++)
        if (q->descriptors[i].nentries > maxe)
            maxe = q->descriptors[i].nentries;
    const rls_domain_t *dom = rls_set_domain(set, q->domain.p, q->domain.len);
    plan_t *plans = calloc(q->n, sizeof(*plans));
    const char **patterns = calloc(maxe, sizeof(*patterns));
    cmd_throttle_item_t *items = calloc(q->n, sizeof(*items));
    rl_result_t *rs = calloc(q->n, sizeof(*rs));
    res->statuses = calloc(q->n, sizeof(*res->statuses));
    size_t nitems = 0;
    bool ok = plans && patterns && items && rs && res->statuses;
    if (!ok)
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    ok = ok && plan_all(r, ctx, q, dom, plans, patterns, &nitems);
    bool charge_all = r->opt.charge_all || (dom && dom->charge_all);
    uint64_t keybytes = 0;
    for (size_t i = 0; ok && i < q->n; i++) {
        const plan_t *p = &plans[i];
        if (p->kind != K_ITEM)
            continue;
        cmd_throttle_item_t *it = &items[p->item];
        it->key = p->key;
        it->klen = p->klen;
        rls_params(p->algo, p->limit.requests_per_unit, p->period_s, &it->p);
        if (p->rule && p->algo == THROTTLE_FIXED_WINDOW)
            it->p.cal = p->rule->cal;   /* a calendar rule's (kind CAL_NONE: none) */
        it->quantity = p->quantity;
        it->shadow = p->shadow || charge_all;   /* a shadow item never refuses the others */
        keybytes += p->klen + 64;
    }
    /* admission once, for the whole request: its first key (the others
     * share its slot) or, with no state to touch, the access class alone */
    if (ok) {
        cmd_admission_t adm = { .access = CMD_ACCESS_RATELIMIT, .key = nitems ? items[0].key : NULL,
                                .klen = nitems ? items[0].klen : 0, .writes = nitems > 0, .loading = q->loading };
        if (nitems)
            adm.journal_bytes = 2 * (64 + keybytes) + 4096;
        ok = cmd_admit(ctx, &adm);
    }
    if (ok && nitems) {
        cmd_throttle_batch_args_t a = { .items = items, .n = nitems, .results = rs };
        cmd_throttle_batch_res_t out;
        ok = cmd_call(ctx, &CMD_THROTTLE_BATCH, &a, &out);
    }
    if (ok) {
        int64_t now_s = ctx->now_ns / NS_PER_SEC;
        res->n = q->n;
        res->overall = RLS_CODE_OK;
        for (size_t i = 0; i < q->n; i++) {
            const plan_t *p = &plans[i];
            rls_status_t *st = &res->statuses[i];
            st->code = RLS_CODE_OK;
            if (p->kind == K_NONE)
                continue;
            if (p->kind == K_UNLIMITED) {
                st->limit_remaining = UINT32_MAX;
                count(r, p, false);
                continue;
            }
            st->has_limit = true;
            st->current_limit = p->limit;
            st->has_reset = true;
            /* fixed windows: to the window's end in whole seconds, as envoyproxy/ratelimit */
            st->reset_ms = (p->period_s - now_s % p->period_s) * 1000;
            if (p->rule && p->rule->cal.kind != CAL_NONE) {   /* a calendar's: to its local boundary */
                int64_t cs, ce;
                cal_period(&p->rule->cal, now_s, &cs, &ce);
                st->reset_ms = (ce - now_s) * 1000;
            }
            bool over;
            if (p->kind == K_ZERO) {
                over = p->quantity > 0;
            } else {
                const rl_result_t *x = &rs[p->item];
                over = !x->allowed;
                if (!over)
                    st->limit_remaining = x->remaining > UINT32_MAX ? UINT32_MAX : (uint32_t)x->remaining;
                if (p->algo != THROTTLE_FIXED_WINDOW)
                    st->reset_ms = rl_ceil_div(x->reset_after_ns, NS_PER_MS);
            }
            if (over && !p->shadow) {
                st->code = RLS_CODE_OVER_LIMIT;
                res->overall = RLS_CODE_OVER_LIMIT;
            }
            count(r, p, over);
        }
        res->held = set;
        set = NULL;
        if (!headers(r, q, plans, res)) {
            cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
            ok = false;
        }
    }
    for (size_t i = 0; plans && i < q->n; i++)
        free(plans[i].key);
    free(plans);
    free(patterns);
    free(items);
    free(rs);
    rls_set_release(set);
    if (!ok)
        rls_result_free(res);
    return ok;
}
