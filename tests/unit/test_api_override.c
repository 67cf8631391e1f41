/*
 * test_api_override.c - live per-tenant overrides in process: which limits
 * a tenant gets (the API's override, else the policies file's, else the
 * policy's defaults; an API override of another algorithm, left by a
 * reload, does not apply), the overrides value (core/override.c: order,
 * bounds, encoding refused when no tally wrote it), and the operations'
 * records replaying to byte-identical dumps, found by cmd_override_lookup.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/ratelimit.h"
#include "cmd/override.h"
#include "core/keyspace.h"
#include "core/override.h"
#include "tests/unit/cmd_check.h"

static const char POLICIES[] =
    "{\"policies\": {\n"
    "  \"api\": {\"algorithm\": \"fixed_window\", \"max_count\": 2, \"period\": 60, \"key\": \"{header:X-Api-Key}\",\n"
    "          \"overrides\": {\"gold\": {\"max_count\": 5, \"period\": 60},\n"
    "                        \"silver\": {\"algorithm\": \"fixed_window\", \"max_count\": 3, \"period\": 60}}},\n"
    "  \"g\": {\"max_burst\": 1, \"count_per_period\": 1, \"period\": 1}\n"
    "}}\n";

static void test_resolution(void **state)
{
    (void)state;
    api_policies_t *reg = api_policies_create();
    size_t n;
    char err[300];
    assert_true(api_policies_load(reg, POLICIES, strlen(POLICIES), &n, err, sizeof(err)));
    const policy_t *p = policy_find(reg, "api");
    assert_non_null(p);
    assert_int_equal(p->noverrides, 2);
    throttle_params_t tp;
    /* default */
    assert_int_equal(policy_limits(p, "acme", 4, NULL, &tp), POLICY_LIMIT_DEFAULT);
    assert_int_equal(tp.u.win.max_count, 2);
    /* the file's */
    assert_int_equal(policy_limits(p, "gold", 4, NULL, &tp), POLICY_LIMIT_FILE);
    assert_int_equal(tp.u.win.max_count, 5);
    assert_int_equal(policy_limits(p, "silver", 6, NULL, &tp), POLICY_LIMIT_FILE);
    assert_int_equal(tp.u.win.max_count, 3);
    assert_int_equal(policy_limits(p, "gol", 3, NULL, &tp), POLICY_LIMIT_DEFAULT);
    /* the API's wins over both */
    static const char api[] = "{\"algorithm\":\"fixed_window\",\"max_count\":9,\"period\":60}";
    throttle_params_t live;
    assert_true(policy_override_text(api, strlen(api), &live, NULL));
    assert_int_equal(policy_limits(p, "gold", 4, &live, &tp), POLICY_LIMIT_API);
    assert_int_equal(tp.u.win.max_count, 9);
    assert_int_equal(tp.algo, THROTTLE_FIXED_WINDOW);
    assert_int_equal(policy_limits(p, "acme", 4, &live, &tp), POLICY_LIMIT_API);
    /* one of another algorithm (the policy changed since) does not apply */
    static const char other[] = "{\"algorithm\":\"gcra\",\"max_burst\":1,\"count_per_period\":1,\"period\":60}";
    assert_true(policy_override_text(other, strlen(other), &live, NULL));
    assert_int_equal(policy_limits(p, "gold", 4, &live, &tp), POLICY_LIMIT_FILE);
    assert_int_equal(tp.u.win.max_count, 5);
    assert_int_equal(policy_limits(p, "acme", 4, &live, &tp), POLICY_LIMIT_DEFAULT);
    /* stored text that does not read (no tally wrote it) */
    assert_false(policy_override_text("{x", 2, &live, NULL));
    assert_false(policy_override_text("{\"max_count\":9,\"period\":60}", 27, &live, NULL));   /* no algorithm */
    assert_false(policy_override_text("{\"algorithm\":\"fixed_window\",\"max_count\":9,\"period\":60,\"x\":1}", 60, &live, NULL));
    assert_string_equal(policy_limit_name(POLICY_LIMIT_DEFAULT), "default");
    assert_string_equal(policy_limit_name(POLICY_LIMIT_FILE), "file-override");
    assert_string_equal(policy_limit_name(POLICY_LIMIT_API), "override");
    /* parsing an override: the policy's algorithm filled in, another refused */
    json_t *o = json_pack("{s:i, s:i}", "max_count", 4, "period", 60);
    api_err_t e;
    assert_true(policy_override_parse(p, o, &tp, &e));
    assert_string_equal(json_string_value(json_object_get(o, "algorithm")), "fixed_window");
    json_decref(o);
    o = json_pack("{s:s, s:i, s:i}", "algorithm", "sliding_log", "max_count", 4, "period", 60);
    assert_false(policy_override_parse(p, o, &tp, &e));
    assert_string_equal(e.field, "algorithm");
    json_decref(o);
    o = json_pack("{s:i, s:i, s:i}", "max_count", 4, "period", 60, "shadow", 1);
    assert_false(policy_override_parse(p, o, &tp, &e));
    json_decref(o);
    api_policies_free(reg);
    /* the file's overrides are checked at load, with the line */
    static const char bad[] = "{\"policies\": {\"a\": {\"algorithm\": \"fixed_window\", \"max_count\": 2, \"period\": 60,\n"
                              " \"overrides\": {\"t\": {\"algorithm\": \"gcra\", \"max_burst\": 1}}}}}";
    reg = api_policies_create();
    assert_false(api_policies_load(reg, bad, strlen(bad), &n, err, sizeof(err)));
    assert_non_null(strstr(err, "line 2"));
    assert_non_null(strstr(err, "override 't'"));
    api_policies_free(reg);
}

