/*
 * freq.h - request pieces shared by the frequency and quantile families
 * (api/cms.c, api/topk.c, api/tdigest.c): item lists, increments, value
 * lists and non-finite numbers in JSON.
 */
#ifndef TALLY_API_FREQ_H
#define TALLY_API_FREQ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/items.h"
#include "api/request.h"

/* Reads the batch of a body holding exactly one of
 *   "items":      ["a", "b", ...]                      (each by 1), or
 *   "increments": [{"item": "a", "by": n}, ...]        (by in [min_by, max_by], default 1)
 * (increments only when allow_increments).  1..API_MAX_BATCH entries.  An
 * item is a string or an integer standing for its decimal text, as in
 * api/items.h.  Fills *out (with out->by; release with api_items_free), or
 * returns false with a 400 naming the field. */
bool freq_body_items(api_resp_t *resp, json_t *body, bool allow_increments, uint64_t min_by, uint64_t max_by,
                     api_items_t *out);

/* Every value of the repeated query parameter `name` (1..API_MAX_BATCH of
 * them), as items (out->by NULL: 1 each).  False with a 400 when there are
 * none or too many, or when out of memory (507). */
bool freq_query_items(const api_req_t *req, api_resp_t *resp, const char *name, api_items_t *out);

/* Every value of the repeated query parameter `name` as a finite number in
 * [min, max]; malloc'd, NULL with a 400 naming it. */
double *freq_query_doubles(const api_req_t *req, api_resp_t *resp, const char *name, double min, double max,
                           size_t *n);

/* A number for JSON: a real, or the string "nan", "inf" or "-inf". */
json_t *freq_real(double v);

/* A count as a JSON integer, capped at INT64_MAX (JSON integers are signed). */
json_t *freq_count(uint64_t v);

/* The JSON string of item bytes (null if they are not valid UTF-8, which
 * only a hand-made snapshot can produce). */
json_t *freq_string(const char *p, size_t len);

#endif
