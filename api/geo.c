/*
 * geo.c - /geo: Redis GEO commands over HTTP, with Redis's exact numbers.
 *
 *   POST /geo/{key}          {"members":[{"member","lon","lat"}],"nx","xx","ch"}  -> {"added":N} GEOADD
 *        (with "ch":true, N counts members added or whose position changed: GEOADD ... CH)
 *   GET  /geo/{key}/pos?member=a&member=b   -> {"positions":[{"lon","lat"},null]}                  GEOPOS
 *   GET  /geo/{key}/dist?from=&to=&unit=    -> {"distance":1.3878} (null if either is missing)    GEODIST
 *   GET  /geo/{key}/hash?member=a           -> {"hashes":["wx4gdg0tx40",null]}                     GEOHASH
 *        (pos and hash with no `member` answer an empty list, as GEOPOS/GEOHASH with only a key)
 *   POST /geo/{key}/remove   {"members":[..]}                         -> {"removed":N}             ZREM
 *   GET  /geo/nearby?key=&member=|lon=&lat=&radius=|width=&height=&unit=&count=&any=&sort=
 *                   &withdist=&withcoord=&withhash=  -> {"results":[{"member",...}]}          GEOSEARCH
 *   POST /geo/{key}/store?source=&member=|lon=&lat=&radius=|width=&height=&unit=&count=&any=&sort=
 *                   -> {"stored":N}                                            GEOSEARCHSTORE
 *
 * Numbers: positions are the decoded cell centres (GEOPOS), printed as the
 * shortest decimal that reads back as the same double (Redis prints 17
 * decimals of the same double).  Distances are printed with exactly four
 * decimals, the very text Redis replies (so 0.0000, 25.2590), which is a
 * JSON number.  Hashes are the stored 52-bit integers.
 *
 * Missing things answer like Redis: a missing key holds no members (pos and
 * hash give nulls, dist null, nearby no results); a missing member is null
 * in pos, hash and dist; a missing centre member in nearby is 404 (Redis:
 * "could not decode requested zset member").  The key is deleted when its
 * last member is removed.  Units: m, km, ft, mi, any case; a search must
 * name one (`unit`, as Redis's BYRADIUS / BYBOX), GEODIST defaults to m.
 *
 * The adapter of the operations GEOADD, ZREM, GEOPOS, GEOHASH, GEODIST,
 * GEOSEARCH and GEOSEARCHSTORE (cmd/geo.h): it parses and validates, runs
 * the operation and prints its result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/json_out.h"
#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/items.h"
#include "cmd/geo.h"
#include "core/geo.h"


/* ------------------------------------------------------------------------ */
/* Output helpers                                                           */
/* ------------------------------------------------------------------------ */

static void put_str(wbuf_t *b, const char *s) { wbuf_put_bytes(b, s, strlen(s)); }

/* A JSON string of UTF-8 text (members are validated UTF-8 without NUL). */
static void put_json_string(wbuf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    wbuf_put_u8(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        wbuf_put_bytes(b, s + i - run, run);
        run = 0;
        char esc[6] = { '\\', (char)c, 0, 0, 0, 0 };
        size_t el = 2;
        switch (c) {
        case '"': case '\\': break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            el = 6;
        }
        wbuf_put_bytes(b, esc, el);
    }
    wbuf_put_bytes(b, s + n - run, run);
    wbuf_put_u8(b, '"');
}

