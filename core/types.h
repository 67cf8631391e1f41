/*
 * types.h - the kinds of value a key can hold, and how each plugs in.
 *
 * Every structure module (throttle state, HLL, Bloom, ...) exports one
 * `const ks_type_t` describing how the keyspace frees it, measures it, and
 * how snapshots encode and decode it.  The on-disk tag of each type is fixed
 * forever: a snapshot written today must load in every later version, so a
 * tag is never renumbered or reused.
 *
 * Adding a type: write core/<name>.{h,c} with the four functions, its tag
 * in the header and `const ks_type_t <name>_type = {` at the start of a
 * line of the .c; the build finds it there (tools/registry.sh) and lists it
 * in types.c's table (HACKING.md, "Adding a data type").
 */
#ifndef TALLY_TYPES_H
#define TALLY_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"

/* On-disk type tags: each type's is in its own header (TYPE_TAG_HLL in
 * core/hll.h...), next to its definition.  A tag is never changed nor
 * reused: tests/unit/test_cmd_registry.c holds every tag ever given. */
enum { TYPE_TAG_MAX = 63 };   /* tags are < 64 */

/* Algorithm generations.  The journal records requests, and replay re-runs
 * them through the handlers; so a request must be replayed by the algorithms
 * that served it, or a value rebuilt from an old journal would differ from
 * the one that was acknowledged.  When an algorithm changes in a way that
 * changes state (a hash, a geometry, an update rule), the generation is
 * bumped: values remember the generation that created them (their encoding
 * says so), journal files record theirs in their version, and replay hands it
 * to the handlers (api_gen()).  A value keeps the rules of its generation for
 * its whole life, so old snapshots and journals answer exactly as before.
 *
 *   1  tally's own layouts (journal version 1)
 *   2  RedisBloom's Bloom/Cuckoo/Top-K/T-Digest rules (issue 18; journal
 *      version 3)
 *
 * The journal versions and which generation each one means are tabled in
 * core/persist_fmt.h.
 */
enum {
    TALLY_GEN_1 = 1,
    TALLY_GEN_2 = 2,
    TALLY_GEN_CURRENT = TALLY_GEN_2
};

typedef struct ks_type {
    uint8_t tag;             /* on-disk tag, one of TYPE_TAG_* */
    const char *name;        /* what /keys reports and WRONGTYPE names: "uv", "bloom", ... */
    const char *noun;        /* the type with its article, in messages: "a Bloom filter" */
    const char *missing;     /* the refusal of a key that must exist ("no bloom filter at this key");
                                NULL: "no such key (create the <name> with PUT /<name>/{key})" */

    /* Frees the value; NULL is a no-op. */
    void (*free)(void *value);

    /* Heap bytes owned by the value (its allocations, not the pointer).
     * Must be O(1): it is called after every write for memory accounting. */
    size_t (*size)(const void *value);

    /* Appends the value's encoding to `out`.  The encoding carries its own
     * version byte so the module can evolve it.  Allocation failure is
     * reported through out->oom. */
    void (*encode)(const void *value, wbuf_t *out);

    /* Builds a value from untrusted bytes.  Every byte is validated: a
     * truncated, oversized or inconsistent input returns NULL with *why set to
     * a static message.  Never crashes, never reads outside [p, p+len). */
    void *(*decode)(const uint8_t *p, size_t len, const char **why);

    /* Inline storage (0: none).  A type whose values are one malloc'd
     * block of inline_size bytes (<= KS_INLINE_MAX), movable by memcpy and
     * owning nothing else, sets it: the keyspace then keeps such a value
     * inside its key's entry, with no allocation of its own.  ks_add and
     * ks_entry_replace_value still take a value built by the type (new,
     * decode, clone): the keyspace copies its bytes into the entry and
     * releases the block with free(); from then on ks_entry_value is the
     * address of the bytes inside the entry (valid while the entry lives),
     * every function here gets that address, and `free` is never called on
     * it.  size(value) of an inline value must be inline_size (or its
     * inline_len, below). */
    uint8_t inline_size;
    /* With inline_size: whether this value may be stored inline (NULL:
     * every value may).  A value that can own more (a sliding log's
     * timestamps) answers false and stays a separate allocation; the answer
     * must not change while the value is stored. */
    bool (*inline_ok)(const void *value);
    /* With inline_size: the bytes this inline value takes, at most
     * inline_size, and what size(value) returns for it (NULL: inline_size).
     * A value of at most 32 bytes gets an entry with an area of its own
     * length rounded to 8, at 8 and so only 8-aligned (a limiter's state
     * without reservations: 8 bytes for GCRA, 16 or 24 for the windows and
     * the token bucket, core/throttle.c); such an entry takes no value that
     * needs more, so a write of one makes a new entry (ks_entry_value_fits). */
    uint8_t (*inline_len)(const void *value);
} ks_type_t;

#define KS_INLINE_MAX 48   /* largest inline_size: a rate limiter's state (core/throttle.c) */

/* RedisBloom's BF/CF.SCANDUMP and LOADCHUNK of a filter type (bloom.h and
 * cuckoo.h describe the bytes), on values as void *, for the code that
 * serves both types alike (api/dump.c, tests/fuzz/fuzz_scandump.c). */
typedef struct ks_dump_ops {
    const ks_type_t *type;
    /* Appends the header chunk; false (nothing written) when this value
     * has no form in RedisBloom's format. */
    bool (*header)(const void *value, wbuf_t *out);
    /* The data chunk at *cursor (>= 1), at most max_len bytes, pointing
     * into the value; advances *cursor; NULL, *len 0, *cursor 0 past the end. */
    const uint8_t *(*chunk)(const void *value, int64_t *cursor, size_t max_len, size_t *len);
    /* A new zeroed value from an untrusted header chunk, its arrays at most
     * max_bytes (0 = no limit); NULL with *why (*nomem: only memory was missing). */
    void *(*load_header)(const uint8_t *p, size_t len, uint64_t max_bytes, bool *nomem, const char **why);
    /* Writes a data chunk where (cursor, len) say; false with *why, nothing written. */
    bool (*load_chunk)(void *value, int64_t cursor, const uint8_t *p, size_t len, const char **why);
    /* The size (type->size) of the value load_header would build from this
     * header, without building it: what a load asks room for; 0 when the
     * header is refused. */
    uint64_t (*header_bytes)(const uint8_t *p, size_t len);
} ks_dump_ops_t;

/* The type with this on-disk tag, or NULL when no such type exists. */
const ks_type_t *ks_type_by_tag(unsigned tag);

/* The type with this name ("uv", "bloom", ...), or NULL. */
const ks_type_t *ks_type_by_name(const char *name);

/* Every type, for tests and tools: how many, and the i-th (NULL past the end). */
size_t ks_type_count(void);
const ks_type_t *ks_type_at(size_t i);

#endif
