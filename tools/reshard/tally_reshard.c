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
 * With --coordinator (the nodes started with --cluster etcd[:PREFIX]), the
 * map lives in etcd at PREFIX/map and the nodes watch it: each step is a
 * transaction there instead of PUT /admin/cluster on every node, and the
 * reshard's own state is a record at PREFIX/reshard (JSON: slots, source,
 * target, step), written in the same transaction as the map it goes with,
 * each compared on its mod revision, so two runs cannot interleave and a
 * run killed at any step leaves a record to continue from:
 *
 *   begin      record created (only if none exists); the map is unchanged
 *   migrating  the map with `migrate LO-HI SOURCE TARGET` (epoch+1); the
 *              tool waits for the source and the target to hold it
 *              (GET /cluster), then moves the keys (step 3 above)
 *   flipped    the map with the range the target's (epoch+1); the tool
 *              waits for both to hold it, updates HAProxy (step 5), and
 *              deletes the record: done
 *
 * --resume continues from the record.  --abort rolls back: at `begin` it
 * deletes the record; at `migrating` it turns the move around (the range
 * becomes the target's, migrating back to the source, epoch+1, the record
 * reversed and marked aborting) and moves the keys back the same way, so
 * nothing acknowledged during the move is lost; at `flipped` the move is
 * complete (the commit point) and --abort only finishes it.  --init FILE
 * writes the first map when etcd holds none.
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

#include <signal.h>
#include <time.h>

#include "core/clustermap.h"
#include "service/etcd.h"
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
static const char *kill_at;                /* TALLY_RESHARD_TEST_KILL_AT: the tests' kill -9 */
static bool moved_one;                     /* a key moved in this run */

static void kill_point(const char *step);

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
            if (move_key(src, dst, json_string_value(json_object_get(k, "key")))) {
                moved++;
                if (!moved_one) {
                    moved_one = true;
                    kill_point("moving");
                }
            }
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

/* The tests stop the tool as kill -9 would, right after the step named in
 * TALLY_RESHARD_TEST_KILL_AT (begin, migrating, moving, flipped, haproxy). */
static void usage(void) __attribute__((noreturn));

static void kill_point(const char *step)
{
    if (kill_at && strcmp(kill_at, step) == 0) {
        fprintf(stderr, "tally-reshard: TALLY_RESHARD_TEST_KILL_AT=%s: killed\n", step);
        raise(SIGKILL);
    }
}

/* ------------------------------------------------------------------------ */
/* The map and the reshard's record in etcd (--coordinator)                 */
/* ------------------------------------------------------------------------ */

static etcd_client_t *etcd;
static char map_key[300], rec_key[300];
/* etcd's TLS and credentials: tallyd's flags of the same names */
static const char *etcd_cacert, *etcd_cert, *etcd_key, *etcd_user, *etcd_password_file;

typedef struct record {
    unsigned lo, hi;
    char source[CMAP_NAME_MAX + 1], target[CMAP_NAME_MAX + 1];
    char step[16];           /* begin, migrating, flipped */
    bool aborting;           /* a rollback: source and target are the original move's, swapped */
} record_t;

/* etcd's map (fatal when it holds none or it does not parse). */
static cmap_t *etcd_map(int64_t *mod)
{
    etcd_kv_t kv;
    int found = 0;
    if (etcd_get(etcd, map_key, strlen(map_key), &kv, &found, NULL) != 0)
        die("etcd: reading %s: %s", map_key, etcd_error(etcd));
    if (!found)
        die("etcd holds no cluster map at %s (write the first with --init FILE)", map_key);
    char err[512];
    cmap_t *m = cmap_parse(kv.value, kv.value_len, err, sizeof(err));
    if (!m)
        die("etcd's map at %s does not parse: %s", map_key, err);
    *mod = kv.mod_revision;
    etcd_kv_free(&kv);
    return m;
}

