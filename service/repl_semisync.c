/* repl_semisync.c - semi-synchronous replication (service/repl.h,
 * --min-replicas-ack): which replicas are connected and what they hold,
 * the answers that wait for them, the pre-images of the changes in doubt,
 * and taking those changes back when the replicas do not confirm them in
 * time. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/log.h"
#include "service/repl_int.h"

/* ------------------------------------------------------------------------ */
/* Acknowledgements                                                         */
/* ------------------------------------------------------------------------ */

bool repl_peer_alive(const peer_t *pe, int64_t now)
{
    return pe->polling || now - pe->seen_ms <= REPL_PEER_ALIVE_MS;
}

/* The highest position at least min_acks connected replicas hold (mu
 * held); 0 when fewer are connected. */
static uint64_t acks_floor(const repl_t *r, int64_t now)
{
    uint64_t acked[REPL_MAX_PEERS];
    int n = 0;
    for (int i = 0; i < r->npeers; i++)
        if (repl_peer_alive(&r->peers[i], now) && (!r->coordinated || r->peers[i].counted)) {
            int k = n++;
            for (; k > 0 && acked[k - 1] < r->peers[i].acked; k--)   /* descending */
                acked[k] = acked[k - 1];
            acked[k] = r->peers[i].acked;
        }
    return r->min_acks > 0 && n >= r->min_acks ? acked[r->min_acks - 1] : 0;
}

/* Raises r->safe to what the replicas hold now, and detaches the changes in
 * doubt that became safe (mu held: the caller frees them without it). */
cmd_undo_t *repl_safe_advance(repl_t *r, int64_t now)
{
    uint64_t floor = acks_floor(r, now);
    if (floor > r->safe)
        r->safe = floor;
    cmd_undo_t *safe = NULL, **tail = &safe;
    while (r->doubt && r->doubt->pos <= r->safe) {
        *tail = r->doubt;
        tail = &r->doubt->next;
        r->doubt = r->doubt->next;
    }
    *tail = NULL;
    if (!r->doubt)
        r->doubt_tail = &r->doubt;
    return safe;
}

/* Whether the change answered at `target` was taken back (mu held). */
static bool undone_at(const repl_t *r, uint64_t target)
{
    for (int i = 0; i < r->nundone; i++)
        if (target > r->undone[i].lo && target <= r->undone[i].hi)
            return true;
    return false;
}

/* Moves the waiters that `keep` rejects to *out (mu held). */
void repl_waiters_take(repl_t *r, waiter_t **out, bool expired_only, int64_t now)
{
    waiter_t **pp = &r->waiters;
    while (*pp) {
        waiter_t *w = *pp;
        bool take = expired_only ? now >= w->deadline_ms : w->target <= r->safe;
        if (take) {
            *pp = w->next;
            w->next = *out;
            *out = w;
        } else {
            pp = &w->next;
        }
    }
}

static const char lease_lapsed[] = "the replicas acknowledged the change after this primary's lease in the "
                                   "coordinator lapsed: another node may be the primary now; read the key back "
                                   "there before retrying";

void repl_acked_finish(repl_t *r, waiter_t *w)
{
    if (repl_lease_ok(r))
        repl_waiters_finish(w, true, NULL);
    else
        repl_waiters_finish(w, false, lease_lapsed);
}

void repl_waiters_finish(waiter_t *w, bool ok, const char *err)
{
    while (w) {
        waiter_t *next = w->next;
        w->done(w->ud, ok, err);
        free(w);
        w = next;
    }
}

bool repl_reserve_ok(repl_t *r, const char **err)
{
    if (r->min_acks == 0 || atomic_load(&r->role) != ROLE_PRIMARY)
        return true;
    pthread_mutex_lock(&r->mu);
    int64_t now = mono_ms();
    int n = 0;
    for (int i = 0; i < r->npeers; i++)
        n += repl_peer_alive(&r->peers[i], now) && (!r->coordinated || r->peers[i].counted);
    bool ok = n >= r->min_acks;
    if (!ok)
        r->refused_no_replicas++;
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        static _Thread_local char msg[160];
        snprintf(msg, sizeof(msg), "only %d of the %d replicas --min-replicas-ack requires are connected", n,
                 r->min_acks);
        *err = msg;
    }
    return ok;
}

static bool semisync(repl_t *r) { return r && r->min_acks > 0 && atomic_load(&r->role) == ROLE_PRIMARY; }

