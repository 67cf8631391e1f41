/*
 * api.h - HTTP semantics on top of core/, independent of the HTTP server.
 *
 * service/ turns each HTTP request into an api_req_t and calls
 * api_dispatch(); the router matches the path against the one route table
 * (api/routes.c), decodes the path segments and query string, and calls the
 * route's handler, which parses and validates, calls core under the shard
 * lock, and fills an api_resp_t.  Journal replay builds api_req_t from the
 * journal and runs the very same handlers, so a change is applied by exactly
 * one piece of code whether it is served live or replayed.
 *
 * Handler contract:
 *   - validate everything before touching state: a failed request changes
 *     nothing;
 *   - reach keys through the key handle (api_key_open / api_keys_lock, then
 *     api_key_close), which locks, finds, type-checks, prepares writes, and
 *     on close re-measures and journals the request when (and only when)
 *     state changed, still under the lock;
 *   - set the response with api_json()/api_error().
 */
#ifndef TALLY_API_H
#define TALLY_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"
#include "core/keyspace.h"
#include "core/persist_fmt.h"
#include "core/status.h"
#include "cmd/access.h"
#include "cmd/cmd.h"
#include "cmd/err.h"
#include "cmd/journal.h"
#include "cmd/keys.h"
#include "cmd/room.h"

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

/* The error codes are the command layer's (cmd/err.h); the HTTP status of
 * each comes from one table (api/respond.c). */
typedef cmd_code_t api_code_t;
#define API_E_BAD_REQUEST CMD_E_BAD_REQUEST
#define API_E_UNAUTHORIZED CMD_E_UNAUTHORIZED
#define API_E_FORBIDDEN CMD_E_FORBIDDEN
#define API_E_NOT_FOUND CMD_E_NOT_FOUND
#define API_E_METHOD_NOT_ALLOWED CMD_E_METHOD_NOT_ALLOWED
#define API_E_WRONGTYPE CMD_E_WRONGTYPE
#define API_E_EXISTS CMD_E_EXISTS
#define API_E_PAYLOAD_TOO_LARGE CMD_E_PAYLOAD_TOO_LARGE
#define API_E_URI_TOO_LONG CMD_E_URI_TOO_LONG
#define API_E_UNSUPPORTED_MEDIA_TYPE CMD_E_UNSUPPORTED_MEDIA_TYPE
#define API_E_OUT_OF_MEMORY CMD_E_OUT_OF_MEMORY
#define API_E_INTERNAL CMD_E_INTERNAL
#define API_E_UNAVAILABLE CMD_E_UNAVAILABLE
#define API_E_NO_SPACE CMD_E_NO_SPACE
#define API_E_REQUEST_TIMEOUT CMD_E_REQUEST_TIMEOUT
#define API_E_MISDIRECTED CMD_E_MISDIRECTED
#define API_E_TOO_MANY_REQUESTS CMD_E_TOO_MANY_REQUESTS
#define API_E_READONLY CMD_E_READONLY
#define API_E_GONE CMD_E_GONE
#define API_E_CONFLICT CMD_E_CONFLICT
#define API_E_CROSSSLOT CMD_E_CROSSSLOT
#define API_E_MOVED CMD_E_MOVED
#define API_E_ASK CMD_E_ASK
#define API_E_TRYAGAIN CMD_E_TRYAGAIN
#define API_E_PRECONDITION_FAILED CMD_E_PRECONDITION_FAILED
#define API_E__COUNT CMD_E__COUNT

typedef struct api_param {
    char *name;
    char *value;                 /* percent-decoded, NUL-terminated */
    size_t vlen;
} api_param_t;

typedef struct api_route api_route_t;
typedef struct cmd_server api_server_t;     /* the command layer's server (cmd/cmd.h) */
typedef struct api_resp api_resp_t;
typedef struct api_policies api_policies_t;   /* named rate-limit policies (api/ratelimit.h) */
typedef cmd_auth_t api_auth_t;                /* tokens and who may do what (cmd/access.h) */
typedef cmd_token_t api_token_t;
typedef cmd_tokens_t api_tokens_t;

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
                                    0 = the current one (see api_gen) */

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
};

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

