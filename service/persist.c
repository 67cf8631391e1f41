/* persist.c - see persist.h for the files and the protocol. */
#include "service/file.h"
#include "service/persist.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "api/api.h"
#include "cmd/def.h"
#include "core/keyspace.h"
#include "core/persist_fmt.h"
#include "core/types.h"
#include "service/clock.h"
#include "service/journal.h"
#include "service/log.h"

#define SNAPSHOT_NAME "snapshot.tly"
#define SNAPSHOT_TMP "snapshot.tly.tmp"
#define LOCK_NAME "LOCK"
#define SNAP_DRAIN_BUDGET (256 * 1024)    /* bytes encoded per shard-lock hold */
#define SNAP_WRITEBACK_STEP (16u << 20)  /* bytes written between writeback starts */

struct persist {
    char dir[512];
    cmd_server_t *srv;
    ks_t *ks;
    bool journal_on;
    fsync_mode_t fsync;
    int journal_wait_ms;                  /* a request waits this long for a failing disk */
    int snapshot_interval;
    int lock_fd;
    /* The journal: set once at start - or, when tallyd started on a full
     * disk, by the housekeeping once space returns (hence atomic: request
     * threads read it unlocked).  NULL with journal_on: waiting for space,
     * every change refused before it is applied. */
    _Atomic(journal_t *) j;
    uint64_t next_seq;                    /* journal seq a snapshot taken now would start at (journal off, or the
                                             journal not started yet) */
    /* A start on a full disk (under snap_mu after persist_open): the seal
     * of a journal a crash left open, and the new journal, wait for space. */
    bool seal_deferred;
    uint64_t seal_seq;
    journal_scan_t seal_sc;
    int64_t deferred_log_ns;              /* when the wait was last logged */
    _Atomic uint64_t dirty;
    pthread_mutex_t snap_mu;
    _Atomic int64_t last_snapshot_mono;   /* written by whoever snapshots, read by persist_tick */
    int64_t last_tick_sec;
    pthread_t periodic;                   /* the periodic snapshot's thread (persist_tick) ... */
    bool periodic_running;                /* ... started and not yet joined */
    _Atomic bool periodic_done;           /* ... and finished */
    /* last snapshot outcome, under snap_mu */
    bool have_last;
    snapshot_stats_t last;
    bool last_ok;
    char last_err[256];
    uint64_t snapshots_ok, snapshots_failed;
    int64_t load_ns;
    uint64_t loaded_keys, replayed_records;
    uint64_t journal_epoch;               /* the highest epoch record replayed at start */
    _Atomic uint64_t epoch;               /* written again into each journal a snapshot starts */
    /* closes and opens the data routes around a replica's load (server_set_loading) */
    void (*load_gate)(void *ud, bool loading);
    void *load_gate_ud;
};

/* ------------------------------------------------------------------------ */
/* Files                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct mapped {
    uint8_t *p;
    size_t len;
} mapped_t;

static int map_file(const char *path, mapped_t *m)
{
    m->p = NULL;
    m->len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    m->len = (size_t)sb.st_size;
    if (m->len > 0) {
        void *p = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return e;
        }
        madvise(p, m->len, MADV_SEQUENTIAL);
        m->p = p;
    }
    close(fd);
    return 0;
}

static void unmap_file(mapped_t *m)
{
    if (m->p)
        munmap(m->p, m->len);
    m->p = NULL;
}

static void journal_path(const persist_t *p, uint64_t seq, char *out, size_t n)
{
    snprintf(out, n, "%s/journal.%010" PRIu64 ".tlj", p->dir, seq);
}

static bool parse_journal_name(const char *name, uint64_t *seq)
{
    unsigned long long s;
    int used = 0;
    if (sscanf(name, "journal.%llu.tlj%n", &s, &used) != 1 || name[used] != '\0' || s == 0)
        return false;
    *seq = s;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The journal sequence numbers present, sorted. */
static int list_journals(const persist_t *p, uint64_t **out, size_t *n)
{
    DIR *d = opendir(p->dir);
    if (!d)
        return errno;
    uint64_t *v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t seq;
        if (!parse_journal_name(de->d_name, &seq))
            continue;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            uint64_t *nv = realloc(v, cap * sizeof(*v));
            if (!nv) {
                free(v);
                closedir(d);
                return ENOMEM;
            }
            v = nv;
        }
        v[cnt++] = seq;
    }
    closedir(d);
    if (cnt)
        qsort(v, cnt, sizeof(*v), cmp_u64);
    *out = v;
    *n = cnt;
    return 0;
}

/* Creates journal.<seq>.tlj with its header, synced with its directory.  The
 * header is written to a temporary name first and renamed, so a journal file
 * always has its header: a journal without one is damage, never "a crash
 * while creating it".  0, or the errno with err set. */
static int create_journal(persist_t *p, uint64_t seq, int *fd_out, char *err, size_t errlen)
{
    char path[600], tmp[640];
    journal_path(p, seq, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    unlink(tmp);
    /* read-write: the journal writes through a shared mapping */
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, FILE_MODE_PRIVATE);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot create journal %s: %s", tmp, strerror(e));
        return e;
    }
    wbuf_t b = WBUF_INIT;
    journal_header_t h = { JOURNAL_VERSION, 0, seq };
    journalfmt_put_header(&b, &h);
    int e = b.oom ? ENOMEM : file_write_all(fd, b.data, b.len);
    wbuf_free(&b);
    /* the first page reserved before the file is visible: a journal of
     * fewer bytes was cut (core/persist_fmt.h) */
    if (!e)
        e = posix_fallocate(fd, 0, JOURNAL_PAGE);
    if (!e && fdatasync(fd) != 0)
        e = errno;
    if (!e && access(path, F_OK) == 0)
        e = EEXIST;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (!e)
        e = file_fsync_dir(p->dir);
    if (e) {
        snprintf(err, errlen, "cannot write journal %s: %s", path, strerror(e));
        close(fd);
        unlink(tmp);
        return e;
    }
    *fd_out = fd;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */

static const char *const DAMAGE_HELP =
    "tallyd will not start on damaged data and has not modified the file. Inspect it with "
    "`tallyd --check FILE`; then restore it from a backup, or move it out of the data directory "
    "to start without what it holds";

