/* activity.c - see activity.h. */
#include "core/activity.h"

#include <stdlib.h>
#include <string.h>

#include "core/bits.h"
#include "core/codec.h"
#include "core/hash.h"
#include "core/roaring_fence.h"

#define ACTIVITY_ENC_VERSION 1     /* first byte of every encoding */
#define ACTIVITY_SHRINK_DIV 8      /* shrink a bitmap whose spare capacity exceeds 1/8 of it */
#define ROARING_CHUNK_IDS 65536    /* ids per Roaring container */
#define ROARING_ARRAY_MAX 4096     /* the most ids an array container holds (beyond: bitset) */
#define ROARING_BITSET_BYTES 8192  /* a bitset container: 65536 bits */
#define ACTIVITY_CONTAINER_BYTES 96   /* a container's struct and its key/type/pointer slots, with slack */
#define ACTIVITY_TABLE_BYTES 65536    /* a day and a month slot, the tables doubling to hold them */

/* One bitmap: a day (id = day number) or a month view (id = year*12 + month-1). */
typedef struct slot {
    int32_t id;
    uint64_t card;             /* cached cardinality */
    size_t bytes;              /* cached heap bytes of bm */
    roaring_bitmap_t *bm;
} slot_t;

typedef struct slots {
    slot_t *v;                 /* ascending by id */
    size_t n, cap;
} slots_t;

struct activity {
    slots_t days;
    slots_t months;
    size_t bm_bytes;           /* sum of every slot's bytes */
};

/* roaring_bitmap_free() of CRoaring 0.2 does not accept NULL. */
static void rb_free(roaring_bitmap_t *r)
{
    if (r)
        roaring_bitmap_free(r);
}

/* ------------------------------------------------------------------------ */
/* Calendar (proleptic Gregorian, H. Hinnant's days_from_civil)              */
/* ------------------------------------------------------------------------ */

static int32_t days_from_civil(int32_t y, int32_t m, int32_t d)
{
    y -= m <= 2;
    int32_t era = (y >= 0 ? y : y - 399) / 400;
    int32_t yoe = y - era * 400;
    int32_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int32_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int32_t z, int32_t *y, int32_t *m, int32_t *d)
{
    z += 719468;
    int32_t era = (z >= 0 ? z : z - 146096) / 146097;
    int32_t doe = z - era * 146097;
    int32_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int32_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int32_t mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yoe + era * 400 + (*m <= 2);
}

static int32_t month_of(int32_t day)
{
    int32_t y, m, d;
    civil_from_days(day, &y, &m, &d);
    return y * 12 + m - 1;
}

static int32_t month_first_day(int32_t mon) { return days_from_civil(mon / 12, mon % 12 + 1, 1); }
static int32_t month_last_day(int32_t mon) { return month_first_day(mon + 1) - 1; }

bool activity_parse_day(const char *s, size_t len, int32_t *day)
{
    if (len != 10 || s[4] != '-' || s[7] != '-')
        return false;
    int32_t v[3] = { 0, 0, 0 };
    static const int at[3] = { 0, 5, 8 }, n[3] = { 4, 2, 2 };
    for (int f = 0; f < 3; f++)
        for (int i = 0; i < n[f]; i++) {
            char c = s[at[f] + i];
            if (c < '0' || c > '9')
                return false;
            v[f] = v[f] * 10 + (c - '0');
        }
    if (v[0] < 1970 || v[1] < 1 || v[1] > 12 || v[2] < 1)
        return false;
    int32_t first = days_from_civil(v[0], v[1], 1);
    int32_t mdays = days_from_civil(v[1] == 12 ? v[0] + 1 : v[0], v[1] == 12 ? 1 : v[1] + 1, 1) - first;
    if (v[2] > mdays)
        return false;
    *day = first + v[2] - 1;
    return true;
}

