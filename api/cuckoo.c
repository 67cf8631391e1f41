/*
 * cuckoo.c - /cuckoo: RedisBloom's CF.* over HTTP.
 *
 *   PUT  /cuckoo/{key}        {"capacity":1000,"bucket_size":2,"max_iterations":20,
 *                              "expansion":1,"fingerprint_bits":8}        CF.RESERVE
 *   POST /cuckoo/{key}        {"items":[...],"nx":false} -> {"added":[...]}   CF.ADD / CF.ADDNX
 *                             (creates with defaults, capacity 1024)
 *   POST /cuckoo/{key}/exists {"items":[...]} -> {"exists":[...]}        CF.MEXISTS
 *   GET  /cuckoo/{key}/exists?item=x          -> {"exists":true}         CF.EXISTS
 *   POST /cuckoo/{key}/remove {"items":[...]} -> {"removed":[...]}       CF.DEL
 *   GET  /cuckoo/{key}/count?item=x           -> {"count":N}             CF.COUNT
 *   GET  /cuckoo/{key}                        -> info                    CF.INFO
 *   POST /cuckoo/{key}/compact                -> info                    CF.COMPACT
 *   GET  /cuckoo/{key}/dump?cursor=C          -> chunk                   CF.SCANDUMP (api/dump.h)
 *   POST /cuckoo/{key}/load?cursor=C          <- chunk                   CF.LOADCHUNK
 *                             (the format carries no capacity: a loaded filter reports
 *                             its first sub-filter's slots)
 *
 * An add batch is all or nothing: if the filter cannot take an item (no
 * slot, no sub-filter can be added) the request is refused with 507 and the
 * filter rolled back (RedisBloom's CF.INSERT answers -1 for each item that
 * found no room, "Filter is full", and keeps the others).  A filter made
 * with expansion 0 never grows: once full, adds are refused that way.  One
 * with 32 sub-filters refuses every add ("Maximum expansions reached").
 * Dumps exist only for 8-bit fingerprints (RedisBloom's format has no
 * other).  The eviction generator is seeded from the key, so a
 * key rebuilt by journal replay makes the same choices.
 *
 * The adapter of the operations CF.* (cmd/cuckoo.h): it parses and
 * validates the parameters, runs the operation and answers.
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
#include "cmd/cuckoo.h"

static void h_cuckoo_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "capacity", "bucket_size", "max_iterations", "expansion",
                                          "fingerprint_bits", NULL };
    const char *field;
    cmd_cf_reserve_args_t a;
    json_t *body;
    int64_t cap, bs = CUCKOO_DEFAULT_BUCKET_SIZE, mi = CUCKOO_DEFAULT_MAX_ITERATIONS,
                 exp = CUCKOO_DEFAULT_EXPANSION, fp = CUCKOO_DEFAULT_FP_BITS;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)) ||
        !api_obj_int(resp, body, "capacity", true, 1, INT64_MAX, &cap, NULL) ||
        !api_obj_int(resp, body, "bucket_size", false, 1, CUCKOO_MAX_BUCKET_SIZE, &bs, NULL) ||
        !api_obj_int(resp, body, "max_iterations", false, 1, CUCKOO_MAX_ITERATIONS, &mi, NULL) ||
        !api_obj_int(resp, body, "expansion", false, 0, CUCKOO_MAX_EXPANSION, &exp, NULL) ||
        !api_obj_int(resp, body, "fingerprint_bits", false, 8, 16, &fp, NULL))
        return;
    a.p = (cuckoo_params_t){ (uint64_t)cap, (uint32_t)bs, (uint32_t)mi, (uint32_t)exp, (uint32_t)fp };
    const char *why = cuckoo_validate(&a.p, 0, &field);   /* sizes: the operation's */
    if (why) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' %s", field, why);
        return;
    }
    cmd_cf_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CF_RESERVE, &a, &r)))
        api_json(resp, 201, json_pack("{s:b}", "created", 1));
}

/* Runs a batch operation whose answer is one boolean per item, named `name`. */
static void cuckoo_batch(api_req_t *req, api_resp_t *resp, const cmd_def_t *op, const char *name, const char *key,
                         size_t klen, const api_items_t *it, bool nx)
{
    bool *out = calloc(it->n, sizeof(*out));
    if (!out) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    cmd_cf_items_args_t a = { key, klen, cmd_items_of(it->p, it->len, NULL, it->n), nx, out, false, 0, false, NULL };
    cmd_cf_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, op, &a, &r)))
        api_bool_array(resp, name, out, it->n);
    free(out);
}

static void h_cuckoo_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "items", "nx", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    api_items_t it;
    bool nx = false;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) || !api_obj_bool(resp, body, "nx", &nx, NULL) ||
        !api_items_parse(resp, body, "items", &it))
        return;
    cuckoo_batch(req, resp, &CMD_CF_INSERT, "added", key, klen, &it, nx);
    api_items_free(&it);
}

