/* conn.c - see conn.h and redis_int.h: a connection's commands from argv
 * to reply, the connection commands, and running an operation. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/admit.h"
#include "cmd/keys_ops.h"
#include "redis/redis_int.h"

#define ERR_WRONGPASS "WRONGPASS invalid username-password pair or user is disabled."
#define ERR_NOAUTH "NOAUTH Authentication required."

/* ------------------------------------------------------------------------ */
/* Replies                                                                  */
/* ------------------------------------------------------------------------ */

void redis_err(redis_conn_t *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(msg))
        n = (int)sizeof(msg) - 1;
    resp_reply_error(&c->out, msg, (size_t)n);
}

void redis_ok(redis_conn_t *c) { resp_reply_simple(&c->out, "OK", 2); }

static void bulk_str(redis_conn_t *c, const char *s) { resp_reply_bulk(&c->out, s, strlen(s)); }

/* An argument as Redis's "%s" prints it: up to its first NUL, at most max bytes. */
static int shown(const resp_arg_t *a, size_t max)
{
    const char *z = memchr(a->ptr, '\0', a->len);
    size_t n = z ? (size_t)(z - a->ptr) : a->len;
    return (int)(n < max ? n : max);
}

/* ------------------------------------------------------------------------ */
/* Numbers                                                                  */
/* ------------------------------------------------------------------------ */

bool redis_ll(const resp_arg_t *a, long long *v)
{
    const char *p = a->ptr;
    size_t n = a->len;
    if (n == 0 || n > 20)
        return false;
    if (n == 1 && p[0] == '0') {
        *v = 0;
        return true;
    }
    bool neg = p[0] == '-';
    size_t i = neg;
    if (i == n || p[i] < '1' || p[i] > '9')
        return false;
    unsigned long long x = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        unsigned d = (unsigned)(p[i] - '0');
        if (x > (~0ULL - d) / 10)
            return false;
        x = x * 10 + d;
    }
    if (neg) {
        if (x > (unsigned long long)INT64_MAX + 1)
            return false;
        *v = x == (unsigned long long)INT64_MAX + 1 ? INT64_MIN : -(long long)x;
    } else {
        if (x > (unsigned long long)INT64_MAX)
            return false;
        *v = (long long)x;
    }
    return true;
}

bool redis_double(const resp_arg_t *a, double *v)
{
    char small[128], *buf = small;
    if (a->len == 0 || isspace((unsigned char)a->ptr[0]))
        return false;
    if (a->len >= sizeof(small) && !(buf = malloc(a->len + 1)))
        return false;
    memcpy(buf, a->ptr, a->len);
    buf[a->len] = '\0';
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    bool ok = (size_t)(end - buf) == a->len && !isnan(d) &&
              !(errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || fpclassify(d) == FP_ZERO));
    if (buf != small)
        free(buf);
    if (ok)
        *v = d;
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Running an operation                                                     */
/* ------------------------------------------------------------------------ */

/* cmd_err_t in Redis's forms (cmd/err.h has the codes). */
void redis_answer_err(redis_conn_t *c, const cmd_err_t *e)
{
    switch (e->code) {
    case CMD_E_WRONGTYPE:
        redis_err(c, "WRONGTYPE Operation against a key holding the wrong kind of value");
        break;
    case CMD_E_FORBIDDEN:
        redis_err(c, "NOPERM %s", e->message);
        break;
    case CMD_E_UNAUTHORIZED:
        redis_err(c, "%s", ERR_NOAUTH);
        break;
    case CMD_E_OUT_OF_MEMORY:
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        break;
    case CMD_E_READONLY:
        redis_err(c, "READONLY You can't write against a read only replica.");
        break;
    case CMD_E_MOVED:
    case CMD_E_ASK:
        redis_cluster_redirect(c, e);
        break;
    case CMD_E_CROSSSLOT:
        redis_err(c, "CROSSSLOT Keys in request don't hash to the same slot");
        break;
    case CMD_E_TRYAGAIN:
        redis_err(c, "TRYAGAIN Multiple keys request during rehashing of slot");
        break;
    default:
        redis_err(c, "ERR %s", e->message);
        break;
    }
}

