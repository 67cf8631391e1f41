/*
 * test_bloom.c - the scalable Bloom filter against RedisBloom and theory.
 *
 * RedisBloom's own test cases (tests/flow/test_overall.py: BF.DEBUG lines,
 * filter counts with expansion 1/2/4, BF.INFO sizes, BF.INSERT, the
 * non-scaling error) must give its numbers exactly; BF.SCANDUMP /
 * BF.LOADCHUNK bytes are checked against an encoder written here from the
 * format description, including an old-style RedisBloom filter (32-bit
 * hashing, power-of-two links) whose bits this file computes on its own;
 * every field of a loaded header is validated; generation-1 encodings decode
 * and keep their rules; the false-positive rate is measured against the
 * configured rate; a failed batch is undone byte for byte.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/bloom.h"
#include "core/codec.h"
#include "core/hash.h"
#include "tests/unit/gen1_vectors.h"
#include "tests/unit/same_encoding.h"

static void key_of(char *out, size_t n, uint64_t seed, uint64_t i)
{
    snprintf(out, n, "k%llx:%llu", (unsigned long long)seed, (unsigned long long)i);
}

/* Adds the decimal strings lo..hi-1, as RedisBloom's tests do. */
static void add_range(bloom_t *b, int lo, int hi)
{
    char k[32];
    for (int i = lo; i < hi; i++) {
        snprintf(k, sizeof(k), "%d", i);
        int rc = bloom_add(b, k, strlen(k), 0, NULL);
        assert_true(rc == BLOOM_ADDED || rc == BLOOM_PRESENT);
    }
}

/* The BF.DEBUG line of link i, as RedisBloom prints it. */
static void debug_line(const bloom_t *b, uint32_t i, char *out, size_t n)
{
    bloom_link_info_t l;
    assert_true(bloom_get_link(b, i, &l));
    snprintf(out, n, "bytes:%llu bits:%llu hashes:%u hashwidth:%u capacity:%llu size:%llu ratio:%g",
             (unsigned long long)l.bytes, (unsigned long long)l.bits, l.hashes, l.hash_width,
             (unsigned long long)l.capacity, (unsigned long long)l.items, l.error);
}

static void assert_debug(const bloom_t *b, uint64_t size, const char *const *lines, uint32_t n)
{
    bloom_info_t in;
    bloom_get_info(b, &in);
    assert_int_equal(in.items, size);
    assert_int_equal(in.filters, n);
    char line[200];
    for (uint32_t i = 0; i < n; i++) {
        debug_line(b, i, line, sizeof(line));
        assert_string_equal(line, lines[i]);
    }
}

/* ------------------------------------------------------------------------ */
/* RedisBloom's numbers                                                     */
/* ------------------------------------------------------------------------ */

/* test_overall.py test_debug. */
static void test_rb_debug(void **state)
{
    (void)state;
    bloom_t *b = bloom_create(0.01, 10, 2, true);
    add_range(b, 0, 100);
    static const char *const l1[] = {
        "bytes:16 bits:128 hashes:8 hashwidth:64 capacity:10 size:10 ratio:0.005",
        "bytes:32 bits:256 hashes:9 hashwidth:64 capacity:20 size:20 ratio:0.0025",
        "bytes:72 bits:576 hashes:10 hashwidth:64 capacity:40 size:40 ratio:0.00125",
        "bytes:160 bits:1280 hashes:11 hashwidth:64 capacity:80 size:29 ratio:0.000625",
    };
    assert_debug(b, 99, l1, 4);
    bloom_free(b);

    b = bloom_create(0.001, 100, 2, true);
    add_range(b, 0, 4000);
    static const char *const l2[] = {
        "bytes:200 bits:1600 hashes:11 hashwidth:64 capacity:100 size:100 ratio:0.0005",
        "bytes:432 bits:3456 hashes:12 hashwidth:64 capacity:200 size:200 ratio:0.00025",
        "bytes:936 bits:7488 hashes:13 hashwidth:64 capacity:400 size:400 ratio:0.000125",
        "bytes:2016 bits:16128 hashes:14 hashwidth:64 capacity:800 size:800 ratio:6.25e-05",
        "bytes:4320 bits:34560 hashes:15 hashwidth:64 capacity:1600 size:1600 ratio:3.125e-05",
        "bytes:9216 bits:73728 hashes:16 hashwidth:64 capacity:3200 size:897 ratio:1.5625e-05",
    };
    assert_debug(b, 3997, l2, 6);
    bloom_free(b);
}

/* test_expansion: 100 adds into capacity 4 at expansion 1, 2, 4. */
static void test_rb_expansion(void **state)
{
    (void)state;
    static const uint32_t exp[] = { 1, 2, 4 }, filters[] = { 23, 5, 4 };
    for (int i = 0; i < 3; i++) {
        bloom_t *b = bloom_create(0.01, 4, exp[i], true);
        add_range(b, 0, 100);
        char k[16];
        for (int j = 0; j < 100; j++) {
            snprintf(k, sizeof(k), "%d", j);
            assert_true(bloom_check(b, k, strlen(k)));
        }
        bloom_info_t in;
        bloom_get_info(b, &in);
        assert_int_equal(in.filters, filters[i]);
        bloom_free(b);
    }
}

