/*
 * ts.c - /ts: RedisTimeSeries (TS.*) over HTTP.
 *
 *   PUT    /ts/{key}            {"retention_ms":0,"duplicate_policy":"block","labels":{"room":"kitchen"}}
 *                               -> 201 {"created":true}; 409 EXISTS if the key exists     (TS.CREATE)
 *   POST   /ts/{key}            {"samples":[[1686697976001,21],["*",22]],"on_duplicate":"sum"}
 *                               -> {"timestamps":[...],"created":false}          (TS.ADD / TS.MADD)
 *   GET    /ts/{key}            -> info                                           (TS.INFO)
 *   GET    /ts/{key}/range      ?from=-&to=+&agg=avg&bucket_ms=60000&align=&bucket_timestamp=&count=
 *                                &filter_by_value_min=&filter_by_value_max=&filter_by_ts=...
 *                               -> {"samples":[[ts,value],...]}                   (TS.RANGE)
 *                               (agg=min,max: [[ts,min,max],...], AGGREGATION min,max)
 *   GET    /ts/{key}/revrange   the same, newest first                            (TS.REVRANGE)
 *   DELETE /ts/{key}/range      ?from=&to= -> {"deleted":N}                       (TS.DEL)
 *
 * Adding to a missing key creates it, as TS.ADD does, with retention_ms,
 * duplicate_policy and labels from the same body when given (ignored when the
 * key exists, as TS.ADD ignores them).  A batch is all or nothing: the first
 * sample that would fail (older than retention: 400; a duplicate under the
 * BLOCK policy: 409 EXISTS) is named and nothing is stored.  "*" as a
 * timestamp is the time the request is served (req->now_ns, which the journal
 * records, so replay gives the same timestamps).
 *
 * `from`/`to` take "-" (the earliest) and "+" (the latest).  Query strings
 * decode '+' as a space, so "+" must be sent as %2B; a lone space is read as
 * "+" too, so `to=+` typed in a browser or curl still works.
 *
 * Reads of a missing key are 404 (TS.RANGE and TS.INFO fail on one).
 * Aggregated values that are not finite (a sum of huge values) are printed as
 * the strings "inf", "-inf", "nan": JSON has no such numbers.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/auth.h"
#include "api/ts_index.h"
#include "core/ts.h"

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */
/* ------------------------------------------------------------------------ */

/* Adds a series's labels to the index (a failure leaves it unindexed: the
 * queries then scan). Shard locked. */
static void ts_index_note(api_server_t *srv, const char *key, size_t klen, ts_t *ts)
{
    ts_index_t *ix = ts_index_of(srv->ks);
    if (ix)
        ts_index_add(ix, key, klen, ts);
}

#define TS_MAX_EMPTY_BUCKETS 1000000   /* buckets one empty=true query may report (each costs an answer row) */

typedef struct ts_opts {
    int64_t retention;
    ts_policy_t policy;
    ts_label_t labels[TS_MAX_LABELS];
    size_t nlabels;
} ts_opts_t;

static bool parse_policy(api_resp_t *resp, json_t *body, const char *name, ts_policy_t *out, bool *present)
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
static bool parse_layout(api_resp_t *resp, json_t *body)
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
static bool parse_labels(const api_req_t *req, api_resp_t *resp, json_t *body, ts_opts_t *o, bool *present)
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
static bool parse_opts(const api_req_t *req, api_resp_t *resp, json_t *body, ts_opts_t *o)
{
    o->retention = 0;
    o->policy = TS_DUP_BLOCK;
    o->nlabels = 0;
    if (!body)
        return true;
    bool present;
    return api_obj_int(resp, body, "retention_ms", false, 0, INT64_MAX, &o->retention, NULL) &&
           parse_policy(resp, body, "duplicate_policy", &o->policy, NULL) && parse_layout(resp, body) &&
           parse_labels(req, resp, body, o, &present);
}

/* "nan", "-nan" or "+nan" in any case: what RedisTimeSeries reads as NaN. */
static bool is_nan_text(const char *s)
{
    return strcasecmp(s + (s[0] == '-' || s[0] == '+'), "nan") == 0;
}

