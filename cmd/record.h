/*
 * record.h - the fields of command records (core/codec) that every
 * operation's record uses, below the table (cmd/def.h) and the journal so
 * that both may write them.
 */
#ifndef TALLY_CMD_RECORD_H
#define TALLY_CMD_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#include "core/codec.h"

/* A key: u32 length | bytes (1 .. KS_KEY_MAX). */
void cmd_put_key(wbuf_t *out, const char *key, size_t len);
bool cmd_get_key(rbuf_t *in, const char **key, size_t *len);

#endif
