/*
 * respond.h - answers (api/respond.c): the one error envelope
 * {"error":{"code","message"[,"field"]}} with its code -> HTTP status
 * table, the answer of a refusal the command layer described, JSON and
 * verbatim bodies, and response headers.
 */
#ifndef TALLY_API_RESPOND_H
#define TALLY_API_RESPOND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/request.h"
#include "cmd/err.h"
#include "core/status.h"

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

/* The HTTP answer of a refusal the command layer described: the error
 * envelope, and the headers its details call for (X-Tally-Owner on a
 * MOVED, X-Tally-Primary on a READONLY, Retry-After, WWW-Authenticate). */
void api_cmd_error(api_resp_t *resp, const cmd_err_t *err);
/* ok; else the refusal in req->ctx answered on resp (api_cmd_error). */
bool api_cmd_answered(const api_req_t *req, api_resp_t *resp, bool ok);

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
/* Sets a response body verbatim (copied). */
void api_body(api_resp_t *resp, int status, const char *ctype, const void *body, size_t len);
void api_add_header(api_resp_t *resp, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
