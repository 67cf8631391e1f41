/* hll.c - see hll.h for the algorithm, the byte layout and the memory table. */
#include "core/hll.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "core/hash.h"

#define HLL_BITS 6                        /* bits per dense register */
#define HLL_REGISTER_MAX ((1 << HLL_BITS) - 1)
#define HLL_Q (64 - HLL_P)                /* hash bits left for the run of zeros: 50 */
#define HLL_MAX_VALUE (HLL_Q + 1)         /* the largest value a hash can give: 51 */
#define HLL_P_MASK (HLL_REGISTERS - 1)
#define HLL_DENSE 0                       /* encoding byte values, as Redis */
#define HLL_SPARSE 1
#define HLL_ALPHA_INF 0.721347520444481703680   /* 0.5 / ln 2, Ertl's alpha_inf */
#define HLL_ENC_VERSION 1                 /* first byte of the keyspace encoding */

/* Sparse opcodes (see hll.h). */
#define SP_ZERO_MAX_LEN 64
#define SP_XZERO_MAX_LEN 16384
#define SP_VAL_MAX_VALUE 32
#define SP_VAL_MAX_LEN 4
#define SP_IS_ZERO(p) (((*(p)) & 0xc0) == 0x00)
#define SP_IS_XZERO(p) (((*(p)) & 0xc0) == 0x40)
#define SP_IS_VAL(p) ((*(p)) & 0x80)
#define SP_ZERO_LEN(p) (((*(p)) & 0x3f) + 1)
#define SP_XZERO_LEN(p) (((((p)[0]) & 0x3f) << 8 | ((p)[1])) + 1)
#define SP_VAL_VALUE(p) ((((*(p)) >> 2) & 0x1f) + 1)
#define SP_VAL_LEN(p) (((*(p)) & 0x3) + 1)

static inline void sp_zero_set(uint8_t *p, int len) { *p = (uint8_t)(len - 1); }
static inline void sp_xzero_set(uint8_t *p, int len)
{
    int l = len - 1;
    p[0] = (uint8_t)((l >> 8) | 0x40);
    p[1] = (uint8_t)(l & 0xff);
}
static inline void sp_val_set(uint8_t *p, int val, int len)
{
    *p = (uint8_t)(((val - 1) << 2 | (len - 1)) | 0x80);
}

struct hll {
    uint8_t *buf;   /* Redis's string; dense strings carry one zero byte more */
    size_t len;     /* bytes of the Redis string */
    size_t cap;     /* allocated */
};

/* ------------------------------------------------------------------------ */
/* Raw representation                                                       */
/* ------------------------------------------------------------------------ */

static inline unsigned dense_get(const uint8_t *regs, unsigned i)
{
    unsigned byte = i * HLL_BITS / 8, fb = i * HLL_BITS & 7;
    unsigned b0 = regs[byte], b1 = regs[byte + 1];
    return ((b0 >> fb) | (b1 << (8 - fb))) & HLL_REGISTER_MAX;
}

static inline void dense_put(uint8_t *regs, unsigned i, unsigned v)
{
    unsigned byte = i * HLL_BITS / 8, fb = i * HLL_BITS & 7, fb8 = 8 - fb;
    regs[byte] = (uint8_t)((regs[byte] & ~(HLL_REGISTER_MAX << fb)) | (v << fb));
    regs[byte + 1] = (uint8_t)((regs[byte + 1] & ~(HLL_REGISTER_MAX >> fb8)) | (v >> fb8));
}

static inline bool hdr_sparse(const hll_t *h) { return h->buf[4] == HLL_SPARSE; }
static inline void invalidate_cache(hll_t *h) { h->buf[15] |= 0x80; }
static inline bool cache_valid(const uint8_t *b) { return (b[15] & 0x80) == 0; }

void hll_hash_item(const void *item, size_t len, unsigned *index, uint8_t *value)
{
    uint64_t hash = murmur64a(item, len, HLL_HASH_SEED);
    *index = (unsigned)(hash & HLL_P_MASK);
    hash >>= HLL_P;
    hash |= (uint64_t)1 << HLL_Q;   /* the count stops at Q+1 */
    *value = (uint8_t)(__builtin_ctzll(hash) + 1);
}

