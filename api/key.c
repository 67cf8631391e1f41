/*
 * key.c - whole requests on one key that several families share: an info
 * route and a create route.  The key handle itself is the command layer's
 * (cmd/keys.h).
 */
#include <string.h>

#include "api/api.h"

/* ------------------------------------------------------------------------ */
/* Whole requests: info and create                                          */
/* ------------------------------------------------------------------------ */

void api_answer_info(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                     const ks_type_t *type, json_t *(*info)(const void *value))
{
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, type, API_MUST_EXIST, &h))
        return;
    json_t *answer = info(api_key_value(&h));
    api_key_close(&h, false);
    if (answer)
        api_json(resp, 200, answer);
    else
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
}

void api_create_key(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                    const ks_type_t *type, void *value, json_t *(*info)(const void *value))
{
    if (!value) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory creating the %s", type->name);
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, type, API_READ, &h)) {
        type->free(value);
        return;
    }
    if (h.e) {
        api_key_close(&h, false);
        type->free(value);
        api_error(resp, API_E_EXISTS, "a %s already exists at this key", type->name);
        return;
    }
    if (!api_key_add(&h, type, value, KS_NO_EXPIRY)) {
        api_key_close(&h, false);
        type->free(value);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory creating the %s", type->name);
        return;
    }
    json_t *answer = info ? info(value) : json_pack("{s:b}", "created", 1);
    api_key_close(&h, true);
    api_json(resp, 201, answer);
}