struct first_key {
    const char *key;
    size_t len;
    bool set;
};

static bool visit_first(void *ud, const char *key, size_t len)
{
    struct first_key *k = ud;
    k->key = key;
    k->len = len;
    k->set = true;
    return false;   /* the first one is enough */
}

/* Redis keeps counters, bit strings, HyperLogLogs and redis-cell's state
 * in strings, where tally has a type each: a command of one on another's
 * key fails in Redis with the string's words (INCR on a HyperLogLog: "value
 * is not an integer"), not WRONGTYPE's.  True when the key holds one of
 * `types` (space-separated names of core's types), and the caller may
 * read its type. */
static bool key_typed(redis_conn_t *c, const char *key, size_t klen, const char *types)
{
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, c->cfg->srv, c->cfg->hooks.now_ns(), false, 0);
    ctx.token = c->token;
    ctx.what_verb = "";
    ctx.what_name = CMD_KEY_INFO.name;
    ctx.hold = c->exec ? &c->exec->hold : NULL;
    cmd_key_args_t a = { key, klen };
    cmd_key_info_res_t r;
    cmd_admission_t adm = { .access = CMD_KEY_INFO.access, .key = key, .klen = klen };
    bool ok = cmd_admit(&ctx, &adm) && cmd_call(&ctx, &CMD_KEY_INFO, &a, &r);
    cmd_ctx_end(&ctx);
    if (!ok)
        return false;
    size_t n = strlen(r.type);
    for (const char *p = types; *p;) {
        size_t w = strcspn(p, " ");
        if (w == n && memcmp(p, r.type, n) == 0)
            return true;
        p += w + (p[w] == ' ');
    }
    return false;
}

bool redis_run(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, bool *missing)
{
    cmd_err_t e;
    if (missing)
        *missing = false;
    bool ok = redis_run_handled(c, def, args, res, missing ? 1u << CMD_E_NOT_FOUND : 0, &e);
    if (!ok && missing && e.code == CMD_E_NOT_FOUND)
        *missing = true;
    return ok;
}

bool redis_run_handled(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, unsigned handled,
                       cmd_err_t *err)
{
    const redis_hooks_t *hk = &c->cfg->hooks;
    err->code = CMD_E__COUNT;
    bool loading = false;
    if (c->exec) {   /* EXEC entered the gate for its whole queue */
        loading = c->exec->loading;
    } else if (hk->enter && !hk->enter(hk->ud, &loading)) {
        redis_err(c, "LOADING Redis is loading the dataset in memory");
        return false;
    }
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, c->cfg->srv, hk->now_ns(), false, 0);
    ctx.token = c->token;
    ctx.what_verb = "";
    ctx.what_name = def->name;
    ctx.front = c;
    ctx.hold = c->exec && !loading ? &c->exec->hold : NULL;
    struct first_key k = { NULL, 0, false };
    if (def->keys)
        def->keys(args, visit_first, &k);
    bool writes = (def->flags & CMD_F_WRITE) != 0;
    cmd_admission_t adm = { .access = def->access, .key = k.set ? k.key : NULL, .klen = k.len, .writes = writes,
                            .loading = loading };
    if (writes)
        adm.journal_bytes = 2 * (64 + (uint64_t)c->cmd_bytes) + 4096;
    bool ok = redis_cluster_admit(c, &ctx, def, args) && cmd_admit(&ctx, &adm) && cmd_call(&ctx, def, args, res);
    uint64_t lsn = ctx.journal_lsn, pos = ctx.repl_pos;
    cmd_err_t *e = &ctx.err;
    cmd_ctx_end(&ctx);
    if (hk->leave && !loading && !c->exec)
        hk->leave(hk->ud);
    if (!ok) {
        if (handled & (1u << e->code))
            *err = *e;
        else if (e->code == CMD_E_WRONGTYPE && c->string_types && k.set && !loading &&
                 key_typed(c, k.key, k.len, c->string_types))
            redis_err(c, "%s", c->string_err);
        else
            redis_answer_err(c, e);
        return false;
    }
    if (c->exec) {   /* EXEC waits once, its locks released */
        if (lsn > c->exec->lsn)
            c->exec->lsn = lsn;
        if (pos > c->exec->pos)
            c->exec->pos = pos;
        return true;
    }
    if ((lsn || pos) && hk->durable) {   /* waited for at the batch's end (settle) */
        if (!c->wait_pending) {
            c->wait_pending = true;
            c->wait_from = c->out.len;   /* this command's reply comes next */
        }
        if (lsn > c->wait_lsn)
            c->wait_lsn = lsn;
        if (pos > c->wait_pos)
            c->wait_pos = pos;
    }
    return true;
}

