/*
 * test_rls.c - Envoy's rate limit service without its transport: the
 * configuration (envoyproxy/ratelimit's documented examples and test
 * configurations loaded unchanged from tests/fixtures/rls/, its refusals
 * with file:line and field), matching as it matches, and the decisions on
 * a command-layer server against a model: fixed-window arithmetic, all or
 * nothing vs charge_all, shadow_mode, unlimited, replaces, overrides,
 * hits_addend, headers and metrics.
 */
#include "tests/unit/cmd_check.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/access.h"
#include "cmd/cluster.h"
#include "cmd/throttle.h"
#include "core/rng.h"
#include "core/slot.h"
#include "rls/rls.h"

#define FIX "tests/fixtures/rls/"
#define T0 (1700000000LL * NS_PER_SEC)   /* a whole second: 20 s into a minute, 800 s into an hour */

/* ------------------------------------------------------------ helpers -- */

static rls_set_t *load(const char *path)
{
    char err[512] = "";
    rls_set_t *s = rls_set_load(path, err, sizeof(err));
    if (!s)
        fail_msg("%s: %s", path, err);
    return s;
}

/* Writes `text` to a scratch file and loads it; NULL with err. */
static rls_set_t *load_text(const char *text, char *err, size_t errlen)
{
    char path[] = "/tmp/test_rls_XXXXXX.yaml";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    rls_set_t *s = rls_set_load(path, err, errlen);
    /* messages name the file: make them stable for the assertions */
    char *at = strstr(err, path);
    if (at) {
        memmove(at + 4, at + strlen(path), strlen(at + strlen(path)) + 1);
        memcpy(at, "FILE", 4);
    }
    unlink(path);
    return s;
}

typedef struct env {
    cmd_check_t c;
    rls_t *r;
} env_t;

static void env_open(env_t *e, const char *path, const rls_options_t *opt)
{
    cmd_check_open(&e->c);
    e->r = rls_new(&e->c.srv, opt, load(path));
    assert_non_null(e->r);
}

static void env_close(env_t *e)
{
    rls_free(e->r);
    cmd_check_close(&e->c);
}

/* One descriptor of up to 4 entries, "k=v" strings. */
typedef struct desc {
    rls_entry_t e[4];
    rls_descriptor_t d;
} desc_t;

static void desc_make(desc_t *x, const char *const *kv)
{
    memset(x, 0, sizeof(*x));
    size_t n = 0;
    for (; kv[n]; n++) {
        const char *eq = strchr(kv[n], '=');
        x->e[n].key.p = kv[n];
        x->e[n].key.len = (size_t)(eq - kv[n]);
        x->e[n].value.p = eq + 1;
        x->e[n].value.len = strlen(eq + 1);
    }
    x->d.entries = x->e;
    x->d.nentries = n;
}

/* Decides a request of n descriptors at now_ns; fails the test on error. */
static void decide_n(env_t *e, const char *domain, desc_t *ds, size_t n, uint32_t hits, int64_t now_ns,
                     rls_result_t *res)
{
    rls_descriptor_t d[8];
    for (size_t i = 0; i < n; i++)
        d[i] = ds[i].d;
    rls_request_t q = { { domain, strlen(domain) }, d, n, hits, false };
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, &e->c.srv, now_ns, false, 0);
    bool ok = rls_should_rate_limit(e->r, &ctx, &q, res);
    if (!ok)
        fail_msg("refused: %s", ctx.err.message);
    cmd_ctx_end(&ctx);
}

/* One descriptor, hits 1: its status code. */
static rls_code_t hit1(env_t *e, const char *domain, const char *const *kv, int64_t now_ns, rls_status_t *out)
{
    desc_t x;
    desc_make(&x, kv);
    rls_result_t res;
    decide_n(e, domain, &x, 1, 0, now_ns, &res);
    assert_int_equal(res.n, 1);
    if (out)
        *out = res.statuses[0];
    rls_code_t c = res.overall;
    assert_int_equal(c, res.statuses[0].code);
    rls_result_free(&res);
    return c;
}

#define KV(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const char *header(const rls_result_t *res, const char *name)
{
    for (size_t i = 0; i < res->nheaders; i++)
        if (!strcmp(res->headers[i].name, name))
            return res->headers[i].value;
    return NULL;
}

/* ---------------------------------------------------- configuration -- */

static void test_examples_load(void **state)
{
    (void)state;
    static const char *const files[] = { "example01", "example02", "example03", "example04a", "example04b",
                                         "example05", "example06", "example07", "example08", "example09a",
                                         "example09b", "example09c", "example10a", "example10b", "example11a",
                                         "example11b", "basic_config", "wildcard" };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[128];
        snprintf(path, sizeof(path), FIX "%s.yaml", files[i]);
        rls_set_t *s = load(path);
        assert_int_equal(rls_set_domains(s), 1);
        rls_set_release(s);
    }
}

/* envoyproxy/ratelimit's refused configurations (test/config/), with its
 * messages, and the line and field tally adds. */
