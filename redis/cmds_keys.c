/* cmds_keys.c - Redis's generic key commands on every type of tally's
 * (redis_int.h):
 *
 *   DEL, UNLINK, EXISTS, TYPE, TTL, PTTL, EXPIRETIME, PEXPIRETIME, EXPIRE,
 *   PEXPIRE, EXPIREAT, PEXPIREAT (NX XX GT LT), PERSIST
 *                         CMD_DEL, CMD_KEY_INFO, CMD_PEXPIRE, CMD_PERSIST
 *   KEYS, SCAN, RANDOMKEY CMD_SCAN (Redis's glob patterns matched here)
 *   DBSIZE                CMD_DBSIZE
 *   DUMP, RESTORE         CMD_DUMP, CMD_RESTORE: tally's own dump format
 *                         (core/keydump.h), which Redis's payloads are not
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/keys_ops.h"
#include "core/keydump.h"
#include "redis/redis_int.h"

static bool eq_ci(const resp_arg_t *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

/* An argument as Redis's "%s" prints it: up to its first NUL, at most max bytes. */
static int shown(const resp_arg_t *a, size_t max)
{
    const char *z = memchr(a->ptr, '\0', a->len);
    size_t n = z ? (size_t)(z - a->ptr) : a->len;
    return (int)(n < max ? n : max);
}


static void del_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long n = 0;
    for (size_t i = 1; i < cmd->argc; i++) {
        cmd_del_args_t a = { .key = cmd->argv[i].ptr, .klen = cmd->argv[i].len };
        cmd_keys_res_t r;
        bool missing;
        if (redis_run(c, &CMD_DEL, &a, &r, &missing))
            n += r.done;
        else if (!missing)
            return;
    }
    resp_reply_int(redis_conn_out(c), n);
}

/* KEY.INFO of argv[i]: 1 with *info, 0 missing, -1 answered an error. */
int redis_key_info(redis_conn_t *c, const resp_arg_t *k, cmd_key_info_res_t *info)
{
    cmd_key_args_t a = { .key = k->ptr, .klen = k->len };
    bool missing;
    if (redis_run(c, &CMD_KEY_INFO, &a, info, &missing))
        return 1;
    return missing ? 0 : -1;
}

static void exists_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long n = 0;
    for (size_t i = 1; i < cmd->argc; i++) {
        cmd_key_info_res_t info;
        int f = redis_key_info(c, &cmd->argv[i], &info);
        if (f < 0)
            return;
        n += f;
    }
    resp_reply_int(redis_conn_out(c), n);
}

static void ttl(redis_conn_t *c, const resp_cmd_t *cmd, bool ms)
{
    cmd_key_info_res_t info;
    int f = redis_key_info(c, &cmd->argv[1], &info);
    if (f < 0)
        return;
    long long t = f == 0 ? -2 : info.ttl_ms < 0 ? -1 : ms ? info.ttl_ms : (info.ttl_ms + 500) / 1000;
    resp_reply_int(redis_conn_out(c), t);
}

/* EXPIRETIME, PEXPIRETIME: the absolute expiry (Unix s or ms). */
static void expiretime(redis_conn_t *c, const resp_cmd_t *cmd, bool ms)
{
    cmd_key_info_res_t info;
    int f = redis_key_info(c, &cmd->argv[1], &info);
    if (f < 0)
        return;
    long long t = f == 0 ? -2 : info.expire_ms < 0 ? -1 : ms ? info.expire_ms : (info.expire_ms + 500) / 1000;
    resp_reply_int(redis_conn_out(c), t);
}

static void expiretime_command(redis_conn_t *c, const resp_cmd_t *cmd) { expiretime(c, cmd, false); }
static void pexpiretime_command(redis_conn_t *c, const resp_cmd_t *cmd) { expiretime(c, cmd, true); }

static void ttl_command(redis_conn_t *c, const resp_cmd_t *cmd) { ttl(c, cmd, false); }
static void pttl_command(redis_conn_t *c, const resp_cmd_t *cmd) { ttl(c, cmd, true); }

