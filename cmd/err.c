/* err.c - see err.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/err.h"

void cmd_err_set(cmd_err_t *err, cmd_code_t code, const char *field, const char *fmt, ...)
{
    err->code = code;
    snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
    err->long_field = field && strlen(field) >= sizeof(err->field) ? field : NULL;
    err->where[0] = err->node[0] = '\0';
    err->slot = -1;
    err->epoch = 0;
    err->retry_after = 0;
    err->scope = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
}

const char *cmd_err_field(const cmd_err_t *err)
{
    return err->long_field ? err->long_field : err->field[0] ? err->field : NULL;
}

cmd_code_t cmd_status_code(core_status_t st)
{
    switch (st) {
    case CORE_NOMEM:
    case CORE_FULL:
    case CORE_LIMIT:
    case CORE_BUDGET: return CMD_E_OUT_OF_MEMORY;
    case CORE_TOO_OLD:
    case CORE_OVERFLOW:
    case CORE_UNORDERED: return CMD_E_BAD_REQUEST;
    case CORE_DUPLICATE: return CMD_E_EXISTS;
    case CORE_OK: break;
    }
    return CMD_E_INTERNAL;
}

/* In err.c, not ctx.c, so that every file of the layer may fail a request
 * without calling up into the context's lifecycle. */
bool cmd_fail(cmd_ctx_t *ctx, cmd_code_t code, const char *field, const char *fmt, ...)
{
    cmd_err_set(&ctx->err, code, field, "%s", "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err.message, sizeof(ctx->err.message), fmt, ap);
    va_end(ap);
    return false;
}
