/*
 * it_auth.c - tokens, scopes and key prefixes (--tokens) on a real tallyd:
 *
 *   - the scope x route matrix, generated from `tallyd --routes` (every route
 *     with its access class): each route asked with no token, an unknown
 *     token and a token of each scope; refused requests (401/403) change
 *     nothing - the journal and the key listing are byte for byte the same
 *     after all of them;
 *   - prefixes on every form of key a request can carry: path, body `key`,
 *     multi-limit `requests`, `sources` (BITOP, CMS, T-Digest, HLL merges),
 *     BITOP's destination, `union`, policy-resolved keys in /hook and in a
 *     key-less /throttle; GET /keys lists only keys under them;
 *   - the replicate scope, apart from admin: a replica's token polls the
 *     stream and nothing else, an admin token cannot poll, and a poll of a
 *     newer epoch (409) leaves a standalone primary taking changes;
 *   - /info without the data directory for non-admin tokens; /metrics and
 *     --metrics-public;
 *   - reload on SIGHUP and POST /admin/reload (a bad file keeps the old set);
 *   - the access log (token name, never its value or a body);
 *   - 429 after --auth-fail-limit unknown tokens a minute;
 *   - no start on a non-loopback --bind without --tokens (unless
 *     --insecure-no-auth); `tallyd --hash-token`.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/auth.h"
#include "tests/integration/harness.h"

static char cfgdir[256];

/* Writes a whole file; false (errno set) when it could not. */
static bool file_put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static void write_file(const char *path, const char *text)
{
    if (!file_put(path, text))
        fail_msg("writing %s: %s", path, strerror(errno));
}

/* A token entry for the file: its hash computed as tallyd does. */
static void token_entry(char *out, size_t n, const char *name, const char *value, const char *scopes,
                        const char *prefixes)
{
    char hex[2 * API_TOKEN_SHA256_LEN + 1];
    api_token_hash_hex(value, strlen(value), hex);
    snprintf(out, n, "{\"name\":\"%s\",\"sha256\":\"%s\",\"scopes\":[%s]%s%s%s}", name, hex, scopes,
             prefixes ? ",\"prefixes\":[" : "", prefixes ? prefixes : "", prefixes ? "]" : "");
}

/* The token file used by most tests: one token per scope, one with
 * prefixes for data and one with prefixes for rate limits. */
static void write_tokens(const char *path)
{
    char t[8][400], text[4096];
    token_entry(t[0], sizeof(t[0]), "reader", "read-secret", "\"read\"", NULL);
    token_entry(t[1], sizeof(t[1]), "writer", "write-secret", "\"write\"", NULL);
    token_entry(t[2], sizeof(t[2]), "gateway", "ratelimit-secret", "\"ratelimit\"", NULL);
    token_entry(t[3], sizeof(t[3]), "root", "admin-secret", "\"admin\"", NULL);
    token_entry(t[4], sizeof(t[4]), "tenant", "tenant-secret", "\"read\",\"write\"", "\"t:\"");
    token_entry(t[5], sizeof(t[5]), "tenant-gw", "tenant-gw-secret", "\"ratelimit\"", "\"t:\",\"u:\"");
    token_entry(t[6], sizeof(t[6]), "all", "all-secret", "\"read\",\"write\",\"admin\"", NULL);
    token_entry(t[7], sizeof(t[7]), "replica", "replicate-secret", "\"replicate\"", NULL);
    snprintf(text, sizeof(text), "{\"tokens\":[%s,%s,%s,%s,%s,%s,%s,%s]}", t[0], t[1], t[2], t[3], t[4], t[5], t[6],
             t[7]);
    write_file(path, text);
}

static const char POLICIES[] =
    "{\"policies\": {\n"
    "  \"in\": {\"algorithm\": \"fixed_window\", \"max_count\": 100, \"period\": 60,\n"
    "          \"key\": \"{header:X-User}\", \"prefix\": \"t:\"},\n"
    "  \"out\": {\"algorithm\": \"fixed_window\", \"max_count\": 100, \"period\": 60,\n"
    "           \"key\": \"{header:X-User}\", \"prefix\": \"v:\"},\n"
    "  \"ipin\": {\"algorithm\": \"fixed_window\", \"max_count\": 100, \"period\": 60, \"key\": \"{ip}\", \"prefix\": \"u:\"},\n"
    "  \"ipout\": {\"algorithm\": \"fixed_window\", \"max_count\": 100, \"period\": 60, \"key\": \"{ip}\"}\n"
    "}}\n";

/* The token file of write_tokens, written in the test's directory. */
static const char *tokens_file(void)
{
    static char path[400];
    snprintf(path, sizeof(path), "%s/tokens.json", cfgdir);
    write_tokens(path);
    return path;
}

/* A tallyd with the test's token and policy files, every change fsynced
 * before it is answered (so the journal on disk is the whole state), and
 * the failed-authentication limit given. */
static void start_with_files(tally_proc_t *p, const char *fail_limit)
{
    static char cfg[400];
    snprintf(cfg, sizeof(cfg), "%s/policies.json", cfgdir);
    write_file(cfg, POLICIES);
    const char *args[] = { "--tokens", tokens_file(), "--config", cfg, "--fsync", "always", "--auth-fail-limit", fail_limit,
                           NULL };
    tally_start(p, NULL, args);
}

/* A request with a bearer token (NULL: none) and optional extra header. */
static http_resp_t req_typed_as(const tally_proc_t *p, const char *token, const char *method, const char *path,
                                const char *body, const char *ctype, const char *extra)
{
    char auth[256];
    const char *h[3] = { NULL, NULL, NULL };
    int n = 0;
    if (token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        h[n++] = auth;
    }
    if (extra)
        h[n++] = extra;
    return http_h(p, method, path, body, ctype, h);
}

static http_resp_t req_as(const tally_proc_t *p, const char *token, const char *method, const char *path,
                          const char *body, const char *extra)
{
    return req_typed_as(p, token, method, path, body, NULL, extra);
}

static long status_as(const tally_proc_t *p, const char *token, const char *method, const char *path,
                      const char *body)
{
    http_resp_t r = req_as(p, token, method, path, body, NULL);
    long s = r.status;
    http_free(&r);
    return s;
}

/* Every journal and snapshot byte of a data directory, names included. */
static char *state_bytes(const char *dir, size_t *len)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    char *names[64];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 64)
        if (strncmp(de->d_name, "journal.", 8) == 0 || strncmp(de->d_name, "snapshot", 8) == 0)
            names[n++] = strdup(de->d_name);
    closedir(d);
    for (int i = 0; i < n; i++)   /* readdir's order is arbitrary */
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[i], names[j]) > 0) {
                char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
    char *out = NULL;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        char path[600];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        size_t fl;
        char *f = file_read(path, &fl);
        size_t nl = strlen(names[i]);
        out = realloc(out, used + nl + fl + 1);
        memcpy(out + used, names[i], nl);
        memcpy(out + used + nl, f, fl);
        used += nl + fl;
        free(f);
        free(names[i]);
    }
    *len = used;
    return out;
}

