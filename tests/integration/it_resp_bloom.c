/*
 * it_resp_bloom.c - RedisBloom's Bloom and Cuckoo filter commands on the
 * Redis port (redis/cmds_bloom.c, redis/cmds_cuckoo.c).  No redis-server
 * here has RedisBloom, so the expected bytes are RedisBloom 2.6's, taken
 * from its own tests (tests/flow/test_overall.py, test_cuckoo.py,
 * test_resp3.py: values such as BF.INFO's Size 296, CF.INFO's 1080, the
 * sub-filters of a growing filter) and from its sources for the error
 * texts and the RESP2/RESP3 forms.  Also: the seed transcript's BF.*
 * lines through redis-cli, python3-redis's r.bf() and r.cf() helpers with
 * a SCANDUMP/LOADCHUNK loop into new keys, and the filters kept across a
 * restart.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "resp_client.h"

RESP_SUITE(NULL)

/* The commands (each a NULL-ended list of words, the list ended by a NULL
 * command) sent on one connection (after HELLO 3 when proto is 3, its own
 * answer being tally's: what follows it is compared), and the bytes
 * wanted back. */
static void expect_proto(int port, int proto, const char *const *const *cmds, const char *want, const char *what)
{
    buf_t b = { 0 };
    for (size_t i = 0; cmds[i]; i++)
        mb_words(&b, cmds[i]);
    buf_t got = exchange_proto(port, proto, &b);
    if (strcmp(got.p, want) != 0)
        fail_msg("%s%s:\ngot:\n%s\nwant:\n%s", what, proto == 3 ? " (RESP3)" : "", got.p, want);
    free(got.p);
    free(b.p);
}

static void expect(int port, const char *const *const *cmds, const char *want, const char *what)
{
    expect_proto(port, 2, cmds, want, what);
}

static void expect3(int port, const char *const *const *cmds, const char *want, const char *what)
{
    expect_proto(port, 3, cmds, want, what);
}

#define C(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define ERR_ARITY(name) "-ERR wrong number of arguments for '" name "' command\r\n"

/* ------------------------------------------------------------------------ */
/* The seed's transcript                                                    */
/* ------------------------------------------------------------------------ */

/* ../shared/seeds/000_*.txt: bf.add / bf.exists / bf.madd / bf.mexists on
 * "codehole", printed by redis-cli as in the transcript. */
static void test_seed_transcript(void **state)
{
    (void)state;
    static const cli_case_t lines[] = {
        { "bf.add codehole user1", "(integer) 1\n" },
        { "bf.add codehole user2", "(integer) 1\n" },
        { "bf.add codehole user3", "(integer) 1\n" },
        { "bf.exists codehole user1", "(integer) 1\n" },
        { "bf.exists codehole user2", "(integer) 1\n" },
        { "bf.exists codehole user3", "(integer) 1\n" },
        { "bf.madd codehole user4 user5 user6", "1) (integer) 1\n2) (integer) 1\n3) (integer) 1\n" },
        { "bf.mexists codehole user4 user5 user6 user7",
          "1) (integer) 1\n2) (integer) 1\n3) (integer) 1\n4) (integer) 0\n" },
    };
    cli_expect(T.resp_port, "--no-raw", lines, sizeof(lines) / sizeof(lines[0]));
}

/* ------------------------------------------------------------------------ */
/* Bloom                                                                    */
/* ------------------------------------------------------------------------ */

