/*
 * ts_filter.c - RedisTimeSeries's label filters (TS.MGET, TS.MRANGE,
 * TS.QUERYINDEX): their syntax, and whether a series matches them.
 */
#include <string.h>

#include "core/ts_impl.h"

bool ts_matcher_parse(const char *s, size_t len, ts_matcher_t *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    const char *eq = memchr(s, '=', len);
    if (!eq) {
        *why = "a filter is label=value, label!=value, label=, label!=, label=(a,b) or label!=(a,b)";
        return false;
    }
    size_t nl = (size_t)(eq - s);
    if (nl > 0 && s[nl - 1] == '!') {
        out->negate = true;
        nl--;
    }
    if (nl == 0) {
        *why = "a filter needs a label name before '=' or '!='";
        return false;
    }
    out->name = s;
    out->name_len = nl;
    for (size_t i = 0; i < nl; i++)
        if (strchr("(),=", s[i])) {
            *why = "a label name cannot contain '(', ')', ',' or '='";
            return false;
        }
    const char *v = eq + 1, *end = s + len;
    if (v == end)
        return true;   /* l= / l!= */
    if (*v == '(') {
        if (end[-1] != ')' || end - v < 2) {
            *why = "a list of values is (a,b,...)";
            return false;
        }
        out->list = true;   /* () is the empty list: l=() matches nothing (RedisTimeSeries) */
        const char *p = v + 1, *stop = end - 1;
        while (p < stop || (p == stop && out->nvalues > 0)) {
            const char *c = memchr(p, ',', (size_t)(stop - p));
            const char *e = c ? c : stop;
            if (e == p) {
                *why = "an empty value in a list of values";
                return false;
            }
            if (out->nvalues == TS_FILTER_MAX_VALUES) {
                *why = "at most 64 values in a list";
                return false;
            }
            for (const char *q = p; q < e; q++)
                if (strchr("()=", *q)) {
                    *why = "a value cannot contain '(', ')', ',' or '='";
                    return false;
                }
            out->value[out->nvalues] = p;
            out->value_len[out->nvalues++] = (size_t)(e - p);
            p = e + 1;
        }
        return true;
    }
    for (const char *q = v; q < end; q++)
        if (strchr("(),=", *q)) {
            *why = "a value cannot contain '(', ')', ',' or '=' (a list is written (a,b))";
            return false;
        }
    out->value[0] = v;
    out->value_len[0] = (size_t)(end - v);
    out->nvalues = 1;
    return true;
}

bool ts_matcher_positive(const ts_matcher_t *m) { return !m->negate && (m->nvalues > 0 || m->list); }

const char *ts_label_get(const ts_t *ts, const char *name, size_t len, size_t *vlen)
{
    for (size_t i = 0; i < ts->nlabels; i++)
        if (ts->labels[i].nlen == len && memcmp(ts->labels[i].name, name, len) == 0) {
            *vlen = ts->labels[i].vlen;
            return ts->labels[i].value;
        }
    return NULL;
}

bool ts_matches(const ts_t *ts, const ts_matcher_t *m, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        size_t vl;
        const char *v = ts_label_get(ts, m[k].name, m[k].name_len, &vl);
        bool in = false;
        for (size_t i = 0; v && i < m[k].nvalues && !in; i++)
            in = m[k].value_len[i] == vl && memcmp(m[k].value[i], v, vl) == 0;
        bool ok;
        if (m[k].nvalues == 0 && !m[k].list)
            ok = m[k].negate ? v != NULL : v == NULL;
        else
            ok = m[k].negate ? !in : in;
        if (!ok)
            return false;
    }
    return true;
}