/* EXPIRE, PEXPIRE (at: false, a TTL) and EXPIREAT, PEXPIREAT (at: true, a
 * Unix time): Redis 7's checks in its order (options, the number, its
 * range), then PEXPIRE's operation with the TTL left, or DEL for a time not
 * after now.  With NX, XX, GT or LT the operation checks them against the
 * key's expiry under its lock, and deletes the key itself when the time is
 * not after now (CMD_EXPIRE_PAST). */
static void expire(redis_conn_t *c, const resp_cmd_t *cmd, bool ms, bool at)
{
    static const char *const names[2][2] = { { "expire", "pexpire" }, { "expireat", "pexpireat" } };
    const char *name = names[at][ms];
    unsigned cond = 0;
    for (size_t j = 3; j < cmd->argc; j++) {
        const resp_arg_t *o = &cmd->argv[j];
        if (eq_ci(o, "nx"))
            cond |= CMD_EXPIRE_NX;
        else if (eq_ci(o, "xx"))
            cond |= CMD_EXPIRE_XX;
        else if (eq_ci(o, "gt"))
            cond |= CMD_EXPIRE_GT;
        else if (eq_ci(o, "lt"))
            cond |= CMD_EXPIRE_LT;
        else {
            redis_err(c, "ERR Unsupported option %.*s", shown(o, 256), o->ptr);
            return;
        }
    }
    if ((cond & CMD_EXPIRE_NX) && (cond & (CMD_EXPIRE_XX | CMD_EXPIRE_GT | CMD_EXPIRE_LT))) {
        redis_err(c, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return;
    }
    if ((cond & CMD_EXPIRE_GT) && (cond & CMD_EXPIRE_LT)) {
        redis_err(c, "ERR GT and LT options at the same time are not compatible");
        return;
    }
    long long v;
    if (!redis_ll(&cmd->argv[2], &v)) {
        redis_err(c, REDIS_ERR_NOT_INT);
        return;
    }
    if (!ms && (v > INT64_MAX / 1000 || v < INT64_MIN / 1000)) {
        redis_err(c, "ERR invalid expire time in '%s' command", name);
        return;
    }
    int64_t when_ms = ms ? v : v * 1000;
    int64_t now_ms = c->cfg->hooks.now_ns() / 1000000;
    /* the TTL from now (an absolute time before the epoch's start - now
     * counts as in the past) */
    int64_t ttl_ms = !at ? when_ms : when_ms < INT64_MIN + now_ms ? -1 : when_ms - now_ms;
    if (ttl_ms > INT64_MAX / 2 - now_ms - 1000) {   /* cmd/keys_ops.h's bound, with room for the clock */
        redis_err(c, "ERR invalid expire time in '%s' command", name);
        return;
    }
    const resp_arg_t *k = &cmd->argv[1];
    bool missing;
    cmd_keys_res_t r;
    if (cond) {
        /* any time not after now compares with the key's expiry (which is
         * after now) as now - 1 ms does */
        cmd_pexpire_args_t a = { .key = k->ptr, .klen = k->len, .ttl_ms = ttl_ms <= 0 ? -1 : ttl_ms,
                                 .cond = cond | CMD_EXPIRE_PAST };
        if (redis_run(c, &CMD_PEXPIRE, &a, &r, &missing) || missing)
            resp_reply_int(redis_conn_out(c), !missing && r.done);
        return;
    }
    if (ttl_ms <= 0) {   /* a time in the past deletes the key, as Redis does */
        cmd_del_args_t a = { .key = k->ptr, .klen = k->len };
        if (redis_run(c, &CMD_DEL, &a, &r, &missing) || missing)
            resp_reply_int(redis_conn_out(c), !missing && r.done);
        return;
    }
    cmd_pexpire_args_t a = { .key = k->ptr, .klen = k->len, .ttl_ms = ttl_ms };
    if (redis_run(c, &CMD_PEXPIRE, &a, &r, &missing) || missing)
        resp_reply_int(redis_conn_out(c), missing ? 0 : 1);
}

static void expire_command(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, false, false); }
static void pexpire_command(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, true, false); }
static void expireat_command(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, false, true); }
static void pexpireat_command(redis_conn_t *c, const resp_cmd_t *cmd) { expire(c, cmd, true, true); }

