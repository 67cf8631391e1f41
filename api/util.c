/*
 * util.c - the pieces every handler shares: the error envelope and its one
 * code -> status table, JSON and query-string readers whose failures name the
 * offending field, key validation, journaling and eviction.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/routes.h"

/* ------------------------------------------------------------------------ */
/* Error envelope                                                           */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    int status;
} codes[API_E__COUNT] = {
    [API_E_BAD_REQUEST] = { "BAD_REQUEST", 400 },
    [API_E_UNAUTHORIZED] = { "UNAUTHORIZED", 401 },
    [API_E_FORBIDDEN] = { "FORBIDDEN", 403 },
    [API_E_NOT_FOUND] = { "NOT_FOUND", 404 },
    [API_E_METHOD_NOT_ALLOWED] = { "METHOD_NOT_ALLOWED", 405 },
    [API_E_WRONGTYPE] = { "WRONGTYPE", 409 },
    [API_E_EXISTS] = { "EXISTS", 409 },
    [API_E_PAYLOAD_TOO_LARGE] = { "PAYLOAD_TOO_LARGE", 413 },
    [API_E_URI_TOO_LONG] = { "URI_TOO_LONG", 414 },
    [API_E_UNSUPPORTED_MEDIA_TYPE] = { "UNSUPPORTED_MEDIA_TYPE", 415 },
    [API_E_OUT_OF_MEMORY] = { "OUT_OF_MEMORY", 507 },
    [API_E_INTERNAL] = { "INTERNAL", 500 },
    [API_E_UNAVAILABLE] = { "UNAVAILABLE", 503 },
    [API_E_NO_SPACE] = { "NO_SPACE", 507 },
};

int api_code_status(api_code_t code) { return codes[code].status; }
const char *api_code_name(api_code_t code) { return codes[code].name; }

static void error_v(api_resp_t *resp, api_code_t code, const char *field, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    json_t *err = json_object();
    json_object_set_new(err, "code", json_string(codes[code].name));
    /* messages may quote user input: keep them valid JSON strings */
    json_t *m = json_string(msg);
    json_object_set_new(err, "message", m ? m : json_string("(message not representable)"));
    if (field)
        json_object_set_new(err, "field", json_string(field));
    api_json(resp, codes[code].status, json_pack("{s:o}", "error", err));
}

void api_error(api_resp_t *resp, api_code_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_v(resp, code, NULL, fmt, ap);
    va_end(ap);
}

void api_error_field(api_resp_t *resp, api_code_t code, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_v(resp, code, field, fmt, ap);
    va_end(ap);
}

void api_json(api_resp_t *resp, int status, json_t *obj)
{
    free(resp->body);
    resp->body = NULL;
    resp->len = 0;
    resp->ctype = NULL;
    resp->status = status;
    size_t len = 0;
    char *s = obj ? api_json_text(obj, &len) : NULL;
    json_decref(obj);
    if (!s) {
        static const char oom[] = "{\"error\":{\"code\":\"OUT_OF_MEMORY\",\"message\":\"out of memory\"}}";
        resp->status = 507;
        resp->body = strdup(oom);
        resp->len = resp->body ? sizeof(oom) - 1 : 0;
        return;
    }
    resp->body = s;
    resp->len = len;
}

void api_body(api_resp_t *resp, int status, const char *ctype, const void *body, size_t len)
{
    free(resp->body);
    resp->body = malloc(len ? len : 1);
    if (!resp->body) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    memcpy(resp->body, body, len);
    resp->len = len;
    resp->status = status;
    resp->ctype = ctype;
}

void api_add_header(api_resp_t *resp, const char *name, const char *fmt, ...)
{
    if (resp->nheaders == API_MAX_HEADERS)
        return;
    api_header_t *h = &resp->headers[resp->nheaders++];
    h->name = name;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->value, sizeof(h->value), fmt, ap);
    va_end(ap);
}

/* What a value of each type is called in messages, with its article: "key
 * holds a bit string (bits), not an activity set (activity)". */
static const struct {
    const char *type;
    const char *noun;
} type_nouns[] = {
    { "throttle", "a rate limiter" },  { "counter", "a counter" },         { "uv", "a HyperLogLog" },
    { "bloom", "a Bloom filter" },     { "cuckoo", "a Cuckoo filter" },   { "cms", "a Count-Min sketch" },
    { "topk", "a Top-K" },             { "tdigest", "a T-Digest" },       { "bits", "a bit string" },
    { "activity", "an activity set" }, { "geo", "a geo set" },            { "ts", "a time series" },
};

