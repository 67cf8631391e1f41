/*
 * it_resp_sketch.c - RedisBloom's sketch commands on the Redis port
 * (redis/cmds_cms.c, cmds_topk.c, cmds_tdigest.c): CMS.*, TOPK.*,
 * TDIGEST.*, their replies byte for byte in RESP2 and RESP3 and their
 * errors in RedisBloom's words (the expectations are RedisBloom's own
 * tests': tests/flow/test_cms.py, test_topk.py, test_tdigest.py), Debian's
 * python3-redis helpers r.cms(), r.topk(), r.tdigest() (4.3.4, whose
 * T-Digest helpers speak RedisBloom 2.2's forms), and the same answers as
 * the HTTP routes on the same keys.
 */
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "resp_client.h"

RESP_SUITE(NULL)

/* Sends the commands on one connection (after HELLO 3 when proto is 3,
 * whose own reply is skipped) and compares every byte answered. */
static void check(const char *what, int proto, const buf_t *cmds, const char *want)
{
    buf_t got = exchange_proto(T.resp_port, proto, cmds);
    if (strcmp(got.p, want) != 0)
        fail_msg("%s (RESP%d):\ngot\n%s\nwant\n%s", what, proto, got.p, want);
    free(got.p);
}

/* The elements of an array reply of integers, bulk strings or doubles,
 * as text (at most max, each under 64 bytes); the count. */
static size_t elems(const char *p, char out[][64], size_t max)
{
    assert_int_equal(p[0], '*');
    size_t n = strtoul(p + 1, NULL, 10);
    assert_true(n <= max);
    p = strstr(p, "\r\n") + 2;
    for (size_t i = 0; i < n; i++) {
        const char *e = strstr(p, "\r\n");
        assert_non_null(e);
        if (strncmp(p, "$-1\r\n", 5) == 0) {
            strcpy(out[i], "(nil)");
            p = e + 2;
        } else if (*p == '$') {
            size_t len = strtoul(p + 1, NULL, 10);
            assert_true(len < 64);
            memcpy(out[i], e + 2, len);
            out[i][len] = '\0';
            p = e + 2 + len + 2;
        } else {
            size_t len = (size_t)(e - p - 1);
            assert_true(len < 64);
            memcpy(out[i], p + 1, len);
            out[i][len] = '\0';
            p = e + 2;
        }
    }
    return n;
}

/* One command's array reply, as text elements. */
static size_t ask(char out[][64], size_t max, const char *w0, ...)
{
    buf_t b = { 0 };
    const char *w[17];
    size_t n = 0;
    va_list ap;
    va_start(ap, w0);
    for (const char *s = w0; s && n < 16; s = va_arg(ap, const char *))
        w[n++] = s;
    va_end(ap);
    w[n] = NULL;
    mb_words(&b, w);
    buf_t got = exchange(T.resp_port, b.p, b.len);
    size_t k = elems(got.p, out, max);
    free(got.p);
    free(b.p);
    return k;
}

/* One command that answers +OK. */
static void ok(const char *w0, const char *w1, const char *w2)
{
    buf_t b = { 0 };
    mb(&b, w0, w1, w2, NULL);
    expect_reply(T.resp_port, &b, "+OK\r\n");
    free(b.p);
}

/* Redis's and RedisBloom's WRONGTYPE */
#define WRONGTYPE "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"

/* ------------------------------------------------------------------------ */
/* CMS.*                                                                    */
/* ------------------------------------------------------------------------ */

