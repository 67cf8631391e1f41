/*
 * tdigest.c - /tdigest: RedisBloom's T-Digest (TDIGEST.*) over HTTP.
 *
 *   PUT  /tdigest/{key}          {"compression"=100} (body optional) -> 201 info     (CREATE)
 *   POST /tdigest/{key}          {"values":[...]} -> {"observations":N}             (ADD)
 *   GET  /tdigest/{key}/quantile?q=0.5&q=0.99    -> {"values":[...]}               (QUANTILE)
 *   GET  /tdigest/{key}/cdf?value=               -> {"cdf":[...]}                  (CDF)
 *   GET  /tdigest/{key}/rank?value=              -> {"ranks":[...]}                (RANK)
 *   GET  /tdigest/{key}/revrank?value=           -> {"ranks":[...]}                (REVRANK)
 *   GET  /tdigest/{key}/byrank?rank=             -> {"values":[...]}               (BYRANK)
 *   GET  /tdigest/{key}/byrevrank?rank=          -> {"values":[...]}               (BYREVRANK)
 *   GET  /tdigest/{key}/trimmed_mean?low=&high=  -> {"mean":x}                     (TRIMMED_MEAN)
 *   GET  /tdigest/{key}/min, /max                -> {"min":x}, {"max":x}           (MIN, MAX)
 *   POST /tdigest/{key}/merge    {"sources":[...],"compression","override"=false} -> info  (MERGE)
 *   POST /tdigest/{key}/reset    -> info                                           (RESET)
 *   GET  /tdigest/{key}          -> info, with min and max                         (INFO)
 *
 * Answers follow RedisBloom, including its edge cases (see core/tdigest.h).
 * NaN and infinities are not JSON numbers: they are answered as the strings
 * "nan", "inf" and "-inf".  Every write leaves the digest flushed (no
 * buffered values), so reads never have to merge.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/freq.h"
#include "core/tdigest.h"

static json_t *info_json(const void *value)
{
    const tdigest_t *td = value;
    tdigest_info_t in;
    tdigest_get_info(td, &in);
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:o}", "compression", (json_int_t)in.compression,
                     "capacity", (json_int_t)in.capacity, "merged_nodes", (json_int_t)in.merged_nodes,
                     "unmerged_nodes", (json_int_t)in.unmerged_nodes, "merged_weight",
                     (json_int_t)in.merged_weight, "unmerged_weight", (json_int_t)in.unmerged_weight,
                     "observations", (json_int_t)tdigest_count(td), "total_compressions",
                     (json_int_t)(in.total_compressions > INT64_MAX ? INT64_MAX : in.total_compressions),
                     "size_bytes", (json_int_t)tdigest_type.size(td), "min", freq_real(tdigest_min(td)), "max",
                     freq_real(tdigest_max(td)));
}

static void h_tdigest_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "compression", NULL };
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    int64_t compression = TDIGEST_DEFAULT_COMPRESSION;
    if (req->body_len > 0) {   /* the body is optional: {} or nothing means the default */
        json_t *body = api_body_object(req, resp, fields);
        if (!body ||
            !api_obj_int(resp, body, "compression", false, 1, TDIGEST_MAX_COMPRESSION, &compression, NULL))
            return;
    }
    uint64_t bytes = tdigest_bytes_for((uint32_t)compression);
    if (!api_grow(srv, req, resp, "compression", "the digest", bytes, bytes + ks_entry_overhead(klen)))
        return;
    api_create_key(srv, req, resp, key, klen, &tdigest_type, tdigest_create((uint32_t)compression), info_json);
}

static void h_tdigest_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "values", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
        return;
    json_t *values = json_object_get(body, "values");
    size_t n = json_array_size(values);
    if (!values) {
        api_error_field(resp, API_E_BAD_REQUEST, "values", "missing field 'values'");
        return;
    }
    if (!json_is_array(values) || n == 0 || n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "values", "'values' must be an array of 1 to %d numbers",
                        API_MAX_BATCH);
        return;
    }
    double *v = malloc(n * sizeof(double));
    if (!v) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(values, i);
        if (!json_is_number(x)) {
            free(v);
            api_error_field(resp, API_E_BAD_REQUEST, "values", "values[%zu] must be a finite number", i);
            return;
        }
        v[i] = json_number_value(x);   /* JSON numbers are finite; jansson refuses overflowing ones */
    }
    api_key_t h;
    ks_entry_t *e = api_key_open(srv, req, resp, key, klen, &tdigest_type, API_MUST_EXIST, &h) ? h.e : NULL;
    uint64_t total = 0;
    bool changed = false;
    if (e) {
        tdigest_t *td = ks_entry_value(e);
        if (!tdigest_can_add(td, n)) {
            api_error_field(resp, API_E_BAD_REQUEST, "values", "overflow: the digest would hold more than 2^53 values");
            e = NULL;
        } else {
            ks_entry_prepare_write(srv->ks, e);
            for (size_t i = 0; i < n; i++)
                tdigest_add(td, v[i]);
            tdigest_flush(td);
            total = tdigest_count(td);
            changed = true;
        }
    }
    api_key_close(&h, changed);
    free(v);
    if (e)
        api_json(resp, 200, json_pack("{s:I}", "observations", (json_int_t)total));
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum query_kind { Q_QUANTILE, Q_CDF, Q_RANK, Q_REVRANK, Q_BYRANK, Q_BYREVRANK } query_kind_t;