static const char *type_noun(const char *type)
{
    for (size_t i = 0; i < sizeof(type_nouns) / sizeof(type_nouns[0]); i++)
        if (strcmp(type_nouns[i].type, type) == 0)
            return type_nouns[i].noun;
    return "a value";
}

void api_wrongtype(api_resp_t *resp, const ks_entry_t *e, const char *wanted, const char *role)
{
    const char *held = ks_entry_type(e)->name;
    api_error(resp, API_E_WRONGTYPE, "%s%skey holds %s (%s), not %s (%s)", role ? role : "", role ? ": " : "",
              type_noun(held), held, type_noun(wanted), wanted);
}

ks_entry_t *api_find(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const ks_key_t *k,
                     const ks_type_t *type, bool write, bool must_exist, bool *failed)
{
    *failed = false;
    ks_entry_t *e = ks_find(srv->ks, k, api_now_ms(req));
    if (!e) {
        if (must_exist) {
            api_error(resp, API_E_NOT_FOUND, "no such key (create the %s with PUT /%s/{key})", type->name,
                      type->name);
            *failed = true;
        }
        return NULL;
    }
    if (ks_entry_type(e) != type) {
        api_wrongtype(resp, e, type->name, NULL);
        *failed = true;
        return NULL;
    }
    if (write)
        ks_entry_prepare_write(srv->ks, e);
    return e;
}

void api_answer_info(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                     const ks_type_t *type, json_t *(*info)(const void *value))
{
    ks_key_t k = ks_key(srv->ks, key, klen);
    ks_shard_t *sh = ks_shard_at(srv->ks, k.shard);
    ks_shard_lock(sh);
    bool failed;
    ks_entry_t *e = api_find(srv, req, resp, &k, type, false, true, &failed);
    json_t *answer = e ? info(ks_entry_value(e)) : NULL;
    ks_shard_unlock(sh);
    if (answer)
        api_json(resp, 200, answer);
    else if (e)
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
}

void api_create_key(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                    const ks_type_t *type, void *value, json_t *(*info)(const void *value))
{
    if (!value) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory creating the %s", type->name);
        return;
    }
    ks_t *ks = srv->ks;
    ks_key_t k = ks_key(ks, key, klen);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(ks, &k, api_now_ms(req));
    if (e) {
        ks_shard_unlock(sh);
        type->free(value);
        if (ks_entry_type(e) == type)
            api_error(resp, API_E_EXISTS, "a %s already exists at this key", type->name);
        else
            api_wrongtype(resp, e, type->name, NULL);
        return;
    }
    if (!ks_add(ks, &k, type, value, KS_NO_EXPIRY, api_now_ms(req))) {
        ks_shard_unlock(sh);
        type->free(value);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory creating the %s", type->name);
        return;
    }
    api_journal(srv, req, resp);
    json_t *answer = info ? info(value) : json_pack("{s:b}", "created", 1);
    ks_shard_unlock(sh);
    api_json(resp, 201, answer);
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

bool api_check_key(api_resp_t *resp, const char *field, const char *key, size_t len)
{
    if (len == 0) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "%s must not be empty", field);
        return false;
    }
    if (len > KS_KEY_MAX) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "%s is %zu bytes; the limit is %d", field, len,
                        KS_KEY_MAX);
        return false;
    }
    if (!codec_text_ok(key, len)) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "%s must be UTF-8 text without NUL bytes", field);
        return false;
    }
    return true;
}

bool api_path_key(const api_req_t *req, api_resp_t *resp, const char **key, size_t *len)
{
    *key = api_path_param(req, "key", len);
    if (!*key) {
        api_error(resp, API_E_INTERNAL, "route has no {key}");
        return false;
    }
    return api_check_key(resp, "key", *key, *len);
}

size_t api_escape_segment(const char *key, size_t len, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)key[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
            c == '_' || c == '.' || c == '~') {
            out[j++] = (char)c;
        } else {
            out[j++] = '%';
            out[j++] = hex[c >> 4];
            out[j++] = hex[c & 15];
        }
    }
    out[j] = '\0';
    return j;
}

/* ------------------------------------------------------------------------ */
/* JSON bodies                                                              */
/* ------------------------------------------------------------------------ */

