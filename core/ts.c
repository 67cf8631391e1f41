/*
 * ts.c - Gorilla-compressed time series (see ts.h for the semantics).
 *
 * Compression: Pelkonen et al., "Gorilla: A Fast, Scalable, In-Memory Time
 * Series Database", VLDB 2015, as RedisTimeSeries does; the codec is
 * core/gorilla.c.  Samples are kept in time order in chunks of at most
 * TS_CHUNK_MAX_SAMPLES samples; each chunk is one bit stream (most
 * significant bit first):
 *
 *   sample 0:  64 bits  the value's IEEE-754 pattern   (its timestamp is in the header)
 *   sample k:  timestamp as delta-of-delta D = (t_k - t_k-1) - (t_k-1 - t_k-2),
 *              zigzag-coded Z = (D << 1) ^ (D >> 63), with the first delta
 *              taken against a previous delta of 0:
 *                '0'                      Z = 0        (regular interval: 1 bit)
 *                '10'    +  7 bits        Z < 2^7      (jitter up to +-64 ms)
 *                '110'   + 12 bits        Z < 2^12
 *                '1110'  + 20 bits        Z < 2^20
 *                '11110' + 32 bits        Z < 2^32
 *                '11111' + 64 bits        anything
 *              then the value as X = bits(v_k) XOR bits(v_k-1):
 *                '0'                      X = 0        (same value: 1 bit)
 *                '10' + meaningful bits   X fits the previous window
 *                                         (>= its leading and trailing zeros)
 *                '11' + 5 bits leading zeros (capped at 31)
 *                     + 6 bits (length - 1) + `length` meaningful bits,
 *                                         which sets the window
 *
 * At worst a sample takes 5+64 + 2+5+6+64 = 146 bits.  A regular series of
 * slowly changing values costs about 1 bit of timestamp and a few bits of
 * value per sample (Gorilla reports 1.37 bytes/sample on Facebook's data).
 *
 *   chunk (one allocation)             bytes
 *   first_ts, last_ts, prev_delta        24   last_ts/prev_delta/prev_bits/lead/trail
 *   prev_bits                             8   are the encoder's state, so appending
 *   count, nbits, cap                    12   is O(1) (no decode)
 *   lead, trail (+ padding)               4
 *   data[cap]                           cap   the bit stream; bits past nbits are 0
 *
 * Index: the chunk pointers form one array sorted by time, with
 * non-overlapping ranges (chunk i+1 starts after chunk i ends), found by
 * binary search.  Appending in time order extends the last chunk in place;
 * anything else (an out-of-order sample, a duplicate resolved by the policy,
 * a deletion) decodes the chunks it touches, merges, and re-encodes them into
 * new chunks (split evenly when over the limits) that replace the old ones
 * only once everything succeeded, so a failed request changes nothing.
 *
 * Retention: with R > 0 samples older than newest - R are invisible at once
 * (queries start at that cutoff, counts skip them) and freed a whole chunk at
 * a time as the cutoff passes a chunk's end; a rewritten chunk drops them.
 * Invariant: only the first chunk may hold samples below the cutoff.
 *
 * Memory for one day of 1-second samples (86 400), everything counted
 * (headers, index, slack), measured by tests/unit/test_ts.c:
 *   slowly changing value (0.1 steps in ~10% of seconds)   0.96 bytes/sample
 *   constant value                                          0.32 bytes/sample
 *   random doubles in [0, 1000) (incompressible)            7.76 bytes/sample
 * (a Redis sorted set holding the same samples: ~130 bytes/sample).
 * Per chunk: 48 bytes of header + the stream + 8 bytes in the index.
 *
 * The rest of the time series is in ts_rule.c, ts_filter.c, ts_agg.c,
 * ts_range.c and ts_codec.c (core/ts_impl.h says which part does what).
 */
#include "core/ts.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/ts_impl.h"

/* ======================================================================== */
/* Chunks and the series' memory                                            */
/* ======================================================================== */

