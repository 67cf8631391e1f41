/*
 * auth_micro.c - what authentication costs a request, without the network:
 * CPU time of this thread (other load on the machine does not count) per
 * POST /throttle through api_dispatch, as the HTTP server calls it, without
 * tokens and with a bearer token (a set of 100 tokens, the key's prefix
 * checked).  Three alternating rounds, the fastest of each kept.  Prints
 * "name ns_per_request" lines for bench/suite_15_auth.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/request.h"
#include "api/router.h"
#include "api/auth.h"
#include "core/keyspace.h"
#include "service/clock.h"

#define KEYS 100000
#define OPS 300000
#define TOKEN "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1u"

static const char *header_of(void *h, const char *name)
{
    (void)h;
    return strcmp(name, "Authorization") == 0 ? "Bearer " TOKEN : NULL;
}

static const char *ip_of(void *h)
{
    (void)h;
    return "127.0.0.1";
}

/* ns per request of OPS decisions over KEYS keys. */
static double run(api_auth_t *auth)
{
    api_server_t srv;
    memset(&srv, 0, sizeof(srv));
    srv.ks = ks_create(8, 1);
    srv.auth = auth;
    uint64_t x = 88172645463325252ULL;
    int64_t now = 1700000000LL * 1000000000LL;
    char body[128];
    double t0 = (double)clock_thread_cpu_ns();
    for (int i = 0; i < OPS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int len = snprintf(body, sizeof(body), "{\"key\":\"user:%llu\",\"max_burst\":15,\"count_per_period\":30,"
                           "\"period\":60}", (unsigned long long)(x % KEYS));
        api_req_t req;
        now += 20000;
        api_req_init(&req, API_POST, "/throttle", 9, now);
        req.ctype = "application/json";
        req.body = (const uint8_t *)body;
        req.body_len = (size_t)len;
        req.header = header_of;
        req.client_ip = ip_of;
        api_resp_t resp;
        api_dispatch(&srv, &req, &resp);
        if (resp.status != 200) {
            fprintf(stderr, "auth_micro: status %d %.*s\n", resp.status, (int)resp.len, resp.body);
            exit(1);
        }
        api_resp_release(&resp);
        api_req_release(&req);
    }
    double t = ((double)clock_thread_cpu_ns() - t0) / OPS;
    ks_free(srv.ks);
    return t;
}

int main(void)
{
    /* 99 other tokens, then the one the requests carry */
    size_t cap = 200 * 200, used = 0;
    char *text = malloc(cap);
    used += (size_t)snprintf(text + used, cap - used, "{\"tokens\":[");
    for (int i = 0; i < 100; i++) {
        char value[32], hex[2 * API_TOKEN_SHA256_LEN + 1];
        snprintf(value, sizeof(value), "other-%d", i);
        api_token_hash_hex(i < 99 ? value : TOKEN, strlen(i < 99 ? value : TOKEN), hex);
        used += (size_t)snprintf(text + used, cap - used,
                                 "%s{\"name\":\"t%d\",\"sha256\":\"%s\",\"scopes\":[\"%s\"]%s}", i ? "," : "", i, hex,
                                 i < 99 ? "read" : "ratelimit", i < 99 ? "" : ",\"prefixes\":[\"user:\"]");
    }
    used += (size_t)snprintf(text + used, cap - used, "]}");
    char err[600];
    api_tokens_t *t = api_tokens_parse(text, used, err, sizeof(err));
    free(text);
    if (!t) {
        fprintf(stderr, "auth_micro: %s\n", err);
        return 1;
    }
    api_auth_t *auth = api_auth_create(10, false);
    api_auth_install(auth, t);
    double open = 1e18, with = 1e18;
    for (int round = 0; round < 3; round++) {
        double a = run(NULL), b = run(auth);
        open = a < open ? a : open;
        with = b < with ? b : with;
    }
    api_auth_free(auth);
    printf("handler_open %.1f\n", open);
    printf("handler_token %.1f\n", with);
    return 0;
}
