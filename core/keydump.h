/*
 * keydump.h - the portable encoding of one key's value: what
 * GET /keys/{key}/dump answers and PUT /keys/{key}/restore accepts (Redis's
 * DUMP / RESTORE payload is the model).  Pure bytes, no I/O.
 *
 *   +----------+---------+-----+---+--------+------+-------+--------+
 *   | TALLYDMP | version | tag | 0 | ttl_ms | vlen | value | xxh64  |
 *   |  8 bytes |   u16   | u8  |u8 |  i64   | u64  |       |  u64   |
 *   +----------+---------+-----+---+--------+------+-------+--------+
 *
 *   version  KEYDUMP_VERSION (1); a reader refuses any other.
 *   tag      the value's type (core/types.h TYPE_TAG_*, fixed forever).
 *   ttl_ms   the remaining time to live when dumped, -1 for none: relative,
 *            so a dump moves between machines whose clocks differ.
 *   value    the type's own encoding - the bytes a snapshot record holds
 *            (ks_type_t encode/decode), carrying its own version and
 *            algorithm generation, so the value restored answers exactly as
 *            the one dumped.
 *   xxh64    XXH64 (seed 0) of every byte before it: a flipped byte anywhere
 *            is refused before the value's decoder sees it.
 *
 * The bytes of a restore are untrusted: keydump_decode checks the frame and
 * the checksum, then hands the value to the same decoder snapshots use
 * (fuzzed by tests/fuzz/fuzz_keydump), and refuses trailing bytes.
 */
#ifndef TALLY_KEYDUMP_H
#define TALLY_KEYDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"
#include "core/types.h"

#define KEYDUMP_MAGIC "TALLYDMP"
#define KEYDUMP_VERSION 1
#define KEYDUMP_HEADER_SIZE 28   /* magic, version, tag, pad, ttl_ms, vlen */
#define KEYDUMP_TRAILER_SIZE 8
#define KEYDUMP_NO_TTL (-1)

/* Appends the dump of `value` (of `type`) with `ttl_ms` remaining (-1: none).
 * Allocation failure is reported through out->oom. */
void keydump_encode(const ks_type_t *type, const void *value, int64_t ttl_ms, wbuf_t *out);

/* Whether untrusted bytes are framed as a dump of this version with a
 * checksum that matches (the check of Redis's RESTORE "payload version or
 * checksum"); keydump_decode checks the rest. */
bool keydump_verify(const uint8_t *p, size_t len);

/* Decodes a dump from untrusted bytes: on success *type, *value (owned by the
 * caller) and *ttl_ms (-1 none, else >= 1); NULL value with *why (a static
 * message) when anything is wrong.  Never reads outside [p, p+len). */
bool keydump_decode(const uint8_t *p, size_t len, const ks_type_t **type, void **value, int64_t *ttl_ms,
                    const char **why);

/* A digest of a value's state: XXH64 over its tag, absolute expiry and
 * encoding.  Two values with the same digest encode alike; the resharding
 * tool deletes a moved key only if its digest is still the one it copied
 * (DELETE /keys/{key}?digest=). */
uint64_t keydump_digest(const ks_type_t *type, const void *value, int64_t expire_ms, bool *oom);

/* Parses the 16 hex digits of a digest as Tally-Digest writes it. */
bool keydump_digest_parse(const char *s, size_t len, uint64_t *out);

#endif
