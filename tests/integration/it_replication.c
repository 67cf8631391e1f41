/*
 * it_replication.c - a primary and replicas as real processes on free
 * ports: replicas converge to the primary's exact state under a mixed write
 * load of every family (every key's snapshot record and every key's DUMP
 * byte-identical on all three; keys with a TTL compared by digest, the dump
 * carrying the remaining TTL); a write sent to a replica changes nothing
 * (421 naming the primary); a replica stopped for a while resumes from its
 * position, one whose position left the backlog resynchronises; promotion
 * raises the epoch (restored from the journal's epoch record without the
 * EPOCH file), and a replica of the new epoch polling the old primary is
 * refused without fencing it; with --peers (and the group's secret) the
 * group is a read-only view: a primary takes changes from its start, and a
 * promotion behind its back is reported in peers_state and changes nothing;
 * fake peers (libmicrohttpd in this process) answering unsigned, badly
 * signed, replayed, redirected or out-of-range answers are no answer, and
 * signed answers - even a majority naming a newer primary - change neither
 * role nor epoch; nothing reaches a URL outside --peers; --replica-token-file and
 * --peer-secret-file are refused when unsafe and re-read on SIGHUP and
 * POST /admin/reload; an EPOCH file or epoch record above 2^53 - 1 is
 * refused; with --min-replicas-ack 1 a kill -9 of the primary
 * at a random instant (10 rounds) loses no acknowledged change (exact model:
 * every key's value after promotion lies between what was acknowledged and
 * what was attempted), and without it the loss is measured and printed;
 * with --min-replicas-ack 1 and a replica stopped (SIGSTOP), changes of every
 * kind time out, are answered 503 "not applied" and read back exactly as
 * before - on the primary, on the replica once resumed (dumps identical) and
 * after a kill -9 and replay - and writers on one key while the replica
 * stalls and resumes leave exactly the number of 200 answers;
 * HAProxy with deploy/ha's configuration routes changes through a failover;
 * reads on a replica during eight full resynchronisations answer each key's
 * value or 503, never the key missing, and a replica stopped while it loads
 * exits cleanly. */
#include <fcntl.h>
#include <microhttpd.h>
#include <nettle/hmac.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/persist_fmt.h"
#include "tests/integration/harness.h"

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void url_of(const tally_proc_t *p, char *out, size_t n) { snprintf(out, n, "http://127.0.0.1:%d", p->port); }

/* Credential files (--peer-secret-file, --replica-token-file) live in a
 * directory of the run's, made by main(). */
static char credsdir[256];

/* Writes the credential file `name` with `mode`; returns its path (static
 * storage per name slot: at most 8 live at once). */
static const char *cred_file(const char *name, const char *text, mode_t mode)
{
    static char paths[8][300];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 300, "%s/%s", credsdir, name);
    file_write(path, text, strlen(text));
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

/* The group's secret: every node started with --peers gets it. */
#define GROUP_SECRET "it_replication's group secret, 44 bytes long"

static const char *peer_secret(void)
{
    static char path[300];
    if (!path[0])
        snprintf(path, sizeof(path), "%s", cred_file("peer.secret", GROUP_SECRET "\n", 0600));
    return path;
}

/* Starts a replica of `primary` with extra args (NULL-terminated, may be NULL). */
static void start_replica(tally_proc_t *r, const tally_proc_t *primary, const char *const *extra)
{
    static char url[64];
    url_of(primary, url, sizeof(url));
    const char *args[16] = { "--replica-of", url };
    int n = 2;
    for (int i = 0; extra && extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    tally_start(r, NULL, args);
}

/* A member of the "replication" object of /info. */
static long long repl_int(const tally_proc_t *p, const char *name)
{
    json_t *o = http_get_json(p, "/info");
    json_t *v = json_object_get(json_object_get(o, "replication"), name);
    long long x = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(o);
    return x;
}

/* A string member of "replication" (or of its "link" when `link`), copied
 * into out ("" when absent). */
static const char *repl_str(const tally_proc_t *p, bool link, const char *name, char *out, size_t n)
{
    json_t *o = http_get_json(p, "/info");
    json_t *r = json_object_get(o, "replication");
    const char *v = json_string_value(json_object_get(link ? json_object_get(r, "link") : r, name));
    snprintf(out, n, "%s", v ? v : "");
    json_decref(o);
    return out;
}

static long long link_int(const tally_proc_t *p, const char *name)
{
    json_t *o = http_get_json(p, "/info");
    json_t *v = json_object_get(json_object_get(json_object_get(o, "replication"), "link"), name);
    long long x = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(o);
    return x;
}

static void http_expect_post_counter(const tally_proc_t *p, const char *prefix, int i)
{
    http_resp_t a = httpf(p, "POST", "{\"by\":1}", "/counter/%s%d", prefix, i);
    assert_status(&a, 200);
    http_free(&a);
}

/* Waits until the replica has applied everything the primary streamed. */
static void wait_caught_up(const tally_proc_t *primary, const tally_proc_t *r)
{
    long long head = repl_int(primary, "records");
    for (int i = 0; i < 1000; i++) {
        json_t *o = http_get_json(r, "/info");
        json_t *link = json_object_get(json_object_get(o, "replication"), "link");
        bool done = json_is_true(json_object_get(link, "synced")) &&
                    json_integer_value(json_object_get(link, "records")) == head;
        json_decref(o);
        if (done)
            return;
        sleep_ms(20);
    }
    fail_msg("replica did not catch up: %lld of %lld records", link_int(r, "records"), head);
}

/* ------------------------------------------------------------------------ */
/* Comparing whole states: every key's snapshot record                      */
/* ------------------------------------------------------------------------ */

/* One key's snapshot record: key, then tag, expiry and encoded value. */
typedef struct rec {
    char *key;
    uint8_t *blob;
    size_t len;
} rec_t;

typedef struct recs {
    rec_t *v;
    size_t n, cap;
} recs_t;

static const char *collect(void *ud, size_t off, const snap_record_t *r)
{
    (void)off;
    recs_t *s = ud;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
    }
    rec_t *e = &s->v[s->n++];
    e->key = strndup(r->key, r->klen);
    e->len = 1 + 8 + r->vlen;
    e->blob = malloc(e->len);
    e->blob[0] = r->tag;
    memcpy(e->blob + 1, &r->expire_ms, 8);
    memcpy(e->blob + 9, r->value, r->vlen);
    return NULL;
}

static int cmp_key(const void *a, const void *b) { return strcmp(((const rec_t *)a)->key, ((const rec_t *)b)->key); }

/* Takes a snapshot on p and reads every record of it, sorted by key. */
static recs_t state_of(const tally_proc_t *p)
{
    http_expect(p, "POST", "/admin/snapshot", NULL, 200, NULL);
    char path[400];
    snprintf(path, sizeof(path), "%s/snapshot.tly", p->dir);
    size_t len;
    char *bytes = file_read(path, &len);
    recs_t s = { 0 };
    snap_scan_t sc;
    assert_true(snapfmt_scan((const uint8_t *)bytes, len, collect, &s, &sc));
    free(bytes);
    qsort(s.v, s.n, sizeof(rec_t), cmp_key);
    return s;
}

static void recs_free(recs_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].key);
        free(s->v[i].blob);
    }
    free(s->v);
}

/* Every key of a and b holds the same type, expiry and encoded value,
 * byte for byte. */
static void assert_same_state(const tally_proc_t *a, const tally_proc_t *b)
{
    recs_t x = state_of(a), y = state_of(b);
    if (x.n != y.n)
        fail_msg("%zu keys on port %d, %zu on port %d", x.n, a->port, y.n, b->port);
    for (size_t i = 0; i < x.n; i++) {
        if (strcmp(x.v[i].key, y.v[i].key) != 0)
            fail_msg("key %s on port %d, %s on port %d", x.v[i].key, a->port, y.v[i].key, b->port);
        if (x.v[i].len != y.v[i].len || memcmp(x.v[i].blob, y.v[i].blob, x.v[i].len) != 0)
            fail_msg("key %s differs between port %d and port %d", x.v[i].key, a->port, b->port);
    }
    recs_free(&x);
    recs_free(&y);
}

/* GET /keys/{key}/dump on p (the key is plain: letters, digits, '-'): 200,
 * or 404 when `may_expire` (a key with a TTL may expire meanwhile). */
static http_resp_t dump_of(const tally_proc_t *p, const char *key, bool may_expire)
{
    http_resp_t d = httpf(p, "GET", NULL, "/keys/%s/dump", key);
    if (d.status != 200 && !(may_expire && d.status == 404))
        fail_msg("GET /keys/%s/dump on port %d answered %ld", key, p->port, d.status);
    return d;
}

/* Every key's DUMP is byte-identical on a and each node of `others`.  The
 * one documented exception: a dump carries the key's *remaining* TTL, read
 * at the instant of the GET, so a key with an expiry is compared by its
 * value's digest (header Tally-Digest) - its absolute expiry is compared
 * byte for byte by assert_same_state; and it may expire during the
 * comparison (a rate limiter's key does once idle), after which every
 * later GET must find it gone too (nodes expire at the same instant). */
static void assert_same_dumps(const tally_proc_t *a, const tally_proc_t *const *others, int n)
{
    recs_t x = state_of(a);
    size_t exact = 0, by_digest = 0, expired = 0;
    for (size_t i = 0; i < x.n; i++) {
        int64_t expire;
        memcpy(&expire, x.v[i].blob + 1, 8);
        bool ttl = expire != 0, gone = false;
        http_resp_t d = dump_of(a, x.v[i].key, ttl);
        char dg[64] = "", og[64] = "";
        gone = d.status == 404;
        assert_true(gone || http_header(&d, "Tally-Digest", dg, sizeof(dg)));
        for (int j = 0; j < n; j++) {
            http_resp_t o = dump_of(others[j], x.v[i].key, ttl);
            if (o.status == 404) {
                gone = true;
            } else {
                if (gone)
                    fail_msg("%s expired, then was back on port %d", x.v[i].key, others[j]->port);
                if (!ttl && (o.len != d.len || memcmp(o.body, d.body, d.len) != 0))
                    fail_msg("the dump of %s differs between port %d and port %d", x.v[i].key, a->port,
                             others[j]->port);
                assert_true(http_header(&o, "Tally-Digest", og, sizeof(og)));
                if (strcmp(dg, og) != 0)
                    fail_msg("the digest of %s differs between port %d and port %d", x.v[i].key, a->port,
                             others[j]->port);
            }
            http_free(&o);
        }
        http_free(&d);
        if (gone)
            expired++;
        else if (ttl)
            by_digest++;
        else
            exact++;
    }
    printf("dumps: %zu keys byte-identical on %d nodes, %zu keys with a TTL identical by digest, %zu expired "
           "meanwhile\n", exact, n + 1, by_digest, expired);
    recs_free(&x);
}

/* ------------------------------------------------------------------------ */
/* Background threads                                                       */
/* ------------------------------------------------------------------------ */

/* Threads that send requests while a test asserts on its own thread (the
 * loaders, the reader, the exact-model writers).  Their state is static,
 * not on a test's frame, with their own copy of the server's address; they
 * never fail the test themselves (cmocka's failure longjmps, which only the
 * test's own thread may do) but record what went wrong for it.  They run until bg_stop is
 * set: bg_join() stops and joins them all, and bg_teardown does the same
 * after a failed assertion, so nothing keeps using an abandoned frame. */
#define BG_MAX 4

static pthread_t bg_threads[BG_MAX];
static int bg_count;
static _Atomic int bg_stop;

static void bg_start(void *(*fn)(void *), void *arg)
{
    assert_true(bg_count < BG_MAX);
    if (bg_count == 0)
        atomic_store(&bg_stop, 0);
    assert_int_equal(pthread_create(&bg_threads[bg_count], NULL, fn, arg), 0);
    bg_count++;
}

