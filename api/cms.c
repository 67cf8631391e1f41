/*
 * cms.c - /cms: RedisBloom's Count-Min sketch (CMS.*) over HTTP.
 *
 *   PUT  /cms/{key}        {"width","depth"} or {"error","probability"}, "conservative"=false
 *                          -> 201 info                         (CMS.INITBYDIM / CMS.INITBYPROB)
 *   POST /cms/{key}        {"increments":[{"item","by"=1}]} or {"items":[...]}
 *                          -> {"counts":[...]}                 (CMS.INCRBY)
 *   GET  /cms/{key}/count?item=a&item=b -> {"counts":[...]}    (CMS.QUERY)
 *   POST /cms/{key}/count  {"items":[...]} -> {"counts":[...]}  (the same, for long batches)
 *   POST /cms/{key}/merge  {"sources":[...],"weights":[...]} -> info   (CMS.MERGE)
 *   GET  /cms/{key}        -> {"width","depth","count","conservative","size_bytes"}  (CMS.INFO)
 *
 * Like RedisBloom, a sketch must be created before use (404 otherwise) and
 * CMS.MERGE overwrites the destination (which must exist) with the weighted
 * sum of the sources; weights may be negative (subtracting a sketch), and a
 * merge where any counter or the total would fall below 0 or pass 2^63 - 1
 * is refused whole (RedisBloom's "CMS: MERGE overflow"; its counters are
 * 32-bit, ours 64-bit).  An increment batch that would take the total past
 * 2^63 - 1 is refused whole; nothing is applied.  A merge reads each
 * source once, however often it is named (its weights summed), and the
 * sources it reads may total at most CMD_WORK_VALUES x --max-value-size.
 *
 * The HTTP adapter of the operations CMS.* (cmd/cms.h): requests are
 * parsed into their arguments and answered from their results.
 */
#include <stdlib.h>

#include "api/items.h"
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/freq.h"
#include "cmd/cms.h"
#include "core/cms.h"

static void answer_info(api_resp_t *resp, int status, const cmd_cms_info_t *r)
{
    api_json(resp, status,
             json_pack("{s:I,s:I,s:I,s:b,s:I}", "width", (json_int_t)r->width, "depth", (json_int_t)r->depth, "count",
                       (json_int_t)r->count, "conservative", r->conservative, "size_bytes",
                       (json_int_t)r->size_bytes));
}

/* {"counts":[...]} of n estimates. */
static void answer_counts(api_resp_t *resp, const uint64_t *v, size_t n)
{
    json_t *counts = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(counts, json_integer((json_int_t)v[i]));
    api_json(resp, 200, json_pack("{s:o}", "counts", counts));
}

/* The parsed items as the operations take them. */
static cmd_batch_t items_of(const api_items_t *it)
{
    cmd_batch_t c = { .n = it->n, .p = it->p, .len = it->len, .by = it->by };
    return c;
}

/* Reads an optional member that must be strictly between 0 and 1. */
static bool open_unit(api_resp_t *resp, json_t *body, const char *name, double *out)
{
    if (!api_obj_double(resp, body, name, true, 0, 1, out, NULL))
        return false;
    if (*out <= 0 || *out >= 1) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be strictly between 0 and 1", name);
        return false;
    }
    return true;
}

static void h_cms_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "width", "depth", "error", "probability", "conservative", NULL };
    cmd_cms_initbydim_args_t a = { 0 };
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
        return;
    bool by_dim = json_object_get(body, "width") || json_object_get(body, "depth");
    bool by_prob = json_object_get(body, "error") || json_object_get(body, "probability");
    if (by_dim && by_prob) {
        api_error_field(resp, API_E_BAD_REQUEST, "error", "give either width and depth, or error and probability");
        return;
    }
    if (!by_dim && !by_prob) {
        api_error_field(resp, API_E_BAD_REQUEST, "width", "missing 'width' and 'depth' (or 'error' and 'probability')");
        return;
    }
    a.by_prob = by_prob;
    if (by_dim) {
        int64_t w, d;
        if (!api_obj_int(resp, body, "width", true, 1, UINT32_MAX, &w, NULL) ||
            !api_obj_int(resp, body, "depth", true, 1, UINT32_MAX, &d, NULL))
            return;
        a.width = (uint64_t)w;
        a.depth = (uint64_t)d;
    } else {
        /* CMS.INITBYPROB: RedisBloom's dimensions for the error and probability */
        double error, prob;
        if (!open_unit(resp, body, "error", &error) || !open_unit(resp, body, "probability", &prob))
            return;
        cms_dims_from_prob(error, prob, &a.width, &a.depth);
        if (a.depth < 1 && req->replay) {
            a.depth = 1;   /* a record served before this was refused (tally took it as depth 1) */
        } else if (a.depth < 1) {   /* RedisBloom's "invalid init arguments": a probability within 1e-7 of 1 */
            api_error_field(resp, API_E_BAD_REQUEST, "probability",
                            "'probability' %g gives a sketch of depth 0: it must be further from 1", prob);
            return;
        }
    }
    if (!api_obj_bool(resp, body, "conservative", &a.conservative, NULL))
        return;
    cmd_cms_info_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CMS_INITBYDIM, &a, &r)))
        answer_info(resp, 201, &r);
}

