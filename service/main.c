/*
 * main.c - tallyd: flags and environment, start-up, the housekeeping loop,
 * signals and graceful shutdown.
 *
 * Start-up: parse options -> create the keyspace -> listen (answering 503 on
 * everything but /healthz, /readyz, /info, /metrics) -> load snapshot and
 * replay journals -> ready.
 *
 * The main thread then waits for signals, waking every 10 ms to sample a
 * tenth of the shards for expired keys, and every 100 ms to let persistence
 * start its snapshots and the rest do their housekeeping (the journal's
 * write-back and fsync have their own thread, service/journal.c).
 * SIGTERM/SIGINT: not ready -> stop accepting -> let in-flight requests
 * finish -> close connections -> final snapshot -> exit 0.  SIGHUP reloads
 * --config and --tokens (each file refused keeps what was loaded before)
 * and reopens --access-log.
 *
 * Without --tokens tallyd serves anyone who reaches its port, so it refuses
 * to start on a non-loopback --bind unless told --insecure-no-auth.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "api/admin.h"
#include "api/request.h"
#include "api/router.h"
#include "api/guard.h"
#include "api/auth.h"
#include "api/cluster.h"
#include "api/ratelimit.h"
#include "core/cidr.h"
#include "core/keyspace.h"
#include "core/version.h"
#include "core/zindex.h"
#include "service/access_log.h"
#include "service/clock.h"
#include "service/clusterwatch.h"
#include "service/etcd.h"
#include "service/haproxy.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/options.h"
#include "service/file.h"
#include "service/fronts.h"
#include "service/persist.h"
#include "service/coord.h"
#include "service/repl.h"
#include "service/rls_host.h"
#include "service/server.h"
#include "service/tls.h"

#define EXPIRE_SAMPLES 20   /* volatile keys sampled per shard visited, as Redis's ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP */
/* Active expiry visits every shard each 100 ms tick (at most 320 shards a
 * tick), in EXPIRE_STEPS steps 10 ms apart: one pass over 256 shards takes
 * about half a millisecond, and on a server with one core a request waited
 * for all of it. */
#define TICK_NS (100 * 1000000LL)
#define EXPIRE_STEPS 10
#define EXPIRE_STEP_SHARDS_MAX 32

static struct {
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
} app;

static persist_t *live_persist(void) { return atomic_load_explicit(&app.live_persist, memory_order_acquire); }
static repl_t *live_repl(void) { return atomic_load_explicit(&app.live_repl, memory_order_acquire); }
static bool files_given(void) { return app.opts.config[0] || app.opts.tokens[0] || app.opts.rls_config[0]; }

/* ------------------------------------------------------------------------ */
/* Hooks the API calls                                                      */
/* ------------------------------------------------------------------------ */

static const char *hook_unwritable(void *ud)
{
    (void)ud;
    persist_t *p = live_persist();
    return p ? persist_unwritable(p) : NULL;
}

static bool hook_ready(void *ud)
{
    (void)ud;
    server_t *s = atomic_load_explicit(&app.live_server, memory_order_acquire);
    return s && server_ready(s);
}

/* A replica's full resynchronisation replaces the keyspace: requests wait
 * outside (persist_set_load_gate).  The follower may be loading while
 * tallyd stops: the server is freed under gate_mu, and a load after that
 * has no requests to keep out. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;

static void gate_loading(void *ud, bool loading)
{
    (void)ud;
    pthread_mutex_lock(&gate_mu);
    if (app.server)
        server_set_loading(app.server, loading);
    fronts_set_loading(loading);   /* --resp-port, --grpc-port */
    pthread_mutex_unlock(&gate_mu);
}

/* The persistence hooks are installed before the server starts and forward
 * to the data directory once it is loaded (before that, only the
 * operational routes are served, which do not journal). */
static uint64_t hook_journal(void *ud, const journal_req_t *req)
{
    (void)ud;
    persist_t *p = live_persist();
    if (!p)
        return 0;
    uint64_t lsn = persist_journal_hook(p, req);
    repl_t *r = live_repl();
    if (r)
        repl_append(r, req);
    return lsn;
}

static bool hook_reserve(void *ud, uint64_t bytes, const char **err)
{
    (void)ud;
    persist_t *p = live_persist();
    repl_t *r = live_repl();
    return !p || ((!r || repl_reserve_ok(r, err)) && persist_reserve_hook(p, bytes, err));
}

static void hook_release(void *ud, uint64_t bytes)
{
    (void)ud;
    persist_t *p = live_persist();
    if (p)
        persist_release_hook(p, bytes);
}

