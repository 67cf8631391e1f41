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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
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

typedef struct add_item {
    const char *member;
    size_t len;
    uint64_t score;
} add_item_t;

/* One applied change, for rolling back a batch that runs out of memory. */
typedef struct undo {
    size_t item;
    bool added;
    uint64_t old_score;
} undo_t;

static bool parse_add_items(api_resp_t *resp, json_t *body, add_item_t **items, size_t *n)
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
    add_item_t *it = malloc(count * sizeof(*it));
    if (!it) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return false;
    }
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
        it[i].member = json_string_value(m);
        it[i].len = json_string_length(m);
        if (!api_check_key(resp, field, it[i].member, it[i].len) ||
            !lonlat_ok(resp, field, json_number_value(lon), json_number_value(lat)))
            goto fail;
        it[i].score = geohash_score(json_number_value(lon), json_number_value(lat));
    }
    *items = it;
    *n = count;
    return true;
fail:
    free(it);
    return false;
}

static void h_geo_add(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "members", "nx", "xx", "ch", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    bool nx = false, xx = false, ch = false;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) || !api_obj_bool(resp, body, "nx", &nx, NULL) ||
        !api_obj_bool(resp, body, "xx", &xx, NULL) || !api_obj_bool(resp, body, "ch", &ch, NULL))
        return;
    if (nx && xx) {
        api_error_field(resp, API_E_BAD_REQUEST, "xx", "'nx' and 'xx' cannot both be true");
        return;
    }
    add_item_t *items;
    size_t n;
    if (!parse_add_items(resp, body, &items, &n))
        return;
    undo_t *undo = malloc(n * sizeof(*undo));
    if (!undo) {
        free(items);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    if (!api_make_room(srv, req, resp))
        goto out;
    uint64_t member_bytes = 0;
    for (size_t i = 0; i < n; i++)
        member_bytes += items[i].len;

    api_key_t hk;
    geo_t *g;
    for (unsigned attempts = 0;;) {
        if (!api_key_open(srv, req, resp, key, klen, &geo_type, API_WRITE, &hk))
            goto out;
        g = api_key_value(&hk);
        if (!g && xx) {   /* XX on a missing key: nothing to update, no key created */
            api_key_close(&hk, false);
            api_json(resp, 200, json_pack("{s:i}", "added", 0));
            goto out;
        }
        /* room for what the members may add, known once the set is */
        uint64_t add = geo_add_bound(g, n, member_bytes) + (g ? 0 : ks_entry_overhead(klen));
        if (!api_value_fits(srv, req, resp, "members", "the geo set", (g ? geo_memory(g) : 0) + add)) {
            api_key_close(&hk, false);
            goto out;
        }
        if (add <= api_room_now(srv, req))
            break;
        ks_key_t kk = ks_key(srv->ks, key, klen);
        api_keep_t keep = { &kk, 1, g ? geo_memory(g) : 0 };   /* not evicted for its own growth */
        api_key_close(&hk, false);
        if (!api_room_retry(srv, req, resp, add, &keep, &attempts))
            goto out;
    }
    bool fresh = g == NULL;
    if (fresh && !(g = geo_create())) {
        api_key_close(&hk, false);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory creating the geo set");
        goto out;
    }
    geo_add_mode_t mode = nx ? GEO_ADD_NX : xx ? GEO_ADD_XX : GEO_ADD;
    size_t added = 0, nundo = 0;   /* added: the answer (new members, plus moved ones with ch) */
    bool oom = false;
    for (size_t i = 0; i < n && !oom; i++) {
        uint64_t old = 0;
        geo_score(g, items[i].member, items[i].len, &old);
        switch (geo_set(g, items[i].member, items[i].len, items[i].score, mode)) {
        case GEO_SET_ADDED:
            added++;
            undo[nundo++] = (undo_t){ i, true, 0 };
            break;
        case GEO_SET_UPDATED:   /* the score changed (an equal position is UNCHANGED) */
            if (ch)
                added++;
            undo[nundo++] = (undo_t){ i, false, old };
            break;
        case CORE_NOMEM:
            oom = true;
            break;
        default:
            break;
        }
    }
    if (oom) {   /* put everything back: a failed request changes nothing */
        while (nundo--) {
            const undo_t *u = &undo[nundo];
            if (u->added)
                geo_remove(g, items[u->item].member, items[u->item].len);
            else
                geo_set(g, items[u->item].member, items[u->item].len, u->old_score, GEO_ADD);
        }
        if (fresh)
            geo_free(g);
        else
            ks_entry_changed(srv->ks, hk.e);
        api_key_close(&hk, false);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory adding members");
        goto out;
    }
    if (fresh && !api_key_add(&hk, &geo_type, g, KS_NO_EXPIRY)) {
        geo_free(g);
        api_key_close(&hk, false);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the geo set");
        goto out;
    }
    if (!fresh)
        ks_entry_changed(srv->ks, hk.e);
    api_key_close(&hk, nundo > 0);
    api_json(resp, 200, json_pack("{s:I}", "added", (json_int_t)added));
out:
    free(undo);
    free(items);
}

