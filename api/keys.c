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
 *
 * The adapter of the operations SCAN, KEY.INFO, DEL, PEXPIRE and PERSIST
 * (cmd/keys_ops.h): it parses, runs the operation and answers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "cmd/keys_ops.h"
#include "core/keydump.h"
#include "core/slot.h"

#define KEYS_DEFAULT_LIMIT 100

/* "SHARD-POS" as a page's answer gave it (the shard is checked by SCAN). */
static bool parse_cursor(const char *s, unsigned *shard, uint64_t *v)
{
    unsigned sh;
    uint64_t pos;
    int used = 0;
    if (sscanf(s, "%u-%" SCNx64 "%n", &sh, &pos, &used) != 2 || s[used] != '\0')
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
    (void)srv;
    static const char *const params[] = { "prefix", "cursor", "limit", "slots", NULL };
    int64_t limit = KEYS_DEFAULT_LIMIT;
    const char *slots;
    size_t slen;
    int64_t lo = -1, hi = -1;
    if (!api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "limit", false, 1, CMD_SCAN_MAX_LIMIT, &limit, NULL) ||
        !api_query_string(req, resp, "slots", false, &slots, &slen))
        return;
    if (slots && !parse_slots(slots, slen, &lo, &hi)) {
        api_error_field(resp, API_E_BAD_REQUEST, "slots", "'slots' must be a slot or a range LO-HI within 0-%u",
                        SLOT_COUNT - 1);
        return;
    }
    cmd_scan_args_t a = { .limit = (size_t)limit, .slot_lo = lo, .slot_hi = hi };
    a.prefix = api_query_get(req, "prefix", &a.plen);
    if (!a.prefix)
        a.prefix = "";
    const char *cur = api_query_get(req, "cursor", NULL);
    if (cur && *cur && !parse_cursor(cur, &a.shard, &a.pos)) {
        api_error_field(resp, API_E_BAD_REQUEST, "cursor", "'cursor' is not a cursor this server returned");
        return;
    }
    cmd_scan_res_t r;
    if (!api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_SCAN, &a, &r)))
        return;
    json_t *keys = json_array();
    for (size_t i = 0; i < r.n; i++)
        json_array_append_new(keys, json_pack("{s:s%,s:s,s:I}", "key", r.keys[i].key, r.keys[i].klen, "type",
                                              r.keys[i].type, "ttl_ms", (json_int_t)r.keys[i].ttl_ms));
    json_t *out = json_pack("{s:o}", "keys", keys);
    if (!r.done) {
        char c[40];
        snprintf(c, sizeof(c), "%u-%" PRIx64, r.shard, r.pos);
        json_object_set_new(out, "cursor", json_string(c));
    } else {
        json_object_set_new(out, "cursor", json_null());
    }
    cmd_scan_res_free(&r);
    api_json(resp, 200, out);
}

static void h_key_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_key_args_t a;
    cmd_key_info_res_t r;
    if (!api_no_query(req, resp) || !api_path_key(req, resp, &a.key, &a.klen) ||
        !api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_KEY_INFO, &a, &r)))
        return;
    api_json(resp, 200, json_pack("{s:s%,s:s,s:I,s:I}", "key", a.key, a.klen, "type", r.type, "ttl_ms",
                                  (json_int_t)r.ttl_ms, "memory_bytes", (json_int_t)r.memory_bytes));
}

/* DELETE /keys/{key}[?digest=HEX]: with a digest (the Tally-Digest of
 * GET /keys/{key}/dump), the key is deleted only if its value and expiry
 * are still the ones dumped - else 412, nothing deleted: how the
 * resharding tool removes a key it copied without losing a write that
 * arrived in between. */
static void h_key_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "digest", NULL };
    const char *dtext;
    size_t dlen;
    cmd_del_args_t a = { 0 };
    if (!api_query_allow(req, resp, params) || !api_query_string(req, resp, "digest", false, &dtext, &dlen))
        return;
    if (dtext && !keydump_digest_parse(dtext, dlen, &a.digest)) {
        api_error_field(resp, API_E_BAD_REQUEST, "digest", "'digest' must be 16 hex digits (a Tally-Digest)");
        return;
    }
    a.has_digest = dtext != NULL;
    cmd_keys_res_t r;
    if (api_path_key(req, resp, &a.key, &a.klen) && api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_DEL, &a, &r)))
        api_json(resp, 200, json_pack("{s:b}", "deleted", r.done));
}

static void h_key_ttl_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "ttl_ms", NULL };
    cmd_pexpire_args_t a = { .cond = 0 };
    json_t *body;
    /* validate everything before locking */
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)) ||
        !api_obj_int(resp, body, "ttl_ms", true, 1, INT64_MAX / 2 - api_now_ms(req), &a.ttl_ms, NULL))
        return;
    cmd_keys_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_PEXPIRE, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "ttl_ms", (json_int_t)r.ttl_ms));
}

static void h_key_ttl_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_key_args_t a;
    cmd_keys_res_t r;
    if (api_no_query(req, resp) && api_path_key(req, resp, &a.key, &a.klen) &&
        api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_PERSIST, &a, &r)))
        api_json(resp, 200, json_pack("{s:b}", "persisted", r.done));
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_GET,    "/keys",           h_keys_list, 0, API_BY(CMD_SCAN) },
    { API_GET,    "/keys/{key}",     h_key_get, 0, API_BY(CMD_KEY_INFO) },
    { API_DELETE, "/keys/{key}",     h_key_delete, 0, API_BY(CMD_DEL) },
    { API_PUT,    "/keys/{key}/ttl", h_key_ttl_put, 0, API_BY(CMD_PEXPIRE) },
    { API_DELETE, "/keys/{key}/ttl", h_key_ttl_delete, 0, API_BY(CMD_PERSIST) },
};

API_FAMILY(keys);
