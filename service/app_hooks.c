/*
 * app_hooks.c - the hooks tallyd hands the layers it hosts (service/app.h):
 * what the command layer and the HTTP adapter call to journal a change,
 * reserve and release its space, wait for it to be durable or confirmed,
 * take it back (undo), and what the operational routes call for a snapshot,
 * /metrics, /info, persistence's and replication's state and a reload.  Each
 * forwards to persistence or replication once main.c has published it
 * (app.live_persist, app.live_repl), and answers as a node without them
 * before that.  app_hooks_install puts them in the tables.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "api/admin.h"
#include "api/request.h"
#include "service/app.h"
#include "service/clock.h"
#include "service/fronts.h"
#include "service/metrics.h"
#include "service/persist.h"
#include "service/repl.h"
#include "service/rls_host.h"
#include "service/server.h"
#include "service/tls.h"

static const char *hook_unwritable(void *ud)
{
    (void)ud;
    persist_t *p = app_live_persist();
    return p ? persist_unwritable(p) : NULL;
}

static bool hook_ready(void *ud)
{
    (void)ud;
    server_t *s = atomic_load_explicit(&app.live_server, memory_order_acquire);
    return s && server_ready(s);
}

/* The loading gate (app.h: gate_mu says why the lock). */
void app_gate_loading(void *ud, bool loading)
{
    (void)ud;
    pthread_mutex_lock(&app.gate_mu);
    if (app.server)
        server_set_loading(app.server, loading);
    fronts_set_loading(loading);   /* --resp-port, --grpc-port */
    pthread_mutex_unlock(&app.gate_mu);
}

/* The persistence hooks are installed before the server starts and forward
 * to the data directory once it is loaded (before that, only the
 * operational routes are served, which do not journal). */
static uint64_t hook_journal(void *ud, const journal_req_t *req)
{
    (void)ud;
    persist_t *p = app_live_persist();
    if (!p)
        return 0;
    uint64_t lsn = persist_journal_hook(p, req);
    repl_t *r = app_live_repl();
    if (r)
        repl_append(r, req);
    return lsn;
}

static bool hook_reserve(void *ud, uint64_t bytes, const char **err)
{
    (void)ud;
    persist_t *p = app_live_persist();
    repl_t *r = app_live_repl();
    return !p || ((!r || repl_reserve_ok(r, err)) && persist_reserve_hook(p, bytes, err));
}

static void hook_release(void *ud, uint64_t bytes)
{
    (void)ud;
    persist_t *p = app_live_persist();
    if (p)
        persist_release_hook(p, bytes);
}

static bool hook_snapshot(void *ud, snapshot_stats_t *st, const char **err)
{
    (void)ud;
    persist_t *p = app_live_persist();
    if (!p) {
        *err = "persistence is not configured (--in-memory)";
        return false;
    }
    static _Thread_local char msg[512];
    if (!persist_snapshot(p, st, msg, sizeof(msg))) {
        *err = msg;
        return false;
    }
    return true;
}

static bool hook_wait(void *ud, uint64_t lsn, const char **err)
{
    (void)ud;
    persist_t *p = app_live_persist();
    return !p || persist_wait_hook(p, lsn, err);
}

static bool hook_try(void *ud, uint64_t lsn, uint64_t pos)
{
    (void)ud;
    (void)pos;
    persist_t *p = app_live_persist();
    return !p || repl_try_hook(app_live_repl(), p, lsn);
}

static bool hook_wait_async(void *ud, uint64_t lsn, uint64_t pos, void (*done)(void *ud, bool ok, const char *err),
                            void *dud)
{
    (void)ud;
    persist_t *p = app_live_persist();
    return !p || repl_wait_async_hook(app_live_repl(), p, lsn, pos, done, dud);
}

/* Taking changes back (cmd/undo.h): only a semi-synchronous primary does. */
static bool hook_undo_begin(void *ud)
{
    (void)ud;
    repl_t *r = app_live_repl();
    return r && repl_undo_begin(r);
}

static void hook_undo_end(void *ud)
{
    (void)ud;
    repl_undo_end(app_live_repl());
}

static uint64_t hook_undo_register(void *ud, cmd_undo_t *list)
{
    (void)ud;
    return repl_undo_register(app_live_repl(), list);
}

