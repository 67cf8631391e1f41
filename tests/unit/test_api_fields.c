/*
 * test_api_fields.c - the two field sources (api/params.h: api_fields_t) give the
 * same rate-limit items and the same errors.  GET /throttle/{key} reads its
 * item straight from the decoded query; it used to build a jansson object
 * from the query first (integers, numbers and booleans typed, the rest
 * strings, a repeated parameter refused) and read that.  The reference here
 * is that conversion, kept as it was, fed to the JSON object source: for
 * seeded random and edge-case parameter sets (valid, wrong types, out of
 * range, duplicates, empty values, huge and negative numbers, floats,
 * "true"/"false", NUL bytes, bytes that are not UTF-8) both must give the
 * same item field for field, or the same error code, field and message byte
 * for byte.  The same sets, percent-encoded, are then served through the
 * router (GET /throttle/{key}) and must answer with that error or a decision.
 *
 * POST /throttle reads a flat body (api_json_flat_object's shape) through the
 * third source, the body's own members (api_body_fields), without a tree.
 * For seeded random and edge-case bodies (flat or not, valid or not, unknown
 * fields, wrong types, out-of-range and 18/19-digit integers, -0, null,
 * whitespace, repeated names, {}, strings of every printable ASCII byte) the
 * outcome through it must be the outcome through json_loadb's tree of the
 * same body (JSON_REJECT_DUPLICATES), and served through the router the
 * body must get the answer (status, headers, body, byte for byte) of the same
 * JSON with one name escaped, which the old path reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/router.h"
#include "api/ratelimit.h"

#define T0 1700000000000000000LL
#define MAX_PARAMS 24

static const char policies_text[] =
    "{\"policies\": {\"p1\": {\"max_burst\": 5, \"count_per_period\": 10, \"period\": 60, \"key\": \"{path}\"},"
    " \"tb\": {\"algorithm\": \"token_bucket\", \"capacity\": 10, \"refill_rate\": 2.5}}}";

/* The names GET /throttle/{key} accepts (deny_status is not an item field). */
static const char *const names[] = { "policy", "algorithm", "max_burst", "count_per_period", "period", "max_count",
                                     "capacity", "refill_rate", "quantity", "shadow", "deny_status" };
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* Values, as decoded bytes (lengths explicit: some hold NUL). */
typedef struct val {
    const char *s;
    size_t len;
} val_t;
#define V(lit) { lit, sizeof(lit) - 1 }
static const val_t values[] = {
    V("0"), V("1"), V("5"), V("15"), V("30"), V("60"), V("-1"), V("-0"), V("+5"), V("05"), V(" 5"), V("5 "),
    V("2305843009"), V("2305843010"), V("9223372036854775807"), V("9223372036854775808"),
    V("-9223372036854775808"), V("-9223372036854775809"), V("99999999999999999999999"), V("1e3"), V("1.5"),
    V("2.5"), V("0.000001"), V("0.0000001"), V("1e12"), V("1e13"), V("1e400"), V(".5"), V("5."), V("nan"),
    V("inf"), V("0x10"), V(""), V("true"), V("false"), V("TRUE"), V("yes"), V("gcra"), V("sliding_log"),
    V("sliding_window"), V("fixed_window"), V("token_bucket"), V("bogus"), V("p1"), V("tb"), V("nope"),
    V("true\0x"), V("5\0\xff"), V("\xff"), V("p1\xff"), V("\xc3\xa9t\xc3\xa9"), V("\xed\xa0\x80"),
    V("\xc0\xaf"), V("\0"), V("a b&c=d+e%"), V("429"),
};
#define NVALUES (sizeof(values) / sizeof(values[0]))

typedef struct pset {
    api_param_t p[MAX_PARAMS];
    char name[MAX_PARAMS][32];
    char value[MAX_PARAMS][64];
    int n;
} pset_t;

static void pset_add(pset_t *s, const char *name, const char *v, size_t vlen)
{
    assert_true(s->n < MAX_PARAMS && vlen < sizeof(s->value[0]));
    int i = s->n++;
    strcpy(s->name[i], name);
    memcpy(s->value[i], v, vlen);
    s->value[i][vlen] = '\0';
    s->p[i].name = s->name[i];
    s->p[i].value = s->value[i];
    s->p[i].vlen = vlen;
}

/* The reference: the query as the jansson object GET /throttle/{key} built
 * before it read the query directly, conversion unchanged.  NULL with
 * *dup set to the repeated name. */
