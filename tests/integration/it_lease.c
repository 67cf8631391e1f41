/*
 * it_lease.c - concurrency leases (/lease, LEASE.*) through a real tallyd:
 * the HTTP forms and headers, the gateway form, the Redis protocol (a lease
 * taken over one protocol released over the other), bad input refused with
 * nothing changed, exactness under concurrent acquire/release from many
 * threads, and kill -9 with a restart: the state equals the model of the
 * acknowledged operations, and leases that expired while the server was
 * down are free.  Concurrency policies ("algorithm": "concurrency"): their
 * hook acquires and releases (X-Tally-Release), file and live overrides,
 * the refusal's "violated", metrics and access log, expiry, malformed
 * policies refused at start, and docs/gateways.md's nginx recipes for both
 * forms with the real nginx.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/rng.h"
#include "tests/integration/harness.h"
#include "tests/integration/redis_ref.h"
#include "tests/integration/resp_client.h"

static tally_proc_t T;

static int setup(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", NULL };
    tally_start(&T, NULL, args);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tally_cleanup(&T);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* POST /lease/{key}: the lease id granted into id[17] (empty when refused). */
static bool acquire(const tally_proc_t *p, const char *key, int limit, int ttl_ms, char id[17], long long *active)
{
    char body[96];
    snprintf(body, sizeof(body), "{\"limit\":%d,\"ttl_ms\":%d}", limit, ttl_ms);
    char path[300];
    snprintf(path, sizeof(path), "/lease/%s", key);
    http_resp_t r = http(p, "POST", path, body, NULL);
    if (r.status != 200)
        fail_msg("acquire %s: %ld %s", key, r.status, r.body);
    bool ok = json_bool_of(&r, "acquired");
    id[0] = '\0';
    if (ok) {
        json_t *l = json_object_get(r.json, "lease");
        assert_true(json_is_string(l) && strlen(json_string_value(l)) == 16);
        strcpy(id, json_string_value(l));
    }
    if (active)
        *active = json_int_of(&r, "active");
    http_free(&r);
    return ok;
}

static int release(const tally_proc_t *p, const char *key, const char *id)
{
    http_resp_t r = httpf(p, "DELETE", NULL, "/lease/%s/%s", key, id);
    if (r.status != 200) {
        long s = r.status;
        http_free(&r);
        return s < 0 ? -1 : -2;
    }
    int ok = json_bool_of(&r, "released");
    http_free(&r);
    return ok;
}

static long long active_of(const tally_proc_t *p, const char *key)
{
    http_resp_t r = httpf(p, "GET", NULL, "/lease/%s", key);
    assert_status(&r, 200);
    long long n = json_int_of(&r, "active");
    http_free(&r);
    return n;
}

static void test_http(void **state)
{
    (void)state;
    char a[17], b[17], c[17], v[128];
    long long act;
    assert_true(acquire(&T, "h1", 2, 60000, a, &act));
    assert_int_equal(act, 1);
    assert_true(acquire(&T, "h1", 2, 60000, b, &act));
    assert_string_not_equal(a, b);
    http_resp_t r = http(&T, "POST", "/lease/h1", "{\"limit\":2,\"ttl\":60}", NULL);
    assert_status(&r, 200);
    assert_false(json_bool_of(&r, "acquired"));
    assert_int_equal(json_int_of(&r, "remaining"), 0);
    assert_true(json_int_of(&r, "retry_after_ms") > 59000);
    assert_true(http_header(&r, "RateLimit-Policy", v, sizeof(v)));
    assert_string_equal(v, "\"concurrency\";q=2;qu=\"concurrent-requests\"");
    assert_true(http_header(&r, "RateLimit", v, sizeof(v)));
    assert_string_equal(v, "\"concurrency\";r=0");
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    assert_int_equal(atoi(v), 60);
    assert_false(http_header(&r, "X-Tally-Lease", v, sizeof(v)));
    http_free(&r);
    /* renew, release, release again */
    r = httpf(&T, "POST", "{\"ttl_ms\":120000}", "/lease/h1/%s/renew", a);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "renewed"));
    assert_int_equal(json_int_of(&r, "ttl_ms"), 120000);
    http_free(&r);
    assert_int_equal(release(&T, "h1", a), 1);
    assert_int_equal(release(&T, "h1", a), 0);
    r = httpf(&T, "POST", "{\"ttl_ms\":1000}", "/lease/h1/%s/renew", a);
    assert_status(&r, 200);
    assert_false(json_bool_of(&r, "renewed"));
    http_free(&r);
    assert_int_equal(active_of(&T, "h1"), 1);
    /* a lease expires by itself */
    assert_true(acquire(&T, "h2", 1, 200, c, NULL));
    assert_false(acquire(&T, "h2", 1, 200, b, NULL));
    sleep_ms(300);
    assert_int_equal(active_of(&T, "h2"), 0);
    assert_true(acquire(&T, "h2", 1, 200, b, NULL));
    assert_int_equal(release(&T, "h2", c), 0);
    /* the status of a key without leases */
    r = http(&T, "GET", "/lease/none", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "limit"), 0);
    assert_int_equal(json_int_of(&r, "active"), 0);
    http_free(&r);
    /* /keys sees the type and the key's expiry (its latest lease's) */
    r = http(&T, "GET", "/keys/h1", NULL, NULL);
    assert_status(&r, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "type")), "lease");
    assert_true(json_int_of(&r, "ttl_ms") > 0);
    http_free(&r);
}

