/* bits.c - Redis string bitmaps as operations: see bits.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/access.h"
#include "cmd/bits.h"
#include "cmd/keys.h"
#include "cmd/names.h"
#include "cmd/room.h"
#include "core/counter.h"

#define REC_VERSION 1
#define SET_REC_VERSION 2            /* SET with flags or an expiry */
#define BF_REC_OP 20                 /* bytes of one BITFIELD operation in a record */

static bool bad(const char **why, const char *what)
{
    *why = what;
    return false;
}

static void put_head(wbuf_t *out, const char *key, size_t klen)
{
    wbuf_put_u8(out, REC_VERSION);
    cmd_put_key(out, key, klen);
}

/* ------------------------------------------------------------------------ */
/* Keyspace access                                                          */
/* ------------------------------------------------------------------------ */

/* Before a write that leaves the string at `len` bytes, grown in place
 * (replace = false) or replaced by an exact-size buffer: the length may not
 * pass --max-value-size (a bit string's size is its length, as Redis's
 * 512 MB bulk limit counts it), and room is made for the growth.  Call
 * without locks. */
static bool bits_room(cmd_ctx_t *ctx, const char *key, size_t klen, const char *field, size_t len, bool replace)
{
    if (!cmd_value_fits(ctx, field, "the bit string", len) || !cmd_make_room(ctx))
        return false;
    if (ctx->replay || !ks_maxmemory(ctx->srv->ks))
        return true;
    cmd_key_t h;
    if (!cmd_key_open(ctx, key, klen, NULL, CMD_READ, &h))   /* any type: only a 403 */
        return false;
    const bits_t *b = h.e && ks_entry_type(h.e) == &bits_type ? cmd_key_value(&h) : NULL;
    size_t before = b ? bits_heap_bytes(b) : 0;
    size_t after = bits_heap_bytes_after(replace ? NULL : b, len);
    bool exists = h.e != NULL;
    cmd_key_close(&h, false);
    return after <= before ||
           cmd_make_room_for_key(ctx, after - before + (exists ? 0 : ks_entry_overhead(klen)), key, klen, before);
}

/* Creates the value for a missing key, already grown to len; NULL
 * (OUT_OF_MEMORY set) on allocation failure. */
static bits_t *new_bits(cmd_ctx_t *ctx, size_t len)
{
    uint8_t *p = calloc(len, 1);
    bits_t *b = p ? bits_adopt(p, len) : NULL;
    if (!b) {
        free(p);
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory allocating a %zu-byte bit string", len);
    }
    return b;
}

/* Stores b at the missing key of h (keys[0]); false (b freed,
 * OUT_OF_MEMORY set) when out of memory. */