void activity_format_day(int32_t day, char out[11])
{
    int32_t y, m, d;
    civil_from_days(day, &y, &m, &d);
    out[0] = (char)('0' + y / 1000 % 10);
    out[1] = (char)('0' + y / 100 % 10);
    out[2] = (char)('0' + y / 10 % 10);
    out[3] = (char)('0' + y % 10);
    out[4] = '-';
    out[5] = (char)('0' + m / 10);
    out[6] = (char)('0' + m % 10);
    out[7] = '-';
    out[8] = (char)('0' + d / 10);
    out[9] = (char)('0' + d % 10);
    out[10] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Bitmap memory                                                            */
/* ------------------------------------------------------------------------ */

/* After a change: compress runs, give back spare capacity when it is large,
 * and refresh the slot's cached cardinality and size. */
static void slot_settle(activity_t *a, slot_t *s, bool optimise)
{
    if (optimise)
        roaring_bitmap_run_optimize(s->bm);
    size_t alloc, used;
    rfence_measure(s->bm, &alloc, &used);
    if (optimise && alloc - used > alloc / ACTIVITY_SHRINK_DIV) {
        roaring_bitmap_shrink_to_fit(s->bm);
        rfence_measure(s->bm, &alloc, &used);
    }
    a->bm_bytes = a->bm_bytes - s->bytes + alloc;
    s->bytes = alloc;
    s->card = roaring_bitmap_get_cardinality(s->bm);
}

/* ------------------------------------------------------------------------ */
/* Sorted slot tables                                                       */
/* ------------------------------------------------------------------------ */

/* Index of the first slot with id >= id. */
static size_t slots_lower(const slots_t *s, int32_t id)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static slot_t *slots_get(const slots_t *s, int32_t id)
{
    size_t i = slots_lower(s, id);
    return i < s->n && s->v[i].id == id ? &s->v[i] : NULL;
}

static bool slots_reserve(slots_t *s, size_t n)
{
    if (n <= s->cap)
        return true;
    size_t cap = s->cap ? s->cap * 2 : 8;
    while (cap < n)
        cap *= 2;
    slot_t *v = realloc(s->v, cap * sizeof(*v));
    if (!v)
        return false;
    s->v = v;
    s->cap = cap;
    return true;
}

/* Inserts an empty slot (bm NULL) at index i; capacity must be reserved. */
static slot_t *slots_insert(slots_t *s, size_t i, int32_t id)
{
    memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*s->v));
    s->n++;
    memset(&s->v[i], 0, sizeof(s->v[i]));
    s->v[i].id = id;
    return &s->v[i];
}

static void slots_remove(activity_t *a, slots_t *s, size_t i, size_t count)
{
    for (size_t k = i; k < i + count; k++) {
        a->bm_bytes -= s->v[k].bytes;
        rb_free(s->v[k].bm);
    }
    memmove(&s->v[i], &s->v[i + count], (s->n - i - count) * sizeof(*s->v));
    s->n -= count;
}

/* ------------------------------------------------------------------------ */
/* The value                                                                */
/* ------------------------------------------------------------------------ */

activity_t *activity_create(void) { return calloc(1, sizeof(activity_t)); }

void activity_free(activity_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->days.n; i++)
        rb_free(a->days.v[i].bm);
    for (size_t i = 0; i < a->months.n; i++)
        rb_free(a->months.v[i].bm);
    free(a->days.v);
    free(a->months.v);
    free(a);
}

size_t activity_heap_bytes(const activity_t *a)
{
    return sizeof(*a) + (a->days.cap + a->months.cap) * sizeof(slot_t) + a->bm_bytes;
}

/* What OR-ing `card` ids spread over `containers` Roaring containers into
 * one bitmap can add to what rfence_measure reports: per container at most
 * a bitset (8 KiB), or 4 bytes an id (a new run, or an array slot with its
 * doubling slack: 8), plus the container's own record. */
static uint64_t or_growth(uint64_t card, uint64_t containers)
{
    uint64_t data = 8 * card < ROARING_BITSET_BYTES * containers ? 8 * card : ROARING_BITSET_BYTES * containers;
    return data + ACTIVITY_CONTAINER_BYTES * containers;
}

