/* bits.c - see bits.h. */
#include "core/bits.h"

#include <stdlib.h>
#include <string.h>

#include "core/codec.h"

#define BITS_ENC_VERSION 1              /* first byte of every encoding */
#define BITS_GROW_LINEAR (1u << 20)     /* beyond 1 MiB grow by 1 MiB, below double (Redis's SDS_MAX_PREALLOC) */

struct bits {
    uint8_t *p;
    size_t len;
    size_t cap;
};

/* ------------------------------------------------------------------------ */
/* The value                                                                */
/* ------------------------------------------------------------------------ */

bits_t *bits_adopt(uint8_t *p, size_t len)
{
    bits_t *b = malloc(sizeof(*b));
    if (!b)
        return NULL;
    b->p = p;
    b->len = len;
    b->cap = p ? len : 0;
    return b;
}

bits_t *bits_from(const void *p, size_t len)
{
    if (len > BITS_MAX_LEN)
        return NULL;
    uint8_t *copy = NULL;
    if (len) {
        copy = malloc(len);
        if (!copy)
            return NULL;
        memcpy(copy, p, len);
    }
    bits_t *b = bits_adopt(copy, len);
    if (!b)
        free(copy);
    return b;
}

void bits_free(bits_t *b)
{
    if (!b)
        return;
    free(b->p);
    free(b);
}

const uint8_t *bits_data(const bits_t *b) { return b->p; }
size_t bits_len(const bits_t *b) { return b->len; }
uint8_t *bits_mut(bits_t *b) { return b->p; }
size_t bits_heap_bytes(const bits_t *b) { return sizeof(*b) + b->cap; }

/* The capacity a buffer of `cap` bytes grows to when `len` bytes are needed. */
static size_t grown_cap(size_t cap, size_t len)
{
    if (len <= cap)
        return cap;
    size_t n = len < BITS_GROW_LINEAR ? len * 2 : len + BITS_GROW_LINEAR;
    return n > BITS_MAX_LEN ? BITS_MAX_LEN : n;
}

size_t bits_heap_bytes_after(const bits_t *b, size_t len)
{
    return sizeof(bits_t) + (b ? grown_cap(b->cap, len) : len);
}

bool bits_grow(bits_t *b, size_t len)
{
    if (len > BITS_MAX_LEN)
        return false;
    if (len > b->cap) {
        size_t cap = grown_cap(b->cap, len);
        uint8_t *p = realloc(b->p, cap);
        if (!p)
            return false;
        b->p = p;
        b->cap = cap;
    }
    if (len > b->len) {
        memset(b->p + b->len, 0, len - b->len);
        b->len = len;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Popcount and bit search                                                  */
/* ------------------------------------------------------------------------ */

static uint64_t popcount_generic(const uint8_t *p, size_t n)
{
    uint64_t c = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        c += (uint64_t)__builtin_popcountll(w);
    }
    for (; i < n; i++)
        c += (uint64_t)__builtin_popcount(p[i]);
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same loop compiled for the POPCNT instruction, chosen at run time. */
__attribute__((target("popcnt"))) static uint64_t popcount_hw(const uint8_t *p, size_t n)
{
    uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        c0 += (uint64_t)__builtin_popcountll(w[0]);
        c1 += (uint64_t)__builtin_popcountll(w[1]);
        c2 += (uint64_t)__builtin_popcountll(w[2]);
        c3 += (uint64_t)__builtin_popcountll(w[3]);
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        c0 += (uint64_t)__builtin_popcountll(w);
    }
    for (; i < n; i++)
        c0 += (uint64_t)__builtin_popcount(p[i]);
    return c0 + c1 + c2 + c3;
}
#endif

uint64_t bits_popcount(const uint8_t *p, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("popcnt"))
        return popcount_hw(p, n);
#endif
    return popcount_generic(p, n);
}

/* The first position of `bit` in p[0..n) counting from the most significant
 * bit of p[0].  When there is none: n*8 for bit 0 (the right side is taken as
 * zero padding), -1 for bit 1.  (Redis's redisBitpos contract.) */
