/*
 * it_durability.c - snapshots and the journal with real processes: kill -9
 * mid-stream loses nothing acknowledged; SIGTERM restarts to identical state;
 * every kind of damage is either dropped as promised (a torn last record) or
 * refused with the file and offset named, and damaged files are left as they
 * were; a full disk refuses to acknowledge rather than lose data.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rng.h"
#include "tests/integration/harness.h"

/* A limiter whose remaining count reveals exactly how many requests it took:
 * T = 10^6 s, so nothing refills during a test; limit 1001. */
#define COUNTING_BODY "{\"key\":\"%s\",\"max_burst\":1000,\"count_per_period\":1,\"period\":1000000%s}"

/* Room for a counting body with the longest key (1024 bytes). */
#define COUNTING_BODY_MAX 1200

static void post_count(const tally_proc_t *p, const char *key, long *status)
{
    char body[COUNTING_BODY_MAX];
    snprintf(body, sizeof(body), COUNTING_BODY, key, "");
    http_resp_t r = http(p, "POST", "/throttle", body, NULL);
    *status = r.status == 200 && r.json && json_bool_of(&r, "allowed") ? 200 : (r.status == 200 ? 429 : r.status);
    http_free(&r);
}

/* How many requests the key has taken (peek). */
static long taken(const tally_proc_t *p, const char *key)
{
    char body[COUNTING_BODY_MAX];
    snprintf(body, sizeof(body), COUNTING_BODY, key, ",\"quantity\":0");
    http_resp_t r = http(p, "POST", "/throttle", body, NULL);
    assert_status(&r, 200);
    long n = 1001 - (long)json_int_of(&r, "remaining");
    http_free(&r);
    return n;
}

/* The newest journal file of a data directory. */
static void last_journal(const char *dir, char *out, size_t n)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char best[256] = "";
    while ((de = readdir(d)))
        if (strncmp(de->d_name, "journal.", 8) == 0 && strcmp(de->d_name, best) > 0)
            snprintf(best, sizeof(best), "%s", de->d_name);
    closedir(d);
    assert_true(best[0] != '\0');
    snprintf(out, n, "%s/%s", dir, best);
}

/* ------------------------------------------------------------------------ */
/* (a) kill -9 mid-stream, fsync always                                     */
/* ------------------------------------------------------------------------ */

#define WRITERS 4
#define LONG_KEY 900   /* key length of the window-crossing variant */

/* Counting on a /counter key instead: no cap on the count (the limiter
 * above stops at 1001), for rounds that write megabytes. */
static void post_counter(const tally_proc_t *p, const char *key, long *status)
{
    http_resp_t r = httpf(p, "POST", "{}", "/counter/%s", key);
    *status = r.status;
    http_free(&r);
}

static long counter_value(const tally_proc_t *p, const char *key)
{
    http_resp_t r = httpf(p, "GET", NULL, "/counter/%s", key);
    assert_status(&r, 200);
    long n = (long)json_int_of(&r, "value");
    http_free(&r);
    return n;
}

struct writer {
    tally_proc_t *p;
    bool counter;   /* post_counter, else post_count */
    char key[LONG_KEY + 1];
    _Atomic long acked;
    _Atomic int *stop;
};

/* The journal the writers' acknowledged requests hold, counted by their
 * keys' bytes. */
static size_t acked_bytes(struct writer *w, size_t keylen)
{
    size_t bytes = 0;
    for (int i = 0; i < WRITERS; i++)
        bytes += (size_t)atomic_load(&w[i].acked) * keylen;
    return bytes;
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    while (!atomic_load(w->stop)) {
        long st;
        (w->counter ? post_counter : post_count)(w->p, w->key, &st);
        if (st == 200)
            atomic_fetch_add(&w->acked, 1);
        else if (st < 0)
            break;   /* the server is gone */
    }
    return NULL;
}

/* Rounds of: WRITERS threads counting on their own keys (keylen bytes
 * each), kill -9 at a random instant, restart, and every key must hold all
 * its acknowledged requests (and at most the one in flight more).  The
 * instant is a random time in [min_us, min_us + spread_us), or, with
 * min_bytes, the moment the acknowledged requests' keys add up to a random
 * amount of journal in [min_bytes, 2 * min_bytes) (at most 30 s). */
static void kill9_rounds(const char *const *args, bool counter, int rounds, size_t keylen, unsigned min_us,
                         unsigned spread_us, size_t min_bytes)
{
    tally_proc_t p;
    tally_start(&p, NULL, args);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    rng_t r;
    rng_seed(&r, 2026);
    long total[WRITERS] = { 0 };
    for (int round = 0; round < rounds; round++) {
        _Atomic int stop = 0;
        struct writer w[WRITERS];
        pthread_t t[WRITERS];
        tally_proc_t view = p;   /* the writers' copy: tally_kill changes p */
        for (int i = 0; i < WRITERS; i++) {
            w[i].p = &view;
            w[i].counter = counter;
            size_t n = (size_t)snprintf(w[i].key, sizeof(w[i].key), "kill9:%d:", i);
            size_t len = keylen > n ? keylen : n;
            memset(w[i].key + n, 'k', len - n);
            w[i].key[len] = '\0';
            atomic_init(&w[i].acked, 0);
            w[i].stop = &stop;
            pthread_create(&t[i], NULL, writer_main, &w[i]);
        }
        if (min_bytes) {
            size_t target = min_bytes + (size_t)rng_below(&r, min_bytes);
            for (int ms = 0; ms < 30000 && acked_bytes(w, keylen) < target; ms += 5)
                usleep(5000);
        } else {
            usleep((useconds_t)(min_us + rng_below(&r, spread_us)));   /* a random instant */
        }
        tally_kill(&p);
        atomic_store(&stop, 1);
        for (int i = 0; i < WRITERS; i++)
            pthread_join(t[i], NULL);
        if (min_bytes)
            print_message("    round %d: killed after %.1f MiB of keys acknowledged\n", round,
                          acked_bytes(w, keylen) / 1048576.0);
        tally_start(&p, dir, args);
        for (int i = 0; i < WRITERS; i++) {
            total[i] += atomic_load(&w[i].acked);
            long n = counter ? counter_value(&p, w[i].key) : taken(&p, w[i].key);
            /* everything acknowledged is there; at most the one in-flight request more */
            if (n < total[i] || n > total[i] + 1)
                fail_msg("round %d key %d: %ld acknowledged, %ld present", round, i, total[i], n);
            total[i] = n;   /* an unacknowledged in-flight request may have landed */
        }
    }
    p.own_dir = true;
    tally_cleanup(&p);
}

