/*
 * app.h - what the files of tallyd's program share, and nobody else: the
 * process's state (tally_app_t, one instance: `app`, defined in main.c) and
 * the functions one of them calls in another.  They are linked into tallyd
 * alone, not into libtally (the Makefile's TALLYD_SRC).
 *
 *     main.c       flags, start-up (run), the housekeeping loop, signals,
 *                  graceful shutdown, the pid file, --hash-token
 *     app_hooks.c  the hooks the command layer, the HTTP adapter and the
 *                  servers call: journal, reserve/release, snapshot,
 *                  wait/try, undo, metrics, /info, persistence's status,
 *                  replication's forwarders, the loading gate
 *     app_files.c  the files tallyd reads and reloads: --config, --tokens,
 *                  --rls-config, --cluster (a file, or etcd's map); SIGHUP
 *                  and POST /admin/reload; --haproxy-config
 *
 * Calls run one way (main.c -> app_hooks.c -> app_files.c; main.c ->
 * app_files.c): no file calls one that calls it.
 */
#ifndef TALLY_APP_H
#define TALLY_APP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/admin.h"
#include "api/guard.h"
#include "api/request.h"
#include "core/keyspace.h"
#include "service/clusterwatch.h"
#include "service/coord.h"
#include "service/etcd.h"
#include "service/fronts.h"
#include "service/options.h"
#include "service/persist.h"
#include "service/repl.h"
#include "service/server.h"
#include "service/tls.h"

/* Who owns what: main.c parses opts, opens and closes everything else in
 * run(), and publishes the live_ pointers once what they name is complete;
 * app_hooks_install fills api.hooks and admin; app_files.c loads what
 * api.auth and api.policies hold, and creates api.cluster with the etcd
 * client and watch of --cluster etcd:PREFIX (main.c frees them on the way
 * out).  The hooks run on the serving threads: they read the live_
 * pointers, and what start-up set before the server started (opts, tls,
 * started_mono, api.cluster); the loading gate, on replication's follower
 * thread, reads server under gate_mu. */
typedef struct {
    tally_opts_t opts;
    ks_t *ks;
    api_server_t api;
    api_admin_hooks_t admin;     /* the HTTP adapter's operational routes' hooks (app.api.admin) */
    api_guard_t *guard;          /* browser checks (api/guard.h) */
    tls_t *tls;                  /* HTTPS credentials (service/tls.h); NULL for plain HTTP */
    server_t *server;
    persist_t *persist;
    int64_t started_mono;
    /* What the serving threads may see: published once complete (the
     * server answers /readyz, /metrics and /info while data loads). */
    _Atomic(server_t *) live_server;
    _Atomic(persist_t *) live_persist;
    repl_t *repl;
    coord_t *coord;              /* --coordinator: the election in etcd */
    _Atomic(repl_t *) live_repl;
    /* --cluster etcd[:PREFIX]: the map read from etcd and watched */
    bool cluster_in_etcd;
    char cluster_prefix[CLUSTERWATCH_PREFIX_MAX];
    etcd_client_t *cluster_etcd;
    cluster_watch_t *cluster_watch;
    /* A replica's full resynchronisation replaces the keyspace: requests wait
     * outside (persist_set_load_gate).  The follower may be loading while
     * tallyd stops: the server is freed under gate_mu, and a load after that
     * has no requests to keep out. */
    pthread_mutex_t gate_mu;
} tally_app_t;

extern tally_app_t app;

/* What the hooks forward to: NULL until main.c publishes it, and again once
 * it closes it. */
static inline persist_t *app_live_persist(void)
{
    return atomic_load_explicit(&app.live_persist, memory_order_acquire);
}

static inline repl_t *app_live_repl(void)
{
    return atomic_load_explicit(&app.live_repl, memory_order_acquire);
}

/* ---- app_hooks.c ---- */

/* Installs the hooks into app.api.hooks and app.admin (those of the journal
 * and replication only without --in-memory, those of undo only with
 * --min-replicas-ack too), points app.api.admin at app.admin, and fills the
 * wait for durability the HTTP server (*sh) and the other ports (*fh) take. */
void app_hooks_install(server_hooks_t *sh, fronts_hooks_t *fh);
/* The loading gate persistence calls around a replica's full
 * resynchronisation (persist_set_load_gate). */
void app_gate_loading(void *ud, bool loading);

/* ---- app_files.c (each function's contract is at its definition) ---- */

bool app_load_tokens(char *err, size_t errlen, size_t *count);
bool app_load_policies(char *err, size_t errlen, size_t *count);
const char *app_policies_word(size_t count);
bool app_cluster_open(char *err, size_t errlen);
bool app_reload_all(const char *who, size_t *count, char *err, size_t errlen);
void app_reload_on_sighup(char *err, size_t errlen);
int app_print_haproxy_config(void);

#endif