/* ------------------------------------------------------------------------ */
/* POST /geo/{key}/remove: ZREM                                             */
/* ------------------------------------------------------------------------ */

static void h_geo_remove(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "members", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
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

    api_key_t hk;
    if (!api_key_open(srv, req, resp, key, klen, &geo_type, API_WRITE, &hk))
        return;
    geo_t *g = api_key_value(&hk);
    size_t removed = 0;
    if (g) {
        for (size_t i = 0; i < n; i++) {
            json_t *m = json_array_get(arr, i);
            removed += geo_remove(g, json_string_value(m), json_string_length(m));
        }
        if (geo_count(g) == 0)
            api_key_delete(&hk);   /* like Redis, an empty set is no key */
        else
            ks_entry_changed(srv->ks, hk.e);
    }
    api_key_close(&hk, removed > 0);
    api_json(resp, 200, json_pack("{s:I}", "removed", (json_int_t)removed));
}

/* ------------------------------------------------------------------------ */
/* GET /geo/{key}/pos, /hash, /dist                                         */
/* ------------------------------------------------------------------------ */

/* Shared by pos and hash: one entry per requested member, null if absent. */
static void per_member(api_server_t *srv, api_req_t *req, api_resp_t *resp, bool hashes)
{
    const char *key;
    size_t klen, n;
    const char **names;
    size_t *lens;
    if (!api_path_key(req, resp, &key, &klen) ||
        !api_query_allow(req, resp, (const char *const[]){ "member", NULL }) ||
        !query_members(req, resp, "member", &names, &lens, &n))
        return;
    api_key_t hk;
    if (api_key_open(srv, req, resp, key, klen, &geo_type, API_READ, &hk)) {
        const geo_t *g = api_key_value(&hk);
        wbuf_t b = WBUF_INIT;
        put_str(&b, hashes ? "{\"hashes\":[" : "{\"positions\":[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                wbuf_put_u8(&b, ',');
            uint64_t score;
            if (!g || !geo_score(g, names[i], lens[i], &score)) {
                put_str(&b, "null");
            } else if (hashes) {
                char h[12];
                geohash_string(score, h);
                wbuf_put_u8(&b, '"');
                put_str(&b, h);
                wbuf_put_u8(&b, '"');
            } else {
                double lon, lat;
                geohash_decode_score(score, &lon, &lat);
                put_lonlat(&b, lon, lat);
            }
        }
        put_str(&b, "]}");
        api_key_close(&hk, false);
        answer(resp, &b);
    }
    free(names);
    free(lens);
}

static void h_geo_pos(api_server_t *srv, api_req_t *req, api_resp_t *resp) { per_member(srv, req, resp, false); }
static void h_geo_hash(api_server_t *srv, api_req_t *req, api_resp_t *resp) { per_member(srv, req, resp, true); }

static bool query_member(const api_req_t *req, api_resp_t *resp, const char *name, bool required,
                         const char **m, size_t *len)
{
    return api_query_string(req, resp, name, required, m, len) && (!*m || api_check_key(resp, name, *m, *len));
}

