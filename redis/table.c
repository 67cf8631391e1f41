/* table.c - the Redis protocol's commands of tally, by name (redis_int.h):
 * every group's rows (cmds_<group>.c, conn.c), listed at build time by
 * tools/registry.sh, sorted once and looked up by binary search.  A
 * command is here only when it answers as Redis (or the module that has
 * it) does; anything else gets Redis's unknown-command error. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "redis/redis_int.h"

#define REGISTRY(g) extern const redis_group_t g;
#include "redis_groups.inc"
#undef REGISTRY
#define REGISTRY(g) &g,
static const redis_group_t *const groups[] = {
#include "redis_groups.inc"
};
#undef REGISTRY

const char *const redis_cf_names[REDIS_CF_COUNT] = {
    "write",        "readonly",     "denyoom", "module",  "admin",   "pubsub",            "noscript",
    "blocking",     "loading",      "stale",   "skip_monitor", "skip_slowlog", "asking",     "fast",
    "no_auth",      "may_replicate", "no_mandatory_keys", "no_async_loading", "no_multi", "movablekeys",
    "allow_busy",
};

static const redis_cmd_t **sorted;
static size_t nsorted;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const redis_cmd_t *const *)a)->name, (*(const redis_cmd_t *const *)b)->name);
}

static void build(void)
{
    size_t n = 0;
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
        n += groups[g]->n;
    sorted = malloc(n * sizeof(*sorted));
    if (!sorted)
        abort();   /* start-up, a few hundred pointers */
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
        for (size_t i = 0; i < groups[g]->n; i++)
            sorted[nsorted++] = &groups[g]->cmds[i];
    qsort(sorted, nsorted, sizeof(*sorted), by_name);
    for (size_t i = 1; i < nsorted; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0)
            abort();   /* two rows of one name: a build error the tests catch */
}

const redis_cmd_t *const *redis_cmd_all(size_t *n)
{
    pthread_once(&once, build);
    *n = nsorted;
    return sorted;
}

const char *redis_cmd_group(const redis_cmd_t *rc)
{
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
        if (rc >= groups[g]->cmds && rc < groups[g]->cmds + groups[g]->n)
            return groups[g]->name;
    return "";
}

const redis_cmd_t *redis_cmd_lookup(const char *name, size_t len)
{
    pthread_once(&once, build);
    size_t lo = 0, hi = nsorted;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *m = sorted[mid]->name;
        size_t mlen = strlen(m);
        int d = strncasecmp(m, name, mlen < len ? mlen : len);
        if (d == 0)
            d = (mlen > len) - (mlen < len);
        if (d == 0)
            return sorted[mid];
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
