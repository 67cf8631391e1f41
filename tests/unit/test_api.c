/*
 * test_api.c - api/ in process, without a socket: the router (404 and 405
 * kept apart, the Allow header, HEAD on GET routes), the readers and the
 * error envelope they produce, the key handle's answers (404, WRONGTYPE),
 * and replay determinism: every journaled request, replayed into a fresh
 * keyspace at its recorded time, rebuilds state that answers exactly as the
 * original; a journal record's size as the reservation computes it.  Also
 * the JSON number writer against core's coordinate fast
 * path (the answer of GET /geo/{key}/pos must not depend on which one runs).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/json_out.h"
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/router.h"
#include "api/ratelimit.h"
#include "cmd/def.h"
#include "cmd/throttle.h"
#include "cmd/undo.h"
#include "core/geo.h"
#include "core/geohash.h"
#include "core/hash.h"
#include "core/keydump.h"
#include "core/keyspace.h"
#include "core/rng.h"

/* ------------------------------------------------------------------------ */
/* An in-process server with a journal kept in memory                       */
/* ------------------------------------------------------------------------ */

typedef struct record {
    uint8_t kind;                /* a request or a command record (core/persist_fmt.h) */
    uint16_t op;
    int64_t now_ns;
    api_method_t method;
    char *path, *query, *ctype;
    uint8_t *body;
    size_t body_len;
} record_t;

typedef struct journal {
    record_t *r;
    size_t n, cap;
} journal_t;

static char *dupn(const void *p, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    if (n)
        memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static uint64_t keep_record(void *ud, const journal_req_t *q)
{
    journal_t *j = ud;
    if (j->n == j->cap) {
        j->cap = j->cap ? 2 * j->cap : 64;
        j->r = realloc(j->r, j->cap * sizeof(*j->r));
        assert_non_null(j->r);
    }
    record_t *r = &j->r[j->n++];
    r->kind = q->kind;
    r->op = q->op;
    r->now_ns = q->now_ns;
    r->method = (api_method_t)q->method;
    r->path = dupn(q->path, q->path_len);
    r->query = dupn(q->query, q->query_len);
    r->ctype = dupn(q->ctype, q->ctype_len);
    /* a command record's arguments are its body then its tail (journal_req_t) */
    r->body = malloc(q->body_len + q->tail_len + 1);
    assert_non_null(r->body);
    if (q->body_len)
        memcpy(r->body, q->body, q->body_len);
    if (q->tail_len)
        memcpy(r->body + q->body_len, q->tail, q->tail_len);
    r->body[q->body_len + q->tail_len] = 0;
    r->body_len = q->body_len + q->tail_len;
    return j->n;
}

static void journal_free(journal_t *j)
{
    for (size_t i = 0; i < j->n; i++) {
        free(j->r[i].path);
        free(j->r[i].query);
        free(j->r[i].ctype);
        free(j->r[i].body);
    }
    free(j->r);
}

static void server_init(api_server_t *srv, journal_t *j)
{
    memset(srv, 0, sizeof(*srv));
    srv->ks = ks_create(2, 42);
    assert_non_null(srv->ks);
    if (j) {
        srv->hooks.ud = j;
        srv->hooks.journal = keep_record;
    }
}

/* Serves one request; returns its status, the body in *body (malloc'd, may
 * be NULL when the caller does not want it). */
/* Serves a request with a body of body_len bytes (any bytes). */
static int serve_bin(api_server_t *srv, api_method_t m, const char *path, const char *query, const char *ctype,
                     const void *body, size_t body_len, int64_t now_ns, bool replay, char **out, api_resp_t *keep)
{
    api_req_t req;
    api_req_init(&req, m, path, strlen(path), now_ns);
    req.query = query;
    req.query_len = query ? strlen(query) : 0;
    req.ctype = ctype && *ctype ? ctype : NULL;
    req.body = body;
    req.body_len = body_len;
    req.replay = replay;
    api_resp_t resp;
    api_dispatch(srv, &req, &resp);
    int status = resp.status;
    if (out)
        *out = resp.body ? dupn(resp.body, resp.len) : NULL;
    if (keep)
        *keep = resp;
    else
        api_resp_release(&resp);
    api_req_release(&req);
    return status;
}

static int serve_at(api_server_t *srv, api_method_t m, const char *path, const char *query, const char *ctype,
                    const char *body, int64_t now_ns, bool replay, char **out, api_resp_t *keep)
{
    return serve_bin(srv, m, path, query, ctype, body, body ? strlen(body) : 0, now_ns, replay, out, keep);
}

#define T0 1700000000000000000LL

static int serve(api_server_t *srv, api_method_t m, const char *path, const char *query, const char *body,
                 char **out)
{
    return serve_at(srv, m, path, query, "application/json", body, T0, false, out, NULL);
}

static void expect_error(api_server_t *srv, api_method_t m, const char *path, const char *query, const char *body,
                         int status, const char *code, const char *field)
{
    char *b;
    assert_int_equal(serve(srv, m, path, query, body, &b), status);
    json_t *j = json_loads(b, 0, NULL);
    assert_non_null(j);
    json_t *e = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), code);
    assert_non_null(json_string_value(json_object_get(e, "message")));
    if (field)
        assert_string_equal(json_string_value(json_object_get(e, "field")), field);
    else
        assert_null(json_object_get(e, "field"));
    json_decref(j);
    free(b);
}

/* ------------------------------------------------------------------------ */
/* Router                                                                   */
/* ------------------------------------------------------------------------ */