static void h_cms_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "items", "increments", NULL };
    cmd_cms_incrby_args_t a;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
        return;
    api_items_t it;
    if (!freq_body_items(resp, body, true, 0, CMS_MAX_COUNT, &it))
        return;
    a.items = items_of(&it);
    a.as_increments = json_object_get(body, "increments") != NULL;
    a.counts = malloc(it.n * sizeof(*a.counts));
    if (!a.counts)
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
    else if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CMS_INCRBY, &a, NULL)))
        answer_counts(resp, a.counts, it.n);
    free(a.counts);
    api_items_free(&it);
}

/* Answers the estimates of the items (freed here). */
static void count_items(api_req_t *req, api_resp_t *resp, const char *key, size_t klen, api_items_t *it)
{
    cmd_cms_query_args_t a = { key, klen, items_of(it), malloc(it->n * sizeof(uint64_t)) };
    if (!a.counts)
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
    else if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CMS_QUERY, &a, NULL)))
        answer_counts(resp, a.counts, it->n);
    free(a.counts);
    api_items_free(it);
}

static void h_cms_count(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "item", NULL };
    const char *key;
    size_t klen;
    api_items_t it;
    if (api_path_key(req, resp, &key, &klen) && api_query_allow(req, resp, params) &&
        freq_query_items(req, resp, "item", &it))
        count_items(req, resp, key, klen, &it);
}

/* The same with the items in a JSON body, for batches too long for a URL. */
static void h_cms_count_post(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "items", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    api_items_t it;
    if ((body = api_key_body(req, resp, fields, &key, &klen)) && freq_body_items(resp, body, false, 1, 1, &it))
        count_items(req, resp, key, klen, &it);
}

static void h_cms_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "sources", "weights", NULL };
    cmd_cms_merge_args_t a = { 0 };
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
        return;
    json_t *sources = json_object_get(body, "sources"), *weights = json_object_get(body, "weights");
    size_t n = json_array_size(sources);
    if (!json_is_array(sources) || n == 0 || n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "sources", "'sources' must be an array of 1 to %d keys",
                        API_MAX_BATCH);
        return;
    }
    if (weights && (!json_is_array(weights) || json_array_size(weights) != n)) {
        api_error_field(resp, API_E_BAD_REQUEST, "weights", "'weights' must be an array as long as 'sources'");
        return;
    }
    api_items_t src;
    api_err_t err;
    if (!api_err_answered(resp, api_items_alloc(n, &src, &err), &err))
        return;
    int64_t *w = weights ? malloc(n * sizeof(*w)) : NULL;
    if (weights && !w) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
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
        if (weights) {
            json_t *x = json_array_get(weights, i);
            if (!json_is_integer(x)) {
                api_error_field(resp, API_E_BAD_REQUEST, "weights", "weights[%zu] must be an integer", i);
                goto done;
            }
            w[i] = (int64_t)json_integer_value(x);
        }
    }
    a.sources = items_of(&src);
    a.weights = (cmd_array_t){ .n = weights ? n : 0, .v = w };
    cmd_cms_info_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CMS_MERGE, &a, &r)))
        answer_info(resp, 200, &r);
done:
    free(w);
    api_items_free(&src);
}

static void h_cms_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_cms_key_args_t a;
    cmd_cms_info_t r;
    if (api_path_key(req, resp, &a.key, &a.klen) && api_no_query(req, resp) &&
        api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CMS_INFO, &a, &r)))
        answer_info(resp, 200, &r);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/cms/{key}",       h_cms_put, 0, API_BY(CMD_CMS_INITBYDIM) },
    { API_POST,   "/cms/{key}",       h_cms_add, 0, API_BY(CMD_CMS_INCRBY) },
    { API_GET,    "/cms/{key}",       h_cms_info, 0, API_BY(CMD_CMS_INFO) },
    { API_GET,    "/cms/{key}/count", h_cms_count, 0, API_BY(CMD_CMS_QUERY) },
    { API_POST,   "/cms/{key}/count", h_cms_count_post, 0, API_BY(CMD_CMS_QUERY) },
    { API_POST,   "/cms/{key}/merge", h_cms_merge, 0, API_BY(CMD_CMS_MERGE) },
};

API_FAMILY(cms);
