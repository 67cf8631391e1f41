/*
 * limiter.c - what /throttle and /hook share over HTTP: an item (key,
 * algorithm and parameters, or a named policy) parsed from JSON or a query
 * and resolved - a policy's parameters, shadow mode and key - into the
 * typed arguments of a decision (cmd/throttle.h: one key, or a batch that
 * is all or nothing, whose journal records hold what was resolved, never
 * the policy), the policies' metrics, and the answer with its headers:
 * Retry-After, the legacy RateLimit-Limit / -Remaining / -Reset trio, and
 * the IETF draft's RateLimit-Policy and RateLimit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/json_out.h"
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/ratelimit.h"
#include "cmd/override.h"
#include "cmd/throttle.h"

#define DEFAULT_POLICY_NAME "default"   /* name in the draft headers without a policy */

static const char *const item_fields[] = { "key", "policy", "algorithm", "max_burst", "count_per_period", "period",
                                           "max_count", "capacity", "refill_rate", "quantity", "shadow",
                                           "calendar", "time_zone", "week_start", "anchor_day", NULL };

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */
/* ------------------------------------------------------------------------ */

void rl_item_release(rl_item_t *it)
{
    free(it->key_buf);
    it->key_buf = NULL;
}

bool rl_item_key(rl_item_t *it, const char *prefix, size_t plen, const char *key, size_t klen, api_err_t *err)
{
    const char *why;
    if (!api_key_ok(key, klen, &why)) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "key %s", why);
        return false;
    }
    if (plen == 0) {
        it->key = key;
        it->klen = klen;
        return true;
    }
    if (klen > KS_KEY_MAX - plen) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "key with the policy's prefix '%s' is longer than %d bytes", prefix,
                   KS_KEY_MAX);
        return false;
    }
    it->key_buf = malloc(plen + klen + 1);
    if (!it->key_buf) {
        api_err_set(err, API_E_OUT_OF_MEMORY, NULL, "out of memory");
        return false;
    }
    memcpy(it->key_buf, prefix, plen);
    memcpy(it->key_buf + plen, key, klen);
    it->key_buf[plen + klen] = '\0';
    it->key = it->key_buf;
    it->klen = plen + klen;
    return true;
}

/* The limits of the item's tenant (its key after the policy's prefix): the
 * live override stored through the API, else the file's, else the
 * policy's (policy_limits). */
static void resolve_limits(const policy_t *p, const api_req_t *req, rl_item_t *it)
{
    const char *tenant = it->key + p->prefix_len;
    size_t tlen = it->klen - p->prefix_len;
    throttle_params_t live;
    bool has = req && req->ctx && override_maps_alive() &&
               cmd_override_lookup(req->ctx->srv, p->name, tenant, tlen, policy_override_text, NULL, &live,
                                   cmd_now_ms(req->ctx)) == 1;
    it->limit = policy_limits(p, tenant, tlen, has ? &live : NULL, &it->p);
}

/* The policy's part of an item: its parameters and shadow mode, and the key
 * - `key` with the policy's prefix when given, else built by the policy's
 * template from the request (`rest` as for policy_key) into `room`
 * (KS_KEY_MAX + 1 bytes), or into storage of the item's own if NULL. */
static bool item_of_policy(const policy_t *p, const api_req_t *req, const char *key, size_t klen, const char *rest,
                           size_t rest_len, char *room, rl_item_t *it, api_err_t *err)
{
    it->policy = p;
    it->p = p->params;
    it->shadow = p->shadow;
    if (key) {
        if (!rl_item_key(it, p->prefix, p->prefix_len, key, klen, err))
            return false;
        resolve_limits(p, req, it);
        return true;
    }
    if (!room) {
        room = it->key_buf = malloc(KS_KEY_MAX + 1);
        if (!room) {
            api_err_set(err, API_E_OUT_OF_MEMORY, NULL, "out of memory");
            return false;
        }
    }
    if (!policy_key(p, req, rest, rest_len, room, &it->klen, err))
        return false;
    const char *why;
    if (!api_key_ok(room, it->klen, &why)) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "the key policy '%s' built from the request %s", p->name, why);
        return false;
    }
    it->key = room;
    resolve_limits(p, req, it);
    return true;
}

bool rl_item_of_policy(const policy_t *p, const api_req_t *req, const char *rest, size_t rest_len, char *room,
                       rl_item_t *it, api_err_t *err)
{
    memset(it, 0, sizeof(*it));
    it->quantity = 1;
    return item_of_policy(p, req, NULL, 0, rest, rest_len, room, it, err);
}

/* rl_item_parse; `named` false when the caller knows that f names no
 * policy (its lookup is then skipped). */
