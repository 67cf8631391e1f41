/*
 * ts_http.h - what the files of the time series' HTTP adapter share
 * (api/ts.c: the per-key routes and the family's table; api/ts_multi.c:
 * the queries by labels; api/ts_parse.c: the readers of their parameters;
 * api/ts_json.c: the answers).  The operations are cmd/ts.h's.
 */
#ifndef TALLY_API_TS_HTTP_H
#define TALLY_API_TS_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/request.h"
#include "cmd/ts.h"
#include "core/codec.h"

/* ------------------------------------------------------------------------ */
/* Parameters (ts_parse.c); each answers its refusal on resp                */
/* ------------------------------------------------------------------------ */

/* The creation options: retention_ms, duplicate_policy, labels, and
 * chunk_size and encoding (checked, not kept). */
typedef struct ts_opts {
    int64_t retention;
    ts_policy_t policy;
    ts_label_t labels[TS_MAX_LABELS];
    size_t nlabels;
} ts_opts_t;

/* The options as the operations take them (pointing into o). */
cmd_ts_opts_t ts_opts_cmd(const ts_opts_t *o);

bool ts_parse_policy(api_resp_t *resp, json_t *body, const char *name, ts_policy_t *out, bool *present);
bool ts_parse_layout(api_resp_t *resp, json_t *body);
/* The labels object, when given (*present). */
bool ts_parse_labels(const api_req_t *req, api_resp_t *resp, json_t *body, ts_opts_t *o, bool *present);
/* The creation options of a body (NULL: the defaults). */
bool ts_parse_opts(const api_req_t *req, api_resp_t *resp, json_t *body, ts_opts_t *o);
/* The samples array: [[ts|"*", value], ...], "*" = the time served;
 * malloc'd, NULL when refused. */
ts_sample_t *ts_parse_samples(const api_req_t *req, api_resp_t *resp, json_t *body, size_t *n);
/* "-" (or absent: dflt), "+" (or " ", what a literal '+' decodes to), or an
 * integer timestamp; *explicit_ts tells whether a number was given. */
bool ts_parse_bound(const api_req_t *req, api_resp_t *resp, const char *name, int64_t dflt, int64_t *out,
                    bool *explicit_ts);

/* The aggregations of one query (agg=min,max): where q->aggs points. */
typedef struct ts_aggs {
    ts_agg_t a[TS_MAX_AGGS];
    double q[TS_MAX_AGGS];
} ts_aggs_t;

/* The query of /range (multi: of /mts/range, with its label parameters);
 * *fts_out: the filter_by_ts array the query points to (free it). */
bool ts_parse_range(const api_req_t *req, api_resp_t *resp, ts_query_t *q, ts_aggs_t *aggs, int64_t **fts_out,
                    bool multi);
/* The `filter` parameters (at least one; syntax only: the operations
 * refuse filters that select nothing); malloc'd, NULL when refused. */
ts_matcher_t *ts_parse_filters(const api_req_t *req, api_resp_t *resp, size_t *n);
/* withlabels / selected_labels (sel->names malloc'd: free it). */
bool ts_parse_labelsel(const api_req_t *req, api_resp_t *resp, cmd_ts_labelsel_t *sel);

/* ------------------------------------------------------------------------ */
/* Answers (ts_json.c)                                                      */
/* ------------------------------------------------------------------------ */

/* Appends a decimal integer (snprintf costs more than the rest of an add). */
void ts_put_i64(wbuf_t *b, int64_t v);
/* [[ts,value],...] (agg=min,max: [[ts,min,max],...]); values that are not
 * finite as the strings "nan", "inf", "-inf". */
void ts_put_rows(wbuf_t *b, const cmd_ts_rows_t *c);
/* Hands a built body to the response (507 when building it ran out of
 * memory). */
void ts_answer(api_resp_t *resp, int status, wbuf_t *b);
/* The labels shown of a series as an object (NULL: none asked for). */
json_t *ts_labels_json(const cmd_ts_series_t *x);

/* ------------------------------------------------------------------------ */
/* Queries by labels (ts_multi.c)                                           */
/* ------------------------------------------------------------------------ */

void ts_h_queryindex(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void ts_h_mget(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void ts_h_mrange(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void ts_h_mrevrange(api_server_t *srv, api_req_t *req, api_resp_t *resp);

#endif