/* The samples array: [[ts|"*", value], ...], "*" = now. */
static ts_sample_t *parse_samples(const api_req_t *req, api_resp_t *resp, json_t *body, size_t *n)
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
static bool parse_bound(const api_req_t *req, api_resp_t *resp, const char *name, int64_t dflt, int64_t *out,
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

/* The aggregations of one query (agg=min,max): where q->aggs points. */
typedef struct ts_aggs {
    ts_agg_t a[TS_MAX_AGGS];
    double q[TS_MAX_AGGS];
} ts_aggs_t;

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
static bool parse_range(const api_req_t *req, api_resp_t *resp, ts_query_t *q, ts_aggs_t *aggs, int64_t **fts_out,
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
        !parse_bound(req, resp, "from", 0, &q->from, &from_explicit) ||
        !parse_bound(req, resp, "to", TS_MAX_TIMESTAMP, &q->to, &to_explicit))
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

/* ------------------------------------------------------------------------ */
/* Answers                                                                  */
/* ------------------------------------------------------------------------ */

/* The text of the last value printed: a slowly changing series repeats it. */
typedef struct dtext {
    double v;
    bool valid;
    char s[40];
    size_t len;
} dtext_t;

static void put_double(wbuf_t *b, dtext_t *cache, double v)
{
    if (!cache->valid || memcmp(&v, &cache->v, sizeof(v)) != 0) {
        if (isfinite(v))
            api_format_double(v, cache->s, sizeof(cache->s));
        else
            snprintf(cache->s, sizeof(cache->s), "\"%s\"", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        cache->len = strlen(cache->s);
        cache->v = v;
        cache->valid = true;
    }
    wbuf_put_bytes(b, cache->s, cache->len);
}

/* Appends a decimal integer (snprintf costs more than the rest of an add). */
static void put_i64(wbuf_t *b, int64_t v)
{
    char buf[API_I64_TEXT];
    wbuf_put_bytes(b, buf, (size_t)(api_format_i64(buf, v) - buf));
}

/* Hands a built body to the response. */
static void answer(api_resp_t *resp, int status, wbuf_t *b)
{
    if (b->oom) {
        wbuf_free(b);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory building the answer");
        return;
    }
    size_t len;
    char *body = (char *)wbuf_steal(b, &len);
    free(resp->body);
    resp->body = body;
    resp->len = len;
    resp->status = status;
    resp->ctype = NULL;
}

typedef struct collected {
    ts_sample_t *s;
    size_t n, cap;
    double *more;          /* several aggregations: the values after the first, `stride` a row */
    size_t stride;
    bool capped, over;     /* capped: at most `max` rows' worth, then `over` (--max-answer-size) */
    size_t max;            /* in TS_ROW_BOUND units: a row of k values counts k */
} collected_t;

/* An answer row [ts,value] at most: 20 digits, a shortest double (or a
 * "nan" string), the brackets and commas. */
#define TS_ROW_BOUND 48

/* The rows an answer may hold under --max-answer-size: capped (false: no
 * limit) to *rows. */
static bool answer_rows(const api_server_t *srv, size_t *rows)
{
    *rows = (size_t)(srv->limits.max_answer / TS_ROW_BOUND);
    return srv->limits.max_answer != 0;
}

/* The 400 of an answer that would pass --max-answer-size: more than `rows`. */
static void too_many_rows(api_server_t *srv, const api_req_t *req, api_resp_t *resp, size_t rows)
{
    api_answer_fits(srv, req, resp, ((uint64_t)rows + 1) * TS_ROW_BOUND,
                    "narrow the range, widen bucket_ms, set count, or select fewer series");
}

static bool collect(void *ud, int64_t t, double v)
{
    collected_t *c = ud;
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

/* A row of several aggregations (ts_range_rows). */
static bool collect_row(void *ud, int64_t t, const double *v, size_t n)
{
    collected_t *c = ud;
    size_t had = c->cap;
    c->stride = n - 1;   /* before collect: the answer cap counts every value of a row */
    if (!collect(c, t, v[0]))
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

/* Runs a query into c: ts_range, or ts_range_rows for several aggregations. */
static core_status_t collect_range(const ts_t *ts, const ts_query_t *q, collected_t *c)
{
    return q->naggs > 1 ? ts_range_rows(ts, q, collect_row, c) : ts_range(ts, q, collect, c);
}

static void collected_free(collected_t *c)
{
    free(c->s);
    free(c->more);
    c->s = NULL;
    c->more = NULL;
}

/* ------------------------------------------------------------------------ */
/* Handlers                                                                 */
/* ------------------------------------------------------------------------ */
/* ------------------------------------------------------------------------ */
/* A series with the destinations of its rules, locked together             */
/* ------------------------------------------------------------------------ */

/* A source's compactions are written in the same request, under the locks of
 * every key involved: the source is looked up, the names of its rules'
 * destinations copied, and then all of them locked at once (in shard order)
 * and looked up again; if the rules changed in between, again.
 *
 * A link between two series is live when both halves agree: the rule's
 * destination names the series as its source, and the source has the rule.
 * A destination deleted (or expired, evicted, replaced) leaves a stale rule
 * behind, a deleted source a stale source name: RedisTimeSeries drops those
 * at once (tests/flow/test_ts_createrule.py test_delete_key), so here they
 * are never shown nor counted, and a write drops the stale rules. */
typedef struct ts_group {
    api_key_t h;                        /* h.e: the series (the open entry) */
    ks_key_t keys[4 + TS_MAX_RULES];
    char *names;                        /* the destinations' (and source's) names, back to back */
    size_t n;                           /* keys locked */
    size_t extra_at;                    /* where the caller's extra keys are in keys[] */
    ks_entry_t *dst[TS_MAX_RULES];      /* per rule: its live destination, or NULL (stale, or not seen) */
    bool seen[TS_MAX_RULES];            /* per rule: its destination was looked at */
    bool src_named, src_seen, src_live; /* the series names a source; looked at (TS_GROUP_SOURCE); has the rule */
} ts_group_t;

#define TS_GROUP_SOURCE 0x100u          /* also look at the source the series names */
#define TS_GROUP_VISIBLE 0x200u         /* only the keys the token sees (a read): the rest stay unseen */

/* Whether `dst` names src_key as its source (the other half of a live rule). */
static bool ts_dst_live(ks_entry_t *e, const char *src_key, size_t src_len)
{
    if (!e || ks_entry_type(e) != &ts_type)
        return false;
    size_t len;
    const char *src = ts_source(ks_entry_value(e), &len);
    return src && len == src_len && memcmp(src, src_key, len) == 0;
}

/* Whether e is a series with a rule writing to name. */
static bool ts_has_rule_to(ks_entry_t *e, const char *name, size_t len)
{
    return e && ks_entry_type(e) == &ts_type && ts_rule_find(ks_entry_value(e), name, len) >= 0;
}

/* The source named by a series (copied into buf), or NULL. */
static const char *ts_copy_source(const ts_t *ts, char **buf, size_t *len)
{
    const char *p = ts ? ts_source(ts, len) : NULL;
    if (!p)
        return NULL;
    *buf = malloc(*len + 1);
    if (!*buf)
        return NULL;
    memcpy(*buf, p, *len);
    return *buf;
}

/* Opens the series at key with `flags` (API_* and TS_GROUP_*) and, when it
 * has rules, their destinations (and with TS_GROUP_SOURCE the source it
 * names), and the caller's extra[0..nextra) (at most 2, found by the caller
 * at keys[extra_at + j]).  False with *resp answered and nothing locked. */
static bool ts_group_open_with(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                               unsigned flags, const ks_key_t *extra, size_t nextra, ts_group_t *g)
{
    unsigned kflags = flags & (API_WRITE | API_MUST_EXIST);
    bool with_src = flags & TS_GROUP_SOURCE, visible = flags & TS_GROUP_VISIBLE;
    size_t off[TS_MAX_RULES + 1], len[TS_MAX_RULES + 1];   /* rule i's destination, then the source, in names */
    memset(g, 0, sizeof(*g));
    for (int attempt = 0;; attempt++) {
        if (!api_key_open(srv, req, resp, key, klen, &ts_type, kflags, &g->h))
            return false;
        const ts_t *ts = api_key_value(&g->h);
        size_t nr = ts ? ts_rule_count(ts) : 0, slen = 0;
        const char *src = ts && with_src ? ts_source(ts, &slen) : NULL;
        g->src_named = src != NULL;
        if ((nr == 0 && !src && !nextra) || attempt == 8) {   /* (links changing eight times: give up on them) */
            g->n = 1;
            if (!nextra)
                return true;
            api_key_close(&g->h, false);
            api_error(resp, API_E_UNAVAILABLE, "the series kept changing; try again");
            return false;
        }
        size_t total = slen;
        for (size_t i = 0; i < nr; i++)
            total += ts_rule_at(ts, i).dest_len;
        free(g->names);
        g->names = malloc(total + 1);
        if (!g->names) {
            api_key_close(&g->h, false);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            return false;
        }
        /* keys[0] the series, then each destination and the source that is
         * looked at (for a read, those the token sees) */
        size_t at[TS_MAX_RULES + 1], o = 0;   /* their index in keys, 0 = not looked at */
        g->keys[0] = ks_key(srv->ks, key, klen);
        g->n = 1;
        for (size_t i = 0; i <= nr; i++) {
            const char *name;
            if (i < nr) {
                ts_rule_t r = ts_rule_at(ts, i);
                name = r.dest;
                len[i] = r.dest_len;
            } else if (src) {
                name = src;
                len[i] = slen;
            } else {
                break;
            }
            memcpy(g->names + o, name, len[i]);
            off[i] = o;
            o += len[i];
            at[i] = 0;
            if (!visible || api_auth_key_visible(req, g->names + off[i], len[i])) {
                at[i] = g->n;
                g->keys[g->n++] = ks_key(srv->ks, g->names + off[i], len[i]);
            }
        }
        g->extra_at = g->n;
        for (size_t j = 0; j < nextra; j++)
            g->keys[g->n++] = extra[j];
        api_key_close(&g->h, false);
        if (!api_keys_lock(srv, req, resp, g->keys, g->n, &g->h)) {
            free(g->names);   /* a rule's destination outside the token's prefixes: 403 */
            g->names = NULL;
            return false;
        }
        ks_entry_t *e;
        for (size_t i = 0; i <= nr && (i < nr || src); i++) {
            if (!at[i])
                continue;
            if (!api_keys_find(&g->h, at[i], NULL, API_READ, NULL, &e))
                goto gone;
            if (i < nr) {
                g->seen[i] = true;
                g->dst[i] = ts_dst_live(e, key, klen) ? e : NULL;
            } else {
                g->src_seen = true;
                g->src_live = ts_has_rule_to(e, key, klen);
            }
        }
        if (!api_keys_find(&g->h, 0, &ts_type, kflags, NULL, &e))
            goto gone;
        g->h.e = e;   /* (a read of several keys leaves it unset) */
        /* the same rules, in the same order, and the same source? */
        ts = e ? ks_entry_value(e) : NULL;
        bool same = ts && ts_rule_count(ts) == nr;
        for (size_t i = 0; same && i < nr; i++) {
            ts_rule_t r = ts_rule_at(ts, i);
            same = r.dest_len == len[i] && memcmp(r.dest, g->names + off[i], len[i]) == 0;
        }
        if (same && with_src) {
            size_t l2;
            const char *s2 = ts_source(ts, &l2);
            same = !s2 == !src && (!s2 || (l2 == slen && memcmp(s2, g->names + off[nr], slen) == 0));
        }
        if (same) {
            for (size_t i = 0; i < nr; i++)
                if (g->dst[i] && (kflags & API_WRITE))
                    ks_entry_prepare_write(srv->ks, g->dst[i]);
            return true;
        }
        memset(g->seen, 0, sizeof(g->seen));
        memset(g->dst, 0, sizeof(g->dst));
        g->src_seen = g->src_live = false;
        api_key_close(&g->h, false);
    }
gone:   /* answered (404, 409) and closed */
    free(g->names);
    g->names = NULL;
    return false;
}

static bool ts_group_open(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                          unsigned flags, ts_group_t *g)
{
    return ts_group_open_with(srv, req, resp, key, klen, flags, NULL, 0, g);
}

/* Whether rule i may be live: live, or not looked at (nothing is dropped or
 * hidden on a guess). */
static bool ts_group_rule_live(const ts_group_t *g, size_t i) { return g->dst[i] || !g->seen[i]; }

/* Applies the rules after samples t[0..n) went into the series (old_newest:
 * its newest timestamp before, -1 if none), or after a deletion of
 * [from, to] (t NULL); drops the stale rules. */
static void ts_group_compact(ts_group_t *g, int64_t old_newest, const int64_t *t, size_t n, int64_t from, int64_t to)
{
    ts_t *src = api_key_value(&g->h);
    if (!src || g->n == 1)
        return;
    for (size_t i = ts_rule_count(src); i-- > 0;) {
        if (!g->seen[i])
            continue;
        if (!g->dst[i]) {
            ts_rule_remove(src, i);
            continue;
        }
        ts_rule_touch(src, i, old_newest, t, n, from, to);
        ts_rule_t r = ts_rule_at(src, i);
        ts_t *dst = ks_entry_value(g->dst[i]);
        /* a failure (out of memory) leaves that bucket as it was */
        (void)(t ? ts_rule_added(src, &r, old_newest, t, n, dst) : ts_rule_deleted(src, &r, from, to, dst));
        ks_entry_changed(g->h.ctx->srv->ks, g->dst[i]);
    }
}

static void ts_group_close(ts_group_t *g, bool changed)
{
    api_key_close(&g->h, changed);
    free(g->names);
    g->names = NULL;
}


/* Room is made for a write before its keys are locked (evicting takes locks
 * of its own), and the keys a series' rules write to are known only once it
 * is open: a write the token or the cluster refuses for a destination would
 * be answered 403 or 421 after evicting keys for it.  So, when room has to
 * be made, the series and its destinations are opened first, as the write
 * will open them, and a refusal answered before anything is evicted.  (A
 * rule another request adds in between can still be refused after; that
 * changes nothing this request asked for.) */
/* What adding n samples may add to a series at most (memory limits): a
 * sample's Gorilla bits at worst (a 64-bit timestamp delta and value, with
 * their control bits), two chunks opened or re-encoded, and the body for a
 * new series' labels. */
#define TS_SAMPLE_BOUND 24
#define TS_WRITE_FIXED (2 * (TS_CHUNK_BYTES + 256))
static uint64_t ts_add_bound(const api_req_t *req, size_t n)
{
    return (uint64_t)n * TS_SAMPLE_BOUND + TS_WRITE_FIXED + req->body_len;
}

static bool ts_make_room(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                         uint64_t bytes)
{
    if (!req->replay && (ks_over_limit(srv->ks) || bytes > api_room_now(srv, req))) {
        bool undo = req->ctx->undo_on;   /* a look, not a change: nothing to take back */
        req->ctx->undo_on = false;
        ts_group_t g;
        bool ok = ts_group_open(srv, req, resp, key, klen, API_READ, &g);
        req->ctx->undo_on = undo;
        if (!ok)
            return false;
        ts_group_close(&g, false);
    }
    return api_make_room(srv, req, resp) &&
           api_make_room_for_key(srv, req, resp, bytes + ks_entry_overhead(klen), key, klen, 0);
}

static void h_ts_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "retention_ms", "duplicate_policy", "labels", "chunk_size", "encoding", NULL };
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    json_t *body = NULL;
    if (req->body_len > 0 && !(body = api_body_object(req, resp, fields)))
        return;
    ts_opts_t o;
    if (!parse_opts(req, resp, body, &o) || !api_make_room(srv, req, resp))
        return;

    /* indexed before it is stored: the index may list a key that is not (yet)
     * a series, never miss one */
    ts_t *ts = ts_create(o.retention, o.policy, o.labels, o.nlabels);
    ts_index_t *ix = ts_index_of(srv->ks);
    if (ts && ix)
        ts_index_add(ix, key, klen, ts);
    api_create_key(srv, req, resp, key, klen, &ts_type, ts, NULL);
}

static void h_ts_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "samples",  "on_duplicate", "retention_ms", "duplicate_policy",
                                          "labels",   "chunk_size",   "encoding",     NULL };
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    json_t *body = api_body_object(req, resp, fields);
    if (!body)
        return;
    ts_opts_t o;
    ts_policy_t over = TS_DUP_BLOCK;
    bool has_over;
    size_t n;
    if (!parse_opts(req, resp, body, &o) || !parse_policy(resp, body, "on_duplicate", &over, &has_over))
        return;
    ts_sample_t *s = parse_samples(req, resp, body, &n);
    if (!s)
        return;
    if (!ts_make_room(srv, req, resp, key, klen, ts_add_bound(req, n))) {
        free(s);
        return;
    }

    ts_group_t g;
    if (!ts_group_open(srv, req, resp, key, klen, API_WRITE, &g)) {
        free(s);
        return;
    }
    api_key_t *h = &g.h;
    /* A new series gets the samples before it joins the keyspace, so a
     * refused batch leaves no empty key behind. */
    bool created = !h->e;
    if (h->e && !api_value_fits(srv, req, resp, "samples", "the series", ts_type.size(api_key_value(h)) + ts_add_bound(req, n))) {
        ts_group_close(&g, false);
        free(s);
        return;
    }
    ts_t *ts = h->e ? api_key_value(h) : ts_create(o.retention, o.policy, o.labels, o.nlabels);
    size_t failed = 0;
    core_status_t st = CORE_NOMEM;
    ts_sample_t newest = { -1, 0 };
    if (ts) {
        ts_last(ts, &newest);
        st = ts_add(ts, s, n, has_over ? over : ts_policy(ts), &failed);
    }
    if (st == CORE_OK && created && !api_key_add(h, &ts_type, ts, KS_NO_EXPIRY))
        st = CORE_NOMEM;
    if (st == CORE_OK && created)
        ts_index_note(srv, key, klen, ts);
    if (st != CORE_OK) {
        int64_t newest_ts = -1;   /* the newest sample when the failing one came: stored or earlier in the batch */
        if (st == CORE_TOO_OLD) {
            ts_info_t info;
            ts_get_info(ts, &info);
            newest_ts = info.last_ts;
            for (size_t i = 0; i < failed; i++)
                if (s[i].ts > newest_ts)
                    newest_ts = s[i].ts;
        }
        int64_t retention = ts ? ts_retention(ts) : 0;
        ts_policy_t used = has_over ? over : ts ? ts_policy(ts) : o.policy;
        if (created)
            ts_free(ts);
        else
            ks_entry_changed(srv->ks, h->e);   /* unchanged samples, but spare capacity may have moved */
        ts_group_close(&g, false);
        switch (st) {
        case CORE_TOO_OLD:
            api_error_status(resp, st, "samples",
                             "samples[%zu]: timestamp %lld is older than retention (newest %lld, retention_ms %lld); "
                             "nothing was added",
                             failed, (long long)s[failed].ts, (long long)newest_ts, (long long)retention);
            break;
        case CORE_DUPLICATE:
            if (used != TS_DUP_BLOCK) {
                api_error_status(resp, st, "samples",
                                 "samples[%zu]: a sample already exists at timestamp %lld and the duplicate policy %s "
                                 "cannot combine a NaN (use first or last); nothing was added",
                                 failed, (long long)s[failed].ts, ts_policy_name(used));
                break;
            }
            api_error_status(resp, st, "samples",
                             "samples[%zu]: a sample already exists at timestamp %lld and the duplicate policy is "
                             "block (set on_duplicate to first, last, min, max or sum); nothing was added",
                             failed, (long long)s[failed].ts);
            break;
        case CORE_OVERFLOW:
            api_error_status(resp, st, "samples",
                             "samples[%zu]: the duplicate policy's result at timestamp %lld is not finite; nothing was "
                             "added",
                            failed, (long long)s[failed].ts);
            break;
        default: api_error_status(resp, st, NULL, "out of memory adding samples"); break;
        }
        free(s);
        return;
    }
    int64_t *t = malloc(n * sizeof(*t));
    if (t) {   /* (out of memory: the compactions miss this batch, the samples are stored) */
        for (size_t i = 0; i < n; i++)
            t[i] = s[i].ts;
        ts_group_compact(&g, newest.ts, t, n, 0, 0);
    }
    free(t);
    ts_group_close(&g, true);
    wbuf_t b = WBUF_INIT;
    wbuf_reserve(&b, 32 + n * 16);
    wbuf_put_bytes(&b, "{\"timestamps\":[", 15);
    for (size_t i = 0; i < n; i++) {
        if (i)
            wbuf_put_u8(&b, ',');
        put_i64(&b, s[i].ts);
    }
    wbuf_put_bytes(&b, created ? "],\"created\":true}" : "],\"created\":false}", created ? 17 : 18);
    free(s);
    answer(resp, 200, &b);
}

