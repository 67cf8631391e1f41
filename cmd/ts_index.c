/*
 * ts_index.c - the label index of the time series (see ts_index.h for what
 * it promises).
 *
 * Layout: one open-addressing table (linear probing, xxh64, tombstones)
 * maps a pair "name\0value" to a second table of the same kind holding the
 * keys of the series that had that pair when they were added.  `entries`
 * counts the (pair, key) entries, stale ones included, so that the index is
 * rebuilt once it holds more than twice the live label pairs (plus slack).
 */
#include "cmd/ts_index.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

/* ------------------------------------------------------------------------ */
/* A table of strings (with a value each)                                   */
/* ------------------------------------------------------------------------ */

static char tomb_mark;
#define TOMB (&tomb_mark)

typedef struct slot {
    uint64_t h;
    char *s;          /* NULL: empty; TOMB: deleted; else owned, NUL-terminated */
    size_t len;
    void *val;
} slot_t;

typedef struct smap {
    slot_t *v;
    size_t cap, n, used;   /* used = n + tombstones */
} smap_t;

/* Seeded from the keyspace's secret seed (ts_index_of): clients cannot
 * choose labels or keys that collide in these linear-probing tables. */
static uint64_t str_hash(uint64_t seed, const char *s, size_t len) { return tally_xxh64(s, len, seed); }

static size_t smap_find(const smap_t *m, const char *s, size_t len, uint64_t h)
{
    if (!m->cap)
        return SIZE_MAX;
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const slot_t *x = &m->v[i];
        if (!x->s)
            return SIZE_MAX;
        if (x->s != TOMB && x->h == h && x->len == len && memcmp(x->s, s, len) == 0)
            return i;
    }
}

static bool smap_grow(smap_t *m)
{
    size_t ncap = m->cap ? (m->n * 2 >= m->cap ? m->cap * 2 : m->cap) : 16;
    slot_t *nv = calloc(ncap, sizeof(*nv));
    if (!nv)
        return false;
    for (size_t i = 0; i < m->cap; i++) {
        slot_t *x = &m->v[i];
        if (!x->s || x->s == TOMB)
            continue;
        size_t j = x->h & (ncap - 1);
        while (nv[j].s)
            j = (j + 1) & (ncap - 1);
        nv[j] = *x;
    }
    free(m->v);
    m->v = nv;
    m->cap = ncap;
    m->used = m->n;
    return true;
}

/* The slot of s, added (with val NULL) when missing; NULL when out of memory. */
static slot_t *smap_put(smap_t *m, const char *s, size_t len, uint64_t h, bool *added)
{
    *added = false;
    size_t i = smap_find(m, s, len, h);
    if (i != SIZE_MAX)
        return &m->v[i];
    if ((m->used + 1) * 4 >= m->cap * 3 && !smap_grow(m))
        return NULL;
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    for (i = h & (m->cap - 1); m->v[i].s && m->v[i].s != TOMB; i = (i + 1) & (m->cap - 1))
        ;
    if (!m->v[i].s)
        m->used++;
    m->v[i] = (slot_t){ h, copy, len, NULL };
    m->n++;
    *added = true;
    return &m->v[i];
}

static void smap_del(smap_t *m, size_t i)
{
    free(m->v[i].s);
    m->v[i].s = TOMB;
    m->v[i].val = NULL;
    m->n--;
}

static void smap_clear(smap_t *m, void (*free_val)(void *))
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->v[i].s && m->v[i].s != TOMB) {
            if (free_val)
                free_val(m->v[i].val);
            free(m->v[i].s);
        }
    free(m->v);
    memset(m, 0, sizeof(*m));
}

static void free_keyset(void *v)
{
    smap_clear(v, NULL);
    free(v);
}

/* ------------------------------------------------------------------------ */
/* The index                                                                */
/* ------------------------------------------------------------------------ */

struct ts_index {
    pthread_mutex_t mu;       /* pairs, entries */
    smap_t pairs;             /* "name\0value" -> smap_t of keys */
    size_t entries;
    uint64_t seed;            /* of str_hash: the keyspace's, with the index's own tweak */
    atomic_bool scanning;     /* a rebuild is under way: not trusted */
    pthread_mutex_t scan_mu;  /* one full scan at a time */
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    ks_t *ks;
    ts_index_t *ix;
} *registry;
static size_t nregistry;

ts_index_t *ts_index_of(ks_t *ks)
{
    pthread_mutex_lock(&registry_mu);
    ts_index_t *ix = NULL;
    for (size_t i = 0; i < nregistry && !ix; i++)
        if (registry[i].ks == ks)
            ix = registry[i].ix;
    if (!ix && (ix = calloc(1, sizeof(*ix)))) {
        void *n = realloc(registry, (nregistry + 1) * sizeof(*registry));
        if (!n) {
            free(ix);
            ix = NULL;
        } else {
            registry = n;
            ix->seed = ks_hash_seed(ks) ^ 0x5453494458ULL;   /* "TSIDX" */
            pthread_mutex_init(&ix->mu, NULL);
            pthread_mutex_init(&ix->scan_mu, NULL);
            registry[nregistry].ks = ks;
            registry[nregistry++].ix = ix;
        }
    }
    pthread_mutex_unlock(&registry_mu);
    return ix;
}

/* "name\0value" into buf (NULL when too long). */
static size_t pair_text(char *buf, size_t cap, const char *n, size_t nl, const char *v, size_t vl)
{
    if (nl + 1 + vl > cap)
        return 0;
    memcpy(buf, n, nl);
    buf[nl] = '\0';
    memcpy(buf + nl + 1, v, vl);
    return nl + 1 + vl;
}

