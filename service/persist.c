/* persist.c - see persist.h for the files and the protocol. */
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
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

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
    api_server_t *api;
    ks_t *ks;
    bool journal_on;
    fsync_mode_t fsync;
    int journal_wait_ms;                  /* a request waits this long for a failing disk */
    int snapshot_interval;
    int lock_fd;
    journal_t *j;
    uint64_t next_seq;                    /* journal seq a snapshot taken now would start at (journal off) */
    _Atomic uint64_t dirty;
    pthread_mutex_t snap_mu;
    int64_t last_snapshot_mono;
    int64_t last_tick_sec;
    /* last snapshot outcome, under snap_mu */
    bool have_last;
    snapshot_stats_t last;
    bool last_ok;
    char last_err[256];
    uint64_t snapshots_ok, snapshots_failed;
    int64_t load_ns;
    uint64_t loaded_keys, replayed_records;
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

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int rc = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

static int write_all_fd(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return EIO;
        b += w;
        n -= (size_t)w;
    }
    return 0;
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

/* Creates journal.<seq>.tlj with its header, synced with its directory. */
static int create_journal(persist_t *p, uint64_t seq, int *fd_out, char *err, size_t errlen)
{
    char path[600];
    journal_path(p, seq, path, sizeof(path));
    /* read-write: the journal writes through a shared mapping */
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create journal %s: %s", path, strerror(errno));
        return -1;
    }
    wbuf_t b = WBUF_INIT;
    journal_header_t h = { JOURNAL_VERSION, 0, seq };
    journalfmt_put_header(&b, &h);
    int e = b.oom ? ENOMEM : write_all_fd(fd, b.data, b.len);
    wbuf_free(&b);
    if (!e && fdatasync(fd) != 0)
        e = errno;
    if (!e)
        e = fsync_dir(p->dir);
    if (e) {
        snprintf(err, errlen, "cannot write journal %s: %s", path, strerror(e));
        close(fd);
        unlink(path);
        return -1;
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
    snap_header_t h;
    const char *why = NULL;
    size_t off = 0;
    uint64_t records = 0, count = 0;
    bool ok = false;
    if (!snapfmt_parse_header(m.p, m.len, &h, &why))
        goto done;
    off = SNAP_HEADER_SIZE;
    int64_t now_ms = clock_now_ns() / 1000000;
    for (;;) {
        snap_record_t r;
        size_t used = 0;
        persist_parse_t pr = snapfmt_parse_record(m.p + off, m.len - off, &r, &used, &count, &why);
        if (pr == PARSE_TRUNCATED) {
            why = "file ends inside a record (truncated)";
            goto done;
        }
        if (pr == PARSE_CORRUPT)
            goto done;
        if (pr == PARSE_END) {
            if (count != records) {
                why = "record count in the trailer does not match";
                goto done;
            }
            if (off + used != m.len) {
                off += used;
                why = "unexpected bytes after the trailer";
                goto done;
            }
            uint64_t stored = le64_load(m.p + m.len - 8);
            if (XXH64(m.p, m.len - 8, 0) != stored) {
                off = m.len - 8;
                why = "file checksum mismatch";
                goto done;
            }
            break;
        }
        const ks_type_t *t = ks_type_by_tag(r.tag);
        if (!t) {
            why = "unknown type tag (written by a newer tally?)";
            goto done;
        }
        void *v = t->decode(r.value, r.vlen, &why);
        if (!v)
            goto done;
        ks_key_t k = ks_key(p->ks, r.key, r.klen);
        ks_shard_t *sh = ks_shard_at(p->ks, k.shard);
        ks_shard_lock(sh);
        /* expired entries are kept: journal records before their expiry may read them */
        bool dup = ks_find(p->ks, &k, INT64_MIN) != NULL;
        ks_entry_t *ent = dup ? NULL : ks_add(p->ks, &k, t, v, r.expire_ms, now_ms);
        ks_shard_unlock(sh);
        if (!ent) {
            t->free(v);
            why = dup ? "duplicate key" : "out of memory";
            goto done;
        }
        records++;
        off += used;
    }
    ok = true;
    *seq = h.journal_seq;
    p->loaded_keys = records;
    log_info("loaded snapshot %s: %" PRIu64 " keys, %zu bytes, taken at %" PRId64 " ms", path, records, m.len,
             h.created_ms);
done:
    if (!ok)
        snprintf(err, errlen, "snapshot %s is damaged at offset %zu: %s. %s", path, off, why ? why : "invalid",
                 DAMAGE_HELP);
    unmap_file(&m);
    return ok;
}