/* snapfmt_scan callback of the loader: decodes and adds one key. */
static const char *load_record(void *ud, size_t off, const snap_record_t *r)
{
    (void)off;
    persist_t *p = ud;
    const ks_type_t *t = ks_type_by_tag(r->tag);
    if (!t)
        return "unknown type tag (written by a newer tally?)";
    const char *why = NULL;
    void *v = t->decode(r->value, r->vlen, &why);
    if (!v)
        return why ? why : "value does not decode";
    ks_key_t k = ks_key(p->ks, r->key, r->klen);
    ks_shard_t *sh = ks_shard_at(p->ks, k.shard);
    ks_shard_lock(sh);
    /* expired entries are kept: journal records before their expiry may read them */
    bool dup = ks_find(p->ks, &k, INT64_MIN) != NULL;
    ks_entry_t *ent = dup ? NULL : ks_add(p->ks, &k, t, v, r->expire_ms, clock_now_ns() / 1000000);
    ks_shard_unlock(sh);
    if (!ent) {
        t->free(v);
        return dup ? "duplicate key" : "out of memory";
    }
    return NULL;
}

/* Loads snapshot.tly (if any) into the keyspace; *seq receives its
 * journal_seq (0 when there is no snapshot). */
static bool load_snapshot(persist_t *p, uint64_t *seq, char *err, size_t errlen)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", p->dir, SNAPSHOT_NAME);
    *seq = 0;
    mapped_t m;
    int e = map_file(path, &m);
    if (e == ENOENT)
        return true;
    if (e) {
        snprintf(err, errlen, "cannot read snapshot %s: %s", path, strerror(e));
        return false;
    }
    snap_scan_t sc;
    bool ok = snapfmt_scan(m.p, m.len, load_record, p, &sc);
    if (ok) {
        *seq = sc.h.journal_seq;
        p->loaded_keys = sc.records;
        log_info("loaded snapshot %s: %" PRIu64 " keys, %zu bytes, taken at %" PRId64 " ms", path, sc.records,
                 m.len, sc.h.created_ms);
    } else {
        snprintf(err, errlen, "snapshot %s is damaged at offset %zu: %s. %s", path, sc.bad_off, sc.why, DAMAGE_HELP);
    }
    unmap_file(&m);
    return ok;
}

static const char *replay_header(void *hctx, const char *name)
{
    (void)hctx;
    (void)name;
    return NULL;
}

struct replay_ctx {
    persist_t *p;
    const char *path;
    const journal_scan_t *sc;   /* its header is read before the first record */
};

void persist_replay_request(cmd_server_t *srv, const journal_req_t *q, unsigned gen, const char *where, size_t off)
{
    if (q->kind == JOURNAL_REC_COMMAND) {
        /* an operation of the command table, run directly (cmd/def.h) */
        cmd_err_t err;
        if (!cmd_replay(srv, q, gen, &err)) {
            const cmd_def_t *def = cmd_def_by_id(q->op);
            log_warn("%s offset %zu: %s replayed with an error: %s", where, off, def ? def->name : "an operation",
                     err.message);
        }
        return;
    }
    if (journalfmt_is_epoch(q))
        return;   /* not a request: the caller reads it (persist_open, the replica) */
    char ctype[256];
    size_t cl = q->ctype_len < sizeof(ctype) - 1 ? q->ctype_len : sizeof(ctype) - 1;
    memcpy(ctype, q->ctype, cl);
    ctype[cl] = '\0';
    api_req_t req;
    api_req_init(&req, (api_method_t)q->method, q->path, q->path_len, q->now_ns);
    req.query = q->query;
    req.query_len = q->query_len;
    req.ctype = cl ? ctype : NULL;
    req.body = q->body;
    req.body_len = q->body_len;
    req.header = replay_header;
    req.replay = true;
    req.gen = gen;
    api_resp_t resp;
    api_dispatch(srv, &req, &resp);
    if (resp.status >= 400)
        log_warn("%s offset %zu: %s %.*s replayed with status %d: %.*s", where, off, api_method_name(req.method),
                 (int)q->path_len, q->path, resp.status, (int)resp.len, resp.body ? resp.body : "");
    api_resp_release(&resp);
    api_req_release(&req);
}

bool persist_record_known(const journal_req_t *q)
{
    return q->kind != JOURNAL_REC_REQUEST || (q->method >= API_GET && q->method <= API_OTHER);
}

/* journalfmt_scan callback of the loader: re-executes one request. */
static const char *replay_record(void *ud, size_t off, const journal_req_t *q)
{
    struct replay_ctx *c = ud;
    if (!persist_record_known(q))
        return "unknown method in record";
    char where[640];
    snprintf(where, sizeof(where), "journal %s", c->path);
    uint64_t epoch;
    if (journalfmt_epoch_parse(q, &epoch) && epoch > c->p->journal_epoch)
        c->p->journal_epoch = epoch;
    persist_replay_request(c->p->srv, q, journalfmt_generation(&c->sc->h), where, off);   /* the rules that served it */
    return NULL;
}

/* What a scan found past the last record, in words that say whether anything
 * was lost (nothing, in every case that is accepted). */
static void describe_end(const journal_scan_t *s, char *out, size_t n)
{
    switch (s->end) {
    case JEND_SEALED:
        snprintf(out, n, "sealed at offset %zu (next journal %" PRIu64 ")", s->data_end, s->next_seq);
        break;
    case JEND_RESERVE:
        snprintf(out, n, "not sealed (the process stopped without closing it); %zu bytes of unused reserved "
                 "space after offset %zu, nothing lost", s->tail_bytes, s->data_end);
        break;
    case JEND_TORN:
        snprintf(out, n, "a write interrupted by a crash at offset %zu (%zu bytes incl. reserved space): a change "
                 "that was never acknowledged, dropped", s->data_end, s->tail_bytes);
        break;
    case JEND_EOF:
        snprintf(out, n, "not sealed, ends at offset %zu", s->data_end);
        break;
    }
}

/* Does the journal file hold any record (or anything that is not one)?
 * Decides whether the journal before it counts as the newest. */
static bool journal_has_records(const char *path)
{
    mapped_t m;
    if (map_file(path, &m) != 0)
        return true;   /* unreadable: treat as holding data, so we refuse */
    journal_scan_t sc;
    bool has = !journalfmt_scan(m.p, m.len, NULL, NULL, &sc) || sc.records > 0;
    unmap_file(&m);
    return has;
}

/* Replays one journal file.  `newest` says no later file holds records (a
 * torn last record is allowed only there).  *sc receives the scan. */