/* The record of the reshard in progress: false when there is none. */
static bool etcd_record(record_t *r, int64_t *mod)
{
    etcd_kv_t kv;
    int found = 0;
    if (etcd_get(etcd, rec_key, strlen(rec_key), &kv, &found, NULL) != 0)
        die("etcd: reading %s: %s", rec_key, etcd_error(etcd));
    if (!found)
        return false;
    json_t *j = json_loadb(kv.value, kv.value_len, 0, NULL);
    const char *slots = json_string_value(json_object_get(j, "slots"));
    const char *src = json_string_value(json_object_get(j, "source"));
    const char *dst = json_string_value(json_object_get(j, "target"));
    const char *step = json_string_value(json_object_get(j, "step"));
    memset(r, 0, sizeof(*r));
    if (!slots || !src || !dst || !step || sscanf(slots, "%u-%u", &r->lo, &r->hi) != 2 || r->lo > r->hi ||
        r->hi >= SLOT_COUNT || strlen(src) > CMAP_NAME_MAX || strlen(dst) > CMAP_NAME_MAX ||
        (strcmp(step, "begin") && strcmp(step, "migrating") && strcmp(step, "flipped")))
        die("etcd's reshard record at %s is not one this tool writes: %.*s (delete it with etcdctl del %s once "
            "the map is checked)", rec_key, (int)kv.value_len, kv.value, rec_key);
    snprintf(r->source, sizeof(r->source), "%s", src);
    snprintf(r->target, sizeof(r->target), "%s", dst);
    snprintf(r->step, sizeof(r->step), "%s", step);
    r->aborting = json_is_true(json_object_get(j, "aborting"));
    *mod = kv.mod_revision;
    json_decref(j);
    etcd_kv_free(&kv);
    return true;
}

/* One step, atomically: the map (when m) and the record (when r; NULL
 * deletes it), provided neither changed since they were read (map_mod 0:
 * the map is not compared; *rec_mod 0: the record must not exist).  The
 * new mod revisions are written back. */
static void etcd_step(const cmap_t *m, int64_t *map_mod, const record_t *r, int64_t *rec_mod)
{
    etcd_cmp_t cmp[2];
    etcd_op_t ops[2];
    size_t nc = 0, no = 0;
    cmp[nc++] = (etcd_cmp_t){ .key = rec_key, .key_len = strlen(rec_key),
                              .target = *rec_mod ? ETCD_TARGET_MOD : ETCD_TARGET_CREATE, .op = ETCD_CMP_EQUAL,
                              .number = *rec_mod };
    if (*map_mod)
        cmp[nc++] = (etcd_cmp_t){ .key = map_key, .key_len = strlen(map_key), .target = ETCD_TARGET_MOD,
                                  .op = ETCD_CMP_EQUAL, .number = *map_mod };
    wbuf_t t = WBUF_INIT;
    if (m) {
        cmap_format(m, &t);
        if (t.oom)
            die("out of memory");
        ops[no++] = (etcd_op_t){ .kind = ETCD_OP_PUT, .key = map_key, .key_len = strlen(map_key),
                                 .value = (const char *)t.data, .value_len = t.len };
    }
    char *rec = NULL;
    if (r) {
        char slots[32];
        snprintf(slots, sizeof(slots), "%u-%u", r->lo, r->hi);
        json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:b}", "slots", slots, "source", r->source, "target", r->target,
                              "step", r->step, "aborting", r->aborting);
        rec = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!rec)
            die("out of memory");
        ops[no++] = (etcd_op_t){ .kind = ETCD_OP_PUT, .key = rec_key, .key_len = strlen(rec_key), .value = rec,
                                 .value_len = strlen(rec) };
    } else {
        ops[no++] = (etcd_op_t){ .kind = ETCD_OP_DELETE, .key = rec_key, .key_len = strlen(rec_key) };
    }
    etcd_txn_result_t res;
    if (etcd_txn(etcd, cmp, nc, ops, no, NULL, 0, &res) != 0)
        die("etcd: %s (nothing or all of this step was written: run again with --resume)", etcd_error(etcd));
    if (!res.succeeded)
        die("etcd's map or reshard record changed under this run (another tally-reshard?): stopped; "
            "`tally-reshard --coordinator ... --resume` continues from the record");
    if (m)
        *map_mod = res.revision;
    *rec_mod = r ? res.revision : 0;
    etcd_txn_free(&res);
    free(rec);
    wbuf_free(&t);
    if (r)
        fprintf(stderr, "tally-reshard: etcd: slots %u-%u %s -> %s: step %s%s%s (revision %" PRId64 ")\n", r->lo,
                r->hi, r->source, r->target, r->step, r->aborting ? ", rolling back" : "",
                m ? ", map written" : "", *rec_mod);
}