static void test_router(void **state)
{
    (void)state;
    api_server_t srv;
    server_init(&srv, NULL);
    /* a path no pattern matches: 404 naming the neighbours */
    char *b;
    assert_int_equal(serve(&srv, API_GET, "/bloomm/x", NULL, NULL, &b), 404);
    assert_non_null(strstr(b, "GET / lists every route"));
    free(b);
    assert_int_equal(serve(&srv, API_GET, "/bloom/x/nope", NULL, NULL, &b), 404);
    assert_non_null(strstr(b, "routes under /bloom"));
    free(b);
    /* a path that matches with another method: 405 with Allow */
    api_resp_t r;
    assert_int_equal(serve_at(&srv, API_DELETE, "/bloom/x", NULL, NULL, NULL, T0, false, NULL, &r), 405);
    bool allow = false;
    for (int i = 0; i < r.nheaders; i++)
        if (strcmp(r.headers[i].name, "Allow") == 0) {
            allow = true;
            assert_non_null(strstr(r.headers[i].value, "PUT"));
            assert_non_null(strstr(r.headers[i].value, "GET, HEAD"));
        }
    assert_true(allow);
    api_resp_release(&r);
    /* HEAD runs the GET route */
    assert_int_equal(serve(&srv, API_HEAD, "/healthz", NULL, NULL, NULL), 200);
    /* percent-decoding: one segment, '/' inside a key */
    assert_int_equal(serve(&srv, API_POST, "/counter/a%2Fb", NULL, "{\"by\":2}", NULL), 200);
    assert_int_equal(serve(&srv, API_GET, "/keys/a%2Fb", NULL, NULL, &b), 200);
    assert_non_null(strstr(b, "\"key\":\"a/b\""));
    free(b);
    expect_error(&srv, API_GET, "/keys/a%zz", NULL, NULL, 400, "BAD_REQUEST", NULL);
    /* the operational routes are known to the service by their flag */
    assert_true(api_path_operational("/healthz", 8));
    assert_true(api_path_operational("/metrics", 8));
    assert_false(api_path_operational("/keys", 5));
    assert_false(api_path_operational("/healthzz", 9));
    /* every route has a method and a pattern starting with '/' */
    assert_true(api_route_count() > 80);
    for (size_t i = 0; i < api_route_count(); i++)
        assert_int_equal(api_route_meta(i).pattern[0], '/');
    /* the keyed families HAProxy routes by path come from the table: every
     * /F/{key} route's F, and /geo/nearby is the one literal among them */
    char keyed[512], unkeyed[512];
    assert_true(api_keyed_paths(keyed, sizeof(keyed), unkeyed, sizeof(unkeyed)));
    assert_string_equal(unkeyed, "geo/nearby");
    for (size_t i = 0; i < api_route_count(); i++) {
        const char *p = api_route_meta(i).pattern, *slash = strchr(p + 1, '/');
        if (!slash || strncmp(slash, "/{key}", 6) != 0)
            continue;
        char fam[64], list[520];   /* "|F|" in "|keyed|": F as a whole name ("ts" is no part of "bits") */
        snprintf(fam, sizeof(fam), "|%.*s|", (int)(slash - p - 1), p + 1);
        snprintf(list, sizeof(list), "|%s|", keyed);
        assert_non_null(strstr(list, fam));
    }
    assert_null(strstr(keyed, "hook"));
    assert_null(strstr(keyed, "mts"));
    char tiny[8];
    assert_false(api_keyed_paths(tiny, sizeof(tiny), unkeyed, sizeof(unkeyed)));
    ks_free(srv.ks);
}

/* ------------------------------------------------------------------------ */
/* Readers and the envelope                                                 */
/* ------------------------------------------------------------------------ */