static void test_bloom_resp2(void **state)
{
    (void)state;
    /* test_overall.py: test_custom_filter, test_set, test_multi, test_missing */
    const char *const *const basic[] = {
        C("bf.reserve", "b2:test", "0.05", "1000"),
        C("bf.madd", "b2:test", "foo", "bar", "baz"),
        C("bf.exists", "b2:test", "foo"),
        C("bf.exists", "b2:test", "nonexist"),
        C("bf.madd", "b2:test", "foo", "new1", "bar"),
        C("bf.mexists", "b2:test", "nonexist", "foo"),
        C("bf.add", "b2:set", "foo"),
        C("bf.madd", "b2:set", "foo", "bar"),
        C("BF.MEXISTS", "b2:missing", "foo", "bar", "baz"),
        C("bf.exists", "b2:missing", "foo"),
        C("bf.card", "b2:not_exist"),
        C("bf.card", "b2:test"),
        NULL,
    };
    expect(T.resp_port, basic,
           "+OK\r\n*3\r\n:1\r\n:1\r\n:1\r\n:1\r\n:0\r\n*3\r\n:0\r\n:1\r\n:0\r\n*2\r\n:0\r\n:1\r\n"
           ":1\r\n*2\r\n:0\r\n:1\r\n*3\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:4\r\n",
           "basic");
    /* test_info and its one-field forms */
    const char *const *const info[] = {
        C("bf.reserve", "b2:bf", "0.001", "100"),
        C("bf.info", "b2:bf"),
        C("bf.info", "b2:bf", "capacity"),
        C("bf.info", "b2:bf", "SIZE"),
        C("bf.info", "b2:bf", "filters"),
        C("bf.info", "b2:bf", "items"),
        C("bf.info", "b2:bf", "expansion"),
        NULL,
    };
    expect(T.resp_port, info,
           "+OK\r\n*10\r\n+Capacity\r\n:100\r\n+Size\r\n:296\r\n+Number of filters\r\n:1\r\n"
           "+Number of items inserted\r\n:0\r\n+Expansion rate\r\n:2\r\n"
           "*1\r\n:100\r\n*1\r\n:296\r\n*1\r\n:1\r\n*1\r\n:0\r\n*1\r\n:2\r\n",
           "BF.INFO");
    /* test_nonscaling_err: the batch stops at the full filter, the error
     * last in the array; BF.INFO's expansion of a non-scaling filter is nil */
    const char *const *const full[] = {
        C("BF.INSERT", "b2:ns", "CAPACITY", "3", "NONSCALING", "ITEMS", "a", "b", "c"),
        C("BF.INSERT", "b2:ns", "ITEMS", "a", "b", "c", "d", "d"),
        C("BF.INFO", "b2:ns"),
        C("BF.ADD", "b2:ns", "e"),
        C("BF.ADD", "b2:ns", "a"),
        C("BF.INFO", "b2:ns", "expansion"),
        NULL,
    };
    expect(T.resp_port, full,
           "*3\r\n:1\r\n:1\r\n:1\r\n*4\r\n:0\r\n:0\r\n:0\r\n-ERR non scaling filter is full\r\n"
           "*10\r\n+Capacity\r\n:3\r\n+Size\r\n:104\r\n+Number of filters\r\n:1\r\n"
           "+Number of items inserted\r\n:3\r\n+Expansion rate\r\n$-1\r\n"
           "-ERR non scaling filter is full\r\n:0\r\n*1\r\n$-1\r\n",
           "non-scaling");
    /* test_insert: the options create the filter (bf.debug's 98880 bytes:
     * Size 32 + 64 + 98880); test_expansion and test_debug: the sub-filters
     * a growing filter makes */
    const char *const *const grow[] = {
        C("BF.INSERT", "b2:mf", "ERROR", "0.001", "CAPACITY", "50000", "EXPANSION", "2", "ITEMS", "foo"),
        C("BF.INSERT", "b2:mf", "ERROR", "0.1", "ITEMS", "foo", "bar", "baz"),
        C("BF.INFO", "b2:mf", "size"),
        C("BF.INFO", "b2:mf", "capacity"),
        NULL,
    };
    expect(T.resp_port, grow, "*1\r\n:1\r\n*3\r\n:0\r\n:1\r\n:1\r\n*1\r\n:98976\r\n*1\r\n:50000\r\n", "BF.INSERT");
    buf_t b = { 0 };
    mb(&b, "bf.reserve", "b2:exp1", "0.01", "4", "expansion", "1", NULL);
    mb(&b, "bf.reserve", "b2:exp2", "0.01", "4", "expansion", "2", NULL);
    mb(&b, "bf.reserve", "b2:exp4", "0.01", "4", "expansion", "4", NULL);
    mb(&b, "bf.reserve", "b2:dbg", "0.01", "10", NULL);
    for (int i = 0; i < 100; i++) {
        char s[16];
        snprintf(s, sizeof(s), "%d", i);
        mb(&b, "bf.add", "b2:exp1", s, NULL);
        mb(&b, "bf.add", "b2:exp2", s, NULL);
        mb(&b, "bf.add", "b2:exp4", s, NULL);
        mb(&b, "bf.add", "b2:dbg", s, NULL);
    }
    mb(&b, "bf.info", "b2:exp1", "filters", NULL);
    mb(&b, "bf.info", "b2:exp2", "filters", NULL);
    mb(&b, "bf.info", "b2:exp4", "filters", NULL);
    mb(&b, "bf.info", "b2:dbg", NULL);
    buf_t got = exchange(T.resp_port, b.p, b.len);
    const char *tail = "*1\r\n:23\r\n*1\r\n:5\r\n*1\r\n:4\r\n*10\r\n+Capacity\r\n:150\r\n+Size\r\n:568\r\n"
                       "+Number of filters\r\n:4\r\n+Number of items inserted\r\n:99\r\n+Expansion rate\r\n:2\r\n";
    size_t gl = strlen(got.p), tl = strlen(tail);
    if (gl < tl || strcmp(got.p + gl - tl, tail) != 0)
        fail_msg("growth: got ...%s\nwant ...%s", gl > 200 ? got.p + gl - 200 : got.p, tail);
    free(got.p);
    free(b.p);
}