static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *file, *want;
    } cases[] = {
        { "bad_limit_unit", "bad_limit_unit.yaml:6: unit: invalid rate limit unit 'foo'" },
        { "bad_yaml", "bad_yaml.yaml:2: yaml: error loading config file" },
        { "duplicate_key", "duplicate_key.yaml:6: key: duplicate descriptor composite key 'test-domain.key1_value1'" },
        { "empty_domain", "empty_domain.yaml:1: domain: config file cannot have empty domain" },
        { "empty_key", "empty_key.yaml:3: key: descriptor has empty key" },
        { "misspelled_key", "misspelled_key.yaml:5: ratelimit: config error, unknown key 'ratelimit'" },
        { "misspelled_key2", "misspelled_key2.yaml:7: requestsperunit: config error, unknown key 'requestsperunit'" },
        { "non_map_list", "non_map_list.yaml:3: descriptors: config error, yaml file contains list of type other than map" },
        { "non_string_key", "non_string_key.yaml:1: 0.25: config error, unknown key '0.25'" },
        { "replaces_empty", "replaces_empty.yaml:10: replaces: should not have an empty replaces entry" },
        { "replaces_self", "replaces_self.yaml:10: replaces: replaces should not contain name of same descriptor" },
        { "unlimited_with_unit",
          "unlimited_with_unit.yaml:5: unit: should not specify rate limit unit when unlimited" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[128], err[512] = "";
        snprintf(path, sizeof(path), FIX "bad/%s.yaml", cases[i].file);
        rls_set_t *s = rls_set_load(path, err, sizeof(err));
        if (s || !strstr(err, cases[i].want))
            fail_msg("%s: got '%s', want '%s'", cases[i].file, err, cases[i].want);
    }
    /* a duplicate domain across a directory's files (TestDuplicateDomain) */
    char dir[] = "/tmp/test_rls_dir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[96], b[96], c[96], err[512] = "";
    snprintf(a, sizeof(a), "%s/a.yaml", dir);
    snprintf(b, sizeof(b), "%s/b.yml", dir);
    snprintf(c, sizeof(c), "%s/notes.txt", dir);
    FILE *f = fopen(a, "w");
    fputs("domain: d1\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n", f);
    fclose(f);
    f = fopen(c, "w");
    fputs("not yaml at all: [\n", f);
    fclose(f);
    f = fopen(b, "w");
    fputs("domain: d2\n", f);
    fclose(f);
    rls_set_t *s = rls_set_load(dir, err, sizeof(err));
    assert_non_null(s);   /* notes.txt is not read */
    assert_int_equal(rls_set_domains(s), 2);
    assert_int_equal(rls_set_rules(s), 1);
    rls_set_release(s);
    f = fopen(b, "w");
    fputs("# the same domain again\ndomain: d1\n", f);
    fclose(f);
    assert_null(rls_set_load(dir, err, sizeof(err)));
    assert_non_null(strstr(err, "b.yml:2: domain: duplicate domain 'd1' in config file"));
    unlink(a);
    unlink(b);
    unlink(c);
    rmdir(dir);
    assert_null(rls_set_load("/nonexistent/rls.yaml", err, sizeof(err)));
    assert_non_null(strstr(err, "/nonexistent/rls.yaml: No such file"));
}

/* tally's extensions and what it refuses of them. */
static void test_extensions_refused(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        { "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n"
          "      algorithm: leaky\n",
          "FILE:7: algorithm: must be fixed_window, sliding_window, sliding_log, gcra or token_bucket, not 'leaky'" },
        { "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 5\n      window: 90x\n",
          "FILE:6: window: must be a whole number of seconds" },
        { "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 5\n      window: 0s\n",
          "FILE:6: window: must be a whole number" },
        { "domain: d\ndescriptors:\n  - key: k\n    algorithm: gcra\n",
          "FILE:4: algorithm: config error, unknown key 'algorithm'" },
        { "domain: d\ndescriptors:\n  - key: k\n    quota_mode: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
          "FILE:4: quota_mode: quota_mode is not supported by tally" },
        { "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 200000\n"
          "      algorithm: sliding_log\n",
          "FILE:5: rate_limit: requests_per_unit 200000 per 1s with sliding_log" },
        { "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n",
          "FILE:6: requests_per_unit: must be a whole number from 0 to 4294967295, not '-1'" },
        { "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n",
          "FILE:4: shadow_mode: must be true or false, not 'maybe'" },
        { "domain: d\ncharge_all: 3\n", "FILE:2: charge_all: must be true or false" },
        { "domain: '}d'\n", "FILE:1: domain: must not start with '}'" },
        { "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      replaces: [{name: a}]\n      unit: second\n"
          "      replaces: [{name: b}]\n      requests_per_unit: 1\n",
          "FILE:7: replaces: config error, key 'replaces' already set in this map" },
        { "- a\n- b\n", "FILE:1: file: must be a map" },
        { "", "FILE:1: domain: config file cannot have empty domain" },
        { "domain: d\ndescriptors:\n  - key: k\n    value: a\n  - key: k\n    value: b\n  - key: k\n    value: a\n",
          "FILE:7: key: duplicate descriptor composite key 'd.k_a'" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[512] = "";
        rls_set_t *s = load_text(cases[i].yaml, err, sizeof(err));
        if (s || !strstr(err, cases[i].want))
            fail_msg("case %zu: got '%s', want '%s'", i, err, cases[i].want);
    }
    /* accepted: what envoyproxy/ratelimit accepts and ignores, and tally's keys */
    char err[512] = "";
    rls_set_t *s = load_text("domain: d\ncharge_all: yes\ndescriptors:\n  - key: k\n    value_to_metric: true\n"
                             "    metadata: {team: a, tags: [x, y]}\n    unit: ignored_here\n"
                             "    rate_limit:\n      window: 90s\n      requests_per_unit: 3\n      algorithm: gcra\n"
                             "  - key: j\n    rate_limit: {unit: MINUTE, requests_per_unit: 2, window: 2h}\n",
                             err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    rls_set_release(s);
}

/* --------------------------------------------------------- matching -- */

/* config_test.go TestBasicConfig's lookups, as decisions' current_limit. */
static void test_basic_config_matching(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, FIX "basic_config.yaml", NULL);
    static const struct {
        const char *kv[3];
        uint32_t rpu;       /* 0: no limit */
        rls_unit_t unit;
        const char *name;
    } cases[] = {
        { { "key1=something" }, 0, 0, NULL },
        { { "key1=value1" }, 0, 0, NULL },
        { { "key2=value2", "subkey=subvalue" }, 0, 0, NULL },
        { { "key5=value5", "subkey5=subvalue" }, 0, 0, NULL },
        { { "key1=value1", "subkey1=something" }, 5, RLS_UNIT_SECOND, NULL },
        { { "key1=value1", "subkey1=subvalue1" }, 10, RLS_UNIT_SECOND, NULL },
        { { "key2=something" }, 20, RLS_UNIT_MINUTE, NULL },
        { { "key2=value2" }, 30, RLS_UNIT_MINUTE, NULL },
        { { "key2=value3" }, 0, 0, NULL },
        { { "key3=foo" }, 1, RLS_UNIT_HOUR, NULL },
        { { "key4=foo" }, 1, RLS_UNIT_DAY, "key4_rate_limit" },
        { { "key5=value5" }, 15, RLS_UNIT_DAY, NULL },
        { { "key5=value5", "subkey5=subvalue5" }, 25, RLS_UNIT_DAY, NULL },
        { { "key7=unspecified_value" }, 70, RLS_UNIT_MINUTE, NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rls_status_t st;
        assert_int_equal(hit1(&e, "test-domain", cases[i].kv, T0, &st), RLS_CODE_OK);
        if (!cases[i].rpu) {
            assert_false(st.has_limit);
            continue;
        }
        assert_true(st.has_limit);
        assert_int_equal(st.current_limit.requests_per_unit, cases[i].rpu);
        assert_int_equal(st.current_limit.unit, cases[i].unit);
        assert_int_equal(st.current_limit.name.len, cases[i].name ? strlen(cases[i].name) : 0);
        assert_int_equal(st.limit_remaining, cases[i].rpu - 1);
    }
    /* unlimited: OK, MaxUint32 remaining, no limit; an unknown domain: no limit */
    rls_status_t st;
    assert_int_equal(hit1(&e, "test-domain", KV("key6=foo"), T0, &st), RLS_CODE_OK);
    assert_false(st.has_limit);
    assert_int_equal(st.limit_remaining, UINT32_MAX);
    assert_int_equal(hit1(&e, "foo_domain", KV("key2=x"), T0, &st), RLS_CODE_OK);
    assert_false(st.has_limit);
    env_close(&e);
}

/* wildcard.yaml as config_test.go TestWildcardConfig reads it, and
 * README example 9's three patterns. */
static void test_wildcards(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, FIX "wildcard.yaml", NULL);
    static const struct {
        const char *kv[3];
        bool limited;
    } cases[] = {
        { { "wild=foo1" }, true },          { { "wild=foo" }, true },          { { "wild=fo" }, false },
        { { "noWild=foo1" }, false },        { { "noWild=foo" }, true },        { { "noVal=anything" }, true },
        { { "midWild=barab" }, true },      { { "midWild=barb" }, true },      { { "midWild=barba" }, false },
        { { "multiWild=foo1bar2baz" }, true }, { { "multiWild=foobarbaz" }, true }, { { "multiWild=foobaz" }, false },
        { { "nestedWild=val1", "wild=goo2" }, true }, { { "nestedWild=val1", "wild=foo2" }, false },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rls_status_t st;
        hit1(&e, "test-domain", cases[i].kv, T0, &st);
        if (st.has_limit != cases[i].limited)
            fail_msg("case %zu (%s): limited %d", i, cases[i].kv[0], st.has_limit);
    }
    env_close(&e);
    static const struct {
        const char *file, *kv;
        bool limited;
    } ex9[] = {
        { "example09a", "key1=value1", true },       { "example09a", "key1=valueXYZ", true },
        { "example09a", "key1=valu", false },        { "example09b", "path=/api/123/action", true },
        { "example09b", "path=/api/user-id/action", true }, { "example09b", "path=/api/123/other", false },
        { "example09c", "route=/api/v1/resource/123/action", true },
        { "example09c", "route=/api/v2/resource/456/action", true },
        { "example09c", "route=/api/v2/resource/456", false },
    };
    for (size_t i = 0; i < sizeof(ex9) / sizeof(ex9[0]); i++) {
        char path[128];
        snprintf(path, sizeof(path), FIX "%s.yaml", ex9[i].file);
        env_open(&e, path, NULL);
        rls_status_t st;
        hit1(&e, "example9", KV(ex9[i].kv), T0, &st);
        assert_int_equal(st.has_limit, ex9[i].limited);
        if (st.has_limit)
            assert_int_equal(st.current_limit.requests_per_unit, 20);
        env_close(&e);
    }
}