uint64_t activity_merge_bound(const roaring_bitmap_t *users)
{
    roaring_statistics_t st;
    roaring_bitmap_statistics(users, &st);
    return 2 * or_growth(st.cardinality, st.n_containers) + ACTIVITY_TABLE_BYTES;
}

uint64_t activity_add_bound(size_t n)
{
    uint64_t containers = n < ROARING_CHUNK_IDS ? n : ROARING_CHUNK_IDS;
    return 2 * or_growth(n, containers) + ACTIVITY_TABLE_BYTES;
}

size_t activity_ndays(const activity_t *a) { return a->days.n; }
size_t activity_nmonths(const activity_t *a) { return a->months.n; }
int32_t activity_first_day(const activity_t *a) { return a->days.n ? a->days.v[0].id : -1; }
int32_t activity_last_day(const activity_t *a) { return a->days.n ? a->days.v[a->days.n - 1].id : -1; }

int32_t activity_oldest_writable(const activity_t *a)
{
    if (!a->days.n)
        return 0;
    int32_t o = a->days.v[a->days.n - 1].id - (ACTIVITY_RETAIN_DAYS - 1);
    return o > 0 ? o : 0;
}

/* Recomputes the month view of `mon` as the union of its days (removing it
 * when no day is left).  False on allocation failure. */
static bool month_rebuild(activity_t *a, int32_t mon)
{
    size_t lo = slots_lower(&a->days, month_first_day(mon));
    size_t hi = slots_lower(&a->days, month_last_day(mon) + 1);
    size_t mi = slots_lower(&a->months, mon);
    bool exists = mi < a->months.n && a->months.v[mi].id == mon;
    if (lo == hi) {
        if (exists)
            slots_remove(a, &a->months, mi, 1);
        return true;
    }
    const roaring_bitmap_t **v = malloc((hi - lo) * sizeof(*v));
    if (!v)
        return false;
    for (size_t i = lo; i < hi; i++)
        v[i - lo] = a->days.v[i].bm;
    roaring_bitmap_t *u = hi - lo == 1 ? roaring_bitmap_copy(v[0]) : roaring_bitmap_or_many(hi - lo, v);
    free(v);
    if (!u)
        return false;
    if (!exists) {
        if (!slots_reserve(&a->months, a->months.n + 1)) {
            rb_free(u);
            return false;
        }
        slots_insert(&a->months, mi, mon);
    }
    slot_t *m = &a->months.v[mi];
    rb_free(m->bm);
    m->bm = u;
    slot_settle(a, m, true);
    return true;
}

/* Drops the days before `oldest` and rebuilds the months they fed. */
static void drop_before(activity_t *a, int32_t oldest)
{
    size_t k = slots_lower(&a->days, oldest);
    if (k == 0)
        return;
    int32_t first = month_of(a->days.v[0].id), last = month_of(a->days.v[k - 1].id);
    slots_remove(a, &a->days, 0, k);
    for (int32_t mon = first; mon <= last; mon++)
        month_rebuild(a, mon);   /* on failure the view keeps dropped users: counts may include them */
}

