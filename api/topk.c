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
 */
#include <stdlib.h>

#include "api/api.h"
#include "api/freq.h"
#include "core/hash.h"
#include "core/topk.h"

#define TOPK_SEED_SALT 0x746f706b2d726e67ULL   /* "topk-rng": seeds decay from the key's bytes */

static json_t *info_json(const void *value)
{
    const topk_t *t = value;
    return json_pack("{s:I,s:I,s:I,s:o,s:I}", "k", (json_int_t)topk_k(t), "width", (json_int_t)topk_width(t),
                     "depth", (json_int_t)topk_depth(t), "decay", json_real(topk_decay(t)), "size_bytes",
                     (json_int_t)topk_type.size(t));
}

static void h_topk_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "k", "width", "depth", "decay", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
        return;
    int64_t k, width = TOPK_DEFAULT_WIDTH, depth = TOPK_DEFAULT_DEPTH;
    double decay = TOPK_DEFAULT_DECAY;
    if (!api_obj_int(resp, body, "k", true, 1, TOPK_MAX_K, &k, NULL) ||
        !api_obj_int(resp, body, "width", false, 1, (int64_t)TOPK_MAX_BUCKETS, &width, NULL) ||
        !api_obj_int(resp, body, "depth", false, 1, (int64_t)TOPK_MAX_BUCKETS, &depth, NULL) ||
        !api_obj_double(resp, body, "decay", false, 0, 1, &decay, NULL))
        return;
    if (decay <= 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "decay", "'decay' must be > 0 and <= 1");
        return;
    }
    if ((uint64_t)width * (uint64_t)depth > TOPK_MAX_BUCKETS) {
        api_error_field(resp, API_E_BAD_REQUEST, "width", "a %lld × %lld sketch is too large: at most %llu buckets",
                        (long long)width, (long long)depth, (unsigned long long)TOPK_MAX_BUCKETS);
        return;
    }
    uint64_t bytes = topk_bytes_for((uint32_t)k, (uint32_t)width, (uint32_t)depth);
    if (!api_grow(srv, req, resp, "width", "the Top-K", bytes, bytes + ks_entry_overhead(klen)))
        return;
    api_create_key(srv, req, resp, key, klen, &topk_type,
                   topk_create_gen(api_gen(req), (uint32_t)k, (uint32_t)width, (uint32_t)depth, decay,
                                   tally_xxh64(key, klen, TOPK_SEED_SALT)),
                   info_json);
}

static void h_topk_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "items", "increments", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
        return;
    api_items_t it;
    if (!freq_body_items(resp, body, true, 1, TOPK_MAX_INCREMENT, &it))
        return;
    /* the heap keeps a copy of an item it takes in: at most their bytes */
    uint64_t grow = 0;
    for (size_t i = 0; i < it.n; i++)
        grow += it.len[i] ? it.len[i] : 1;
    if (!api_make_room_for_key(srv, req, resp, grow, key, klen, 0)) {
        api_items_free(&it);
        return;
    }
    json_t *expelled = json_array();
    api_key_t h;
    ks_entry_t *e = api_key_open(srv, req, resp, key, klen, &topk_type, API_WRITE | API_MUST_EXIST, &h) ? h.e : NULL;
    if (e && !api_value_fits(srv, req, resp, "items", "the Top-K", topk_type.size(ks_entry_value(e)) + grow)) {
        api_key_close(&h, false);
        e = NULL;
    }
    if (e) {
        topk_t *t = ks_entry_value(e);
        for (size_t i = 0; i < it.n; i++) {
            char *out;
            size_t olen;
            topk_add(t, it.p[i], it.len[i], (uint32_t)it.by[i], &out, &olen);
            json_array_append_new(expelled, out ? freq_string(out, olen) : json_null());
            free(out);
        }
    }
    api_key_close(&h, e != NULL);
    api_items_free(&it);
    if (e)
        api_json(resp, 200, json_pack("{s:o}", "expelled", expelled));
    else
        json_decref(expelled);
}

static void h_topk_list(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    api_key_t h;
    ks_entry_t *e = api_key_open(srv, req, resp, key, klen, &topk_type, API_MUST_EXIST, &h) ? h.e : NULL;
    json_t *list = NULL;
    if (e) {
        const topk_t *t = ks_entry_value(e);
        /* each listed item: its text escaped at worst, and its count */
        uint64_t estimate = 16 + api_json_string_max(topk_item_bytes(t)) + (uint64_t)topk_k(t) * 48;
        topk_entry_t *v = NULL;
        if (!api_answer_fits(srv, req, resp, estimate, "the items held are too long to list at once")) {
            /* answered */
        } else if ((v = malloc(topk_k(t) * sizeof(*v)))) {
            size_t m = topk_list(t, v);
            list = json_array();
            for (size_t i = 0; i < m; i++)
                json_array_append_new(list, json_pack("{s:o,s:o}", "item", freq_string(v[i].item, v[i].len),
                                                      "count", freq_count(v[i].count)));
            free(v);
        } else {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        }
    }
    api_key_close(&h, false);
    if (list)
        api_json(resp, 200, json_pack("{s:o}", "items", list));
}

static void h_topk_query(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "items", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
        return;
    api_items_t it;
    if (!freq_body_items(resp, body, false, 1, 1, &it))
        return;
    json_t *in = json_array(), *counts = json_array();
    api_key_t h;
    ks_entry_t *e = api_key_open(srv, req, resp, key, klen, &topk_type, API_MUST_EXIST, &h) ? h.e : NULL;
    if (e) {
        const topk_t *t = ks_entry_value(e);
        for (size_t i = 0; i < it.n; i++) {
            json_array_append_new(in, json_boolean(topk_query(t, it.p[i], it.len[i])));
            json_array_append_new(counts, freq_count(topk_count(t, it.p[i], it.len[i])));
        }
    }
    api_key_close(&h, false);
    api_items_free(&it);
    if (e) {
        api_json(resp, 200, json_pack("{s:o,s:o}", "in_topk", in, "counts", counts));
    } else {
        json_decref(in);
        json_decref(counts);
    }
}

static void h_topk_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    api_answer_info(srv, req, resp, key, klen, &topk_type, info_json);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/topk/{key}",       h_topk_put, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/topk/{key}",       h_topk_add, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/topk/{key}",       h_topk_info, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/topk/{key}/list",  h_topk_list, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/topk/{key}/query", h_topk_query, API_ROUTE_READS, API_ACCESS_READ, NULL },
};

API_FAMILY(topk);
