/*
 * ts_write.c - the time series operations that change samples and
 * settings: TS.CREATE, TS.ADD, TS.INCRBY, TS.DECRBY, TS.ALTER, TS.DEL
 * (cmd/ts.h), and their journal records.
 *
 * Records (little-endian; key = u32 length + bytes, cmd_put_key; blob = u32
 * length + bytes):
 *
 *   opts        i64 retention_ms | u8 policy | labels
 *   labels      u32 n | n x (blob name | blob value)
 *   TS.CREATE   u8 1 | key | opts
 *   TS.ADD      u8 1 | key | opts | u8 has_on_duplicate | u8 on_duplicate
 *               | u32 n | n x (i64 timestamp | f64 value)
 *   TS.INCRBY,  u8 1 | key | opts | f64 by | i64 timestamp
 *   TS.DECRBY
 *   TS.ALTER    u8 1 | key | u8 what (1 retention, 2 policy, 4 labels)
 *               | i64 retention_ms | u8 policy | labels
 *   TS.DEL      u8 1 | key | i64 from | i64 to
 *
 * Timestamps are resolved before they are recorded ("*" is the time the
 * request was served), so replay adds the same samples.  A decoder accepts
 * only what these operations take: labels within the bounds ts_create
 * holds (non-empty UTF-8 text without NUL, distinct names), timestamps
 * >= 0, values finite or NaN.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/batch.h"
#include "cmd/keys.h"
#include "cmd/room.h"
#include "cmd/ts.h"
#include "cmd/ts_group.h"
#include "cmd/ts_index.h"

/* ------------------------------------------------------------------------ */
/* Record fields                                                            */
/* ------------------------------------------------------------------------ */

const ts_label_t *cmd_ts_labels_get(const cmd_ts_labels_t *l, ts_label_t out[TS_MAX_LABELS])
{
    if (l->v || !l->n)
        return l->v;
    rbuf_t in = rbuf_make(l->packed, SIZE_MAX / 2);   /* validated when decoded */
    for (size_t i = 0; i < l->n && i < TS_MAX_LABELS; i++) {
        size_t nl, vl;
        const uint8_t *np = rbuf_blob(&in, &nl);
        const uint8_t *vp = rbuf_blob(&in, &vl);
        out[i] = (ts_label_t){ (const char *)np, nl, (const char *)vp, vl };
    }
    return out;
}

static void put_labels(wbuf_t *out, const cmd_ts_labels_t *l)
{
    ts_label_t buf[TS_MAX_LABELS];
    const ts_label_t *v = cmd_ts_labels_get(l, buf);
    wbuf_put_u32(out, (uint32_t)l->n);
    for (size_t i = 0; i < l->n; i++) {
        wbuf_put_blob(out, v[i].name, v[i].name_len);
        wbuf_put_blob(out, v[i].value, v[i].value_len);
    }
}

static bool label_text_ok(const uint8_t *p, size_t n)
{
    return p && n > 0 && n <= TS_MAX_LABEL_LEN && codec_text_ok(p, n);
}

static bool get_labels(rbuf_t *in, cmd_ts_labels_t *l, const char **why)
{
    uint32_t n = rbuf_u32(in);
    l->v = NULL;
    l->packed = in->err ? NULL : in->p + in->off;
    l->n = n;
    if (in->err || n > TS_MAX_LABELS) {
        *why = "bad label count";
        return false;
    }
    ts_label_t seen[TS_MAX_LABELS];
    for (uint32_t i = 0; i < n; i++) {
        size_t nl, vl;
        const uint8_t *np = rbuf_blob(in, &nl);
        const uint8_t *vp = rbuf_blob(in, &vl);
        if (!label_text_ok(np, nl) || !label_text_ok(vp, vl)) {
            *why = "bad label";
            return false;
        }
        for (uint32_t k = 0; k < i; k++)
            if (seen[k].name_len == nl && memcmp(seen[k].name, np, nl) == 0) {
                *why = "duplicate label";
                return false;
            }
        seen[i] = (ts_label_t){ (const char *)np, nl, (const char *)vp, vl };
    }
    return true;
}