static void test_kill9_loses_nothing_acknowledged(void **state)
{
    (void)state;
    const char *args[] = { "--fsync", "always", "--snapshot-interval", "1", NULL };
    kill9_rounds(args, false, 4, 7, 50000, 400000, 0);
}

/* The journal is written through 4 MiB windows of the file, mapped one at
 * a time and made writable 64 KiB ahead of the records, with records that
 * straddle two windows written with pwrite (service/journal.c): with
 * ~1 KiB records (counters with long keys), each round writes 6-12 MiB, so
 * the kill lands after the writer has crossed windows, at a random place
 * in one, with journal rotations (snapshots every second) on the way. */
static void test_kill9_across_journal_windows(void **state)
{
    (void)state;
    const char *args[] = { "--fsync", "everysec", "--snapshot-interval", "1", NULL };
    kill9_rounds(args, true, 3, LONG_KEY, 0, 0, (size_t)6 << 20);
}

/* ------------------------------------------------------------------------ */
/* (b) SIGTERM -> restart -> identical state                                */
/* ------------------------------------------------------------------------ */

static json_t *state_of(const tally_proc_t *p)
{
    json_t *all = json_object();
    char cursor[64] = "";
    for (;;) {
        http_resp_t r = httpf(p, "GET", NULL, "/keys?limit=1000%s%s", cursor[0] ? "&cursor=" : "", cursor);
        json_t *keys = json_object_get(r.json, "keys");
        for (size_t i = 0; i < json_array_size(keys); i++) {
            json_t *k = json_array_get(keys, i);
            const char *name = json_string_value(json_object_get(k, "key"));
            json_t *v = json_pack("{s:O}", "type", json_object_get(k, "type"));
            if (strcmp(json_string_value(json_object_get(k, "type")), "throttle") == 0)
                json_object_set_new(v, "taken", json_integer(taken(p, name)));
            json_object_set_new(all, name, v);
        }
        json_t *c = json_object_get(r.json, "cursor");
        if (json_is_null(c)) {
            http_free(&r);
            break;
        }
        snprintf(cursor, sizeof(cursor), "%s", json_string_value(c));
        http_free(&r);
    }
    return all;
}

static void test_sigterm_restart_identical(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    char key[32];
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof(key), "term:%d", i % 37);
        long st;
        post_count(&p, key, &st);
    }
    http_resp_t r = http(&p, "POST", "/admin/snapshot", NULL, NULL);   /* some before, some after a snapshot */
    assert_status(&r, 200);
    assert_true(json_int_of(&r, "bytes") > 0);
    assert_int_equal(json_int_of(&r, "keys"), 37);
    http_free(&r);
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "term2:%d", i % 11);
        long st;
        post_count(&p, key, &st);
    }
    r = http(&p, "DELETE", "/keys/term%3A3", NULL, NULL);
    http_free(&r);
    json_t *before = state_of(&p);
    assert_int_equal(tally_stop(&p), 0);
    tally_start(&p, p.dir, NULL);
    p.own_dir = true;
    json_t *after = state_of(&p);
    if (!json_equal(before, after)) {
        char *a = json_dumps(before, JSON_SORT_KEYS), *b = json_dumps(after, JSON_SORT_KEYS);
        fail_msg("state differs after restart:\nbefore %s\nafter  %s", a, b);
    }
    assert_int_equal(json_object_size(after), 37 - 1 + 11);
    json_decref(before);
    json_decref(after);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* (c) damage                                                               */
/* ------------------------------------------------------------------------ */

/* A data directory with a snapshot holding `snap_n` requests on key "d" and
 * a journal holding `jn` more; the process is killed (no final snapshot). */
static void make_dir(tally_proc_t *p, int snap_n, int jn)
{
    tally_start(p, NULL, (const char *[]){ "--snapshot-interval", "0", NULL });
    long st;
    for (int i = 0; i < snap_n; i++)
        post_count(p, "d", &st);
    if (snap_n) {
        http_resp_t r = http(p, "POST", "/admin/snapshot", NULL, NULL);
        assert_status(&r, 200);
        http_free(&r);
    }
    for (int i = 0; i < jn; i++)
        post_count(p, "d", &st);
    tally_kill(p);
}

static void expect_refusal(tally_proc_t *p, const char *file, const char *what)
{
    int rc = tally_start_expect_exit(p, p->dir, (const char *[]){ "--snapshot-interval", "0", NULL });
    assert_int_not_equal(rc, 0);
    char *log = tally_log(p);
    if (!strstr(log, file) || !strstr(log, "offset") || !strstr(log, what))
        fail_msg("refusal log does not name %s, an offset and '%s':\n%s", file, what, log);
    free(log);
}

