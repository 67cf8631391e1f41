/*
 * repl_int.h - what the files of replication share, and nobody else:
 * repl_t itself, and the functions one of them calls in another.
 * service/repl.h is replication's face; the protocol is described there.
 *
 *     repl.c          lifecycle: open, close, reload; the calls' dispatch;
 *                     /info and /metrics
 *     repl_files.c    the EPOCH file and the credential files
 *     repl_stream.c   the backlog ring and what a primary serves from it
 *                     (snapshots and log polls)
 *     repl_semisync.c --min-replicas-ack: acknowledgements, the answers that
 *                     wait for them, pre-images in doubt and taking back
 *     repl_roles.c    roles: follow, promote, what a peer is told
 *     repl_prober.c   asking the --peers: a read-only view of the group
 *     repl_coord.c    what the coordinator (service/coord.c) asks and
 *                     tells: positions, the lease's deadline, promotion
 *                     under etcd's revision, the replicas acks count from
 *
 * Calls run one way (repl.c -> the others; repl_prober -> repl_roles ->
 * repl_stream -> repl_semisync; repl_roles -> repl_files): no file calls
 * one that calls it.
 */
#ifndef TALLY_REPL_INT_H
#define TALLY_REPL_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cmd/repl.h"
#include "cmd/undo.h"
#include "service/clock.h"
#include "service/peers.h"
#include "service/persist.h"
#include "service/repl.h"
#include "service/replica.h"

#define REPL_MAX_PEERS CMD_REPL_REPLICAS_MAX
#define REPL_PEER_ALIVE_MS 3000      /* a replica that polled this recently is connected */
#define REPL_UNDONE_MAX 64           /* stream ranges taken back that are remembered */

_Static_assert(OPTS_PEERS_MAX <= CMD_REPL_GROUP_MAX && OPTS_PEER_URL_MAX == CMD_REPL_URL_MAX,
               "the group fits cmd_repl_status_t");

enum { ROLE_PRIMARY, ROLE_REPLICA, ROLE_FENCED, ROLE_PROBING };
extern const char *const repl_role_names[];   /* by role */

/* A replica as the primary sees it, from its polls. */
typedef struct peer {
    char id[CMD_REPL_ID_MAX];
    char addr[CMD_REPL_ADDR_MAX];
    uint64_t acked;              /* stream offset it holds everything before */
    uint64_t records;            /* records it has applied in this stream */
    int64_t seen_ms;             /* monotonic: last poll started or ended */
    bool polling;
    bool counted;                /* --coordinator: its acknowledgements count (it is in the published set) */
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
    pthread_cond_t probe_cv;     /* closing */
    peer_answer_t answers[OPTS_PEERS_MAX];   /* the prober thread's */
    char told[OPTS_PEERS_MAX][800];          /* the prober's: why each did not count, as last logged */
    _Atomic bool stopping;       /* repl_close: a question in flight is abandoned */
    uint64_t stale_logged;       /* the newest caller's epoch logged (mu): one line per epoch, not per poll */
    uint64_t peer_epoch;         /* the highest epoch of the last round's authenticated answers (mu) */
    char probe_state[CMD_REPL_STATE_MAX];    /* the last round's outcome, for /info (mu) */

    /* Credentials (mu; the files are re-read by repl_reload). */
    char token[CMD_TOKEN_MAX_LEN + 1];   /* presented to the primary and to the peers */
    uint8_t secret[PEERS_SECRET_MAX];    /* signs this node's answers, checks the peers' */
    size_t secret_len;

    /* --coordinator (service/coord.c): a primary takes changes only until
     * lease_deadline (monotonic ns; renewed with each keepalive), and its
     * acknowledgements count only from the replicas it published in etcd
     * (peer_t.counted). */
    bool coordinated;
    _Atomic int64_t lease_deadline;
    uint64_t led_epoch;          /* the epoch this node was promoted under (LEADER file), 0: none (mu) */
    char coord_state[CMD_REPL_STATE_MAX];    /* the coordinator's last state, for /info (mu) */

    pthread_mutex_t role_mu;     /* one role change at a time (promote, follow, coordinator) */
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

    /* Semi-synchronous changes (cmd/undo.h).  Changes take `gate` shared
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

static inline int64_t mono_ms(void) { return clock_mono_ns() / 1000000; }

/* Waits on cv (mu held) for at most ms milliseconds. */
static inline void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms % 1000 * 1000000;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_cond_timedwait(cv, mu, &ts);
}