/* Media types a JSON body may arrive with: JSON itself, none, and what
 * `curl -d` sends by default (form-urlencoded) or text/plain. */
static bool json_media_type(const char *ct)
{
    if (!ct || !*ct)
        return true;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    static const char *const ok[] = { "application/json", "application/x-www-form-urlencoded", "text/plain",
                                      "*/*" };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (strlen(ok[i]) == n && strncasecmp(ct, ok[i], n) == 0)
            return true;
    /* application/<something>+json */
    return n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0;
}

json_t *api_body_object(api_req_t *req, api_resp_t *resp, const char *const *allowed)
{
    if (!json_media_type(req->ctype)) {
        api_error(resp, API_E_UNSUPPORTED_MEDIA_TYPE, "the body must be JSON (Content-Type: application/json), not %s",
                  req->ctype);
        return NULL;
    }
    if (req->body_len == 0) {
        api_error(resp, API_E_BAD_REQUEST, "a JSON object body is required");
        return NULL;
    }
    json_error_t err;
    json_t *j = json_loadb((const char *)req->body, req->body_len, JSON_REJECT_DUPLICATES, &err);
    if (!j) {
        api_error(resp, API_E_BAD_REQUEST, "invalid JSON at line %d column %d: %s", err.line, err.column,
                  err.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        api_error(resp, API_E_BAD_REQUEST, "the body must be a JSON object");
        return NULL;
    }
    if (allowed) {
        const char *name;
        json_t *v;
        json_object_foreach(j, name, v) {
            bool ok = false;
            for (const char *const *a = allowed; *a; a++)
                if (strcmp(*a, name) == 0)
                    ok = true;
            if (!ok) {
                api_error_field(resp, API_E_BAD_REQUEST, name, "unknown field '%s'", name);
                json_decref(j);
                return NULL;
            }
        }
    }
    json_decref(req->json);
    req->json = j;
    return j;
}

bool api_obj_int(api_resp_t *resp, json_t *obj, const char *name, bool required, int64_t min, int64_t max,
                 int64_t *out, bool *present)
{
    json_t *v = json_object_get(obj, name);
    if (present)
        *present = v != NULL;
    if (!v) {
        if (required)
            api_error_field(resp, API_E_BAD_REQUEST, name, "missing field '%s'", name);
        return !required;
    }
    if (!json_is_integer(v)) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be an integer", name);
        return false;
    }
    json_int_t x = json_integer_value(v);
    if (x < min || x > max) {
        if (max == INT64_MAX)
            api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be >= %lld", name, (long long)min);
        else
            api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be between %lld and %lld", name,
                            (long long)min, (long long)max);
        return false;
    }
    *out = x;
    return true;
}

bool api_obj_double(api_resp_t *resp, json_t *obj, const char *name, bool required, double min, double max,
                    double *out, bool *present)
{
    json_t *v = json_object_get(obj, name);
    if (present)
        *present = v != NULL;
    if (!v) {
        if (required)
            api_error_field(resp, API_E_BAD_REQUEST, name, "missing field '%s'", name);
        return !required;
    }
    if (!json_is_number(v)) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be a number", name);
        return false;
    }
    double x = json_number_value(v);
    if (!isfinite(x) || x < min || x > max) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be between %g and %g", name, min, max);
        return false;
    }
    *out = x;
    return true;
}

bool api_obj_bool(api_resp_t *resp, json_t *obj, const char *name, bool *out, bool *present)
{
    json_t *v = json_object_get(obj, name);
    if (present)
        *present = v != NULL;
    if (!v)
        return true;
    if (!json_is_boolean(v)) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be true or false", name);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

bool api_obj_string(api_resp_t *resp, json_t *obj, const char *name, bool required, const char **out,
                    size_t *len)
{
    json_t *v = json_object_get(obj, name);
    if (!v) {
        if (required)
            api_error_field(resp, API_E_BAD_REQUEST, name, "missing field '%s'", name);
        return !required;
    }
    if (!json_is_string(v)) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be a string", name);
        return false;
    }
    *out = json_string_value(v);
    if (len)
        *len = json_string_length(v);
    return true;
}