static void put_u64(wbuf_t *b, uint64_t v)
{
    char tmp[24];
    int k = (int)sizeof(tmp);
    do {
        tmp[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    wbuf_put_bytes(b, tmp + k, sizeof(tmp) - (size_t)k);
}

/* A coordinate as tally prints reals (shortest round-trip text). */
static void put_double(wbuf_t *b, double v)
{
    char num[40];
    if (!geo_format_coord(v, num))
        api_format_double(v, num, sizeof(num));
    put_str(b, num);
}

/* GEODIST's text: four decimals, rounded exactly as Redis rounds them. */
static void put_distance(wbuf_t *b, double v)
{
    char num[40];
    int n = geo_format_distance(v, num, sizeof(num));
    wbuf_put_bytes(b, num, (size_t)n);
}

static void put_lonlat(wbuf_t *b, double lon, double lat)
{
    put_str(b, "{\"lon\":");
    put_double(b, lon);
    put_str(b, ",\"lat\":");
    put_double(b, lat);
    wbuf_put_u8(b, '}');
}

/* Sends the buffer as a 200 JSON answer (or 507 when it ran out of memory). */
static void answer(api_resp_t *resp, wbuf_t *b)
{
    if (b->oom)
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory building the answer");
    else
        api_body(resp, 200, NULL, b->data, b->len);
    wbuf_free(b);
}

/* ------------------------------------------------------------------------ */
/* Input helpers                                                            */
/* ------------------------------------------------------------------------ */

/* Metres per unit, or 0 for an unknown unit (Redis accepts any case). */
static double unit_factor(const char *u)
{
    static const struct {
        const char *name;
        double to_m;
    } units[] = { { "m", GEO_UNIT_M }, { "km", GEO_UNIT_KM }, { "ft", GEO_UNIT_FT }, { "mi", GEO_UNIT_MI } };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcasecmp(u, units[i].name) == 0)
            return units[i].to_m;
    return 0;
}

/* The unit: required for searches (Redis's BYRADIUS and BYBOX take one),
 * metres by default for GEODIST. */
static bool query_unit(const api_req_t *req, api_resp_t *resp, bool required, double *to_m)
{
    const char *u;
    size_t len;
    if (!api_query_string(req, resp, "unit", required, &u, &len))
        return false;
    *to_m = u ? unit_factor(u) : GEO_UNIT_M;
    if (*to_m == 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "unit", "unsupported unit provided. please use M, KM, FT, MI");
        return false;
    }
    return true;
}

static bool lonlat_ok(api_resp_t *resp, const char *field, double lon, double lat)
{
    if (geo_valid_lonlat(lon, lat))
        return true;
    api_error_field(resp, API_E_BAD_REQUEST, field,
                    "invalid longitude,latitude pair %f,%f (longitude -180..180, latitude -85.05112878..85.05112878)",
                    lon, lat);
    return false;
}

/* The query's `name` parameters as members: 0..API_MAX_BATCH (GEOPOS and
 * GEOHASH accept a key alone), each a valid member.  Fills names/lens (caller
 * frees both). */
static bool query_members(const api_req_t *req, api_resp_t *resp, const char *name, const char ***names,
                          size_t **lens, size_t *n)
{
    size_t count = api_query_count(req, name);
    if (count > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, name, "%zu members given; the limit is %d per request", count,
                        API_MAX_BATCH);
        return false;
    }
    *names = malloc((count ? count : 1) * sizeof(**names));   /* count == 0: an empty list */
    *lens = malloc((count ? count : 1) * sizeof(**lens));
    if (!*names || !*lens) {
        free(*names);
        free(*lens);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return false;
    }
    size_t k = 0;
    for (int i = 0; i < req->nparams; i++) {
        if (strcmp(req->params[i].name, name) != 0)
            continue;
        if (!api_check_key(resp, name, req->params[i].value, req->params[i].vlen)) {
            free(*names);
            free(*lens);
            return false;
        }
        (*names)[k] = req->params[i].value;
        (*lens)[k] = req->params[i].vlen;
        k++;
    }
    *n = k;
    return true;
}

/* ------------------------------------------------------------------------ */
/* POST /geo/{key}: GEOADD                                                  */
/* ------------------------------------------------------------------------ */

/* The members of a GEOADD body: names, lengths and scores (one block). */
typedef struct add_items {
    const char **p;
    size_t *len;
    uint64_t *score;
    size_t n;
} add_items_t;

