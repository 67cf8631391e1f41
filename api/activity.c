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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/activity.h"

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

/* ------------------------------------------------------------------------ */
/* Writes                                                                   */
/* ------------------------------------------------------------------------ */

/* How far past the server's UTC date a day may be recorded: one day, for
 * clients ahead of UTC (up to +14 h).  A day further ahead would move the
 * key's retained range forward and drop its oldest days, so one bad input
 * could wipe two years of data: it is refused instead. */
#define ACTIVITY_AHEAD_DAYS 1

/* Records users (a list or a bitmap) on `day` under the key's lock, room
 * made first for extra_bytes, a bound on what it adds (activity_add_bound,
 * activity_merge_bound). */
static void record(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen, int32_t day,
                   const uint32_t *users, size_t n, const roaring_bitmap_t *bm, uint64_t extra_bytes)
{
    int32_t today = (int32_t)(api_now_ms(req) / 86400000);
    if (day > today + ACTIVITY_AHEAD_DAYS) {
        char latest[11];
        activity_format_day(today + ACTIVITY_AHEAD_DAYS, latest);
        api_error_field(resp, API_E_BAD_REQUEST, "day",
                        "'day' is in the future: the latest day that can be recorded now is %s (the server's UTC "
                        "date plus %d)", latest, ACTIVITY_AHEAD_DAYS);
        return;
    }
    if (!api_make_room(srv, req, resp) || !api_make_room_for_key(srv, req, resp, extra_bytes + ks_entry_overhead(klen), key, klen, 0))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &activity_type, API_WRITE, &h))
        return;
    activity_t *a = api_key_value(&h);
    if (!api_value_fits(srv, req, resp, NULL, "the activity set", (a ? activity_heap_bytes(a) : 0) + extra_bytes)) {
        api_key_close(&h, false);
        return;
    }
    if (a && day < activity_oldest_writable(a)) {
        char oldest[11], newest[11];
        activity_format_day(activity_oldest_writable(a), oldest);
        activity_format_day(activity_last_day(a), newest);
        api_key_close(&h, false);
        api_error_field(resp, API_E_BAD_REQUEST, "day",
                        "'day' is older than the retained range: this key keeps %d days, %s to %s",
                        ACTIVITY_RETAIN_DAYS, oldest, newest);
        return;
    }
    bool created = !a;
    if (created && !(a = activity_create())) {
        api_key_close(&h, false);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    uint64_t added = 0;
    core_status_t st = bm ? activity_merge(a, day, bm, &added) : activity_add(a, day, users, n, &added);
    if (st != CORE_OK) {
        if (created)
            activity_free(a);
        api_key_close(&h, false);
        api_error_status(resp, st, NULL, "out of memory recording the day");
        return;
    }
    if (created && added > 0 && !api_key_add(&h, &activity_type, a, KS_NO_EXPIRY)) {
        activity_free(a);
        api_key_close(&h, false);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory adding the key");
        return;
    }
    uint64_t day_users = activity_day_users(a, day);
    if (created && added == 0)
        activity_free(a);
    api_key_close(&h, added > 0);
    if (resp->status == 0)
        api_json(resp, 200, json_pack("{s:I,s:I}", "added", (json_int_t)added, "day_users", (json_int_t)day_users));
}

static void h_activity_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "day", "users", NULL };
    const char *key, *ds = NULL;
    size_t klen, dlen = 0;
    json_t *body;
    int32_t day;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) ||
        !api_obj_string(resp, body, "day", true, &ds, &dlen) || !day_value(resp, "day", ds, dlen, &day))
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
    record(srv, req, resp, key, klen, day, users, n, NULL, activity_add_bound(n));
    free(users);
}

static void h_activity_import(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "day", NULL };
    const char *key;
    size_t klen;
    int32_t day;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !query_day(req, resp, "day", &day))
        return;
    const char *why = "bitmap: empty body";
    roaring_bitmap_t *bm = req->body_len ? activity_bitmap_parse(req->body, req->body_len, &why) : NULL;
    if (!bm) {
        api_error(resp, API_E_BAD_REQUEST, "the body must be a bitmap in the portable Roaring format: %s", why);
        return;
    }
    record(srv, req, resp, key, klen, day, NULL, 0, bm, activity_merge_bound(bm));
    roaring_bitmap_free(bm);
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                    */
/* ------------------------------------------------------------------------ */

static void h_activity_count(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "from", "to", "mode", NULL };
    const char *key;
    size_t klen;
    int32_t from, to;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !query_day(req, resp, "from", &from) || !query_day(req, resp, "to", &to))
        return;
    activity_mode_t mode = ACTIVITY_ANY;
    size_t nm = api_query_count(req, "mode");
    const char *m = api_query_get(req, "mode", NULL);
    if (nm > 1 || (m && strcmp(m, "any") != 0 && strcmp(m, "all") != 0)) {
        api_error_field(resp, API_E_BAD_REQUEST, "mode", "query parameter 'mode' must be any or all");
        return;
    }
    if (m && strcmp(m, "all") == 0)
        mode = ACTIVITY_ALL;
    if (from > to) {
        api_error_field(resp, API_E_BAD_REQUEST, "from", "'from' is after 'to'");
        return;
    }
    if (to - from + 1 > ACTIVITY_RETAIN_DAYS) {
        api_error_field(resp, API_E_BAD_REQUEST, "to",
                        "the window is %d days; at most %d days are retained, so a window can be at most that long",
                        (int)(to - from + 1), ACTIVITY_RETAIN_DAYS);
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &activity_type, API_READ, &h))
        return;
    const activity_t *a = api_key_value(&h);
    uint64_t n = 0;
    core_status_t st = a ? activity_count(a, from, to, mode, &n) : CORE_OK;
    api_key_close(&h, false);
    if (st != CORE_OK)
        api_error_status(resp, st, NULL, "out of memory counting");
    else
        api_json(resp, 200, json_pack("{s:I}", "users", (json_int_t)n));
}

