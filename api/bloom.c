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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/dump.h"
#include "api/items.h"
#include "core/bloom.h"

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

static bloom_t *bloom_params_create(const api_req_t *req, const bloom_params_t *p)
{
    return bloom_create_gen(api_gen(req), p->error, (uint64_t)p->capacity, (uint32_t)p->expansion, p->scaling);
}

/* Each item looked up walks every sub-filter, newest first: n items over a
 * filter of many small sub-filters (expansion 1 from capacity 1 adds one
 * per item) may walk as far as a request may read, and no further. */
#define BLOOM_LINK_WALK 64   /* bytes of a sub-filter's record an item's lookup reads, at least */
static bool bloom_walk_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const bloom_t *b, size_t n)
{
    bloom_info_t in;
    bloom_get_info(b, &in);
    return api_work_fits(srv, req, resp, "items", (uint64_t)n * in.filters * BLOOM_LINK_WALK);
}

/* What creating the filter takes (bloom_memory), before it is made. */
static uint64_t bloom_params_bytes(const bloom_params_t *p)
{
    return bloom_bytes_for(p->error, (uint64_t)p->capacity, (uint32_t)p->expansion, p->scaling);
}

static void h_bloom_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "error_rate", "capacity", "expansion", "scaling", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    bloom_params_t p;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) || !bloom_params_read(req, resp, body, true, &p))
        return;
    uint64_t bytes = bloom_params_bytes(&p);
    if (!api_grow(srv, req, resp, "capacity", "the filter", bytes, bytes + ks_entry_overhead(klen)))
        return;
    api_create_key(srv, req, resp, key, klen, &bloom_type, bloom_params_create(req, &p), NULL);
}

static void h_bloom_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "items", "capacity", "error_rate", "expansion", "nonscaling", "nocreate",
                                          NULL };
    const char *key;
    size_t klen;
    json_t *body;
    api_items_t it;
    bloom_params_t p;
    bool nocreate = false;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) ||
        !api_obj_bool(resp, body, "nocreate", &nocreate, NULL) || !bloom_params_read(req, resp, body, false, &p))
        return;
    if (nocreate && p.given) {
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
    /* Room is asked for what the batch adds (a new filter, the sub-filters it
     * grows): sub-filters are added only while the filter stays within what
     * the limits allow now (bloom_add's max_bytes); one that would pass it
     * stops the batch, which is rolled back, and the request either is
     * refused (--max-value-size) or makes room for it and starts again. */
    for (unsigned attempts = 0;;) {
        api_key_t h;
        if (!api_key_open(srv, req, resp, key, klen, &bloom_type, API_WRITE | (nocreate ? API_MUST_EXIST : 0), &h))
            goto out;
        bloom_t *b = api_key_value(&h);
        bool created = !b;
        uint64_t base = created ? 0 : bloom_memory(b), room = api_room_now(srv, req),
                 cap = api_value_limit(srv, req), first = created ? bloom_params_bytes(&p) : 0;
        uint64_t extra = created ? first + ks_entry_overhead(klen) : 0;
        ks_key_t kk = ks_key(srv->ks, key, klen);
        api_keep_t keep = { &kk, 1, base };   /* the filter itself is not evicted for its own growth */
        if (created && (first > cap || extra > room)) {
            api_key_close(&h, false);
            if (!api_value_fits(srv, req, resp, "capacity", "the filter", first) ||
                !api_room_retry(srv, req, resp, extra, &keep, &attempts))
                goto out;
            continue;
        }
        if (!created && !bloom_walk_fits(srv, req, resp, b, it.n)) {
            api_key_close(&h, false);
            goto out;
        }
        if (created)
            b = bloom_params_create(req, &p);
        uint64_t limit = cap;   /* what the filter may reach in this attempt */
        if (room != UINT64_MAX && (created ? first : base) + room - extra < limit)
            limit = (created ? first : base) + room - extra;
        bloom_undo_t *u = b ? bloom_undo_begin(b) : NULL;
        int rc = u ? BLOOM_ADDED : BLOOM_NOMEM;
        bool changed = created;
        size_t i = 0;
        for (; i < it.n && rc >= 0; i++) {
            rc = bloom_add(b, it.p[i], it.len[i], limit == UINT64_MAX ? 0 : limit, u);
            added[i] = rc == BLOOM_ADDED;
            changed |= added[i];
        }
        if (rc == BLOOM_BUDGET) {
            /* the next link is needed; the rest of the batch may need more:
             * room is made for the most it may take, or refused at once */
            uint64_t reach = bloom_memory(b) + bloom_next_link_bytes(b), rest = bloom_growth_bound(b, it.n - (i - 1));
            uint64_t more = bloom_memory(b) - base + (created ? ks_entry_overhead(klen) : 0);
            more = rest > UINT64_MAX - more ? UINT64_MAX : more + rest;
            bloom_undo_rollback(b, u);
            if (created)
                bloom_free(b);
            api_key_close(&h, false);
            if (!api_value_fits(srv, req, resp, "items", "the filter's next sub-filter", reach) ||
                !api_room_retry(srv, req, resp, more, &keep, &attempts))
                goto out;
            continue;
        }
        if (rc < 0) {
            bloom_undo_rollback(b, u);
            if (created)
                bloom_free(b);
            api_key_close(&h, false);
            if (rc == BLOOM_FULL)
                api_error_status(resp, rc, NULL, "non scaling filter is full; nothing was added");
            else if (rc == BLOOM_LIMIT)
                api_error_status(resp, rc, NULL,
                                 "the filter cannot grow: its next sub-filter cannot be built (its error rate "
                                 "underflows, or its size overflows); nothing was added");
            else
                api_error_status(resp, rc, NULL, "out of memory adding to the filter; nothing was added");
            goto out;
        }
        bloom_undo_commit(u);
        if (created && !api_key_add(&h, &bloom_type, b, KS_NO_EXPIRY)) {
            bloom_free(b);
            api_key_close(&h, false);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory creating the filter");
            goto out;
        }
        api_key_close(&h, changed);
        api_bool_array(resp, "added", added, it.n);
        break;
    }
out:
    free(added);
    api_items_free(&it);
}

