/*
 * ratelimit_micro.c - what each rate-limit algorithm costs, without the
 * network: nanoseconds of CPU time (this thread's, so other load on the
 * machine does not count) per decision
 *
 *   core    throttle_check + throttle_commit on one state per key
 *   handler the whole POST /throttle handler through api_dispatch (routing,
 *           JSON parsing, keyspace, answer), as the HTTP server calls it
 *
 * over 100 000 keys, one request per key every ~2 ms of simulated time.
 * Prints "name ns_per_op" lines for bench/suite_20_ratelimit.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/request.h"
#include "api/router.h"
#include "core/keyspace.h"
#include "core/throttle.h"
#include "service/clock.h"

#define KEYS 100000
#define OPS 2000000

static const struct {
    const char *name;
    const char *json;   /* request members after the key */
} algos[] = {
    { "gcra", "\"max_burst\":15,\"count_per_period\":30,\"period\":60" },
    { "sliding_log", "\"algorithm\":\"sliding_log\",\"max_count\":100,\"period\":60" },
    { "sliding_window", "\"algorithm\":\"sliding_window\",\"max_count\":100,\"period\":60" },
    { "fixed_window", "\"algorithm\":\"fixed_window\",\"max_count\":100,\"period\":60" },
    { "token_bucket", "\"algorithm\":\"token_bucket\",\"capacity\":100,\"refill_rate\":1.5" },
};

static throttle_params_t params_of(int a)
{
    throttle_params_t p;
    memset(&p, 0, sizeof(p));
    p.algo = (throttle_algo_t)(a + 1);
    switch (p.algo) {
    case THROTTLE_GCRA: p.u.gcra = (gcra_params_t){ 15, 30, 60 * NS_PER_SEC }; break;
    case THROTTLE_SLIDING_LOG: p.u.log = (slog_params_t){ 100, 60 * NS_PER_SEC }; break;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW: p.u.win = (window_params_t){ 100, 60 * NS_PER_SEC }; break;
    case THROTTLE_TOKEN_BUCKET: p.u.tb = (tbucket_params_t){ 100, 1500000 }; break;
    }
    return p;
}

static const char *no_header(void *h, const char *n)
{
    (void)h;
    (void)n;
    return NULL;
}

int main(void)
{
    uint64_t x = 88172645463325252ULL;
    for (int a = 0; a < 5; a++) {
        /* core */
        throttle_params_t p = params_of(a);
        throttle_t **states = calloc(KEYS, sizeof(*states));
        int64_t now = 1700000000LL * NS_PER_SEC;
        double t0 = (double)clock_thread_cpu_ns();
        for (int i = 0; i < OPS; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t k = x % KEYS;
            now += 20000;   /* 50 000 decisions per simulated second */
            rl_result_t r;
            int64_t exp;
            if (throttle_check(states[k], &p, now, 1, &r))
                throttle_commit(&states[k], &p, now, 1, &exp);
        }
        double core = ((double)clock_thread_cpu_ns() - t0) / OPS;
        for (int k = 0; k < KEYS; k++)
            throttle_free(states[k]);
        free(states);

        /* handler */
        api_server_t srv;
        memset(&srv, 0, sizeof(srv));
        srv.ks = ks_create(8, 1);
        /* bodies built beforehand: only the handler is timed */
        enum { NBODIES = 65536 };
        char *bodies = malloc((size_t)NBODIES * 128);
        int *lens = malloc(NBODIES * sizeof(int));
        for (int i = 0; i < NBODIES; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            lens[i] = snprintf(bodies + (size_t)i * 128, 128, "{\"key\":\"user:%llu\",%s}",
                               (unsigned long long)(x % KEYS), algos[a].json);
        }
        int n = OPS / 4;
        now = 1700000000LL * NS_PER_SEC;
        double h0 = (double)clock_thread_cpu_ns();
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t b = x % NBODIES;
            api_req_t req;
            now += 20000;
            api_req_init(&req, API_POST, "/throttle", 9, now);
            req.ctype = "application/json";
            req.body = (const uint8_t *)bodies + b * 128;
            req.body_len = (size_t)lens[b];
            req.header = no_header;
            api_resp_t resp;
            api_dispatch(&srv, &req, &resp);
            if (resp.status != 200) {
                fprintf(stderr, "%s: status %d %.*s\n", algos[a].name, resp.status, (int)resp.len, resp.body);
                return 1;
            }
            api_resp_release(&resp);
            api_req_release(&req);
        }
        double total = (double)clock_thread_cpu_ns() - h0;
        free(bodies);
        free(lens);
        ks_free(srv.ks);
        printf("core %s %.1f\n", algos[a].name, core);
        printf("handler %s %.1f\n", algos[a].name, total / n);
    }
    return 0;
}