/* The refusal, and the file left exactly as it was (data, len). */
static void expect_refusal_untouched(tally_proc_t *p, const char *file, const char *what, const char *data,
                                     size_t len)
{
    expect_refusal(p, file, what);
    assert_true(file_equals(file, data, len));
}

/* A data directory whose journal holds 10 requests on key "d" (the process
 * killed) and that journal's bytes: *last is where its last record starts,
 * *end where its records end. */
static char *journal_of_ten(tally_proc_t *p, char *jp, size_t jn, size_t *len, size_t *last, size_t *end)
{
    make_dir(p, 0, 10);
    last_journal(p->dir, jp, jn);
    char *data = file_read(jp, len);
    size_t offs[65];
    size_t n = journal_frames(data, *len, offs, 64);
    *last = n ? offs[n - 1] : offs[0];
    *end = offs[n];
    return data;
}

/* The one shape a crash mid-append leaves (journal format 2): the last
 * record's payload partly stored and its frame not yet, inside space
 * reserved in advance (zeros).  It is dropped, in words that say it was
 * never acknowledged. */
static void test_torn_journal_tail_dropped(void **state)
{
    (void)state;
    tally_proc_t p;
    char jp[512];
    size_t len, last, end;
    char *data = journal_of_ten(&p, jp, sizeof(jp), &len, &last, &end);
    assert_true(end > last && last > 24 && len >= end + 4096);
    memset(data + last, 0, 8);         /* frame not stored yet */
    memset(data + end - 7, 0, 7);      /* nor the end of the payload */
    file_write(jp, data, len);
    free(data);
    tally_start(&p, p.dir, NULL);
    assert_int_equal(taken(&p, "d"), 9);
    char *log = tally_log(&p);
    assert_non_null(strstr(log, "a write interrupted by a crash"));
    assert_null(strstr(log, "torn last record"));
    free(log);
    /* and a restart after that is clean */
    assert_int_equal(tally_stop(&p), 0);
    tally_start(&p, p.dir, NULL);
    assert_int_equal(taken(&p, "d"), 9);
    p.own_dir = true;
    tally_cleanup(&p);
}

/* What used to be taken for a torn tail and is damage: the newest journal
 * cut inside its last record (a crash never leaves that: the space is
 * reserved first), or a whole frame with a payload that does not match. */
static void refused_tail(bool cut_file)
{
    tally_proc_t p;
    char jp[512];
    size_t len, last, end;
    char *data = journal_of_ten(&p, jp, sizeof(jp), &len, &last, &end);
    if (cut_file) {
        len = end - 7;
    } else {
        memset(data + end - 7, 0, 7);
    }
    file_write(jp, data, len);
    expect_refusal_untouched(&p, jp, cut_file ? "truncated" : "checksum", data, len);
    free(data);
    p.own_dir = true;
    tally_cleanup(&p);
}

static void test_cut_or_flipped_tail_refused(void **state)
{
    (void)state;
    refused_tail(true);
    refused_tail(false);
}

static void test_zero_tail_dropped(void **state)
{
    (void)state;
    tally_proc_t p;
    make_dir(&p, 3, 4);
    char jp[512];
    last_journal(p.dir, jp, sizeof(jp));
    FILE *f = fopen(jp, "ab");
    static const char zeros[4096];
    fwrite(zeros, 1, sizeof(zeros), f);   /* blocks allocated, never written */
    fclose(f);
    tally_start(&p, p.dir, NULL);
    assert_int_equal(taken(&p, "d"), 7);
    p.own_dir = true;
    tally_cleanup(&p);
}

static void test_damaged_journal_refused(void **state)
{
    (void)state;
    tally_proc_t p;
    make_dir(&p, 0, 5);
    char jp[512];
    last_journal(p.dir, jp, sizeof(jp));
    size_t len;
    char *data = file_read(jp, &len);
    data[24 + 20] ^= 0x40;   /* inside the first record, with good records after it */
    file_write(jp, data, len);
    expect_refusal_untouched(&p, jp, "checksum", data, len);
    free(data);
    p.own_dir = true;
    tally_cleanup(&p);
}

static void snapshot_damage(void (*damage)(char *data, size_t *len), const char *what)
{
    tally_proc_t p;
    make_dir(&p, 5, 2);
    char sp[512];
    snprintf(sp, sizeof(sp), "%s/snapshot.tly", p.dir);
    size_t len;
    char *data = file_read(sp, &len);
    data = realloc(data, len + 64);
    damage(data, &len);
    file_write(sp, data, len);
    expect_refusal_untouched(&p, sp, what, data, len);
    free(data);
    /* `tallyd --check` agrees */
    assert_int_not_equal(tally_check(sp, NULL, 0), 0);
    p.own_dir = true;
    tally_cleanup(&p);
}

static void flip_middle(char *d, size_t *len) { d[*len / 2] ^= 0x01; }
static void flip_last(char *d, size_t *len) { d[*len - 1] ^= 0x80; }
static void bad_magic(char *d, size_t *len) { (void)len; memcpy(d, "REDIS000", 8); }
static void future_version(char *d, size_t *len) { (void)len; d[8] = 99; }
static void empty(char *d, size_t *len) { (void)d; *len = 0; }
static void truncated(char *d, size_t *len) { (void)d; *len -= 30; }
static void trailing(char *d, size_t *len) { memcpy(d + *len, "junk", 4); *len += 4; }

