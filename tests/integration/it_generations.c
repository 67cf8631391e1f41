/*
 * it_generations.c - journals of an older generation replay by its rules.
 *
 * Issue 18 changed how Bloom filters and Top-Ks evolve (RedisBloom's exact
 * geometry and heap).  A journal records requests, not results, so a journal
 * written before the change must be replayed by the old rules, or the
 * rebuilt values would differ from what was acknowledged (core/types.h).
 * Here the same requests are served live (generation 2), then the journal is
 * relabelled version 1, as the old tally wrote it, and replayed: the answers
 * must be generation 1's, and must stay so through a snapshot and restart.
 *
 *   reserve 0.01 4 expansion 1 + "0".."99":  RedisBloom (gen 2) 23 sub-filters,
 *                                           gen 1 24
 *   Top-K k 2 (no shared buckets), a b c:   gen 2 lists b, c (c's 1 reaches
 *                                           the minimum and expels a);
 *                                           gen 1 lists a, b
 *   cuckoo capacity 64 + "0".."999":        RedisBloom (gen 2) 17 sub-filters,
 *                                           gen 1 (random evictions) 16
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

#define ARGS ((const char *[]){ "--snapshot-interval", "0", NULL })

static void expect_generation(const tally_proc_t *p, int filters, const char *list, int cuckoo_filters)
{
    json_t *j = http_get_json(p, "/bloom/b");
    assert_int_equal(json_integer_value(json_object_get(j, "filters")), filters);
    json_decref(j);
    http_expect(p, "GET", "/topk/t/list", NULL, 200, list);
    j = http_get_json(p, "/cuckoo/c");
    assert_int_equal(json_integer_value(json_object_get(j, "filters")), cuckoo_filters);
    json_decref(j);
}

/* Rewrites the version field of every journal file in dir. */
static void relabel_journals(const char *dir, uint32_t version)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "journal.", 8) != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "r+b");
        assert_non_null(f);
        uint8_t le[4] = { (uint8_t)version, (uint8_t)(version >> 8), (uint8_t)(version >> 16),
                          (uint8_t)(version >> 24) };
        assert_int_equal(fseek(f, 8, SEEK_SET), 0);   /* after the magic */
        assert_int_equal(fwrite(le, 1, 4, f), 4);
        fclose(f);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
}

static void test_v1_journal_replays_generation_1(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, ARGS);
    http_expect(&p, "PUT", "/bloom/b", "{\"error_rate\":0.01,\"capacity\":4,\"expansion\":1}", 201, NULL);
    char body[1024];
    size_t n = (size_t)snprintf(body, sizeof(body), "{\"items\":[");
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(body + n, sizeof(body) - n, "%s\"%d\"", i ? "," : "", i);
    snprintf(body + n, sizeof(body) - n, "]}");
    http_expect(&p, "POST", "/bloom/b", body, 200, NULL);
    http_expect(&p, "PUT", "/cuckoo/c", "{\"capacity\":64}", 201, NULL);
    char big[8192];
    for (int part = 0; part < 10; part++) {
        n = (size_t)snprintf(big, sizeof(big), "{\"items\":[");
        for (int i = part * 100; i < part * 100 + 100; i++)
            n += (size_t)snprintf(big + n, sizeof(big) - n, "%s\"%d\"", i % 100 ? "," : "", i);
        snprintf(big + n, sizeof(big) - n, "]}");
        http_expect(&p, "POST", "/cuckoo/c", big, 200, NULL);
    }
    http_expect(&p, "PUT", "/topk/t", "{\"k\":2,\"width\":1000}", 201, NULL);
    http_expect(&p, "POST", "/topk/t", "{\"items\":[\"a\",\"b\",\"c\"]}", 200, "{\"expelled\":[null,null,\"a\"]}");
    expect_generation(&p, 23, "{\"items\":[{\"item\":\"b\",\"count\":1},{\"item\":\"c\",\"count\":1}]}", 17);

    tally_kill(&p);   /* no final snapshot: everything is in the journal */
    relabel_journals(p.dir, 1);
    tally_start(&p, p.dir, ARGS);
    p.own_dir = true;
    const char *gen1_list = "{\"items\":[{\"item\":\"a\",\"count\":1},{\"item\":\"b\",\"count\":1}]}";
    expect_generation(&p, 24, gen1_list, 16);
    /* the values keep their rules in a snapshot, and for new requests */
    http_resp_t r = http(&p, "POST", "/admin/snapshot", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    assert_int_equal(tally_stop(&p), 0);
    tally_start(&p, p.dir, ARGS);
    p.own_dir = true;
    expect_generation(&p, 24, gen1_list, 16);
    /* c's 2 beats the minimum 1 and expels the root, b (generation 2's
     * heap would hold [b, c] here, and expel nothing) */
    http_expect(&p, "POST", "/topk/t", "{\"items\":[\"c\"]}", 200, "{\"expelled\":[\"b\"]}");
    http_expect(&p, "GET", "/topk/t/list", NULL, 200,
                "{\"items\":[{\"item\":\"c\",\"count\":2},{\"item\":\"a\",\"count\":1}]}");
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_journal_replays_generation_1),
    };
    return cmocka_run_group_tests_name("generations", tests, NULL, NULL);
}
