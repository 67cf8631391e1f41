/*
 * counter.c - /counter: the seeds' counter pattern (MULTI; INCR key; EXPIRE
 * key ttl; EXEC) as one atomic call.
 *
 *   POST /counter/{key}  {"by":1,"ttl":60}  -> {"value":N,"ttl_ms":T}
 *   GET  /counter/{key}                      -> {"value":N,"ttl_ms":T}
 *
 * POST adds `by` (default 1; negative subtracts, like INCRBY/DECRBY; 0 reads
 * and may set the TTL) to the counter, creating it at 0.  An increment that
 * would leave the signed 64-bit range is refused and changes nothing (Redis:
 * "increment or decrement would overflow").
 *
 * TTL: "ttl" (seconds) or "ttl_ms" sets the expiry on every call, like EXPIRE
 * after each INCR - so a counter written at least once per TTL never expires;
 * put the window in the key (the seeds' "apikey:minute") or use
 * /throttle's fixed_window for a self-resetting counter.  Without a TTL the
 * key's expiry is kept (INCRBY keeps it) and a new key never expires.
 *
 * GET of a missing key answers {"value":0,"ttl_ms":-2}: what INCRBY would
 * start from, with PTTL's -2 for "no such key"; ttl_ms -1 means no expiry.
 */
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "cmd/counter.h"

static void answer(api_resp_t *resp, const cmd_counter_res_t *r)
{
    api_json(resp, 200, json_pack("{s:I,s:I}", "value", (json_int_t)r->value, "ttl_ms", (json_int_t)r->ttl_ms));
}

static void h_counter_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "by", "ttl", "ttl_ms", NULL };
    cmd_incrby_args_t a = { .by = 1 };
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    int64_t ttl = 0;
    bool has_ttl = false, has_ttl_ms = false;
    /* an empty body means {"by":1} */
    json_t *body = req->body_len ? api_body_object(req, resp, fields) : NULL;
    if (req->body_len && !body)
        return;
    if (body && (!api_obj_int(resp, body, "by", false, INT64_MIN, INT64_MAX, &a.by, NULL) ||
                 !api_obj_int(resp, body, "ttl", false, 1, CMD_COUNTER_MAX_TTL_MS / 1000, &ttl, &has_ttl) ||
                 !api_obj_int(resp, body, "ttl_ms", false, 1, CMD_COUNTER_MAX_TTL_MS, &a.ttl_ms, &has_ttl_ms)))
        return;
    if (has_ttl && has_ttl_ms) {
        api_error_field(resp, API_E_BAD_REQUEST, "ttl_ms", "give 'ttl' or 'ttl_ms', not both");
        return;
    }
    if (has_ttl)
        a.ttl_ms = ttl * 1000;
    a.has_ttl = has_ttl || has_ttl_ms;
    cmd_counter_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_INCRBY, &a, &r)))
        answer(resp, &r);
}

static void h_counter_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_counter_get_args_t a;
    cmd_counter_res_t r;
    if (api_path_key(req, resp, &a.key, &a.klen) && api_no_query(req, resp) &&
        api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_COUNTER_GET, &a, &r)))
        answer(resp, &r);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_POST,   "/counter/{key}", h_counter_add, 0, API_BY(CMD_INCRBY) },
    { API_GET,    "/counter/{key}", h_counter_get, 0, API_BY(CMD_COUNTER_GET) },
};

API_FAMILY(counter);