static bool hook_snapshot(void *ud, snapshot_stats_t *st, const char **err)
{
    (void)ud;
    persist_t *p = live_persist();
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
    persist_t *p = live_persist();
    return !p || persist_wait_hook(p, lsn, err);
}

static bool hook_try(void *ud, uint64_t lsn, uint64_t pos)
{
    (void)ud;
    (void)pos;
    persist_t *p = live_persist();
    return !p || repl_try_hook(live_repl(), p, lsn);
}

static bool hook_wait_async(void *ud, uint64_t lsn, uint64_t pos, void (*done)(void *ud, bool ok, const char *err),
                            void *dud)
{
    (void)ud;
    persist_t *p = live_persist();
    return !p || repl_wait_async_hook(live_repl(), p, lsn, pos, done, dud);
}

/* Taking changes back (cmd/undo.h): only a semi-synchronous primary does. */
static bool hook_undo_begin(void *ud)
{
    (void)ud;
    repl_t *r = live_repl();
    return r && repl_undo_begin(r);
}

static void hook_undo_end(void *ud)
{
    (void)ud;
    repl_undo_end(live_repl());
}

static uint64_t hook_undo_register(void *ud, cmd_undo_t *list)
{
    (void)ud;
    return repl_undo_register(live_repl(), list);
}

static void hook_metrics(void *ud, wbuf_t *out)
{
    (void)ud;
    metrics_render(out);
    rls_host_metrics(out);
    server_t *s = atomic_load_explicit(&app.live_server, memory_order_acquire);
    if (s)
        server_metrics(s, out);
    persist_t *p = live_persist();
    if (p)
        persist_metrics(p, out);
    repl_t *r = live_repl();
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
    persist_t *p = live_persist();
    if (p)
        persist_status(p, st);
    return p != NULL;
}

/* Replication's hooks, forwarded to it once it is open (before that only
 * operational routes are served: a node is a primary until then). */
static bool fwd_writable(void *ud, char *primary, size_t n)
{
    (void)ud;
    repl_t *r = live_repl();
    return !r || repl_writable(r, primary, n);
}

static const char *fwd_role(void *ud)
{
    (void)ud;
    repl_t *r = live_repl();
    return r ? repl_role(r) : "primary";
}

static void fwd_run(void *ud, const cmd_repl_call_t *call, cmd_repl_result_t *out)
{
    (void)ud;
    repl_t *r = live_repl();
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
    repl_t *r = live_repl();
    return r && repl_sign(r, nonce, body, len, out);
}

static bool fwd_status(void *ud, cmd_repl_status_t *st)
{
    (void)ud;
    repl_t *r = live_repl();
    if (r)
        repl_status(r, st);
    return r != NULL;
}

/* ------------------------------------------------------------------------ */
/* Policies file                                                            */
/* ------------------------------------------------------------------------ */

#define CONFIG_MAX_BYTES (16 * 1024 * 1024)   /* a policies or token file is small; refuse anything absurd */

/* The whole of a configuration file (malloc'd, *n bytes), or NULL with a
 * message naming the flag and the file. */
static char *config_read(const char *flag, const char *path, size_t *n, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
        return NULL;
    }
    char *text = malloc(CONFIG_MAX_BYTES + 1);
    *n = text ? fread(text, 1, CONFIG_MAX_BYTES + 1, f) : 0;
    bool rerr = ferror(f);
    fclose(f);
    if (!text || rerr || *n > CONFIG_MAX_BYTES) {
        snprintf(err, errlen, "%s %s: %s", flag, path,
                 !text ? "out of memory" : rerr ? "read error" : "larger than 16 MiB");
        free(text);
        return NULL;
    }
    return text;
}

/* Reads --config and installs its policies; false with a message (the old
 * policies stay). */
static bool load_policies(char *err, size_t errlen, size_t *count)
{
    const char *path = app.opts.config;
    size_t n;
    char *text = config_read("--config", path, &n, err, errlen);
    if (!text)
        return false;
    char why[900];
    bool ok = api_policies_load(app.api.policies, text, n, count, why, sizeof(why));
    free(text);
    if (!ok)
        snprintf(err, errlen, "--config %.300s: %.600s", path, why);
    return ok;
}

/* Reads --tokens and installs its tokens; false with a message (the old
 * tokens stay). */
static bool load_tokens(char *err, size_t errlen, size_t *count)
{
    const char *path = app.opts.tokens;
    size_t n;
    char *text = config_read("--tokens", path, &n, err, errlen);
    if (!text)
        return false;
    char why[600];
    api_tokens_t *t = api_tokens_parse(text, n, why, sizeof(why));
    free(text);
    if (!t) {
        snprintf(err, errlen, "--tokens %.300s: %.600s", path, why);
        return false;
    }
    *count = t->n;
    api_auth_install(app.api.auth, t);
    if (file_readable_by_others(path))
        log_warn("--tokens %s can be read by every user of this machine: it holds only hashes, but which "
                 "tokens may do what is nobody else's business; chmod o-r it", path);
    return true;
}

