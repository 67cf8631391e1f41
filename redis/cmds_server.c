/* cmds_server.c - Redis's server and introspection commands: INFO,
 * COMMAND (its rows from the table: redis_int.h), CLIENT (the registry of
 * connections: redis_clients_t), READONLY/READWRITE and WAIT. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/admin.h"
#include "cmd/persist.h"
#include "cmd/repl.h"
#include "core/keyspace.h"
#include "redis/redis_int.h"

#define REDIS_COMPAT_VERSION "7.0.15"   /* what INFO and HELLO-aware clients are told */
#define WAIT_FOREVER_MS 60000           /* WAIT n 0 waits this long at most */

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static bool eq_ci(const resp_arg_t *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

static int shown(const resp_arg_t *a, size_t max)
{
    const char *z = memchr(a->ptr, '\0', a->len);
    size_t n = z ? (size_t)(z - a->ptr) : a->len;
    return (int)(n < max ? n : max);
}

static void bulk_str(redis_conn_t *c, const char *s) { resp_reply_bulk(&c->out, s, strlen(s)); }

/* A growing text (INFO, CLIENT LIST); on allocation failure it stays
 * short and `failed` is set. */
typedef struct text {
    char *p;
    size_t len, cap;
    bool failed;
} text_t;

static void tprintf(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tprintf(text_t *t, const char *fmt, ...)
{
    for (int round = 0; round < 2 && !t->failed; round++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap : 1024;
        while (cap <= t->len + (size_t)n)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->failed = true;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
}

/* A container's subcommand (CLIENT ..., COMMAND ...): its row in subs, or
 * NULL with Redis's error answered. */
static const redis_cmd_t *subcommand(redis_conn_t *c, const resp_cmd_t *cmd, const redis_cmd_t *subs,
                                     const char *upper)
{
    const resp_arg_t *sub = &cmd->argv[1];
    for (const redis_cmd_t *r = subs; r->name; r++) {
        const char *bar = strchr(r->name, '|');
        if (!eq_ci(sub, bar + 1))
            continue;
        if ((r->arity > 0 && (size_t)r->arity != cmd->argc) || (r->arity < 0 && cmd->argc < (size_t)-r->arity)) {
            redis_err(c, "ERR wrong number of arguments for '%s' command", r->name);
            return NULL;
        }
        atomic_store_explicit(&c->last_cmd, r->name, memory_order_relaxed);
        return r;
    }
    redis_err(c, "ERR unknown subcommand '%.*s'. Try %s HELP.", shown(sub, 128), sub->ptr, upper);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The registry                                                             */
/* ------------------------------------------------------------------------ */

redis_clients_t *redis_clients_new(void)
{
    redis_clients_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

void redis_clients_free(redis_clients_t *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void redis_clients_add(redis_clients_t *r, redis_conn_t *c)
{
    pthread_mutex_lock(&r->mu);
    c->cl_prev = NULL;
    c->cl_next = r->head;
    if (r->head)
        r->head->cl_prev = c;
    r->head = c;
    r->n++;
    pthread_mutex_unlock(&r->mu);
    atomic_fetch_add_explicit(&r->received, 1, memory_order_relaxed);
}

void redis_clients_remove(redis_clients_t *r, redis_conn_t *c)
{
    pthread_mutex_lock(&r->mu);
    if (c->cl_prev)
        c->cl_prev->cl_next = c->cl_next;
    else
        r->head = c->cl_next;
    if (c->cl_next)
        c->cl_next->cl_prev = c->cl_prev;
    r->n--;
    r->commands_closed += atomic_load_explicit(&c->commands, memory_order_relaxed);
    pthread_mutex_unlock(&r->mu);
}

static int64_t mono_now(const redis_conn_t *c) { return c->cfg->hooks.mono_ns ? c->cfg->hooks.mono_ns() : 0; }

/* One line of CLIENT LIST / CLIENT INFO (Redis 7.2's fields, lib-name and
 * lib-ver included); with the registry's lock held (names). */
static void client_line(text_t *t, const redis_conn_t *self, const redis_conn_t *x, int64_t now)
{
    int64_t last = atomic_load_explicit(&x->last_ns, memory_order_relaxed);
    size_t qbuf = x == self ? 0 : atomic_load_explicit(&x->qbuf, memory_order_relaxed);
    size_t omem = x == self ? self->out.len : atomic_load_explicit(&x->omem, memory_order_relaxed);
    int proto = x == self ? self->out.proto : atomic_load_explicit(&x->proto, memory_order_relaxed);
    const char *cmd = atomic_load_explicit(&x->last_cmd, memory_order_relaxed);
    tprintf(t,
            "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 "
            "qbuf=%zu qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=%zu tot-mem=%zu events=r "
            "cmd=%s user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s\n",
            (unsigned long long)x->id, x->peer, x->local, x->fd, x->name,
            (long long)((now - x->created_ns) / 1000000000LL), (long long)((now - last) / 1000000000LL), qbuf, omem,
            sizeof(*x) + qbuf + omem, cmd, x->user, proto, x->lib_name, x->lib_ver);
}

/* ------------------------------------------------------------------------ */
/* CLIENT                                                                   */
/* ------------------------------------------------------------------------ */

static void client_id(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    resp_reply_int(&c->out, (long long)c->id);
}

static void client_getname(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    if (c->name[0])
        bulk_str(c, c->name);
    else
        resp_reply_null(&c->out);
}

static void client_setname(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (redis_set_name(c, &cmd->argv[2]))
        redis_ok(c);
}

static void reply_text(redis_conn_t *c, text_t *t)
{
    if (t->failed)
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
    else
        resp_reply_verbatim(&c->out, t->p ? t->p : "", t->len, "txt");
    free(t->p);
}

static void client_info(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    text_t t = { 0 };
    redis_clients_t *r = c->cfg->clients;
    if (r)
        pthread_mutex_lock(&r->mu);
    client_line(&t, c, c, mono_now(c));
    if (r)
        pthread_mutex_unlock(&r->mu);
    reply_text(c, &t);
}

/* CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...] */
static void client_list(redis_conn_t *c, const resp_cmd_t *cmd)
{
    bool none = false;
    size_t ids_from = 0;
    if (cmd->argc == 4 && eq_ci(&cmd->argv[2], "type")) {
        const resp_arg_t *ty = &cmd->argv[3];
        if (eq_ci(ty, "master") || eq_ci(ty, "replica") || eq_ci(ty, "slave") || eq_ci(ty, "pubsub"))
            none = true;   /* every Redis-port client is a normal one */
        else if (!eq_ci(ty, "normal")) {
            redis_err(c, "ERR Unknown client type '%.*s'", shown(ty, 128), ty->ptr);
            return;
        }
    } else if (cmd->argc > 3 && eq_ci(&cmd->argv[2], "id")) {
        ids_from = 3;
        for (size_t i = 3; i < cmd->argc; i++) {
            long long v;
            if (!redis_ll(&cmd->argv[i], &v) || v <= 0) {
                redis_err(c, "ERR Invalid client ID");
                return;
            }
        }
    } else if (cmd->argc != 2) {
        redis_err(c, "ERR syntax error");
        return;
    }
    text_t t = { 0 };
    redis_clients_t *r = c->cfg->clients;
    int64_t now = mono_now(c);
    if (!r) {
        if (!none)
            client_line(&t, c, c, now);
        reply_text(c, &t);
        return;
    }
    pthread_mutex_lock(&r->mu);
    /* oldest first, as Redis lists them: the registry is newest first */
    const redis_conn_t *tail = r->head;
    while (tail && tail->cl_next)
        tail = tail->cl_next;
    for (const redis_conn_t *x = tail; x && !none; x = x->cl_prev) {
        if (ids_from) {
            bool want = false;
            for (size_t i = ids_from; i < cmd->argc && !want; i++) {
                long long v;
                want = redis_ll(&cmd->argv[i], &v) && (unsigned long long)v == x->id;
            }
            if (!want)
                continue;
        }
        client_line(&t, c, x, now);
    }
    pthread_mutex_unlock(&r->mu);
    reply_text(c, &t);
}

/* CLIENT SETINFO LIB-NAME|LIB-VER value (redis-py 5 and other clients send
 * it on connecting) */
static void client_setinfo(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const resp_arg_t *attr = &cmd->argv[2], *v = &cmd->argv[3];
    bool lib_name = eq_ci(attr, "lib-name");
    if (!lib_name && !eq_ci(attr, "lib-ver")) {
        redis_err(c, "ERR Unrecognized option '%.*s'", shown(attr, 128), attr->ptr);
        return;
    }
    for (size_t i = 0; i < v->len; i++)
        if (v->ptr[i] < '!' || v->ptr[i] > '~') {
            redis_err(c, "ERR %s cannot contain spaces, newlines or special characters.",
                      lib_name ? "lib-name" : "lib-ver");
            return;
        }
    char *dst = lib_name ? c->lib_name : c->lib_ver;
    size_t n = v->len < sizeof(c->lib_name) - 1 ? v->len : sizeof(c->lib_name) - 1;
    redis_clients_t *r = c->cfg->clients;
    if (r)
        pthread_mutex_lock(&r->mu);
    memcpy(dst, v->ptr, n);
    dst[n] = '\0';
    if (r)
        pthread_mutex_unlock(&r->mu);
    redis_ok(c);
}

/* CLIENT NO-EVICT|NO-TOUCH on|off: nothing to change in tally (no client
 * eviction; reads do not touch a key's access time) */
static void client_onoff(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (eq_ci(&cmd->argv[2], "on") || eq_ci(&cmd->argv[2], "off"))
        redis_ok(c);
    else
        redis_err(c, "ERR syntax error");
}

#define CL_FLAGS REDIS_CF_NOSCRIPT | REDIS_CF_LOADING | REDIS_CF_STALE
#define CL_ADMIN REDIS_CF_ADMIN | CL_FLAGS
static const redis_cmd_t client_subs[] = {
    { "client|getname", 2, CL_FLAGS, "@slow @connection", 0, 0, 0, client_getname, NULL },
    { "client|id", 2, CL_FLAGS, "@slow @connection", 0, 0, 0, client_id, NULL },
    { "client|info", 2, CL_FLAGS, "@slow @connection", 0, 0, 0, client_info, NULL },
    { "client|list", -2, CL_ADMIN, "@admin @slow @dangerous @connection", 0, 0, 0, client_list, NULL },
    { "client|no-evict", 3, CL_ADMIN, "@admin @slow @dangerous @connection", 0, 0, 0, client_onoff, NULL },
    { "client|no-touch", 3, CL_FLAGS, "@slow @connection", 0, 0, 0, client_onoff, NULL },
    { "client|setinfo", 4, CL_FLAGS, "@slow @connection", 0, 0, 0, client_setinfo, NULL },
    { "client|setname", 3, CL_FLAGS, "@slow @connection", 0, 0, 0, client_setname, NULL },
    { NULL, 0, 0, NULL, 0, 0, 0, NULL, NULL },
};

static void client_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const redis_cmd_t *r = subcommand(c, cmd, client_subs, "CLIENT");
    if (r)
        r->fn(c, cmd);
}

/* ------------------------------------------------------------------------ */
/* COMMAND                                                                  */
/* ------------------------------------------------------------------------ */

static size_t words(const char *s)
{
    size_t n = 0;
    for (const char *p = s; *p;) {
        p += strspn(p, " ");
        if (!*p)
            break;
        n++;
        p += strcspn(p, " ");
    }
    return n;
}

/* Redis 7.0's key-spec flags where they are not the default (RO access
 * for a read-only command, RW access update for a write), and its tips,
 * for the commands of Redis's tally serves or may serve (strings,
 * bitmaps, HyperLogLogs, keys, geo, the sorted-set commands on geo keys,
 * connection and server commands).  Redis's key-spec notes (prose) are
 * not repeated. */
static const struct {
    const char *name, *flags, *tips;
} row_extra[] = {
    { "append", "RW insert", NULL },
    { "bitfield", "RW access update variable_flags", NULL },
    { "client|info", NULL, "nondeterministic_output" },
    { "client|list", NULL, "nondeterministic_output" },
    { "command", NULL, "nondeterministic_output_order" },
    { "command|docs", NULL, "nondeterministic_output_order" },
    { "command|info", NULL, "nondeterministic_output_order" },
    { "command|list", NULL, "nondeterministic_output_order" },
    { "dbsize", NULL, "request_policy:all_shards response_policy:agg_sum" },
    { "del", "RM delete", "request_policy:multi_shard response_policy:agg_sum" },
    { "dump", NULL, "nondeterministic_output" },
    { "exists", "RO", "request_policy:multi_shard response_policy:agg_sum" },
    { "expire", "RW update", NULL },
    { "expireat", "RW update", NULL },
    { "geoadd", "RW update", NULL },
    { "getdel", "RW access delete", NULL },
    { "info", NULL, "nondeterministic_output request_policy:all_shards response_policy:special" },
    { "keys", NULL, "request_policy:all_shards nondeterministic_output_order" },
    { "mget", NULL, "request_policy:multi_shard" },
    { "mset", "OW update", "request_policy:multi_shard response_policy:all_succeeded" },
    { "msetnx", "OW insert", "request_policy:multi_shard response_policy:agg_min" },
    { "persist", "RW update", NULL },
    { "pexpire", "RW update", NULL },
    { "pexpireat", "RW update", NULL },
    { "pfadd", "RW insert", NULL },
    { "pfcount", "RW access", NULL },
    { "ping", NULL, "request_policy:all_shards response_policy:all_succeeded" },
    { "psetex", "OW update", NULL },
    { "pttl", NULL, "nondeterministic_output" },
    { "randomkey", NULL, "request_policy:all_shards nondeterministic_output" },
    { "restore", "OW update", NULL },
    { "scan", NULL, "nondeterministic_output request_policy:special" },
    { "set", "RW access update variable_flags", NULL },
    { "setex", "OW update", NULL },
    { "setnx", "OW insert", NULL },
    { "setrange", "RW update", NULL },
    { "strlen", "RO", NULL },
    { "touch", "RO", "request_policy:multi_shard response_policy:agg_sum" },
    { "ttl", NULL, "nondeterministic_output" },
    { "type", "RO", NULL },
    { "unlink", "RM delete", "request_policy:multi_shard response_policy:agg_sum" },
    { "wait", NULL, "request_policy:all_shards response_policy:agg_min" },
    { "zcard", "RO", NULL },
    { "zrem", "RW delete", NULL },
};

/* Space-separated words as simple strings (an array, or a set). */
static void words_reply(redis_conn_t *c, const char *s, bool set)
{
    size_t n = s ? words(s) : 0;
    if (set)
        resp_reply_set(&c->out, n);
    else
        resp_reply_array(&c->out, n);
    for (const char *p = s; p && *p;) {
        p += strspn(p, " ");
        size_t w = strcspn(p, " ");
        if (w)
            resp_reply_simple(&c->out, p, w);
        p += w;
    }
}

/* Redis 7.0's COMMAND INFO entry of a row: name, arity, flags, first,
 * last, step, ACL categories, tips (row_extra's), key specs (one range,
 * from first/last/step, with row_extra's flags or the default), and
 * subcommands. */
static void command_entry(redis_conn_t *c, const redis_cmd_t *r)
{
    resp_out_t *o = &c->out;
    resp_reply_array(o, 10);
    bulk_str(c, r->name);
    resp_reply_int(o, r->arity);
    size_t nf = 0;
    for (unsigned b = 0; b < REDIS_CF_COUNT; b++)
        nf += (r->flags >> b) & 1;
    resp_reply_set(o, nf);
    for (unsigned b = 0; b < REDIS_CF_COUNT; b++)
        if ((r->flags >> b) & 1)
            resp_reply_simple(o, redis_cf_names[b], strlen(redis_cf_names[b]));
    resp_reply_int(o, r->first);
    resp_reply_int(o, r->last);
    resp_reply_int(o, r->step);
    words_reply(c, r->acl, true);
    bool ro = (r->flags & REDIS_CF_READONLY) && !(r->flags & REDIS_CF_WRITE);
    const char *f = ro ? "RO access" : "RW access update", *tips = NULL;
    for (size_t i = 0; i < sizeof(row_extra) / sizeof(row_extra[0]); i++)
        if (strcmp(row_extra[i].name, r->name) == 0) {
            f = row_extra[i].flags ? row_extra[i].flags : f;
            tips = row_extra[i].tips;
        }
    /* tips, key specs and subcommands: sets in RESP3, as Redis sends them */
    if (tips) {   /* bulk strings */
        resp_reply_set(o, words(tips));
        for (const char *p = tips; *p;) {
            size_t w = strcspn(p, " ");
            resp_reply_bulk(o, p, w);
            p += w + (p[w] == ' ');
        }
    } else {
        resp_reply_set(o, 0);
    }
    if (r->first > 0) {
        resp_reply_set(o, 1);
        resp_reply_map(o, 3);
        bulk_str(c, "flags");
        words_reply(c, f, true);
        bulk_str(c, "begin_search");
        resp_reply_map(o, 2);
        bulk_str(c, "type");
        bulk_str(c, "index");
        bulk_str(c, "spec");
        resp_reply_map(o, 1);
        bulk_str(c, "index");
        resp_reply_int(o, r->first);
        bulk_str(c, "find_keys");
        resp_reply_map(o, 2);
        bulk_str(c, "type");
        bulk_str(c, "range");
        bulk_str(c, "spec");
        resp_reply_map(o, 3);
        bulk_str(c, "lastkey");
        resp_reply_int(o, r->last < 0 ? r->last : r->last - r->first);
        bulk_str(c, "keystep");
        resp_reply_int(o, r->step);
        bulk_str(c, "limit");
        resp_reply_int(o, 0);
    } else {
        resp_reply_set(o, 0);
    }
    size_t ns = 0;
    for (const redis_cmd_t *s = r->subs; s && s->name; s++)
        ns++;
    resp_reply_set(o, ns);
    for (const redis_cmd_t *s = r->subs; s && s->name; s++)
        command_entry(c, s);
}

static void command_all(redis_conn_t *c)
{
    size_t n;
    const redis_cmd_t *const *all = redis_cmd_all(&n);
    resp_reply_array(&c->out, n);
    for (size_t i = 0; i < n; i++)
        command_entry(c, all[i]);
}

static void command_count(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    size_t n;
    redis_cmd_all(&n);
    resp_reply_int(&c->out, (long long)n);
}

/* A row by name, "container|sub" included. */
static const redis_cmd_t *find_row(const resp_arg_t *a)
{
    const char *bar = memchr(a->ptr, '|', a->len);
    const redis_cmd_t *r = redis_cmd_lookup(a->ptr, bar ? (size_t)(bar - a->ptr) : a->len);
    if (!r || !bar)
        return r;
    for (const redis_cmd_t *s = r->subs; s && s->name; s++)
        if (strlen(s->name) == a->len && strncasecmp(s->name, a->ptr, a->len) == 0)
            return s;
    return NULL;
}

static void command_info(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc == 2) {
        command_all(c);
        return;
    }
    resp_reply_array(&c->out, cmd->argc - 2);
    for (size_t i = 2; i < cmd->argc; i++) {
        const redis_cmd_t *r = find_row(&cmd->argv[i]);
        if (r)
            command_entry(c, r);
        else
            resp_reply_null(&c->out);
    }
}

/* Redis's group of a row, for COMMAND DOCS. */
static const char *docs_group(const redis_cmd_t *r)
{
    if (r->flags & REDIS_CF_MODULE)
        return "module";
    if (strcmp(r->name, "client") == 0)
        return "connection";
    if (strcmp(r->name, "readonly") == 0 || strcmp(r->name, "readwrite") == 0)
        return "cluster";
    if (strcmp(r->name, "wait") == 0)
        return "generic";
    const char *g = redis_cmd_group(r);
    if (strcmp(g, "hll") == 0)
        return "hyperloglog";
    if (strcmp(g, "keys") == 0)
        return "generic";
    return g;
}

/* COMMAND DOCS: tally keeps no summaries, versions or argument lists, so
 * each command's map holds the three fields Redis documents as always
 * present, summary and since empty, and its group (and a container its
 * subcommands' maps). */
static void docs_fields(redis_conn_t *c, const redis_cmd_t *r, size_t extra)
{
    resp_reply_map(&c->out, 3 + extra);
    bulk_str(c, "summary");
    bulk_str(c, "");
    bulk_str(c, "since");
    bulk_str(c, "");
    bulk_str(c, "group");
    bulk_str(c, docs_group(r));
}

static void docs_entry(redis_conn_t *c, const redis_cmd_t *r)
{
    size_t ns = 0;
    for (const redis_cmd_t *s = r->subs; s && s->name; s++)
        ns++;
    docs_fields(c, r, ns ? 1 : 0);
    if (!ns)
        return;
    bulk_str(c, "subcommands");
    resp_reply_map(&c->out, ns);
    for (const redis_cmd_t *s = r->subs; s && s->name; s++) {
        bulk_str(c, s->name);
        docs_fields(c, r, 0);
    }
}

static void command_docs(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc == 2) {
        size_t n;
        const redis_cmd_t *const *all = redis_cmd_all(&n);
        resp_reply_map(&c->out, n);
        for (size_t i = 0; i < n; i++) {
            bulk_str(c, all[i]->name);
            docs_entry(c, all[i]);
        }
        return;
    }
    size_t found = 0;
    for (size_t i = 2; i < cmd->argc; i++)
        found += find_row(&cmd->argv[i]) != NULL;
    resp_reply_map(&c->out, found);
    for (size_t i = 2; i < cmd->argc; i++) {
        const redis_cmd_t *r = find_row(&cmd->argv[i]);
        if (!r)
            continue;
        bulk_str(c, r->name);
        docs_entry(c, r);
    }
}

/* COMMAND LIST [FILTERBY MODULE name | ACLCAT cat | PATTERN pattern]:
 * without a filter every name; ACLCAT filters by category, MODULE by the
 * module group ("cell" for redis-cell's); PATTERN is not kept. */
static void command_list(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const char *cat = NULL, *module = NULL;
    char want[80];
    if (cmd->argc != 2) {
        if (cmd->argc != 5 || !eq_ci(&cmd->argv[2], "filterby")) {
            redis_err(c, "ERR syntax error");
            return;
        }
        const resp_arg_t *by = &cmd->argv[3], *v = &cmd->argv[4];
        if (v->len >= sizeof(want) - 2) {
            resp_reply_array(&c->out, 0);
            return;
        }
        if (eq_ci(by, "aclcat")) {
            snprintf(want, sizeof(want), "@%.*s", (int)v->len, v->ptr);
            cat = want;
        } else if (eq_ci(by, "module")) {
            snprintf(want, sizeof(want), "%.*s", (int)v->len, v->ptr);
            module = want;
        } else {
            redis_err(c, "ERR syntax error");
            return;
        }
    }
    size_t n, hits = 0;
    const redis_cmd_t *const *all = redis_cmd_all(&n);
    const redis_cmd_t **pick = malloc((n ? n : 1) * sizeof(*pick));
    if (!pick) {
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const redis_cmd_t *r = all[i];
        if (module && (!(r->flags & REDIS_CF_MODULE) || strcasecmp(redis_cmd_group(r), module) != 0))
            continue;
        if (cat) {
            bool has = false;
            size_t cl = strlen(cat);
            for (const char *p = r->acl; *p && !has;) {
                p += strspn(p, " ");
                size_t w = strcspn(p, " ");
                has = w == cl && strncasecmp(p, cat, cl) == 0;
                p += w;
            }
            if (!has)
                continue;
        }
        pick[hits++] = r;
    }
    resp_reply_array(&c->out, hits);
    for (size_t i = 0; i < hits; i++)
        bulk_str(c, pick[i]->name);
    free(pick);
}

/* COMMAND GETKEYS command arg...: the keys by the row's positions. */
static void command_getkeys(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const resp_arg_t *name = &cmd->argv[2];
    const redis_cmd_t *r = redis_cmd_lookup(name->ptr, name->len);
    size_t argc = cmd->argc - 2;
    if (!r) {
        redis_err(c, "ERR Invalid command specified");
        return;
    }
    if ((r->arity > 0 && (size_t)r->arity != argc) || (r->arity < 0 && argc < (size_t)-r->arity)) {
        redis_err(c, "ERR Invalid number of arguments specified for command");
        return;
    }
    if (r->first <= 0 || (r->flags & REDIS_CF_MOVABLEKEYS)) {
        redis_err(c, "ERR The command has no key arguments");
        return;
    }
    long last = r->last < 0 ? (long)argc + r->last : r->last;
    long step = r->step > 0 ? r->step : 1;
    size_t n = 0;
    for (long i = r->first; i <= last && (size_t)i < argc; i += step)
        n++;
    if (n == 0) {
        redis_err(c, "ERR The command has no key arguments");
        return;
    }
    resp_reply_array(&c->out, n);
    for (long i = r->first; i <= last && (size_t)i < argc; i += step)
        resp_reply_bulk(&c->out, cmd->argv[2 + i].ptr, cmd->argv[2 + i].len);
}

#define CMD_FLAGS REDIS_CF_LOADING | REDIS_CF_STALE
static const redis_cmd_t command_subs[] = {
    { "command|count", 2, CMD_FLAGS, "@slow @connection", 0, 0, 0, command_count, NULL },
    { "command|docs", -2, CMD_FLAGS, "@slow @connection", 0, 0, 0, command_docs, NULL },
    { "command|getkeys", -4, CMD_FLAGS, "@slow @connection", 0, 0, 0, command_getkeys, NULL },
    { "command|info", -2, CMD_FLAGS, "@slow @connection", 0, 0, 0, command_info, NULL },
    { "command|list", -2, CMD_FLAGS, "@slow @connection", 0, 0, 0, command_list, NULL },
    { NULL, 0, 0, NULL, 0, 0, 0, NULL, NULL },
};

static void command_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc == 1) {
        command_all(c);
        return;
    }
    const redis_cmd_t *r = subcommand(c, cmd, command_subs, "COMMAND");
    if (r)
        r->fn(c, cmd);
}

/* ------------------------------------------------------------------------ */
/* INFO                                                                     */
/* ------------------------------------------------------------------------ */

enum { S_SERVER, S_CLIENTS, S_MEMORY, S_PERSISTENCE, S_STATS, S_REPLICATION, S_CPU, S_MODULES, S_CLUSTER,
       S_KEYSPACE, S__COUNT };
static const char *const section_names[S__COUNT] = { "server", "clients", "memory", "persistence", "stats",
                                                      "replication", "cpu", "modules", "cluster", "keyspace" };
static const char *const section_titles[S__COUNT] = { "Server", "Clients", "Memory", "Persistence", "Stats",
                                                       "Replication", "CPU", "Modules", "Cluster", "Keyspace" };

static void human(char *out, size_t n, double v)
{
    const char *units = "BKMGTP";
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%.0fB", v);
    else
        snprintf(out, n, "%.2f%c", v, units[u]);
}

static void info_section(redis_conn_t *c, text_t *t, int s, const cmd_repl_status_t *rs, bool have_rs,
                         const redis_process_t *pr)
{
    const cmd_server_t *srv = c->cfg->srv;
    const api_admin_hooks_t *adm = srv->admin;
    redis_clients_t *reg = c->cfg->clients;
    tprintf(t, "# %s\r\n", section_titles[s]);
    switch (s) {
    case S_SERVER:
        tprintf(t,
                "redis_version:%s\r\ntally_version:%s\r\nredis_mode:%s\r\nos:%s\r\narch_bits:%d\r\n"
                "multiplexing_api:epoll\r\nprocess_id:%ld\r\ntcp_port:%d\r\nserver_time_usec:%lld\r\n"
                "uptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\n",
                REDIS_COMPAT_VERSION, c->cfg->version, srv->cluster ? "cluster" : "standalone", pr->os,
                (int)(sizeof(void *) * 8), pr->pid, c->cfg->port, (long long)pr->time_us, (long long)pr->uptime_s,
                (long long)(pr->uptime_s / 86400));
        break;
    case S_CLIENTS: {
        size_t n = 0;
        if (reg) {
            pthread_mutex_lock(&reg->mu);
            n = reg->n;
            pthread_mutex_unlock(&reg->mu);
        }
        tprintf(t, "connected_clients:%zu\r\nmaxclients:%u\r\nblocked_clients:0\r\n", n, c->cfg->max_clients);
        break;
    }
    case S_MEMORY: {
        uint64_t used = srv->ks ? ks_total_memory(srv->ks) : 0, max = srv->ks ? ks_maxmemory(srv->ks) : 0;
        long long rss = pr->rss_bytes;
        char h1[32], h2[32], h3[32];
        human(h1, sizeof(h1), (double)used);
        human(h2, sizeof(h2), (double)rss);
        human(h3, sizeof(h3), (double)max);
        tprintf(t,
                "used_memory:%llu\r\nused_memory_human:%s\r\nused_memory_rss:%lld\r\nused_memory_rss_human:%s\r\n"
                "maxmemory:%llu\r\nmaxmemory_human:%s\r\n",
                (unsigned long long)used, h1, rss, h2, (unsigned long long)max, h3);
        break;
    }
    case S_PERSISTENCE: {
        cmd_persist_status_t ps;
        bool have = adm && adm->persist_status && adm->persist_status(adm->ud, &ps);
        bool ready = !srv->hooks.ready || srv->hooks.ready(srv->hooks.ud);
        tprintf(t, "loading:%d\r\n", ready ? 0 : 1);
        if (have) {
            tprintf(t, "rdb_changes_since_last_save:%llu\r\nrdb_last_save_time:%lld\r\nrdb_last_bgsave_status:%s\r\n"
                       "aof_enabled:%d\r\naof_last_write_status:%s\r\n",
                    (unsigned long long)ps.changes_since_snapshot,
                    ps.has_last && ps.last_ok ? (long long)(ps.last.finished_ms / 1000) : 0LL,
                    !ps.has_last || ps.last_ok ? "ok" : "err", ps.journal ? 1 : 0,
                    ps.unwritable ? "err" : "ok");
        } else {
            tprintf(t, "rdb_changes_since_last_save:0\r\naof_enabled:0\r\n");
        }
        break;
    }
    case S_STATS: {
        uint64_t cmds = 0;
        if (reg) {
            pthread_mutex_lock(&reg->mu);
            cmds = reg->commands_closed;
            for (const redis_conn_t *x = reg->head; x; x = x->cl_next)
                cmds += atomic_load_explicit(&x->commands, memory_order_relaxed);
            pthread_mutex_unlock(&reg->mu);
        }
        tprintf(t, "total_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n",
                reg ? (unsigned long long)atomic_load(&reg->received) : 0ULL, (unsigned long long)cmds);
        break;
    }
    case S_REPLICATION: {
        const char *role = srv->hooks.role ? srv->hooks.role(srv->hooks.ud) : "primary";
        bool replica = strcmp(role, "primary") != 0;
        tprintf(t, "role:%s\r\n", replica ? "slave" : "master");
        if (have_rs && replica && rs->has_primary)
            tprintf(t, "master_url:%s\r\nmaster_link_status:%s\r\n", rs->primary,
                    rs->has_link && rs->link.up ? "up" : "down");
        int connected = 0;
        for (int i = 0; have_rs && i < rs->nreplicas; i++)
            connected += rs->replicas[i].connected;
        tprintf(t, "connected_slaves:%d\r\n", connected);
        for (int i = 0, k = 0; have_rs && i < rs->nreplicas; i++)
            if (rs->replicas[i].connected)
                tprintf(t, "slave%d:addr=%s,state=online,offset=%llu,lag=%lld\r\n", k++, rs->replicas[i].addr,
                        (unsigned long long)rs->replicas[i].offset, (long long)(rs->replicas[i].lag_ms / 1000));
        tprintf(t, "master_replid:%s\r\nmaster_repl_offset:%llu\r\n", have_rs ? rs->run : "",
                have_rs ? (unsigned long long)rs->offset : 0ULL);
        break;
    }
    case S_CPU:
        tprintf(t, "used_cpu_sys:%.6f\r\nused_cpu_user:%.6f\r\nused_cpu_sys_children:%.6f\r\n"
                   "used_cpu_user_children:%.6f\r\n",
                pr->cpu_sys, pr->cpu_user, pr->cpu_sys_children, pr->cpu_user_children);
        break;
    case S_MODULES:
        break;
    case S_CLUSTER:
        tprintf(t, "cluster_enabled:%d\r\n", srv->cluster ? 1 : 0);
        break;
    case S_KEYSPACE: {
        uint64_t keys = srv->ks ? ks_total_keys(srv->ks) : 0;
        if (keys)
            tprintf(t, "db0:keys=%llu,expires=0,avg_ttl=0\r\n", (unsigned long long)keys);
        break;
    }
    }
}

/* INFO [section ...]: Redis's text; no section, "default", "all" or
 * "everything": every section tally has; an unknown name adds nothing. */
static void info_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    bool want[S__COUNT] = { false };
    if (cmd->argc == 1)
        memset(want, 1, sizeof(want));
    for (size_t i = 1; i < cmd->argc; i++) {
        const resp_arg_t *a = &cmd->argv[i];
        if (eq_ci(a, "default") || eq_ci(a, "all") || eq_ci(a, "everything"))
            memset(want, 1, sizeof(want));
        for (int s = 0; s < S__COUNT; s++)
            if (eq_ci(a, section_names[s]))
                want[s] = true;
    }
    const api_admin_hooks_t *adm = c->cfg->srv->admin;
    cmd_repl_status_t *rs = NULL;
    bool have_rs = false;
    if (want[S_REPLICATION] && adm && adm->repl_status && (rs = malloc(sizeof(*rs))))
        have_rs = adm->repl_status(adm->ud, rs);
    redis_process_t pr = { 0 };
    if (c->cfg->hooks.process)
        c->cfg->hooks.process(c->cfg->hooks.ud, &pr);
    text_t t = { 0 };
    bool first = true;
    for (int s = 0; s < S__COUNT; s++) {
        if (!want[s])
            continue;
        if (!first)
            tprintf(&t, "\r\n");
        first = false;
        info_section(c, &t, s, rs, have_rs, &pr);
    }
    free(rs);
    reply_text(c, &t);
}

