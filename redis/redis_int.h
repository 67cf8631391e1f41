/*
 * redis_int.h - what the Redis front-end's files share (private):
 *
 *     conn.c          a connection: parse, look up, NOAUTH, dispatch; the
 *                     connection commands (PING, HELLO, AUTH, CLIENT...);
 *                     running an operation (admission, cmd_call, errors)
 *     cmds_data.c     the data commands: CL.THROTTLE, counters,
 *                     HyperLogLog, keys, GET
 *     table.c         the table of commands, by name
 *
 * Calls run table.c -> conn.c / cmds_data.c -> conn.c's helpers below.
 */
#ifndef TALLY_REDIS_INT_H
#define TALLY_REDIS_INT_H

#include "cmd/access.h"
#include "cmd/def.h"
#include "redis/conn.h"

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
    char name[128];              /* CLIENT SETNAME ("" none) */
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

/* A command: Redis's arity (n: exactly n words with the name; -n: at
 * least n), and its handler. */
typedef void (*redis_cmd_fn)(redis_conn_t *c, const resp_cmd_t *cmd);
typedef struct redis_cmd {
    const char *name;            /* lowercase, as Redis names it in errors */
    int arity;
    bool no_auth;                /* served before AUTH (AUTH, HELLO, QUIT, RESET) */
    redis_cmd_fn fn;
} redis_cmd_t;

/* The table (table.c): the row of argv[0] (any case), or NULL. */
const redis_cmd_t *redis_cmd_lookup(const char *name, size_t len);

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

/* The handlers of cmds_data.c (table.c lists them). */
void redis_cl_throttle(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_incr(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_incrby(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_decr(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_decrby(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_pfadd(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_pfcount(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_pfmerge(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_del(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_exists(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_ttl(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_pttl(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_expire(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_pexpire(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_persist(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_expireat(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_pexpireat(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_type(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_get(redis_conn_t *c, const resp_cmd_t *cmd);

/* The connection commands (conn.c). */
void redis_ping(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_echo(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_hello(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_auth(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_select(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_quit(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_reset(redis_conn_t *c, const resp_cmd_t *cmd);
void redis_client(redis_conn_t *c, const resp_cmd_t *cmd);

#endif
