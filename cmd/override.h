/*
 * override.h - live per-tenant overrides of a policy's limits, as
 * operations (the value: core/override.h).
 *
 * A policy's overrides are one value at the key OVERRIDE_KEY_PREFIX +
 * policy name ("_tally:overrides:api"): state, not configuration - kept in
 * snapshots, journaled, replicated - and found by the decisions through
 * cmd_override_lookup.  The operations store and return the limits as the
 * front-end wrote them (the policies file's form, checked before); they
 * judge only the bounds.
 *
 *   OVERRIDE.SET   sets a tenant's limits (creating the value); refuses a
 *                  new tenant beyond OVERRIDE_MAX_ENTRIES.
 *   OVERRIDE.DEL   removes a tenant's entry (the key goes with its last).
 *   OVERRIDE.GET   a tenant's limits.
 *   OVERRIDE.LIST  up to `count` entries after the tenant `after`, in
 *                  tenant order, and whether more follow.
 */
#ifndef TALLY_CMD_OVERRIDE_H
#define TALLY_CMD_OVERRIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/def.h"
#include "core/override.h"

enum {
    CMD_ID_OVERRIDE_SET = 900,
    CMD_ID_OVERRIDE_DEL = 901,
    CMD_ID_OVERRIDE_GET = 902,
    CMD_ID_OVERRIDE_LIST = 903,
};

#define OVERRIDE_KEY_PREFIX "_tally:overrides:"
#define OVERRIDE_LIST_MAX 1000    /* entries one OVERRIDE.LIST answers at most */

/* The key of a policy's overrides into out (room for sizeof(OVERRIDE_KEY_PREFIX) + name); its length. */
size_t cmd_override_key(const char *policy, char *out, size_t cap);

typedef struct cmd_override_set_args {
    const char *key;             /* cmd_override_key */
    size_t klen;
    const char *tenant;
    size_t tlen;                 /* 1 .. OVERRIDE_TENANT_MAX */
    const char *limits;
    size_t llen;                 /* 1 .. OVERRIDE_LIMITS_MAX */
} cmd_override_set_args_t;

typedef struct cmd_override_key_args {   /* DEL and GET */
    const char *key;
    size_t klen;
    const char *tenant;
    size_t tlen;
    char *out;                   /* GET: OVERRIDE_LIMITS_MAX bytes for the limits */
} cmd_override_key_args_t;

typedef struct cmd_override_res {
    bool existed;                /* SET: replaced an entry; DEL, GET: there was one */
    size_t llen;                 /* GET: the limits' length in out */
    size_t count;                /* entries after the operation */
} cmd_override_res_t;

typedef void (*cmd_override_each_fn)(void *ud, const char *tenant, size_t tlen, const char *limits, size_t llen);

typedef struct cmd_override_list_args {
    const char *key;
    size_t klen;
    const char *after;           /* NULL: from the first */
    size_t alen;
    size_t count;                /* 1 .. OVERRIDE_LIST_MAX */
    cmd_override_each_fn each;   /* called under the key's lock */
    void *ud;
} cmd_override_list_args_t;

typedef struct cmd_override_list_res {
    size_t total;                /* entries of the policy */
    bool more;                   /* entries follow the last given */
} cmd_override_list_res_t;

extern const cmd_def_t CMD_OVERRIDE_SET, CMD_OVERRIDE_DEL, CMD_OVERRIDE_GET, CMD_OVERRIDE_LIST;

/* What a decision asks: the parameters of `tenant`'s live override under
 * `policy`, its text read by parse (the front-end's) the first time only
 * (core/override.h, override_map_limits): 1 with *out, 0 when there is
 * none, -1 when its text does not read.  Internal, like reading
 * configuration: no token prefix or slot check (a key another cluster node
 * owns is simply not found here), and no lock at all while no override
 * exists on this node. */
int cmd_override_lookup(cmd_server_t *srv, const char *policy, const char *tenant, size_t tlen,
                        override_parse_fn parse, void *ud, throttle_params_t *out, int64_t now_ms);

#endif
