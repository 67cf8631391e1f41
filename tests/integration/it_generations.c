/*
 * it_generations.c - every journal version loads with the rules that served
 * it (core/persist_fmt.h has the table).
 *
 * Issue 18 changed how Bloom filters, Cuckoo filters and Top-Ks evolve
 * (RedisBloom's exact geometry, eviction walk and heap).  A journal records
 * requests, not results, so a journal written before the change must be
 * replayed by the old rules, or the rebuilt values would differ from what was
 * acknowledged (core/types.h).  The same requests answer differently:
 *
 *   reserve 0.01 4 expansion 1 + "0".."99":  generation 2 (RedisBloom) 23
 *                                           sub-filters, generation 1 24
 *   Top-K k 2 (no shared buckets), a b c:   gen 2 lists b, c (c's 1 reaches
 *                                           the minimum and expels a);
 *                                           gen 1 lists a, b
 *   cuckoo capacity 64 + "0".."999":        gen 2 17 sub-filters, gen 1
 *                                           (random evictions) 16
 *
 * Version 1 is tested on a genuine data directory of the last release
 * (tests/fixtures/journal_v1: a snapshot with version-1 value encodings and
 * a version-1 journal; make-fixture.sh there says how it was made and what
 * that tally answered), as it was closed, as kill -9 left it and with a torn
 * last record; version 3 (the last release before the command layer,
 * every record an HTTP request) on a fixture of it too; version 4 (written
 * now: command records as well) on what this tally writes; version 2
 * (only ever written by unreleased builds, with two meanings) and newer
 * versions must be refused by name, start-up and --check agreeing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/request.h"
#include "core/persist_fmt.h"
#include "tests/integration/harness.h"

#define ARGS ((const char *[]){ "--snapshot-interval", "0", NULL })
#define FIXTURE "tests/fixtures/journal_v1"   /* tests run from the repository root */
#define V1_JOURNAL "journal.0000000002.tlj"
#define GEN1_LIST_AB "{\"items\":[{\"item\":\"a\",\"count\":1},{\"item\":\"b\",\"count\":1}]}"
#define GEN1_LIST_CA "{\"items\":[{\"item\":\"c\",\"count\":2},{\"item\":\"a\",\"count\":1}]}"
#define GEN2_LIST_BC "{\"items\":[{\"item\":\"b\",\"count\":1},{\"item\":\"c\",\"count\":1}]}"

static void expect_filters(const tally_proc_t *p, const char *path, long filters)
{
    json_t *j = http_get_json(p, path);
    assert_int_equal(json_integer_value(json_object_get(j, "filters")), filters);
    json_decref(j);
}

/* {"items":["from",...,"to-1"]} */
static void items_body(char *out, size_t n, int from, int to)
{
    size_t u = (size_t)snprintf(out, n, "{\"items\":[");
    for (int i = from; i < to; i++)
        u += (size_t)snprintf(out + u, n - u, "%s\"%d\"", i > from ? "," : "", i);
    snprintf(out + u, n - u, "]}");
}

/* The requests of the table above, on keys bloom/<b>, cuckoo/<c>, topk/<t>. */
static void write_table(const tally_proc_t *p, const char *b, const char *c, const char *t, const char *expelled)
{
    char path[64], body[1024];
    snprintf(path, sizeof(path), "/bloom/%s", b);
    http_expect(p, "PUT", path, "{\"error_rate\":0.01,\"capacity\":4,\"expansion\":1}", 201, NULL);
    items_body(body, sizeof(body), 0, 100);
    http_expect(p, "POST", path, body, 200, NULL);
    if (c) {
        snprintf(path, sizeof(path), "/cuckoo/%s", c);
        http_expect(p, "PUT", path, "{\"capacity\":64}", 201, NULL);
        for (int part = 0; part < 10; part++) {
            items_body(body, sizeof(body), part * 100, part * 100 + 100);
            http_expect(p, "POST", path, body, 200, NULL);
        }
    }
    snprintf(path, sizeof(path), "/topk/%s", t);
    http_expect(p, "PUT", path, "{\"k\":2,\"width\":1000}", 201, NULL);
    http_expect(p, "POST", path, "{\"items\":[\"a\",\"b\",\"c\"]}", 200, expelled);
}

static void check_says(const char *path, int status, const char *want)
{
    char out[4096];
    int st = tally_check(path, out, sizeof(out));
    if (st != status || !strstr(out, want))
        fail_msg("tallyd --check %s: exit %d (want %d), output lacks \"%s\":\n%s", path, st, status, want, out);
}

