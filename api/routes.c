/* routes.c - every route tallyd serves, in one table (see routes.h). */
#include "api/routes.h"

const api_route_t api_routes[] = {
    /* rate limiting */
    { API_POST,   "/throttle",             h_throttle_post },
    { API_GET,    "/throttle/{key}",       h_throttle_get },
    { API_DELETE, "/throttle/{key}",       h_throttle_delete },

    /* time series (RedisTimeSeries) */
    { API_PUT,    "/ts/{key}",             h_ts_create },
    { API_POST,   "/ts/{key}",             h_ts_add },
    { API_GET,    "/ts/{key}",             h_ts_info },
    { API_GET,    "/ts/{key}/range",       h_ts_range },
    { API_GET,    "/ts/{key}/revrange",    h_ts_revrange },
    { API_DELETE, "/ts/{key}/range",       h_ts_delete_range },

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