static void query(api_server_t *srv, api_req_t *req, api_resp_t *resp, query_kind_t kind)
{
    static const char *const param_of[] = { "q", "value", "value", "value", "rank", "rank" };
    static const char *const answer_of[] = { "values", "cdf", "ranks", "ranks", "values", "values" };
    const char *pname = param_of[kind];
    const char *key;
    size_t klen, n;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, (const char *const[]){ pname, NULL }))
        return;
    double lo = kind == Q_QUANTILE ? 0 : -1.7976931348623157e308, hi = kind == Q_QUANTILE ? 1 : 1.7976931348623157e308;
    double *x = NULL;
    uint64_t *ranks = NULL;
    if (kind == Q_BYRANK || kind == Q_BYREVRANK) {
        api_items_t raw;
        if (!freq_query_items(req, resp, pname, &raw))
            return;
        n = raw.n;
        ranks = malloc(n * sizeof(*ranks));
        for (size_t i = 0; ranks && i < n; i++) {
            int64_t r;
            if (!api_parse_i64(raw.p[i], raw.len[i], &r) || r < 0) {
                api_error_field(resp, API_E_BAD_REQUEST, pname, "query parameter 'rank' must be an integer >= 0");
                api_items_free(&raw);
                free(ranks);
                return;
            }
            ranks[i] = (uint64_t)r;
        }
        api_items_free(&raw);
        if (!ranks) {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            return;
        }
    } else if (!(x = freq_query_doubles(req, resp, pname, lo, hi, &n))) {
        return;
    }
    json_t *out = json_array();
    api_key_t h;
    ks_entry_t *e = api_key_open(srv, req, resp, key, klen, &tdigest_type, API_MUST_EXIST, &h) ? h.e : NULL;
    /* each value walks the digest: n of them may walk it at most as far as
     * a request may read */
    if (e && !api_work_fits(srv, req, resp, pname, (uint64_t)n * tdigest_type.size(ks_entry_value(e)))) {
        api_key_close(&h, false);
        e = NULL;
    }
    if (e) {
        const tdigest_t *td = ks_entry_value(e);
        for (size_t i = 0; i < n; i++) {
            json_t *a;
            switch (kind) {
            case Q_QUANTILE: a = freq_real(tdigest_quantile(td, x[i])); break;
            case Q_CDF: a = freq_real(tdigest_cdf(td, x[i])); break;
            case Q_RANK: a = json_integer(tdigest_rank(td, x[i], false)); break;
            case Q_REVRANK: a = json_integer(tdigest_rank(td, x[i], true)); break;
            case Q_BYRANK: a = freq_real(tdigest_by_rank(td, ranks[i], false)); break;
            default: a = freq_real(tdigest_by_rank(td, ranks[i], true)); break;
            }
            json_array_append_new(out, a);
        }
    }
    api_key_close(&h, false);
    free(x);
    free(ranks);
    if (e)
        api_json(resp, 200, json_pack("{s:o}", answer_of[kind], out));
    else
        json_decref(out);
}

static void h_tdigest_quantile(api_server_t *srv, api_req_t *req, api_resp_t *resp) { query(srv, req, resp, Q_QUANTILE); }
static void h_tdigest_cdf(api_server_t *srv, api_req_t *req, api_resp_t *resp) { query(srv, req, resp, Q_CDF); }
static void h_tdigest_rank(api_server_t *srv, api_req_t *req, api_resp_t *resp) { query(srv, req, resp, Q_RANK); }
static void h_tdigest_revrank(api_server_t *srv, api_req_t *req, api_resp_t *resp) { query(srv, req, resp, Q_REVRANK); }
static void h_tdigest_byrank(api_server_t *srv, api_req_t *req, api_resp_t *resp) { query(srv, req, resp, Q_BYRANK); }
static void h_tdigest_byrevrank(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    query(srv, req, resp, Q_BYREVRANK);
}

