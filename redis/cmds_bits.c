/* cmds_bits.c - Redis's string and bitmap commands on tally's bit strings
 * (redis_int.h; the operations are cmd/bits.h's):
 *
 *   SET                   CMD_SET with Redis's options (NX XX GET EX PX
 *                         EXAT PXAT KEEPTTL); a value that is a decimal
 *                         integer in Redis's canonical form is stored as a
 *                         counter, so INCR/DECR work after SET as in Redis
 *   SETNX, SETEX, PSETEX, GETSET      SET with NX, EX, PX, GET
 *   APPEND, SETRANGE      CMD_SETRANGE
 *   STRLEN, GETRANGE, SUBSTR, MGET    CMD_GET / CMD_GETRANGE
 *   SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO
 *
 * Reads take a counter as Redis holds it, its decimal digits (STRLEN of an
 * INCR'd key is its digit count); APPEND and SETRANGE change those digits
 * (a counter while they still make an integer); SETBIT, BITFIELD's writes
 * and BITOP on a counter are WRONGTYPE (docs/redis.md, differences).  Arguments are checked in Redis
 * 7.0's order: where Redis looks the key up before parsing the rest
 * (BITCOUNT, BITPOS), a parse error on a missing key answers what the
 * missing key answers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/bits.h"
#include "cmd/keys_ops.h"
#include "redis/redis_int.h"

#define ERR_SYNTAX "ERR syntax error"
#define ERR_BIT_OFFSET "ERR bit offset is not an integer or out of range"
#define ERR_BIT_VALUE "ERR bit is not an integer or out of range"
#define ERR_BF_TYPE "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
#define ERR_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

static bool arg_is(const resp_arg_t *a, const char *word)
{
    size_t n = strlen(word);
    return a->len == n && strncasecmp(a->ptr, word, n) == 0;
}

/* Redis's bit offsets (getBitOffsetFromArgument): an integer (with `hash`,
 * "#N" meaning N * bits), 0 .. 2^32 - 1. */
