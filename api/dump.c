/*
 * dump.c - SCANDUMP / LOADCHUNK over HTTP for the filters (api/dump.h has
 * the contract): the cursor's rules, the raw bodies, the byte limit.
 */
#include <stdlib.h>
#include <unistd.h>

#include "api/dump.h"

uint64_t api_value_byte_limit(const api_server_t *srv, const api_req_t *req)
{
    if (req->replay)
        return 0;
    uint64_t max = ks_maxmemory(srv->ks);
    if (max)
        return max;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

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
    if (!api_make_room(srv, req, resp))
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
        v = ops->load_header(req->body, req->body_len, api_value_byte_limit(srv, req), &nomem, &why);
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
