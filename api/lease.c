/*
 * lease.c - /lease: concurrency leases, a limit on requests in flight
 * (cmd/lease.h; core/lease.h has the algorithm).
 *
 *   POST   /lease/{key}              {"limit":10,"ttl_ms":30000}  ("ttl" in seconds instead)
 *                                    -> 200 {"acquired":true,"lease":"<16 hex>",...} or
 *                                       200 {"acquired":false,...,"retry_after_ms":N}
 *   GET    /lease/{key}/acquire?limit=&ttl_ms=&deny_status=
 *                                    -> 200 granted / 429 (or deny_status) refused: the gateway
 *                                       form (nginx auth_request), the id in X-Tally-Lease
 *   DELETE /lease/{key}/{lease}      -> 200 {"released":true|false,...}
 *   POST   /lease/{key}/{lease}/renew  {"ttl_ms":N}  -> 200 {"renewed":true|false,...}
 *   GET    /lease/{key}              -> 200 {"limit","active","remaining",...} (a read)
 *
 * Every answer carries the counts after the operation: limit (the last
 * acquire's; 0 for a key without leases), active (live leases), remaining,
 * next_expiry_ms (-1 when none), reset_after_ms (until every live lease has
 * expired), and the IETF draft's headers with the concurrency quota unit:
 *   RateLimit-Policy: "concurrency";q=10;qu="concurrent-requests"
 *   RateLimit: "concurrency";r=7
 * plus Retry-After (seconds, rounded up) on a refusal: when the earliest
 * live lease expires at the latest - a release may free a slot sooner.
 *
 * Releasing or renewing a lease that is not live (released, expired, never
 * given) answers 200 with false: the caller learns its lease is gone, and a
 * gateway's release after an expiry is no error.
 */
#include <stdio.h>
#include <string.h>

#include "api/params.h"
#include "api/pattern.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/ratelimit.h"
#include "cmd/lease.h"
#include "core/lease.h"

#define LEASE_POLICY_NAME "concurrency"   /* the draft headers' policy name */

static int64_t ceil_s(int64_t ms) { return ms <= 0 ? 0 : (ms + 999) / 1000; }

/* How an answer names its limit: the draft headers' policy name, and, for a
 * concurrency policy's hook, the policy and which of its limits decided. */
typedef struct lease_as {
    const char *name;            /* LEASE_POLICY_NAME, or the policy's */
    const char *limit;           /* the policy's limit ("default", "file-override", "override"); NULL: /lease */
    bool problem;                /* a refusal as RFC 9457 problem details (the client's Accept asks) */
} lease_as_t;

static const lease_as_t PLAIN = { LEASE_POLICY_NAME, NULL, false };

static void headers(api_resp_t *resp, const cmd_lease_res_t *r, bool refused, const lease_as_t *as)
{
    api_add_header(resp, "RateLimit-Policy", "\"%s\";q=%lld;qu=\"concurrent-requests\"", as->name,
                   (long long)r->limit);
    api_add_header(resp, "RateLimit", "\"%s\";r=%lld", as->name, (long long)r->remaining);
    if (refused && r->retry_after_ms >= 0)
        api_add_header(resp, "Retry-After", "%lld", (long long)ceil_s(r->retry_after_ms));
    if (r->id) {
        char id[17];
        cmd_lease_id_format(r->id, id);
        api_add_header(resp, "X-Tally-Lease", "%s", id);
    }
}

/* The problem details of a refusal (api/limiter.c's, with the lease's
 * members): draft-ietf-httpapi-ratelimit-headers' "Quota Exceeded". */
#define PROBLEM_HEAD "{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\",\"title\":" \
                     "\"Request cannot be satisfied as assigned quota has been exceeded\",\"status\":"

/* The answer's body: `verb` (acquired, released, renewed; NULL for the
 * status read) with ok, the lease's fields when one was granted or renewed,
 * and the counts - written directly (no tree: an acquire and its release
 * cost about two decisions, and half of that was building JSON).  A
 * policy's answer adds "policy", and a refusal "violated". */
