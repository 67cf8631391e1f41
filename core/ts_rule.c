/*
 * ts_rule.c - compaction rules (TS.CREATERULE): a source's closed buckets
 * aggregated into samples of a destination, by the rules of the generation
 * that created the rule (ts.h).
 */
#include <stdlib.h>
#include <string.h>

#include "core/ts_impl.h"

size_t ts_rule_count(const ts_t *ts) { return ts->nrules; }

ts_rule_t ts_rule_at(const ts_t *ts, size_t i)
{
    const ts_rl_t *r = &ts->rules[i];
    return (ts_rule_t){ r->dest, r->dlen, r->agg, r->bucket_ms, r->align, r->quantile, r->gen, r->since };
}

long ts_rule_find(const ts_t *ts, const char *dest, size_t len)
{
    for (size_t i = 0; i < ts->nrules; i++)
        if (ts->rules[i].dlen == len && memcmp(ts->rules[i].dest, dest, len) == 0)
            return (long)i;
    return -1;
}

static char *dup_name(const char *p, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, p, len);
        d[len] = '\0';
    }
    return d;
}

bool ts_rule_add(ts_t *ts, const ts_rule_t *rule)
{
    char *d = dup_name(rule->dest, rule->dest_len);
    ts_rl_t *n = d ? realloc(ts->rules, (ts->nrules + 1) * sizeof(*n)) : NULL;
    if (!n) {
        free(d);
        return false;
    }
    ts->rules = n;
    n[ts->nrules++] = (ts_rl_t){ d,           (uint32_t)rule->dest_len, rule->agg, rule->bucket_ms, rule->align,
                                 rule->quantile, rule->gen,                rule->since };
    ts->mem += sizeof(*n) + rule->dest_len + 1;
    return true;
}

void ts_rule_remove(ts_t *ts, size_t i)
{
    ts->mem -= sizeof(ts_rl_t) + ts->rules[i].dlen + 1;
    free(ts->rules[i].dest);
    memmove(ts->rules + i, ts->rules + i + 1, (ts->nrules - i - 1) * sizeof(ts->rules[0]));
    if (--ts->nrules == 0) {
        free(ts->rules);
        ts->rules = NULL;
    }
}

const char *ts_source(const ts_t *ts, size_t *len)
{
    *len = ts->src ? ts->src_len : 0;
    return ts->src;
}

bool ts_set_source(ts_t *ts, const char *name, size_t len)
{
    char *d = NULL;
    if (name && !(d = dup_name(name, len)))
        return false;
    if (ts->src)
        ts->mem -= ts->src_len + 1;
    free(ts->src);
    ts->src = d;
    ts->src_len = d ? (uint32_t)len : 0;
    if (d)
        ts->mem += len + 1;
    return true;
}

typedef struct one {
    int64_t ts;
    double v;
    bool has;
} one_t;

static bool take_one(void *ud, int64_t t, double v)
{
    one_t *o = ud;
    o->ts = t;
    o->v = v;
    o->has = true;
    return true;
}

core_status_t ts_rule_bucket(const ts_t *src, const ts_rule_t *rule, int64_t b, double *value, bool *has)
{
    /* the range [b, b + bucket] so that twa's window reaches the bucket's
     * end; the first result is this bucket's when it has samples */
    int64_t lo = b < 0 ? 0 : b;
    int64_t hi = b > INT64_MAX - rule->bucket_ms ? INT64_MAX : b + rule->bucket_ms;
    ts_query_t q = { .from = lo, .to = hi, .count = 1, .agg = rule->agg, .bucket_ms = rule->bucket_ms,
                     .align = rule->align, .quantile = rule->quantile, .legacy_twa = rule->gen == TS_RULE_GEN_1 };
    if (rule->gen == TS_RULE_GEN_2 && rule->since >= 0 && bucket_start(rule->since, rule->bucket_ms, rule->align) == b) {
        /* the bucket open when the rule was created: the samples after it
         * only, from a fresh start (no neighbour before); a first result in
         * a later bucket means none */
        q.from = rule->since + 1;
        q.no_before = true;
    }
    one_t o = { 0 };
    core_status_t st = ts_range(src, &q, take_one, &o);
    *has = st == CORE_OK && o.has && o.ts == lo;
    if (*has)
        *value = o.v;
    return st;
}

bool ts_rule_open_bucket(const ts_t *src, const ts_rule_t *rule, ts_sample_t *out)
{
    if (!has_samples(src))
        return false;
    int64_t b = bucket_start(newest(src), rule->bucket_ms, rule->align);
    bool has;
    if (ts_rule_bucket(src, rule, b, &out->value, &has) != CORE_OK || !has)
        return false;
    out->ts = b < 0 ? 0 : b;
    return true;
}