/* Writes an accepted cluster map to --cluster FILE (temporary file, fsync,
 * rename) before the node uses it, so a restart never goes back to an older
 * map; false with a message refuses the map. */
static bool cluster_store(void *ud, const char *text, size_t len, char *err, size_t errlen)
{
    (void)ud;
    if (!file_replace(app.opts.cluster, text, len, FILE_MODE_SHARED)) {
        snprintf(err, errlen, "--cluster %.300s: cannot write the new map: %s", app.opts.cluster, strerror(errno));
        return false;
    }
    return true;
}

/* With the map in etcd, PUT /admin/cluster is refused: etcd's map is the
 * only truth, and a map installed beside it could fence etcd's out. */
static bool cluster_store_etcd(void *ud, const char *text, size_t len, char *err, size_t errlen)
{
    (void)ud;
    (void)text;
    (void)len;
    snprintf(err, errlen, "this node's map comes from etcd (--cluster etcd:%s): change it there, with "
             "tally-reshard --coordinator", app.cluster_prefix);
    return false;
}

/* A client of --coordinator's etcd for the cluster map; NULL with a message. */
static etcd_client_t *cluster_etcd_open(char *err, size_t errlen)
{
    if (!app.opts.coordinator[0]) {
        snprintf(err, errlen, "--cluster %s needs --coordinator etcd://HOST:PORT[,...] (etcd's members)",
                 app.opts.cluster);
        return NULL;
    }
    const tally_opts_t *o = &app.opts;
    char why[512], password[512] = "";
    if (o->coordinator_password_file[0] &&
        !repl_secret_read("--coordinator-password-file", o->coordinator_password_file, password, sizeof(password),
                          err, errlen))
        return NULL;
    /* the same members and credentials as the election (service/coord.c) */
    etcd_config_t cfg = {
        .endpoints = o->coordinator,
        .cacert = o->coordinator_cacert[0] ? o->coordinator_cacert : NULL,
        .cert = o->coordinator_cert[0] ? o->coordinator_cert : NULL,
        .key = o->coordinator_key[0] ? o->coordinator_key : NULL,
        .user = o->coordinator_user[0] ? o->coordinator_user : NULL,
        .password = o->coordinator_user[0] ? password : NULL,
    };
    etcd_client_t *e = etcd_open(&cfg, why, sizeof(why));
    explicit_bzero(password, sizeof(password));
    if (!e)
        snprintf(err, errlen, "--coordinator %.300s: %.500s", o->coordinator, why);
    return e;
}

/* Reads --cluster FILE and installs its map; false with a message (the map
 * installed before stays).  The etcd form is watched, not reloaded. */
static bool load_cluster(const char *who, char *err, size_t errlen)
{
    if (app.cluster_in_etcd)
        return true;
    size_t n;
    char *text = config_read("--cluster", app.opts.cluster, &n, err, errlen);
    if (!text)
        return false;
    char why[600];
    bool ok = cmd_cluster_set(app.api.cluster, text, n, false, why, sizeof(why));
    free(text);
    if (!ok) {
        snprintf(err, errlen, "--cluster %.300s: %.600s", app.opts.cluster, why);
        log_error("%s: %s; keeping the map loaded before", who, err);
    } else {
        log_info("%s: --cluster %s: epoch %llu, this node is '%s'", who, app.opts.cluster,
                 (unsigned long long)cmd_cluster_epoch(app.api.cluster), app.opts.cluster_node);
    }
    return ok;
}

/* tallyd --cluster FILE --haproxy-config [--haproxy-map PATH] [--haproxy-socket PATH]:
 * the configuration; tallyd --cluster FILE --haproxy-slots: its slot map file
 * (tallyd --haproxy-lua, its Lua script, needs no map: main). */
