/*
 * parse.h - the Redis protocol's requests, read as redis-server reads its
 * clients (src/networking.c, processMultibulkBuffer / processInlineBuffer).
 *
 * Our own parser, not hiredis's reader - measured (bench/resp_micro.c, CPU
 * time of one thread per command, the fastest of 3 rounds, 2 M commands;
 * x86-64 at 2 shared cores, gcc -O2, hiredis 0.14.1 from Debian 12):
 *
 *   request                               tally   hiredis   ratio
 *   SET key value, pipelined (1000/read)   55 ns   207 ns   3.8x
 *   SET key value, one per read            54 ns   200 ns   3.7x
 *   CL.THROTTLE key 15 30 60 1, pipelined  96 ns   338 ns   3.5x
 *   CL.THROTTLE ..., one per read          94 ns   323 ns   3.4x
 *
 * (one run; the machine is shared, and in a run beside other builds both
 * columns grew up to twice while the ratios stayed between 2x and 4x).
 * hiredis's redisReader is a *reply* reader: it allocates an object per
 * reply and a copy of every string (8 and 14 mallocs for these two
 * requests: two for the array, two per argument), keeps its own copy of
 * the input, and reads no inline commands (telnet, nc, hand-written
 * pipes send them); a server would also have to rebuild Redis's request
 * errors from its messages.  This parser allocates nothing per command
 * (views into the caller's buffer), checks every limit before it
 * allocates, answers Redis's exact error texts and reads both forms, in
 * one file (parse.c), fuzzed (tests/fuzz/fuzz_resp.c).
 *
 * Two forms reach a Redis server:
 *
 *   multibulk   *3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n   (every client library)
 *   inline      SET k "a b\x41" 'it\'s'\r\n                   (telnet, nc, hand-written pipes)
 *
 * The first byte of a command decides: '*' is multibulk, anything else a
 * line.  The parser is incremental: the caller keeps the bytes it has
 * received in one buffer, calls resp_parse() with the bytes not yet
 * consumed, and gets a complete command, "need more", or a protocol error.
 * Bytes may arrive split anywhere; the commands found, and the error, do
 * not depend on where (tests/fuzz/fuzz_resp.c checks it).
 *
 *   caller's buffer:  [ consumed | PING\r\n | *2\r\n$3\r\nGET\r\n$1\r\nk | ... ]
 *                                 ^ buf      '--- used ---'
 *                     resp_parse(p, buf, len, &used, &cmd) == RESP_CMD:
 *                     cmd.argv[0] = {buf, 4} "PING"; drop `used` bytes, call again
 *
 * Zero copy.  An argument is a view (pointer, length) into the caller's
 * buffer: a multibulk argument always, an inline argument when it has no
 * quotes.  A quoted inline argument is decoded into the parser's own
 * scratch (never longer than the line).  Views stay valid until the next
 * resp_parse() call or until the caller moves its buffer.  Progress inside
 * a partial command is kept as offsets from its first byte, so the caller
 * may grow (realloc) its buffer between calls, but must not drop bytes
 * that were not reported as used.
 *
 * Limits (resp_limits_t), checked when a length is read, before anything
 * is allocated for it:
 *   max_args    arguments of a multibulk command     (default 1024*1024, Redis 6's;
 *                                                      7.0 allows INT_MAX)
 *   max_bulk    bytes of one argument                 (default 512 MB, proto-max-bulk-len;
 *                                                      tallyd will pass --max-body)
 *   max_inline  bytes of an inline line, and of a     (default 64 KiB, PROTO_INLINE_MAX_SIZE)
 *               "*N" / "$N" line
 * With auth_required (resp_parser_require_auth), Redis's tighter limits for
 * a connection that has not authenticated apply: more than 10 arguments or
 * a bulk longer than 16384 bytes is refused.
 *
 * Memory.  The parser owns two allocations: the argument array (16 bytes a
 * view) and the inline scratch.  The array grows by doubling as arguments
 * *arrive*, never to a count merely announced ("*1000000" alone allocates
 * nothing), and never past max(max_args, max_inline/2 + 1) views; the
 * scratch is one line at most, max_inline bytes.  Each allocation is asked
 * of the caller's resp_mem_fn first (the listener counts it against the
 * client), and a large one is given back when the next command starts.
 *
 * Errors.  The texts are Redis 7's, byte for byte (sent as "-ERR <text>\r\n",
 * after which Redis closes the connection):
 *   Protocol error: invalid multibulk length        count not a number, or > max_args
 *   Protocol error: invalid bulk length             length not a number, < 0, or > max_bulk
 *   Protocol error: expected '$', got 'X'           (CR and LF shown as a space, as Redis does)
 *   Protocol error: too big mbulk count string      no CR within max_inline bytes of '*'
 *   Protocol error: too big bulk count string       no CR within max_inline bytes of '$'
 *   Protocol error: too big inline request          no LF within max_inline bytes
 *   Protocol error: unbalanced quotes in request    inline quoting (sds.c's sdssplitargs rules)
 *   Protocol error: unauthenticated multibulk length / unauthenticated bulk length
 * An error is final: the parser answers RESP_ERROR from then on.
 *
 * Where Redis is followed to the letter, and where not:
 *   - numbers are read by string2ll's rules: no sign but '-', no leading
 *     zero, no spaces ("*01", "*-0", "*+1", "*1 " are invalid);
 *   - "*0" and any negative count are empty commands, skipped, as are blank
 *     inline lines;
 *   - the two bytes after a "*N"/"$N" line's CR, and after a bulk's data,
 *     are skipped unread (Redis does not check that they are "\r\n", so
 *     neither does tally: "$4\r\nPINGxx" is PING);
 *   - the limit on a line is measured from its first byte, so it does not
 *     depend on how the bytes were split (Redis measures what one read
 *     brought; the two agree whenever bytes trickle in);
 *   - a NUL byte: Redis looks for line ends with strchr, so a NUL before
 *     the end of an inline line (or of a count line) hides the end and the
 *     client waits until the limit.  tally finds the end with memchr: an
 *     inline line ends its arguments at the NUL (what sdssplitargs would
 *     read), a count line holding a NUL is an invalid length.
 */
