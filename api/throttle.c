/*
 * throttle.c - /throttle: one or several rate-limit decisions, with any
 * algorithm or a named policy; the engine is api/limiter.c.
 *
 *   POST   /throttle        {"key","max_burst","count_per_period","period","quantity"=1}   (GCRA)
 *                           {"key","algorithm":"sliding_log","max_count","period",...}
 *                           {"policy":"NAME","key"?,"quantity"?}
 *                           {"requests":[{...},{...}]}          all or nothing
 *                           -> 200 with the decision in the body (allowed or not)
 *   GET    /throttle/{key}?<the same as query parameters>&deny_status=
 *                           -> 200 allowed / 429 (or deny_status) limited, for gateways
 *   DELETE /throttle/{key}[?policy=NAME]  -> reset
 *
 * Every answer has the same fields and headers: Retry-After (when limited and
 * the request can ever fit), the legacy RateLimit-Limit / -Remaining / -Reset
 * trio, and the IETF draft's RateLimit-Policy ("q" the limit over "w"
 * seconds) and RateLimit ("r" remaining, "t" seconds to full reset).
 *
 * A key keeps the algorithm that created it: a request with another algorithm
 * gets 409 WRONGTYPE until the key is reset (DELETE) or expires — changing a
 * limiter's algorithm silently would either forgive or punish its clients.
 *
 * Each decision, batch and reset is an operation of the command table
 * (cmd/throttle.h: CL.THROTTLE, THROTTLE.SLIDING_LOG, ...; THROTTLE.BATCH;
 * THROTTLE.RESET): this file reads the request into its arguments - a
 * policy's key, algorithm and parameters resolved - and answers its result.
 * Its journal record holds what was resolved, so replay never depends on the
 * policies file of the day.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/ratelimit.h"
#include "cmd/throttle.h"

/* ------------------------------------------------------------------------ */
/* Handlers                                                                 */
/* ------------------------------------------------------------------------ */

static void post_batch(api_server_t *srv, api_req_t *req, api_resp_t *resp, json_t *body, json_t *arr)
{
    if (json_object_size(body) != 1) {
        api_error_field(resp, API_E_BAD_REQUEST, "requests", "'requests' cannot be combined with other fields");
        return;
    }
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "requests", "'requests' must be a non-empty array of requests");
        return;
    }
    size_t n = json_array_size(arr);
    if (n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "requests", "'requests' has %zu items; at most %d per request", n,
                        API_MAX_BATCH);
        return;
    }
    rl_item_t *items = calloc(n, sizeof(*items));
    if (!items) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    size_t parsed = 0;
    for (; parsed < n; parsed++) {
        json_t *o = json_array_get(arr, parsed);
        api_err_t e;
        bool ok = json_is_object(o);
        if (!ok)
            api_err_set(&e, API_E_BAD_REQUEST, NULL, "must be an object");
        else {
            api_fields_t f = api_fields_json(o);
            ok = rl_item_parse(srv, req, &f, NULL, 0, NULL, 0, false, &items[parsed], &e);
        }
        if (!ok) {
            char field[128];
            snprintf(field, sizeof(field), "requests[%zu]%s%s", parsed, e.field[0] ? "." : "", e.field);
            api_error_field(resp, e.code, field, "requests[%zu]: %s (nothing was counted)", parsed, e.message);
            rl_item_release(&items[parsed]);
            goto done;
        }
    }
    bool all;
    if (rl_run(srv, req, resp, items, n, true, &all))
        rl_answer_batch(resp, items, n, all);
done:
    for (size_t i = 0; i < parsed; i++)
        rl_item_release(&items[i]);
    free(items);
}