static void test_cms(void **state)
{
    (void)state;
    buf_t b = { 0 };
    mb(&b, "PFADD", "c:hll", "a", NULL);
    /* test_cms.py's test_simple */
    mb(&b, "CMS.INITBYDIM", "cms1", "20", "5", NULL);
    mb(&b, "CMS.INCRBY", "cms1", "a", "5", NULL);
    mb(&b, "CMS.QUERY", "cms1", "a", NULL);
    mb(&b, "CMS.INFO", "cms1", NULL);
    mb(&b, "CMS.INITBYPROB", "cms2", "0.001", "0.01", NULL);
    mb(&b, "CMS.INCRBY", "cms2", "a", "5", NULL);
    mb(&b, "CMS.QUERY", "cms2", "a", NULL);
    mb(&b, "CMS.INFO", "cms2", NULL);
    /* several items, an increment of 0 reading */
    mb(&b, "cms.incrby", "cms1", "b", "2", "a", "0", NULL);
    mb(&b, "CMS.QUERY", "cms1", "a", "b", "nope", NULL);
    /* test_validation */
    mb(&b, "CMS.INITBYDIM", "foo", NULL);
    mb(&b, "CMS.INITBYDIM", "foo", "10", NULL);
    mb(&b, "CMS.INITBYDIM", "foo", "0.1", "blah", NULL);
    mb(&b, "CMS.INITBYDIM", "foo", "10", "blah", NULL);
    mb(&b, "CMS.INITBYDIM", "foo", "0", "100", NULL);
    mb(&b, "CMS.INITBYDIM", "foo", "100", "0", NULL);
    mb(&b, "CMS.INITBYPROB", "foo", "1000", "0.1", NULL);
    mb(&b, "CMS.INITBYPROB", "foo", "0.1", "blah", NULL);
    mb(&b, "CMS.INITBYPROB", "foo", "0.9", "0.9999999999999999", NULL);
    mb(&b, "CMS.INITBYPROB", "foo", "0.1", NULL);
    mb(&b, "CMS.INITBYDIM", "cms1", "10", "10", NULL);
    mb(&b, "CMS.INITBYDIM", "cms1", "x", "10", NULL);   /* the key is looked at first */
    mb(&b, "CMS.INITBYDIM", "c:hll", "10", "10", NULL);
    mb(&b, "CMS.INCRBY", "cms1", "a", NULL);
    mb(&b, "CMS.INCRBY", "cms1", "a", "x", NULL);
    mb(&b, "CMS.INCRBY", "cms1", "a", "-1", NULL);
    mb(&b, "CMS.INCRBY", "nope", "a", "x", NULL);
    mb(&b, "CMS.INCRBY", "nope", "a", "1", NULL);
    mb(&b, "CMS.INCRBY", "c:hll", "a", "1", NULL);
    mb(&b, "CMS.QUERY", "cms1", NULL);
    mb(&b, "CMS.QUERY", "nope", "a", NULL);
    mb(&b, "CMS.QUERY", "c:hll", "a", NULL);
    mb(&b, "CMS.INFO", "nope", NULL);
    mb(&b, "CMS.INFO", "cms1", "x", NULL);
    /* CMS.MERGE */
    mb(&b, "CMS.INITBYDIM", "m", "20", "5", NULL);
    mb(&b, "CMS.MERGE", "m", "2", "cms1", "cms1", "WEIGHTS", "2", "3", NULL);
    mb(&b, "CMS.QUERY", "m", "a", "b", NULL);
    mb(&b, "CMS.MERGE", "m", "1", "cms1", NULL);
    mb(&b, "CMS.QUERY", "m", "a", NULL);
    mb(&b, "CMS.MERGE", "m", "1", "cms2", NULL);
    mb(&b, "CMS.MERGE", "m", "2", "cms1", NULL);
    mb(&b, "CMS.MERGE", "m", "1", "cms1", "WEIGHTS", NULL);
    mb(&b, "CMS.MERGE", "m", "1", "cms1", "WEIGHTS", "x", NULL);
    mb(&b, "CMS.MERGE", "m", "x", "cms1", NULL);
    mb(&b, "CMS.MERGE", "m", "0", "cms1", NULL);
    mb(&b, "CMS.MERGE", "nope", "1", "cms1", NULL);
    mb(&b, "CMS.MERGE", "m", "1", "nope", NULL);
    mb(&b, "CMS.MERGE", "m", "1", "c:hll", NULL);
    mb(&b, "CMS.MERGE", "m", "1", "cms1", "WEIGHTS", "-10", NULL);
    mb(&b, "CMS.MERGE", "m", "1", NULL);
    mb(&b, "CMS.QUERY", "m", "a", NULL);   /* unchanged by the refusals */
    check("CMS", 2, &b,
          ":1\r\n"
          "+OK\r\n*1\r\n:5\r\n*1\r\n:5\r\n*6\r\n+width\r\n:20\r\n+depth\r\n:5\r\n+count\r\n:5\r\n"
          "+OK\r\n*1\r\n:5\r\n*1\r\n:5\r\n*6\r\n+width\r\n:2000\r\n+depth\r\n:7\r\n+count\r\n:5\r\n"
          "*2\r\n:2\r\n:5\r\n*3\r\n:5\r\n:2\r\n:0\r\n"
          "-ERR wrong number of arguments for 'cms.initbydim' command\r\n"
          "-ERR wrong number of arguments for 'cms.initbydim' command\r\n"
          "-CMS: invalid width\r\n"
          "-CMS: invalid depth\r\n"
          "-CMS: invalid width\r\n"
          "-CMS: invalid depth\r\n"
          "-CMS: invalid overestimation value\r\n"
          "-CMS: invalid prob value\r\n"
          "-CMS: invalid init arguments\r\n"
          "-ERR wrong number of arguments for 'cms.initbyprob' command\r\n"
          "-CMS: key already exists\r\n"
          "-CMS: key already exists\r\n"
          "-CMS: key already exists\r\n"
          "-ERR wrong number of arguments for 'cms.incrby' command\r\n"
          "-CMS: Cannot parse number\r\n"
          "-CMS: Number cannot be negative\r\n"
          "-CMS: key does not exist\r\n"
          "-CMS: key does not exist\r\n" WRONGTYPE
          "-ERR wrong number of arguments for 'cms.query' command\r\n"
          "-CMS: key does not exist\r\n" WRONGTYPE
          "-CMS: key does not exist\r\n"
          "-ERR wrong number of arguments for 'cms.info' command\r\n"
          "+OK\r\n+OK\r\n*2\r\n:25\r\n:10\r\n+OK\r\n*1\r\n:5\r\n"
          "-CMS: width/depth is not equal\r\n"
          "-CMS: wrong number of keys\r\n"
          "-CMS: wrong number of keys/weights\r\n"
          "-CMS: invalid weight value\r\n"
          "-CMS: invalid numkeys\r\n"
          "-CMS: Number of keys must be positive\r\n"
          "-CMS: key does not exist\r\n"
          "-CMS: key does not exist\r\n" WRONGTYPE
          "-CMS: MERGE overflow\r\n"
          "-ERR wrong number of arguments for 'cms.merge' command\r\n"
          "*1\r\n:5\r\n");
    /* RESP3: CMS.INFO is a map */
    b.len = 0;
    mb(&b, "CMS.INFO", "cms1", NULL);
    mb(&b, "CMS.QUERY", "cms1", "a", NULL);
    mb(&b, "CMS.QUERY", "nope", "a", NULL);
    check("CMS RESP3", 3, &b,
          "%3\r\n+width\r\n:20\r\n+depth\r\n:5\r\n+count\r\n:7\r\n*1\r\n:5\r\n-CMS: key does not exist\r\n");
    free(b.p);
}

/* ------------------------------------------------------------------------ */
/* TOPK.*                                                                   */
/* ------------------------------------------------------------------------ */

#define E_INCREMENT                                                                                   \
    "-TopK: increment must be an integer greater or equal to 0                            and smaller " \
    "or equal to 100,000\r\n"

