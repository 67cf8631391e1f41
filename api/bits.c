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
 * Memory (cmd/bits.h): a write that grows a string first checks the length
 * it reaches against --max-value-size (400) and makes room for the growth,
 * so SETBIT at offset 2^32-1 under a 100 MB limit is a 507, not a 512 MiB
 * allocation.  BITOP reads a source named several times once, and the
 * sources it reads may total at most CMD_WORK_VALUES x --max-value-size.
 * GET of a string longer than --max-answer-size is refused: ?start=&end=
 * reads a part (GETRANGE).
 *
 * This file parses and answers; the operations are the command layer's
 * (cmd/bits.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/items.h"
#include "cmd/bits.h"

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
/* Raw bytes                                                                */
/* ------------------------------------------------------------------------ */

static void h_bits_put(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    cmd_bits_set_args_t a = { 0 };   /* no Redis options: a plain SET */
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    a.data = req->body;
    a.len = req->body_len;
    cmd_bits_len_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_SET, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "length", (json_int_t)r.length));
}

/* The bytes GET answers, copied under the key's lock. */
static void answer_bytes(void *ud, const uint8_t *p, size_t n)
{
    api_body(ud, 200, "application/octet-stream", n ? (const void *)p : "", n);
}

/* GET, or with ?start=&end= GETRANGE: bytes start..end inclusive, negative
 * offsets counted from the end, clamped to the string as Redis does. */
static void h_bits_get(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "start", "end", NULL };
    cmd_bits_get_args_t a = { .start = 0, .end = -1, .bytes = answer_bytes, .ud = resp };
    bool has_start, has_end;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "start", false, INT64_MIN, INT64_MAX, &a.start, &has_start) ||
        !api_query_int(req, resp, "end", false, INT64_MIN, INT64_MAX, &a.end, &has_end))
        return;
    if (has_start != has_end) {
        const char *missing = has_start ? "end" : "start";
        api_error_field(resp, API_E_BAD_REQUEST, missing, "'start' and 'end' go together: '%s' is missing", missing);
        return;
    }
    api_cmd_answered(req, resp, cmd_call(req->ctx, has_start ? &CMD_GETRANGE : &CMD_GET, &a, NULL));
}

/* ------------------------------------------------------------------------ */
/* SETBIT / GETBIT / BITCOUNT / BITPOS                                      */
/* ------------------------------------------------------------------------ */

static void h_bits_setbit(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "offset", "value", NULL };
    cmd_bits_setbit_args_t a;
    json_t *body;
    int64_t value;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_no_query(req, resp))
        return;
    if (!setbit_fast(req, &a.offset, &value) &&
        (!(body = api_body_object(req, resp, fields)) || !body_offset(resp, body, &a.offset) ||
         !api_obj_int(resp, body, "value", true, 0, 1, &value, NULL)))
        return;
    a.value = (int)value;
    cmd_bits_bit_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_SETBIT, &a, &r)))
        api_body(resp, 200, NULL, r.bit ? "{\"previous\":1}" : "{\"previous\":0}", 14);
}

static void h_bits_getbit(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "offset", NULL };
    cmd_bits_getbit_args_t a = { 0 };
    cmd_bits_bit_res_t r;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !query_offset(req, resp, &a.offset))
        return;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_GETBIT, &a, &r)))
        api_body(resp, 200, NULL, r.bit ? "{\"value\":1}" : "{\"value\":0}", 11);
}

static void h_bits_count(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "start", "end", "unit", NULL };
    cmd_bits_range_args_t a = { 0 };
    cmd_bits_num_res_t r;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !query_range(req, resp, &a.range, true))
        return;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_BITCOUNT, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "count", (json_int_t)r.v));
}

static void h_bits_pos(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const params[] = { "bit", "start", "end", "unit", NULL };
    cmd_bits_range_args_t a = { 0 };
    cmd_bits_num_res_t r;
    int64_t bit;
    if (!api_path_key(req, resp, &a.key, &a.klen) || !api_query_allow(req, resp, params) ||
        !api_query_int(req, resp, "bit", true, 0, 1, &bit, NULL) || !query_range(req, resp, &a.range, false))
        return;
    a.bit = (int)bit;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_BITPOS, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "position", (json_int_t)r.v));
}