static bool bit_offset(const resp_arg_t *a, bool hash, unsigned bits, uint64_t *out)
{
    resp_arg_t t = *a;
    bool usehash = hash && t.len > 0 && t.ptr[0] == '#';
    if (usehash) {
        t.ptr++;
        t.len--;
    }
    long long v;
    if (!redis_ll(&t, &v))
        return false;
    if (usehash && __builtin_mul_overflow(v, (long long)bits, &v))
        return false;
    if (v < 0 || (uint64_t)v > BITS_MAX_OFFSET)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* What a key is, for the answers Redis gives before parsing the rest:
 * 1 a string (bit string or counter), 0 missing, -1 answered (an error,
 * WRONGTYPE included). */
static int string_key(redis_conn_t *c, const resp_arg_t *k)
{
    cmd_key_info_res_t info;
    int f = redis_key_info(c, k, &info);
    if (f <= 0)
        return f;
    if (strcmp(info.type, "bits") == 0 || strcmp(info.type, "counter") == 0)
        return 1;
    redis_err(c, ERR_WRONGTYPE);
    return -1;
}

/* The bytes CMD_GET hands over, answered as a bulk string under the lock. */
static void bulk_bytes(void *ud, const uint8_t *p, size_t n)
{
    resp_reply_bulk(redis_conn_out(ud), n ? (const void *)p : "", n);
}

/* ------------------------------------------------------------------------ */
/* SET                                                                      */
/* ------------------------------------------------------------------------ */

/* SET ... GET: the value replaced, copied under the lock and answered
 * once the operation succeeded (nothing is answered twice). */
typedef struct set_old {
    bool exists, oom;
    uint8_t *p;
    size_t n;
} set_old_t;

static void set_old(void *ud, bool exists, const uint8_t *p, size_t n)
{
    set_old_t *o = ud;
    o->exists = exists;
    o->n = n;
    o->p = exists && n ? malloc(n) : NULL;
    if (o->p)
        memcpy(o->p, p, n);
    else
        o->oom = exists && n;
}

/* How a SET-family command answers success and NX/XX's refusal. */
typedef enum { SET_OK_NIL, SET_ONE_ZERO } set_reply_t;

/* Redis's setGenericCommand: the expiry checked (`name` in its error),
 * then the operation; with `get` the value replaced is the answer. */
static void set_generic(redis_conn_t *c, const resp_arg_t *key, const resp_arg_t *val, unsigned flags,
                        const resp_arg_t *expire, bool secs, bool at, bool get, set_reply_t reply, const char *name)
{
    int64_t expire_ms = 0;
    if (expire) {
        long long v;
        if (!redis_ll(expire, &v)) {
            redis_err(c, REDIS_ERR_NOT_INT);
            return;
        }
        if (v <= 0 || (secs && v > INT64_MAX / 1000)) {
            redis_err(c, "ERR invalid expire time in '%s' command", name);
            return;
        }
        if (secs)
            v *= 1000;
        if (!at) {
            int64_t now = (int64_t)(c->cfg->hooks.now_ns() / 1000000);
            if (v > INT64_MAX - now) {
                redis_err(c, "ERR invalid expire time in '%s' command", name);
                return;
            }
            v += now;
        }
        expire_ms = v;
    }
    long long num;
    if (redis_ll(val, &num))
        flags |= CMD_SET_COUNTER;
    set_old_t old = { false, false, NULL, 0 };
    cmd_bits_set_args_t a = { .key = key->ptr, .klen = key->len, .data = (const uint8_t *)val->ptr,
                              .len = val->len, .flags = CMD_SET_REDIS | flags, .expire_ms = expire_ms,
                              .old = get ? set_old : NULL, .ud = &old };
    cmd_bits_len_res_t r;
    bool ok = redis_run(c, &CMD_SET, &a, &r, NULL);
    resp_out_t *o = redis_conn_out(c);
    if (ok && get) {
        if (old.oom)
            redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        else if (old.exists)
            resp_reply_bulk(o, old.n ? (const void *)old.p : "", old.n);
        else
            resp_reply_null(o);
    }
    free(old.p);
    if (!ok || get)
        return;
    if (reply == SET_ONE_ZERO)
        resp_reply_int(o, r.skipped ? 0 : 1);
    else if (r.skipped)
        resp_reply_null(o);
    else
        redis_ok(c);
}

static void set_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    enum { EX = 1, PX = 2, EXAT = 4, PXAT = 8 };
    unsigned flags = 0, when = 0;
    bool get = false;
    const resp_arg_t *expire = NULL;
    /* Redis's parseExtendedStringArgumentsOrReply: every word first */
    for (size_t j = 3; j < cmd->argc; j++) {
        const resp_arg_t *o = &cmd->argv[j];
        bool next = j + 1 < cmd->argc;
        if (arg_is(o, "nx") && !(flags & CMD_SET_XX)) {
            flags |= CMD_SET_NX;
        } else if (arg_is(o, "xx") && !(flags & CMD_SET_NX)) {
            flags |= CMD_SET_XX;
        } else if (arg_is(o, "get")) {
            get = true;
        } else if (arg_is(o, "keepttl") && !when) {
            flags |= CMD_SET_KEEPTTL;
        } else if ((arg_is(o, "ex") || arg_is(o, "px") || arg_is(o, "exat") || arg_is(o, "pxat")) && !when &&
                   !(flags & CMD_SET_KEEPTTL) && next) {
            when = arg_is(o, "ex") ? EX : arg_is(o, "px") ? PX : arg_is(o, "exat") ? EXAT : PXAT;
            expire = &cmd->argv[++j];
        } else {
            redis_err(c, ERR_SYNTAX);
            return;
        }
    }
    set_generic(c, &cmd->argv[1], &cmd->argv[2], flags, expire, when == EX || when == EXAT,
                when == EXAT || when == PXAT, get, SET_OK_NIL, "set");
}

