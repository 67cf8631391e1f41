/* routes.c - every route tallyd serves, in one table (see routes.h). */
#include "api/routes.h"

const api_route_t api_routes[] = {
    /* rate limiting */
    { API_POST,   "/throttle",             h_throttle_post },
    { API_GET,    "/throttle/{key}",       h_throttle_get },
    { API_DELETE, "/throttle/{key}",       h_throttle_delete },
    { API_ANY,    "/hook/{policy}/{path...}", h_hook },
    { API_POST,   "/counter/{key}",        h_counter_post },
    { API_GET,    "/counter/{key}",        h_counter_get },

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
