/*
 * guard.h - what keeps a web browser from driving tallyd (CSRF and DNS
 * rebinding), checked before a request reaches its handler.
 *
 * A page on any site can make the browser of a developer send requests to
 * http://127.0.0.1:8080: "simple" cross-origin requests (text/plain, form or
 * multipart bodies, no preflight) that change state, and, after pointing its
 * own DNS name at 127.0.0.1, same-origin requests that read the answers.
 * tallyd serves no pages and needs no cookies, so the rules are strict:
 *
 *   Host      when bound to loopback, the Host header must be an IP literal,
 *             localhost, or a name in --allow-host: 421 Misdirected Request
 *             (code MISDIRECTED_REQUEST) otherwise.  A DNS-rebinding page
 *             always sends its own name.  Not checked on other binds (there
 *             the name clients use is not known; use --tokens).
 *   Origin    a request carrying an Origin header (browsers add it to every
 *             cross-origin fetch and to every POST) gets 403 (FORBIDDEN)
 *             unless the origin is in --allow-origin (default none).
 *   Body type a request with a method other than GET, HEAD and OPTIONS must
 *             send its body as application/json (or application/...+json),
 *             or application/octet-stream for the routes that take bytes
 *             (PUT /uv/{key}, PUT /bits/{key}, POST /activity/{key}/import);
 *             a body without a Content-Type, text/plain, forms and
 *             multipart get 415 (UNSUPPORTED_MEDIA_TYPE).  A browser can
 *             send those three types cross-origin without asking first.
 *   CORS      only with --allow-origin: a preflight (OPTIONS with
 *             Access-Control-Request-Method) from an allowed origin is
 *             answered 204 with the path's methods, and every answer to an
 *             allowed origin carries Access-Control-Allow-Origin (that
 *             origin), Vary: Origin and the RateLimit headers exposed.
 *
 * The gateway hook (/hook/{policy}/..., flagged API_ROUTE_GATEWAY) is
 * exempt: nginx auth_request, Envoy ext_authz and Traefik ForwardAuth pass
 * their client's method, Host, Origin and Content-Type on to it, and it
 * only answers a decision about the counters of the key it is asked for.
 *
 * Refused requests change nothing: the checks run before the journal space
 * is taken and before the handler.  Replayed journal records are never
 * checked (they were accepted when served).
 */
#ifndef TALLY_API_GUARD_H
#define TALLY_API_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include "api/request.h"

typedef struct api_guard api_guard_t;

/* A guard from the --allow-origin and --allow-host lists (comma-separated;
 * origins are scheme://host[:port], "*" allows any) and whether tallyd is
 * bound to a loopback address.  NULL with a message in err when a list is
 * malformed or memory runs out. */
api_guard_t *api_guard_create(const char *origins, const char *hosts, bool loopback, char *err, size_t errlen);
void api_guard_free(api_guard_t *g);

/* Checks a request the router has matched: path_route is the first route
 * whose pattern matches the path (NULL for a 404), match the one that also
 * takes the method (NULL for a 405 or a preflight), allow the path's
 * methods (for a preflight).  Returns true when the request may go on;
 * false when *resp holds the answer (a refusal, or a preflight's 204). */
bool api_guard_request(const api_guard_t *g, const api_req_t *req, const api_route_t *path_route,
                       const api_route_t *match, const char *allow, api_resp_t *resp);
/* Adds the CORS headers to the answer of a request from an allowed origin
 * (nothing for other requests, or for the gateway hook). */
void api_guard_cors(const api_guard_t *g, const api_req_t *req, const api_route_t *path_route, api_resp_t *resp);

#endif
