/*
 * it_uv.c - /uv through a real tallyd, differentially against a real
 * redis-server: the seeds' transcript, counts from 1 to 1 000 000 items,
 * unions, merges, export/import of the exact Redis bytes, hostile blobs,
 * every kind of bad input leaving the state untouched, and the same bytes
 * after a restart from the snapshot and after kill -9 (journal replay).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "tests/integration/harness.h"
#include "tests/integration/redis_ref.h"

static tally_proc_t T;
static redis_ref_t R;
static bool have_redis;

static int setup(void **state)
{
    (void)state;
    tally_start(&T, NULL, NULL);
    have_redis = redis_ref_start(&R);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tally_cleanup(&T);
    if (have_redis)
        redis_ref_stop(&R);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static void item(char *out, size_t n, unsigned seed, uint64_t i)
{
    snprintf(out, n, "u%u:%llu", seed, (unsigned long long)i);
}

/* POST /uv/{key} with items seed:[from, from+n); returns "updated". */
static bool t_add(const tally_proc_t *p, const char *key, unsigned seed, uint64_t from, size_t n)
{
    size_t cap = 32 + n * 40;
    char *body = malloc(cap), it[40];
    size_t o = (size_t)snprintf(body, cap, "{\"items\":[");
    for (size_t i = 0; i < n; i++) {
        item(it, sizeof(it), seed, from + i);
        o += (size_t)snprintf(body + o, cap - o, "%s\"%s\"", i ? "," : "", it);
    }
    snprintf(body + o, cap - o, "]}");
    http_resp_t r = httpf(p, "POST", body, "/uv/%s", key);
    free(body);
    assert_status(&r, 200);
    bool u = json_bool_of(&r, "updated");
    http_free(&r);
    return u;
}

static long long r_add(const char *key, unsigned seed, uint64_t from, size_t n)
{
    const char **argv = malloc((n + 2) * sizeof(*argv));
    char *buf = malloc(n * 40);
    argv[0] = "PFADD";
    argv[1] = key;
    for (size_t i = 0; i < n; i++) {
        item(buf + i * 40, 40, seed, from + i);
        argv[i + 2] = buf + i * 40;
    }
    resp_t *v = redis_cmdv(&R, (int)(n + 2), argv, NULL);
    assert_int_equal(v->kind, RESP_INT);
    long long x = v->integer;
    resp_free(v);
    free(argv);
    free(buf);
    return x;
}

static long long t_count(const tally_proc_t *p, const char *pathq)
{
    http_resp_t r = httpf(p, "GET", NULL, "/uv/%s", pathq);
    assert_status(&r, 200);
    long long c = json_int_of(&r, "count");
    http_free(&r);
    return c;
}

static long long r_count(const char *k1, const char *k2, const char *k3)
{
    resp_t *v = redis_cmd(&R, "PFCOUNT", k1, k2, k3, NULL);
    assert_int_equal(v->kind, RESP_INT);
    long long x = v->integer;
    resp_free(v);
    return x;
}

/* The key's bytes from tallyd (format=redis) equal Redis's GET. */
static void assert_bytes_equal(const char *tkey, const char *rkey)
{
    http_resp_t t = httpf(&T, "GET", NULL, "/uv/%s?format=redis", tkey);
    assert_status(&t, 200);
    char ct[64];
    assert_true(http_header(&t, "Content-Type", ct, sizeof(ct)));
    assert_string_equal(ct, "application/octet-stream");
    resp_t *v = redis_cmd(&R, "GET", rkey, NULL);
    assert_int_equal(v->kind, RESP_BULK);
    if (t.len != v->len || memcmp(t.body, v->str, t.len) != 0)
        fail_msg("bytes of %s differ: tally %zu, redis %zu", tkey, t.len, v->len);
    resp_free(v);
    http_free(&t);
}

static char *dump(const tally_proc_t *p, const char *key, size_t *len)
{
    http_resp_t r = httpf(p, "GET", NULL, "/uv/%s?format=redis", key);
    assert_status(&r, 200);
    char *b = malloc(r.len);
    memcpy(b, r.body, r.len);
    *len = r.len;
    http_free(&r);
    return b;
}