static void persist_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_key_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    cmd_keys_res_t r;
    bool missing;
    if (redis_run(c, &CMD_PERSIST, &a, &r, &missing) || missing)
        resp_reply_int(redis_conn_out(c), !missing && r.done);
}

/* What Redis's TYPE names each of tally's types: Redis keeps counters, bit
 * strings, HyperLogLogs and redis-cell's state in strings, geo sets in
 * sorted sets; the probabilistic types and time series are the names
 * RedisBloom's and RedisTimeSeries' module types register. */
static const struct {
    const char *tally, *redis;
} redis_types[] = {
    { "counter", "string" },    { "bits", "string" },       { "uv", "string" },
    { "throttle", "string" },   { "geo", "zset" },          { "bloom", "MBbloom--" },
    { "cuckoo", "MBbloomCF" },  { "cms", "CMSk-TYPE" },     { "topk", "TopK-TYPE" },
    { "tdigest", "TDIS-TYPE" }, { "ts", "TSDB-TYPE" },
};

/* The name Redis's TYPE gives a type of tally's (`name`: core's). */
static const char *redis_type_of(const char *name)
{
    for (size_t i = 0; i < sizeof(redis_types) / sizeof(redis_types[0]); i++)
        if (strcmp(redis_types[i].tally, name) == 0)
            return redis_types[i].redis;
    return name;   /* a type of tally's own (activity): its name */
}

static void type_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_key_info_res_t info;
    int f = redis_key_info(c, &cmd->argv[1], &info);
    if (f < 0)
        return;
    const char *t = f ? redis_type_of(info.type) : "none";
    resp_reply_simple(redis_conn_out(c), t, strlen(t));
}

/* ------------------------------------------------------------------------ */
/* KEYS, SCAN, RANDOMKEY, DBSIZE                                            */
/* ------------------------------------------------------------------------ */

/* Whether the pattern's element at p[*i] matches the byte ch, Redis's glob
 * rules: '?' any byte, [abc] [^abc] [a-z] a set (a '\\' in it quotes the
 * next byte; a set left open ends with the pattern), '\\x' the byte x, any
 * other byte itself.  *i moves past the element. */
static bool glob_one(const char *p, size_t n, size_t *i, char ch)
{
    size_t j = *i;
    if (p[j] == '?') {
        *i = j + 1;
        return true;
    }
    if (p[j] == '\\' && j + 1 < n) {
        *i = j + 2;
        return p[j + 1] == ch;
    }
    if (p[j] != '[') {
        *i = j + 1;
        return p[j] == ch;
    }
    j++;
    bool neg = j < n && p[j] == '^', match = false;
    j += neg;
    for (;;) {
        if (j >= n)
            break;   /* an open set: ends with the pattern */
        if (p[j] == '\\' && j + 1 < n) {
            match |= p[j + 1] == ch;
            j += 2;
        } else if (p[j] == ']') {
            j++;
            break;
        } else if (n - j >= 3 && p[j + 1] == '-') {
            signed char lo = (signed char)p[j], hi = (signed char)p[j + 2], sc = (signed char)ch;
            if (lo > hi) {
                signed char t = lo;
                lo = hi;
                hi = t;
            }
            match |= sc >= lo && sc <= hi;
            j += 3;
        } else {
            match |= p[j] == ch;
            j++;
        }
    }
    *i = j;
    return neg ? !match : match;
}

/* Redis's stringmatchlen (case-sensitive): '*' any run of bytes, the rest
 * one byte each (glob_one); the last '*' is backtracked to. */
