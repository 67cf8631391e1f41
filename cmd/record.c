/* record.c - record fields: see record.h. */
#include "cmd/record.h"

#include "core/keyspace.h"

void cmd_put_key(wbuf_t *out, const char *key, size_t len)
{
    wbuf_put_u32(out, (uint32_t)len);
    wbuf_put_bytes(out, key, len);
}

bool cmd_get_key(rbuf_t *in, const char **key, size_t *len)
{
    uint32_t n = rbuf_u32(in);
    const uint8_t *p = rbuf_bytes(in, n);
    if (!p || n == 0 || n > KS_KEY_MAX)
        return false;
    *key = (const char *)p;
    *len = n;
    return true;
}