static int64_t scan_bit(const uint8_t *p, size_t n, int bit)
{
    const uint8_t skip = bit ? 0x00 : 0xff;
    const uint64_t skipw = bit ? 0 : UINT64_MAX;
    size_t i = 0;
    while (i + 8 <= n) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w != skipw)
            break;
        i += 8;
    }
    while (i < n && p[i] == skip)
        i++;
    if (i == n)
        return bit ? -1 : (int64_t)n * 8;
    uint8_t byte = bit ? p[i] : (uint8_t)~p[i];   /* now look for a 1 */
    int k = __builtin_clz((unsigned)byte) - (int)(8 * (sizeof(unsigned) - 1));
    return (int64_t)i * 8 + k;
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                 */
/* ------------------------------------------------------------------------ */

int bits_setbit(uint8_t *p, uint64_t offset, int value)
{
    size_t byte = (size_t)(offset >> 3);
    uint8_t mask = (uint8_t)(0x80u >> (offset & 7));
    int old = (p[byte] & mask) != 0;
    if (value)
        p[byte] |= mask;
    else
        p[byte] &= (uint8_t)~mask;
    return old;
}

int bits_getbit(const uint8_t *p, size_t len, uint64_t offset)
{
    uint64_t byte = offset >> 3;
    if (byte >= len)
        return 0;
    return (p[byte] >> (7 - (offset & 7))) & 1;
}

/* Normalises a range the way Redis does: negative ends add the length, then
 * both are clamped into [0, totlen-1] (end) and [0, ...) (start).  With the
 * bit unit, the bit range becomes a byte range plus masks of the bits of the
 * first and last byte that lie outside it. */
static void normalise(int64_t totlen_bytes, bits_unit_t unit, int64_t *start, int64_t *end, uint8_t *first_neg,
                      uint8_t *last_neg)
{
    int64_t totlen = unit == BITS_UNIT_BIT ? totlen_bytes * 8 : totlen_bytes;
    if (*start < 0)
        *start += totlen;
    if (*end < 0)
        *end += totlen;
    if (*start < 0)
        *start = 0;
    if (*end < 0)
        *end = 0;
    if (*end >= totlen)
        *end = totlen - 1;
    *first_neg = *last_neg = 0;
    if (unit == BITS_UNIT_BIT && *start <= *end) {
        *first_neg = (uint8_t)(~((1u << (8 - (*start & 7))) - 1) & 0xff);
        *last_neg = (uint8_t)((1u << (7 - (*end & 7))) - 1);
        *start >>= 3;
        *end >>= 3;
    }
}

int64_t bits_count(const uint8_t *p, size_t len, const bits_range_t *r)
{
    int64_t start = 0, end = (int64_t)len - 1;
    uint8_t first_neg = 0, last_neg = 0;
    if (r && r->has_start) {
        start = r->start;
        end = r->end;
        if (start < 0 && end < 0 && start > end)
            return 0;
        normalise((int64_t)len, r->unit, &start, &end, &first_neg, &last_neg);
    }
    if (start > end)
        return 0;
    int64_t count = (int64_t)bits_popcount(p + start, (size_t)(end - start + 1));
    count -= __builtin_popcount(p[start] & first_neg);
    count -= __builtin_popcount(p[end] & last_neg);
    return count;
}

