/*
 * it_dumpkey.c - GET /keys/{key}/dump and PUT /keys/{key}/restore through a
 * real tallyd: a key of every type dumps, restores under another name and
 * dumps back byte-identical; EXISTS without ?replace; TTLs carried or
 * overridden; every flipped byte of a dump refused with nothing created;
 * restores replayed from the journal after kill -9; a journal of every
 * type's changes replays to byte-identical dumps; DELETE ?digest= deletes
 * only the value that was dumped.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

TALLY_ONE_SERVER_SUITE(T)

/* One key of each type: the requests that build it. */
static const struct {
    const char *type;
    const char *method, *path, *body, *ctype;
} makers[] = {
    { "throttle", "GET", "/throttle/%s?max_burst=15&count_per_period=30&period=60", NULL, NULL },
    { "counter", "POST", "/counter/%s", "{\"by\":7}", NULL },
    { "uv", "POST", "/uv/%s", "{\"items\":[\"a\",\"b\",\"c\"]}", NULL },
    { "bloom", "POST", "/bloom/%s", "{\"items\":[\"a\",\"b\"]}", NULL },
    { "cuckoo", "POST", "/cuckoo/%s", "{\"items\":[\"a\",\"b\"]}", NULL },
    { "cms", "PUT", "/cms/%s", "{\"error\":0.01,\"probability\":0.01}", NULL },
    { "topk", "PUT", "/topk/%s", "{\"k\":3,\"width\":8,\"depth\":3}", NULL },
    { "tdigest", "PUT", "/tdigest/%s", "{\"compression\":100}", NULL },
    { "bits", "PUT", "/bits/%s", "hello", "application/octet-stream" },
    { "activity", "POST", "/activity/%s", "{\"day\":\"2026-11-21\",\"users\":[1,2,3,70000]}", NULL },
    { "geo", "POST", "/geo/%s", "{\"members\":[{\"member\":\"van1\",\"lon\":2.35,\"lat\":48.85}]}", NULL },
    { "ts", "POST", "/ts/%s", "{\"samples\":[[1000,1],[2000,2.5]]}", NULL },
};
#define NTYPES (sizeof(makers) / sizeof(makers[0]))

static void make_key(const tally_proc_t *p, size_t i, const char *key)
{
    char path[256];
    snprintf(path, sizeof(path), makers[i].path, key);
    const char *body = makers[i].body;
    http_resp_t r = http_bin(p, makers[i].method, path, body, body ? strlen(body) : 0,
                             makers[i].ctype ? makers[i].ctype : body ? "application/json" : NULL);
    if (r.status / 100 != 2)
        fail_msg("%s %s: %ld %s", makers[i].method, path, r.status, r.body);
    http_free(&r);
    const char *add = strcmp(makers[i].type, "topk") == 0      ? "{\"items\":[\"x\",\"y\",\"x\"]}"
                      : strcmp(makers[i].type, "cms") == 0     ? "{\"increments\":[{\"item\":\"a\",\"by\":3}]}"
                      : strcmp(makers[i].type, "tdigest") == 0 ? "{\"values\":[1,2,3,4,5]}"
                                                              : NULL;
    if (add) {
        snprintf(path, sizeof(path), "/%s/%s", makers[i].type, key);
        r = http(p, "POST", path, add, NULL);
        assert_status(&r, 200);
        http_free(&r);
    }
}

static http_resp_t dump(const tally_proc_t *p, const char *key)
{
    return httpf(p, "GET", NULL, "/keys/%s/dump", key);
}

/* Two dumps of the same value: byte-identical, except that a key with a TTL
 * (a throttle's) may have lost a few milliseconds between them - the TTL
 * field (bytes 12..19) and the checksum over it (the last 8) then differ,
 * and every other byte must not. */
static bool same_dump(const http_resp_t *a, const http_resp_t *b)
{
    if (a->len != b->len || a->len < 36)
        return false;
    if (memcmp(a->body, b->body, a->len) == 0)
        return true;
    int64_t ta, tb;
    memcpy(&ta, a->body + 12, 8);   /* little-endian, as this machine */
    memcpy(&tb, b->body + 12, 8);
    return memcmp(a->body, b->body, 12) == 0 && memcmp(a->body + 20, b->body + 20, a->len - 28) == 0 && ta > 0 &&
           tb > 0 && tb <= ta && ta - tb < 5000;
}

