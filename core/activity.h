/*
 * activity.h - daily active users on compressed bitmaps: which users (32-bit
 * ids) were active on which UTC day, and fast distinct counts over any window.
 *
 * The interview question behind it: "store one year of daily logins for 100
 * million users and count the active users in any time window quickly".  A
 * Redis answer keeps one bit string per day (12.5 MB each for 100M ids,
 * whatever the activity) and answers a window with BITOP OR over every day of
 * it.  Here each day is a Roaring bitmap (Chambi, Lemire, Kaser, Godin:
 * "Better bitmap performance with Roaring bitmaps", 2016; CRoaring), which
 * splits the 32-bit id space into 65536 chunks of 65536 ids and stores each
 * chunk the cheapest of three ways:
 *
 *     array   <= 4096 ids as sorted u16           2 bytes per id
 *     bitset  > 4096 ids as 65536 bits             8 KiB per chunk
 *     run     runs of consecutive ids (start,len)  4 bytes per run
 *
 * so the size follows the information, not the id range:
 *
 *     one day of 10M ids, active with p    Redis bit string   Roaring
 *     p = 10% random                       1.25 MB            ~1.25 MB (bitsets)
 *     p =  1% random                       1.25 MB            ~0.2 MB (arrays)
 *     ids active in long runs              1.25 MB            a few KB (runs)
 *
 * Month views.  Next to the days, the key keeps one bitmap per calendar month
 * holding the union of its days, updated in step with every write.  A window
 * is answered from the months it covers entirely plus the loose days at its
 * two ends, so a 365-day window unions at most 12 months and ~60 days (a
 * dozen or a few dozen bitmaps, not 365).  The union is never built: chunk by
 * chunk, a chunk held by one bitmap counts its container's cached
 * cardinality, several are OR'd into one 8 KiB scratch bitset counted with
 * POPCNT, and a full chunk (all 65536 ids) settles at once.  Run optimisation
 * is applied after every write.  "All days" windows intersect the days
 * smallest first (CRoaring's and / and_cardinality) and stop as soon as the
 * intersection is empty.
 *
 * Retention.  A key keeps the ACTIVITY_RETAIN_DAYS (731: two years, a leap
 * day included) days ending at the newest day it has recorded: recording a
 * newer day drops older days (and rebuilds the month views they fed); a day
 * older than that range cannot be recorded.  Windows (count, retention) may
 * be at most ACTIVITY_RETAIN_DAYS long; days outside the retained range hold
 * nobody.
 *
 * Days are numbered from 1970-01-01 (day 0) to 9999-12-31, UTC calendar
 * ("YYYY-MM-DD", proleptic Gregorian).
 */
#ifndef TALLY_ACTIVITY_H
#define TALLY_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <roaring/roaring.h>

#include "core/status.h"
#include "core/types.h"

/* The on-disk tag of per-day Roaring bitmaps values (core/types.h): never changed nor reused. */
enum { TYPE_TAG_ACTIVITY = 10 };

#define ACTIVITY_RETAIN_DAYS 731       /* two years, a leap day included */
#define ACTIVITY_MAX_DAY 2932896       /* 9999-12-31: the last "YYYY-MM-DD" day */

typedef struct activity activity_t;

typedef enum activity_mode {
    ACTIVITY_ANY = 0,   /* active on at least one day of the window */
    ACTIVITY_ALL        /* active on every day of the window */
} activity_mode_t;

/* ------------------------------------------------------------------------ */
/* Days                                                                     */
/* ------------------------------------------------------------------------ */

/* Parses exactly "YYYY-MM-DD" (a real calendar day, 1970-01-01 ..
 * 9999-12-31) into a day number; false otherwise. */
bool activity_parse_day(const char *s, size_t len, int32_t *day);
/* Writes "YYYY-MM-DD" and a NUL into out. */
void activity_format_day(int32_t day, char out[11]);

/* ------------------------------------------------------------------------ */
/* The value                                                                */
/* ------------------------------------------------------------------------ */

/* An empty key; NULL on allocation failure. */
activity_t *activity_create(void);
void activity_free(activity_t *a);

/* The oldest day this key can still record: the newest recorded day minus
 * ACTIVITY_RETAIN_DAYS - 1 (0 when nothing is recorded). */
int32_t activity_oldest_writable(const activity_t *a);

/* Records users[0..n) (any order, repeats allowed) as active on `day`
 * (>= activity_oldest_writable).  *added receives how many were not yet
 * active that day; nothing changes when it is 0.  CORE_OK, or CORE_NOMEM
 * with nothing changed. */
core_status_t activity_add(activity_t *a, int32_t day, const uint32_t *users, size_t n, uint64_t *added);
/* The same with a bitmap of users (OR'd into the day). */
core_status_t activity_merge(activity_t *a, int32_t day, const roaring_bitmap_t *users, uint64_t *added);
/* A bound on what activity_merge(a, day, users) adds to activity_heap_bytes
 * whatever a holds (the day and its month view each grow by at most a
 * bitset or a few bytes per id in every container users touches), and
 * activity_add of n ids: what a request asks room for before it writes. */
uint64_t activity_merge_bound(const roaring_bitmap_t *users);
uint64_t activity_add_bound(size_t n);

/* Distinct users over [from, to] (inclusive, to - from < RETAIN_DAYS).
 * CORE_OK, or CORE_NOMEM. */
core_status_t activity_count(const activity_t *a, int32_t from, int32_t to, activity_mode_t mode, uint64_t *out);
/* Users active on `day`. */
uint64_t activity_day_users(const activity_t *a, int32_t day);
/* Up to `limit` user ids >= cursor active on `day`, ascending, into out;
 * returns how many.  *next is the cursor for the following page, or
 * UINT64_MAX when there is none. */
size_t activity_users(const activity_t *a, int32_t day, uint64_t cursor, uint32_t *out, size_t limit,
                      uint64_t *next);
/* For the users active on `cohort`: how many were also active on each of the
 * `ndays` following days (out[0] = cohort + 1).  *cohort_users receives the
 * cohort's size. */
void activity_retention(const activity_t *a, int32_t cohort, int32_t ndays, uint64_t *cohort_users,
                        uint64_t *out);

/* Facts for GET /activity/{key}. */
size_t activity_ndays(const activity_t *a);
int32_t activity_first_day(const activity_t *a);   /* -1 when empty */
int32_t activity_last_day(const activity_t *a);    /* -1 when empty */
size_t activity_nmonths(const activity_t *a);
/* Heap bytes owned (all bitmaps, day and month, and the tables). O(1). */
size_t activity_heap_bytes(const activity_t *a);

/* ------------------------------------------------------------------------ */
/* Bulk import                                                              */
/* ------------------------------------------------------------------------ */

/* Decodes a bitmap in the portable Roaring format (RoaringFormatSpec; what
 * roaring_bitmap_portable_serialize, Java's and Go's serialize write) after
 * checking every byte: cookie, header, offsets, strictly ascending keys and
 * values, runs inside their chunk, bitset popcounts matching the declared
 * cardinalities, no trailing bytes.  NULL with *why set otherwise. */
roaring_bitmap_t *activity_bitmap_parse(const uint8_t *p, size_t len, const char **why);

extern const ks_type_t activity_type;

#endif