/* The whole key listing as the all-powerful token sees it. */
static char *keys_listing(const tally_proc_t *p)
{
    http_resp_t r = req_as(p, "all-secret", "GET", "/keys?limit=10000", NULL, NULL);
    assert_status(&r, 200);
    char *s = strdup(r.body);
    http_free(&r);
    return s;
}

/* What a refused request must leave alone: the files and the key listing. */
typedef struct state {
    char *files;
    size_t len;
    char *keys;
} state_t;

static void state_take(const tally_proc_t *p, state_t *s)
{
    s->files = state_bytes(p->dir, &s->len);
    s->keys = keys_listing(p);
}

static void state_free(state_t *s)
{
    free(s->files);
    free(s->keys);
}

/* Fails unless the server's files and keys are those of `before`. */
static void state_unchanged(const tally_proc_t *p, const state_t *before)
{
    state_t now;
    state_take(p, &now);
    assert_int_equal(before->len, now.len);
    assert_memory_equal(before->files, now.files, before->len);
    assert_string_equal(before->keys, now.keys);
    state_free(&now);
}

/* ------------------------------------------------------------------------ */
/* The scope x route matrix                                                 */
/* ------------------------------------------------------------------------ */

typedef struct route {
    char method[16];
    char pattern[128];
    char access[16];
    bool binary;                 /* its body is application/octet-stream */
} route_t;

static size_t routes_load(route_t *out, size_t max)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "%s --routes", getenv("TALLYD"));
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = 0;
    char line[512];
    while (n < max && fgets(line, sizeof(line), f)) {
        route_t *r = &out[n];
        char body[16] = "";
        int got = sscanf(line, "%15s %127s %15s %15s", r->method, r->pattern, r->access, body);
        r->binary = strcmp(body, "octet-stream") == 0;
        if (got < 3)
            fail_msg("tallyd --routes: no access class in '%s'", line);
        n++;
    }
    assert_int_equal(pclose(f), 0);
    return n;
}

/* A request for a route: its parameters filled in, GET for ANY, an empty
 * JSON object as the body of a POST, PUT or PATCH (bytes on a route that
 * takes octet-stream: `tallyd --routes` says which). */
static void route_request(const route_t *r, char *out, size_t n, const char **method, const char **body)
{
    *method = strcmp(r->method, "ANY") == 0 ? "GET" : r->method;
    *body = strcmp(*method, "GET") == 0 || strcmp(*method, "DELETE") == 0 ? NULL : "{}";
    size_t used = 0;
    for (const char *p = r->pattern; *p && used + 8 < n;) {
        if (*p == '{') {
            const char *end = strchr(p, '}');
            const char *fill = strncmp(p, "{key}", 5) == 0 ? "m:k" : strncmp(p, "{policy}", 8) == 0 ? "in" : "x";
            used += (size_t)snprintf(out + used, n - used, "%s", fill);
            p = end + 1;
        } else {
            out[used++] = *p++;
        }
    }
    out[used] = '\0';
}

static const struct {
    const char *token;
    const char *scope;
} scoped[] = {
    { "read-secret", "read" },
    { "write-secret", "write" },
    { "ratelimit-secret", "ratelimit" },
    { "admin-secret", "admin" },
    { "replicate-secret", "replicate" },
};

/* Whether a token of `scope` (NULL: no token) may call a route of `access`. */
static bool grants(const char *access, const char *scope)
{
    if (strcmp(access, "public") == 0)
        return true;
    if (!scope)
        return false;
    if (strcmp(access, "token") == 0 || strcmp(access, "metrics") == 0)
        return true;
    if (strcmp(access, "ratelimit") == 0)
        return strcmp(scope, "ratelimit") == 0 || strcmp(scope, "write") == 0;
    return strcmp(access, scope) == 0;
}

