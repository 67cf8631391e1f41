/* token_bucket.c - see token_bucket.h. */
#include "core/token_bucket.h"

#include <stddef.h>

const char *tbucket_validate(const tbucket_params_t *p, const char **field)
{
    if (p->capacity < 1 || p->capacity > TB_MAX_CAPACITY) {
        *field = "capacity";
        return "must be an integer between 1 and 10^15";
    }
    if (p->rate_micro < 1 || p->rate_micro > TB_MAX_RATE_MICRO) {
        *field = "refill_rate";
        return "must be between 0.000001 and 10^12 tokens per second";
    }
    return NULL;
}

tbucket_state_t tbucket_full(const tbucket_params_t *p, int64_t now_ns)
{
    tbucket_state_t s = { (tb_level_t)p->capacity * TB_UNIT, now_ns };
    return s;
}

/* ceil(a / b) for a >= 0, b > 0, as nanoseconds (saturated).  64-bit
 * division when a fits (any capacity below 9223 tokens): a 128-bit one is a
 * library call several times slower. */
static int64_t ceil_ns(tb_level_t a, int64_t b)
{
    if (a <= (tb_level_t)UINT64_MAX) {
        uint64_t x = (uint64_t)a, y = (uint64_t)b;
        uint64_t q = x / y + (x % y != 0);
        return q > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)q;
    }
    tb_level_t q = a / b + (a % b != 0);
    return q > INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)q;
}

static int64_t whole_tokens(tb_level_t level)
{
    if (level <= 0)
        return 0;   /* an overdraft (tbucket_charge) */
    if (level <= (tb_level_t)UINT64_MAX)
        return (int64_t)((uint64_t)level / (uint64_t)TB_UNIT);
    return (int64_t)(level / TB_UNIT);
}

bool tbucket_update(const tbucket_params_t *p, tbucket_state_t *s, int64_t now_ns, int64_t quantity,
                    rl_result_t *r, int64_t *expire_ns)
{
    const tb_level_t full = (tb_level_t)p->capacity * TB_UNIT;
    tb_level_t level = s->level;
    int64_t last = s->last_ns;
    int64_t wait = 0;   /* a clock stepped back: refilling resumes at `last` */
    if (now_ns > last) {
        tb_level_t add = (tb_level_t)(now_ns - last) * p->rate_micro;
        level = add >= full - level ? full : level + add;
        last = now_ns;
    } else {
        wait = last - now_ns;
    }
    if (level > full)
        level = full;   /* capacity lowered since the last request */

    tb_level_t need = (tb_level_t)quantity * TB_UNIT;
    r->limit = p->capacity;
    r->retry_after_ns = RL_NEVER;
    if (quantity > p->capacity) {
        r->allowed = false;
    } else if (need > level) {
        r->allowed = false;
        r->retry_after_ns = wait + ceil_ns(need - level, p->rate_micro);
    } else {
        r->allowed = true;
        level -= need;
    }
    r->remaining = whole_tokens(level);
    r->reset_after_ns = level == full ? 0 : wait + ceil_ns(full - level, p->rate_micro);
    if (!r->allowed || quantity == 0)
        return false;
    s->level = level;
    s->last_ns = last;
    *expire_ns = now_ns + r->reset_after_ns;
    return true;
}

/* The refill of a decision: the level at max(now, last), and that instant. */
static void refill(const tbucket_params_t *p, tbucket_state_t *s, int64_t now_ns)
{
    const tb_level_t full = (tb_level_t)p->capacity * TB_UNIT;
    if (now_ns > s->last_ns) {
        tb_level_t add = (tb_level_t)(now_ns - s->last_ns) * p->rate_micro;
        s->level = add >= full - s->level ? full : s->level + add;
        s->last_ns = now_ns;
    }
    if (s->level > full)
        s->level = full;
}

static int64_t full_at(const tbucket_params_t *p, const tbucket_state_t *s)
{
    const tb_level_t full = (tb_level_t)p->capacity * TB_UNIT;
    return s->level >= full ? s->last_ns : s->last_ns + ceil_ns(full - s->level, p->rate_micro);
}

void tbucket_charge(const tbucket_params_t *p, tbucket_state_t *s, int64_t now_ns, int64_t n, int64_t *expire_ns)
{
    const tb_level_t full = (tb_level_t)p->capacity * TB_UNIT;
    refill(p, s, now_ns);
    tb_level_t need = (tb_level_t)n * TB_UNIT;
    s->level = s->level - need < -full ? -full : s->level - need;
    *expire_ns = full_at(p, s);
}

void tbucket_refund(const tbucket_params_t *p, tbucket_state_t *s, int64_t now_ns, int64_t n, int64_t *expire_ns)
{
    const tb_level_t full = (tb_level_t)p->capacity * TB_UNIT;
    refill(p, s, now_ns);
    tb_level_t back = (tb_level_t)n * TB_UNIT;
    s->level = back >= full - s->level ? full : s->level + back;
    *expire_ns = full_at(p, s);
}
