/*
 * tdigest.c - /tdigest: RedisBloom's T-Digest (TDIGEST.*) over HTTP.
 *
 *   PUT  /tdigest/{key}          {"compression"=100} (body optional) -> 201 info     (CREATE)
 *   POST /tdigest/{key}          {"values":[...]} -> {"observations":N}             (ADD)
 *   GET  /tdigest/{key}/quantile?q=0.5&q=0.99    -> {"values":[...]}               (QUANTILE)
 *   GET  /tdigest/{key}/cdf?value=               -> {"cdf":[...]}                  (CDF)
 *   GET  /tdigest/{key}/rank?value=              -> {"ranks":[...]}                (RANK)
 *   GET  /tdigest/{key}/revrank?value=           -> {"ranks":[...]}                (REVRANK)
 *   GET  /tdigest/{key}/byrank?rank=             -> {"values":[...]}               (BYRANK)
 *   GET  /tdigest/{key}/byrevrank?rank=          -> {"values":[...]}               (BYREVRANK)
 *   GET  /tdigest/{key}/trimmed_mean?low=&high=  -> {"mean":x}                     (TRIMMED_MEAN)
 *   GET  /tdigest/{key}/min, /max                -> {"min":x}, {"max":x}           (MIN, MAX)
 *   POST /tdigest/{key}/merge    {"sources":[...],"compression","override"=false} -> info  (MERGE)
 *   POST /tdigest/{key}/reset    -> info                                           (RESET)
 *   GET  /tdigest/{key}          -> info, with min and max                         (INFO)
 *
 * Answers follow RedisBloom, including its edge cases (see core/tdigest.h).
 * NaN and infinities are not JSON numbers: they are answered as the strings
 * "nan", "inf" and "-inf".  Every write leaves the digest flushed (no
 * buffered values), so reads never have to merge.
 *
 * The HTTP adapter of the operations TDIGEST.* (cmd/tdigest.h): requests are
 * parsed into their arguments and answered from their results.
 */
#include <stdlib.h>
#include <string.h>

#include "api/items.h"
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/freq.h"
#include "cmd/tdigest.h"
#include "core/tdigest.h"

static void answer_info(api_resp_t *resp, int status, const cmd_tdigest_info_t *r)
{
    api_json(resp, status,
             json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:o}", "compression", (json_int_t)r->compression,
                       "capacity", (json_int_t)r->capacity, "merged_nodes", (json_int_t)r->merged_nodes,
                       "unmerged_nodes", (json_int_t)r->unmerged_nodes, "merged_weight", (json_int_t)r->merged_weight,
                       "unmerged_weight", (json_int_t)r->unmerged_weight, "observations",
                       (json_int_t)r->observations, "total_compressions",
                       (json_int_t)(r->total_compressions > INT64_MAX ? INT64_MAX : r->total_compressions),
                       "size_bytes", (json_int_t)r->size_bytes, "min", freq_real(r->min), "max", freq_real(r->max)));
}

static void h_tdigest_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "compression", NULL };
    cmd_tdigest_create_args_t a;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    int64_t compression = TDIGEST_DEFAULT_COMPRESSION;
    if (req->body_len > 0) {   /* the body is optional: {} or nothing means the default */
        json_t *body = api_body_object(req, resp, fields);
        if (!body ||
            !api_obj_int(resp, body, "compression", false, 1, TDIGEST_MAX_COMPRESSION, &compression, NULL))
            return;
    }
    a.compression = (uint32_t)compression;
    cmd_tdigest_info_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TDIGEST_CREATE, &a, &r)))
        answer_info(resp, 201, &r);
}

static void h_tdigest_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "values", NULL };
    cmd_tdigest_add_args_t a;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
        return;
    json_t *values = json_object_get(body, "values");
    size_t n = json_array_size(values);
    if (!values) {
        api_error_field(resp, API_E_BAD_REQUEST, "values", "missing field 'values'");
        return;
    }
    if (!json_is_array(values) || n == 0 || n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "values", "'values' must be an array of 1 to %d numbers",
                        API_MAX_BATCH);
        return;
    }
    double *v = malloc(n * sizeof(double));
    if (!v) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(values, i);
        if (!json_is_number(x)) {
            free(v);
            api_error_field(resp, API_E_BAD_REQUEST, "values", "values[%zu] must be a finite number", i);
            return;
        }
        v[i] = json_number_value(x);   /* JSON numbers are finite; jansson refuses overflowing ones */
    }
    a.values = (cmd_array_t){ .n = n, .v = v };
    cmd_tdigest_add_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TDIGEST_ADD, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "observations", (json_int_t)r.observations));
    free(v);
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum query_kind { Q_QUANTILE, Q_CDF, Q_RANK, Q_REVRANK, Q_BYRANK, Q_BYREVRANK } query_kind_t;