/* Waits until the nodes named hold a map of this epoch or newer (they
 * watch etcd): fatal after 60 s (the record stays; --resume). */
static void wait_nodes(const cmap_t *m, int a, int b)
{
    for (int tries = 0;; tries++) {
        bool all = true;
        uint64_t seen = 0;
        int late = -1;
        for (int k = 0; k < 2 && all; k++) {
            int i = k ? b : a;
            cmap_t *o = map_of(m->nodes[i].addr);
            seen = o ? o->epoch : 0;
            if (!o || o->epoch < m->epoch) {
                all = false;
                late = i;
            }
            cmap_free(o);
        }
        if (all)
            return;
        if (tries == 600)
            die("node %s still holds epoch %" PRIu64 " after 60 s, not %" PRIu64 " (does it watch etcd?); "
                "--resume continues", m->nodes[late].name, seen, m->epoch);
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep(&ts, NULL);
    }
}

/* --init FILE ('-': stdin): the first map, only when etcd holds none. */
static int etcd_init(const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        die("%s: cannot open", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > ((size_t)64 << 20) || !(text = realloc(text, cap)))
                die("%s: too large", path);
        }
        size_t n = fread(text + len, 1, 4096, f);
        len += n;
        if (n == 0)
            break;
    }
    if (f != stdin)
        fclose(f);
    char err[512];
    cmap_t *m = cmap_parse(text, len, err, sizeof(err));
    if (!m)
        die("%s: %s", path, err);
    etcd_cmp_t cmp = { .key = map_key, .key_len = strlen(map_key), .target = ETCD_TARGET_CREATE,
                       .op = ETCD_CMP_EQUAL, .number = 0 };
    etcd_op_t put = { .kind = ETCD_OP_PUT, .key = map_key, .key_len = strlen(map_key), .value = text,
                      .value_len = len };
    etcd_op_t get = { .kind = ETCD_OP_GET, .key = map_key, .key_len = strlen(map_key) };
    etcd_txn_result_t res;
    if (etcd_txn(etcd, &cmp, 1, &put, 1, &get, 1, &res) != 0)
        die("etcd: %s", etcd_error(etcd));
    int rc = 0;
    if (res.succeeded) {
        fprintf(stderr, "tally-reshard: %s: the cluster map (epoch %" PRIu64 ") written\n", map_key, m->epoch);
    } else if (res.n == 1 && res.results[0].n == 1 && res.results[0].kvs[0].value_len == len &&
               memcmp(res.results[0].kvs[0].value, text, len) == 0) {
        fprintf(stderr, "tally-reshard: %s already holds this map\n", map_key);
    } else {
        fprintf(stderr, "tally-reshard: %s already holds another map: left as it is (tally-reshard changes it)\n",
                map_key);
        rc = 1;
    }
    etcd_txn_free(&res);
    cmap_free(m);
    free(text);
    return rc;
}

