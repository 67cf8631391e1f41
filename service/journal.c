/* journal.c - see journal.h for the guarantees; this file is the mechanics. */
#include "service/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "service/clock.h"
#include "service/log.h"

#define JOURNAL_RETRY_NS (100 * 1000000LL)   /* after a failed write, retry at most every 100 ms */
#define JOURNAL_WINDOW (4u << 20)             /* file space reserved and mapped at a time */
#define JOURNAL_KEEP_BUF (64u << 10)          /* the write buffer is kept between flushes up to this size */
#define JOURNAL_PREFAULT (64u << 10)          /* window made writable ahead of the records at a time */
#define JOURNAL_BEHIND_NS (100 * 1000000LL)   /* everysec: write-back started every 100 ms ... */
#define JOURNAL_SYNC_NS (1000 * 1000000LL)    /* ... and an fdatasync every second */

/*
 * A journal file is written through a shared memory mapping of space
 * reserved in advance (posix_fallocate), 4 MiB at a time: "writing" a record
 * is a memcpy into the page cache, which survives the process dying just as
 * a write() would, without a system call per request.  A full disk shows up
 * when the space is reserved - by journal_reserve(), before the change is
 * applied - as ENOSPC, never as SIGBUS on a store.
 *
 * Each record's payload is copied first and its 8-byte frame (length,
 * checksum) stored last, so after a kill -9 every record with a frame is
 * whole and the reserved space not yet used reads as zeros.  On close the
 * file gets a seal record (core/persist_fmt.h) and is cut to its data.
 *
 * `end` and `alloc` are atomics: the writer advances `end` outside the
 * journal mutex while metrics read it; `alloc` only grows, under the mutex.
 */
typedef struct jfile {
    int fd;
    uint8_t *map;           /* the mapped window, or NULL (writer only) */
    uint64_t map_off;       /* its offset in the file (a multiple of the window) */
    _Atomic uint64_t end;   /* bytes of data in the file, header included */
    _Atomic uint64_t alloc; /* bytes reserved (the file's size) */
    uint64_t records;       /* request records in the file (writer only) */
    uint64_t faulted;       /* file offset up to which the window is already writable (writer only) */
    uint64_t released;      /* file offset below which the window's pages are unmapped again (writer only) */
} jfile_t;

/* A new journal file: its header written, space reserved after it. */
static void jfile_init(jfile_t *f, int fd)
{
    f->fd = fd;
    f->map = NULL;
    f->map_off = 0;
    f->records = 0;
    f->faulted = 0;
    f->released = 0;
    off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
    atomic_store(&f->end, fd >= 0 ? (uint64_t)JOURNAL_HEADER_SIZE : 0);
    atomic_store(&f->alloc, size > 0 ? (uint64_t)size : 0);
}

/* dst takes src's file; src becomes empty.  Under the journal mutex. */
static void jfile_move(jfile_t *dst, jfile_t *src)
{
    dst->fd = src->fd;
    dst->map = src->map;
    dst->map_off = src->map_off;
    dst->records = src->records;
    dst->faulted = src->faulted;
    dst->released = src->released;
    atomic_store(&dst->end, atomic_load(&src->end));
    atomic_store(&dst->alloc, atomic_load(&src->alloc));
    jfile_init(src, -1);
}

/* Makes the file's reserved size at least `need` bytes (call with the journal
 * mutex held): the rest of the current window when the disk has room, else
 * whole pages.  Returns 0 or an errno (ENOSPC, EFBIG...). */
static int jfile_grow(jfile_t *f, uint64_t need)
{
    uint64_t alloc = atomic_load(&f->alloc);
    if (need <= alloc)
        return 0;
    uint64_t win_end = (need + JOURNAL_WINDOW - 1) & ~(uint64_t)(JOURNAL_WINDOW - 1);
    if (posix_fallocate(f->fd, (off_t)alloc, (off_t)(win_end - alloc)) == 0) {
        atomic_store(&f->alloc, win_end);
        return 0;
    }
    uint64_t want = (need + JOURNAL_PAGE - 1) & ~(uint64_t)(JOURNAL_PAGE - 1);
    int e = posix_fallocate(f->fd, (off_t)alloc, (off_t)(want - alloc));
    if (e)
        return e;
    atomic_store(&f->alloc, want);
    return 0;
}

