/*
 * resp_client.h - raw RESP over sockets, for the Redis port's tests: build
 * multibulk commands (mb), send them and read everything answered until
 * the server closes (exchange), compare a server's bytes with
 * redis-server's (resp_diff), and run a python3-redis script.  Real
 * clients (redis-cli, python3-redis) do the rest; this is for byte-exact
 * comparisons and malformed input.
 */
#ifndef TALLY_RESP_CLIENT_H
#define TALLY_RESP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct buf {
    char *p;
    size_t len, cap;
} buf_t;

void buf_put(buf_t *b, const void *s, size_t n);
void buf_puts(buf_t *b, const char *s);
/* Appends one multibulk command: words up to NULL (at most 64). */
void mb(buf_t *b, const char *w0, ...);
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
/* /usr/bin/python3 with the redis package (tools/deps.sh test installs it). */
bool have_python_redis(void);
/* Runs a python3 script with the port as argv[1]; its output in out. */
bool run_python(const char *script, int port, char *out, size_t cap);

#endif