static void test_readers(void **state)
{
    (void)state;
    api_server_t srv;
    server_init(&srv, NULL);
    /* body */
    expect_error(&srv, API_PUT, "/keys/k/ttl", NULL, "{\"ttl_ms\":", 400, "BAD_REQUEST", NULL);
    expect_error(&srv, API_PUT, "/keys/k/ttl", NULL, "[1]", 400, "BAD_REQUEST", NULL);
    expect_error(&srv, API_PUT, "/keys/k/ttl", NULL, "{\"ttl_ms\":1,\"x\":2}", 400, "BAD_REQUEST", "x");
    expect_error(&srv, API_PUT, "/keys/k/ttl", NULL, "{}", 400, "BAD_REQUEST", "ttl_ms");
    expect_error(&srv, API_PUT, "/keys/k/ttl", NULL, "{\"ttl_ms\":\"1\"}", 400, "BAD_REQUEST", "ttl_ms");
    expect_error(&srv, API_PUT, "/keys/k/ttl", NULL, "{\"ttl_ms\":0}", 400, "BAD_REQUEST", "ttl_ms");
    api_req_t req;
    api_req_init(&req, API_PUT, "/bloom/k", 8, T0);
    req.ctype = "image/png";
    req.body = (const uint8_t *)"{}";
    req.body_len = 2;
    api_resp_t resp;
    api_dispatch(&srv, &req, &resp);
    assert_int_equal(resp.status, 415);
    api_resp_release(&resp);
    api_req_release(&req);
    /* media types: parameters and case aside */
    assert_true(api_media_type_is("Application/JSON; charset=utf-8", "application/json"));
    assert_true(api_media_type_is("application/octet-stream ;x=1", "application/octet-stream"));
    assert_false(api_media_type_is("application/jsonx", "application/json"));
    assert_false(api_media_type_is(NULL, "application/json"));
    assert_true(api_media_type_is("application/json", "application/json"));
    assert_true(api_media_type_is("application/json;charset=utf-8", "application/json"));
    assert_true(api_media_type_is("application/json \t; charset=utf-8", "application/json"));
    assert_true(api_media_type_is("application/json\t", "application/json"));
    assert_false(api_media_type_is("application/json+x", "application/json"));
    assert_false(api_media_type_is("application/jso", "application/json"));
    assert_false(api_media_type_is("", "application/json"));
    /* query */
    expect_error(&srv, API_GET, "/keys", "limit=0", NULL, 400, "BAD_REQUEST", "limit");
    expect_error(&srv, API_GET, "/keys", "limit=1&limit=2", NULL, 400, "BAD_REQUEST", "limit");
    expect_error(&srv, API_GET, "/keys", "nope=1", NULL, 400, "BAD_REQUEST", "nope");
    assert_int_equal(serve(&srv, API_GET, "/keys", "limit=5", NULL, NULL), 200);
    /* keys */
    char longkey[1100 + 8] = "/counter/";
    memset(longkey + 9, 'k', 1030);
    longkey[9 + 1030] = '\0';
    expect_error(&srv, API_GET, longkey, NULL, NULL, 400, "BAD_REQUEST", "key");
    const char *why;
    assert_false(api_key_ok("", 0, &why));
    assert_false(api_key_ok("a\0b", 3, &why));
    assert_true(api_key_ok("page/home", 9, &why));
    /* numbers */
    int64_t i;
    double d;
    assert_true(api_parse_i64("-42", 3, &i) && i == -42);
    assert_false(api_parse_i64("4 2", 3, &i));
    assert_false(api_parse_i64("99999999999999999999", 20, &i));
    /* against strtoll over the whole string (the rule it has always kept:
     * '-' or a digit first, all of it read up to a NUL, no overflow), for
     * seeded random strings of digits, signs, spaces, NULs and other bytes,
     * 1 to 21 bytes (over 20 is refused), and every length of nines and of a minimum */
    rng_t r;
    rng_seed(&r, 64);
    static const char alphabet[] = "0123456789999-+ \0x.";
    for (int round = 0; round < 200000; round++) {
        char str[24];
        size_t len = 1 + rng_below(&r, 21);
        for (size_t k = 0; k < len; k++)
            str[k] = alphabet[rng_below(&r, sizeof(alphabet) - 1)];
        if (round % 4 == 0)   /* mostly digits */
            for (size_t k = 1; k < len; k++)
                str[k] = (char)('0' + rng_below(&r, 10));
        if (round >= 199960) {   /* 9, 99, ... and -9, -99, ... */
            int n = (round - 199960) % 20 + 1;
            bool neg = round - 199960 >= 20;
            len = (size_t)n + neg;
            memset(str, '9', len);
            if (neg)
                str[0] = '-';
        }
        str[len] = '\0';
        char buf[24];
        memcpy(buf, str, len + 1);
        char *end;
        errno = 0;
        long long want = strtoll(buf, &end, 10);
        bool ok = len <= 20 && (buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9')) && !errno && !*end && end != buf;
        int64_t got = 0;
        bool gok = api_parse_i64(str, len, &got);
        if (gok != ok || (ok && got != want))
            fail_msg("api_parse_i64 of %zu bytes '%.*s': %d %lld, strtoll %d %lld", len, (int)len, str, gok,
                     (long long)got, ok, want);
    }
    assert_true(api_parse_double("1e3", 3, &d) && d == 1000);
    assert_false(api_parse_double("inf", 3, &d));
    /* a deferred error and the envelope it becomes */
    api_err_t e;
    api_err_set(&e, API_E_WRONGTYPE, "sources", "key %s is %d", "x", 7);
    api_resp_init(&resp);
    api_err_respond(&resp, &e);
    assert_int_equal(resp.status, 409);
    assert_string_equal(resp.body,
                        "{\"error\":{\"code\":\"WRONGTYPE\",\"message\":\"key x is 7\",\"field\":\"sources\"}}");
    api_resp_release(&resp);
    /* the member readers fill an api_err_t without answering */
    json_t *o = json_pack("{s:i,s:s}", "n", 5, "s", "x");
    int64_t n;
    assert_false(api_member_int(o, "n", true, 6, 9, &n, NULL, &e));
    assert_string_equal(e.field, "n");
    assert_string_equal(e.message, "'n' must be between 6 and 9");
    assert_false(api_member_int(o, "s", true, 0, 9, &n, NULL, &e));
    assert_string_equal(e.message, "'s' must be an integer");
    assert_true(api_member_int(o, "missing", false, 0, 9, &n, NULL, &e));
    json_decref(o);
    assert_false(api_key_check("dest", "", 0, &e));
    assert_string_equal(e.field, "dest");
    assert_string_equal(e.message, "dest must not be empty");
    /* a field name longer than api_err_t's buffer is named in full */
    char name[200], text[260], query[220];
    memset(name, 'f', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    snprintf(text, sizeof(text), "{\"ttl_ms\":1,\"%s\":2}", name);
    expect_error(&srv, API_PUT, "/keys/k/ttl", NULL, text, 400, "BAD_REQUEST", name);
    snprintf(query, sizeof(query), "%s=1", name);
    expect_error(&srv, API_GET, "/keys", query, NULL, 400, "BAD_REQUEST", name);
    /* core statuses become codes in one place */
    assert_int_equal(api_status_code(CORE_NOMEM), API_E_OUT_OF_MEMORY);
    assert_int_equal(api_status_code(CORE_FULL), API_E_OUT_OF_MEMORY);
    assert_int_equal(api_status_code(CORE_TOO_OLD), API_E_BAD_REQUEST);
    assert_int_equal(api_status_code(CORE_DUPLICATE), API_E_EXISTS);
    ks_free(srv.ks);
}

/* ------------------------------------------------------------------------ */
/* The key handle's answers                                                 */
/* ------------------------------------------------------------------------ */

static void test_key_handle_answers(void **state)
{
    (void)state;
    api_server_t srv;
    server_init(&srv, NULL);
    assert_int_equal(serve(&srv, API_POST, "/counter/c", NULL, "{\"by\":1}", NULL), 200);
    char *b;
    /* another type's route on the key: 409 naming both */
    assert_int_equal(serve(&srv, API_GET, "/bloom/c", NULL, NULL, &b), 409);
    assert_non_null(strstr(b, "key holds a counter (counter), not a Bloom filter (bloom)"));
    free(b);
    /* a read that needs the key: 404 in the family's words */
    assert_int_equal(serve(&srv, API_GET, "/bloom/none", NULL, NULL, &b), 404);
    assert_non_null(strstr(b, "no bloom filter at this key"));
    free(b);
    assert_int_equal(serve(&srv, API_GET, "/cms/none", NULL, NULL, &b), 404);
    assert_non_null(strstr(b, "create the cms with PUT /cms/{key}"));
    free(b);
    /* a multi-key request names the key of another type */
    assert_int_equal(serve(&srv, API_PUT, "/bits/d", NULL, NULL, NULL), 200);
    assert_int_equal(serve(&srv, API_POST, "/bits/d/op", NULL, "{\"op\":\"or\",\"sources\":[\"d\",\"c\"]}", &b), 409);
    assert_non_null(strstr(b, "sources[1]: key holds a counter"));
    free(b);
    /* a failed write leaves nothing behind */
    assert_int_equal(serve(&srv, API_POST, "/ts/t", NULL, "{\"samples\":[[5,1],[5,2]]}", NULL), 409);
    assert_int_equal(serve(&srv, API_GET, "/keys/t", NULL, NULL, NULL), 404);
    ks_free(srv.ks);
}

/* ------------------------------------------------------------------------ */
/* Replay determinism                                                       */
/* ------------------------------------------------------------------------ */

static const struct {
    api_method_t m;
    const char *path, *query, *body;
} script[] = {
    { API_POST, "/throttle", NULL, "{\"key\":\"u1\",\"max_burst\":2,\"count_per_period\":5,\"period\":60}" },
    { API_POST, "/throttle", NULL, "{\"key\":\"u1\",\"max_burst\":2,\"count_per_period\":5,\"period\":60}" },
    { API_POST, "/counter/hits", NULL, "{\"by\":7,\"ttl\":100}" },
    { API_POST, "/uv/visitors", NULL, "{\"items\":[\"a\",\"b\",\"c\",1,2,3]}" },
    { API_POST, "/uv/other", NULL, "{\"items\":[\"c\",\"d\"]}" },
    { API_POST, "/uv/all/merge", NULL, "{\"sources\":[\"visitors\",\"other\"]}" },
    { API_PUT, "/bloom/seen", NULL, "{\"error_rate\":0.01,\"capacity\":100}" },
    { API_POST, "/bloom/seen", NULL, "{\"items\":[\"x\",\"y\"]}" },
    { API_POST, "/cuckoo/cf", NULL, "{\"items\":[\"x\",\"y\",\"x\"]}" },
    { API_POST, "/cuckoo/cf/remove", NULL, "{\"items\":[\"y\"]}" },
    { API_POST, "/cuckoo/cf/compact", NULL, NULL },
    { API_POST, "/bloom/ins", NULL, "{\"items\":[\"a\",\"b\"],\"capacity\":10,\"error_rate\":0.001,\"nonscaling\":true}" },
    { API_PUT, "/cms/words", NULL, "{\"width\":100,\"depth\":4}" },
    { API_POST, "/cms/words", NULL, "{\"items\":[\"a\",\"b\",\"a\"]}" },
    { API_PUT, "/topk/top", NULL, "{\"k\":3}" },
    { API_POST, "/topk/top", NULL, "{\"items\":[\"a\",\"b\",\"a\",\"c\",\"d\"]}" },
    { API_PUT, "/tdigest/lat", NULL, NULL },
    { API_POST, "/tdigest/lat", NULL, "{\"values\":[1,2,3,4,5,100]}" },
    { API_POST, "/bits/b/setbit", NULL, "{\"offset\":100,\"value\":1}" },
    { API_POST, "/bits/b/field", NULL, "{\"ops\":[{\"incrby\":\"u8\",\"offset\":0,\"increment\":200}]}" },
    { API_POST, "/bits/b2/op", NULL, "{\"op\":\"not\",\"sources\":[\"b\"]}" },
    { API_POST, "/activity/act", NULL, "{\"day\":\"2023-11-14\",\"users\":[1,2,3]}" },
    { API_POST, "/geo/places", NULL, "{\"members\":[{\"member\":\"p\",\"lon\":13.36,\"lat\":38.11}]}" },
    { API_POST, "/geo/near/store", "source=places&lon=13&lat=38&radius=100&unit=km", NULL },
    { API_POST, "/ts/temp", NULL, "{\"samples\":[[1000,20.5],[2000,21]]}" },
    { API_DELETE, "/ts/temp/range", "from=1500&to=2500", NULL },
    { API_PUT, "/ts/temp:1s", NULL, NULL },
    { API_POST, "/ts/temp/rules", NULL, "{\"dest\":\"temp:1s\",\"agg\":\"max\",\"bucket_ms\":1000}" },
    { API_POST, "/ts/temp", NULL, "{\"samples\":[[3000,\"nan\"],[3500,4],[1200,7],[4100,1]]}" },
    { API_POST, "/ts/temp/incrby", NULL, "{\"by\":2}" },
    { API_PATCH, "/ts/temp", NULL, "{\"labels\":{\"room\":\"hall\"}}" },
    { API_PUT, "/keys/hits/ttl", NULL, "{\"ttl_ms\":5000}" },
    { API_DELETE, "/keys/other", NULL, NULL },
};

static const char *const reads[] = {
    "/throttle/u1", "/counter/hits", "/uv/visitors", "/uv/all", "/bloom/seen", "/bloom/ins", "/bloom/bcopy",
    "/bloom/bcopy/exists?item=x", "/cuckoo/cf", "/cuckoo/ccopy", "/cuckoo/ccopy/count?item=x", "/cms/words",
    "/topk/top/list", "/tdigest/lat", "/bits/b", "/bits/b2/count", "/activity/act", "/geo/places/pos?member=p",
    "/geo/near/pos?member=p", "/ts/temp", "/ts/temp:1s", "/ts/temp/range", "/ts/temp:1s/range?latest=true",
    "/keys", "/keys/hits", "/keys/other",
};

static char *read_answer(api_server_t *srv, const char *pq, int64_t now_ns)
{
    char path[128];
    const char *q = strchr(pq, '?');
    size_t n = q ? (size_t)(q - pq) : strlen(pq);
    memcpy(path, pq, n);
    path[n] = '\0';
    char *b = NULL;
    int st = serve_at(srv, API_GET, path, q ? q + 1 : NULL, NULL, NULL, now_ns, false, &b, NULL);
    char *out;
    assert_true(asprintf(&out, "%d %s", st, b ? b : "") > 0);
    free(b);
    return out;
}


/* Replays one journaled record on srv as the journal's replay does: an
 * operation of the command table directly, a request record through the
 * router; fails the test when it is refused. */
static void replay_record(api_server_t *srv, const record_t *q)
{
    if (q->kind == JOURNAL_REC_COMMAND) {
        journal_req_t c = { .kind = q->kind, .op = q->op, .now_ns = q->now_ns, .path = "", .query = "",
                            .ctype = "", .body = q->body, .body_len = q->body_len };
        cmd_err_t err;
        if (!cmd_replay(srv, &c, 0, &err))
            fail_msg("replay of op %u: %s", (unsigned)q->op, err.message);
        return;
    }
    char *b;
    int st = serve_bin(srv, q->method, q->path, q->query, q->ctype, q->body, q->body_len, q->now_ns, true, &b,
                       NULL);
    if (st >= 300)
        fail_msg("replay of %s %s: %d %s", api_method_name(q->method), q->path, st, b);
    free(b);
}

/* Copies the filter at path `from` to `to` by its dump, chunk by chunk. */
static void copy_by_dump(api_server_t *srv, const char *from, const char *to, int64_t now_ns)
{
    char dump[64], load[64], q[32];
    snprintf(dump, sizeof(dump), "%s/dump", from);
    snprintf(load, sizeof(load), "%s/load", to);
    long long cursor = 0;
    for (;;) {
        api_resp_t resp;
        snprintf(q, sizeof(q), "cursor=%lld", cursor);
        assert_int_equal(serve_at(srv, API_GET, dump, q, NULL, NULL, now_ns, false, NULL, &resp), 200);
        cursor = -1;
        for (int h = 0; h < resp.nheaders; h++)
            if (strcmp(resp.headers[h].name, "Tally-Cursor") == 0)
                cursor = atoll(resp.headers[h].value);
        assert_true(cursor >= 0);
        if (cursor == 0) {
            assert_int_equal(resp.len, 0);
            api_resp_release(&resp);
            return;
        }
        snprintf(q, sizeof(q), "cursor=%lld", cursor);
        char *b;
        int st = serve_bin(srv, API_POST, load, q, "application/octet-stream", resp.body, resp.len, now_ns, false,
                           &b, NULL);
        if (st != 200)
            fail_msg("POST %s?%s: %d %s", load, q, st, b);
        free(b);
        api_resp_release(&resp);
    }
}

static void test_replay_determinism(void **state)
{
    (void)state;
    journal_t j = { 0 };
    api_server_t a, r;
    server_init(&a, &j);
    server_init(&r, NULL);
    int64_t t = T0;
    for (size_t i = 0; i < sizeof(script) / sizeof(script[0]); i++, t += 1000000) {
        char *b;
        int st = serve_at(&a, script[i].m, script[i].path, script[i].query, script[i].body ? "application/json" : NULL,
                          script[i].body, t, false, &b, NULL);
        if (st >= 300)
            fail_msg("%s %s: %d %s", api_method_name(script[i].m), script[i].path, st, b);
        free(b);
    }
    /* BITFIELD_RO reads: no record, no key */
    size_t records = j.n;
    assert_int_equal(serve_at(&a, API_POST, "/bits/ro/field_ro", NULL, "application/json",
                              "{\"ops\":[{\"get\":\"u8\",\"offset\":0}]}", t, false, NULL, NULL),
                     200);
    assert_int_equal(j.n, records);
    assert_int_equal(serve_at(&a, API_GET, "/keys/ro", NULL, NULL, NULL, t, false, NULL, NULL), 404);
    /* SCANDUMP / LOADCHUNK: binary bodies in the journal */
    static const char *const copies[][2] = { { "/bloom/seen", "/bloom/bcopy" }, { "/cuckoo/cf", "/cuckoo/ccopy" } };
    for (size_t i = 0; i < 2; i++, t += 1000000)
        copy_by_dump(&a, copies[i][0], copies[i][1], t);
    /* a PUT /bloom journaled before error_rate and capacity were required replays with the defaults */
    assert_int_equal(serve_at(&a, API_PUT, "/bloom/old", NULL, "application/json", "{\"capacity\":10}", t, false,
                              NULL, NULL),
                     400);
    assert_int_equal(serve_at(&r, API_PUT, "/bloom/old", NULL, "application/json", "{\"capacity\":10}", t, true,
                              NULL, NULL),
                     201);
    assert_int_equal(serve_at(&r, API_DELETE, "/keys/old", NULL, NULL, NULL, t, true, NULL, NULL), 200);
    /* so does a CMS of depth 0 by probability (tally made it depth 1; RedisBloom refuses it, as tally now does) */
    static const char depth0[] = "{\"error\":0.9,\"probability\":0.9999999999999999}";
    assert_int_equal(serve_at(&a, API_PUT, "/cms/old", NULL, "application/json", depth0, t, false, NULL, NULL), 400);
    char *b0;
    assert_int_equal(serve_at(&r, API_PUT, "/cms/old", NULL, "application/json", depth0, t, true, &b0, NULL), 201);
    assert_non_null(strstr(b0, "\"depth\":1"));
    free(b0);
    assert_int_equal(serve_at(&r, API_DELETE, "/keys/old", NULL, NULL, NULL, t, true, NULL, NULL), 200);
    assert_true(j.n >= sizeof(script) / sizeof(script[0]) - 1);
    for (size_t i = 0; i < j.n; i++) {
        replay_record(&r, &j.r[i]);
    }
    for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
        char *x = read_answer(&a, reads[i], t), *y = read_answer(&r, reads[i], t);
        if (strcmp(x, y) != 0)
            fail_msg("GET %s differs after replay:\n  served:   %s\n  replayed: %s", reads[i], x, y);
        free(x);
        free(y);
    }
    journal_free(&j);
    ks_free(a.ks);
    ks_free(r.ks);
}

/* The request record as DESIGN's journal format spells it, field by field
 * through the wbuf writers: journalfmt_put_request lays it out in place and
 * must produce the same bytes. */
static void journal_record_reference(wbuf_t *out, const journal_req_t *q)
{
    size_t start = out->len;
    wbuf_put_u32(out, 0);
    wbuf_put_u32(out, 0);
    size_t pstart = out->len;
    wbuf_put_u8(out, JOURNAL_REC_REQUEST);
    wbuf_put_i64(out, q->now_ns);
    wbuf_put_u8(out, q->method);
    wbuf_put_u16(out, (uint16_t)q->path_len);
    wbuf_put_bytes(out, q->path, q->path_len);
    wbuf_put_u32(out, (uint32_t)q->query_len);
    wbuf_put_bytes(out, q->query, q->query_len);
    wbuf_put_u16(out, (uint16_t)q->ctype_len);
    wbuf_put_bytes(out, q->ctype, q->ctype_len);
    wbuf_put_u32(out, (uint32_t)q->body_len);
    wbuf_put_bytes(out, q->body, q->body_len);
    uint32_t len = (uint32_t)(out->len - pstart);
    wbuf_patch_u32(out, start, len);
    wbuf_patch_u32(out, start + 4, (uint32_t)tally_xxh64(out->data + pstart, len, len));
}

/* The journal space a request secures is computed from
 * journalfmt_request_size: it must be exactly what a record takes; the
 * record is the reference's bytes, appended after what the buffer holds,
 * and reads back as the request. */
/* A key's dump (core/keydump.h, the absolute expiry in the TTL's place):
 * *out malloc'd, *n 0 (and *out NULL) when the key is missing. */
static void key_dump(api_server_t *srv, const char *key, size_t klen, uint8_t **out, size_t *n)
{
    ks_key_t k = ks_key(srv->ks, key, klen);
    ks_shard_t *sh = ks_shard_at(srv->ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(srv->ks, &k, T0 / 1000000);
    wbuf_t w = WBUF_INIT;
    if (e) {
        int64_t x = ks_entry_expire(srv->ks, e);
        keydump_encode(ks_entry_type(e), ks_entry_value(e), x == KS_NO_EXPIRY ? KEYDUMP_NO_TTL : x, &w);
    }
    ks_shard_unlock(sh);
    assert_false(w.oom);
    *out = w.data;
    *n = w.len;
}

/* A request through a policy is journaled as its algorithm's command record
 * (cmd/throttle.h) holding what the policy resolved - the key with the
 * policy's prefix, the parameters, shadow mode - and never the policy: for
 * every algorithm, shadow, quantities, and keys with quotes, backslashes,
 * control bytes and UTF-8, the record decodes to exactly those, and replayed
 * on a server without the policies file it rebuilds the same state. */
static void test_policy_records(void **state)
{
    (void)state;
    static const char policies[] =
        "{\"policies\": {"
        "\"g\": {\"max_burst\": 5, \"count_per_period\": 10, \"period\": 60},"
        "\"l\": {\"algorithm\": \"sliding_log\", \"max_count\": 3, \"period\": 7},"
        "\"s\": {\"algorithm\": \"sliding_window\", \"max_count\": 1000000000000000, \"period\": 1},"
        "\"f\": {\"algorithm\": \"fixed_window\", \"max_count\": 1, \"period\": 86400, \"shadow\": true},"
        "\"t\": {\"algorithm\": \"token_bucket\", \"capacity\": 10, \"refill_rate\": 0.000001},"
        "\"u\": {\"algorithm\": \"token_bucket\", \"capacity\": 3, \"refill_rate\": 2.5}}}";
    static const char *const keys[] = {
        "\"a\"", "\"q\\\"uote\"", "\"back\\\\slash\"", "\"ctl\\u0001\\u001f\\n\\t\\b\\f\\r\"",
        "\"\xc3\xa9t\xc3\xa9 \xe2\x82\xac\"", "\"del\x7f/slash\"",
    };
    static const char *const names[] = { "g", "l", "s", "f", "t", "u" };
    journal_t j = { 0 };
    api_server_t srv, r;
    server_init(&srv, &j);
    server_init(&r, NULL);
    srv.policies = api_policies_create();
    assert_non_null(srv.policies);
    size_t count;
    char err[256];
    if (!api_policies_load(srv.policies, policies, strlen(policies), &count, err, sizeof(err)))
        fail_msg("%s", err);
    char body[512];
    size_t served = 0;
    for (size_t p = 0; p < sizeof(names) / sizeof(names[0]); p++)
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
            for (int q = 0; q < 3; q++) {
                snprintf(body, sizeof(body), "{\"policy\":\"%s\",\"key\":%s,\"quantity\":%d}", names[p], keys[k],
                         q == 2 ? 1000000 : q);
                size_t before = j.n;
                char *out = NULL;
                int st = serve(&srv, API_POST, "/throttle", NULL, body, &out);
                if (st != 200)
                    fail_msg("%s: %d %s", body, st, out ? out : "");
                free(out);
                served++;
                if (j.n == before)
                    continue;   /* a peek or a refusal: no record */
                assert_int_equal(j.n, before + 1);
                /* the record: the policy's algorithm, its resolved key and parameters */
                const record_t *rec = &j.r[before];
                const policy_t *pol = policy_find(srv.policies, names[p]);
                assert_int_equal(rec->kind, JOURNAL_REC_COMMAND);
                assert_int_equal(rec->op, cmd_throttle_def(pol->params.algo)->id);
                json_t *kj = json_loads(keys[k], JSON_DECODE_ANY, NULL);
                assert_non_null(kj);
                char want[64];
                int wn = snprintf(want, sizeof(want), "%s:%.*s", names[p], (int)json_string_length(kj),
                                  json_string_value(kj));
                cmd_throttle_item_t it;
                rbuf_t in = rbuf_make(rec->body, rec->body_len);
                const char *why;
                assert_true(cmd_def_by_id(rec->op)->decode(&in, &it, &why));
                assert_true(rbuf_done(&in));
                assert_int_equal(it.klen, (size_t)wn);
                assert_memory_equal(it.key, want, (size_t)wn);
                assert_memory_equal(&it.p, &pol->params, sizeof(it.p));
                assert_int_equal(it.quantity, q == 2 ? 1000000 : q);
                assert_int_equal(it.shadow, pol->shadow);
                json_decref(kj);
            }
    /* numbers of every length up to the limit, 10^15 (fresh keys: each taken) */
    size_t before = j.n;
    int64_t q = 1;
    for (int d = 1; d <= 16; d++, q *= 10)
        for (int64_t v = q - 1; v <= q; v++) {
            snprintf(body, sizeof(body), "{\"policy\":\"s\",\"key\":\"n%lld\",\"quantity\":%lld}", (long long)v,
                     (long long)v);
            assert_int_equal(serve(&srv, API_POST, "/throttle", NULL, body, NULL), 200);
            served++;
        }
    assert_int_equal(j.n - before, 31);   /* all but the peek (quantity 0) */
    assert_true(j.n >= 36 && j.n <= served);   /* a peek or a refusal changes nothing: no record */
    /* replayed without the policies: the same limiters, byte for byte */
    for (size_t i = 0; i < j.n; i++) {
        const record_t *q2 = &j.r[i];
        journal_req_t c = { .kind = q2->kind, .op = q2->op, .now_ns = q2->now_ns, .path = "", .query = "",
                            .ctype = "", .body = q2->body, .body_len = q2->body_len };
        cmd_err_t e;
        if (!cmd_replay(&r, &c, 0, &e))
            fail_msg("replay of record %zu: %s", i, e.message);
    }
    for (size_t p = 0; p < sizeof(names) / sizeof(names[0]); p++)
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            json_t *kj = json_loads(keys[k], JSON_DECODE_ANY, NULL);
            char key[64];
            int kn = snprintf(key, sizeof(key), "%s:%.*s", names[p], (int)json_string_length(kj), json_string_value(kj));
            json_decref(kj);
            uint8_t *x, *y;
            size_t xn, yn;
            key_dump(&srv, key, (size_t)kn, &x, &xn);
            key_dump(&r, key, (size_t)kn, &y, &yn);
            if (xn != yn || (xn && memcmp(x, y, xn) != 0))
                fail_msg("key %s differs after replay", key);
            free(x);
            free(y);
        }
    api_policies_free(srv.policies);
    ks_free(srv.ks);
    ks_free(r.ks);
    journal_free(&j);
}

/* The JSON string writer against jansson's printer. */
static void test_json_string_escaping(void **state)
{
    (void)state;
    /* the escaping itself against jansson's printer: every ASCII byte, and
     * UTF-8 (jansson prints only valid UTF-8) */
    static const char utf8[] = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    char raw[128 + sizeof(utf8)], mine[API_JSON_STRING_MAX(sizeof(raw))];
    for (int c = 1; c < 128; c++)
        raw[c - 1] = (char)c;
    memcpy(raw + 127, utf8, sizeof(utf8) - 1);
    size_t total = 127 + sizeof(utf8) - 1;
    for (size_t n = 0; n < 127; n += 9) {
        size_t len = total - n;
        json_t *str = json_stringn_nocheck(raw + n, len);
        char *ref = json_dumps(str, JSON_ENCODE_ANY | JSON_COMPACT);
        assert_non_null(ref);
        /* tally writes \u00XX with lowercase hex digits, as it always has */
        for (char *u = ref; (u = strstr(u, "\\u00")); u += 4)
            for (int d = 4; d < 6; d++)
                if (u[d] >= 'A' && u[d] <= 'F')
                    u[d] = (char)(u[d] - 'A' + 'a');
        size_t m = (size_t)(api_json_string_at(mine, raw + n, len) - mine);
        if (m != strlen(ref) || memcmp(mine, ref, m) != 0)
            fail_msg("escaping from byte %zu:\n  mine    %.*s\n  jansson %s", n + 1, (int)m, mine, ref);
        free(ref);
        json_decref(str);
    }
}

static void test_journal_record_size(void **state)
{
    (void)state;
    static const uint8_t body[] = "{\"by\":1}";
    const journal_req_t reqs[] = {
        { .now_ns = T0, .method = API_DELETE, .path = "/keys/k", .path_len = 7, .query = "", .ctype = "" },
        { .now_ns = T0, .method = API_POST, .path = "/counter/x", .path_len = 10, .query = "a=1", .query_len = 3,
          .ctype = "application/json", .ctype_len = 16, .body = body, .body_len = sizeof(body) - 1 },
    };
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        wbuf_t b = WBUF_INIT;
        journalfmt_put_request(&b, &reqs[i]);
        assert_false(b.oom);
        assert_int_equal(b.len, journalfmt_request_size(&reqs[i]));
        wbuf_free(&b);
    }
    /* many shapes, each appended to a buffer of odd length */
    rng_t r;
    rng_seed(&r, 20);
    char text[3000];
    for (size_t i = 0; i < sizeof(text); i++)
        text[i] = (char)(' ' + rng_below(&r, 95));
    wbuf_t got = WBUF_INIT, want = WBUF_INIT;
    for (int i = 0; i < 2000; i++) {
        size_t pre = rng_below(&r, 70);
        journal_req_t q = { .now_ns = (int64_t)rng_next(&r), .method = (uint8_t)rng_below(&r, 8),
                            .path = text + rng_below(&r, 100), .path_len = 1 + rng_below(&r, 600),
                            .query = text + rng_below(&r, 100), .query_len = i % 3 ? rng_below(&r, 300) : 0,
                            .ctype = text, .ctype_len = i % 2 ? 16 : 0,
                            .body = (const uint8_t *)text + rng_below(&r, 500),
                            .body_len = i % 5 ? rng_below(&r, 2000) : 0 };
        got.len = want.len = 0;
        wbuf_put_bytes(&got, text, pre);
        wbuf_put_bytes(&want, text, pre);
        journalfmt_put_request(&got, &q);
        journal_record_reference(&want, &q);
        assert_false(got.oom);
        assert_int_equal(got.len, want.len);
        assert_int_equal(got.len - pre, journalfmt_request_size(&q));
        assert_memory_equal(got.data, want.data, got.len);
        journal_req_t back;
        size_t used = 0;
        const char *why = NULL;
        assert_int_equal(journalfmt_parse_record(got.data + pre, got.len - pre, &back, &used, &why), PARSE_OK);
        assert_int_equal(used, got.len - pre);
        assert_true(back.now_ns == q.now_ns && back.method == q.method && back.path_len == q.path_len &&
                    back.query_len == q.query_len && back.body_len == q.body_len);
    }
    wbuf_free(&got);
    wbuf_free(&want);
}

