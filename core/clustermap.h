/*
 * clustermap.h - the cluster map: which node owns each of the 16384 slots
 * (core/slot.h), and which slots are moving.  The text form is the
 * --cluster FILE, the same on every node and read by the HAProxy config
 * generator (deploy/cluster/README.md):
 *
 *   # comments and blank lines are ignored
 *   epoch 7                          the map's version: a node never takes an older one
 *   node a 10.0.0.1:8080             name (letters, digits, . _ -) and the host:port clients use
 *   node b 10.0.0.2:8080 resp=10.0.0.2:6380
 *                                    optionally the node's Redis port (--resp-port),
 *                                    which CLUSTER SLOTS, MOVED and ASK name
 *   slots a 0-8191                   a range (or one slot) owned by a node
 *   slots b 8192-16383
 *   migrate 100-199 a b              slots 100..199 are moving from a (their owner
 *                                    until the map flips) to b
 *
 * Every slot is owned by exactly one node; a migrating range's source owns
 * it.  The parser refuses anything else, naming the line.  Pure text in,
 * table out: no I/O here.
 */
#ifndef TALLY_CLUSTERMAP_H
#define TALLY_CLUSTERMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"
#include "core/slot.h"

#define CMAP_MAX_NODES 1024
#define CMAP_NAME_MAX 63
#define CMAP_ADDR_MAX 255

typedef struct cmap_node {
    char name[CMAP_NAME_MAX + 1];
    char addr[CMAP_ADDR_MAX + 1];
    char resp[CMAP_ADDR_MAX + 1];   /* the Redis port's host:port ("" none given) */
} cmap_node_t;

typedef struct cmap {
    uint64_t epoch;
    size_t nnodes;
    cmap_node_t *nodes;
    uint16_t owner[SLOT_COUNT];          /* index into nodes */
    int16_t migrating_to[SLOT_COUNT];    /* index into nodes, -1: not moving */
    char *text;                          /* the text it was parsed from (NUL-terminated) */
    size_t text_len;
} cmap_t;

/* Parses a map; NULL with a message naming the line in err. */
cmap_t *cmap_parse(const char *text, size_t len, char *err, size_t errlen);
void cmap_free(cmap_t *m);
/* Appends the map's text form (epoch, nodes, slot ranges, migrating
 * ranges: what cmap_parse reads back) to out. */
void cmap_format(const cmap_t *m, wbuf_t *out);
/* The HAProxy backend of a node is this prefix and its name. */
#define CMAP_HAPROXY_BACKEND "tally_"
/* Appends HAProxy's slot map (service/haproxy.h): one "LO:HI tally_NAME"
 * line per run of slots with one owner (a migrating range stays its
 * source's until the map flips). */
void cmap_format_haproxy(const cmap_t *m, wbuf_t *out);
/* The last slot of the run that starts at slot s: the slots after it with
 * the same owner (and, when `migration`, the same migration target). */
unsigned cmap_run_end(const cmap_t *m, unsigned s, bool migration);
/* The index of the node called name, or -1. */
int cmap_node_index(const cmap_t *m, const char *name);

#endif
