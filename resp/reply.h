/*
 * reply.h - the Redis protocol's replies, written as Redis 7 writes them
 * (src/networking.c, addReply*), into one connection's output buffer.
 *
 * A connection speaks RESP2 until HELLO 3 and RESP3 after it; each type
 * has one function here and the connection's version picks its form:
 *
 *   type          RESP2                         RESP3
 *   simple        +OK\r\n                       same
 *   error         -ERR text\r\n                 same
 *   integer       :42\r\n                       same
 *   bulk          $5\r\nhello\r\n               same
 *   null          $-1\r\n                       _\r\n
 *   null array    *-1\r\n                       _\r\n
 *   array         *N\r\n                        same
 *   map of N      *2N\r\n (a flat array)        %N\r\n
 *   set           *N\r\n                        ~N\r\n
 *   double        $3\r\n1.5\r\n                 ,1.5\r\n
 *   boolean       :1\r\n / :0\r\n               #t\r\n / #f\r\n
 *   big number    $30\r\n1234...\r\n            (1234...\r\n
 *   verbatim      $N\r\ntext\r\n                =N+4\r\ntxt:text\r\n
 *
 * A double is printed as Redis 7.0 prints it, with "%.17g" (0.1 is
 * "0.10000000000000001"; Redis 7.2 moved to the shortest form), and
 * infinities as "inf" / "-inf" in both versions; a NaN as glibc prints
 * it ("nan", or "-nan" for a negative one, as 0/0 is).
 *
 * The buffer grows as replies are added, up to a hard cap the caller sets
 * (Redis's client-output-buffer-limit): a reply that would pass it is not
 * written, the function returns false and the buffer is marked failed
 * (resp_out_failed), and every later call fails too: the listener drops
 * the connection, as Redis drops a slow reader.  A reply is written whole
 * or not at all.  The caller removes what it has sent with
 * resp_out_consume.
 */
#ifndef TALLY_RESP_REPLY_H
#define TALLY_RESP_REPLY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct resp_out {
    char *buf;    /* bytes to send: buf[0..len) */
    size_t len;
    size_t cap;   /* allocated */
    size_t limit; /* len never passes it */
    int proto;    /* 2 or 3 */
    bool failed;  /* a reply did not fit, or malloc failed */
} resp_out_t;

/* An empty buffer (nothing allocated yet) of at most `limit` bytes,
 * speaking RESP`proto` (2 or 3; anything else is 2). */
void resp_out_init(resp_out_t *o, size_t limit, int proto);
void resp_out_free(resp_out_t *o);

/* HELLO's switch: later replies use RESP`proto` (2 or 3). */
void resp_out_set_proto(resp_out_t *o, int proto);

/* Drops the first n bytes (sent); keeps the allocation. */
void resp_out_consume(resp_out_t *o, size_t n);

static inline bool resp_out_failed(const resp_out_t *o)
{
    return o->failed;
}

/* Each returns false (writing nothing) when the reply does not fit. */

/* +s\r\n; a CR or LF in s is written as a space (a status line cannot hold one). */
bool resp_reply_simple(resp_out_t *o, const char *s, size_t len);
/* -s\r\n, s holding the code first ("ERR ...", "WRONGTYPE ...", "MOVED 3999 ..."):
 * a CR or LF is written as a space, as addReplyErrorFormat does. */
bool resp_reply_error(resp_out_t *o, const char *s, size_t len);
bool resp_reply_int(resp_out_t *o, long long v);
/* s may be NULL only when len is 0. */
bool resp_reply_bulk(resp_out_t *o, const void *s, size_t len);
bool resp_reply_null(resp_out_t *o);
bool resp_reply_null_array(resp_out_t *o);
bool resp_reply_array(resp_out_t *o, size_t n);
/* A map of n pairs: 2n elements follow. */
bool resp_reply_map(resp_out_t *o, size_t n);
bool resp_reply_set(resp_out_t *o, size_t n);
bool resp_reply_double(resp_out_t *o, double d);
/* A double already printed (text: len bytes, e.g. GEOPOS's "%.17Lf" form):
 * a bulk string in RESP2, ",text" in RESP3, as addReplyHumanLongDouble. */
bool resp_reply_double_text(resp_out_t *o, const char *text, size_t len);
bool resp_reply_bool(resp_out_t *o, bool b);
/* digits: an optional '-' and decimal digits (not checked). */
bool resp_reply_bignum(resp_out_t *o, const char *digits, size_t len);
/* ext: the format, three characters ("txt", "mkd"); shorter is space-padded. */
bool resp_reply_verbatim(resp_out_t *o, const char *s, size_t len, const char *ext);

#endif
