/* cmds_ts.c - RedisTimeSeries's commands (TS.*) on tally's time series
 * (redis_int.h; the operations of cmd/ts.h): the writes (TS.CREATE,
 * TS.ALTER, TS.ADD, TS.MADD, TS.INCRBY, TS.DECRBY, TS.DEL, TS.CREATERULE,
 * TS.DELETERULE), TS.INFO and TS.GET here; the queries (TS.RANGE,
 * TS.REVRANGE, TS.MRANGE, TS.MREVRANGE, TS.MGET, TS.QUERYINDEX) in
 * cmds_ts_query.c.
 *
 * Arguments are read as RedisTimeSeries 1.10 reads them (src/module.c,
 * src/query_language.c): its keywords anywhere in the command, case
 * apart; its errors word for word, most as "ERR TSDB: ...", a few
 * without the ERR code where the module sends them so; the module's own
 * arity checks ("wrong number of arguments" naming the command as
 * typed).  Errors of the operations are answered in the module's words
 * through ts_run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/keys_ops.h"
#include "redis/cmds_ts.h"

/* ------------------------------------------------------------------------ */
/* Shared helpers (cmds_ts.h)                                               */
/* ------------------------------------------------------------------------ */

void ts_wrong_arity(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const resp_arg_t *n = &cmd->argv[0];
    size_t len = strnlen(n->ptr, n->len);
    redis_err(c, "ERR wrong number of arguments for '%.*s' command", (int)(len > 128 ? 128 : len), n->ptr);
}

void ts_tsdb_err(redis_conn_t *c, const char *msg) { redis_err(c, "ERR TSDB: %s", msg); }

bool ts_timestamp(const resp_arg_t *a, int64_t *out)
{
    long long v;
    if (!redis_ll(a, &v) || v < 0)
        return false;
    *out = v;
    return true;
}

/* Redis's string2d (RedisModule_StringToDouble): the whole argument, no
 * leading space, not NaN. */
bool ts_strict_double(const resp_arg_t *a, double *out)
{
    char buf[128];
    if (a->len == 0 || a->len >= sizeof(buf) || memchr(a->ptr, 0, a->len) || a->ptr[0] == ' ' ||
        a->ptr[0] == '\t' || a->ptr[0] == '\n' || a->ptr[0] == '\r' || a->ptr[0] == '\v' || a->ptr[0] == '\f')
        return false;
    memcpy(buf, a->ptr, a->len);
    buf[a->len] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (*end || isnan(v))
        return false;
    *out = v;
    return true;
}

size_t ts_value_text(double v, char *out)
{
    if (isnan(v))
        return (size_t)sprintf(out, "NaN");
    if (isinf(v))
        return (size_t)sprintf(out, v > 0 ? "Infinity" : "-Infinity");
    char *o = out;
    if (signbit(v))
        *o++ = '-';
    double a = fabs(v);
    if (a == 0) {
        *o++ = '0';
        *o = '\0';
        return (size_t)(o - out);
    }
    /* the shortest digits that read back as a */
    char e[40];
    for (int p = 0; p < 17; p++) {
        snprintf(e, sizeof(e), "%.*e", p, a);
        if (strtod(e, NULL) == a)
            break;
    }
    char d[24];
    size_t n = 0;
    const char *s = e;
    for (; *s && *s != 'e'; s++)
        if (*s != '.')
            d[n++] = *s;
    int x = atoi(s + 1);          /* the power of ten of the first digit */
    while (n > 1 && d[n - 1] == '0')
        n--;
    int e10 = x - (int)(n - 1);   /* a = digits * 10^e10 */
    /* plain digits from 1 up, while the double's unit is at most 1 or the
     * digits need no zeros after them; else d.dddEx */
    if (a >= 1 && (e10 <= 0 || a < 9007199254740992.0)) {
        if (e10 >= 0) {
            memcpy(o, d, n);
            o += n;
            for (int i = 0; i < e10; i++)
                *o++ = '0';
        } else {
            size_t ip = (size_t)((int)n + e10);
            memcpy(o, d, ip);
            o += ip;
            *o++ = '.';
            memcpy(o, d + ip, n - ip);
            o += n - ip;
        }
    } else {
        *o++ = d[0];
        if (n > 1) {
            *o++ = '.';
            memcpy(o, d + 1, n - 1);
            o += n - 1;
        }
        o += sprintf(o, "E%d", x);
    }
    *o = '\0';
    return (size_t)(o - out);
}