bool redis_run_keep(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, cmd_err_t *err)
{
    return redis_run_handled(c, def, args, res, ~0u, err);
}

bool redis_items(redis_conn_t *c, const resp_cmd_t *cmd, size_t from)
{
    size_t n = cmd->argc > from ? cmd->argc - from : 0;
    if (n > c->scratch_cap) {
        size_t cap = c->scratch_cap ? c->scratch_cap : 16;
        while (cap < n)
            cap *= 2;
        const char **p = realloc(c->ptrs, cap * sizeof(*p));
        if (p)
            c->ptrs = p;
        size_t *l = p ? realloc(c->lens, cap * sizeof(*l)) : NULL;
        if (!p || !l) {
            redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
            return false;
        }
        c->lens = l;
        c->scratch_cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        c->ptrs[i] = cmd->argv[from + i].ptr;
        c->lens[i] = cmd->argv[from + i].len;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Authentication                                                           */
/* ------------------------------------------------------------------------ */

static bool auth_on(const redis_conn_t *c) { return c->cfg->srv->auth != NULL; }

/* The user CLIENT LIST shows (read by other loops, under the registry's lock). */
static void set_user(redis_conn_t *c)
{
    redis_clients_t *r = c->cfg->clients;
    if (r)
        pthread_mutex_lock(&r->mu);
    snprintf(c->user, sizeof(c->user), "%s", c->token ? c->token->name : "default");
    if (r)
        pthread_mutex_unlock(&r->mu);
}

static void deauth(redis_conn_t *c)
{
    cmd_tokens_release(c->tokens);
    c->tokens = NULL;
    c->token = NULL;
    c->authed = !auth_on(c);
    resp_parser_require_auth(c->parser, !c->authed);
    set_user(c);
}

static const char *client_addr(void *ud)
{
    const redis_conn_t *c = ud;
    return c->addr;
}

/* AUTH's check: the token, and the name when given (the token's own, or
 * Redis's "default").  Answers nothing on success; else answers why. */
static bool authenticate(redis_conn_t *c, const resp_arg_t *user, const resp_arg_t *pass)
{
    if (!auth_on(c)) {   /* Redis's default user without a password */
        if (user && !(user->len == 7 && memcmp(user->ptr, "default", 7) == 0)) {
            redis_err(c, ERR_WRONGPASS);
            return false;
        }
        return true;
    }
    cmd_tokens_t *set = NULL;
    const cmd_token_t *t = NULL;
    cmd_err_t err;
    uint64_t gen = cmd_auth_generation(c->cfg->srv->auth);   /* before: a reload after it is seen */
    if (!cmd_auth_identify(c->cfg->srv->auth, pass->ptr, pass->len, client_addr, c, c->cfg->hooks.now_ns(), &set,
                           &t, &err)) {
        if (err.code == CMD_E_UNAUTHORIZED)
            redis_err(c, ERR_WRONGPASS);
        else
            redis_err(c, "ERR %s", err.message);
        return false;
    }
    if (user && !(user->len == 7 && memcmp(user->ptr, "default", 7) == 0) &&
        !(strlen(t->name) == user->len && memcmp(t->name, user->ptr, user->len) == 0)) {
        cmd_tokens_release(set);
        redis_err(c, ERR_WRONGPASS);
        return false;
    }
    cmd_tokens_release(c->tokens);
    c->tokens = set;
    c->token = t;
    c->auth_gen = gen;
    c->authed = true;
    resp_parser_require_auth(c->parser, false);
    set_user(c);
    return true;
}

/* After a reload of --tokens (SIGHUP, POST /admin/reload), as HTTP checks
 * each request's token against the set in force: the connection's token
 * with its new scopes and prefixes, or, when the reload removed it, no
 * token: the connection is back to before AUTH (NOAUTH until it
 * authenticates again). */
static void auth_recheck(redis_conn_t *c)
{
    cmd_auth_t *a = c->cfg->srv->auth;
    uint64_t gen = cmd_auth_generation(a);
    if (gen == c->auth_gen)
        return;
    cmd_tokens_t *set;
    const cmd_token_t *t;
    if (!cmd_auth_refind(a, c->token, &set, &t)) {
        deauth(c);
        return;
    }
    cmd_tokens_release(c->tokens);
    c->tokens = set;
    c->token = t;
    c->auth_gen = gen;
    set_user(c);
}

static void auth_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc > 3) {
        redis_err(c, "ERR syntax error");
        return;
    }
    if (cmd->argc == 2 && !auth_on(c)) {
        redis_err(c, "ERR AUTH <password> called without any password configured for the default user. "
                     "Are you sure your configuration is correct?");
        return;
    }
    if (cmd->argc == 2 ? authenticate(c, NULL, &cmd->argv[1]) : authenticate(c, &cmd->argv[1], &cmd->argv[2]))
        redis_ok(c);
}