static bool add_bits(cmd_key_t *h, bits_t *b)
{
    if (cmd_key_add(h, &bits_type, b, KS_NO_EXPIRY))
        return true;
    bits_free(b);
    return cmd_fail(h->ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory adding the key");
}

/* WRONGTYPE for a key holding neither a bit string nor a counter. */
static bool not_string(cmd_ctx_t *ctx, const ks_entry_t *e)
{
    const ks_type_t *held = ks_entry_type(e);
    return cmd_fail(ctx, CMD_E_WRONGTYPE, NULL, "key holds %s (%s), not %s (%s)", cmd_type_noun(held), held->name,
                    cmd_type_noun(&bits_type), bits_type.name);
}

/* Opens a key to read it as Redis holds a string: a bit string's bytes,
 * or with `strings` a counter's decimal digits (written to digits[]).
 * *p may be NULL when *n is 0; h->e is NULL for a missing key.  False
 * (nothing locked, error set) as cmd_key_open. */
static bool open_read(cmd_ctx_t *ctx, const char *key, size_t klen, bool strings, unsigned flags, cmd_key_t *h,
                      const uint8_t **p, size_t *n, char digits[24])
{
    if (!cmd_key_open(ctx, key, klen, strings ? NULL : &bits_type, flags, h))
        return false;
    *p = NULL;
    *n = 0;
    if (!h->e)
        return true;
    const ks_type_t *t = ks_entry_type(h->e);
    if (t == &bits_type) {
        const bits_t *b = cmd_key_value(h);
        *p = bits_data(b);
        *n = bits_len(b);
    } else if (t == &counter_type) {
        int len = snprintf(digits, 24, "%lld", (long long)counter_value(cmd_key_value(h)));
        *p = (const uint8_t *)digits;
        *n = (size_t)len;
    } else {
        bool r = not_string(ctx, h->e);
        cmd_key_close(h, false);
        return r;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* SET, GET, GETRANGE                                                       */
/* ------------------------------------------------------------------------ */

/* Redis's SET (CMD_SET_REDIS): the key's old value may be a bit string or a
 * counter, and the new one either; NX/XX, the expiry, KEEPTTL and GET. */
static bool run_set_redis(cmd_ctx_t *ctx, const cmd_bits_set_args_t *a, cmd_bits_len_res_t *r)
{
    bool counter = (a->flags & CMD_SET_COUNTER) != 0;
    int64_t value = 0;
    if (counter) {
        char num[24];
        if (a->len == 0 || a->len >= sizeof(num))
            return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "a counter's value must be a decimal integer");
        memcpy(num, a->data, a->len);
        num[a->len] = 0;
        char *end;
        long long v = strtoll(num, &end, 10);
        if (*end)
            return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "a counter's value must be a decimal integer");
        value = v;
        if (!cmd_make_room_for_key(ctx, counter_bytes() + ks_entry_overhead(a->klen), a->key, a->klen, 0))
            return false;
    } else if (!bits_room(ctx, a->key, a->klen, NULL, a->len, true)) {
        return false;
    }
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, NULL, CMD_WRITE, &h))
        return false;
    const ks_type_t *held = h.e ? ks_entry_type(h.e) : NULL;
    if (held && held != &bits_type && held != &counter_type) {
        bool ok = not_string(ctx, h.e);
        cmd_key_close(&h, false);
        return ok;
    }
    if (a->old) {
        const uint8_t *p = NULL;
        size_t n = 0;
        char digits[24];
        if (held == &bits_type) {
            p = bits_data(cmd_key_value(&h));
            n = bits_len(cmd_key_value(&h));
        } else if (held == &counter_type) {
            n = (size_t)snprintf(digits, sizeof(digits), "%lld", (long long)counter_value(cmd_key_value(&h)));
            p = (const uint8_t *)digits;
        }
        a->old(a->ud, held != NULL, p, n);
    }
    r->length = a->len;
    if (((a->flags & CMD_SET_NX) && held) || ((a->flags & CMD_SET_XX) && !held)) {
        r->skipped = true;
        cmd_key_close(&h, false);
        return true;
    }
    int64_t expire = held && (a->flags & CMD_SET_KEEPTTL) ? ks_entry_expire(ctx->srv->ks, h.e) : a->expire_ms;
    if (a->expire_ms && a->expire_ms <= cmd_now_ms(ctx)) {
        /* set, then expired at once: the key is gone */
        if (h.e)
            cmd_key_delete(&h);
        cmd_key_close(&h, held != NULL);
        return true;
    }
    void *nv = counter ? (void *)counter_new(value) : (void *)bits_from(a->data, a->len);
    if (!nv) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing %zu bytes", a->len);
    }
    const ks_type_t *type = counter ? &counter_type : &bits_type;
    if (held == type) {
        cmd_key_replace(&h, nv);
        ks_entry_set_expire(ctx->srv->ks, &h.e, expire);
    } else {
        if (h.e)
            cmd_key_delete(&h);
        if (!cmd_key_add(&h, type, nv, expire)) {
            if (counter)
                counter_free(nv);
            else
                bits_free(nv);
            cmd_key_close(&h, held != NULL);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory adding the key");
        }
    }
    cmd_key_close(&h, true);
    return true;
}

static bool run_set(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bits_set_args_t *a = args;
    cmd_bits_len_res_t *r = res;
    r->skipped = false;
    if (a->len > BITS_MAX_LEN)
        return cmd_fail(ctx, CMD_E_PAYLOAD_TOO_LARGE, NULL, "a bit string holds at most %llu bytes",
                        (unsigned long long)BITS_MAX_LEN);
    if (a->flags & CMD_SET_REDIS)
        return run_set_redis(ctx, a, r);
    if (!bits_room(ctx, a->key, a->klen, NULL, a->len, true))
        return false;
    bits_t *nb = bits_from(a->data, a->len);
    if (!nb)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory storing %zu bytes", a->len);
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &bits_type, CMD_WRITE, &h)) {
        bits_free(nb);
        return false;
    }
    if (h.e) {
        cmd_key_replace(&h, nb);
    } else if (!add_bits(&h, nb)) {
        cmd_key_close(&h, false);
        return false;
    }
    cmd_key_close(&h, true);
    r->length = a->len;
    return true;
}

static void encode_set(const void *args, wbuf_t *out)
{
    const cmd_bits_set_args_t *a = args;
    bool v2 = a->flags || a->expire_ms;
    wbuf_put_u8(out, v2 ? SET_REC_VERSION : REC_VERSION);
    cmd_put_key(out, a->key, a->klen);
    wbuf_put_blob(out, a->data, a->len);
    if (v2) {
        wbuf_put_u8(out, (uint8_t)a->flags);
        wbuf_put_i64(out, a->expire_ms);
    }
}