bool api_obj_key(api_resp_t *resp, json_t *obj, const char *name, bool required, const char **out, size_t *len)
{
    const char *k = NULL;
    size_t n = 0;
    if (!api_obj_string(resp, obj, name, required, &k, &n))
        return false;
    if (!k)
        return true;
    if (!api_check_key(resp, name, k, n))
        return false;
    *out = k;
    *len = n;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Query strings                                                            */
/* ------------------------------------------------------------------------ */

json_t *api_key_body(api_req_t *req, api_resp_t *resp, const char *const *fields, const char **key, size_t *klen)
{
    if (!api_path_key(req, resp, key, klen) || !api_no_query(req, resp))
        return NULL;
    return api_body_object(req, resp, fields);
}

bool api_no_query(const api_req_t *req, api_resp_t *resp)
{
    return api_query_allow(req, resp, (const char *const[]){ NULL });
}

bool api_query_allow(const api_req_t *req, api_resp_t *resp, const char *const *allowed)
{
    for (int i = 0; i < req->nparams; i++) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, req->params[i].name) == 0)
                ok = true;
        if (!ok) {
            api_error_field(resp, API_E_BAD_REQUEST, req->params[i].name, "unknown query parameter '%s'",
                            req->params[i].name);
            return false;
        }
    }
    return true;
}

const char *api_query_get(const api_req_t *req, const char *name, size_t *len)
{
    for (int i = 0; i < req->nparams; i++)
        if (strcmp(req->params[i].name, name) == 0) {
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
        if (strcmp(req->params[i].name, name) == 0)
            n++;
    return n;
}

bool api_parse_i64(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 20)
        return false;
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

static bool query_once(const api_req_t *req, api_resp_t *resp, const char *name, bool required,
                       const char **v, size_t *len)
{
    size_t n = api_query_count(req, name);
    if (n > 1) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "query parameter '%s' given %zu times", name, n);
        return false;
    }
    *v = api_query_get(req, name, len);
    if (!*v && required) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "missing query parameter '%s'", name);
        return false;
    }
    return true;
}

bool api_query_int(const api_req_t *req, api_resp_t *resp, const char *name, bool required, int64_t min,
                   int64_t max, int64_t *out, bool *present)
{
    const char *v;
    size_t len;
    if (present)
        *present = false;
    if (!query_once(req, resp, name, required, &v, &len))
        return false;
    if (!v)
        return true;
    int64_t x;
    if (!api_parse_i64(v, len, &x)) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "query parameter '%s' must be an integer", name);
        return false;
    }
    if (x < min || x > max) {
        if (max == INT64_MAX)
            api_error_field(resp, API_E_BAD_REQUEST, name, "query parameter '%s' must be >= %lld", name,
                            (long long)min);
        else
            api_error_field(resp, API_E_BAD_REQUEST, name, "query parameter '%s' must be between %lld and %lld",
                            name, (long long)min, (long long)max);
        return false;
    }
    *out = x;
    if (present)
        *present = true;
    return true;
}

bool api_query_double(const api_req_t *req, api_resp_t *resp, const char *name, bool required, double min,
                      double max, double *out, bool *present)
{
    const char *v;
    size_t len;
    if (present)
        *present = false;
    if (!query_once(req, resp, name, required, &v, &len))
        return false;
    if (!v)
        return true;
    double x;
    if (!api_parse_double(v, len, &x)) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "query parameter '%s' must be a finite number", name);
        return false;
    }
    if (x < min || x > max) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "query parameter '%s' must be between %g and %g", name,
                        min, max);
        return false;
    }
    *out = x;
    if (present)
        *present = true;
    return true;
}

bool api_query_bool(const api_req_t *req, api_resp_t *resp, const char *name, bool *out, bool *present)
{
    const char *v;
    size_t len;
    if (present)
        *present = false;
    if (!query_once(req, resp, name, false, &v, &len))
        return false;
    if (!v)
        return true;
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "") == 0) {
        *out = true;
    } else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
        *out = false;
    } else {
        api_error_field(resp, API_E_BAD_REQUEST, name, "query parameter '%s' must be true or false", name);
        return false;
    }
    if (present)
        *present = true;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Journal and eviction                                                     */
/* ------------------------------------------------------------------------ */

bool api_journal_reserve(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t *held)
{
    *held = 0;
    if (req->replay || !srv->hooks.journal_reserve)
        return true;
    /* the record is this request, or a canonical form of it (resolved
     * parameters, evictions as deletions): twice its size plus a page */
    uint64_t bytes = 2 * (64 + (uint64_t)req->path_len + req->query_len + req->body_len +
                          (req->ctype ? strlen(req->ctype) : 0)) + 4096;
    const char *err = "journal unavailable";
    if (!srv->hooks.journal_reserve(srv->hooks.ud, bytes, &err)) {
        api_error(resp, API_E_UNAVAILABLE,
                  "the change cannot be made durable: no journal space (%s); nothing was changed, retry later", err);
        return false;
    }
    *held = bytes;
    return true;
}