/* ---------------------------------------- the README's examples' decisions -- */

/* n hits of one descriptor at now: how many were OK. */
static int run_hits(env_t *e, const char *domain, const char *const *kv, int n, int64_t now)
{
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += hit1(e, domain, kv, now, NULL) == RLS_CODE_OK;
    return ok;
}

static void test_example_decisions(void **state)
{
    (void)state;
    env_t e;
    /* 1: 500 per second per database value; the next second starts again */
    env_open(&e, FIX "example01.yaml", NULL);
    assert_int_equal(run_hits(&e, "mongo_cps", KV("database=users"), 501, T0), 500);
    assert_int_equal(run_hits(&e, "mongo_cps", KV("database=default"), 3, T0), 3);
    assert_int_equal(run_hits(&e, "mongo_cps", KV("database=users"), 1, T0 + NS_PER_SEC), 1);
    assert_int_equal(run_hits(&e, "mongo_cps", KV("database=other"), 1, T0), 1);   /* no rule: OK */
    env_close(&e);

    /* 2: 5 marketing messages a day per number, 100 messages per number */
    env_open(&e, FIX "example02.yaml", NULL);
    desc_t d[2];
    desc_make(&d[0], KV("message_type=marketing", "to_number=2061111111"));
    desc_make(&d[1], KV("to_number=2061111111"));
    rls_result_t res;
    for (int i = 0; i < 5; i++) {
        decide_n(&e, "messaging", d, 2, 0, T0, &res);
        assert_int_equal(res.overall, RLS_CODE_OK);
        assert_int_equal(res.statuses[0].limit_remaining, 4 - i);
        assert_int_equal(res.statuses[1].limit_remaining, 99 - i);
        assert_int_equal(res.statuses[0].current_limit.unit, RLS_UNIT_DAY);
        rls_result_free(&res);
    }
    decide_n(&e, "messaging", d, 2, 0, T0, &res);
    assert_int_equal(res.overall, RLS_CODE_OVER_LIMIT);
    assert_int_equal(res.statuses[0].code, RLS_CODE_OVER_LIMIT);
    assert_int_equal(res.statuses[1].code, RLS_CODE_OK);
    assert_int_equal(res.statuses[1].limit_remaining, 95);   /* all or nothing: not charged */
    rls_result_free(&res);
    assert_int_equal(run_hits(&e, "messaging", KV("message_type=marketing", "to_number=2062222222"), 6, T0), 5);
    env_close(&e);

    /* 3: the most specific match: 50.0.0.5 gets 0, others 10 per second */
    env_open(&e, FIX "example03.yaml", NULL);
    rls_status_t st;
    assert_int_equal(hit1(&e, "edge_proxy_per_ip", KV("remote_address=50.0.0.5"), T0, &st), RLS_CODE_OVER_LIMIT);
    assert_int_equal(st.current_limit.requests_per_unit, 0);
    assert_int_equal(st.limit_remaining, 0);
    assert_int_equal(run_hits(&e, "edge_proxy_per_ip", KV("remote_address=50.0.0.1"), 11, T0), 10);
    env_close(&e);

    /* 4: a two-entry request matches only the two-level configuration */
    env_open(&e, FIX "example04a.yaml", NULL);
    assert_int_equal(hit1(&e, "example4", KV("key=value", "subkey=subvalue"), T0, &st), RLS_CODE_OK);
    assert_false(st.has_limit);
    env_close(&e);
    env_open(&e, FIX "example04b.yaml", NULL);
    hit1(&e, "example4", KV("key=value", "subkey=subvalue"), T0, &st);
    assert_true(st.has_limit);
    assert_int_equal(st.current_limit.requests_per_unit, 300);
    env_close(&e);

    /* 5: unlimited ldap, 100 per minute azure */
    env_open(&e, FIX "example05.yaml", NULL);
    assert_int_equal(run_hits(&e, "internal", KV("ldap=x"), 1000, T0), 1000);
    hit1(&e, "internal", KV("ldap=x"), T0, &st);
    assert_int_equal(st.limit_remaining, UINT32_MAX);
    assert_false(st.has_limit);
    assert_int_equal(run_hits(&e, "internal", KV("azure=x"), 101, T0), 100);
    wbuf_t m5 = WBUF_INIT;
    rls_metrics_render(e.r, &m5);
    wbuf_put_u8(&m5, 0);
    assert_non_null(strstr((const char *)m5.data, "{domain=\"internal\",rule=\"internal.ldap\",result=\"within_limit\"} 1001\n"));
    assert_non_null(strstr((const char *)m5.data, "{domain=\"internal\",rule=\"internal.azure\",result=\"over_limit\"} 1\n"));
    wbuf_free(&m5);
    env_close(&e);

    /* 6: user-a is in shadow mode (never limited), user-b 20 per second */
    env_open(&e, FIX "example06.yaml", NULL);
    assert_int_equal(run_hits(&e, "example6", KV("service=auth-service", "user=user-a"), 15, T0), 15);
    hit1(&e, "example6", KV("service=auth-service", "user=user-a"), T0, &st);
    assert_int_equal(st.limit_remaining, 0);
    assert_int_equal(run_hits(&e, "example6", KV("service=auth-service", "user=user-b"), 21, T0), 20);
    env_close(&e);

    /* 7: replaces: with both descriptors only the replacing 10/s applies */
    env_open(&e, FIX "example07.yaml", NULL);
    desc_make(&d[0], KV("key_1=value_1", "user=bkthomps"));
    desc_make(&d[1], KV("key_2=value_2", "user=bkthomps"));
    for (int i = 0; i < 11; i++) {
        decide_n(&e, "example7", d, 2, 0, T0, &res);
        assert_false(res.statuses[0].has_limit);
        assert_int_equal(res.statuses[1].current_limit.requests_per_unit, 10);
        assert_int_equal(res.overall, i < 10 ? RLS_CODE_OK : RLS_CODE_OVER_LIMIT);
        rls_result_free(&res);
    }
    /* the replaced rule was not charged: 5 per second on its own */
    assert_int_equal(run_hits(&e, "example7", KV("key_1=value_1", "user=bkthomps"), 6, T0), 5);
    env_close(&e);

    /* 8: 10 per minute per unspecified value, 20 for value1 */
    env_open(&e, FIX "example08.yaml", NULL);
    assert_int_equal(run_hits(&e, "example8", KV("key1=unspecified_value"), 11, T0), 10);
    assert_int_equal(run_hits(&e, "example8", KV("key1=unspecified_value2"), 11, T0), 10);
    assert_int_equal(run_hits(&e, "example8", KV("key1=value1"), 21, T0), 20);
    wbuf_t m = WBUF_INIT;
    rls_metrics_render(e.r, &m);
    wbuf_put_u8(&m, 0);
    const char *text = (const char *)m.data;
    assert_non_null(strstr(text, "tally_rls_hits_total{domain=\"example8\",rule=\"example8.key1_unspecified_value\","
                                 "result=\"over_limit\"} 1\n"));
    assert_non_null(strstr(text, "rule=\"example8.key1_unspecified_value2\",result=\"within_limit\"} 10\n"));
    assert_non_null(strstr(text, "rule=\"example8.key1_value1\",result=\"total_hits\"} 21\n"));
    wbuf_free(&m);
    env_close(&e);

    /* 10: value_to_metric is accepted; the limits are those configured */
    env_open(&e, FIX "example10a.yaml", NULL);
    assert_int_equal(run_hits(&e, "example10", KV("route=api", "http_method=GET", "subject_id=123"), 61, T0), 60);
    env_close(&e);
    env_open(&e, FIX "example10b.yaml", NULL);
    hit1(&e, "example10_wildcard", KV("user=alice", "action=readfile", "resource=documents"), T0, &st);
    assert_int_equal(st.current_limit.requests_per_unit, 100);
    hit1(&e, "example10_wildcard", KV("user=alice", "action=write", "resource=documents"), T0, &st);
    assert_false(st.has_limit);
    env_close(&e);

    /* 11: values matching files/(star) share one threshold of 10 an hour; files_no_share/(star) do not */
    env_open(&e, FIX "example11a.yaml", NULL);
    assert_int_equal(run_hits(&e, "example11", KV("files=files/a.pdf"), 5, T0), 5);
    assert_int_equal(run_hits(&e, "example11", KV("files=files/b.csv"), 5, T0), 5);
    assert_int_equal(hit1(&e, "example11", KV("files=files/c.txt"), T0, NULL), RLS_CODE_OVER_LIMIT);
    assert_int_equal(run_hits(&e, "example11", KV("files_no_share=files_no_share/a.pdf"), 11, T0), 10);
    assert_int_equal(run_hits(&e, "example11", KV("files_no_share=files_no_share/b.csv"), 10, T0), 10);
    env_close(&e);
    env_open(&e, FIX "example11b.yaml", NULL);
    assert_int_equal(run_hits(&e, "example11_metrics", KV("route=api/v1", "method=GET"), 30, T0), 30);
    assert_int_equal(run_hits(&e, "example11_metrics", KV("route=api/v2", "method=GET"), 31, T0), 30);
    env_close(&e);
}

