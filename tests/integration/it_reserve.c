/*
 * it_reserve.c - reserve, settle, refund and probe through a real tallyd:
 * the HTTP routes and the RESP commands, bad input refused with the
 * limiter unchanged, expiry outcomes (keep, refund) before and after a
 * restart, and threads reserving, settling and refunding concurrently
 * against an exact model of the acknowledged operations, which the state
 * must equal live and after kill -9 and a restart (--fsync always).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/rng.h"
#include "tests/integration/harness.h"
#include "tests/integration/resp_client.h"

static tally_proc_t T;

static int setup(void **state)
{
    (void)state;
    static const char *const args[] = { "--resp-port", "0", NULL };
    tally_start(&T, NULL, args);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tally_cleanup(&T);
    return 0;
}

/* A day's 10 000 tokens (GCRA: T = 8.64 s, limit 10 000). */
#define DAY "\"max_burst\":9999,\"count_per_period\":10000,\"period\":86400"

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* The reservation id of an answer ("" when none). */
static void reservation_of(const http_resp_t *r, char *id, size_t n)
{
    json_t *v = r->json ? json_object_get(r->json, "reservation") : NULL;
    snprintf(id, n, "%s", json_is_string(v) ? json_string_value(v) : "");
}

/* remaining and reset_after of a probe of `q` on key with `params`. */
static void probe(const tally_proc_t *p, const char *key, const char *params, long long q, long long *remaining,
                  long long *reset, bool *allowed)
{
    char body[512];
    snprintf(body, sizeof(body), "{%s,\"quantity\":%lld}", params, q);
    http_resp_t r = httpf(p, "POST", body, "/throttle/%s/probe", key);
    assert_status(&r, 200);
    *remaining = json_int_of(&r, "remaining");
    *reset = json_int_of(&r, "reset_after");
    if (allowed)
        *allowed = json_bool_of(&r, "allowed");
    http_free(&r);
}

