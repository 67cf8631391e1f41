/* persist.c - see persist.h for the files and the protocol; this file is
 * the data directory's lifecycle: opening it (the lock, the load, the
 * journal), the housekeeping, what /info and /metrics show, closing it.
 * The work is done in the files persist_int.h lists. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "service/clock.h"
#include "service/file.h"
#include "service/log.h"
#include "service/persist_int.h"

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

    if (!persist_load(p, err, errlen))
        goto fail;
    if (p->journal_on) {
        int je = persist_journal_start(p, err, errlen);
        if (je && !persist_space_error(je))
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

void persist_tick(persist_t *p)
{
    int64_t now = clock_mono_ns();
    int64_t sec = now / 1000000000LL;
    if (p->journal_on && !p->j && sec != p->last_tick_sec)
        persist_journal_retry(p, now);
    if (p->j && sec != p->last_tick_sec)
        journal_tick(p->j);
    p->last_tick_sec = sec;
    persist_periodic_join(p, false);
    if (!p->periodic_running && p->snapshot_interval > 0 && atomic_load(&p->dirty) > 0 &&
        now - p->last_snapshot_mono >= (int64_t)p->snapshot_interval * 1000000000LL) {
        atomic_store(&p->periodic_done, false);
        p->periodic_running = pthread_create(&p->periodic, NULL, persist_periodic_snapshot_main, p) == 0;
        if (!p->periodic_running)
            persist_periodic_snapshot(p);   /* no thread: here, at the housekeeping's priority */
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
    persist_periodic_join(p, true);
    journal_close(p->j);
    if (p->lock_fd >= 0)
        close(p->lock_fd);
    pthread_mutex_destroy(&p->snap_mu);
    free(p);
}
