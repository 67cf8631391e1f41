/*
 * items.h - item lists and key lists in request bodies, for the sketch
 * handlers (/uv, /bloom, /cuckoo).
 *
 * An item is a JSON string (any bytes JSON can carry, "" included) or an
 * integer, which stands for its decimal text (7 and "7" are the same item,
 * as Redis clients send numbers).  A list holds 1 to API_MAX_BATCH items;
 * anything else (missing, not an array, empty, too long, an element of
 * another type) is a 400 naming the field and, for an element, its index.
 */
#ifndef TALLY_API_ITEMS_H
#define TALLY_API_ITEMS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/request.h"
#include "api/respond.h"

typedef struct api_items {
    size_t n;
    const char **p;      /* item bytes (borrowed from the JSON body, the query or numbuf) */
    size_t *len;
    uint64_t *by;        /* each item's increment (freq_body_items); NULL: 1 each */
    char *numbuf;        /* text of integer items */
} api_items_t;

/* Room for an integer item's decimal text ("-9223372036854775808" and NUL). */
#define API_ITEM_TEXT 24
/* An item's bytes: a JSON string's own, or an integer's decimal text written
 * into buf (API_ITEM_TEXT bytes).  False when v is neither. */
bool api_item_text(const json_t *v, char *buf, const char **p, size_t *len);

/* Reads body[field] as an item list.  On failure sets a 400 and returns false
 * (nothing to free). */
bool api_items_parse(api_resp_t *resp, json_t *body, const char *field, api_items_t *out);
/* Reads body[field] as a list of 1..max keys (validated like path keys). */
bool api_keys_parse(api_resp_t *resp, json_t *body, const char *field, size_t max, api_items_t *out);
/* Reads the single query parameter `name` as one item (400 if absent or repeated). */
bool api_query_item(const api_req_t *req, api_resp_t *resp, const char *name, const char **item, size_t *len);
/* An empty list of n items (p and len allocated); false with a 507 in err. */
bool api_items_alloc(size_t n, api_items_t *out, api_err_t *err);
void api_items_free(api_items_t *it);
/* The common request shape POST /{family}/{key} {"items": [...]}, no query
 * parameters: the key and the items, or false with a 400 set.  An empty list
 * is a 400 unless allow_empty (PFADD key with no elements is valid Redis). */
bool api_items_request(api_req_t *req, api_resp_t *resp, bool allow_empty, const char **key, size_t *klen,
                       api_items_t *it);

/* Sets a 200 response {"<name>":[true,false,...]}. */
void api_bool_array(api_resp_t *resp, const char *name, const bool *v, size_t n);

#endif