static void test_http_forms(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/throttle", "{\"key\":\"llm\"," DAY ",\"quantity\":2000,\"reserve\":true,\"ttl\":600}",
                         NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "allowed"));
    assert_int_equal(json_int_of(&r, "remaining"), 8000);
    assert_int_equal(json_int_of(&r, "reservation_ttl"), 600);
    char id[32];
    reservation_of(&r, id, sizeof(id));
    assert_true(strlen(id) >= 19);
    http_free(&r);

    long long rem, reset;
    bool allowed;
    probe(&T, "llm", DAY, 8001, &rem, &reset, &allowed);
    assert_false(allowed);
    assert_int_equal(rem, 8000);
    probe(&T, "llm", DAY, 8000, &rem, &reset, &allowed);
    assert_true(allowed);
    assert_int_equal(rem, 0);        /* what would remain after it */
    assert_int_equal(reset, 86400);
    probe(&T, "llm", DAY, 0, &rem, &reset, &allowed);   /* the probe took nothing */
    assert_int_equal(rem, 8000);

    char body[256];
    snprintf(body, sizeof(body), "{\"reservation\":\"%s\",\"actual\":500}", id);
    r = http(&T, "POST", "/throttle/llm/settle", body, NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "settled"));
    assert_int_equal(json_int_of(&r, "reserved"), 2000);
    assert_int_equal(json_int_of(&r, "actual"), 500);
    assert_int_equal(json_int_of(&r, "remaining"), 9500);
    assert_int_equal(json_int_of(&r, "reset_after"), 4320);
    http_free(&r);

    /* bad input: refused, the limiter unchanged */
    struct {
        const char *path, *body;
        long status;
        const char *code;
    } bad[] = {
        { "/throttle/llm/settle", body, 404, "NOT_FOUND" },   /* settled twice */
        { "/throttle/llm/settle", "{\"reservation\":\"12345\",\"actual\":1}", 404, "NOT_FOUND" },
        { "/throttle/nokey/settle", "{\"reservation\":\"12345\",\"actual\":1}", 404, "NOT_FOUND" },
        { "/throttle/llm/settle", "{\"reservation\":\"12x\",\"actual\":1}", 400, "BAD_REQUEST" },
        { "/throttle/llm/settle", "{\"reservation\":\"\",\"actual\":1}", 400, "BAD_REQUEST" },
        { "/throttle/llm/settle", "{\"reservation\":\"99999999999999999999999\",\"actual\":1}", 400, "BAD_REQUEST" },
        { "/throttle/llm/settle", "{\"reservation\":\"12345\",\"actual\":-1}", 400, "BAD_REQUEST" },
        { "/throttle/llm/settle", "{\"reservation\":\"12345\",\"actual\":1.5}", 400, "BAD_REQUEST" },
        { "/throttle/llm/settle", "{\"reservation\":\"12345\"}", 400, "BAD_REQUEST" },
        { "/throttle/llm/settle", "{\"actual\":1}", 400, "BAD_REQUEST" },
        { "/throttle/llm/settle", "{\"reservation\":\"12345\",\"actual\":1,\"x\":1}", 400, "BAD_REQUEST" },
        { "/throttle/llm/refund", "{" DAY ",\"quantity\":-1}", 400, "BAD_REQUEST" },
        { "/throttle/llm/refund", "{" DAY ",\"quantity\":10001}", 400, "BAD_REQUEST" },
        { "/throttle/llm/refund", "{\"algorithm\":\"token_bucket\",\"capacity\":5,\"refill_rate\":1}", 409, "WRONGTYPE" },
        { "/throttle/llm/probe", "{\"algorithm\":\"token_bucket\",\"capacity\":5,\"refill_rate\":1}", 409, "WRONGTYPE" },
        { "/throttle", "{\"key\":\"llm\"," DAY ",\"quantity\":10001,\"reserve\":true}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"key\":\"llm\"," DAY ",\"quantity\":-5,\"reserve\":true}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"key\":\"llm\"," DAY ",\"reserve\":true,\"ttl\":0}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"key\":\"llm\"," DAY ",\"reserve\":true,\"ttl\":604801}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"key\":\"llm\"," DAY ",\"reserve\":true,\"on_expiry\":\"maybe\"}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"key\":\"llm\"," DAY ",\"reserve\":\"yes\"}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"key\":\"llm\"," DAY ",\"ttl\":5}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"key\":\"llm\"," DAY ",\"reserve\":true,\"shadow\":true}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"requests\":[{\"key\":\"llm\"," DAY "}],\"reserve\":true}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"requests\":[{\"key\":\"llm\"," DAY ",\"reserve\":true}]}", 400, "BAD_REQUEST" },
        { "/throttle", "{\"key\":\"log\",\"algorithm\":\"sliding_log\",\"max_count\":5,\"period\":60,\"reserve\":true}",
          400, "BAD_REQUEST" },
        { "/throttle/log/refund", "{\"algorithm\":\"sliding_log\",\"max_count\":5,\"period\":60}", 400,
          "BAD_REQUEST" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = http(&T, "POST", bad[i].path, bad[i].body, NULL);
        if (r.status != bad[i].status)
            fail_msg("%s %s: %ld, want %ld: %s", bad[i].path, bad[i].body, r.status, bad[i].status, r.body);
        assert_error(&r, bad[i].status, bad[i].code);
        http_free(&r);
        probe(&T, "llm", DAY, 0, &rem, &reset, NULL);
        if (rem != 9500 || reset != 4320)
            fail_msg("%s %s changed the limiter: remaining %lld reset %lld", bad[i].path, bad[i].body, rem, reset);
    }
    probe(&T, "log", "\"algorithm\":\"sliding_log\",\"max_count\":5,\"period\":60", 2, &rem, &reset, &allowed);
    assert_true(allowed);
    assert_int_equal(rem, 3);   /* probes work with every algorithm */

    /* a refund, never past the capacity */
    r = http(&T, "POST", "/throttle/llm/refund", "{" DAY ",\"quantity\":300}", NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "refunded"), 300);
    assert_int_equal(json_int_of(&r, "remaining"), 9800);
    http_free(&r);
    r = http(&T, "POST", "/throttle/llm/refund", "{" DAY ",\"quantity\":10000}", NULL);
    assert_int_equal(json_int_of(&r, "remaining"), 10000);
    http_free(&r);
    r = http(&T, "POST", "/throttle/fresh/refund", "{" DAY ",\"quantity\":10}", NULL);   /* absent: full */
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "remaining"), 10000);
    http_free(&r);
}

