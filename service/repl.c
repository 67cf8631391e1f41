/* repl.c - see repl.h for the protocol; this file is the primary's side,
 * the node's role and epoch, and the semi-synchronous waits. */
#include "service/repl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/persist_fmt.h"
#include "api/undo.h"
#include "service/clock.h"
#include "service/file.h"
#include "service/log.h"
#include "service/peers.h"
#include "service/replica.h"

#define REPL_MAX_PEERS 32
#define REPL_PEER_ALIVE_MS 3000      /* a replica that polled this recently is connected */
#define REPL_BATCH_BYTES (1u << 20)  /* records answered by one poll at most */
#define EPOCH_NAME "EPOCH"
#define PROBE_RETRY_MS 500           /* probing or fenced: ask the peers again after */
#define PROBE_STEADY_MS 2000         /* a primary or a replica asks its peers this often */
#define PROBE_TIMEOUT_MS 1000        /* one peer's answer, at most */
#define REPL_UNDONE_MAX 64           /* stream ranges taken back that are remembered */

enum { ROLE_PRIMARY, ROLE_REPLICA, ROLE_FENCED, ROLE_PROBING };
static const char *const role_names[] = { "primary", "replica", "fenced", "probing" };

/* A replica as the primary sees it, from its polls. */
typedef struct peer {
    char id[API_REPL_ID_MAX];
    char addr[64];
    uint64_t acked;              /* stream offset it holds everything before */
    uint64_t records;            /* records it has applied in this stream */
    int64_t seen_ms;             /* monotonic: last poll started or ended */
    bool polling;
} peer_t;

/* A change whose answer waits for acknowledgements. */
typedef struct waiter {
    struct waiter *next;
    uint64_t target;
    int64_t deadline_ms;
    void (*done)(void *ud, bool ok, const char *err);
    void *ud;
} waiter_t;

struct repl {
    api_server_t *api;
    persist_t *p;
    char dir[512];
    char token[256];
    int min_acks, ack_timeout_ms;
    api_repl_hooks_t hooks;

    /* --peers: the other nodes of the group, asked by the prober thread. */
    char group[OPTS_PEERS_MAX][OPTS_PEER_URL_MAX];
    int ngroup;
    pthread_t prober;
    bool prober_on;
    pthread_cond_t probe_cv;     /* closing */
    peer_answer_t answers[OPTS_PEERS_MAX];   /* the prober thread's */
    bool self[OPTS_PEERS_MAX];   /* entries found to be this node (its own stream id answered) */
    _Atomic bool stopping;       /* repl_close: a question in flight is abandoned */
    uint64_t peer_epoch;         /* the highest epoch a peer reported (mu) */
    char probe_state[1000];      /* the last round's outcome, for /info (mu) */

    pthread_mutex_t role_mu;     /* one role change at a time (promote, follow, prober) */
    pthread_mutex_t mu;
    pthread_cond_t grew;         /* the backlog grew, or the role changed */
    _Atomic int role;            /* read without mu on every change */
    char primary[API_REPL_URL_MAX];
    uint64_t epoch;
    char run[API_REPL_ID_MAX];
    replica_t *follower;         /* ROLE_REPLICA: the thread following `primary` */
    bool closing;

    /* The backlog: bytes [tail, head) of the stream, whole records, in a
     * ring of `cap` bytes; `records` counts the records appended. */
    _Atomic bool active;         /* set at the first replica snapshot */
    uint8_t *ring;
    uint64_t cap, head, tail, records;
    peer_t peers[REPL_MAX_PEERS];
    int npeers;
    waiter_t *waiters;
    uint64_t acks_timed_out, refused_no_replicas;

    /* Semi-synchronous changes (api/undo.h).  Changes take `gate` shared
     * from before their keys are locked until they were journaled; taking
     * back takes it exclusive.  `doubt`: the pre-images of changes not yet
     * held by min_acks replicas, in stream order; `safe`: the highest
     * position they held at some instant (changes up to it are answered
     * 200 and never taken back).  `undone`: the stream ranges taken back
     * (merged, the latest REPL_UNDONE_MAX), for answers that arrive after. */
    pthread_rwlock_t gate;
    api_undo_t *doubt, **doubt_tail;
    uint64_t safe;
    struct { uint64_t lo, hi; } undone[REPL_UNDONE_MAX];
    int nundone;
    bool undoing;                /* a taking back is running: late answers wait in undo_late */
    waiter_t *undo_late;
    uint64_t undo_lsn, undo_failed, undone_keys;
};

static int64_t mono_ms(void) { return clock_mono_ns() / 1000000; }

/* Waits on cv (mu held) for at most ms milliseconds. */
static void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms % 1000 * 1000000;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_cond_timedwait(cv, mu, &ts);
}

static void run_new(repl_t *r)
{
    uint8_t b[8] = { 0 };
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t t = (uint64_t)clock_now_ns();
        memcpy(b, &t, sizeof(b));
    }
    for (int i = 0; i < 8; i++)
        snprintf(r->run + 2 * i, 3, "%02x", b[i]);
}

/* ------------------------------------------------------------------------ */
/* The epoch file                                                           */
/* ------------------------------------------------------------------------ */

static uint64_t epoch_read(const char *dir)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", dir, EPOCH_NAME);
    FILE *f = fopen(path, "r");
    unsigned long long e = 0;
    if (f) {
        if (fscanf(f, "%llu", &e) != 1)
            e = 0;
        fclose(f);
    }
    return e;
}