/* ------------------------------------------------------------------------ */
/* Routes and families                                                      */
/* ------------------------------------------------------------------------ */

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

typedef struct api_route_meta {
    const char *pattern;
    const char *method;
    api_access_t access;
    bool binary;                 /* API_ROUTE_BINARY: its body is application/octet-stream */
    const char *command;         /* the operation it runs (cmd/def.h), NULL for an operational route */
} api_route_meta_t;

typedef cmd_limits_t api_limits_t;
#define API_WORK_VALUES CMD_WORK_VALUES

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                 */
/* ------------------------------------------------------------------------ */

/* An empty request (no query, body or headers) for method and path, served
 * at now_ns; the caller sets the rest it has. */
void api_req_init(api_req_t *req, api_method_t method, const char *path, size_t path_len, int64_t now_ns);
/* An empty response (status 0, no body, no headers, nothing deferred). */
void api_resp_init(api_resp_t *resp);
/* Routes the request and runs its handler; always fills *resp (initialised
 * here). */
void api_dispatch(api_server_t *srv, api_req_t *req, api_resp_t *resp);
/* Frees what api_dispatch allocated in req and resp. */
void api_req_release(api_req_t *req);
void api_resp_release(api_resp_t *resp);

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
const char *api_method_name(api_method_t m);
api_method_t api_method_parse(const char *s);

/* ------------------------------------------------------------------------ */
/* Responses                                                                */
/* ------------------------------------------------------------------------ */

/* A failure described before it is answered (jansson's json_error_t is the
 * model): every reader - path key, body, members, query, item lists, policy
 * files, rate-limit requests - fills one, and api_err_respond turns it into
 * the error envelope.  A field name longer than the buffer (an unknown
 * field or query parameter the client sent) is borrowed, not copied: it
 * points into the request, which outlives the answer. */
typedef cmd_err_t api_err_t;

#define api_err_set cmd_err_set
/* Sets the error envelope of err: {"error":{"code","message"[,"field"]}}. */
void api_err_respond(api_resp_t *resp, const api_err_t *err);
/* The response form of a reader: answers err unless ok; returns ok. */
bool api_err_answered(api_resp_t *resp, bool ok, const api_err_t *err);

int api_code_status(api_code_t code);
const char *api_code_name(api_code_t code);
/* The code answering a core status (cmd/err.h). */
#define api_status_code cmd_status_code
/* Sets the error envelope of a core status, with the family's message;
 * field may be NULL. */
