/* guard.c - see guard.h. */
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/guard.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GUARD_NAME_MAX 190       /* an origin or host name; fits a response header value (192) */
/* What a browser may read from an answer besides the simple headers. */
#define GUARD_EXPOSED "RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After"
/* Request headers a page may send: the body's type and a bearer token. */
#define GUARD_ALLOWED_HEADERS "Content-Type, Authorization"
#define GUARD_PREFLIGHT_MAX_AGE 600   /* seconds a browser may cache a preflight answer */

typedef struct name_list {
    char **names;
    size_t n;
} name_list_t;

struct api_guard {
    name_list_t origins;
    bool any_origin;             /* "*" in --allow-origin */
    name_list_t hosts;
    bool loopback;
};

static void list_free(name_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    l->names = NULL;
    l->n = 0;
}

/* A well-formed origin: http:// or https://, a host, an optional port, no
 * path (what browsers send in Origin). */
static bool origin_ok(const char *s, size_t n)
{
    size_t skip = n > 8 && !strncasecmp(s, "https://", 8) ? 8 : n > 7 && !strncasecmp(s, "http://", 7) ? 7 : 0;
    if (!skip)
        return false;
    for (size_t i = skip; i < n; i++)
        if (s[i] == '/' || s[i] == ' ' || s[i] == '?' || s[i] == '#')
            return false;
    return true;
}

/* Splits a comma-separated list into l (entries trimmed, empty ones
 * dropped, a trailing dot of a host name removed).  `what` names the
 * option in messages; origins are checked with origin_ok. */
static bool list_parse(const char *text, name_list_t *l, bool origins, bool *any, char *err, size_t errlen)
{
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ',';
    l->names = calloc(cap, sizeof(char *));
    l->n = 0;
    if (!l->names) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    for (const char *p = text;;) {
        size_t len = strcspn(p, ",");
        const char *s = p;
        size_t n = len;
        while (n && (*s == ' ' || *s == '\t')) {
            s++;
            n--;
        }
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || (!origins && s[n - 1] == '.')))
            n--;
        if (n) {
            if (origins && n == 1 && *s == '*') {
                *any = true;
            } else if (n > GUARD_NAME_MAX || (origins && !origin_ok(s, n))) {
                snprintf(err, errlen, "%s: '%.*s' is not %s", origins ? "--allow-origin" : "--allow-host",
                         (int)(n > 64 ? 64 : n), s,
                         origins ? "an origin (scheme://host[:port], e.g. https://app.example.com, or *)"
                                 : "a host name of at most 190 characters");
                list_free(l);
                return false;
            } else if (!(l->names[l->n++] = strndup(s, n))) {
                snprintf(err, errlen, "out of memory");
                list_free(l);
                return false;
            }
        }
        if (!p[len])
            return true;
        p += len + 1;
    }
}

api_guard_t *api_guard_create(const char *origins, const char *hosts, bool loopback, char *err, size_t errlen)
{
    api_guard_t *g = calloc(1, sizeof(*g));
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->loopback = loopback;
    if (!list_parse(origins ? origins : "", &g->origins, true, &g->any_origin, err, errlen) ||
        !list_parse(hosts ? hosts : "", &g->hosts, false, NULL, err, errlen)) {
        api_guard_free(g);
        return NULL;
    }
    return g;
}

void api_guard_free(api_guard_t *g)
{
    if (!g)
        return;
    list_free(&g->origins);
    list_free(&g->hosts);
    free(g);
}

/* ------------------------------------------------------------------------ */
/* The checks                                                               */
/* ------------------------------------------------------------------------ */

static const char *header(const api_req_t *req, const char *name)
{
    const char *v = req->header ? req->header(req->hctx, name) : NULL;
    return v && *v ? v : NULL;
}

static bool in_list(const name_list_t *l, const char *s, size_t n)
{
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->names[i]) == n && !strncasecmp(l->names[i], s, n))
            return true;
    return false;
}

/* Whether a Host header value may reach a loopback-bound tallyd. */
static bool host_ok(const api_guard_t *g, const char *host)
{
    char buf[GUARD_NAME_MAX + 2];
    if (host[0] == '[') {   /* [IPv6]:port */
        const char *end = strchr(host, ']');
        size_t n = end ? (size_t)(end - host - 1) : 0;
        if (!end || n >= sizeof(buf) || (end[1] && end[1] != ':'))
            return false;
        memcpy(buf, host + 1, n);
        buf[n] = '\0';
        unsigned char a6[16];
        return inet_pton(AF_INET6, buf, a6) == 1;
    }
    size_t n = strcspn(host, ":");
    if (host[n] && strchr(host + n + 1, ':'))
        return false;   /* an IPv6 literal must be bracketed */
    /* what local clients send nearly always, answered without a copy and
     * inet_pton (the same verdict as below) */
    if (n == 9 && (!memcmp(host, "127.0.0.1", 9) || !memcmp(host, "localhost", 9)))
        return true;
    while (n && host[n - 1] == '.')
        n--;            /* "localhost." is localhost */
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, host, n);
    buf[n] = '\0';
    unsigned char a4[4];
    return inet_pton(AF_INET, buf, a4) == 1 || !strcasecmp(buf, "localhost") || in_list(&g->hosts, buf, n);
}

