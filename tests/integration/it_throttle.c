/*
 * it_throttle.c - /throttle through a real tallyd: the README example,
 * gateway headers and statuses, reset, and every kind of bad input leaving
 * the state untouched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

TALLY_ONE_SERVER_SUITE(T)

#define USER123 "{\"key\":\"user123\",\"max_burst\":15,\"count_per_period\":30,\"period\":60}"

/* The "done when": 16 allowed (remaining 15..0), the 17th limited
 * with retry_after 2 and reset_after 32. */
static void test_readme_example(void **state)
{
    (void)state;
    for (int i = 0; i < 16; i++) {
        http_resp_t r = http(&T, "POST", "/throttle", USER123, NULL);
        assert_status(&r, 200);
        assert_true(json_bool_of(&r, "allowed"));
        assert_int_equal(json_int_of(&r, "limit"), 16);
        assert_int_equal(json_int_of(&r, "remaining"), 15 - i);
        assert_int_equal(json_int_of(&r, "retry_after"), -1);
        assert_int_equal(json_int_of(&r, "retry_after_ms"), -1);
        if (i == 0)
            assert_int_equal(json_int_of(&r, "reset_after"), 2);
        http_free(&r);
    }
    http_resp_t r = http(&T, "POST", "/throttle", USER123, NULL);
    assert_status(&r, 200);
    assert_false(json_bool_of(&r, "allowed"));
    assert_int_equal(json_int_of(&r, "remaining"), 0);
    assert_int_equal(json_int_of(&r, "retry_after"), 2);
    assert_int_equal(json_int_of(&r, "reset_after"), 32);
    long long rms = json_int_of(&r, "retry_after_ms");
    assert_true(rms > 1000 && rms <= 2000);
    http_free(&r);
}

/* curl -d sends application/x-www-form-urlencoded, which a browser may send
 * cross-origin without asking: refused (415), nothing counted (api/guard.h). */
static void test_curl_default_content_type(void **state)
{
    (void)state;
    const char *body = "{\"key\":\"formenc\",\"max_burst\":0,\"count_per_period\":1,\"period\":60}";
    http_resp_t r = http(&T, "POST", "/throttle", body, "application/x-www-form-urlencoded");
    assert_error(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    http_free(&r);
    r = http(&T, "POST", "/throttle", body, NULL);   /* application/json */
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "allowed"));   /* the refused request took nothing */
    http_free(&r);
}

static void test_gateway_get(void **state)
{
    (void)state;
    const char *q = "/throttle/gw%2Fkey?max_burst=1&count_per_period=1&period=60";
    char v[128];
    for (int i = 0; i < 2; i++) {
        http_resp_t r = http(&T, "GET", q, NULL, NULL);
        assert_status(&r, 200);
        assert_true(http_header(&r, "RateLimit-Limit", v, sizeof(v)));
        assert_string_equal(v, "2");
        assert_true(http_header(&r, "RateLimit-Remaining", v, sizeof(v)));
        assert_int_equal(atoi(v), 1 - i);
        assert_true(http_header(&r, "RateLimit-Policy", v, sizeof(v)));
        assert_string_equal(v, "\"default\";q=2;w=120");
        assert_true(http_header(&r, "RateLimit", v, sizeof(v)));
        assert_false(http_header(&r, "Retry-After", v, sizeof(v)));
        http_free(&r);
    }
    http_resp_t r = http(&T, "GET", q, NULL, NULL);
    assert_status(&r, 429);
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    assert_int_equal(atoi(v), 60);
    assert_true(http_header(&r, "RateLimit-Reset", v, sizeof(v)));
    assert_int_equal(atoi(v), 120);
    assert_false(json_bool_of(&r, "allowed"));
    http_free(&r);

    /* nginx auth_request wants 403 */
    r = httpf(&T, "GET", NULL, "%s&deny_status=403", q);
    assert_status(&r, 403);
    http_free(&r);

    /* the key was percent-decoded: "gw/key" */
    r = http(&T, "GET", "/keys/gw%2Fkey", NULL, NULL);
    assert_status(&r, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "key")), "gw/key");
    assert_string_equal(json_string_value(json_object_get(r.json, "type")), "throttle");
    assert_true(json_int_of(&r, "ttl_ms") > 100000);
    http_free(&r);

    /* reset */
    r = http(&T, "DELETE", "/throttle/gw%2Fkey", NULL, NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "deleted"));
    http_free(&r);
    r = http(&T, "DELETE", "/throttle/gw%2Fkey", NULL, NULL);
    assert_false(json_bool_of(&r, "deleted"));
    http_free(&r);
    r = http(&T, "GET", q, NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
}

static void test_peek_does_not_store(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/throttle",
                         "{\"key\":\"peeked\",\"max_burst\":3,\"count_per_period\":1,\"period\":10,\"quantity\":0}",
                         NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "allowed"));
    assert_int_equal(json_int_of(&r, "remaining"), 4);
    http_free(&r);
    r = http(&T, "GET", "/keys/peeked", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
}