void ts_reply_value(resp_out_t *o, double v)
{
    if (o->proto == 3) {
        resp_reply_double(o, v);
        return;
    }
    char buf[48];
    size_t n = ts_value_text(v, buf);
    resp_reply_simple(o, buf, n);
}

void ts_reply_sample(resp_out_t *o, int64_t t, double v)
{
    resp_reply_array(o, 2);
    resp_reply_int(o, t);
    ts_reply_value(o, v);
}

void ts_reply_map_or_array(resp_out_t *o, size_t n)
{
    if (o->proto == 3)
        resp_reply_map(o, n);
    else
        resp_reply_array(o, n);
}

/* Answers the key errors RedisTimeSeries's GetSeries gives first, when
 * there is one: true when answered (or an error of the look-up was). */
bool ts_key_error_first(redis_conn_t *c, const resp_arg_t *k)
{
    int kind = redis_mod_key_state(c, k, ts_type.name);
    if (kind == 0)
        ts_tsdb_err(c, "the key does not exist");
    else if (kind == 2)
        redis_err(c, "ERR WRONGTYPE Operation against a key holding the wrong kind of value");
    return kind != 1;
}

/* GetSeries's errors: a missing key, another type. */
bool ts_err_series(redis_conn_t *c, const cmd_err_t *e)
{
    if (e->code == CMD_E_NOT_FOUND) {
        ts_tsdb_err(c, "the key does not exist");
        return true;
    }
    if (e->code == CMD_E_WRONGTYPE) {
        redis_err(c, "ERR WRONGTYPE Operation against a key holding the wrong kind of value");
        return true;
    }
    return false;
}

bool ts_run(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, ts_err_fn answer)
{
    const unsigned words = 1u << CMD_E_NOT_FOUND | 1u << CMD_E_WRONGTYPE | 1u << CMD_E_EXISTS | 1u << CMD_E_BAD_REQUEST;
    cmd_err_t e;
    if (redis_run_handled(c, def, args, res, words, &e))
        return true;
    if (e.code != CMD_E__COUNT && !answer(c, &e))
        redis_answer_err(c, &e);
    return false;
}

/* ------------------------------------------------------------------------ */
/* Creation options (parseCreateArgs)                                       */
/* ------------------------------------------------------------------------ */

typedef struct create_opts {
    int64_t retention;
    ts_policy_t policy;
    bool has_policy;
    ts_label_t labels[TS_MAX_LABELS];
    size_t nlabels;
    /* the refusal, when there is one: its text ("ERR TSDB: ..." or the
     * bare "TSDB: ..."), or wrong arity */
    const char *err;
    bool err_arity;
} create_opts_t;

static bool opts_fail(create_opts_t *o, const char *err)
{
    o->err = err;
    return false;
}

static bool parse_labels(const resp_cmd_t *cmd, create_opts_t *o, bool *present)
{
    int pos = redis_word_index(cmd, "LABELS");
    *present = pos >= 0;
    o->nlabels = 0;
    if (pos < 0)
        return true;
    size_t first = (size_t)pos + 1, n = (cmd->argc - first) / 2;
    for (size_t i = 0; i < n; i++) {
        const resp_arg_t *k = &cmd->argv[first + 2 * i], *v = &cmd->argv[first + 2 * i + 1];
        if (k->len == 0 || v->len == 0 || memchr(v->ptr, '(', v->len) || memchr(v->ptr, ')', v->len) ||
            memchr(v->ptr, ',', v->len))
            return opts_fail(o, "ERR TSDB: Couldn't parse LABELS");
        /* tally's filters read names and values without '=' (or the
         * other characters of the syntax) in them; nor NULs */
        if (memchr(k->ptr, '=', k->len) || memchr(v->ptr, '=', v->len) || memchr(k->ptr, '(', k->len) ||
            memchr(k->ptr, ')', k->len) || memchr(k->ptr, ',', k->len) || memchr(k->ptr, 0, k->len) ||
            memchr(v->ptr, 0, v->len) || k->len > TS_MAX_LABEL_LEN || v->len > TS_MAX_LABEL_LEN)
            return opts_fail(o, "ERR TSDB: Couldn't parse LABELS");
        /* a name given again replaces its value */
        size_t j = 0;
        while (j < o->nlabels && !(o->labels[j].name_len == k->len && memcmp(o->labels[j].name, k->ptr, k->len) == 0))
            j++;
        if (j == o->nlabels) {
            if (o->nlabels == TS_MAX_LABELS)
                return opts_fail(o, "ERR TSDB: too many labels (tally keeps at most 128)");
            o->nlabels++;
        }
        o->labels[j] = (ts_label_t){ k->ptr, k->len, v->ptr, v->len };
    }
    return true;
}

