/*
 * test_cidr.c - address ranges and the client address behind proxies:
 * parsing (IPv4, IPv6, single hosts, bad entries named), matching at
 * prefix boundaries, IPv4 seen as IPv4-mapped IPv6, and the rightmost
 * untrusted X-Forwarded-For rule against forged headers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/cidr.h"

static bool in(const cidr_set_t *s, const char *addr) { return cidr_contains_text(s, addr, strlen(addr)); }

/* The client address as a NUL-terminated string (static buffer). */
static const char *client(const cidr_set_t *t, const char *peer, const char *xff, const char *real_ip)
{
    static char out[128];
    size_t n;
    const char *v = cidr_client_addr(t, peer, xff, real_ip, &n);
    if (!v)
        return "(none)";
    snprintf(out, sizeof(out), "%.*s", (int)n, v);
    return out;
}

static void test_parse_and_match(void **state)
{
    (void)state;
    cidr_set_t s;
    char err[160];
    assert_true(cidr_parse(" 10.0.0.0/8, 192.168.1.7 ,fd00::/8,::1, 172.16.0.0/12", &s, err, sizeof(err)));
    assert_int_equal(s.n, 5);
    assert_true(in(&s, "10.0.0.1"));
    assert_true(in(&s, "10.255.255.255"));
    assert_false(in(&s, "11.0.0.0"));
    assert_false(in(&s, "9.255.255.255"));
    assert_true(in(&s, "192.168.1.7"));
    assert_false(in(&s, "192.168.1.8"));
    assert_true(in(&s, "172.31.255.255"));
    assert_false(in(&s, "172.32.0.0"));
    assert_true(in(&s, "fd12:3456::1"));
    assert_false(in(&s, "fe80::1"));
    assert_true(in(&s, "::1"));
    assert_false(in(&s, "::2"));
    /* an IPv6 socket reports IPv4 peers mapped */
    assert_true(in(&s, "::ffff:10.1.2.3"));
    assert_false(in(&s, "not-an-address"));
    assert_false(in(&s, ""));
    cidr_set_free(&s);
}

static void test_edges(void **state)
{
    (void)state;
    cidr_set_t s;
    char err[160];
    assert_true(cidr_parse("0.0.0.0/0", &s, err, sizeof(err)));
    assert_true(in(&s, "1.2.3.4"));
    assert_false(in(&s, "2001:db8::1"));   /* IPv4 /0 is every IPv4 address only */
    cidr_set_free(&s);
    assert_true(cidr_parse("::/0", &s, err, sizeof(err)));
    assert_true(in(&s, "2001:db8::1"));
    assert_true(in(&s, "1.2.3.4"));
    cidr_set_free(&s);
    assert_true(cidr_parse("10.1.2.3/31", &s, err, sizeof(err)));   /* host bits cleared */
    assert_true(in(&s, "10.1.2.2"));
    assert_true(in(&s, "10.1.2.3"));
    assert_false(in(&s, "10.1.2.4"));
    cidr_set_free(&s);
    assert_true(cidr_parse("2001:db8::/33", &s, err, sizeof(err)));
    assert_true(in(&s, "2001:db8:7fff::1"));
    assert_false(in(&s, "2001:db8:8000::1"));
    cidr_set_free(&s);
    assert_true(cidr_parse("", &s, err, sizeof(err)));
    assert_int_equal(s.n, 0);
    assert_false(in(&s, "127.0.0.1"));
    cidr_set_free(&s);
}

static void test_bad_entries(void **state)
{
    (void)state;
    static const char *const bad[] = { "10.0.0.0/33", "::1/129", "10.0.0.0/", "10.0.0/8", "example.com",
                                       "10.0.0.0/8x", "1.2.3.4, nope", "[::1]", "10.0.0.0/-1" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cidr_set_t s;
        char err[160] = "";
        assert_false(cidr_parse(bad[i], &s, err, sizeof(err)));
        assert_int_equal(s.n, 0);
        assert_non_null(strstr(err, "is not an IPv4 or IPv6 address"));
    }
}

static void test_client_address(void **state)
{
    (void)state;
    cidr_set_t t, none = { NULL, 0 };
    char err[160];
    assert_true(cidr_parse("127.0.0.1, 10.0.0.0/8, ::1", &t, err, sizeof(err)));
    /* no trusted proxies: the peer, whatever the headers say */
    assert_string_equal(client(&none, "127.0.0.1", "6.6.6.6", "7.7.7.7"), "127.0.0.1");
    /* an untrusted peer: its forwarding headers are ignored */
    assert_string_equal(client(&t, "203.0.113.9", "6.6.6.6", "7.7.7.7"), "203.0.113.9");
    /* a trusted peer: the rightmost untrusted entry; a forged left part is skipped */
    assert_string_equal(client(&t, "127.0.0.1", "6.6.6.6, 203.0.113.7", NULL), "203.0.113.7");
    assert_string_equal(client(&t, "127.0.0.1", "6.6.6.6,203.0.113.7, 10.0.0.2", NULL), "203.0.113.7");
    assert_string_equal(client(&t, "::1", "203.0.113.7 ,::1", NULL), "203.0.113.7");
    assert_string_equal(client(&t, "::ffff:127.0.0.1", "2001:db8::5", NULL), "2001:db8::5");
    /* every entry trusted: the leftmost */
    assert_string_equal(client(&t, "127.0.0.1", "10.0.0.5, 10.0.0.2", NULL), "10.0.0.5");
    /* empty entries are skipped; garbage where the client should be is what it is */
    assert_string_equal(client(&t, "127.0.0.1", " , 198.51.100.1,, ", NULL), "198.51.100.1");
    assert_string_equal(client(&t, "127.0.0.1", "1.1.1.1, unknown, 10.0.0.2", NULL), "unknown");
    /* no X-Forwarded-For: X-Real-IP from a trusted peer, else the peer */
    assert_string_equal(client(&t, "127.0.0.1", NULL, " 198.51.100.2 "), "198.51.100.2");
    assert_string_equal(client(&t, "127.0.0.1", "", ""), "127.0.0.1");
    assert_string_equal(client(&t, "127.0.0.1", " , ", NULL), "127.0.0.1");
    assert_string_equal(client(&t, NULL, "1.2.3.4", NULL), "(none)");
    cidr_set_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_match),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_client_address),
    };
    return cmocka_run_group_tests_name("cidr", tests, NULL, NULL);
}