/* ------------------------------------------------ decisions vs a model -- */

/* Fixed windows as envoyproxy/ratelimit counts them: per epoch-aligned
 * window, hits_addend per request (per-descriptor override, request-level,
 * else 1; a per-descriptor 0 only looks), over the limit when the count
 * would pass requests_per_unit (tally then leaves the count as it was),
 * duration_until_reset to the window's end in whole seconds. */
static void test_fixed_window_model(void **state)
{
    (void)state;
    char err[512];
    rls_set_t *s = load_text("domain: m\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 17}\n"
                             "  - key: w\n    rate_limit: {unit: week, requests_per_unit: 1000}\n"
                             "  - key: y\n    rate_limit: {unit: year, requests_per_unit: 1000}\n"
                             "  - key: mo\n    rate_limit: {unit: month, requests_per_unit: 1000}\n",
                             err, sizeof(err));
    assert_non_null(s);
    env_t e;
    cmd_check_open(&e.c);
    e.r = rls_new(&e.c.srv, NULL, s);
    rng_t rng;
    rng_seed(&rng, 41);
    int64_t now = T0 + 7 * NS_PER_SEC + 123456789, count = 0, window = now / (60 * NS_PER_SEC);
    int recorded = 0;
    for (int i = 0; i < 3000; i++) {
        now += (int64_t)(rng_next(&rng) % 200) * NS_PER_MS;
        if (now / (60 * NS_PER_SEC) != window) {
            window = now / (60 * NS_PER_SEC);
            count = 0;
        }
        desc_t x;
        desc_make(&x, KV("k=v"));
        uint32_t req = 0;
        int64_t q;
        switch (rng_next(&rng) % 4) {
        case 0: q = 1; break;                                  /* unset: 1 */
        case 1: req = 1 + (uint32_t)(rng_next(&rng) % 5); q = req; break;
        case 2: x.d.has_hits_addend = true; x.d.hits_addend = rng_next(&rng) % 4; q = (int64_t)x.d.hits_addend;
                req = 9; break;                                /* the descriptor's wins, even 0 */
        default: x.d.has_hits_addend = true; x.d.hits_addend = 0; q = 0; break;
        }
        rls_result_t res;
        decide_n(&e, "m", &x, 1, req, now, &res);
        const rls_status_t *st = &res.statuses[0];
        bool over = count + q > 17;
        if (!over)
            count += q;
        recorded += !over && q > 0;
        assert_int_equal(st->code, over ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK);
        assert_int_equal(st->limit_remaining, over ? 0 : 17 - count);
        int64_t now_s = now / NS_PER_SEC;
        assert_int_equal(st->reset_ms, (60 - now_s % 60) * 1000);
        rls_result_free(&res);
    }
    /* week, month, year: envoyproxy/ratelimit's fixed lengths from the epoch */
    static const struct {
        const char *kv;
        int64_t len;
    } units[] = { { "w=a", 7 * 86400 }, { "mo=a", 30 * 86400 }, { "y=a", 365 * 86400 } };
    for (size_t i = 0; i < 3; i++) {
        rls_status_t st;
        hit1(&e, "m", KV(units[i].kv), now, &st);
        int64_t now_s = now / NS_PER_SEC;
        assert_int_equal(st.reset_ms, (units[i].len - now_s % units[i].len) * 1000);
        assert_int_equal(st.limit_remaining, 999);
    }
    /* the decisions are journaled as batches that replay without the configuration */
    assert_int_equal(cmd_check_replays(&e.c), recorded + 3);
    env_close(&e);
}

