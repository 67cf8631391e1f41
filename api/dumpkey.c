/*
 * dumpkey.c - one key as portable bytes, Redis's DUMP / RESTORE:
 *
 *   GET /keys/{key}/dump                 -> 200 application/octet-stream
 *        the dump (core/keydump.h: versioned, checksummed, type tag,
 *        remaining TTL, the value's snapshot encoding); header
 *        Tally-Digest: the value's digest (16 hex digits) for
 *        DELETE /keys/{key}?digest= (api/keys.c); 404 when missing
 *   PUT /keys/{key}/restore[?replace=true][&ttl_ms=N]
 *        <- application/octet-stream: a dump
 *        -> 201 {"key","type","ttl_ms","replaced"}
 *
 * Restore validates the whole dump before anything is locked (the bytes are
 * untrusted: the snapshot decoder checks the value, tests/fuzz/fuzz_keydump
 * fuzzes it), so a damaged dump is a 400 and nothing is created.  An
 * existing key is 409 EXISTS unless ?replace=true (then it is replaced
 * whatever its type).  The TTL is the dump's remaining one; ?ttl_ms= sets
 * another (0: no expiry, as Redis's RESTORE ttl 0).  The restore is
 * journaled as received and replays at the time it was served, so the
 * rebuilt key holds the same value and expiry.  Dumps are how the
 * resharding tool moves keys between nodes (deploy/cluster/README.md).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/dump.h"
#include "core/keydump.h"

#define KEYDUMP_OVERHEAD 64   /* a dump's header, TTL and checksum, besides the value's encoding */

static void h_key_dump(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    api_key_t h;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp) ||
        !api_key_open(srv, req, resp, key, klen, NULL, API_MUST_EXIST, &h))
        return;
    const ks_type_t *type = ks_entry_type(h.e);
    const void *v = ks_entry_value(h.e);
    int64_t exp = ks_entry_expire(h.e), now = api_now_ms(req);
    /* an encoding takes about what the value takes in memory */
    if (!api_answer_fits(srv, req, resp, KEYDUMP_OVERHEAD + type->size(v),
                         "this value is too large to dump in one answer (raise --max-answer-size)")) {
        api_key_close(&h, false);
        return;
    }
    wbuf_t out = WBUF_INIT;
    keydump_encode(type, v, exp == KS_NO_EXPIRY ? KEYDUMP_NO_TTL : exp - now, &out);
    bool oom = out.oom;
    uint64_t digest = oom ? 0 : keydump_digest(type, v, exp, &oom);
    api_key_close(&h, false);
    if (oom) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory dumping the key");
    } else if (!api_answer_fits(srv, req, resp, out.len,
                                "this value is too large to dump in one answer (raise --max-answer-size)")) {
        /* the estimate above was short: refused all the same */
    } else {
        api_body(resp, 200, "application/octet-stream", out.data, out.len);
        api_add_header(resp, "Tally-Digest", "%016" PRIx64, digest);
    }
    wbuf_free(&out);
}

static void h_key_restore(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "replace", "ttl_ms", NULL };
    const char *key, *why;
    size_t klen;
    bool replace = false, ttl_given = false;
    int64_t ttl = 0, now = api_now_ms(req);
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_bool(req, resp, "replace", &replace, NULL) ||
        !api_query_int(req, resp, "ttl_ms", false, 0, INT64_MAX / 2 - now, &ttl, &ttl_given))
        return;
    if (!api_media_type_is(req->ctype, "application/octet-stream")) {
        api_error(resp, API_E_UNSUPPORTED_MEDIA_TYPE,
                  "a restore body is the bytes GET /keys/{key}/dump gave (Content-Type: application/octet-stream)");
        return;
    }
    const ks_type_t *type;
    void *value;
    int64_t dump_ttl;
    if (!keydump_decode(req->body, req->body_len, &type, &value, &dump_ttl, &why)) {
        api_error(resp, API_E_BAD_REQUEST, "not a valid dump: %s; nothing was restored", why);
        return;
    }
    if (!ttl_given)
        ttl = dump_ttl < 0 ? 0 : dump_ttl;
    if (!api_grow(srv, req, resp, NULL, "the restored value", type->size(value),
                  type->size(value) + ks_entry_overhead(klen) + req->body_len)) {
        type->free(value);
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, NULL, API_WRITE, &h)) {
        type->free(value);
        return;
    }
    bool existed = h.e != NULL;
    if (existed && !replace) {
        api_key_close(&h, false);
        type->free(value);
        api_error(resp, API_E_EXISTS, "the key exists: send ?replace=true to replace it");
        return;
    }
    int64_t expire = ttl ? now + ttl : KS_NO_EXPIRY;
    if (existed && ks_entry_type(h.e) == type) {
        api_key_replace(&h, value);
        ks_entry_set_expire(srv->ks, h.e, expire);
    } else {
        if (existed)
            api_key_delete(&h);
        if (!api_key_add(&h, type, value, expire)) {
            type->free(value);
            if (existed)
                api_journal_key_state(srv, req, resp, key, klen, NULL, 0, 0);   /* what did happen */
            api_key_close(&h, false);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory restoring the key");
            return;
        }
    }
    api_key_close(&h, true);
    api_json(resp, 201, json_pack("{s:s%,s:s,s:I,s:b}", "key", key, klen, "type", type->name, "ttl_ms",
                                  (json_int_t)(ttl ? ttl : -1), "replaced", existed));
}

static const api_route_t routes[] = {
    { API_GET, "/keys/{key}/dump",    h_key_dump, 0, API_ACCESS_READ, NULL },
    { API_PUT, "/keys/{key}/restore", h_key_restore, API_ROUTE_BINARY, API_ACCESS_WRITE, NULL },
};

API_FAMILY(dumpkey);
