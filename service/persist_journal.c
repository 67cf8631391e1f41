/* persist_journal.c - the journal as changes use it (service/persist.h):
 * starting it (again, after a start on a full disk), the hooks every change
 * goes through (space reserved before it is applied, its record appended,
 * the wait until it is durable), and the epoch record of a promotion. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "service/clock.h"
#include "service/log.h"
#include "service/persist_int.h"

/* Starts the journal at p->next_seq, sealing first a journal a crash left
 * open whose seal had to wait; 0 or the errno with err set. */
int persist_journal_start(persist_t *p, char *err, size_t errlen)
{
    if (p->seal_deferred) {
        int e = persist_seal_journal(p, p->seal_seq, &p->seal_sc, err, errlen);
        if (e)
            return e;
        p->seal_deferred = false;
    }
    int fd;
    int e = persist_create_journal(p, p->next_seq, &fd, err, errlen);
    if (e)
        return e;
    journal_t *j = journal_create(fd, p->next_seq, p->fsync);
    if (!j) {
        char path[600];
        persist_journal_path(p, p->next_seq, path, sizeof(path));
        close(fd);
        unlink(path);
        snprintf(err, errlen, "out of memory");
        return ENOMEM;
    }
    p->j = j;
    return 0;
}

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
bool persist_epoch_journal(persist_t *p, const journal_req_t *rec, char *err, size_t errlen)
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
    persist_epoch_record(epoch, clock_now_ns(), buf, rec);
    if (p->journal_on && !p->j) {
        snprintf(err, errlen, "cannot write the epoch record: %s", PERSIST_NO_JOURNAL);
        return false;
    }
    if (p->j && !persist_epoch_journal(p, rec, err, errlen))
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
        *err = PERSIST_NO_JOURNAL;
        return false;
    }
    return true;
}

const char *persist_unwritable(persist_t *p)
{
    journal_t *j = p->j;
    if (!j)
        return p->journal_on ? PERSIST_NO_JOURNAL : NULL;
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

/* A start on a full disk: tries again, once a second, to start the
 * journal; logs the wait once a minute. */
void persist_journal_retry(persist_t *p, int64_t now)
{
    pthread_mutex_lock(&p->snap_mu);
    char err[700];
    int e = p->j ? 0 : persist_journal_start(p, err, sizeof(err));
    if (e && now - p->deferred_log_ns >= 60 * 1000000000LL) {
        log_warn("still no journal: %s; every change is refused (503, not applied)", err);
        p->deferred_log_ns = now;
    } else if (!e) {
        log_info("journal %" PRIu64 " started: there is space again, changes are taken", p->next_seq);
    }
    pthread_mutex_unlock(&p->snap_mu);
}
