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
 * Reserve, settle, refund, probe (cmd/throttle.h, core/throttle.h):
 *   POST   /throttle        {..., "quantity": N, "reserve": true, "ttl"=60, "on_expiry"="keep"|"refund"}
 *                           -> the decision, and when allowed "reservation" (its id, a string) and
 *                              "reservation_ttl" (seconds until it expires unsettled)
 *   POST   /throttle/{key}/settle  {"reservation": ID, "actual": A, "policy"?}
 *                           -> {"settled":true,"reserved":N,"actual":A,"limit",...}; 404 for an
 *                              unknown, settled or expired id
 *   POST   /throttle/{key}/refund  {<the decision's fields>, "quantity": N}
 *                           -> {"refunded":N,"limit",...}
 *   POST   /throttle/{key}/probe   {<the decision's fields>, "quantity": N}
 *                           -> the decision N would get now (200 allowed or not), nothing counted
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
#include <errno.h>
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
/* Reservations                                                             */
/* ------------------------------------------------------------------------ */

#define RESERVE_DEFAULT_TTL_S 60

/* A reservation's fields of a decision: "reserve" (true: this decision
 * reserves), "ttl" and "on_expiry", which need it.  False with *err. */
static bool reserve_fields(const api_fields_t *f, bool *reserve, int64_t *ttl_s, throttle_expiry_t *on_expiry,
                           api_err_t *err)
{
    *reserve = false;
    *ttl_s = 0;   /* 0 and -1: not given (a policy's defaults, else 60 s and keep) */
    *on_expiry = (throttle_expiry_t)-1;
    bool ttl_given = false, reserve_given;
    if (!api_fields_bool(f, "reserve", reserve, &reserve_given, err) ||
        !api_fields_int(f, "ttl", false, 1, THROTTLE_MAX_RESERVE_TTL_NS / NS_PER_SEC, ttl_s, &ttl_given, err))
        return false;
    api_field_t v;
    bool expiry_given = api_fields_get(f, "on_expiry", &v);
    if (expiry_given) {
        if (v.type != API_F_STRING || (strcmp(v.s, "keep") != 0 && strcmp(v.s, "refund") != 0)) {
            api_err_set(err, API_E_BAD_REQUEST, "on_expiry", "'on_expiry' must be \"keep\" or \"refund\"");
            return false;
        }
        *on_expiry = v.s[0] == 'r' ? THROTTLE_EXPIRY_REFUND : THROTTLE_EXPIRY_KEEP;
    }
    if (!*reserve && (ttl_given || expiry_given)) {
        api_err_set(err, API_E_BAD_REQUEST, ttl_given ? "ttl" : "on_expiry", "'%s' is a reservation's: give \"reserve\": true",
                    ttl_given ? "ttl" : "on_expiry");
        return false;
    }
    return true;
}

/* Appends members (",\"name\":value...") to a decision's JSON body. */
static void body_append(api_resp_t *resp, const char *members)
{
    size_t n = strlen(members);
    if (!resp->body || resp->len == 0 || resp->body[resp->len - 1] != '}')
        return;
    char *b = realloc(resp->body, resp->len + n);
    if (!b) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    memcpy(b + resp->len - 1, members, n);
    b[resp->len - 1 + n] = '}';
    resp->body = b;
    resp->len += n;
}

/* A reserving decision: THROTTLE.RESERVE on the resolved item; the ttl
 * and expiry the request did not give are its policy's. */
static void reserve_run(api_req_t *req, api_resp_t *resp, rl_item_t *it, int64_t ttl_s, throttle_expiry_t e)
{
    if (ttl_s == 0)
        ttl_s = it->policy ? it->policy->reservation_ttl_s : RESERVE_DEFAULT_TTL_S;
    if ((int)e == -1)
        e = it->policy ? (throttle_expiry_t)it->policy->on_expiry : THROTTLE_EXPIRY_KEEP;
    if (it->shadow) {
        api_error_field(resp, API_E_BAD_REQUEST, "reserve", "a shadow limit cannot reserve (it never refuses)");
        return;
    }
    cmd_throttle_reserve_args_t a = { .it = { .key = it->key, .klen = it->klen, .p = it->p, .quantity = it->quantity },
                                      .ttl_ns = ttl_s * NS_PER_SEC, .on_expiry = e };
    cmd_throttle_reserve_res_t r;
    if (!api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_THROTTLE_RESERVE, &a, &r)))
        return;
    it->r = r.r;
    if (it->policy && !req->replay)
        policy_count(it->policy, it->limit, r.r.allowed ? POLICY_ALLOWED : POLICY_LIMITED);
    rl_answer(resp, 200, it);
    if (r.r.allowed) {
        char m[96];
        snprintf(m, sizeof(m), ",\"reservation\":\"%llu\",\"reservation_ttl\":%lld", (unsigned long long)r.id,
                 (long long)ttl_s);
        body_append(resp, m);
    }
}

