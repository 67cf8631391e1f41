/*
 * it_membership.c - /bloom and /cuckoo through a real tallyd: the seeds'
 * BF transcript with RedisBloom's answers, BF/CF semantics (defaults,
 * RESERVE on an existing key, INFO of a missing key, ADD/ADDNX/DEL/COUNT),
 * full filters refused atomically (never a hang), every kind of bad input
 * leaving the state untouched, and persistence: the same answers after
 * kill -9 (journal replay) and after a snapshot restart, with cuckoo
 * evictions replayed identically.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

TALLY_ONE_SERVER_SUITE(T)

/* The JSON array member `name` as a string of 0/1, e.g. "1101". */
static void bools(const http_resp_t *r, const char *name, char *out, size_t n)
{
    json_t *a = json_object_get(r->json, name);
    if (!json_is_array(a))
        fail_msg("no array '%s' in %s", name, r->body);
    size_t i;
    for (i = 0; i < json_array_size(a) && i + 1 < n; i++)
        out[i] = json_is_true(json_array_get(a, i)) ? '1' : '0';
    out[i] = '\0';
}

static void expect_bools(const tally_proc_t *p, const char *method, const char *path, const char *body,
                         const char *name, const char *want)
{
    http_resp_t r = http(p, method, path, body, NULL);
    if (r.status != 200)
        fail_msg("%s %s %s: %ld %s", method, path, body, r.status, r.body);
    char got[256];
    bools(&r, name, got, sizeof(got));
    if (strcmp(got, want) != 0)
        fail_msg("%s %s %s: %s = %s, expected %s", method, path, body, name, got, want);
    http_free(&r);
}

/* A JSON body {"items":["<pfx>from", ...]} of n items. */
static char *items_body(const char *pfx, int from, int n, const char *extra)
{
    size_t cap = 64 + (size_t)n * 32;
    char *b = malloc(cap);
    size_t o = (size_t)snprintf(b, cap, "{%s\"items\":[", extra ? extra : "");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(b + o, cap - o, "%s\"%s%d\"", i ? "," : "", pfx, from + i);
    snprintf(b + o, cap - o, "]}");
    return b;
}

/* ------------------------------------------------------------------------ */
/* Bloom                                                                    */
/* ------------------------------------------------------------------------ */

/* seeds/001 (bf.add codehole user1..3 -> 1, exists -> 1; bf.madd user4..6 ->
 * 1 1 1; bf.mexists user4..7 -> 1 1 1 0). */
static void test_bloom_seed_transcript(void **state)
{
    (void)state;
    for (int i = 1; i <= 3; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"items\":[\"user%d\"]}", i);
        expect_bools(&T, "POST", "/bloom/codehole", body, "added", "1");
    }
    for (int i = 1; i <= 3; i++) {
        http_resp_t r = httpf(&T, "GET", NULL, "/bloom/codehole/exists?item=user%d", i);
        assert_status(&r, 200);
        assert_true(json_bool_of(&r, "exists"));
        http_free(&r);
    }
    expect_bools(&T, "POST", "/bloom/codehole", "{\"items\":[\"user4\",\"user5\",\"user6\"]}", "added", "111");
    expect_bools(&T, "POST", "/bloom/codehole/exists", "{\"items\":[\"user4\",\"user5\",\"user6\",\"user7\"]}",
                 "exists", "1110");
    /* BF.ADD of a present item -> 0; duplicates inside one MADD */
    expect_bools(&T, "POST", "/bloom/codehole", "{\"items\":[\"user1\",\"user8\",\"user8\"]}", "added", "010");
    http_resp_t r = http(&T, "GET", "/bloom/codehole", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "capacity"), 100);   /* RedisBloom's defaults */
    assert_int_equal(json_int_of(&r, "items"), 7);
    assert_int_equal(json_int_of(&r, "filters"), 1);
    assert_int_equal(json_int_of(&r, "expansion"), 2);
    assert_true(json_real_value(json_object_get(r.json, "error_rate")) == 0.01);
    http_free(&r);
}