/* Looks items up; a missing key answers false for all (BF.MEXISTS). */
static void bloom_exists(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                         const api_items_t *it, bool single)
{
    bool *found = calloc(it->n, sizeof(*found));
    if (!found) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bloom_type, API_READ, &h)) {
        free(found);
        return;
    }
    const bloom_t *b = api_key_value(&h);
    if (b && !bloom_walk_fits(srv, req, resp, b, it->n)) {
        api_key_close(&h, false);
        free(found);
        return;
    }
    for (size_t i = 0; b && i < it->n; i++)
        found[i] = bloom_check(b, it->p[i], it->len[i]);
    api_key_close(&h, false);
    if (single)
        api_body(resp, 200, NULL, found[0] ? "{\"exists\":true}" : "{\"exists\":false}", found[0] ? 15 : 16);
    else
        api_bool_array(resp, "exists", found, it->n);
    free(found);
}

static void h_bloom_mexists(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    api_items_t it;
    if (!api_items_request(req, resp, false, &key, &klen, &it))
        return;
    bloom_exists(srv, req, resp, key, klen, &it, false);
    api_items_free(&it);
}

static void h_bloom_exists(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "item", NULL };
    const char *key, *item;
    size_t klen, ilen;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_item(req, resp, "item", &item, &ilen))
        return;
    api_items_t it = { .n = 1, .p = &item, .len = &ilen };
    bloom_exists(srv, req, resp, key, klen, &it, true);
}

/* BF.INFO's answer: every member, or with ?field= the one named (BF.INFO
 * key CAPACITY ...: any member of the full answer may be asked for). */
static void h_bloom_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "field", NULL };
    const char *key, *field;
    size_t klen, flen;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_string(req, resp, "field", false, &field, &flen))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bloom_type, API_MUST_EXIST, &h))
        return;
    bloom_info_t in;
    bloom_get_info(api_key_value(&h), &in);
    api_key_close(&h, false);
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
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bloom_type, API_READ, &h))
        return;
    bloom_info_t in = { 0 };
    if (api_key_value(&h))
        bloom_get_info(api_key_value(&h), &in);
    api_key_close(&h, false);
    api_json(resp, 200, json_pack("{s:I}", "items", (json_int_t)in.items));
}

/* BF.SCANDUMP's header: one entry per sub-filter. */
static uint64_t bloom_header_len(const void *v)
{
    bloom_info_t in;
    bloom_get_info(v, &in);
    return BLOOM_DUMP_HEADER_FIXED + (uint64_t)BLOOM_DUMP_LINK * in.filters;
}

static const api_dump_t bloom_dump = { &bloom_dump_ops, NULL, bloom_header_len };

static void h_bloom_dump(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_dump_serve(srv, req, resp, &bloom_dump);
}
static void h_bloom_load(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_load_serve(srv, req, resp, &bloom_dump);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/bloom/{key}",        h_bloom_put, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/bloom/{key}",        h_bloom_add, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/bloom/{key}",        h_bloom_info, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/bloom/{key}/exists", h_bloom_mexists, API_ROUTE_READS, API_ACCESS_READ, NULL },
    { API_GET,    "/bloom/{key}/exists", h_bloom_exists, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/bloom/{key}/card",   h_bloom_card, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/bloom/{key}/dump",   h_bloom_dump, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/bloom/{key}/load",   h_bloom_load, API_ROUTE_BINARY, API_ACCESS_WRITE, NULL },
};

API_FAMILY(bloom);