/* Writes one framed record (n bytes at p) at offset `at` through the page
 * cache with the ordering of every record: payload first, frame last.
 * Returns 0 or an errno. */
static int record_pwrite(int fd, const uint8_t *p, size_t n, uint64_t at)
{
    if (pwrite(fd, p + JOURNAL_FRAME_SIZE, n - JOURNAL_FRAME_SIZE, (off_t)(at + JOURNAL_FRAME_SIZE)) !=
            (ssize_t)(n - JOURNAL_FRAME_SIZE) ||
        pwrite(fd, p, JOURNAL_FRAME_SIZE, (off_t)at) != JOURNAL_FRAME_SIZE)
        return errno ? errno : EIO;
    return 0;
}

/* Makes the window's pages up to `upto` (and JOURNAL_PREFAULT beyond)
 * writable in one system call (MADV_POPULATE_WRITE), rather than one page
 * fault per fresh page as records reach it.  Only reserved space: the pages
 * read as zeros either way. */
static void jfile_prefault(jfile_t *f, uint64_t upto)
{
    uint64_t from = f->faulted > f->map_off ? f->faulted : f->map_off;
    uint64_t to = ((upto + JOURNAL_PAGE - 1) & ~(uint64_t)(JOURNAL_PAGE - 1)) + JOURNAL_PREFAULT;
    uint64_t alloc = atomic_load(&f->alloc) & ~(uint64_t)(JOURNAL_PAGE - 1);
    if (to > f->map_off + JOURNAL_WINDOW)
        to = f->map_off + JOURNAL_WINDOW;
    if (to > alloc)
        to = alloc;
    from &= ~(uint64_t)(JOURNAL_PAGE - 1);
    if (to > from) {
        /* hints, both (faults still work): the pages come into the page
         * cache in one batch (reserved space reads as zeros, no I/O), then
         * become writable - a third cheaper than faulting them in one by
         * one, which the window's MADV_RANDOM would otherwise do */
        (void)readahead(f->fd, (off64_t)from, to - from);
        (void)madvise(f->map + (from - f->map_off), to - from, MADV_POPULATE_WRITE);
    }
    f->faulted = to > upto ? to : upto;
    /* The pages the records have left behind (all but the last
     * JOURNAL_PREFAULT) leave the process's mapping: their data stays in
     * the page cache, dirty until written back, as a write() would leave
     * it, instead of counting in tallyd's resident set - up to the whole
     * 4 MiB window, 4 bytes a key after loading a million. */
    uint64_t keep = upto & ~(uint64_t)(JOURNAL_PAGE - 1);
    uint64_t drop_to = keep > f->map_off + JOURNAL_PREFAULT ? keep - JOURNAL_PREFAULT : f->map_off;
    uint64_t drop_from = f->released > f->map_off ? f->released : f->map_off;
    if (drop_to > drop_from) {
        (void)madvise(f->map + (drop_from - f->map_off), drop_to - drop_from, MADV_DONTNEED);
        f->released = drop_to;
    }
}

/* Stores one framed record (n bytes at p) at the end of the file's data:
 * payload first, frame last.  The space is already reserved. */
static int jfile_put(jfile_t *f, const uint8_t *p, size_t n)
{
    uint64_t end = atomic_load_explicit(&f->end, memory_order_relaxed);
    uint64_t off = end & ~(uint64_t)(JOURNAL_WINDOW - 1);
    if (end + n <= off + JOURNAL_WINDOW) {
        if (!f->map || f->map_off != off) {
            void *m = mmap(NULL, JOURNAL_WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, (off_t)off);
            if (m == MAP_FAILED)
                return errno;
            /* no read-ahead: the first fault in a fresh window would read
             * ahead (zero-fill) up to read_ahead_kb of reserve at once - on
             * a disk with 8 MiB of read-ahead, 1.5 ms in one request */
            (void)madvise(m, JOURNAL_WINDOW, MADV_RANDOM);
            if (f->map)
                munmap(f->map, JOURNAL_WINDOW);
            f->map = m;
            f->map_off = off;
            f->faulted = off;
            f->released = off;
        }
        if (end + n > f->faulted)
            jfile_prefault(f, end + n);
        uint8_t *dst = f->map + (end - off);
        memcpy(dst + JOURNAL_FRAME_SIZE, p + JOURNAL_FRAME_SIZE, n - JOURNAL_FRAME_SIZE);
        atomic_signal_fence(memory_order_release);
        uint64_t frame;
        memcpy(&frame, p, sizeof(frame));
        memcpy(dst, &frame, sizeof(frame));   /* one 8-byte store */
    } else {
        /* a record across windows goes through the page cache the same way */
        int e = record_pwrite(f->fd, p, n, end);
        if (e)
            return e;
    }
    atomic_store_explicit(&f->end, end + n, memory_order_relaxed);
    return 0;
}

