/*
 * pattern.h - a route's pattern, split once into segments: literals
 * compared byte for byte, `{x}` matching any one segment, a final `{x...}`
 * any remainder.  The router matches requests with it; handlers read the
 * {parameters} of the route they were matched to (api_path_param).
 */
#ifndef TALLY_API_PATTERN_H
#define TALLY_API_PATTERN_H

#include <stdbool.h>
#include <stddef.h>

#include "api/request.h"

typedef struct api_pattern_seg {
    const char *text;    /* literal text, or the parameter's name */
    size_t len;
    bool param;
} api_pattern_seg_t;

typedef struct api_pattern {
    api_pattern_seg_t seg[API_MAX_SEGMENTS];
    int nseg;            /* segments before a rest parameter */
    bool rest;           /* ends with {x...} */
} api_pattern_t;

/* Splits pattern ("/uv/{key}/merge") into *c, which must be zeroed; the
 * segments point into pattern, which must outlive c. */
void api_pattern_compile(api_pattern_t *c, const char *pattern);
/* Whether the request's decoded segments match c. */
bool api_pattern_matches(const api_pattern_t *c, const api_req_t *req);

/* The decoded path segment captured by the route's {name} placeholder. */
const char *api_path_param(const api_req_t *req, const char *name, size_t *len);

#endif