/* Refuses a call: *out says why (cmd/err.h), and nothing else. */
#define refuse(out, code, ...) ((out)->ok = false, cmd_err_set(&(out)->err, (code), NULL, __VA_ARGS__))

/* repl_files.c.  Reads EPOCH from dir: 0 when there is none; false with
 * err when it holds anything but an epoch (repl_epoch_parse).  Writes it
 * durably (file_replace); false with err. */
bool repl_epoch_read(const char *dir, uint64_t *epoch, char *err, size_t errlen);
bool repl_epoch_write(const char *dir, uint64_t epoch, char *err, size_t errlen);

/* repl_stream.c.  The server time (ms) of the record at stream offset off,
 * still in the backlog (mu held).  The primary's side of a replica's
 * snapshot and of its polls (cmd/repl.h). */
int64_t repl_record_ms(const repl_t *r, uint64_t off);
void repl_serve_snapshot(repl_t *r, uint64_t epoch, cmd_repl_result_t *out);
void repl_serve_log(repl_t *r, const cmd_repl_call_t *c, cmd_repl_result_t *out);

/* repl_semisync.c.  Whether a replica counts as connected at `now`; the
 * pre-images the replicas made safe, detached (mu held: the caller frees
 * them without it); the waiters answerable now moved to *out (acknowledged,
 * or expired_only: past their deadline; mu held); answering a list of
 * waiters (mu not held). */
bool repl_peer_alive(const peer_t *pe, int64_t now);
cmd_undo_t *repl_safe_advance(repl_t *r, int64_t now);
void repl_waiters_take(repl_t *r, waiter_t **out, bool expired_only, int64_t now);
void repl_waiters_finish(waiter_t *w, bool ok, const char *err);

/* repl_roles.c.  A new stream id in r->run; stopping the follower (mu not
 * held; returns the highest epoch known, its included); the highest epoch
 * known (mu held); becoming a replica of `primary` (role_mu held); the
 * answers to /admin/promote (role_mu held) and to a peer's question. */
void repl_run_new(repl_t *r);
uint64_t repl_follower_stop(repl_t *r);
uint64_t repl_known_epoch(repl_t *r);
bool repl_follow(repl_t *r, const char *primary, uint64_t epoch_hint, char *err, size_t errlen);
void repl_serve_promote(repl_t *r, cmd_repl_result_t *out);
void repl_serve_epoch(repl_t *r, cmd_repl_result_t *out);

/* repl_prober.c.  The thread that asks the --peers (arg: the repl_t). */
void *repl_prober_main(void *arg);

/* The role as the world sees it: a coordinated primary past its lease's
 * deadline is fenced (takes no change, /readyz?role=primary 503). */
int repl_role_now(repl_t *r);
/* Whether a coordinated primary's lease still covers now (true without
 * --coordinator). */
bool repl_lease_ok(repl_t *r);
/* Answers waiters whose changes the replicas acknowledged: 503 instead when
 * the lease no longer covers this node (a newer primary may exist). */
void repl_acked_finish(repl_t *r, waiter_t *w);

/* repl_coord.c.  This node's replication position for the election: the
 * epoch of the stream it holds, its offset there (0: a node holding no
 * stream, e.g. restarted or not synced), its role, and on a replica the
 * follower's id (what the primary knows it by) and the primary it follows. */
typedef struct repl_position {
    uint64_t epoch, offset;
    bool led;                    /* holding no stream, but it was the primary of `epoch` (its journal has it all) */
    int role;
    char replica_id[CMD_REPL_ID_MAX];
    char primary[CMD_REPL_URL_MAX];
} repl_position_t;
void repl_coord_position(repl_t *r, repl_position_t *pos);
/* The LEADER file of the data directory: the epoch this node was last
 * promoted under by the coordinator (0: none or unreadable), and writing it
 * at a promotion (false with err). */
uint64_t repl_coord_led_read(repl_t *r);
bool repl_coord_led_write(repl_t *r, uint64_t epoch, char *err, size_t errlen);
/* Promotion under `epoch` (etcd's revision of the leader key; above every
 * epoch this node knows), even on a node that was a primary (role_mu held). */
bool repl_coord_promote(repl_t *r, uint64_t epoch, char *err, size_t errlen);
/* The coordinator's state, for /info. */
void repl_coord_state(repl_t *r, const char *text);
/* Sets the lease's deadline (monotonic ns; 0: none, i.e. fenced). */
void repl_coord_deadline(repl_t *r, int64_t deadline_ns);
/* A primary that lost its lease: fenced until told whom to follow (role_mu held). */
void repl_coord_fence(repl_t *r);

#endif
