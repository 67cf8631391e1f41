/*
 * redis_int.h - what the Redis front-end's files share (private):
 *
 *     conn.c          a connection: parse, look up, NOAUTH, dispatch; the
 *                     connection commands (PING, HELLO, AUTH, CLIENT...);
 *                     running an operation (admission, cmd_call, errors)
 *     cmds_<group>.c  a group's commands, as Redis groups them (string,
 *                     hll, keys...) or as the module that has them (cell,
 *                     bloom...): handlers and their rows (REDIS_COMMANDS)
 *     table.c         every group's rows, looked up by name
 *     cmds_multi.c    MULTI, EXEC, DISCARD: the queue, and EXEC's run of
 *                     it under its keys' locks (cmd/keys.h, cmd_hold_t)
 *     module.c        what the module groups (RedisBloom's, RedisTimeSeries's)
 *                     share: words, key states and errors, INFO's fields
 *
 * Calls run conn.c -> table.c -> a group's handler -> conn.c's helpers
 * below.  A new group is its own file alone: tools/registry.sh lists the
 * REDIS_COMMANDS(...) it finds for table.c.
 */
#ifndef TALLY_REDIS_INT_H
#define TALLY_REDIS_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "cmd/access.h"
#include "cmd/def.h"
#include "cmd/keys.h"
#include "redis/conn.h"

typedef struct redis_queued redis_queued_t;   /* a command MULTI queued (cmds_multi.c) */

/* EXEC running its queue: the transaction's locks, and the journal and
 * replication positions its answer waits for once they are released. */
typedef struct redis_exec {
    cmd_hold_t hold;
    bool loading;                /* the keyspace is being replaced: nothing held, admission refuses */
    uint64_t lsn, pos;
} redis_exec_t;

/* Every connection of a listener, for CLIENT LIST and INFO (cmds_server.c):
 * the list and each connection's name and library are changed and read
 * under mu; the figures other loops' connections show are atomics their
 * own loop stores (redis_conn_feed). */
struct redis_clients {
    pthread_mutex_t mu;
    struct redis_conn *head;
    size_t n;
    _Atomic uint64_t received;             /* connections accepted */
    uint64_t commands_closed;              /* commands run by connections since closed (mu) */
};

struct redis_conn {
    const redis_cfg_t *cfg;
    uint64_t id;
    char addr[48];               /* the client's address ("" unknown) */
    resp_parser_t *parser;
    resp_out_t out;
    /* who: a token once AUTH succeeded (its set held until the connection
     * ends), or none (authentication off, or not yet) */
    bool authed;
    cmd_tokens_t *tokens;
    const cmd_token_t *token;
    uint64_t auth_gen;           /* cmd_auth_generation when token was found: a reload since is checked */
    char name[128];              /* CLIENT SETNAME ("" none); written under cfg->clients->mu */
    char lib_name[64], lib_ver[64];   /* CLIENT SETINFO; the same */
    char user[CMD_TOKEN_NAME_MAX + 1];   /* the token's name, "default" without one; the same */
    /* for CLIENT LIST (cmds_server.c): fixed once the listener set them */
    int fd;
    char peer[64], local[64];    /* "ip:port" */
    int64_t created_ns;          /* monotonic */
    struct redis_conn *cl_prev, *cl_next;   /* in cfg->clients (its mu) */
    /* stored by the connection's loop, read by any */
    _Atomic int64_t last_ns;     /* the last command (monotonic) */
    _Atomic(const char *) last_cmd;   /* its row's name */
    _Atomic size_t qbuf, omem;   /* unparsed input, unsent output */
    _Atomic int proto;
    _Atomic uint64_t commands;   /* run on it (stored by its loop alone: no shared counter per command) */
    bool close_after;            /* QUIT, RESET's end: send, then close */
    /* item arrays handed to operations (PFADD's items, PFCOUNT's keys),
     * grown to the largest command seen, at most the parser's max_args */
    const char **ptrs;
    size_t *lens;
    size_t scratch_cap;
    size_t cmd_bytes;            /* the command's arguments' bytes (its journal bound) */
    /* Group commit: the changes of one batch of pipelined commands wait
     * for durability once, at the batch's end (redis_conn_feed), before
     * any of its replies is sent; wait_from is where the first change's
     * reply starts in the output (cut back to it when the wait fails). */
    bool wait_pending;
    uint64_t wait_lsn, wait_pos;
    size_t wait_from;
    /* set by a handler before redis_run: a WRONGTYPE on its first key that
     * holds one of these types (which Redis keeps in strings) answers
     * string_err instead, as Redis does (redis_run) */
    const char *string_types, *string_err;
    /* MULTI: commands are queued (in order) until EXEC or DISCARD; `dirty`
     * once one was refused while queued (EXEC then aborts) */
    bool multi, multi_dirty;
    redis_queued_t **queue;
    size_t nqueued, queue_cap, queue_bytes;
    redis_exec_t *exec;          /* while EXEC runs the queue, else NULL */
    /* the cluster (cmds_cluster.c): READONLY given; ASKING given for the
     * next command (asking), and for this one (asking_now: dispatch moves
     * it there before each command) */
    bool readonly, asking, asking_now;
    /* WAIT parked the connection (redis_conn_parked): the replicas it
     * wants, the stream position they must hold, its deadline and when it
     * came (monotonic ns; the access log's duration) */
    bool parked;
    long long park_want;
    uint64_t park_target;
    int64_t park_end, park_t0;
};

