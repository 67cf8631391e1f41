/* throttle.c - see throttle.h. */
#include "core/throttle.h"

#include <stdlib.h>
#include <string.h>

#define THROTTLE_ENC_V1 1   /* GCRA only: version, algorithm, TAT */
#define THROTTLE_ENC_V2 2   /* every algorithm: version, algorithm, payload */
#define THROTTLE_ENC_V3 3   /* version 2's bytes, then the reservations */

/* A key's reservations (throttle.h): allocated by the first reservation and
 * kept, possibly empty, for the state's life (last_id keeps ids unique; a
 * stored value's inline_ok must not change). */
typedef struct rsv_set {
    uint64_t last_id;
    uint32_t n, cap;
    throttle_reservation_t v[];
} rsv_set_t;

/* Three forms, told apart by their first int64_t (the head):
 *
 *   full     head -algorithm (-1 .. -THROTTLE_ALGO_MAX), then the fields
 *            below: sizeof(throttle_t) bytes.  A state with reservations,
 *            a sliding log, and any state outside the ranges below.
 *   compact  a GCRA state without reservations: its TAT (>= 0) alone, 8 bytes.
 *   packed   a window or a token bucket without reservations, 16 or 24 bytes
 *            of 64-bit words:
 *
 *              word 0   2^63 | t        t: the window's start, the bucket's
 *                                       last refill (< 2^62)
 *              word 1   algo << 56 | a  a: the window's curr (< 2^56); the
 *                                       high 64 bits of the bucket's level,
 *                                       two's complement in 56 bits
 *              word 2   b               b: the sliding window's prev; the low
 *                                       64 bits of the bucket's level; none
 *                                       for a fixed window (its prev is 0)
 *
 *            Word 0 read as an int64_t is below -2^62: never a full head.
 *
 * The ranges are the decoder's (type_decode refuses a time above
 * INT64_MAX / 2, a count above 2 x WINDOW_MAX_COUNT < 2^51, a level beyond
 * 10^30 < 2^100), so every state a load or a decision makes has its small
 * form; one that had not (a clock past 2^62 ns, in 2116) stays full.  The
 * small forms are lengths of their own (the keyspace keeps one in an area of
 * that length: keyspace.c, KF_NARROW): each entry point reads a small state
 * through a full copy (full_of), a decision writes one back in place with
 * its form and length unchanged, and the encodings are the full form's. */
struct throttle {
    int64_t form;                /* -algo (the full form); a small state's first word */
    rsv_set_t *rsv;              /* NULL until a reservation is made */
    union {
        int64_t tat_ns;          /* gcra */
        slog_t *log;             /* sliding_log (NULL = empty) */
        window_state_t win;      /* sliding_window, fixed_window */
        tbucket_state_t tb;      /* token_bucket */
    } u;
};
_Static_assert(sizeof(struct throttle) <= KS_INLINE_MAX, "a limiter's state fits inside its entry");

#define COMPACT_BYTES sizeof(int64_t)          /* a compact GCRA state */
#define PACKED_WORDS 3                         /* the longest packed state: 24 bytes */
#define PACK_TIME_END (UINT64_C(1) << 62)      /* word 0: times below 2^62 (the decoder's INT64_MAX / 2) */
#define PACK_TIME_BIT (UINT64_C(1) << 63)      /* word 0: makes the head below -2^62 */
#define PACK_ALGO_SHIFT 56                     /* word 1: the algorithm above 56 bits */
#define PACK_LOW_MASK ((UINT64_C(1) << PACK_ALGO_SHIFT) - 1)
#define PACK_SIGN_BIT (UINT64_C(1) << (PACK_ALGO_SHIFT - 1))   /* word 1: a level's sign in 56 bits */
#define ALGO(t) ((uint8_t)-(t)->form)
#define SET_ALGO(t, a) ((t)->form = -(int64_t)(a))

static inline int64_t head_of(const throttle_t *t)
{
    int64_t h;
    memcpy(&h, t, sizeof(h));
    return h;
}
static inline bool is_full(const throttle_t *t) { return head_of(t) < 0 && head_of(t) >= -THROTTLE_ALGO_MAX; }
static inline bool is_compact(const throttle_t *t) { return head_of(t) >= 0; }   /* GCRA's */

/* A small (compact or packed) state's algorithm and length. */
static throttle_algo_t small_algo(const throttle_t *t)
{
    uint64_t w1;
    if (is_compact(t))
        return THROTTLE_GCRA;
    memcpy(&w1, (const char *)t + sizeof(w1), sizeof(w1));
    return (throttle_algo_t)(w1 >> PACK_ALGO_SHIFT);
}
static size_t algo_small_len(throttle_algo_t a)
{
    switch (a) {
    case THROTTLE_GCRA: return COMPACT_BYTES;
    case THROTTLE_FIXED_WINDOW: return 2 * sizeof(uint64_t);
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_TOKEN_BUCKET: return PACKED_WORDS * sizeof(uint64_t);
    case THROTTLE_SLIDING_LOG: break;
    }
    return sizeof(throttle_t);   /* no small form */
}
static size_t small_len(const throttle_t *t) { return algo_small_len(small_algo(t)); }

