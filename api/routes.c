/*
 * routes.c - every family of routes tallyd serves.  Each api/<family>.c
 * exports one descriptor (API_FAMILY: its routes, static handlers behind
 * them), as an nginx module exports its ngx_module_t; the list is generated
 * at build time (tools/registry.sh) from the API_FAMILY lines themselves, in
 * the files' byte order, so a new family touches no file but its own.  The
 * router flattens it into one table at start-up.  Where two families share
 * a first segment (/admin; /keys, whose dumps are api/dumpkey.c's) their
 * patterns overlap nowhere, so their order decides no match; within a family
 * a literal segment comes before a {parameter} at the same place (GET
 * /geo/nearby before /geo/{key}, so a key may be called "nearby").
 */
#include "api/route.h"

#define REGISTRY(name) extern const api_family_t name;
#include "api_families.inc"
#undef REGISTRY

const api_family_t *const api_families[] = {
#define REGISTRY(name) &name,
#include "api_families.inc"
#undef REGISTRY
};

const size_t api_nfamilies = sizeof(api_families) / sizeof(api_families[0]);