/* All or nothing (the default) against charge_all (per domain, and the
 * service's option), shadow descriptors never refusing. */
static void test_all_or_nothing(void **state)
{
    (void)state;
    static const char yaml[] = "domain: a\n%sdescriptors:\n  - key: small\n    rate_limit: {unit: hour, requests_per_unit: 2}\n"
                               "  - key: big\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
                               "  - key: shadow\n    shadow_mode: true\n    rate_limit: {unit: hour, requests_per_unit: 1}\n";
    for (int mode = 0; mode < 3; mode++) {
        char text[1024], err[512];
        snprintf(text, sizeof(text), yaml, mode == 1 ? "charge_all: true\n" : "");
        rls_set_t *s = load_text(text, err, sizeof(err));
        assert_non_null(s);
        rls_options_t opt = { .charge_all = mode == 2 };
        env_t e;
        cmd_check_open(&e.c);
        e.r = rls_new(&e.c.srv, &opt, s);
        desc_t d[3];
        desc_make(&d[0], KV("small=x"));
        desc_make(&d[1], KV("big=x"));
        desc_make(&d[2], KV("shadow=x"));
        rls_result_t res;
        for (int i = 0; i < 4; i++) {
            decide_n(&e, "a", d, 3, 0, T0, &res);
            bool over = i >= 2;
            assert_int_equal(res.overall, over ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK);
            assert_int_equal(res.statuses[0].code, over ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK);
            assert_int_equal(res.statuses[1].code, RLS_CODE_OK);
            assert_int_equal(res.statuses[2].code, RLS_CODE_OK);   /* shadow: over from the second on, still OK */
            /* big: charged on every request with charge_all, only while all fit without */
            int64_t big_used = mode ? i + 1 : (i < 2 ? i + 1 : 2);
            assert_int_equal(res.statuses[1].limit_remaining, 5 - big_used);
            assert_int_equal(res.statuses[2].limit_remaining, 0);
            rls_result_free(&res);
        }
        /* a refused batch journals nothing; charge_all's partial ones replay */
        assert_int_equal(cmd_check_replays(&e.c), mode ? 4 : 2);
        env_close(&e);
    }
}

