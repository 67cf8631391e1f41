/* rls_host.c - see rls_host.h. */
#include "service/rls_host.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "service/log.h"

static struct {
    char path[512];
    rls_t *rls;
    pthread_mutex_t reload;      /* one reload at a time */
} host = { .reload = PTHREAD_MUTEX_INITIALIZER };

static void log_loaded(const char *who, const rls_set_t *s)
{
    size_t d = rls_set_domains(s), r = rls_set_rules(s);
    log_info("%s: --rls-config %s: %zu domain%s, %zu rate limit rule%s", who, host.path, d, d == 1 ? "" : "s", r,
             r == 1 ? "" : "s");
}

bool rls_host_start(cmd_server_t *srv, const tally_opts_t *o, char *err, size_t errlen)
{
    if (!o->rls_config[0])
        return true;
    snprintf(host.path, sizeof(host.path), "%s", o->rls_config);
    rls_set_t *s = rls_set_load(host.path, err, errlen);
    if (!s)
        return false;
    log_loaded("start", s);
    rls_options_t opt = { .charge_all = o->rls_charge_all, .ratelimit_headers = o->rls_response_headers };
    if (!(host.rls = rls_new(srv, &opt, s))) {
        rls_set_release(s);
        snprintf(err, errlen, "--rls-config: out of memory");
        return false;
    }
    return true;
}

rls_t *rls_host_get(void)
{
    return host.rls;
}

bool rls_host_reload(const char *who, char *err, size_t errlen)
{
    if (!host.rls)
        return true;
    size_t used = strlen(err), sep = used ? 2 : 0;
    if (used + sep + 1 >= errlen)
        return false;
    char *mine = err + used + sep;
    pthread_mutex_lock(&host.reload);
    rls_set_t *s = rls_set_load(host.path, mine, errlen - used - sep);
    if (s) {
        log_loaded(who, s);
        rls_swap(host.rls, s);
        err[used] = '\0';
    } else {
        log_error("%s: %s; keeping the rate limit configuration loaded before", who, mine);
        size_t n = strlen(mine);
        snprintf(mine + n, errlen - used - sep - n, "; the rate limit configuration loaded before stays");
        if (sep)
            memcpy(err + used, "; ", 2);
    }
    pthread_mutex_unlock(&host.reload);
    return s != NULL;
}

void rls_host_metrics(wbuf_t *out)
{
    if (host.rls)
        rls_metrics_render(host.rls, out);
}

void rls_host_stop(void)
{
    rls_free(host.rls);
    host.rls = NULL;
}
