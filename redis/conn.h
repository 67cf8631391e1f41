/*
 * conn.h - the Redis protocol's front-end: one client connection's state,
 * and its commands from argv to reply, the way api/ serves HTTP:
 *
 *     bytes (service/resp_server.c reads the socket)
 *       -> resp_parse (resp/parse.h)                 argv, Redis's protocol errors
 *       -> the command's row (redis/table.c)         unknown command, arity: Redis's texts
 *       -> NOAUTH until AUTH/HELLO AUTH identified the caller (--tokens)
 *       -> typed arguments (redis/cmds_*.c)          the same the HTTP adapter builds
 *       -> cmd_admit (access class, first key, slot, writable, journal space)
 *       -> cmd_call
 *       -> the reply (resp/reply.h), or cmd_err_t in Redis's error forms
 *
 * Never through HTTP: the operations are the command layer's (cmd/def.h).
 * The listener (service/) brings the sockets, the clock and the wait for
 * a change to be durable, as hooks; this file does no I/O.
 *
 * Replies are appended, in order, to the connection's output buffer
 * (resp_out_t), which has a hard cap: a client that does not read its
 * replies passes it and is dropped (Redis's client-output-buffer-limit).
 */
#ifndef TALLY_REDIS_CONN_H
#define TALLY_REDIS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "resp/parse.h"
#include "resp/reply.h"

struct redis_log_line;
struct redis_process;

/* What the listener provides. */
typedef struct redis_hooks {
    void *ud;
    /* The time a command is served at (wall clock, ns). */
    int64_t (*now_ns)(void);
    /* Enters the serving gate before a command touches the keyspace: false
     * when tallyd is not ready (loading its data, stopping; nothing is
     * entered); else true, with *loading set while a replica replaces its
     * keyspace (then nothing is entered either: the command is refused by
     * admission without touching it), or entered: leave() follows. */
    bool (*enter)(void *ud, bool *loading);
    void (*leave)(void *ud);
    /* Waits until the journal position lsn (and the replication position
     * pos with --min-replicas-ack) is as durable as the policy says: false
     * with *err when it cannot be.  NULL: nothing to wait for. */
    bool (*durable)(void *ud, uint64_t lsn, uint64_t pos, const char **err);
    /* The access log (--access-log), NULL: none.  log_on says whether it
     * is open now; log gets each command once answered. */
    bool (*log_on)(void *ud);
    void (*log)(void *ud, const struct redis_log_line *line);
    /* A monotonic clock (ns): durations, ages, idle times. */
    int64_t (*mono_ns)(void);
    /* The process's figures for INFO (server, memory, cpu sections). */
    void (*process)(void *ud, struct redis_process *out);
} redis_hooks_t;

/* What INFO reports of the process (the listener reads the system). */
typedef struct redis_process {
    long pid;
    char os[200];                /* "Linux 6.1.0 x86_64" */
    int64_t uptime_s;
    int64_t time_us;             /* wall clock */
    long long rss_bytes;
    double cpu_sys, cpu_user, cpu_sys_children, cpu_user_children;   /* seconds */
} redis_process_t;

/* One command for the access log: strings are not NUL-terminated. */
typedef struct redis_log_line {
    const char *client;          /* the client's address ("" unknown) */
    const char *token;           /* the caller's token name, or NULL */
    const char *command;         /* lowercase: "cl.throttle", "client|list"; as sent when unknown */
    size_t command_len;
    const char *key;             /* its first key, or NULL */
    size_t key_len;
    const char *outcome;         /* "ok", or the error's code: "ERR", "WRONGTYPE", "NOAUTH"... */
    size_t outcome_len;
    int64_t duration_ns;
} redis_log_line_t;

typedef struct redis_clients redis_clients_t;

typedef struct redis_cfg {
    cmd_server_t *srv;
    redis_clients_t *clients;    /* every connection (redis_clients_new); NULL: not listed */
    int port;                    /* the listener's, for INFO */
    unsigned max_clients;        /* --max-connections, for INFO */
    redis_hooks_t hooks;
    resp_limits_t limits;        /* the parser's; max_bulk = --max-body */
    size_t out_limit;            /* a connection's unsent replies, at most */
    const char *version;         /* HELLO's "version" */
} redis_cfg_t;

typedef struct redis_conn redis_conn_t;

typedef enum redis_status {
    REDIS_OK = 0,                /* more commands may come */
    REDIS_CLOSE,                 /* send what is in the output, then close (QUIT, a protocol error) */
    REDIS_DROP,                  /* close now (the output passed its cap, out of memory) */
} redis_status_t;

/* A connection with Redis's client id `id` from the client address `addr`
 * (what --auth-fail-limit counts unknown tokens by; may be NULL); NULL when
 * out of memory.  cfg must outlive it. */
redis_conn_t *redis_conn_new(const redis_cfg_t *cfg, uint64_t id, const char *addr);
void redis_conn_free(redis_conn_t *c);
/* The socket, for CLIENT LIST: its descriptor, the peer's and our own
 * "ip:port"; call before the first redis_conn_feed. */
void redis_conn_set_socket(redis_conn_t *c, int fd, const char *peer, const char *local);

/* The registry of a listener's connections (CLIENT LIST, INFO's clients). */
redis_clients_t *redis_clients_new(void);
void redis_clients_free(redis_clients_t *r);

/* Runs every complete command at the start of buf[0..len), their replies
 * appended to the output in order; *used: the bytes done with (drop them
 * and call again with the rest and what arrives next).  After REDIS_CLOSE
 * or REDIS_DROP nothing more is read.
 *
 * Group commit: the changes' replies wait for durability, once for all
 * that came since the last settle.  Before sending anything of the output
 * the listener calls redis_conn_settle (with the status feed gave; it may
 * turn OK into CLOSE when the wait failed: the replies from the first
 * change on are then cut and one error says why).  A loop that fed several
 * connections may first wait once for the highest position any of them
 * holds (redis_conn_waiting, then the durability hook itself): each
 * settle after it finds its own position durable at once. */
redis_status_t redis_conn_feed(redis_conn_t *c, const char *buf, size_t len, size_t *used);
bool redis_conn_waiting(const redis_conn_t *c, uint64_t *lsn, uint64_t *pos);
redis_status_t redis_conn_settle(redis_conn_t *c, redis_status_t st);

/* WAIT blocks its client alone, as in Redis: when the replicas it asks for
 * do not hold the stream's position yet, feed stops after it (its *used
 * ends with WAIT: what follows stays the listener's, unread) and the
 * connection is parked.  The replies before WAIT settle and go out as
 * usual; the listener reads nothing more from it and serves its other
 * connections, calling redis_conn_resume now and then (every few ms):
 * true once WAIT was answered - enough replicas hold the position, or its
 * timeout passed, or `now` (the listener stops: the count so far) - and
 * feed goes on with the input left.  Inside EXEC, WAIT answers at once.
 * A parked connection whose client left is freed as any other
 * (redis_conn_free), as Redis frees a blocked client that hangs up. */
bool redis_conn_parked(const redis_conn_t *c);
bool redis_conn_resume(redis_conn_t *c, bool now);

/* The replies not yet sent (the listener writes buf[0..len) and calls
 * resp_out_consume). */
resp_out_t *redis_conn_out(redis_conn_t *c);

/* Bytes the connection holds besides its input buffer (parser, output). */
size_t redis_conn_mem(const redis_conn_t *c);

#endif
