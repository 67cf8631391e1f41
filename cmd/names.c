/* names.c - see names.h. */
#include <stdio.h>

#include "cmd/names.h"

const char *cmd_type_noun(const ks_type_t *type) { return type && type->noun ? type->noun : "a value"; }

void cmd_type_missing(const ks_type_t *type, char *out, size_t n)
{
    if (!type)
        snprintf(out, n, "no such key");
    else if (type->missing)
        snprintf(out, n, "%s", type->missing);
    else
        snprintf(out, n, "no such key (create the %s with PUT /%s/{key})", type->name, type->name);
}