static const char *replay_header(void *hctx, const char *name)
{
    (void)hctx;
    (void)name;
    return NULL;
}

/* True if [p, p+n) is all zero bytes (a preallocated, never-written tail). */
static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* Is the bad record at p (n bytes to the end of the file) the torn end of
 * the journal?  Journal files are written into space reserved in advance
 * that reads as zeros, so a crash leaves a last record cut short (its
 * length field may be whole and its payload partly zeros) followed by
 * zeros.  It is torn when no byte beyond the extent it claims is non-zero;
 * anything else is damage. */
static bool torn_tail(const uint8_t *p, size_t n)
{
    size_t claimed = n;
    if (n >= 4) {
        uint64_t len = 8 + (uint64_t)le32_load(p);
        if (len < n)
            claimed = (size_t)len;
    }
    return all_zero(p + claimed, n - claimed);
}

/* Counts the records of a journal file (to decide whether a torn tail is
 * followed by later data). */
static bool journal_has_records(const char *path)
{
    mapped_t m;
    if (map_file(path, &m) != 0)
        return true;   /* unreadable: treat as holding data, so we refuse */
    /* space reserved but never written reads as zeros */
    bool has = m.len > JOURNAL_HEADER_SIZE && !all_zero(m.p + JOURNAL_HEADER_SIZE, m.len - JOURNAL_HEADER_SIZE);
    unmap_file(&m);
    return has;
}

/* Replays one journal file.  `last` says no later file holds records, so a
 * torn tail may be dropped (and is cut off the file). */
static bool replay_journal(persist_t *p, uint64_t seq, bool last, char *err, size_t errlen)
{
    char path[600];
    journal_path(p, seq, path, sizeof(path));
    mapped_t m;
    int e = map_file(path, &m);
    if (e) {
        snprintf(err, errlen, "cannot read journal %s: %s", path, strerror(e));
        return false;
    }
    journal_header_t h;
    const char *why = NULL;
    size_t off = 0;
    uint64_t n = 0;
    bool ok = false;
    if (!journalfmt_parse_header(m.p, m.len, &h, &why)) {
        if (m.len < JOURNAL_HEADER_SIZE && last && all_zero(m.p, m.len)) {
            /* created but the header never reached the disk: nothing was in it */
            log_warn("journal %s has no header (crash while creating it): treated as empty", path);
            ok = true;
        }
        goto done;
    }
    if (h.seq != seq) {
        why = "header sequence number does not match the file name";
        goto done;
    }
    off = JOURNAL_HEADER_SIZE;
    while (off < m.len) {
        journal_req_t q;
        size_t used = 0;
        persist_parse_t pr = journalfmt_parse_record(m.p + off, m.len - off, &q, &used, &why);
        bool torn = (pr == PARSE_TRUNCATED || pr == PARSE_CORRUPT) && torn_tail(m.p + off, m.len - off);
        if (torn) {
            if (!last) {
                why = "record cut short, and later journals hold records";
                goto done;
            }
            log_warn("journal %s: dropping a torn last record at offset %zu (%zu bytes; the process stopped "
                     "mid-write, it was never acknowledged)",
                     path, off, m.len - off);
            if (truncate(path, (off_t)off) != 0)
                log_warn("journal %s: could not cut the torn tail: %s", path, strerror(errno));
            break;
        }
        if (pr != PARSE_OK)
            goto done;
        if (q.method < API_GET || q.method > API_OTHER) {
            why = "unknown method in record";
            goto done;
        }
        char ctype[256];
        size_t cl = q.ctype_len < sizeof(ctype) - 1 ? q.ctype_len : sizeof(ctype) - 1;
        memcpy(ctype, q.ctype, cl);
        ctype[cl] = '\0';
        api_req_t req;
        memset(&req, 0, sizeof(req));
        req.method = (api_method_t)q.method;
        req.path = q.path;
        req.path_len = q.path_len;
        req.query = q.query;
        req.query_len = q.query_len;
        req.ctype = cl ? ctype : NULL;
        req.body = q.body;
        req.body_len = q.body_len;
        req.header = replay_header;
        req.now_ns = q.now_ns;
        req.replay = true;
        req.gen = journalfmt_generation(&h);
        api_resp_t resp;
        api_dispatch(p->api, &req, &resp);
        if (resp.status >= 400)
            log_warn("journal %s offset %zu: %s %.*s replayed with status %d: %.*s", path, off,
                     api_method_name(req.method), (int)q.path_len, q.path, resp.status, (int)resp.len,
                     resp.body ? resp.body : "");
        api_resp_release(&resp);
        api_req_release(&req);
        n++;
        off += used;
    }
    ok = true;
    p->replayed_records += n;
    log_info("replayed journal %s: %" PRIu64 " records", path, n);
done:
    if (!ok)
        snprintf(err, errlen, "journal %s is damaged at offset %zu: %s. %s", path, off, why ? why : "invalid",
                 DAMAGE_HELP);
    unmap_file(&m);
    return ok;
}