/* test_info*, test_issue178, test_nonscaling_err, test_insert, test_card. */
static void test_rb_info(void **state)
{
    (void)state;
    bloom_info_t in;
    bloom_t *b = bloom_create(0.001, 100, 2, true);
    bloom_get_info(b, &in);
    assert_int_equal(in.capacity, 100);
    assert_int_equal(in.size_bytes, 296);
    assert_int_equal(in.filters, 1);
    assert_int_equal(in.items, 0);
    assert_int_equal(in.expansion, 2);
    assert_true(in.scaling);
    assert_int_equal(bloom_add(b, "foo", 3, 0, NULL), BLOOM_ADDED);
    bloom_get_info(b, &in);
    assert_int_equal(in.items, 1);   /* BF.CARD */
    bloom_free(b);

    /* BF.RESERVE bf 0.000001 300000000: one link of 1132420136 bytes (Size
     * 1132420232 = 32 + 64 + bytes); measured without allocating it */
    const char *f;
    assert_null(bloom_validate(0.000001, 300000000, 2, true, &f));
    uint64_t bytes = bloom_bytes_for(0.000001, 300000000, 2, true);
    assert_true(bytes >= 1132420136 && bytes < 1132420136 + 1024);
    b = bloom_create(0.01, 100, 2, true);
    assert_int_equal(bloom_bytes_for(0.01, 100, 2, true), bloom_memory(b));
    bloom_free(b);

    /* BF.INSERT nonscaling_err CAPACITY 3 NONSCALING ITEMS a b c; then
     * a b c d: 0 0 0, "non scaling filter is full" */
    b = bloom_create(0.01, 3, 2, false);
    assert_int_equal(bloom_add(b, "a", 1, 0, NULL), BLOOM_ADDED);
    assert_int_equal(bloom_add(b, "b", 1, 0, NULL), BLOOM_ADDED);
    assert_int_equal(bloom_add(b, "c", 1, 0, NULL), BLOOM_ADDED);
    assert_int_equal(bloom_add(b, "a", 1, 0, NULL), BLOOM_PRESENT);
    assert_int_equal(bloom_add(b, "b", 1, 0, NULL), BLOOM_PRESENT);
    assert_int_equal(bloom_add(b, "c", 1, 0, NULL), BLOOM_PRESENT);
    assert_int_equal(bloom_add(b, "d", 1, 0, NULL), BLOOM_FULL);
    bloom_get_info(b, &in);
    assert_int_equal(in.capacity, 3);
    assert_int_equal(in.size_bytes, 104);
    assert_int_equal(in.items, 3);
    assert_false(in.scaling);
    bloom_free(b);

    /* expansion 0 is non-scaling too (BF.RESERVE ... EXPANSION 0 / config 0) */
    b = bloom_create(0.01, 3, 0, true);
    bloom_get_info(b, &in);
    assert_false(in.scaling);
    bloom_free(b);

    /* BF.INSERT missingFilter ERROR 0.001 CAPACITY 50000 EXPANSION 2 ITEMS
     * foo -> [1]; ERROR 0.1 ITEMS foo bar baz on it -> [0, 1, 1] */
    b = bloom_create(0.001, 50000, 2, true);
    assert_int_equal(bloom_add(b, "foo", 3, 0, NULL), BLOOM_ADDED);
    static const char *const l1[] = {
        "bytes:98880 bits:791040 hashes:11 hashwidth:64 capacity:50000 size:1 ratio:0.0005" };
    assert_debug(b, 1, l1, 1);
    assert_int_equal(bloom_add(b, "foo", 3, 0, NULL), BLOOM_PRESENT);
    assert_int_equal(bloom_add(b, "bar", 3, 0, NULL), BLOOM_ADDED);
    assert_int_equal(bloom_add(b, "baz", 3, 0, NULL), BLOOM_ADDED);
    static const char *const l3[] = {
        "bytes:98880 bits:791040 hashes:11 hashwidth:64 capacity:50000 size:3 ratio:0.0005" };
    assert_debug(b, 3, l3, 1);
    bloom_free(b);

    /* error rates above 0.25 are built at 0.25; very high ones still work
     * (test_very_high_error_rate) */
    b = bloom_create(0.99, 3, 2, false);
    bloom_get_info(b, &in);
    assert_true(in.error_rate == 0.25);
    assert_int_equal(bloom_add(b, "1", 1, 0, NULL), BLOOM_ADDED);
    bloom_free(b);
    b = bloom_create(0.9999999999999999, 100, 2, false);
    assert_int_equal(bloom_add(b, "1", 1, 0, NULL), BLOOM_ADDED);
    bloom_free(b);
}

/* The seeds' transcript: bf.add codehole user1..3 -> 1; exists -> 1;
 * madd user4..6 -> 1 1 1; mexists user4..7 -> 1 1 1 0. */
