/*
 * fuzz_tokens.c - the token file decoder (api_tokens_parse): hostile JSON
 * text.  A refusal must say why; a set that loads must hold what the
 * decoder promises (names, scopes - replicate included -, non-empty
 * prefixes), and, installed on a server, answer requests with 401, 403, 429
 * or a handler's answer.  Input: the token file, then optionally a blank
 * line and the Authorization header those requests send (the bearer parser
 * on hostile bytes).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/request.h"
#include "api/router.h"
#include "core/keyspace.h"

/* The Authorization header of the input (other headers: none). */
static const char *header_of(void *h, const char *name)
{
    return strcmp(name, "Authorization") == 0 ? h : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *sep = memmem(data, size, "\n\n", 2);
    size_t flen = sep ? (size_t)(sep - data) : size;
    const uint8_t *hdr = sep ? sep + 2 : data;
    size_t hlen = sep ? size - flen - 2 : size;
    char err[600] = "";
    api_tokens_t *t = api_tokens_parse((const char *)data, flen, err, sizeof(err));
    if (!t) {
        if (!err[0])
            abort();   /* every refusal says why */
        return 0;
    }
    for (size_t i = 0; i < t->n; i++) {
        const api_token_t *k = &t->v[i];
        if (!k->name[0] || strlen(k->name) > API_TOKEN_NAME_MAX || !k->scopes || k->scopes > API_SCOPES_ALL)
            abort();
        for (size_t j = 0; j < k->nprefixes; j++)
            if (k->prefix_len[j] == 0 || strlen(k->prefixes[j]) != k->prefix_len[j])
                abort();
    }
    /* the set installed on a server */
    api_server_t srv = { 0 };
    srv.auth = api_auth_create(2, false);
    srv.ks = ks_create(2, 1);
    if (!srv.auth || !srv.ks) {
        api_tokens_release(t);
        api_auth_free(srv.auth);
        ks_free(srv.ks);
        return 0;
    }
    size_t n = t->n;
    api_auth_install(srv.auth, t);
    if (api_auth_token_count(srv.auth) != n)
        abort();
    char header[API_TOKEN_MAX_LEN + 16];
    size_t hl = hlen < sizeof(header) - 1 ? hlen : sizeof(header) - 1;
    memcpy(header, hdr, hl);
    header[hl] = '\0';   /* up to the first NUL, as a header value would be */
    /* a data route, a listing, a probe, and a replication route (it needs the
     * replicate scope; past it, this server without replication answers 503) */
    static const char *const paths[] = { "/counter/api:key", "/keys", "/healthz", "/replication/epoch" };
    for (int i = 0; i < 4; i++) {
        api_req_t req;
        api_req_init(&req, API_GET, paths[i], strlen(paths[i]), INT64_C(1700000000000000000) + i);
        req.header = header_of;
        req.hctx = header;
        api_resp_t resp;
        api_dispatch(&srv, &req, &resp);
        if (resp.status != 200 && resp.status != 401 && resp.status != 403 && resp.status != 404 &&
            resp.status != 429 && !(i == 3 && resp.status == 503))
            abort();
        api_resp_release(&resp);
        api_req_release(&req);
    }
    api_auth_free(srv.auth);
    ks_free(srv.ks);
    return 0;
}