/* Encodes one sample after the chunk's last (t > last_ts); the stream must
 * have room for TS_SAMPLE_MAX_BITS more bits. */
static void chunk_put(ts_chunk_t *c, int64_t t, double v)
{
    gorilla_enc_t e = chunk_enc(c);
    gorilla_put(&e, c->data, t, v);
    chunk_set_enc(c, &e);
}

static atomic_long unindexed;     /* live series not yet indexed */
static atomic_long pairs_alive;   /* labels of live series */

void ts_mark_indexed(ts_t *ts)
{
    if (!ts->indexed) {
        ts->indexed = true;
        atomic_fetch_sub(&unindexed, 1);
    }
}

long ts_unindexed_count(void) { return atomic_load(&unindexed); }
long ts_label_pairs_alive(void) { return atomic_load(&pairs_alive); }

ts_chunk_t *tsi_chunk_new(ts_t *ts, uint32_t cap)
{
    ts_chunk_t *c = calloc(1, sizeof(ts_chunk_t) + cap);
    if (!c)
        return NULL;
    c->cap = cap;
    c->lead = GORILLA_NO_WINDOW;
    ts->mem += chunk_bytes(c);
    return c;
}

static void chunk_release(ts_t *ts, ts_chunk_t *c)
{
    if (!c)
        return;
    ts->mem -= chunk_bytes(c);
    free(c);
}

/* Makes room for one more sample; false on allocation failure (unchanged). */
static bool chunk_room(ts_t *ts, ts_chunk_t **pc)
{
    ts_chunk_t *c = *pc;
    uint64_t need = ((uint64_t)c->nbits + TS_SAMPLE_MAX_BITS + 7) / 8;
    if (need <= c->cap)
        return true;
    uint64_t ncap = c->cap * 2ULL;
    if (ncap < TS_CHUNK_MIN_CAP)
        ncap = TS_CHUNK_MIN_CAP;
    if (ncap < need)
        ncap = need;
    if (ncap > TS_CHUNK_CAP_MAX)
        ncap = TS_CHUNK_CAP_MAX;
    if (ncap < need)
        return false;   /* cannot happen: a chunk that is not full always fits one more */
    size_t old = chunk_bytes(c);
    ts_chunk_t *n = realloc(c, sizeof(ts_chunk_t) + ncap);
    if (!n)
        return false;
    memset(n->data + n->cap, 0, ncap - n->cap);
    n->cap = (uint32_t)ncap;
    ts->mem += chunk_bytes(n) - old;
    *pc = n;
    return true;
}

/* Trims a chunk's stream allocation to its size (a failure keeps it as is). */
static ts_chunk_t *chunk_shrink(ts_t *ts, ts_chunk_t *c)
{
    uint32_t used = (c->nbits + 7) / 8;
    if (used >= c->cap)
        return c;
    size_t old = chunk_bytes(c);
    ts_chunk_t *n = realloc(c, sizeof(ts_chunk_t) + used);
    if (!n)
        return c;
    n->cap = used;
    ts->mem -= old - chunk_bytes(n);
    return n;
}

bool tsi_ensure_array(ts_t *ts, size_t want)
{
    if (want <= ts->cap)
        return true;
    size_t ncap = ts->cap ? ts->cap : 4;
    while (ncap < want)
        ncap *= 2;
    ts_chunk_t **n = realloc(ts->chunks, ncap * sizeof(*n));
    if (!n)
        return false;
    ts->mem += (ncap - ts->cap) * sizeof(*n);
    ts->chunks = n;
    ts->cap = ncap;
    return true;
}
/* Frees whole chunks that ended before the cutoff (the last chunk holds the
 * newest sample, so it always stays). */
static void trim(ts_t *ts)
{
    int64_t cut = cutoff(ts);
    size_t k = 0;
    while (k + 1 < ts->nchunks && ts->chunks[k]->last_ts < cut) {
        ts->total -= ts->chunks[k]->count;
        chunk_release(ts, ts->chunks[k]);
        k++;
    }
    if (k) {
        memmove(ts->chunks, ts->chunks + k, (ts->nchunks - k) * sizeof(ts->chunks[0]));
        ts->nchunks -= k;
    }
}