static bool decode_set(rbuf_t *in, void *args, const char **why)
{
    cmd_bits_set_args_t *a = args;
    unsigned version = in->off < in->len && in->p[in->off] == SET_REC_VERSION ? SET_REC_VERSION : REC_VERSION;
    if (!cmd_get_head(in, version, true, &a->key, &a->klen, why))
        return false;
    a->data = rbuf_blob(in, &a->len);
    if (!a->data || a->len > BITS_MAX_LEN)
        return bad(why, "bad bytes");
    a->flags = 0;
    a->expire_ms = 0;
    a->old = NULL;
    a->ud = NULL;
    if (version == SET_REC_VERSION) {
        a->flags = rbuf_u8(in);
        a->expire_ms = rbuf_i64(in);
        if (in->err || (a->flags & ~CMD_SET_FLAGS) || !(a->flags & CMD_SET_REDIS) || a->expire_ms < 0 ||
            ((a->flags & CMD_SET_NX) && (a->flags & CMD_SET_XX)) ||
            ((a->flags & CMD_SET_KEEPTTL) && a->expire_ms))
            return bad(why, "bad options");
    }
    return true;
}

static bool run_get(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    const cmd_bits_get_args_t *a = args;
    int64_t start = a->start, end = a->end;
    cmd_key_t h;
    const uint8_t *data;
    size_t dlen;
    char digits[24];
    if (!open_read(ctx, a->key, a->klen, a->strings, CMD_MUST_EXIST, &h, &data, &dlen, digits))
        return false;
    if (a->length_only) {
        a->bytes(a->ud, NULL, dlen);
        cmd_key_close(&h, false);
        return true;
    }
    int64_t len = (int64_t)dlen;
    size_t off = 0, n = 0;
    if (!(start < 0 && end < 0 && start > end)) {
        if (start < 0)
            start = start < -len ? 0 : len + start;
        if (end < 0)
            end = end < -len ? 0 : len + end;
        if (end >= len)
            end = len - 1;
        if (len > 0 && start <= end) {
            off = (size_t)start;
            n = (size_t)(end - start + 1);
        }
    }
    bool ok = cmd_answer_fits(ctx, n, a->strings ? "read the string in parts with GETRANGE"
                                                 : "read the string in parts with ?start=&end= (byte offsets, inclusive, as GETRANGE)");
    if (ok)
        a->bytes(a->ud, n ? data + off : NULL, n);
    cmd_key_close(&h, false);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* SETRANGE, APPEND                                                         */
/* ------------------------------------------------------------------------ */

static bool too_long(cmd_ctx_t *ctx)
{
    return cmd_fail(ctx, CMD_E_BAD_REQUEST, "offset", "string exceeds maximum allowed size (proto-max-bulk-len)");
}

/* Whether p[0..n) is an integer as Redis writes one (what a counter's
 * digits print as): *v its value. */
static bool canonical_int(const uint8_t *p, size_t n, int64_t *v)
{
    char num[24];
    if (n == 0 || n >= sizeof(num) || memchr(p, 0, n))
        return false;
    memcpy(num, p, n);
    num[n] = 0;
    char *end;
    long long x = strtoll(num, &end, 10);
    char back[24];
    if (*end || snprintf(back, sizeof(back), "%lld", x) != (int)n || memcmp(back, num, n) != 0)
        return false;
    *v = x;
    return true;
}

/* SETRANGE or APPEND on a counter (`strings`: the Redis front-end): its
 * digits changed as Redis changes the string.  A result that is still an
 * integer in Redis's form stays a counter (INCR goes on working); another
 * makes the key a bit string of those bytes, its expiry kept.  Closes h. */
static bool setrange_counter(cmd_ctx_t *ctx, const cmd_bits_setrange_args_t *a, cmd_key_t *h,
                             cmd_bits_len_res_t *r)
{
    counter_t *cv = cmd_key_value(h);
    char digits[24];
    size_t dlen = (size_t)snprintf(digits, sizeof(digits), "%lld", (long long)counter_value(cv));
    if (a->len == 0) {
        cmd_key_close(h, false);
        r->length = dlen;
        return true;
    }
    uint64_t off = a->append ? dlen : a->offset;
    if (off + a->len > CMD_BITS_MAX_STRING) {
        cmd_key_close(h, false);
        return too_long(ctx);
    }
    size_t end = off + a->len > dlen ? (size_t)(off + a->len) : dlen;
    uint8_t *p = calloc(end, 1);
    if (!p) {
        cmd_key_close(h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory building a %zu-byte string", end);
    }
    memcpy(p, digits, dlen);
    memcpy(p + off, a->data, a->len);
    r->length = end;
    int64_t v;
    if (canonical_int(p, end, &v)) {
        free(p);
        counter_set(cv, v);
        cmd_key_close(h, true);
        return true;
    }
    bits_t *b = bits_adopt(p, end);
    if (!b) {
        free(p);
        cmd_key_close(h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory building a %zu-byte string", end);
    }
    int64_t expire = ks_entry_expire(h->ctx->srv->ks, h->e);
    cmd_key_delete(h);
    if (!cmd_key_add(h, &bits_type, b, expire)) {
        bits_free(b);
        cmd_key_close(h, true);   /* the counter is gone: journaled as the change it was */
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory adding the key");
    }
    cmd_key_close(h, true);
    return true;
}

static bool run_setrange(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bits_setrange_args_t *a = args;
    cmd_bits_len_res_t *r = res;
    r->skipped = false;
    if (!a->append && a->len && a->offset + a->len > CMD_BITS_MAX_STRING)
        return too_long(ctx);
    /* the length reached: SETRANGE's is known, APPEND's needs the string */
    uint64_t need = a->append ? 0 : a->offset + a->len;
    if (a->append && a->len) {
        cmd_key_t h;
        const uint8_t *p;
        size_t n;
        char digits[24];
        if (!open_read(ctx, a->key, a->klen, a->strings, CMD_READ, &h, &p, &n, digits))
            return false;
        need = n + (uint64_t)a->len;
        cmd_key_close(&h, false);
        if (need > CMD_BITS_MAX_STRING)
            return too_long(ctx);
    }
    if (a->len && !bits_room(ctx, a->key, a->klen, "value", (size_t)need, false))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, a->strings ? NULL : &bits_type, CMD_WRITE, &h))
        return false;
    const ks_type_t *held = h.e ? ks_entry_type(h.e) : NULL;
    if (held == &counter_type)
        return setrange_counter(ctx, a, &h, r);
    if (held && held != &bits_type) {
        bool ok = not_string(ctx, h.e);
        cmd_key_close(&h, false);
        return ok;
    }
    bits_t *b = cmd_key_value(&h);
    size_t len = b ? bits_len(b) : 0;
    if (a->len == 0) {   /* nothing written, nothing created */
        cmd_key_close(&h, false);
        r->length = len;
        return true;
    }
    uint64_t off = a->append ? len : a->offset;
    if (off + a->len > CMD_BITS_MAX_STRING) {   /* APPEND: grown since measured */
        cmd_key_close(&h, false);
        return too_long(ctx);
    }
    size_t end = (size_t)(off + a->len);
    if (!b) {
        if (!(b = new_bits(ctx, end)) || !add_bits(&h, b)) {
            cmd_key_close(&h, false);
            return false;
        }
    } else if (end > len && !bits_grow(b, end)) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory growing the bit string to %zu bytes", end);
    }
    memcpy(bits_mut(b) + off, a->data, a->len);
    r->length = bits_len(b);
    cmd_key_close(&h, true);
    return true;
}

