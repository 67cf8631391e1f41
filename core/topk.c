/* topk.c - see topk.h. */
#include "core/topk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/rng.h"

#define TOPK_ENC_V1 1             /* encoding of a generation-1 Top-K */
#define TOPK_ENC_V2 2             /* the same layout, generation-2 rules */
#define TOPK_FP_SEED 1919         /* RedisBloom's fingerprint seed (GA) */
#define TOPK_DECAY_TABLE 256      /* decay^count precomputed below this count, as RedisBloom */

typedef struct heap_slot {
    char *item;                   /* NULL: unused slot */
    uint64_t count;
    uint32_t fp;
    uint32_t len;
} heap_slot_t;

struct topk {
    unsigned gen;                 /* TALLY_GEN_*: whose rules it follows (topk.h) */
    uint32_t k, width, depth;
    double decay;
    rng_t rng;
    uint32_t *fps;                /* width·depth fingerprints */
    uint64_t *counts;             /* width·depth counts */
    heap_slot_t *heap;            /* min-heap on count, k slots */
    uint32_t *index;              /* open addressing by fingerprint: heap slot + 1, 0 = empty */
    uint32_t mask;                /* index size - 1 (a power of two >= 2k) */
    size_t item_bytes;            /* heap allocations for items, for memory accounting */
    double table[TOPK_DECAY_TABLE];
};

/* ------------------------------------------------------------------------ */
/* Representation                                                           */
/* ------------------------------------------------------------------------ */

static uint32_t index_size(uint32_t k);

static bool params_ok(uint64_t k, uint64_t width, uint64_t depth, double decay)
{
    return k >= 1 && k <= TOPK_MAX_K && width >= 1 && depth >= 1 && width <= TOPK_MAX_BUCKETS &&
           depth <= TOPK_MAX_BUCKETS && width * depth <= TOPK_MAX_BUCKETS && decay > 0 && decay <= 1;
}

static topk_t *topk_alloc(uint32_t k, uint32_t width, uint32_t depth, double decay)
{
    if (!params_ok(k, width, depth, decay))
        return NULL;
    topk_t *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    size_t nb = (size_t)width * depth;
    t->fps = calloc(nb, sizeof(uint32_t));
    t->counts = calloc(nb, sizeof(uint64_t));
    t->heap = calloc(k, sizeof(heap_slot_t));
    uint32_t size = index_size(k);
    t->index = calloc(size, sizeof(uint32_t));
    t->mask = size - 1;
    if (!t->fps || !t->counts || !t->heap || !t->index) {
        topk_free(t);
        return NULL;
    }
    t->k = k;
    t->width = width;
    t->depth = depth;
    t->decay = decay;
    for (int i = 0; i < TOPK_DECAY_TABLE; i++)
        t->table[i] = pow(decay, i);
    return t;
}

topk_t *topk_create_gen(unsigned gen, uint32_t k, uint32_t width, uint32_t depth, double decay, uint64_t seed)
{
    topk_t *t = topk_alloc(k, width, depth, decay);
    if (t) {
        t->gen = gen == TALLY_GEN_1 ? TALLY_GEN_1 : TALLY_GEN_2;
        rng_seed(&t->rng, seed);
    }
    return t;
}

topk_t *topk_create(uint32_t k, uint32_t width, uint32_t depth, double decay, uint64_t seed)
{
    return topk_create_gen(TALLY_GEN_CURRENT, k, width, depth, decay, seed);
}

void topk_free(topk_t *t)
{
    if (!t)
        return;
    if (t->heap)
        for (uint32_t i = 0; i < t->k; i++)
            free(t->heap[i].item);
    free(t->heap);
    free(t->index);
    free(t->fps);
    free(t->counts);
    free(t);
}

uint32_t topk_k(const topk_t *t) { return t->k; }
size_t topk_item_bytes(const topk_t *t) { return t->item_bytes; }
uint32_t topk_width(const topk_t *t) { return t->width; }
uint32_t topk_depth(const topk_t *t) { return t->depth; }
double topk_decay(const topk_t *t) { return t->decay; }

static uint32_t fingerprint(const void *item, size_t len) { return murmur2(item, len, TOPK_FP_SEED); }

static size_t bucket_of(const topk_t *t, const void *item, size_t len, uint32_t row)
{
    return (size_t)row * t->width + murmur2(item, len, row) % t->width;
}

/* ------------------------------------------------------------------------ */
/* Heap                                                                     */
/* ------------------------------------------------------------------------ */