/* ======================================================================== */
/* Create, free, accessors                                                  */
/* ======================================================================== */

ts_t *ts_create(int64_t retention_ms, ts_policy_t policy, const ts_label_t *labels, size_t nlabels)
{
    ts_t *ts = calloc(1, sizeof(*ts));
    if (!ts)
        return NULL;
    ts->retention = retention_ms;
    ts->policy = policy;
    ts->mem = sizeof(*ts);
    atomic_fetch_add(&unindexed, 1);
    if (nlabels) {
        ts->labels = calloc(nlabels, sizeof(ts_lbl_t));
        if (!ts->labels) {
            ts_free(ts);
            return NULL;
        }
        ts->mem += nlabels * sizeof(ts_lbl_t);
        for (size_t i = 0; i < nlabels; i++) {
            size_t sz = labels[i].name_len + labels[i].value_len + 2;
            char *p = malloc(sz);
            if (!p) {
                ts_free(ts);
                return NULL;
            }
            memcpy(p, labels[i].name, labels[i].name_len);
            p[labels[i].name_len] = '\0';
            memcpy(p + labels[i].name_len + 1, labels[i].value, labels[i].value_len);
            p[sz - 1] = '\0';
            ts->labels[i].name = p;
            ts->labels[i].value = p + labels[i].name_len + 1;
            ts->labels[i].nlen = (uint32_t)labels[i].name_len;
            ts->labels[i].vlen = (uint32_t)labels[i].value_len;
            ts->nlabels = i + 1;
            ts->mem += sz;
            atomic_fetch_add(&pairs_alive, 1);
        }
    }
    return ts;
}

void ts_free(ts_t *ts)
{
    if (!ts)
        return;
    if (!ts->indexed)
        atomic_fetch_sub(&unindexed, 1);
    atomic_fetch_sub(&pairs_alive, (long)ts->nlabels);
    for (size_t i = 0; i < ts->nchunks; i++)
        free(ts->chunks[i]);
    free(ts->chunks);
    for (size_t i = 0; i < ts->nlabels; i++)
        free(ts->labels[i].name);
    free(ts->labels);
    for (size_t i = 0; i < ts->nrules; i++)
        free(ts->rules[i].dest);
    free(ts->rules);
    free(ts->src);
    free(ts);
}

int64_t ts_retention(const ts_t *ts) { return ts->retention; }
ts_policy_t ts_policy(const ts_t *ts) { return ts->policy; }
size_t ts_label_count(const ts_t *ts) { return ts->nlabels; }

ts_label_t ts_label_at(const ts_t *ts, size_t i)
{
    ts_label_t l = { ts->labels[i].name, ts->labels[i].nlen, ts->labels[i].value, ts->labels[i].vlen };
    return l;
}

/* ======================================================================== */
/* Rewriting chunks (everything but in-order appends)                       */
/* ======================================================================== */

/* A growable list of chunk pointers. */
typedef struct cvec {
    ts_chunk_t **v;
    size_t n, cap;
} cvec_t;

static bool cvec_push(cvec_t *cv, ts_chunk_t *c)
{
    if (cv->n == cv->cap) {
        size_t ncap = cv->cap ? cv->cap * 2 : 8;
        ts_chunk_t **nv = realloc(cv->v, ncap * sizeof(*nv));
        if (!nv)
            return false;
        cv->v = nv;
        cv->cap = ncap;
    }
    cv->v[cv->n++] = c;
    return true;
}

static void cvec_discard(ts_t *ts, cvec_t *cv)
{
    for (size_t i = 0; i < cv->n; i++)
        chunk_release(ts, cv->v[i]);
    free(cv->v);
    cv->v = NULL;
    cv->n = cv->cap = 0;
}

/* Encodes t[]/v[] (n > 0, strictly increasing) into new chunks appended to
 * cv, split evenly when more than one chunk is needed. */
