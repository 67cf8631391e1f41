/* sliding_log.c - see sliding_log.h for the algorithm and the layout. */
#include "core/sliding_log.h"

#include <stdlib.h>
#include <string.h>

#define SLOG_MIN_CAP 4     /* smallest ring after shrinking: a 48-byte allocation */
#define SLOG_FIRST_CAP 16  /* a new ring (or max_count if smaller): skips three early regrowths */

struct slog {
    uint32_t cap;        /* slots in ts[] */
    uint32_t head;       /* index of the oldest timestamp */
    uint32_t len;        /* timestamps held */
    uint32_t unused;
    int64_t ts[];
};

/* ------------------------------------------------------------------------ */
/* Ring                                                                     */
/* ------------------------------------------------------------------------ */

static inline int64_t at(const slog_t *l, uint32_t i)
{
    uint32_t j = l->head + i;
    if (j >= l->cap)
        j -= l->cap;
    return l->ts[j];
}

static slog_t *ring_new(uint32_t cap)
{
    slog_t *l = malloc(sizeof(*l) + (size_t)cap * sizeof(int64_t));
    if (l) {
        l->cap = cap;
        l->head = 0;
        l->len = 0;
        l->unused = 0;
    }
    return l;
}

/* Index of the first timestamp > cutoff (the first live one).  Expired
 * actions sit at the front and are few between two commits: look at the first
 * ones, then bisect. */
