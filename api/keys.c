/*
 * keys.c - the keyspace itself: listing, inspecting, deleting, TTLs.
 *
 *   GET    /keys?prefix=&cursor=&limit=[&slots=LO-HI]
 *                                         -> {"keys":[{"key","type","ttl_ms"}],"cursor":"..."|null}
 *                                            (slots: only keys in those cluster slots, core/slot.h)
 *   GET    /keys/{key}                    -> {"key","type","ttl_ms","memory_bytes"} or 404
 *   DELETE /keys/{key}[?digest=HEX]       -> {"deleted":true|false}; 412 when the
 *                                            value's digest is no longer HEX
 *   PUT    /keys/{key}/ttl {"ttl_ms":N}   -> {"ttl_ms":N} or 404
 *   DELETE /keys/{key}/ttl                -> {"persisted":true|false} or 404
 *
 * A token with prefixes (api/auth.h) lists only the keys under them.
 * ttl_ms is -1 for a key without expiry (as Redis's PTTL).  Listing walks the
 * shards with Redis's SCAN cursor: a key present for the whole walk is
 * returned at least once, whatever the tables do in between; a page may hold
 * fewer than `limit` keys (even none) while the cursor is not null, and it
 * stops before its answer would pass --max-answer-size.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/auth.h"
#include "core/keydump.h"
#include "core/slot.h"

#define KEYS_DEFAULT_LIMIT 100
#define KEYS_MAX_LIMIT 10000
#define KEYS_BUCKETS_PER_PAGE 65536   /* bounds the work of one page when a prefix matches little */

static int64_t ttl_ms_of(const ks_entry_t *e, int64_t now_ms)
{
    int64_t exp = ks_entry_expire(e);
    if (exp == KS_NO_EXPIRY)
        return -1;
    return exp > now_ms ? exp - now_ms : 0;
}

struct page {
    const api_req_t *req;  /* whose token's prefixes bound the listing */
    json_t *keys;          /* the page */
    json_t *bucket;        /* matches of the bucket being visited */
    const char *prefix;
    size_t plen;
    int64_t now_ms;
    int64_t slot_lo, slot_hi;   /* ?slots=LO-HI: only keys in these cluster slots */
    uint64_t bytes, bucket_bytes;   /* the page's answer so far, and the bucket's, at most */
};

static void visit(void *ud, ks_entry_t *e)
{
    struct page *pg = ud;
    size_t klen;
    const char *key = ks_entry_key(e, &klen);
    if (klen < pg->plen || memcmp(key, pg->prefix, pg->plen) != 0 || !api_auth_key_visible(pg->req, key, klen))
        return;
    if (pg->slot_lo >= 0) {
        int64_t slot = slot_of(key, klen);
        if (slot < pg->slot_lo || slot > pg->slot_hi)
            return;
    }
    pg->bucket_bytes += api_json_string_max(klen) + 64;   /* the type and ttl_ms, the member names */
    json_array_append_new(pg->bucket, json_pack("{s:s%,s:s,s:I}", "key", key, klen, "type",
                                                ks_entry_type(e)->name, "ttl_ms",
                                                (json_int_t)ttl_ms_of(e, pg->now_ms)));
}

static bool parse_cursor(const char *s, unsigned nshards, unsigned *shard, uint64_t *v)
{
    unsigned sh;
    uint64_t pos;
    int used = 0;
    if (sscanf(s, "%u-%" SCNx64 "%n", &sh, &pos, &used) != 2 || s[used] != '\0' || sh >= nshards)
        return false;
    *shard = sh;
    *v = pos;
    return true;
}

/* "N" or "LO-HI" within the cluster's slots (core/slot.h). */
static bool parse_slots(const char *s, size_t len, int64_t *lo, int64_t *hi)
{
    const char *dash = memchr(s, '-', len);
    size_t alen = dash ? (size_t)(dash - s) : len;
    if (!api_parse_i64(s, alen, lo) || !api_parse_i64(dash ? dash + 1 : s, dash ? len - alen - 1 : len, hi))
        return false;
    return *lo >= 0 && *lo <= *hi && *hi < (int64_t)SLOT_COUNT;
}