/* The log of the last start of p contains `want`. */
static void expect_log(const tally_proc_t *p, const char *want)
{
    char *log = tally_log(p);
    size_t skip = strlen(log) >= (size_t)p->log_start ? (size_t)p->log_start : 0;
    if (!strstr(log + skip, want))
        fail_msg("tallyd log lacks \"%s\":\n%s", want, log + skip);
    free(log);
}

/* Version 4 (what is written now) replays by generation 2's rules. */
static void test_current_journal_replays_generation_2(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, ARGS);
    write_table(&p, "b", "c", "t", "{\"expelled\":[null,null,\"a\"]}");
    expect_filters(&p, "/bloom/b", 23);
    expect_filters(&p, "/cuckoo/c", 17);
    http_expect(&p, "GET", "/topk/t/list", NULL, 200, GEN2_LIST_BC);
    tally_kill(&p);   /* no final snapshot: everything is in the journal */
    char jp[512];
    snprintf(jp, sizeof(jp), "%s/journal.0000000001.tlj", p.dir);
    check_says(jp, 0, "format version 4 (layout 2, replayed by generation 2's rules)");
    tally_start(&p, p.dir, ARGS);
    p.own_dir = true;
    expect_filters(&p, "/bloom/b", 23);
    expect_filters(&p, "/cuckoo/c", 17);
    http_expect(&p, "GET", "/topk/t/list", NULL, 200, GEN2_LIST_BC);
    tally_cleanup(&p);
}

/* A copy of the release's data directory in a new temporary directory. */
static void copy_fixture(char *dir, size_t n)
{
    tmpdir_make(dir, n);
    static const char *const files[] = { "snapshot.tly", V1_JOURNAL };
    for (size_t i = 0; i < 2; i++) {
        char src[256], dst[512];
        snprintf(src, sizeof(src), FIXTURE "/%s", files[i]);
        snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
        size_t len;
        char *data = file_read(src, &len);
        file_write(dst, data, len);
        free(data);
    }
}

/* What the release answered about its data (make-fixture.sh). */
static void expect_release_answers(const tally_proc_t *p)
{
    expect_filters(p, "/bloom/b", 24);   /* from the snapshot */
    http_expect(p, "GET", "/topk/t/list", NULL, 200, GEN1_LIST_CA);   /* snapshot + journal */
    expect_filters(p, "/bloom/j", 24);   /* from the journal */
    expect_filters(p, "/cuckoo/c", 16);
}

/* The release's directory loads with generation 1's rules; its values keep
 * them for new requests, through a kill -9 (journals of versions 1 and 3
 * replayed in one start) and through a snapshot, while new values get
 * generation 2's. */
static void test_release_v1_directory(void **state)
{
    (void)state;
    char dir[256], jp[512];
    copy_fixture(dir, sizeof(dir));
    snprintf(jp, sizeof(jp), "%s/" V1_JOURNAL, dir);
    check_says(jp, 0, "format version 1 (layout 1, replayed by generation 1's rules)");
    char sp[512];
    snprintf(sp, sizeof(sp), "%s/snapshot.tly", dir);
    check_says(sp, 0, "2 keys (0 with expiry), 84830 bytes, checksums OK");   /* version-1 value encodings decode */
    tally_proc_t p;
    tally_start(&p, dir, ARGS);
    p.own_dir = true;
    expect_release_answers(&p);
    http_expect(&p, "GET", "/topk/u/list", NULL, 200, GEN1_LIST_AB);
    /* c's 2 beats the minimum 1 and expels the root, b (generation 2's heap
     * would hold [b, c] here, and expel nothing) */
    http_expect(&p, "POST", "/topk/u", "{\"items\":[\"c\"]}", 200, "{\"expelled\":[\"b\"]}");
    write_table(&p, "n", NULL, "m", "{\"expelled\":[null,null,\"a\"]}");   /* new values: generation 2 */
    tally_kill(&p);
    /* journal 2 (version 1, older, not sealed: layout 1 has no seal) and
     * journal 3 (version 4, left by kill -9) */
    check_says(jp, 0, "later journals hold records");
    snprintf(jp, sizeof(jp), "%s/journal.0000000003.tlj", dir);
    check_says(jp, 0, "format version 4 (layout 2, replayed by generation 2's rules)");
    for (int round = 0; round < 2; round++) {
        tally_start(&p, dir, ARGS);
        p.own_dir = true;
        expect_release_answers(&p);
        http_expect(&p, "GET", "/topk/u/list", NULL, 200, GEN1_LIST_CA);
        expect_filters(&p, "/bloom/n", 23);
        http_expect(&p, "GET", "/topk/m/list", NULL, 200, GEN2_LIST_BC);
        assert_int_equal(tally_stop(&p), 0);   /* a final snapshot: the next round loads it */
    }
    tally_cleanup(&p);
}

