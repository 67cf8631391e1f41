/*
 * test_cmd_registry.c - the numbers written to disk never change meaning.
 * A value's type tag (snapshots, dumps) and an operation's id (journal
 * command records) are chosen once: every one ever given is listed here,
 * and the registries built from the definitions (tools/registry.sh: every
 * `const ks_type_t` of core/, every `const cmd_def_t` of cmd/) must agree
 * with the list.  A new type or operation adds its line here; one that goes
 * keeps its line, marked retired, so that its number is never given again.
 *
 * Operation ids by family, each family in a range of its own:
 *   1-9 counters; 10-19 keys and dumps; 20-29 HyperLogLog; 30-39 Bloom;
 *   40-59 Cuckoo; 60-99 geo; 100-109 Count-Min; 110-119 Top-K;
 *   120-139 T-Digest; 140-159 bit strings; 160-199 activity;
 *   200-299 rate limiting; 300-399 time series; 500-599 concurrency
 *   leases; a new family takes the
 *   next free hundred.  Ids are below 1024 (tallyd --check counts by id).
 */
#include <stdlib.h>
#include <string.h>

#include "cmd/bits.h"
#include "cmd/cms.h"
#include "cmd/def.h"
#include "cmd/geo.h"
#include "cmd/keys_ops.h"
#include "cmd/tdigest.h"
#include "cmd/throttle.h"
#include "cmd/ts.h"
#include "cmd/uv.h"
#include "core/types.h"
#include "tests/unit/cmd_check.h"

typedef struct given {
    unsigned number;
    const char *name;
    bool retired;   /* no longer defined; its number is never given again */
} given_t;

static const given_t type_tags[] = {
    { 1, "throttle", false },
    { 2, "counter", false },
    { 3, "uv", false },
    { 4, "bloom", false },
    { 5, "cuckoo", false },
    { 6, "cms", false },
    { 7, "topk", false },
    { 8, "tdigest", false },
    { 9, "bits", false },
    { 10, "activity", false },
    { 11, "geo", false },
    { 12, "ts", false },
    { 14, "lease", false },
    { 20, "override", false },
};

