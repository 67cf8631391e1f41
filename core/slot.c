/*
 * slot.c - key to cluster slot (core/slot.h).  The CRC is zlib's.
 */
#include <string.h>
#include <zlib.h>

#include "core/slot.h"

const char *slot_routing_key(const char *key, size_t len, size_t *rlen)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1) {
            *rlen = (size_t)(close - open - 1);
            return open + 1;
        }
    }
    *rlen = len;
    return key;
}

unsigned long slot_crc32(const void *p, size_t len)
{
    unsigned long crc = crc32(0L, Z_NULL, 0);
    const Bytef *b = p;
    while (len > 0) {   /* zlib takes uInt lengths */
        uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
        crc = crc32(crc, b, n);
        b += n;
        len -= n;
    }
    return crc;
}

unsigned slot_of(const char *key, size_t len)
{
    size_t rlen;
    const char *rk = slot_routing_key(key, len, &rlen);
    return (unsigned)(slot_crc32(rk, rlen) % SLOT_COUNT);
}
