/* override.c - see override.h. */
#include "core/override.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define OVERRIDE_ENC_VERSION 1   /* first byte of every encoding */

typedef struct entry {
    char *tenant;                /* tenant bytes, then limits bytes: one allocation */
    uint16_t tlen, llen;
    uint8_t cache;               /* CACHE_*: what `params` holds */
    throttle_params_t params;    /* the text as the front-end's parser read it */
} entry_t;

enum { CACHE_NONE = 0, CACHE_OK, CACHE_BAD };

/* Maps alive in the process: a decision looks for overrides only when some
 * exist (override_maps_alive). */
static _Atomic long alive;

long override_maps_alive(void) { return atomic_load_explicit(&alive, memory_order_relaxed); }

struct override_map {
    entry_t *e;
    size_t n, cap;
    size_t bytes;                /* heap bytes owned, kept for the O(1) size */
};

size_t override_entry_bytes(size_t tlen, size_t llen) { return sizeof(entry_t) + tlen + llen; }

override_map_t *override_map_new(void)
{
    override_map_t *m = calloc(1, sizeof(*m));
    if (m) {
        m->bytes = sizeof(*m);
        atomic_fetch_add_explicit(&alive, 1, memory_order_relaxed);
    }
    return m;
}

void override_map_free(override_map_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        free(m->e[i].tenant);
    free(m->e);
    free(m);
    atomic_fetch_sub_explicit(&alive, 1, memory_order_relaxed);
}

size_t override_map_count(const override_map_t *m) { return m->n; }

static int cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : an < bn ? -1 : an > bn ? 1 : 0;
}

/* The index of tenant, or of where it would go (*found false). */
static size_t find(const override_map_t *m, const char *t, size_t tlen, bool *found)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp(m->e[mid].tenant, m->e[mid].tlen, t, tlen);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

const char *override_map_get(const override_map_t *m, const char *tenant, size_t tlen, size_t *llen)
{
    bool found;
    size_t i = find(m, tenant, tlen, &found);
    if (!found)
        return NULL;
    *llen = m->e[i].llen;
    return m->e[i].tenant + m->e[i].tlen;
}

int override_map_limits(override_map_t *m, const char *tenant, size_t tlen, override_parse_fn parse, void *ud,
                        throttle_params_t *out)
{
    bool found;
    size_t i = find(m, tenant, tlen, &found);
    if (!found)
        return 0;
    entry_t *e = &m->e[i];
    if (e->cache == CACHE_NONE)
        e->cache = parse(e->tenant + e->tlen, e->llen, &e->params, ud) ? CACHE_OK : CACHE_BAD;
    if (e->cache == CACHE_BAD)
        return -1;
    *out = e->params;
    return 1;
}

size_t override_map_after(const override_map_t *m, const char *tenant, size_t tlen)
{
    if (!tenant)
        return 0;
    bool found;
    size_t i = find(m, tenant, tlen, &found);
    return found ? i + 1 : i;
}

void override_map_at(const override_map_t *m, size_t i, const char **tenant, size_t *tlen, const char **limits,
                     size_t *llen)
{
    *tenant = m->e[i].tenant;
    *tlen = m->e[i].tlen;
    *limits = m->e[i].tenant + m->e[i].tlen;
    *llen = m->e[i].llen;
}

static char *entry_bytes(const char *t, size_t tlen, const char *l, size_t llen)
{
    char *b = malloc(tlen + llen);
    if (b) {
        memcpy(b, t, tlen);
        memcpy(b + tlen, l, llen);
    }
    return b;
}

int override_map_set(override_map_t *m, const char *tenant, size_t tlen, const char *limits, size_t llen)
{
    bool found;
    size_t i = find(m, tenant, tlen, &found);
    char *b = entry_bytes(tenant, tlen, limits, llen);
    if (!b)
        return OVERRIDE_NOMEM;
    if (found) {
        m->bytes = m->bytes - m->e[i].llen + llen;
        free(m->e[i].tenant);
        m->e[i].tenant = b;
        m->e[i].llen = (uint16_t)llen;
        m->e[i].cache = CACHE_NONE;
        return OVERRIDE_OK;
    }
    if (m->n >= OVERRIDE_MAX_ENTRIES) {
        free(b);
        return OVERRIDE_FULL;
    }
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 4;
        entry_t *ne = realloc(m->e, nc * sizeof(*ne));
        if (!ne) {
            free(b);
            return OVERRIDE_NOMEM;
        }
        m->bytes += (nc - m->cap) * sizeof(*ne);
        m->e = ne;
        m->cap = nc;
    }
    memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof(*m->e));
    memset(&m->e[i], 0, sizeof(m->e[i]));
    m->e[i].tenant = b;
    m->e[i].tlen = (uint16_t)tlen;
    m->e[i].llen = (uint16_t)llen;
    m->n++;
    m->bytes += tlen + llen;
    return OVERRIDE_OK;
}

bool override_map_del(override_map_t *m, const char *tenant, size_t tlen)
{
    bool found;
    size_t i = find(m, tenant, tlen, &found);
    if (!found)
        return false;
    m->bytes -= (size_t)m->e[i].tlen + m->e[i].llen;
    free(m->e[i].tenant);
    memmove(&m->e[i], &m->e[i + 1], (m->n - i - 1) * sizeof(*m->e));
    m->n--;
    return true;
}

static void type_free(void *v) { override_map_free(v); }

static size_t type_size(const void *v) { return ((const override_map_t *)v)->bytes; }

/* u8 version | u32 count | count x (blob tenant | blob limits), in tenant order. */
static void type_encode(const void *v, wbuf_t *out)
{
    const override_map_t *m = v;
    wbuf_put_u8(out, OVERRIDE_ENC_VERSION);
    wbuf_put_u32(out, (uint32_t)m->n);
    for (size_t i = 0; i < m->n; i++) {
        wbuf_put_blob(out, m->e[i].tenant, m->e[i].tlen);
        wbuf_put_blob(out, m->e[i].tenant + m->e[i].tlen, m->e[i].llen);
    }
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint32_t n = rbuf_u32(&r);
    if (r.err || ver != OVERRIDE_ENC_VERSION) {
        *why = "override: unknown encoding version";
        return NULL;
    }
    if (n > OVERRIDE_MAX_ENTRIES) {
        *why = "override: too many entries";
        return NULL;
    }
    override_map_t *m = override_map_new();
    if (!m) {
        *why = "out of memory";
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t tlen, llen;
        const uint8_t *t = rbuf_blob(&r, &tlen);
        const uint8_t *l = rbuf_blob(&r, &llen);
        if (r.err || !t || !l || tlen == 0 || tlen > OVERRIDE_TENANT_MAX || llen == 0 ||
            llen > OVERRIDE_LIMITS_MAX) {
            *why = "override: bad entry";
            goto fail;
        }
        if (m->n && cmp(m->e[m->n - 1].tenant, m->e[m->n - 1].tlen, (const char *)t, tlen) >= 0) {
            *why = "override: entries out of order";
            goto fail;
        }
        if (override_map_set(m, (const char *)t, tlen, (const char *)l, llen) != OVERRIDE_OK) {
            *why = "out of memory";
            goto fail;
        }
    }
    if (!rbuf_done(&r)) {
        *why = "override: trailing bytes";
        goto fail;
    }
    return m;
fail:
    override_map_free(m);
    return NULL;
}

const ks_type_t override_type = {
    .tag = TYPE_TAG_OVERRIDE,
    .name = "override",
    .noun = "a policy's overrides",
    .missing = "no overrides",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
