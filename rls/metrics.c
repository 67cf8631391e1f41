/*
 * metrics.c - the decisions' counters, envoyproxy/ratelimit's per-rule
 * stats (total_hits, over_limit, within_limit, shadow_mode) as Prometheus
 * series with bounded cardinality:
 *
 *   tally_rls_hits_total{domain="d",rule="d.key_value.key2",result="over_limit"} 3
 *
 * A series per configured rule (its stats key as configured, wildcards as
 * written), one per domain for the requests' own limits (rule
 * "d.override"), and one per value sent for a descriptor with
 * detailed_metric: true.  At most RLS_SERIES_MAX series are ever made;
 * beyond, hits count in one overflow series (domain="", rule="overflow").
 * Series outlive reloads (a rule that stays keeps counting), so a reload
 * never resets a counter.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "rls/rls_int.h"

#define RLS_INDEX_SLOTS (4 * RLS_SERIES_MAX)   /* open addressing at most a quarter full */

struct rls_metrics {
    pthread_mutex_t lock;          /* guards making series (counting is atomic) */
    size_t n;
    rls_series_t series[RLS_SERIES_MAX + 1];   /* [RLS_SERIES_MAX]: the overflow */
    uint16_t index[RLS_INDEX_SLOTS];           /* series + 1; 0: empty */
};

rls_metrics_t *rls_metrics_new(void)
{
    rls_metrics_t *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

void rls_metrics_free(rls_metrics_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->series[i].domain);
        free(m->series[i].key);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static uint64_t hash(const char *d, const char *k, size_t klen)
{
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (const char *p = d; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
    for (size_t i = 0; i < klen; i++)
        h = (h ^ (uint8_t)k[i]) * 1099511628211ULL;
    return h;
}

size_t rls_metrics_series(rls_metrics_t *m, const char *domain, const char *key, size_t klen)
{
    size_t at = (size_t)(hash(domain, key, klen) % RLS_INDEX_SLOTS), found = RLS_SERIES_MAX;
    pthread_mutex_lock(&m->lock);
    for (;; at = (at + 1) % RLS_INDEX_SLOTS) {
        uint16_t v = m->index[at];
        if (!v)
            break;
        rls_series_t *s = &m->series[v - 1];
        if (!strcmp(s->domain, domain) && strlen(s->key) == klen && !memcmp(s->key, key, klen)) {
            found = v - 1u;
            goto out;
        }
    }
    if (m->n < RLS_SERIES_MAX) {
        rls_series_t *s = &m->series[m->n];
        s->domain = strdup(domain);
        s->key = malloc(klen + 1);
        if (s->domain && s->key) {
            memcpy(s->key, key, klen);
            s->key[klen] = '\0';
            m->index[at] = (uint16_t)(m->n + 1);
            found = m->n++;
        } else {
            free(s->domain);
            free(s->key);
            s->domain = s->key = NULL;
        }
    }
out:
    pthread_mutex_unlock(&m->lock);
    return found;
}

rls_series_t *rls_metrics_at(rls_metrics_t *m, size_t i)
{
    return &m->series[i < RLS_SERIES_MAX ? i : RLS_SERIES_MAX];
}

/* A label value as Prometheus's text format escapes it. */
static void put_label(wbuf_t *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            wbuf_put_u8(out, '\\');
        if (*s == '\n') {
            wbuf_put_bytes(out, "\\n", 2);
            continue;
        }
        wbuf_put_u8(out, (uint8_t)*s);
    }
}

void rls_metrics_render_into(rls_metrics_t *m, void *wb)
{
    wbuf_t *out = wb;
    static const char h[] = "# HELP tally_rls_hits_total Envoy rate limit service hits (hits_addend summed) by "
                            "domain, rule and result (envoyproxy/ratelimit's per-rule stats).\n"
                            "# TYPE tally_rls_hits_total counter\n";
    wbuf_put_bytes(out, h, sizeof(h) - 1);
    pthread_mutex_lock(&m->lock);
    size_t n = m->n;
    pthread_mutex_unlock(&m->lock);
    static const char *const results[] = { "total_hits", "over_limit", "within_limit", "shadow_mode" };
    for (size_t i = 0; i <= n; i++) {
        rls_series_t *s = i < n ? &m->series[i] : &m->series[RLS_SERIES_MAX];
        uint64_t v[4] = { atomic_load(&s->total_hits), atomic_load(&s->over_limit), atomic_load(&s->within_limit),
                          atomic_load(&s->shadow_mode) };
        if (i == n && !v[0])
            continue;   /* the overflow series, unused */
        for (size_t r = 0; r < 4; r++) {
            static const char a[] = "tally_rls_hits_total{domain=\"";
            wbuf_put_bytes(out, a, sizeof(a) - 1);
            put_label(out, i < n ? s->domain : "");
            wbuf_put_bytes(out, "\",rule=\"", 8);
            put_label(out, i < n ? s->key : "overflow");
            char tail[64];
            int len = snprintf(tail, sizeof(tail), "\",result=\"%s\"} %llu\n", results[r], (unsigned long long)v[r]);
            wbuf_put_bytes(out, tail, (size_t)len);
        }
    }
}