static void test_bloom_resp3(void **state)
{
    (void)state;
    /* test_resp3.py's test_bf_resp3 */
    const char *const *const cmds[] = {
        C("bf.add", "b3:test", "item"),
        C("bf.card", "b3:test"),
        C("bf.EXISTS", "b3:test", "item"),
        C("bf.info", "b3:test"),
        C("bf.insert", "b3:test", "ITEMS", "item2", "item3", "item2"),
        C("bf.madd", "b3:test", "item4", "item5", "item2"),
        C("bf.MEXISTS", "b3:test", "item4", "item5", "item6"),
        C("bf.info", "b3:test", "capacity"),
        C("bf.exists", "b3:none", "x"),
        C("BF.INSERT", "b3:ns", "CAPACITY", "1", "NONSCALING", "ITEMS", "a", "b"),
        C("bf.info", "b3:ns", "expansion"),
        NULL,
    };
    expect3(T.resp_port, cmds,
            "#t\r\n:1\r\n#t\r\n%5\r\n+Capacity\r\n:100\r\n+Size\r\n:240\r\n+Number of filters\r\n:1\r\n"
            "+Number of items inserted\r\n:1\r\n+Expansion rate\r\n:2\r\n"
            "*3\r\n#t\r\n#t\r\n#f\r\n*3\r\n#t\r\n#t\r\n#f\r\n*3\r\n#t\r\n#t\r\n#f\r\n"
            "%1\r\n+Capacity\r\n:100\r\n#f\r\n*2\r\n#t\r\n-ERR non scaling filter is full\r\n"
            "%1\r\n+Expansion rate\r\n_\r\n",
            "BF");
}

static void test_bloom_errors(void **state)
{
    (void)state;
    const char *const *const cmds[] = {
        C("bf.reserve"),
        C("bf.reserve", "be:foo"),
        C("bf.reserve", "be:foo", "0.001"),
        C("bf.reserve", "be:foo", "0.001", "blah"),
        C("bf.reserve", "be:foo", "0", "0"),
        C("bf.reserve", "be:foo", "0", "100"),
        C("bf.reserve", "be:foo", "blah", "1000"),
        C("bf.reserve", "be:foo", "7.7", "1000"),
        C("bf.reserve", "be:foo", "1", "1000"),
        C("bf.reserve", "be:foo", "0.01", "-5"),
        C("BF.RESERVE", "be:b", "0.1", "1", "EXPANSION", "0"),
        C("bf.reserve", "be:b", "0.01", "4", "expansion"),
        C("bf.reserve", "be:b", "0.01", "4", "expansion", "str"),
        C("bf.reserve", "be:mix", "0.01", "1000", "nonscaling", "expansion", "2"),
        C("bf.reserve", "be:t", "0.01", "1000"),
        C("bf.reserve", "be:t", "0.01", "1000"),
        C("bf.add"),
        C("bf.add", "be:t"),
        C("bf.add", "be:t", "1", "2"),
        C("bf.madd", "be:t"),
        C("bf.exists", "be:t", "1", "2"),
        C("bf.mexists", "be:t"),
        C("bf.info"),
        C("bf.info", "be:none"),
        C("bf.info", "be:t", "capacity", "size"),
        C("bf.info", "be:t", "wrong_value"),
        C("bf.info", "be:none", "wrong_value"),
        C("bf.card"),
        C("bf.scandump", "be:t"),
        C("bf.scandump", "be:t", "str"),
        C("bf.scandump", "be:none", "0"),
        C("bf.loadchunk", "be:t"),
        C("bf.loadchunk", "be:t", "str", "data"),
        C("bf.loadchunk", "be:none", "5", "data"),
        C("bf.loadchunk", "be:t", "-9223372036854775808", "1"),
        C("bf.loadchunk", "be:t", "922337203685477588", "1"),
        C("bf.loadchunk", "be:t", "4", "kdoasdksaodsadsadsadsadsadadsadadsdad"),
        C("bf.loadchunk", "be:t", "4", "abcd"),
        C("bf.loadchunk", "be:bad", "1", "not a header"),
        C("bf.insert", "be:mf", "NOCREATE", "ITEMS", "foo", "bar"),
        C("bf.insert", "be:mf", "DONTEXIST", "NOCREATE"),
        C("bf.insert", "be:mf"),
        C("bf.insert", "be:mf", "NOCREATE", "ITEMS"),
        C("bf.insert", "be:mf", "NOCREATE", "CAPACITY"),
        C("bf.insert", "be:mf", "CAPACITY", "0.3"),
        C("bf.insert", "be:mf", "ERROR", "big"),
        C("bf.insert", "be:mf", "EXPANSION", "0", "ITEMS", "foo"),
        C("bf.insert", "be:mf", "EXPANSION", "big"),
        C("bf.insert", "be:mf", "ERROR", "2", "ITEMS", "foo"),
        C("PFADD", "be:hll", "a"),
        C("bf.add", "be:hll", "a"),
        C("bf.exists", "be:hll", "a"),
        C("bf.mexists", "be:hll", "a", "b"),
        C("bf.card", "be:hll"),
        C("bf.info", "be:hll"),
        C("bf.reserve", "be:hll", "0.01", "10"),
        C("bf.scandump", "be:hll", "0"),
        NULL,
    };
    expect(T.resp_port, cmds,
           ERR_ARITY("bf.reserve") ERR_ARITY("bf.reserve") ERR_ARITY("bf.reserve")
           "-ERR bad capacity\r\n"
           "-ERR (0 < error rate range < 1) \r\n"
           "-ERR (0 < error rate range < 1) \r\n"
           "-ERR bad error rate\r\n"
           "-ERR (0 < error rate range < 1) \r\n"
           "-ERR (0 < error rate range < 1) \r\n"
           "-ERR (capacity should be larger than 0)\r\n"
           "-ERR expansion should be greater or equal to 1\r\n"
           "-ERR no expansion\r\n"
           "-ERR bad expansion\r\n"
           "-Nonscaling filters cannot expand\r\n"
           "+OK\r\n"
           "-ERR item exists\r\n"
           ERR_ARITY("bf.add") ERR_ARITY("bf.add") ERR_ARITY("bf.add") ERR_ARITY("bf.madd")
           ERR_ARITY("bf.exists") ERR_ARITY("bf.mexists") ERR_ARITY("bf.info")
           "-ERR not found\r\n"
           ERR_ARITY("bf.info")
           "-Invalid information value\r\n"
           "-ERR not found\r\n"
           ERR_ARITY("bf.card") ERR_ARITY("bf.scandump")
           "-Second argument must be numeric\r\n"
           "-ERR not found\r\n"
           ERR_ARITY("bf.loadchunk")
           "-ERR Second argument must be numeric\r\n"
           "-ERR not found\r\n"
           "-ERR received bad data\r\n"
           "-ERR invalid offset - no link found\r\n"
           "-ERR received bad data\r\n"
           "-ERR invalid offset - no link found\r\n"
           "-ERR received bad data\r\n"
           "-ERR not found\r\n"
           "-Unknown argument received\r\n"
           ERR_ARITY("bf.insert") ERR_ARITY("bf.insert") ERR_ARITY("bf.insert")
           "-Bad capacity\r\n"
           "-Bad error rate\r\n"
           "-Bad argument received\r\n"
           "-Bad expansion\r\n"
           "-Bad argument received\r\n"
           ":1\r\n"
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
           ":0\r\n*2\r\n:0\r\n:0\r\n"
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
           "BF errors");
}