static bool origin_allowed(const api_guard_t *g, const char *origin)
{
    return g->any_origin || in_list(&g->origins, origin, strlen(origin));
}

/* Whether the request's body arrives in a type the route reads. */
static bool body_type_ok(const api_req_t *req, const api_route_t *route, const char **want)
{
    bool binary = route->flags & API_ROUTE_BINARY;
    *want = binary ? "application/octet-stream" : "application/json";
    const char *ct = req->ctype && *req->ctype ? req->ctype : NULL;
    if (!ct)
        return req->body_len == 0;
    if (binary)
        return api_media_type_is(ct, "application/octet-stream");
    if (api_media_type_is(ct, "application/json"))
        return true;
    /* application/<something>+json */
    size_t n = strcspn(ct, "; \t");
    return n > 17 && !strncasecmp(ct, "application/", 12) && !strncasecmp(ct + n - 5, "+json", 5);
}

static void cors_headers(const char *origin, api_resp_t *resp)
{
    api_add_header(resp, "Access-Control-Allow-Origin", "%s", origin);
    api_add_header(resp, "Vary", "Origin");
}

bool api_guard_request(const api_guard_t *g, const api_req_t *req, const api_route_t *path_route,
                       const api_route_t *match, const char *allow, api_resp_t *resp)
{
    if (!g || req->replay || (path_route && (path_route->flags & API_ROUTE_GATEWAY)))
        return true;
    const char *host = g->loopback ? header(req, "Host") : NULL;
    if (host && !host_ok(g, host)) {
        api_error(resp, API_E_MISDIRECTED,
                  "Host '%.100s' is not served here: tallyd on a loopback address answers only IP addresses, "
                  "localhost and the names in --allow-host (a DNS-rebinding page sends its own name)",
                  host);
        return false;
    }
    const char *origin = header(req, "Origin");
    if (origin && !origin_allowed(g, origin)) {
        api_error(resp, API_E_FORBIDDEN,
                  "requests from the browser origin '%.100s' are not allowed (add it to --allow-origin)", origin);
        return false;
    }
    if (origin && req->method == API_OPTIONS && path_route && allow && header(req, "Access-Control-Request-Method")) {
        api_body(resp, 204, NULL, "", 0);
        cors_headers(origin, resp);
        api_add_header(resp, "Access-Control-Allow-Methods", "%s", allow);
        api_add_header(resp, "Access-Control-Allow-Headers", GUARD_ALLOWED_HEADERS);
        api_add_header(resp, "Access-Control-Max-Age", "%d", GUARD_PREFLIGHT_MAX_AGE);
        return false;
    }
    const char *want;
    if (match && req->method != API_GET && req->method != API_HEAD && req->method != API_OPTIONS &&
        !body_type_ok(req, match, &want)) {
        const char *ct = req->ctype && *req->ctype ? req->ctype : NULL;
        if (ct)
            api_error(resp, API_E_UNSUPPORTED_MEDIA_TYPE, "%s %s takes Content-Type: %s, not %.80s",
                      api_method_name(req->method), match->pattern, want, ct);
        else
            api_error(resp, API_E_UNSUPPORTED_MEDIA_TYPE, "%s %s takes a body with Content-Type: %s (it came without one)",
                      api_method_name(req->method), match->pattern, want);
        return false;
    }
    return true;
}

void api_guard_cors(const api_guard_t *g, const api_req_t *req, const api_route_t *path_route, api_resp_t *resp)
{
    /* without --allow-origin no origin is allowed (api_guard_request refused
     * any request that carried one): no second look at the headers */
    if (!g || (!g->any_origin && g->origins.n == 0) || req->replay ||
        (path_route && (path_route->flags & API_ROUTE_GATEWAY)))
        return;
    const char *origin = header(req, "Origin");
    if (!origin || !origin_allowed(g, origin))
        return;
    for (int i = 0; i < resp->nheaders; i++)
        if (!strcmp(resp->headers[i].name, "Access-Control-Allow-Origin"))
            return;   /* a preflight's answer has its own */
    cors_headers(origin, resp);
    api_add_header(resp, "Access-Control-Expose-Headers", GUARD_EXPOSED);
}