int64_t bits_pos(const uint8_t *p, size_t len, bool exists, int bit, const bits_range_t *r)
{
    if (!exists)
        return bit ? -1 : 0;
    int64_t start = 0, end = (int64_t)len - 1;
    bool end_given = false;
    uint8_t first_neg = 0, last_neg = 0;
    if (r && r->has_start) {
        start = r->start;
        if (r->has_end) {
            end = r->end;
            end_given = true;
        } else {
            end = r->unit == BITS_UNIT_BIT ? (int64_t)len * 8 + 7 : (int64_t)len - 1;
        }
        normalise((int64_t)len, r->unit, &start, &end, &first_neg, &last_neg);
    }
    if (start > end)
        return -1;   /* an empty range holds neither a 0 nor a 1 */

    /* Search the first byte (bits before the range masked away), the
     * middle bytes, then the last byte (bits after the range masked away),
     * stopping at the first piece that holds the bit.  `bytes` is what
     * remains of the range from `start`. */
    int64_t bytes = end - start + 1;
    int64_t pos;
    uint8_t c;
    if (first_neg) {
        c = bit ? (uint8_t)(p[start] & ~first_neg) : (uint8_t)(p[start] | first_neg);
        if (last_neg && bytes == 1)
            c = bit ? (uint8_t)(c & ~last_neg) : (uint8_t)(c | last_neg);
        pos = scan_bit(&c, 1, bit);
        if (bytes == 1 || (pos != -1 && pos != 8))
            goto found;
        start++;
        bytes--;
    }
    int64_t mid = bytes - (last_neg ? 1 : 0);
    if (mid > 0) {
        pos = scan_bit(p + start, (size_t)mid, bit);
        if (bytes == mid || (pos != -1 && pos != mid * 8))
            goto found;
        start += mid;
        bytes -= mid;
    }
    c = bit ? (uint8_t)(p[end] & ~last_neg) : (uint8_t)(p[end] | last_neg);
    pos = scan_bit(&c, 1, bit);
found:
    /* With an explicit end the right side is not zero padding: no 0 found
     * inside the range means -1. */
    if (end_given && bit == 0 && pos == bytes * 8)
        return -1;
    if (pos != -1)
        pos += start * 8;
    return pos;
}

bool bits_bitop(bits_op_t op, const uint8_t *const *src, const size_t *lens, size_t n, uint8_t **out,
                size_t *out_len)
{
    size_t maxlen = 0;
    for (size_t i = 0; i < n; i++)
        if (lens[i] > maxlen)
            maxlen = lens[i];
    *out = NULL;
    *out_len = 0;
    if (maxlen == 0)
        return true;
    uint8_t *res = malloc(maxlen);
    if (!res)
        return false;
    /* the first source, zero-padded; then fold the others in one at a time
     * (sequential passes the compiler vectorises) */
    if (lens[0])
        memcpy(res, src[0], lens[0]);
    memset(res + lens[0], 0, maxlen - lens[0]);
    if (op == BITS_OP_NOT) {
        for (size_t j = 0; j < maxlen; j++)
            res[j] = (uint8_t)~res[j];
    }
    for (size_t i = 1; i < n && op != BITS_OP_NOT; i++) {
        const uint8_t *s = src[i];
        size_t l = lens[i];
        switch (op) {
        case BITS_OP_AND:
            for (size_t j = 0; j < l; j++)
                res[j] &= s[j];
            memset(res + l, 0, maxlen - l);   /* a shorter source is zeros beyond its end */
            break;
        case BITS_OP_OR:
            for (size_t j = 0; j < l; j++)
                res[j] |= s[j];
            break;
        case BITS_OP_XOR:
            for (size_t j = 0; j < l; j++)
                res[j] ^= s[j];
            break;
        default:
            break;
        }
    }
    *out = res;
    *out_len = maxlen;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */
/*
 * Encoding: | version u8 | length u64 | bytes |.  A 512 MiB string encodes
 * as 512 MiB plus 9 bytes.
 */

static void type_free(void *v) { bits_free(v); }
static size_t type_size(const void *v) { return bits_heap_bytes(v); }

static void type_encode(const void *v, wbuf_t *out)
{
    const bits_t *b = v;
    wbuf_put_u8(out, BITS_ENC_VERSION);
    wbuf_put_u64(out, b->len);
    wbuf_put_bytes(out, b->p, b->len);
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint64_t n = rbuf_u64(&r);
    if (r.err) {
        *why = "bits: truncated header";
        return NULL;
    }
    if (ver != BITS_ENC_VERSION) {
        *why = "bits: unknown encoding version";
        return NULL;
    }
    if (n > BITS_MAX_LEN || n != rbuf_left(&r)) {
        *why = "bits: length does not match the record";
        return NULL;
    }
    bits_t *b = bits_from(rbuf_bytes(&r, (size_t)n), (size_t)n);
    if (!b)
        *why = "out of memory";
    return b;
}

const ks_type_t bits_type = {
    .tag = TYPE_TAG_BITS,
    .name = "bits",
    .noun = "a bit string",
    .missing = "no such key",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