static void test_seed_transcript(void **state)
{
    (void)state;
    bloom_t *b = bloom_create(BLOOM_DEFAULT_ERROR, BLOOM_DEFAULT_CAPACITY, BLOOM_DEFAULT_EXPANSION, true);
    const char *add[] = { "user1", "user2", "user3", "user4", "user5", "user6" };
    for (int i = 0; i < 6; i++)
        assert_int_equal(bloom_add(b, add[i], 5, 0, NULL), BLOOM_ADDED);
    for (int i = 0; i < 6; i++)
        assert_true(bloom_check(b, add[i], 5));
    assert_false(bloom_check(b, "user7", 5));
    assert_int_equal(bloom_add(b, "user1", 5, 0, NULL), BLOOM_PRESENT);
    bloom_free(b);
}

/* No fixed limit on links: expansion 1 from capacity 1 passes 128 links;
 * growth stops at the caller's max_bytes instead (BLOOM_BUDGET), changing
 * nothing, and bloom_next_link_bytes tells what the next link would add. */
static void test_growth_limit(void **state)
{
    (void)state;
    bloom_t *b = bloom_create(0.01, 1, 1, true);
    add_range(b, 0, 300);
    bloom_info_t in;
    bloom_get_info(b, &in);
    assert_true(in.filters > 128);
    uint64_t mem = bloom_memory(b), next = bloom_next_link_bytes(b);
    assert_true(next >= 8);
    /* a limit at the current size: the next link does not fit */
    char k[16];
    int rc = BLOOM_PRESENT, i = 300;
    while (rc == BLOOM_PRESENT || rc == BLOOM_ADDED) {
        snprintf(k, sizeof(k), "%d", i++);
        rc = bloom_add(b, k, strlen(k), mem, NULL);
        if (rc == BLOOM_ADDED) {   /* the newest link still had room */
            bloom_get_info(b, &in);
            mem = bloom_memory(b);
        }
    }
    assert_int_equal(rc, BLOOM_BUDGET);
    bloom_info_t after;
    bloom_get_info(b, &after);
    assert_int_equal(after.filters, in.filters);
    assert_int_equal(bloom_memory(b), mem);
    /* room for exactly that link: it is added */
    next = bloom_next_link_bytes(b);
    assert_int_equal(bloom_add(b, k, strlen(k), mem + next - 1, NULL), BLOOM_BUDGET);
    assert_int_equal(bloom_add(b, k, strlen(k), mem + next, NULL), BLOOM_ADDED);
    assert_int_equal(bloom_memory(b), mem + next);
    bloom_free(b);
}

/* ------------------------------------------------------------------------ */
/* BF.SCANDUMP / BF.LOADCHUNK                                               */
/* ------------------------------------------------------------------------ */

/* The header as RedisBloom's packed structs lay it out, written here field
 * by field from the format description. */
typedef struct ref_link {
    uint64_t bytes, bits, size;
    double error, bpe;
    uint32_t hashes;
    uint64_t entries;
    uint8_t n2;
} ref_link_t;

static size_t ref_header(uint8_t *out, uint64_t size, uint32_t options, uint32_t growth, const ref_link_t *l,
                         uint32_t n)
{
    uint8_t *p = out;
    le64_store(p, size), p += 8;
    le32_store(p, n), p += 4;
    le32_store(p, options), p += 4;
    le32_store(p, growth), p += 4;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t e, bpe;
        memcpy(&e, &l[i].error, 8);
        memcpy(&bpe, &l[i].bpe, 8);
        le64_store(p, l[i].bytes), p += 8;
        le64_store(p, l[i].bits), p += 8;
        le64_store(p, l[i].size), p += 8;
        le64_store(p, e), p += 8;
        le64_store(p, bpe), p += 8;
        le32_store(p, l[i].hashes), p += 4;
        le64_store(p, l[i].entries), p += 8;
        *p++ = l[i].n2;
    }
    return (size_t)(p - out);
}

static double ref_bpe(double e) { return -log(e) / 0.480453013918201; }

/* Our header of BF.RESERVE 0.01 10 + "0".."99" (the debug case) equals the
 * reference bytes. */
static void test_dump_header_bytes(void **state)
{
    (void)state;
    bloom_t *b = bloom_create(0.01, 10, 2, true);
    add_range(b, 0, 100);
    ref_link_t l[4];
    static const uint64_t bytes[] = { 16, 32, 72, 160 }, caps[] = { 10, 20, 40, 80 }, sizes[] = { 10, 20, 40, 29 };
    static const uint32_t hashes[] = { 8, 9, 10, 11 };
    double e = 0.005;
    for (int i = 0; i < 4; i++, e *= 0.5)
        l[i] = (ref_link_t){ bytes[i], bytes[i] * 8, sizes[i], e, ref_bpe(e), hashes[i], caps[i], 0 };
    uint8_t want[20 + 4 * 53];
    size_t n = ref_header(want, 99, BLOOM_OPT_NOROUND | BLOOM_OPT_FORCE64, 2, l, 4);
    assert_int_equal(n, 232);
    wbuf_t got = WBUF_INIT;
    bloom_dump_header(b, &got);
    assert_int_equal(got.len, n);
    assert_memory_equal(got.data, want, n);
    wbuf_free(&got);
    bloom_free(b);
}

