/* cmds_ts_query.c - RedisTimeSeries's queries (cmds_ts.h): TS.RANGE,
 * TS.REVRANGE, TS.MRANGE, TS.MREVRANGE (GROUPBY / REDUCE), TS.MGET,
 * TS.QUERYINDEX, on the operations of cmd/ts.h.  Arguments as
 * RedisTimeSeries 1.10's parseRangeArguments, parseLabelQuery and
 * parseMRangeCommand read them; replies as its reply.c writes them under
 * RESP2 and RESP3.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "redis/cmds_ts.h"

#define MAX_FILTER_TS 128     /* FILTER_BY_TS values read (MAX_TS_VALUES_FILTER) */
#define MAX_SELECTED 50       /* SELECTED_LABELS names (LIMIT_LABELS_SIZE) */

/* A refusal found while parsing: its text, or the module's arity error. */
typedef struct perr {
    const char *msg;
    bool arity;
} perr_t;

static bool fail(perr_t *e, const char *msg)
{
    e->msg = msg;
    return false;
}

static bool fail_arity(perr_t *e)
{
    e->arity = true;
    return false;
}

static void answer(redis_conn_t *c, const resp_cmd_t *cmd, const perr_t *e)
{
    if (e->arity)
        ts_wrong_arity(c, cmd);
    else
        redis_err(c, "%s", e->msg);
}

/* ------------------------------------------------------------------------ */
/* parseRangeArguments                                                      */
/* ------------------------------------------------------------------------ */

typedef struct range_q {
    ts_query_t q;
    ts_agg_t agg;
    int64_t fts[MAX_FILTER_TS];
    bool latest;
} range_q_t;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static bool parse_count(const resp_cmd_t *cmd, uint64_t *count, perr_t *e)
{
    int off = redis_word_index(cmd, "COUNT");
    if (off <= 0)
        return true;
    int red = redis_word_index(cmd, "REDUCE"), agg = redis_word_index(cmd, "AGGREGATION");
    /* "AGGREGATION count ..." and "REDUCE count": the word is the
     * aggregation; COUNT, if any, comes later */
    if (agg > 0 && off == agg + 1 && (off = redis_word_index_from(cmd, "COUNT", (size_t)agg + 2)) < 0)
        return true;
    if (red > 0 && off == red + 1 && (off = redis_word_index_from(cmd, "COUNT", (size_t)red + 2)) < 0)
        return true;
    if ((size_t)off + 1 == cmd->argc)
        return fail(e, "ERR TSDB: COUNT argument is missing");
    long long n;
    if (!redis_ll(&cmd->argv[off + 1], &n))
        return fail(e, "ERR TSDB: Couldn't parse COUNT");
    if (n < 1)
        return fail(e, "ERR TSDB: Invalid COUNT value");
    *count = (uint64_t)n;
    return true;
}

static bool parse_aggregation(const resp_cmd_t *cmd, range_q_t *r, perr_t *e)
{
    ts_query_t *q = &r->q;
    int off = redis_word_index(cmd, "AGGREGATION");
    if (off <= 0)
        return true;
    long long bucket;
    if ((size_t)off + 2 >= cmd->argc || !redis_ll(&cmd->argv[off + 2], &bucket))
        return fail(e, "ERR TSDB: Couldn't parse AGGREGATION");
    if (!ts_parse_agg_name(&cmd->argv[off + 1], &r->agg))
        return fail(e, "ERR TSDB: Unknown aggregation type");
    if (bucket <= 0)
        return fail(e, "ERR TSDB: bucketDuration must be greater than zero");
    q->agg = r->agg;
    q->naggs = 1;
    q->aggs = &r->agg;
    q->bucket_ms = bucket;
    int em = redis_word_index(cmd, "EMPTY");
    if (em > 0) {
        if (em != off + 3 && em != off + 5)
            return fail(e, "ERR TSDB: EMPTY flag should be the 3rd or 5th flag after AGGREGATION flag");
        q->empty = true;
    }
    int bt = redis_word_index(cmd, "BUCKETTIMESTAMP");
    if (bt > 0) {
        if (bt != off + 3 && bt != off + 4)
            return fail(e, "ERR TSDB: BUCKETTIMESTAMP flag should be the 3rd or 4th flag after AGGREGATION flag");
        if ((size_t)bt + 1 >= cmd->argc)
            return fail_arity(e);
        const resp_arg_t *v = &cmd->argv[bt + 1];
        if (redis_word_is(v, "start") || redis_word_is(v, "-"))
            q->bucket_ts = TS_BUCKET_START;
        else if (redis_word_is(v, "end") || redis_word_is(v, "+"))
            q->bucket_ts = TS_BUCKET_END;
        else if (redis_word_is(v, "mid") || redis_word_is(v, "~"))
            q->bucket_ts = TS_BUCKET_MID;
        else
            return fail(e, "ERR TSDB: unknown BUCKETTIMESTAMP parameter");
    }
    return true;
}