static bool encode_run(ts_t *ts, const int64_t *t, const double *v, size_t n, cvec_t *cv)
{
    size_t k = (n + TS_CHUNK_MAX_SAMPLES - 1) / TS_CHUNK_MAX_SAMPLES;
    size_t per = (n + k - 1) / k;
    ts_chunk_t *c = NULL;
    for (size_t i = 0; i < n; i++) {
        if (c && (c->count >= per || chunk_full(c))) {
            c = chunk_shrink(ts, c);
            if (!cvec_push(cv, c)) {
                chunk_release(ts, c);
                return false;
            }
            c = NULL;
        }
        if (!c && !(c = tsi_chunk_new(ts, TS_CHUNK_MIN_CAP)))
            return false;
        if (!chunk_room(ts, &c)) {
            chunk_release(ts, c);
            return false;
        }
        chunk_put(c, t[i], v[i]);
    }
    c = chunk_shrink(ts, c);
    if (!cvec_push(cv, c)) {
        chunk_release(ts, c);
        return false;
    }
    return true;
}

/* Replaces the old chunk at index aff[k] (ascending) by the new chunks
 * repl->v[rstart[k] .. rstart[k+1]), for each k < naff; when the series has
 * no chunks (naff = 0) all of repl becomes the series.  On success takes the
 * new chunks (repl is emptied) and frees the old ones; on allocation failure
 * changes nothing. */
static bool install(ts_t *ts, const size_t *aff, size_t naff, const size_t *rstart, cvec_t *repl)
{
    size_t nn = ts->nchunks - naff + repl->n;
    ts_chunk_t **arr = NULL;
    size_t acap = 0;
    if (nn) {
        acap = nn < 4 ? 4 : nn;
        arr = malloc(acap * sizeof(*arr));
        if (!arr)
            return false;
    }
    size_t o = 0, k = 0;
    if (ts->nchunks == 0) {
        for (size_t j = 0; j < repl->n; j++)
            arr[o++] = repl->v[j];
    }
    for (size_t i = 0; i < ts->nchunks; i++) {
        if (k < naff && aff[k] == i) {
            for (size_t j = rstart[k]; j < rstart[k + 1]; j++)
                arr[o++] = repl->v[j];
            ts->total -= ts->chunks[i]->count;
            chunk_release(ts, ts->chunks[i]);
            k++;
        } else {
            arr[o++] = ts->chunks[i];
        }
    }
    for (size_t j = 0; j < repl->n; j++)
        ts->total += repl->v[j]->count;
    ts->mem -= ts->cap * sizeof(*arr);
    ts->mem += acap * sizeof(*arr);
    free(ts->chunks);
    ts->chunks = arr;
    ts->nchunks = o;
    ts->cap = acap;
    free(repl->v);
    repl->v = NULL;
    repl->n = repl->cap = 0;
    return true;
}

/* ======================================================================== */
/* Adding samples                                                           */
/* ======================================================================== */

/* A decoded chunk cache for lookups in ascending timestamp order. */
typedef struct dcache {
    int64_t t[TS_CHUNK_MAX_SAMPLES];
    double v[TS_CHUNK_MAX_SAMPLES];
    size_t idx;             /* decoded chunk, SIZE_MAX none */
} dcache_t;

/* Looks for a sample at exactly t; on success stores its value. */
static bool lookup(const ts_t *ts, dcache_t *dc, int64_t t, double *v)
{
    if (!has_samples(ts))
        return false;
    size_t j = chunk_for(ts, t);
    const ts_chunk_t *c = ts->chunks[j];
    if (t < c->first_ts || t > c->last_ts)
        return false;
    if (dc->idx != j) {
        chunk_decode(c, dc->t, dc->v);
        dc->idx = j;
    }
    size_t i = lower_bound(dc->t, c->count, t);
    if (i < c->count && dc->t[i] == t) {
        *v = dc->v[i];
        return true;
    }
    return false;
}

