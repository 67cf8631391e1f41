/*
 * names.h - how messages name what a key holds ("key holds a counter
 * (counter), not a geo set (geo)") and what a missing key is called, as
 * each type's definition says (ks_type_t's noun and missing), read by the
 * key handle (cmd/keys.h) for every protocol.
 */
#ifndef TALLY_CMD_NAMES_H
#define TALLY_CMD_NAMES_H

#include "core/keyspace.h"

/* "a Bloom filter": the type with its article ("a value" for NULL or a
 * type that names none). */
const char *cmd_type_noun(const ks_type_t *type);
/* The message of a key of `type` that must exist and does not: the
 * type's own ("no bloom filter at this key"), else "no such key (create
 * the <type> with PUT /<type>/{key})"; "no such key" for NULL.  Written
 * into out. */
void cmd_type_missing(const ks_type_t *type, char *out, size_t n);

#endif