/* POST /ts/{key}/incrby and /decrby {"by":N,"timestamp":"*"|ms, creation
 * options}: TS.INCRBY / TS.DECRBY. */
static void incrby(api_server_t *srv, api_req_t *req, api_resp_t *resp, bool decr)
{
    static const char *const fields[] = { "by",     "timestamp",  "retention_ms", "duplicate_policy",
                                          "labels", "chunk_size", "encoding",     NULL };
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    json_t *body = api_body_object(req, resp, fields);
    if (!body)
        return;
    ts_opts_t o;
    double by;
    if (!parse_opts(req, resp, body, &o) || !api_obj_double(resp, body, "by", true, -DBL_MAX, DBL_MAX, &by, NULL))
        return;
    int64_t t = api_now_ms(req);
    json_t *jt = json_object_get(body, "timestamp");
    if (jt && !(json_is_string(jt) && strcmp(json_string_value(jt), "*") == 0)) {
        if (!json_is_integer(jt) || json_integer_value(jt) < 0) {
            api_error_field(resp, API_E_BAD_REQUEST, "timestamp",
                            "'timestamp' must be \"*\" (now) or an integer from 0 to %lld (ms)",
                            (long long)TS_MAX_TIMESTAMP);
            return;
        }
        t = json_integer_value(jt);
    } else if (t < 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "timestamp", "the clock is before 1970");
        return;
    }
    if (decr)
        by = -by;
    if (!ts_make_room(srv, req, resp, key, klen, ts_add_bound(req, 1)))
        return;
    ts_group_t g;
    if (!ts_group_open(srv, req, resp, key, klen, API_WRITE, &g))
        return;
    bool created = !g.h.e;
    ts_t *ts = g.h.e ? api_key_value(&g.h) : ts_create(o.retention, o.policy, o.labels, o.nlabels);
    double value = 0;
    ts_sample_t last = { -1, 0 };
    if (ts)
        ts_last(ts, &last);
    core_status_t st = ts ? ts_incrby(ts, t, by, &value) : CORE_NOMEM;
    if (st == CORE_OK && created && !api_key_add(&g.h, &ts_type, ts, KS_NO_EXPIRY))
        st = CORE_NOMEM;
    if (st == CORE_OK && created)
        ts_index_note(srv, key, klen, ts);
    if (st != CORE_OK) {
        if (created)
            ts_free(ts);
        ts_group_close(&g, false);
        if (st == CORE_UNORDERED)
            api_error_field(resp, API_E_BAD_REQUEST, "timestamp",
                            "timestamp %lld is before the newest sample (%lld): %s adds at or after it", (long long)t,
                            (long long)last.ts, decr ? "decrby" : "incrby");
        else if (st == CORE_OVERFLOW)
            api_error_field(resp, API_E_BAD_REQUEST, "by",
                            isnan(last.value) ? "the newest value is NaN: it cannot be incremented"
                                              : "the result would not be a finite number");
        else
            api_error_status(resp, st, NULL, "out of memory adding the sample");
        return;
    }
    ts_group_compact(&g, last.ts, &t, 1, 0, 0);
    ts_group_close(&g, true);
    api_json(resp, 200, json_pack("{s:I,s:f,s:b}", "timestamp", (json_int_t)t, "value", value, "created", created));
}