/* The answer of a change that was taken back (or could not be). */
static const char *undone_message(const repl_t *r, uint64_t failed, const char *journal_err)
{
    static _Thread_local char msg[400];
    if (failed)
        snprintf(msg, sizeof(msg),
                 "fewer than %d replicas acknowledged the change within %d ms (--min-replicas-ack); taking the "
                 "changes back failed for %" PRIu64 " keys (out of memory): the request may be applied, read "
                 "it back before retrying",
                 r->min_acks, r->ack_timeout_ms, failed);
    else if (journal_err)
        snprintf(msg, sizeof(msg),
                 "fewer than %d replicas acknowledged the change within %d ms (--min-replicas-ack); it was taken "
                 "back, but the journal failed (%s): read it back before retrying",
                 r->min_acks, r->ack_timeout_ms, journal_err);
    else
        snprintf(msg, sizeof(msg),
                 "fewer than %d replicas acknowledged the change within %d ms (--min-replicas-ack); the request "
                 "was not applied",
                 r->min_acks, r->ack_timeout_ms);
    return msg;
}

/* Waiters answered once the records that took their changes back are
 * durable. */
typedef struct undone_answer {
    repl_t *r;
    waiter_t *failing;
    uint64_t failed;
} undone_answer_t;

static void undone_durable(void *ud, bool ok, const char *err)
{
    undone_answer_t *a = ud;
    repl_waiters_finish(a->failing, false, undone_message(a->r, a->failed, ok ? NULL : err));
    free(a);
}

/* Answers `failing` with the 503 of changes taken back, once the journal
 * holds every record up to r->undo_lsn (mu not held). */
static void undone_answer(repl_t *r, waiter_t *failing, uint64_t lsn, uint64_t failed)
{
    if (!failing)
        return;
    undone_answer_t *a = malloc(sizeof(*a));
    if (!a) {
        repl_waiters_finish(failing, false, "out of memory: read the change back before retrying");
        return;
    }
    *a = (undone_answer_t){ r, failing, failed };
    if (lsn == 0 || persist_wait_async_hook(r->p, lsn, undone_durable, a))
        undone_durable(a, true, NULL);
}

/* Registers a wait for `target`; true when it is already acknowledged.  A
 * change taken back while its answer was on its way here fails as those
 * the taking back answered. */
static bool acks_wait(repl_t *r, uint64_t target, void (*done)(void *ud, bool ok, const char *err), void *dud)
{
    pthread_mutex_lock(&r->mu);
    int64_t now = mono_ms();
    cmd_undo_t *safe = repl_safe_advance(r, now);
    bool undone = undone_at(r, target), acked = !undone && target <= r->safe;
    waiter_t *w = NULL;
    if (!acked && (w = malloc(sizeof(*w))))
        *w = (waiter_t){ NULL, target, now + r->ack_timeout_ms, done, dud };
    uint64_t lsn = r->undo_lsn, failed = r->undo_failed;
    bool answer_now = undone && !r->undoing;
    if (w && !answer_now) {   /* a taking back that is running answers it too */
        waiter_t **list = undone ? &r->undo_late : &r->waiters;
        w->next = *list;
        *list = w;
    }
    pthread_mutex_unlock(&r->mu);
    cmd_undo_free(r->srv, safe);
    if (acked && repl_lease_ok(r))
        return true;
    if (acked)
        done(dud, false, lease_lapsed);
    else if (!w)
        done(dud, false, "out of memory waiting for replicas");
    else if (answer_now)
        undone_answer(r, w, lsn, failed);
    return false;
}

/* The answer waits for the journal, then for the replicas. */
typedef struct chain {
    repl_t *r;
    uint64_t target;
    void (*done)(void *ud, bool ok, const char *err);
    void *dud;
} chain_t;

static void chain_durable(void *ud, bool ok, const char *err)
{
    chain_t c = *(chain_t *)ud;
    free(ud);
    if (!ok)
        c.done(c.dud, false, err);
    else if (acks_wait(c.r, c.target, c.done, c.dud))
        c.done(c.dud, true, NULL);
}

bool repl_try_hook(repl_t *r, persist_t *p, uint64_t lsn)
{
    /* every change waits for acknowledgements: never answered inline; a
     * coordinated primary's answer checks its lease once durable */
    return !semisync(r) && persist_try_hook(p, lsn) && repl_lease_ok(r);
}

/* A coordinated primary without --min-replicas-ack: the change is durable;
 * answered 200 only while the lease still covers this node. */
typedef struct leased {
    repl_t *r;
    void (*done)(void *ud, bool ok, const char *err);
    void *dud;
} leased_t;

