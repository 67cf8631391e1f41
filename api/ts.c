/*
 * ts.c - /ts: RedisTimeSeries (TS.*) over HTTP, the adapter of the
 * operations of cmd/ts.h (parameters: api/ts_parse.c; answers: api/ts_json.c;
 * /mts, the queries by labels: api/ts_multi.c).
 *
 *   PUT    /ts/{key}            {"retention_ms":0,"duplicate_policy":"block","labels":{"room":"kitchen"}}
 *                               -> 201 {"created":true}; 409 EXISTS if the key exists     (TS.CREATE)
 *   POST   /ts/{key}            {"samples":[[1686697976001,21],["*",22]],"on_duplicate":"sum"}
 *                               -> {"timestamps":[...],"created":false}          (TS.ADD / TS.MADD)
 *   GET    /ts/{key}            -> info                                           (TS.INFO)
 *   GET    /ts/{key}/range      ?from=-&to=+&agg=avg&bucket_ms=60000&align=&bucket_timestamp=&count=
 *                                &filter_by_value_min=&filter_by_value_max=&filter_by_ts=...
 *                               -> {"samples":[[ts,value],...]}                   (TS.RANGE)
 *                               (agg=min,max: [[ts,min,max],...], AGGREGATION min,max)
 *   GET    /ts/{key}/revrange   the same, newest first                            (TS.REVRANGE)
 *   DELETE /ts/{key}/range      ?from=&to= -> {"deleted":N}                       (TS.DEL)
 *
 * Adding to a missing key creates it, as TS.ADD does, with retention_ms,
 * duplicate_policy and labels from the same body when given (ignored when the
 * key exists, as TS.ADD ignores them).  A batch is all or nothing: the first
 * sample that would fail (older than retention: 400; a duplicate under the
 * BLOCK policy: 409 EXISTS) is named and nothing is stored.  "*" as a
 * timestamp is the time the request is served (req->now_ns), resolved here:
 * the operation's record holds the timestamps, so replay adds the same
 * samples.
 *
 * `from`/`to` take "-" (the earliest) and "+" (the latest).  Query strings
 * decode '+' as a space, so "+" must be sent as %2B; a lone space is read as
 * "+" too, so `to=+` typed in a browser or curl still works.
 *
 * Reads of a missing key are 404 (TS.RANGE and TS.INFO fail on one).
 * Aggregated values that are not finite (a sum of huge values) are printed as
 * the strings "inf", "-inf", "nan": JSON has no such numbers.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/ts_http.h"

/* ------------------------------------------------------------------------ */
/* Writes                                                                   */
/* ------------------------------------------------------------------------ */

static void h_ts_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "retention_ms", "duplicate_policy", "labels", "chunk_size", "encoding", NULL };
    cmd_ts_create_args_t a;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    json_t *body = NULL;
    if (req->body_len > 0 && !(body = api_body_object(req, resp, fields)))
        return;
    ts_opts_t o;
    if (!ts_parse_opts(req, resp, body, &o))
        return;
    a.opts = ts_opts_cmd(&o);
    cmd_ts_created_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TS_CREATE, &a, &r)))
        api_json(resp, 201, json_pack("{s:b}", "created", 1));
}

static void h_ts_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "samples",  "on_duplicate", "retention_ms", "duplicate_policy",
                                          "labels",   "chunk_size",   "encoding",     NULL };
    cmd_ts_add_args_t a = { .request_bytes = req->body_len };
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    json_t *body = api_body_object(req, resp, fields);
    if (!body)
        return;
    ts_opts_t o;
    a.on_duplicate = TS_DUP_BLOCK;
    size_t n;
    if (!ts_parse_opts(req, resp, body, &o) ||
        !ts_parse_policy(resp, body, "on_duplicate", &a.on_duplicate, &a.has_on_duplicate))
        return;
    ts_sample_t *s = ts_parse_samples(req, resp, body, &n);
    if (!s)
        return;
    a.opts = ts_opts_cmd(&o);
    a.samples = (cmd_ts_samples_t){ s, NULL, n };
    cmd_ts_created_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TS_ADD, &a, &r))) {
        wbuf_t b = WBUF_INIT;
        wbuf_reserve(&b, 32 + n * 16);
        wbuf_put_bytes(&b, "{\"timestamps\":[", 15);
        for (size_t i = 0; i < n; i++) {
            if (i)
                wbuf_put_u8(&b, ',');
            ts_put_i64(&b, s[i].ts);
        }
        wbuf_put_bytes(&b, r.created ? "],\"created\":true}" : "],\"created\":false}", r.created ? 17 : 18);
        ts_answer(resp, 200, &b);
    }
    free(s);
}

