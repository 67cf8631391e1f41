/*
 * ts_multi.c - queries by labels: TS.QUERYINDEX, TS.MGET, TS.MRANGE and
 * TS.MREVRANGE (cmd/ts.h).  The series are selected (cmd/ts_select.h),
 * then each is read under its own lock, briefly - still a series that
 * matches, or skipped - and the answer assembled from the copies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/keys.h"
#include "cmd/room.h"
#include "cmd/ts.h"
#include "cmd/ts_group.h"
#include "cmd/ts_rows.h"
#include "cmd/ts_select.h"

/* ------------------------------------------------------------------------ */
/* Labels shown                                                             */
/* ------------------------------------------------------------------------ */

/* Copies pairs[0..n) into x's own memory (x->mem); false when out of
 * memory. */
static bool shown_set(cmd_ts_series_t *x, const cmd_ts_shown_t *pairs, size_t n)
{
    size_t bytes = n * sizeof(cmd_ts_shown_t) + 1;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(pairs[i].name) + 1 + (pairs[i].value ? pairs[i].value_len + 1 : 0);
    char *m = malloc(bytes);
    if (!m)
        return false;
    cmd_ts_shown_t *v = (cmd_ts_shown_t *)m;
    char *p = m + n * sizeof(cmd_ts_shown_t);
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(pairs[i].name);
        v[i].name = memcpy(p, pairs[i].name, nl + 1);
        p += nl + 1;
        v[i].value = NULL;
        v[i].value_len = pairs[i].value_len;
        if (pairs[i].value) {
            v[i].value = memcpy(p, pairs[i].value, pairs[i].value_len);
            p[pairs[i].value_len] = '\0';
            p += pairs[i].value_len + 1;
        }
    }
    x->has_labels = true;
    x->labels = v;
    x->nlabels = n;
    x->mem = m;
    return true;
}

/* The labels of a series that sel shows (all, or the named ones: null when
 * the series has none of that name); under its lock. */
static bool shown_of(const ts_t *ts, const cmd_ts_labelsel_t *sel, cmd_ts_series_t *x)
{
    if (!sel->all && !sel->n)
        return true;
    size_t n = sel->all ? ts_label_count(ts) : sel->n;
    cmd_ts_shown_t *pairs = malloc((n ? n : 1) * sizeof(*pairs));
    if (!pairs)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (sel->all) {
            ts_label_t lb = ts_label_at(ts, i);
            pairs[i] = (cmd_ts_shown_t){ lb.name, lb.value, lb.value_len };
        } else {
            size_t vl = 0;
            const char *v = ts_label_get(ts, sel->names[i].p, sel->names[i].len, &vl);
            pairs[i] = (cmd_ts_shown_t){ sel->names[i].p, v, vl };
        }
    }
    bool ok = shown_set(x, pairs, n);
    free(pairs);
    return ok;
}

static void series_free(cmd_ts_series_t *x)
{
    free(x->key);
    free(x->mem);
    free(x->group);
    cmd_ts_rows_free(&x->rows);
    memset(x, 0, sizeof(*x));
}

