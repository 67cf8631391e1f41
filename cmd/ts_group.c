/* ts_group.c - a series locked with the series it links to: see ts_group.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/access.h"
#include "cmd/room.h"
#include "cmd/ts_group.h"
#include "cmd/ts_index.h"

bool ts_dst_live(ks_entry_t *e, const char *src_key, size_t src_len)
{
    if (!e || ks_entry_type(e) != &ts_type)
        return false;
    size_t len;
    const char *src = ts_source(ks_entry_value(e), &len);
    return src && len == src_len && memcmp(src, src_key, len) == 0;
}

bool ts_has_rule_to(ks_entry_t *e, const char *name, size_t len)
{
    return e && ks_entry_type(e) == &ts_type && ts_rule_find(ks_entry_value(e), name, len) >= 0;
}

const char *ts_copy_source(const ts_t *ts, char **buf, size_t *len)
{
    const char *p = ts ? ts_source(ts, len) : NULL;
    if (!p)
        return NULL;
    *buf = malloc(*len + 1);
    if (!*buf)
        return NULL;
    memcpy(*buf, p, *len);
    return *buf;
}

void ts_index_note(cmd_ctx_t *ctx, const char *key, size_t klen, ts_t *ts)
{
    ts_index_t *ix = ts_index_of(ctx->srv->ks);
    if (ix)
        ts_index_add(ix, key, klen, ts);
}

bool ts_group_open_with(cmd_ctx_t *ctx, const char *key, size_t klen, unsigned flags, const ks_key_t *extra,
                        size_t nextra, ts_group_t *g)
{
    ks_t *ks = ctx->srv->ks;
    unsigned kflags = flags & (CMD_WRITE | CMD_MUST_EXIST);
    bool with_src = flags & TS_GROUP_SOURCE, visible = flags & TS_GROUP_VISIBLE;
    size_t off[TS_MAX_RULES + 1], len[TS_MAX_RULES + 1];   /* rule i's destination, then the source, in names */
    memset(g, 0, sizeof(*g));
    for (int attempt = 0;; attempt++) {
        if (!cmd_key_open(ctx, key, klen, &ts_type, kflags, &g->h))
            return false;
        const ts_t *ts = cmd_key_value(&g->h);
        size_t nr = ts ? ts_rule_count(ts) : 0, slen = 0;
        const char *src = ts && with_src ? ts_source(ts, &slen) : NULL;
        g->src_named = src != NULL;
        if ((nr == 0 && !src && !nextra) || attempt == 8) {   /* (links changing eight times: give up on them) */
            g->n = 1;
            if (!nextra)
                return true;
            cmd_key_close(&g->h, false);
            return cmd_fail(ctx, CMD_E_UNAVAILABLE, NULL, "the series kept changing; try again");
        }
        size_t total = slen;
        for (size_t i = 0; i < nr; i++)
            total += ts_rule_at(ts, i).dest_len;
        free(g->names);
        g->names = malloc(total + 1);
        if (!g->names) {
            cmd_key_close(&g->h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        }
        /* keys[0] the series, then each destination and the source that is
         * looked at (for a read, those the token sees) */
        size_t at[TS_MAX_RULES + 1], o = 0;   /* their index in keys, 0 = not looked at */
        g->keys[0] = ks_key(ks, key, klen);
        g->n = 1;
        for (size_t i = 0; i <= nr; i++) {
            const char *name;
            if (i < nr) {
                ts_rule_t r = ts_rule_at(ts, i);
                name = r.dest;
                len[i] = r.dest_len;
            } else if (src) {
                name = src;
                len[i] = slen;
            } else {
                break;
            }
            memcpy(g->names + o, name, len[i]);
            off[i] = o;
            o += len[i];
            at[i] = 0;
            if (!visible || cmd_key_visible(ctx, g->names + off[i], len[i])) {
                at[i] = g->n;
                g->keys[g->n++] = ks_key(ks, g->names + off[i], len[i]);
            }
        }
        g->extra_at = g->n;
        for (size_t j = 0; j < nextra; j++)
            g->keys[g->n++] = extra[j];
        cmd_key_close(&g->h, false);
        if (!cmd_keys_lock(ctx, g->keys, g->n, &g->h)) {
            free(g->names);   /* a rule's destination outside the token's prefixes: FORBIDDEN */
            g->names = NULL;
            return false;
        }
        ks_entry_t *e;
        for (size_t i = 0; i <= nr && (i < nr || src); i++) {
            if (!at[i])
                continue;
            if (!cmd_keys_find(&g->h, at[i], NULL, CMD_READ, NULL, &e))
                goto gone;
            if (i < nr) {
                g->seen[i] = true;
                g->dst[i] = ts_dst_live(e, key, klen) ? e : NULL;
            } else {
                g->src_seen = true;
                g->src_live = ts_has_rule_to(e, key, klen);
            }
        }
        if (!cmd_keys_find(&g->h, 0, &ts_type, kflags, NULL, &e))
            goto gone;
        g->h.e = e;   /* (a read of several keys leaves it unset) */
        /* the same rules, in the same order, and the same source? */
        ts = e ? ks_entry_value(e) : NULL;
        bool same = ts && ts_rule_count(ts) == nr;
        for (size_t i = 0; same && i < nr; i++) {
            ts_rule_t r = ts_rule_at(ts, i);
            same = r.dest_len == len[i] && memcmp(r.dest, g->names + off[i], len[i]) == 0;
        }
        if (same && with_src) {
            size_t l2;
            const char *s2 = ts_source(ts, &l2);
            same = !s2 == !src && (!s2 || (l2 == slen && memcmp(s2, g->names + off[nr], slen) == 0));
        }
        if (same) {
            for (size_t i = 0; i < nr; i++)
                if (g->dst[i] && (kflags & CMD_WRITE))
                    ks_entry_prepare_write(ks, g->dst[i]);
            return true;
        }
        memset(g->seen, 0, sizeof(g->seen));
        memset(g->dst, 0, sizeof(g->dst));
        g->src_seen = g->src_live = false;
        cmd_key_close(&g->h, false);
    }
gone:   /* refused (NOT_FOUND, WRONGTYPE) and closed */
    free(g->names);
    g->names = NULL;
    return false;
}

