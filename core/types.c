/*
 * types.c - the table of value types, by on-disk tag.  The list is
 * generated at build time (tools/registry.sh) from the definitions
 * themselves (`const ks_type_t NAME = {` at the start of a line in core/),
 * so a new type touches no file but its own.  tests/unit/test_cmd_registry.c
 * holds every tag and name ever given: none is changed nor reused.
 */
#include "core/types.h"

#include <string.h>

#define REGISTRY(name) extern const ks_type_t name;
#include "core_types.inc"
#undef REGISTRY

static const ks_type_t *const all_types[] = {
#define REGISTRY(name) &name,
#include "core_types.inc"
#undef REGISTRY
};

const ks_type_t *ks_type_by_tag(unsigned tag)
{
    for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++)
        if (all_types[i]->tag == tag)
            return all_types[i];
    return NULL;
}

const ks_type_t *ks_type_by_name(const char *name)
{
    for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++)
        if (strcmp(all_types[i]->name, name) == 0)
            return all_types[i];
    return NULL;
}

size_t ks_type_count(void) { return sizeof(all_types) / sizeof(all_types[0]); }

const ks_type_t *ks_type_at(size_t i) { return i < ks_type_count() ? all_types[i] : NULL; }
