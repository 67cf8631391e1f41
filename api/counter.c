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

#include "api/api.h"
#include "api/auth.h"
#include "core/counter.h"

#define COUNTER_MAX_TTL_MS 315360000000000LL   /* 10 000 years: keeps now + ttl far from overflow */

static void answer(api_resp_t *resp, int64_t value, int64_t ttl_ms)
{
    api_json(resp, 200, json_pack("{s:I,s:I}", "value", (json_int_t)value, "ttl_ms", (json_int_t)ttl_ms));
}

static int64_t ttl_left(const ks_entry_t *e, int64_t now_ms)
{
    int64_t x = ks_entry_expire(e);
    if (x == KS_NO_EXPIRY)
        return -1;
    return x > now_ms ? x - now_ms : 0;
}

static void h_counter_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "by", "ttl", "ttl_ms", NULL };
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    int64_t by = 1, ttl = 0, ttl_ms = 0;
    bool has_ttl = false, has_ttl_ms = false;
    /* an empty body means {"by":1} */
    json_t *body = req->body_len ? api_body_object(req, resp, fields) : NULL;
    if (req->body_len && !body)
        return;
    if (body && (!api_obj_int(resp, body, "by", false, INT64_MIN, INT64_MAX, &by, NULL) ||
                 !api_obj_int(resp, body, "ttl", false, 1, COUNTER_MAX_TTL_MS / 1000, &ttl, &has_ttl) ||
                 !api_obj_int(resp, body, "ttl_ms", false, 1, COUNTER_MAX_TTL_MS, &ttl_ms, &has_ttl_ms)))
        return;
    if (has_ttl && has_ttl_ms) {
        api_error_field(resp, API_E_BAD_REQUEST, "ttl_ms", "give 'ttl' or 'ttl_ms', not both");
        return;
    }
    if (has_ttl)
        ttl_ms = ttl * 1000;
    if (by == 0 && !has_ttl && !has_ttl_ms && !api_auth_require_read(req, resp, "a counter moved by 0"))
        return;
    int64_t now_ms = api_now_ms(req);
    if (!api_make_room_for_key(srv, req, resp, counter_bytes() + ks_entry_overhead(klen), key, klen, 0))
        return;

    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &counter_type, API_WRITE, &h))
        return;
    counter_t *c = api_key_value(&h);
    int64_t value;
    if (!counter_add_fits(c ? counter_value(c) : 0, by, &value)) {
        api_key_close(&h, false);
        api_error_field(resp, API_E_BAD_REQUEST, "by", "increment or decrement would overflow");
        return;
    }
    bool changed = by != 0 || has_ttl || has_ttl_ms;
    if (c) {
        counter_set(c, value);
    } else if (changed) {
        c = counter_new(value);
        if (!c || !api_key_add(&h, &counter_type, c, KS_NO_EXPIRY)) {
            counter_free(c);
            api_key_close(&h, false);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the counter");
            return;
        }
    }
    if (h.e && (has_ttl || has_ttl_ms))
        ks_entry_set_expire(srv->ks, h.e, now_ms + ttl_ms);
    int64_t left = h.e ? ttl_left(h.e, now_ms) : -2;
    api_key_close(&h, changed);
    answer(resp, value, left);
}

static void h_counter_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    int64_t now_ms = api_now_ms(req);
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &counter_type, API_READ, &h))
        return;
    int64_t value = h.e ? counter_value(api_key_value(&h)) : 0;
    int64_t left = h.e ? ttl_left(h.e, now_ms) : -2;
    api_key_close(&h, false);
    answer(resp, value, left);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_POST,   "/counter/{key}", h_counter_add, 0, API_ACCESS_WRITE },
    { API_GET,    "/counter/{key}", h_counter_get, 0, API_ACCESS_READ },
};

API_FAMILY(counter, &counter_type, "a counter", "no such key");