static void hook_metrics(void *ud, wbuf_t *out)
{
    (void)ud;
    metrics_render(out);
    rls_host_metrics(out);
    server_t *s = atomic_load_explicit(&app.live_server, memory_order_acquire);
    if (s)
        server_metrics(s, out);
    persist_t *p = app_live_persist();
    if (p)
        persist_metrics(p, out);
    repl_t *r = app_live_repl();
    if (r)
        repl_metrics(r, out);
    if (app.tls)
        tls_metrics(app.tls, out);
    char buf[256];
    int n = snprintf(buf, sizeof(buf),
                     "# HELP tally_uptime_seconds Seconds since tallyd started.\n"
                     "# TYPE tally_uptime_seconds gauge\n"
                     "tally_uptime_seconds %.3f\n",
                     (double)(clock_mono_ns() - app.started_mono) / 1e9);
    wbuf_put_bytes(out, buf, (size_t)n);
}

static void hook_info(void *ud, json_t *obj)
{
    (void)ud;
    json_object_set_new(obj, "server",
                        json_pack("{s:s,s:i,s:i,s:f,s:I,s:b}", "bind", app.opts.bind, "port",
                                  atomic_load(&app.live_server) ? server_port(atomic_load(&app.live_server))
                                                                : app.opts.port,
                                  "threads", app.opts.threads,
                                  "uptime_seconds", (double)(clock_mono_ns() - app.started_mono) / 1e9,
                                  "requests_total", (json_int_t)metrics_total_requests(), "ready", hook_ready(NULL)));
}

static bool hook_persist_status(void *ud, cmd_persist_status_t *st)
{
    (void)ud;
    persist_t *p = app_live_persist();
    if (p)
        persist_status(p, st);
    return p != NULL;
}

/* Replication's hooks, forwarded to it once it is open (before that only
 * operational routes are served: a node is a primary until then). */
static bool fwd_writable(void *ud, char *primary, size_t n)
{
    (void)ud;
    repl_t *r = app_live_repl();
    return !r || repl_writable(r, primary, n);
}

static const char *fwd_role(void *ud)
{
    (void)ud;
    repl_t *r = app_live_repl();
    return r ? repl_role(r) : "primary";
}

static void fwd_run(void *ud, const cmd_repl_call_t *call, cmd_repl_result_t *out)
{
    (void)ud;
    repl_t *r = app_live_repl();
    if (r) {
        repl_run(r, call, out);
        return;
    }
    memset(out, 0, sizeof(*out));
    cmd_err_set(&out->err, CMD_E_UNAVAILABLE, NULL, "not ready: loading data");
}

static bool fwd_sign(void *ud, const char *nonce, const void *body, size_t len, char *out)
{
    (void)ud;
    repl_t *r = app_live_repl();
    return r && repl_sign(r, nonce, body, len, out);
}

static bool fwd_status(void *ud, cmd_repl_status_t *st)
{
    (void)ud;
    repl_t *r = app_live_repl();
    if (r)
        repl_status(r, st);
    return r != NULL;
}

/* POST /admin/reload (app_files.c). */
static bool hook_reload(void *ud, size_t *count, char *err, size_t errlen)
{
    (void)ud;
    return app_reload_all("POST /admin/reload", count, err, errlen);
}

void app_hooks_install(server_hooks_t *sh, fronts_hooks_t *fh)
{
    const tally_opts_t *o = &app.opts;
    app.api.hooks.ready = hook_ready;
    app.api.hooks.unwritable = hook_unwritable;
    app.admin.metrics = hook_metrics;
    app.admin.info = hook_info;
    app.admin.repl_status = fwd_status;
    app.admin.persist_status = hook_persist_status;
    if (!o->in_memory) {
        app.api.hooks.journal = hook_journal;
        app.api.hooks.journal_reserve = hook_reserve;
        app.api.hooks.journal_release = hook_release;
        app.api.hooks.writable = fwd_writable;
        app.api.hooks.role = fwd_role;
        app.admin.snapshot = hook_snapshot;
        app.admin.repl_run = fwd_run;
        app.admin.repl_sign = fwd_sign;
        if (o->min_replicas_ack) {   /* else no change ever keeps a pre-image */
            app.api.hooks.undo_begin = hook_undo_begin;
            app.api.hooks.undo_end = hook_undo_end;
            app.api.hooks.undo_register = hook_undo_register;
        }
    }
    app.admin.reload = hook_reload;
    app.api.admin = &app.admin;
    *sh = (server_hooks_t){ 0 };
    if (!o->in_memory)
        *sh = (server_hooks_t){ NULL, hook_wait, hook_try, hook_wait_async };
    *fh = (fronts_hooks_t){ NULL, o->in_memory ? NULL : hook_try, o->in_memory ? NULL : hook_wait_async, app.tls };
}
