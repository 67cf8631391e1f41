/*
 * bloom.c - /bloom: RedisBloom's BF.* over HTTP.
 *
 *   PUT  /bloom/{key}         {"error_rate":0.01,"capacity":100,"expansion":2,"scaling":true}   BF.RESERVE
 *                             (error_rate and capacity required, as BF.RESERVE's)
 *   POST /bloom/{key}         {"items":[...]} -> {"added":[true,false]}   BF.MADD / BF.INSERT
 *                             creating options: "capacity", "error_rate", "expansion", "nonscaling"
 *                             (used only when the add creates the filter; defaults 100, 0.01, 2),
 *                             "nocreate": true (404 for a missing filter)
 *   POST /bloom/{key}/exists  {"items":[...]} -> {"exists":[true,false]}  BF.MEXISTS
 *   GET  /bloom/{key}/exists?item=x           -> {"exists":true}          BF.EXISTS
 *   GET  /bloom/{key}/card                    -> {"items":N}              BF.CARD (0 when missing)
 *   GET  /bloom/{key}[?field=capacity]        -> info, or one member      BF.INFO [field]
 *   GET  /bloom/{key}/dump?cursor=C           -> chunk                    BF.SCANDUMP (api/dump.h)
 *   POST /bloom/{key}/load?cursor=C           <- chunk                    BF.LOADCHUNK
 *
 * A batch is all or nothing: when a non-scaling filter fills up part-way
 * (RedisBloom answers "non scaling filter is full" for the item that did
 * not fit and stops, keeping the earlier ones) the whole request is refused
 * with 507 and the filter is rolled back.
 *
 * A journal record of PUT written before error_rate and capacity were
 * required (tally 0.x took RedisBloom's BF.ADD defaults) still replays with
 * those defaults: the requirement is checked on live requests only.
 *
 * The adapter of the operations BF.* (cmd/bloom.h): it parses and validates
 * the parameters (their field names are HTTP's), runs the operation and
 * answers.
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
#include "cmd/bloom.h"

/* A filter's creation parameters, as PUT (BF.RESERVE) or an add (BF.INSERT)
 * gives them. */
typedef struct bloom_params {
    double error;
    int64_t capacity, expansion;
    bool scaling;
    bool given;              /* any of them was given */
} bloom_params_t;

/* Reads and validates the creation parameters of a PUT body ("scaling";
 * error_rate and capacity required on live requests) or of an add body
 * ("nonscaling"; all optional, RedisBloom's BF.ADD defaults).  An
 * expansion of 0 means non-scaling; a non-scaling filter given another
 * expansion is refused, as BF.RESERVE refuses it. */
static bool bloom_params_read(const api_req_t *req, api_resp_t *resp, json_t *body, bool put, bloom_params_t *p)
{
    const char *scale_name = put ? "scaling" : "nonscaling", *field;
    bool required = put && !req->replay, has_err, has_cap, has_exp, has_scale, flag = put;
    *p = (bloom_params_t){ BLOOM_DEFAULT_ERROR, BLOOM_DEFAULT_CAPACITY, BLOOM_DEFAULT_EXPANSION, true, false };
    if (!api_obj_double(resp, body, "error_rate", required, -1e308, 1e308, &p->error, &has_err) ||
        !api_obj_int(resp, body, "capacity", required, INT64_MIN, INT64_MAX, &p->capacity, &has_cap) ||
        !api_obj_int(resp, body, "expansion", false, INT64_MIN, INT64_MAX, &p->expansion, &has_exp) ||
        !api_obj_bool(resp, body, scale_name, &flag, &has_scale))
        return false;
    p->scaling = put ? flag : !flag;
    p->given = has_err || has_cap || has_exp || has_scale;
    if (!p->scaling && has_exp && p->expansion != 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "expansion", "a non-scaling filter cannot expand");
        return false;
    }
    if (p->capacity < 0 || p->expansion < 0 || p->expansion > UINT32_MAX) {
        field = p->capacity < 0 ? "capacity" : "expansion";
        api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' must be positive", field);
        return false;
    }
    const char *why = bloom_validate(p->error, (uint64_t)p->capacity, (uint32_t)p->expansion, p->scaling, &field);
    if (why) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' %s", field, why);
        return false;
    }
    return true;
}

static cmd_bf_params_t bloom_params_of(const bloom_params_t *p)
{
    return (cmd_bf_params_t){ p->error, (uint64_t)p->capacity, (uint32_t)p->expansion, p->scaling };
}

static void h_bloom_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "error_rate", "capacity", "expansion", "scaling", NULL };
    cmd_bf_reserve_args_t a;
    cmd_bf_res_t r;
    json_t *body;
    bloom_params_t p;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)) || !bloom_params_read(req, resp, body, true, &p))
        return;
    a.p = bloom_params_of(&p);
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_BF_RESERVE, &a, &r)))
        api_json(resp, 201, json_pack("{s:b}", "created", 1));
}

