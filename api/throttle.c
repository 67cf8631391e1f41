/*
 * throttle.c - /throttle: redis-cell's CL.THROTTLE over HTTP.
 *
 *   POST   /throttle        {"key","max_burst","count_per_period","period","quantity"=1}
 *                           -> 200 with the decision in the body (allowed or not)
 *   GET    /throttle/{key}?max_burst=&count_per_period=&period=&quantity=&deny_status=
 *                           -> 200 allowed / 429 (or deny_status) limited, for gateways
 *   DELETE /throttle/{key}  -> reset
 *
 * Both checks answer the same JSON and the same headers: Retry-After (when
 * limited and the request can ever fit), the legacy RateLimit-Limit /
 * -Remaining / -Reset trio, and the IETF draft's RateLimit-Policy and
 * RateLimit ("q" the limit over "w" seconds, "r" remaining, "t" seconds to
 * full reset).
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/routes.h"
#include "core/gcra.h"
#include "core/throttle.h"

#define THROTTLE_MAX_PERIOD_S 2305843009LL   /* 2^61 ns: see GCRA_MAX_TAU_NS */
#define THROTTLE_POLICY_NAME "default"        /* policy name in the draft headers */

typedef struct throttle_req {
    const char *key;
    size_t klen;
    gcra_params_t p;
    int64_t quantity;
} throttle_req_t;

/* Runs one GCRA decision against the keyspace, storing the new TAT when
 * allowed.  Returns false with an error response set. */
static bool throttle_run(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const throttle_req_t *t,
                         rl_result_t *r)
{
    ks_t *ks = srv->ks;
    ks_key_t k = ks_key(ks, t->key, t->klen);
    if (t->quantity > 0 && !api_make_room(srv, req, resp))
        return false;

    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(ks, &k, api_now_ms(req));
    if (e && ks_entry_type(e) != &throttle_type) {
        ks_shard_unlock(sh);
        api_wrongtype(resp, e, "throttle");
        return false;
    }
    int64_t tat = e ? throttle_gcra_tat(ks_entry_value(e)) : -1;
    int64_t store;
    gcra_update(&t->p, tat, req->now_ns, t->quantity, r, &store);
    if (store >= 0) {
        if (e) {
            ks_entry_prepare_write(ks, e);
            throttle_gcra_set_tat(ks_entry_value(e), store);
        } else {
            throttle_t *v = throttle_new_gcra(store);
            e = v ? ks_add(ks, &k, &throttle_type, v, KS_NO_EXPIRY, api_now_ms(req)) : NULL;
            if (!e) {
                throttle_free(v);
                ks_shard_unlock(sh);
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the limiter");
                return false;
            }
        }
        /* the key disappears when its TAT is reached */
        ks_entry_set_expire(ks, e, rl_ceil_div(store, NS_PER_MS));
        api_journal(srv, req, resp);
    }
    ks_shard_unlock(sh);
    return true;
}

static void throttle_answer(api_resp_t *resp, int status, const rl_result_t *r, const gcra_params_t *p)
{
    int64_t retry_s = r->allowed ? RL_NEVER : rl_ceil_div(r->retry_after_ns, NS_PER_SEC);
    int64_t retry_ms = r->allowed ? RL_NEVER : rl_ceil_div(r->retry_after_ns, NS_PER_MS);
    int64_t reset_s = rl_ceil_div(r->reset_after_ns, NS_PER_SEC);
    int64_t reset_ms = rl_ceil_div(r->reset_after_ns, NS_PER_MS);
    int64_t window_s = rl_ceil_div(p->period_ns / p->count * r->limit, NS_PER_SEC);

    char body[256];
    int n = snprintf(body, sizeof(body),
                     "{\"allowed\":%s,\"limit\":%lld,\"remaining\":%lld,\"retry_after\":%lld,"
                     "\"reset_after\":%lld,\"retry_after_ms\":%lld,\"reset_after_ms\":%lld}",
                     r->allowed ? "true" : "false", (long long)r->limit, (long long)r->remaining,
                     (long long)retry_s, (long long)reset_s, (long long)retry_ms, (long long)reset_ms);
    api_body(resp, status, NULL, body, (size_t)n);
    api_add_header(resp, "RateLimit-Limit", "%lld", (long long)r->limit);
    api_add_header(resp, "RateLimit-Remaining", "%lld", (long long)r->remaining);
    api_add_header(resp, "RateLimit-Reset", "%lld", (long long)reset_s);
    api_add_header(resp, "RateLimit-Policy", "\"%s\";q=%lld;w=%lld", THROTTLE_POLICY_NAME,
                   (long long)r->limit, (long long)window_s);
    api_add_header(resp, "RateLimit", "\"%s\";r=%lld;t=%lld", THROTTLE_POLICY_NAME, (long long)r->remaining,
                   (long long)reset_s);
    if (!r->allowed && retry_s >= 0)
        api_add_header(resp, "Retry-After", "%lld", (long long)retry_s);
}