static void test_route_matrix(void **state)
{
    (void)state;
    tally_proc_t p;
    start_with_files(&p, "0");

    route_t routes[256];
    size_t n = routes_load(routes, 256);
    assert_true(n > 50);
    static const char *const classes[] = { "public",    "metrics", "token", "read",
                                           "write",     "ratelimit", "admin", "replicate" };
    for (size_t i = 0; i < n; i++) {
        bool known = false;
        for (size_t c = 0; c < sizeof(classes) / sizeof(classes[0]); c++)
            known |= strcmp(routes[i].access, classes[c]) == 0;
        if (!known)
            fail_msg("route %s %s has no access class (%s)", routes[i].method, routes[i].pattern, routes[i].access);
    }

    /* some state first, so that "nothing changed" means something */
    assert_int_equal(status_as(&p, "write-secret", "POST", "/counter/m:k", "{\"by\":5}"), 200);
    assert_int_equal(status_as(&p, "write-secret", "PUT", "/bloom/m:b", "{\"capacity\":100,\"error_rate\":0.01}"), 201);
    state_t before;
    state_take(&p, &before);

    /* every refused combination, then: nothing changed */
    int refused = 0;
    for (size_t i = 0; i < n; i++) {
        const route_t *r = &routes[i];
        const char *method, *body;
        char path[256];
        route_request(r, path, sizeof(path), &method, &body);
        const char *who[] = { NULL,           "not-a-token",   scoped[0].token, scoped[1].token,
                              scoped[2].token, scoped[3].token, scoped[4].token };
        for (size_t w = 0; w < sizeof(who) / sizeof(who[0]); w++) {
            const char *scope = w < 2 ? NULL : scoped[w - 2].scope;
            if (grants(r->access, scope))
                continue;
            http_resp_t resp = req_typed_as(&p, who[w], method, path, body,
                                            r->binary ? "application/octet-stream" : NULL, "X-User: a");
            long want = scope ? 403 : 401;
            if (resp.status != want)
                fail_msg("%s %s as %s: %ld, want %ld (%s)", method, path, who[w] ? who[w] : "nobody", resp.status,
                         want, resp.body);
            char h[256];
            assert_true(http_header(&resp, "WWW-Authenticate", h, sizeof(h)));
            assert_non_null(strstr(h, "Bearer"));
            if (scope)   /* the 403 names the scope missing */
                assert_non_null(strstr(resp.body, strcmp(r->access, "ratelimit") == 0 ? "ratelimit" : r->access));
            http_free(&resp);
            refused++;
        }
    }
    assert_true(refused > 200);
    state_unchanged(&p, &before);

    /* what a read token may do changes nothing either (its class says it reads) */
    for (size_t i = 0; i < n; i++) {
        const route_t *r = &routes[i];
        if (!grants(r->access, "read") || strcmp(r->access, "public") == 0)
            continue;
        const char *method, *body;
        char path[256];
        route_request(r, path, sizeof(path), &method, &body);
        long s = status_as(&p, "read-secret", method, path, body);
        if (s == 401 || s == 403)
            fail_msg("%s %s as reader: %ld", method, path, s);
    }
    state_unchanged(&p, &before);

    /* every granted combination passes authentication (the handler may then
     * refuse the empty request) */
    for (size_t i = 0; i < n; i++) {
        const route_t *r = &routes[i];
        const char *method, *body;
        char path[256];
        route_request(r, path, sizeof(path), &method, &body);
        for (size_t w = 0; w < sizeof(scoped) / sizeof(scoped[0]); w++) {
            if (!grants(r->access, scoped[w].scope))
                continue;
            http_resp_t resp = req_typed_as(&p, scoped[w].token, method, path, body,
                                            r->binary ? "application/octet-stream" : NULL, "X-User: a");
            if (resp.status == 401 || resp.status == 403)
                fail_msg("%s %s as %s: %ld (%s)", method, path, scoped[w].scope, resp.status, resp.body);
            http_free(&resp);
        }
    }
    state_free(&before);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* The replicate scope                                                      */
/* ------------------------------------------------------------------------ */

/* What a replica's token may do, and what an admin token may no longer do;
 * an epoch a caller sends never fences a node by itself. */
static void test_replicate_scope(void **state)
{
    (void)state;
    tally_proc_t p;
    start_with_files(&p, "0");
    const char *R = "replicate-secret", *A = "admin-secret", *W = "write-secret";
    assert_int_equal(status_as(&p, W, "POST", "/counter/k", "{\"by\":2}"), 200);

    /* a replicate token polls the stream and asks the epoch... */
    http_resp_t r = req_as(&p, R, "GET", "/replication/snapshot", NULL, NULL);
    assert_status(&r, 200);
    char run[64];
    assert_true(http_header(&r, "X-Tally-Repl-Run", run, sizeof(run)));
    http_free(&r);
    char path[256];
    snprintf(path, sizeof(path), "/replication/log?run=%s&from=0&id=r1&wait_ms=0", run);
    assert_int_equal(status_as(&p, R, "GET", path, NULL), 200);
    r = req_as(&p, R, "GET", "/replication/epoch?nonce=00112233445566778899aabbccddeeff", NULL, NULL);
    assert_status(&r, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "role")), "primary");
    char sig[128];
    assert_false(http_header(&r, "X-Tally-Peer-Signature", sig, sizeof(sig)));   /* no --peer-secret-file */
    http_free(&r);
    assert_int_equal(status_as(&p, R, "GET", "/replication/epoch?nonce=xyz", NULL), 400);
    /* ...and nothing else: no key read or written, no operation */
    static const char *const denied[][3] = {
        { "GET", "/counter/k", NULL },       { "POST", "/counter/k", "{\"by\":1}" }, { "GET", "/keys", NULL },
        { "GET", "/keys/k/dump", NULL },     { "DELETE", "/keys/k", NULL },         { "POST", "/admin/promote", NULL },
        { "POST", "/admin/snapshot", NULL }, { "POST", "/admin/replicate?primary=http://127.0.0.1:1", NULL },
    };
    for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
        r = req_as(&p, R, denied[i][0], denied[i][1], denied[i][2], NULL);
        if (r.status != 403)
            fail_msg("%s %s with a replicate token: %ld %s", denied[i][0], denied[i][1], r.status, r.body);
        http_free(&r);
    }
    /* an admin token cannot poll: admin does not grant replicate */
    static const char *const polls[] = { "/replication/snapshot", "/replication/epoch", "/replication/log" };
    for (size_t i = 0; i < sizeof(polls) / sizeof(polls[0]); i++) {
        r = req_as(&p, A, "GET", i == 2 ? path : polls[i], NULL, NULL);
        assert_status(&r, 403);
        assert_non_null(strstr(r.body, "lacks scope replicate"));
        http_free(&r);
    }

    /* a poll of a newer epoch is refused (409) and fences nothing: the
     * standalone primary keeps taking changes */
    assert_int_equal(status_as(&p, R, "GET", "/replication/snapshot?epoch=5", NULL), 409);
    snprintf(path, sizeof(path), "/replication/log?run=%s&from=0&id=r1&wait_ms=0&epoch=5", run);
    assert_int_equal(status_as(&p, R, "GET", path, NULL), 409);
    assert_int_equal(status_as(&p, R, "GET", "/replication/snapshot?epoch=9007199254740991", NULL), 409);
    /* epochs past 2^53 - 1 are not epochs */
    r = req_as(&p, R, "GET", "/replication/snapshot?epoch=9007199254740992", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    http_free(&r);
    snprintf(path, sizeof(path), "/replication/log?run=%s&from=0&id=r1&wait_ms=0&epoch=9223372036854775807", run);
    assert_int_equal(status_as(&p, R, "GET", path, NULL), 400);
    r = req_as(&p, R, "GET", "/replication/epoch", NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(r.json, "role")), "primary");
    assert_int_equal(json_int_of(&r, "epoch"), 0);
    http_free(&r);
    assert_int_equal(status_as(&p, W, "POST", "/counter/k", "{\"by\":3}"), 200);
    r = req_as(&p, "read-secret", "GET", "/counter/k", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "value"), 5);
    http_free(&r);
    assert_int_equal(status_as(&p, NULL, "GET", "/readyz?role=primary", NULL), 200);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Prefixes                                                                 */
/* ------------------------------------------------------------------------ */

static void expect_prefix_refusal(const tally_proc_t *p, const char *token, const char *method, const char *path,
                                  const char *body, const char *extra, const char *key)
{
    http_resp_t r = req_as(p, token, method, path, body, extra);
    if (r.status != 403 || !strstr(r.body, key) || !strstr(r.body, "outside the prefixes"))
        fail_msg("%s %s %s: %ld %s (want 403 naming %s)", method, path, body ? body : "", r.status, r.body, key);
    http_free(&r);
}