static json_t *reference_object(const pset_t *s, const char *skip, const char **dup)
{
    json_t *o = json_object();
    assert_non_null(o);
    for (int i = 0; i < s->n; i++) {
        const api_param_t *q = &s->p[i];
        if (!strcmp(q->name, skip))
            continue;
        size_t nlen = strlen(q->name);
        if (json_object_getn(o, q->name, nlen)) {
            *dup = q->name;
            json_decref(o);
            return NULL;
        }
        int64_t iv;
        double dv;
        json_t *v;
        if (api_parse_i64(q->value, q->vlen, &iv))
            v = json_integer(iv);
        else if (api_parse_double(q->value, q->vlen, &dv))
            v = json_real(dv);
        else if (!strcmp(q->value, "true") || !strcmp(q->value, "false"))
            v = json_boolean(q->value[0] == 't');
        else
            v = json_stringn(q->value, q->vlen);
        json_object_setn_new_nocheck(o, q->name, nlen, v);
    }
    return o;
}

typedef struct outcome {
    bool ok;
    rl_item_t it;
    api_err_t e;
} outcome_t;

static void outcome_release(outcome_t *o) { rl_item_release(&o->it); }

static void by_query(api_server_t *srv, const pset_t *s, outcome_t *out)
{
    api_req_t req;
    memset(&req, 0, sizeof(req));
    req.params = (api_param_t *)s->p;
    req.nparams = s->n;
    api_fields_t f;
    api_flat_t room;
    memset(&out->it, 0, sizeof(out->it));
    out->ok = api_fields_query(&req, "deny_status", &room, &f, &out->e) &&
              rl_item_parse(srv, &req, &f, "k", 1, NULL, 0, true, &out->it, &out->e);
}

static void by_reference(api_server_t *srv, const pset_t *s, outcome_t *out)
{
    api_req_t req;
    memset(&req, 0, sizeof(req));
    memset(&out->it, 0, sizeof(out->it));
    const char *dup = NULL;
    json_t *o = reference_object(s, "deny_status", &dup);
    if (!o) {
        api_err_set(&out->e, API_E_BAD_REQUEST, dup, "query parameter '%s' given more than once", dup);
        out->ok = false;
        return;
    }
    api_fields_t f = api_fields_json(o);
    out->ok = rl_item_parse(srv, &req, &f, "k", 1, NULL, 0, true, &out->it, &out->e);
    if (out->ok && out->it.key_buf == NULL)
        out->it.key = "k";   /* the path key, not the object's storage */
    json_decref(o);
}

static void describe(const pset_t *s, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->n && k + 1 < n; i++) {
        k += (size_t)snprintf(buf + k, n - k, "%s%s=", i ? "&" : "", s->p[i].name);
        for (size_t j = 0; j < s->p[i].vlen && k + 4 < n; j++)
            k += (size_t)snprintf(buf + k, n - k, (unsigned char)s->p[i].value[j] < 0x20 ||
                                                          (unsigned char)s->p[i].value[j] > 0x7e
                                                      ? "\\x%02x"
                                                      : "%c",
                                  (unsigned char)s->p[i].value[j]);
    }
}

/* Both sources on one set; returns the reference outcome (caller releases). */
static void compare(api_server_t *srv, const pset_t *s, outcome_t *ref)
{
    outcome_t q;
    by_query(srv, s, &q);
    by_reference(srv, s, ref);
    char what[512];
    describe(s, what, sizeof(what));
    if (q.ok != ref->ok)
        fail_msg("%s: query %s, reference %s (%s)", what, q.ok ? "ok" : "error", ref->ok ? "ok" : "error",
                 q.ok ? ref->e.message : q.e.message);
    if (q.ok) {
        assert_ptr_equal(q.it.policy, ref->it.policy);
        assert_int_equal(q.it.klen, ref->it.klen);
        assert_memory_equal(q.it.key, ref->it.key, q.it.klen);
        assert_memory_equal(&q.it.p, &ref->it.p, sizeof(q.it.p));
        assert_int_equal(q.it.quantity, ref->it.quantity);
        assert_int_equal(q.it.shadow, ref->it.shadow);
    } else {
        if (q.e.code != ref->e.code || strcmp(q.e.field, ref->e.field) || strcmp(q.e.message, ref->e.message))
            fail_msg("%s: query [%d %s] %s, reference [%d %s] %s", what, q.e.code, q.e.field, q.e.message,
                     ref->e.code, ref->e.field, ref->e.message);
        assert_int_equal(q.e.long_field == NULL, ref->e.long_field == NULL);
    }
    outcome_release(&q);
}

static uint64_t rng_state;
static uint64_t next_rand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The set as a query string, each byte percent-encoded when it must be and
 * at random otherwise. */
static void encode_query(const pset_t *s, char *out, size_t cap)
{
    size_t k = 0;
    for (int i = 0; i < s->n; i++) {
        if (i)
            out[k++] = '&';
        for (int part = 0; part < 2; part++) {
            const char *b = part ? s->p[i].value : s->p[i].name;
            size_t n = part ? s->p[i].vlen : strlen(b);
            if (part)
                out[k++] = '=';
            for (size_t j = 0; j < n; j++) {
                unsigned char c = (unsigned char)b[j];
                bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                             c == '_' || c == '.' || c == '-';
                assert_true(k + 4 < cap);
                if (plain && next_rand() % 2)
                    out[k++] = (char)c;
                else
                    k += (size_t)snprintf(out + k, cap - k, "%%%02X", c);
            }
        }
    }
    out[k] = '\0';
}

