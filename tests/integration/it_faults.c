/*
 * it_faults.c - the fault-injection suite (issue 12): what a hostile
 * operator does to a running tallyd and its data directory, each checked
 * against an exact model of what was acknowledged.
 *
 *   kill -9 at random instants under concurrent mixed writes (counters,
 *   bitmaps, Bloom filters, limiters) with snapshots running: after every
 *   restart each acknowledged write is there, and nothing but the one
 *   write each client had in flight may be extra.
 *
 *   The corruption matrix: snapshot, sealed older journals and the newest
 *   journal of one data directory, damaged every way (a flipped bit
 *   anywhere, a flipped length field, truncation at random lengths and at
 *   every record boundary, zero length, wrong magic).  Every variant must
 *   either be refused - the log names the file and an offset, the file is
 *   byte for byte unchanged, and `tallyd --check FILE` says DAMAGED too -
 *   or start with every acknowledged change.  The counts are printed (the
 *   durability page, docs/durability.md, quotes them).
 *
 *   Mixed load with snapshots, SIGHUP reloads and metrics scrapes: the run
 *   ThreadSanitizer watches in `make test`.
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/rng.h"
#include "tests/integration/harness.h"

static bool slow_build(void) { return getenv("TALLY_SLOW") != NULL; }

static long counter_of(const tally_proc_t *p, const char *key)
{
    char path[128];
    snprintf(path, sizeof(path), "/counter/%s", key);
    http_resp_t r = http(p, "GET", path, NULL, NULL);
    assert_status(&r, 200);
    long v = (long)json_int_of(&r, "value");
    http_free(&r);
    return v;
}

/* ------------------------------------------------------------------------ */
/* kill -9 at random instants                                               */
/* ------------------------------------------------------------------------ */

#define WRITERS 4
#define MAXOPS 20000

struct writer {
    tally_proc_t *p;
    int id;
    _Atomic int *stop;
    rng_t rng;
    /* the model: what this writer had acknowledged, across every cycle */
    long counter_acked;          /* POST /counter/wN {"by":1} */
    long counter_inflight;       /* 1 while a request is unanswered */
    int bits_acked[MAXOPS];      /* offsets set by acknowledged setbit */
    int nbits;
    int bloom_acked[MAXOPS];     /* items acknowledged as added */
    int nbloom;
    int next_item;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    char path[64], body[128];
    while (!atomic_load(w->stop) && w->nbits < MAXOPS && w->nbloom < MAXOPS) {
        int kind = (int)rng_below(&w->rng, 3);
        http_resp_t r;
        if (kind == 0) {
            snprintf(path, sizeof(path), "/counter/w%d", w->id);
            w->counter_inflight = 1;
            r = http(w->p, "POST", path, "{\"by\":1}", NULL);
            if (r.status == 200) {
                w->counter_acked++;
                w->counter_inflight = 0;
            }
        } else if (kind == 1) {
            int off = w->next_item++;
            snprintf(path, sizeof(path), "/bits/b%d/setbit", w->id);
            snprintf(body, sizeof(body), "{\"offset\":%d,\"value\":1}", off);
            r = http(w->p, "POST", path, body, NULL);
            if (r.status == 200)
                w->bits_acked[w->nbits++] = off;
        } else {
            int item = w->next_item++;
            snprintf(path, sizeof(path), "/bloom/f%d", w->id);
            snprintf(body, sizeof(body), "{\"items\":[\"i%d\"]}", item);
            r = http(w->p, "POST", path, body, NULL);
            if (r.status == 200)
                w->bloom_acked[w->nbloom++] = item;
        }
        long st = r.status;
        http_free(&r);
        if (st <= 0)
            break;   /* the server is gone */
        if (st != 200)
            fail_msg("writer %d: unexpected status %ld", w->id, st);
    }
    return NULL;
}