/* Cursors: chunks stop at link boundaries and at max_len; the last answer
 * is (0, nothing). */
static void test_dump_cursors(void **state)
{
    (void)state;
    bloom_t *b = bloom_create(0.01, 10, 2, true);   /* links of 16 and 32 bytes */
    add_range(b, 0, 15);
    bloom_info_t in;
    bloom_get_info(b, &in);
    assert_int_equal(in.filters, 2);
    static const int64_t want_cursor[] = { 11, 17, 27, 37, 47, 49 };
    static const size_t want_len[] = { 10, 6, 10, 10, 10, 2 };
    int64_t cur = 1;
    for (int i = 0; i < 6; i++) {
        size_t len;
        const uint8_t *d = bloom_dump_chunk(b, &cur, 10, &len);
        assert_non_null(d);
        assert_int_equal(len, want_len[i]);
        assert_int_equal(cur, want_cursor[i]);
    }
    size_t len = 99;
    assert_null(bloom_dump_chunk(b, &cur, 10, &len));
    assert_int_equal(cur, 0);
    assert_int_equal(len, 0);
    cur = -5;
    assert_null(bloom_dump_chunk(b, &cur, 10, &len));
    assert_int_equal(cur, 0);
    bloom_free(b);
}

/* Dumps b in chunks of max_len and loads them into a new filter. */
static bloom_t *dump_and_load(const bloom_t *b, size_t max_len)
{
    wbuf_t h = WBUF_INIT;
    bloom_dump_header(b, &h);
    bool nomem;
    const char *why;
    bloom_t *c = bloom_load_header(h.data, h.len, 0, &nomem, &why);
    assert_non_null(c);
    wbuf_free(&h);
    int64_t cur = 1;
    for (;;) {
        size_t len;
        const uint8_t *d = bloom_dump_chunk(b, &cur, max_len, &len);
        if (!d)
            break;
        assert_true(bloom_load_chunk(c, cur, d, len, &why));
    }
    return c;
}

/* test_scandump: reserve 0.01 62, 500 adds, dump, load, every item exists;
 * the copy is byte-identical and grows identically. */
static void test_dump_roundtrip(void **state)
{
    (void)state;
    bloom_t *b = bloom_create(0.01, 62, 2, true);
    add_range(b, 0, 500);
    for (size_t max = 1; max <= BLOOM_DUMP_CHUNK; max = max < 64 ? max + 37 : BLOOM_DUMP_CHUNK + (max == BLOOM_DUMP_CHUNK)) {
        bloom_t *c = dump_and_load(b, max);
        char k[16];
        for (int i = 0; i < 500; i++) {
            snprintf(k, sizeof(k), "%d", i);
            assert_true(bloom_check(c, k, strlen(k)));
        }
        assert_same_encoding(&bloom_type, b, c);
        bloom_free(c);
        if (max == BLOOM_DUMP_CHUNK)
            break;
    }
    bloom_t *c = dump_and_load(b, BLOOM_DUMP_CHUNK);
    add_range(b, 500, 1500);
    add_range(c, 500, 1500);
    assert_same_encoding(&bloom_type, b, c);
    bloom_free(c);
    bloom_free(b);
}

/* An old RedisBloom filter: 32-bit MurmurHash2 (no FORCE64), power-of-two
 * link (no NOROUND).  Its geometry and bits are computed here from
 * RedisBloom's rules, independently of core/bloom.c, loaded, and must
 * answer like the model - also after growing into a second link. */
typedef struct ref_filter {
    ref_link_t l[2];
    uint8_t *bits[2];
    int n;
} ref_filter_t;

static ref_link_t ref_pow2_link(uint64_t entries, double error)
{
    ref_link_t l = { 0 };
    l.error = error;
    l.bpe = ref_bpe(error);
    double want = (double)entries * l.bpe;
    l.n2 = (uint8_t)(logb(want) + 1);
    uint64_t bits = UINT64_C(1) << l.n2;
    l.entries = entries + (uint64_t)((double)(uint64_t)((double)bits - want) / l.bpe);
    l.bytes = bits % 64 ? (bits / 64 + 1) * 8 : bits / 8;
    l.bits = l.bytes * 8;
    l.hashes = (uint32_t)ceil(0.693147180559945 * l.bpe);
    return l;
}

static bool ref_probe(ref_filter_t *f, int li, const char *item, bool set)
{
    uint64_t a = murmur2(item, strlen(item), 0x9747b28c);
    uint64_t b = murmur2(item, strlen(item), (uint32_t)a);
    uint64_t mod = UINT64_C(1) << f->l[li].n2;
    bool all = true;
    for (uint32_t i = 0; i < f->l[li].hashes; i++) {
        uint64_t x = (a + i * b) % mod;
        all &= (f->bits[li][x / 8] >> (x % 8)) & 1;
        if (set)
            f->bits[li][x / 8] |= (uint8_t)(1u << (x % 8));
    }
    return all;
}