/* A request's own limit (RateLimitOverride), and what refuses a request. */
static void test_overrides_and_errors(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, FIX "example01.yaml", NULL);
    desc_t x;
    desc_make(&x, KV("database=users"));
    x.d.has_limit = true;
    x.d.limit.requests_per_unit = 3;
    x.d.limit.unit = RLS_UNIT_MINUTE;
    rls_result_t res;
    for (int i = 0; i < 4; i++) {
        decide_n(&e, "mongo_cps", &x, 1, 0, T0, &res);
        assert_int_equal(res.overall, i < 3 ? RLS_CODE_OK : RLS_CODE_OVER_LIMIT);
        assert_int_equal(res.statuses[0].current_limit.requests_per_unit, 3);
        assert_int_equal(res.statuses[0].current_limit.unit, RLS_UNIT_MINUTE);
        assert_int_equal(res.statuses[0].current_limit.name.len, 0);
        rls_result_free(&res);
    }
    /* an override applies to descriptors no rule matches, in a known domain only */
    desc_make(&x, KV("nothing=here"));
    x.d.has_limit = true;
    x.d.limit.requests_per_unit = 1;
    x.d.limit.unit = RLS_UNIT_SECOND;
    decide_n(&e, "mongo_cps", &x, 1, 0, T0, &res);
    assert_true(res.statuses[0].has_limit);
    rls_result_free(&res);
    decide_n(&e, "other", &x, 1, 0, T0, &res);
    assert_false(res.statuses[0].has_limit);
    rls_result_free(&res);
    /* refusals: Envoy's service answers these with a gRPC error */
    x.d.limit.unit = RLS_UNIT_UNKNOWN;
    rls_descriptor_t d1 = x.d;
    static const struct {
        const char *domain;
        size_t n;
        const char *field;
    } bad[] = { { "", 1, "domain" }, { "mongo_cps", 0, "descriptors" }, { "mongo_cps", 1, "descriptors.limit.unit" } };
    for (size_t i = 0; i < 3; i++) {
        rls_request_t q = { { bad[i].domain, strlen(bad[i].domain) }, &d1, bad[i].n, 0, false };
        cmd_ctx_t ctx;
        cmd_ctx_init(&ctx, &e.c.srv, T0, false, 0);
        assert_false(rls_should_rate_limit(e.r, &ctx, &q, &res));
        assert_int_equal(ctx.err.code, CMD_E_BAD_REQUEST);
        assert_string_equal(ctx.err.field, bad[i].field);
        cmd_ctx_end(&ctx);
    }
    env_close(&e);
}