static void put_opts(wbuf_t *out, const cmd_ts_opts_t *o)
{
    wbuf_put_i64(out, o->retention_ms);
    wbuf_put_u8(out, (uint8_t)o->policy);
    put_labels(out, &o->labels);
}

static bool get_policy(rbuf_t *in, ts_policy_t *p)
{
    uint8_t v = rbuf_u8(in);
    *p = (ts_policy_t)v;
    return !in->err && v < TS_DUP__COUNT;
}

static bool get_opts(rbuf_t *in, cmd_ts_opts_t *o, const char **why)
{
    o->retention_ms = rbuf_i64(in);
    if (!get_policy(in, &o->policy) || o->retention_ms < 0) {
        *why = "bad retention or policy";
        return false;
    }
    return get_labels(in, &o->labels, why);
}

/* A timestamp a series takes. */
static bool get_timestamp(rbuf_t *in, int64_t *t)
{
    *t = rbuf_i64(in);
    return !in->err && *t >= 0;
}

/* ------------------------------------------------------------------------ */
/* TS.CREATE                                                                */
/* ------------------------------------------------------------------------ */

static ts_t *create_series(const cmd_ts_opts_t *o)
{
    ts_label_t buf[TS_MAX_LABELS];
    return ts_create(o->retention_ms, o->policy, cmd_ts_labels_get(&o->labels, buf), o->labels.n);
}

static bool run_create(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_ts_create_args_t *a = args;
    cmd_ts_created_res_t *r = res;
    if (!cmd_make_room(ctx))
        return false;
    /* indexed before it is stored: the index may list a key that is not
     * (yet) a series, never miss one */
    ts_t *ts = create_series(&a->opts);
    if (!ts)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory creating the %s", ts_type.name);
    ts_index_note(ctx, a->key, a->klen, ts);
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &ts_type, CMD_READ, &h)) {
        ts_free(ts);
        return false;
    }
    if (h.e) {
        cmd_key_close(&h, false);
        ts_free(ts);
        return cmd_fail(ctx, CMD_E_EXISTS, NULL, "a %s already exists at this key", ts_type.name);
    }
    if (!cmd_key_add(&h, &ts_type, ts, KS_NO_EXPIRY)) {
        cmd_key_close(&h, false);
        ts_free(ts);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory creating the %s", ts_type.name);
    }
    cmd_key_close(&h, true);
    r->created = true;
    return true;
}

static void encode_create(const void *args, wbuf_t *out)
{
    const cmd_ts_create_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    put_opts(out, &a->opts);
}

static bool decode_create(rbuf_t *in, void *args, const char **why)
{
    cmd_ts_create_args_t *a = args;
    return cmd_get_head(in, 1, false, &a->key, &a->klen, why) && get_opts(in, &a->opts, why);
}

/* ------------------------------------------------------------------------ */
/* TS.ADD                                                                   */
/* ------------------------------------------------------------------------ */

/* What adding n samples may add to a series at most (memory limits): a
 * sample's Gorilla bits at worst (a 64-bit timestamp delta and value, with
 * their control bits), two chunks opened or re-encoded, and the request
 * for a new series' labels. */
#define TS_SAMPLE_BOUND 24
#define TS_WRITE_FIXED (2 * (TS_CHUNK_BYTES + 256))
static uint64_t add_bound(uint64_t request_bytes, size_t n)
{
    return (uint64_t)n * TS_SAMPLE_BOUND + TS_WRITE_FIXED + request_bytes;
}

/* The samples as an array: s->v, or a copy unpacked into *own (NULL when
 * out of memory). */
static const ts_sample_t *samples_get(const cmd_ts_samples_t *s, ts_sample_t **own)
{
    *own = NULL;
    if (s->v)
        return s->v;
    if (!(*own = malloc((s->n ? s->n : 1) * sizeof(**own))))
        return NULL;
    rbuf_t in = rbuf_make(s->packed, s->n * 16);
    for (size_t i = 0; i < s->n; i++) {
        (*own)[i].ts = rbuf_i64(&in);
        (*own)[i].value = rbuf_f64(&in);
    }
    return *own;
}

