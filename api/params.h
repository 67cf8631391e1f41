/*
 * params.h - reading a request's parameters (api/params.c): the path's
 * {key} and the key rules, the JSON body with its one media-type check,
 * field sources (a JSON object, a flat body or the query string) and the
 * members and query parameters read through them, and strict numbers.
 * Each reader fills an api_err_t naming the field (the api_member_* /
 * api_fields_* forms) or answers it on the response (the others: a 4xx
 * set, false or NULL returned).
 */
#ifndef TALLY_API_PARAMS_H
#define TALLY_API_PARAMS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/request.h"
#include "api/respond.h"

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
/* The tree json_loadb(s, n, JSON_REJECT_DUPLICATES) builds, for a flat object
 * of printable-ASCII names and strings without escapes, integers of at most
 * 18 digits, reals a double holds, true, false and null; NULL for any other
 * text: the body's tree without jansson's parser where it can. */
json_t *api_json_flat_object(const char *s, size_t n);
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

#endif