static bool parse_add_items(api_resp_t *resp, json_t *body, add_items_t *items)
{
    json_t *arr = json_object_get(body, "members");
    if (!arr) {
        api_error_field(resp, API_E_BAD_REQUEST, "members", "missing field 'members'");
        return false;
    }
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "members",
                        "'members' must be a non-empty array of {\"member\",\"lon\",\"lat\"}");
        return false;
    }
    size_t count = json_array_size(arr);
    if (count > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "members", "%zu members given; the limit is %d per request", count,
                        API_MAX_BATCH);
        return false;
    }
    void *block = malloc(count * (sizeof(*items->p) + sizeof(*items->len) + sizeof(*items->score)));
    if (!block) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return false;
    }
    items->p = block;
    items->len = (size_t *)(items->p + count);
    items->score = (uint64_t *)(items->len + count);
    items->n = count;
    for (size_t i = 0; i < count; i++) {
        json_t *o = json_array_get(arr, i);
        char field[48];
        snprintf(field, sizeof(field), "members[%zu]", i);
        if (!json_is_object(o)) {
            api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' must be an object {\"member\",\"lon\",\"lat\"}",
                            field);
            goto fail;
        }
        const char *name;
        json_t *v;
        json_object_foreach(o, name, v) {
            if (strcmp(name, "member") && strcmp(name, "lon") && strcmp(name, "lat")) {
                api_error_field(resp, API_E_BAD_REQUEST, field, "unknown field '%s' in '%s'", name, field);
                goto fail;
            }
        }
        json_t *m = json_object_get(o, "member"), *lon = json_object_get(o, "lon"), *lat = json_object_get(o, "lat");
        if (!json_is_string(m)) {
            api_error_field(resp, API_E_BAD_REQUEST, field, "'%s.member' must be a string", field);
            goto fail;
        }
        if (!json_is_number(lon) || !json_is_number(lat)) {
            api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' needs numbers 'lon' and 'lat'", field);
            goto fail;
        }
        items->p[i] = json_string_value(m);
        items->len[i] = json_string_length(m);
        if (!api_check_key(resp, field, items->p[i], items->len[i]) ||
            !lonlat_ok(resp, field, json_number_value(lon), json_number_value(lat)))
            goto fail;
        items->score[i] = geohash_score(json_number_value(lon), json_number_value(lat));
    }
    return true;
fail:
    free(block);
    return false;
}

static void h_geo_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "members", "nx", "xx", "ch", NULL };
    cmd_geoadd_args_t a = { 0 };
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)) || !api_obj_bool(resp, body, "nx", &a.nx, NULL) ||
        !api_obj_bool(resp, body, "xx", &a.xx, NULL) || !api_obj_bool(resp, body, "ch", &a.ch, NULL))
        return;
    if (a.nx && a.xx) {
        api_error_field(resp, API_E_BAD_REQUEST, "xx", "'nx' and 'xx' cannot both be true");
        return;
    }
    add_items_t items;
    if (!parse_add_items(resp, body, &items))
        return;
    a.members = cmd_items_of(items.p, items.len, items.score, items.n);
    cmd_geo_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_GEOADD, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "added", (json_int_t)r.n));
    free(items.p);
}

/* ------------------------------------------------------------------------ */
/* POST /geo/{key}/remove: ZREM                                             */
/* ------------------------------------------------------------------------ */

static void h_geo_remove(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "members", NULL };
    cmd_geo_members_args_t a = { 0 };
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
        return;
    json_t *arr = json_object_get(body, "members");
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "members", "'members' must be a non-empty array of strings");
        return;
    }
    size_t n = json_array_size(arr);
    if (n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "members", "%zu members given; the limit is %d per request", n,
                        API_MAX_BATCH);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(arr, i);
        char field[32];
        snprintf(field, sizeof(field), "members[%zu]", i);
        if (!json_is_string(m)) {
            api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' must be a string", field);
            return;
        }
        if (!api_check_key(resp, field, json_string_value(m), json_string_length(m)))
            return;
    }
    api_items_t it;
    api_err_t err;
    if (!api_err_answered(resp, api_items_alloc(n, &it, &err), &err))
        return;
    for (size_t i = 0; i < n; i++) {
        it.p[i] = json_string_value(json_array_get(arr, i));
        it.len[i] = json_string_length(json_array_get(arr, i));
    }
    a.members = cmd_items_of(it.p, it.len, NULL, n);
    cmd_geo_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_ZREM, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "removed", (json_int_t)r.n));
    api_items_free(&it);
}

