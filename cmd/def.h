/*
 * def.h - the command table: every operation described once, the role
 * Redis's command table (src/commands/ *.json -> commands.def) plays.
 *
 * A row names an operation (Redis's name where Redis has one: "INCRBY",
 * "PFADD", "BF.MADD"), the journal id that names it in a record forever,
 * its flags and access class, the functions that run it on typed
 * arguments and write and read its journal record, and where its keys are
 * in those arguments.  Everything that must
 * know about operations reads the table: a front-end finds the operation a
 * request names and the access it needs, the journal writes and replays the
 * operation's record, `tallyd --routes` and (next) the Redis protocol's
 * COMMAND list them.
 *
 * Running one (cmd_call): the front-end admitted the request (its access
 * class, the node writable, journal space for a change: the HTTP router
 * does it for every route), parsed its arguments, and calls cmd_call with
 * them.  For a change, the record is encoded from the arguments before the
 * operation runs and its journal space secured; the operation reaches its
 * keys through the key handle (cmd/keys.h: prefixes, slots, locks, types),
 * and the handle journals the record, under the keys' locks, when state
 * changed.  Replay decodes the record and calls the same run function with
 * ctx->replay set: one piece of code applies a change, live or replayed.
 *
 * An operation's arguments must be all its effect depends on, with the
 * time and the state: what a front-end resolves from its configuration
 * (a policy's parameters and key) is resolved into the arguments, so that
 * replay needs no configuration.
 */
#ifndef TALLY_CMD_DEF_H
#define TALLY_CMD_DEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/access.h"
#include "cmd/cmd.h"
#include "cmd/record.h"
#include "core/codec.h"

#define CMD_F_WRITE 1u           /* may change state: needs a writable node and journal space; journaled */
#define CMD_F_DENYOOM 2u         /* may grow memory */
#define CMD_F_STATE_KEYS 4u      /* also reaches keys that state names, not its arguments: a time series'
                                    compaction rules, the series a label filter selects */

/* Where an operation's keys are: its `keys` lists those its typed arguments
 * name, calling visit(ud, key, len) for each in the order errors about them
 * are reported (false from visit stops the walk, and keys returns false).
 * NULL for an operation that names none (SCAN by a prefix, TS.MGET by
 * labels); cmd_keys_first for the many whose arguments begin with `const
 * char *key; size_t klen;`.  What a front-end routes and checks by before
 * it runs an operation (Redis's key specs; the Redis protocol's COMMAND
 * GETKEYS), and what debug builds hold every key an operation opens to. */
typedef bool (*cmd_key_visit_t)(void *ud, const char *key, size_t len);
typedef bool (*cmd_keys_fn)(const void *args, cmd_key_visit_t visit, void *ud);
bool cmd_keys_first(const void *args, cmd_key_visit_t visit, void *ud);

struct cmd_def {
    const char *name;
    uint16_t id;                 /* its journal records' op id, CMD_ID_* of the family's header: < 1024, never
                                    changed nor reused (tests/unit/test_cmd_registry.c holds every id given) */
    unsigned flags;              /* CMD_F_* */
    cmd_access_t access;
    /* The operation: true with *res filled, false with ctx->err set (and
     * nothing changed). */
    bool (*run)(cmd_ctx_t *ctx, const void *args, void *res);
    /* A change's record: its arguments as replay needs them (a version byte
     * first), and their reading back from a record's bytes (pointers into
     * them, which outlive the call); false with *why for bytes no tally
     * wrote.  NULL for an operation that changes nothing. */
    void (*encode)(const void *args, wbuf_t *out);
    bool (*decode)(rbuf_t *in, void *args, const char **why);
    size_t args_size, res_size;  /* what replay allocates for them */
    cmd_keys_fn keys;            /* where its keys are (above) */
};

/* The largest arguments and result any operation has (replay's buffers). */
#define CMD_ARGS_MAX 512
#define CMD_RES_MAX 512

/* Runs an operation on its parsed arguments in an admitted context: for a
 * change, encodes its record and secures the journal space it needs first
 * (UNAVAILABLE when the disk cannot take it).  True with *res filled; false
 * with ctx->err set. */
bool cmd_call(cmd_ctx_t *ctx, const cmd_def_t *def, const void *args, void *res);

/* Replays a command record (kind JOURNAL_REC_COMMAND) of a journal or a
 * primary's stream: the operation named by its id, its arguments decoded,
 * run at the record's time with the rules of generation `gen`.  False with
 * err set when the record cannot be read or the operation refused it. */
bool cmd_replay(cmd_server_t *srv, const journal_req_t *rec, unsigned gen, cmd_err_t *err);

/* Whether def's arguments args name the key (its `keys`). */
bool cmd_def_names_key(const cmd_def_t *def, const void *args, const char *key, size_t len);

/* The table: every operation, by journal id and by name (NULL: none). */
const cmd_def_t *cmd_def_by_id(uint16_t id);
const cmd_def_t *cmd_def_by_name(const char *name, size_t len);
size_t cmd_def_count(void);
const cmd_def_t *cmd_def_at(size_t i);


#endif
