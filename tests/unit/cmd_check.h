/*
 * cmd_check.h - what the command layer's unit tests (tests/unit/test_cmd*.c,
 * linked with cmd and core only) share: servers whose journal is kept in
 * memory, an operation run through cmd_call as a front-end runs it, and the
 * proof that its records replay: every record the first server journaled is
 * replayed on a second server, and the two keyspaces must then hold the same
 * keys with the same dumps (core/keydump.h: value and expiry) - what
 * replay and replicas must reach.
 */
#ifndef TALLY_TESTS_CMD_CHECK_H
#define TALLY_TESTS_CMD_CHECK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cmd/def.h"
#include "core/keydump.h"

#define CMD_CHECK_NOW_NS 1700000000000000000LL

/* A server and the records its changes journaled (framed, in order). */
typedef struct cmd_check {
    cmd_server_t srv;
    wbuf_t journal;
} cmd_check_t;

static uint64_t cmd_check_keep(void *ud, const journal_req_t *rec)
{
    cmd_check_t *c = ud;
    journalfmt_put_request(&c->journal, rec);
    return c->journal.len;
}

static inline void cmd_check_open(cmd_check_t *c)
{
    memset(c, 0, sizeof(*c));
    c->srv.ks = ks_create(2, 42);
    assert_non_null(c->srv.ks);
    c->srv.hooks.ud = c;
    c->srv.hooks.journal = cmd_check_keep;
}

static inline void cmd_check_close(cmd_check_t *c)
{
    ks_free(c->srv.ks);
    wbuf_free(&c->journal);
}

/* Runs def on args at now_ns as a live request: true with *res, or false
 * with *err (may be NULL) the refusal. */
static inline bool cmd_check_run(cmd_check_t *c, const cmd_def_t *def, const void *args, void *res, int64_t now_ns,
                                 cmd_err_t *err)
{
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, &c->srv, now_ns, false, 0);
    bool ok = cmd_call(&ctx, def, args, res);
    if (!ok && err)
        *err = ctx.err;
    cmd_ctx_end(&ctx);
    return ok;
}

struct cmd_check_dumps {
    char **keys;
    uint8_t **dumps;
    size_t *lens;
    size_t n, cap;
    ks_t *ks;
};

static void cmd_check_collect(void *ud, ks_entry_t *e)
{
    struct cmd_check_dumps *d = ud;
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 64;
        d->keys = realloc(d->keys, d->cap * sizeof(*d->keys));
        d->dumps = realloc(d->dumps, d->cap * sizeof(*d->dumps));
        d->lens = realloc(d->lens, d->cap * sizeof(*d->lens));
        assert_true(d->keys && d->dumps && d->lens);
    }
    size_t klen;
    const char *k = ks_entry_key(e, &klen);
    d->keys[d->n] = strndup(k, klen);
    wbuf_t w = WBUF_INIT;
    int64_t x = ks_entry_expire(d->ks, e);
    keydump_encode(ks_entry_type(e), ks_entry_value(e), x == KS_NO_EXPIRY ? KEYDUMP_NO_TTL : x, &w);
    assert_false(w.oom);
    d->dumps[d->n] = w.data;
    d->lens[d->n] = w.len;
    d->n++;
}

/* Every key of the server with its dump (the absolute expiry in the TTL's
 * place, so that two servers compare at any time). */
static inline void cmd_check_dumps(cmd_check_t *c, struct cmd_check_dumps *d)
{
    memset(d, 0, sizeof(*d));
    ks_t *ks = c->srv.ks;
    d->ks = ks;
    for (unsigned s = 0; s < ks_shard_count(ks); s++) {
        ks_shard_t *sh = ks_shard_at(ks, s);
        ks_shard_lock(sh);
        uint64_t cursor = 0;
        do
            ks_shard_scan(ks, sh, &cursor, 1024, 0, cmd_check_collect, d);
        while (cursor);
        ks_shard_unlock(sh);
    }
}

static inline void cmd_check_dumps_free(struct cmd_check_dumps *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->keys[i]);
        free(d->dumps[i]);
    }
    free(d->keys);
    free(d->dumps);
    free(d->lens);
}

/* Replays every record c journaled on a fresh server, and checks that it
 * ends with the same keys and dumps; returns the number of records. */
static inline int cmd_check_replays(cmd_check_t *c)
{
    cmd_check_t r;
    cmd_check_open(&r);
    size_t off = 0;
    int n = 0;
    while (off < c->journal.len) {
        journal_req_t q;
        size_t used;
        const char *why;
        assert_int_equal(journalfmt_parse_record(c->journal.data + off, c->journal.len - off, &q, &used, &why), PARSE_OK);
        assert_int_equal(q.kind, JOURNAL_REC_COMMAND);
        cmd_err_t err;
        if (!cmd_replay(&r.srv, &q, 0, &err))
            fail_msg("record %d (op %u) did not replay: %s", n, (unsigned)q.op, err.message);
        off += used;
        n++;
    }
    assert_int_equal(r.journal.len, 0);   /* replay journals nothing */
    struct cmd_check_dumps a, b;
    cmd_check_dumps(c, &a);
    cmd_check_dumps(&r, &b);
    if (a.n != b.n)
        fail_msg("%zu keys live, %zu after replay", a.n, b.n);
    for (size_t i = 0; i < a.n; i++) {
        size_t j = 0;
        while (j < b.n && strcmp(a.keys[i], b.keys[j]) != 0)
            j++;
        if (j == b.n)
            fail_msg("key %s is missing after replay", a.keys[i]);
        if (a.lens[i] != b.lens[j] || memcmp(a.dumps[i], b.dumps[j], a.lens[i]) != 0)
            fail_msg("key %s differs after replay", a.keys[i]);
    }
    cmd_check_dumps_free(&a);
    cmd_check_dumps_free(&b);
    cmd_check_close(&r);
    return n;
}

#endif