/* The gateway form: 200 with the id in X-Tally-Lease, deny_status when full. */
static void test_gateway_form(void **state)
{
    (void)state;
    char v[128], id[17];
    http_resp_t r = http(&T, "GET", "/lease/gw/acquire?limit=1&ttl_ms=60000", NULL, NULL);
    assert_status(&r, 200);
    assert_true(http_header(&r, "X-Tally-Lease", id, sizeof(id)));
    assert_int_equal(strlen(id), 16);
    http_free(&r);
    r = http(&T, "GET", "/lease/gw/acquire?limit=1&ttl_ms=60000", NULL, NULL);
    assert_status(&r, 429);
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    http_free(&r);
    r = http(&T, "GET", "/lease/gw/acquire?limit=1&ttl_ms=60000&deny_status=403", NULL, NULL);
    assert_status(&r, 403);
    http_free(&r);
    assert_int_equal(release(&T, "gw", id), 1);
    r = http(&T, "GET", "/lease/gw/acquire?limit=1&ttl_ms=60000", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
}

/* Bad input: 400 naming the field, nothing changed. */
static void test_bad_input(void **state)
{
    (void)state;
    char a[17];
    assert_true(acquire(&T, "bad", 3, 60000, a, NULL));
    http_resp_t before = http(&T, "GET", "/lease/bad", NULL, NULL);
    static const char *const bodies[] = {
        "{\"limit\":0,\"ttl_ms\":1000}", "{\"limit\":100001,\"ttl_ms\":1000}", "{\"limit\":3,\"ttl_ms\":0}",
        "{\"limit\":3,\"ttl_ms\":86400001}", "{\"limit\":3}", "{\"ttl_ms\":1000}", "{\"limit\":3,\"ttl\":1,\"ttl_ms\":1}",
        "{\"limit\":\"3\",\"ttl_ms\":1000}", "{\"limit\":3,\"ttl_ms\":1000,\"x\":1}", "[1]", "{",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        http_resp_t r = http(&T, "POST", "/lease/bad", bodies[i], NULL);
        assert_error(&r, 400, "BAD_REQUEST");
        http_free(&r);
    }
    static const char *const paths[] = { "/lease/bad/0000000000000000", "/lease/bad/xyz", "/lease/bad/0123456789abcdeff" };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        http_resp_t r = http(&T, "DELETE", paths[i], NULL, NULL);
        assert_error(&r, 400, "BAD_REQUEST");
        http_free(&r);
    }
    http_resp_t r = httpf(&T, "POST", "{\"ttl_ms\":-1}", "/lease/bad/%s/renew", a);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/lease/bad/acquire?limit=3&ttl_ms=1000&deny_status=404", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&T, "GET", "/lease/bad/acquire?limit=3", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* another type's key */
    r = http(&T, "POST", "/counter/ctr", "{\"by\":1}", NULL);
    http_free(&r);
    r = http(&T, "POST", "/lease/ctr", "{\"limit\":3,\"ttl_ms\":1000}", NULL);
    assert_error(&r, 409, "WRONGTYPE");
    http_free(&r);
    http_resp_t after = http(&T, "GET", "/lease/bad", NULL, NULL);
    assert_int_equal(json_int_of(&after, "active"), json_int_of(&before, "active"));
    assert_int_equal(json_int_of(&after, "next_expiry_ms"), json_int_of(&before, "next_expiry_ms"));
    http_free(&before);
    http_free(&after);
    assert_int_equal(release(&T, "bad", a), 1);
}

static resp_t *rcmd(redis_ref_t *c, const char *a0, const char *a1, const char *a2, const char *a3)
{
    const char *argv[4] = { a0, a1, a2, a3 };
    int argc = a3 ? 4 : a2 ? 3 : 2;
    return redis_cmdv(c, argc, argv, NULL);
}

/* The Redis protocol's commands, and the same lease seen by both protocols. */
static void test_resp(void **state)
{
    (void)state;
    redis_ref_t c;
    memset(&c, 0, sizeof(c));
    c.port = T.resp_port;
    c.fd = connect_to(T.resp_port);
    resp_t *v = rcmd(&c, "LEASE.ACQUIRE", "r1", "2", "60000");
    assert_int_equal(v->kind, RESP_ARRAY);
    assert_int_equal(v->n, 4);
    assert_int_equal(v->elems[0]->integer, 1);
    assert_int_equal(v->elems[1]->kind, RESP_BULK);
    assert_int_equal(v->elems[1]->len, 16);
    char id[17];
    strcpy(id, v->elems[1]->str);
    assert_int_equal(v->elems[2]->integer, 1);
    assert_int_equal(v->elems[3]->integer, 60000);
    resp_free(v);
    char hid[17];
    assert_true(acquire(&T, "r1", 2, 60000, hid, NULL));
    v = rcmd(&c, "LEASE.ACQUIRE", "r1", "2", "60000");
    assert_int_equal(v->elems[0]->integer, 0);
    assert_int_equal(v->elems[1]->kind, RESP_NIL);
    assert_int_equal(v->elems[2]->integer, 0);
    assert_true(v->elems[3]->integer > 59000);
    resp_free(v);
    v = rcmd(&c, "LEASE.INFO", "r1", NULL, NULL);
    assert_int_equal(v->kind, RESP_ARRAY);
    assert_int_equal(v->n, 10);
    assert_string_equal(v->elems[2]->str, "active");
    assert_int_equal(v->elems[3]->integer, 2);
    resp_free(v);
    v = rcmd(&c, "LEASE.RELEASE", "r1", hid, NULL);   /* taken over HTTP */
    assert_int_equal(v->integer, 1);
    resp_free(v);
    v = rcmd(&c, "LEASE.RENEW", "r1", id, "1000");
    assert_int_equal(v->integer, 1);
    resp_free(v);
    v = rcmd(&c, "LEASE.RENEW", "r1", hid, "1000");
    assert_int_equal(v->integer, 0);
    resp_free(v);
    assert_int_equal(release(&T, "r1", id), 1);   /* taken over RESP */
    v = rcmd(&c, "LEASE.RELEASE", "r1", id, NULL);
    assert_int_equal(v->integer, 0);
    resp_free(v);
    /* errors */
    v = rcmd(&c, "LEASE.ACQUIRE", "r1", "0", "1000");
    assert_int_equal(v->kind, RESP_ERROR);
    resp_free(v);
    v = rcmd(&c, "LEASE.ACQUIRE", "r1", "x", "1000");
    assert_int_equal(v->kind, RESP_ERROR);
    resp_free(v);
    v = rcmd(&c, "LEASE.RELEASE", "r1", "nothex", NULL);
    assert_int_equal(v->kind, RESP_ERROR);
    resp_free(v);
    v = rcmd(&c, "LEASE.INFO", "r1", "extra", NULL);
    assert_int_equal(v->kind, RESP_ERROR);
    resp_free(v);
    v = rcmd(&c, "SET", "rs", "1", NULL);
    resp_free(v);
    v = rcmd(&c, "LEASE.ACQUIRE", "rs", "2", "1000");
    assert_int_equal(v->kind, RESP_ERROR);
    assert_memory_equal(v->str, "WRONGTYPE", 9);
    resp_free(v);
    close(c.fd);
    free(c.rbuf);
}

/* ------------------------------------------------------------------------ */
/* Exactness under concurrent acquire/release                               */
/* ------------------------------------------------------------------------ */

#define THREADS 8
#define LIMIT 3
#define ROUNDS 150