/* ------------------------------------------------------------------------ */
/* Connection commands                                                      */
/* ------------------------------------------------------------------------ */

static void ping_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (cmd->argc > 2) {
        redis_err(c, "ERR wrong number of arguments for 'ping' command");
        return;
    }
    if (cmd->argc == 2)
        resp_reply_bulk(&c->out, cmd->argv[1].ptr, cmd->argv[1].len);
    else
        resp_reply_simple(&c->out, "PONG", 4);
}

static void echo_command(redis_conn_t *c, const resp_cmd_t *cmd) { resp_reply_bulk(&c->out, cmd->argv[1].ptr, cmd->argv[1].len); }

static void select_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long id;
    if (!redis_ll(&cmd->argv[1], &id))
        redis_err(c, "ERR value is not an integer or out of range");
    else if (id < INT32_MIN || id > INT32_MAX)
        redis_err(c, "ERR value is out of range, value must between -2147483648 and 2147483647");
    else if (id != 0)
        redis_err(c, "ERR DB index is out of range");
    else
        redis_ok(c);
}

static void quit_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    redis_ok(c);
    c->close_after = true;
}

bool redis_set_name(redis_conn_t *c, const resp_arg_t *a)
{
    for (size_t i = 0; i < a->len; i++)
        if (a->ptr[i] < '!' || a->ptr[i] > '~') {
            redis_err(c, "ERR Client names cannot contain spaces, newlines or special characters.");
            return false;
        }
    if (a->len >= sizeof(c->name)) {
        redis_err(c, "ERR tally keeps client names of at most %zu bytes", sizeof(c->name) - 1);
        return false;
    }
    redis_clients_t *r = c->cfg->clients;
    if (r)
        pthread_mutex_lock(&r->mu);
    memcpy(c->name, a->ptr, a->len);
    c->name[a->len] = '\0';
    if (r)
        pthread_mutex_unlock(&r->mu);
    return true;
}