static void test_map(void **state)
{
    (void)state;
    override_map_t *m = override_map_new();
    assert_int_equal(override_map_set(m, "b", 1, "{2}", 3), OVERRIDE_OK);
    assert_int_equal(override_map_set(m, "a", 1, "{1}", 3), OVERRIDE_OK);
    assert_int_equal(override_map_set(m, "ab", 2, "{3}", 3), OVERRIDE_OK);
    assert_int_equal(override_map_set(m, "a", 1, "{11}", 4), OVERRIDE_OK);   /* replaced */
    assert_int_equal(override_map_count(m), 3);
    const char *t, *l;
    size_t tl, ll;
    override_map_at(m, 0, &t, &tl, &l, &ll);
    assert_memory_equal(t, "a", 1);
    assert_memory_equal(l, "{11}", 4);
    override_map_at(m, 1, &t, &tl, &l, &ll);
    assert_int_equal(tl, 2);
    assert_int_equal(override_map_after(m, "a", 1), 1);
    assert_int_equal(override_map_after(m, "aa", 2), 1);
    assert_int_equal(override_map_after(m, NULL, 0), 0);
    assert_int_equal(override_map_after(m, "b", 1), 3);
    size_t before = override_type.size(m);
    wbuf_t w = WBUF_INIT;
    override_type.encode(m, &w);
    const char *why = NULL;
    override_map_t *d = override_type.decode(w.data, w.len, &why);
    assert_non_null(d);
    assert_int_equal(override_map_count(d), 3);
    wbuf_t w2 = WBUF_INIT;
    override_type.encode(d, &w2);
    assert_int_equal(w.len, w2.len);
    assert_memory_equal(w.data, w2.data, w.len);
    /* every truncation refused; entries out of order refused */
    for (size_t cut = 0; cut < w.len; cut++)
        assert_null(override_type.decode(w.data, cut, &why));
    wbuf_t bad = WBUF_INIT;
    wbuf_put_u8(&bad, 1);
    wbuf_put_u32(&bad, 2);
    wbuf_put_blob(&bad, "b", 1);
    wbuf_put_blob(&bad, "{}", 2);
    wbuf_put_blob(&bad, "a", 1);
    wbuf_put_blob(&bad, "{}", 2);
    assert_null(override_type.decode(bad.data, bad.len, &why));
    assert_string_equal(why, "override: entries out of order");
    wbuf_free(&bad);
    assert_true(override_map_del(m, "ab", 2));
    assert_false(override_map_del(m, "ab", 2));
    assert_true(override_type.size(m) < before);
    wbuf_free(&w);
    wbuf_free(&w2);
    override_map_free(d);
    /* the bound */
    char k[16];
    for (int i = (int)override_map_count(m); i < OVERRIDE_MAX_ENTRIES; i++) {
        int kl = snprintf(k, sizeof(k), "t%05d", i);
        assert_int_equal(override_map_set(m, k, (size_t)kl, "{}", 2), OVERRIDE_OK);
    }
    assert_int_equal(override_map_set(m, "zz", 2, "{}", 2), OVERRIDE_FULL);
    assert_int_equal(override_map_set(m, "a", 1, "{}", 2), OVERRIDE_OK);   /* a replacement still fits */
    override_map_free(m);
}