static void h_activity_users(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "day", "cursor", "limit", NULL };
    const char *key;
    size_t klen;
    int32_t day;
    int64_t cursor = 0, limit = USERS_DEFAULT_LIMIT;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !query_day(req, resp, "day", &day) ||
        !api_query_int(req, resp, "cursor", false, 0, UINT32_MAX, &cursor, NULL) ||
        !api_query_int(req, resp, "limit", false, 1, API_MAX_BATCH, &limit, NULL))
        return;
    uint32_t *ids = malloc((size_t)limit * sizeof(*ids));
    if (!ids) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &activity_type, API_READ, &h)) {
        free(ids);
        return;
    }
    const activity_t *a = api_key_value(&h);
    uint64_t next = UINT64_MAX;
    size_t got = a ? activity_users(a, day, (uint64_t)cursor, ids, (size_t)limit, &next) : 0;
    api_key_close(&h, false);
    json_t *list = json_array();
    for (size_t i = 0; i < got; i++)
        json_array_append_new(list, json_integer(ids[i]));
    free(ids);
    char d[11];
    activity_format_day(day, d);
    json_t *o = json_pack("{s:s,s:o}", "day", d, "users", list);
    json_object_set_new(o, "cursor", next == UINT64_MAX ? json_null() : json_integer((json_int_t)next));
    api_json(resp, 200, o);
}

static void h_activity_retention(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "cohort", "days", NULL };
    const char *key;
    size_t klen;
    int32_t cohort;
    int64_t days;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !query_day(req, resp, "cohort", &cohort) ||
        !api_query_int(req, resp, "days", true, 1, INT64_MAX, &days, NULL))
        return;
    if (days > ACTIVITY_RETAIN_DAYS - 1) {
        api_error_field(resp, API_E_BAD_REQUEST, "days",
                        "'days' is %lld; at most %d days are retained, so at most %d days can follow the cohort",
                        (long long)days, ACTIVITY_RETAIN_DAYS, ACTIVITY_RETAIN_DAYS - 1);
        return;
    }
    if (cohort + days > ACTIVITY_MAX_DAY) {
        api_error_field(resp, API_E_BAD_REQUEST, "days", "the days after the cohort run past 9999-12-31");
        return;
    }
    uint64_t *counts = malloc((size_t)days * sizeof(*counts));
    if (!counts) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &activity_type, API_READ, &h)) {
        free(counts);
        return;
    }
    const activity_t *a = api_key_value(&h);
    uint64_t size = 0;
    if (a)
        activity_retention(a, cohort, (int32_t)days, &size, counts);
    else
        memset(counts, 0, (size_t)days * sizeof(*counts));
    api_key_close(&h, false);
    json_t *list = json_array();
    for (int64_t i = 0; i < days; i++) {
        char d[11];
        activity_format_day(cohort + (int32_t)i + 1, d);
        json_array_append_new(list, json_pack("{s:s,s:I,s:f}", "day", d, "users", (json_int_t)counts[i], "rate",
                                              size ? (double)counts[i] / (double)size : 0.0));
    }
    free(counts);
    char c[11];
    activity_format_day(cohort, c);
    api_json(resp, 200, json_pack("{s:s,s:I,s:o}", "cohort", c, "cohort_users", (json_int_t)size, "retained", list));
}

static void h_activity_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &activity_type, API_MUST_EXIST, &h))
        return;
    const activity_t *a = api_key_value(&h);
    char first[11], last[11], oldest[11];
    activity_format_day(activity_first_day(a), first);
    activity_format_day(activity_last_day(a), last);
    activity_format_day(activity_oldest_writable(a), oldest);
    json_t *o = json_pack("{s:I,s:I,s:s,s:s,s:s,s:i,s:I}", "days", (json_int_t)activity_ndays(a), "months",
                          (json_int_t)activity_nmonths(a), "first_day", first, "last_day", last, "oldest_writable",
                          oldest, "retain_days", ACTIVITY_RETAIN_DAYS, "memory_bytes",
                          (json_int_t)activity_heap_bytes(a));
    api_key_close(&h, false);
    api_json(resp, 200, o);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_POST,   "/activity/{key}",           h_activity_add, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/activity/{key}",           h_activity_info, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/activity/{key}/import",    h_activity_import, API_ROUTE_BINARY, API_ACCESS_WRITE, NULL },
    { API_GET,    "/activity/{key}/count",     h_activity_count, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/activity/{key}/users",     h_activity_users, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/activity/{key}/retention", h_activity_retention, 0, API_ACCESS_READ, NULL },
};

API_FAMILY(activity);