static void answer_as(api_resp_t *resp, int status, const char *verb, const cmd_lease_res_t *r, const lease_as_t *as)
{
    bool refused = verb && !strcmp(verb, "acquired") && !r->ok;
    bool problem = refused && as->limit && as->problem && status >= 400;
    char body[768], *p = body, *end = body + sizeof(body);
    if (problem)
        p += snprintf(p, (size_t)(end - p), PROBLEM_HEAD "%d,\"violated-policies\":[\"%s\"],", status, as->name);
    else
        *p++ = '{';
    if (verb)
        p += snprintf(p, (size_t)(end - p), "\"%s\":%s,", verb, r->ok ? "true" : "false");
    if (r->id) {
        char id[17];
        cmd_lease_id_format(r->id, id);
        p += snprintf(p, (size_t)(end - p), "\"lease\":\"%s\",", id);
    }
    if (r->ttl_ms >= 0)
        p += snprintf(p, (size_t)(end - p), "\"ttl_ms\":%lld,\"expires_at_ms\":%lld,", (long long)r->ttl_ms,
                      (long long)r->expires_ms);
    p += snprintf(p, (size_t)(end - p), "\"limit\":%lld,\"active\":%lld,\"remaining\":%lld,", (long long)r->limit,
                  (long long)r->active, (long long)r->remaining);
    if (r->retry_after_ms >= 0)
        p += snprintf(p, (size_t)(end - p), "\"retry_after\":%lld,\"retry_after_ms\":%lld,",
                      (long long)ceil_s(r->retry_after_ms), (long long)r->retry_after_ms);
    p += snprintf(p, (size_t)(end - p), "\"next_expiry_ms\":%lld,\"reset_after_ms\":%lld",
                  (long long)r->next_expiry_ms, (long long)r->reset_after_ms);
    if (as->limit) {   /* policy names are [A-Za-z0-9_.-]: nothing to escape */
        p += snprintf(p, (size_t)(end - p), ",\"policy\":\"%s\"", as->name);
        if (refused)
            p += snprintf(p, (size_t)(end - p), ",\"violated\":[{\"policy\":\"%s\",\"limit\":\"%s\"}]", as->name,
                          as->limit);
    }
    p += snprintf(p, (size_t)(end - p), "}");
    api_body(resp, status, problem ? "application/problem+json" : NULL, body, (size_t)(p - body));
    headers(resp, r, refused, as);
}

static void answer(api_resp_t *resp, int status, const char *verb, const cmd_lease_res_t *r)
{
    answer_as(resp, status, verb, r, &PLAIN);
}

/* "ttl" (seconds) or "ttl_ms", exactly one, from a body. */
static bool body_ttl(api_resp_t *resp, json_t *body, bool required, int64_t *ttl_ms)
{
    int64_t ttl = 0;
    bool has_s = false, has_ms = false;
    if (!api_obj_int(resp, body, "ttl", false, 1, LEASE_MAX_TTL_MS / 1000, &ttl, &has_s) ||
        !api_obj_int(resp, body, "ttl_ms", false, 1, LEASE_MAX_TTL_MS, ttl_ms, &has_ms))
        return false;
    if (has_s && has_ms) {
        api_error_field(resp, API_E_BAD_REQUEST, "ttl_ms", "give 'ttl' or 'ttl_ms', not both");
        return false;
    }
    if (has_s)
        *ttl_ms = ttl * 1000;
    if (required && !has_s && !has_ms) {
        api_error_field(resp, API_E_BAD_REQUEST, "ttl_ms", "'ttl_ms' (or 'ttl' in seconds) is required");
        return false;
    }
    return true;
}

/* The {lease} path segment: 16 hexadecimal digits. */
static bool path_id(const api_req_t *req, api_resp_t *resp, uint64_t *id)
{
    size_t len;
    const char *s = api_path_param(req, "lease", &len);
    if (!s || !cmd_lease_id_parse(s, len, id)) {
        api_error_field(resp, API_E_BAD_REQUEST, "lease",
                        "a lease id is the 16 hexadecimal digits acquire answered");
        return false;
    }
    return true;
}

static void h_lease_acquire(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "limit", "ttl", "ttl_ms", NULL };
    cmd_lease_acquire_args_t a;
    json_t *body = api_key_body(req, resp, fields, &a.key, &a.klen);
    if (!body || !api_obj_int(resp, body, "limit", true, 1, LEASE_MAX_LIMIT, &a.limit, NULL) ||
        !body_ttl(resp, body, true, &a.ttl_ms))
        return;
    cmd_lease_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_LEASE_ACQUIRE, &a, &r)))
        answer(resp, 200, "acquired", &r);
}

static void h_lease_acquire_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "limit", "ttl_ms", "deny_status", NULL };
    cmd_lease_acquire_args_t a;
    int64_t deny = 429;
    bool deny_given = false;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "limit", true, 1, LEASE_MAX_LIMIT, &a.limit, NULL) ||
        !api_query_int(req, resp, "ttl_ms", true, 1, LEASE_MAX_TTL_MS, &a.ttl_ms, NULL) ||
        !api_query_int(req, resp, "deny_status", false, 400, 499, &deny, &deny_given))
        return;
    if (deny_given && !rl_deny_status_ok(deny)) {
        api_error_field(resp, API_E_BAD_REQUEST, "deny_status",
                        "'deny_status' must be a 4xx status tally does not use for errors (e.g. 429, or 403 for nginx "
                        "auth_request; not 400, 401, 404, 405, 409, 413, 414 or 415)");
        return;
    }
    cmd_lease_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_LEASE_ACQUIRE, &a, &r)))
        answer(resp, r.ok ? 200 : (int)deny, "acquired", &r);
}

