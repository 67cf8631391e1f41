/*
 * geohash.h - Redis's geohash arithmetic, bit for bit.
 *
 * Redis GEO (src/geohash.c, src/geohash_helper.c, after the ardb project)
 * stores a point as a sorted-set score: a 52-bit integer interleaving two
 * 26-bit cell indices.
 *
 *   lat index = (uint32)((lat - (-85.05112878)) / 170.10225756 * 2^26)
 *   lon index = (uint32)((lon - (-180)) / 360 * 2^26)
 *
 *   bit:  51  50  49  48 ...  1   0
 *        lon lat lon lat ... lon lat      (longitude in the odd positions)
 *
 * A prefix of 2s bits (s = "step", 1..26) names a cell of 2^s x 2^s over the
 * world; its points are exactly the scores in [h << (52-2s), (h+1) << (52-2s)).
 * That is what makes a sorted index answer "who is near here": a search
 * picks a step at which one cell is about the size of the radius, then scans
 * the centre cell and its 8 neighbours as 9 score ranges and filters the
 * candidates by exact distance.
 *
 *   meituan (116.489033, 40.007669) -> 4069887179083478
 *
 * Latitude is limited to +-85.05112878 (the Web Mercator square).  Decoding
 * gives the centre of the 26-step cell (about 0.6 m by 0.3 m at the equator),
 * clamped to the ranges: GEOPOS and every distance use that centre, never
 * the input.  Distances are haversine on a sphere of R = 6372797.560856 m.
 *
 * Exactness: every expression below is evaluated in the same order, in the
 * same types, with the same conversions as Redis 7.0 (the Debian reference
 * server), so that positions, hashes, distances and search results are equal
 * to the last bit, not approximately.  Places where that means reproducing an
 * oddity are marked "(as Redis)".  Distances are printed as Redis 7 prints
 * them: round(d * 10^4) half-to-even, not printf's "%.4f" (they differ when
 * the scaled double is exactly a half: 11047474.58925 m is "...5892").
 * Redis 7.2 later rewrote two distance helpers (a shortcut for equal
 * longitudes and the box latitude test); in a million same-meridian pairs
 * they gave the same bits as the 7.0 formulas used here.
 */
#ifndef TALLY_GEOHASH_H
#define TALLY_GEOHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GEO_LON_MIN (-180.0)
#define GEO_LON_MAX 180.0
#define GEO_LAT_MIN (-85.05112878)            /* Web Mercator limit (EPSG:3857) */
#define GEO_LAT_MAX 85.05112878
#define GEO_STEP_MAX 26                       /* 26 + 26 bits = 52, a double's mantissa */
#define GEO_EARTH_RADIUS_M 6372797.560856     /* Redis's quadratic mean radius */
#define GEO_MERCATOR_MAX 20037726.37          /* half the equator in Web Mercator metres */

/* Unit factors (metres per unit) as Redis has them. */
#define GEO_UNIT_M 1.0
#define GEO_UNIT_KM 1000.0
#define GEO_UNIT_FT 0.3048
#define GEO_UNIT_MI 1609.34

/* A cell: `step` bits of each coordinate interleaved in the low 2*step bits.
 * step 0 means "no cell" (a pruned neighbour). */
typedef struct geohash {
    uint64_t bits;
    uint8_t step;
} geohash_t;

typedef struct geo_area {
    double lon_min, lon_max, lat_min, lat_max;
} geo_area_t;

/* The search shape, in the caller's unit (`to_m` metres per unit). */
typedef enum { GEO_SHAPE_RADIUS, GEO_SHAPE_BOX } geo_shape_kind_t;
typedef struct geo_shape {
    geo_shape_kind_t kind;
    double lon, lat;              /* centre */
    double radius;                /* GEO_SHAPE_RADIUS */
    double width, height;         /* GEO_SHAPE_BOX, full sizes */
    double to_m;                  /* unit factor */
} geo_shape_t;

/* Cells to scan: centre then north, south, east, west, north-east,
 * north-west, south-east, south-west (Redis's order); step 0 = pruned. */
typedef struct geo_cells {
    geohash_t cell[9];
    int step;
} geo_cells_t;

/* True when (lon, lat) can be stored (GEOADD's range check). */
bool geo_valid_lonlat(double lon, double lat);

