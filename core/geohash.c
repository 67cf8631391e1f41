/* geohash.c - see geohash.h.  Arithmetic order matters here: see "Exactness". */
#include "core/geohash.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEG_TO_RAD (M_PI / 180.0)              /* Redis's D_R, folded the same way */
#define EVEN_BITS 0x5555555555555555ULL        /* latitude positions */
#define ODD_BITS 0xaaaaaaaaaaaaaaaaULL         /* longitude positions */

static inline double deg_rad(double deg) { return deg * DEG_TO_RAD; }
static inline double rad_deg(double rad) { return rad / DEG_TO_RAD; }

/* ------------------------------------------------------------------------ */
/* Bit interleaving                                                         */
/* ------------------------------------------------------------------------ */

/* Spreads the 32 bits of v into the even positions of a 64-bit word. */
static inline uint64_t spread32(uint32_t v)
{
    uint64_t x = v;
    x = (x | (x << 16)) & 0x0000ffff0000ffffULL;
    x = (x | (x << 8)) & 0x00ff00ff00ff00ffULL;
    x = (x | (x << 4)) & 0x0f0f0f0f0f0f0f0fULL;
    x = (x | (x << 2)) & 0x3333333333333333ULL;
    x = (x | (x << 1)) & 0x5555555555555555ULL;
    return x;
}

/* Gathers the even bits of x into the low 32 bits (inverse of spread32). */
static inline uint32_t gather32(uint64_t x)
{
    x &= 0x5555555555555555ULL;
    x = (x | (x >> 1)) & 0x3333333333333333ULL;
    x = (x | (x >> 2)) & 0x0f0f0f0f0f0f0f0fULL;
    x = (x | (x >> 4)) & 0x00ff00ff00ff00ffULL;
    x = (x | (x >> 8)) & 0x0000ffff0000ffffULL;
    x = (x | (x >> 16)) & 0x00000000ffffffffULL;
    return (uint32_t)x;
}

/* Latitude index in the even bits, longitude index in the odd ones. */
static inline uint64_t interleave(uint32_t lat_idx, uint32_t lon_idx)
{
    return spread32(lat_idx) | (spread32(lon_idx) << 1);
}

/* ------------------------------------------------------------------------ */
/* Encode / decode                                                          */
/* ------------------------------------------------------------------------ */

bool geo_valid_lonlat(double lon, double lat)
{
    return !(lon < GEO_LON_MIN || lon > GEO_LON_MAX || lat < GEO_LAT_MIN || lat > GEO_LAT_MAX);
}

bool geohash_encode_range(double lon_min, double lon_max, double lat_min, double lat_max, double lon,
                          double lat, unsigned step, geohash_t *out)
{
    if (step == 0 || step > 32 || (lat_min == 0 && lat_max == 0) || (lon_min == 0 && lon_max == 0))
        return false;
    if (!geo_valid_lonlat(lon, lat))
        return false;
    if (lat < lat_min || lat > lat_max || lon < lon_min || lon > lon_max)
        return false;
    double lat_off = (lat - lat_min) / (lat_max - lat_min);
    double lon_off = (lon - lon_min) / (lon_max - lon_min);
    /* fixed point at this step; an offset of exactly 1.0 (the upper edge)
     * yields index 2^step, one bit above the cell bits (as Redis) */
    lat_off *= (double)(1ULL << step);
    lon_off *= (double)(1ULL << step);
    out->bits = interleave((uint32_t)lat_off, (uint32_t)lon_off);
    out->step = (uint8_t)step;
    return true;
}

bool geohash_encode(double lon, double lat, unsigned step, geohash_t *out)
{
    return geohash_encode_range(GEO_LON_MIN, GEO_LON_MAX, GEO_LAT_MIN, GEO_LAT_MAX, lon, lat, step, out);
}

uint64_t geohash_score(double lon, double lat)
{
    geohash_t h = { 0, 0 };
    if (!geohash_encode(lon, lat, GEO_STEP_MAX, &h))
        return 0;
    /* GEOADD hands the integer to ZADD as text, which reads it as a double */
    return (uint64_t)(double)h.bits;
}

