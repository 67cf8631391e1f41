/*
 * batch.h - the lists operations take (items, keys, numbers), read the same
 * way whichever of their two forms they arrive in:
 *
 *   - a front-end's arrays: pointers into the request it parsed (the JSON
 *     body's strings, a query's values), nothing copied;
 *   - a command record's bytes: pointers into the record, read back without
 *     allocating anything (replay, and the fuzzers that decode records,
 *     free nothing a decoder returns).
 *
 * An operation walks an item list with cmd_batch_next and reads a number
 * list with cmd_array_*; its encoder writes either form into the record in
 * the record's form, and its decoder reads the record form back (checking
 * every byte: counts, lengths, increments' range, the text of items and
 * keys).
 *
 * Record layouts (little-endian, after the operation's own fields):
 *
 *   items   u32 n | n x ( u32 len | len bytes [| u64 by] )
 *   keys    the same without increments: each 1..KS_KEY_MAX bytes of text
 *   array   u32 n | n x ( u32 | u64 | f64 bits )
 *
 * An item is UTF-8 (what a JSON string holds: NUL allowed); a key is text
 * without NUL, as the key rules say (cmd_key_text_ok).
 */
#ifndef TALLY_CMD_BATCH_H
#define TALLY_CMD_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/codec.h"

#define CMD_BATCH_MAX 10000      /* entries of one list (DESIGN §2: batches of up to 10 000) */

/* An item list: n items, each with an increment (1 unless given). */
typedef struct cmd_batch {
    size_t n;
    const char *const *p;        /* the front-end's form: item i is p[i][0..len[i]) */
    const size_t *len;
    const uint64_t *by;          /* item i's increment; NULL: 1 each */
    const uint8_t *rec;          /* the record's form (p, len and by unused), or NULL */
    bool rec_by;                 /* the record's entries carry an increment */
} cmd_batch_t;

/* A walk over a list, in order. */
typedef struct cmd_batch_iter {
    const cmd_batch_t *it;
    size_t i;
    const uint8_t *at;           /* the record's next entry */
} cmd_batch_iter_t;

static inline cmd_batch_iter_t cmd_batch_begin(const cmd_batch_t *it)
{
    cmd_batch_iter_t x = { it, 0, it->rec };
    return x;
}

/* The next item (its bytes, length and increment): false after the last. */
bool cmd_batch_next(cmd_batch_iter_t *x, const char **p, size_t *len, uint64_t *by);

#define CMD_BATCH_BY 1u          /* the entries carry an increment */
#define CMD_BATCH_KEYS 2u        /* the entries are keys */

/* Writes the list in the record's form (with each increment under
 * CMD_BATCH_BY). */
void cmd_batch_put(wbuf_t *out, const cmd_batch_t *it, unsigned flags);
/* Reads a list written by cmd_batch_put with the same flags: 1 to
 * CMD_BATCH_MAX entries, every increment in [min_by, max_by] (under
 * CMD_BATCH_BY), every item UTF-8 (keys: cmd_key_text_ok).  False for
 * anything else. */
bool cmd_batch_get(rbuf_t *in, cmd_batch_t *it, unsigned flags, uint64_t min_by, uint64_t max_by);

/* Whether bytes are a key the key rules allow: 1..KS_KEY_MAX bytes of
 * UTF-8 text without NUL. */
bool cmd_key_text_ok(const char *p, size_t len);
/* cmd_get_key, and the key's text checked (cmd_key_text_ok). */
bool cmd_get_text_key(rbuf_t *in, const char **key, size_t *len);
/* The head most records start with: the version byte, which must be
 * `version`, and the key (cmd_get_text_key when `text`, else
 * cmd_get_key).  False with *why. */
bool cmd_get_head(rbuf_t *in, unsigned version, bool text, const char **key, size_t *klen, const char **why);
/* The keys of an operation on a destination and a list of sources (BITOP,
 * merges), for its table row's `keys` (cmd/def.h): the destination, then
 * each source. */
bool cmd_batch_keys(const char *key, size_t klen, const cmd_batch_t *sources,
                    bool (*visit)(void *ud, const char *key, size_t len), void *ud);

/* A list of fixed-width numbers: the front-end's native array (uint32_t,
 * int64_t or double, as the operation says), or the record's entries. */
typedef struct cmd_array {
    size_t n;
    const void *v;               /* the front-end's form, or NULL */
    const uint8_t *rec;          /* the record's form, or NULL */
} cmd_array_t;

static inline uint32_t cmd_array_u32(const cmd_array_t *a, size_t i)
{
    return a->v ? ((const uint32_t *)a->v)[i] : le32_load(a->rec + 4 * i);
}
static inline int64_t cmd_array_i64(const cmd_array_t *a, size_t i)
{
    return a->v ? ((const int64_t *)a->v)[i] : (int64_t)le64_load(a->rec + 8 * i);
}
static inline double cmd_array_f64(const cmd_array_t *a, size_t i)
{
    if (a->v)
        return ((const double *)a->v)[i];
    uint64_t bits = le64_load(a->rec + 8 * i);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* Writes the list in the record's form: u32 n, then each number. */
void cmd_array_put_u32(wbuf_t *out, const cmd_array_t *a);
void cmd_array_put_i64(wbuf_t *out, const cmd_array_t *a);
void cmd_array_put_f64(wbuf_t *out, const cmd_array_t *a);
/* Reads a list of `width`-byte numbers (4 or 8) of min_n to max_n entries
 * (their values are the operation's to check).  False for anything else. */
bool cmd_array_get(rbuf_t *in, cmd_array_t *a, unsigned width, size_t min_n, size_t max_n);

/* Reads a record's boolean byte: 0 or 1, false for anything else. */
bool cmd_get_bool(rbuf_t *in, bool *out);

#endif
