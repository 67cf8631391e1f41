/*
 * router.c - matches a request against the route table and runs the handler.
 *
 * Matching works on decoded path segments.  A path that matches some route's
 * pattern but not with this method gets 405 with an Allow header; a path that
 * matches no pattern gets 404.  Path segments are percent-decoded one by one,
 * so `/uv/page%2Fhome` addresses the key "page/home".  Query strings are
 * decoded as HTML forms do ('+' is a space, %XX a byte), which is what HTTP
 * client libraries produce.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/routes.h"

/* ------------------------------------------------------------------------ */
/* Methods                                                                  */
/* ------------------------------------------------------------------------ */

static const struct {
    api_method_t m;
    const char *name;
} method_names[] = {
    { API_GET, "GET" },       { API_HEAD, "HEAD" },   { API_POST, "POST" },
    { API_PUT, "PUT" },       { API_DELETE, "DELETE" }, { API_PATCH, "PATCH" },
    { API_OPTIONS, "OPTIONS" }, { API_ANY, "ANY" },
};

const char *api_method_name(api_method_t m)
{
    for (size_t i = 0; i < sizeof(method_names) / sizeof(method_names[0]); i++)
        if (method_names[i].m == m)
            return method_names[i].name;
    return "OTHER";
}

api_method_t api_method_parse(const char *s)
{
    for (size_t i = 0; i < sizeof(method_names) / sizeof(method_names[0]); i++)
        if (method_names[i].m != API_ANY && strcmp(method_names[i].name, s) == 0)
            return method_names[i].m;
    return API_OTHER;
}

size_t api_route_count(void) { return api_nroutes; }