/* The refusal of a batch: sample `failed` of s, with status st. */
static bool add_refused(cmd_ctx_t *ctx, core_status_t st, const ts_sample_t *s, size_t failed, int64_t newest_ts,
                        int64_t retention, ts_policy_t used)
{
    cmd_code_t code = cmd_status_code(st);
    switch (st) {
    case CORE_TOO_OLD:
        return cmd_fail(ctx, code, "samples",
                        "samples[%zu]: timestamp %lld is older than retention (newest %lld, retention_ms %lld); "
                        "nothing was added",
                        failed, (long long)s[failed].ts, (long long)newest_ts, (long long)retention);
    case CORE_DUPLICATE:
        if (used != TS_DUP_BLOCK)
            return cmd_fail(ctx, code, "samples",
                            "samples[%zu]: a sample already exists at timestamp %lld and the duplicate policy %s "
                            "cannot combine a NaN (use first or last); nothing was added",
                            failed, (long long)s[failed].ts, ts_policy_name(used));
        return cmd_fail(ctx, code, "samples",
                        "samples[%zu]: a sample already exists at timestamp %lld and the duplicate policy is "
                        "block (set on_duplicate to first, last, min, max or sum); nothing was added",
                        failed, (long long)s[failed].ts);
    case CORE_OVERFLOW:
        return cmd_fail(ctx, code, "samples",
                        "samples[%zu]: the duplicate policy's result at timestamp %lld is not finite; nothing was "
                        "added",
                        failed, (long long)s[failed].ts);
    default: return cmd_fail(ctx, code, NULL, "out of memory adding samples");
    }
}

static bool run_add(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_ts_add_args_t *a = args;
    cmd_ts_created_res_t *r = res;
    size_t n = a->samples.n;
    ts_sample_t *own;
    const ts_sample_t *s = samples_get(&a->samples, &own);
    if (!s)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    bool ok = false;
    uint64_t bound = add_bound(a->request_bytes, n);
    ts_group_t g;
    if (!ts_make_room(ctx, a->key, a->klen, bound) || !ts_group_open(ctx, a->key, a->klen, CMD_WRITE, &g))
        goto out;
    cmd_key_t *h = &g.h;
    /* A new series gets the samples before it joins the keyspace, so a
     * refused batch leaves no empty key behind. */
    bool created = !h->e;
    if (h->e && !cmd_value_fits(ctx, "samples", "the series", ts_type.size(cmd_key_value(h)) + bound)) {
        ts_group_close(&g, false);
        goto out;
    }
    ts_t *ts = h->e ? cmd_key_value(h) : create_series(&a->opts);
    size_t failed = 0;
    core_status_t st = CORE_NOMEM;
    ts_sample_t newest = { -1, 0 };
    if (ts) {
        ts_last(ts, &newest);
        st = ts_add(ts, s, n, a->has_on_duplicate ? a->on_duplicate : ts_policy(ts), &failed);
    }
    if (st == CORE_OK && created && !cmd_key_add(h, &ts_type, ts, KS_NO_EXPIRY))
        st = CORE_NOMEM;
    if (st == CORE_OK && created)
        ts_index_note(ctx, a->key, a->klen, ts);
    if (st != CORE_OK) {
        int64_t newest_ts = -1;   /* the newest sample when the failing one came: stored or earlier in the batch */
        if (st == CORE_TOO_OLD) {
            ts_info_t info;
            ts_get_info(ts, &info);
            newest_ts = info.last_ts;
            for (size_t i = 0; i < failed; i++)
                if (s[i].ts > newest_ts)
                    newest_ts = s[i].ts;
        }
        int64_t retention = ts ? ts_retention(ts) : 0;
        ts_policy_t used = a->has_on_duplicate ? a->on_duplicate : ts ? ts_policy(ts) : a->opts.policy;
        if (created)
            ts_free(ts);
        else
            ks_entry_changed(ctx->srv->ks, h->e);   /* unchanged samples, but spare capacity may have moved */
        ts_group_close(&g, false);
        add_refused(ctx, st, s, failed, newest_ts, retention, used);
        goto out;
    }
    int64_t *t = malloc(n * sizeof(*t));
    if (t) {   /* (out of memory: the compactions miss this batch, the samples are stored) */
        for (size_t i = 0; i < n; i++)
            t[i] = s[i].ts;
        ts_group_compact(&g, newest.ts, t, n, 0, 0);
    }
    free(t);
    ts_group_close(&g, true);
    r->created = created;
    ok = true;
out:
    free(own);
    return ok;
}

