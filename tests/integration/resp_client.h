/*
 * resp_client.h - raw RESP over sockets, for the Redis port's tests: build
 * multibulk commands (mb), send them and read everything answered until
 * the server closes (exchange), compare a server's bytes with
 * redis-server's (resp_diff), and run a python3-redis script.  Real
 * clients (redis-cli, python3-redis) do the rest; this is for byte-exact
 * comparisons and malformed input, and for what every it_resp*.c file
 * shares: its server (RESP_SUITE), its redis-cli and python3-redis
 * runners, and a restart from the journal alone.
 */
#ifndef TALLY_RESP_CLIENT_H
#define TALLY_RESP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"
#include "redis_ref.h"

typedef struct buf {
    char *p;
    size_t len, cap;
} buf_t;

void buf_put(buf_t *b, const void *s, size_t n);
void buf_puts(buf_t *b, const char *s);
/* Appends one multibulk command: words up to NULL (at most 64). */
void mb(buf_t *b, const char *w0, ...);
/* The same from an array of words ended by NULL. */
void mb_words(buf_t *b, const char *const *w);
/* A connection to 127.0.0.1:port (20 s receive timeout). */
int connect_to(int port);
/* Reads until the peer closes: true when it did (false: a timeout). */
bool read_to_eof(int fd, buf_t *out);
/* Sends bytes, closes its side, and returns everything answered. */
buf_t exchange(int port, const char *bytes, size_t len);
/* Reads exactly the bytes `want` from fd (fails the test on anything else). */
void expect_bytes(int fd, const char *want);
void send_all(int fd, const char *s, size_t n);
/* The same commands to redis-server (ref_port) and to tally (port), each on
 * a connection of its own: fails the test where the bytes differ. */
void resp_diff(int ref_port, int port, const buf_t *cmds);
/* exchange for the commands alone, after HELLO 3 when proto is 3: what
 * they answered, HELLO's own map (up to its "modules" entry) left out;
 * free its p. */
buf_t exchange_proto(int port, int proto, const buf_t *cmds);
/* resp_diff after HELLO 3 on each side (HELLO's map, which names the
 * server, left out); returns tally's answer, for further checks (free
 * its p). */
buf_t resp3_diff(int ref_port, int port, const buf_t *cmds);
/* /usr/bin/python3 with the redis package (tools/deps.sh test installs it). */
bool have_python_redis(void);
/* Runs a python3 script with the port as argv[1]; its output in out. */
bool run_python(const char *script, int port, char *out, size_t cap);
/* Runs it and fails the test unless it exits 0 printing "ok\n" alone. */
void python_expect_ok(const char *script, int port);

/* redis-cli's output for a command line: `redis-cli <opts> -p port <args>`
 * (opts "" for none, "--no-raw" to print as on a terminal), stderr too. */
typedef struct cli_case {
    const char *args, *want;
} cli_case_t;
/* Runs each case's command line, failing the test where the output is
 * not its `want`. */
void cli_expect(int port, const char *opts, const cli_case_t *cases, size_t n);

/* Sends the commands on one connection and fails the test unless the
 * bytes answered are `want`. */
void expect_reply(int port, const buf_t *cmds, const char *want);

/* A restart from the journal alone: kills p (kill -9, no final snapshot)
 * and starts q on p's data directory with args; then, after the test's
 * reads, resp_restart_end stops q (a clean exit asserted) and removes
 * both servers' files. */
void resp_restart(tally_proc_t *p, tally_proc_t *q, const char *const *args);
void resp_restart_end(tally_proc_t *p, tally_proc_t *q);

/* The group's server for a file of Redis-port tests: tallyd with
 * --resp-port 0 and `extra` (a NULL-ended list), and a redis-server from
 * redis_ref.h when ref is not NULL (*have_ref: one was started).  Stopping
 * asserts a clean exit (SIGTERM with the RESP port open) and removes its
 * files.  RESP_SUITE declares them as `T` (and `R`, `have_redis`) with the
 * cmocka group functions setup and teardown. */
void resp_suite_start(tally_proc_t *t, const char *const *extra, redis_ref_t *ref, bool *have_ref);
void resp_suite_stop(tally_proc_t *t, redis_ref_t *ref, bool have_ref);
/* RESP_SUITE(NULL), RESP_SUITE("--shards", "16", NULL): tally alone. */
#define RESP_SUITE(...)                                                     \
    static tally_proc_t T;                                                  \
    static int setup(void **state)                                          \
    {                                                                       \
        (void)state;                                                        \
        static const char *const extra[] = { __VA_ARGS__ };                 \
        resp_suite_start(&T, extra, NULL, NULL);                            \
        return 0;                                                           \
    }                                                                       \
    static int teardown(void **state)                                       \
    {                                                                       \
        (void)state;                                                        \
        resp_suite_stop(&T, NULL, false);                                   \
        return 0;                                                           \
    }
/* The same with a redis-server beside it, for byte-for-byte comparisons. */
#define RESP_SUITE_REF(...)                                                 \
    static tally_proc_t T;                                                  \
    static redis_ref_t R;                                                   \
    static bool have_redis;                                                 \
    static int setup(void **state)                                          \
    {                                                                       \
        (void)state;                                                        \
        static const char *const extra[] = { __VA_ARGS__ };                 \
        resp_suite_start(&T, extra, &R, &have_redis);                       \
        return 0;                                                           \
    }                                                                       \
    static int teardown(void **state)                                       \
    {                                                                       \
        (void)state;                                                        \
        resp_suite_stop(&T, &R, have_redis);                                \
        return 0;                                                           \
    }

#endif