static void setnx_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    set_generic(c, &cmd->argv[1], &cmd->argv[2], CMD_SET_NX, NULL, false, false, false, SET_ONE_ZERO, "setnx");
}

static void setex_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    set_generic(c, &cmd->argv[1], &cmd->argv[3], 0, &cmd->argv[2], true, false, false, SET_OK_NIL, "setex");
}

static void psetex_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    set_generic(c, &cmd->argv[1], &cmd->argv[3], 0, &cmd->argv[2], false, false, false, SET_OK_NIL, "psetex");
}

static void getset_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    set_generic(c, &cmd->argv[1], &cmd->argv[2], 0, NULL, false, false, true, SET_OK_NIL, "getset");
}

/* ------------------------------------------------------------------------ */
/* APPEND, SETRANGE, STRLEN, GETRANGE, MGET                                 */
/* ------------------------------------------------------------------------ */

static void setrange(redis_conn_t *c, const resp_cmd_t *cmd, bool append, uint64_t offset, const resp_arg_t *v)
{
    cmd_bits_setrange_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .append = append,
                                   .offset = offset, .data = (const uint8_t *)v->ptr, .len = v->len,
                                   .strings = true };
    cmd_bits_len_res_t r;
    if (redis_run(c, &CMD_SETRANGE, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), (long long)r.length);
}

static void append_command(redis_conn_t *c, const resp_cmd_t *cmd) { setrange(c, cmd, true, 0, &cmd->argv[2]); }

static void setrange_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long off;
    if (!redis_ll(&cmd->argv[2], &off))
        redis_err(c, REDIS_ERR_NOT_INT);
    else if (off < 0)
        redis_err(c, "ERR offset is out of range");
    else if ((unsigned long long)off > CMD_BITS_MAX_STRING && cmd->argv[3].len)
        redis_err(c, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    else   /* an empty value on a missing key answers 0 whatever the offset */
        setrange(c, cmd, false, (uint64_t)off > CMD_BITS_MAX_STRING ? 0 : (uint64_t)off, &cmd->argv[3]);
}

static void strlen_bytes(void *ud, const uint8_t *p, size_t n)
{
    (void)p;
    resp_reply_int(redis_conn_out(ud), (long long)n);
}

static void strlen_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_bits_get_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .start = 0, .end = -1,
                              .bytes = strlen_bytes, .ud = c, .strings = true, .length_only = true };
    bool missing;
    if (!redis_run(c, &CMD_GET, &a, NULL, &missing) && missing)
        resp_reply_int(redis_conn_out(c), 0);
}

static void getrange_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long start, end;
    if (!redis_ll(&cmd->argv[2], &start) || !redis_ll(&cmd->argv[3], &end)) {
        redis_err(c, REDIS_ERR_NOT_INT);
        return;
    }
    cmd_bits_get_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .start = start, .end = end,
                              .bytes = bulk_bytes, .ud = c, .strings = true };
    bool missing;
    if (!redis_run(c, &CMD_GETRANGE, &a, NULL, &missing) && missing)
        resp_reply_bulk(redis_conn_out(c), "", 0);
}

/* MGET: a key holding anything but a string answers nil, as Redis does.
 * The keys' types are looked up first, so that an error (NOPERM, a
 * redirect) is answered alone, before the array. */
static void mget_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    size_t n = cmd->argc - 1;
    bool *str = calloc(n, sizeof(*str));
    if (!str) {
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        cmd_key_info_res_t info;
        int f = redis_key_info(c, &cmd->argv[i + 1], &info);
        if (f < 0) {
            free(str);
            return;
        }
        str[i] = f > 0 && (strcmp(info.type, "bits") == 0 || strcmp(info.type, "counter") == 0);
    }
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, n);
    for (size_t i = 0; i < n; i++) {
        bool missing;
        cmd_bits_get_args_t a = { .key = cmd->argv[i + 1].ptr, .klen = cmd->argv[i + 1].len, .start = 0, .end = -1,
                                  .bytes = bulk_bytes, .ud = c, .strings = true };
        if (!str[i])
            resp_reply_null(o);
        else if (!redis_run(c, &CMD_GET, &a, NULL, &missing) && missing)
            resp_reply_null(o);
    }
    free(str);
}