static bool glob_match(const char *p, size_t pn, const char *s, size_t sn)
{
    size_t pi = 0, si = 0, star_p = 0, star_s = 0;
    bool star = false;
    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            while (pi < pn && p[pi] == '*')
                pi++;
            if (pi == pn)
                return true;
            star = true;
            star_p = pi;
            star_s = si;
            continue;
        }
        size_t next = pi;
        if (pi < pn && glob_one(p, pn, &next, s[si])) {
            pi = next;
            si++;
            continue;
        }
        if (!star)
            return false;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

/* The bytes every key the pattern matches begins with: up to its first
 * special byte. */
static size_t glob_prefix(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] != '*' && p[i] != '?' && p[i] != '[' && p[i] != '\\')
        i++;
    return i;
}

/* A SCAN cursor as one number, Redis's form: the shard in the low
 * SCAN_SHARD_BITS bits (at most 4096 shards), the position in the shard
 * above them; 0 starts (and ends) the walk. */
#define SCAN_SHARD_BITS 12

/* One page of CMD_SCAN from (shard, pos): false answered. */
static bool scan_page(redis_conn_t *c, const char *prefix, size_t plen, unsigned shard, uint64_t pos, size_t limit,
                      cmd_scan_res_t *r)
{
    cmd_scan_args_t a = { .prefix = prefix, .plen = plen, .shard = shard, .pos = pos, .limit = limit,
                          .slot_lo = -1, .slot_hi = -1 };
    return redis_run(c, &CMD_SCAN, &a, r, NULL);
}

typedef struct keyref {
    const char *p;
    size_t len;
} keyref_t;

static int keyref_cmp(const void *x, const void *y)
{
    const keyref_t *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int d = memcmp(a->p, b->p, n);
    return d ? d : (a->len > b->len) - (a->len < b->len);
}

/* KEYS: the whole walk, page by page, each key once (sorted). */
static void keys_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const resp_arg_t *pat = &cmd->argv[1];
    bool all = pat->len == 1 && pat->ptr[0] == '*';
    size_t plen = glob_prefix(pat->ptr, pat->len);
    keyref_t *v = NULL;
    size_t n = 0, cap = 0;
    char **pages = NULL;   /* the pages' blocks, which the keys point into */
    size_t npages = 0;
    unsigned shard = 0;
    uint64_t pos = 0;
    bool ok = true;
    for (;;) {
        cmd_scan_res_t r;
        if (!scan_page(c, pat->ptr, plen, shard, pos, CMD_SCAN_MAX_LIMIT, &r)) {
            ok = false;
            break;
        }
        char **pg = realloc(pages, (npages + 1) * sizeof(*pages));
        if (!pg) {
            cmd_scan_res_free(&r);
            ok = false;
            redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
            break;
        }
        pages = pg;
        pages[npages++] = (char *)r.keys;
        for (size_t i = 0; i < r.n && ok; i++) {
            if (!all && !glob_match(pat->ptr, pat->len, r.keys[i].key, r.keys[i].klen))
                continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 64;
                keyref_t *nv = realloc(v, nc * sizeof(*nv));
                if (!nv) {
                    ok = false;
                    redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
                    break;
                }
                v = nv;
                cap = nc;
            }
            v[n++] = (keyref_t){ r.keys[i].key, r.keys[i].klen };
        }
        if (!ok || r.done)
            break;
        shard = r.shard;
        pos = r.pos;
    }
    if (ok) {
        if (n)
            qsort(v, n, sizeof(*v), keyref_cmp);
        size_t u = 0;   /* a key the walk met twice (its table grew), once */
        for (size_t i = 0; i < n; i++)
            if (u == 0 || keyref_cmp(&v[u - 1], &v[i]) != 0)
                v[u++] = v[i];
        resp_reply_array(redis_conn_out(c), u);
        for (size_t i = 0; i < u; i++)
            resp_reply_bulk(redis_conn_out(c), v[i].p, v[i].len);
    }
    for (size_t i = 0; i < npages; i++)
        free(pages[i]);
    free(pages);
    free(v);
}

