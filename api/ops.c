/*
 * ops.c - operating the service: liveness, readiness, info, metrics and
 * on-demand snapshots.
 *
 *   GET  /                -> 200: a short index (version, links, every route)
 *   GET  /healthz         -> 200 {"status":"ok"} while the process serves HTTP
 *   GET  /readyz          -> 200 once snapshot and journal are loaded, else 503
 *                            (on a full disk: 200 with "writable":false and the reason;
 *                            ?role=primary 503)
 *   GET  /info            -> JSON: version, keyspace, persistence, server (the last two
 *                            only for admin tokens when --tokens is on)
 *   GET  /metrics         -> Prometheus text exposition format 0.0.4
 *   POST /admin/snapshot  -> answers when the snapshot file is durable
 *   POST /admin/reload    -> re-reads the --config policies and --tokens files (as SIGHUP)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/admin.h"
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/auth.h"
#include "api/cluster.h"
#include "api/repl.h"
#include "api/ratelimit.h"
#include "cmd/persist.h"
#include "core/version.h"

static const char *policy_name(ks_evict_policy_t p)
{
    switch (p) {
    case KS_ALLKEYS_LRU: return "allkeys-lru";
    case KS_VOLATILE_LRU: return "volatile-lru";
    default: return "noeviction";
    }
}

static bool no_params(const api_req_t *req, api_resp_t *resp)
{
    return api_no_query(req, resp);
}

static void h_index(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    if (!no_params(req, resp))
        return;
    /* every route in matching order, read from the families' rows (not
     * through the router, which runs this handler) */
    json_t *routes = json_array();
    for (size_t f = 0; f < api_nfamilies; f++)
        for (size_t i = 0; i < api_families[f]->nroutes; i++) {
            const api_route_t *r = &api_families[f]->routes[i];
            json_array_append_new(routes, json_sprintf("%s %s", api_method_name(r->method), r->pattern));
        }
    api_json(resp, 200,
             json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s},s:s,s:o}", "service", "tallyd", "version", TALLY_VERSION,
                       "links", "health", "/healthz", "ready", "/readyz", "info", "/info", "metrics", "/metrics",
                       "docs", "man 8 tallyd; openapi.yaml describes every route (share/doc/tally once installed)",
                       "routes", routes));
}

static void h_healthz(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    (void)req;
    api_json(resp, 200, json_pack("{s:s}", "status", "ok"));
}

/* GET /readyz[?role=primary|replica]: with a role, 200 only on a node in
 * that role (an orchestrator routes writes to ?role=primary). */
static void h_readyz(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const allowed[] = { "role", NULL };
    const char *want;
    size_t wlen;
    if (!api_query_allow(req, resp, allowed) || !api_query_string(req, resp, "role", false, &want, &wlen))
        return;
    if (want && strcmp(want, "primary") != 0 && strcmp(want, "replica") != 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "role", "role must be primary or replica");
        return;
    }
    if (srv->hooks.ready && !srv->hooks.ready(srv->hooks.ud)) {
        api_error(resp, API_E_UNAVAILABLE, "not ready: loading data or shutting down");
        return;
    }
    const char *role = srv->hooks.role ? srv->hooks.role(srv->hooks.ud) : "primary";
    if (want && strcmp(want, role) != 0) {
        api_error(resp, API_E_UNAVAILABLE, "ready, but this node's role is %s", role);
        return;
    }
    /* reads are served on a full disk: ready, but not for changes */
    const char *unwritable = srv->hooks.unwritable ? srv->hooks.unwritable(srv->hooks.ud) : NULL;
    if (unwritable && want && !strcmp(want, "primary")) {
        api_error(resp, API_E_UNAVAILABLE, "ready for reads, but changes cannot be made durable: %s", unwritable);
        return;
    }
    json_t *o = want ? json_pack("{s:s,s:s}", "status", "ready", "role", role) : json_pack("{s:s}", "status", "ready");
    if (unwritable) {
        json_object_set_new(o, "writable", json_false());
        json_object_set_new(o, "reason", json_string(unwritable));
    }
    api_json(resp, 200, o);
}