/* COMMAND's flags (Redis's names, printed in this order). */
enum {
    REDIS_CF_WRITE = 1u << 0,
    REDIS_CF_READONLY = 1u << 1,
    REDIS_CF_DENYOOM = 1u << 2,
    REDIS_CF_MODULE = 1u << 3,
    REDIS_CF_ADMIN = 1u << 4,
    REDIS_CF_PUBSUB = 1u << 5,
    REDIS_CF_NOSCRIPT = 1u << 6,
    REDIS_CF_BLOCKING = 1u << 7,
    REDIS_CF_LOADING = 1u << 8,
    REDIS_CF_STALE = 1u << 9,
    REDIS_CF_SKIP_MONITOR = 1u << 10,
    REDIS_CF_SKIP_SLOWLOG = 1u << 11,
    REDIS_CF_ASKING = 1u << 12,
    REDIS_CF_FAST = 1u << 13,
    REDIS_CF_NO_AUTH = 1u << 14,       /* served before AUTH */
    REDIS_CF_MAY_REPLICATE = 1u << 15,
    REDIS_CF_NO_MANDATORY_KEYS = 1u << 16,
    REDIS_CF_NO_ASYNC_LOADING = 1u << 17,
    REDIS_CF_NO_MULTI = 1u << 18,
    REDIS_CF_MOVABLEKEYS = 1u << 19,
    REDIS_CF_ALLOW_BUSY = 1u << 20,
};
#define REDIS_CF_COUNT 21
/* The flags' names, by bit ("write", "readonly", ... "allow_busy"). */
extern const char *const redis_cf_names[REDIS_CF_COUNT];

/* A command, as Redis's command table has it: its name, arity (n: exactly
 * n words with the name; -n: at least n), COMMAND's flags and ACL
 * categories, where its keys are (first, last - negative counts from the
 * end - and step; 0 0 0 none), its handler, and its subcommands (a table
 * ended by a row without a name; NULL none: CLIENT|..., COMMAND|...). */
typedef void (*redis_cmd_fn)(redis_conn_t *c, const resp_cmd_t *cmd);
typedef struct redis_cmd {
    const char *name;            /* lowercase, as Redis names it in errors */
    int arity;
    unsigned flags;              /* REDIS_CF_* */
    const char *acl;             /* "@write @string @fast" */
    int first, last, step;
    redis_cmd_fn fn;
    const struct redis_cmd *subs;
} redis_cmd_t;

/* A group's rows (cmds_<group>.c). */
typedef struct redis_group {
    const char *name;
    const redis_cmd_t *cmds;
    size_t n;
} redis_group_t;

/* Defines redis_<name>_commands from the file's `commands` table; the
 * line must start with it (tools/registry.sh finds it there). */
#define REDIS_COMMANDS(name) \
    const redis_group_t redis_##name##_commands = { #name, commands, sizeof(commands) / sizeof(commands[0]) }