/* The heap index maps an item's fingerprint to its heap slot, so that
 * membership costs O(1) instead of a scan of k slots (RedisBloom scans).
 * Linear probing; deletion shifts later entries back (no tombstones). */

static int find_in_heap(const topk_t *t, const void *item, size_t len, uint32_t fp)
{
    for (uint32_t h = fp & t->mask; t->index[h]; h = (h + 1) & t->mask) {
        const heap_slot_t *s = &t->heap[t->index[h] - 1];
        if (s->fp == fp && s->len == len && memcmp(s->item, item, len) == 0)
            return (int)(t->index[h] - 1);
    }
    return -1;
}

/* Position in the index of the entry for heap slot i (which is used). */
static uint32_t index_pos(const topk_t *t, uint32_t i)
{
    uint32_t h = t->heap[i].fp & t->mask;
    while (t->index[h] != i + 1)
        h = (h + 1) & t->mask;
    return h;
}

static void index_insert(topk_t *t, uint32_t i)
{
    uint32_t h = t->heap[i].fp & t->mask;
    while (t->index[h])
        h = (h + 1) & t->mask;
    t->index[h] = i + 1;
}

static void index_remove(topk_t *t, uint32_t i)
{
    uint32_t hole = index_pos(t, i);
    t->index[hole] = 0;
    for (uint32_t j = (hole + 1) & t->mask; t->index[j]; j = (j + 1) & t->mask) {
        uint32_t home = t->heap[t->index[j] - 1].fp & t->mask;
        /* move entry j into the hole unless its home lies cyclically in (hole, j] */
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            t->index[hole] = t->index[j];
            t->index[j] = 0;
            hole = j;
        }
    }
}

static void swap_slots(topk_t *t, uint32_t a, uint32_t b)
{
    uint32_t pa = t->heap[a].item ? index_pos(t, a) : UINT32_MAX;
    uint32_t pb = t->heap[b].item ? index_pos(t, b) : UINT32_MAX;
    if (pa != UINT32_MAX)
        t->index[pa] = b + 1;
    if (pb != UINT32_MAX)
        t->index[pb] = a + 1;
    heap_slot_t x = t->heap[a];
    t->heap[a] = t->heap[b];
    t->heap[b] = x;
}

/* Restores the heap order around slot i after its count changed. */
static void heap_fix(topk_t *t, uint32_t i)
{
    heap_slot_t *h = t->heap;
    while (i > 0 && h[(i - 1) / 2].count > h[i].count) {
        swap_slots(t, (i - 1) / 2, i);
        i = (i - 1) / 2;
    }
    for (;;) {
        uint64_t l = 2 * (uint64_t)i + 1, r = l + 1, m = i;
        if (l < t->k && h[l].count < h[m].count)
            m = l;
        if (r < t->k && h[r].count < h[m].count)
            m = r;
        if (m == i)
            return;
        swap_slots(t, (uint32_t)m, i);
        i = (uint32_t)m;
    }
}

/* RedisBloom's heapifyDown from slot i, whose count grew: it trades places
 * with its smaller child (the left one unless the right is strictly
 * smaller) - on the first step also when the child is equal, afterwards
 * only while the child is strictly smaller.  Which of equal counts ends up
 * where decides what is expelled and the order of ties in a list, so it is
 * followed exactly. */
static void heap_down_rb(topk_t *t, uint32_t i)
{
    const heap_slot_t *h = t->heap;
    for (bool first = true;; first = false) {
        uint64_t c = 2 * (uint64_t)i + 1;
        if (c >= t->k)
            return;
        if (c + 1 < t->k && h[c].count > h[c + 1].count)
            c++;
        if (first ? h[c].count > h[i].count : h[c].count >= h[i].count)
            return;
        swap_slots(t, (uint32_t)c, i);
        i = (uint32_t)c;
    }
}

/* Slot i's count is now `count`: a grown count sinks as in RedisBloom; one
 * that dropped (its buckets decayed) rises, which RedisBloom omits, leaving
 * its heap out of order. */