static void encode_add(const void *args, wbuf_t *out)
{
    const cmd_ts_add_args_t *a = args;
    ts_sample_t *own;
    const ts_sample_t *s = samples_get(&a->samples, &own);
    if (!s) {
        out->oom = true;
        return;
    }
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    put_opts(out, &a->opts);
    wbuf_put_u8(out, a->has_on_duplicate);
    wbuf_put_u8(out, (uint8_t)(a->has_on_duplicate ? a->on_duplicate : 0));
    wbuf_put_u32(out, (uint32_t)a->samples.n);
    if (wbuf_reserve(out, a->samples.n * 16)) {   /* the samples, stored at once: a batch may hold 10 000 */
        uint8_t *p = out->data + out->len;
        for (size_t i = 0; i < a->samples.n; i++, p += 16) {
            uint64_t bits;
            memcpy(&bits, &s[i].value, 8);
            le64_store(p, (uint64_t)s[i].ts);
            le64_store(p + 8, bits);
        }
        out->len += a->samples.n * 16;
    }
    free(own);
}

static bool decode_add(rbuf_t *in, void *args, const char **why)
{
    cmd_ts_add_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why) || !get_opts(in, &a->opts, why))
        return false;
    uint8_t has = rbuf_u8(in);
    if (!get_policy(in, &a->on_duplicate) || has > 1 || (!has && a->on_duplicate != 0)) {
        *why = "bad on_duplicate";
        return false;
    }
    a->has_on_duplicate = has;
    uint32_t n = rbuf_u32(in);
    if (in->err || n == 0 || (uint64_t)n * 16 > rbuf_left(in)) {
        *why = "bad sample count";
        return false;
    }
    a->samples = (cmd_ts_samples_t){ NULL, in->p + in->off, n };
    for (uint32_t i = 0; i < n; i++) {
        int64_t t;
        bool t_ok = get_timestamp(in, &t);
        double v = rbuf_f64(in);
        if (!t_ok || isinf(v)) {
            *why = "bad sample";
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* TS.INCRBY, TS.DECRBY                                                     */
/* ------------------------------------------------------------------------ */

static bool incrby(cmd_ctx_t *ctx, const cmd_ts_incrby_args_t *a, cmd_ts_incrby_res_t *r, bool decr)
{
    double by = decr ? -a->by : a->by;
    int64_t t = a->timestamp;
    if (!ts_make_room(ctx, a->key, a->klen, add_bound(a->request_bytes, 1)))
        return false;
    ts_group_t g;
    if (!ts_group_open(ctx, a->key, a->klen, CMD_WRITE, &g))
        return false;
    bool created = !g.h.e;
    ts_t *ts = g.h.e ? cmd_key_value(&g.h) : create_series(&a->opts);
    double value = 0;
    ts_sample_t last = { -1, 0 };
    if (ts)
        ts_last(ts, &last);
    core_status_t st = ts ? ts_incrby(ts, t, by, &value) : CORE_NOMEM;
    if (st == CORE_OK && created && !cmd_key_add(&g.h, &ts_type, ts, KS_NO_EXPIRY))
        st = CORE_NOMEM;
    if (st == CORE_OK && created)
        ts_index_note(ctx, a->key, a->klen, ts);
    if (st != CORE_OK) {
        if (created)
            ts_free(ts);
        ts_group_close(&g, false);
        if (st == CORE_UNORDERED)
            return cmd_fail(ctx, CMD_E_BAD_REQUEST, "timestamp",
                            "timestamp %lld is before the newest sample (%lld): %s adds at or after it", (long long)t,
                            (long long)last.ts, decr ? "decrby" : "incrby");
        if (st == CORE_OVERFLOW)
            return cmd_fail(ctx, CMD_E_BAD_REQUEST, "by", "%s",
                            isnan(last.value) ? "the newest value is NaN: it cannot be incremented"
                                              : "the result would not be a finite number");
        return cmd_fail(ctx, cmd_status_code(st), NULL, "out of memory adding the sample");
    }
    ts_group_compact(&g, last.ts, &t, 1, 0, 0);
    ts_group_close(&g, true);
    r->timestamp = t;
    r->value = value;
    r->created = created;
    return true;
}

static bool run_incrby(cmd_ctx_t *ctx, const void *args, void *res) { return incrby(ctx, args, res, false); }
static bool run_decrby(cmd_ctx_t *ctx, const void *args, void *res) { return incrby(ctx, args, res, true); }

static void encode_incrby(const void *args, wbuf_t *out)
{
    const cmd_ts_incrby_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    put_opts(out, &a->opts);
    wbuf_put_f64(out, a->by);
    wbuf_put_i64(out, a->timestamp);
}

static bool decode_incrby(rbuf_t *in, void *args, const char **why)
{
    cmd_ts_incrby_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why) || !get_opts(in, &a->opts, why))
        return false;
    a->by = rbuf_f64(in);
    if (!get_timestamp(in, &a->timestamp) || !isfinite(a->by)) {
        *why = "bad increment or timestamp";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* TS.ALTER                                                                 */
/* ------------------------------------------------------------------------ */

static bool run_alter(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_ts_alter_args_t *a = args;
    cmd_ts_created_res_t *r = res;
    if (!cmd_make_room(ctx))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &ts_type, CMD_WRITE | CMD_MUST_EXIST, &h))
        return false;
    ts_t *ts = cmd_key_value(&h);
    ts_label_t buf[TS_MAX_LABELS];
    if (a->has_labels && !ts_set_labels(ts, cmd_ts_labels_get(&a->labels, buf), a->labels.n)) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory setting the labels");
    }
    if (a->has_labels)
        ts_index_note(ctx, a->key, a->klen, ts);
    if (a->has_retention)
        ts_set_retention(ts, a->retention_ms);
    if (a->has_policy)
        ts_set_policy(ts, a->policy);
    cmd_key_close(&h, true);
    r->created = false;
    return true;
}