/* The answers' headers and a policy's prefix. */
static void test_probe_headers(void **state)
{
    (void)state;
    http_resp_t r = http(&T, "POST", "/throttle/hdr/probe",
                         "{\"max_burst\":1,\"count_per_period\":1,\"period\":60,\"quantity\":3}", NULL);
    assert_status(&r, 200);
    assert_false(json_bool_of(&r, "allowed"));
    assert_int_equal(json_int_of(&r, "retry_after"), -1);   /* more than the limit: never */
    char v[64];
    assert_true(http_header(&r, "RateLimit-Limit", v, sizeof(v)));
    assert_string_equal(v, "2");
    http_free(&r);
}

/* RESP: the CL.* commands, their errors, and that they are the same
 * operations as the routes (a reservation made over RESP settles over
 * HTTP). */
static void test_resp_forms(void **state)
{
    (void)state;
    assert_true(T.resp_port > 0);
    buf_t cmds = { 0 };
    mb(&cmds, "CL.RESERVE", "rk", "9", "10", "60", "8", "TTL", "30", "ONEXPIRY", "refund", NULL);
    buf_t out = exchange(T.resp_port, cmds.p, cmds.len);
    char id[32] = "";
    int n = 0;
    assert_int_equal(sscanf(out.p, "*6\r\n:0\r\n:10\r\n:2\r\n:-1\r\n:48\r\n$%d\r\n%31[0-9]", &n, id), 2);
    assert_int_equal((int)strlen(id), n);
    free(out.p);
    free(cmds.p);
    cmds = (buf_t){ 0 };
    mb(&cmds, "CL.PROBE", "rk", "9", "10", "60", "3", NULL);
    mb(&cmds, "CL.SETTLE", "rk", id, "3", NULL);
    mb(&cmds, "CL.SETTLE", "rk", id, "3", NULL);
    mb(&cmds, "CL.REFUND", "rk", "9", "10", "60", "2", NULL);
    mb(&cmds, "CL.REFUND", "rk", "9", "10", "60", "11", NULL);
    mb(&cmds, "CL.RESERVE", "rk", "9", "10", "60", "1", "TTL", "0", NULL);
    mb(&cmds, "CL.RESERVE", "rk", "9", "10", "60", "1", "FOO", "1", NULL);
    mb(&cmds, "CL.RESERVE", "rk", "9", "10", "60", NULL);
    mb(&cmds, "CL.SETTLE", "rk", id, "-1", NULL);
    mb(&cmds, "CL.PROBE", "rk", "9", "10", "60", NULL);
    out = exchange(T.resp_port, cmds.p, cmds.len);
    char want[1024];
    snprintf(want, sizeof(want),
             "*5\r\n:1\r\n:10\r\n:2\r\n:6\r\n:48\r\n"
             "*5\r\n:8\r\n:3\r\n:10\r\n:7\r\n:18\r\n"
             "-ERR key 'rk' has no pending reservation %s (never made, settled already, or past its deadline)\r\n"
             "*3\r\n:10\r\n:9\r\n:6\r\n"
             "-ERR 'quantity' 11 is more than the limiter's capacity (10)\r\n"
             "-Cell error: TTL must be between 1 and 604800 seconds\r\n"
             "-Cell error: unknown option FOO (TTL <seconds> or ONEXPIRY KEEP|REFUND)\r\n"
             "-Cell error: Usage: cl.reserve <key> <max_burst> <count per period> <period> <quantity> "
             "[TTL <seconds>] [ONEXPIRY KEEP|REFUND]\r\n"
             "-Cell error: actual must be >= 0\r\n"
             "*5\r\n:0\r\n:10\r\n:8\r\n:-1\r\n:12\r\n",
             id);
    if (strlen(want) != out.len || memcmp(want, out.p, out.len) != 0)
        fail_msg("RESP answered:\n%.*s\nwant:\n%s", (int)out.len, out.p, want);
    free(out.p);
    free(cmds.p);

    /* reserved over RESP, settled over HTTP */
    cmds = (buf_t){ 0 };
    mb(&cmds, "CL.RESERVE", "rk2", "9", "10", "60", "5", NULL);
    out = exchange(T.resp_port, cmds.p, cmds.len);
    assert_int_equal(sscanf(out.p, "*6\r\n:0\r\n:10\r\n:5\r\n:-1\r\n:30\r\n$%d\r\n%31[0-9]", &n, id), 2);
    free(out.p);
    free(cmds.p);
    char body[128];
    snprintf(body, sizeof(body), "{\"reservation\":\"%s\",\"actual\":1}", id);
    http_resp_t r = http(&T, "POST", "/throttle/rk2/settle", body, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "remaining"), 9);
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Expiry, restarts, threads                                                */
/* ------------------------------------------------------------------------ */