persist_t *persist_open(const tally_opts_t *o, api_server_t *api, char *err, size_t errlen)
{
    int64_t t0 = clock_mono_ns();
    persist_t *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(p->dir, sizeof(p->dir), "%s", o->data_dir);
    p->api = api;
    p->ks = api->ks;
    p->journal_on = o->journal;
    p->fsync = o->fsync;
    p->journal_wait_ms = o->journal_timeout * 1000;
    p->snapshot_interval = o->snapshot_interval;
    p->lock_fd = -1;
    pthread_mutex_init(&p->snap_mu, NULL);

    if (mkdir(p->dir, 0755) != 0 && errno != EEXIST) {
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
    p->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
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
    for (size_t i = first; i < nseq; i++) {
        bool last = true;
        for (size_t k = i + 1; k < nseq && last; k++) {
            journal_path(p, seqs[k], path, sizeof(path));
            last = !journal_has_records(path);
        }
        if (!replay_journal(p, seqs[i], last, err, errlen)) {
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

    if (p->journal_on) {
        int fd;
        if (create_journal(p, next, &fd, err, errlen) != 0)
            goto fail;
        p->j = journal_create(fd, next, p->fsync);
        if (!p->j) {
            close(fd);
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        p->next_seq = next;
    } else {
        p->next_seq = next;
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

static bool snapshot_locked(persist_t *p, snapshot_stats_t *st, char *err, size_t errlen)
{
    int64_t t0 = clock_mono_ns();
    memset(st, 0, sizeof(*st));
    char tmp[600], final[600];
    snprintf(tmp, sizeof(tmp), "%s/%s", p->dir, SNAPSHOT_TMP);
    snprintf(final, sizeof(final), "%s/%s", p->dir, SNAPSHOT_NAME);

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
    if (p->j)
        journal_rotate(p->j, nfd, seq);
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
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
    for (unsigned i = 0; i < ks_shard_count(p->ks); i++) {
        ks_shard_t *sh = ks_shard_at(p->ks, i);
        bool done;
        do {
            ks_shard_lock(sh);
            int64_t l0 = clock_mono_ns();
            done = ks_snapshot_drain(p->ks, sh, &b, SNAP_DRAIN_BUDGET, &records);
            ks_shard_unlock(sh);
            int64_t held = clock_mono_ns() - l0;
            if (held > st->max_lock_ns)
                st->max_lock_ns = held;
            if (b.oom) {
                e = ENOMEM;
                goto fail;
            }
            if (b.len >= SNAP_DRAIN_BUDGET || done) {
                XXH64_update(xs, b.data, b.len);
                if ((e = write_all_fd(fd, b.data, b.len)) != 0)
                    goto fail;
                bytes += b.len;
                b.len = 0;
                /* start writeback now, so the fsync at the end waits for the
                 * last stretch only, not for the whole file */
                if (bytes - flushed >= SNAP_WRITEBACK_STEP) {
                    (void)sync_file_range(fd, (off_t)flushed, (off_t)(bytes - flushed), SYNC_FILE_RANGE_WRITE);
                    flushed = bytes;
                }
            }
            /* On a busy core, let request threads run between slices rather
             * than at the end of the scheduler's time slice. */
            sched_yield();
        } while (!done);
    }
    if (ks_snapshot_failed(p->ks)) {
        e = ENOMEM;
        goto fail;
    }
    wbuf_put_u8(&b, SNAP_REC_EOF);
    wbuf_put_u64(&b, records);
    XXH64_update(xs, b.data, b.len);
    wbuf_put_u64(&b, XXH64_digest(xs));
    if (b.oom) {
        e = ENOMEM;
        goto fail;
    }
    if ((e = write_all_fd(fd, b.data, b.len)) != 0)
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
    if ((e = fsync_dir(p->dir)) != 0)
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
    return ok;
}

json_t *persist_snapshot_hook(void *ud, const char **errp)
{
    persist_t *p = ud;
    static _Thread_local char err[512];
    snapshot_stats_t st;
    if (!persist_snapshot(p, &st, err, sizeof(err))) {
        *errp = err;
        return NULL;
    }
    return json_pack("{s:I,s:I,s:f,s:f,s:I}", "bytes", (json_int_t)st.bytes, "keys", (json_int_t)st.records,
                     "duration_ms", (double)st.duration_ns / 1e6, "max_shard_lock_ms", (double)st.max_lock_ns / 1e6,
                     "journal_seq", (json_int_t)st.journal_seq);
}

void persist_tick(persist_t *p)
{
    int64_t now = clock_mono_ns();
    int64_t sec = now / 1000000000LL;
    if (p->j && sec != p->last_tick_sec)
        journal_tick(p->j);
    p->last_tick_sec = sec;
    if (p->snapshot_interval > 0 && atomic_load(&p->dirty) > 0 &&
        now - p->last_snapshot_mono >= (int64_t)p->snapshot_interval * 1000000000LL) {
        snapshot_stats_t st;
        char err[512];
        persist_snapshot(p, &st, err, sizeof(err));
    }
}

uint64_t persist_dirty(persist_t *p) { return atomic_load(&p->dirty); }

void persist_info(persist_t *p, json_t *obj)
{
    json_t *o = json_pack("{s:s,s:b,s:s,s:i,s:I,s:f,s:I}", "data_dir", p->dir, "journal", p->journal_on, "fsync",
                          fsync_mode_name(p->fsync), "snapshot_interval", p->snapshot_interval,
                          "changes_since_snapshot", (json_int_t)atomic_load(&p->dirty), "load_ms",
                          (double)p->load_ns / 1e6, "replayed_records", (json_int_t)p->replayed_records);
    if (p->j) {
        json_object_set_new(o, "journal_seq", json_integer((json_int_t)journal_seq(p->j)));
        json_object_set_new(o, "journal_bytes", json_integer((json_int_t)journal_bytes(p->j)));
        json_object_set_new(o, "journal_healthy", json_boolean(journal_healthy(p->j)));
    }
    pthread_mutex_lock(&p->snap_mu);
    if (p->have_last) {
        json_t *l = json_pack("{s:b}", "ok", p->last_ok);
        if (p->last_ok) {
            json_object_set_new(l, "bytes", json_integer((json_int_t)p->last.bytes));
            json_object_set_new(l, "keys", json_integer((json_int_t)p->last.records));
            json_object_set_new(l, "duration_ms", json_real((double)p->last.duration_ns / 1e6));
            json_object_set_new(l, "finished_ms", json_integer(p->last.finished_ms));
        } else {
            json_object_set_new(l, "error", json_string(p->last_err));
        }
        json_object_set_new(o, "last_snapshot", l);
    }
    pthread_mutex_unlock(&p->snap_mu);
    json_object_set_new(obj, "persistence", o);
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
    if (p->j) {
        n = snprintf(buf, sizeof(buf),
                     "# HELP tally_journal_records_total Journal records appended since start.\n"
                     "# TYPE tally_journal_records_total counter\n"
                     "tally_journal_records_total %" PRIu64 "\n"
                     "# HELP tally_journal_bytes Size of the current journal file.\n"
                     "# TYPE tally_journal_bytes gauge\n"
                     "tally_journal_bytes %" PRIu64 "\n"
                     "# HELP tally_journal_healthy 1 while journal writes succeed.\n"
                     "# TYPE tally_journal_healthy gauge\n"
                     "tally_journal_healthy %d\n",
                     journal_records(p->j), journal_bytes(p->j), journal_healthy(p->j) ? 1 : 0);
        wbuf_put_bytes(out, buf, (size_t)n);
    }
}

void persist_close(persist_t *p)
{
    if (!p)
        return;
    journal_close(p->j);
    if (p->lock_fd >= 0)
        close(p->lock_fd);
    pthread_mutex_destroy(&p->snap_mu);
    free(p);
}

/* ------------------------------------------------------------------------ */
/* tallyd --check                                                           */
/* ------------------------------------------------------------------------ */

static int check_snapshot(const char *path, const mapped_t *m, FILE *out)
{
    snap_header_t h;
    const char *why = NULL;
    size_t off = 0;
    if (!snapfmt_parse_header(m->p, m->len, &h, &why)) {
        fprintf(out, "DAMAGED at offset 0: %s\n", why);
        return 1;
    }
    fprintf(out, "snapshot %s\n  format version %u, taken at %" PRId64 " ms, journal_seq %" PRIu64 "\n", path,
            h.version, h.created_ms, h.journal_seq);
    uint64_t per_type[TYPE_TAG_MAX + 1] = { 0 }, bytes_type[TYPE_TAG_MAX + 1] = { 0 };
    uint64_t records = 0, with_ttl = 0, count = 0;
    off = SNAP_HEADER_SIZE;
    for (;;) {
        snap_record_t r;
        size_t used = 0;
        persist_parse_t pr = snapfmt_parse_record(m->p + off, m->len - off, &r, &used, &count, &why);
        if (pr == PARSE_TRUNCATED) {
            fprintf(out, "DAMAGED at offset %zu: file ends inside a record (truncated)\n", off);
            return 1;
        }
        if (pr == PARSE_CORRUPT) {
            fprintf(out, "DAMAGED at offset %zu: %s\n", off, why);
            return 1;
        }
        if (pr == PARSE_END) {
            if (count != records) {
                fprintf(out, "DAMAGED at offset %zu: trailer counts %" PRIu64 " records, file holds %" PRIu64 "\n",
                        off, count, records);
                return 1;
            }
            if (off + used != m->len) {
                fprintf(out, "DAMAGED at offset %zu: unexpected bytes after the trailer\n", off + used);
                return 1;
            }
            if (XXH64(m->p, m->len - 8, 0) != le64_load(m->p + m->len - 8)) {
                fprintf(out, "DAMAGED at offset %zu: file checksum mismatch\n", m->len - 8);
                return 1;
            }
            break;
        }
        const ks_type_t *t = ks_type_by_tag(r.tag);
        if (!t) {
            fprintf(out, "DAMAGED at offset %zu: unknown type tag %u\n", off, r.tag);
            return 1;
        }
        void *v = t->decode(r.value, r.vlen, &why);
        if (!v) {
            fprintf(out, "DAMAGED at offset %zu: key '%.*s': %s\n", off, (int)r.klen, r.key, why);
            return 1;
        }
        t->free(v);
        per_type[r.tag]++;
        bytes_type[r.tag] += r.vlen;
        if (r.expire_ms)
            with_ttl++;
        records++;
        off += used;
    }
    fprintf(out, "  %" PRIu64 " keys (%" PRIu64 " with expiry), %zu bytes, checksums OK\n", records, with_ttl,
            m->len);
    for (unsigned t = 0; t <= TYPE_TAG_MAX; t++)
        if (per_type[t])
            fprintf(out, "  %-10s %10" PRIu64 " keys %14" PRIu64 " value bytes\n", ks_type_by_tag(t)->name,
                    per_type[t], bytes_type[t]);
    fprintf(out, "OK\n");
    return 0;
}

static int check_journal(const char *path, const mapped_t *m, FILE *out)
{
    journal_header_t h;
    const char *why = NULL;
    if (!journalfmt_parse_header(m->p, m->len, &h, &why)) {
        fprintf(out, "DAMAGED at offset 0: %s\n", why);
        return 1;
    }
    fprintf(out, "journal %s\n  format version %u, sequence %" PRIu64 "\n", path, h.version, h.seq);
    size_t off = JOURNAL_HEADER_SIZE;
    uint64_t n = 0;
    int64_t first_ns = 0, last_ns = 0;
    uint64_t by_method[API_OTHER + 1] = { 0 };
    while (off < m->len) {
        journal_req_t q;
        size_t used = 0;
        persist_parse_t pr = journalfmt_parse_record(m->p + off, m->len - off, &q, &used, &why);
        if ((pr == PARSE_TRUNCATED || pr == PARSE_CORRUPT) && torn_tail(m->p + off, m->len - off)) {
            fprintf(out, "  torn last record at offset %zu (%zu bytes): dropped at start-up\n", off, m->len - off);
            break;
        }
        if (pr != PARSE_OK) {
            fprintf(out, "DAMAGED at offset %zu: %s\n", off, why);
            return 1;
        }
        if (!n)
            first_ns = q.now_ns;
        last_ns = q.now_ns;
        if (q.method <= API_OTHER)
            by_method[q.method]++;
        n++;
        off += used;
    }
    fprintf(out, "  %" PRIu64 " records", n);
    if (n)
        fprintf(out, " from %" PRId64 " ms to %" PRId64 " ms", first_ns / 1000000, last_ns / 1000000);
    fprintf(out, "\n");
    for (unsigned i = 0; i <= API_OTHER; i++)
        if (by_method[i])
            fprintf(out, "  %-7s %" PRIu64 "\n", api_method_name((api_method_t)i), by_method[i]);
    fprintf(out, "OK\n");
    return 0;
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
        fprintf(out, "%s: DAMAGED at offset 0: %s\n", path,
                m.len == 0 ? "empty file" : "neither a tally snapshot nor a journal (bad magic)");
        rc = 1;
    }
    unmap_file(&m);
    return rc;
}
