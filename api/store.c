/*
 * store.c - a canonical journal record in the HTTP request form (method,
 * path, query, content type, body): what a handler journals instead of the
 * request as received when the record must hold resolved parameters.  The
 * journal itself is the command layer's (cmd/journal.h).
 */
#include <string.h>

#include "api/api.h"

void api_journal_as(api_server_t *srv, const api_req_t *req, api_resp_t *resp, api_method_t method,
                    const char *path, const char *query, const char *ctype, const void *body,
                    size_t body_len)
{
    if (req->replay || !srv->hooks.journal)
        return;
    journal_req_t jr = {
        .now_ns = req->now_ns,
        .method = (uint8_t)method,
        .path = path,
        .path_len = strlen(path),
        .query = query ? query : "",
        .query_len = query ? strlen(query) : 0,
        .ctype = ctype ? ctype : "",
        .ctype_len = ctype ? strlen(ctype) : 0,
        .body = body,
        .body_len = body_len,
    };
    (void)resp;
    cmd_journal_record(req->ctx, &jr);
}