static void area_range(geohash_t h, double lon_min, double lon_max, double lat_min, double lat_max,
                       geo_area_t *a)
{
    double lat_scale = lat_max - lat_min;
    double lon_scale = lon_max - lon_min;
    uint32_t ilat = gather32(h.bits);
    uint32_t ilon = gather32(h.bits >> 1);
    double cells = (double)(1ULL << h.step);
    a->lat_min = lat_min + (ilat * 1.0 / cells) * lat_scale;
    a->lat_max = lat_min + ((ilat + 1) * 1.0 / cells) * lat_scale;
    a->lon_min = lon_min + (ilon * 1.0 / cells) * lon_scale;
    a->lon_max = lon_min + ((ilon + 1) * 1.0 / cells) * lon_scale;
}

void geohash_area(geohash_t h, geo_area_t *area)
{
    area_range(h, GEO_LON_MIN, GEO_LON_MAX, GEO_LAT_MIN, GEO_LAT_MAX, area);
}

void geohash_decode_score(uint64_t score, double *lon, double *lat)
{
    geo_area_t a;
    geohash_t h = { score, GEO_STEP_MAX };
    geohash_area(h, &a);
    double x = (a.lon_min + a.lon_max) / 2;
    double y = (a.lat_min + a.lat_max) / 2;
    if (x > GEO_LON_MAX) x = GEO_LON_MAX;
    if (x < GEO_LON_MIN) x = GEO_LON_MIN;
    if (y > GEO_LAT_MAX) y = GEO_LAT_MAX;
    if (y < GEO_LAT_MIN) y = GEO_LAT_MIN;
    *lon = x;
    *lat = y;
}