/* Encodes (lon, lat) at `step` over the given ranges.  Returns false, and
 * leaves *out unspecified, when the point is outside the ranges or the WGS84
 * limits (as Redis). */
bool geohash_encode_range(double lon_min, double lon_max, double lat_min, double lat_max, double lon,
                          double lat, unsigned step, geohash_t *out);
/* Over the WGS84 ranges (lat +-85.05112878). */
bool geohash_encode(double lon, double lat, unsigned step, geohash_t *out);

/* The score GEOADD stores for a valid point: the 52-bit hash, passed through
 * a double as Redis's ZADD does (only lon = 180 exactly gives a value above
 * 2^53, which the double then rounds). */
uint64_t geohash_score(double lon, double lat);

/* The cell's bounds over the WGS84 ranges. */
void geohash_area(geohash_t h, geo_area_t *area);
/* A stored score back to its cell centre (GEOPOS), clamped to the ranges. */
void geohash_decode_score(uint64_t score, double *lon, double *lat);
/* GEOHASH: the standard 11-character base32 geohash of the decoded point
 * (re-encoded over lat +-90; the 11th character is always '0').  out[12]. */
void geohash_string(uint64_t score, char out[12]);

/* The 8 neighbours in Redis's order (n, s, e, w, ne, nw, se, sw), wrapping
 * around the world. */
void geohash_neighbors(geohash_t h, geohash_t out[8]);
/* Score range [*min, *max) of a cell, as the doubles Redis compares with. */
void geohash_score_range(geohash_t h, uint64_t *min, uint64_t *max);

/* Step at which a cell is about `range_m` wide (geohashEstimateStepsByRadius). */
unsigned geohash_estimate_steps(double range_m, double lat);
/* Bounding box of the shape: lon_min, lat_min, lon_max, lat_max. */
void geo_bounding_box(const geo_shape_t *s, double bounds[4]);
/* The 9 cells (some pruned) whose union covers the shape. */
void geo_search_cells(const geo_shape_t *s, geo_cells_t *out);

/* GEODIST's text of a distance: four decimals, rounded as Redis 7 does it
 * (the double times 10^4, rounded half-to-even by llrint), which differs from
 * printf's "%.4f" when the scaled value lands exactly on a half.  Returns
 * the length written to out (NUL-terminated; 32 bytes suffice). */
int geo_format_distance(double d, char *out, size_t n);

/* The shortest of the "%.15g", "%.16g", "%.17g" texts of v that reads back
 * as v, with ".0" appended when it has no '.' - what tally's JSON writer
 * prints for a real - computed exactly with integer arithmetic for
 * 1e-4 <= |v| < 1000 (every coordinate but the tiniest) instead of up to
 * three printf/strtod rounds.  Returns false (out untouched) for other
 * values; the caller then uses the general routine.  out needs 32 bytes. */
bool geo_format_coord(double v, char out[32]);

/* Haversine distance in metres between two (decoded) points. */
double geo_distance(double lon1, double lat1, double lon2, double lat2);
/* Whether (lon, lat) is inside the shape; *dist_m = distance from the centre.
 * Box: within half the height along the meridian and half the width along
 * the point's parallel (as Redis). */
bool geo_in_shape(const geo_shape_t *s, double lon, double lat, double *dist_m);

/* A shape prepared for testing many candidates: the same answers (and the
 * same distances, bit for bit) as geo_in_shape, but most points outside are
 * rejected by latitude/longitude bounds before any trigonometry.  The bounds
 * are geometric (a point's great-circle distance is at least R times its
 * latitude difference; a circle of angular radius r around latitude c spans
 * at most asin(sin r / cos c) of longitude) and padded by 10 m, far more
 * than the formula's rounding error, so no point Redis keeps is dropped. */
typedef struct geo_matcher {
    geo_shape_t s;
    double cos_lat;               /* cos of the centre's latitude (radius) */
    double lat_limit;             /* degrees: farther in latitude is outside */
    double lon_limit;             /* degrees (wrapped difference); < 0 = no bound */
} geo_matcher_t;

void geo_matcher_init(geo_matcher_t *m, const geo_shape_t *s);
/* Decodes a stored score (as geohash_decode_score) and tests it; *lon and
 * *lat are set whenever the answer is true. */
bool geo_matcher_score(const geo_matcher_t *m, uint64_t score, double *lon, double *lat, double *dist_m);

#endif
