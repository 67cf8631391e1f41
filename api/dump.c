/*
 * dump.c - SCANDUMP / LOADCHUNK over HTTP for the filters (api/dump.h has
 * the contract): the cursor's rules, the raw bodies.
 */
#include <stdlib.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/dump.h"

/* The key and the required ?cursor= (>= min). */
static bool dump_request(api_req_t *req, api_resp_t *resp, int64_t min, const char **key, size_t *klen,
                         int64_t *cursor)
{
    static const char *const params[] = { "cursor", NULL };
    return api_path_key(req, resp, key, klen) && api_query_allow(req, resp, params) &&
           api_query_int(req, resp, "cursor", true, min, INT64_MAX, cursor, NULL);
}

void api_body_take(api_resp_t *resp, int status, const char *ctype, void *body, size_t len)
{
    if (!body && !(body = malloc(1))) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    free(resp->body);
    resp->body = body;
    resp->len = len;
    resp->status = status;
    resp->ctype = ctype;
}

void api_dump_serve(api_server_t *srv, api_req_t *req, api_resp_t *resp, const cmd_def_t *op)
{
    (void)srv;
    cmd_scandump_args_t a;
    cmd_scandump_res_t r;
    if (!dump_request(req, resp, 0, &a.key, &a.klen, &a.cursor) ||
        !api_cmd_answered(req, resp, cmd_call(req->ctx, op, &a, &r)))
        return;
    api_body_take(resp, 200, "application/octet-stream", r.data, r.len);
    api_add_header(resp, "Tally-Cursor", "%lld", (long long)r.cursor);
}

void api_load_serve(api_server_t *srv, api_req_t *req, api_resp_t *resp, const cmd_def_t *op)
{
    (void)srv;
    cmd_loadchunk_args_t a = { .data = req->body, .len = req->body_len };
    cmd_loadchunk_res_t r;
    if (!dump_request(req, resp, 1, &a.key, &a.klen, &a.cursor))
        return;
    if (!api_media_type_is(req->ctype, "application/octet-stream")) {
        api_error(resp, API_E_UNSUPPORTED_MEDIA_TYPE,
                  "a chunk is the bytes SCANDUMP gave (Content-Type: application/octet-stream)");
        return;
    }
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, op, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "loaded", (json_int_t)r.loaded));
}
