/* pattern.c - see pattern.h. */
#include <string.h>

#include "api/request.h"
#include "api/pattern.h"

void api_pattern_compile(api_pattern_t *c, const char *pattern)
{
    const char *p = pattern + 1;
    for (;;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        bool param = len >= 2 && p[0] == '{' && p[len - 1] == '}';
        if (param && len >= 5 && memcmp(p + len - 4, "...}", 4) == 0) {
            c->rest = true;
            c->seg[c->nseg].text = p + 1;
            c->seg[c->nseg].len = len - 5;
            break;   /* the rest parameter's name sits after the counted segments */
        }
        c->seg[c->nseg].text = param ? p + 1 : p;
        c->seg[c->nseg].len = param ? len - 2 : len;
        c->seg[c->nseg].param = param;
        c->nseg++;
        if (!end)
            break;
        p = end + 1;
    }
}

bool api_pattern_matches(const api_pattern_t *c, const api_req_t *req)
{
    if (c->rest ? req->nseg < c->nseg : req->nseg != c->nseg)
        return false;
    for (int i = 0; i < c->nseg; i++) {
        const api_pattern_seg_t *s = &c->seg[i];
        if (!s->param && (req->seg_len[i] != s->len || memcmp(req->seg[i], s->text, s->len) != 0))
            return false;
    }
    return true;
}

/* The {parameter} of the route the request was matched to (api/pattern.h). */
const char *api_path_param(const api_req_t *req, const char *name, size_t *len)
{
    const api_pattern_t *c = req->pattern;
    if (!c)
        return NULL;
    size_t nlen = strlen(name);
    for (int i = 0; i < c->nseg; i++)
        if (c->seg[i].param && c->seg[i].len == nlen && memcmp(c->seg[i].text, name, nlen) == 0) {
            if (len)
                *len = req->seg_len[i];
            return req->seg[i];
        }
    return NULL;
}
