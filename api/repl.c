/*
 * repl.c - the replication routes (api/repl.h): parameters checked here
 * into a typed call (cmd/repl.h), the work done by the service's hooks on a
 * thread of their own, since a snapshot takes time and a log poll waits for
 * records, and its result answered here: the position headers, the
 * records' bytes, the JSON of a promotion or of a peer's question.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api/admin.h"
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/repl.h"
#include "core/persist_fmt.h"

/* ------------------------------------------------------------------------ */
/* Answers                                                                  */
/* ------------------------------------------------------------------------ */

/* A 200 whose body is the result's bytes (the response takes them). */
static bool answer_bytes(api_resp_t *resp, cmd_repl_result_t *res)
{
    resp->status = 200;
    resp->ctype = "application/octet-stream";
    free(resp->body);
    resp->body = res->len ? (char *)res->data : malloc(1);
    resp->len = res->len;
    if (res->len)
        res->data = NULL;
    if (!resp->body) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return false;
    }
    return true;
}

/* Where a snapshot leaves a replica in the primary's stream. */
static void answer_snapshot(api_resp_t *resp, cmd_repl_result_t *res)
{
    if (!answer_bytes(resp, res))
        return;
    api_add_header(resp, "X-Tally-Repl-Run", "%s", res->run);
    api_add_header(resp, "X-Tally-Repl-Offset", "%" PRIu64, res->offset);
    api_add_header(resp, "X-Tally-Repl-Records", "%" PRIu64, res->records);
    api_add_header(resp, "X-Tally-Repl-Epoch", "%" PRIu64, res->epoch);
}

/* The records after a poll's position, and the stream's head. */
static void answer_log(api_resp_t *resp, cmd_repl_result_t *res)
{
    if (!answer_bytes(resp, res))
        return;
    api_add_header(resp, "X-Tally-Repl-Head", "%" PRIu64, res->offset);
    api_add_header(resp, "X-Tally-Repl-Records", "%" PRIu64, res->records);
    api_add_header(resp, "X-Tally-Repl-Epoch", "%" PRIu64, res->epoch);
}

/* The answer to a peer; signed for its nonce when this node holds the
 * group's secret (service/peers.h): the signature covers the exact bytes
 * sent. */
static void answer_epoch(api_server_t *srv, const cmd_repl_call_t *c, const cmd_repl_result_t *res, api_resp_t *resp)
{
    json_t *o = json_pack("{s:s,s:I,s:s}", "role", res->role, "epoch", (json_int_t)res->epoch, "run", res->run);
    json_object_set_new(o, "primary", res->has_primary ? json_string(res->primary) : json_null());
    api_json(resp, 200, o);
    char sig[CMD_REPL_SIG_MAX];
    if (resp->status == 200 && c->nonce[0] && srv->admin->repl_sign &&
        srv->admin->repl_sign(srv->admin->ud, c->nonce, resp->body, resp->len, sig))
        api_add_header(resp, API_REPL_SIG_HEADER, "%s", sig);
}

static void answer(api_server_t *srv, const cmd_repl_call_t *c, cmd_repl_result_t *res, api_resp_t *resp)
{
    if (!res->ok) {
        api_cmd_error(resp, &res->err);
        return;
    }
    switch (c->op) {
    case CMD_REPL_SNAPSHOT:
        answer_snapshot(resp, res);
        break;
    case CMD_REPL_LOG:
        answer_log(resp, res);
        break;
    case CMD_REPL_EPOCH:
        answer_epoch(srv, c, res, resp);
        break;
    case CMD_REPL_PROMOTE:
        api_json(resp, 200, json_pack("{s:s,s:I,s:b}", "role", "primary", "epoch", (json_int_t)res->epoch,
                                      "promoted", res->promoted));
        break;
    case CMD_REPL_FOLLOW:
        api_json(resp, 200, json_pack("{s:s,s:s}", "role", "replica", "primary", c->primary));
        break;
    }
}

static json_t *link_json(const cmd_repl_link_t *l)
{
    json_t *o = json_pack("{s:s,s:b,s:b,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s}", "id", l->id, "up", l->up, "synced",
                          l->synced, "run", l->run, "offset", (json_int_t)l->offset, "records", (json_int_t)l->records,
                          "lag_records", (json_int_t)l->lag_records, "primary_epoch", (json_int_t)l->primary_epoch,
                          "full_syncs", (json_int_t)l->full_syncs, "resumes", (json_int_t)l->resumes, "applied",
                          (json_int_t)l->applied, "last_ok_ms_ago", (json_int_t)l->last_ok_ms_ago, "last_error",
                          l->last_error);
    json_object_set_new(o, "last_snapshot_bytes", json_integer((json_int_t)l->last_snapshot_bytes));
    json_object_set_new(o, "last_snapshot_ms", json_integer((json_int_t)l->last_snapshot_ms));
    return o;
}