bool ts_group_open(cmd_ctx_t *ctx, const char *key, size_t klen, unsigned flags, ts_group_t *g)
{
    return ts_group_open_with(ctx, key, klen, flags, NULL, 0, g);
}

void ts_group_compact(ts_group_t *g, int64_t old_newest, const int64_t *t, size_t n, int64_t from, int64_t to)
{
    ts_t *src = cmd_key_value(&g->h);
    if (!src || g->n == 1)
        return;
    for (size_t i = ts_rule_count(src); i-- > 0;) {
        if (!g->seen[i])
            continue;
        if (!g->dst[i]) {
            ts_rule_remove(src, i);
            continue;
        }
        ts_rule_touch(src, i, old_newest, t, n, from, to);
        ts_rule_t r = ts_rule_at(src, i);
        ts_t *dst = ks_entry_value(g->dst[i]);
        /* a failure (out of memory) leaves that bucket as it was */
        (void)(t ? ts_rule_added(src, &r, old_newest, t, n, dst) : ts_rule_deleted(src, &r, from, to, dst));
        ks_entry_changed(g->h.ctx->srv->ks, g->dst[i]);
    }
}

void ts_group_close(ts_group_t *g, bool changed)
{
    cmd_key_close(&g->h, changed);
    free(g->names);
    g->names = NULL;
}

bool ts_make_room(cmd_ctx_t *ctx, const char *key, size_t klen, uint64_t bytes)
{
    if (!ctx->replay && (ks_over_limit(ctx->srv->ks) || bytes > cmd_room_now(ctx))) {
        bool undo = ctx->undo_on;   /* a look, not a change: nothing to take back */
        ctx->undo_on = false;
        ts_group_t g;
        bool ok = ts_group_open(ctx, key, klen, CMD_READ, &g);
        ctx->undo_on = undo;
        if (!ok)
            return false;
        ts_group_close(&g, false);
    }
    return cmd_make_room(ctx) && cmd_make_room_for_key(ctx, bytes + ks_entry_overhead(klen), key, klen, 0);
}

bool ts_open_latest(cmd_ctx_t *ctx, const char *key, size_t klen, bool latest, cmd_key_t *h, ks_key_t keys[2],
                    ts_query_t *q)
{
    char *src = NULL;
    size_t slen = 0;
    if (!cmd_key_open(ctx, key, klen, &ts_type, CMD_MUST_EXIST, h))
        return false;
    if (!latest || !ts_copy_source(cmd_key_value(h), &src, &slen))
        return true;
    cmd_key_close(h, false);
    keys[0] = ks_key(ctx->srv->ks, key, klen);
    keys[1] = ks_key(ctx->srv->ks, src, slen);
    ks_entry_t *de, *se;
    if (!cmd_keys_lock(ctx, keys, 2, h)) {
        free(src);
        return false;
    }
    bool ok = cmd_keys_find(h, 1, NULL, CMD_READ, NULL, &se) &&
              cmd_keys_find(h, 0, &ts_type, CMD_MUST_EXIST, NULL, &de);
    if (ok && ts_dst_live(de, src, slen) && se && ks_entry_type(se) == &ts_type) {
        const ts_t *s = ks_entry_value(se), *d = ks_entry_value(de);
        long i = ts_rule_find(s, key, klen);
        ts_sample_t last = { -1, 0 };
        ts_last(d, &last);
        if (i >= 0) {
            ts_rule_t r = ts_rule_at(s, (size_t)i);
            q->has_extra = ts_rule_open_bucket(s, &r, &q->extra) && q->extra.ts > last.ts;
        }
    }
    h->e = ok ? de : NULL;
    free(src);
    return ok;
}
