/*
 * activity.c - /activity: daily active users on compressed bitmaps.
 *
 *   POST /activity/{key}            {"day":"2026-11-21","users":[1,2,3]}  -> {"added":N,"day_users":M}
 *   POST /activity/{key}/import?day=   body: a portable Roaring bitmap (application/octet-stream),
 *                                      OR'd into the day                  -> {"added":N,"day_users":M}
 *   GET  /activity/{key}/count?from=&to=&mode=any|all                     -> {"users":N}
 *   GET  /activity/{key}/users?day=&cursor=&limit=                        -> {"users":[...],"cursor":N|null}
 *   GET  /activity/{key}/retention?cohort=&days=                          -> {"cohort","cohort_users","retained":[...]}
 *   GET  /activity/{key}                                                  -> days held, range, memory
 *
 * Days are "YYYY-MM-DD" (UTC calendar days); user ids unsigned 32-bit.  A
 * key keeps the ACTIVITY_RETAIN_DAYS (731) days ending at its newest day;
 * windows longer than that are refused, days outside it hold nobody, and a
 * day older than it cannot be recorded (see core/activity.h).  Reads of a
 * missing key count 0 users, like Redis's BITCOUNT of a missing key.
 *
 * The HTTP adapter of the operations ACTIVITY.* (cmd/activity.h): requests are
 * parsed into their arguments and answered from their results.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "cmd/activity.h"

#define USERS_DEFAULT_LIMIT 1000   /* ids per page of /users */

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */
/* ------------------------------------------------------------------------ */

static bool day_value(api_resp_t *resp, const char *field, const char *s, size_t len, int32_t *day)
{
    if (!s || !activity_parse_day(s, len, day)) {
        api_error_field(resp, API_E_BAD_REQUEST, field,
                        "'%s' must be a calendar day \"YYYY-MM-DD\" between 1970-01-01 and 9999-12-31", field);
        return false;
    }
    return true;
}

static bool query_day(const api_req_t *req, api_resp_t *resp, const char *name, int32_t *day)
{
    const char *s;
    size_t len;
    return api_query_string(req, resp, name, true, &s, &len) && day_value(resp, name, s, len, day);
}

static void answer_added(api_resp_t *resp, const cmd_activity_add_res_t *r)
{
    api_json(resp, 200, json_pack("{s:I,s:I}", "added", (json_int_t)r->added, "day_users", (json_int_t)r->day_users));
}

/* ------------------------------------------------------------------------ */
/* Writes                                                                   */
/* ------------------------------------------------------------------------ */

static void h_activity_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "day", "users", NULL };
    cmd_activity_add_args_t a;
    const char *ds = NULL;
    size_t dlen = 0;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)) ||
        !api_obj_string(resp, body, "day", true, &ds, &dlen) || !day_value(resp, "day", ds, dlen, &a.day))
        return;
    json_t *arr = json_object_get(body, "users");
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n == 0 || n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "users", "'users' must be an array of 1 to %d user ids",
                        API_MAX_BATCH);
        return;
    }
    uint32_t *users = malloc(n * sizeof(*users));
    if (!users) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
        if (x < 0 || x > (json_int_t)UINT32_MAX) {
            char field[32];
            snprintf(field, sizeof(field), "users[%zu]", i);
            api_error_field(resp, API_E_BAD_REQUEST, field,
                            "'%s' must be a user id: an integer between 0 and 4294967295 (unsigned 32-bit)", field);
            free(users);
            return;
        }
        users[i] = (uint32_t)x;
    }
    a.users = (cmd_array_t){ .n = n, .v = users };
    cmd_activity_add_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_ACTIVITY_ADD, &a, &r)))
        answer_added(resp, &r);
    free(users);
}

static void h_activity_import(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "day", NULL };
    cmd_activity_import_args_t a;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !query_day(req, resp, "day", &a.day))
        return;
    a.bitmap = req->body;
    a.len = req->body_len;
    cmd_activity_add_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_ACTIVITY_IMPORT, &a, &r)))
        answer_added(resp, &r);
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                    */
/* ------------------------------------------------------------------------ */