/* Copies whole records (n bytes of them) to the end of the file's data; *done
 * says how many bytes made it.  Space not reserved by journal_reserve (never
 * expected) is reserved here, under mu.  Returns 0 or an errno. */
static int jfile_write(journal_t *j, jfile_t *f, const uint8_t *p, size_t n, size_t *done);

/* Appends the seal, unmaps, cuts the file to its data, syncs and closes.
 * Without a seal (`seal` false) the unused reserve is kept, so the file
 * still reads as "not closed" rather than "cut".  Returns 0 or errno.  The
 * fd field is left for the caller to reset under the journal mutex. */
static int jfile_close(jfile_t *f, bool seal, uint64_t seq)
{
    if (f->fd < 0)
        return 0;
    int e = 0;
    if (f->map)
        munmap(f->map, JOURNAL_WINDOW);
    f->map = NULL;
    uint64_t end = atomic_load(&f->end);
    if (seal) {
        wbuf_t b = WBUF_INIT;
        journalfmt_put_seal(&b, f->records, end, seq + 1);
        if (b.oom)
            e = ENOMEM;
        else if (end + b.len > atomic_load(&f->alloc) && posix_fallocate(f->fd, (off_t)end, (off_t)b.len) != 0)
            e = ENOSPC;
        else
            e = record_pwrite(f->fd, b.data, b.len, end);
        size_t seal_len = b.len;
        wbuf_free(&b);
        if (e)
            return e;   /* still open: the caller retries the seal */
        end += seal_len;
    }
    if (!e && seal && ftruncate(f->fd, (off_t)end) != 0)
        e = errno;
    if (fdatasync(f->fd) != 0 && !e)
        e = errno;
    close(f->fd);
    return e;
}

struct journal {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    fsync_mode_t mode;
    jfile_t cur;            /* the file being appended to */
    jfile_t next;           /* after a rotation boundary */
    uint64_t seq;
    wbuf_t buf;             /* appended, not yet written; starts at LSN `written` */
    uint64_t appended;      /* LSN of the end of everything appended */
    uint64_t written;       /* LSN handed to the kernel */
    uint64_t synced;        /* LSN known to be on disk */
    uint64_t records;
    bool writing;           /* a thread is writing (the "writer") */
    int sync_busy;          /* fdatasync running outside the lock */
    bool rotating;          /* a boundary is set ... */
    uint64_t rotate_at;     /* ... at this LSN */
    uint64_t new_seq;
    uint64_t tail;          /* file offset the next appended byte lands at (in `next` while rotating) */
    _Atomic uint64_t reserved; /* bytes promised by journal_reserve, not yet released: grows
                                * under mu, shrinks without it (journal_release), so
                                * what a reader under mu sees is never less than what
                                * is still promised */
    bool closing;           /* the writer is closing the old file of a rotation */
    uint64_t behind;        /* offset in journal `behind_seq` up to which write-back was started */
    uint64_t behind_seq;
    bool failing;           /* the last write failed */
    int last_errno;
    bool no_space;          /* the last reservation found no space (journal_tick probes for it) */
    int64_t last_fail_ns;

    /* asynchronous waiters, served by the flusher thread */
    struct waiter {
        uint64_t lsn;
        int64_t deadline_ns;
        journal_done_fn done;
        void *ud;
    } *waiters;
    size_t nwaiters, waiters_cap;
    pthread_cond_t flush_cv;   /* wakes the flusher */
    pthread_t flusher;
    bool flusher_started;
    bool stopping;

    /* everysec: the syncer thread (syncer_main) */
    pthread_cond_t syncer_cv;
    pthread_t syncer;
    bool syncer_started;
    bool syncer_stopping;
};

