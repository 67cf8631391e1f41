/*
 * topk.c - /topk: RedisBloom's HeavyKeeper Top-K (TOPK.*) over HTTP.
 *
 *   PUT  /topk/{key}        {"k","width"=8,"depth"=7,"decay"=0.9} -> 201 info   (TOPK.RESERVE)
 *   POST /topk/{key}        {"items":[...]} or {"increments":[{"item","by"}]}
 *                           -> {"expelled":[null,"x",...]}        (TOPK.ADD / TOPK.INCRBY)
 *   GET  /topk/{key}/list   -> {"items":[{"item","count"}]}       (TOPK.LIST WITHCOUNT)
 *   POST /topk/{key}/query  {"items":[...]} -> {"in_topk":[...],"counts":[...]}
 *                                                              (TOPK.QUERY, TOPK.COUNT)
 *   GET  /topk/{key}        -> {"k","width","depth","decay","size_bytes"}  (TOPK.INFO)
 *
 * The structure's decay decisions come from a generator seeded from the key
 * at creation (see core/topk.h), so the same requests on the same key always
 * give the same answers, live, replayed or reloaded.
 *
 * The HTTP adapter of the operations TOPK.* (cmd/topk.h): requests are
 * parsed into their arguments and answered from their results.
 */
#include <stdlib.h>

#include "api/items.h"
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/freq.h"
#include "cmd/topk.h"
#include "core/topk.h"

static void answer_info(api_resp_t *resp, int status, const cmd_topk_info_t *r)
{
    api_json(resp, status,
             json_pack("{s:I,s:I,s:I,s:o,s:I}", "k", (json_int_t)r->k, "width", (json_int_t)r->width, "depth",
                       (json_int_t)r->depth, "decay", json_real(r->decay), "size_bytes", (json_int_t)r->size_bytes));
}

static cmd_batch_t items_of(const api_items_t *it)
{
    cmd_batch_t c = { .n = it->n, .p = it->p, .len = it->len, .by = it->by };
    return c;
}

static void h_topk_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "k", "width", "depth", "decay", NULL };
    cmd_topk_reserve_args_t a;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
        return;
    int64_t k, width = TOPK_DEFAULT_WIDTH, depth = TOPK_DEFAULT_DEPTH;
    a.decay = TOPK_DEFAULT_DECAY;
    if (!api_obj_int(resp, body, "k", true, 1, TOPK_MAX_K, &k, NULL) ||
        !api_obj_int(resp, body, "width", false, 1, (int64_t)TOPK_MAX_BUCKETS, &width, NULL) ||
        !api_obj_int(resp, body, "depth", false, 1, (int64_t)TOPK_MAX_BUCKETS, &depth, NULL) ||
        !api_obj_double(resp, body, "decay", false, 0, 1, &a.decay, NULL))
        return;
    a.k = (uint32_t)k;
    a.width = (uint32_t)width;
    a.depth = (uint32_t)depth;
    cmd_topk_info_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TOPK_RESERVE, &a, &r)))
        answer_info(resp, 201, &r);
}

static void h_topk_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "items", "increments", NULL };
    cmd_topk_add_args_t a;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
        return;
    api_items_t it;
    if (!freq_body_items(resp, body, true, 1, TOPK_MAX_INCREMENT, &it))
        return;
    a.items = items_of(&it);
    a.expelled = calloc(it.n, sizeof(*a.expelled));
    if (!a.expelled) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
    } else if (api_cmd_answered(req, resp, cmd_call(req->ctx, json_object_get(body, "increments") ? &CMD_TOPK_INCRBY
                                                                                                   : &CMD_TOPK_ADD,
                                                    &a, NULL))) {
        json_t *expelled = json_array();
        for (size_t i = 0; i < it.n; i++)
            json_array_append_new(expelled, a.expelled[i].p ? freq_string(a.expelled[i].p, a.expelled[i].len)
                                                            : json_null());
        api_json(resp, 200, json_pack("{s:o}", "expelled", expelled));
    }
    for (size_t i = 0; a.expelled && i < it.n; i++)
        free(a.expelled[i].p);
    free(a.expelled);
    api_items_free(&it);
}

static void h_topk_list(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_topk_key_args_t a;
    cmd_topk_list_res_t r;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp) ||
        !api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TOPK_LIST, &a, &r)))
        return;
    json_t *list = json_array();
    for (size_t i = 0; i < r.n; i++)
        json_array_append_new(list, json_pack("{s:o,s:o}", "item", freq_string(r.v[i].item, r.v[i].len), "count",
                                              freq_count(r.v[i].count)));
    cmd_topk_list_free(&r);
    api_json(resp, 200, json_pack("{s:o}", "items", list));
}

static void h_topk_query(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "items", NULL };
    cmd_topk_query_args_t a;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
        return;
    api_items_t it;
    if (!freq_body_items(resp, body, false, 1, 1, &it))
        return;
    a.items = items_of(&it);
    a.listed = malloc(it.n * sizeof(*a.listed));
    a.counts = malloc(it.n * sizeof(*a.counts));
    if (!a.listed || !a.counts) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
    } else if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TOPK_QUERY, &a, NULL))) {
        json_t *in = json_array(), *counts = json_array();
        for (size_t i = 0; i < it.n; i++) {
            json_array_append_new(in, json_boolean(a.listed[i]));
            json_array_append_new(counts, freq_count(a.counts[i]));
        }
        api_json(resp, 200, json_pack("{s:o,s:o}", "in_topk", in, "counts", counts));
    }
    free(a.listed);
    free(a.counts);
    api_items_free(&it);
}

static void h_topk_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_topk_key_args_t a;
    cmd_topk_info_t r;
    if (api_path_key(req, resp, &a.key, &a.klen) && api_no_query(req, resp) &&
        api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_TOPK_INFO, &a, &r)))
        answer_info(resp, 200, &r);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/topk/{key}",       h_topk_put, 0, API_BY(CMD_TOPK_RESERVE) },
    { API_POST,   "/topk/{key}",       h_topk_add, 0, API_BY(CMD_TOPK_ADD) },
    { API_GET,    "/topk/{key}",       h_topk_info, 0, API_BY(CMD_TOPK_INFO) },
    { API_GET,    "/topk/{key}/list",  h_topk_list, 0, API_BY(CMD_TOPK_LIST) },
    { API_POST,   "/topk/{key}/query", h_topk_query, 0, API_BY(CMD_TOPK_QUERY) },
};

API_FAMILY(topk);