static void heap_set_count(topk_t *t, uint32_t i, uint64_t count)
{
    uint64_t old = t->heap[i].count;
    t->heap[i].count = count;
    if (count < old)
        heap_fix(t, i);
    else
        heap_down_rb(t, i);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                               */
/* ------------------------------------------------------------------------ */

/* Probability that one colliding unit decrements a bucket holding `count`. */
static double decay_p(const topk_t *t, uint64_t count)
{
    return count < TOPK_DECAY_TABLE ? t->table[count] : pow(t->decay, (double)count);
}

/* `by` units of an item with fingerprint fp hit bucket b held by another
 * item: each unit decrements it with probability decay^count; at zero the
 * item takes the bucket over with the units left (this one included).
 * Returns the item's count in the bucket (0 if it did not take it). */
static uint64_t decay_bucket(topk_t *t, size_t b, uint32_t fp, uint32_t by)
{
    uint64_t remaining = by;   /* units left, counting the one being tried */
    while (remaining > 0) {
        double p = decay_p(t, t->counts[b]);
        if (remaining == 1) {
            if (!(rng_double(&t->rng) < p))
                return 0;
        } else {
            /* trials up to and including the first success: geometric(p) */
            double u = 1.0 - rng_double(&t->rng);   /* (0, 1] */
            double g = p >= 1 ? 1 : floor(log(u) / log1p(-p)) + 1;
            if (!(g <= (double)remaining))
                return 0;
            remaining -= (uint64_t)g - 1;
        }
        if (--t->counts[b] == 0) {
            t->fps[b] = fp;
            t->counts[b] = remaining;
            return remaining;
        }
        remaining--;
    }
    return 0;
}

/* Makes the item the heap's root, in place of the smallest entry, which is
 * handed to the caller as expelled (if the slot was used). */
static void heap_replace_root(topk_t *t, const void *item, size_t len, uint32_t fp, uint64_t count,
                              void (*sink)(topk_t *, uint32_t), char **expelled, size_t *elen)
{
    char *copy = malloc(len ? len : 1);
    if (!copy)
        return;
    memcpy(copy, item, len);
    heap_slot_t *top = &t->heap[0];
    if (top->item) {
        index_remove(t, 0);
        *expelled = top->item;
        *elen = top->len;
        t->item_bytes -= top->len ? top->len : 1;
    }
    *top = (heap_slot_t){ copy, count, fp, (uint32_t)len };
    t->item_bytes += len ? len : 1;
    index_insert(t, 0);
    sink(t, 0);
}

/* Generation 2, RedisBloom's TopK_Add: a bucket holding the item's
 * fingerprint always takes the increment; an item whose estimate reaches
 * the heap minimum (>=) either updates its heap count to the estimate or
 * replaces the root. */
static void add_gen2(topk_t *t, const void *item, size_t len, uint32_t by, char **expelled, size_t *elen)
{
    uint32_t fp = fingerprint(item, len);
    uint64_t heap_min = t->heap[0].count, est = 0;
    for (uint32_t row = 0; row < t->depth; row++) {
        size_t b = bucket_of(t, item, len, row);
        uint64_t *c = &t->counts[b], got;
        if (*c == 0) {
            t->fps[b] = fp;
            got = *c = by;
        } else if (t->fps[b] == fp) {
            got = *c = *c > UINT64_MAX - by ? UINT64_MAX : *c + by;
        } else {
            got = decay_bucket(t, b, fp, by);
        }
        if (got > est)
            est = got;
    }
    if (est < heap_min)
        return;
    int pos = find_in_heap(t, item, len, fp);
    if (pos >= 0)
        heap_set_count(t, (uint32_t)pos, est);
    else
        heap_replace_root(t, item, len, fp, est, heap_down_rb, expelled, elen);
}

/* Generation 1 (see topk.h). */
static void add_gen1(topk_t *t, const void *item, size_t len, uint32_t by, char **expelled, size_t *elen)
{
    uint32_t fp = fingerprint(item, len);
    uint64_t heap_min = t->heap[0].count, est = 0;
    /* The item's heap slot, -1 when absent.  As RedisBloom, the heap is only
     * consulted once one of the item's counts reaches the heap minimum (-2
     * until then): an item whose buckets decayed below the minimum keeps the
     * heap count it had, which holds a heavy item in place while light
     * items still contest its buckets. */
    int pos = -2;
    for (uint32_t row = 0; row < t->depth; row++) {
        size_t b = bucket_of(t, item, len, row);
        uint64_t *c = &t->counts[b];
        if (*c == 0) {
            t->fps[b] = fp;
            *c = by;
            if (*c > est)
                est = *c;
        } else if (t->fps[b] == fp) {
            if (*c >= heap_min && pos == -2)
                pos = find_in_heap(t, item, len, fp);
            if (pos >= 0 || *c <= heap_min) {
                *c = *c > UINT64_MAX - by ? UINT64_MAX : *c + by;
                if (*c > est)
                    est = *c;
            }
        } else {
            uint64_t took = decay_bucket(t, b, fp, by);
            if (took > est)
                est = took;
        }
    }
    if (pos >= 0) {
        /* RedisBloom: the estimate, not the max of old and new, as the
         * item's buckets may have decayed */
        t->heap[pos].count = est;
        heap_fix(t, (uint32_t)pos);
        return;
    }
    if (est <= heap_min)
        return;
    if (pos == -2 && (pos = find_in_heap(t, item, len, fp)) >= 0) {
        /* in the heap but not looked up: RedisBloom would insert it a
         * second time with the estimate; keep one entry with the larger */
        if (est > t->heap[pos].count) {
            t->heap[pos].count = est;
            heap_fix(t, (uint32_t)pos);
        }
        return;
    }
    heap_replace_root(t, item, len, fp, est, heap_fix, expelled, elen);
}

void topk_add(topk_t *t, const void *item, size_t len, uint32_t by, char **expelled, size_t *elen)
{
    *expelled = NULL;
    *elen = 0;
    if (t->gen == TALLY_GEN_1)
        add_gen1(t, item, len, by, expelled, elen);
    else
        add_gen2(t, item, len, by, expelled, elen);
}

bool topk_query(const topk_t *t, const void *item, size_t len)
{
    return find_in_heap(t, item, len, fingerprint(item, len)) >= 0;
}

uint64_t topk_count(const topk_t *t, const void *item, size_t len)
{
    uint32_t fp = fingerprint(item, len);
    int pos = find_in_heap(t, item, len, fp);
    if (pos >= 0 && t->gen == TALLY_GEN_1)
        return t->heap[pos].count;
    /* RedisBloom's TopK_Count: the largest of the item's buckets, counting
     * for a listed item only those at or above the heap minimum */
    uint64_t res = 0, floor = pos >= 0 ? t->heap[0].count : 0;
    for (uint32_t row = 0; row < t->depth; row++) {
        size_t b = bucket_of(t, item, len, row);
        if (t->fps[b] == fp && t->counts[b] >= floor && t->counts[b] > res)
            res = t->counts[b];
    }
    return res;
}

static int entry_cmp(const void *a, const void *b)
{
    const topk_entry_t *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->item, y->item, n);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

/* Sorts a[0..n) by count, largest first, keeping the order of equal counts
 * (a merge sort through tmp, of n entries). */
static void sort_stable(topk_entry_t *a, topk_entry_t *tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = a[j].count > a[i].count ? a[j++] : a[i++];
            while (i < mid)
                tmp[o++] = a[i++];
            while (j < hi)
                tmp[o++] = a[j++];
        }
        memcpy(a, tmp, n * sizeof(*a));
    }
}

