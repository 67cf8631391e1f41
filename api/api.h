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

/* One error code per failure class; the status comes from one table. */
typedef enum api_code {
    API_E_BAD_REQUEST = 0,
    API_E_UNAUTHORIZED,
    API_E_FORBIDDEN,
    API_E_NOT_FOUND,
    API_E_METHOD_NOT_ALLOWED,
    API_E_WRONGTYPE,
    API_E_EXISTS,
    API_E_PAYLOAD_TOO_LARGE,
    API_E_URI_TOO_LONG,
    API_E_UNSUPPORTED_MEDIA_TYPE,
    API_E_OUT_OF_MEMORY,
    API_E_INTERNAL,
    API_E_UNAVAILABLE,
    API_E_NO_SPACE,              /* 507: the disk is full */
    API_E_REQUEST_TIMEOUT,       /* 408: the request body stopped arriving */
    API_E_MISDIRECTED,           /* 421: a Host a loopback-bound tallyd does not serve (api/guard.h) */
    API_E_TOO_MANY_REQUESTS,     /* 429: too many unknown tokens from one address (api/auth.h) */
    API_E_READONLY,              /* 421: a change sent to a replica (api/repl.h) */
    API_E_GONE,                  /* 410: a replication position the primary no longer holds */
    API_E_CONFLICT,              /* 409: a replication request from a newer epoch than this node's */
    API_E_CROSSSLOT,             /* 400: a request's keys span cluster slots (api/cluster.h) */
    API_E_MOVED,                 /* 421: another node owns the key's slot (api/cluster.h) */
    API_E_ASK,                   /* 421: the key's slot is migrating and the key has left (api/cluster.h) */
    API_E_TRYAGAIN,              /* 503: a migrating slot holds only some of the request's keys */
    API_E_PRECONDITION_FAILED,   /* 412: DELETE /keys/{key}?digest= on a value that changed */
    API_E__COUNT
} api_code_t;

typedef struct api_param {
    char *name;
    char *value;                 /* percent-decoded, NUL-terminated */
    size_t vlen;
} api_param_t;

typedef struct api_route api_route_t;
typedef struct api_server api_server_t;
typedef struct api_resp api_resp_t;
typedef struct api_policies api_policies_t;   /* named rate-limit policies (api/ratelimit.h) */
typedef struct api_auth api_auth_t;           /* tokens and who may do what (api/auth.h) */
typedef struct api_cluster api_cluster_t;     /* the slots this node owns (api/cluster.h) */
typedef struct api_token api_token_t;
typedef struct api_tokens api_tokens_t;

#define API_TOKEN_NAME_MAX 64    /* longest token name (api/auth.h) */

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
    const api_token_t *token;    /* the caller's token; NULL: authentication off, or replay */
    api_tokens_t *tokens;        /* the token set `token` belongs to, held until api_dispatch returns */
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

typedef struct api_undo api_undo_t;   /* api/undo.h */

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
    uint64_t journal_lsn;        /* wait for this journal position before answering */
    /* Journal space this request holds (api_journal_reserve and _more) and
     * the bytes of its records so far: a record never exceeds what is held,
     * so the disk cannot refuse a change already applied. */
    uint64_t journal_held, journal_used;
    /* Slow work (a snapshot) is not done in the HTTP worker: the handler sets
     * `deferred`, and the server runs it on another thread, which fills in
     * the response, and answers when it returns. */
    void (*deferred)(api_server_t *srv, api_resp_t *resp);
    void *deferred_arg;          /* what the handler leaves for `deferred` (it frees it) */
    int route_index;             /* for metrics: index in the route table, -1 none */
    /* Semi-synchronous replication (api/undo.h): `undo_on` when this change
     * keeps pre-images; those of the keys locked now, not yet journaled;
     * the stream position its answer waits for (0: none). */
    bool undo_on;
    struct api_undo *undo;
    uint64_t repl_pos;
    char token_name[API_TOKEN_NAME_MAX + 1];   /* the caller's token, for the access log; "" none */
};

/* What the API needs from the service, as callbacks, so that api/ never
 * depends on service/. */