/* Served through the router: the reference's error (status, field and
 * message), or a decision. */
static void check_served(api_server_t *srv, const pset_t *s, const outcome_t *ref, int serial)
{
    char query[1024], path[64];
    encode_query(s, query, sizeof(query));
    snprintf(path, sizeof(path), "/throttle/k%d", serial);
    api_req_t req;
    api_req_init(&req, API_GET, path, strlen(path), T0);
    req.query = query;
    req.query_len = strlen(query);
    api_resp_t resp;
    api_dispatch(srv, &req, &resp);
    if (ref->ok) {
        if (resp.status != 200 && resp.status != 429)
            fail_msg("?%s: %d %.*s", query, resp.status, (int)resp.len, resp.body);
    } else {
        assert_int_equal(resp.status, 400);
        json_t *j = json_loadb(resp.body, resp.len, 0, NULL);
        assert_non_null(j);
        json_t *e = json_object_get(j, "error");
        const char *msg = json_string_value(json_object_get(e, "message"));
        const char *field = json_string_value(json_object_get(e, "field"));
        if (!msg || strcmp(msg, ref->e.message) || strcmp(field ? field : "", ref->e.field))
            fail_msg("?%s: served [%s] %s, reference [%s] %s", query, field ? field : "", msg ? msg : "(none)",
                     ref->e.field, ref->e.message);
        json_decref(j);
    }
    api_resp_release(&resp);
    api_req_release(&req);
}

static void server_setup(api_server_t *srv)
{
    memset(srv, 0, sizeof(*srv));
    srv->ks = ks_create(2, 42);
    assert_non_null(srv->ks);
    srv->policies = api_policies_create();
    assert_non_null(srv->policies);
    size_t count;
    char err[256];
    assert_true(api_policies_load(srv->policies, policies_text, strlen(policies_text), &count, err, sizeof(err)));
    assert_int_equal(count, 2);
}

static void server_teardown(api_server_t *srv)
{
    api_policies_free(srv->policies);
    ks_free(srv->ks);
}

static void run_set(api_server_t *srv, const pset_t *s, int serial, bool served)
{
    outcome_t ref;
    policies_read_lock(srv->policies);
    compare(srv, s, &ref);
    policies_read_unlock(srv->policies);
    if (served)
        check_served(srv, s, &ref, serial);
    outcome_release(&ref);
}

/* Hand-picked sets: each rule at its edge. */
static void test_fields_edges(void **state)
{
    (void)state;
    api_server_t srv;
    server_setup(&srv);
    static const char *const sets[][MAX_PARAMS * 2 + 1] = {
        { "max_burst", "15", "count_per_period", "30", "period", "60", NULL },
        { "max_burst", "15", "count_per_period", "30", "period", "60", "quantity", "0", "shadow", "true", NULL },
        { "max_burst", "15", "max_burst", "15", NULL },
        { "deny_status", "429", "max_burst", "1", "count_per_period", "1", "period", "1", NULL },
        { "max_burst", "15", "count_per_period", "30", "period", "2305843010", NULL },
        { "max_burst", "-1", "count_per_period", "30", "period", "60", NULL },
        { "max_burst", "1.5", "count_per_period", "30", "period", "60", NULL },
        { "max_burst", "", "count_per_period", "30", "period", "60", NULL },
        { "max_burst", "true", NULL },
        { "algorithm", "token_bucket", "capacity", "10", "refill_rate", "2", NULL },
        { "algorithm", "token_bucket", "capacity", "10", "refill_rate", "1e13", NULL },
        { "algorithm", "token_bucket", "capacity", "10", "refill_rate", "x", NULL },
        { "algorithm", "token_bucket", "capacity", "10", NULL },
        { "algorithm", "sliding_log", "max_count", "10", "period", "60", "max_burst", "1", NULL },
        { "algorithm", "5", NULL },
        { "algorithm", "bogus", NULL },
        { "policy", "p1", NULL },
        { "policy", "p1", "quantity", "3", NULL },
        { "policy", "p1", "period", "60", NULL },
        { "policy", "p1", "shadow", "false", NULL },
        { "policy", "nope", NULL },
        { "policy", "5", NULL },
        { "quantity", "-1", NULL },
        { "quantity", "x", "policy", "p1", NULL },
        { "shadow", "1", "max_burst", "1", "count_per_period", "1", "period", "1", NULL },
        { "shadow", "", NULL },
        { NULL },
    };
    for (int i = 0; sets[i][0]; i++) {
        pset_t s = { .n = 0 };
        for (int k = 0; sets[i][k]; k += 2)
            pset_add(&s, sets[i][k], sets[i][k + 1], strlen(sets[i][k + 1]));
        run_set(&srv, &s, i, !s.n || strcmp(s.p[0].name, "deny_status"));
    }
    /* bytes the JSON string could not hold, and NUL */
    pset_t s = { .n = 0 };
    pset_add(&s, "policy", "\xff", 1);
    pset_add(&s, "policy", "p1", 2);   /* the first was absent: not a repeat */
    run_set(&srv, &s, 100, true);
    s.n = 0;
    pset_add(&s, "policy", "p1", 2);
    pset_add(&s, "policy", "\xff", 1);   /* a repeat, whatever its value */
    run_set(&srv, &s, 101, true);
    s.n = 0;
    pset_add(&s, "max_burst", "1\0\xff", 3);   /* read up to the NUL, as strtoll did */
    pset_add(&s, "count_per_period", "1", 1);
    pset_add(&s, "period", "1", 1);
    pset_add(&s, "shadow", "true\0x", 6);
    run_set(&srv, &s, 102, true);
    /* more fields than the room holds: read in place, the same outcome */
    for (int variant = 0; variant < 3; variant++) {
        s.n = 0;
        pset_add(&s, "max_burst", "1", 1);
        pset_add(&s, "count_per_period", "1", 1);
        pset_add(&s, "period", "1", 1);
        for (int k = 0; k < 17; k++) {
            char nm[8];
            snprintf(nm, sizeof(nm), "x%d", k);
            pset_add(&s, nm, "7", 1);
            if (k == 3)
                pset_add(&s, "y", "\xff", 1);   /* absent: not a field */
        }
        if (variant == 1)
            pset_add(&s, "x4", "7", 1);   /* a repeat after the room is full */
        if (variant == 2)
            pset_add(&s, "period", "\xff", 1);   /* an absent repeat */
        run_set(&srv, &s, 103 + variant, false);
    }
    server_teardown(&srv);
}

