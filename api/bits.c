/*
 * bits.c - /bits: Redis string bitmaps with Redis's exact answers.
 *
 *   PUT  /bits/{key}           raw body        -> {"length":N}            SET
 *   GET  /bits/{key}[?start=&end=]             -> the bytes (404 if none)  GET / GETRANGE
 *   POST /bits/{key}/setbit    {"offset","value"} -> {"previous":0|1}     SETBIT
 *   GET  /bits/{key}/getbit?offset=            -> {"value":0|1}           GETBIT
 *   GET  /bits/{key}/count?start=&end=&unit=   -> {"count":N}             BITCOUNT
 *   GET  /bits/{key}/pos?bit=&start=&end=&unit= -> {"position":N}         BITPOS
 *   POST /bits/{key}/op        {"op","sources"} -> {"length":N}           BITOP ({key} = destination)
 *   POST /bits/{key}/field     {"ops":[...]}   -> {"results":[...]}       BITFIELD
 *   POST /bits/{key}/field_ro  {"ops":[...]}   -> {"results":[...]}       BITFIELD_RO
 *        (get and overflow only; never creates, changes or journals the key)
 *
 * Deviation from Redis, on purpose: Redis's SET and BITOP overwrite a key of
 * any type; here a destination holding another type is a 409 WRONGTYPE (an
 * HLL or a Bloom filter is not silently replaced by a bit string).
 *
 * Memory: a write that grows a string first checks the length it reaches
 * against --max-value-size (400) and makes room for the growth
 * (api_make_room_for), so SETBIT at offset 2^32-1 under a 100 MB limit is a
 * 507, not a 512 MiB allocation.  BITOP reads a source named several times
 * once (see h_bits_op), and the sources it reads may total at most
 * API_WORK_VALUES x --max-value-size.  GET of a string longer than
 * --max-answer-size is refused: ?start=&end= reads a part (GETRANGE).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/auth.h"
#include "core/bitfield.h"
#include "core/bits.h"

#define OFFSET_LIMIT_MSG "between 0 and 4294967295 (2^32-1: a bit string holds at most 512 MiB)"

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */
/* ------------------------------------------------------------------------ */

static bool offset_ok(api_resp_t *resp, const char *field, int64_t v, bool parsed)
{
    if (!parsed || v < 0 || (uint64_t)v > BITS_MAX_OFFSET) {
        api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' must be an integer " OFFSET_LIMIT_MSG, field);
        return false;
    }
    return true;
}

static bool body_offset(api_resp_t *resp, json_t *body, uint64_t *out)
{
    json_t *v = json_object_get(body, "offset");
    if (!v) {
        api_error_field(resp, API_E_BAD_REQUEST, "offset", "missing field 'offset'");
        return false;
    }
    int64_t x = json_is_integer(v) ? json_integer_value(v) : -1;
    if (!offset_ok(resp, "offset", x, json_is_integer(v)))
        return false;
    *out = (uint64_t)x;
    return true;
}

static bool query_offset(const api_req_t *req, api_resp_t *resp, uint64_t *out)
{
    const char *s;
    size_t len;
    if (!api_query_string(req, resp, "offset", true, &s, &len))
        return false;
    int64_t x = -1;
    bool parsed = api_parse_i64(s, len, &x);
    if (!offset_ok(resp, "offset", x, parsed))
        return false;
    *out = (uint64_t)x;
    return true;
}

static bool query_unit(const api_req_t *req, api_resp_t *resp, bits_unit_t *unit, bool *present)
{
    size_t n = api_query_count(req, "unit");
    *present = n > 0;
    *unit = BITS_UNIT_BYTE;
    if (n == 0)
        return true;
    const char *s = api_query_get(req, "unit", NULL);
    if (n > 1 || (strcasecmp(s, "byte") != 0 && strcasecmp(s, "bit") != 0)) {
        api_error_field(resp, API_E_BAD_REQUEST, "unit", "query parameter 'unit' must be byte or bit");
        return false;
    }
    *unit = strcasecmp(s, "bit") == 0 ? BITS_UNIT_BIT : BITS_UNIT_BYTE;
    return true;
}