static void bg_join(void)
{
    atomic_store(&bg_stop, 1);
    for (int i = 0; i < bg_count; i++)
        pthread_join(bg_threads[i], NULL);
    bg_count = 0;
}

static int bg_teardown(void **state)
{
    (void)state;
    bg_join();
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Load                                                                     */
/* ------------------------------------------------------------------------ */

/* A loader's state (see "Background threads"): a bad answer is recorded,
 * and stops every loader. */
struct load {
    tally_proc_t p;
    unsigned seed;
    long ok, sent;
    char err[512];      /* the first bad answer, "" if none */
};

static _Atomic long ts_clock = 1700000000000;   /* distinct sample timestamps */

/* The body that creates the key of a family whose changes need one, or NULL. */
static const char *create_body(const char *path)
{
    static const char *const bodies[][2] = {
        { "/cms/", "{\"width\":200,\"depth\":4}" },
        { "/cuckoo/", "{\"capacity\":1000,\"bucket_size\":4,\"fingerprint_bits\":16}" },
        { "/topk/", "{\"k\":5,\"width\":34,\"depth\":5}" },
        { "/tdigest/", "{\"compression\":100}" },
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
        if (!strncmp(path, bodies[i][0], strlen(bodies[i][0])))
            return bodies[i][1];
    return NULL;
}

/* One change from a mix of every family, on one of a few dozen keys: the
 * counters, the four rate limiters, HLL, Bloom, Cuckoo, Count-Min, Top-K,
 * T-Digest, bitmaps and BITFIELD, activity, geo, time series, concurrency
 * leases (short ones that expire and are purged, and an acquire released at
 * once by its id). */
static bool one_change(const tally_proc_t *p, unsigned *seed, char *err, size_t errlen)
{
    int k = rand_r(seed) % 24, kind = rand_r(seed) % 18, v = rand_r(seed) % 5000;
    char path[96], body[256];
    const char *method = "POST", *send = body;
    switch (kind) {
    case 16:
        snprintf(path, sizeof(path), "/lease/l%d", k % 6);
        snprintf(body, sizeof(body), "{\"limit\":3,\"ttl_ms\":%d}", 200 + v % 2000);
        break;
    case 17: {
        snprintf(path, sizeof(path), "/lease/r%d", k % 6);
        http_resp_t a = http(p, "POST", path, "{\"limit\":2,\"ttl_ms\":60000}", NULL);
        json_t *id = a.status == 200 ? json_object_get(a.json, "lease") : NULL;
        if (a.status != 200) {
            snprintf(err, errlen, "POST %s answered %ld: %.*s", path, a.status, (int)a.len, a.body ? a.body : "");
            http_free(&a);
            return false;
        }
        if (json_is_string(id)) {   /* granted: release it (else the key is full of expiring ones: no-op) */
            snprintf(path, sizeof(path), "/lease/r%d/%s", k % 6, json_string_value(id));
            method = "DELETE";
            send = NULL;
        }
        http_free(&a);
        if (send)
            snprintf(body, sizeof(body), "{\"limit\":2,\"ttl_ms\":60000}");
        break;
    }
    case 0:
        snprintf(path, sizeof(path), "/counter/c%d", k);
        snprintf(body, sizeof(body), "{\"by\":%d}", v % 100);
        break;
    case 1:
        snprintf(path, sizeof(path), "/counter/t%d", k);
        snprintf(body, sizeof(body), "{\"by\":1,\"ttl\":3600}");
        break;
    case 2:
        snprintf(path, sizeof(path), "/throttle");
        snprintf(body, sizeof(body), "{\"key\":\"g%d\",\"max_burst\":5,\"count_per_period\":10,\"period\":60}", k);
        break;
    case 3:
        snprintf(path, sizeof(path), "/throttle");
        snprintf(body, sizeof(body), "{\"key\":\"s%d\",\"algorithm\":\"sliding_log\",\"max_count\":5,\"period\":60}", k);
        break;
    case 4:
        snprintf(path, sizeof(path), "/uv/u%d", k);
        snprintf(body, sizeof(body), "{\"items\":[\"a%d\",\"b%d\"]}", v % 1000, rand_r(seed) % 1000);
        break;
    case 5:
        snprintf(path, sizeof(path), "/bloom/b%d", k);
        snprintf(body, sizeof(body), "{\"items\":[\"x%d\"],\"error_rate\":0.01,\"capacity\":1000}", v);
        break;
    case 6:
        snprintf(path, sizeof(path), "/cms/m%d", k);
        snprintf(body, sizeof(body), "{\"increments\":[{\"item\":\"i%d\",\"by\":2}]}", v % 50);
        break;
    case 7:
        snprintf(path, sizeof(path), "/throttle");
        snprintf(body, sizeof(body), "{\"key\":\"k%d\",\"algorithm\":\"token_bucket\",\"capacity\":5,\"refill_rate\":0.5}", k);
        break;
    case 8:
        snprintf(path, sizeof(path), "/cuckoo/q%d", k);
        snprintf(body, sizeof(body), "{\"items\":[\"y%d\"]}", v % 300);
        break;
    case 9:
        snprintf(path, sizeof(path), "/topk/p%d", k);
        snprintf(body, sizeof(body), "{\"items\":[\"z%d\",\"z%d\"]}", v % 40, rand_r(seed) % 40);
        break;
    case 10:
        snprintf(path, sizeof(path), "/tdigest/d%d", k);
        snprintf(body, sizeof(body), "{\"values\":[%d,%d.5]}", v, rand_r(seed) % 1000);
        break;
    case 11:
        snprintf(path, sizeof(path), "/bits/s%d/setbit", k);
        snprintf(body, sizeof(body), "{\"offset\":%d,\"value\":%d}", v, rand_r(seed) % 2);
        break;
    case 12:
        snprintf(path, sizeof(path), "/bits/f%d/field", k);
        snprintf(body, sizeof(body), "{\"ops\":[{\"incrby\":\"u8\",\"offset\":%d,\"increment\":%d}]}", v % 64 * 8,
                 rand_r(seed) % 7);
        break;
    case 13:
        snprintf(path, sizeof(path), "/activity/a%d", k);
        snprintf(body, sizeof(body), "{\"day\":\"2024-01-%02d\",\"users\":[%d,%d]}", 1 + v % 28, v, rand_r(seed) % 100000);
        break;
    case 14:
        snprintf(path, sizeof(path), "/geo/o%d", k);
        snprintf(body, sizeof(body), "{\"members\":[{\"member\":\"m%d\",\"lon\":%d.%03d,\"lat\":%d.%03d}]}", v % 100,
                 v % 170, v % 1000, v % 80, rand_r(seed) % 1000);
        break;
    default:
        snprintf(path, sizeof(path), "/ts/s%d", k);
        snprintf(body, sizeof(body), "{\"samples\":[[%ld,%d]]}", atomic_fetch_add(&ts_clock, 1), v);
        break;
    }
    http_resp_t r = http(p, method, path, send, NULL);
    /* a Count-Min, Cuckoo, Top-K or T-Digest key must exist: create it once */
    const char *create = create_body(path);
    if (create && r.status == 404) {
        http_free(&r);
        r = http(p, "PUT", path, create, NULL);
    }
    bool ok = r.status == 200 || r.status == 201 || r.status == 409 || r.status == 429;
    if (!ok)
        snprintf(err, errlen, "%s %s answered %ld: %.*s", method, path, r.status, (int)r.len, r.body ? r.body : "");
    http_free(&r);
    return ok;
}

/* one_change on the test's own thread: a bad answer fails the test */
static void one_change_or_fail(const tally_proc_t *p, unsigned *seed)
{
    char err[512];
    if (!one_change(p, seed, err, sizeof(err)))
        fail_msg("%s", err);
}

#define LOADERS 3

static struct load loaders[LOADERS];

static void *load_main(void *arg)
{
    struct load *l = arg;
    while (!atomic_load(&bg_stop)) {
        if (!one_change(&l->p, &l->seed, l->err, sizeof(l->err))) {
            atomic_store(&bg_stop, 1);
            break;
        }
        l->sent++;
    }
    return NULL;
}

static void load_run(const tally_proc_t *p, int ms, void (*midway)(void *), void *ud)
{
    for (int i = 0; i < LOADERS; i++) {
        loaders[i] = (struct load){ *p, 1234u + (unsigned)i, 0, 0, "" };
        bg_start(load_main, &loaders[i]);
    }
    sleep_ms(ms / 2);
    if (midway)
        midway(ud);
    sleep_ms(ms / 2);
    bg_join();
    for (int i = 0; i < LOADERS; i++)
        if (loaders[i].err[0])
            fail_msg("loader %d: %s", i, loaders[i].err);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

struct pair {
    tally_proc_t *primary, *late;
};

static void start_late(void *ud)
{
    struct pair *pr = ud;
    start_replica(pr->late, pr->primary, NULL);
}

/* Two replicas, one attached before the load and one while it runs (its
 * snapshot is taken under load), converge to the primary's exact state. */
static void test_converge_under_load(void **state)
{
    (void)state;
    tally_proc_t p, r1, r2;
    tally_start(&p, NULL, NULL);
    for (int i = 0; i < 50; i++)
        http_expect_post_counter(&p, "before", i);
    start_replica(&r1, &p, NULL);
    struct pair pr = { &p, &r2 };
    load_run(&p, 3000, start_late, &pr);
    wait_caught_up(&p, &r1);
    wait_caught_up(&p, &r2);
    assert_same_state(&p, &r1);
    assert_same_state(&p, &r2);
    const tally_proc_t *both[] = { &r1, &r2 };
    assert_same_dumps(&p, both, 2);

    /* the primary sees both, caught up; /metrics says so */
    json_t *o = http_get_json(&p, "/info");
    json_t *repl = json_object_get(o, "replication");
    assert_string_equal(json_string_value(json_object_get(repl, "role")), "primary");
    assert_int_equal(json_integer_value(json_object_get(repl, "replicas_connected")), 2);
    json_t *peer;
    size_t i;
    json_array_foreach(json_object_get(repl, "replicas"), i, peer) {
        assert_int_equal(json_integer_value(json_object_get(peer, "lag_records")), 0);
        assert_int_equal(json_integer_value(json_object_get(peer, "lag_ms")), 0);
    }
    json_decref(o);
    http_resp_t m = http(&p, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(m.body, "tally_replicas_connected 2"));
    assert_non_null(strstr(m.body, "tally_replica_lag_records{replica=\"r-"));
    assert_non_null(strstr(m.body, "tally_replication_role{role=\"primary\"} 1"));
    http_free(&m);
    m = http(&r1, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(m.body, "tally_replication_link_up 1"));
    assert_non_null(strstr(m.body, "tally_replication_role{role=\"replica\"} 1"));
    http_free(&m);
    tally_cleanup(&r2);
    tally_cleanup(&r1);
    tally_cleanup(&p);
}

/* Reservations, settles and refunds (docs/rate-limiting.md) on every
 * algorithm that takes them: a replica following the stream and one
 * attached afterwards (from a snapshot, pending reservations included)
 * hold byte-identical states, expired reservations applied alike. */
static void test_reservations_replicate(void **state)
{
    (void)state;
    static const char *const algos[] = {
        "\"max_burst\":99,\"count_per_period\":100,\"period\":3600",
        "\"algorithm\":\"token_bucket\",\"capacity\":100,\"refill_rate\":0.5",
        "\"algorithm\":\"sliding_window\",\"max_count\":100,\"period\":86400",
        "\"algorithm\":\"fixed_window\",\"max_count\":100,\"period\":86400",
    };
    tally_proc_t p, r1, r2;
    tally_start(&p, NULL, NULL);
    start_replica(&r1, &p, NULL);
    char body[512], ids[4][8][32];
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < 8; i++) {
            snprintf(body, sizeof(body), "{\"key\":\"rsv%d\",%s,\"quantity\":%d,\"reserve\":true,\"ttl\":%d%s}", a,
                     algos[a], 3 + i, i < 3 ? 1 : 3600, i % 2 ? ",\"on_expiry\":\"refund\"" : "");
            http_resp_t r = http(&p, "POST", "/throttle", body, NULL);
            assert_status(&r, 200);
            json_t *v = json_object_get(r.json, "reservation");
            assert_true(json_is_string(v));
            snprintf(ids[a][i], sizeof(ids[a][i]), "%s", json_string_value(v));
            http_free(&r);
        }
    sleep_ms(1200);   /* the first three of each key expire: kept or refunded */
    for (int a = 0; a < 4; a++) {
        for (int i = 3; i < 6; i++) {
            snprintf(body, sizeof(body), "{\"reservation\":\"%s\",\"actual\":%d}", ids[a][i], i == 3 ? 0 : 20);
            http_resp_t r = httpf(&p, "POST", body, "/throttle/rsv%d/settle", a);
            assert_status(&r, 200);
            http_free(&r);
        }
        snprintf(body, sizeof(body), "{%s,\"quantity\":2}", algos[a]);
        http_resp_t r = httpf(&p, "POST", body, "/throttle/rsv%d/refund", a);
        assert_status(&r, 200);
        http_free(&r);
    }
    start_replica(&r2, &p, NULL);
    wait_caught_up(&p, &r1);
    wait_caught_up(&p, &r2);
    assert_same_state(&p, &r1);
    assert_same_state(&p, &r2);
    /* the pending ones settle on the primary and the replicas follow */
    for (int a = 0; a < 4; a++) {
        snprintf(body, sizeof(body), "{\"reservation\":\"%s\",\"actual\":1}", ids[a][7]);
        http_resp_t r = httpf(&p, "POST", body, "/throttle/rsv%d/settle", a);
        assert_status(&r, 200);
        http_free(&r);
        http_resp_t x = httpf(&r1, "POST", body, "/throttle/rsv%d/settle", a);   /* a replica refuses changes */
        assert_true(x.status >= 400);
        http_free(&x);
    }
    wait_caught_up(&p, &r1);
    wait_caught_up(&p, &r2);
    assert_same_state(&p, &r1);
    assert_same_state(&p, &r2);
    tally_cleanup(&r2);
    tally_cleanup(&r1);
    tally_cleanup(&p);
}

/* A change sent to a replica is refused before anything is touched. */
static void test_replica_refuses_changes(void **state)
{
    (void)state;
    tally_proc_t p, r;
    tally_start(&p, NULL, NULL);
    http_expect(&p, "POST", "/counter/x", "{\"by\":7}", 200, NULL);
    start_replica(&r, &p, NULL);
    wait_caught_up(&p, &r);
    char url[64], hdr[128];
    url_of(&p, url, sizeof(url));
    static const char *const changes[][3] = {
        { "POST", "/counter/x", "{\"by\":1}" },
        { "DELETE", "/keys/x", NULL },
        { "POST", "/throttle", "{\"key\":\"x2\",\"max_burst\":5,\"count_per_period\":10,\"period\":60}" },
        { "GET", "/throttle/x3?max_burst=5&count_per_period=10&period=60", NULL },
        { "PUT", "/bloom/nb", "{\"error_rate\":0.01,\"capacity\":100}" },
    };
    for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
        http_resp_t a = http(&r, changes[i][0], changes[i][1], changes[i][2], NULL);
        assert_error(&a, 421, "READONLY");
        assert_true(http_header(&a, "X-Tally-Primary", hdr, sizeof(hdr)));
        assert_string_equal(hdr, url);
        assert_non_null(strstr(a.body, url));
        http_free(&a);
    }
    http_expect(&r, "GET", "/counter/x", NULL, 200, "{\"value\":7,\"ttl_ms\":-1}");
    http_expect(&p, "GET", "/counter/x", NULL, 200, "{\"value\":7,\"ttl_ms\":-1}");
    http_resp_t k = http(&r, "GET", "/keys", NULL, NULL);
    assert_status(&k, 200);
    assert_null(strstr(k.body, "x2"));
    assert_null(strstr(k.body, "nb"));
    http_free(&k);
    /* readiness by role */
    http_expect(&p, "GET", "/readyz?role=primary", NULL, 200, NULL);
    http_expect(&r, "GET", "/readyz?role=primary", NULL, 503, NULL);
    http_expect(&r, "GET", "/readyz?role=replica", NULL, 200, NULL);
    http_expect(&r, "GET", "/readyz", NULL, 200, NULL);
    http_expect(&r, "GET", "/readyz?role=leader", NULL, 400, NULL);
    tally_cleanup(&r);
    tally_cleanup(&p);
}

/* Stopped replicas: within the backlog they resume, past it they resync. */
static void test_resume_and_resync(void **state)
{
    (void)state;
    tally_proc_t p, r;
    const char *pargs[] = { "--repl-backlog", "64kb", NULL };
    tally_start(&p, NULL, pargs);
    start_replica(&r, &p, NULL);
    for (int i = 0; i < 20; i++)
        http_expect_post_counter(&p, "a", i);
    wait_caught_up(&p, &r);
    assert_int_equal(link_int(&r, "full_syncs"), 1);

    /* away for 4 s (the primary counts it disconnected), a few changes */
    tally_pause(&r);
    for (int i = 0; i < 100; i++) {
        http_resp_t a = httpf(&p, "POST", "{\"by\":2}", "/counter/a%d", i % 20);
        http_free(&a);
    }
    sleep_ms(4000);
    assert_int_equal(repl_int(&p, "replicas_connected"), 0);
    tally_resume(&r);
    wait_caught_up(&p, &r);
    assert_int_equal(link_int(&r, "full_syncs"), 1);   /* resumed, no snapshot */
    assert_same_state(&p, &r);

    /* away while more than the backlog is written: changes until the stream
     * has moved on by twice the backlog (records are a few dozen bytes each) */
    tally_pause(&r);
    unsigned seed = 7;
    long long from = repl_int(&p, "offset");
    assert_true(from >= 0);
    while (repl_int(&p, "offset") - from <= 2 * 65536)
        for (int j = 0; j < 100; j++)
            one_change_or_fail(&p, &seed);
    assert_true(repl_int(&p, "backlog_bytes") <= 65536);
    tally_resume(&r);
    wait_caught_up(&p, &r);
    assert_int_equal(link_int(&r, "full_syncs"), 2);   /* its position was gone */
    assert_same_state(&p, &r);
    tally_cleanup(&r);
    tally_cleanup(&p);
}

/* Promotion under a new epoch; the old primary, restarted without --peers,
 * is not fenced by a replica's newer epoch (409, nothing changes), and
 * rejoins as a replica when told. */
static void test_promote_and_fence(void **state)
{
    (void)state;
    tally_proc_t p, r, r2;
    tally_start(&p, NULL, NULL);
    start_replica(&r, &p, NULL);
    http_expect(&p, "POST", "/counter/x", "{\"by\":5}", 200, NULL);
    wait_caught_up(&p, &r);
    char pdir[256];
    snprintf(pdir, sizeof(pdir), "%s", p.dir);
    tally_kill(&p);

    http_resp_t a = http(&r, "POST", "/admin/promote", NULL, NULL);
    assert_status(&a, 200);
    assert_int_equal(json_int_of(&a, "epoch"), 1);
    assert_true(json_bool_of(&a, "promoted"));
    http_free(&a);
    http_expect(&r, "GET", "/readyz?role=primary", NULL, 200, NULL);
    http_expect(&r, "POST", "/counter/x", "{\"by\":10}", 200, NULL);
    /* promoting a primary again changes nothing */
    a = http(&r, "POST", "/admin/promote", NULL, NULL);
    assert_int_equal(json_int_of(&a, "epoch"), 1);
    assert_false(json_bool_of(&a, "promoted"));
    http_free(&a);
    /* a replica of the new primary learns epoch 1 */
    start_replica(&r2, &r, NULL);
    wait_caught_up(&r, &r2);
    assert_int_equal(link_int(&r2, "primary_epoch"), 1);

    /* the old primary comes back on its data directory: it believes it is
     * the primary of epoch 0 and takes a diverging change */
    tally_start(&p, pdir, NULL);
    p.own_dir = true;
    http_expect(&p, "POST", "/counter/x", "{\"by\":1000}", 200, NULL);
    /* a replica of epoch 1 pointed at it is refused (409), and that changes
     * nothing on it: a caller's epoch never fences a node by itself (anyone
     * holding a replicate token could send one).  Without --peers it stays
     * a primary until an operator makes it a replica. */
    char url[64], q[128], text[1200];
    url_of(&p, url, sizeof(url));
    snprintf(q, sizeof(q), "/admin/replicate?primary=%s", url);
    http_expect(&r2, "POST", q, NULL, 200, NULL);
    for (int i = 0; i < 500 && !strstr(repl_str(&r2, true, "last_error", text, sizeof(text)), "answered 409"); i++)
        sleep_ms(20);
    if (!strstr(text, "answered 409"))
        fail_msg("the replica of epoch 1 was not refused by the primary of epoch 0: %s", text);
    assert_string_equal(repl_str(&p, false, "role", text, sizeof(text)), "primary");
    assert_int_equal(repl_int(&p, "epoch"), 0);
    http_expect(&p, "POST", "/counter/x", "{\"by\":1}", 200, NULL);   /* diverging: dropped when it rejoins */
    http_expect(&p, "GET", "/readyz?role=primary", NULL, 200, NULL);
    /* rejoining as a replica of the new primary drops its diverging change */
    char rurl[64];
    url_of(&r, rurl, sizeof(rurl));
    snprintf(q, sizeof(q), "/admin/replicate?primary=%s", rurl);
    http_expect(&p, "POST", q, NULL, 200, NULL);
    snprintf(q, sizeof(q), "/admin/replicate?primary=%s", rurl);
    http_expect(&r2, "POST", q, NULL, 200, NULL);
    wait_caught_up(&r, &p);
    http_expect(&p, "GET", "/counter/x", NULL, 200, "{\"value\":15,\"ttl_ms\":-1}");
    a = http(&p, "POST", "/counter/x", "{\"by\":1}", NULL);
    assert_error(&a, 421, "READONLY");
    http_free(&a);
    wait_caught_up(&r, &r2);
    assert_same_state(&r, &r2);
    assert_same_state(&r, &p);

    /* the promotion's epoch record is in the new primary's journal, between
     * changes: a restart replays around it and restores the epoch even
     * without the EPOCH file (which it writes again) */
    tally_cleanup(&r2);
    tally_cleanup(&p);
    char rdir[256], epath[300];
    snprintf(rdir, sizeof(rdir), "%s", r.dir);
    snprintf(epath, sizeof(epath), "%s/EPOCH", rdir);
    tally_kill(&r);
    assert_int_equal(unlink(epath), 0);
    tally_start(&r, rdir, NULL);
    r.own_dir = true;
    http_expect(&r, "GET", "/counter/x", NULL, 200, "{\"value\":15,\"ttl_ms\":-1}");
    a = http(&r, "GET", "/replication/epoch", NULL, NULL);
    assert_status(&a, 200);
    assert_int_equal(json_int_of(&a, "epoch"), 1);
    http_free(&a);
    size_t elen;
    char *etext = file_read(epath, &elen);
    assert_string_equal(etext, "1\n");
    free(etext);
    tally_cleanup(&r);
}

/* ------------------------------------------------------------------------ */
/* --peers: a read-only view of the group                                  */
/* ------------------------------------------------------------------------ */

static const char *role_of(const tally_proc_t *p, char *out, size_t n)
{
    http_resp_t a = http(p, "GET", "/replication/epoch", NULL, NULL);   /* 503 while loading */
    const char *role = a.status == 200 ? json_string_value(json_object_get(a.json, "role")) : NULL;
    snprintf(out, n, "%s", role ? role : "");
    http_free(&a);
    return out;
}

/* Waits (10 s at most) until p's role is `want`. */
static void wait_role(const tally_proc_t *p, const char *want)
{
    char role[32];
    for (int i = 0; i < 500; i++) {
        if (!strcmp(role_of(p, role, sizeof(role)), want))
            return;
        sleep_ms(20);
    }
    fail_msg("port %d is %s, not %s, after 10 s", p->port, role, want);
}

/* A group of three run with --peers: a read-only view.  The primary takes
 * changes from its start (no waiting for the group); /info's peers_state
 * describes the others; a promotion behind its back - another primary of a
 * newer epoch, reported by the view - changes neither its role nor its
 * epoch, nor its replicas' (no answer of another tallyd changes a node's
 * role: failover is --coordinator's, it_etcd). */
static void test_peers_view_only(void **state)
{
    (void)state;
    tally_proc_t p, r1, r2;
    int port[3] = { tally_free_port(), tally_free_port(), tally_free_port() };
    char url[3][64], ports[3][16], peers[3][200];
    for (int i = 0; i < 3; i++) {
        snprintf(url[i], sizeof(url[i]), "http://127.0.0.1:%d", port[i]);
        snprintf(ports[i], sizeof(ports[i]), "%d", port[i]);
    }
    snprintf(peers[0], sizeof(peers[0]), "%s,%s", url[1], url[2]);
    snprintf(peers[1], sizeof(peers[1]), "%s,%s,%s", url[0], url[1], url[2]);   /* itself too: recognised */
    snprintf(peers[2], sizeof(peers[2]), "%s,%s", url[0], url[1]);
    const char *pargs[] = { "--port", ports[0], "--peers", peers[0], "--peer-secret-file", peer_secret(), NULL };
    const char *r1args[] = { "--port", ports[1], "--peers", peers[1], "--peer-secret-file", peer_secret(),
                             "--replica-of", url[0], NULL };
    const char *r2args[] = { "--port", ports[2], "--peers", peers[2], "--peer-secret-file", peer_secret(),
                             "--replica-of", url[0], NULL };

    /* a peer that is not a base URL is refused at start, named */
    tally_proc_t bad;
    const char *badargs[] = { "--peers", "http://127.0.0.1:1,10.0.0.9:8080", "--peer-secret-file", peer_secret(), NULL };
    assert_int_not_equal(tally_start_expect_exit(&bad, NULL, badargs), 0);
    char *blog = tally_log(&bad);
    assert_non_null(strstr(blog, "--peers: '10.0.0.9:8080' is not a base URL"));
    free(blog);
    tally_cleanup(&bad);

    /* alone, the primary takes changes: its peers are a view, not a vote */
    tally_start(&p, NULL, pargs);
    char role[32];
    assert_string_equal(role_of(&p, role, sizeof(role)), "primary");
    http_expect(&p, "POST", "/counter/x", "{\"by\":5}", 200, NULL);
    http_expect(&p, "GET", "/readyz?role=primary", NULL, 200, NULL);
    tally_start(&r1, NULL, r1args);
    tally_start(&r2, NULL, r2args);
    load_run(&p, 1000, NULL, NULL);
    wait_caught_up(&p, &r1);
    wait_caught_up(&p, &r2);
    const tally_proc_t *reps[] = { &r1, &r2 };
    assert_same_dumps(&p, reps, 2);
    char text[1200];
    for (int i = 0; i < 300 && !strstr(repl_str(&p, false, "peers_state", text, sizeof(text)), "3 of 3 nodes answered"); i++)
        sleep_ms(20);
    assert_string_equal(text, "3 of 3 nodes answered; primaries among the others: none");

    /* r2 is promoted behind everyone's back (epoch 1): two primaries, which
     * the view shows - and nothing else changes */
    http_resp_t a = http(&r2, "POST", "/admin/promote", NULL, NULL);
    assert_status(&a, 200);
    assert_int_equal(json_int_of(&a, "epoch"), 1);
    http_free(&a);
    for (int i = 0; i < 300 && !strstr(repl_str(&p, false, "peers_state", text, sizeof(text)), "newer"); i++)
        sleep_ms(20);
    assert_non_null(strstr(text, url[2]));
    assert_non_null(strstr(text, "1 report an epoch newer than this node's 0 (up to 1)"));
    sleep_ms(2200);   /* two more rounds */
    assert_string_equal(role_of(&p, role, sizeof(role)), "primary");
    assert_string_equal(role_of(&r1, role, sizeof(role)), "replica");
    http_expect(&p, "POST", "/counter/x", "{\"by\":10}", 200, NULL);
    http_expect(&p, "GET", "/readyz?role=primary", NULL, 200, NULL);
    json_t *o = http_get_json(&p, "/info");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "replication"), "epoch")), 0);
    json_decref(o);
    wait_caught_up(&p, &r1);
    http_expect(&r1, "GET", "/counter/x", NULL, 200, "{\"value\":15,\"ttl_ms\":-1}");
    tally_cleanup(&r2);
    tally_cleanup(&r1);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Forged peers: what a peer's answer may change                            */