void api_error_status(api_resp_t *resp, core_status_t st, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sets an error response: {"error":{"code","message"[,"field"]}}. */
void api_error(api_resp_t *resp, api_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void api_error_field(api_resp_t *resp, api_code_t code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sets a JSON response and takes ownership of obj (steals the reference). */
void api_json(api_resp_t *resp, int status, json_t *obj);
/* Compact JSON text of v (reals in shortest round-trip form); malloc'd,
 * NULL on allocation failure. */
char *api_json_text(json_t *v, size_t *len);
/* The tree json_loadb(s, n, JSON_REJECT_DUPLICATES) builds, for a flat object
 * of printable-ASCII names and strings without escapes, integers of at most
 * 18 digits, reals a double holds, true, false and null; NULL for any other
 * text (params.c). */
json_t *api_json_flat_object(const char *s, size_t n);
/* Appends s[0..n) as a JSON string (quoted, escaped as api_json_text does). */
void api_json_put_string(wbuf_t *b, const char *s, size_t n);
/* The same at p, which has room for API_JSON_STRING_MAX(n) bytes; returns
 * the end of what it wrote. */
#define API_JSON_STRING_MAX(n) (6 * (n) + 2)
char *api_json_string_at(char *p, const char *s, size_t n);
/* v in decimal at p, which has room for API_I64_TEXT bytes (no NUL);
 * returns the end of what it wrote. */
#define API_I64_TEXT 20
char *api_format_i64(char *p, int64_t v);
/* Shortest text that reads back as v, always with '.' or an exponent. */
void api_format_double(double v, char *out, size_t n);
/* Sets a response body verbatim (copied). */
void api_body(api_resp_t *resp, int status, const char *ctype, const void *body, size_t len);
void api_add_header(api_resp_t *resp, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------------ */
/* Request helpers (each sets a 4xx on failure and returns false/NULL)      */
/* ------------------------------------------------------------------------ */

/* The decoded path segment captured by the route's {name} placeholder. */
const char *api_path_param(const api_req_t *req, const char *name, size_t *len);
/* Validates a key (non-empty, <= 1024 bytes, UTF-8 without NUL). */
bool api_check_key(api_resp_t *resp, const char *field, const char *key, size_t len);
/* The same, filling err. */
bool api_key_check(const char *field, const char *key, size_t len, api_err_t *err);
/* The same rules without a response: false with *why ("must not be empty"...). */
bool api_key_ok(const char *key, size_t len, const char **why);
/* The {key} path parameter, validated. */
bool api_path_key(const api_req_t *req, api_resp_t *resp, const char **key, size_t *len);

/* True when the media type of Content-Type value ct (parameters and case
 * aside) is `type`; false for NULL. */
bool api_media_type_is(const char *ct, const char *type);
/* Parses the body as a JSON object (415 for a non-JSON media type, 400 for
 * bad JSON or a non-object).  `allowed` lists accepted members (NULL-ended):
 * any other member is refused, naming it.  Returns the object (owned by req). */
json_t *api_body_object(api_req_t *req, api_resp_t *resp, const char *const *allowed);
/* A field source: named, typed values that one set of checks reads whether
 * they come from a JSON object (a body, a policies file) or from the query
 * string (GET /throttle/{key}), so both give the same answers and the same
 * errors, and a query is read without building a jansson tree (issue 20).
 * A query value is typed as the query has always been read: an integer when
 * api_parse_i64 takes it, else a number when api_parse_double does, else a
 * boolean for "true" / "false", else a string; a string that is not UTF-8
 * text is absent (a JSON string could not hold it). */
typedef enum api_ftype { API_F_INT, API_F_REAL, API_F_BOOL, API_F_STRING, API_F_OTHER } api_ftype_t;

typedef struct api_field {
    api_ftype_t type;            /* API_F_OTHER: null, an array or an object */
    int64_t i;                   /* API_F_INT */
    double d;                    /* API_F_REAL */
    bool b;                      /* API_F_BOOL */
    const char *s;               /* API_F_STRING: NUL-terminated, lives as long as the source */
    size_t len;
} api_field_t;

/* One member of a flat body (api_fields_flat), its name and any string
 * value copied NUL-terminated into the room's text. */
typedef struct api_flat_member {
    const char *name;
    api_field_t v;               /* API_F_OTHER: null */
} api_flat_member_t;

/* Room for a flat body's members, given by the caller and kept until the
 * answer is built (an error's field may point at a name).  A body with more
 * members, or longer, is read into a tree instead. */
#define API_FLAT_MEMBERS 16
#define API_FLAT_TEXT 512
typedef struct api_flat {
    api_flat_member_t m[API_FLAT_MEMBERS];
    int n;
    size_t used;                 /* bytes of text */
    char text[API_FLAT_TEXT];
} api_flat_t;

typedef enum api_fields_kind { API_FIELDS_JSON, API_FIELDS_QUERY, API_FIELDS_FLAT } api_fields_kind_t;

typedef struct api_fields {
    api_fields_kind_t kind;
    json_t *obj;                 /* API_FIELDS_JSON: the object */
    const api_flat_t *flat;      /* API_FIELDS_FLAT: a flat body's members */
    const api_param_t *params;   /* API_FIELDS_QUERY: the parameters */
    int nparams;
    const char *skip;            /* a parameter that is not a field, or NULL */
} api_fields_t;

/* A cursor over a source's field names, in their order; start it zeroed. */
typedef struct api_fields_iter {
    void *j;
    int i;
} api_fields_iter_t;

/* The source of a JSON object. */
api_fields_t api_fields_json(json_t *obj);
/* The source of the request's query parameters but `skip` (may be NULL),
 * typed once into *room, which must live as long as the source: false with
 * *err when a field is given more than once. */
bool api_fields_query(const api_req_t *req, const char *skip, api_flat_t *room, api_fields_t *f, api_err_t *err);
/* The source of the request's body without a tree when it is a flat object
 * (api_json_flat_object's shape) that fits *room; else the source of the
 * object api_body_object reads (req->json).  Checks and answers as
 * api_body_object does (media type, empty body, JSON, unknown fields in
 * member order): false when it answered. */
bool api_body_fields(api_req_t *req, api_resp_t *resp, const char *const *allowed, api_flat_t *room,
                     api_fields_t *f);
/* Field `name`: false when absent. */
bool api_fields_get(const api_fields_t *f, const char *name, api_field_t *v);
/* Whether name is one of the NULL-terminated list's. */
bool api_name_listed(const char *const *list, const char *name);
/* The next field's name, or NULL after the last. */
const char *api_fields_next(const api_fields_t *f, api_fields_iter_t *it);
/* A number's value (an integer's as a double): false for another type. */
bool api_field_number(const api_field_t *v, double *d);
/* Fields type-checked and range-checked with messages that name them, as the
 * api_member_* readers below (which read a JSON object through these). */
bool api_fields_int(const api_fields_t *f, const char *name, bool required, int64_t min, int64_t max,
                    int64_t *out, bool *present, api_err_t *err);
bool api_fields_double(const api_fields_t *f, const char *name, bool required, double min, double max,
                       double *out, bool *present, api_err_t *err);
bool api_fields_bool(const api_fields_t *f, const char *name, bool *out, bool *present, api_err_t *err);
bool api_fields_string(const api_fields_t *f, const char *name, bool required, const char **out, size_t *len,
                       api_err_t *err);

/* Members of a JSON object, type-checked and range-checked with messages that
 * name the member.  `present` (may be NULL) tells whether it was given;
 * optional members keep *out untouched when absent.  The api_member_* forms
 * fill *err; the api_obj_* forms answer it. */
bool api_member_int(json_t *obj, const char *name, bool required, int64_t min, int64_t max, int64_t *out,
                    bool *present, api_err_t *err);
bool api_member_double(json_t *obj, const char *name, bool required, double min, double max, double *out,
                       bool *present, api_err_t *err);
bool api_member_bool(json_t *obj, const char *name, bool *out, bool *present, api_err_t *err);
bool api_member_string(json_t *obj, const char *name, bool required, const char **out, size_t *len,
                       api_err_t *err);
bool api_obj_int(api_resp_t *resp, json_t *obj, const char *name, bool required, int64_t min, int64_t max,
                 int64_t *out, bool *present);
bool api_obj_double(api_resp_t *resp, json_t *obj, const char *name, bool required, double min, double max,
                    double *out, bool *present);
bool api_obj_bool(api_resp_t *resp, json_t *obj, const char *name, bool *out, bool *present);
bool api_obj_string(api_resp_t *resp, json_t *obj, const char *name, bool required, const char **out,
                    size_t *len);
bool api_obj_key(api_resp_t *resp, json_t *obj, const char *name, bool required, const char **out, size_t *len);

/* Query parameters.  api_query_allow refuses any name not listed. */
bool api_query_allow(const api_req_t *req, api_resp_t *resp, const char *const *allowed);
/* api_query_allow with nothing allowed: the route takes no query parameters. */
bool api_no_query(const api_req_t *req, api_resp_t *resp);
/* The usual shape of a write: the {key} of the path, no query parameters, a
 * JSON object body with members among `fields` (NULL with a 4xx set). */
json_t *api_key_body(api_req_t *req, api_resp_t *resp, const char *const *fields, const char **key, size_t *klen);
const char *api_query_get(const api_req_t *req, const char *name, size_t *len);
/* The text of query parameter `name`, given at most once: 400 when it is
 * repeated, or missing and required; true with *v NULL when it is absent. */
bool api_query_string(const api_req_t *req, api_resp_t *resp, const char *name, bool required, const char **v,
                      size_t *len);
size_t api_query_count(const api_req_t *req, const char *name);
bool api_query_int(const api_req_t *req, api_resp_t *resp, const char *name, bool required, int64_t min,
                   int64_t max, int64_t *out, bool *present);
bool api_query_double(const api_req_t *req, api_resp_t *resp, const char *name, bool required, double min,
                      double max, double *out, bool *present);
bool api_query_bool(const api_req_t *req, api_resp_t *resp, const char *name, bool *out, bool *present);

/* Strict number parsing for query strings and config: whole string, no
 * spaces, base 10, in range. */
bool api_parse_i64(const char *s, size_t len, int64_t *out);
bool api_parse_double(const char *s, size_t len, double *out);

/* ------------------------------------------------------------------------ */
/* State helpers                                                            */
/* ------------------------------------------------------------------------ */

static inline int64_t api_now_ms(const api_req_t *req) { return req->now_ns / 1000000; }
/* The algorithm generation whose rules serve this request: the current one
 * live, the recording journal's on replay (core/types.h). */
static inline unsigned api_gen(const api_req_t *req) { return req->gen ? req->gen : TALLY_GEN_CURRENT; }

/* The command layer does the work below (cmd/journal.h, cmd/room.h,
 * cmd/keys.h, cmd/access.h) in the request's context; these are its HTTP
 * forms, which answer a refusal on the response.  A family whose handlers
 * are typed operations calls the cmd_ functions itself. */

/* The HTTP answer of a refusal the command layer described: the error
 * envelope, and the headers its details call for (X-Tally-Owner on a
 * MOVED, X-Tally-Primary on a READONLY, Retry-After, WWW-Authenticate). */
void api_cmd_error(api_resp_t *resp, const cmd_err_t *err);
/* ok; else the refusal in req->ctx answered on resp. */
static inline bool api_cmd_answered(const api_req_t *req, api_resp_t *resp, bool ok)
{
    if (!ok)
        api_cmd_error(resp, &req->ctx->err);
    return ok;
}

/* Journal (cmd/journal.h). */
static inline bool api_journal_reserve_more(api_server_t *srv, const api_req_t *req, api_resp_t *resp,
                                            uint64_t bytes)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_journal_reserve_more(req->ctx, bytes));
}
/* Journals this request's change as received (call under the shard
 * locks, only when state changed; api_key_close does it for handlers). */
static inline void api_journal(api_server_t *srv, const api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    (void)resp;
    cmd_journal_change(req->ctx);
}
/* Journals a different, canonical request (resolved parameters). */
void api_journal_as(api_server_t *srv, const api_req_t *req, api_resp_t *resp, api_method_t method,
                    const char *path, const char *query, const char *ctype, const void *body,
                    size_t body_len);
static inline void api_journal_key_state(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key,
                                         size_t klen, const void *dump, size_t dump_len, int64_t ttl_ms)
{
    (void)srv;
    (void)resp;
    cmd_journal_key_state(req->ctx, key, klen, dump, dump_len, ttl_ms);
}
#define api_escape_segment cmd_escape_segment

/* Room and the bounds of one request (cmd/room.h). */
typedef cmd_keep_t api_keep_t;
static inline bool api_make_room(api_server_t *srv, const api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_make_room(req->ctx));
}
static inline bool api_make_room_for(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_make_room_for(req->ctx, extra));
}
static inline bool api_make_room_keeping(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                                         const api_keep_t *keep)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_make_room_keeping(req->ctx, extra, keep));
}
static inline bool api_make_room_for_key(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                                         const char *key, size_t klen, uint64_t bytes)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_make_room_for_key(req->ctx, extra, key, klen, bytes));
}
static inline uint64_t api_room_now(const api_server_t *srv, const api_req_t *req)
{
    (void)srv;
    return cmd_room_now(req->ctx);
}
static inline uint64_t api_value_limit(const api_server_t *srv, const api_req_t *req)
{
    (void)srv;
    return cmd_value_limit(req->ctx);
}
static inline bool api_value_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *field,
                                  const char *what, uint64_t bytes)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_value_fits(req->ctx, field, what, bytes));
}
static inline bool api_grow(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *field,
                            const char *what, uint64_t reach, uint64_t extra)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_grow(req->ctx, field, what, reach, extra));
}
static inline bool api_room_retry(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                                  const api_keep_t *keep, unsigned *attempts)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_room_retry(req->ctx, extra, keep, attempts));
}
static inline bool api_answer_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t bytes,
                                   const char *how)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_answer_fits(req->ctx, bytes, how));
}
#define api_work_limit cmd_work_limit
static inline bool api_work_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *field,
                                 uint64_t bytes)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_work_fits(req->ctx, field, bytes));
}
/* JSON text of a string of `len` bytes, at most (every byte escaped as
 * \u00XX, the quotes): what answer estimates count per item. */