/* start/end/unit for BITCOUNT (`need_end`: both or neither) and BITPOS
 * (end needs start; unit needs both, as Redis's argument positions). */
static bool query_range(const api_req_t *req, api_resp_t *resp, bits_range_t *r, bool need_end)
{
    bool unit_given;
    memset(r, 0, sizeof(*r));
    if (!api_query_int(req, resp, "start", false, INT64_MIN, INT64_MAX, &r->start, &r->has_start) ||
        !api_query_int(req, resp, "end", false, INT64_MIN, INT64_MAX, &r->end, &r->has_end) ||
        !query_unit(req, resp, &r->unit, &unit_given))
        return false;
    if (need_end && r->has_start != r->has_end) {
        const char *missing = r->has_start ? "end" : "start";
        api_error_field(resp, API_E_BAD_REQUEST, missing, "'start' and 'end' go together: '%s' is missing",
                        missing);
        return false;
    }
    if (r->has_end && !r->has_start) {
        api_error_field(resp, API_E_BAD_REQUEST, "start", "'end' needs 'start'");
        return false;
    }
    if (unit_given && !(r->has_start && r->has_end)) {
        api_error_field(resp, API_E_BAD_REQUEST, "unit", "'unit' needs both 'start' and 'end'");
        return false;
    }
    return true;
}

/* The hot path of SETBIT skips building a JSON tree: a body that is exactly
 * {"offset":N,"value":V} (either order, JSON whitespace, plain integers, a
 * JSON media type) with valid values is read here; anything else goes
 * through api_body_object and the usual checks, which give the errors. */
static const uint8_t *skip_ws(const uint8_t *p, const uint8_t *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static const uint8_t *read_int(const uint8_t *p, const uint8_t *end, int64_t *out)
{
    bool neg = p < end && *p == '-';
    p += neg;
    const uint8_t *start = p;
    int64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9' && p - start < 18)
        v = v * 10 + (*p++ - '0');
    if (p == start || (p - start > 1 && *start == '0') || (p < end && (*p == '.' || *p == 'e' || *p == 'E' ||
                                                                      (*p >= '0' && *p <= '9'))))
        return NULL;
    *out = neg ? -v : v;
    return p;
}

static bool setbit_fast(const api_req_t *req, uint64_t *offset, int64_t *value)
{
    if (req->ctype && !api_media_type_is(req->ctype, "application/json"))
        return false;
    if (!req->body_len)
        return false;
    const uint8_t *p = req->body, *end = req->body + req->body_len;
    int64_t v[2];
    bool seen[2] = { false, false };
    p = skip_ws(p, end);
    if (p == end || *p++ != '{')
        return false;
    for (int i = 0; i < 2; i++) {
        p = skip_ws(p, end);
        int which;
        if (end - p >= 8 && memcmp(p, "\"offset\"", 8) == 0) {
            which = 0;
            p += 8;
        } else if (end - p >= 7 && memcmp(p, "\"value\"", 7) == 0) {
            which = 1;
            p += 7;
        } else {
            return false;
        }
        if (seen[which])
            return false;
        seen[which] = true;
        p = skip_ws(p, end);
        if (p == end || *p++ != ':')
            return false;
        p = skip_ws(p, end);
        if (!(p = read_int(p, end, &v[which])))
            return false;
        p = skip_ws(p, end);
        if (p == end || *p++ != (i == 0 ? ',' : '}'))
            return false;
    }
    if (skip_ws(p, end) != end || v[0] < 0 || (uint64_t)v[0] > BITS_MAX_OFFSET || (v[1] != 0 && v[1] != 1))
        return false;
    *offset = (uint64_t)v[0];
    *value = v[1];
    return true;
}

/* ------------------------------------------------------------------------ */
/* Keyspace access                                                          */
/* ------------------------------------------------------------------------ */

/* Before a write that leaves the string at `len` bytes, grown in place
 * (replace = false) or replaced by an exact-size buffer: the length may not
 * pass --max-value-size (a bit string's size is its length, as Redis's
 * 512 MB bulk limit counts it), and room is made for the growth.  Call
 * without locks. */
static bool bits_room(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                      const char *field, size_t len, bool replace)
{
    if (!api_value_fits(srv, req, resp, field, "the bit string", len) || !api_make_room(srv, req, resp))
        return false;
    if (req->replay || !ks_maxmemory(srv->ks))
        return true;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, NULL, API_READ, &h))   /* any type: only a 403 */
        return false;
    const bits_t *b = h.e && ks_entry_type(h.e) == &bits_type ? api_key_value(&h) : NULL;
    size_t before = b ? bits_heap_bytes(b) : 0;
    size_t after = bits_heap_bytes_after(replace ? NULL : b, len);
    bool exists = h.e != NULL;
    api_key_close(&h, false);
    return after <= before || api_make_room_for_key(srv, req, resp, after - before + (exists ? 0 : ks_entry_overhead(klen)),
                                                    key, klen, before);
}

