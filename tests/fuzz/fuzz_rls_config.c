/*
 * fuzz_rls_config.c - envoyproxy/ratelimit's configuration reader
 * (rls_set_parse): hostile YAML through libyaml and the tree it builds.  A
 * set that loads is then asked, for every descriptor path it configures
 * (wildcards filled in), a ShouldRateLimit of that path on an in-memory
 * server, twice, so matching, keys, the batch, headers and metrics run on
 * whatever the file held.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "core/keyspace.h"
#include "rls/rls_int.h"

#define PATH_MAX_DEPTH 4   /* descriptor levels asked */

typedef struct walk {
    rls_t *r;
    cmd_server_t *srv;
    const char *domain;
    rls_entry_t entries[PATH_MAX_DEPTH];
    char values[PATH_MAX_DEPTH][64];
    unsigned asked;
} walk_t;

static void ask(walk_t *w, size_t depth)
{
    rls_descriptor_t d[2];
    memset(d, 0, sizeof(d));
    d[0].entries = w->entries;
    d[0].nentries = depth;
    d[1] = d[0];
    d[1].has_hits_addend = true;
    d[1].hits_addend = w->asked % 3;
    rls_request_t q = { { w->domain, strlen(w->domain) }, d, 2, w->asked % 4, false };
    for (int i = 0; i < 2; i++) {
        cmd_ctx_t ctx;
        cmd_ctx_init(&ctx, w->srv, 1700000000LL * 1000000000LL + i, false, 0);
        rls_result_t res;
        if (rls_should_rate_limit(w->r, &ctx, &q, &res)) {
            if (res.n != 2)
                abort();
            rls_result_free(&res);
        }
        cmd_ctx_end(&ctx);
    }
    w->asked++;
}

static void walk(walk_t *w, const rls_node_t *n, size_t depth)
{
    for (size_t i = 0; i < n->nchildren && w->asked < 64; i++) {
        const rls_node_t *c = &n->children[i];
        if (depth >= PATH_MAX_DEPTH)
            return;
        char *v = w->values[depth];
        size_t k = 0;
        for (const char *p = c->value ? c->value : "any"; *p && k < sizeof(w->values[depth]) - 1; p++)
            v[k++] = *p == '*' ? 'x' : *p;
        v[k] = '\0';
        w->entries[depth].key.p = c->key;
        w->entries[depth].key.len = strlen(c->key);
        w->entries[depth].value.p = v;
        w->entries[depth].value.len = k;
        ask(w, depth + 1);
        walk(w, c, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[600];
    rls_set_t *s = rls_set_parse("fuzz.yaml", data, size, err, sizeof(err));
    if (!s) {
        if (!strstr(err, "fuzz.yaml"))
            abort();   /* every refusal names the file */
        return 0;
    }
    cmd_server_t srv;
    memset(&srv, 0, sizeof(srv));
    srv.ks = ks_create(1, 42);
    rls_options_t opt = { .charge_all = size % 2, .ratelimit_headers = true };
    rls_set_retain(s);
    rls_t *r = srv.ks ? rls_new(&srv, &opt, s) : NULL;
    if (r) {
        walk_t w = { .r = r, .srv = &srv };
        for (size_t i = 0; i < s->ndomains; i++) {
            w.domain = s->domains[i].name;
            walk(&w, &s->domains[i].root, 0);
        }
        wbuf_t m = WBUF_INIT;
        rls_metrics_render(r, &m);
        wbuf_free(&m);
        rls_free(r);
    } else {
        rls_set_release(s);
    }
    rls_set_release(s);
    if (srv.ks)
        ks_free(srv.ks);
    return 0;
}
