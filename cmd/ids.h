/*
 * ids.h - the journal ids of the operations (cmd/def.h): a command record
 * names its operation by this number, so a number is never reused nor
 * changed once a release wrote it - an operation that goes keeps its number
 * retired here.  Read-only operations have ids too (they are never
 * journaled; the numbers name them in tests and in COMMAND's order).
 */
#ifndef TALLY_CMD_IDS_H
#define TALLY_CMD_IDS_H

enum cmd_id {
    CMD_ID_INCRBY = 1,
    CMD_ID_COUNTER_GET = 2,
};

#endif
