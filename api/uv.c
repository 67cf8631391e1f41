/*
 * uv.c - /uv: unique counting with Redis's HyperLogLog (PFADD, PFCOUNT,
 * PFMERGE), answers equal to Redis's for the same items.
 *
 *   POST /uv/{key}            {"items":[...]}   -> {"updated":true}     PFADD
 *                             ("items":[] creates an empty HLL, as PFADD key)
 *   GET  /uv/{key}                              -> {"count":4}          PFCOUNT key
 *   GET  /uv/{key}?union=k2&union=k3            -> {"count":N}          PFCOUNT key k2 k3
 *   GET  /uv/{key}?format=redis                 -> the bytes Redis stores (GET key)
 *   PUT  /uv/{key}  (application/octet-stream)  <- bytes read from Redis (GET key)
 *   POST /uv/{key}/merge      {"sources":[...]} -> {"count":N}          PFMERGE key sources + PFCOUNT key
 *
 * Like Redis, a single-key count stores the cardinality in the value's
 * header when it was stale (PFCOUNT is a write in Redis for that reason);
 * that cache is derived data, kept in memory and not journaled.
 *
 * The adapter of the operations PFADD, PFCOUNT, PFMERGE, HLL.EXPORT and
 * HLL.IMPORT (cmd/uv.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/dump.h"
#include "api/items.h"
#include "cmd/uv.h"

static void h_uv_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_pfadd_args_t a;
    api_items_t it;
    if (!api_items_request(req, resp, true, &a.key, &a.klen, &it))
        return;
    a.items = cmd_items_of(it.p, it.len, NULL, it.n);
    cmd_uv_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_PFADD, &a, &r)))
        api_body(resp, 200, NULL, r.updated ? "{\"updated\":true}" : "{\"updated\":false}", r.updated ? 16 : 17);
    api_items_free(&it);
}

static void count_answer(api_resp_t *resp, uint64_t count)
{
    char b[64];
    int n = snprintf(b, sizeof(b), "{\"count\":%llu}", (unsigned long long)count);
    api_body(resp, 200, NULL, b, (size_t)n);
}

/* PFCOUNT key k2 k3...: the keys of ?union= validated, then the count. */
static void uv_union(api_req_t *req, api_resp_t *resp, const char *key, size_t klen)
{
    size_t n = api_query_count(req, "union");
    if (n + 1 > CMD_UV_MAX_KEYS) {
        api_error_field(resp, API_E_BAD_REQUEST, "union", "at most %d keys in a union", CMD_UV_MAX_KEYS - 1);
        return;
    }
    api_items_t u;
    api_err_t err;
    if (!api_err_answered(resp, api_items_alloc(n, &u, &err), &err))
        return;
    size_t j = 0;
    for (int i = 0; i < req->nparams; i++) {
        if (strcmp(req->params[i].name, "union") != 0)
            continue;
        if (!api_check_key(resp, "union", req->params[i].value, req->params[i].vlen)) {
            api_items_free(&u);
            return;
        }
        u.p[j] = req->params[i].value;
        u.len[j++] = req->params[i].vlen;
    }
    cmd_pfcount_args_t a = { key, klen, cmd_items_of(u.p, u.len, NULL, n) };
    cmd_uv_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_PFCOUNT, &a, &r)))
        count_answer(resp, r.count);
    api_items_free(&u);
}

static void h_uv_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "union", "format", NULL };
    const char *key, *format;
    size_t klen, flen;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params))
        return;
    format = api_query_get(req, "format", &flen);
    bool raw = false;
    if (format) {
        if (api_query_count(req, "format") > 1 || (strcmp(format, "redis") != 0 && strcmp(format, "json") != 0)) {
            api_error_field(resp, API_E_BAD_REQUEST, "format", "'format' must be 'json' or 'redis'");
            return;
        }
        raw = strcmp(format, "redis") == 0;
    }
    if (api_query_count(req, "union")) {
        if (raw) {
            api_error_field(resp, API_E_BAD_REQUEST, "format", "format=redis exports one key; it takes no union");
            return;
        }
        uv_union(req, resp, key, klen);
        return;
    }
    cmd_uv_res_t r;
    if (raw) {
        cmd_hll_key_args_t a = { key, klen };
        if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_HLL_EXPORT, &a, &r)))
            api_body_take(resp, 200, "application/octet-stream", r.data, r.len);
        return;
    }
    cmd_pfcount_args_t a = { key, klen, cmd_items_of(NULL, NULL, NULL, 0) };
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_PFCOUNT, &a, &r)))
        count_answer(resp, r.count);
}

static void h_uv_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_hll_import_args_t a = { .bytes = req->body, .len = req->body_len };
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    if (!api_media_type_is(req->ctype, "application/octet-stream")) {
        api_error(resp, API_E_UNSUPPORTED_MEDIA_TYPE,
                  "PUT /uv/{key} takes the bytes of a Redis HyperLogLog (Content-Type: application/octet-stream)");
        return;
    }
    cmd_uv_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_HLL_IMPORT, &a, &r)))
        api_json(resp, 200,
                 json_pack("{s:I,s:s,s:I,s:b}", "count", (json_int_t)r.count, "encoding",
                           r.sparse ? "sparse" : "dense", "bytes", (json_int_t)req->body_len, "replaced", r.replaced));
}

static void h_uv_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "sources", NULL };
    cmd_pfmerge_args_t a;
    json_t *body;
    api_items_t src;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)) ||
        !api_keys_parse(resp, body, "sources", CMD_UV_MAX_KEYS - 1, &src))
        return;
    a.sources = cmd_items_of(src.p, src.len, NULL, src.n);
    cmd_uv_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_PFMERGE, &a, &r)))
        count_answer(resp, r.count);
    api_items_free(&src);
}

/* The family: its routes, in matching order, and its type.  GET /uv/{key}
 * runs PFCOUNT, or HLL.EXPORT for ?format=redis (both reads). */
static const api_route_t routes[] = {
    { API_POST,   "/uv/{key}",       h_uv_add, 0, API_BY(CMD_PFADD) },
    { API_GET,    "/uv/{key}",       h_uv_get, 0, API_BY(CMD_PFCOUNT) },
    { API_PUT,    "/uv/{key}",       h_uv_put, API_ROUTE_BINARY, API_BY(CMD_HLL_IMPORT) },
    { API_POST,   "/uv/{key}/merge", h_uv_merge, 0, API_BY(CMD_PFMERGE) },
};

API_FAMILY(uv);