static bool item_parse(api_server_t *srv, const api_req_t *req, const api_fields_t *f, const char *path_key,
                       size_t path_klen, const char *rest, size_t rest_len, bool fields_checked, bool named,
                       rl_item_t *it, api_err_t *err)
{
    memset(it, 0, sizeof(*it));
    it->quantity = 1;
    const char *name;
    api_fields_iter_t iter = { 0 };
    if (!fields_checked)
        while ((name = api_fields_next(f, &iter)))
            if (!api_name_listed(item_fields, name)) {
                api_err_set(err, API_E_BAD_REQUEST, name, "unknown field '%s'", name);
                return false;
            }
    api_field_t v;
    if (api_fields_get(f, "quantity", &v)) {
        if (v.type != API_F_INT || v.i < 0) {
            api_err_set(err, API_E_BAD_REQUEST, "quantity", "'quantity' must be an integer >= 0");
            return false;
        }
        it->quantity = v.i;
    }
    api_field_t key;
    bool has_key = api_fields_get(f, "key", &key);
    if (has_key && key.type != API_F_STRING) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "'key' must be a string");
        return false;
    }
    if (named && api_fields_get(f, "policy", &v)) {
        if (v.type != API_F_STRING) {
            api_err_set(err, API_E_BAD_REQUEST, "policy", "'policy' must be a string");
            return false;
        }
        const policy_t *p = policy_find(srv->policies, v.s);
        if (!p) {
            api_err_set(err, API_E_BAD_REQUEST, "policy", "unknown policy '%s'%s", v.s,
                       srv->policies ? "" : " (no policies file is loaded: tallyd --config FILE)");
            return false;
        }
        if (rl_is_concurrency(&p->params)) {
            api_err_set(err, API_E_BAD_REQUEST, "policy",
                        "policy '%s' is a concurrency policy: its hook (/hook/%s/...) acquires and releases leases, "
                        "/lease/{key} too; it makes no rate decisions",
                        p->name, p->name);
            return false;
        }
        iter = (api_fields_iter_t){ 0 };
        while ((name = api_fields_next(f, &iter)))
            if (rl_is_param_name(name) || !strcmp(name, "algorithm") || !strcmp(name, "shadow")) {
                api_err_set(err, API_E_BAD_REQUEST, name, "'%s' cannot be given with 'policy' (the policy sets it)",
                           name);
                return false;
            }
        return item_of_policy(p, req, path_key ? path_key : has_key ? key.s : NULL,
                              path_key ? path_klen : has_key ? key.len : 0, rest, rest_len, NULL, it, err);
    }
    if (!api_fields_bool(f, "shadow", &it->shadow, NULL, err))
        return false;
    if (!path_key && !has_key) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "missing field 'key'");
        return false;
    }
    if (!rl_params_parse(f, &it->p, err))
        return false;
    return rl_item_key(it, NULL, 0, path_key ? path_key : key.s, path_key ? path_klen : key.len, err);
}

bool rl_item_parse(api_server_t *srv, const api_req_t *req, const api_fields_t *f, const char *path_key,
                   size_t path_klen, const char *rest, size_t rest_len, bool fields_checked, rl_item_t *it,
                   api_err_t *err)
{
    return item_parse(srv, req, f, path_key, path_klen, rest, rest_len, fields_checked, true, it, err);
}

bool rl_item_parse_unnamed(const api_req_t *req, const api_fields_t *f, const char *path_key, size_t path_klen,
                           rl_item_t *it, api_err_t *err)
{
    return item_parse(NULL, req, f, path_key, path_klen, NULL, 0, true, false, it, err);
}