static int print_haproxy_config(void)
{
    char err[1024];
    size_t n;
    if (!app.opts.cluster[0]) {
        fprintf(stderr, "tallyd --haproxy-config and --haproxy-slots need --cluster FILE\n");
        return 2;
    }
    char *text = NULL;
    char prefix[CLUSTERWATCH_PREFIX_MAX];
    if (clusterwatch_spec(app.opts.cluster, prefix, sizeof(prefix))) {
        /* the map etcd holds now */
        snprintf(app.cluster_prefix, sizeof(app.cluster_prefix), "%s", prefix);
        etcd_client_t *e = cluster_etcd_open(err, sizeof(err));
        char key[CLUSTERWATCH_PREFIX_MAX + 8];
        snprintf(key, sizeof(key), "%s/map", prefix);
        etcd_kv_t kv;
        int found = 0;
        if (e && etcd_get(e, key, strlen(key), &kv, &found, NULL) != 0)
            snprintf(err, sizeof(err), "etcd: %.900s", etcd_error(e));
        else if (e && !found)
            snprintf(err, sizeof(err), "etcd holds no cluster map at %s", key);
        else if (e && (text = malloc(kv.value_len + 1)) != NULL) {
            memcpy(text, kv.value, kv.value_len);
            text[kv.value_len] = '\0';
            n = kv.value_len;
        }
        if (e && found)
            etcd_kv_free(&kv);
        etcd_close(e);
    } else {
        text = config_read("--cluster", app.opts.cluster, &n, err, sizeof(err));
    }
    cmap_t *m = text ? cmap_parse(text, n, err, sizeof(err)) : NULL;
    free(text);
    if (!m) {
        fprintf(stderr, "tallyd: --cluster %s: %s\n", app.opts.cluster, err);
        return 2;
    }
    if (app.opts.haproxy_slots) {
        wbuf_t b = WBUF_INIT;
        cmap_format_haproxy(m, &b);
        fwrite(b.data, 1, b.len, stdout);
        wbuf_free(&b);
    } else {
        char keyed[512], unkeyed[512];
        if (!api_keyed_paths(keyed, sizeof(keyed), unkeyed, sizeof(unkeyed))) {
            fprintf(stderr, "tallyd: --haproxy-config: the route table's keyed families do not fit in %zu bytes\n",
                    sizeof(keyed));
            cmap_free(m);
            return 2;
        }
        haproxy_config_write(m, app.opts.cluster, app.opts.haproxy_map[0] ? app.opts.haproxy_map : HAPROXY_MAP_DEFAULT,
                             app.opts.haproxy_socket[0] ? app.opts.haproxy_socket : HAPROXY_SOCKET_DEFAULT, keyed,
                             unkeyed, stdout);
    }
    cmap_free(m);
    return 0;
}

static const char *policies_word(size_t count)
{
    return count == 1 ? "rate-limit policy" : "rate-limit policies";
}

/* Reloads --tokens, --config and --rls-config (those given) for SIGHUP
 * and POST /admin/reload, one reload at a time; logs the outcome with `who`
 * asked.  False with a message when either file is refused (what it held
 * before stays; the other file is still reloaded) or when there is no file
 * to reload. */
static bool reload_files(const char *who, size_t *count, char *err, size_t errlen)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    if (!files_given()) {
        snprintf(err, errlen, "nothing to reload: tallyd was started without --config, --rls-config or --tokens");
        log_info("%s: %s", who, err);
        return false;
    }
    bool ok = true;
    err[0] = '\0';
    pthread_mutex_lock(&mu);
    if (app.opts.tokens[0]) {
        size_t ntok = 0;
        if (load_tokens(err, errlen, &ntok)) {
            log_info("%s: reloaded %s: %zu token%s", who, app.opts.tokens, ntok, ntok == 1 ? "" : "s");
        } else {
            log_error("%s: %s; keeping the tokens loaded before", who, err);
            size_t n = strlen(err);
            snprintf(err + n, errlen - n, "; the tokens loaded before stay");
            ok = false;
        }
    }
    if (app.opts.config[0]) {
        size_t used = strlen(err);
        char *perr = err + used + (used ? 2 : 0);
        size_t plen = errlen - used - (used ? 2 : 0);
        if (load_policies(perr, plen, count)) {
            log_info("%s: reloaded %s: %zu %s", who, app.opts.config, *count, policies_word(*count));
            err[used] = '\0';
        } else {
            if (used)
                memcpy(err + used, "; ", 2);
            log_error("%s: %s; keeping the policies loaded before", who, perr);
            size_t n = strlen(perr);
            snprintf(perr + n, plen - n, "; the policies loaded before stay");
            ok = false;
        }
    }
    if (app.opts.rls_config[0] && !rls_host_reload(who, err, errlen))
        ok = false;
    pthread_mutex_unlock(&mu);
    return ok;
}

/* Reloads everything reloadable for SIGHUP and POST /admin/reload: the TLS
 * files (service/tls.h), the cluster map, the replication credentials
 * (--replica-token-file, --peer-secret-file: service/repl.h), then --tokens
 * and --config (reload_files).  False with a message when any is refused
 * (what was loaded before stays). */