/* The answer of a settle or refund: `head` (its own members, with the
 * opening brace) then the limiter's state after it.  Formatted without a
 * tree: a settle is half of every reserve+settle pair. */
static void answer_after(api_resp_t *resp, const char *head, const rl_result_t *r)
{
    char b[320];
    int n = snprintf(b, sizeof(b), "%s,\"limit\":%lld,\"remaining\":%lld,\"reset_after\":%lld,\"reset_after_ms\":%lld}",
                     head, (long long)r->limit, (long long)r->remaining,
                     (long long)rl_ceil_div(r->reset_after_ns, NS_PER_SEC),
                     (long long)rl_ceil_div(r->reset_after_ns, NS_PER_MS));
    api_body(resp, 200, NULL, b, (size_t)n);
}

/* The key of a route /throttle/{key}/...: with the prefix of the body's
 * "policy" when it names one.  Call with the policies read-locked. */
static bool path_item_key(api_server_t *srv, const api_fields_t *f, const char *key, size_t klen, rl_item_t *it,
                          api_err_t *e)
{
    memset(it, 0, sizeof(*it));
    api_field_t v;
    const policy_t *p = NULL;
    if (api_fields_get(f, "policy", &v)) {
        if (v.type != API_F_STRING) {
            api_err_set(e, API_E_BAD_REQUEST, "policy", "'policy' must be a string");
            return false;
        }
        if (!(p = policy_find(srv->policies, v.s))) {
            api_err_set(e, API_E_BAD_REQUEST, "policy", "unknown policy '%s'", v.s);
            return false;
        }
    }
    return rl_item_key(it, p ? p->prefix : NULL, p ? p->prefix_len : 0, key, klen, e);
}

static void h_throttle_settle(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "reservation", "actual", "policy", NULL };
    const char *key;
    size_t klen;
    api_flat_t room;
    api_fields_t f;
    if (!api_path_key(req, resp, &key, &klen) || !api_body_fields(req, resp, fields, &room, &f))
        return;
    api_err_t e;
    api_field_t v;
    int64_t actual;
    unsigned long long id = 0;
    if (!api_fields_get(&f, "reservation", &v)) {
        api_error_field(resp, API_E_BAD_REQUEST, "reservation", "missing field 'reservation'");
        return;
    }
    bool id_ok = false;
    if (v.type == API_F_STRING && v.len > 0 && v.len <= 20 && strspn(v.s, "0123456789") == v.len) {
        char *end;
        errno = 0;
        id = strtoull(v.s, &end, 10);
        id_ok = errno == 0 && *end == '\0';
    } else if (v.type == API_F_INT && v.i > 0) {
        id = (unsigned long long)v.i;
        id_ok = true;
    }
    if (!id_ok) {
        api_error_field(resp, API_E_BAD_REQUEST, "reservation",
                        "'reservation' must be the id a reservation answered (a string of digits)");
        return;
    }
    if (!api_fields_int(&f, "actual", true, 0, INT64_MAX, &actual, NULL, &e)) {
        api_err_respond(resp, &e);
        return;
    }
    rl_item_t it;
    policies_read_lock(srv->policies);
    bool ok = path_item_key(srv, &f, key, klen, &it, &e);
    policies_read_unlock(srv->policies);
    if (!ok) {
        api_err_respond(resp, &e);
        rl_item_release(&it);
        return;
    }
    cmd_throttle_settle_args_t a = { it.key, it.klen, id, actual };
    cmd_throttle_settle_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_THROTTLE_SETTLE, &a, &r))) {
        char head[96];
        snprintf(head, sizeof(head), "{\"settled\":true,\"reserved\":%lld,\"actual\":%lld", (long long)r.reserved,
                 (long long)actual);
        answer_after(resp, head, &r.r);
    }
    rl_item_release(&it);
}