static double apply_policy(ts_policy_t p, double cur, double v)
{
    switch (p) {
    case TS_DUP_FIRST: return cur;
    case TS_DUP_LAST: return v;
    case TS_DUP_MIN: return v < cur ? v : cur;
    case TS_DUP_MAX: return v > cur ? v : cur;
    case TS_DUP_SUM: return cur + v;
    default: return cur;
    }
}

/* In-order appends after the newest sample: extends the last chunk in place,
 * opening new chunks as they fill; rolled back on allocation failure. */
static core_status_t append_run(ts_t *ts, const ts_sample_t *s, size_t n)
{
    if (!tsi_ensure_array(ts, ts->nchunks + n / TS_MIN_SAMPLES_PER_FULL_CHUNK + 2))
        return CORE_NOMEM;
    size_t old_n = ts->nchunks;
    gorilla_enc_t saved = old_n ? chunk_enc(ts->chunks[old_n - 1]) : gorilla_empty();
    for (size_t i = 0; i < n; i++) {
        ts_chunk_t **pc = ts->nchunks ? &ts->chunks[ts->nchunks - 1] : NULL;
        if (!pc || chunk_full(*pc)) {
            if (pc)
                *pc = chunk_shrink(ts, *pc);
            ts_chunk_t *c = tsi_chunk_new(ts, TS_CHUNK_MIN_CAP);
            if (!c)
                goto rollback;
            ts->chunks[ts->nchunks++] = c;
            pc = &ts->chunks[ts->nchunks - 1];
        }
        if (!chunk_room(ts, pc))
            goto rollback;
        chunk_put(*pc, s[i].ts, s[i].value);
    }
    ts->total += n;
    trim(ts);
    return CORE_OK;

rollback:
    while (ts->nchunks > old_n)
        chunk_release(ts, ts->chunks[--ts->nchunks]);
    if (old_n) {
        ts_chunk_t *c = ts->chunks[old_n - 1];
        uint32_t from = saved.nbits, to = c->nbits;
        if (from & 7)
            c->data[from >> 3] &= (uint8_t)(0xff << (8 - (from & 7)));
        uint32_t b = (from + 7) / 8, e = (to + 7) / 8;
        if (e > b)
            memset(c->data + b, 0, e - b);
        chunk_set_enc(c, &saved);
    }
    return CORE_NOMEM;
}

typedef struct order {
    int64_t ts;
    size_t i;
} order_t;

static int order_cmp(const void *a, const void *b)
{
    const order_t *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

/* Merges the sorted, resolved updates ut[]/uv[] (unique timestamps) into the
 * series, dropping whatever ends below the new retention cutoff. */
static core_status_t merge_updates(ts_t *ts, const int64_t *ut, const double *uv, size_t nu)
{
    int64_t new_newest = has_samples(ts) && newest(ts) > ut[nu - 1] ? newest(ts) : ut[nu - 1];
    int64_t cut = cutoff_for(ts->retention, new_newest);
    core_status_t st = CORE_NOMEM;
    cvec_t repl = { 0 };
    size_t *aff = NULL, *rstart = NULL, naff = 0;
    int64_t *mt = malloc((TS_CHUNK_MAX_SAMPLES + nu) * sizeof(*mt));
    double *mv = malloc((TS_CHUNK_MAX_SAMPLES + nu) * sizeof(*mv));
    int64_t *ct = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*ct));
    double *cv = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*cv));
    aff = malloc((nu + 1) * sizeof(*aff));
    rstart = malloc((nu + 2) * sizeof(*rstart));
    if (!mt || !mv || !ct || !cv || !aff || !rstart)
        goto out;

    if (!has_samples(ts)) {
        size_t m = 0;
        for (size_t i = 0; i < nu; i++)
            if (ut[i] >= cut) {
                mt[m] = ut[i];
                mv[m++] = uv[i];
            }
        if (m && !encode_run(ts, mt, mv, m, &repl))
            goto out;
        rstart[0] = 0;
    } else {
        size_t u = 0;
        while (u < nu) {
            size_t j = chunk_for(ts, ut[u]);
            size_t ue = u + 1;
            while (ue < nu && chunk_for(ts, ut[ue]) == j)
                ue++;
            const ts_chunk_t *c = ts->chunks[j];
            chunk_decode(c, ct, cv);
            size_t a = 0, m = 0, b = u;
            while (a < c->count || b < ue) {
                int64_t t;
                double v;
                if (b >= ue || (a < c->count && ct[a] < ut[b])) {
                    t = ct[a];
                    v = cv[a++];
                } else {
                    if (a < c->count && ct[a] == ut[b])
                        a++;   /* replaced by its resolved value */
                    t = ut[b];
                    v = uv[b++];
                }
                if (t >= cut) {
                    mt[m] = t;
                    mv[m++] = v;
                }
            }
            aff[naff] = j;
            rstart[naff++] = repl.n;
            if (m && !encode_run(ts, mt, mv, m, &repl))
                goto out;
            u = ue;
        }
        rstart[naff] = repl.n;
    }
    if (!install(ts, aff, naff, rstart, &repl))
        goto out;
    trim(ts);
    st = CORE_OK;
