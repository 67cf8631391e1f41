/* cmds_multi.c - Redis's transactions (redis_int.h):
 *
 *   MULTI, EXEC, DISCARD  the queue, and EXEC's run of it
 *   WATCH, UNWATCH        refused: tally's EXEC runs its commands
 *                         atomically under their keys' locks instead
 *
 * After MULTI every command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET
 * is queued (a copy of its arguments) and answered +QUEUED.  One refused
 * while queued - unknown, wrong arity, NOAUTH, not allowed in a transaction
 * - marks the transaction, and EXEC then answers EXECABORT and drops it, as
 * Redis does.
 *
 * EXEC takes the locks of every key the queued commands name, from each
 * command's key positions in its row (first, last, step), in the command
 * layer's order (cmd/keys.h, cmd_hold_t: ascending shards, so it never
 * deadlocks with another EXEC or a multi-key operation), and runs the
 * commands one after the other with those locks held: no other client's
 * command on those keys runs between two of them, and each is admitted and
 * journaled as it runs (a command's error is its reply in the array, and the
 * others still run, as Redis's EXEC does).  A command whose keys its row
 * does not say - one with movable keys, a module's (a time series' rules
 * reach other keys), or one that reads or writes without naming keys (SCAN,
 * KEYS, RANDOMKEY, DBSIZE) - makes EXEC take every shard.  Once the locks
 * are released, EXEC waits for its changes to be durable (--fsync, the
 * replicas of --min-replicas-ack) before its array is answered; if they
 * cannot be, the array is replaced by that error.
 */
#include <stdlib.h>
#include <string.h>

#include "redis/redis_int.h"

/* The queued commands' arguments, at most: a client cannot make tally hold
 * an unbounded transaction (Redis bounds it by its query buffer). */
#define MULTI_MAX_BYTES (64u << 20)

struct redis_queued {
    const redis_cmd_t *rc;
    resp_cmd_t cmd;              /* argv points into the block that follows */
    size_t bytes;                /* what the block takes */
};

void redis_multi_refused(redis_conn_t *c)
{
    if (c->multi)
        c->multi_dirty = true;
}

void redis_multi_discard(redis_conn_t *c)
{
    for (size_t i = 0; i < c->nqueued; i++)
        free(c->queue[i]);
    free(c->queue);
    c->queue = NULL;
    c->nqueued = c->queue_cap = c->queue_bytes = 0;
    c->multi = c->multi_dirty = false;
}

static bool runs_at_once(const redis_cmd_t *rc)
{
    static const char *const now[] = { "exec", "discard", "multi", "watch", "quit", "reset" };
    for (size_t i = 0; i < sizeof(now) / sizeof(now[0]); i++)
        if (strcmp(rc->name, now[i]) == 0)
            return true;
    return false;
}

/* A copy of the command in one block: the entry, argv, the bytes. */
static redis_queued_t *queued_copy(const redis_cmd_t *rc, const resp_cmd_t *cmd)
{
    size_t data = 0;
    for (size_t i = 0; i < cmd->argc; i++)
        data += cmd->argv[i].len + 1;
    size_t bytes = sizeof(redis_queued_t) + cmd->argc * sizeof(resp_arg_t) + data;
    redis_queued_t *q = malloc(bytes);
    if (!q)
        return NULL;
    resp_arg_t *argv = (resp_arg_t *)(q + 1);
    char *p = (char *)(argv + cmd->argc);
    for (size_t i = 0; i < cmd->argc; i++) {
        if (cmd->argv[i].len)
            memcpy(p, cmd->argv[i].ptr, cmd->argv[i].len);
        p[cmd->argv[i].len] = '\0';
        argv[i] = (resp_arg_t){ p, cmd->argv[i].len };
        p += cmd->argv[i].len + 1;
    }
    q->rc = rc;
    q->cmd = (resp_cmd_t){ cmd->argc, argv };
    q->bytes = bytes;
    return q;
}

bool redis_multi_queue(redis_conn_t *c, const redis_cmd_t *rc, const resp_cmd_t *cmd)
{
    if (!c->multi || runs_at_once(rc))
        return false;
    if (rc->flags & REDIS_CF_NO_MULTI) {
        redis_err(c, "ERR Command not allowed inside a transaction");
        c->multi_dirty = true;
        return true;
    }
    if (c->nqueued == c->queue_cap) {
        size_t cap = c->queue_cap ? 2 * c->queue_cap : 16;
        redis_queued_t **v = realloc(c->queue, cap * sizeof(*v));
        if (!v) {
            redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
            c->multi_dirty = true;
            return true;
        }
        c->queue = v;
        c->queue_cap = cap;
    }
    redis_queued_t *q = c->queue_bytes < MULTI_MAX_BYTES ? queued_copy(rc, cmd) : NULL;
    if (!q || c->queue_bytes + q->bytes > MULTI_MAX_BYTES) {
        if (q)
            redis_err(c, "ERR tally queues at most %u MB of commands in one transaction", MULTI_MAX_BYTES >> 20);
        else
            redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        free(q);
        c->multi_dirty = true;
        return true;
    }
    c->queue[c->nqueued++] = q;
    c->queue_bytes += q->bytes;
    resp_reply_simple(redis_conn_out(c), "QUEUED", 6);
    return true;
}

static void multi_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    if (c->multi) {
        redis_err(c, "ERR MULTI calls can not be nested");
        return;
    }
    c->multi = true;
    c->multi_dirty = false;
    redis_ok(c);
}

static void discard_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    if (!c->multi) {
        redis_err(c, "ERR DISCARD without MULTI");
        return;
    }
    redis_multi_discard(c);
    redis_ok(c);
}

