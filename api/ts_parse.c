/*
 * ts_parse.c - the readers of the time series routes' parameters (their
 * bodies and query strings) into the operations' arguments (cmd/ts.h):
 * today's validation and messages, and what replay of an older journal's
 * requests accepts (req->replay).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/ts_http.h"

cmd_ts_opts_t ts_opts_cmd(const ts_opts_t *o)
{
    return (cmd_ts_opts_t){ o->retention, o->policy, { o->labels, NULL, o->nlabels } };
}

bool ts_parse_policy(api_resp_t *resp, json_t *body, const char *name, ts_policy_t *out, bool *present)
{
    const char *s = NULL;
    if (present)
        *present = false;
    if (!api_obj_string(resp, body, name, false, &s, NULL))
        return false;
    if (!s)
        return true;
    if (!ts_policy_parse(s, out)) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be one of block, first, last, min, max, sum",
                        name);
        return false;
    }
    if (present)
        *present = true;
    return true;
}

/* chunk_size and encoding, accepted as RedisTimeSeries takes them: every
 * series here is Gorilla-compressed in chunks of at most 1024 samples and
 * 4096 stream bytes (RedisTimeSeries's default chunk size), whatever is
 * asked; GET /ts/{key} reports that layout. */
bool ts_parse_layout(api_resp_t *resp, json_t *body)
{
    int64_t chunk;
    bool present;
    if (!api_obj_int(resp, body, "chunk_size", false, 48, 1048576, &chunk, &present))
        return false;
    if (present && chunk % 8) {
        api_error_field(resp, API_E_BAD_REQUEST, "chunk_size", "'chunk_size' must be a multiple of 8 from 48 to 1048576");
        return false;
    }
    const char *enc = NULL;
    if (!api_obj_string(resp, body, "encoding", false, &enc, NULL))
        return false;
    if (enc && strcasecmp(enc, "compressed") != 0 && strcasecmp(enc, "uncompressed") != 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "encoding", "'encoding' must be compressed or uncompressed");
        return false;
    }
    return true;
}

/* The labels object, when given (*present). */
bool ts_parse_labels(const api_req_t *req, api_resp_t *resp, json_t *body, ts_opts_t *o, bool *present)
{
    o->nlabels = 0;
    json_t *labels = json_object_get(body, "labels");
    *present = labels != NULL;
    if (!labels)
        return true;
    if (!json_is_object(labels)) {
        api_error_field(resp, API_E_BAD_REQUEST, "labels", "'labels' must be an object of strings");
        return false;
    }
    if (json_object_size(labels) > TS_MAX_LABELS) {
        api_error_field(resp, API_E_BAD_REQUEST, "labels", "at most %d labels", TS_MAX_LABELS);
        return false;
    }
    const char *name;
    json_t *v;
    json_object_foreach(labels, name, v) {
        size_t nlen = strlen(name);
        if (!json_is_string(v) || json_string_length(v) == 0 || nlen == 0 || nlen > TS_MAX_LABEL_LEN ||
            json_string_length(v) > TS_MAX_LABEL_LEN || memchr(json_string_value(v), 0, json_string_length(v))) {
            api_error_field(resp, API_E_BAD_REQUEST, "labels",
                            "label '%.64s': names and values must be non-empty strings of at most %d bytes", name,
                            TS_MAX_LABEL_LEN);
            return false;
        }
        /* RedisTimeSeries refuses these: they would break the filter syntax
         * (l=(a,b)).  A replayed request was accepted when served (a refused
         * one is never journaled), so replay keeps what older releases took. */
        if (!req->replay && (strpbrk(name, "(),=") || strpbrk(json_string_value(v), "(),="))) {
            api_error_field(resp, API_E_BAD_REQUEST, "labels",
                            "label '%.64s': names and values cannot contain '(', ')', ',' or '=' (the filter syntax "
                            "uses them)",
                            name);
            return false;
        }
        o->labels[o->nlabels++] = (ts_label_t){ name, nlen, json_string_value(v), json_string_length(v) };
    }
    return true;
}

/* retention_ms, duplicate_policy, labels, chunk_size, encoding: the creation
 * options. */
bool ts_parse_opts(const api_req_t *req, api_resp_t *resp, json_t *body, ts_opts_t *o)
{
    o->retention = 0;
    o->policy = TS_DUP_BLOCK;
    o->nlabels = 0;
    if (!body)
        return true;
    bool present;
    return api_obj_int(resp, body, "retention_ms", false, 0, INT64_MAX, &o->retention, NULL) &&
           ts_parse_policy(resp, body, "duplicate_policy", &o->policy, NULL) && ts_parse_layout(resp, body) &&
           ts_parse_labels(req, resp, body, o, &present);
}