static inline uint64_t api_json_string_max(uint64_t len) { return 6 * len + 2; }
#define api_keys_distinct cmd_keys_distinct

/* The key handle (cmd/keys.h). */
#define API_READ CMD_READ
#define API_WRITE CMD_WRITE
#define API_MUST_EXIST CMD_MUST_EXIST
typedef cmd_key_t api_key_t;
__attribute__((warn_unused_result)) static inline bool api_key_open(api_server_t *srv, const api_req_t *req,
                                                                   api_resp_t *resp, const char *key, size_t len,
                                                                   const ks_type_t *type, unsigned flags,
                                                                   api_key_t *h)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_key_open(req->ctx, key, len, type, flags, h));
}
#define api_key_value cmd_key_value
#define api_key_add cmd_key_add
#define api_key_replace cmd_key_replace
#define api_key_delete cmd_key_delete
#define api_key_close cmd_key_close
__attribute__((warn_unused_result)) static inline bool api_keys_lock(api_server_t *srv, const api_req_t *req,
                                                                    api_resp_t *resp, ks_key_t *keys, size_t n,
                                                                    api_key_t *h)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_keys_lock(req->ctx, keys, n, h));
}
static inline bool api_auth_key_allowed(const api_req_t *req, api_resp_t *resp, const char *key, size_t len)
{
    return api_cmd_answered(req, resp, cmd_key_allowed(req->ctx, key, len));
}
static inline bool api_auth_keys_allowed(const api_req_t *req, api_resp_t *resp, const ks_key_t *keys, size_t n)
{
    return api_cmd_answered(req, resp, cmd_keys_allowed(req->ctx, keys, n));
}
static inline bool api_keys_allowed(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const ks_key_t *keys,
                                    size_t n)
{
    (void)srv;
    return api_cmd_answered(req, resp, cmd_keys_allowed_here(req->ctx, keys, n));
}
/* cmd_keys_find, its refusal answered on the response the request's
 * context was opened for. */
static inline bool api_keys_find(api_key_t *h, size_t i, const ks_type_t *type, unsigned flags, const char *role,
                                 ks_entry_t **e)
{
    if (cmd_keys_find(h, i, type, flags, role, e))
        return true;
    api_cmd_error(h->ctx->front, &h->ctx->err);
    return false;
}

/* The info routes (GET /cms/{key}, /topk, /tdigest): 200 with info(value)
 * built under the shard lock; 404 when missing, 409 WRONGTYPE. */
void api_answer_info(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                     const ks_type_t *type, json_t *(*info)(const void *value));

/* The create routes (PUT /bloom/{key}, /cuckoo, /cms, /topk, /tdigest, /ts):
 * stores `value`, a new object of `type`, at the key and answers 201 with
 * info(value) (built under the shard lock), or {"created": true} when info is
 * NULL.  409 EXISTS when the key already holds a `type`, 409 WRONGTYPE when it
 * holds another type, 507 when out of memory (also when value is NULL, the
 * caller's allocation having failed).  Journals the request on success; on
 * failure frees the value and changes nothing. */
void api_create_key(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                    const ks_type_t *type, void *value, json_t *(*info)(const void *value));

#endif
