/*
 * tally-reshard - moves a range of cluster slots from its owner to another
 * node while clients keep reading and writing (deploy/cluster/README.md).
 *
 *   tally-reshard --node URL --slots LO-HI --to NAME [--token TOKEN] [--batch N]
 *                 [--haproxy-socket SOCKET]... [--haproxy-map PATH]
 *
 * Redis Cluster's resharding, over tally's HTTP API:
 *
 *   1. Read the map from every node (GET /cluster) and take the one with
 *      the highest epoch: a run that was interrupted resumes from whatever
 *      step the nodes have reached.
 *   2. Unless the range is already migrating to NAME: add `migrate LO-HI
 *      SOURCE NAME` under epoch+1 and install it (PUT /admin/cluster) on the
 *      target first (it now accepts the range's keys from clients sent by
 *      an ASK), then the source (it now serves only keys it still holds and
 *      answers 421 ASK for the rest), then every other node.
 *   3. Move every key of the range: list the source's keys in the range
 *      (GET /keys?slots=LO-HI), and for each: dump it on the source
 *      (GET /keys/{key}/dump, with its Tally-Digest), restore it on the
 *      target (PUT /keys/{key}/restore?replace=true with X-Tally-Asking: 1),
 *      delete it on the source only if it is still the value dumped
 *      (DELETE /keys/{key}?digest=); a 412 means a client wrote it in
 *      between, and the key is moved again.  Passes repeat until one finds
 *      no key: a key that has left the source is never created there again
 *      (the source answers ASK for a key it does not hold), so the range
 *      empties.
 *   4. Flip: the range is NAME's under epoch+1, installed on the target,
 *      then the source (which then answers 421 MOVED), then the others.
 *   5. HAProxy follows (each --haproxy-socket is checked before step 2: it
 *      must answer, hold the slot map and a backend for every node, or the
 *      tool stops before anything changes): for each, the running proxy's slot
 *      map (--haproxy-map, the file name its configuration reads) is
 *      replaced atomically over its admin socket (service/haproxy.h), so
 *      requests for the range go straight to NAME; the map file itself is
 *      rewritten when it exists on this machine, for HAProxy's next start.
 *      Until then HAProxy sends the range to the old owner, which answers
 *      MOVED: slower, never wrong.
 *
 * No acknowledged write is lost: a write the source acknowledged happened
 * under the key's lock either before the dump (then it is in the dump) or
 * after it (then the digest differs and the key is moved again); after the
 * delete, the source redirects, so the target holds every later write.
 * Progress goes to stderr; the exit status is 0 when the range is moved.
 */
#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/clustermap.h"
#include "service/haproxy.h"

#define MAX_MOVE_TRIES 1000
#define MAX_PROXIES 32

typedef struct buf {
    char *p;
    size_t len;
} buf_t;

typedef struct resp {
    long status;
    buf_t body;
    char digest[32];
} resp_t;

static const char *token;
static long batch = 1000;
static const char *proxies[MAX_PROXIES];   /* --haproxy-socket */
static size_t nproxies;
static const char *proxy_map = HAPROXY_MAP_DEFAULT;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tally-reshard: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    buf_t *b = ud;
    char *q = realloc(b->p, b->len + size * n + 1);
    if (!q)
        return 0;
    memcpy(q + b->len, p, size * n);
    b->len += size * n;
    q[b->len] = '\0';
    b->p = q;
    return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    resp_t *r = ud;
    size_t len = size * n;
    static const char name[] = "Tally-Digest:";
    if (len > sizeof(name) && strncasecmp(p, name, sizeof(name) - 1) == 0) {
        size_t i = sizeof(name) - 1, j = 0;
        while (i < len && p[i] == ' ')
            i++;
        while (i < len && p[i] != '\r' && p[i] != '\n' && j + 1 < sizeof(r->digest))
            r->digest[j++] = p[i++];
        r->digest[j] = '\0';
    }
    return len;
}

