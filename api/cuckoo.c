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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/dump.h"
#include "api/items.h"
#include "core/cuckoo.h"
#include "core/hash.h"

#define CUCKOO_SEED_SALT 0x6375636b6f6fULL   /* "cuckoo": seeds evictions from the key */

static uint64_t key_seed(const char *key, size_t klen) { return tally_xxh64(key, klen, CUCKOO_SEED_SALT); }

static void h_cuckoo_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "capacity", "bucket_size", "max_iterations", "expansion",
                                          "fingerprint_bits", NULL };
    const char *key, *field;
    size_t klen;
    json_t *body;
    int64_t cap, bs = CUCKOO_DEFAULT_BUCKET_SIZE, mi = CUCKOO_DEFAULT_MAX_ITERATIONS,
                 exp = CUCKOO_DEFAULT_EXPANSION, fp = CUCKOO_DEFAULT_FP_BITS;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) ||
        !api_obj_int(resp, body, "capacity", true, 1, INT64_MAX, &cap, NULL) ||
        !api_obj_int(resp, body, "bucket_size", false, 1, CUCKOO_MAX_BUCKET_SIZE, &bs, NULL) ||
        !api_obj_int(resp, body, "max_iterations", false, 1, CUCKOO_MAX_ITERATIONS, &mi, NULL) ||
        !api_obj_int(resp, body, "expansion", false, 0, CUCKOO_MAX_EXPANSION, &exp, NULL) ||
        !api_obj_int(resp, body, "fingerprint_bits", false, 8, 16, &fp, NULL))
        return;
    cuckoo_params_t p = { (uint64_t)cap, (uint32_t)bs, (uint32_t)mi, (uint32_t)exp, (uint32_t)fp };
    const char *why = cuckoo_validate(&p, 0, &field);   /* sizes: api_grow below */
    if (why) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' %s", field, why);
        return;
    }
    uint64_t bytes = cuckoo_bytes_for(&p);
    if (!api_grow(srv, req, resp, "capacity", "the filter", bytes, bytes + ks_entry_overhead(klen)))
        return;
    api_create_key(srv, req, resp, key, klen, &cuckoo_type, cuckoo_create_gen(api_gen(req), &p, key_seed(key, klen)),
                   NULL);
}