/* ------------------------------------------------------------------------ */

/* A node A runs with --peers naming two fake peers (libmicrohttpd servers
 * in this process) that answer GET /replication/epoch as a test phase
 * says; a third fake, ATTACKER, is in no --peers and only records what
 * reaches it.  A peer's answer counts only when it is signed with the
 * group's secret for the question asked, and changes A's role only when a
 * majority of its members agrees; A never sends anything to a URL it was
 * not given. */
enum fake_mode {
    F_HONEST,                    /* a replica of A under epoch 0, signed */
    F_UNSIGNED,                  /* a replica of ATTACKER under epoch 5, no signature */
    F_WRONG_SECRET,              /* the same, signed with another secret */
    F_REPLAYED,                  /* the same, signed with the group's secret for the previous question */
    F_REDIRECT,                  /* 302 to ATTACKER */
    F_PROBING_MAX,               /* probing under epoch 2^63 - 1, signed */
    F_EPOCH_2_53,                /* primary under epoch 2^53, signed */
    F_PRIMARY_5,                 /* itself the primary of epoch 5, signed */
    F_REPLICA_OF_ATTACKER,       /* a replica of ATTACKER under epoch 5, signed */
    F_REPLICA_OF_FAKE0,          /* a replica of fake 0 under epoch 5, signed */
    F_ATTACKER,                  /* ATTACKER: 200 {} to anything */
};