static void reset_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    redis_multi_discard(c);
    resp_out_set_proto(&c->out, 2);
    redis_clients_t *r = c->cfg->clients;
    if (r)
        pthread_mutex_lock(&r->mu);
    c->name[0] = c->lib_name[0] = c->lib_ver[0] = '\0';
    if (r)
        pthread_mutex_unlock(&r->mu);
    c->readonly = c->asking = false;
    deauth(c);
    resp_reply_simple(&c->out, "RESET", 5);
}

static bool eq_ci(const resp_arg_t *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

static void hello_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    long long ver = 0;
    size_t j = 1;
    if (cmd->argc >= 2) {
        if (!redis_ll(&cmd->argv[1], &ver)) {
            redis_err(c, "ERR Protocol version is not an integer or out of range");
            return;
        }
        if (ver < 2 || ver > 3) {
            redis_err(c, "NOPROTO unsupported protocol version");
            return;
        }
        j = 2;
    }
    const resp_arg_t *user = NULL, *pass = NULL, *name = NULL;
    for (; j < cmd->argc; j++) {
        size_t more = cmd->argc - 1 - j;
        const resp_arg_t *opt = &cmd->argv[j];
        if (eq_ci(opt, "auth") && more >= 2) {
            user = &cmd->argv[j + 1];
            pass = &cmd->argv[j + 2];
            j += 2;
        } else if (eq_ci(opt, "setname") && more) {
            name = &cmd->argv[++j];
        } else {
            redis_err(c, "ERR Syntax error in HELLO option '%.*s'", shown(opt, 1024), opt->ptr);
            return;
        }
    }
    if (user && !authenticate(c, user, pass))
        return;
    if (!c->authed) {
        redis_err(c, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
                     "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
                     "protocol version at the same time");
        return;
    }
    if (name && !redis_set_name(c, name))
        return;
    if (ver)
        resp_out_set_proto(&c->out, (int)ver);
    const cmd_hooks_t *h = &c->cfg->srv->hooks;
    const char *role = h->role ? h->role(h->ud) : "primary";
    resp_reply_map(&c->out, 7);
    bulk_str(c, "server");
    bulk_str(c, "tally");
    bulk_str(c, "version");
    bulk_str(c, c->cfg->version);
    bulk_str(c, "proto");
    resp_reply_int(&c->out, c->out.proto);
    bulk_str(c, "id");
    resp_reply_int(&c->out, (long long)c->id);
    bulk_str(c, "mode");
    bulk_str(c, c->cfg->srv->cluster ? "cluster" : "standalone");
    bulk_str(c, "role");
    bulk_str(c, strcmp(role, "primary") == 0 ? "master" : "replica");
    bulk_str(c, "modules");
    resp_reply_array(&c->out, 0);
}

/* ------------------------------------------------------------------------ */
/* The connection                                                           */
/* ------------------------------------------------------------------------ */

static bool parser_mem(void *ud, size_t held, size_t want)
{
    (void)ud;
    (void)held;
    (void)want;
    return true;   /* bounded by the limits (resp/parse.h); counted in redis_conn_mem */
}

redis_conn_t *redis_conn_new(const redis_cfg_t *cfg, uint64_t id, const char *addr)
{
    redis_conn_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cfg = cfg;
    c->id = id;
    if (addr)
        snprintf(c->addr, sizeof(c->addr), "%s", addr);
    c->parser = resp_parser_new(&cfg->limits, parser_mem, c);
    if (!c->parser) {
        free(c);
        return NULL;
    }
    resp_out_init(&c->out, cfg->out_limit, 2);
    deauth(c);
    c->fd = -1;
    c->created_ns = cfg->hooks.mono_ns ? cfg->hooks.mono_ns() : 0;
    atomic_init(&c->last_ns, c->created_ns);
    atomic_init(&c->last_cmd, "NULL");
    atomic_init(&c->qbuf, 0);
    atomic_init(&c->omem, 0);
    atomic_init(&c->proto, 2);
    atomic_init(&c->commands, 0);
    if (cfg->clients)
        redis_clients_add(cfg->clients, c);
    return c;
}