/* ------------------------------------------------------------------------ */
/* SETBIT, GETBIT, BITCOUNT, BITPOS                                         */
/* ------------------------------------------------------------------------ */

static void setbit_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    uint64_t off;
    long long v;
    if (!bit_offset(&cmd->argv[2], false, 0, &off)) {
        redis_err(c, ERR_BIT_OFFSET);
        return;
    }
    if (!redis_ll(&cmd->argv[3], &v) || (v != 0 && v != 1)) {
        redis_err(c, ERR_BIT_VALUE);
        return;
    }
    cmd_bits_setbit_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .offset = off, .value = (int)v };
    cmd_bits_bit_res_t r;
    if (redis_run(c, &CMD_SETBIT, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), r.bit);
}

static void getbit_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    uint64_t off;
    if (!bit_offset(&cmd->argv[2], false, 0, &off)) {
        redis_err(c, ERR_BIT_OFFSET);
        return;
    }
    cmd_bits_getbit_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .offset = off, .strings = true };
    cmd_bits_bit_res_t r;
    if (redis_run(c, &CMD_GETBIT, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), r.bit);
}

/* BYTE or BIT; false for anything else. */
static bool unit_of(const resp_arg_t *a, bits_unit_t *u)
{
    if (arg_is(a, "byte"))
        *u = BITS_UNIT_BYTE;
    else if (arg_is(a, "bit"))
        *u = BITS_UNIT_BIT;
    else
        return false;
    return true;
}

/* A parse error Redis answers only for an existing string: a missing key
 * answers `missing` (BITCOUNT 0, BITPOS -1 or 0). */
static void late_err(redis_conn_t *c, const resp_arg_t *k, long long missing, const char *err)
{
    int f = string_key(c, k);
    if (f == 0)
        resp_reply_int(redis_conn_out(c), missing);
    else if (f > 0)
        redis_err(c, "%s", err);
}

static void bitcount_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    bits_range_t range = { .unit = BITS_UNIT_BYTE };
    const resp_arg_t *k = &cmd->argv[1];
    if (cmd->argc == 4 || cmd->argc == 5) {
        long long s, e;
        if (!redis_ll(&cmd->argv[2], &s) || !redis_ll(&cmd->argv[3], &e)) {
            late_err(c, k, 0, REDIS_ERR_NOT_INT);
            return;
        }
        if (cmd->argc == 5 && !unit_of(&cmd->argv[4], &range.unit)) {
            late_err(c, k, 0, ERR_SYNTAX);
            return;
        }
        range.has_start = range.has_end = true;
        range.start = s;
        range.end = e;
    } else if (cmd->argc != 2) {
        late_err(c, k, 0, ERR_SYNTAX);
        return;
    }
    cmd_bits_range_args_t a = { .key = k->ptr, .klen = k->len, .range = range, .strings = true };
    cmd_bits_num_res_t r;
    if (redis_run(c, &CMD_BITCOUNT, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), r.v);
}

static void bitpos_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long bit;
    const resp_arg_t *k = &cmd->argv[1];
    if (!redis_ll(&cmd->argv[2], &bit)) {
        redis_err(c, REDIS_ERR_NOT_INT);
        return;
    }
    if (bit != 0 && bit != 1) {
        redis_err(c, "ERR The bit argument must be 1 or 0.");
        return;
    }
    long long missing = bit ? -1 : 0;
    bits_range_t range = { .unit = BITS_UNIT_BYTE };
    if (cmd->argc >= 4 && cmd->argc <= 6) {
        long long v;
        if (!redis_ll(&cmd->argv[3], &v)) {
            late_err(c, k, missing, REDIS_ERR_NOT_INT);
            return;
        }
        range.has_start = true;
        range.start = v;
        if (cmd->argc == 6 && !unit_of(&cmd->argv[5], &range.unit)) {
            late_err(c, k, missing, ERR_SYNTAX);
            return;
        }
        if (cmd->argc >= 5) {
            if (!redis_ll(&cmd->argv[4], &v)) {
                late_err(c, k, missing, REDIS_ERR_NOT_INT);
                return;
            }
            range.has_end = true;
            range.end = v;
        }
    } else if (cmd->argc != 3) {
        late_err(c, k, missing, ERR_SYNTAX);
        return;
    }
    cmd_bits_range_args_t a = { .key = k->ptr, .klen = k->len, .range = range, .bit = (int)bit, .strings = true };
    cmd_bits_num_res_t r;
    if (redis_run(c, &CMD_BITPOS, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), r.v);
}

