/* throttle.c - see throttle.h. */
#include "core/throttle.h"

#include <stdlib.h>

#define THROTTLE_ENC_VERSION 1   /* first byte of every encoding */

struct throttle {
    uint8_t algo;
    int64_t tat_ns;
};

throttle_t *throttle_new_gcra(int64_t tat_ns)
{
    throttle_t *t = malloc(sizeof(*t));
    if (t) {
        t->algo = THROTTLE_GCRA;
        t->tat_ns = tat_ns;
    }
    return t;
}

void throttle_free(throttle_t *t) { free(t); }
throttle_algo_t throttle_algo(const throttle_t *t) { return (throttle_algo_t)t->algo; }
int64_t throttle_gcra_tat(const throttle_t *t) { return t->tat_ns; }
void throttle_gcra_set_tat(throttle_t *t, int64_t tat_ns) { t->tat_ns = tat_ns; }

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { throttle_free(v); }

static size_t type_size(const void *v)
{
    (void)v;
    return sizeof(throttle_t);
}

static void type_encode(const void *v, wbuf_t *out)
{
    const throttle_t *t = v;
    wbuf_put_u8(out, THROTTLE_ENC_VERSION);
    wbuf_put_u8(out, t->algo);
    wbuf_put_i64(out, t->tat_ns);
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint8_t algo = rbuf_u8(&r);
    int64_t tat = rbuf_i64(&r);
    if (!rbuf_done(&r)) {
        *why = "throttle: wrong length";
        return NULL;
    }
    if (ver != THROTTLE_ENC_VERSION) {
        *why = "throttle: unknown encoding version";
        return NULL;
    }
    if (algo != THROTTLE_GCRA) {
        *why = "throttle: unknown algorithm";
        return NULL;
    }
    if (tat < 0) {
        *why = "throttle: negative TAT";
        return NULL;
    }
    throttle_t *t = throttle_new_gcra(tat);
    if (!t)
        *why = "out of memory";
    return t;
}

const ks_type_t throttle_type = {
    .tag = TYPE_TAG_THROTTLE,
    .name = "throttle",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