/* POST /throttle/{key}/refund and /probe: a decision's fields with the
 * path's key. */
static void refund_or_probe(api_server_t *srv, api_req_t *req, api_resp_t *resp, bool refund)
{
    static const char *const fields[] = { "policy", "algorithm", "max_burst", "count_per_period", "period",
                                          "max_count", "capacity", "refill_rate", "quantity", NULL };
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_body_object(req, resp, fields))
        return;
    api_fields_t f = api_fields_json(req->json);
    policies_read_lock(srv->policies);
    rl_item_t it;
    api_err_t e;
    if (!rl_item_parse(srv, req, &f, key, klen, NULL, 0, true, &it, &e)) {
        api_err_respond(resp, &e);
    } else if (refund) {
        cmd_throttle_item_t a = { .key = it.key, .klen = it.klen, .p = it.p, .quantity = it.quantity };
        cmd_throttle_res_t r;
        if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_THROTTLE_REFUND, &a, &r))) {
            char head[48];
            snprintf(head, sizeof(head), "{\"refunded\":%lld", (long long)it.quantity);
            answer_after(resp, head, &r.r);
        }
    } else {
        cmd_throttle_item_t a = { .key = it.key, .klen = it.klen, .p = it.p, .quantity = it.quantity };
        cmd_throttle_res_t r;
        if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_THROTTLE_PROBE, &a, &r))) {
            it.r = r.r;
            it.shadow = false;   /* a probe says what the limit would answer */
            rl_answer(resp, 200, &it);
        }
    }
    rl_item_release(&it);
    policies_read_unlock(srv->policies);
}

static void h_throttle_refund(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    refund_or_probe(srv, req, resp, true);
}

static void h_throttle_probe(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    refund_or_probe(srv, req, resp, false);
}

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
                                          "reserve", "ttl", "on_expiry", "calendar", "time_zone", "week_start",
                                          "anchor_day", NULL };
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
    bool reserve;
    int64_t ttl_s;
    throttle_expiry_t on_expiry;
    api_err_t re;
    if (!reserve_fields(&f, &reserve, &ttl_s, &on_expiry, &re)) {
        api_err_respond(resp, &re);
    } else if (arr) {
        if (reserve)
            api_error_field(resp, API_E_BAD_REQUEST, "reserve", "a batch ('requests') cannot reserve");
        else
            post_batch(srv, req, resp, f.obj, arr);
    } else {
        rl_item_t it;
        api_err_t e;
        bool all;
        if (!(locked ? rl_item_parse(srv, req, &f, NULL, 0, NULL, 0, true, &it, &e)
                     : rl_item_parse_unnamed(req, &f, NULL, 0, &it, &e)))
            api_err_respond(resp, &e);
        else if (reserve)
            reserve_run(req, resp, &it, ttl_s, on_expiry);
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
    { API_POST,   "/throttle/{key}/settle", h_throttle_settle, API_ROUTE_KEY_TEMPLATE, API_BY(CMD_THROTTLE_SETTLE) },
    { API_POST,   "/throttle/{key}/refund", h_throttle_refund, API_ROUTE_KEY_TEMPLATE, API_BY(CMD_THROTTLE_REFUND) },
    { API_POST,   "/throttle/{key}/probe",  h_throttle_probe, API_ROUTE_KEY_TEMPLATE, API_BY(CMD_THROTTLE_PROBE) },
};

API_FAMILY(throttle);
