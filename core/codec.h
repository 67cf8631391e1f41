/*
 * codec.h - little-endian byte writer and bounds-checked reader.
 *
 * Every on-disk encoding in tally (snapshot records, journal records, each
 * structure's _encode/_decode) is built from these two helpers, so that the
 * byte order and the bounds checks live in one place.
 *
 *   wbuf_t: a growable output buffer.  A failed allocation sets `oom` and turns
 *           every later put into a no-op, so callers check once at the end.
 *   rbuf_t: a read cursor over untrusted bytes.  Reading past the end sets
 *           `err`, returns zeros, and every later read also returns zeros, so a
 *           decoder may read a whole header and check `err` once.
 *
 * All multi-byte integers are little-endian; doubles are their IEEE-754 bit
 * pattern as a little-endian u64.
 */
#ifndef TALLY_CODEC_H
#define TALLY_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct wbuf {
    uint8_t *data;
    size_t len;
    size_t cap;
    bool oom;       /* an allocation failed; the contents are incomplete */
    bool borrowed;  /* data is the caller's storage (wbuf_on): never freed */
} wbuf_t;

/* An empty buffer needs no allocation: `wbuf_t b = WBUF_INIT;`. */
#define WBUF_INIT { NULL, 0, 0, false, false }

/* A buffer that writes into the caller's storage (a stack array) until it
 * outgrows it, then moves to the heap: a small record costs no allocation.
 * wbuf_free is still required (it frees only what the buffer allocated). */
static inline wbuf_t wbuf_on(void *storage, size_t cap)
{
    wbuf_t b = { (uint8_t *)storage, 0, cap, false, true };
    return b;
}

/* Ensures room for `extra` more bytes. Returns false (and sets oom) on failure. */
bool wbuf_reserve(wbuf_t *b, size_t extra);
void wbuf_put_bytes(wbuf_t *b, const void *p, size_t n);
void wbuf_put_u8(wbuf_t *b, uint8_t v);
void wbuf_put_u16(wbuf_t *b, uint16_t v);
void wbuf_put_u32(wbuf_t *b, uint32_t v);
void wbuf_put_u64(wbuf_t *b, uint64_t v);
void wbuf_put_i64(wbuf_t *b, int64_t v);
void wbuf_put_f64(wbuf_t *b, double v);
/* A length-prefixed (u32) byte string. */
void wbuf_put_blob(wbuf_t *b, const void *p, size_t n);
/* Overwrites 4 bytes at `at` (which must already be written): for lengths
 * known only after the payload. */
void wbuf_patch_u32(wbuf_t *b, size_t at, uint32_t v);
void wbuf_patch_u64(wbuf_t *b, size_t at, uint64_t v);
/* Frees the storage and resets to empty. */
void wbuf_free(wbuf_t *b);
/* Hands the storage to the caller (who frees it) and resets to empty
 * (a borrowed buffer's bytes are copied to the heap: NULL if that fails). */
uint8_t *wbuf_steal(wbuf_t *b, size_t *len);

typedef struct rbuf {
    const uint8_t *p;
    size_t len;
    size_t off;
    bool err;       /* a read went past the end */
} rbuf_t;

static inline rbuf_t rbuf_make(const void *p, size_t len)
{
    rbuf_t r = { (const uint8_t *)p, len, 0, false };
    return r;
}

/* Bytes left to read (0 once err is set). */
static inline size_t rbuf_left(const rbuf_t *r) { return r->err ? 0 : r->len - r->off; }

uint8_t rbuf_u8(rbuf_t *r);
uint16_t rbuf_u16(rbuf_t *r);
uint32_t rbuf_u32(rbuf_t *r);
uint64_t rbuf_u64(rbuf_t *r);
int64_t rbuf_i64(rbuf_t *r);
double rbuf_f64(rbuf_t *r);
/* Returns a pointer to the next n bytes inside the buffer, or NULL (err set). */
const uint8_t *rbuf_bytes(rbuf_t *r, size_t n);
/* Reads a u32 length then that many bytes; *n receives the length. */
const uint8_t *rbuf_blob(rbuf_t *r, size_t *n);
/* True when every byte was consumed and nothing overran: decoders call this
 * last so that trailing garbage is rejected too. */
static inline bool rbuf_done(const rbuf_t *r) { return !r->err && r->off == r->len; }

/* Plain little-endian loads/stores for code that walks raw memory. */
static inline uint32_t le32_load(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t le64_load(const uint8_t *p)
{
    return (uint64_t)le32_load(p) | (uint64_t)le32_load(p + 4) << 32;
}
static inline void le32_store(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void le64_store(uint8_t *p, uint64_t v)
{
    le32_store(p, (uint32_t)v);
    le32_store(p + 4, (uint32_t)(v >> 32));
}

/* True when [p, p+n) is strict UTF-8 (no overlong forms, no surrogates, at
 * most U+10FFFF) without NUL: what keys and geo members must be, so they
 * always come back as JSON strings. */
bool codec_text_ok(const void *p, size_t n);
/* The same rules with NUL bytes allowed: what a JSON string may hold (and
 * jansson accepts). */
bool codec_utf8_ok(const void *p, size_t n);
/* Parses exactly 16 hexadecimal digits (either case) into *out: a digest's
 * Tally-Digest, a lease's id. */
bool codec_hex64_parse(const char *s, size_t len, uint64_t *out);

#endif
