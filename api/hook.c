/*
 * hook.c - ANY /hook/{policy}/...: the gateway hook.
 *
 * A gateway asks before forwarding a request; the policy names the limit and
 * builds the key from what the gateway sends (see api/ratelimit.h):
 *
 *   nginx auth_request    subrequest to /hook/{policy}$request_uri (method of the
 *                         original, no body); 2xx allows, 401/403 deny, anything
 *                         else is an error (500) - so use "deny_status": 403 and
 *                         map it to 429 with error_page (deploy/gateways/nginx).
 *   Envoy ext_authz       HTTP service with path_prefix /hook/{policy}: the original
 *                         method and path appended, Host, Authorization and the
 *                         allowed_headers; any non-200 answer goes to the client
 *                         with its headers.
 *   Traefik ForwardAuth   GET to /hook/{policy} with the original headers plus
 *                         X-Forwarded-Method/-Proto/-Host/-Uri/-For; non-2xx answers
 *                         go to the client unchanged.
 *
 * Answers: allowed (or shadow) -> 200; limited -> the policy's deny_status
 * (429 by default) with Retry-After; both with the RateLimit headers and the
 * decision as JSON.  Errors keep their own statuses (400 for a request the
 * template cannot key, 404 for an unknown policy, 5xx), which no policy may
 * use as its deny status: an error is never mistaken for "limited".
 *
 * A concurrency policy ("algorithm": "concurrency") acquires a lease on the
 * key instead (200 with X-Tally-Lease, deny_status when full), and releases
 * the lease a request's X-Tally-Release names (api/lease.c, rl_lease_hook):
 * the gateway sends the same request again once the response is done.
 *
 * The hook's query string and body belong to the client's request: they are
 * ignored.  The decision is the policy's algorithm's operation
 * (cmd/throttle.h), whose journal record holds the resolved key and
 * parameters.
 */
#include <string.h>

#include "api/pattern.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/ratelimit.h"
#include "cmd/throttle.h"

/* The raw path after /hook/{policy}, starting with '/', or "/" when none. */
static const char *path_rest(const api_req_t *req, size_t *len)
{
    const char *p = req->path, *end = req->path + req->path_len;
    int slashes = 0;
    while (p < end) {
        if (*p == '/' && ++slashes == 3)
            break;
        p++;
    }
    if (p >= end) {
        *len = 1;
        return "/";
    }
    *len = (size_t)(end - p);
    return p;
}

static void h_hook(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    size_t nlen;
    const char *name = api_path_param(req, "policy", &nlen);
    if (!name) {
        api_error(resp, API_E_INTERNAL, "route has no {policy}");
        return;
    }
    policies_read_lock(srv->policies);
    const policy_t *p = policy_find(srv->policies, name);
    if (!p) {
        policies_read_unlock(srv->policies);
        api_error_field(resp, API_E_NOT_FOUND, "policy", "no policy named '%s'%s", name,
                        srv->policies ? "" : " (no policies file is loaded: tallyd --config FILE)");
        return;
    }
    size_t rlen;
    const char *rest = path_rest(req, &rlen);
    if (rl_is_concurrency(&p->params)) {
        rl_lease_hook(srv, req, resp, p, rest, rlen);
        policies_read_unlock(srv->policies);
        return;
    }
    char key[KS_KEY_MAX + 1];
    rl_item_t it;
    api_err_t e;
    bool all;
    if (!rl_item_of_policy(p, req, rest, rlen, key, &it, &e))
        api_err_respond(resp, &e);
    else if (rl_run(srv, req, resp, &it, 1, false, &all))
        rl_answer(resp, all ? 200 : p->deny_status, &it);
    rl_item_release(&it);
    policies_read_unlock(srv->policies);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    /* the policy's decision operation, whichever: CL.THROTTLE's access and flags (cmd/throttle.h) */
    { API_ANY,    "/hook/{policy}/{path...}", h_hook, API_ROUTE_GATEWAY, API_BY(CMD_CL_THROTTLE) },
};

API_FAMILY(hook);