/* ParseDuplicatePolicy for `tok` (DUPLICATE_POLICY, ON_DUPLICATE). */
static bool parse_policy(const resp_cmd_t *cmd, const char *tok, ts_policy_t *p, bool *present, const char **err)
{
    *present = false;
    int i = redis_word_index(cmd, tok);
    if (i < 0)
        return true;
    if ((size_t)i + 1 >= cmd->argc) {
        *err = "ERR TSDB: Couldn't parse DUPLICATE_POLICY";
        return false;
    }
    const resp_arg_t *a = &cmd->argv[i + 1];
    char name[16];
    if (a->len >= sizeof(name) || memchr(a->ptr, 0, a->len)) {
        *err = "ERR TSDB: Unknown DUPLICATE_POLICY";
        return false;
    }
    memcpy(name, a->ptr, a->len);
    name[a->len] = '\0';
    if (!ts_policy_parse(name, p)) {
        *err = "ERR TSDB: Unknown DUPLICATE_POLICY";
        return false;
    }
    *present = true;
    return true;
}

/* parseCreateArgs: LABELS, RETENTION, CHUNK_SIZE, ENCODING,
 * DUPLICATE_POLICY, in its order.  CHUNK_SIZE and ENCODING are checked
 * and not kept: every series here is compressed in chunks of
 * TS_CHUNK_BYTES. */
static bool parse_create(const resp_cmd_t *cmd, create_opts_t *o, bool *has_labels, bool *has_retention)
{
    memset(o, 0, sizeof(*o));
    o->policy = TS_DUP_BLOCK;
    if (!parse_labels(cmd, o, has_labels))
        return false;
    int i = redis_word_index(cmd, "RETENTION");
    *has_retention = i > 0;
    if (i > 0) {
        long long r;
        if ((size_t)i + 1 >= cmd->argc || !redis_ll(&cmd->argv[i + 1], &r))
            return opts_fail(o, "ERR TSDB: Couldn't parse RETENTION");
        if (r < 0)
            return opts_fail(o, "TSDB: Couldn't parse RETENTION");
        o->retention = r;
    }
    i = redis_word_index(cmd, "CHUNK_SIZE");
    if (i >= 0) {
        long long cs;
        if ((size_t)i + 1 >= cmd->argc || !redis_ll(&cmd->argv[i + 1], &cs))
            return opts_fail(o, "ERR TSDB: Couldn't parse CHUNK_SIZE");
        if (cs < 48 || cs > 1048576 || cs % 8)
            return opts_fail(o, "ERR TSDB: CHUNK_SIZE value must be a multiple of 8 in the range [48 .. 1048576]");
    }
    i = redis_word_index(cmd, "ENCODING");
    if (i > 0) {
        if ((size_t)i + 1 >= cmd->argc) {
            o->err_arity = true;
            return false;
        }
        if (!redis_word_is(&cmd->argv[i + 1], "UNCOMPRESSED") && !redis_word_is(&cmd->argv[i + 1], "COMPRESSED"))
            return opts_fail(o, "ERR TSDB: unknown ENCODING parameter");
    }
    return parse_policy(cmd, "DUPLICATE_POLICY", &o->policy, &o->has_policy, &o->err);
}

static void answer_opts(redis_conn_t *c, const resp_cmd_t *cmd, const create_opts_t *o)
{
    if (o->err_arity)
        ts_wrong_arity(c, cmd);
    else
        redis_err(c, "%s", o->err);
}

static cmd_ts_opts_t opts_cmd(const create_opts_t *o)
{
    return (cmd_ts_opts_t){ o->retention, o->policy, { o->labels, NULL, o->nlabels } };
}

/* ------------------------------------------------------------------------ */
/* TS.CREATE, TS.ALTER                                                      */
/* ------------------------------------------------------------------------ */

/* TS.CREATE's and TS.ALTER's key and options: false when an error was
 * answered. */
static bool read_create(redis_conn_t *c, const resp_cmd_t *cmd, create_opts_t *o, bool *hl, bool *hr)
{
    if (cmd->argc < 2) {
        ts_wrong_arity(c, cmd);
        return false;
    }
    if (!parse_create(cmd, o, hl, hr)) {
        answer_opts(c, cmd, o);
        return false;
    }
    return true;
}

static bool err_create(redis_conn_t *c, const cmd_err_t *e)
{
    if (e->code != CMD_E_EXISTS && e->code != CMD_E_WRONGTYPE)
        return false;
    ts_tsdb_err(c, "key already exists");
    return true;
}

