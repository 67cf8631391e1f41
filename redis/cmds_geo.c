/* cmds_geo.c - Redis's geo commands on tally's geo sets (redis_int.h),
 * with Redis 7.0's replies and errors:
 *
 *   GEOADD                 CMD_GEOADD (NX, XX, CH)
 *   GEOPOS, GEOHASH        CMD_GEOPOS, CMD_GEOHASH
 *   GEODIST                CMD_GEODIST
 *   GEOSEARCH, GEORADIUS, GEORADIUSBYMEMBER (and their _RO)
 *                          CMD_GEOSEARCH; with STORE: CMD_GEOSEARCHSTORE
 *   GEOSEARCHSTORE         CMD_GEOSEARCHSTORE
 *   ZREM                   CMD_ZREM
 *   ZCARD, ZSCORE          CMD_GEOPOS (the set's size; a member's score)
 *   ZRANGE, ZRANGEBYSCORE, ZREVRANGE, ZREVRANGEBYSCORE
 *                          CMD_ZRANGE (by rank or score, REV, LIMIT,
 *                          WITHSCORES; not BYLEX)
 *
 * Arguments are read as Redis's georadiusGeneric reads them (options in
 * any order and case, the same checks and messages); the operation runs
 * once they all parsed, so for a command with several faults tally may
 * report a different one than Redis (which looks the key up first).
 *
 * Numbers: coordinates as addReplyHumanLongDouble ("%.17Lf" without its
 * trailing zeros: a bulk string in RESP2, a double in RESP3); distances
 * with four decimals as addReplyDoubleDistance (a bulk string in both);
 * hashes and ZSCORE's scores are the 52-bit integers (ZSCORE as Redis 7.0
 * prints a double: "%.17g", exact for them).
 *
 * Members are tally's geo members: 1..1024 bytes of UTF-8 without NUL.
 * Another is never in a set: reads answer it as missing (as Redis does for
 * a member it does not hold), ZREM removes nothing for it; GEOADD refuses
 * it, and so does a STORE search centred on it.  STOREDIST is refused (its
 * result, distances as scores, is a sorted set tally does not have), and a
 * STORE's destination must hold a geo set or nothing (WRONGTYPE; Redis
 * replaces any type).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/geo.h"
#include "core/codec.h"
#include "core/geo.h"
#include "redis/redis_int.h"

#define ERR_SYNTAX "ERR syntax error"
#define ERR_NOT_FLOAT "ERR value is not a valid float"
#define ERR_NO_MEMBER "ERR could not decode requested zset member"
#define ERR_MEMBER_TEXT "ERR tally's geo members are 1 to 1024 bytes of UTF-8 text without NUL"

/* ------------------------------------------------------------------------ */
/* Arguments                                                                */
/* ------------------------------------------------------------------------ */

static bool arg_is(const resp_arg_t *a, const char *word)
{
    size_t n = strlen(word);
    return a->len == n && strncasecmp(a->ptr, word, n) == 0;
}

/* getDoubleFromObject's rules: the whole text is strtod's number, no
 * leading space, no NaN, no overflow (nor an underflow to zero). */
static bool arg_double(const resp_arg_t *a, double *v)
{
    if (a->len == 0)
        return false;
    char small[128];
    char *s = a->len < sizeof(small) ? small : malloc(a->len + 1);
    if (!s)
        return false;
    memcpy(s, a->ptr, a->len);
    s[a->len] = '\0';
    errno = 0;
    char *end;
    double d = strtod(s, &end);
    bool ok = !(s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r')) && (size_t)(end - s) == a->len &&
              !(errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || fpclassify(d) == FP_ZERO)) && !isnan(d);
    if (s != small)
        free(s);
    *v = d;
    return ok;
}

/* extractLongLatOrReply: argv[0] longitude, argv[1] latitude. */
static bool arg_lonlat(redis_conn_t *c, const resp_arg_t *argv, double *lon, double *lat)
{
    if (!arg_double(&argv[0], lon) || !arg_double(&argv[1], lat)) {
        redis_err(c, ERR_NOT_FLOAT);
        return false;
    }
    if (!geo_valid_lonlat(*lon, *lat)) {
        redis_err(c, "ERR invalid longitude,latitude pair %f,%f", *lon, *lat);
        return false;
    }
    return true;
}