typedef struct api_hooks {
    void *ud;
    /* Appends a journal record; returns its LSN (0 when journaling is off).
     * Called with the shards of the keys involved locked. */
    uint64_t (*journal)(void *ud, const journal_req_t *req);
    /* Secures journal space for a change of about `bytes` before it is
     * applied (false with *err when the disk cannot take it); the promise
     * is given back with journal_release once the handler returned. */
    bool (*journal_reserve)(void *ud, uint64_t bytes, const char **err);
    void (*journal_release)(void *ud, uint64_t bytes);
    /* True once snapshot and journal are loaded and the server accepts work. */
    bool (*ready)(void *ud);
    /* NULL while changes can be made durable; else why not (a static
     * string: a full disk).  NULL hook: always writable. */
    const char *(*unwritable)(void *ud);
    /* Appends the Prometheus exposition of service metrics. */
    void (*metrics)(void *ud, wbuf_t *out);
    /* Adds service fields to the /info object. */
    void (*info)(void *ud, json_t *obj);
    /* Takes a snapshot now; returns an object describing it, or NULL with
     * *err set to a message. */
    json_t *(*snapshot)(void *ud, const char **err);
    /* Re-reads the --config policies file; false with a message in err
     * (no file configured, or the file is refused: the old policies stay). */
    bool (*reload)(void *ud, size_t *count, char *err, size_t errlen);
    /* Replication (api/repl.h); NULL when the service has none. */
    const struct api_repl_hooks *repl;
    /* Taking changes back (api/undo.h); NULL when the service never does.
     * undo_begin is asked before a change is admitted: true when its
     * pre-images are to be kept (then undo_end is called once the handler
     * returned: between the two, no change is being taken back).
     * undo_register takes the pre-images of the record just journaled (the
     * list, possibly NULL, is its from then on; called under the keys'
     * locks) and returns the stream position the answer waits for. */
    bool (*undo_begin)(void *ud);
    void (*undo_end)(void *ud);
    uint64_t (*undo_register)(void *ud, struct api_undo *list);
} api_hooks_t;

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
typedef enum api_access {
    API_ACCESS_UNSET = 0,        /* not a class: a route must name one of the others */
    API_ACCESS_PUBLIC,           /* /healthz, /readyz: never needs a token */
    API_ACCESS_METRICS,          /* /metrics: any token, none with --metrics-public */
    API_ACCESS_TOKEN,            /* any valid token (GET /, /info; its details need admin) */
    API_ACCESS_READ,             /* scope read: reads data */
    API_ACCESS_WRITE,            /* scope write: changes data */
    API_ACCESS_RATELIMIT,        /* scope ratelimit (or write): /throttle decisions, /hook */
    API_ACCESS_ADMIN,            /* scope admin: /admin/..., DELETE /keys/{key} */
    API_ACCESS_REPLICATE,        /* scope replicate: what a replica asks its primary and a node its
                                    --peers (/replication/...); admin does not grant it */
    API_ACCESS__COUNT
} api_access_t;

/* One row: {method, pattern, handler, flags, access}.  A pattern segment `{name}`
 * matches one path segment (percent-decoded, read with api_path_param); a
 * last segment `{name...}` matches the rest of the path, possibly empty. */
struct api_route {
    api_method_t method;
    const char *pattern;
    api_handler_fn handler;
    unsigned flags;
    api_access_t access;
};

/* What each api/<family>.c exports: its routes (handlers static behind
 * them) and, for a family that stores a type, how messages name it.
 * api/routes.c lists the families in matching order. */
typedef struct api_family {
    const char *name;
    const api_route_t *routes;
    size_t nroutes;
    const ks_type_t *type;       /* the type its keys hold; NULL for hook, keys, ops */
    const char *noun;            /* with its article: "a Bloom filter" (WRONGTYPE messages) */
    const char *missing;         /* the 404 of a key that must exist; NULL: "no such key (create the
                                    <type> with PUT /<type>/{key})" */
} api_family_t;

/* Defines api_<name>_family from the file's `routes` table: the type its
 * keys hold (or NULL), its noun and its 404 text (NULL: the default). */
#define API_FAMILY(name, type_, noun_, missing_)                                                              \
    const api_family_t api_##name##_family = { #name, routes, sizeof(routes) / sizeof(routes[0]), type_, noun_, \
                                               missing_ }

extern const api_family_t *const api_families[];
extern const size_t api_nfamilies;

typedef struct api_route_meta {
    const char *pattern;
    const char *method;
    api_access_t access;
    bool binary;                 /* API_ROUTE_BINARY: its body is application/octet-stream */
} api_route_meta_t;