/* Creates the value for a missing key, already grown to len; NULL (507 set)
 * on allocation failure. */
static bits_t *new_bits(api_resp_t *resp, size_t len)
{
    uint8_t *p = calloc(len, 1);
    bits_t *b = p ? bits_adopt(p, len) : NULL;
    if (!b)
        free(p);
    if (!b)
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory allocating a %zu-byte bit string", len);
    return b;
}

/* Stores b at the missing key of h (keys[0]); false (b freed, 507 set) when
 * out of memory. */
static bool add_bits(api_key_t *h, bits_t *b)
{
    if (api_key_add(h, &bits_type, b, KS_NO_EXPIRY))
        return true;
    bits_free(b);
    api_error(h->ctx->front, API_E_OUT_OF_MEMORY, "out of memory adding the key");
    return false;
}

/* ------------------------------------------------------------------------ */
/* Raw bytes                                                                */
/* ------------------------------------------------------------------------ */

static void h_bits_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    const char *key;
    size_t klen;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    if (req->body_len > BITS_MAX_LEN) {
        api_error(resp, API_E_PAYLOAD_TOO_LARGE, "a bit string holds at most %llu bytes",
                  (unsigned long long)BITS_MAX_LEN);
        return;
    }
    if (!bits_room(srv, req, resp, key, klen, NULL, req->body_len, true))
        return;
    bits_t *nb = bits_from(req->body, req->body_len);
    if (!nb) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing %zu bytes", req->body_len);
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bits_type, API_WRITE, &h)) {
        bits_free(nb);
        return;
    }
    if (h.e) {
        api_key_replace(&h, nb);
    } else if (!add_bits(&h, nb)) {
        api_key_close(&h, false);
        return;
    }
    api_key_close(&h, true);
    if (resp->status == 0)
        api_json(resp, 200, json_pack("{s:I}", "length", (json_int_t)req->body_len));
}

/* GET, or with ?start=&end= GETRANGE: bytes start..end inclusive, negative
 * offsets counted from the end, clamped to the string as Redis does. */
static void h_bits_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "start", "end", NULL };
    const char *key;
    size_t klen;
    int64_t start = 0, end = -1;
    bool has_start, has_end;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "start", false, INT64_MIN, INT64_MAX, &start, &has_start) ||
        !api_query_int(req, resp, "end", false, INT64_MIN, INT64_MAX, &end, &has_end))
        return;
    if (has_start != has_end) {
        const char *missing = has_start ? "end" : "start";
        api_error_field(resp, API_E_BAD_REQUEST, missing, "'start' and 'end' go together: '%s' is missing", missing);
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bits_type, API_MUST_EXIST, &h))
        return;
    const bits_t *b = api_key_value(&h);   /* an empty string has no buffer */
    int64_t len = (int64_t)bits_len(b);
    size_t off = 0, n = 0;
    if (!(start < 0 && end < 0 && start > end)) {
        if (start < 0)
            start = start < -len ? 0 : len + start;
        if (end < 0)
            end = end < -len ? 0 : len + end;
        if (end >= len)
            end = len - 1;
        if (len > 0 && start <= end) {
            off = (size_t)start;
            n = (size_t)(end - start + 1);
        }
    }
    if (api_answer_fits(srv, req, resp, n,
                        "read the string in parts with ?start=&end= (byte offsets, inclusive, as GETRANGE)"))
        api_body(resp, 200, "application/octet-stream", n ? (const void *)(bits_data(b) + off) : "", n);
    api_key_close(&h, false);
}