static void test_snapshot_flipped_byte(void **s) { (void)s; snapshot_damage(flip_middle, "checksum"); }
static void test_snapshot_flipped_trailer(void **s) { (void)s; snapshot_damage(flip_last, "checksum"); }
static void test_snapshot_bad_magic(void **s) { (void)s; snapshot_damage(bad_magic, "magic"); }
static void test_snapshot_future_version(void **s) { (void)s; snapshot_damage(future_version, "newer"); }
static void test_snapshot_empty(void **s) { (void)s; snapshot_damage(empty, "empty"); }
static void test_snapshot_truncated(void **s) { (void)s; snapshot_damage(truncated, "truncated"); }
static void test_snapshot_trailing_garbage(void **s) { (void)s; snapshot_damage(trailing, "after the trailer"); }

static void test_missing_middle_journal_refused(void **state)
{
    (void)state;
    tally_proc_t p;
    make_dir(&p, 0, 3);
    tally_start(&p, p.dir, NULL);   /* a second journal */
    long st;
    post_count(&p, "d", &st);
    tally_kill(&p);
    char jp[512];
    snprintf(jp, sizeof(jp), "%s/journal.0000000001.tlj", p.dir);
    char moved[600];
    snprintf(moved, sizeof(moved), "%s.away", p.dir);
    assert_int_equal(rename(jp, moved), 0);
    int rc = tally_start_expect_exit(&p, p.dir, NULL);
    assert_int_not_equal(rc, 0);
    char *log = tally_log(&p);
    assert_non_null(strstr(log, "journal.0000000001.tlj is missing"));
    free(log);
    unlink(moved);
    p.own_dir = true;
    tally_cleanup(&p);
}

static void test_check_tool(void **state)
{
    (void)state;
    tally_proc_t p;
    make_dir(&p, 4, 3);
    const char *bin = getenv("TALLYD") ? getenv("TALLYD") : "build/release/tallyd";
    char cmd[700], jp[512], out[4096];
    snprintf(cmd, sizeof(cmd), "%s --check %s/snapshot.tly", bin, p.dir);
    FILE *f = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    assert_int_equal(pclose(f), 0);
    assert_non_null(strstr(out, "1 keys"));
    assert_non_null(strstr(out, "throttle"));
    assert_non_null(strstr(out, "OK"));
    last_journal(p.dir, jp, sizeof(jp));
    snprintf(cmd, sizeof(cmd), "%s --check %s", bin, jp);
    f = popen(cmd, "r");
    n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    assert_int_equal(pclose(f), 0);
    assert_non_null(strstr(out, "3 records"));
    p.own_dir = true;
    tally_cleanup(&p);
}

static void test_unusable_directory(void **state)
{
    (void)state;
    char base[256], dir[300];
    tmpdir_make(base, sizeof(base));
    snprintf(dir, sizeof(dir), "%s/file", base);
    file_write(dir, "x", 1);
    snprintf(dir, sizeof(dir), "%s/file", base);   /* a regular file where the directory should be */
    tally_proc_t p;
    int rc = tally_start_expect_exit(&p, dir, NULL);
    assert_int_not_equal(rc, 0);
    char *log = tally_log(&p);
    assert_non_null(strstr(log, "is not a directory"));
    free(log);
    unlink(p.log);
    tmpdir_remove(base);
}

/* A request of more than 64 MiB (--max-body 100mb) is one journal record:
 * acknowledged, it survives kill -9 and the restart reads its journal (the
 * record bound once was 64 MiB, and such a journal was refused as damaged);
 * a --max-body whose records could pass the bound is refused at start. */
static void test_large_record_survives(void **state)
{
    (void)state;
    size_t n = 70u << 20;
    uint8_t *body = malloc(n);
    assert_non_null(body);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        body[i] = (uint8_t)x;
    }
    const char *args[] = { "--max-body", "100mb", "--snapshot-interval", "0", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    http_resp_t r = http_bin(&p, "PUT", "/bits/big", body, n, "application/octet-stream");
    assert_status_at(&r, 200, __FILE__, __LINE__);
    http_free(&r);
    r = http(&p, "GET", "/bits/big/count", NULL, NULL);
    long long count = json_int_of(&r, "count");
    http_free(&r);
    tally_kill(&p);
    char journal[400], out[4096];
    snprintf(journal, sizeof(journal), "%s/journal.0000000001.tlj", p.dir);
    assert_int_equal(tally_check(journal, out, sizeof(out)), 0);
    tally_start(&p, p.dir, args);
    r = http(&p, "GET", "/bits/big/count", NULL, NULL);
    assert_int_equal(json_int_of(&r, "count"), count);
    http_free(&r);
    tally_cleanup(&p);
    free(body);

    const char *too_big[] = { "--max-body", "2gb", NULL };
    tally_proc_t q;
    assert_int_not_equal(tally_start_expect_exit(&q, NULL, too_big), 0);
    char *log = tally_log(&q);
    assert_non_null(strstr(log, "--max-body is at most 1gb"));
    free(log);
    unlink(q.log);
}

static void test_second_process_refused(void **state)
{
    (void)state;
    tally_proc_t p, q;
    tally_start(&p, NULL, NULL);
    int rc = tally_start_expect_exit(&q, p.dir, NULL);
    assert_int_not_equal(rc, 0);
    char *log = tally_log(&q);
    assert_non_null(strstr(log, "in use by another tallyd"));
    free(log);
    tally_cleanup(&p);
}

/* A full disk (RLIMIT_FSIZE: writes fail with EFBIG): requests that cannot
 * be journaled are not acknowledged (503), snapshots fail without harming
 * the previous one, and after a restart everything acknowledged is there. */
