/* freq.c - see freq.h. */
#include "api/freq.h"
#include "api/items.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

freq_item_t *freq_body_items(api_resp_t *resp, json_t *body, bool allow_increments, uint64_t min_by,
                             uint64_t max_by, size_t *n)
{
    json_t *items = json_object_get(body, "items");
    json_t *incs = allow_increments ? json_object_get(body, "increments") : NULL;
    const char *field = incs ? "increments" : "items";
    if (items && incs) {
        api_error_field(resp, API_E_BAD_REQUEST, "items", "give either 'items' or 'increments', not both");
        return NULL;
    }
    json_t *arr = incs ? incs : items;
    if (!arr) {
        api_error_field(resp, API_E_BAD_REQUEST, "items",
                        allow_increments ? "missing field 'items' (or 'increments')" : "missing field 'items'");
        return NULL;
    }
    if (!json_is_array(arr)) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' must be an array", field);
        return NULL;
    }
    size_t count = json_array_size(arr);
    if (count == 0 || count > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' must hold 1 to %d entries, not %zu", field,
                        API_MAX_BATCH, count);
        return NULL;
    }
    /* the items, then room for the decimal text of integer items */
    freq_item_t *out = malloc(count * (sizeof(*out) + API_ITEM_TEXT));
    if (!out) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    char *numbuf = (char *)(out + count);
    for (size_t i = 0; i < count; i++) {
        json_t *e = json_array_get(arr, i), *s = e;
        out[i].by = 1;
        if (incs) {
            if (!json_is_object(e)) {
                api_error_field(resp, API_E_BAD_REQUEST, field, "increments[%zu] must be an object {\"item\",\"by\"}",
                                i);
                goto bad;
            }
            const char *name;
            json_t *v;
            json_object_foreach(e, name, v) {
                if (strcmp(name, "item") != 0 && strcmp(name, "by") != 0) {
                    api_error_field(resp, API_E_BAD_REQUEST, field, "increments[%zu]: unknown field '%s'", i, name);
                    goto bad;
                }
            }
            s = json_object_get(e, "item");
            json_t *by = json_object_get(e, "by");
            if (by) {
                if (!json_is_integer(by) || json_integer_value(by) < 0 ||
                    (uint64_t)json_integer_value(by) < min_by || (uint64_t)json_integer_value(by) > max_by) {
                    api_error_field(resp, API_E_BAD_REQUEST, field,
                                    "increments[%zu].by must be an integer between %llu and %llu", i,
                                    (unsigned long long)min_by, (unsigned long long)max_by);
                    goto bad;
                }
                out[i].by = (uint64_t)json_integer_value(by);
            }
        }
        /* 7 and "7" are the same item, as Redis clients send numbers */
        if (!api_item_text(s, numbuf + i * API_ITEM_TEXT, &out[i].p, &out[i].len)) {
            api_error_field(resp, API_E_BAD_REQUEST, field, incs ? "increments[%zu].item must be a string or an integer"
                                                                : "items[%zu] must be a string or an integer", i);
            goto bad;
        }
    }
    *n = count;
    return out;
bad:
    free(out);
    return NULL;
}

freq_item_t *freq_query_items(const api_req_t *req, api_resp_t *resp, const char *name, size_t *n)
{
    size_t count = api_query_count(req, name);
    if (count == 0 || count > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "give 1 to %d '%s' query parameters, not %zu", API_MAX_BATCH,
                        name, count);
        return NULL;
    }
    freq_item_t *out = malloc(count * sizeof(*out));
    if (!out) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    size_t j = 0;
    for (int i = 0; i < req->nparams; i++)
        if (strcmp(req->params[i].name, name) == 0)
            out[j++] = (freq_item_t){ req->params[i].value, req->params[i].vlen, 1 };
    *n = count;
    return out;
}

double *freq_query_doubles(const api_req_t *req, api_resp_t *resp, const char *name, double min, double max,
                           size_t *n)
{
    size_t count;
    freq_item_t *raw = freq_query_items(req, resp, name, &count);
    if (!raw)
        return NULL;
    double *out = malloc(count * sizeof(double));
    if (!out) {
        free(raw);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        if (!api_parse_double(raw[i].p, raw[i].len, &out[i])) {
            api_error_field(resp, API_E_BAD_REQUEST, name, "query parameter '%s' must be a finite number", name);
            goto bad;
        }
        if (out[i] < min || out[i] > max) {
            api_error_field(resp, API_E_BAD_REQUEST, name, "query parameter '%s' must be between %g and %g", name,
                            min, max);
            goto bad;
        }
    }
    free(raw);
    *n = count;
    return out;
bad:
    free(raw);
    free(out);
    return NULL;
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
