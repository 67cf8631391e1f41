/* gcra.c - see gcra.h for the algorithm. */
#include "core/gcra.h"

#include <stddef.h>

const char *gcra_validate(const gcra_params_t *p, const char **field)
{
    if (p->max_burst < 0) {
        *field = "max_burst";
        return "must be an integer >= 0";
    }
    if (p->count <= 0) {
        *field = "count_per_period";
        return "must be an integer >= 1 (zero rates are not supported)";
    }
    if (p->period_ns <= 0) {
        *field = "period";
        return "must be >= 1 (zero rates are not supported)";
    }
    if (p->count > p->period_ns) {
        *field = "count_per_period";
        return "is more than one request per nanosecond of the period";
    }
    int64_t t = p->period_ns / p->count;
    if (p->max_burst >= GCRA_MAX_TAU_NS / t) {
        *field = "max_burst";
        return "is too large for this rate (the burst window would exceed 73 years)";
    }
    return NULL;
}

void gcra_update(const gcra_params_t *p, int64_t tat_ns, int64_t now_ns, int64_t quantity,
                 rl_result_t *r, int64_t *store_tat)
{
    int64_t t = p->period_ns / p->count;
    int64_t limit = p->max_burst + 1;
    int64_t tau = t * limit;
    int64_t tat = tat_ns < 0 ? now_ns : tat_ns;
    int64_t ttl;

    r->limit = limit;
    r->retry_after_ns = RL_NEVER;
    *store_tat = -1;

    if (quantity > limit) {
        /* T·quantity > τ: can never fit (and must not overflow); what redis-cell
         * answers for an oversized request, computed without the product. */
        r->allowed = false;
        ttl = tat - now_ns;
    } else {
        int64_t increment = t * quantity;
        int64_t new_tat = (now_ns > tat ? now_ns : tat) + increment;
        int64_t allow_at = new_tat - tau;
        if (now_ns < allow_at) {
            r->allowed = false;
            r->retry_after_ns = allow_at - now_ns;
            ttl = tat - now_ns;
        } else {
            r->allowed = true;
            ttl = new_tat - now_ns;
            if (quantity > 0)
                *store_tat = new_tat;
        }
    }
    if (ttl < 0)
        ttl = 0;   /* a TAT that passed less than a millisecond ago, before lazy expiry */
    int64_t next = tau - ttl;
    r->remaining = next > -t ? next / t : 0;
    r->reset_after_ns = ttl;
}

int64_t gcra_charge(const gcra_params_t *p, int64_t tat_ns, int64_t now_ns, int64_t n)
{
    int64_t t = p->period_ns / p->count;
    int64_t tau = t * (p->max_burst + 1);
    int64_t tat = tat_ns < now_ns ? now_ns : tat_ns;
    int64_t cap = now_ns + 2 * tau;
    if (tat >= cap)
        return tat;   /* already at the cap (a clock stepped back keeps what it had) */
    int64_t add = t * n;   /* n <= limit: add <= τ */
    return add > cap - tat ? cap : tat + add;
}

int64_t gcra_refund(const gcra_params_t *p, int64_t tat_ns, int64_t now_ns, int64_t n)
{
    int64_t t = p->period_ns / p->count;
    if (tat_ns <= now_ns)
        return now_ns;
    int64_t back = t * n;
    return back >= tat_ns - now_ns ? now_ns : tat_ns - back;
}