static void encode_alter(const void *args, wbuf_t *out)
{
    const cmd_ts_alter_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_u8(out, (uint8_t)(a->has_retention | a->has_policy << 1 | a->has_labels << 2));
    wbuf_put_i64(out, a->has_retention ? a->retention_ms : 0);
    wbuf_put_u8(out, (uint8_t)(a->has_policy ? a->policy : 0));
    cmd_ts_labels_t none = { 0 };
    put_labels(out, a->has_labels ? &a->labels : &none);
}

static bool decode_alter(rbuf_t *in, void *args, const char **why)
{
    cmd_ts_alter_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    uint8_t what = rbuf_u8(in);
    a->has_retention = what & 1;
    a->has_policy = what & 2;
    a->has_labels = what & 4;
    a->retention_ms = rbuf_i64(in);
    if (!get_policy(in, &a->policy) || what > 7 || a->retention_ms < 0 || (!a->has_retention && a->retention_ms) ||
        (!a->has_policy && a->policy != 0)) {
        *why = "bad retention or policy";
        return false;
    }
    if (!get_labels(in, &a->labels, why))
        return false;
    if (!a->has_labels && a->labels.n) {
        *why = "labels not asked for";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* TS.DEL                                                                   */
/* ------------------------------------------------------------------------ */

static bool run_del(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_ts_del_args_t *a = args;
    cmd_ts_del_res_t *r = res;
    ts_group_t g;
    if (!ts_group_open(ctx, a->key, a->klen, CMD_WRITE | CMD_MUST_EXIST, &g))
        return false;
    ts_t *ts = cmd_key_value(&g.h);
    /* With live rules, a deletion reaching before the retention window is
     * refused, as RedisTimeSeries refuses it: the destination's bucket was
     * built from samples the source has trimmed since, and recomputing it
     * from what is left would lose them.  A replayed deletion was accepted
     * when served (releases before this check accepted these too, and a
     * refused one is never journaled), so replay applies it as it was. */
    bool beyond = false;
    for (size_t i = 0; !ctx->replay && i < ts_rule_count(ts) && !beyond; i++) {
        ts_rule_t rule = ts_rule_at(ts, i);
        beyond = ts_group_rule_live(&g, i) &&
                 (ts_delete_beyond_retention(ts, NULL, a->from) || ts_delete_beyond_retention(ts, &rule, a->from));
    }
    if (beyond) {
        ts_info_t info;
        ts_get_info(ts, &info);
        ts_group_close(&g, false);
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "from",
                        "the series has compaction rules: deleting samples or compaction buckets beyond its "
                        "retention period (before %lld) is not possible",
                        (long long)(info.last_ts - ts_retention(ts)));
    }
    /* from after to deletes nothing (TS.DEL answers 0) */
    int64_t deleted = a->from > a->to ? 0 : ts_delete_range(ts, a->from, a->to);
    if (deleted > 0)
        ts_group_compact(&g, -1, NULL, 0, a->from, a->to);
    ts_group_close(&g, deleted > 0);
    if (deleted < 0)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory deleting samples");
    r->deleted = deleted;
    return true;
}

static void encode_del(const void *args, wbuf_t *out)
{
    const cmd_ts_del_args_t *a = args;
    wbuf_put_u8(out, 1);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_i64(out, a->from);
    wbuf_put_i64(out, a->to);
}

static bool decode_del(rbuf_t *in, void *args, const char **why)
{
    cmd_ts_del_args_t *a = args;
    if (!cmd_get_head(in, 1, false, &a->key, &a->klen, why))
        return false;
    if (!get_timestamp(in, &a->from) || !get_timestamp(in, &a->to)) {
        *why = "bad range";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* The table's rows                                                         */
/* ------------------------------------------------------------------------ */

const cmd_def_t CMD_TS_CREATE = { "TS.CREATE", CMD_ID_TS_CREATE, CMD_F_WRITE | CMD_F_DENYOOM | CMD_F_STATE_KEYS,
                                  CMD_ACCESS_WRITE, run_create, encode_create, decode_create,
                                  sizeof(cmd_ts_create_args_t), sizeof(cmd_ts_created_res_t), cmd_keys_first };
const cmd_def_t CMD_TS_ADD = { "TS.ADD", CMD_ID_TS_ADD, CMD_F_WRITE | CMD_F_DENYOOM | CMD_F_STATE_KEYS,
                               CMD_ACCESS_WRITE, run_add, encode_add, decode_add, sizeof(cmd_ts_add_args_t),
                               sizeof(cmd_ts_created_res_t), cmd_keys_first };
const cmd_def_t CMD_TS_INCRBY = { "TS.INCRBY", CMD_ID_TS_INCRBY, CMD_F_WRITE | CMD_F_DENYOOM | CMD_F_STATE_KEYS,
                                  CMD_ACCESS_WRITE, run_incrby, encode_incrby, decode_incrby,
                                  sizeof(cmd_ts_incrby_args_t), sizeof(cmd_ts_incrby_res_t), cmd_keys_first };
const cmd_def_t CMD_TS_DECRBY = { "TS.DECRBY", CMD_ID_TS_DECRBY, CMD_F_WRITE | CMD_F_DENYOOM | CMD_F_STATE_KEYS,
                                  CMD_ACCESS_WRITE, run_decrby, encode_incrby, decode_incrby,
                                  sizeof(cmd_ts_incrby_args_t), sizeof(cmd_ts_incrby_res_t), cmd_keys_first };
const cmd_def_t CMD_TS_ALTER = { "TS.ALTER", CMD_ID_TS_ALTER, CMD_F_WRITE | CMD_F_DENYOOM | CMD_F_STATE_KEYS,
                                 CMD_ACCESS_WRITE, run_alter, encode_alter, decode_alter, sizeof(cmd_ts_alter_args_t),
                                 sizeof(cmd_ts_created_res_t), cmd_keys_first };
const cmd_def_t CMD_TS_DEL = { "TS.DEL", CMD_ID_TS_DEL, CMD_F_WRITE | CMD_F_STATE_KEYS, CMD_ACCESS_WRITE, run_del,
                               encode_del, decode_del, sizeof(cmd_ts_del_args_t), sizeof(cmd_ts_del_res_t),
                               cmd_keys_first };