/* ------------------------------------------------------------------------ */
/* Cuckoo                                                                   */
/* ------------------------------------------------------------------------ */

static void test_cuckoo_resp2(void **state)
{
    (void)state;
    /* test_cuckoo.py: test_count, test_setnx, test_insert, test_exists,
     * test_expansion_0, test_info */
    const char *const *const cmds[] = {
        C("CF.RESERVE", "c2:cf", "1000"),
        C("cf.exists", "c2:cf", "k1"),
        C("cf.add", "c2:cf", "k1"),
        C("cf.add", "c2:cf", "k1"),
        C("cf.exists", "c2:cf", "k1"),
        C("cf.count", "c2:cf", "k1"),
        C("cf.del", "c2:cf", "k1"),
        C("cf.count", "c2:cf", "k1"),
        C("cf.del", "c2:cf", "k1"),
        C("cf.count", "c2:cf", "k1"),
        C("cf.del", "c2:cf", "k1"),
        C("cf.addnx", "c2:nx", "k1"),
        C("cf.addnx", "c2:nx", "k1"),
        C("cf.count", "c2:nx", "k1"),
        C("cf.insert", "c2:f2", "ITEMS", "foo"),
        C("cf.insertnx", "c2:f2", "items", "foo"),
        C("cf.insert", "c2:f3", "CAPACITY", "10000", "ITEMS", "foo"),
        C("cf.insertnx", "c2:f3", "ITEMS", "foo", "bar", "baz"),
        C("cf.insert", "c2:f4", "nocreate", "items", "foo"),
        C("cf.insert", "c2:f4", "items", "foo"),
        C("cf.insert", "c2:f4", "nocreate", "items", "foo"),
        C("CF.MEXISTS", "c2:f3", "foo", "bar", "baz", "nope"),
        C("CF.EXISTS", "c2:nonexist-key", "blah"),
        C("CF.MEXISTS", "c2:nonexist-key", "blah"),
        C("CF.COUNT", "c2:nonexist-key", "blah"),
        C("CF.INFO", "c2:cf"),
        C("CF.RESERVE", "c2:a", "4", "EXPANSION", "0"),
        C("CF.ADD", "c2:a", "1"),
        C("CF.ADD", "c2:a", "2"),
        C("CF.ADD", "c2:a", "3"),
        C("CF.ADD", "c2:a", "4"),
        C("CF.INSERT", "c2:a", "ITEMS", "5", "6"),
        C("CF.ADD", "c2:a", "5"),
        C("CF.SCANDUMP", "c2:nx2", "0"),
        C("CF.RESERVE", "c2:empty", "100"),
        C("CF.SCANDUMP", "c2:empty", "0"),
        NULL,
    };
    expect(T.resp_port, cmds,
           "+OK\r\n:0\r\n:1\r\n:1\r\n:1\r\n:2\r\n:1\r\n:1\r\n:1\r\n:0\r\n:0\r\n"
           ":1\r\n:0\r\n:1\r\n"
           "*1\r\n:1\r\n*1\r\n:0\r\n*1\r\n:1\r\n*3\r\n:0\r\n:1\r\n:1\r\n"
           "-ERR not found\r\n*1\r\n:1\r\n*1\r\n:1\r\n"
           "*4\r\n:1\r\n:1\r\n:1\r\n:0\r\n:0\r\n*1\r\n:0\r\n:0\r\n"
           "*16\r\n+Size\r\n:1080\r\n+Number of buckets\r\n:512\r\n+Number of filters\r\n:1\r\n"
           "+Number of items inserted\r\n:0\r\n+Number of items deleted\r\n:2\r\n+Bucket size\r\n:2\r\n"
           "+Expansion rate\r\n:1\r\n+Max iterations\r\n:20\r\n"
           "+OK\r\n:1\r\n:1\r\n:1\r\n:1\r\n*2\r\n:-1\r\n:-1\r\n-Filter is full\r\n"
           "-ERR not found\r\n+OK\r\n*2\r\n:0\r\n$-1\r\n",
           "CF");
    /* test_max_expansions: capacity 4 grows to 32 sub-filters, then refuses */
    buf_t b = { 0 };
    mb(&b, "CF.RESERVE", "c2:max", "4", NULL);
    for (int i = 0; i < 124; i++) {
        char s[16];
        snprintf(s, sizeof(s), "%d", i);
        mb(&b, "cf.add", "c2:max", s, NULL);
    }
    mb(&b, "cf.add", "c2:max", "2048", NULL);
    mb(&b, "cf.insert", "c2:max", "ITEMS", "2048", NULL);
    buf_t got = exchange(T.resp_port, b.p, b.len);
    buf_t want = { 0 };
    buf_puts(&want, "+OK\r\n");
    for (int i = 0; i < 124; i++)
        buf_puts(&want, ":1\r\n");
    buf_puts(&want, "-Maximum expansions reached\r\n-Maximum expansions reached\r\n");
    if (strcmp(got.p, want.p) != 0)
        fail_msg("max expansions: got\n%s", got.p);
    free(got.p);
    free(want.p);
    free(b.p);
}