static void test_prefixes(void **state)
{
    (void)state;
    tally_proc_t p;
    start_with_files(&p, "10");
    const char *T = "tenant-secret", *G = "tenant-gw-secret";

    /* inside the prefix: served */
    assert_int_equal(status_as(&p, T, "POST", "/counter/t:a", "{\"by\":1}"), 200);
    assert_int_equal(status_as(&p, T, "POST", "/bits/t:b1/setbit", "{\"offset\":1,\"value\":1}"), 200);
    assert_int_equal(status_as(&p, T, "POST", "/uv/t:u1", "{\"items\":[\"a\"]}"), 200);
    assert_int_equal(status_as(&p, T, "PUT", "/cms/t:c1", "{\"width\":100,\"depth\":4}"), 201);
    assert_int_equal(status_as(&p, T, "PUT", "/tdigest/t:d1", "{}"), 201);
    /* outside keys, made by a token without prefixes */
    assert_int_equal(status_as(&p, "all-secret", "POST", "/counter/x:a", "{\"by\":1}"), 200);
    assert_int_equal(status_as(&p, "all-secret", "POST", "/bits/x:b", "{\"offset\":1,\"value\":1}") / 100, 4);
    assert_int_equal(status_as(&p, "all-secret", "POST", "/bits/x:b/setbit", "{\"offset\":1,\"value\":1}"), 200);
    assert_int_equal(status_as(&p, "all-secret", "POST", "/uv/x:u", "{\"items\":[\"a\"]}"), 200);
    assert_int_equal(status_as(&p, "all-secret", "PUT", "/cms/x:c", "{\"width\":100,\"depth\":4}"), 201);
    assert_int_equal(status_as(&p, "all-secret", "PUT", "/tdigest/x:d", "{}"), 201);

    state_t before;
    state_take(&p, &before);

    /* the path key */
    expect_prefix_refusal(&p, T, "GET", "/counter/x:a", NULL, NULL, "x:a");
    expect_prefix_refusal(&p, T, "POST", "/counter/x:a", "{\"by\":1}", NULL, "x:a");
    expect_prefix_refusal(&p, T, "DELETE", "/keys/x:a/ttl", NULL, NULL, "x:a");
    /* the body key and multi-limit requests (one key inside, one outside: nothing recorded) */
    const char *lim = "\"algorithm\":\"fixed_window\",\"max_count\":5,\"period\":60";
    char body[512];
    snprintf(body, sizeof(body), "{\"key\":\"x:l\",%s}", lim);
    expect_prefix_refusal(&p, G, "POST", "/throttle", body, NULL, "x:l");
    snprintf(body, sizeof(body), "{\"requests\":[{\"key\":\"t:l\",%s},{\"key\":\"x:l\",%s}]}", lim, lim);
    expect_prefix_refusal(&p, G, "POST", "/throttle", body, NULL, "x:l");
    expect_prefix_refusal(&p, G, "GET", "/throttle/x:l?algorithm=fixed_window&max_count=5&period=60", NULL, NULL,
                          "x:l");
    /* sources and destinations of BITOP, CMS, T-Digest and HLL merges, and HLL union */
    expect_prefix_refusal(&p, T, "POST", "/bits/t:dst/op", "{\"op\":\"or\",\"sources\":[\"t:b1\",\"x:b\"]}", NULL,
                          "x:b");
    expect_prefix_refusal(&p, T, "POST", "/bits/x:dst/op", "{\"op\":\"or\",\"sources\":[\"t:b1\"]}", NULL, "x:dst");
    expect_prefix_refusal(&p, T, "POST", "/cms/t:c1/merge", "{\"sources\":[\"x:c\"]}", NULL, "x:c");
    expect_prefix_refusal(&p, T, "POST", "/tdigest/t:d1/merge", "{\"sources\":[\"x:d\"]}", NULL, "x:d");
    expect_prefix_refusal(&p, T, "POST", "/uv/t:u1/merge", "{\"sources\":[\"x:u\"]}", NULL, "x:u");
    expect_prefix_refusal(&p, T, "GET", "/uv/t:u1?union=x:u", NULL, NULL, "x:u");
    expect_prefix_refusal(&p, T, "GET", "/geo/nearby?key=x:g&lon=0&lat=0&radius=1&unit=km", NULL, NULL, "x:g");
    expect_prefix_refusal(&p, T, "POST", "/geo/t:gs/store?source=x:g&lon=0&lat=0&radius=1&unit=km", NULL, NULL,
                          "x:g");
    expect_prefix_refusal(&p, T, "POST", "/geo/x:gs/store?source=t:g&lon=0&lat=0&radius=1&unit=km", NULL, NULL,
                          "x:gs");
    /* policy-resolved keys: the hook and a key-less /throttle */
    expect_prefix_refusal(&p, G, "GET", "/hook/out/anything", NULL, "X-User: a", "v:a");
    expect_prefix_refusal(&p, G, "POST", "/throttle", "{\"policy\":\"ipout\"}", NULL, "127.0.0.1");
    expect_prefix_refusal(&p, G, "POST", "/throttle", "{\"policy\":\"out\",\"key\":\"a\"}", NULL, "v:a");
    expect_prefix_refusal(&p, G, "GET", "/throttle/t:a?policy=out", NULL, NULL, "v:t:a");
    expect_prefix_refusal(&p, T, "DELETE", "/throttle/t:a?policy=out", NULL, NULL, "v:t:a");

    state_unchanged(&p, &before);
    state_free(&before);

    /* the same forms inside the prefixes are served */
    assert_int_equal(status_as(&p, G, "GET", "/hook/in/anything", NULL), 400);   /* no X-User: the template cannot key */
    http_resp_t r = req_as(&p, G, "GET", "/hook/in/anything", NULL, "X-User: hk");
    assert_status(&r, 200);
    http_free(&r);
    assert_int_equal(status_as(&p, G, "POST", "/throttle", "{\"policy\":\"ipin\"}"), 200);
    /* the path key of GET and DELETE /throttle/{key}?policy= is the policy's input: "alice" is t:alice */
    assert_int_equal(status_as(&p, G, "GET", "/throttle/alice?policy=in", NULL), 200);
    r = req_as(&p, T, "DELETE", "/throttle/alice?policy=in", NULL, NULL);
    assert_status(&r, 200);
    assert_true(json_bool_of(&r, "deleted"));
    http_free(&r);
    snprintf(body, sizeof(body), "{\"requests\":[{\"key\":\"t:l\",%s},{\"key\":\"u:l\",%s}]}", lim, lim);
    assert_int_equal(status_as(&p, G, "POST", "/throttle", body), 200);
    assert_int_equal(status_as(&p, T, "POST", "/bits/t:dst/op", "{\"op\":\"or\",\"sources\":[\"t:b1\"]}"), 200);
    assert_int_equal(status_as(&p, T, "GET", "/uv/t:u1?union=t:u2", NULL), 200);

    /* label queries see only the series under the prefixes; a sample whose
     * compaction rule writes outside them is refused whole */
    assert_int_equal(status_as(&p, T, "PUT", "/ts/t:s1", "{\"labels\":{\"g\":\"1\"}}"), 201);
    assert_int_equal(status_as(&p, "all-secret", "PUT", "/ts/x:s2", "{\"labels\":{\"g\":\"1\"}}"), 201);
    r = req_as(&p, T, "GET", "/mts/index?filter=g%3D1", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "keys")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(r.json, "keys"), 0)), "t:s1");
    http_free(&r);
    r = req_as(&p, "all-secret", "GET", "/mts/index?filter=g%3D1", NULL, NULL);
    assert_int_equal(json_array_size(json_object_get(r.json, "keys")), 2);
    http_free(&r);
    assert_int_equal(status_as(&p, "all-secret", "PUT", "/ts/x:dst", "{}"), 201);
    assert_int_equal(
        status_as(&p, "all-secret", "POST", "/ts/t:s1/rules", "{\"dest\":\"x:dst\",\"agg\":\"sum\",\"bucket_ms\":1000}"),
        201);
    expect_prefix_refusal(&p, T, "POST", "/ts/t:s1", "{\"samples\":[[1000,1]]}", NULL, "x:dst");
    r = req_as(&p, "all-secret", "GET", "/ts/t:s1", NULL, NULL);
    assert_int_equal(json_integer_value(json_object_get(r.json, "samples")), 0);
    http_free(&r);

    /* the listing shows only keys under the prefixes */
    r = req_as(&p, T, "GET", "/keys?limit=10000", NULL, NULL);
    assert_status(&r, 200);
    json_t *keys = json_object_get(r.json, "keys");
    assert_true(json_array_size(keys) >= 5);
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) {
        const char *name = json_string_value(json_object_get(k, "key"));
        if (strncmp(name, "t:", 2) != 0)
            fail_msg("GET /keys as tenant lists %s", name);
    }
    http_free(&r);
    char *all = keys_listing(&p);
    assert_non_null(strstr(all, "x:a"));
    free(all);
    tally_cleanup(&p);
}