/* from, to at argv[start], argv[start + 1]; the options anywhere after. */
static bool parse_range(const resp_cmd_t *cmd, size_t start, range_q_t *r, perr_t *e)
{
    memset(r, 0, sizeof(*r));
    ts_query_t *q = &r->q;
    bool from_min = false, to_max = false;
    if (redis_word_is(&cmd->argv[start], "-")) {
        q->from = 0;
        from_min = true;
    } else if (!ts_timestamp(&cmd->argv[start], &q->from)) {
        return fail(e, "ERR TSDB: wrong fromTimestamp");
    }
    if (redis_word_is(&cmd->argv[start + 1], "+")) {
        q->to = TS_MAX_TIMESTAMP;
        to_max = true;
    } else if (!ts_timestamp(&cmd->argv[start + 1], &q->to)) {
        return fail(e, "ERR TSDB: wrong toTimestamp");
    }
    r->latest = redis_word_index(cmd, "LATEST") > 0;
    if (!parse_count(cmd, &q->count, e) || !parse_aggregation(cmd, r, e))
        return false;
    int al = redis_word_index(cmd, "ALIGN");
    if (al > 0) {
        if ((size_t)al + 1 >= cmd->argc)
            return fail_arity(e);
        const resp_arg_t *v = &cmd->argv[al + 1];
        int kind;   /* 1 start, 2 end, 3 a timestamp */
        if (redis_word_is(v, "start") || redis_word_is(v, "-"))
            kind = 1;
        else if (redis_word_is(v, "end") || redis_word_is(v, "+"))
            kind = 2;
        else if (ts_timestamp(v, &q->align))
            kind = 3;
        else
            return fail(e, "ERR TSDB: unknown ALIGN parameter");
        if (q->agg == TS_AGG_NONE)
            return fail(e, "ERR TSDB: ALIGN parameter can only be used with AGGREGATION");
        if (kind == 1 && from_min)
            return fail(e, "ERR TSDB: start alignment can only be used with explicit start timestamp");
        if (kind == 2 && to_max)
            return fail(e, "ERR TSDB: end alignment can only be used with explicit end timestamp");
        if (kind == 1)
            q->align = q->from;
        else if (kind == 2)
            q->align = q->to;
    }
    int fv = redis_word_index(cmd, "FILTER_BY_VALUE");
    if (fv > 0) {
        if ((size_t)fv + 2 >= cmd->argc)
            return fail(e, "ERR TSDB: FILTER_BY_VALUE one or more arguments are missing");
        if (!ts_strict_double(&cmd->argv[fv + 1], &q->min))
            return fail(e, "ERR TSDB: Couldn't parse MIN");
        if (!ts_strict_double(&cmd->argv[fv + 2], &q->max))
            return fail(e, "ERR TSDB: Couldn't parse MAX");
        q->has_min = q->has_max = true;
    }
    int ft = redis_word_index(cmd, "FILTER_BY_TS");
    if (ft > 0) {
        size_t n = 0;
        for (size_t i = (size_t)ft + 1; i < cmd->argc && n < MAX_FILTER_TS; i++) {
            if (!ts_timestamp(&cmd->argv[i], &r->fts[n]))
                break;
            n++;
        }
        if (n == 0)
            return fail(e, "ERR TSDB: FILTER_BY_TS one or more arguments are missing");
        qsort(r->fts, n, sizeof(r->fts[0]), cmp_i64);
        q->filter_ts = r->fts;
        q->nfilter_ts = n;
    }
    return true;
}

