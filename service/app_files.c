/*
 * app_files.c - the files tallyd reads, at start-up and again on SIGHUP or
 * POST /admin/reload (service/app.h): --config's policies, --tokens,
 * --rls-config (service/rls_host.c), the cluster map of --cluster FILE
 * (and the map in etcd, --cluster etcd:PREFIX, read once and watched), the
 * TLS files (service/tls.c) and replication's credentials (service/repl.h).
 * A file refused keeps what was loaded before.  Also tallyd
 * --haproxy-config and --haproxy-slots, which read the cluster map and
 * print.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/cluster.h"
#include "api/ratelimit.h"
#include "api/router.h"
#include "service/app.h"
#include "service/clusterwatch.h"
#include "service/coord.h"
#include "service/etcd.h"
#include "service/file.h"
#include "service/haproxy.h"
#include "service/log.h"
#include "service/repl.h"
#include "service/rls_host.h"
#include "service/tls.h"

/* ------------------------------------------------------------------------ */
/* Policies and tokens                                                      */
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
bool app_load_policies(char *err, size_t errlen, size_t *count)
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

const char *app_policies_word(size_t count)
{
    return count == 1 ? "rate-limit policy" : "rate-limit policies";
}

/* Reads --tokens and installs its tokens; false with a message (the old
 * tokens stay). */
bool app_load_tokens(char *err, size_t errlen, size_t *count)
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

/* ------------------------------------------------------------------------ */
/* Cluster map                                                              */
/* ------------------------------------------------------------------------ */

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
    /* the same members and credentials as the election */
    return coord_etcd_open(&app.opts, 0, err, errlen);
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

/* --cluster at start-up: the map read from the file, or from etcd and
 * watched; false after logging why tallyd cannot start (what it created is
 * freed). */
bool app_cluster_open(char *err, size_t errlen)
{
    const tally_opts_t *o = &app.opts;
    if (!o->cluster_node[0]) {
        log_error("--cluster needs --cluster-node NAME (this node's name in the map); refusing to start");
        return false;
    }
    app.cluster_in_etcd = clusterwatch_spec(o->cluster, app.cluster_prefix, sizeof(app.cluster_prefix));
    app.api.cluster = cmd_cluster_create(o->cluster_node, app.cluster_in_etcd ? cluster_store_etcd : cluster_store,
                                         NULL);
    bool ok = app.api.cluster != NULL;
    if (!ok)
        snprintf(err, errlen, "out of memory");
    else if (!app.cluster_in_etcd)
        ok = load_cluster("start", err, errlen);
    else if ((app.cluster_etcd = cluster_etcd_open(err, errlen)) == NULL)
        ok = false;
    else if ((app.cluster_watch = clusterwatch_start(app.cluster_etcd, app.cluster_prefix, app.api.cluster,
                                                     10000, err, errlen)) == NULL)
        ok = false;
    else
        log_info("start: cluster map epoch %llu from etcd (%s/map, watched), this node is '%s'",
                 (unsigned long long)cmd_cluster_epoch(app.api.cluster), app.cluster_prefix, o->cluster_node);
    if (!ok) {
        log_error("%s; refusing to start", err);
        etcd_close(app.cluster_etcd);
        cmd_cluster_free(app.api.cluster);
        return false;
    }
    return true;
}

/* tallyd --cluster FILE --haproxy-config [--haproxy-map PATH] [--haproxy-socket PATH]:
 * the configuration; tallyd --cluster FILE --haproxy-slots: its slot map file
 * (tallyd --haproxy-lua, its Lua script, needs no map: main). */
int app_print_haproxy_config(void)
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

/* ------------------------------------------------------------------------ */
/* Reloading                                                                */
/* ------------------------------------------------------------------------ */

static bool files_given(void) { return app.opts.config[0] || app.opts.tokens[0] || app.opts.rls_config[0]; }

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
        if (app_load_tokens(err, errlen, &ntok)) {
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
        if (app_load_policies(perr, plen, count)) {
            log_info("%s: reloaded %s: %zu %s", who, app.opts.config, *count, app_policies_word(*count));
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
bool app_reload_all(const char *who, size_t *count, char *err, size_t errlen)
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
    repl_t *r = app_live_repl();
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

/* SIGHUP: app_reload_all when there is anything to reload. */
void app_reload_on_sighup(char *err, size_t errlen)
{
    size_t count = 0;
    if (app.tls || app.api.cluster || files_given() || repl_reloadable(&app.opts))
        app_reload_all("SIGHUP", &count, err, errlen);
}