/* The "persistence" object of /info. */
static json_t *persist_json(const cmd_persist_status_t *st)
{
    json_t *o = json_pack("{s:s,s:b,s:s,s:i,s:I,s:f,s:I}", "data_dir", st->data_dir, "journal", st->journal, "fsync",
                          st->fsync, "snapshot_interval", st->snapshot_interval, "changes_since_snapshot",
                          (json_int_t)st->changes_since_snapshot, "load_ms", (double)st->load_ns / 1e6,
                          "replayed_records", (json_int_t)st->replayed_records);
    if (st->unwritable)
        json_object_set_new(o, "unwritable", json_string(st->unwritable));
    if (st->has_journal) {
        json_object_set_new(o, "journal_seq", json_integer((json_int_t)st->journal_seq));
        json_object_set_new(o, "journal_bytes", json_integer((json_int_t)st->journal_bytes));
        json_object_set_new(o, "journal_healthy", json_boolean(st->journal_healthy));
        json_object_set_new(o, "journal_unsynced_bytes", json_integer((json_int_t)st->journal_unsynced_bytes));
    }
    if (st->has_last) {
        json_t *l = json_pack("{s:b}", "ok", st->last_ok);
        if (st->last_ok) {
            json_object_set_new(l, "bytes", json_integer((json_int_t)st->last.bytes));
            json_object_set_new(l, "keys", json_integer((json_int_t)st->last.records));
            json_object_set_new(l, "duration_ms", json_real((double)st->last.duration_ns / 1e6));
            json_object_set_new(l, "finished_ms", json_integer(st->last.finished_ms));
        } else {
            json_object_set_new(l, "error", json_string(st->last_error));
        }
        json_object_set_new(o, "last_snapshot", l);
    }
    return o;
}

/* What the service says of itself, for admin tokens: the server, its
 * replication, its data directory. */
static void service_info(api_server_t *srv, json_t *o)
{
    const api_admin_hooks_t *a = srv->admin;
    a->info(a->ud, o);
    cmd_repl_status_t *rs = a->repl_status ? malloc(sizeof(*rs)) : NULL;
    if (rs && a->repl_status(a->ud, rs))
        api_repl_status_json(o, rs);
    free(rs);
    cmd_persist_status_t ps;
    if (a->persist_status && a->persist_status(a->ud, &ps))
        json_object_set_new(o, "persistence", persist_json(&ps));
    else
        json_object_set_new(o, "persistence", json_pack("{s:s}", "mode", "in-memory"));
}

static void h_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    if (!no_params(req, resp))
        return;
    ks_t *ks = srv->ks;
    json_t *o = json_pack("{s:s,s:{s:I,s:I,s:I,s:s,s:i}}", "version", TALLY_VERSION, "keyspace", "keys",
                          (json_int_t)ks_total_keys(ks), "memory_bytes", (json_int_t)ks_total_memory(ks),
                          "maxmemory", (json_int_t)ks_maxmemory(ks), "maxmemory_policy",
                          policy_name(ks_evict_policy(ks)), "shards", (int)ks_shard_count(ks));
    if (!api_auth_admin(req))   /* bind, data directory, persistence: for admin tokens only */
        json_object_set_new(o, "server", json_pack("{s:b}", "ready", !srv->hooks.ready || srv->hooks.ready(srv->hooks.ud)));
    else if (srv->admin && srv->admin->info)
        service_info(srv, o);
    if (srv->cluster)
        api_cluster_info(srv->cluster, o);
    api_json(resp, 200, o);
}

