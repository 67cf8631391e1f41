/*
 * ts_read.c - reading one series: TS.INFO, TS.RANGE, TS.REVRANGE
 * (cmd/ts.h).  What an answer needs is copied out under the series' lock
 * (its figures, labels, rules; the rows of a range), and the lock is held
 * only for that: the answer is built from the result afterwards.
 */
#include <stdlib.h>
#include <string.h>

#include "cmd/access.h"
#include "cmd/keys.h"
#include "cmd/ts.h"
#include "cmd/ts_group.h"
#include "cmd/ts_rows.h"

/* ------------------------------------------------------------------------ */
/* TS.INFO                                                                  */
/* ------------------------------------------------------------------------ */

/* Appends s[0..len) and a NUL at *p; returns the copy. */
static char *put_text(char **p, const char *s, size_t len)
{
    char *at = *p;
    memcpy(at, s, len);
    at[len] = '\0';
    *p += len + 1;
    return at;
}

void cmd_ts_info_free(cmd_ts_info_res_t *r)
{
    free(r->labels);
    free(r->rules);
    free(r->text);
    free(r->chunks);
    r->chunks = NULL;
    r->labels = NULL;
    r->rules = NULL;
    r->text = NULL;
}

static bool run_info(cmd_ctx_t *ctx, const void *args, void *res)
{
    const cmd_ts_key_args_t *a = args;
    cmd_ts_info_res_t *r = res;
    memset(r, 0, sizeof(*r));
    /* the rules and source with the series they link to: stale links are not shown */
    ts_group_t g;
    if (!ts_group_open(ctx, a->key, a->klen, CMD_MUST_EXIST | TS_GROUP_SOURCE | TS_GROUP_VISIBLE, &g))
        return false;
    const ts_t *ts = cmd_key_value(&g.h);
    ts_get_info(ts, &r->info);
    r->retention_ms = ts_retention(ts);
    r->policy = ts_policy(ts);
    /* keys outside the token's prefixes are not shown: a rule to one, or a
     * source that is one, is left out as if it were not there */
    size_t nl = ts_label_count(ts), nr = ts_rule_count(ts), text = 1;
    bool shown[TS_MAX_RULES];
    for (size_t i = 0; i < nl; i++) {
        ts_label_t l = ts_label_at(ts, i);
        text += l.name_len + l.value_len + 2;
    }
    for (size_t i = 0; i < nr; i++) {
        ts_rule_t rule = ts_rule_at(ts, i);
        shown[i] = ts_group_rule_live(&g, i) && cmd_key_visible(ctx, rule.dest, rule.dest_len);
        text += shown[i] ? rule.dest_len + 1 : 0;
    }
    size_t slen = 0;
    const char *src = ts_source(ts, &slen);
    if ((g.src_seen && !g.src_live) || (src && !cmd_key_visible(ctx, src, slen)))
        src = NULL;
    text += src ? slen + 1 : 0;
    r->labels = malloc((nl ? nl : 1) * sizeof(*r->labels));
    r->rules = malloc((nr ? nr : 1) * sizeof(*r->rules));
    r->text = malloc(text);
    r->chunks = malloc((r->info.chunks ? r->info.chunks : 1) * sizeof(*r->chunks));
    if (!r->labels || !r->rules || !r->text || !r->chunks) {
        ts_group_close(&g, false);
        cmd_ts_info_free(r);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory");
    }
    char *p = r->text;
    for (size_t i = 0; i < nl; i++) {
        ts_label_t l = ts_label_at(ts, i);
        const char *name = put_text(&p, l.name, l.name_len);
        r->labels[i] = (ts_label_t){ name, l.name_len, put_text(&p, l.value, l.value_len), l.value_len };
    }
    r->nlabels = nl;
    for (size_t i = 0; i < nr; i++) {
        if (!shown[i])
            continue;
        ts_rule_t rule = ts_rule_at(ts, i);
        r->rules[r->nrules++] = (cmd_ts_rule_shown_t){ put_text(&p, rule.dest, rule.dest_len), rule.dest_len, rule.agg,
                                                       rule.quantile, rule.bucket_ms, rule.align };
    }
    if (src) {
        r->source = put_text(&p, src, slen);
        r->source_len = slen;
    }
    for (size_t i = 0; i < r->info.chunks; i++)
        ts_get_chunk_info(ts, i, &r->chunks[i]);
    ts_group_close(&g, false);
    return true;
}

/* ------------------------------------------------------------------------ */
/* TS.RANGE, TS.REVRANGE                                                    */
/* ------------------------------------------------------------------------ */

static bool range(cmd_ctx_t *ctx, const cmd_ts_range_args_t *a, cmd_ts_range_res_t *r, bool reverse)
{
    ts_query_t q = a->query;
    q.reverse = reverse;
    q.max_results = TS_MAX_EMPTY_BUCKETS;
    q.has_extra = false;
    cmd_ts_rows_t *c = &r->rows;
    memset(c, 0, sizeof(*c));
    if ((c->capped = ts_answer_rows(ctx, &c->max)) && c->max < q.max_results)
        q.max_results = c->max ? c->max : 1;   /* empty buckets past the answer's cap: refused before they are made */
    cmd_key_t h;
    ks_key_t keys[2];
    if (!ts_open_latest(ctx, a->key, a->klen, a->latest, &h, keys, &q))
        return false;
    core_status_t st = ts_rows_range(cmd_key_value(&h), &q, c);
    cmd_key_close(&h, false);
    if (c->over || (st == CORE_LIMIT && c->capped && q.max_results < TS_MAX_EMPTY_BUCKETS)) {
        cmd_ts_rows_free(c);
        return ts_too_many_rows(ctx, c->max);
    }
    if (st == CORE_LIMIT) {
        cmd_ts_rows_free(c);
        return cmd_fail(ctx, CMD_E_BAD_REQUEST, "empty",
                        "empty=true would report more than %d buckets: narrow the range, widen bucket_ms or set count",
                        TS_MAX_EMPTY_BUCKETS);
    }
    if (st != CORE_OK) {
        cmd_ts_rows_free(c);
        return cmd_fail(ctx, cmd_status_code(st), NULL, "out of memory running the query");
    }
    return true;
}

static bool run_range(cmd_ctx_t *ctx, const void *args, void *res) { return range(ctx, args, res, false); }
static bool run_revrange(cmd_ctx_t *ctx, const void *args, void *res) { return range(ctx, args, res, true); }

const cmd_def_t CMD_TS_INFO = { "TS.INFO", CMD_ID_TS_INFO, CMD_F_STATE_KEYS, CMD_ACCESS_READ, run_info, NULL, NULL,
                                sizeof(cmd_ts_key_args_t), sizeof(cmd_ts_info_res_t), cmd_keys_first };
const cmd_def_t CMD_TS_RANGE = { "TS.RANGE", CMD_ID_TS_RANGE, CMD_F_STATE_KEYS, CMD_ACCESS_READ, run_range, NULL, NULL,
                                 sizeof(cmd_ts_range_args_t), sizeof(cmd_ts_range_res_t), cmd_keys_first };
const cmd_def_t CMD_TS_REVRANGE = { "TS.REVRANGE", CMD_ID_TS_REVRANGE, CMD_F_STATE_KEYS, CMD_ACCESS_READ, run_revrange,
                                    NULL, NULL, sizeof(cmd_ts_range_args_t), sizeof(cmd_ts_range_res_t),
                                    cmd_keys_first };
