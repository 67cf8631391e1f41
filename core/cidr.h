/*
 * cidr.h - sets of IPv4/IPv6 address ranges (CIDR), and the client address
 * behind a chain of proxies.
 *
 * A set is parsed once from text ("10.0.0.0/8, 127.0.0.1, ::1, fd00::/8";
 * an address without /len is a single host) and then only read, so any
 * number of threads may match against it.  IPv4 addresses are kept as
 * IPv4-mapped IPv6 (::ffff:a.b.c.d), so "127.0.0.1/32" also matches a peer
 * that an IPv6 socket reports as ::ffff:127.0.0.1.
 *
 * The client address (cidr_client_addr) follows the rule reverse proxies
 * use (nginx's real_ip_recursive, Envoy's xff_num_trusted_hops): forwarding
 * headers are believed only when they come from a trusted proxy, and the
 * X-Forwarded-For list is read from the right, each trusted proxy having
 * appended the address it saw:
 *
 *     X-Forwarded-For: 6.6.6.6, 203.0.113.7, 10.0.0.2     peer 10.0.0.3
 *                      forged   the client   proxy        proxy
 *
 *   - peer not in the set (or the set empty): the peer, headers ignored;
 *   - else the rightmost X-Forwarded-For entry not in the set (203.0.113.7);
 *     every entry trusted: the leftmost;
 *   - no X-Forwarded-For: X-Real-IP, else the peer.
 * An entry that is not an address ends the walk there: it is what the
 * nearest untrusted hop was reported as, and is returned as written.
 *
 * Pure: parsing uses inet_pton (no I/O, no allocation after cidr_parse).
 */
#ifndef TALLY_CORE_CIDR_H
#define TALLY_CORE_CIDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cidr_range {
    uint8_t addr[16];            /* IPv6, or IPv4-mapped; bits past len are zero */
    unsigned len;                /* prefix length in bits, 0..128 */
} cidr_range_t;

typedef struct cidr_set {
    cidr_range_t *ranges;
    size_t n;
} cidr_set_t;

/* Parses a comma-separated list of addresses and CIDR ranges into *set
 * (owned by the caller: cidr_set_free).  An empty list gives an empty set.
 * On a bad entry returns false, names it in err and leaves *set empty. */
bool cidr_parse(const char *text, cidr_set_t *set, char *err, size_t errlen);
void cidr_set_free(cidr_set_t *set);
/* Parses one address (IPv4 or IPv6, no brackets, no port) into its 16-byte
 * form; false if it is none. */
bool cidr_addr_parse(const char *text, size_t len, uint8_t out[16]);
/* Whether addr (16-byte form) is in one of the set's ranges. */
bool cidr_contains(const cidr_set_t *set, const uint8_t addr[16]);
/* The same for an address given as text; false for text that is no address. */
bool cidr_contains_text(const cidr_set_t *set, const char *text, size_t len);

/* The client address of a request (the rule above).  peer is the socket's
 * address as text; xff and real_ip the headers' values or NULL.  Returns a
 * pointer into one of them and its length in *n (no copy); NULL with *n = 0
 * when there is no peer and nothing trusted to say otherwise. */
const char *cidr_client_addr(const cidr_set_t *trusted, const char *peer, const char *xff, const char *real_ip,
                             size_t *n);

#endif