static void reply_rows(resp_out_t *o, const cmd_ts_rows_t *rows)
{
    resp_reply_array(o, rows->n);
    for (size_t i = 0; i < rows->n; i++)
        ts_reply_sample(o, rows->s[i].ts, rows->s[i].value);
}

static void range(redis_conn_t *c, const resp_cmd_t *cmd, bool reverse)
{
    if (cmd->argc < 4) {
        ts_wrong_arity(c, cmd);
        return;
    }
    range_q_t rq;
    perr_t e = { NULL, false };
    if (!parse_range(cmd, 2, &rq, &e)) {
        /* the module opens the key before it reads the rest */
        if (!ts_key_error_first(c, &cmd->argv[1]))
            answer(c, cmd, &e);
        return;
    }
    cmd_ts_range_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .query = rq.q, .latest = rq.latest };
    cmd_ts_range_res_t r;
    if (!ts_run(c, reverse ? &CMD_TS_REVRANGE : &CMD_TS_RANGE, &a, &r, ts_err_series))
        return;
    reply_rows(redis_conn_out(c), &r.rows);
    cmd_ts_rows_free(&r.rows);
}

void ts_range_command(redis_conn_t *c, const resp_cmd_t *cmd) { range(c, cmd, false); }
void ts_revrange_command(redis_conn_t *c, const resp_cmd_t *cmd) { range(c, cmd, true); }

/* ------------------------------------------------------------------------ */
/* Filters and labels (parseLabelListFromArgs, parseLabelQuery)             */
/* ------------------------------------------------------------------------ */

/* argv[from, to) as matchers: malloc'd, NULL with *e set. */
static ts_matcher_t *parse_filters(const resp_cmd_t *cmd, size_t from, size_t to, perr_t *e)
{
    size_t n = to - from;
    ts_matcher_t *m = malloc((n ? n : 1) * sizeof(*m));
    if (!m) {
        fail(e, "OOM command not allowed when used memory > 'maxmemory'.");
        return NULL;
    }
    bool positive = false;
    for (size_t i = 0; i < n; i++) {
        const resp_arg_t *a = &cmd->argv[from + i];
        const char *why;
        if (!memchr(a->ptr, '=', a->len) || memchr(a->ptr, 0, a->len) ||
            !ts_matcher_parse(a->ptr, a->len, &m[i], &why)) {
            free(m);
            fail(e, "ERR TSDB: failed parsing labels");
            return NULL;
        }
        positive |= ts_matcher_positive(&m[i]);
    }
    if (!positive) {
        free(m);
        fail(e, "ERR TSDB: please provide at least one matcher");
        return NULL;
    }
    return m;
}

static const char *const query_tokens[] = { "WITHLABELS", "AGGREGATION",     "LIMIT",        "GROUPBY", "REDUCE",
                                            "FILTER",     "FILTER_BY_VALUE", "FILTER_BY_TS", "COUNT" };

/* WITHLABELS / SELECTED_LABELS into sel (names: NUL-terminated copies in
 * buf, which the caller frees). */