static void leased_durable(void *ud, bool ok, const char *err)
{
    leased_t l = *(leased_t *)ud;
    free(ud);
    if (ok && !repl_lease_ok(l.r))
        l.done(l.dud, false, "this primary's lease in the coordinator lapsed before the change was answered: "
                              "another node may be the primary now, and it was not sent this change");
    else
        l.done(l.dud, ok, err);
}

bool repl_wait_async_hook(repl_t *r, persist_t *p, uint64_t lsn, uint64_t pos,
                          void (*done)(void *ud, bool ok, const char *err), void *dud)
{
    if (!semisync(r) && r && r->coordinated) {
        leased_t *l = malloc(sizeof(*l));
        if (!l) {
            done(dud, false, "out of memory waiting for the journal");
            return false;
        }
        *l = (leased_t){ r, done, dud };
        if (!persist_wait_async_hook(p, lsn, leased_durable, l))
            return false;
        free(l);
        if (repl_lease_ok(r))
            return true;
        done(dud, false, "this primary's lease in the coordinator lapsed before the change was answered: another "
                         "node may be the primary now, and it was not sent this change");
        return false;
    }
    if (!semisync(r))
        return persist_wait_async_hook(p, lsn, done, dud);
    uint64_t target = pos;
    if (!target) {   /* not registered (the role changed meanwhile): past every record so far */
        pthread_mutex_lock(&r->mu);
        target = r->head;
        pthread_mutex_unlock(&r->mu);
    }
    chain_t *c = malloc(sizeof(*c));
    if (!c) {
        done(dud, false, "out of memory waiting for replicas");
        return false;
    }
    *c = (chain_t){ r, target, done, dud };
    if (!persist_wait_async_hook(p, lsn, chain_durable, c))
        return false;   /* chain_durable runs later (or ran, on failure) */
    free(c);
    return acks_wait(r, target, done, dud);
}

/* ------------------------------------------------------------------------ */
/* Taking changes back                                                      */
/* ------------------------------------------------------------------------ */

bool repl_undo_begin(repl_t *r)
{
    if (!semisync(r))
        return false;
    pthread_rwlock_rdlock(&r->gate);
    return true;
}

void repl_undo_end(repl_t *r) { pthread_rwlock_unlock(&r->gate); }

uint64_t repl_undo_register(repl_t *r, cmd_undo_t *list)
{
    pthread_mutex_lock(&r->mu);
    uint64_t pos = r->head;   /* past this change's record: appended just before, under the same locks */
    for (cmd_undo_t *u = list; u; u = u->next) {
        u->pos = pos;
        u->owner = NULL;
    }
    *r->doubt_tail = list;
    while (*r->doubt_tail)
        r->doubt_tail = &(*r->doubt_tail)->next;
    pthread_mutex_unlock(&r->mu);
    return pos;
}

/* Orders pre-images by key, then by position: the first of a key is the
 * state before every change in doubt. */