static void scan_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    /* Redis reads the cursor with strtoul: leading '+' or '-' taken, no
     * space first, nothing after, no overflow */
    const resp_arg_t *cur = &cmd->argv[1];
    char num[32];
    unsigned long long cursor = 0;
    bool bad = cur->len >= sizeof(num) || memchr(cur->ptr, '\0', cur->len) != NULL;
    if (!bad) {
        memcpy(num, cur->ptr, cur->len);
        num[cur->len] = '\0';
        char *end;
        errno = 0;
        cursor = strtoull(num, &end, 10);
        bad = (cur->len && (num[0] == ' ' || (num[0] >= '\t' && num[0] <= '\r'))) || *end != '\0' ||
              errno == ERANGE;
    }
    if (bad) {
        redis_err(c, "ERR invalid cursor");
        return;
    }
    long long count = 10;
    const resp_arg_t *match = NULL, *type = NULL;
    for (size_t i = 2; i < cmd->argc;) {
        size_t left = cmd->argc - i;
        if (eq_ci(&cmd->argv[i], "count") && left >= 2) {
            if (!redis_ll(&cmd->argv[i + 1], &count)) {
                redis_err(c, REDIS_ERR_NOT_INT);
                return;
            }
            if (count < 1) {
                redis_err(c, "ERR syntax error");
                return;
            }
        } else if (eq_ci(&cmd->argv[i], "match") && left >= 2) {
            match = &cmd->argv[i + 1];
            if (match->len == 1 && match->ptr[0] == '*')
                match = NULL;
        } else if (eq_ci(&cmd->argv[i], "type") && left >= 2) {
            type = &cmd->argv[i + 1];
        } else {
            redis_err(c, "ERR syntax error");
            return;
        }
        i += 2;
    }
    unsigned shard = (unsigned)(cursor & ((1u << SCAN_SHARD_BITS) - 1));
    uint64_t pos = cursor >> SCAN_SHARD_BITS;
    resp_out_t *out = redis_conn_out(c);
    if (shard >= ks_shard_count(c->cfg->srv->ks)) {   /* not a cursor of ours: the walk is over */
        resp_reply_array(out, 2);
        resp_reply_bulk(out, "0", 1);
        resp_reply_array(out, 0);
        return;
    }
    size_t plen = match ? glob_prefix(match->ptr, match->len) : 0;
    cmd_scan_res_t r;
    if (!scan_page(c, match ? match->ptr : "", plen, shard, pos,
                   count > CMD_SCAN_MAX_LIMIT ? CMD_SCAN_MAX_LIMIT : (size_t)count, &r))
        return;
    size_t keep = 0;
    for (size_t i = 0; i < r.n; i++) {
        if (match && !glob_match(match->ptr, match->len, r.keys[i].key, r.keys[i].klen))
            continue;
        if (type) {
            const char *t = redis_type_of(r.keys[i].type);
            if (strlen(t) != type->len || strncasecmp(t, type->ptr, type->len) != 0)
                continue;
        }
        r.keys[keep++] = r.keys[i];
    }
    char next[24];
    int len = r.done ? snprintf(next, sizeof(next), "0")
                     : snprintf(next, sizeof(next), "%llu",
                                (unsigned long long)(r.pos << SCAN_SHARD_BITS | r.shard));
    resp_reply_array(out, 2);
    resp_reply_bulk(out, next, (size_t)len);
    resp_reply_array(out, keep);
    for (size_t i = 0; i < keep; i++)
        resp_reply_bulk(out, r.keys[i].key, r.keys[i].klen);
    cmd_scan_res_free(&r);
}

static void dbsize_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    cmd_dbsize_res_t r;
    if (redis_run(c, &CMD_DBSIZE, NULL, &r, NULL))
        resp_reply_int(redis_conn_out(c), (long long)r.keys);
}

