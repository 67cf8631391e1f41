/* freq.c - see freq.h. */
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/freq.h"
#include "api/items.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static bool body_items(json_t *body, bool allow_increments, uint64_t min_by, uint64_t max_by, api_items_t *out,
                       api_err_t *err)
{
    json_t *items = json_object_get(body, "items");
    json_t *incs = allow_increments ? json_object_get(body, "increments") : NULL;
    const char *field = incs ? "increments" : "items";
    if (items && incs) {
        api_err_set(err, API_E_BAD_REQUEST, "items", "give either 'items' or 'increments', not both");
        return false;
    }
    json_t *arr = incs ? incs : items;
    if (!arr) {
        api_err_set(err, API_E_BAD_REQUEST, "items",
                    allow_increments ? "missing field 'items' (or 'increments')" : "missing field 'items'");
        return false;
    }
    if (!json_is_array(arr)) {
        api_err_set(err, API_E_BAD_REQUEST, field, "'%s' must be an array", field);
        return false;
    }
    size_t count = json_array_size(arr);
    if (count == 0 || count > API_MAX_BATCH) {
        api_err_set(err, API_E_BAD_REQUEST, field, "'%s' must hold 1 to %d entries, not %zu", field,
                    API_MAX_BATCH, count);
        return false;
    }
    if (!api_items_alloc(count, out, err))
        return false;
    /* the increments, and room for the decimal text of integer items */
    out->by = malloc(count * sizeof(*out->by));
    out->numbuf = malloc(count * API_ITEM_TEXT);
    if (!out->by || !out->numbuf) {
        api_items_free(out);
        api_err_set(err, API_E_OUT_OF_MEMORY, NULL, "out of memory");
        return false;
    }
    for (size_t i = 0; i < count; i++) {
        json_t *e = json_array_get(arr, i), *s = e;
        out->by[i] = 1;
        if (incs) {
            if (!json_is_object(e)) {
                api_err_set(err, API_E_BAD_REQUEST, field, "increments[%zu] must be an object {\"item\",\"by\"}",
                            i);
                goto bad;
            }
            const char *name;
            json_t *v;
            json_object_foreach(e, name, v) {
                if (strcmp(name, "item") != 0 && strcmp(name, "by") != 0) {
                    api_err_set(err, API_E_BAD_REQUEST, field, "increments[%zu]: unknown field '%s'", i, name);
                    goto bad;
                }
            }
            s = json_object_get(e, "item");
            json_t *by = json_object_get(e, "by");
            if (by) {
                if (!json_is_integer(by) || json_integer_value(by) < 0 ||
                    (uint64_t)json_integer_value(by) < min_by || (uint64_t)json_integer_value(by) > max_by) {
                    api_err_set(err, API_E_BAD_REQUEST, field,
                                "increments[%zu].by must be an integer between %llu and %llu", i,
                                (unsigned long long)min_by, (unsigned long long)max_by);
                    goto bad;
                }
                out->by[i] = (uint64_t)json_integer_value(by);
            }
        }
        /* 7 and "7" are the same item, as Redis clients send numbers */
        if (!api_item_text(s, out->numbuf + i * API_ITEM_TEXT, &out->p[i], &out->len[i])) {
            api_err_set(err, API_E_BAD_REQUEST, field, incs ? "increments[%zu].item must be a string or an integer"
                                                            : "items[%zu] must be a string or an integer", i);
            goto bad;
        }
    }
    return true;
bad:
    api_items_free(out);
    return false;
}

static bool query_items(const api_req_t *req, const char *name, api_items_t *out, api_err_t *err)
{
    size_t count = api_query_count(req, name);
    if (count == 0 || count > API_MAX_BATCH) {
        api_err_set(err, API_E_BAD_REQUEST, name, "give 1 to %d '%s' query parameters, not %zu", API_MAX_BATCH,
                    name, count);
        return false;
    }
    if (!api_items_alloc(count, out, err))
        return false;
    size_t j = 0;
    for (int i = 0; i < req->nparams; i++)
        if (strcmp(req->params[i].name, name) == 0) {
            out->p[j] = req->params[i].value;
            out->len[j++] = req->params[i].vlen;
        }
    return true;
}

static double *query_doubles(const api_req_t *req, const char *name, double min, double max, size_t *n,
                             api_err_t *err)
{
    api_items_t raw;
    if (!query_items(req, name, &raw, err))
        return NULL;
    size_t count = raw.n;
    double *out = malloc(count * sizeof(double));
    if (!out) {
        api_items_free(&raw);
        api_err_set(err, API_E_OUT_OF_MEMORY, NULL, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        if (!api_parse_double(raw.p[i], raw.len[i], &out[i])) {
            api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' must be a finite number", name);
            goto bad;
        }
        if (out[i] < min || out[i] > max) {
            api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' must be between %g and %g", name,
                        min, max);
            goto bad;
        }
    }
    api_items_free(&raw);
    *n = count;
    return out;
bad:
    api_items_free(&raw);
    free(out);
    return NULL;
}

bool freq_body_items(api_resp_t *resp, json_t *body, bool allow_increments, uint64_t min_by, uint64_t max_by,
                     api_items_t *out)
{
    api_err_t err;
    return api_err_answered(resp, body_items(body, allow_increments, min_by, max_by, out, &err), &err);
}

bool freq_query_items(const api_req_t *req, api_resp_t *resp, const char *name, api_items_t *out)
{
    api_err_t err;
    return api_err_answered(resp, query_items(req, name, out, &err), &err);
}

double *freq_query_doubles(const api_req_t *req, api_resp_t *resp, const char *name, double min, double max,
                           size_t *n)
{
    api_err_t err;
    double *v = query_doubles(req, name, min, max, n, &err);
    api_err_answered(resp, v != NULL, &err);
    return v;
}

json_t *freq_real(double v)
{
    if (isnan(v))
        return json_string("nan");
    if (isinf(v))
        return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

json_t *freq_count(uint64_t v) { return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v); }

json_t *freq_string(const char *p, size_t len)
{
    json_t *s = json_stringn(p, len);
    return s ? s : json_null();
}
