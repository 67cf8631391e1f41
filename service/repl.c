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
#include <sys/stat.h>
#include <unistd.h>

#include "core/persist_fmt.h"
#include "cmd/undo.h"
#include "service/clock.h"
#include "service/file.h"
#include "service/log.h"
#include "service/peers.h"
#include "service/replica.h"

#define REPL_MAX_PEERS CMD_REPL_REPLICAS_MAX
#define REPL_PEER_ALIVE_MS 3000      /* a replica that polled this recently is connected */
#define REPL_BATCH_BYTES (1u << 20)  /* records answered by one poll at most */
#define EPOCH_NAME "EPOCH"
#define PROBE_RETRY_MS 500           /* probing or fenced: ask the peers again after */
#define PROBE_STEADY_MS 2000         /* a primary or a replica asks its peers this often */
#define PROBE_TIMEOUT_MS 1000        /* one peer's answer, at most */
#define PROBE_WAKE_MS 200            /* a round asked for by a caller's newer epoch: this long after the last,
                                        at the soonest (a stream of such polls costs a round per 200 ms) */
#define REPL_UNDONE_MAX 64           /* stream ranges taken back that are remembered */

_Static_assert(OPTS_PEERS_MAX <= CMD_REPL_GROUP_MAX && OPTS_PEER_URL_MAX == CMD_REPL_URL_MAX,
               "the group fits cmd_repl_status_t");

enum { ROLE_PRIMARY, ROLE_REPLICA, ROLE_FENCED, ROLE_PROBING };
static const char *const role_names[] = { "primary", "replica", "fenced", "probing" };

/* A replica as the primary sees it, from its polls. */
typedef struct peer {
    char id[CMD_REPL_ID_MAX];
    char addr[CMD_REPL_ADDR_MAX];
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
    cmd_server_t *srv;
    persist_t *p;
    char dir[512];
    int min_acks, ack_timeout_ms;

    /* --peers: the other nodes of the group, asked by the prober thread. */
    char group[OPTS_PEERS_MAX][OPTS_PEER_URL_MAX];
    int ngroup;
    pthread_t prober;
    bool prober_on;
    pthread_cond_t probe_cv;     /* closing, or probe_now */
    peer_answer_t answers[OPTS_PEERS_MAX];   /* the prober thread's */
    char told[OPTS_PEERS_MAX][800];          /* the prober's: why each did not count, as last logged */
    _Atomic bool stopping;       /* repl_close: a question in flight is abandoned */
    bool probe_now;              /* a caller sent a newer epoch: a round soon (mu) */
    uint64_t stale_logged;       /* the newest caller's epoch logged (mu): one line per epoch, not per poll */
    uint64_t peer_epoch;         /* the highest epoch of the last round's authenticated answers (mu) */
    char probe_state[1400];      /* the last round's outcome, for /info (mu) */

    /* Credentials (mu; the files are re-read by repl_reload). */
    char token[CMD_TOKEN_MAX_LEN + 1];   /* presented to the primary and to the peers */
    uint8_t secret[PEERS_SECRET_MAX];    /* signs this node's answers, checks the peers' */
    size_t secret_len;

    pthread_mutex_t role_mu;     /* one role change at a time (promote, follow, prober) */
    pthread_mutex_t mu;
    pthread_cond_t grew;         /* the backlog grew, or the role changed */
    _Atomic int role;            /* read without mu on every change */
    char primary[CMD_REPL_URL_MAX];
    uint64_t epoch;
    char run[CMD_REPL_ID_MAX];
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
    cmd_undo_t *doubt, **doubt_tail;
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

/* Reads EPOCH: 0 when there is none; false with err when it holds
 * anything but a decimal epoch up to TALLY_EPOCH_MAX and a newline. */
static bool epoch_read(const char *dir, uint64_t *epoch, char *err, size_t errlen)
{
    char path[600], text[40];
    snprintf(path, sizeof(path), "%s/%s", dir, EPOCH_NAME);
    *epoch = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return true;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return false;
    }
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    bool rerr = ferror(f);
    fclose(f);
    text[n] = '\0';
    if (rerr) {
        snprintf(err, errlen, "cannot read %s", path);
        return false;
    }
    if (!repl_epoch_parse(text, n, epoch)) {
        if (n && text[n - 1] == '\n')
            text[--n] = '\0';   /* shown as it reads, without its line end */
        for (size_t i = 0; i < n; i++)
            if (text[i] < 0x20 || text[i] > 0x7e)
                text[i] = '?';
        snprintf(err, errlen,
                 "%s holds \"%.24s%s\", not an epoch (a decimal number from 0 to %" PRIu64 "): restore it, or remove "
                 "it if the journal holds the promotion's epoch record (a restart then rewrites it)",
                 path, text, n > 24 ? "..." : "", TALLY_EPOCH_MAX);
        return false;
    }
    return true;
}