api_route_meta_t api_route_meta(size_t i)
{
    api_route_meta_t m = { api_routes[i].pattern, api_method_name(api_routes[i].method) };
    return m;
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                 */
/* ------------------------------------------------------------------------ */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes s[0..n) into a new NUL-terminated string; NULL on a bad escape or
 * allocation failure (*bad distinguishes them). */
static char *pct_decode(const char *s, size_t n, bool plus_is_space, size_t *out_len, bool *bad)
{
    char *out = malloc(n + 1);
    if (!out) {
        *bad = false;
        return NULL;
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int hi, lo;
            if (n - i < 3 || (hi = hexval(s[i + 1])) < 0 || (lo = hexval(s[i + 2])) < 0) {
                free(out);
                *bad = true;
                return NULL;
            }
            out[j++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out[j++] = ' ';
        } else {
            out[j++] = c;
        }
    }
    out[j] = '\0';
    *out_len = j;
    return out;
}

static bool split_path(api_req_t *req, api_resp_t *resp)
{
    const char *p = req->path;
    size_t n = req->path_len;
    if (n == 0 || p[0] != '/') {
        api_error(resp, API_E_BAD_REQUEST, "the request path must start with '/'");
        return false;
    }
    size_t i = 1;
    for (;;) {
        size_t start = i;
        while (i < n && p[i] != '/')
            i++;
        if (req->nseg == API_MAX_SEGMENTS) {
            api_error(resp, API_E_NOT_FOUND, "no such route");
            return false;
        }
        bool bad;
        size_t len;
        char *seg = pct_decode(p + start, i - start, false, &len, &bad);
        if (!seg) {
            if (bad)
                api_error(resp, API_E_BAD_REQUEST, "malformed percent-encoding in the path");
            else
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory decoding the path");
            return false;
        }
        req->seg[req->nseg] = seg;
        req->seg_len[req->nseg] = len;
        req->nseg++;
        if (i >= n)
            break;
        i++;   /* skip '/' */
    }
    return true;
}

static bool parse_query(api_req_t *req, api_resp_t *resp)
{
    if (!req->query || req->query_len == 0)
        return true;
    size_t count = 1;
    for (size_t i = 0; i < req->query_len; i++)
        if (req->query[i] == '&')
            count++;
    if (count > API_MAX_PARAMS) {
        api_error(resp, API_E_BAD_REQUEST, "too many query parameters (at most %d)", API_MAX_PARAMS);
        return false;
    }
    req->params = calloc(count, sizeof(*req->params));
    if (!req->params) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory decoding the query");
        return false;
    }
    const char *q = req->query;
    size_t n = req->query_len, i = 0;
    while (i <= n) {
        size_t start = i;
        while (i < n && q[i] != '&')
            i++;
        size_t end = i;
        i++;
        if (end == start)
            continue;   /* "a=1&&b=2" */
        size_t eq = start;
        while (eq < end && q[eq] != '=')
            eq++;
        bool bad;
        size_t nlen, vlen;
        char *name = pct_decode(q + start, eq - start, true, &nlen, &bad);
        char *value = name ? pct_decode(q + (eq < end ? eq + 1 : end), eq < end ? end - eq - 1 : 0, true,
                                        &vlen, &bad)
                           : NULL;
        if (!value) {
            free(name);
            if (bad)
                api_error(resp, API_E_BAD_REQUEST, "malformed percent-encoding in the query string");
            else
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory decoding the query");
            return false;
        }
        api_param_t *pp = &req->params[req->nparams++];
        pp->name = name;
        pp->value = value;
        pp->vlen = vlen;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Matching                                                                 */
/* ------------------------------------------------------------------------ */

/* Does the decoded path match the pattern?  Pattern segments are compared
 * without allocating: literal segments byte for byte, `{x}` any one segment,
 * a final `{x...}` any remainder. */
static bool route_matches(const api_route_t *r, const api_req_t *req)
{
    const char *p = r->pattern + 1;   /* skip leading '/' */
    int si = 0;
    for (;;) {
        const char *end = strchr(p, '/');
        size_t plen = end ? (size_t)(end - p) : strlen(p);
        bool param = plen >= 2 && p[0] == '{' && p[plen - 1] == '}';
        if (param && plen >= 5 && memcmp(p + plen - 4, "...}", 4) == 0)
            return si <= req->nseg;
        if (si >= req->nseg)
            return false;
        if (!param && (req->seg_len[si] != plen || memcmp(req->seg[si], p, plen) != 0))
            return false;
        si++;
        if (!end)
            return si == req->nseg;
        p = end + 1;
    }
}

const char *api_path_param(const api_req_t *req, const char *name, size_t *len)
{
    if (!req->route)
        return NULL;
    size_t nlen = strlen(name);
    const char *p = req->route->pattern + 1;
    int si = 0;
    for (;;) {
        const char *end = strchr(p, '/');
        size_t plen = end ? (size_t)(end - p) : strlen(p);
        if (plen == nlen + 2 && p[0] == '{' && memcmp(p + 1, name, nlen) == 0 && p[plen - 1] == '}') {
            if (si >= req->nseg)
                return NULL;
            if (len)
                *len = req->seg_len[si];
            return req->seg[si];
        }
        if (!end)
            return NULL;
        si++;
        p = end + 1;
    }
}

void api_dispatch(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    /* not memset: the header array is large and written only as used */
    resp->status = 0;
    resp->ctype = NULL;
    resp->body = NULL;
    resp->len = 0;
    resp->nheaders = 0;
    resp->journal_lsn = 0;
    resp->route_index = -1;
    if (!split_path(req, resp))
        return;

    const api_route_t *match = NULL;
    char allow[96] = "";
    for (size_t i = 0; i < api_nroutes; i++) {
        const api_route_t *r = &api_routes[i];
        if (!route_matches(r, req))
            continue;
        if (r->method == API_ANY || r->method == req->method) {
            match = r;
            resp->route_index = (int)i;
            break;
        }
        if (resp->route_index < 0)
            resp->route_index = (int)i;
        size_t al = strlen(allow);
        snprintf(allow + al, sizeof(allow) - al, "%s%s", al ? ", " : "", api_method_name(r->method));
    }
    if (!match) {
        if (resp->route_index >= 0) {
            api_error(resp, API_E_METHOD_NOT_ALLOWED, "method %s is not allowed here; allowed: %s",
                      api_method_name(req->method), allow);
            api_add_header(resp, "Allow", "%s", allow);
        } else {
            api_error(resp, API_E_NOT_FOUND, "no such route");
        }
        return;
    }
    req->route = match;
    if (!parse_query(req, resp))
        return;
    match->handler(srv, req, resp);
}

void api_req_release(api_req_t *req)
{
    for (int i = 0; i < req->nseg; i++)
        free(req->seg[i]);
    req->nseg = 0;
    for (int i = 0; i < req->nparams; i++) {
        free(req->params[i].name);
        free(req->params[i].value);
    }
    free(req->params);
    req->params = NULL;
    req->nparams = 0;
    json_decref(req->json);
    req->json = NULL;
}

void api_resp_release(api_resp_t *resp)
{
    free(resp->body);
    resp->body = NULL;
}
