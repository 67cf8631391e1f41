/* persist_snapshot.c - writing snapshots (service/persist.h): the file,
 * shard by shard, at a barrier that begins the next journal; one for a
 * replica, into memory; the periodic one, on a thread of its own. */
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/keyspace.h"
#include "service/clock.h"
#include "service/file.h"
#include "service/log.h"
#include "service/persist_int.h"

#define SNAP_DRAIN_BUDGET (256 * 1024)    /* bytes encoded per shard-lock hold */
#define SNAP_WRITEBACK_STEP (16u << 20)  /* bytes written between writeback starts */

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
        snprintf(err, errlen, "%s (nothing has changed since the snapshot and journals on disk)", PERSIST_NO_JOURNAL);
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
    if (p->j && persist_create_journal(p, seq, &nfd, err, errlen) != 0)
        return false;

    /* 2. the barrier */
    ks_lock_all(p->ks);
    if (p->j && !journal_rotate(p->j, nfd, seq, &jerr)) {
        ks_unlock_all(p->ks);
        char jp[600];
        persist_journal_path(p, seq, jp, sizeof(jp));
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
    if (persist_list_journals(p, &seqs, &nseq) == 0) {
        for (size_t i = 0; i < nseq; i++) {
            if (seqs[i] >= seq)
                continue;
            char jp[600];
            persist_journal_path(p, seqs[i], jp, sizeof(jp));
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
        persist_epoch_record(epoch, clock_now_ns(), buf, &rec);
        if (!persist_epoch_journal(p, &rec, why, sizeof(why)))
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

/* The periodic snapshot, on a thread of its own at the lowest CPU priority
 * (nice 19: lowering one's own needs no privilege), so that on a busy core
 * it takes the time requests leave rather than a share of theirs - one
 * core serving 40 000 requests a second waited up to 6 ms for a snapshot
 * of 190 000 keys.  A shard it holds when preempted is given back as soon
 * as a request waits for it: the request thread sleeps, so it runs. */
void persist_periodic_snapshot(persist_t *p)
{
    snapshot_stats_t st;
    char err[512];
    persist_snapshot(p, &st, err, sizeof(err));   /* logs its outcome */
}

void *persist_periodic_snapshot_main(void *arg)
{
    persist_t *p = arg;
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
    persist_periodic_snapshot(p);
    atomic_store(&p->periodic_done, true);
    return NULL;
}

/* Joins the periodic snapshot's thread once it has finished (`wait`: even
 * if it has not). */
void persist_periodic_join(persist_t *p, bool wait)
{
    if (p->periodic_running && (wait || atomic_load(&p->periodic_done))) {
        pthread_join(p->periodic, NULL);
        p->periodic_running = false;
    }
}