static void test_round_trip_every_type(void **state)
{
    (void)state;
    for (size_t i = 0; i < NTYPES; i++) {
        char src[64], dst[64];
        snprintf(src, sizeof(src), "src-%s", makers[i].type);
        snprintf(dst, sizeof(dst), "dst-%s", makers[i].type);
        make_key(&T, i, src);
        http_resp_t d = dump(&T, src);
        assert_status(&d, 200);
        char ct[64];
        assert_true(http_header(&d, "Content-Type", ct, sizeof(ct)));
        assert_string_equal(ct, "application/octet-stream");
        char path[128];
        snprintf(path, sizeof(path), "/keys/%s/restore", dst);
        http_resp_t r = http_bin(&T, "PUT", path, d.body, d.len, "application/octet-stream");
        assert_status(&r, 201);
        json_t *t = json_object_get(r.json, "type");
        assert_string_equal(json_string_value(t), makers[i].type);
        http_free(&r);
        http_resp_t d2 = dump(&T, dst);
        assert_status(&d2, 200);
        if (!same_dump(&d, &d2))
            fail_msg("%s: the restored key dumps differently (%zu vs %zu bytes)", makers[i].type, d2.len, d.len);
        /* again without replace: 409 EXISTS, nothing changed */
        r = http_bin(&T, "PUT", path, d.body, d.len, "application/octet-stream");
        assert_error(&r, 409, "EXISTS");
        http_free(&r);
        http_free(&d);
        http_free(&d2);
    }
    /* the restored keys answer like the originals */
    http_resp_t r = http(&T, "GET", "/counter/dst-counter", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "value"), 7);
    http_free(&r);
    r = http(&T, "GET", "/uv/dst-uv", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "count"), 3);
    http_free(&r);
}

static void test_replace_and_ttl(void **state)
{
    (void)state;
    http_expect(&T, "POST", "/counter/rt-c", "{\"by\":5}", 200, NULL);
    http_expect(&T, "PUT", "/keys/rt-c/ttl", "{\"ttl_ms\":600000}", 200, NULL);
    http_expect(&T, "POST", "/uv/rt-u", "{\"items\":[\"a\"]}", 200, NULL);
    http_resp_t d = dump(&T, "rt-c");
    assert_status(&d, 200);
    /* replace a key of another type */
    http_resp_t r = http_bin(&T, "PUT", "/keys/rt-u/restore?replace=true", d.body, d.len, "application/octet-stream");
    assert_status(&r, 201);
    assert_true(json_bool_of(&r, "replaced"));
    long long ttl = json_int_of(&r, "ttl_ms");
    assert_true(ttl > 590000 && ttl <= 600000);
    http_free(&r);
    r = http(&T, "GET", "/keys/rt-u", NULL, NULL);
    assert_status(&r, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "type")), "counter");
    assert_true(json_int_of(&r, "ttl_ms") > 590000);
    http_free(&r);
    /* ?ttl_ms=0: no expiry; ?ttl_ms=N: that one */
    r = http_bin(&T, "PUT", "/keys/rt-n/restore?ttl_ms=0", d.body, d.len, "application/octet-stream");
    assert_status(&r, 201);
    assert_int_equal(json_int_of(&r, "ttl_ms"), -1);
    http_free(&r);
    r = http_bin(&T, "PUT", "/keys/rt-t/restore?ttl_ms=5000", d.body, d.len, "application/octet-stream");
    assert_status(&r, 201);
    http_free(&r);
    r = http(&T, "GET", "/keys/rt-t", NULL, NULL);
    assert_true(json_int_of(&r, "ttl_ms") <= 5000 && json_int_of(&r, "ttl_ms") > 0);
    http_free(&r);
    /* not octet-stream: 415; bad parameters: 400; missing key: 404 */
    r = http_bin(&T, "PUT", "/keys/rt-x/restore", d.body, d.len, "text/plain");
    assert_error(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    http_free(&r);
    r = http_bin(&T, "PUT", "/keys/rt-x/restore?ttl_ms=-5", d.body, d.len, "application/octet-stream");
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/keys/nope/dump", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    http_free(&d);
}

/* Every single flipped byte (and every truncation) of a dump is refused with
 * 400 and creates nothing. */