/* ------------------------------------------------------------------------ */
/* SETBIT / GETBIT / BITCOUNT / BITPOS                                      */
/* ------------------------------------------------------------------------ */

static void h_bits_setbit(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "offset", "value", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    uint64_t offset;
    int64_t value;
    if (!api_path_key(req, resp, &key, &klen) || !api_no_query(req, resp))
        return;
    if (!setbit_fast(req, &offset, &value) &&
        (!(body = api_body_object(req, resp, fields)) || !body_offset(resp, body, &offset) ||
         !api_obj_int(resp, body, "value", true, 0, 1, &value, NULL)))
        return;
    size_t need = (size_t)(offset >> 3) + 1;
    if (!bits_room(srv, req, resp, key, klen, "offset", need, false))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bits_type, API_WRITE, &h))
        return;
    bits_t *b = api_key_value(&h);
    int old = b ? bits_getbit(bits_data(b), bits_len(b), offset) : 0;
    bool grows = !b || bits_len(b) < need;
    if (grows || old != value) {
        if (!b) {
            if (!(b = new_bits(resp, need)) || !add_bits(&h, b)) {
                api_key_close(&h, false);
                return;
            }
        } else if (!bits_grow(b, need)) {
            api_key_close(&h, false);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory growing the bit string to %zu bytes", need);
            return;
        }
        bits_setbit(bits_mut(b), offset, (int)value);
    }
    api_key_close(&h, grows || old != value);
    if (resp->status == 0)
        api_body(resp, 200, NULL, old ? "{\"previous\":1}" : "{\"previous\":0}", 14);
}

static void h_bits_getbit(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "offset", NULL };
    const char *key;
    size_t klen;
    uint64_t offset;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !query_offset(req, resp, &offset))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bits_type, API_READ, &h))
        return;
    const bits_t *b = api_key_value(&h);
    int v = b ? bits_getbit(bits_data(b), bits_len(b), offset) : 0;
    api_key_close(&h, false);
    api_body(resp, 200, NULL, v ? "{\"value\":1}" : "{\"value\":0}", 11);
}

static void h_bits_count(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "start", "end", "unit", NULL };
    const char *key;
    size_t klen;
    bits_range_t r;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !query_range(req, resp, &r, true))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bits_type, API_READ, &h))
        return;
    const bits_t *b = api_key_value(&h);
    int64_t n = b ? bits_count(bits_data(b), bits_len(b), &r) : 0;
    api_key_close(&h, false);
    api_json(resp, 200, json_pack("{s:I}", "count", (json_int_t)n));
}

static void h_bits_pos(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const params[] = { "bit", "start", "end", "unit", NULL };
    const char *key;
    size_t klen;
    bits_range_t r;
    int64_t bit;
    if (!api_path_key(req, resp, &key, &klen) || !api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "bit", true, 0, 1, &bit, NULL) || !query_range(req, resp, &r, false))
        return;
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bits_type, API_READ, &h))
        return;
    const bits_t *b = api_key_value(&h);
    int64_t pos = b ? bits_pos(bits_data(b), bits_len(b), true, (int)bit, &r) : bits_pos(NULL, 0, false, (int)bit, &r);
    api_key_close(&h, false);
    api_json(resp, 200, json_pack("{s:I}", "position", (json_int_t)pos));
}

/* ------------------------------------------------------------------------ */
/* BITOP                                                                    */
/* ------------------------------------------------------------------------ */

