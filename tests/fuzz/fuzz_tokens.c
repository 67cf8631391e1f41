/*
 * fuzz_tokens.c - the token file decoder (api_tokens_parse): hostile JSON
 * text.  A refusal must say why; a set that loads must hold what the
 * decoder promises (names, scopes, non-empty prefixes) and authenticate a
 * request made with a token of it without crashing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[600] = "";
    api_tokens_t *t = api_tokens_parse((const char *)data, size, err, sizeof(err));
    if (!t) {
        if (!err[0])
            abort();   /* every refusal says why */
        return 0;
    }
    for (size_t i = 0; i < t->n; i++) {
        const api_token_t *k = &t->v[i];
        if (!k->name[0] || strlen(k->name) > API_TOKEN_NAME_MAX || !k->scopes || k->scopes > 15)
            abort();
        for (size_t j = 0; j < k->nprefixes; j++)
            if (k->prefix_len[j] == 0 || strlen(k->prefixes[j]) != k->prefix_len[j])
                abort();
    }
    /* the set installed on a server: a key checked against every token */
    api_auth_t *a = api_auth_create(10, false);
    if (a) {
        api_auth_install(a, t);
        api_req_t req;
        api_req_init(&req, API_GET, "/", 1, 0);
        api_tokens_t *held = t;
        for (size_t i = 0; i < held->n; i++) {
            req.token = &held->v[i];
            (void)api_auth_key_visible(&req, "api:key", 7);
        }
        if (api_auth_token_count(a) != held->n)
            abort();
        api_auth_free(a);
    } else {
        api_tokens_release(t);
    }
    return 0;
}
