/*
 * cms.c - /cms: RedisBloom's Count-Min sketch (CMS.*) over HTTP.
 *
 *   PUT  /cms/{key}        {"width","depth"} or {"error","probability"}, "conservative"=false
 *                          -> 201 info                         (CMS.INITBYDIM / CMS.INITBYPROB)
 *   POST /cms/{key}        {"increments":[{"item","by"=1}]} or {"items":[...]}
 *                          -> {"counts":[...]}                 (CMS.INCRBY)
 *   GET  /cms/{key}/count?item=a&item=b -> {"counts":[...]}    (CMS.QUERY)
 *   POST /cms/{key}/count  {"items":[...]} -> {"counts":[...]}  (the same, for long batches)
 *   POST /cms/{key}/merge  {"sources":[...],"weights":[...]} -> info   (CMS.MERGE)
 *   GET  /cms/{key}        -> {"width","depth","count","conservative","size_bytes"}  (CMS.INFO)
 *
 * Like RedisBloom, a sketch must be created before use (404 otherwise) and
 * CMS.MERGE overwrites the destination (which must exist) with the weighted
 * sum of the sources; weights may be negative (subtracting a sketch), and a
 * merge where any counter or the total would fall below 0 or pass 2^63 - 1
 * is refused whole (RedisBloom's "CMS: MERGE overflow"; its counters are
 * 32-bit, ours 64-bit).  An increment batch that would take the total past
 * 2^63 - 1 is refused whole; nothing is applied.  A merge reads each
 * source once, however often it is named (its weights summed), and the
 * sources it reads may total at most API_WORK_VALUES x --max-value-size.
 */
#include <stdlib.h>

#include "api/api.h"
#include "api/freq.h"
#include "core/cms.h"

static json_t *info_json(const void *value)
{
    const cms_t *c = value;
    return json_pack("{s:I,s:I,s:I,s:b,s:I}", "width", (json_int_t)cms_width(c), "depth",
                     (json_int_t)cms_depth(c), "count", (json_int_t)cms_total(c), "conservative",
                     cms_conservative(c), "size_bytes", (json_int_t)cms_type.size(c));
}

/* Reads an optional member that must be strictly between 0 and 1. */
static bool open_unit(api_resp_t *resp, json_t *body, const char *name, double *out)
{
    if (!api_obj_double(resp, body, name, true, 0, 1, out, NULL))
        return false;
    if (*out <= 0 || *out >= 1) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "'%s' must be strictly between 0 and 1", name);
        return false;
    }
    return true;
}

static void h_cms_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "width", "depth", "error", "probability", "conservative", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
        return;
    bool by_dim = json_object_get(body, "width") || json_object_get(body, "depth");
    bool by_prob = json_object_get(body, "error") || json_object_get(body, "probability");
    if (by_dim && by_prob) {
        api_error_field(resp, API_E_BAD_REQUEST, "error", "give either width and depth, or error and probability");
        return;
    }
    if (!by_dim && !by_prob) {
        api_error_field(resp, API_E_BAD_REQUEST, "width", "missing 'width' and 'depth' (or 'error' and 'probability')");
        return;
    }
    uint64_t width, depth;
    const char *size_field = by_dim ? "width" : "error";
    if (by_dim) {
        int64_t w, d;
        if (!api_obj_int(resp, body, "width", true, 1, UINT32_MAX, &w, NULL) ||
            !api_obj_int(resp, body, "depth", true, 1, UINT32_MAX, &d, NULL))
            return;
        width = (uint64_t)w;
        depth = (uint64_t)d;
    } else {
        double error, prob;
        if (!open_unit(resp, body, "error", &error) || !open_unit(resp, body, "probability", &prob))
            return;
        cms_dims_from_prob(error, prob, &width, &depth);
        if (depth < 1 && req->replay) {
            depth = 1;   /* a record served before this was refused (tally took it as depth 1) */
        } else if (depth < 1) {   /* RedisBloom's "invalid init arguments": a probability within 1e-7 of 1 */
            api_error_field(resp, API_E_BAD_REQUEST, "probability",
                            "'probability' %g gives a sketch of depth 0: it must be further from 1", prob);
            return;
        }
    }
    bool conservative = false;
    if (!api_obj_bool(resp, body, "conservative", &conservative, NULL))
        return;
    if (width > UINT32_MAX || depth > CMS_MAX_CELLS || width * depth > CMS_MAX_CELLS) {
        api_error_field(resp, API_E_BAD_REQUEST, size_field,
                        "a %llu × %llu sketch is too large: at most %llu counters", (unsigned long long)width,
                        (unsigned long long)depth, (unsigned long long)CMS_MAX_CELLS);
        return;
    }
    uint64_t bytes = cms_bytes_for(width, depth);
    if (!api_grow(srv, req, resp, size_field, "the sketch", bytes, bytes + ks_entry_overhead(klen)))
        return;
    api_create_key(srv, req, resp, key, klen, &cms_type, cms_create((uint32_t)width, (uint32_t)depth, conservative),
                   info_json);
}