static void h_bloom_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "items", "capacity", "error_rate", "expansion", "nonscaling", "nocreate",
                                          NULL };
    cmd_bf_insert_args_t a = { 0 };
    json_t *body;
    api_items_t it;
    bloom_params_t p;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)) ||
        !api_obj_bool(resp, body, "nocreate", &a.nocreate, NULL) || !bloom_params_read(req, resp, body, false, &p))
        return;
    if (a.nocreate && p.given) {
        api_error_field(resp, API_E_BAD_REQUEST, "nocreate",
                        "'nocreate' excludes the creating options (capacity, error_rate, expansion, nonscaling)");
        return;
    }
    if (!api_items_parse(resp, body, "items", &it))
        return;
    bool *added = malloc(it.n * sizeof(*added));
    if (!added) {
        api_items_free(&it);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    a.items = cmd_items_of(it.p, it.len, NULL, it.n);
    a.p = bloom_params_of(&p);
    a.added = added;
    cmd_bf_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_BF_INSERT, &a, &r)))
        api_bool_array(resp, "added", added, it.n);
    free(added);
    api_items_free(&it);
}

/* Looks items up; a missing key answers false for all (BF.MEXISTS). */
static void bloom_exists(api_req_t *req, api_resp_t *resp, const char *key, size_t klen, const api_items_t *it,
                         bool single)
{
    bool *found = calloc(it->n, sizeof(*found));
    if (!found) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    cmd_bf_exists_args_t a = { key, klen, cmd_items_of(it->p, it->len, NULL, it->n), found };
    cmd_bf_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, single ? &CMD_BF_EXISTS : &CMD_BF_MEXISTS, &a, &r))) {
        if (single)
            api_body(resp, 200, NULL, found[0] ? "{\"exists\":true}" : "{\"exists\":false}", found[0] ? 15 : 16);
        else
            api_bool_array(resp, "exists", found, it->n);
    }
    free(found);
}

static void h_bloom_mexists(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    const char *key;
    size_t klen;
    api_items_t it;
    if (!api_items_request(req, resp, false, &key, &klen, &it))
        return;
    bloom_exists(req, resp, key, klen, &it, false);
    api_items_free(&it);
}

static void h_bloom_exists(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "item", NULL };
    const char *key, *item;
    size_t klen, ilen;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_item(req, resp, "item", &item, &ilen))
        return;
    api_items_t it = { .n = 1, .p = &item, .len = &ilen };
    bloom_exists(req, resp, key, klen, &it, true);
}

/* BF.INFO's answer: every member, or with ?field= the one named (BF.INFO
 * key CAPACITY ...: any member of the full answer may be asked for). */
static void h_bloom_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "field", NULL };
    const char *field;
    size_t flen;
    cmd_bf_key_args_t a;
    cmd_bf_info_res_t r;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !api_query_string(req, resp, "field", false, &field, &flen) ||
        !api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_BF_INFO, &a, &r)))
        return;
    const bloom_info_t in = r.info;
    json_t *o = json_pack("{s:I,s:I,s:I,s:I,s:f,s:b,s:I,s:f}", "capacity", (json_int_t)in.capacity, "size_bytes",
                          (json_int_t)in.size_bytes, "filters", (json_int_t)in.filters, "items",
                          (json_int_t)in.items, "error_rate", in.error_rate, "scaling", in.scaling, "hashes",
                          (json_int_t)in.hashes, "bits_per_item",
                          in.capacity ? (double)in.bits / (double)in.capacity : 0.0);
    if (!o) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    json_object_set_new(o, "expansion", in.scaling ? json_integer(in.expansion) : json_null());
    if (field) {
        json_t *v = json_object_get(o, field);
        if (!v) {
            json_decref(o);
            api_error_field(resp, API_E_BAD_REQUEST, "field",
                            "'field' must name a member of the info: capacity, size_bytes, filters, items, "
                            "expansion, error_rate, scaling, hashes or bits_per_item");
            return;
        }
        json_t *one = json_object();
        json_object_set(one, field, v);
        json_decref(o);
        o = one;
    }
    api_json(resp, 200, o);
}

/* BF.CARD: the items added, 0 for a missing key. */
static void h_bloom_card(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_bf_key_args_t a;
    cmd_bf_info_res_t r;
    if (api_path_key(req, resp, &a.key, &a.klen) && api_no_query(req, resp) &&
        api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_BF_CARD, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "items", (json_int_t)r.info.items));
}

static void h_bloom_dump(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_dump_serve(srv, req, resp, &CMD_BF_SCANDUMP);
}
static void h_bloom_load(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_load_serve(srv, req, resp, &CMD_BF_LOADCHUNK);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/bloom/{key}",        h_bloom_put, 0, API_BY(CMD_BF_RESERVE) },
    { API_POST,   "/bloom/{key}",        h_bloom_add, 0, API_BY(CMD_BF_INSERT) },
    { API_GET,    "/bloom/{key}",        h_bloom_info, 0, API_BY(CMD_BF_INFO) },
    { API_POST,   "/bloom/{key}/exists", h_bloom_mexists, 0, API_BY(CMD_BF_MEXISTS) },
    { API_GET,    "/bloom/{key}/exists", h_bloom_exists, 0, API_BY(CMD_BF_EXISTS) },
    { API_GET,    "/bloom/{key}/card",   h_bloom_card, 0, API_BY(CMD_BF_CARD) },
    { API_GET,    "/bloom/{key}/dump",   h_bloom_dump, 0, API_BY(CMD_BF_SCANDUMP) },
    { API_POST,   "/bloom/{key}/load",   h_bloom_load, API_ROUTE_BINARY, API_BY(CMD_BF_LOADCHUNK) },
};

API_FAMILY(bloom);
