/*
 * test_slot.c - cluster slots and maps (core/slot.h, core/clustermap.h):
 * CRC-16/XMODEM check values, Redis Cluster's hash-tag rules with the slots
 * redis-server's CLUSTER KEYSLOT gives (7.0, cluster-enabled; it_resp_cluster
 * compares many more keys with a live redis-server, it_cluster the HAProxy
 * Lua converter's slots), the map parser's refusals naming the line,
 * and format/parse round trips.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/clustermap.h"
#include "core/slot.h"

static unsigned slot(const char *k) { return slot_of(k, strlen(k)); }

static void test_crc16_vectors(void **state)
{
    (void)state;
    assert_int_equal(slot_crc16("123456789", 9), 0x31C3u);   /* the CRC-16/XMODEM check value */
    assert_int_equal(slot_crc16("", 0), 0);
    /* redis-server 7.0's CLUSTER KEYSLOT */
    assert_int_equal(slot("foo"), 12182);
    assert_int_equal(slot("bar"), 5061);
    assert_int_equal(slot("user1000"), 3443);
    assert_int_equal(slot("123456789"), 12739);
    assert_int_equal(slot(""), 0);
    assert_int_equal(slot_of("a\0b", 3), slot_crc16("a\0b", 3) % 16384);   /* binary keys hash every byte */
}

static void expect_rk(const char *key, const char *want)
{
    size_t n;
    const char *rk = slot_routing_key(key, strlen(key), &n);
    if (n != strlen(want) || memcmp(rk, want, n) != 0)
        fail_msg("routing key of '%s' is '%.*s', want '%s'", key, (int)n, rk, want);
}

static void test_hash_tags(void **state)
{
    (void)state;
    /* Redis Cluster specification's examples */
    expect_rk("{user1000}.following", "user1000");
    expect_rk("{user1000}.followers", "user1000");
    expect_rk("foo{}{bar}", "foo{}{bar}");          /* empty first tag: the whole key */
    expect_rk("foo{{bar}}zap", "{bar");             /* first '{', then the first '}' after it */
    expect_rk("foo{bar}{zap}", "bar");              /* only the first tag */
    expect_rk("{}", "{}");
    expect_rk("{", "{");
    expect_rk("x{", "x{");
    expect_rk("}x{y", "}x{y");
    expect_rk("a}{b}", "b");
    expect_rk("", "");
    assert_int_equal(slot("{user1000}.following"), slot("user1000"));
    assert_int_equal(slot("{user1000}.following"), 3443);
    assert_int_equal(slot("{tenant42}:logins"), slot("{tenant42}:signups"));
    assert_int_equal(slot("{tenant42}:logins"), 14826);
    assert_int_equal(slot("foo{}{bar}"), 8363);
    assert_int_equal(slot("foo{{bar}}zap"), 4015);   /* CRC16 of "{bar" */
    assert_int_equal(slot("foo{bar}{zap}"), 5061);
}

static const char good[] = "# two nodes\n"
                           "epoch 3\n"
                           "node a 10.0.0.1:8080\n"
                           "node b host-b.example:9000 resp=host-b.example:6380  # comment\n"
                           "slots a 0-8191\n"
                           "slots b 8192-16382\n"
                           "slots b 16383\n"
                           "migrate 100-199 a b\n";

static cmap_t *parse(const char *text, char *err, size_t n) { return cmap_parse(text, strlen(text), err, n); }