static bool replay_journal(persist_t *p, uint64_t seq, bool newest, journal_scan_t *sc, size_t *len, char *err,
                           size_t errlen)
{
    char path[600];
    journal_path(p, seq, path, sizeof(path));
    mapped_t m;
    int e = map_file(path, &m);
    if (e) {
        snprintf(err, errlen, "cannot read journal %s: %s", path, strerror(e));
        return false;
    }
    *len = m.len;
    struct replay_ctx c = { p, path, sc };
    bool ok = journalfmt_scan(m.p, m.len, replay_record, &c, sc);
    if (ok && sc->h.seq != seq) {
        ok = sc->ok = false;
        sc->bad_off = 0;
        sc->why = "header sequence number does not match the file name";
    }
    ok = ok && journalfmt_check_place(sc, m.len, newest);
    if (ok) {
        char end[256];
        describe_end(sc, end, sizeof(end));
        p->replayed_records += sc->records;
        if (sc->end == JEND_TORN)
            log_warn("replayed journal %s: %" PRIu64 " records; %s", path, sc->records, end);
        else
            log_info("replayed journal %s: %" PRIu64 " records; %s", path, sc->records, end);
    } else {
        snprintf(err, errlen, "journal %s is damaged at offset %zu: %s. %s", path, sc->bad_off, sc->why,
                 DAMAGE_HELP);
    }
    unmap_file(&m);
    return ok;
}

/* Closes a journal left open by a crash: the seal goes where its data ends
 * (over a torn record and the unused reserve), the file is cut there and
 * synced.  Layout-1 files (journal version 1) are only cut. */
static int seal_journal(persist_t *p, uint64_t seq, const journal_scan_t *sc, char *err, size_t errlen)
{
    char path[600];
    journal_path(p, seq, path, sizeof(path));
    int fd = open(path, O_RDWR | O_CLOEXEC);
    int e = fd < 0 ? errno : 0;
    uint64_t end = sc->data_end;
    if (!e && journalfmt_layout(&sc->h) == JOURNAL_LAYOUT_2) {
        wbuf_t b = WBUF_INIT;
        journalfmt_put_seal(&b, sc->records, sc->data_end, seq + 1);
        e = b.oom ? ENOMEM : (pwrite(fd, b.data, b.len, (off_t)end) == (ssize_t)b.len ? 0 : (errno ? errno : EIO));
        end += b.len;
        wbuf_free(&b);
    }
    if (!e && ftruncate(fd, (off_t)end) != 0)
        e = errno;
    if (!e && fdatasync(fd) != 0)
        e = errno;
    if (fd >= 0)
        close(fd);
    if (e)
        snprintf(err, errlen, "cannot seal journal %s: %s", path, strerror(e));
    return e;
}

/* Errors that mean "no room on the device", which may pass. */
static bool space_error(int e) { return e == ENOSPC || e == EDQUOT || e == EFBIG; }

/* Starts the journal at p->next_seq, sealing first a journal a crash left
 * open whose seal had to wait; 0 or the errno with err set. */
static int journal_start(persist_t *p, char *err, size_t errlen)
{
    if (p->seal_deferred) {
        int e = seal_journal(p, p->seal_seq, &p->seal_sc, err, errlen);
        if (e)
            return e;
        p->seal_deferred = false;
    }
    int fd;
    int e = create_journal(p, p->next_seq, &fd, err, errlen);
    if (e)
        return e;
    journal_t *j = journal_create(fd, p->next_seq, p->fsync);
    if (!j) {
        char path[600];
        journal_path(p, p->next_seq, path, sizeof(path));
        close(fd);
        unlink(path);
        snprintf(err, errlen, "out of memory");
        return ENOMEM;
    }
    p->j = j;
    return 0;
}

/* The answer of a change refused while the journal waits for space. */
static const char NO_JOURNAL[] = "tallyd started on a full disk and has no journal yet; changes are taken again once "
                                 "there is space";

persist_t *persist_open(const tally_opts_t *o, cmd_server_t *srv, char *err, size_t errlen)
{
    int64_t t0 = clock_mono_ns();
    persist_t *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(p->dir, sizeof(p->dir), "%s", o->data_dir);
    p->srv = srv;
    p->ks = srv->ks;
    p->journal_on = o->journal;
    p->fsync = o->fsync;
    p->journal_wait_ms = o->journal_timeout * 1000;
    p->snapshot_interval = o->snapshot_interval;
    p->lock_fd = -1;
    pthread_mutex_init(&p->snap_mu, NULL);

    if (mkdir(p->dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create data directory %s: %s", p->dir, strerror(errno));
        goto fail;
    }
    struct stat dsb;
    if (stat(p->dir, &dsb) != 0 || !S_ISDIR(dsb.st_mode)) {
        snprintf(err, errlen, "data directory %s exists and is not a directory", p->dir);
        goto fail;
    }
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", p->dir, LOCK_NAME);
    p->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, FILE_MODE_PRIVATE);
    if (p->lock_fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s (is the data directory writable?)", path, strerror(errno));
        goto fail;
    }
    if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen, "data directory %s is in use by another tallyd (%s is locked)", p->dir, path);
        goto fail;
    }
    snprintf(path, sizeof(path), "%s/%s", p->dir, SNAPSHOT_TMP);
    if (unlink(path) == 0)
        log_info("removed %s left by an interrupted snapshot", path);

    uint64_t snap_seq;
    if (!load_snapshot(p, &snap_seq, err, errlen))
        goto fail;

    uint64_t *seqs = NULL;
    size_t nseq = 0;
    int e = list_journals(p, &seqs, &nseq);
    if (e) {
        snprintf(err, errlen, "cannot list data directory %s: %s", p->dir, strerror(e));
        goto fail;
    }
    /* Journals from the snapshot's boundary on must be contiguous.  Without a
     * snapshot nothing was ever allowed to delete a journal, so they start at 1. */
    uint64_t start = snap_seq ? snap_seq : 1;
    size_t first = 0;
    while (first < nseq && seqs[first] < start)
        first++;
    uint64_t expect = start;
    for (size_t i = first; i < nseq; i++, expect++) {
        if (seqs[i] != expect) {
            char want[600];
            journal_path(p, expect, want, sizeof(want));
            snprintf(err, errlen,
                     "journal %s is missing, but later journals exist: the changes it held would be lost. "
                     "tallyd will not start; restore the file (or the snapshot that covered it), or, to accept "
                     "the loss, move every journal before the first present one out of the data directory",
                     want);
            free(seqs);
            goto fail;
        }
    }
    /* The newest journal holding records: the rules of the newest journal
     * apply to it and to every (empty) one after it.  Found once, walking
     * back from the last file, not once per journal. */
    size_t last_data = first;
    for (size_t k = nseq; k-- > first + 1;) {
        journal_path(p, seqs[k], path, sizeof(path));
        if (journal_has_records(path)) {
            last_data = k;
            break;
        }
    }
    for (size_t i = first; i < nseq; i++) {
        bool newest = i >= last_data;
        journal_scan_t sc;
        size_t len;
        if (!replay_journal(p, seqs[i], newest, &sc, &len, err, errlen)) {
            free(seqs);
            goto fail;
        }
        /* a journal left open by a crash is closed before a new one starts */
        bool open_end = sc.end != JEND_SEALED && (journalfmt_layout(&sc.h) == JOURNAL_LAYOUT_2 || sc.data_end != len);
        int se = p->journal_on && open_end ? seal_journal(p, seqs[i], &sc, err, errlen) : 0;
        if (se && space_error(se) && i + 1 == nseq) {
            /* the last journal: its seal waits for space with the next one */
            p->seal_deferred = true;
            p->seal_seq = seqs[i];
            p->seal_sc = sc;
        } else if (se) {
            free(seqs);
            goto fail;
        }
    }
    uint64_t next = nseq && seqs[nseq - 1] >= start ? seqs[nseq - 1] + 1 : start;
    /* journals before the snapshot's boundary are already in it */
    for (size_t i = 0; i < first; i++) {
        journal_path(p, seqs[i], path, sizeof(path));
        if (unlink(path) == 0)
            log_info("removed %s (already in the snapshot)", path);
    }
    free(seqs);

    p->next_seq = next;
    if (p->journal_on) {
        int je = journal_start(p, err, errlen);
        if (je && !space_error(je))
            goto fail;
        if (je) {
            /* Serve what is loaded: reads work, every change is refused
             * before it is applied (503), and the housekeeping starts the
             * journal once space returns (persist_tick). */
            log_error("%s: starting without a journal; reads are served, every change is refused (503, not "
                      "applied) until there is space; /readyz says so",
                      err);
            p->deferred_log_ns = clock_mono_ns();
        }
    }
    if (p->replayed_records)
        atomic_store(&p->dirty, p->replayed_records);
    p->last_snapshot_mono = clock_mono_ns();
    p->load_ns = clock_mono_ns() - t0;
    log_info("data directory %s ready in %.1f ms: %" PRIu64 " keys from the snapshot, %" PRIu64
             " journal records replayed; journal %s, fsync %s",
             p->dir, (double)p->load_ns / 1e6, p->loaded_keys, p->replayed_records, p->journal_on ? "on" : "off",
             fsync_mode_name(p->fsync));
    return p;