/* Every acknowledged change of every writer is present. */
static void check_model(const tally_proc_t *p, struct writer *ws, long *checked)
{
    char path[96];
    for (int i = 0; i < WRITERS; i++) {
        struct writer *w = &ws[i];
        char key[16];
        snprintf(key, sizeof(key), "w%d", i);
        long v = counter_of(p, key);
        if (v < w->counter_acked || v > w->counter_acked + w->counter_inflight)
            fail_msg("counter w%d: %ld acknowledged (+%ld in flight), %ld after restart", i, w->counter_acked,
                     w->counter_inflight, v);
        /* a write in flight at the kill that did land counts as acknowledged from now on */
        w->counter_acked = v;
        w->counter_inflight = 0;
        (*checked)++;
        if (w->nbits) {
            /* the bitmap's bytes (Redis bit order: bit 0 is the top bit of byte 0) */
            snprintf(path, sizeof(path), "/bits/b%d", i);
            http_resp_t r = http(p, "GET", path, NULL, NULL);
            assert_status(&r, 200);
            for (int k = 0; k < w->nbits; k++) {
                int off = w->bits_acked[k];
                if ((size_t)(off / 8) >= r.len || !(((unsigned char)r.body[off / 8] >> (7 - off % 8)) & 1))
                    fail_msg("bit %d of b%d was acknowledged and is gone", off, i);
                (*checked)++;
            }
            http_free(&r);
        }
        for (int k0 = 0; k0 < w->nbloom; k0 += 1000) {
            /* no false negatives: every acknowledged item must be reported */
            size_t cap = 16 + 16 * 1000, n = 0;
            char *body = malloc(cap);
            n += (size_t)snprintf(body + n, cap - n, "{\"items\":[");
            int k1 = k0 + 1000 < w->nbloom ? k0 + 1000 : w->nbloom;
            for (int k = k0; k < k1; k++)
                n += (size_t)snprintf(body + n, cap - n, "%s\"i%d\"", k > k0 ? "," : "", w->bloom_acked[k]);
            snprintf(body + n, cap - n, "]}");
            snprintf(path, sizeof(path), "/bloom/f%d/exists", i);
            http_resp_t r = http(p, "POST", path, body, NULL);
            assert_status(&r, 200);
            json_t *ex = json_object_get(r.json, "exists");
            for (int k = k0; k < k1; k++) {
                if (!json_is_true(json_array_get(ex, (size_t)(k - k0))))
                    fail_msg("item i%d of f%d was acknowledged and is gone", w->bloom_acked[k], i);
                (*checked)++;
            }
            http_free(&r);
            free(body);
        }
    }
}

static void test_kill9_random_instants(void **state)
{
    (void)state;
    int cycles = slow_build() ? 6 : 12;
    static struct writer ws[WRITERS];
    memset(ws, 0, sizeof(ws));
    rng_t rng;
    rng_seed(&rng, 12);
    tally_proc_t p;
    char dir[256];
    tmpdir_make(dir, sizeof(dir));
    long acked_total = 0, checked = 0;
    int64_t t_start = (int64_t)time(NULL);
    for (int c = 0; c < cycles; c++) {
        const char *fsync = c % 2 ? "always" : "everysec";
        tally_start(&p, dir, (const char *[]){ "--fsync", fsync, "--snapshot-interval", "1", NULL });
        if (c > 0)
            check_model(&p, ws, &checked);
        _Atomic int stop = 0;
        pthread_t th[WRITERS];
        tally_proc_t copies[WRITERS];   /* the writers' view: tally_kill changes p */
        for (int i = 0; i < WRITERS; i++) {
            copies[i] = p;
            ws[i].p = &copies[i];
            ws[i].id = i;
            ws[i].stop = &stop;
            if (c == 0)
                rng_seed(&ws[i].rng, 100 + (uint64_t)i);
            pthread_create(&th[i], NULL, writer_main, &ws[i]);
        }
        /* a random instant: also inside snapshots, rotations and seals */
        usleep((useconds_t)(50000 + rng_below(&rng, 400000)));
        tally_kill(&p);
        atomic_store(&stop, 1);
        for (int i = 0; i < WRITERS; i++)
            pthread_join(th[i], NULL);
    }
    /* and a kill while the data is being loaded */
    tally_start_nowait(&p, dir, NULL);
    usleep(2000);
    tally_kill(&p);
    tally_start(&p, dir, NULL);
    check_model(&p, ws, &checked);
    for (int i = 0; i < WRITERS; i++)
        acked_total += ws[i].counter_acked + ws[i].nbits + ws[i].nbloom;
    char *log = tally_log(&p);
    assert_null(strstr(log, "damaged"));
    free(log);
    printf("    %d kill -9 cycles (fsync always/everysec, snapshots every second) in %lld s: %ld acknowledged "
           "writes, %ld checks after restarts, 0 lost\n",
           cycles, (long long)((int64_t)time(NULL) - t_start), acked_total, checked);
    tally_cleanup(&p);
    unlink(p.log);
    tmpdir_remove(dir);
}

