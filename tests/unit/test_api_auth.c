/*
 * test_api_auth.c - api/auth.c in process: the token file parser (every
 * refusal names its member; hashes, scopes, prefixes), the hash against
 * known SHA-256 vectors, every route of the table classified, and the
 * router's answers with tokens - 401 (WWW-Authenticate), 403 naming the
 * scope or the key, 429 after the failures allowed a minute, prefixes on
 * path and body keys - on an in-process server with no socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/request.h"
#include "api/route.h"
#include "api/router.h"
#include "api/auth.h"

/* FIPS 180-2's "abc" and the empty string. */
static void test_hash_vectors(void **state)
{
    (void)state;
    char hex[65];
    api_token_hash_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    api_token_hash_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static api_tokens_t *parse(const char *text, char *err)
{
    err[0] = '\0';
    return api_tokens_parse(text, strlen(text), err, 600);
}

#define ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define EMPTY "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"

static void test_parse_good(void **state)
{
    (void)state;
    char err[600];
    api_tokens_t *t = parse("{\"tokens\":[{\"name\":\"gw\",\"sha256\":\"" ABC "\",\"scopes\":[\"ratelimit\"],"
                            "\"prefixes\":[\"api:\",\"web:\"]},"
                            "{\"name\":\"ops.team@x\",\"sha256\":\"" EMPTY "\",\"scopes\":[\"read\",\"admin\"]}]}",
                            err);
    assert_non_null(t);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->v[0].name, "gw");
    assert_int_equal(t->v[0].scopes, API_SCOPE_RATELIMIT);
    assert_int_equal(t->v[0].nprefixes, 2);
    assert_string_equal(t->v[0].prefixes[1], "web:");
    assert_int_equal(t->v[0].sha256[0], 0xba);
    assert_int_equal(t->v[1].scopes, API_SCOPE_READ | API_SCOPE_ADMIN);
    assert_int_equal(t->v[1].nprefixes, 0);
    assert_int_equal(t->v[1].sha256[0], 0xe3);   /* upper-case hex reads too */
    api_tokens_release(t);
    /* replicate is a scope of its own: admin neither includes it nor is included */
    t = parse("{\"tokens\":[{\"name\":\"rep\",\"sha256\":\"" ABC "\",\"scopes\":[\"replicate\"]}]}", err);
    assert_non_null(t);
    assert_int_equal(t->v[0].scopes, API_SCOPE_REPLICATE);
    api_tokens_release(t);
    assert_int_equal(api_access_scopes(API_ACCESS_REPLICATE), API_SCOPE_REPLICATE);
    assert_int_equal(api_access_scopes(API_ACCESS_ADMIN), API_SCOPE_ADMIN);
    assert_string_equal(api_access_name(API_ACCESS_REPLICATE), "replicate");
    /* no tokens at all - everything but the probes refused, admin included -
     * only when the file says it means it */
    assert_null(parse("{\"tokens\":[]}", err));
    assert_non_null(strstr(err, "deny_all"));
    t = parse("{\"tokens\":[],\"deny_all\":true}", err);
    assert_non_null(t);
    assert_int_equal(t->n, 0);
    api_tokens_release(t);
    assert_null(parse("{\"tokens\":[],\"deny_all\":false}", err));
}

