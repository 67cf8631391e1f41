/*
 * same_encoding.h - byte-for-byte comparison of encoded values, for the unit
 * tests of structures whose state must come back exactly (a rolled-back
 * batch, a reload, a replay that makes the same choices).  Include after
 * <cmocka.h>.
 */
#ifndef TALLY_SAME_ENCODING_H
#define TALLY_SAME_ENCODING_H

#include "core/codec.h"
#include "core/types.h"

/* Asserts that value v of type t encodes to exactly the bytes in want. */
static inline void assert_encodes_as(const ks_type_t *t, const void *v, const wbuf_t *want)
{
    wbuf_t got = WBUF_INIT;
    t->encode(v, &got);
    assert_int_equal(want->len, got.len);
    assert_memory_equal(want->data, got.data, want->len);
    wbuf_free(&got);
}

/* Asserts that values a and b of type t encode to the same bytes. */
static inline void assert_same_encoding(const ks_type_t *t, const void *a, const void *b)
{
    wbuf_t x = WBUF_INIT;
    t->encode(a, &x);
    assert_encodes_as(t, b, &x);
    wbuf_free(&x);
}

#endif