/* ------------------------------------------------------------------------ */
/* The corruption matrix                                                    */
/* ------------------------------------------------------------------------ */

#define PER_FILE 10   /* increments held by each file */

/* snapshot.tly (10), sealed journals (10 each, and an empty one created by
 * the snapshot), the newest journal left by kill -9 (10, then reserved
 * zeros): 40 acknowledged increments. */
static void build_dir(char *dir, size_t n)
{
    tally_proc_t p;
    tally_start(&p, NULL, (const char *[]){ "--snapshot-interval", "0", NULL });
    snprintf(dir, n, "%s", p.dir);
    for (int round = 0; round < 4; round++) {
        if (round > 0)
            tally_start(&p, dir, (const char *[]){ "--snapshot-interval", "0", NULL });
        for (int i = 0; i < PER_FILE; i++) {
            http_resp_t r = http(&p, "POST", "/counter/c", "{\"by\":1}", NULL);
            assert_status(&r, 200);
            http_free(&r);
        }
        if (round == 0) {
            http_resp_t r = http(&p, "POST", "/admin/snapshot", NULL, NULL);
            assert_status(&r, 200);
            http_free(&r);
        }
        tally_kill(&p);
    }
}

typedef struct outcome {
    int refused, started_ok, lost, check_disagrees;
} outcome_t;

/* Starts tallyd on the directory: true when it refused (and then the log
 * must name the file and an offset), false when it started (then *value
 * is the counter). */
static bool start_or_refuse(const char *dir, const char *file, long *value, char *why, size_t wn)
{
    tally_proc_t p;
    int rc = tally_start_or_exit(&p, dir, (const char *[]){ "--snapshot-interval", "0", "--journal", "off", NULL });
    if (rc >= 0) {
        char *log = tally_log(&p);
        const char *m = strstr(log + p.log_start, "ERROR");
        snprintf(why, wn, "%.300s", m ? m : log + p.log_start);
        if (rc == 0 || !strstr(log + p.log_start, file) || !strstr(log + p.log_start, "offset"))
            fail_msg("refusal (exit %d) does not name %s and an offset:\n%s", rc, file, log + p.log_start);
        free(log);
        unlink(p.log);
        return true;
    }
    *value = counter_of(&p, "c");
    tally_kill(&p);
    unlink(p.log);
    why[0] = '\0';
    return false;
}

/* One damaged variant of `path` (original bytes orig/olen): written, tried,
 * restored. */
static void try_variant(const char *dir, const char *path, const char *orig, size_t olen, const char *data,
                        size_t len, outcome_t *o, const char *what)
{
    file_write(path, data, len);
    long v = 0;
    char why[320];
    bool refused = start_or_refuse(dir, path, &v, why, sizeof(why));
    int check = tally_check(path, NULL, 0);
    if (refused) {
        o->refused++;
        if (!file_equals(path, data, len))
            fail_msg("%s: %s was modified by a refused start", what, path);
        if (check != 1) {
            o->check_disagrees++;
            fail_msg("%s: start-up refused %s (%s) but --check exits %d", what, path, why, check);
        }
    } else {
        o->started_ok++;
        if (v != 4 * PER_FILE) {
            o->lost++;
            fail_msg("%s: %s started with %ld of %d acknowledged increments", what, path, v, 4 * PER_FILE);
        }
        if (check != 0) {
            o->check_disagrees++;
            fail_msg("%s: start-up accepted %s but --check exits %d", what, path, check);
        }
    }
    file_write(path, orig, olen);
}