static void h_ts_incrby(api_server_t *srv, api_req_t *req, api_resp_t *resp) { incrby(srv, req, resp, false); }
static void h_ts_decrby(api_server_t *srv, api_req_t *req, api_resp_t *resp) { incrby(srv, req, resp, true); }

/* PATCH /ts/{key} {"retention_ms","duplicate_policy","labels",...}: TS.ALTER.
 * What is given replaces what was (labels as a whole); nothing else changes. */
static void h_ts_alter(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "retention_ms", "duplicate_policy", "labels", "chunk_size", "encoding", NULL };
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    json_t *body = api_body_object(req, resp, fields);
    if (!body)
        return;
    ts_opts_t o;
    int64_t retention = 0;
    ts_policy_t policy = TS_DUP_BLOCK;
    bool has_ret, has_policy, has_labels;
    if (!api_obj_int(resp, body, "retention_ms", false, 0, INT64_MAX, &retention, &has_ret) ||
        !parse_policy(resp, body, "duplicate_policy", &policy, &has_policy) || !parse_layout(resp, body) ||
        !parse_labels(req, resp, body, &o, &has_labels) || !api_make_room(srv, req, resp))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &ts_type, API_WRITE | API_MUST_EXIST, &h))
        return;
    ts_t *ts = api_key_value(&h);
    if (has_labels && !ts_set_labels(ts, o.labels, o.nlabels)) {
        api_key_close(&h, false);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory setting the labels");
        return;
    }
    if (has_labels)
        ts_index_note(srv, key, klen, ts);
    if (has_ret)
        ts_set_retention(ts, retention);
    if (has_policy)
        ts_set_policy(ts, policy);
    api_key_close(&h, true);
    api_json(resp, 200, json_pack("{s:b}", "altered", true));
}

static void h_ts_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    /* the rules and source with the series they link to: stale links are not shown */
    ts_group_t g;
    if (!ts_group_open(srv, req, resp, key, klen, API_MUST_EXIST | TS_GROUP_SOURCE | TS_GROUP_VISIBLE, &g))
        return;
    const ts_t *ts = api_key_value(&g.h);
    ts_info_t info;
    ts_get_info(ts, &info);
    json_t *labels = json_object();
    for (size_t i = 0; i < ts_label_count(ts); i++) {
        ts_label_t l = ts_label_at(ts, i);
        json_object_set_new(labels, l.name, json_stringn(l.value, l.value_len));
    }
    json_t *o = json_pack("{s:I,s:I,s:o,s:o,s:o,s:I,s:s,s:o,s:I,s:I,s:i,s:s}", "samples", (json_int_t)info.samples,
                          "memory_bytes", (json_int_t)info.memory_bytes, "bytes_per_sample",
                          info.samples ? json_real((double)info.memory_bytes / (double)info.samples) : json_null(),
                          "first_timestamp", info.samples ? json_integer(info.first_ts) : json_null(),
                          "last_timestamp", info.samples ? json_integer(info.last_ts) : json_null(), "retention_ms",
                          (json_int_t)ts_retention(ts), "duplicate_policy", ts_policy_name(ts_policy(ts)), "labels",
                          labels, "chunks", (json_int_t)info.chunks, "compressed_bytes",
                          (json_int_t)info.data_bytes, "chunk_size", TS_CHUNK_BYTES, "encoding", "compressed");
    /* keys outside the token's prefixes are not shown: a rule to one, or a
     * source that is one, is left out as if it were not there */
    json_t *rules = json_array();
    for (size_t i = 0; i < ts_rule_count(ts); i++) {
        if (!ts_group_rule_live(&g, i))
            continue;
        ts_rule_t r = ts_rule_at(ts, i);
        if (!api_auth_key_visible(req, r.dest, r.dest_len))
            continue;
        char aname[32];
        ts_agg_format(r.agg, r.quantile, aname, sizeof(aname));
        json_array_append_new(rules, json_pack("{s:s%,s:s,s:I,s:I}", "dest", r.dest, r.dest_len, "agg", aname,
                                               "bucket_ms", (json_int_t)r.bucket_ms, "align", (json_int_t)r.align));
    }
    size_t slen;
    const char *src = ts_source(ts, &slen);
    if (g.src_seen && !g.src_live)
        src = NULL;
    json_object_set_new(o, "rules", rules);
    json_object_set_new(o, "source",
                        src && api_auth_key_visible(req, src, slen) ? json_stringn(src, slen) : json_null());
    ts_group_close(&g, false);
    api_json(resp, 200, o);
}

/* Opens the series at key for reading (404 when missing).  With `latest`
 * and a series that is the destination of a live rule, also locks the
 * source and hands the source's open bucket to the query as one more sample
 * (LATEST): h then holds both locks (of keys[], which must outlive h), h->e
 * the series. */
static bool ts_open_latest(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                           bool latest, api_key_t *h, ks_key_t keys[2], ts_query_t *q)
{
    char *src = NULL;
    size_t slen = 0;
    if (!api_key_open(srv, req, resp, key, klen, &ts_type, API_MUST_EXIST, h))
        return false;
    if (!latest || !ts_copy_source(api_key_value(h), &src, &slen))
        return true;
    api_key_close(h, false);
    keys[0] = ks_key(srv->ks, key, klen);
    keys[1] = ks_key(srv->ks, src, slen);
    ks_entry_t *de, *se;
    if (!api_keys_lock(srv, req, resp, keys, 2, h)) {
        free(src);
        return false;
    }
    bool ok = api_keys_find(h, 1, NULL, API_READ, NULL, &se) && api_keys_find(h, 0, &ts_type, API_MUST_EXIST, NULL, &de);
    if (ok && ts_dst_live(de, src, slen) && se && ks_entry_type(se) == &ts_type) {
        const ts_t *s = ks_entry_value(se), *d = ks_entry_value(de);
        long i = ts_rule_find(s, key, klen);
        ts_sample_t last = { -1, 0 };
        ts_last(d, &last);
        if (i >= 0) {
            ts_rule_t r = ts_rule_at(s, (size_t)i);
            q->has_extra = ts_rule_open_bucket(s, &r, &q->extra) && q->extra.ts > last.ts;
        }
    }
    h->e = ok ? de : NULL;
    free(src);
    return ok;
}

/* [[ts,value],...] */
static void put_samples(wbuf_t *b, const collected_t *c)
{
    dtext_t last = { 0 };
    wbuf_put_u8(b, '[');
    for (size_t i = 0; i < c->n; i++) {
        wbuf_put_bytes(b, i ? ",[" : "[", i ? 2 : 1);
        put_i64(b, c->s[i].ts);
        wbuf_put_u8(b, ',');
        put_double(b, &last, c->s[i].value);
        for (size_t k = 0; k < c->stride; k++) {   /* agg=min,max: [ts,min,max] */
            wbuf_put_u8(b, ',');
            put_double(b, &last, c->more[i * c->stride + k]);
        }
        wbuf_put_u8(b, ']');
    }
    wbuf_put_u8(b, ']');
}

static void range(api_server_t *srv, api_req_t *req, api_resp_t *resp, bool reverse)
{
    const char *key;
    size_t klen;
    ts_query_t q;
    ts_aggs_t aggs;
    int64_t *fts;
    if (!api_path_key(req, resp, &key, &klen) || !parse_range(req, resp, &q, &aggs, &fts, false))
        return;
    q.reverse = reverse;
    q.max_results = TS_MAX_EMPTY_BUCKETS;
    bool latest = false;
    if (!api_query_bool(req, resp, "latest", &latest, NULL)) {
        free(fts);
        return;
    }
    collected_t c = { 0 };
    if ((c.capped = answer_rows(srv, &c.max)) && c.max < q.max_results)
        q.max_results = c.max ? c.max : 1;   /* empty buckets past the answer's cap: refused before they are made */
    api_key_t h;
    ks_key_t keys[2];
    if (!ts_open_latest(srv, req, resp, key, klen, latest, &h, keys, &q)) {
        free(fts);
        return;
    }
    core_status_t st = collect_range(api_key_value(&h), &q, &c);
    api_key_close(&h, false);
    free(fts);
    if (c.over || (st == CORE_LIMIT && c.capped && q.max_results < TS_MAX_EMPTY_BUCKETS)) {
        collected_free(&c);
        too_many_rows(srv, req, resp, c.max);
        return;
    }
    if (st == CORE_LIMIT) {
        collected_free(&c);
        api_error_field(resp, API_E_BAD_REQUEST, "empty",
                        "empty=true would report more than %d buckets: narrow the range, widen bucket_ms or set count",
                        TS_MAX_EMPTY_BUCKETS);
        return;
    }
    if (st != CORE_OK) {
        collected_free(&c);
        api_error_status(resp, st, NULL, "out of memory running the query");
        return;
    }
    /* formatted outside the shard lock */
    wbuf_t b = WBUF_INIT;
    wbuf_reserve(&b, 16 + c.n * 32);
    wbuf_put_bytes(&b, "{\"samples\":", 11);
    put_samples(&b, &c);
    wbuf_put_u8(&b, '}');
    collected_free(&c);
    answer(resp, 200, &b);
}