#define OTHER_SECRET "another group's secret, also long enough!!!"

typedef struct fake {
    struct MHD_Daemon *d;
    char url[64];
    char run[24];
    pthread_mutex_t mu;
    enum fake_mode mode;
    int epoch_asks;              /* GET /replication/epoch received */
    int requests;                /* every request received */
    int with_auth;               /* requests carrying an Authorization header */
    char auth[300];              /* the last one */
    char other[300];             /* the last request that was not /replication/epoch */
    char other_auth[300];        /* its Authorization header ("" none) */
    char last_nonce[140];        /* the nonce of the previous question */
} fake_t;

static fake_t fakes[3];          /* 0, 1: A's --peers; 2: ATTACKER */
static char fake_node_url[64];   /* A */

static void hmac_hex(const char *secret, const char *nonce, const char *body, char out[80])
{
    struct hmac_sha256_ctx c;
    uint8_t mac[SHA256_DIGEST_SIZE];
    hmac_sha256_set_key(&c, strlen(secret), (const uint8_t *)secret);
    hmac_sha256_update(&c, strlen(nonce), (const uint8_t *)nonce);
    hmac_sha256_update(&c, 1, (const uint8_t *)"\n");
    hmac_sha256_update(&c, strlen(body), (const uint8_t *)body);
    hmac_sha256_digest(&c, sizeof(mac), mac);
    int n = snprintf(out, 80, "hmac-sha256=");
    for (size_t i = 0; i < sizeof(mac); i++)
        n += snprintf(out + n, (size_t)(80 - n), "%02x", mac[i]);
}

static enum MHD_Result fake_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                    const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)method, (void)version, (void)upload, (void)upload_size;
    fake_t *f = cls;
    if (!*state) {   /* the head: answered on the next call */
        *state = f;
        return MHD_YES;
    }
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *nonce = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "nonce");
    bool epoch = !strcmp(url, "/replication/epoch");
    char previous[140];
    pthread_mutex_lock(&f->mu);
    enum fake_mode m = f->mode;
    f->requests++;
    if (auth) {
        f->with_auth++;
        snprintf(f->auth, sizeof(f->auth), "%s", auth);
    }
    if (epoch) {
        f->epoch_asks++;
    } else {
        snprintf(f->other, sizeof(f->other), "%s", url);
        snprintf(f->other_auth, sizeof(f->other_auth), "%s", auth ? auth : "");
    }
    snprintf(previous, sizeof(previous), "%s", f->last_nonce[0] ? f->last_nonce : "00000000000000000000000000000000");
    snprintf(f->last_nonce, sizeof(f->last_nonce), "%s", nonce ? nonce : "");
    pthread_mutex_unlock(&f->mu);
    char body[600], sig[80] = "", location[200] = "";
    const char *secret = GROUP_SECRET, *signed_for = nonce ? nonce : "";
    unsigned status = 200;
    const char *attacker = fakes[2].url;
    switch (m) {
    case F_HONEST:
        snprintf(body, sizeof(body), "{\"role\":\"replica\",\"epoch\":0,\"run\":\"%s\",\"primary\":\"%s\"}", f->run,
                 fake_node_url);
        break;
    case F_UNSIGNED:
    case F_WRONG_SECRET:
    case F_REPLAYED:
    case F_REPLICA_OF_ATTACKER:
        snprintf(body, sizeof(body), "{\"role\":\"replica\",\"epoch\":5,\"run\":\"%s\",\"primary\":\"%s\"}", f->run,
                 attacker);
        secret = m == F_UNSIGNED ? NULL : m == F_WRONG_SECRET ? OTHER_SECRET : GROUP_SECRET;
        signed_for = m == F_REPLAYED ? previous : signed_for;
        break;
    case F_REDIRECT:
        snprintf(body, sizeof(body), "{}");
        snprintf(location, sizeof(location), "%s%s?nonce=%s", attacker, url, nonce ? nonce : "");
        status = 302;
        secret = NULL;
        break;
    case F_PROBING_MAX:
        snprintf(body, sizeof(body), "{\"role\":\"probing\",\"epoch\":9223372036854775807,\"run\":\"%s\",\"primary\":null}",
                 f->run);
        break;
    case F_EPOCH_2_53:
        snprintf(body, sizeof(body), "{\"role\":\"primary\",\"epoch\":9007199254740992,\"run\":\"%s\",\"primary\":null}",
                 f->run);
        break;
    case F_PRIMARY_5:
        snprintf(body, sizeof(body), "{\"role\":\"primary\",\"epoch\":5,\"run\":\"%s\",\"primary\":null}", f->run);
        break;
    case F_REPLICA_OF_FAKE0:
        snprintf(body, sizeof(body), "{\"role\":\"replica\",\"epoch\":5,\"run\":\"%s\",\"primary\":\"%s\"}", f->run,
                 fakes[0].url);
        break;
    case F_ATTACKER:
        snprintf(body, sizeof(body), "{}");
        secret = NULL;
        break;
    }
    if (!epoch && m != F_ATTACKER) {   /* a primary asked for its data sends the asker elsewhere */
        snprintf(body, sizeof(body), "{}");
        snprintf(location, sizeof(location), "%s%s", attacker, url);
        status = 302;
        secret = NULL;
    }
    if (secret)
        hmac_hex(secret, signed_for, body, sig);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (sig[0])
        MHD_add_response_header(r, "X-Tally-Peer-Signature", sig);
    if (location[0])
        MHD_add_response_header(r, "Location", location);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static void fake_start(fake_t *f, int i, enum fake_mode mode)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
    f->mode = mode;
    snprintf(f->run, sizeof(f->run), "fake-run-%d", i);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    f->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, fake_handler, f,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
    assert_non_null(f->d);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(di);
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u", (unsigned)di->port);
}