/* Each bad request gets its envelope naming the problem and stores nothing. */
static void test_bad_input(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        const char *field;   /* expected "field" in the envelope, or NULL */
    } cases[] = {
        { "not json", NULL },
        { "[1,2]", NULL },
        { "{\"key\":\"bad\",\"max_burst\":1,\"count_per_period\":1}", "period" },
        { "{\"key\":\"bad\",\"max_burst\":\"1\",\"count_per_period\":1,\"period\":1}", "max_burst" },
        { "{\"key\":\"bad\",\"max_burst\":1.5,\"count_per_period\":1,\"period\":1}", "max_burst" },
        { "{\"key\":\"bad\",\"max_burst\":-1,\"count_per_period\":1,\"period\":1}", "max_burst" },
        { "{\"key\":\"bad\",\"max_burst\":1,\"count_per_period\":0,\"period\":1}", "count_per_period" },
        { "{\"key\":\"bad\",\"max_burst\":1,\"count_per_period\":-5,\"period\":1}", "count_per_period" },
        { "{\"key\":\"bad\",\"max_burst\":1,\"count_per_period\":1,\"period\":0}", "period" },
        { "{\"key\":\"bad\",\"max_burst\":1,\"count_per_period\":1,\"period\":-60}", "period" },
        { "{\"key\":\"bad\",\"max_burst\":1,\"count_per_period\":1,\"period\":1,\"quantity\":-1}", "quantity" },
        { "{\"key\":\"bad\",\"max_burst\":99999999999999999999,\"count_per_period\":1,\"period\":1}", NULL },
        { "{\"key\":\"bad\",\"max_burst\":9000000000000000000,\"count_per_period\":1,\"period\":1}", "max_burst" },
        { "{\"key\":\"bad\",\"max_burst\":1,\"count_per_period\":1,\"period\":99999999999}", "period" },
        { "{\"key\":\"\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}", "key" },
        { "{\"key\":5,\"max_burst\":1,\"count_per_period\":1,\"period\":1}", "key" },
        { "{\"max_burst\":1,\"count_per_period\":1,\"period\":1}", "key" },
        { "{\"key\":\"bad\",\"max_brust\":1,\"count_per_period\":1,\"period\":1}", "max_brust" },
        { "{\"key\":\"bad\",\"key\":\"dup\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        http_resp_t r = http(&T, "POST", "/throttle", cases[i].body, NULL);
        if (r.status != 400)
            fail_msg("case %zu (%s): expected 400, got %ld %s", i, cases[i].body, r.status, r.body);
        assert_error(&r, 400, "BAD_REQUEST");
        if (cases[i].field) {
            const char *f = json_string_value(json_object_get(json_object_get(r.json, "error"), "field"));
            if (!f || strcmp(f, cases[i].field) != 0)
                fail_msg("case %zu: expected field %s in %s", i, cases[i].field, r.body);
        }
        http_free(&r);
    }
    /* an over-long key (1025 bytes) */
    char body[2048], key[1100];
    memset(key, 'k', 1025);
    key[1025] = '\0';
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}", key);
    http_resp_t r = http(&T, "POST", "/throttle", body, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* exactly 1024 is fine */
    key[1024] = '\0';
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}", key);
    r = http(&T, "POST", "/throttle", body, NULL);
    assert_status(&r, 200);
    http_free(&r);
    /* wrong media type */
    r = http(&T, "POST", "/throttle", "{}", "application/octet-stream");
    assert_error(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    http_free(&r);
    /* GET with bad query parameters */
    r = http(&T, "GET", "/throttle/bad?max_burst=1&count_per_period=x&period=1", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/throttle/bad?max_burst=1&count_per_period=1", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/throttle/bad?max_burst=1&count_per_period=1&period=1&deny_status=200", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/throttle/bad?max_burst=1&count_per_period=1&period=1&color=red", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/throttle/bad%zz?max_burst=1&count_per_period=1&period=1", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/throttle/?max_burst=1&count_per_period=1&period=1", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* nothing was stored by any of them */
    r = http(&T, "GET", "/keys/bad", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    r = http(&T, "GET", "/keys/dup", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
}

static void test_wrongtype_free_routes(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "GET", "/nothing/here", NULL, NULL);
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    r = http(&T, "PUT", "/throttle", "{}", NULL);
    assert_error(&r, 405, "METHOD_NOT_ALLOWED");
    char allow[64];
    assert_true(http_header(&r, "Allow", allow, sizeof(allow)));
    assert_string_equal(allow, "POST");
    http_free(&r);
    r = http(&T, "PATCH", "/throttle/x", "{}", NULL);
    assert_error(&r, 405, "METHOD_NOT_ALLOWED");
    http_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readme_example),
        cmocka_unit_test(test_curl_default_content_type),
        cmocka_unit_test(test_gateway_get),
        cmocka_unit_test(test_peek_does_not_store),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_wrongtype_free_routes),
    };
    return cmocka_run_group_tests_name("throttle (integration)", tests, setup, teardown);
}