bool repl_epoch_parse(const char *text, size_t len, uint64_t *epoch)
{
    if (len && text[len - 1] == '\n')
        len--;
    uint64_t v = 0;
    bool ok = len > 0;   /* leading zeros allowed, as the epoch record allows them */
    for (size_t i = 0; ok && i < len; i++) {
        ok = text[i] >= '0' && text[i] <= '9' && v <= (TALLY_EPOCH_MAX - (uint64_t)(text[i] - '0')) / 10;
        v = v * 10 + (uint64_t)(text[i] - '0');
    }
    if (ok)
        *epoch = v;
    return ok;
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
/* Credentials: the replica token and the group's secret                    */
/* ------------------------------------------------------------------------ */

/* Reads a credential file whole into buf (at most max bytes, one trailing
 * newline - or CRLF - trimmed): a regular file that other users cannot
 * read and only its owner can write; readable by its group is allowed with
 * a warning (a Kubernetes Secret mounted with an fsGroup is).  False with
 * err naming the flag and the file. */
static bool cred_read(const char *flag, const char *path, uint8_t *buf, size_t max, size_t *len, char *err,
                      size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s %s: not a regular file", flag, path);
        close(fd);
        return false;
    }
    if (st.st_mode & (S_IROTH | S_IWOTH | S_IWGRP)) {
        snprintf(err, errlen, "%s %s: mode %04o lets other users %s it: chmod 600 %s (or 640 for a group that must "
                 "read it)", flag, path, (unsigned)(st.st_mode & 07777),
                 st.st_mode & (S_IWOTH | S_IWGRP) ? "change" : "read", path);
        close(fd);
        return false;
    }
    if (st.st_mode & S_IRGRP)
        log_warn("%s %s: readable by its group (mode %04o): every member of the group can read it", flag, path,
                 (unsigned)(st.st_mode & 07777));
    size_t n = 0;
    for (;;) {
        uint8_t extra;
        ssize_t got = n < max ? read(fd, buf + n, max - n) : read(fd, &extra, 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
            close(fd);
            return false;
        }
        if (got == 0)
            break;
        if (n == max) {
            snprintf(err, errlen, "%s %s: longer than %zu bytes", flag, path, max);
            close(fd);
            return false;
        }
        n += (size_t)got;
    }
    close(fd);
    if (n && buf[n - 1] == '\n')
        n--;
    if (n && buf[n - 1] == '\r')
        n--;
    *len = n;
    return true;
}

/* A bearer token goes into a header: printable ASCII, no space. */
static bool token_ok(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            return false;
    return n > 0;
}

bool repl_creds_load(const tally_opts_t *o, repl_creds_t *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    if (o->replica_token_file[0]) {
        size_t n = 0;
        if (!cred_read("--replica-token-file", o->replica_token_file, (uint8_t *)c->token, CMD_TOKEN_MAX_LEN, &n,
                       err, errlen))
            return false;
        c->token[n] = '\0';
        if (!token_ok(c->token, n) || strlen(c->token) != n) {
            snprintf(err, errlen,
                     "--replica-token-file %s: %s (one line: the token, as a client sends it after \"Bearer \")",
                     o->replica_token_file, n ? "holds a space, a control character or a second line" : "is empty");
            repl_creds_wipe(c);
            return false;
        }
    } else if (o->replica_token[0]) {
        if (!token_ok(o->replica_token, strlen(o->replica_token))) {
            snprintf(err, errlen, "--replica-token: a space or a control character cannot be part of a bearer token");
            return false;
        }
        snprintf(c->token, sizeof(c->token), "%s", o->replica_token);
    }
    if (o->peer_secret_file[0]) {
        if (!cred_read("--peer-secret-file", o->peer_secret_file, c->secret, sizeof(c->secret), &c->secret_len, err,
                       errlen)) {
            repl_creds_wipe(c);
            return false;
        }
        if (c->secret_len < PEERS_SECRET_MIN) {
            snprintf(err, errlen,
                     "--peer-secret-file %s: %zu bytes; the group's secret needs at least %d (make one with: head -c "
                     "32 /dev/urandom | base64 > FILE; chmod 600 FILE; the same file on every node)",
                     o->peer_secret_file, c->secret_len, PEERS_SECRET_MIN);
            repl_creds_wipe(c);
            return false;
        }
    }
    return true;
}

