/* throttle.c - see throttle.h. */
#include "core/throttle.h"

#include <stdlib.h>
#include <string.h>

#define THROTTLE_ENC_V1 1   /* GCRA only: version, algorithm, TAT */
#define THROTTLE_ENC_V2 2   /* every algorithm: version, algorithm, payload */

struct throttle {
    uint8_t algo;
    union {
        int64_t tat_ns;          /* gcra */
        slog_t *log;             /* sliding_log (NULL = empty) */
        window_state_t win;      /* sliding_window, fixed_window */
        tbucket_state_t tb;      /* token_bucket */
    } u;
};
_Static_assert(sizeof(struct throttle) <= KS_INLINE_MAX, "a limiter's state fits inside its entry");


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
    if (!t) {
        fresh = t = calloc(1, sizeof(*t));
        if (!t)
            return false;
        t->algo = (uint8_t)p->algo;
        if (p->algo == THROTTLE_TOKEN_BUCKET)
            t->u.tb = tbucket_full(&p->u.tb, now_ns);
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
    *tp = t;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Values                                                                   */
/* ------------------------------------------------------------------------ */

throttle_t *throttle_new_gcra(int64_t tat_ns)
{
    throttle_t *t = calloc(1, sizeof(*t));
    if (t) {
        t->algo = THROTTLE_GCRA;
        t->u.tat_ns = tat_ns;
    }
    return t;
}

void throttle_free(throttle_t *t)
{
    if (!t)
        return;
    if (t->algo == THROTTLE_SLIDING_LOG)
        slog_free(t->u.log);
    free(t);
}

throttle_t *throttle_clone(const throttle_t *t)
{
    throttle_t *c = malloc(sizeof(*c));
    if (!c)
        return NULL;
    *c = *t;
    if (t->algo == THROTTLE_SLIDING_LOG && t->u.log) {
        c->u.log = slog_clone(t->u.log);
        if (!c->u.log) {
            free(c);
            return NULL;
        }
    }
    return c;
}

throttle_algo_t throttle_algo(const throttle_t *t) { return (throttle_algo_t)t->algo; }
int64_t throttle_gcra_tat(const throttle_t *t) { return t->u.tat_ns; }
void throttle_gcra_set_tat(throttle_t *t, int64_t tat_ns) { t->u.tat_ns = tat_ns; }

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { throttle_free(v); }

static size_t type_size(const void *v)
{
    const throttle_t *t = v;
    return sizeof(throttle_t) + (t->algo == THROTTLE_SLIDING_LOG ? slog_bytes(t->u.log) : 0);
}

size_t throttle_bytes_max(const throttle_params_t *p)
{
    return sizeof(throttle_t) + (p->algo == THROTTLE_SLIDING_LOG ? slog_bytes_max(&p->u.log) : 0);
}

size_t throttle_bytes_after(const throttle_t *t, const throttle_params_t *p, int64_t now_ns, int64_t quantity)
{
    if (p->algo != THROTTLE_SLIDING_LOG)
        return sizeof(throttle_t);
    return sizeof(throttle_t) + slog_bytes_after(t ? t->u.log : NULL, &p->u.log, now_ns, quantity);
}

/* A sliding log owns its timestamps: it stays a separate allocation. */
static bool type_inline_ok(const void *v) { return ((const throttle_t *)v)->algo != THROTTLE_SLIDING_LOG; }

static void type_encode(const void *v, wbuf_t *out)
{
    const throttle_t *t = v;
    wbuf_put_u8(out, THROTTLE_ENC_V2);
    wbuf_put_u8(out, t->algo);
    switch ((throttle_algo_t)t->algo) {
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
    if (ver != THROTTLE_ENC_V1 && ver != THROTTLE_ENC_V2)
        return decode_fail(NULL, why, "throttle: unknown encoding version");
    if (algo < THROTTLE_GCRA || algo > THROTTLE_ALGO_MAX || (ver == THROTTLE_ENC_V1 && algo != THROTTLE_GCRA))
        return decode_fail(NULL, why, "throttle: unknown algorithm");
    throttle_t *t = calloc(1, sizeof(*t));
    if (!t)
        return decode_fail(NULL, why, "out of memory");
    t->algo = algo;
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
                       t->u.win.curr > WINDOW_MAX_COUNT || t->u.win.prev < 0 || t->u.win.prev > WINDOW_MAX_COUNT))
            return decode_fail(t, why, "throttle: window counters out of range");
        break;
    case THROTTLE_TOKEN_BUCKET: {
        uint64_t lo = rbuf_u64(&r), hi = rbuf_u64(&r);
        t->u.tb.level = (tb_level_t)((unsigned __int128)hi << 64 | lo);
        t->u.tb.last_ns = rbuf_i64(&r);
        if (!r.err && (t->u.tb.level < 0 || t->u.tb.level > (tb_level_t)TB_MAX_CAPACITY * TB_UNIT ||
                       t->u.tb.last_ns < 0 || t->u.tb.last_ns > INT64_MAX / 2))
            return decode_fail(t, why, "throttle: token bucket out of range");
        break;
    }
    }
    if (!rbuf_done(&r))
        return decode_fail(t, why, "throttle: wrong length");
    return t;
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
};