/* The table (table.c): the row of argv[0] (any case), or NULL; every row,
 * sorted by name (COMMAND, COMMAND COUNT...); the name of a row's group. */
const redis_cmd_t *redis_cmd_lookup(const char *name, size_t len);
const redis_cmd_t *const *redis_cmd_all(size_t *n);
const char *redis_cmd_group(const redis_cmd_t *rc);

/* CLIENT SETNAME's check and store (HELLO SETNAME too); false answered. */
bool redis_set_name(redis_conn_t *c, const resp_arg_t *a);
/* The registry (cmds_server.c): conn.c adds and removes connections. */
void redis_clients_add(redis_clients_t *r, redis_conn_t *c);
void redis_clients_remove(redis_clients_t *r, redis_conn_t *c);

/* Runs a command whose row, arity and authentication were checked (conn.c):
 * what dispatch and EXEC call. */
void redis_call_row(redis_conn_t *c, const redis_cmd_t *rc, const resp_cmd_t *cmd);

/* A parked WAIT looked at again (cmds_server.c): false while it waits on;
 * else its answer is appended and the connection is no longer parked.
 * `now`: answer the count so far. */
bool redis_wait_resume(redis_conn_t *c, bool now);

/* MULTI's side of dispatch (cmds_multi.c): in a transaction, queues a
 * command that is not one of those run at once (EXEC, DISCARD, MULTI,
 * WATCH, QUIT, RESET) and answers QUEUED: true when it did.  A command
 * refused while queued (unknown, arity, NOAUTH, no-multi) marks the
 * transaction (redis_multi_refused) so that EXEC aborts. */
bool redis_multi_queue(redis_conn_t *c, const redis_cmd_t *rc, const resp_cmd_t *cmd);
void redis_multi_refused(redis_conn_t *c);
/* Ends the transaction, its queue dropped (DISCARD, RESET, the end). */
void redis_multi_discard(redis_conn_t *c);