/* ------------------------------------------------------------------------ */
/* BITOP                                                                    */
/* ------------------------------------------------------------------------ */

static void bitop_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    bits_op_t op;
    const resp_arg_t *w = &cmd->argv[1];
    if (arg_is(w, "and"))
        op = BITS_OP_AND;
    else if (arg_is(w, "or"))
        op = BITS_OP_OR;
    else if (arg_is(w, "xor"))
        op = BITS_OP_XOR;
    else if (arg_is(w, "not"))
        op = BITS_OP_NOT;
    else {
        redis_err(c, ERR_SYNTAX);
        return;
    }
    if (op == BITS_OP_NOT && cmd->argc != 4) {
        redis_err(c, "ERR BITOP NOT must be called with a single source key.");
        return;
    }
    if (!redis_items(c, cmd, 3))
        return;
    cmd_bits_bitop_args_t a = { .key = cmd->argv[2].ptr, .klen = cmd->argv[2].len, .op = op };
    a.sources = (cmd_batch_t){ .n = cmd->argc - 3, .p = c->ptrs, .len = c->lens };
    cmd_bits_len_res_t r;
    if (redis_run(c, &CMD_BITOP, &a, &r, NULL))
        resp_reply_int(redis_conn_out(c), (long long)r.length);
}

/* ------------------------------------------------------------------------ */
/* BITFIELD, BITFIELD_RO                                                    */
/* ------------------------------------------------------------------------ */

static void bitfield(redis_conn_t *c, const resp_cmd_t *cmd, bool ro)
{
    size_t cap = (cmd->argc - 2) / 3 + 1;
    bf_op_t *ops = malloc(cap * sizeof(*ops));
    bf_result_t *res = malloc(cap * sizeof(*res));
    size_t n = 0;
    bool writes = false;
    uint8_t overflow = BF_WRAP;
    if (!ops || !res) {
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        goto out;
    }
    for (size_t j = 2; j < cmd->argc; j++) {
        size_t rem = cmd->argc - j - 1;
        const resp_arg_t *w = &cmd->argv[j];
        uint8_t opcode;
        if (arg_is(w, "get") && rem >= 2) {
            opcode = BF_GET;
        } else if (arg_is(w, "set") && rem >= 3) {
            opcode = BF_SET;
        } else if (arg_is(w, "incrby") && rem >= 3) {
            opcode = BF_INCRBY;
        } else if (arg_is(w, "overflow") && rem >= 1) {
            const resp_arg_t *t = &cmd->argv[++j];
            if (arg_is(t, "wrap"))
                overflow = BF_WRAP;
            else if (arg_is(t, "sat"))
                overflow = BF_SAT;
            else if (arg_is(t, "fail"))
                overflow = BF_FAIL;
            else {
                redis_err(c, "ERR Invalid OVERFLOW type specified");
                goto out;
            }
            continue;
        } else {
            redis_err(c, ERR_SYNTAX);
            goto out;
        }
        bf_op_t *o = &ops[n];
        *o = (bf_op_t){ .opcode = opcode, .overflow = overflow };
        if (!bf_parse_type(cmd->argv[j + 1].ptr, cmd->argv[j + 1].len, &o->sign, &o->width)) {
            redis_err(c, ERR_BF_TYPE);
            goto out;
        }
        if (!bit_offset(&cmd->argv[j + 2], true, o->width, &o->offset)) {
            redis_err(c, ERR_BIT_OFFSET);
            goto out;
        }
        if (opcode != BF_GET) {
            long long v;
            writes = true;
            if (!redis_ll(&cmd->argv[j + 3], &v)) {
                redis_err(c, REDIS_ERR_NOT_INT);
                goto out;
            }
            o->arg = v;
        }
        n++;
        j += 2 + (opcode != BF_GET);
    }
    if (ro && writes) {
        redis_err(c, "ERR BITFIELD_RO only supports the GET subcommand");
        goto out;
    }
    cmd_bits_field_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .n = n, .ops = ops,
                                .results = res, .strings = true };
    if (!redis_run(c, ro ? &CMD_BITFIELD_RO : &CMD_BITFIELD, &a, NULL, NULL))
        goto out;
    resp_out_t *out = redis_conn_out(c);
    resp_reply_array(out, n);
    for (size_t i = 0; i < n; i++) {
        if (res[i].nil)
            resp_reply_null(out);
        else
            resp_reply_int(out, res[i].value);
    }