static void *flusher_main(void *arg);
static void *syncer_main(void *arg);

static int jfile_write(journal_t *j, jfile_t *f, const uint8_t *p, size_t n, size_t *done)
{
    *done = 0;
    while (*done < n) {
        size_t rec = JOURNAL_FRAME_SIZE + le32_load(p + *done);
        uint64_t need = atomic_load_explicit(&f->end, memory_order_relaxed) + rec + JOURNAL_SEAL_SIZE;
        if (need > atomic_load(&f->alloc)) {
            pthread_mutex_lock(&j->mu);
            int e = jfile_grow(f, need);
            pthread_mutex_unlock(&j->mu);
            if (e)
                return e;
        }
        int e = jfile_put(f, p + *done, rec);
        if (e)
            return e;
        f->records++;
        *done += rec;
    }
    return 0;
}

/* A condition variable timed on the monotonic clock (deadline_in). */
static void cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

journal_t *journal_create(int fd, uint64_t seq, fsync_mode_t mode)
{
    journal_t *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    pthread_mutex_init(&j->mu, NULL);
    cond_init_mono(&j->cv);
    cond_init_mono(&j->flush_cv);
    cond_init_mono(&j->syncer_cv);
    jfile_init(&j->cur, fd);
    jfile_init(&j->next, -1);
    j->tail = atomic_load(&j->cur.end);
    j->seq = seq;
    j->mode = mode;
    j->flusher_started = pthread_create(&j->flusher, NULL, flusher_main, j) == 0;
    if (mode == FSYNC_EVERYSEC)
        j->syncer_started = pthread_create(&j->syncer, NULL, syncer_main, j) == 0;
    return j;
}

/* Puts unwritten bytes back in front of whatever was appended meanwhile. */
static void requeue(journal_t *j, const uint8_t *p, size_t n)
{
    if (n == 0)
        return;
    wbuf_t nb = WBUF_INIT;
    wbuf_put_bytes(&nb, p, n);
    wbuf_put_bytes(&nb, j->buf.data, j->buf.len);
    if (nb.oom) {
        /* cannot even keep them: the journal stops acknowledging for good */
        log_error("journal: out of memory keeping %zu unwritten bytes", n);
        wbuf_free(&nb);
        j->failing = true;
        j->last_errno = ENOMEM;
        return;
    }
    wbuf_free(&j->buf);
    j->buf = nb;
}

/* Becomes the writer: writes what is buffered (crossing a rotation boundary
 * if one is set) and fdatasyncs if asked.  Called and returns with mu held. */
static void flush_locked(journal_t *j, bool want_sync)
{
    j->writing = true;
    wbuf_t b = j->buf;
    j->buf = (wbuf_t)WBUF_INIT;
    uint64_t base = j->written;
    bool rot = j->rotating;
    uint64_t rat = j->rotate_at;
    jfile_t *f = &j->cur, *nf = &j->next;
    /* sync when asked and something written is not yet synced, even if
     * nothing new is buffered (an earlier write may not have synced) */
    bool need_sync = want_sync && (b.len > 0 || j->synced < base);
    pthread_mutex_unlock(&j->mu);

    size_t first = rot ? (size_t)(rat - base) : b.len;
    size_t done = 0, more = 0;
    int err = jfile_write(j, f, b.data, first, &done);
    bool rotated = false;
    if (!err && rot) {
        /* the old file is complete: seal it, make it durable, then switch.
         * the syncer must not fdatasync its fd meanwhile. */
        pthread_mutex_lock(&j->mu);
        while (j->sync_busy)
            pthread_cond_wait(&j->cv, &j->mu);
        j->closing = true;
        uint64_t old_seq = j->seq;
        pthread_mutex_unlock(&j->mu);
        err = jfile_close(f, true, old_seq);
        pthread_mutex_lock(&j->mu);
        j->closing = false;
        if (!err) {
            f->fd = -1;
            rotated = true;
        }
        pthread_mutex_unlock(&j->mu);
        if (rotated)
            f = nf;
    }
    if (!err && first < b.len) {
        err = jfile_write(j, f, b.data + first, b.len - first, &more);
        done += more;
    }
    bool synced = false;
    if (!err && need_sync) {
        if (fdatasync(f->fd) != 0)
            err = errno;
        else
            synced = true;
    }

    pthread_mutex_lock(&j->mu);
    if (rotated) {
        jfile_move(&j->cur, &j->next);
        j->seq = j->new_seq;
        j->rotating = false;
    }
    j->written = base + done;
    if (synced)
        j->synced = j->written;
    else if (rotated && rat > j->synced)
        j->synced = rat;   /* the old file was synced before the switch */
    if (err) {
        requeue(j, b.data + done, b.len - done);
        if (!j->failing)
            log_error("journal: writing journal %llu failed: %s (retrying; requests wait and get 503)",
                      (unsigned long long)j->seq, strerror(err));
        j->failing = true;
        j->last_errno = err;
        j->last_fail_ns = clock_mono_ns();
    } else if (j->failing) {
        log_info("journal: writes succeed again");
        j->failing = false;
    }
    /* nothing was appended meanwhile: the buffer is kept for the next
     * records (a change is flushed at once, so otherwise every change would
     * allocate it again), unless a burst made it large */
    if (!j->buf.data && b.cap <= JOURNAL_KEEP_BUF) {
        b.len = 0;
        b.oom = false;
        j->buf = b;
    } else {
        wbuf_free(&b);
    }
    j->writing = false;
    pthread_cond_broadcast(&j->cv);
}