fail:
    if (p->lock_fd >= 0)
        close(p->lock_fd);
    pthread_mutex_destroy(&p->snap_mu);
    free(p);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Journal hooks                                                            */
/* ------------------------------------------------------------------------ */

uint64_t persist_journal_hook(void *ud, const journal_req_t *req)
{
    persist_t *p = ud;
    atomic_fetch_add_explicit(&p->dirty, 1, memory_order_relaxed);
    if (!p->j)
        return 0;
    uint64_t lsn = journal_append(p->j, req);
    if (lsn == 0)
        return UINT64_MAX;   /* could not even buffer it: the wait reports the failure */
    return lsn;
}

uint64_t persist_journal_epoch(persist_t *p) { return p->journal_epoch; }

/* Appends the epoch record `rec` and waits until it is durable. */
static bool epoch_journal(persist_t *p, const journal_req_t *rec, char *err, size_t errlen)
{
    const char *why = NULL;
    uint64_t bytes = journalfmt_request_size(rec);
    if (!journal_reserve(p->j, bytes, &why)) {
        snprintf(err, errlen, "cannot write the epoch record to the journal: %s", why);
        return false;
    }
    uint64_t lsn = journal_append(p->j, rec);
    journal_release(p->j, bytes);
    if (!persist_wait_hook(p, lsn ? lsn : UINT64_MAX, &why)) {
        snprintf(err, errlen, "cannot write the epoch record to the journal: %s", why);
        return false;
    }
    return true;
}

void persist_epoch_keep(persist_t *p, uint64_t epoch)
{
    uint64_t e = atomic_load(&p->epoch);
    while (epoch > e && !atomic_compare_exchange_weak(&p->epoch, &e, epoch))
        ;
}

bool persist_epoch_append(persist_t *p, uint64_t epoch, journal_req_t *rec, char *buf, char *err, size_t errlen)
{
    journalfmt_epoch_request(epoch, clock_now_ns(), API_POST, buf, rec);
    if (p->journal_on && !p->j) {
        snprintf(err, errlen, "cannot write the epoch record: %s", NO_JOURNAL);
        return false;
    }
    if (p->j && !epoch_journal(p, rec, err, errlen))
        return false;
    persist_epoch_keep(p, epoch);
    return true;
}

bool persist_reserve_hook(void *ud, uint64_t bytes, const char **err)
{
    persist_t *p = ud;
    journal_t *j = p->j;
    if (j)
        return journal_reserve(j, bytes, err);
    if (p->journal_on) {
        *err = NO_JOURNAL;
        return false;
    }
    return true;
}

const char *persist_unwritable(persist_t *p)
{
    journal_t *j = p->j;
    if (!j)
        return p->journal_on ? NO_JOURNAL : NULL;
    journal_stats_t js = journal_stats(j);
    if (!js.healthy)
        return "journal writes are failing (a full disk or an I/O error): changes wait, then are refused (503, "
               "not applied)";
    if (js.no_space)
        return "no space for the journal (a full disk): changes are refused (503, not applied) until there is space";
    return NULL;
}

void persist_release_hook(void *ud, uint64_t bytes)
{
    persist_t *p = ud;
    if (p->j)
        journal_release(p->j, bytes);
}

bool persist_wait_hook(void *ud, uint64_t lsn, const char **err)
{
    persist_t *p = ud;
    if (!p->j)
        return true;
    if (lsn == UINT64_MAX) {
        *err = "out of memory buffering the journal record";
        return false;
    }
    return journal_wait(p->j, lsn, p->journal_wait_ms, err);
}

bool persist_try_hook(void *ud, uint64_t lsn)
{
    persist_t *p = ud;
    return !p->j || (lsn != UINT64_MAX && journal_try(p->j, lsn));
}

bool persist_wait_async_hook(void *ud, uint64_t lsn, void (*done)(void *ud, bool ok, const char *err), void *dud)
{
    persist_t *p = ud;
    if (!p->j)
        return true;
    if (lsn == UINT64_MAX) {
        done(dud, false, "out of memory buffering the journal record");
        return false;
    }
    return journal_wait_async(p->j, lsn, p->journal_wait_ms, done, dud);
}

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                */
/* ------------------------------------------------------------------------ */

/* Where drain_shards sends encoded records: the snapshot file (hashed as
 * written, writeback started every SNAP_WRITEBACK_STEP bytes). */
struct file_sink {
    int fd;
    XXH64_state_t *xs;
    uint64_t *bytes, *flushed;
};

static int file_sink_put(void *ud, wbuf_t *b)
{
    struct file_sink *fs = ud;
    XXH64_update(fs->xs, b->data, b->len);
    int e = file_write_all(fs->fd, b->data, b->len);
    if (e)
        return e;
    *fs->bytes += b->len;
    b->len = 0;
    /* start writeback now, so the fsync at the end waits for the last
     * stretch only, not for the whole file */
    if (*fs->bytes - *fs->flushed >= SNAP_WRITEBACK_STEP) {
        (void)sync_file_range(fs->fd, (off_t)*fs->flushed, (off_t)(*fs->bytes - *fs->flushed), SYNC_FILE_RANGE_WRITE);
        *fs->flushed = *fs->bytes;
    }
    return 0;
}