static void h_geo_dist(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key, *from, *to;
    size_t klen, flen, tlen;
    double to_m;
    if (!api_path_key(req, resp, &key, &klen) ||
        !api_query_allow(req, resp, (const char *const[]){ "from", "to", "unit", NULL }) ||
        !query_member(req, resp, "from", true, &from, &flen) || !query_member(req, resp, "to", true, &to, &tlen) ||
        !query_unit(req, resp, false, &to_m))
        return;
    api_key_t hk;
    if (!api_key_open(srv, req, resp, key, klen, &geo_type, API_READ, &hk))
        return;
    const geo_t *g = api_key_value(&hk);
    uint64_t s1, s2;
    bool both = g && geo_score(g, from, flen, &s1) && geo_score(g, to, tlen, &s2);
    api_key_close(&hk, false);
    wbuf_t b = WBUF_INIT;
    put_str(&b, "{\"distance\":");
    if (both) {
        double x1, y1, x2, y2;
        geohash_decode_score(s1, &x1, &y1);
        geohash_decode_score(s2, &x2, &y2);
        put_distance(&b, geo_distance(x1, y1, x2, y2) / to_m);
    } else {
        put_str(&b, "null");
    }
    wbuf_put_u8(&b, '}');
    answer(resp, &b);
}

/* ------------------------------------------------------------------------ */
/* GET /geo/nearby: GEOSEARCH                                               */
/* ------------------------------------------------------------------------ */

typedef struct nearby {
    const char *key, *member;
    size_t klen, mlen;
    geo_query_t q;
    bool withdist, withcoord, withhash;
} nearby_t;

/* The query of GET /geo/nearby, or with `store` that of POST
 * /geo/{key}/store (the set searched is `source`; no with* options). */