/* Seeded random sets, mostly names the route takes with values from the
 * edge list; a share of them served through the router too. */
static void test_fields_random(void **state)
{
    (void)state;
    api_server_t srv;
    server_setup(&srv);
    rng_state = 20;
    for (int round = 0; round < 20000; round++) {
        pset_t s = { .n = 0 };
        int n = (int)(next_rand() % (MAX_PARAMS + 1));
        bool deny = false;
        for (int i = 0; i < n; i++) {
            const char *name = names[next_rand() % NNAMES];
            const val_t *v = &values[next_rand() % NVALUES];
            deny |= strcmp(name, "deny_status") == 0;
            pset_add(&s, name, v->s, v->len);
        }
        run_set(&srv, &s, 1000 + round, !deny && round % 8 == 0);
    }
    /* valid sets, so successes are compared as often as errors */
    for (int round = 0; round < 2000; round++) {
        pset_t s = { .n = 0 };
        static const char *const algos[] = { "gcra", "sliding_log", "sliding_window", "fixed_window",
                                             "token_bucket" };
        const char *algo = algos[next_rand() % 5];
        char a[24], b[24], c[24];
        snprintf(a, sizeof(a), "%llu", (unsigned long long)(next_rand() % 100 + 1));
        snprintf(b, sizeof(b), "%llu", (unsigned long long)(next_rand() % 100 + 1));
        snprintf(c, sizeof(c), "%llu.%llu", (unsigned long long)(next_rand() % 100),
                 (unsigned long long)(next_rand() % 1000 + 1));
        if (next_rand() % 2)
            pset_add(&s, "algorithm", algo, strlen(algo));
        else
            algo = "gcra";
        if (!strcmp(algo, "gcra")) {
            pset_add(&s, "max_burst", a, strlen(a));
            pset_add(&s, "count_per_period", b, strlen(b));
            pset_add(&s, "period", a, strlen(a));
        } else if (!strcmp(algo, "token_bucket")) {
            pset_add(&s, "capacity", a, strlen(a));
            const char *rate = next_rand() % 2 ? c : b;
            pset_add(&s, "refill_rate", rate, strlen(rate));
        } else {
            pset_add(&s, "max_count", a, strlen(a));
            pset_add(&s, "period", b, strlen(b));
        }
        if (next_rand() % 3 == 0)
            pset_add(&s, "quantity", b, strlen(b));
        if (next_rand() % 3 == 0) {
            const char *shadow = next_rand() % 2 ? "true" : "false";
            pset_add(&s, "shadow", shadow, strlen(shadow));
        }
        run_set(&srv, &s, 100000 + round, round % 8 == 0);
    }
    server_teardown(&srv);
}

/* ------------------------------------------------------------------------ */
/* POST /throttle: a flat body's members against jansson's tree             */
/* ------------------------------------------------------------------------ */