static void encode_setrange(const void *args, wbuf_t *out)
{
    const cmd_bits_setrange_args_t *a = args;
    put_head(out, a->key, a->klen);
    wbuf_put_u8(out, (uint8_t)((a->append ? 1 : 0) | (a->strings ? 2 : 0)));
    wbuf_put_u64(out, a->offset);
    wbuf_put_blob(out, a->data, a->len);
}

static bool decode_setrange(rbuf_t *in, void *args, const char **why)
{
    cmd_bits_setrange_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    uint8_t flags = rbuf_u8(in);
    a->offset = rbuf_u64(in);
    a->data = rbuf_blob(in, &a->len);
    if (in->err || flags > 3 || !a->data || a->offset > CMD_BITS_MAX_STRING || a->len > CMD_BITS_MAX_STRING)
        return bad(why, "bad range");
    a->append = (flags & 1) != 0;
    a->strings = (flags & 2) != 0;
    return true;
}

/* ------------------------------------------------------------------------ */
/* SETBIT, GETBIT, BITCOUNT, BITPOS                                         */
/* ------------------------------------------------------------------------ */

static bool run_setbit(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bits_setbit_args_t *a = args;
    cmd_bits_bit_res_t *r = res;
    size_t need = (size_t)(a->offset >> 3) + 1;
    if (!bits_room(ctx, a->key, a->klen, "offset", need, false))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &bits_type, CMD_WRITE, &h))
        return false;
    bits_t *b = cmd_key_value(&h);
    int old = b ? bits_getbit(bits_data(b), bits_len(b), a->offset) : 0;
    bool grows = !b || bits_len(b) < need;
    if (grows || old != a->value) {
        if (!b) {
            if (!(b = new_bits(ctx, need)) || !add_bits(&h, b)) {
                cmd_key_close(&h, false);
                return false;
            }
        } else if (!bits_grow(b, need)) {
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory growing the bit string to %zu bytes",
                            need);
        }
        bits_setbit(bits_mut(b), a->offset, a->value);
    }
    cmd_key_close(&h, grows || old != a->value);
    r->bit = old;
    return true;
}

/* The record laid out in one step (the bytes put_head and the wbuf_put_*
 * calls would write): SETBIT is the hot write of the family, and one
 * reservation instead of five halves what encoding it costs. */
