/*
 * dump.c - SCANDUMP / LOADCHUNK over HTTP for the filters (api/dump.h has
 * the contract): the cursor's rules, the raw bodies, the limits.
 */
#include <stdlib.h>

#include "api/dump.h"

/* The key and the required ?cursor= (>= min). */
static bool dump_request(api_req_t *req, api_resp_t *resp, int64_t min, const char **key, size_t *klen,
                         int64_t *cursor)
{
    static const char *const params[] = { "cursor", NULL };
    return api_path_key(req, resp, key, klen) && api_query_allow(req, resp, params) &&
           api_query_int(req, resp, "cursor", true, min, INT64_MAX, cursor, NULL);
}

void api_dump_serve(api_server_t *srv, api_req_t *req, api_resp_t *resp, const api_dump_t *d)
{
    const ks_dump_ops_t *ops = d->ops;
    const char *key;
    size_t klen;
    int64_t cursor;
    if (!dump_request(req, resp, 0, &key, &klen, &cursor))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, ops->type, API_MUST_EXIST, &h))
        return;
    const void *v = api_key_value(&h);
    if (cursor == 0) {
        if (d->header_len &&
            !api_answer_fits(srv, req, resp, d->header_len(v),
                             "this filter's header (one entry per sub-filter) cannot be dumped")) {
            api_key_close(&h, false);
            return;
        }
        wbuf_t out = WBUF_INIT;
        bool ok = ops->header(v, &out);
        api_key_close(&h, false);
        if (!ok) {
            api_error(resp, API_E_BAD_REQUEST, "%s", d->why_not);
        } else if (out.oom) {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        } else {
            api_body(resp, 200, "application/octet-stream", out.data, out.len);
            api_add_header(resp, "Tally-Cursor", "1");
        }
        wbuf_free(&out);
        return;
    }
    size_t len;
    const uint8_t *p = ops->chunk(v, &cursor, API_DUMP_CHUNK, &len);
    api_body(resp, 200, "application/octet-stream", p ? (const void *)p : "", len);   /* copied under the lock */
    api_key_close(&h, false);
    api_add_header(resp, "Tally-Cursor", "%lld", (long long)cursor);
}

void api_load_serve(api_server_t *srv, api_req_t *req, api_resp_t *resp, const api_dump_t *d)
{
    const ks_dump_ops_t *ops = d->ops;
    const char *key, *why;
    size_t klen;
    int64_t cursor;
    if (!dump_request(req, resp, 1, &key, &klen, &cursor))
        return;
    if (!api_media_type_is(req->ctype, "application/octet-stream")) {
        api_error(resp, API_E_UNSUPPORTED_MEDIA_TYPE,
                  "a chunk is the bytes SCANDUMP gave (Content-Type: application/octet-stream)");
        return;
    }
    /* a header creates the filter: its size is known before it is built */
    uint64_t bytes = cursor == 1 ? ops->header_bytes(req->body, req->body_len) : 0;
    if (!api_grow(srv, req, resp, NULL, "the filter", bytes, bytes ? bytes + ks_entry_overhead(klen) : 0) ||
        !api_make_room(srv, req, resp))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, ops->type, API_WRITE, &h))
        return;
    void *v = api_key_value(&h);
    if (!v && cursor != 1) {
        api_key_close(&h, false);
        api_error(resp, API_E_NOT_FOUND, "no filter at this key: load its header chunk (cursor 1) first");
        return;
    }
    if (!v) {
        bool nomem = false;
        uint64_t cap = api_value_limit(srv, req);
        v = ops->load_header(req->body, req->body_len, cap == UINT64_MAX ? 0 : cap, &nomem, &why);
        if (!v || !api_key_add(&h, ops->type, v, KS_NO_EXPIRY)) {
            if (v)
                ops->type->free(v);
            api_key_close(&h, false);
            if (!v && !nomem)
                api_error(resp, API_E_BAD_REQUEST, "not a valid header chunk: %s; nothing was loaded", why);
            else
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory loading the filter");
            return;
        }
    } else if (!ops->load_chunk(v, cursor, req->body, req->body_len, &why)) {
        api_key_close(&h, false);
        api_error(resp, API_E_BAD_REQUEST, "chunk refused: %s; nothing was loaded", why);
        return;
    }
    api_key_close(&h, true);
    api_json(resp, 200, json_pack("{s:I}", "loaded", (json_int_t)req->body_len));
}
