/*
 * it_bits.c - /bits through a real tallyd, with a real redis-server as the
 * reference.
 *
 *  - differential: a seeded random program of thousands of mixed operations
 *    (SET, SETBIT, GETBIT, BITCOUNT and BITPOS with every range form and
 *    unit, BITOP AND/OR/XOR/NOT with missing sources and empty results,
 *    BITFIELD with every width, overflow mode and #N offsets, GET, DEL) sent
 *    to both; every answer and, at the end, every key's bytes are compared —
 *    then again after a crash (journal replay) and after a snapshot reload;
 *  - the seeds' examples over HTTP;
 *  - every kind of bad input: its envelope, and no state change;
 *  - the memory limit: a huge SETBIT is a 507, not a 512 MiB allocation;
 *  - a 512 MiB string (SETBIT at 2^32-1) survives the journal and a snapshot.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "tests/integration/harness.h"
#include "tests/integration/redis_ref.h"

#define NKEYS 6
#define PROGRAM_OPS 6000

static tally_proc_t T, M, P;   /* the shared server; the memory-limit and 512 MiB tests' own */
static redis_ref_t R;

static int setup(void **state)
{
    (void)state;
    tally_start(&T, NULL, NULL);
    return 0;
}

/* Also stops what a failed test left running. */
static int teardown(void **state)
{
    (void)state;
    tally_cleanup(&T);
    tally_cleanup(&M);
    tally_cleanup(&P);
    redis_ref_stop(&R);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static long long redis_int(redis_ref_t *r, int argc, const char *const *argv, const size_t *lens, const char *what)
{
    resp_t *v = redis_cmdv(r, argc, argv, lens);
    if (v->kind != RESP_INT)
        fail_msg("%s: redis answered %s", what, v->kind == RESP_ERROR ? v->str : "a non-integer");
    long long x = v->integer;
    resp_free(v);
    return x;
}

static long long tally_int(const char *method, const char *path, const char *body, const char *member,
                           const char *what)
{
    http_resp_t h = http(&T, method, path, body, NULL);
    if (h.status != 200)
        fail_msg("%s: tally answered %ld %s", what, h.status, h.body);
    long long x = json_int_of(&h, member);
    http_free(&h);
    return x;
}

static void same_int(long long want, long long got, int step, const char *what)
{
    if (want != got)
        fail_msg("step %d, %s: redis %lld, tally %lld", step, what, want, got);
}

/* Compares the bytes of key k on both sides. */
static void same_bytes(redis_ref_t *r, const char *k, int step)
{
    resp_t *v = redis_cmd(r, "GET", k, NULL);
    char path[64];
    snprintf(path, sizeof(path), "/bits/%s", k);
    http_resp_t h = http(&T, "GET", path, NULL, NULL);
    if (v->kind == RESP_NIL) {
        if (h.status != 404)
            fail_msg("step %d: GET %s: redis has no key, tally %ld (%zu bytes)", step, k, h.status, h.len);
    } else {
        if (h.status != 200 || h.len != v->len || memcmp(h.body, v->str, v->len) != 0)
            fail_msg("step %d: GET %s: redis %zu bytes, tally %ld with %zu bytes (%s)", step, k, v->len, h.status,
                     h.len, h.len == v->len ? "contents differ" : "lengths differ");
    }
    resp_free(v);
    http_free(&h);
}

static int64_t rand_range(rng_t *g, int64_t lo, int64_t hi) { return lo + (int64_t)rng_below(g, (uint64_t)(hi - lo + 1)); }

/* A value for BITFIELD SET/INCRBY: small, around the width's edges, the
 * 64-bit extremes, or anything. */
static int64_t field_value(rng_t *g, unsigned w)
{
    /* sums in unsigned arithmetic: they wrap instead of overflowing */
    uint64_t d = (uint64_t)rand_range(g, -3, 3);
    switch (rng_below(g, 6)) {
    case 0: return rand_range(g, -10, 10);
    case 1: return (int64_t)(((uint64_t)1 << (w - 1)) + d);
    case 2: return w < 63 ? (int64_t)(((uint64_t)1 << w) + d) : (int64_t)d;
    case 3: return (int64_t)(0 - ((uint64_t)1 << (w - 1)) + d);
    case 4: return rng_below(g, 2) ? INT64_MAX - rand_range(g, 0, 200) : INT64_MIN + rand_range(g, 0, 200);
    default: return (int64_t)rng_next(g);
    }
}

/* ------------------------------------------------------------------------ */
/* The differential program                                                 */
/* ------------------------------------------------------------------------ */

static void run_program(redis_ref_t *ref, uint64_t seed, int nops)
{
    rng_t g;
    rng_seed(&g, seed);
    char keys[NKEYS][16];
    for (int i = 0; i < NKEYS; i++)
        snprintf(keys[i], sizeof(keys[i]), "d%d", i);
    static char path[4096], body[65536], what[65536];
    for (int step = 0; step < nops; step++) {
        const char *k = keys[rng_below(&g, NKEYS)];
        unsigned kind = (unsigned)rng_below(&g, 100);
        if (kind < 6) { /* SET raw bytes, odd lengths, sometimes empty */
            size_t len = rng_below(&g, 5) == 0 ? 0 : (size_t)rng_below(&g, 48);
            uint8_t buf[48];
            int style = (int)rng_below(&g, 3);
            for (size_t i = 0; i < len; i++)
                buf[i] = style == 0 ? (uint8_t)rng_next(&g) : style == 1 ? 0xff : (uint8_t)(rng_below(&g, 4) ? 0 : rng_next(&g));
            const char *argv[] = { "SET", k, (const char *)buf };
            const size_t lens[] = { 3, strlen(k), len };
            resp_t *v = redis_cmdv(ref, 3, argv, lens);
            resp_free(v);
            snprintf(path, sizeof(path), "/bits/%s", k);
            http_resp_t h = http_bin(&T, "PUT", path, buf, len, "application/octet-stream");
            if (h.status != 200 || json_int_of(&h, "length") != (long long)len)
                fail_msg("step %d: PUT %s (%zu bytes): %ld %s", step, k, len, h.status, h.body);
            http_free(&h);
        } else if (kind < 26) { /* SETBIT */
            uint64_t off = rng_below(&g, 10) == 0 ? rng_below(&g, 20000) : rng_below(&g, 400);
            int val = (int)rng_below(&g, 2);
            char os[24], vs[4];
            snprintf(os, sizeof(os), "%llu", (unsigned long long)off);
            snprintf(vs, sizeof(vs), "%d", val);
            snprintf(what, sizeof(what), "SETBIT %s %s %s", k, os, vs);
            const char *argv[] = { "SETBIT", k, os, vs };
            long long want = redis_int(ref, 4, argv, NULL, what);
            snprintf(path, sizeof(path), "/bits/%s/setbit", k);
            snprintf(body, sizeof(body), "{\"offset\":%s,\"value\":%s}", os, vs);
            same_int(want, tally_int("POST", path, body, "previous", what), step, what);
        } else if (kind < 34) { /* GETBIT */
            uint64_t off = rng_below(&g, 500);
            char os[24];
            snprintf(os, sizeof(os), "%llu", (unsigned long long)off);
            snprintf(what, sizeof(what), "GETBIT %s %s", k, os);
            const char *argv[] = { "GETBIT", k, os };
            long long want = redis_int(ref, 3, argv, NULL, what);
            snprintf(path, sizeof(path), "/bits/%s/getbit?offset=%s", k, os);
            same_int(want, tally_int("GET", path, NULL, "value", what), step, what);
        } else if (kind < 48) { /* BITCOUNT: none, start end, start end unit */
            int form = (int)rng_below(&g, 3);
            bool bit_unit = form == 2 && rng_below(&g, 2);
            int64_t span = bit_unit ? 400 : 60;
            char s[24], e[24];
            snprintf(s, sizeof(s), "%lld", (long long)rand_range(&g, -span, span));
            snprintf(e, sizeof(e), "%lld", (long long)rand_range(&g, -span, span));
            const char *argv[] = { "BITCOUNT", k, s, e, bit_unit ? "BIT" : "BYTE" };
            int argc = form == 0 ? 2 : form == 1 ? 4 : 5;
            snprintf(what, sizeof(what), "BITCOUNT %s%s%s%s%s%s%s", k, argc > 2 ? " " : "", argc > 2 ? s : "",
                     argc > 2 ? " " : "", argc > 2 ? e : "", argc > 4 ? " " : "", argc > 4 ? argv[4] : "");
            long long want = redis_int(ref, argc, argv, NULL, what);
            if (form == 0)
                snprintf(path, sizeof(path), "/bits/%s/count", k);
            else if (form == 1)
                snprintf(path, sizeof(path), "/bits/%s/count?start=%s&end=%s", k, s, e);
            else
                snprintf(path, sizeof(path), "/bits/%s/count?start=%s&end=%s&unit=%s", k, s, e,
                         bit_unit ? "bit" : "byte");
            same_int(want, tally_int("GET", path, NULL, "count", what), step, what);
        } else if (kind < 62) { /* BITPOS: none, start, start end, start end unit */
            int form = (int)rng_below(&g, 4);
            bool bit_unit = form == 3 && rng_below(&g, 2);
            int64_t span = bit_unit ? 400 : 60;
            const char *bit = rng_below(&g, 2) ? "1" : "0";
            char s[24], e[24];
            snprintf(s, sizeof(s), "%lld", (long long)(rng_below(&g, 3) ? rand_range(&g, -span, span) : 0));
            snprintf(e, sizeof(e), "%lld", (long long)(rng_below(&g, 3) ? rand_range(&g, -span, span) : -1));
            const char *argv[] = { "BITPOS", k, bit, s, e, bit_unit ? "BIT" : "BYTE" };
            int argc = 3 + form;
            snprintf(what, sizeof(what), "BITPOS %s %s%s%s%s%s%s%s", k, bit, argc > 3 ? " " : "", argc > 3 ? s : "",
                     argc > 4 ? " " : "", argc > 4 ? e : "", argc > 5 ? " " : "", argc > 5 ? argv[5] : "");
            long long want = redis_int(ref, argc, argv, NULL, what);
            int n = snprintf(path, sizeof(path), "/bits/%s/pos?bit=%s", k, bit);
            if (form >= 1)
                n += snprintf(path + n, sizeof(path) - (size_t)n, "&start=%s", s);
            if (form >= 2)
                n += snprintf(path + n, sizeof(path) - (size_t)n, "&end=%s", e);
            if (form >= 3)
                snprintf(path + n, sizeof(path) - (size_t)n, "&unit=%s", bit_unit ? "bit" : "byte");
            same_int(want, tally_int("GET", path, NULL, "position", what), step, what);
        } else if (kind < 72) { /* BITOP, sources may be missing or the destination itself */
            static const char *const opn[] = { "AND", "OR", "XOR", "NOT" };
            int o = (int)rng_below(&g, 4);
            int ns = o == 3 ? 1 : 1 + (int)rng_below(&g, 4);
            const char *argv[8] = { "BITOP", opn[o], k };
            int n = snprintf(body, sizeof(body), "{\"op\":\"%s\",\"sources\":[", o == 0 ? "and" : o == 1 ? "or" : o == 2 ? "xor" : "not");
            n += 0;
            size_t wl = (size_t)snprintf(what, sizeof(what), "BITOP %s %s", opn[o], k);
            for (int i = 0; i < ns; i++) {
                /* keys d0..d5 plus "m*" keys that never exist */
                const char *src = rng_below(&g, 6) == 0 ? (rng_below(&g, 2) ? "m1" : "m2") : keys[rng_below(&g, NKEYS)];
                argv[3 + i] = src;
                n += snprintf(body + n, sizeof(body) - (size_t)n, "%s\"%s\"", i ? "," : "", src);
                wl += (size_t)snprintf(what + wl, sizeof(what) - wl, " %s", src);
            }
            snprintf(body + n, sizeof(body) - (size_t)n, "]}");
            long long want = redis_int(ref, 3 + ns, argv, NULL, what);
            snprintf(path, sizeof(path), "/bits/%s/op", k);
            same_int(want, tally_int("POST", path, body, "length", what), step, what);
        } else if (kind < 92) { /* BITFIELD with 1..6 sub-operations */
            const char *argv[64];
            char store[32][32];
            int argc = 0, sc = 0, nres = 0;
            bool ro = rng_below(&g, 4) == 0;   /* BITFIELD_RO: GET and OVERFLOW only */
            argv[argc++] = ro ? "BITFIELD_RO" : "BITFIELD";
            argv[argc++] = k;
            int n = snprintf(body, sizeof(body), "{\"ops\":[");
            size_t wl = (size_t)snprintf(what, sizeof(what), "%s %s", argv[0], k);
            int nsub = 1 + (int)rng_below(&g, 6);
            for (int i = 0; i < nsub; i++) {
                unsigned kindop = (unsigned)rng_below(&g, ro ? 5 : 10);
                if (kindop < 2) {
                    static const char *const ow[] = { "WRAP", "SAT", "FAIL" };
                    const char *o = ow[rng_below(&g, 3)];
                    argv[argc++] = "OVERFLOW";
                    argv[argc++] = o;
                    n += snprintf(body + n, sizeof(body) - (size_t)n, "%s{\"overflow\":\"%s\"}", i ? "," : "", o);
                    wl += (size_t)snprintf(what + wl, sizeof(what) - wl, " OVERFLOW %s", o);
                    continue;
                }
                bool sign = rng_below(&g, 2);
                unsigned w = 1 + (unsigned)rng_below(&g, sign ? 64 : 63);
                char *type = store[sc++];
                snprintf(type, 32, "%c%u", sign ? 'i' : 'u', w);
                char *off = store[sc++];
                bool hash = rng_below(&g, 4) == 0;
                if (hash)
                    snprintf(off, 32, "#%llu", (unsigned long long)rng_below(&g, 600 / w + 1));
                else
                    snprintf(off, 32, "%llu", (unsigned long long)rng_below(&g, 600));
                const char *verb = kindop < 5 ? "GET" : kindop < 7 ? "SET" : "INCRBY";
                argv[argc++] = verb;
                argv[argc++] = type;
                argv[argc++] = off;
                nres++;
                /* offsets go as JSON strings ("#N") or integers */
                char offjson[40];
                if (hash || rng_below(&g, 2))
                    snprintf(offjson, sizeof(offjson), "\"%s\"", off);
                else
                    snprintf(offjson, sizeof(offjson), "%s", off);
                if (verb[0] == 'G') {
                    n += snprintf(body + n, sizeof(body) - (size_t)n, "%s{\"get\":\"%s\",\"offset\":%s}", i ? "," : "",
                                  type, offjson);
                    wl += (size_t)snprintf(what + wl, sizeof(what) - wl, " GET %s %s", type, off);
                } else {
                    char *val = store[sc++];
                    snprintf(val, 32, "%lld", (long long)field_value(&g, w));
                    argv[argc++] = val;
                    bool set = verb[0] == 'S';
                    n += snprintf(body + n, sizeof(body) - (size_t)n, "%s{\"%s\":\"%s\",\"offset\":%s,\"%s\":%s}",
                                  i ? "," : "", set ? "set" : "incrby", type, offjson, set ? "value" : "increment", val);
                    wl += (size_t)snprintf(what + wl, sizeof(what) - wl, " %s %s %s %s", verb, type, off, val);
                }
            }
            snprintf(body + n, sizeof(body) - (size_t)n, "]}");
            resp_t *v = redis_cmdv(ref, argc, argv, NULL);
            if (v->kind != RESP_ARRAY || (int)v->n != nres)
                fail_msg("step %d: %s: redis answered %s", step, what, v->kind == RESP_ERROR ? v->str : "no array");
            snprintf(path, sizeof(path), "/bits/%s/%s", k, ro ? "field_ro" : "field");
            http_resp_t h = http(&T, "POST", path, body, NULL);
            json_t *res = h.json ? json_object_get(h.json, "results") : NULL;
            if (h.status != 200 || json_array_size(res) != v->n)
                fail_msg("step %d: %s: tally answered %ld %s", step, what, h.status, h.body);
            for (size_t i = 0; i < v->n; i++) {
                json_t *x = json_array_get(res, i);
                bool rnil = v->elems[i]->kind == RESP_NIL;
                if (rnil != json_is_null(x) || (!rnil && v->elems[i]->integer != json_integer_value(x)))
                    fail_msg("step %d: %s: result %zu: redis %s%lld, tally %s", step, what, i, rnil ? "nil " : "",
                             rnil ? 0 : v->elems[i]->integer, h.body);
            }
            resp_free(v);
            http_free(&h);
        } else if (kind < 97) { /* GET: the bytes */
            same_bytes(ref, k, step);
        } else { /* DEL */
            resp_t *v = redis_cmd(ref, "DEL", k, NULL);
            resp_free(v);
            snprintf(path, sizeof(path), "/keys/%s", k);
            http_resp_t h = http(&T, "DELETE", path, NULL, NULL);
            assert_status(&h, 200);
            http_free(&h);
        }
    }
    for (int i = 0; i < NKEYS; i++)
        same_bytes(ref, keys[i], nops);
}

static void check_all_keys(redis_ref_t *ref, int step)
{
    for (int i = 0; i < NKEYS; i++) {
        char k[16];
        snprintf(k, sizeof(k), "d%d", i);
        same_bytes(ref, k, step);
    }
}

static void test_differential_vs_redis(void **state)
{
    (void)state;
    if (!redis_ref_start(&R))
        skip();
    /* IT_BITS_SEED=n IT_BITS_OPS=m explore other programs */
    const char *es = getenv("IT_BITS_SEED"), *eo = getenv("IT_BITS_OPS");
    run_program(&R, es ? strtoull(es, NULL, 0) : 0x5eed0001, eo ? atoi(eo) : PROGRAM_OPS);
    /* crash: the journal alone must rebuild every key */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", T.dir);
    tally_kill(&T);
    bool own = T.own_dir;
    tally_start(&T, dir, NULL);
    T.own_dir = own;
    check_all_keys(&R, PROGRAM_OPS + 1);
    /* more operations, then a clean stop (snapshot) and reload */
    run_program(&R, 0x5eed0002, PROGRAM_OPS / 3);
    assert_int_equal(tally_stop(&T), 0);
    tally_start(&T, dir, NULL);
    T.own_dir = own;
    check_all_keys(&R, PROGRAM_OPS + 2);
    redis_ref_stop(&R);
}

/* ------------------------------------------------------------------------ */
/* Seeds and examples                                                       */
/* ------------------------------------------------------------------------ */

static void test_seed_examples(void **state)
{
    (void)state;
    /* seed 000: set w hello; bitfield w get u4 0 ... incrby u4 2 1 */
    http_resp_t r = http_bin(&T, "PUT", "/bits/w", "hello", 5, "application/octet-stream");
    assert_status(&r, 200);
    http_free(&r);
    static const struct {
        const char *op;
        long long want;
    } gets[] = { { "{\"get\":\"u4\",\"offset\":0}", 6 }, { "{\"get\":\"u3\",\"offset\":2}", 5 },
                 { "{\"get\":\"i3\",\"offset\":2}", -3 } };
    char body[256];
    for (size_t i = 0; i < 3; i++) {
        snprintf(body, sizeof(body), "{\"ops\":[%s]}", gets[i].op);
        r = http(&T, "POST", "/bits/w/field", body, NULL);
        assert_status(&r, 200);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(r.json, "results"), 0)), gets[i].want);
        http_free(&r);
    }
    const long long incr[] = { 11, 12, 13, 14, 15, 0, 1, 2, 3 };
    for (size_t i = 0; i < 9; i++) {
        r = http(&T, "POST", "/bits/w/field", "{\"ops\":[{\"incrby\":\"u4\",\"offset\":2,\"increment\":1}]}", NULL);
        assert_status(&r, 200);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(r.json, "results"), 0)), incr[i]);
        http_free(&r);
    }
    /* the seed's "(error) ERR syntax error": incrby without its increment */
    r = http(&T, "POST", "/bits/w/field", "{\"ops\":[{\"incrby\":\"u4\",\"offset\":2}]}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);

    /* DESIGN's example on "hello" */
    r = http_bin(&T, "PUT", "/bits/w", "hello", 5, "application/octet-stream");
    http_free(&r);
    r = http(&T, "POST", "/bits/w/field",
             "{\"ops\":[{\"get\":\"u4\",\"offset\":\"0\"},{\"overflow\":\"sat\"},"
             "{\"incrby\":\"u4\",\"offset\":\"#2\",\"increment\":1},{\"set\":\"i8\",\"offset\":8,\"value\":-3}]}",
             NULL);
    assert_status(&r, 200);
    json_t *res = json_object_get(r.json, "results");
    assert_int_equal(json_integer_value(json_array_get(res, 0)), 6);
    assert_int_equal(json_integer_value(json_array_get(res, 1)), 7);
    assert_int_equal(json_integer_value(json_array_get(res, 2)), 117);
    http_free(&r);

    /* seed 004: setbit 0,2,5,9,12 -> "\xa4H"; BITOP NOT -> "[\xb7"; AND of the two -> zeros */
    const int offs[] = { 0, 2, 5, 9, 12 };
    for (size_t i = 0; i < 5; i++) {
        snprintf(body, sizeof(body), "{\"offset\":%d,\"value\":1}", offs[i]);
        r = http(&T, "POST", "/bits/login/setbit", body, NULL);
        assert_status(&r, 200);
        assert_int_equal(json_int_of(&r, "previous"), 0);
        http_free(&r);
    }
    r = http(&T, "GET", "/bits/login", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(r.len, 2);
    assert_memory_equal(r.body, "\xa4H", 2);
    http_free(&r);
    r = http(&T, "GET", "/bits/login/getbit?offset=9", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 1);
    http_free(&r);
    r = http(&T, "GET", "/bits/login/count", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), 5);
    http_free(&r);
    r = http(&T, "GET", "/bits/login/count?start=1&end=1", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), 2);
    http_free(&r);
    r = http(&T, "GET", "/bits/login/pos?bit=0", NULL, NULL);
    assert_int_equal(json_int_of(&r, "position"), 1);
    http_free(&r);
    r = http(&T, "GET", "/bits/login/pos?bit=1&start=1&end=1", NULL, NULL);
    assert_int_equal(json_int_of(&r, "position"), 9);
    http_free(&r);
    r = http(&T, "POST", "/bits/notlogin/op", "{\"op\":\"not\",\"sources\":[\"login\"]}", NULL);
    assert_int_equal(json_int_of(&r, "length"), 2);
    http_free(&r);
    r = http(&T, "GET", "/bits/notlogin", NULL, NULL);
    assert_memory_equal(r.body, "[\xb7", 2);
    http_free(&r);
    r = http(&T, "POST", "/bits/both/op", "{\"op\":\"AND\",\"sources\":[\"login\",\"notlogin\"]}", NULL);
    assert_int_equal(json_int_of(&r, "length"), 2);
    http_free(&r);
    r = http(&T, "GET", "/bits/both/count", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), 0);
    http_free(&r);
    /* an empty result deletes the destination */
    r = http(&T, "POST", "/bits/both/op", "{\"op\":\"or\",\"sources\":[\"nothing\",\"nothing2\"]}", NULL);
    assert_int_equal(json_int_of(&r, "length"), 0);
    http_free(&r);
    r = http(&T, "GET", "/bits/both", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* missing keys read like Redis: GETBIT 0, BITCOUNT 0, BITPOS 0 -> 0, 1 -> -1 */
    r = http(&T, "GET", "/bits/none/getbit?offset=5", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 0);
    http_free(&r);
    r = http(&T, "GET", "/bits/none/pos?bit=0", NULL, NULL);
    assert_int_equal(json_int_of(&r, "position"), 0);
    http_free(&r);
    r = http(&T, "GET", "/bits/none/pos?bit=1", NULL, NULL);
    assert_int_equal(json_int_of(&r, "position"), -1);
    http_free(&r);
    r = http(&T, "GET", "/keys/login", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "type")), "bits");
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Bad input                                                                */
/* ------------------------------------------------------------------------ */