static void h_cuckoo_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "items", "nx", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    api_items_t it;
    bool nx = false;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) || !api_obj_bool(resp, body, "nx", &nx, NULL) ||
        !api_items_parse(resp, body, "items", &it))
        return;
    bool *added = malloc(it.n * sizeof(*added));
    if (!added) {
        api_items_free(&it);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    /* Room is asked for what the batch adds, as for /bloom: a sub-filter is
     * added only while the filter stays within what the limits allow now;
     * one that would pass it stops the batch, which is rolled back, and the
     * request is refused (--max-value-size) or makes room and starts again. */
    cuckoo_params_t dp = { CUCKOO_DEFAULT_CAPACITY, CUCKOO_DEFAULT_BUCKET_SIZE, CUCKOO_DEFAULT_MAX_ITERATIONS,
                           CUCKOO_DEFAULT_EXPANSION, CUCKOO_DEFAULT_FP_BITS };
    for (unsigned attempts = 0;;) {
        api_key_t h;
        if (!api_key_open(srv, req, resp, key, klen, &cuckoo_type, API_WRITE, &h))
            goto out;
        cuckoo_t *c = api_key_value(&h);
        bool created = !c;
        uint64_t extra = created ? cuckoo_bytes_for(&dp) + ks_entry_overhead(klen) : 0;
        ks_key_t kk = ks_key(srv->ks, key, klen);
        api_keep_t keep = { &kk, 1, c ? cuckoo_memory(c) : 0 };   /* not evicted for its own growth */
        if (extra > api_room_now(srv, req)) {
            api_key_close(&h, false);
            if (!api_room_retry(srv, req, resp, extra, &keep, &attempts))
                goto out;
            continue;
        }
        if (created)
            c = cuckoo_create_gen(api_gen(req), &dp, key_seed(key, klen));
        uint64_t base = c ? cuckoo_memory(c) : 0, room = api_room_now(srv, req), limit = api_value_limit(srv, req);
        if (room != UINT64_MAX && base + room - extra < limit)
            limit = base + room - extra;
        cuckoo_undo_t *u = c ? cuckoo_undo_begin(c) : NULL;
        int rc = u ? CUCKOO_ADDED : CUCKOO_NOMEM;
        bool changed = created;
        size_t i = 0;
        for (; i < it.n && rc >= 0; i++) {
            rc = cuckoo_add_within(c, it.p[i], it.len[i], nx, limit == UINT64_MAX ? 0 : limit, u);
            added[i] = rc == CUCKOO_ADDED;
            changed |= added[i];
        }
        if (rc == CUCKOO_BUDGET) {
            /* the next sub-filter is needed; room is made for the sub-filters
             * that hold twice the rest of the batch (an estimate: a full
             * sub-filter is rare before then, and is asked for again) */
            uint64_t reach = cuckoo_memory(c) + cuckoo_next_filter_bytes(c);
            uint64_t more = cuckoo_memory(c) - base + extra + cuckoo_growth_estimate(c, 2 * (it.n - (i - 1)));
            cuckoo_undo_rollback(c, u);
            if (created)
                cuckoo_free(c);
            api_key_close(&h, false);
            if (!api_value_fits(srv, req, resp, "items", "the filter's next sub-filter", reach) ||
                !api_room_retry(srv, req, resp, more, &keep, &attempts))
                goto out;
            continue;
        }
        if (rc < 0) {
            cuckoo_undo_rollback(c, u);
            if (created)
                cuckoo_free(c);
            api_key_close(&h, false);
            if (rc == CUCKOO_FULL)
                api_error_status(resp, rc, NULL,
                                 "the filter is full (no free slot after max_iterations evictions, and it cannot "
                                 "grow); nothing was added");
            else if (rc == CUCKOO_MAXEXP)
                api_error_status(resp, rc, NULL,
                                 "maximum expansions reached: the filter has %d sub-filters; nothing was added",
                                 CUCKOO_MAX_FILTERS);
            else
                api_error_status(resp, rc, NULL, "out of memory adding to the filter; nothing was added");
            goto out;
        }
        cuckoo_undo_commit(u);
        if (created && !api_key_add(&h, &cuckoo_type, c, KS_NO_EXPIRY)) {
            cuckoo_free(c);
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

/* Runs a read-only lookup on every item; a missing key answers with zeros. */
typedef enum { Q_EXISTS, Q_COUNT } query_t;

static void cuckoo_lookup(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                          const api_items_t *it, query_t q, bool single)
{
    bool *found = calloc(it->n, sizeof(*found));
    if (!found) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    uint64_t count = 0;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &cuckoo_type, API_READ, &h)) {
        free(found);
        return;
    }
    const cuckoo_t *c = api_key_value(&h);
    if (c) {
        if (q == Q_COUNT)
            count = cuckoo_count(c, it->p[0], it->len[0]);
        else
            for (size_t i = 0; i < it->n; i++)
                found[i] = cuckoo_check(c, it->p[i], it->len[i]);
    }
    api_key_close(&h, false);
    if (q == Q_COUNT) {
        char b[48];
        int n = snprintf(b, sizeof(b), "{\"count\":%llu}", (unsigned long long)count);
        api_body(resp, 200, NULL, b, (size_t)n);
    } else if (single) {
        api_body(resp, 200, NULL, found[0] ? "{\"exists\":true}" : "{\"exists\":false}", found[0] ? 15 : 16);
    } else {
        api_bool_array(resp, "exists", found, it->n);
    }
    free(found);
}

static void h_cuckoo_mexists(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    api_items_t it;
    if (!api_items_request(req, resp, false, &key, &klen, &it))
        return;
    cuckoo_lookup(srv, req, resp, key, klen, &it, Q_EXISTS, false);
    api_items_free(&it);
}

static void single_query(api_server_t *srv, api_req_t *req, api_resp_t *resp, query_t q)
{
    static const char *const params[] = { "item", NULL };
    const char *key, *item;
    size_t klen, ilen;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_item(req, resp, "item", &item, &ilen))
        return;
    api_items_t it = { .n = 1, .p = &item, .len = &ilen };
    cuckoo_lookup(srv, req, resp, key, klen, &it, q, true);
}