#define NEED_REDIS()     \
    do {                 \
        if (!have_redis) \
            skip();      \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

/* seeds/000: pfadd userview user1 -> 1, count 1; user2 user3 user4 -> 1,
 * count 4; pfmerge uv userview -> count 6 (uv held two earlier users);
 * pfcount userview still 4. */
static void test_seed_transcript(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/uv/userview", "{\"items\":[\"user1\"]}", NULL);
    assert_true(json_bool_of(&r, "updated"));
    http_free(&r);
    assert_int_equal(t_count(&T, "userview"), 1);
    r = http(&T, "POST", "/uv/userview", "{\"items\":[\"user2\",\"user3\",\"user4\"]}", NULL);
    assert_true(json_bool_of(&r, "updated"));
    http_free(&r);
    assert_int_equal(t_count(&T, "userview"), 4);
    r = http(&T, "POST", "/uv/userview", "{\"items\":[\"user2\"]}", NULL);
    assert_false(json_bool_of(&r, "updated"));   /* PFADD of a known item: 0 */
    http_free(&r);
    r = http(&T, "POST", "/uv/uv", "{\"items\":[\"user5\",\"user6\"]}", NULL);
    http_free(&r);
    r = http(&T, "POST", "/uv/uv/merge", "{\"sources\":[\"userview\"]}", NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "count"), 6);
    http_free(&r);
    assert_int_equal(t_count(&T, "uv"), 6);
    assert_int_equal(t_count(&T, "userview"), 4);
    assert_int_equal(t_count(&T, "userview?union=uv"), 6);
    assert_int_equal(t_count(&T, "nosuchkey"), 0);
    if (!have_redis)
        return;
    /* and Redis agrees, bytes included */
    resp_free(redis_cmd(&R, "PFADD", "userview", "user1", NULL));
    resp_free(redis_cmd(&R, "PFCOUNT", "userview", NULL));
    resp_free(redis_cmd(&R, "PFADD", "userview", "user2", "user3", "user4", NULL));
    resp_free(redis_cmd(&R, "PFADD", "uv", "user5", "user6", NULL));
    resp_free(redis_cmd(&R, "PFMERGE", "uv", "userview", NULL));
    assert_int_equal(r_count("uv", NULL, NULL), 6);
    assert_int_equal(r_count("userview", NULL, NULL), 4);
    assert_bytes_equal("uv", "uv");
    assert_bytes_equal("userview", "userview");
}

/* Counts equal PFCOUNT at checkpoints from 1 to 1 000 000, with the bytes
 * compared through the sparse range and at the end. */
static void test_counts_match_redis_to_a_million(void **state)
{
    (void)state;
    NEED_REDIS();
    static const uint64_t cps[] = { 1, 2, 3, 7, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000, 300000,
                                    1000000 };
    uint64_t have = 0;
    for (size_t c = 0; c < sizeof(cps) / sizeof(cps[0]); c++) {
        while (have < cps[c]) {
            size_t n = cps[c] - have > 1000 ? 1000 : (size_t)(cps[c] - have);
            bool tu = t_add(&T, "big", 3, have, n);
            assert_int_equal(tu, r_add("big", 3, have, n) == 1);
            have += n;
        }
        assert_int_equal(t_count(&T, "big"), r_count("big", NULL, NULL));
        if (cps[c] <= 3000 || cps[c] == 1000000)
            assert_bytes_equal("big", "big");
    }
}

/* Random small batches (with repeats) through the sparse->dense switch,
 * PFADD's reply and the bytes compared after every step. */