static bool ref_check(ref_filter_t *f, const char *item)
{
    for (int i = f->n - 1; i >= 0; i--)
        if (ref_probe(f, i, item, false))
            return true;
    return false;
}

static bool ref_add(ref_filter_t *f, const char *item)
{
    if (ref_check(f, item))
        return false;
    if (f->l[f->n - 1].size >= f->l[f->n - 1].entries) {
        f->l[f->n] = ref_pow2_link(f->l[f->n - 1].entries * 2, f->l[f->n - 1].error * 0.5);
        f->bits[f->n] = calloc(f->l[f->n].bytes, 1);
        f->n++;
    }
    ref_probe(f, f->n - 1, item, true);
    f->l[f->n - 1].size++;
    return true;
}

static void test_load_old_redisbloom_filter(void **state)
{
    (void)state;
    ref_filter_t f = { .n = 1 };
    f.l[0] = ref_pow2_link(100, 0.01);
    assert_int_equal(f.l[0].n2, 10);          /* 958.5 bits -> 2^10 */
    assert_int_equal(f.l[0].entries, 106);    /* (1024 - 958.5) / 9.585 = 6 more items */
    assert_int_equal(f.l[0].hashes, 7);
    f.bits[0] = calloc(f.l[0].bytes, 1);
    char k[16];
    uint64_t added = 0;
    for (int i = 0; i < 60; i++) {
        snprintf(k, sizeof(k), "i%d", i);
        added += ref_add(&f, k);
    }
    uint8_t hdr[20 + 53];
    size_t hl = ref_header(hdr, added, 0, 2, f.l, 1);
    bool nomem;
    const char *why;
    bloom_t *b = bloom_load_header(hdr, hl, 0, &nomem, &why);
    assert_non_null(b);
    /* the array in two chunks, second one first */
    assert_true(bloom_load_chunk(b, 1 + 128, f.bits[0] + 64, 64, &why));
    assert_true(bloom_load_chunk(b, 1 + 64, f.bits[0], 64, &why));
    bloom_link_info_t li;
    assert_true(bloom_get_link(b, 0, &li));
    assert_int_equal(li.hash_width, 32);
    assert_int_equal(li.bits, 1024);
    for (int i = 0; i < 400; i++) {
        snprintf(k, sizeof(k), "i%d", i);
        assert_int_equal(bloom_check(b, k, strlen(k)), ref_check(&f, k));
    }
    /* grows into a second power-of-two link exactly as the model */
    for (int i = 60; i < 200; i++) {
        snprintf(k, sizeof(k), "i%d", i);
        bool want = ref_add(&f, k);
        assert_int_equal(bloom_add(b, k, strlen(k), 0, NULL), want ? BLOOM_ADDED : BLOOM_PRESENT);
    }
    assert_int_equal(f.n, 2);
    wbuf_t got = WBUF_INIT;
    bloom_dump_header(b, &got);
    uint8_t want_hdr[20 + 2 * 53];
    size_t wl = ref_header(want_hdr, f.l[0].size + f.l[1].size, 0, 2, f.l, 2);
    assert_int_equal(got.len, wl);
    assert_memory_equal(got.data, want_hdr, wl);
    wbuf_free(&got);
    int64_t cur = 1;
    for (int li2 = 0; li2 < 2; li2++) {
        size_t len;
        const uint8_t *d = bloom_dump_chunk(b, &cur, BLOOM_DUMP_CHUNK, &len);
        assert_int_equal(len, f.l[li2].bytes);
        assert_memory_equal(d, f.bits[li2], len);
    }
    free(f.bits[0]);
    free(f.bits[1]);
    bloom_free(b);
}

/* Every header field that RedisBloom's code could not have produced (or
 * would not load) is refused; chunks that do not fit are refused and change
 * nothing. */