static void test_cuckoo_resp3(void **state)
{
    (void)state;
    /* test_resp3.py's cuckoo part */
    const char *const *const cmds[] = {
        C("CF.RESERVE", "c3:a", "9", "EXPANSION", "0"),
        C("CF.ADD", "c3:a", "3"),
        C("CF.ADD", "c3:a", "4"),
        C("CF.ADDNX", "c3:a", "4"),
        C("CF.ADDNX", "c3:a", "9"),
        C("CF.INSERT", "c3:a", "ITEMS", "4", "5"),
        C("CF.INSERTNX", "c3:a", "ITEMS", "4", "6"),
        C("CF.del", "c3:a", "3"),
        C("CF.del", "c3:a", "3"),
        C("CF.EXISTS", "c3:a", "3"),
        C("CF.EXISTS", "c3:a", "4"),
        C("CF.MEXISTS", "c3:a", "4", "3"),
        C("CF.COUNT", "c3:a", "3"),
        C("CF.COUNT", "c3:a", "4"),
        C("cf.info", "c3:a"),
        C("CF.RESERVE", "c3:z", "4", "EXPANSION", "0"),
        C("CF.INSERT", "c3:z", "ITEMS", "1", "2", "3", "4", "5"),
        C("CF.INSERTNX", "c3:z", "ITEMS", "6"),
        C("CF.EXISTS", "c3:none", "x"),
        C("CF.SCANDUMP", "c3:none2", "0"),
        C("CF.RESERVE", "c3:empty", "100"),
        C("CF.SCANDUMP", "c3:empty", "0"),
        NULL,
    };
    expect3(T.resp_port, cmds,
            "+OK\r\n#t\r\n#t\r\n#f\r\n#t\r\n*2\r\n#t\r\n#t\r\n*2\r\n:0\r\n:1\r\n#t\r\n#f\r\n#f\r\n#t\r\n"
            "*2\r\n#t\r\n#f\r\n:0\r\n:2\r\n"
            "%8\r\n+Size\r\n:64\r\n+Number of buckets\r\n:4\r\n+Number of filters\r\n:1\r\n"
            "+Number of items inserted\r\n:5\r\n+Number of items deleted\r\n:1\r\n+Bucket size\r\n:2\r\n"
            "+Expansion rate\r\n:0\r\n+Max iterations\r\n:20\r\n"
            "+OK\r\n*5\r\n#t\r\n#t\r\n#t\r\n#t\r\n#f\r\n*1\r\n:-1\r\n#f\r\n-ERR not found\r\n"
            "+OK\r\n*2\r\n:0\r\n_\r\n",
            "CF");
}