static bool parse_labelsel(const resp_cmd_t *cmd, cmd_ts_labelsel_t *sel, cmd_ts_name_t names[MAX_SELECTED],
                           char **buf, perr_t *e)
{
    memset(sel, 0, sizeof(*sel));
    *buf = NULL;
    sel->all = redis_word_index(cmd, "WITHLABELS") > 0;
    int at = redis_word_index(cmd, "SELECTED_LABELS");
    if (at > 0 && sel->all)
        return fail(e, "ERR TSDB: cannot accept WITHLABELS and SELECT_LABELS together");
    if (at <= 0)
        return true;
    size_t n = 0, bytes = 0, end = (size_t)at + 1;
    for (; end < cmd->argc; end++) {
        bool tok = false;
        for (size_t j = 0; j < sizeof(query_tokens) / sizeof(query_tokens[0]); j++)
            tok |= redis_word_is(&cmd->argv[end], query_tokens[j]);
        if (tok)
            break;
        if (n >= MAX_SELECTED)
            return fail(e, "ERR TSDB: reached max size for SELECT_LABELS");
        bytes += cmd->argv[end].len + 1;
        n++;
    }
    if (n == 0)
        return fail(e, "ERR TSDB: SELECT_LABELS should have at least 1 parameter");
    char *p = malloc(bytes);
    if (!p)
        return fail(e, "OOM command not allowed when used memory > 'maxmemory'.");
    *buf = p;
    for (size_t i = 0; i < n; i++) {
        const resp_arg_t *a = &cmd->argv[at + 1 + i];
        memcpy(p, a->ptr, a->len);
        p[a->len] = '\0';
        names[i] = (cmd_ts_name_t){ p, strnlen(p, a->len) };
        p += a->len + 1;
    }
    sel->names = names;
    sel->n = n;
    return true;
}

/* The labels of a series as the command asked (`user`): all of them but
 * the last `drop` (WITHLABELS), the names selected (SELECTED_LABELS: the
 * first label of that name in any case, as the module looks them up, or
 * the name and nil), or none; pairs under RESP2, a map under RESP3.  The
 * operation was asked for every label whenever some are shown. */
static void reply_labels(resp_out_t *o, const cmd_ts_series_t *x, const cmd_ts_labelsel_t *user, size_t drop)
{
    bool map = o->proto == 3;
    if (user->all) {
        size_t n = x->nlabels > drop ? x->nlabels - drop : 0;
        ts_reply_map_or_array(o, n);
        for (size_t i = 0; i < n; i++) {
            const cmd_ts_shown_t *l = &x->labels[i];
            if (!map)
                resp_reply_array(o, 2);
            resp_reply_bulk(o, l->name, strlen(l->name));
            if (l->value)
                resp_reply_bulk(o, l->value, l->value_len);
            else
                resp_reply_null(o);
        }
        return;
    }
    ts_reply_map_or_array(o, user->n);
    for (size_t i = 0; i < user->n; i++) {
        const cmd_ts_shown_t *l = NULL;
        for (size_t j = 0; j < x->nlabels && !l; j++)
            if (strcasecmp(x->labels[j].name, user->names[i].p) == 0)
                l = &x->labels[j];
        if (!map)
            resp_reply_array(o, 2);
        const char *name = l ? l->name : user->names[i].p;
        resp_reply_bulk(o, name, strlen(name));
        if (l && l->value)
            resp_reply_bulk(o, l->value, l->value_len);
        else
            resp_reply_null(o);
    }
}

/* What the operation is asked for: every label when any is shown (the
 * selection is made here, in the module's way), and always for a RESP3
 * grouping, which names its sources from them. */
static cmd_ts_labelsel_t asked(const cmd_ts_labelsel_t *user, bool all)
{
    cmd_ts_labelsel_t a = { .all = all || user->all || user->n > 0 };
    return a;
}

/* ------------------------------------------------------------------------ */
/* TS.QUERYINDEX, TS.MGET                                                   */
/* ------------------------------------------------------------------------ */

void ts_queryindex_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 2) {
        ts_wrong_arity(c, cmd);
        return;
    }
    perr_t e = { NULL, false };
    ts_matcher_t *m = parse_filters(cmd, 1, cmd->argc, &e);
    if (!m) {
        answer(c, cmd, &e);
        return;
    }
    cmd_ts_filter_t f = { m, cmd->argc - 1 };
    cmd_ts_keys_res_t r;
    bool ok = redis_run(c, &CMD_TS_QUERYINDEX, &f, &r, NULL);
    free(m);
    if (!ok)
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_set(o, r.n);
    for (size_t i = 0; i < r.n; i++)
        resp_reply_bulk(o, r.k[i], r.len[i]);
    cmd_ts_keys_free(&r);
}