static void h_bits_op(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    static const char *const fields[] = { "op", "sources", NULL };
    static const struct {
        const char *name;
        bits_op_t op;
    } ops[] = { { "and", BITS_OP_AND }, { "or", BITS_OP_OR }, { "xor", BITS_OP_XOR }, { "not", BITS_OP_NOT } };
    const char *key, *opname;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)) ||
        !api_obj_string(resp, body, "op", true, &opname, NULL))
        return;
    int op = -1;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcasecmp(opname, ops[i].name) == 0)
            op = (int)ops[i].op;
    if (op < 0) {
        api_error_field(resp, API_E_BAD_REQUEST, "op", "'op' must be and, or, xor or not");
        return;
    }
    json_t *srcs = json_object_get(body, "sources");
    size_t n = json_array_size(srcs);
    if (!json_is_array(srcs) || n == 0 || n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "sources",
                        "'sources' must be an array of 1 to %d keys", API_MAX_BATCH);
        return;
    }
    if (op == BITS_OP_NOT && n != 1) {
        api_error_field(resp, API_E_BAD_REQUEST, "sources", "BITOP NOT takes exactly one source key, not %zu", n);
        return;
    }
    /* keys[0] the destination, then the distinct sources; use[] the sources
     * each pass of bits_bitop reads (indexes into keys) */
    ks_key_t *keys = malloc((n + 1) * sizeof(*keys));
    size_t *first = malloc(n * sizeof(*first)), *times = calloc(n, sizeof(*times)), *at = malloc(n * sizeof(*at));
    size_t *use = malloc(2 * n * sizeof(*use));
    const uint8_t **data = malloc(2 * n * sizeof(*data));
    size_t *lens = malloc(2 * n * sizeof(*lens));
    if (!keys || !first || !times || !at || !use || !data || !lens) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    keys[0] = ks_key(srv->ks, key, klen);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(srcs, i);
        char field[32];
        snprintf(field, sizeof(field), "sources[%zu]", i);
        if (!json_is_string(s)) {
            api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' must be a key (a string)", field);
            goto out;
        }
        if (!api_check_key(resp, field, json_string_value(s), json_string_length(s)))
            goto out;
        keys[i + 1] = ks_key(srv->ks, json_string_value(s), json_string_length(s));
    }
    /* A source named more than once is read once: AND and OR give the same
     * bits for a repeated operand, and for XOR a pair cancels out, so a
     * source named an even number of times is read twice (zeros, with its
     * length) and an odd number once.  BITOP of 10 000 copies of one key
     * costs what BITOP of one does. */
    if (!api_keys_distinct(keys + 1, n, first)) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    size_t nd = 0, nuse = 0;
    for (size_t i = 0; i < n; i++) {
        if (first[i] == i) {
            at[i] = ++nd;
            keys[nd] = keys[i + 1];
        }
        times[first[i]]++;
    }
    for (size_t i = 0; i < n; i++) {
        if (first[i] != i)
            continue;
        use[nuse++] = i;
        if (op == BITS_OP_XOR && times[i] % 2 == 0)
            use[nuse++] = i;
    }
    /* the token's prefixes before any eviction: a refusal changes nothing */
    if (!api_keys_allowed(srv, req, resp, keys, nd + 1) || !api_make_room(srv, req, resp))
        goto out;

    for (unsigned attempts = 0;;) {
        api_key_t h;
        if (!api_keys_lock(srv, req, resp, keys, nd + 1, &h))
            goto out;
        size_t maxlen = 0;
        const uint8_t **sdata = malloc(nd * sizeof(*sdata));
        size_t *slen = malloc(nd * sizeof(*slen));
        if (!sdata || !slen) {
            free(sdata);
            free(slen);
            api_key_close(&h, false);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            goto out;
        }
        bool found = true;
        uint64_t pinned = 0;   /* the sources and the destination: kept while room is made */
        for (size_t i = 0; i < n && found; i++) {
            if (first[i] != i)
                continue;
            char what[32];
            snprintf(what, sizeof(what), "sources[%zu]", i);
            ks_entry_t *se;
            found = api_keys_find(&h, at[i], &bits_type, API_READ, what, &se);
            const bits_t *sb = found && se ? ks_entry_value(se) : NULL;
            pinned += sb ? bits_heap_bytes(sb) : 0;
            sdata[at[i] - 1] = sb ? bits_data(sb) : NULL;
            slen[at[i] - 1] = sb ? bits_len(sb) : 0;
            if (slen[at[i] - 1] > maxlen)
                maxlen = slen[at[i] - 1];
        }
        uint64_t work = 0;
        for (size_t k = 0; found && k < nuse; k++) {
            data[k] = sdata[at[use[k]] - 1];
            lens[k] = slen[at[use[k]] - 1];
            work += lens[k];
        }
        free(sdata);
        free(slen);
        if (!found || !api_keys_find(&h, 0, &bits_type, API_WRITE, "destination", NULL))
            goto out;
        /* bounded work, a bounded result, and room for it: it is built
         * while the destination's old value still exists */
        size_t before = h.e ? bits_heap_bytes(api_key_value(&h)) : 0;
        size_t after = maxlen ? bits_heap_bytes_after(NULL, maxlen) : 0;
        uint64_t add = after ? after + (h.e ? 0 : ks_entry_overhead(klen)) : 0;
        bool dst_read = false;   /* the destination among the sources: counted once */
        for (size_t k = 1; k <= nd && !dst_read; k++)
            dst_read = keys[k].len == klen && memcmp(keys[k].p, key, klen) == 0;
        api_keep_t keep = { keys, nd + 1, pinned + (dst_read ? 0 : before) };
        if (!api_work_fits(srv, req, resp, "sources", work) ||
            !api_value_fits(srv, req, resp, "sources", "the result", maxlen)) {
            api_key_close(&h, false);
            goto out;
        }
        if (add > api_room_now(srv, req)) {
            api_key_close(&h, false);
            if (!api_room_retry(srv, req, resp, add, &keep, &attempts))
                goto out;
            continue;
        }
        uint8_t *res;
        size_t rlen;
        if (!bits_bitop((bits_op_t)op, data, lens, nuse, &res, &rlen)) {
            api_key_close(&h, false);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory computing a %zu-byte result", maxlen);
            goto out;
        }
        bool changed = false;
        if (rlen == 0) {
            if (h.e) {   /* an empty result deletes the destination */
                api_key_delete(&h);
                changed = true;
            }
        } else {
            bits_t *nb = bits_adopt(res, rlen);
            if (!nb) {
                free(res);
                api_key_close(&h, false);
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
                goto out;
            }
            if (h.e) {
                api_key_replace(&h, nb);
            } else if (!add_bits(&h, nb)) {
                api_key_close(&h, false);
                goto out;
            }
            changed = true;
        }
        api_key_close(&h, changed);
        if (resp->status == 0)
            api_json(resp, 200, json_pack("{s:I}", "length", (json_int_t)rlen));
        break;
    }