static void test_cuckoo_errors(void **state)
{
    (void)state;
    const char *const *const cmds[] = {
        C("CF.RESERVE", "ce:cf"),
        C("CF.RESERVE", "ce:cf", "str"),
        C("CF.RESERVE", "ce:cf", "1000"),
        C("CF.RESERVE", "ce:cf", "1000"),
        C("CF.RESERVE", "ce:tooSmall", "1"),
        C("CF.RESERVE", "ce:x", "10", "BUCKETSIZE"),
        C("CF.RESERVE", "ce:x", "10", "BUCKETSIZE", "string"),
        C("CF.RESERVE", "ce:x", "10", "MAXITERATIONS", "string"),
        C("CF.RESERVE", "ce:x", "10", "EXPANSION", "string"),
        C("CF.RESERVE", "ce:x", "100", "BUCKETSIZE", "33554432"),
        C("CF.RESERVE", "ce:x", "100", "MAXITERATIONS", "165536"),
        C("CF.RESERVE", "ce:x", "100", "EXPANSION", "327695"),
        C("cf.reserve", "ce:x", "9223372036854775807"),
        C("CF.INSERT", "ce:cf", "CAPACITY", "-1", "ITEMS", "k0"),
        C("CF.INSERT", "ce:cf", "CAPACITY", "3", "ITEMS", "k0"),
        C("CF.INSERTNX", "ce:cf", "CAPACITY", "str", "ITEMS", "k0"),
        C("cf.insert", "ce:cf", "NOCREATE", "CAPACITY"),
        C("cf.insert", "ce:cf", "NOCREATE", "DONTEXIST"),
        C("cf.insert", "ce:cf", "NOCREATE", "ITEMS"),
        C("CF.INSERT", "ce:err", "element"),
        C("CF.ADD", "ce:err"),
        C("CF.ADDNX"),
        C("CF.INSERTNX", "ce:err"),
        C("CF.DEL", "ce:err"),
        C("CF.DEL", "ce:none", "k1"),
        C("CF.EXISTS", "ce:err"),
        C("CF.MEXISTS", "ce:err"),
        C("CF.COUNT", "ce:err"),
        C("CF.INFO"),
        C("CF.INFO", "ce:none"),
        C("CF.LOADCHUNK", "ce:err"),
        C("CF.LOADCHUNK", "ce:err", "iterator"),
        C("CF.SCANDUMP", "ce:err"),
        C("cf.scandump", "ce:cf", "str"),
        C("cf.scandump", "ce:cf", "-1"),
        C("cf.scandump", "ce:none", "0"),
        C("cf.loadchunk", "ce:cf", "str", "x"),
        C("cf.loadchunk", "ce:cf", "0", "x"),
        C("cf.loadchunk", "ce:cf", "1", "x"),
        C("cf.loadchunk", "ce:new", "1", "x"),
        C("cf.loadchunk", "ce:new", "5", "x"),
        C("cf.loadchunk", "ce:cf", "4", "abcd"),
        C("cf.loadchunk", "ce:cf", "-9223372036854775808", "1"),
        C("PFADD", "ce:hll", "a"),
        C("cf.add", "ce:hll", "a"),
        C("cf.exists", "ce:hll", "a"),
        C("cf.count", "ce:hll", "a"),
        C("cf.del", "ce:hll", "a"),
        C("cf.info", "ce:hll"),
        C("cf.reserve", "ce:hll", "100"),
        C("cf.loadchunk", "ce:hll", "x", "y"),
        C("cf.loadchunk", "ce:hll", "1", "y"),
        C("CF.COMPACT", "ce:cf"),
        C("CF.COMPACT", "ce:none"),
        C("CF.COMPACT", "ce:cf", "b"),
        NULL,
    };
    expect(T.resp_port, cmds,
           ERR_ARITY("cf.reserve")
           "-Bad capacity\r\n+OK\r\n-ERR item exists\r\n"
           "-Capacity must be at least (BucketSize * 2)\r\n"
           ERR_ARITY("cf.reserve")
           "-Couldn't parse BUCKETSIZE\r\n-Couldn't parse MAXITERATIONS\r\n-Couldn't parse EXPANSION\r\n"
           "-BUCKETSIZE: value must be an integer between 1 and 255, inclusive.\r\n"
           "-MAXITERATIONS: value must be an integer between 1 and 65535, inclusive.\r\n"
           "-EXPANSION: value must be an integer between 0 and 32768, inclusive.\r\n"
           "-ERR Insufficient memory to create filter\r\n"
           "-Capacity must be at least (BucketSize * 2)\r\n"
           "-Capacity must be at least (BucketSize * 2)\r\n"
           "-Bad capacity\r\n"
           ERR_ARITY("cf.insert")
           "-Unknown argument received\r\n"
           ERR_ARITY("cf.insert") ERR_ARITY("cf.insert") ERR_ARITY("cf.add") ERR_ARITY("cf.addnx")
           ERR_ARITY("cf.insertnx") ERR_ARITY("cf.del")
           "-Not found\r\n"
           ERR_ARITY("cf.exists") ERR_ARITY("cf.mexists") ERR_ARITY("cf.count") ERR_ARITY("cf.info")
           "-ERR not found\r\n"
           ERR_ARITY("cf.loadchunk") ERR_ARITY("cf.loadchunk") ERR_ARITY("cf.scandump")
           "-Invalid position\r\n-Invalid position\r\n-ERR not found\r\n"
           "-Invalid position\r\n-Invalid position\r\n-ERR item exists\r\n-Invalid header\r\n"
           "-ERR not found\r\n-Couldn't load chunk!\r\n-Couldn't load chunk!\r\n"
           ":1\r\n"
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
           ":0\r\n:0\r\n-Not found\r\n"
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
           "-Invalid position\r\n"
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
           "+OK\r\n-Cuckoo filter was not found\r\n" ERR_ARITY("cf.compact"),
           "CF errors");
}