static void h_cuckoo_mexists(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    const char *key;
    size_t klen;
    api_items_t it;
    if (!api_items_request(req, resp, false, &key, &klen, &it))
        return;
    cuckoo_batch(req, resp, &CMD_CF_MEXISTS, "exists", key, klen, &it, false);
    api_items_free(&it);
}

static void h_cuckoo_exists(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "item", NULL };
    const char *key, *item;
    size_t klen, ilen;
    bool found = false;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_item(req, resp, "item", &item, &ilen))
        return;
    cmd_cf_items_args_t a = { key, klen, cmd_items_of(&item, &ilen, NULL, 1), false, &found, false, 0, false, NULL };
    cmd_cf_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CF_EXISTS, &a, &r)))
        api_body(resp, 200, NULL, found ? "{\"exists\":true}" : "{\"exists\":false}", found ? 15 : 16);
}

static void h_cuckoo_count(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "item", NULL };
    cmd_cf_count_args_t a;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !api_query_item(req, resp, "item", &a.item, &a.ilen))
        return;
    cmd_cf_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CF_COUNT, &a, &r))) {
        char b[48];
        int n = snprintf(b, sizeof(b), "{\"count\":%llu}", (unsigned long long)r.n);
        api_body(resp, 200, NULL, b, (size_t)n);
    }
}

static void h_cuckoo_remove(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    const char *key;
    size_t klen;
    api_items_t it;
    if (!api_items_request(req, resp, false, &key, &klen, &it))
        return;
    cuckoo_batch(req, resp, &CMD_CF_DEL, "removed", key, klen, &it, false);
    api_items_free(&it);
}

/* CF.INFO's answer for the filter. */
static void cuckoo_info_answer(api_resp_t *resp, const cuckoo_info_t *in)
{
    double slots = (double)in->buckets * in->bucket_size;
    json_t *answer = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "size_bytes",
                               (json_int_t)in->size_bytes, "buckets", (json_int_t)in->buckets, "filters",
                               (json_int_t)in->filters, "items", (json_int_t)in->items, "deletes",
                               (json_int_t)in->deletes, "capacity", (json_int_t)in->capacity, "bucket_size",
                               (json_int_t)in->bucket_size, "max_iterations", (json_int_t)in->max_iterations,
                               "expansion", (json_int_t)in->expansion, "fingerprint_bits", (json_int_t)in->fp_bits,
                               "load", slots > 0 ? (double)in->items / slots : 0.0);
    if (answer)
        api_json(resp, 200, answer);
    else
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
}

static void h_cuckoo_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_cf_key_args_t a;
    cmd_cf_info_res_t r;
    if (api_path_key(req, resp, &a.key, &a.klen) && api_no_query(req, resp) &&
        api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CF_INFO, &a, &r)))
        cuckoo_info_answer(resp, &r.info);
}

/* CF.COMPACT: moves fingerprints into older sub-filters and frees the
 * emptied newest ones; answers the info after it.  Journaled (its effect
 * is part of the state replay must rebuild). */
static void h_cuckoo_compact(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_cf_key_args_t a;
    cmd_cf_info_res_t r;
    if (api_path_key(req, resp, &a.key, &a.klen) && api_no_query(req, resp) &&
        api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_CF_COMPACT, &a, &r)))
        cuckoo_info_answer(resp, &r.info);
}

static void h_cuckoo_dump(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_dump_serve(srv, req, resp, &CMD_CF_SCANDUMP);
}
static void h_cuckoo_load(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_load_serve(srv, req, resp, &CMD_CF_LOADCHUNK);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/cuckoo/{key}",        h_cuckoo_put, 0, API_BY(CMD_CF_RESERVE) },
    { API_POST,   "/cuckoo/{key}",        h_cuckoo_add, 0, API_BY(CMD_CF_INSERT) },
    { API_GET,    "/cuckoo/{key}",        h_cuckoo_info, 0, API_BY(CMD_CF_INFO) },
    { API_POST,   "/cuckoo/{key}/exists", h_cuckoo_mexists, 0, API_BY(CMD_CF_MEXISTS) },
    { API_GET,    "/cuckoo/{key}/exists", h_cuckoo_exists, 0, API_BY(CMD_CF_EXISTS) },
    { API_POST,   "/cuckoo/{key}/remove", h_cuckoo_remove, 0, API_BY(CMD_CF_DEL) },
    { API_GET,    "/cuckoo/{key}/count",  h_cuckoo_count, 0, API_BY(CMD_CF_COUNT) },
    { API_POST,   "/cuckoo/{key}/compact", h_cuckoo_compact, 0, API_BY(CMD_CF_COMPACT) },
    { API_GET,    "/cuckoo/{key}/dump",   h_cuckoo_dump, 0, API_BY(CMD_CF_SCANDUMP) },
    { API_POST,   "/cuckoo/{key}/load",   h_cuckoo_load, API_ROUTE_BINARY, API_BY(CMD_CF_LOADCHUNK) },
};

API_FAMILY(cuckoo);