static void test_map_parse(void **state)
{
    (void)state;
    char err[512];
    cmap_t *m = parse(good, err, sizeof(err));
    if (!m)
        fail_msg("%s", err);
    assert_int_equal(m->epoch, 3);
    assert_int_equal(m->nnodes, 2);
    assert_string_equal(m->nodes[1].addr, "host-b.example:9000");
    assert_string_equal(m->nodes[1].resp, "host-b.example:6380");
    assert_string_equal(m->nodes[0].resp, "");
    assert_int_equal(m->owner[0], 0);
    assert_int_equal(m->owner[8192], 1);
    assert_int_equal(m->owner[16383], 1);
    assert_int_equal(m->owner[150], 0);
    assert_int_equal(m->migrating_to[150], 1);
    assert_int_equal(m->migrating_to[99], -1);
    assert_int_equal(m->migrating_to[200], -1);
    assert_int_equal(cmap_node_index(m, "b"), 1);
    assert_int_equal(cmap_node_index(m, "c"), -1);
    /* format and parse again: the same table */
    wbuf_t out = WBUF_INIT;
    cmap_format(m, &out);
    cmap_t *m2 = cmap_parse((const char *)out.data, out.len, err, sizeof(err));
    if (!m2)
        fail_msg("%s in:\n%.*s", err, (int)out.len, out.data);
    assert_int_equal(m2->epoch, 3);
    assert_string_equal(m2->nodes[1].resp, "host-b.example:6380");
    assert_string_equal(m2->nodes[0].resp, "");
    assert_memory_equal(m2->owner, m->owner, sizeof(m->owner));
    assert_memory_equal(m2->migrating_to, m->migrating_to, sizeof(m->migrating_to));
    wbuf_free(&out);
    cmap_free(m2);
    /* HAProxy's slot map: one line per owner's run, a migrating range
     * still its source's */
    cmap_format_haproxy(m, &out);
    const char want[] = "0:8191 tally_a\n8192:16383 tally_b\n";
    assert_int_equal(out.len, sizeof(want) - 1);
    assert_memory_equal(out.data, want, out.len);
    wbuf_free(&out);
    cmap_free(m);
}

static void expect_refused(const char *text, const char *needle)
{
    char err[512];
    cmap_t *m = parse(text, err, sizeof(err));
    if (m)
        fail_msg("accepted:\n%s", text);
    if (!strstr(err, needle))
        fail_msg("refusal '%s' does not say '%s'", err, needle);
}

static void test_map_refusals(void **state)
{
    (void)state;
    expect_refused("node a h:1\nslots a 0-16383\n", "no 'epoch N'");
    expect_refused("epoch 1\nnode a h:1\nslots a 0-16382\n", "slots 16383-16383 have no owner");
    expect_refused("epoch 1\nnode a h:1\nnode b h:2\nslots a 0-16383\nslots b 5\n", "line 5: slot 5 is already owned");
    expect_refused("epoch 1\nslots a 0-16383\n", "line 2: no node 'a'");
    expect_refused("epoch 1\nnode a nohost\nslots a 0-16383\n", "line 2: node address");
    expect_refused("epoch 1\nnode a h:0\nslots a 0-16383\n", "not HOST:PORT");
    expect_refused("epoch 1\nnode a h:1 h:2\n", "'h:2' is not resp=HOST:PORT");
    expect_refused("epoch 1\nnode a h:1 resp=h\n", "is not resp=HOST:PORT");
    expect_refused("epoch 1\nnode a h:1 resp=h:2 x\n", "expected 'node NAME HOST:PORT [resp=HOST:PORT]'");
    expect_refused("epoch 1\nnode a h:1\nnode a h:2\n", "declared twice");
    expect_refused("epoch 1\nnode a/b h:1\n", "node name");
    expect_refused("epoch 1\nnode a h:1\nslots a 0-16384\n", "not a slot range");
    expect_refused("epoch 1\nnode a h:1\nslots a 5-4\n", "not a slot range");
    expect_refused("epoch 1\nnode a h:1\nnode b h:2\nslots a 0-16383\nmigrate 0-10 b a\n", "migrates from node 'b'");
    expect_refused("epoch 1\nnode a h:1\nslots a 0-16383\nmigrate 0-10 a a\n", "to itself");
    expect_refused("epoch 1\nepoch 2\n", "a second 'epoch'");
    expect_refused("epoch x\n", "expected 'epoch N'");
    expect_refused("epoch 1\nbogus\n", "unknown directive 'bogus'");
    expect_refused("epoch 1\nnode a h:1\nnode b h:2\nslots a 0-16383\nmigrate 0-10 a b\nmigrate 5 a b\n",
                   "slot 5 is already migrating");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_vectors),
        cmocka_unit_test(test_hash_tags),
        cmocka_unit_test(test_map_parse),
        cmocka_unit_test(test_map_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