void ts_mget_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 3) {
        ts_wrong_arity(c, cmd);
        return;
    }
    cmd_ts_mget_args_t a = { .latest = redis_word_index(cmd, "LATEST") > 0 };
    int at = redis_word_index(cmd, "FILTER");
    if (at < 0) {
        ts_wrong_arity(c, cmd);
        return;
    }
    perr_t e = { NULL, false };
    cmd_ts_name_t names[MAX_SELECTED];
    char *buf;
    if (!parse_labelsel(cmd, &a.sel, names, &buf, &e)) {
        answer(c, cmd, &e);
        return;
    }
    ts_matcher_t *m = parse_filters(cmd, (size_t)at + 1, cmd->argc, &e);
    if (!m) {
        free(buf);
        answer(c, cmd, &e);
        return;
    }
    a.filter = (cmd_ts_filter_t){ m, cmd->argc - (size_t)at - 1 };
    cmd_ts_labelsel_t user = a.sel;
    a.sel = asked(&user, false);
    cmd_ts_multi_res_t r;
    bool ok = redis_run(c, &CMD_TS_MGET, &a, &r, NULL);
    free(m);
    if (!ok) {
        free(buf);
        return;
    }
    resp_out_t *o = redis_conn_out(c);
    bool map = o->proto == 3;
    ts_reply_map_or_array(o, r.n);
    for (size_t i = 0; i < r.n; i++) {
        const cmd_ts_series_t *x = &r.v[i];
        if (!map)
            resp_reply_array(o, 3);
        resp_reply_bulk(o, x->key, x->klen);
        if (map)
            resp_reply_array(o, 2);
        reply_labels(o, x, &user, 0);
        if (x->has_sample)
            ts_reply_sample(o, x->sample.ts, x->sample.value);
        else
            resp_reply_array(o, 0);
    }
    cmd_ts_multi_free(&r);
    free(buf);   /* (the names selected) */
}

/* ------------------------------------------------------------------------ */
/* TS.MRANGE, TS.MREVRANGE                                                  */
/* ------------------------------------------------------------------------ */

/* One grouped series under RESP3: labels, {reducers}, {sources}, rows;
 * its labels (its label, __reducer__, __source__) shown as `user` asked,
 * WITHLABELS leaving out the last two. */
static void reply_group3(resp_out_t *o, const cmd_ts_series_t *x, const cmd_ts_mrange_args_t *a,
                         const cmd_ts_labelsel_t *user)
{
    resp_reply_array(o, 4);
    reply_labels(o, x, user, 2);   /* without __reducer__ and __source__ */
    resp_reply_map(o, 1);
    resp_reply_bulk(o, "reducers", 8);
    resp_reply_array(o, 1);
    const char *red = ts_agg_name(a->reduce);
    resp_reply_bulk(o, red, strlen(red));
    /* the keys reduced: the group's __source__ label */
    resp_reply_map(o, 1);
    resp_reply_bulk(o, "sources", 7);
    const char *src = NULL;
    size_t slen = 0;
    for (size_t i = 0; i < x->nlabels; i++)
        if (strcmp(x->labels[i].name, "__source__") == 0 && x->labels[i].value) {
            src = x->labels[i].value;
            slen = x->labels[i].value_len;
        }
    size_t n = 0;
    for (size_t i = 0; src && i <= slen; i++)
        n += i == slen || src[i] == ',';
    resp_reply_array(o, n);
    for (size_t i = 0, s = 0; src && i <= slen; i++)
        if (i == slen || src[i] == ',') {
            resp_reply_bulk(o, src + s, i - s);
            s = i + 1;
        }
    reply_rows(o, &x->rows);
}

