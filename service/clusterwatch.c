/* clusterwatch.c - the cluster map read from etcd and watched: see clusterwatch.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/clusterwatch.h"
#include "service/log.h"

struct cluster_watch {
    etcd_client_t *etcd;
    cmd_cluster_t *cluster;
    char key[CLUSTERWATCH_PREFIX_MAX + 8];
    pthread_t thread;
    volatile int stop;    /* set by clusterwatch_stop; read and written with __atomic builtins */
    int64_t revision;     /* the store's revision the watch starts after */
    bool refused;         /* the last value read was refused (read at start, before the thread runs) */
};

bool clusterwatch_spec(const char *arg, char *prefix, size_t n)
{
    if (strcmp(arg, "etcd") == 0) {
        snprintf(prefix, n, "%s", CLUSTERWATCH_PREFIX_DEFAULT);
        return true;
    }
    if (strncmp(arg, "etcd:", 5) != 0)
        return false;
    size_t len = strlen(arg + 5);
    while (len > 1 && arg[5 + len - 1] == '/')
        len--;
    snprintf(prefix, n, "%.*s", (int)len, arg + 5);
    return true;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Installs one value of the key; counts and logs the outcome. */
static void apply(cluster_watch_t *w, const char *text, size_t len, int64_t rev, const char *who)
{
    char err[600];
    uint64_t before = cmd_cluster_epoch(w->cluster);
    bool ok = cmd_cluster_set(w->cluster, text, len, false, err, sizeof(err));
    w->refused = !ok;
    if (!ok)
        log_error("%s: the cluster map at %s (revision %lld) refused: %s", who, w->key, (long long)rev, err);
    else if (cmd_cluster_epoch(w->cluster) != before)
        log_info("%s: cluster map epoch %llu from %s (revision %lld)", who,
                 (unsigned long long)cmd_cluster_epoch(w->cluster), w->key, (long long)rev);
}

/* Reads the key and installs it: 1 found, 0 absent, -1 etcd did not answer. */
static int read_key(cluster_watch_t *w, int64_t *revision, const char *who)
{
    etcd_kv_t kv;
    int found = 0;
    if (etcd_get(w->etcd, w->key, strlen(w->key), &kv, &found, revision) != 0)
        return -1;
    if (!found)
        return 0;
    apply(w, kv.value, kv.value_len, kv.mod_revision, who);
    etcd_kv_free(&kv);
    return 1;
}

static int on_event(void *arg, const etcd_event_t *ev, int64_t revision)
{
    cluster_watch_t *w = arg;
    (void)revision;
    if (ev->kind == ETCD_EVENT_PUT)
        apply(w, ev->kv->value, ev->kv->value_len, ev->kv->mod_revision, "etcd watch");
    else
        log_error("etcd watch: the cluster map %s was deleted (revision %lld); keeping epoch %llu", w->key,
                  (long long)ev->kv->mod_revision, (unsigned long long)cmd_cluster_epoch(w->cluster));
    return __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE) != 0;
}

static void *run(void *arg)
{
    cluster_watch_t *w = arg;
    int64_t rev = w->revision;
    bool logged = false;
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        int64_t next = rev + 1;
        if (etcd_watch(w->etcd, w->key, strlen(w->key), 0, rev + 1, on_event, w, &w->stop, &next) == 0)
            break;
        if (!logged)
            log_warn("etcd watch of %s: %s; reading it again", w->key, etcd_error(w->etcd));
        /* the stream broke: read the key again (a change made meanwhile is
         * installed now) and watch from the store's revision */
        for (;;) {
            if (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE))
                return NULL;
            int64_t store_rev = 0;
            int r = read_key(w, &store_rev, "etcd");
            if (r >= 0) {
                rev = store_rev;
                logged = false;
                break;
            }
            if (!logged)
                log_warn("etcd: cannot read %s: %s; trying again", w->key, etcd_error(w->etcd));
            logged = true;
            sleep_ms(200);
        }
    }
    return NULL;
}

cluster_watch_t *clusterwatch_start(etcd_client_t *etcd, const char *prefix, cmd_cluster_t *c, long wait_ms,
                                    char *err, size_t errlen)
{
    cluster_watch_t *w = calloc(1, sizeof(*w));
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    w->etcd = etcd;
    w->cluster = c;
    snprintf(w->key, sizeof(w->key), "%s/map", prefix);
    int64_t rev = 0;
    int r = -1;
    for (long waited = 0;; waited += 200) {
        r = read_key(w, &rev, "start");
        if (r >= 0 || waited >= wait_ms)
            break;
        sleep_ms(200);
    }
    if (r < 0)
        snprintf(err, errlen, "cannot read the cluster map %s from etcd: %s", w->key, etcd_error(etcd));
    else if (r == 0)
        snprintf(err, errlen, "etcd holds no cluster map at %s (write the first with tally-reshard --init FILE)",
                 w->key);
    else if (cmd_cluster_epoch(c) == 0 && w->refused)
        snprintf(err, errlen, "the cluster map at %s was refused (the log says why)", w->key);
    if (r <= 0 || (cmd_cluster_epoch(c) == 0 && w->refused)) {
        free(w);
        return NULL;
    }
    w->revision = rev;   /* watch from the store's revision: nothing after it is missed */
    if (pthread_create(&w->thread, NULL, run, w) != 0) {
        snprintf(err, errlen, "cannot start the etcd watch thread");
        free(w);
        return NULL;
    }
    return w;
}

void clusterwatch_stop(cluster_watch_t *w)
{
    if (!w)
        return;
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
    pthread_join(w->thread, NULL);
    free(w);
}