static void fake_stop(fake_t *f)
{
    if (f->d)
        MHD_stop_daemon(f->d);
    f->d = NULL;
    pthread_mutex_destroy(&f->mu);
}

static int fakes_stop(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        if (fakes[i].d)
            fake_stop(&fakes[i]);
    return 0;
}

static void fake_set(fake_t *f, enum fake_mode mode)
{
    pthread_mutex_lock(&f->mu);
    f->mode = mode;
    pthread_mutex_unlock(&f->mu);
}

static int fake_count(fake_t *f, const int *field)
{
    pthread_mutex_lock(&f->mu);
    int n = *field;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* Waits until A has asked both members at least twice more (so a whole
 * round ran after the phase began). */
static void rounds_pass(const tally_proc_t *a)
{
    (void)a;
    int base0 = fake_count(&fakes[0], &fakes[0].epoch_asks), base1 = fake_count(&fakes[1], &fakes[1].epoch_asks);
    for (int i = 0; i < 400; i++) {
        if (fake_count(&fakes[0], &fakes[0].epoch_asks) >= base0 + 2 &&
            fake_count(&fakes[1], &fakes[1].epoch_asks) >= base1 + 2)
            return;
        sleep_ms(50);
    }
    fail_msg("the node did not ask its peers twice in 20 s");
}

/* A is the primary of epoch 0 and takes a change (counted in *acked). */
static void still_primary(const tally_proc_t *a, int *acked)
{
    http_resp_t e = http(a, "GET", "/replication/epoch", NULL, NULL);
    assert_status(&e, 200);
    assert_string_equal(json_string_value(json_object_get(e.json, "role")), "primary");
    assert_int_equal(json_int_of(&e, "epoch"), 0);
    http_free(&e);
    http_expect(a, "POST", "/counter/forged", "{\"by\":1}", 200, NULL);
    (*acked)++;
    http_expect(a, "GET", "/readyz?role=primary", NULL, 200, NULL);
}

/* Nothing ever reached ATTACKER. */
static void attacker_untouched(void)
{
    fake_t *f = &fakes[2];
    pthread_mutex_lock(&f->mu);
    int n = f->requests, with_auth = f->with_auth;
    char last[300];
    snprintf(last, sizeof(last), "%s", f->other);
    pthread_mutex_unlock(&f->mu);
    if (n != 0)
        fail_msg("ATTACKER (in no --peers) received %d requests, %d with a token: the last was %s", n, with_auth,
                 last);
}

/* Whether fake f was asked `path` (besides /replication/epoch); its
 * Authorization header into auth. */
static bool fake_asked(fake_t *f, const char *path, char *auth, size_t n)
{
    pthread_mutex_lock(&f->mu);
    bool asked = strstr(f->other, path) != NULL;
    snprintf(auth, n, "%s", f->other_auth);
    pthread_mutex_unlock(&f->mu);
    return asked;
}

static void test_forged_peer_answers(void **state)
{
    (void)state;
    char port[16], peers[200];
    int p = tally_free_port();
    snprintf(port, sizeof(port), "%d", p);
    snprintf(fake_node_url, sizeof(fake_node_url), "http://127.0.0.1:%d", p);
    fake_start(&fakes[0], 0, F_HONEST);
    fake_start(&fakes[1], 1, F_HONEST);
    fake_start(&fakes[2], 2, F_ATTACKER);
    /* the fakes' URLs are written after their threads started: each fake's
     * mutex, taken by every answer, publishes them before A asks anything */
    for (int i = 0; i < 3; i++)
        fake_set(&fakes[i], i < 2 ? F_HONEST : F_ATTACKER);
    snprintf(peers, sizeof(peers), "%s,%s", fakes[0].url, fakes[1].url);
    const char *token = cred_file("replicate.token", "replica-token-of-the-group\n", 0600);
    const char *args[] = { "--port", port, "--peers", peers, "--peer-secret-file", peer_secret(),
                           "--replica-token-file", token, NULL };
    tally_proc_t a;
    tally_start(&a, NULL, args);
    wait_role(&a, "primary");   /* at once: the peers are a view */
    int acked = 0;
    still_primary(&a, &acked);
    char text[1200];

    static const struct {
        enum fake_mode mode;
        const char *said;        /* in A's peers_state afterwards */
    } forged[] = {
        { F_UNSIGNED, "not signed" },
        { F_WRONG_SECRET, "signature does not match" },
        { F_REPLAYED, "signature does not match" },
        { F_REDIRECT, "answered 302" },
        { F_PROBING_MAX, "epoch out of range" },
        { F_EPOCH_2_53, "epoch out of range" },
    };
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        /* both members - a majority - answer so */
        fake_set(&fakes[0], forged[i].mode);
        fake_set(&fakes[1], forged[i].mode);
        rounds_pass(&a);
        repl_str(&a, false, "peers_state", text, sizeof(text));
        if (!strstr(text, forged[i].said))
            fail_msg("forged answer %zu: peers_state \"%s\" does not say \"%s\"", i, text, forged[i].said);
        still_primary(&a, &acked);
        attacker_untouched();
    }
    /* signed and well-formed - one member, then both, naming a newer
     * primary (ATTACKER, or a member): the view reports it, and A stays the
     * primary of epoch 0, follows no one, sends nothing anywhere */
    static const enum fake_mode signed_modes[][2] = {
        { F_PRIMARY_5, F_HONEST },
        { F_REPLICA_OF_ATTACKER, F_HONEST },
        { F_REPLICA_OF_ATTACKER, F_REPLICA_OF_ATTACKER },
        { F_PRIMARY_5, F_REPLICA_OF_FAKE0 },
    };
    for (size_t i = 0; i < sizeof(signed_modes) / sizeof(signed_modes[0]); i++) {
        fake_set(&fakes[0], signed_modes[i][0]);
        fake_set(&fakes[1], signed_modes[i][1]);
        rounds_pass(&a);
        repl_str(&a, false, "peers_state", text, sizeof(text));
        if (!strstr(text, "report an epoch newer than this node's 0 (up to 5)"))
            fail_msg("signed answers %zu: peers_state \"%s\" does not report epoch 5", i, text);
        still_primary(&a, &acked);
        char auth[300];
        assert_false(fake_asked(&fakes[0], "/replication/", auth, sizeof(auth)));
        assert_false(fake_asked(&fakes[1], "/replication/", auth, sizeof(auth)));
        attacker_untouched();
    }
    char want[32];
    snprintf(want, sizeof(want), "{\"value\":%d,\"ttl_ms\":-1}", acked);
    http_expect(&a, "GET", "/counter/forged", NULL, 200, want);
    attacker_untouched();
    tally_cleanup(&a);
    fakes_stop(NULL);
}

/* ------------------------------------------------------------------------ */
/* Credentials: --replica-token-file and --peer-secret-file                 */
/* ------------------------------------------------------------------------ */

/* tallyd refuses to start with these arguments, saying `says`. */
static void expect_refused_start(const char *const *args, const char *says)
{
    tally_proc_t bad;
    assert_int_not_equal(tally_start_expect_exit(&bad, NULL, args), 0);
    char *log = tally_log(&bad);
    if (!strstr(log, says))
        fail_msg("tallyd refused to start, but its log does not say \"%s\":\n%s", says, log);
    free(log);
    tally_cleanup(&bad);
}

/* A request with a bearer token. */
static http_resp_t http_as(const tally_proc_t *p, const char *token, const char *method, const char *path,
                           const char *body)
{
    char auth[200];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
    const char *h[] = { auth, NULL };
    return http_h(p, method, path, body, NULL, h);
}

/* Waits (10 s at most) until GET path on p answers exactly `want`. */
static void wait_body(const tally_proc_t *p, const char *path, const char *want)
{
    char got[256] = "";
    for (int i = 0; i < 500; i++) {
        http_resp_t a = http(p, "GET", path, NULL, NULL);
        snprintf(got, sizeof(got), "%.*s", (int)a.len, a.body ? a.body : "");
        http_free(&a);
        if (!strcmp(got, want))
            return;
        sleep_ms(20);
    }
    fail_msg("GET %s on port %d answers %s, not %s, after 10 s", path, p->port, got, want);
}

/* Waits (10 s at most) until the replica's last exchange failed saying `says`. */
static void wait_link_error(const tally_proc_t *r, const char *says)
{
    char text[1200] = "";
    for (int i = 0; i < 500 && !strstr(repl_str(r, true, "last_error", text, sizeof(text)), says); i++)
        sleep_ms(20);
    if (!strstr(text, says))
        fail_msg("the replica's last error is \"%s\", not \"%s\"", text, says);
}

/* A token file entry whose hash is computed as `tallyd --hash-token` does. */
static void token_entry(char *out, size_t n, const char *name, const char *token, const char *scope)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "printf %%s '%s' | %s --hash-token", token, getenv("TALLYD"));
    FILE *f = popen(cmd, "r");
    char hex[80] = "";
    assert_non_null(f);
    assert_non_null(fgets(hex, sizeof(hex), f));
    pclose(f);
    hex[strcspn(hex, "\n")] = '\0';
    snprintf(out, n, "{\"name\":\"%s\",\"sha256\":\"%s\",\"scopes\":[%s]}", name, hex, scope);
}

/* The flags are refused when unsafe; the token goes to the primary from
 * its file, which SIGHUP and POST /admin/reload re-read (a refused file
 * keeps the token before); an admin token is not a replica's token. */
