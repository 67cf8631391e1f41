/*
 * params.c - reading a request's parameters: the {key} of the path and key
 * rules, the JSON body (one media-type check), its members, the query string
 * and strict numbers.  Every reader validates type and range and names the
 * offending field in its error, so handlers only chain calls.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/pattern.h"
#include "api/request.h"
#include "api/respond.h"

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

bool api_key_ok(const char *key, size_t len, const char **why)
{
    if (len == 0)
        *why = "must not be empty";
    else if (len > KS_KEY_MAX)
        *why = "is longer than 1024 bytes";
    else if (!codec_text_ok(key, len))
        *why = "must be UTF-8 text without NUL bytes";
    else
        return true;
    return false;
}

bool api_key_check(const char *field, const char *key, size_t len, api_err_t *err)
{
    const char *why;
    if (api_key_ok(key, len, &why))
        return true;
    if (len > KS_KEY_MAX)   /* the size, as the client may not know it in bytes */
        api_err_set(err, API_E_BAD_REQUEST, field, "%s is %zu bytes; the limit is %d", field, len, KS_KEY_MAX);
    else
        api_err_set(err, API_E_BAD_REQUEST, field, "%s %s", field, why);
    return false;
}

static bool path_key(const api_req_t *req, const char **key, size_t *len, api_err_t *err)
{
    *key = api_path_param(req, "key", len);
    if (!*key) {
        api_err_set(err, API_E_INTERNAL, NULL, "route has no {key}");
        return false;
    }
    return api_key_check("key", *key, *len, err);
}

/* ------------------------------------------------------------------------ */
/* JSON bodies                                                              */
/* ------------------------------------------------------------------------ */

/* Whether two names are the same, the first bytes compared first: these
 * run for every member of every request, and most names differ there. */
static inline bool same_name(const char *a, const char *b) { return a[0] == b[0] && strcmp(a, b) == 0; }

/* Whether name is one of the NULL-terminated list. */
bool api_name_listed(const char *const *list, const char *name)
{
    for (const char *const *a = list; *a; a++)
        if (same_name(*a, name))
            return true;
    return false;
}

/* Length of the media type of a Content-Type value (before parameters). */
static size_t media_len(const char *ct)
{
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    return n;
}

bool api_media_type_is(const char *ct, const char *type)
{
    if (!ct)
        return false;
    size_t n = strlen(type);
    /* as clients spell it, with no parameter or one right after: no scan */
    if (strncmp(ct, type, n) == 0 && (ct[n] == '\0' || ct[n] == ';'))
        return true;
    return n == media_len(ct) && strncasecmp(ct, type, n) == 0;
}

/* Media types a JSON body may arrive with: JSON itself, none, and what
 * `curl -d` sends by default (form-urlencoded) or text/plain.  Served
 * requests never get here with the last three (api/guard.h answers them
 * 415 first); journal records accepted before that rule still replay. */
static bool json_media_type(const char *ct)
{
    if (!ct || !*ct)
        return true;
    static const char *const ok[] = { "application/json", "application/x-www-form-urlencoded", "text/plain",
                                      "*/*" };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (api_media_type_is(ct, ok[i]))
            return true;
    /* application/<something>+json */
    size_t n = media_len(ct);
    return n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0;
}

/*
 * The common body without jansson's lexer.  Nearly every request is a flat
 * object whose names and strings are printable ASCII without escapes and
 * whose values are such strings, numbers, true, false or null:
 *
 *     {"key":"user:1","max_burst":15,"count_per_period":30,"period":60}
 *
 * flat_scan reads exactly that shape and hands each member, typed, to a
 * consumer: api_json_flat_object builds the tree jansson builds from them
 * (the same members, in the same order, of the same types), api_body_fields
 * keeps them in a room for a field source without a tree.  Anything else
 * (an escape, a byte outside printable ASCII, an integer of more than 18
 * digits, a real too large for a double, a nested value, a repeated name, a
 * syntax error) fails and the body goes to jansson, which reads it or names
 * the error: answers do not depend on which path read the body.  Measured
 * (issue 20): jansson's lexer was about a sixth of the instructions of a
 * POST /throttle, and the tree a third of the rest.
 */