/* The whole move from the record's step on (etcd form). */
static int etcd_run(record_t *r, int64_t rec_mod, cmap_t *m, int64_t map_mod)
{
    int source = cmap_node_index(m, r->source), target = cmap_node_index(m, r->target);
    if (source < 0 || target < 0)
        die("the record's nodes %s and %s are not both in etcd's map (epoch %" PRIu64 ")", r->source, r->target,
            m->epoch);
    haproxy_precheck(m);
    const char *src = m->nodes[source].addr, *dst = m->nodes[target].addr;
    if (strcmp(r->step, "begin") == 0) {
        for (unsigned s = r->lo; s <= r->hi; s++)
            if (m->owner[s] != source || m->migrating_to[s] >= 0)
                die("slot %u is not %s's alone any more in etcd's map (epoch %" PRIu64 "): --abort", s, r->source,
                    m->epoch);
        m->epoch++;
        for (unsigned s = r->lo; s <= r->hi; s++)
            m->migrating_to[s] = (int16_t)target;
        snprintf(r->step, sizeof(r->step), "migrating");
        etcd_step(m, &map_mod, r, &rec_mod);
        kill_point("migrating");
    }
    if (strcmp(r->step, "migrating") == 0) {
        for (unsigned s = r->lo; s <= r->hi; s++)
            if (m->owner[s] != source || m->migrating_to[s] != target)
                die("etcd's map (epoch %" PRIu64 ") does not have slot %u migrating from %s to %s as the record "
                    "says", m->epoch, s, r->source, r->target);
        fprintf(stderr, "tally-reshard: slots %u-%u: %s (%s) -> %s (%s)%s\n", r->lo, r->hi, r->source, src,
                r->target, dst, r->aborting ? ": rolling back" : "");
        wait_nodes(m, target, source);
        size_t total = 0, seen;
        for (int p = 1;; p++) {
            size_t moved = pass(src, dst, r->lo, r->hi, &seen);
            total += moved;
            fprintf(stderr, "tally-reshard: pass %d: %zu keys seen, %zu moved (%zu in all)\n", p, seen, moved, total);
            if (seen == 0)
                break;
        }
        m->epoch++;
        for (unsigned s = r->lo; s <= r->hi; s++) {
            m->owner[s] = (uint16_t)target;
            m->migrating_to[s] = -1;
        }
        snprintf(r->step, sizeof(r->step), "flipped");
        etcd_step(m, &map_mod, r, &rec_mod);
        kill_point("flipped");
    }
    for (unsigned s = r->lo; s <= r->hi; s++)
        if (m->owner[s] != target || m->migrating_to[s] >= 0)
            die("etcd's map (epoch %" PRIu64 ") does not give slot %u to %s as the record says", m->epoch, s,
                r->target);
    wait_nodes(m, target, source);
    haproxy_follow(m);
    kill_point("haproxy");
    int64_t no_map = 0;
    etcd_step(NULL, &no_map, NULL, &rec_mod);
    fprintf(stderr, "tally-reshard: slots %u-%u now belong to %s (epoch %" PRIu64 ")%s; the reshard record is "
            "deleted\n", r->lo, r->hi, r->target, m->epoch, r->aborting ? ": rolled back" : "");
    printf("%" PRIu64 "\n", m->epoch);
    return 0;
}