static void test_bloom_semantics(void **state)
{
    (void)state;
    /* missing key: exists false, info 404 */
    expect_bools(&T, "POST", "/bloom/none/exists", "{\"items\":[\"a\"]}", "exists", "0");
    http_resp_t r = http(&T, "GET", "/bloom/none", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    r = http(&T, "GET", "/keys/none", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");   /* reads created nothing */
    http_free(&r);
    /* reserve; reserve again -> 409 EXISTS */
    r = http(&T, "PUT", "/bloom/res", "{\"error_rate\":0.001,\"capacity\":1000,\"expansion\":4}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    r = http(&T, "PUT", "/bloom/res", "{\"error_rate\":0.01,\"capacity\":10}", NULL);
    assert_error(&r, 409, "EXISTS");
    http_free(&r);
    r = http(&T, "GET", "/bloom/res", NULL, NULL);
    assert_int_equal(json_int_of(&r, "capacity"), 1000);
    assert_int_equal(json_int_of(&r, "expansion"), 4);
    assert_int_equal(json_int_of(&r, "hashes"), 11);   /* error 0.0005: ceil(ln2 * 15.8) */
    http_free(&r);
    /* scaling: grows past capacity with more sub-filters */
    r = http(&T, "PUT", "/bloom/grow", "{\"error_rate\":0.01,\"capacity\":50}", NULL);
    http_free(&r);
    char *b = items_body("g", 0, 400, NULL);
    r = http(&T, "POST", "/bloom/grow", b, NULL);
    assert_status(&r, 200);
    free(b);
    http_free(&r);
    r = http(&T, "GET", "/bloom/grow", NULL, NULL);
    assert_true(json_int_of(&r, "filters") >= 3);
    assert_true(json_int_of(&r, "capacity") >= 400);
    http_free(&r);
    b = items_body("g", 0, 400, NULL);
    r = http(&T, "POST", "/bloom/grow/exists", b, NULL);
    free(b);
    char got[512];
    bools(&r, "exists", got, sizeof(got));
    assert_null(strchr(got, '0'));   /* no false negatives */
    http_free(&r);
}

/* A non-scaling filter that fills up refuses the whole batch (507) and
 * keeps nothing of it. */
static void test_bloom_nonscaling_full(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "PUT", "/bloom/ns", "{\"error_rate\":0.01,\"capacity\":10,\"scaling\":false}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    char *b = items_body("n", 0, 8, NULL);
    r = http(&T, "POST", "/bloom/ns", b, NULL);
    assert_status(&r, 200);
    free(b);
    http_free(&r);
    b = items_body("m", 0, 5, NULL);   /* 8 + 5 > 10 */
    r = http(&T, "POST", "/bloom/ns", b, NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    assert_non_null(strstr(r.body, "full"));
    http_free(&r);
    r = http(&T, "POST", "/bloom/ns/exists", b, NULL);
    char got[32];
    bools(&r, "exists", got, sizeof(got));
    assert_string_equal(got, "00000");   /* rolled back */
    http_free(&r);
    free(b);
    r = http(&T, "GET", "/bloom/ns", NULL, NULL);
    assert_int_equal(json_int_of(&r, "items"), 8);
    assert_true(json_is_null(json_object_get(r.json, "expansion")));
    http_free(&r);
    b = items_body("m", 0, 2, NULL);   /* exactly fills it */
    r = http(&T, "POST", "/bloom/ns", b, NULL);
    assert_status(&r, 200);
    http_free(&r);
    free(b);
    r = http(&T, "POST", "/bloom/ns", "{\"items\":[\"one-more\"]}", NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Cuckoo                                                                   */
/* ------------------------------------------------------------------------ */

static void test_cuckoo_semantics(void **state)
{
    (void)state;
    expect_bools(&T, "POST", "/cuckoo/cf", "{\"items\":[\"a\",\"a\",\"b\"]}", "added", "111");   /* CF.ADD dups */
    http_resp_t r = http(&T, "GET", "/cuckoo/cf/count?item=a", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), 2);
    http_free(&r);
    expect_bools(&T, "POST", "/cuckoo/cf", "{\"items\":[\"a\",\"c\",\"c\"],\"nx\":true}", "added", "010");
    expect_bools(&T, "POST", "/cuckoo/cf/remove", "{\"items\":[\"a\",\"zz\"]}", "removed", "10");
    expect_bools(&T, "POST", "/cuckoo/cf/exists", "{\"items\":[\"a\",\"b\",\"c\",\"d\"]}", "exists", "1110");
    expect_bools(&T, "POST", "/cuckoo/cf/remove", "{\"items\":[\"a\",\"a\"]}", "removed", "10");
    r = http(&T, "GET", "/cuckoo/cf/exists?item=a", NULL, NULL);
    assert_false(json_bool_of(&r, "exists"));
    http_free(&r);
    r = http(&T, "GET", "/cuckoo/cf", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "items"), 2);
    assert_int_equal(json_int_of(&r, "deletes"), 2);
    assert_int_equal(json_int_of(&r, "capacity"), 1024);   /* CF.ADD's auto-create size */
    assert_int_equal(json_int_of(&r, "bucket_size"), 2);
    assert_int_equal(json_int_of(&r, "max_iterations"), 20);
    assert_int_equal(json_int_of(&r, "fingerprint_bits"), 8);
    assert_int_equal(json_int_of(&r, "buckets"), 512);
    http_free(&r);
    /* missing key: count 0, exists false, remove 404, info 404 */
    r = http(&T, "GET", "/cuckoo/none/count?item=a", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), 0);
    http_free(&r);
    r = http(&T, "POST", "/cuckoo/none/remove", "{\"items\":[\"a\"]}", NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    r = http(&T, "GET", "/cuckoo/none", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* reserve with 16-bit fingerprints; again -> EXISTS */
    r = http(&T, "PUT", "/cuckoo/c16",
             "{\"capacity\":10000,\"bucket_size\":4,\"max_iterations\":50,\"expansion\":3,\"fingerprint_bits\":16}",
             NULL);
    assert_status(&r, 201);
    http_free(&r);
    r = http(&T, "PUT", "/cuckoo/c16", "{\"capacity\":100}", NULL);
    assert_error(&r, 409, "EXISTS");
    http_free(&r);
    r = http(&T, "GET", "/cuckoo/c16", NULL, NULL);
    assert_int_equal(json_int_of(&r, "fingerprint_bits"), 16);
    assert_int_equal(json_int_of(&r, "expansion"), 4);   /* rounded up to a power of two */
    assert_int_equal(json_int_of(&r, "buckets"), 4096);
    assert_int_equal(json_int_of(&r, "size_bytes") > 4096 * 4 * 2, 1);
    http_free(&r);
}

/* expansion 0: the filter fills, then answers 507 quickly, atomically. */
static void test_cuckoo_full(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "PUT", "/cuckoo/small", "{\"capacity\":64,\"expansion\":0}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    int added = 0;
    for (int i = 0; i < 200; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"items\":[\"s%d\"]}", i);
        r = http(&T, "POST", "/cuckoo/small", body, NULL);
        if (r.status == 507) {
            assert_non_null(strstr(r.body, "full"));
            http_free(&r);
            break;
        }
        assert_status(&r, 200);
        http_free(&r);
        added++;
    }
    assert_true(added >= 40 && added <= 64);
    /* a batch that cannot fit changes nothing */
    r = http(&T, "GET", "/cuckoo/small", NULL, NULL);
    long long items = json_int_of(&r, "items");
    http_free(&r);
    char *b = items_body("t", 0, 30, NULL);
    r = http(&T, "POST", "/cuckoo/small", b, NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    http_free(&r);
    r = http(&T, "POST", "/cuckoo/small/exists", b, NULL);
    free(b);
    http_free(&r);
    r = http(&T, "GET", "/cuckoo/small", NULL, NULL);
    assert_int_equal(json_int_of(&r, "items"), items);
    http_free(&r);
    for (int i = 0; i < added; i++) {   /* everything added is still there */
        r = httpf(&T, "GET", NULL, "/cuckoo/small/exists?item=s%d", i);
        assert_true(json_bool_of(&r, "exists"));
        http_free(&r);
    }
}

/* ------------------------------------------------------------------------ */
/* RedisBloom parity: BF.INSERT, BF.CARD, BF.INFO field, CF.COMPACT          */
/* ------------------------------------------------------------------------ */

/* RedisBloom's test_overall.py test_insert and test_nonscaling_err: the
 * creating options take effect only when the add creates the filter (the
 * geometry is BF.DEBUG's: 98880 bytes, 11 hashes for 0.001 / 50000). */
static void test_bloom_insert_options(void **state)
{
    (void)state;
    expect_bools(&T, "POST", "/bloom/ins",
                 "{\"error_rate\":0.001,\"capacity\":50000,\"expansion\":2,\"items\":[\"foo\"]}", "added", "1");
    expect_bools(&T, "POST", "/bloom/ins", "{\"error_rate\":0.1,\"items\":[\"foo\",\"bar\",\"baz\"]}", "added",
                 "011");
    http_resp_t r = http(&T, "GET", "/bloom/ins", NULL, NULL);
    assert_int_equal(json_int_of(&r, "capacity"), 50000);
    assert_int_equal(json_int_of(&r, "size_bytes"), 32 + 64 + 98880);
    assert_int_equal(json_int_of(&r, "hashes"), 11);
    assert_int_equal(json_int_of(&r, "items"), 3);
    assert_true(json_real_value(json_object_get(r.json, "bits_per_item")) == 791040.0 / 50000);
    http_free(&r);
    /* nocreate on an existing filter adds */
    expect_bools(&T, "POST", "/bloom/ins", "{\"nocreate\":true,\"items\":[\"qux\"]}", "added", "1");
    /* NONSCALING with CAPACITY 3: a b c fit; a b c d d is refused whole here
     * (RedisBloom answers 0 0 0 and "non scaling filter is full") */
    expect_bools(&T, "POST", "/bloom/nse", "{\"capacity\":3,\"nonscaling\":true,\"items\":[\"a\",\"b\",\"c\"]}",
                 "added", "111");
    r = http(&T, "POST", "/bloom/nse", "{\"items\":[\"a\",\"b\",\"c\",\"d\",\"d\"]}", NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    assert_non_null(strstr(r.body, "non scaling filter is full"));
    http_free(&r);
    http_expect(&T, "GET", "/bloom/nse", NULL, 200,
                "{\"capacity\":3,\"size_bytes\":104,\"filters\":1,\"items\":3,\"error_rate\":0.01,\"scaling\":false,"
                "\"hashes\":7,\"bits_per_item\":21.333333333333332,\"expansion\":null}");
    /* expansion 0 is non-scaling too */
    expect_bools(&T, "POST", "/bloom/nse0", "{\"expansion\":0,\"items\":[\"a\"]}", "added", "1");
    http_expect(&T, "GET", "/bloom/nse0?field=expansion", NULL, 200, "{\"expansion\":null}");
    /* BF.INFO key <field>, BF.CARD */
    http_expect(&T, "GET", "/bloom/nse?field=capacity", NULL, 200, "{\"capacity\":3}");
    http_expect(&T, "GET", "/bloom/nse?field=size_bytes", NULL, 200, "{\"size_bytes\":104}");
    http_expect(&T, "GET", "/bloom/nse?field=filters", NULL, 200, "{\"filters\":1}");
    http_expect(&T, "GET", "/bloom/nse?field=items", NULL, 200, "{\"items\":3}");
    http_expect(&T, "GET", "/bloom/ins?field=expansion", NULL, 200, "{\"expansion\":2}");
    http_expect(&T, "GET", "/bloom/ins/card", NULL, 200, "{\"items\":4}");
    http_expect(&T, "GET", "/bloom/no-such-filter/card", NULL, 200, "{\"items\":0}");
    r = http(&T, "GET", "/keys/no-such-filter", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");   /* BF.CARD created nothing */
    http_free(&r);
}

/* RedisBloom's test_cuckoo.py: test_compact (100 adds to CF.RESERVE 8
 * MAXITERATIONS 50, then CF.COMPACT), test_expansion_0, test_max_expansions. */
static void test_cuckoo_parity(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "PUT", "/cuckoo/cpt", "{\"capacity\":8,\"max_iterations\":50}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    for (int i = 0; i < 100; i++) {
        char body[48];
        snprintf(body, sizeof(body), "{\"items\":[\"%d\"]}", i);
        expect_bools(&T, "POST", "/cuckoo/cpt", body, "added", "1");
    }
    r = http(&T, "GET", "/cuckoo/cpt", NULL, NULL);
    long long before = json_int_of(&r, "filters"), size_before = json_int_of(&r, "size_bytes");
    http_free(&r);
    expect_bools(&T, "POST", "/cuckoo/cpt/remove", "{\"items\":[\"0\",\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\"]}",
                 "removed", "11111111");
    r = http(&T, "POST", "/cuckoo/cpt/compact", NULL, NULL);
    assert_status(&r, 200);
    assert_true(json_int_of(&r, "filters") <= before);
    assert_true(json_int_of(&r, "size_bytes") <= size_before);
    assert_int_equal(json_int_of(&r, "items"), 92);
    http_free(&r);
    char *b = items_body("", 8, 92, NULL);
    expect_bools(&T, "POST", "/cuckoo/cpt/exists", b, "exists",
                 "11111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111");
    free(b);
    /* expansion 0: 4 adds fit, then "Filter is full" (CF.INSERT's -1 -1 is
     * a 507 for the batch here) */
    r = http(&T, "PUT", "/cuckoo/e0", "{\"capacity\":4,\"expansion\":0}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    for (int i = 1; i <= 4; i++) {
        char body[48];
        snprintf(body, sizeof(body), "{\"items\":[\"%d\"]}", i);
        expect_bools(&T, "POST", "/cuckoo/e0", body, "added", "1");
    }
    r = http(&T, "POST", "/cuckoo/e0", "{\"items\":[\"5\",\"6\"]}", NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    assert_non_null(strstr(r.body, "full"));
    http_free(&r);
    http_expect(&T, "GET", "/cuckoo/e0/count?item=5", NULL, 200, "{\"count\":0}");
    /* CF.RESERVE cf 4: 124 adds grow it to 32 sub-filters, the next add
     * is "Maximum expansions reached" */
    r = http(&T, "PUT", "/cuckoo/mx", "{\"capacity\":4}", NULL);
    http_free(&r);
    for (int i = 0; i < 124; i++) {
        char body[48];
        snprintf(body, sizeof(body), "{\"items\":[\"%d\"]}", i);
        expect_bools(&T, "POST", "/cuckoo/mx", body, "added", "1");
    }
    r = http(&T, "POST", "/cuckoo/mx", "{\"items\":[\"2048\"]}", NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    assert_non_null(strstr(r.body, "maximum expansions reached"));
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* SCANDUMP / LOADCHUNK                                                     */
/* ------------------------------------------------------------------------ */

typedef struct chunk {
    long long cursor;
    char *data;
    size_t len;
} chunk_t;

/* Every chunk of /<family>/<key>/dump, cursor 0 onwards, as SCANDUMP's
 * loop takes them; returns how many (the last, cursor 0, not included). */
static size_t dump_all(const tally_proc_t *p, const char *family, const char *key, chunk_t *out, size_t max)
{
    long long cur = 0;
    size_t n = 0;
    for (;;) {
        http_resp_t r = httpf(p, "GET", NULL, "/%s/%s/dump?cursor=%lld", family, key, cur);
        assert_status(&r, 200);
        char h[32];
        assert_true(http_header(&r, "Tally-Cursor", h, sizeof(h)));
        assert_true(http_header(&r, "Content-Type", h + 0, sizeof(h)) &&
                    strcmp(h, "application/octet-stream") == 0);
        char c[32];
        http_header(&r, "Tally-Cursor", c, sizeof(c));
        cur = atoll(c);
        if (cur == 0) {
            assert_int_equal(r.len, 0);
            http_free(&r);
            return n;
        }
        assert_true(n < max);
        out[n].cursor = cur;
        out[n].len = r.len;
        out[n].data = malloc(r.len + 1);
        memcpy(out[n].data, r.body, r.len);
        n++;
        http_free(&r);
    }
}

static void load_chunk(const tally_proc_t *p, const char *family, const char *key, long long cursor,
                       const void *data, size_t len, long status)
{
    char path[128];
    snprintf(path, sizeof(path), "/%s/%s/load?cursor=%lld", family, key, cursor);
    http_resp_t r = http_bin(p, "POST", path, data, len, "application/octet-stream");
    if (r.status != status)
        fail_msg("load %s cursor %lld (%zu bytes): %ld %s", path, cursor, len, r.status, r.body);
    if (status == 200)
        assert_int_equal(json_int_of(&r, "loaded"), (long long)len);
    http_free(&r);
}

static void chunks_free(chunk_t *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(c[i].data);
}

/* Little-endian writers for the reference header. */
static uint8_t *put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

/* The header chunk of BF.RESERVE 0.01 10 + "0".."99" written from
 * RedisBloom's format (core/bloom.h, sb.c's dumpedChainHeader): 99 items,
 * 4 links, options NOROUND|FORCE64, growth 2; link i of capacity 10 * 2^i,
 * error 0.005 / 2^i, bits per entry -ln(error) / ln(2)^2 and the bytes and
 * hashes BF.DEBUG shows for that filter. */
static size_t ref_bloom_header(uint8_t *out)
{
    static const uint64_t bytes[] = { 16, 32, 72, 160 }, caps[] = { 10, 20, 40, 80 }, sizes[] = { 10, 20, 40, 29 };
    static const uint32_t hashes[] = { 8, 9, 10, 11 };
    uint8_t *p = put_le(out, 99, 8);
    p = put_le(p, 4, 4);
    p = put_le(p, 1 | 4, 4);
    p = put_le(p, 2, 4);
    double e = 0.005;
    for (int i = 0; i < 4; i++, e *= 0.5) {
        double bpe = -log(e) / 0.480453013918201;
        uint64_t eb, bb;
        memcpy(&eb, &e, 8);
        memcpy(&bb, &bpe, 8);
        p = put_le(p, bytes[i], 8);
        p = put_le(p, bytes[i] * 8, 8);
        p = put_le(p, sizes[i], 8);
        p = put_le(p, eb, 8);
        p = put_le(p, bb, 8);
        p = put_le(p, hashes[i], 4);
        p = put_le(p, caps[i], 8);
        *p++ = 0;
    }
    return (size_t)(p - out);
}

/* BF.SCANDUMP / BF.LOADCHUNK: the header is RedisBloom's bytes; a dump
 * loads into another key piece by piece (chunks split, out of order) and
 * answers identically, dumps identically; bad chunks change nothing; the
 * loaded filter survives kill -9 (the loads replay from the journal). */
static void test_bloom_scandump(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    http_resp_t r = http(&p, "PUT", "/bloom/src", "{\"error_rate\":0.01,\"capacity\":10}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    char *b = items_body("", 0, 100, NULL);
    r = http(&p, "POST", "/bloom/src", b, NULL);
    assert_status(&r, 200);
    http_free(&r);
    free(b);
    chunk_t c[16];
    size_t n = dump_all(&p, "bloom", "src", c, 16);
    assert_int_equal(n, 5);   /* the header and one chunk per link */
    uint8_t want[20 + 4 * 53];
    size_t wl = ref_bloom_header(want);
    assert_int_equal(c[0].cursor, 1);
    assert_int_equal(c[0].len, wl);
    assert_memory_equal(c[0].data, want, wl);
    static const long long cursors[] = { 1, 17, 49, 121, 281 };   /* 1 + the link bytes so far */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(c[i].cursor, cursors[i]);
    /* data chunk before the header: no filter there */
    load_chunk(&p, "bloom", "dst", c[1].cursor, c[1].data, c[1].len, 404);
    /* a damaged header creates nothing */
    c[0].data[8] = 9;   /* nfilters 9: too short for it */
    load_chunk(&p, "bloom", "dst", 1, c[0].data, c[0].len, 400);
    c[0].data[8] = 4;
    r = http(&p, "GET", "/keys/dst", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    load_chunk(&p, "bloom", "dst", 1, c[0].data, c[0].len, 200);
    load_chunk(&p, "bloom", "dst", 1, c[0].data, c[0].len, 400);   /* the header again: refused */
    /* the last link's 160 bytes in 3 pieces, last piece first: piece (o, m)
     * goes with cursor C - n + o + m */
    const chunk_t *l = &c[4];
    load_chunk(&p, "bloom", "dst", l->cursor, l->data + 100, 60, 200);
    load_chunk(&p, "bloom", "dst", l->cursor - 160 + 40, l->data, 40, 200);
    load_chunk(&p, "bloom", "dst", l->cursor - 160 + 100, l->data + 40, 60, 200);
    /* a chunk across two links, or past the end, is refused */
    load_chunk(&p, "bloom", "dst", c[2].cursor + 8, c[3].data, 40, 400);
    load_chunk(&p, "bloom", "dst", 1000, c[1].data, c[1].len, 400);
    for (size_t i = 1; i < 4; i++)
        load_chunk(&p, "bloom", "dst", c[i].cursor, c[i].data, c[i].len, 200);
    json_t *src_info = http_get_json(&p, "/bloom/src"), *dst_info = http_get_json(&p, "/bloom/dst");
    assert_true(json_equal(src_info, dst_info));
    json_decref(dst_info);
    b = items_body("", 0, 300, NULL);
    http_resp_t a1 = http(&p, "POST", "/bloom/src/exists", b, NULL), a2 = http(&p, "POST", "/bloom/dst/exists", b, NULL);
    assert_string_equal(a1.body, a2.body);
    http_free(&a2);
    /* the loaded filter, and its dump, survive kill -9 */
    tally_kill(&p);
    tally_start(&p, dir, NULL);
    a2 = http(&p, "POST", "/bloom/dst/exists", b, NULL);
    assert_string_equal(a1.body, a2.body);
    http_free(&a1);
    http_free(&a2);
    free(b);
    dst_info = http_get_json(&p, "/bloom/dst");
    assert_true(json_equal(src_info, dst_info));
    json_decref(src_info);
    json_decref(dst_info);
    chunk_t d[16];
    assert_int_equal(dump_all(&p, "bloom", "dst", d, 16), n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(d[i].cursor, c[i].cursor);
        assert_int_equal(d[i].len, c[i].len);
        assert_memory_equal(d[i].data, c[i].data, c[i].len);
    }
    /* adds go on the same way in both */
    expect_bools(&p, "POST", "/bloom/src", "{\"items\":[\"x1\",\"x2\",\"5\"]}", "added", "110");
    expect_bools(&p, "POST", "/bloom/dst", "{\"items\":[\"x1\",\"x2\",\"5\"]}", "added", "110");
    chunks_free(c, n);
    chunks_free(d, n);
    p.own_dir = true;
    tally_cleanup(&p);
}

/* CF.SCANDUMP / CF.LOADCHUNK (RedisBloom's test_scandump_with_expansion:
 * 500 adds to CF.RESERVE 62 EXPANSION 2, dumped, deleted, loaded, every
 * item there); the header's fields as the format lays them out; a filter
 * of 12-bit fingerprints cannot be dumped; a header with zeroed counts is
 * refused (test_scandump_invalid_header). */
static void test_cuckoo_scandump(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "PUT", "/cuckoo/sd", "{\"capacity\":62,\"expansion\":2}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    char *b = items_body("", 0, 500, NULL);
    r = http(&T, "POST", "/cuckoo/sd", b, NULL);
    assert_status(&r, 200);
    http_free(&r);
    json_t *info = http_get_json(&T, "/cuckoo/sd");
    chunk_t c[64];
    size_t n = dump_all(&T, "cuckoo", "sd", c, 64);
    assert_int_equal(c[0].len, 38);
    uint8_t want[38], *p = want;
    p = put_le(p, 500, 8);   /* items */
    p = put_le(p, 32, 8);    /* buckets of the first sub-filter: next_pow2(62 / 2) */
    p = put_le(p, 0, 8);     /* deletes */
    p = put_le(p, (uint64_t)json_integer_value(json_object_get(info, "filters")), 8);
    p = put_le(p, 2, 2);
    p = put_le(p, 20, 2);
    p = put_le(p, 2, 2);
    assert_memory_equal(c[0].data, want, 38);
    http_expect(&T, "DELETE", "/keys/sd", NULL, 200, NULL);
    /* zeroed item and bucket counts: refused, nothing created */
    char bad[38];
    memcpy(bad, c[0].data, 38);
    memset(bad, 0, 9);
    load_chunk(&T, "cuckoo", "sd", 1, bad, 38, 400);
    r = http(&T, "GET", "/keys/sd", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    for (size_t i = 0; i < n; i++)
        load_chunk(&T, "cuckoo", "sd", c[i].cursor, c[i].data, c[i].len, 200);
    json_t *again = http_get_json(&T, "/cuckoo/sd");
    /* the format has no configured capacity: the first sub-filter's slots stand for it */
    assert_int_equal(json_integer_value(json_object_get(again, "capacity")), 64);
    json_object_del(info, "capacity");
    json_object_del(again, "capacity");
    assert_true(json_equal(info, again));
    json_decref(info);
    json_decref(again);
    r = http(&T, "POST", "/cuckoo/sd/exists", b, NULL);
    char got[600];
    bools(&r, "exists", got, sizeof(got));
    assert_null(strchr(got, '0'));
    http_free(&r);
    free(b);
    chunks_free(c, n);
    /* an empty filter dumps its header (RedisBloom answers 0 and nothing), and loads back */
    r = http(&T, "PUT", "/cuckoo/sd0", "{\"capacity\":100}", NULL);
    http_free(&r);
    n = dump_all(&T, "cuckoo", "sd0", c, 64);
    assert_int_equal(n, 2);   /* the header and the 64 empty buckets' slots */
    assert_int_equal(c[0].len, 38);
    assert_int_equal(c[1].len, 128);
    for (size_t i = 0; i < n; i++)
        load_chunk(&T, "cuckoo", "sd0copy", c[i].cursor, c[i].data, c[i].len, 200);
    chunks_free(c, n);
    http_expect(&T, "GET", "/cuckoo/sd0copy/count?item=x", NULL, 200, "{\"count\":0}");
    /* 12-bit fingerprints: no RedisBloom format */
    r = http(&T, "PUT", "/cuckoo/sd12", "{\"capacity\":100,\"fingerprint_bits\":12}", NULL);
    http_free(&r);
    r = http(&T, "GET", "/cuckoo/sd12/dump?cursor=0", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "8-bit"));
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Bad input                                                                */
/* ------------------------------------------------------------------------ */

static void test_bad_input(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/uv/auv", "{\"items\":[\"x\"]}", NULL);
    http_free(&r);
    r = http(&T, "PUT", "/bloom/bb", "{\"error_rate\":0.01,\"capacity\":100}", NULL);
    http_free(&r);
    r = http(&T, "PUT", "/cuckoo/cc", "{\"capacity\":100}", NULL);
    http_free(&r);
    static const struct {
        const char *method, *path, *body;
        int status;
        const char *code, *field;
    } cases[] = {
        { "PUT", "/bloom/nb", "{}", 400, "BAD_REQUEST", "error_rate" },   /* BF.RESERVE needs both */
        { "PUT", "/bloom/nb", "{\"error_rate\":0.01}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"capacity\":100}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":0,\"capacity\":10}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":1,\"capacity\":10}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":1.5,\"capacity\":10}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":-0.01,\"capacity\":10}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":\"0.01\",\"capacity\":10}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":0.01,\"capacity\":0}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"error_rate\":0.01,\"capacity\":-5}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"error_rate\":0.01,\"capacity\":1.5}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"error_rate\":0.01,\"capacity\":99999999999}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"error_rate\":1e-12,\"capacity\":4000000000}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"error_rate\":0.01,\"capacity\":10,\"expansion\":32769}", 400, "BAD_REQUEST",
          "expansion" },
        { "PUT", "/bloom/nb", "{\"error_rate\":0.01,\"capacity\":10,\"scaling\":false,\"expansion\":2}", 400,
          "BAD_REQUEST", "expansion" },
        { "PUT", "/bloom/nb", "{\"error_rate\":0.01,\"capacity\":10,\"scaling\":\"no\"}", 400, "BAD_REQUEST",
          "scaling" },
        { "PUT", "/bloom/nb", "{\"capacity\":10,\"color\":1}", 400, "BAD_REQUEST", "color" },
        { "PUT", "/bloom/auv", "{\"error_rate\":0.01,\"capacity\":10}", 409, "WRONGTYPE", NULL },
        /* BF.INSERT's options */
        { "POST", "/bloom/nb", "{\"items\":[\"a\"],\"nocreate\":true}", 404, "NOT_FOUND", NULL },
        { "POST", "/bloom/nb", "{\"items\":[\"a\"],\"nocreate\":true,\"capacity\":10}", 400, "BAD_REQUEST",
          "nocreate" },
        { "POST", "/bloom/nb", "{\"items\":[\"a\"],\"nocreate\":1}", 400, "BAD_REQUEST", "nocreate" },
        { "POST", "/bloom/nb", "{\"items\":[\"a\"],\"capacity\":0.3}", 400, "BAD_REQUEST", "capacity" },
        { "POST", "/bloom/nb", "{\"items\":[\"a\"],\"error_rate\":\"big\"}", 400, "BAD_REQUEST", "error_rate" },
        { "POST", "/bloom/nb", "{\"items\":[\"a\"],\"expansion\":-1}", 400, "BAD_REQUEST", "expansion" },
        { "POST", "/bloom/nb", "{\"items\":[\"a\"],\"nonscaling\":true,\"expansion\":2}", 400, "BAD_REQUEST",
          "expansion" },
        { "POST", "/bloom/nb", "{\"nocreate\":true}", 400, "BAD_REQUEST", "items" },
        { "POST", "/bloom/bb", "{\"items\":[\"a\"],\"error_rate\":2}", 400, "BAD_REQUEST", "error_rate" },
        /* BF.INFO field, BF.CARD, SCANDUMP / LOADCHUNK */
        { "GET", "/bloom/bb?field=nope", NULL, 400, "BAD_REQUEST", "field" },
        { "GET", "/bloom/bb?field=items&field=capacity", NULL, 400, "BAD_REQUEST", "field" },
        { "GET", "/bloom/bb?x=1", NULL, 400, "BAD_REQUEST", "x" },
        { "GET", "/bloom/nb?field=items", NULL, 404, "NOT_FOUND", NULL },
        { "GET", "/bloom/auv/card", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/bloom/bb/card?x=1", NULL, 400, "BAD_REQUEST", "x" },
        { "GET", "/bloom/nb/dump?cursor=0", NULL, 404, "NOT_FOUND", NULL },
        { "GET", "/bloom/auv/dump?cursor=0", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/bloom/bb/dump", NULL, 400, "BAD_REQUEST", "cursor" },
        { "GET", "/bloom/bb/dump?cursor=-1", NULL, 400, "BAD_REQUEST", "cursor" },
        { "GET", "/bloom/bb/dump?cursor=str", NULL, 400, "BAD_REQUEST", "cursor" },
        { "POST", "/bloom/bb/load?cursor=1", "{}", 415, "UNSUPPORTED_MEDIA_TYPE", NULL },
        { "POST", "/bloom/bb", "{\"items\":[]}", 400, "BAD_REQUEST", "items" },
        { "POST", "/bloom/bb", "{\"items\":[\"a\",false]}", 400, "BAD_REQUEST", "items" },
        { "POST", "/bloom/bb", "{\"items\":{}}", 400, "BAD_REQUEST", "items" },
        { "POST", "/bloom/bb", "{\"item\":[\"a\"]}", 400, "BAD_REQUEST", "item" },
        { "POST", "/bloom/auv", "{\"items\":[\"a\"]}", 409, "WRONGTYPE", NULL },
        { "POST", "/bloom/auv/exists", "{\"items\":[\"a\"]}", 409, "WRONGTYPE", NULL },
        { "GET", "/bloom/auv/exists?item=a", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/bloom/auv", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/bloom/bb/exists", NULL, 400, "BAD_REQUEST", "item" },
        { "GET", "/bloom/bb/exists?item=a&item=b", NULL, 400, "BAD_REQUEST", "item" },
        { "GET", "/bloom/bb/exists?item=a&x=1", NULL, 400, "BAD_REQUEST", "x" },
        { "PUT", "/cuckoo/nc", "{}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/cuckoo/nc", "{\"capacity\":0}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/cuckoo/nc", "{\"capacity\":3}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/cuckoo/nc", "{\"capacity\":100,\"bucket_size\":0}", 400, "BAD_REQUEST", "bucket_size" },
        { "PUT", "/cuckoo/nc", "{\"capacity\":100,\"bucket_size\":256}", 400, "BAD_REQUEST", "bucket_size" },
        { "PUT", "/cuckoo/nc", "{\"capacity\":100,\"max_iterations\":0}", 400, "BAD_REQUEST", "max_iterations" },
        { "PUT", "/cuckoo/nc", "{\"capacity\":100,\"expansion\":-1}", 400, "BAD_REQUEST", "expansion" },
        { "PUT", "/cuckoo/nc", "{\"capacity\":100,\"fingerprint_bits\":10}", 400, "BAD_REQUEST", "fingerprint_bits" },
        { "PUT", "/cuckoo/nc", "{\"capacity\":100,\"fingerprint_bits\":32}", 400, "BAD_REQUEST", "fingerprint_bits" },
        { "PUT", "/cuckoo/nc", "{\"capacity\":8589934592}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/cuckoo/bb", "{\"capacity\":100}", 409, "WRONGTYPE", NULL },
        { "POST", "/cuckoo/cc", "{\"items\":[]}", 400, "BAD_REQUEST", "items" },
        { "POST", "/cuckoo/cc", "{\"items\":[\"a\"],\"nx\":1}", 400, "BAD_REQUEST", "nx" },
        { "POST", "/cuckoo/cc", "{\"items\":[[\"a\"]]}", 400, "BAD_REQUEST", "items" },
        { "POST", "/cuckoo/bb", "{\"items\":[\"a\"]}", 409, "WRONGTYPE", NULL },
        { "POST", "/cuckoo/cc/remove", "{\"items\":[null]}", 400, "BAD_REQUEST", "items" },
        { "POST", "/cuckoo/bb/remove", "{\"items\":[\"a\"]}", 409, "WRONGTYPE", NULL },
        { "GET", "/cuckoo/bb/count?item=a", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/cuckoo/cc/count", NULL, 400, "BAD_REQUEST", "item" },
        { "GET", "/cuckoo/bb", NULL, 409, "WRONGTYPE", NULL },
        { "POST", "/cuckoo/nc/compact", NULL, 404, "NOT_FOUND", NULL },
        { "POST", "/cuckoo/bb/compact", NULL, 409, "WRONGTYPE", NULL },
        { "POST", "/cuckoo/cc/compact?x=1", NULL, 400, "BAD_REQUEST", "x" },
        { "GET", "/cuckoo/nc/dump?cursor=0", NULL, 404, "NOT_FOUND", NULL },
        { "GET", "/cuckoo/cc/dump?cursor=-1", NULL, 400, "BAD_REQUEST", "cursor" },
        { "GET", "/cuckoo/bb/dump?cursor=0", NULL, 409, "WRONGTYPE", NULL },
        { "POST", "/cuckoo/cc/load?cursor=1", "{}", 415, "UNSUPPORTED_MEDIA_TYPE", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        r = http(&T, cases[i].method, cases[i].path, cases[i].body, NULL);
        if (r.status != cases[i].status)
            fail_msg("case %zu %s %s %s: expected %d, got %ld %s", i, cases[i].method, cases[i].path,
                     cases[i].body ? cases[i].body : "", cases[i].status, r.status, r.body);
        assert_error(&r, cases[i].status, cases[i].code);
        if (cases[i].field) {
            const char *f = json_string_value(json_object_get(json_object_get(r.json, "error"), "field"));
            if (!f || strcmp(f, cases[i].field) != 0)
                fail_msg("case %zu: expected field %s in %s", i, cases[i].field, r.body);
        }
        http_free(&r);
    }
    /* > 10 000 items */
    char *b = items_body("x", 0, 10001, NULL);
    r = http(&T, "POST", "/bloom/bb", b, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "POST", "/cuckoo/cc", b, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    free(b);
    /* nothing was created or changed */
    static const char *const absent[] = { "/keys/nb", "/keys/nc" };
    for (int i = 0; i < 2; i++) {
        r = http(&T, "GET", absent[i], NULL, NULL);
        assert_error(&r, 404, "NOT_FOUND");
        http_free(&r);
    }
    r = http(&T, "GET", "/bloom/bb", NULL, NULL);
    assert_int_equal(json_int_of(&r, "items"), 0);
    http_free(&r);
    r = http(&T, "GET", "/cuckoo/cc", NULL, NULL);
    assert_int_equal(json_int_of(&r, "items"), 0);
    http_free(&r);
    r = http(&T, "GET", "/keys/auv", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "type")), "uv");
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Persistence and deterministic replay                                     */
/* ------------------------------------------------------------------------ */

/* Runs the same request script against a fresh tallyd and against one that
 * is killed (journal replay) or restarted (snapshot) in the middle: every
 * answer after the restart must be the same -- including which adds a
 * nearly full cuckoo filter refuses, which depends on every eviction choice
 * made before the restart. */
static char *script_answers(bool restart_kill, bool restart_term)
{
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    http_resp_t r = http(&p, "PUT", "/cuckoo/det", "{\"capacity\":512,\"expansion\":0,\"bucket_size\":2}", NULL);
    http_free(&r);
    r = http(&p, "PUT", "/bloom/det", "{\"capacity\":300,\"error_rate\":0.05}", NULL);
    http_free(&r);
    for (int i = 0; i < 380; i += 20) {
        char *b = items_body("p", i, 20, NULL);
        r = http(&p, "POST", "/cuckoo/det", b, NULL);
        http_free(&r);
        r = http(&p, "POST", "/bloom/det", b, NULL);
        http_free(&r);
        free(b);
    }
    r = http(&p, "POST", "/cuckoo/det/remove", "{\"items\":[\"p1\",\"p7\",\"p300\"]}", NULL);
    http_free(&r);
    if (restart_kill) {
        tally_kill(&p);
        tally_start(&p, dir, NULL);
    } else if (restart_term) {
        assert_int_equal(tally_stop(&p), 0);
        tally_start(&p, dir, NULL);
    }
    size_t cap = 1 << 16, o = 0;
    char *out = malloc(cap);
    for (int i = 0; i < 200; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"items\":[\"q%d\"]}", i);
        r = http(&p, "POST", "/cuckoo/det", body, NULL);
        o += (size_t)snprintf(out + o, cap - o, "%ld,", r.status);
        http_free(&r);
        r = http(&p, "POST", "/bloom/det", body, NULL);
        o += (size_t)snprintf(out + o, cap - o, "%s;", r.body);
        http_free(&r);
    }
    r = http(&p, "GET", "/cuckoo/det", NULL, NULL);
    o += (size_t)snprintf(out + o, cap - o, "%s", r.body);
    http_free(&r);
    r = http(&p, "GET", "/bloom/det", NULL, NULL);
    o += (size_t)snprintf(out + o, cap - o, "%s", r.body);
    http_free(&r);
    p.own_dir = true;
    tally_cleanup(&p);
    return out;
}

static void test_persistence_and_replay(void **state)
{
    (void)state;
    char *plain = script_answers(false, false);
    assert_non_null(strstr(plain, "507"));   /* the script does reach "full" */
    char *killed = script_answers(true, false);
    char *termed = script_answers(false, true);
    assert_string_equal(plain, killed);
    assert_string_equal(plain, termed);
    free(plain);
    free(killed);
    free(termed);
}

/* Issue 37, item 7: headers RedisBloom writes and loads, from its own code
 * (deps/bloom/bloom.c bloom_init / bloom_validate_integrity, src/sb.c
 * SB_NewChainFromHeader, src/cf.c CFHeader_Load; tests/flow/test_overall.py
 * test_scandump_invalid_header for what it refuses).  No redis-server with
 * RedisBloom is available here (not in Debian), so the headers are built
 * from that arithmetic: a link's bits per entry are not tied to its error
 * rate there, only its hash count to the bits per entry. */
static void test_loadchunk_headers_upstream(void **state)
{
    (void)state;
    /* a full non-scaling filter (items == capacity) whose bits per entry
     * (12) are not -ln(0.01)/ln2^2: RedisBloom loads it, and the next add
     * fails as the filter is full; it used to be refused, and that add to
     * create a fresh filter */
    uint8_t h[73], *p = put_le(h, 10, 8);
    p = put_le(p, 1, 4);
    p = put_le(p, 1 | 4 | 8, 4);   /* NOROUND | FORCE64 | NO_SCALING */
    p = put_le(p, 2, 4);
    double e = 0.01, bpe = 12;
    uint64_t eb, bb;
    memcpy(&eb, &e, 8);
    memcpy(&bb, &bpe, 8);
    p = put_le(p, 16, 8);
    p = put_le(p, 128, 8);
    p = put_le(p, 10, 8);
    p = put_le(p, eb, 8);
    p = put_le(p, bb, 8);
    p = put_le(p, (uint64_t)ceil(0.693147180559945 * bpe), 4);
    p = put_le(p, 10, 8);
    *p++ = 0;
    assert_int_equal(p - h, 73);
    load_chunk(&T, "bloom", "rbfull", 1, h, sizeof(h), 200);
    http_resp_t r = http(&T, "POST", "/bloom/rbfull", "{\"items\":[\"x\"]}", NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    assert_non_null(strstr(r.body, "full"));
    http_free(&r);
    r = http(&T, "GET", "/bloom/rbfull", NULL, NULL);
    assert_int_equal(json_int_of(&r, "items"), 10);
    assert_int_equal(json_int_of(&r, "hashes"), 9);
    http_free(&r);
    /* a hash count that does not follow from the bits per entry is what
     * RedisBloom refuses ("received bad data"); its key stays empty there,
     * so an add then creates a filter with the defaults, as here */
    h[20 + 40] = 8;
    load_chunk(&T, "bloom", "rbbad", 1, h, sizeof(h), 400);
    r = http(&T, "POST", "/bloom/rbbad", "{\"items\":[\"x\"]}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "GET", "/bloom/rbbad", NULL, NULL);
    assert_int_equal(json_int_of(&r, "capacity"), 100);
    http_free(&r);

    /* cuckoo: a first sub-filter of 2^32 buckets (capacity 2^32 at bucket
     * size 1, what openapi.yaml allows) is a geometry RedisBloom's code
     * writes; of 255-slot buckets it is larger than --max-value-size, so it
     * is refused for its size, not as a geometry */
    uint8_t c[38], *q = put_le(c, 0, 8);
    q = put_le(q, 1ULL << 32, 8);
    q = put_le(q, 0, 8);
    q = put_le(q, 1, 8);
    q = put_le(q, 255, 2);
    q = put_le(q, 20, 2);
    q = put_le(q, 1, 2);
    char path[64];
    snprintf(path, sizeof(path), "/cuckoo/cfbig/load?cursor=1");
    r = http_bin(&T, "POST", path, c, sizeof(c), "application/octet-stream");
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "--max-value-size"));
    http_free(&r);
    put_le(c + 8, 1ULL << 33, 8);
    r = http_bin(&T, "POST", path, c, sizeof(c), "application/octet-stream");
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "geometry"));
    http_free(&r);
    /* and PUT takes a capacity up to 2^32 (openapi.yaml), its first
     * sub-filter within the limits (--max-value-size, --maxmemory 64 MB here) */
    tally_proc_t small;
    tally_start(&small, NULL, (const char *[]){ "--maxmemory", "64mb", NULL });
    r = http(&small, "PUT", "/cuckoo/cfbig", "{\"capacity\":4294967296}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "--max-value-size"));
    http_free(&r);
    r = http(&small, "PUT", "/cuckoo/cfbig", "{\"capacity\":4294967297}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "4294967296"));
    http_free(&r);
    http_expect(&small, "PUT", "/cuckoo/cfbig", "{\"capacity\":8388608}", 201, NULL);   /* 4 MiB of slots */
    tally_cleanup(&small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bloom_seed_transcript),
        cmocka_unit_test(test_bloom_semantics),
        cmocka_unit_test(test_bloom_nonscaling_full),
        cmocka_unit_test(test_cuckoo_semantics),
        cmocka_unit_test(test_cuckoo_full),
        cmocka_unit_test(test_bloom_insert_options),
        cmocka_unit_test(test_cuckoo_parity),
        cmocka_unit_test(test_bloom_scandump),
        cmocka_unit_test(test_cuckoo_scandump),
        cmocka_unit_test(test_loadchunk_headers_upstream),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_persistence_and_replay),
    };
    return cmocka_run_group_tests_name("/bloom and /cuckoo", tests, setup, teardown);
}