uint64_t journal_append(journal_t *j, const journal_req_t *req)
{
    pthread_mutex_lock(&j->mu);
    size_t before = j->buf.len;
    journalfmt_put_request(&j->buf, req);
    uint64_t lsn = 0;
    if (j->buf.oom) {
        j->buf.oom = false;
        j->buf.len = before;
    } else {
        j->appended += j->buf.len - before;
        j->tail += j->buf.len - before;
        j->records++;
        lsn = j->appended;
    }
    pthread_mutex_unlock(&j->mu);
    return lsn;
}

static struct timespec deadline_in(int64_t ns)
{
    int64_t t = clock_mono_ns() + ns;
    struct timespec ts = { (time_t)(t / 1000000000LL), (long)(t % 1000000000LL) };
    return ts;
}

/* Waits (mu held) until `lsn` is written, or synced when `sync`. */
static bool wait_locked(journal_t *j, uint64_t lsn, bool sync, int timeout_ms, const char **err)
{
    int64_t start = clock_mono_ns();
    for (;;) {
        uint64_t have = sync ? j->synced : j->written;
        if (have >= lsn)
            return true;
        if (clock_mono_ns() - start >= (int64_t)timeout_ms * 1000000LL) {
            *err = j->failing ? strerror(j->last_errno) : "timed out waiting for the journal";
            return false;
        }
        bool may_retry = !j->failing || clock_mono_ns() - j->last_fail_ns >= JOURNAL_RETRY_NS;
        if (!j->writing && may_retry) {
            flush_locked(j, sync);
            continue;
        }
        struct timespec ts = deadline_in(j->failing ? JOURNAL_RETRY_NS : 50 * 1000000LL);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
}

bool journal_wait(journal_t *j, uint64_t lsn, int timeout_ms, const char **err)
{
    pthread_mutex_lock(&j->mu);
    bool ok = wait_locked(j, lsn, j->mode == FSYNC_ALWAYS, timeout_ms, err);
    pthread_mutex_unlock(&j->mu);
    return ok;
}

/* mu held */
static bool try_locked(journal_t *j, uint64_t lsn)
{
    bool sync = j->mode == FSYNC_ALWAYS;
    if ((sync ? j->synced : j->written) >= lsn)
        return true;
    /* everysec/no on a healthy disk: one write() here is cheaper than a
     * hand-off to the flusher */
    if (!sync && !j->failing && j->flusher_started) {
        while (j->writing)
            pthread_cond_wait(&j->cv, &j->mu);
        if (j->written < lsn && !j->failing)
            flush_locked(j, false);
        return j->written >= lsn;
    }
    return false;
}

bool journal_try(journal_t *j, uint64_t lsn)
{
    pthread_mutex_lock(&j->mu);
    bool ok = try_locked(j, lsn);
    pthread_mutex_unlock(&j->mu);
    return ok;
}

bool journal_wait_async(journal_t *j, uint64_t lsn, int timeout_ms, journal_done_fn done, void *ud)
{
    pthread_mutex_lock(&j->mu);
    bool sync = j->mode == FSYNC_ALWAYS;
    if (try_locked(j, lsn)) {
        pthread_mutex_unlock(&j->mu);
        return true;
    }
    if (!j->flusher_started) {
        const char *err = NULL;
        bool ok = wait_locked(j, lsn, sync, timeout_ms, &err);
        pthread_mutex_unlock(&j->mu);
        done(ud, ok, err);
        return false;
    }
    if (j->nwaiters == j->waiters_cap) {
        size_t nc = j->waiters_cap ? j->waiters_cap * 2 : 64;
        struct waiter *w = realloc(j->waiters, nc * sizeof(*w));
        if (!w) {
            pthread_mutex_unlock(&j->mu);
            done(ud, false, "out of memory waiting for the journal");
            return false;
        }
        j->waiters = w;
        j->waiters_cap = nc;
    }
    j->waiters[j->nwaiters++] = (struct waiter){ lsn, clock_mono_ns() + (int64_t)timeout_ms * 1000000LL, done, ud };
    pthread_cond_signal(&j->flush_cv);
    pthread_mutex_unlock(&j->mu);
    return false;
}

/* The flusher: writes (and under fsync=always syncs) whatever is pending
 * while anyone waits, then answers every waiter it satisfied or that timed
 * out.  Requests arriving during an fdatasync form the next batch. */
static void *flusher_main(void *arg)
{
    journal_t *j = arg;
    struct waiter *ready = NULL;
    size_t ready_cap = 0;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!j->stopping && j->nwaiters == 0)
            pthread_cond_wait(&j->flush_cv, &j->mu);
        if (j->stopping && j->nwaiters == 0)
            break;
        bool sync = j->mode == FSYNC_ALWAYS;
        bool may_retry = !j->failing || clock_mono_ns() - j->last_fail_ns >= JOURNAL_RETRY_NS;
        if (!j->writing && may_retry && (j->written < j->appended || (sync && j->synced < j->written)))
            flush_locked(j, sync);
        /* answer the satisfied and the timed out */
        uint64_t have = sync ? j->synced : j->written;
        int64_t now = clock_mono_ns();
        size_t nready = 0, keep = 0;
        if (ready_cap < j->nwaiters) {
            struct waiter *r = realloc(ready, j->nwaiters * sizeof(*r));
            if (r) {
                ready = r;
                ready_cap = j->nwaiters;
            }
        }
        for (size_t i = 0; i < j->nwaiters; i++) {
            struct waiter w = j->waiters[i];
            bool finished = w.lsn <= have || now >= w.deadline_ns || j->stopping;
            if (finished && nready < ready_cap) {
                w.lsn = w.lsn <= have;   /* reuse as the outcome */
                ready[nready++] = w;
            } else {
                j->waiters[keep++] = w;
            }
        }
        j->nwaiters = keep;
        const char *err = j->failing ? strerror(j->last_errno) : "timed out waiting for the journal";
        pthread_mutex_unlock(&j->mu);
        for (size_t i = 0; i < nready; i++)
            ready[i].done(ready[i].ud, ready[i].lsn != 0, ready[i].lsn ? NULL : err);
        pthread_mutex_lock(&j->mu);
        if (j->nwaiters > 0 && (j->failing || j->writing)) {
            struct timespec ts = deadline_in(j->failing ? JOURNAL_RETRY_NS / 4 : 1000000LL);
            pthread_cond_timedwait(&j->flush_cv, &j->mu, &ts);
        }
    }
    pthread_mutex_unlock(&j->mu);
    free(ready);
    return NULL;
}