static void h_ts_range(api_server_t *srv, api_req_t *req, api_resp_t *resp) { range(srv, req, resp, false); }
static void h_ts_revrange(api_server_t *srv, api_req_t *req, api_resp_t *resp) { range(srv, req, resp, true); }

static void h_ts_delete_range(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "from", "to", NULL };
    const char *key;
    size_t klen;
    int64_t from, to;
    bool ex;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params))
        return;
    if (!api_query_get(req, "from", NULL) || !api_query_get(req, "to", NULL)) {
        const char *f = api_query_get(req, "from", NULL) ? "to" : "from";
        api_error_field(resp, API_E_BAD_REQUEST, f, "missing query parameter '%s' ('-' and '+' for the ends)", f);
        return;
    }
    if (!parse_bound(req, resp, "from", 0, &from, &ex) || !parse_bound(req, resp, "to", TS_MAX_TIMESTAMP, &to, &ex))
        return;
    ts_group_t g;
    if (!ts_group_open(srv, req, resp, key, klen, API_WRITE | API_MUST_EXIST, &g))
        return;
    ts_t *ts = api_key_value(&g.h);
    /* With live rules, a deletion reaching before the retention window is
     * refused, as RedisTimeSeries refuses it: the destination's bucket was
     * built from samples the source has trimmed since, and recomputing it
     * from what is left would lose them.  A replayed deletion was accepted
     * when served (releases before this check accepted these too, and a
     * refused one is never journaled), so replay applies it as it was. */
    bool beyond = false;
    for (size_t i = 0; !req->replay && i < ts_rule_count(ts) && !beyond; i++) {
        ts_rule_t r = ts_rule_at(ts, i);
        beyond = ts_group_rule_live(&g, i) &&
                 (ts_delete_beyond_retention(ts, NULL, from) || ts_delete_beyond_retention(ts, &r, from));
    }
    if (beyond) {
        ts_info_t info;
        ts_get_info(ts, &info);
        ts_group_close(&g, false);
        api_error_field(resp, API_E_BAD_REQUEST, "from",
                        "the series has compaction rules: deleting samples or compaction buckets beyond its "
                        "retention period (before %lld) is not possible",
                        (long long)(info.last_ts - ts_retention(ts)));
        return;
    }
    /* from after to deletes nothing (TS.DEL answers 0) */
    int64_t deleted = from > to ? 0 : ts_delete_range(ts, from, to);
    if (deleted > 0)
        ts_group_compact(&g, -1, NULL, 0, from, to);
    ts_group_close(&g, deleted > 0);
    if (deleted < 0)
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory deleting samples");
    else
        api_json(resp, 200, json_pack("{s:I}", "deleted", (json_int_t)deleted));
}

/* ------------------------------------------------------------------------ */
/* Queries by labels (TS.QUERYINDEX, TS.MGET, TS.MRANGE, TS.MREVRANGE)      */
/* ------------------------------------------------------------------------ */

/* The `filter` parameters (at least one, and one of them l=v or l=(a,b)). */
static ts_matcher_t *parse_filters(const api_req_t *req, api_resp_t *resp, size_t *n)
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
    bool positive = false;
    for (int i = 0; i < req->nparams; i++) {
        if (strcmp(req->params[i].name, "filter") != 0)
            continue;
        const char *why;
        if (!ts_matcher_parse(req->params[i].value, req->params[i].vlen, &m[k], &why)) {
            api_error_field(resp, API_E_BAD_REQUEST, "filter", "filter '%.64s': %s", req->params[i].value, why);
            free(m);
            return NULL;
        }
        positive |= ts_matcher_positive(&m[k]);
        k++;
    }
    if (!positive) {
        api_error_field(resp, API_E_BAD_REQUEST, "filter",
                        "at least one filter must select series: label=value or label=(a,b)");
        free(m);
        return NULL;
    }
    *n = k;
    return m;
}

typedef struct keylist {
    char **k;
    size_t *len;
    size_t n, cap;
    const ts_matcher_t *m;
    size_t nm;
    bool oom;
    ts_index_t *ix;          /* a scan re-adds what it sees */
    const api_req_t *req;    /* whose token's prefixes bound the selection (api/auth.h) */
} keylist_t;

/* Appends a copy of key. */
static void keylist_push(keylist_t *l, const char *key, size_t len);

static void keylist_visit(void *ud, ks_entry_t *e)
{
    keylist_t *l = ud;
    if (l->oom || ks_entry_type(e) != &ts_type)
        return;
    size_t len;
    const char *key = ks_entry_key(e, &len);
    if (l->ix)
        ts_index_add(l->ix, key, len, ks_entry_value(e));   /* (a failure: the next query scans again) */
    if (ts_matches(ks_entry_value(e), l->m, l->nm) && api_auth_key_visible(l->req, key, len))
        keylist_push(l, key, len);
}

static void keylist_push(keylist_t *l, const char *key, size_t len)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 64;
        char **nk = realloc(l->k, ncap * sizeof(*nk));
        size_t *nl = nk ? realloc(l->len, ncap * sizeof(*nl)) : NULL;
        if (nk)
            l->k = nk;
        if (!nl) {
            l->oom = true;
            return;
        }
        l->len = nl;
        l->cap = ncap;
    }
    char *c = malloc(len + 1);
    if (!c) {
        l->oom = true;
        return;
    }
    memcpy(c, key, len);
    c[len] = '\0';
    l->k[l->n] = c;
    l->len[l->n++] = len;
}

static void keylist_free(keylist_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->k[i]);
    free(l->k);
    free(l->len);
}

static int cmp_keys(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* The candidates of the index, each verified under its lock: kept when it
 * is a series matching every filter, forgotten by the index when it no
 * longer has the pair it was listed under. */
static void ts_select_indexed(api_server_t *srv, api_req_t *req, ts_index_t *ix, keylist_t *l)
{
    const ts_matcher_t *best = NULL;
    size_t best_n = SIZE_MAX;
    for (size_t k = 0; k < l->nm; k++)
        if (ts_matcher_positive(&l->m[k])) {
            size_t n = ts_index_count(ix, &l->m[k]);
            if (n < best_n) {
                best_n = n;
                best = &l->m[k];
            }
        }
    char **cand;
    size_t nc;
    if (!ts_index_candidates(ix, best, &cand, &nc)) {
        l->oom = true;
        return;
    }
    for (size_t i = 0; i < nc; i++) {
        api_key_t h;
        api_resp_t scratch;
        api_resp_init(&scratch);
        size_t len = strlen(cand[i]);
        /* a series outside the token's prefixes is not there for it (as in GET /keys) */
        if (api_auth_key_visible(req, cand[i], len) &&
            api_key_open(srv, req, &scratch, cand[i], len, NULL, API_READ, &h)) {
            const ts_t *ts = h.e && ks_entry_type(h.e) == &ts_type ? api_key_value(&h) : NULL;
            bool listed = ts && ts_matches(ts, best, 1);
            if (listed && ts_matches(ts, l->m, l->nm))
                keylist_push(l, cand[i], len);
            api_key_close(&h, false);
            if (!listed)
                ts_index_forget(ix, best, cand[i], len);
        }
        api_resp_release(&scratch);
        free(cand[i]);
    }
    free(cand);
}

/* The keys of the series matching m[0..nm), sorted: from the label index
 * when it can be trusted, else by a scan of every shard under its lock
 * (which indexes what it sees).  A series is matched as it is when it is
 * looked at. */
static bool ts_select(api_server_t *srv, api_req_t *req, api_resp_t *resp, const ts_matcher_t *m, size_t nm,
                      keylist_t *l)
{
    memset(l, 0, sizeof(*l));
    l->m = m;
    l->nm = nm;
    l->req = req;
    ts_index_t *ix = ts_index_of(srv->ks);
    if (ix && ts_index_usable(ix)) {
        ts_select_indexed(srv, req, ix, l);
    } else {
        if (ix)
            ts_index_scan_begin(ix);
        l->ix = ix;
        for (unsigned s = 0; s < ks_shard_count(srv->ks) && !l->oom; s++) {
            ks_shard_t *sh = ks_shard_at(srv->ks, s);
            uint64_t cursor = 0;
            ks_shard_lock(sh);
            do
                ks_shard_scan(srv->ks, sh, &cursor, 1024, api_now_ms(req), keylist_visit, l);
            while (cursor != 0 && !l->oom);
            ks_shard_unlock(sh);
        }
        if (ix)
            ts_index_scan_end(ix, !l->oom);
    }
    if (l->oom) {
        keylist_free(l);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory selecting series");
        return false;
    }
    /* a scan may visit an entry twice while its table grows: once each */
    if (l->n)
        qsort(l->k, l->n, sizeof(*l->k), cmp_keys);
    size_t u = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (u && strcmp(l->k[u - 1], l->k[i]) == 0) {
            free(l->k[i]);
            continue;
        }
        l->len[u] = strlen(l->k[i]);
        l->k[u++] = l->k[i];
    }
    l->n = u;
    return true;
}

/* GET /mts/index?filter=...: TS.QUERYINDEX. */
/* An answer listing the keys of l, each with `each` more bytes: what
 * --max-answer-size is checked against before it is built. */
static uint64_t keylist_answer_bytes(const keylist_t *l, uint64_t each)
{
    uint64_t bytes = 16;
    for (size_t i = 0; i < l->n; i++)
        bytes += api_json_string_max(l->len[i]) + each;
    return bytes;
}

