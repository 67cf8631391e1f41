/*
 * it_limits.c - the bounds of one request (docs/keys.md "Limits per request",
 * issue 36 items 2-4), through a real tallyd:
 *
 *   - under --maxmemory 64mb (allkeys-lru, so a wrong eviction would show):
 *     each family's largest request is refused (507 naming the memory
 *     limit, 400 naming --max-value-size) or fits; after each, /info's
 *     memory_bytes is at most the limit, the process's RSS stays within the
 *     limit of where it started (plus a fixed margin), and another tenant's
 *     keys are all still there;
 *   - without --maxmemory, the default --max-value-size and
 *     --max-answer-size refuse the reproductions (an 18.8 GB Bloom filter,
 *     a scaling filter with expansion 32768, a 537 MB sketch or cuckoo
 *     filter, a 644 MB /mts/range answer) quickly and without the memory;
 *   - a source named 10 000 times costs what it costs once (BITOP, CMS
 *     merge: timed against the one-source request in the same run, and the
 *     same answer), and what distinct sources total is bounded;
 *   - replay applies what was accepted, whatever the limits are now.
 *
 * The sizes are those of the reproductions; TALLY_SLOW (the sanitizer
 * runs) only shortens the timing loops.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <roaring/roaring.h>

#include "tests/integration/harness.h"

#define MB (1024LL * 1024)
#define LIMIT (64 * MB)          /* --maxmemory of the bounded server */
#define RSS_MARGIN (48 * MB)     /* allocator slack, request buffers, a sanitizer's bookkeeping */
#define TENANTS 200              /* the other tenant's keys */

static bool slow(void) { return getenv("TALLY_SLOW") != NULL; }

/* How far past its starting RSS the process may be with LIMIT bytes of
 * keys: the limit and a margin; under ThreadSanitizer (TALLY_SLOW) its
 * shadow of the memory touched too (two to four times it), which still
 * tells a bounded request from one that allocates 400 MB. */