/* "nan", "-nan" or "+nan" in any case: what RedisTimeSeries reads as NaN. */
static bool is_nan_text(const char *s)
{
    return strcasecmp(s + (s[0] == '-' || s[0] == '+'), "nan") == 0;
}

/* The samples array: [[ts|"*", value], ...], "*" = now. */
ts_sample_t *ts_parse_samples(const api_req_t *req, api_resp_t *resp, json_t *body, size_t *n)
{
    json_t *arr = json_object_get(body, "samples");
    if (!arr) {
        api_error_field(resp, API_E_BAD_REQUEST, "samples", "missing field 'samples'");
        return NULL;
    }
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "samples", "'samples' must be a non-empty array of [timestamp, value]");
        return NULL;
    }
    size_t cnt = json_array_size(arr);
    if (cnt > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "samples", "at most %d samples per request, got %zu", API_MAX_BATCH,
                        cnt);
        return NULL;
    }
    ts_sample_t *s = malloc(cnt * sizeof(*s));
    if (!s) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    int64_t now_ms = api_now_ms(req);
    for (size_t i = 0; i < cnt; i++) {
        json_t *e = json_array_get(arr, i);
        if (!json_is_array(e) || json_array_size(e) != 2) {
            api_error_field(resp, API_E_BAD_REQUEST, "samples", "samples[%zu] must be [timestamp, value]", i);
            goto bad;
        }
        json_t *t = json_array_get(e, 0), *v = json_array_get(e, 1);
        if (json_is_string(t) && strcmp(json_string_value(t), "*") == 0) {
            if (now_ms < 0) {
                api_error_field(resp, API_E_BAD_REQUEST, "samples", "samples[%zu]: the clock is before 1970", i);
                goto bad;
            }
            s[i].ts = now_ms;
        } else if (json_is_integer(t) && json_integer_value(t) >= 0) {
            s[i].ts = json_integer_value(t);
        } else {
            api_error_field(resp, API_E_BAD_REQUEST, "samples",
                            "samples[%zu]: the timestamp must be \"*\" or an integer from 0 to %lld (ms)", i,
                            (long long)TS_MAX_TIMESTAMP);
            goto bad;
        }
        if (json_is_string(v) && is_nan_text(json_string_value(v))) {
            s[i].value = NAN;   /* a missing reading, as RedisTimeSeries stores it */
            continue;
        }
        if (!json_is_number(v) || !isfinite(json_number_value(v))) {
            api_error_field(resp, API_E_BAD_REQUEST, "samples",
                            "samples[%zu]: the value must be a finite number or \"nan\" (\"-nan\", \"+nan\")",
                            i);
            goto bad;
        }
        s[i].value = json_number_value(v);
    }
    *n = cnt;
    return s;
bad:
    free(s);
    return NULL;
}

/* "-" (or absent), "+" (or " ", what a literal '+' decodes to), or an
 * integer timestamp.  *explicit_ts tells whether a number was given. */