out:
    cvec_discard(ts, &repl);
    free(mt);
    free(mv);
    free(ct);
    free(cv);
    free(aff);
    free(rstart);
    return st;
}

core_status_t ts_add(ts_t *ts, const ts_sample_t *s, size_t n, ts_policy_t policy, size_t *failed)
{
    size_t dummy;
    if (!failed)
        failed = &dummy;
    *failed = 0;
    if (n == 0)
        return CORE_OK;

    /* The common case: every sample newer than everything before it. */
    bool in_order = true;
    int64_t prev = has_samples(ts) ? newest(ts) : -1;
    for (size_t i = 0; i < n && in_order; i++) {
        in_order = s[i].ts > prev;
        prev = s[i].ts;
    }
    if (in_order)
        return append_run(ts, s, n);

    core_status_t st = CORE_NOMEM;
    order_t *ord = malloc(n * sizeof(*ord));
    uint8_t *dup = calloc(n, 1);          /* 1: earlier sample in the batch, 2: in the series */
    dcache_t *dc = malloc(sizeof(*dc));
    int64_t *ut = malloc(n * sizeof(*ut));
    double *uv = malloc(n * sizeof(*uv));
    if (!ord || !dup || !dc || !ut || !uv)
        goto out;
    for (size_t i = 0; i < n; i++) {
        ord[i].ts = s[i].ts;
        ord[i].i = i;
    }
    qsort(ord, n, sizeof(*ord), order_cmp);

    /* Duplicates, found in timestamp order so each chunk is decoded once. */
    dc->idx = SIZE_MAX;
    for (size_t g = 0; g < n;) {
        size_t ge = g + 1;
        while (ge < n && ord[ge].ts == ord[g].ts)
            dup[ord[ge++].i] = 1;
        double ev;
        if (lookup(ts, dc, ord[g].ts, &ev))
            dup[ord[g].i] = 2;
        g = ge;
    }

    /* The first sample that fails when applied one at a time. */
    size_t fail = n;
    core_status_t why = CORE_OK;
    bool have = has_samples(ts);
    int64_t top = have ? newest(ts) : 0;
    for (size_t i = 0; i < n; i++) {
        if (ts->retention > 0 && have && s[i].ts < top && top - s[i].ts > ts->retention) {
            fail = i;
            why = CORE_TOO_OLD;
            break;
        }
        if (policy == TS_DUP_BLOCK && dup[i]) {
            fail = i;
            why = CORE_DUPLICATE;
            break;
        }
        if (!have || s[i].ts > top)
            top = s[i].ts;
        have = true;
    }

    /* Resolve each timestamp's final value, in batch order within it.  MIN,
     * MAX and SUM cannot combine a NaN (RedisTimeSeries refuses it as BLOCK
     * does); a result that is not finite is an overflow. */
    size_t nu = 0, overflow = n;
    core_status_t ovf_why = CORE_OVERFLOW;
    bool combines = policy == TS_DUP_MIN || policy == TS_DUP_MAX || policy == TS_DUP_SUM;
    dc->idx = SIZE_MAX;
    for (size_t g = 0; g < n;) {
        size_t ge = g + 1;
        while (ge < n && ord[ge].ts == ord[g].ts)
            ge++;
        double cur;
        size_t k = g;
        if (!(dup[ord[g].i] == 2 && lookup(ts, dc, ord[g].ts, &cur)))
            cur = s[ord[k++].i].value;
        for (; k < ge && ord[k].i < fail; k++) {
            double v = s[ord[k].i].value;
            bool nan_clash = combines && (isnan(cur) || isnan(v));
            cur = apply_policy(policy, cur, v);
            if ((nan_clash || isinf(cur)) && ord[k].i < overflow) {
                overflow = ord[k].i;
                ovf_why = nan_clash ? CORE_DUPLICATE : CORE_OVERFLOW;
            }
        }
        ut[nu] = ord[g].ts;
        uv[nu++] = cur;
        g = ge;
    }
    if (overflow < fail) {
        *failed = overflow;
        st = ovf_why;
        goto out;
    }
    if (fail < n) {
        *failed = fail;
        st = why;
        goto out;
    }
    st = merge_updates(ts, ut, uv, nu);
out:
    free(ord);
    free(dup);
    free(dc);
    free(ut);
    free(uv);
    return st;
}