static bool flat_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* A string's text after its opening quote: printable ASCII, no '\\'; the
 * index of the closing quote, or 0 when the string is not of that kind. */
static size_t flat_string_end(const char *s, size_t n, size_t i)
{
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"')
            return i;
        if (c < 0x20 || c > 0x7e || c == '\\')
            return 0;
    }
    return 0;
}

/* The end of the run of digits at s[e] (e itself when there is none). */
static size_t flat_digits(const char *s, size_t n, size_t e)
{
    while (e < n && s[e] >= '0' && s[e] <= '9')
        e++;
    return e;
}

/* The rest of a number at s[e] whose integer part s[p..e) has been read:
 * JSON's fraction and exponent (at least one digit each), read as jansson
 * reads a real (strtod of the text); false for anything else, and for a
 * value strtod cannot hold (jansson names that error). */
static bool flat_real(const char *s, size_t n, size_t p, size_t e, size_t *i, api_field_t *v)
{
    if (s[e] == '.') {
        size_t f = e + 1;
        if ((e = flat_digits(s, n, f)) == f)
            return false;
    }
    if (e < n && (s[e] == 'e' || s[e] == 'E')) {
        size_t x = e + 1 < n && (s[e + 1] == '+' || s[e + 1] == '-') ? e + 2 : e + 1;
        if ((e = flat_digits(s, n, x)) == x)
            return false;
    }
    char text[64];
    if (e - p >= sizeof(text))
        return false;
    memcpy(text, s + p, e - p);
    text[e - p] = '\0';
    v->d = strtod(text, NULL);
    if (!isfinite(v->d))
        return false;
    v->type = API_F_REAL;
    *i = e;
    return true;
}

/* One value at s[*i] into *v: a string (v->s into s, not NUL-terminated),
 * an integer of at most 18 digits, a real (a fraction or an exponent, as
 * flat_real reads it), true, false or null (API_F_OTHER); false for anything
 * else. */
static bool flat_value(const char *s, size_t n, size_t *i, api_field_t *v)
{
    size_t p = *i;
    if (p >= n)
        return false;
    if (s[p] == '"') {
        size_t end = flat_string_end(s, n, p + 1);
        if (!end)
            return false;
        *i = end + 1;
        v->type = API_F_STRING;
        v->s = s + p + 1;
        v->len = end - p - 1;
        return true;
    }
    if (s[p] == '-' || (s[p] >= '0' && s[p] <= '9')) {
        bool neg = s[p] == '-';
        size_t d = neg ? p + 1 : p, e = d;
        int64_t x = 0;
        while (e < n && s[e] >= '0' && s[e] <= '9' && e - d < 18)
            x = x * 10 + (s[e++] - '0');
        if (e == d || (s[d] == '0' && e - d > 1) || (e < n && s[e] >= '0' && s[e] <= '9'))
            return false;
        if (e < n && (s[e] == '.' || s[e] == 'e' || s[e] == 'E'))
            return flat_real(s, n, p, e, i, v);
        *i = e;
        v->type = API_F_INT;
        v->i = neg ? -x : x;
        return true;
    }
    static const struct {
        const char *word;
        size_t len;
    } words[] = { { "true", 4 }, { "false", 5 }, { "null", 4 } };
    for (size_t w = 0; w < 3; w++)
        if (n - p >= words[w].len && memcmp(s + p, words[w].word, words[w].len) == 0) {
            *i = p + words[w].len;
            v->type = w == 2 ? API_F_OTHER : API_F_BOOL;
            v->b = w == 0;
            return true;
        }
    return false;
}

/* A consumer of flat_scan: takes member name[0..nlen) (not NUL-terminated)
 * of value *v; false to stop the scan (a repeated name, no room). */
typedef bool (*flat_member_fn)(void *ctx, const char *name, size_t nlen, const api_field_t *v);