/* The epoch record of a promotion survives the journal's framing; nothing
 * else is taken for one (a damaged one - above TALLY_EPOCH_MAX included - is
 * refused, a request is never mistaken for it). */
static void test_journal_epoch_record(void **state)
{
    (void)state;
    const uint64_t epochs[] = { 0, 1, 42, TALLY_EPOCH_MAX };
    for (size_t i = 0; i < sizeof(epochs) / sizeof(epochs[0]); i++) {
        char buf[JOURNAL_EPOCH_BUF];
        journal_req_t rec, back;
        journalfmt_epoch_request(epochs[i], T0, API_POST, buf, &rec);
        wbuf_t b = WBUF_INIT;
        journalfmt_put_request(&b, &rec);
        assert_int_equal(b.len, journalfmt_request_size(&rec));
        size_t used = 0;
        const char *why = NULL;
        assert_int_equal(journalfmt_parse_record(b.data, b.len, &back, &used, &why), PARSE_OK);
        assert_int_equal(used, b.len);
        uint64_t e = 0;
        assert_true(journalfmt_is_epoch(&back));
        assert_true(journalfmt_epoch_parse(&back, &e));
        assert_true(e == epochs[i]);
        assert_int_equal(back.now_ns, T0);
        wbuf_free(&b);
    }
    static const char *const bad[] = { "",    "x", "12a", "-1", "9007199254740992", "9223372036854775807",
                                       "18446744073709551615", "18446744073709551616", "99999999999999999999999" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        journal_req_t q = { .now_ns = T0, .method = API_POST, .path = JOURNAL_EPOCH_PATH,
                            .path_len = strlen(JOURNAL_EPOCH_PATH), .query = "", .ctype = "",
                            .body = (const uint8_t *)bad[i], .body_len = strlen(bad[i]) };
        uint64_t e = 7;
        assert_true(journalfmt_is_epoch(&q));
        assert_false(journalfmt_epoch_parse(&q, &e));
        assert_true(e == 7);
    }
    const journal_req_t req = { .now_ns = T0, .method = API_POST, .path = "/tally:epoch", .path_len = 12,
                                .query = "", .ctype = "", .body = (const uint8_t *)"3", .body_len = 1 };
    uint64_t e;
    assert_false(journalfmt_is_epoch(&req));
    assert_false(journalfmt_epoch_parse(&req, &e));
}