/* ------------------------------------------------------------------------ */
/* Replicas                                                                 */
/* ------------------------------------------------------------------------ */

/* WAIT numreplicas timeout: the replicas holding everything the stream had
 * when WAIT came (so every change this client made before it), once
 * numreplicas hold it or the timeout (ms) passed.  As in Redis it blocks
 * its client alone: when the replicas are not there yet the connection is
 * parked (conn.h, redis_conn_parked) and its loop serves its other clients
 * meanwhile, looking at it again every few ms (redis_conn_resume) - it no
 * longer holds the loop.  Timeout 0 waits at most WAIT_FOREVER_MS.  Inside
 * EXEC it answers at once, as Redis does in a transaction (which it never
 * blocks). */
static int replicas_holding(const api_admin_hooks_t *adm, cmd_repl_status_t *rs, uint64_t target, bool *primary)
{
    if (!adm || !adm->repl_status || !adm->repl_status(adm->ud, rs))
        return 0;
    *primary = strcmp(rs->role, "primary") == 0;
    int n = 0;
    for (int i = 0; i < rs->nreplicas; i++)
        n += rs->replicas[i].offset >= target;
    return n;
}

#define ERR_WAIT_REPLICA                                                                                         \
    "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is "      \
    "configured to be writable (which is not the default) writes to replicas are just local and are not "        \
    "propagated."