out:
    free(ops);
    free(res);
}

static void bitfield_command(redis_conn_t *c, const resp_cmd_t *cmd) { bitfield(c, cmd, false); }
static void bitfield_ro_command(redis_conn_t *c, const resp_cmd_t *cmd) { bitfield(c, cmd, true); }

#define W_DENY REDIS_CF_WRITE | REDIS_CF_DENYOOM
#define R_FAST REDIS_CF_READONLY | REDIS_CF_FAST
static const redis_cmd_t commands[] = {
    { "append", 3, W_DENY | REDIS_CF_FAST, "@write @string @fast", 1, 1, 1, append_command, NULL },
    { "bitcount", -2, REDIS_CF_READONLY, "@read @bitmap @slow", 1, 1, 1, bitcount_command, NULL },
    { "bitfield", -2, W_DENY, "@write @bitmap @slow", 1, 1, 1, bitfield_command, NULL },
    { "bitfield_ro", -2, R_FAST, "@read @bitmap @fast", 1, 1, 1, bitfield_ro_command, NULL },
    { "bitop", -4, W_DENY, "@write @bitmap @slow", 2, -1, 1, bitop_command, NULL },
    { "bitpos", -3, REDIS_CF_READONLY, "@read @bitmap @slow", 1, 1, 1, bitpos_command, NULL },
    { "getbit", 3, R_FAST, "@read @bitmap @fast", 1, 1, 1, getbit_command, NULL },
    { "getset", 3, W_DENY | REDIS_CF_FAST, "@write @string @fast", 1, 1, 1, getset_command, NULL },
    { "getrange", 4, REDIS_CF_READONLY, "@read @string @slow", 1, 1, 1, getrange_command, NULL },
    { "mget", -2, R_FAST, "@read @string @fast", 1, -1, 1, mget_command, NULL },
    { "psetex", 4, W_DENY, "@write @string @slow", 1, 1, 1, psetex_command, NULL },
    { "set", -3, W_DENY, "@write @string @slow", 1, 1, 1, set_command, NULL },
    { "setbit", 4, W_DENY, "@write @bitmap @slow", 1, 1, 1, setbit_command, NULL },
    { "setex", 4, W_DENY, "@write @string @slow", 1, 1, 1, setex_command, NULL },
    { "setnx", 3, W_DENY | REDIS_CF_FAST, "@write @string @fast", 1, 1, 1, setnx_command, NULL },
    { "setrange", 4, W_DENY, "@write @string @slow", 1, 1, 1, setrange_command, NULL },
    { "strlen", 2, R_FAST, "@read @string @fast", 1, 1, 1, strlen_command, NULL },
    { "substr", 4, REDIS_CF_READONLY, "@read @string @slow", 1, 1, 1, getrange_command, NULL },
};
REDIS_COMMANDS(bits);