static void h_cms_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "items", "increments", NULL };
    const char *key;
    size_t klen, n;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
        return;
    api_items_t it;
    if (!freq_body_items(resp, body, true, 0, CMS_MAX_COUNT, &it))
        return;
    n = it.n;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += it.by[i];   /* each <= 2^63 - 1: checking every step keeps the sum exact */
        if (sum > CMS_MAX_COUNT)
            break;
    }
    json_t *counts = json_array();
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &cms_type, API_WRITE | API_MUST_EXIST, &h))
        goto out;
    cms_t *c = api_key_value(&h);
    if (sum > CMS_MAX_COUNT || !cms_can_add(c, sum)) {
        api_key_close(&h, false);
        api_error_field(resp, API_E_BAD_REQUEST, json_object_get(body, "increments") ? "increments" : "items",
                        "overflow: the increments would take the sketch's total count past %llu; nothing was added",
                        (unsigned long long)CMS_MAX_COUNT);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = it.by[i] ? cms_incr(c, it.p[i], it.len[i], it.by[i]) : cms_query(c, it.p[i], it.len[i]);
        json_array_append_new(counts, json_integer((json_int_t)v));
    }
    api_key_close(&h, sum > 0);
    api_items_free(&it);
    api_json(resp, 200, json_pack("{s:o}", "counts", counts));
    return;
out:
    api_items_free(&it);
    json_decref(counts);
}

/* Answers the estimates of the items (freed here). */
static void count_items(api_server_t *srv, api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                        api_items_t *it)
{
    json_t *counts = json_array();
    api_key_t h;
    bool found = api_key_open(srv, req, resp, key, klen, &cms_type, API_MUST_EXIST, &h);
    if (found) {
        const cms_t *c = api_key_value(&h);
        for (size_t i = 0; i < it->n; i++)
            json_array_append_new(counts, json_integer((json_int_t)cms_query(c, it->p[i], it->len[i])));
        api_key_close(&h, false);
    }
    api_items_free(it);
    if (found)
        api_json(resp, 200, json_pack("{s:o}", "counts", counts));
    else
        json_decref(counts);
}

static void h_cms_count(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "item", NULL };
    const char *key;
    size_t klen;
    api_items_t it;
    if (api_path_key(req, resp, &key, &klen) && api_query_allow(req, resp, params) &&
        freq_query_items(req, resp, "item", &it))
        count_items(srv, req, resp, key, klen, &it);
}

/* The same with the items in a JSON body, for batches too long for a URL. */
static void h_cms_count_post(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "items", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    api_items_t it;
    if ((body = api_key_body(req, resp, fields, &key, &klen)) && freq_body_items(resp, body, false, 1, 1, &it))
        count_items(srv, req, resp, key, klen, &it);
}