static void test_sparse_to_dense_steps(void **state)
{
    (void)state;
    NEED_REDIS();
    rng_t g;
    rng_seed(&g, 44);
    uint64_t next = 0;
    while (next < 2500) {
        size_t n = 1 + rng_below(&g, 30);
        uint64_t from = next > 50 && rng_below(&g, 4) == 0 ? rng_below(&g, next - 40) : next;
        if (from == next)
            next += n;
        assert_int_equal(t_add(&T, "steps", 8, from, n), r_add("steps", 8, from, n) == 1);
        assert_bytes_equal("steps", "steps");
        if (rng_below(&g, 5) == 0) {
            /* PFCOUNT caches the cardinality in the header: same bytes after */
            assert_int_equal(t_count(&T, "steps"), r_count("steps", NULL, NULL));
            assert_bytes_equal("steps", "steps");
        }
    }
}

static void test_unions_and_merges_match_redis(void **state)
{
    (void)state;
    NEED_REDIS();
    static const size_t sizes[] = { 5, 200, 2000, 20000 };
    const char *keys[] = { "ua", "ub", "uc", "ud" };
    for (size_t i = 0; i < 4; i++)
        for (size_t done = 0; done < sizes[i]; done += 1000) {
            size_t n = sizes[i] - done < 1000 ? sizes[i] - done : 1000;
            t_add(&T, keys[i], 20 + (unsigned)(i % 2), done, n);
            r_add(keys[i], 20 + (unsigned)(i % 2), done, n);
        }
    char q[128];
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) {
            snprintf(q, sizeof(q), "%s?union=%s&union=missing", keys[a], keys[b]);
            assert_int_equal(t_count(&T, q), r_count(keys[a], keys[b], "missing"));
        }
    /* merges into each key from another, bytes compared */
    for (size_t a = 0; a < 4; a++) {
        size_t b = (a + 1) % 4;
        char body[64];
        snprintf(body, sizeof(body), "{\"sources\":[\"%s\",\"missing\"]}", keys[b]);
        http_resp_t r = httpf(&T, "POST", body, "/uv/%s/merge", keys[a]);
        assert_status(&r, 200);
        resp_free(redis_cmd(&R, "PFMERGE", keys[a], keys[b], "missing", NULL));
        assert_int_equal(json_int_of(&r, "count"), r_count(keys[a], NULL, NULL));
        http_free(&r);
        assert_bytes_equal(keys[a], keys[a]);
    }
    /* merge into a new key */
    http_resp_t r = http(&T, "POST", "/uv/fresh/merge", "{\"sources\":[\"ua\",\"ub\"]}", NULL);
    assert_status(&r, 200);
    http_free(&r);
    resp_free(redis_cmd(&R, "PFMERGE", "fresh", "ua", "ub", NULL));
    resp_free(redis_cmd(&R, "PFCOUNT", "fresh", NULL));
    assert_bytes_equal("fresh", "fresh");
}

/* Bytes from Redis import through PUT and come back identical; the count is
 * Redis's; imported HLLs keep working (adds match Redis afterwards). */
static void test_import_redis_bytes(void **state)
{
    (void)state;
    NEED_REDIS();
    static const size_t sizes[] = { 0, 1, 50, 700, 5000 };
    for (size_t i = 0; i < 5; i++) {
        char key[32];
        snprintf(key, sizeof(key), "imp%zu", i);
        if (sizes[i])
            r_add(key, 30, 0, sizes[i]);
        else
            resp_free(redis_cmd(&R, "PFADD", key, NULL));
        if (i % 2)
            r_count(key, NULL, NULL);   /* a valid cached cardinality */
        resp_t *v = redis_cmd(&R, "GET", key, NULL);
        char path[64];
        snprintf(path, sizeof(path), "/uv/%s", key);
        http_resp_t r = http_bin(&T, "PUT", path, v->str, v->len, "application/octet-stream");
        assert_status(&r, 200);
        long long imported = json_int_of(&r, "count");
        assert_int_equal(json_int_of(&r, "bytes"), (long long)v->len);
        http_free(&r);
        resp_free(v);
        assert_bytes_equal(key, key);
        assert_int_equal(imported, r_count(key, NULL, NULL));
        assert_int_equal(t_count(&T, key), imported);   /* both caches now valid */
        assert_bytes_equal(key, key);
        /* keeps behaving like Redis */
        assert_int_equal(t_add(&T, key, 31, 0, 100), r_add(key, 31, 0, 100) == 1);
        assert_int_equal(t_count(&T, key), r_count(key, NULL, NULL));
        assert_bytes_equal(key, key);
    }
}

