/*
 * fuzz_forwarded.c - what tallyd reads from headers a client controls before
 * any handler runs: the client address behind --trusted-proxies
 * (X-Forwarded-For, X-Real-IP; core/cidr.h) and the browser checks (Host,
 * Origin, Content-Type; api/guard.h), with --trusted-proxies,
 * --allow-origin and --allow-host lists from the input too.
 * Input: NUL-separated fields: trusted, peer, X-Forwarded-For, X-Real-IP,
 * Host, Origin, Content-Type, allowed origins, allowed hosts, then a method
 * byte.  The address chosen must lie inside one of the given strings.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/request.h"
#include "api/route.h"
#include "api/guard.h"
#include "core/cidr.h"

#define FIELDS 9

static const char *field[FIELDS];

static const char *header_of(void *h, const char *name)
{
    (void)h;
    if (!strcmp(name, "Host"))
        return field[4];
    if (!strcmp(name, "Origin"))
        return field[5];
    if (!strcmp(name, "Access-Control-Request-Method"))
        return field[6];
    return NULL;
}

static bool inside(const char *p, size_t n, const char *s)
{
    return s && p >= s && p + n <= s + strlen(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    size_t at = 0;
    for (int i = 0; i < FIELDS; i++) {
        field[i] = at <= size ? copy + at : "";
        at += strlen(copy + (at <= size ? at : size)) + 1;
    }
    unsigned char method = at < size ? (unsigned char)copy[at] : 0;

    cidr_set_t trusted;
    char err[200];
    if (cidr_parse(field[0], &trusted, err, sizeof(err))) {
        size_t n;
        const char *xff = *field[2] ? field[2] : NULL, *real = *field[3] ? field[3] : NULL;
        const char *v = cidr_client_addr(&trusted, *field[1] ? field[1] : NULL, xff, real, &n);
        if (v && !inside(v, n, field[1]) && !inside(v, n, xff) && !inside(v, n, real))
            abort();
        cidr_set_free(&trusted);
    }

    api_guard_t *g = api_guard_create(field[7], field[8], method & 1, err, sizeof(err));
    if (g) {
        static const api_route_t routes[] = {
            { API_POST, "/counter/{key}", NULL, 0, API_ACCESS_WRITE, NULL },
            { API_PUT, "/bits/{key}", NULL, API_ROUTE_BINARY, API_ACCESS_WRITE, NULL },
            { API_ANY, "/hook/{policy}/{path...}", NULL, API_ROUTE_GATEWAY, API_ACCESS_RATELIMIT, NULL },
        };
        static const api_method_t methods[] = { API_GET, API_POST, API_PUT, API_DELETE, API_OPTIONS, API_HEAD };
        const api_route_t *r = &routes[(method >> 1) % 3];
        api_req_t req;
        api_req_init(&req, methods[(method >> 3) % 6], "/x", 2, 0);
        req.header = header_of;
        req.ctype = *field[6] ? field[6] : NULL;
        req.body_len = method & 0x80 ? 3 : 0;
        api_resp_t resp;
        api_resp_init(&resp);
        if (!api_guard_request(g, &req, r, (method & 0x40) ? r : NULL, "GET, POST", &resp) &&
            (resp.status < 100 || resp.status > 599))
            abort();
        api_guard_cors(g, &req, r, &resp);
        api_resp_release(&resp);
        api_guard_free(g);
    }
    free(copy);
    return 0;
}
