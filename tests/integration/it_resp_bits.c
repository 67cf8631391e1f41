/*
 * it_resp_bits.c - the Redis port's string and bitmap commands (redis/
 * cmds_bits.c): SET and its options, APPEND, STRLEN, SETRANGE, GETRANGE,
 * SUBSTR, MGET, SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD,
 * BITFIELD_RO, sent to redis-server and to tally and compared byte for
 * byte (RESP2 and RESP3), with their errors; the seed transcript's
 * BITFIELD session through redis-cli; python3-redis's helpers; the new
 * records (SET's options, SETRANGE/APPEND) replayed from the journal.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "redis_ref.h"
#include "resp_client.h"

RESP_SUITE_REF("--max-answer-size", "1mb", NULL)

/* A key of a type Redis does not keep in a string, on each side: a geo
 * set (tally's over HTTP, Redis's by GEOADD). */
static void make_geo(const char *key)
{
    char path[128];
    snprintf(path, sizeof(path), "/geo/%s", key);
    http_expect(&T, "POST", path, "{\"members\":[{\"member\":\"m\",\"lon\":13.36,\"lat\":38.11}]}", 200, NULL);
    resp_free(redis_cmd(&R, "GEOADD", key, "13.36", "38.11", "m", NULL));
}

/* The commands of the differential tests, every key under prefix p (each
 * test its own keys: both servers keep what earlier tests wrote). */