/* Encodes every key marked by ks_snapshot_begin into b, shard by shard, a
 * budget of bytes per shard-lock hold, handing b to put(ud, b) whenever it
 * holds a budget's worth and at the end (put NULL: b keeps everything).
 * Returns 0 or an errno; *max_lock_ns grows to the longest hold. */
static int drain_shards(persist_t *p, wbuf_t *b, int (*put)(void *ud, wbuf_t *b), void *ud, uint64_t *records,
                        int64_t *max_lock_ns)
{
    for (unsigned i = 0; i < ks_shard_count(p->ks); i++) {
        ks_shard_t *sh = ks_shard_at(p->ks, i);
        bool done;
        do {
            ks_shard_lock(sh);
            int64_t l0 = clock_mono_ns();
            done = ks_snapshot_drain(p->ks, sh, b, SNAP_DRAIN_BUDGET, records);
            ks_shard_unlock(sh);
            int64_t held = clock_mono_ns() - l0;
            if (held > *max_lock_ns)
                *max_lock_ns = held;
            if (b->oom)
                return ENOMEM;
            int e;
            if (put && (b->len >= SNAP_DRAIN_BUDGET || done) && (e = put(ud, b)) != 0)
                return e;
            /* On a busy core, let request threads run between slices rather
             * than at the end of the scheduler's time slice. */
            sched_yield();
        } while (!done);
    }
    return ks_snapshot_failed(p->ks) ? ENOMEM : 0;
}

static bool snapshot_locked(persist_t *p, snapshot_stats_t *st, char *err, size_t errlen)
{
    int64_t t0 = clock_mono_ns();
    memset(st, 0, sizeof(*st));
    char tmp[600], final[600];
    snprintf(tmp, sizeof(tmp), "%s/%s", p->dir, SNAPSHOT_TMP);
    snprintf(final, sizeof(final), "%s/%s", p->dir, SNAPSHOT_NAME);

    if (p->journal_on && !p->j) {
        snprintf(err, errlen, "%s (nothing has changed since the snapshot and journals on disk)", NO_JOURNAL);
        return false;
    }
    /* 0. a boundary left by a snapshot that failed is completed first */
    const char *jerr;
    if (p->j && journal_rotation_pending(p->j) && !journal_finish_rotation(p->j, &jerr)) {
        snprintf(err, errlen, "the journal is still failing: %s", jerr);
        return false;
    }

    /* 1. the journal that will follow this snapshot exists and is durable */
    uint64_t seq = p->j ? journal_seq(p->j) + 1 : p->next_seq;
    int nfd = -1;
    if (p->j && create_journal(p, seq, &nfd, err, errlen) != 0)
        return false;

    /* 2. the barrier */
    ks_lock_all(p->ks);
    if (p->j && !journal_rotate(p->j, nfd, seq, &jerr)) {
        ks_unlock_all(p->ks);
        char jp[600];
        journal_path(p, seq, jp, sizeof(jp));
        unlink(jp);
        snprintf(err, errlen, "cannot reserve space in the new journal %s: %s", jp, jerr);
        return false;
    }
    ks_snapshot_begin(p->ks);
    uint64_t dirty0 = atomic_load(&p->dirty);
    ks_unlock_all(p->ks);

    /* 3. the journal before the barrier is complete and synced */
    if (p->j && !journal_finish_rotation(p->j, &jerr)) {
        snprintf(err, errlen, "completing journal before snapshot: %s", jerr);
        ks_snapshot_end(p->ks);
        return false;
    }

    /* 4. records, shard by shard */
    const char *step = "open";
    int e = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, FILE_MODE_PRIVATE);
    XXH64_state_t *xs = XXH64_createState();
    wbuf_t b = WBUF_INIT;
    uint64_t records = 0, bytes = 0, flushed = 0;
    if (fd < 0 || !xs) {
        e = fd < 0 ? errno : ENOMEM;
        goto fail;
    }
    XXH64_reset(xs, 0);
    /* room for a large record up front: growing the buffer while a shard is
     * locked (fresh pages, copies) is what made the longest holds */
    wbuf_reserve(&b, 2 * SNAP_DRAIN_BUDGET + (8 << 20));
    snap_header_t h = { SNAP_VERSION, 0, clock_now_ns() / 1000000, seq };
    snapfmt_put_header(&b, &h);
    step = "write";
    struct file_sink fs = { fd, xs, &bytes, &flushed };
    if ((e = drain_shards(p, &b, file_sink_put, &fs, &records, &st->max_lock_ns)) != 0)
        goto fail;
    wbuf_put_u8(&b, SNAP_REC_EOF);
    wbuf_put_u64(&b, records);
    XXH64_update(xs, b.data, b.len);
    wbuf_put_u64(&b, XXH64_digest(xs));
    if (b.oom) {
        e = ENOMEM;
        goto fail;
    }
    if ((e = file_write_all(fd, b.data, b.len)) != 0)
        goto fail;
    bytes += b.len;

    /* 5. durable, then visible */
    step = "fsync";
    if (fsync(fd) != 0) {
        e = errno;
        goto fail;
    }
    step = "close";
    if (close(fd) != 0) {
        fd = -1;
        e = errno;
        goto fail;
    }
    fd = -1;
    step = "rename";
    if (rename(tmp, final) != 0) {
        e = errno;
        goto fail;
    }
    step = "fsync directory";
    if ((e = file_fsync_dir(p->dir)) != 0)
        goto fail_after_rename;
    wbuf_free(&b);
    XXH64_freeState(xs);
    ks_snapshot_end(p->ks);

    /* 6. journals before the boundary are obsolete */
    uint64_t *seqs;
    size_t nseq;
    if (list_journals(p, &seqs, &nseq) == 0) {
        for (size_t i = 0; i < nseq; i++) {
            if (seqs[i] >= seq)
                continue;
            char jp[600];
            journal_path(p, seqs[i], jp, sizeof(jp));
            if (unlink(jp) != 0)
                log_warn("snapshot: could not remove obsolete %s: %s", jp, strerror(errno));
        }
        free(seqs);
    }
    if (!p->j)
        p->next_seq = seq;
    atomic_fetch_sub(&p->dirty, dirty0);
    st->bytes = bytes;
    st->records = records;
    st->duration_ns = clock_mono_ns() - t0;
    st->finished_ms = clock_now_ns() / 1000000;
    st->journal_seq = seq;
    return true;

fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
fail_after_rename:
    snprintf(err, errlen, "%s of %s failed: %s (the previous snapshot and the journals are kept)", step, tmp,
             strerror(e));
    wbuf_free(&b);
    if (xs)
        XXH64_freeState(xs);
    ks_snapshot_end(p->ks);
    return false;
}

bool persist_snapshot(persist_t *p, snapshot_stats_t *st, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->snap_mu);
    bool ok = snapshot_locked(p, st, err, errlen);
    p->have_last = true;
    p->last_ok = ok;
    if (ok) {
        p->last = *st;
        p->snapshots_ok++;
        p->last_err[0] = '\0';
        log_info("snapshot: %" PRIu64 " keys, %" PRIu64 " bytes in %.1f ms (longest shard hold %.2f ms)",
                 st->records, st->bytes, (double)st->duration_ns / 1e6, (double)st->max_lock_ns / 1e6);
    } else {
        p->snapshots_failed++;
        snprintf(p->last_err, sizeof(p->last_err), "%s", err);
        log_error("snapshot failed: %s", err);
    }
    p->last_snapshot_mono = clock_mono_ns();
    pthread_mutex_unlock(&p->snap_mu);
    /* the journals that held the epoch record are gone: the new one gets it */
    uint64_t epoch = atomic_load(&p->epoch);
    if (ok && epoch && p->j) {
        journal_req_t rec;
        char buf[JOURNAL_EPOCH_BUF], why[300];
        journalfmt_epoch_request(epoch, clock_now_ns(), API_POST, buf, &rec);
        if (!epoch_journal(p, &rec, why, sizeof(why)))
            log_error("snapshot: %s (the EPOCH file still holds epoch %" PRIu64 ")", why, epoch);
    }
    return ok;
}

bool persist_snapshot_to_buffer(persist_t *p, wbuf_t *out, void (*at_barrier)(void *ud), void *ud, char *err,
                                size_t errlen)
{
    pthread_mutex_lock(&p->snap_mu);
    ks_lock_all(p->ks);
    ks_snapshot_begin(p->ks);
    at_barrier(ud);
    ks_unlock_all(p->ks);
    uint64_t records = 0;
    int64_t max_lock = 0;
    wbuf_reserve(out, 2 * SNAP_DRAIN_BUDGET + (8 << 20));
    snap_header_t h = { SNAP_VERSION, 0, clock_now_ns() / 1000000, 0 };
    snapfmt_put_header(out, &h);
    int e = drain_shards(p, out, NULL, NULL, &records, &max_lock);
    ks_snapshot_end(p->ks);
    pthread_mutex_unlock(&p->snap_mu);
    if (!e) {
        wbuf_put_u8(out, SNAP_REC_EOF);
        wbuf_put_u64(out, records);
        wbuf_put_u64(out, XXH64(out->data, out->len, 0));
        e = out->oom ? ENOMEM : 0;
    }
    if (e)
        snprintf(err, errlen, "snapshot for a replica failed: %s", strerror(e));
    return e == 0;
}

/* ks_shard_scan callback of persist_load_snapshot_bytes: collects entries. */
struct entry_list {
    ks_entry_t **v;
    size_t n, cap;
    bool oom;
};

static void collect_entry(void *ud, ks_entry_t *e)
{
    struct entry_list *l = ud;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        ks_entry_t **v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = e;
}

/* persist_load_snapshot_bytes, the keyspace closed to requests. */
static bool load_replacing(persist_t *p, const uint8_t *bytes, size_t len, char *err, size_t errlen)
{
    snap_scan_t sc;
    struct entry_list l = { 0 };
    for (unsigned i = 0; i < ks_shard_count(p->ks); i++) {
        ks_shard_t *sh = ks_shard_at(p->ks, i);
        ks_shard_lock(sh);
        uint64_t cursor = 0;
        do
            ks_shard_scan(p->ks, sh, &cursor, 1024, INT64_MIN, collect_entry, &l);
        while (cursor && !l.oom);
        for (size_t k = 0; k < l.n; k++)
            ks_entry_delete(p->ks, l.v[k]);
        l.n = 0;
        ks_shard_unlock(sh);
        if (l.oom)
            break;
    }
    free(l.v);
    if (l.oom) {
        snprintf(err, errlen, "out of memory clearing the keyspace");
        return false;
    }
    if (!snapfmt_scan(bytes, len, load_record, p, &sc)) {
        snprintf(err, errlen, "snapshot from the primary does not load at offset %zu: %s", sc.bad_off, sc.why);
        return false;
    }
    p->loaded_keys = sc.records;
    return true;
}

bool persist_load_snapshot_bytes(persist_t *p, const uint8_t *bytes, size_t len, char *err, size_t errlen)
{
    snap_scan_t sc;
    if (!snapfmt_scan(bytes, len, NULL, NULL, &sc)) {
        snprintf(err, errlen, "snapshot from the primary is damaged at offset %zu: %s", sc.bad_off, sc.why);
        return false;
    }
    /* every key goes, shard by shard; then the snapshot's keys come in.
     * Meanwhile no request reads: the data routes are refused (503; a
     * change the replica's 421) until the load is complete - and stay
     * closed if it fails halfway, until a later load succeeds, since the
     * keyspace then holds neither state.  Nor is a
     * snapshot taken (snap_mu): it would hold a keyspace half replaced.  The
     * gate closes first: a request it waits for may itself wait for snap_mu,
     * as /info does. */
    if (p->load_gate)
        p->load_gate(p->load_gate_ud, true);
    pthread_mutex_lock(&p->snap_mu);
    bool ok = load_replacing(p, bytes, len, err, errlen);
    pthread_mutex_unlock(&p->snap_mu);
    if (ok && p->load_gate)
        p->load_gate(p->load_gate_ud, false);
    return ok;
}

void persist_set_load_gate(persist_t *p, void (*gate)(void *ud, bool loading), void *ud)
{
    p->load_gate = gate;
    p->load_gate_ud = ud;
}

/* The periodic snapshot, on a thread of its own at the lowest CPU priority
 * (nice 19: lowering one's own needs no privilege), so that on a busy core
 * it takes the time requests leave rather than a share of theirs - one
 * core serving 40 000 requests a second waited up to 6 ms for a snapshot
 * of 190 000 keys.  A shard it holds when preempted is given back as soon
 * as a request waits for it: the request thread sleeps, so it runs. */
static void periodic_snapshot(persist_t *p)
{
    snapshot_stats_t st;
    char err[512];
    persist_snapshot(p, &st, err, sizeof(err));   /* logs its outcome */
}

static void *periodic_snapshot_main(void *arg)
{
    persist_t *p = arg;
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
    periodic_snapshot(p);
    atomic_store(&p->periodic_done, true);
    return NULL;
}

