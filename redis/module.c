/* module.c - what the module command groups share (redis_int.h): the
 * argument and reply helpers RedisBloom's groups (cmds_bloom.c,
 * cmds_cuckoo.c, cmds_cms.c, cmds_topk.c, cmds_tdigest.c) and
 * RedisTimeSeries's (cmds_ts.c, cmds_ts_query.c) read and answer with. */
#include <string.h>
#include <strings.h>

#include "cmd/keys_ops.h"
#include "redis/redis_int.h"
#include "resp/reply.h"

void redis_mod_arity(redis_conn_t *c, const char *name)
{
    redis_err(c, "ERR wrong number of arguments for '%s' command", name);
}

bool redis_word_is(const resp_arg_t *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

int redis_word_index(const resp_cmd_t *cmd, const char *s) { return redis_word_index_from(cmd, s, 0); }

int redis_word_index_from(const resp_cmd_t *cmd, const char *s, size_t from)
{
    for (size_t i = from; i < cmd->argc; i++)
        if (redis_word_is(&cmd->argv[i], s))
            return (int)i;
    return -1;
}

int redis_mod_key_state(redis_conn_t *c, const resp_arg_t *k, const char *type)
{
    cmd_key_info_res_t info;
    int f = redis_key_info(c, k, &info);
    if (f <= 0)
        return f;
    return strcmp(info.type, type) == 0 ? 1 : 2;
}

void redis_mod_arg_error(redis_conn_t *c, const redis_mod_keys_t *m, const resp_arg_t *k, bool creating,
                         const char *msg)
{
    int s = redis_mod_key_state(c, k, m->type);
    if (s < 0)
        return;
    if (creating && (s == 1 || (s == 2 && !m->create_wrongtype)))
        redis_err(c, "%s", m->exists);
    else if (s == 2)
        redis_err(c, "%s", REDIS_ERR_WRONGTYPE);
    else if (!creating && s == 0)
        redis_err(c, "%s", m->missing);
    else
        redis_err(c, "%s", msg);
}

void redis_mod_status_err(redis_conn_t *c, const cmd_err_t *e)
{
    if (e->code == CMD_E_WRONGTYPE)
        redis_err(c, REDIS_ERR_WRONGTYPE);
    else if (e->code == CMD_E_EXISTS)
        redis_err(c, "ERR item exists");
    else if (e->code == CMD_E_NOT_FOUND)
        redis_err(c, "ERR not found");
}

void redis_reply_field(resp_out_t *o, const char *name, long long v)
{
    resp_reply_simple(o, name, strlen(name));
    resp_reply_int(o, v);
}

/* n booleans (1/0 in RESP2, true/false in RESP3), in an array when
 * `array`, else the one alone. */
static void reply_bools(resp_out_t *o, const bool *v, size_t n, bool array)
{
    if (array)
        resp_reply_array(o, n);
    for (size_t i = 0; i < n; i++)
        resp_reply_bool(o, v[i]);
}

void redis_mod_exists(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, bool *found, size_t n,
                      bool multi)
{
    cmd_err_t e;
    if (redis_run_handled(c, def, args, res, REDIS_H_WRONGTYPE, &e) || e.code == CMD_E_WRONGTYPE) {
        if (e.code == CMD_E_WRONGTYPE)
            memset(found, 0, n * sizeof(*found));
        reply_bools(redis_conn_out(c), found, n, multi);
    }
}
