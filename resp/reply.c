/*
 * reply.c - the Redis protocol's replies (reply.h has the forms).
 *
 * Every reply is a header line and, for a bulk, its data: the header is
 * built on the stack, the room for the whole reply reserved (or refused)
 * once, then both are copied in.
 */
#include "resp/reply.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HDR_MAX 64     /* a prefix, a 20-digit number or a %.17g double, CRLF */
#define OUT_FIRST 4096 /* first allocation: a page of replies */

/* ------------------------------------------------------------ buffer -- */

void resp_out_init(resp_out_t *o, size_t limit, int proto)
{
    memset(o, 0, sizeof(*o));
    o->limit = limit;
    o->proto = proto == 3 ? 3 : 2;
}

void resp_out_free(resp_out_t *o)
{
    free(o->buf);
    o->buf = NULL;
    o->len = o->cap = 0;
}

void resp_out_set_proto(resp_out_t *o, int proto)
{
    o->proto = proto == 3 ? 3 : 2;
}

void resp_out_consume(resp_out_t *o, size_t n)
{
    if (n >= o->len) {
        o->len = 0;
        return;
    }
    memmove(o->buf, o->buf + n, o->len - n);
    o->len -= n;
}

/* Room for `more` bytes, within the limit; false marks the buffer failed. */
static bool reserve(resp_out_t *o, size_t more)
{
    if (o->failed)
        return false;
    if (more > o->limit - o->len) { /* len <= limit always */
        o->failed = true;
        return false;
    }
    size_t need = o->len + more;
    if (need <= o->cap)
        return true;
    size_t ncap = o->cap ? o->cap : OUT_FIRST;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (ncap > o->limit)
        ncap = o->limit;
    char *b = realloc(o->buf, ncap);
    if (!b) {
        o->failed = true;
        return false;
    }
    o->buf = b;
    o->cap = ncap;
    return true;
}

static void put(resp_out_t *o, const void *s, size_t n)
{
    if (n)
        memcpy(o->buf + o->len, s, n);
    o->len += n;
}

/* A header line and, if data is not NULL, len bytes and CRLF after it. */
static bool emit(resp_out_t *o, const char *hdr, size_t hlen, const void *data, size_t len)
{
    size_t more = hlen + (data ? len + 2 : 0);
    if ((data && len > SIZE_MAX - hlen - 2) || !reserve(o, more)) {
        o->failed = true;
        return false;
    }
    put(o, hdr, hlen);
    if (data) {
        put(o, data, len);
        put(o, "\r\n", 2);
    }
    return true;
}

/* "<prefix><v>\r\n" (every reply's length or integer: digits written
 * backwards, no printf on the hot path) */
static bool emit_num(resp_out_t *o, char prefix, long long v, const void *data, size_t len)
{
    char h[HDR_MAX];
    char *e = h + sizeof(h), *p = e;
    *--p = '\n';
    *--p = '\r';
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    *--p = prefix;
    return emit(o, p, (size_t)(e - p), data, len);
}

/* A line whose text cannot hold CR or LF: they become spaces. */
static bool emit_line(resp_out_t *o, char prefix, const char *s, size_t len)
{
    if (len > SIZE_MAX - 3 || !reserve(o, len + 3))
        return false;
    o->buf[o->len++] = prefix;
    char *d = o->buf + o->len;
    for (size_t i = 0; i < len; i++)
        d[i] = s[i] == '\r' || s[i] == '\n' ? ' ' : s[i];
    o->len += len;
    put(o, "\r\n", 2);
    return true;
}

/* ------------------------------------------------------------ replies -- */

bool resp_reply_simple(resp_out_t *o, const char *s, size_t len)
{
    return emit_line(o, '+', s, len);
}

bool resp_reply_error(resp_out_t *o, const char *s, size_t len)
{
    return emit_line(o, '-', s, len);
}

bool resp_reply_int(resp_out_t *o, long long v)
{
    return emit_num(o, ':', v, NULL, 0);
}

bool resp_reply_bulk(resp_out_t *o, const void *s, size_t len)
{
    if (!s && len) {
        o->failed = true;
        return false;
    }
    return emit_num(o, '$', (long long)len, s ? s : "", len);
}

bool resp_reply_null(resp_out_t *o)
{
    return o->proto == 3 ? emit(o, "_\r\n", 3, NULL, 0) : emit(o, "$-1\r\n", 5, NULL, 0);
}

bool resp_reply_null_array(resp_out_t *o)
{
    return o->proto == 3 ? emit(o, "_\r\n", 3, NULL, 0) : emit(o, "*-1\r\n", 5, NULL, 0);
}

bool resp_reply_array(resp_out_t *o, size_t n)
{
    return emit_num(o, '*', (long long)n, NULL, 0);
}

bool resp_reply_map(resp_out_t *o, size_t n)
{
    return o->proto == 3 ? emit_num(o, '%', (long long)n, NULL, 0) : emit_num(o, '*', 2 * (long long)n, NULL, 0);
}

bool resp_reply_set(resp_out_t *o, size_t n)
{
    return emit_num(o, o->proto == 3 ? '~' : '*', (long long)n, NULL, 0);
}

bool resp_reply_double(resp_out_t *o, double d)
{
    char t[HDR_MAX];
    int n;
    if (isinf(d))
        n = snprintf(t, sizeof(t), "%s", d > 0 ? "inf" : "-inf");
    else
        n = snprintf(t, sizeof(t), "%.17g", d);
    if (o->proto == 3) {
        char h[HDR_MAX + 3];
        int hn = snprintf(h, sizeof(h), ",%s\r\n", t);
        return emit(o, h, (size_t)hn, NULL, 0);
    }
    return resp_reply_bulk(o, t, (size_t)n);
}

bool resp_reply_double_text(resp_out_t *o, const char *text, size_t len)
{
    if (o->proto == 3)
        return emit(o, ",", 1, text, len);   /* ",text\r\n", whole or nothing */
    return resp_reply_bulk(o, text, len);
}

bool resp_reply_bool(resp_out_t *o, bool b)
{
    if (o->proto == 3)
        return emit(o, b ? "#t\r\n" : "#f\r\n", 4, NULL, 0);
    return emit(o, b ? ":1\r\n" : ":0\r\n", 4, NULL, 0);
}

bool resp_reply_bignum(resp_out_t *o, const char *digits, size_t len)
{
    if (!digits && len) {
        o->failed = true;
        return false;
    }
    if (o->proto == 3)
        return emit(o, "(", 1, digits ? digits : "", len);
    return resp_reply_bulk(o, digits, len);
}

bool resp_reply_verbatim(resp_out_t *o, const char *s, size_t len, const char *ext)
{
    if (o->proto != 3)
        return resp_reply_bulk(o, s, len);
    if ((!s && len) || len > SIZE_MAX - 4) {
        o->failed = true;
        return false;
    }
    char h[HDR_MAX];
    int n = snprintf(h, sizeof(h), "=%zu\r\n", len + 4);
    for (int i = 0; i < 3; i++)
        h[n++] = ext && *ext ? *ext++ : ' ';
    h[n++] = ':';
    return emit(o, h, (size_t)n, s ? s : "", len);
}