/* Joins the periodic snapshot's thread once it has finished (`wait`: even
 * if it has not). */
static void periodic_join(persist_t *p, bool wait)
{
    if (p->periodic_running && (wait || atomic_load(&p->periodic_done))) {
        pthread_join(p->periodic, NULL);
        p->periodic_running = false;
    }
}

/* A start on a full disk: tries again, once a second, to start the
 * journal; logs the wait once a minute. */
static void journal_retry(persist_t *p, int64_t now)
{
    pthread_mutex_lock(&p->snap_mu);
    char err[700];
    int e = p->j ? 0 : journal_start(p, err, sizeof(err));
    if (e && now - p->deferred_log_ns >= 60 * 1000000000LL) {
        log_warn("still no journal: %s; every change is refused (503, not applied)", err);
        p->deferred_log_ns = now;
    } else if (!e) {
        log_info("journal %" PRIu64 " started: there is space again, changes are taken", p->next_seq);
    }
    pthread_mutex_unlock(&p->snap_mu);
}

void persist_tick(persist_t *p)
{
    int64_t now = clock_mono_ns();
    int64_t sec = now / 1000000000LL;
    if (p->journal_on && !p->j && sec != p->last_tick_sec)
        journal_retry(p, now);
    if (p->j && sec != p->last_tick_sec)
        journal_tick(p->j);
    p->last_tick_sec = sec;
    periodic_join(p, false);
    if (!p->periodic_running && p->snapshot_interval > 0 && atomic_load(&p->dirty) > 0 &&
        now - p->last_snapshot_mono >= (int64_t)p->snapshot_interval * 1000000000LL) {
        atomic_store(&p->periodic_done, false);
        p->periodic_running = pthread_create(&p->periodic, NULL, periodic_snapshot_main, p) == 0;
        if (!p->periodic_running)
            periodic_snapshot(p);   /* no thread: here, at the housekeeping's priority */
    }
}

uint64_t persist_dirty(persist_t *p) { return atomic_load(&p->dirty); }

void persist_status(persist_t *p, cmd_persist_status_t *st)
{
    memset(st, 0, sizeof(*st));
    snprintf(st->data_dir, sizeof(st->data_dir), "%s", p->dir);
    st->journal = p->journal_on;
    st->fsync = fsync_mode_name(p->fsync);
    st->snapshot_interval = p->snapshot_interval;
    st->changes_since_snapshot = atomic_load(&p->dirty);
    st->load_ns = p->load_ns;
    st->replayed_records = p->replayed_records;
    st->unwritable = persist_unwritable(p);
    journal_t *j = p->j;
    if (j) {
        journal_stats_t js = journal_stats(j);
        st->has_journal = true;
        st->journal_seq = js.seq;
        st->journal_bytes = js.bytes;
        st->journal_healthy = js.healthy;
        st->journal_unsynced_bytes = js.unsynced;
    }
    pthread_mutex_lock(&p->snap_mu);
    st->has_last = p->have_last;
    st->last_ok = p->last_ok;
    st->last = p->last;
    snprintf(st->last_error, sizeof(st->last_error), "%s", p->last_err);
    pthread_mutex_unlock(&p->snap_mu);
}

void persist_metrics(persist_t *p, wbuf_t *out)
{
    char buf[1024];
    pthread_mutex_lock(&p->snap_mu);
    int n = snprintf(buf, sizeof(buf),
                     "# HELP tally_snapshots_total Snapshots attempted, by outcome.\n"
                     "# TYPE tally_snapshots_total counter\n"
                     "tally_snapshots_total{outcome=\"ok\"} %" PRIu64 "\n"
                     "tally_snapshots_total{outcome=\"failed\"} %" PRIu64 "\n"
                     "# HELP tally_snapshot_last_bytes Size of the last successful snapshot.\n"
                     "# TYPE tally_snapshot_last_bytes gauge\n"
                     "tally_snapshot_last_bytes %" PRIu64 "\n"
                     "# HELP tally_snapshot_last_duration_seconds Duration of the last successful snapshot.\n"
                     "# TYPE tally_snapshot_last_duration_seconds gauge\n"
                     "tally_snapshot_last_duration_seconds %.6f\n"
                     "# HELP tally_changes_since_snapshot State changes not yet in a snapshot.\n"
                     "# TYPE tally_changes_since_snapshot gauge\n"
                     "tally_changes_since_snapshot %" PRIu64 "\n",
                     p->snapshots_ok, p->snapshots_failed, p->last.bytes, (double)p->last.duration_ns / 1e9,
                     atomic_load(&p->dirty));
    pthread_mutex_unlock(&p->snap_mu);
    wbuf_put_bytes(out, buf, (size_t)n);
    if (p->journal_on && !p->j) {
        static const char waiting[] = "# HELP tally_journal_healthy 1 while the journal takes changes: its writes "
                                      "succeed and it has space.\n"
                                      "# TYPE tally_journal_healthy gauge\n"
                                      "tally_journal_healthy 0\n";
        wbuf_put_bytes(out, waiting, sizeof(waiting) - 1);
    }
    if (p->j) {
        journal_stats_t js = journal_stats(p->j);
        n = snprintf(buf, sizeof(buf),
                     "# HELP tally_journal_records_total Journal records appended since start.\n"
                     "# TYPE tally_journal_records_total counter\n"
                     "tally_journal_records_total %" PRIu64 "\n"
                     "# HELP tally_journal_bytes Size of the current journal file.\n"
                     "# TYPE tally_journal_bytes gauge\n"
                     "tally_journal_bytes %" PRIu64 "\n"
                     "# HELP tally_journal_healthy 1 while the journal takes changes: its writes succeed and it "
                     "has space.\n"
                     "# TYPE tally_journal_healthy gauge\n"
                     "tally_journal_healthy %d\n"
                     "# HELP tally_journal_unsynced_bytes Journal bytes written to the kernel, not yet fdatasync'd "
                     "(under everysec, about a second's worth at most).\n"
                     "# TYPE tally_journal_unsynced_bytes gauge\n"
                     "tally_journal_unsynced_bytes %" PRIu64 "\n",
                     js.records, js.bytes, js.healthy && !js.no_space ? 1 : 0, js.unsynced);
        wbuf_put_bytes(out, buf, (size_t)n);
    }
}

void persist_close(persist_t *p)
{
    if (!p)
        return;
    periodic_join(p, true);
    journal_close(p->j);
    if (p->lock_fd >= 0)
        close(p->lock_fd);
    pthread_mutex_destroy(&p->snap_mu);
    free(p);
}

/* ------------------------------------------------------------------------ */
/* tallyd --check                                                           */
/* ------------------------------------------------------------------------ */

#define CMD_CHECK_OPS 1024   /* operation ids --check counts one by one (cmd/ids.h) */

