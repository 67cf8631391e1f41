/* ts_select.c - the series matching label filters: see ts_select.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/access.h"
#include "cmd/keys.h"
#include "cmd/ts_index.h"
#include "cmd/ts_rows.h"
#include "cmd/ts_select.h"

typedef struct keylist {
    char **k;
    size_t *len;
    size_t n, cap;
    const ts_matcher_t *m;
    size_t nm;
    bool oom;
    ts_index_t *ix;          /* a scan re-adds what it sees */
    const cmd_ctx_t *ctx;    /* whose token's prefixes bound the selection (cmd/access.h) */
} keylist_t;

/* Appends a copy of key. */
static void keylist_push(keylist_t *l, const char *key, size_t len)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 64;
        char **nk = realloc(l->k, ncap * sizeof(*nk));
        size_t *nl = nk ? realloc(l->len, ncap * sizeof(*nl)) : NULL;
        if (nk)
            l->k = nk;
        if (!nl) {
            l->oom = true;
            return;
        }
        l->len = nl;
        l->cap = ncap;
    }
    char *c = malloc(len + 1);
    if (!c) {
        l->oom = true;
        return;
    }
    memcpy(c, key, len);
    c[len] = '\0';
    l->k[l->n] = c;
    l->len[l->n++] = len;
}

static void keylist_visit(void *ud, ks_entry_t *e)
{
    keylist_t *l = ud;
    if (l->oom || ks_entry_type(e) != &ts_type)
        return;
    size_t len;
    const char *key = ks_entry_key(e, &len);
    if (l->ix)
        ts_index_add(l->ix, key, len, ks_entry_value(e));   /* (a failure: the next query scans again) */
    if (ts_matches(ks_entry_value(e), l->m, l->nm) && cmd_key_visible(l->ctx, key, len))
        keylist_push(l, key, len);
}

void cmd_ts_keys_free(cmd_ts_keys_res_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->k[i]);
    free(r->k);
    free(r->len);
    r->k = NULL;
    r->len = NULL;
    r->n = 0;
}

static int cmp_keys(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* The candidates of the index, each verified under its lock: kept when it
 * is a series matching every filter, forgotten by the index when it no
 * longer has the pair it was listed under. */
static void select_indexed(cmd_ctx_t *ctx, ts_index_t *ix, keylist_t *l)
{
    const ts_matcher_t *best = NULL;
    size_t best_n = SIZE_MAX;
    for (size_t k = 0; k < l->nm; k++)
        if (ts_matcher_positive(&l->m[k])) {
            size_t n = ts_index_count(ix, &l->m[k]);
            if (n < best_n) {
                best_n = n;
                best = &l->m[k];
            }
        }
    char **cand;
    size_t nc;
    if (!ts_index_candidates(ix, best, &cand, &nc)) {
        l->oom = true;
        return;
    }
    for (size_t i = 0; i < nc; i++) {
        cmd_key_t h;
        size_t len = strlen(cand[i]);
        /* a series outside the token's prefixes is not there for it (as
         * in a key scan); one that cannot be opened here (another node's)
         * is skipped */
        if (cmd_key_visible(ctx, cand[i], len) && cmd_key_open(ctx, cand[i], len, NULL, CMD_READ, &h)) {
            const ts_t *ts = h.e && ks_entry_type(h.e) == &ts_type ? cmd_key_value(&h) : NULL;
            bool listed = ts && ts_matches(ts, best, 1);
            if (listed && ts_matches(ts, l->m, l->nm))
                keylist_push(l, cand[i], len);
            cmd_key_close(&h, false);
            if (!listed)
                ts_index_forget(ix, best, cand[i], len);
        }
        free(cand[i]);
    }
    free(cand);
}

bool ts_select(cmd_ctx_t *ctx, const cmd_ts_filter_t *f, cmd_ts_keys_res_t *out)
{
    memset(out, 0, sizeof(*out));
    bool positive = false;
    for (size_t k = 0; k < f->n; k++)
        positive |= ts_matcher_positive(&f->m[k]);
    if (!positive)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "filter",
                        "at least one filter must select series: label=value or label=(a,b)");
    keylist_t l = { .m = f->m, .nm = f->n, .ctx = ctx };
    ks_t *ks = ctx->srv->ks;
    ts_index_t *ix = ts_index_of(ks);
    if (ix && ts_index_usable(ix)) {
        select_indexed(ctx, ix, &l);
    } else {
        if (ix)
            ts_index_scan_begin(ix);
        l.ix = ix;
        for (unsigned s = 0; s < ks_shard_count(ks) && !l.oom; s++) {
            ks_shard_t *sh = ks_shard_at(ks, s);
            uint64_t cursor = 0;
            cmd_shard_lock(ctx, s);   /* a transaction's own already held */
            do
                ks_shard_scan(ks, sh, &cursor, 1024, cmd_now_ms(ctx), keylist_visit, &l);
            while (cursor != 0 && !l.oom);
            cmd_shard_unlock(ctx, s);
        }
        if (ix)
            ts_index_scan_end(ix, !l.oom);
    }
    out->k = l.k;
    out->len = l.len;
    out->n = l.n;
    if (l.oom) {
        cmd_ts_keys_free(out);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory selecting series");
    }
    /* a scan may visit an entry twice while its table grows: once each */
    if (out->n)
        qsort(out->k, out->n, sizeof(*out->k), cmp_keys);
    size_t u = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (u && strcmp(out->k[u - 1], out->k[i]) == 0) {
            free(out->k[i]);
            continue;
        }
        out->len[u] = strlen(out->k[i]);
        out->k[u++] = out->k[i];
    }
    out->n = u;
    return true;
}

uint64_t ts_keys_answer_bytes(const cmd_ts_keys_res_t *l, uint64_t each)
{
    uint64_t bytes = 16;
    for (size_t i = 0; i < l->n; i++)
        bytes += ts_key_text_max(l->len[i]) + each;
    return bytes;
}