bool journal_sync(journal_t *j, const char **err)
{
    pthread_mutex_lock(&j->mu);
    bool ok = wait_locked(j, j->appended, true, 10000, err);
    pthread_mutex_unlock(&j->mu);
    return ok;
}

/* The current file's descriptor, for a system call made outside mu so that
 * requests keep writing meanwhile (call with mu held; it is released): a
 * rotation waits to close the file until fd_return (which takes mu again). */
static int fd_borrow(journal_t *j)
{
    j->sync_busy++;
    int fd = j->cur.fd;
    pthread_mutex_unlock(&j->mu);
    return fd;
}

static void fd_return(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    j->sync_busy--;
    pthread_cond_broadcast(&j->cv);
}

/* everysec: makes what is written so far durable (one fdatasync outside mu). */
static void sync_everysec(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    if (j->written > j->synced && !j->sync_busy && !j->closing && j->cur.fd >= 0) {
        uint64_t seq = j->seq;
        uint64_t target = j->written;
        int rc = fdatasync(fd_borrow(j));
        int e = errno;
        fd_return(j);
        if (rc == 0 && seq == j->seq && target > j->synced)
            j->synced = target;
        else if (rc != 0)
            log_error("journal: fdatasync failed: %s", strerror(e));
    }
    pthread_mutex_unlock(&j->mu);
}