void repl_creds_wipe(repl_creds_t *c) { explicit_bzero(c, sizeof(*c)); }

bool repl_reloadable(const tally_opts_t *o) { return o->replica_token_file[0] || o->peer_secret_file[0]; }

bool repl_reload(repl_t *r, const tally_opts_t *o, char *err, size_t errlen)
{
    repl_creds_t *c = malloc(sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory reloading the replication credentials");
        return false;
    }
    bool ok = repl_creds_load(o, c, err, errlen);
    if (ok) {
        pthread_mutex_lock(&r->mu);
        memcpy(r->token, c->token, sizeof(r->token));
        memcpy(r->secret, c->secret, sizeof(r->secret));
        r->secret_len = c->secret_len;
        replica_t *f = r->follower;
        bool set = !f || replica_set_token(f, r->token);
        pthread_mutex_unlock(&r->mu);
        if (!set) {
            snprintf(err, errlen, "out of memory giving the follower its new token");
            ok = false;
        }
    }
    repl_creds_wipe(c);
    free(c);
    return ok;
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
static cmd_undo_t *safe_advance(repl_t *r, int64_t now)
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
    cmd_undo_t *safe = safe_advance(r, now);
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
    cmd_undo_t *safe = safe_advance(r, now);
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
        cmd_undo_free(r->srv, safe);
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
    waiters_finish(acked, true, NULL);

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
    cmd_undo_t *safe = safe_advance(r, now), *stale = NULL;
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
    char run[CMD_REPL_ID_MAX];
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

/* Refuses a call: *out says why (cmd/err.h), and nothing else. */
#define refuse(out, code, ...) ((out)->ok = false, cmd_err_set(&(out)->err, (code), NULL, __VA_ARGS__))

static bool not_primary(repl_t *r, cmd_repl_result_t *out)
{
    int role = atomic_load(&r->role);
    if (role == ROLE_PRIMARY)
        return false;
    refuse(out, CMD_E_UNAVAILABLE, "this node is %s, not the primary: replicas follow the primary",
           role == ROLE_REPLICA ? "a replica" : "a fenced former primary");
    return true;
}

/* A request from a replica that knows a newer epoch than this node's: it
 * follows a node promoted since, not this one.  Refused with 409, and
 * nothing else: a caller's epoch never fences a node by itself (anyone with
 * a replicate token could send one).  With --peers the prober asks the
 * group at once, and an authenticated majority decides (mu held). */
static bool stale(repl_t *r, uint64_t epoch, cmd_repl_result_t *out)
{
    if (epoch <= r->epoch)
        return false;
    if (r->ngroup) {
        r->probe_now = true;
        pthread_cond_broadcast(&r->probe_cv);
    }
    if (epoch > r->stale_logged) {
        r->stale_logged = epoch;
        log_warn("replication: a replica asked with epoch %" PRIu64 ", newer than this node's %" PRIu64 "; refused "
                 "(409). %s",
                 epoch, r->epoch,
                 r->ngroup ? "Asking the --peers: a majority reporting the newer epoch makes this node follow its "
                             "primary, or fences it"
                           : "Without --peers this node stays as it is: if another node was promoted, make this one "
                             "its replica (POST /admin/replicate?primary=URL)");
    }
    refuse(out, CMD_E_CONFLICT,
           "this node's epoch %" PRIu64 " is older than %" PRIu64 ": follow the primary of the newer epoch", r->epoch,
           epoch);
    return true;
}

static void serve_snapshot(repl_t *r, uint64_t epoch, cmd_repl_result_t *out)
{
    pthread_mutex_lock(&r->mu);
    bool refused = stale(r, epoch, out) || not_primary(r, out);
    pthread_mutex_unlock(&r->mu);
    if (refused)
        return;
    wbuf_t b = WBUF_INIT;
    struct barrier bar = { .r = r };
    char err[256];
    if (!persist_snapshot_to_buffer(r->p, &b, at_barrier, &bar, err, sizeof(err))) {
        wbuf_free(&b);
        refuse(out, CMD_E_INTERNAL, "%s", err);
        return;
    }
    out->data = b.data;   /* the caller's from now on */
    out->len = b.len;
    memcpy(out->run, bar.run, sizeof(out->run));
    out->offset = bar.offset;
    out->records = bar.records;
    out->epoch = bar.epoch;
    log_info("replication: snapshot of %zu bytes sent at offset %" PRIu64, b.len, bar.offset);
}

static void serve_log(repl_t *r, const cmd_repl_call_t *c, cmd_repl_result_t *out)
{
    pthread_mutex_lock(&r->mu);
    int64_t now = mono_ms();
    if (stale(r, c->epoch, out)) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (not_primary(r, out)) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (strcmp(c->run, r->run) != 0 || c->from < r->tail || c->from > r->head || !atomic_load(&r->active)) {
        pthread_mutex_unlock(&r->mu);
        refuse(out, CMD_E_GONE, "position %s/%" PRIu64 " is not in this primary's backlog: fetch a snapshot", c->run,
               c->from);
        return;
    }
    peer_t *pe = peer_get(r, c->id, now);
    if (!pe) {
        pthread_mutex_unlock(&r->mu);
        refuse(out, CMD_E_UNAVAILABLE, "too many replicas (at most %d)", REPL_MAX_PEERS);
        return;
    }
    snprintf(pe->addr, sizeof(pe->addr), "%s", c->addr);
    pe->acked = c->from;
    pe->records = c->records;
    pe->seen_ms = now;
    pe->polling = true;
    waiter_t *acked = NULL;
    cmd_undo_t *safe = safe_advance(r, now);
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
    cmd_undo_free(r->srv, safe);
    if (gone || b.oom) {
        wbuf_free(&b);
        if (gone)
            refuse(out, CMD_E_GONE, "position %s/%" PRIu64 " left the backlog: fetch a snapshot", c->run, c->from);
        else
            refuse(out, CMD_E_OUT_OF_MEMORY, "out of memory reading the backlog");
        return;
    }
    if (b.len) {
        out->data = b.data;   /* the caller's from now on */
        out->len = b.len;
    } else {
        wbuf_free(&b);
    }
    out->offset = head;
    out->records = records;
    out->epoch = epoch;
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
    size_t pl = strlen(r->primary);
    while (pl && r->primary[pl - 1] == '/')   /* spelled as --peers and the peers' answers are compared */
        r->primary[--pl] = '\0';
    r->epoch = epoch > epoch_hint ? epoch : epoch_hint;
    r->follower = replica_start(primary, r->token, r->srv, r->p, r->epoch);   /* the token goes to `primary` only */
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
static void serve_promote(repl_t *r, cmd_repl_result_t *out)
{
    if (atomic_load(&r->role) == ROLE_PRIMARY) {
        out->epoch = r->epoch;
        out->promoted = false;
        return;
    }
    uint64_t epoch = follower_stop(r);
    pthread_mutex_lock(&r->mu);
    epoch = epoch > r->peer_epoch ? epoch : r->peer_epoch;   /* above its own and its peers' last answers */
    pthread_mutex_unlock(&r->mu);
    if (epoch >= TALLY_EPOCH_MAX) {
        refuse(out, CMD_E_INTERNAL,
               "promotion failed, this node takes no changes: the next epoch would pass the largest, %" PRIu64
               " (this node or a peer reports %" PRIu64 ")",
               TALLY_EPOCH_MAX, epoch);
        return;
    }
    epoch++;
    char err[700];
    if (!epoch_write(r->dir, epoch, err, sizeof(err))) {
        refuse(out, CMD_E_INTERNAL, "promotion failed, this node takes no changes: %s", err);
        return;
    }
    /* what was replicated becomes durable here before the first change */
    snapshot_stats_t st;
    if (!persist_snapshot(r->p, &st, err, sizeof(err))) {
        refuse(out, CMD_E_INTERNAL, "promotion failed, this node takes no changes: %s", err);
        return;
    }
    /* the epoch with the data: replayed at a restart, streamed to replicas */
    journal_req_t rec;
    char body[JOURNAL_EPOCH_BUF];
    if (!persist_epoch_append(r->p, epoch, &rec, body, err, sizeof(err))) {
        refuse(out, CMD_E_INTERNAL, "promotion failed, this node takes no changes: %s", err);
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
    out->epoch = epoch;
    out->promoted = true;
}

/* What a peer asks (the front-end has repl_sign sign its answer). */
static void serve_epoch(repl_t *r, cmd_repl_result_t *out)
{
    pthread_mutex_lock(&r->mu);
    int role = atomic_load(&r->role);
    out->role = role_names[role];
    out->epoch = known_epoch(r);
    memcpy(out->run, r->run, sizeof(out->run));
    out->has_primary = role == ROLE_REPLICA;
    if (out->has_primary)
        memcpy(out->primary, r->primary, sizeof(out->primary));
    pthread_mutex_unlock(&r->mu);
}

_Static_assert(PEERS_SIG_LEN + 1 <= CMD_REPL_SIG_MAX, "a signature fits the front-end's buffer");

bool repl_sign(repl_t *r, const char *nonce, const void *body, size_t len, char out[CMD_REPL_SIG_MAX])
{
    pthread_mutex_lock(&r->mu);
    bool sign = r->secret_len > 0;
    if (sign)
        peers_sign(r->secret, r->secret_len, nonce, body, len, out);
    pthread_mutex_unlock(&r->mu);
    return sign;
}

/* ------------------------------------------------------------------------ */
/* Asking the peers (--peers)                                               */
/* ------------------------------------------------------------------------ */

/* The member of the group whose URL is `url` (spelled as in --peers, no
 * trailing '/'), or -1: not a configured member. */
static int member_of(const repl_t *r, const char *url)
{
    for (int i = 0; i < r->ngroup; i++)
        if (!strcmp(r->group[i], url))
            return i;
    return -1;
}

/* Logs why member i's answer does not count ("" it counts), when that
 * changed since the round before: a peer down for an hour is one line, not
 * one every round (prober thread). */
static void tell_once(repl_t *r, int i, const char *why)
{
    if (!strncmp(r->told[i], why, sizeof(r->told[i]) - 1))
        return;
    if (why[0])
        log_warn("replication: an answer of the --peers does not count: %s", why);
    else
        log_info("replication: peer %s answers again", r->group[i]);
    snprintf(r->told[i], sizeof(r->told[i]), "%s", why);
}

/* One round: asks every member, then decides from this round's answers only
 * (role_mu held by the caller), by the rules of repl.h.  An answer counts
 * when it is signed for this round's question (service/peers.h); one that
 * carries this node's own stream id is this node (the first such entry is
 * left out of the group, any other never votes), and two entries answering
 * with one stream id are one node, counted once. */
static void probe_round(repl_t *r)
{
    peer_answer_t *ans = r->answers;
    char token[sizeof(r->token)];
    uint8_t key[sizeof(r->secret)];
    pthread_mutex_lock(&r->mu);
    r->probe_now = false;
    memcpy(token, r->token, sizeof(token));
    size_t klen = r->secret_len;
    memcpy(key, r->secret, klen);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < r->ngroup; i++)
        peers_ask(r->group[i], token, key, klen, PROBE_TIMEOUT_MS, &r->stopping, &ans[i]);
    explicit_bzero(key, sizeof(key));
    explicit_bzero(token, sizeof(token));

    pthread_mutex_lock(&r->mu);
    int role = atomic_load(&r->role);
    uint64_t mine = known_epoch(r), top = 0;
    int self = -1;
    for (int i = 0; i < r->ngroup && self < 0; i++)
        if (ans[i].answered && !strcmp(ans[i].run, r->run))
            self = i;
    int others = r->ngroup - (self >= 0), need = others / 2 + 1;
    int vote[OPTS_PEERS_MAX];    /* the member an answer names as the primary of its epoch, or -1 */
    int answered = 0, newer = 0, rivals = 0;
    char why[sizeof(r->told[0])] = "";   /* the last reason an answer did not count */
    for (int i = 0; i < r->ngroup; i++) {
        const peer_answer_t *a = &ans[i];
        vote[i] = -1;
        if (i == self)
            continue;
        char reason[sizeof(why)] = "";
        if (!a->answered)
            snprintf(reason, sizeof(reason), "%s", a->error);
        else if (!strcmp(a->run, r->run))
            snprintf(reason, sizeof(reason), "%s answers as this node (listed twice?): not counted", r->group[i]);
        for (int j = 0; j < i && !reason[0]; j++)
            if (j != self && ans[j].answered && !strcmp(ans[j].run, a->run))
                snprintf(reason, sizeof(reason), "%s answers as %s (one node listed twice?): counted once",
                         r->group[i], r->group[j]);
        tell_once(r, i, reason);
        if (reason[0]) {
            memcpy(why, reason, sizeof(why));
            continue;
        }
        answered++;
        top = a->epoch > top ? a->epoch : top;
        newer += a->epoch > mine;
        rivals += a->epoch == mine && !strcmp(a->role, "probing");
        if (!strcmp(a->role, "primary"))
            vote[i] = i;
        else if (!strcmp(a->role, "replica") && a->primary[0])
            vote[i] = member_of(r, a->primary);   /* -1 when it is not a configured member */
        if (vote[i] == self)
            vote[i] = -1;                          /* this node is not a primary to follow */
    }
    r->peer_epoch = top;   /* this round's, not kept: a promotion goes above it */
    /* the primary a majority agrees on: the newest epoch's */
    int best = -1, agree = 0;
    uint64_t best_epoch = 0;
    for (int i = 0; i < r->ngroup; i++) {
        if (vote[i] < 0)
            continue;
        int n = 0;
        for (int j = 0; j < r->ngroup; j++)
            n += vote[j] == vote[i] && ans[j].epoch == ans[i].epoch;
        if (n >= need && (best < 0 || ans[i].epoch > best_epoch)) {
            best = vote[i];
            best_epoch = ans[i].epoch;
            agree = n;
        }
    }
    const char *to = NULL;
    if (best >= 0 && role == ROLE_PRIMARY) {
        to = best_epoch > mine ? r->group[best] : NULL;
    } else if (best >= 0 && role == ROLE_REPLICA) {
        /* its own primary, a member, no longer says it is the primary: it
         * was replaced while this node was not told */
        int k = member_of(r, r->primary);
        bool stands = k < 0 || (ans[k].answered && !strcmp(ans[k].role, "primary"));
        if (strcmp(r->group[best], r->primary) != 0 && (best_epoch > mine || (best_epoch == mine && !stands)))
            to = r->group[best];
    } else if (best >= 0) {   /* probing or fenced: a primary of its epoch or newer */
        to = best_epoch >= mine ? r->group[best] : NULL;
    }
    int group_need = (others + 1) / 2 + 1;   /* of the whole group, this node included */
    if (!to && newer >= need && role != ROLE_REPLICA) {
        if (role != ROLE_FENCED) {
            atomic_store(&r->role, ROLE_FENCED);
            log_error("replication: %d of the %d other members of the group report an epoch newer than this "
                      "node's %" PRIu64 " (up to %" PRIu64 ") and no majority names its primary: fenced (no change "
                      "taken) until one does",
                      newer, others, mine, top);
        }
    } else if (!to && role == ROLE_FENCED) {
        atomic_store(&r->role, ROLE_PROBING);
        role = ROLE_PROBING;
        log_warn("replication: fewer than %d of the %d other members of the group report an epoch newer than "
                 "%" PRIu64 " now: the fence lifts, this node is probing again",
                 need, others, mine);
    }
    if (!to && role == ROLE_PROBING && newer == 0 && rivals == 0 && answered + 1 >= group_need) {
        atomic_store(&r->role, ROLE_PRIMARY);
        log_info("replication: %d of the %d nodes of the group answered, none of a newer epoch than %" PRIu64
                 ": this node is the primary",
                 answered + 1, others + 1, mine);
    }
    role = atomic_load(&r->role);
    char note[300] = "";
    if (newer && newer < need)
        snprintf(note, sizeof(note), "; %d of %d report a newer epoch (up to %" PRIu64 "), %d needed to act", newer,
                 others, top, need);
    else if (rivals)
        snprintf(note, sizeof(note), "; another node is probing under the same epoch");
    const char *sep = why[0] ? "; " : "";
    if (to)
        snprintf(r->probe_state, sizeof(r->probe_state),
                 "following %.300s (epoch %" PRIu64 ": %d of %d members agree)%s%.400s", to, best_epoch, agree, others,
                 sep, why);
    else if (role == ROLE_PROBING)
        snprintf(r->probe_state, sizeof(r->probe_state), "%d of %d nodes answered (%d needed)%s%s%.400s",
                 answered + 1, others + 1, group_need, note, sep, why);
    else if (role == ROLE_FENCED)
        snprintf(r->probe_state, sizeof(r->probe_state),
                 "fenced: %d of %d members report an epoch newer than %" PRIu64 " (up to %" PRIu64 "), and no %d "
                 "agree on its primary%s%.400s",
                 newer, others, mine, top, need, sep, why);
    else if (role == ROLE_REPLICA)
        snprintf(r->probe_state, sizeof(r->probe_state), "%d of %d nodes answered; this node follows %.300s%s%s%.400s",
                 answered + 1, others + 1, r->primary, note, sep, why);
    else
        snprintf(r->probe_state, sizeof(r->probe_state), "%d of %d nodes answered%s%s%.400s", answered + 1,
                 others + 1, note, sep, why);
    char target[OPTS_PEER_URL_MAX] = "";
    if (to)
        snprintf(target, sizeof(target), "%s", to);
    pthread_mutex_unlock(&r->mu);
    if (target[0]) {
        char err[200];
        log_warn("replication: %d of the %d other members of the group report %s as the primary of epoch %" PRIu64
                 " (this node knew %" PRIu64 "): this node follows it and takes no change",
                 agree, others, target, best_epoch, mine);
        if (!follow(r, target, best_epoch, err, sizeof(err)))
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
        int64_t done = mono_ms();
        int64_t next = done + (role == ROLE_PRIMARY || role == ROLE_REPLICA ? PROBE_STEADY_MS : PROBE_RETRY_MS);
        int64_t soonest = done + PROBE_WAKE_MS;   /* a caller's newer epoch asks for a round: not before */
        for (;;) {
            int64_t now = mono_ms();
            if (r->closing || now >= next || (r->probe_now && now >= soonest))
                break;
            cond_wait_ms(&r->probe_cv, &r->mu, (r->probe_now ? soonest : next) - now);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

void repl_run(repl_t *r, const cmd_repl_call_t *c, cmd_repl_result_t *out)
{
    memset(out, 0, sizeof(*out));
    out->ok = true;
    switch (c->op) {
    case CMD_REPL_SNAPSHOT:
        serve_snapshot(r, c->epoch, out);
        break;
    case CMD_REPL_LOG:
        serve_log(r, c, out);
        break;
    case CMD_REPL_EPOCH:
        serve_epoch(r, out);
        break;
    case CMD_REPL_PROMOTE:
        pthread_mutex_lock(&r->role_mu);
        serve_promote(r, out);
        pthread_mutex_unlock(&r->role_mu);
        break;
    case CMD_REPL_FOLLOW: {
        char err[200];
        pthread_mutex_lock(&r->role_mu);
        bool ok = follow(r, c->primary, 0, err, sizeof(err));
        pthread_mutex_unlock(&r->role_mu);
        if (!ok)
            refuse(out, CMD_E_OUT_OF_MEMORY, "%s", err);
        break;
    }
    }
}

bool repl_writable(repl_t *r, char *primary, size_t n)
{
    int role = atomic_load_explicit(&r->role, memory_order_relaxed);
    if (role == ROLE_PRIMARY)
        return true;
    pthread_mutex_lock(&r->mu);
    snprintf(primary, n, "%s", role == ROLE_REPLICA ? r->primary : "");
    pthread_mutex_unlock(&r->mu);
    return false;
}

const char *repl_role(repl_t *r)
{
    return role_names[atomic_load(&r->role)];
}


/* ------------------------------------------------------------------------ */
/* Lifecycle, /info, /metrics                                               */
/* ------------------------------------------------------------------------ */

repl_t *repl_open(const tally_opts_t *o, const repl_creds_t *c, cmd_server_t *srv, persist_t *p, char *err,
                  size_t errlen)
{
    repl_t *r = calloc(1, sizeof(*r));
    if (r)
        r->ring = malloc(o->repl_backlog);
    if (!r || !r->ring) {
        free(r);
        snprintf(err, errlen, "out of memory allocating the %zu-byte replication backlog", o->repl_backlog);
        return NULL;
    }
    r->srv = srv;
    r->p = p;
    r->cap = o->repl_backlog;
    r->min_acks = o->min_replicas_ack;
    r->ack_timeout_ms = o->min_replicas_timeout;
    snprintf(r->dir, sizeof(r->dir), "%s", o->data_dir);
    memcpy(r->token, c->token, sizeof(r->token));
    memcpy(r->secret, c->secret, sizeof(r->secret));
    r->secret_len = c->secret_len;
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
    uint64_t file = 0, journaled = persist_journal_epoch(p);   /* the journal's: range-checked by its reader */
    if (!epoch_read(o->data_dir, &file, err, errlen)) {
        repl_close(r);
        return NULL;
    }
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
    cmd_undo_t *doubt = r->doubt;
    r->doubt = NULL;
    pthread_mutex_unlock(&r->mu);
    waiters_finish(all, false, "shutting down");
    cmd_undo_free(r->srv, doubt);
    pthread_rwlock_destroy(&r->gate);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->role_mu);
    pthread_cond_destroy(&r->grew);
    pthread_cond_destroy(&r->probe_cv);
    explicit_bzero(r->secret, sizeof(r->secret));
    explicit_bzero(r->token, sizeof(r->token));
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

void repl_status(repl_t *r, cmd_repl_status_t *st)
{
    memset(st, 0, sizeof(*st));
    pthread_mutex_lock(&r->mu);
    int role = atomic_load(&r->role);
    st->role = role_names[role];
    st->epoch = r->epoch;
    memcpy(st->run, r->run, sizeof(st->run));
    st->offset = r->head;
    st->records = r->records;
    st->backlog_bytes = r->head - r->tail;
    st->backlog_capacity = r->cap;
    st->min_replicas_ack = r->min_acks;
    st->min_replicas_timeout_ms = r->ack_timeout_ms;
    st->has_primary = role == ROLE_REPLICA;
    if (st->has_primary)
        memcpy(st->primary, r->primary, sizeof(st->primary));
    st->ngroup = r->ngroup;
    for (int i = 0; i < r->ngroup; i++)
        memcpy(st->group[i], r->group[i], sizeof(st->group[i]));
    memcpy(st->peers_state, r->probe_state, sizeof(st->peers_state));
    st->peers_epoch = r->peer_epoch;
    int64_t now = mono_ms(), wall = clock_now_ns() / 1000000;
    st->nreplicas = r->npeers;
    for (int i = 0; i < r->npeers; i++) {
        const peer_t *pe = &r->peers[i];
        cmd_repl_replica_t *o = &st->replicas[i];
        memcpy(o->id, pe->id, sizeof(o->id));
        memcpy(o->addr, pe->addr, sizeof(o->addr));
        o->connected = peer_alive(pe, now);
        st->replicas_connected += o->connected;
        o->offset = pe->acked;
        o->records = pe->records;
        peer_lag(r, pe, wall, &o->lag_records, &o->lag_ms);
        o->last_seen_ms_ago = now - pe->seen_ms;
    }
    st->acks_timed_out = r->acks_timed_out;
    st->refused_too_few_replicas = r->refused_no_replicas;
    st->keys_taken_back = r->undone_keys;
    st->has_link = r->follower != NULL;
    if (r->follower)
        replica_status(r->follower, &st->link);
    pthread_mutex_unlock(&r->mu);
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