/* RANDOMKEY: the first key SCAN finds from a random place of the walk
 * (going round to its start once), nil when there is none. */
static void randomkey_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    unsigned nshards = ks_shard_count(c->cfg->srv->ks);
    uint64_t x = (uint64_t)c->cfg->hooks.now_ns() ^ (c->id * 0x9e3779b97f4a7c15ull);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    unsigned shard = (unsigned)(x % nshards);
    uint64_t pos = x >> 32;   /* a position in the shard's hash order (32 bits) */
    bool wrapped = false;
    for (;;) {
        cmd_scan_res_t r;
        if (!scan_page(c, "", 0, shard, pos, 1, &r))
            return;
        if (r.n) {
            resp_reply_bulk(redis_conn_out(c), r.keys[0].key, r.keys[0].klen);
            cmd_scan_res_free(&r);
            return;
        }
        cmd_scan_res_free(&r);
        if (r.done) {
            if (wrapped) {
                resp_reply_null(redis_conn_out(c));
                return;
            }
            wrapped = true;   /* from the start: reaches at most where it began, and past it */
            shard = 0;
            pos = 0;
        } else {
            shard = r.shard;
            pos = r.pos;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* DUMP, RESTORE                                                            */
/* ------------------------------------------------------------------------ */

static void dump_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    cmd_key_args_t a = { .key = cmd->argv[1].ptr, .klen = cmd->argv[1].len };
    cmd_dump_res_t r;
    bool missing;
    if (redis_run(c, &CMD_DUMP, &a, &r, &missing)) {
        resp_reply_bulk(redis_conn_out(c), r.data, r.len);
        free(r.data);
    } else if (missing) {
        resp_reply_null(redis_conn_out(c));
    }
}

/* RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]: Redis's
 * checks in its order; IDLETIME and FREQ are checked and not kept (tally's
 * eviction keeps its own clock).  The payload is a DUMP of tally's. */
static void restore_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    bool replace = false, absttl = false, idle = false, freq = false;
    for (size_t j = 4; j < cmd->argc; j++) {
        size_t more = cmd->argc - j - 1;
        const resp_arg_t *o = &cmd->argv[j];
        long long v;
        if (eq_ci(o, "replace")) {
            replace = true;
        } else if (eq_ci(o, "absttl")) {
            absttl = true;
        } else if (eq_ci(o, "idletime") && more >= 1 && !freq) {
            if (!redis_ll(&cmd->argv[++j], &v)) {
                redis_err(c, REDIS_ERR_NOT_INT);
                return;
            }
            if (v < 0) {
                redis_err(c, "ERR Invalid IDLETIME value, must be >= 0");
                return;
            }
            idle = true;
        } else if (eq_ci(o, "freq") && more >= 1 && !idle) {
            if (!redis_ll(&cmd->argv[++j], &v)) {
                redis_err(c, REDIS_ERR_NOT_INT);
                return;
            }
            if (v < 0 || v > 255) {
                redis_err(c, "ERR Invalid FREQ value, must be >= 0 and <= 255");
                return;
            }
            freq = true;
        } else {
            redis_err(c, "ERR syntax error");
            return;
        }
    }
    const resp_arg_t *k = &cmd->argv[1], *payload = &cmd->argv[3];
    if (!replace) {
        cmd_key_info_res_t info;
        int f = redis_key_info(c, k, &info);
        if (f < 0)
            return;
        if (f) {
            redis_err(c, "BUSYKEY Target key name already exists.");
            return;
        }
    }
    long long ttl;
    if (!redis_ll(&cmd->argv[2], &ttl)) {
        redis_err(c, REDIS_ERR_NOT_INT);
        return;
    }
    if (ttl < 0) {
        redis_err(c, "ERR Invalid TTL value, must be >= 0");
        return;
    }
    if (!keydump_verify((const uint8_t *)payload->ptr, payload->len)) {
        redis_err(c, "ERR DUMP payload version or checksum are wrong");
        return;
    }
    int64_t now_ms = c->cfg->hooks.now_ns() / 1000000;
    if (ttl && absttl)
        ttl = ttl <= now_ms ? -1 : ttl - now_ms;
    bool missing;
    if (ttl < 0) {   /* already expired: the key is only deleted (REPLACE), as Redis does */
        cmd_del_args_t d = { .key = k->ptr, .klen = k->len };
        cmd_keys_res_t dr;
        if (replace && !redis_run(c, &CMD_DEL, &d, &dr, &missing) && !missing)
            return;
        redis_ok(c);
        return;
    }
    if (ttl > INT64_MAX / 2 - now_ms - 1000) {   /* tally's bound (cmd/keys_ops.h); Redis would take it */
        redis_err(c, "ERR invalid expire time in 'restore' command");
        return;
    }
    cmd_restore_args_t a = { .key = k->ptr, .klen = k->len, .replace = replace, .has_ttl = true, .ttl_ms = ttl,
                             .dump = (const uint8_t *)payload->ptr, .len = payload->len };
    cmd_restore_res_t r;
    if (redis_run(c, &CMD_RESTORE, &a, &r, NULL))
        redis_ok(c);
}