/* POST /ts/{key}/incrby and /decrby {"by":N,"timestamp":"*"|ms, creation
 * options}: TS.INCRBY / TS.DECRBY. */
static void incrby(api_req_t *req, api_resp_t *resp, bool decr)
{
    static const char *const fields[] = { "by",     "timestamp",  "retention_ms", "duplicate_policy",
                                          "labels", "chunk_size", "encoding",     NULL };
    cmd_ts_incrby_args_t a = { .request_bytes = req->body_len };
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    json_t *body = api_body_object(req, resp, fields);
    if (!body)
        return;
    ts_opts_t o;
    if (!ts_parse_opts(req, resp, body, &o) || !api_obj_double(resp, body, "by", true, -DBL_MAX, DBL_MAX, &a.by, NULL))
        return;
    int64_t t = api_now_ms(req);
    json_t *jt = json_object_get(body, "timestamp");
    if (jt && !(json_is_string(jt) && strcmp(json_string_value(jt), "*") == 0)) {
        if (!json_is_integer(jt) || json_integer_value(jt) < 0) {
            api_error_field(resp, API_E_BAD_REQUEST, "timestamp",
                            "'timestamp' must be \"*\" (now) or an integer from 0 to %lld (ms)",
                            (long long)TS_MAX_TIMESTAMP);
            return;
        }
        t = json_integer_value(jt);
    } else if (t < 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "timestamp", "the clock is before 1970");
        return;
    }
    a.opts = ts_opts_cmd(&o);
    a.timestamp = t;
    cmd_ts_incrby_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, decr ? &CMD_TS_DECRBY : &CMD_TS_INCRBY, &a, &r)))
        api_json(resp, 200, json_pack("{s:I,s:f,s:b}", "timestamp", (json_int_t)r.timestamp, "value", r.value,
                                      "created", r.created));
}

static void h_ts_incrby(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    incrby(req, resp, false);
}

static void h_ts_decrby(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    incrby(req, resp, true);
}

/* PATCH /ts/{key} {"retention_ms","duplicate_policy","labels",...}: TS.ALTER.
 * What is given replaces what was (labels as a whole); nothing else changes. */
static void h_ts_alter(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "retention_ms", "duplicate_policy", "labels", "chunk_size", "encoding", NULL };
    cmd_ts_alter_args_t a = { .policy = TS_DUP_BLOCK };
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    json_t *body = api_body_object(req, resp, fields);
    if (!body)
        return;
    ts_opts_t o;
    if (!api_obj_int(resp, body, "retention_ms", false, 0, INT64_MAX, &a.retention_ms, &a.has_retention) ||
        !ts_parse_policy(resp, body, "duplicate_policy", &a.policy, &a.has_policy) || !ts_parse_layout(resp, body) ||
        !ts_parse_labels(req, resp, body, &o, &a.has_labels))
        return;
    a.labels = (cmd_ts_labels_t){ o.labels, NULL, o.nlabels };
    cmd_ts_created_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TS_ALTER, &a, &r)))
        api_json(resp, 200, json_pack("{s:b}", "altered", true));
}

static void h_ts_delete_range(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "from", "to", NULL };
    cmd_ts_del_args_t a;
    bool ex;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params))
        return;
    if (!api_query_get(req, "from", NULL) || !api_query_get(req, "to", NULL)) {
        const char *f = api_query_get(req, "from", NULL) ? "to" : "from";
        api_error_field(resp, API_E_BAD_REQUEST, f, "missing query parameter '%s' ('-' and '+' for the ends)", f);
        return;
    }
    if (!ts_parse_bound(req, resp, "from", 0, &a.from, &ex) ||
        !ts_parse_bound(req, resp, "to", TS_MAX_TIMESTAMP, &a.to, &ex))
        return;
    cmd_ts_del_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TS_DEL, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "deleted", (json_int_t)r.deleted));
}