void journal_tick(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    if (j->buf.len > 0 && !j->writing && (!j->failing || clock_mono_ns() - j->last_fail_ns >= JOURNAL_RETRY_NS))
        flush_locked(j, false);
    /* space refused: is there a page now?  (so /readyz knows before the next change) */
    if (j->no_space && !j->rotating)
        j->no_space = jfile_grow(&j->cur, j->tail + atomic_load(&j->reserved) + JOURNAL_SEAL_SIZE + JOURNAL_PAGE) != 0;
    pthread_mutex_unlock(&j->mu);
    if (j->mode == FSYNC_EVERYSEC && !j->syncer_started)
        sync_everysec(j);   /* no syncer thread could be started: the promise is kept from here */
}

/* everysec: starts the write-back (not a sync) of the whole pages written
 * since the last call, so that the once-a-second fdatasync is left a tenth
 * of the work and its CPU cost comes in ten small pieces rather than one. */
static void write_behind(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    if (j->behind_seq != j->seq) {
        j->behind_seq = j->seq;
        j->behind = 0;
    }
    uint64_t from = j->behind;
    /* whole pages only: the writer does not touch them again, so starting
     * their write-back costs it no write-protect fault */
    uint64_t to = atomic_load(&j->cur.end) & ~(uint64_t)(JOURNAL_PAGE - 1);
    if (!j->closing && j->cur.fd >= 0 && to > from) {
        uint64_t seq = j->seq;
        (void)sync_file_range(fd_borrow(j), (off_t)from, (off_t)(to - from), SYNC_FILE_RANGE_WRITE);   /* a hint */
        fd_return(j);
        if (seq == j->seq)
            j->behind = to;
    }
    pthread_mutex_unlock(&j->mu);
}

/* The syncer (fsync=everysec only): write-back every 100 ms and an
 * fdatasync every second, on a thread of its own at the lowest CPU priority
 * (nice 19, as the periodic snapshot).  Starting write-back costs CPU in the
 * caller (walking and write-protecting the dirty pages, building the I/O):
 * 0.3-0.7 ms each time at 55 000 changes a second.  From the housekeeping
 * thread, which shares the request thread's core when tallyd is given one,
 * that was a stall every 100 ms of 20-100 requests; at nice 19 it runs in
 * the time requests leave.  A saturated core still gives it its share of
 * CPU (about 1.4% against one busy thread), several times what it needs,
 * so the fdatasync stays about a second apart. */