static void test_parse_refused(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *names;
    } bad[] = {
        { "", "line 1" },
        { "[]", "one member, \"tokens\"" },
        { "{\"tokens\":{}}", "one member, \"tokens\"" },
        { "{\"tokens\":[],\"x\":1}", "one member" },
        { "{\"tokens\":[1]}", "tokens[0]: must be an object" },
        { "{\"tokens\":[{\"sha256\":\"" ABC "\",\"scopes\":[\"read\"]}]}", "tokens[0].name: is required" },
        { "{\"tokens\":[{\"name\":\"a b\",\"sha256\":\"" ABC "\",\"scopes\":[\"read\"]}]}", "tokens[0].name" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"abc\",\"scopes\":[\"read\"]}]}", "tokens[0].sha256" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"" ABC "\"}]}", "tokens[0].scopes: is required" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"" ABC "\",\"scopes\":[]}]}", "tokens[0].scopes" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"" ABC "\",\"scopes\":[\"wirte\"]}]}",
          "tokens[0].scopes[0]: \"wirte\" is not a scope" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"" ABC "\",\"scopes\":[\"read\",\"read\"]}]}", "listed twice" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"" ABC "\",\"scopes\":[\"read\"],\"prefixes\":[]}]}",
          "tokens[0].prefixes" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"" ABC "\",\"scopes\":[\"read\"],\"prefixes\":[\"\"]}]}",
          "tokens[0].prefixes[0]" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"" ABC "\",\"scopes\":[\"read\"],\"token\":\"x\"}]}",
          "unknown member \"token\"" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"" ABC "\",\"scopes\":[\"read\"]},"
          "{\"name\":\"a\",\"sha256\":\"" EMPTY "\",\"scopes\":[\"read\"]}]}", "tokens[1].name: \"a\" is also" },
        { "{\"tokens\":[{\"name\":\"a\",\"sha256\":\"" ABC "\",\"scopes\":[\"read\"]},"
          "{\"name\":\"b\",\"sha256\":\"" ABC "\",\"scopes\":[\"read\"]}]}", "tokens[1].sha256: the same token" },
        { "{\"tokens\":[],\"tokens\":[]}", "duplicate" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[600];
        api_tokens_t *t = parse(bad[i].text, err);
        if (t || !strstr(err, bad[i].names))
            fail_msg("%s: %s (want a refusal naming %s)", bad[i].text, t ? "accepted" : err, bad[i].names);
    }
}

/* Every route names an access class; the probes are public, the admin
 * routes admin, and no GET but a rate-limit decision (a lease's gateway
 * acquire is one), what a replica asks
 * its primary (every key and every change, whatever a token's prefixes:
 * replicate, which admin does not grant) and a policy's live overrides
 * (operating the policies: admin) needs more than read. */
static void test_every_route_classified(void **state)
{
    (void)state;
    size_t n = api_route_count();
    assert_true(n > 50);
    for (size_t i = 0; i < n; i++) {
        api_route_meta_t m = api_route_meta(i);
        if (m.access == API_ACCESS_UNSET || m.access >= API_ACCESS__COUNT)
            fail_msg("%s %s has no access class", m.method, m.pattern);
        bool probe = !strcmp(m.pattern, "/healthz") || !strcmp(m.pattern, "/readyz");
        assert_int_equal(probe, m.access == API_ACCESS_PUBLIC);
        if (!strncmp(m.pattern, "/admin/", 7))
            assert_int_equal(m.access, API_ACCESS_ADMIN);
        if (!strncmp(m.pattern, "/policies/", 10))
            assert_int_equal(m.access, API_ACCESS_ADMIN);
        else if (!strncmp(m.pattern, "/replication/", 13))
            assert_int_equal(m.access, API_ACCESS_REPLICATE);
        else if (!strcmp(m.method, "GET") && m.access != API_ACCESS_READ && strncmp(m.pattern, "/throttle/", 10) != 0 &&
                 strcmp(m.pattern, "/lease/{key}/acquire") != 0)
            assert_true(m.access == API_ACCESS_PUBLIC || m.access == API_ACCESS_TOKEN ||
                        m.access == API_ACCESS_METRICS);
        if (m.access == API_ACCESS_READ)
            assert_true(!strcmp(m.method, "GET") || !strcmp(m.method, "POST"));
    }
}

/* ------------------------------------------------------------------------ */
/* The router with tokens                                                   */
/* ------------------------------------------------------------------------ */

static const char *auth_header;

static const char *header_of(void *h, const char *name)
{
    (void)h;
    return strcasecmp(name, "Authorization") == 0 ? auth_header : NULL;
}

static const char *ip_of(void *h)
{
    (void)h;
    return "192.0.2.9";
}

static int serve(api_server_t *srv, const char *auth, api_method_t m, const char *path, const char *body,
                 int64_t now_ns, api_resp_t *resp)
{
    api_req_t req;
    auth_header = auth;
    api_req_init(&req, m, path, strlen(path), now_ns);
    req.header = header_of;
    req.client_ip = ip_of;
    req.body = (const uint8_t *)body;
    req.body_len = body ? strlen(body) : 0;
    req.ctype = body ? "application/json" : NULL;
    api_dispatch(srv, &req, resp);
    api_req_release(&req);
    return resp->status;
}

static bool has_header(const api_resp_t *r, const char *name, const char *part)
{
    for (int i = 0; i < r->nheaders; i++)
        if (!strcmp(r->headers[i].name, name) && strstr(r->headers[i].value, part))
            return true;
    return false;
}