static const char *const post_fields[] = { "key", "policy", "algorithm", "max_burst", "count_per_period", "period",
                                           "max_count", "capacity", "refill_rate", "quantity", "shadow",
                                           "requests", NULL };

/* An answer as one comparable text: status, headers, body. */
static void answer_text(const api_resp_t *r, char *out, size_t n)
{
    size_t k = (size_t)snprintf(out, n, "%d %s|", r->status, r->ctype ? r->ctype : "");
    for (int i = 0; i < r->nheaders && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s: %s|", r->headers[i].name, r->headers[i].value);
    if (k < n)
        snprintf(out + k, n - k, "%.*s", (int)r->len, r->body ? r->body : "");
}

/* An item as one comparable text: policy, key, parameters, quantity, shadow. */
static void item_text(const rl_item_t *it, char *out, size_t n)
{
    char p[sizeof(it->p) * 2 + 1];
    for (size_t i = 0; i < sizeof(it->p); i++)
        snprintf(p + 2 * i, 3, "%02x", ((const unsigned char *)&it->p)[i]);
    snprintf(out, n, "ok %p %.*s %s %lld %d", (const void *)it->policy, (int)it->klen, it->key, p,
             (long long)it->quantity, it->shadow);
}

/* The reference outcome of a body as an answer text (the error, or the
 * item), from json_loadb's tree; false when the body is no flat candidate
 * (not a JSON object, or a batch). */
static bool body_reference(api_server_t *srv, const char *body, size_t n, char *out, size_t cap)
{
    json_t *o = json_loadb(body, n, JSON_REJECT_DUPLICATES, NULL);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return false;
    }
    api_req_t req;
    memset(&req, 0, sizeof(req));
    api_fields_t f = api_fields_json(o);
    api_err_t e;
    outcome_t r;
    memset(&r.it, 0, sizeof(r.it));
    const char *name;
    api_fields_iter_t it = { 0 };
    r.ok = true;
    while (r.ok && (name = api_fields_next(&f, &it))) {
        bool known = false;
        for (int i = 0; post_fields[i]; i++)
            known |= !strcmp(post_fields[i], name);
        if (!known) {
            api_err_set(&e, API_E_BAD_REQUEST, name, "unknown field '%s'", name);
            r.ok = false;
        }
    }
    if (r.ok && json_object_get(o, "requests")) {   /* a batch: always the tree's */
        json_decref(o);
        return false;
    }
    r.ok = r.ok && rl_item_parse(srv, &req, &f, NULL, 0, NULL, 0, true, &r.it, &e);
    if (r.ok) {
        item_text(&r.it, out, cap);
    } else {
        api_resp_t resp;
        api_resp_init(&resp);
        api_err_respond(&resp, &e);
        answer_text(&resp, out, cap);
        api_resp_release(&resp);
    }
    rl_item_release(&r.it);
    json_decref(o);
    return true;
}

/* A request of this JSON body and nothing else. */
static void body_req(api_req_t *req, const char *body, size_t n)
{
    memset(req, 0, sizeof(*req));
    req->body = (const uint8_t *)body;
    req->body_len = n;
    req->ctype = "application/json";
}

/* The outcome through api_body_fields, as body_reference writes it; false
 * when the body was not read through the flat source. */
static bool body_flat(api_server_t *srv, const char *body, size_t n, char *out, size_t cap)
{
    api_req_t req;
    body_req(&req, body, n);
    api_resp_t resp;
    api_resp_init(&resp);
    api_flat_t room;
    api_fields_t f;
    bool read = api_body_fields(&req, &resp, post_fields, &room, &f);
    /* refused: by the flat source (an unknown field) when no tree was made
     * and the body is of the flat shape */
    json_t *t = read || req.json ? NULL : api_json_flat_object(body, n);
    bool flat = read ? f.kind == API_FIELDS_FLAT : t != NULL;
    json_decref(t);
    api_field_t v;
    if (read && flat && api_fields_get(&f, "requests", &v))
        flat = false;
    if (flat) {
        assert_null(req.json);
        outcome_t r;
        api_err_t e;
        if (read && (r.ok = rl_item_parse(srv, &req, &f, NULL, 0, NULL, 0, true, &r.it, &e))) {
            item_text(&r.it, out, cap);
        } else {
            if (read)
                api_err_respond(&resp, &e);
            answer_text(&resp, out, cap);
        }
        if (read)
            rl_item_release(&r.it);
    }
    api_resp_release(&resp);
    api_req_release(&req);
    return flat;
}

/* One POST /throttle through the router. */
static void post_served(api_server_t *srv, const char *ctype, const char *body, size_t n, char *out, size_t cap)
{
    api_req_t req;
    api_req_init(&req, API_POST, "/throttle", 9, T0);
    req.ctype = ctype;
    req.body = (const uint8_t *)body;
    req.body_len = n;
    api_resp_t resp;
    api_dispatch(srv, &req, &resp);
    answer_text(&resp, out, cap);
    api_resp_release(&resp);
    api_req_release(&req);
}