static void ts_create_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    create_opts_t o;
    bool hl, hr;
    if (!read_create(c, cmd, &o, &hl, &hr))
        return;
    cmd_ts_create_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .opts = opts_cmd(&o) };
    cmd_ts_created_res_t r;
    if (ts_run(c, &CMD_TS_CREATE, &a, &r, err_create))
        redis_ok(c);
}

static void ts_alter_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    create_opts_t o;
    bool hl, hr;
    if (!read_create(c, cmd, &o, &hl, &hr))
        return;
    cmd_ts_alter_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    a.has_retention = hr;
    a.retention_ms = o.retention;
    a.has_policy = o.has_policy;
    a.policy = o.policy;
    a.has_labels = hl;
    a.labels = (cmd_ts_labels_t){ o.labels, NULL, o.nlabels };
    cmd_ts_created_res_t r;
    if (ts_run(c, &CMD_TS_ALTER, &a, &r, ts_err_series))
        redis_ok(c);
}

/* ------------------------------------------------------------------------ */
/* TS.ADD, TS.MADD                                                          */
/* ------------------------------------------------------------------------ */

static int64_t now_ms(redis_conn_t *c) { return (int64_t)(c->cfg->hooks.now_ns() / 1000000); }

/* The value of TS.ADD as its fast_double_parser reads it: a number at
 * the start of the argument, -?(0|[1-9][0-9]*)(.[0-9]*)?([eE][+-]?[0-9]+)?,
 * the rest not looked at ("2x" is 2); NaN written "nan" (any case, a sign
 * before it), which tally stores as a missing reading (RedisTimeSeries
 * 1.12's spellings); an infinity refused. */
static bool parse_value(const resp_arg_t *a, double *out)
{
    const char *s = a->ptr, *end = a->ptr + a->len, *p = s;
    const char *q = p + (p < end && (*p == '-' || *p == '+'));
    if (end - q == 3 && strncasecmp(q, "nan", 3) == 0) {
        *out = NAN;
        return true;
    }
#define DIGIT(x) ((x) < end && *(x) >= '0' && *(x) <= '9')
    if (p < end && *p == '-')
        p++;
    if (!DIGIT(p))
        return false;
    if (*p == '0') {
        p++;
        if (DIGIT(p))
            return false;
    } else {
        while (DIGIT(p))
            p++;
    }
    if (p < end && *p == '.') {
        p++;
        while (DIGIT(p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '-' || *p == '+'))
            p++;
        if (!DIGIT(p))
            return false;
        while (DIGIT(p))
            p++;
    }
#undef DIGIT
    char buf[400];
    size_t n = (size_t)(p - s);
    if (n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v))
        return false;
    *out = v;
    return true;
}

/* A sample's timestamp argument ("*": now): 0, or 1 not an integer, 2
 * negative. */
static int parse_ts_arg(const resp_arg_t *a, int64_t now, int64_t *out)
{
    if (a->len == 1 && a->ptr[0] == '*') {
        *out = now;
        return 0;
    }
    long long v;
    if (!redis_ll(a, &v))
        return 1;
    if (v < 0)
        return 2;
    *out = v;
    return 0;
}

static bool err_add(redis_conn_t *c, const cmd_err_t *e)
{
    switch (e->code) {
    case CMD_E_WRONGTYPE: ts_tsdb_err(c, "the key is not a TSDB key"); return true;
    case CMD_E_EXISTS:
        ts_tsdb_err(c, "Error at upsert, update is not supported when DUPLICATE_POLICY is set to BLOCK mode");
        return true;
    case CMD_E_BAD_REQUEST:
        if (strstr(e->message, "older than retention"))
            ts_tsdb_err(c, "Timestamp is older than retention");
        else
            redis_err(c, "ERR TSDB: %s", e->message);
        return true;
    default: return false;
    }
}