out:
    free(keys);
    free(first);
    free(times);
    free(at);
    free(use);
    free(data);
    free(lens);
}

/* ------------------------------------------------------------------------ */
/* BITFIELD                                                                 */
/* ------------------------------------------------------------------------ */

/* An offset: an integer, or a string "N" / "#N" (N times the width), as
 * Redis parses it (no sign, spaces or leading zeros in strings). */
static bool field_offset(api_resp_t *resp, const char *field, json_t *v, unsigned width, uint64_t *out)
{
    int64_t x = -1;
    bool ok = false;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
        ok = true;
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        bool hash = len > 0 && s[0] == '#';
        s += hash;
        len -= hash;
        ok = len > 0 && len <= 19 && (s[0] != '0' || len == 1) && api_parse_i64(s, len, &x) && s[0] != '-';
        if (ok && hash) {
            if (x > (int64_t)(BITS_MAX_OFFSET / width) + 1)
                x = -1;   /* beyond the limit whatever the width */
            else
                x *= (int64_t)width;
        }
    }
    if (!ok || x < 0 || (uint64_t)x > BITS_MAX_OFFSET) {
        api_error_field(resp, API_E_BAD_REQUEST, field,
                        "'%s' must be a bit offset (an integer or \"#N\" for N times the width) " OFFSET_LIMIT_MSG,
                        field);
        return false;
    }
    *out = (uint64_t)x;
    return true;
}

