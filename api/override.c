/*
 * override.c - live per-tenant overrides of a policy's limits over HTTP
 * (admin scope; the operations: cmd/override.h).
 *
 *   PUT    /policies/{policy}/overrides/{tenant}  {limits}  -> {"policy","tenant","limits","created"}
 *   GET    /policies/{policy}/overrides/{tenant}            -> {"policy","tenant","limits","applies"} or 404
 *   GET    /policies/{policy}/overrides[?after=T&limit=N]   -> {"policy","overrides":[{"tenant","limits"}],
 *                                                               "total","next"}
 *   DELETE /policies/{policy}/overrides/{tenant}            -> {"deleted":true|false}
 *
 * {limits} is the policies file's form of a policy's limits: "algorithm"
 * (optional; it must be the policy's: a key keeps the algorithm that made
 * it) and that algorithm's parameters.  A tenant is what the policy's key
 * template gives for a request (the key after the policy's prefix).  The
 * stored text is the checked object in canonical JSON (keys sorted,
 * "algorithm" filled in), so replay and replicas need no policies file;
 * the policy must exist when an override is set (404 otherwise), and one
 * whose algorithm a later reload changed is kept but does not apply
 * ("applies": false) until it is set again or deleted.
 */
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/pattern.h"
#include "api/ratelimit.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "cmd/override.h"

#define LIST_DEFAULT_LIMIT 100

typedef struct target {
    const char *policy;
    char key[sizeof(OVERRIDE_KEY_PREFIX) + POLICY_NAME_MAX + 1];
    size_t klen;
    const char *tenant;
    size_t tlen;
} target_t;

/* The path's policy (which must be loaded: read-locked by the caller) and
 * tenant (when the route has one). */
static const policy_t *target_of(api_server_t *srv, const api_req_t *req, api_resp_t *resp, bool with_tenant,
                                 target_t *t)
{
    size_t plen;
    t->policy = api_path_param(req, "policy", &plen);
    if (!t->policy) {
        api_error(resp, API_E_INTERNAL, "route has no {policy}");
        return NULL;
    }
    const policy_t *p = policy_find(srv->policies, t->policy);
    if (!p) {
        api_error_field(resp, API_E_NOT_FOUND, "policy", "no policy named '%s'%s", t->policy,
                        srv->policies ? "" : " (no policies file is loaded: tallyd --config FILE)");
        return NULL;
    }
    t->klen = cmd_override_key(p->name, t->key, sizeof(t->key));
    if (with_tenant) {
        t->tenant = api_path_param(req, "tenant", &t->tlen);
        if (!t->tenant || t->tlen == 0 || t->tlen > OVERRIDE_TENANT_MAX) {
            api_error_field(resp, API_E_BAD_REQUEST, "tenant", "a tenant is 1 to %d bytes", OVERRIDE_TENANT_MAX);
            return NULL;
        }
        const char *why;
        if (!api_key_ok(t->tenant, t->tlen, &why)) {
            api_error_field(resp, API_E_BAD_REQUEST, "tenant", "tenant %s", why);
            return NULL;
        }
        if (t->tlen > KS_KEY_MAX - p->prefix_len) {
            api_error_field(resp, API_E_BAD_REQUEST, "tenant", "tenant with the policy's prefix is longer than %d bytes",
                            KS_KEY_MAX);
            return NULL;
        }
    }
    return p;
}

/* The stored text as an object (NULL for text no API wrote: cannot happen). */
static json_t *limits_json(const char *s, size_t n)
{
    return json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
}

static bool applies(const policy_t *p, const char *s, size_t n)
{
    throttle_params_t live, tp;
    return policy_override_text(s, n, &live, NULL) && policy_limits(p, "", 0, &live, &tp) == POLICY_LIMIT_API;
}

static void h_override_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    policies_read_lock(srv->policies);
    target_t t;
    const policy_t *p = target_of(srv, req, resp, true, &t);
    /* members checked by policy_override_parse: the policies file's (rl_params_parse) */
    json_t *body = p ? api_body_object(req, resp, NULL) : NULL;
    if (!body)
        goto out;
    throttle_params_t tp;
    api_err_t e;
    if (!policy_override_parse(p, body, &tp, &e)) {
        api_err_respond(resp, &e);
        goto out;
    }
    char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    cmd_override_set_args_t a = { .key = t.key, .klen = t.klen, .tenant = t.tenant, .tlen = t.tlen, .limits = text,
                                  .llen = strlen(text) };
    cmd_override_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_OVERRIDE_SET, &a, &r))) {
        json_t *l = limits_json(text, a.llen);   /* the stored form: keys sorted */
        api_json(resp, r.existed ? 200 : 201,
                 json_pack("{s:s, s:s%, s:o, s:b}", "policy", p->name, "tenant", t.tenant, t.tlen, "limits",
                           l ? l : json_null(), "created", !r.existed));
    }
    free(text);