/* The shapes kill -9 left a release's journal in: its unused reserved space
 * (zeros), and a last record cut short (its frame whole, its payload ending
 * in zeros).  Both load; the torn record, never acknowledged, is dropped.  A
 * journal cut anywhere else is refused, named and left as it was. */
static void test_release_v1_after_crash(void **state)
{
    (void)state;
    char dir[256], jp[512];
    copy_fixture(dir, sizeof(dir));
    snprintf(jp, sizeof(jp), "%s/" V1_JOURNAL, dir);
    size_t len;
    char *orig = file_read(jp, &len);

    /* the reserve: the file as kill -9 left it */
    assert_int_equal(truncate(jp, 4 << 20), 0);
    tally_proc_t p;
    tally_start(&p, dir, ARGS);
    p.own_dir = true;
    expect_release_answers(&p);
    expect_log(&p, "unused reserved space");
    tally_kill(&p);

    /* a torn last record: PUT /bloom/torn whose payload stopped half-way */
    unlink(jp);
    char j3[512];
    snprintf(j3, sizeof(j3), "%s/journal.0000000003.tlj", dir);
    unlink(j3);
    wbuf_t rec = WBUF_INIT;
    journalfmt_put_request(&rec, &(journal_req_t){ .now_ns = 1795550835800000000LL, .method = API_PUT,
                                                    .path = "/bloom/torn", .path_len = 11,
                                                    .ctype = "application/json", .ctype_len = 16,
                                                    .body = (const uint8_t *)"{\"capacity\":1000}",
                                                    .body_len = 17 });
    assert_false(rec.oom);
    size_t torn_len = len + rec.len + 4096;
    char *torn = calloc(1, torn_len);
    memcpy(torn, orig, len);
    memcpy(torn + len, rec.data, JOURNAL_FRAME_SIZE + (rec.len - JOURNAL_FRAME_SIZE) / 2);
    file_write(jp, torn, torn_len);
    check_says(jp, 0, "a write interrupted by a crash");
    tally_start(&p, dir, ARGS);
    p.own_dir = true;
    expect_release_answers(&p);
    expect_log(&p, "a write interrupted by a crash at offset 7516");
    http_expect(&p, "GET", "/bloom/torn", NULL, 404, NULL);
    tally_kill(&p);
    free(torn);
    wbuf_free(&rec);

    /* cut inside a record, no zeros after it: refused, untouched */
    unlink(j3);
    file_write(jp, orig, len - 10);
    assert_int_not_equal(tally_start_expect_exit(&p, dir, ARGS), 0);
    p.own_dir = true;
    expect_log(&p, V1_JOURNAL " is damaged at offset");
    check_says(jp, 1, "DAMAGED at offset");
    assert_true(file_equals(jp, orig, len - 10));
    free(orig);
    tally_cleanup(&p);
}

/* Sets the version field of a journal file (after its 8-byte magic). */
static void set_version(const char *path, uint32_t version)
{
    size_t len;
    char *data = file_read(path, &len);
    if (version == 3 || version == JOURNAL_VERSION) {
        /* a well-formed header of that version (its check made anew) */
        journal_header_t h = { .version = version, .flags = 0, .seq = 0 };
        for (int i = 0; i < 8; i++)
            h.seq |= (uint64_t)(unsigned char)data[16 + i] << (8 * i);
        wbuf_t b = WBUF_INIT;
        journalfmt_put_header(&b, &h);
        memcpy(data, b.data, JOURNAL_HEADER_SIZE);
        wbuf_free(&b);
    } else {
        for (int i = 0; i < 4; i++)
            data[8 + i] = (char)(version >> (8 * i));
    }
    file_write(path, data, len);
    free(data);
}

/* A journal of the last release before the command layer (version 3, every
 * record an HTTP request: tests/fixtures/journal_v3, make-fixture.sh there
 * says how it was made) replays to what that release served, key by key:
 * each value's digest (value and absolute expiry) and, for a key without a
 * TTL, its whole dump, byte for byte. */