void cmd_ts_multi_free(cmd_ts_multi_res_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        series_free(&r->v[i]);
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

/* One series of a multi-series answer, read under its lock(s) into x
 * (rows per q, labels, with groupby its value of that label): still a
 * series that matches and has the label, else *gone. */
static core_status_t read_one(cmd_ctx_t *ctx, const char *key, size_t klen, bool latest, ts_query_t *q,
                              const cmd_ts_filter_t *f, const cmd_ts_labelsel_t *sel, const char *groupby,
                              cmd_ts_series_t *x, bool *gone)
{
    cmd_key_t h;
    ks_key_t keys[2];
    q->has_extra = false;
    *gone = true;
    if (!ts_open_latest(ctx, key, klen, latest, &h, keys, q))
        return CORE_OK;   /* gone meanwhile: skipped, not answered */
    const ts_t *ts = cmd_key_value(&h);
    core_status_t st = CORE_OK;
    if (ts && ts_matches(ts, f->m, f->n)) {
        size_t gl = 0;
        const char *gv = groupby ? ts_label_get(ts, groupby, strlen(groupby), &gl) : NULL;
        if (!groupby || gv) {
            *gone = false;
            st = ts_rows_range(ts, q, &x->rows);
            if (!shown_of(ts, sel, x) && st == CORE_OK)
                st = CORE_NOMEM;
            if (gv && !(x->group = strndup(gv, gl)))
                st = CORE_NOMEM;
        }
    }
    cmd_key_close(&h, false);
    return st;
}

/* ------------------------------------------------------------------------ */
/* TS.QUERYINDEX, TS.MGET                                                   */
/* ------------------------------------------------------------------------ */

static bool run_queryindex(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_ts_filter_t *f = args;
    cmd_ts_keys_res_t *r = res;
    if (!ts_select(ctx, f, r))
        return false;
    if (!cmd_answer_fits(ctx, ts_keys_answer_bytes(r, 1), "select fewer series (more filters)")) {
        cmd_ts_keys_free(r);
        return false;
    }
    return true;
}

static bool run_mget(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_ts_mget_args_t *a = args;
    cmd_ts_multi_res_t *r = res;
    cmd_ts_keys_res_t l;
    memset(r, 0, sizeof(*r));
    if (!ts_select(ctx, &a->filter, &l))
        return false;
    if (!cmd_answer_fits(ctx, ts_keys_answer_bytes(&l, 32 + TS_ROW_BOUND), "select fewer series (more filters)")) {
        cmd_ts_keys_free(&l);
        return false;
    }
    core_status_t st = CORE_OK;
    if (!(r->v = calloc(l.n ? l.n : 1, sizeof(*r->v))))
        st = CORE_NOMEM;
    for (size_t i = 0; i < l.n && st == CORE_OK; i++) {
        /* the newest sample: the last of a reverse range of one */
        ts_query_t q = { .from = 0, .to = TS_MAX_TIMESTAMP, .reverse = true, .count = 1 };
        cmd_ts_series_t *x = &r->v[r->n];
        bool gone;
        st = read_one(ctx, l.k[i], l.len[i], a->latest, &q, &a->filter, &a->sel, NULL, x, &gone);
        if (st == CORE_OK && !gone) {
            x->key = l.k[i];
            x->klen = l.len[i];
            l.k[i] = NULL;
            x->has_sample = x->rows.n > 0;
            if (x->has_sample)
                x->sample = x->rows.s[0];
            cmd_ts_rows_free(&x->rows);
            r->n++;
        } else {
            series_free(x);
        }
    }
    cmd_ts_keys_free(&l);
    if (st != CORE_OK) {
        cmd_ts_multi_free(r);
        return cmd_fail(ctx, cmd_status_code(st), NULL, "out of memory running the query");
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* TS.MRANGE, TS.MREVRANGE                                                  */
/* ------------------------------------------------------------------------ */

static int cmp_group(const void *a, const void *b)
{
    const cmd_ts_series_t *x = a, *y = b;
    int r = strcmp(x->group, y->group);
    return r ? r : strcmp(x->key, y->key);
}

/* A sample of a group, with the position of its series (the group's key order). */
typedef struct gsample {
    int64_t ts;
    size_t at;
    double value;
} gsample_t;

static int cmp_gsample(const void *a, const void *b)
{
    const gsample_t *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* GROUPBY label REDUCE r: the series of one group [g0, g1) (each read in
 * time order, without count) merged, one value per timestamp (reduced in the
 * series' key order), into *out, newest first when reverse, at most `count`
 * values (0: all): RedisTimeSeries applies COUNT to the group's answer. */
static bool reduce_group(const cmd_ts_series_t *ms, size_t g0, size_t g1, ts_agg_t r, bool reverse, uint64_t count,
                         cmd_ts_rows_t *out)
{
    size_t total = 0;
    for (size_t i = g0; i < g1; i++)
        total += ms[i].rows.n;
    gsample_t *all = malloc((total ? total : 1) * sizeof(*all));
    double *vals = malloc((total ? total : 1) * sizeof(*vals));
    if (!all || !vals) {
        free(all);
        free(vals);
        return false;
    }
    size_t k = 0;
    for (size_t i = g0; i < g1; i++)
        for (size_t j = 0; j < ms[i].rows.n; j++)
            all[k++] = (gsample_t){ ms[i].rows.s[j].ts, i, ms[i].rows.s[j].value };
    qsort(all, k, sizeof(*all), cmp_gsample);
    bool ok = true;
    for (size_t n = 0; n < k && ok && (!count || out->n < count);) {
        /* the runs of one timestamp, taken from the newest when reverse */
        size_t i = reverse ? k - 1 - n : n, j = i, nv = 0;
        if (reverse) {
            while (j > 0 && all[j - 1].ts == all[i].ts)
                j--;
            for (size_t x = j; x <= i; x++)
                vals[nv++] = all[x].value;
        } else {
            while (j < k && all[j].ts == all[i].ts)
                vals[nv++] = all[j++].value;
        }
        ok = ts_rows_collect(out, all[i].ts, ts_reduce(r, vals, nv));
        n += nv;
    }
    free(all);
    free(vals);
    return ok;
}

/* The group [g0, g1) of ms (sorted by group) as one series of the answer:
 * its key "label=value", its reduced rows, and the labels sel shows of its
 * own (the label, __reducer__ and __source__, the keys of its series). */
static bool group_series(const cmd_ts_mrange_args_t *a, const cmd_ts_series_t *ms, size_t g0, size_t g1,
                         bool reverse, cmd_ts_series_t *out)
{
    if (!reduce_group(ms, g0, g1, a->reduce, reverse, a->query.count, &out->rows))
        return false;
    size_t slen = 0;
    for (size_t i = g0; i < g1; i++)
        slen += ms[i].klen + 1;
    char *src = malloc(slen + 1), *p = src;
    if (!src)
        return false;
    for (size_t i = g0; i < g1; i++) {
        memcpy(p, ms[i].key, ms[i].klen);
        p += ms[i].klen;
        *p++ = ',';
    }
    p[-1] = '\0';
    const char *group = ms[g0].group, *red = ts_agg_name(a->reduce);
    /* set in this order into an object: a name repeated replaces the value */
    cmd_ts_shown_t all[3] = { { a->groupby, group, strlen(group) },
                              { "__reducer__", red, strlen(red) },
                              { "__source__", src, strlen(src) } };
    bool ok = true;
    if (a->sel.all) {
        ok = shown_set(out, all, 3);
    } else if (a->sel.n) {
        cmd_ts_shown_t *pairs = malloc(a->sel.n * sizeof(*pairs));
        for (size_t j = 0; pairs && j < a->sel.n; j++) {
            pairs[j] = (cmd_ts_shown_t){ a->sel.names[j].p, NULL, 0 };
            for (size_t k = 3; k-- > 0;)   /* the value the object holds for that name: the last set */
                if (strcmp(all[k].name, a->sel.names[j].p) == 0) {
                    pairs[j].value = all[k].value;
                    pairs[j].value_len = all[k].value_len;
                    break;
                }
        }
        ok = pairs && shown_set(out, pairs, a->sel.n);
        free(pairs);
    }
    free(src);
    if (ok && asprintf(&out->key, "%s=%s", a->groupby, group) < 0) {
        out->key = NULL;
        ok = false;
    }
    out->klen = ok ? strlen(out->key) : 0;
    return ok;
}

static bool mrange(cmd_ctx_t *ctx, const cmd_ts_mrange_args_t *a, cmd_ts_multi_res_t *r, bool reverse)
{
    ts_query_t q0 = a->query;
    q0.reverse = reverse;
    q0.max_results = TS_MAX_EMPTY_BUCKETS;
    const char *groupby = a->groupby;
    memset(r, 0, sizeof(*r));
    cmd_ts_keys_res_t l;
    if (!ts_select(ctx, &a->filter, &l))
        return false;
    cmd_ts_series_t *ms = calloc(l.n ? l.n : 1, sizeof(*ms));
    size_t nms = 0;
    core_status_t st = ms ? CORE_OK : CORE_NOMEM;
    /* the series share one answer: each reads at most the rows the ones
     * before it left under --max-answer-size (its key counted as rows) */
    size_t rows_left = 0;
    bool capped = ts_answer_rows(ctx, &rows_left), over = false;
    for (size_t i = 0; i < l.n && st == CORE_OK; i++) {
        ts_query_t q = q0;
        if (groupby) {   /* the group's answer is reversed and counted, not each series' */
            q.reverse = false;
            q.count = 0;
        }
        bool gone;
        cmd_ts_series_t *x = &ms[nms];
        size_t head = (size_t)(ts_key_text_max(l.len[i]) / TS_ROW_BOUND) + 1;
        if (capped) {
            rows_left = rows_left > head ? rows_left - head : 0;
            x->rows.capped = true;
            x->rows.max = rows_left;
            if (rows_left < q.max_results)
                q.max_results = rows_left ? rows_left : 1;
        }
        st = read_one(ctx, l.k[i], l.len[i], a->latest, &q, &a->filter, &a->sel, groupby, x, &gone);
        x->key = l.k[i];
        x->klen = l.len[i];
        l.k[i] = NULL;
        over = x->rows.over || (st == CORE_LIMIT && capped && q.max_results < TS_MAX_EMPTY_BUCKETS);
        size_t used = x->rows.n * (1 + x->rows.stride);   /* in TS_ROW_BOUND units, as collecting counts */
        if (capped)
            rows_left -= used < rows_left ? used : rows_left;
        if (!gone)
            nms++;
        else
            series_free(x);
        if (over) {
            st = CORE_OK;
            break;
        }
    }
    cmd_ts_keys_free(&l);
    r->v = ms;
    r->n = nms;
    if (over) {
        size_t rows;
        ts_answer_rows(ctx, &rows);
        cmd_ts_multi_free(r);
        return ts_too_many_rows(ctx, rows);
    }
    if (st != CORE_OK) {
        cmd_ts_multi_free(r);
        if (st == CORE_LIMIT)
            return cmd_fail(ctx, CMD_E_BAD_REQUEST, "empty",
                            "empty=true would report more than %d buckets for a series: narrow the range, widen "
                            "bucket_ms or set count",
                            TS_MAX_EMPTY_BUCKETS);
        return cmd_fail(ctx, cmd_status_code(st), NULL, "out of memory running the query");
    }
    if (!groupby) {
        if (a->exclude_empty) {   /* EXCLUDEEMPTY: a series with nothing to answer is left out */
            size_t u = 0;
            for (size_t i = 0; i < r->n; i++) {
                if (r->v[i].rows.n == 0)
                    series_free(&r->v[i]);
                else
                    r->v[u++] = r->v[i];
            }
            r->n = u;
        }
        return true;
    }
    qsort(ms, nms, sizeof(*ms), cmp_group);
    cmd_ts_series_t *gs = calloc(nms ? nms : 1, sizeof(*gs));
    size_t ng = 0;
    bool ok = gs != NULL;
    for (size_t g0 = 0; ok && g0 < nms; ng++) {
        size_t g1 = g0 + 1;
        while (g1 < nms && strcmp(ms[g1].group, ms[g0].group) == 0)
            g1++;
        ok = group_series(a, ms, g0, g1, reverse, &gs[ng]);
        g0 = g1;
    }
    cmd_ts_multi_free(r);
    r->v = gs;
    r->n = ng;
    if (!ok) {
        cmd_ts_multi_free(r);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory building the answer");
    }
    return true;
}

static bool run_mrange(cmd_ctx_t *ctx, const void *args, void *res) { return mrange(ctx, args, res, false); }
static bool run_mrevrange(cmd_ctx_t *ctx, const void *args, void *res) { return mrange(ctx, args, res, true); }

const cmd_def_t CMD_TS_QUERYINDEX = { "TS.QUERYINDEX", CMD_ID_TS_QUERYINDEX, CMD_F_STATE_KEYS, CMD_ACCESS_READ,
                                      run_queryindex, NULL, NULL, sizeof(cmd_ts_filter_t), sizeof(cmd_ts_keys_res_t),
                                      NULL };
const cmd_def_t CMD_TS_MGET = { "TS.MGET", CMD_ID_TS_MGET, CMD_F_STATE_KEYS, CMD_ACCESS_READ, run_mget, NULL, NULL,
                                sizeof(cmd_ts_mget_args_t), sizeof(cmd_ts_multi_res_t), NULL };
const cmd_def_t CMD_TS_MRANGE = { "TS.MRANGE", CMD_ID_TS_MRANGE, CMD_F_STATE_KEYS, CMD_ACCESS_READ, run_mrange, NULL,
                                  NULL, sizeof(cmd_ts_mrange_args_t), sizeof(cmd_ts_multi_res_t), NULL };
const cmd_def_t CMD_TS_MREVRANGE = { "TS.MREVRANGE", CMD_ID_TS_MREVRANGE, CMD_F_STATE_KEYS, CMD_ACCESS_READ,
                                     run_mrevrange, NULL, NULL, sizeof(cmd_ts_mrange_args_t),
                                     sizeof(cmd_ts_multi_res_t), NULL };