/* The same JSON with the first member name's first byte escaped (\u00XX),
 * which the flat reader leaves to jansson; false when there is none. */
static bool body_escaped(const char *body, size_t n, char *out, size_t cap)
{
    const char *q = memchr(body, '"', n);
    if (!q || (size_t)(q - body) + 2 >= n || q[1] == '"' || q[1] == '\\' || n + 6 > cap)
        return false;
    size_t at = (size_t)(q - body) + 1;
    memcpy(out, body, at);
    snprintf(out + at, 7, "\\u%04x", (unsigned char)body[at]);
    memcpy(out + at + 6, body + at + 1, n - at - 1);
    return true;
}

/* Both ways on one body: at the item level, then served (srv_a reads the
 * body, srv_b its escaped twin; both see the same sequence). */
static void post_compare(api_server_t *srv_a, api_server_t *srv_b, const char *body, size_t n,
                         const char *ctype)
{
    char ref[2048], got[2048];
    bool flat_text = false;
    json_t *t = api_json_flat_object(body, n);
    if (t) {
        flat_text = json_object_size(t) <= API_FLAT_MEMBERS && n < API_FLAT_TEXT;
        json_decref(t);
    }
    policies_read_lock(srv_a->policies);
    bool flat = body_flat(srv_a, body, n, got, sizeof(got));
    bool candidate = body_reference(srv_a, body, n, ref, sizeof(ref));
    policies_read_unlock(srv_a->policies);
    if (flat_text && candidate != flat)
        fail_msg("flat source %s a body the tree %s: %.*s", flat ? "read" : "left", candidate ? "reads" : "refuses",
                 (int)n, body);
    if (!flat_text && flat)
        fail_msg("flat source read a body the flat reader refuses: %.*s", (int)n, body);
    if (flat && strcmp(got, ref) != 0)
        fail_msg("%.*s:\n  flat source %s\n  tree        %s", (int)n, body, got, ref);
    char twin[2048];
    const char *b_body = body;
    size_t b_n = n;
    if (flat_text && body_escaped(body, n, twin, sizeof(twin))) {
        b_body = twin;
        b_n = n + 5;
        assert_null(api_json_flat_object(twin, b_n));
    }
    post_served(srv_a, ctype, body, n, got, sizeof(got));
    post_served(srv_b, ctype, b_body, b_n, ref, sizeof(ref));
    if (strcmp(got, ref) != 0)
        fail_msg("served %.*s:\n  flat %s\n  tree %s", (int)n, body, got, ref);
}

static const char *const body_names[] = { "key", "policy", "algorithm", "max_burst", "count_per_period", "period",
                                          "max_count", "capacity", "refill_rate", "quantity", "shadow", "requests",
                                          "bogus", "Key", "" };
#define NBODY_NAMES (sizeof(body_names) / sizeof(body_names[0]))

static const char printable[] =
    "\" !#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~\"";

static const char *const body_values[] = {
    "\"user:1\"", "\"p1\"", "\"tb\"", "\"nope\"", "\"gcra\"", "\"token_bucket\"", "\"sliding_log\"",
    "\"sliding_window\"", "\"fixed_window\"", "\"bogus\"", "\"\"", printable, "\"a\\\"b\"", "\"\\u0041\"",
    "\"\xc3\xa9\"", "0", "-0", "1", "5", "15", "30", "60", "-1", "2305843009", "2305843010",
    "123456789012345678", "-123456789012345678", "1234567890123456789", "9223372036854775807",
    "9223372036854775808", "01", "1.5", "2.5", "1e3", "-0.0", "true", "false", "null", "[]", "{}", "[1]",
    "{\"a\":1}", "tru", "nul", "-", "\"x",
};
#define NBODY_VALUES (sizeof(body_values) / sizeof(body_values[0]))

static const char *const spaces[] = { "", "", "", " ", "\n", "\t ", "\r\n" };

