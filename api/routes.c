/* routes.c - every route tallyd serves, in one table (see routes.h). */
#include "api/routes.h"

const api_route_t api_routes[] = {
    /* rate limiting */
    { API_POST,   "/throttle",             h_throttle_post },
    { API_GET,    "/throttle/{key}",       h_throttle_get },
    { API_DELETE, "/throttle/{key}",       h_throttle_delete },

    /* frequency and quantiles: Count-Min, Top-K, T-Digest */
    { API_PUT,    "/cms/{key}",                    h_cms_put },
    { API_POST,   "/cms/{key}",                    h_cms_incr },
    { API_GET,    "/cms/{key}",                    h_cms_info },
    { API_GET,    "/cms/{key}/count",              h_cms_count },
    { API_POST,   "/cms/{key}/count",              h_cms_count_post },
    { API_POST,   "/cms/{key}/merge",              h_cms_merge },
    { API_PUT,    "/topk/{key}",                   h_topk_put },
    { API_POST,   "/topk/{key}",                   h_topk_add },
    { API_GET,    "/topk/{key}",                   h_topk_info },
    { API_GET,    "/topk/{key}/list",              h_topk_list },
    { API_POST,   "/topk/{key}/query",             h_topk_query },
    { API_PUT,    "/tdigest/{key}",                h_tdigest_put },
    { API_POST,   "/tdigest/{key}",                h_tdigest_add },
    { API_GET,    "/tdigest/{key}",                h_tdigest_info },
    { API_GET,    "/tdigest/{key}/quantile",       h_tdigest_quantile },
    { API_GET,    "/tdigest/{key}/cdf",            h_tdigest_cdf },
    { API_GET,    "/tdigest/{key}/rank",           h_tdigest_rank },
    { API_GET,    "/tdigest/{key}/revrank",        h_tdigest_revrank },
    { API_GET,    "/tdigest/{key}/byrank",         h_tdigest_byrank },
    { API_GET,    "/tdigest/{key}/byrevrank",      h_tdigest_byrevrank },
    { API_GET,    "/tdigest/{key}/trimmed_mean",   h_tdigest_trimmed_mean },
    { API_GET,    "/tdigest/{key}/min",            h_tdigest_min },
    { API_GET,    "/tdigest/{key}/max",            h_tdigest_max },
    { API_POST,   "/tdigest/{key}/merge",          h_tdigest_merge },
    { API_POST,   "/tdigest/{key}/reset",          h_tdigest_reset },

    /* keys */
    { API_GET,    "/keys",                 h_keys_list },
    { API_GET,    "/keys/{key}",           h_key_get },
    { API_DELETE, "/keys/{key}",           h_key_delete },
    { API_PUT,    "/keys/{key}/ttl",       h_key_ttl_put },
    { API_DELETE, "/keys/{key}/ttl",       h_key_ttl_delete },

    /* operations */
    { API_GET,    "/healthz",              h_healthz },
    { API_GET,    "/readyz",               h_readyz },
    { API_GET,    "/info",                 h_info },
    { API_GET,    "/metrics",              h_metrics },
    { API_POST,   "/admin/snapshot",       h_admin_snapshot },
};

const size_t api_nroutes = sizeof(api_routes) / sizeof(api_routes[0]);
