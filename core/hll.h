/*
 * hll.h - HyperLogLog that is byte-for-byte Redis's (PFADD/PFCOUNT/PFMERGE).
 *
 * A HyperLogLog estimates the number of distinct items it has seen in a fixed
 * 12 KiB, with a standard error of 1.04/sqrt(m) = 0.81% for m = 16384
 * registers (Flajolet et al., "HyperLogLog: the analysis of a near-optimal
 * cardinality estimation algorithm", 2007).  Each item is hashed with
 * MurmurHash64A (seed 0xadc83b19); the low 14 bits of the hash pick a
 * register; the register keeps the maximum, over its items, of "position of
 * the lowest set bit of the remaining 50 bits" (1..51).
 *
 * The value is kept exactly as Redis stores it in its string, so that
 * `GET /uv/{key}?format=redis` hands out bytes Redis accepts and `PUT` takes
 * bytes read from Redis:
 *
 *   +------+---+-----+----------+---------------------------------+
 *   | HYLL | E | N/U | Cardin.  | registers (dense or sparse)     |
 *   +------+---+-----+----------+---------------------------------+
 *    4 B    1B   3B    8 B LE     dense: 16384 x 6 bits = 12288 B
 *                                 sparse: run-length opcodes
 *
 *   E: 0 = dense, 1 = sparse.  N/U: zero.  Cardinality: the last PFCOUNT,
 *   valid unless the top bit of its last byte is set (every change sets it).
 *
 * Dense registers are packed 6 bits each, least significant bits first:
 * register i lives at bit 6i of the register area.  Sparse opcodes (Redis's
 * hyperloglog.c):
 *
 *   ZERO  00xxxxxx           xxxxxx+1 (1..64) zero registers
 *   XZERO 01xxxxxx yyyyyyyy  14-bit run+1 (1..16384) zero registers
 *   VAL   1vvvvvxx           xx+1 (1..4) registers of value vvvvv+1 (1..32)
 *
 * An empty HLL is one XZERO (18 bytes).  Sparse switches to dense when a
 * register needs a value above 32 or the string would exceed
 * HLL_SPARSE_MAX_BYTES (Redis's hll-sparse-max-bytes); the edits to the
 * opcode stream follow Redis step by step (split the run, then merge equal
 * adjacent VALs), so the bytes are Redis's for the same sequence of adds.
 *
 * Estimator: Otmar Ertl, "New cardinality estimation algorithms for
 * HyperLogLog sketches" (arXiv:1702.01284), as Redis >= 5 computes it from the
 * register histogram, with no bias tables.
 *
 * Memory:   cardinality   encoding   bytes (Redis: same)
 *                     0   sparse         18
 *                   100   sparse      ~ 300
 *                 1 000   sparse     ~ 2 500
 *                10 000   dense      12 304
 *
 * Keyspace encoding (version 1): u8 version | the Redis bytes.
 */
#ifndef TALLY_HLL_H
#define TALLY_HLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/types.h"

/* The on-disk tag of HyperLogLog (/uv) values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_HLL = 3 };

#define HLL_P 14                         /* register index bits */
#define HLL_REGISTERS (1 << HLL_P)       /* 16384 registers */
#define HLL_HDR_SIZE 16                  /* "HYLL" + encoding + 3 unused + 8 cardinality */
#define HLL_DENSE_SIZE (HLL_HDR_SIZE + HLL_REGISTERS * 6 / 8)   /* 12304 */
#define HLL_SPARSE_MAX_BYTES 3000        /* Redis's default hll-sparse-max-bytes */
#define HLL_HASH_SEED 0xadc83b19ULL      /* Redis's MurmurHash64A seed */

typedef struct hll hll_t;

extern const ks_type_t hll_type;

/* A new empty (sparse) HLL, as Redis's PFADD creates it; NULL on allocation
 * failure. */
hll_t *hll_create(void);
void hll_free(hll_t *h);

/* Builds an HLL from Redis's string bytes, validating them completely: the
 * header, the exact dense length, sparse opcodes that cover exactly 16384
 * registers, register values a hash can produce (<= 51), and a valid cached
 * cardinality that matches the registers.  Returns NULL with *why set. */
hll_t *hll_from_redis(const uint8_t *p, size_t len, const char **why);

/* The Redis string bytes (valid until the next change). */
const uint8_t *hll_bytes(const hll_t *h, size_t *len);
bool hll_is_sparse(const hll_t *h);

/* Adds items (PFADD).  Returns 1 if any register changed, 0 if none did,
 * CORE_NOMEM on allocation failure, in which case nothing changed (all memory a batch
 * may need is reserved before the first register is touched). */
int hll_add_batch(hll_t *h, const char *const *items, const size_t *lens, size_t n);
int hll_add(hll_t *h, const void *item, size_t len);

/* Register index and value (1..51) of an item: what PFADD would set. */
void hll_hash_item(const void *item, size_t len, unsigned *index, uint8_t *value);

/* PFCOUNT of one key: the cached cardinality when valid, else computes it
 * and, when `update_cache` is set, stores it in the header as Redis does
 * (*cache_written tells whether the bytes changed). */
uint64_t hll_count(hll_t *h, bool update_cache, bool *cache_written);
/* The estimate without touching the cache. */
uint64_t hll_estimate(const hll_t *h);

/* Register-wise maximum into max[HLL_REGISTERS] (PFCOUNT k1 k2 / PFMERGE). */
void hll_max_into(const hll_t *h, uint8_t *max);
/* Cardinality of raw registers (the union of several HLLs). */
uint64_t hll_count_registers(const uint8_t *regs);

/* PFMERGE into h: sets every register to max(its value, max[i]) the way
 * Redis does (dense first if `to_dense`), and invalidates the cache.
 * Returns CORE_OK, or CORE_NOMEM with h unchanged. */
core_status_t hll_merge_registers(hll_t *h, const uint8_t *max, bool to_dense);

/* True when the header's cached cardinality is valid. */
bool hll_cache_valid(const hll_t *h);

/* Marks the cached cardinality invalid, as PFADD does when it creates the
 * key or changes a register. */
void hll_invalidate_cache(hll_t *h);

/* Heap bytes owned. */
size_t hll_memory(const hll_t *h);
/* The most hll_memory of a value made here may reach, plus the sparse
 * string a promotion frees: what one PFADD or PFMERGE may add at most. */
size_t hll_memory_max(void);

#endif