static void encode_setbit(const void *args, wbuf_t *out)
{
    const cmd_bits_setbit_args_t *a = args;
    size_t n = 1 + 4 + a->klen + 8 + 1;
    if (!wbuf_reserve(out, n))
        return;
    uint8_t *p = out->data + out->len;
    p[0] = REC_VERSION;
    le32_store(p + 1, (uint32_t)a->klen);
    memcpy(p + 5, a->key, a->klen);
    le64_store(p + 5 + a->klen, a->offset);
    p[13 + a->klen] = (uint8_t)a->value;
    out->len += n;
}

static bool decode_setbit(rbuf_t *in, void *args, const char **why)
{
    cmd_bits_setbit_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    a->offset = rbuf_u64(in);
    a->value = rbuf_u8(in);
    if (a->offset > BITS_MAX_OFFSET || a->value > 1)
        return bad(why, "bad bit");
    return true;
}

static bool run_getbit(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bits_getbit_args_t *a = args;
    cmd_bits_bit_res_t *r = res;
    cmd_key_t h;
    const uint8_t *p;
    size_t n;
    char digits[24];
    if (!open_read(ctx, a->key, a->klen, a->strings, CMD_READ, &h, &p, &n, digits))
        return false;
    r->bit = h.e ? bits_getbit(p, n, a->offset) : 0;
    cmd_key_close(&h, false);
    return true;
}

static bool run_bitcount(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bits_range_args_t *a = args;
    cmd_bits_num_res_t *r = res;
    cmd_key_t h;
    const uint8_t *p;
    size_t n;
    char digits[24];
    if (!open_read(ctx, a->key, a->klen, a->strings, CMD_READ, &h, &p, &n, digits))
        return false;
    r->v = h.e ? bits_count(p, n, &a->range) : 0;
    cmd_key_close(&h, false);
    return true;
}

static bool run_bitpos(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bits_range_args_t *a = args;
    cmd_bits_num_res_t *r = res;
    cmd_key_t h;
    const uint8_t *p;
    size_t n;
    char digits[24];
    if (!open_read(ctx, a->key, a->klen, a->strings, CMD_READ, &h, &p, &n, digits))
        return false;
    r->v = bits_pos(p, n, h.e != NULL, a->bit, &a->range);
    cmd_key_close(&h, false);
    return true;
}

/* ------------------------------------------------------------------------ */
/* BITOP                                                                    */
/* ------------------------------------------------------------------------ */

/* What one BITOP works with: keys[0] the destination, then the distinct
 * sources; use[] the sources each pass of bits_bitop reads (indexes into
 * the sources as named). */
typedef struct bitop_plan {
    size_t n, nd, nuse;
    ks_key_t *keys;
    size_t *first, *times, *at, *use;
    const uint8_t **data;
    size_t *lens;
} bitop_plan_t;

/* One attempt with the keys locked: 1 done, 0 refused (error set,
 * unlocked), -1 to try again once room was made (unlocked). */
static int bitop_locked(cmd_ctx_t *ctx, const cmd_bits_bitop_args_t *a, bitop_plan_t *pl, unsigned *attempts,
                        cmd_bits_len_res_t *r)
{
    size_t n = pl->n, nd = pl->nd;
    cmd_key_t h;
    if (!cmd_keys_lock(ctx, pl->keys, nd + 1, &h))
        return 0;
    size_t maxlen = 0;
    const uint8_t **sdata = malloc(nd * sizeof(*sdata));
    size_t *slen = malloc(nd * sizeof(*slen));
    if (!sdata || !slen) {
        free(sdata);
        free(slen);
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    bool found = true;
    uint64_t pinned = 0;   /* the sources and the destination: kept while room is made */
    for (size_t i = 0; i < n && found; i++) {
        if (pl->first[i] != i)
            continue;
        char what[32];
        snprintf(what, sizeof(what), "sources[%zu]", i);
        ks_entry_t *se;
        found = cmd_keys_find(&h, pl->at[i], &bits_type, CMD_READ, what, &se);
        const bits_t *sb = found && se ? ks_entry_value(se) : NULL;
        pinned += sb ? bits_heap_bytes(sb) : 0;
        sdata[pl->at[i] - 1] = sb ? bits_data(sb) : NULL;
        slen[pl->at[i] - 1] = sb ? bits_len(sb) : 0;
        if (slen[pl->at[i] - 1] > maxlen)
            maxlen = slen[pl->at[i] - 1];
    }
    uint64_t work = 0;
    for (size_t k = 0; found && k < pl->nuse; k++) {
        pl->data[k] = sdata[pl->at[pl->use[k]] - 1];
        pl->lens[k] = slen[pl->at[pl->use[k]] - 1];
        work += pl->lens[k];
    }
    free(sdata);
    free(slen);
    if (!found || !cmd_keys_find(&h, 0, &bits_type, CMD_WRITE, "destination", NULL))
        return 0;
    /* bounded work, a bounded result, and room for it: it is built while
     * the destination's old value still exists */
    size_t before = h.e ? bits_heap_bytes(cmd_key_value(&h)) : 0;
    size_t after = maxlen ? bits_heap_bytes_after(NULL, maxlen) : 0;
    uint64_t add = after ? after + (h.e ? 0 : ks_entry_overhead(a->klen)) : 0;
    bool dst_read = false;   /* the destination among the sources: counted once */
    for (size_t k = 1; k <= nd && !dst_read; k++)
        dst_read = pl->keys[k].len == a->klen && memcmp(pl->keys[k].p, a->key, a->klen) == 0;
    cmd_keep_t keep = { pl->keys, nd + 1, pinned + (dst_read ? 0 : before) };
    if (!cmd_work_fits(ctx, "sources", work) || !cmd_value_fits(ctx, "sources", "the result", maxlen)) {
        cmd_key_close(&h, false);
        return 0;
    }
    if (add > cmd_room_now(ctx)) {
        cmd_key_close(&h, false);
        return cmd_room_retry(ctx, add, &keep, attempts) ? -1 : 0;
    }
    uint8_t *out;
    size_t rlen;
    if (!bits_bitop(a->op, pl->data, pl->lens, pl->nuse, &out, &rlen)) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory computing a %zu-byte result", maxlen);
    }
    bool changed = false;
    if (rlen == 0) {
        if (h.e) {   /* an empty result deletes the destination */
            cmd_key_delete(&h);
            changed = true;
        }
    } else {
        bits_t *nb = bits_adopt(out, rlen);
        if (!nb) {
            free(out);
            cmd_key_close(&h, false);
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        }
        if (h.e) {
            cmd_key_replace(&h, nb);
        } else if (!add_bits(&h, nb)) {
            cmd_key_close(&h, false);
            return 0;
        }
        changed = true;
    }
    cmd_key_close(&h, changed);
    r->length = rlen;
    return 1;
}

