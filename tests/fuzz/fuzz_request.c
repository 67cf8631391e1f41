/*
 * fuzz_request.c - the whole request path below the socket: routing,
 * percent-decoding, query parsing, JSON bodies and every handler, against a
 * real keyspace.  Input layout: byte 0 = method (its top bit set: served by
 * generation 1's rules, as replaying a version-1 journal does - values it
 * creates keep them), then "path\nquery\nctype\n" and the rest is the body.
 * Several requests per input share the keyspace, separated by the byte 0xFF
 * 0x00.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/request.h"
#include "api/router.h"
#include "api/ratelimit.h"
#include "core/keyspace.h"
#include "core/types.h"

static api_server_t srv;

static const char *no_header(void *h, const char *n)
{
    (void)h;
    (void)n;
    return NULL;
}

static uint64_t fake_journal(void *ud, const journal_req_t *r)
{
    (void)ud;
    /* the canonical record must itself be encodable */
    wbuf_t b = WBUF_INIT;
    journalfmt_put_request(&b, r);
    wbuf_free(&b);
    return 1;
}

static void one(const uint8_t *d, size_t n, int64_t now_ns)
{
    if (n < 1)
        return;
    api_req_t req;
    static const api_method_t methods[] = { API_GET, API_POST, API_PUT, API_DELETE, API_PATCH, API_HEAD };
    api_req_init(&req, methods[(d[0] & 0x7f) % 6], "", 0, now_ns);
    req.gen = d[0] & 0x80 ? TALLY_GEN_1 : 0;
    const char *p = (const char *)d + 1, *end = (const char *)d + n;
    const char *fields[3] = { "", "", "" };
    size_t lens[3] = { 0, 0, 0 };
    for (int i = 0; i < 3; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return;
        fields[i] = p;
        lens[i] = (size_t)(nl - p);
        p = nl + 1;
    }
    char *path = strndup(fields[0], lens[0]);
    char *query = strndup(fields[1], lens[1]);
    char *ctype = strndup(fields[2], lens[2]);
    req.path = path;
    req.path_len = strlen(path);
    req.query = query;
    req.query_len = strlen(query);
    req.ctype = lens[2] ? ctype : NULL;
    req.body = (const uint8_t *)p;
    req.body_len = (size_t)(end - p);
    req.header = no_header;
    api_resp_t resp;
    api_dispatch(&srv, &req, &resp);
    if (resp.status < 100 || resp.status > 599)
        abort();
    api_resp_release(&resp);
    api_req_release(&req);
    free(path);
    free(query);
    free(ctype);
}

/* Frees the keyspace the inputs shared.  Its tables hold entries through
 * tagged addresses (core/keyspace.c), which LeakSanitizer does not take
 * for pointers, so the keyspace is freed before its check at exit (an
 * atexit handler registered after the sanitizer's runs before it). */
static void teardown(void)
{
    ks_free(srv.ks);
    srv.ks = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv.ks) {
        static bool registered;
        if (!registered && atexit(teardown) == 0)
            registered = true;
        srv.ks = ks_create(2, 42);
        /* a limit, so that a SETBIT at offset 2^32-1 is refused (507), not a 512 MiB allocation;
         * and the limits per request, small enough that inputs reach them */
        ks_set_maxmemory(srv.ks, 64u << 20, KS_ALLKEYS_LRU);
        srv.limits = (api_limits_t){ 8u << 20, 1u << 20 };
        srv.hooks.journal = fake_journal;
        /* policies reachable without headers: literal and {path} keys */
        static const char policies[] =
            "{\"policies\": {"
            "\"lit\": {\"algorithm\": \"sliding_log\", \"max_count\": 3, \"period\": 60, \"key\": \"all\"},"
            "\"path\": {\"algorithm\": \"token_bucket\", \"capacity\": 2, \"refill_rate\": 0.5, \"key\": \"{path}\","
            " \"deny_status\": 403},"
            "\"sh\": {\"algorithm\": \"sliding_window\", \"max_count\": 1, \"period\": 1, \"key\": \"{method}{path}\","
            " \"shadow\": true, \"prefix\": \"\"},"
            "\"hdr\": {\"algorithm\": \"fixed_window\", \"max_count\": 2, \"period\": 10, \"key\": \"{header:X-K}\"},"
            "\"cal\": {\"algorithm\": \"fixed_window\", \"max_count\": 2, \"calendar\": \"week\", \"week_start\": \"sunday\","
            " \"time_zone\": \"Asia/Kathmandu\", \"key\": \"{path}\"}}}";
        size_t n;
        char err[256];
        srv.policies = api_policies_create();
        if (!srv.policies || !api_policies_load(srv.policies, policies, sizeof(policies) - 1, &n, err, sizeof(err)))
            abort();
    }
    int64_t now = 1700000000LL * 1000000000LL;
    size_t start = 0;
    for (size_t i = 0; i + 1 < size; i++) {
        if (data[i] == 0xFF && data[i + 1] == 0x00) {
            one(data + start, i - start, now);
            now += 250000000;
            start = i + 2;
        }
    }
    one(data + start, size - start, now);
    /* keep the keyspace small across inputs */
    if (ks_total_keys(srv.ks) > 10000) {
        ks_free(srv.ks);
        srv.ks = ks_create(2, 42);
        ks_set_maxmemory(srv.ks, 64u << 20, KS_ALLKEYS_LRU);
    }
    return 0;
}