/* The keyspace's memory use and limit from /info. */
static void memory_of(const tally_proc_t *p, long long *used, long long *max)
{
    http_resp_t r = req_as(p, "all-secret", "GET", "/info", NULL, NULL);
    assert_status(&r, 200);
    json_t *ks = json_object_get(r.json, "keyspace");
    *used = json_integer_value(json_object_get(ks, "memory_bytes"));
    *max = json_integer_value(json_object_get(ks, "maxmemory"));
    http_free(&r);
}

/* At --maxmemory with allkeys-lru, a write that needs room evicts before it runs; one the
 * token may not make is refused first, and evicts nothing: a sample whose
 * series' compaction rule writes outside the prefixes, and a rule whose
 * destination is outside them. */
/* What the write scope sees: the answer of a change (the value a counter
 * reaches, the bit SETBIT replaced), but not a read spelled as a write (a
 * counter moved by 0, a BITFIELD GET); and no key outside a token's
 * prefixes shows in a series' info (its rules' destinations, its source). */
static void test_write_scope_reads(void **state)
{
    (void)state;
    tally_proc_t p;
    start_with_files(&p, "0");
    const char *W = "write-secret";
    http_resp_t r = req_as(&p, W, "POST", "/counter/w:a", "{\"by\":2}", NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "value"), 2);
    http_free(&r);
    r = req_as(&p, W, "POST", "/counter/w:a", "{\"by\":0}", NULL);
    assert_error(&r, 403, "FORBIDDEN");
    assert_non_null(strstr(r.body, "lacks scope read, needed by a counter moved by 0"));
    http_free(&r);
    assert_int_equal(status_as(&p, "all-secret", "POST", "/counter/w:a", "{\"by\":0}"), 200);
    assert_int_equal(status_as(&p, W, "POST", "/bits/w:b/setbit", "{\"offset\":3,\"value\":1}"), 200);
    r = req_as(&p, W, "POST", "/bits/w:b/field", "{\"ops\":[{\"set\":\"u8\",\"offset\":8,\"value\":1},"
                                                 "{\"get\":\"u4\",\"offset\":0}]}", NULL);
    assert_error(&r, 403, "FORBIDDEN");
    assert_non_null(strstr(r.body, "needed by a BITFIELD GET"));
    http_free(&r);
    assert_int_equal(status_as(&p, W, "POST", "/bits/w:b/field", "{\"ops\":[{\"incrby\":\"u8\",\"offset\":8,"
                                                               "\"increment\":1}]}"), 200);
    assert_int_equal(status_as(&p, "all-secret", "POST", "/bits/w:b/field",
                               "{\"ops\":[{\"get\":\"u8\",\"offset\":8}]}"), 200);

    /* a series of the tenant's with a rule to a key outside its prefixes */
    const char *T = "tenant-secret", *A = "all-secret";
    assert_int_equal(status_as(&p, T, "PUT", "/ts/t:src", "{}"), 201);
    assert_int_equal(status_as(&p, A, "PUT", "/ts/x:dst", "{}"), 201);
    assert_int_equal(status_as(&p, A, "PUT", "/ts/t:dst", "{}"), 201);
    assert_int_equal(status_as(&p, A, "POST", "/ts/t:src/rules", "{\"dest\":\"x:dst\",\"agg\":\"sum\",\"bucket_ms\":10}"),
                     201);
    assert_int_equal(status_as(&p, A, "POST", "/ts/t:src/rules", "{\"dest\":\"t:dst\",\"agg\":\"sum\",\"bucket_ms\":10}"),
                     201);
    r = req_as(&p, T, "GET", "/ts/t:src", NULL, NULL);
    assert_status(&r, 200);
    assert_null(strstr(r.body, "x:dst"));
    assert_non_null(strstr(r.body, "t:dst"));
    http_free(&r);
    r = req_as(&p, A, "GET", "/ts/t:src", NULL, NULL);
    assert_non_null(strstr(r.body, "x:dst"));
    http_free(&r);
    assert_int_equal(status_as(&p, A, "PUT", "/ts/t:dst2", "{}"), 201);
    assert_int_equal(status_as(&p, A, "PUT", "/ts/x:src2", "{}"), 201);
    assert_int_equal(status_as(&p, A, "POST", "/ts/x:src2/rules", "{\"dest\":\"t:dst2\",\"agg\":\"sum\",\"bucket_ms\":10}"),
                     201);
    r = req_as(&p, T, "GET", "/ts/t:dst2", NULL, NULL);
    assert_status(&r, 200);
    assert_null(strstr(r.body, "x:src2"));
    assert_non_null(strstr(r.body, "\"source\":null"));
    http_free(&r);
    tally_cleanup(&p);
}