static void test_topk(void **state)
{
    (void)state;
    buf_t b = { 0 };
    mb(&b, "PFADD", "t:hll", "a", NULL);
    /* test_topk.py's test_simple and test_add_query_count */
    mb(&b, "TOPK.RESERVE", "topk", "20", "50", "5", "0.9", NULL);
    mb(&b, "TOPK.ADD", "topk", "a", NULL);
    mb(&b, "TOPK.ADD", "topk", "a", "b", NULL);
    mb(&b, "TOPK.QUERY", "topk", "a", NULL);
    mb(&b, "TOPK.QUERY", "topk", "c", NULL);
    mb(&b, "TOPK.COUNT", "topk", "c", "a", "b", NULL);
    mb(&b, "TOPK.INCRBY", "topk", "c", "3", "d", "0", NULL);
    mb(&b, "TOPK.LIST", "topk", NULL);
    mb(&b, "TOPK.LIST", "topk", "WITHCOUNT", NULL);
    mb(&b, "TOPK.LIST", "topk", "withc", NULL);   /* RedisBloom takes a prefix */
    mb(&b, "TOPK.LIST", "topk", "foo", NULL);
    mb(&b, "TOPK.INFO", "topk", NULL);
    mb(&b, "TOPK.RESERVE", "deflt", "3", NULL);
    mb(&b, "TOPK.INFO", "deflt", NULL);
    /* test_validation */
    mb(&b, "TOPK.RESERVE", "foo", NULL);
    mb(&b, "TOPK.RESERVE", "foo", "bar", NULL);
    mb(&b, "TOPK.RESERVE", "foo", "20", "50", NULL);
    mb(&b, "TOPK.RESERVE", "foo", "0.9", "50", "5", "0.9", NULL);
    mb(&b, "TOPK.RESERVE", "foo", "20", "0.9", "5", "0.9", NULL);
    mb(&b, "TOPK.RESERVE", "foo", "20", "50", "0.9", "0.9", NULL);
    mb(&b, "TOPK.RESERVE", "foo", "20", "50", "5", "42", NULL);
    mb(&b, "TOPK.RESERVE", "topk", "20", NULL);
    mb(&b, "TOPK.RESERVE", "topk", "x", NULL);
    mb(&b, "TOPK.RESERVE", "t:hll", "20", NULL);
    mb(&b, "TOPK.ADD", "topk", NULL);
    mb(&b, "TOPK.ADD", "nope", "a", NULL);
    mb(&b, "TOPK.ADD", "t:hll", "a", NULL);
    mb(&b, "TOPK.INCRBY", "topk", "a", NULL);
    mb(&b, "TOPK.INCRBY", "topk", "a", "100001", NULL);
    mb(&b, "TOPK.INCRBY", "topk", "a", "-1", NULL);
    mb(&b, "TOPK.INCRBY", "nope", "a", "x", NULL);
    mb(&b, "TOPK.QUERY", "topk", NULL);
    mb(&b, "TOPK.COUNT", "nope", "a", NULL);
    mb(&b, "TOPK.LIST", "nope", NULL);
    mb(&b, "TOPK.LIST", "topk", "WITHCOUNT", "x", NULL);
    mb(&b, "TOPK.INFO", "t:hll", NULL);
    mb(&b, "TOPK.COUNT", "topk", "c", "a", NULL);   /* unchanged by the refusals */
    check("TOPK", 2, &b,
          ":1\r\n"
          "+OK\r\n*1\r\n$-1\r\n*2\r\n$-1\r\n$-1\r\n*1\r\n:1\r\n*1\r\n:0\r\n*3\r\n:0\r\n:2\r\n:1\r\n"
          "*2\r\n$-1\r\n$-1\r\n"
          "*3\r\n$1\r\nc\r\n$1\r\na\r\n$1\r\nb\r\n"
          "*6\r\n$1\r\nc\r\n:3\r\n$1\r\na\r\n:2\r\n$1\r\nb\r\n:1\r\n"
          "*6\r\n$1\r\nc\r\n:3\r\n$1\r\na\r\n:2\r\n$1\r\nb\r\n:1\r\n"
          "-WITHCOUNT keyword expected\r\n"
          "*8\r\n+k\r\n:20\r\n+width\r\n:50\r\n+depth\r\n:5\r\n+decay\r\n$19\r\n0.90000000000000002\r\n"
          "+OK\r\n*8\r\n+k\r\n:3\r\n+width\r\n:8\r\n+depth\r\n:7\r\n+decay\r\n$19\r\n0.90000000000000002\r\n"
          "-ERR wrong number of arguments for 'topk.reserve' command\r\n"
          "-TopK: invalid k\r\n"
          "-ERR wrong number of arguments for 'topk.reserve' command\r\n"
          "-TopK: invalid k\r\n"
          "-TopK: invalid width\r\n"
          "-TopK: invalid depth\r\n"
          "-TopK: invalid decay value. must be '<= 1' & '> 0'\r\n"
          "-TopK: key already exists\r\n"
          "-TopK: key already exists\r\n"
          "-TopK: key already exists\r\n"
          "-ERR wrong number of arguments for 'topk.add' command\r\n"
          "-TopK: key does not exist\r\n" WRONGTYPE
          "-ERR wrong number of arguments for 'topk.incrby' command\r\n" E_INCREMENT E_INCREMENT
          "-TopK: key does not exist\r\n"
          "-ERR wrong number of arguments for 'topk.query' command\r\n"
          "-TopK: key does not exist\r\n"
          "-TopK: key does not exist\r\n"
          "-ERR wrong number of arguments for 'topk.list' command\r\n" WRONGTYPE "*2\r\n:3\r\n:2\r\n");
    /* RESP3: TOPK.QUERY's booleans, nulls, the map of TOPK.INFO with its double */
    b.len = 0;
    mb(&b, "TOPK.QUERY", "topk", "a", "zz", NULL);
    mb(&b, "TOPK.ADD", "topk", "a", NULL);
    mb(&b, "TOPK.INFO", "topk", NULL);
    mb(&b, "TOPK.LIST", "topk", "WITHCOUNT", NULL);
    check("TOPK RESP3", 3, &b,
          "*2\r\n#t\r\n#f\r\n*1\r\n_\r\n"
          "%4\r\n+k\r\n:20\r\n+width\r\n:50\r\n+depth\r\n:5\r\n+decay\r\n,0.90000000000000002\r\n"
          "*6\r\n$1\r\na\r\n:3\r\n$1\r\nc\r\n:3\r\n$1\r\nb\r\n:1\r\n");
    /* test_resp3.py's Top-K */
    b.len = 0;
    mb(&b, "TOPK.RESERVE", "topk3", "2", "50", "5", "0.9", NULL);
    mb(&b, "TOPK.ADD", "topk3", "foo", "bar", "baz", "42", "foo", "bar", "baz", NULL);
    mb(&b, "TOPK.ADD", "topk3", "foo", "baz", "42", "foo", "baz", NULL);
    mb(&b, "TOPK.ADD", "topk3", "foo", "bar", "baz", "foo", "baz", NULL);
    mb(&b, "TOPK.QUERY", "topk3", "foo", "bar", "baz", "dan", NULL);
    buf_t got = exchange_proto(T.resp_port, 3, &b);
    const char *q = strstr(got.p, "*4\r\n#");
    if (!q || strcmp(q, "*4\r\n#t\r\n#f\r\n#t\r\n#f\r\n") != 0)
        fail_msg("TOPK.QUERY in RESP3: %s", got.p);
    free(got.p);
    /* a k of 1: the item pushed out is named */
    b.len = 0;
    mb(&b, "TOPK.RESERVE", "one", "1", "50", "5", "0.9", NULL);
    mb(&b, "TOPK.ADD", "one", "x", NULL);
    mb(&b, "TOPK.INCRBY", "one", "y", "5", NULL);
    mb(&b, "TOPK.LIST", "one", NULL);
    check("TOPK expelled", 2, &b, "+OK\r\n*1\r\n$-1\r\n*1\r\n$1\r\nx\r\n*1\r\n$1\r\ny\r\n");
    free(b.p);
}

/* ------------------------------------------------------------------------ */
/* TDIGEST.*                                                                */
/* ------------------------------------------------------------------------ */