/* Limits per request (docs/keys.md, "Limits per request"), from --max-value-size
 * and --max-answer-size; 0 = none.  Replay applies what the primary
 * accepted: no limit refuses a replayed request. */
typedef struct api_limits {
    uint64_t max_value;          /* bytes one key's value may reach */
    uint64_t max_answer;         /* bytes one answer may take */
} api_limits_t;

/* How much a request may read from its sources (BITOP, merges, unions) and
 * go over a value for each repeated parameter: this many values of the
 * largest size.  Enough for an operation on a few full-size values; what is
 * more would hold a shard lock for seconds. */
#define API_WORK_VALUES 4

struct api_server {
    ks_t *ks;
    api_limits_t limits;         /* zero: none (unit tests) */
    api_hooks_t hooks;
    api_policies_t *policies;    /* --config policies; NULL = none configured */
    const struct api_guard *guard;  /* browser checks (api/guard.h); NULL = none */
    api_auth_t *auth;            /* --tokens; NULL = no authentication (api/auth.h) */
    api_cluster_t *cluster;      /* --cluster; NULL = not in a cluster (api/cluster.h) */
};

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
typedef struct api_err {
    api_code_t code;
    char field[80];              /* the offending field; "" for none */
    const char *long_field;      /* the field when it does not fit in field[]; else NULL */
    char message[512];
} api_err_t;

void api_err_set(api_err_t *err, api_code_t code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sets the error envelope of err: {"error":{"code","message"[,"field"]}}. */
void api_err_respond(api_resp_t *resp, const api_err_t *err);
/* The response form of a reader: answers err unless ok; returns ok. */
bool api_err_answered(api_resp_t *resp, bool ok, const api_err_t *err);

int api_code_status(api_code_t code);
const char *api_code_name(api_code_t code);
/* The API code answering a core status (the one mapping of core_status_t;
 * CORE_OK maps to API_E_INTERNAL: it is no error to answer). */
api_code_t api_status_code(core_status_t st);
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

/* Before a request that may change state: secures journal space for it, so
 * that a change that could not be made durable is never applied.  Returns
 * false with a 503 set (nothing changed) when the space cannot be had;
 * otherwise resp->journal_held is what api_journal_unreserve gives back
 * after the handler.  api_dispatch calls it for every route that may write.
 * What it secures covers the request journaled as received (at most twice
 * its size plus a page, which also covers any one deletion of a key); a
 * handler whose records can be larger (canonical forms) secures the rest
 * with api_journal_reserve_more before it changes anything. */
bool api_journal_reserve(api_server_t *srv, const api_req_t *req, api_resp_t *resp);
/* Makes sure the request holds room for `bytes`, a bound on everything the
 * handler will still journal, securing only what the room it holds and has
 * not used leaves uncovered; false with a 503 set. */
bool api_journal_reserve_more(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t bytes);
void api_journal_unreserve(api_server_t *srv, api_resp_t *resp);

/* Journals this request as received (call under the shard locks, only when
 * state changed; api_key_close does it for handlers).  The space was
 * secured by api_journal_reserve.  Raises resp->journal_lsn to the record's
 * position, which the server waits for before answering when fsync is
 * "always". */
void api_journal(api_server_t *srv, const api_req_t *req, api_resp_t *resp);
/* Journals a different, canonical request (resolved parameters). */
void api_journal_as(api_server_t *srv, const api_req_t *req, api_resp_t *resp, api_method_t method,
                    const char *path, const char *query, const char *ctype, const void *body,
                    size_t body_len);
/* Journals `key`'s state as a canonical record (api/dumpkey.c): with `dump`
 * (GET /keys/{key}/dump's encoding) the replacing restore PUT
 * /keys/{key}/restore?replace=true&ttl_ms=N (0: no expiry), without it
 * DELETE /keys/{key}.  What a restore that could not store its value, and a
 * change taken back (api/undo.c), leave in the journal. */
void api_journal_key_state(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                           const void *dump, size_t dump_len, int64_t ttl_ms);
/* Percent-encodes a key as one path segment into out (NUL-terminated);
 * out must hold 3 * len + 1 bytes. */
size_t api_escape_segment(const char *key, size_t len, char *out);

/* Before a write that may grow memory: evicts under the configured policy
 * while over the limit, journaling each eviction (the journal space of each
 * is secured before the key is removed).  Returns false (507 set) when the
 * limit is reached and nothing can be evicted, or (503 set) when the journal
 * cannot take the next eviction; keys already evicted stay evicted (their
 * deletions are journaled), the write itself is not applied. */
bool api_make_room(api_server_t *srv, const api_req_t *req, api_resp_t *resp);
/* Like api_make_room, for a write known to add about `extra` bytes: evicts
 * until usage + extra fits under the limit; 507 when it cannot (a single
 * value larger than the whole limit is refused, not allowed to overshoot). */
bool api_make_room_for(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra);
/* The keys a write reads or grows while it makes room for itself: never
 * evicted for it, and their bytes count with what it adds (a write they
 * and its growth cannot fit under the limit together is refused at once,
 * evicting nothing). */
typedef struct api_keep {
    const ks_key_t *keys;
    size_t n;
    uint64_t bytes;              /* what they take now */
} api_keep_t;
/* api_make_room_for, keeping keep's keys (NULL: none). */
bool api_make_room_keeping(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                           const api_keep_t *keep);
/* The same for a write to one key, which takes `bytes` now (0 when not
 * known before it is locked). */
bool api_make_room_for_key(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                           const char *key, size_t klen, uint64_t bytes);

/* ---- Bounds of one request (docs/keys.md, "Limits per request") ----------------
 * Every write that allocates knows, before it allocates, the size its value
 * will reach and the bytes it adds (core's size functions: cms_bytes_for,
 * bloom_bytes_for, throttle_bytes_after, ...), and asks:
 *   - api_value_fits: may the value reach that size (--max-value-size)?
 *     400 otherwise, naming the limit, the size and `what`;
 *   - api_make_room_for: room under --maxmemory for the bytes it adds
 *     (eviction; 507 when it cannot be had, at once when the bytes alone
 *     pass the limit).
 * api_grow asks both.  A write whose growth is only known under the key's
 * lock (a batch that may add sub-filters, a sliding log's entries) compares
 * it with api_room_now() there; when it does not fit, it undoes what it did,
 * closes the handle and calls api_room_retry, then starts again.  Replayed
 * requests are never refused by these limits. */

/* The bytes a write may add now without evicting: UINT64_MAX without
 * --maxmemory or on replay. */
uint64_t api_room_now(const api_server_t *srv, const api_req_t *req);
/* The most bytes a value may reach (for core functions that take a
 * max_bytes): --max-value-size; UINT64_MAX when none or on replay. */
uint64_t api_value_limit(const api_server_t *srv, const api_req_t *req);
/* Whether a value may reach `bytes`: false with a 400 naming
 * --max-value-size, the size and `what` ("the filter", ...), and as its
 * field `field` (NULL: none), the parameter that asked for the size. */
bool api_value_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *field, const char *what,
                    uint64_t bytes);
