/*
 * respond.c - the answers: the one error envelope, built from one code ->
 * status table, and the setters of a response (JSON, raw bytes, headers).
 *
 * Every error a client sees comes through api_err_respond, whether it was
 * set at once (api_error) or filled by a reader into an api_err_t first:
 *
 *     {"error":{"code":"BAD_REQUEST","message":"'ttl_ms' must be >= 1","field":"ttl_ms"}}
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_out.h"
#include "api/request.h"
#include "api/respond.h"

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
    [API_E_REQUEST_TIMEOUT] = { "REQUEST_TIMEOUT", 408 },
    [API_E_MISDIRECTED] = { "MISDIRECTED_REQUEST", 421 },
    [API_E_TOO_MANY_REQUESTS] = { "TOO_MANY_REQUESTS", 429 },
    [API_E_READONLY] = { "READONLY", 421 },
    [API_E_GONE] = { "POSITION_GONE", 410 },
    [API_E_CONFLICT] = { "STALE_EPOCH", 409 },
    [API_E_CROSSSLOT] = { "CROSSSLOT", 400 },
    [API_E_MOVED] = { "MOVED", 421 },
    [API_E_ASK] = { "ASK", 421 },
    [API_E_TRYAGAIN] = { "TRYAGAIN", 503 },
    [API_E_PRECONDITION_FAILED] = { "PRECONDITION_FAILED", 412 },
};

int api_code_status(api_code_t code) { return codes[code].status; }
const char *api_code_name(api_code_t code) { return codes[code].name; }

/* The one place an error envelope is built. */
static void envelope(api_resp_t *resp, api_code_t code, const char *field, const char *msg)
{
    json_t *err = json_object();
    json_object_set_new(err, "code", json_string(codes[code].name));
    /* messages may quote user input: keep them valid JSON strings */
    json_t *m = json_string(msg);
    json_object_set_new(err, "message", m ? m : json_string("(message not representable)"));
    if (field)
        json_object_set_new(err, "field", json_string(field));
    api_json(resp, codes[code].status, json_pack("{s:o}", "error", err));
}

static void error_v(api_resp_t *resp, api_code_t code, const char *field, const char *fmt, va_list ap)
{
    char msg[sizeof(((api_err_t *)0)->message)];   /* the same text, answered at once or deferred */
    vsnprintf(msg, sizeof(msg), fmt, ap);
    envelope(resp, code, field, msg);
}

void api_err_respond(api_resp_t *resp, const api_err_t *err)
{
    envelope(resp, err->code, cmd_err_field(err), err->message);
}

void api_cmd_error(api_resp_t *resp, const cmd_err_t *err)
{
    if (err->code == API_E_MOVED || err->code == API_E_ASK) {
        /* the node to ask instead, in the body and as headers */
        json_t *e = json_pack("{s:s,s:s,s:i,s:s,s:s,s:I}", "code", codes[err->code].name, "message", err->message,
                              "slot", err->slot, "node", err->node, "address", err->where, "epoch",
                              (json_int_t)err->epoch);
        api_json(resp, codes[err->code].status, json_pack("{s:o}", "error", e));
        api_add_header(resp, "X-Tally-Owner", "%s", err->where);
        api_add_header(resp, "X-Tally-Owner-Node", "%s", err->node);
        api_add_header(resp, "X-Tally-Slot", "%d", err->slot);
        return;
    }
    if (err->code == API_E_READONLY && err->where[0])
        api_add_header(resp, "X-Tally-Primary", "%s", err->where);
    envelope(resp, err->code, cmd_err_field(err), err->message);
    if (err->retry_after > 0)
        api_add_header(resp, "Retry-After", "%d", err->retry_after);
    if (err->code == API_E_FORBIDDEN && err->scope)
        api_add_header(resp, "WWW-Authenticate", "Bearer realm=\"tally\", error=\"insufficient_scope\", scope=\"%s\"",
                       err->scope);
}

bool api_cmd_answered(const api_req_t *req, api_resp_t *resp, bool ok)
{
    if (!ok)
        api_cmd_error(resp, &req->ctx->err);
    return ok;
}

bool api_err_answered(api_resp_t *resp, bool ok, const api_err_t *err)
{
    if (!ok)
        api_err_respond(resp, err);
    return ok;
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

void api_error_status(api_resp_t *resp, core_status_t st, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_v(resp, api_status_code(st), field, fmt, ap);
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

