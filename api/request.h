/*
 * request.h - a request and its answer as the HTTP adapter sees them,
 * independent of the HTTP server.
 *
 * service/ turns each HTTP request into an api_req_t and calls
 * api_dispatch() (api/router.h); the router matches the path against the
 * one route table (api/route.h, api/routes.c), decodes the path segments
 * and query string, and calls the route's handler, which reads and
 * validates its parameters (api/params.h), runs the operation in the
 * request's context (req->ctx: cmd_call, cmd/def.h) and fills an
 * api_resp_t (api/respond.h).  Journal replay builds api_req_t from the
 * journal and runs the very same handlers, so a change is applied by
 * exactly one piece of code whether it is served live or replayed.
 *
 * Handler contract:
 *   - validate everything before touching state: a failed request changes
 *     nothing;
 *   - change state only through the command layer in the request's
 *     context, which locks, checks, applies and journals (cmd/cmd.h), and
 *     answer its refusal with api_cmd_answered();
 *   - set the response with api_json()/api_error() (api/respond.h).
 */
#ifndef TALLY_API_REQUEST_H
#define TALLY_API_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/access.h"
#include "cmd/cmd.h"
#include "cmd/journal.h"

#define API_MAX_SEGMENTS 16      /* deepest path any route has, plus slack */
#define API_MAX_PARAMS 10000     /* query parameters per request (batches of item=) */
#define API_INLINE_PARAMS 16     /* query parameters decoded without an allocation */
#define API_INLINE_ARENA 1024    /* decoded path and query bytes without an allocation */
#define API_MAX_HEADERS 12       /* response headers a handler may add */
#define API_MAX_BATCH 10000      /* items per request (DESIGN §2) */

typedef enum api_method {
    API_GET = 1,
    API_HEAD,
    API_POST,
    API_PUT,
    API_DELETE,
    API_PATCH,
    API_OPTIONS,
    API_OTHER,
    API_ANY = 0xff               /* route method: matches every method */
} api_method_t;

typedef struct api_param {
    char *name;
    char *value;                 /* percent-decoded, NUL-terminated */
    size_t vlen;
} api_param_t;

typedef struct api_route api_route_t;       /* api/route.h */
typedef struct cmd_server api_server_t;     /* the command layer's server (cmd/cmd.h) */
typedef cmd_limits_t api_limits_t;          /* its limits per request (cmd/cmd.h) */
typedef struct api_resp api_resp_t;
typedef cmd_tokens_t api_tokens_t;          /* a token set (cmd/access.h; api/auth.h reads one) */

#define API_TOKEN_NAME_MAX CMD_TOKEN_NAME_MAX

typedef struct api_req {
    /* Filled by the caller of api_dispatch. */
    api_method_t method;
    const char *path;            /* raw path, still percent-encoded */
    size_t path_len;
    const char *query;           /* raw query string without '?', may be NULL */
    size_t query_len;
    const char *ctype;           /* Content-Type header or NULL */
    const uint8_t *body;
    size_t body_len;
    /* Request headers (NULL-safe): returns the value or NULL. */
    const char *(*header)(void *hctx, const char *name);
    void *hctx;
    /* The client's address as text, or NULL; computed when asked (only {ip}
     * rate-limit keys need it): the peer's, or what a --trusted-proxies peer
     * forwards (core/cidr.h).  NULL-safe like header. */
    const char *(*client_ip)(void *hctx);
    int64_t now_ns;              /* the time this request is served at */
    bool replay;                 /* re-executed from the journal */
    bool loading;                /* the keyspace is being replaced (a replica's full resynchronisation):
                                    the router answers, no handler runs (api_dispatch) */
    unsigned gen;                /* algorithm generation of a replayed record (core/types.h);
                                    0 = the current one (the request's context takes it: cmd_ctx_init) */

    /* Filled by the router. */
    const api_route_t *route;
    const struct api_pattern *pattern;   /* route's pattern, split (api/pattern.h) */
    cmd_ctx_t *ctx;              /* the request's execution (cmd/cmd.h): its token, journal, pre-images */
    api_tokens_t *tokens;        /* the token set ctx->token belongs to, held until api_dispatch returns */
    char *seg[API_MAX_SEGMENTS]; /* decoded path segments */
    size_t seg_len[API_MAX_SEGMENTS];
    int nseg;
    api_param_t *params;         /* decoded query parameters */
    int nparams;
    json_t *json;                /* parsed body, owned by the request */
    char *arena;                 /* decoded segments and parameters live here */
    int params_cap;              /* room at params */
    /* Room for a typical request's decoding, so that it allocates nothing:
     * the router uses these when they suffice and allocates otherwise
     * (api_req_release frees only that).  Last, and not cleared by
     * api_req_init. */
    api_param_t params_inline[API_INLINE_PARAMS];
    char arena_inline[API_INLINE_ARENA];
} api_req_t;


#define API_VIOLATED_MAX 240

typedef struct api_header {
    const char *name;            /* static string */
    char value[192];
} api_header_t;

struct api_resp {
    int status;
    const char *ctype;           /* NULL = application/json */
    char *body;                  /* malloc'd, owned by the response */
    size_t len;
    api_header_t headers[API_MAX_HEADERS];
    int nheaders;
    uint64_t journal_lsn;        /* wait for this journal position before answering (the context's) */
    /* Slow work (a snapshot) is not done in the HTTP worker: the handler sets
     * `deferred`, and the server runs it on another thread, which fills in
     * the response, and answers when it returns. */
    void (*deferred)(api_server_t *srv, api_resp_t *resp);
    void *deferred_arg;          /* what the handler leaves for `deferred` (it frees it) */
    int route_index;             /* for metrics: index in the route table, -1 none */
    uint64_t repl_pos;           /* the replicas' stream position the answer waits for (0: none) */
    char token_name[API_TOKEN_NAME_MAX + 1];   /* the caller's token, for the access log; "" none */
    /* A refusal's limits for the access log: "policy/limit" names joined by
     * ',' (api/limiter.c); "" none. */
    char violated[API_VIOLATED_MAX];
};

/* An empty request (no query, body or headers) for method and path, served
 * at now_ns; the caller sets the rest it has. */
void api_req_init(api_req_t *req, api_method_t method, const char *path, size_t path_len, int64_t now_ns);
/* An empty response (status 0, no body, no headers, nothing deferred). */
void api_resp_init(api_resp_t *resp);
/* Frees what api_dispatch allocated in req and resp. */
void api_req_release(api_req_t *req);
void api_resp_release(api_resp_t *resp);

const char *api_method_name(api_method_t m);
api_method_t api_method_parse(const char *s);

static inline int64_t api_now_ms(const api_req_t *req) { return req->now_ns / 1000000; }

/* Percent-encodes a key as one path segment (cmd/journal.h). */
#define api_escape_segment cmd_escape_segment

#endif