static long long rss_allowance(void) { return (slow() ? 3 : 1) * LIMIT + RSS_MARGIN; }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The process's resident set (VmRSS), in bytes. */
static long long rss_of(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long long kb = -1;
    while (kb < 0 && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtoll(line + 6, NULL, 10);
    fclose(f);
    assert_true(kb >= 0);
    return kb * 1024;
}

static long long memory_bytes(const tally_proc_t *p)
{
    json_t *info = http_get_json(p, "/info");
    long long m = (long long)json_integer_value(json_object_get(json_object_get(info, "keyspace"), "memory_bytes"));
    json_decref(info);
    return m;
}

/* Keys under a prefix, through every page of /keys. */
static size_t count_prefix(const tally_proc_t *p, const char *prefix)
{
    size_t n = 0;
    char cursor[64] = "";
    do {
        http_resp_t r = httpf(p, "GET", NULL, "/keys?prefix=%s&limit=1000%s%s", prefix, cursor[0] ? "&cursor=" : "",
                              cursor);
        assert_status(&r, 200);
        n += json_array_size(json_object_get(r.json, "keys"));
        json_t *c = json_object_get(r.json, "cursor");
        snprintf(cursor, sizeof(cursor), "%s", json_is_string(c) ? json_string_value(c) : "");
        http_free(&r);
    } while (cursor[0]);
    return n;
}

/* A refusal: the status, the code and a piece of the message. */
static void expect_refused_at(const tally_proc_t *p, const char *method, const char *path, const char *body,
                              long status, const char *code, const char *needle, const char *file, int line)
{
    http_resp_t r = http(p, method, path, body, NULL);
    assert_error_at(&r, status, code, file, line);
    const char *m = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
    if (!m || !strstr(m, needle))
        fail_msg("%s:%d: %s %s: expected '%s' in %s", file, line, method, path, needle, r.body);
    http_free(&r);
}
#define expect_refused(p, m, path, body, st, code, needle) \
    expect_refused_at((p), (m), (path), (body), (st), (code), (needle), __FILE__, __LINE__)

/* After each request: the keyspace within the limit, the process within the
 * limit of where it started, the tenant's keys all there. */
static void check_bounds_at(const tally_proc_t *p, long long base_rss, const char *file, int line)
{
    long long m = memory_bytes(p), rss = rss_of(p->pid);
    if (m > LIMIT)
        fail_msg("%s:%d: memory_bytes %lld over the limit %lld", file, line, m, LIMIT);
    if (rss > base_rss + rss_allowance())
        fail_msg("%s:%d: RSS %lld MB, started at %lld MB: over the limit and margin", file, line, rss / MB,
                 base_rss / MB);
    size_t t = count_prefix(p, "tenant:");
    if (t != TENANTS)
        fail_msg("%s:%d: %zu of the tenant's %d keys left", file, line, t, TENANTS);
}
#define check_bounds(p, base) check_bounds_at((p), (base), __FILE__, __LINE__)

/* {"requests":[n sliding_log items of max_count 100000, quantity 100000]} */
static char *sliding_batch(int n, const char *prefix)
{
    char *s;
    size_t len;
    FILE *f = open_memstream(&s, &len);
    fputs("{\"requests\":[", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s{\"key\":\"%s%d\",\"algorithm\":\"sliding_log\",\"max_count\":100000,\"period\":60,"
                   "\"quantity\":100000}",
                i ? "," : "", prefix, i);
    fputs("]}", f);
    fclose(f);
    return s;
}

/* {"items":["<prefix>from", ...]} */
static char *items_body(const char *prefix, int from, int n)
{
    char *s;
    size_t len;
    FILE *f = open_memstream(&s, &len);
    fputs("{\"items\":[", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"%s%d\"", i ? "," : "", prefix, from + i);
    fputs("]}", f);
    fclose(f);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Under --maxmemory 64mb                                                   */
/* ------------------------------------------------------------------------ */

static void test_maxmemory_largest_requests(void **state)
{
    (void)state;
    const char *args[] = { "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    /* another tenant: 200 bit strings of 4 KiB */
    for (int i = 0; i < TENANTS; i++) {
        http_resp_t r = httpf(&p, "POST", "{\"offset\":32767,\"value\":1}", "/bits/tenant:%d/setbit", i);
        assert_status(&r, 200);
        http_free(&r);
    }
    long long base = rss_of(p.pid);
    check_bounds(&p, base);

    /* /throttle: 500 sliding logs of 100 000 actions each would take 400 MB */
    char *b = sliding_batch(500, "log:");
    expect_refused(&p, "POST", "/throttle", b, 507, "OUT_OF_MEMORY", "memory limit of 67108864 bytes");
    free(b);
    check_bounds(&p, base);
    assert_int_equal(count_prefix(&p, "log:"), 0);   /* all or nothing */
    /* one such log fits (800 KB), and the batch of 20 (16 MB) too */
    b = sliding_batch(20, "log:");
    http_resp_t r = http(&p, "POST", "/throttle", b, NULL);
    assert_status(&r, 200);
    http_free(&r);
    free(b);
    check_bounds(&p, base);
    r = http(&p, "DELETE", "/keys/log:0", NULL, NULL);
    http_free(&r);

    /* Count-Min: 537 MB is past --max-value-size, 128 MB past the memory limit */
    expect_refused(&p, "PUT", "/cms/x", "{\"width\":67108864,\"depth\":1}", 400, "BAD_REQUEST", "--max-value-size");
    expect_refused(&p, "PUT", "/cms/x", "{\"width\":16777216,\"depth\":1}", 507, "OUT_OF_MEMORY",
                   "memory limit of 67108864 bytes");
    check_bounds(&p, base);
    /* cuckoo: 512 MiB of slots, and 128 MiB */
    expect_refused(&p, "PUT", "/cuckoo/x", "{\"capacity\":500000000,\"bucket_size\":2}", 400, "BAD_REQUEST",
                   "--max-value-size");
    expect_refused(&p, "PUT", "/cuckoo/x", "{\"capacity\":100000000,\"bucket_size\":2}", 507, "OUT_OF_MEMORY",
                   "memory limit");
    check_bounds(&p, base);
    /* Bloom: 18.8 GB, and 69 MB */
    expect_refused(&p, "PUT", "/bloom/b", "{\"capacity\":4294967294,\"error_rate\":1e-7}", 400, "BAD_REQUEST",
                   "--max-value-size");
    expect_refused(&p, "PUT", "/bloom/b", "{\"capacity\":50000000,\"error_rate\":0.01}", 507, "OUT_OF_MEMORY",
                   "memory limit");
    check_bounds(&p, base);
    /* a scaling Bloom filter whose next sub-filter would take 1.6 GB */
    http_expect(&p, "PUT", "/bloom/s", "{\"capacity\":1,\"error_rate\":0.01,\"expansion\":32768}", 201, NULL);
    int refused = 0;
    for (int i = 0; i < 4; i++) {
        b = items_body("s", i * 10000, 10000);
        r = http(&p, "POST", "/bloom/s", b, NULL);
        free(b);
        if (r.status != 200) {
            assert_error(&r, 400, "BAD_REQUEST");
            assert_non_null(strstr(r.body, "--max-value-size"));
            refused++;
        }
        http_free(&r);
        check_bounds(&p, base);
    }
    assert_true(refused >= 1);
    /* Top-K: 192 MiB of buckets */
    expect_refused(&p, "PUT", "/topk/t", "{\"k\":10,\"width\":16777216,\"depth\":1}", 507, "OUT_OF_MEMORY",
                   "memory limit");
    /* bits: SETBIT at the last offset (512 MiB), BITOP into a second copy */
    expect_refused(&p, "POST", "/bits/big/setbit", "{\"offset\":4294967295,\"value\":1}", 507, "OUT_OF_MEMORY",
                   "memory limit");
    http_expect(&p, "POST", "/bits/mid/setbit", "{\"offset\":335544319,\"value\":1}", 200, NULL);   /* 40 MB */
    check_bounds(&p, base);
    expect_refused(&p, "POST", "/bits/mid2/op", "{\"op\":\"not\",\"sources\":[\"mid\"]}", 507, "OUT_OF_MEMORY",
                   "memory limit");
    check_bounds(&p, base);
    r = http(&p, "DELETE", "/keys/mid", NULL, NULL);
    http_free(&r);
    /* a T-Digest merge into a digest of the largest compression fits */
    http_expect(&p, "PUT", "/tdigest/d", "{\"compression\":10000}", 201, NULL);
    http_expect(&p, "POST", "/tdigest/d2/merge", "{\"sources\":[\"d\",\"d\"]}", 200, NULL);
    check_bounds(&p, base);
    /* GEOADD of 10 000 members of 1000 bytes: about 30 MB is asked for */
    {
        char *s;
        size_t len;
        FILE *f = open_memstream(&s, &len);
        fputs("{\"members\":[", f);
        char name[1001];
        memset(name, 'm', 990);
        for (int i = 0; i < 900; i++) {
            snprintf(name + 990, sizeof(name) - 990, "%09u", (unsigned)i % 1000000000u);
            fprintf(f, "%s{\"member\":\"%s\",\"lon\":%d.5,\"lat\":%d.25}", i ? "," : "", name, i % 170, i % 80);
        }
        fputs("]}", f);
        fclose(f);
        r = http(&p, "POST", "/geo/g", s, NULL);
        assert_status(&r, 200);
        http_free(&r);
        free(s);
    }
    check_bounds(&p, base);
    r = http(&p, "DELETE", "/keys/g", NULL, NULL);
    http_free(&r);
    /* an activity import of 30 000 containers (a 450 KB body) */
    {
        roaring_bitmap_t *bm = roaring_bitmap_create();
        for (uint32_t c = 0; c < 30000; c++)
            for (uint32_t j = 0; j < 5; j++)
                roaring_bitmap_add(bm, c * 65536u + j * 7);
        size_t len = roaring_bitmap_portable_size_in_bytes(bm);
        char *buf = malloc(len);
        roaring_bitmap_portable_serialize(bm, buf);
        roaring_bitmap_free(bm);
        time_t now = time(NULL);
        char path[96], day[16];
        strftime(day, sizeof(day), "%Y-%m-%d", gmtime(&now));
        snprintf(path, sizeof(path), "/activity/a/import?day=%s", day);
        r = http_bin(&p, "POST", path, buf, len, "application/octet-stream");
        assert_status(&r, 200);
        http_free(&r);
        free(buf);
    }
    check_bounds(&p, base);
    /* 10 000 samples, 10 000 HLL items, 10 000 Top-K items */
    {
        char *s;
        size_t len;
        FILE *f = open_memstream(&s, &len);
        fputs("{\"samples\":[", f);
        for (int i = 0; i < 10000; i++)
            fprintf(f, "%s[%d,%d.125]", i ? "," : "", i * 7, i);
        fputs("]}", f);
        fclose(f);
        http_expect(&p, "POST", "/ts/series", s, 200, NULL);
        free(s);
    }
    b = items_body("user-", 0, 10000);
    http_expect(&p, "POST", "/uv/visits", b, 200, NULL);
    http_expect(&p, "PUT", "/topk/top", "{\"k\":100}", 201, NULL);
    http_expect(&p, "POST", "/topk/top", b, 200, NULL);
    free(b);
    check_bounds(&p, base);
    tally_cleanup(&p);
}

/* A batch whose total is beyond the limit, whose first items would fit:
 * nothing is evicted for it (the bug the review found evicted 180 of 200). */
static void test_refused_batch_evicts_nothing(void **state)
{
    (void)state;
    const char *args[] = { "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    /* the tenant takes most of the room: 200 strings of 256 KiB (50 MB) */
    for (int i = 0; i < TENANTS; i++) {
        http_resp_t r = httpf(&p, "POST", "{\"offset\":2097151,\"value\":1}", "/bits/tenant:%d/setbit", i);
        assert_status(&r, 200);
        http_free(&r);
    }
    long long base = rss_of(p.pid);
    check_bounds(&p, base);
    char *b = sliding_batch(100, "log:");   /* 80 MB: never fits */
    expect_refused(&p, "POST", "/throttle", b, 507, "OUT_OF_MEMORY", "memory limit");
    free(b);
    check_bounds(&p, base);
    /* a scaling filter whose growth alone passes the limit: nothing evicted */
    http_expect(&p, "PUT", "/bloom/s", "{\"capacity\":1000,\"error_rate\":0.001,\"expansion\":32768}", 201, NULL);
    b = items_body("x", 0, 2000);
    expect_refused(&p, "POST", "/bloom/s", b, 507, "OUT_OF_MEMORY", "memory limit");
    free(b);
    check_bounds(&p, base);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Without --maxmemory: the value and answer caps                           */
/* ------------------------------------------------------------------------ */

static void test_default_caps(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    long long base = rss_of(p.pid);
    expect_refused(&p, "PUT", "/bloom/b", "{\"capacity\":4294967294,\"error_rate\":1e-7}", 400, "BAD_REQUEST",
                   "over --max-value-size (536870912 bytes a value)");
    http_resp_t r = http(&p, "PUT", "/bloom/b", "{\"capacity\":4294967294,\"error_rate\":1e-7}", NULL);
    const char *f = json_string_value(json_object_get(json_object_get(r.json, "error"), "field"));
    assert_non_null(f);
    assert_string_equal(f, "capacity");
    http_free(&r);
    expect_refused(&p, "PUT", "/cms/x", "{\"width\":67108864,\"depth\":1}", 400, "BAD_REQUEST", "--max-value-size");
    expect_refused(&p, "PUT", "/cuckoo/x", "{\"capacity\":500000000,\"bucket_size\":2}", 400, "BAD_REQUEST",
                   "--max-value-size");
    /* 100 KB of items into a default filter: grows as it should */
    char *b = items_body("item-", 0, 10000);
    http_expect(&p, "POST", "/bloom/d", b, 200, NULL);
    free(b);
    /* expansion 32768: the third sub-filter (1.6 GB) is refused */
    http_expect(&p, "PUT", "/bloom/s", "{\"capacity\":1,\"error_rate\":0.01,\"expansion\":32768}", 201, NULL);
    int refused = 0;
    for (int i = 0; i < 4; i++) {
        b = items_body("s", i * 10000, 10000);
        r = http(&p, "POST", "/bloom/s", b, NULL);
        free(b);
        if (r.status != 200) {
            assert_error(&r, 400, "BAD_REQUEST");
            assert_non_null(strstr(r.body, "--max-value-size"));
            refused++;
        }
        http_free(&r);
    }
    assert_int_equal(refused, 1);   /* the batch that crosses 32 769 items; the next ones fit again */
    assert_true(rss_of(p.pid) < base + rss_allowance() - LIMIT);

    /* without --maxmemory, a batch of sliding logs adds at most 4 x
     * --max-value-size: 10 000 logs of 100 000 actions would take 8 GB */
    {
        const char *small[] = { "--max-value-size", "1mb", NULL };   /* 4 MiB of state a batch */
        tally_proc_t q;
        tally_start(&q, NULL, small);
        b = sliding_batch(10, "log:");   /* 8 MB */
        expect_refused(&q, "POST", "/throttle", b, 400, "BAD_REQUEST", "4 x --max-value-size");
        free(b);
        assert_int_equal(count_prefix(&q, "log:"), 0);
        b = sliding_batch(4, "log:");   /* 3.2 MB */
        http_expect(&q, "POST", "/throttle", b, 200, NULL);
        free(b);
        tally_cleanup(&q);
    }

    /* 50 series, /mts/range with a bucket per millisecond over 1 000 000 ms
     * and empty buckets: refused before the answer is built */
    for (int i = 0; i < 50; i++) {
        r = httpf(&p, "POST", "{\"samples\":[[0,1],[999999,2]],\"labels\":{\"grp\":\"g\"}}", "/ts/series%d", i);
        assert_status(&r, 200);
        http_free(&r);
    }
    double t0 = now_s();
    long long before = rss_of(p.pid);
    expect_refused(&p, "GET", "/mts/range?filter=grp%3Dg&from=0&to=999999&agg=count&bucket_ms=1&empty=true", NULL,
                   400, "BAD_REQUEST", "--max-answer-size");
    double took = now_s() - t0;
    assert_true(rss_of(p.pid) < before + rss_allowance());
    if (took > 10)
        fail_msg("the refusal took %.1f s", took);
    /* one series' range of the same shape fits (48 MB at most) */
    r = http(&p, "GET", "/ts/series0/range?from=0&to=999999&agg=count&bucket_ms=1&empty=true", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "samples")), 1000000);
    http_free(&r);
    tally_cleanup(&p);
}

/* A smaller answer cap: raw values, dumps, lists and ranges refuse past it
 * and read in parts under it; /keys pages stop at it. */
static void test_answer_cap(void **state)
{
    (void)state;
    const char *args[] = { "--max-answer-size", "1mb", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    http_expect(&p, "POST", "/bits/b/setbit", "{\"offset\":16777215,\"value\":1}", 200, NULL);   /* 2 MiB */
    expect_refused(&p, "GET", "/bits/b", NULL, 400, "BAD_REQUEST", "--max-answer-size (1048576 bytes)");
    expect_refused(&p, "GET", "/keys/b/dump", NULL, 400, "BAD_REQUEST", "--max-answer-size");
    http_resp_t r = http(&p, "GET", "/bits/b?start=0&end=1048575", NULL, NULL);   /* 1 MiB: fits */
    assert_status(&r, 200);
    assert_int_equal(r.len, 1048576);
    http_free(&r);
    r = http(&p, "GET", "/bits/b?start=-1&end=-1", NULL, NULL);   /* GETRANGE's negative offsets */
    assert_status(&r, 200);
    assert_int_equal(r.len, 1);
    assert_int_equal((unsigned char)r.body[0], 1);
    http_free(&r);
    r = http(&p, "GET", "/bits/b?start=5&end=2", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(r.len, 0);
    http_free(&r);
    expect_refused(&p, "GET", "/bits/b?start=0", NULL, 400, "BAD_REQUEST", "'end' is missing");
    /* a range of 30 000 buckets (48 bytes a row at most) passes 1 MiB */
    http_expect(&p, "POST", "/ts/t", "{\"samples\":[[0,1],[29999,2]]}", 200, NULL);
    expect_refused(&p, "GET", "/ts/t/range?from=0&to=29999&agg=count&bucket_ms=1&empty=true", NULL, 400,
                   "BAD_REQUEST", "--max-answer-size");
    r = http(&p, "GET", "/ts/t/range?from=0&to=9999&agg=count&bucket_ms=1&empty=true&count=3", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "samples")), 3);
    http_free(&r);
    /* keys of 1000 bytes: a page of /keys holds under 1 MiB, the cursor goes on */
    char key[1001];
    memset(key, 'k', 996);
    for (int i = 0; i < 300; i++) {
        snprintf(key + 996, sizeof(key) - 996, "%04u", (unsigned)i % 10000u);
        r = httpf(&p, "POST", "{\"by\":1}", "/counter/%s", key);
        assert_status(&r, 200);
        http_free(&r);
    }
    r = http(&p, "GET", "/keys?prefix=kkk&limit=10000", NULL, NULL);
    assert_status(&r, 200);
    assert_true(r.len <= 1048576);
    assert_true(json_array_size(json_object_get(r.json, "keys")) < 300);
    assert_true(json_is_string(json_object_get(r.json, "cursor")));
    http_free(&r);
    assert_int_equal(count_prefix(&p, "kkk"), 300);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Sources: repeated once, bounded in all                                   */
/* ------------------------------------------------------------------------ */

/* {"op":op,"sources":[key x n]} */
static char *sources_body(const char *head, const char *key, int n, const char *tail)
{
    char *s;
    size_t len;
    FILE *f = open_memstream(&s, &len);
    fprintf(f, "{%s\"sources\":[", head);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"%s\"", i ? "," : "", key);
    fprintf(f, "]%s}", tail);
    fclose(f);
    return s;
}

/* Seconds a request takes (the fastest of a few), answered `status`. */
static double timed(const tally_proc_t *p, const char *path, const char *body, long status, int rounds)
{
    double best = 1e9;
    for (int i = 0; i < rounds; i++) {
        double t0 = now_s();
        http_resp_t r = http(p, "POST", path, body, NULL);
        double t = now_s() - t0;
        assert_status(&r, status);
        http_free(&r);
        if (t < best)
            best = t;
    }
    return best;
}

static void test_repeated_sources(void **state)
{
    (void)state;
    const char *args[] = { "--max-value-size", "8mb", NULL };   /* sources may total 32 MiB */
    tally_proc_t p;
    tally_start(&p, NULL, args);
    int rounds = slow() ? 1 : 3;
    /* BITOP over an 8 MiB string, once and 10 000 times */
    http_expect(&p, "POST", "/bits/b/setbit", "{\"offset\":67108863,\"value\":1}", 200, NULL);
    http_expect(&p, "POST", "/bits/b/setbit", "{\"offset\":5,\"value\":1}", 200, NULL);
    char *one = sources_body("\"op\":\"or\",", "b", 1, ""), *many = sources_body("\"op\":\"or\",", "b", 10000, "");
    double t1 = timed(&p, "/bits/d1/op", one, 200, rounds), tn = timed(&p, "/bits/dn/op", many, 200, rounds);
    if (tn > 5 * t1 + 1)
        fail_msg("BITOP of 10 000 copies took %.3f s, of one %.3f s", tn, t1);
    free(one);
    free(many);
    http_expect(&p, "GET", "/bits/dn/count", NULL, 200, "{\"count\":2}");
    http_expect(&p, "GET", "/bits/d1/count", NULL, 200, "{\"count\":2}");
    /* XOR keeps a repeated source's parity: an even count cancels out, at its length */
    char *even = sources_body("\"op\":\"xor\",", "b", 4, ""), *odd = sources_body("\"op\":\"xor\",", "b", 3, "");
    http_expect(&p, "POST", "/bits/x2/op", even, 200, "{\"length\":8388608}");
    http_expect(&p, "GET", "/bits/x2/count", NULL, 200, "{\"count\":0}");
    http_expect(&p, "POST", "/bits/x3/op", odd, 200, "{\"length\":8388608}");
    http_expect(&p, "GET", "/bits/x3/count", NULL, 200, "{\"count\":2}");
    free(even);
    free(odd);
    http_expect(&p, "POST", "/bits/a/op", "{\"op\":\"and\",\"sources\":[\"b\",\"b\",\"x3\",\"b\"]}", 200,
                "{\"length\":8388608}");
    http_expect(&p, "GET", "/bits/a/count", NULL, 200, "{\"count\":2}");
    /* distinct sources past 4 x --max-value-size: refused, nothing written */
    http_expect(&p, "POST", "/bits/c/setbit", "{\"offset\":67108863,\"value\":1}", 200, NULL);
    http_expect(&p, "POST", "/bits/e/setbit", "{\"offset\":67108863,\"value\":1}", 200, NULL);
    expect_refused(&p, "POST", "/bits/all/op", "{\"op\":\"or\",\"sources\":[\"b\",\"c\",\"d1\",\"dn\",\"e\"]}", 400,
                   "BAD_REQUEST", "4 x --max-value-size");
    http_expect(&p, "GET", "/bits/all/count", NULL, 200, "{\"count\":0}");
    expect_refused(&p, "POST", "/bits/b/setbit", "{\"offset\":67108864,\"value\":1}", 400, "BAD_REQUEST",
                   "--max-value-size (8388608 bytes a value)");

    /* CMS.MERGE of a 1M-cell sketch, once and 10 000 times (weights add up) */
    http_expect(&p, "PUT", "/cms/s", "{\"width\":1000000,\"depth\":1}", 201, NULL);
    http_expect(&p, "POST", "/cms/s", "{\"increments\":[{\"item\":\"a\",\"by\":3}]}", 200, "{\"counts\":[3]}");
    http_expect(&p, "PUT", "/cms/m1", "{\"width\":1000000,\"depth\":1}", 201, NULL);
    http_expect(&p, "PUT", "/cms/mn", "{\"width\":1000000,\"depth\":1}", 201, NULL);
    one = sources_body("", "s", 1, "");
    many = sources_body("", "s", 10000, "");
    t1 = timed(&p, "/cms/m1/merge", one, 200, rounds);
    tn = timed(&p, "/cms/mn/merge", many, 200, rounds);
    if (tn > 5 * t1 + 1)
        fail_msg("CMS merge of 10 000 copies took %.3f s, of one %.3f s", tn, t1);
    free(one);
    free(many);
    http_expect(&p, "GET", "/cms/m1/count?item=a", NULL, 200, "{\"counts\":[3]}");
    http_expect(&p, "GET", "/cms/mn/count?item=a", NULL, 200, "{\"counts\":[30000]}");
    /* weights of a repeated source add up; one that cancels out is still exact */
    http_expect(&p, "POST", "/cms/m1/merge", "{\"sources\":[\"s\",\"m1\",\"s\"],\"weights\":[5,1,-4]}", 200, NULL);
    http_expect(&p, "GET", "/cms/m1/count?item=a", NULL, 200, "{\"counts\":[6]}");
    http_expect(&p, "POST", "/cms/m1/merge",
                "{\"sources\":[\"s\",\"s\"],\"weights\":[9223372036854775807,9223372036854775807]}", 400, NULL);
    http_expect(&p, "GET", "/cms/m1/count?item=a", NULL, 200, "{\"counts\":[6]}");
    /* distinct sketches past the bound */
    for (int i = 0; i < 4; i++) {
        http_resp_t r = httpf(&p, "PUT", "{\"width\":1000000,\"depth\":1}", "/cms/k%d", i);
        assert_status(&r, 201);
        http_free(&r);
    }
    expect_refused(&p, "POST", "/cms/m1/merge", "{\"sources\":[\"s\",\"k0\",\"k1\",\"k2\",\"k3\"]}", 400,
                   "BAD_REQUEST", "4 x --max-value-size");

    /* a Bloom filter of 1000 sub-filters (expansion 1 from capacity 1): a
     * lookup walks them all, so 10 000 items at once would read 640 MB */
    http_expect(&p, "PUT", "/bloom/chain", "{\"capacity\":1,\"error_rate\":0.5,\"expansion\":1}", 201, NULL);
    char *b = items_body("chain", 0, 1000);
    http_expect(&p, "POST", "/bloom/chain", b, 200, NULL);
    free(b);
    b = items_body("probe", 0, 10000);
    expect_refused(&p, "POST", "/bloom/chain/exists", b, 400, "BAD_REQUEST", "4 x --max-value-size");
    free(b);
    b = items_body("probe", 0, 100);
    http_expect(&p, "POST", "/bloom/chain/exists", b, 200, NULL);
    free(b);

    /* PFCOUNT and PFMERGE: a key named again changes nothing */
    http_expect(&p, "POST", "/uv/u1", "{\"items\":[\"a\",\"b\",\"c\"]}", 200, NULL);
    http_expect(&p, "POST", "/uv/u2", "{\"items\":[\"c\",\"d\"]}", 200, NULL);
    http_expect(&p, "GET", "/uv/u1?union=u2&union=u1&union=u2", NULL, 200, "{\"count\":4}");
    http_expect(&p, "POST", "/uv/u3/merge", "{\"sources\":[\"u1\",\"u2\",\"u1\",\"u3\"]}", 200, "{\"count\":4}");
    /* T-Digest: a source named twice counts twice, as TDIGEST.MERGE does */
    http_expect(&p, "PUT", "/tdigest/t", NULL, 201, NULL);
    http_expect(&p, "POST", "/tdigest/t", "{\"values\":[1,2,3]}", 200, "{\"observations\":3}");
    http_resp_t r = http(&p, "POST", "/tdigest/t2/merge", "{\"sources\":[\"t\",\"t\"]}", NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "observations"), 6);
    http_free(&r);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Replay                                                                   */
/* ------------------------------------------------------------------------ */

/* What was accepted replays, whatever the limits are at the restart. */
static void test_replay_keeps_accepted(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    http_expect(&p, "POST", "/bits/b/setbit", "{\"offset\":16777215,\"value\":1}", 200, NULL);   /* 2 MiB */
    http_expect(&p, "PUT", "/cms/c", "{\"width\":300000,\"depth\":1}", 201, NULL);               /* 2.4 MB */
    tally_kill(&p);   /* the journal only */
    const char *args[] = { "--max-value-size", "1mb", "--maxmemory", "3mb", NULL };
    tally_start(&p, dir, args);
    p.own_dir = true;
    http_expect(&p, "GET", "/bits/b/count", NULL, 200, "{\"count\":1}");
    http_expect(&p, "GET", "/cms/c", NULL, 200, NULL);
    expect_refused(&p, "POST", "/bits/b/setbit", "{\"offset\":16777216,\"value\":1}", 400, "BAD_REQUEST",
                   "--max-value-size");
    tally_cleanup(&p);
}

int main(void)
{
    /* AddressSanitizer keeps freed blocks in a quarantine (256 MB by default)
     * before their memory can be reused: a tallyd built with it would hold
     * on to what the tests free, which is not tally's memory. */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=4", asan ? asan : "", asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maxmemory_largest_requests),
        cmocka_unit_test(test_refused_batch_evicts_nothing),
        cmocka_unit_test(test_default_caps),
        cmocka_unit_test(test_answer_cap),
        cmocka_unit_test(test_repeated_sources),
        cmocka_unit_test(test_replay_keeps_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