/* POST /ts/{key}/rules {"dest":"k","agg":"avg","bucket_ms":60000,"align":0}:
 * TS.CREATERULE key dest AGGREGATION agg bucket_ms align.
 *
 * A rule keeps the generation of the rules that created it (ts_rule_t.gen):
 * a live request creates a generation-2 rule, and its record holds the
 * generation.  A replayed request of an older journal (an HTTP record)
 * carries its generation in its body ("generation", which clients cannot
 * send), and one without (journaled before rule generations) creates a
 * generation-1 rule, as it did when it was served. */
static void h_ts_rule_create(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "dest", "agg", "bucket_ms", "align", NULL };
    static const char *const replayed[] = { "dest", "agg", "bucket_ms", "align", "generation", NULL };
    cmd_ts_createrule_args_t a;
    const char *aggs = NULL;
    int64_t gen = TS_RULE_GEN_2;
    bool has_gen = false;
    a.align = 0;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    json_t *body = api_body_object(req, resp, req->replay ? replayed : fields);
    if (!body || !api_obj_key(resp, body, "dest", true, &a.dest, &a.dlen) ||
        !api_obj_string(resp, body, "agg", true, &aggs, NULL) ||
        !api_obj_int(resp, body, "bucket_ms", true, 1, INT64_MAX, &a.bucket_ms, NULL) ||
        !api_obj_int(resp, body, "align", false, 0, INT64_MAX, &a.align, NULL) ||
        !api_obj_int(resp, body, "generation", false, TS_RULE_GEN_1, TS_RULE_GEN_2, &gen, &has_gen))
        return;
    if (req->replay && !has_gen)
        gen = TS_RULE_GEN_1;
    if (!ts_agg_parse_any(aggs, &a.agg, &a.quantile)) {
        api_error_field(resp, API_E_BAD_REQUEST, "agg",
                        "unknown aggregation '%.32s' (avg, sum, min, max, range, count, first, last, std.p, std.s, "
                        "var.p, var.s, twa, countNaN, countAll, p0 to p100)",
                        aggs);
        return;
    }
    a.gen = (unsigned)gen;
    cmd_ts_created_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TS_CREATERULE, &a, &r)))
        api_json(resp, 201, json_pack("{s:b}", "created", true));
}

/* DELETE /ts/{key}/rules?dest=k: TS.DELETERULE key dest. */
static void h_ts_rule_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "dest", NULL };
    cmd_ts_deleterule_args_t a;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !api_query_string(req, resp, "dest", true, &a.dest, &a.dlen))
        return;
    cmd_ts_created_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TS_DELETERULE, &a, &r)))
        api_json(resp, 200, json_pack("{s:b}", "deleted", true));
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                    */
/* ------------------------------------------------------------------------ */

static void h_ts_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_ts_key_args_t a;
    cmd_ts_info_res_t r;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp) ||
        !api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TS_INFO, &a, &r)))
        return;
    const ts_info_t *info = &r.info;
    json_t *labels = json_object();
    for (size_t i = 0; i < r.nlabels; i++)
        json_object_set_new(labels, r.labels[i].name, json_stringn(r.labels[i].value, r.labels[i].value_len));
    json_t *o = json_pack("{s:I,s:I,s:o,s:o,s:o,s:I,s:s,s:o,s:I,s:I,s:i,s:s}", "samples", (json_int_t)info->samples,
                          "memory_bytes", (json_int_t)info->memory_bytes, "bytes_per_sample",
                          info->samples ? json_real((double)info->memory_bytes / (double)info->samples) : json_null(),
                          "first_timestamp", info->samples ? json_integer(info->first_ts) : json_null(),
                          "last_timestamp", info->samples ? json_integer(info->last_ts) : json_null(), "retention_ms",
                          (json_int_t)r.retention_ms, "duplicate_policy", ts_policy_name(r.policy), "labels", labels,
                          "chunks", (json_int_t)info->chunks, "compressed_bytes", (json_int_t)info->data_bytes,
                          "chunk_size", TS_CHUNK_BYTES, "encoding", "compressed");
    json_t *rules = json_array();
    for (size_t i = 0; i < r.nrules; i++) {
        const cmd_ts_rule_shown_t *x = &r.rules[i];
        char aname[32];
        ts_agg_format(x->agg, x->quantile, aname, sizeof(aname));
        json_array_append_new(rules, json_pack("{s:s%,s:s,s:I,s:I}", "dest", x->dest, x->dest_len, "agg", aname,
                                               "bucket_ms", (json_int_t)x->bucket_ms, "align", (json_int_t)x->align));
    }
    json_object_set_new(o, "rules", rules);
    json_object_set_new(o, "source", r.source ? json_stringn(r.source, r.source_len) : json_null());
    cmd_ts_info_free(&r);
    api_json(resp, 200, o);
}