/* Effectively no refill (10^-6 token a second) and room for every test's
 * costs: remaining = capacity - what the acknowledged operations took. */
#define TB "\"algorithm\":\"token_bucket\",\"capacity\":1000000000,\"refill_rate\":0.000001"
/* A window of 73 years that started in 1970: remaining = max - count. */
#define SW "\"algorithm\":\"sliding_window\",\"max_count\":1000000000,\"period\":2305843009"
#define FW "\"algorithm\":\"fixed_window\",\"max_count\":1000000000,\"period\":2305843009"
#define CAP 1000000000LL

static const char *const ALGOS[] = { TB, SW, FW };
#define NALGOS 3

static void test_expiry_outcomes(void **state)
{
    (void)state;
    tally_proc_t p;
    static const char *const args[] = { "--fsync", "always", NULL };
    tally_start(&p, NULL, args);
    char body[512];
    for (int a = 0; a < NALGOS; a++)
        for (int refund = 0; refund < 2; refund++) {
            snprintf(body, sizeof(body), "{\"key\":\"exp%d%d\",%s,\"quantity\":70,\"reserve\":true,\"ttl\":1%s}", a,
                     refund, ALGOS[a], refund ? ",\"on_expiry\":\"refund\"" : "");
            http_resp_t r = http(&p, "POST", "/throttle", body, NULL);
            assert_status(&r, 200);
            assert_true(json_bool_of(&r, "allowed"));
            http_free(&r);
        }
    sleep_ms(1300);
    for (int round = 0; round < 2; round++) {
        for (int a = 0; a < NALGOS; a++)
            for (int refund = 0; refund < 2; refund++) {
                char key[16];
                snprintf(key, sizeof(key), "exp%d%d", a, refund);
                long long rem, reset;
                probe(&p, key, ALGOS[a], 0, &rem, &reset, NULL);
                if (rem != (refund ? CAP : CAP - 70))
                    fail_msg("round %d %s: remaining %lld", round, key, rem);
            }
        if (round == 0) {   /* the same after kill -9 and a replay of the journal */
            tally_kill(&p);
            tally_start(&p, p.dir, args);
        }
    }
    tally_cleanup(&p);
}

/* A policy's reservation defaults (reservation_ttl, on_expiry), which a
 * request's own fields replace; the policy's prefix on settle. */
