/*
 * cmd.h - the command layer: what every protocol shares between its bytes
 * and core/, the role Redis's command table and call() play.
 *
 *     front-end (HTTP today)          parse bytes -> typed arguments
 *        |  cmd_ctx_t: who asks, when, and what the change holds
 *     command layer (cmd/)            checks in one order, keys, journal,
 *        |                            replication, memory, the operation
 *     core/                           the structures
 *
 * A request runs in a context (cmd_ctx_t): the caller's token, the time it
 * is served at, whether it is a replayed journal record, the error that
 * refused it, the journal space it holds and the records it wrote, and the
 * pre-images semi-synchronous replication keeps.  Everything below the
 * front-end takes the context and fills its error; a front-end turns the
 * error into its protocol's answer (cmd/err.h).
 *
 * The order of the checks, each made once and here, never in a front-end
 * (a front-end identifies the caller, then calls cmd_admit, then parses
 * the arguments and calls cmd_call):
 *
 *     access class (scope) and key prefixes   cmd_admit (cmd/admit.h, cmd/access.h)
 *     cluster slot ownership                  cmd_admit (cmd/cluster.h)
 *     writable (replica, fenced, full disk)   cmd_admit (cmd_writable)
 *     journal reservation                     cmd_admit, cmd_call (cmd/journal.h)
 *     memory budget                           the operation, before it grows (cmd/room.h)
 *     lock -> run -> journal -> replicate / semi-sync undo
 *                                             cmd_call (cmd/def.h), cmd/keys.h, cmd/journal.h, cmd/undo.h
 *
 * Every key an operation opens passes the prefix and slot checks again
 * under its lock (cmd/keys.h): keys named in a body are checked there.
 *
 * No jansson, libmicrohttpd, libcurl or socket here: the build links
 * cmd/ alone with core (cmd-pure) to prove it.
 */
#ifndef TALLY_CMD_H
#define TALLY_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/err.h"
#include "core/codec.h"
#include "core/keyspace.h"
#include "core/persist_fmt.h"
#include "core/types.h"

typedef struct cmd_server cmd_server_t;
typedef struct cmd_ctx cmd_ctx_t;
typedef struct cmd_undo cmd_undo_t;           /* cmd/undo.h */
typedef struct cmd_token cmd_token_t;         /* cmd/access.h */
typedef struct cmd_tokens cmd_tokens_t;       /* cmd/access.h */
typedef struct cmd_cluster cmd_cluster_t;     /* cmd/cluster.h */
typedef struct cmd_auth cmd_auth_t;           /* cmd/access.h */
typedef struct cmd_def cmd_def_t;             /* cmd/def.h */

/* What the command layer needs from the service, as callbacks, so that it
 * never depends on service/. */
typedef struct cmd_hooks {
    void *ud;
    /* Appends a journal record; returns its LSN (0 when journaling is off).
     * Called with the shards of the keys involved locked. */
    uint64_t (*journal)(void *ud, const journal_req_t *req);
    /* Secures journal space for a change of about `bytes` before it is
     * applied (false with *err when the disk cannot take it); the promise
     * is given back with journal_release. */
    bool (*journal_reserve)(void *ud, uint64_t bytes, const char **err);
    void (*journal_release)(void *ud, uint64_t bytes);
    /* True once snapshot and journal are loaded and the server accepts work. */
    bool (*ready)(void *ud);
    /* NULL while changes can be made durable; else why not (a static
     * string: a full disk).  NULL hook: always writable. */
    const char *(*unwritable)(void *ud);
    /* Replication (NULL: a node without it, always the primary).  True when
     * this node takes changes; else false with the primary's base URL in
     * `primary` ("" when unknown, or while fenced). */
    bool (*writable)(void *ud, char *primary, size_t n);
    /* "primary", "replica", "fenced" or "probing". */
    const char *(*role)(void *ud);
    /* Taking changes back (cmd/undo.h); NULL when the service never does.
     * undo_begin is asked before a change is admitted: true when its
     * pre-images are to be kept (then undo_end is called once the change is
     * done: between the two, no change is being taken back).  undo_register
     * takes the pre-images of the record just journaled (the list, possibly
     * NULL, is its from then on; called under the keys' locks) and returns
     * the stream position the answer waits for. */
    bool (*undo_begin)(void *ud);
    void (*undo_end)(void *ud);
    uint64_t (*undo_register)(void *ud, cmd_undo_t *list);
} cmd_hooks_t;

/* Limits per request, from --max-value-size and --max-answer-size; 0 =
 * none.  Replay applies what the primary accepted: no limit refuses a
 * replayed request. */
