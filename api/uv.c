/*
 * uv.c - /uv: unique counting with Redis's HyperLogLog (PFADD, PFCOUNT,
 * PFMERGE), answers equal to Redis's for the same items.
 *
 *   POST /uv/{key}            {"items":[...]}   -> {"updated":true}     PFADD
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
#include "api/routes.h"
#include "core/hll.h"

#define UV_MAX_KEYS 1000   /* keys in one union count or merge */

static bool octet_stream(const char *ct)
{
    if (!ct)
        return false;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    return n == 24 && strncasecmp(ct, "application/octet-stream", n) == 0;
}

void h_uv_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    api_items_t it;
    if (!api_items_request(req, resp, &key, &klen, &it))
        return;
    if (!api_make_room(srv, req, resp)) {
        api_items_free(&it);
        return;
    }
    ks_t *ks = srv->ks;
    ks_key_t k = ks_key(ks, key, klen);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    int updated;
    ks_shard_lock(sh);
    bool wrong;
    ks_entry_t *e = api_find(srv, req, resp, &k, &hll_type, false, false, &wrong);
    if (wrong) {
        ks_shard_unlock(sh);
        api_items_free(&it);
        return;
    }
    if (e) {
        ks_entry_prepare_write(ks, e);
        updated = hll_add_batch(ks_entry_value(e), it.p, it.len, it.n);
        if (updated > 0)
            ks_entry_changed(ks, e);
    } else {
        hll_t *h = hll_create();
        updated = h ? hll_add_batch(h, it.p, it.len, it.n) : -1;
        if (updated >= 0) {
            hll_invalidate_cache(h);   /* PFADD creating the key is an update */
            updated = 1;
            if (!ks_add(ks, &k, &hll_type, h, KS_NO_EXPIRY, api_now_ms(req)))
                updated = -1;
        }
        if (updated < 0)
            hll_free(h);
    }
    if (updated > 0)
        api_journal(srv, req, resp);
    ks_shard_unlock(sh);
    api_items_free(&it);
    if (updated < 0) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory adding to the HyperLogLog");
        return;
    }
    api_body(resp, 200, NULL, updated ? "{\"updated\":true}" : "{\"updated\":false}", updated ? 16 : 17);
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
    ks_lock_keys(ks, keys, n);
    const ks_entry_t *bad = NULL;
    for (size_t i = 0; i < n && !bad; i++) {
        ks_entry_t *e = ks_find(ks, &keys[i], api_now_ms(req));
        if (e && ks_entry_type(e) != &hll_type)
            bad = e;
        else if (e)
            hll_max_into(ks_entry_value(e), max);
    }
    if (bad)
        api_wrongtype(resp, bad, "uv", NULL);
    ks_unlock_keys(ks, keys, n);
    if (!bad)
        count_answer(resp, hll_count_registers(max));
    free(keys);
    free(max);
}

void h_uv_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
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
    ks_t *ks = srv->ks;
    ks_key_t k = ks_key(ks, key, klen);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    bool wrong;
    ks_entry_t *e = api_find(srv, req, resp, &k, &hll_type, false, false, &wrong);
    if (wrong) {
        ks_shard_unlock(sh);
        return;
    }
    if (raw) {
        if (e) {
            size_t len;
            const uint8_t *b = hll_bytes(ks_entry_value(e), &len);
            api_body(resp, 200, "application/octet-stream", b, len);
        }
        ks_shard_unlock(sh);
        if (!e)
            api_error(resp, API_E_NOT_FOUND, "no HyperLogLog at this key");
        return;
    }
    uint64_t count = 0;
    if (e) {
        hll_t *h = ks_entry_value(e);
        if (hll_cache_valid(h)) {
            count = hll_count(h, false, NULL);
        } else {
            /* Redis's PFCOUNT stores the fresh count in the header.  The
             * cache is derived data: not journaled, so a read never needs
             * the journal (a restart recomputes it on the next count). */
            ks_entry_prepare_write(ks, e);
            count = hll_count(h, true, NULL);
        }
    }
    ks_shard_unlock(sh);
    count_answer(resp, count);
}

void h_uv_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    if (!octet_stream(req->ctype)) {
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
    if (!api_make_room(srv, req, resp)) {
        hll_free(h);
        return;
    }
    ks_t *ks = srv->ks;
    ks_key_t k = ks_key(ks, key, klen);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    bool wrong;
    ks_entry_t *e = api_find(srv, req, resp, &k, &hll_type, false, false, &wrong);
    if (wrong) {
        ks_shard_unlock(sh);
        hll_free(h);
        return;
    }
    uint64_t count = hll_count(h, false, NULL);
    bool sparse = hll_is_sparse(h);
    if (e) {
        ks_entry_prepare_write(ks, e);
        ks_entry_replace_value(ks, e, h);
    } else if (!ks_add(ks, &k, &hll_type, h, KS_NO_EXPIRY, api_now_ms(req))) {
        ks_shard_unlock(sh);
        hll_free(h);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the HyperLogLog");
        return;
    }
    api_journal(srv, req, resp);
    ks_shard_unlock(sh);
    api_json(resp, 200,
             json_pack("{s:I,s:s,s:I,s:b}", "count", (json_int_t)count, "encoding", sparse ? "sparse" : "dense",
                       "bytes", (json_int_t)req->body_len, "replaced", e != NULL));
}

void h_uv_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp)
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
    if (!api_make_room(srv, req, resp))
        goto out;
    keys[0] = ks_key(ks, key, klen);
    for (size_t i = 0; i < src.n; i++)
        keys[i + 1] = ks_key(ks, src.p[i], src.len[i]);
    ks_lock_keys(ks, keys, n);
    /* registers of every HLL involved, the destination's included */
    const ks_entry_t *bad = NULL;
    bool to_dense = false;
    ks_entry_t *dst = NULL;
    for (size_t i = 0; i < n && !bad; i++) {
        ks_entry_t *e = ks_find(ks, &keys[i], api_now_ms(req));
        if (i == 0)
            dst = e;
        if (e && ks_entry_type(e) != &hll_type) {
            bad = e;
        } else if (e) {
            hll_max_into(ks_entry_value(e), max);
            to_dense |= !hll_is_sparse(ks_entry_value(e));
        }
    }
    if (bad) {
        ks_unlock_keys(ks, keys, n);
        api_wrongtype(resp, bad, "uv", NULL);
        goto out;
    }
    hll_t *h = dst ? ks_entry_value(dst) : fresh;
    if (dst)
        ks_entry_prepare_write(ks, dst);
    if (hll_merge_registers(h, max, to_dense) != 0 ||
        (!dst && !ks_add(ks, &keys[0], &hll_type, fresh, KS_NO_EXPIRY, api_now_ms(req)))) {
        ks_unlock_keys(ks, keys, n);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory merging HyperLogLogs");
        goto out;
    }
    if (!dst)
        fresh = NULL;   /* owned by the keyspace */
    else
        ks_entry_changed(ks, dst);
    uint64_t count = hll_count(h, true, NULL);   /* PFMERGE then PFCOUNT */
    api_journal(srv, req, resp);
    ks_unlock_keys(ks, keys, n);
    count_answer(resp, count);
out:
    free(keys);
    free(max);
    hll_free(fresh);
    api_items_free(&src);
}