void api_repl_status_json(json_t *obj, const cmd_repl_status_t *st)
{
    json_t *o = json_pack("{s:s,s:I,s:s,s:I,s:I,s:I,s:I,s:i,s:i}", "role", st->role, "epoch", (json_int_t)st->epoch,
                          "run", st->run, "offset", (json_int_t)st->offset, "records", (json_int_t)st->records,
                          "backlog_bytes", (json_int_t)st->backlog_bytes, "backlog_capacity",
                          (json_int_t)st->backlog_capacity, "min_replicas_ack", st->min_replicas_ack,
                          "min_replicas_timeout_ms", st->min_replicas_timeout_ms);
    json_object_set_new(o, "primary", st->has_primary ? json_string(st->primary) : json_null());
    if (st->ngroup) {
        json_t *g = json_array();
        for (int i = 0; i < st->ngroup; i++)
            json_array_append_new(g, json_string(st->group[i]));
        json_object_set_new(o, "peers", g);
        json_object_set_new(o, "peers_state", json_string(st->peers_state));
        json_object_set_new(o, "peers_epoch", json_integer((json_int_t)st->peers_epoch));
    }
    if (st->coordinated)
        json_object_set_new(o, "coordinator", json_string(st->coordinator_state));
    json_t *list = json_array();
    for (int i = 0; i < st->nreplicas; i++) {
        const cmd_repl_replica_t *pe = &st->replicas[i];
        json_array_append_new(list, json_pack("{s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:I}", "id", pe->id, "addr", pe->addr,
                                              "connected", pe->connected, "offset", (json_int_t)pe->offset,
                                              "records", (json_int_t)pe->records, "lag_records",
                                              (json_int_t)pe->lag_records, "lag_ms", (json_int_t)pe->lag_ms,
                                              "last_seen_ms_ago", (json_int_t)pe->last_seen_ms_ago));
    }
    json_object_set_new(o, "replicas", list);
    json_object_set_new(o, "replicas_connected", json_integer(st->replicas_connected));
    json_object_set_new(o, "acks_timed_out", json_integer((json_int_t)st->acks_timed_out));
    json_object_set_new(o, "refused_too_few_replicas", json_integer((json_int_t)st->refused_too_few_replicas));
    json_object_set_new(o, "keys_taken_back", json_integer((json_int_t)st->keys_taken_back));
    if (st->has_link)
        json_object_set_new(o, "link", link_json(&st->link));
    json_object_set_new(obj, "replication", o);
}

/* Runs on a server thread: the call is the handler's deferred_arg. */
static void repl_job(api_server_t *srv, api_resp_t *resp)
{
    cmd_repl_call_t *call = resp->deferred_arg;
    resp->deferred_arg = NULL;
    cmd_repl_result_t *res = calloc(1, sizeof(*res));
    if (!res) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
    } else {
        srv->admin->repl_run(srv->admin->ud, call, res);
        answer(srv, call, res, resp);
        free(res->data);
        free(res);
    }
    free(call);
}

/* ------------------------------------------------------------------------ */
/* Routes                                                                   */
/* ------------------------------------------------------------------------ */

/* Common start of every route: no replication here, or replay (the
 * routes change nothing journaled) → false with resp set. */
static cmd_repl_call_t *call_new(api_server_t *srv, const api_req_t *req, api_resp_t *resp, cmd_repl_op_t op)
{
    if (req->replay)
        return NULL;
    if (!srv->admin || !srv->admin->repl_run) {
        api_error(resp, API_E_UNAVAILABLE, "replication needs a data directory (this tallyd runs --in-memory)");
        return NULL;
    }
    cmd_repl_call_t *c = calloc(1, sizeof(*c));
    if (!c) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    c->op = op;
    return c;
}

static void call_defer(api_resp_t *resp, cmd_repl_call_t *c)
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
    cmd_repl_call_t *c = call_new(srv, req, resp, CMD_REPL_SNAPSHOT);
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
    char run[CMD_REPL_ID_MAX] = "", id[CMD_REPL_ID_MAX] = "";
    if (!copy_param(req, resp, "run", true, run, sizeof(run)) || !copy_param(req, resp, "id", true, id, sizeof(id)) ||
        !api_query_int(req, resp, "from", true, 0, INT64_MAX, &from, NULL) ||
        !api_query_int(req, resp, "records", false, 0, INT64_MAX, &records, NULL) ||
        !api_query_int(req, resp, "epoch", false, 0, (int64_t)TALLY_EPOCH_MAX, &epoch, NULL) ||
        !api_query_int(req, resp, "wait_ms", false, 0, 30000, &wait_ms, NULL))
        return;
    cmd_repl_call_t *c = call_new(srv, req, resp, CMD_REPL_LOG);
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
static void plain_call(api_server_t *srv, api_req_t *req, api_resp_t *resp, cmd_repl_op_t op)
{
    if (!api_no_query(req, resp))
        return;
    cmd_repl_call_t *c = call_new(srv, req, resp, op);
    if (c)
        call_defer(resp, c);
}

static void h_promote(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    plain_call(srv, req, resp, CMD_REPL_PROMOTE);
}

static void h_replicate(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const allowed[] = { "primary", NULL };
    char primary[CMD_REPL_URL_MAX] = "";
    if (!api_query_allow(req, resp, allowed) || !copy_param(req, resp, "primary", true, primary, sizeof(primary)))
        return;
    if (strncmp(primary, "http://", 7) != 0 && strncmp(primary, "https://", 8) != 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "primary", "primary must be a base URL: http://host:port or https://...");
        return;
    }
    cmd_repl_call_t *c = call_new(srv, req, resp, CMD_REPL_FOLLOW);
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
    bool hex = !nonce || (n >= CMD_REPL_NONCE_MIN && n <= CMD_REPL_NONCE_MAX);
    for (size_t i = 0; hex && nonce && i < n; i++)
        hex = (nonce[i] >= '0' && nonce[i] <= '9') || (nonce[i] >= 'a' && nonce[i] <= 'f');
    if (!hex) {
        api_error_field(resp, API_E_BAD_REQUEST, "nonce", "nonce must be %d to %d lowercase hex digits",
                        CMD_REPL_NONCE_MIN, CMD_REPL_NONCE_MAX);
        return;
    }
    cmd_repl_call_t *c = call_new(srv, req, resp, CMD_REPL_EPOCH);
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