/* api_value_fits(reach), then api_make_room_for(extra). */
bool api_grow(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *field, const char *what,
              uint64_t reach, uint64_t extra);
/* After a write found under its lock that it needs `extra` more bytes than
 * api_room_now() allowed, and undid itself and closed its handle: evicts
 * for them (keeping keep's keys, see api_make_room_keeping) and returns
 * true to try again, at most a few times (*attempts counts them, start it
 * at 0); false with the 507/503 set. */
bool api_room_retry(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra,
                    const api_keep_t *keep, unsigned *attempts);
/* Whether an answer of about `bytes` may be built (--max-answer-size):
 * false with a 400 naming the limit, the estimate and `how` to read less
 * ("narrow the range or set count"). */
bool api_answer_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t bytes, const char *how);
/* The bytes one request may read from its sources, or go over for repeated
 * parameters: API_WORK_VALUES x --max-value-size (UINT64_MAX when none). */
uint64_t api_work_limit(const api_server_t *srv);
/* Whether a request may read `bytes` in all from its sources (`field`
 * names them): false with a 400 naming the bound. */
bool api_work_fits(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *field, uint64_t bytes);
/* JSON text of a string of `len` bytes, at most (every byte escaped as
 * \u00XX, the quotes): what answer estimates count per item. */
static inline uint64_t api_json_string_max(uint64_t len) { return 6 * len + 2; }

/* Multi-key requests whose sources may repeat: distinct[i] is the index of
 * the first key equal to keys[i] (keys compared by bytes).  Returns false
 * when out of memory. */