/* The per-limit metric: tenants never labels, the policies past
 * POLICY_METRICS_MAX summed under policy="other". */
static void test_limit_metrics_bounded(void **state)
{
    (void)state;
    wbuf_t f = WBUF_INIT;
    wbuf_put_bytes(&f, "{\"policies\":{", 13);
    for (int i = 0; i < POLICY_METRICS_MAX + 5; i++) {
        char one[128];
        int n = snprintf(one, sizeof(one), "%s\"p%03d\":{\"algorithm\":\"fixed_window\",\"max_count\":1,\"period\":60}",
                         i ? "," : "", i);
        wbuf_put_bytes(&f, one, (size_t)n);
    }
    wbuf_put_bytes(&f, "}}", 2);
    api_policies_t *reg = api_policies_create();
    size_t n;
    char err[300];
    assert_true(api_policies_load(reg, (const char *)f.data, f.len, &n, err, sizeof(err)));
    assert_int_equal(n, POLICY_METRICS_MAX + 5);
    policy_count(policy_find(reg, "p000"), POLICY_LIMIT_API, POLICY_LIMITED);
    policy_count(policy_find(reg, "p000"), POLICY_LIMIT_DEFAULT, POLICY_ALLOWED);
    for (int i = POLICY_METRICS_MAX; i < POLICY_METRICS_MAX + 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "p%03d", i);
        policy_count(policy_find(reg, name), POLICY_LIMIT_FILE, POLICY_ALLOWED);
    }
    wbuf_t m = WBUF_INIT;
    api_policies_metrics(reg, &m);
    wbuf_put_u8(&m, 0);
    const char *s = (const char *)m.data;
    assert_non_null(strstr(s, "tally_ratelimit_limit_decisions_total{policy=\"p000\",limit=\"override\",decision=\"limited\"} 1\n"));
    assert_non_null(strstr(s, "tally_ratelimit_limit_decisions_total{policy=\"p000\",limit=\"default\",decision=\"allowed\"} 1\n"));
    assert_non_null(strstr(s, "tally_ratelimit_limit_decisions_total{policy=\"other\",limit=\"file-override\",decision=\"allowed\"} 5\n"));
    assert_non_null(strstr(s, "tally_ratelimit_limit_decisions_total{policy=\"p099\","));
    assert_null(strstr(s, "tally_ratelimit_limit_decisions_total{policy=\"p100\","));
    /* (POLICY_METRICS_MAX + 1) policies x 3 limits x 3 decisions */
    size_t series = 0;
    for (const char *q = s; (q = strstr(q, "\ntally_ratelimit_limit_decisions_total{")); q++)
        series++;
    assert_int_equal(series, (POLICY_METRICS_MAX + 1) * 9);
    wbuf_free(&m);
    wbuf_free(&f);
    api_policies_free(reg);
}

static int parses;

static bool count_parse(const char *text, size_t len, throttle_params_t *out, void *ud)
{
    parses++;
    return policy_override_text(text, len, out, ud);
}