/* One sample into key (TS.ADD's add()): its errors answered. */
static bool add_one(redis_conn_t *c, const resp_arg_t *key, const resp_arg_t *ta, const resp_arg_t *va, int64_t now,
                    const resp_cmd_t *create, int64_t *t)
{
    double v;
    if (!parse_value(va, &v)) {
        ts_tsdb_err(c, "invalid value");
        return false;
    }
    int bad = parse_ts_arg(ta, now, t);
    if (bad) {
        ts_tsdb_err(c, bad == 1 ? "invalid timestamp" : "invalid timestamp, must be a nonnegative integer");
        return false;
    }
    cmd_ts_add_args_t a = { .key = key->ptr, .klen = key->len, .request_bytes = c->cmd_bytes };
    create_opts_t o;
    memset(&o, 0, sizeof(o));
    o.policy = TS_DUP_BLOCK;
    a.on_duplicate = TS_DUP_BLOCK;
    int kind;
    if (create) {
        /* the creation options are read for a missing key only, and
         * ON_DUPLICATE for an existing one */
        bool hl, hr;
        const char *derr = NULL;
        bool copts = parse_create(create, &o, &hl, &hr);
        bool dok = parse_policy(create, "ON_DUPLICATE", &a.on_duplicate, &a.has_on_duplicate, &derr);
        if (!copts || !dok) {
            if ((kind = redis_mod_key_state(c, key, ts_type.name)) < 0)
                return false;
            if (kind == 0 && !copts) {
                answer_opts(c, create, &o);
                return false;
            }
            if (kind == 1 && !dok) {
                redis_err(c, "%s", derr);
                return false;
            }
            if (kind == 1) {   /* the options are not used */
                memset(&o, 0, sizeof(o));
                o.policy = TS_DUP_BLOCK;
            }
            if (!dok)
                a.has_on_duplicate = false;
        }
    } else {
        /* TS.MADD adds to existing series only */
        if ((kind = redis_mod_key_state(c, key, ts_type.name)) < 0)
            return false;
        if (kind != 1) {
            ts_tsdb_err(c, "the key is not a TSDB key");
            return false;
        }
    }
    a.opts = opts_cmd(&o);
    ts_sample_t s = { *t, v };
    a.samples = (cmd_ts_samples_t){ &s, NULL, 1 };
    cmd_ts_created_res_t r;
    return ts_run(c, &CMD_TS_ADD, &a, &r, err_add);
}

static void ts_add_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 4) {
        ts_wrong_arity(c, cmd);
        return;
    }
    int64_t t;
    if (add_one(c, &cmd->argv[1], &cmd->argv[2], &cmd->argv[3], now_ms(c), cmd, &t))
        resp_reply_int(redis_conn_out(c), t);
}

static void ts_madd_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 4 || (cmd->argc - 1) % 3 != 0) {
        ts_wrong_arity(c, cmd);
        return;
    }
    resp_out_t *o = redis_conn_out(c);
    int64_t now = now_ms(c);
    resp_reply_array(o, (cmd->argc - 1) / 3);
    for (size_t i = 1; i < cmd->argc; i += 3) {
        int64_t t;
        if (add_one(c, &cmd->argv[i], &cmd->argv[i + 1], &cmd->argv[i + 2], now, NULL, &t))
            resp_reply_int(o, t);
    }
}

/* ------------------------------------------------------------------------ */
/* TS.INCRBY, TS.DECRBY                                                     */
/* ------------------------------------------------------------------------ */

static bool err_incrby(redis_conn_t *c, const cmd_err_t *e)
{
    if (e->code == CMD_E_WRONGTYPE)
        return ts_err_series(c, e);
    if (e->code == CMD_E_BAD_REQUEST && strcmp(e->field, "timestamp") == 0) {
        redis_err(c, "TSDB: timestamp must be equal to or higher than the maximum existing timestamp");
        return true;
    }
    if (e->code == CMD_E_BAD_REQUEST) {
        redis_err(c, "ERR TSDB: %s", e->message);
        return true;
    }
    return false;
}

static void incrby(redis_conn_t *c, const resp_cmd_t *cmd, bool decr)
{
    if (cmd->argc < 3) {
        ts_wrong_arity(c, cmd);
        return;
    }
    /* the module reads, in order: the creation options (a missing key),
     * the key's type, the amount, TIMESTAMP; the key is looked at only
     * when one of the others fails, to answer the first failure */
    create_opts_t o;
    bool hl, hr;
    bool copts = parse_create(cmd, &o, &hl, &hr);
    cmd_ts_incrby_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .request_bytes = c->cmd_bytes };
    const char *err = NULL;
    bool arity = false;
    if (!ts_strict_double(&cmd->argv[2], &a.by) || !isfinite(a.by))
        err = "ERR TSDB: invalid increase/decrease value";
    int i = redis_word_index(cmd, "TIMESTAMP");
    a.timestamp = now_ms(c);
    if (!err && i >= 0) {
        const resp_arg_t *ta = (size_t)i + 1 < cmd->argc ? &cmd->argv[i + 1] : NULL;
        if (!ta)
            arity = true;
        else if (!(ta->len == 1 && ta->ptr[0] == '*') && !ts_timestamp(ta, &a.timestamp))
            err = "ERR TSDB: invalid timestamp";
    }
    if (!copts || err || arity) {
        int kind = redis_mod_key_state(c, &cmd->argv[1], ts_type.name);
        if (kind < 0)
            return;
        if (kind == 2) {
            redis_err(c, "ERR WRONGTYPE Operation against a key holding the wrong kind of value");
            return;
        }
        if (kind == 0 && !copts) {
            answer_opts(c, cmd, &o);
            return;
        }
        if (arity)
            ts_wrong_arity(c, cmd);
        else if (err)
            redis_err(c, "%s", err);
        if (arity || err)
            return;
        memset(&o, 0, sizeof(o));   /* an existing series: the options are not used */
        o.policy = TS_DUP_BLOCK;
    }
    a.opts = opts_cmd(&o);
    cmd_ts_incrby_res_t r;
    if (ts_run(c, decr ? &CMD_TS_DECRBY : &CMD_TS_INCRBY, &a, &r, err_incrby))
        resp_reply_int(redis_conn_out(c), r.timestamp);
}

