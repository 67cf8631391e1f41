/*
 * activity.h - daily active users on compressed bitmaps as operations
 * (tally's own: ACTIVITY.*; the structure is core/activity.h).
 *
 * Days are numbers from 1970-01-01 (day 0) to 9999-12-31
 * (ACTIVITY_MAX_DAY), UTC calendar days; user ids are unsigned 32-bit.  A
 * key keeps the ACTIVITY_RETAIN_DAYS (731) days ending at its newest day;
 * windows longer than that are refused, days outside it hold nobody, and a
 * day older than it cannot be recorded.  Reads of a missing key count 0
 * users, like Redis's BITCOUNT of a missing key.
 *
 *   ACTIVITY.ADD        records users as active on a day; answers how many
 *                       were new that day and the day's users.  A day more
 *                       than ACTIVITY_AHEAD_DAYS past the request's UTC date
 *                       is refused: it would move the retained range forward
 *                       and drop the key's oldest days.  A record that adds
 *                       nobody to a missing key creates nothing.
 *   ACTIVITY.IMPORT     the same with a bitmap in the portable Roaring format
 *                       (RoaringFormatSpec), OR'd into the day; the bytes are
 *                       checked whole first.
 *   ACTIVITY.COUNT      distinct users active on any day / on every day of a
 *                       window (from <= to, at most 731 days).
 *   ACTIVITY.USERS      a page of a day's user ids from a cursor.
 *   ACTIVITY.RETENTION  for a cohort day's users, how many were active on
 *                       each of the following days.
 *   ACTIVITY.INFO       days and months held, the range, the oldest day still
 *                       writable, memory (NOT_FOUND for a missing key).
 *
 * Records (after the version byte 1):
 *   ACTIVITY.ADD      key | i32 day | u32 n | n x u32 user
 *   ACTIVITY.IMPORT   key | i32 day | u32 length | the portable bitmap
 */
#ifndef TALLY_CMD_ACTIVITY_H
#define TALLY_CMD_ACTIVITY_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/batch.h"
#include "cmd/def.h"
#include "core/activity.h"

/* The journal ids of the activity sets operations (cmd/def.h): a number is never
 * changed nor reused once a release wrote it (tests/unit/test_cmd_registry.c). */
enum {
    CMD_ID_ACTIVITY_ADD = 160,
    CMD_ID_ACTIVITY_IMPORT = 161,
    CMD_ID_ACTIVITY_COUNT = 162,
    CMD_ID_ACTIVITY_USERS = 163,
    CMD_ID_ACTIVITY_RETENTION = 164,
    CMD_ID_ACTIVITY_INFO = 165,
};

/* How far past the request's UTC date a day may be recorded: one day, for
 * clients ahead of UTC (up to +14 h). */
#define ACTIVITY_AHEAD_DAYS 1

typedef struct cmd_activity_add_args {
    const char *key;
    size_t klen;
    int32_t day;                 /* 0..ACTIVITY_MAX_DAY */
    cmd_array_t users;           /* uint32_t: 1..CMD_BATCH_MAX ids, repeats allowed */
} cmd_activity_add_args_t;

typedef struct cmd_activity_import_args {
    const char *key;
    size_t klen;
    int32_t day;                 /* 0..ACTIVITY_MAX_DAY */
    const uint8_t *bitmap;       /* a portable Roaring bitmap (checked by the operation) */
    size_t len;
} cmd_activity_import_args_t;

typedef struct cmd_activity_add_res {
    uint64_t added;              /* users not active that day before */
    uint64_t day_users;          /* the day's users after */
} cmd_activity_add_res_t;

typedef struct cmd_activity_count_args {
    const char *key;
    size_t klen;
    int32_t from, to;            /* days */
    activity_mode_t mode;
} cmd_activity_count_args_t;

typedef struct cmd_activity_count_res {
    uint64_t users;
} cmd_activity_count_res_t;

typedef struct cmd_activity_users_args {
    const char *key;
    size_t klen;
    int32_t day;
    uint32_t cursor;             /* the smallest id answered */
    size_t limit;                /* 1..CMD_BATCH_MAX ids */
} cmd_activity_users_args_t;

/* ACTIVITY.USERS' page: free ids with free(). */
typedef struct cmd_activity_users_res {
    uint32_t *ids;
    size_t n;
    uint64_t next;               /* the next page's cursor; UINT64_MAX: none */
} cmd_activity_users_res_t;

typedef struct cmd_activity_retention_args {
    const char *key;
    size_t klen;
    int32_t cohort;
    int64_t days;                /* >= 1: the days after the cohort */
} cmd_activity_retention_args_t;

/* ACTIVITY.RETENTION's answer: free counts with free(). */
typedef struct cmd_activity_retention_res {
    uint64_t cohort_users;
    uint64_t *counts;            /* days entries: counts[i] for cohort + 1 + i */
} cmd_activity_retention_res_t;

typedef struct cmd_activity_key_args {
    const char *key;
    size_t klen;
} cmd_activity_key_args_t;

typedef struct cmd_activity_info {
    uint64_t days, months;
    int32_t first_day, last_day, oldest_writable;
    uint64_t memory_bytes;
} cmd_activity_info_t;

extern const cmd_def_t CMD_ACTIVITY_ADD, CMD_ACTIVITY_IMPORT, CMD_ACTIVITY_COUNT, CMD_ACTIVITY_USERS,
    CMD_ACTIVITY_RETENTION, CMD_ACTIVITY_INFO;

#endif