/* The small form of the full state f in w; its length, 0 when f has none
 * (reservations, a sliding log, a value outside the ranges above). */
static size_t small_form_of(const throttle_t *f, uint64_t w[PACKED_WORDS])
{
    if (f->rsv)
        return 0;
    memset(w, 0, PACKED_WORDS * sizeof(*w));
    throttle_algo_t a = (throttle_algo_t)ALGO(f);
    switch (a) {
    case THROTTLE_GCRA:
        if (f->u.tat_ns < 0)
            return 0;
        w[0] = (uint64_t)f->u.tat_ns;
        break;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW: {
        const window_state_t *s = &f->u.win;
        if (s->start < 0 || (uint64_t)s->start >= PACK_TIME_END || s->curr < 0 || (uint64_t)s->curr > PACK_LOW_MASK ||
            s->prev < 0 || (a == THROTTLE_FIXED_WINDOW && s->prev != 0))
            return 0;
        w[0] = PACK_TIME_BIT | (uint64_t)s->start;
        w[1] = (uint64_t)a << PACK_ALGO_SHIFT | (uint64_t)s->curr;
        w[2] = (uint64_t)s->prev;
        break;
    }
    case THROTTLE_TOKEN_BUCKET: {
        const tbucket_state_t *s = &f->u.tb;
        uint64_t hi = (uint64_t)((unsigned __int128)s->level >> 64);
        if (s->last_ns < 0 || (uint64_t)s->last_ns >= PACK_TIME_END || ((hi + PACK_SIGN_BIT) & ~PACK_LOW_MASK) != 0)
            return 0;   /* hi outside [-2^55, 2^55) */
        w[0] = PACK_TIME_BIT | (uint64_t)s->last_ns;
        w[1] = (uint64_t)a << PACK_ALGO_SHIFT | (hi & PACK_LOW_MASK);
        w[2] = (uint64_t)s->level;
        break;
    }
    case THROTTLE_SLIDING_LOG:
        return 0;
    }
    return algo_small_len(a);
}

/* t read as a full state: t itself, or *buf filled from a small t. */
static const throttle_t *full_of(const throttle_t *t, throttle_t *buf)
{
    if (!t || is_full(t))
        return t;
    uint64_t w[PACKED_WORDS] = { 0 };
    throttle_algo_t a = small_algo(t);
    memcpy(w, t, small_len(t));
    memset(buf, 0, sizeof(*buf));
    SET_ALGO(buf, a);
    uint64_t time = w[0] & ~PACK_TIME_BIT, low = w[1] & PACK_LOW_MASK;
    switch (a) {
    case THROTTLE_GCRA:
        buf->u.tat_ns = (int64_t)w[0];
        break;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW:
        buf->u.win = (window_state_t){ (int64_t)time, (int64_t)low, (int64_t)w[2] };
        break;
    case THROTTLE_TOKEN_BUCKET: {
        uint64_t hi = (low ^ PACK_SIGN_BIT) - PACK_SIGN_BIT;   /* sign-extended from 56 bits */
        buf->u.tb.level = (tb_level_t)((unsigned __int128)hi << 64 | w[2]);
        buf->u.tb.last_ns = (int64_t)time;
        break;
    }
    case THROTTLE_SLIDING_LOG:
        break;   /* never small */
    }
    return buf;
}

/* A small state of these n bytes; NULL when out of memory. */
static throttle_t *small_new(const void *bytes, size_t n)
{
    void *c = malloc(n);
    if (c)
        memcpy(c, bytes, n);
    return c;
}

/* w (full, owned) in its smallest form: a state without reservations
 * becomes small (w itself when memory is missing: the full form is as good). */
static throttle_t *smallest_form(throttle_t *w)
{
    uint64_t words[PACKED_WORDS];
    size_t n = w ? small_form_of(w, words) : 0;
    if (!n)
        return w;
    throttle_t *c = small_new(words, n);
    if (!c)
        return w;
    free(w);
    return c;
}

/* Reservations: at the end of the file. */
static void apply_expired(throttle_t *t, int64_t now_ns);
static bool any_expired(const rsv_set_t *rs, int64_t now_ns);
static void prune(rsv_set_t **rsp, int64_t now_ns);
static void rsv_encode(const rsv_set_t *rs, wbuf_t *out);
static rsv_set_t *rsv_decode(rbuf_t *r, uint8_t algo, const char **why);


static const char *const algo_names[] = {
    [THROTTLE_GCRA] = "gcra",
    [THROTTLE_SLIDING_LOG] = "sliding_log",
    [THROTTLE_SLIDING_WINDOW] = "sliding_window",
    [THROTTLE_FIXED_WINDOW] = "fixed_window",
    [THROTTLE_TOKEN_BUCKET] = "token_bucket",
};

const char *throttle_algo_name(throttle_algo_t a)
{
    return a >= THROTTLE_GCRA && a <= THROTTLE_ALGO_MAX ? algo_names[a] : NULL;
}

throttle_algo_t throttle_algo_parse(const char *name)
{
    for (int a = THROTTLE_GCRA; a <= THROTTLE_ALGO_MAX; a++)
        if (strcmp(algo_names[a], name) == 0)
            return (throttle_algo_t)a;
    return (throttle_algo_t)0;
}