static bool run_bitop(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_bits_bitop_args_t *a = args;
    size_t n = a->sources.n;
    if (n > CMD_BATCH_MAX)   /* what a record holds (decode_bitop) */
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "sources", "BITOP takes at most %d source keys, not %zu",
                        CMD_BATCH_MAX, n);
    if (a->op == BITS_OP_NOT && n != 1)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "sources", "BITOP NOT takes exactly one source key, not %zu", n);
    bitop_plan_t pl = { .n = n };
    pl.keys = malloc((n + 1) * sizeof(*pl.keys));
    pl.first = malloc(n * sizeof(*pl.first));
    pl.times = calloc(n, sizeof(*pl.times));
    pl.at = malloc(n * sizeof(*pl.at));
    pl.use = malloc(2 * n * sizeof(*pl.use));
    pl.data = malloc(2 * n * sizeof(*pl.data));
    pl.lens = malloc(2 * n * sizeof(*pl.lens));
    int done = 0;
    if (!pl.keys || !pl.first || !pl.times || !pl.at || !pl.use || !pl.data || !pl.lens) {
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        goto out;
    }
    pl.keys[0] = ks_key(ctx->srv->ks, a->key, a->klen);
    const char *p;
    size_t len;
    uint64_t by;
    cmd_batch_iter_t x = cmd_batch_begin(&a->sources);
    for (size_t i = 0; cmd_batch_next(&x, &p, &len, &by); i++)
        pl.keys[i + 1] = ks_key(ctx->srv->ks, p, len);
    /* A source named more than once is read once: AND and OR give the same
     * bits for a repeated operand, and for XOR a pair cancels out, so a
     * source named an even number of times is read twice (zeros, with its
     * length) and an odd number once.  BITOP of 10 000 copies of one key
     * costs what BITOP of one does. */
    if (!cmd_keys_distinct(pl.keys + 1, n, pl.first)) {
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (pl.first[i] == i) {
            pl.at[i] = ++pl.nd;
            pl.keys[pl.nd] = pl.keys[i + 1];
        }
        pl.times[pl.first[i]]++;
    }
    for (size_t i = 0; i < n; i++) {
        if (pl.first[i] != i)
            continue;
        pl.use[pl.nuse++] = i;
        if (a->op == BITS_OP_XOR && pl.times[i] % 2 == 0)
            pl.use[pl.nuse++] = i;
    }
    /* the token's prefixes before any eviction: a refusal changes nothing */
    if (!cmd_keys_allowed_here(ctx, pl.keys, pl.nd + 1) || !cmd_make_room(ctx))
        goto out;
    unsigned attempts = 0;
    while ((done = bitop_locked(ctx, a, &pl, &attempts, res)) < 0)
        ;
out:
    free(pl.keys);
    free(pl.first);
    free(pl.times);
    free(pl.at);
    free(pl.use);
    free(pl.data);
    free(pl.lens);
    return done > 0;
}