/* ------------------------------------------------------------------------ */
/* python3-redis, durability                                                */
/* ------------------------------------------------------------------------ */

/* r.bf() and r.cf(): create, add, madd, insert, exists, mexists, info,
 * card, del, count, addnx, insertnx, and the SCANDUMP loop as the
 * RedisBloom clients run it (from 0 until the iterator is 0), loaded with
 * LOADCHUNK into a new key: the same info, items and dump. */
static void test_python(void **state)
{
    (void)state;
    if (!have_python_redis())
        skip();
    char script[] =
        "import redis, sys\n"
        "r = redis.Redis(port=int(sys.argv[1]))\n"
        "bf = r.bf(); cf = r.cf()\n"
        "assert bf.create('py:bf', 0.01, 1000) == True\n"
        "assert bf.add('py:bf', 'a') == 1\n"
        "assert bf.madd('py:bf', 'a', 'b', 'c') == [0, 1, 1]\n"
        "assert bf.insert('py:bf', ['d', 'a']) == [1, 0]\n"
        "assert bf.insert('py:new', ['x'], capacity=50, error=0.001, expansion=4) == [1]\n"
        "assert bf.info('py:new').capacity == 50\n"
        "assert bf.exists('py:bf', 'a') == 1 and bf.exists('py:bf', 'zz') == 0\n"
        "assert bf.mexists('py:bf', 'a', 'zz', 'd') == [1, 0, 1]\n"
        "i = bf.info('py:bf')\n"
        "assert (i.capacity, i.insertedNum, i.filterNum, i.expansionRate) == (1000, 4, 1, 2), vars(i)\n"
        "assert r.execute_command('BF.CARD', 'py:bf') == 4\n"
        "assert r.execute_command('BF.CARD', 'py:none') == 0\n"
        "def dump(f, key):\n"
        "    it, out = 0, []\n"
        "    while True:\n"
        "        it, data = f.scandump(key, it)\n"
        "        if it == 0:\n"
        "            return out\n"
        "        out.append((it, data))\n"
        "p = r.pipeline(transaction=False)\n"
        "for k in range(3000):\n"
        "    p.execute_command('BF.ADD', 'py:big', 'i%d' % k)\n"
        "p.execute()\n"
        "chunks = dump(bf, 'py:big')\n"
        "assert len(chunks) >= 2, len(chunks)\n"
        "for it, data in chunks:\n"
        "    assert bf.loadchunk('py:copy', it, data) in (True, b'OK')\n"
        "assert vars(bf.info('py:copy')) == vars(bf.info('py:big'))\n"
        "assert all(bf.mexists('py:copy', *['i%d' % k for k in range(3000)]))\n"
        "assert dump(bf, 'py:copy') == chunks\n"
        "assert cf.create('py:cf', 1000) == True\n"
        "assert cf.add('py:cf', 'a') == 1 and cf.add('py:cf', 'a') == 1\n"
        "assert cf.addnx('py:cf', 'a') == 0 and cf.addnx('py:cf', 'b') == 1\n"
        "assert cf.insert('py:cf', ['c', 'a']) == [1, 1]\n"
        "assert cf.insertnx('py:cf', ['c', 'd']) == [0, 1]\n"
        "assert cf.insert('py:cf2', ['x'], capacity=10000) == [1]\n"
        "assert cf.info('py:cf2').bucketNum == 8192\n"
        "assert cf.exists('py:cf', 'a') == 1 and cf.exists('py:cf', 'zz') == 0\n"
        "assert cf.count('py:cf', 'a') == 3\n"
        "assert cf.delete('py:cf', 'a') == 1 and cf.count('py:cf', 'a') == 2\n"
        "assert cf.delete('py:cf', 'zz') == 0\n"
        "ci = cf.info('py:cf')\n"
        "assert (ci.insertedNum, ci.deletedNum, ci.bucketSize, ci.expansionRate, ci.maxIteration) == "
        "(5, 1, 2, 1, 20), vars(ci)\n"
        "try:\n"
        "    cf.insert('py:cf3', ['x'], nocreate=True)\n"
        "    assert False\n"
        "except redis.ResponseError as e:\n"
        "    assert str(e) == 'not found', str(e)\n"
        "p = r.pipeline(transaction=False)\n"
        "for k in range(2000):\n"
        "    p.execute_command('CF.ADD', 'py:cfbig', 'i%d' % k)\n"
        "p.execute()\n"
        "chunks = dump(cf, 'py:cfbig')\n"
        "assert len(chunks) >= 2, len(chunks)\n"
        "for it, data in chunks:\n"
        "    assert cf.loadchunk('py:cfcopy', it, data) in (True, b'OK')\n"
        "assert all(cf.exists('py:cfcopy', 'i%d' % k) for k in range(2000))\n"
        "assert vars(cf.info('py:cfcopy')) == vars(cf.info('py:cfbig'))\n"
        "assert dump(cf, 'py:cfcopy') == chunks\n"
        "print('ok')\n";
    python_expect_ok(script, T.resp_port);
}

