/*
 * test_resp.c - the Redis protocol's bytes (resp/parse.h, resp/reply.h),
 * linked with resp/ alone (as resp-pure is).
 *
 * The parser: a pipeline of every form split at every point (and fed a
 * byte at a time, in a buffer that moves between calls) gives the same
 * commands; sdssplitargs's quoting; every protocol error with Redis 7's
 * text; every limit at its bound and one past it; huge and negative
 * lengths; the memory asked for and given back.  The encoder: every type
 * in RESP2 and RESP3, byte for byte as redis-server 7.0.15 sent them
 * (captured from a real server: ZSCORE for doubles, CONFIG GET for maps,
 * SMEMBERS for sets, Lua for booleans and big numbers, INFO for verbatim,
 * LPOP of a missing list for the null array), and the output cap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "resp/parse.h"
#include "resp/reply.h"

#define S(lit) lit, sizeof(lit) - 1 /* a literal with its length (it may hold NULs) */

/* ------------------------------------------------------------ harness -- */

typedef struct {
    char *s;
    size_t len, cap;
} text_t;

static void text_add(text_t *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

/* A command as text: [arg|arg|...], bytes outside printable ASCII, '|',
 * '[', ']' and '\' as \xHH. */
static void text_cmd(text_t *t, const resp_cmd_t *c)
{
    text_add(t, "[", 1);
    for (size_t i = 0; i < c->argc; i++) {
        if (i)
            text_add(t, "|", 1);
        for (size_t j = 0; j < c->argv[i].len; j++) {
            unsigned char ch = (unsigned char)c->argv[i].ptr[j];
            if (ch < 0x20 || ch > 0x7e || ch == '|' || ch == '[' || ch == ']' || ch == '\\') {
                char h[5];
                snprintf(h, sizeof(h), "\\x%02x", ch);
                text_add(t, h, 4);
            } else {
                text_add(t, (const char *)&ch, 1);
            }
        }
    }
    text_add(t, "]", 1);
}

typedef struct {
    size_t held;     /* what the parser says it holds */
    size_t peak;
    size_t refuse_above; /* 0: never refuse */
} mem_t;

static bool mem_hook(void *ud, size_t held, size_t want)
{
    mem_t *m = ud;
    assert_int_equal(held, m->held);
    if (want > held && m->refuse_above && want > m->refuse_above)
        return false;
    m->held = want;
    if (want > m->peak)
        m->peak = want;
    return true;
}

typedef struct {
    resp_limits_t lim;
    bool auth;
    mem_t mem;
} opts_t;

/* Feeds in[0..n) cut at cuts[0..ncuts) (ascending), each piece appended to
 * a buffer that is moved to a new allocation every time, parsing all it
 * can after each piece.  Returns the commands found as text, then
 * "ERR:<text>" or "NOMEM" if it stopped on one. */
static char *feed(opts_t *o, const char *in, size_t n, const size_t *cuts, size_t ncuts)
{
    resp_parser_t *p = resp_parser_new(&o->lim, mem_hook, &o->mem);
    assert_non_null(p);
    resp_parser_require_auth(p, o->auth);
    text_t out = {0};
    text_add(&out, "", 0);
    char *q = NULL;
    size_t qlen = 0, at = 0;
    bool stop = false;
    for (size_t k = 0; k <= ncuts && !stop; k++) {
        size_t to = k < ncuts ? cuts[k] : n;
        char *nq = malloc(qlen + (to - at) + 1); /* a new place every time */
        assert_non_null(nq);
        if (qlen)
            memcpy(nq, q, qlen);
        memcpy(nq + qlen, in + at, to - at);
        free(q);
        q = nq;
        qlen += to - at;
        at = to;
        for (;;) {
            size_t used;
            resp_cmd_t c;
            resp_status_t st = resp_parse(p, q, qlen, &used, &c);
            assert_true(used <= qlen);
            if (st == RESP_CMD)
                text_cmd(&out, &c);
            memmove(q, q + used, qlen - used);
            qlen -= used;
            if (st == RESP_CMD)
                continue;
            if (st == RESP_ERROR) {
                size_t el;
                const char *e = resp_parser_error(p, &el);
                text_add(&out, "ERR:", 4);
                text_add(&out, e, el);
                stop = true;
            } else if (st == RESP_NOMEM) {
                text_add(&out, "NOMEM", 5);
                stop = true;
            }
            break;
        }
    }
    free(q);
    resp_parser_free(p);
    assert_int_equal(o->mem.held, 0); /* everything given back, and said so */
    return out.s;
}

static opts_t defaults(void)
{
    opts_t o;
    memset(&o, 0, sizeof(o));
    o.lim = resp_limits_default();
    return o;
}

/* in, whole, must give want; so must every cut in two, and a byte at a time. */
static void expect_all_splits(opts_t o, const char *in, size_t n, const char *want)
{
    char *got = feed(&o, in, n, NULL, 0);
    if (strcmp(got, want) != 0)
        fail_msg("whole:\n got  %s\n want %s", got, want);
    free(got);
    for (size_t i = 0; i <= n; i++) {
        got = feed(&o, in, n, &i, 1);
        if (strcmp(got, want) != 0)
            fail_msg("cut at %zu:\n got  %s\n want %s", i, got, want);
        free(got);
    }
    size_t *cuts = malloc((n + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        cuts[i] = i + 1;
    got = feed(&o, in, n, cuts, n);
    free(cuts);
    if (strcmp(got, want) != 0)
        fail_msg("a byte at a time:\n got  %s\n want %s", got, want);
    free(got);
}

static void expect(const char *in, size_t n, const char *want)
{
    expect_all_splits(defaults(), in, n, want);
}

/* ------------------------------------------------------------- parser -- */

static void test_pipeline_every_split(void **state)
{
    (void)state;
    static const char in[] =
        "*3\r\n$3\r\nSET\r\n$5\r\nuser1\r\n$5\r\nhello\r\n"
        "PING\r\n"
        "*0\r\n"
        "\r\n"
        "   \r\n"
        "*-1\r\n"
        "*6\r\n$11\r\nCL.THROTTLE\r\n$9\r\nuser:1234\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n$1\r\n1\r\n"
        "SET k \"a b\\x41\\n\" 'it\\'s'\n"
        "*2\r\n$4\r\nECHO\r\n$6\r\na\r\n\0z\xff\r\n"
        "*1\r\n$0\r\n\r\n"
        "*2\r\n$3\r\nGET\r\n$1\r\nk"; /* unfinished: no command */
    expect(in, sizeof(in) - 1,
           "[SET|user1|hello][PING][CL.THROTTLE|user:1234|15|30|60|1][SET|k|a bA\\x0a|it's]"
           "[ECHO|a\\x0d\\x0a\\x00z\\xff][]");
}

static void test_pipeline_views_point_into_buffer(void **state)
{
    (void)state;
    resp_parser_t *p = resp_parser_new(NULL, NULL, NULL);
    static const char in[] = "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\nSET plain \"quo ted\"\r\n";
    size_t used;
    resp_cmd_t c;
    assert_int_equal(resp_parse(p, in, sizeof(in) - 1, &used, &c), RESP_CMD);
    assert_int_equal(used, 22);
    assert_int_equal(c.argc, 2);
    assert_ptr_equal(c.argv[0].ptr, in + 8); /* no copy */
    assert_ptr_equal(c.argv[1].ptr, in + 17);
    assert_int_equal(resp_parse(p, in + used, sizeof(in) - 1 - used, &used, &c), RESP_CMD);
    assert_int_equal(c.argc, 3);
    assert_ptr_equal(c.argv[0].ptr, in + 22);      /* plain words: views too */
    assert_ptr_equal(c.argv[1].ptr, in + 26);
    assert_memory_equal(c.argv[2].ptr, "quo ted", 7); /* a quoted one is decoded */
    assert_int_equal(c.argv[2].len, 7);
    assert_int_equal(resp_parse(p, "", 0, &used, &c), RESP_MORE);
    assert_int_equal(used, 0);
    resp_parser_free(p);
}

static void test_skipped_bytes_are_used(void **state)
{
    (void)state;
    resp_parser_t *p = resp_parser_new(NULL, NULL, NULL);
    size_t used;
    resp_cmd_t c;
    assert_int_equal(resp_parse(p, S("*0\r\n\r\n*1\r\n$4\r\nPI"), &used, &c), RESP_MORE);
    assert_int_equal(used, 6); /* the empty commands are done with, the partial one is not */
    assert_int_equal(resp_parse(p, S("*1\r\n$4\r\nPING\r\n"), &used, &c), RESP_CMD);
    assert_int_equal(used, 14);
    resp_parser_free(p);
}

static void test_inline_quoting(void **state)
{
    (void)state;
    expect(S("a b\tc\r\n"), "[a|b|c]");
    expect(S("  lead  trail  \n"), "[lead|trail]");
    expect(S("\x0b\x0c" "a\x0b" "b\r\n"), "[a\\x0bb]");             /* VT/FF: blanks before a word, not separators */
    expect(S("a\rb\r\n"), "[a|b]");                                  /* a CR inside the line separates */
    expect(S("\"\"\r\n"), "[]");                                     /* an empty quoted word */
    expect(S("\"a\\x41\\x4a\\n\\r\\t\\b\\a\\q\\\\\\\"\"\r\n"), "[aAJ\\x0a\\x0d\\x09\\x08\\x07q\\x5c\"]");
    expect(S("\"\\x4\" \"\\xZZ\"\r\n"), "[x4|xZZ]");                 /* \x without two hex digits: the x itself */
    expect(S("'a\\'b\\n' 'x\"y'\r\n"), "[a'b\\x5cn|x\"y]");         /* single quotes: only \' is an escape */
    expect(S("ab\"c d\"\r\n"), "[abc d]");                           /* a quote may open inside a word */
    expect(S("a'b c'\r\n"), "[ab c]");
    expect(S("\"a\"\x0b" "b\r\n"), "[a|b]");                         /* a closing quote followed by VT */
    expect(S("\"a\"\r\r\n"), "[a]");                                 /* ... or by CR */
    expect(S("ECHO a\0b c\r\n"), "[ECHO|a]");                        /* a NUL ends the arguments */
    expect(S("\"a\\\"\r\n"), "ERR:Protocol error: unbalanced quotes in request");
    expect(S("\"abc\r\n"), "ERR:Protocol error: unbalanced quotes in request");
    expect(S("\"a\"b\r\n"), "ERR:Protocol error: unbalanced quotes in request");
    expect(S("'x\r\n"), "ERR:Protocol error: unbalanced quotes in request");
    expect(S("'x'y\r\n"), "ERR:Protocol error: unbalanced quotes in request");
    expect(S("\"a\0\" b\r\n"), "ERR:Protocol error: unbalanced quotes in request");
    expect(S("PING\nPING\r\nPING"), "[PING][PING]");
}

static void test_protocol_errors(void **state)
{
    (void)state;
    /* each text as redis-server 7.0.15 answered it (after "-ERR ") */
    expect(S("*abc\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*01\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*-0\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*+1\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*1 \r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*-\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*1\0\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*1\r\n$x\r\n"), "ERR:Protocol error: invalid bulk length");
    expect(S("*1\r\n$-1\r\n"), "ERR:Protocol error: invalid bulk length");
    expect(S("*1\r\n$\r\n"), "ERR:Protocol error: invalid bulk length");
    expect(S("*1\r\n$01\r\n"), "ERR:Protocol error: invalid bulk length");
    expect(S("*1\r\nfoo\r\n"), "ERR:Protocol error: expected '$', got 'f'");
    expect(S("*1\r\n\r\n"), "ERR:Protocol error: expected '$', got ' '");
    expect(S("*1\r\n\n\r\n"), "ERR:Protocol error: expected '$', got ' '");
    expect(S("*1\r\n\0\r\n"), "ERR:Protocol error: expected '$', got '");
    expect(S("*2\r\n$1\r\na\r\n:1\r\n"), "ERR:Protocol error: expected '$', got ':'");
    /* commands before the error are returned first */
    expect(S("PING\r\n*1\r\n$1\r\nx\r\n*x\r\nPING\r\n"), "[PING][x]ERR:Protocol error: invalid multibulk length");
    /* the bytes after a CR, and after a bulk's data, are not checked (Redis's behaviour) */
    expect(S("*1\rX$4\r\nPINGxx"), "[PING]");
}

/* A string of n copies of ch. */
static char *rep(char ch, size_t n)
{
    char *s = malloc(n + 1);
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

static void test_limit_inline(void **state)
{
    (void)state;
    opts_t o = defaults();
    o.lim.max_inline = 32;
    /* a line of 32 bytes before its LF (the CR counts) passes, 33 does not */
    char line[64];
    memset(line, 'a', 31);
    memcpy(line + 31, "\r\n", 2);
    char want[40];
    snprintf(want, sizeof(want), "[%.31s]", line);
    expect_all_splits(o, line, 33, want);
    memset(line, 'a', 32);
    memcpy(line + 32, "\r\n", 2);
    expect_all_splits(o, line, 34, "ERR:Protocol error: too big inline request");
    /* without its end: 32 bytes wait, 33 are refused */
    expect_all_splits(o, line, 32, "");
    memset(line, 'a', 33);
    expect_all_splits(o, line, 33, "ERR:Protocol error: too big inline request");
    /* the default: 64 KiB */
    opts_t d = defaults();
    char *big = rep('b', 64 * 1024 + 2);
    big[64 * 1024] = '\n';
    char *got = feed(&d, big, 64 * 1024 + 1, NULL, 0);
    assert_int_equal(strlen(got), 64 * 1024 + 2);
    free(got);
    big[64 * 1024] = 'b';
    big[64 * 1024 + 1] = '\n';
    got = feed(&d, big, 64 * 1024 + 2, NULL, 0);
    assert_string_equal(got, "ERR:Protocol error: too big inline request");
    free(got);
    free(big);
}

static void test_limit_count_lines(void **state)
{
    (void)state;
    opts_t o = defaults();
    o.lim.max_inline = 16;
    /* "*" and 15 bytes: the CR at index 16 is within the limit */
    expect_all_splits(o, S("*000000000000001\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect_all_splits(o, S("*0000000000000001\r\n"), "ERR:Protocol error: too big mbulk count string");
    expect_all_splits(o, S("*0000000000000001"), "ERR:Protocol error: too big mbulk count string");
    expect_all_splits(o, S("*000000000000001"), "");
    expect_all_splits(o, S("*1\r\n$000000000000001\r\n"), "ERR:Protocol error: invalid bulk length");
    expect_all_splits(o, S("*1\r\n$0000000000000001\r\n"), "ERR:Protocol error: too big bulk count string");
    expect_all_splits(o, S("*1\r\n$0000000000000001"), "ERR:Protocol error: too big bulk count string");
}

static void test_limit_args(void **state)
{
    (void)state;
    opts_t o = defaults();
    o.lim.max_args = 3;
    expect_all_splits(o, S("*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"), "[a|b|c]");
    expect_all_splits(o, S("*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
                      "ERR:Protocol error: invalid multibulk length");
    /* inline commands are bounded by their line, as in Redis, not by max_args */
    expect_all_splits(o, S("a b c d\r\n"), "[a|b|c|d]");
    /* the default: 1024*1024 */
    opts_t d = defaults();
    char *got = feed(&d, S("*1048577\r\n"), NULL, 0);
    assert_string_equal(got, "ERR:Protocol error: invalid multibulk length");
    free(got);
    got = feed(&d, S("*1048576\r\n$4\r\nPING\r\n"), NULL, 0);
    assert_string_equal(got, "");
    free(got);
    assert_true(d.mem.peak <= 16 * sizeof(resp_arg_t)); /* a count announced allocates nothing */
}

static void test_limit_bulk(void **state)
{
    (void)state;
    opts_t o = defaults();
    o.lim.max_bulk = 5;
    expect_all_splits(o, S("*1\r\n$5\r\nhello\r\n"), "[hello]");
    expect_all_splits(o, S("*1\r\n$6\r\nhello!\r\n"), "ERR:Protocol error: invalid bulk length");
    opts_t d = defaults();
    char *got = feed(&d, S("*1\r\n$536870912\r\n"), NULL, 0);
    assert_string_equal(got, ""); /* 512 MB: waits for the data */
    free(got);
    assert_int_equal(d.mem.peak, 0);
    got = feed(&d, S("*1\r\n$536870913\r\n"), NULL, 0);
    assert_string_equal(got, "ERR:Protocol error: invalid bulk length");
    free(got);
}

static void test_limit_unauthenticated(void **state)
{
    (void)state;
    opts_t o = defaults();
    o.auth = true;
    expect_all_splits(o, S("*10\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n"
                           "$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n"),
                      "[a|a|a|a|a|a|a|a|a|a]");
    expect_all_splits(o, S("*11\r\n"), "ERR:Protocol error: unauthenticated multibulk length");
    expect_all_splits(o, S("*1\r\n$16385\r\n"), "ERR:Protocol error: unauthenticated bulk length");
    /* invalid before unauthenticated, as in Redis */
    o.lim.max_bulk = 100;
    expect_all_splits(o, S("*1\r\n$16385\r\n"), "ERR:Protocol error: invalid bulk length");
    char *in = malloc(16384 + 20);
    int h = snprintf(in, 20, "*1\r\n$16384\r\n");
    memset(in + h, 'x', 16384);
    memcpy(in + h + 16384, "\r\n", 2);
    opts_t a = defaults();
    a.auth = true;
    char *got = feed(&a, in, (size_t)h + 16386, NULL, 0);
    assert_int_equal(strlen(got), 16386);
    free(got);
    free(in);
    /* inline lines are not limited further */
    expect_all_splits(o, S("a b c d e f g h i j k l\r\n"), "[a|b|c|d|e|f|g|h|i|j|k|l]");
}

static void test_huge_and_negative_lengths(void **state)
{
    (void)state;
    expect(S("*-1\r\n*-2147483649\r\nPING\r\n"), "[PING]"); /* negative counts are empty commands */
    expect(S("*9223372036854775807\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*9223372036854775808\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*-9223372036854775808\r\nPING\r\n"), "[PING]");
    expect(S("*-9223372036854775809\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*99999999999999999999\r\n"), "ERR:Protocol error: invalid multibulk length");
    expect(S("*1\r\n$9223372036854775807\r\n"), "ERR:Protocol error: invalid bulk length");
    expect(S("*1\r\n$18446744073709551615\r\n"), "ERR:Protocol error: invalid bulk length");
    expect(S("*1\r\n$-9223372036854775808\r\n"), "ERR:Protocol error: invalid bulk length");
    opts_t o = defaults();
    o.lim.max_bulk = UINT64_MAX; /* a caller that sets no bulk limit still gets no overflow */
    expect_all_splits(o, S("*1\r\n$9223372036854775807\r\nabc"), "");
}

static void test_memory_asked_and_given_back(void **state)
{
    (void)state;
    /* 2000 arguments: the array grows as they arrive, is given back after */
    text_t in = {0};
    text_add(&in, S("*2000\r\n"));
    for (int i = 0; i < 2000; i++)
        text_add(&in, S("$1\r\nx\r\n"));
    mem_t m = {0};
    resp_parser_t *p = resp_parser_new(NULL, mem_hook, &m);
    size_t used;
    resp_cmd_t c;
    assert_int_equal(resp_parse(p, in.s, in.len - 7 * 1000, &used, &c), RESP_MORE);
    assert_int_equal(m.held, 1024 * sizeof(resp_arg_t)); /* 1000 arrived: 16 doubled to 1024 */
    assert_int_equal(resp_parse(p, in.s, in.len, &used, &c), RESP_CMD);
    assert_int_equal(c.argc, 2000);
    assert_int_equal(m.held, 2000 * sizeof(resp_arg_t)); /* never past the count */
    assert_int_equal(resp_parser_mem(p), m.held);
    assert_int_equal(resp_parse(p, S("PING\r\n"), &used, &c), RESP_CMD);
    assert_int_equal(m.held, 3 * sizeof(resp_arg_t)); /* the large array went back; a 4-byte line has room for 3 words */
    resp_parser_free(p);
    assert_int_equal(m.held, 0);

    /* a refusal: RESP_NOMEM, final */
    m = (mem_t){.refuse_above = 100 * sizeof(resp_arg_t)};
    p = resp_parser_new(NULL, mem_hook, &m);
    assert_int_equal(resp_parse(p, in.s, in.len, &used, &c), RESP_NOMEM);
    assert_true(m.held <= 100 * sizeof(resp_arg_t));
    assert_int_equal(resp_parse(p, S("PING\r\n"), &used, &c), RESP_NOMEM);
    resp_parser_free(p);
    assert_int_equal(m.held, 0);
    free(in.s);

    /* the scratch: one line at most */
    m = (mem_t){0};
    p = resp_parser_new(NULL, mem_hook, &m);
    assert_int_equal(resp_parse(p, S("SET k \"v\"\r\n"), &used, &c), RESP_CMD);
    assert_int_equal(m.held, 5 * sizeof(resp_arg_t) + 9); /* 9 bytes: at most 5 words, and the line */
    resp_parser_free(p);

    /* an error is final */
    p = resp_parser_new(NULL, NULL, NULL);
    assert_int_equal(resp_parse(p, S("*x\r\n"), &used, &c), RESP_ERROR);
    assert_int_equal(resp_parse(p, S("PING\r\n"), &used, &c), RESP_ERROR);
    size_t el;
    assert_string_equal(resp_parser_error(p, &el), "Protocol error: invalid multibulk length");
    assert_int_equal(el, strlen("Protocol error: invalid multibulk length"));
    resp_parser_free(p);
}

/* ------------------------------------------------------------ replies -- */

static void expect_out(resp_out_t *o, const char *want, size_t n)
{
    if (o->len != n || memcmp(o->buf, want, n) != 0)
        fail_msg("reply: got '%.*s' (%zu bytes), want '%.*s'", (int)o->len, o->buf, o->len, (int)n, want);
    resp_out_consume(o, o->len);
}

/* Every type in one protocol version; want2/want3 are redis-server's bytes. */
static void test_replies_by_version(void **state)
{
    (void)state;
    for (int v = 2; v <= 3; v++) {
        resp_out_t o;
        resp_out_init(&o, 1 << 20, v);
        bool r3 = v == 3;
        assert_true(resp_reply_simple(&o, S("PONG")));
        expect_out(&o, S("+PONG\r\n"));
        assert_true(resp_reply_error(&o, S("ERR unknown command 'NOSUCH', with args beginning with: ")));
        expect_out(&o, S("-ERR unknown command 'NOSUCH', with args beginning with: \r\n"));
        assert_true(resp_reply_error(&o, S("ERR a\r\nb")));
        expect_out(&o, S("-ERR a  b\r\n"));
        assert_true(resp_reply_int(&o, 0));
        expect_out(&o, S(":0\r\n"));
        assert_true(resp_reply_int(&o, -3));
        expect_out(&o, S(":-3\r\n"));
        assert_true(resp_reply_int(&o, INT64_MIN));
        expect_out(&o, S(":-9223372036854775808\r\n"));
        assert_true(resp_reply_bulk(&o, S("hello")));
        expect_out(&o, S("$5\r\nhello\r\n"));
        assert_true(resp_reply_bulk(&o, S("")));
        expect_out(&o, S("$0\r\n\r\n"));
        assert_true(resp_reply_bulk(&o, S("a\r\n\0")));
        expect_out(&o, S("$4\r\na\r\n\0\r\n"));
        assert_true(resp_reply_null(&o)); /* GET missing */
        if (r3) expect_out(&o, S("_\r\n")); else expect_out(&o, S("$-1\r\n"));
        assert_true(resp_reply_null_array(&o)); /* LPOP nolist 2 */
        if (r3) expect_out(&o, S("_\r\n")); else expect_out(&o, S("*-1\r\n"));
        /* CONFIG GET maxmemory */
        assert_true(resp_reply_map(&o, 1) && resp_reply_bulk(&o, S("maxmemory")) && resp_reply_bulk(&o, S("0")));
        if (r3) expect_out(&o, S("%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"));
        else expect_out(&o, S("*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"));
        /* SMEMBERS */
        assert_true(resp_reply_set(&o, 1) && resp_reply_bulk(&o, S("x")));
        if (r3) expect_out(&o, S("~1\r\n$1\r\nx\r\n")); else expect_out(&o, S("*1\r\n$1\r\nx\r\n"));
        /* ZRANGE z 0 0 WITHSCORES as RESP2 writes it */
        assert_true(resp_reply_array(&o, 2) && resp_reply_bulk(&o, S("d")) && resp_reply_double(&o, -1.0 / 0.0));
        if (r3) expect_out(&o, S("*2\r\n$1\r\nd\r\n,-inf\r\n")); else expect_out(&o, S("*2\r\n$1\r\nd\r\n$4\r\n-inf\r\n"));
        assert_true(resp_reply_array(&o, 0));
        expect_out(&o, S("*0\r\n"));
        /* ZSCORE of 1.5, 0.1, inf, -inf, 3, 100, 1e300, 0.0001 */
        static const double ds[] = {1.5, 0.1, 1.0 / 0.0, -1.0 / 0.0, 3, 100, 1e300, 0.0001};
        for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++)
            assert_true(resp_reply_double(&o, ds[i]));
        if (r3)
            expect_out(&o, S(",1.5\r\n,0.10000000000000001\r\n,inf\r\n,-inf\r\n,3\r\n,100\r\n"
                             ",1.0000000000000001e+300\r\n,0.0001\r\n"));
        else
            expect_out(&o, S("$3\r\n1.5\r\n$19\r\n0.10000000000000001\r\n$3\r\ninf\r\n$4\r\n-inf\r\n$1\r\n3\r\n"
                             "$3\r\n100\r\n$23\r\n1.0000000000000001e+300\r\n$6\r\n0.0001\r\n"));
        /* EVAL "return {double=0/0}" 0: glibc's NaN of 0/0 is negative */
        volatile double zero = 0.0;
        assert_true(resp_reply_double(&o, zero / zero));
        if (r3) expect_out(&o, S(",-nan\r\n")); else expect_out(&o, S("$4\r\n-nan\r\n"));
        /* GEOPOS's coordinate, printed by the caller ("%.17Lf" trimmed) */
        assert_true(resp_reply_double_text(&o, S("116.48903220891952515")));
        if (r3) expect_out(&o, S(",116.48903220891952515\r\n"));
        else expect_out(&o, S("$21\r\n116.48903220891952515\r\n"));
        /* EVAL "redis.setresp(3); return true|false" 0 */
        assert_true(resp_reply_bool(&o, true) && resp_reply_bool(&o, false));
        if (r3) expect_out(&o, S("#t\r\n#f\r\n")); else expect_out(&o, S(":1\r\n:0\r\n"));
        /* EVAL "return {big_number='1234...'}" 0 */
        assert_true(resp_reply_bignum(&o, S("123456789012345678901234567890")));
        if (r3) expect_out(&o, S("(123456789012345678901234567890\r\n"));
        else expect_out(&o, S("$30\r\n123456789012345678901234567890\r\n"));
        /* INFO's verbatim string */
        assert_true(resp_reply_verbatim(&o, S("# Server\r\n"), "txt"));
        if (r3) expect_out(&o, S("=14\r\ntxt:# Server\r\n\r\n")); else expect_out(&o, S("$10\r\n# Server\r\n\r\n"));
        assert_true(resp_reply_verbatim(&o, S("x"), "md"));
        if (r3) expect_out(&o, S("=5\r\nmd :x\r\n")); else expect_out(&o, S("$1\r\nx\r\n"));
        resp_out_free(&o);
    }
}

static void test_reply_version_switch(void **state)
{
    (void)state;
    resp_out_t o;
    resp_out_init(&o, 100, 2);
    assert_true(resp_reply_null(&o));
    resp_out_set_proto(&o, 3); /* HELLO 3 */
    assert_true(resp_reply_null(&o));
    resp_out_set_proto(&o, 7); /* not a version: RESP2 */
    assert_true(resp_reply_null(&o));
    expect_out(&o, S("$-1\r\n_\r\n$-1\r\n"));
    resp_out_free(&o);
}

/* The cap: a reply that fits exactly is written, one byte more is refused
 * whole, and the buffer stays failed (the listener drops the client). */
static void test_reply_output_cap(void **state)
{
    (void)state;
    resp_out_t o;
    resp_out_init(&o, 17, 2);
    assert_true(resp_reply_bulk(&o, S("0123456789"))); /* $10\r\n + 10 + \r\n = 17: exactly the cap */
    assert_false(resp_out_failed(&o));
    assert_false(resp_reply_int(&o, 1)); /* one more reply: refused, nothing written */
    assert_true(resp_out_failed(&o));
    assert_int_equal(o.len, 17);
    resp_out_consume(&o, 17);
    assert_false(resp_reply_simple(&o, S("OK"))); /* failed stays failed */
    assert_int_equal(o.len, 0);
    resp_out_free(&o);

    resp_out_init(&o, 16, 2);
    assert_false(resp_reply_bulk(&o, S("0123456789"))); /* 17 > 16 */
    assert_int_equal(o.len, 0);
    resp_out_free(&o);

    /* sent bytes make room again, before the cap is reached */
    resp_out_init(&o, 10, 3);
    assert_true(resp_reply_int(&o, 12345)); /* 8 bytes */
    resp_out_consume(&o, 5);
    assert_true(resp_reply_bool(&o, true)); /* 3 + 4 */
    expect_out(&o, S("5\r\n#t\r\n"));
    assert_false(resp_out_failed(&o));
    resp_out_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipeline_every_split),
        cmocka_unit_test(test_pipeline_views_point_into_buffer),
        cmocka_unit_test(test_skipped_bytes_are_used),
        cmocka_unit_test(test_inline_quoting),
        cmocka_unit_test(test_protocol_errors),
        cmocka_unit_test(test_limit_inline),
        cmocka_unit_test(test_limit_count_lines),
        cmocka_unit_test(test_limit_args),
        cmocka_unit_test(test_limit_bulk),
        cmocka_unit_test(test_limit_unauthenticated),
        cmocka_unit_test(test_huge_and_negative_lengths),
        cmocka_unit_test(test_memory_asked_and_given_back),
        cmocka_unit_test(test_replies_by_version),
        cmocka_unit_test(test_reply_version_switch),
        cmocka_unit_test(test_reply_output_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