static void encode_bitop(const void *args, wbuf_t *out)
{
    const cmd_bits_bitop_args_t *a = args;
    put_head(out, a->key, a->klen);
    wbuf_put_u8(out, (uint8_t)a->op);
    cmd_batch_put(out, &a->sources, CMD_BATCH_KEYS);
}

static bool decode_bitop(rbuf_t *in, void *args, const char **why)
{
    cmd_bits_bitop_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    uint8_t op = rbuf_u8(in);
    if (op > BITS_OP_NOT)
        return bad(why, "bad op");
    a->op = (bits_op_t)op;
    if (!cmd_batch_get(in, &a->sources, CMD_BATCH_KEYS, 0, 0) || (a->op == BITS_OP_NOT && a->sources.n != 1))
        return bad(why, "bad sources");
    return true;
}

/* ------------------------------------------------------------------------ */
/* BITFIELD                                                                 */
/* ------------------------------------------------------------------------ */

/* BITFIELD, or with `ro` BITFIELD_RO (only GET: refused for any other
 * operation, as Redis answers "BITFIELD_RO only supports the GET
 * subcommand"). */
static bool field(cmd_ctx_t *ctx, const cmd_bits_field_args_t *a, bool ro)
{
    size_t n = a->n;
    if (n > CMD_BATCH_MAX)   /* what a record holds (decode_field) */
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "ops", "BITFIELD takes at most %d operations, not %zu",
                        CMD_BATCH_MAX, n);
    bf_op_t *owned = NULL;
    const bf_op_t *ops = a->ops;
    bf_result_t *res = a->results ? a->results : malloc((n ? n : 1) * sizeof(*res));
    if (!ops) {   /* a record's operations (decode_field checked them) */
        ops = owned = malloc((n ? n : 1) * sizeof(*owned));
        for (size_t i = 0; owned && i < n; i++) {
            const uint8_t *p = a->rec + i * BF_REC_OP;
            owned[i] = (bf_op_t){ .opcode = p[0], .overflow = p[1], .width = p[2], .sign = p[3] != 0,
                                  .offset = le64_load(p + 4), .arg = (int64_t)le64_load(p + 12) };
        }
    }
    bool ok = false;
    if (!ops || !res) {
        cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; ro && i < n; i++)
        if (ops[i].opcode != BF_GET) {
            cmd_fail(ctx, CMD_E_BAD_REQUEST, "ops",
                     "BITFIELD_RO only supports the GET subcommand (use /bits/{key}/field to change bits)");
            goto out;
        }
    for (size_t i = 0; !ro && i < n; i++)
        if (ops[i].opcode == BF_GET) {
            if (!cmd_require_read(ctx, "a BITFIELD GET"))
                goto out;
            break;
        }
    size_t need = (size_t)bf_needed_len(ops, n);
    if (need && !bits_room(ctx, a->key, a->klen, "ops", need, false))
        goto out;
    /* only GETs (need == 0): nothing is written, so the read-only bytes are safe */
    cmd_key_t h;
    if (!need) {
        const uint8_t *p;
        size_t len;
        char digits[24];
        if (!open_read(ctx, a->key, a->klen, a->strings, CMD_READ, &h, &p, &len, digits))
            goto out;
        bool wrote;
        bf_exec((uint8_t *)(uintptr_t)p, len, ops, n, res, &wrote);
        cmd_key_close(&h, false);
        ok = true;
        goto out;
    }
    if (!cmd_key_open(ctx, a->key, a->klen, &bits_type, CMD_WRITE, &h))
        goto out;
    bits_t *b = cmd_key_value(&h);
    bool changed = false;
    if (need) {
        if (!b) {
            if (!(b = new_bits(ctx, need)) || !add_bits(&h, b)) {
                cmd_key_close(&h, false);
                goto out;
            }
            changed = true;
        } else {
            changed = bits_len(b) < need;
            if (!bits_grow(b, need)) {
                cmd_key_close(&h, false);
                cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory growing the bit string to %zu bytes", need);
                goto out;
            }
        }
    }
    bool wrote;
    bf_exec(b ? bits_mut(b) : NULL, b ? bits_len(b) : 0, ops, n, res, &wrote);
    cmd_key_close(&h, changed || (need && wrote));
    ok = true;
out:
    free(owned);
    if (res != a->results)
        free(res);
    return ok;
}

static bool run_field(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    return field(ctx, args, false);
}

static bool run_field_ro(cmd_ctx_t *ctx, const void *args, void *res)
{
    (void)res;
    return field(ctx, args, true);
}

static void encode_field(const void *args, wbuf_t *out)
{
    const cmd_bits_field_args_t *a = args;
    put_head(out, a->key, a->klen);
    wbuf_put_u32(out, (uint32_t)a->n);
    if (a->rec) {
        wbuf_put_bytes(out, a->rec, a->n * BF_REC_OP);
        return;
    }
    for (size_t i = 0; i < a->n; i++) {
        const bf_op_t *o = &a->ops[i];
        wbuf_put_u8(out, o->opcode);
        wbuf_put_u8(out, o->overflow);
        wbuf_put_u8(out, o->width);
        wbuf_put_u8(out, o->sign);
        wbuf_put_u64(out, o->offset);
        wbuf_put_i64(out, o->arg);
    }
}