hll_t *hll_create(void)
{
    hll_t *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->cap = 32;
    h->buf = calloc(1, h->cap);
    if (!h->buf) {
        free(h);
        return NULL;
    }
    memcpy(h->buf, "HYLL", 4);
    h->buf[4] = HLL_SPARSE;
    sp_xzero_set(h->buf + HLL_HDR_SIZE, HLL_REGISTERS);
    h->len = HLL_HDR_SIZE + 2;
    return h;
}

void hll_free(hll_t *h)
{
    if (!h)
        return;
    free(h->buf);
    free(h);
}

const uint8_t *hll_bytes(const hll_t *h, size_t *len)
{
    *len = h->len;
    return h->buf;
}

bool hll_is_sparse(const hll_t *h) { return hdr_sparse(h); }
void hll_invalidate_cache(hll_t *h) { invalidate_cache(h); }
bool hll_cache_valid(const hll_t *h) { return cache_valid(h->buf); }
size_t hll_memory(const hll_t *h) { return sizeof(*h) + h->cap; }

size_t hll_memory_max(void) { return sizeof(hll_t) + HLL_DENSE_SIZE + 1 + HLL_SPARSE_MAX_BYTES; }

/* Builds the dense string of a (validated) sparse one into `dense`, which
 * holds HLL_DENSE_SIZE + 1 bytes.  The header (and so the cached
 * cardinality) is copied, as Redis's hllSparseToDense does. */
static void sparse_to_dense(const hll_t *h, uint8_t *dense)
{
    memset(dense, 0, HLL_DENSE_SIZE + 1);
    memcpy(dense, h->buf, HLL_HDR_SIZE);
    dense[4] = HLL_DENSE;
    uint8_t *regs = dense + HLL_HDR_SIZE;
    const uint8_t *p = h->buf + HLL_HDR_SIZE, *end = h->buf + h->len;
    unsigned idx = 0;
    while (p < end) {
        if (SP_IS_ZERO(p)) {
            idx += SP_ZERO_LEN(p);
            p++;
        } else if (SP_IS_XZERO(p)) {
            idx += SP_XZERO_LEN(p);
            p += 2;
        } else {
            unsigned run = SP_VAL_LEN(p), v = SP_VAL_VALUE(p);
            while (run-- && idx < HLL_REGISTERS)
                dense_put(regs, idx++, v);
            p++;
        }
    }
}

/* Switches to dense using the spare buffer (HLL_DENSE_SIZE + 1 bytes, owned
 * by h afterwards). */
static void promote(hll_t *h, uint8_t *spare)
{
    sparse_to_dense(h, spare);
    free(h->buf);
    h->buf = spare;
    h->len = HLL_DENSE_SIZE;
    h->cap = HLL_DENSE_SIZE + 1;
}

static int dense_set(hll_t *h, unsigned index, unsigned count)
{
    uint8_t *regs = h->buf + HLL_HDR_SIZE;
    if (count > dense_get(regs, index)) {
        dense_put(regs, index, count);
        return 1;
    }
    return 0;
}

/* Redis's hllSparseSet: sets register `index` to `count` if larger.
 * Preconditions: the string is valid sparse, h->cap >= h->len + 3 unless
 * h->len + 3 > HLL_SPARSE_MAX_BYTES (then growth promotes instead), and
 * *spare holds a dense buffer if a promotion may happen (taken on use).
 * Returns 1 if the register changed, 0 otherwise. */
