/*
 * routes.h - the route table's row type and every handler it names.
 *
 * The table itself is in routes.c: one declarative list of
 * {method, pattern, handler} for the whole API.  A pattern segment `{name}`
 * matches one path segment (percent-decoded, read with api_path_param); a last
 * segment `{name...}` matches the rest of the path, possibly empty.
 */
#ifndef TALLY_ROUTES_H
#define TALLY_ROUTES_H

#include "api/api.h"

typedef void (*api_handler_fn)(api_server_t *srv, api_req_t *req, api_resp_t *resp);

struct api_route {
    api_method_t method;
    const char *pattern;
    api_handler_fn handler;
};

/* True for the routes that may change state (and so need journal space
 * before they run): every method but GET and HEAD, the hook and GET
 * /throttle/{key} (decisions), minus the POST routes that only read (listed
 * in routes.c). */
bool api_route_writes(const api_route_t *r);

extern const api_route_t api_routes[];
extern const size_t api_nroutes;

/* api/throttle.c */
void h_throttle_post(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_throttle_get(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_throttle_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/hook.c */
void h_hook(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/counter.c */
void h_counter_post(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_counter_get(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/uv.c */
void h_uv_add(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_uv_get(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_uv_put(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_uv_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/bloom.c */
void h_bloom_reserve(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bloom_add(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bloom_mexists(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bloom_exists(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bloom_info(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/cuckoo.c */
void h_cuckoo_reserve(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cuckoo_add(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cuckoo_mexists(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cuckoo_exists(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cuckoo_remove(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cuckoo_count(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cuckoo_info(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/ts.c */
void h_ts_create(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_ts_add(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_ts_info(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_ts_range(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_ts_revrange(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_ts_delete_range(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/geo.c */
void h_geo_add(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_geo_remove(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_geo_pos(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_geo_dist(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_geo_hash(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_geo_nearby(api_server_t *srv, api_req_t *req, api_resp_t *resp);
/* api/bits.c */
void h_bits_put(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bits_get(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bits_setbit(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bits_getbit(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bits_count(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bits_pos(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bits_op(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_bits_field(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/activity.c */
void h_activity_add(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_activity_info(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_activity_import(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_activity_count(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_activity_users(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_activity_retention(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/cms.c */
void h_cms_put(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cms_incr(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cms_info(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cms_count(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cms_count_post(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_cms_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/topk.c */
void h_topk_put(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_topk_add(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_topk_info(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_topk_list(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_topk_query(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/tdigest.c */
void h_tdigest_put(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_add(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_info(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_quantile(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_cdf(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_rank(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_revrank(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_byrank(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_byrevrank(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_trimmed_mean(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_min(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_max(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_merge(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_tdigest_reset(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/keys.c */
void h_keys_list(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_key_get(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_key_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_key_ttl_put(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_key_ttl_delete(api_server_t *srv, api_req_t *req, api_resp_t *resp);

/* api/ops.c */
void h_index(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_healthz(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_readyz(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_info(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_metrics(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_admin_snapshot(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void h_admin_reload(api_server_t *srv, api_req_t *req, api_resp_t *resp);

#endif