static void h_cms_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "sources", "weights", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
        return;
    json_t *sources = json_object_get(body, "sources"), *weights = json_object_get(body, "weights");
    size_t n = json_array_size(sources);
    if (!json_is_array(sources) || n == 0 || n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "sources", "'sources' must be an array of 1 to %d keys",
                        API_MAX_BATCH);
        return;
    }
    if (weights && (!json_is_array(weights) || json_array_size(weights) != n)) {
        api_error_field(resp, API_E_BAD_REQUEST, "weights", "'weights' must be an array as long as 'sources'");
        return;
    }
    ks_t *ks = srv->ks;
    ks_key_t *keys = malloc((n + 1) * sizeof(*keys));
    int64_t *w = malloc(n * sizeof(*w));
    __int128 *wsum = calloc(n, sizeof(*wsum));
    size_t *first = malloc(n * sizeof(*first)), *at = malloc(n * sizeof(*at));
    const cms_t **srcs = malloc(n * sizeof(*srcs));
    if (!keys || !w || !wsum || !first || !at || !srcs) {
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
        w[i] = 1;
        if (weights) {
            json_t *x = json_array_get(weights, i);
            if (!json_is_integer(x)) {
                api_error_field(resp, API_E_BAD_REQUEST, "weights", "weights[%zu] must be an integer", i);
                goto done;
            }
            w[i] = (int64_t)json_integer_value(x);
        }
    }
    /* A source named more than once is read once, with the sum of its
     * weights: the weighted sum is linear, so the counters are the same
     * (CMS.MERGE of 10 000 copies of one sketch costs what one does).  The
     * sum is taken exactly; one that leaves the int64 range overflows the
     * merge unless the sketch is empty (then it adds nothing). */
    if (!api_keys_distinct(keys + 1, n, first)) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        if (first[i] == i) {
            at[i] = nd++;
            keys[nd] = keys[i + 1];
        }
        wsum[at[first[i]]] += w[i];
    }

    api_key_t h;
    if (!api_keys_lock(srv, req, resp, keys, nd + 1, &h))
        goto done;
    if (!api_keys_find(&h, 0, &cms_type, API_WRITE | API_MUST_EXIST, NULL, NULL))
        goto done;
    uint64_t work = 0;
    bool overflow = false;
    for (size_t i = 0; i < n; i++) {
        if (first[i] != i)
            continue;
        ks_entry_t *e;
        if (!api_keys_find(&h, at[i] + 1, &cms_type, API_READ, NULL, &e))
            goto done;
        if (!e) {
            api_key_close(&h, false);
            api_error_field(resp, API_E_NOT_FOUND, "sources", "source '%s' does not exist",
                            json_string_value(json_array_get(sources, i)));
            goto done;
        }
        const cms_t *src = ks_entry_value(e);
        srcs[at[i]] = src;
        work += cms_type.size(src);
        __int128 ws = wsum[at[i]];
        if (ws > INT64_MAX || ws < INT64_MIN) {
            overflow |= cms_total(src) > 0;
            ws = 0;
        }
        w[at[i]] = (int64_t)ws;
    }
    cms_t *c = api_key_value(&h);
    if (!api_work_fits(srv, req, resp, "sources", work)) {
        api_key_close(&h, false);
        goto done;
    }
    cms_merge_status_t st = CMS_MERGE_OVERFLOW;
    for (size_t i = 0; overflow && i < nd; i++)   /* the dimensions are reported first, as cms_merge does */
        if (cms_width(srcs[i]) != cms_width(c) || cms_depth(srcs[i]) != cms_depth(c))
            st = CMS_MERGE_DIMENSIONS;
    switch (overflow ? st : cms_merge(c, srcs, w, nd)) {
    case CMS_MERGE_OK: {
        json_t *info = info_json(c);
        api_key_close(&h, true);
        api_json(resp, 200, info);
        break;
    }
    case CMS_MERGE_DIMENSIONS:
        api_error_field(resp, API_E_BAD_REQUEST, "sources",
                        "every source must have the destination's width and depth (%u × %u)", cms_width(c),
                        cms_depth(c));
        break;
    case CMS_MERGE_OVERFLOW:
        api_error_field(resp, API_E_BAD_REQUEST, "weights",
                        "merge overflow: a counter or the total would fall below 0 or exceed %llu (or a row "
                        "exceed the total); nothing was merged",
                        (unsigned long long)CMS_MAX_COUNT);
        break;
    }
    api_key_close(&h, false);
done:
    free(keys);
    free(w);
    free(wsum);
    free(first);
    free(at);
    free(srcs);
}

static void h_cms_info(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    api_answer_info(srv, req, resp, key, klen, &cms_type, info_json);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/cms/{key}",       h_cms_put, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/cms/{key}",       h_cms_add, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/cms/{key}",       h_cms_info, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/cms/{key}/count", h_cms_count, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/cms/{key}/count", h_cms_count_post, API_ROUTE_READS, API_ACCESS_READ, NULL },
    { API_POST,   "/cms/{key}/merge", h_cms_merge, 0, API_ACCESS_WRITE, NULL },
};

API_FAMILY(cms);
