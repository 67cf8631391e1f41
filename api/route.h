/*
 * route.h - the route table's rows and the families that list them: what
 * each api/<family>.c fills in.  api/routes.c lists the families in
 * matching order; the router (api/router.h) serves them.
 */
#ifndef TALLY_API_ROUTE_H
#define TALLY_API_ROUTE_H

#include <stddef.h>

#include "api/request.h"
#include "cmd/access.h"

typedef void (*api_handler_fn)(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* Route flags.  A route changes state (and so needs journal space before
 * its handler runs) when its method is not GET or HEAD, unless it READS;
 * a GET that decides (GET /throttle/{key} records a request) WRITES. */
#define API_ROUTE_READS 1u       /* a POST that leaves the keyspace alone (reads, /admin) */
#define API_ROUTE_WRITES 2u      /* a GET that changes state */
#define API_ROUTE_OPERATIONAL 4u /* served while loading or shutting down (probes, metrics) */
#define API_ROUTE_BINARY 8u      /* its body is bytes: Content-Type application/octet-stream (api/guard.h) */
#define API_ROUTE_GATEWAY 16u    /* the gateway hook: a gateway's client headers pass through (api/guard.h) */
#define API_ROUTE_KEY_TEMPLATE 32u /* the path's {key} may be a policy's input, not the key itself
                                    (?policy=): its token prefixes are checked on the key resolved */

/* Who may call a route (api/auth.h): every route names one, so a route
 * added without thinking about access fails to compile (-Wextra's missing
 * initializer) and tests/unit/test_auth.c's check of the table. */
typedef cmd_access_t api_access_t;   /* the classes of cmd/access.h */
#define API_ACCESS_UNSET CMD_ACCESS_UNSET
#define API_ACCESS_PUBLIC CMD_ACCESS_PUBLIC
#define API_ACCESS_METRICS CMD_ACCESS_METRICS
#define API_ACCESS_TOKEN CMD_ACCESS_TOKEN
#define API_ACCESS_READ CMD_ACCESS_READ
#define API_ACCESS_WRITE CMD_ACCESS_WRITE
#define API_ACCESS_RATELIMIT CMD_ACCESS_RATELIMIT
#define API_ACCESS_ADMIN CMD_ACCESS_ADMIN
#define API_ACCESS_REPLICATE CMD_ACCESS_REPLICATE
#define API_ACCESS__COUNT CMD_ACCESS__COUNT

/* One row: {method, pattern, handler, flags, access}.  A pattern segment `{name}`
 * matches one path segment (percent-decoded, read with api_path_param); a
 * last segment `{name...}` matches the rest of the path, possibly empty. */
struct api_route {
    api_method_t method;
    const char *pattern;
    api_handler_fn handler;
    unsigned flags;
    api_access_t access;
    /* The operation of the command table the route runs (cmd/def.h), or
     * NULL: the route's access class and whether it changes state are the
     * operation's then (the router takes them from it), so a row of such a
     * route names neither - API_BY(CMD_X) in place of the access class. */
    const struct cmd_def *cmd;
};

/* The last two members of a route running an operation of the table. */
#define API_BY(def) API_ACCESS_UNSET, &(def)

/* What each api/<family>.c exports: its routes (handlers static behind
 * them).  api/routes.c lists the families in matching order; how messages
 * name the types their keys hold is the command layer's (cmd/names.h). */
typedef struct api_family {
    const char *name;
    const api_route_t *routes;
    size_t nroutes;
} api_family_t;

/* Defines api_<name>_family from the file's `routes` table. */
#define API_FAMILY(name) const api_family_t api_##name##_family = { #name, routes, sizeof(routes) / sizeof(routes[0]) }

extern const api_family_t *const api_families[];
extern const size_t api_nfamilies;

#endif