static bool reload_all(const char *who, size_t *count, char *err, size_t errlen)
{
    bool ok = true;
    err[0] = '\0';
    if (app.tls && !tls_reload(app.tls, who, err, errlen)) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, "; the TLS certificate loaded before stays");
        ok = false;
    }
    if (app.api.cluster) {
        char cerr[1024];
        if (!load_cluster(who, cerr, sizeof(cerr))) {
            size_t n = strlen(err);
            snprintf(err + n, errlen - n, "%s%s; the cluster map loaded before stays", n ? "; " : "", cerr);
            ok = false;
        }
    }
    repl_t *r = live_repl();
    if (r && repl_reloadable(&app.opts)) {
        char rerr[1024];
        if (repl_reload(r, &app.opts, rerr, sizeof(rerr))) {
            log_info("%s: reloaded the replication credentials (--replica-token-file, --peer-secret-file)", who);
        } else {
            log_error("%s: %s; keeping the replication credentials loaded before", who, rerr);
            size_t n = strlen(err);
            snprintf(err + n, errlen - n, "%s%s; the replication credentials loaded before stay", n ? "; " : "", rerr);
            ok = false;
        }
    }
    if ((app.tls || app.api.cluster || repl_reloadable(&app.opts)) && !files_given())
        return ok;   /* no tokens, policies or rate limit configuration to reload */
    char ferr[1024];
    if (!reload_files(who, count, ferr, sizeof(ferr))) {
        if (ok)
            snprintf(err, errlen, "%s", ferr);
        ok = false;
    }
    return ok;
}

static bool hook_reload(void *ud, size_t *count, char *err, size_t errlen)
{
    (void)ud;
    return reload_all("POST /admin/reload", count, err, errlen);
}

/* ------------------------------------------------------------------------ */
/* Pid file                                                                 */
/* ------------------------------------------------------------------------ */

/* Writes our pid to --pid-file (via a temporary file and rename, so a reader
 * never sees a partial file); false with a message. */
static bool pid_file_write(char *err, size_t errlen)
{
    const char *path = app.opts.pid_file;
    char tmp[sizeof(app.opts.pid_file) + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "--pid-file %s: %s", path, strerror(errno));
        if (f)
            unlink(tmp);
        return false;
    }
    return true;
}

/* Removes --pid-file on the way out, if it still names this process. */
static void pid_file_remove(void)
{
    if (!app.opts.pid_file[0])
        return;
    FILE *f = fopen(app.opts.pid_file, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    if (pid == (long)getpid())
        unlink(app.opts.pid_file);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

/* Whether --bind is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x). */
static bool bind_is_loopback(const char *bind)
{
    cidr_set_t lo;
    char why[160];
    bool yes = cidr_parse("127.0.0.0/8, ::1", &lo, why, sizeof(why)) && cidr_contains_text(&lo, bind, strlen(bind));
    cidr_set_free(&lo);
    return yes;
}

/* The browser checks and the TLS credentials; false with a message. */
static bool transport_open(char *err, size_t errlen)
{
    const tally_opts_t *o = &app.opts;
    app.guard = api_guard_create(o->allow_origin, o->allow_host, bind_is_loopback(o->bind), err, errlen);
    if (!app.guard)
        return false;
    app.api.guard = app.guard;
    if (o->tls_cert[0] && !(app.tls = tls_open(o, err, errlen))) {
        api_guard_free(app.guard);
        app.guard = NULL;
        return false;
    }
    return true;
}

static void transport_close(void)
{
    tls_close(app.tls);
    app.tls = NULL;
    app.api.guard = NULL;
    api_guard_free(app.guard);
    app.guard = NULL;
}

static uint64_t random_seed(void)
{
    uint64_t s;
    if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s))
        s = (uint64_t)clock_now_ns() ^ (uint64_t)clock_mono_ns() << 17;
    return s;
}

/* --tokens, --access-log and the refusal to serve a non-loopback address
 * to anyone; false after logging why tallyd cannot start. */
static bool auth_start(const tally_opts_t *o)
{
    char err[1024];
    if (!o->tokens[0] && !bind_is_loopback(o->bind) && !o->insecure_no_auth) {
        log_error("--bind %s without --tokens would let anyone who reaches the port read, change and delete "
                  "every key. Create a token: `head -c 32 /dev/urandom | base64 > token; tallyd --hash-token < token` "
                  "prints its sha256; list it in a file {\"tokens\":[{\"name\":\"app\",\"sha256\":\"<hex>\","
                  "\"scopes\":[\"read\",\"write\"]}]} and start with --tokens FILE (docs/security.md). "
                  "Or bind 127.0.0.1, or pass --insecure-no-auth to serve without tokens anyway; refusing to start",
                  o->bind);
        return false;
    }
    if (o->tokens[0]) {
        size_t count = 0;
        app.api.auth = api_auth_create(o->auth_fail_limit, o->metrics_public);
        if (!app.api.auth || !load_tokens(err, sizeof(err), &count)) {
            log_error("%s; refusing to start", app.api.auth ? err : "out of memory");
            return false;
        }
        log_info("--tokens %s: %zu token%s; every route but /healthz and /readyz%s needs one", o->tokens, count,
                 count == 1 ? "" : "s", o->metrics_public ? " and /metrics" : "");
    } else if (!bind_is_loopback(o->bind)) {
        log_warn("--insecure-no-auth: serving %s without tokens: anyone who reaches the port can do anything",
                 o->bind);
    }
    if (o->access_log[0] && !access_log_open(o->access_log, err, sizeof(err))) {
        log_error("%s; refusing to start", err);
        return false;
    }
    return true;
}

