/*
 * admin.h - what the HTTP adapter's operational routes (/info, /metrics,
 * /admin/..., /replication/...: api/ops.c, api/repl.c) need from the
 * service, as callbacks the service fills in (the server's `admin`,
 * cmd/cmd.h).
 */
#ifndef TALLY_API_ADMIN_H
#define TALLY_API_ADMIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/codec.h"

/* What the HTTP adapter's operational routes need from the service, as
 * callbacks, so that api/ never depends on service/ (the command layer's
 * own are cmd_hooks_t). */
struct cmd_repl_call;              /* cmd/repl.h */
struct cmd_repl_result;
struct cmd_repl_status;
struct cmd_persist_status;         /* cmd/persist.h */
struct cmd_snapshot_stats;
typedef struct api_admin_hooks {
    void *ud;
    /* Appends the Prometheus exposition of service metrics. */
    void (*metrics)(void *ud, wbuf_t *out);
    /* Adds the "server" object to /info (what follows it comes from
     * repl_status and persist_status). */
    void (*info)(void *ud, json_t *obj);
    /* Takes a snapshot now: true with *st filled, or false with *err set to
     * a message. */
    bool (*snapshot)(void *ud, struct cmd_snapshot_stats *st, const char **err);
    /* Re-reads the --config policies file; false with a message in err
     * (no file configured, or the file is refused: the old policies stay). */
    bool (*reload)(void *ud, size_t *count, char *err, size_t errlen);
    /* Serves a replication call (cmd/repl.h) on a server thread of its own
     * (it may wait): fills *out, which api/repl.c answers.  NULL: a node
     * without replication. */
    void (*repl_run)(void *ud, const struct cmd_repl_call *call, struct cmd_repl_result *out);
    /* Signs the exact bytes of an answer to a peer's question carrying
     * `nonce` with the group's secret: the signature header's value in out
     * (CMD_REPL_SIG_MAX bytes); false when this node holds no secret. */
    bool (*repl_sign)(void *ud, const char *nonce, const void *body, size_t len, char *out);
    /* This node's replication state for /info; false: none (yet). */
    bool (*repl_status)(void *ud, struct cmd_repl_status *out);
    /* The data directory's state for /info; false: none (--in-memory, or
     * not loaded yet). */
    bool (*persist_status)(void *ud, struct cmd_persist_status *out);
} api_admin_hooks_t;

#endif