static void query(api_req_t *req, api_resp_t *resp, query_kind_t kind)
{
    static const char *const param_of[] = { "q", "value", "value", "value", "rank", "rank" };
    static const char *const answer_of[] = { "values", "cdf", "ranks", "ranks", "values", "values" };
    static const cmd_def_t *const op_of[] = { &CMD_TDIGEST_QUANTILE, &CMD_TDIGEST_CDF,    &CMD_TDIGEST_RANK,
                                              &CMD_TDIGEST_REVRANK,  &CMD_TDIGEST_BYRANK, &CMD_TDIGEST_BYREVRANK };
    const char *pname = param_of[kind];
    cmd_tdigest_query_args_t a = { 0 };
    if (!api_path_key(req, resp, &a.key, &a.klen) ||
        !api_query_allow(req, resp, (const char *const[]){ pname, NULL }))
        return;
    double lo = kind == Q_QUANTILE ? 0 : -1.7976931348623157e308, hi = kind == Q_QUANTILE ? 1 : 1.7976931348623157e308;
    double *x = NULL;
    uint64_t *ranks = NULL;
    if (kind == Q_BYRANK || kind == Q_BYREVRANK) {
        api_items_t raw;
        if (!freq_query_items(req, resp, pname, &raw))
            return;
        a.n = raw.n;
        ranks = malloc(a.n * sizeof(*ranks));
        for (size_t i = 0; ranks && i < a.n; i++) {
            int64_t r;
            if (!api_parse_i64(raw.p[i], raw.len[i], &r) || r < 0) {
                api_error_field(resp, API_E_BAD_REQUEST, pname, "query parameter 'rank' must be an integer >= 0");
                api_items_free(&raw);
                free(ranks);
                return;
            }
            ranks[i] = (uint64_t)r;
        }
        api_items_free(&raw);
        if (!ranks) {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            return;
        }
    } else if (!(x = freq_query_doubles(req, resp, pname, lo, hi, &a.n))) {
        return;
    }
    a.values = x;
    a.ranks = ranks;
    bool as_ranks = kind == Q_RANK || kind == Q_REVRANK;
    if (as_ranks)
        a.out_ranks = malloc(a.n * sizeof(*a.out_ranks));
    else
        a.out = malloc(a.n * sizeof(*a.out));
    if (!a.out && !a.out_ranks) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
    } else if (api_cmd_answered(req, resp, cmd_call(req->ctx, op_of[kind], &a, NULL))) {
        json_t *out = json_array();
        for (size_t i = 0; i < a.n; i++)
            json_array_append_new(out, as_ranks ? json_integer(a.out_ranks[i]) : freq_real(a.out[i]));
        api_json(resp, 200, json_pack("{s:o}", answer_of[kind], out));
    }
    free(a.out);
    free(a.out_ranks);
    free(x);
    free(ranks);
}

static void h_tdigest_quantile(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    query(req, resp, Q_QUANTILE);
}
static void h_tdigest_cdf(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    query(req, resp, Q_CDF);
}
static void h_tdigest_rank(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    query(req, resp, Q_RANK);
}
static void h_tdigest_revrank(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    query(req, resp, Q_REVRANK);
}
static void h_tdigest_byrank(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    query(req, resp, Q_BYRANK);
}
static void h_tdigest_byrevrank(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    query(req, resp, Q_BYREVRANK);
}

/* One number computed from the digest: trimmed mean, min or max. */
typedef enum scalar_kind { S_TRIMMED, S_MIN, S_MAX } scalar_kind_t;

static void scalar(api_req_t *req, api_resp_t *resp, scalar_kind_t kind)
{
    static const char *const trimmed_params[] = { "low", "high", NULL };
    static const cmd_def_t *const op_of[] = { &CMD_TDIGEST_TRIMMED_MEAN, &CMD_TDIGEST_MIN, &CMD_TDIGEST_MAX };
    cmd_tdigest_scalar_args_t a = { .low = 0, .high = 1 };
    if (!api_path_key(req, resp, &a.key, &a.klen))
        return;
    if (kind == S_TRIMMED) {
        if (!api_query_allow(req, resp, trimmed_params) ||
            !api_query_double(req, resp, "low", true, 0, 1, &a.low, NULL) ||
            !api_query_double(req, resp, "high", true, 0, 1, &a.high, NULL))
            return;
    } else if (!api_no_query(req, resp)) {
        return;
    }
    cmd_tdigest_scalar_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, op_of[kind], &a, &r)))
        api_json(resp, 200, json_pack("{s:o}", kind == S_TRIMMED ? "mean" : kind == S_MIN ? "min" : "max",
                                      freq_real(r.v)));
}

