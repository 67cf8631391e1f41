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
 * header when it was stale (PFCOUNT is a write in Redis for that reason), so
 * that request is journaled: replay reproduces the cached header bytes too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/items.h"
#include "core/hll.h"

#define UV_MAX_KEYS 1000   /* keys in one union count or merge */

static void h_uv_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    api_items_t it;
    if (!api_items_request(req, resp, true, &key, &klen, &it))
        return;
    /* an HLL is small: room for the largest one a PFADD can leave */
    if (!api_make_room_for_key(srv, req, resp, hll_memory_max() + ks_entry_overhead(klen), key, klen, 0)) {
        api_items_free(&it);
        return;
    }
    int updated;
    api_key_t hk;
    if (!api_key_open(srv, req, resp, key, klen, &hll_type, API_WRITE, &hk)) {
        api_items_free(&it);
        return;
    }
    if (hk.e) {
        updated = hll_add_batch(api_key_value(&hk), it.p, it.len, it.n);
    } else {
        hll_t *h = hll_create();
        updated = h ? hll_add_batch(h, it.p, it.len, it.n) : CORE_NOMEM;
        if (updated >= 0) {
            hll_invalidate_cache(h);   /* PFADD creating the key is an update */
            updated = 1;
            if (!api_key_add(&hk, &hll_type, h, KS_NO_EXPIRY))
                updated = CORE_NOMEM;
        }
        if (updated < 0)
            hll_free(h);
    }
    api_key_close(&hk, updated > 0);
    api_items_free(&it);
    if (updated < 0) {
        api_error_status(resp, updated, NULL, "out of memory adding to the HyperLogLog");
        return;
    }
    api_body(resp, 200, NULL, updated ? "{\"updated\":true}" : "{\"updated\":false}", updated ? 16 : 17);
}

/* Keeps the first of each key in keys[0..n), in order: a register's
 * maximum over a key taken twice is its maximum over it once.  Returns how
 * many are left, 0 when out of memory. */
static size_t distinct(ks_key_t *keys, size_t n)
{
    size_t *first = malloc(n * sizeof(*first)), m = 0;
    if (!first || !api_keys_distinct(keys, n, first)) {
        free(first);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (first[i] == i)
            keys[m++] = keys[i];
    free(first);
    return m;
}

static void count_answer(api_resp_t *resp, uint64_t count)
{
    char b[64];
    int n = snprintf(b, sizeof(b), "{\"count\":%llu}", (unsigned long long)count);
    api_body(resp, 200, NULL, b, (size_t)n);
}

/* PFCOUNT key k2 k3...: the union, computed under all the shards' locks. */
static void uv_union(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen)
{
    size_t n = 1 + api_query_count(req, "union");
    if (n > UV_MAX_KEYS) {
        api_error_field(resp, API_E_BAD_REQUEST, "union", "at most %d keys in a union", UV_MAX_KEYS - 1);
        return;
    }
    ks_t *ks = srv->ks;
    ks_key_t *keys = malloc(n * sizeof(*keys));
    uint8_t *max = calloc(HLL_REGISTERS, 1);
    if (!keys || !max) {
        free(keys);
        free(max);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    keys[0] = ks_key(ks, key, klen);
    size_t j = 1;
    for (int i = 0; i < req->nparams; i++) {
        if (strcmp(req->params[i].name, "union") != 0)
            continue;
        if (!api_check_key(resp, "union", req->params[i].value, req->params[i].vlen)) {
            free(keys);
            free(max);
            return;
        }
        keys[j++] = ks_key(ks, req->params[i].value, req->params[i].vlen);
    }
    n = distinct(keys, n);   /* the union of a key with itself is the key */
    api_key_t h;
    bool ok = n > 0 && api_keys_lock(srv, req, resp, keys, n, &h);
    if (n == 0)
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n && ok; i++) {
        ks_entry_t *e;
        ok = api_keys_find(&h, i, &hll_type, API_READ, NULL, &e);
        if (ok && e)
            hll_max_into(ks_entry_value(e), max);
    }
    if (n > 0)
        api_key_close(&h, false);
    if (ok)
        count_answer(resp, hll_count_registers(max));
    free(keys);
    free(max);
}

static void h_uv_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
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
        uv_union(srv, req, resp, key, klen);
        return;
    }
    api_key_t hk;
    if (!api_key_open(srv, req, resp, key, klen, &hll_type, API_READ, &hk))
        return;
    hll_t *h = api_key_value(&hk);
    if (raw) {
        if (h) {
            size_t len;
            const uint8_t *b = hll_bytes(h, &len);
            api_body(resp, 200, "application/octet-stream", b, len);
        }
        api_key_close(&hk, false);
        if (!h)
            api_error(resp, API_E_NOT_FOUND, "no HyperLogLog at this key");
        return;
    }
    uint64_t count = 0;
    if (h) {
        if (hll_cache_valid(h)) {
            count = hll_count(h, false, NULL);
        } else {
            /* Redis's PFCOUNT stores the fresh count in the header.  The
             * cache is derived data: not journaled, so a read never needs
             * the journal (a restart recomputes it on the next count). */
            ks_entry_prepare_write(srv->ks, hk.e);
            count = hll_count(h, true, NULL);
        }
    }
    api_key_close(&hk, false);
    count_answer(resp, count);
}

