/*
 * table.c - every operation of the command table.  The list is generated
 * at build time (tools/registry.sh) from the definitions themselves: an
 * operation is in the table because its file defines it (`const cmd_def_t
 * CMD_NAME = {` at the start of a line, or a `..._DEF(CMD_NAME, ...)` macro),
 * so a new family of operations touches no file but its own.  Order is the
 * files' byte order, then each file's; nothing depends on it (operations
 * are found by id and by name).
 */
#include "cmd/table.h"

#define REGISTRY(name) extern const cmd_def_t name;
#include "cmd_defs.inc"
#undef REGISTRY

const cmd_def_t *const cmd_defs[] = {
#define REGISTRY(name) &name,
#include "cmd_defs.inc"
#undef REGISTRY
};

const size_t cmd_ndefs = sizeof(cmd_defs) / sizeof(cmd_defs[0]);
