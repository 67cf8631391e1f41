/*
 * test_utf8.c - codec_utf8_ok and codec_text_ok (core/codec.h) against a
 * reference written from RFC 3629's table of well-formed byte sequences:
 * every string of one, two and three bytes, every four-byte string over
 * the lead bytes F0..F4 with continuation bytes, and seeded random strings
 * of ASCII runs of every length around the eight-byte steps the scanner
 * takes, with multi-byte characters, NULs and bad bytes at every position.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/codec.h"
#include "core/rng.h"

/* RFC 3629 section 4: the length of the well-formed sequence at s[0..n), or 0. */
static size_t ref_char(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c <= 0x7f)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;   /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c == 0xe0)
        len = 3, lo = 0xa0;
    else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef)
        len = 3;
    else if (c == 0xed)
        len = 3, hi = 0x9f;
    else if (c == 0xf0)
        len = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3)
        len = 4;
    else if (c == 0xf4)
        len = 4, hi = 0x8f;
    else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return len;
}

static bool ref_ok(const unsigned char *s, size_t n, bool nul_ok)
{
    for (size_t i = 0; i < n;) {
        if (s[i] == 0 && !nul_ok)
            return false;
        size_t len = ref_char(s + i, n - i);
        if (!len)
            return false;
        i += len;
    }
    return true;
}

static void check(const unsigned char *s, size_t n)
{
    bool u = codec_utf8_ok(s, n), t = codec_text_ok(s, n);
    if (u != ref_ok(s, n, true) || t != ref_ok(s, n, false)) {
        char hex[3 * 64 + 1] = "";
        for (size_t i = 0; i < n && i < 64; i++)
            snprintf(hex + 3 * i, 4, "%02x ", s[i]);
        fail_msg("%zu bytes %s: utf8_ok %d text_ok %d", n, hex, u, t);
    }
}

static void test_short_strings(void **state)
{
    (void)state;
    unsigned char s[4];
    for (unsigned a = 0; a < 256; a++) {
        s[0] = (unsigned char)a;
        check(s, 1);
        for (unsigned b = 0; b < 256; b++) {
            s[1] = (unsigned char)b;
            check(s, 2);
            for (unsigned c = 0; c < 256; c++) {
                s[2] = (unsigned char)c;
                check(s, 3);
            }
        }
    }
    for (unsigned a = 0xf0; a <= 0xf4; a++)
        for (unsigned b = 0x80; b < 0xc0; b++)
            for (unsigned c = 0x70; c < 0xd0; c++)
                for (unsigned d = 0x70; d < 0xd0; d++) {
                    s[0] = (unsigned char)a, s[1] = (unsigned char)b, s[2] = (unsigned char)c, s[3] = (unsigned char)d;
                    check(s, 4);
                }
}

static void test_random_strings(void **state)
{
    (void)state;
    static const char *const pieces[] = { "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\x9f\xbf",
                                          "\xed\xa0\x80", "\xc0\xaf", "\xe0\x80\xaf", "\xf4\x90\x80\x80",
                                          "\x80", "\xff", "\xc3", "\xe2\x82" };
    rng_t r;
    rng_seed(&r, 8);
    unsigned char s[80];
    for (int round = 0; round < 300000; round++) {
        size_t n = 0, want = rng_below(&r, sizeof(s) - 8);
        while (n < want) {
            uint64_t kind = rng_below(&r, 10);
            if (kind < 7) {   /* an ASCII run */
                size_t run = rng_below(&r, 20);
                for (size_t k = 0; k < run && n < want; k++)
                    s[n++] = (unsigned char)(0x20 + rng_below(&r, 0x5f));
            } else if (kind < 9) {
                const char *p = pieces[rng_below(&r, sizeof(pieces) / sizeof(pieces[0]))];
                size_t len = strlen(p);
                if (n + len <= sizeof(s)) {
                    memcpy(s + n, p, len);
                    n += len;
                }
            } else {
                s[n++] = (unsigned char)rng_below(&r, 3) == 0 ? 0 : (unsigned char)rng_below(&r, 256);
            }
        }
        check(s, n);
        /* every suffix and prefix moves the eight-byte steps */
        size_t cut = n ? rng_below(&r, n) : 0;
        check(s + cut, n - cut);
        check(s, cut);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_strings),
        cmocka_unit_test(test_random_strings),
    };
    return cmocka_run_group_tests_name("utf8", tests, NULL, NULL);
}