static void h_uv_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    if (!api_media_type_is(req->ctype, "application/octet-stream")) {
        api_error(resp, API_E_UNSUPPORTED_MEDIA_TYPE,
                  "PUT /uv/{key} takes the bytes of a Redis HyperLogLog (Content-Type: application/octet-stream)");
        return;
    }
    const char *why;
    hll_t *h = hll_from_redis(req->body, req->body_len, &why);
    if (!h) {
        api_error(resp, API_E_BAD_REQUEST, "not a valid Redis HyperLogLog: %s", why);
        return;
    }
    if (!api_grow(srv, req, resp, NULL, "the HyperLogLog", hll_memory(h), hll_memory(h) + ks_entry_overhead(klen))) {
        hll_free(h);
        return;
    }
    api_key_t hk;
    if (!api_key_open(srv, req, resp, key, klen, &hll_type, API_WRITE, &hk)) {
        hll_free(h);
        return;
    }
    uint64_t count = hll_count(h, false, NULL);
    bool sparse = hll_is_sparse(h);
    bool replaced = hk.e != NULL;
    if (replaced) {
        api_key_replace(&hk, h);
    } else if (!api_key_add(&hk, &hll_type, h, KS_NO_EXPIRY)) {
        api_key_close(&hk, false);
        hll_free(h);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the HyperLogLog");
        return;
    }
    api_key_close(&hk, true);
    api_json(resp, 200,
             json_pack("{s:I,s:s,s:I,s:b}", "count", (json_int_t)count, "encoding", sparse ? "sparse" : "dense",
                       "bytes", (json_int_t)req->body_len, "replaced", replaced));
}

static void h_uv_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "sources", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    api_items_t src;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) ||
        !api_keys_parse(resp, body, "sources", UV_MAX_KEYS - 1, &src))
        return;
    ks_t *ks = srv->ks;
    size_t n = src.n + 1;
    ks_key_t *keys = malloc(n * sizeof(*keys));
    uint8_t *max = calloc(HLL_REGISTERS, 1);
    hll_t *fresh = hll_create();
    if (!keys || !max || !fresh) {
        free(keys);
        free(max);
        hll_free(fresh);
        api_items_free(&src);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    keys[0] = ks_key(ks, key, klen);
    for (size_t i = 0; i < src.n; i++)
        keys[i + 1] = ks_key(ks, src.p[i], src.len[i]);
    if (!(n = distinct(keys, n))) {   /* PFMERGE reads a key named twice once: the maxima are the same */
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    /* the token's prefixes before any eviction: a refusal changes nothing */
    if (!api_keys_allowed(srv, req, resp, keys, n) ||
        !api_make_room_for(srv, req, resp, hll_memory_max() + ks_entry_overhead(klen)))
        goto out;
    api_key_t hk;
    if (!api_keys_lock(srv, req, resp, keys, n, &hk))
        goto out;
    /* registers of every HLL involved, the destination's included */
    bool to_dense = false;
    for (size_t i = 0; i < n; i++) {
        ks_entry_t *e;
        if (!api_keys_find(&hk, i, &hll_type, i == 0 ? API_WRITE : API_READ, NULL, &e))
            goto out;
        if (e) {
            hll_max_into(ks_entry_value(e), max);
            to_dense |= !hll_is_sparse(ks_entry_value(e));
        }
    }
    bool created = !hk.e;
    hll_t *h = created ? fresh : api_key_value(&hk);
    if (hll_merge_registers(h, max, to_dense) != CORE_OK ||
        (created && !api_key_add(&hk, &hll_type, fresh, KS_NO_EXPIRY))) {
        api_key_close(&hk, false);
        api_error_status(resp, CORE_NOMEM, NULL, "out of memory merging HyperLogLogs");
        goto out;
    }
    if (created)
        fresh = NULL;   /* owned by the keyspace */
    uint64_t count = hll_count(h, true, NULL);   /* PFMERGE then PFCOUNT */
    api_key_close(&hk, true);
    count_answer(resp, count);
out:
    free(keys);
    free(max);
    hll_free(fresh);
    api_items_free(&src);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_POST,   "/uv/{key}",       h_uv_add, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/uv/{key}",       h_uv_get, 0, API_ACCESS_READ, NULL },
    { API_PUT,    "/uv/{key}",       h_uv_put, API_ROUTE_BINARY, API_ACCESS_WRITE, NULL },
    { API_POST,   "/uv/{key}/merge", h_uv_merge, 0, API_ACCESS_WRITE, NULL },
};

API_FAMILY(uv);