const char *throttle_validate(const throttle_params_t *p, const char **field)
{
    if (p->cal.kind != CAL_NONE && p->algo != THROTTLE_FIXED_WINDOW) {
        *field = "calendar";
        return "applies to the fixed_window algorithm only";
    }
    switch (p->algo) {
    case THROTTLE_GCRA: return gcra_validate(&p->u.gcra, field);
    case THROTTLE_SLIDING_LOG: return slog_validate(&p->u.log, field);
    case THROTTLE_SLIDING_WINDOW: return window_validate(&p->u.win, field);
    case THROTTLE_FIXED_WINDOW: return window_validate_cal(&p->u.win, &p->cal, field);
    case THROTTLE_TOKEN_BUCKET: return tbucket_validate(&p->u.tb, field);
    }
    *field = "algorithm";
    return "is not a known algorithm";
}

int64_t throttle_window_ns(const throttle_params_t *p)
{
    switch (p->algo) {
    case THROTTLE_GCRA: return p->u.gcra.period_ns / p->u.gcra.count * (p->u.gcra.max_burst + 1);
    case THROTTLE_SLIDING_LOG: return p->u.log.period_ns;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW: return p->u.win.period_ns;
    case THROTTLE_TOKEN_BUCKET: {
        tb_level_t full = (tb_level_t)p->u.tb.capacity * TB_UNIT;
        tb_level_t ns = full / p->u.tb.rate_micro + (full % p->u.tb.rate_micro != 0);
        return ns > INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)ns;
    }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Decisions                                                                */
/* ------------------------------------------------------------------------ */

bool throttle_check(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t quantity,
                    rl_result_t *r)
{
    int64_t expire;
    throttle_t resolved, buf;
    t = full_of(t, &buf);
    if (t && t->rsv && any_expired(t->rsv, now_ns)) {
        /* what the next change will apply, seen on a copy (a read changes nothing) */
        resolved = *t;
        apply_expired(&resolved, now_ns);
        t = &resolved;
    }
    switch (p->algo) {
    case THROTTLE_GCRA: {
        int64_t store;
        gcra_update(&p->u.gcra, t ? t->u.tat_ns : -1, now_ns, quantity, r, &store);
        return store >= 0;
    }
    case THROTTLE_SLIDING_LOG:
        return slog_check(t ? t->u.log : NULL, &p->u.log, now_ns, quantity, r);
    case THROTTLE_SLIDING_WINDOW: {
        window_state_t s = t ? t->u.win : (window_state_t){ 0, 0, 0 };
        return sliding_window_update(&p->u.win, &s, now_ns, quantity, r, &expire);
    }
    case THROTTLE_FIXED_WINDOW: {
        window_state_t s = t ? t->u.win : (window_state_t){ 0, 0, 0 };
        return fixed_window_update_cal(&p->u.win, &p->cal, &s, now_ns, quantity, r, &expire);
    }
    case THROTTLE_TOKEN_BUCKET: {
        tbucket_state_t s = t ? t->u.tb : tbucket_full(&p->u.tb, now_ns);
        return tbucket_update(&p->u.tb, &s, now_ns, quantity, r, &expire);
    }
    }
    return false;
}

bool throttle_commit(throttle_t **tp, const throttle_params_t *p, int64_t now_ns, int64_t quantity,
                     int64_t *expire_ns)
{
    throttle_t *t = *tp, *fresh = NULL;
    if (t && !is_full(t)) {
        /* in place, its own bytes only (it may be the area of an entry) */
        if (p->algo != small_algo(t))
            return false;   /* not this key's algorithm: refused before (throttle_algo) */
        throttle_t full, *f = &full;
        uint64_t w[PACKED_WORDS];
        full_of(t, &full);
        if (!throttle_commit(&f, p, now_ns, quantity, expire_ns))
            return false;
        /* the same form, but past the ranges the decoder takes (a clock
         * beyond 2^62 ns): refused, the state unchanged */
        if (small_form_of(&full, w) != small_len(t))
            return false;
        memcpy(t, w, small_len(t));
        return true;
    }
    if (!t) {
        fresh = t = calloc(1, sizeof(*t));
        if (!t)
            return false;
        SET_ALGO(t, p->algo);
        if (p->algo == THROTTLE_TOKEN_BUCKET)
            t->u.tb = tbucket_full(&p->u.tb, now_ns);
    }
    if (t->rsv && any_expired(t->rsv, now_ns)) {
        apply_expired(t, now_ns);
        prune(&t->rsv, now_ns);
    }
    rl_result_t r;
    bool ok = true;
    switch (p->algo) {
    case THROTTLE_GCRA: {
        int64_t store;
        gcra_update(&p->u.gcra, fresh ? -1 : t->u.tat_ns, now_ns, quantity, &r, &store);
        if (store >= 0)
            t->u.tat_ns = store;
        *expire_ns = store >= 0 ? store : t->u.tat_ns;
        break;
    }
    case THROTTLE_SLIDING_LOG:
        ok = slog_commit(&t->u.log, &p->u.log, now_ns, quantity);
        *expire_ns = slog_expire_ns(t->u.log, &p->u.log);
        break;
    case THROTTLE_SLIDING_WINDOW:
        if (!sliding_window_update(&p->u.win, &t->u.win, now_ns, quantity, &r, expire_ns))
            *expire_ns = now_ns;
        break;
    case THROTTLE_FIXED_WINDOW:
        if (!fixed_window_update_cal(&p->u.win, &p->cal, &t->u.win, now_ns, quantity, &r, expire_ns))
            *expire_ns = now_ns;
        break;
    case THROTTLE_TOKEN_BUCKET:
        if (!tbucket_update(&p->u.tb, &t->u.tb, now_ns, quantity, &r, expire_ns))
            *expire_ns = now_ns;
        break;
    }
    if (!ok) {
        free(fresh);
        return false;
    }
    if (t->rsv)
        for (uint32_t i = 0; i < t->rsv->n; i++)
            if (t->rsv->v[i].deadline_ns > *expire_ns)
                *expire_ns = t->rsv->v[i].deadline_ns;
    *tp = fresh ? smallest_form(t) : t;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Values                                                                   */
/* ------------------------------------------------------------------------ */

throttle_t *throttle_new_gcra(int64_t tat_ns)
{
    if (tat_ns >= 0)
        return small_new(&tat_ns, COMPACT_BYTES);
    throttle_t *t = calloc(1, sizeof(*t));
    if (t) {
        SET_ALGO(t, THROTTLE_GCRA);
        t->u.tat_ns = tat_ns;
    }
    return t;
}

void throttle_free(throttle_t *t)
{
    if (!t)
        return;
    if (!is_full(t)) {
        free(t);
        return;
    }
    if (ALGO(t) == THROTTLE_SLIDING_LOG)
        slog_free(t->u.log);
    free(t->rsv);
    free(t);
}

throttle_t *throttle_clone(const throttle_t *t)
{
    if (!is_full(t))
        return small_new(t, small_len(t));
    throttle_t *c = malloc(sizeof(*c));
    if (!c)
        return NULL;
    *c = *t;
    if (t->rsv) {
        size_t bytes = sizeof(rsv_set_t) + t->rsv->cap * sizeof(throttle_reservation_t);
        if (!(c->rsv = malloc(bytes))) {
            free(c);
            return NULL;
        }
        memcpy(c->rsv, t->rsv, bytes);
    }
    if (ALGO(t) == THROTTLE_SLIDING_LOG && t->u.log) {
        c->u.log = slog_clone(t->u.log);
        if (!c->u.log) {
            free(c);
            return NULL;
        }
    }
    return c;
}

throttle_algo_t throttle_algo(const throttle_t *t) { return is_full(t) ? (throttle_algo_t)ALGO(t) : small_algo(t); }
int64_t throttle_gcra_tat(const throttle_t *t) { return is_compact(t) ? head_of(t) : t->u.tat_ns; }
void throttle_gcra_set_tat(throttle_t *t, int64_t tat_ns)
{
    if (is_compact(t) && tat_ns >= 0)
        memcpy(t, &tat_ns, COMPACT_BYTES);
    else if (is_full(t))
        t->u.tat_ns = tat_ns;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { throttle_free(v); }

static size_t rsv_bytes(const rsv_set_t *rs)
{
    return rs ? sizeof(rsv_set_t) + rs->cap * sizeof(throttle_reservation_t) : 0;
}

static size_t type_size(const void *v)
{
    const throttle_t *t = v;
    if (!is_full(t))
        return small_len(t);
    return sizeof(throttle_t) + (ALGO(t) == THROTTLE_SLIDING_LOG ? slog_bytes(t->u.log) : 0) + rsv_bytes(t->rsv);
}

size_t throttle_bytes_max(const throttle_params_t *p)
{
    if (p->algo != THROTTLE_SLIDING_LOG)
        return algo_small_len(p->algo);   /* a commit makes or keeps the small form (a state with reservations took more) */
    return sizeof(throttle_t) + (p->algo == THROTTLE_SLIDING_LOG ? slog_bytes_max(&p->u.log) : 0);
}

size_t throttle_bytes_after(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t quantity)
{
    if (p->algo != THROTTLE_SLIDING_LOG && (!t || !is_full(t)))
        return algo_small_len(p->algo);   /* a commit keeps or makes the small form */
    if (p->algo != THROTTLE_SLIDING_LOG)
        return sizeof(throttle_t) + (t ? rsv_bytes(t->rsv) : 0);
    return sizeof(throttle_t) + slog_bytes_after(t ? t->u.log : NULL, &p->u.log, now_ns, quantity);
}

/* A sliding log owns its timestamps: it stays a separate allocation. */
static bool type_inline_ok(const void *v)
{
    const throttle_t *t = v;
    return !is_full(t) || (ALGO(t) != THROTTLE_SLIDING_LOG && !t->rsv);   /* and so do reservations */
}

/* The bytes an inline value takes in its entry: its form's. */
static uint8_t type_inline_len(const void *v)
{
    return (uint8_t)(is_full(v) ? sizeof(throttle_t) : small_len(v));
}

static void type_encode(const void *v, wbuf_t *out)
{
    throttle_t buf;
    const throttle_t *t = full_of(v, &buf);
    wbuf_put_u8(out, t->rsv ? THROTTLE_ENC_V3 : THROTTLE_ENC_V2);
    wbuf_put_u8(out, ALGO(t));
    switch ((throttle_algo_t)ALGO(t)) {
    case THROTTLE_GCRA:
        wbuf_put_i64(out, t->u.tat_ns);
        break;
    case THROTTLE_SLIDING_LOG:
        slog_encode(t->u.log, out);
        break;
    case THROTTLE_SLIDING_WINDOW:
        wbuf_put_i64(out, t->u.win.start);
        wbuf_put_i64(out, t->u.win.curr);
        wbuf_put_i64(out, t->u.win.prev);
        break;
    case THROTTLE_FIXED_WINDOW:
        wbuf_put_i64(out, t->u.win.start);
        wbuf_put_i64(out, t->u.win.curr);
        break;
    case THROTTLE_TOKEN_BUCKET:
        wbuf_put_u64(out, (uint64_t)t->u.tb.level);
        wbuf_put_u64(out, (uint64_t)(t->u.tb.level >> 64));
        wbuf_put_i64(out, t->u.tb.last_ns);
        break;
    }
    if (t->rsv)
        rsv_encode(t->rsv, out);
}

static void *decode_fail(throttle_t *t, const char **why, const char *msg)
{
    throttle_free(t);
    *why = msg;
    return NULL;
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint8_t algo = rbuf_u8(&r);
    if (r.err)
        return decode_fail(NULL, why, "throttle: wrong length");
    if (ver != THROTTLE_ENC_V1 && ver != THROTTLE_ENC_V2 && ver != THROTTLE_ENC_V3)
        return decode_fail(NULL, why, "throttle: unknown encoding version");
    if (algo < THROTTLE_GCRA || algo > THROTTLE_ALGO_MAX || (ver == THROTTLE_ENC_V1 && algo != THROTTLE_GCRA) ||
        (ver == THROTTLE_ENC_V3 && algo == THROTTLE_SLIDING_LOG))
        return decode_fail(NULL, why, "throttle: unknown algorithm");
    throttle_t *t = calloc(1, sizeof(*t));
    if (!t)
        return decode_fail(NULL, why, "out of memory");
    SET_ALGO(t, algo);
    switch ((throttle_algo_t)algo) {
    case THROTTLE_GCRA:
        t->u.tat_ns = rbuf_i64(&r);
        if (!r.err && t->u.tat_ns < 0)
            return decode_fail(t, why, "throttle: negative TAT");
        break;
    case THROTTLE_SLIDING_LOG: {
        const char *w;
        t->u.log = slog_decode(&r, &w);
        if (w)
            return decode_fail(t, why, w);
        break;
    }
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW:
        t->u.win.start = rbuf_i64(&r);
        t->u.win.curr = rbuf_i64(&r);
        t->u.win.prev = algo == THROTTLE_SLIDING_WINDOW ? rbuf_i64(&r) : 0;
        if (!r.err && (t->u.win.start < 0 || t->u.win.start > INT64_MAX / 2 || t->u.win.curr < 0 ||
                       t->u.win.curr > 2 * WINDOW_MAX_COUNT || t->u.win.prev < 0 || t->u.win.prev > 2 * WINDOW_MAX_COUNT))
            return decode_fail(t, why, "throttle: window counters out of range");
        break;
    case THROTTLE_TOKEN_BUCKET: {
        uint64_t lo = rbuf_u64(&r), hi = rbuf_u64(&r);
        t->u.tb.level = (tb_level_t)((unsigned __int128)hi << 64 | lo);
        t->u.tb.last_ns = rbuf_i64(&r);
        if (!r.err && (t->u.tb.level < -(tb_level_t)TB_MAX_CAPACITY * TB_UNIT ||
                       t->u.tb.level > (tb_level_t)TB_MAX_CAPACITY * TB_UNIT ||
                       t->u.tb.last_ns < 0 || t->u.tb.last_ns > INT64_MAX / 2))
            return decode_fail(t, why, "throttle: token bucket out of range");
        break;
    }
    }
    if (ver == THROTTLE_ENC_V3 && !r.err) {
        const char *w = NULL;
        t->rsv = rsv_decode(&r, algo, &w);
        if (w)
            return decode_fail(t, why, w);
    }
    if (!rbuf_done(&r))
        return decode_fail(t, why, "throttle: wrong length");
    return smallest_form(t);
}

const ks_type_t throttle_type = {
    .tag = TYPE_TAG_THROTTLE,
    .name = "throttle",
    .noun = "a rate limiter",
    .missing = "no such key",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
    .inline_size = sizeof(throttle_t),   /* kept inside its entry, but for a sliding log */
    .inline_ok = type_inline_ok,
    .inline_len = type_inline_len,       /* a small state: 8 to 24 bytes */
};

/* ------------------------------------------------------------------------ */
/* Reservations, refunds                                                    */
/* ------------------------------------------------------------------------ */

int64_t throttle_capacity(const throttle_params_t *p)
{
    switch (p->algo) {
    case THROTTLE_GCRA: return p->u.gcra.max_burst + 1;
    case THROTTLE_SLIDING_LOG: return p->u.log.max_count;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW: return p->u.win.max_count;
    case THROTTLE_TOKEN_BUCKET: return p->u.tb.capacity;
    }
    return 0;
}

/* Charges n past the limit (a settle's extra) to t's state under p. */
static void state_charge(throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t n, int64_t *expire_ns)
{
    switch (p->algo) {
    case THROTTLE_GCRA:
        *expire_ns = t->u.tat_ns = gcra_charge(&p->u.gcra, t->u.tat_ns, now_ns, n);
        break;
    case THROTTLE_SLIDING_WINDOW: sliding_window_charge(&p->u.win, &t->u.win, now_ns, n, expire_ns); break;
    case THROTTLE_FIXED_WINDOW: fixed_window_charge(&p->u.win, &p->cal, &t->u.win, now_ns, n, expire_ns); break;
    case THROTTLE_TOKEN_BUCKET: tbucket_charge(&p->u.tb, &t->u.tb, now_ns, n, expire_ns); break;
    case THROTTLE_SLIDING_LOG: *expire_ns = now_ns; break;   /* never: no reservations */
    }
}

/* Gives n back to t's state under p; `window` as window.h's refunds. */
static void state_refund(throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t n, int64_t window,
                         int64_t *expire_ns)
{
    switch (p->algo) {
    case THROTTLE_GCRA:
        *expire_ns = t->u.tat_ns = gcra_refund(&p->u.gcra, t->u.tat_ns, now_ns, n);
        break;
    case THROTTLE_SLIDING_WINDOW: sliding_window_refund(&p->u.win, &t->u.win, now_ns, n, window, expire_ns); break;
    case THROTTLE_FIXED_WINDOW: fixed_window_refund(&p->u.win, &p->cal, &t->u.win, now_ns, n, window, expire_ns); break;
    case THROTTLE_TOKEN_BUCKET: tbucket_refund(&p->u.tb, &t->u.tb, now_ns, n, expire_ns); break;
    case THROTTLE_SLIDING_LOG: *expire_ns = now_ns; break;
    }
}

/* The window a decision at now charged (after it was committed), -1 for
 * the algorithms without windows. */
static int64_t charged_window(const throttle_t *t, const throttle_params_t *p, int64_t now_ns)
{
    switch (p->algo) {
    case THROTTLE_SLIDING_WINDOW: return sliding_window_start_of(&p->u.win, &t->u.win, now_ns);
    case THROTTLE_FIXED_WINDOW: return fixed_window_start_of(&p->u.win, &p->cal, &t->u.win, now_ns);
    default: return -1;
    }
}

static bool any_expired(const rsv_set_t *rs, int64_t now_ns)
{
    for (uint32_t i = 0; i < rs->n; i++)
        if (rs->v[i].deadline_ns <= now_ns)
            return true;
    return false;
}

/* The refund outcome of every reservation whose deadline passed, applied to
 * t's state (the reservations themselves are left: prune). */
static void apply_expired(throttle_t *t, int64_t now_ns)
{
    const rsv_set_t *rs = t->rsv;
    for (uint32_t i = 0; i < rs->n; i++) {
        const throttle_reservation_t *v = &rs->v[i];
        int64_t expire;
        if (v->deadline_ns <= now_ns && v->on_expiry == THROTTLE_EXPIRY_REFUND)
            state_refund(t, &v->p, now_ns, v->cost, v->window, &expire);
    }
}

/* Gives back the room of forgotten reservations (kept when realloc fails:
 * the size then still counts it). */
static void shrink(rsv_set_t **rsp)
{
    rsv_set_t *rs = *rsp;
    if (rs->n == rs->cap)
        return;
    rsv_set_t *s = realloc(rs, sizeof(*rs) + rs->n * sizeof(throttle_reservation_t));
    if (s) {
        s->cap = s->n;
        *rsp = s;
    }
}

/* Forgets the reservations whose deadline passed (order kept). */
static void compact(rsv_set_t *rs, int64_t now_ns)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < rs->n; i++)
        if (rs->v[i].deadline_ns > now_ns)
            rs->v[k++] = rs->v[i];
    rs->n = k;
}

static void prune(rsv_set_t **rsp, int64_t now_ns)
{
    compact(*rsp, now_ns);
    shrink(rsp);
}

size_t throttle_pending(const throttle_t *t, int64_t now_ns)
{
    size_t n = 0;
    if (t && is_full(t) && t->rsv)
        for (uint32_t i = 0; i < t->rsv->n; i++)
            n += t->rsv->v[i].deadline_ns > now_ns;
    return n;
}

size_t throttle_reservations(const throttle_t *t) { return t && is_full(t) && t->rsv ? t->rsv->n : 0; }
const throttle_reservation_t *throttle_reservation_at(const throttle_t *t, size_t i) { return &t->rsv->v[i]; }

/* A working copy of t (NULL: a fresh state of p's algorithm) with its
 * expired reservations resolved at now, and a reservation set of room for
 * `extra` more; NULL when out of memory. */
static throttle_t *work_copy(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, uint32_t extra)
{
    throttle_t buf;
    t = full_of(t, &buf);
    throttle_t *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    if (t) {
        *w = *t;
        w->rsv = NULL;
    } else {
        SET_ALGO(w, p->algo);
        if (p->algo == THROTTLE_TOKEN_BUCKET)
            w->u.tb = tbucket_full(&p->u.tb, now_ns);
    }
    uint32_t n = t && t->rsv ? t->rsv->n : 0;
    if (n + extra == 0 && !(t && t->rsv))
        return w;
    rsv_set_t *rs = malloc(sizeof(*rs) + (n + extra) * sizeof(throttle_reservation_t));
    if (!rs) {
        free(w);
        return NULL;
    }
    rs->last_id = t && t->rsv ? t->rsv->last_id : 0;
    rs->n = n;
    rs->cap = n + extra;
    if (n)
        memcpy(rs->v, t->rsv->v, n * sizeof(throttle_reservation_t));
    w->rsv = rs;
    if (any_expired(rs, now_ns)) {
        apply_expired(w, now_ns);
        compact(rs, now_ns);   /* the caller shrinks the set when it is done */
    }
    return w;
}

/* The key lives until its state is equivalent to an absent key and no
 * reservation is pending. */
static int64_t expire_with_pending(const throttle_t *t, int64_t expire_ns)
{
    if (t->rsv)
        for (uint32_t i = 0; i < t->rsv->n; i++)
            if (t->rsv->v[i].deadline_ns > expire_ns)
                expire_ns = t->rsv->v[i].deadline_ns;
    return expire_ns;
}

/* The state's own expiry as a decision computes it: a peek's reset. */
static int64_t state_expire(const throttle_t *t, const throttle_params_t *p, int64_t now_ns)
{
    switch (p->algo) {
    case THROTTLE_GCRA: return t->u.tat_ns > now_ns ? t->u.tat_ns : now_ns;
    default: {
        int64_t e;
        throttle_t w = *t;
        state_refund(&w, p, now_ns, 0, -1, &e);
        return e;
    }
    }
}

int throttle_reserve(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t quantity,
                     int64_t ttl_ns, throttle_expiry_t on_expiry, rl_result_t *r, throttle_t **out, uint64_t *id,
                     int64_t *expire_ns)
{
    *out = NULL;
    if (p->algo == THROTTLE_SLIDING_LOG)
        return THROTTLE_RSV_ALGO;
    if (quantity > throttle_capacity(p))
        return THROTTLE_RSV_TOO_LARGE;
    if (throttle_pending(t, now_ns) >= THROTTLE_MAX_PENDING)
        return CORE_FULL;
    bool commit = throttle_check(t, p, now_ns, quantity, r);
    if (!r->allowed)
        return CORE_OK;
    throttle_t *w = work_copy(t, p, now_ns, 1);
    if (!w)
        return CORE_NOMEM;
    int64_t expire = now_ns;
    if (commit && !throttle_commit(&w, p, now_ns, quantity, &expire)) {
        throttle_free(w);
        return CORE_NOMEM;
    }
    if (!commit)
        expire = state_expire(w, p, now_ns);
    rsv_set_t *rs = w->rsv;
    if (rs->n == rs->cap) {   /* not after work_copy, which made room; kept safe all the same */
        rsv_set_t *g = realloc(rs, sizeof(*rs) + (rs->n + 1) * sizeof(throttle_reservation_t));
        if (!g) {
            throttle_free(w);
            return CORE_NOMEM;
        }
        g->cap = g->n + 1;
        w->rsv = rs = g;
    }
    uint64_t next = rs->last_id + 1;
    throttle_reservation_t *v = &rs->v[rs->n++];
    memset(v, 0, sizeof(*v));
    v->id = (uint64_t)now_ns > next ? (uint64_t)now_ns : next;
    v->cost = quantity;
    v->deadline_ns = now_ns + ttl_ns;
    v->window = charged_window(w, p, now_ns);
    v->p = *p;
    v->on_expiry = (uint8_t)on_expiry;
    rs->last_id = v->id;
    *id = v->id;
    shrink(&w->rsv);   /* v and rs are stale from here */
    *expire_ns = expire_with_pending(w, expire);
    *out = w;
    return CORE_OK;
}

int throttle_settle(const throttle_t *t, uint64_t id, int64_t actual, int64_t now_ns, throttle_t **out,
                    throttle_reservation_t *was, int64_t *expire_ns)
{
    *out = NULL;
    uint32_t at = UINT32_MAX;
    throttle_t buf;
    t = full_of(t, &buf);
    if (t && t->rsv)
        for (uint32_t i = 0; i < t->rsv->n; i++)
            if (t->rsv->v[i].id == id && t->rsv->v[i].deadline_ns > now_ns)
                at = i;
    if (at == UINT32_MAX)
        return THROTTLE_RSV_UNKNOWN;
    *was = t->rsv->v[at];
    if (actual > throttle_capacity(&was->p))
        return THROTTLE_RSV_TOO_LARGE;
    throttle_t *w = work_copy(t, &was->p, now_ns, 0);
    if (!w)
        return CORE_NOMEM;
    rsv_set_t *rs = w->rsv;
    for (uint32_t i = 0; i < rs->n; i++)   /* still pending: pruning kept it */
        if (rs->v[i].id == id) {
            memmove(&rs->v[i], &rs->v[i + 1], (rs->n - i - 1) * sizeof(rs->v[0]));
            rs->n--;
            break;
        }
    shrink(&w->rsv);
    int64_t expire;
    if (actual > was->cost)
        state_charge(w, &was->p, now_ns, actual - was->cost, &expire);
    else
        state_refund(w, &was->p, now_ns, was->cost - actual, was->window, &expire);
    *expire_ns = expire_with_pending(w, expire);
    *out = w;
    return CORE_OK;
}

int throttle_refund(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t n, throttle_t **out,
                    int64_t *expire_ns)
{
    *out = NULL;
    if (p->algo == THROTTLE_SLIDING_LOG)
        return THROTTLE_RSV_ALGO;
    if (n > throttle_capacity(p))
        return THROTTLE_RSV_TOO_LARGE;
    throttle_t *w = work_copy(t, p, now_ns, 0);
    if (!w)
        return CORE_NOMEM;
    int64_t expire;
    if (w->rsv)
        shrink(&w->rsv);
    state_refund(w, p, now_ns, n, -1, &expire);
    *expire_ns = expire_with_pending(w, expire);
    *out = smallest_form(w);
    return CORE_OK;
}

/* ------------------------------------------------------------------------ */
/* Reservations' encoding                                                   */
/* ------------------------------------------------------------------------ */

static void rsv_encode(const rsv_set_t *rs, wbuf_t *out)
{
    wbuf_put_u64(out, rs->last_id);
    wbuf_put_u32(out, rs->n);
    for (uint32_t i = 0; i < rs->n; i++) {
        const throttle_reservation_t *v = &rs->v[i];
        wbuf_put_u64(out, v->id);
        wbuf_put_i64(out, v->cost);
        wbuf_put_i64(out, v->deadline_ns);
        wbuf_put_i64(out, v->window);
        wbuf_put_u8(out, v->on_expiry);
        switch (v->p.algo) {
        case THROTTLE_GCRA:
            wbuf_put_i64(out, v->p.u.gcra.max_burst);
            wbuf_put_i64(out, v->p.u.gcra.count);
            wbuf_put_i64(out, v->p.u.gcra.period_ns);
            break;
        case THROTTLE_SLIDING_WINDOW:
        case THROTTLE_FIXED_WINDOW:
            wbuf_put_i64(out, v->p.u.win.max_count);
            wbuf_put_i64(out, v->p.u.win.period_ns);
            break;
        case THROTTLE_TOKEN_BUCKET:
            wbuf_put_i64(out, v->p.u.tb.capacity);
            wbuf_put_i64(out, v->p.u.tb.rate_micro);
            break;
        case THROTTLE_SLIDING_LOG:
            break;
        }
    }
}

static rsv_set_t *rsv_decode(rbuf_t *r, uint8_t algo, const char **why)
{
    uint64_t last = rbuf_u64(r);
    uint32_t n = rbuf_u32(r);
    *why = NULL;
    if (r->err || n > THROTTLE_MAX_PENDING) {
        *why = "throttle: bad reservation count";
        return NULL;
    }
    rsv_set_t *rs = malloc(sizeof(*rs) + n * sizeof(throttle_reservation_t));
    if (!rs) {
        *why = "out of memory";
        return NULL;
    }
    rs->last_id = last;
    rs->n = rs->cap = n;
    uint64_t prev_id = 0;
    for (uint32_t i = 0; i < n; i++) {
        throttle_reservation_t *v = &rs->v[i];
        memset(v, 0, sizeof(*v));
        v->id = rbuf_u64(r);
        v->cost = rbuf_i64(r);
        v->deadline_ns = rbuf_i64(r);
        v->window = rbuf_i64(r);
        v->on_expiry = rbuf_u8(r);
        v->p.algo = (throttle_algo_t)algo;
        switch ((throttle_algo_t)algo) {
        case THROTTLE_GCRA:
            v->p.u.gcra.max_burst = rbuf_i64(r);
            v->p.u.gcra.count = rbuf_i64(r);
            v->p.u.gcra.period_ns = rbuf_i64(r);
            break;
        case THROTTLE_SLIDING_WINDOW:
        case THROTTLE_FIXED_WINDOW:
            v->p.u.win.max_count = rbuf_i64(r);
            v->p.u.win.period_ns = rbuf_i64(r);
            break;
        case THROTTLE_TOKEN_BUCKET:
            v->p.u.tb.capacity = rbuf_i64(r);
            v->p.u.tb.rate_micro = rbuf_i64(r);
            break;
        case THROTTLE_SLIDING_LOG:
            break;
        }
        const char *field;
        bool windowed = algo == THROTTLE_SLIDING_WINDOW || algo == THROTTLE_FIXED_WINDOW;
        if (r->err || throttle_validate(&v->p, &field) || v->id <= prev_id || v->id > last || v->cost < 0 ||
            v->cost > throttle_capacity(&v->p) || v->deadline_ns < 0 || v->deadline_ns > INT64_MAX / 2 ||
            v->on_expiry > THROTTLE_EXPIRY_REFUND || (windowed ? v->window < 0 : v->window != -1)) {
            free(rs);
            *why = "throttle: bad reservation";
            return NULL;
        }
        prev_id = v->id;
    }
    return rs;
}