static const given_t op_ids[] = {
    { 1, "INCRBY", false },
    { 2, "COUNTER.GET", false },
    { 10, "SCAN", false },
    { 11, "KEY.INFO", false },
    { 12, "DEL", false },
    { 13, "PEXPIRE", false },
    { 14, "PERSIST", false },
    { 15, "DUMP", false },
    { 16, "RESTORE", false },
    { 17, "DBSIZE", false },
    { 20, "PFADD", false },
    { 21, "PFCOUNT", false },
    { 22, "PFMERGE", false },
    { 23, "HLL.EXPORT", false },
    { 24, "HLL.IMPORT", false },
    { 30, "BF.RESERVE", false },
    { 31, "BF.INSERT", false },
    { 32, "BF.MEXISTS", false },
    { 33, "BF.EXISTS", false },
    { 34, "BF.INFO", false },
    { 35, "BF.CARD", false },
    { 36, "BF.SCANDUMP", false },
    { 37, "BF.LOADCHUNK", false },
    { 40, "CF.RESERVE", false },
    { 41, "CF.INSERT", false },
    { 42, "CF.MEXISTS", false },
    { 43, "CF.EXISTS", false },
    { 44, "CF.DEL", false },
    { 45, "CF.COUNT", false },
    { 46, "CF.INFO", false },
    { 47, "CF.COMPACT", false },
    { 48, "CF.SCANDUMP", false },
    { 49, "CF.LOADCHUNK", false },
    { 60, "GEOADD", false },
    { 61, "ZREM", false },
    { 62, "GEOPOS", false },
    { 63, "GEOHASH", false },
    { 64, "GEODIST", false },
    { 65, "GEOSEARCH", false },
    { 66, "GEOSEARCHSTORE", false },
    { 67, "ZRANGE", false },
    { 100, "CMS.INITBYDIM", false },
    { 101, "CMS.INCRBY", false },
    { 102, "CMS.QUERY", false },
    { 103, "CMS.MERGE", false },
    { 104, "CMS.INFO", false },
    { 110, "TOPK.RESERVE", false },
    { 111, "TOPK.ADD", false },
    { 112, "TOPK.INCRBY", false },
    { 113, "TOPK.LIST", false },
    { 114, "TOPK.QUERY", false },
    { 115, "TOPK.INFO", false },
    { 120, "TDIGEST.CREATE", false },
    { 121, "TDIGEST.ADD", false },
    { 122, "TDIGEST.QUANTILE", false },
    { 123, "TDIGEST.CDF", false },
    { 124, "TDIGEST.RANK", false },
    { 125, "TDIGEST.REVRANK", false },
    { 126, "TDIGEST.BYRANK", false },
    { 127, "TDIGEST.BYREVRANK", false },
    { 128, "TDIGEST.TRIMMED_MEAN", false },
    { 129, "TDIGEST.MIN", false },
    { 130, "TDIGEST.MAX", false },
    { 131, "TDIGEST.MERGE", false },
    { 132, "TDIGEST.RESET", false },
    { 133, "TDIGEST.INFO", false },
    { 140, "SET", false },
    { 141, "GET", false },
    { 142, "GETRANGE", false },
    { 143, "SETBIT", false },
    { 144, "GETBIT", false },
    { 145, "BITCOUNT", false },
    { 146, "BITPOS", false },
    { 147, "BITOP", false },
    { 148, "BITFIELD", false },
    { 149, "BITFIELD_RO", false },
    { 150, "SETRANGE", false },
    { 160, "ACTIVITY.ADD", false },
    { 161, "ACTIVITY.IMPORT", false },
    { 162, "ACTIVITY.COUNT", false },
    { 163, "ACTIVITY.USERS", false },
    { 164, "ACTIVITY.RETENTION", false },
    { 165, "ACTIVITY.INFO", false },
    { 200, "CL.THROTTLE", false },
    { 201, "THROTTLE.SLIDING_LOG", false },
    { 202, "THROTTLE.SLIDING_WINDOW", false },
    { 203, "THROTTLE.FIXED_WINDOW", false },
    { 204, "THROTTLE.TOKEN_BUCKET", false },
    { 205, "THROTTLE.BATCH", false },
    { 206, "THROTTLE.RESET", false },
    { 230, "THROTTLE.RESERVE", false },
    { 231, "THROTTLE.SETTLE", false },
    { 232, "THROTTLE.REFUND", false },
    { 233, "THROTTLE.PROBE", false },
    { 300, "TS.CREATE", false },
    { 301, "TS.ADD", false },
    { 302, "TS.INCRBY", false },
    { 303, "TS.DECRBY", false },
    { 304, "TS.ALTER", false },
    { 305, "TS.DEL", false },
    { 306, "TS.CREATERULE", false },
    { 307, "TS.DELETERULE", false },
    { 308, "TS.INFO", false },
    { 309, "TS.RANGE", false },
    { 310, "TS.REVRANGE", false },
    { 311, "TS.QUERYINDEX", false },
    { 312, "TS.MGET", false },
    { 313, "TS.MRANGE", false },
    { 314, "TS.MREVRANGE", false },
    { 500, "LEASE.ACQUIRE", false },
    { 501, "LEASE.RELEASE", false },
    { 502, "LEASE.RENEW", false },
    { 503, "LEASE.INFO", false },
    { 900, "OVERRIDE.SET", false },
    { 901, "OVERRIDE.DEL", false },
    { 902, "OVERRIDE.GET", false },
    { 903, "OVERRIDE.LIST", false },
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const given_t *given_by_name(const given_t *g, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(g[i].name, name) == 0)
            return &g[i];
    return NULL;
}

/* The list itself: no number and no name given twice. */
static void check_list(const given_t *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(g[i].number, g[j].number);
            assert_string_not_equal(g[i].name, g[j].name);
        }
}

static void test_type_tags(void **state)
{
    (void)state;
    check_list(type_tags, N(type_tags));
    for (size_t i = 0; i < ks_type_count(); i++) {
        const ks_type_t *t = ks_type_at(i);
        const given_t *g = given_by_name(type_tags, N(type_tags), t->name);
        if (!g)
            fail_msg("type %s (tag %u) is not in this list: add it, with a tag never given", t->name, t->tag);
        assert_false(g->retired);
        assert_int_equal(t->tag, g->number);
        assert_true(t->tag > 0 && t->tag <= TYPE_TAG_MAX);
        assert_ptr_equal(ks_type_by_tag(t->tag), t);
        assert_ptr_equal(ks_type_by_name(t->name), t);
        assert_non_null(t->noun);
    }
    for (size_t i = 0; i < N(type_tags); i++) {   /* a type that goes is marked retired, not dropped */
        const ks_type_t *t = ks_type_by_tag(type_tags[i].number);
        if (type_tags[i].retired)
            assert_null(t);
        else if (!t)
            fail_msg("type %s is listed but not defined: mark it retired", type_tags[i].name);
        else
            assert_string_equal(t->name, type_tags[i].name);
    }
}