static void test_corrupted_refused(void **state)
{
    (void)state;
    make_key(&T, 7, "cor");   /* a T-Digest */
    http_resp_t d = dump(&T, "cor");
    assert_status(&d, 200);
    char *buf = malloc(d.len);
    for (size_t i = 0; i < d.len; i++) {
        memcpy(buf, d.body, d.len);
        buf[i] ^= (char)(1u << (i % 8));
        http_resp_t r = http_bin(&T, "PUT", "/keys/cor2/restore", buf, d.len, "application/octet-stream");
        if (r.status != 400)
            fail_msg("flipped byte %zu: %ld %s", i, r.status, r.body);
        http_free(&r);
        r = http_bin(&T, "PUT", "/keys/cor2/restore", d.body, i, "application/octet-stream");
        if (r.status != 400)
            fail_msg("truncated at %zu: %ld %s", i, r.status, r.body);
        http_free(&r);
    }
    http_resp_t r = http(&T, "GET", "/keys/cor2", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    free(buf);
    http_free(&d);
}

static void test_digest_delete(void **state)
{
    (void)state;
    http_expect(&T, "POST", "/counter/dg", "{\"by\":1}", 200, NULL);
    http_resp_t d = dump(&T, "dg");
    char digest[40], path[80];
    assert_true(http_header(&d, "Tally-Digest", digest, sizeof(digest)));
    assert_int_equal(strlen(digest), 16);
    http_expect(&T, "POST", "/counter/dg", "{\"by\":1}", 200, NULL);
    snprintf(path, sizeof(path), "/keys/dg?digest=%s", digest);
    http_resp_t r = http(&T, "DELETE", path, NULL, NULL);
    assert_error(&r, 412, "PRECONDITION_FAILED");
    http_free(&r);
    http_free(&d);
    d = dump(&T, "dg");
    assert_true(http_header(&d, "Tally-Digest", digest, sizeof(digest)));
    snprintf(path, sizeof(path), "/keys/dg?digest=%s", digest);
    r = http(&T, "DELETE", path, NULL, NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "deleted"));
    http_free(&r);
    r = http(&T, "DELETE", "/keys/dg?digest=zz", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    http_free(&d);
}

/* Restores are journaled: kill -9 and the restored keys come back with the
 * same bytes. */
static void test_replayed(void **state)
{
    (void)state;
    char dir[256];
    tmpdir_make(dir, sizeof(dir));
    tally_proc_t p;
    tally_start(&p, dir, NULL);
    make_key(&p, 9, "rp-src");   /* activity */
    make_key(&p, 0, "rp-thr");   /* throttle */
    http_resp_t a = dump(&p, "rp-src"), b = dump(&p, "rp-thr");
    http_resp_t r = http_bin(&p, "PUT", "/keys/rp-dst/restore", a.body, a.len, "application/octet-stream");
    assert_status(&r, 201);
    http_free(&r);
    r = http_bin(&p, "PUT", "/keys/rp-src/restore?replace=true", b.body, b.len, "application/octet-stream");
    assert_status(&r, 201);
    http_free(&r);
    http_resp_t before = dump(&p, "rp-src");
    tally_kill(&p);
    tally_start(&p, dir, NULL);
    http_resp_t x = dump(&p, "rp-dst"), y = dump(&p, "rp-src");
    assert_status(&x, 200);
    assert_int_equal(x.len, a.len);
    assert_memory_equal(x.body, a.body, a.len);
    assert_int_equal(y.len, before.len);
    /* the TTL field is relative (and the checksum covers it): compare the
     * value bytes between them */
    assert_memory_equal(y.body + 28, before.body + 28, before.len - 36);
    http_free(&a);
    http_free(&b);
    http_free(&x);
    http_free(&y);
    http_free(&before);
    tally_cleanup(&p);
    tmpdir_remove(dir);
}

/* The journal of this release (command records only: no snapshot is taken)
 * replays to byte-identical dumps of every type, after kill -9. */
static void test_journal_replays_identical(void **state)
{
    (void)state;
    char dir[256];
    tmpdir_make(dir, sizeof(dir));
    tally_proc_t p;
    const char *args[] = { "--snapshot-interval", "0", NULL };
    tally_start(&p, dir, args);
    http_resp_t before[NTYPES];
    for (size_t i = 0; i < NTYPES; i++) {
        char key[64];
        snprintf(key, sizeof(key), "jr-%s", makers[i].type);
        make_key(&p, i, key);
        if (strcmp(makers[i].method, "PUT") != 0 && strcmp(makers[i].type, "ts") != 0)
            make_key(&p, i, key);   /* a second round of changes on the same value */
        before[i] = dump(&p, key);
        assert_status(&before[i], 200);
    }
    tally_kill(&p);
    tally_start(&p, dir, args);
    for (size_t i = 0; i < NTYPES; i++) {
        char key[64];
        snprintf(key, sizeof(key), "jr-%s", makers[i].type);
        http_resp_t after = dump(&p, key);
        assert_status(&after, 200);
        if (!same_dump(&before[i], &after))
            fail_msg("%s: the replayed key dumps differently (%zu vs %zu bytes)", makers[i].type, after.len,
                     before[i].len);
        http_free(&after);
        http_free(&before[i]);
    }
    tally_cleanup(&p);
    tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_type),
        cmocka_unit_test(test_replace_and_ttl),
        cmocka_unit_test(test_corrupted_refused),
        cmocka_unit_test(test_digest_delete),
        cmocka_unit_test(test_replayed),
        cmocka_unit_test(test_journal_replays_identical),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