static void test_policy_defaults(void **state)
{
    (void)state;
    char dir[256], cfg[300];
    tmpdir_make(dir, sizeof(dir));
    snprintf(cfg, sizeof(cfg), "%s/policies.json", dir);
    static const char policies[] =
        "{\"policies\": {\"llm\": {\"algorithm\": \"token_bucket\", \"capacity\": 100, \"refill_rate\": 0.000001,"
        " \"reservation_ttl\": 1, \"on_expiry\": \"refund\"}}}";
    file_write(cfg, policies, sizeof(policies) - 1);
    const char *args[] = { "--config", cfg, NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    http_resp_t r = http(&p, "POST", "/throttle", "{\"policy\":\"llm\",\"key\":\"a\",\"quantity\":40,\"reserve\":true}", NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "reservation_ttl"), 1);
    assert_int_equal(json_int_of(&r, "remaining"), 60);
    http_free(&r);
    r = http(&p, "POST", "/throttle",
             "{\"policy\":\"llm\",\"key\":\"b\",\"quantity\":40,\"reserve\":true,\"ttl\":600,\"on_expiry\":\"keep\"}", NULL);
    assert_int_equal(json_int_of(&r, "reservation_ttl"), 600);
    char id[32], body[128];
    reservation_of(&r, id, sizeof(id));
    http_free(&r);
    sleep_ms(1300);
    long long rem, reset;
    probe(&p, "a", "\"policy\":\"llm\"", 0, &rem, &reset, NULL);
    assert_int_equal(rem, 100);   /* expired and refunded */
    probe(&p, "b", "\"policy\":\"llm\"", 0, &rem, &reset, NULL);
    assert_int_equal(rem, 60);    /* still pending */
    snprintf(body, sizeof(body), "{\"reservation\":\"%s\",\"actual\":10}", id);
    r = http(&p, "POST", "/throttle/b/settle", body, NULL);   /* without the policy: another key */
    assert_error(&r, 404, "NOT_FOUND");
    http_free(&r);
    snprintf(body, sizeof(body), "{\"policy\":\"llm\",\"reservation\":\"%s\",\"actual\":10}", id);
    r = http(&p, "POST", "/throttle/b/settle", body, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "remaining"), 90);
    http_free(&r);
    tally_cleanup(&p);
    tmpdir_remove(dir);
}

#define THREADS 4
#define ROUNDS 120

typedef struct worker {
    const tally_proc_t *p;
    uint64_t seed;
    long long taken[NALGOS];           /* what the acknowledged operations took, per key */
    char pending[NALGOS][16][32];      /* reservations left unsettled, settled after the restart */
    long long pending_cost[NALGOS][16];
    int npending[NALGOS];
    int settles;
    char err[256];
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    rng_t rng;
    rng_seed(&rng, w->seed);
    char body[512];
    for (int i = 0; i < ROUNDS && !w->err[0]; i++) {
        int a = (int)(rng_next(&rng) % NALGOS);
        long long q = 1 + (long long)(rng_next(&rng) % 100);
        int op = (int)(rng_next(&rng) % 10);
        if (op < 8) {
            snprintf(body, sizeof(body), "{\"key\":\"conc%d\",%s,\"quantity\":%lld,\"reserve\":true,\"ttl\":3600}", a,
                     ALGOS[a], q);
            http_resp_t r = http(w->p, "POST", "/throttle", body, NULL);
            char id[32];
            reservation_of(&r, id, sizeof(id));
            if (r.status != 200 || !id[0]) {
                snprintf(w->err, sizeof(w->err), "reserve: %ld %s", r.status, r.body);
                http_free(&r);
                break;
            }
            http_free(&r);
            w->taken[a] += q;
            if (rng_next(&rng) % 5 == 0 && w->npending[a] < 16) {
                int k = w->npending[a]++;
                snprintf(w->pending[a][k], sizeof(w->pending[a][k]), "%s", id);
                w->pending_cost[a][k] = q;
                continue;
            }
            long long actual = (long long)(rng_next(&rng) % 150);
            snprintf(body, sizeof(body), "{\"reservation\":\"%s\",\"actual\":%lld}", id, actual);
            r = httpf(w->p, "POST", body, "/throttle/conc%d/settle", a);
            if (r.status != 200 || json_int_of(&r, "reserved") != q) {
                snprintf(w->err, sizeof(w->err), "settle: %ld %s", r.status, r.body);
                http_free(&r);
                break;
            }
            http_free(&r);
            w->taken[a] += actual - q;
            w->settles++;
        } else {
            snprintf(body, sizeof(body), "{%s,\"quantity\":%lld}", ALGOS[a], q);
            http_resp_t r = httpf(w->p, "POST", body, "/throttle/conc%d/refund", a);
            if (r.status != 200) {
                snprintf(w->err, sizeof(w->err), "refund: %ld %s", r.status, r.body);
                http_free(&r);
                break;
            }
            http_free(&r);
            w->taken[a] -= q;   /* never below zero here: every key holds far more (see below) */
        }
    }
    return NULL;
}