/* ------------------------------------------------------------------------ */
/* GET /geo/{key}/pos, /hash, /dist                                         */
/* ------------------------------------------------------------------------ */

/* Shared by pos and hash: one entry per requested member, null if absent. */
static void per_member(api_req_t *req, api_resp_t *resp, bool hashes)
{
    cmd_geo_members_args_t a;
    size_t n;
    const char **names;
    size_t *lens;
    if (!api_path_key(req, resp, &a.key, &a.klen) ||
        !api_query_allow(req, resp, (const char *const[]){ "member", NULL }) ||
        !query_members(req, resp, "member", &names, &lens, &n))
        return;
    a.members = cmd_items_of(names, lens, NULL, n);
    a.scores = malloc((n ? n : 1) * sizeof(*a.scores));
    a.found = malloc((n ? n : 1) * sizeof(*a.found));
    cmd_geo_res_t r;
    if (!a.scores || !a.found) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
    } else if (api_cmd_answered(req, resp, cmd_call(req->ctx, hashes ? &CMD_GEOHASH : &CMD_GEOPOS, &a, &r))) {
        wbuf_t b = WBUF_INIT;
        put_str(&b, hashes ? "{\"hashes\":[" : "{\"positions\":[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                wbuf_put_u8(&b, ',');
            if (!a.found[i]) {
                put_str(&b, "null");
            } else if (hashes) {
                char h[12];
                geohash_string(a.scores[i], h);
                wbuf_put_u8(&b, '"');
                put_str(&b, h);
                wbuf_put_u8(&b, '"');
            } else {
                double lon, lat;
                geohash_decode_score(a.scores[i], &lon, &lat);
                put_lonlat(&b, lon, lat);
            }
        }
        put_str(&b, "]}");
        answer(resp, &b);
    }
    free(a.scores);
    free(a.found);
    free(names);
    free(lens);
}

static void h_geo_pos(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    per_member(req, resp, false);
}
static void h_geo_hash(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    per_member(req, resp, true);
}

static bool query_member(const api_req_t *req, api_resp_t *resp, const char *name, bool required,
                         const char **m, size_t *len)
{
    return api_query_string(req, resp, name, required, m, len) && (!*m || api_check_key(resp, name, *m, *len));
}

static void h_geo_dist(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_geodist_args_t a;
    cmd_geo_res_t r;
    if (!api_path_key(req, resp, &a.key, &a.klen) ||
        !api_query_allow(req, resp, (const char *const[]){ "from", "to", "unit", NULL }) ||
        !query_member(req, resp, "from", true, &a.from, &a.flen) ||
        !query_member(req, resp, "to", true, &a.to, &a.tlen) || !query_unit(req, resp, false, &a.to_m) ||
        !api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_GEODIST, &a, &r)))
        return;
    wbuf_t b = WBUF_INIT;
    put_str(&b, "{\"distance\":");
    if (r.found)
        put_distance(&b, r.distance);
    else
        put_str(&b, "null");
    wbuf_put_u8(&b, '}');
    answer(resp, &b);
}

/* ------------------------------------------------------------------------ */
/* GET /geo/nearby: GEOSEARCH                                               */
/* ------------------------------------------------------------------------ */

/* The query of GET /geo/nearby, or with `store` that of POST
 * /geo/{key}/store (the set searched is `source`; no with* options). */