/* extractUnitOrReply: metres per unit, or 0 (answered). */
static double arg_unit(redis_conn_t *c, const resp_arg_t *a)
{
    if (arg_is(a, "m"))
        return GEO_UNIT_M;
    if (arg_is(a, "km"))
        return GEO_UNIT_KM;
    if (arg_is(a, "ft"))
        return GEO_UNIT_FT;
    if (arg_is(a, "mi"))
        return GEO_UNIT_MI;
    redis_err(c, "ERR unsupported unit provided. please use M, KM, FT, MI");
    return 0;
}

/* extractDistanceOrReply: a radius and its unit. */
static bool arg_radius(redis_conn_t *c, const resp_arg_t *argv, geo_shape_t *s)
{
    double r;
    if (!arg_double(&argv[0], &r)) {
        redis_err(c, "ERR need numeric radius");
        return false;
    }
    if (r < 0) {
        redis_err(c, "ERR radius cannot be negative");
        return false;
    }
    s->kind = GEO_SHAPE_RADIUS;
    s->radius = r;
    return (s->to_m = arg_unit(c, &argv[1])) != 0;
}

/* extractBoxOrReply: width, height and their unit. */
static bool arg_box(redis_conn_t *c, const resp_arg_t *argv, geo_shape_t *s)
{
    double w, h;
    if (!arg_double(&argv[0], &w)) {
        redis_err(c, "ERR need numeric width");
        return false;
    }
    if (!arg_double(&argv[1], &h)) {
        redis_err(c, "ERR need numeric height");
        return false;
    }
    if (h < 0 || w < 0) {
        redis_err(c, "ERR height or width cannot be negative");
        return false;
    }
    s->kind = GEO_SHAPE_BOX;
    s->width = w;
    s->height = h;
    return (s->to_m = arg_unit(c, &argv[2])) != 0;
}

/* Whether a member can be in a geo set (see the head of the file). */
static bool member_ok(const resp_arg_t *a)
{
    return a->len >= 1 && a->len <= GEO_MEMBER_MAX && codec_text_ok(a->ptr, a->len);
}

/* ------------------------------------------------------------------------ */
/* Numbers                                                                  */
/* ------------------------------------------------------------------------ */

/* addReplyHumanLongDouble: "%.17Lf" of the double, trailing zeros (and a
 * bare point) removed, "-0" as "0". */
static void reply_coord(redis_conn_t *c, double v)
{
    char t[512];
    int n = snprintf(t, sizeof(t), "%.17Lf", (long double)v);
    if (n < 0 || (size_t)n >= sizeof(t))
        n = snprintf(t, sizeof(t), "%.17g", v);   /* never for a coordinate */
    if (memchr(t, '.', (size_t)n)) {
        while (n > 0 && t[n - 1] == '0')
            n--;
        if (n > 0 && t[n - 1] == '.')
            n--;
    }
    if (n == 2 && t[0] == '-' && t[1] == '0') {
        t[0] = '0';
        n = 1;
    }
    resp_reply_double_text(redis_conn_out(c), t, (size_t)n);
}

static void reply_distance(redis_conn_t *c, double d)
{
    char t[40];
    int n = geo_format_distance(d, t, sizeof(t));
    resp_reply_bulk(redis_conn_out(c), t, (size_t)n);
}

/* ------------------------------------------------------------------------ */
/* GEOADD                                                                   */
/* ------------------------------------------------------------------------ */

static void geoadd_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_geoadd_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    size_t i = 2;
    for (; i < cmd->argc; i++) {
        const resp_arg_t *o = &cmd->argv[i];
        if (arg_is(o, "nx"))
            a.nx = true;
        else if (arg_is(o, "xx"))
            a.xx = true;
        else if (arg_is(o, "ch"))
            a.ch = true;
        else
            break;
    }
    size_t n = (cmd->argc - i) / 3;
    if ((cmd->argc - i) % 3 || (a.nx && a.xx) || n == 0) {
        redis_err(c, ERR_SYNTAX);
        return;
    }
    if (n > CMD_ITEMS_MAX) {
        redis_err(c, "ERR tally takes at most %d members in one GEOADD", CMD_ITEMS_MAX);
        return;
    }
    const char **p = malloc(n * sizeof(*p));
    size_t *len = malloc(n * sizeof(*len));
    uint64_t *score = malloc(n * sizeof(*score));
    if (!p || !len || !score) {
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        goto out;
    }
    for (size_t k = 0; k < n; k++, i += 3) {
        double lon, lat;
        if (!arg_lonlat(c, &cmd->argv[i], &lon, &lat))
            goto out;
        if (!member_ok(&cmd->argv[i + 2])) {
            redis_err(c, ERR_MEMBER_TEXT);
            goto out;
        }
        p[k] = cmd->argv[i + 2].ptr;
        len[k] = cmd->argv[i + 2].len;
        score[k] = geohash_score(lon, lat);
    }
    a.members = cmd_items_of(p, len, score, n);
    cmd_geo_res_t r;
    if (redis_run(c, &CMD_GEOADD, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), (long long)r.n);
