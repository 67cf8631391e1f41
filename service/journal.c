/* journal.c - see journal.h for the guarantees; this file is the mechanics. */
#include "service/journal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "service/clock.h"
#include "service/log.h"

#define JOURNAL_RETRY_NS (100 * 1000000LL)   /* after a failed write, retry at most every 100 ms */

struct journal {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    fsync_mode_t mode;
    int fd;
    uint64_t seq;
    uint64_t file_bytes;
    wbuf_t buf;             /* appended, not yet written; starts at LSN `written` */
    uint64_t appended;      /* LSN of the end of everything appended */
    uint64_t written;       /* LSN handed to the kernel */
    uint64_t synced;        /* LSN known to be on disk */
    uint64_t records;
    bool writing;           /* a thread is writing (the "writer") */
    int sync_busy;          /* fdatasync running outside the lock */
    bool rotating;          /* a boundary is set ... */
    uint64_t rotate_at;     /* ... at this LSN */
    int new_fd;
    uint64_t new_seq;
    bool failing;           /* the last write failed */
    int last_errno;
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
};

static void *flusher_main(void *arg);

journal_t *journal_create(int fd, uint64_t seq, fsync_mode_t mode)
{
    journal_t *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    j->fd = fd;
    j->seq = seq;
    j->mode = mode;
    j->file_bytes = (uint64_t)lseek(fd, 0, SEEK_END);
    j->new_fd = -1;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->flush_cv, &ca);
    pthread_condattr_destroy(&ca);
    j->flusher_started = pthread_create(&j->flusher, NULL, flusher_main, j) == 0;
    return j;
}

static int write_all(int fd, const uint8_t *p, size_t n, size_t *done)
{
    *done = 0;
    while (*done < n) {
        ssize_t w = write(fd, p + *done, n - *done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return EIO;
        *done += (size_t)w;
    }
    return 0;
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
    int fd = j->fd, nfd = j->new_fd;
    /* sync when asked and something written is not yet synced, even if
     * nothing new is buffered (an earlier write may not have synced) */
    bool need_sync = want_sync && (b.len > 0 || j->synced < base);
    pthread_mutex_unlock(&j->mu);

    size_t first = rot ? (size_t)(rat - base) : b.len;
    size_t done = 0, more = 0;
    int err = write_all(fd, b.data, first, &done);
    bool rotated = false;
    if (!err && rot) {
        /* the old file is complete: make it durable, then switch */
        if (fdatasync(fd) != 0) {
            err = errno;
        } else {
            pthread_mutex_lock(&j->mu);
            while (j->sync_busy)
                pthread_cond_wait(&j->cv, &j->mu);
            pthread_mutex_unlock(&j->mu);
            close(fd);
            rotated = true;
            fd = nfd;
        }
    }
    if (!err && first < b.len) {
        err = write_all(fd, b.data + first, b.len - first, &more);
        done += more;
    }
    bool synced = false;
    if (!err && need_sync) {
        if (fdatasync(fd) != 0)
            err = errno;
        else
            synced = true;
    }

    pthread_mutex_lock(&j->mu);
    if (rotated) {
        j->fd = nfd;
        j->seq = j->new_seq;
        j->new_fd = -1;
        j->rotating = false;
        j->file_bytes = JOURNAL_HEADER_SIZE + more;
    } else {
        j->file_bytes += done;
    }
    j->written = base + done;
    if (synced)
        j->synced = j->written;
    else if (rotated && rat > j->synced)
        j->synced = rat;   /* the old file was fdatasynced before the switch */
    if (err) {
        requeue(j, b.data + done, b.len - done);
        if (!j->failing)
            log_error("journal: write to journal %llu failed: %s (retrying; requests wait and get 503)",
                      (unsigned long long)j->seq, strerror(err));
        j->failing = true;
        j->last_errno = err;
        j->last_fail_ns = clock_mono_ns();
    } else if (j->failing) {
        log_info("journal: writes succeed again");
        j->failing = false;
    }
    wbuf_free(&b);
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

void journal_tick(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    if (j->buf.len > 0 && !j->writing && (!j->failing || clock_mono_ns() - j->last_fail_ns >= JOURNAL_RETRY_NS))
        flush_locked(j, false);
    if (j->mode == FSYNC_EVERYSEC && j->written > j->synced && !j->sync_busy) {
        /* fdatasync outside the lock so requests keep writing meanwhile */
        int fd = j->fd;
        uint64_t target = j->written;
        j->sync_busy++;
        pthread_mutex_unlock(&j->mu);
        int rc = fdatasync(fd);
        int e = errno;
        pthread_mutex_lock(&j->mu);
        j->sync_busy--;
        if (rc == 0 && fd == j->fd && target > j->synced)
            j->synced = target;
        else if (rc != 0)
            log_error("journal: fdatasync failed: %s", strerror(e));
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
}

void journal_rotate(journal_t *j, int new_fd, uint64_t new_seq)
{
    pthread_mutex_lock(&j->mu);
    j->rotating = true;
    j->rotate_at = j->appended;
    j->new_fd = new_fd;
    j->new_seq = new_seq;
    pthread_mutex_unlock(&j->mu);
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

void journal_close(journal_t *j)
{
    if (!j)
        return;
    const char *err;
    if (!journal_sync(j, &err))
        log_error("journal: final sync failed: %s", err);
    if (j->flusher_started) {
        pthread_mutex_lock(&j->mu);
        j->stopping = true;
        pthread_cond_signal(&j->flush_cv);
        pthread_mutex_unlock(&j->mu);
        pthread_join(j->flusher, NULL);
    }
    free(j->waiters);
    pthread_cond_destroy(&j->flush_cv);
    pthread_mutex_lock(&j->mu);
    while (j->writing || j->sync_busy)
        pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
    close(j->fd);
    if (j->new_fd >= 0)
        close(j->new_fd);
    wbuf_free(&j->buf);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

uint64_t journal_seq(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    uint64_t s = j->seq;
    pthread_mutex_unlock(&j->mu);
    return s;
}

uint64_t journal_bytes(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    uint64_t b = j->file_bytes;
    pthread_mutex_unlock(&j->mu);
    return b;
}

uint64_t journal_records(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    uint64_t r = j->records;
    pthread_mutex_unlock(&j->mu);
    return r;
}

bool journal_healthy(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    bool ok = !j->failing;
    pthread_mutex_unlock(&j->mu);
    return ok;
}