/* Hostile blobs: refused with 400, never a crash, the key untouched. */
static void test_hostile_blobs(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/uv/victim", "{\"items\":[\"a\",\"b\",\"c\"]}", NULL);
    http_free(&r);
    size_t len;
    char *good = dump(&T, "victim", &len);
    rng_t g;
    rng_seed(&g, 99);
    uint8_t buf[13000];
    int refused = 0;
    for (int i = 0; i < 300; i++) {
        size_t n;
        switch (i % 5) {
        case 0:   /* random bytes with the header */
            n = 16 + rng_below(&g, 64);
            for (size_t j = 0; j < n; j++)
                buf[j] = (uint8_t)rng_next(&g);
            memcpy(buf, "HYLL", 4);
            buf[4] = (uint8_t)rng_below(&g, 3);
            break;
        case 1:   /* truncations of a good one */
            n = rng_below(&g, len);
            memcpy(buf, good, n);
            break;
        case 2:   /* a flipped byte */
            n = len;
            memcpy(buf, good, n);
            buf[rng_below(&g, n)] ^= (uint8_t)(1 + rng_below(&g, 255));
            break;
        case 3:   /* dense of the wrong length */
            n = 12304 + (rng_below(&g, 2) ? 1 : -1);
            memset(buf, 0, n);
            memcpy(buf, "HYLL", 4);
            break;
        default:  /* sparse covering too many registers */
            n = 16 + 4;
            memset(buf, 0, n);
            memcpy(buf, "HYLL", 4);
            buf[4] = 1;
            buf[16] = 0x7f;
            buf[17] = 0xff;
            buf[18] = 0x40;
            buf[19] = 0x00;
            break;
        }
        r = http_bin(&T, "PUT", "/uv/victim", buf, n, "application/octet-stream");
        if (r.status == 400)
            refused++;
        else if (r.status == 200) {
            /* accepted (a harmless change): restore */
            http_free(&r);
            r = http_bin(&T, "PUT", "/uv/victim", good, len, "application/octet-stream");
            assert_status(&r, 200);
        } else {
            fail_msg("PUT of a hostile blob answered %ld %s", r.status, r.body);
        }
        http_free(&r);
    }
    assert_true(refused > 200);
    size_t len2;
    char *now = dump(&T, "victim", &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(good, now, len);
    free(good);
    free(now);
    /* wrong media type */
    r = http(&T, "PUT", "/uv/victim", "{\"items\":[\"x\"]}", NULL);
    assert_error(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    http_free(&r);
    r = http(&T, "GET", "/uv/nothing?format=redis", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
}

/* Every bad request gets its envelope and changes nothing. */
static void test_bad_input(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/uv/bad", "{\"items\":[\"a\"]}", NULL);
    http_free(&r);
    r = http(&T, "PUT", "/bloom/abloom", "{\"error_rate\":0.01,\"capacity\":100}", NULL);
    assert_status(&r, 201);
    http_free(&r);
    size_t len;
    char *before = dump(&T, "bad", &len);
    static const struct {
        const char *method, *path, *body;
        int status;
        const char *code, *field;
    } cases[] = {
        { "POST", "/uv/bad", "{\"items\":\"a\"}", 400, "BAD_REQUEST", "items" },
        { "POST", "/uv/bad", "{\"items\":[\"a\",null]}", 400, "BAD_REQUEST", "items" },
        { "POST", "/uv/bad", "{\"items\":[\"a\",1.5]}", 400, "BAD_REQUEST", "items" },
        { "POST", "/uv/bad", "{\"items\":[\"a\",{}]}", 400, "BAD_REQUEST", "items" },
        { "POST", "/uv/bad", "{\"items\":[true]}", 400, "BAD_REQUEST", "items" },
        { "POST", "/uv/bad", "{}", 400, "BAD_REQUEST", "items" },
        { "POST", "/uv/bad", "{\"items\":[\"x\"],\"extra\":1}", 400, "BAD_REQUEST", "extra" },
        { "POST", "/uv/bad", "not json", 400, "BAD_REQUEST", NULL },
        { "POST", "/uv/bad?x=1", "{\"items\":[\"x\"]}", 400, "BAD_REQUEST", "x" },
        { "POST", "/uv/abloom", "{\"items\":[\"x\"]}", 409, "WRONGTYPE", NULL },
        { "GET", "/uv/abloom", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/uv/bad?union=abloom", NULL, 409, "WRONGTYPE", NULL },
        { "GET", "/uv/bad?union=", NULL, 400, "BAD_REQUEST", "union" },
        { "GET", "/uv/bad?format=xml", NULL, 400, "BAD_REQUEST", "format" },
        { "GET", "/uv/bad?format=redis&union=x", NULL, 400, "BAD_REQUEST", "format" },
        { "POST", "/uv/bad/merge", "{\"sources\":[]}", 400, "BAD_REQUEST", "sources" },
        { "POST", "/uv/bad/merge", "{\"sources\":[5]}", 400, "BAD_REQUEST", "sources" },
        { "POST", "/uv/bad/merge", "{\"sources\":[\"\"]}", 400, "BAD_REQUEST", "sources" },
        { "POST", "/uv/bad/merge", "{\"sources\":[\"abloom\"]}", 409, "WRONGTYPE", NULL },
        { "POST", "/uv/abloom/merge", "{\"sources\":[\"bad\"]}", 409, "WRONGTYPE", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        r = http(&T, cases[i].method, cases[i].path, cases[i].body, NULL);
        if (r.status != cases[i].status)
            fail_msg("case %zu %s %s: expected %d, got %ld %s", i, cases[i].method, cases[i].path,
                     cases[i].status, r.status, r.body);
        assert_error(&r, cases[i].status, cases[i].code);
        if (cases[i].field) {
            const char *f = json_string_value(json_object_get(json_object_get(r.json, "error"), "field"));
            if (!f || strcmp(f, cases[i].field) != 0)
                fail_msg("case %zu: expected field %s in %s", i, cases[i].field, r.body);
        }
        http_free(&r);
    }
    /* more than 10 000 items */
    size_t cap = 10001 * 6 + 32;
    char *body = malloc(cap);
    size_t o = (size_t)snprintf(body, cap, "{\"items\":[");
    for (int i = 0; i < 10001; i++)
        o += (size_t)snprintf(body + o, cap - o, "%s%d", i ? "," : "", i);
    snprintf(body + o, cap - o, "]}");
    r = http(&T, "POST", "/uv/bad", body, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    body[strlen(body) - 8] = '\0';   /* drop the last item(s): now <= 10 000 */
    strcat(body, "]}");
    r = http(&T, "POST", "/uv/bad2", body, NULL);
    assert_status(&r, 200);
    http_free(&r);
    free(body);
    /* nothing changed, and the failed merges created nothing */
    char *after = dump(&T, "bad", &len);
    assert_memory_equal(before, after, len);
    free(before);
    free(after);
    r = http(&T, "GET", "/keys/abloom", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "type")), "bloom");
    http_free(&r);
    /* integers are their decimal text */
    r = http(&T, "POST", "/uv/ints", "{\"items\":[7,\"8\"]}", NULL);
    http_free(&r);
    r = http(&T, "POST", "/uv/ints", "{\"items\":[\"7\",8]}", NULL);
    assert_false(json_bool_of(&r, "updated"));
    http_free(&r);
}

/* PFADD key with no elements: creates an empty HLL and answers 1, then 0 once
 * the key exists (an existing key is left as it is); the bytes equal Redis's. */
static void test_empty_add(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/uv/empty", "{\"items\":[]}", NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "updated"));
    http_free(&r);
    r = http(&T, "POST", "/uv/empty", "{\"items\":[]}", NULL);
    assert_false(json_bool_of(&r, "updated"));
    http_free(&r);
    assert_int_equal(t_count(&T, "empty"), 0);
    r = http(&T, "GET", "/keys/empty", NULL, NULL);
    assert_status(&r, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "type")), "uv");
    http_free(&r);
    r = http(&T, "POST", "/uv/empty2", "{\"items\":[\"a\"]}", NULL);
    http_free(&r);
    r = http(&T, "POST", "/uv/empty2", "{\"items\":[]}", NULL);
    assert_false(json_bool_of(&r, "updated"));
    http_free(&r);
    assert_int_equal(t_count(&T, "empty2"), 1);
    r = http(&T, "POST", "/bloom/emptybloom", "{\"items\":[]}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");   /* BF.MADD needs an item */
    http_free(&r);
    if (!have_redis)
        return;
    resp_t *v = redis_cmd(&R, "PFADD", "empty", NULL);
    assert_int_equal(v->integer, 1);
    resp_free(v);
    v = redis_cmd(&R, "PFADD", "empty", NULL);
    assert_int_equal(v->integer, 0);
    resp_free(v);
    assert_int_equal(r_count("empty", NULL, NULL), 0);
    assert_bytes_equal("empty", "empty");
}

/* The exact bytes survive a restart from the snapshot and a kill -9 with
 * journal replay -- cached cardinalities included. */
static void test_persistence(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    t_add(&p, "ps", 1, 0, 40);
    t_add(&p, "pd", 1, 0, 9000);
    http_resp_t r0 = http(&p, "POST", "/uv/pe", "{\"items\":[]}", NULL);   /* empty PFADD: journaled */
    assert_true(json_bool_of(&r0, "updated"));
    http_free(&r0);
    /* caches the count in the header like Redis's PFCOUNT; the cache is
     * derived data and a read never journals, so after a journal replay the
     * header says "stale" and the next count recomputes it */
    long long pd_count = t_count(&p, "pd");
    http_resp_t r = http(&p, "POST", "/uv/pm/merge", "{\"sources\":[\"ps\",\"pd\"]}", NULL);
    http_free(&r);
    size_t l1, l2, l3;
    char *a = dump(&p, "ps", &l1), *b = dump(&p, "pd", &l2), *c = dump(&p, "pm", &l3);
    for (int round = 0; round < 2; round++) {
        if (round == 0)
            tally_kill(&p);   /* journal replay */
        else
            assert_int_equal(tally_stop(&p), 0);   /* snapshot */
        tally_start(&p, dir, NULL);
        size_t m1, m2, m3;
        char *x = dump(&p, "ps", &m1), *y = dump(&p, "pd", &m2), *z = dump(&p, "pm", &m3);
        assert_int_equal(l1, m1);
        assert_int_equal(l2, m2);
        assert_int_equal(l3, m3);
        assert_memory_equal(a, x, l1);
        /* everything but the cached count (bytes 8..15 of the header) */
        assert_memory_equal(b, y, 8);
        assert_memory_equal(b + 16, y + 16, l2 - 16);
        assert_int_equal(t_count(&p, "pd"), pd_count);
        assert_memory_equal(c, z, l3);
        http_resp_t e = http(&p, "GET", "/keys/pe", NULL, NULL);
        assert_status(&e, 200);
        http_free(&e);
        free(x);
        free(y);
        free(z);
    }
    free(a);
    free(b);
    free(c);
    p.own_dir = true;
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_transcript),
        cmocka_unit_test(test_sparse_to_dense_steps),
        cmocka_unit_test(test_unions_and_merges_match_redis),
        cmocka_unit_test(test_import_redis_bytes),
        cmocka_unit_test(test_hostile_blobs),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_empty_add),
        cmocka_unit_test(test_persistence),
        cmocka_unit_test(test_counts_match_redis_to_a_million),
    };
    return cmocka_run_group_tests_name("/uv", tests, setup, teardown);
}
