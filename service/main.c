/*
 * main.c - tallyd: flags and environment, start-up, the housekeeping loop,
 * signals and graceful shutdown, the pid file.  The hooks the layers call
 * are app_hooks.c's, the files tallyd reads and reloads app_files.c's; the
 * state the three share is service/app.h's.
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
 * the files tallyd reads (app_files.c: --config, --tokens, --rls-config,
 * --cluster FILE, the TLS files, replication's credentials; each file
 * refused keeps what was loaded before) and reopens --access-log.
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
#include "service/app.h"
#include "service/clock.h"
#include "service/clusterwatch.h"
#include "service/etcd.h"
#include "service/haproxy.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/options.h"
#include "service/fronts.h"
#include "service/persist.h"
#include "service/coord.h"
#include "service/repl.h"
#include "service/rls_host.h"
#include "service/server.h"
#include "service/tls.h"

/* jemalloc's options (release builds link it: Makefile): a background
 * thread gives freed pages back to the system as they decay (10 s), as
 * Redis's jemalloc-bg-thread does, so that what a burst of requests left
 * behind does not stay in an idle server's resident set (1M sliding
 * windows loaded in HTTP batches of 10 000: 136 B of RSS a key right
 * after, 75 B 12 s later; without it 136 B until the allocator is busy
 * again).  MALLOC_CONF in the environment applies on top. */
const char *malloc_conf = "background_thread:true";

#define EXPIRE_SAMPLES 20   /* volatile keys sampled per shard visited, as Redis's ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP */
/* Active expiry visits every shard each 100 ms tick (at most 320 shards a
 * tick), in EXPIRE_STEPS steps 10 ms apart: one pass over 256 shards takes
 * about half a millisecond, and on a server with one core a request waited
 * for all of it. */
#define TICK_NS (100 * 1000000LL)
#define EXPIRE_STEPS 10
#define EXPIRE_STEP_SHARDS_MAX 32

/* The process's state (service/app.h says who owns what), the one instance. */
tally_app_t app = { .gate_mu = PTHREAD_MUTEX_INITIALIZER };

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
        if (!app.api.auth || !app_load_tokens(err, sizeof(err), &count)) {
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
        if (!app.api.policies || !app_load_policies(err, sizeof(err), &count)) {
            log_error("%s; refusing to start", app.api.policies ? err : "out of memory");
            api_policies_free(app.api.policies);
            api_auth_free(app.api.auth);
            access_log_close();
            return 1;
        }
        log_info("--config %s: %zu %s", o->config, count, app_policies_word(count));
    }

    if (o->cluster[0] && !app_cluster_open(err, sizeof(err)))
        return 1;

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
    server_hooks_t sh;
    fronts_hooks_t fh;
    app_hooks_install(&sh, &fh);
    metrics_init();

    app.server = server_start(o, &app.api, &sh, err, sizeof(err));
    if (!app.server) {
        log_error("%s", err);
        ks_free(app.ks);
        transport_close();
        return 1;
    }
    atomic_store_explicit(&app.live_server, app.server, memory_order_release);
    char fronts_at[192];
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
        persist_set_load_gate(app.persist, app_gate_loading, NULL);
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
            app_reload_on_sighup(err, sizeof(err));
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
    pthread_mutex_lock(&app.gate_mu);
    fronts_stop();   /* each loop ends the command it runs */
    server_stop(app.server);
    app.server = NULL;
    pthread_mutex_unlock(&app.gate_mu);
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
        return app_print_haproxy_config();
    log_set_level(app.opts.log_level);
    curl_global_init(CURL_GLOBAL_DEFAULT);   /* before any thread: replication's HTTP client */
    int rc = run();
    curl_global_cleanup();
    return rc;
}
