/*
 * it_membership.c - /bloom and /cuckoo through a real tallyd: the seeds'
 * BF transcript with RedisBloom's answers, BF/CF semantics (defaults,
 * RESERVE on an existing key, INFO of a missing key, ADD/ADDNX/DEL/COUNT),
 * full filters refused atomically (never a hang), every kind of bad input
 * leaving the state untouched, and persistence: the same answers after
 * kill -9 (journal replay) and after a snapshot restart, with cuckoo
 * evictions replayed identically.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

static tally_proc_t T;

static int setup(void **state)
{
    (void)state;
    tally_start(&T, NULL, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tally_cleanup(&T);
    return 0;
}

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
    r = http(&T, "PUT", "/bloom/res", "{\"capacity\":10}", NULL);
    assert_error(&r, 409, "EXISTS");
    http_free(&r);
    r = http(&T, "GET", "/bloom/res", NULL, NULL);
    assert_int_equal(json_int_of(&r, "capacity"), 1000);
    assert_int_equal(json_int_of(&r, "expansion"), 4);
    assert_int_equal(json_int_of(&r, "hashes"), 11);   /* error 0.0005: ceil(ln2 * 15.8) */
    http_free(&r);
    /* scaling: grows past capacity with more sub-filters */
    r = http(&T, "PUT", "/bloom/grow", "{\"capacity\":50}", NULL);
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
    http_resp_t r = http(&T, "PUT", "/bloom/ns", "{\"capacity\":10,\"scaling\":false}", NULL);
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
/* Bad input                                                                */
/* ------------------------------------------------------------------------ */

static void test_bad_input(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/uv/auv", "{\"items\":[\"x\"]}", NULL);
    http_free(&r);
    r = http(&T, "PUT", "/bloom/bb", "{}", NULL);
    http_free(&r);
    r = http(&T, "PUT", "/cuckoo/cc", "{\"capacity\":100}", NULL);
    http_free(&r);
    static const struct {
        const char *method, *path, *body;
        int status;
        const char *code, *field;
    } cases[] = {
        { "PUT", "/bloom/nb", "{\"error_rate\":0}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":1}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":1.5}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":-0.01}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"error_rate\":\"0.01\"}", 400, "BAD_REQUEST", "error_rate" },
        { "PUT", "/bloom/nb", "{\"capacity\":0}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"capacity\":-5}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"capacity\":1.5}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"capacity\":99999999999}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"error_rate\":1e-12,\"capacity\":4000000000}", 400, "BAD_REQUEST", "capacity" },
        { "PUT", "/bloom/nb", "{\"expansion\":32769}", 400, "BAD_REQUEST", "expansion" },
        { "PUT", "/bloom/nb", "{\"scaling\":false,\"expansion\":2}", 400, "BAD_REQUEST", "expansion" },
        { "PUT", "/bloom/nb", "{\"scaling\":\"no\"}", 400, "BAD_REQUEST", "scaling" },
        { "PUT", "/bloom/nb", "{\"capacity\":10,\"color\":1}", 400, "BAD_REQUEST", "color" },
        { "PUT", "/bloom/auv", "{}", 409, "WRONGTYPE", NULL },
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bloom_seed_transcript),
        cmocka_unit_test(test_bloom_semantics),
        cmocka_unit_test(test_bloom_nonscaling_full),
        cmocka_unit_test(test_cuckoo_semantics),
        cmocka_unit_test(test_cuckoo_full),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_persistence_and_replay),
    };
    return cmocka_run_group_tests_name("/bloom and /cuckoo", tests, setup, teardown);
}