core_status_t activity_merge(activity_t *a, int32_t day, const roaring_bitmap_t *users, uint64_t *added)
{
    *added = 0;
    if (roaring_bitmap_is_empty(users))
        return CORE_OK;
    int32_t mon = month_of(day);
    size_t di = slots_lower(&a->days, day);
    bool day_exists = di < a->days.n && a->days.v[di].id == day;
    if (day_exists && roaring_bitmap_is_subset(users, a->days.v[di].bm))
        return CORE_OK;   /* nobody new: leave every byte as it was */
    /* reserve table room first so that nothing is half done on failure */
    if (!slots_reserve(&a->days, a->days.n + 1) || !slots_reserve(&a->months, a->months.n + 1))
        return CORE_NOMEM;
    size_t mi = slots_lower(&a->months, mon);
    bool month_exists = mi < a->months.n && a->months.v[mi].id == mon;
    roaring_bitmap_t *nd = day_exists ? NULL : roaring_bitmap_copy(users);
    roaring_bitmap_t *nm = month_exists ? NULL : roaring_bitmap_copy(users);
    if ((!day_exists && !nd) || (!month_exists && !nm)) {
        rb_free(nd);
        rb_free(nm);
        return CORE_NOMEM;
    }
    slot_t *d;
    if (day_exists) {
        d = &a->days.v[di];
        uint64_t before = d->card;
        roaring_bitmap_or_inplace(d->bm, users);
        slot_settle(a, d, true);
        *added = d->card - before;
    } else {
        d = slots_insert(&a->days, di, day);
        d->bm = nd;
        slot_settle(a, d, true);
        *added = d->card;
    }
    slot_t *m;
    if (month_exists) {
        m = &a->months.v[mi];
        roaring_bitmap_or_inplace(m->bm, users);
    } else {
        m = slots_insert(&a->months, mi, mon);
        m->bm = nm;
    }
    slot_settle(a, m, true);
    if (di == a->days.n - 1)
        drop_before(a, day - (ACTIVITY_RETAIN_DAYS - 1));
    return CORE_OK;
}