#define KS_W "@keyspace @write"
#define KS_R "@keyspace @read"
static const redis_cmd_t commands[] = {
    { "dbsize", 1, REDIS_CF_READONLY | REDIS_CF_FAST, KS_R " @fast", 0, 0, 0, dbsize_command, NULL },
    { "dump", 2, REDIS_CF_READONLY, KS_R " @slow", 1, 1, 1, dump_command, NULL },
    { "expiretime", 2, REDIS_CF_READONLY | REDIS_CF_FAST, KS_R " @fast", 1, 1, 1, expiretime_command, NULL },
    { "keys", 2, REDIS_CF_READONLY, KS_R " @slow @dangerous", 0, 0, 0, keys_command, NULL },
    { "pexpiretime", 2, REDIS_CF_READONLY | REDIS_CF_FAST, KS_R " @fast", 1, 1, 1, pexpiretime_command, NULL },
    { "randomkey", 1, REDIS_CF_READONLY, KS_R " @slow", 0, 0, 0, randomkey_command, NULL },
    { "restore", -4, REDIS_CF_WRITE | REDIS_CF_DENYOOM, KS_W " @slow @dangerous", 1, 1, 1, restore_command, NULL },
    { "scan", -2, REDIS_CF_READONLY, KS_R " @slow", 0, 0, 0, scan_command, NULL },
    { "del", -2, REDIS_CF_WRITE, KS_W " @slow", 1, -1, 1, del_command, NULL },
    { "exists", -2, REDIS_CF_READONLY | REDIS_CF_FAST, "@keyspace @read @fast", 1, -1, 1, exists_command, NULL },
    { "expire", -3, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, expire_command, NULL },
    { "expireat", -3, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, expireat_command, NULL },
    { "persist", 2, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, persist_command, NULL },
    { "pexpire", -3, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, pexpire_command, NULL },
    { "pexpireat", -3, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, 1, 1, pexpireat_command, NULL },
    { "pttl", 2, REDIS_CF_READONLY | REDIS_CF_FAST, "@keyspace @read @fast", 1, 1, 1, pttl_command, NULL },
    { "ttl", 2, REDIS_CF_READONLY | REDIS_CF_FAST, "@keyspace @read @fast", 1, 1, 1, ttl_command, NULL },
    { "type", 2, REDIS_CF_READONLY | REDIS_CF_FAST, "@keyspace @read @fast", 1, 1, 1, type_command, NULL },
    { "unlink", -2, REDIS_CF_WRITE | REDIS_CF_FAST, KS_W " @fast", 1, -1, 1, del_command, NULL },
};
REDIS_COMMANDS(keys);