/* ------------------------------------------------------------------------ */
/* JSON numbers vs core's coordinate fast path                              */
/* ------------------------------------------------------------------------ */

static void test_coord_text(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 77);
    char a[40], b[32];
    long fast = 0;
    for (long i = 0; i < 300000; i++) {
        double v, lon, lat;
        switch (i % 4) {
        case 0:
            geohash_decode_score(rng_next(&r) & ((1ULL << 52) - 1), &lon, &lat);
            v = i % 8 ? lon : lat;
            break;
        case 1: v = (rng_double(&r) - 0.5) * 2000; break;
        case 2: v = (rng_double(&r) - 0.5) * 2e-3; break;
        default: v = (double)(long)((rng_double(&r) - 0.5) * 360) + (i % 3 ? 0.5 : 0); break;
        }
        if (!geo_format_coord(v, b))
            continue;
        fast++;
        api_format_double(v, a, sizeof(a));
        if (strcmp(a, b) != 0)
            fail_msg("%.17g: JSON writer %s, fast path %s", v, a, b);
    }
    assert_true(fast > 250000);
}

/* ------------------------------------------------------------------------ */
/* Taking changes back (cmd/undo.h)                                         */
/* ------------------------------------------------------------------------ */

static cmd_undo_t *undo_kept;   /* what undo_register received, newest first */
static uint64_t undo_pos;