static void commands(buf_t *b, const char *p)
{
    char w[64], n[64], e[64], s[64], a1[64], a2[64], d[64], g[64], miss[64], c[64], bb[64], x[64];
#define K(v, name) snprintf(v, sizeof(v), "%s%s", p, name)
    K(w, "w");
    K(n, "n");
    K(e, "e");
    K(s, "s");
    K(a1, "a1");
    K(a2, "a2");
    K(d, "d");
    K(g, "geo");
    K(miss, "missing");
    K(c, "c");
    K(bb, "b");
    K(x, "x");
#undef K
    /* the seed transcript's session */
    mb(b, "SET", w, "hello", NULL);
    mb(b, "BITFIELD", w, "GET", "u4", "0", NULL);
    mb(b, "BITFIELD", w, "GET", "u3", "2", NULL);
    mb(b, "BITFIELD", w, "GET", "i3", "2", NULL);
    mb(b, "BITFIELD", w, "INCRBY", "u4", "2", "1", NULL);
    mb(b, "BITFIELD", w, "INCRBY", "u4", "2", NULL);
    for (int i = 0; i < 6; i++)
        mb(b, "bitfield", w, "incrby", "u4", "2", "1", NULL);
    mb(b, "GET", w, NULL);
    /* GET, STRLEN, GETRANGE, SUBSTR */
    mb(b, "STRLEN", w, NULL);
    mb(b, "STRLEN", miss, NULL);
    mb(b, "STRLEN", g, NULL);
    mb(b, "GETRANGE", w, "0", "2", NULL);
    mb(b, "GETRANGE", w, "-3", "-1", NULL);
    mb(b, "GETRANGE", w, "-1", "-3", NULL);
    mb(b, "GETRANGE", w, "5", "2", NULL);
    mb(b, "GETRANGE", w, "-100", "100", NULL);
    mb(b, "GETRANGE", w, "0", "-100", NULL);
    mb(b, "GETRANGE", miss, "0", "-1", NULL);
    mb(b, "GETRANGE", w, "x", "1", NULL);
    mb(b, "GETRANGE", w, "1", "99999999999999999999", NULL);
    mb(b, "GETRANGE", g, "0", "1", NULL);
    mb(b, "GETRANGE", w, "0", NULL);
    mb(b, "SUBSTR", w, "1", "3", NULL);
    mb(b, "GET", g, NULL);
    /* APPEND, SETRANGE */
    mb(b, "APPEND", w, " world", NULL);
    mb(b, "APPEND", x, "abc", NULL);
    mb(b, "APPEND", x, "", NULL);
    mb(b, "APPEND", g, "x", NULL);
    mb(b, "APPEND", x, NULL);
    mb(b, "GET", x, NULL);
    mb(b, "SETRANGE", w, "0", "J", NULL);
    mb(b, "SETRANGE", w, "20", "z\x01", NULL);
    mb(b, "GET", w, NULL);
    mb(b, "SETRANGE", s, "5", "", NULL);
    mb(b, "EXISTS", s, NULL);
    mb(b, "SETRANGE", s, "3", "ab", NULL);
    mb(b, "GET", s, NULL);
    mb(b, "SETRANGE", s, "-1", "x", NULL);
    mb(b, "SETRANGE", s, "x", "x", NULL);
    mb(b, "SETRANGE", s, "536870912", "x", NULL);
    mb(b, "SETRANGE", s, "536870911", "xy", NULL);
    mb(b, "SETRANGE", s, "536870911", "", NULL);
    mb(b, "SETRANGE", s, "99999999999", "", NULL);
    mb(b, "SETRANGE", miss, "99999999999", "", NULL);
    mb(b, "SETRANGE", g, "0", "x", NULL);
    mb(b, "SETRANGE", s, "0", NULL);
    /* SETBIT, GETBIT */
    mb(b, "SETBIT", bb, "7", "1", NULL);
    mb(b, "SETBIT", bb, "7", "0", NULL);
    mb(b, "SETBIT", bb, "100", "1", NULL);
    mb(b, "SETBIT", bb, "7", "2", NULL);
    mb(b, "SETBIT", bb, "7", "-1", NULL);
    mb(b, "SETBIT", bb, "7", "x", NULL);
    mb(b, "SETBIT", bb, "-1", "1", NULL);
    mb(b, "SETBIT", bb, "4294967296", "1", NULL);
    mb(b, "SETBIT", bb, "x", "1", NULL);
    mb(b, "SETBIT", g, "1", "1", NULL);
    mb(b, "SETBIT", bb, "1", NULL);
    mb(b, "GET", bb, NULL);
    mb(b, "GETBIT", bb, "100", NULL);
    mb(b, "GETBIT", bb, "101", NULL);
    mb(b, "GETBIT", bb, "4294967295", NULL);
    mb(b, "GETBIT", bb, "4294967296", NULL);
    mb(b, "GETBIT", bb, "#1", NULL);
    mb(b, "GETBIT", miss, "3", NULL);
    mb(b, "GETBIT", g, "3", NULL);
    /* BITCOUNT */
    mb(b, "BITCOUNT", w, NULL);
    mb(b, "BITCOUNT", w, "0", "0", NULL);
    mb(b, "BITCOUNT", w, "1", "-1", "BIT", NULL);
    mb(b, "BITCOUNT", w, "1", "-1", "byte", NULL);
    mb(b, "BITCOUNT", w, "5", "30", "bit", NULL);
    mb(b, "BITCOUNT", w, "-5", "-1", NULL);
    mb(b, "BITCOUNT", w, "3", "1", NULL);
    mb(b, "BITCOUNT", w, "1", "-1", "foo", NULL);
    mb(b, "BITCOUNT", w, "1", NULL);
    mb(b, "BITCOUNT", w, "1", "2", "bit", "x", NULL);
    mb(b, "BITCOUNT", w, "x", "y", NULL);
    mb(b, "BITCOUNT", miss, "x", "y", NULL);
    mb(b, "BITCOUNT", miss, "1", NULL);
    mb(b, "BITCOUNT", miss, NULL);
    mb(b, "BITCOUNT", g, NULL);
    mb(b, "BITCOUNT", g, "1", NULL);
    /* BITPOS */
    mb(b, "BITPOS", w, "1", NULL);
    mb(b, "BITPOS", w, "0", NULL);
    mb(b, "BITPOS", w, "1", "2", NULL);
    mb(b, "BITPOS", w, "1", "2", "-1", "BIT", NULL);
    mb(b, "BITPOS", w, "0", "0", "-1", "byte", NULL);
    mb(b, "BITPOS", w, "1", "100", NULL);
    mb(b, "BITPOS", w, "2", NULL);
    mb(b, "BITPOS", w, "x", NULL);
    mb(b, "BITPOS", w, "1", "x", NULL);
    mb(b, "BITPOS", w, "1", "0", "x", NULL);
    mb(b, "BITPOS", w, "1", "0", "x", "foo", NULL);
    mb(b, "BITPOS", w, "1", "0", "x", "bit", NULL);
    mb(b, "BITPOS", w, "1", "0", "1", "2", "3", NULL);
    mb(b, "BITPOS", miss, "1", "x", NULL);
    mb(b, "BITPOS", miss, "0", NULL);
    mb(b, "BITPOS", miss, "1", NULL);
    mb(b, "BITPOS", miss, "0", "0", "1", "2", "3", NULL);
    mb(b, "BITPOS", g, "1", NULL);
    mb(b, "SET", e, "\xff\xff", NULL);
    mb(b, "BITPOS", e, "0", NULL);
    mb(b, "BITPOS", e, "0", "0", "-1", NULL);
    mb(b, "SET", e, "", NULL);
    mb(b, "BITPOS", e, "0", NULL);
    mb(b, "BITPOS", e, "1", NULL);
    mb(b, "STRLEN", e, NULL);
    mb(b, "GETRANGE", e, "0", "-1", NULL);
    mb(b, "BITCOUNT", e, NULL);
    /* BITOP */
    mb(b, "SET", a1, "abc", NULL);
    mb(b, "SET", a2, "xyzzy", NULL);
    mb(b, "BITOP", "AND", d, a1, a2, NULL);
    mb(b, "GET", d, NULL);
    mb(b, "BITOP", "or", d, a1, a2, miss, NULL);
    mb(b, "GET", d, NULL);
    mb(b, "BITOP", "Xor", d, a1, a2, a1, NULL);
    mb(b, "GET", d, NULL);
    mb(b, "BITOP", "XOR", d, a1, a1, NULL);
    mb(b, "GET", d, NULL);
    mb(b, "BITOP", "NOT", d, a1, NULL);
    mb(b, "GET", d, NULL);
    mb(b, "BITOP", "NOT", d, a1, a2, NULL);
    mb(b, "BITOP", "NAND", d, a1, NULL);
    mb(b, "BITOP", "AND", d, NULL);
    mb(b, "BITOP", "AND", d, miss, NULL);
    mb(b, "EXISTS", d, NULL);
    mb(b, "BITOP", "AND", d, a1, g, NULL);
    /* BITFIELD, BITFIELD_RO */
    mb(b, "BITFIELD", w, "SET", "u8", "0", "255", "GET", "u8", "0", NULL);
    mb(b, "BITFIELD", w, "OVERFLOW", "SAT", "INCRBY", "u8", "0", "10", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "10",
       "OVERFLOW", "WRAP", "INCRBY", "u8", "0", "10", NULL);
    mb(b, "BITFIELD", w, "overflow", "sat", "set", "i8", "#1", "-200", "overflow", "fail", "set", "i8", "#1", "200",
       "get", "i8", "#1", NULL);
    mb(b, "BITFIELD", w, "SET", "i64", "100", "-9223372036854775808", "INCRBY", "i64", "100", "-1", NULL);
    mb(b, "BITFIELD", w, "GET", "u63", "100", "GET", "i64", "100", "GET", "i1", "100", NULL);
    mb(b, "BITFIELD", w, "OVERFLOW", "foo", "GET", "u8", "0", NULL);
    mb(b, "BITFIELD", w, "OVERFLOW", NULL);
    mb(b, "BITFIELD", w, "GET", "u64", "0", NULL);
    mb(b, "BITFIELD", w, "GET", "i65", "0", NULL);
    mb(b, "BITFIELD", w, "GET", "x8", "0", NULL);
    mb(b, "BITFIELD", w, "GET", "u8", "#1", "GET", "u8", "#0", NULL);
    mb(b, "BITFIELD", w, "GET", "u8", "#x", NULL);
    mb(b, "BITFIELD", w, "GET", "u8", "#-1", NULL);
    mb(b, "BITFIELD", w, "GET", "u8", "-1", NULL);
    mb(b, "BITFIELD", w, "GET", "u8", "4294967296", NULL);
    mb(b, "BITFIELD", w, "GET", "u8", "#536870912", NULL);
    mb(b, "BITFIELD", w, "SET", "i8", "#2", "x", NULL);
    mb(b, "BITFIELD", w, "FOO", NULL);
    mb(b, "BITFIELD", w, "GET", "u8", NULL);
    mb(b, "BITFIELD", w, "SET", "u8", "0", NULL);
    mb(b, "BITFIELD", w, NULL);
    mb(b, "BITFIELD", miss, "GET", "u8", "0", NULL);
    mb(b, "EXISTS", miss, NULL);
    mb(b, "BITFIELD", miss, NULL);
    mb(b, "BITFIELD", g, "GET", "u8", "0", NULL);
    mb(b, "BITFIELD", g, "SET", "u8", "0", "1", NULL);
    mb(b, "BITFIELD", g, "GET", "u99", "0", NULL);
    mb(b, "BITFIELD_RO", w, "GET", "u8", "0", "get", "i4", "#3", NULL);
    mb(b, "BITFIELD_RO", w, "SET", "u8", "0", "1", NULL);
    mb(b, "BITFIELD_RO", w, "OVERFLOW", "SAT", "GET", "u8", "0", NULL);
    mb(b, "BITFIELD_RO", w, "GET", "u8", NULL);
    mb(b, "BITFIELD_RO", miss, "GET", "u8", "0", NULL);
    mb(b, "BITFIELD_RO", g, "GET", "u8", "0", NULL);
    mb(b, "BITFIELD_RO", w, NULL);
    mb(b, "GET", w, NULL);
    /* counters are Redis strings: SET of an integer, INCR, reads of the digits */
    mb(b, "SET", n, "10", NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "GET", n, NULL);
    mb(b, "STRLEN", n, NULL);
    mb(b, "GETRANGE", n, "0", "0", NULL);
    mb(b, "GETBIT", n, "2", NULL);
    mb(b, "BITCOUNT", n, NULL);
    mb(b, "BITPOS", n, "1", NULL);
    mb(b, "BITFIELD_RO", n, "GET", "u8", "0", NULL);
    mb(b, "BITFIELD", n, "GET", "u16", "0", NULL);
    mb(b, "SET", n, "-9223372036854775808", NULL);
    mb(b, "DECR", n, NULL);
    mb(b, "SET", n, "9223372036854775807", NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "GET", n, NULL);
    mb(b, "SET", n, "007", NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "SET", n, "-0", NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "SET", n, "+1", NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "SET", n, "99999999999999999999", NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "SET", n, "-12", "GET", NULL);
    mb(b, "SET", n, "text", "GET", NULL);
    mb(b, "SET", n, "5", "GET", NULL);
    /* APPEND and SETRANGE change a counter's digits */
    mb(b, "SET", n, "10", NULL);
    mb(b, "APPEND", n, "5", NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "SETRANGE", n, "0", "9", NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "APPEND", n, "", NULL);
    mb(b, "SETRANGE", n, "99", "", NULL);
    mb(b, "SETRANGE", n, "5", "1", NULL);
    mb(b, "GET", n, NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "SET", n, "5", "EX", "100", NULL);
    mb(b, "APPEND", n, "0", NULL);
    mb(b, "TTL", n, NULL);
    mb(b, "SETRANGE", n, "0", "a", NULL);
    mb(b, "TTL", n, NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "GET", n, NULL);
    mb(b, "SET", n, "-5", NULL);
    mb(b, "SETRANGE", n, "0", "0", NULL);
    mb(b, "INCR", n, NULL);
    mb(b, "SET", n, "-5", NULL);
    mb(b, "SETRANGE", n, "536870912", "x", NULL);
    mb(b, "APPEND", n, "x", NULL);
    mb(b, "GET", n, NULL);
    mb(b, "SET", n, "5", NULL);
    mb(b, "MGET", n, w, miss, g, a1, NULL);
    mb(b, "MGET", miss, NULL);
    /* SET's options */
    mb(b, "SET", s, "v1", "NX", NULL);
    mb(b, "SET", s, "v2", "nx", NULL);
    mb(b, "SET", s, "v3", "XX", NULL);
    mb(b, "GET", s, NULL);
    mb(b, "SET", c, "v", "XX", NULL);
    mb(b, "EXISTS", c, NULL);
    mb(b, "SET", s, "v4", "GET", NULL);
    mb(b, "SET", c, "v", "GET", NULL);
    mb(b, "SET", s, "v5", "NX", "GET", NULL);
    mb(b, "SET", c, "v6", "NX", "GET", NULL);
    mb(b, "SET", c, "v7", "XX", "GET", NULL);
    mb(b, "SET", g, "v", "GET", NULL);
    mb(b, "SET", s, "v", "NX", "XX", NULL);
    mb(b, "SET", s, "v", "XX", "NX", NULL);
    mb(b, "SET", s, "v", "EX", "10", "PX", "100", NULL);
    mb(b, "SET", s, "v", "KEEPTTL", "EX", "10", NULL);
    mb(b, "SET", s, "v", "EX", "10", "KEEPTTL", NULL);
    mb(b, "SET", s, "v", "EX", "0", NULL);
    mb(b, "SET", s, "v", "EX", "-5", NULL);
    mb(b, "SET", s, "v", "PX", "0", NULL);
    mb(b, "SET", s, "v", "EXAT", "0", NULL);
    mb(b, "SET", s, "v", "EX", "abc", NULL);
    mb(b, "SET", s, "v", "EX", "abc", "NX", "XX", NULL);
    mb(b, "SET", s, "v", "PX", "9223372036854775807", NULL);
    mb(b, "SET", s, "v", "EX", "9223372036854776", NULL);
    mb(b, "SET", s, "v", "EX", NULL);
    mb(b, "SET", s, "v", "FOO", NULL);
    mb(b, "SET", s, NULL);
    mb(b, "SET", s, "v", "EX", "100", NULL);
    mb(b, "TTL", s, NULL);
    mb(b, "SET", s, "v2", "KEEPTTL", NULL);
    mb(b, "TTL", s, NULL);
    mb(b, "SET", s, "12", "KEEPTTL", NULL);
    mb(b, "TTL", s, NULL);
    mb(b, "INCR", s, NULL);
    mb(b, "TTL", s, NULL);
    mb(b, "SET", s, "v3", NULL);
    mb(b, "TTL", s, NULL);
    mb(b, "SET", s, "v", "px", "200000", NULL);
    mb(b, "TTL", s, NULL);
    mb(b, "SET", s, "v", "EXAT", "1", NULL);
    mb(b, "EXISTS", s, NULL);
    mb(b, "SET", s, "v", "PXAT", "1", "GET", NULL);
    mb(b, "SET", s, "v", "PXAT", "1", "GET", NULL);
    mb(b, "SET", s, "7", "EXAT", "1", NULL);
    mb(b, "EXISTS", s, NULL);
    /* SETNX, SETEX, PSETEX, GETSET */
    mb(b, "SETNX", c, "1", NULL);
    mb(b, "SETNX", c, "2", NULL);
    mb(b, "GET", c, NULL);
    mb(b, "SETEX", c, "100", "v", NULL);
    mb(b, "TTL", c, NULL);
    mb(b, "GETSET", c, "w", NULL);
    mb(b, "TTL", c, NULL);
    mb(b, "GETSET", miss, "w", NULL);
    mb(b, "GETSET", miss, "7", NULL);
    mb(b, "INCR", miss, NULL);
    mb(b, "DEL", miss, NULL);
    mb(b, "GETSET", g, "w", NULL);
    mb(b, "PSETEX", c, "100000", "12", NULL);
    mb(b, "TTL", c, NULL);
    mb(b, "INCR", c, NULL);
    mb(b, "SETEX", c, "0", "v", NULL);
    mb(b, "SETEX", c, "x", "v", NULL);
    mb(b, "SETEX", c, "9223372036854776", "v", NULL);
    mb(b, "PSETEX", c, "-1", "v", NULL);
    mb(b, "SETEX", c, "10", NULL);
    mb(b, "SETNX", c, NULL);
    mb(b, "GETSET", c, NULL);
    /* arity */
    mb(b, "SETBIT", bb, NULL);
    mb(b, "GETBIT", bb, NULL);
    mb(b, "BITOP", "AND", NULL);
    mb(b, "BITCOUNT", NULL);
    mb(b, "BITPOS", bb, NULL);
    mb(b, "STRLEN", NULL);
    mb(b, "MGET", NULL);
    mb(b, "GETRANGE", w, "0", "1", "2", NULL);
    mb(b, "SUBSTR", w, NULL);
    mb(b, "BITFIELD_RO", NULL);
}