static void test_refused_before_eviction(void **state)
{
    (void)state;
    static char cfg[400];
    snprintf(cfg, sizeof(cfg), "%s/policies.json", cfgdir);
    write_file(cfg, POLICIES);
    const char *args[] = { "--tokens", tokens_file(), "--config", cfg, "--fsync", "always", "--maxmemory", "2mb",
                           "--maxmemory-policy", "allkeys-lru", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    const char *T = "tenant-secret", *A = "all-secret";
    assert_int_equal(status_as(&p, A, "PUT", "/ts/t:src", "{}"), 201);
    assert_int_equal(status_as(&p, A, "PUT", "/ts/x:agg", "{}"), 201);
    assert_int_equal(status_as(&p, A, "POST", "/ts/t:src/rules", "{\"dest\":\"x:agg\",\"agg\":\"sum\",\"bucket_ms\":1000}"),
                     201);
    /* filled to the limit (writes ask for their room first: memory never
     * passes it): the next write that grows by a few KiB evicts */
    long long used = 0, max = 0;
    char path[64];
    memory_of(&p, &used, &max);
    for (int i = 0; max - used >= 64 * 1024; i++) {
        snprintf(path, sizeof(path), "/bloom/x:fill%d", i);
        assert_int_equal(status_as(&p, A, "PUT", path, "{\"capacity\":20000,\"error_rate\":0.001}"), 201);
        memory_of(&p, &used, &max);
        assert_true(i < 1000);
    }
    for (int i = 0; max - used >= 2048; i++) {
        snprintf(path, sizeof(path), "/counter/x:small%d", i);
        assert_int_equal(status_as(&p, A, "POST", path, "{\"by\":1}"), 200);
        memory_of(&p, &used, &max);
        assert_true(i < 1000);
    }

    state_t before;
    state_take(&p, &before);
    expect_prefix_refusal(&p, T, "POST", "/ts/t:src", "{\"samples\":[[1000,1]]}", NULL, "x:agg");
    expect_prefix_refusal(&p, T, "POST", "/ts/t:src/incrby", "{\"by\":1,\"timestamp\":1000}", NULL, "x:agg");
    expect_prefix_refusal(&p, T, "POST", "/ts/t:src/rules", "{\"dest\":\"x:other\",\"agg\":\"avg\",\"bucket_ms\":1000}",
                          NULL, "x:other");
    state_unchanged(&p, &before);
    state_free(&before);

    /* the same limit evicts for a write that is allowed */
    char *keys_before = keys_listing(&p);
    assert_int_equal(status_as(&p, T, "PUT", "/cms/t:n", "{\"width\":1000,\"depth\":1}"), 201);
    char *keys_after = keys_listing(&p);
    assert_string_not_equal(keys_before, keys_after);
    assert_null(strstr(keys_before, "\"t:n\""));
    memory_of(&p, &used, &max);
    assert_true(used <= max);
    free(keys_before);
    free(keys_after);
    memory_of(&p, &used, &max);
    assert_true(used <= max + 64 * 1024);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Details, metrics, reload, access log, failures, start-up                 */
/* ------------------------------------------------------------------------ */

static void test_info_and_metrics(void **state)
{
    (void)state;
    const char *tokens = tokens_file();
    tally_proc_t p;
    const char *args[] = { "--tokens", tokens, NULL };
    tally_start(&p, NULL, args);
    http_resp_t r = req_as(&p, "admin-secret", "GET", "/info", NULL, NULL);
    assert_status(&r, 200);
    assert_non_null(strstr(r.body, p.dir));   /* the absolute data directory, for admin */
    http_free(&r);
    r = req_as(&p, "read-secret", "GET", "/info", NULL, NULL);
    assert_status(&r, 200);
    assert_null(strstr(r.body, p.dir));
    assert_null(json_object_get(r.json, "persistence"));
    assert_non_null(json_object_get(r.json, "version"));
    http_free(&r);
    assert_int_equal(status_as(&p, NULL, "GET", "/metrics", NULL), 401);
    assert_int_equal(status_as(&p, "ratelimit-secret", "GET", "/metrics", NULL), 200);
    assert_int_equal(status_as(&p, NULL, "GET", "/healthz", NULL), 200);
    assert_int_equal(status_as(&p, NULL, "GET", "/readyz", NULL), 200);
    assert_int_equal(status_as(&p, "bearer-of-nothing", "GET", "/", NULL), 401);
    tally_cleanup(&p);

    const char *pub[] = { "--tokens", tokens, "--metrics-public", "--in-memory", NULL };
    tally_start(&p, NULL, pub);
    assert_int_equal(status_as(&p, NULL, "GET", "/metrics", NULL), 200);
    assert_int_equal(status_as(&p, NULL, "GET", "/info", NULL), 401);
    tally_cleanup(&p);

    /* without --tokens (loopback): everything as before, details included */
    const char *none[] = { "--in-memory", NULL };
    tally_start(&p, NULL, none);
    r = http(&p, "GET", "/info", NULL, NULL);
    assert_status(&r, 200);
    assert_non_null(json_object_get(r.json, "persistence"));
    http_free(&r);
    tally_cleanup(&p);
}

/* Polls until the request answers `status` (a reload is asynchronous). */
static void wait_status(const tally_proc_t *p, const char *token, const char *path, long status)
{
    for (int i = 0; i < 200; i++) {
        if (status_as(p, token, "GET", path, NULL) == status)
            return;
        usleep(25000);
    }
    fail_msg("GET %s as %s never answered %ld", path, token, status);
}

static void test_reload(void **state)
{
    (void)state;
    char tokens[400], one[400], text[1024];
    snprintf(tokens, sizeof(tokens), "%s/reload.json", cfgdir);
    token_entry(one, sizeof(one), "first", "first-secret", "\"read\"", NULL);
    snprintf(text, sizeof(text), "{\"tokens\":[%s]}", one);
    write_file(tokens, text);
    tally_proc_t p;
    const char *args[] = { "--tokens", tokens, "--in-memory", NULL };
    tally_start(&p, NULL, args);
    assert_int_equal(status_as(&p, "first-secret", "GET", "/counter/a", NULL), 200);

    /* SIGHUP: the new set replaces the old one */
    char two[400];
    token_entry(two, sizeof(two), "second", "second-secret", "\"read\",\"admin\"", NULL);
    snprintf(text, sizeof(text), "{\"tokens\":[%s]}", two);
    write_file(tokens, text);
    kill(p.pid, SIGHUP);
    wait_status(&p, "second-secret", "/counter/a", 200);
    assert_int_equal(status_as(&p, "first-secret", "GET", "/counter/a", NULL), 401);

    /* a bad file is refused, named, and the set loaded before stays */
    write_file(tokens, "{\"tokens\":[{\"name\":\"x\",\"sha256\":\"00\",\"scopes\":[\"read\"]}]}");
    kill(p.pid, SIGHUP);
    for (int i = 0; i < 200; i++) {
        char *log = tally_log(&p);
        bool seen = strstr(log, "keeping the tokens loaded before") != NULL;
        free(log);
        if (seen)
            break;
        usleep(25000);
    }
    char *log = tally_log(&p);
    assert_non_null(strstr(log, "tokens[0].sha256"));
    free(log);
    assert_int_equal(status_as(&p, "second-secret", "GET", "/counter/a", NULL), 200);

    /* POST /admin/reload: the same, answered */
    http_resp_t r = req_as(&p, "second-secret", "POST", "/admin/reload", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "the tokens loaded before stay"));
    http_free(&r);
    assert_int_equal(status_as(&p, "second-secret", "GET", "/counter/a", NULL), 200);
    snprintf(text, sizeof(text), "{\"tokens\":[%s,%s]}", one, two);
    write_file(tokens, text);
    r = req_as(&p, "second-secret", "POST", "/admin/reload", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "tokens"), 2);
    http_free(&r);
    assert_int_equal(status_as(&p, "first-secret", "GET", "/counter/a", NULL), 200);

    /* an empty list would lock everyone out, admin included: refused unless
     * the file says it means it */
    write_file(tokens, "{\"tokens\":[]}");
    r = req_as(&p, "second-secret", "POST", "/admin/reload", NULL, NULL);
    assert_error(&r, 400, "BAD_REQUEST");
    assert_non_null(strstr(r.body, "deny_all"));
    http_free(&r);
    assert_int_equal(status_as(&p, "second-secret", "GET", "/counter/a", NULL), 200);
    write_file(tokens, "{\"tokens\":[],\"deny_all\":true}");
    r = req_as(&p, "second-secret", "POST", "/admin/reload", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    assert_int_equal(status_as(&p, "second-secret", "GET", "/counter/a", NULL), 401);
    tally_cleanup(&p);

    /* refused at start, naming the member */
    write_file(tokens, "{\"tokens\":[{\"name\":\"x\",\"sha256\":\"00\",\"scopes\":[\"reed\"]}]}");
    assert_int_not_equal(tally_start_expect_exit(&p, NULL, args), 0);
    log = tally_log(&p);
    assert_non_null(strstr(log, "--tokens"));
    assert_non_null(strstr(log, "refusing to start"));
    free(log);
    tally_cleanup(&p);
}

/* Requests from several threads while the token file is reloaded over and
 * over: a token in every version of the file is never refused, and a reload
 * never frees a set a request still holds (the ASan and TSan runs). */
struct load {
    const tally_proc_t *p;
    int refused;
};

static void *load_main(void *arg)
{
    struct load *l = arg;
    int n = getenv("TALLY_SLOW") ? 100 : 300;
    for (int i = 0; i < n; i++)
        if (status_as(l->p, "steady-secret", "POST", "/counter/t:load", "{\"by\":1}") != 200)
            l->refused++;
    return NULL;
}

static void test_reload_under_load(void **state)
{
    (void)state;
    char tokens[400], steady[400], other[400], text[1024];
    snprintf(tokens, sizeof(tokens), "%s/load.json", cfgdir);
    token_entry(steady, sizeof(steady), "steady", "steady-secret", "\"write\"", "\"t:\"");
    snprintf(text, sizeof(text), "{\"tokens\":[%s]}", steady);
    write_file(tokens, text);
    tally_proc_t p;
    const char *args[] = { "--tokens", tokens, "--in-memory", "--threads", "4", NULL };
    tally_start(&p, NULL, args);
    pthread_t th[4];
    struct load l[4];
    for (int i = 0; i < 4; i++) {
        l[i] = (struct load){ &p, 0 };
        pthread_create(&th[i], NULL, load_main, &l[i]);
    }
    /* the loaders use this frame: nothing here may fail the test (longjmp
     * out of it) until they are joined */
    int rename_errno = 0;
    for (int k = 0; k < 20 && !rename_errno; k++) {
        char tmp[420];
        snprintf(tmp, sizeof(tmp), "%s.tmp", tokens);
        token_entry(other, sizeof(other), "other", k % 2 ? "odd-secret" : "even-secret", "\"read\"", NULL);
        snprintf(text, sizeof(text), k % 2 ? "{\"tokens\":[%s,%s]}" : "{\"tokens\":[%2$s,%1$s]}", steady, other);
        errno = 0;
        if (file_put(tmp, text) && rename(tmp, tokens) == 0)   /* whole files only, as a Secret update does */
            kill(p.pid, SIGHUP);
        else
            rename_errno = errno ? errno : EIO;
        usleep(20000);
    }
    int refused = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        refused += l[i].refused;
    }
    if (rename_errno)
        fail_msg("writing the new token file: %s", strerror(rename_errno));
    assert_int_equal(refused, 0);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

static void test_access_log(void **state)
{
    (void)state;
    char tokens[400], alog[400], moved[420];
    snprintf(tokens, sizeof(tokens), "%s/tokens.json", cfgdir);
    snprintf(alog, sizeof(alog), "%s/access.log", cfgdir);
    snprintf(moved, sizeof(moved), "%s.1", alog);
    write_tokens(tokens);
    tally_proc_t p;
    const char *args[] = { "--tokens", tokens, "--access-log", alog, "--in-memory", NULL };
    tally_start(&p, NULL, args);
    assert_int_equal(status_as(&p, "write-secret", "POST", "/counter/logged", "{\"by\":7,\"ttl\":99}"), 200);
    assert_int_equal(status_as(&p, "read-secret", "GET", "/keys?prefix=query-text", NULL), 200);
    assert_int_equal(status_as(&p, "wrong-secret", "GET", "/counter/logged", NULL), 401);
    size_t len;
    char *text = file_read(alog, &len);
    assert_non_null(strstr(text, "\"token\":\"writer\",\"method\":\"POST\",\"path\":\"/counter/logged\",\"status\":200"));
    assert_non_null(strstr(text, "\"token\":null,\"method\":\"GET\",\"path\":\"/counter/logged\",\"status\":401"));
    assert_non_null(strstr(text, "\"client\":\"127.0.0.1\""));
    assert_non_null(strstr(text, "\"duration_ms\":"));
    assert_non_null(strstr(text, "\"time\":\"20"));
    assert_null(strstr(text, "secret"));       /* no token value */
    assert_null(strstr(text, "query-text"));   /* no query string */
    assert_null(strstr(text, "\"by\""));       /* no body */
    for (char *line = text; *line;) {          /* every line is one JSON object */
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)(nl - line), 0, &je);
        assert_non_null(j);
        json_decref(j);
        line = nl + 1;
    }
    free(text);
    /* logrotate: moved away, SIGHUP, the next line goes to a new file */
    assert_int_equal(rename(alog, moved), 0);
    kill(p.pid, SIGHUP);
    for (int i = 0; i < 200 && access(alog, F_OK) != 0; i++) {
        usleep(25000);
        assert_int_equal(status_as(&p, NULL, "GET", "/healthz", NULL), 200);
    }
    assert_int_equal(status_as(&p, "read-secret", "GET", "/counter/logged", NULL), 200);
    text = file_read(alog, &len);
    assert_non_null(strstr(text, "\"token\":\"reader\""));
    free(text);
    tally_cleanup(&p);
    unlink(alog);
    unlink(moved);
}

