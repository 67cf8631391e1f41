/* counter.c - see counter.h. */
#include "core/counter.h"

#include <stdlib.h>

#define COUNTER_ENC_VERSION 1   /* first byte of every encoding */

struct counter {
    int64_t value;
};

counter_t *counter_new(int64_t value)
{
    counter_t *c = malloc(sizeof(*c));
    if (c)
        c->value = value;
    return c;
}

void counter_free(counter_t *c) { free(c); }
int64_t counter_value(const counter_t *c) { return c->value; }
void counter_set(counter_t *c, int64_t value) { c->value = value; }

bool counter_add_fits(int64_t value, int64_t by, int64_t *out)
{
    if ((by > 0 && value > INT64_MAX - by) || (by < 0 && value < INT64_MIN - by))
        return false;
    *out = value + by;
    return true;
}

static void type_free(void *v) { counter_free(v); }

size_t counter_bytes(void) { return sizeof(counter_t); }

static size_t type_size(const void *v)
{
    (void)v;
    return sizeof(counter_t);
}

static void type_encode(const void *v, wbuf_t *out)
{
    const counter_t *c = v;
    wbuf_put_u8(out, COUNTER_ENC_VERSION);
    wbuf_put_i64(out, c->value);
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    int64_t value = rbuf_i64(&r);
    if (!rbuf_done(&r)) {
        *why = "counter: wrong length";
        return NULL;
    }
    if (ver != COUNTER_ENC_VERSION) {
        *why = "counter: unknown encoding version";
        return NULL;
    }
    counter_t *c = counter_new(value);
    if (!c)
        *why = "out of memory";
    return c;
}

const ks_type_t counter_type = {
    .tag = TYPE_TAG_COUNTER,
    .name = "counter",
    .noun = "a counter",
    .missing = "no such key",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
    .inline_size = sizeof(counter_t),   /* kept inside its entry */
};