static void test_disk_full(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_set_file_limit(16 * 1024);
    tally_start(&p, NULL, (const char *[]){ "--snapshot-interval", "0", "--journal-timeout", "1", NULL });
    tally_set_file_limit(0);
    long acked = 0, refused = 0, st;
    char snap_before[600];
    snprintf(snap_before, sizeof(snap_before), "%s/snapshot.tly", p.dir);
    http_resp_t u = http(&p, "POST", "/uv/fullu", "{\"items\":[\"a\",\"b\",\"c\"]}", NULL);
    assert_status(&u, 200);
    http_free(&u);
    for (int i = 0; i < 40 && refused == 0; i++) {
        post_count(&p, "full", &st);
        if (st == 200)
            acked++;
        else if (st == 503)
            refused++;
    }
    http_resp_t r = http(&p, "POST", "/admin/snapshot", NULL, NULL);
    assert_status(&r, 200);   /* a small snapshot still fits */
    http_free(&r);
    for (int i = 0; i < 400 && refused < 3; i++) {
        post_count(&p, "full", &st);
        if (st == 200)
            acked++;
        else if (st == 503)
            refused++;
        else
            fail_msg("unexpected status %ld", st);
    }
    assert_true(refused >= 3);
    assert_true(acked > 10);
    /* a refused write changes nothing, also in memory (the read is a GET:
     * reads need no journal space) */
    long c_acked = 0, c_refused = 0;
    for (int i = 0; i < 20; i++) {
        r = http(&p, "POST", "/counter/fullc", "{\"by\":1}", NULL);
        if (r.status == 200)
            c_acked++;
        else if (r.status == 503)
            c_refused++;
        else
            fail_msg("unexpected status %ld", r.status);
        http_free(&r);
    }
    assert_true(c_refused > 0);
    /* a count refreshes HyperLogLog's cache, and needs no journal space */
    r = http(&p, "GET", "/uv/fullu", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "count"), 3);
    http_free(&r);
    r = http(&p, "GET", "/counter/fullc", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "value"), c_acked);
    http_free(&r);
    struct stat sb;
    assert_int_equal(stat(snap_before, &sb), 0);
    tally_kill(&p);
    /* the disk has room again */
    tally_start(&p, p.dir, NULL);
    long n = taken(&p, "full");
    if (n != acked)
        fail_msg("%ld acknowledged before the disk filled (%ld refused), %ld present after restart", acked,
                 refused, n);
    char *log = tally_log(&p);
    assert_null(strstr(log, "damaged"));
    free(log);
    p.own_dir = true;
    tally_cleanup(&p);
}

/* A tmpfs of `size` at <base>/mnt (false when mounting is not permitted). */
static bool small_disk(char *base, size_t n, char *mnt, size_t mn, const char *size)
{
    char cmd[700];
    tmpdir_make(base, n);
    snprintf(mnt, mn, "%s/mnt", base);
    mkdir(mnt, 0755);
    snprintf(cmd, sizeof(cmd), "mount -t tmpfs -o size=%s tmpfs %s 2>/dev/null", size, mnt);
    if (system(cmd) == 0)
        return true;
    tmpdir_remove(base);
    return false;
}

/* Kills the server, moves its files (in `dir` on the tmpfs at `mnt`) to
 * <base>/moved, unmounts the tmpfs and starts the server there (with args). */
static void restart_with_room(tally_proc_t *p, const char *base, const char *mnt, const char *dir,
                              const char *const *args)
{
    char dir2[300], cmd[1200];
    tally_kill(p);
    snprintf(dir2, sizeof(dir2), "%s/moved", base);
    snprintf(cmd, sizeof(cmd), "cp -a %s %s && umount %s", dir, dir2, mnt);
    assert_int_equal(system(cmd), 0);
    tally_start(p, dir2, args);
}

/* Fills the file system holding `path` but `leave` bytes (a file of zeros). */
static void fill_disk(const char *path, size_t leave)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    static char block[4096];
    size_t wrote = 0;
    while (fwrite(block, 1, sizeof(block), f) == sizeof(block) && fflush(f) == 0)
        wrote += sizeof(block);
    fclose(f);
    assert_int_equal(truncate(path, (off_t)(wrote > leave ? wrote - leave : 0)), 0);
}

/* The same with a real ENOSPC: a tiny tmpfs (needs mount permission; the
 * test is skipped where the sandbox forbids it). */
static void test_real_enospc(void **state)
{
    (void)state;
    char base[256], mnt[300], cmd[1200];
    if (!small_disk(base, sizeof(base), mnt, sizeof(mnt), "96k"))
        skip();
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/data", mnt);
    tally_proc_t p;
    tally_start(&p, dir, (const char *[]){ "--snapshot-interval", "0", "--journal-timeout", "1", NULL });
    long acked = 0, refused = 0, st;
    char key[32];
    for (int i = 0; i < 5000 && refused < 2; i++) {
        snprintf(key, sizeof(key), "enospc%d", i % 50);
        post_count(&p, key, &st);
        if (st == 200)
            acked++;
        else if (st == 503)
            refused++;
        else
            fail_msg("unexpected status %ld", st);
    }
    assert_true(refused >= 2);
    http_resp_t r = http(&p, "POST", "/admin/snapshot", NULL, NULL);
    assert_error(&r, 507, "NO_SPACE");   /* no room: the snapshot fails cleanly, saying why */
    http_free(&r);
    snprintf(cmd, sizeof(cmd), "%s/snapshot.tly.tmp", dir);
    assert_int_not_equal(access(cmd, F_OK), 0);   /* the temp file was removed */
    /* move the files to a disk with room and start there */
    restart_with_room(&p, base, mnt, dir, NULL);
    long total = 0;
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "enospc%d", i);
        total += taken(&p, key);
    }
    if (total != acked)
        fail_msg("%ld acknowledged (%ld refused), %ld present after moving to a disk with room", acked, refused,
                 total);
    tally_cleanup(&p);
    unlink(p.log);
    tmpdir_remove(base);
}