static size_t body_random(char *out, size_t cap, bool valid)
{
    size_t k = 0;
    int n = (int)(next_rand() % 8);
    k += (size_t)snprintf(out + k, cap - k, "%s{%s", spaces[next_rand() % 7], spaces[next_rand() % 7]);
    static const char *const algos[] = { "\"gcra\"", "\"token_bucket\"", "\"sliding_log\"" };
    for (int i = 0; i < n && k + 200 < cap; i++) {
        const char *name = body_names[next_rand() % NBODY_NAMES];
        const char *value = body_values[next_rand() % NBODY_VALUES];
        if (valid) {   /* mostly what a client sends */
            static const char *const good[][2] = {
                { "key", "\"user:1\"" }, { "max_burst", "15" }, { "count_per_period", "30" }, { "period", "60" },
                { "quantity", "1" }, { "shadow", "false" }, { "capacity", "10" }, { "refill_rate", "2" },
                { "max_count", "5" }, { "policy", "\"p1\"" }, { "algorithm", NULL },
            };
            int g = (int)(next_rand() % 11);
            name = good[g][0];
            value = good[g][1] ? good[g][1] : algos[next_rand() % 3];
        }
        k += (size_t)snprintf(out + k, cap - k, "%s\"%s\"%s:%s%s%s%s", i ? "," : "", name,
                              spaces[next_rand() % 7], spaces[next_rand() % 7], value, spaces[next_rand() % 7],
                              next_rand() % 50 ? "" : ",");
    }
    k += (size_t)snprintf(out + k, cap - k, "}%s", next_rand() % 40 ? spaces[next_rand() % 7] : "x");
    return k;
}

static void post_setup(api_server_t *a, api_server_t *b)
{
    server_setup(a);
    server_setup(b);
}

static void post_teardown(api_server_t *a, api_server_t *b)
{
    server_teardown(a);
    server_teardown(b);
}

