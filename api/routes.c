/*
 * routes.c - every family of routes tallyd serves, in the order they are
 * matched.  Each api/<family>.c exports one descriptor (api_family_t: its
 * routes, static handlers behind them), as an nginx module exports its
 * ngx_module_t; the router flattens this list into one table at start-up.
 * Within a family, a literal segment comes before a {parameter} at the same
 * place (GET /geo/nearby before /geo/{key}, so a key may be called "nearby").
 */
#include "api/route.h"

extern const api_family_t api_throttle_family;
extern const api_family_t api_hook_family;
extern const api_family_t api_counter_family;
extern const api_family_t api_uv_family;
extern const api_family_t api_bloom_family;
extern const api_family_t api_cuckoo_family;
extern const api_family_t api_ts_family;
extern const api_family_t api_geo_family;
extern const api_family_t api_bits_family;
extern const api_family_t api_activity_family;
extern const api_family_t api_cms_family;
extern const api_family_t api_topk_family;
extern const api_family_t api_tdigest_family;
extern const api_family_t api_dumpkey_family;
extern const api_family_t api_keys_family;
extern const api_family_t api_ops_family;
extern const api_family_t api_repl_family;
extern const api_family_t api_cluster_family;

const api_family_t *const api_families[] = {
    &api_throttle_family,
    &api_hook_family,
    &api_counter_family,
    &api_uv_family,
    &api_bloom_family,
    &api_cuckoo_family,
    &api_ts_family,
    &api_geo_family,
    &api_bits_family,
    &api_activity_family,
    &api_cms_family,
    &api_topk_family,
    &api_tdigest_family,
    &api_dumpkey_family,
    &api_keys_family,
    &api_ops_family,
    &api_repl_family,
    &api_cluster_family,
};

const size_t api_nfamilies = sizeof(api_families) / sizeof(api_families[0]);