/* What a tallyd that started on a full disk answers: reads as ever, every
 * change 503 (not applied), /readyz ready but not writable (and 503 for
 * ?role=primary), the reason in /info and the log. */
static void expect_read_only(tally_proc_t *p, const char *counter, long value)
{
    http_resp_t r = httpf(p, "GET", NULL, "/counter/%s", counter);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "value"), value);
    http_free(&r);
    r = http(p, "GET", "/uv/startfull-u", NULL, NULL);
    assert_status(&r, 200);
    assert_int_equal(json_int_of(&r, "count"), 3);
    http_free(&r);
    /* (a journal may squeeze into the last free page: then its space runs out) */
    r = httpf(p, "POST", "{\"by\":1}", "/counter/%s", counter);
    assert_error(&r, 503, "UNAVAILABLE");
    if (!strstr(r.body, "started on a full disk") && !strstr(r.body, "No space left on device"))
        fail_msg("a change on a full disk: %s", r.body);
    assert_non_null(strstr(r.body, "not applied"));
    http_free(&r);
    r = http(p, "GET", "/readyz", NULL, NULL);
    assert_status(&r, 200);
    assert_non_null(strstr(r.body, "\"writable\":false"));
    http_free(&r);
    r = http(p, "GET", "/readyz?role=primary", NULL, NULL);
    assert_error(&r, 503, "UNAVAILABLE");
    http_free(&r);
    r = http(p, "GET", "/info", NULL, NULL);
    assert_non_null(strstr(r.body, "\"unwritable\":"));
    http_free(&r);
    r = http(p, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(r.body, "tally_journal_healthy 0\n"));
    http_free(&r);
    r = httpf(p, "GET", NULL, "/counter/%s", counter);   /* the refused change left nothing */
    assert_int_equal(json_int_of(&r, "value"), value);
    http_free(&r);
}

/* Some state, then kill -9: the journal is left open (its seal is due at
 * the next start, which needs a write too). */
static void state_then_kill(tally_proc_t *p, const char *dir)
{
    tally_start(p, dir, (const char *[]){ "--snapshot-interval", "0", NULL });
    http_expect(p, "POST", "/uv/startfull-u", "{\"items\":[\"a\",\"b\",\"c\"]}", 200, NULL);
    http_expect(p, "POST", "/counter/startfull", "{\"by\":5}", 200, NULL);
    tally_kill(p);
}

/* tallyd restarted on a full disk (RLIMIT_FSIZE below a journal's first
 * page: creating the journal fails with EFBIG) starts and serves reads
 * instead of exiting; on a disk with room again nothing refused is there. */
static void test_start_on_full_disk(void **state)
{
    (void)state;
    tally_proc_t p;
    state_then_kill(&p, NULL);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", p.dir);
    tally_set_file_limit(1024);
    tally_start(&p, dir, (const char *[]){ "--snapshot-interval", "0", NULL });
    tally_set_file_limit(0);
    expect_read_only(&p, "startfull", 5);
    char *log = tally_log(&p);
    assert_non_null(strstr(log, "starting without a journal"));
    free(log);
    http_resp_t r = http(&p, "POST", "/admin/snapshot", NULL, NULL);
    assert_true(r.status >= 500);   /* no snapshot without a journal to follow it */
    http_free(&r);
    tally_kill(&p);
    tally_start(&p, dir, NULL);
    r = http(&p, "GET", "/counter/startfull", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 5);
    http_free(&r);
    http_expect(&p, "POST", "/counter/startfull", "{\"by\":1}", 200, NULL);
    r = http(&p, "GET", "/readyz", NULL, NULL);
    assert_string_equal(r.body, "{\"status\":\"ready\"}");
    http_free(&r);
    p.own_dir = true;
    tally_cleanup(&p);
}

/* The same with a real ENOSPC on a tiny tmpfs, and the space coming back
 * while tallyd runs: within a few seconds it starts its journal and takes
 * changes again, and those are durable (skipped without mount permission). */
static void test_start_on_full_disk_space_returns(void **state)
{
    (void)state;
    char base[256], mnt[300], dir[400], filler[400];
    if (!small_disk(base, sizeof(base), mnt, sizeof(mnt), "2m"))
        skip();
    snprintf(dir, sizeof(dir), "%s/data", mnt);
    snprintf(filler, sizeof(filler), "%s/filler", mnt);
    tally_proc_t p;
    state_then_kill(&p, dir);
    fill_disk(filler, 0);
    tally_start(&p, dir, (const char *[]){ "--snapshot-interval", "0", NULL });
    expect_read_only(&p, "startfull", 5);
    assert_int_equal(unlink(filler), 0);
    long st = 0;
    for (int i = 0; i < 100 && st != 200; i++) {
        http_resp_t r = http(&p, "POST", "/counter/startfull", "{\"by\":1}", NULL);
        st = r.status;
        if (st != 200 && st != 503)
            fail_msg("a change while space returns: %ld %s", st, r.body);
        http_free(&r);
        if (st != 200)
            usleep(100000);
    }
    assert_int_equal(st, 200);
    http_resp_t r = http(&p, "GET", "/readyz?role=primary", NULL, NULL);
    assert_status(&r, 200);
    http_free(&r);
    tally_kill(&p);
    tally_start(&p, dir, NULL);
    r = http(&p, "GET", "/counter/startfull", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 6);
    http_free(&r);
    tally_cleanup(&p);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "umount %s", mnt);
    assert_int_equal(system(cmd), 0);
    tmpdir_remove(base);
}