/* Writes EPOCH durably (file_replace). */
static bool epoch_write(const char *dir, uint64_t epoch, char *err, size_t errlen)
{
    char path[600], text[32];
    snprintf(path, sizeof(path), "%s/%s", dir, EPOCH_NAME);
    int n = snprintf(text, sizeof(text), "%" PRIu64 "\n", epoch);
    if (!file_replace(path, text, (size_t)n, FILE_MODE_PRIVATE)) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* The backlog                                                              */
/* ------------------------------------------------------------------------ */

/* Copies n bytes of the stream at offset off (retained) out of the ring. */
static void ring_read(const repl_t *r, uint64_t off, void *dst, size_t n)
{
    size_t at = (size_t)(off % r->cap), first = n < r->cap - at ? n : (size_t)(r->cap - at);
    memcpy(dst, r->ring + at, first);
    memcpy((uint8_t *)dst + first, r->ring, n - first);
}

static void ring_write(repl_t *r, uint64_t off, const void *src, size_t n)
{
    size_t at = (size_t)(off % r->cap), first = n < r->cap - at ? n : (size_t)(r->cap - at);
    memcpy(r->ring + at, src, first);
    memcpy(r->ring, (const uint8_t *)src + first, n - first);
}

/* The framed size of the record at stream offset off (retained). */
static uint64_t record_size(const repl_t *r, uint64_t off)
{
    uint8_t len[4];
    ring_read(r, off, len, 4);
    return JOURNAL_FRAME_SIZE + ((uint64_t)len[0] | (uint64_t)len[1] << 8 | (uint64_t)len[2] << 16 |
                                 (uint64_t)len[3] << 24);
}

/* The server time (ms) of the record at off: its payload is kind, now_ns. */
static int64_t record_ms(const repl_t *r, uint64_t off)
{
    uint8_t b[8];
    ring_read(r, off + JOURNAL_FRAME_SIZE + 1, b, 8);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return (int64_t)v / 1000000;
}

void repl_append(repl_t *r, const journal_req_t *req)
{
    if (!atomic_load_explicit(&r->active, memory_order_relaxed))
        return;
    wbuf_t b = WBUF_INIT;
    journalfmt_put_request(&b, req);
    pthread_mutex_lock(&r->mu);
    if (b.oom || b.len > r->cap) {
        /* cannot be kept: every position before it is gone */
        r->tail = r->head = r->head + (b.oom ? 0 : b.len);
        log_warn("replication: a record of %zu bytes does not fit the backlog; replicas will resynchronise", b.len);
    } else {
        while (r->head + b.len - r->tail > r->cap)
            r->tail += record_size(r, r->tail);
        ring_write(r, r->head, b.data, b.len);
        r->head += b.len;
    }
    r->records++;
    pthread_cond_broadcast(&r->grew);
    pthread_mutex_unlock(&r->mu);
    wbuf_free(&b);
}

/* ------------------------------------------------------------------------ */
/* Acknowledgements                                                         */
/* ------------------------------------------------------------------------ */

static bool peer_alive(const peer_t *pe, int64_t now)
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
        if (peer_alive(&r->peers[i], now)) {
            int k = n++;
            for (; k > 0 && acked[k - 1] < r->peers[i].acked; k--)   /* descending */
                acked[k] = acked[k - 1];
            acked[k] = r->peers[i].acked;
        }
    return r->min_acks > 0 && n >= r->min_acks ? acked[r->min_acks - 1] : 0;
}

/* Raises r->safe to what the replicas hold now, and detaches the changes in
 * doubt that became safe (mu held: the caller frees them without it). */
static api_undo_t *safe_advance(repl_t *r, int64_t now)
{
    uint64_t floor = acks_floor(r, now);
    if (floor > r->safe)
        r->safe = floor;
    api_undo_t *safe = NULL, **tail = &safe;
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
static void waiters_take(repl_t *r, waiter_t **out, bool expired_only, int64_t now)
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

static void waiters_finish(waiter_t *w, bool ok, const char *err)
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
        n += peer_alive(&r->peers[i], now);
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
    waiters_finish(a->failing, false, undone_message(a->r, a->failed, ok ? NULL : err));
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
        waiters_finish(failing, false, "out of memory: read the change back before retrying");
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
    api_undo_t *safe = safe_advance(r, now);
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
    api_undo_free(r->api, safe);
    if (acked)
        return true;
    if (!w)
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
    /* every change waits for acknowledgements: never answered inline */
    return !semisync(r) && persist_try_hook(p, lsn);
}