static void h_metrics(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    if (!no_params(req, resp))
        return;
    wbuf_t b = WBUF_INIT;
    char line[512];
    int n = snprintf(line, sizeof(line),
                     "# HELP tally_keys Keys in the keyspace (expired keys not yet removed included).\n"
                     "# TYPE tally_keys gauge\n"
                     "tally_keys %llu\n"
                     "# HELP tally_memory_bytes Bytes charged to keys and their values.\n"
                     "# TYPE tally_memory_bytes gauge\n"
                     "tally_memory_bytes %llu\n"
                     "# HELP tally_maxmemory_bytes The --maxmemory limit (0: none).\n"
                     "# TYPE tally_maxmemory_bytes gauge\n"
                     "tally_maxmemory_bytes %llu\n",
                     (unsigned long long)ks_total_keys(srv->ks), (unsigned long long)ks_total_memory(srv->ks),
                     (unsigned long long)ks_maxmemory(srv->ks));
    wbuf_put_bytes(&b, line, (size_t)n);
    if (srv->admin && srv->admin->metrics)
        srv->admin->metrics(srv->admin->ud, &b);
    api_policies_metrics(srv->policies, &b);
    api_auth_metrics(srv->auth, &b);
    if (srv->cluster)
        api_cluster_metrics(srv->cluster, &b);
    if (b.oom) {
        wbuf_free(&b);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory rendering metrics");
        return;
    }
    api_body(resp, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    wbuf_free(&b);
}

/* Runs on a thread of the server's, not in the HTTP worker. */
static void snapshot_job(api_server_t *srv, api_resp_t *resp)
{
    const char *err = NULL;
    cmd_snapshot_stats_t st;
    if (!srv->admin->snapshot(srv->admin->ud, &st, &err)) {
        bool no_space = err && (strstr(err, strerror(ENOSPC)) || strstr(err, strerror(EFBIG)) ||
                                strstr(err, strerror(EDQUOT)));
        api_error(resp, no_space                                ? API_E_NO_SPACE
                        : err && strstr(err, "in progress") ? API_E_UNAVAILABLE
                                                            : API_E_INTERNAL,
                  "snapshot failed: %s", err ? err : "unknown error");
        return;
    }
    api_json(resp, 200, json_pack("{s:I,s:I,s:f,s:f,s:I}", "bytes", (json_int_t)st.bytes, "keys",
                                  (json_int_t)st.records, "duration_ms", (double)st.duration_ns / 1e6,
                                  "max_shard_lock_ms", (double)st.max_lock_ns / 1e6, "journal_seq",
                                  (json_int_t)st.journal_seq));
}

static void h_admin_snapshot(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    if (!no_params(req, resp))
        return;
    if (req->replay)
        return;
    if (!srv->admin || !srv->admin->snapshot) {
        api_error(resp, API_E_UNAVAILABLE, "persistence is not configured (no --data-dir)");
        return;
    }
    resp->deferred = snapshot_job;
}

static void h_admin_reload(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    if (!no_params(req, resp))
        return;
    if (req->replay)
        return;
    size_t count = 0;
    char err[1024];
    if (!srv->admin || !srv->admin->reload || !srv->admin->reload(srv->admin->ud, &count, err, sizeof(err))) {
        api_error_field(resp, API_E_BAD_REQUEST, "config", "%s",
                        srv->admin && srv->admin->reload ? err : "this server cannot reload its configuration");
        return;
    }
    json_t *o = json_pack("{s:b,s:I}", "reloaded", 1, "policies", (json_int_t)count);
    if (srv->auth)
        json_object_set_new(o, "tokens", json_integer((json_int_t)api_auth_token_count(srv->auth)));
    api_json(resp, 200, o);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_GET,    "/",               h_index, 0, API_ACCESS_TOKEN, NULL },
    { API_GET,    "/healthz",        h_healthz, API_ROUTE_OPERATIONAL, API_ACCESS_PUBLIC, NULL },
    { API_GET,    "/readyz",         h_readyz, API_ROUTE_OPERATIONAL, API_ACCESS_PUBLIC, NULL },
    { API_GET,    "/info",           h_info, API_ROUTE_OPERATIONAL, API_ACCESS_TOKEN, NULL },
    { API_GET,    "/metrics",        h_metrics, API_ROUTE_OPERATIONAL, API_ACCESS_METRICS, NULL },
    { API_POST,   "/admin/snapshot", h_admin_snapshot, API_ROUTE_READS, API_ACCESS_ADMIN, NULL },
    { API_POST,   "/admin/reload",   h_admin_reload, API_ROUTE_READS, API_ACCESS_ADMIN, NULL },
};

API_FAMILY(ops);
