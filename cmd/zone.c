/* zone.c - see zone.h. */
#include "cmd/zone.h"

#include <glib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZONE_BUCKETS 64          /* a few hundred zones at most: short chains */

typedef struct tz_zone {
    cal_zone_t base;             /* first: a cal_zone_t * is a tz_zone_t * */
    GTimeZone *tz;
    int64_t *at;                 /* transitions: at[i] is when off[i] starts (at[0] = CAL_MIN_S) */
    int32_t *off;
    size_t n;
    struct tz_zone *next;        /* the bucket's chain (set before the zone is published) */
    char name[CAL_ZONE_NAME_MAX + 1];
} tz_zone_t;

/* Zones are published at the head of their bucket's chain with a release
 * store and never removed, so lookups read without a lock; loads take
 * load_lock, one at a time, so a name is read once. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(tz_zone_t *) buckets[ZONE_BUCKETS];

/* ------------------------------------------------------------------------ */
/* Offsets                                                                  */
/* ------------------------------------------------------------------------ */

/* The index of the interval holding t: at[i] <= t < at[i + 1] (0 before
 * at[0]: the table's first offset stands for the years before it, its last
 * for those after). */
static size_t interval_of(const tz_zone_t *tz, int64_t t)
{
    size_t lo = 0, hi = tz->n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (tz->at[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int32_t zone_offset_at(const cal_zone_t *z, int64_t t)
{
    const tz_zone_t *tz = (const tz_zone_t *)z;
    return tz->off[interval_of(tz, t)];
}

static int64_t zone_next_change(const cal_zone_t *z, int64_t t)
{
    const tz_zone_t *tz = (const tz_zone_t *)z;
    size_t i = interval_of(tz, t) + 1;
    if (t < tz->at[0])
        i = 1;
    return i < tz->n ? tz->at[i] : INT64_MAX;
}

/* Fills z->at/off from GLib's intervals between CAL_MIN_S and CAL_MAX_S. */
static bool zone_index(tz_zone_t *z)
{
    GTimeZone *tz = z->tz;
    int k0 = g_time_zone_find_interval(tz, G_TIME_TYPE_UNIVERSAL, CAL_MIN_S);
    int k1 = g_time_zone_find_interval(tz, G_TIME_TYPE_UNIVERSAL, CAL_MAX_S - 1);
    if (k0 < 0 || k1 < k0)
        return false;
    size_t cap = (size_t)(k1 - k0) + 1;
    z->at = malloc(cap * sizeof(*z->at));
    z->off = malloc(cap * sizeof(*z->off));
    if (!z->at || !z->off)
        return false;
    z->at[0] = CAL_MIN_S;
    z->off[0] = g_time_zone_get_offset(tz, k0);
    z->n = 1;
    int64_t from = CAL_MIN_S;
    for (int k = k0 + 1; k <= k1; k++) {
        /* the first instant GLib places in interval k or later */
        int64_t lo = from, hi = CAL_MAX_S - 1;
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            if (g_time_zone_find_interval(tz, G_TIME_TYPE_UNIVERSAL, mid) >= k)
                hi = mid;
            else
                lo = mid;
        }
        int ki = g_time_zone_find_interval(tz, G_TIME_TYPE_UNIVERSAL, hi);
        int32_t o = g_time_zone_get_offset(tz, ki);
        from = hi;
        if (ki > k)
            k = ki;   /* an empty interval: skip to the one GLib answers */
        if (o == z->off[z->n - 1])
            continue;   /* a change of name or DST flag only */
        z->at[z->n] = hi;
        z->off[z->n] = o;
        z->n++;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Names and the cache                                                      */
/* ------------------------------------------------------------------------ */

/* IANA names: letters, digits, '_', '-', '+' and '/' between parts, no dots. */
static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > CAL_ZONE_NAME_MAX || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '-' || c == '+' || (c == '/' && s[i - 1] != '/' && i + 1 < n);
        if (!ok)
            return false;
    }
    return true;
}

/* The name is a tzdata file (TZif magic) in $TZDIR or /usr/share/zoneinfo. */
static bool tzif_file(const char *name)
{
    const char *dir = getenv("TZDIR");
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char magic[4];
    bool ok = fread(magic, 1, 4, f) == 4 && !memcmp(magic, "TZif", 4);
    fclose(f);
    return ok;
}

static unsigned bucket_of(const char *s, size_t n)
{
    unsigned h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h % ZONE_BUCKETS;
}

static tz_zone_t *find(unsigned b, const char *s, size_t n)
{
    for (tz_zone_t *z = atomic_load_explicit(&buckets[b], memory_order_acquire); z; z = z->next)
        if (z->base.name_len == n && !memcmp(z->name, s, n))
            return z;
    return NULL;
}

static void zone_free(tz_zone_t *z)
{
    if (z->tz)
        g_time_zone_unref(z->tz);
    free(z->at);
    free(z->off);
    free(z);
}

static tz_zone_t *zone_load(const char *s, size_t n, const char **why)
{
    tz_zone_t *z = calloc(1, sizeof(*z));
    if (!z) {
        *why = "out of memory";
        return NULL;
    }
    memcpy(z->name, s, n);
    z->base.name = z->name;
    z->base.name_len = n;
    z->base.offset_at = zone_offset_at;
    z->base.next_change = zone_next_change;
    if (!tzif_file(z->name) || !(z->tz = g_time_zone_new_identifier(z->name))) {
        *why = "is not a time zone of this system's tzdata (an IANA name such as Europe/Paris or America/New_York)";
        zone_free(z);
        return NULL;
    }
    if (!zone_index(z)) {
        *why = "out of memory";
        zone_free(z);
        return NULL;
    }
    return z;
}

const cal_zone_t *cmd_zone_get(const char *s, size_t n, const char **why)
{
    if (!name_ok(s, n)) {
        *why = "is not a time zone name (an IANA name such as Europe/Paris or America/New_York)";
        return NULL;
    }
    unsigned b = bucket_of(s, n);
    tz_zone_t *z = find(b, s, n);
    if (z)
        return &z->base;
    pthread_mutex_lock(&load_lock);
    z = find(b, s, n);   /* another thread may have loaded it meanwhile */
    if (!z && (z = zone_load(s, n, why))) {
        z->next = atomic_load_explicit(&buckets[b], memory_order_relaxed);
        atomic_store_explicit(&buckets[b], z, memory_order_release);
    }
    pthread_mutex_unlock(&load_lock);
    return z ? &z->base : NULL;
}