static void test_differential_resp2(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    make_geo("r2:geo");
    buf_t b = { 0 };
    commands(&b, "r2:");
    resp_diff(R.port, T.resp_port, &b);
    free(b.p);
}

/* After HELLO 3: RESP3's nulls (GET, SET NX, BITFIELD's FAIL, MGET)
 * compared the same way, HELLO's own map (the server's name, version, id)
 * left out. */
static void test_differential_resp3(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    make_geo("r3:geo");
    buf_t b = { 0 };
    commands(&b, "r3:");
    buf_t got = resp3_diff(R.port, T.resp_port, &b);
    assert_non_null(memmem(got.p, got.len, "_\r\n", 3));   /* RESP3's null was exercised */
    free(got.p);
    free(b.p);
}

/* The seed transcript (../shared/seeds/000_*.txt): SET, then BITFIELD GET
 * and INCRBY through redis-cli, printed as shown there. */
static void test_seed_redis_cli(void **state)
{
    (void)state;
    static const cli_case_t cases[] = {
        { "set w hello", "OK\n" },
        { "bitfield w get u4 0", "1) (integer) 6\n" },
        { "bitfield w get u3 2", "1) (integer) 5\n" },
        { "bitfield w get i3 2", "1) (integer) -3\n" },
        { "bitfield w incrby u4 2 1", "1) (integer) 11\n" },
        { "bitfield w incrby u4 2", "(error) ERR syntax error\n" },
        { "bitfield w incrby u4 2 1", "1) (integer) 12\n" },
        { "bitfield w incrby u4 2 1", "1) (integer) 13\n" },
        { "bitfield w incrby u4 2 1", "1) (integer) 14\n" },
        { "bitfield w incrby u4 2 1", "1) (integer) 15\n" },
        { "bitfield w incrby u4 2 1", "1) (integer) 0\n" },
        { "bitfield w incrby u4 2 1", "1) (integer) 1\n" },
        { "bitfield w incrby u4 2 1", "1) (integer) 2\n" },
        { "bitfield w incrby u4 2 1", "1) (integer) 3\n" },
        { "bitfield w overflow fail incrby u4 2 100 get u4 2", "1) (nil)\n2) (integer) 3\n" },
        { "set n 41", "OK\n" },
        { "incr n", "(integer) 42\n" },
        { "strlen n", "(integer) 2\n" },
        { "set n 1 nx", "(nil)\n" },
    };
    /* redis-cli prints as on a terminal when told: "(integer) 6", "1) ..." */
    cli_expect(T.resp_port, "--no-raw", cases, sizeof(cases) / sizeof(cases[0]));
}