static void test_failure_limit(void **state)
{
    (void)state;
    const char *tokens = tokens_file();
    tally_proc_t p;
    const char *args[] = { "--tokens", tokens, "--auth-fail-limit", "3", "--in-memory", NULL };
    tally_start(&p, NULL, args);
    /* no token at all is not a guess: it does not count */
    for (int i = 0; i < 5; i++)
        assert_int_equal(status_as(&p, NULL, "GET", "/counter/a", NULL), 401);
    for (int i = 0; i < 3; i++)
        assert_int_equal(status_as(&p, "guess", "GET", "/counter/a", NULL), 401);
    http_resp_t r = req_as(&p, "guess", "GET", "/counter/a", NULL, NULL);
    assert_error(&r, 429, "TOO_MANY_REQUESTS");
    char h[64];
    assert_true(http_header(&r, "Retry-After", h, sizeof(h)));
    /* the sliding minute: the failures weigh on into the next window */
    if (atoi(h) < 1 || atoi(h) > 120)
        fail_msg("Retry-After: %s", h);
    http_free(&r);
    /* only its guesses are held off: a valid token from the same address (a
     * gateway's, a NAT's: someone else's failures) is served as ever */
    assert_int_equal(status_as(&p, "guess", "GET", "/counter/a", NULL), 429);
    assert_int_equal(status_as(&p, "read-secret", "GET", "/counter/a", NULL), 200);
    assert_int_equal(status_as(&p, "admin-secret", "GET", "/info", NULL), 200);
    assert_int_equal(status_as(&p, "other-guess", "GET", "/counter/a", NULL), 429);
    assert_int_equal(status_as(&p, NULL, "GET", "/healthz", NULL), 200);
    tally_cleanup(&p);
    /* each refusal counted by reason */
    const char *metrics[] = { "--tokens", tokens, "--metrics-public", "--in-memory", NULL };
    tally_start(&p, NULL, metrics);
    assert_int_equal(status_as(&p, NULL, "GET", "/counter/a", NULL), 401);
    assert_int_equal(status_as(&p, "read-secret", "POST", "/counter/a", "{}"), 403);
    assert_int_equal(status_as(&p, "tenant-secret", "POST", "/counter/a", "{}"), 403);
    r = http(&p, "GET", "/metrics", NULL, NULL);
    assert_status(&r, 200);
    assert_non_null(strstr(r.body, "tally_auth_refused_total{reason=\"unauthorized\"} 1\n"));
    assert_non_null(strstr(r.body, "tally_auth_refused_total{reason=\"scope\"} 1\n"));
    assert_non_null(strstr(r.body, "tally_auth_refused_total{reason=\"prefix\"} 1\n"));
    assert_non_null(strstr(r.body, "tally_auth_refused_total{reason=\"throttled\"} 0\n"));
    http_free(&r);
    tally_cleanup(&p);
}