void api_journal_unreserve(api_server_t *srv, uint64_t held)
{
    if (held && srv->hooks.journal_release)
        srv->hooks.journal_release(srv->hooks.ud, held);
}

static void journal_record(api_server_t *srv, api_resp_t *resp, const journal_req_t *jr)
{
    uint64_t lsn = srv->hooks.journal(srv->hooks.ud, jr);
    if (lsn > resp->journal_lsn)
        resp->journal_lsn = lsn;
}

void api_journal_as(api_server_t *srv, const api_req_t *req, api_resp_t *resp, api_method_t method,
                    const char *path, const char *query, const char *ctype, const void *body,
                    size_t body_len)
{
    if (req->replay || !srv->hooks.journal)
        return;
    journal_req_t jr = {
        .now_ns = req->now_ns,
        .method = (uint8_t)method,
        .path = path,
        .path_len = strlen(path),
        .query = query ? query : "",
        .query_len = query ? strlen(query) : 0,
        .ctype = ctype ? ctype : "",
        .ctype_len = ctype ? strlen(ctype) : 0,
        .body = body,
        .body_len = body_len,
    };
    journal_record(srv, resp, &jr);
}

void api_journal(api_server_t *srv, const api_req_t *req, api_resp_t *resp)
{
    if (req->replay || !srv->hooks.journal)
        return;
    journal_req_t jr = {
        .now_ns = req->now_ns,
        .method = (uint8_t)req->method,
        .path = req->path,
        .path_len = req->path_len,
        .query = req->query ? req->query : "",
        .query_len = req->query ? req->query_len : 0,
        .ctype = req->ctype ? req->ctype : "",
        .ctype_len = req->ctype ? strlen(req->ctype) : 0,
        .body = req->body,
        .body_len = req->body_len,
    };
    journal_record(srv, resp, &jr);
}

struct evict_ctx {
    api_server_t *srv;
    const api_req_t *req;
    api_resp_t *resp;
};

static void on_evict(void *ud, const char *key, size_t len)
{
    struct evict_ctx *c = ud;
    char *path = malloc(6 + 3 * len + 1);
    if (!path)
        return;
    memcpy(path, "/keys/", 6);
    api_escape_segment(key, len, path + 6);
    api_journal_as(c->srv, c->req, c->resp, API_DELETE, path, NULL, NULL, NULL, 0);
    free(path);
}

bool api_make_room(api_server_t *srv, const api_req_t *req, api_resp_t *resp)
{
    if (req->replay)
        return true;   /* evictions were journaled as deletions */
    struct evict_ctx c = { srv, req, resp };
    while (ks_over_limit(srv->ks)) {
        if (ks_evict(srv->ks, api_now_ms(req), on_evict, &c) == 0) {
            api_error(resp, API_E_OUT_OF_MEMORY, "memory limit of %llu bytes reached (maxmemory-policy %s)",
                      (unsigned long long)ks_maxmemory(srv->ks),
                      ks_evict_policy(srv->ks) == KS_NOEVICTION ? "noeviction" : "cannot evict more");
            return false;
        }
    }
    return true;
}

bool api_make_room_for(api_server_t *srv, const api_req_t *req, api_resp_t *resp, uint64_t extra)
{
    if (req->replay)
        return true;
    ks_t *ks = srv->ks;
    uint64_t max = ks_maxmemory(ks);
    if (!max)
        return true;
    struct evict_ctx c = { srv, req, resp };
    while (ks_total_memory(ks) + extra > max) {
        if (extra > max || ks_evict(ks, api_now_ms(req), on_evict, &c) == 0) {
            api_error(resp, API_E_OUT_OF_MEMORY,
                      "memory limit of %llu bytes reached: this write needs %llu more bytes (maxmemory-policy %s)",
                      (unsigned long long)max, (unsigned long long)extra,
                      ks_evict_policy(ks) == KS_NOEVICTION ? "noeviction" : "cannot evict more");
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Keys without a response (rate-limit policies build keys from templates)  */
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