/* Threads reserve, settle and refund at once; every acknowledged operation
 * is in the model, which the state equals - live, and after kill -9 and a
 * restart (then the reservations left pending settle by their ids). */
static void test_concurrent_model_kill9(void **state)
{
    (void)state;
    tally_proc_t p;
    static const char *const args[] = { "--fsync", "always", NULL };
    tally_start(&p, NULL, args);
    /* a head start on every key, so that no refund goes below zero */
    char body[512];
    for (int a = 0; a < NALGOS; a++) {
        snprintf(body, sizeof(body), "{\"key\":\"conc%d\",%s,\"quantity\":100000}", a, ALGOS[a]);
        http_expect(&p, "POST", "/throttle", body, 200, NULL);
    }
    worker_t w[THREADS];
    pthread_t th[THREADS];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < THREADS; i++) {
        w[i].p = &p;
        w[i].seed = 77 + (uint64_t)i;
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    long long taken[NALGOS];
    int settles = 0;
    for (int a = 0; a < NALGOS; a++) {
        taken[a] = 100000;
        for (int i = 0; i < THREADS; i++)
            taken[a] += w[i].taken[a];
    }
    for (int i = 0; i < THREADS; i++) {
        if (w[i].err[0])
            fail_msg("worker %d: %s", i, w[i].err);
        settles += w[i].settles;
    }
    assert_true(settles > THREADS * ROUNDS / 3);
    for (int round = 0; round < 2; round++) {
        for (int a = 0; a < NALGOS; a++) {
            char key[16];
            snprintf(key, sizeof(key), "conc%d", a);
            long long rem, reset;
            probe(&p, key, ALGOS[a], 0, &rem, &reset, NULL);
            if (rem != CAP - taken[a])
                fail_msg("round %d, %s: remaining %lld, the model %lld", round, key, rem, CAP - taken[a]);
        }
        if (round == 0) {
            tally_kill(&p);
            tally_start(&p, p.dir, args);
        }
    }
    /* the reservations left pending survived: settle them at 0 */
    for (int i = 0; i < THREADS; i++)
        for (int a = 0; a < NALGOS; a++)
            for (int k = 0; k < w[i].npending[a]; k++) {
                snprintf(body, sizeof(body), "{\"reservation\":\"%s\",\"actual\":0}", w[i].pending[a][k]);
                http_resp_t r = httpf(&p, "POST", body, "/throttle/conc%d/settle", a);
                assert_status(&r, 200);
                assert_int_equal(json_int_of(&r, "reserved"), w[i].pending_cost[a][k]);
                http_free(&r);
                taken[a] -= w[i].pending_cost[a][k];
            }
    for (int a = 0; a < NALGOS; a++) {
        char key[16];
        snprintf(key, sizeof(key), "conc%d", a);
        long long rem, reset;
        probe(&p, key, ALGOS[a], 0, &rem, &reset, NULL);
        assert_int_equal(rem, CAP - taken[a]);
    }
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_forms),
        cmocka_unit_test(test_probe_headers),
        cmocka_unit_test(test_resp_forms),
        cmocka_unit_test(test_expiry_outcomes),
        cmocka_unit_test(test_policy_defaults),
        cmocka_unit_test(test_concurrent_model_kill9),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