static void h_keys_list(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "prefix", "cursor", "limit", "slots", NULL };
    int64_t limit = KEYS_DEFAULT_LIMIT;
    const char *slots;
    size_t slen;
    int64_t lo = -1, hi = -1;
    if (!api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "limit", false, 1, KEYS_MAX_LIMIT, &limit, NULL) ||
        !api_query_string(req, resp, "slots", false, &slots, &slen))
        return;
    if (slots && !parse_slots(slots, slen, &lo, &hi)) {
        api_error_field(resp, API_E_BAD_REQUEST, "slots", "'slots' must be a slot or a range LO-HI within 0-%u",
                        SLOT_COUNT - 1);
        return;
    }
    struct page pg = { .req = req, .keys = json_array(), .bucket = json_array(), .now_ms = api_now_ms(req),
                       .slot_lo = lo, .slot_hi = hi };
    pg.prefix = api_query_get(req, "prefix", &pg.plen);
    if (!pg.prefix)
        pg.prefix = "";

    ks_t *ks = srv->ks;
    unsigned shard = 0;
    uint64_t v = 0;
    const char *cur = api_query_get(req, "cursor", NULL);
    if (cur && *cur && !parse_cursor(cur, ks_shard_count(ks), &shard, &v)) {
        json_decref(pg.keys);
        json_decref(pg.bucket);
        api_error_field(resp, API_E_BAD_REQUEST, "cursor", "'cursor' is not a cursor this server returned");
        return;
    }
    /* Buckets are taken whole (the cursor cannot point inside one): a bucket
     * whose keys would overflow the page (`limit` keys, or --max-answer-size
     * bytes) is left for the next page. */
    uint64_t max_bytes = srv->limits.max_answer ? srv->limits.max_answer : UINT64_MAX;
    size_t budget = KEYS_BUCKETS_PER_PAGE;
    bool full = false;
    while (shard < ks_shard_count(ks) && !full && budget > 0) {
        ks_shard_t *sh = ks_shard_at(ks, shard);
        bool shard_done = false;   /* v == 0 also means "not started" */
        ks_shard_lock(sh);
        do {
            uint64_t next = v;
            json_array_clear(pg.bucket);
            pg.bucket_bytes = 0;
            ks_shard_scan(ks, sh, &next, 1, pg.now_ms, visit, &pg);
            size_t have = json_array_size(pg.keys), more = json_array_size(pg.bucket);
            if (have > 0 && (have + more > (size_t)limit || pg.bytes + pg.bucket_bytes > max_bytes)) {
                full = true;
                break;
            }
            json_array_extend(pg.keys, pg.bucket);
            pg.bytes += pg.bucket_bytes;
            v = next;
            shard_done = v == 0;
            budget--;
            if (have + more >= (size_t)limit)
                full = true;
        } while (!shard_done && !full && budget > 0);
        ks_shard_unlock(sh);
        if (shard_done)
            shard++;
    }
    json_decref(pg.bucket);
    json_t *out = json_pack("{s:o}", "keys", pg.keys);
    if (shard < ks_shard_count(ks)) {
        char c[40];
        snprintf(c, sizeof(c), "%u-%" PRIx64, shard, v);
        json_object_set_new(out, "cursor", json_string(c));
    } else {
        json_object_set_new(out, "cursor", json_null());
    }
    api_json(resp, 200, out);
}

/* Opens the {key} of the path, whatever its type (NULL with 400/404 set). */
static ks_entry_t *open_key(api_server_t *srv, api_req_t *req, api_resp_t *resp, unsigned flags, api_key_t *h)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_key_open(srv, req, resp, key, klen, NULL, flags, h))
        return NULL;
    return h->e;
}