/* The filters a client made over RESP (adds, a reservation, a load) are
 * there after a restart from the journal alone. */
static void test_durable_across_restart(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--fsync", "always", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    buf_t b = { 0 };
    mb(&b, "BF.RESERVE", "dur:bf", "0.01", "10", NULL);
    mb(&b, "BF.MADD", "dur:bf", "a", "b", "c", NULL);
    mb(&b, "CF.INSERT", "dur:cf", "CAPACITY", "100", "ITEMS", "x", "y", NULL);
    mb(&b, "CF.DEL", "dur:cf", "y", NULL);
    mb(&b, "BF.INSERT", "dur:ns", "CAPACITY", "2", "NONSCALING", "ITEMS", "a", "b", "c", NULL);
    mb(&b, "CF.RESERVE", "dur:full", "4", "EXPANSION", "0", NULL);
    mb(&b, "CF.INSERT", "dur:full", "NOCREATE", "ITEMS", "1", "2", "3", "4", "5", "6", NULL);
    mb(&b, "BF.SCANDUMP", "dur:bf", "0", NULL);
    buf_t got = exchange(p.resp_port, b.p, b.len);
    const char *want = "+OK\r\n*3\r\n:1\r\n:1\r\n:1\r\n*2\r\n:1\r\n:1\r\n:1\r\n"
                       "*3\r\n:1\r\n:1\r\n-ERR non scaling filter is full\r\n"
                       "+OK\r\n*6\r\n:1\r\n:1\r\n:1\r\n:1\r\n:-1\r\n:-1\r\n*2\r\n:1\r\n$73\r\n";
    if (strncmp(got.p, want, strlen(want)) != 0)
        fail_msg("before the restart: %s", got.p);
    /* the header chunk loaded into a new key, then its one data chunk */
    const char *hdr = got.p + strlen(want);
    b.len = 0;
    buf_puts(&b, "*4\r\n$12\r\nBF.LOADCHUNK\r\n$8\r\ndur:copy\r\n$1\r\n1\r\n$73\r\n");
    buf_put(&b, hdr, 73);
    buf_puts(&b, "\r\n");
    mb(&b, "BF.SCANDUMP", "dur:bf", "1", NULL);
    buf_t got2 = exchange(p.resp_port, b.p, b.len);
    if (strncmp(got2.p, "+OK\r\n*2\r\n:17\r\n$16\r\n", 19) != 0)
        fail_msg("the header's load and the data chunk: %s", got2.p);
    b.len = 0;
    buf_puts(&b, "*4\r\n$12\r\nBF.LOADCHUNK\r\n$8\r\ndur:copy\r\n$2\r\n17\r\n$16\r\n");
    buf_put(&b, got2.p + 19, 16);
    buf_puts(&b, "\r\n");
    buf_t got3 = exchange(p.resp_port, b.p, b.len);
    assert_string_equal(got3.p, "+OK\r\n");
    free(got.p);
    free(got2.p);
    free(got3.p);
    tally_proc_t q;
    resp_restart(&p, &q, args);
    b.len = 0;
    mb(&b, "BF.MEXISTS", "dur:bf", "a", "b", "c", NULL);
    mb(&b, "BF.CARD", "dur:bf", NULL);
    mb(&b, "BF.MEXISTS", "dur:copy", "a", "b", "c", NULL);
    mb(&b, "BF.INFO", "dur:copy", "items", NULL);
    mb(&b, "CF.MEXISTS", "dur:cf", "x", "y", NULL);
    mb(&b, "CF.INFO", "dur:cf", NULL);
    mb(&b, "BF.CARD", "dur:ns", NULL);
    mb(&b, "CF.MEXISTS", "dur:full", "1", "2", "3", "4", NULL);
    expect_reply(q.resp_port, &b, "*3\r\n:1\r\n:1\r\n:1\r\n:3\r\n*3\r\n:1\r\n:1\r\n:1\r\n*1\r\n:3\r\n*2\r\n:1\r\n:0\r\n"
                                  "*16\r\n+Size\r\n:184\r\n+Number of buckets\r\n:64\r\n+Number of filters\r\n:1\r\n"
                                  "+Number of items inserted\r\n:1\r\n+Number of items deleted\r\n:1\r\n"
                                  "+Bucket size\r\n:2\r\n+Expansion rate\r\n:1\r\n+Max iterations\r\n:20\r\n"
                                  ":2\r\n*4\r\n:1\r\n:1\r\n:1\r\n:1\r\n");
    free(b.p);
    resp_restart_end(&p, &q);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_transcript),
        cmocka_unit_test(test_bloom_resp2),
        cmocka_unit_test(test_bloom_resp3),
        cmocka_unit_test(test_bloom_errors),
        cmocka_unit_test(test_cuckoo_resp2),
        cmocka_unit_test(test_cuckoo_resp3),
        cmocka_unit_test(test_cuckoo_errors),
        cmocka_unit_test(test_python),
        cmocka_unit_test(test_durable_across_restart),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