bool rl_fields_name(const api_fields_t *f, bool *policy, bool *requests)
{
    *policy = *requests = false;
    if (f->kind != API_FIELDS_FLAT)
        return false;
    for (int i = 0; i < f->flat->n; i++) {
        const char *n = f->flat->m[i].name;   /* compared byte by byte: no call, most differ at once */
        if (n[0] == 'p' && n[1] == 'o' && n[2] == 'l' && n[3] == 'i' && n[4] == 'c' && n[5] == 'y' && !n[6])
            *policy = true;
        else if (n[0] == 'r' && n[1] == 'e' && n[2] == 'q' && n[3] == 'u' && n[4] == 'e' && n[5] == 's' &&
                 n[6] == 't' && n[7] == 's' && !n[8])
            *requests = true;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* The decisions: operations of the command table (cmd/throttle.h)          */
/* ------------------------------------------------------------------------ */

static void count_metrics(const api_req_t *req, const rl_item_t *items, size_t n)
{
    if (req->replay)
        return;
    for (size_t i = 0; i < n; i++)
        if (items[i].policy)
            policy_count(items[i].policy, items[i].limit, items[i].r.allowed ? POLICY_ALLOWED
                                          : items[i].shadow  ? POLICY_SHADOW_LIMITED
                                                             : POLICY_LIMITED);
}

/* The item as its operation takes it: key, parameters and shadow mode
 * resolved, whatever the front-end read them from. */
static cmd_throttle_item_t cmd_item(const rl_item_t *it)
{
    cmd_throttle_item_t c = { .key = it->key, .klen = it->klen, .p = it->p, .quantity = it->quantity,
                              .shadow = it->shadow };
    return c;
}

/* Which limit said no: the policy (DEFAULT_POLICY_NAME for a request's own
 * parameters) and its limit ("default", "file-override", "override";
 * "request" for a request's own parameters). */
static bool refused(const rl_item_t *it) { return !it->r.allowed && !it->shadow; }
static const char *policy_of(const rl_item_t *it) { return it->policy ? it->policy->name : DEFAULT_POLICY_NAME; }
static const char *limit_of(const rl_item_t *it) { return it->policy ? policy_limit_name(it->limit) : "request"; }

/* The client asks for RFC 9457 problem details (Accept names the type). */
static bool wants_problem(const api_req_t *req)
{
    const char *a = req->header ? req->header(req->hctx, "Accept") : NULL;
    return a && strcasestr(a, "application/problem+json");
}

/* The refusal's limits for the access log: "policy/limit,..." (what fits). */
static void note_violated(api_resp_t *resp, const rl_item_t *items, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (!refused(&items[i]))
            continue;
        int w = snprintf(resp->violated + at, sizeof(resp->violated) - at, "%s%s/%s", at ? "," : "",
                         policy_of(&items[i]), limit_of(&items[i]));
        if (w < 0 || (size_t)w >= sizeof(resp->violated) - at) {
            resp->violated[at] = '\0';
            break;
        }
        at += (size_t)w;
    }
}

bool rl_run(api_server_t *srv, const api_req_t *req, api_resp_t *resp, rl_item_t *items, size_t n, bool batch,
            bool *all_allowed)
{
    (void)srv;
    bool ok;
    if (n == 1 && !batch) {
        cmd_throttle_item_t a = cmd_item(&items[0]);
        cmd_throttle_res_t r;
        ok = cmd_call(req->ctx, cmd_throttle_def(a.p.algo), &a, &r);
        if (ok)
            items[0].r = r.r;
        *all_allowed = ok && (r.r.allowed || items[0].shadow);
    } else {
        /* the items and their decisions in one block */
        cmd_throttle_item_t *a = malloc(n * (sizeof(*a) + sizeof(rl_result_t)));
        if (!a) {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            return false;
        }
        rl_result_t *rs = (rl_result_t *)(a + n);
        for (size_t i = 0; i < n; i++)
            a[i] = cmd_item(&items[i]);
        cmd_throttle_batch_args_t args = { .items = a, .n = n, .results = rs };
        cmd_throttle_batch_res_t r;
        ok = cmd_call(req->ctx, &CMD_THROTTLE_BATCH, &args, &r);
        if (ok)
            for (size_t i = 0; i < n; i++)
                items[i].r = rs[i];
        *all_allowed = ok && r.all;
        free(a);
    }
    if (!api_cmd_answered(req, resp, ok))
        return false;
    count_metrics(req, items, n);
    if (!*all_allowed) {
        bool problem = wants_problem(req);
        for (size_t i = 0; i < n; i++)
            items[i].problem = problem;
        note_violated(resp, items, n);
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Answers                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct secs {
    int64_t retry_s, retry_ms, reset_s, reset_ms;
} secs_t;

static secs_t secs_of(const rl_result_t *r, bool allowed)
{
    secs_t s;
    s.retry_s = allowed ? RL_NEVER : rl_ceil_div(r->retry_after_ns, NS_PER_SEC);
    s.retry_ms = allowed ? RL_NEVER : rl_ceil_div(r->retry_after_ns, NS_PER_MS);
    s.reset_s = rl_ceil_div(r->reset_after_ns, NS_PER_SEC);
    s.reset_ms = rl_ceil_div(r->reset_after_ns, NS_PER_MS);
    return s;
}

/* Formatting without printf: these run on every gateway request. */
static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* Appends a header whose value the caller writes (at most 191 bytes). */
static char *header_start(api_resp_t *resp, const char *name)
{
    if (resp->nheaders == API_MAX_HEADERS)
        return NULL;
    api_header_t *h = &resp->headers[resp->nheaders++];
    h->name = name;
    return h->value;
}

/* A number formatted once and copied wherever the answer repeats it: the
 * limit, the remaining count and the reset are each in the body and twice
 * in the headers. */
typedef struct num {
    char s[API_I64_TEXT];
    size_t n;
} num_t;

static num_t num_of(int64_t v)
{
    num_t x;
    x.n = (size_t)(api_format_i64(x.s, v) - x.s);
    return x;
}

/* Needs the room api_format_i64 needs (API_I64_TEXT bytes at p): the copy
 * is of the whole buffer, a fixed size the compiler inlines. */
static char *put_num(char *p, const num_t *x)
{
    memcpy(p, x->s, sizeof(x->s));
    return p + x->n;
}

static void header_num(api_resp_t *resp, const char *name, const num_t *x)
{
    char *p = header_start(resp, name);
    if (p)
        *put_num(p, x) = '\0';
}

/* "name";<k1><v1><k2><v2> (policy names are short: POLICY_NAME_MAX). */
static void header_draft(api_resp_t *resp, const char *hname, const char *policy, const char *k1, const num_t *v1,
                         const char *k2, const num_t *v2)
{
    char *p = header_start(resp, hname);
    if (!p)
        return;
    *p++ = '"';
    p = put_str(p, policy);
    *p++ = '"';
    p = put_str(p, k1);
    p = put_num(p, v1);
    p = put_str(p, k2);
    *put_num(p, v2) = '\0';
}

/* What an answer repeats of a decision, each number formatted once. */
typedef struct nums {
    secs_t s;
    num_t limit, remaining, reset_s;
} nums_t;

static nums_t nums_of(const rl_result_t *r, bool allowed)
{
    nums_t x;
    x.s = secs_of(r, allowed);
    x.limit = num_of(r->limit);
    x.remaining = num_of(r->remaining);
    x.reset_s = num_of(x.s.reset_s);
    return x;
}

static void add_headers(api_resp_t *resp, const rl_item_t *it, bool allowed, const nums_t *x)
{
    const char *name = it->policy ? it->policy->name : DEFAULT_POLICY_NAME;
    num_t window_s = num_of(rl_ceil_div(throttle_window_ns(&it->p), NS_PER_SEC));
    header_num(resp, "RateLimit-Limit", &x->limit);
    header_num(resp, "RateLimit-Remaining", &x->remaining);
    header_num(resp, "RateLimit-Reset", &x->reset_s);
    header_draft(resp, "RateLimit-Policy", name, ";q=", &x->limit, ";w=", &window_s);
    header_draft(resp, "RateLimit", name, ";r=", &x->remaining, ";t=", &x->reset_s);
    if (!allowed && x->s.retry_s >= 0) {
        num_t retry = num_of(x->s.retry_s);
        header_num(resp, "Retry-After", &retry);
    }
}

/* RFC 9457 problem details of a refusal, per draft-ietf-httpapi-ratelimit-headers
 * (section "Problem Types", "Quota Exceeded"): its type URI and the
 * extension member "violated-policies", the names of the policies whose
 * quota was exceeded. */
#define PROBLEM_TYPE "https://iana.org/assignments/http-problem-types#quota-exceeded"
#define PROBLEM_TITLE "Request cannot be satisfied as assigned quota has been exceeded"
#define PROBLEM_CTYPE "application/problem+json"

/* {"policy":"...","limit":"..."} (names of [A-Za-z0-9_.-]: nothing to escape). */
static char *put_violation(char *p, const rl_item_t *it)
{
    p = put_str(p, "{\"policy\":\"");
    p = put_str(p, policy_of(it));
    p = put_str(p, "\",\"limit\":\"");
    p = put_str(p, limit_of(it));
    return put_str(p, "\"}");
}

void rl_answer(api_resp_t *resp, int status, const rl_item_t *it)
{
    const rl_result_t *r = &it->r;
    bool allowed = r->allowed || it->shadow;
    nums_t x = nums_of(r, allowed);
    bool problem = !allowed && it->problem && status >= 400;   /* POST /throttle answers a refusal with 200 */
    char body[1024], *p = body;   /* the longest: problem details, 64-byte names, 20-digit numbers: ~750 */
    if (problem) {
        num_t st = num_of(status);
        p = put_str(p, "{\"type\":\"" PROBLEM_TYPE "\",\"title\":\"" PROBLEM_TITLE "\",\"status\":");
        p = put_num(p, &st);
        p = put_str(p, ",\"violated-policies\":[\"");
        p = put_str(p, policy_of(it));
        p = put_str(p, "\"],");
        p = put_str(p, "\"allowed\":false,\"limit\":");
    } else {
        p = put_str(p, allowed ? "{\"allowed\":true,\"limit\":" : "{\"allowed\":false,\"limit\":");
    }
    p = put_num(p, &x.limit);
    p = put_str(p, ",\"remaining\":");
    p = put_num(p, &x.remaining);
    p = put_str(p, ",\"retry_after\":");
    p = api_format_i64(p, x.s.retry_s);
    p = put_str(p, ",\"reset_after\":");
    p = put_num(p, &x.reset_s);
    p = put_str(p, ",\"retry_after_ms\":");
    p = api_format_i64(p, x.s.retry_ms);
    p = put_str(p, ",\"reset_after_ms\":");
    p = api_format_i64(p, x.s.reset_ms);
    if (it->policy) {
        p = put_str(p, ",\"policy\":\"");
        p = put_str(p, it->policy->name);   /* [A-Za-z0-9_.-]: nothing to escape */
        *p++ = '"';
    }
    if (it->shadow && !r->allowed)
        p = put_str(p, ",\"shadow_limited\":true");
    if (!allowed) {
        p = put_str(p, ",\"violated\":[");
        p = put_violation(p, it);
        *p++ = ']';
    }
    *p++ = '}';
    api_body(resp, status, problem ? PROBLEM_CTYPE : NULL, body, (size_t)(p - body));
    add_headers(resp, it, allowed, &x);
}

static json_t *result_json(const rl_item_t *it, bool with_key)
{
    bool allowed = it->r.allowed || it->shadow;
    secs_t s = secs_of(&it->r, allowed);
    json_t *o = json_object();
    if (with_key)
        json_object_set_new(o, "key", json_stringn(it->key, it->klen));
    if (it->policy)
        json_object_set_new(o, "policy", json_string(it->policy->name));
    json_object_set_new(o, "allowed", json_boolean(allowed));
    json_object_set_new(o, "limit", json_integer(it->r.limit));
    json_object_set_new(o, "remaining", json_integer(it->r.remaining));
    json_object_set_new(o, "retry_after", json_integer(s.retry_s));
    json_object_set_new(o, "reset_after", json_integer(s.reset_s));
    json_object_set_new(o, "retry_after_ms", json_integer(s.retry_ms));
    json_object_set_new(o, "reset_after_ms", json_integer(s.reset_ms));
    if (it->shadow && !it->r.allowed)
        json_object_set_new(o, "shadow_limited", json_true());
    if (refused(it))
        json_object_set_new(o, "violated",
                            json_pack("[{s:s, s:s}]", "policy", policy_of(it), "limit", limit_of(it)));
    return o;
}

/* The item that speaks for a batch: when refused, the limited item that
 * frees up last (one that can never fit first); when allowed, the one with
 * the fewest remaining. */
static const rl_item_t *deciding_item(const rl_item_t *items, size_t n, bool all)
{
    const rl_item_t *best = NULL;
    for (size_t i = 0; i < n; i++) {
        const rl_item_t *it = &items[i];
        if (!all) {
            if (it->r.allowed || it->shadow)
                continue;
            if (!best || (best->r.retry_after_ns != RL_NEVER &&
                          (it->r.retry_after_ns == RL_NEVER || it->r.retry_after_ns > best->r.retry_after_ns)))
                best = it;
        } else if (!best || it->r.remaining < best->r.remaining) {
            best = it;
        }
    }
    return best ? best : &items[0];
}

void rl_answer_batch(api_resp_t *resp, const rl_item_t *items, size_t n, bool all)
{
    const rl_item_t *d = deciding_item(items, n, all);
    json_t *o = result_json(d, false);
    json_object_del(o, "policy");
    json_object_del(o, "shadow_limited");
    json_object_set_new(o, "allowed", json_boolean(all));
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, result_json(&items[i], true));
    json_object_set_new(o, "results", arr);
    if (!all) {
        /* a batch answers 200 whatever it decided: its refusal is no
         * problem-details error, but names what refused all the same */
        json_t *v = json_array();
        for (size_t i = 0; i < n; i++)
            if (refused(&items[i]))
                json_array_append_new(v, json_pack("{s:s, s:s}", "policy", policy_of(&items[i]), "limit",
                                                   limit_of(&items[i])));
        json_object_set_new(o, "violated", v);
    }
    api_json(resp, 200, o);
    if (resp->status == 200) {
        rl_item_t shown = *d;
        shown.shadow = false;
        shown.r.allowed = all;
        nums_t x = nums_of(&shown.r, all);
        add_headers(resp, &shown, all, &x);
    }
}