void ts_rule_touch(ts_t *src, size_t i, int64_t old_newest, const int64_t *t, size_t n, int64_t from, int64_t to)
{
    ts_rl_t *r = &src->rules[i];
    if (r->gen != TS_RULE_GEN_2 || r->since < 0)
        return;
    int64_t b0 = bucket_start(r->since, r->bucket_ms, r->align);
    (void)from;   /* a deletion anywhere from it on touches it, or may open it again */
    bool touched = !t && to >= b0;
    for (size_t k = 0; t && k < n && !touched; k++)
        touched = t[k] <= old_newest && bucket_start(t[k], r->bucket_ms, r->align) == b0;
    if (touched)
        r->since = -1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Recomputes the bucket starts b[0..n) (sorted, unique) into dst: a bucket
 * with samples is written (LAST), one without is deleted from dst. */
static core_status_t rule_write(const ts_t *src, const ts_rule_t *rule, const int64_t *b, size_t n, ts_t *dst)
{
    ts_sample_t *s = malloc((n ? n : 1) * sizeof(*s));
    if (!s)
        return CORE_NOMEM;
    size_t m = 0;
    core_status_t st = CORE_OK;
    for (size_t i = 0; i < n && st == CORE_OK; i++) {
        double v;
        bool has;
        st = ts_rule_bucket(src, rule, b[i], &v, &has);
        int64_t at = b[i] < 0 ? 0 : b[i];
        if (st != CORE_OK)
            break;
        if (has)
            s[m++] = (ts_sample_t){ at, v };
        else if (ts_delete_range(dst, at, at) < 0)
            st = CORE_NOMEM;
    }
    if (st == CORE_OK && m) {
        /* what dst's retention would refuse is skipped, not an error */
        int64_t top = has_samples(dst) ? newest(dst) : INT64_MIN;
        if (s[m - 1].ts > top)
            top = s[m - 1].ts;
        int64_t cut = cutoff_for(dst->retention, top);
        size_t k = 0;
        while (k < m && s[k].ts < cut)
            k++;
        if (k < m)
            st = ts_add(dst, s + k, m - k, TS_DUP_LAST, NULL);
    }
    free(s);
    return st;
}

core_status_t ts_rule_added(const ts_t *src, const ts_rule_t *rule, int64_t old_newest, const int64_t *t, size_t n,
                            ts_t *dst)
{
    if (!has_samples(src))
        return CORE_OK;
    int64_t open = bucket_start(newest(src), rule->bucket_ms, rule->align);
    int64_t *b = malloc((n + 1) * sizeof(*b));
    if (!b)
        return CORE_NOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = bucket_start(t[i], rule->bucket_ms, rule->align);
        if (s < open)
            b[m++] = s;
    }
    if (old_newest >= 0) {
        int64_t s = bucket_start(old_newest, rule->bucket_ms, rule->align);
        if (s < open)
            b[m++] = s;
    }
    qsort(b, m, sizeof(*b), cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (u == 0 || b[u - 1] != b[i])
            b[u++] = b[i];
    core_status_t st = rule_write(src, rule, b, u, dst);
    free(b);
    return st;
}

static bool push_i64(void *ud, int64_t t, double v)
{
    (void)v;
    int64_t **pb = ud;   /* pb[0]: array, pb[1]: [n, cap] */
    int64_t *nc = pb[1];
    if (nc[0] == nc[1]) {
        int64_t ncap = nc[1] ? nc[1] * 2 : 64;
        int64_t *n = realloc(pb[0], (size_t)ncap * sizeof(*n));
        if (!n)
            return false;
        pb[0] = n;
        nc[1] = ncap;
    }
    pb[0][nc[0]++] = t;
    return true;
}

core_status_t ts_rule_deleted(const ts_t *src, const ts_rule_t *rule, int64_t from, int64_t to, ts_t *dst)
{
    /* the buckets dst holds from the span on: recomputed up to the span's
     * end, deleted from the open bucket on (the newest sample may have gone,
     * opening an earlier bucket again) */
    int64_t lo = bucket_start(from, rule->bucket_ms, rule->align);
    int64_t hi = bucket_start(to, rule->bucket_ms, rule->align);
    int64_t open = has_samples(src) ? bucket_start(newest(src), rule->bucket_ms, rule->align) : INT64_MIN;
    int64_t first = open < lo ? open : lo;
    ts_query_t q = { .from = first < 0 ? 0 : first, .to = TS_MAX_TIMESTAMP };
    int64_t nc[2] = { 0, 0 };
    int64_t *pb[2] = { NULL, nc };
    core_status_t st = ts_range(dst, &q, push_i64, pb);
    size_t m = 0;
    for (int64_t i = 0; st == CORE_OK && i < nc[0]; i++) {
        int64_t b = bucket_start(pb[0][i], rule->bucket_ms, rule->align);
        if (b >= open) {
            if (ts_delete_range(dst, pb[0][i], pb[0][i]) < 0)
                st = CORE_NOMEM;
        } else if (b <= hi && (m == 0 || pb[0][m - 1] != b)) {
            pb[0][m++] = b;
        }
    }
    if (st == CORE_OK)
        st = rule_write(src, rule, pb[0], m, dst);
    free(pb[0]);
    return st;
}