/* Reads s[0..n) as a flat object, each member to `member` in order: false
 * when the text is not of that shape or the consumer stopped. */
static bool flat_scan(const char *s, size_t n, flat_member_fn member, void *ctx)
{
    size_t i = 0;
    while (i < n && flat_ws(s[i]))
        i++;
    if (i == n || s[i] != '{')
        return false;
    i++;
    while (i < n && flat_ws(s[i]))
        i++;
    bool more = i < n && s[i] != '}';
    while (more) {
        size_t kend = i < n && s[i] == '"' ? flat_string_end(s, n, i + 1) : 0;
        if (!kend)
            return false;
        size_t k = i + 1, klen = kend - k;
        i = kend + 1;
        while (i < n && flat_ws(s[i]))
            i++;
        if (i == n || s[i] != ':')
            return false;
        i++;
        while (i < n && flat_ws(s[i]))
            i++;
        api_field_t v;
        if (!flat_value(s, n, &i, &v) || !member(ctx, s + k, klen, &v))
            return false;
        while (i < n && flat_ws(s[i]))
            i++;
        if (i < n && s[i] == ',') {
            i++;
            while (i < n && flat_ws(s[i]))
                i++;
        } else {
            more = false;
        }
    }
    if (i == n || s[i] != '}')
        return false;
    i++;
    while (i < n && flat_ws(s[i]))
        i++;
    return i == n;
}

/* The tree consumer: each member into the object ctx, a repeat refused. */
static bool flat_tree_member(void *ctx, const char *name, size_t nlen, const api_field_t *v)
{
    json_t *o = ctx;
    if (json_object_getn(o, name, nlen))
        return false;
    json_t *j = v->type == API_F_STRING ? json_stringn_nocheck(v->s, v->len)
                : v->type == API_F_INT  ? json_integer(v->i)
                : v->type == API_F_REAL ? json_real(v->d)
                : v->type == API_F_BOOL ? json_boolean(v->b)
                                        : json_null();
    return j && json_object_setn_new_nocheck(o, name, nlen, j) == 0;
}