void redis_conn_set_socket(redis_conn_t *c, int fd, const char *peer, const char *local)
{
    redis_clients_t *r = c->cfg->clients;
    if (r)
        pthread_mutex_lock(&r->mu);
    c->fd = fd;
    snprintf(c->peer, sizeof(c->peer), "%s", peer ? peer : "");
    snprintf(c->local, sizeof(c->local), "%s", local ? local : "");
    if (r)
        pthread_mutex_unlock(&r->mu);
}

void redis_conn_free(redis_conn_t *c)
{
    if (!c)
        return;
    redis_multi_discard(c);
    if (c->cfg->clients)
        redis_clients_remove(c->cfg->clients, c);
    cmd_tokens_release(c->tokens);
    resp_parser_free(c->parser);
    resp_out_free(&c->out);
    free(c->ptrs);
    free(c->lens);
    free(c);
}

resp_out_t *redis_conn_out(redis_conn_t *c) { return &c->out; }

size_t redis_conn_mem(const redis_conn_t *c)
{
    return sizeof(*c) + resp_parser_mem(c->parser) + c->out.cap + c->queue_bytes +
           c->queue_cap * sizeof(*c->queue) +
           c->scratch_cap * (sizeof(*c->ptrs) + sizeof(*c->lens));
}

static void unknown(redis_conn_t *c, const resp_cmd_t *cmd)
{
    char args[160];
    size_t n = 0;
    for (size_t i = 1; i < cmd->argc && n < 128; i++) {
        int w = snprintf(args + n, sizeof(args) - n, "'%.*s' ", shown(&cmd->argv[i], 128 - n), cmd->argv[i].ptr);
        if (w < 0)
            break;
        n += (size_t)w;
    }
    args[n] = '\0';
    redis_err(c, "ERR unknown command '%.*s', with args beginning with: %s", shown(&cmd->argv[0], 128),
              cmd->argv[0].ptr, args);
}

void redis_call_row(redis_conn_t *c, const redis_cmd_t *rc, const resp_cmd_t *cmd)
{
    size_t bytes = 0;
    for (size_t i = 0; i < cmd->argc; i++)
        bytes += cmd->argv[i].len + 16;
    c->cmd_bytes = bytes;
    c->string_types = NULL;
    c->asking_now = c->asking;   /* ASKING holds for the one command after it */
    c->asking = false;
    atomic_store_explicit(&c->last_cmd, rc->name, memory_order_relaxed);
    if (!redis_cluster_route(c, rc, cmd))
        return;
    rc->fn(c, cmd);
}

/* A command read: its row, arity and caller checked (a refusal while MULTI
 * queues marks the transaction, so that EXEC aborts), then queued or run. */
static void run(redis_conn_t *c, const resp_cmd_t *cmd, const redis_cmd_t *rc)
{
    if (!rc) {
        unknown(c, cmd);
        redis_multi_refused(c);
        return;
    }
    if ((rc->arity > 0 && (size_t)rc->arity != cmd->argc) || (rc->arity < 0 && cmd->argc < (size_t)-rc->arity)) {
        redis_err(c, "ERR wrong number of arguments for '%s' command", rc->name);
        redis_multi_refused(c);
        return;
    }
    if (c->token)
        auth_recheck(c);
    if (!c->authed && !(rc->flags & REDIS_CF_NO_AUTH)) {
        redis_err(c, ERR_NOAUTH);
        redis_multi_refused(c);
        return;
    }
    if (redis_multi_queue(c, rc, cmd))
        return;
    redis_call_row(c, rc, cmd);
}

