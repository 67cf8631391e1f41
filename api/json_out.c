/*
 * json_out.c - JSON text from a jansson tree, with numbers as people expect.
 *
 * jansson prints reals with 17 significant digits, so 1.3878 comes out as
 * 1.3877999999999999.  tally's answers must read like Redis's (GEODIST
 * "1.3878"), so reals are printed in the shortest form that reads back as the
 * same double (15, 16 or 17 digits), always with a '.' or an exponent.
 * Everything else follows RFC 8259 with compact separators.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_out.h"

void api_format_double(double v, char *out, size_t n)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
    if (!strpbrk(out, ".eEn"))   /* integral: keep it visibly a real */
        strncat(out, ".0", n - strlen(out) - 1);
}

/* Two digits at a time from a table: a decision's answer formats a dozen
 * numbers, a time series' answer one a sample. */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                     "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                     "8081828384858687888990919293949596979899";

char *api_format_i64(char *p, int64_t v)
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        *p++ = '-';
    /* its digits: log10 from the bit length, then one comparison */
    static const uint64_t pow10[20] = { 1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
                                        100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL,
                                        1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
                                        1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
                                        1000000000000000000ULL, 10000000000000000000ULL };
    int t = ((64 - __builtin_clzll(u | 1)) * 1233) >> 12;
    int n = u < 10 ? 1 : t + 1 - (u < pow10[t]);
    char *end = p + n;
    while (u >= 100) {
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        *--end = digit_pairs[d + 1];
        *--end = digit_pairs[d];
    }
    if (u >= 10) {
        *--end = digit_pairs[u * 2 + 1];
        *--end = digit_pairs[u * 2];
    } else {
        *--end = (char)('0' + u);
    }
    return p + n;
}

char *api_json_string_at(char *p, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    *p++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = (char)c;
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        default:
            memcpy(p, "u00", 3);
            p[3] = hex[c >> 4];
            p[4] = hex[c & 15];
            p += 5;
        }
    }
    *p++ = '"';
    return p;
}

void api_json_put_string(wbuf_t *b, const char *s, size_t n)
{
    if (n > (SIZE_MAX - 2) / 6 || !wbuf_reserve(b, API_JSON_STRING_MAX(n))) {
        b->oom = true;
        return;
    }
    char *start = (char *)b->data + b->len;
    b->len += (size_t)(api_json_string_at(start, s, n) - start);
}

static void put_value(wbuf_t *b, json_t *v)
{
    char num[40];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        wbuf_put_u8(b, '{');
        const char *k;
        json_t *x;
        bool first = true;
        json_object_foreach(v, k, x) {
            if (!first)
                wbuf_put_u8(b, ',');
            first = false;
            api_json_put_string(b, k, strlen(k));
            wbuf_put_u8(b, ':');
            put_value(b, x);
        }
        wbuf_put_u8(b, '}');
        break;
    }
    case JSON_ARRAY: {
        wbuf_put_u8(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                wbuf_put_u8(b, ',');
            put_value(b, json_array_get(v, i));
        }
        wbuf_put_u8(b, ']');
        break;
    }
    case JSON_STRING:
        api_json_put_string(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        wbuf_put_bytes(b, num, (size_t)(api_format_i64(num, json_integer_value(v)) - num));
        break;
    case JSON_REAL:
        api_format_double(json_real_value(v), num, sizeof(num));
        wbuf_put_bytes(b, num, strlen(num));
        break;
    case JSON_TRUE: wbuf_put_bytes(b, "true", 4); break;
    case JSON_FALSE: wbuf_put_bytes(b, "false", 5); break;
    case JSON_NULL: wbuf_put_bytes(b, "null", 4); break;
    }
}

char *api_json_text(json_t *v, size_t *len)
{
    wbuf_t b = WBUF_INIT;
    put_value(&b, v);
    wbuf_put_u8(&b, '\0');
    if (b.oom) {
        wbuf_free(&b);
        return NULL;
    }
    char *s = (char *)wbuf_steal(&b, len);
    *len -= 1;
    return s;
}