static int etcd_main(const char *endpoints, const char *prefix, const char *init, const char *slots, const char *to,
                     bool resume, bool abort_run)
{
    char err[512], password[512] = "";
    if (etcd_password_file) {
        FILE *f = fopen(etcd_password_file, "r");
        if (!f || !fgets(password, sizeof(password), f))
            die("--coordinator-password-file %s: cannot read it", etcd_password_file);
        fclose(f);
        password[strcspn(password, "\r\n")] = '\0';
    }
    etcd_config_t cfg = { .endpoints = endpoints, .timeout_ms = 5000, .cacert = etcd_cacert, .cert = etcd_cert,
                          .key = etcd_key, .user = etcd_user, .password = etcd_user ? password : NULL };
    etcd = etcd_open(&cfg, err, sizeof(err));
    if (!etcd)
        die("--coordinator %s: %s", endpoints, err);
    snprintf(map_key, sizeof(map_key), "%s/map", prefix);
    snprintf(rec_key, sizeof(rec_key), "%s/reshard", prefix);
    if (init)
        return etcd_init(init);
    int64_t map_mod, rec_mod = 0;
    cmap_t *m = etcd_map(&map_mod);
    record_t r;
    bool have = etcd_record(&r, &rec_mod);
    if ((resume || abort_run) && !have) {
        fprintf(stderr, "tally-reshard: no reshard in progress (%s is absent); etcd's map has epoch %" PRIu64 "\n",
                rec_key, m->epoch);
        cmap_free(m);
        return 0;
    }
    if (!resume && !abort_run) {
        if (have)
            die("a reshard of slots %u-%u from %s to %s is in progress (step %s%s): finish it with --resume or roll "
                "it back with --abort first", r.lo, r.hi, r.source, r.target, r.step, r.aborting ? ", rolling back" : "");
        unsigned lo, hi;
        char tail;
        int nf = sscanf(slots, "%u-%u%c", &lo, &hi, &tail);
        if (nf == 1)
            hi = lo;
        else if (nf != 2)
            usage();
        if (lo > hi || hi >= SLOT_COUNT)
            die("--slots %s: a range within 0-%u", slots, SLOT_COUNT - 1);
        int target = cmap_node_index(m, to);
        if (target < 0)
            die("etcd's map (epoch %" PRIu64 ") has no node '%s': add it with its 'node' line first", m->epoch, to);
        bool done = true;
        for (unsigned s = lo; s <= hi; s++) {
            if (m->owner[s] != m->owner[lo])
                die("slots %u-%u have more than one owner (%s, %s): move one owner's range at a time", lo, hi,
                    m->nodes[m->owner[lo]].name, m->nodes[m->owner[s]].name);
            if (m->migrating_to[s] >= 0)
                die("slot %u is migrating to node %s with no reshard record: fix etcd's map first", s,
                    m->nodes[m->migrating_to[s]].name);
            done = done && m->owner[s] == target;
        }
        if (done) {
            fprintf(stderr, "tally-reshard: slots %u-%u already belong to %s (epoch %" PRIu64 ")\n", lo, hi, to,
                    m->epoch);
            haproxy_follow(m);
            cmap_free(m);
            return 0;
        }
        /* a node already past etcd's epoch would refuse every map this run
         * writes (someone wrote an older map into etcd): stop now */
        for (size_t i = 0; i < m->nnodes; i++) {
            cmap_t *o = map_of(m->nodes[i].addr);
            if (o && o->epoch > m->epoch)
                die("node %s holds epoch %" PRIu64 ", newer than etcd's map (epoch %" PRIu64 "), and would refuse "
                    "what this run writes: put the node's map (GET /cluster) back into %s under a higher epoch "
                    "first; nothing was changed", m->nodes[i].name, o->epoch, m->epoch, map_key);
            cmap_free(o);
        }
        haproxy_precheck(m);
        r = (record_t){ .lo = lo, .hi = hi };
        snprintf(r.source, sizeof(r.source), "%s", m->nodes[m->owner[lo]].name);
        snprintf(r.target, sizeof(r.target), "%s", to);
        snprintf(r.step, sizeof(r.step), "begin");
        rec_mod = 0;
        etcd_step(NULL, &map_mod, &r, &rec_mod);
        kill_point("begin");
    } else if (abort_run && !r.aborting) {
        if (strcmp(r.step, "begin") == 0) {
            int64_t no_map = 0;
            etcd_step(NULL, &no_map, NULL, &rec_mod);
            fprintf(stderr, "tally-reshard: reshard of slots %u-%u aborted before anything changed\n", r.lo, r.hi);
            cmap_free(m);
            return 0;
        }
        if (strcmp(r.step, "migrating") == 0) {
            /* turn the move around: the target owns the range, migrating
             * back to the source, and the keys are moved back */
            int source = cmap_node_index(m, r.source), target = cmap_node_index(m, r.target);
            if (source < 0 || target < 0)
                die("the record's nodes %s and %s are not both in etcd's map", r.source, r.target);
            for (unsigned s = r.lo; s <= r.hi; s++) {
                if (m->owner[s] != source || m->migrating_to[s] != target)
                    die("etcd's map (epoch %" PRIu64 ") does not have slot %u migrating from %s to %s as the "
                        "record says", m->epoch, s, r.source, r.target);
                m->owner[s] = (uint16_t)target;
                m->migrating_to[s] = (int16_t)source;
            }
            m->epoch++;
            record_t back = r;
            snprintf(back.source, sizeof(back.source), "%s", r.target);
            snprintf(back.target, sizeof(back.target), "%s", r.source);
            back.aborting = true;
            etcd_step(m, &map_mod, &back, &rec_mod);
            kill_point("abort");
            r = back;
        } else {
            fprintf(stderr, "tally-reshard: slots %u-%u were already flipped to %s: the move is complete and "
                    "cannot be rolled back (move them back with another reshard); finishing it\n", r.lo, r.hi,
                    r.target);
        }
    }
    int rc = etcd_run(&r, rec_mod, m, map_mod);
    cmap_free(m);
    return rc;
}