static void test_bad_input(void **state)
{
    (void)state;
    http_resp_t r = http_bin(&T, "PUT", "/bits/bad", "\x01\x02", 2, "application/octet-stream");
    assert_status(&r, 200);
    http_free(&r);
    r = http(&T, "POST", "/throttle", "{\"key\":\"other\",\"max_burst\":5,\"count_per_period\":1,\"period\":60}", NULL);
    assert_status(&r, 200);
    http_free(&r);

    static const struct {
        const char *method, *path, *body;
        int status;
        const char *code, *field, *needle;   /* needle: text the message must contain, or NULL */
    } cases[] = {
        /* offsets negative or too large, bits other than 0/1 */
        { "POST", "/bits/bad/setbit", "{\"offset\":-1,\"value\":1}", 400, "BAD_REQUEST", "offset", "4294967295" },
        { "POST", "/bits/bad/setbit", "{\"offset\":4294967296,\"value\":1}", 400, "BAD_REQUEST", "offset", "512 MiB" },
        { "POST", "/bits/bad/setbit", "{\"offset\":\"7\",\"value\":1}", 400, "BAD_REQUEST", "offset", NULL },
        { "POST", "/bits/bad/setbit", "{\"offset\":7,\"value\":2}", 400, "BAD_REQUEST", "value", NULL },
        { "POST", "/bits/bad/setbit", "{\"offset\":7,\"value\":-1}", 400, "BAD_REQUEST", "value", NULL },
        { "POST", "/bits/bad/setbit", "{\"offset\":7}", 400, "BAD_REQUEST", "value", NULL },
        { "POST", "/bits/bad/setbit", "{\"offset\":7,\"value\":1,\"x\":1}", 400, "BAD_REQUEST", "x", NULL },
        { "GET", "/bits/bad/getbit?offset=-1", NULL, 400, "BAD_REQUEST", "offset", "4294967295" },
        { "GET", "/bits/bad/getbit?offset=4294967296", NULL, 400, "BAD_REQUEST", "offset", "4294967295" },
        { "GET", "/bits/bad/getbit", NULL, 400, "BAD_REQUEST", "offset", NULL },
        { "GET", "/bits/bad/getbit?offset=1x", NULL, 400, "BAD_REQUEST", "offset", NULL },
        { "GET", "/bits/bad/count?start=1", NULL, 400, "BAD_REQUEST", "end", NULL },
        { "GET", "/bits/bad/count?start=0&end=1&unit=word", NULL, 400, "BAD_REQUEST", "unit", NULL },
        { "GET", "/bits/bad/count?unit=bit", NULL, 400, "BAD_REQUEST", "unit", NULL },
        { "GET", "/bits/bad/pos?bit=2", NULL, 400, "BAD_REQUEST", "bit", NULL },
        { "GET", "/bits/bad/pos", NULL, 400, "BAD_REQUEST", "bit", NULL },
        { "GET", "/bits/bad/pos?bit=1&end=3", NULL, 400, "BAD_REQUEST", "start", NULL },
        { "GET", "/bits/bad/pos?bit=1&start=3&unit=bit", NULL, 400, "BAD_REQUEST", "unit", NULL },
        { "GET", "/bits/bad/pos?bit=1&colour=red", NULL, 400, "BAD_REQUEST", "colour", NULL },
        /* unknown BITFIELD types, OVERFLOW values, malformed operations */
        { "POST", "/bits/bad/field", "{\"ops\":[{\"set\":\"u64\",\"offset\":0,\"value\":1}]}", 400, "BAD_REQUEST",
          "ops[0].set", "u64" },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"get\":\"i65\",\"offset\":0}]}", 400, "BAD_REQUEST", "ops[0].get",
          NULL },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"get\":\"u8\",\"offset\":0},{\"get\":\"x8\",\"offset\":0}]}", 400,
          "BAD_REQUEST", "ops[1].get", NULL },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"overflow\":\"clamp\"},{\"set\":\"u8\",\"offset\":0,\"value\":1}]}",
          400, "BAD_REQUEST", "ops[0].overflow", NULL },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"set\":\"u8\",\"offset\":0,\"value\":1},{\"get\":\"u8\",\"offset\":-8}]}",
          400, "BAD_REQUEST", "ops[1].offset", NULL },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"set\":\"u8\",\"offset\":4294967296,\"value\":1}]}", 400,
          "BAD_REQUEST", "ops[0].offset", "4294967295" },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"set\":\"u8\",\"offset\":\"#536870912\",\"value\":1}]}", 400,
          "BAD_REQUEST", "ops[0].offset", NULL },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"set\":\"u8\",\"offset\":\"0x10\",\"value\":1}]}", 400,
          "BAD_REQUEST", "ops[0].offset", NULL },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"set\":\"u8\",\"offset\":0,\"value\":\"1\"}]}", 400, "BAD_REQUEST",
          "ops[0].value", NULL },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"get\":\"u8\",\"set\":\"u8\",\"offset\":0}]}", 400, "BAD_REQUEST",
          "ops[0]", NULL },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"get\":\"u8\",\"offset\":0,\"value\":3}]}", 400, "BAD_REQUEST",
          "ops[0].value", NULL },
        { "POST", "/bits/bad/field", "{\"ops\":[{\"frob\":\"u8\"}]}", 400, "BAD_REQUEST", "ops[0]", NULL },
        { "POST", "/bits/bad/field", "{\"ops\":{}}", 400, "BAD_REQUEST", "ops", NULL },
        /* BITFIELD_RO takes GET (and OVERFLOW) only */
        { "POST", "/bits/bad/field_ro", "{\"ops\":[{\"get\":\"u8\",\"offset\":0},{\"set\":\"u8\",\"offset\":0,\"value\":1}]}",
          400, "BAD_REQUEST", "ops", "BITFIELD_RO only supports the GET subcommand" },
        { "POST", "/bits/bad/field_ro", "{\"ops\":[{\"incrby\":\"u8\",\"offset\":0,\"increment\":1}]}", 400,
          "BAD_REQUEST", "ops", "GET" },
        { "POST", "/bits/bad/field_ro", "{\"ops\":[{\"get\":\"u64\",\"offset\":0}]}", 400, "BAD_REQUEST",
          "ops[0].get", NULL },
        { "POST", "/bits/other/field_ro", "{\"ops\":[{\"get\":\"u8\",\"offset\":0}]}", 409, "WRONGTYPE", NULL,
          NULL },
        /* BITOP NOT with two sources, unknown op, no sources */
        { "POST", "/bits/bad/op", "{\"op\":\"not\",\"sources\":[\"bad\",\"bad\"]}", 400, "BAD_REQUEST", "sources", NULL },
        { "POST", "/bits/bad/op", "{\"op\":\"nand\",\"sources\":[\"bad\"]}", 400, "BAD_REQUEST", "op", NULL },
        { "POST", "/bits/bad/op", "{\"op\":\"or\",\"sources\":[]}", 400, "BAD_REQUEST", "sources", NULL },
        { "POST", "/bits/bad/op", "{\"op\":\"or\",\"sources\":[\"\"]}", 400, "BAD_REQUEST", "sources[0]", NULL },
        { "POST", "/bits/bad/op", "{\"op\":\"or\",\"sources\":[\"bad\",7]}", 400, "BAD_REQUEST", "sources[1]", NULL },
        /* wrong key type: as source, destination, target */
        { "POST", "/bits/bad/op", "{\"op\":\"or\",\"sources\":[\"bad\",\"other\"]}", 409, "WRONGTYPE", NULL, "throttle" },
        { "POST", "/bits/other/op", "{\"op\":\"or\",\"sources\":[\"bad\"]}", 409, "WRONGTYPE", NULL, NULL },
        { "POST", "/bits/other/setbit", "{\"offset\":1,\"value\":1}", 409, "WRONGTYPE", NULL, NULL },
        { "GET", "/bits/other/getbit?offset=1", NULL, 409, "WRONGTYPE", NULL, NULL },
        { "GET", "/bits/other/count", NULL, 409, "WRONGTYPE", NULL, NULL },
        { "GET", "/bits/other/pos?bit=1", NULL, 409, "WRONGTYPE", NULL, NULL },
        { "POST", "/bits/other/field", "{\"ops\":[{\"set\":\"u8\",\"offset\":0,\"value\":1}]}", 409, "WRONGTYPE", NULL,
          NULL },
        { "PUT", "/bits/other", "abc", 409, "WRONGTYPE", NULL, NULL },
        { "GET", "/bits/other", NULL, 409, "WRONGTYPE", NULL, NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        r = http(&T, cases[i].method, cases[i].path, cases[i].body,
                 cases[i].method[1] == 'U' ? "application/octet-stream" : NULL);
        if (r.status != cases[i].status)
            fail_msg("case %zu (%s %s %s): expected %d, got %ld %s", i, cases[i].method, cases[i].path,
                     cases[i].body ? cases[i].body : "", cases[i].status, r.status, r.body);
        assert_error(&r, cases[i].status, cases[i].code);
        json_t *err = json_object_get(r.json, "error");
        const char *f = json_string_value(json_object_get(err, "field"));
        if (cases[i].field && (!f || strcmp(f, cases[i].field) != 0))
            fail_msg("case %zu: expected field %s in %s", i, cases[i].field, r.body);
        if (cases[i].needle && !strstr(json_string_value(json_object_get(err, "message")), cases[i].needle))
            fail_msg("case %zu: expected '%s' in the message: %s", i, cases[i].needle, r.body);
        http_free(&r);
        /* nothing changed */
        r = http(&T, "GET", "/bits/bad", NULL, NULL);
        if (r.status != 200 || r.len != 2 || memcmp(r.body, "\x01\x02", 2) != 0)
            fail_msg("case %zu changed the key: %ld, %zu bytes", i, r.status, r.len);
        http_free(&r);
        r = http(&T, "GET", "/keys/other", NULL, NULL);
        assert_string_equal(json_string_value(json_object_get(r.json, "type")), "throttle");
        http_free(&r);
    }
    /* a bad request in a batch of ops changes nothing even after valid ops */
    r = http(&T, "POST", "/bits/bad/field",
             "{\"ops\":[{\"set\":\"u8\",\"offset\":0,\"value\":255},{\"set\":\"u64\",\"offset\":0,\"value\":1}]}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/bits/fresh", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    /* BITFIELD_RO on a missing key answers zeros and creates nothing */
    r = http(&T, "POST", "/bits/fresh/field_ro", "{\"ops\":[{\"get\":\"u8\",\"offset\":1000},{\"overflow\":\"sat\"},"
                                                 "{\"get\":\"i5\",\"offset\":\"#3\"}]}", NULL);
    assert_status(&r, 200);
    assert_string_equal(r.body, "{\"results\":[0,0]}");
    http_free(&r);
    r = http(&T, "GET", "/keys/fresh", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    r = http(&T, "GET", "/bits/bad", NULL, NULL);
    assert_memory_equal(r.body, "\x01\x02", 2);
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Memory limit and the 512 MiB string                                      */
/* ------------------------------------------------------------------------ */

static void test_memory_limit(void **state)
{
    (void)state;
    const char *args[] = { "--maxmemory", "20mb", NULL };
    tally_start(&M, NULL, args);
    http_resp_t r = http(&M, "POST", "/bits/huge/setbit", "{\"offset\":4294967295,\"value\":1}", NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    http_free(&r);
    r = http(&M, "GET", "/bits/huge", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    r = http(&M, "POST", "/bits/huge/field", "{\"ops\":[{\"set\":\"u8\",\"offset\":400000000,\"value\":1}]}", NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    http_free(&r);
    /* a string that fits is fine, and BITOP into a second copy that does not is refused */
    r = http(&M, "POST", "/bits/mid/setbit", "{\"offset\":100000000,\"value\":1}", NULL);   /* 12.5 MB */
    assert_status(&r, 200);
    http_free(&r);
    r = http(&M, "POST", "/bits/mid2/op", "{\"op\":\"not\",\"sources\":[\"mid\"]}", NULL);
    assert_error(&r, 507, "OUT_OF_MEMORY");
    http_free(&r);
    r = http(&M, "GET", "/bits/mid2/count", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), 0);
    http_free(&r);
    r = http(&M, "GET", "/bits/mid/count", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), 1);
    http_free(&r);
    tally_cleanup(&M);
}

/* SETBIT at the last offset makes a 512 MiB string: the journal replays it
 * and a snapshot holds it. */
static void test_512mib_string_persists(void **state)
{
    (void)state;
    tally_start(&P, NULL, NULL);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", P.dir);
    http_resp_t r = http(&P, "POST", "/bits/big/setbit", "{\"offset\":4294967295,\"value\":1}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    r = http(&P, "POST", "/bits/big/setbit", "{\"offset\":7,\"value\":1}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    tally_kill(&P);   /* journal only */
    tally_start(&P, dir, NULL);
    P.own_dir = true;
    r = http(&P, "GET", "/bits/big/getbit?offset=4294967295", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 1);
    http_free(&r);
    r = http(&P, "GET", "/bits/big/count", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), 2);
    http_free(&r);
    r = http(&P, "GET", "/bits/big/pos?bit=1&start=1", NULL, NULL);
    assert_int_equal(json_int_of(&r, "position"), 4294967295LL);
    http_free(&r);
    r = http(&P, "POST", "/admin/snapshot", NULL, NULL);
    assert_status(&r, 200);
    assert_true(json_int_of(&r, "bytes") > (1LL << 29));
    http_free(&r);
    assert_int_equal(tally_stop(&P), 0);
    tally_start(&P, dir, NULL);
    P.own_dir = true;
    r = http(&P, "GET", "/bits/big/count?start=-1&end=-1", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), 1);
    http_free(&r);
    r = http(&P, "GET", "/keys/big", NULL, NULL);
    assert_true(json_int_of(&r, "memory_bytes") >= (1LL << 29));
    http_free(&r);
    tally_cleanup(&P);
}

/* SETBIT bodies take a fast path when they are exactly {"offset","value"}:
 * every other spelling must give the same answers as the general parser. */
static void test_setbit_body_forms(void **state)
{
    (void)state;
    static const struct {
        const char *body, *ctype;
        int status;
    } cases[] = {
        { "{\"offset\":3,\"value\":1}", NULL, 200 },
        { " { \"value\" : 1 ,\n \"offset\" :\t4 } ", NULL, 200 },
        { "{\"offset\":5,\"value\":1}", "application/json; charset=utf-8", 200 },
        { "{\"offset\":6,\"value\":1}", "text/plain", 415 },   /* a browser's simple request (api/guard.h) */
        { "{\"offset\":-0,\"value\":1}", NULL, 200 },
        { "{\"offset\":7,\"value\":1,\"offset\":8}", NULL, 400 },
        { "{\"offset\":1e3,\"value\":1}", NULL, 400 },
        { "{\"offset\":01,\"value\":1}", NULL, 400 },
        { "{\"offset\":9.0,\"value\":1}", NULL, 400 },
        { "{\"offset\":9,\"value\":true}", NULL, 400 },
        { "{\"offset\":99999999999999999999,\"value\":1}", NULL, 400 },
        { "{\"offset\":9,\"value\":1}x", NULL, 400 },
        { "{\"offset\":9,\"value\":1}", "application/xml", 415 },
        { "{\"offset\":9,\"value\":1}", "application/jsonx", 415 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        http_resp_t r = http(&T, "POST", "/bits/forms/setbit", cases[i].body, cases[i].ctype);
        if (r.status != cases[i].status)
            fail_msg("case %zu (%s): expected %d, got %ld %s", i, cases[i].body, cases[i].status, r.status, r.body);
        if (r.status == 200)
            assert_int_equal(json_int_of(&r, "previous"), 0);
        http_free(&r);
    }
    http_resp_t r = http(&T, "GET", "/bits/forms", NULL, NULL);
    assert_int_equal(r.len, 1);
    assert_int_equal((unsigned char)r.body[0], 0x9c);   /* bits 0, 3, 4, 5 */
    http_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_examples),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_setbit_body_forms),
        cmocka_unit_test(test_differential_vs_redis),
        cmocka_unit_test(test_memory_limit),
        cmocka_unit_test(test_512mib_string_persists),
    };
    return cmocka_run_group_tests_name("bits", tests, setup, teardown);
}
