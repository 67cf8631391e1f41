/* items.c - see items.h. */
#include "api/json_out.h"
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/items.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


bool api_item_text(const json_t *v, char *buf, const char **p, size_t *len)
{
    if (json_is_string(v)) {
        *p = json_string_value(v);
        *len = json_string_length(v);
        return true;
    }
    if (!json_is_integer(v))
        return false;
    char *end = api_format_i64(buf, json_integer_value(v));
    *end = '\0';
    *len = (size_t)(end - buf);
    *p = buf;
    return true;
}

static bool list_of(json_t *body, const char *field, size_t min, size_t max, json_t **arr, api_err_t *err)
{
    *arr = json_object_get(body, field);
    if (!*arr) {
        api_err_set(err, API_E_BAD_REQUEST, field, "missing field '%s'", field);
        return false;
    }
    if (!json_is_array(*arr)) {
        api_err_set(err, API_E_BAD_REQUEST, field, "'%s' must be an array", field);
        return false;
    }
    size_t n = json_array_size(*arr);
    if (n < min) {
        api_err_set(err, API_E_BAD_REQUEST, field, "'%s' must not be empty", field);
        return false;
    }
    if (n > max) {
        api_err_set(err, API_E_BAD_REQUEST, field, "'%s' has %zu entries; the limit is %zu", field, n, max);
        return false;
    }
    return true;
}

bool api_items_alloc(size_t n, api_items_t *out, api_err_t *err)
{
    memset(out, 0, sizeof(*out));
    out->p = malloc((n ? n : 1) * sizeof(*out->p));   /* n == 0: a valid empty list */
    out->len = malloc((n ? n : 1) * sizeof(*out->len));
    if (!out->p || !out->len) {
        api_items_free(out);
        api_err_set(err, API_E_OUT_OF_MEMORY, NULL, "out of memory");
        return false;
    }
    out->n = n;
    return true;
}

static bool items_parse(json_t *body, const char *field, size_t min, api_items_t *out, api_err_t *err)
{
    json_t *arr;
    if (!list_of(body, field, min, API_MAX_BATCH, &arr, err))
        return false;
    size_t n = json_array_size(arr);
    if (!api_items_alloc(n, out, err))
        return false;
    size_t nums = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (json_is_string(v)) {
            out->p[i] = json_string_value(v);
            out->len[i] = json_string_length(v);
        } else if (json_is_integer(v)) {
            nums++;
        } else {
            api_items_free(out);
            api_err_set(err, API_E_BAD_REQUEST, field, "'%s[%zu]' must be a string or an integer", field, i);
            return false;
        }
    }
    if (nums) {
        out->numbuf = malloc(nums * API_ITEM_TEXT);
        if (!out->numbuf) {
            api_items_free(out);
            api_err_set(err, API_E_OUT_OF_MEMORY, NULL, "out of memory");
            return false;
        }
        char *b = out->numbuf;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(arr, i);
            if (json_is_integer(v)) {
                api_item_text(v, b, &out->p[i], &out->len[i]);
                b += API_ITEM_TEXT;
            }
        }
    }
    return true;
}

static bool keys_parse(json_t *body, const char *field, size_t max, api_items_t *out, api_err_t *err)
{
    json_t *arr;
    if (!list_of(body, field, 1, max, &arr, err))
        return false;
    size_t n = json_array_size(arr);
    if (!api_items_alloc(n, out, err))
        return false;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_string(v)) {
            api_items_free(out);
            api_err_set(err, API_E_BAD_REQUEST, field, "'%s[%zu]' must be a key (a string)", field, i);
            return false;
        }
        out->p[i] = json_string_value(v);
        out->len[i] = json_string_length(v);
        if (!api_key_check(field, out->p[i], out->len[i], err)) {
            api_items_free(out);
            return false;
        }
    }
    return true;
}

static bool query_item(const api_req_t *req, const char *name, const char **item, size_t *len, api_err_t *err)
{
    size_t n = api_query_count(req, name);
    if (n == 0) {
        api_err_set(err, API_E_BAD_REQUEST, name, "missing query parameter '%s'", name);
        return false;
    }
    if (n > 1) {
        api_err_set(err, API_E_BAD_REQUEST, name, "query parameter '%s' given %zu times; one is expected",
                    name, n);
        return false;
    }
    *item = api_query_get(req, name, len);
    return true;
}

bool api_items_parse(api_resp_t *resp, json_t *body, const char *field, api_items_t *out)
{
    api_err_t err;
    return api_err_answered(resp, items_parse(body, field, 1, out, &err), &err);
}

bool api_keys_parse(api_resp_t *resp, json_t *body, const char *field, size_t max, api_items_t *out)
{
    api_err_t err;
    return api_err_answered(resp, keys_parse(body, field, max, out, &err), &err);
}

bool api_query_item(const api_req_t *req, api_resp_t *resp, const char *name, const char **item, size_t *len)
{
    api_err_t err;
    return api_err_answered(resp, query_item(req, name, item, len, &err), &err);
}

void api_items_free(api_items_t *it)
{
    free(it->p);
    free(it->len);
    free(it->by);
    free(it->numbuf);
    memset(it, 0, sizeof(*it));
}

void api_bool_array(api_resp_t *resp, const char *name, const bool *v, size_t n)
{
    size_t cap = strlen(name) + 8 + n * 6;
    char *b = malloc(cap);
    if (!b) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    size_t o = (size_t)snprintf(b, cap, "{\"%s\":[", name);
    for (size_t i = 0; i < n; i++) {
        if (i)
            b[o++] = ',';
        memcpy(b + o, v[i] ? "true" : "false", v[i] ? 4 : 5);
        o += v[i] ? 4 : 5;
    }
    b[o++] = ']';
    b[o++] = '}';
    free(resp->body);
    resp->body = b;
    resp->len = o;
    resp->status = 200;
    resp->ctype = NULL;
}

bool api_items_request(api_req_t *req, api_resp_t *resp, bool allow_empty, const char **key, size_t *klen,
                       api_items_t *it)
{
    static const char *const fields[] = { "items", NULL };
    json_t *body = api_key_body(req, resp, fields, key, klen);
    api_err_t err;
    return body && api_err_answered(resp, items_parse(body, "items", allow_empty ? 0 : 1, it, &err), &err);
}
