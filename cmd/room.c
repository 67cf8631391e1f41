/* room.c - see room.h. */
#include <stdlib.h>
#include <string.h>

#include "cmd/journal.h"
#include "cmd/room.h"

/* How many times a write may find its room taken again by others between
 * evicting for it and retaking its locks before it is refused. */
#define ROOM_ATTEMPTS 4

/* The refusal of a write that does not fit under --maxmemory. */
static bool no_room(cmd_ctx_t *ctx, uint64_t extra)
{
    ks_t *ks = ctx->srv->ks;
    const char *policy = ks_evict_policy(ks) == KS_NOEVICTION ? "noeviction" : "cannot evict more";
    if (extra)
        return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL,
                        "memory limit of %llu bytes reached: this write needs %llu more bytes (maxmemory-policy %s)",
                        (unsigned long long)ks_maxmemory(ks), (unsigned long long)extra, policy);
    return cmd_fail(ctx, CMD_E_OUT_OF_MEMORY, NULL, "memory limit of %llu bytes reached (maxmemory-policy %s)",
                    (unsigned long long)ks_maxmemory(ks), policy);
}

/* Journals an eviction as a deletion, in the space evict_one secured. */
static void on_evict(void *ud, const char *key, size_t len) { cmd_journal_eviction(ud, key, len); }

/* Evicts one key (never one of keep's), its deletion's journal space
 * secured first and given back once it is appended.  Returns the bytes
 * freed; 0 with an error set when nothing could be evicted or the journal
 * cannot take it. */
static size_t evict_one(cmd_ctx_t *ctx, uint64_t extra, const cmd_keep_t *keep)
{
    cmd_server_t *srv = ctx->srv;
    const char *err = "journal unavailable";
    if (ctx->hold) {   /* evicting would lock shards besides the transaction's (cmd/keys.h) */
        no_room(ctx, extra);
        return 0;
    }
    if (srv->hooks.journal_reserve && !srv->hooks.journal_reserve(srv->hooks.ud, CMD_EVICT_RECORD_MAX, &err)) {
        cmd_fail(ctx, CMD_E_UNAVAILABLE, NULL,
                 "the change cannot be made durable: no journal space (%s); the request was not applied, retry "
                 "later",
                 err);
        return 0;
    }
    size_t freed = ks_evict_keep(srv->ks, cmd_now_ms(ctx), keep ? keep->keys : NULL, keep ? keep->n : 0, on_evict,
                                 ctx);
    if (srv->hooks.journal_reserve && srv->hooks.journal_release)
        srv->hooks.journal_release(srv->hooks.ud, CMD_EVICT_RECORD_MAX);
    if (!freed)
        no_room(ctx, extra);
    return freed;
}

bool cmd_make_room(cmd_ctx_t *ctx)
{
    if (ctx->replay)
        return true;   /* evictions were journaled as deletions */
    while (ks_over_limit(ctx->srv->ks))
        if (!evict_one(ctx, 0, NULL))
            return false;
    return true;
}

bool cmd_make_room_keeping(cmd_ctx_t *ctx, uint64_t extra, const cmd_keep_t *keep)
{
    if (ctx->replay)
        return true;
    ks_t *ks = ctx->srv->ks;
    uint64_t max = ks_maxmemory(ks), pinned = keep ? keep->bytes : 0;
    if (!max)
        return true;
    while (ks_total_memory(ks) + extra > max) {
        if (extra > max || pinned > max - extra)   /* never fits, whatever is evicted */
            return no_room(ctx, extra);
        if (!evict_one(ctx, extra, keep))
            return false;
    }
    return true;
}

bool cmd_make_room_for(cmd_ctx_t *ctx, uint64_t extra) { return cmd_make_room_keeping(ctx, extra, NULL); }

bool cmd_make_room_for_key(cmd_ctx_t *ctx, uint64_t extra, const char *key, size_t klen, uint64_t bytes)
{
    ks_key_t k = ks_key(ctx->srv->ks, key, klen);
    cmd_keep_t keep = { &k, 1, bytes };
    return cmd_make_room_keeping(ctx, extra, &keep);
}

uint64_t cmd_room_now(const cmd_ctx_t *ctx)
{
    uint64_t max = ks_maxmemory(ctx->srv->ks);
    if (ctx->replay || !max)
        return UINT64_MAX;
    uint64_t used = ks_total_memory(ctx->srv->ks);
    return used < max ? max - used : 0;
}

uint64_t cmd_value_limit(const cmd_ctx_t *ctx)
{
    return ctx->replay || !ctx->srv->limits.max_value ? UINT64_MAX : ctx->srv->limits.max_value;
}

bool cmd_value_fits(cmd_ctx_t *ctx, const char *field, const char *what, uint64_t bytes)
{
    if (bytes <= cmd_value_limit(ctx))
        return true;
    return cmd_fail(ctx, CMD_E_BAD_REQUEST, field,
                    "%s would take %llu bytes, over --max-value-size (%llu bytes a value); nothing was changed", what,
                    (unsigned long long)bytes, (unsigned long long)ctx->srv->limits.max_value);
}

bool cmd_grow(cmd_ctx_t *ctx, const char *field, const char *what, uint64_t reach, uint64_t extra)
{
    return cmd_value_fits(ctx, field, what, reach) && cmd_make_room_for(ctx, extra);
}

bool cmd_room_retry(cmd_ctx_t *ctx, uint64_t extra, const cmd_keep_t *keep, unsigned *attempts)
{
    if (++*attempts > ROOM_ATTEMPTS)
        return no_room(ctx, extra);
    return cmd_make_room_keeping(ctx, extra, keep);
}

bool cmd_answer_fits(cmd_ctx_t *ctx, uint64_t bytes, const char *how)
{
    uint64_t max = ctx->srv->limits.max_answer;
    if (!max || bytes <= max)
        return true;
    return cmd_fail(ctx, CMD_E_BAD_REQUEST, NULL,
                    "the answer would take about %llu bytes, over --max-answer-size (%llu bytes): %s",
                    (unsigned long long)bytes, (unsigned long long)max, how);
}

uint64_t cmd_work_limit(const cmd_server_t *srv)
{
    uint64_t v = srv->limits.max_value;
    return !v || v > UINT64_MAX / CMD_WORK_VALUES ? UINT64_MAX : v * CMD_WORK_VALUES;
}

bool cmd_work_fits(cmd_ctx_t *ctx, const char *field, uint64_t bytes)
{
    uint64_t max = cmd_work_limit(ctx->srv);
    if (ctx->replay || bytes <= max)
        return true;
    return cmd_fail(ctx, CMD_E_BAD_REQUEST, field,
                    "'%s' would make this request read %llu bytes, over what one request may read: %d x "
                    "--max-value-size (%llu bytes); split it into smaller requests",
                    field, (unsigned long long)bytes, CMD_WORK_VALUES, (unsigned long long)max);
}

bool cmd_keys_distinct(const ks_key_t *keys, size_t n, size_t *first)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    size_t *tab = malloc(cap * sizeof(*tab));
    if (!tab)
        return false;
    for (size_t i = 0; i < cap; i++)
        tab[i] = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)keys[i].hash & (cap - 1);
        for (;;) {
            size_t j = tab[h];
            if (j == SIZE_MAX) {
                tab[h] = i;
                first[i] = i;
                break;
            }
            if (keys[j].hash == keys[i].hash && keys[j].len == keys[i].len &&
                !memcmp(keys[j].p, keys[i].p, keys[i].len)) {
                first[i] = j;
                break;
            }
            h = (h + 1) & (cap - 1);
        }
    }
    free(tab);
    return true;
}
