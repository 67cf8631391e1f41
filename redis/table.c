/* table.c - the Redis protocol's commands of tally, by name (redis_int.h).
 * A command is here only when it answers as Redis (or redis-cell) does;
 * anything else gets Redis's unknown-command error. */
#include <string.h>
#include <strings.h>

#include "redis/redis_int.h"

static const redis_cmd_t table[] = {
    /* connection */
    { "auth", -2, true, redis_auth },
    { "client", -2, false, redis_client },
    { "echo", 2, false, redis_echo },
    { "hello", -1, true, redis_hello },
    { "ping", -1, false, redis_ping },
    { "quit", -1, true, redis_quit },
    { "reset", 1, true, redis_reset },
    { "select", 2, false, redis_select },
    /* rate limiting (redis-cell checks its own arity) */
    { "cl.throttle", -1, false, redis_cl_throttle },
    /* counters */
    { "decr", 2, false, redis_decr },
    { "decrby", 3, false, redis_decrby },
    { "incr", 2, false, redis_incr },
    { "get", 2, false, redis_get },
    { "incrby", 3, false, redis_incrby },
    /* HyperLogLog */
    { "pfadd", -2, false, redis_pfadd },
    { "pfcount", -2, false, redis_pfcount },
    { "pfmerge", -2, false, redis_pfmerge },
    /* keys */
    { "del", -2, false, redis_del },
    { "exists", -2, false, redis_exists },
    { "expire", -3, false, redis_expire },
    { "expireat", -3, false, redis_expireat },
    { "persist", 2, false, redis_persist },
    { "pexpire", -3, false, redis_pexpire },
    { "pexpireat", -3, false, redis_pexpireat },
    { "pttl", 2, false, redis_pttl },
    { "ttl", 2, false, redis_ttl },
    { "type", 2, false, redis_type },
    { "unlink", -2, false, redis_del },
};

const redis_cmd_t *redis_cmd_lookup(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strlen(table[i].name) == len && strncasecmp(table[i].name, name, len) == 0)
            return &table[i];
    return NULL;
}
