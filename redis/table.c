/* table.c - the Redis protocol's commands of tally, by name (redis_int.h):
 * every group's rows (cmds_<group>.c, conn.c), listed at build time by
 * tools/registry.sh, sorted once (COMMAND lists them in order) and found by
 * name in an open-addressing table of their lowercase names' hashes (every
 * command looks its name up: a binary search of strncasecmp cost more
 * than the INCR it found).  A
 * command is here only when it answers as Redis (or the module that has
 * it) does; anything else gets Redis's unknown-command error. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
static const redis_cmd_t **slots;   /* by hash, linear probing; a power of two >= 4 x rows */
static size_t slot_mask;

#define NAME_MAX_LEN 64   /* longer names are no command's */

/* FNV-1a of the name in lowercase ASCII. */
static uint32_t name_hash(const char *p, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 'A' && ch <= 'Z')
            ch = (unsigned char)(ch + 32);
        h = (h ^ ch) * 16777619u;
    }
    return h;
}
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
    size_t cap = 16;
    while (cap < 4 * nsorted)
        cap *= 2;
    slots = calloc(cap, sizeof(*slots));
    if (!slots)
        abort();
    slot_mask = cap - 1;
    for (size_t i = 0; i < nsorted; i++) {
        size_t at = name_hash(sorted[i]->name, strlen(sorted[i]->name)) & slot_mask;
        while (slots[at])
            at = (at + 1) & slot_mask;
        slots[at] = sorted[i];
    }
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
    if (len == 0 || len > NAME_MAX_LEN)
        return NULL;
    for (size_t at = name_hash(name, len) & slot_mask; slots[at]; at = (at + 1) & slot_mask) {
        const char *m = slots[at]->name;
        size_t i = 0;
        for (; i < len; i++) {
            unsigned char ch = (unsigned char)name[i];
            if (ch >= 'A' && ch <= 'Z')
                ch = (unsigned char)(ch + 32);
            if (m[i] == '\0' || (unsigned char)m[i] != ch)
                break;
        }
        if (i == len && m[len] == '\0')
            return slots[at];
    }
    return NULL;
}