/* tally's algorithms and windows; the headers. */
static void test_algorithms_and_headers(void **state)
{
    (void)state;
    char err[512];
    rls_set_t *s = load_text("domain: x\ndescriptors:\n"
                             "  - key: sw\n    rate_limit: {window: 90s, requests_per_unit: 4, algorithm: sliding_window, name: sw}\n"
                             "  - key: tb\n    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: token_bucket}\n"
                             "  - key: g\n    rate_limit: {unit: second, requests_per_unit: 3, algorithm: gcra}\n"
                             "  - key: fw\n    rate_limit: {unit: hour, requests_per_unit: 10, name: 'a\"b'}\n",
                             err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    rls_options_t opt = { .ratelimit_headers = true };
    env_t e;
    cmd_check_open(&e.c);
    e.r = rls_new(&e.c.srv, &opt, s);
    assert_int_equal(run_hits(&e, "x", KV("sw=1"), 5, T0), 4);
    assert_int_equal(run_hits(&e, "x", KV("tb=1"), 3, T0), 2);
    assert_int_equal(run_hits(&e, "x", KV("g=1"), 4, T0), 3);
    rls_status_t st;
    hit1(&e, "x", KV("sw=1"), T0, &st);
    assert_int_equal(st.current_limit.unit, RLS_UNIT_UNKNOWN);   /* only a window given */
    assert_int_equal(run_hits(&e, "x", KV("sw=1"), 1, T0 + 5 * NS_PER_SEC), 0);   /* the same 90 s window (T0 is 80 s into one) */
    assert_int_equal(run_hits(&e, "x", KV("tb=1"), 1, T0 + 30 * NS_PER_SEC), 1);   /* a token back after 30 s */
    /* the keys: envoyproxy/ratelimit's cache key shape under tally's prefix and the domain's hash tag */
    static const char key[] = "rls:{x}_sw_1_90_sliding_window";
    cmd_throttle_reset_args_t ra = { key, sizeof(key) - 1 };
    cmd_throttle_reset_res_t rr;
    assert_true(cmd_check_run(&e.c, &CMD_THROTTLE_RESET, &ra, &rr, T0, NULL));
    assert_true(rr.deleted);
    /* headers: every limited descriptor in the IETF fields, the closest in x-ratelimit-* */
    desc_t d[2];
    desc_make(&d[0], KV("fw=1"));
    desc_make(&d[1], KV("g=2"));
    rls_result_t res;
    decide_n(&e, "x", d, 2, 0, T0 + 1800 * NS_PER_SEC, &res);
    assert_string_equal(header(&res, "ratelimit-policy"), "\"a\\\"b\";q=10;w=3600, \"x.g\";q=3;w=1");
    assert_string_equal(header(&res, "ratelimit"), "\"a\\\"b\";r=9;t=1000, \"x.g\";r=2;t=1");
    assert_string_equal(header(&res, "x-ratelimit-limit"), "3");
    assert_string_equal(header(&res, "x-ratelimit-remaining"), "2");
    assert_string_equal(header(&res, "x-ratelimit-reset"), "1");
    rls_result_free(&res);
    env_close(&e);
}

/* tally's calendar keys: a rule counts per local day / month in its zone,
 * duration_until_reset counts to the real local midnight, and bad values
 * are refused with the file's line and the field. */
static void test_calendar_rules(void **state)
{
    (void)state;
    static const struct {
        const char *rl, *want;
    } bad[] = {
        { "{requests_per_unit: 5, calendar: fortnight}", "calendar: must be day, week, month, quarter or year, not 'fortnight'" },
        { "{requests_per_unit: 5, calendar: day, time_zone: Mars/Base}", "time_zone: 'Mars/Base' is not a time zone" },
        { "{requests_per_unit: 5, calendar: month, anchor_day: 0}", "anchor_day: must be between 1 and 31, not 0" },
        { "{requests_per_unit: 5, calendar: month, anchor_day: 32}", "anchor_day: must be between 1 and 31, not 32" },
        { "{requests_per_unit: 5, calendar: day, window: 1d}", "window: cannot be given with calendar" },
        { "{requests_per_unit: 5, calendar: day, unit: hour}", "unit: unit 'hour' with calendar day" },
        { "{requests_per_unit: 5, calendar: day, algorithm: gcra}", "algorithm: calendar applies to fixed_window only" },
        { "{requests_per_unit: 5, calendar: day, week_start: monday}", "week_start: applies to calendar week only" },
        { "{requests_per_unit: 5, calendar: week, week_start: caturday}", "week_start: must be monday .. sunday" },
        { "{requests_per_unit: 5, calendar: week, anchor_day: 3}", "anchor_day: applies to calendar month, quarter and year only" },
        { "{requests_per_unit: 5, unit: day, time_zone: UTC}", "time_zone: time_zone, week_start and anchor_day need calendar" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml[512], err[512] = "";
        snprintf(yaml, sizeof(yaml), "domain: d\ndescriptors:\n  - key: k\n    rate_limit: %s\n", bad[i].rl);
        rls_set_t *s = load_text(yaml, err, sizeof(err));
        if (s || !strstr(err, bad[i].want))
            fail_msg("case %zu: got '%s', want '%s'", i, err, bad[i].want);
    }
    char err[512];
    rls_set_t *s = load_text("domain: c\ndescriptors:\n"
                             "  - key: day\n    rate_limit: {unit: day, requests_per_unit: 2, calendar: day, time_zone: Europe/Paris}\n"
                             "  - key: bill\n    rate_limit: {requests_per_unit: 3, calendar: month, anchor_day: 31,"
                             " time_zone: America/New_York}\n"
                             "  - key: wk\n    rate_limit: {requests_per_unit: 1, calendar: week, week_start: sunday}\n"
                             "  - key: q\n    rate_limit: {requests_per_unit: 1, calendar: quarter, time_zone: Asia/Kathmandu}\n",
                             err, sizeof(err));
    if (!s)
        fail_msg("%s", err);
    env_t e;
    cmd_check_open(&e.c);
    rls_options_t opt = { 0 };
    e.r = rls_new(&e.c.srv, &opt, s);
    /* T0 = 2023-11-14T22:13:20Z: 23:13:20 in Paris, 46 min 40 s to midnight */
    rls_status_t st;
    assert_int_equal(hit1(&e, "c", KV("day=1"), T0, &st), RLS_CODE_OK);
    assert_int_equal(st.reset_ms, 2800 * 1000);
    assert_int_equal(st.current_limit.unit, RLS_UNIT_DAY);
    assert_int_equal(run_hits(&e, "c", KV("day=1"), 2, T0 + 60 * NS_PER_SEC), 1);
    assert_int_equal(run_hits(&e, "c", KV("day=1"), 1, T0 + 2799 * NS_PER_SEC), 0);   /* still the 14th */
    assert_int_equal(run_hits(&e, "c", KV("day=1"), 1, T0 + 2800 * NS_PER_SEC), 1);   /* the 15th, local */
    /* the billing month from Oct 31 to Nov 30 (New York): reset at 2023-11-30T05:00Z */
    assert_int_equal(hit1(&e, "c", KV("bill=1"), T0, &st), RLS_CODE_OK);
    assert_int_equal(st.reset_ms, (1701320400LL - 1700000000LL) * 1000);
    /* the week from Sunday 2023-11-12 UTC to Sunday the 19th */
    assert_int_equal(hit1(&e, "c", KV("wk=1"), T0, &st), RLS_CODE_OK);
    assert_int_equal(st.reset_ms, (1700352000LL - 1700000000LL) * 1000);
    assert_int_equal(hit1(&e, "c", KV("wk=1"), T0, &st), RLS_CODE_OVER_LIMIT);
    /* the quarter to 2024-01-01 in Kathmandu (+05:45): 2023-12-31T18:15Z */
    assert_int_equal(hit1(&e, "c", KV("q=1"), T0, &st), RLS_CODE_OK);
    assert_int_equal(st.reset_ms, (1704046500LL - 1700000000LL) * 1000);
    env_close(&e);
}

/* detailed_metric's series are bounded: past 1 024 series, hits count in
 * the overflow series; the rule's own series stays. */
static void test_metrics_bounded(void **state)
{
    (void)state;
    char err[512];
    rls_set_t *s = load_text("domain: d\ndescriptors:\n  - key: k\n    detailed_metric: true\n"
                             "    rate_limit: {unit: hour, requests_per_unit: 5}\n",
                             err, sizeof(err));
    assert_non_null(s);
    env_t e;
    cmd_check_open(&e.c);
    e.r = rls_new(&e.c.srv, NULL, s);
    for (int i = 0; i < 1100; i++) {
        char kv[32];
        snprintf(kv, sizeof(kv), "k=v%d", i);
        assert_int_equal(hit1(&e, "d", KV(kv), T0, NULL), RLS_CODE_OK);
    }
    wbuf_t m = WBUF_INIT;
    rls_metrics_render(e.r, &m);
    wbuf_put_u8(&m, 0);
    const char *text = (const char *)m.data;
    size_t series = 0;
    for (const char *p = text; (p = strstr(p, "result=\"total_hits\"")); p++)
        series++;
    assert_int_equal(series, 1024 + 1);   /* the rule's, 1 023 values, the overflow */
    assert_non_null(strstr(text, "rule=\"d.k_v0\",result=\"total_hits\"} 1\n"));
    assert_non_null(strstr(text, "{domain=\"\",rule=\"overflow\",result=\"total_hits\"} 77\n"));
    wbuf_free(&m);
    env_close(&e);
}

/* Admission is the command layer's, once per request: the token's scope
 * (ratelimit, or write) even when nothing is matched, and its key prefixes
 * on the descriptors' keys (rls:...). */
static void test_admission(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, FIX "example01.yaml", NULL);
    e.c.srv.auth = cmd_auth_create(0, false);
    assert_non_null(e.c.srv.auth);
    char *rls_prefix[] = { "rls:" }, *other_prefix[] = { "app:" };
    size_t rls_len[] = { 4 }, other_len[] = { 4 };
    static const struct {
        unsigned scopes;
        int prefixes;             /* 0 none, 1 rls:, 2 app: */
        const char *kv;
        cmd_code_t want;          /* CMD_E__COUNT: answered */
    } cases[] = {
        { CMD_SCOPE_RATELIMIT, 0, "database=users", CMD_E__COUNT },
        { CMD_SCOPE_WRITE, 1, "database=users", CMD_E__COUNT },
        { CMD_SCOPE_READ, 0, "database=users", CMD_E_FORBIDDEN },
        { CMD_SCOPE_READ, 0, "nothing=matched", CMD_E_FORBIDDEN },
        { CMD_SCOPE_RATELIMIT, 2, "database=users", CMD_E_FORBIDDEN },
        { CMD_SCOPE_RATELIMIT, 2, "nothing=matched", CMD_E__COUNT },   /* no key touched */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cmd_token_t tok;
        memset(&tok, 0, sizeof(tok));
        strcpy(tok.name, "t");
        tok.scopes = cases[i].scopes;
        if (cases[i].prefixes) {
            tok.prefixes = cases[i].prefixes == 1 ? rls_prefix : other_prefix;
            tok.prefix_len = cases[i].prefixes == 1 ? rls_len : other_len;
            tok.nprefixes = 1;
        }
        desc_t x;
        desc_make(&x, KV(cases[i].kv));
        rls_request_t q = { { "mongo_cps", 9 }, &x.d, 1, 0, false };
        cmd_ctx_t ctx;
        cmd_ctx_init(&ctx, &e.c.srv, T0, false, 0);
        ctx.token = &tok;
        rls_result_t res;
        bool ok = rls_should_rate_limit(e.r, &ctx, &q, &res);
        if (ok != (cases[i].want == CMD_E__COUNT) || (!ok && ctx.err.code != cases[i].want))
            fail_msg("case %zu: ok %d, code %d: %s", i, ok, (int)ctx.err.code, ctx.err.message);
        if (ok)
            rls_result_free(&res);
        cmd_ctx_end(&ctx);
    }
    /* while a replica replaces its keyspace, nothing is decided */
    desc_t x;
    desc_make(&x, KV("database=users"));
    rls_request_t q = { { "mongo_cps", 9 }, &x.d, 1, 0, true };
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, &e.c.srv, T0, false, 0);
    rls_result_t res;
    assert_false(rls_should_rate_limit(e.r, &ctx, &q, &res));
    assert_int_equal(ctx.err.code, CMD_E_UNAVAILABLE);
    cmd_ctx_end(&ctx);
    cmd_auth_free(e.c.srv.auth);
    e.c.srv.auth = NULL;
    env_close(&e);
}