static _Atomic int held;          /* leases granted and not yet released, by the clients' count */
static _Atomic int max_held, grants, refusals, lost;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        char id[17];
        long long act;
        if (!acquire(&T, "conc", LIMIT, 60000, id, &act)) {
            atomic_fetch_add(&refusals, 1);
            continue;
        }
        atomic_fetch_add(&grants, 1);
        int h = atomic_fetch_add(&held, 1) + 1;
        int m = atomic_load(&max_held);
        while (h > m && !atomic_compare_exchange_weak(&max_held, &m, h))
            ;
        if (act > LIMIT)
            atomic_fetch_add(&lost, 1000);
        usleep(300);   /* hold it a moment: the threads' leases overlap */
        atomic_fetch_sub(&held, 1);   /* before the release is sent: never counted twice */
        if (release(&T, "conc", id) != 1)
            atomic_fetch_add(&lost, 1);
    }
    return NULL;
}

static void test_concurrent_exact(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    print_message("    %d granted, %d refused, at most %d held at once\n", atomic_load(&grants),
                  atomic_load(&refusals), atomic_load(&max_held));
    assert_int_equal(atomic_load(&lost), 0);              /* every grant released exactly once, none over */
    assert_true(atomic_load(&max_held) <= LIMIT);
    assert_int_equal(atomic_load(&grants) + atomic_load(&refusals), THREADS * ROUNDS);
    assert_true(atomic_load(&grants) > 0);
    assert_true(atomic_load(&refusals) > 0);              /* the limit was reached */
    assert_int_equal(active_of(&T, "conc"), 0);           /* nothing leaked */
    http_resp_t r = http(&T, "GET", "/keys/conc", NULL, NULL);
    assert_int_equal(r.status, 404);                      /* the last release deleted the key */
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* kill -9 and restart                                                      */
/* ------------------------------------------------------------------------ */

#define KW 4            /* writers, one key each */
#define KLIMIT 6
#define KMAX 64
#define SHORT_MS 400    /* expire while the server is down */
#define LONG_MS 600000

typedef struct kwriter {
    tally_proc_t *p;
    char key[32];
    rng_t rng;
    /* the model: leases acknowledged granted and not acknowledged released */
    char ids[KMAX][17];
    bool longl[KMAX];
    int n;
    /* the operation in flight when the server died */
    int inflight;                /* 0 none, 1 acquire (long?), 2 release of ids[rel] */
    bool inflight_long;
    char inflight_id[17];
    _Atomic int *stop;
} kwriter_t;

static void *kwriter_main(void *arg)
{
    kwriter_t *w = arg;
    while (!atomic_load(w->stop)) {
        if (w->n < KLIMIT && (w->n == 0 || rng_below(&w->rng, 2))) {
            bool lg = rng_below(&w->rng, 2);
            char body[96], path[64], id[17];
            snprintf(body, sizeof(body), "{\"limit\":%d,\"ttl_ms\":%d}", KLIMIT, lg ? LONG_MS : SHORT_MS);
            snprintf(path, sizeof(path), "/lease/%s", w->key);
            w->inflight = 1;
            w->inflight_long = lg;
            http_resp_t r = http(w->p, "POST", path, body, NULL);
            if (r.status != 200) {
                http_free(&r);
                return NULL;   /* killed: the acquire is in flight */
            }
            if (json_bool_of(&r, "acquired")) {
                strcpy(id, json_string_value(json_object_get(r.json, "lease")));
                strcpy(w->ids[w->n], id);
                w->longl[w->n++] = lg;
            }
            http_free(&r);
        } else {
            int i = (int)rng_below(&w->rng, (uint64_t)w->n);
            w->inflight = 2;
            w->inflight_long = w->longl[i];
            strcpy(w->inflight_id, w->ids[i]);
            int ok = release(w->p, w->key, w->ids[i]);
            if (ok < 0)
                return NULL;   /* killed: the release is in flight */
            memmove(w->ids[i], w->ids[w->n - 1], 17);
            w->longl[i] = w->longl[w->n - 1];
            w->n--;
        }
        w->inflight = 0;
        /* short leases the model holds may expire: they are dropped from it
         * once released or found expired, which the release above covers */
    }
    return NULL;
}

static void test_kill9_restart(void **state)
{
    (void)state;
    const char *args[] = { "--fsync", "always", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    rng_t g;
    rng_seed(&g, 4242);
    kwriter_t w[KW];
    memset(w, 0, sizeof(w));
    for (int round = 0; round < 2; round++) {
        _Atomic int stop = 0;
        pthread_t t[KW];
        tally_proc_t view = p;
        for (int i = 0; i < KW; i++) {
            w[i].p = &view;
            snprintf(w[i].key, sizeof(w[i].key), "k9:%d", i);
            if (round == 0)
                rng_seed(&w[i].rng, 100 + (uint64_t)i);
            w[i].stop = &stop;
            w[i].inflight = 0;
            pthread_create(&t[i], NULL, kwriter_main, &w[i]);
        }
        usleep((useconds_t)(200000 + rng_below(&g, 300000)));
        tally_kill(&p);
        atomic_store(&stop, 1);
        for (int i = 0; i < KW; i++)
            pthread_join(t[i], NULL);
        sleep_ms(SHORT_MS + 200);   /* every short lease acknowledged has expired while down */
        tally_start(&p, dir, args);
        for (int i = 0; i < KW; i++) {
            kwriter_t *x = &w[i];
            /* the model after the restart: its long leases */
            int longs = 0;
            for (int k = 0; k < x->n; k++)
                longs += x->longl[k];
            long long act = active_of(&p, x->key);
            int lo = longs, hi = longs;
            if (x->inflight == 1 && x->inflight_long)
                hi++;   /* the acquire in flight may have landed */
            if (x->inflight == 2 && x->inflight_long)
                lo--;   /* the release in flight may have landed */
            if (act < lo || act > hi)
                fail_msg("round %d key %s: %lld live, the model says %d..%d", round, x->key, act, lo, hi);
            /* every acknowledged long lease is live; every short one is gone */
            for (int k = 0; k < x->n; k++) {
                if (x->inflight == 2 && !strcmp(x->ids[k], x->inflight_id))
                    continue;
                http_resp_t r = httpf(&p, "POST", "{\"ttl_ms\":600000}", "/lease/%s/%s/renew", x->key, x->ids[k]);
                assert_status(&r, 200);
                if (json_bool_of(&r, "renewed") != x->longl[k])
                    fail_msg("round %d key %s lease %s (%s): renewed %d", round, x->key, x->ids[k],
                             x->longl[k] ? "long" : "short", json_bool_of(&r, "renewed"));
                http_free(&r);
            }
            /* the model drops what expired and the in-flight release */
            int m = 0;
            for (int k = 0; k < x->n; k++)
                if (x->longl[k] && !(x->inflight == 2 && !strcmp(x->ids[k], x->inflight_id))) {
                    memmove(x->ids[m], x->ids[k], 17);
                    x->longl[m++] = true;
                }
            x->n = m;
            /* a lease the model cannot name (an in-flight acquire that landed, an in-flight release that
             * did not): start the key afresh */
            if (act > m) {
                http_resp_t r = httpf(&p, "DELETE", NULL, "/keys/%s", x->key);
                assert_status(&r, 200);
                http_free(&r);
                x->n = 0;
            }
        }
    }
    p.own_dir = true;
    tally_cleanup(&p);
}


/* ------------------------------------------------------------------------ */
/* The gateway form behind the real nginx (docs/gateways.md's config)       */
/* ------------------------------------------------------------------------ */

/* The location blocks of docs/gateways.md ("Concurrency leases"), with the
 * test's ports: auth_request acquires (deny_status 403, nginx's "no"),
 * post_action releases the lease named by X-Tally-Lease once the response
 * is done. */
static const char NGINX_CONF[] =
    "daemon off;\n"
    "master_process off;\n"
    "pid %1$s/nginx.pid;\n"
    "error_log %1$s/error.log warn;\n"
    "events { worker_connections 64; }\n"
    "http {\n"
    "  access_log off;\n"
    "  client_body_temp_path %1$s/body;\n"
    "  proxy_temp_path %1$s/proxy;\n"
    "  fastcgi_temp_path %1$s/fastcgi;\n"
    "  uwsgi_temp_path %1$s/uwsgi;\n"
    "  scgi_temp_path %1$s/scgi;\n"
    "  upstream tally { server 127.0.0.1:%2$d; keepalive 8; }\n"
    "  upstream app { server 127.0.0.1:%4$d; }\n"
    "  server {\n"
    "    listen 127.0.0.1:%3$d;\n"
    "    location /api/ {\n"
    "      auth_request /_lease_acquire;\n"
    "      auth_request_set $tally_lease $upstream_http_x_tally_lease;\n"
    "      auth_request_set $tally_retry $upstream_http_retry_after;\n"
    "      auth_request_set $tally_policy $upstream_http_ratelimit_policy;\n"
    "      auth_request_set $tally_ratelimit $upstream_http_ratelimit;\n"
    "      error_page 403 = @busy;\n"
    "      post_action @lease_release;\n"
    "      proxy_pass http://app;\n"
    "    }\n"
    "    location = /_lease_acquire {\n"
    "      internal;\n"
    "      proxy_pass http://tally/lease/api-backend/acquire?limit=2&ttl_ms=30000&deny_status=403;\n"
    "      proxy_pass_request_body off;\n"
    "      proxy_set_header Content-Length \"\";\n"
    "      proxy_http_version 1.1;\n"
    "      proxy_set_header Connection \"\";\n"
    "    }\n"
    "    location @lease_release {\n"
    "      internal;\n"
    "      proxy_method DELETE;\n"
    "      proxy_pass http://tally/lease/api-backend/$tally_lease;\n"
    "      proxy_pass_request_body off;\n"
    "      proxy_set_header Content-Length \"\";\n"
    "      proxy_set_header Host localhost;\n"
    "      proxy_set_header Origin \"\";\n"
    "      proxy_http_version 1.1;\n"
    "      proxy_set_header Connection \"\";\n"
    "    }\n"
    "    location @busy {\n"
    "      add_header Retry-After $tally_retry always;\n"
    "      add_header RateLimit-Policy $tally_policy always;\n"
    "      add_header RateLimit $tally_ratelimit always;\n"
    "      return 429 \"too many requests in flight\\n\";\n"
    "    }\n"
    "  }\n"
    "  server {\n"
    "    listen 127.0.0.1:%4$d;\n"
    "    location / { return 200 \"backend ok\\n\"; }\n"
    "  }\n"
    "}\n";

/* Starts nginx with the configuration `fmt` (the directory, tally's port,
 * nginx's, the backend's) in front of tally `t`; false when nginx is not
 * installed (the test skips). */
static bool nginx_start(const char *fmt, const tally_proc_t *t, tally_proc_t *N, char *dir, size_t dn, pid_t *pid,
                        const char *const *warm_headers)
{
    const char *bin = getenv("NGINX");
    if (!bin || !*bin)
        bin = "/usr/sbin/nginx";
    if (access(bin, X_OK) != 0) {
        print_message("    nginx is not installed: skipped (make deps installs it)\n");
        return false;
    }
    char path[400], errlog[400];
    tmpdir_make(dir, dn);
    memset(N, 0, sizeof(*N));
    N->port = tally_free_port();
    int app = tally_free_port();
    size_t cap = strlen(fmt) * 4 + 4096;
    char *conf = malloc(cap);
    snprintf(conf, cap, fmt, dir, t->port, N->port, app);
    snprintf(path, sizeof(path), "%s/nginx.conf", dir);
    file_write(path, conf, strlen(conf));
    free(conf);
    snprintf(errlog, sizeof(errlog), "%s/error.log", dir);
    *pid = fork();
    if (*pid == 0) {
        int fd = open(errlog, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(bin, "nginx", "-p", dir, "-c", path, "-e", errlog, (char *)NULL);
        _exit(127);
    }
    long st = -1;
    for (int i = 0; i < 500 && st != 200; i++) {
        http_resp_t r = http_h(N, "GET", "/api/up", NULL, NULL, warm_headers);
        st = r.status;
        http_free(&r);
        if (st != 200)
            sleep_ms(10);
    }
    if (st != 200) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        fail_msg("nginx did not answer (see %s)", errlog);
    }
    return true;
}

static void test_nginx(void **state)
{
    (void)state;
    char dir[256];
    tally_proc_t N;
    pid_t pid;
    if (!nginx_start(NGINX_CONF, &T, &N, dir, sizeof(dir), &pid, NULL))
        skip();
    /* every request acquires and, once answered, releases: 20 in a row under a limit of 2 */
    for (int i = 0; i < 20; i++) {
        http_resp_t r = http(&N, "GET", "/api/x", NULL, NULL);
        assert_status(&r, 200);
        http_free(&r);
    }
    long long act = -1;
    for (int i = 0; i < 200 && act != 0; i++) {   /* post_action runs after the answer */
        act = active_of(&T, "api-backend");
        if (act)
            sleep_ms(10);
    }
    assert_int_equal(act, 0);
    /* two leases held elsewhere: the gateway answers 429 with the headers */
    char a[17], b[17], v[128];
    assert_true(acquire(&T, "api-backend", 2, 30000, a, NULL));
    assert_true(acquire(&T, "api-backend", 2, 30000, b, NULL));
    http_resp_t r = http(&N, "GET", "/api/x", NULL, NULL);
    assert_int_equal(r.status, 429);
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    assert_int_equal(atoi(v), 30);
    assert_true(http_header(&r, "RateLimit-Policy", v, sizeof(v)));
    assert_string_equal(v, "\"concurrency\";q=2;qu=\"concurrent-requests\"");
    http_free(&r);
    assert_int_equal(release(&T, "api-backend", a), 1);
    r = http(&N, "GET", "/api/x", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    act = -1;
    for (int i = 0; i < 200 && act != 1; i++) {
        act = active_of(&T, "api-backend");
        if (act != 1)
            sleep_ms(10);
    }
    assert_int_equal(act, 1);   /* b; the gateway's own was released */
    assert_int_equal(release(&T, "api-backend", b), 1);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    tmpdir_remove(dir);
}

/* ------------------------------------------------------------------------ */
/* Concurrency policies: the hook acquires and releases                     */
/* ------------------------------------------------------------------------ */

static const char LEASE_POLICIES[] =
    "{\"policies\": {\n"
    "  \"llm\": {\"algorithm\": \"concurrency\", \"limit\": 2, \"ttl_ms\": 30000, \"key\": \"{header:X-Api-Key}\",\n"
    "          \"overrides\": {\"k-file\": {\"limit\": 3, \"ttl\": 30}}},\n"
    "  \"short\": {\"algorithm\": \"concurrency\", \"limit\": 1, \"ttl_ms\": 1000, \"key\": \"{header:X-Api-Key}\",\n"
    "            \"deny_status\": 403, \"prefix\": \"s.\"},\n"
    "  \"backend\": {\"algorithm\": \"concurrency\", \"limit\": 2, \"ttl_ms\": 30000, \"key\": \"{header:X-Tenant}\",\n"
    "              \"deny_status\": 403},\n"
    "  \"rate\": {\"algorithm\": \"gcra\", \"max_burst\": 1, \"count_per_period\": 1, \"period\": 60}\n"
    "}}\n";

static char lease_cfgdir[256];
static char lease_alog[400];

static void start_with_policies(tally_proc_t *p)
{
    char path[400];
    tmpdir_make(lease_cfgdir, sizeof(lease_cfgdir));
    snprintf(path, sizeof(path), "%s/policies.json", lease_cfgdir);
    snprintf(lease_alog, sizeof(lease_alog), "%s/access.log", lease_cfgdir);
    file_write(path, LEASE_POLICIES, strlen(LEASE_POLICIES));
    const char *args[] = { "--config", path, "--access-log", lease_alog, NULL };
    tally_start(p, NULL, args);
}

static void stop_with_policies(tally_proc_t *p)
{
    tally_cleanup(p);
    tmpdir_remove(lease_cfgdir);
}

/* The hook of `policy` for X-Api-Key `k` (release: X-Tally-Release), with
 * `accept` (may be NULL); the answer, which the caller frees. */
static http_resp_t hook(const tally_proc_t *p, const char *policy, const char *hname, const char *k,
                        const char *release, const char *accept)
{
    char h1[128], h2[64], h3[96], path[128];
    const char *h[4] = { NULL };
    int n = 0;
    snprintf(h1, sizeof(h1), "%s: %s", hname, k);
    h[n++] = h1;
    if (release) {
        snprintf(h2, sizeof(h2), "X-Tally-Release: %s", release);
        h[n++] = h2;
    }
    if (accept) {
        snprintf(h3, sizeof(h3), "Accept: %s", accept);
        h[n++] = h3;
    }
    snprintf(path, sizeof(path), "/hook/%s/v1/chat", policy);
    return http_h(p, "GET", path, NULL, NULL, h);
}

/* Acquires through the hook: the id (from X-Tally-Lease) into id[17], or
 * "" when refused; the status. */
static long hook_acquire(const tally_proc_t *p, const char *policy, const char *k, char id[17])
{
    http_resp_t r = hook(p, policy, "X-Api-Key", k, NULL, NULL);
    long st = r.status;
    id[0] = '\0';
    if (st == 200) {
        assert_true(json_bool_of(&r, "acquired"));
        assert_true(http_header(&r, "X-Tally-Lease", id, 17) && strlen(id) == 16);
        json_t *l = json_object_get(r.json, "lease");
        assert_string_equal(json_string_value(l), id);
    }
    http_free(&r);
    return st;
}

/* Releases through the hook: 1 released, 0 not live. */
static int hook_release(const tally_proc_t *p, const char *policy, const char *k, const char *id)
{
    http_resp_t r = hook(p, policy, "X-Api-Key", k, id, NULL);
    assert_status(&r, 200);
    int ok = json_bool_of(&r, "released");
    http_free(&r);
    return ok;
}

static const char *violated_limit(const http_resp_t *r)
{
    json_t *v = json_object_get(r->json, "violated");
    assert_true(json_is_array(v) && json_array_size(v) == 1);
    json_t *o = json_array_get(v, 0);
    assert_string_equal(json_string_value(json_object_get(o, "policy")), json_string_value(json_object_get(r->json, "policy")));
    return json_string_value(json_object_get(o, "limit"));
}

static void test_policy_hook(void **state)
{
    (void)state;
    tally_proc_t p;
    start_with_policies(&p);
    char a[17], b[17], c[17], v[128];
    /* acquire: 200, the id, the draft headers naming the policy */
    http_resp_t r = hook(&p, "llm", "X-Api-Key", "k1", NULL, NULL);
    assert_status(&r, 200);
    assert_true(http_header(&r, "X-Tally-Lease", a, sizeof(a)));
    assert_true(http_header(&r, "RateLimit-Policy", v, sizeof(v)));
    assert_string_equal(v, "\"llm\";q=2;qu=\"concurrent-requests\"");
    assert_true(http_header(&r, "RateLimit", v, sizeof(v)));
    assert_string_equal(v, "\"llm\";r=1");
    assert_string_equal(json_string_value(json_object_get(r.json, "policy")), "llm");
    assert_null(json_object_get(r.json, "violated"));
    http_free(&r);
    assert_int_equal(active_of(&p, "llm:k1"), 1);   /* the policy's prefix, the template's key */
    assert_int_equal(hook_acquire(&p, "llm", "k1", b), 200);
    /* full: 429, Retry-After, "violated" naming the policy and its limit */
    r = hook(&p, "llm", "X-Api-Key", "k1", NULL, NULL);
    assert_int_equal(r.status, 429);
    assert_false(json_bool_of(&r, "acquired"));
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    assert_true(atoi(v) >= 1 && atoi(v) <= 30);   /* until the first lease expires: 30 s less the time taken */
    assert_true(http_header(&r, "RateLimit", v, sizeof(v)));
    assert_string_equal(v, "\"llm\";r=0");
    assert_false(http_header(&r, "X-Tally-Lease", v, sizeof(v)));
    assert_string_equal(violated_limit(&r), "default");
    http_free(&r);
    /* problem details when asked for */
    r = hook(&p, "llm", "X-Api-Key", "k1", NULL, "application/problem+json");
    assert_int_equal(r.status, 429);
    assert_true(http_header(&r, "Content-Type", v, sizeof(v)));
    assert_non_null(strstr(v, "application/problem+json"));
    assert_string_equal(json_string_value(json_object_get(r.json, "type")),
                        "https://iana.org/assignments/http-problem-types#quota-exceeded");
    assert_string_equal(json_string_value(json_array_get(json_object_get(r.json, "violated-policies"), 0)), "llm");
    assert_int_equal(json_int_of(&r, "status"), 429);
    http_free(&r);
    /* another tenant has its own key */
    assert_int_equal(hook_acquire(&p, "llm", "k2", c), 200);
    assert_int_equal(hook_release(&p, "llm", "k2", c), 1);
    /* release through the same hook: once; a release of what is not live answers false */
    assert_int_equal(hook_release(&p, "llm", "k1", a), 1);
    assert_int_equal(hook_release(&p, "llm", "k1", a), 0);
    assert_int_equal(hook_release(&p, "llm", "k2", b), 0);   /* another tenant's key: not its lease */
    assert_int_equal(active_of(&p, "llm:k1"), 1);
    r = hook(&p, "llm", "X-Api-Key", "k1", "not-a-lease", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    assert_int_equal(hook_acquire(&p, "llm", "k1", a), 200);
    assert_int_equal(hook_acquire(&p, "llm", "k1", c), 429);
    /* errors are never "limited": no key, no policy */
    r = http(&p, "GET", "/hook/llm/v1/chat", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* the file's override of a tenant */
    char f[4][17];
    for (int i = 0; i < 3; i++)
        assert_int_equal(hook_acquire(&p, "llm", "k-file", f[i]), 200);
    r = hook(&p, "llm", "X-Api-Key", "k-file", NULL, NULL);
    assert_int_equal(r.status, 429);
    assert_int_equal(json_int_of(&r, "limit"), 3);
    assert_string_equal(violated_limit(&r), "file-override");
    http_free(&r);
    /* a live override: another limit and ttl, from the next acquire */
    r = http(&p, "PUT", "/policies/llm/overrides/k1", "{\"limit\":4,\"ttl_ms\":60000}", NULL);
    assert_status(&r, 201);
    json_t *lim = json_object_get(r.json, "limits");
    assert_string_equal(json_string_value(json_object_get(lim, "algorithm")), "concurrency");
    assert_int_equal(json_integer_value(json_object_get(lim, "limit")), 4);
    http_free(&r);
    r = hook(&p, "llm", "X-Api-Key", "k1", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "limit"), 4);
    assert_int_equal(json_int_of(&r, "ttl_ms"), 60000);
    assert_true(http_header(&r, "RateLimit-Policy", v, sizeof(v)));
    assert_string_equal(v, "\"llm\";q=4;qu=\"concurrent-requests\"");
    http_free(&r);
    assert_int_equal(hook_acquire(&p, "llm", "k1", c), 200);
    r = hook(&p, "llm", "X-Api-Key", "k1", NULL, NULL);
    assert_int_equal(r.status, 429);
    assert_string_equal(violated_limit(&r), "override");
    http_free(&r);
    /* overrides in another form are refused, naming the member */
    static const struct {
        const char *body, *field;
    } bad[] = {
        { "{\"limit\":0,\"ttl_ms\":1000}", "limit" },
        { "{\"limit\":100001,\"ttl_ms\":1000}", "limit" },
        { "{\"limit\":2}", "ttl_ms" },
        { "{\"limit\":2,\"ttl\":1,\"ttl_ms\":1000}", "ttl_ms" },
        { "{\"limit\":2,\"ttl_ms\":1000,\"max_count\":3}", "max_count" },
        { "{\"algorithm\":\"gcra\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}", "algorithm" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = http(&p, "PUT", "/policies/llm/overrides/k1", bad[i].body, NULL);
        assert_error(&r, 400, "BAD_REQUEST");
        json_t *e = json_object_get(r.json, "error");
        if (strcmp(json_string_value(json_object_get(e, "field")), bad[i].field) != 0)
            fail_msg("%s: %s", bad[i].body, r.body);
        http_free(&r);
    }
    r = http(&p, "GET", "/policies/llm/overrides/k1", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r.json, "limits"), "limit")), 4);
    http_free(&r);
    /* a rate decision naming a concurrency policy is refused, and vice versa no lease fields on a rate override */
    r = http(&p, "POST", "/throttle", "{\"policy\":\"llm\",\"key\":\"k1\"}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "concurrency policy"));
    http_free(&r);
    r = http(&p, "POST", "/throttle", "{\"key\":\"x\",\"algorithm\":\"concurrency\",\"limit\":1}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    r = http(&p, "PUT", "/policies/rate/overrides/t", "{\"limit\":2,\"ttl_ms\":1000}", NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    /* the metrics count the hook's acquires by policy and limit */
    r = http(&p, "GET", "/metrics", NULL, NULL);
    assert_status(&r, 200);
    assert_non_null(strstr(r.body, "tally_ratelimit_decisions_total{policy=\"llm\",decision=\"allowed\"} 9\n"));
    assert_non_null(strstr(r.body, "tally_ratelimit_decisions_total{policy=\"llm\",decision=\"limited\"} 5\n"));
    assert_non_null(strstr(r.body, "tally_ratelimit_limit_decisions_total{policy=\"llm\",limit=\"default\","
                                   "decision=\"limited\"} 3\n"));
    assert_non_null(strstr(r.body, "tally_ratelimit_limit_decisions_total{policy=\"llm\",limit=\"file-override\","
                                   "decision=\"allowed\"} 3\n"));
    assert_non_null(strstr(r.body, "tally_ratelimit_limit_decisions_total{policy=\"llm\",limit=\"override\","
                                   "decision=\"limited\"} 1\n"));
    http_free(&r);
    /* expiry: an unreleased lease frees itself */
    char s1[17], s2[17];
    struct timespec t0, t1;
    clock_gettime(CLOCK_REALTIME, &t0);
    assert_int_equal(hook_acquire(&p, "short", "k1", s1), 200);
    r = hook(&p, "short", "X-Api-Key", "k1", NULL, NULL);
    clock_gettime(CLOCK_REALTIME, &t1);
    long waited = (t1.tv_sec - t0.tv_sec) * 1000L + (t1.tv_nsec - t0.tv_nsec) / 1000000L;
    bool refused_seen = waited < 900;   /* a machine too slow to ask within the TTL sees it free again */
    if (refused_seen) {
        assert_int_equal(r.status, 403);   /* the policy's deny_status */
        assert_string_equal(violated_limit(&r), "default");
    } else {
        print_message("    the second acquire came %ld ms after the first: the refusal is not checked\n", waited);
    }
    http_free(&r);
    sleep_ms(1100);
    assert_int_equal(active_of(&p, "s.k1"), 0);
    assert_int_equal(hook_acquire(&p, "short", "k1", s2), 200);
    assert_int_equal(hook_release(&p, "short", "k1", s1), 0);   /* expired: gone, not brought back */
    assert_int_equal(hook_release(&p, "short", "k1", s2), 1);
    assert_int_equal(active_of(&p, "s.k1"), 0);
    /* the access log names what refused */
    tally_stop(&p);
    size_t n;
    char *log = file_read(lease_alog, &n);
    assert_non_null(strstr(log, "\"path\":\"/hook/llm/v1/chat\",\"violated\":[\"llm/override\"],\"status\":429"));
    assert_true(!refused_seen ||
                strstr(log, "\"path\":\"/hook/short/v1/chat\",\"violated\":[\"short/default\"],\"status\":403"));
    free(log);
    stop_with_policies(&p);
}

/* A policies file with a malformed concurrency policy stops tallyd at start. */
static void test_policy_refused(void **state)
{
    (void)state;
    static const struct {
        const char *policy, *says;
    } cases[] = {
        { "{\"algorithm\": \"concurrency\", \"limit\": 0, \"ttl_ms\": 1000}", "'limit'" },
        { "{\"algorithm\": \"concurrency\", \"limit\": 100001, \"ttl_ms\": 1000}", "'limit'" },
        { "{\"algorithm\": \"concurrency\", \"ttl_ms\": 1000}", "missing field 'limit'" },
        { "{\"algorithm\": \"concurrency\", \"limit\": 2}", "needs 'ttl_ms'" },
        { "{\"algorithm\": \"concurrency\", \"limit\": 2, \"ttl\": 1, \"ttl_ms\": 1000}", "not both" },
        { "{\"algorithm\": \"concurrency\", \"limit\": 2, \"ttl_ms\": 86400001}", "'ttl_ms'" },
        { "{\"algorithm\": \"concurrency\", \"limit\": 2, \"ttl_ms\": 1000, \"max_count\": 5}",
          "'max_count' does not apply to the concurrency algorithm" },
        { "{\"algorithm\": \"concurrency\", \"limit\": 2, \"ttl_ms\": 1000, \"period\": 5}", "'period' does not apply" },
        { "{\"algorithm\": \"concurrency\", \"limit\": 2, \"ttl_ms\": 1000, \"shadow\": true}",
          "'shadow' does not apply to a concurrency policy" },
        { "{\"algorithm\": \"concurrency\", \"limit\": 2, \"ttl_ms\": 1000, \"on_expiry\": \"keep\"}",
          "'on_expiry' does not apply" },
        { "{\"algorithm\": \"gcra\", \"max_burst\": 1, \"count_per_period\": 1, \"period\": 1, \"limit\": 3}",
          "'limit' does not apply to the gcra algorithm" },
        { "{\"algorithm\": \"concurrency\", \"limit\": 2, \"ttl_ms\": 1000, \"overrides\": {\"t\": {\"limit\": 0, "
          "\"ttl_ms\": 5}}}",
          "override 't'" },
    };
    char dir[256], path[400];
    tmpdir_make(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/bad.json", dir);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[512];
        snprintf(text, sizeof(text), "{\"policies\": {\n \"c\": %s}}\n", cases[i].policy);
        file_write(path, text, strlen(text));
        tally_proc_t q;
        const char *args[] = { "--config", path, "--in-memory", NULL };
        int st = tally_start_expect_exit(&q, NULL, args);
        char *log = tally_log(&q);
        if (st == 0 || !strstr(log, cases[i].says) || !strstr(log, "policy 'c'"))
            fail_msg("case %zu (%s): expected a refusal saying \"%s\":\n%s", i, cases[i].policy, cases[i].says, log);
        free(log);
        tally_cleanup(&q);
    }
    tmpdir_remove(dir);
}

/* docs/gateways.md's nginx recipe for a concurrency policy: auth_request
 * to the policy's hook acquires, post_action sends the same request again
 * with X-Tally-Release once the response is done (the client's headers
 * come along, so the template builds the same key); a refused request has
 * no lease to release. */
static const char NGINX_POLICY_CONF[] =
    "daemon off;\n"
    "master_process off;\n"
    "pid %1$s/nginx.pid;\n"
    "error_log %1$s/error.log warn;\n"
    "events { worker_connections 64; }\n"
    "http {\n"
    "  access_log off;\n"
    "  client_body_temp_path %1$s/body;\n"
    "  proxy_temp_path %1$s/proxy;\n"
    "  fastcgi_temp_path %1$s/fastcgi;\n"
    "  uwsgi_temp_path %1$s/uwsgi;\n"
    "  scgi_temp_path %1$s/scgi;\n"
    "  upstream tally { server 127.0.0.1:%2$d; keepalive 8; }\n"
    "  upstream app { server 127.0.0.1:%4$d; }\n"
    "  server {\n"
    "    listen 127.0.0.1:%3$d;\n"
    "    location /api/ {\n"
    "      auth_request /_tally_acquire;\n"
    "      auth_request_set $tally_lease $upstream_http_x_tally_lease;\n"
    "      auth_request_set $tally_retry $upstream_http_retry_after;\n"
    "      auth_request_set $tally_policy $upstream_http_ratelimit_policy;\n"
    "      auth_request_set $tally_ratelimit $upstream_http_ratelimit;\n"
    "      error_page 403 = @busy;\n"
    "      post_action @tally_release;\n"
    "      proxy_pass http://app;\n"
    "    }\n"
    "    location = /_tally_acquire {\n"
    "      internal;\n"
    "      proxy_pass http://tally/hook/backend$request_uri;\n"
    "      proxy_pass_request_body off;\n"
    "      proxy_set_header Content-Length \"\";\n"
    "      proxy_http_version 1.1;\n"
    "      proxy_set_header Connection \"\";\n"
    "    }\n"
    "    location @tally_release {\n"
    "      internal;\n"
    "      if ($tally_lease = \"\") { return 204; }\n"
    "      proxy_pass http://tally/hook/backend$request_uri;\n"
    "      proxy_pass_request_body off;\n"
    "      proxy_set_header Content-Length \"\";\n"
    "      proxy_set_header X-Tally-Release $tally_lease;\n"
    "      proxy_http_version 1.1;\n"
    "      proxy_set_header Connection \"\";\n"
    "    }\n"
    "    location @busy {\n"
    "      add_header Retry-After $tally_retry always;\n"
    "      add_header RateLimit-Policy $tally_policy always;\n"
    "      add_header RateLimit $tally_ratelimit always;\n"
    "      return 429 \"too many requests in flight\\n\";\n"
    "    }\n"
    "  }\n"
    "  server {\n"
    "    listen 127.0.0.1:%4$d;\n"
    "    location / { return 200 \"backend ok\\n\"; }\n"
    "  }\n"
    "}\n";

static long long wait_active(const tally_proc_t *p, const char *key, long long want)
{
    long long act = -1;
    for (int i = 0; i < 200 && act != want; i++) {   /* post_action runs after the answer */
        act = active_of(p, key);
        if (act != want)
            sleep_ms(10);
    }
    return act;
}

static void test_policy_nginx(void **state)
{
    (void)state;
    tally_proc_t p;
    start_with_policies(&p);
    char dir[256];
    tally_proc_t N;
    pid_t pid;
    const char *h[] = { "X-Tenant: t1", NULL };
    if (!nginx_start(NGINX_POLICY_CONF, &p, &N, dir, sizeof(dir), &pid, h)) {
        stop_with_policies(&p);
        skip();
    }
    /* every request acquires and, once answered, releases: 20 in a row under a limit of 2 */
    for (int i = 0; i < 20; i++) {
        http_resp_t r = http_h(&N, "GET", "/api/x", NULL, NULL, h);
        assert_status(&r, 200);
        http_free(&r);
    }
    assert_int_equal(wait_active(&p, "backend:t1", 0), 0);
    /* two leases held elsewhere (through the hook itself): nginx answers 429 with the policy's headers */
    char a[17], b[17], v[128];
    http_resp_t r = hook(&p, "backend", "X-Tenant", "t1", NULL, NULL);
    assert_status(&r, 200);
    assert_true(http_header(&r, "X-Tally-Lease", a, sizeof(a)));
    http_free(&r);
    r = hook(&p, "backend", "X-Tenant", "t1", NULL, NULL);
    assert_status(&r, 200);
    assert_true(http_header(&r, "X-Tally-Lease", b, sizeof(b)));
    http_free(&r);
    r = http_h(&N, "GET", "/api/x", NULL, NULL, h);
    assert_int_equal(r.status, 429);
    assert_true(http_header(&r, "Retry-After", v, sizeof(v)));
    assert_true(atoi(v) >= 1 && atoi(v) <= 30);
    assert_true(http_header(&r, "RateLimit-Policy", v, sizeof(v)));
    assert_string_equal(v, "\"backend\";q=2;qu=\"concurrent-requests\"");
    http_free(&r);
    const char *h2[] = { "X-Tenant: t2", NULL };   /* another tenant is not affected */
    r = http_h(&N, "GET", "/api/x", NULL, NULL, h2);
    assert_status(&r, 200);
    http_free(&r);
    r = hook(&p, "backend", "X-Tenant", "t1", a, NULL);
    assert_true(json_bool_of(&r, "released"));
    http_free(&r);
    r = http_h(&N, "GET", "/api/x", NULL, NULL, h);
    assert_status(&r, 200);
    http_free(&r);
    assert_int_equal(wait_active(&p, "backend:t1", 1), 1);   /* b; the gateway's own was released */
    assert_int_equal(wait_active(&p, "backend:t2", 0), 0);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    tmpdir_remove(dir);
    stop_with_policies(&p);
}

/* A snapshot taken midway, then more changes (expired leases purged by
 * them, releases, renewals), kill -9 and restart: snapshot + journal replay
 * rebuild every lease key byte for byte (its dump's digest) and the same
 * live set. */
static void dump_state(const tally_proc_t *p, char out[][200], int n)
{
    for (int i = 0; i < n; i++) {
        char d[64] = "absent";
        http_resp_t r = httpf(p, "GET", NULL, "/keys/s%d/dump", i);
        if (r.status == 200)
            assert_true(http_header(&r, "Tally-Digest", d, sizeof(d)));
        else
            assert_int_equal(r.status, 404);
        http_free(&r);
        r = httpf(p, "GET", NULL, "/lease/s%d", i);
        assert_status(&r, 200);
        snprintf(out[i], 200, "%s active=%lld next=%lld limit=%lld", d, json_int_of(&r, "active"),
                 json_int_of(&r, "next_expiry_ms"), json_int_of(&r, "limit"));
        http_free(&r);
    }
}

static void test_snapshot_journal_restart(void **state)
{
    (void)state;
    const char *args[] = { "--fsync", "always", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    enum { K = 4 };
    char ids[K][8][17];
    int n[K] = { 0 };
    char key[16];
    for (int i = 0; i < K; i++) {
        snprintf(key, sizeof(key), "s%d", i);
        for (int j = 0; j < 6; j++)
            if (acquire(&p, key, 8, j % 2 ? 250 : 600000, ids[i][n[i]], NULL))
                n[i]++;
    }
    http_resp_t r = http(&p, "POST", "/admin/snapshot", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    sleep_ms(350);   /* the short leases expire; the changes below purge them */
    for (int i = 0; i < K; i++) {
        snprintf(key, sizeof(key), "s%d", i);
        char extra[17];
        assert_true(acquire(&p, key, 8, 600000, extra, NULL));
        assert_int_equal(release(&p, key, ids[i][0]), 1);            /* long */
        assert_int_equal(release(&p, key, ids[i][1]), 0);            /* short: expired */
        r = httpf(&p, "POST", "{\"ttl_ms\":900000}", "/lease/%s/%s/renew", key, ids[i][2]);
        assert_true(json_bool_of(&r, "renewed"));
        http_free(&r);
    }
    /* s3 keeps only the lease acquired after the snapshot */
    assert_int_equal(release(&p, "s3", ids[3][2]), 1);
    assert_int_equal(release(&p, "s3", ids[3][4]), 1);
    char before[K][200], after[K][200];
    dump_state(&p, before, K);
    tally_kill(&p);
    tally_start(&p, dir, args);
    dump_state(&p, after, K);
    for (int i = 0; i < K; i++) {
        print_message("    s%d: %s\n", i, after[i]);
        assert_string_equal(before[i], after[i]);
    }
    p.own_dir = true;
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_gateway_form),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_resp),
        cmocka_unit_test(test_concurrent_exact),
        cmocka_unit_test(test_nginx),
        cmocka_unit_test(test_policy_hook),
        cmocka_unit_test(test_policy_refused),
        cmocka_unit_test(test_policy_nginx),
        cmocka_unit_test(test_kill9_restart),
        cmocka_unit_test(test_snapshot_journal_restart),
    };
    return cmocka_run_group_tests_name("it_lease", tests, setup, teardown);
}