static void h_lease_release(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_lease_id_args_t a = { 0 };
    if (!api_path_key(req, resp, &a.key, &a.klen) || !path_id(req, resp, &a.id) || !api_no_query(req, resp))
        return;
    cmd_lease_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_LEASE_RELEASE, &a, &r)))
        answer(resp, 200, "released", &r);
}

static void h_lease_renew(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "ttl", "ttl_ms", NULL };
    cmd_lease_id_args_t a = { 0 };
    json_t *body = api_key_body(req, resp, fields, &a.key, &a.klen);
    if (!body || !path_id(req, resp, &a.id) || !body_ttl(resp, body, true, &a.ttl_ms))
        return;
    cmd_lease_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_LEASE_RENEW, &a, &r)))
        answer(resp, 200, "renewed", &r);
}

static void h_lease_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_lease_key_args_t a;
    cmd_lease_res_t r;
    if (api_path_key(req, resp, &a.key, &a.klen) && api_no_query(req, resp) &&
        api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_LEASE_INFO, &a, &r)))
        answer(resp, 200, NULL, &r);
}

/* ------------------------------------------------------------------------ */
/* A concurrency policy's hook (api/hook.c)                                  */
/* ------------------------------------------------------------------------ */

void rl_lease_hook(api_server_t *srv, api_req_t *req, api_resp_t *resp, const policy_t *p, const char *rest,
                   size_t rest_len)
{
    (void)srv;
    char key[KS_KEY_MAX + 1];
    rl_item_t it;
    api_err_t e;
    if (!rl_item_of_policy(p, req, rest, rest_len, key, &it, &e)) {   /* the key, and the tenant's limits */
        api_err_respond(resp, &e);
        rl_item_release(&it);
        return;
    }
    const char *rel = req->header ? req->header(req->hctx, "X-Tally-Release") : NULL;
    lease_as_t as = { p->name, policy_limit_name(it.limit), false };
    cmd_lease_res_t r;
    if (rel) {
        /* the gateway's release once the response is done: the same request,
         * so the template builds the same key */
        cmd_lease_id_args_t a = { .key = it.key, .klen = it.klen };
        if (!cmd_lease_id_parse(rel, strlen(rel), &a.id))
            api_error_field(resp, API_E_BAD_REQUEST, "X-Tally-Release",
                            "X-Tally-Release is the 16 hexadecimal digits of the lease the hook granted (its "
                            "X-Tally-Lease)");
        else if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_LEASE_RELEASE, &a, &r)))
            answer_as(resp, 200, "released", &r, &as);
    } else {
        cmd_lease_acquire_args_t a = { .key = it.key, .klen = it.klen, .limit = rl_lease_limit(&it.p),
                                       .ttl_ms = rl_lease_ttl_ms(&it.p) };
        if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_LEASE_ACQUIRE, &a, &r))) {
            if (!req->replay)
                policy_count(p, it.limit, r.ok ? POLICY_ALLOWED : POLICY_LIMITED);
            if (!r.ok) {
                const char *acc = req->header ? req->header(req->hctx, "Accept") : NULL;
                as.problem = acc && strcasestr(acc, "application/problem+json");
                snprintf(resp->violated, sizeof(resp->violated), "%s/%s", p->name, as.limit);
            }
            answer_as(resp, r.ok ? 200 : p->deny_status, "acquired", &r, &as);
        }
    }
    rl_item_release(&it);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_POST,   "/lease/{key}",                 h_lease_acquire, 0, API_BY(CMD_LEASE_ACQUIRE) },
    { API_GET,    "/lease/{key}",                 h_lease_info, 0, API_BY(CMD_LEASE_INFO) },
    { API_GET,    "/lease/{key}/acquire",         h_lease_acquire_get, API_ROUTE_GATEWAY, API_BY(CMD_LEASE_ACQUIRE) },
    { API_DELETE, "/lease/{key}/{lease}",         h_lease_release, 0, API_BY(CMD_LEASE_RELEASE) },
    { API_POST,   "/lease/{key}/{lease}/renew",   h_lease_renew, 0, API_BY(CMD_LEASE_RENEW) },
};

API_FAMILY(lease);