/* The outcome of a reply at out.buf[at..]: "ok", or an error's code (its
 * first word). */
static void log_outcome(const redis_conn_t *c, size_t at, redis_log_line_t *line)
{
    const char *r = c->out.buf + at;
    if (c->out.len > at && r[0] == '-') {
        size_t w = 1, max = c->out.len - at;
        while (w < max && w < 33 && r[w] != ' ' && r[w] != '\r')
            w++;
        line->outcome = r + 1;
        line->outcome_len = w - 1;
    }
}

/* The access log's line of a command answered from out.buf[at..]. */
static void log_command(redis_conn_t *c, const resp_cmd_t *cmd, const redis_cmd_t *rc, size_t at, int64_t took)
{
    char name[96];
    size_t n = 0;
    if (rc) {
        n = (size_t)snprintf(name, sizeof(name), "%s", rc->name);
        if (rc->subs && cmd->argc > 1) {   /* "client|list" */
            const resp_arg_t *sub = &cmd->argv[1];
            name[n++] = '|';
            for (size_t i = 0; i < sub->len && n < sizeof(name) - 1; i++)
                name[n++] = (char)((sub->ptr[i] >= 'A' && sub->ptr[i] <= 'Z') ? sub->ptr[i] + 32 : sub->ptr[i]);
        }
    } else {
        n = cmd->argv[0].len < sizeof(name) ? cmd->argv[0].len : sizeof(name);
        memcpy(name, cmd->argv[0].ptr, n);
    }
    redis_log_line_t line = { c->addr, c->token ? c->token->name : NULL, name, n, NULL, 0, "ok", 2, took };
    if (rc && rc->first > 0 && (size_t)rc->first < cmd->argc) {
        line.key = cmd->argv[rc->first].ptr;
        line.key_len = cmd->argv[rc->first].len;
    }
    log_outcome(c, at, &line);
    c->cfg->hooks.log(c->cfg->hooks.ud, &line);
}