/* The i-th key of 1000 bytes. */
static void long_key(char *out, size_t n, int i)
{
    memset(out, 'k', 995);
    snprintf(out + 995, n - 995, "%05u", (unsigned)i % 100000u);
}

/* Evictions are journaled as deletions of long keys; a write that must evict
 * many of them on a nearly full disk is either applied (200) or refused
 * (503) with its own change not applied - in memory, and after a restart on
 * a disk with room, the state is the one the server had.  (Before, the
 * router reserved twice the request's size; the deletions overran it, the
 * write was applied, then answered 503.) */
static void test_eviction_journal_space(void **state)
{
    (void)state;
    char base[256], mnt[300], dir[400], filler[400];
    if (!small_disk(base, sizeof(base), mnt, sizeof(mnt), "4m"))
        skip();
    snprintf(dir, sizeof(dir), "%s/data", mnt);
    snprintf(filler, sizeof(filler), "%s/filler", mnt);
    tally_proc_t p;
    tally_start(&p, dir, (const char *[]){ "--snapshot-interval", "0", "--journal-timeout", "1", "--maxmemory",
                                           "400kb", "--maxmemory-policy", "allkeys-lru", NULL });
    /* more long keys than fit: memory ends at the limit */
    enum { NKEYS = 600, NBIG = 4 };
    char key[1100];
    for (int i = 0; i < NKEYS; i++) {
        long_key(key, sizeof(key), i);
        http_resp_t r = httpf(&p, "POST", "{\"by\":1}", "/counter/%s", key);
        assert_status(&r, 200);
        http_free(&r);
    }
    fill_disk(filler, 8192);
    /* each bitmap needs ~150 KB: ~140 evictions, ~145 KB of deletions */
    int refused = 0;
    for (int b = 0; b < NBIG; b++) {
        http_resp_t r = httpf(&p, "POST", "{\"offset\":1200000,\"value\":1}", "/bits/big%d/setbit", b);
        long st = r.status;
        if (st == 503)
            refused++;
        else if (st != 200)
            fail_msg("setbit on a full disk: %ld %s", st, r.body);
        http_free(&r);
        r = httpf(&p, "GET", NULL, "/bits/big%d/getbit?offset=1200000", b);
        assert_status(&r, 200);
        if (json_int_of(&r, "value") != (st == 200))
            fail_msg("setbit big%d answered %ld, the bit is %lld", b, st, json_int_of(&r, "value"));
        http_free(&r);
    }
    printf("evicting on a full disk: %d of %d writes applied, %d refused (503)\n", NBIG - refused, NBIG, refused);
    assert_true(refused > 0);
    /* with room again, the same write evicts what it needs and is applied */
    assert_int_equal(unlink(filler), 0);
    http_resp_t w = http(&p, "POST", "/bits/big0/setbit", "{\"offset\":1200000,\"value\":1}", NULL);
    assert_status(&w, 200);
    http_free(&w);
    /* the state now, then the same after a restart on a disk with room */
    long bit[NBIG], counter[NKEYS];
    for (int phase = 0; phase < 2; phase++) {
        if (phase == 1)
            restart_with_room(&p, base, mnt, dir, NULL);
        for (int b = 0; b < NBIG; b++) {
            http_resp_t r = httpf(&p, "GET", NULL, "/bits/big%d/getbit?offset=1200000", b);
            long v = (long)json_int_of(&r, "value");
            http_free(&r);
            if (phase == 0 && b == 0 && v != 1)
                fail_msg("big0 was set with room again, reads %ld", v);
            if (phase == 0)
                bit[b] = v;
            else if (v != bit[b])
                fail_msg("big%d after restart: %ld, before: %ld", b, v, bit[b]);
        }
        for (int i = 0; i < NKEYS; i++) {
            long_key(key, sizeof(key), i);
            http_resp_t r = httpf(&p, "GET", NULL, "/counter/%s", key);
            long v = r.status == 200 ? (long)json_int_of(&r, "value") : -1;
            http_free(&r);
            if (phase == 0)
                counter[i] = v;
            else if (v != counter[i])
                fail_msg("counter %d after restart: %ld, before: %ld", i, v, counter[i]);
        }
    }
    tally_cleanup(&p);
    unlink(p.log);
    tmpdir_remove(base);
}

/* A rate-limit batch through a policy is journaled with each item's
 * resolved key and parameters (THROTTLE.BATCH, cmd/throttle.h): with the
 * policy's long prefix in every key, several times the request's size, and
 * its bound is secured before anything is decided.  On a disk with room for
 * the request but not for that record, the batch is refused and nothing was
 * taken.  (Before, the router's twice-the-request reservation held, the
 * batch was decided, then its record hit the full disk: 503, yet taken.) */
