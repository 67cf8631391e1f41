/*
 * store.c - what a change does besides itself: it is journaled (space
 * secured before, the record written under the key locks) and it may need
 * room (eviction under the configured policy, each eviction journaled as a
 * deletion so that replay repeats it).
 *
 * The rule that makes a 503 change nothing: no record is appended into
 * space that was not secured before the change it records was made.  The
 * router secures a request's own record (api_journal_reserve); a handler
 * whose canonical record can be larger secures what its bound needs beyond
 * that (api_journal_reserve_more); an eviction secures its deletion before the
 * key is removed and gives it back once appended.  resp->journal_used
 * counts what the request appended, and debug builds stop when it passes
 * resp->journal_held, so the test suites check every route's bound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/repl.h"

/* ------------------------------------------------------------------------ */
/* Journal and eviction                                                     */
/* ------------------------------------------------------------------------ */

/* The longest deletion an eviction journals: DELETE /keys/{key}, the key
 * percent-encoded (3 bytes per byte at most). */
#define EVICT_RECORD_MAX (JOURNAL_REQUEST_FIXED + 6 + 3 * KS_KEY_MAX)

static bool reserve(api_server_t *srv, api_resp_t *resp, uint64_t bytes)
{
    const char *err = "journal unavailable";
    if (srv->hooks.journal_reserve(srv->hooks.ud, bytes, &err))
        return true;
    api_error(resp, API_E_UNAVAILABLE,
              "the change cannot be made durable: no journal space (%s); the request was not applied, retry later",
              err);
    return false;
}

bool api_journal_reserve(api_server_t *srv, const api_req_t *req, api_resp_t *resp)
{
    if (!req->replay && !api_repl_writable(srv, resp))
        return false;
    if (req->replay || !srv->hooks.journal_reserve)
        return true;
    /* the record is this request, or a canonical form of it no larger than
     * twice its size plus a page (a resolved key, a deletion); handlers whose
     * canonical records can be larger reserve the rest themselves */
    uint64_t bytes = 2 * (64 + (uint64_t)req->path_len + req->query_len + req->body_len +
                          (req->ctype ? strlen(req->ctype) : 0)) + 4096;
    if (!reserve(srv, resp, bytes))
        return false;
    resp->journal_held = bytes;
    return true;
}

bool api_journal_reserve_more(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t bytes)
{
    if (req->replay || !srv->hooks.journal_reserve || bytes == 0)
        return true;
    /* a gateway's canonical record usually fits in what the router secured
     * for the request, which it replaces: no second round trip then */
    uint64_t spare = resp->journal_held > resp->journal_used ? resp->journal_held - resp->journal_used : 0;
    if (bytes <= spare)
        return true;
    bytes -= spare;
    if (!reserve(srv, resp, bytes))
        return false;
    resp->journal_held += bytes;
    return true;
}

void api_journal_unreserve(api_server_t *srv, api_resp_t *resp)
{
    if (resp->journal_held && srv->hooks.journal_release)
        srv->hooks.journal_release(srv->hooks.ud, resp->journal_held);
    resp->journal_held = 0;
}

static void journal_put(api_server_t *srv, api_resp_t *resp, const journal_req_t *jr)
{
    uint64_t lsn = srv->hooks.journal(srv->hooks.ud, jr);
    if (lsn > resp->journal_lsn)
        resp->journal_lsn = lsn;
    if (resp->undo_on) {
        /* the pre-images of the keys locked now go with the record (api/undo.h) */
        uint64_t pos = srv->hooks.undo_register(srv->hooks.ud, resp->undo);
        resp->undo = NULL;
        if (pos > resp->repl_pos)
            resp->repl_pos = pos;
    }
}

/* A record of the request's own change: it must fit in what the request
 * holds (debug builds stop on a handler that did not secure enough, so the
 * test suites prove every route's bound). */
static void journal_record(api_server_t *srv, api_resp_t *resp, const journal_req_t *jr)
{
    resp->journal_used += journalfmt_request_size(jr);
#ifdef TALLY_DEBUG_LOCKS
    if (srv->hooks.journal_reserve && resp->journal_used > resp->journal_held) {
        fprintf(stderr, "tally: journal record of %.*s exceeds the space secured for it (%llu > %llu bytes)\n",
                (int)jr->path_len, jr->path, (unsigned long long)resp->journal_used,
                (unsigned long long)resp->journal_held);
        abort();
    }
#endif
    journal_put(srv, resp, jr);
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

/* Journals an eviction as a deletion, in the space evict_one secured. */
static void on_evict(void *ud, const char *key, size_t len)
{
    struct evict_ctx *c = ud;
    if (!c->srv->hooks.journal)
        return;
    char path[6 + 3 * KS_KEY_MAX + 1];   /* keys are at most KS_KEY_MAX bytes */
    memcpy(path, "/keys/", 6);
    size_t plen = 6 + api_escape_segment(key, len, path + 6);
    journal_req_t jr = {
        .now_ns = c->req->now_ns,
        .method = (uint8_t)API_DELETE,
        .path = path,
        .path_len = plen,
        .query = "",
        .ctype = "",
    };
    journal_put(c->srv, c->resp, &jr);
}

/* The 507 of a write that does not fit under --maxmemory. */
static void no_room(ks_t *ks, api_resp_t *resp, uint64_t extra)
{
    const char *policy = ks_evict_policy(ks) == KS_NOEVICTION ? "noeviction" : "cannot evict more";
    if (extra)
        api_error(resp, API_E_OUT_OF_MEMORY,
                  "memory limit of %llu bytes reached: this write needs %llu more bytes (maxmemory-policy %s)",
                  (unsigned long long)ks_maxmemory(ks), (unsigned long long)extra, policy);
    else
        api_error(resp, API_E_OUT_OF_MEMORY, "memory limit of %llu bytes reached (maxmemory-policy %s)",
                  (unsigned long long)ks_maxmemory(ks), policy);
}

/* Evicts one key, its deletion's journal space secured first and given back
 * once it is appended.  Returns the bytes freed; 0 with an error set when
 * nothing could be evicted (507) or the journal cannot take it (503). */
static size_t evict_one(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra)
{
    ks_t *ks = srv->ks;
    bool reserved = srv->hooks.journal_reserve != NULL;
    if (reserved && !reserve(srv, resp, EVICT_RECORD_MAX))
        return 0;
    struct evict_ctx c = { srv, req, resp };
    size_t freed = ks_evict(ks, api_now_ms(req), on_evict, &c);
    if (reserved && srv->hooks.journal_release)
        srv->hooks.journal_release(srv->hooks.ud, EVICT_RECORD_MAX);
    if (!freed)
        no_room(ks, resp, extra);
    return freed;
}

bool api_make_room(api_server_t *srv, const api_req_t *req, api_resp_t *resp)
{
    if (req->replay)
        return true;   /* evictions were journaled as deletions */
    while (ks_over_limit(srv->ks))
        if (!evict_one(srv, req, resp, 0))
            return false;
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
    while (ks_total_memory(ks) + extra > max) {
        if (extra > max) {
            no_room(ks, resp, extra);
            return false;
        }
        if (!evict_one(srv, req, resp, extra))
            return false;
    }
    return true;
}
