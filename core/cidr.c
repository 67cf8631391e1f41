/* cidr.c - see cidr.h. */
#include "core/cidr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CIDR_TEXT_MAX 64         /* longer than any address with a /len */

bool cidr_addr_parse(const char *text, size_t len, uint8_t out[16])
{
    char buf[CIDR_TEXT_MAX];
    if (len == 0 || len >= sizeof(buf))
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    uint8_t v4[4];
    if (inet_pton(AF_INET, buf, v4) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, v4, 4);
        return true;
    }
    return inet_pton(AF_INET6, buf, out) == 1;
}

/* Whether a 16-byte address is IPv4-mapped (::ffff:a.b.c.d). */
static bool is_mapped(const uint8_t a[16])
{
    static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    return memcmp(a, prefix, 12) == 0;
}

/* Whether the first `bits` bits of a and b agree. */
static bool prefix_equal(const uint8_t a[16], const uint8_t b[16], unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, whole) != 0)
        return false;
    if (!rest)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

/* Trims spaces and tabs around text[0..*len). */
static const char *trim(const char *s, size_t *len)
{
    while (*len && (*s == ' ' || *s == '\t')) {
        s++;
        (*len)--;
    }
    while (*len && (s[*len - 1] == ' ' || s[*len - 1] == '\t'))
        (*len)--;
    return s;
}

/* One entry "addr" or "addr/len" into r; false if it is not one. */
static bool range_parse(const char *s, size_t n, cidr_range_t *r)
{
    const char *slash = memchr(s, '/', n);
    size_t alen = slash ? (size_t)(slash - s) : n;
    if (!cidr_addr_parse(s, alen, r->addr))
        return false;
    bool v4 = is_mapped(r->addr) && memchr(s, ':', alen) == NULL;
    unsigned max = v4 ? 32 : 128;
    unsigned len = max;
    if (slash) {
        const char *p = slash + 1, *end = s + n;
        if (p == end || end - p > 3)
            return false;
        len = 0;
        for (; p < end; p++) {
            if (*p < '0' || *p > '9')
                return false;
            len = len * 10 + (unsigned)(*p - '0');
        }
        if (len > max)
            return false;
    }
    r->len = v4 ? len + 96 : len;
    /* clear the host bits, so that equal ranges compare equal */
    for (unsigned b = r->len; b < 128; b++)
        r->addr[b / 8] &= (uint8_t)~(0x80 >> (b % 8));
    return true;
}

bool cidr_parse(const char *text, cidr_set_t *set, char *err, size_t errlen)
{
    set->ranges = NULL;
    set->n = 0;
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ',';
    cidr_range_t *ranges = calloc(cap, sizeof(*ranges));
    if (!ranges) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    size_t n = 0;
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        size_t tl = len;
        const char *t = trim(p, &tl);
        if (tl && !range_parse(t, tl, &ranges[n])) {
            snprintf(err, errlen, "'%.*s' is not an IPv4 or IPv6 address or CIDR range (e.g. 10.0.0.0/8, ::1)",
                     (int)(tl > 64 ? 64 : tl), t);
            free(ranges);
            return false;
        }
        n += tl > 0;
        if (!p[len])
            break;
        p += len + 1;
    }
    if (n == 0) {
        free(ranges);
        return true;
    }
    set->ranges = ranges;
    set->n = n;
    return true;
}

void cidr_set_free(cidr_set_t *set)
{
    if (!set)
        return;
    free(set->ranges);
    set->ranges = NULL;
    set->n = 0;
}

bool cidr_contains(const cidr_set_t *set, const uint8_t addr[16])
{
    for (size_t i = 0; set && i < set->n; i++)
        if (prefix_equal(set->ranges[i].addr, addr, set->ranges[i].len))
            return true;
    return false;
}

bool cidr_contains_text(const cidr_set_t *set, const char *text, size_t len)
{
    uint8_t a[16];
    return cidr_addr_parse(text, len, a) && cidr_contains(set, a);
}

const char *cidr_client_addr(const cidr_set_t *trusted, const char *peer, const char *xff, const char *real_ip,
                             size_t *n)
{
    *n = 0;
    if (!peer || !*peer || !cidr_contains_text(trusted, peer, strlen(peer))) {
        *n = peer ? strlen(peer) : 0;
        return *n ? peer : NULL;
    }
    if (xff && *xff) {
        const char *best = NULL;
        size_t best_len = 0;
        /* from the right: each entry is what the proxy after it saw */
        size_t end = strlen(xff);
        for (;;) {
            size_t start = end;
            while (start > 0 && xff[start - 1] != ',')
                start--;
            size_t len = end - start;
            const char *e = trim(xff + start, &len);
            if (len) {
                best = e;
                best_len = len;
                if (!cidr_contains_text(trusted, e, len))
                    break;   /* untrusted (or not an address): the client */
            }
            if (start == 0)
                break;
            end = start - 1;
        }
        if (best) {
            *n = best_len;
            return best;
        }
    }
    if (real_ip) {
        size_t len = strlen(real_ip);
        const char *e = trim(real_ip, &len);
        if (len) {
            *n = len;
            return e;
        }
    }
    *n = strlen(peer);
    return peer;
}