/* One request; the transport failing is fatal (the run can be resumed). */
static resp_t request(const char *method, const char *url, const void *body, size_t len, const char *ctype,
                      bool asking)
{
    resp_t r = { 0 };
    CURL *c = curl_easy_init();
    if (!c)
        die("out of memory");
    struct curl_slist *h = NULL;
    char line[600];
    if (token) {
        snprintf(line, sizeof(line), "Authorization: Bearer %s", token);
        h = curl_slist_append(h, line);
    }
    if (ctype) {
        snprintf(line, sizeof(line), "Content-Type: %s", ctype);
        h = curl_slist_append(h, line);
    }
    if (asking)
        h = curl_slist_append(h, "X-Tally-Asking: 1");
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        die("%s %s: %s (run the same command again to resume)", method, url, curl_easy_strerror(rc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}

static char *url_of(const char *addr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *url_of(const char *addr, const char *fmt, ...)
{
    char path[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    size_t n = strlen(addr) + strlen(path) + 16;
    char *u = malloc(n);
    if (!u)
        die("out of memory");
    snprintf(u, n, "%s%s%s", strstr(addr, "://") ? "" : "http://", addr, path);
    return u;
}

/* The map a node holds (NULL when it answers none). */
static cmap_t *map_of(const char *addr)
{
    char *u = url_of(addr, "/cluster");
    resp_t r = request("GET", u, NULL, 0, NULL, false);
    free(u);
    json_t *j = r.status == 200 ? json_loadb(r.body.p, r.body.len, 0, NULL) : NULL;
    const char *text = json_string_value(json_object_get(j, "map"));
    char err[512];
    cmap_t *m = text ? cmap_parse(text, strlen(text), err, sizeof(err)) : NULL;
    if (r.status != 200 || !m)
        fprintf(stderr, "tally-reshard: %s: no map (%ld)\n", addr, r.status);
    json_decref(j);
    free(r.body.p);
    return m;
}

/* Installs m on node i; fatal when refused. */
static void install_on(const cmap_t *m, size_t i)
{
    wbuf_t t = WBUF_INIT;
    cmap_format(m, &t);
    json_t *j = json_pack("{s:s%}", "map", t.data, t.len);
    char *body = json_dumps(j, JSON_COMPACT);
    char *u = url_of(m->nodes[i].addr, "/admin/cluster");
    resp_t r = request("PUT", u, body, strlen(body), "application/json", false);
    if (r.status != 200)
        die("PUT %s: %ld %s", u, r.status, r.body.p ? r.body.p : "");
    free(u);
    free(body);
    free(r.body.p);
    json_decref(j);
    wbuf_free(&t);
}

/* Installs m on target, then source, then every other node. */
static void install(const cmap_t *m, int source, int target)
{
    install_on(m, (size_t)target);
    install_on(m, (size_t)source);
    for (size_t i = 0; i < m->nnodes; i++)
        if ((int)i != source && (int)i != target)
            install_on(m, i);
    fprintf(stderr, "tally-reshard: epoch %" PRIu64 " installed on %zu nodes\n", m->epoch, m->nnodes);
}

/* Moves one key; returns true when it moved (false: it was already gone). */
static bool move_key(const char *src, const char *dst, const char *key)
{
    CURL *c = curl_easy_init();
    char *esc = curl_easy_escape(c, key, (int)strlen(key));
    curl_easy_cleanup(c);
    for (int tries = 0; tries < MAX_MOVE_TRIES; tries++) {
        char *u = url_of(src, "/keys/%s/dump", esc);
        resp_t d = request("GET", u, NULL, 0, NULL, false);
        free(u);
        if (d.status == 404 || d.status == 421) {   /* expired, deleted, or moved already */
            free(d.body.p);
            curl_free(esc);
            return false;
        }
        if (d.status != 200 || !d.digest[0])
            die("GET /keys/%s/dump on %s: %ld %s", key, src, d.status, d.body.p ? d.body.p : "");
        u = url_of(dst, "/keys/%s/restore?replace=true", esc);
        resp_t r = request("PUT", u, d.body.p, d.body.len, "application/octet-stream", true);
        free(u);
        if (r.status != 201)
            die("PUT /keys/%s/restore on %s: %ld %s", key, dst, r.status, r.body.p ? r.body.p : "");
        free(r.body.p);
        u = url_of(src, "/keys/%s?digest=%s", esc, d.digest);
        resp_t x = request("DELETE", u, NULL, 0, NULL, false);
        free(u);
        free(d.body.p);
        free(x.body.p);
        if (x.status == 200 || x.status == 421) {   /* 421 ASK: it expired after the dump */
            curl_free(esc);
            return x.status == 200;
        }
        if (x.status != 412)
            die("DELETE /keys/%s on %s: %ld", key, src, x.status);
        /* written in between: move the newer value */
    }
    die("key %s kept changing during %d moves", key, MAX_MOVE_TRIES);
}

/* One pass over the source's keys in [lo, hi]; returns the keys moved. */
static size_t pass(const char *src, const char *dst, unsigned lo, unsigned hi, size_t *seen)
{
    size_t moved = 0;
    char cursor[128] = "";
    *seen = 0;
    do {
        char *u = url_of(src, "/keys?slots=%u-%u&limit=%ld%s%s", lo, hi, batch, cursor[0] ? "&cursor=" : "", cursor);
        resp_t r = request("GET", u, NULL, 0, NULL, false);
        free(u);
        json_t *j = r.status == 200 ? json_loadb(r.body.p, r.body.len, 0, NULL) : NULL;
        if (!j)
            die("GET /keys on %s: %ld %s", src, r.status, r.body.p ? r.body.p : "");
        free(r.body.p);
        json_t *keys = json_object_get(j, "keys"), *k;
        size_t i;
        json_array_foreach(keys, i, k) {
            (*seen)++;
            if (move_key(src, dst, json_string_value(json_object_get(k, "key"))))
                moved++;
        }
        const char *next = json_string_value(json_object_get(j, "cursor"));
        snprintf(cursor, sizeof(cursor), "%s", next ? next : "");
        json_decref(j);
        if (*seen && *seen % 1000 < (size_t)batch)
            fprintf(stderr, "tally-reshard: %zu keys moved\n", moved);
    } while (cursor[0]);
    return moved;
}

/* Before anything moves: every --haproxy-socket answers and can route to
 * every node of m (fatal otherwise: nothing has changed yet). */
static void haproxy_precheck(const cmap_t *m)
{
    char err[600];
    for (size_t i = 0; i < nproxies; i++)
        if (!haproxy_runtime_check(proxies[i], proxy_map, m, err, sizeof(err)))
            die("%s; nothing was moved", err);
}

/* Step 5: every --haproxy-socket's slot map becomes m's, and the map file
 * when it is on this machine. */
static void haproxy_follow(const cmap_t *m)
{
    char err[600];
    for (size_t i = 0; i < nproxies; i++) {
        if (!haproxy_runtime_set_map(proxies[i], proxy_map, m, err, sizeof(err)))
            die("HAProxy %s: %s (the nodes hold epoch %" PRIu64 "; run the same command again to retry)", proxies[i],
                err, m->epoch);
        fprintf(stderr, "tally-reshard: HAProxy %s: slot map %s set to epoch %" PRIu64 "\n", proxies[i], proxy_map,
                m->epoch);
    }
    if (access(proxy_map, F_OK) == 0) {
        if (!haproxy_map_save(m, proxy_map, err, sizeof(err)))
            die("%s", err);
        fprintf(stderr, "tally-reshard: %s rewritten (epoch %" PRIu64 ")\n", proxy_map, m->epoch);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: tally-reshard --node URL --slots LO-HI --to NAME [--token TOKEN] [--batch N]\n"
                    "                     [--haproxy-socket SOCKET]... [--haproxy-map PATH]\n"
                    "  moves slots LO..HI to node NAME under load (deploy/cluster/README.md);\n"
                    "  run it again after an interruption: it resumes.  Each --haproxy-socket (a\n"
                    "  path or host:port) gets the new slot map at the flip; --haproxy-map names\n"
                    "  the map file in HAProxy's configuration (default " HAPROXY_MAP_DEFAULT ")\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *node = NULL, *slots = NULL, *to = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (strcmp(a, "--node") == 0)
            node = v;
        else if (strcmp(a, "--slots") == 0)
            slots = v;
        else if (strcmp(a, "--to") == 0)
            to = v;
        else if (strcmp(a, "--token") == 0)
            token = v;
        else if (strcmp(a, "--batch") == 0)
            batch = atol(v);
        else if (strcmp(a, "--haproxy-socket") == 0 && nproxies < MAX_PROXIES)
            proxies[nproxies++] = v;
        else if (strcmp(a, "--haproxy-map") == 0)
            proxy_map = v;
        else
            usage();
        i++;
    }
    unsigned lo, hi;
    char tail;
    if (!node || !slots || !to || batch < 1 || batch > 10000)
        usage();
    int nf = sscanf(slots, "%u-%u%c", &lo, &hi, &tail);
    if (nf == 1)
        hi = lo;
    else if (nf != 2)
        usage();
    if (lo > hi || hi >= SLOT_COUNT)
        die("--slots %s: a range within 0-%u", slots, SLOT_COUNT - 1);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    /* 1. the newest map any node holds */
    cmap_t *m = map_of(node);
    if (!m)
        die("%s holds no cluster map", node);
    for (size_t i = 0; i < m->nnodes; i++) {
        cmap_t *o = map_of(m->nodes[i].addr);
        if (o && o->epoch > m->epoch) {
            cmap_free(m);
            m = o;
            i = (size_t)-1;   /* its node list may differ: look again */
        } else {
            cmap_free(o);
        }
    }
    int target = cmap_node_index(m, to);
    if (target < 0)
        die("the map (epoch %" PRIu64 ") has no node '%s': add it with its 'node' line first", m->epoch, to);
    haproxy_precheck(m);
    int source = m->owner[lo];
    bool done = true;
    for (unsigned s = lo; s <= hi; s++) {
        if (m->owner[s] != m->owner[lo])
            die("slots %u-%u have more than one owner (%s, %s): move one owner's range at a time", lo, hi,
                m->nodes[m->owner[lo]].name, m->nodes[m->owner[s]].name);
        if (m->owner[s] != target)
            done = false;
        if (m->migrating_to[s] >= 0 && m->migrating_to[s] != target)
            die("slot %u is migrating to node %s", s, m->nodes[m->migrating_to[s]].name);
    }
    if (done) {
        /* already flipped somewhere: make sure every node has this map */
        fprintf(stderr, "tally-reshard: slots %u-%u already belong to %s (epoch %" PRIu64 ")\n", lo, hi, to, m->epoch);
        for (size_t i = 0; i < m->nnodes; i++)
            install_on(m, i);
        haproxy_follow(m);
        cmap_free(m);
        return 0;
    }
    const char *src = m->nodes[source].addr, *dst = m->nodes[target].addr;
    fprintf(stderr, "tally-reshard: slots %u-%u: %s (%s) -> %s (%s)\n", lo, hi, m->nodes[source].name, src, to, dst);

    /* 2. migrating */
    bool migrating = true;
    for (unsigned s = lo; s <= hi; s++)
        migrating = migrating && m->migrating_to[s] == target;
    if (!migrating) {
        m->epoch++;
        for (unsigned s = lo; s <= hi; s++)
            m->migrating_to[s] = (int16_t)target;
        install(m, source, target);
    } else {
        fprintf(stderr, "tally-reshard: resuming: the range is already migrating (epoch %" PRIu64 ")\n", m->epoch);
        install(m, source, target);   /* a node the interrupted run had not reached yet */
    }

    /* 3. the keys */
    size_t total = 0, seen;
    for (int p = 1;; p++) {
        size_t moved = pass(src, dst, lo, hi, &seen);
        total += moved;
        fprintf(stderr, "tally-reshard: pass %d: %zu keys seen, %zu moved (%zu in all)\n", p, seen, moved, total);
        if (seen == 0)
            break;
    }

    /* 4. the flip */
    m->epoch++;
    for (unsigned s = lo; s <= hi; s++) {
        m->owner[s] = (uint16_t)target;
        m->migrating_to[s] = -1;
    }
    install(m, source, target);
    haproxy_follow(m);
    fprintf(stderr, "tally-reshard: slots %u-%u now belong to %s (epoch %" PRIu64 "); %zu keys moved\n", lo, hi, to,
            m->epoch, total);
    printf("%" PRIu64 "\n", m->epoch);
    cmap_free(m);
    curl_global_cleanup();
    return 0;
}
