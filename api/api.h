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
 *   - mutate only under the shard locks of the keys involved, and while still
 *     holding them call api_journal() when (and only when) state changed;
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

#define API_MAX_SEGMENTS 16      /* deepest path any route has, plus slack */
#define API_MAX_PARAMS 10000     /* query parameters per request (batches of item=) */
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
    /* The peer's address as text, or NULL; computed when asked (only {ip}
     * rate-limit keys need it).  NULL-safe like header. */
    const char *(*client_ip)(void *hctx);
    int64_t now_ns;              /* the time this request is served at */
    bool replay;                 /* re-executed from the journal */
    unsigned gen;                /* algorithm generation of a replayed record (core/types.h);
                                    0 = the current one (see api_gen) */

    /* Filled by the router. */
    const api_route_t *route;
    char *seg[API_MAX_SEGMENTS]; /* decoded path segments */
    size_t seg_len[API_MAX_SEGMENTS];
    int nseg;
    api_param_t *params;         /* decoded query parameters */
    int nparams;
    json_t *json;                /* parsed body, owned by the request */
    char *arena;                 /* decoded segments and parameters live here */
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
    uint64_t journal_lsn;        /* wait for this journal position before answering */
    /* Slow work (a snapshot) is not done in the HTTP worker: the handler sets
     * `deferred`, and the server runs it on another thread, which fills in
     * the response, and answers when it returns. */
    void (*deferred)(api_server_t *srv, api_resp_t *resp);
    int route_index;             /* for metrics: index in the route table, -1 none */
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
} api_hooks_t;

typedef struct api_route_meta {
    const char *pattern;
    const char *method;
} api_route_meta_t;

struct api_server {
    ks_t *ks;
    api_hooks_t hooks;
    api_policies_t *policies;    /* --config policies; NULL = none configured */
};

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                 */
/* ------------------------------------------------------------------------ */

/* Routes the request and runs its handler; always fills *resp. */
void api_dispatch(api_server_t *srv, api_req_t *req, api_resp_t *resp);
/* Frees what api_dispatch allocated in req and resp. */
void api_req_release(api_req_t *req);
void api_resp_release(api_resp_t *resp);

/* The route table, for metrics labels, `tallyd --routes` and the OpenAPI check. */
size_t api_route_count(void);
api_route_meta_t api_route_meta(size_t i);
const char *api_method_name(api_method_t m);
api_method_t api_method_parse(const char *s);

/* ------------------------------------------------------------------------ */
/* Responses                                                                */
/* ------------------------------------------------------------------------ */

int api_code_status(api_code_t code);
const char *api_code_name(api_code_t code);
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
/* The same rules without a response: false with *why ("must not be empty"...). */
bool api_key_ok(const char *key, size_t len, const char **why);
/* The {key} path parameter, validated. */
bool api_path_key(const api_req_t *req, api_resp_t *resp, const char **key, size_t *len);

/* Parses the body as a JSON object (415 for a non-JSON media type, 400 for
 * bad JSON or a non-object).  `allowed` lists accepted members (NULL-ended):
 * any other member is refused, naming it.  Returns the object (owned by req). */
json_t *api_body_object(api_req_t *req, api_resp_t *resp, const char *const *allowed);
/* Members of a JSON object, type-checked and range-checked with messages that
 * name the member.  `present` (may be NULL) tells whether it was given;
 * optional members keep *out untouched when absent. */
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
 * otherwise *held receives what api_journal_unreserve gives back after the
 * handler.  api_dispatch calls it for every route that may write. */
bool api_journal_reserve(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t *held);
void api_journal_unreserve(api_server_t *srv, uint64_t held);

/* Journals this request as received (call under the shard locks, only when
 * state changed).  The space was secured by api_journal_reserve. */
void api_journal(api_server_t *srv, const api_req_t *req, api_resp_t *resp);
/* Journals a different, canonical request (resolved parameters). */
void api_journal_as(api_server_t *srv, const api_req_t *req, api_resp_t *resp, api_method_t method,
                    const char *path, const char *query, const char *ctype, const void *body,
                    size_t body_len);
/* Percent-encodes a key as one path segment into out (NUL-terminated);
 * out must hold 3 * len + 1 bytes. */
size_t api_escape_segment(const char *key, size_t len, char *out);

/* Before a write that may grow memory: evicts under the configured policy
 * while over the limit, journaling each eviction.  Returns false (507 set)
 * when the limit is reached and nothing can be evicted. */
bool api_make_room(api_server_t *srv, const api_req_t *req, api_resp_t *resp);
/* Like api_make_room, for a write known to add about `extra` bytes: evicts
 * until usage + extra fits under the limit; 507 when it cannot (a single
 * value larger than the whole limit is refused, not allowed to overshoot). */
bool api_make_room_for(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra);

/* Sets a 409 WRONGTYPE naming both types ("key holds a counter (counter),
 * not a geo set (geo)"); `role` (may be NULL) names which key of a
 * multi-key request it is, e.g. "sources[1]". */
void api_wrongtype(api_resp_t *resp, const ks_entry_t *e, const char *wanted, const char *role);

/* Looks up `k` (its shard locked) expecting `type`: returns the entry, or
 * NULL with *resp set - 404 when missing (if must_exist), 409 WRONGTYPE when
 * of another type.  With write, the entry is prepared for modification.
 * *failed is set when *resp holds an error (telling a missing key apart from
 * an error when !must_exist).  The shard lock is left as it was. */
ks_entry_t *api_find(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const ks_key_t *k,
                     const ks_type_t *type, bool write, bool must_exist, bool *failed);

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