static void usage(void)
{
    fprintf(stderr, "usage: tally-reshard --node URL --slots LO-HI --to NAME [--token TOKEN] [--batch N]\n"
                    "                     [--haproxy-socket SOCKET]... [--haproxy-map PATH]\n"
                    "       tally-reshard --coordinator etcd://HOST:PORT[,...] [--prefix PREFIX]\n"
                    "                     (--slots LO-HI --to NAME | --resume | --abort | --init FILE) [options above]\n"
                    "  with --coordinator the map and the reshard's record are in etcd under PREFIX\n"
                    "  (default /tally/cluster; the nodes run with --cluster etcd:PREFIX): --resume\n"
                    "  continues an interrupted reshard, --abort rolls it back, --init writes the\n"
                    "  first map ('-': stdin) when etcd holds none.  etcd's TLS and credentials:\n"
                    "  --coordinator-cacert, --coordinator-cert, --coordinator-key, --coordinator-user,\n"
                    "  --coordinator-password-file, as tallyd's.\n"
                    "  moves slots LO..HI to node NAME under load (deploy/cluster/README.md);\n"
                    "  run it again after an interruption: it resumes.  Each --haproxy-socket (a\n"
                    "  path or host:port) gets the new slot map at the flip; --haproxy-map names\n"
                    "  the map file in HAProxy's configuration (default " HAPROXY_MAP_DEFAULT ")\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *node = NULL, *slots = NULL, *to = NULL, *coordinator = NULL, *prefix = "/tally/cluster",
               *init = NULL;
    bool resume = false, abort_run = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--resume") == 0) {
            resume = true;
            continue;
        }
        if (strcmp(a, "--abort") == 0) {
            abort_run = true;
            continue;
        }
        if (!v)
            usage();
        if (strcmp(a, "--coordinator") == 0)
            coordinator = v;
        else if (strcmp(a, "--prefix") == 0)
            prefix = v;
        else if (strcmp(a, "--coordinator-cacert") == 0)
            etcd_cacert = v;
        else if (strcmp(a, "--coordinator-cert") == 0)
            etcd_cert = v;
        else if (strcmp(a, "--coordinator-key") == 0)
            etcd_key = v;
        else if (strcmp(a, "--coordinator-user") == 0)
            etcd_user = v;
        else if (strcmp(a, "--coordinator-password-file") == 0)
            etcd_password_file = v;
        else if (strcmp(a, "--init") == 0)
            init = v;
        else if (strcmp(a, "--node") == 0)
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
    kill_at = getenv("TALLY_RESHARD_TEST_KILL_AT");
    if (batch < 1 || batch > 10000)
        usage();
    if (coordinator) {
        int modes = (resume ? 1 : 0) + (abort_run ? 1 : 0) + (init ? 1 : 0) + (slots || to ? 1 : 0);
        if (modes != 1 || node || ((slots || to) && (!slots || !to)) || prefix[0] != '/' || strlen(prefix) > 256)
            usage();
        curl_global_init(CURL_GLOBAL_DEFAULT);
        int rc = etcd_main(coordinator, prefix, init, slots, to, resume, abort_run);
        etcd_close(etcd);
        etcd = NULL;
        curl_global_cleanup();
        return rc;
    }
    unsigned lo, hi;
    char tail;
    if (!node || !slots || !to || resume || abort_run || init)
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