static void h_ts_queryindex(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "filter", NULL };
    size_t nm;
    ts_matcher_t *m;
    keylist_t l;
    if (!api_query_allow(req, resp, params) || !(m = parse_filters(req, resp, &nm)))
        return;
    bool ok = ts_select(srv, req, resp, m, nm, &l);
    free(m);
    if (!ok)
        return;
    if (!api_answer_fits(srv, req, resp, keylist_answer_bytes(&l, 1), "select fewer series (more filters)")) {
        keylist_free(&l);
        return;
    }
    json_t *keys = json_array();
    for (size_t i = 0; i < l.n; i++)
        json_array_append_new(keys, json_stringn(l.k[i], l.len[i]));
    keylist_free(&l);
    api_json(resp, 200, json_pack("{s:o}", "keys", keys));
}

/* withlabels / selected_labels: which labels a multi-series answer shows. */
typedef struct labelsel {
    bool all;
    const api_param_t **names;   /* selected_labels */
    size_t n;
} labelsel_t;

static bool parse_labelsel(const api_req_t *req, api_resp_t *resp, labelsel_t *sel)
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
    sel->names = malloc(n * sizeof(*sel->names));
    if (!sel->names) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return false;
    }
    for (int i = 0; i < req->nparams; i++)
        if (strcmp(req->params[i].name, "selected_labels") == 0)
            sel->names[sel->n++] = &req->params[i];
    return true;
}

/* The labels shown for a series (NULL: none asked); under its lock. */
static json_t *labels_json(const ts_t *ts, const labelsel_t *sel)
{
    if (!sel->all && !sel->n)
        return NULL;
    json_t *o = json_object();
    if (sel->all) {
        for (size_t i = 0; i < ts_label_count(ts); i++) {
            ts_label_t lb = ts_label_at(ts, i);
            json_object_set_new(o, lb.name, json_stringn(lb.value, lb.value_len));
        }
        return o;
    }
    for (size_t i = 0; i < sel->n; i++) {
        size_t vl;
        const char *v = ts_label_get(ts, sel->names[i]->value, sel->names[i]->vlen, &vl);
        json_object_set_new(o, sel->names[i]->value, v ? json_stringn(v, vl) : json_null());
    }
    return o;
}

/* One series of a multi-series answer, read under its lock(s): still a
 * series that matches (else *gone), its samples per q, its labels. */
static core_status_t ts_read_one(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                                 bool latest, ts_query_t *q, const ts_matcher_t *m, size_t nm, const labelsel_t *sel,
                                 collected_t *c, json_t **labels, char **group, bool *gone, const char *groupby)
{
    api_key_t h;
    ks_key_t keys[2];
    q->has_extra = false;
    *gone = true;
    *labels = NULL;
    if (group)
        *group = NULL;
    api_resp_t scratch;   /* a series gone meanwhile is skipped, not answered */
    api_resp_init(&scratch);
    (void)resp;
    if (!ts_open_latest(srv, req, &scratch, key, klen, latest, &h, keys, q)) {
        api_resp_release(&scratch);
        return CORE_OK;
    }
    api_resp_release(&scratch);
    const ts_t *ts = api_key_value(&h);
    core_status_t st = CORE_OK;
    if (ts && ts_matches(ts, m, nm)) {
        size_t gl = 0;
        const char *gv = groupby ? ts_label_get(ts, groupby, strlen(groupby), &gl) : NULL;
        if (!groupby || gv) {
            *gone = false;
            st = collect_range(ts, q, c);
            *labels = labels_json(ts, sel);
            if (gv && !(*group = strndup(gv, gl)))
                st = CORE_NOMEM;
        }
    }
    api_key_close(&h, false);
    return st;
}

/* GET /mts/get?filter=...&withlabels=&selected_labels=&latest=: TS.MGET. */
static void h_ts_mget(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "filter", "withlabels", "selected_labels", "latest", NULL };
    size_t nm;
    ts_matcher_t *m;
    keylist_t l;
    labelsel_t sel;
    bool latest = false;
    if (!api_query_allow(req, resp, params) || !api_query_bool(req, resp, "latest", &latest, NULL) ||
        !parse_labelsel(req, resp, &sel))
        return;
    if (!(m = parse_filters(req, resp, &nm))) {
        free(sel.names);
        return;
    }
    if (!ts_select(srv, req, resp, m, nm, &l)) {
        free(m);
        free(sel.names);
        return;
    }
    if (!api_answer_fits(srv, req, resp, keylist_answer_bytes(&l, 32 + TS_ROW_BOUND),
                         "select fewer series (more filters)")) {
        keylist_free(&l);
        free(m);
        free(sel.names);
        return;
    }
    json_t *series = json_array();
    core_status_t st = CORE_OK;
    for (size_t i = 0; i < l.n && st == CORE_OK; i++) {
        /* the newest sample: the last of a reverse range of one */
        ts_query_t q = { .from = 0, .to = TS_MAX_TIMESTAMP, .reverse = true, .count = 1 };
        collected_t c = { 0 };
        json_t *labels;
        bool gone;
        st = ts_read_one(srv, req, resp, l.k[i], l.len[i], latest, &q, m, nm, &sel, &c, &labels, NULL, &gone, NULL);
        if (st == CORE_OK && !gone) {
            json_t *one = json_pack("{s:s%}", "key", l.k[i], l.len[i]);
            if (labels)
                json_object_set_new(one, "labels", labels);
            json_t *sample = json_null();
            if (c.n) {
                double v = c.s[0].value;
                sample = json_pack("[I,o]", (json_int_t)c.s[0].ts,
                                   isfinite(v) ? json_real(v) : json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"));
            }
            json_object_set_new(one, "sample", sample);
            json_array_append_new(series, one);
        } else if (labels) {
            json_decref(labels);
        }
        free(c.s);
    }
    keylist_free(&l);
    free(m);
    free(sel.names);
    if (st != CORE_OK) {
        json_decref(series);
        api_error_status(resp, st, NULL, "out of memory running the query");
        return;
    }
    api_json(resp, 200, json_pack("{s:o}", "series", series));
}

/* A series's answer, kept until every series is read. */
typedef struct mseries {
    const char *key;
    size_t klen;
    collected_t c;
    json_t *labels;
    char *group;
} mseries_t;

static int cmp_group(const void *a, const void *b)
{
    const mseries_t *x = a, *y = b;
    int r = strcmp(x->group, y->group);
    return r ? r : strcmp(x->key, y->key);
}

/* A sample of a group, with the position of its series (the group's key order). */
typedef struct gsample {
    int64_t ts;
    size_t at;
    double value;
} gsample_t;