/* One number computed from the digest: trimmed mean, min or max. */
typedef enum scalar_kind { S_TRIMMED, S_MIN, S_MAX } scalar_kind_t;

static void scalar(api_server_t *srv, api_req_t *req, api_resp_t *resp, scalar_kind_t kind)
{
    static const char *const trimmed_params[] = { "low", "high", NULL };
    const char *key;
    size_t klen;
    double low = 0, high = 1;
    if (!api_path_key(req, resp, &key, &klen))
        return;
    if (kind == S_TRIMMED) {
        if (!api_query_allow(req, resp, trimmed_params) ||
            !api_query_double(req, resp, "low", true, 0, 1, &low, NULL) ||
            !api_query_double(req, resp, "high", true, 0, 1, &high, NULL))
            return;
        if (!(low < high)) {
            api_error_field(resp, API_E_BAD_REQUEST, "low", "'low' must be lower than 'high'");
            return;
        }
    } else if (!api_no_query(req, resp)) {
        return;
    }
    api_key_t h;
    ks_entry_t *e = api_key_open(srv, req, resp, key, klen, &tdigest_type, API_MUST_EXIST, &h) ? h.e : NULL;
    double v = 0;
    if (e) {
        const tdigest_t *td = ks_entry_value(e);
        v = kind == S_TRIMMED ? tdigest_trimmed_mean(td, low, high) : kind == S_MIN ? tdigest_min(td)
                                                                                    : tdigest_max(td);
    }
    api_key_close(&h, false);
    if (e)
        api_json(resp, 200, json_pack("{s:o}", kind == S_TRIMMED ? "mean" : kind == S_MIN ? "min" : "max",
                                      freq_real(v)));
}

static void h_tdigest_trimmed_mean(api_server_t *srv, api_req_t *req, api_resp_t *resp) { scalar(srv, req, resp, S_TRIMMED); }
static void h_tdigest_min(api_server_t *srv, api_req_t *req, api_resp_t *resp) { scalar(srv, req, resp, S_MIN); }
static void h_tdigest_max(api_server_t *srv, api_req_t *req, api_resp_t *resp) { scalar(srv, req, resp, S_MAX); }

static void h_tdigest_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    api_answer_info(srv, req, resp, key, klen, &tdigest_type, info_json);
}

/* ------------------------------------------------------------------------ */
/* Merge and reset                                                          */
/* ------------------------------------------------------------------------ */