/* ======================================================================== */
/* Deleting                                                                 */
/* ======================================================================== */

int64_t ts_delete_range(ts_t *ts, int64_t from, int64_t to)
{
    if (!has_samples(ts))
        return 0;
    int64_t cut = cutoff(ts);
    if (from < cut)
        from = cut;
    if (from > to)
        return 0;
    int64_t *ct = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*ct));
    double *cv = malloc(TS_CHUNK_MAX_SAMPLES * sizeof(*cv));
    size_t *aff = malloc((ts->nchunks + 1) * sizeof(*aff));
    size_t *rstart = malloc((ts->nchunks + 2) * sizeof(*rstart));
    cvec_t repl = { 0 };
    int64_t deleted = -1;
    if (!ct || !cv || !aff || !rstart)
        goto out;

    /* Count first: a deletion of nothing must change nothing. */
    int64_t count = 0;
    size_t j0 = chunk_for(ts, from);
    if (ts->chunks[j0]->last_ts < from)
        j0++;
    size_t j1 = j0;
    for (; j1 < ts->nchunks && ts->chunks[j1]->first_ts <= to; j1++) {
        const ts_chunk_t *c = ts->chunks[j1];
        if (c->first_ts >= from && c->last_ts <= to) {
            count += c->count;
        } else {
            chunk_decode(c, ct, cv);
            for (uint32_t i = 0; i < c->count; i++)
                count += ct[i] >= from && ct[i] <= to;
        }
    }
    if (count == 0) {
        deleted = 0;
        goto out;
    }
    /* Rewrite the chunks in [j0, j1), and the first chunk if it still holds
     * samples below the cutoff (the newest sample may go, and those must not
     * come back into view). */
    size_t naff = 0;
    for (size_t j = (ts->chunks[0]->first_ts < cut ? 0 : j0); j < j1; j++) {
        if (j > 0 && j < j0)
            continue;
        const ts_chunk_t *c = ts->chunks[j];
        aff[naff] = j;
        rstart[naff++] = repl.n;
        if (c->first_ts >= from && c->last_ts <= to)
            continue;   /* entirely deleted */
        chunk_decode(c, ct, cv);
        size_t m = 0;
        for (uint32_t i = 0; i < c->count; i++)
            if (ct[i] >= cut && (ct[i] < from || ct[i] > to)) {
                ct[m] = ct[i];
                cv[m++] = cv[i];
            }
        if (m && !encode_run(ts, ct, cv, m, &repl))
            goto out;
    }
    rstart[naff] = repl.n;
    if (!install(ts, aff, naff, rstart, &repl))
        goto out;
    deleted = count;