static bool parse_nearby(const api_req_t *req, api_resp_t *resp, bool store, nearby_t *nb)
{
    static const char *const params[] = { "key", "member", "lon", "lat", "radius", "width", "height", "unit", "count",
                                          "any", "sort", "withdist", "withcoord", "withhash", NULL };
    static const char *const store_params[] = { "source", "member", "lon", "lat", "radius", "width", "height",
                                                "unit", "count", "any", "sort", "storedist", NULL };
    memset(nb, 0, sizeof(*nb));
    geo_shape_t *s = &nb->q.shape;
    bool has_lon, has_lat, has_radius, has_w, has_h, has_count;
    int64_t count = 0;
    if (!api_query_allow(req, resp, store ? store_params : params) ||
        !query_member(req, resp, store ? "source" : "key", true, &nb->key, &nb->klen) ||
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

/* Runs the search of nb on g (a member centre decoded first): false with
 * the answer set (404 for a centre member not in the set, 507). */
static bool nearby_search(const geo_t *g, nearby_t *nb, api_resp_t *resp, geo_hit_t **hits, size_t *n)
{
    if (nb->member) {
        uint64_t score;
        if (!geo_score(g, nb->member, nb->mlen, &score)) {
            api_error_field(resp, API_E_NOT_FOUND, "member",
                            "could not decode requested zset member: '%.*s' is not in this geo set",
                            (int)(nb->mlen > 200 ? 200 : nb->mlen), nb->member);
            return false;
        }
        geohash_decode_score(score, &nb->q.shape.lon, &nb->q.shape.lat);
    }
    if (!geo_search(g, &nb->q, hits, n)) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory searching");
        return false;
    }
    return true;
}

static void h_geo_nearby(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    nearby_t nb;
    if (!parse_nearby(req, resp, false, &nb))
        return;
    api_key_t hk;
    if (!api_key_open(srv, req, resp, nb.key, nb.klen, &geo_type, API_READ, &hk))
        return;
    const geo_t *g = api_key_value(&hk);
    if (!g) {   /* as Redis: a missing key has no members, even around a member */
        api_key_close(&hk, false);
        api_body(resp, 200, NULL, "{\"results\":[]}", 14);
        return;
    }
    geo_hit_t *hits;
    size_t n;
    if (!nearby_search(g, &nb, resp, &hits, &n)) {
        api_key_close(&hk, false);
        return;
    }
    /* the answer's size is known before it is written: each member's text
     * escaped at worst, and the numbers asked for */
    uint64_t estimate = 16;
    for (size_t i = 0; i < n; i++)
        estimate += api_json_string_max(hits[i].len) + 16 + (nb.withdist ? 24 : 0) + (nb.withhash ? 28 : 0) +
                    (nb.withcoord ? 56 : 0);
    if (!api_answer_fits(srv, req, resp, estimate, "lower count, or narrow the radius or box")) {
        api_key_close(&hk, false);
        free(hits);
        return;
    }
    /* members point into the set: write the answer before unlocking */
    wbuf_t b = WBUF_INIT;
    wbuf_reserve(&b, 16 + n * (32 + (nb.withdist ? 24 : 0) + (nb.withhash ? 28 : 0) + (nb.withcoord ? 48 : 0)));
    put_str(&b, "{\"results\":[");
    for (size_t i = 0; i < n; i++) {
        const geo_hit_t *h = &hits[i];
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
    api_key_close(&hk, false);
    free(hits);
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
    const char *dest;
    size_t dlen;
    nearby_t nb;
    bool storedist = false;
    if (!api_path_key(req, resp, &dest, &dlen) || !parse_nearby(req, resp, true, &nb) ||
        !api_query_bool(req, resp, "storedist", &storedist, NULL))
        return;
    if (storedist) {
        api_error_field(resp, API_E_BAD_REQUEST, "storedist",
                        "STOREDIST stores a sorted set of distances, and tally has no sorted sets: store the "
                        "members (without storedist) or ask /geo/nearby with withdist");
        return;
    }
    ks_key_t keys[2] = { ks_key(srv->ks, dest, dlen), ks_key(srv->ks, nb.key, nb.klen) };
    /* the token's prefixes before eviction makes room: a refused request changes nothing */
    if (!api_keys_allowed(srv, req, resp, keys, 2) || !api_make_room(srv, req, resp))
        return;
    unsigned attempts = 0;
again:;
    api_key_t h;
    ks_entry_t *se;
    if (!api_keys_lock(srv, req, resp, keys, 2, &h) ||
        !api_keys_find(&h, 1, &geo_type, API_READ, "source", &se) ||
        !api_keys_find(&h, 0, &geo_type, API_WRITE, "destination", NULL))
        return;
    const geo_t *src = se ? ks_entry_value(se) : NULL;
    geo_hit_t *hits = NULL;
    size_t n = 0;
    if (src && !nearby_search(src, &nb, resp, &hits, &n)) {
        api_key_close(&h, false);
        return;
    }
    /* room for the new set, built while the old one still exists */
    uint64_t member_bytes = 0;
    for (size_t i = 0; i < n; i++)
        member_bytes += hits[i].len;
    uint64_t after = n ? geo_add_bound(NULL, n, member_bytes) : 0, before = h.e ? geo_memory(api_key_value(&h)) : 0;
    uint64_t add = after ? after + (h.e ? 0 : ks_entry_overhead(dlen)) : 0;
    api_keep_t keep = { keys, 2, before + (src ? geo_memory(src) : 0) };
    if (!api_value_fits(srv, req, resp, NULL, "the stored set", after)) {
        api_key_close(&h, false);
        free(hits);
        return;
    }
    if (add > api_room_now(srv, req)) {
        api_key_close(&h, false);
        free(hits);
        if (!api_room_retry(srv, req, resp, add, &keep, &attempts))
            return;
        goto again;
    }
    geo_t *out = n ? geo_create() : NULL;
    for (size_t i = 0; out && i < n; i++)
        if (geo_set(out, hits[i].member, hits[i].len, hits[i].score, GEO_ADD) < 0) {
            geo_free(out);
            out = NULL;
        }
    free(hits);
    if (n && !out) {
        api_key_close(&h, false);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the results");
        return;
    }
    bool changed = h.e != NULL || out;
    if (h.e && out) {
        api_key_replace(&h, out);
        ks_entry_set_expire(srv->ks, h.e, KS_NO_EXPIRY);   /* a new value: Redis's store drops the TTL */
    } else if (h.e) {
        api_key_delete(&h);
    } else if (out && !api_key_add(&h, &geo_type, out, KS_NO_EXPIRY)) {
        geo_free(out);
        api_key_close(&h, false);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the results");
        return;
    }
    api_key_close(&h, changed);
    char b[48];
    int len = snprintf(b, sizeof(b), "{\"stored\":%zu}", n);
    api_body(resp, 200, NULL, b, (size_t)len);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_GET,    "/geo/nearby",       h_geo_nearby, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/geo/{key}",        h_geo_add, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/geo/{key}/pos",    h_geo_pos, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/geo/{key}/dist",   h_geo_dist, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/geo/{key}/hash",   h_geo_hash, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/geo/{key}/remove", h_geo_remove, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/geo/{key}/store",  h_geo_store, 0, API_ACCESS_WRITE, NULL },
};

API_FAMILY(geo);