static int run(void)
{
    char err[1024];
    const tally_opts_t *o = &app.opts;
    app.started_mono = clock_mono_ns();

    if (!auth_start(o)) {
        api_auth_free(app.api.auth);
        return 1;
    }

    if (o->config[0]) {
        size_t count = 0;
        app.api.policies = api_policies_create();
        if (!app.api.policies || !load_policies(err, sizeof(err), &count)) {
            log_error("%s; refusing to start", app.api.policies ? err : "out of memory");
            api_policies_free(app.api.policies);
            api_auth_free(app.api.auth);
            access_log_close();
            return 1;
        }
        log_info("--config %s: %zu %s", o->config, count, policies_word(count));
    }

    if (o->cluster[0]) {
        if (!o->cluster_node[0]) {
            log_error("--cluster needs --cluster-node NAME (this node's name in the map); refusing to start");
            return 1;
        }
        app.cluster_in_etcd = clusterwatch_spec(o->cluster, app.cluster_prefix, sizeof(app.cluster_prefix));
        app.api.cluster = cmd_cluster_create(o->cluster_node, app.cluster_in_etcd ? cluster_store_etcd : cluster_store,
                                             NULL);
        bool ok = app.api.cluster != NULL;
        if (!ok)
            snprintf(err, sizeof(err), "out of memory");
        else if (!app.cluster_in_etcd)
            ok = load_cluster("start", err, sizeof(err));
        else if ((app.cluster_etcd = cluster_etcd_open(err, sizeof(err))) == NULL)
            ok = false;
        else if ((app.cluster_watch = clusterwatch_start(app.cluster_etcd, app.cluster_prefix, app.api.cluster,
                                                         10000, err, sizeof(err))) == NULL)
            ok = false;
        else
            log_info("start: cluster map epoch %llu from etcd (%s/map, watched), this node is '%s'",
                     (unsigned long long)cmd_cluster_epoch(app.api.cluster), app.cluster_prefix, o->cluster_node);
        if (!ok) {
            log_error("%s; refusing to start", err);
            etcd_close(app.cluster_etcd);
            cmd_cluster_free(app.api.cluster);
            return 1;
        }
    }

    if (!rls_host_start(&app.api, o, err, sizeof(err)) || !transport_open(err, sizeof(err))) {
        log_error("%s; refusing to start", err);
        api_policies_free(app.api.policies);
        return 1;
    }

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);   /* every thread inherits this; main waits for them */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);   /* a file size limit fails writes (EFBIG) instead of killing us */

    /* secret hash seeds: clients cannot precompute colliding keys or members */
    app.ks = ks_create(o->shard_bits, random_seed());
    zindex_set_seed(random_seed());
    if (!app.ks) {
        log_error("out of memory creating the keyspace");
        transport_close();
        return 1;
    }
    ks_set_maxmemory(app.ks, o->maxmemory, o->policy);
    app.api.ks = app.ks;
    app.api.limits = (api_limits_t){ o->max_value, o->max_answer };
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
    metrics_init();

    server_hooks_t sh = { 0 };
    if (!o->in_memory)
        sh = (server_hooks_t){ NULL, hook_wait, hook_try, hook_wait_async };
    app.server = server_start(o, &app.api, &sh, err, sizeof(err));
    if (!app.server) {
        log_error("%s", err);
        ks_free(app.ks);
        transport_close();
        return 1;
    }
    atomic_store_explicit(&app.live_server, app.server, memory_order_release);
    char fronts_at[192];
    fronts_hooks_t fh = { NULL, o->in_memory ? NULL : hook_try, o->in_memory ? NULL : hook_wait_async, app.tls };
    if (!fronts_start(o, &app.api, &fh, fronts_at, sizeof(fronts_at), err, sizeof(err))) {
        log_error("%s; refusing to start", err);
        server_stop(app.server);
        ks_free(app.ks);
        transport_close();
        return 1;
    }
    log_info("tallyd %s listening on %s:%d (%d threads, %u shards)%s; loading", TALLY_VERSION, o->bind,
             server_port(app.server), o->threads, ks_shard_count(app.ks), fronts_at);
    if (o->pid_file[0] && !pid_file_write(err, sizeof(err))) {
        log_error("%s; refusing to start", err);
        fronts_stop();
        server_stop(app.server);
        ks_free(app.ks);
        transport_close();
        return 1;
    }

    if (!o->in_memory) {
        /* the replica token and the group's secret, before the data loads:
         * a refused file stops the start at once */
        repl_creds_t *creds = malloc(sizeof(*creds));
        bool creds_ok = creds && repl_creds_load(o, creds, err, sizeof(err));
        if (!creds)
            snprintf(err, sizeof(err), "out of memory");
        if (creds_ok)
            app.persist = persist_open(o, &app.api, err, sizeof(err));
        if (!app.persist) {
            if (creds)
                repl_creds_wipe(creds);
            free(creds);
            log_error("%s%s", err, creds_ok ? "" : "; refusing to start");
            fronts_stop();
            server_stop(app.server);
            pid_file_remove();
            ks_free(app.ks);
            transport_close();
            return 1;
        }
        atomic_store_explicit(&app.live_persist, app.persist, memory_order_release);
        persist_set_load_gate(app.persist, gate_loading, NULL);
        app.repl = repl_open(o, creds, &app.api, app.persist, err, sizeof(err));
        repl_creds_wipe(creds);
        free(creds);
        if (!app.repl) {
            log_error("%s", err);
            fronts_stop();
            server_stop(app.server);
            atomic_store(&app.live_persist, NULL);
            persist_close(app.persist);
            pid_file_remove();
            ks_free(app.ks);
            transport_close();
            return 1;
        }
        atomic_store_explicit(&app.live_repl, app.repl, memory_order_release);
        if (o->coordinator[0] && !(app.coord = coord_open(o, app.repl, err, sizeof(err)))) {
            log_error("%s", err);
            fronts_stop();
            server_stop(app.server);
            atomic_store(&app.live_repl, NULL);
            repl_close(app.repl);
            atomic_store(&app.live_persist, NULL);
            persist_close(app.persist);
            pid_file_remove();
            ks_free(app.ks);
            transport_close();
            return 1;
        }
    } else {
        log_warn("--in-memory: nothing is written to disk; state is lost when tallyd stops");
    }
    /* keys in slots this node does not serve would be invisible (every
     * request for them is sent to their owner): refuse to serve, saying why */
    char mkey[256], mowner[CMAP_NAME_MAX + 1];
    unsigned mslot = 0;
    uint64_t misplaced = app.api.cluster ? cmd_cluster_misplaced(app.api.cluster, app.ks, clock_now_ns() / 1000000,
                                                                 mkey, sizeof(mkey), &mslot, mowner, sizeof(mowner))
                                         : 0;
    if (misplaced) {
        log_error("--cluster: %llu of the %llu keys held here are in slots this node neither owns nor imports "
                  "(e.g. \"%s\": slot %u, node %s's): keys placed by tally's former slot function (CRC32, before "
                  "Redis Cluster's CRC16), or left by a map changed without moving them; refusing to start (start "
                  "without --cluster to read them; deploy/cluster/README.md, \"Upgrading across the slot change\", "
                  "says how to place them again)",
                  (unsigned long long)misplaced, (unsigned long long)ks_total_keys(app.ks), mkey, mslot, mowner);
        raise(SIGTERM);   /* blocked here: the loop below ends at once, through the clean shutdown */
    } else {
        server_set_ready(app.server, true);
        fronts_set_ready(true);
        log_info("ready: %llu keys", (unsigned long long)ks_total_keys(app.ks));
    }

    /* housekeeping until a signal says stop: an expiry step every 10 ms,
     * the rest every 100 ms */
    unsigned expire_shards = (ks_shard_count(app.ks) + EXPIRE_STEPS - 1) / EXPIRE_STEPS;
    if (expire_shards > EXPIRE_STEP_SHARDS_MAX)
        expire_shards = EXPIRE_STEP_SHARDS_MAX;
    int64_t next_tick = clock_mono_ns();
    int sig;
    for (;;) {
        struct timespec step = { 0, (long)(TICK_NS / EXPIRE_STEPS) };
        sig = sigtimedwait(&sigs, NULL, &step);
        if (sig == SIGTERM || sig == SIGINT)
            break;
        if (sig == SIGHUP) {
            size_t count = 0;
            if (app.tls || app.api.cluster || files_given() || repl_reloadable(&app.opts))
                reload_all("SIGHUP", &count, err, sizeof(err));
            if (!access_log_reopen(err, sizeof(err)))
                log_error("SIGHUP: %s; still writing the access log to the file open before", err);
            continue;
        }
        ks_expire_step(app.ks, clock_now_ns() / 1000000, EXPIRE_SAMPLES, expire_shards);
        int64_t now = clock_mono_ns();
        if (now < next_tick)
            continue;
        next_tick = now + TICK_NS;
        if (app.persist)
            persist_tick(app.persist);
        if (app.repl)
            repl_tick(app.repl);
        server_tick(app.server);
        if (app.tls)
            tls_tick(app.tls);
    }

    log_info("%s: shutting down: no new connections; waiting for %u in-flight requests", strsignal(sig),
             server_inflight(app.server));
    server_set_ready(app.server, false);
    server_quiesce(app.server);
    fronts_quiesce();   /* gRPC: a GOAWAY on each connection, its open streams finish */
    if (!server_drain(app.server, o->shutdown_timeout))
        log_warn("%u requests still in flight after %d s; closing them", server_inflight(app.server),
                 o->shutdown_timeout);
    fronts_drain(o->shutdown_timeout);
    atomic_store(&app.live_server, NULL);
    pthread_mutex_lock(&gate_mu);
    fronts_stop();   /* each loop ends the command it runs */
    server_stop(app.server);
    app.server = NULL;
    pthread_mutex_unlock(&gate_mu);
    int rc = 0;
    coord_close(app.coord);   /* a primary gives its key up: another member takes over at once */
    atomic_store(&app.live_repl, NULL);
    repl_close(app.repl);
    if (app.persist) {
        snapshot_stats_t st;
        if (persist_dirty(app.persist) > 0 && !persist_snapshot(app.persist, &st, err, sizeof(err))) {
            log_error("final snapshot failed: %s; the journal still holds every change", err);
            rc = 1;
        }
        atomic_store(&app.live_persist, NULL);
        persist_close(app.persist);
    }
    rls_host_stop();
    ks_free(app.ks);
    api_policies_free(app.api.policies);
    transport_close();
    api_auth_free(app.api.auth);
    clusterwatch_stop(app.cluster_watch);
    etcd_close(app.cluster_etcd);
    cmd_cluster_free(app.api.cluster);
    access_log_close();
    pid_file_remove();
    log_info("stopped");
    return misplaced ? 1 : rc;
}