out:
    cvec_discard(ts, &repl);
    free(ct);
    free(cv);
    free(aff);
    free(rstart);
    return deleted;
}

bool ts_delete_beyond_retention(const ts_t *ts, const ts_rule_t *rule, int64_t from)
{
    int64_t t = from;
    if (rule) {
        t = bucket_start(from, rule->bucket_ms, rule->align);
        if (t < 0)
            t = 0;
    }
    return t < cutoff(ts);   /* (no retention or no samples: INT64_MIN) */
}

/* ======================================================================== */
/* INCRBY, ALTER                                                            */
/* ======================================================================== */

bool ts_last(const ts_t *ts, ts_sample_t *out)
{
    if (!has_samples(ts))
        return false;
    const ts_chunk_t *c = ts->chunks[ts->nchunks - 1];
    double v;
    memcpy(&v, &c->prev_bits, sizeof(v));   /* the encoder keeps the last value's bits */
    *out = (ts_sample_t){ c->last_ts, v };
    return true;
}

core_status_t ts_incrby(ts_t *ts, int64_t t, double by, double *value)
{
    ts_sample_t last = { 0, 0 };
    bool have = ts_last(ts, &last);
    if (have && t < last.ts)
        return CORE_UNORDERED;
    double v = (have ? last.value : 0) + by;
    if (!isfinite(v))
        return CORE_OVERFLOW;   /* a NaN newest value, or past the doubles */
    ts_sample_t s = { t, v };
    core_status_t st = ts_add(ts, &s, 1, TS_DUP_LAST, NULL);
    if (st == CORE_OK)
        *value = v;
    return st;
}

void ts_set_retention(ts_t *ts, int64_t retention_ms)
{
    ts->retention = retention_ms;
    trim(ts);
}

void ts_set_policy(ts_t *ts, ts_policy_t policy) { ts->policy = policy; }

bool ts_set_labels(ts_t *ts, const ts_label_t *labels, size_t nlabels)
{
    ts_t *fresh = ts_create(0, TS_DUP_BLOCK, labels, nlabels);
    if (!fresh)
        return false;
    for (size_t i = 0; i < ts->nlabels; i++) {
        ts->mem -= ts->labels[i].nlen + ts->labels[i].vlen + 2;
        free(ts->labels[i].name);
    }
    ts->mem -= ts->nlabels * sizeof(ts_lbl_t);
    atomic_fetch_sub(&pairs_alive, (long)ts->nlabels);
    free(ts->labels);
    ts->labels = fresh->labels;
    ts->nlabels = fresh->nlabels;
    ts->mem += fresh->mem - sizeof(*fresh);
    fresh->labels = NULL;
    fresh->nlabels = 0;
    ts_free(fresh);
    return true;
}

/* ======================================================================== */
/* Info                                                                     */
/* ======================================================================== */

void ts_get_chunk_info(const ts_t *ts, size_t i, ts_chunk_info_t *out)
{
    const ts_chunk_t *c = ts->chunks[i];
    out->samples = c->count;
    out->first_ts = c->first_ts;
    out->last_ts = c->last_ts;
}

void ts_get_info(const ts_t *ts, ts_info_t *out)
{
    memset(out, 0, sizeof(*out));
    out->memory_bytes = ts->mem;
    out->chunks = ts->nchunks;
    out->first_ts = out->last_ts = -1;
    for (size_t i = 0; i < ts->nchunks; i++)
        out->data_bytes += (ts->chunks[i]->nbits + 7) / 8;
    if (!has_samples(ts))
        return;
    out->samples = ts->total;
    out->last_ts = newest(ts);
    const ts_chunk_t *c = ts->chunks[0];
    int64_t cut = cutoff(ts);
    out->first_ts = c->first_ts;
    if (c->first_ts < cut) {   /* only the first chunk may hold samples below the cutoff */
        int64_t t[TS_CHUNK_MAX_SAMPLES];
        chunk_decode(c, t, NULL);
        size_t hidden = lower_bound(t, c->count, cut);
        out->samples -= hidden;
        out->first_ts = t[hidden];
    }
}