bool ts_parse_bound(const api_req_t *req, api_resp_t *resp, const char *name, int64_t dflt, int64_t *out,
                    bool *explicit_ts)
{
    *explicit_ts = false;
    const char *v;
    size_t len;
    if (!api_query_string(req, resp, name, false, &v, &len))
        return false;
    if (!v) {
        *out = dflt;
        return true;
    }
    if (strcmp(v, "-") == 0) {
        *out = 0;
        return true;
    }
    if (strcmp(v, "+") == 0 || strcmp(v, " ") == 0) {
        *out = TS_MAX_TIMESTAMP;
        return true;
    }
    int64_t x;
    if (!api_parse_i64(v, len, &x) || x < 0) {
        api_error_field(resp, API_E_BAD_REQUEST, name,
                        "query parameter '%s' must be '-', '+' (sent as %%2B) or a timestamp from 0 to %lld (ms)",
                        name, (long long)TS_MAX_TIMESTAMP);
        return false;
    }
    *out = x;
    *explicit_ts = true;
    return true;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* agg: one aggregation, or several separated by commas (RedisTimeSeries's
 * AGGREGATION min,max), into q (and aggs, which q then points to). */
static bool parse_aggs(api_resp_t *resp, const char *agg, ts_query_t *q, ts_aggs_t *aggs)
{
    size_t n = 0;
    for (const char *p = agg;; n++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        char one[40];
        if (n == TS_MAX_AGGS) {
            api_error_field(resp, API_E_BAD_REQUEST, "agg", "at most %d aggregations in 'agg'", TS_MAX_AGGS);
            return false;
        }
        if (len == 0 || len >= sizeof(one)) {
            api_error_field(resp, API_E_BAD_REQUEST, "agg", "'agg' is an aggregation or several separated by commas");
            return false;
        }
        memcpy(one, p, len);
        one[len] = '\0';
        if (!ts_agg_parse_any(one, &aggs->a[n], &aggs->q[n])) {
            api_error_field(resp, API_E_BAD_REQUEST, "agg",
                            "unknown aggregation '%.32s' (avg, sum, min, max, range, count, first, last, std.p, "
                            "std.s, var.p, var.s, twa, countNaN, countAll, p0 to p100)",
                            one);
            return false;
        }
        if (!c)
            break;
        p = c + 1;
    }
    q->agg = aggs->a[0];
    q->quantile = aggs->q[0];
    q->naggs = n + 1;
    q->aggs = aggs->a;
    q->quantiles = aggs->q;
    return true;
}

/* The query of /range (multi: of /mts/range, with its label parameters). */
bool ts_parse_range(const api_req_t *req, api_resp_t *resp, ts_query_t *q, ts_aggs_t *aggs, int64_t **fts_out,
                    bool multi)
{
    static const char *const params[] = { "from", "to", "agg", "bucket_ms", "align", "bucket_timestamp", "count",
                                          "filter_by_value_min", "filter_by_value_max", "filter_by_ts", "empty",
                                          "latest", NULL };
    static const char *const mparams[] = { "from", "to", "agg", "bucket_ms", "align", "bucket_timestamp", "count",
                                           "filter_by_value_min", "filter_by_value_max", "filter_by_ts", "empty",
                                           "latest", "filter", "withlabels", "selected_labels", "groupby", "reduce",
                                           "exclude_empty",
                                           NULL };
    memset(q, 0, sizeof(*q));
    *fts_out = NULL;
    bool from_explicit, to_explicit, present;
    if (!api_query_allow(req, resp, multi ? mparams : params) ||
        !ts_parse_bound(req, resp, "from", 0, &q->from, &from_explicit) ||
        !ts_parse_bound(req, resp, "to", TS_MAX_TIMESTAMP, &q->to, &to_explicit))
        return false;
    int64_t count = 0;
    if (!api_query_int(req, resp, "count", false, 1, INT64_MAX, &count, NULL) ||
        !api_query_double(req, resp, "filter_by_value_min", false, -INFINITY, INFINITY, &q->min, &q->has_min) ||
        !api_query_double(req, resp, "filter_by_value_max", false, -INFINITY, INFINITY, &q->max, &q->has_max))
        return false;
    q->count = (uint64_t)count;

    /* aggregation */
    static const char *const once[] = { "agg", "align", "bucket_timestamp" };
    for (size_t i = 0; i < sizeof(once) / sizeof(once[0]); i++)
        if (api_query_count(req, once[i]) > 1) {
            api_error_field(resp, API_E_BAD_REQUEST, once[i], "query parameter '%s' given more than once", once[i]);
            return false;
        }
    size_t len;
    const char *agg = api_query_get(req, "agg", &len);
    if (!api_query_bool(req, resp, "empty", &q->empty, &present))
        return false;
    if (present && !agg) {
        api_error_field(resp, API_E_BAD_REQUEST, "empty", "'empty' can only be used with 'agg'");
        return false;
    }
    if (!api_query_int(req, resp, "bucket_ms", false, 1, INT64_MAX, &q->bucket_ms, &present))
        return false;
    if (agg) {
        if (!parse_aggs(resp, agg, q, aggs))
            return false;
        if (!present) {
            api_error_field(resp, API_E_BAD_REQUEST, "bucket_ms", "'agg' needs 'bucket_ms' (> 0)");
            return false;
        }
    } else if (present) {
        api_error_field(resp, API_E_BAD_REQUEST, "bucket_ms", "'bucket_ms' needs 'agg'");
        return false;
    }
    const char *align = api_query_get(req, "align", &len);
    if (align) {
        if (!agg) {
            api_error_field(resp, API_E_BAD_REQUEST, "align", "'align' can only be used with 'agg'");
            return false;
        }
        if (strcmp(align, "start") == 0 || strcmp(align, "-") == 0) {
            if (!from_explicit) {
                api_error_field(resp, API_E_BAD_REQUEST, "align", "align=start needs an explicit 'from' timestamp");
                return false;
            }
            q->align = q->from;
        } else if (strcmp(align, "end") == 0 || strcmp(align, "+") == 0 || strcmp(align, " ") == 0) {
            if (!to_explicit) {
                api_error_field(resp, API_E_BAD_REQUEST, "align", "align=end needs an explicit 'to' timestamp");
                return false;
            }
            q->align = q->to;
        } else if (!api_parse_i64(align, len, &q->align) || q->align < 0) {
            api_error_field(resp, API_E_BAD_REQUEST, "align", "'align' must be start, end or a timestamp >= 0");
            return false;
        }
    }
    const char *bts = api_query_get(req, "bucket_timestamp", &len);
    if (bts) {
        if (!agg) {
            api_error_field(resp, API_E_BAD_REQUEST, "bucket_timestamp", "'bucket_timestamp' can only be used with 'agg'");
            return false;
        }
        if (strcmp(bts, "start") == 0 || strcmp(bts, "-") == 0)
            q->bucket_ts = TS_BUCKET_START;
        else if (strcmp(bts, "end") == 0 || strcmp(bts, "+") == 0 || strcmp(bts, " ") == 0)
            q->bucket_ts = TS_BUCKET_END;
        else if (strcmp(bts, "mid") == 0 || strcmp(bts, "~") == 0)
            q->bucket_ts = TS_BUCKET_MID;
        else {
            api_error_field(resp, API_E_BAD_REQUEST, "bucket_timestamp", "'bucket_timestamp' must be start, end or mid");
            return false;
        }
    }

    /* filter_by_ts, repeatable: sorted for binary search */
    size_t nf = api_query_count(req, "filter_by_ts");
    if (nf) {
        int64_t *f = malloc(nf * sizeof(*f));
        if (!f) {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            return false;
        }
        size_t k = 0;
        for (int i = 0; i < req->nparams; i++) {
            if (strcmp(req->params[i].name, "filter_by_ts") != 0)
                continue;
            if (!api_parse_i64(req->params[i].value, req->params[i].vlen, &f[k]) || f[k] < 0) {
                free(f);
                api_error_field(resp, API_E_BAD_REQUEST, "filter_by_ts", "'filter_by_ts' values must be timestamps >= 0");
                return false;
            }
            k++;
        }
        qsort(f, nf, sizeof(*f), cmp_i64);
        q->filter_ts = f;
        q->nfilter_ts = nf;
        *fts_out = f;
    }
    return true;
}

ts_matcher_t *ts_parse_filters(const api_req_t *req, api_resp_t *resp, size_t *n)
{
    size_t nf = api_query_count(req, "filter");
    if (nf == 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "filter", "missing query parameter 'filter' (label=value, ...)");
        return NULL;
    }
    ts_matcher_t *m = malloc(nf * sizeof(*m));
    if (!m) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    size_t k = 0;
    for (int i = 0; i < req->nparams; i++) {
        if (strcmp(req->params[i].name, "filter") != 0)
            continue;
        const char *why;
        if (!ts_matcher_parse(req->params[i].value, req->params[i].vlen, &m[k], &why)) {
            api_error_field(resp, API_E_BAD_REQUEST, "filter", "filter '%.64s': %s", req->params[i].value, why);
            free(m);
            return NULL;
        }
        k++;
    }
    *n = k;
    return m;
}

bool ts_parse_labelsel(const api_req_t *req, api_resp_t *resp, cmd_ts_labelsel_t *sel)
{
    memset(sel, 0, sizeof(*sel));
    if (!api_query_bool(req, resp, "withlabels", &sel->all, NULL))
        return false;
    size_t n = api_query_count(req, "selected_labels");
    if (n && sel->all) {
        api_error_field(resp, API_E_BAD_REQUEST, "selected_labels", "'withlabels' and 'selected_labels' exclude each other");
        return false;
    }
    if (!n)
        return true;
    cmd_ts_name_t *names = malloc(n * sizeof(*names));
    if (!names) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return false;
    }
    for (int i = 0; i < req->nparams; i++)
        if (strcmp(req->params[i].name, "selected_labels") == 0)
            names[sel->n++] = (cmd_ts_name_t){ req->params[i].value, req->params[i].vlen };
    sel->names = names;
    return true;
}
