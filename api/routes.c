/* routes.c - every route tallyd serves, in one table (see routes.h). */
#include "api/routes.h"

const api_route_t api_routes[] = {
    /* rate limiting */
    { API_POST,   "/throttle",             h_throttle_post },
    { API_GET,    "/throttle/{key}",       h_throttle_get },
    { API_DELETE, "/throttle/{key}",       h_throttle_delete },

    /* bitmaps (api/bits.c) */
    { API_PUT,    "/bits/{key}",           h_bits_put },
    { API_GET,    "/bits/{key}",           h_bits_get },
    { API_POST,   "/bits/{key}/setbit",    h_bits_setbit },
    { API_GET,    "/bits/{key}/getbit",    h_bits_getbit },
    { API_GET,    "/bits/{key}/count",     h_bits_count },
    { API_GET,    "/bits/{key}/pos",       h_bits_pos },
    { API_POST,   "/bits/{key}/op",        h_bits_op },
    { API_POST,   "/bits/{key}/field",     h_bits_field },

    /* activity analytics (api/activity.c) */
    { API_POST,   "/activity/{key}",           h_activity_add },
    { API_GET,    "/activity/{key}",           h_activity_info },
    { API_POST,   "/activity/{key}/import",    h_activity_import },
    { API_GET,    "/activity/{key}/count",     h_activity_count },
    { API_GET,    "/activity/{key}/users",     h_activity_users },
    { API_GET,    "/activity/{key}/retention", h_activity_retention },

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