json_t *api_json_flat_object(const char *s, size_t n)
{
    json_t *o = json_object();
    if (o && !flat_scan(s, n, flat_tree_member, o)) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* Copies s[0..n) NUL-terminated into room's text; NULL when it does not fit. */
static const char *flat_room_copy(api_flat_t *room, const char *s, size_t n)
{
    if (n >= sizeof(room->text) - room->used)
        return NULL;
    char *c = room->text + room->used;
    memcpy(c, s, n);
    c[n] = '\0';
    room->used += n + 1;
    return c;
}

/* The room consumer: each member into the room ctx, a repeat refused. */
static bool flat_room_member(void *ctx, const char *name, size_t nlen, const api_field_t *v)
{
    api_flat_t *room = ctx;
    for (int k = 0; k < room->n; k++)
        if (room->m[k].name[0] == (nlen ? name[0] : '\0') && strncmp(room->m[k].name, name, nlen) == 0 &&
            room->m[k].name[nlen] == '\0')
            return false;
    if (room->n == API_FLAT_MEMBERS)
        return false;
    api_flat_member_t *m = &room->m[room->n];
    m->v = *v;
    if (!(m->name = flat_room_copy(room, name, nlen)) ||
        (v->type == API_F_STRING && !(m->v.s = flat_room_copy(room, v->s, v->len))))
        return false;
    room->n++;
    return true;
}

/* The media type and emptiness checks every JSON body gets first. */
static bool body_acceptable(const api_req_t *req, api_err_t *err)
{
    if (!json_media_type(req->ctype)) {
        api_err_set(err, API_E_UNSUPPORTED_MEDIA_TYPE, NULL,
                    "the body must be JSON (Content-Type: application/json), not %s", req->ctype);
        return false;
    }
    if (req->body_len == 0) {
        api_err_set(err, API_E_BAD_REQUEST, NULL, "a JSON object body is required");
        return false;
    }
    return true;
}

/* The first field of f not in `allowed`, refused by name. */
static bool fields_allowed(const api_fields_t *f, const char *const *allowed, api_err_t *err)
{
    api_fields_iter_t it = { 0 };
    const char *name;
    while ((name = api_fields_next(f, &it)))
        if (!api_name_listed(allowed, name)) {
            api_err_set(err, API_E_BAD_REQUEST, name, "unknown field '%s'", name);
            return false;
        }
    return true;
}

static json_t *body_object(api_req_t *req, const char *const *allowed, api_err_t *err)
{
    if (!body_acceptable(req, err))
        return NULL;
    json_error_t jerr;
    json_t *j = api_json_flat_object((const char *)req->body, req->body_len);
    if (!j)
        j = json_loadb((const char *)req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        api_err_set(err, API_E_BAD_REQUEST, NULL, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                    jerr.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        api_err_set(err, API_E_BAD_REQUEST, NULL, "the body must be a JSON object");
        return NULL;
    }
    json_decref(req->json);
    req->json = j;   /* owned by the request from here: an error may name one of its fields */
    api_fields_t f = api_fields_json(j);
    return !allowed || fields_allowed(&f, allowed, err) ? j : NULL;
}

json_t *api_body_object(api_req_t *req, api_resp_t *resp, const char *const *allowed)
{
    api_err_t err;
    json_t *j = body_object(req, allowed, &err);
    api_err_answered(resp, j != NULL, &err);
    return j;
}

/* ------------------------------------------------------------------------ */
/* Field sources                                                            */
/* ------------------------------------------------------------------------ */

bool api_body_fields(api_req_t *req, api_resp_t *resp, const char *const *allowed, api_flat_t *room,
                     api_fields_t *f)
{
    api_err_t err;
    if (!body_acceptable(req, &err)) {
        api_err_respond(resp, &err);
        return false;
    }
    room->n = 0;
    room->used = 0;
    if (flat_scan((const char *)req->body, req->body_len, flat_room_member, room)) {
        *f = (api_fields_t){ .kind = API_FIELDS_FLAT, .flat = room };
        return api_err_answered(resp, !allowed || fields_allowed(f, allowed, &err), &err);
    }
    json_t *j = api_body_object(req, resp, allowed);
    *f = api_fields_json(j);
    return j != NULL;
}

api_fields_t api_fields_json(json_t *obj)
{
    api_fields_t f = { .kind = API_FIELDS_JSON, .obj = obj };
    return f;
}

/* The typed value of query parameter q, as the query has always been read
 * (api/params.h): false for a string that is not UTF-8 text, which is absent. */
static bool param_field(const api_param_t *q, api_field_t *v)
{
    if (api_parse_i64(q->value, q->vlen, &v->i)) {
        v->type = API_F_INT;
    } else if (api_parse_double(q->value, q->vlen, &v->d)) {
        v->type = API_F_REAL;
    } else if (strcmp(q->value, "true") == 0 || strcmp(q->value, "false") == 0) {
        v->type = API_F_BOOL;
        v->b = q->value[0] == 't';
    } else {
        v->type = API_F_STRING;
        v->s = q->value;
        v->len = q->vlen;
        return codec_utf8_ok(q->value, q->vlen);
    }
    return true;
}

/* True when parameter q is a field of f: not the skipped one, not absent.
 * UTF-8 text is always present (the common case, one scan); anything else
 * is typed first. */
static bool param_is_field(const api_fields_t *f, const api_param_t *q)
{
    if (f->skip && same_name(q->name, f->skip))
        return false;
    api_field_t v;
    return codec_utf8_ok(q->value, q->vlen) || param_field(q, &v);
}

/* The member of room named `name`, or NULL. */
static const api_flat_member_t *flat_member(const api_flat_t *room, const char *name)
{
    for (int i = 0; i < room->n; i++)
        if (same_name(room->m[i].name, name))
            return &room->m[i];
    return NULL;
}

bool api_fields_query(const api_req_t *req, const char *skip, api_flat_t *room, api_fields_t *f, api_err_t *err)
{
    f->kind = API_FIELDS_QUERY;
    f->obj = NULL;
    f->flat = NULL;
    f->params = req->params;
    f->nparams = req->nparams;
    f->skip = skip;
    /* Typed once, into the room: each parameter that is a field (not the
     * skipped one, not absent), in order; a repeat of one is refused (an
     * absent repeat too, as always).  The names and strings stay in the
     * request's decoded query.  More than the room holds: read in place. */
    room->n = 0;
    room->used = 0;
    bool fits = true;
    for (int i = 0; i < f->nparams && fits; i++) {
        const api_param_t *q = &f->params[i];
        if (skip && same_name(q->name, skip))
            continue;
        if (flat_member(room, q->name)) {
            api_err_set(err, API_E_BAD_REQUEST, q->name, "query parameter '%s' given more than once", q->name);
            return false;
        }
        api_field_t v;
        if (!param_field(q, &v))
            continue;
        if (room->n == API_FLAT_MEMBERS) {
            fits = false;
        } else {
            room->m[room->n].name = q->name;
            room->m[room->n++].v = v;
        }
    }
    if (fits) {
        f->kind = API_FIELDS_FLAT;
        f->flat = room;
        return true;
    }
    for (int i = 1; i < f->nparams; i++) {
        const api_param_t *q = &f->params[i];
        if (skip && same_name(q->name, skip))
            continue;
        for (int j = 0; j < i; j++)
            if (same_name(f->params[j].name, q->name) && param_is_field(f, &f->params[j])) {
                api_err_set(err, API_E_BAD_REQUEST, q->name, "query parameter '%s' given more than once", q->name);
                return false;
            }
    }
    return true;
}

bool api_fields_get(const api_fields_t *f, const char *name, api_field_t *v)
{
    if (f->kind == API_FIELDS_QUERY) {
        for (int i = 0; i < f->nparams; i++) {
            const api_param_t *q = &f->params[i];
            if (same_name(q->name, name) && !(f->skip && same_name(name, f->skip)) && param_field(q, v))
                return true;
        }
        return false;
    }
    if (f->kind == API_FIELDS_FLAT) {
        const api_flat_member_t *m = flat_member(f->flat, name);
        if (m)
            *v = m->v;
        return m != NULL;
    }
    json_t *j = json_object_get(f->obj, name);
    if (!j)
        return false;
    switch (json_typeof(j)) {
    case JSON_INTEGER:
        v->type = API_F_INT;
        v->i = json_integer_value(j);
        break;
    case JSON_REAL:
        v->type = API_F_REAL;
        v->d = json_real_value(j);
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        v->type = API_F_BOOL;
        v->b = json_is_true(j);
        break;
    case JSON_STRING:
        v->type = API_F_STRING;
        v->s = json_string_value(j);
        v->len = json_string_length(j);
        break;
    default:
        v->type = API_F_OTHER;
        break;
    }
    return true;
}

const char *api_fields_next(const api_fields_t *f, api_fields_iter_t *it)
{
    if (f->kind == API_FIELDS_QUERY) {
        while (it->i < f->nparams) {
            const api_param_t *q = &f->params[it->i++];
            if (param_is_field(f, q))
                return q->name;
        }
        return NULL;
    }
    if (f->kind == API_FIELDS_FLAT)
        return it->i < f->flat->n ? f->flat->m[it->i++].name : NULL;
    it->j = it->i++ ? json_object_iter_next(f->obj, it->j) : json_object_iter(f->obj);
    return it->j ? json_object_iter_key(it->j) : NULL;
}

bool api_field_number(const api_field_t *v, double *d)
{
    if (v->type == API_F_INT)
        *d = (double)v->i;
    else if (v->type == API_F_REAL)
        *d = v->d;
    else
        return false;
    return true;
}

/* Field `name` of f: false when it is missing and required; otherwise true,
 * *found telling whether it was given.  Sets *present (may be NULL). */
static bool field_get(const api_fields_t *f, const char *name, bool required, bool *present, api_field_t *v,
                      bool *found, api_err_t *err)
{
    *found = api_fields_get(f, name, v);
    if (present)
        *present = *found;
    if (!*found && required) {
        api_err_set(err, API_E_BAD_REQUEST, name, "missing field '%s'", name);
        return false;
    }
    return true;
}

bool api_fields_int(const api_fields_t *f, const char *name, bool required, int64_t min, int64_t max,
                    int64_t *out, bool *present, api_err_t *err)
{
    api_field_t v;
    bool found;
    if (!field_get(f, name, required, present, &v, &found, err))
        return false;
    if (!found)
        return true;
    if (v.type != API_F_INT) {
        api_err_set(err, API_E_BAD_REQUEST, name, "'%s' must be an integer", name);
        return false;
    }
    if (v.i < min || v.i > max) {
        if (max == INT64_MAX)
            api_err_set(err, API_E_BAD_REQUEST, name, "'%s' must be >= %lld", name, (long long)min);
        else
            api_err_set(err, API_E_BAD_REQUEST, name, "'%s' must be between %lld and %lld", name, (long long)min,
                        (long long)max);
        return false;
    }
    *out = v.i;
    return true;
}

bool api_fields_double(const api_fields_t *f, const char *name, bool required, double min, double max,
                       double *out, bool *present, api_err_t *err)
{
    api_field_t v;
    bool found;
    if (!field_get(f, name, required, present, &v, &found, err))
        return false;
    if (!found)
        return true;
    double x;
    if (!api_field_number(&v, &x)) {
        api_err_set(err, API_E_BAD_REQUEST, name, "'%s' must be a number", name);
        return false;
    }
    if (!isfinite(x) || x < min || x > max) {
        api_err_set(err, API_E_BAD_REQUEST, name, "'%s' must be between %g and %g", name, min, max);
        return false;
    }
    *out = x;
    return true;
}

bool api_fields_bool(const api_fields_t *f, const char *name, bool *out, bool *present, api_err_t *err)
{
    api_field_t v;
    bool found;
    if (!field_get(f, name, false, present, &v, &found, err))
        return false;
    if (!found)
        return true;
    if (v.type != API_F_BOOL) {
        api_err_set(err, API_E_BAD_REQUEST, name, "'%s' must be true or false", name);
        return false;
    }
    *out = v.b;
    return true;
}

bool api_fields_string(const api_fields_t *f, const char *name, bool required, const char **out, size_t *len,
                       api_err_t *err)
{
    api_field_t v;
    bool found;
    if (!field_get(f, name, required, NULL, &v, &found, err))
        return false;
    if (!found)
        return true;
    if (v.type != API_F_STRING) {
        api_err_set(err, API_E_BAD_REQUEST, name, "'%s' must be a string", name);
        return false;
    }
    *out = v.s;
    if (len)
        *len = v.len;
    return true;
}

/* The JSON object forms. */
bool api_member_int(json_t *obj, const char *name, bool required, int64_t min, int64_t max, int64_t *out,
                    bool *present, api_err_t *err)
{
    api_fields_t f = api_fields_json(obj);
    return api_fields_int(&f, name, required, min, max, out, present, err);
}

bool api_member_double(json_t *obj, const char *name, bool required, double min, double max, double *out,
                       bool *present, api_err_t *err)
{
    api_fields_t f = api_fields_json(obj);
    return api_fields_double(&f, name, required, min, max, out, present, err);
}

bool api_member_bool(json_t *obj, const char *name, bool *out, bool *present, api_err_t *err)
{
    api_fields_t f = api_fields_json(obj);
    return api_fields_bool(&f, name, out, present, err);
}

bool api_member_string(json_t *obj, const char *name, bool required, const char **out, size_t *len,
                       api_err_t *err)
{
    api_fields_t f = api_fields_json(obj);
    return api_fields_string(&f, name, required, out, len, err);
}

/* The response forms: the reader, and its failure answered. */
bool api_obj_int(api_resp_t *resp, json_t *obj, const char *name, bool required, int64_t min, int64_t max,
                 int64_t *out, bool *present)
{
    api_err_t err;
    return api_err_answered(resp, api_member_int(obj, name, required, min, max, out, present, &err), &err);
}

bool api_obj_double(api_resp_t *resp, json_t *obj, const char *name, bool required, double min, double max,
                    double *out, bool *present)
{
    api_err_t err;
    return api_err_answered(resp, api_member_double(obj, name, required, min, max, out, present, &err), &err);
}

bool api_obj_bool(api_resp_t *resp, json_t *obj, const char *name, bool *out, bool *present)
{
    api_err_t err;
    return api_err_answered(resp, api_member_bool(obj, name, out, present, &err), &err);
}

bool api_obj_string(api_resp_t *resp, json_t *obj, const char *name, bool required, const char **out,
                    size_t *len)
{
    api_err_t err;
    return api_err_answered(resp, api_member_string(obj, name, required, out, len, &err), &err);
}

bool api_obj_key(api_resp_t *resp, json_t *obj, const char *name, bool required, const char **out, size_t *len)
{
    const char *k = NULL;
    size_t n = 0;
    api_err_t err;
    bool ok = api_member_string(obj, name, required, &k, &n, &err) && (!k || api_key_check(name, k, n, &err));
    if (ok && k) {
        *out = k;
        *len = n;
    }
    return api_err_answered(resp, ok, &err);
}

bool api_check_key(api_resp_t *resp, const char *field, const char *key, size_t len)
{
    api_err_t err;
    return api_err_answered(resp, api_key_check(field, key, len, &err), &err);
}

bool api_path_key(const api_req_t *req, api_resp_t *resp, const char **key, size_t *len)
{
    api_err_t err;
    return api_err_answered(resp, path_key(req, key, len, &err), &err);
}

/* ------------------------------------------------------------------------ */
/* Query strings                                                            */
/* ------------------------------------------------------------------------ */

static const char *const no_params[] = { NULL };

static bool query_allow(const api_req_t *req, const char *const *allowed, api_err_t *err)
{
    for (int i = 0; i < req->nparams; i++) {
        if (!api_name_listed(allowed, req->params[i].name)) {
            api_err_set(err, API_E_BAD_REQUEST, req->params[i].name, "unknown query parameter '%s'",
                        req->params[i].name);
            return false;
        }
    }
    return true;
}

bool api_query_allow(const api_req_t *req, api_resp_t *resp, const char *const *allowed)
{
    api_err_t err;
    return api_err_answered(resp, query_allow(req, allowed, &err), &err);
}

bool api_no_query(const api_req_t *req, api_resp_t *resp) { return api_query_allow(req, resp, no_params); }

json_t *api_key_body(api_req_t *req, api_resp_t *resp, const char *const *fields, const char **key, size_t *klen)
{
    api_err_t err;
    json_t *j = NULL;
    if (path_key(req, key, klen, &err) && query_allow(req, no_params, &err))
        j = body_object(req, fields, &err);
    api_err_answered(resp, j != NULL, &err);
    return j;
}

const char *api_query_get(const api_req_t *req, const char *name, size_t *len)
{
    for (int i = 0; i < req->nparams; i++)
        if (same_name(req->params[i].name, name)) {
            if (len)
                *len = req->params[i].vlen;
            return req->params[i].value;
        }
    return NULL;
}

size_t api_query_count(const api_req_t *req, const char *name)
{
    size_t n = 0;
    for (int i = 0; i < req->nparams; i++)
        if (same_name(req->params[i].name, name))
            n++;
    return n;
}

bool api_parse_i64(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 20)
        return false;
    /* up to 18 digits after an optional '-' cannot overflow: read here;
     * anything else (a NUL, another byte, more digits) as strtoll reads it */
    size_t d = s[0] == '-';
    if (len > d && len - d <= 18) {
        int64_t v = 0;
        size_t i = d;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            v = v * 10 + (s[i++] - '0');
        if (i == len) {
            *out = d ? -v : v;
            return true;
        }
    }
    char buf[24];
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (!(buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9')))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || end == buf)
        return false;
    *out = v;
    return true;
}

bool api_parse_double(const char *s, size_t len, double *out)
{
    if (len == 0 || len > 64)
        return false;
    char buf[72];
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (!(buf[0] == '-' || buf[0] == '+' || buf[0] == '.' || (buf[0] >= '0' && buf[0] <= '9')))
        return false;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end || end == buf || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* The value of query parameter `name`, found in one pass over the
 * parameters: false when it is given more than once, or is missing and
 * required; otherwise true with *v NULL when it is absent.  Clears *present
 * (may be NULL), which the reader sets once the value is accepted. */
static bool query_once(const api_req_t *req, const char *name, bool required, const char **v, size_t *len,
                       bool *present, api_err_t *err)
{
    if (present)
        *present = false;
    *v = NULL;
    size_t n = 0;
    for (int i = 0; i < req->nparams; i++)
        if (same_name(req->params[i].name, name) && n++ == 0) {
            *v = req->params[i].value;
            *len = req->params[i].vlen;
        }
    if (n > 1) {
        api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' given %zu times", name, n);
        return false;
    }
    if (!*v && required) {
        api_err_set(err, API_E_BAD_REQUEST, name, "missing query parameter '%s'", name);
        return false;
    }
    return true;
}

static bool query_int(const api_req_t *req, const char *name, bool required, int64_t min, int64_t max, int64_t *out,
                      bool *present, api_err_t *err)
{
    const char *v;
    size_t len;
    if (!query_once(req, name, required, &v, &len, present, err))
        return false;
    if (!v)
        return true;
    int64_t x;
    if (!api_parse_i64(v, len, &x)) {
        api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' must be an integer", name);
        return false;
    }
    if (x < min || x > max) {
        if (max == INT64_MAX)
            api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' must be >= %lld", name,
                            (long long)min);
        else
            api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' must be between %lld and %lld",
                            name, (long long)min, (long long)max);
        return false;
    }
    *out = x;
    if (present)
        *present = true;
    return true;
}

static bool query_double(const api_req_t *req, const char *name, bool required, double min, double max, double *out,
                         bool *present, api_err_t *err)
{
    const char *v;
    size_t len;
    if (!query_once(req, name, required, &v, &len, present, err))
        return false;
    if (!v)
        return true;
    double x;
    if (!api_parse_double(v, len, &x)) {
        api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' must be a finite number", name);
        return false;
    }
    if (x < min || x > max) {
        api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' must be between %g and %g", name,
                        min, max);
        return false;
    }
    *out = x;
    if (present)
        *present = true;
    return true;
}

static bool query_bool(const api_req_t *req, const char *name, bool *out, bool *present, api_err_t *err)
{
    const char *v;
    size_t len;
    if (!query_once(req, name, false, &v, &len, present, err))
        return false;
    if (!v)
        return true;
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "") == 0) {
        *out = true;
    } else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
        *out = false;
    } else {
        api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' must be true or false", name);
        return false;
    }
    if (present)
        *present = true;
    return true;
}

bool api_query_string(const api_req_t *req, api_resp_t *resp, const char *name, bool required, const char **v,
                      size_t *len)
{
    api_err_t err;
    return api_err_answered(resp, query_once(req, name, required, v, len, NULL, &err), &err);
}

bool api_query_int(const api_req_t *req, api_resp_t *resp, const char *name, bool required, int64_t min,
                   int64_t max, int64_t *out, bool *present)
{
    api_err_t err;
    return api_err_answered(resp, query_int(req, name, required, min, max, out, present, &err), &err);
}

bool api_query_double(const api_req_t *req, api_resp_t *resp, const char *name, bool required, double min,
                      double max, double *out, bool *present)
{
    api_err_t err;
    return api_err_answered(resp, query_double(req, name, required, min, max, out, present, &err), &err);
}

bool api_query_bool(const api_req_t *req, api_resp_t *resp, const char *name, bool *out, bool *present)
{
    api_err_t err;
    return api_err_answered(resp, query_bool(req, name, out, present, &err), &err);
}