static void ts_incrby_command(redis_conn_t *c, const resp_cmd_t *cmd) { incrby(c, cmd, false); }
static void ts_decrby_command(redis_conn_t *c, const resp_cmd_t *cmd) { incrby(c, cmd, true); }

/* ------------------------------------------------------------------------ */
/* TS.DEL                                                                   */
/* ------------------------------------------------------------------------ */

static bool err_del(redis_conn_t *c, const cmd_err_t *e)
{
    if (e->code == CMD_E_BAD_REQUEST && strcmp(e->field, "from") == 0) {
        ts_tsdb_err(c, "When a series has compactions, deleting samples or compaction buckets beyond the series "
                       "retention period is not possible");
        return true;
    }
    return ts_err_series(c, e);
}

static void ts_del_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 4) {
        ts_wrong_arity(c, cmd);
        return;
    }
    cmd_ts_del_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    if (redis_word_is(&cmd->argv[2], "-"))
        a.from = 0;
    else if (!ts_timestamp(&cmd->argv[2], &a.from)) {
        ts_tsdb_err(c, "wrong fromTimestamp");
        return;
    }
    if (cmd->argv[3].len == 1 && cmd->argv[3].ptr[0] == '+')
        a.to = TS_MAX_TIMESTAMP;
    else if (!ts_timestamp(&cmd->argv[3], &a.to)) {
        ts_tsdb_err(c, "wrong toTimestamp");
        return;
    }
    cmd_ts_del_res_t r;
    if (ts_run(c, &CMD_TS_DEL, &a, &r, err_del))
        resp_reply_int(redis_conn_out(c), r.deleted);
}

/* ------------------------------------------------------------------------ */
/* TS.CREATERULE, TS.DELETERULE                                             */
/* ------------------------------------------------------------------------ */

bool ts_parse_agg_name(const resp_arg_t *a, ts_agg_t *out)
{
    static const char *const names[] = { "avg", "sum",   "min",   "max",   "range", "count", "first",
                                         "last", "std.p", "std.s", "var.p", "var.s", "twa" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (redis_word_is(a, names[i]))
            return ts_agg_parse(names[i], out);
    return false;
}

static bool err_createrule(redis_conn_t *c, const cmd_err_t *e)
{
    if (e->code == CMD_E_EXISTS) {
        ts_tsdb_err(c, "the destination key already has a src rule");
        return true;
    }
    if (e->code == CMD_E_BAD_REQUEST && strstr(e->message, "the source is itself")) {
        ts_tsdb_err(c, "the source key already has a source rule");
        return true;
    }
    if (e->code == CMD_E_BAD_REQUEST && strstr(e->message, "has rules of its own")) {
        ts_tsdb_err(c, "the destination key already has a dst rule");
        return true;
    }
    if (e->code == CMD_E_BAD_REQUEST) {
        redis_err(c, "ERR TSDB: %s", e->message);
        return true;
    }
    return ts_err_series(c, e);
}

static void ts_createrule_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 6 && cmd->argc != 7) {
        ts_wrong_arity(c, cmd);
        return;
    }
    int i = redis_word_index(cmd, "AGGREGATION");
    if (i <= 0) {
        ts_wrong_arity(c, cmd);
        return;
    }
    cmd_ts_createrule_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .dest = cmd->argv[2].ptr,
                                   .dlen = cmd->argv[2].len, .gen = TS_RULE_GEN_2 };
    long long bucket;
    if ((size_t)i + 2 >= cmd->argc || !redis_ll(&cmd->argv[i + 2], &bucket)) {
        ts_tsdb_err(c, "Couldn't parse AGGREGATION");
        return;
    }
    if (!ts_parse_agg_name(&cmd->argv[i + 1], &a.agg)) {
        ts_tsdb_err(c, "Unknown aggregation type");
        return;
    }
    if (bucket <= 0) {
        ts_tsdb_err(c, "bucketDuration must be greater than zero");
        return;
    }
    a.bucket_ms = bucket;
    a.align = 0;
    if (cmd->argc == 7 && ((size_t)i + 3 >= cmd->argc || !ts_timestamp(&cmd->argv[i + 3], &a.align))) {
        ts_tsdb_err(c, "Couldn't parse alignTimestamp");
        return;
    }
    if (a.klen == a.dlen && memcmp(a.key, a.dest, a.klen) == 0) {
        ts_tsdb_err(c, "the source key and destination key should be different");
        return;
    }
    cmd_ts_created_res_t r;
    if (ts_run(c, &CMD_TS_CREATERULE, &a, &r, err_createrule))
        redis_ok(c);
}

