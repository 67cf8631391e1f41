/* ts_rows.c - the rows of a range answer: see ts_rows.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/room.h"
#include "cmd/ts_rows.h"

bool ts_rows_collect(void *ud, int64_t t, double v)
{
    cmd_ts_rows_t *c = ud;
    if (c->capped && (c->n + 1) * (1 + c->stride) > c->max) {
        c->over = true;
        return false;
    }
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 256;
        ts_sample_t *ns = realloc(c->s, ncap * sizeof(*ns));
        if (!ns)
            return false;
        c->s = ns;
        c->cap = ncap;
    }
    c->s[c->n++] = (ts_sample_t){ t, v };
    return true;
}

bool ts_rows_collect_row(void *ud, int64_t t, const double *v, size_t n)
{
    cmd_ts_rows_t *c = ud;
    size_t had = c->cap;
    c->stride = n - 1;   /* before collecting: the answer cap counts every value of a row */
    if (!ts_rows_collect(c, t, v[0]))
        return false;
    if (c->cap != had || !c->more) {
        double *m = realloc(c->more, c->cap * c->stride * sizeof(*m) + 1);
        if (!m)
            return false;
        c->more = m;
    }
    memcpy(c->more + (c->n - 1) * c->stride, v + 1, c->stride * sizeof(*v));
    return true;
}

core_status_t ts_rows_range(const ts_t *ts, const ts_query_t *q, cmd_ts_rows_t *c)
{
    return q->naggs > 1 ? ts_range_rows(ts, q, ts_rows_collect_row, c) : ts_range(ts, q, ts_rows_collect, c);
}

void cmd_ts_rows_free(cmd_ts_rows_t *c)
{
    free(c->s);
    free(c->more);
    c->s = NULL;
    c->more = NULL;
    c->n = c->cap = 0;
}

bool ts_answer_rows(const cmd_ctx_t *ctx, size_t *rows)
{
    *rows = (size_t)(ctx->srv->limits.max_answer / TS_ROW_BOUND);
    return ctx->srv->limits.max_answer != 0;
}

bool ts_too_many_rows(cmd_ctx_t *ctx, size_t rows)
{
    return cmd_answer_fits(ctx, ((uint64_t)rows + 1) * TS_ROW_BOUND,
                           "narrow the range, widen bucket_ms, set count, or select fewer series");
}