static void h_activity_count(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "from", "to", "mode", NULL };
    cmd_activity_count_args_t a = { .mode = ACTIVITY_ANY };
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !query_day(req, resp, "from", &a.from) || !query_day(req, resp, "to", &a.to))
        return;
    size_t nm = api_query_count(req, "mode");
    const char *m = api_query_get(req, "mode", NULL);
    if (nm > 1 || (m && strcmp(m, "any") != 0 && strcmp(m, "all") != 0)) {
        api_error_field(resp, API_E_BAD_REQUEST, "mode", "query parameter 'mode' must be any or all");
        return;
    }
    if (m && strcmp(m, "all") == 0)
        a.mode = ACTIVITY_ALL;
    cmd_activity_count_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_ACTIVITY_COUNT, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "users", (json_int_t)r.users));
}

static void h_activity_users(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "day", "cursor", "limit", NULL };
    cmd_activity_users_args_t a;
    int64_t cursor = 0, limit = USERS_DEFAULT_LIMIT;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !query_day(req, resp, "day", &a.day) ||
        !api_query_int(req, resp, "cursor", false, 0, UINT32_MAX, &cursor, NULL) ||
        !api_query_int(req, resp, "limit", false, 1, API_MAX_BATCH, &limit, NULL))
        return;
    a.cursor = (uint32_t)cursor;
    a.limit = (size_t)limit;
    cmd_activity_users_res_t r;
    if (!api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_ACTIVITY_USERS, &a, &r)))
        return;
    json_t *list = json_array();
    for (size_t i = 0; i < r.n; i++)
        json_array_append_new(list, json_integer(r.ids[i]));
    free(r.ids);
    char d[11];
    activity_format_day(a.day, d);
    json_t *o = json_pack("{s:s,s:o}", "day", d, "users", list);
    json_object_set_new(o, "cursor", r.next == UINT64_MAX ? json_null() : json_integer((json_int_t)r.next));
    api_json(resp, 200, o);
}

static void h_activity_retention(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "cohort", "days", NULL };
    cmd_activity_retention_args_t a;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !query_day(req, resp, "cohort", &a.cohort) ||
        !api_query_int(req, resp, "days", true, 1, INT64_MAX, &a.days, NULL))
        return;
    cmd_activity_retention_res_t r;
    if (!api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_ACTIVITY_RETENTION, &a, &r)))
        return;
    json_t *list = json_array();
    for (int64_t i = 0; i < a.days; i++) {
        char d[11];
        activity_format_day(a.cohort + (int32_t)i + 1, d);
        json_array_append_new(list, json_pack("{s:s,s:I,s:f}", "day", d, "users", (json_int_t)r.counts[i], "rate",
                                              r.cohort_users ? (double)r.counts[i] / (double)r.cohort_users : 0.0));
    }
    free(r.counts);
    char c[11];
    activity_format_day(a.cohort, c);
    api_json(resp, 200,
             json_pack("{s:s,s:I,s:o}", "cohort", c, "cohort_users", (json_int_t)r.cohort_users, "retained", list));
}

static void h_activity_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_activity_key_args_t a;
    cmd_activity_info_t r;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp) ||
        !api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_ACTIVITY_INFO, &a, &r)))
        return;
    char first[11], last[11], oldest[11];
    activity_format_day(r.first_day, first);
    activity_format_day(r.last_day, last);
    activity_format_day(r.oldest_writable, oldest);
    api_json(resp, 200,
             json_pack("{s:I,s:I,s:s,s:s,s:s,s:i,s:I}", "days", (json_int_t)r.days, "months", (json_int_t)r.months,
                       "first_day", first, "last_day", last, "oldest_writable", oldest, "retain_days",
                       ACTIVITY_RETAIN_DAYS, "memory_bytes", (json_int_t)r.memory_bytes));
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_POST,   "/activity/{key}",           h_activity_add, 0, API_BY(CMD_ACTIVITY_ADD) },
    { API_GET,    "/activity/{key}",           h_activity_info, 0, API_BY(CMD_ACTIVITY_INFO) },
    { API_POST,   "/activity/{key}/import",    h_activity_import, API_ROUTE_BINARY, API_BY(CMD_ACTIVITY_IMPORT) },
    { API_GET,    "/activity/{key}/count",     h_activity_count, 0, API_BY(CMD_ACTIVITY_COUNT) },
    { API_GET,    "/activity/{key}/users",     h_activity_users, 0, API_BY(CMD_ACTIVITY_USERS) },
    { API_GET,    "/activity/{key}/retention", h_activity_retention, 0, API_BY(CMD_ACTIVITY_RETENTION) },
};

API_FAMILY(activity);