static int cmp_gsample(const void *a, const void *b)
{
    const gsample_t *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* GROUPBY label REDUCE r: the series of one group [g0, g1) (each read in
 * time order, without count) merged, one value per timestamp (reduced in the
 * series' key order), into *out, newest first when reverse, at most `count`
 * values (0: all): RedisTimeSeries applies COUNT to the group's answer. */
static bool reduce_group(const mseries_t *ms, size_t g0, size_t g1, ts_agg_t r, bool reverse, uint64_t count,
                         collected_t *out)
{
    size_t total = 0;
    for (size_t i = g0; i < g1; i++)
        total += ms[i].c.n;
    gsample_t *all = malloc((total ? total : 1) * sizeof(*all));
    double *vals = malloc((total ? total : 1) * sizeof(*vals));
    if (!all || !vals) {
        free(all);
        free(vals);
        return false;
    }
    size_t k = 0;
    for (size_t i = g0; i < g1; i++)
        for (size_t j = 0; j < ms[i].c.n; j++)
            all[k++] = (gsample_t){ ms[i].c.s[j].ts, i, ms[i].c.s[j].value };
    qsort(all, k, sizeof(*all), cmp_gsample);
    bool ok = true;
    for (size_t n = 0; n < k && ok && (!count || out->n < count);) {
        /* the runs of one timestamp, taken from the newest when reverse */
        size_t i = reverse ? k - 1 - n : n, j = i, nv = 0;
        if (reverse) {
            while (j > 0 && all[j - 1].ts == all[i].ts)
                j--;
            for (size_t x = j; x <= i; x++)
                vals[nv++] = all[x].value;
        } else {
            while (j < k && all[j].ts == all[i].ts)
                vals[nv++] = all[j++].value;
        }
        ok = collect(out, all[i].ts, ts_reduce(r, vals, nv));
        n += nv;
    }
    free(all);
    free(vals);
    return ok;
}

static void mrange(api_server_t *srv, api_req_t *req, api_resp_t *resp, bool reverse)
{
    ts_query_t q0;
    ts_aggs_t aggs;
    int64_t *fts;
    if (!parse_range(req, resp, &q0, &aggs, &fts, true))
        return;
    q0.reverse = reverse;
    q0.max_results = TS_MAX_EMPTY_BUCKETS;
    bool latest = false;
    labelsel_t sel = { 0 };
    const char *groupby = NULL, *reduce = NULL;
    ts_agg_t red = TS_AGG_NONE;
    size_t nm = 0;
    ts_matcher_t *m = NULL;
    keylist_t l = { 0 };
    mseries_t *ms = NULL;
    size_t nms = 0;
    core_status_t st = CORE_OK;
    size_t glen, rlen;
    bool exclude_empty = false;
    if (!api_query_bool(req, resp, "latest", &latest, NULL) || !parse_labelsel(req, resp, &sel) ||
        !api_query_string(req, resp, "groupby", false, &groupby, &glen) ||
        !api_query_string(req, resp, "reduce", false, &reduce, &rlen) ||
        !api_query_bool(req, resp, "exclude_empty", &exclude_empty, NULL))
        goto out;
    if (exclude_empty && groupby) {   /* (RedisTimeSeries: "EXCLUDEEMPTY is not allowed with GROUPBY") */
        api_error_field(resp, API_E_BAD_REQUEST, "exclude_empty", "'exclude_empty' cannot be used with 'groupby'");
        goto out;
    }
    if (!groupby != !reduce) {
        api_error_field(resp, API_E_BAD_REQUEST, groupby ? "reduce" : "groupby", "'groupby' and 'reduce' go together");
        goto out;
    }
    if (groupby && q0.naggs > 1) {   /* (as RedisTimeSeries: one value per series to reduce) */
        api_error_field(resp, API_E_BAD_REQUEST, "agg", "'groupby' takes one aggregation, not several");
        goto out;
    }
    if (reduce && (!ts_agg_parse(reduce, &red) || red == TS_AGG_TWA || red == TS_AGG_FIRST || red == TS_AGG_LAST)) {
        api_error_field(resp, API_E_BAD_REQUEST, "reduce",
                        "'reduce' must be avg, sum, min, max, range, count, std.p, std.s, var.p, var.s, countNaN or "
                        "countAll");
        goto out;
    }
    if (!(m = parse_filters(req, resp, &nm)) || !ts_select(srv, req, resp, m, nm, &l))
        goto out;
    ms = calloc(l.n ? l.n : 1, sizeof(*ms));
    if (!ms) {
        st = CORE_NOMEM;
        goto out;
    }
    /* the series share one answer: each reads at most the rows the ones
     * before it left under --max-answer-size (its key counted as rows) */
    size_t rows_left = 0;
    bool capped = answer_rows(srv, &rows_left), over = false;
    for (size_t i = 0; i < l.n && st == CORE_OK; i++) {
        ts_query_t q = q0;
        if (groupby) {   /* the group's answer is reversed and counted, not each series' */
            q.reverse = false;
            q.count = 0;
        }
        bool gone;
        mseries_t *x = &ms[nms];
        size_t head = (size_t)(api_json_string_max(l.len[i]) / TS_ROW_BOUND) + 1;
        if (capped) {
            rows_left = rows_left > head ? rows_left - head : 0;
            x->c.capped = true;
            x->c.max = rows_left;
            if (rows_left < q.max_results)
                q.max_results = rows_left ? rows_left : 1;
        }
        st = ts_read_one(srv, req, resp, l.k[i], l.len[i], latest, &q, m, nm, &sel, &x->c, &x->labels,
                         groupby ? &x->group : NULL, &gone, groupby);
        x->key = l.k[i];
        x->klen = l.len[i];
        over = x->c.over || (st == CORE_LIMIT && capped && q.max_results < TS_MAX_EMPTY_BUCKETS);
        size_t used = x->c.n * (1 + x->c.stride);   /* in TS_ROW_BOUND units, as collect counts */
        if (capped)
            rows_left -= used < rows_left ? used : rows_left;
        if (!gone)
            nms++;
        else
            collected_free(&x->c);
        if (over) {
            st = CORE_OK;
            break;
        }
    }
    if (over) {
        size_t rows;
        answer_rows(srv, &rows);
        too_many_rows(srv, req, resp, rows);
        goto out;
    }
    if (st != CORE_OK)
        goto out;
    wbuf_t b = WBUF_INIT;
    wbuf_put_bytes(&b, "{\"series\":[", 11);
    if (!groupby) {
        for (size_t i = 0, shown = 0; i < nms; i++) {
            if (exclude_empty && ms[i].c.n == 0)
                continue;   /* EXCLUDEEMPTY: a series with nothing to answer is left out */
            json_t *k = json_pack("{s:s%}", "key", ms[i].key, ms[i].klen);
            if (ms[i].labels)
                json_object_set(k, "labels", ms[i].labels);
            char *t = json_dumps(k, JSON_COMPACT | JSON_PRESERVE_ORDER);
            json_decref(k);
            if (!t) {
                b.oom = true;
                break;
            }
            if (shown++)
                wbuf_put_u8(&b, ',');
            wbuf_put_bytes(&b, t, strlen(t) - 1);   /* {"key":..,"labels":..  then the samples */
            free(t);
            wbuf_put_bytes(&b, ",\"samples\":", 11);
            put_samples(&b, &ms[i].c);
            wbuf_put_u8(&b, '}');
        }
    } else {
        qsort(ms, nms, sizeof(*ms), cmp_group);
        for (size_t g0 = 0, ng = 0; g0 < nms; ng++) {
            size_t g1 = g0 + 1;
            while (g1 < nms && strcmp(ms[g1].group, ms[g0].group) == 0)
                g1++;
            collected_t c = { 0 };
            if (!reduce_group(ms, g0, g1, red, reverse, q0.count, &c)) {
                b.oom = true;
                break;
            }
            size_t slen = 0;
            for (size_t i = g0; i < g1; i++)
                slen += ms[i].klen + 1;
            char *src = malloc(slen + 1), *p = src;
            for (size_t i = g0; src && i < g1; i++) {
                memcpy(p, ms[i].key, ms[i].klen);
                p += ms[i].klen;
                *p++ = ',';
            }
            if (src)
                p[-1] = '\0';
            /* the group's labels, shown as a series' are: all with
             * withlabels, the ones named with selected_labels, else none */
            json_t *all = json_object();
            json_object_set_new(all, groupby, json_string(ms[g0].group));
            json_object_set_new(all, "__reducer__", json_string(ts_agg_name(red)));
            json_object_set_new(all, "__source__", src ? json_string(src) : json_null());
            free(src);
            json_t *labels = NULL;
            if (sel.all) {
                labels = json_incref(all);
            } else if (sel.n) {
                labels = json_object();
                for (size_t j = 0; j < sel.n; j++) {
                    json_t *v = json_object_get(all, sel.names[j]->value);
                    json_object_set(labels, sel.names[j]->value, v ? v : json_null());
                }
            }
            json_decref(all);
            char *gk = NULL;
            if (asprintf(&gk, "%s=%s", groupby, ms[g0].group) < 0)
                gk = NULL;
            json_t *k = json_pack("{s:s?}", "key", gk);
            if (k && labels)
                json_object_set_new(k, "labels", labels);
            else
                json_decref(labels);
            free(gk);
            char *t = k ? json_dumps(k, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
            json_decref(k);
            if (!t) {
                free(c.s);
                b.oom = true;
                break;
            }
            if (ng)
                wbuf_put_u8(&b, ',');
            wbuf_put_bytes(&b, t, strlen(t) - 1);
            free(t);
            wbuf_put_bytes(&b, ",\"samples\":", 11);
            put_samples(&b, &c);
            wbuf_put_u8(&b, '}');
            free(c.s);
            g0 = g1;
        }
    }
    wbuf_put_bytes(&b, "]}", 2);
    answer(resp, 200, &b);
out:
    if (st == CORE_LIMIT)
        api_error_field(resp, API_E_BAD_REQUEST, "empty",
                        "empty=true would report more than %d buckets for a series: narrow the range, widen bucket_ms "
                        "or set count",
                        TS_MAX_EMPTY_BUCKETS);
    else if (st != CORE_OK)
        api_error_status(resp, st, NULL, "out of memory running the query");
    for (size_t i = 0; i < nms; i++) {
        collected_free(&ms[i].c);
        json_decref(ms[i].labels);
        free(ms[i].group);
    }
    free(ms);
    keylist_free(&l);
    free(m);
    free(sel.names);
    free(fts);
}

static void h_ts_mrange(api_server_t *srv, api_req_t *req, api_resp_t *resp) { mrange(srv, req, resp, false); }
static void h_ts_mrevrange(api_server_t *srv, api_req_t *req, api_resp_t *resp) { mrange(srv, req, resp, true); }

/* ------------------------------------------------------------------------ */
/* Compaction rules                                                         */
/* ------------------------------------------------------------------------ */

/* The source of the series at key (a copy in *buf), read under its lock. */
static bool ts_peek_source(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                           char **buf, size_t *len)
{
    api_key_t h;
    *buf = NULL;
    *len = 0;
    if (!api_key_open(srv, req, resp, key, klen, NULL, API_READ, &h))
        return false;
    if (h.e && ks_entry_type(h.e) == &ts_type)
        ts_copy_source(api_key_value(&h), buf, len);
    api_key_close(&h, false);
    return true;
}

/* POST /ts/{key}/rules {"dest":"k","agg":"avg","bucket_ms":60000,"align":0}:
 * TS.CREATERULE key dest AGGREGATION agg bucket_ms align. */
/*
 * A rule keeps the generation of the rules that created it (ts_rule_t.gen).
 * A live request creates a generation-2 rule and is journaled with
 * "generation":2 added to its body; a replayed record carries its
 * generation, and one without (journaled before rule generations) creates a
 * generation-1 rule, as it did when it was served.  Clients cannot send it.
 */
static void h_ts_rule_create(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "dest", "agg", "bucket_ms", "align", NULL };
    static const char *const replayed[] = { "dest", "agg", "bucket_ms", "align", "generation", NULL };
    const char *key, *dest, *aggs = NULL;
    size_t klen, dlen;
    int64_t bucket = 0, align = 0, gen = TS_RULE_GEN_2;
    bool has_gen = false;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    json_t *body = api_body_object(req, resp, req->replay ? replayed : fields);
    ts_agg_t agg;
    if (!body || !api_obj_key(resp, body, "dest", true, &dest, &dlen) ||
        !api_obj_string(resp, body, "agg", true, &aggs, NULL) ||
        !api_obj_int(resp, body, "bucket_ms", true, 1, INT64_MAX, &bucket, NULL) ||
        !api_obj_int(resp, body, "align", false, 0, INT64_MAX, &align, NULL) ||
        !api_obj_int(resp, body, "generation", false, TS_RULE_GEN_1, TS_RULE_GEN_2, &gen, &has_gen))
        return;
    if (req->replay && !has_gen)
        gen = TS_RULE_GEN_1;
    /* the record journaled: the body with its generation (room secured first) */
    char *canon = NULL, *jpath = NULL;
    if (!req->replay) {
        json_t *c = json_deep_copy(body);
        if (c)
            json_object_set_new(c, "generation", json_integer(gen));
        canon = c ? json_dumps(c, JSON_COMPACT) : NULL;
        json_decref(c);
        jpath = strndup(req->path, req->path_len);
        if (!canon || !jpath) {
            free(canon);
            free(jpath);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            return;
        }
        uint64_t bound = JOURNAL_REQUEST_FIXED + 2 * (uint64_t)req->path_len + strlen(canon) + 64;
        if (!api_journal_reserve_more(srv, req, resp, bound)) {
            free(canon);
            free(jpath);
            return;
        }
    }
    double quant;
    if (!ts_agg_parse_any(aggs, &agg, &quant)) {
        api_error_field(resp, API_E_BAD_REQUEST, "agg",
                        "unknown aggregation '%.32s' (avg, sum, min, max, range, count, first, last, std.p, std.s, "
                        "var.p, var.s, twa, countNaN, countAll, p0 to p100)",
                        aggs);
        goto out;
    }
    if (dlen == klen && memcmp(dest, key, klen) == 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "dest", "the source and the destination must be different series");
        goto out;
    }
    /* both keys allowed before room is made for them (the sources their
     * rules name are checked when locked) */
    ks_key_t named[2] = { ks_key(srv->ks, key, klen), ks_key(srv->ks, dest, dlen) };
    if (!api_keys_allowed(srv, req, resp, named, 2) || !api_make_room(srv, req, resp))
        goto out;
    for (int attempt = 0; attempt < 8; attempt++) {
        /* the destination with its links, the series and the source it
         * names, all locked: their rules decide what is live */
        char *b = NULL;
        size_t blen;
        if (!ts_peek_source(srv, req, resp, key, klen, &b, &blen))
            goto out;
        ks_key_t extra[2] = { ks_key(srv->ks, key, klen), b ? ks_key(srv->ks, b, blen) : ks_key(srv->ks, key, klen) };
        ts_group_t g;
        ks_entry_t *se, *be = NULL, *de;
        if (!ts_group_open_with(srv, req, resp, dest, dlen, API_WRITE | API_MUST_EXIST | TS_GROUP_SOURCE, extra,
                                b ? 2 : 1, &g)) {
            free(b);
            goto out;
        }
        de = g.h.e;
        if ((b && !api_keys_find(&g.h, g.extra_at + 1, NULL, API_READ, NULL, &be)) ||
            !api_keys_find(&g.h, g.extra_at, &ts_type, API_WRITE | API_MUST_EXIST, NULL, &se)) {
            free(g.names);
            free(b);
            goto out;
        }
        ts_t *src = ks_entry_value(se), *dst = ks_entry_value(de);
        char *b2 = NULL;
        size_t b2len = 0;
        ts_copy_source(src, &b2, &b2len);
        bool same = !b == !b2 && (!b || (blen == b2len && memcmp(b, b2, blen) == 0));
        free(b2);
        if (!same) {   /* changed between the look and the lock: again */
            ts_group_close(&g, false);
            free(b);
            continue;
        }
        size_t alen = 0;
        const char *a = ts_source(dst, &alen);
        /* a rule from the series to dest, live when dest names the series;
         * a live source of dest other than the series; a live source of the
         * series (it is a destination); live rules of dest */
        long stale = ts_rule_find(src, dest, dlen);
        bool exists = stale >= 0 && ts_dst_live(de, key, klen);
        bool dst_taken = !exists && g.src_live && !(alen == klen && memcmp(a, key, klen) == 0);
        bool src_is_dst = b && ts_has_rule_to(be, key, klen);
        bool dst_rules = false;
        for (size_t i = 0; i < ts_rule_count(dst); i++)
            dst_rules |= g.dst[i] != NULL;
        if (exists || dst_taken) {
            ts_group_close(&g, false);
            api_error_field(resp, API_E_EXISTS, "dest", "'%.*s' is already the destination of a rule (from '%.*s')",
                            (int)(dlen > 200 ? 200 : dlen), dest,
                            (int)(dst_taken ? (alen > 200 ? 200 : alen) : klen > 200 ? 200 : klen), dst_taken ? a : key);
        } else if (src_is_dst || dst_rules) {
            ts_group_close(&g, false);
            api_error_field(resp, API_E_BAD_REQUEST, src_is_dst ? "key" : "dest",
                            src_is_dst ? "the source is itself the destination of a rule: compactions do not chain"
                                       : "the destination has rules of its own: compactions do not chain");
        } else if (ts_rule_count(src) - (stale >= 0) >= TS_MAX_RULES) {
            ts_group_close(&g, false);
            api_error_field(resp, API_E_BAD_REQUEST, "dest", "a series has at most %d rules", TS_MAX_RULES);
        } else {
            /* a stale rule to dest (dest deleted and created again) goes:
             * RedisTimeSeries dropped it with the old dest */
            ts_sample_t newest;
            ts_rule_t r = { dest, dlen, agg, bucket, align, quant, (uint8_t)gen, -1 };
            if (gen == TS_RULE_GEN_2 && ts_last(src, &newest))
                r.since = newest.ts;   /* the samples before it are not the rule's (RedisTimeSeries) */
            bool added = ts_rule_add(src, &r);
            if (!added || !ts_set_source(dst, key, klen)) {
                if (added)
                    ts_rule_remove(src, ts_rule_count(src) - 1);
                ts_group_close(&g, false);
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory adding the rule");
            } else {
                if (stale >= 0)
                    ts_rule_remove(src, (size_t)stale);
                ks_entry_changed(srv->ks, de);
                ks_entry_changed(srv->ks, se);
                if (!req->replay)
                    api_journal_as(srv, req, resp, API_POST, jpath, NULL, "application/json", canon, strlen(canon));
                ts_group_close(&g, false);   /* (journaled just above) */
                api_json(resp, 201, json_pack("{s:b}", "created", true));
            }
        }
        free(b);
        goto out;
    }
    api_error(resp, API_E_UNAVAILABLE, "the series kept changing; try again");
out:
    free(canon);
    free(jpath);
}

/* DELETE /ts/{key}/rules?dest=k: TS.DELETERULE key dest. */
static void h_ts_rule_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "dest", NULL };
    const char *key, *dest;
    size_t klen, dlen;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_string(req, resp, "dest", true, &dest, &dlen))
        return;
    ks_key_t keys[2] = { ks_key(srv->ks, key, klen), ks_key(srv->ks, dest, dlen) };
    api_key_t h;
    ks_entry_t *de, *se;
    if (!api_keys_lock(srv, req, resp, keys, 2, &h) || !api_keys_find(&h, 1, NULL, API_WRITE, NULL, &de) ||
        !api_keys_find(&h, 0, &ts_type, API_WRITE | API_MUST_EXIST, NULL, &se))
        return;
    ts_t *src = ks_entry_value(se);
    long i = ts_rule_find(src, dest, dlen);
    if (i < 0 || !ts_dst_live(de, key, klen)) {   /* a stale rule is already gone for RedisTimeSeries */
        api_key_close(&h, false);
        api_error_field(resp, API_E_NOT_FOUND, "dest", "no rule writes from this series to '%.*s'",
                        (int)(dlen > 200 ? 200 : dlen), dest);
        return;
    }
    ts_rule_remove(src, (size_t)i);
    ts_set_source(ks_entry_value(de), NULL, 0);
    ks_entry_changed(srv->ks, de);
    api_key_close(&h, true);
    api_json(resp, 200, json_pack("{s:b}", "deleted", true));
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/ts/{key}",          h_ts_put, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/ts/{key}",          h_ts_add, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/ts/{key}",          h_ts_info, 0, API_ACCESS_READ, NULL },
    { API_PATCH,  "/ts/{key}",          h_ts_alter, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/ts/{key}/incrby",   h_ts_incrby, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/ts/{key}/decrby",   h_ts_decrby, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/ts/{key}/range",    h_ts_range, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/ts/{key}/revrange", h_ts_revrange, 0, API_ACCESS_READ, NULL },
    { API_DELETE, "/ts/{key}/range",    h_ts_delete_range, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/ts/{key}/rules",    h_ts_rule_create, 0, API_ACCESS_WRITE, NULL },
    { API_DELETE, "/ts/{key}/rules",    h_ts_rule_delete, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/mts/index",         h_ts_queryindex, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/mts/get",           h_ts_mget, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/mts/range",         h_ts_mrange, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/mts/revrange",      h_ts_mrevrange, 0, API_ACCESS_READ, NULL },
};

API_FAMILY(ts);