static void h_throttle_post(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "key", "policy", "algorithm", "max_burst", "count_per_period", "period",
                                          "max_count", "capacity", "refill_rate", "quantity", "shadow", "requests",
                                          "calendar", "time_zone", "week_start", "anchor_day",
                                          NULL };
    api_flat_t room;   /* a flat body's fields, read without a tree (issue 20); kept until answered */
    api_fields_t f;
    if (!api_body_fields(req, resp, fields, &room, &f))
        return;
    bool policy, batch;
    if (rl_fields_name(&f, &policy, &batch) && batch) {   /* a batch (here, an invalid one) is a tree's */
        if (!api_body_object(req, resp, fields))
            return;
        f = api_fields_json(req->json);
    }
    /* the policies are locked for a request that may use one, until it is answered */
    bool locked = f.kind != API_FIELDS_FLAT || policy;
    if (locked)
        policies_read_lock(srv->policies);
    json_t *arr = f.kind == API_FIELDS_JSON ? json_object_get(f.obj, "requests") : NULL;
    if (arr) {
        post_batch(srv, req, resp, f.obj, arr);
    } else {
        rl_item_t it;
        api_err_t e;
        bool all;
        if (!(locked ? rl_item_parse(srv, req, &f, NULL, 0, NULL, 0, true, &it, &e)
                     : rl_item_parse_unnamed(req, &f, NULL, 0, &it, &e)))
            api_err_respond(resp, &e);
        else if (rl_run(srv, req, resp, &it, 1, false, &all))
            rl_answer(resp, 200, &it);
        rl_item_release(&it);
    }
    if (locked)
        policies_read_unlock(srv->policies);
}

static void h_throttle_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "policy", "algorithm", "max_burst", "count_per_period", "period",
                                          "max_count", "capacity", "refill_rate", "quantity", "shadow",
                                          "deny_status",
                                          "calendar", "time_zone", "week_start", "anchor_day", NULL };
    const char *key;
    size_t klen;
    int64_t deny = 0;
    bool deny_given = false;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "deny_status", false, 400, 499, &deny, &deny_given))
        return;
    if (deny_given && !rl_deny_status_ok(deny)) {
        api_error_field(resp, API_E_BAD_REQUEST, "deny_status",
                        "'deny_status' must be a 4xx status tally does not use for errors (e.g. 429, or 403 for nginx "
                        "auth_request; not 400, 401, 404, 405, 409, 413, 414 or 415)");
        return;
    }
    api_flat_t room;   /* the item's fields typed once from the query: no tree (issue 20) */
    api_fields_t q;
    api_err_t e;
    if (!api_fields_query(req, "deny_status", &room, &q, &e)) {
        api_err_respond(resp, &e);
        return;
    }
    bool policy, batch;
    bool locked = !rl_fields_name(&q, &policy, &batch) || policy;   /* as POST's */
    if (locked)
        policies_read_lock(srv->policies);
    rl_item_t it;
    bool all;
    if (!(locked ? rl_item_parse(srv, req, &q, key, klen, NULL, 0, true, &it, &e)
                 : rl_item_parse_unnamed(req, &q, key, klen, &it, &e))) {
        api_err_respond(resp, &e);
    } else if (rl_run(srv, req, resp, &it, 1, false, &all)) {
        int status = all ? 200 : deny_given ? (int)deny : it.policy ? it.policy->deny_status : 429;
        rl_answer(resp, status, &it);
    }
    rl_item_release(&it);
    if (locked)
        policies_read_unlock(srv->policies);
}

static void h_throttle_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "policy", NULL };
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params))
        return;
    size_t plen;
    const char *pname = api_query_get(req, "policy", &plen);
    rl_item_t it;
    memset(&it, 0, sizeof(it));
    api_err_t e;
    policies_read_lock(srv->policies);
    const policy_t *p = pname ? policy_find(srv->policies, pname) : NULL;
    bool ok = true;
    if (pname && !p) {
        api_error_field(resp, API_E_BAD_REQUEST, "policy", "unknown policy '%s'", pname);
        ok = false;
    } else if (!rl_item_key(&it, p ? p->prefix : NULL, p ? p->prefix_len : 0, key, klen, &e)) {
        api_err_respond(resp, &e);
        ok = false;
    }
    policies_read_unlock(srv->policies);
    cmd_throttle_reset_args_t a = { it.key, it.klen };
    cmd_throttle_reset_res_t r;
    /* the resolved key: replay needs no policies */
    if (ok && api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_THROTTLE_RESET, &a, &r)))
        api_json(resp, 200, json_pack("{s:b}", "deleted", r.deleted));
    rl_item_release(&it);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    /* every decision operation has CL.THROTTLE's access class and flags
     * (cmd/throttle.h): the rows name it for whichever runs */
    { API_POST,   "/throttle",       h_throttle_post, 0, API_BY(CMD_CL_THROTTLE) },
    { API_GET,    "/throttle/{key}", h_throttle_get, API_ROUTE_KEY_TEMPLATE, API_BY(CMD_CL_THROTTLE) },
    { API_DELETE, "/throttle/{key}", h_throttle_delete, API_ROUTE_KEY_TEMPLATE, API_BY(CMD_THROTTLE_RESET) },
};

API_FAMILY(throttle);