static uint32_t first_after(const slog_t *l, int64_t cutoff)
{
    uint32_t hi = l ? l->len : 0, lo = 0;
    for (; lo < hi && lo < 8; lo++)
        if (at(l, lo) > cutoff)
            return lo;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (at(l, mid) <= cutoff)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ------------------------------------------------------------------------ */
/* Decisions                                                                */
/* ------------------------------------------------------------------------ */

const char *slog_validate(const slog_params_t *p, const char **field)
{
    if (p->max_count < 1) {
        *field = "max_count";
        return "must be an integer >= 1";
    }
    if (p->max_count > SLOG_MAX_COUNT) {
        *field = "max_count";
        return "is over the sliding_log bound of 100000 actions per key (8 bytes each); use the "
               "sliding_window algorithm for larger limits";
    }
    if (p->period_ns < 1 || p->period_ns > SLOG_MAX_PERIOD_NS) {
        *field = "period";
        return "must be between 1 second and 73 years";
    }
    return NULL;
}

bool slog_check(const slog_t *log, const slog_params_t *p, int64_t now_ns, int64_t quantity, rl_result_t *r)
{
    uint32_t len = log ? log->len : 0;
    uint32_t first = first_after(log, now_ns - p->period_ns);
    int64_t live = (int64_t)(len - first);
    int64_t newest = len ? at(log, len - 1) : 0;

    r->limit = p->max_count;
    r->retry_after_ns = RL_NEVER;
    if (quantity > p->max_count) {
        r->allowed = false;
    } else if (live > p->max_count - quantity) {
        r->allowed = false;
        int64_t expire_first = live + quantity - p->max_count;   /* 1..live */
        r->retry_after_ns = at(log, first + (uint32_t)(expire_first - 1)) + p->period_ns - now_ns;
    } else {
        r->allowed = true;
        if (quantity > 0) {
            live += quantity;
            if (newest < now_ns)
                newest = now_ns;
        }
    }
    r->remaining = live < p->max_count ? p->max_count - live : 0;
    r->reset_after_ns = live > 0 ? newest + p->period_ns - now_ns : 0;
    if (r->reset_after_ns < 0)
        r->reset_after_ns = 0;
    return r->allowed && quantity > 0;
}

/* The ring's slots once `need` actions are live in a ring of `cap` slots:
 * grown by doubling, but never past what max_count can use; halved when a
 * quarter full.  The one rule of slog_commit and slog_bytes_after. */
static uint64_t cap_for(uint32_t cap, uint64_t need, const slog_params_t *p)
{
    if (need > cap) {
        uint64_t c = cap ? (uint64_t)cap * 2 : SLOG_FIRST_CAP;
        while (c < need)
            c *= 2;
        if (c > (uint64_t)p->max_count && (uint64_t)p->max_count >= need)
            c = (uint64_t)p->max_count;
        return c;
    }
    if (cap > SLOG_MIN_CAP && need <= cap / 4)
        return cap / 2 > SLOG_MIN_CAP ? cap / 2 : SLOG_MIN_CAP;   /* shrink, keeping room to grow */
    return cap;
}

size_t slog_bytes_after(const slog_t *l, const slog_params_t *p, int64_t now_ns, int64_t quantity)
{
    if (quantity <= 0)
        return slog_bytes(l);
    uint32_t first = first_after(l, now_ns - p->period_ns);
    uint64_t need = (uint64_t)(l ? l->len - first : 0) + (uint64_t)quantity;
    return sizeof(*l) + (size_t)cap_for(l ? l->cap : 0, need, p) * sizeof(int64_t);
}

size_t slog_bytes_max(const slog_params_t *p)
{
    uint64_t cap = (uint64_t)p->max_count > SLOG_FIRST_CAP ? (uint64_t)p->max_count : SLOG_FIRST_CAP;
    return sizeof(slog_t) + (size_t)cap * sizeof(int64_t);
}

bool slog_commit(slog_t **logp, const slog_params_t *p, int64_t now_ns, int64_t quantity)
{
    if (quantity <= 0)
        return true;
    slog_t *l = *logp;
    uint32_t first = first_after(l, now_ns - p->period_ns);
    uint32_t live = l ? l->len - first : 0;
    uint64_t need = (uint64_t)live + (uint64_t)quantity;
    if (need > UINT32_MAX)
        return false;
    int64_t stamp = now_ns;
    if (l && l->len && at(l, l->len - 1) > stamp)
        stamp = at(l, l->len - 1);

    uint32_t cap = l ? l->cap : 0;
    uint64_t c = cap_for(cap, need, p);
    if (c > UINT32_MAX)
        return false;
    uint32_t want = (uint32_t)c;

    if (want != cap) {
        slog_t *n = ring_new(want);
        if (!n)
            return false;
        for (uint32_t i = 0; i < live; i++)
            n->ts[i] = at(l, first + i);
        n->len = live;
        free(l);
        l = n;
    } else {
        l->head = (l->head + first) % l->cap;
        l->len = live;
    }
    for (int64_t i = 0; i < quantity; i++) {
        uint32_t j = l->head + l->len;
        if (j >= l->cap)
            j -= l->cap;
        l->ts[j] = stamp;
        l->len++;
    }
    *logp = l;
    return true;
}

int64_t slog_expire_ns(const slog_t *log, const slog_params_t *p)
{
    if (!log || log->len == 0)
        return 0;
    return at(log, log->len - 1) + p->period_ns;
}

size_t slog_len(const slog_t *log) { return log ? log->len : 0; }

size_t slog_bytes(const slog_t *log)
{
    return log ? sizeof(*log) + (size_t)log->cap * sizeof(int64_t) : 0;
}

slog_t *slog_clone(const slog_t *log)
{
    if (!log)
        return NULL;
    size_t n = slog_bytes(log);
    slog_t *c = malloc(n);
    if (c)
        memcpy(c, log, n);
    return c;
}

void slog_free(slog_t *log) { free(log); }

/* ------------------------------------------------------------------------ */
/* Encoding                                                                 */
/* ------------------------------------------------------------------------ */

void slog_encode(const slog_t *log, wbuf_t *out)
{
    uint32_t n = log ? log->len : 0;
    wbuf_put_u32(out, n);
    for (uint32_t i = 0; i < n; i++)
        wbuf_put_i64(out, at(log, i));
}

slog_t *slog_decode(rbuf_t *r, const char **why)
{
    *why = NULL;
    uint32_t n = rbuf_u32(r);
    if (r->err) {
        *why = "sliding_log: truncated";
        return NULL;
    }
    if (n > SLOG_MAX_COUNT) {
        *why = "sliding_log: more actions than the bound";
        return NULL;
    }
    if (rbuf_left(r) < (size_t)n * 8) {
        *why = "sliding_log: truncated";
        return NULL;
    }
    if (n == 0)
        return NULL;
    uint32_t cap = SLOG_MIN_CAP;
    while (cap < n)
        cap *= 2;
    slog_t *l = ring_new(cap);
    if (!l) {
        *why = "out of memory";
        return NULL;
    }
    int64_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        int64_t t = rbuf_i64(r);
        if (t < prev || t > INT64_MAX - SLOG_MAX_PERIOD_NS) {
            free(l);
            *why = t < prev ? "sliding_log: timestamps out of order" : "sliding_log: timestamp out of range";
            return NULL;
        }
        l->ts[i] = t;
        prev = t;
    }
    l->len = n;
    return l;
}
