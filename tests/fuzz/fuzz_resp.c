/*
 * fuzz_resp.c - the Redis protocol's request parser (resp/parse.h) on bytes
 * the fuzzer shapes, split the way the fuzzer chooses.
 *
 * Input layout: 4 bytes of settings, then the bytes a client sends.
 *   byte 0   max_args   = 1 + b % 16
 *   byte 1   max_bulk   = b (0..255)
 *   byte 2   max_inline = 16 + b % 48
 *   byte 3   bit 0: the unauthenticated limits; bits 1-7: the seed of the chunking
 * The bytes are parsed three times - whole, in chunks of 1..16 bytes drawn
 * from the seed, and (up to 2 KiB) a byte at a time - each time from a
 * buffer of exactly the bytes received, moved to a new allocation at every
 * arrival (so a view outside it is an ASan error).  Checked:
 *   - the three runs find the same commands, end the same way (the same
 *     error text, or waiting) and use the same number of bytes;
 *   - the parser's memory never passes max(max_args, max_inline/2 + 1)
 *     views plus max_inline bytes, and is all given back;
 *   - every command, written back as an array of bulks by the reply encoder
 *     (resp/reply.h), parses again to itself.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp/parse.h"
#include "resp/reply.h"

#define WHOLE_ONLY_ABOVE 2048 /* longer inputs skip the byte-at-a-time run */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    uint8_t *s;
    size_t len, cap;
} bytes_t;

static void add(bytes_t *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->s = realloc(b->s, b->cap);
        if (!b->s)
            abort();
    }
    if (n)
        memcpy(b->s + b->len, s, n);
    b->len += n;
}

typedef struct {
    size_t held, bound;
} mem_t;

static bool mem_hook(void *ud, size_t held, size_t want)
{
    mem_t *m = ud;
    if (held != m->held || want > m->bound)
        abort();
    m->held = want;
    return true;
}

/* The command again, through the encoder and a fresh parser. */
static void round_trip(const resp_cmd_t *c)
{
    resp_out_t o;
    resp_out_init(&o, SIZE_MAX, 2);
    if (!resp_reply_array(&o, c->argc))
        abort();
    for (size_t i = 0; i < c->argc; i++)
        if (!resp_reply_bulk(&o, c->argv[i].ptr, c->argv[i].len))
            abort();
    resp_parser_t *p = resp_parser_new(NULL, NULL, NULL);
    size_t used;
    resp_cmd_t d;
    if (!p || resp_parse(p, o.buf, o.len, &used, &d) != RESP_CMD || used != o.len || d.argc != c->argc)
        abort();
    for (size_t i = 0; i < c->argc; i++)
        if (d.argv[i].len != c->argv[i].len || memcmp(d.argv[i].ptr, c->argv[i].ptr, c->argv[i].len) != 0)
            abort();
    resp_parser_free(p);
    resp_out_free(&o);
}

/* Parses in[0..n) arriving in pieces of next_piece() bytes; the commands,
 * the ending and the bytes used go to *out. */
static void run(const resp_limits_t *lim, bool auth, const uint8_t *in, size_t n, unsigned mode, uint32_t seed,
                bool check_round_trip, bytes_t *out)
{
    mem_t m = {0, 0};
    size_t most_args = lim->max_args > lim->max_inline / 2 + 1 ? lim->max_args : lim->max_inline / 2 + 1;
    m.bound = most_args * sizeof(resp_arg_t) + lim->max_inline;
    resp_parser_t *p = resp_parser_new(lim, mem_hook, &m);
    if (!p)
        abort();
    resp_parser_require_auth(p, auth);
    char *q = NULL;
    size_t qlen = 0, at = 0, total_used = 0;
    resp_status_t st = RESP_MORE;
    while (at < n && (st == RESP_MORE || st == RESP_CMD)) {
        size_t piece = n - at;
        if (mode == 1) {
            seed = seed * 1103515245u + 12345u;
            piece = 1 + (seed >> 16) % 16;
        } else if (mode == 2) {
            piece = 1;
        }
        if (piece > n - at)
            piece = n - at;
        char *nq = malloc(qlen + piece);
        if (!nq)
            abort();
        if (qlen)
            memcpy(nq, q, qlen);
        memcpy(nq + qlen, in + at, piece);
        free(q);
        q = nq;
        qlen += piece;
        at += piece;
        for (;;) {
            size_t used;
            resp_cmd_t c;
            st = resp_parse(p, q, qlen, &used, &c);
            if (used > qlen)
                abort();
            if (st == RESP_CMD) {
                uint64_t argc = c.argc;
                add(out, "C", 1);
                add(out, &argc, sizeof(argc));
                for (size_t i = 0; i < c.argc; i++) {
                    uint64_t len = c.argv[i].len;
                    add(out, &len, sizeof(len));
                    add(out, c.argv[i].ptr, c.argv[i].len);
                }
                if (check_round_trip)
                    round_trip(&c);
            }
            total_used += used;
            memmove(q, q + used, qlen - used);
            qlen -= used;
            if (st != RESP_CMD)
                break;
        }
        if (resp_parser_mem(p) != m.held)
            abort();
    }
    if (st == RESP_ERROR) {
        size_t el;
        const char *e = resp_parser_error(p, &el);
        add(out, "E", 1);
        add(out, e, el);
    } else if (st == RESP_NOMEM) {
        abort(); /* the hook never refuses here */
    } else {
        /* waiting: the bytes not used are the unfinished command's */
        add(out, "M", 1);
        uint64_t u = total_used;
        add(out, &u, sizeof(u));
    }
    free(q);
    resp_parser_free(p);
    if (m.held != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4 || size > 65536)
        return 0;
    resp_limits_t lim = {
        .max_args = 1 + data[0] % 16,
        .max_bulk = data[1],
        .max_inline = 16 + data[2] % 48,
    };
    bool auth = data[3] & 1;
    uint32_t seed = data[3] >> 1;
    const uint8_t *in = data + 4;
    size_t n = size - 4;

    bytes_t whole = {0}, chunked = {0}, bytewise = {0};
    run(&lim, auth, in, n, 0, seed, true, &whole);
    run(&lim, auth, in, n, 1, seed, false, &chunked);
    if (whole.len != chunked.len || (whole.len && memcmp(whole.s, chunked.s, whole.len) != 0))
        abort();
    if (n <= WHOLE_ONLY_ABOVE) {
        run(&lim, auth, in, n, 2, seed, false, &bytewise);
        if (whole.len != bytewise.len || (whole.len && memcmp(whole.s, bytewise.s, whole.len) != 0))
            abort();
    }
    free(whole.s);
    free(chunked.s);
    free(bytewise.s);
    return 0;
}