size_t topk_list(const topk_t *t, topk_entry_t *out)
{
    size_t n = 0;
    for (uint32_t i = 0; i < t->k; i++)
        if (t->heap[i].item)
            out[n++] = (topk_entry_t){ t->heap[i].item, t->heap[i].len, t->heap[i].count };
    if (t->gen == TALLY_GEN_1) {   /* ties by item bytes */
        qsort(out, n, sizeof(*out), entry_cmp);
        return n;
    }
    topk_entry_t *tmp = malloc(n * sizeof(*tmp) + 1);
    if (tmp) {
        sort_stable(out, tmp, n);
        free(tmp);
        return n;
    }
    for (size_t i = 1; i < n; i++) {   /* short of memory: the same order, in O(n^2) */
        topk_entry_t x = out[i];
        size_t j = i;
        for (; j > 0 && out[j - 1].count < x.count; j--)
            out[j] = out[j - 1];
        out[j] = x;
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { topk_free(v); }

/* Slots of the heap's index for k items: a power of two >= 2k (at least 4). */
static uint32_t index_size(uint32_t k)
{
    uint32_t size = 4;
    while (size < 2 * k)
        size *= 2;
    return size;
}

uint64_t topk_bytes_for(uint32_t k, uint32_t width, uint32_t depth)
{
    return sizeof(topk_t) + (uint64_t)width * depth * (sizeof(uint32_t) + sizeof(uint64_t)) +
           (uint64_t)k * sizeof(heap_slot_t) + (uint64_t)index_size(k) * sizeof(uint32_t);
}

static size_t type_size(const void *v)
{
    const topk_t *t = v;
    return (size_t)topk_bytes_for(t->k, t->width, t->depth) + t->item_bytes;
}

static void type_encode(const void *v, wbuf_t *out)
{
    const topk_t *t = v;
    size_t nb = (size_t)t->width * t->depth;
    wbuf_put_u8(out, t->gen == TALLY_GEN_1 ? TOPK_ENC_V1 : TOPK_ENC_V2);
    wbuf_put_u32(out, t->k);
    wbuf_put_u32(out, t->width);
    wbuf_put_u32(out, t->depth);
    wbuf_put_f64(out, t->decay);
    for (int i = 0; i < 4; i++)
        wbuf_put_u64(out, t->rng.s[i]);
    if (!wbuf_reserve(out, nb * 12))
        return;
    for (size_t b = 0; b < nb; b++) {
        wbuf_put_u32(out, t->fps[b]);
        wbuf_put_u64(out, t->counts[b]);
    }
    for (uint32_t i = 0; i < t->k; i++) {
        const heap_slot_t *s = &t->heap[i];
        wbuf_put_u8(out, s->item != NULL);
        wbuf_put_u64(out, s->count);
        if (s->item)
            wbuf_put_blob(out, s->item, s->len);
    }
}

static void *fail(topk_t *t, const char **why, const char *msg)
{
    topk_free(t);
    *why = msg;
    return NULL;
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint32_t k = rbuf_u32(&r), width = rbuf_u32(&r), depth = rbuf_u32(&r);
    double decay = rbuf_f64(&r);
    rng_t rng;
    for (int i = 0; i < 4; i++)
        rng.s[i] = rbuf_u64(&r);
    if (r.err)
        return fail(NULL, why, "topk: truncated header");
    if (ver != TOPK_ENC_V1 && ver != TOPK_ENC_V2)
        return fail(NULL, why, "topk: unknown encoding version");
    if (!params_ok(k, width, depth, decay))
        return fail(NULL, why, "topk: parameters out of range");
    if ((rng.s[0] | rng.s[1] | rng.s[2] | rng.s[3]) == 0)
        return fail(NULL, why, "topk: generator state is all zero");
    size_t nb = (size_t)width * depth;
    /* every heap slot takes at least 9 bytes: bound allocations by the input */
    if (rbuf_left(&r) / 12 < nb || (rbuf_left(&r) - nb * 12) / 9 < k)
        return fail(NULL, why, "topk: truncated");
    topk_t *t = topk_alloc(k, width, depth, decay);
    if (!t)
        return fail(NULL, why, "out of memory");
    t->rng = rng;
    t->gen = ver == TOPK_ENC_V1 ? TALLY_GEN_1 : TALLY_GEN_2;
    for (size_t b = 0; b < nb; b++) {
        t->fps[b] = rbuf_u32(&r);
        t->counts[b] = rbuf_u64(&r);
        if (t->counts[b] == 0 && t->fps[b] != 0)
            return fail(t, why, "topk: empty bucket with a fingerprint");
    }
    for (uint32_t i = 0; i < k; i++) {
        uint8_t used = rbuf_u8(&r);
        uint64_t count = rbuf_u64(&r);
        if (r.err)
            return fail(t, why, "topk: truncated heap");
        if (used > 1 || (!used && count != 0))
            return fail(t, why, "topk: bad heap slot");
        if (i > 0 && t->heap[(i - 1) / 2].count > count)
            return fail(t, why, "topk: heap order violated");
        t->heap[i].count = count;
        if (!used)
            continue;
        size_t n;
        const uint8_t *item = rbuf_blob(&r, &n);
        if (!item)
            return fail(t, why, "topk: truncated heap item");
        char *copy = malloc(n ? n : 1);
        if (!copy)
            return fail(t, why, "out of memory");
        memcpy(copy, item, n);
        uint32_t fp = fingerprint(item, n);
        if (find_in_heap(t, item, n, fp) >= 0) {
            free(copy);
            return fail(t, why, "topk: an item is in the heap twice");
        }
        t->heap[i] = (heap_slot_t){ copy, count, fp, (uint32_t)n };
        t->item_bytes += n ? n : 1;
        index_insert(t, i);
    }
    if (!rbuf_done(&r))
        return fail(t, why, "topk: trailing bytes");
    return t;
}

const ks_type_t topk_type = {
    .tag = TYPE_TAG_TOPK,
    .name = "topk",
    .noun = "a Top-K",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