static void test_bind_and_hash(void **state)
{
    (void)state;
    tally_proc_t p;
    const char *open_bind[] = { "--bind", "0.0.0.0", "--in-memory", NULL };
    assert_int_not_equal(tally_start_expect_exit(&p, NULL, open_bind), 0);
    char *log = tally_log(&p);
    assert_non_null(strstr(log, "--hash-token"));
    assert_non_null(strstr(log, "--insecure-no-auth"));
    free(log);
    tally_cleanup(&p);
    const char *insecure[] = { "--bind", "0.0.0.0", "--in-memory", "--insecure-no-auth", NULL };
    tally_start(&p, NULL, insecure);
    assert_int_equal(status_as(&p, NULL, "POST", "/counter/a", "{}"), 200);
    tally_cleanup(&p);
    const char *tokens = tokens_file();
    const char *with_tokens[] = { "--bind", "0.0.0.0", "--in-memory", "--tokens", tokens, NULL };
    tally_start(&p, NULL, with_tokens);
    assert_int_equal(status_as(&p, NULL, "POST", "/counter/a", "{}"), 401);
    tally_cleanup(&p);

    /* --hash-token: the hex SHA-256 of stdin, one trailing newline dropped */
    char cmd[600], out[128] = "";
    snprintf(cmd, sizeof(cmd), "echo read-secret | %s --hash-token", getenv("TALLYD"));
    FILE *f = popen(cmd, "r");
    assert_non_null(fgets(out, sizeof(out), f));
    assert_int_equal(pclose(f), 0);
    char want[2 * API_TOKEN_SHA256_LEN + 1];
    api_token_hash_hex("read-secret", 11, want);
    assert_int_equal(strncmp(out, want, 64), 0);
    assert_string_equal(want, "f0fd6c09405cb6d3707d04067d8509cb924e62ae66fa02067c2bc467b0d721e4");   /* printf read-secret | sha256sum */
    snprintf(cmd, sizeof(cmd), "printf '' | %s --hash-token 2>/dev/null", getenv("TALLYD"));
    assert_int_not_equal(system(cmd), 0);
}

static int setup(void **state)
{
    (void)state;
    tmpdir_make(cfgdir, sizeof(cfgdir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tmpdir_remove(cfgdir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_matrix),
        cmocka_unit_test(test_replicate_scope),
        cmocka_unit_test(test_write_scope_reads),
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_refused_before_eviction),
        cmocka_unit_test(test_info_and_metrics),
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_reload_under_load),
        cmocka_unit_test(test_access_log),
        cmocka_unit_test(test_failure_limit),
        cmocka_unit_test(test_bind_and_hash),
    };
    return cmocka_run_group_tests_name("tokens, scopes and prefixes (integration)", tests, setup, teardown);
}
