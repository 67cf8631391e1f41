/*
 * ts_multi.c - /mts: the queries by labels over HTTP (TS.QUERYINDEX,
 * TS.MGET, TS.MRANGE, TS.MREVRANGE of cmd/ts.h).
 *
 *   GET /mts/index?filter=...                            -> {"keys":[...]}
 *   GET /mts/get?filter=...&withlabels=&selected_labels=&latest=
 *                                                        -> {"series":[{"key","labels","sample":[ts,v]}]}
 *   GET /mts/range?filter=...&(the parameters of /ts/{key}/range)&withlabels=&selected_labels=
 *       &groupby=&reduce=&exclude_empty=                 -> {"series":[{"key","labels","samples":[...]}]}
 *   GET /mts/revrange                                    the same, newest first
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/ts_http.h"

void ts_h_queryindex(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "filter", NULL };
    cmd_ts_filter_t f;
    ts_matcher_t *m;
    if (!api_query_allow(req, resp, params) || !(m = ts_parse_filters(req, resp, &f.n)))
        return;
    f.m = m;
    cmd_ts_keys_res_t r;
    bool ok = api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TS_QUERYINDEX, &f, &r));
    free(m);
    if (!ok)
        return;
    json_t *keys = json_array();
    for (size_t i = 0; i < r.n; i++)
        json_array_append_new(keys, json_stringn(r.k[i], r.len[i]));
    cmd_ts_keys_free(&r);
    api_json(resp, 200, json_pack("{s:o}", "keys", keys));
}

void ts_h_mget(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "filter", "withlabels", "selected_labels", "latest", NULL };
    cmd_ts_mget_args_t a = { .latest = false };
    ts_matcher_t *m;
    if (!api_query_allow(req, resp, params) || !api_query_bool(req, resp, "latest", &a.latest, NULL) ||
        !ts_parse_labelsel(req, resp, &a.sel))
        return;
    if (!(m = ts_parse_filters(req, resp, &a.filter.n))) {
        free((void *)a.sel.names);
        return;
    }
    a.filter.m = m;
    cmd_ts_multi_res_t r;
    bool ok = api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TS_MGET, &a, &r));
    free(m);
    free((void *)a.sel.names);
    if (!ok)
        return;
    json_t *series = json_array();
    for (size_t i = 0; i < r.n; i++) {
        const cmd_ts_series_t *x = &r.v[i];
        json_t *one = json_pack("{s:s%}", "key", x->key, x->klen);
        json_t *labels = ts_labels_json(x);
        if (labels)
            json_object_set_new(one, "labels", labels);
        json_t *sample = json_null();
        if (x->has_sample) {
            double v = x->sample.value;
            sample = json_pack("[I,o]", (json_int_t)x->sample.ts,
                               isfinite(v) ? json_real(v) : json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"));
        }
        json_object_set_new(one, "sample", sample);
        json_array_append_new(series, one);
    }
    cmd_ts_multi_free(&r);
    api_json(resp, 200, json_pack("{s:o}", "series", series));
}

/* One series of the answer: {"key":..,"labels":..,"samples":[...]}, the
 * key and labels through jansson, the rows as text; false when out of
 * memory. */
static bool put_series(wbuf_t *b, const cmd_ts_series_t *x, bool group, bool first)
{
    json_t *k = group ? json_pack("{s:s?}", "key", x->key) : json_pack("{s:s%}", "key", x->key, x->klen);
    json_t *labels = ts_labels_json(x);
    if (k && labels)
        json_object_set_new(k, "labels", labels);
    else
        json_decref(labels);
    char *t = k ? json_dumps(k, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(k);
    if (!t)
        return false;
    if (!first)
        wbuf_put_u8(b, ',');
    wbuf_put_bytes(b, t, strlen(t) - 1);   /* {"key":..,"labels":..  then the samples */
    free(t);
    wbuf_put_bytes(b, ",\"samples\":", 11);
    ts_put_rows(b, &x->rows);
    wbuf_put_u8(b, '}');
    return true;
}

static void mrange(api_req_t *req, api_resp_t *resp, bool reverse)
{
    cmd_ts_mrange_args_t a = { .latest = false };
    ts_aggs_t aggs;
    int64_t *fts;
    if (!ts_parse_range(req, resp, &a.query, &aggs, &fts, true))
        return;
    const char *reduce = NULL;
    ts_matcher_t *m = NULL;
    size_t glen, rlen;
    a.reduce = TS_AGG_NONE;
    if (!api_query_bool(req, resp, "latest", &a.latest, NULL) || !ts_parse_labelsel(req, resp, &a.sel) ||
        !api_query_string(req, resp, "groupby", false, &a.groupby, &glen) ||
        !api_query_string(req, resp, "reduce", false, &reduce, &rlen) ||
        !api_query_bool(req, resp, "exclude_empty", &a.exclude_empty, NULL))
        goto out;
    if (a.exclude_empty && a.groupby) {   /* (RedisTimeSeries: "EXCLUDEEMPTY is not allowed with GROUPBY") */
        api_error_field(resp, API_E_BAD_REQUEST, "exclude_empty", "'exclude_empty' cannot be used with 'groupby'");
        goto out;
    }
    if (!a.groupby != !reduce) {
        api_error_field(resp, API_E_BAD_REQUEST, a.groupby ? "reduce" : "groupby",
                        "'groupby' and 'reduce' go together");
        goto out;
    }
    if (a.groupby && a.query.naggs > 1) {   /* (as RedisTimeSeries: one value per series to reduce) */
        api_error_field(resp, API_E_BAD_REQUEST, "agg", "'groupby' takes one aggregation, not several");
        goto out;
    }
    if (reduce &&
        (!ts_agg_parse(reduce, &a.reduce) || a.reduce == TS_AGG_TWA || a.reduce == TS_AGG_FIRST ||
         a.reduce == TS_AGG_LAST)) {
        api_error_field(resp, API_E_BAD_REQUEST, "reduce",
                        "'reduce' must be avg, sum, min, max, range, count, std.p, std.s, var.p, var.s, countNaN or "
                        "countAll");
        goto out;
    }
    if (!(m = ts_parse_filters(req, resp, &a.filter.n)))
        goto out;
    a.filter.m = m;
    cmd_ts_multi_res_t r;
    if (!api_cmd_answered(req, resp, cmd_call(req->ctx, reverse ? &CMD_TS_MREVRANGE : &CMD_TS_MRANGE, &a, &r)))
        goto out;
    wbuf_t b = WBUF_INIT;
    wbuf_put_bytes(&b, "{\"series\":[", 11);
    for (size_t i = 0; i < r.n; i++)
        if (!put_series(&b, &r.v[i], a.groupby != NULL, i == 0)) {
            b.oom = true;
            break;
        }
    wbuf_put_bytes(&b, "]}", 2);
    cmd_ts_multi_free(&r);
    ts_answer(resp, 200, &b);
out:
    free(m);
    free((void *)a.sel.names);
    free(fts);
}

void ts_h_mrange(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    mrange(req, resp, false);
}

void ts_h_mrevrange(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    mrange(req, resp, true);
}