static int sparse_set(hll_t *h, unsigned index, unsigned count, uint8_t **spare)
{
    if (count > SP_VAL_MAX_VALUE)
        goto promote;

    uint8_t *sparse = h->buf + HLL_HDR_SIZE, *p = sparse, *end = h->buf + h->len;
    uint8_t *prev = NULL, *next;
    long first = 0, span = 0;
    while (p < end) {
        long oplen = 1;
        if (SP_IS_ZERO(p)) {
            span = SP_ZERO_LEN(p);
        } else if (SP_IS_VAL(p)) {
            span = SP_VAL_LEN(p);
        } else {
            span = SP_XZERO_LEN(p);
            oplen = 2;
        }
        if ((long)index <= first + span - 1)
            break;
        prev = p;
        p += oplen;
        first += span;
    }
    if (span == 0 || p >= end)
        return 0;   /* cannot happen on a validated string */

    next = SP_IS_XZERO(p) ? p + 2 : p + 1;
    if (next >= end)
        next = NULL;

    bool is_zero = false, is_xzero = false, is_val = false;
    long runlen;
    if (SP_IS_ZERO(p)) {
        is_zero = true;
        runlen = SP_ZERO_LEN(p);
    } else if (SP_IS_XZERO(p)) {
        is_xzero = true;
        runlen = SP_XZERO_LEN(p);
    } else {
        is_val = true;
        runlen = SP_VAL_LEN(p);
    }

    if (is_val) {
        unsigned oldcount = SP_VAL_VALUE(p);
        if (oldcount >= count)
            return 0;                       /* A: already as large */
        if (runlen == 1) {                  /* B: a run of one */
            sp_val_set(p, (int)count, 1);
            goto updated;
        }
    }
    if (is_zero && runlen == 1) {           /* C: a single zero */
        sp_val_set(p, (int)count, 1);
        goto updated;
    }

    /* D: split the run into up to three opcodes. */
    uint8_t seq[5], *n = seq;
    long last = first + span - 1;
    long len;
    if (is_zero || is_xzero) {
        if ((long)index != first) {
            len = (long)index - first;
            if (len > SP_ZERO_MAX_LEN) {
                sp_xzero_set(n, (int)len);
                n += 2;
            } else {
                sp_zero_set(n, (int)len);
                n++;
            }
        }
        sp_val_set(n, (int)count, 1);
        n++;
        if ((long)index != last) {
            len = last - (long)index;
            if (len > SP_ZERO_MAX_LEN) {
                sp_xzero_set(n, (int)len);
                n += 2;
            } else {
                sp_zero_set(n, (int)len);
                n++;
            }
        }
    } else {
        int curval = SP_VAL_VALUE(p);
        if ((long)index != first) {
            len = (long)index - first;
            sp_val_set(n, curval, (int)len);
            n++;
        }
        sp_val_set(n, (int)count, 1);
        n++;
        if ((long)index != last) {
            len = last - (long)index;
            sp_val_set(n, curval, (int)len);
            n++;
        }
    }

    long seqlen = n - seq;
    long oldlen = is_xzero ? 2 : 1;
    long deltalen = seqlen - oldlen;
    if (deltalen > 0 && h->len + (size_t)deltalen > HLL_SPARSE_MAX_BYTES)
        goto promote;
    if (deltalen && next)
        memmove(next + deltalen, next, (size_t)(end - next));
    h->len = (size_t)((long)h->len + deltalen);
    memcpy(p, seq, (size_t)seqlen);
    end += deltalen;

updated:
    /* Merge adjacent VALs of equal value, scanning up to 5 opcodes from the
     * one before the change. */
    p = prev ? prev : sparse;
    int scanlen = 5;
    while (p < end && scanlen--) {
        if (SP_IS_XZERO(p)) {
            p += 2;
            continue;
        } else if (SP_IS_ZERO(p)) {
            p++;
            continue;
        }
        if (p + 1 < end && SP_IS_VAL(p + 1)) {
            int v1 = SP_VAL_VALUE(p), v2 = SP_VAL_VALUE(p + 1);
            if (v1 == v2) {
                int l = SP_VAL_LEN(p) + SP_VAL_LEN(p + 1);
                if (l <= SP_VAL_MAX_LEN) {
                    sp_val_set(p + 1, v1, l);
                    /* the opcodes after p, one byte down (Redis moves its
                     * string's terminator too; this buffer may end at end) */
                    memmove(p, p + 1, (size_t)(end - p - 1));
                    h->len--;
                    end--;
                    continue;
                }
            }
        }
        p++;
    }
    invalidate_cache(h);
    return 1;

promote:
    promote(h, *spare);
    *spare = NULL;
    return dense_set(h, index, count);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                               */
/* ------------------------------------------------------------------------ */

/* Makes sure the sparse string can take `n` more register changes without
 * allocating: room for 3 more bytes per change (bounded by the promotion
 * threshold) and, when a promotion is possible, a dense buffer in *spare. */
static core_status_t reserve_sparse(hll_t *h, size_t n, bool may_promote, uint8_t **spare)
{
    /* A sparse edit grows the string by at most 3 bytes and never past the
     * limit (it promotes instead), so the string stays within `want`. */
    size_t limit = h->len > HLL_SPARSE_MAX_BYTES ? h->len : HLL_SPARSE_MAX_BYTES;
    size_t want = n > limit ? limit : h->len + 3 * n;
    if (want > limit)
        want = limit;
    if (want > h->cap) {
        size_t cap = h->cap * 2 < limit ? h->cap * 2 : limit;
        if (cap < want)
            cap = want;
        uint8_t *nb = realloc(h->buf, cap);
        if (!nb)
            return CORE_NOMEM;
        memset(nb + h->cap, 0, cap - h->cap);
        h->buf = nb;
        h->cap = cap;
    }
    *spare = NULL;
    if (may_promote) {
        *spare = malloc(HLL_DENSE_SIZE + 1);
        if (!*spare)
            return CORE_NOMEM;
    }
    return CORE_OK;
}

int hll_add_batch(hll_t *h, const char *const *items, const size_t *lens, size_t n)
{
    int updated = 0;
    unsigned index;
    uint8_t count;
    if (!hdr_sparse(h)) {
        uint8_t *regs = h->buf + HLL_HDR_SIZE;
        for (size_t i = 0; i < n; i++) {
            hll_hash_item(items[i], lens[i], &index, &count);
            if (count > dense_get(regs, index)) {
                dense_put(regs, index, count);
                updated = 1;
            }
        }
    } else {
        /* A promotion is possible when a value exceeds what VAL holds or
         * the string may outgrow the sparse limit. */
        bool may_promote = h->len + 3 * n > HLL_SPARSE_MAX_BYTES;
        for (size_t i = 0; i < n && !may_promote; i++) {
            hll_hash_item(items[i], lens[i], &index, &count);
            may_promote = count > SP_VAL_MAX_VALUE;
        }
        uint8_t *spare;
        if (reserve_sparse(h, n, may_promote, &spare) != CORE_OK)
            return CORE_NOMEM;
        for (size_t i = 0; i < n; i++) {
            hll_hash_item(items[i], lens[i], &index, &count);
            if (hdr_sparse(h)) {
                if (sparse_set(h, index, count, &spare))
                    updated = 1;
            } else if (dense_set(h, index, count)) {
                updated = 1;
            }
        }
        free(spare);
    }
    if (updated)
        invalidate_cache(h);
    return updated;
}

int hll_add(hll_t *h, const void *item, size_t len)
{
    const char *items[1] = { item };
    return hll_add_batch(h, items, &len, 1);
}

/* Ertl's sigma and tau, computed as Redis does (same operations, same
 * order), so that the rounding and therefore the estimate are identical. */
static double hll_sigma(double x)
{
    if (x == 1.)
        return INFINITY;
    double zprime, y = 1, z = x;
    do {
        x *= x;
        zprime = z;
        z += x * y;
        y += y;
    } while (zprime != z);
    return z;
}

static double hll_tau(double x)
{
    if (x == 0. || x == 1.)
        return 0.;
    double zprime, y = 1.0, z = 1 - x;
    do {
        x = sqrt(x);
        zprime = z;
        y *= 0.5;
        z -= pow(1 - x, 2) * y;
    } while (zprime != z);
    return z / 3;
}

static uint64_t estimate_histo(const int *reghisto)
{
    double m = HLL_REGISTERS;
    double z = m * hll_tau((m - reghisto[HLL_Q + 1]) / m);
    for (int j = HLL_Q; j >= 1; --j) {
        z += reghisto[j];
        z *= 0.5;
    }
    z += m * hll_sigma(reghisto[0] / m);
    return (uint64_t)llroundl(HLL_ALPHA_INF * m * m / z);
}

static void histo_of(const hll_t *h, int *reghisto)
{
    if (!hdr_sparse(h)) {
        const uint8_t *regs = h->buf + HLL_HDR_SIZE;
        /* 4 registers per 3 bytes */
        for (unsigned i = 0; i < HLL_REGISTERS; i += 4) {
            const uint8_t *r = regs + i / 4 * 3;
            uint32_t w = (uint32_t)r[0] | (uint32_t)r[1] << 8 | (uint32_t)r[2] << 16;
            reghisto[w & 63]++;
            reghisto[(w >> 6) & 63]++;
            reghisto[(w >> 12) & 63]++;
            reghisto[(w >> 18) & 63]++;
        }
        return;
    }
    const uint8_t *p = h->buf + HLL_HDR_SIZE, *end = h->buf + h->len;
    while (p < end) {
        if (SP_IS_ZERO(p)) {
            reghisto[0] += SP_ZERO_LEN(p);
            p++;
        } else if (SP_IS_XZERO(p)) {
            reghisto[0] += SP_XZERO_LEN(p);
            p += 2;
        } else {
            reghisto[SP_VAL_VALUE(p)] += SP_VAL_LEN(p);
            p++;
        }
    }
}

uint64_t hll_estimate(const hll_t *h)
{
    int reghisto[64] = { 0 };
    histo_of(h, reghisto);
    return estimate_histo(reghisto);
}

static uint64_t cached(const uint8_t *b)
{
    uint64_t c = le64_load(b + 8);
    return c;
}

uint64_t hll_count(hll_t *h, bool update_cache, bool *cache_written)
{
    if (cache_written)
        *cache_written = false;
    if (cache_valid(h->buf))
        return cached(h->buf);
    uint64_t card = hll_estimate(h);
    if (update_cache) {
        le64_store(h->buf + 8, card);
        if (cache_written)
            *cache_written = true;
    }
    return card;
}

uint64_t hll_count_registers(const uint8_t *regs)
{
    int reghisto[64] = { 0 };
    for (unsigned i = 0; i < HLL_REGISTERS; i++)
        reghisto[regs[i] & 63]++;
    return estimate_histo(reghisto);
}

void hll_max_into(const hll_t *h, uint8_t *max)
{
    if (!hdr_sparse(h)) {
        const uint8_t *regs = h->buf + HLL_HDR_SIZE;
        for (unsigned i = 0; i < HLL_REGISTERS; i += 4) {
            const uint8_t *r = regs + i / 4 * 3;
            uint32_t w = (uint32_t)r[0] | (uint32_t)r[1] << 8 | (uint32_t)r[2] << 16;
            for (unsigned k = 0; k < 4; k++, w >>= 6) {
                uint8_t v = (uint8_t)(w & 63);
                if (v > max[i + k])
                    max[i + k] = v;
            }
        }
        return;
    }
    const uint8_t *p = h->buf + HLL_HDR_SIZE, *end = h->buf + h->len;
    unsigned i = 0;
    while (p < end) {
        if (SP_IS_ZERO(p)) {
            i += SP_ZERO_LEN(p);
            p++;
        } else if (SP_IS_XZERO(p)) {
            i += SP_XZERO_LEN(p);
            p += 2;
        } else {
            unsigned run = SP_VAL_LEN(p);
            uint8_t v = (uint8_t)SP_VAL_VALUE(p);
            while (run-- && i < HLL_REGISTERS) {
                if (v > max[i])
                    max[i] = v;
                i++;
            }
            p++;
        }
    }
}

core_status_t hll_merge_registers(hll_t *h, const uint8_t *max, bool to_dense)
{
    uint8_t *spare = NULL;
    if (hdr_sparse(h)) {
        size_t changes = 0;
        bool big = false;
        for (unsigned i = 0; i < HLL_REGISTERS; i++)
            if (max[i]) {
                changes++;
                big |= max[i] > SP_VAL_MAX_VALUE;
            }
        bool may_promote = to_dense || big || h->len + 3 * changes > HLL_SPARSE_MAX_BYTES;
        if (reserve_sparse(h, changes, may_promote, &spare) != CORE_OK)
            return CORE_NOMEM;
        if (to_dense) {
            promote(h, spare);
            spare = NULL;
        }
    }
    for (unsigned j = 0; j < HLL_REGISTERS; j++) {
        if (max[j] == 0)
            continue;
        if (hdr_sparse(h))
            sparse_set(h, j, max[j], &spare);
        else
            dense_set(h, j, max[j]);
    }
    free(spare);
    invalidate_cache(h);
    return CORE_OK;
}

/* ------------------------------------------------------------------------ */
/* Validation of untrusted bytes                                            */
/* ------------------------------------------------------------------------ */

hll_t *hll_from_redis(const uint8_t *b, size_t len, const char **why)
{
    if (len < HLL_HDR_SIZE || memcmp(b, "HYLL", 4) != 0) {
        *why = "not a HyperLogLog: no HYLL header";
        return NULL;
    }
    if (b[4] != HLL_DENSE && b[4] != HLL_SPARSE) {
        *why = "unknown HyperLogLog encoding";
        return NULL;
    }
    if (b[5] || b[6] || b[7]) {
        *why = "HyperLogLog header: unused bytes must be zero";
        return NULL;
    }
    int reghisto[64] = { 0 };
    if (b[4] == HLL_DENSE) {
        if (len != HLL_DENSE_SIZE) {
            *why = "dense HyperLogLog must be exactly 12304 bytes";
            return NULL;
        }
        const uint8_t *regs = b + HLL_HDR_SIZE;
        for (unsigned i = 0; i < HLL_REGISTERS; i += 4) {
            const uint8_t *r = regs + i / 4 * 3;
            uint32_t w = (uint32_t)r[0] | (uint32_t)r[1] << 8 | (uint32_t)r[2] << 16;
            for (unsigned k = 0; k < 4; k++, w >>= 6) {
                if ((w & 63) > HLL_MAX_VALUE) {
                    *why = "HyperLogLog register above 51";
                    return NULL;
                }
                reghisto[w & 63]++;
            }
        }
    } else {
        if (len > HLL_HDR_SIZE + 2 * HLL_REGISTERS) {
            *why = "sparse HyperLogLog too long";
            return NULL;
        }
        const uint8_t *p = b + HLL_HDR_SIZE, *end = b + len;
        size_t idx = 0;
        while (p < end) {
            size_t run;
            if (SP_IS_ZERO(p)) {
                run = SP_ZERO_LEN(p);
                reghisto[0] += (int)run;
                p++;
            } else if (SP_IS_XZERO(p)) {
                if (p + 1 >= end) {
                    *why = "sparse HyperLogLog: truncated XZERO opcode";
                    return NULL;
                }
                run = SP_XZERO_LEN(p);
                reghisto[0] += (int)run;
                p += 2;
            } else {
                run = SP_VAL_LEN(p);
                reghisto[SP_VAL_VALUE(p)] += (int)run;
                p++;
            }
            idx += run;
            if (idx > HLL_REGISTERS) {
                *why = "sparse HyperLogLog covers more than 16384 registers";
                return NULL;
            }
        }
        if (idx != HLL_REGISTERS) {
            *why = "sparse HyperLogLog covers fewer than 16384 registers";
            return NULL;
        }
    }
    if (cache_valid(b) && cached(b) != estimate_histo(reghisto)) {
        *why = "HyperLogLog cached cardinality does not match its registers";
        return NULL;
    }
    hll_t *h = calloc(1, sizeof(*h));
    if (!h) {
        *why = "out of memory";
        return NULL;
    }
    h->cap = b[4] == HLL_DENSE ? HLL_DENSE_SIZE + 1 : len;
    h->buf = calloc(1, h->cap);
    if (!h->buf) {
        free(h);
        *why = "out of memory";
        return NULL;
    }
    memcpy(h->buf, b, len);
    h->len = len;
    return h;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { hll_free(v); }
static size_t type_size(const void *v) { return hll_memory(v); }

static void type_encode(const void *v, wbuf_t *out)
{
    const hll_t *h = v;
    wbuf_put_u8(out, HLL_ENC_VERSION);
    wbuf_put_bytes(out, h->buf, h->len);
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    if (len < 1 || p[0] != HLL_ENC_VERSION) {
        *why = "hll: unknown encoding version";
        return NULL;
    }
    return hll_from_redis(p + 1, len - 1, why);
}

const ks_type_t hll_type = {
    .tag = TYPE_TAG_HLL,
    .name = "uv",
    .noun = "a HyperLogLog",
    .missing = "no HyperLogLog at this key",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