/* Hand-picked bodies: each rule at its edge. */
static void test_post_edges(void **state)
{
    (void)state;
    api_server_t a, b;
    post_setup(&a, &b);
    static const char *const bodies[] = {
        "{\"key\":\"user:1\",\"max_burst\":15,\"count_per_period\":30,\"period\":60}",
        " {\n \"key\" : \"user:1\" ,\t\"max_burst\":15,\"count_per_period\":30,\"period\":60 } \r\n",
        "{\"key\":\"user:1\",\"max_burst\":15,\"count_per_period\":30,\"period\":60,\"quantity\":0,"
        "\"shadow\":true}",
        "{}", " { } ", "{\"key\":\"a\",\"key\":\"b\"}", "{\"key\":\"a\",\"bogus\":1,\"other\":2}",
        "{\"bogus\":null}", "{\"key\":null}", "{\"key\":5}", "{\"key\":\"\"}", "{\"key\":\"a\",\"quantity\":-1}",
        "{\"key\":\"a\",\"quantity\":-0,\"max_burst\":1,\"count_per_period\":1,\"period\":1}",
        "{\"key\":\"a\",\"max_burst\":123456789012345678,\"count_per_period\":1,\"period\":1}",
        "{\"key\":\"a\",\"max_burst\":1234567890123456789,\"count_per_period\":1,\"period\":1}",
        "{\"key\":\"a\",\"max_burst\":1.0,\"count_per_period\":1,\"period\":1}",
        "{\"key\":\"a\",\"max_burst\":1,\"count_per_period\":1,\"period\":2305843010}",
        "{\"key\":\"a\",\"algorithm\":\"token_bucket\",\"capacity\":10,\"refill_rate\":2}",
        "{\"key\":\"a\",\"algorithm\":\"token_bucket\",\"capacity\":10,\"refill_rate\":null}",
        "{\"key\":\"a\",\"algorithm\":null}", "{\"key\":\"a\",\"algorithm\":\"bogus\"}",
        "{\"policy\":\"p1\"}", "{\"policy\":\"p1\",\"key\":\"x\"}", "{\"policy\":\"p1\",\"period\":60}",
        "{\"policy\":\"nope\"}", "{\"policy\":null}", "{\"policy\":\"tb\",\"quantity\":3}",
        "{\"shadow\":1,\"key\":\"a\"}", "{\"requests\":5}", "{\"requests\":null,\"key\":\"a\"}",
        "{\"requests\":[{\"policy\":\"p1\",\"key\":\"z\"}]}", "{\"key\":\"a\\u0041\"}", "{\"key\":\"\xc3\xa9\"}",
        "{\"key\":\"a\",}", "{\"key\":\"a\"", "{\"key\" \"a\"}", "[]", "\"x\"", "5", "{\"key\":\"a\"}}",
        "{\"key\":\"a\"} x", "{\"\":1,\"\":2}", "{\"\":1,\"a\":2,\"\":3}", "{\"a\":1,\"\":2}",
        "{\"key\":" "\" !#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~\""
        ",\"max_burst\":1,\"count_per_period\":1,\"period\":1}",
        "{\"key\":\"a\",\"max_burst\":1,\"count_per_period\":1,\"period\":1,\"quantity\":1,\"shadow\":false,"
        "\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1,\"j\":1,\"k\":1}",
        NULL,
    };
    for (int i = 0; bodies[i]; i++)
        post_compare(&a, &b, bodies[i], strlen(bodies[i]), "application/json");
    /* a name longer than an error's field, unknown */
    char body[1024];
    int n = snprintf(body, sizeof(body), "{\"key\":\"a\",\"%0300d\":1}", 7);
    post_compare(&a, &b, body, (size_t)n, "application/json");
    /* more text than the room holds */
    n = snprintf(body, sizeof(body), "{\"key\":\"%0600d\",\"max_burst\":1,\"count_per_period\":1,\"period\":1}", 7);
    post_compare(&a, &b, body, (size_t)n, "application/json");
    /* the media type and the empty body come first */
    post_compare(&a, &b, bodies[0], strlen(bodies[0]), "text/xml");
    post_compare(&a, &b, bodies[0], strlen(bodies[0]), NULL);
    post_compare(&a, &b, bodies[0], strlen(bodies[0]), "application/problem+json; charset=utf-8");
    post_compare(&a, &b, "", 0, "application/json");
    /* numbers: the flat reader's tree is jansson's, value for value (bit for
     * bit for reals, -0.0 too), or it leaves the body to jansson */
    static const char *const numbers[] = {
        "0", "-0", "7", "-7", "123456789012345678", "1234567890123456789", "0.0", "-0.0", "1.5", "-2.25", "1e3",
        "1E+3", "1e-3", "-2.5e-10", "123.456e7", "0e0", "1.7976931348623157e308", "1e309", "-1e309", "4.9e-324",
        "2e-324", "1e-400", "0.1", "0.30000000000000004", "3.141592653589793238462643383279502884197169399375105",
        "01.5", "1.", ".5", "1e", "1e+", "-", "-.5", "2.e3", "1.5.2", "1e5e5", "+1", "0x10", "1.5e", "00",
    };
    for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
        char text[160];
        int len = snprintf(text, sizeof(text), "{\"a\":%s,\"b\":1}", numbers[i]);
        json_t *flat = api_json_flat_object(text, (size_t)len);
        json_t *tree = json_loadb(text, (size_t)len, JSON_REJECT_DUPLICATES, NULL);
        if (flat) {
            json_t *fa = json_object_get(flat, "a"), *ta = tree ? json_object_get(tree, "a") : NULL;
            if (!ta || json_typeof(fa) != json_typeof(ta))
                fail_msg("%s: the flat reader read what jansson %s", numbers[i], ta ? "types otherwise" : "refuses");
            if (json_is_real(fa)) {
                double x = json_real_value(fa), y = json_real_value(ta);
                if (memcmp(&x, &y, sizeof(x)) != 0)
                    fail_msg("%s: %.17g against jansson's %.17g", numbers[i], x, y);
            } else if (!json_equal(fa, ta)) {
                fail_msg("%s: not jansson's value", numbers[i]);
            }
        }
        /* and reads every number jansson does, but integers of 19 digits
         * and reals of 64 characters or more */
        if (tree && !flat && strlen(numbers[i]) < 19)
            fail_msg("%s: the flat reader left a body jansson reads", numbers[i]);
        json_decref(flat);
        json_decref(tree);
        post_compare(&a, &b, text, (size_t)len, "application/json");
        len = snprintf(text, sizeof(text), "{\"key\":\"a\",\"algorithm\":\"token_bucket\",\"capacity\":5,"
                                           "\"refill_rate\":%s}", numbers[i]);
        post_compare(&a, &b, text, (size_t)len, "application/json");
    }
    /* a repeated name is the tree's refusal (jansson's duplicate key), never
     * the flat source's reading: the empty name too */
    static const char *const repeats[] = { "{\"\":1,\"\":2}", "{\"\":1,\"key\":\"a\",\"\":3}",
                                           "{\"key\":\"a\",\"key\":\"a\"}", "{\"k\":1,\"ke\":2,\"k\":3}" };
    for (size_t i = 0; i < sizeof(repeats) / sizeof(repeats[0]); i++) {
        api_req_t req;
        body_req(&req, repeats[i], strlen(repeats[i]));
        api_resp_t resp;
        api_resp_init(&resp);
        api_flat_t room;
        api_fields_t f;
        assert_false(api_body_fields(&req, &resp, post_fields, &room, &f));
        assert_int_equal(resp.status, 400);
        if (!strstr(resp.body, "duplicate"))
            fail_msg("%s: %.*s", repeats[i], (int)resp.len, resp.body);
        api_resp_release(&resp);
        api_req_release(&req);
    }
    post_teardown(&a, &b);
}

/* Seeded random bodies: pieces of any kind, and valid ones. */
static void test_post_random(void **state)
{
    (void)state;
    api_server_t a, b;
    post_setup(&a, &b);
    rng_state = 2020;
    char body[2048];
    for (int round = 0; round < 20000; round++) {
        size_t n = body_random(body, sizeof(body) - 8, round % 3 == 0);
        post_compare(&a, &b, body, n, "application/json");
    }
    post_teardown(&a, &b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_edges),
        cmocka_unit_test(test_fields_random),
        cmocka_unit_test(test_post_edges),
        cmocka_unit_test(test_post_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