static bool parse_nearby(const api_req_t *req, api_resp_t *resp, bool store, cmd_geosearch_args_t *nb)
{
    static const char *const params[] = { "key", "member", "lon", "lat", "radius", "width", "height", "unit", "count",
                                          "any", "sort", "withdist", "withcoord", "withhash", NULL };
    static const char *const store_params[] = { "source", "member", "lon", "lat", "radius", "width", "height",
                                                "unit", "count", "any", "sort", "storedist", NULL };
    const char *key, *dest = nb->key;
    size_t klen, dlen = nb->klen;
    memset(nb, 0, sizeof(*nb));
    geo_shape_t *s = &nb->q.shape;
    bool has_lon, has_lat, has_radius, has_w, has_h, has_count;
    int64_t count = 0;
    if (!api_query_allow(req, resp, store ? store_params : params) ||
        !query_member(req, resp, store ? "source" : "key", true, &key, &klen) ||
        !query_member(req, resp, "member", false, &nb->member, &nb->mlen) ||
        !api_query_double(req, resp, "lon", false, -1e300, 1e300, &s->lon, &has_lon) ||
        !api_query_double(req, resp, "lat", false, -1e300, 1e300, &s->lat, &has_lat) ||
        !api_query_double(req, resp, "radius", false, -1e300, 1e300, &s->radius, &has_radius) ||
        !api_query_double(req, resp, "width", false, -1e300, 1e300, &s->width, &has_w) ||
        !api_query_double(req, resp, "height", false, -1e300, 1e300, &s->height, &has_h) ||
        !query_unit(req, resp, true, &s->to_m) ||
        !api_query_int(req, resp, "count", false, INT64_MIN, INT64_MAX, &count, &has_count) ||
        !api_query_bool(req, resp, "any", &nb->q.any, NULL) ||
        !api_query_bool(req, resp, "withdist", &nb->withdist, NULL) ||
        !api_query_bool(req, resp, "withcoord", &nb->withcoord, NULL) ||
        !api_query_bool(req, resp, "withhash", &nb->withhash, NULL))
        return false;
    if (store) {
        nb->key = dest;
        nb->klen = dlen;
        nb->source = key;
        nb->slen = klen;
    } else {
        nb->key = key;
        nb->klen = klen;
    }

    /* the centre: a member, or a longitude/latitude pair */
    if (has_lon != has_lat) {
        api_error_field(resp, API_E_BAD_REQUEST, has_lon ? "lat" : "lon", "'lon' and 'lat' go together");
        return false;
    }
    if ((nb->member != NULL) == has_lon) {
        api_error_field(resp, API_E_BAD_REQUEST, "member",
                        "exactly one of 'member' or 'lon'/'lat' must be given for the centre");
        return false;
    }
    if (has_lon && !lonlat_ok(resp, "lon", s->lon, s->lat))
        return false;

    /* the shape: a radius, or a box */
    if (has_w != has_h) {
        api_error_field(resp, API_E_BAD_REQUEST, has_w ? "height" : "width", "'width' and 'height' go together");
        return false;
    }
    if (has_radius == has_w) {
        api_error_field(resp, API_E_BAD_REQUEST, "radius",
                        "exactly one of 'radius' or 'width'/'height' must be given for the shape");
        return false;
    }
    s->kind = has_radius ? GEO_SHAPE_RADIUS : GEO_SHAPE_BOX;
    if (has_radius && s->radius < 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "radius", "radius cannot be negative");
        return false;
    }
    if (has_w && (s->width < 0 || s->height < 0)) {
        api_error_field(resp, API_E_BAD_REQUEST, s->width < 0 ? "width" : "height",
                        "height or width cannot be negative");
        return false;
    }

    if (has_count && count <= 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "count", "COUNT must be > 0");
        return false;
    }
    nb->q.count = has_count ? (uint64_t)count : 0;
    if (nb->q.any && !has_count) {
        api_error_field(resp, API_E_BAD_REQUEST, "any", "the ANY argument requires COUNT argument");
        return false;
    }
    const char *sort = api_query_get(req, "sort", NULL);
    if (api_query_count(req, "sort") > 1) {
        api_error_field(resp, API_E_BAD_REQUEST, "sort", "query parameter 'sort' given more than once");
        return false;
    }
    if (!sort) {
        nb->q.sort = GEO_SORT_NONE;
    } else if (strcasecmp(sort, "asc") == 0) {
        nb->q.sort = GEO_SORT_ASC;
    } else if (strcasecmp(sort, "desc") == 0) {
        nb->q.sort = GEO_SORT_DESC;
    } else {
        api_error_field(resp, API_E_BAD_REQUEST, "sort", "'sort' must be asc or desc");
        return false;
    }
    return true;
}