static void test_tdigest(void **state)
{
    (void)state;
    buf_t b = { 0 };
    mb(&b, "PFADD", "d:hll", "a", NULL);
    /* test_tdigest.py's test_tdigest_rank_and_revrank and byrevrank */
    mb(&b, "TDIGEST.CREATE", "t", "compression", "1000", NULL);
    mb(&b, "TDIGEST.ADD", "t", "1", "2", "2", "3", "3", "3", "4", "4", "4", "4", "5", "5", "5", "5", "5", NULL);
    mb(&b, "TDIGEST.RANK", "t", "0", "1", "2", "3", "4", "5", "6", NULL);
    mb(&b, "TDIGEST.REVRANK", "t", "0", "1", "2", "3", "4", "5", "6", NULL);
    mb(&b, "TDIGEST.BYREVRANK", "t", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14",
       "15", NULL);
    mb(&b, "TDIGEST.BYRANK", "t", "15", "14", "13", "12", "11", "10", "9", "8", "7", "6", "5", "4", "3", "2", "1", "0",
       NULL);
    mb(&b, "TDIGEST.MIN", "t", NULL);
    mb(&b, "TDIGEST.MAX", "t", NULL);
    mb(&b, "TDIGEST.QUANTILE", "t", "0", "1", NULL);
    mb(&b, "TDIGEST.CDF", "t", "0", "6", NULL);
    mb(&b, "TDIGEST.TRIMMED_MEAN", "t", "0", "1", NULL);
    mb(&b, "TDIGEST.CREATE", "empty", NULL);
    mb(&b, "TDIGEST.RANK", "empty", "0", "1", NULL);
    mb(&b, "TDIGEST.REVRANK", "empty", "0", "1", NULL);
    mb(&b, "TDIGEST.MIN", "empty", NULL);
    mb(&b, "TDIGEST.MAX", "empty", NULL);
    mb(&b, "TDIGEST.QUANTILE", "empty", "0.5", NULL);
    mb(&b, "TDIGEST.CDF", "empty", "1", NULL);
    mb(&b, "TDIGEST.BYRANK", "empty", "0", NULL);
    mb(&b, "TDIGEST.TRIMMED_MEAN", "empty", "0.2", "0.8", NULL);
    /* errors (test_negative_*) */
    mb(&b, "TDIGEST.CREATE", "t", NULL);
    mb(&b, "TDIGEST.CREATE", "d:hll", NULL);
    mb(&b, "TDIGEST.CREATE", "x", "compression", "-1", NULL);
    mb(&b, "TDIGEST.CREATE", "x", "compression", "abc", NULL);
    mb(&b, "TDIGEST.CREATE", "x", "foo", "100", NULL);
    mb(&b, "TDIGEST.CREATE", "x", "compression", "100", "1", NULL);
    mb(&b, "TDIGEST.CREATE", "t", "foo", "100", NULL);
    mb(&b, "TDIGEST.RESET", "nope", NULL);
    mb(&b, "TDIGEST.RESET", "t", "x", NULL);
    mb(&b, "TDIGEST.ADD", "nope", "1", NULL);
    mb(&b, "TDIGEST.ADD", "t", "abc", NULL);
    mb(&b, "TDIGEST.ADD", "t", "nan", NULL);
    mb(&b, "TDIGEST.ADD", "t", "-inf", NULL);
    mb(&b, "TDIGEST.ADD", "t", NULL);
    mb(&b, "TDIGEST.ADD", "d:hll", "1", NULL);
    mb(&b, "TDIGEST.QUANTILE", "t", "1.5", NULL);
    mb(&b, "TDIGEST.QUANTILE", "t", "x", NULL);
    mb(&b, "TDIGEST.QUANTILE", "nope", "x", NULL);
    mb(&b, "TDIGEST.CDF", "t", "x", NULL);
    mb(&b, "TDIGEST.RANK", "t", "x", NULL);
    mb(&b, "TDIGEST.BYRANK", "t", "-1", NULL);
    mb(&b, "TDIGEST.BYREVRANK", "t", "x", NULL);
    mb(&b, "TDIGEST.TRIMMED_MEAN", "t", "0.5", "0.2", NULL);
    mb(&b, "TDIGEST.TRIMMED_MEAN", "t", "0", "2", NULL);
    mb(&b, "TDIGEST.TRIMMED_MEAN", "t", "x", "1", NULL);
    mb(&b, "TDIGEST.TRIMMED_MEAN", "t", "0", "y", NULL);
    mb(&b, "TDIGEST.TRIMMED_MEAN", "t", "0", NULL);
    mb(&b, "TDIGEST.MIN", "nope", NULL);
    mb(&b, "TDIGEST.MAX", "d:hll", NULL);
    mb(&b, "TDIGEST.INFO", "nope", NULL);
    mb(&b, "TDIGEST.INFO", NULL);
    mb(&b, "TDIGEST.RANK", "t", "0", NULL);   /* unchanged by the refusals */
    check("TDIGEST", 2, &b,
          ":1\r\n+OK\r\n+OK\r\n"
          "*7\r\n:-1\r\n:0\r\n:2\r\n:4\r\n:8\r\n:12\r\n:15\r\n"
          "*7\r\n:15\r\n:14\r\n:13\r\n:10\r\n:7\r\n:2\r\n:-1\r\n"
          "*16\r\n$1\r\n5\r\n$1\r\n5\r\n$1\r\n5\r\n$1\r\n5\r\n$1\r\n5\r\n$1\r\n4\r\n$1\r\n4\r\n$1\r\n4\r\n$1\r\n4\r\n"
          "$1\r\n3\r\n$1\r\n3\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n2\r\n$1\r\n1\r\n$4\r\n-inf\r\n"
          "*16\r\n$3\r\ninf\r\n$1\r\n5\r\n$1\r\n5\r\n$1\r\n5\r\n$1\r\n5\r\n$1\r\n5\r\n$1\r\n4\r\n$1\r\n4\r\n$1\r\n4\r\n"
          "$1\r\n4\r\n$1\r\n3\r\n$1\r\n3\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n2\r\n$1\r\n1\r\n"
          "$1\r\n1\r\n$1\r\n5\r\n*2\r\n$1\r\n1\r\n$1\r\n5\r\n*2\r\n$1\r\n0\r\n$1\r\n1\r\n"
          "$18\r\n3.6666666666666665\r\n"
          "+OK\r\n*2\r\n:-2\r\n:-2\r\n*2\r\n:-2\r\n:-2\r\n$3\r\nnan\r\n$3\r\nnan\r\n*1\r\n$3\r\nnan\r\n"
          "*1\r\n$3\r\nnan\r\n*1\r\n$3\r\nnan\r\n$3\r\nnan\r\n"
          "-ERR T-Digest: key already exists\r\n" WRONGTYPE
          "-ERR T-Digest: compression parameter needs to be a positive integer\r\n"
          "-ERR T-Digest: error parsing compression parameter\r\n"
          "-ERR T-Digest: wrong keyword\r\n"
          "-ERR wrong number of arguments for 'tdigest.create' command\r\n"
          "-ERR T-Digest: key already exists\r\n"
          "-ERR T-Digest: key does not exist\r\n"
          "-ERR wrong number of arguments for 'tdigest.reset' command\r\n"
          "-ERR T-Digest: key does not exist\r\n"
          "-ERR T-Digest: error parsing val parameter\r\n"
          "-ERR T-Digest: error parsing val parameter\r\n"
          "-ERR T-Digest: val parameter needs to be a finite number\r\n"
          "-ERR wrong number of arguments for 'tdigest.add' command\r\n" WRONGTYPE
          "-ERR T-Digest: quantile should be in [0,1]\r\n"
          "-ERR T-Digest: error parsing quantile\r\n"
          "-ERR T-Digest: key does not exist\r\n"
          "-ERR T-Digest: error parsing cdf\r\n"
          "-ERR T-Digest: error parsing value\r\n"
          "-ERR T-Digest: rank needs to be non negative\r\n"
          "-ERR T-Digest: error parsing rank\r\n"
          "-ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile\r\n"
          "-ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]\r\n"
          "-ERR T-Digest: error parsing low_cut_percentile\r\n"
          "-ERR T-Digest: error parsing high_cut_percentile\r\n"
          "-ERR wrong number of arguments for 'tdigest.trimmed_mean' command\r\n"
          "-ERR T-Digest: key does not exist\r\n" WRONGTYPE
          "-ERR T-Digest: key does not exist\r\n"
          "-ERR wrong number of arguments for 'tdigest.info' command\r\n"
          "*1\r\n:-1\r\n");

    /* TDIGEST.MERGE (test_tdigest_merge): numkeys, COMPRESSION, OVERRIDE */
    b.len = 0;
    mb(&b, "TDIGEST.CREATE", "to-1", "compression", "55", NULL);
    mb(&b, "TDIGEST.CREATE", "from-1", "compression", "100", NULL);
    mb(&b, "TDIGEST.CREATE", "from-2", "compression", "200", NULL);
    mb(&b, "TDIGEST.ADD", "from-1", "1", NULL);
    mb(&b, "TDIGEST.ADD", "from-2", "1", "1", NULL);
    mb(&b, "TDIGEST.MERGE", "to-100", "2", "from-1", "from-2", NULL);      /* the largest compression */
    mb(&b, "TDIGEST.MERGE", "to-1", "2", "from-1", "from-2", NULL);        /* the destination's */
    mb(&b, "TDIGEST.MERGE", "to-50", "2", "from-1", "from-2", "COMPRESSION", "50", NULL);
    mb(&b, "TDIGEST.MERGE", "to-50", "2", "from-1", "from-2", "OVERRIDE", NULL);
    mb(&b, "TDIGEST.MERGE", "to-1", "1", "to-1", NULL);                    /* itself: twice the values */
    mb(&b, "TDIGEST.MERGE", "to-1", "x", "from-1", NULL);
    mb(&b, "TDIGEST.MERGE", "to-1", "0", "from-1", NULL);
    mb(&b, "TDIGEST.MERGE", "to-1", "3", "from-1", NULL);
    mb(&b, "TDIGEST.MERGE", "to-1", "1", "from-1", "FOO", NULL);
    mb(&b, "TDIGEST.MERGE", "to-1", "1", "from-1", "COMPRESSION", NULL);
    mb(&b, "TDIGEST.MERGE", "to-1", "1", "from-1", "COMPRESSION", "-5", NULL);
    mb(&b, "TDIGEST.MERGE", "to-1", "1", "nope", NULL);
    mb(&b, "TDIGEST.MERGE", "new", "1", "new", NULL);
    mb(&b, "TDIGEST.MERGE", "d:hll", "1", "from-1", NULL);
    mb(&b, "TDIGEST.MERGE", "to-1", "1", "d:hll", NULL);
    mb(&b, "TDIGEST.MERGE", "to-1", NULL);
    mb(&b, "EXISTS", "new", NULL);
    check("TDIGEST.MERGE", 2, &b,
          "+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n"
          "-ERR T-Digest: error parsing numkeys\r\n"
          "-ERR T-Digest: numkeys needs to be a positive integer\r\n"
          "-ERR wrong number of arguments for 'tdigest.merge' command\r\n"
          "-ERR T-Digest: wrong keyword\r\n"
          "-ERR wrong number of arguments for 'tdigest.merge' command\r\n"
          "-ERR T-Digest: compression parameter needs to be a positive integer\r\n"
          "-ERR T-Digest: key does not exist\r\n"
          "-ERR T-Digest: key does not exist\r\n" WRONGTYPE WRONGTYPE
          "-ERR wrong number of arguments for 'tdigest.merge' command\r\n"
          ":0\r\n");
    static const struct { const char *key, *compression, *observations; } merged[] = {
        { "to-100", "200", "3" }, { "to-1", "55", "6" }, { "to-50", "200", "3" },
    };
    for (size_t i = 0; i < sizeof(merged) / sizeof(merged[0]); i++) {
        char out[18][64];
        assert_int_equal(ask(out, 18, "TDIGEST.INFO", merged[i].key, NULL), 18);
        assert_string_equal(out[0], "Compression");
        assert_string_equal(out[1], merged[i].compression);
        assert_string_equal(out[12], "Observations");
        assert_string_equal(out[13], merged[i].observations);
    }

    /* TDIGEST.INFO's fields, in RedisBloom's order */
    char out[18][64];
    assert_int_equal(ask(out, 18, "TDIGEST.INFO", "t", NULL), 18);
    static const char *const names[] = { "Compression",     "Capacity",     "Merged nodes",       "Unmerged nodes",
                                         "Merged weight",   "Unmerged weight", "Observations",    "Total compressions",
                                         "Memory usage" };
    for (size_t i = 0; i < 9; i++)
        assert_string_equal(out[2 * i], names[i]);
    assert_string_equal(out[1], "1000");
    assert_string_equal(out[13], "15");
    assert_string_equal(out[7], "0");   /* every change leaves the digest flushed */

    /* RESP3: doubles, a map */
    b.len = 0;
    mb(&b, "TDIGEST.MIN", "t", NULL);
    mb(&b, "TDIGEST.BYRANK", "t", "15", "14", NULL);
    mb(&b, "TDIGEST.BYREVRANK", "t", "15", NULL);
    mb(&b, "TDIGEST.MAX", "empty", NULL);
    mb(&b, "TDIGEST.CDF", "t", "3", NULL);
    mb(&b, "TDIGEST.RANK", "t", "3", NULL);
    mb(&b, "TDIGEST.TRIMMED_MEAN", "t", "0", "1", NULL);
    check("TDIGEST RESP3", 3, &b,
          ",1\r\n*2\r\n,inf\r\n,5\r\n*1\r\n,-inf\r\n,nan\r\n*1\r\n,0.29999999999999999\r\n*1\r\n:4\r\n"
          ",3.6666666666666665\r\n");
    b.len = 0;
    mb(&b, "TDIGEST.INFO", "t", NULL);
    buf_t got = exchange_proto(T.resp_port, 3, &b);
    const char *want = "%9\r\n+Compression\r\n:1000\r\n+Capacity\r\n:";
    assert_memory_equal(got.p, want, strlen(want));
    free(got.p);
    free(b.p);
}

