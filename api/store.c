/*
 * store.c - what a change does besides itself: it is journaled (space
 * secured before, the record written under the key locks) and it may need
 * room (eviction under the configured policy, each eviction journaled as a
 * deletion so that replay repeats it).
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

/* ------------------------------------------------------------------------ */
/* Journal and eviction                                                     */
/* ------------------------------------------------------------------------ */

bool api_journal_reserve(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t *held)
{
    *held = 0;
    if (req->replay || !srv->hooks.journal_reserve)
        return true;
    /* the record is this request, or a canonical form of it (resolved
     * parameters, evictions as deletions): twice its size plus a page */
    uint64_t bytes = 2 * (64 + (uint64_t)req->path_len + req->query_len + req->body_len +
                          (req->ctype ? strlen(req->ctype) : 0)) + 4096;
    const char *err = "journal unavailable";
    if (!srv->hooks.journal_reserve(srv->hooks.ud, bytes, &err)) {
        api_error(resp, API_E_UNAVAILABLE,
                  "the change cannot be made durable: no journal space (%s); nothing was changed, retry later", err);
        return false;
    }
    *held = bytes;
    return true;
}

void api_journal_unreserve(api_server_t *srv, uint64_t held)
{
    if (held && srv->hooks.journal_release)
        srv->hooks.journal_release(srv->hooks.ud, held);
}

static void journal_record(api_server_t *srv, api_resp_t *resp, const journal_req_t *jr)
{
    uint64_t lsn = srv->hooks.journal(srv->hooks.ud, jr);
    if (lsn > resp->journal_lsn)
        resp->journal_lsn = lsn;
}

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
    journal_record(srv, resp, &jr);
}

void api_journal(api_server_t *srv, const api_req_t *req, api_resp_t *resp)
{
    if (req->replay || !srv->hooks.journal)
        return;
    journal_req_t jr = {
        .now_ns = req->now_ns,
        .method = (uint8_t)req->method,
        .path = req->path,
        .path_len = req->path_len,
        .query = req->query ? req->query : "",
        .query_len = req->query ? req->query_len : 0,
        .ctype = req->ctype ? req->ctype : "",
        .ctype_len = req->ctype ? strlen(req->ctype) : 0,
        .body = req->body,
        .body_len = req->body_len,
    };
    journal_record(srv, resp, &jr);
}

struct evict_ctx {
    api_server_t *srv;
    const api_req_t *req;
    api_resp_t *resp;
};

static void on_evict(void *ud, const char *key, size_t len)
{
    struct evict_ctx *c = ud;
    char *path = malloc(6 + 3 * len + 1);
    if (!path)
        return;
    memcpy(path, "/keys/", 6);
    api_escape_segment(key, len, path + 6);
    api_journal_as(c->srv, c->req, c->resp, API_DELETE, path, NULL, NULL, NULL, 0);
    free(path);
}

bool api_make_room(api_server_t *srv, const api_req_t *req, api_resp_t *resp)
{
    if (req->replay)
        return true;   /* evictions were journaled as deletions */
    struct evict_ctx c = { srv, req, resp };
    while (ks_over_limit(srv->ks)) {
        if (ks_evict(srv->ks, api_now_ms(req), on_evict, &c) == 0) {
            api_error(resp, API_E_OUT_OF_MEMORY, "memory limit of %llu bytes reached (maxmemory-policy %s)",
                      (unsigned long long)ks_maxmemory(srv->ks),
                      ks_evict_policy(srv->ks) == KS_NOEVICTION ? "noeviction" : "cannot evict more");
            return false;
        }
    }
    return true;
}

bool api_make_room_for(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra)
{
    if (req->replay)
        return true;
    ks_t *ks = srv->ks;
    uint64_t max = ks_maxmemory(ks);
    if (!max)
        return true;
    struct evict_ctx c = { srv, req, resp };
    while (ks_total_memory(ks) + extra > max) {
        if (extra > max || ks_evict(ks, api_now_ms(req), on_evict, &c) == 0) {
            api_error(resp, API_E_OUT_OF_MEMORY,
                      "memory limit of %llu bytes reached: this write needs %llu more bytes (maxmemory-policy %s)",
                      (unsigned long long)max, (unsigned long long)extra,
                      ks_evict_policy(ks) == KS_NOEVICTION ? "noeviction" : "cannot evict more");
            return false;
        }
    }
    return true;
}