static void mrange(redis_conn_t *c, const resp_cmd_t *cmd, bool reverse)
{
    if (cmd->argc < 4) {
        ts_wrong_arity(c, cmd);
        return;
    }
    range_q_t rq;
    perr_t e = { NULL, false };
    if (!parse_range(cmd, 1, &rq, &e)) {
        answer(c, cmd, &e);
        return;
    }
    int at = redis_word_index(cmd, "FILTER");
    if (at < 0) {
        ts_tsdb_err(c, "missing FILTER argument");
        return;
    }
    cmd_ts_mrange_args_t a = { .query = rq.q, .latest = rq.latest, .reduce = TS_AGG_NONE };
    cmd_ts_name_t names[MAX_SELECTED];
    char *buf = NULL;
    if (!parse_labelsel(cmd, &a.sel, names, &buf, &e)) {
        answer(c, cmd, &e);
        return;
    }
    int gb = redis_word_index(cmd, "GROUPBY");
    if (gb > 0 && gb < at) {
        free(buf);
        ts_tsdb_err(c, "GROUPBY should always come after filter");
        return;
    }
    size_t last = gb > 0 ? (size_t)gb - 1 : cmd->argc - 1;
    if (last == (size_t)at) {
        free(buf);
        ts_tsdb_err(c, "missing labels for filter argument");
        return;
    }
    ts_matcher_t *m = parse_filters(cmd, (size_t)at + 1, last + 1, &e);
    if (!m) {
        free(buf);
        answer(c, cmd, &e);
        return;
    }
    a.filter = (cmd_ts_filter_t){ m, last - (size_t)at };
    char group[TS_MAX_LABEL_LEN + 1];
    if (gb > 0) {
        int rd = redis_word_index(cmd, "REDUCE");
        if ((size_t)gb + 1 >= cmd->argc || rd < 0 || (size_t)rd + 1 >= cmd->argc || cmd->argc - (size_t)gb != 4) {
            ts_wrong_arity(c, cmd);
            goto out;
        }
        const resp_arg_t *g = &cmd->argv[gb + 1];
        if (!ts_parse_agg_name(&cmd->argv[rd + 1], &a.reduce) || a.reduce == TS_AGG_FIRST ||
            a.reduce == TS_AGG_LAST || a.reduce == TS_AGG_TWA) {
            ts_tsdb_err(c, "Invalid reducer type");
            goto out;
        }
        size_t glen = strnlen(g->ptr, g->len);
        if (glen > TS_MAX_LABEL_LEN)
            glen = TS_MAX_LABEL_LEN;
        memcpy(group, g->ptr, glen);
        group[glen] = '\0';
        a.groupby = group;
    }
    resp_out_t *o = redis_conn_out(c);
    bool map = o->proto == 3;
    cmd_ts_labelsel_t user = a.sel;
    a.sel = asked(&user, map && a.groupby);
    cmd_ts_multi_res_t r;
    if (!redis_run(c, reverse ? &CMD_TS_MREVRANGE : &CMD_TS_MRANGE, &a, &r, NULL))
        goto out;
    ts_reply_map_or_array(o, r.n);
    for (size_t i = 0; i < r.n; i++) {
        const cmd_ts_series_t *x = &r.v[i];
        if (!map)
            resp_reply_array(o, 3);
        resp_reply_bulk(o, x->key, x->klen);
        if (map && a.groupby) {
            reply_group3(o, x, &a, &user);
            continue;
        }
        if (map)
            resp_reply_array(o, 3);
        reply_labels(o, x, &user, 0);
        if (map) {
            resp_reply_map(o, 1);
            resp_reply_bulk(o, "aggregators", 11);
            if (a.query.agg == TS_AGG_NONE) {
                resp_reply_array(o, 0);
            } else {
                resp_reply_array(o, 1);
                const char *an = ts_agg_name(a.query.agg);
                resp_reply_bulk(o, an, strlen(an));
            }
        }
        reply_rows(o, &x->rows);
    }
    cmd_ts_multi_free(&r);
out:
    free(m);
    free(buf);
}

void ts_mrange_command(redis_conn_t *c, const resp_cmd_t *cmd) { mrange(c, cmd, false); }
void ts_mrevrange_command(redis_conn_t *c, const resp_cmd_t *cmd) { mrange(c, cmd, true); }