static void test_replica_credentials(void **state)
{
    (void)state;
    const char *loose = cred_file("loose.secret", GROUP_SECRET "\n", 0644);
    const char *shorter = cred_file("short.secret", "0123456789\n", 0600);
    const char *empty = cred_file("empty.token", "\n", 0600);
    const char *two = cred_file("two.token", "first\nsecond\n", 0600);
    const char *a1[] = { "--peers", "http://127.0.0.1:1", NULL };
    expect_refused_start(a1, "--peers needs --peer-secret-file FILE");
    const char *a2[] = { "--peers", "http://127.0.0.1:1", "--peer-secret-file", loose, NULL };
    expect_refused_start(a2, "mode 0644 lets other users read it: chmod 600");
    const char *a3[] = { "--peers", "http://127.0.0.1:1", "--peer-secret-file", shorter, NULL };
    expect_refused_start(a3, "10 bytes; the group's secret needs at least 32");
    const char *a4[] = { "--replica-token", "abc", "--replica-token-file", two, NULL };
    expect_refused_start(a4, "--replica-token and --replica-token-file both give the token");
    const char *a5[] = { "--replica-token-file", empty, NULL };
    expect_refused_start(a5, "is empty");
    const char *a6[] = { "--replica-token-file", two, NULL };
    expect_refused_start(a6, "a second line");
    /* readable by its group (a Kubernetes Secret with an fsGroup): taken, with a warning */
    const char *grp = cred_file("group.secret", GROUP_SECRET "\n", 0640);
    const char *a7[] = { "--peer-secret-file", grp, NULL };
    tally_proc_t g;
    tally_start(&g, NULL, a7);
    char *log = tally_log(&g);
    assert_non_null(strstr(log, "readable by its group (mode 0640)"));
    free(log);
    tally_cleanup(&g);

    /* a primary with tokens: two replica tokens, an admin, a writer */
    char t[4][300], text[1400];
    token_entry(t[0], sizeof(t[0]), "rep1", "rep-one-token", "\"replicate\"");
    token_entry(t[1], sizeof(t[1]), "rep2", "rep-two-token", "\"replicate\"");
    token_entry(t[2], sizeof(t[2]), "adm", "adm-token", "\"admin\"");
    token_entry(t[3], sizeof(t[3]), "app", "app-token", "\"read\",\"write\"");
    snprintf(text, sizeof(text), "{\"tokens\":[%s,%s,%s,%s]}", t[0], t[1], t[2], t[3]);
    const char *tokens = cred_file("tokens.json", text, 0600);
    const char *pargs[] = { "--tokens", tokens, "--auth-fail-limit", "0", NULL };
    tally_proc_t p, r;
    tally_start(&p, NULL, pargs);
    http_resp_t a = http_as(&p, "app-token", "POST", "/counter/c", "{\"by\":1}");
    assert_status(&a, 200);
    http_free(&a);
    const char *tfile = cred_file("replica.token", "rep-one-token\n", 0600);
    char purl[64];
    url_of(&p, purl, sizeof(purl));
    const char *rargs[] = { "--replica-of", purl, "--replica-token-file", tfile, NULL };
    tally_start(&r, NULL, rargs);
    wait_body(&r, "/counter/c", "{\"value\":1,\"ttl_ms\":-1}");

    /* the primary drops rep1: the replica is refused (401) and applies nothing */
    snprintf(text, sizeof(text), "{\"tokens\":[%s,%s,%s]}", t[1], t[2], t[3]);
    cred_file("tokens.json", text, 0600);
    a = http_as(&p, "adm-token", "POST", "/admin/reload", NULL);
    assert_status(&a, 200);
    http_free(&a);
    wait_link_error(&r, "answered 401");   /* from here on every poll is refused */
    a = http_as(&p, "app-token", "POST", "/counter/c", "{\"by\":1}");
    assert_status(&a, 200);
    http_free(&a);
    http_expect(&r, "GET", "/counter/c", NULL, 200, "{\"value\":1,\"ttl_ms\":-1}");
    /* its file gets rep2, and SIGHUP re-reads it: the replica catches up */
    cred_file("replica.token", "rep-two-token\n", 0600);
    kill(r.pid, SIGHUP);
    wait_body(&r, "/counter/c", "{\"value\":2,\"ttl_ms\":-1}");
    /* a file other users can read is refused: the token before stays */
    cred_file("replica.token", "rep-one-token\n", 0644);
    a = http(&r, "POST", "/admin/reload", NULL, NULL);
    assert_status(&a, 400);
    assert_non_null(strstr(a.body, "lets other users read it"));
    http_free(&a);
    a = http_as(&p, "app-token", "POST", "/counter/c", "{\"by\":1}");
    assert_status(&a, 200);
    http_free(&a);
    wait_body(&r, "/counter/c", "{\"value\":3,\"ttl_ms\":-1}");
    /* an admin token is not a replica's: 403, nothing applied */
    cred_file("replica.token", "adm-token\n", 0600);
    http_expect(&r, "POST", "/admin/reload", NULL, 200, NULL);
    wait_link_error(&r, "answered 403");
    a = http_as(&p, "app-token", "POST", "/counter/c", "{\"by\":1}");
    assert_status(&a, 200);
    http_free(&a);
    assert_non_null(strstr(repl_str(&r, true, "last_error", text, sizeof(text)), "lacks scope replicate"));
    http_expect(&r, "GET", "/counter/c", NULL, 200, "{\"value\":3,\"ttl_ms\":-1}");
    tally_cleanup(&r);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Epochs are bounded wherever they are read                                */
/* ------------------------------------------------------------------------ */

/* Starts tallyd on dir expecting a refusal whose log says `says`. */
static void expect_refused_dir(const char *dir, const char *const *args, const char *says)
{
    tally_proc_t bad;
    assert_int_not_equal(tally_start_expect_exit(&bad, dir, args), 0);
    char *log = tally_log(&bad);
    if (!strstr(log, says))
        fail_msg("tallyd refused to start on %s, but its log does not say \"%s\":\n%s", dir, says, log);
    free(log);
    tally_cleanup(&bad);
}

/* The EPOCH file and the journal's epoch record hold an epoch of at most
 * 2^53 - 1, or the data directory is refused, naming the file and the
 * value; a promotion never passes that epoch. */
static void test_epoch_bounds(void **state)
{
    (void)state;
    char dir[256], path[400];
    tmpdir_make(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/EPOCH", dir);
    file_write(path, "9223372036854775807\n", 20);
    expect_refused_dir(dir, NULL, "EPOCH holds \"9223372036854775807\", not an epoch (a decimal number from 0 to "
                                  "9007199254740991)");
    file_write(path, "seven\n", 6);
    expect_refused_dir(dir, NULL, "EPOCH holds \"seven\", not an epoch");
    /* the largest epoch is one, but nothing comes after it */
    file_write(path, "9007199254740991\n", 17);
    const char *args[] = { "--replica-of", "http://127.0.0.1:1", NULL };
    tally_proc_t r;
    tally_start(&r, dir, args);
    r.own_dir = true;
    http_resp_t a = http(&r, "GET", "/replication/epoch", NULL, NULL);
    assert_int_equal(json_int_of(&a, "epoch"), 9007199254740991LL);
    http_free(&a);
    a = http(&r, "POST", "/admin/promote", NULL, NULL);
    assert_error(&a, 500, "INTERNAL");
    assert_non_null(strstr(a.body, "the next epoch would pass the largest, 9007199254740991"));
    http_free(&a);
    tally_stop(&r);
    size_t len;
    char *text = file_read(path, &len);
    assert_string_equal(text, "9007199254740991\n");
    free(text);
    tally_cleanup(&r);

    /* a journal whose epoch record is above it (tests/fuzz/corpus/
     * fuzz_journal/j3_epoch_over_max: journal 1, the record at offset 24) */
    tmpdir_make(dir, sizeof(dir));
    char *j = file_read("tests/fuzz/corpus/fuzz_journal/j3_epoch_over_max", &len);
    snprintf(path, sizeof(path), "%s/journal.0000000001.tlj", dir);
    file_write(path, j, len);
    free(j);
    expect_refused_dir(dir, NULL, "epoch record \"9007199254740992\" is not an epoch (0 to 9007199254740991)");
    assert_int_equal(tally_check(path, NULL, 0), 1);
    tmpdir_remove(dir);
}

/* ------------------------------------------------------------------------ */
/* kill -9 of the primary, then promotion: what acknowledged changes survive */
/* ------------------------------------------------------------------------ */

#define SKEYS 16
#define SWRITERS 3
#define KILL_ROUNDS 10           /* kill -9 at a random instant, each way */

struct model {
    const tally_proc_t *p;
    _Atomic int *stop;
    int id;
    long acked[SKEYS], sent[SKEYS];
    long refused;
};

/* Each writer owns its keys: value = sum of its acknowledged increments,
 * at most the sum of every increment it sent. */
static void *model_main(void *arg)
{
    struct model *m = arg;
    unsigned seed = 99u + (unsigned)m->id;
    while (!atomic_load(m->stop)) {
        int k = rand_r(&seed) % SKEYS;
        http_resp_t r = httpf(m->p, "POST", "{\"by\":1}", "/counter/w%d-%d", m->id, k);
        if (r.status <= 0) {   /* the primary is gone */
            m->sent[k]++;
            http_free(&r);
            break;
        }
        m->sent[k]++;
        if (r.status == 200)
            m->acked[k]++;
        else
            m->refused++;
        http_free(&r);
    }
    return NULL;
}

/* Runs writers against p, kills it at a random instant, promotes r.
 * Returns the acknowledged changes missing on r; fails if r holds more
 * than was sent. */
static long kill_and_promote(tally_proc_t *p, tally_proc_t *r, int run_ms, long *acked_total)
{
    _Atomic int stop = 0;
    struct model m[SWRITERS];
    pthread_t t[SWRITERS];
    for (int i = 0; i < SWRITERS; i++) {
        memset(&m[i], 0, sizeof(m[i]));
        m[i] = (struct model){ .p = p, .stop = &stop, .id = i };
        pthread_create(&t[i], NULL, model_main, &m[i]);
    }
    sleep_ms(run_ms);
    tally_kill(p);
    atomic_store(&stop, 1);
    for (int i = 0; i < SWRITERS; i++)
        pthread_join(t[i], NULL);
    http_resp_t a = http(r, "POST", "/admin/promote", NULL, NULL);
    assert_status(&a, 200);
    http_free(&a);
    long lost = 0;
    *acked_total = 0;
    for (int i = 0; i < SWRITERS; i++)
        for (int k = 0; k < SKEYS; k++) {
            http_resp_t v = httpf(r, "GET", NULL, "/counter/w%d-%d", i, k);
            long have = v.status == 200 ? (long)json_int_of(&v, "value") : 0;
            http_free(&v);
            if (have > m[i].sent[k])
                fail_msg("w%d-%d holds %ld, more than the %ld sent", i, k, have, m[i].sent[k]);
            if (have < m[i].acked[k])
                lost += m[i].acked[k] - have;
            *acked_total += m[i].acked[k];
        }
    return lost;
}

static void test_semisync_kill9(void **state)
{
    (void)state;
    /* no replica connected: a change is refused, not applied */
    tally_proc_t p, r;
    const char *args[] = { "--min-replicas-ack", "1", "--min-replicas-timeout", "3000", NULL };
    tally_start(&p, NULL, args);
    http_resp_t a = http(&p, "POST", "/counter/early", "{\"by\":1}", NULL);
    assert_error(&a, 503, "UNAVAILABLE");
    assert_non_null(strstr(a.body, "replicas"));
    http_free(&a);
    http_expect(&p, "GET", "/counter/early", NULL, 200, "{\"value\":0,\"ttl_ms\":-2}");

    srand((unsigned)time(NULL));
    for (int round = 0; round < KILL_ROUNDS; round++) {
        if (round > 0)
            tally_start(&p, NULL, args);
        start_replica(&r, &p, NULL);
        for (int i = 0; i < 200 && repl_int(&p, "replicas_connected") < 1; i++)
            sleep_ms(10);
        long acked;
        long lost = kill_and_promote(&p, &r, 100 + rand() % 500, &acked);
        printf("semi-sync round %d: %ld acknowledged changes, %ld lost\n", round, acked, lost);
        assert_true(acked > 0);
        assert_int_equal(lost, 0);
        tally_cleanup(&r);
        tally_cleanup(&p);
    }
}

/* The same without --min-replicas-ack: what is lost is measured, not
 * asserted (asynchronous replication may lose the last changes). */
static void test_async_kill9_measured(void **state)
{
    (void)state;
    tally_proc_t p, r;
    long lost_total = 0, acked_total = 0;
    for (int round = 0; round < KILL_ROUNDS; round++) {
        tally_start(&p, NULL, NULL);
        start_replica(&r, &p, NULL);
        for (int i = 0; i < 200 && repl_int(&p, "replicas_connected") < 1; i++)
            sleep_ms(10);
        long acked;
        long lost = kill_and_promote(&p, &r, 100 + rand() % 500, &acked);
        printf("asynchronous round %d: %ld acknowledged changes, %ld lost\n", round, acked, lost);
        lost_total += lost;
        acked_total += acked;
        tally_cleanup(&r);
        tally_cleanup(&p);
    }
    printf("asynchronous: %ld of %ld acknowledged changes lost over %d kill -9 rounds\n", lost_total, acked_total,
           KILL_ROUNDS);
}

/* ------------------------------------------------------------------------ */
/* --min-replicas-ack: a change the replicas did not confirm is not applied */
/* ------------------------------------------------------------------------ */

/* The changes sent while the replica is stopped: every family's kind of
 * change, a key the change creates, a key with a TTL, multi-key requests. */
static const char *const stalled[][3] = {
    { "POST", "/counter/c1", "{\"by\":5}" },
    { "POST", "/counter/t1", "{\"by\":1,\"ttl\":3600}" },
    { "POST", "/counter/fresh", "{\"by\":1}" },
    { "POST", "/throttle", "{\"key\":\"g1\",\"max_burst\":5,\"count_per_period\":10,\"period\":60}" },
    { "POST", "/throttle", "{\"key\":\"k1\",\"algorithm\":\"token_bucket\",\"capacity\":5,\"refill_rate\":0.5}" },
    { "POST", "/bloom/b1", "{\"items\":[\"y\",\"z\"]}" },
    { "POST", "/uv/u1", "{\"items\":[\"q\",\"r\"]}" },
    { "POST", "/uv/merged/merge", "{\"sources\":[\"u1\",\"u2\"]}" },
    { "POST", "/bits/w/op", "{\"op\":\"or\",\"sources\":[\"s1\",\"s2\"]}" },
    { "DELETE", "/keys/gone", NULL },
};
#define NSTALLED (sizeof(stalled) / sizeof(stalled[0]))
static const char *const watched[] = { "c1", "t1", "fresh", "g1", "k1", "b1", "u1", "u2", "merged", "w", "s1", "s2",
                                       "gone" };
#define NWATCHED (sizeof(watched) / sizeof(watched[0]))

struct one_req {
    const tally_proc_t *p;
    int i;
    long status;
    char body[512];
};

static void *one_req_main(void *arg)
{
    struct one_req *o = arg;
    http_resp_t a = http(o->p, stalled[o->i][0], stalled[o->i][1], stalled[o->i][2], NULL);
    o->status = a.status;
    snprintf(o->body, sizeof(o->body), "%.*s", (int)a.len, a.body ? a.body : "");
    http_free(&a);
    return NULL;
}

/* Each watched key's dump (no TTL) or digest (TTL), "absent" when missing. */
static void watched_state(const tally_proc_t *p, char out[][128])
{
    for (size_t i = 0; i < NWATCHED; i++) {
        http_resp_t d = httpf(p, "GET", NULL, "/keys/%s/dump", watched[i]);
        char dg[64] = "";
        if (d.status == 404) {
            snprintf(out[i], 128, "absent");
        } else {
            assert_int_equal(d.status, 200);
            assert_true(http_header(&d, "Tally-Digest", dg, sizeof(dg)));
            snprintf(out[i], 128, "digest %s", dg);   /* value and absolute expiry */
        }
        http_free(&d);
    }
}

static void assert_watched(const tally_proc_t *p, char before[][128], const char *when)
{
    char now[NWATCHED][128];
    watched_state(p, now);
    for (size_t i = 0; i < NWATCHED; i++)
        if (strcmp(before[i], now[i]) != 0)
            fail_msg("%s: key %s was %s, is %s", when, watched[i], before[i], now[i]);
}

static void wait_connected(const tally_proc_t *p, int n)
{
    for (int i = 0; i < 500 && repl_int(p, "replicas_connected") < n; i++)
        sleep_ms(10);
    assert_int_equal(repl_int(p, "replicas_connected"), n);
}

static void test_semisync_timeout_not_applied(void **state)
{
    (void)state;
    tally_proc_t p, r;
    const char *args[] = { "--min-replicas-ack", "1", "--min-replicas-timeout", "400", NULL };
    tally_start(&p, NULL, args);
    start_replica(&r, &p, NULL);
    wait_connected(&p, 1);
    http_expect(&p, "POST", "/counter/c1", "{\"by\":2}", 200, NULL);
    http_expect(&p, "POST", "/counter/t1", "{\"by\":1,\"ttl\":3600}", 200, NULL);
    http_expect(&p, "POST", "/throttle", "{\"key\":\"g1\",\"max_burst\":5,\"count_per_period\":10,\"period\":60}",
                200, NULL);
    http_expect(&p, "POST", "/bloom/b1", "{\"items\":[\"x\"]}", 200, NULL);
    http_expect(&p, "POST", "/uv/u1", "{\"items\":[\"a\"]}", 200, NULL);
    http_expect(&p, "POST", "/uv/u2", "{\"items\":[\"b\"]}", 200, NULL);
    http_expect(&p, "POST", "/uv/merged", "{\"items\":[\"m\"]}", 200, NULL);
    http_expect(&p, "POST", "/bits/s1/setbit", "{\"offset\":3,\"value\":1}", 200, NULL);
    http_expect(&p, "POST", "/bits/s2/setbit", "{\"offset\":9,\"value\":1}", 200, NULL);
    http_expect(&p, "POST", "/counter/gone", "{\"by\":7}", 200, NULL);
    wait_caught_up(&p, &r);
    char before[NWATCHED][128];
    watched_state(&p, before);
    long long records = repl_int(&p, "records");

    /* the replica stops acknowledging: every change times out, not applied */
    tally_pause(&r);
    struct one_req o[NSTALLED];
    pthread_t t[NSTALLED];
    for (size_t i = 0; i < NSTALLED; i++) {
        o[i] = (struct one_req){ .p = &p, .i = (int)i };
        pthread_create(&t[i], NULL, one_req_main, &o[i]);
    }
    for (size_t i = 0; i < NSTALLED; i++)
        pthread_join(t[i], NULL);   /* all of them before a failure leaves this frame */
    for (size_t i = 0; i < NSTALLED; i++)
        if (o[i].status != 503 || !strstr(o[i].body, "not applied"))
            fail_msg("%s %s answered %ld: %s", stalled[i][0], stalled[i][1], o[i].status, o[i].body);
    assert_true(repl_int(&p, "records") > records);   /* journaled and streamed, then taken back */
    assert_true(repl_int(&p, "keys_taken_back") >= (long long)NSTALLED);
    http_resp_t m = http(&p, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(m.body, "tally_replication_keys_taken_back_total "));
    http_free(&m);
    assert_watched(&p, before, "after the 503s");

    /* the replica resumes: it applied the changes and their taking back */
    tally_resume(&r);
    wait_connected(&p, 1);
    http_expect(&p, "POST", "/counter/c1", "{\"by\":1}", 200, "{\"value\":3,\"ttl_ms\":-1}");
    wait_caught_up(&p, &r);
    assert_same_state(&p, &r);
    const tally_proc_t *one[] = { &r };
    assert_same_dumps(&p, one, 1);

    /* a kill -9 of the primary: replay takes them back too */
    http_expect(&p, "POST", "/counter/c1", "{\"by\":-1}", 200, "{\"value\":2,\"ttl_ms\":-1}");
    tally_pause(&r);
    http_resp_t a = http(&p, "POST", "/counter/c1", "{\"by\":100}", NULL);
    assert_error(&a, 503, "UNAVAILABLE");
    http_free(&a);
    tally_kill(&p);
    tally_resume(&r);
    tally_start(&p, p.dir, NULL);
    p.own_dir = true;
    assert_watched(&p, before, "after kill -9 and replay");
    tally_cleanup(&r);
    tally_cleanup(&p);
}

/* A writer's state (see "Background threads"). */
struct exact {
    tally_proc_t p;
    long ok;
    long bad;   /* a status neither 200 nor 503, for the test's thread to fail on */
};

static struct exact exact_bg[3];

static void *exact_main(void *arg)
{
    struct exact *e = arg;
    while (!atomic_load(&bg_stop)) {
        http_resp_t a = http(&e->p, "POST", "/counter/x", "{\"by\":1}", NULL);
        if (a.status == 200)
            e->ok++;
        else if (a.status != 503)
            e->bad = a.status ? a.status : -1;
        http_free(&a);
        if (e->bad) {
            atomic_store(&bg_stop, 1);
            break;
        }
    }
    return NULL;
}

/* Writers on one key while the replica stalls mid-load and resumes: the
 * value is exactly the number of 200 answers, on the primary and on the
 * replica. */
static void test_semisync_exact_model(void **state)
{
    (void)state;
    tally_proc_t p, r;
    const char *args[] = { "--min-replicas-ack", "1", "--min-replicas-timeout", "300", NULL };
    tally_start(&p, NULL, args);
    start_replica(&r, &p, NULL);
    wait_connected(&p, 1);
    struct exact *e = exact_bg;
    for (int i = 0; i < 3; i++) {
        e[i] = (struct exact){ p, 0, 0 };
        bg_start(exact_main, &e[i]);
    }
    for (int round = 0; round < 3; round++) {
        sleep_ms(300);
        tally_pause(&r);
        sleep_ms(700);
        tally_resume(&r);
    }
    sleep_ms(500);
    bg_join();
    long ok = 0;
    for (int i = 0; i < 3; i++)
        ok += e[i].ok;
    for (int i = 0; i < 3; i++)
        if (e[i].bad)
            fail_msg("POST /counter/x answered %ld", e[i].bad);
    char want[64];
    snprintf(want, sizeof(want), "{\"value\":%ld,\"ttl_ms\":-1}", ok);
    http_expect(&p, "GET", "/counter/x", NULL, 200, want);
    wait_caught_up(&p, &r);
    http_expect(&r, "GET", "/counter/x", NULL, 200, want);
    printf("semi-sync exact model: %ld changes acknowledged, %lld taken back\n", ok,
           repl_int(&p, "keys_taken_back"));
    assert_true(ok > 0);
    assert_true(repl_int(&p, "keys_taken_back") > 0);
    tally_cleanup(&r);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* HAProxy routing changes to the primary, through a failover               */
/* ------------------------------------------------------------------------ */

/* Replaces every occurrence of `from` in *text by `to` (at least one). */
static void substitute(char **text, const char *from, const char *to)
{
    char *p = strstr(*text, from);
    if (!p)
        fail_msg("deploy/ha/haproxy.cfg no longer has %s for this test to substitute", from);
    while (p) {
        size_t head = (size_t)(p - *text), fl = strlen(from), tl = strlen(to), len = strlen(*text);
        char *n = malloc(len - fl + tl + 1);
        memcpy(n, *text, head);
        memcpy(n + head, to, tl);
        memcpy(n + head + tl, p + fl, len - head - fl + 1);
        free(*text);
        *text = n;
        p = strstr(n + head + tl, from);
    }
}

/* Posts through the proxy until a change is acknowledged (5 s at most). */
static void wait_writable(const tally_proc_t *proxy)
{
    for (int i = 0; i < 250; i++) {
        http_resp_t a = http(proxy, "POST", "/counter/via-proxy", "{\"by\":1}", NULL);
        long st = a.status;
        http_free(&a);
        if (st == 200)
            return;
        sleep_ms(20);
    }
    fail_msg("no change went through HAProxy for 5 s");
}

static pid_t haproxy_pid;

/* Teardown: haproxy does not outlive its test, passed or failed. */
static int haproxy_stop(void **state)
{
    (void)state;
    if (haproxy_pid > 0) {
        kill(haproxy_pid, SIGTERM);
        waitpid(haproxy_pid, NULL, 0);
        haproxy_pid = 0;
    }
    return 0;
}

static void test_haproxy_failover(void **state)
{
    (void)state;
    if (access("/usr/sbin/haproxy", X_OK) != 0) {
        printf("haproxy is not installed (tools/deps.sh test installs it): skipped\n");
        return;
    }
    /* both nodes run with --peers naming the other (a view in /info) */
    tally_proc_t p, r;
    char pport[16], rport[16], purl[64], rurl[64];
    snprintf(pport, sizeof(pport), "%d", tally_free_port());
    snprintf(rport, sizeof(rport), "%d", tally_free_port());
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%s", pport);
    snprintf(rurl, sizeof(rurl), "http://127.0.0.1:%s", rport);
    const char *pargs[] = { "--port", pport, "--peers", rurl, "--peer-secret-file", peer_secret(), NULL };
    const char *rargs[] = { "--port", rport, "--peers", purl, "--peer-secret-file", peer_secret(), "--replica-of", purl,
                            NULL };
    tally_start(&p, NULL, pargs);
    tally_start(&r, NULL, rargs);
    tally_proc_t wr = { .port = tally_free_port() }, rd = { .port = tally_free_port() };
    size_t len;
    char *cfg = file_read("deploy/ha/haproxy.cfg", &len);   /* tests run from the repository root */
    char a[64];
    snprintf(a, sizeof(a), "127.0.0.1:%d", wr.port);
    substitute(&cfg, "127.0.0.1:8000", a);
    snprintf(a, sizeof(a), "127.0.0.1:%d", rd.port);
    substitute(&cfg, "127.0.0.1:8001", a);
    snprintf(a, sizeof(a), "127.0.0.1:%d", p.port);
    substitute(&cfg, "127.0.0.1:8080", a);
    snprintf(a, sizeof(a), "127.0.0.1:%d", r.port);
    substitute(&cfg, "127.0.0.1:8081", a);
    substitute(&cfg, "local0 warning", "local0 info");   /* every request in haproxy.log */
    char dir[256], path[300];
    tmpdir_make(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/haproxy.cfg", dir);
    file_write(path, cfg, strlen(cfg));
    free(cfg);
    char logp[300];
    snprintf(logp, sizeof(logp), "%s/haproxy.log", dir);
    pid_t hp = haproxy_pid = fork();
    if (hp == 0) {
        int log = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(log, 1);
        dup2(log, 2);
        execl("/usr/sbin/haproxy", "haproxy", "-db", "-f", path, (char *)NULL);
        _exit(127);
    }
    wait_writable(&wr);
    http_expect(&p, "GET", "/counter/via-proxy", NULL, 200, "{\"value\":1,\"ttl_ms\":-1}");
    wait_caught_up(&p, &r);
    http_expect(&rd, "GET", "/counter/via-proxy", NULL, 200, "{\"value\":1,\"ttl_ms\":-1}");

    /* the primary's machine dies; the tested promote script fails over */
    char pdir[256], cmd[400];
    snprintf(pdir, sizeof(pdir), "%s", p.dir);
    tally_kill(&p);
    snprintf(cmd, sizeof(cmd), "sh deploy/ha/promote.sh %s %s >/dev/null 2>&1", rurl, purl);
    int st = system(cmd);
    assert_int_equal(WEXITSTATUS(st), 2);   /* promoted; the old primary did not answer */
    wait_writable(&wr);
    http_expect(&r, "GET", "/counter/via-proxy", NULL, 200, "{\"value\":2,\"ttl_ms\":-1}");

    /* the old primary returns on its address and disk as a replica of the
     * new one (what an orchestrator does without --coordinator: no answer
     * of a peer changes a node's role; it_etcd has the unattended form);
     * HAProxy never sends it a change */
    const char *pargs2[] = { "--port", pport, "--peers", rurl, "--peer-secret-file", peer_secret(), "--replica-of", rurl,
                             NULL };
    tally_start(&p, pdir, pargs2);
    p.own_dir = true;
    wait_role(&p, "replica");
    wait_caught_up(&r, &p);
    wait_writable(&wr);
    /* until HAProxy's checks (2 x 500 ms) mark the restarted node down, a
     * change may still reach it: refused there (421/503), never applied -
     * the counter holds exactly the acknowledged ones */
    int acked = 0, refused = 0;
    for (int i = 0; i < 400 && acked < 19; i++) {
        http_resp_t w = http(&wr, "POST", "/counter/via-proxy", "{\"by\":1}", NULL);
        if (w.status == 200)
            acked++;
        else if (w.status == 421 || w.status == 503)
            refused++;
        else
            fail_msg("a change through HAProxy answered %ld", w.status);
        http_free(&w);
    }
    assert_int_equal(acked, 19);
    printf("HAProxy: 19 changes acknowledged by the new primary, %d refused by the restarted old one\n", refused);
    http_expect(&r, "GET", "/counter/via-proxy", NULL, 200, "{\"value\":22,\"ttl_ms\":-1}");
    wait_caught_up(&r, &p);
    http_expect(&p, "GET", "/counter/via-proxy", NULL, 200, "{\"value\":22,\"ttl_ms\":-1}");
    haproxy_stop(NULL);
    tmpdir_remove(dir);
    tally_cleanup(&r);
    tally_cleanup(&p);
}

/* Reads on a replica while it resynchronises from a snapshot: the load
 * replaces the whole keyspace, so each read answers what the key held (the
 * same before and after) or 503 while the load runs - never a key missing
 * halfway (a counter then reads 0).  A change sent to the replica is
 * refused with 421 naming the primary, during the load too (as Redis
 * answers READONLY before LOADING), never 503.  Eight full
 * resynchronisations (POST /admin/replicate) under a reader that never
 * stops and sends every fourth request as a change; large Bloom filters
 * make each load take milliseconds. */
#define WATCHED 1500

/* The reader's state (see "Background threads"). */
struct reader {
    tally_proc_t r;
    unsigned seed;
    long ok, loading, refused, wrong;
    char first_wrong[256];
};

static struct reader reader_bg;

static void *reader_main(void *arg)
{
    struct reader *rd = arg;
    for (long n = 0; !atomic_load(&bg_stop); n++) {
        int i = (int)(rand_r(&rd->seed) % WATCHED);
        if (n % 4 == 3) {
            http_resp_t a = httpf(&rd->r, "POST", "{\"by\":1000}", "/counter/w%d", i);
            if (a.status == 421 && a.body && strstr(a.body, "\"READONLY\""))
                rd->refused++;
            else if (!rd->wrong++)
                snprintf(rd->first_wrong, sizeof(rd->first_wrong), "POST w%d: %ld %s (want 421 READONLY)", i,
                         a.status, a.body ? a.body : "");
            http_free(&a);
            continue;
        }
        http_resp_t a = httpf(&rd->r, "GET", NULL, "/counter/w%d", i);
        char want[64];
        snprintf(want, sizeof(want), "{\"value\":%d,\"ttl_ms\":-1}", i % 7 + 1);
        if (a.status == 200 && a.body && strcmp(a.body, want) == 0) {
            rd->ok++;
        } else if (a.status == 503 && a.body && strstr(a.body, "loading a snapshot from the primary")) {
            rd->loading++;
        } else {
            if (!rd->wrong++)
                snprintf(rd->first_wrong, sizeof(rd->first_wrong), "w%d: %ld %s (want %s)", i, a.status,
                         a.body ? a.body : "", want);
        }
        http_free(&a);
    }
    return NULL;
}

static void test_reads_during_resync(void **state)
{
    (void)state;
    tally_proc_t p, r;
    tally_start(&p, NULL, NULL);
    for (int i = 0; i < WATCHED; i++) {
        char body[32];
        snprintf(body, sizeof(body), "{\"by\":%d}", i % 7 + 1);
        http_resp_t a = httpf(&p, "POST", body, "/counter/w%d", i);
        assert_status(&a, 200);
        http_free(&a);
    }
    for (int i = 0; i < 6; i++) {
        http_resp_t a = httpf(&p, "PUT", "{\"error_rate\":0.0001,\"capacity\":1000000}", "/bloom/big%d", i);
        assert_status(&a, 201);
        http_free(&a);
    }
    start_replica(&r, &p, NULL);
    wait_caught_up(&p, &r);

    struct reader *rd = &reader_bg;
    memset(rd, 0, sizeof(*rd));
    rd->r = r;
    rd->seed = 99u;
    bg_start(reader_main, rd);
    char url[64], q[128];
    url_of(&p, url, sizeof(url));
    snprintf(q, sizeof(q), "/admin/replicate?primary=%s", url);
    for (int round = 0; round < 8; round++) {
        /* answered once the new link is in place; it counts its own syncs */
        http_expect(&r, "POST", q, NULL, 200, NULL);
        wait_caught_up(&p, &r);
        assert_int_equal(link_int(&r, "full_syncs"), 1);
    }
    bg_join();
    printf("during 8 full resynchronisations: %ld reads answered, %ld 503 while loading, %ld changes refused "
           "with 421, %ld wrong\n",
           rd->ok, rd->loading, rd->refused, rd->wrong);
    if (rd->wrong)
        fail_msg("%ld requests answered neither as expected; the first: %s", rd->wrong, rd->first_wrong);
    assert_true(rd->ok > 0 && rd->refused > 0);
    http_expect(&r, "GET", "/readyz", NULL, 200, NULL);
    tally_cleanup(&r);

    /* stopped (SIGTERM) 0 to 140 ms after a resynchronisation began, so at
     * some delay while it loads: a clean exit, no sanitizer report (the
     * load used to reach the server after it was freed) */
    for (int delay = 0; delay <= 140; delay += 20) {
        start_replica(&r, &p, NULL);
        wait_caught_up(&p, &r);
        http_expect(&r, "POST", q, NULL, 200, NULL);
        sleep_ms(delay);
        assert_int_equal(tally_stop(&r), 0);
        tally_cleanup(&r);
    }
    tally_cleanup(&p);
}

/* Live overrides (api/override.c) are state: a replica holds the same,
 * byte for byte, and answers the same list; it refuses to change them. */
static void test_overrides_replicated(void **state)
{
    (void)state;
    char cfg[400];
    snprintf(cfg, sizeof(cfg), "%s/override-policies.json", credsdir);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fputs("{\"policies\": {\"api\": {\"algorithm\": \"gcra\", \"max_burst\": 1, \"count_per_period\": 2,"
          " \"period\": 60, \"key\": \"{header:X-Api-Key}\"}}}", f);
    fclose(f);
    const char *args[] = { "--config", cfg, NULL };
    tally_proc_t p, r;
    tally_start(&p, NULL, args);
    start_replica(&r, &p, args);
    static const char *const tenants[] = { "acme", "beta", "gamma" };
    for (int i = 0; i < 3; i++) {
        http_resp_t a = httpf(&p, "PUT", "{\"max_burst\":5,\"count_per_period\":10,\"period\":60}",
                              "/policies/api/overrides/%s", tenants[i]);
        assert_status(&a, 201);
        http_free(&a);
    }
    http_expect(&p, "PUT", "/policies/api/overrides/beta", "{\"max_burst\":7,\"count_per_period\":10,\"period\":60}",
                200, NULL);
    http_expect(&p, "DELETE", "/policies/api/overrides/gamma", NULL, 200, "{\"deleted\":true}");
    wait_caught_up(&p, &r);
    assert_same_state(&p, &r);
    const tally_proc_t *one[] = { &r };
    assert_same_dumps(&p, one, 1);
    http_resp_t a = http(&p, "GET", "/policies/api/overrides", NULL, NULL);
    http_resp_t b = http(&r, "GET", "/policies/api/overrides", NULL, NULL);
    assert_status(&a, 200);
    assert_status(&b, 200);
    assert_string_equal(a.body, b.body);
    assert_int_equal(json_int_of(&b, "total"), 2);
    http_free(&a);
    http_free(&b);
    a = http(&r, "PUT", "/policies/api/overrides/delta", "{\"max_burst\":5,\"count_per_period\":10,\"period\":60}",
             NULL);
    assert_error(&a, 421, "READONLY");
    http_free(&a);
    tally_cleanup(&r);
    tally_cleanup(&p);
    unlink(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_haproxy_failover, haproxy_stop),
        cmocka_unit_test(test_replica_refuses_changes),
        cmocka_unit_test(test_overrides_replicated),
        cmocka_unit_test_teardown(test_converge_under_load, bg_teardown),
        cmocka_unit_test(test_reservations_replicate),
        cmocka_unit_test(test_resume_and_resync),
        cmocka_unit_test_teardown(test_reads_during_resync, bg_teardown),
        cmocka_unit_test(test_promote_and_fence),
        cmocka_unit_test_teardown(test_peers_view_only, bg_teardown),
        cmocka_unit_test_teardown(test_forged_peer_answers, fakes_stop),
        cmocka_unit_test(test_replica_credentials),
        cmocka_unit_test(test_epoch_bounds),
        cmocka_unit_test(test_semisync_timeout_not_applied),
        cmocka_unit_test_teardown(test_semisync_exact_model, bg_teardown),
        cmocka_unit_test(test_semisync_kill9),
        cmocka_unit_test(test_async_kill9_measured),
    };
    tmpdir_make(credsdir, sizeof(credsdir));
    if (getenv("TEST_FILTER"))   /* one test by name (cmocka's * and ? patterns) */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    tmpdir_remove(credsdir);
    return failed;
}