void geohash_string(uint64_t score, char out[12])
{
    static const char alphabet[] = "0123456789bcdefghjkmnpqrstuvwxyz";   /* standard geohash base32 */
    double lon, lat;
    geohash_decode_score(score, &lon, &lat);
    geohash_t h = { 0, 0 };
    geohash_encode_range(-180, 180, -90, 90, lon, lat, GEO_STEP_MAX, &h);
    for (int i = 0; i < 10; i++)
        out[i] = alphabet[(h.bits >> (52 - (i + 1) * 5)) & 0x1f];
    out[10] = '0';   /* 52 bits give 10.4 characters; the 11th is zero-padded */
    out[11] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Neighbours and score ranges                                              */
/* ------------------------------------------------------------------------ */

/* Moves one cell east (d > 0) or west (d < 0): adds or subtracts one in the
 * odd (longitude) bits by filling the even bits with ones so the carry
 * crosses them, then masks to the step's width (so it wraps). */
static void move_lon(geohash_t *h, int d)
{
    uint64_t x = h->bits & ODD_BITS;
    uint64_t y = h->bits & EVEN_BITS;
    uint64_t zz = EVEN_BITS >> (64 - h->step * 2);
    if (d > 0) {
        x = x + (zz + 1);
    } else {
        x = x | zz;
        x = x - (zz + 1);
    }
    x &= ODD_BITS >> (64 - h->step * 2);
    h->bits = x | y;
}

static void move_lat(geohash_t *h, int d)
{
    uint64_t x = h->bits & ODD_BITS;
    uint64_t y = h->bits & EVEN_BITS;
    uint64_t zz = ODD_BITS >> (64 - h->step * 2);
    if (d > 0) {
        y = y + (zz + 1);
    } else {
        y = y | zz;
        y = y - (zz + 1);
    }
    y &= EVEN_BITS >> (64 - h->step * 2);
    h->bits = x | y;
}

void geohash_neighbors(geohash_t h, geohash_t out[8])
{
    /* {lon move, lat move} for n, s, e, w, ne, nw, se, sw */
    static const int moves[8][2] = { { 0, 1 }, { 0, -1 }, { 1, 0 }, { -1, 0 },
                                     { 1, 1 }, { -1, 1 }, { 1, -1 }, { -1, -1 } };
    for (int i = 0; i < 8; i++) {
        out[i] = h;
        if (moves[i][0])
            move_lon(&out[i], moves[i][0]);
        if (moves[i][1])
            move_lat(&out[i], moves[i][1]);
    }
}

void geohash_score_range(geohash_t h, uint64_t *min, uint64_t *max)
{
    unsigned shift = 52 - h.step * 2;
    /* the bounds reach the sorted set as doubles (exact below 2^53) */
    *min = (uint64_t)(double)(h.bits << shift);
    *max = (uint64_t)(double)((h.bits + 1) << shift);
}

/* ------------------------------------------------------------------------ */
/* Search areas                                                             */
/* ------------------------------------------------------------------------ */

unsigned geohash_estimate_steps(double range_m, double lat)
{
    if (range_m == 0)
        return 26;
    int step = 1;
    while (range_m < GEO_MERCATOR_MAX) {
        range_m *= 2;
        step++;
    }
    step -= 2;   /* so that the range fits in the 3x3 cells in most cases */
    /* meridians converge: cells get narrower towards the poles */
    if (lat > 66 || lat < -66) {
        step--;
        if (lat > 80 || lat < -80)
            step--;
    }
    if (step < 1)
        step = 1;
    if (step > 26)
        step = 26;
    return (unsigned)step;
}

void geo_bounding_box(const geo_shape_t *s, double bounds[4])
{
    double height = s->to_m * (s->kind == GEO_SHAPE_RADIUS ? s->radius : s->height / 2);
    double width = s->to_m * (s->kind == GEO_SHAPE_RADIUS ? s->radius : s->width / 2);
    const double lat_delta = rad_deg(height / GEO_EARTH_RADIUS_M);
    const double lon_delta_top = rad_deg(width / GEO_EARTH_RADIUS_M / cos(deg_rad(s->lat + lat_delta)));
    const double lon_delta_bottom = rad_deg(width / GEO_EARTH_RADIUS_M / cos(deg_rad(s->lat - lat_delta)));
    /* the edge nearer the pole is the wider one in longitude */
    bool south = s->lat < 0;
    bounds[0] = south ? s->lon - lon_delta_bottom : s->lon - lon_delta_top;
    bounds[2] = south ? s->lon + lon_delta_bottom : s->lon + lon_delta_top;
    bounds[1] = s->lat - lat_delta;
    bounds[3] = s->lat + lat_delta;
}

static void cells_at(const geo_shape_t *s, unsigned step, geohash_t *centre, geohash_t nb[8], geo_area_t *area)
{
    centre->bits = 0;
    centre->step = 0;
    geohash_encode(s->lon, s->lat, step, centre);
    geohash_neighbors(*centre, nb);
    geohash_area(*centre, area);
}

void geo_search_cells(const geo_shape_t *s, geo_cells_t *out)
{
    double b[4];
    geo_bounding_box(s, b);
    double min_lon = b[0], min_lat = b[1], max_lon = b[2], max_lat = b[3];
    double radius_m = s->kind == GEO_SHAPE_RADIUS
                          ? s->radius
                          : sqrt((s->width / 2) * (s->width / 2) + (s->height / 2) * (s->height / 2));
    radius_m *= s->to_m;
    unsigned steps = geohash_estimate_steps(radius_m, s->lat);

    geohash_t centre, nb[8];
    geo_area_t area;
    cells_at(s, steps, &centre, nb, &area);

    /* If the box reaches past the neighbouring cells, use cells twice as big. */
    geo_area_t n, so, e, w;
    geohash_area(nb[0], &n);
    geohash_area(nb[1], &so);
    geohash_area(nb[2], &e);
    geohash_area(nb[3], &w);
    bool decrease = n.lat_max < max_lat || so.lat_min > min_lat || e.lon_max < max_lon || w.lon_min > min_lon;
    if (steps > 1 && decrease) {
        steps--;
        cells_at(s, steps, &centre, nb, &area);
    }

    /* Drop neighbours the box does not reach. */
    static const geohash_t none = { 0, 0 };
    enum { N, S, E, W, NE, NW, SE, SW };
    if (steps >= 2) {
        if (area.lat_min < min_lat)
            nb[S] = nb[SW] = nb[SE] = none;
        if (area.lat_max > max_lat)
            nb[N] = nb[NE] = nb[NW] = none;
        if (area.lon_min < min_lon)
            nb[W] = nb[SW] = nb[NW] = none;
        if (area.lon_max > max_lon)
            nb[E] = nb[SE] = nb[NE] = none;
    }
    out->cell[0] = centre;
    for (int i = 0; i < 8; i++)
        out->cell[i + 1] = nb[i];
    out->step = (int)steps;
}

/* ------------------------------------------------------------------------ */
/* Distances                                                                */
/* ------------------------------------------------------------------------ */

double geo_distance(double lon1, double lat1, double lon2, double lat2)
{
    double lat1r = deg_rad(lat1);
    double lon1r = deg_rad(lon1);
    double lat2r = deg_rad(lat2);
    double lon2r = deg_rad(lon2);
    double u = sin((lat2r - lat1r) / 2);
    double v = sin((lon2r - lon1r) / 2);
    return 2.0 * GEO_EARTH_RADIUS_M * asin(sqrt(u * u + cos(lat1r) * cos(lat2r) * v * v));
}

/* Correctly rounded (ties to even, as printf) significant digits of
 * v = m / 2^k, 0 < v < 1000, 43 <= k <= 66: p digits into dig[], the
 * decimal exponent of the first into *x. */
static void coord_digits(uint64_t m, int k, int p, char dig[17], int *x)
{
    unsigned __int128 mask = ((unsigned __int128)1 << k) - 1, half = (unsigned __int128)1 << (k - 1);
    unsigned ip = (unsigned)((unsigned __int128)m >> k);
    unsigned __int128 f = m & mask;
    int n = 0;
    if (ip) {
        char t[4];
        int tn = 0;
        for (; ip; ip /= 10)
            t[tn++] = (char)(ip % 10);
        *x = tn - 1;
        while (tn && n < p)
            dig[n++] = t[--tn];
        if (tn) {   /* p smaller than the integer part: never for p >= 15 */
            *x = 99;
            return;
        }
    } else {
        *x = -1;
        for (;;) {
            f *= 10;
            int d = (int)(f >> k);
            f &= mask;
            if (d) {
                dig[n++] = (char)d;
                break;
            }
            (*x)--;
        }
    }
    while (n < p) {
        f *= 10;
        dig[n++] = (char)(f >> k);
        f &= mask;
    }
    if (f > half || (f == half && (dig[p - 1] & 1))) {
        int i = p - 1;
        while (i >= 0 && dig[i] == 9)
            dig[i--] = 0;
        if (i >= 0) {
            dig[i]++;
        } else {   /* 999.. rounded up to 1000.. */
            dig[0] = 1;
            (*x)++;
        }
    }
}

bool geo_format_coord(double v, char out[32])
{
    double a = fabs(v);
    if (!(a >= 1e-4 && a < 1000))
        return false;
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    int k = 1075 - (int)((bits >> 52) & 0x7ff);
    uint64_t m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
    if (k < 43 || k > 66)
        return false;
    for (int p = 15; p <= 17; p++) {
        char dig[17];
        int x;
        coord_digits(m, k, p, dig, &x);
        if (x > 2 || x < -4)
            return false;
        /* %.pg in fixed notation: trailing zeros (and a bare point) removed */
        int last = p - 1;
        while (last > 0 && dig[last] == 0 && last > x)
            last--;
        char *o = out;
        if (v < 0)
            *o++ = '-';
        if (x < 0) {
            *o++ = '0';
            *o++ = '.';
            for (int z = -1; z > x; z--)
                *o++ = '0';
            for (int i = 0; i <= last; i++)
                *o++ = (char)('0' + dig[i]);
        } else {
            for (int i = 0; i <= x; i++)
                *o++ = (char)('0' + dig[i]);
            *o++ = '.';
            if (last > x)
                for (int i = x + 1; i <= last; i++)
                    *o++ = (char)('0' + dig[i]);
            else
                *o++ = '0';   /* integral: printed with ".0", as tally prints reals */
        }
        *o = '\0';
        if (p == 17 || strtod(out, NULL) == v)
            return true;
    }
    return true;
}

int geo_format_distance(double d, char *out, size_t n)
{
    long long v = llrint(d * 1e4);
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    char tmp[32];
    int k = (int)sizeof(tmp);
    for (int i = 0; i < 4; i++, u /= 10)   /* the four decimals */
        tmp[--k] = (char)('0' + u % 10);
    tmp[--k] = '.';
    do {                                   /* the integer part, at least "0" */
        tmp[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--k] = '-';
    int len = (int)sizeof(tmp) - k;
    if ((size_t)len >= n)
        return snprintf(out, n, "%.*s", len, tmp + k);
    memcpy(out, tmp + k, (size_t)len);
    out[len] = '\0';
    return len;
}

bool geo_in_shape(const geo_shape_t *s, double lon, double lat, double *dist_m)
{
    if (s->kind == GEO_SHAPE_RADIUS) {
        *dist_m = geo_distance(s->lon, s->lat, lon, lat);
        return !(*dist_m > s->radius * s->to_m);
    }
    double width_m = s->width * s->to_m, height_m = s->height * s->to_m;
    double lon_dist = geo_distance(lon, lat, s->lon, lat);   /* along the point's parallel */
    double lat_dist = geo_distance(lon, lat, lon, s->lat);   /* along the point's meridian */
    if (lon_dist > width_m / 2 || lat_dist > height_m / 2)
        return false;
    *dist_m = geo_distance(s->lon, s->lat, lon, lat);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Prepared shapes                                                          */
/* ------------------------------------------------------------------------ */

#define BOUND_MARGIN_M 10.0          /* >> the worst rounding of the haversine (~0.4 m near antipodes) */
#define BOUND_SLACK 1e-9             /* relative slack on computed bounds */

void geo_matcher_init(geo_matcher_t *m, const geo_shape_t *s)
{
    m->s = *s;
    m->cos_lat = cos(deg_rad(s->lat));
    double reach_m = (s->kind == GEO_SHAPE_RADIUS ? s->radius : s->height / 2) * s->to_m + BOUND_MARGIN_M;
    m->lat_limit = rad_deg(reach_m / GEO_EARTH_RADIUS_M) * (1 + BOUND_SLACK);
    m->lon_limit = -1;
    if (s->kind == GEO_SHAPE_RADIUS) {
        double rho = (s->radius * s->to_m + BOUND_MARGIN_M) / GEO_EARTH_RADIUS_M;
        double c = cos(deg_rad(fabs(s->lat)));
        /* only when the circle stays away from the poles */
        if (rho < M_PI / 4 && sin(rho) < c * (1 - 1e-6))
            m->lon_limit = rad_deg(asin(sin(rho) / c)) * (1 + BOUND_SLACK) + 1e-9;
    }
}

/* One coordinate of a 26-step cell centre, as geohash_decode_score computes
 * it (dividing by 2^26 is exact, so multiplying by 2^-26 gives the same bits). */
static inline double centre26(uint32_t idx, double min, double max, double lo, double hi)
{
    double scale = max - min;
    double a = min + (idx * 1.0 * 0x1p-26) * scale;
    double b = min + ((idx + 1) * 1.0 * 0x1p-26) * scale;
    double c = (a + b) / 2;
    return c > hi ? hi : c < lo ? lo : c;
}

bool geo_matcher_score(const geo_matcher_t *m, uint64_t score, double *lon, double *lat, double *dist_m)
{
    const geo_shape_t *s = &m->s;
    *lat = centre26(gather32(score), GEO_LAT_MIN, GEO_LAT_MAX, GEO_LAT_MIN, GEO_LAT_MAX);
    if (fabs(*lat - s->lat) > m->lat_limit)
        return false;
    *lon = centre26(gather32(score >> 1), GEO_LON_MIN, GEO_LON_MAX, GEO_LON_MIN, GEO_LON_MAX);
    if (m->lon_limit >= 0) {
        double dl = fabs(*lon - s->lon);
        if (dl > 180)
            dl = 360 - dl;
        if (dl > m->lon_limit)
            return false;
    }
    if (s->kind != GEO_SHAPE_RADIUS)
        return geo_in_shape(s, *lon, *lat, dist_m);
    /* geo_distance(s->lon, s->lat, lon, lat) with the centre's cosine hoisted:
     * the same operations in the same order, so the same bits */
    double lat1r = deg_rad(s->lat);
    double lon1r = deg_rad(s->lon);
    double lat2r = deg_rad(*lat);
    double lon2r = deg_rad(*lon);
    double u = sin((lat2r - lat1r) / 2);
    double v = sin((lon2r - lon1r) / 2);
    *dist_m = 2.0 * GEO_EARTH_RADIUS_M * asin(sqrt(u * u + m->cos_lat * cos(lat2r) * v * v));
    return !(*dist_m > s->radius * s->to_m);
}
