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
#include "redis/conn.h"

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
    /* set by a handler before redis_run: a WRONGTYPE on its first key that
     * holds one of these types (which Redis keeps in strings) answers
     * string_err instead, as Redis does (redis_run) */
    const char *string_types, *string_err;
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

/* Replies (false: the output passed its cap; the connection is dropped). */
void redis_err(redis_conn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void redis_ok(redis_conn_t *c);

/* Runs an operation on its typed arguments: admission (its access class,
 * its first key), cmd_call, the wait for durability; true with *res
 * filled, false with the error already answered in Redis's form.  With
 * missing_ok, NOT_FOUND is not answered: *missing is set instead. */
bool redis_run(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, bool *missing);

/* string2ll's rules (Redis's integer arguments): an optional '-', digits,
 * no leading zero, no spaces, within int64. */
bool redis_ll(const resp_arg_t *a, long long *v);
/* Item arrays for argv[from..argc) (c->ptrs, c->lens); false when out of
 * memory (answered). */
bool redis_items(redis_conn_t *c, const resp_cmd_t *cmd, size_t from);

/* KEY.INFO of a key (cmds_keys.c): 1 with *info, 0 missing, -1 an error
 * answered. */
struct cmd_key_info_res;
int redis_key_info(redis_conn_t *c, const resp_arg_t *k, struct cmd_key_info_res *info);

#define REDIS_ERR_NOT_INT "ERR value is not an integer or out of range"

#endif