static void *syncer_main(void *arg)
{
    journal_t *j = arg;
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
    int64_t next_sync = clock_mono_ns() + JOURNAL_SYNC_NS;
    pthread_mutex_lock(&j->mu);
    while (!j->syncer_stopping) {
        struct timespec ts = deadline_in(JOURNAL_BEHIND_NS);
        pthread_cond_timedwait(&j->syncer_cv, &j->mu, &ts);
        if (j->syncer_stopping)
            break;
        pthread_mutex_unlock(&j->mu);
        int64_t now = clock_mono_ns();
        if (now >= next_sync) {
            sync_everysec(j);
            next_sync = now + JOURNAL_SYNC_NS;
        } else {
            write_behind(j);
        }
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

bool journal_rotate(journal_t *j, int new_fd, uint64_t new_seq, const char **err)
{
    pthread_mutex_lock(&j->mu);
    jfile_init(&j->next, new_fd);
    /* the new file must hold what is already promised to requests */
    uint64_t tail = atomic_load(&j->next.end);
    int e = jfile_grow(&j->next, tail + atomic_load(&j->reserved) + JOURNAL_SEAL_SIZE);
    if (e) {
        *err = strerror(e);
        close(new_fd);
        jfile_init(&j->next, -1);
        pthread_mutex_unlock(&j->mu);
        return false;
    }
    j->rotating = true;
    j->rotate_at = j->appended;
    j->tail = tail;
    j->new_seq = new_seq;
    pthread_mutex_unlock(&j->mu);
    return true;
}

bool journal_reserve(journal_t *j, uint64_t bytes, const char **err)
{
    pthread_mutex_lock(&j->mu);
    int e = 0;
    if (j->failing && j->last_errno != ENOSPC && j->last_errno != EFBIG)
        e = j->last_errno;   /* an I/O error, not space: the change could not be made durable */
    else
        e = jfile_grow(j->rotating ? &j->next : &j->cur,
                       j->tail + atomic_load(&j->reserved) + bytes + JOURNAL_SEAL_SIZE);
    if (!e)
        atomic_fetch_add(&j->reserved, bytes);
    j->no_space = e != 0;
    pthread_mutex_unlock(&j->mu);
    if (e)
        *err = strerror(e);
    return e == 0;
}

/* Without mu: one of the round trips of every change saved.  A concurrent
 * journal_reserve or journal_rotate (under mu) then sees a promise at most
 * as large as before, which only ever grows the file more than needed. */
void journal_release(journal_t *j, uint64_t bytes)
{
    uint64_t have = atomic_load(&j->reserved);
    while (!atomic_compare_exchange_weak(&j->reserved, &have, have - (bytes < have ? bytes : have)))
        ;
}

bool journal_finish_rotation(journal_t *j, const char **err)
{
    pthread_mutex_lock(&j->mu);
    int64_t start = clock_mono_ns();
    bool ok = true;
    while (j->rotating) {
        if (clock_mono_ns() - start > 10 * 1000000000LL) {
            *err = j->failing ? strerror(j->last_errno) : "timed out finishing the journal";
            ok = false;
            break;
        }
        bool may_retry = !j->failing || clock_mono_ns() - j->last_fail_ns >= JOURNAL_RETRY_NS;
        if (!j->writing && may_retry) {
            flush_locked(j, false);
            continue;
        }
        struct timespec ts = deadline_in(JOURNAL_RETRY_NS);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    pthread_mutex_unlock(&j->mu);
    return ok;
}

/* Stops one of the journal's threads, if it was started: its flag set
 * under mu, its condition signalled, then joined. */
static void thread_stop(journal_t *j, bool started, pthread_t t, bool *flag, pthread_cond_t *cv)
{
    if (!started)
        return;
    pthread_mutex_lock(&j->mu);
    *flag = true;
    pthread_cond_signal(cv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(t, NULL);
}

void journal_close(journal_t *j)
{
    if (!j)
        return;
    thread_stop(j, j->syncer_started, j->syncer, &j->syncer_stopping, &j->syncer_cv);
    pthread_cond_destroy(&j->syncer_cv);
    const char *err;
    if (!journal_sync(j, &err))
        log_error("journal: final sync failed: %s", err);
    thread_stop(j, j->flusher_started, j->flusher, &j->stopping, &j->flush_cv);
    free(j->waiters);
    pthread_cond_destroy(&j->flush_cv);
    pthread_mutex_lock(&j->mu);
    while (j->writing || j->sync_busy)
        pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
    int e = jfile_close(&j->cur, !j->failing && !j->rotating, j->seq);
    if (e && j->cur.fd >= 0)
        close(j->cur.fd);
    if (e)
        log_error("journal: closing journal %llu failed: %s", (unsigned long long)j->seq, strerror(e));
    jfile_close(&j->next, false, 0);
    wbuf_free(&j->buf);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

bool journal_rotation_pending(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    bool r = j->rotating;
    pthread_mutex_unlock(&j->mu);
    return r;
}

uint64_t journal_seq(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    uint64_t s = j->seq;
    pthread_mutex_unlock(&j->mu);
    return s;
}

journal_stats_t journal_stats(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    journal_stats_t st = {
        .seq = j->seq,
        .bytes = atomic_load(&j->cur.end),
        .records = j->records,
        .unsynced = j->written - j->synced,
        .healthy = !j->failing,
        .no_space = j->no_space,
    };
    pthread_mutex_unlock(&j->mu);
    return st;
}