bool api_keys_distinct(const ks_key_t *keys, size_t n, size_t *first);

/* ------------------------------------------------------------------------ */
/* The key handle (api/key.c): open, work under the lock, close             */
/* ------------------------------------------------------------------------ */

#define API_READ 0u              /* look the key up */
#define API_WRITE 1u             /* the handler may change the value: prepare it */
#define API_MUST_EXIST 2u        /* a missing key is a 404 */

typedef struct api_key {
    api_server_t *srv;
    const api_req_t *req;
    api_resp_t *resp;
    ks_key_t *keys;              /* the keys locked (one, or a multi-key request's) */
    size_t n;
    ks_entry_t *e;               /* the entry opened (for writing); NULL when missing */
    ks_key_t key;                /* storage of the key of api_key_open */
    bool locked;
} api_key_t;

/* Locks the key's shard and looks it up expecting `type` (NULL: any type).
 * Returns true with the shard locked and h->e the entry (NULL when the key
 * does not exist), prepared for modification with API_WRITE.  Returns false
 * with nothing locked and *resp set: 404 when missing under API_MUST_EXIST,
 * 409 WRONGTYPE when the key holds another type, 403 when the key is outside
 * the caller's token prefixes. */
__attribute__((warn_unused_result)) bool api_key_open(api_server_t *srv, const api_req_t *req, api_resp_t *resp,
                                                     const char *key, size_t len, const ks_type_t *type,
                                                     unsigned flags, api_key_t *h);
/* The value of the open entry, NULL when the key does not exist. */
static inline void *api_key_value(const api_key_t *h) { return h->e ? ks_entry_value(h->e) : NULL; }
/* Stores `value` (owned by the keyspace from then on) at the missing key -
 * keys[0] of a multi-key handle - and makes it the open entry.  False when
 * out of memory: nothing is stored, the caller still owns `value` and
 * answers. */
bool api_key_add(api_key_t *h, const ks_type_t *type, void *value, int64_t expire_ms);
/* Replaces the open entry's value (the old one is freed). */
void api_key_replace(api_key_t *h, void *value);
/* Deletes the open entry; h->e becomes NULL. */
void api_key_delete(api_key_t *h);
/* Ends the work on the key(s): when `changed`, re-measures the open entry
 * (memory accounting) and journals the request, still under the lock; then
 * unlocks.  Does nothing on a handle already closed (a failed open or
 * api_keys_find has closed it). */
void api_key_close(api_key_t *h, bool changed);

/* The multi-key form: locks the shards of keys[0..n) in ascending order
 * (never deadlocks with another such request).  keys[0] is the destination
 * when there is one.  End with api_key_close.  Every key must be within the
 * caller's token prefixes (api_auth_keys_allowed): otherwise 403 is set,
 * nothing is locked and false is returned - the one place every handler
 * passes through, so none can forget the check. */
__attribute__((warn_unused_result)) bool api_keys_lock(api_server_t *srv, const api_req_t *req, api_resp_t *resp,
                                                      ks_key_t *keys, size_t n, api_key_t *h);
/* Whether the caller's token may touch the key(s): true when it has no
 * prefixes (or authentication is off, or on replay); else 403 naming the key
 * and the token's prefixes.  api_keys_lock checks this itself; a handler
 * calls it earlier only to refuse before an eviction (api_make_room). */
bool api_auth_key_allowed(const api_req_t *req, api_resp_t *resp, const char *key, size_t len);
bool api_auth_keys_allowed(const api_req_t *req, api_resp_t *resp, const ks_key_t *keys, size_t n);
/* api_auth_keys_allowed and, in a cluster, the keys' slot (one slot, owned
 * here: api/cluster.h): what a multi-key handler checks before it evicts
 * for room; api_keys_lock checks both again under the locks. */
bool api_keys_allowed(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const ks_key_t *keys, size_t n);
/* Looks keys[i] up with the rules of api_key_open; `role` (may be NULL)
 * names the key in a WRONGTYPE message ("sources[1]").  With API_WRITE the
 * entry becomes the open entry that api_key_close re-measures.  *e (may be
 * NULL) is the entry, NULL when missing.  On failure every lock is
 * released, *resp is set and false is returned. */
bool api_keys_find(api_key_t *h, size_t i, const ks_type_t *type, unsigned flags, const char *role,
                   ks_entry_t **e);

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