static void test_journal_v3_replays(void **state)
{
    (void)state;
    char dir[256];
    tmpdir_make(dir, sizeof(dir));
    char src[256] = "tests/fixtures/journal_v3/journal.0000000001.tlj", dst[512];
    snprintf(dst, sizeof(dst), "%s/journal.0000000001.tlj", dir);
    size_t len;
    char *data = file_read(src, &len);
    file_write(dst, data, len);
    free(data);
    check_says(dst, 0, "format version 3 (layout 2, replayed by generation 2's rules)");
    tally_proc_t p;
    tally_start(&p, dir, ARGS);
    p.own_dir = true;
    char *expected = file_read("tests/fixtures/journal_v3/expected.tsv", &len);
    int keys = 0;
    for (char *line = strtok(expected, "\n"); line; line = strtok(NULL, "\n")) {
        char key[128], digest[32], *hex = malloc(strlen(line) + 1);
        assert_int_equal(sscanf(line, "%127[^\t]\t%31[^\t]\t%s", key, digest, hex), 3);
        http_resp_t r = httpf(&p, "GET", NULL, "/keys/%s/dump", key);
        assert_status(&r, 200);
        char got[32];
        assert_true(http_header(&r, "Tally-Digest", got, sizeof(got)));
        if (strcmp(got, digest) != 0)
            fail_msg("key %s: digest %s, the release served %s", key, got, digest);
        if (strcmp(hex, "-") != 0) {
            assert_int_equal(r.len * 2, strlen(hex));
            for (size_t i = 0; i < r.len; i++) {
                char b[3];
                snprintf(b, sizeof(b), "%02x", (unsigned char)r.body[i]);
                if (memcmp(b, hex + 2 * i, 2) != 0)
                    fail_msg("key %s: dump differs from the release's at byte %zu", key, i);
            }
        }
        http_free(&r);
        free(hex);
        keys++;
    }
    free(expected);
    assert_true(keys >= 30);
    json_t *j = http_get_json(&p, "/info");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "keyspace"), "keys")), keys);
    json_decref(j);
    char *log = tally_log(&p);
    if (strstr(log, "replayed with"))
        fail_msg("a record replayed with an error:\n%s", log);
    free(log);
    tally_cleanup(&p);
}

/* Version 2 (unreleased builds wrote it with two meanings) and versions
 * newer than this tally are refused, and so is a version-3 journal whose
 * version field was damaged into 1 (its header check is where version 1
 * holds zero flags): start-up names the file and offset 0, --check agrees,
 * the file is left as it was.  A journal of version 3 - written before
 * command records - holding one is refused at that record. */
static void test_v2_and_newer_refused(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, ARGS);
    write_table(&p, "b", NULL, "t", NULL);
    http_expect(&p, "POST", "/counter/n", "{\"by\":7}", 200, NULL);   /* a command record */
    tally_kill(&p);
    char jp[512];
    snprintf(jp, sizeof(jp), "%s/journal.0000000001.tlj", p.dir);
    static const struct {
        uint32_t version;
        const char *why;
    } cases[] = {
        { 2, "journal version 2 was written only by unreleased development builds" },
        { JOURNAL_VERSION + 1, "journal written by a newer tally" },
        { 0, "unknown journal version" },
        { 1, "unknown journal flags (or a damaged header)" },   /* not replayed by generation 1's rules */
        { 3, "a command record in a journal of a version without them" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        set_version(jp, cases[i].version);
        size_t len;
        char *before = file_read(jp, &len);
        assert_int_not_equal(tally_start_expect_exit(&p, p.dir, ARGS), 0);
        expect_log(&p, cases[i].version == 3 ? "journal.0000000001.tlj is damaged at offset "
                                             : "journal.0000000001.tlj is damaged at offset 0");
        expect_log(&p, cases[i].why);
        check_says(jp, 1, cases[i].why);
        assert_true(file_equals(jp, before, len));
        free(before);
    }
    set_version(jp, JOURNAL_VERSION);
    tally_start(&p, p.dir, ARGS);
    p.own_dir = true;
    expect_filters(&p, "/bloom/b", 23);
    http_expect(&p, "GET", "/topk/t/list", NULL, 200, GEN2_LIST_BC);
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_current_journal_replays_generation_2),
        cmocka_unit_test(test_journal_v3_replays),
        cmocka_unit_test(test_release_v1_directory),
        cmocka_unit_test(test_release_v1_after_crash),
        cmocka_unit_test(test_v2_and_newer_refused),
    };
    return cmocka_run_group_tests_name("generations", tests, NULL, NULL);
}