/* RedisBloom 2.2's forms, where today's would refuse them by arity. */
static void test_tdigest_old_forms(void **state)
{
    (void)state;
    buf_t b = { 0 };
    mb(&b, "TDIGEST.CREATE", "o1", "200", NULL);   /* TDIGEST.CREATE key compression */
    mb(&b, "TDIGEST.CREATE", "o2", "-1", NULL);
    mb(&b, "TDIGEST.CREATE", "o2", "x", NULL);
    mb(&b, "TDIGEST.CREATE", "o1", "100", NULL);
    mb(&b, "TDIGEST.ADD", "o1", "1", "2", NULL);
    mb(&b, "TDIGEST.CREATE", "o3", "50", NULL);
    mb(&b, "TDIGEST.ADD", "o3", "7", NULL);
    mb(&b, "TDIGEST.MERGE", "o1", "o3", NULL);     /* TDIGEST.MERGE dest src */
    mb(&b, "TDIGEST.MAX", "o1", NULL);
    mb(&b, "TDIGEST.MERGE", "o4", "o3", NULL);     /* a missing destination is made, as numkeys 1 */
    mb(&b, "TDIGEST.MIN", "o4", NULL);
    mb(&b, "TDIGEST.MERGE", "o1", "nope", NULL);
    check("TDIGEST 2.2 forms", 2, &b,
          "+OK\r\n"
          "-ERR T-Digest: compression parameter needs to be a positive integer\r\n"
          "-ERR T-Digest: error parsing compression parameter\r\n"
          "-ERR T-Digest: key already exists\r\n"
          "+OK\r\n+OK\r\n+OK\r\n+OK\r\n$1\r\n7\r\n+OK\r\n$1\r\n7\r\n"
          "-ERR T-Digest: key does not exist\r\n");
    char out[18][64];
    assert_int_equal(ask(out, 18, "TDIGEST.INFO", "o1", NULL), 18);
    assert_string_equal(out[1], "200");
    assert_string_equal(out[13], "3");
    free(b.p);
}

