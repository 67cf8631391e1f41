/*
 * slot.h - which of the 16384 cluster slots a key belongs to.
 *
 *   slot = CRC16(routing key) mod 16384
 *
 * CRC16 is CRC-16/XMODEM, Redis Cluster's: a Redis cluster client (redis-cli
 * -c, redis-py's RedisCluster, ...) computes the same slot and sends the
 * command to the node tally names for it, and the HAProxy configuration in
 * front of a cluster computes it in a small Lua converter
 * (deploy/cluster/README.md).  One function for every protocol: HTTP and
 * RESP share the slot map.  (It was CRC32/IEEE before; a cluster's
 * keys placed by that function must be moved: see the README's "Upgrading
 * a cluster across the slot change".)  The routing key follows Redis Cluster's hash
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
/* CRC-16/XMODEM of bytes. */
unsigned slot_crc16(const void *p, size_t len);
/* The slot of a key, 0..SLOT_COUNT-1. */
unsigned slot_of(const char *key, size_t len);

#endif