/* On a cluster, a request's keys share the {domain} hash tag: the node that
 * owns the domain's slot decides all its descriptors at once, another
 * answers MOVED naming the owner. */
static void test_cluster_slots(void **state)
{
    (void)state;
    unsigned slot = slot_of("{mongo_cps}", 11);
    char map[512];
    int n = snprintf(map, sizeof(map), "epoch 1\nnode a 10.0.0.1:8080\nnode b 10.0.0.2:8080\nslots a %u\n", slot);
    if (slot > 0)
        n += snprintf(map + n, sizeof(map) - (size_t)n, "slots b 0-%u\n", slot - 1);
    if (slot < SLOT_COUNT - 1)
        snprintf(map + n, sizeof(map) - (size_t)n, "slots b %u-%u\n", slot + 1, SLOT_COUNT - 1);
    for (int node = 0; node < 2; node++) {
        env_t e;
        env_open(&e, FIX "example01.yaml", NULL);
        char err[256];
        e.c.srv.cluster = cmd_cluster_create(node ? "b" : "a", NULL, NULL);
        assert_non_null(e.c.srv.cluster);
        if (!cmd_cluster_set(e.c.srv.cluster, map, strlen(map), false, err, sizeof(err)))
            fail_msg("%s", err);
        desc_t d[2];
        desc_make(&d[0], KV("database=users"));
        desc_make(&d[1], KV("database=default"));
        rls_descriptor_t ds[2] = { d[0].d, d[1].d };
        rls_request_t q = { { "mongo_cps", 9 }, ds, 2, 0, false };
        cmd_ctx_t ctx;
        cmd_ctx_init(&ctx, &e.c.srv, T0, false, 0);
        rls_result_t res;
        bool ok = rls_should_rate_limit(e.r, &ctx, &q, &res);
        if (node == 0) {
            if (!ok)
                fail_msg("%s", ctx.err.message);
            assert_int_equal(res.statuses[1].limit_remaining, 499);
            rls_result_free(&res);
        } else {
            assert_false(ok);
            assert_int_equal(ctx.err.code, CMD_E_MOVED);
            assert_string_equal(ctx.err.where, "10.0.0.1:8080");
        }
        cmd_ctx_end(&ctx);
        cmd_cluster_free(e.c.srv.cluster);
        e.c.srv.cluster = NULL;
        env_close(&e);
    }
}

/* A swap keeps the old set alive for a result that holds it. */
static void test_swap_keeps_held_set(void **state)
{
    (void)state;
    env_t e;
    env_open(&e, FIX "example04b.yaml", NULL);
    rls_status_t st;
    rls_result_t res;
    desc_t x;
    desc_make(&x, KV("key=value", "subkey=s"));
    decide_n(&e, "example4", &x, 1, 0, T0, &res);
    rls_swap(e.r, load(FIX "example04a.yaml"));
    assert_int_equal(res.statuses[0].current_limit.requests_per_unit, 300);
    assert_true(res.nheaders >= 2);
    assert_non_null(strstr(header(&res, "ratelimit-policy"), "example4.key_value.subkey"));
    rls_result_free(&res);
    hit1(&e, "example4", KV("key=value", "subkey=s"), T0, &st);
    assert_false(st.has_limit);
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_load),        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_extensions_refused),   cmocka_unit_test(test_basic_config_matching),
        cmocka_unit_test(test_wildcards),            cmocka_unit_test(test_example_decisions),
        cmocka_unit_test(test_fixed_window_model),   cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_overrides_and_errors), cmocka_unit_test(test_algorithms_and_headers),
        cmocka_unit_test(test_metrics_bounded),      cmocka_unit_test(test_admission),
        cmocka_unit_test(test_cluster_slots),        cmocka_unit_test(test_swap_keeps_held_set),
        cmocka_unit_test(test_calendar_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