static void h_tdigest_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "sources", "compression", "override", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
        return;
    json_t *sources = json_object_get(body, "sources");
    size_t n = json_array_size(sources);
    if (!json_is_array(sources) || n == 0 || n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "sources", "'sources' must be an array of 1 to %d keys",
                        API_MAX_BATCH);
        return;
    }
    int64_t compression = 0;
    bool has_compression, override = false;
    if (!api_obj_int(resp, body, "compression", false, 1, TDIGEST_MAX_COMPRESSION, &compression,
                     &has_compression) ||
        !api_obj_bool(resp, body, "override", &override, NULL))
        return;
    ks_t *ks = srv->ks;
    ks_key_t *keys = malloc((n + 1) * sizeof(*keys));
    const tdigest_t **srcs = malloc((n + 1) * sizeof(*srcs));
    if (!keys || !srcs) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    keys[0] = ks_key(ks, key, klen);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(sources, i);
        if (!json_is_string(s)) {
            api_error_field(resp, API_E_BAD_REQUEST, "sources", "sources[%zu] must be a string", i);
            goto done;
        }
        if (!api_check_key(resp, "sources", json_string_value(s), json_string_length(s)))
            goto done;
        keys[i + 1] = ks_key(ks, json_string_value(s), json_string_length(s));
    }
    /* the token's prefixes before any eviction: a refusal changes nothing */
    if (!api_keys_allowed(srv, req, resp, keys, n + 1) || !api_make_room(srv, req, resp))
        goto done;

    /* A source named twice counts twice, as in TDIGEST.MERGE (its weight is
     * in the result twice): the sources are read as named, and what they
     * total is bounded like any request's reading. */
    for (unsigned attempts = 0;;) {
        api_key_t h;
        if (!api_keys_lock(srv, req, resp, keys, n + 1, &h))
            goto done;
        ks_entry_t *dst;
        if (!api_keys_find(&h, 0, &tdigest_type, API_WRITE, NULL, &dst))
            goto done;
        for (size_t i = 0; i < n; i++) {
            ks_entry_t *e;
            if (!api_keys_find(&h, i + 1, &tdigest_type, API_READ, NULL, &e))
                goto done;
            if (!e) {
                api_error_field(resp, API_E_NOT_FOUND, "sources", "source '%s' does not exist",
                                json_string_value(json_array_get(sources, i)));
                api_key_close(&h, false);
                goto done;
            }
            srcs[i] = ks_entry_value(e);
        }
        /* TDIGEST.MERGE: without OVERRIDE an existing destination is merged too
         * and lends its compression; otherwise the largest of the sources' */
        size_t m = n;
        if (dst && !override)
            srcs[m++] = ks_entry_value(dst);
        int64_t comp = compression;
        if (!has_compression) {
            if (dst && !override) {
                comp = tdigest_compression(ks_entry_value(dst));
            } else {
                for (size_t i = 0; i < n; i++)
                    if ((int64_t)tdigest_compression(srcs[i]) > comp)
                        comp = tdigest_compression(srcs[i]);
            }
        }
        uint64_t work = 0, after = tdigest_bytes_for((uint32_t)comp),
                 before = dst ? tdigest_type.size(ks_entry_value(dst)) : 0;
        for (size_t i = 0; i < m; i++)
            work += tdigest_type.size(srcs[i]);
        if (!api_work_fits(srv, req, resp, "sources", work) || !api_value_fits(srv, req, resp, "compression", "the digest", after)) {
            api_key_close(&h, false);
            goto done;
        }
        /* the merge is built while the destination's old digest exists */
        uint64_t add = after + (dst ? 0 : ks_entry_overhead(klen));
        if (add > api_room_now(srv, req)) {
            uint64_t pinned = dst ? before : 0;   /* the keys it reads, each once */
            for (size_t i = 0; i < n; i++) {
                bool again = keys[i + 1].len == klen && memcmp(keys[i + 1].p, key, klen) == 0;
                for (size_t k = 0; k < i && !again; k++)
                    again = keys[k + 1].len == keys[i + 1].len && !memcmp(keys[k + 1].p, keys[i + 1].p, keys[i + 1].len);
                pinned += again ? 0 : tdigest_type.size(srcs[i]);
            }
            api_keep_t keep = { keys, n + 1, pinned };
            api_key_close(&h, false);
            if (!api_room_retry(srv, req, resp, add, &keep, &attempts))
                goto done;
            continue;
        }
        bool overflow;
        tdigest_t *td = tdigest_merge((uint32_t)comp, srcs, m, &overflow);
        if (!td) {
            if (overflow)
                api_error_field(resp, API_E_BAD_REQUEST, "sources",
                                "overflow: the merge would hold more than 2^53 values");
            else
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory merging");
            api_key_close(&h, false);
            goto done;
        }
        if (dst) {
            api_key_replace(&h, td);
        } else if (!api_key_add(&h, &tdigest_type, td, KS_NO_EXPIRY)) {
            tdigest_free(td);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the merge");
            api_key_close(&h, false);
            goto done;
        }
        json_t *info = info_json(td);
        api_key_close(&h, true);
        api_json(resp, 200, info);
        break;
    }
done:
    free(keys);
    free(srcs);
}

static void h_tdigest_reset(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    if (req->body_len > 0 && !api_body_object(req, resp, (const char *const[]){ NULL }))
        return;
    api_key_t h;
    ks_entry_t *e = api_key_open(srv, req, resp, key, klen, &tdigest_type, API_WRITE | API_MUST_EXIST, &h) ? h.e : NULL;
    json_t *info = NULL;
    if (e) {
        tdigest_t *td = ks_entry_value(e);
        tdigest_reset(td);
        info = info_json(td);
    }
    api_key_close(&h, e != NULL);
    if (info)
        api_json(resp, 200, info);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/tdigest/{key}",              h_tdigest_put, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/tdigest/{key}",              h_tdigest_add, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/tdigest/{key}",              h_tdigest_info, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/tdigest/{key}/quantile",     h_tdigest_quantile, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/tdigest/{key}/cdf",          h_tdigest_cdf, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/tdigest/{key}/rank",         h_tdigest_rank, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/tdigest/{key}/revrank",      h_tdigest_revrank, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/tdigest/{key}/byrank",       h_tdigest_byrank, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/tdigest/{key}/byrevrank",    h_tdigest_byrevrank, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/tdigest/{key}/trimmed_mean", h_tdigest_trimmed_mean, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/tdigest/{key}/min",          h_tdigest_min, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/tdigest/{key}/max",          h_tdigest_max, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/tdigest/{key}/merge",        h_tdigest_merge, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/tdigest/{key}/reset",        h_tdigest_reset, 0, API_ACCESS_WRITE, NULL },
};

API_FAMILY(tdigest);