bool repl_wait_async_hook(repl_t *r, persist_t *p, uint64_t lsn, uint64_t pos,
                          void (*done)(void *ud, bool ok, const char *err), void *dud)
{
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

bool repl_undo_begin(repl_t *r)
{
    if (!semisync(r))
        return false;
    pthread_rwlock_rdlock(&r->gate);
    return true;
}

void repl_undo_end(repl_t *r) { pthread_rwlock_unlock(&r->gate); }

uint64_t repl_undo_register(repl_t *r, api_undo_t *list)
{
    pthread_mutex_lock(&r->mu);
    uint64_t pos = r->head;   /* past this change's record: appended just before, under the same locks */
    for (api_undo_t *u = list; u; u = u->next) {
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
    const api_undo_t *x = *(api_undo_t *const *)a, *y = *(api_undo_t *const *)b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    if (c || x->klen != y->klen)
        return c ? c : x->klen < y->klen ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Restores every key of `list` to its state before the first change in
 * doubt; *lsn: the last restoring record's journal position, *restored the
 * keys restored.  Returns the keys that could not be restored. */
static uint64_t undo_apply_all(repl_t *r, api_undo_t *list, uint64_t *lsn, uint64_t *restored)
{
    size_t n = 0;
    for (api_undo_t *u = list; u; u = u->next)
        n++;
    api_undo_t **v = malloc((n ? n : 1) * sizeof(*v));
    uint64_t failed = 0;
    int64_t now = clock_now_ns();
    if (!v) {
        /* newest first, one at a time: the last restore of a key is its oldest state */
        for (size_t k = n; k > 0; k--) {
            api_undo_t *u = list;
            for (size_t i = 1; i < k; i++)
                u = u->next;
            uint64_t l = 0;
            failed += !api_undo_apply(r->api, u, now, &l);
            *lsn = l > *lsn ? l : *lsn;
        }
        *restored = n - failed;   /* a key restored more than once counts each time */
        return failed;
    }
    size_t i = 0;
    for (api_undo_t *u = list; u; u = u->next)
        v[i++] = u;
    qsort(v, n, sizeof(*v), undo_cmp);
    for (i = 0; i < n; i++) {
        if (i > 0 && v[i]->klen == v[i - 1]->klen && memcmp(v[i]->key, v[i - 1]->key, v[i]->klen) == 0)
            continue;   /* a later change of a key restored already */
        uint64_t l = 0;
        bool ok = api_undo_apply(r->api, v[i], now, &l);
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
    api_undo_t *safe = safe_advance(r, now);
    waiter_t *acked = NULL, *late = NULL;
    waiters_take(r, &acked, false, now);
    waiters_take(r, &late, true, now);
    if (!late || atomic_load(&r->role) != ROLE_PRIMARY) {
        if (late) {   /* no longer a primary: nothing is taken back here */
            for (waiter_t *w = late; w; w = w->next)
                r->acks_timed_out++;
        }
        pthread_mutex_unlock(&r->mu);
        pthread_rwlock_unlock(&r->gate);
        api_undo_free(r->api, safe);
        waiters_finish(acked, true, NULL);
        waiters_finish(late, false, "fewer replicas than --min-replicas-ack acknowledged the change before this "
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
    api_undo_t *doubt = r->doubt;
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
    api_undo_free(r->api, safe);
    waiters_finish(acked, true, NULL);

    uint64_t lsn = 0, keys = 0;
    uint64_t failed = undo_apply_all(r, doubt, &lsn, &keys);
    api_undo_free(r->api, doubt);
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
    api_undo_t *safe = safe_advance(r, now), *stale = NULL;
    if (atomic_load(&r->role) != ROLE_PRIMARY) {   /* a replica's stream is its primary's business */
        stale = r->doubt;
        r->doubt = NULL;
        r->doubt_tail = &r->doubt;
    }
    bool late = false;
    for (waiter_t *w = r->waiters; w && !late; w = w->next)
        late = now >= w->deadline_ms;
    pthread_mutex_unlock(&r->mu);
    api_undo_free(r->api, safe);
    api_undo_free(r->api, stale);
    if (late)
        undo_run(r);
}

/* ------------------------------------------------------------------------ */
/* The primary's routes                                                     */
/* ------------------------------------------------------------------------ */

static peer_t *peer_get(repl_t *r, const char *id, int64_t now)
{
    for (int i = 0; i < r->npeers; i++)
        if (strcmp(r->peers[i].id, id) == 0)
            return &r->peers[i];
    int slot = r->npeers;
    if (slot == REPL_MAX_PEERS) {   /* the longest silent one makes room */
        slot = 0;
        for (int i = 1; i < r->npeers; i++)
            if (!r->peers[i].polling && r->peers[i].seen_ms < r->peers[slot].seen_ms)
                slot = i;
        if (r->peers[slot].polling || now - r->peers[slot].seen_ms <= REPL_PEER_ALIVE_MS)
            return NULL;
    } else {
        r->npeers++;
    }
    memset(&r->peers[slot], 0, sizeof(peer_t));
    snprintf(r->peers[slot].id, sizeof(r->peers[slot].id), "%s", id);
    return &r->peers[slot];
}

struct barrier {
    repl_t *r;
    uint64_t offset, records, epoch;
    char run[API_REPL_ID_MAX];
};

/* Runs with every shard locked: the snapshot shows the stream up to here. */
static void at_barrier(void *ud)
{
    struct barrier *b = ud;
    repl_t *r = b->r;
    pthread_mutex_lock(&r->mu);
    if (!atomic_load(&r->active)) {
        r->tail = r->head;
        atomic_store(&r->active, true);
    }
    b->offset = r->head;
    b->records = r->records;
    b->epoch = r->epoch;
    memcpy(b->run, r->run, sizeof(b->run));
    pthread_mutex_unlock(&r->mu);
}

static void add_position(api_resp_t *resp, const char *run, uint64_t offset, uint64_t records, uint64_t epoch)
{
    api_add_header(resp, "X-Tally-Repl-Run", "%s", run);
    api_add_header(resp, "X-Tally-Repl-Offset", "%" PRIu64, offset);
    api_add_header(resp, "X-Tally-Repl-Records", "%" PRIu64, records);
    api_add_header(resp, "X-Tally-Repl-Epoch", "%" PRIu64, epoch);
}

static bool not_primary(repl_t *r, api_resp_t *resp)
{
    int role = atomic_load(&r->role);
    if (role == ROLE_PRIMARY)
        return false;
    api_error(resp, API_E_UNAVAILABLE, "this node is %s, not the primary: replicas follow the primary",
              role == ROLE_REPLICA ? "a replica" : "a fenced former primary");
    return true;
}

/* A request from a replica that knows a newer epoch than this node's: this
 * node was replaced by a promotion.  A primary becomes fenced; 409 (mu held). */
static bool stale(repl_t *r, uint64_t epoch, api_resp_t *resp)
{
    if (epoch <= r->epoch)
        return false;
    if (epoch > r->peer_epoch)
        r->peer_epoch = epoch;
    int role = atomic_load(&r->role);
    if (role == ROLE_PRIMARY || role == ROLE_PROBING) {
        atomic_store(&r->role, ROLE_FENCED);
        log_error("replication: a replica knows epoch %" PRIu64 ", newer than this primary's %" PRIu64
                  ": another node was promoted. This node takes no changes until it follows the new primary "
                  "(POST /admin/replicate?primary=URL)",
                  epoch, r->epoch);
    }
    api_error(resp, API_E_CONFLICT, "this node's epoch %" PRIu64 " is older than %" PRIu64 ": it is no longer the primary",
              r->epoch, epoch);
    return true;
}

static void serve_snapshot(repl_t *r, uint64_t epoch, api_resp_t *resp)
{
    pthread_mutex_lock(&r->mu);
    bool refused = stale(r, epoch, resp) || not_primary(r, resp);
    pthread_mutex_unlock(&r->mu);
    if (refused)
        return;
    wbuf_t b = WBUF_INIT;
    struct barrier bar = { .r = r };
    char err[256];
    if (!persist_snapshot_to_buffer(r->p, &b, at_barrier, &bar, err, sizeof(err))) {
        wbuf_free(&b);
        api_error(resp, API_E_INTERNAL, "%s", err);
        return;
    }
    resp->status = 200;
    resp->ctype = "application/octet-stream";
    free(resp->body);
    resp->body = (char *)b.data;   /* the response owns the buffer */
    resp->len = b.len;
    add_position(resp, bar.run, bar.offset, bar.records, bar.epoch);
    log_info("replication: snapshot of %zu bytes sent at offset %" PRIu64, b.len, bar.offset);
}

static void serve_log(repl_t *r, const api_repl_call_t *c, api_resp_t *resp)
{
    pthread_mutex_lock(&r->mu);
    int64_t now = mono_ms();
    if (stale(r, c->epoch, resp)) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (not_primary(r, resp)) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (strcmp(c->run, r->run) != 0 || c->from < r->tail || c->from > r->head || !atomic_load(&r->active)) {
        pthread_mutex_unlock(&r->mu);
        api_error(resp, API_E_GONE, "position %s/%" PRIu64 " is not in this primary's backlog: fetch a snapshot",
                  c->run, c->from);
        return;
    }
    peer_t *pe = peer_get(r, c->id, now);
    if (!pe) {
        pthread_mutex_unlock(&r->mu);
        api_error(resp, API_E_UNAVAILABLE, "too many replicas (at most %d)", REPL_MAX_PEERS);
        return;
    }
    snprintf(pe->addr, sizeof(pe->addr), "%s", c->addr);
    pe->acked = c->from;
    pe->records = c->records;
    pe->seen_ms = now;
    pe->polling = true;
    waiter_t *acked = NULL;
    api_undo_t *safe = safe_advance(r, now);
    waiters_take(r, &acked, false, now);
    /* wait for a record */
    int64_t deadline = now + c->wait_ms;
    while (r->head == c->from && !r->closing && atomic_load(&r->role) == ROLE_PRIMARY &&
           strcmp(c->run, r->run) == 0 && mono_ms() < deadline) {
        if (acked) {   /* answer the acknowledged changes before sleeping */
            pthread_mutex_unlock(&r->mu);
            waiters_finish(acked, true, NULL);
            acked = NULL;
            pthread_mutex_lock(&r->mu);
            continue;
        }
        int64_t left = deadline - mono_ms();
        cond_wait_ms(&r->grew, &r->mu, left > 100 ? 100 : left < 1 ? 1 : left);
    }
    bool gone = strcmp(c->run, r->run) != 0 || c->from < r->tail;
    wbuf_t b = WBUF_INIT;
    uint64_t off = c->from;
    if (!gone) {
        while (off < r->head && b.len < REPL_BATCH_BYTES) {
            uint64_t n = record_size(r, off);
            wbuf_reserve(&b, b.len + n);
            if (b.oom)
                break;
            ring_read(r, off, b.data + b.len, n);
            b.len += n;
            off += n;
        }
    }
    uint64_t head = r->head, records = r->records, epoch = r->epoch;
    pe = peer_get(r, c->id, mono_ms());
    if (pe) {
        pe->polling = false;
        pe->seen_ms = mono_ms();
    }
    pthread_mutex_unlock(&r->mu);
    waiters_finish(acked, true, NULL);
    api_undo_free(r->api, safe);
    if (gone || b.oom) {
        wbuf_free(&b);
        if (gone)
            api_error(resp, API_E_GONE, "position %s/%" PRIu64 " left the backlog: fetch a snapshot", c->run, c->from);
        else
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory reading the backlog");
        return;
    }
    resp->status = 200;
    resp->ctype = "application/octet-stream";
    free(resp->body);
    resp->body = b.len ? (char *)b.data : malloc(1);
    resp->len = b.len;
    if (!resp->body) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    api_add_header(resp, "X-Tally-Repl-Head", "%" PRIu64, head);
    api_add_header(resp, "X-Tally-Repl-Records", "%" PRIu64, records);
    api_add_header(resp, "X-Tally-Repl-Epoch", "%" PRIu64, epoch);
}

/* ------------------------------------------------------------------------ */
/* Roles                                                                    */
/* ------------------------------------------------------------------------ */

/* Stops the follower, if any (without mu: the thread may be applying). */
static uint64_t follower_stop(repl_t *r)
{
    pthread_mutex_lock(&r->mu);
    replica_t *f = r->follower;
    r->follower = NULL;
    uint64_t epoch = r->epoch;
    pthread_mutex_unlock(&r->mu);
    if (f) {
        uint64_t seen = replica_epoch(f);
        replica_stop(f);
        if (seen > epoch)
            epoch = seen;
    }
    return epoch;
}

/* The highest epoch this node knows: its own, its follower's (mu held). */
static uint64_t known_epoch(repl_t *r)
{
    uint64_t e = r->epoch;
    if (r->follower) {
        uint64_t f = replica_epoch(r->follower);
        e = f > e ? f : e;
    }
    return e;
}

/* Makes this node a replica of `primary`; `epoch`: the highest epoch known
 * of it (0: none).  role_mu held. */
static bool follow(repl_t *r, const char *primary, uint64_t epoch_hint, char *err, size_t errlen)
{
    uint64_t epoch = follower_stop(r);
    pthread_mutex_lock(&r->mu);
    atomic_store(&r->role, ROLE_REPLICA);
    snprintf(r->primary, sizeof(r->primary), "%s", primary);
    r->epoch = epoch > epoch_hint ? epoch : epoch_hint;
    r->follower = replica_start(primary, r->token, r->api, r->p, r->epoch);
    bool ok = r->follower != NULL;
    pthread_cond_broadcast(&r->grew);
    pthread_mutex_unlock(&r->mu);
    if (!ok)
        snprintf(err, errlen, "out of memory starting the replication thread");
    else
        log_info("replication: following %s", primary);
    return ok;
}

/* role_mu held. */
static void serve_promote(repl_t *r, api_resp_t *resp)
{
    if (atomic_load(&r->role) == ROLE_PRIMARY) {
        api_json(resp, 200, json_pack("{s:s,s:I,s:b}", "role", "primary", "epoch", (json_int_t)r->epoch, "promoted", 0));
        return;
    }
    uint64_t epoch = follower_stop(r);
    pthread_mutex_lock(&r->mu);
    epoch = (epoch > r->peer_epoch ? epoch : r->peer_epoch) + 1;   /* above any epoch seen */
    pthread_mutex_unlock(&r->mu);
    char err[700];
    if (!epoch_write(r->dir, epoch, err, sizeof(err))) {
        api_error(resp, API_E_INTERNAL, "promotion failed, this node takes no changes: %s", err);
        return;
    }
    /* what was replicated becomes durable here before the first change */
    snapshot_stats_t st;
    if (!persist_snapshot(r->p, &st, err, sizeof(err))) {
        api_error(resp, API_E_INTERNAL, "promotion failed, this node takes no changes: %s", err);
        return;
    }
    /* the epoch with the data: replayed at a restart, streamed to replicas */
    journal_req_t rec;
    char body[JOURNAL_EPOCH_BUF];
    if (!persist_epoch_append(r->p, epoch, &rec, body, err, sizeof(err))) {
        api_error(resp, API_E_INTERNAL, "promotion failed, this node takes no changes: %s", err);
        return;
    }
    pthread_mutex_lock(&r->mu);
    r->epoch = epoch;
    r->primary[0] = '\0';
    run_new(r);
    r->tail = r->head;    /* positions of other streams mean nothing here */
    r->npeers = 0;
    atomic_store(&r->role, ROLE_PRIMARY);
    pthread_mutex_unlock(&r->mu);
    repl_append(r, &rec);
    log_info("replication: promoted to primary under epoch %" PRIu64, epoch);
    api_json(resp, 200, json_pack("{s:s,s:I,s:b}", "role", "primary", "epoch", (json_int_t)epoch, "promoted", 1));
}

static void serve_epoch(repl_t *r, api_resp_t *resp)
{
    pthread_mutex_lock(&r->mu);
    int role = atomic_load(&r->role);
    json_t *o = json_pack("{s:s,s:I,s:s}", "role", role_names[role], "epoch", (json_int_t)known_epoch(r), "run", r->run);
    json_object_set_new(o, "primary", role == ROLE_REPLICA ? json_string(r->primary) : json_null());
    pthread_mutex_unlock(&r->mu);
    api_json(resp, 200, o);
}

/* ------------------------------------------------------------------------ */
/* Asking the peers (--peers)                                               */
/* ------------------------------------------------------------------------ */

/* Is `url` another member of the group, one that answered this round? */
static bool in_group(const repl_t *r, const char *url)
{
    for (int i = 0; i < r->ngroup; i++)
        if (!r->self[i] && r->answers[i].answered && !strcmp(r->group[i], url))
            return true;
    return false;
}

/* Is `url` this node?  A group entry found to be it, or a URL that answers
 * with this node's stream id (a replica's primary is not always in the
 * group).  Asked without mu. */
static bool is_self(repl_t *r, const char *url)
{
    for (int i = 0; i < r->ngroup; i++)
        if (r->self[i] && !strcmp(r->group[i], url))
            return true;
    peer_answer_t a;
    peers_ask(url, r->token, PROBE_TIMEOUT_MS, &r->stopping, &a);
    pthread_mutex_lock(&r->mu);
    bool self = a.answered && !strcmp(a.run, r->run);
    pthread_mutex_unlock(&r->mu);
    return self;
}

/* One round: asks every peer, then decides (role_mu held by the caller).
 * A peer names the node to follow when it is a primary of a newer epoch
 * (or, for a node not yet primary, of the same epoch), or a replica of a
 * newer epoch - or of the same epoch following another member of the group
 * (not this node: this node's own URL is not in its --peers).  Found: this
 * node follows it.  A replica moves to the primary of an epoch newer than
 * any it knows, or - when its own primary, a member of the group, says it
 * is no longer the primary - to the group's primary of its epoch or newer
 * (its primary was replaced while it was not told).  A newer epoch without a primary to follow: fenced.
 * Otherwise a probing node becomes the primary once a majority of the group
 * (itself included) answered; a URL that turns out to be this node (its own
 * stream id) is left out of the group. */
static void probe_round(repl_t *r)
{
    peer_answer_t *ans = r->answers;
    for (int i = 0; i < r->ngroup; i++)
        peers_ask(r->group[i], r->token, PROBE_TIMEOUT_MS, &r->stopping, &ans[i]);
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->ngroup; i++)
        r->self[i] = r->self[i] || (ans[i].answered && !strcmp(ans[i].run, r->run));
    int role = atomic_load(&r->role);
    uint64_t mine = known_epoch(r), best = 0;
    int answered = 1, members = 1, rivals = 0;
    const char *target = NULL;
    /* a replica: does its primary (when it is one of the group) still say
     * it is the primary? */
    bool primary_stands = true;
    for (int i = 0; i < r->ngroup && role == ROLE_REPLICA; i++)
        if (!strcmp(r->group[i], r->primary))
            primary_stands = ans[i].answered && !strcmp(ans[i].role, "primary");
    char why[800] = "";
    for (int i = 0; i < r->ngroup; i++) {
        const peer_answer_t *a = &ans[i];
        if (r->self[i])
            continue;   /* this node, listed among its own peers */
        members++;
        if (!a->answered) {
            snprintf(why, sizeof(why), "%s", a->error);
            continue;
        }
        answered++;
        if (a->epoch > r->peer_epoch)
            r->peer_epoch = a->epoch;
        bool newer = a->epoch > mine, same = a->epoch == mine && role != ROLE_PRIMARY;
        const char *url = !strcmp(a->role, "primary") ? r->group[i]
                          : !strcmp(a->role, "replica") && a->primary[0] ? a->primary : NULL;
        bool names = url && (newer || (same && (url == r->group[i] || in_group(r, a->primary))));
        if (role == ROLE_REPLICA)   /* a replica moves to a newer epoch's primary, or off a former one */
            names = url && strcmp(url, r->primary) != 0 &&
                    (newer || (!primary_stands && a->epoch >= mine && url == r->group[i]));
        if (names && (!target || a->epoch > best)) {
            target = url;
            best = a->epoch;
        }
        rivals += same && !strcmp(a->role, "probing");
    }
    int majority = members / 2 + 1;
    char to[OPTS_PEER_URL_MAX] = "";
    if (target) {
        snprintf(to, sizeof(to), "%s", target);
    } else if (r->peer_epoch > mine && (role == ROLE_PRIMARY || role == ROLE_PROBING)) {
        atomic_store(&r->role, ROLE_FENCED);
        log_error("replication: a peer knows epoch %" PRIu64 ", newer than this node's %" PRIu64
                  ", and no primary of it answered: fenced (no change taken) until one does",
                  r->peer_epoch, mine);
    } else if (role == ROLE_PROBING && rivals == 0 && answered >= majority) {
        atomic_store(&r->role, ROLE_PRIMARY);
        log_info("replication: %d of the %d nodes of the group answered, none of a newer epoch than %" PRIu64
                 ": this node is the primary", answered, members, mine);
    }
    role = atomic_load(&r->role);
    if (to[0])
        snprintf(r->probe_state, sizeof(r->probe_state), "following %s (epoch %" PRIu64 ")", to, best);
    else if (role == ROLE_PROBING)
        snprintf(r->probe_state, sizeof(r->probe_state), "%d of %d nodes answered (%d needed)%s%s%s", answered,
                 members, majority, rivals ? "; another node is probing under the same epoch" : "",
                 why[0] ? "; " : "", why);
    else
        snprintf(r->probe_state, sizeof(r->probe_state), "%d of %d nodes answered", answered, members);
    pthread_mutex_unlock(&r->mu);
    if (to[0] && is_self(r, to)) {
        /* a replica of a newer epoch follows this node: it is the one that
         * was replaced (the replica's own polls fence it too) */
        pthread_mutex_lock(&r->mu);
        int now_role = atomic_load(&r->role);
        if (best > mine && (now_role == ROLE_PRIMARY || now_role == ROLE_PROBING)) {
            atomic_store(&r->role, ROLE_FENCED);
            log_error("replication: a replica of epoch %" PRIu64 " follows this node of epoch %" PRIu64
                      ": fenced (no change taken) until a primary of the newer epoch answers",
                      best, mine);
        }
        snprintf(r->probe_state, sizeof(r->probe_state), "a replica of epoch %" PRIu64 " follows this node", best);
        pthread_mutex_unlock(&r->mu);
        to[0] = '\0';
    }
    if (to[0]) {
        char err[200];
        log_warn("replication: %s is the primary under epoch %" PRIu64 " (this node knew %" PRIu64
                 "): this node follows it and takes no change",
                 to, best, mine);
        if (!follow(r, to, best, err, sizeof(err)))
            log_error("replication: %s", err);
    }
}

static void *prober_main(void *arg)
{
    repl_t *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->closing) {
        pthread_mutex_unlock(&r->mu);
        pthread_mutex_lock(&r->role_mu);
        probe_round(r);
        pthread_mutex_unlock(&r->role_mu);
        pthread_mutex_lock(&r->mu);
        int role = atomic_load(&r->role);
        if (!r->closing)
            cond_wait_ms(&r->probe_cv, &r->mu,
                         role == ROLE_PRIMARY || role == ROLE_REPLICA ? PROBE_STEADY_MS : PROBE_RETRY_MS);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void hook_run(void *ud, const api_repl_call_t *c, api_resp_t *resp)
{
    repl_t *r = ud;
    switch (c->op) {
    case API_REPL_SNAPSHOT:
        serve_snapshot(r, c->epoch, resp);
        break;
    case API_REPL_LOG:
        serve_log(r, c, resp);
        break;
    case API_REPL_EPOCH:
        serve_epoch(r, resp);
        break;
    case API_REPL_PROMOTE:
        pthread_mutex_lock(&r->role_mu);
        serve_promote(r, resp);
        pthread_mutex_unlock(&r->role_mu);
        break;
    case API_REPL_FOLLOW: {
        char err[200];
        pthread_mutex_lock(&r->role_mu);
        bool ok = follow(r, c->primary, 0, err, sizeof(err));
        pthread_mutex_unlock(&r->role_mu);
        if (!ok)
            api_error(resp, API_E_OUT_OF_MEMORY, "%s", err);
        else
            api_json(resp, 200, json_pack("{s:s,s:s}", "role", "replica", "primary", c->primary));
        break;
    }
    }
}

static bool hook_writable(void *ud, char *primary, size_t n)
{
    repl_t *r = ud;
    int role = atomic_load_explicit(&r->role, memory_order_relaxed);
    if (role == ROLE_PRIMARY)
        return true;
    pthread_mutex_lock(&r->mu);
    snprintf(primary, n, "%s", role == ROLE_REPLICA ? r->primary : "");
    pthread_mutex_unlock(&r->mu);
    return false;
}

static const char *hook_role(void *ud)
{
    repl_t *r = ud;
    return role_names[atomic_load(&r->role)];
}

const api_repl_hooks_t *repl_hooks(repl_t *r) { return &r->hooks; }

/* ------------------------------------------------------------------------ */
/* Lifecycle, /info, /metrics                                               */
/* ------------------------------------------------------------------------ */

repl_t *repl_open(const tally_opts_t *o, api_server_t *api, persist_t *p, char *err, size_t errlen)
{
    repl_t *r = calloc(1, sizeof(*r));
    if (r)
        r->ring = malloc(o->repl_backlog);
    if (!r || !r->ring) {
        free(r);
        snprintf(err, errlen, "out of memory allocating the %zu-byte replication backlog", o->repl_backlog);
        return NULL;
    }
    r->api = api;
    r->p = p;
    r->cap = o->repl_backlog;
    r->min_acks = o->min_replicas_ack;
    r->ack_timeout_ms = o->min_replicas_timeout;
    snprintf(r->dir, sizeof(r->dir), "%s", o->data_dir);
    snprintf(r->token, sizeof(r->token), "%s", o->replica_token);
    r->hooks = (api_repl_hooks_t){ r, hook_writable, hook_role, hook_run };
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->role_mu, NULL);
    /* writers first: a taking back is not starved by a stream of changes */
    pthread_rwlockattr_t ga;
    pthread_rwlockattr_init(&ga);
    pthread_rwlockattr_setkind_np(&ga, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&r->gate, &ga);
    pthread_rwlockattr_destroy(&ga);
    r->doubt_tail = &r->doubt;
    pthread_cond_init(&r->grew, NULL);
    pthread_cond_init(&r->probe_cv, NULL);
    r->ngroup = opts_peers_split(o->peers, r->group, err, errlen);
    if (r->ngroup < 0) {
        r->ngroup = 0;
        repl_close(r);
        return NULL;
    }
    uint64_t file = epoch_read(o->data_dir), journaled = persist_journal_epoch(p);
    r->epoch = file > journaled ? file : journaled;
    if (journaled > file) {   /* the file is rewritten: the next snapshot drops the journal */
        log_warn("replication: the journal records epoch %" PRIu64 ", newer than the EPOCH file's %" PRIu64
                 ": epoch %" PRIu64 " holds", journaled, file, journaled);
        if (!epoch_write(o->data_dir, journaled, err, errlen)) {
            repl_close(r);
            return NULL;
        }
    }
    persist_epoch_keep(p, r->epoch);
    run_new(r);
    /* a primary of a group asks its peers before its first change */
    atomic_store(&r->role, r->ngroup ? ROLE_PROBING : ROLE_PRIMARY);
    snprintf(r->probe_state, sizeof(r->probe_state), "not asked yet");
    if (o->replica_of[0]) {
        pthread_mutex_lock(&r->role_mu);
        bool ok = follow(r, o->replica_of, 0, err, errlen);
        pthread_mutex_unlock(&r->role_mu);
        if (!ok) {
            repl_close(r);
            return NULL;
        }
    }
    if (r->ngroup) {
        r->prober_on = pthread_create(&r->prober, NULL, prober_main, r) == 0;
        if (!r->prober_on) {
            snprintf(err, errlen, "cannot start the thread that asks the --peers");
            repl_close(r);
            return NULL;
        }
    }
    return r;
}

void repl_close(repl_t *r)
{
    if (!r)
        return;
    atomic_store(&r->stopping, true);
    pthread_mutex_lock(&r->mu);
    r->closing = true;
    pthread_cond_broadcast(&r->probe_cv);
    pthread_mutex_unlock(&r->mu);
    if (r->prober_on)
        pthread_join(r->prober, NULL);   /* before the follower: it may start one */
    follower_stop(r);
    pthread_mutex_lock(&r->mu);
    pthread_cond_broadcast(&r->grew);
    waiter_t *all = r->waiters;
    r->waiters = NULL;
    api_undo_t *doubt = r->doubt;
    r->doubt = NULL;
    pthread_mutex_unlock(&r->mu);
    waiters_finish(all, false, "shutting down");
    api_undo_free(r->api, doubt);
    pthread_rwlock_destroy(&r->gate);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->role_mu);
    pthread_cond_destroy(&r->grew);
    pthread_cond_destroy(&r->probe_cv);
    free(r->ring);
    free(r);
}

/* Lag of a peer (mu held): records and ms behind the stream's head. */
static void peer_lag(const repl_t *r, const peer_t *pe, int64_t now_ms, uint64_t *records, int64_t *ms)
{
    *records = r->records > pe->records ? r->records - pe->records : 0;
    *ms = 0;
    if (pe->acked < r->head && pe->acked >= r->tail) {
        int64_t t = record_ms(r, pe->acked);
        *ms = now_ms > t ? now_ms - t : 0;
    }
}

void repl_info(repl_t *r, json_t *obj)
{
    pthread_mutex_lock(&r->mu);
    int role = atomic_load(&r->role);
    json_t *o = json_pack("{s:s,s:I,s:s,s:I,s:I,s:I,s:I,s:i,s:i}", "role", role_names[role], "epoch",
                          (json_int_t)r->epoch, "run", r->run, "offset", (json_int_t)r->head, "records",
                          (json_int_t)r->records, "backlog_bytes", (json_int_t)(r->head - r->tail),
                          "backlog_capacity", (json_int_t)r->cap, "min_replicas_ack", r->min_acks,
                          "min_replicas_timeout_ms", r->ack_timeout_ms);
    json_object_set_new(o, "primary", role == ROLE_REPLICA ? json_string(r->primary) : json_null());
    if (r->ngroup) {
        json_t *g = json_array();
        for (int i = 0; i < r->ngroup; i++)
            json_array_append_new(g, json_string(r->group[i]));
        json_object_set_new(o, "peers", g);
        json_object_set_new(o, "peers_state", json_string(r->probe_state));
        json_object_set_new(o, "peers_epoch", json_integer((json_int_t)r->peer_epoch));
    }
    json_t *list = json_array();
    int64_t now = mono_ms(), wall = clock_now_ns() / 1000000;
    int connected = 0;
    for (int i = 0; i < r->npeers; i++) {
        const peer_t *pe = &r->peers[i];
        bool alive = peer_alive(pe, now);
        connected += alive;
        uint64_t lr;
        int64_t lm;
        peer_lag(r, pe, wall, &lr, &lm);
        json_array_append_new(list, json_pack("{s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:I}", "id", pe->id, "addr", pe->addr,
                                              "connected", alive, "offset", (json_int_t)pe->acked, "records",
                                              (json_int_t)pe->records, "lag_records", (json_int_t)lr, "lag_ms",
                                              (json_int_t)lm, "last_seen_ms_ago", (json_int_t)(now - pe->seen_ms)));
    }
    json_object_set_new(o, "replicas", list);
    json_object_set_new(o, "replicas_connected", json_integer(connected));
    json_object_set_new(o, "acks_timed_out", json_integer((json_int_t)r->acks_timed_out));
    json_object_set_new(o, "refused_too_few_replicas", json_integer((json_int_t)r->refused_no_replicas));
    json_object_set_new(o, "keys_taken_back", json_integer((json_int_t)r->undone_keys));
    if (r->follower)
        replica_info(r->follower, o);
    pthread_mutex_unlock(&r->mu);
    json_object_set_new(obj, "replication", o);
}

void repl_metrics(repl_t *r, wbuf_t *out)
{
    char line[1024];
    pthread_mutex_lock(&r->mu);
    int role = atomic_load(&r->role);
    int n = snprintf(line, sizeof(line),
                     "# HELP tally_replication_role This node's role (1 for the role it has).\n"
                     "# TYPE tally_replication_role gauge\n"
                     "tally_replication_role{role=\"primary\"} %d\n"
                     "tally_replication_role{role=\"replica\"} %d\n"
                     "tally_replication_role{role=\"fenced\"} %d\n"
                     "tally_replication_role{role=\"probing\"} %d\n"
                     "# HELP tally_replication_epoch Promotions this node knows of.\n"
                     "# TYPE tally_replication_epoch gauge\n"
                     "tally_replication_epoch %" PRIu64 "\n"
                     "# HELP tally_replication_offset Bytes of records in this primary's stream.\n"
                     "# TYPE tally_replication_offset counter\n"
                     "tally_replication_offset %" PRIu64 "\n",
                     role == ROLE_PRIMARY, role == ROLE_REPLICA, role == ROLE_FENCED, role == ROLE_PROBING, r->epoch,
                     r->head);
    wbuf_put_bytes(out, line, (size_t)n);
    int64_t now = mono_ms(), wall = clock_now_ns() / 1000000;
    int connected = 0;
    for (int i = 0; i < r->npeers; i++)
        connected += peer_alive(&r->peers[i], now);
    n = snprintf(line, sizeof(line),
                 "# HELP tally_replicas_connected Replicas that polled the stream in the last 3 s.\n"
                 "# TYPE tally_replicas_connected gauge\n"
                 "tally_replicas_connected %d\n"
                 "# HELP tally_replication_acks_timed_out_total Changes answered 503 for want of acknowledgements.\n"
                 "# TYPE tally_replication_acks_timed_out_total counter\n"
                 "tally_replication_acks_timed_out_total %" PRIu64 "\n"
                 "# HELP tally_replication_keys_taken_back_total Keys restored because their changes timed out.\n"
                 "# TYPE tally_replication_keys_taken_back_total counter\n"
                 "tally_replication_keys_taken_back_total %" PRIu64 "\n"
                 "# HELP tally_replica_lag_records Records a replica is behind.\n"
                 "# TYPE tally_replica_lag_records gauge\n",
                 connected, r->acks_timed_out, r->undone_keys);
    wbuf_put_bytes(out, line, (size_t)n);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            static const char h[] = "# HELP tally_replica_lag_ms Age of the oldest record a replica has not acknowledged.\n"
                                    "# TYPE tally_replica_lag_ms gauge\n";
            wbuf_put_bytes(out, h, sizeof(h) - 1);
        }
        for (int i = 0; i < r->npeers; i++) {
            const peer_t *pe = &r->peers[i];
            if (!peer_alive(pe, now))
                continue;
            uint64_t lr;
            int64_t lm;
            peer_lag(r, pe, wall, &lr, &lm);
            n = pass == 0 ? snprintf(line, sizeof(line), "tally_replica_lag_records{replica=\"%s\"} %" PRIu64 "\n", pe->id, lr)
                          : snprintf(line, sizeof(line), "tally_replica_lag_ms{replica=\"%s\"} %" PRId64 "\n", pe->id, lm);
            wbuf_put_bytes(out, line, (size_t)n);
        }
    }
    if (r->follower)
        replica_metrics(r->follower, out);
    pthread_mutex_unlock(&r->mu);
}
