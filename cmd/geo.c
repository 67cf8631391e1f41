/* geo.c - Redis's GEO commands as operations: see geo.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/batch.h"
#include "cmd/geo.h"
#include "cmd/keys.h"
#include "cmd/room.h"
#include "core/geohash.h"

/* What GEOADD and ZREM records hold of members: keys' text. */
#define MEMBERS (CMD_ITEMS_KEYS | CMD_ITEMS_TEXT)

/* ------------------------------------------------------------------------ */
/* GEOADD                                                                   */
/* ------------------------------------------------------------------------ */

/* One applied change, for rolling back a batch that runs out of memory. */
typedef struct undo {
    size_t item;
    bool added;
    uint64_t old_score;
} undo_t;

static bool geoadd(cmd_ctx_t *ctx, const cmd_geoadd_args_t *a, const cmd_items_view_t *it, undo_t *undo,
                   cmd_geo_res_t *r)
{
    size_t n = a->members.n;
    if (!cmd_make_room(ctx))
        return false;
    uint64_t member_bytes = 0;
    for (size_t i = 0; i < n; i++)
        member_bytes += it->len[i];

    cmd_key_t hk;
    geo_t *g;
    for (unsigned attempts = 0;;) {
        if (!cmd_key_open(ctx, a->key, a->klen, &geo_type, CMD_WRITE, &hk))
            return false;
        g = cmd_key_value(&hk);
        if (!g && a->xx) {   /* XX on a missing key: nothing to update, no key created */
            cmd_key_close(&hk, false);
            r->n = 0;
            return true;
        }
        /* room for what the members may add, known once the set is */
        uint64_t add = geo_add_bound(g, n, member_bytes) + (g ? 0 : ks_entry_overhead(a->klen));
        if (!cmd_value_fits(ctx, "members", "the geo set", (g ? geo_memory(g) : 0) + add)) {
            cmd_key_close(&hk, false);
            return false;
        }
        if (add <= cmd_room_now(ctx))
            break;
        ks_key_t kk = ks_key(ctx->srv->ks, a->key, a->klen);
        cmd_keep_t keep = { &kk, 1, g ? geo_memory(g) : 0 };   /* not evicted for its own growth */
        cmd_key_close(&hk, false);
        if (!cmd_room_retry(ctx, add, &keep, &attempts))
            return false;
    }
    bool fresh = g == NULL;
    if (fresh && !(g = geo_create())) {
        cmd_key_close(&hk, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory creating the geo set");
    }
    geo_add_mode_t mode = a->nx ? GEO_ADD_NX : a->xx ? GEO_ADD_XX : GEO_ADD;
    size_t added = 0, nundo = 0;   /* added: the answer (new members, plus moved ones with ch) */
    bool oom = false;
    for (size_t i = 0; i < n && !oom; i++) {
        uint64_t old = 0;
        geo_score(g, it->p[i], it->len[i], &old);
        switch (geo_set(g, it->p[i], it->len[i], it->num[i], mode)) {
        case GEO_SET_ADDED:
            added++;
            undo[nundo++] = (undo_t){ i, true, 0 };
            break;
        case GEO_SET_UPDATED:   /* the score changed (an equal position is UNCHANGED) */
            if (a->ch)
                added++;
            undo[nundo++] = (undo_t){ i, false, old };
            break;
        case CORE_NOMEM:
            oom = true;
            break;
        default:
            break;
        }
    }
    if (oom) {   /* put everything back: a failed request changes nothing */
        while (nundo--) {
            const undo_t *u = &undo[nundo];
            if (u->added)
                geo_remove(g, it->p[u->item], it->len[u->item]);
            else
                geo_set(g, it->p[u->item], it->len[u->item], u->old_score, GEO_ADD);
        }
        if (fresh)
            geo_free(g);
        else
            ks_entry_changed(ctx->srv->ks, hk.e);
        cmd_key_close(&hk, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory adding members");
    }
    if (fresh && !cmd_key_add(&hk, &geo_type, g, KS_NO_EXPIRY)) {
        geo_free(g);
        cmd_key_close(&hk, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the geo set");
    }
    if (!fresh)
        ks_entry_changed(ctx->srv->ks, hk.e);
    cmd_key_close(&hk, nundo > 0);
    r->n = added;
    return true;
}

static bool run_geoadd(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_geoadd_args_t *a = args;
    cmd_geo_res_t *r = res;
    memset(r, 0, sizeof(*r));
    undo_t *undo = malloc(a->members.n * sizeof(*undo));
    cmd_items_view_t it;
    if (!undo || !cmd_items_view(&a->members, &it)) {
        free(undo);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    bool ok = geoadd(ctx, a, &it, undo, r);
    cmd_items_view_free(&it);
    free(undo);
    return ok;
}

/* Record: u8 version 1 | key | u8 flags (1 nx, 2 xx, 4 ch) | members with
 * their scores. */
static void encode_geoadd(const void *args, wbuf_t *out)
{
    const cmd_geoadd_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u8(out, (uint8_t)((a->nx ? 1 : 0) | (a->xx ? 2 : 0) | (a->ch ? 4 : 0)));
    cmd_items_put(out, &a->members);
}

static bool decode_geoadd(rbuf_t *in, void *args, const char **why)
{
    cmd_geoadd_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    uint8_t flags = rbuf_u8(in);
    if (in->err || flags > 7 || (flags & 3) == 3 ||
        !cmd_items_get(in, MEMBERS | CMD_ITEMS_NUM, 1, CMD_ITEMS_MAX, &a->members)) {
        *why = "bad members";
        return false;
    }
    a->nx = flags & 1;
    a->xx = flags & 2;
    a->ch = flags & 4;
    /* scores are 52-bit geohashes */
    cmd_items_iter_t iter = { 0 };
    const char *m;
    size_t len;
    uint64_t score;
    while (cmd_items_next(&a->members, &iter, &m, &len, &score))
        if (score >> (2 * GEO_STEP_MAX)) {
            *why = "bad score";
            return false;
        }
    return true;
}

/* ------------------------------------------------------------------------ */
/* ZREM                                                                     */
/* ------------------------------------------------------------------------ */

static bool run_zrem(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_geo_members_args_t *a = args;
    cmd_geo_res_t *r = res;
    memset(r, 0, sizeof(*r));
    cmd_key_t hk;
    if (!cmd_key_open(ctx, a->key, a->klen, &geo_type, CMD_WRITE, &hk))
        return false;
    geo_t *g = cmd_key_value(&hk);
    size_t removed = 0;
    if (g) {
        cmd_items_iter_t it = { 0 };
        const char *m;
        size_t len;
        while (cmd_items_next(&a->members, &it, &m, &len, NULL))
            removed += geo_remove(g, m, len);
        if (geo_count(g) == 0)
            cmd_key_delete(&hk);   /* like Redis, an empty set is no key */
        else
            ks_entry_changed(ctx->srv->ks, hk.e);
    }
    cmd_key_close(&hk, removed > 0);
    r->n = removed;
    return true;
}

/* Record: u8 version 1 | key | members. */
static void encode_zrem(const void *args, wbuf_t *out)
{
    const cmd_geo_members_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    cmd_items_put(out, &a->members);
}

static bool decode_zrem(rbuf_t *in, void *args, const char **why)
{
    cmd_geo_members_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    if (!cmd_items_get(in, MEMBERS, 1, CMD_ITEMS_MAX, &a->members)) {
        *why = "bad members";
        return false;
    }
    a->scores = NULL;
    a->found = NULL;
    return true;
}

/* ------------------------------------------------------------------------ */
/* GEOPOS, GEOHASH, GEODIST                                                 */
/* ------------------------------------------------------------------------ */

static bool run_scores(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_geo_members_args_t *a = args;
    cmd_geo_res_t *r = res;
    memset(r, 0, sizeof(*r));
    cmd_key_t hk;
    if (!cmd_key_open(ctx, a->key, a->klen, &geo_type, CMD_READ, &hk))
        return false;
    const geo_t *g = cmd_key_value(&hk);
    r->count = g ? geo_count(g) : 0;
    cmd_items_iter_t it = { 0 };
    const char *m;
    size_t len;
    for (size_t i = 0; cmd_items_next(&a->members, &it, &m, &len, NULL); i++) {
        a->found[i] = g && geo_score(g, m, len, &a->scores[i]);
        r->n += a->found[i];
    }
    cmd_key_close(&hk, false);
    return true;
}

static bool run_geodist(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_geodist_args_t *a = args;
    cmd_geo_res_t *r = res;
    memset(r, 0, sizeof(*r));
    cmd_key_t hk;
    if (!cmd_key_open(ctx, a->key, a->klen, &geo_type, CMD_READ, &hk))
        return false;
    const geo_t *g = cmd_key_value(&hk);
    uint64_t s1, s2;
    r->found = g && geo_score(g, a->from, a->flen, &s1) && geo_score(g, a->to, a->tlen, &s2);
    cmd_key_close(&hk, false);
    if (r->found) {
        double x1, y1, x2, y2;
        geohash_decode_score(s1, &x1, &y1);
        geohash_decode_score(s2, &x2, &y2);
        r->distance = geo_distance(x1, y1, x2, y2) / a->to_m;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* GEOSEARCH, GEOSEARCHSTORE                                                */
/* ------------------------------------------------------------------------ */

/* Runs the search of a on g (a member centre decoded first): false with
 * the error set (NOT_FOUND for a centre member not in the set, OOM). */
static bool search(cmd_ctx_t *ctx, const geo_t *g, const cmd_geosearch_args_t *a, geo_hit_t **hits, size_t *n)
{
    geo_query_t q = a->q;
    if (a->member) {
        uint64_t score;
        if (!geo_score(g, a->member, a->mlen, &score))
            return cmd_fail(ctx, CMD_E_NOT_FOUND, "member",
                            "could not decode requested zset member: '%.*s' is not in this geo set",
                            (int)(a->mlen > 200 ? 200 : a->mlen), a->member);
        geohash_decode_score(score, &q.shape.lon, &q.shape.lat);
    }
    if (!geo_search(g, &q, hits, n))
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory searching");
    return true;
}

/* The hits with their members copied (they point into the set): one block,
 * the hits then the members' bytes.  NULL when out of memory. */
static geo_hit_t *copy_hits(const geo_hit_t *hits, size_t n)
{
    size_t bytes = n * sizeof(*hits);
    for (size_t i = 0; i < n; i++)
        bytes += hits[i].len;
    geo_hit_t *out = malloc(bytes ? bytes : 1);
    if (!out)
        return NULL;
    char *text = (char *)(out + n);
    for (size_t i = 0; i < n; i++) {
        out[i] = hits[i];
        memcpy(text, hits[i].member, hits[i].len);
        out[i].member = text;
        text += hits[i].len;
    }
    return out;
}

static bool run_geosearch(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_geosearch_args_t *a = args;
    cmd_geo_res_t *r = res;
    memset(r, 0, sizeof(*r));
    cmd_key_t hk;
    if (!cmd_key_open(ctx, a->key, a->klen, &geo_type, CMD_READ, &hk))
        return false;
    const geo_t *g = cmd_key_value(&hk);
    if (!g) {   /* as Redis: a missing key has no members, even around a member */
        cmd_key_close(&hk, false);
        return true;
    }
    geo_hit_t *hits;
    size_t n;
    if (!search(ctx, g, a, &hits, &n)) {
        cmd_key_close(&hk, false);
        return false;
    }
    /* the answer's size is known before it is written: each member's text
     * escaped at worst, and the numbers asked for */
    uint64_t estimate = 16;
    for (size_t i = 0; i < n; i++)
        estimate += 6 * (uint64_t)hits[i].len + 2 + 16 + (a->withdist ? 24 : 0) + (a->withhash ? 28 : 0) +
                    (a->withcoord ? 56 : 0);
    if (!cmd_answer_fits(ctx, estimate, "lower count, or narrow the radius or box")) {
        cmd_key_close(&hk, false);
        free(hits);
        return false;
    }
    /* members point into the set: copied before unlocking */
    r->hits = copy_hits(hits, n);
    cmd_key_close(&hk, false);
    free(hits);
    if (!r->hits)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory building the answer");
    r->n = n;
    return true;
}

void cmd_geo_res_free(cmd_geo_res_t *r)
{
    free(r->hits);
    r->hits = NULL;
}

static bool run_geosearchstore(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_geosearch_args_t *a = args;
    cmd_geo_res_t *r = res;
    memset(r, 0, sizeof(*r));
    ks_key_t keys[2] = { ks_key(ctx->srv->ks, a->key, a->klen), ks_key(ctx->srv->ks, a->source, a->slen) };
    /* the token's prefixes before eviction makes room: a refused request changes nothing */
    if (!cmd_keys_allowed_here(ctx, keys, 2) || !cmd_make_room(ctx))
        return false;
    for (unsigned attempts = 0;;) {
        cmd_key_t h;
        ks_entry_t *se;
        if (!cmd_keys_lock(ctx, keys, 2, &h) || !cmd_keys_find(&h, 1, &geo_type, CMD_READ, "source", &se) ||
            !cmd_keys_find(&h, 0, &geo_type, CMD_WRITE, "destination", NULL))
            return false;
        const geo_t *src = se ? ks_entry_value(se) : NULL;
        geo_hit_t *hits = NULL;
        size_t n = 0;
        if (src && !search(ctx, src, a, &hits, &n)) {
            cmd_key_close(&h, false);
            return false;
        }
        /* room for the new set, built while the old one still exists */
        uint64_t member_bytes = 0;
        for (size_t i = 0; i < n; i++)
            member_bytes += hits[i].len;
        uint64_t after = n ? geo_add_bound(NULL, n, member_bytes) : 0,
                 before = h.e ? geo_memory(cmd_key_value(&h)) : 0;
        uint64_t add = after ? after + (h.e ? 0 : ks_entry_overhead(a->klen)) : 0;
        cmd_keep_t keep = { keys, 2, before + (src ? geo_memory(src) : 0) };
        if (!cmd_value_fits(ctx, NULL, "the stored set", after)) {
            cmd_key_close(&h, false);
            free(hits);
            return false;
        }
        if (add > cmd_room_now(ctx)) {
            cmd_key_close(&h, false);
            free(hits);
            if (!cmd_room_retry(ctx, add, &keep, &attempts))
                return false;
            continue;
        }
        geo_t *out = n ? geo_create() : NULL;
        for (size_t i = 0; out && i < n; i++)
            if (geo_set(out, hits[i].member, hits[i].len, hits[i].score, GEO_ADD) < 0) {
                geo_free(out);
                out = NULL;
            }
        free(hits);
        if (n && !out) {
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the results");
        }
        bool changed = h.e != NULL || out;
        if (h.e && out) {
            cmd_key_replace(&h, out);
            ks_entry_set_expire(ctx->srv->ks, &h.e, KS_NO_EXPIRY);   /* a new value: Redis's store drops the TTL */
        } else if (h.e) {
            cmd_key_delete(&h);
        } else if (out && !cmd_key_add(&h, &geo_type, out, KS_NO_EXPIRY)) {
            geo_free(out);
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing the results");
        }
        cmd_key_close(&h, changed);
        r->n = n;
        return true;
    }
}

/* Record: u8 version 1 | key | source key | u8 has_member [| varint len |
 * member] | u8 shape kind | f64 lon | f64 lat | f64 radius | f64 width |
 * f64 height | f64 to_m | u64 count | u8 any | u8 sort. */
static void encode_geosearchstore(const void *args, wbuf_t *out)
{
    const cmd_geosearch_args_t *a = args;
    const geo_shape_t *s = &a->q.shape;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    cmd_put_key(out, a->source, a->slen);
    wbuf_put_u8(out, a->member != NULL);
    if (a->member) {
        cmd_put_varint(out, (uint32_t)a->mlen);
        wbuf_put_bytes(out, a->member, a->mlen);
    }
    wbuf_put_u8(out, (uint8_t)s->kind);
    wbuf_put_f64(out, s->lon);
    wbuf_put_f64(out, s->lat);
    wbuf_put_f64(out, s->radius);
    wbuf_put_f64(out, s->width);
    wbuf_put_f64(out, s->height);
    wbuf_put_f64(out, s->to_m);
    wbuf_put_u64(out, a->q.count);
    wbuf_put_u8(out, a->q.any);
    wbuf_put_u8(out, (uint8_t)a->q.sort);
}

static bool finite_size(double v) { return isfinite(v) && v >= 0; }

static bool decode_geosearchstore(rbuf_t *in, void *args, const char **why)
{
    cmd_geosearch_args_t *a = args;
    geo_shape_t *s = &a->q.shape;
    memset(a, 0, sizeof(*a));
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    if (!cmd_get_key(in, &a->source, &a->slen)) {
        *why = "bad source";
        return false;
    }
    uint8_t has_member = rbuf_u8(in);
    if (has_member == 1) {
        uint32_t len;
        const uint8_t *p = cmd_get_varint(in, &len) ? rbuf_bytes(in, len) : NULL;
        if (!p || len == 0 || len > GEO_MEMBER_MAX || !codec_text_ok(p, len)) {
            *why = "bad member";
            return false;
        }
        a->member = (const char *)p;
        a->mlen = len;
    } else if (has_member != 0) {
        *why = "bad member";
        return false;
    }
    uint8_t kind = rbuf_u8(in);
    s->lon = rbuf_f64(in);
    s->lat = rbuf_f64(in);
    s->radius = rbuf_f64(in);
    s->width = rbuf_f64(in);
    s->height = rbuf_f64(in);
    s->to_m = rbuf_f64(in);
    a->q.count = rbuf_u64(in);
    uint8_t any = rbuf_u8(in), sort = rbuf_u8(in);
    if (in->err || kind > GEO_SHAPE_BOX || any > 1 || sort > GEO_SORT_DESC || (any && !a->q.count)) {
        *why = "bad query";
        return false;
    }
    s->kind = kind;
    a->q.any = any;
    a->q.sort = sort;
    bool centre = a->member ? s->lon == 0 && s->lat == 0 : geo_valid_lonlat(s->lon, s->lat);
    bool size = kind == GEO_SHAPE_RADIUS ? finite_size(s->radius) && s->width == 0 && s->height == 0
                                         : finite_size(s->width) && finite_size(s->height) && s->radius == 0;
    bool unit = s->to_m == GEO_UNIT_M || s->to_m == GEO_UNIT_KM || s->to_m == GEO_UNIT_FT || s->to_m == GEO_UNIT_MI;
    if (!centre || !size || !unit || a->q.count > INT64_MAX) {
        *why = "bad shape";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* ZRANGE                                                                   */
/* ------------------------------------------------------------------------ */

/* The members visited in order, pointing into the set. */
typedef struct zcollect {
    const cmd_zrange_args_t *a;
    geo_hit_t *a_hits;
    size_t n, cap;
    uint64_t index, from, to;    /* by rank: keep [from, to] */
    uint64_t skip, take;         /* by score, forward: LIMIT's (take UINT64_MAX: all) */
    bool oom;
} zcollect_t;

static bool zkeep(zcollect_t *z, uint64_t score, const char *member, size_t len)
{
    if (z->n == z->cap) {
        size_t cap = z->cap ? z->cap * 2 : 16;
        geo_hit_t *h = realloc(z->a_hits, cap * sizeof(*h));
        if (!h) {
            z->oom = true;
            return false;
        }
        z->a_hits = h;
        z->cap = cap;
    }
    z->a_hits[z->n++] = (geo_hit_t){ .member = member, .len = len, .score = score };
    return true;
}

static bool zvisit(void *ud, uint64_t score, const char *member, size_t len)
{
    zcollect_t *z = ud;
    const cmd_zrange_args_t *a = z->a;
    if (!a->by_score) {
        uint64_t i = z->index++;
        if (i < z->from)
            return true;
        return zkeep(z, score, member, len) && i < z->to;
    }
    double d = (double)score;
    if (a->minex ? !(d > a->min) : !(d >= a->min))
        return true;
    if (a->maxex ? !(d < a->max) : !(d <= a->max))
        return false;   /* past the range: scores only grow */
    if (a->rev)
        return zkeep(z, score, member, len);   /* LIMIT counts from the top: applied after */
    if (z->skip) {
        z->skip--;
        return true;
    }
    if (z->take == 0)
        return false;
    z->take--;
    return zkeep(z, score, member, len) && z->take > 0;
}

/* The uint64 score range [*lo, *hi) holding every score of [min, max]. */
static bool zscore_span(double min, double max, uint64_t *lo, uint64_t *hi)
{
    if (max < 0 || min >= 0x1p63)
        return false;
    *lo = min <= 0 ? 0 : (uint64_t)floor(min);
    *hi = max >= 0x1p63 ? UINT64_MAX : (uint64_t)floor(max) + 1;
    return true;
}

static bool run_zrange(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_zrange_args_t *a = args;
    cmd_geo_res_t *r = res;
    memset(r, 0, sizeof(*r));
    cmd_key_t hk;
    if (!cmd_key_open(ctx, a->key, a->klen, &geo_type, CMD_READ, &hk))
        return false;
    const geo_t *g = cmd_key_value(&hk);
    zcollect_t z = { .a = a, .take = UINT64_MAX };
    if (g && !a->by_score) {
        /* genericZrangebyrankCommand's indexes */
        int64_t len = (int64_t)geo_count(g), start = a->start, stop = a->stop;
        if (start < 0)
            start += len;
        if (stop < 0)
            stop += len;
        if (start < 0)
            start = 0;
        if (!(start > stop || start >= len)) {
            if (stop >= len)
                stop = len - 1;
            z.from = (uint64_t)(a->rev ? len - 1 - stop : start);
            z.to = (uint64_t)(a->rev ? len - 1 - start : stop);
            geo_range(g, 0, UINT64_MAX, zvisit, &z);
        }
    } else if (g && a->offset >= 0 && a->limit != 0) {
        /* genericZrangebyscoreCommand: a negative offset skips everything */
        uint64_t lo, hi;
        z.skip = (uint64_t)a->offset;
        z.take = a->limit < 0 ? UINT64_MAX : (uint64_t)a->limit;
        if (zscore_span(a->min, a->max, &lo, &hi))
            geo_range(g, lo, hi, zvisit, &z);
    }
    if (z.oom) {
        cmd_key_close(&hk, false);
        free(z.a_hits);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory reading the range");
    }
    geo_hit_t *h = z.a_hits;
    size_t n = z.n;
    if (a->rev) {   /* highest first */
        for (size_t i = 0; i < n / 2; i++) {
            geo_hit_t t = h[i];
            h[i] = h[n - 1 - i];
            h[n - 1 - i] = t;
        }
        if (a->by_score) {   /* LIMIT from the top */
            uint64_t off = (uint64_t)a->offset, take = a->limit < 0 ? UINT64_MAX : (uint64_t)a->limit;
            size_t from = off < n ? (size_t)off : n;
            size_t keep = n - from < take ? n - from : (size_t)take;
            if (from)
                memmove(h, h + from, keep * sizeof(*h));
            n = keep;
        }
    }
    uint64_t estimate = 16;
    for (size_t i = 0; i < n; i++)
        estimate += (uint64_t)h[i].len + 16 + (a->withscores ? 32 : 0);
    if (!cmd_answer_fits(ctx, estimate, "ask a shorter range, or use LIMIT")) {
        cmd_key_close(&hk, false);
        free(h);
        return false;
    }
    r->hits = copy_hits(h, n);
    cmd_key_close(&hk, false);
    free(h);
    if (!r->hits)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory building the answer");
    r->n = n;
    return true;
}

/* GEOSEARCHSTORE: the destination, then the set searched. */
static bool keys_store(const void *args, cmd_key_visit_t visit, void *ud)
{
    const cmd_geosearch_args_t *a = args;
    return visit(ud, a->key, a->klen) && visit(ud, a->source, a->slen);
}

const cmd_def_t CMD_GEOADD = { "GEOADD", CMD_ID_GEOADD, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE, run_geoadd,
                               encode_geoadd, decode_geoadd, sizeof(cmd_geoadd_args_t), sizeof(cmd_geo_res_t),
                               cmd_keys_first };
const cmd_def_t CMD_ZREM = { "ZREM", CMD_ID_ZREM, CMD_F_WRITE, CMD_ACCESS_WRITE, run_zrem, encode_zrem, decode_zrem,
                             sizeof(cmd_geo_members_args_t), sizeof(cmd_geo_res_t), cmd_keys_first };
const cmd_def_t CMD_GEOPOS = { "GEOPOS", CMD_ID_GEOPOS, 0, CMD_ACCESS_READ, run_scores, NULL, NULL,
                               sizeof(cmd_geo_members_args_t), sizeof(cmd_geo_res_t), cmd_keys_first };
const cmd_def_t CMD_GEOHASH = { "GEOHASH", CMD_ID_GEOHASH, 0, CMD_ACCESS_READ, run_scores, NULL, NULL,
                                sizeof(cmd_geo_members_args_t), sizeof(cmd_geo_res_t), cmd_keys_first };
const cmd_def_t CMD_GEODIST = { "GEODIST", CMD_ID_GEODIST, 0, CMD_ACCESS_READ, run_geodist, NULL, NULL,
                                sizeof(cmd_geodist_args_t), sizeof(cmd_geo_res_t), cmd_keys_first };
const cmd_def_t CMD_GEOSEARCH = { "GEOSEARCH", CMD_ID_GEOSEARCH, 0, CMD_ACCESS_READ, run_geosearch, NULL, NULL,
                                  sizeof(cmd_geosearch_args_t), sizeof(cmd_geo_res_t), cmd_keys_first };
const cmd_def_t CMD_GEOSEARCHSTORE = { "GEOSEARCHSTORE", CMD_ID_GEOSEARCHSTORE, CMD_F_WRITE | CMD_F_DENYOOM,
                                       CMD_ACCESS_WRITE, run_geosearchstore, encode_geosearchstore,
                                       decode_geosearchstore, sizeof(cmd_geosearch_args_t), sizeof(cmd_geo_res_t),
                                       keys_store };
const cmd_def_t CMD_ZRANGE = { "ZRANGE", CMD_ID_ZRANGE, 0, CMD_ACCESS_READ, run_zrange, NULL, NULL,
                               sizeof(cmd_zrange_args_t), sizeof(cmd_geo_res_t), cmd_keys_first };
