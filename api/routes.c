/* routes.c - every route tallyd serves, in one table (see routes.h).  A HEAD
 * request is served by the GET route of its path (the router runs the GET
 * handler; the server sends the headers, Content-Length included, without
 * the body). */
#include "api/routes.h"

const api_route_t api_routes[] = {
    /* rate limiting */
    { API_POST,   "/throttle",             h_throttle_post },
    { API_GET,    "/throttle/{key}",       h_throttle_get },
    { API_DELETE, "/throttle/{key}",       h_throttle_delete },
    { API_ANY,    "/hook/{policy}/{path...}", h_hook },
    { API_POST,   "/counter/{key}",        h_counter_post },
    { API_GET,    "/counter/{key}",        h_counter_get },

    /* unique counting (HyperLogLog) */
    { API_POST,   "/uv/{key}",             h_uv_add },
    { API_GET,    "/uv/{key}",             h_uv_get },
    { API_PUT,    "/uv/{key}",             h_uv_put },
    { API_POST,   "/uv/{key}/merge",       h_uv_merge },

    /* membership: Bloom */
    { API_PUT,    "/bloom/{key}",          h_bloom_reserve },
    { API_POST,   "/bloom/{key}",          h_bloom_add },
    { API_GET,    "/bloom/{key}",          h_bloom_info },
    { API_POST,   "/bloom/{key}/exists",   h_bloom_mexists },
    { API_GET,    "/bloom/{key}/exists",   h_bloom_exists },

    /* membership: Cuckoo */
    { API_PUT,    "/cuckoo/{key}",         h_cuckoo_reserve },
    { API_POST,   "/cuckoo/{key}",         h_cuckoo_add },
    { API_GET,    "/cuckoo/{key}",         h_cuckoo_info },
    { API_POST,   "/cuckoo/{key}/exists",  h_cuckoo_mexists },
    { API_GET,    "/cuckoo/{key}/exists",  h_cuckoo_exists },
    { API_POST,   "/cuckoo/{key}/remove",  h_cuckoo_remove },
    { API_GET,    "/cuckoo/{key}/count",   h_cuckoo_count },

    /* time series (RedisTimeSeries) */
    { API_PUT,    "/ts/{key}",             h_ts_create },
    { API_POST,   "/ts/{key}",             h_ts_add },
    { API_GET,    "/ts/{key}",             h_ts_info },
    { API_GET,    "/ts/{key}/range",       h_ts_range },
    { API_GET,    "/ts/{key}/revrange",    h_ts_revrange },
    { API_DELETE, "/ts/{key}/range",       h_ts_delete_range },

    /* geo (GET /geo/nearby before /geo/{key}, so a key may be called "nearby") */
    { API_GET,    "/geo/nearby",           h_geo_nearby },
    { API_POST,   "/geo/{key}",            h_geo_add },
    { API_GET,    "/geo/{key}/pos",        h_geo_pos },
    { API_GET,    "/geo/{key}/dist",       h_geo_dist },
    { API_GET,    "/geo/{key}/hash",       h_geo_hash },
    { API_POST,   "/geo/{key}/remove",     h_geo_remove },

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
    { API_GET,    "/",                     h_index },
    { API_GET,    "/healthz",              h_healthz },
    { API_GET,    "/readyz",               h_readyz },
    { API_GET,    "/info",                 h_info },
    { API_GET,    "/metrics",              h_metrics },
    { API_POST,   "/admin/snapshot",       h_admin_snapshot },
    { API_POST,   "/admin/reload",         h_admin_reload },
};

const size_t api_nroutes = sizeof(api_routes) / sizeof(api_routes[0]);

/* POST routes that never change the keyspace: they need no journal space. */
static const api_handler_fn read_posts[] = {
    h_bloom_mexists, h_cuckoo_mexists, h_cms_count_post, h_topk_query, h_admin_snapshot, h_admin_reload,
};

bool api_route_writes(const api_route_t *r)
{
    if (r->handler == h_throttle_get)
        return true;   /* a rate-limit decision */
    if (r->method == API_GET || r->method == API_HEAD)
        return false;
    for (size_t i = 0; i < sizeof(read_posts) / sizeof(read_posts[0]); i++)
        if (r->handler == read_posts[i])
            return false;
    return true;
}