static void test_canonical_record_space(void **state)
{
    (void)state;
    char base[256], mnt[300], dir[400], filler[400], cfgpath[300];
    if (!small_disk(base, sizeof(base), mnt, sizeof(mnt), "4m"))
        skip();
    snprintf(dir, sizeof(dir), "%s/data", mnt);
    snprintf(filler, sizeof(filler), "%s/filler", mnt);
    snprintf(cfgpath, sizeof(cfgpath), "%s/policies.json", base);
    FILE *f = fopen(cfgpath, "w");
    assert_non_null(f);
    fputs("{\"policies\": {\"w\": {\"algorithm\": \"fixed_window\", \"max_count\": 1, \"period\": 3600, \"prefix\": \"", f);
    for (int i = 0; i < 250; i++)
        fputc('w', f);
    fputs(":\"}}}", f);
    fclose(f);
    tally_proc_t p;
    tally_start(&p, dir, (const char *[]){ "--snapshot-interval", "0", "--journal-timeout", "1", "--config", cfgpath,
                                           NULL });
    enum { N = 3000 };
    char *batch = malloc(N * 40 + 32);
    assert_non_null(batch);
    size_t len = (size_t)sprintf(batch, "{\"requests\":[");
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(batch + len, "%s{\"policy\":\"w\",\"key\":\"k%04d\"}", i ? "," : "", i);
    strcpy(batch + len, "]}");
    /* room for the request (~2 x 84 KB) but not for its ~800 KB record */
    fill_disk(filler, 200 * 1024);
    http_resp_t r = http(&p, "POST", "/throttle", batch, NULL);
    assert_error(&r, 503, "UNAVAILABLE");
    http_free(&r);
    for (int phase = 0; phase < 2; phase++) {
        if (phase == 1)
            restart_with_room(&p, base, mnt, dir, (const char *[]){ "--config", cfgpath, NULL });
        for (int i = 0; i < N; i += N / 7) {
            char peek[96];
            snprintf(peek, sizeof(peek), "{\"policy\":\"w\",\"key\":\"k%04d\",\"quantity\":0}", i);
            r = http(&p, "POST", "/throttle", peek, NULL);
            assert_status(&r, 200);
            if (json_int_of(&r, "remaining") != 1)
                fail_msg("k%04d after a refused batch%s: %s", i, phase ? " and a restart" : "", r.body);
            http_free(&r);
        }
    }
    free(batch);
    tally_cleanup(&p);
    unlink(p.log);
    tmpdir_remove(base);
}

/* ------------------------------------------------------------------------ */
/* (h) fsync=everysec in the background                                     */
/* ------------------------------------------------------------------------ */

static long long unsynced_bytes(const tally_proc_t *p)
{
    json_t *info = http_get_json(p, "/info");
    json_t *v = json_object_get(json_object_get(info, "persistence"), "journal_unsynced_bytes");
    assert_true(json_is_integer(v));
    long long n = json_integer_value(v);
    json_decref(info);
    return n;
}

/* tally_threads_each: counts into ud[1] the threads whose nice is ud[0] */
static bool count_nice(void *ud, const char *fields)
{
    int *want_count = ud;
    const char *q = fields;   /* the space before field 3, the state */
    for (int field = 3; field < 19 && q; field++)
        q = strchr(q + 1, ' ');   /* the space before field + 1 */
    if (q && atoi(q + 1) == want_count[0])
        want_count[1]++;
    return true;
}

/* How many of the process's threads run at this nice value. */
static int threads_at_nice(pid_t pid, int nice)
{
    int want_count[2] = { nice, 0 };
    assert_true(tally_threads_each(pid, count_nice, want_count) > 0);
    return want_count[1];
}

/* Under everysec the journal's own thread, at nice 19, makes what requests
 * wrote durable within about a second, with nothing asking it to; under
 * "no" nothing is fdatasync'd until a snapshot or the exit, and the gauge
 * says so. */
static void test_everysec_syncs_in_background(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        const char *args[] = { "--fsync", mode == 0 ? "everysec" : "no", "--snapshot-interval", "0", NULL };
        tally_proc_t p;
        tally_start(&p, NULL, args);
        for (int i = 0; i < 200; i++) {
            long st;
            post_counter(&p, "bg", &st);
            assert_int_equal(st, 200);
        }
        long long left = unsynced_bytes(&p);
        if (mode == 0) {
            for (int t = 0; t < 60 && left != 0; t++) {
                usleep(50 * 1000);
                left = unsynced_bytes(&p);
            }
            assert_int_equal(left, 0);
            assert_int_equal(threads_at_nice(p.pid, 19), 1);
        } else {
            usleep(1500 * 1000);
            assert_true(unsynced_bytes(&p) >= left);
            assert_true(left > 0);
            assert_int_equal(threads_at_nice(p.pid, 19), 0);
        }
        assert_int_equal(counter_value(&p, "bg"), 200);
        assert_int_equal(tally_stop(&p), 0);
        tally_cleanup(&p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill9_loses_nothing_acknowledged),
        cmocka_unit_test(test_kill9_across_journal_windows),
        cmocka_unit_test(test_sigterm_restart_identical),
        cmocka_unit_test(test_torn_journal_tail_dropped),
        cmocka_unit_test(test_cut_or_flipped_tail_refused),
        cmocka_unit_test(test_zero_tail_dropped),
        cmocka_unit_test(test_damaged_journal_refused),
        cmocka_unit_test(test_snapshot_flipped_byte),
        cmocka_unit_test(test_snapshot_flipped_trailer),
        cmocka_unit_test(test_snapshot_bad_magic),
        cmocka_unit_test(test_snapshot_future_version),
        cmocka_unit_test(test_snapshot_empty),
        cmocka_unit_test(test_snapshot_truncated),
        cmocka_unit_test(test_snapshot_trailing_garbage),
        cmocka_unit_test(test_missing_middle_journal_refused),
        cmocka_unit_test(test_check_tool),
        cmocka_unit_test(test_unusable_directory),
        cmocka_unit_test(test_second_process_refused),
        cmocka_unit_test(test_large_record_survives),
        cmocka_unit_test(test_disk_full),
        cmocka_unit_test(test_start_on_full_disk),
        cmocka_unit_test(test_start_on_full_disk_space_returns),
        cmocka_unit_test(test_real_enospc),
        cmocka_unit_test(test_eviction_journal_space),
        cmocka_unit_test(test_canonical_record_space),
        cmocka_unit_test(test_everysec_syncs_in_background),
    };
    return cmocka_run_group_tests_name("durability (integration)", tests, NULL, NULL);
}