static bool check_params(api_resp_t *resp, throttle_req_t *t, int64_t period_s)
{
    t->p.period_ns = period_s * NS_PER_SEC;
    const char *field;
    const char *why = gcra_validate(&t->p, &field);
    if (why) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' %s", field, why);
        return false;
    }
    return true;
}

void h_throttle_post(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "key", "max_burst", "count_per_period", "period", "quantity", NULL };
    json_t *body = api_body_object(req, resp, fields);
    if (!body)
        return;
    throttle_req_t t = { .quantity = 1 };
    int64_t period_s;
    if (!api_obj_key(resp, body, "key", true, &t.key, &t.klen) ||
        !api_obj_int(resp, body, "max_burst", true, 0, INT64_MAX, &t.p.max_burst, NULL) ||
        !api_obj_int(resp, body, "count_per_period", true, 1, INT64_MAX, &t.p.count, NULL) ||
        !api_obj_int(resp, body, "period", true, 1, THROTTLE_MAX_PERIOD_S, &period_s, NULL) ||
        !api_obj_int(resp, body, "quantity", false, 0, INT64_MAX, &t.quantity, NULL) ||
        !check_params(resp, &t, period_s))
        return;
    rl_result_t r;
    if (throttle_run(srv, req, resp, &t, &r))
        throttle_answer(resp, 200, &r, &t.p);
}

void h_throttle_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "max_burst", "count_per_period", "period", "quantity", "deny_status",
                                          NULL };
    throttle_req_t t = { .quantity = 1 };
    int64_t period_s, deny = 429;
    if (!api_path_key(req, resp, &t.key, &t.klen) || !api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "max_burst", true, 0, INT64_MAX, &t.p.max_burst, NULL) ||
        !api_query_int(req, resp, "count_per_period", true, 1, INT64_MAX, &t.p.count, NULL) ||
        !api_query_int(req, resp, "period", true, 1, THROTTLE_MAX_PERIOD_S, &period_s, NULL) ||
        !api_query_int(req, resp, "quantity", false, 0, INT64_MAX, &t.quantity, NULL) ||
        !api_query_int(req, resp, "deny_status", false, 400, 499, &deny, NULL) ||
        !check_params(resp, &t, period_s))
        return;
    rl_result_t r;
    if (throttle_run(srv, req, resp, &t, &r))
        throttle_answer(resp, r.allowed ? 200 : (int)deny, &r, &t.p);
}

void h_throttle_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, (const char *const[]){ NULL }))
        return;
    ks_t *ks = srv->ks;
    ks_key_t k = ks_key(ks, key, klen);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(ks, &k, api_now_ms(req));
    if (e && ks_entry_type(e) != &throttle_type) {
        ks_shard_unlock(sh);
        api_wrongtype(resp, e, "throttle");
        return;
    }
    if (e) {
        ks_entry_delete(ks, e);
        api_journal(srv, req, resp);
    }
    ks_shard_unlock(sh);
    api_json(resp, 200, json_pack("{s:b}", "deleted", e != NULL));
}