#ifndef TALLY_RESP_PARSE_H
#define TALLY_RESP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RESP_MAX_ARGS_DEFAULT (1024 * 1024)          /* Redis 6's multibulk count limit */
#define RESP_MAX_BULK_DEFAULT (512ULL * 1024 * 1024)  /* proto-max-bulk-len's default */
#define RESP_MAX_INLINE_DEFAULT (64 * 1024)           /* PROTO_INLINE_MAX_SIZE */
#define RESP_UNAUTH_MAX_ARGS 10                       /* networking.c: before AUTH */
#define RESP_UNAUTH_MAX_BULK 16384                    /* networking.c: before AUTH */

typedef struct resp_limits {
    size_t max_args;   /* arguments of a multibulk command (>= 1) */
    uint64_t max_bulk; /* bytes of one multibulk argument */
    size_t max_inline; /* bytes of an inline line, or of a "*N"/"$N" line (>= 16) */
} resp_limits_t;

/* Redis's defaults. */
resp_limits_t resp_limits_default(void);

/* One argument: `len` bytes at `ptr` (not NUL-terminated). */
typedef struct resp_arg {
    const char *ptr;
    size_t len;
} resp_arg_t;

typedef struct resp_cmd {
    size_t argc;            /* >= 1 */
    const resp_arg_t *argv; /* owned by the parser; valid until the next resp_parse() */
} resp_cmd_t;

typedef enum resp_status {
    RESP_MORE = 0, /* no complete command in the bytes given: append more, call again */
    RESP_CMD,      /* *cmd holds a command */
    RESP_ERROR,    /* a protocol error; resp_parser_error() says which; final */
    RESP_NOMEM,    /* the memory hook (or malloc) refused; final */
} resp_status_t;

/* Asked before the parser's memory grows from `held` to `want` bytes
 * (false refuses: resp_parse answers RESP_NOMEM), and told when it shrinks
 * (want < held; the answer is ignored).  NULL allows everything. */
typedef bool (*resp_mem_fn)(void *ud, size_t held, size_t want);

typedef struct resp_parser resp_parser_t;

/* A parser for one connection; NULL when out of memory.  `lim` is copied
 * (NULL: resp_limits_default()); max_args and max_inline are raised to
 * their minimums (1 and 16).  Free with resp_parser_free (NULL is fine). */
resp_parser_t *resp_parser_new(const resp_limits_t *lim, resp_mem_fn mem, void *ud);
void resp_parser_free(resp_parser_t *p);

/* Redis's limits for a client that has not authenticated: on until
 * AUTH/HELLO succeeds (the listener turns it off), off by default. */
void resp_parser_require_auth(resp_parser_t *p, bool required);

/* Parses the unconsumed bytes buf[0..len).  Returns RESP_CMD with *cmd
 * filled, RESP_MORE, RESP_ERROR or RESP_NOMEM.  *used is always set: the
 * bytes at the start of buf that are done with (the command returned and
 * any empty commands before it); the next call must start at buf + *used,
 * with those bytes gone and any new ones appended. */
resp_status_t resp_parse(resp_parser_t *p, const char *buf, size_t len, size_t *used, resp_cmd_t *cmd);

/* The error text after RESP_ERROR ("Protocol error: ..."), NUL-terminated,
 * its length in *len if len is not NULL; "" before any error. */
const char *resp_parser_error(const resp_parser_t *p, size_t *len);

/* Bytes the parser holds (argument array and scratch). */
size_t resp_parser_mem(const resp_parser_t *p);

#endif