/* Replies (false: the output passed its cap; the connection is dropped). */
void redis_err(redis_conn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void redis_ok(redis_conn_t *c);

/* Runs an operation on its typed arguments: admission (its access class,
 * its first key), cmd_call, the wait for durability; true with *res
 * filled, false with the error already answered in Redis's form.  With
 * missing_ok, NOT_FOUND is not answered: *missing is set instead. */
bool redis_run(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, bool *missing);
/* The same, leaving the errors whose code is in `handled` (a mask of
 * 1u << CMD_E_*) unanswered: false with *err filled, for a command whose
 * module answers them in words of its own (RedisBloom's "ERR not found",
 * "ERR item exists"...).  err->code is CMD_E__COUNT when the error was
 * answered here. */
bool redis_run_handled(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, unsigned handled,
                       cmd_err_t *err);
/* redis_run_handled with every code handled: a refusal (admission's or the
 * operation's) is not answered but copied to *err, for the caller to
 * answer in its module's words ("CMS: key does not exist") or with
 * redis_answer_err. */
bool redis_run_keep(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, cmd_err_t *err);
/* A cmd_err_t in Redis's forms (-WRONGTYPE, -NOPERM, -MOVED..., else -ERR message). */
void redis_answer_err(redis_conn_t *c, const cmd_err_t *e);

/* string2ll's rules (Redis's integer arguments): an optional '-', digits,
 * no leading zero, no spaces, within int64. */
bool redis_ll(const resp_arg_t *a, long long *v);
/* string2d's rules (Redis's float arguments, RedisModule_StringToDouble):
 * all of it read by strtod, no leading space, not NaN, no overflow. */
bool redis_double(const resp_arg_t *a, double *v);
/* Item arrays for argv[from..argc) (c->ptrs, c->lens); false when out of
 * memory (answered). */
bool redis_items(redis_conn_t *c, const resp_cmd_t *cmd, size_t from);

/* KEY.INFO of a key (cmds_keys.c): 1 with *info, 0 missing, -1 an error
 * answered. */
struct cmd_key_info_res;
int redis_key_info(redis_conn_t *c, const resp_arg_t *k, struct cmd_key_info_res *info);

/* The cluster's checks before admission (cmds_cluster.c): every key of
 * the operation's arguments in one slot, that slot served here (ASKING
 * honoured), a replica serving reads only after READONLY.  False with
 * ctx->err set; true at once without --cluster. */
bool redis_cluster_admit(redis_conn_t *c, cmd_ctx_t *ctx, const cmd_def_t *def, const void *args);
/* The same checks for the keys a command names by its row's key
 * positions (first, last, step), before its handler runs anything: a
 * command running one operation per key (DEL, EXISTS) is refused whole
 * (CROSSSLOT, MOVED) before any of them.  False with the error answered. */
bool redis_cluster_route(redis_conn_t *c, const redis_cmd_t *rc, const resp_cmd_t *cmd);
/* A MOVED or ASK error answered with the node's Redis address. */
void redis_cluster_redirect(redis_conn_t *c, const cmd_err_t *e);

#define REDIS_ERR_NOT_INT "ERR value is not an integer or out of range"
/* REDISMODULE_ERRORMSG_WRONGTYPE, Redis's own, which the modules send. */
#define REDIS_ERR_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"
/* Redis's OOM refusal (a module's allocation failing answers it too). */
#define REDIS_ERR_OOM "OOM command not allowed when used memory > 'maxmemory'."
/* redis_run_handled's masks of the codes a module words itself. */
#define REDIS_H_NOT_FOUND (1u << CMD_E_NOT_FOUND)
#define REDIS_H_WRONGTYPE (1u << CMD_E_WRONGTYPE)
#define REDIS_H_EXISTS (1u << CMD_E_EXISTS)
#define REDIS_H_BAD (1u << CMD_E_BAD_REQUEST)
#define REDIS_H_OOM (1u << CMD_E_OUT_OF_MEMORY)

/* What the module groups share (module.c): RedisBloom's (bloom, cuckoo,
 * cms, topk, tdigest) and RedisTimeSeries's (ts).
 *
 * A module's own arity error: "ERR wrong number of arguments for 'name'
 * command". */
void redis_mod_arity(redis_conn_t *c, const char *name);
/* A word equal to s in any case. */
bool redis_word_is(const resp_arg_t *a, const char *s);
/* RMUtil_ArgIndex: the first index in argv (the command's name included)
 * of a word equal to s in any case, or -1. */
int redis_word_index(const resp_cmd_t *cmd, const char *s);
/* The same from argv[from] on. */
int redis_word_index_from(const resp_cmd_t *cmd, const char *s, size_t from);
/* The key's state as a module's GetKey sees it: 1 a value of KEY.INFO's
 * type `type`, 0 missing, 2 another type, -1 an error answered. */
int redis_mod_key_state(redis_conn_t *c, const resp_arg_t *k, const char *type);
/* A module's words for its keys: KEY.INFO's type name, its GetKey error
 * ("CMS: key does not exist") and its create error ("CMS: key already
 * exists"); create_wrongtype: creating over another type answers
 * WRONGTYPE (T-Digest) rather than the create error (CMS, Top-K). */
typedef struct redis_mod_keys {
    const char *type, *missing, *exists;
    bool create_wrongtype;
} redis_mod_keys_t;
/* An argument's error `msg` after the key's, as RedisBloom orders them
 * (it opens the key first): creating, an existing key's error; else a
 * missing key's or another type's. */
void redis_mod_arg_error(redis_conn_t *c, const redis_mod_keys_t *m, const resp_arg_t *k, bool creating,
                         const char *msg);
/* RedisBloom's statusStrerror for a WRONGTYPE, an existing key ("ERR item
 * exists") or a missing one ("ERR not found"); any other code (CMD_E__COUNT:
 * answered already) answers nothing. */
void redis_mod_status_err(redis_conn_t *c, const cmd_err_t *e);
/* One pair of an INFO map: its name (a status string) and an integer. */
void redis_reply_field(resp_out_t *o, const char *name, long long v);
/* RedisBloom's BF/CF (M)EXISTS: runs def, whose args point at `found`
 * (n booleans) for it to fill, and answers them (1/0 in RESP2, true/false
 * in RESP3; an array when multi); a key of another type answers false for
 * each, as BFCheck and CFCheck do.  Other errors are answered. */
void redis_mod_exists(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, bool *found, size_t n,
                      bool multi);

#endif