/* Parses ops[] into bf_op_t (the overflow in force copied into each). */
static bool parse_field_ops(api_resp_t *resp, json_t *arr, bf_op_t *ops, size_t *nops)
{
    bf_overflow_t ow = BF_WRAP;
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *o = json_array_get(arr, i);
        char field[64];
        snprintf(field, sizeof(field), "ops[%zu]", i);
        if (!json_is_object(o)) {
            api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' must be an object", field);
            return false;
        }
        static const char *const verbs[] = { "get", "set", "incrby", "overflow" };
        int verb = -1;
        for (int v = 0; v < 4; v++)
            if (json_object_get(o, verbs[v])) {
                if (verb >= 0) {
                    api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' names two operations (%s and %s)", field,
                                    verbs[verb], verbs[v]);
                    return false;
                }
                verb = v;
            }
        if (verb < 0) {
            api_error_field(resp, API_E_BAD_REQUEST, field, "'%s' must have one of get, set, incrby, overflow",
                            field);
            return false;
        }
        const char *argname = verb == 1 ? "value" : verb == 2 ? "increment" : NULL;
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
            if (strcmp(k, verbs[verb]) != 0 && (verb == 3 || strcmp(k, "offset") != 0) &&
                (!argname || strcmp(k, argname) != 0)) {
                char f[96];
                snprintf(f, sizeof(f), "%s.%s", field, k);
                api_error_field(resp, API_E_BAD_REQUEST, f, "unknown field '%s'", f);
                return false;
            }
        }
        char f[96];
        snprintf(f, sizeof(f), "%s.%s", field, verbs[verb]);
        json_t *arg = json_object_get(o, verbs[verb]);
        if (verb == 3) {
            const char *s = json_is_string(arg) ? json_string_value(arg) : "";
            if (strcasecmp(s, "wrap") == 0)
                ow = BF_WRAP;
            else if (strcasecmp(s, "sat") == 0)
                ow = BF_SAT;
            else if (strcasecmp(s, "fail") == 0)
                ow = BF_FAIL;
            else {
                api_error_field(resp, API_E_BAD_REQUEST, f, "Invalid OVERFLOW type specified: '%s' must be wrap, sat or fail",
                                f);
                return false;
            }
            continue;
        }
        bf_op_t *op = &ops[n];
        memset(op, 0, sizeof(*op));
        op->opcode = verb == 0 ? BF_GET : verb == 1 ? BF_SET : BF_INCRBY;
        op->overflow = (uint8_t)ow;
        if (!json_is_string(arg) || !bf_parse_type(json_string_value(arg), json_string_length(arg), &op->sign,
                                                    &op->width)) {
            api_error_field(resp, API_E_BAD_REQUEST, f,
                            "Invalid bitfield type in '%s'. Use something like i16 u8. Note that u64 is not "
                            "supported but i64 is.",
                            f);
            return false;
        }
        snprintf(f, sizeof(f), "%s.offset", field);
        json_t *off = json_object_get(o, "offset");
        if (!off) {
            api_error_field(resp, API_E_BAD_REQUEST, f, "missing field '%s'", f);
            return false;
        }
        if (!field_offset(resp, f, off, op->width, &op->offset))
            return false;
        if (argname) {
            snprintf(f, sizeof(f), "%s.%s", field, argname);
            json_t *a = json_object_get(o, argname);
            if (!json_is_integer(a)) {
                api_error_field(resp, API_E_BAD_REQUEST, f, a ? "'%s' must be a 64-bit integer" : "missing field '%s'",
                                f);
                return false;
            }
            op->arg = json_integer_value(a);
        }
        n++;
    }
    *nops = n;
    return true;
}