out:
    free(p);
    free(len);
    free(score);
}

/* ------------------------------------------------------------------------ */
/* GEOPOS, GEOHASH, ZSCORE, ZCARD, ZREM                                     */
/* ------------------------------------------------------------------------ */

/* Runs GEOPOS (or GEOHASH: the same reading) on argv[from..): the
 * members' scores and found flags (malloc'd, caller frees) and the set's
 * size.  Members that cannot be in a set are not looked up (not found). */
static bool scores_of(redis_conn_t *c, const resp_cmd_t *cmd, size_t from, uint64_t **scores, bool **found,
                      uint64_t *count)
{
    size_t n = cmd->argc - from;
    *scores = malloc((n ? n : 1) * sizeof(**scores));
    *found = malloc((n ? n : 1) * sizeof(**found));
    if (!*scores || !*found || !redis_items(c, cmd, from)) {
        if (!*scores || !*found)
            redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        free(*scores);
        free(*found);
        return false;
    }
    /* the members that can be in a set, packed at the front of c->ptrs */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (member_ok(&cmd->argv[from + i])) {
            c->ptrs[k] = cmd->argv[from + i].ptr;
            c->lens[k++] = cmd->argv[from + i].len;
        }
    cmd_geo_members_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .scores = *scores,
                                 .found = *found };
    a.members = cmd_items_of(c->ptrs, c->lens, NULL, k);
    cmd_geo_res_t r;
    if (!redis_run(c, &CMD_GEOPOS, &a, &r, NULL)) {
        free(*scores);
        free(*found);
        return false;
    }
    /* spread back to the arguments' places */
    for (size_t i = n; i-- > 0;) {
        if (member_ok(&cmd->argv[from + i])) {
            k--;
            (*scores)[i] = (*scores)[k];
            (*found)[i] = (*found)[k];
        } else {
            (*found)[i] = false;
        }
    }
    *count = r.count;
    return true;
}

static void geopos_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    uint64_t *scores, count;
    bool *found;
    if (!scores_of(c, cmd, 2, &scores, &found, &count))
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, cmd->argc - 2);
    for (size_t i = 0; i < cmd->argc - 2; i++) {
        if (!found[i]) {
            resp_reply_null_array(o);
            continue;
        }
        double lon, lat;
        geohash_decode_score(scores[i], &lon, &lat);
        resp_reply_array(o, 2);
        reply_coord(c, lon);
        reply_coord(c, lat);
    }
    free(scores);
    free(found);
}

static void geohash_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    uint64_t *scores, count;
    bool *found;
    if (!scores_of(c, cmd, 2, &scores, &found, &count))
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, cmd->argc - 2);
    for (size_t i = 0; i < cmd->argc - 2; i++) {
        if (!found[i]) {
            resp_reply_null(o);
            continue;
        }
        char h[12];
        geohash_string(scores[i], h);
        resp_reply_bulk(o, h, 11);
    }
    free(scores);
    free(found);
}

static void zscore_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    uint64_t *scores, count;
    bool *found;
    if (!scores_of(c, cmd, 2, &scores, &found, &count))
        return;
    if (found[0])
        resp_reply_double(redis_conn_out(c), (double)scores[0]);
    else
        resp_reply_null(redis_conn_out(c));
    free(scores);
    free(found);
}

static void zcard_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    uint64_t *scores, count;
    bool *found;
    if (!scores_of(c, cmd, 2, &scores, &found, &count))
        return;
    resp_reply_int(redis_conn_out(c), (long long)count);
    free(scores);
    free(found);
}