static void test_op_ids(void **state)
{
    (void)state;
    check_list(op_ids, N(op_ids));
    for (size_t i = 0; i < cmd_def_count(); i++) {
        const cmd_def_t *d = cmd_def_at(i);
        const given_t *g = given_by_name(op_ids, N(op_ids), d->name);
        if (!g)
            fail_msg("operation %s (id %u) is not in this list: add it, with an id never given", d->name, d->id);
        assert_false(g->retired);
        assert_int_equal(d->id, g->number);
        assert_true(d->id > 0 && d->id < 1024);
    }
    for (size_t i = 0; i < N(op_ids); i++) {
        const cmd_def_t *d = cmd_def_by_id((uint16_t)op_ids[i].number);
        if (op_ids[i].retired)
            assert_null(d);
        else if (!d)
            fail_msg("operation %s is listed but not defined: mark it retired", op_ids[i].name);
        else
            assert_string_equal(d->name, op_ids[i].name);
    }
}

/* The keys an operation's arguments name, as "k1,k2,...". */
static bool add_key(void *ud, const char *key, size_t len)
{
    char *out = ud;
    size_t used = strlen(out);
    snprintf(out + used, 256 - used, "%s%.*s", used ? "," : "", (int)len, key);
    return true;
}

static const char *keys_of(const cmd_def_t *def, const void *args)
{
    static char out[256];
    out[0] = 0;
    assert_non_null(def->keys);
    assert_true(def->keys(args, add_key, out));
    return out;
}

static void test_key_specs(void **state)
{
    (void)state;
    /* only these select their keys by a prefix or by labels, or count them */
    for (size_t i = 0; i < cmd_def_count(); i++) {
        const cmd_def_t *d = cmd_def_at(i);
        bool none = d == &CMD_SCAN || d == &CMD_DBSIZE || d == &CMD_TS_MGET || d == &CMD_TS_MRANGE || d == &CMD_TS_MREVRANGE ||
                    d == &CMD_TS_QUERYINDEX;
        if (none != (d->keys == NULL))
            fail_msg("%s: keys %s", d->name, d->keys ? "given, but it names none" : "missing");
    }
    cmd_pfadd_args_t one = { .key = "k", .klen = 1 };
    assert_string_equal(keys_of(&CMD_PFADD, &one), "k");

    const char *const srcs[] = { "s1", "s2" };
    const size_t lens[] = { 2, 2 };
    cmd_bits_bitop_args_t bitop = { .key = "d", .klen = 1, .sources = { .n = 2, .p = srcs, .len = lens } };
    assert_string_equal(keys_of(&CMD_BITOP, &bitop), "d,s1,s2");
    cmd_cms_merge_args_t cms = { .key = "d", .klen = 1, .sources = { .n = 2, .p = srcs, .len = lens } };
    assert_string_equal(keys_of(&CMD_CMS_MERGE, &cms), "d,s1,s2");
    cmd_tdigest_merge_args_t td = { .key = "d", .klen = 1, .sources = { .n = 2, .p = srcs, .len = lens } };
    assert_string_equal(keys_of(&CMD_TDIGEST_MERGE, &td), "d,s1,s2");
    cmd_pfcount_args_t pfc = { .key = "a", .klen = 1, .unions = cmd_items_of(srcs, lens, NULL, 2) };
    assert_string_equal(keys_of(&CMD_PFCOUNT, &pfc), "a,s1,s2");
    cmd_pfmerge_args_t pfm = { .key = "d", .klen = 1, .sources = cmd_items_of(srcs, lens, NULL, 2) };
    assert_string_equal(keys_of(&CMD_PFMERGE, &pfm), "d,s1,s2");
    cmd_geosearch_args_t geo = { .key = "d", .klen = 1, .source = "src", .slen = 3 };
    assert_string_equal(keys_of(&CMD_GEOSEARCHSTORE, &geo), "d,src");
    assert_string_equal(keys_of(&CMD_GEOSEARCH, &geo), "d");
    cmd_ts_createrule_args_t rule = { .key = "raw", .klen = 3, .dest = "avg", .dlen = 3 };
    assert_string_equal(keys_of(&CMD_TS_CREATERULE, &rule), "raw,avg");
    cmd_throttle_item_t items[2] = { { .key = "u:1", .klen = 3 }, { .key = "ip:2", .klen = 4 } };
    cmd_throttle_batch_args_t batch = { .items = items, .n = 2 };
    assert_string_equal(keys_of(&CMD_THROTTLE_BATCH, &batch), "u:1,ip:2");
    assert_string_equal(keys_of(&CMD_CL_THROTTLE, &items[1]), "ip:2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_tags),
        cmocka_unit_test(test_op_ids),
        cmocka_unit_test(test_key_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
