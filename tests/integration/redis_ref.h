/*
 * redis_ref.h - a real redis-server as the reference in differential tests.
 *
 * redis_ref_start() runs redis-server (Debian package) on a free port with no
 * persistence, in a temporary directory; redis_cmd() sends one command as an
 * argv array over RESP and returns the parsed reply.  Tests send the same
 * operations to Redis and to tallyd and compare every answer.
 *
 * If redis-server is not installed the test is skipped (make deps installs it).
 */
#ifndef TALLY_REDIS_REF_H
#define TALLY_REDIS_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum { RESP_STRING, RESP_ERROR, RESP_INT, RESP_BULK, RESP_NIL, RESP_ARRAY } resp_kind_t;

typedef struct resp {
    resp_kind_t kind;
    long long integer;
    char *str;               /* STRING, ERROR, BULK (NUL-terminated; len bytes) */
    size_t len;
    struct resp **elems;     /* ARRAY */
    size_t n;
} resp_t;

typedef struct redis_ref {
    pid_t pid;
    int port;
    int fd;
    char dir[256];
    char *rbuf;              /* read buffer */
    size_t rlen, rcap, roff;
} redis_ref_t;

/* Starts redis-server; returns false (and the test should skip) when it is
 * not installed.  Fails the test on any other problem. */
bool redis_ref_start(redis_ref_t *r);
void redis_ref_stop(redis_ref_t *r);

/* Sends argv (binary-safe: lens may be NULL for C strings) and reads one reply. */
resp_t *redis_cmdv(redis_ref_t *r, int argc, const char *const *argv, const size_t *lens);
/* printf-free convenience: redis_cmd(r, "PFADD", "k", "a", NULL). */
resp_t *redis_cmd(redis_ref_t *r, const char *arg0, ...);
/* Pipelining: send many commands, then read their replies in order. */
void redis_send(redis_ref_t *r, int argc, const char *const *argv, const size_t *lens);
resp_t *redis_read(redis_ref_t *r);
void resp_free(resp_t *v);

#endif