static void zrem_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc - 2 > CMD_ITEMS_MAX) {
        redis_err(c, "ERR tally takes at most %d members in one ZREM", CMD_ITEMS_MAX);
        return;
    }
    if (!redis_items(c, cmd, 2))
        return;
    size_t k = 0;   /* only members that can be in a set: the others are not removed */
    for (size_t i = 2; i < cmd->argc; i++)
        if (member_ok(&cmd->argv[i])) {
            c->ptrs[k] = cmd->argv[i].ptr;
            c->lens[k++] = cmd->argv[i].len;
        }
    cmd_geo_res_t r;
    if (k == 0) {   /* nothing to remove: the key's type still decides the answer */
        cmd_geo_members_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
        a.members = cmd_items_of(NULL, NULL, NULL, 0);
        if (redis_run(c, &CMD_GEOPOS, &a, &r, NULL))
            resp_reply_int(redis_conn_out(c), 0);
        return;
    }
    cmd_geo_members_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    a.members = cmd_items_of(c->ptrs, c->lens, NULL, k);
    if (redis_run(c, &CMD_ZREM, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), (long long)r.n);
}

/* ------------------------------------------------------------------------ */
/* GEODIST                                                                  */
/* ------------------------------------------------------------------------ */

static void geodist_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_geodist_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .to_m = GEO_UNIT_M };
    if (cmd->argc == 5) {
        if ((a.to_m = arg_unit(c, &cmd->argv[4])) == 0)
            return;
    } else if (cmd->argc > 5) {
        redis_err(c, ERR_SYNTAX);
        return;
    }
    a.from = cmd->argv[2].ptr;
    a.flen = cmd->argv[2].len;
    a.to = cmd->argv[3].ptr;
    a.tlen = cmd->argv[3].len;
    if (!member_ok(&cmd->argv[2]) || !member_ok(&cmd->argv[3])) {
        /* one is in no set: null, once the key's type is known */
        cmd_geo_members_args_t m = { .key = a.key, .klen = a.klen };
        m.members = cmd_items_of(NULL, NULL, NULL, 0);
        cmd_geo_res_t r;
        if (redis_run(c, &CMD_GEOPOS, &m, &r, NULL))
            resp_reply_null(redis_conn_out(c));
        return;
    }
    cmd_geo_res_t r;
    if (!redis_run(c, &CMD_GEODIST, &a, &r, NULL))
        return;
    if (r.found)
        reply_distance(c, r.distance);
    else
        resp_reply_null(redis_conn_out(c));
}

/* ------------------------------------------------------------------------ */
/* GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER                  */
/* ------------------------------------------------------------------------ */

enum {
    BY_COORDS = 1,      /* GEORADIUS: key lon lat radius unit */
    BY_MEMBER = 2,      /* GEORADIUSBYMEMBER: key member radius unit */
    NO_STORE = 4,       /* the _RO variants */
    SEARCH = 8,         /* GEOSEARCH: FROM... and BY... options */
    SEARCH_STORE = 16,  /* GEOSEARCHSTORE: dest source, then GEOSEARCH's options */
};