static bool err_deleterule(redis_conn_t *c, const cmd_err_t *e)
{
    if (e->code == CMD_E_NOT_FOUND && strstr(e->message, "no rule writes")) {
        ts_tsdb_err(c, "compaction rule does not exist");
        return true;
    }
    return ts_err_series(c, e);
}

static void ts_deleterule_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc != 3) {
        ts_wrong_arity(c, cmd);
        return;
    }
    cmd_ts_deleterule_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .dest = cmd->argv[2].ptr,
                                   .dlen = cmd->argv[2].len };
    cmd_ts_created_res_t r;
    if (ts_run(c, &CMD_TS_DELETERULE, &a, &r, err_deleterule))
        redis_ok(c);
}

/* ------------------------------------------------------------------------ */
/* TS.INFO, TS.GET                                                          */
/* ------------------------------------------------------------------------ */

static void simple(resp_out_t *o, const char *s) { resp_reply_simple(o, s, strlen(s)); }

/* n names and values: a map under RESP3, a flat array of 2n under RESP2. */
static void flat_map(resp_out_t *o, size_t n)
{
    if (o->proto == 3)
        resp_reply_map(o, n);
    else
        resp_reply_array(o, 2 * n);
}

static void ts_info_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 2 || cmd->argc > 3) {
        ts_wrong_arity(c, cmd);
        return;
    }
    bool debug = false;
    for (size_t i = 1; i < cmd->argc; i++)
        debug |= redis_word_is(&cmd->argv[i], "DEBUG");
    cmd_ts_key_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    cmd_ts_info_res_t r;
    if (!ts_run(c, &CMD_TS_INFO, &a, &r, ts_err_series))
        return;
    resp_out_t *o = redis_conn_out(c);
    bool map = o->proto == 3;
    const ts_info_t *in = &r.info;
    flat_map(o, debug ? 14 : 12);
    redis_reply_field(o, "totalSamples", (long long)in->samples);
    redis_reply_field(o, "memoryUsage", (long long)in->memory_bytes);
    redis_reply_field(o, "firstTimestamp", in->samples ? in->first_ts : 0);
    redis_reply_field(o, "lastTimestamp", in->samples ? in->last_ts : 0);
    redis_reply_field(o, "retentionTime", r.retention_ms);
    /* a series has a chunk from its creation in RedisTimeSeries: an empty
     * one is shown as one empty chunk */
    size_t nchunks = in->chunks ? in->chunks : 1;
    redis_reply_field(o, "chunkCount", (long long)nchunks);
    redis_reply_field(o, "chunkSize", TS_CHUNK_BYTES);
    simple(o, "chunkType");
    simple(o, "compressed");
    simple(o, "duplicatePolicy");
    /* BLOCK is the policy of a series created without one, which
     * RedisTimeSeries shows as nil (the module's global default applies) */
    if (r.policy == TS_DUP_BLOCK)
        resp_reply_null(o);
    else
        simple(o, ts_policy_name(r.policy));
    simple(o, "labels");
    ts_reply_map_or_array(o, r.nlabels);
    for (size_t i = 0; i < r.nlabels; i++) {
        if (!map)
            resp_reply_array(o, 2);
        resp_reply_bulk(o, r.labels[i].name, r.labels[i].name_len);
        resp_reply_bulk(o, r.labels[i].value, r.labels[i].value_len);
    }
    simple(o, "sourceKey");
    if (r.source)
        resp_reply_bulk(o, r.source, r.source_len);
    else
        resp_reply_null(o);
    simple(o, "rules");
    ts_reply_map_or_array(o, r.nrules);
    for (size_t i = 0; i < r.nrules; i++) {
        const cmd_ts_rule_shown_t *x = &r.rules[i];
        if (!map)
            resp_reply_array(o, 4);
        resp_reply_bulk(o, x->dest, x->dest_len);
        if (map)
            resp_reply_array(o, 3);
        resp_reply_int(o, x->bucket_ms);
        char up[32];
        const char *n = ts_agg_name(x->agg);
        size_t k = 0;
        for (; n[k] && k < sizeof(up) - 1; k++)
            up[k] = (char)(n[k] >= 'a' && n[k] <= 'z' ? n[k] - 32 : n[k]);
        resp_reply_simple(o, up, k);
        resp_reply_int(o, x->align);
    }
    if (debug) {
        simple(o, "keySelfName");
        resp_reply_bulk(o, cmd->argv[1].ptr, cmd->argv[1].len);
        simple(o, "Chunks");
        resp_reply_array(o, nchunks);
        for (size_t i = 0; i < nchunks; i++) {
            static const ts_chunk_info_t none = { 0, -1, -1 };
            const ts_chunk_info_t *k = in->chunks ? &r.chunks[i] : &none;
            flat_map(o, 5);
            redis_reply_field(o, "startTimestamp", k->samples ? k->first_ts : -1);
            redis_reply_field(o, "endTimestamp", k->samples ? k->last_ts : -1);
            redis_reply_field(o, "samples", (long long)k->samples);
            redis_reply_field(o, "size", TS_CHUNK_BYTES);
            simple(o, "bytesPerSample");
            resp_reply_double(o, k->samples ? (double)(float)((float)TS_CHUNK_BYTES / (float)k->samples) : 0.0);
        }
    }
    cmd_ts_info_free(&r);
}