static void test_load_validation(void **state)
{
    (void)state;
    ref_link_t l = { 16, 128, 3, 0.005, ref_bpe(0.005), 8, 10, 0 };
    uint8_t good[73], bad[80];
    size_t n = ref_header(good, 3, 5, 2, &l, 1);
    bool nomem;
    const char *why;
    bloom_t *b = bloom_load_header(good, n, 0, &nomem, &why);
    assert_non_null(b);
    uint64_t mem = bloom_memory(b);
    assert_int_equal(bloom_load_header_bytes(good, n), mem);   /* the size, known before it is built */
    bloom_free(b);
    assert_null(bloom_load_header(good, n, mem - 1, &nomem, &why));   /* over the limit on a value */
    assert_false(nomem);
    assert_non_null(b = bloom_load_header(good, n, mem, &nomem, &why));
    bloom_free(b);
    assert_int_equal(bloom_load_header_bytes(good, n - 1), 0);
    for (size_t cut = 0; cut < n; cut++)
        assert_null(bloom_load_header(good, cut, 0, &nomem, &why));
    memcpy(bad, good, n);
    bad[n] = 0;
    assert_null(bloom_load_header(bad, n + 1, 0, &nomem, &why));   /* trailing byte */

    /* RedisBloom checks the hash count against the bits per entry, not the
     * bits per entry against the error rate (deps/bloom/bloom.c
     * bloom_validate_integrity): such a header loads there, and here */
    ref_link_t loose = { 16, 128, 3, 0.005, 2 * ref_bpe(0.005), 16, 10, 0 };
    n = ref_header(bad, 3, 5, 2, &loose, 1);
    b = bloom_load_header(bad, n, 0, &nomem, &why);
    if (!b)
        fail_msg("a header RedisBloom loads was refused: %s", why);
    bloom_free(b);
    ref_link_t v[] = {
        { 16, 128, 3, 0.005, ref_bpe(0.005), 9, 10, 0 },     /* hashes */
        { 16, 128, 3, 0.005, 2 * ref_bpe(0.005), 15, 10, 0 }, /* hashes of another bpe */
        { 16, 128, 3, 0.005, 2000, 1387, 10, 0 },             /* bpe past any error's (lookups bounded) */
        { 16, 128, 3, 0, 0, 0, 10, 0 },                        /* error 0 */
        { 16, 128, 3, 1, ref_bpe(1), 0, 10, 0 },               /* error 1 */
        { 16, 120, 3, 0.005, ref_bpe(0.005), 8, 10, 0 },       /* bits != bytes * 8 */
        { 0, 0, 3, 0.005, ref_bpe(0.005), 8, 10, 0 },          /* no bytes */
        { 12, 96, 3, 0.005, ref_bpe(0.005), 8, 10, 0 },        /* bytes not a multiple of 8 */
        { 16, 128, 3, 0.005, ref_bpe(0.005), 8, 10, 8 },       /* 2^n2 > bits */
        { 16, 128, 3, 0.005, ref_bpe(0.005), 8, 10, 64 },      /* n2 > 63 */
        { 16, 128, 4, 0.005, ref_bpe(0.005), 8, 10, 0 },       /* items != chain size */
        { UINT64_C(1) << 61, 0 /* bytes * 8 wraps */, 3, 0.005, ref_bpe(0.005), 8, 10, 0 },   /* too big */
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        n = ref_header(bad, 3, 5, 2, &v[i], 1);
        assert_null(bloom_load_header(bad, n, 0, &nomem, &why));
    }
    n = ref_header(bad, 3, 5 | 0x100, 2, &l, 1);   /* unknown option */
    assert_null(bloom_load_header(bad, n, 0, &nomem, &why));
    n = ref_header(bad, 3, 5, 2, &l, 0);           /* no filters */
    assert_null(bloom_load_header(bad, n, 0, &nomem, &why));
    n = ref_header(bad, 3, 5, 2, &l, 1);
    le32_store(bad + 8, 2);                         /* claims 2 filters, holds 1 */
    assert_null(bloom_load_header(bad, n, 0, &nomem, &why));

    b = bloom_load_header(good, 73, 0, &nomem, &why);
    uint8_t chunk[17] = { 0xff };
    assert_false(bloom_load_chunk(b, 0, chunk, 1, &why));
    assert_false(bloom_load_chunk(b, -1, chunk, 1, &why));
    assert_false(bloom_load_chunk(b, 5, chunk, 6, &why));          /* cursor < length */
    assert_false(bloom_load_chunk(b, 1, chunk, 1, &why));          /* starts before the data */
    assert_false(bloom_load_chunk(b, 1 + 17, chunk, 17, &why));    /* longer than the link */
    assert_false(bloom_load_chunk(b, 1 + 16 + 1, chunk, 1, &why)); /* past the end */
    assert_true(bloom_load_chunk(b, 1 + 16, chunk, 16, &why));
    assert_false(bloom_check(b, "x", 1));
    bloom_free(b);
}

/* ------------------------------------------------------------------------ */
/* Generation 1                                                             */
/* ------------------------------------------------------------------------ */

static void test_gen1(void **state)
{
    (void)state;
    const char *why;
    /* reserve 0.01 4 expansion 1, "0".."29" added by generation 1; "30".."99"
     * added now answer and grow as generation 1 did (24 links, not 23) */
    bloom_t *b = bloom_type.decode(gen1_bloom, sizeof(gen1_bloom), &why);
    assert_non_null(b);
    char k[16];
    for (int i = 30; i < 100; i++) {
        snprintf(k, sizeof(k), "%d", i);
        int rc = bloom_add(b, k, strlen(k), 0, NULL);
        assert_int_equal(rc == BLOOM_ADDED, gen1_bloom_added[i - 30] == '1');
    }
    bloom_info_t in;
    bloom_get_info(b, &in);
    assert_int_equal(in.filters, GEN1_BLOOM_FILTERS);
    assert_int_equal(in.items, GEN1_BLOOM_ITEMS);
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "x%d", i);
        assert_int_equal(bloom_check(b, k, strlen(k)), gen1_bloom_exists[i] == '1');
    }
    /* re-encoded as version 2, it keeps its rules */
    wbuf_t w = WBUF_INIT;
    bloom_type.encode(b, &w);
    bloom_t *c = bloom_type.decode(w.data, w.len, &why);
    assert_non_null(c);
    assert_same_encoding(&bloom_type, b, c);
    add_range(b, 100, 300);
    add_range(c, 100, 300);
    assert_same_encoding(&bloom_type, b, c);
    wbuf_free(&w);
    bloom_free(c);
    bloom_free(b);

    /* a generation-1 filter created now follows the same rules */
    b = bloom_create_gen(TALLY_GEN_1, 0.01, 4, 1, true);
    add_range(b, 0, 100);
    bloom_get_info(b, &in);
    assert_int_equal(in.filters, GEN1_BLOOM_FILTERS);
    bloom_free(b);

    /* non-scaling at 0.5: generation 1 did not cap the rate */
    b = bloom_type.decode(gen1_bloom_ns, sizeof(gen1_bloom_ns), &why);
    assert_non_null(b);
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "n%d", i);
        assert_int_equal(bloom_check(b, k, strlen(k)), gen1_bloom_ns_exists[i] == '1');
    }
    bloom_get_info(b, &in);
    assert_true(in.error_rate == 0.5);
    bloom_free(b);
}

