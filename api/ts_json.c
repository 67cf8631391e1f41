/*
 * ts_json.c - the answers of the time series routes: rows of samples
 * written as text directly (a range can hold many), the labels of a series.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_out.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/ts_http.h"

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

void ts_put_i64(wbuf_t *b, int64_t v)
{
    char buf[API_I64_TEXT];
    wbuf_put_bytes(b, buf, (size_t)(api_format_i64(buf, v) - buf));
}

void ts_answer(api_resp_t *resp, int status, wbuf_t *b)
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

void ts_put_rows(wbuf_t *b, const cmd_ts_rows_t *c)
{
    dtext_t last = { 0 };
    wbuf_put_u8(b, '[');
    for (size_t i = 0; i < c->n; i++) {
        wbuf_put_bytes(b, i ? ",[" : "[", i ? 2 : 1);
        ts_put_i64(b, c->s[i].ts);
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

json_t *ts_labels_json(const cmd_ts_series_t *x)
{
    if (!x->has_labels)
        return NULL;
    json_t *o = json_object();
    for (size_t i = 0; i < x->nlabels; i++) {
        const cmd_ts_shown_t *l = &x->labels[i];
        json_object_set_new(o, l->name, l->value ? json_stringn(l->value, l->value_len) : json_null());
    }
    return o;
}