static void test_router(void **state)
{
    (void)state;
    api_server_t srv = { 0 };
    srv.ks = ks_create(4, 1);
    srv.auth = api_auth_create(2, false);
    char text[1024], h1[65], h2[65];
    api_token_hash_hex("r-tok", 5, h1);
    api_token_hash_hex("w-tok", 5, h2);
    snprintf(text, sizeof(text),
             "{\"tokens\":[{\"name\":\"r\",\"sha256\":\"%s\",\"scopes\":[\"read\"]},"
             "{\"name\":\"w\",\"sha256\":\"%s\",\"scopes\":[\"write\"],\"prefixes\":[\"a:\"]}]}",
             h1, h2);
    char err[600];
    api_tokens_t *t = api_tokens_parse(text, strlen(text), err, sizeof(err));
    assert_non_null(t);
    api_auth_install(srv.auth, t);
    api_resp_t r;
    int64_t now = INT64_C(1700000000) * 1000000000;

    assert_int_equal(serve(&srv, NULL, API_GET, "/healthz", NULL, now, &r), 200);
    api_resp_release(&r);
    assert_int_equal(serve(&srv, NULL, API_GET, "/counter/a:x", NULL, now, &r), 401);
    assert_true(has_header(&r, "WWW-Authenticate", "Bearer"));
    assert_string_equal(r.token_name, "");
    api_resp_release(&r);
    assert_int_equal(serve(&srv, "Bearer r-tok", API_POST, "/counter/a:x", "{}", now, &r), 403);
    assert_non_null(strstr(r.body, "lacks scope write"));
    assert_true(has_header(&r, "WWW-Authenticate", "insufficient_scope"));
    assert_string_equal(r.token_name, "r");
    api_resp_release(&r);
    assert_int_equal(serve(&srv, "bearer   w-tok ", API_POST, "/counter/a:x", "{}", now, &r), 200);
    api_resp_release(&r);
    assert_int_equal(serve(&srv, "Bearer w-tok", API_POST, "/counter/b:x", "{}", now, &r), 403);
    assert_non_null(strstr(r.body, "key \\\"b:x\\\" is outside the prefixes of token \\\"w\\\""));
    api_resp_release(&r);
    assert_int_equal(serve(&srv, "Bearer w-tok", API_POST, "/throttle",
                           "{\"key\":\"b:t\",\"algorithm\":\"fixed_window\",\"max_count\":1,\"period\":1}", now, &r),
                     403);
    api_resp_release(&r);
    assert_int_equal(ks_total_keys(srv.ks), 1);   /* the refused requests made nothing */
    assert_int_equal(serve(&srv, "Bearer r-tok", API_GET, "/counter/a:x", NULL, now, &r), 200);
    api_resp_release(&r);
    /* a malformed header is a failed attempt; two a minute here, then 429 */
    assert_int_equal(serve(&srv, "Basic abc", API_GET, "/counter/a:x", NULL, now, &r), 401);
    assert_true(has_header(&r, "WWW-Authenticate", "invalid_token"));
    api_resp_release(&r);
    assert_int_equal(serve(&srv, "Bearer nope", API_GET, "/counter/a:x", NULL, now, &r), 401);
    api_resp_release(&r);
    assert_int_equal(serve(&srv, "Bearer nope", API_GET, "/counter/a:x", NULL, now, &r), 429);
    assert_true(has_header(&r, "Retry-After", ""));
    api_resp_release(&r);
    /* a valid token is never held off for the address's failures */
    assert_int_equal(serve(&srv, "Bearer r-tok", API_GET, "/counter/a:x", NULL, now, &r), 200);
    api_resp_release(&r);
    assert_int_equal(serve(&srv, NULL, API_GET, "/readyz", NULL, now, &r), 200);
    api_resp_release(&r);
    /* two periods later the address may try again */
    assert_int_equal(serve(&srv, "Bearer nope", API_GET, "/counter/a:x", NULL, now + INT64_C(120000000000), &r),
                     401);
    api_resp_release(&r);
    api_auth_free(srv.auth);
    ks_free(srv.ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_vectors),
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_refused),
        cmocka_unit_test(test_every_route_classified),
        cmocka_unit_test(test_router),
    };
    return cmocka_run_group_tests_name("tokens and access classes (api/auth.c)", tests, NULL, NULL);
}