static void test_records_replay(void **state)
{
    (void)state;
    cmd_check_t c;
    cmd_check_open(&c);
    char key[64];
    size_t klen = cmd_override_key("api", key, sizeof(key));
    assert_string_equal(key, "_tally:overrides:api");
    static const char l1[] = "{\"algorithm\":\"fixed_window\",\"max_count\":9,\"period\":60}";
    cmd_override_set_args_t s = { key, klen, "acme", 4, l1, strlen(l1) };
    cmd_override_res_t r;
    assert_true(cmd_check_run(&c, &CMD_OVERRIDE_SET, &s, &r, CMD_CHECK_NOW_NS, NULL));
    assert_false(r.existed);
    s.tenant = "beta";
    assert_true(cmd_check_run(&c, &CMD_OVERRIDE_SET, &s, &r, CMD_CHECK_NOW_NS, NULL));
    s.tenant = "acme";
    s.limits = "{}";
    s.llen = 2;
    assert_true(cmd_check_run(&c, &CMD_OVERRIDE_SET, &s, &r, CMD_CHECK_NOW_NS, NULL));
    assert_true(r.existed);
    assert_int_equal(r.count, 2);
    cmd_override_key_args_t d = { key, klen, "beta", 4, NULL };
    assert_true(cmd_check_run(&c, &CMD_OVERRIDE_DEL, &d, &r, CMD_CHECK_NOW_NS, NULL));
    assert_true(r.existed);
    assert_true(cmd_check_run(&c, &CMD_OVERRIDE_DEL, &d, &r, CMD_CHECK_NOW_NS, NULL));   /* nothing: no record */
    assert_false(r.existed);
    /* bounds refused before anything changes */
    cmd_err_t err;
    static char big[OVERRIDE_LIMITS_MAX + 1];
    memset(big, ' ', sizeof(big));
    s.limits = big;
    s.llen = sizeof(big);
    assert_false(cmd_check_run(&c, &CMD_OVERRIDE_SET, &s, &r, CMD_CHECK_NOW_NS, &err));
    assert_int_equal(err.code, CMD_E_BAD_REQUEST);
    assert_int_equal(cmd_check_replays(&c), 4);
    /* what a decision finds: the text parsed once, then the cache; "{}" does not read */
    throttle_params_t tp;
    parses = 0;
    assert_int_equal(cmd_override_lookup(&c.srv, "api", "acme", 4, count_parse, NULL, &tp, CMD_CHECK_NOW_NS / 1000000), -1);
    assert_int_equal(cmd_override_lookup(&c.srv, "api", "acme", 4, count_parse, NULL, &tp, CMD_CHECK_NOW_NS / 1000000), -1);
    assert_int_equal(parses, 1);
    assert_int_equal(cmd_override_lookup(&c.srv, "api", "beta", 4, count_parse, NULL, &tp, CMD_CHECK_NOW_NS / 1000000), 0);
    assert_int_equal(cmd_override_lookup(&c.srv, "other", "acme", 4, count_parse, NULL, &tp, CMD_CHECK_NOW_NS / 1000000), 0);
    s.limits = l1;
    s.llen = strlen(l1);
    assert_true(cmd_check_run(&c, &CMD_OVERRIDE_SET, &s, &r, CMD_CHECK_NOW_NS, NULL));   /* the cache goes with the text */
    assert_int_equal(cmd_override_lookup(&c.srv, "api", "acme", 4, count_parse, NULL, &tp, CMD_CHECK_NOW_NS / 1000000), 1);
    assert_int_equal(cmd_override_lookup(&c.srv, "api", "acme", 4, count_parse, NULL, &tp, CMD_CHECK_NOW_NS / 1000000), 1);
    assert_int_equal(parses, 2);
    assert_int_equal(tp.u.win.max_count, 9);
    /* the list, from a cursor */
    d.tenant = "acme";
    char got[OVERRIDE_LIMITS_MAX];
    d.out = got;
    assert_true(cmd_check_run(&c, &CMD_OVERRIDE_GET, &d, &r, CMD_CHECK_NOW_NS, NULL));
    assert_true(r.existed);
    assert_int_equal(r.llen, strlen(l1));
    /* the last entry deleted: the key goes */
    assert_true(cmd_check_run(&c, &CMD_OVERRIDE_DEL, &d, &r, CMD_CHECK_NOW_NS, NULL));
    ks_key_t k = ks_key(c.srv.ks, key, klen);
    ks_shard_t *sh = ks_shard_at(c.srv.ks, k.shard);
    ks_shard_lock(sh);
    assert_null(ks_find(c.srv.ks, &k, CMD_CHECK_NOW_NS / 1000000));
    ks_shard_unlock(sh);
    assert_int_equal(cmd_check_replays(&c), 6);
    cmd_check_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolution),
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_records_replay),
        cmocka_unit_test(test_limit_metrics_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