static void damage_file(const char *dir, const char *name, bool journal, rng_t *rng, outcome_t *o)
{
    char path[400];
    snprintf(path, sizeof(path), "%.255s/%.60s", dir, name);
    size_t olen;
    char *orig = file_read(path, &olen);
    assert_non_null(orig);
    char *d = malloc(olen + 16);
    size_t frames[256];
    size_t nf = journal ? journal_frames(orig, olen, frames, 255) : 0;
    size_t data_end = journal ? frames[nf] : olen;
    char what[128];
    /* a flipped bit anywhere in the data (and a little of the reserve) */
    for (int i = 0; i < 24; i++) {
        size_t at = (size_t)rng_below(rng, data_end + (olen > data_end ? 64 : 0));
        if (at >= olen)
            continue;
        memcpy(d, orig, olen);
        d[at] ^= (char)(1u << rng_below(rng, 8));
        snprintf(what, sizeof(what), "%.60s: bit flip at %zu", name, at);
        try_variant(dir, path, orig, olen, d, olen, o, what);
    }
    /* a flipped bit in every record's length field */
    for (size_t k = 0; k < nf; k++) {
        memcpy(d, orig, olen);
        d[frames[k] + rng_below(rng, 3)] ^= (char)(1u << rng_below(rng, 8));
        snprintf(what, sizeof(what), "%.60s: length field of record %zu", name, k);
        try_variant(dir, path, orig, olen, d, olen, o, what);
    }
    /* truncation at random lengths, and at every record boundary */
    for (int i = 0; i < 12; i++) {
        size_t cut = (size_t)rng_below(rng, data_end);
        snprintf(what, sizeof(what), "%.60s: cut at %zu", name, cut);
        try_variant(dir, path, orig, olen, orig, cut, o, what);
    }
    for (size_t k = 0; k < nf; k++) {
        snprintf(what, sizeof(what), "%.60s: cut at record boundary %zu", name, frames[k]);
        try_variant(dir, path, orig, olen, orig, frames[k], o, what);
    }
    /* the newest journal's reserved space: a stray byte in it, or the file
     * cut inside it, loses nothing (and is not refused) */
    for (int i = 0; olen > data_end + 4096 && i < 4; i++) {
        size_t at = data_end + 8 + (size_t)rng_below(rng, olen - data_end - 8);
        memcpy(d, orig, olen);
        d[at] = 0x5a;
        snprintf(what, sizeof(what), "%.60s: stray byte in the reserved space at %zu", name, at);
        try_variant(dir, path, orig, olen, d, olen, o, what);
        size_t cut = data_end + 1 + (size_t)rng_below(rng, olen - data_end - 1);
        snprintf(what, sizeof(what), "%.60s: cut in the reserved space at %zu", name, cut);
        try_variant(dir, path, orig, olen, orig, cut, o, what);
    }
    try_variant(dir, path, orig, olen, orig, 0, o, "zero length");
    memcpy(d, orig, olen);
    memcpy(d, "XALLYXXX", 8);
    snprintf(what, sizeof(what), "%.60s: wrong magic", name);
    try_variant(dir, path, orig, olen, d, olen, o, what);
    free(d);
    free(orig);
}

static void test_corruption_matrix(void **state)
{
    (void)state;
    char dir[256];
    build_dir(dir, sizeof(dir));
    /* the directory is as described above */
    long v = 0;
    char why[320];
    assert_false(start_or_refuse(dir, "-", &v, why, sizeof(why)));
    assert_int_equal(v, 4 * PER_FILE);
    rng_t rng;
    rng_seed(&rng, 2026);
    /* every file of the directory: the snapshot, the sealed journals, the
     * newest one (left by kill -9, with its reserved space) */
    char names[16][64];
    int nfiles = 0;
    DIR *dd = opendir(dir);
    struct dirent *de;
    while ((de = readdir(dd)) && nfiles < 16)
        if (strcmp(de->d_name, "snapshot.tly") == 0 || strncmp(de->d_name, "journal.", 8) == 0)
            snprintf(names[nfiles++], sizeof(names[0]), "%.60s", de->d_name);
    closedir(dd);
    qsort(names, (size_t)nfiles, sizeof(names[0]), (int (*)(const void *, const void *))strcmp);
    assert_true(nfiles >= 4);
    outcome_t total = { 0 };
    for (int f = 0; f < nfiles; f++) {
        outcome_t o = { 0 };
        bool journal = names[f][0] == 'j';
        damage_file(dir, names[f], journal, &rng, &o);
        char path[400];
        snprintf(path, sizeof(path), "%.255s/%.60s", dir, names[f]);
        struct stat sb;
        stat(path, &sb);
        printf("    %-24s (%7lld bytes) %3d variants: %3d refused (file + offset named, file unchanged, --check "
               "agrees), %3d started with all %d acknowledged increments, %d with data lost\n",
               names[f], (long long)sb.st_size, o.refused + o.started_ok, o.refused, o.started_ok, 4 * PER_FILE,
               o.lost);
        total.refused += o.refused;
        total.started_ok += o.started_ok;
        total.lost += o.lost;
    }
    printf("    corruption matrix: %d variants, %d refused, %d started intact, %d started with acknowledged data "
           "lost\n",
           total.refused + total.started_ok, total.refused, total.started_ok, total.lost);
    assert_int_equal(total.lost, 0);
    char logp[300];
    snprintf(logp, sizeof(logp), "%s.log", dir);
    unlink(logp);
    tmpdir_remove(dir);
}