/* ------------------------------------------------------------------------ */
/* Batches, validation, encoding                                            */
/* ------------------------------------------------------------------------ */

static void test_nonscaling_full_and_undo(void **state)
{
    (void)state;
    char k[32];
    int rc, i;
    /* a batch that fails part-way is undone byte for byte */
    bloom_t *b = bloom_create(0.01, 20, 2, false);
    for (i = 0; i < 15; i++) {
        snprintf(k, sizeof(k), "pre%d", i);
        bloom_add(b, k, strlen(k), 0, NULL);
    }
    wbuf_t before = WBUF_INIT;
    bloom_type.encode(b, &before);
    bloom_undo_t *u = bloom_undo_begin(b);
    for (i = 0;; i++) {
        snprintf(k, sizeof(k), "batch%d", i);
        rc = bloom_add(b, k, strlen(k), 0, u);
        if (rc == BLOOM_FULL)
            break;
    }
    bloom_undo_rollback(b, u);
    assert_encodes_as(&bloom_type, b, &before);
    wbuf_free(&before);
    bloom_free(b);

    /* undo across a growth drops the new link */
    b = bloom_create(0.01, 5, 2, true);
    bloom_type.encode(b, &before);
    u = bloom_undo_begin(b);
    for (i = 0; i < 40; i++) {
        snprintf(k, sizeof(k), "grow%d", i);
        bloom_add(b, k, strlen(k), 0, u);
    }
    bloom_info_t info;
    bloom_get_info(b, &info);
    assert_true(info.filters > 1);
    bloom_undo_rollback(b, u);
    assert_encodes_as(&bloom_type, b, &before);
    bloom_get_info(b, &info);
    assert_int_equal(info.size_bytes, 32 + 64 + 8);   /* 5 * 11.04 bits -> 64 */
    wbuf_free(&before);
    bloom_free(b);
}

static void test_validate(void **state)
{
    (void)state;
    const char *f;
    assert_null(bloom_validate(0.01, 100, 2, true, &f));
    assert_non_null(bloom_validate(0, 100, 2, true, &f));
    assert_string_equal(f, "error_rate");
    assert_non_null(bloom_validate(1, 100, 2, true, &f));
    assert_non_null(bloom_validate(-0.5, 100, 2, true, &f));
    assert_non_null(bloom_validate(NAN, 100, 2, true, &f));
    assert_non_null(bloom_validate(0.01, 0, 2, true, &f));
    assert_string_equal(f, "capacity");
    assert_null(bloom_validate(0.01, 100, 0, true, &f));   /* non-scaling */
    assert_non_null(bloom_validate(0.01, 100, 32769, true, &f));
    assert_string_equal(f, "expansion");
    assert_true(bloom_bytes_for(0.01, 1000000, 2, true) > 1 << 20);   /* 1.2 MB > 1 MiB */
    assert_null(bloom_validate(0.999, 1, 1, true, &f));                /* tiny: 8 bytes */
    bloom_t *b = bloom_create(0.999, 1, 1, true);
    assert_int_equal(bloom_add(b, "a", 1, 0, NULL), BLOOM_ADDED);
    assert_true(bloom_check(b, "a", 1));
    bloom_free(b);
}

/* Encode -> decode -> encode is stable; truncations are refused and flipped
 * bytes either refused or decoded into something that re-encodes. */
static void test_encoding(void **state)
{
    (void)state;
    bloom_t *b = bloom_create(0.01, 50, 2, true);
    char k[32];
    for (int i = 0; i < 180; i++) {
        snprintf(k, sizeof(k), "e%d", i);
        bloom_add(b, k, strlen(k), 0, NULL);
    }
    wbuf_t a = WBUF_INIT;
    bloom_type.encode(b, &a);
    assert_int_equal(a.data[0], 2);
    const char *why;
    bloom_t *c = bloom_type.decode(a.data, a.len, &why);
    assert_non_null(c);
    assert_same_encoding(&bloom_type, b, c);
    for (int i = 0; i < 180; i++) {
        snprintf(k, sizeof(k), "e%d", i);
        assert_true(bloom_check(c, k, strlen(k)));
    }
    for (size_t cut = 0; cut < a.len; cut++)
        assert_null(bloom_type.decode(a.data, cut, &why));
    uint8_t *m = malloc(a.len);
    for (size_t i = 0; i < a.len; i++) {
        memcpy(m, a.data, a.len);
        m[i] ^= 0xff;
        bloom_t *d = bloom_type.decode(m, a.len, &why);
        if (d) {
            wbuf_t x = WBUF_INIT;
            bloom_type.encode(d, &x);
            assert_int_equal(x.len, a.len);
            wbuf_free(&x);
        }
        bloom_free(d);
    }
    free(m);
    wbuf_free(&a);
    bloom_free(b);
    bloom_free(c);
}