/* Whether a queued command's keys are not all at its row's key positions:
 * EXEC then takes every shard. */
static bool names_keys_elsewhere(const redis_cmd_t *rc)
{
    if (rc->flags & (REDIS_CF_MOVABLEKEYS | REDIS_CF_MODULE))
        return true;
    return rc->first == 0 && (rc->flags & (REDIS_CF_READONLY | REDIS_CF_WRITE));
}

/* The keys at the queued commands' key positions (*all: take every shard
 * instead).  NULL with n 0 when there are none; false out of memory. */
static bool queue_keys(redis_conn_t *c, ks_key_t **out, size_t *n, bool *all)
{
    ks_t *ks = c->cfg->srv->ks;
    size_t cap = 0, k = 0;
    ks_key_t *v = NULL;
    *all = false;
    for (size_t i = 0; i < c->nqueued && !*all; i++) {
        const redis_cmd_t *rc = c->queue[i]->rc;
        const resp_cmd_t *cmd = &c->queue[i]->cmd;
        if (names_keys_elsewhere(rc)) {
            *all = true;
            break;
        }
        if (rc->first <= 0 || rc->step <= 0)
            continue;
        long last = rc->last < 0 ? (long)cmd->argc + rc->last : rc->last;
        for (long j = rc->first; j <= last && j < (long)cmd->argc; j += rc->step) {
            if (k == cap) {
                size_t nc = cap ? 2 * cap : 16;
                ks_key_t *nv = realloc(v, nc * sizeof(*nv));
                if (!nv) {
                    free(v);
                    return false;
                }
                v = nv;
                cap = nc;
            }
            v[k++] = ks_key(ks, cmd->argv[j].ptr, cmd->argv[j].len);
        }
    }
    *out = v;
    *n = k;
    return true;
}

static void exec_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    if (!c->multi) {
        redis_err(c, "ERR EXEC without MULTI");
        return;
    }
    if (c->multi_dirty) {
        redis_multi_discard(c);
        redis_err(c, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    const redis_hooks_t *hk = &c->cfg->hooks;
    ks_key_t *keys = NULL;
    size_t nkeys = 0;
    bool all;
    if (!queue_keys(c, &keys, &nkeys, &all)) {
        redis_multi_discard(c);
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    redis_exec_t ex = { .lsn = 0, .pos = 0 };
    if (hk->enter && !hk->enter(hk->ud, &ex.loading)) {
        free(keys);
        redis_multi_discard(c);
        redis_err(c, "LOADING Redis is loading the dataset in memory");
        return;
    }
    if (!ex.loading && !cmd_hold_begin(&ex.hold, c->cfg->srv, keys, nkeys, all)) {
        free(keys);
        if (hk->leave)
            hk->leave(hk->ud);
        redis_multi_discard(c);
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    free(keys);
    /* the queue is the connection's until the end: a queued RESET or QUIT
     * cannot be (they run at once), nor a MULTI */
    redis_queued_t **queue = c->queue;
    size_t n = c->nqueued;
    c->queue = NULL;
    c->nqueued = c->queue_cap = 0;
    c->multi = false;
    resp_out_t *out = redis_conn_out(c);
    size_t mark = out->len;
    resp_reply_array(out, n);
    c->exec = &ex;
    for (size_t i = 0; i < n; i++)
        redis_call_row(c, queue[i]->rc, &queue[i]->cmd);
    c->exec = NULL;
    if (!ex.loading) {
        cmd_hold_end(&ex.hold);
        if (hk->leave)
            hk->leave(hk->ud);
    }
    for (size_t i = 0; i < n; i++)
        free(queue[i]);
    free(queue);
    c->queue_bytes = 0;
    const char *why = NULL;
    if ((ex.lsn || ex.pos) && hk->durable && !hk->durable(hk->ud, ex.lsn, ex.pos, &why) && !out->failed) {
        out->len = mark;   /* the array promised what a crash could lose: the error instead */
        redis_err(c, "ERR the transaction's changes could not be made durable: %s",
                  why ? why : "journal unavailable");
    }
}

static void watch_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    if (c->multi) {
        redis_err(c, "ERR WATCH inside MULTI is not allowed");
        return;
    }
    redis_err(c, "ERR WATCH is not supported by tally: MULTI/EXEC runs its commands atomically under their "
                 "keys' locks");
}

static void unwatch_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    redis_err(c, "ERR UNWATCH is not supported by tally: MULTI/EXEC runs its commands atomically under their "
                 "keys' locks");
}

#define TX REDIS_CF_NOSCRIPT | REDIS_CF_LOADING | REDIS_CF_STALE
static const redis_cmd_t commands[] = {
    { "discard", 1, TX | REDIS_CF_FAST | REDIS_CF_ALLOW_BUSY, "@fast @transaction", 0, 0, 0, discard_command, NULL },
    { "exec", 1, TX | REDIS_CF_SKIP_SLOWLOG, "@slow @transaction", 0, 0, 0, exec_command, NULL },
    { "multi", 1, TX | REDIS_CF_FAST | REDIS_CF_ALLOW_BUSY, "@fast @transaction", 0, 0, 0, multi_command, NULL },
    { "unwatch", 1, TX | REDIS_CF_FAST | REDIS_CF_ALLOW_BUSY, "@fast @transaction", 0, 0, 0, unwatch_command, NULL },
    { "watch", -2, TX | REDIS_CF_FAST | REDIS_CF_ALLOW_BUSY, "@fast @transaction", 1, -1, 1, watch_command, NULL },
};
REDIS_COMMANDS(multi);
