/*
 * test_api_json_in.c - the flat-body reader of api/params.c against jansson.
 * api_json_flat_object reads the common request body without jansson's
 * lexer; whenever it answers, its tree must be the one json_loadb builds
 * (the same members, in the same order, of the same types, reals bit for
 * bit as jansson's printer shows them), and it must answer for the bodies
 * clients send.  Seeded random bodies built from
 * pieces of valid and invalid JSON (escapes, UTF-8, reals, nesting, leading
 * zeros, 19-digit integers, repeated names, stray commas) check the first;
 * fixed bodies the second.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/params.h"
#include "core/rng.h"

/* The tree as text with its member order and every value's type. */
static void describe(json_t *v, char *out, size_t n)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t used = (size_t)snprintf(out, n, "%s|", s ? s : "(null)");
    free(s);
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
        if (used < n)
            used += (size_t)snprintf(out + used, n - used, "%s:%d,", k, (int)json_typeof(x));
    }
}

static void same_as_jansson(const char *text, size_t n, bool *read)
{
    json_t *f = api_json_flat_object(text, n);
    *read = f != NULL;
    if (!f)
        return;
    json_error_t e;
    json_t *j = json_loadb(text, n, JSON_REJECT_DUPLICATES, &e);
    if (!j)
        fail_msg("flat reader accepted what jansson refuses (%s): %.*s", e.text, (int)n, text);
    char a[2048], b[2048];
    describe(f, a, sizeof(a));
    describe(j, b, sizeof(b));
    if (strcmp(a, b) != 0 || !json_equal(f, j))
        fail_msg("trees differ for %.*s:\n  flat    %s\n  jansson %s", (int)n, text, a, b);
    json_decref(f);
    json_decref(j);
}

static void test_random_bodies(void **state)
{
    (void)state;
    static const char *const pieces[] = {
        "{", "}", "\"key\"", "\"a\"", ":", ",", " ", "\n", "\t", "1", "-0", "0", "01", "-", "-7",
        "12345678901234567", "123456789012345678", "1234567890123456789", "99999999999999999999", "1.5", "1e3",
        "2E-1", "true", "false", "null", "tru", "nul", "\"x\\ny\"", "\"\\u00e9\"", "\"\xc3\xa9\"", "\"\xff\"", "[1]",
        "{\"n\":1}", "\"\"", "\"user:1\"", "\x01", "\"a b\"", "\"~\"", "\"\x7f\"",
    };
    static const char *const names[] = { "\"key\"", "\"period\"", "\"b\"", "\"\"" };
    rng_t r;
    rng_seed(&r, 20);
    char body[1024];
    long read = 0;
    for (int it = 0; it < 200000; it++) {
        size_t n = 0;
        if (rng_next(&r) % 4)
            body[n++] = '{';
        int parts = (int)(rng_next(&r) % 12);
        for (int p = 0; p < parts; p++) {
            const char *x;
            if (rng_next(&r) % 2) {
                x = names[rng_next(&r) % 4];
                memcpy(body + n, x, strlen(x));
                n += strlen(x);
                body[n++] = ':';
            }
            x = pieces[rng_next(&r) % (sizeof(pieces) / sizeof(pieces[0]))];
            memcpy(body + n, x, strlen(x));
            n += strlen(x);
            if (rng_next(&r) % 2)
                body[n++] = ',';
        }
        if (rng_next(&r) % 4)
            body[n++] = '}';
        bool ok;
        same_as_jansson(body, n, &ok);
        read += ok;
    }
    assert_true(read > 10000);   /* the reader is exercised, not just refusing */
}

static void test_common_bodies_are_read(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        "{\"key\":\"user:1\",\"max_burst\":15,\"count_per_period\":30,\"period\":60}",
        "{ \"key\" : \"user:1\" , \"policy\" : \"api\" , \"quantity\" : 2 }\n",
        "{}",
        " {\"a\":-0,\"b\":true,\"c\":false,\"d\":null,\"e\":\"\"} ",
        "{\"n\":-123456789012345678}",
        "{\"key\":\"a\",\"algorithm\":\"token_bucket\",\"capacity\":10,\"refill_rate\":1.5}",
        "{\"a\":1.0,\"b\":-0.0,\"c\":2.5e-3,\"d\":1E+300,\"e\":0.1}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        bool ok;
        same_as_jansson(bodies[i], strlen(bodies[i]), &ok);
        assert_true(ok);
    }
    /* left to jansson: repeated names, escapes, a real a double cannot hold,
     * a malformed one, 19 digits, nesting, trailing bytes */
    static const char *const others[] = {
        "{\"a\":1,\"a\":2}", "{\"a\":\"\\n\"}", "{\"a\":1e999}", "{\"a\":1.}", "{\"a\":1234567890123456789}",
        "{\"a\":{}}", "{\"a\":1} x", "{\"a\":1,}", "[]", "{\"caf\xc3\xa9\":1}",
    };
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        assert_null(api_json_flat_object(others[i], strlen(others[i])));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_bodies),
        cmocka_unit_test(test_common_bodies_are_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