static void range(api_req_t *req, api_resp_t *resp, bool reverse)
{
    cmd_ts_range_args_t a = { .latest = false };
    ts_aggs_t aggs;
    int64_t *fts;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !ts_parse_range(req, resp, &a.query, &aggs, &fts, false))
        return;
    cmd_ts_range_res_t r;
    bool ok = api_query_bool(req, resp, "latest", &a.latest, NULL) &&
              api_cmd_answered(req, resp, cmd_call(req->ctx, reverse ? &CMD_TS_REVRANGE : &CMD_TS_RANGE, &a, &r));
    free(fts);
    if (!ok)
        return;
    /* formatted outside the shard lock */
    wbuf_t b = WBUF_INIT;
    wbuf_reserve(&b, 16 + r.rows.n * 32);
    wbuf_put_bytes(&b, "{\"samples\":", 11);
    ts_put_rows(&b, &r.rows);
    wbuf_put_u8(&b, '}');
    cmd_ts_rows_free(&r.rows);
    ts_answer(resp, 200, &b);
}

static void h_ts_range(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    range(req, resp, false);
}

static void h_ts_revrange(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    range(req, resp, true);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/ts/{key}",          h_ts_put, 0, API_BY(CMD_TS_CREATE) },
    { API_POST,   "/ts/{key}",          h_ts_add, 0, API_BY(CMD_TS_ADD) },
    { API_GET,    "/ts/{key}",          h_ts_info, 0, API_BY(CMD_TS_INFO) },
    { API_PATCH,  "/ts/{key}",          h_ts_alter, 0, API_BY(CMD_TS_ALTER) },
    { API_POST,   "/ts/{key}/incrby",   h_ts_incrby, 0, API_BY(CMD_TS_INCRBY) },
    { API_POST,   "/ts/{key}/decrby",   h_ts_decrby, 0, API_BY(CMD_TS_DECRBY) },
    { API_GET,    "/ts/{key}/range",    h_ts_range, 0, API_BY(CMD_TS_RANGE) },
    { API_GET,    "/ts/{key}/revrange", h_ts_revrange, 0, API_BY(CMD_TS_REVRANGE) },
    { API_DELETE, "/ts/{key}/range",    h_ts_delete_range, 0, API_BY(CMD_TS_DEL) },
    { API_POST,   "/ts/{key}/rules",    h_ts_rule_create, 0, API_BY(CMD_TS_CREATERULE) },
    { API_DELETE, "/ts/{key}/rules",    h_ts_rule_delete, 0, API_BY(CMD_TS_DELETERULE) },
    { API_GET,    "/mts/index",         ts_h_queryindex, 0, API_BY(CMD_TS_QUERYINDEX) },
    { API_GET,    "/mts/get",           ts_h_mget, 0, API_BY(CMD_TS_MGET) },
    { API_GET,    "/mts/range",         ts_h_mrange, 0, API_BY(CMD_TS_MRANGE) },
    { API_GET,    "/mts/revrange",      ts_h_mrevrange, 0, API_BY(CMD_TS_MREVRANGE) },
};

API_FAMILY(ts);