static bool decode_field(rbuf_t *in, void *args, const char **why)
{
    cmd_bits_field_args_t *a = args;
    if (!cmd_get_head(in, REC_VERSION, true, &a->key, &a->klen, why))
        return false;
    uint32_t n = rbuf_u32(in);
    if (in->err || n > CMD_BATCH_MAX)
        return bad(why, "bad count");
    const uint8_t *rec = rbuf_bytes(in, (size_t)n * BF_REC_OP);
    if (!rec)
        return bad(why, "truncated");
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *p = rec + (size_t)i * BF_REC_OP;
        uint8_t opcode = p[0], overflow = p[1], width = p[2], sign = p[3];
        if (opcode > BF_INCRBY || overflow > BF_FAIL || sign > 1 || width < 1 || width > (sign ? 64 : 63) ||
            le64_load(p + 4) > BITS_MAX_OFFSET || (opcode == BF_GET && le64_load(p + 12) != 0))
            return bad(why, "bad operation");
    }
    a->n = n;
    a->ops = NULL;
    a->rec = rec;
    a->results = NULL;
    a->strings = false;
    return true;
}


static bool keys_bitop(const void *args, cmd_key_visit_t visit, void *ud)
{
    const cmd_bits_bitop_args_t *a = args;
    return cmd_batch_keys(a->key, a->klen, &a->sources, visit, ud);
}

const cmd_def_t CMD_SET = { "SET", CMD_ID_SET, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE, run_set, encode_set,
                            decode_set, sizeof(cmd_bits_set_args_t), sizeof(cmd_bits_len_res_t), cmd_keys_first };
const cmd_def_t CMD_GET = { "GET", CMD_ID_GET, 0, CMD_ACCESS_READ, run_get, NULL, NULL, sizeof(cmd_bits_get_args_t),
                            0, cmd_keys_first };
const cmd_def_t CMD_GETRANGE = { "GETRANGE", CMD_ID_GETRANGE, 0, CMD_ACCESS_READ, run_get, NULL, NULL,
                                 sizeof(cmd_bits_get_args_t), 0, cmd_keys_first };
const cmd_def_t CMD_SETBIT = { "SETBIT", CMD_ID_SETBIT, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE, run_setbit,
                               encode_setbit, decode_setbit, sizeof(cmd_bits_setbit_args_t),
                               sizeof(cmd_bits_bit_res_t), cmd_keys_first };
const cmd_def_t CMD_GETBIT = { "GETBIT", CMD_ID_GETBIT, 0, CMD_ACCESS_READ, run_getbit, NULL, NULL,
                               sizeof(cmd_bits_getbit_args_t), sizeof(cmd_bits_bit_res_t), cmd_keys_first };
const cmd_def_t CMD_BITCOUNT = { "BITCOUNT", CMD_ID_BITCOUNT, 0, CMD_ACCESS_READ, run_bitcount, NULL, NULL,
                                 sizeof(cmd_bits_range_args_t), sizeof(cmd_bits_num_res_t), cmd_keys_first };
const cmd_def_t CMD_BITPOS = { "BITPOS", CMD_ID_BITPOS, 0, CMD_ACCESS_READ, run_bitpos, NULL, NULL,
                               sizeof(cmd_bits_range_args_t), sizeof(cmd_bits_num_res_t), cmd_keys_first };
const cmd_def_t CMD_BITOP = { "BITOP", CMD_ID_BITOP, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE, run_bitop,
                              encode_bitop, decode_bitop, sizeof(cmd_bits_bitop_args_t), sizeof(cmd_bits_len_res_t),
                              keys_bitop };
const cmd_def_t CMD_BITFIELD = { "BITFIELD", CMD_ID_BITFIELD, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE, run_field,
                                 encode_field, decode_field, sizeof(cmd_bits_field_args_t), 0, cmd_keys_first };
const cmd_def_t CMD_SETRANGE = { "SETRANGE", CMD_ID_SETRANGE, CMD_F_WRITE | CMD_F_DENYOOM, CMD_ACCESS_WRITE,
                                 run_setrange, encode_setrange, decode_setrange, sizeof(cmd_bits_setrange_args_t),
                                 sizeof(cmd_bits_len_res_t), cmd_keys_first };
const cmd_def_t CMD_BITFIELD_RO = { "BITFIELD_RO", CMD_ID_BITFIELD_RO, 0, CMD_ACCESS_READ, run_field_ro, NULL, NULL,
                                    sizeof(cmd_bits_field_args_t), 0, cmd_keys_first };