/* Python's redis package (Debian's python3-redis 4.3.4): its string and
 * bitmap helpers. */
static void test_python(void **state)
{
    (void)state;
    if (!have_python_redis())
        skip();
    char script[] =
        "import redis, sys\n"
        "r = redis.Redis(port=int(sys.argv[1]))\n"
        "assert r.set('py:s', 'hello') is True\n"
        "assert r.get('py:s') == b'hello'\n"
        "assert r.set('py:s', 'x', nx=True) is None\n"
        "assert r.set('py:s', 'hello!', xx=True, ex=100) is True\n"
        "assert r.ttl('py:s') == 100\n"
        "assert r.set('py:s', 'hello', keepttl=True) is True and r.ttl('py:s') == 100\n"
        "assert r.set('py:s', 'hey', get=True) == b'hello'\n"
        "assert r.set('py:s', 'hello', px=100000) is True\n"
        "assert r.strlen('py:s') == 5\n"
        "assert r.append('py:s', ' world') == 11\n"
        "assert r.setrange('py:s', 0, 'J') == 11\n"
        "assert r.getrange('py:s', 0, 4) == b'Jello'\n"
        "assert r.substr('py:s', -5) == b'world'\n"
        "assert r.setbit('py:b', 7, 1) == 0\n"
        "assert r.setbit('py:b', 7, 1) == 1\n"
        "assert r.getbit('py:b', 7) == 1 and r.getbit('py:b', 6) == 0\n"
        "r.setbit('py:b', 100, 1)\n"
        "assert r.bitcount('py:b') == 2\n"
        "assert r.bitcount('py:b', 0, 0) == 1\n"
        "assert r.bitcount('py:b', 8, 100, 'BIT') == 1\n"
        "assert r.bitpos('py:b', 1) == 7\n"
        "assert r.bitpos('py:b', 1, 1) == 100\n"
        "assert r.bitpos('py:b', 1, 8, -1, 'BIT') == 100\n"
        "r.set('py:a', 'abc')\n"
        "r.set('py:c', 'xyz')\n"
        "assert r.bitop('AND', 'py:d', 'py:a', 'py:c') == 3\n"
        "assert r.get('py:d') == bytes(x & y for x, y in zip(b'abc', b'xyz'))\n"
        "assert r.bitop('NOT', 'py:d', 'py:a') == 3\n"
        "assert r.get('py:d') == bytes(255 - x for x in b'abc')\n"
        "r.set('w', 'hello')\n"
        "assert r.bitfield('w').get('u4', 0).get('u3', 2).get('i3', 2).execute() == [6, 5, -3]\n"
        "res = r.bitfield('py:f', default_overflow='SAT').incrby('u8', '#0', 200).incrby('u8', '#0', 200)"
        ".overflow('FAIL').incrby('u8', '#0', 1).set('i8', 8, -1).execute()\n"
        "assert res == [200, 255, None, 0], res\n"
        "assert r.execute_command('BITFIELD_RO', 'py:f', 'GET', 'u8', 0, 'GET', 'i8', 8) == [255, -1]\n"
        "try:\n"
        "    r.bitfield('py:f').get('u64', 0).execute()\n"
        "    raise SystemExit('no error')\n"
        "except redis.ResponseError as e:\n"
        "    assert 'Invalid bitfield type' in str(e), e\n"
        "assert r.set('py:n', 10) is True\n"
        "assert r.incr('py:n') == 11 and r.get('py:n') == b'11'\n"
        "assert r.mget('py:n', 'py:s', 'py:none') == [b'11', b'Jello world', None]\n"
        "assert r.setnx('py:x', 1) is True and r.setnx('py:x', 2) is False\n"
        "assert r.setex('py:x', 100, 'v') is True and r.ttl('py:x') == 100\n"
        "assert r.psetex('py:x', 100000, 'w') is True and r.getset('py:x', 'z') == b'w'\n"
        "assert r.ttl('py:x') == -1\n"
        "print('ok')\n";
    python_expect_ok(script, T.resp_port);
}