static void ts_get_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc < 2 || cmd->argc > 3) {
        ts_wrong_arity(c, cmd);
        return;
    }
    bool latest = cmd->argc == 3 && redis_word_is(&cmd->argv[2], "LATEST");
    cmd_ts_range_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len, .latest = latest };
    a.query.from = 0;
    a.query.to = TS_MAX_TIMESTAMP;
    a.query.count = 1;
    cmd_ts_range_res_t r;
    if (!ts_run(c, &CMD_TS_REVRANGE, &a, &r, ts_err_series))
        return;
    resp_out_t *o = redis_conn_out(c);
    if (cmd->argc == 3 && !latest)
        ts_tsdb_err(c, "wrong 3rd argument");
    else if (r.rows.n == 0)
        resp_reply_array(o, 0);
    else
        ts_reply_sample(o, r.rows.s[0].ts, r.rows.s[0].value);
    cmd_ts_rows_free(&r.rows);
}

static const redis_cmd_t commands[] = {
    /* RedisTimeSeries registers its commands without an arity and checks
     * their arguments itself */
    { "ts.add", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, ts_add_command, NULL },
    { "ts.alter", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, ts_alter_command, NULL },
    { "ts.create", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, ts_create_command, NULL },
    { "ts.createrule", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, ts_createrule_command, NULL },
    { "ts.decrby", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, ts_decrby_command, NULL },
    { "ts.del", -1, REDIS_CF_WRITE | REDIS_CF_MODULE, "@write @module", 1, 1, 1, ts_del_command, NULL },
    { "ts.deleterule", -1, REDIS_CF_WRITE | REDIS_CF_MODULE, "@write @module", 1, 1, 1, ts_deleterule_command, NULL },
    { "ts.get", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @module", 1, 1, 1, ts_get_command, NULL },
    { "ts.incrby", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, 1, 1, ts_incrby_command, NULL },
    { "ts.info", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @module", 1, 1, 1, ts_info_command, NULL },
    { "ts.madd", -1, REDIS_CF_WRITE | REDIS_CF_DENYOOM | REDIS_CF_MODULE, "@write @module", 1, -1, 3, ts_madd_command, NULL },
    { "ts.mget", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @module", 0, 0, -1, ts_mget_command, NULL },
    { "ts.mrange", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @module", 0, 0, -1, ts_mrange_command, NULL },
    { "ts.mrevrange", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @module", 0, 0, -1, ts_mrevrange_command, NULL },
    { "ts.queryindex", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @module", 0, 0, -1, ts_queryindex_command, NULL },
    { "ts.range", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @module", 1, 1, 1, ts_range_command, NULL },
    { "ts.revrange", -1, REDIS_CF_READONLY | REDIS_CF_MODULE, "@read @module", 1, 1, 1, ts_revrange_command, NULL },
};
REDIS_COMMANDS(ts);