/* georadiusGeneric: src the index of the set searched. */
static void search_generic(redis_conn_t *c, const resp_cmd_t *cmd, size_t src, unsigned flags)
{
    cmd_geosearch_args_t a = { 0 };
    geo_shape_t *s = &a.q.shape;
    const resp_arg_t *store = NULL;
    bool storedist = false;
    size_t base;
    if (flags & BY_COORDS) {
        base = 6;
        if (!arg_lonlat(c, &cmd->argv[2], &s->lon, &s->lat) || !arg_radius(c, &cmd->argv[4], s))
            return;
    } else if (flags & BY_MEMBER) {
        base = 5;
        a.member = cmd->argv[2].ptr;
        a.mlen = cmd->argv[2].len;
        if (!arg_radius(c, &cmd->argv[3], s))
            return;
    } else {
        base = (flags & SEARCH_STORE) ? 3 : 2;
        if (flags & SEARCH_STORE)
            store = &cmd->argv[1];
    }

    bool withdist = false, withhash = false, withcoord = false, any = false;
    bool frommember = false, fromloc = false, byradius = false, bybox = false;
    geo_sort_t sort = GEO_SORT_NONE;
    long long count = 0;
    size_t remaining = cmd->argc > base ? cmd->argc - base : 0;
    for (size_t i = 0; i < remaining; i++) {
        const resp_arg_t *arg = &cmd->argv[base + i];
        if (arg_is(arg, "withdist")) {
            withdist = true;
        } else if (arg_is(arg, "withhash")) {
            withhash = true;
        } else if (arg_is(arg, "withcoord")) {
            withcoord = true;
        } else if (arg_is(arg, "any")) {
            any = true;
        } else if (arg_is(arg, "asc")) {
            sort = GEO_SORT_ASC;
        } else if (arg_is(arg, "desc")) {
            sort = GEO_SORT_DESC;
        } else if (arg_is(arg, "count") && i + 1 < remaining) {
            if (!redis_ll(&cmd->argv[base + i + 1], &count)) {
                redis_err(c, REDIS_ERR_NOT_INT);
                return;
            }
            if (count <= 0) {
                redis_err(c, "ERR COUNT must be > 0");
                return;
            }
            i++;
        } else if ((arg_is(arg, "store") || arg_is(arg, "storedist")) && i + 1 < remaining &&
                   !(flags & (NO_STORE | SEARCH))) {
            store = &cmd->argv[base + i + 1];
            storedist = arg_is(arg, "storedist");
            i++;
        } else if (arg_is(arg, "storedist") && (flags & SEARCH_STORE)) {
            storedist = true;
        } else if (arg_is(arg, "frommember") && i + 1 < remaining && (flags & SEARCH) && !fromloc) {
            a.member = cmd->argv[base + i + 1].ptr;
            a.mlen = cmd->argv[base + i + 1].len;
            frommember = true;
            i++;
        } else if (arg_is(arg, "fromlonlat") && i + 2 < remaining && (flags & SEARCH) && !frommember) {
            if (!arg_lonlat(c, &cmd->argv[base + i + 1], &s->lon, &s->lat))
                return;
            fromloc = true;
            i += 2;
        } else if (arg_is(arg, "byradius") && i + 2 < remaining && (flags & SEARCH) && !bybox) {
            if (!arg_radius(c, &cmd->argv[base + i + 1], s))
                return;
            byradius = true;
            i += 2;
        } else if (arg_is(arg, "bybox") && i + 3 < remaining && (flags & SEARCH) && !byradius) {
            if (!arg_box(c, &cmd->argv[base + i + 1], s))
                return;
            bybox = true;
            i += 3;
        } else {
            redis_err(c, ERR_SYNTAX);
            return;
        }
    }
    if (store && (withdist || withhash || withcoord)) {
        redis_err(c, "ERR %s is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
                  (flags & SEARCH_STORE) ? "GEOSEARCHSTORE" : "STORE option in GEORADIUS");
        return;
    }
    const resp_arg_t *name = &cmd->argv[0];
    if ((flags & SEARCH) && !(frommember || fromloc)) {
        redis_err(c, "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for %.*s", (int)name->len,
                  name->ptr);
        return;
    }
    if ((flags & SEARCH) && !(byradius || bybox)) {
        redis_err(c, "ERR exactly one of BYRADIUS and BYBOX can be specified for %.*s", (int)name->len, name->ptr);
        return;
    }
    if (any && !count) {
        redis_err(c, "ERR the ANY argument requires COUNT argument");
        return;
    }
    a.q.count = (uint64_t)count;
    a.q.any = any;
    a.q.sort = sort;

    if (store) {
        if (storedist) {
            redis_err(c, "ERR tally does not take STOREDIST: it stores distances as a sorted set's scores, and "
                         "tally's sorted sets are geo sets (use STORE, or WITHDIST)");
            return;
        }
        if (a.member && !(a.mlen >= 1 && a.mlen <= GEO_MEMBER_MAX && codec_text_ok(a.member, a.mlen))) {
            redis_err(c, ERR_NO_MEMBER);   /* in no set (the search is journaled with its centre) */
            return;
        }
        a.key = store->ptr;
        a.klen = store->len;
        a.source = cmd->argv[src].ptr;
        a.slen = cmd->argv[src].len;
        cmd_geo_res_t r;
        bool missing;
        if (redis_run(c, &CMD_GEOSEARCHSTORE, &a, &r, &missing))
            resp_reply_int(redis_conn_out(c), (long long)r.n);
        else if (missing)
            redis_err(c, ERR_NO_MEMBER);
        return;
    }

    a.key = cmd->argv[src].ptr;
    a.klen = cmd->argv[src].len;
    a.withdist = withdist;
    a.withcoord = withcoord;
    a.withhash = withhash;
    cmd_geo_res_t r;
    bool missing;
    if (!redis_run(c, &CMD_GEOSEARCH, &a, &r, &missing)) {
        if (missing)
            redis_err(c, ERR_NO_MEMBER);
        return;
    }
    resp_out_t *o = redis_conn_out(c);
    size_t opts = (size_t)withdist + withhash + withcoord;
    resp_reply_array(o, r.n);
    for (size_t i = 0; i < r.n; i++) {
        const geo_hit_t *h = &r.hits[i];
        if (opts)
            resp_reply_array(o, opts + 1);
        resp_reply_bulk(o, h->member, h->len);
        if (withdist)
            reply_distance(c, h->dist);
        if (withhash)
            resp_reply_int(o, (long long)h->score);
        if (withcoord) {
            resp_reply_array(o, 2);
            reply_coord(c, h->lon);
            reply_coord(c, h->lat);
        }
    }
    cmd_geo_res_free(&r);
}

