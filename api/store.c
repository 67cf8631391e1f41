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
 *
 * The bounds of one request live here too (api/api.h, "Bounds of one
 * request"): room asked for before a write allocates, never evicting the
 * keys the write holds (api_keep_t), and the caps on a value
 * (--max-value-size), an answer (--max-answer-size) and what a request
 * reads (API_WORK_VALUES x --max-value-size).
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

/* Evicts one key (never one of keep's), its deletion's journal space
 * secured first and given back once it is appended.  Returns the bytes
 * freed; 0 with an error set when nothing could be evicted (507) or the
 * journal cannot take it (503). */
static size_t evict_one(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                        const api_keep_t *keep)
{
    ks_t *ks = srv->ks;
    bool reserved = srv->hooks.journal_reserve != NULL;
    if (reserved && !reserve(srv, resp, EVICT_RECORD_MAX))
        return 0;
    struct evict_ctx c = { srv, req, resp };
    size_t freed = ks_evict_keep(ks, api_now_ms(req), keep ? keep->keys : NULL, keep ? keep->n : 0, on_evict, &c);
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
        if (!evict_one(srv, req, resp, 0, NULL))
            return false;
    return true;
}

bool api_make_room_keeping(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                           const api_keep_t *keep)
{
    if (req->replay)
        return true;
    ks_t *ks = srv->ks;
    uint64_t max = ks_maxmemory(ks), pinned = keep ? keep->bytes : 0;
    if (!max)
        return true;
    while (ks_total_memory(ks) + extra > max) {
        if (extra > max || pinned > max - extra) {   /* never fits, whatever is evicted */
            no_room(ks, resp, extra);
            return false;
        }
        if (!evict_one(srv, req, resp, extra, keep))
            return false;
    }
    return true;
}

bool api_make_room_for(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra)
{
    return api_make_room_keeping(srv, req, resp, extra, NULL);
}

bool api_make_room_for_key(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                           const char *key, size_t klen, uint64_t bytes)
{
    ks_key_t k = ks_key(srv->ks, key, klen);
    api_keep_t keep = { &k, 1, bytes };
    return api_make_room_keeping(srv, req, resp, extra, &keep);
}

/* ------------------------------------------------------------------------ */
/* Bounds of one request                                                    */
/* ------------------------------------------------------------------------ */

/* How many times a write may find its room taken again by others between
 * evicting for it and retaking its locks before it is answered 507. */
#define ROOM_ATTEMPTS 4

uint64_t api_room_now(const api_server_t *srv, const api_req_t *req)
{
    uint64_t max = ks_maxmemory(srv->ks);
    if (req->replay || !max)
        return UINT64_MAX;
    uint64_t used = ks_total_memory(srv->ks);
    return used < max ? max - used : 0;
}

uint64_t api_value_limit(const api_server_t *srv, const api_req_t *req)
{
    return req->replay || !srv->limits.max_value ? UINT64_MAX : srv->limits.max_value;
}

bool api_value_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *field, const char *what,
                    uint64_t bytes)
{
    if (bytes <= api_value_limit(srv, req))
        return true;
    const char *fmt = "%s would take %llu bytes, over --max-value-size (%llu bytes a value); nothing was changed";
    if (field)
        api_error_field(resp, API_E_BAD_REQUEST, field, fmt, what, (unsigned long long)bytes,
                        (unsigned long long)srv->limits.max_value);
    else
        api_error(resp, API_E_BAD_REQUEST, fmt, what, (unsigned long long)bytes,
                  (unsigned long long)srv->limits.max_value);
    return false;
}

bool api_grow(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *field, const char *what,
              uint64_t reach, uint64_t extra)
{
    return api_value_fits(srv, req, resp, field, what, reach) && api_make_room_for(srv, req, resp, extra);
}

bool api_room_retry(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                    const api_keep_t *keep, unsigned *attempts)
{
    if (++*attempts > ROOM_ATTEMPTS) {
        no_room(srv->ks, resp, extra);
        return false;
    }
    return api_make_room_keeping(srv, req, resp, extra, keep);
}

bool api_answer_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t bytes, const char *how)
{
    (void)req;
    uint64_t max = srv->limits.max_answer;
    if (!max || bytes <= max)
        return true;
    api_error(resp, API_E_BAD_REQUEST, "the answer would take about %llu bytes, over --max-answer-size (%llu bytes): %s",
              (unsigned long long)bytes, (unsigned long long)max, how);
    return false;
}

uint64_t api_work_limit(const api_server_t *srv)
{
    uint64_t v = srv->limits.max_value;
    return !v || v > UINT64_MAX / API_WORK_VALUES ? UINT64_MAX : v * API_WORK_VALUES;
}

bool api_work_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *field, uint64_t bytes)
{
    uint64_t max = api_work_limit(srv);
    if (req->replay || bytes <= max)
        return true;
    api_error_field(resp, API_E_BAD_REQUEST, field,
                    "'%s' would make this request read %llu bytes, over what one request may read: %d x "
                    "--max-value-size (%llu bytes); split it into smaller requests",
                    field, (unsigned long long)bytes, API_WORK_VALUES, (unsigned long long)max);
    return false;
}

bool api_keys_distinct(const ks_key_t *keys, size_t n, size_t *first)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    size_t *tab = malloc(cap * sizeof(*tab));
    if (!tab)
        return false;
    for (size_t i = 0; i < cap; i++)
        tab[i] = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)keys[i].hash & (cap - 1);
        for (;;) {
            size_t j = tab[h];
            if (j == SIZE_MAX) {
                tab[h] = i;
                first[i] = i;
                break;
            }
            if (keys[j].hash == keys[i].hash && keys[j].len == keys[i].len &&
                !memcmp(keys[j].p, keys[i].p, keys[i].len)) {
                first[i] = j;
                break;
            }
            h = (h + 1) & (cap - 1);
        }
    }
    free(tab);
    return true;
}
