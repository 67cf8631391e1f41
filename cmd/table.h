/*
 * table.h - the table's rows (cmd/def.h reads them): one array of every
 * operation, generated from their definitions (table.c).
 */
#ifndef TALLY_CMD_TABLE_H
#define TALLY_CMD_TABLE_H

#include <stddef.h>

#include "cmd/def.h"

extern const cmd_def_t *const cmd_defs[];
extern const size_t cmd_ndefs;

#endif