static void h_cuckoo_exists(api_server_t *srv, api_req_t *req, api_resp_t *resp) { single_query(srv, req, resp, Q_EXISTS); }
static void h_cuckoo_count(api_server_t *srv, api_req_t *req, api_resp_t *resp) { single_query(srv, req, resp, Q_COUNT); }

static void h_cuckoo_remove(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    api_items_t it;
    if (!api_items_request(req, resp, false, &key, &klen, &it))
        return;
    bool *removed = calloc(it.n, sizeof(*removed));
    if (!removed) {
        api_items_free(&it);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &cuckoo_type, API_WRITE | API_MUST_EXIST, &h))
        goto out;
    cuckoo_t *c = api_key_value(&h);
    bool changed = false;
    for (size_t i = 0; i < it.n; i++) {
        removed[i] = cuckoo_delete(c, it.p[i], it.len[i], NULL);
        changed |= removed[i];
    }
    api_key_close(&h, changed);
    api_bool_array(resp, "removed", removed, it.n);
out:
    free(removed);
    api_items_free(&it);
}

/* CF.INFO's answer for the filter (read under its lock). */
static json_t *cuckoo_info_json(const void *c)
{
    cuckoo_info_t in;
    cuckoo_get_info(c, &in);
    double slots = (double)in.buckets * in.bucket_size;
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "size_bytes", (json_int_t)in.size_bytes,
                     "buckets", (json_int_t)in.buckets, "filters", (json_int_t)in.filters, "items",
                     (json_int_t)in.items, "deletes", (json_int_t)in.deletes, "capacity",
                     (json_int_t)in.capacity, "bucket_size", (json_int_t)in.bucket_size, "max_iterations",
                     (json_int_t)in.max_iterations, "expansion", (json_int_t)in.expansion, "fingerprint_bits",
                     (json_int_t)in.fp_bits, "load", slots > 0 ? (double)in.items / slots : 0.0);
}

static void h_cuckoo_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (api_path_key(req, resp, &key, &klen) && api_no_query(req, resp))
        api_answer_info(srv, req, resp, key, klen, &cuckoo_type, cuckoo_info_json);
}

/* CF.COMPACT: moves fingerprints into older sub-filters and frees the
 * emptied newest ones; answers the info after it.  Journaled (its effect
 * is part of the state replay must rebuild). */
static void h_cuckoo_compact(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &cuckoo_type, API_WRITE | API_MUST_EXIST, &h))
        return;
    cuckoo_t *c = api_key_value(&h);
    cuckoo_compact(c);
    json_t *answer = cuckoo_info_json(c);
    api_key_close(&h, true);
    if (answer)
        api_json(resp, 200, answer);
    else
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
}

static const api_dump_t cuckoo_dump = {
    &cuckoo_dump_ops, "only a filter with 8-bit fingerprints can be dumped: RedisBloom's format has no other size",
    NULL   /* its header is 38 bytes */
};

static void h_cuckoo_dump(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_dump_serve(srv, req, resp, &cuckoo_dump);
}
static void h_cuckoo_load(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_load_serve(srv, req, resp, &cuckoo_dump);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/cuckoo/{key}",        h_cuckoo_put, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/cuckoo/{key}",        h_cuckoo_add, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/cuckoo/{key}",        h_cuckoo_info, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/cuckoo/{key}/exists", h_cuckoo_mexists, API_ROUTE_READS, API_ACCESS_READ, NULL },
    { API_GET,    "/cuckoo/{key}/exists", h_cuckoo_exists, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/cuckoo/{key}/remove", h_cuckoo_remove, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/cuckoo/{key}/count",  h_cuckoo_count, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/cuckoo/{key}/compact", h_cuckoo_compact, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/cuckoo/{key}/dump",   h_cuckoo_dump, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/cuckoo/{key}/load",   h_cuckoo_load, API_ROUTE_BINARY, API_ACCESS_WRITE, NULL },
};

API_FAMILY(cuckoo);