typedef struct cmd_limits {
    uint64_t max_value;          /* bytes one key's value may reach */
    uint64_t max_answer;         /* bytes one answer may take */
} cmd_limits_t;

/* The server every request runs against.  The members after `cluster`
 * belong to the front-ends (opaque here). */
struct cmd_server {
    ks_t *ks;
    cmd_limits_t limits;         /* zero: none (unit tests) */
    cmd_hooks_t hooks;
    cmd_cluster_t *cluster;      /* --cluster; NULL = not in a cluster (cmd/cluster.h) */
    cmd_auth_t *auth;            /* --tokens; NULL = no authentication (cmd/access.h) */
    /* the HTTP adapter's (api/) */
    const struct api_admin_hooks *admin;   /* /info, /metrics, the /admin and /replication routes */
    struct api_policies *policies;         /* --config policies; NULL = none configured */
    const struct api_guard *guard;         /* browser checks; NULL = none */
};

/* One request's execution state. */
struct cmd_ctx {
    cmd_server_t *srv;
    const cmd_token_t *token;    /* the caller's token; NULL: authentication off, or replay */
    /* What the request is called in its protocol, for messages ("needed by
     * DELETE /throttle/{key}"): a verb (may be "") and a name. */
    const char *what_verb, *what_name;
    int64_t now_ns;              /* the time this request is served at */
    bool replay;                 /* re-executed from the journal (or a primary's stream) */
    unsigned gen;                /* algorithm generation of a replayed record (core/types.h);
                                    0 = the current one (see cmd_gen) */
    cmd_err_t err;               /* why it was refused (a function returned false) */
    /* What the front-end says of the request for the cluster's checks
     * (cmd/cluster.h): the routing key a proxy read when the keys are not
     * where it looks (HTTP: X-Tally-Key), and whether the client was sent
     * here by an ASK (Redis's ASKING, HTTP: X-Tally-Asking: 1). */
    const char *routing_key;
    bool asking;
    /* Journal space this request holds (cmd_journal_reserve and _more) and
     * the bytes of its records so far: a record never exceeds what is held,
     * so the disk cannot refuse a change already applied. */
    uint64_t journal_held, journal_used;
    uint64_t journal_lsn;        /* wait for this journal position before answering */
    /* The operation running (cmd_call, cmd_replay) and its arguments, or
     * NULL: debug builds hold every key it opens to those its table row
     * says it names (cmd/def.h, keys). */
    const cmd_def_t *def;
    const void *args;
    /* The record of the request's own change: its operation's id and
     * encoded arguments (cmd_call), or NULL. */
    const uint8_t *rec;
    size_t rec_len;
    uint16_t rec_op;
    /* Semi-synchronous replication (cmd/undo.h): `undo_on` when this change
     * keeps pre-images; those of the keys locked now, not yet journaled;
     * the stream position its answer waits for (0: none). */
    bool undo_on;
    cmd_undo_t *undo;
    uint64_t repl_pos;
    void *front;                 /* the front-end's own state of the request (opaque here) */
    /* A transaction's locks (cmd/keys.h, cmd_hold_t), held for the whole
     * of it by this thread: the keys under them are opened without locking
     * again, and nothing else is locked; NULL outside a transaction. */
    const struct cmd_hold *hold;
};

/* A fresh context (no token, no error, nothing held). */
void cmd_ctx_init(cmd_ctx_t *ctx, cmd_server_t *srv, int64_t now_ns, bool replay, unsigned gen);
/* Gives back what the request still holds (journal space, pre-images);
 * what it journaled stays in journal_lsn / repl_pos for the answer. */
void cmd_ctx_end(cmd_ctx_t *ctx);

static inline int64_t cmd_now_ms(const cmd_ctx_t *ctx) { return ctx->now_ns / 1000000; }
/* The algorithm generation whose rules serve this request: the current one
 * live, the recording journal's on replay (core/types.h). */
static inline unsigned cmd_gen(const cmd_ctx_t *ctx) { return ctx->gen ? ctx->gen : TALLY_GEN_CURRENT; }

/* Sets ctx->err and returns false: `return cmd_fail(ctx, CMD_E_..., ...)`. */
bool cmd_fail(cmd_ctx_t *ctx, cmd_code_t code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Whether this node takes changes: false with ctx->err set to READONLY
 * naming the primary (in err.where), or UNAVAILABLE (no primary known, a
 * fenced node). */
bool cmd_writable(cmd_ctx_t *ctx);

#endif