static void h_geo_nearby(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_geosearch_args_t nb = { 0 };
    cmd_geo_res_t r;
    if (!parse_nearby(req, resp, false, &nb) || !api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_GEOSEARCH, &nb, &r)))
        return;
    size_t n = r.n;
    wbuf_t b = WBUF_INIT;
    wbuf_reserve(&b, 16 + n * (32 + (nb.withdist ? 24 : 0) + (nb.withhash ? 28 : 0) + (nb.withcoord ? 48 : 0)));
    put_str(&b, "{\"results\":[");
    for (size_t i = 0; i < n; i++) {
        const geo_hit_t *h = &r.hits[i];
        put_str(&b, i ? ",{\"member\":" : "{\"member\":");
        put_json_string(&b, h->member, h->len);
        if (nb.withdist) {
            put_str(&b, ",\"distance\":");
            put_distance(&b, h->dist);
        }
        if (nb.withhash) {
            put_str(&b, ",\"hash\":");
            put_u64(&b, h->score);
        }
        if (nb.withcoord) {
            put_str(&b, ",\"lon\":");
            put_double(&b, h->lon);
            put_str(&b, ",\"lat\":");
            put_double(&b, h->lat);
        }
        wbuf_put_u8(&b, '}');
    }
    put_str(&b, "]}");
    cmd_geo_res_free(&r);
    answer(resp, &b);
}

/* POST /geo/{key}/store?source=...: GEOSEARCHSTORE (and GEORADIUS ... STORE).
 * The members found in `source` (with the query of /geo/nearby, without
 * the with* options) become the geo set at {key}, replacing what was there
 * (its TTL too), and the answer is their number; none deletes {key}, as in
 * Redis.  {key} may be the source.  It must hold a geo set or nothing
 * (409 otherwise; Redis would overwrite any type).  STOREDIST is refused:
 * its result is a sorted set of distances, a type tally does not have. */
static void h_geo_store(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_geosearch_args_t nb = { 0 };
    bool storedist = false;
    if (!api_path_key(req, resp, &nb.key, &nb.klen) || !parse_nearby(req, resp, true, &nb) ||
        !api_query_bool(req, resp, "storedist", &storedist, NULL))
        return;
    if (storedist) {
        api_error_field(resp, API_E_BAD_REQUEST, "storedist",
                        "STOREDIST stores a sorted set of distances, and tally has no sorted sets: store the "
                        "members (without storedist) or ask /geo/nearby with withdist");
        return;
    }
    cmd_geo_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_GEOSEARCHSTORE, &nb, &r))) {
        char b[48];
        int len = snprintf(b, sizeof(b), "{\"stored\":%llu}", (unsigned long long)r.n);
        api_body(resp, 200, NULL, b, (size_t)len);
    }
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_GET,    "/geo/nearby",       h_geo_nearby, 0, API_BY(CMD_GEOSEARCH) },
    { API_POST,   "/geo/{key}",        h_geo_add, 0, API_BY(CMD_GEOADD) },
    { API_GET,    "/geo/{key}/pos",    h_geo_pos, 0, API_BY(CMD_GEOPOS) },
    { API_GET,    "/geo/{key}/dist",   h_geo_dist, 0, API_BY(CMD_GEODIST) },
    { API_GET,    "/geo/{key}/hash",   h_geo_hash, 0, API_BY(CMD_GEOHASH) },
    { API_POST,   "/geo/{key}/remove", h_geo_remove, 0, API_BY(CMD_ZREM) },
    { API_POST,   "/geo/{key}/store",  h_geo_store, 0, API_BY(CMD_GEOSEARCHSTORE) },
};

API_FAMILY(geo);
