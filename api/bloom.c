/*
 * bloom.c - /bloom: RedisBloom's BF.* over HTTP.
 *
 *   PUT  /bloom/{key}         {"error_rate":0.01,"capacity":100,"expansion":2,"scaling":true}   BF.RESERVE
 *   POST /bloom/{key}         {"items":[...]} -> {"added":[true,false]}   BF.MADD (creates with defaults)
 *   POST /bloom/{key}/exists  {"items":[...]} -> {"exists":[true,false]}  BF.MEXISTS
 *   GET  /bloom/{key}/exists?item=x           -> {"exists":true}          BF.EXISTS
 *   GET  /bloom/{key}                         -> info                     BF.INFO
 *
 * A batch is all or nothing: when a non-scaling filter fills up part-way
 * (RedisBloom answers "non scaling filter is full" for those items) the
 * whole request is refused with 507 and the filter is rolled back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/items.h"
#include "core/bloom.h"

/* The most bytes a filter's bit arrays may take: --maxmemory, or without it
 * the machine's memory (a larger filter could never be filled); none on
 * replay, so that what was acknowledged always rebuilds. */
static uint64_t bloom_byte_limit(api_server_t *srv, const api_req_t *req)
{
    if (req->replay)
        return 0;
    uint64_t max = ks_maxmemory(srv->ks);
    if (max)
        return max;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static void h_bloom_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "error_rate", "capacity", "expansion", "scaling", NULL };
    const char *key, *field;
    size_t klen;
    json_t *body;
    double error = BLOOM_DEFAULT_ERROR;
    int64_t capacity = BLOOM_DEFAULT_CAPACITY, expansion = BLOOM_DEFAULT_EXPANSION;
    bool scaling = true, has_exp = false;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) ||
        !api_obj_double(resp, body, "error_rate", false, -1e308, 1e308, &error, NULL) ||
        !api_obj_int(resp, body, "capacity", false, INT64_MIN, INT64_MAX, &capacity, NULL) ||
        !api_obj_int(resp, body, "expansion", false, INT64_MIN, INT64_MAX, &expansion, &has_exp) ||
        !api_obj_bool(resp, body, "scaling", &scaling, NULL))
        return;
    if (!scaling && has_exp) {
        api_error_field(resp, API_E_BAD_REQUEST, "expansion", "a non-scaling filter cannot expand");
        return;
    }
    if (capacity < 0 || expansion < 0 || expansion > UINT32_MAX) {
        api_error_field(resp, API_E_BAD_REQUEST, capacity < 0 ? "capacity" : "expansion", "'%s' must be positive",
                        capacity < 0 ? "capacity" : "expansion");
        return;
    }
    const char *why =
        bloom_validate(error, (uint64_t)capacity, (uint32_t)expansion, scaling, bloom_byte_limit(srv, req), &field);
    if (why) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' %s", field, why);
        return;
    }
    if (!api_make_room(srv, req, resp))
        return;
    api_create_key(srv, req, resp, key, klen, &bloom_type,
                   bloom_create_gen(api_gen(req), error, (uint64_t)capacity, (uint32_t)expansion, scaling), NULL);
}

static void h_bloom_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    api_items_t it;
    if (!api_items_request(req, resp, false, &key, &klen, &it))
        return;
    bool *added = malloc(it.n * sizeof(*added));
    if (!added) {
        api_items_free(&it);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    if (!api_make_room(srv, req, resp))
        goto out;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bloom_type, API_WRITE, &h))
        goto out;
    bloom_t *b = api_key_value(&h);
    bool created = !b;
    if (created)
        b = bloom_create_gen(api_gen(req), BLOOM_DEFAULT_ERROR, BLOOM_DEFAULT_CAPACITY, BLOOM_DEFAULT_EXPANSION,
                             true);
    uint64_t limit = bloom_byte_limit(srv, req);
    bloom_undo_t *u = b ? bloom_undo_begin(b) : NULL;
    int rc = u ? BLOOM_ADDED : BLOOM_NOMEM;
    bool changed = created;
    for (size_t i = 0; i < it.n && rc >= 0; i++) {
        rc = bloom_add(b, it.p[i], it.len[i], limit, u);
        added[i] = rc == BLOOM_ADDED;
        changed |= added[i];
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
                             "the filter cannot grow: its next sub-filter would pass the memory limit (or its error "
                             "rate underflows); nothing was added");
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

static void h_bloom_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
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
    json_object_set_new(o, "expansion", in.scaling ? json_integer(in.expansion) : json_null());
    api_json(resp, 200, o);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/bloom/{key}",        h_bloom_put, 0, API_ACCESS_WRITE },
    { API_POST,   "/bloom/{key}",        h_bloom_add, 0, API_ACCESS_WRITE },
    { API_GET,    "/bloom/{key}",        h_bloom_info, 0, API_ACCESS_READ },
    { API_POST,   "/bloom/{key}/exists", h_bloom_mexists, API_ROUTE_READS, API_ACCESS_READ },
    { API_GET,    "/bloom/{key}/exists", h_bloom_exists, 0, API_ACCESS_READ },
};

API_FAMILY(bloom, &bloom_type, "a Bloom filter", "no bloom filter at this key");