static int undo_cmp(const void *a, const void *b)
{
    const cmd_undo_t *x = *(cmd_undo_t *const *)a, *y = *(cmd_undo_t *const *)b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    if (c || x->klen != y->klen)
        return c ? c : x->klen < y->klen ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Restores every key of `list` to its state before the first change in
 * doubt; *lsn: the last restoring record's journal position, *restored the
 * keys restored.  Returns the keys that could not be restored. */
static uint64_t undo_apply_all(repl_t *r, cmd_undo_t *list, uint64_t *lsn, uint64_t *restored)
{
    size_t n = 0;
    for (cmd_undo_t *u = list; u; u = u->next)
        n++;
    cmd_undo_t **v = malloc((n ? n : 1) * sizeof(*v));
    uint64_t failed = 0;
    int64_t now = clock_now_ns();
    if (!v) {
        /* newest first, one at a time: the last restore of a key is its oldest state */
        for (size_t k = n; k > 0; k--) {
            cmd_undo_t *u = list;
            for (size_t i = 1; i < k; i++)
                u = u->next;
            uint64_t l = 0;
            failed += !cmd_undo_apply(r->srv, u, now, &l);
            *lsn = l > *lsn ? l : *lsn;
        }
        *restored = n - failed;   /* a key restored more than once counts each time */
        return failed;
    }
    size_t i = 0;
    for (cmd_undo_t *u = list; u; u = u->next)
        v[i++] = u;
    qsort(v, n, sizeof(*v), undo_cmp);
    for (i = 0; i < n; i++) {
        if (i > 0 && v[i]->klen == v[i - 1]->klen && memcmp(v[i]->key, v[i - 1]->key, v[i]->klen) == 0)
            continue;   /* a later change of a key restored already */
        uint64_t l = 0;
        bool ok = cmd_undo_apply(r->srv, v[i], now, &l);
        failed += !ok;
        *restored += ok;
        *lsn = l > *lsn ? l : *lsn;
    }
    free(v);
    return failed;
}

/* Takes back every change not acknowledged by enough replicas, with every
 * change excluded (the gate), and answers their waits 503 once the records
 * that took them back are durable. */
static void undo_run(repl_t *r)
{
    pthread_rwlock_wrlock(&r->gate);
    pthread_mutex_lock(&r->mu);
    int64_t now = mono_ms();
    cmd_undo_t *safe = repl_safe_advance(r, now);
    waiter_t *acked = NULL, *late = NULL;
    repl_waiters_take(r, &acked, false, now);
    repl_waiters_take(r, &late, true, now);
    if (!late || atomic_load(&r->role) != ROLE_PRIMARY) {
        if (late) {   /* no longer a primary: nothing is taken back here */
            for (waiter_t *w = late; w; w = w->next)
                r->acks_timed_out++;
        }
        pthread_mutex_unlock(&r->mu);
        pthread_rwlock_unlock(&r->gate);
        cmd_undo_free(r->srv, safe);
        repl_acked_finish(r, acked);
        repl_waiters_finish(late, false, "fewer replicas than --min-replicas-ack acknowledged the change before this "
                                    "node stopped being the primary: read it back before retrying");
        return;
    }
    /* every change past the safe position is taken back: its waiters fail */
    waiter_t *failing = late;
    while (r->waiters) {
        waiter_t *w = r->waiters;
        r->waiters = w->next;
        w->next = failing;
        failing = w;
    }
    for (waiter_t *w = failing; w; w = w->next)
        r->acks_timed_out++;
    cmd_undo_t *doubt = r->doubt;
    r->doubt = NULL;
    r->doubt_tail = &r->doubt;
    /* the range taken back, for answers still on their way (merged, bounded) */
    if (r->nundone > 0 && r->undone[r->nundone - 1].hi >= r->safe) {
        r->undone[r->nundone - 1].hi = r->head;
    } else {
        if (r->nundone == REPL_UNDONE_MAX) {
            memmove(r->undone, r->undone + 1, (REPL_UNDONE_MAX - 1) * sizeof(r->undone[0]));
            r->nundone--;
        }
        r->undone[r->nundone].lo = r->safe;
        r->undone[r->nundone++].hi = r->head;
    }
    r->undoing = true;
    pthread_mutex_unlock(&r->mu);
    cmd_undo_free(r->srv, safe);
    repl_acked_finish(r, acked);

    uint64_t lsn = 0, keys = 0;
    uint64_t failed = undo_apply_all(r, doubt, &lsn, &keys);
    cmd_undo_free(r->srv, doubt);
    pthread_rwlock_unlock(&r->gate);
    if (failed)
        log_error("replication: %" PRIu64 " keys could not be restored (out of memory) after "
                  "--min-replicas-ack timed out; their changes stay applied",
                  failed);

    pthread_mutex_lock(&r->mu);
    if (lsn > r->undo_lsn)
        r->undo_lsn = lsn;
    r->undo_failed = failed;
    r->undone_keys += keys;
    while (r->undo_late) {   /* answers that reached acks_wait meanwhile */
        waiter_t *w = r->undo_late;
        r->undo_late = w->next;
        w->next = failing;
        failing = w;
    }
    r->undoing = false;
    lsn = r->undo_lsn;
    pthread_mutex_unlock(&r->mu);
    undone_answer(r, failing, lsn, failed);
}

void repl_tick(repl_t *r)
{
    pthread_mutex_lock(&r->mu);
    int64_t now = mono_ms();
    cmd_undo_t *safe = repl_safe_advance(r, now), *stale = NULL;
    if (atomic_load(&r->role) != ROLE_PRIMARY) {   /* a replica's stream is its primary's business */
        stale = r->doubt;
        r->doubt = NULL;
        r->doubt_tail = &r->doubt;
    }
    bool late = false;
    for (waiter_t *w = r->waiters; w && !late; w = w->next)
        late = now >= w->deadline_ms;
    pthread_mutex_unlock(&r->mu);
    cmd_undo_free(r->srv, safe);
    cmd_undo_free(r->srv, stale);
    if (late)
        undo_run(r);
}