static void wait_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long want, timeout;
    if (!redis_ll(&cmd->argv[1], &want)) {
        redis_err(c, "%s", REDIS_ERR_NOT_INT);
        return;
    }
    if (!redis_ll(&cmd->argv[2], &timeout)) {
        redis_err(c, "ERR timeout is not an integer or out of range");
        return;
    }
    if (timeout < 0) {
        redis_err(c, "ERR timeout is negative");
        return;
    }
    const api_admin_hooks_t *adm = c->cfg->srv->admin;
    cmd_repl_status_t *rs = malloc(sizeof(*rs));
    if (!rs) {
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    bool primary = true;
    uint64_t target = 0;
    if (adm && adm->repl_status && adm->repl_status(adm->ud, rs)) {
        target = rs->offset;
        primary = strcmp(rs->role, "primary") == 0;
    }
    if (!primary) {
        free(rs);
        redis_err(c, ERR_WAIT_REPLICA);
        return;
    }
    int have = replicas_holding(adm, rs, target, &primary);
    free(rs);
    if (have >= want || c->exec) {
        resp_reply_int(&c->out, have);
        return;
    }
    int64_t limit_ms = timeout == 0 || timeout > WAIT_FOREVER_MS ? WAIT_FOREVER_MS : timeout;
    c->parked = true;
    c->park_want = want;
    c->park_target = target;
    c->park_t0 = mono_now(c);
    c->park_end = c->park_t0 + limit_ms * 1000000LL;
}

/* A primary that became a replica while a client waited answers it as
 * Redis answers its blocked clients then. */
bool redis_wait_resume(redis_conn_t *c, bool now)
{
    if (!c->parked)
        return true;
    cmd_repl_status_t *rs = malloc(sizeof(*rs));
    bool primary = true;
    int have = rs ? replicas_holding(c->cfg->srv->admin, rs, c->park_target, &primary) : 0;
    free(rs);
    if (!rs && !now)
        return false;   /* out of memory: looked at again next time */
    if (have < c->park_want && primary && !now && mono_now(c) < c->park_end)
        return false;
    c->parked = false;
    if (primary)
        resp_reply_int(&c->out, have);
    else
        redis_err(c, "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)");
    return true;
}

static const redis_cmd_t commands[] = {
    { "client", -2, 0, "@slow", 0, 0, 0, client_command, client_subs },
    { "command", -1, CMD_FLAGS, "@slow @connection", 0, 0, 0, command_command, command_subs },
    { "info", -1, CMD_FLAGS, "@slow @dangerous", 0, 0, 0, info_command, NULL },
    { "wait", 3, REDIS_CF_NOSCRIPT, "@slow @connection", 0, 0, 0, wait_command, NULL },
};
REDIS_COMMANDS(server);
