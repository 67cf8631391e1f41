/* activity.c - daily active users as operations: see activity.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/activity.h"
#include "cmd/keys.h"
#include "cmd/room.h"

#define REC_VERSION 1

static bool bad(const char **why, const char *what)
{
    *why = what;
    return false;
}

static bool get_head(rbuf_t *in, const char **key, size_t *klen, int32_t *day, const char **why)
{
    if (rbuf_u8(in) != REC_VERSION)
        return bad(why, "unknown version");
    if (!cmd_get_text_key(in, key, klen))
        return bad(why, "bad key");
    uint32_t d = rbuf_u32(in);
    if (in->err || d > ACTIVITY_MAX_DAY)
        return bad(why, "bad day");
    *day = (int32_t)d;
    return true;
}

static void put_head(wbuf_t *out, const char *key, size_t klen, int32_t day)
{
    wbuf_put_u8(out, REC_VERSION);
    cmd_put_key(out, key, klen);
    wbuf_put_u32(out, (uint32_t)day);
}

/* ------------------------------------------------------------------------ */
/* Writes                                                                   */
/* ------------------------------------------------------------------------ */

/* Records users (a list, or a bitmap) on `day` under the key's lock, room
 * made first for extra_bytes, a bound on what it adds (activity_add_bound,
 * activity_merge_bound). */
static bool record(cmd_ctx_t *ctx, const char *key, size_t klen, int32_t day, const uint32_t *users, size_t n,
                   const roaring_bitmap_t *bm, uint64_t extra_bytes, cmd_activity_add_res_t *r)
{
    int32_t today = (int32_t)(cmd_now_ms(ctx) / 86400000);
    if (day > today + ACTIVITY_AHEAD_DAYS) {
        char latest[11];
        activity_format_day(today + ACTIVITY_AHEAD_DAYS, latest);
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "day",
                        "'day' is in the future: the latest day that can be recorded now is %s (the server's UTC "
                        "date plus %d)",
                        latest, ACTIVITY_AHEAD_DAYS);
    }
    if (!cmd_make_room(ctx) || !cmd_make_room_for_key(ctx, extra_bytes + ks_entry_overhead(klen), key, klen, 0))
        return false;
    cmd_key_t h;
    if (!cmd_key_open(ctx, key, klen, &activity_type, CMD_WRITE, &h))
        return false;
    activity_t *a = cmd_key_value(&h);
    if (!cmd_value_fits(ctx, NULL, "the activity set", (a ? activity_heap_bytes(a) : 0) + extra_bytes)) {
        cmd_key_close(&h, false);
        return false;
    }
    if (a && day < activity_oldest_writable(a)) {
        char oldest[11], newest[11];
        activity_format_day(activity_oldest_writable(a), oldest);
        activity_format_day(activity_last_day(a), newest);
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "day",
                        "'day' is older than the retained range: this key keeps %d days, %s to %s",
                        ACTIVITY_RETAIN_DAYS, oldest, newest);
    }
    bool created = !a;
    if (created && !(a = activity_create())) {
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    uint64_t added = 0;
    core_status_t st = bm ? activity_merge(a, day, bm, &added) : activity_add(a, day, users, n, &added);
    if (st != CORE_OK) {
        if (created)
            activity_free(a);
        cmd_key_close(&h, false);
        return cmd_fail(ctx, cmd_status_code(st), NULL, "out of memory recording the day");
    }
    if (created && added > 0 && !cmd_key_add(&h, &activity_type, a, KS_NO_EXPIRY)) {
        activity_free(a);
        cmd_key_close(&h, false);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory adding the key");
    }
    r->added = added;
    r->day_users = activity_day_users(a, day);
    if (created && added == 0)
        activity_free(a);
    cmd_key_close(&h, added > 0);
    return true;
}