/* ------------------------------------------------------------------------ */
/* BITOP                                                                    */
/* ------------------------------------------------------------------------ */

static void h_bits_op(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    static const char *const fields[] = { "op", "sources", NULL };
    static const struct {
        const char *name;
        bits_op_t op;
    } ops[] = { { "and", BITS_OP_AND }, { "or", BITS_OP_OR }, { "xor", BITS_OP_XOR }, { "not", BITS_OP_NOT } };
    cmd_bits_bitop_args_t a;
    const char *opname;
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)) ||
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
    a.op = (bits_op_t)op;
    json_t *srcs = json_object_get(body, "sources");
    size_t n = json_array_size(srcs);
    if (!json_is_array(srcs) || n == 0 || n > API_MAX_BATCH) {
        api_error_field(resp, API_E_BAD_REQUEST, "sources",
                        "'sources' must be an array of 1 to %d keys", API_MAX_BATCH);
        return;
    }
    /* BITOP's own check, said here too so that it comes before the
     * sources' (the order these errors have always been reported in) */
    if (op == BITS_OP_NOT && n != 1) {
        api_error_field(resp, API_E_BAD_REQUEST, "sources", "BITOP NOT takes exactly one source key, not %zu", n);
        return;
    }
    api_items_t src;
    api_err_t err;
    if (!api_err_answered(resp, api_items_alloc(n, &src, &err), &err))
        return;
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
        src.p[i] = json_string_value(s);
        src.len[i] = json_string_length(s);
    }
    a.sources = (cmd_batch_t){ .n = n, .p = src.p, .len = src.len };
    cmd_bits_len_res_t r;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, &CMD_BITOP, &a, &r)))
        api_json(resp, 200, json_pack("{s:I}", "length", (json_int_t)r.length));
out:
    api_items_free(&src);
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


/* BITFIELD, or with `ro` BITFIELD_RO (GET and OVERFLOW only). */
static void bits_field(api_req_t *req, api_resp_t *resp, bool ro)
{
    static const char *const fields[] = { "ops", NULL };
    cmd_bits_field_args_t a = { 0 };
    json_t *body;
    if (!(body = api_key_body(req, resp, fields, &a.key, &a.klen)))
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
    if (!ops || !res) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    if (!parse_field_ops(resp, arr, ops, &a.n))
        goto out;
    a.ops = ops;
    a.results = res;
    if (api_cmd_answered(req, resp, cmd_call(req->ctx, ro ? &CMD_BITFIELD_RO : &CMD_BITFIELD, &a, NULL))) {
        json_t *out = json_array();
        for (size_t i = 0; i < a.n; i++)
            json_array_append_new(out, res[i].nil ? json_null() : json_integer(res[i].value));
        api_json(resp, 200, json_pack("{s:o}", "results", out));
    }
out:
    free(ops);
    free(res);
}

static void h_bits_field(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    bits_field(req, resp, false);
}
static void h_bits_field_ro(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    (void)srv;
    bits_field(req, resp, true);
}

/* The family: its routes, in matching order, and its type. */
static const api_route_t routes[] = {
    { API_PUT,    "/bits/{key}",        h_bits_put, API_ROUTE_BINARY, API_BY(CMD_SET) },
    { API_GET,    "/bits/{key}",        h_bits_get, 0, API_BY(CMD_GET) },
    { API_POST,   "/bits/{key}/setbit", h_bits_setbit, 0, API_BY(CMD_SETBIT) },
    { API_GET,    "/bits/{key}/getbit", h_bits_getbit, 0, API_BY(CMD_GETBIT) },
    { API_GET,    "/bits/{key}/count",  h_bits_count, 0, API_BY(CMD_BITCOUNT) },
    { API_GET,    "/bits/{key}/pos",    h_bits_pos, 0, API_BY(CMD_BITPOS) },
    { API_POST,   "/bits/{key}/op",     h_bits_op, 0, API_BY(CMD_BITOP) },
    { API_POST,   "/bits/{key}/field",  h_bits_field, 0, API_BY(CMD_BITFIELD) },
    { API_POST,   "/bits/{key}/field_ro", h_bits_field_ro, 0, API_BY(CMD_BITFIELD_RO) },
};

API_FAMILY(bits);
