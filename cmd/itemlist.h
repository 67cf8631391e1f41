/*
 * itemlist.h - a list of items (or keys, or geo members with their scores)
 * as an operation's argument, in the two forms it arrives in: arrays a
 * front-end parsed (pointers into its request), or the bytes of a journal
 * record, read in place.
 *
 * A front-end hands its arrays over without copying them; a record's list
 * is validated when it is decoded and kept as the record's bytes (a
 * decoder has nowhere to put arrays: cmd/def.h's replay gives it a fixed
 * buffer and no way to free), and an operation that needs arrays asks for
 * them with cmd_items_view, which allocates only for a record's list - on
 * replay, never on the request path.
 *
 * In a record a list is
 *
 *     u32 n | n x ( varint len | len bytes [| u64 num] )
 *
 * with the length in LEB128 (7 bits a byte, low first, minimal): an item of
 * up to 127 bytes costs one byte besides itself, fewer than its JSON text's
 * quotes and comma, so a record never outgrows the body it came from.
 */
#ifndef TALLY_CMD_ITEMLIST_H
#define TALLY_CMD_ITEMLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"

#define CMD_ITEMS_MAX 10000          /* items in one request (DESIGN §2's batch, API_MAX_BATCH) */

typedef struct cmd_items {
    size_t n;
    /* a front-end's arrays (p NULL: the list is a record's) */
    const char *const *p;
    const size_t *len;
    const uint64_t *num;             /* a number per item (geo scores), or NULL */
    /* a record's bytes: the n entries after the count */
    const uint8_t *packed;
    size_t packed_len;
    bool has_num;                    /* the record's entries carry a u64 each */
} cmd_items_t;

/* A list over arrays (num may be NULL). */
static inline cmd_items_t cmd_items_of(const char *const *p, const size_t *len, const uint64_t *num, size_t n)
{
    cmd_items_t l = { n, p, len, num, NULL, 0, num != NULL };
    return l;
}

/* What the list takes in a record, at most. */
uint64_t cmd_items_record_bytes(const cmd_items_t *l);
/* Appends the list in its record form. */
void cmd_items_put(wbuf_t *out, const cmd_items_t *l);

/* What a decoder asks of a record's list. */
#define CMD_ITEMS_KEYS 1u            /* each item is a key: 1..KS_KEY_MAX bytes */
#define CMD_ITEMS_TEXT 2u            /* each item is UTF-8 text without NUL (keys, geo members) */
#define CMD_ITEMS_NUM 4u             /* each entry carries a u64 */
/* Reads a list of min..max entries, validating every byte of it; the list
 * points into the record.  False for anything cmd_items_put did not write. */
bool cmd_items_get(rbuf_t *in, unsigned flags, size_t min, size_t max, cmd_items_t *l);

/* Walks a list in order, either form, without allocating: start the
 * cursor zeroed; false after the last entry.  num (may be NULL) receives
 * the entry's number (0 when the list has none). */
typedef struct cmd_items_iter {
    size_t i;
    rbuf_t in;
} cmd_items_iter_t;
bool cmd_items_next(const cmd_items_t *l, cmd_items_iter_t *it, const char **p, size_t *len, uint64_t *num);

/* The list as arrays: a front-end's own, or a record's unpacked into
 * memory the view owns.  False when out of memory. */
typedef struct cmd_items_view {
    const char *const *p;
    const size_t *len;
    const uint64_t *num;             /* NULL when the list has none */
    void *owned;                     /* what cmd_items_view_free frees */
} cmd_items_view_t;
bool cmd_items_view(const cmd_items_t *l, cmd_items_view_t *v);
void cmd_items_view_free(cmd_items_view_t *v);

/* LEB128 lengths, as the list's entries hold them (other records may use
 * them too): at most 5 bytes for 32 bits; the reader refuses a non-minimal
 * form and anything past 32 bits. */
void cmd_put_varint(wbuf_t *out, uint32_t v);
bool cmd_get_varint(rbuf_t *in, uint32_t *v);

#endif