/* ------------------------------------------------------------------------ */
/* False-positive rate                                                      */
/* ------------------------------------------------------------------------ */

/* Adds n items (seed s) and returns the FPR over `probes` never-added items. */
static double fill_and_measure(bloom_t *b, uint64_t s, uint64_t n, uint64_t probes)
{
    char k[64];
    for (uint64_t i = 0; i < n; i++) {
        key_of(k, sizeof(k), s, i);
        int rc = bloom_add(b, k, strlen(k), 0, NULL);
        assert_true(rc == BLOOM_ADDED || rc == BLOOM_PRESENT);
    }
    for (uint64_t i = 0; i < n; i++) {   /* no false negatives */
        key_of(k, sizeof(k), s, i);
        assert_true(bloom_check(b, k, strlen(k)));
    }
    uint64_t fp = 0;
    for (uint64_t i = 0; i < probes; i++) {
        key_of(k, sizeof(k), s + 0x1000000, i);
        fp += bloom_check(b, k, strlen(k));
    }
    return (double)fp / (double)probes;
}

static void test_fpr_at_capacity(void **state)
{
    (void)state;
    static const double rates[] = { 0.1, 0.01, 0.001 };
    for (size_t r = 0; r < 3; r++) {
        bloom_t *b = bloom_create(rates[r], 100000, 2, true);
        double fpr = fill_and_measure(b, r + 1, 100000, 200000);
        bloom_info_t info;
        bloom_get_info(b, &info);
        print_message("bloom error %.3f at capacity: fpr %.5f, %u filter(s), %.2f bits/item\n", rates[r], fpr,
                      info.filters, (double)info.bits / (double)info.items);
        assert_int_equal(info.filters, 1);
        assert_true(fpr <= rates[r]);
        bloom_free(b);
        /* non-scaling uses the full error: the rate itself in theory, plus
         * what the even probe steps cost (see bloom.h); 3 sigma of noise */
        b = bloom_create(rates[r], 100000, 2, false);
        fpr = fill_and_measure(b, r + 11, 100000, 200000);
        print_message("  non-scaling: fpr %.5f\n", fpr);
        assert_true(fpr <= rates[r] * 1.05 + 3 * sqrt(rates[r] / 200000));
        bloom_free(b);
    }
}

/* RedisBloom's defaults (error 0.01, capacity 100) grown to 10 000 items:
 * the mean over 8 independently seeded filters (a small filter's realised
 * rate varies a lot with its random fill). */
static void test_fpr_after_growing_100x(void **state)
{
    (void)state;
    for (uint32_t exp = 1; exp <= 4; exp *= 2) {
        double sum = 0, worst = 0, bpi = 0;
        uint32_t filters = 0;
        for (uint64_t s = 0; s < 8; s++) {
            bloom_t *b = bloom_create(0.01, 100, exp, true);
            double fpr = fill_and_measure(b, 1000 * exp + s, 10000, 100000);
            bloom_info_t info;
            bloom_get_info(b, &info);
            assert_true(info.capacity >= info.items && info.items > 9800);
            filters = info.filters;
            bpi = (double)info.bits / (double)info.items;
            sum += fpr;
            worst = fpr > worst ? fpr : worst;
            bloom_free(b);
        }
        print_message("bloom 0.01 cap 100 grown to 100x (expansion %u): mean fpr %.5f (worst of 8: %.5f), "
                      "%u filters, %.2f bits/item\n", exp, sum / 8, worst, filters, bpi);
        assert_true(sum / 8 <= 0.0125);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rb_debug),
        cmocka_unit_test(test_rb_expansion),
        cmocka_unit_test(test_rb_info),
        cmocka_unit_test(test_seed_transcript),
        cmocka_unit_test(test_growth_limit),
        cmocka_unit_test(test_dump_header_bytes),
        cmocka_unit_test(test_dump_cursors),
        cmocka_unit_test(test_dump_roundtrip),
        cmocka_unit_test(test_load_old_redisbloom_filter),
        cmocka_unit_test(test_load_validation),
        cmocka_unit_test(test_gen1),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_nonscaling_full_and_undo),
        cmocka_unit_test(test_encoding),
        cmocka_unit_test(test_fpr_at_capacity),
        cmocka_unit_test(test_fpr_after_growing_100x),
    };
    return cmocka_run_group_tests_name("bloom", tests, NULL, NULL);
}