/* ------------------------------------------------------------------------ */
/* Mixed load with snapshots, reloads and scrapes (the TSan run)            */
/* ------------------------------------------------------------------------ */

struct loader {
    tally_proc_t *p;
    int id;
    _Atomic int *stop;
    long ok;
};

static void *load_main(void *arg)
{
    struct loader *l = arg;
    char path[96], body[160];
    for (int i = 0; !atomic_load(l->stop); i++) {
        http_resp_t r;
        switch ((i + l->id) % 6) {
        case 0:
            r = http(l->p, "POST", "/counter/mix", "{\"by\":1}", NULL);   /* two threads on one key */
            break;
        case 1:
            snprintf(body, sizeof(body), "{\"items\":[\"u%d\",\"v%d\"]}", i, l->id);
            r = http(l->p, "POST", "/uv/mixuv", body, NULL);
            break;
        case 2:
            r = http(l->p, "GET", "/uv/mixuv", NULL, NULL);
            break;
        case 3:
            snprintf(path, sizeof(path), "/hook/api/t%d", i % 7);
            r = http(l->p, "GET", path, NULL, NULL);
            break;
        case 4:
            snprintf(body, sizeof(body), "{\"offset\":%d,\"value\":1}", i % 5000);
            r = http(l->p, "POST", "/bits/mixb/setbit", body, NULL);
            break;
        default:
            r = http(l->p, "GET", "/metrics", NULL, NULL);
            break;
        }
        if (r.status > 0 && r.status < 500)
            l->ok++;
        http_free(&r);
    }
    return NULL;
}

static void test_mixed_load_snapshots_reloads(void **state)
{
    (void)state;
    char cfg[300];
    tmpdir_make(cfg, sizeof(cfg) - 20);
    strcat(cfg, "/p.json");
    static const char policies[] = "{\"policies\":{\"api\":{\"algorithm\":\"gcra\",\"key\":\"{path}\",\"max_burst\":100,"
                                   "\"count_per_period\":10,\"period\":1}}}";
    file_write(cfg, policies, sizeof(policies) - 1);
    tally_proc_t p;
    tally_start(&p, NULL, (const char *[]){ "--config", cfg, "--snapshot-interval", "1", NULL });
    _Atomic int stop = 0;
    enum { N = 4 };
    struct loader ls[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        ls[i] = (struct loader){ &p, i, &stop, 0 };
        pthread_create(&th[i], NULL, load_main, &ls[i]);
    }
    int seconds = slow_build() ? 4 : 3;
    int bad_status = 0;   /* checked once the loaders have stopped: they use this frame */
    for (int t = 0; t < seconds * 5 && !bad_status; t++) {
        usleep(200 * 1000);
        kill(p.pid, SIGHUP);
        if (t % 3 == 0) {
            http_resp_t r = http(&p, "POST", "/admin/snapshot", NULL, NULL);
            if (r.status != 200 && r.status != 503)
                bad_status = r.status ? r.status : -1;
            http_free(&r);
        }
    }
    atomic_store(&stop, 1);
    long ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += ls[i].ok;
    }
    if (bad_status) {
        char *log = tally_log(&p);
        fail_msg("POST /admin/snapshot answered %d (-1: no answer); tallyd's log:\n%s", bad_status, log ? log : "");
    }
    printf("    mixed load: %ld requests answered during %d s of snapshots and SIGHUP reloads\n", ok, seconds);
    assert_true(ok > 100);
    long mix = counter_of(&p, "mix");
    assert_int_equal(tally_stop(&p), 0);
    tally_start(&p, p.dir, NULL);
    assert_int_equal(counter_of(&p, "mix"), mix);
    p.own_dir = true;
    tally_cleanup(&p);   /* fails on any sanitizer report in the log */
    unlink(cfg);
    *strrchr(cfg, '/') = '\0';
    tmpdir_remove(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_load_snapshots_reloads),
        cmocka_unit_test(test_corruption_matrix),
        cmocka_unit_test(test_kill9_random_instants),
    };
    return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}