/* ------------------------------------------------------------------------ */
/* python3-redis                                                            */
/* ------------------------------------------------------------------------ */

static void test_python(void **state)
{
    (void)state;
    if (!have_python_redis())
        skip();   /* tools/deps.sh test installs python3-redis */
    char script[] =
        "import redis, sys\n"
        "port = int(sys.argv[1])\n"
        "r = redis.Redis(port=port)\n"
        "c = r.cms()\n"
        "assert c.initbydim('py:c', 100, 5)\n"
        "assert c.incrby('py:c', ['a', 'b'], [3, 1]) == [3, 1]\n"
        "assert c.query('py:c', 'a', 'b', 'z') == [3, 1, 0]\n"
        "assert c.initbyprob('py:c2', 0.01, 0.01)\n"
        "assert c.initbydim('py:c3', 100, 5)\n"
        "assert c.merge('py:c3', 1, ['py:c'], [2])\n"
        "assert c.query('py:c3', 'a') == [6]\n"
        "i = c.info('py:c')\n"
        "assert (i.width, i.depth, i.count) == (100, 5, 4), vars(i)\n"
        "try:\n"
        "    c.initbydim('py:c', 10, 2)\n"
        "    raise SystemExit('no error')\n"
        "except redis.ResponseError as e:\n"
        "    assert str(e) == 'CMS: key already exists', str(e)\n"
        "t = r.topk()\n"
        "assert t.reserve('py:t', 3, 50, 4, 0.9)\n"
        "assert t.add('py:t', 'a', 'b', 'a') == [None, None, None]\n"
        "assert t.incrby('py:t', ['c'], [5]) == [None]\n"
        "assert t.query('py:t', 'a', 'z') == [1, 0]\n"
        "assert t.count('py:t', 'a', 'c') == [2, 5]\n"
        "assert t.list('py:t') == ['c', 'a', 'b'], t.list('py:t')\n"
        "assert t.list('py:t', withcount=True) == ['c', 5, 'a', 2, 'b', 1]\n"
        "ti = t.info('py:t')\n"
        "assert (ti.k, ti.width, ti.depth, float(ti.decay)) == (3, 50, 4, 0.9), vars(ti)\n"
        "d = r.tdigest()\n"
        "assert d.create('py:d', 100)\n"                      /* 2.2's TDIGEST.CREATE key compression */
        "assert d.add('py:d', [1, 2, 3], [1.0, 1.0, 1.0]) == b'OK'\n"   /* today's form: six values */
        "assert d.min('py:d') == 1.0 and d.max('py:d') == 3.0\n"
        "assert d.create('py:e', 100)\n"
        "assert d.add('py:e', [10], [7]) == b'OK'\n"
        "assert d.merge('py:d', 'py:e') == b'OK'\n"           /* 2.2's TDIGEST.MERGE dest src */
        "assert d.max('py:d') == 10.0\n"
        "info = d.info('py:d')\n"
        "assert info.compression == 100 and info.mergedWeight + info.unmergedWeight == 8, vars(info)\n"
        "raw = redis.Redis(port=port)\n"                      /* without RedisBloom's callbacks */
        "assert raw.execute_command('TDIGEST.CDF', 'py:d', 1) == [b'0.25']\n"
        "assert raw.execute_command('TDIGEST.QUANTILE', 'py:d', 1) == [b'10']\n"
        "for f in (d.cdf, d.quantile):\n"                     /* 2.2 answered one double: today's is an array */
        "    try:\n"
        "        f('py:d', 1)\n"
        "        raise SystemExit('no TypeError')\n"
        "    except TypeError:\n"
        "        pass\n"
        "assert d.reset('py:d') == b'OK'\n"
        "assert str(d.min('py:d')) == 'nan'\n"
        "print('ok')\n";
    python_expect_ok(script, T.resp_port);
}