core_status_t activity_add(activity_t *a, int32_t day, const uint32_t *users, size_t n, uint64_t *added)
{
    *added = 0;
    if (n == 0)
        return CORE_OK;
    roaring_bitmap_t *u = roaring_bitmap_of_ptr(n, users);
    if (!u)
        return CORE_NOMEM;
    core_status_t st = activity_merge(a, day, u, added);
    rb_free(u);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */
/* ------------------------------------------------------------------------ */

uint64_t activity_day_users(const activity_t *a, int32_t day)
{
    const slot_t *s = slots_get(&a->days, day);
    return s ? s->card : 0;
}

/* Distinct ids over the slots' bitmaps (core/roaring_fence.c counts a
 * union without building it).  False on allocation failure. */
static bool union_count(const slot_t *const *v, size_t n, uint64_t *out)
{
    *out = n == 1 ? v[0]->card : 0;
    if (n <= 1)
        return true;
    const roaring_bitmap_t **bms = malloc(n * sizeof(*bms));
    if (!bms)
        return false;
    for (size_t i = 0; i < n; i++)
        bms[i] = v[i]->bm;
    bool ok = rfence_union_count(bms, n, out);
    free(bms);
    return ok;
}

static int by_card(const void *x, const void *y)
{
    uint64_t a = (*(const slot_t *const *)x)->card, b = (*(const slot_t *const *)y)->card;
    return a < b ? -1 : a > b;
}

/* Users active on every day: intersect smallest first, stop when empty. */
static bool intersect_count(const slot_t **v, size_t n, uint64_t *out)
{
    qsort(v, n, sizeof(*v), by_card);
    if (n == 1) {
        *out = v[0]->card;
        return true;
    }
    if (n == 2) {
        *out = roaring_bitmap_and_cardinality(v[0]->bm, v[1]->bm);
        return true;
    }
    roaring_bitmap_t *acc = roaring_bitmap_and(v[0]->bm, v[1]->bm);
    if (!acc)
        return false;
    for (size_t i = 2; i < n && !roaring_bitmap_is_empty(acc); i++)
        roaring_bitmap_and_inplace(acc, v[i]->bm);
    *out = roaring_bitmap_get_cardinality(acc);
    rb_free(acc);
    return true;
}

core_status_t activity_count(const activity_t *a, int32_t from, int32_t to, activity_mode_t mode, uint64_t *out)
{
    *out = 0;
    if (from > to)
        return CORE_OK;
    size_t lo = slots_lower(&a->days, from), hi = slots_lower(&a->days, to + 1);
    if (lo == hi)
        return CORE_OK;
    /* at most one slot per day of the window */
    const slot_t **v = malloc((size_t)(to - from + 1) * sizeof(*v));
    if (!v)
        return CORE_NOMEM;
    size_t n = 0;
    bool ok;
    if (mode == ACTIVITY_ALL) {
        if (hi - lo != (size_t)(to - from + 1)) {
            free(v);
            return CORE_OK;   /* a day with nobody: nobody was active on every day */
        }
        for (size_t i = lo; i < hi; i++)
            v[n++] = &a->days.v[i];
        ok = intersect_count(v, n, out);
    } else {
        /* whole months inside the window come from their month view, the
         * loose days at both ends from the days themselves */
        size_t i = lo;
        for (int32_t mon = month_of(from); mon <= month_of(to) && i < hi; mon++) {
            int32_t mf = month_first_day(mon), ml = month_last_day(mon);
            if (mf >= from && ml <= to) {
                const slot_t *m = slots_get(&a->months, mon);
                if (m)
                    v[n++] = m;
                while (i < hi && a->days.v[i].id <= ml)
                    i++;
            } else {
                while (i < hi && a->days.v[i].id <= ml)
                    v[n++] = &a->days.v[i++];
            }
        }
        ok = union_count(v, n, out);
    }
    free(v);
    return ok ? CORE_OK : CORE_NOMEM;
}

size_t activity_users(const activity_t *a, int32_t day, uint64_t cursor, uint32_t *out, size_t limit,
                      uint64_t *next)
{
    *next = UINT64_MAX;
    const slot_t *s = slots_get(&a->days, day);
    if (!s || cursor > UINT32_MAX || limit == 0)
        return 0;
    roaring_uint32_iterator_t it;
    roaring_init_iterator(s->bm, &it);
    if (!roaring_move_uint32_iterator_equalorlarger(&it, (uint32_t)cursor))
        return 0;
    size_t got = roaring_read_uint32_iterator(&it, out, (uint32_t)limit);
    if (it.has_value)
        *next = it.current_value;
    return got;
}

void activity_retention(const activity_t *a, int32_t cohort, int32_t ndays, uint64_t *cohort_users, uint64_t *out)
{
    const slot_t *c = slots_get(&a->days, cohort);
    *cohort_users = c ? c->card : 0;
    memset(out, 0, (size_t)ndays * sizeof(*out));
    if (!c)
        return;
    for (size_t i = slots_lower(&a->days, cohort + 1); i < a->days.n && a->days.v[i].id <= cohort + ndays; i++)
        out[a->days.v[i].id - cohort - 1] = roaring_bitmap_and_cardinality(c->bm, a->days.v[i].bm);
}

/* ------------------------------------------------------------------------ */
/* Portable Roaring format, checked byte by byte                            */
/* ------------------------------------------------------------------------ */
/*
 *   cookie u32: 12346 (no run containers) then size u32,
 *               or 12347 | (size-1) << 16 then a run-flag bitset of (size+7)/8 bytes
 *   size x { key u16, cardinality-1 u16 }
 *   size x offset u32 (always without runs; with runs only when size >= 4)
 *   containers: run    { n u16, n x { start u16, length-1 u16 } }
 *               bitset 8192 bytes (cardinality > 4096)
 *               array  cardinality x u16
 *   all little-endian.
 */

static bool portable_check(const uint8_t *p, size_t len, uint64_t *card_out, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint32_t cookie = rbuf_u32(&r);
    size_t size;
    const uint8_t *runflags = NULL;
    bool offsets;
    if ((cookie & 0xffff) == SERIAL_COOKIE) {
        size = (cookie >> 16) + 1;
        runflags = rbuf_bytes(&r, (size + 7) / 8);
        offsets = size >= NO_OFFSET_THRESHOLD;
    } else if (cookie == SERIAL_COOKIE_NO_RUNCONTAINER) {
        size = rbuf_u32(&r);
        offsets = true;
    } else {
        *why = r.err ? "bitmap: truncated" : "bitmap: not the portable Roaring format (unknown cookie)";
        return false;
    }
    if (size > ROARING_CHUNK_IDS) {
        *why = "bitmap: more than 65536 containers";
        return false;
    }
    const uint8_t *hdr = rbuf_bytes(&r, size * 4);
    const uint8_t *offs = offsets ? rbuf_bytes(&r, size * 4) : NULL;
    if (r.err) {
        *why = "bitmap: truncated header";
        return false;
    }
    uint64_t total = 0;
    int32_t prev_key = -1;
    for (size_t i = 0; i < size; i++) {
        int32_t key = hdr[4 * i] | hdr[4 * i + 1] << 8;
        uint32_t card = (uint32_t)(hdr[4 * i + 2] | hdr[4 * i + 3] << 8) + 1;
        if (key <= prev_key) {
            *why = "bitmap: container keys not strictly ascending";
            return false;
        }
        prev_key = key;
        if (offs && le32_load(offs + 4 * i) != r.off) {
            *why = "bitmap: container offset does not match its position";
            return false;
        }
        if (runflags && (runflags[i / 8] >> (i % 8) & 1)) {
            uint16_t nruns = rbuf_u16(&r);
            const uint8_t *runs = rbuf_bytes(&r, (size_t)nruns * 4);
            if (r.err) {
                *why = "bitmap: truncated run container";
                return false;
            }
            uint32_t sum = 0;
            int64_t next_free = 0;   /* runs must not overlap or touch */
            for (uint32_t k = 0; k < nruns; k++) {
                uint32_t start = runs[4 * k] | runs[4 * k + 1] << 8;
                uint32_t length = runs[4 * k + 2] | runs[4 * k + 3] << 8;
                if ((int64_t)start < next_free || start + length >= ROARING_CHUNK_IDS) {
                    *why = "bitmap: run out of order, overlapping or past its chunk";
                    return false;
                }
                next_free = (int64_t)start + length + 2;
                sum += length + 1;
            }
            if (nruns == 0 || sum != card) {
                *why = "bitmap: run container cardinality mismatch";
                return false;
            }
        } else if (card > ROARING_ARRAY_MAX) {
            const uint8_t *bits = rbuf_bytes(&r, ROARING_BITSET_BYTES);
            if (r.err) {
                *why = "bitmap: truncated bitset container";
                return false;
            }
            uint64_t pc = 0;
            for (size_t k = 0; k < ROARING_BITSET_BYTES; k += 8)
                pc += (uint64_t)__builtin_popcountll(le64_load(bits + k));
            if (pc != card) {
                *why = "bitmap: bitset container cardinality mismatch";
                return false;
            }
        } else {
            const uint8_t *vals = rbuf_bytes(&r, (size_t)card * 2);
            if (r.err) {
                *why = "bitmap: truncated array container";
                return false;
            }
            int32_t prev = -1;
            for (uint32_t k = 0; k < card; k++) {
                int32_t v = vals[2 * k] | vals[2 * k + 1] << 8;
                if (v <= prev) {
                    *why = "bitmap: array container values not strictly ascending";
                    return false;
                }
                prev = v;
            }
        }
        total += card;
    }
    if (!rbuf_done(&r)) {
        *why = "bitmap: trailing bytes after the last container";
        return false;
    }
    *card_out = total;
    return true;
}

roaring_bitmap_t *activity_bitmap_parse(const uint8_t *p, size_t len, const char **why)
{
    uint64_t card;
    if (!portable_check(p, len, &card, why))
        return NULL;
    roaring_bitmap_t *bm = roaring_bitmap_portable_deserialize_safe((const char *)p, len);
    if (!bm) {
        *why = "bitmap: rejected by the decoder (or out of memory)";
        return NULL;
    }
    if (roaring_bitmap_get_cardinality(bm) != card || roaring_bitmap_portable_size_in_bytes(bm) != len) {
        rb_free(bm);
        *why = "bitmap: decoded contents differ from the header";
        return NULL;
    }
    return bm;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */
/*
 * Encoding (month views are derived and rebuilt on load):
 *
 *   | version u8 | ndays u32 | ndays x { day i32 | len u32 | portable bitmap } | xxh64 u64 |
 *
 * Days strictly ascending within ACTIVITY_RETAIN_DAYS of each other, each
 * bitmap non-empty and checked by activity_bitmap_parse; the trailing XXH64
 * (seed 0) covers every byte before it.
 */

static void type_free(void *v) { activity_free(v); }
static size_t type_size(const void *v) { return activity_heap_bytes(v); }

static void type_encode(const void *v, wbuf_t *out)
{
    const activity_t *a = v;
    size_t start = out->len;
    wbuf_put_u8(out, ACTIVITY_ENC_VERSION);
    wbuf_put_u32(out, (uint32_t)a->days.n);
    for (size_t i = 0; i < a->days.n; i++) {
        const slot_t *d = &a->days.v[i];
        size_t n = roaring_bitmap_portable_size_in_bytes(d->bm);
        wbuf_put_u32(out, (uint32_t)d->id);
        wbuf_put_u32(out, (uint32_t)n);
        if (!wbuf_reserve(out, n))
            return;
        roaring_bitmap_portable_serialize(d->bm, (char *)out->data + out->len);
        out->len += n;
    }
    if (!out->oom)
        wbuf_put_u64(out, tally_xxh64(out->data + start, out->len - start, 0));
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    if (len < 13) {
        *why = "activity: truncated";
        return NULL;
    }
    if (le64_load(p + len - 8) != tally_xxh64(p, len - 8, 0)) {
        *why = "activity: checksum mismatch";
        return NULL;
    }
    rbuf_t r = rbuf_make(p, len - 8);
    uint8_t ver = rbuf_u8(&r);
    uint32_t ndays = rbuf_u32(&r);
    if (ver != ACTIVITY_ENC_VERSION) {
        *why = "activity: unknown encoding version";
        return NULL;
    }
    if (ndays > ACTIVITY_RETAIN_DAYS) {
        *why = "activity: more days than a key retains";
        return NULL;
    }
    activity_t *a = activity_create();
    if (!a || !slots_reserve(&a->days, ndays ? ndays : 1)) {
        activity_free(a);
        *why = "out of memory";
        return NULL;
    }
    for (uint32_t i = 0; i < ndays; i++) {
        int32_t day = (int32_t)rbuf_u32(&r);
        size_t n;
        const uint8_t *bm = rbuf_blob(&r, &n);
        if (r.err) {
            *why = "activity: truncated day";
            goto bad;
        }
        if (day < 0 || day > ACTIVITY_MAX_DAY || (i > 0 && day <= a->days.v[i - 1].id) ||
            (i > 0 && day - a->days.v[0].id >= ACTIVITY_RETAIN_DAYS)) {
            *why = "activity: days out of order or outside the retained range";
            goto bad;
        }
        roaring_bitmap_t *b = activity_bitmap_parse(bm, n, why);
        if (!b)
            goto bad;
        slot_t *s = slots_insert(&a->days, a->days.n, day);
        s->bm = b;
        slot_settle(a, s, false);   /* keep the containers as encoded: re-encoding gives the same bytes */
        if (s->card == 0) {
            *why = "activity: empty day";
            goto bad;
        }
    }
    if (!rbuf_done(&r)) {
        *why = "activity: trailing bytes";
        goto bad;
    }
    for (size_t i = 0; i < a->days.n; i++) {
        int32_t mon = month_of(a->days.v[i].id);
        if (i > 0 && month_of(a->days.v[i - 1].id) == mon)
            continue;
        if (!month_rebuild(a, mon)) {
            *why = "out of memory";
            goto bad;
        }
    }
    return a;
bad:
    activity_free(a);
    return NULL;
}

const ks_type_t activity_type = {
    .tag = TYPE_TAG_ACTIVITY,
    .name = "activity",
    .noun = "an activity set",
    .missing = "no such key",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
