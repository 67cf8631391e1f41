/*
 * test_urlpath.c - the {path} of rate-limit keys: every spelling the outside
 * review used to escape the sample login policy lands on /login, the
 * RFC 3986 dot-segment examples, escapes that must stay escaped, the
 * capacity limit, and - against seeded random paths - that normalising is
 * idempotent and yields only the canonical form.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/rng.h"
#include "core/urlpath.h"

static const char *norm(const char *in)
{
    static char out[4096];
    size_t n = urlpath_normalize(in, strlen(in), out, sizeof(out) - 1);
    if (n == (size_t)-1)
        return "(too long)";
    out[n] = '\0';
    return out;
}

static void test_login_spellings(void **state)
{
    (void)state;
    static const char *const same[] = {
        "/login", "/login/", "//login", "/./login", "/%6Cogin", "/%6cogin", "/login;x", "/login%20",
        "/LOGIN", "/Login?next=/", "/login#top", "\\login", "/a/../login", "/login;jsessionid=1/",
        "/%2e/login", "/%2E%2E/login", "login", "/login%3Bx", "/login%2F", "///login///", "/login ",
        "/login;", "/./././login/.",
    };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
        assert_string_equal(norm(same[i]), "/login");
}

static void test_dot_segments(void **state)
{
    (void)state;
    /* RFC 3986 5.2.4's examples, and never above the root */
    assert_string_equal(norm("/a/b/c/./../../g"), "/a/g");
    assert_string_equal(norm("mid/content=5/../6"), "/mid/6");
    assert_string_equal(norm("/../../x"), "/x");
    assert_string_equal(norm("/a/b/.."), "/a");
    assert_string_equal(norm("/.."), "/");
    assert_string_equal(norm(""), "/");
    assert_string_equal(norm("?q=1"), "/");
    assert_string_equal(norm("/..."), "/...");
    assert_string_equal(norm("/.a/..b"), "/.a/..b");
}

static void test_escapes_kept(void **state)
{
    (void)state;
    /* what cannot be written plainly stays escaped, in upper case */
    assert_string_equal(norm("/a%00b"), "/a%00b");
    assert_string_equal(norm("/a%0ab"), "/a%0Ab");
    assert_string_equal(norm("/100%25"), "/100%25");
    assert_string_equal(norm("/100%"), "/100%25");
    assert_string_equal(norm("/a%zz"), "/a%25zz");
    assert_string_equal(norm("/a%3fb"), "/a%3Fb");
    assert_string_equal(norm("/a%23b"), "/a%23b");
    assert_string_equal(norm("/a%20b"), "/a b");
    assert_string_equal(norm("/caf\xc3\xa9/X"), "/caf\xc3\xa9/x");
    assert_string_equal(norm("/a%2Fb"), "/a/b");
    assert_string_equal(norm("/a%5Cb"), "/a/b");
}

static void test_capacity(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(urlpath_normalize("/abcdef", 7, out, 7), 7);
    assert_int_equal(urlpath_normalize("/abcdefg", 8, out, 7), (size_t)-1);
    assert_int_equal(urlpath_normalize("/ab%", 4, out, 5), (size_t)-1);   /* "%25" needs 6 */
    assert_int_equal(urlpath_normalize("", 0, out, 1), 1);
    assert_int_equal(urlpath_normalize("/abc?", 5, out, 4), 4);
}

static void test_idempotent_random(void **state)
{
    (void)state;
    static const char *const pieces[] = { "/", "//", "\\", ".", "..", "%", "%2", "%2e", "%2F", "%25", "%00",
                                          "%41", ";", ";x", "?", "#", " ", "%20", "a", "B", "%3f", "\x7f",
                                          "\xc3\xa9", "login", "%5c", "%%", "%3B" };
    rng_t r;
    rng_seed(&r, 20261201);
    for (int t = 0; t < 200000; t++) {
        char in[256], once[1024], twice[1024];
        size_t n = 0;
        int parts = (int)rng_below(&r, 12);
        for (int k = 0; k < parts; k++) {
            const char *p = pieces[rng_below(&r, sizeof(pieces) / sizeof(pieces[0]))];
            size_t l = strlen(p);
            memcpy(in + n, p, l);
            n += l;
        }
        size_t a = urlpath_normalize(in, n, once, sizeof(once));
        assert_true(a != (size_t)-1 && a <= 3 * n + 1);
        size_t b = urlpath_normalize(once, a, twice, sizeof(twice));
        assert_int_equal(a, b);
        assert_memory_equal(once, twice, a);
        /* canonical: a leading '/', no empty, "." or ".." segment, no trailing '/',
         * no ';', '?', '#', '\', control byte or upper-case letter */
        assert_int_equal(once[0], '/');
        assert_true(a == 1 || once[a - 1] != '/');
        for (size_t i = 0; i < a; i++) {
            unsigned char c = (unsigned char)once[i];
            assert_true(c >= 0x20 && c != 0x7f && c != ';' && c != '?' && c != '#' && c != '\\');
            bool hex_digit = (i >= 1 && once[i - 1] == '%') || (i >= 2 && once[i - 2] == '%');
            assert_false(c >= 'A' && c <= 'Z' && !hex_digit);
            if (c == '/' && i > 0)
                assert_true(once[i - 1] != '/');
        }
        once[a] = '\0';
        assert_null(strstr(once, "/./"));
        assert_null(strstr(once, "/../"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_login_spellings),  cmocka_unit_test(test_dot_segments),
        cmocka_unit_test(test_escapes_kept),     cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_idempotent_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