/* ------------------------------------------------------------------------ */
/* The same answers as the HTTP routes                                      */
/* ------------------------------------------------------------------------ */

static double num(const char *s)
{
    return strcmp(s, "inf") == 0 ? 1.0 / 0.0 : strcmp(s, "-inf") == 0 ? -1.0 / 0.0 : strtod(s, NULL);
}

static void test_http_parity(void **state)
{
    (void)state;
    char out[16][64];
    /* CMS: made over HTTP, added to over both */
    http_expect(&T, "PUT", "/cms/h:cms", "{\"width\":50,\"depth\":4}", 201, NULL);
    http_expect(&T, "POST", "/cms/h:cms", "{\"increments\":[{\"item\":\"a\",\"by\":4}]}", 200, NULL);
    assert_int_equal(ask(out, 16, "CMS.INCRBY", "h:cms", "a", "3", "b", "9", NULL), 2);
    assert_string_equal(out[0], "7");
    json_t *j = http_get_json(&T, "/cms/h:cms/count?item=a&item=b&item=c");
    assert_int_equal(ask(out, 16, "CMS.QUERY", "h:cms", "a", "b", "c", NULL), 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(json_integer_value(json_array_get(json_object_get(j, "counts"), i)), atoll(out[i]));
    json_decref(j);
    j = http_get_json(&T, "/cms/h:cms");
    assert_int_equal(ask(out, 16, "CMS.INFO", "h:cms", NULL), 6);
    assert_int_equal(json_integer_value(json_object_get(j, "count")), atoll(out[5]));
    json_decref(j);

    /* TOPK: made over RESP, listed over both */
    ok("TOPK.RESERVE", "h:topk", "3");
    ask(out, 16, "TOPK.ADD", "h:topk", "x", "y", "x", "z", "x", "y", "w", NULL);
    http_expect(&T, "POST", "/topk/h:topk", "{\"items\":[\"w\",\"w\",\"w\",\"w\"]}", 200, NULL);
    size_t n = ask(out, 16, "TOPK.LIST", "h:topk", "WITHCOUNT", NULL);
    j = http_get_json(&T, "/topk/h:topk/list");
    char *text = json_dumps(j, JSON_COMPACT);
    char want[4096] = "";
    for (size_t i = 0; i < n; i += 2)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s{\"item\":\"%s\",\"count\":%s}", i ? "," : "",
                 out[i], out[i + 1]);
    if (!strstr(text, want))
        fail_msg("TOPK.LIST %s, HTTP %s", want, text);
    free(text);
    json_decref(j);

    /* TDIGEST: values added over RESP, read over both */
    ok("TDIGEST.CREATE", "h:td", NULL);
    buf_t b = { 0 };
    char v[32];
    buf_puts(&b, "*202\r\n$11\r\nTDIGEST.ADD\r\n$4\r\nh:td\r\n");
    for (int i = 0; i < 200; i++) {
        snprintf(v, sizeof(v), "%d.25", (i * 37) % 101);
        char head[16];
        snprintf(head, sizeof(head), "$%zu\r\n", strlen(v));
        buf_puts(&b, head);
        buf_puts(&b, v);
        buf_puts(&b, "\r\n");
    }
    expect_reply(T.resp_port, &b, "+OK\r\n");
    free(b.p);
    static const struct { const char *cmd, *path, *name; } reads[] = {
        { "TDIGEST.QUANTILE", "/tdigest/h:td/quantile?q=0&q=0.1&q=0.5&q=0.99&q=1", "values" },
        { "TDIGEST.CDF", "/tdigest/h:td/cdf?value=-1&value=10&value=50.25&value=200", "values" },
        { "TDIGEST.RANK", "/tdigest/h:td/rank?value=-1&value=10&value=50.25&value=200", "ranks" },
        { "TDIGEST.BYREVRANK", "/tdigest/h:td/byrevrank?rank=0&rank=7&rank=199&rank=200", "values" },
    };
    static const char *const args[][5] = {
        { "0", "0.1", "0.5", "0.99", "1" }, { "-1", "10", "50.25", "200", NULL },
        { "-1", "10", "50.25", "200", NULL }, { "0", "7", "199", "200", NULL },
    };
    for (size_t r = 0; r < sizeof(reads) / sizeof(reads[0]); r++) {
        j = http_get_json(&T, reads[r].path);
        json_t *arr = json_object_get(j, reads[r].name);
        if (!arr) {   /* the member's name: whichever array the answer holds */
            const char *k;
            json_t *x;
            json_object_foreach(j, k, x) if (json_is_array(x)) arr = x;
        }
        assert_non_null(arr);
        size_t m = ask(out, 16, reads[r].cmd, "h:td", args[r][0], args[r][1], args[r][2], args[r][3], args[r][4],
                       NULL);
        assert_int_equal(m, json_array_size(arr));
        for (size_t i = 0; i < m; i++) {
            json_t *x = json_array_get(arr, i);
            double hv = json_is_number(x) ? json_number_value(x)
                        : json_is_string(x) ? num(json_string_value(x))
                                             : 0.0 / 0.0;
            if (hv != num(out[i]))
                fail_msg("%s %s: RESP %s, HTTP %s", reads[r].cmd, args[r][i], out[i], json_dumps(x, JSON_ENCODE_ANY));
        }
        json_decref(j);
    }
    j = http_get_json(&T, "/tdigest/h:td/trimmed_mean?low=0.1&high=0.9");
    char mean[1][64];
    buf_t tm = { 0 };
    mb(&tm, "TDIGEST.TRIMMED_MEAN", "h:td", "0.1", "0.9", NULL);
    buf_t got = exchange(T.resp_port, tm.p, tm.len);
    const char *body = strstr(got.p, "\r\n") + 2;
    size_t blen = (size_t)(strstr(body, "\r\n") - body);
    memcpy(mean[0], body, blen);
    mean[0][blen] = '\0';
    json_t *x = NULL;
    const char *k;
    json_t *y;
    json_object_foreach(j, k, y) if (json_is_number(y)) x = y;
    assert_non_null(x);
    assert_true(json_number_value(x) == strtod(mean[0], NULL));
    free(got.p);
    free(tm.p);
    json_decref(j);
}

/* ------------------------------------------------------------------------ */
/* Bounds, and the journal                                                  */
/* ------------------------------------------------------------------------ */

/* A command of `head` words then n copies of `word` (twice per entry with
 * pairs: word, then "1"). */
static void big(buf_t *b, const char *const *head, size_t nhead, size_t n, const char *word, bool pairs)
{
    char line[64];
    size_t words = nhead + n * (pairs ? 2 : 1);
    snprintf(line, sizeof(line), "*%zu\r\n", words);
    buf_puts(b, line);
    for (size_t i = 0; i < nhead; i++) {
        snprintf(line, sizeof(line), "$%zu\r\n", strlen(head[i]));
        buf_puts(b, line);
        buf_puts(b, head[i]);
        buf_puts(b, "\r\n");
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(line, sizeof(line), "$%zu\r\n%s\r\n", strlen(word), word);
        buf_puts(b, line);
        if (pairs)
            buf_puts(b, "$1\r\n1\r\n");
    }
}

/* tally's bounds answer an error and change nothing: a record holds at
 * most 10 000 entries, a Top-K at most k 10 000, a digest at most
 * compression 10 000. */
static void test_bounds(void **state)
{
    (void)state;
    buf_t b = { 0 };
    mb(&b, "CMS.INITBYDIM", "bd:cms", "10", "2", NULL);
    mb(&b, "TOPK.RESERVE", "bd:topk", "2", NULL);
    mb(&b, "TDIGEST.CREATE", "bd:td", NULL);
    big(&b, (const char *const[]){ "CMS.INCRBY", "bd:cms" }, 2, 10001, "a", true);
    big(&b, (const char *const[]){ "TOPK.ADD", "bd:topk" }, 2, 10001, "a", false);
    big(&b, (const char *const[]){ "TOPK.INCRBY", "bd:topk" }, 2, 10001, "a", true);
    big(&b, (const char *const[]){ "TDIGEST.ADD", "bd:td" }, 2, 10001, "1", false);
    big(&b, (const char *const[]){ "TDIGEST.MERGE", "bd:td", "10001" }, 3, 10001, "bd:td", false);
    mb(&b, "TOPK.RESERVE", "bd:k", "10001", NULL);
    mb(&b, "TDIGEST.CREATE", "bd:c", "COMPRESSION", "10001", NULL);
    mb(&b, "CMS.INITBYDIM", "bd:w", "100000", "100000", NULL);
    mb(&b, "CMS.QUERY", "bd:cms", "a", NULL);
    mb(&b, "TOPK.LIST", "bd:topk", NULL);
    mb(&b, "TDIGEST.MAX", "bd:td", NULL);
    mb(&b, "EXISTS", "bd:k", "bd:c", "bd:w", NULL);
    /* 10 000 is taken */
    big(&b, (const char *const[]){ "TDIGEST.ADD", "bd:td" }, 2, 10000, "2", false);
    mb(&b, "TDIGEST.MAX", "bd:td", NULL);
    check("bounds", 2, &b,
          "+OK\r\n+OK\r\n+OK\r\n"
          "-CMS: at most 10000 items in one CMS.INCRBY\r\n"
          "-TopK: at most 10000 items in one TOPK.ADD\r\n"
          "-TopK: at most 10000 items in one TOPK.INCRBY\r\n"
          "-ERR T-Digest: at most 10000 values in one TDIGEST.ADD\r\n"
          "-ERR T-Digest: at most 10000 keys in one TDIGEST.MERGE\r\n"
          "-TopK: invalid k\r\n"
          "-ERR T-Digest: compression parameter must be at most 10000\r\n"
          "-CMS: invalid init arguments\r\n"
          "*1\r\n:0\r\n*0\r\n$3\r\nnan\r\n:0\r\n"
          "+OK\r\n$1\r\n2\r\n");
    free(b.p);
}

/* What the commands change is journaled as the HTTP routes' operations:
 * a restart from the journal alone answers the same. */
static void test_durable_across_restart(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--fsync", "always", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    buf_t b = { 0 };
    mb(&b, "CMS.INITBYPROB", "du:cms", "0.01", "0.01", NULL);
    mb(&b, "CMS.INCRBY", "du:cms", "a", "3", "b", "0", NULL);
    mb(&b, "CMS.INITBYDIM", "du:m", "200", "7", NULL);
    mb(&b, "CMS.MERGE", "du:m", "2", "du:cms", "du:cms", "WEIGHTS", "2", "1", NULL);
    mb(&b, "TOPK.RESERVE", "du:topk", "2", "20", "4", "0.5", NULL);
    mb(&b, "TOPK.ADD", "du:topk", "x", "y", "x", NULL);
    mb(&b, "TOPK.INCRBY", "du:topk", "z", "4", "y", "0", NULL);
    mb(&b, "TDIGEST.CREATE", "du:td", "50", NULL);
    mb(&b, "TDIGEST.ADD", "du:td", "1", "2", "3", "4", NULL);
    mb(&b, "TDIGEST.CREATE", "du:td2", NULL);
    mb(&b, "TDIGEST.ADD", "du:td2", "9", NULL);
    mb(&b, "TDIGEST.MERGE", "du:td3", "2", "du:td", "du:td2", "COMPRESSION", "80", NULL);
    mb(&b, "TDIGEST.RESET", "du:td2", NULL);
    buf_t got = exchange(p.resp_port, b.p, b.len);
    free(got.p);
    buf_t reads = { 0 };
    mb(&reads, "CMS.QUERY", "du:m", "a", "b", NULL);
    mb(&reads, "CMS.INFO", "du:cms", NULL);
    mb(&reads, "TOPK.LIST", "du:topk", "WITHCOUNT", NULL);
    mb(&reads, "TDIGEST.QUANTILE", "du:td3", "0", "0.5", "1", NULL);
    mb(&reads, "TDIGEST.MAX", "du:td2", NULL);
    mb(&reads, "TDIGEST.INFO", "du:td3", NULL);
    buf_t before = exchange(p.resp_port, reads.p, reads.len);
    tally_proc_t q;
    resp_restart(&p, &q, args);
    buf_t after = exchange(q.resp_port, reads.p, reads.len);
    assert_string_equal(after.p, before.p);
    assert_non_null(strstr(after.p, "*2\r\n:9\r\n:0\r\n*6\r\n+width\r\n:200\r\n+depth\r\n:7\r\n+count\r\n:3\r\n"));
    assert_non_null(strstr(after.p, "*4\r\n$1\r\nz\r\n:4\r\n$1\r\nx\r\n:2\r\n"));
    free(before.p);
    free(after.p);
    free(reads.p);
    free(b.p);
    resp_restart_end(&p, &q);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cms),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_tdigest),
        cmocka_unit_test(test_tdigest_old_forms),
        cmocka_unit_test(test_python),
        cmocka_unit_test(test_http_parity),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_durable_across_restart),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