static bool run_add(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_activity_add_args_t *a = args;
    size_t n = a->users.n;
    uint32_t *owned = NULL;
    const uint32_t *users = a->users.v;
    if (!users) {   /* a record's ids, little-endian */
        users = owned = malloc(n * sizeof(*owned));
        if (!owned)
            return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
        for (size_t i = 0; i < n; i++)
            owned[i] = cmd_array_u32(&a->users, i);
    }
    bool ok = record(ctx, a->key, a->klen, a->day, users, n, NULL, activity_add_bound(n), res);
    free(owned);
    return ok;
}

static void encode_add(const void *args, wbuf_t *out)
{
    const cmd_activity_add_args_t *a = args;
    put_head(out, a->key, a->klen, a->day);
    cmd_array_put_u32(out, &a->users);
}

static bool decode_add(rbuf_t *in, void *args, const char **why)
{
    cmd_activity_add_args_t *a = args;
    if (!get_head(in, &a->key, &a->klen, &a->day, why))
        return false;
    if (!cmd_array_get(in, &a->users, 4, 1, CMD_BATCH_MAX))
        return bad(why, "bad users");
    return true;
}

static bool run_import(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_activity_import_args_t *a = args;
    const char *why = "bitmap: empty body";
    roaring_bitmap_t *bm = a->len ? activity_bitmap_parse(a->bitmap, a->len, &why) : NULL;
    if (!bm)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL, "the body must be a bitmap in the portable Roaring format: %s",
                        why);
    bool ok = record(ctx, a->key, a->klen, a->day, NULL, 0, bm, activity_merge_bound(bm), res);
    roaring_bitmap_free(bm);
    return ok;
}

static void encode_import(const void *args, wbuf_t *out)
{
    const cmd_activity_import_args_t *a = args;
    put_head(out, a->key, a->klen, a->day);
    wbuf_put_blob(out, a->bitmap, a->len);
}

static bool decode_import(rbuf_t *in, void *args, const char **why)
{
    cmd_activity_import_args_t *a = args;
    if (!get_head(in, &a->key, &a->klen, &a->day, why))
        return false;
    a->bitmap = rbuf_blob(in, &a->len);
    if (!a->bitmap || a->len == 0)
        return bad(why, "bad bitmap");
    /* only a bitmap that was imported is journaled: check it whole */
    roaring_bitmap_t *bm = activity_bitmap_parse(a->bitmap, a->len, why);
    if (!bm)
        return false;
    roaring_bitmap_free(bm);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                    */
/* ------------------------------------------------------------------------ */

static bool run_count(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_activity_count_args_t *a = args;
    cmd_activity_count_res_t *r = res;
    if (a->from > a->to)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "from", "'from' is after 'to'");
    if (a->to - a->from + 1 > ACTIVITY_RETAIN_DAYS)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "to",
                        "the window is %d days; at most %d days are retained, so a window can be at most that long",
                        (int)(a->to - a->from + 1), ACTIVITY_RETAIN_DAYS);
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &activity_type, CMD_READ, &h))
        return false;
    const activity_t *v = cmd_key_value(&h);
    r->users = 0;
    core_status_t st = v ? activity_count(v, a->from, a->to, a->mode, &r->users) : CORE_OK;
    cmd_key_close(&h, false);
    if (st != CORE_OK)
        return cmd_fail(ctx, cmd_status_code(st), NULL, "out of memory counting");
    return true;
}

static bool run_users(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_activity_users_args_t *a = args;
    cmd_activity_users_res_t *r = res;
    r->n = 0;
    r->next = UINT64_MAX;
    r->ids = malloc(a->limit * sizeof(*r->ids));
    if (!r->ids)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &activity_type, CMD_READ, &h)) {
        free(r->ids);
        r->ids = NULL;
        return false;
    }
    const activity_t *v = cmd_key_value(&h);
    r->n = v ? activity_users(v, a->day, a->cursor, r->ids, a->limit, &r->next) : 0;
    cmd_key_close(&h, false);
    return true;
}