static void h_key_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_key_t h;
    ks_entry_t *e;
    if (!api_no_query(req, resp) || !(e = open_key(srv, req, resp, API_MUST_EXIST, &h)))
        return;
    size_t klen;
    const char *key = ks_entry_key(e, &klen);
    json_t *o = json_pack("{s:s%,s:s,s:I,s:I}", "key", key, klen, "type", ks_entry_type(e)->name, "ttl_ms",
                          (json_int_t)ttl_ms_of(e, api_now_ms(req)), "memory_bytes",
                          (json_int_t)ks_entry_memory(e));
    api_key_close(&h, false);
    api_json(resp, 200, o);
}

/* DELETE /keys/{key}[?digest=HEX]: with a digest (the Tally-Digest of
 * GET /keys/{key}/dump), the key is deleted only if its value and expiry
 * are still the ones dumped - else 412, nothing deleted: how the
 * resharding tool removes a key it copied without losing a write that
 * arrived in between. */
static void h_key_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "digest", NULL };
    api_key_t h;
    const char *dtext;
    size_t dlen;
    uint64_t digest = 0;
    if (!api_query_allow(req, resp, params) || !api_query_string(req, resp, "digest", false, &dtext, &dlen))
        return;
    if (dtext && !keydump_digest_parse(dtext, dlen, &digest)) {
        api_error_field(resp, API_E_BAD_REQUEST, "digest", "'digest' must be 16 hex digits (a Tally-Digest)");
        return;
    }
    bool found = open_key(srv, req, resp, API_WRITE, &h) != NULL;
    if (resp->status)
        return;   /* bad key */
    if (found && dtext) {
        bool oom;
        uint64_t now = keydump_digest(ks_entry_type(h.e), ks_entry_value(h.e), ks_entry_expire(h.e), &oom);
        if (oom || now != digest) {
            api_key_close(&h, false);
            if (oom)
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            else
                api_error(resp, API_E_PRECONDITION_FAILED, "the key changed since it was dumped; nothing deleted");
            return;
        }
    }
    if (found)
        api_key_delete(&h);
    api_key_close(&h, found);
    api_json(resp, 200, json_pack("{s:b}", "deleted", found));
}

static void h_key_ttl_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "ttl_ms", NULL };
    const char *key;
    size_t klen;
    int64_t ttl;
    json_t *body;
    /* validate everything before locking */
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) ||
        !api_obj_int(resp, body, "ttl_ms", true, 1, INT64_MAX / 2 - api_now_ms(req), &ttl, NULL))
        return;
    api_key_t h;
    ks_entry_t *e = open_key(srv, req, resp, API_MUST_EXIST, &h);
    if (!e)
        return;
    ks_entry_set_expire(srv->ks, e, api_now_ms(req) + ttl);
    api_key_close(&h, true);
    api_json(resp, 200, json_pack("{s:I}", "ttl_ms", (json_int_t)ttl));
}

static void h_key_ttl_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_key_t h;
    ks_entry_t *e;
    if (!api_no_query(req, resp) || !(e = open_key(srv, req, resp, API_MUST_EXIST, &h)))
        return;
    bool had = ks_entry_expire(e) != KS_NO_EXPIRY;
    if (had)
        ks_entry_set_expire(srv->ks, e, KS_NO_EXPIRY);
    api_key_close(&h, had);
    api_json(resp, 200, json_pack("{s:b}", "persisted", had));
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_GET,    "/keys",           h_keys_list, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/keys/{key}",     h_key_get, 0, API_ACCESS_READ, NULL },
    { API_DELETE, "/keys/{key}",     h_key_delete, 0, API_ACCESS_ADMIN, NULL },
    { API_PUT,    "/keys/{key}/ttl", h_key_ttl_put, 0, API_ACCESS_WRITE, NULL },
    { API_DELETE, "/keys/{key}/ttl", h_key_ttl_delete, 0, API_ACCESS_WRITE, NULL },
};

API_FAMILY(keys);