/* SET's new record (its options), SETRANGE's and APPEND's, replayed from
 * the journal after a crash. */
static void test_journal_replay(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--fsync", "always", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    buf_t b = { 0 };
    mb(&b, "SET", "j:s", "hello", "EX", "1000", NULL);
    mb(&b, "APPEND", "j:s", " world", NULL);
    mb(&b, "SETRANGE", "j:s", "0", "J", NULL);
    mb(&b, "SET", "j:n", "41", "PX", "2000000", NULL);
    mb(&b, "INCR", "j:n", NULL);
    mb(&b, "SET", "j:k", "a", "NX", NULL);
    mb(&b, "SET", "j:k", "b", "NX", NULL);
    mb(&b, "SET", "j:k", "c", "XX", "KEEPTTL", NULL);
    mb(&b, "SET", "j:gone", "x", NULL);
    mb(&b, "SET", "j:gone", "y", "PXAT", "1", NULL);
    mb(&b, "APPEND", "j:new", "abc", NULL);
    mb(&b, "SET", "j:c", "7", NULL);
    mb(&b, "APPEND", "j:c", "0", NULL);
    mb(&b, "SET", "j:c2", "7", NULL);
    mb(&b, "APPEND", "j:c2", "x", NULL);
    expect_reply(p.resp_port, &b, "+OK\r\n:11\r\n:11\r\n+OK\r\n:42\r\n+OK\r\n$-1\r\n+OK\r\n+OK\r\n+OK\r\n:3\r\n"
                                  "+OK\r\n:2\r\n+OK\r\n:2\r\n");
    tally_proc_t q;
    resp_restart(&p, &q, args);
    b.len = 0;
    mb(&b, "GET", "j:s", NULL);
    mb(&b, "GET", "j:n", NULL);
    mb(&b, "GET", "j:k", NULL);
    mb(&b, "EXISTS", "j:gone", NULL);
    mb(&b, "GET", "j:new", NULL);
    mb(&b, "TTL", "j:k", NULL);
    mb(&b, "INCR", "j:c", NULL);
    mb(&b, "GET", "j:c2", NULL);
    expect_reply(q.resp_port, &b, "$11\r\nJello world\r\n$2\r\n42\r\n$1\r\nc\r\n:0\r\n$3\r\nabc\r\n:-1\r\n"
                                  ":71\r\n$2\r\n7x\r\n");
    b.len = 0;
    mb(&b, "TTL", "j:s", NULL);
    mb(&b, "TTL", "j:n", NULL);
    buf_t got = exchange(q.resp_port, b.p, b.len);
    long long t1 = -9, t2 = -9;
    assert_int_equal(sscanf(got.p, ":%lld\r\n:%lld\r\n", &t1, &t2), 2);
    assert_true(t1 > 900 && t1 <= 1000);
    assert_true(t2 > 1900 && t2 <= 2000);
    free(got.p);
    free(b.p);
    resp_restart_end(&p, &q);
}