static bool run_retention(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_activity_retention_args_t *a = args;
    cmd_activity_retention_res_t *r = res;
    r->cohort_users = 0;
    r->counts = NULL;
    if (a->days > ACTIVITY_RETAIN_DAYS - 1)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "days",
                        "'days' is %lld; at most %d days are retained, so at most %d days can follow the cohort",
                        (long long)a->days, ACTIVITY_RETAIN_DAYS, ACTIVITY_RETAIN_DAYS - 1);
    if (a->cohort + a->days > ACTIVITY_MAX_DAY)
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "days", "the days after the cohort run past 9999-12-31");
    r->counts = malloc((size_t)a->days * sizeof(*r->counts));
    if (!r->counts)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &activity_type, CMD_READ, &h)) {
        free(r->counts);
        r->counts = NULL;
        return false;
    }
    const activity_t *v = cmd_key_value(&h);
    if (v)
        activity_retention(v, a->cohort, (int32_t)a->days, &r->cohort_users, r->counts);
    else
        memset(r->counts, 0, (size_t)a->days * sizeof(*r->counts));
    cmd_key_close(&h, false);
    return true;
}

static bool run_info(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_activity_key_args_t *a = args;
    cmd_activity_info_t *r = res;
    cmd_key_t h;
    if (!cmd_key_open(ctx, a->key, a->klen, &activity_type, CMD_MUST_EXIST, &h))
        return false;
    const activity_t *v = cmd_key_value(&h);
    r->days = activity_ndays(v);
    r->months = activity_nmonths(v);
    r->first_day = activity_first_day(v);
    r->last_day = activity_last_day(v);
    r->oldest_writable = activity_oldest_writable(v);
    r->memory_bytes = activity_heap_bytes(v);
    cmd_key_close(&h, false);
    return true;
}

const cmd_def_t CMD_ACTIVITY_ADD = { "ACTIVITY.ADD", CMD_ID_ACTIVITY_ADD, CMD_F_WRITE | CMD_F_DENYOOM,
                                     CMD_ACCESS_WRITE, run_add, encode_add, decode_add,
                                     sizeof(cmd_activity_add_args_t), sizeof(cmd_activity_add_res_t), cmd_keys_first };
const cmd_def_t CMD_ACTIVITY_IMPORT = { "ACTIVITY.IMPORT", CMD_ID_ACTIVITY_IMPORT, CMD_F_WRITE | CMD_F_DENYOOM,
                                        CMD_ACCESS_WRITE, run_import, encode_import, decode_import,
                                        sizeof(cmd_activity_import_args_t), sizeof(cmd_activity_add_res_t),
                                        cmd_keys_first };
const cmd_def_t CMD_ACTIVITY_COUNT = { "ACTIVITY.COUNT", CMD_ID_ACTIVITY_COUNT, 0, CMD_ACCESS_READ, run_count, NULL,
                                       NULL, sizeof(cmd_activity_count_args_t), sizeof(cmd_activity_count_res_t),
                                       cmd_keys_first };
const cmd_def_t CMD_ACTIVITY_USERS = { "ACTIVITY.USERS", CMD_ID_ACTIVITY_USERS, 0, CMD_ACCESS_READ, run_users, NULL,
                                       NULL, sizeof(cmd_activity_users_args_t), sizeof(cmd_activity_users_res_t),
                                       cmd_keys_first };
const cmd_def_t CMD_ACTIVITY_RETENTION = { "ACTIVITY.RETENTION", CMD_ID_ACTIVITY_RETENTION, 0, CMD_ACCESS_READ,
                                           run_retention, NULL, NULL, sizeof(cmd_activity_retention_args_t),
                                           sizeof(cmd_activity_retention_res_t), cmd_keys_first };
const cmd_def_t CMD_ACTIVITY_INFO = { "ACTIVITY.INFO", CMD_ID_ACTIVITY_INFO, 0, CMD_ACCESS_READ, run_info, NULL, NULL,
                                      sizeof(cmd_activity_key_args_t), sizeof(cmd_activity_info_t), cmd_keys_first };