/* BITFIELD, or with `ro` BITFIELD_RO (only GET: 400 for any other
 * operation, as Redis answers "BITFIELD_RO only supports the GET
 * subcommand"). */
static void bits_field(api_server_t *srv, api_req_t *req, api_resp_t *resp, bool ro)
{
    static const char *const fields[] = { "ops", NULL };
    const char *key;
    size_t klen;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &key, &klen)))
        return;
    json_t *arr = json_object_get(body, "ops");
    size_t total = json_array_size(arr);
    if (!json_is_array(arr) || total > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "ops", "'ops' must be an array of at most %d operations",
                        API_MAX_BATCH);
        return;
    }
    bf_op_t *ops = malloc((total ? total : 1) * sizeof(*ops));
    bf_result_t *res = malloc((total ? total : 1) * sizeof(*res));
    size_t n = 0;
    if (!ops || !res) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    if (!parse_field_ops(resp, arr, ops, &n))
        goto out;
    for (size_t i = 0; ro && i < n; i++)
        if (ops[i].opcode != BF_GET) {
            api_error_field(resp, API_E_BAD_REQUEST, "ops",
                            "BITFIELD_RO only supports the GET subcommand (use /bits/{key}/field to change bits)");
            goto out;
        }
    for (size_t i = 0; !ro && i < n; i++)
        if (ops[i].opcode == BF_GET) {
            if (!api_auth_require_read(req, resp, "a BITFIELD GET"))
                goto out;
            break;
        }
    size_t need = (size_t)bf_needed_len(ops, n);
    if (need && !bits_room(srv, req, resp, key, klen, "ops", need, false))
        goto out;
    /* only GETs (need == 0): nothing is written, so the read-only bytes are safe */
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, &bits_type, need ? API_WRITE : API_READ, &h))
        goto out;
    bits_t *b = api_key_value(&h);
    bool changed = false;
    if (need) {
        if (!b) {
            if (!(b = new_bits(resp, need)) || !add_bits(&h, b)) {
                api_key_close(&h, false);
                goto out;
            }
            changed = true;
        } else {
            changed = bits_len(b) < need;
            if (!bits_grow(b, need)) {
                api_key_close(&h, false);
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory growing the bit string to %zu bytes", need);
                goto out;
            }
        }
    }
    bool wrote;
    bf_exec(b ? bits_mut(b) : NULL, b ? bits_len(b) : 0, ops, n, res, &wrote);
    api_key_close(&h, changed || (need && wrote));
    if (resp->status == 0) {
        json_t *out = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(out, res[i].nil ? json_null() : json_integer(res[i].value));
        api_json(resp, 200, json_pack("{s:o}", "results", out));
    }
out:
    free(ops);
    free(res);
}

static void h_bits_field(api_server_t *srv, api_req_t *req, api_resp_t *resp) { bits_field(srv, req, resp, false); }
static void h_bits_field_ro(api_server_t *srv, api_req_t *req, api_resp_t *resp) { bits_field(srv, req, resp, true); }

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/bits/{key}",        h_bits_put, API_ROUTE_BINARY, API_ACCESS_WRITE, NULL },
    { API_GET,    "/bits/{key}",        h_bits_get, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/bits/{key}/setbit", h_bits_setbit, 0, API_ACCESS_WRITE, NULL },
    { API_GET,    "/bits/{key}/getbit", h_bits_getbit, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/bits/{key}/count",  h_bits_count, 0, API_ACCESS_READ, NULL },
    { API_GET,    "/bits/{key}/pos",    h_bits_pos, 0, API_ACCESS_READ, NULL },
    { API_POST,   "/bits/{key}/op",     h_bits_op, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/bits/{key}/field",  h_bits_field, 0, API_ACCESS_WRITE, NULL },
    { API_POST,   "/bits/{key}/field_ro", h_bits_field_ro, API_ROUTE_READS, API_ACCESS_READ, NULL },
};

API_FAMILY(bits);