static void h_tdigest_trimmed_mean(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    scalar(req, resp, S_TRIMMED);
}
static void h_tdigest_min(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    scalar(req, resp, S_MIN);
}
static void h_tdigest_max(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    scalar(req, resp, S_MAX);
}

static void h_tdigest_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_tdigest_key_args_t a;
    cmd_tdigest_info_t r;
    if (api_path_key(req, resp, &a.key, &a.klen) && api_no_query(req, resp) &&
        api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TDIGEST_INFO, &a, &r)))
        answer_info(resp, 200, &r);
}

/* ------------------------------------------------------------------------ */
/* Merge and reset                                                          */
/* ------------------------------------------------------------------------ */

static void h_tdigest_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "sources", "compression", "override", NULL };
    cmd_tdigest_merge_args_t a = { 0 };
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
        return;
    json_t *sources = json_object_get(body, "sources");
    size_t n = json_array_size(sources);
    if (!json_is_array(sources) || n == 0 || n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "sources", "'sources' must be an array of 1 to %d keys",
                        API_MAX_BATCH);
        return;
    }
    int64_t compression = 0;
    if (!api_obj_int(resp, body, "compression", false, 1, TDIGEST_MAX_COMPRESSION, &compression, NULL) ||
        !api_obj_bool(resp, body, "override", &a.override, NULL))
        return;
    a.compression = (uint32_t)compression;   /* 0: not given */
    api_items_t src;
    api_err_t err;
    if (!api_err_answered(resp, api_items_alloc(n, &src, &err), &err))
        return;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(sources, i);
        if (!json_is_string(s)) {
            api_error_field(resp, API_E_BAD_REQUEST, "sources", "sources[%zu] must be a string", i);
            goto done;
        }
        if (!api_check_key(resp, "sources", json_string_value(s), json_string_length(s)))
            goto done;
        src.p[i] = json_string_value(s);
        src.len[i] = json_string_length(s);
    }
    a.sources = (cmd_batch_t){ .n = n, .p = src.p, .len = src.len };
    cmd_tdigest_info_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TDIGEST_MERGE, &a, &r)))
        answer_info(resp, 200, &r);
done:
    api_items_free(&src);
}

static void h_tdigest_reset(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_tdigest_key_args_t a;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    if (req->body_len > 0 && !api_body_object(req, resp, (const char *const[]){ NULL }))
        return;
    cmd_tdigest_info_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TDIGEST_RESET, &a, &r)))
        answer_info(resp, 200, &r);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/tdigest/{key}",              h_tdigest_put, 0, API_BY(CMD_TDIGEST_CREATE) },
    { API_POST,   "/tdigest/{key}",              h_tdigest_add, 0, API_BY(CMD_TDIGEST_ADD) },
    { API_GET,    "/tdigest/{key}",              h_tdigest_info, 0, API_BY(CMD_TDIGEST_INFO) },
    { API_GET,    "/tdigest/{key}/quantile",     h_tdigest_quantile, 0, API_BY(CMD_TDIGEST_QUANTILE) },
    { API_GET,    "/tdigest/{key}/cdf",          h_tdigest_cdf, 0, API_BY(CMD_TDIGEST_CDF) },
    { API_GET,    "/tdigest/{key}/rank",         h_tdigest_rank, 0, API_BY(CMD_TDIGEST_RANK) },
    { API_GET,    "/tdigest/{key}/revrank",      h_tdigest_revrank, 0, API_BY(CMD_TDIGEST_REVRANK) },
    { API_GET,    "/tdigest/{key}/byrank",       h_tdigest_byrank, 0, API_BY(CMD_TDIGEST_BYRANK) },
    { API_GET,    "/tdigest/{key}/byrevrank",    h_tdigest_byrevrank, 0, API_BY(CMD_TDIGEST_BYREVRANK) },
    { API_GET,    "/tdigest/{key}/trimmed_mean", h_tdigest_trimmed_mean, 0, API_BY(CMD_TDIGEST_TRIMMED_MEAN) },
    { API_GET,    "/tdigest/{key}/min",          h_tdigest_min, 0, API_BY(CMD_TDIGEST_MIN) },
    { API_GET,    "/tdigest/{key}/max",          h_tdigest_max, 0, API_BY(CMD_TDIGEST_MAX) },
    { API_POST,   "/tdigest/{key}/merge",        h_tdigest_merge, 0, API_BY(CMD_TDIGEST_MERGE) },
    { API_POST,   "/tdigest/{key}/reset",        h_tdigest_reset, 0, API_BY(CMD_TDIGEST_RESET) },
};

API_FAMILY(tdigest);
