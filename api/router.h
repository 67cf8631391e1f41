/*
 * router.h - serving a request: api_dispatch (api/router.c matches it
 * against the routes of api/route.h's families, checks it and runs the
 * handler), and the route table as the service lists it (metrics labels,
 * `tallyd --routes`, the HAProxy family list, the OpenAPI check).
 */
#ifndef TALLY_API_ROUTER_H
#define TALLY_API_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#include "api/request.h"
#include "api/route.h"

/* Routes the request and runs its handler; always fills *resp (initialised
 * here).  api_req_release and api_resp_release (api/request.h) free what
 * it allocated. */
void api_dispatch(api_server_t *srv, api_req_t *req, api_resp_t *resp);

typedef struct api_route_meta {
    const char *pattern;
    const char *method;
    api_access_t access;
    bool binary;                 /* API_ROUTE_BINARY: its body is application/octet-stream */
    const char *command;         /* the operation it runs (cmd/def.h), NULL for an operational route */
} api_route_meta_t;

/* The route table, for metrics labels, `tallyd --routes` and the OpenAPI check. */
size_t api_route_count(void);
api_route_meta_t api_route_meta(size_t i);
/* The families whose second path segment is a key ("throttle|counter|..."
 * in route order: every route /F/{key}...), and the two-segment literal
 * paths of those families whose second segment is not a key
 * ("geo/nearby"): what a proxy routing by the path's key must know
 * (service/haproxy.c).  False when a buffer is too small. */
bool api_keyed_paths(char *families, size_t fcap, char *literals, size_t lcap);
/* True when the path is served while the server is not ready (a route
 * flagged API_ROUTE_OPERATIONAL: /healthz, /readyz, /info, /metrics). */
bool api_path_operational(const char *path, size_t len);

#endif
