/*
 * repl.c - the replication routes (api/repl.h): parameters checked here,
 * the work done by the service's hooks on a thread of their own, since a
 * snapshot takes time and a log poll waits for records.
 */
#include <stdlib.h>
#include <string.h>

#include "api/repl.h"
#include "core/persist_fmt.h"

/* Runs on a server thread: the call is the handler's deferred_arg. */
static void repl_job(api_server_t *srv, api_resp_t *resp)
{
    api_repl_call_t *call = resp->deferred_arg;
    resp->deferred_arg = NULL;
    srv->admin->repl_run(srv->admin->ud, call, resp);
    free(call);
}

/* Common start of every route: no replication here, or replay (the
 * routes change nothing journaled) → false with resp set. */
static api_repl_call_t *call_new(api_server_t *srv, const api_req_t *req, api_resp_t *resp, api_repl_op_t op)
{
    if (req->replay)
        return NULL;
    if (!srv->admin || !srv->admin->repl_run) {
        api_error(resp, API_E_UNAVAILABLE, "replication needs a data directory (this tallyd runs --in-memory)");
        return NULL;
    }
    api_repl_call_t *c = calloc(1, sizeof(*c));
    if (!c) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    c->op = op;
    return c;
}

static void call_defer(api_resp_t *resp, api_repl_call_t *c)
{
    resp->deferred = repl_job;
    resp->deferred_arg = c;
}

/* Copies optional query parameter `name` into out (NUL-terminated); 400
 * when it is repeated or too long. */
static bool copy_param(const api_req_t *req, api_resp_t *resp, const char *name, bool required, char *out, size_t n)
{
    const char *v;
    size_t len;
    if (!api_query_string(req, resp, name, required, &v, &len))
        return false;
    if (!v)
        return true;
    if (len >= n) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "%s is longer than %zu bytes", name, n - 1);
        return false;
    }
    memcpy(out, v, len);
    out[len] = '\0';
    return true;
}

static void h_snapshot(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const allowed[] = { "epoch", NULL };
    int64_t epoch = 0;
    if (!api_query_allow(req, resp, allowed) ||
        !api_query_int(req, resp, "epoch", false, 0, (int64_t)TALLY_EPOCH_MAX, &epoch, NULL))
        return;
    api_repl_call_t *c = call_new(srv, req, resp, API_REPL_SNAPSHOT);
    if (!c)
        return;
    c->epoch = (uint64_t)epoch;
    call_defer(resp, c);
}

static void h_log(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const allowed[] = { "run", "from", "records", "epoch", "wait_ms", "id", NULL };
    if (!api_query_allow(req, resp, allowed))
        return;
    int64_t from = 0, records = 0, epoch = 0, wait_ms = 1000;
    char run[API_REPL_ID_MAX] = "", id[API_REPL_ID_MAX] = "";
    if (!copy_param(req, resp, "run", true, run, sizeof(run)) || !copy_param(req, resp, "id", true, id, sizeof(id)) ||
        !api_query_int(req, resp, "from", true, 0, INT64_MAX, &from, NULL) ||
        !api_query_int(req, resp, "records", false, 0, INT64_MAX, &records, NULL) ||
        !api_query_int(req, resp, "epoch", false, 0, (int64_t)TALLY_EPOCH_MAX, &epoch, NULL) ||
        !api_query_int(req, resp, "wait_ms", false, 0, 30000, &wait_ms, NULL))
        return;
    api_repl_call_t *c = call_new(srv, req, resp, API_REPL_LOG);
    if (!c)
        return;
    memcpy(c->run, run, sizeof(run));
    memcpy(c->id, id, sizeof(id));
    c->from = (uint64_t)from;
    c->records = (uint64_t)records;
    c->epoch = (uint64_t)epoch;
    c->wait_ms = (int)wait_ms;
    const char *ip = req->client_ip ? req->client_ip(req->hctx) : NULL;
    snprintf(c->addr, sizeof(c->addr), "%s", ip ? ip : "");
    call_defer(resp, c);
}

/* A route without parameters. */
static void plain_call(api_server_t *srv, api_req_t *req, api_resp_t *resp, api_repl_op_t op)
{
    if (!api_no_query(req, resp))
        return;
    api_repl_call_t *c = call_new(srv, req, resp, op);
    if (c)
        call_defer(resp, c);
}

static void h_promote(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    plain_call(srv, req, resp, API_REPL_PROMOTE);
}

static void h_replicate(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const allowed[] = { "primary", NULL };
    char primary[API_REPL_URL_MAX] = "";
    if (!api_query_allow(req, resp, allowed) || !copy_param(req, resp, "primary", true, primary, sizeof(primary)))
        return;
    if (strncmp(primary, "http://", 7) != 0 && strncmp(primary, "https://", 8) != 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "primary", "primary must be a base URL: http://host:port or https://...");
        return;
    }
    api_repl_call_t *c = call_new(srv, req, resp, API_REPL_FOLLOW);
    if (!c)
        return;
    memcpy(c->primary, primary, sizeof(primary));
    call_defer(resp, c);
}

static void h_epoch(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const allowed[] = { "nonce", NULL };
    const char *nonce = NULL;
    size_t n = 0;
    if (!api_query_allow(req, resp, allowed) || !api_query_string(req, resp, "nonce", false, &nonce, &n))
        return;
    bool hex = !nonce || (n >= API_REPL_NONCE_MIN && n <= API_REPL_NONCE_MAX);
    for (size_t i = 0; hex && nonce && i < n; i++)
        hex = (nonce[i] >= '0' && nonce[i] <= '9') || (nonce[i] >= 'a' && nonce[i] <= 'f');
    if (!hex) {
        api_error_field(resp, API_E_BAD_REQUEST, "nonce", "nonce must be %d to %d lowercase hex digits",
                        API_REPL_NONCE_MIN, API_REPL_NONCE_MAX);
        return;
    }
    api_repl_call_t *c = call_new(srv, req, resp, API_REPL_EPOCH);
    if (!c)
        return;
    if (nonce)
        memcpy(c->nonce, nonce, n);   /* NUL-terminated by calloc */
    call_defer(resp, c);
}

static const api_route_t routes[] = {
    { API_GET,  "/replication/snapshot", h_snapshot, 0, API_ACCESS_REPLICATE, NULL },
    { API_GET,  "/replication/log",      h_log, 0, API_ACCESS_REPLICATE, NULL },
    { API_GET,  "/replication/epoch",    h_epoch, 0, API_ACCESS_REPLICATE, NULL },
    { API_POST, "/admin/promote",        h_promote, API_ROUTE_READS, API_ACCESS_ADMIN, NULL },
    { API_POST, "/admin/replicate",      h_replicate, API_ROUTE_READS, API_ACCESS_ADMIN, NULL },
};

API_FAMILY(repl);
