/*
 * slot.h - which of the 16384 cluster slots a key belongs to.
 *
 *   slot = CRC32(routing key) mod 16384
 *
 * CRC32 is the IEEE one (zlib's crc32, gzip's and Ethernet's), because
 * HAProxy computes exactly that with its `crc32` converter, so the proxy in
 * front of a cluster routes a request to the node tallyd itself would name
 * (deploy/cluster/README.md).  The routing key follows Redis Cluster's hash
 * tags: if the key has a '{' and, after it, a '}' with at least one byte
 * between them, the routing key is those bytes (the first '{' and the first
 * '}' after it); otherwise it is the whole key.  So "{tenant42}:logins" and
 * "{tenant42}:signups" share a slot, "{}x" and "x{" hash whole, and
 * "a{b}{c}" hashes "b".
 */
#ifndef TALLY_SLOT_H
#define TALLY_SLOT_H

#include <stddef.h>

#define SLOT_COUNT 16384u

/* The routing key of key[0..len): a pointer into it and its length. */
const char *slot_routing_key(const char *key, size_t len, size_t *rlen);
/* CRC32/IEEE of bytes (zlib's). */
unsigned long slot_crc32(const void *p, size_t len);
/* The slot of a key, 0..SLOT_COUNT-1. */
unsigned slot_of(const char *key, size_t len);

#endif
