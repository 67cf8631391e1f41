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
 * another (0: no expiry, as Redis's RESTORE ttl 0).  The restore's record
 * holds the dump and replays at the time it was served, so the rebuilt key
 * holds the same value and expiry.  Dumps are how the resharding tool moves
 * keys between nodes (deploy/cluster/README.md).
 *
 * The adapter of the operations DUMP and RESTORE (cmd/keys_ops.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/dump.h"
#include "cmd/keys_ops.h"

static void h_key_dump(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_key_args_t a;
    cmd_dump_res_t r;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp) ||
        !api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_DUMP, &a, &r)))
        return;
    api_body_take(resp, 200, "application/octet-stream", r.data, r.len);
    api_add_header(resp, "Tally-Digest", "%016" PRIx64, r.digest);
}

static void h_key_restore(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "replace", "ttl_ms", NULL };
    cmd_restore_args_t a = { .dump = req->body, .len = req->body_len };
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !api_query_bool(req, resp, "replace", &a.replace, NULL) ||
        !api_query_int(req, resp, "ttl_ms", false, 0, INT64_MAX / 2 - api_now_ms(req), &a.ttl_ms, &a.has_ttl))
        return;
    if (!api_media_type_is(req->ctype, "application/octet-stream")) {
        api_error(resp, API_E_UNSUPPORTED_MEDIA_TYPE,
                  "a restore body is the bytes GET /keys/{key}/dump gave (Content-Type: application/octet-stream)");
        return;
    }
    cmd_restore_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_RESTORE, &a, &r)))
        api_json(resp, 201, json_pack("{s:s%,s:s,s:I,s:b}", "key", a.key, a.klen, "type", r.type, "ttl_ms",
                                      (json_int_t)r.ttl_ms, "replaced", r.replaced));
}

static const api_route_t routes[] = {
    { API_GET, "/keys/{key}/dump",    h_key_dump, 0, API_BY(CMD_DUMP) },
    { API_PUT, "/keys/{key}/restore", h_key_restore, API_ROUTE_BINARY, API_BY(CMD_RESTORE) },
};

API_FAMILY(dumpkey);