/* tallyd --hash-token: the SHA-256 of the token on stdin (one trailing
 * newline, as `echo` adds, is not part of it), in hex, for --tokens. */
static int hash_token(void)
{
    char buf[API_TOKEN_MAX_LEN + 3];
    size_t n = fread(buf, 1, sizeof(buf), stdin);
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    if (n == 0 || n > API_TOKEN_MAX_LEN || memchr(buf, '\n', n)) {
        fprintf(stderr, "tallyd --hash-token: give one token of 1 to %d bytes on stdin, e.g.\n"
                        "  head -c 32 /dev/urandom | base64 > token && tallyd --hash-token < token\n",
                API_TOKEN_MAX_LEN);
        return 2;
    }
    char hex[2 * API_TOKEN_SHA256_LEN + 1];
    api_token_hash_hex(buf, n, hex);
    printf("%s\n", hex);
    return 0;
}

int main(int argc, char **argv)
{
    const char *check = NULL;
    char err[512];
    switch (opts_parse(&app.opts, argc, argv, &check, err, sizeof(err))) {
    case OPTS_HELP:
        opts_usage(stdout);
        return 0;
    case OPTS_VERSION:
        printf("tallyd %s\n", TALLY_VERSION);
        return 0;
    case OPTS_ROUTES:
        for (size_t i = 0; i < api_route_count(); i++) {
            api_route_meta_t m = api_route_meta(i);
            printf("%s %s %s%s%s%s\n", m.method, m.pattern, api_access_name(m.access), m.binary ? " octet-stream" : "",
                   m.command ? " " : "", m.command ? m.command : "");
        }
        return 0;
    case OPTS_CHECK:
        return persist_check(check, stdout);
    case OPTS_HASH_TOKEN:
        return hash_token();
    case OPTS_ERROR:
        fprintf(stderr, "tallyd: %s\n", err);
        return 2;
    case OPTS_RUN:
        break;
    }
    if (app.opts.haproxy_lua) {
        haproxy_lua_write(stdout);
        return 0;
    }
    if (app.opts.haproxy_config || app.opts.haproxy_slots)
        return print_haproxy_config();
    log_set_level(app.opts.log_level);
    curl_global_init(CURL_GLOBAL_DEFAULT);   /* before any thread: replication's HTTP client */
    int rc = run();
    curl_global_cleanup();
    return rc;
}