static void geosearch_command(redis_conn_t *c, const resp_cmd_t *cmd) { search_generic(c, cmd, 1, SEARCH); }
static void geosearchstore_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    search_generic(c, cmd, 2, SEARCH | SEARCH_STORE);
}
static void georadius_command(redis_conn_t *c, const resp_cmd_t *cmd) { search_generic(c, cmd, 1, BY_COORDS); }
static void georadius_ro_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    search_generic(c, cmd, 1, BY_COORDS | NO_STORE);
}
static void georadiusbymember_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    search_generic(c, cmd, 1, BY_MEMBER);
}
static void georadiusbymember_ro_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    search_generic(c, cmd, 1, BY_MEMBER | NO_STORE);
}

/* ------------------------------------------------------------------------ */
/* ZRANGE, ZRANGEBYSCORE                                                    */
/* ------------------------------------------------------------------------ */

/* zslParseRange's bound: strtod of the text up to its first NUL (so "" is
 * 0, as in Redis), "(" first for an exclusive one, not NaN. */
static bool arg_score_bound(const resp_arg_t *a, double *v, bool *ex)
{
    size_t n = a->len;
    const char *nul = memchr(a->ptr, '\0', n);
    if (nul)
        n = (size_t)(nul - a->ptr);
    char small[128];
    char *s = n < sizeof(small) ? small : malloc(n + 1);
    if (!s)
        return false;
    memcpy(s, a->ptr, n);
    s[n] = '\0';
    *ex = s[0] == '(';
    char *end;
    *v = strtod(s + *ex, &end);
    bool ok = *end == '\0' && !isnan(*v);
    if (s != small)
        free(s);
    return ok;
}

/* zrangeGenericCommand: ZRANGE (fixed false: BYSCORE, BYLEX and REV may be
 * given), or with fixed true ZRANGEBYSCORE, ZREVRANGE, ZREVRANGEBYSCORE
 * (by_score and rev given: none of them). */
static void zrange_generic(redis_conn_t *c, const resp_cmd_t *cmd, bool fixed, bool by_score, bool rev)
{
    cmd_zrange_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .by_score = by_score, .rev = rev,
                            .limit = -1 };
    bool typed = fixed, directed = fixed, bylex = false;
    for (size_t j = 4; j < cmd->argc; j++) {
        size_t left = cmd->argc - j - 1;
        const resp_arg_t *o = &cmd->argv[j];
        if (arg_is(o, "withscores")) {
            a.withscores = true;
        } else if (arg_is(o, "limit") && left >= 2) {
            long long off, lim;
            if (!redis_ll(&cmd->argv[j + 1], &off) || !redis_ll(&cmd->argv[j + 2], &lim)) {
                redis_err(c, REDIS_ERR_NOT_INT);
                return;
            }
            a.offset = off;
            a.limit = lim;
            j += 2;
        } else if (!directed && arg_is(o, "rev")) {
            a.rev = directed = true;
        } else if (!typed && arg_is(o, "bylex")) {
            bylex = typed = true;
        } else if (!typed && arg_is(o, "byscore")) {
            a.by_score = typed = true;
        } else {
            redis_err(c, ERR_SYNTAX);
            return;
        }
    }
    if (a.limit != -1 && !a.by_score && !bylex) {
        redis_err(c, "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
        return;
    }
    if (a.withscores && bylex) {
        redis_err(c, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return;
    }
    if (bylex) {
        redis_err(c, "ERR tally does not take BYLEX: a geo set's members are ordered by their scores");
        return;
    }
    /* REV BYSCORE takes max first */
    const resp_arg_t *lo = &cmd->argv[a.rev && a.by_score ? 3 : 2], *hi = &cmd->argv[a.rev && a.by_score ? 2 : 3];
    if (!a.by_score) {
        long long start, stop;
        if (!redis_ll(lo, &start) || !redis_ll(hi, &stop)) {
            redis_err(c, REDIS_ERR_NOT_INT);
            return;
        }
        a.start = start;
        a.stop = stop;
    } else if (!arg_score_bound(lo, &a.min, &a.minex) || !arg_score_bound(hi, &a.max, &a.maxex)) {
        redis_err(c, "ERR min or max is not a float");
        return;
    }
    cmd_geo_res_t r;
    if (!redis_run(c, &CMD_ZRANGE, &a, &r, NULL))
        return;
    resp_out_t *o = redis_conn_out(c);
    bool pairs = a.withscores && o->proto == 3;   /* RESP3: [member, score] each; RESP2: flat */
    resp_reply_array(o, a.withscores && !pairs ? 2 * r.n : r.n);
    for (size_t i = 0; i < r.n; i++) {
        if (pairs)
            resp_reply_array(o, 2);
        resp_reply_bulk(o, r.hits[i].member, r.hits[i].len);
        if (a.withscores)
            resp_reply_double(o, (double)r.hits[i].score);
    }
    cmd_geo_res_free(&r);
}

static void zrange_command(redis_conn_t *c, const resp_cmd_t *cmd) { zrange_generic(c, cmd, false, false, false); }
static void zrangebyscore_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    zrange_generic(c, cmd, true, true, false);
}
static void zrevrange_command(redis_conn_t *c, const resp_cmd_t *cmd) { zrange_generic(c, cmd, true, false, true); }
static void zrevrangebyscore_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    zrange_generic(c, cmd, true, true, true);
}