out:
    policies_read_unlock(srv->policies);
}

static void h_override_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    if (!api_no_query(req, resp))
        return;
    policies_read_lock(srv->policies);
    target_t t;
    const policy_t *p = target_of(srv, req, resp, true, &t);
    if (!p)
        goto out;
    char buf[OVERRIDE_LIMITS_MAX];
    cmd_override_key_args_t a = { .key = t.key, .klen = t.klen, .tenant = t.tenant, .tlen = t.tlen, .out = buf };
    cmd_override_res_t r;
    if (!api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_OVERRIDE_GET, &a, &r)))
        goto out;
    if (!r.existed) {
        api_error_field(resp, API_E_NOT_FOUND, "tenant", "policy '%s' has no override for this tenant", p->name);
        goto out;
    }
    json_t *l = limits_json(buf, r.llen);
    if (!l) {
        api_error(resp, API_E_INTERNAL, "the stored override does not read back");
        goto out;
    }
    api_json(resp, 200,
             json_pack("{s:s, s:s%, s:o, s:b}", "policy", p->name, "tenant", t.tenant, t.tlen, "limits", l, "applies",
                       applies(p, buf, r.llen)));
out:
    policies_read_unlock(srv->policies);
}

typedef struct list_ud {
    json_t *arr;
    const char *last;            /* the last tenant given (in the value: valid under the lock only) */
    size_t last_len;
    char *next;                  /* its copy */
} list_ud_t;

static void list_each(void *ud, const char *tenant, size_t tlen, const char *limits, size_t llen)
{
    list_ud_t *u = ud;
    json_t *l = limits_json(limits, llen);
    json_array_append_new(u->arr, json_pack("{s:s%, s:o}", "tenant", tenant, tlen, "limits", l ? l : json_null()));
    u->last = tenant;
    u->last_len = tlen;
}

static void h_override_list(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "after", "limit", NULL };
    int64_t limit = LIST_DEFAULT_LIMIT;
    if (!api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "limit", false, 1, OVERRIDE_LIST_MAX, &limit, NULL))
        return;
    policies_read_lock(srv->policies);
    target_t t;
    const policy_t *p = target_of(srv, req, resp, false, &t);
    if (!p)
        goto out;
    list_ud_t u = { .arr = json_array() };
    cmd_override_list_args_t a = { .key = t.key, .klen = t.klen, .count = (size_t)limit, .each = list_each, .ud = &u };
    a.after = api_query_get(req, "after", &a.alen);
    cmd_override_list_res_t r;
    bool ok = cmd_call(req->ctx, &CMD_OVERRIDE_LIST, &a, &r);
    if (!api_cmd_answered(req, resp, ok)) {
        json_decref(u.arr);
        goto out;
    }
    json_t *next = json_null();
    if (r.more && json_array_size(u.arr)) {
        json_t *lastobj = json_array_get(u.arr, json_array_size(u.arr) - 1);
        next = json_incref(json_object_get(lastobj, "tenant"));
    }
    api_json(resp, 200,
             json_pack("{s:s, s:o, s:I, s:o, s:I}", "policy", p->name, "overrides", u.arr, "total", (json_int_t)r.total,
                       "next", next, "file_overrides", (json_int_t)p->noverrides));
out:
    policies_read_unlock(srv->policies);
}

static void h_override_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    if (!api_no_query(req, resp))
        return;
    policies_read_lock(srv->policies);
    target_t t;
    const policy_t *p = target_of(srv, req, resp, true, &t);
    if (p) {
        cmd_override_key_args_t a = { .key = t.key, .klen = t.klen, .tenant = t.tenant, .tlen = t.tlen };
        cmd_override_res_t r;
        if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_OVERRIDE_DEL, &a, &r)))
            api_json(resp, 200, json_pack("{s:b}", "deleted", r.existed));
    }
    policies_read_unlock(srv->policies);
}

/* The family: its routes, in matching order. */
static const api_route_t routes[] = {
    { API_GET,    "/policies/{policy}/overrides",          h_override_list, 0, API_BY(CMD_OVERRIDE_LIST) },
    { API_PUT,    "/policies/{policy}/overrides/{tenant}", h_override_put, 0, API_BY(CMD_OVERRIDE_SET) },
    { API_GET,    "/policies/{policy}/overrides/{tenant}", h_override_get, 0, API_BY(CMD_OVERRIDE_GET) },
    { API_DELETE, "/policies/{policy}/overrides/{tenant}", h_override_delete, 0, API_BY(CMD_OVERRIDE_DEL) },
};

API_FAMILY(override);