static void dispatch(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const redis_cmd_t *rc = redis_cmd_lookup(cmd->argv[0].ptr, cmd->argv[0].len);
    const redis_hooks_t *hk = &c->cfg->hooks;
    atomic_store_explicit(&c->commands, atomic_load_explicit(&c->commands, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (!hk->log || !hk->log_on(hk->ud)) {
        run(c, cmd, rc);
        return;
    }
    size_t at = c->out.len;
    int64_t t0 = hk->mono_ns();
    run(c, cmd, rc);
    if (!c->parked)   /* a parked WAIT is logged once answered (redis_conn_resume) */
        log_command(c, cmd, rc, at, hk->mono_ns() - t0);
}

/* The changes fed since the last settle made durable before any of their
 * replies is sent (conn.h): one wait for all of them, so a pipeline of
 * changes - and the changes of every connection a loop served in one
 * round - cost one journal write (one fsync under --fsync always) rather
 * than one each.  When the wait fails, the replies from the first change
 * on are cut, one error says why, and the connection closes: nothing that
 * could be lost was acknowledged. */
bool redis_conn_waiting(const redis_conn_t *c, uint64_t *lsn, uint64_t *pos)
{
    if (!c->wait_pending)
        return false;
    *lsn = c->wait_lsn;
    *pos = c->wait_pos;
    return true;
}

redis_status_t redis_conn_settle(redis_conn_t *c, redis_status_t st)
{
    if (!c->wait_pending)
        return st;
    const redis_hooks_t *hk = &c->cfg->hooks;
    const char *why = NULL;
    bool ok = hk->durable(hk->ud, c->wait_lsn, c->wait_pos, &why);
    c->wait_pending = false;
    c->wait_lsn = c->wait_pos = 0;
    if (ok || st == REDIS_DROP)
        return st;
    c->out.len = c->wait_from;
    c->out.failed = false;
    redis_err(c, "ERR the change could not be made durable: %s", why ? why : "journal unavailable");
    c->close_after = true;
    return resp_out_failed(&c->out) ? REDIS_DROP : REDIS_CLOSE;
}

bool redis_conn_parked(const redis_conn_t *c) { return c->parked; }

bool redis_conn_resume(redis_conn_t *c, bool now)
{
    if (!c->parked)
        return true;
    size_t at = c->out.len;
    if (!redis_wait_resume(c, now))
        return false;
    const redis_hooks_t *hk = &c->cfg->hooks;
    if (hk->log && hk->log_on(hk->ud)) {
        redis_log_line_t line = { c->addr, c->token ? c->token->name : NULL, "wait", 4, NULL, 0, "ok", 2,
                                  hk->mono_ns() - c->park_t0 };
        log_outcome(c, at, &line);
        hk->log(hk->ud, &line);
    }
    atomic_store_explicit(&c->omem, c->out.len, memory_order_relaxed);
    return true;
}

redis_status_t redis_conn_feed(redis_conn_t *c, const char *buf, size_t len, size_t *used)
{
    *used = 0;
    if (resp_out_failed(&c->out))   /* a parked WAIT's answer passed the cap */
        return REDIS_DROP;
    while (!c->close_after && !c->parked) {
        size_t u = 0;
        resp_cmd_t cmd;
        resp_status_t st = resp_parse(c->parser, buf + *used, len - *used, &u, &cmd);
        *used += u;
        if (st == RESP_MORE)
            break;
        if (st == RESP_NOMEM)
            return REDIS_DROP;
        if (st == RESP_ERROR) {
            size_t elen = 0;
            const char *e = resp_parser_error(c->parser, &elen);
            char msg[160];
            int n = snprintf(msg, sizeof(msg), "ERR %.*s", (int)elen, e);
            resp_reply_error(&c->out, msg, n > 0 ? (size_t)n : 0);
            return resp_out_failed(&c->out) ? REDIS_DROP : REDIS_CLOSE;
        }
        dispatch(c, &cmd);
        if (resp_out_failed(&c->out))
            return REDIS_DROP;
    }
    /* what CLIENT LIST shows of this connection on other loops */
    if (c->cfg->hooks.mono_ns)
        atomic_store_explicit(&c->last_ns, c->cfg->hooks.mono_ns(), memory_order_relaxed);
    atomic_store_explicit(&c->qbuf, len - *used, memory_order_relaxed);
    atomic_store_explicit(&c->omem, c->out.len, memory_order_relaxed);
    atomic_store_explicit(&c->proto, c->out.proto, memory_order_relaxed);
    return c->close_after ? REDIS_CLOSE : REDIS_OK;
}

#define CONN_ANY REDIS_CF_NOSCRIPT | REDIS_CF_LOADING | REDIS_CF_STALE | REDIS_CF_FAST | REDIS_CF_NO_AUTH | REDIS_CF_ALLOW_BUSY
#define CONN "@fast @connection"
static const redis_cmd_t commands[] = {
    { "auth", -2, CONN_ANY, CONN, 0, 0, 0, auth_command, NULL },
    { "echo", 2, REDIS_CF_LOADING | REDIS_CF_STALE | REDIS_CF_FAST, CONN, 0, 0, 0, echo_command, NULL },
    { "hello", -1, CONN_ANY, CONN, 0, 0, 0, hello_command, NULL },
    { "ping", -1, REDIS_CF_FAST, CONN, 0, 0, 0, ping_command, NULL },
    { "quit", -1, CONN_ANY, CONN, 0, 0, 0, quit_command, NULL },
    { "reset", 1, CONN_ANY, CONN, 0, 0, 0, reset_command, NULL },
    { "select", 2, REDIS_CF_LOADING | REDIS_CF_STALE | REDIS_CF_FAST, CONN, 0, 0, 0, select_command, NULL },
};
REDIS_COMMANDS(connection);
