/*
 * fuzz_policies.c - the policies file parser (api_policies_load): hostile
 * JSON text, key templates, the line finder for error messages.  A file that
 * loads must then key a request and answer metrics without crashing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/ratelimit.h"

static const char *no_header(void *h, const char *n)
{
    (void)h;
    (void)n;
    return "v";
}

static const char *fixed_ip(void *h)
{
    (void)h;
    return "192.0.2.1";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    api_policies_t *reg = api_policies_create();
    if (!reg)
        return 0;
    size_t n = 0;
    char err[600];
    if (api_policies_load(reg, (const char *)data, size, &n, err, sizeof(err))) {
        /* every policy keys a request with all sources present */
        api_req_t req;
        api_req_init(&req, API_GET, "", 0, 0);
        req.header = no_header;
        req.client_ip = fixed_ip;
        json_t *root = json_loadb((const char *)data, size, 0, NULL);
        json_t *pol = json_object_get(root, "policies");
        const char *name;
        json_t *v;
        policies_read_lock(reg);
        json_object_foreach(pol, name, v) {
            const policy_t *p = policy_find(reg, name);
            if (!p)
                abort();   /* every policy of a loaded file is there */
            char key[KS_KEY_MAX + 1];
            size_t klen;
            api_err_t e;
            if (policy_key(p, &req, "/rest", 5, key, &klen, &e) && klen > KS_KEY_MAX)
                abort();
        }
        policies_read_unlock(reg);
        json_decref(root);
        wbuf_t b = WBUF_INIT;
        api_policies_metrics(reg, &b);
        wbuf_free(&b);
        /* loading again swaps the set */
        api_policies_load(reg, (const char *)data, size, &n, err, sizeof(err));
    } else if (!err[0] || strncmp(err, "line ", 5) != 0) {
        abort();   /* every refusal names a line */
    }
    api_policies_free(reg);
    return 0;
}