struct check_ctx {
    uint64_t per_type[TYPE_TAG_MAX + 1], bytes_type[TYPE_TAG_MAX + 1];
    uint64_t with_ttl;
    uint64_t by_method[API_OTHER + 1];
    uint64_t by_op[CMD_CHECK_OPS];   /* command records, by operation id */
    char why[256];
};

/* snapfmt_scan callback of --check: decodes the value (as the loader does). */
static const char *check_record(void *ud, size_t off, const snap_record_t *r)
{
    (void)off;
    struct check_ctx *c = ud;
    const ks_type_t *t = ks_type_by_tag(r->tag);
    if (!t)
        return "unknown type tag (written by a newer tally?)";
    const char *why = NULL;
    void *v = t->decode(r->value, r->vlen, &why);
    if (!v) {
        snprintf(c->why, sizeof(c->why), "key '%.*s': %s", (int)(r->klen > 64 ? 64 : r->klen), r->key,
                 why ? why : "value does not decode");
        return c->why;
    }
    t->free(v);
    c->per_type[r->tag]++;
    c->bytes_type[r->tag] += r->vlen;
    if (r->expire_ms)
        c->with_ttl++;
    return NULL;
}

static int check_snapshot(const char *path, const mapped_t *m, FILE *out)
{
    struct check_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return 2;
    snap_scan_t sc;
    int rc = 0;
    if (!snapfmt_scan(m->p, m->len, check_record, c, &sc)) {
        fprintf(out, "snapshot %s\nDAMAGED at offset %zu: %s\n", path, sc.bad_off, sc.why);
        rc = 1;
    } else {
        fprintf(out, "snapshot %s\n  format version %u, taken at %" PRId64 " ms, journal_seq %" PRIu64 "\n", path,
                sc.h.version, sc.h.created_ms, sc.h.journal_seq);
        fprintf(out, "  %" PRIu64 " keys (%" PRIu64 " with expiry), %zu bytes, checksums OK\n", sc.records,
                c->with_ttl, m->len);
        for (unsigned t = 0; t <= TYPE_TAG_MAX; t++)
            if (c->per_type[t])
                fprintf(out, "  %-10s %10" PRIu64 " keys %14" PRIu64 " value bytes\n", ks_type_by_tag(t)->name,
                        c->per_type[t], c->bytes_type[t]);
        fprintf(out, "OK\n");
    }
    free(c);
    return rc;
}

/* journalfmt_scan callback of --check: counts by method. */
static const char *check_request(void *ud, size_t off, const journal_req_t *q)
{
    (void)off;
    struct check_ctx *c = ud;
    if (q->kind == JOURNAL_REC_COMMAND) {
        if (!cmd_def_by_id(q->op) || q->op >= CMD_CHECK_OPS)
            return "unknown operation in a command record (a record of a newer tally)";
        c->by_op[q->op]++;
        return NULL;
    }
    if (q->method < API_GET || q->method > API_OTHER)
        return "unknown method in record";
    c->by_method[q->method]++;
    return NULL;
}

/* Is a later journal (journal.<seq+1>...) next to this one holding records?
 * Decides whether the rules of the newest or of an older journal apply. */
static bool check_later_records(const char *path, uint64_t seq)
{
    persist_t tmp;
    snprintf(tmp.dir, sizeof(tmp.dir), "%.500s", path);
    char *slash = strrchr(tmp.dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(tmp.dir, sizeof(tmp.dir), ".");
    uint64_t *seqs;
    size_t n;
    if (list_journals(&tmp, &seqs, &n) != 0)
        return false;
    bool later = false;
    for (size_t i = 0; i < n && !later; i++) {
        if (seqs[i] <= seq)
            continue;
        char jp[600];
        journal_path(&tmp, seqs[i], jp, sizeof(jp));
        later = journal_has_records(jp);
    }
    free(seqs);
    return later;
}

static int check_journal(const char *path, const mapped_t *m, FILE *out)
{
    struct check_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return 2;
    journal_scan_t sc;
    bool ok = journalfmt_scan(m->p, m->len, check_request, c, &sc);
    uint64_t name_seq;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (ok && parse_journal_name(base, &name_seq) && name_seq != sc.h.seq) {
        ok = sc.ok = false;
        sc.bad_off = 0;
        sc.why = "header sequence number does not match the file name";
    }
    bool newest = !ok || !check_later_records(path, sc.h.seq);
    ok = ok && journalfmt_check_place(&sc, m->len, newest);
    fprintf(out, "journal %s\n", path);
    int rc = 0;
    if (!ok) {
        fprintf(out, "DAMAGED at offset %zu: %s\n", sc.bad_off, sc.why);
        rc = 1;
    } else {
        fprintf(out, "  format version %u (layout %u, replayed by generation %u's rules), sequence %" PRIu64 " (%s)\n",
                sc.h.version, journalfmt_layout(&sc.h), journalfmt_generation(&sc.h), sc.h.seq,
                newest ? "the newest journal with records" : "later journals hold records");
        fprintf(out, "  %" PRIu64 " records", sc.records);
        if (sc.records)
            fprintf(out, " from %" PRId64 " ms to %" PRId64 " ms", sc.first_ns / 1000000, sc.last_ns / 1000000);
        fprintf(out, "\n");
        for (unsigned i = 0; i <= API_OTHER; i++)
            if (c->by_method[i])
                fprintf(out, "  %-7s %" PRIu64 "\n", api_method_name((api_method_t)i), c->by_method[i]);
        for (unsigned i = 0; i < CMD_CHECK_OPS; i++)
            if (c->by_op[i])
                fprintf(out, "  %-7s %" PRIu64 "\n", cmd_def_by_id((uint16_t)i)->name, c->by_op[i]);
        char end[256];
        describe_end(&sc, end, sizeof(end));
        fprintf(out, "  end: %s\n", end);
        fprintf(out, "OK\n");
    }
    free(c);
    return rc;
}

int persist_check(const char *path, FILE *out)
{
    mapped_t m;
    int e = map_file(path, &m);
    if (e) {
        fprintf(out, "cannot read %s: %s\n", path, strerror(e));
        return 2;
    }
    int rc;
    if (m.len >= 8 && memcmp(m.p, SNAP_MAGIC, 8) == 0)
        rc = check_snapshot(path, &m, out);
    else if (m.len >= 8 && memcmp(m.p, JOURNAL_MAGIC, 8) == 0)
        rc = check_journal(path, &m, out);
    else {
        fprintf(out, "%s\nDAMAGED at offset 0: %s\n", path,
                m.len == 0 ? "empty file" : "neither a tally snapshot nor a journal (bad magic)");
        rc = 1;
    }
    unmap_file(&m);
    return rc;
}