static bool undo_begin_on(void *ud)
{
    (void)ud;
    return true;
}

static void undo_end_nop(void *ud) { (void)ud; }

static uint64_t undo_keep(void *ud, cmd_undo_t *list)
{
    (void)ud;
    undo_pos++;
    while (list) {
        cmd_undo_t *next = list->next;
        list->pos = undo_pos;
        list->next = undo_kept;
        undo_kept = list;
        list = next;
    }
    return undo_pos;
}

/* The answer of GET /keys/{key}/dump at now_ns (404: "absent"). */
static char *dump_at(api_server_t *srv, const char *key, int64_t now_ns)
{
    char path[64], *b = NULL;
    snprintf(path, sizeof(path), "/keys/%s/dump", key);
    int st = serve_at(srv, API_GET, path, NULL, NULL, NULL, now_ns, false, &b, NULL);
    if (st == 404) {
        free(b);
        return dupn("absent", 6);
    }
    assert_int_equal(st, 200);
    return b;
}

/* Changes of several families, a key created, a key with a TTL and a
 * multi-key merge are captured, then taken back newest first: every key
 * reads back as before (its remaining TTL too), and replaying the journal -
 * the changes and the restoring records - into a fresh keyspace rebuilds the
 * same state. */
static void test_undo_takes_changes_back(void **state)
{
    (void)state;
    journal_t j = { 0 };
    api_server_t a, r;
    server_init(&a, &j);
    int64_t t = T0;
    static const struct { api_method_t m; const char *path, *body; } setup[] = {
        { API_POST, "/counter/c", "{\"by\":5,\"ttl\":60}" },
        { API_POST, "/bloom/b", "{\"items\":[\"x\"]}" },
        { API_POST, "/uv/u1", "{\"items\":[\"a\"]}" },
        { API_POST, "/uv/u2", "{\"items\":[\"b\"]}" },
        { API_POST, "/throttle", "{\"key\":\"g\",\"max_burst\":5,\"count_per_period\":10,\"period\":60}" },
    }, changes[] = {
        { API_POST, "/counter/c", "{\"by\":3}" },
        { API_POST, "/counter/c", "{\"by\":4,\"ttl\":5}" },
        { API_POST, "/counter/fresh", "{\"by\":1}" },
        { API_POST, "/bloom/b", "{\"items\":[\"y\"]}" },
        { API_POST, "/uv/m/merge", "{\"sources\":[\"u1\",\"u2\"]}" },
        { API_POST, "/throttle", "{\"key\":\"g\",\"max_burst\":5,\"count_per_period\":10,\"period\":60}" },
        { API_DELETE, "/keys/u1", NULL },
    };
    static const char *const keys[] = { "c", "b", "u1", "u2", "g", "fresh", "m" };
    enum { NKEYS = sizeof(keys) / sizeof(keys[0]) };
    for (size_t i = 0; i < sizeof(setup) / sizeof(setup[0]); i++, t += 1000000)
        assert_int_equal(serve_at(&a, setup[i].m, setup[i].path, NULL, "application/json", setup[i].body, t, false,
                                  NULL, NULL), 200);
    int64_t t_before = t;
    char *before[NKEYS];
    for (int k = 0; k < NKEYS; k++)
        before[k] = dump_at(&a, keys[k], t_before);

    a.hooks.undo_begin = undo_begin_on;
    a.hooks.undo_end = undo_end_nop;
    a.hooks.undo_register = undo_keep;
    for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++, t += 1000000)
        assert_int_equal(serve_at(&a, changes[i].m, changes[i].path, NULL, "application/json", changes[i].body, t,
                                  false, NULL, NULL), 200);
    a.hooks.undo_begin = NULL;
    /* a key locked without a change keeps nothing: reads do not capture */
    size_t kept = 0;
    for (cmd_undo_t *u = undo_kept; u; u = u->next)
        kept++;
    assert_int_equal(kept, 9);   /* one per key locked by each change: the merge locks m, u1 and u2 */

    /* newest first: the last restore of a key is its oldest state */
    while (undo_kept) {
        cmd_undo_t *u = undo_kept;
        undo_kept = u->next;
        u->next = NULL;
        uint64_t lsn = 0;
        assert_true(cmd_undo_apply(&a, u, t, &lsn));
        assert_true(lsn > 0);
        cmd_undo_free(&a, u);
    }
    /* the same instant as before, shifted: the TTL counts down alike */
    for (int k = 0; k < NKEYS; k++) {
        char *now = dump_at(&a, keys[k], t_before);
        if (strcmp(before[k], now) != 0)
            fail_msg("key %s was not restored", keys[k]);
        free(now);
    }

    /* the journal replayed rebuilds the state taken back */
    server_init(&r, NULL);
    for (size_t i = 0; i < j.n; i++)
        replay_record(&r, &j.r[i]);
    for (int k = 0; k < NKEYS; k++) {
        char *x = dump_at(&r, keys[k], t_before);
        if (strcmp(before[k], x) != 0)
            fail_msg("key %s differs after replay", keys[k]);
        free(x);
        free(before[k]);
    }
    ks_free(r.ks);
    ks_free(a.ks);
    journal_free(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router),
        cmocka_unit_test(test_readers),
        cmocka_unit_test(test_key_handle_answers),
        cmocka_unit_test(test_replay_determinism),
        cmocka_unit_test(test_journal_record_size),
        cmocka_unit_test(test_policy_records),
        cmocka_unit_test(test_json_string_escaping),
        cmocka_unit_test(test_journal_epoch_record),
        cmocka_unit_test(test_undo_takes_changes_back),
        cmocka_unit_test(test_coord_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