static const redis_cmd_t commands[] = {
    { "geoadd", -5, REDIS_CF_WRITE | REDIS_CF_DENYOOM, "@write @geo @slow", 1, 1, 1, geoadd_command, NULL },
    { "geodist", -4, REDIS_CF_READONLY, "@read @geo @slow", 1, 1, 1, geodist_command, NULL },
    { "geohash", -2, REDIS_CF_READONLY, "@read @geo @slow", 1, 1, 1, geohash_command, NULL },
    { "geopos", -2, REDIS_CF_READONLY, "@read @geo @slow", 1, 1, 1, geopos_command, NULL },
    { "georadius", -6, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MOVABLEKEYS, "@write @geo @slow", 1, 1, 1,
      georadius_command, NULL },
    { "georadius_ro", -6, REDIS_CF_READONLY, "@read @geo @slow", 1, 1, 1, georadius_ro_command, NULL },
    { "georadiusbymember", -5, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MOVABLEKEYS, "@write @geo @slow", 1, 1,
      1, georadiusbymember_command, NULL },
    { "georadiusbymember_ro", -5, REDIS_CF_READONLY, "@read @geo @slow", 1, 1, 1, georadiusbymember_ro_command,
      NULL },
    { "geosearch", -7, REDIS_CF_READONLY, "@read @geo @slow", 1, 1, 1, geosearch_command, NULL },
    { "geosearchstore", -8, REDIS_CF_WRITE | REDIS_CF_DENYOOM, "@write @geo @slow", 1, 2, 1, geosearchstore_command,
      NULL },
    { "zcard", 2, REDIS_CF_READONLY | REDIS_CF_FAST, "@read @sortedset @fast", 1, 1, 1, zcard_command, NULL },
    { "zrange", -4, REDIS_CF_READONLY, "@read @sortedset @slow", 1, 1, 1, zrange_command, NULL },
    { "zrangebyscore", -4, REDIS_CF_READONLY, "@read @sortedset @slow", 1, 1, 1, zrangebyscore_command, NULL },
    { "zrem", -3, REDIS_CF_WRITE | REDIS_CF_FAST, "@write @sortedset @fast", 1, 1, 1, zrem_command, NULL },
    { "zrevrange", -4, REDIS_CF_READONLY, "@read @sortedset @slow", 1, 1, 1, zrevrange_command, NULL },
    { "zrevrangebyscore", -4, REDIS_CF_READONLY, "@read @sortedset @slow", 1, 1, 1, zrevrangebyscore_command,
      NULL },
    { "zscore", 3, REDIS_CF_READONLY | REDIS_CF_FAST, "@read @sortedset @fast", 1, 1, 1, zscore_command, NULL },
};
REDIS_COMMANDS(geo);
