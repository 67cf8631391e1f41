/* keycreate.c - see keycreate.h. */
#include "cmd/keycreate.h"

bool cmd_create_key(cmd_ctx_t *ctx, const char *key, size_t klen, const ks_type_t *type, void *value,
                    void (*fill)(const void *value, void *res), void *res)
{
    if (!value)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory creating the %s", type->name);
    cmd_key_t h;
    if (!cmd_key_open(ctx, key, klen, type, CMD_READ, &h)) {
        type->free(value);
        return false;
    }
    if (h.e) {
        cmd_key_close(&h, false);
        type->free(value);
        return cmd_fail(ctx, CMD_E_EXISTS, NULL, "a %s already exists at this key", type->name);
    }
    if (!cmd_key_add(&h, type, value, KS_NO_EXPIRY)) {
        cmd_key_close(&h, false);
        type->free(value);
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "out of memory creating the %s", type->name);
    }
    if (fill)
        fill(cmd_key_value(&h), res);   /* the stored value: an inline type's is inside the entry now */
    cmd_key_close(&h, true);
    return true;
}