#define PAIR_MAX (2 * TS_MAX_LABEL_LEN + 1)

bool ts_index_add(ts_index_t *ix, const char *key, size_t klen, ts_t *ts)
{
    char pair[PAIR_MAX];
    bool ok = true;
    uint64_t kh = str_hash(ix->seed, key, klen);
    pthread_mutex_lock(&ix->mu);
    for (size_t i = 0; i < ts_label_count(ts) && ok; i++) {
        ts_label_t l = ts_label_at(ts, i);
        size_t plen = pair_text(pair, sizeof(pair), l.name, l.name_len, l.value, l.value_len);
        bool added;
        slot_t *p = smap_put(&ix->pairs, pair, plen, str_hash(ix->seed, pair, plen), &added);
        if (p && added && !(p->val = calloc(1, sizeof(smap_t)))) {
            smap_del(&ix->pairs, (size_t)(p - ix->pairs.v));
            p = NULL;
        }
        ok = p && smap_put(p->val, key, klen, kh, &added);
        if (ok && added)
            ix->entries++;
    }
    pthread_mutex_unlock(&ix->mu);
    if (ok)
        ts_mark_indexed(ts);
    return ok;
}

bool ts_index_usable(ts_index_t *ix)
{
    if (atomic_load(&ix->scanning) || ts_unindexed_count() > 0)
        return false;
    pthread_mutex_lock(&ix->mu);
    bool ok = ix->entries <= 2 * (size_t)ts_label_pairs_alive() + 1024;
    pthread_mutex_unlock(&ix->mu);
    return ok;
}

static smap_t *keys_of(ts_index_t *ix, const ts_matcher_t *m, size_t k)
{
    char pair[PAIR_MAX];
    size_t plen = pair_text(pair, sizeof(pair), m->name, m->name_len, m->value[k], m->value_len[k]);
    if (!plen)
        return NULL;
    size_t i = smap_find(&ix->pairs, pair, plen, str_hash(ix->seed, pair, plen));
    return i == SIZE_MAX ? NULL : ix->pairs.v[i].val;
}

size_t ts_index_count(ts_index_t *ix, const ts_matcher_t *m)
{
    size_t n = 0;
    pthread_mutex_lock(&ix->mu);
    for (size_t k = 0; k < m->nvalues; k++) {
        smap_t *s = keys_of(ix, m, k);
        n += s ? s->n : 0;
    }
    pthread_mutex_unlock(&ix->mu);
    return n;
}

bool ts_index_candidates(ts_index_t *ix, const ts_matcher_t *m, char ***keys, size_t *n)
{
    *keys = NULL;
    *n = 0;
    bool ok = true;
    pthread_mutex_lock(&ix->mu);
    size_t total = 0;
    for (size_t k = 0; k < m->nvalues; k++) {
        smap_t *s = keys_of(ix, m, k);
        total += s ? s->n : 0;
    }
    char **out = total ? malloc(total * sizeof(*out)) : NULL;
    if (total && !out)
        ok = false;
    for (size_t k = 0; k < m->nvalues && ok; k++) {
        smap_t *s = keys_of(ix, m, k);
        for (size_t i = 0; s && i < s->cap && ok; i++) {
            if (!s->v[i].s || s->v[i].s == TOMB)
                continue;
            char *c = malloc(s->v[i].len + 1);
            if (!c) {
                ok = false;
                break;
            }
            memcpy(c, s->v[i].s, s->v[i].len + 1);
            out[(*n)++] = c;
        }
    }
    pthread_mutex_unlock(&ix->mu);
    if (!ok) {
        for (size_t i = 0; i < *n; i++)
            free(out[i]);
        free(out);
        *n = 0;
        return false;
    }
    *keys = out;
    return true;
}

size_t ts_index_probe_max(ts_index_t *ix)
{
    pthread_mutex_lock(&ix->mu);
    size_t longest = 0, run = 0, cap = ix->pairs.cap;
    /* twice round, so a run that wraps past the end is counted whole */
    for (size_t k = 0; k < 2 * cap; k++) {
        run = ix->pairs.v[k % cap].s ? run + 1 : 0;
        if (run > longest)
            longest = run < cap ? run : cap;
    }
    pthread_mutex_unlock(&ix->mu);
    return longest;
}

void ts_index_forget(ts_index_t *ix, const ts_matcher_t *m, const char *key, size_t klen)
{
    uint64_t kh = str_hash(ix->seed, key, klen);
    pthread_mutex_lock(&ix->mu);
    for (size_t k = 0; k < m->nvalues; k++) {
        smap_t *s = keys_of(ix, m, k);
        size_t i = s ? smap_find(s, key, klen, kh) : SIZE_MAX;
        if (i != SIZE_MAX) {
            smap_del(s, i);
            ix->entries--;
        }
    }
    pthread_mutex_unlock(&ix->mu);
}

void ts_index_scan_begin(ts_index_t *ix)
{
    pthread_mutex_lock(&ix->scan_mu);
    pthread_mutex_lock(&ix->mu);
    if (ix->entries > 2 * (size_t)ts_label_pairs_alive() + 1024) {
        atomic_store(&ix->scanning, true);
        smap_clear(&ix->pairs, free_keyset);
        ix->entries = 0;
    }
    pthread_mutex_unlock(&ix->mu);
}

void ts_index_scan_end(ts_index_t *ix, bool ok)
{
    if (ok)
        atomic_store(&ix->scanning, false);
    pthread_mutex_unlock(&ix->scan_mu);
}