/* HTTP is unchanged: PUT /bits of digits stays a bit string, which the
 * Redis port reads as bytes (INCR on it answers "not an integer": only
 * the Redis port's SET makes a counter of digits; docs/redis.md). */
static void test_http_unchanged(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "PUT", "/bits/h:d", "123", "application/octet-stream");
    assert_int_equal(r.status, 200);
    http_free(&r);
    buf_t b = { 0 };
    mb(&b, "TYPE", "h:d", NULL);
    mb(&b, "GET", "h:d", NULL);
    mb(&b, "STRLEN", "h:d", NULL);
    mb(&b, "INCR", "h:d", NULL);
    expect_reply(T.resp_port, &b, "+string\r\n$3\r\n123\r\n:3\r\n-ERR value is not an integer or out of range\r\n");
    free(b.p);
}

/* tally's own answers where it differs from Redis on purpose (docs/
 * redis.md): a counter's bits changed, SET over a sketch; and the
 * size of one BITFIELD or BITOP, bounded by what a journal record holds. */
static void test_differences(void **state)
{
    (void)state;
    buf_t b = { 0 };
    mb(&b, "SET", "df:n", "5", NULL);
    mb(&b, "SETBIT", "df:n", "0", "1", NULL);
    mb(&b, "BITFIELD", "df:n", "SET", "u8", "0", "1", NULL);
    mb(&b, "BITOP", "NOT", "df:d", "df:n", NULL);
    mb(&b, "GET", "df:n", NULL);
    mb(&b, "PFADD", "df:h", "a", NULL);
    mb(&b, "SET", "df:h", "x", NULL);
    mb(&b, "SET", "df:h", "x", "GET", NULL);
    mb(&b, "GETBIT", "df:h", "0", NULL);
    buf_t got = exchange(T.resp_port, b.p, b.len);
#define WT "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    assert_string_equal(got.p, "+OK\r\n" WT WT WT "$1\r\n5\r\n:1\r\n" WT WT WT);
#undef WT
    free(got.p);
    /* a string longer than --max-answer-size: its length, and parts of it */
    b.len = 0;
    mb(&b, "SETRANGE", "df:long", "1100000", "x", NULL);
    mb(&b, "STRLEN", "df:long", NULL);
    mb(&b, "GETRANGE", "df:long", "1099999", "-1", NULL);
    mb(&b, "GET", "df:long", NULL);
    mb(&b, "GETRANGE", "df:long", "0", "-1", NULL);
    got = exchange(T.resp_port, b.p, b.len);
    static const char want[] = ":1100001\r\n:1100001\r\n$2\r\n\0x\r\n"
                               "-ERR the answer would take about 1100001 bytes, over --max-answer-size (1048576 bytes): "
                               "read the string in parts with GETRANGE\r\n"
                               "-ERR the answer would take about 1100001 bytes, over --max-answer-size (1048576 bytes): "
                               "read the string in parts with GETRANGE\r\n";
    assert_int_equal(got.len, sizeof(want) - 1);
    assert_memory_equal(got.p, want, sizeof(want) - 1);
    free(got.p);
    b.len = 0;
    buf_t big = { 0 };
    buf_puts(&big, "*40006\r\n$8\r\nBITFIELD\r\n$5\r\ndf:bf\r\n");
    for (int i = 0; i < 10001; i++)
        buf_puts(&big, "$3\r\nSET\r\n$2\r\nu8\r\n$1\r\n0\r\n$1\r\n1\r\n");
    mb(&b, "EXISTS", "df:bf", NULL);
    buf_put(&big, b.p, b.len);
    expect_reply(T.resp_port, &big, "-ERR BITFIELD: too large for one change (bad count: a change holds at most 10000 items, keys or operations)\r\n:0\r\n");
    big.len = 0;
    b.len = 0;
    buf_puts(&big, "*10004\r\n$5\r\nBITOP\r\n$2\r\nOR\r\n$5\r\ndf:bo\r\n");
    for (int i = 0; i < 10001; i++)
        buf_puts(&big, "$4\r\ndf:x\r\n");
    mb(&b, "EXISTS", "df:bo", NULL);
    buf_put(&big, b.p, b.len);
    expect_reply(T.resp_port, &big, "-ERR BITOP: too large for one change (bad sources: a change holds at most 10000 items, keys or operations)\r\n:0\r\n");
    free(big.p);
    free(b.p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_differential_resp2),
        cmocka_unit_test(test_differential_resp3),
        cmocka_unit_test(test_seed_redis_cli),
        cmocka_unit_test(test_python),
        cmocka_unit_test(test_journal_replay),
        cmocka_unit_test(test_http_unchanged),
        cmocka_unit_test(test_differences),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
