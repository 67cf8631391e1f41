/*
 * admit.h - admission: the checks a request passes before it is parsed
 * further and its operation runs, made here once and in this order for
 * every protocol (cmd/cmd.h draws the whole order):
 *
 *     access class      the caller's token holds a scope the request's
 *                       class needs (cmd/access.h)
 *     key prefixes      the key the request names up front is inside the
 *                       token's prefixes
 *     cluster slot      that key's slot is served here (or the request is
 *                       told where: MOVED, ASK, TRYAGAIN; cmd/cluster.h)
 *     loading           nothing is served while a replica replaces its
 *                       keyspace (a change still learns its primary)
 *     writable          a change needs a primary that is not fenced and a
 *                       disk that takes its record (cmd_writable)
 *     journal space     a change secures its record's room first
 *                       (cmd/journal.h), and with --min-replicas-ack keeps
 *                       its keys' pre-images (cmd/undo.h)
 *
 * A front-end identifies the caller (ctx->token, its protocol's business:
 * a bearer header, AUTH) and says what the request is (cmd_admission_t);
 * what happens after admission - memory, locks, the run, the journal, the
 * replicas - is the operation's own path (cmd/def.h, cmd/keys.h), which
 * checks every further key it opens the same way.  A key the request names
 * only after parsing (a policy's template, a body's list) is checked when
 * its handle opens it.
 */
#ifndef TALLY_CMD_ADMIT_H
#define TALLY_CMD_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/access.h"
#include "cmd/cmd.h"

typedef struct cmd_admission {
    cmd_access_t access;         /* the class the request needs */
    const char *key;             /* the key it names up front (a path's {key}); NULL: none */
    size_t klen;
    bool writes;                 /* it may change state */
    bool loading;                /* the keyspace is being replaced (a replica's full resynchronisation) */
    uint64_t journal_bytes;      /* for a change: the journal space its record may take */
} cmd_admission_t;

/* Admits the request in ctx: true when every check passed (a change then
 * holds its journal space until cmd_ctx_end); false with ctx->err set and
 * nothing changed. */
bool cmd_admit(cmd_ctx_t *ctx, const cmd_admission_t *a);

#endif
