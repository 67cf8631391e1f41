/* table.c - every operation of the command table, by family. */
#include "cmd/counter.h"
#include "cmd/table.h"

const cmd_def_t *const cmd_defs[] = {
    &CMD_INCRBY,
    &CMD_COUNTER_GET,
};

const size_t cmd_ndefs = sizeof(cmd_defs) / sizeof(cmd_defs[0]);
