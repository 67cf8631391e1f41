/*
 * limiter.c - the rate-limit engine that /throttle and /hook share: an item
 * (key, algorithm and parameters, or a named policy) parsed from JSON or a
 * query, the decision taken under the key locks (one key, or a batch that is
 * all or nothing), the canonical journal record of a resolved policy, and
 * the answer with its headers: Retry-After, the legacy RateLimit-Limit /
 * -Remaining / -Reset trio, and the IETF draft's RateLimit-Policy and
 * RateLimit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/cluster.h"
#include "api/ratelimit.h"

#define DEFAULT_POLICY_NAME "default"   /* name in the draft headers without a policy */

static const char *const item_fields[] = { "key", "policy", "algorithm", "max_burst", "count_per_period", "period",
                                           "max_count", "capacity", "refill_rate", "quantity", "shadow", NULL };

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */
/* ------------------------------------------------------------------------ */

void rl_item_release(rl_item_t *it)
{
    free(it->key_buf);
    it->key_buf = NULL;
}

bool rl_item_key(rl_item_t *it, const char *prefix, size_t plen, const char *key, size_t klen, api_err_t *err)
{
    const char *why;
    if (!api_key_ok(key, klen, &why)) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "key %s", why);
        return false;
    }
    if (plen == 0) {
        it->key = key;
        it->klen = klen;
        return true;
    }
    if (klen > KS_KEY_MAX - plen) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "key with the policy's prefix '%s' is longer than %d bytes", prefix,
                   KS_KEY_MAX);
        return false;
    }
    it->key_buf = malloc(plen + klen + 1);
    if (!it->key_buf) {
        api_err_set(err, API_E_OUT_OF_MEMORY, NULL, "out of memory");
        return false;
    }
    memcpy(it->key_buf, prefix, plen);
    memcpy(it->key_buf + plen, key, klen);
    it->key_buf[plen + klen] = '\0';
    it->key = it->key_buf;
    it->klen = plen + klen;
    return true;
}

/* The policy's part of an item: its parameters and shadow mode, and the key
 * - `key` with the policy's prefix when given, else built by the policy's
 * template from the request (`rest` as for policy_key) into `room`
 * (KS_KEY_MAX + 1 bytes), or into storage of the item's own if NULL. */
static bool item_of_policy(const policy_t *p, const api_req_t *req, const char *key, size_t klen, const char *rest,
                           size_t rest_len, char *room, rl_item_t *it, api_err_t *err)
{
    it->policy = p;
    it->p = p->params;
    it->shadow = p->shadow;
    if (key)
        return rl_item_key(it, p->prefix, p->prefix_len, key, klen, err);
    if (!room) {
        room = it->key_buf = malloc(KS_KEY_MAX + 1);
        if (!room) {
            api_err_set(err, API_E_OUT_OF_MEMORY, NULL, "out of memory");
            return false;
        }
    }
    if (!policy_key(p, req, rest, rest_len, room, &it->klen, err))
        return false;
    const char *why;
    if (!api_key_ok(room, it->klen, &why)) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "the key policy '%s' built from the request %s", p->name, why);
        return false;
    }
    it->key = room;
    return true;
}

bool rl_item_of_policy(const policy_t *p, const api_req_t *req, const char *rest, size_t rest_len, char *room,
                       rl_item_t *it, api_err_t *err)
{
    memset(it, 0, sizeof(*it));
    it->quantity = 1;
    return item_of_policy(p, req, NULL, 0, rest, rest_len, room, it, err);
}

bool rl_item_parse(api_server_t *srv, const api_req_t *req, const api_fields_t *f, const char *path_key,
                   size_t path_klen, const char *rest, size_t rest_len, bool fields_checked, rl_item_t *it,
                   api_err_t *err)
{
    memset(it, 0, sizeof(*it));
    it->quantity = 1;
    const char *name;
    api_fields_iter_t iter = { 0 };
    if (!fields_checked)
        while ((name = api_fields_next(f, &iter)))
            if (!api_name_listed(item_fields, name)) {
                api_err_set(err, API_E_BAD_REQUEST, name, "unknown field '%s'", name);
                return false;
            }
    api_field_t v;
    if (api_fields_get(f, "quantity", &v)) {
        if (v.type != API_F_INT || v.i < 0) {
            api_err_set(err, API_E_BAD_REQUEST, "quantity", "'quantity' must be an integer >= 0");
            return false;
        }
        it->quantity = v.i;
    }
    api_field_t key;
    bool has_key = api_fields_get(f, "key", &key);
    if (has_key && key.type != API_F_STRING) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "'key' must be a string");
        return false;
    }
    if (api_fields_get(f, "policy", &v)) {
        if (v.type != API_F_STRING) {
            api_err_set(err, API_E_BAD_REQUEST, "policy", "'policy' must be a string");
            return false;
        }
        const policy_t *p = policy_find(srv->policies, v.s);
        if (!p) {
            api_err_set(err, API_E_BAD_REQUEST, "policy", "unknown policy '%s'%s", v.s,
                       srv->policies ? "" : " (no policies file is loaded: tallyd --config FILE)");
            return false;
        }
        iter = (api_fields_iter_t){ 0 };
        while ((name = api_fields_next(f, &iter)))
            if (rl_is_param_name(name) || !strcmp(name, "algorithm") || !strcmp(name, "shadow")) {
                api_err_set(err, API_E_BAD_REQUEST, name, "'%s' cannot be given with 'policy' (the policy sets it)",
                           name);
                return false;
            }
        return item_of_policy(p, req, path_key ? path_key : has_key ? key.s : NULL,
                              path_key ? path_klen : has_key ? key.len : 0, rest, rest_len, NULL, it, err);
    }
    if (!api_fields_bool(f, "shadow", &it->shadow, NULL, err))
        return false;
    if (!path_key && !has_key) {
        api_err_set(err, API_E_BAD_REQUEST, "key", "missing field 'key'");
        return false;
    }
    if (!rl_params_parse(f, &it->p, err))
        return false;
    return rl_item_key(it, NULL, 0, path_key ? path_key : key.s, path_key ? path_klen : key.len, err);
}

/* ------------------------------------------------------------------------ */
/* Journal: the canonical form of resolved items                            */
/* ------------------------------------------------------------------------ */

static char *put_str(char *p, const char *s);

/* `,"name":v` (the comma separates members). */
static char *put_member_i64(char *p, const char *name, int64_t v)
{
    *p++ = ',';
    *p++ = '"';
    p = put_str(p, name);
    *p++ = '"';
    *p++ = ':';
    return api_format_i64(p, v);
}

/* The most item_text writes for an item: the key escaped (6 bytes a byte
 * at most) and the other members, whose names and 20-digit numbers fit in
 * 512 bytes. */
#define ITEM_TEXT_MAX(klen) (512 + API_JSON_STRING_MAX(klen))

/* The canonical request of one item (the key resolved, the parameters
 * spelled out), as JSON text: byte for byte what jansson's tree of the same
 * members printed through api_json_text, written directly (issue 20: the
 * tree cost a third of a /hook request), at p, which has room for
 * ITEM_TEXT_MAX(it->klen) bytes.  Returns the end. */
static char *item_text(char *p, const rl_item_t *it)
{
    p = put_str(p, "{\"key\":");
    p = api_json_string_at(p, it->key, it->klen);
    p = put_str(p, ",\"algorithm\":\"");
    p = put_str(p, throttle_algo_name(it->p.algo));   /* [a-z_]: nothing to escape */
    *p++ = '"';
    const throttle_params_t *tp = &it->p;
    switch (tp->algo) {
    case THROTTLE_GCRA:
        p = put_member_i64(p, "max_burst", tp->u.gcra.max_burst);
        p = put_member_i64(p, "count_per_period", tp->u.gcra.count);
        p = put_member_i64(p, "period", tp->u.gcra.period_ns / NS_PER_SEC);
        break;
    case THROTTLE_SLIDING_LOG:
        p = put_member_i64(p, "max_count", tp->u.log.max_count);
        p = put_member_i64(p, "period", tp->u.log.period_ns / NS_PER_SEC);
        break;
    case THROTTLE_SLIDING_WINDOW:
    case THROTTLE_FIXED_WINDOW:
        p = put_member_i64(p, "max_count", tp->u.win.max_count);
        p = put_member_i64(p, "period", tp->u.win.period_ns / NS_PER_SEC);
        break;
    case THROTTLE_TOKEN_BUCKET: {
        char num[40];
        p = put_member_i64(p, "capacity", tp->u.tb.capacity);
        p = put_str(p, ",\"refill_rate\":");
        api_format_double((double)tp->u.tb.rate_micro / 1e6, num, sizeof(num));
        p = put_str(p, num);
        break;
    }
    }
    p = put_member_i64(p, "quantity", it->quantity);
    if (it->shadow)
        p = put_str(p, ",\"shadow\":true");
    *p++ = '}';
    return p;
}

/* Appends item_text of it to b. */
static void put_item_text(wbuf_t *b, const rl_item_t *it)
{
    if (!wbuf_reserve(b, ITEM_TEXT_MAX(it->klen)))
        return;
    char *start = (char *)b->data + b->len;
    b->len += (size_t)(item_text(start, it) - start);
}

/* An upper bound of the canonical record journal_items writes for these
 * items (0 when it journals the request as received, which the router's
 * reservation covers): per item its members with the longest names and
 * 20-digit numbers in under 512 bytes, the key escaped at most 6 bytes a
 * byte; then the frame and the fixed strings. */
static uint64_t journal_items_bound(const rl_item_t *items, size_t n)
{
    uint64_t bytes = 0;
    bool canonical = false;
    for (size_t i = 0; i < n; i++) {
        canonical |= items[i].policy != NULL;
        bytes += ITEM_TEXT_MAX((uint64_t)items[i].klen);
    }
    return canonical ? bytes + 64 + JOURNAL_REQUEST_FIXED + sizeof("/throttle") + sizeof("application/json") : 0;
}

/* Journals the change (under the key locks). */
static void journal_items(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const rl_item_t *items,
                          size_t n, bool batch)
{
    if (req->replay || !srv->hooks.journal)
        return;
    bool canonical = false;
    for (size_t i = 0; i < n; i++)
        if (items[i].policy)
            canonical = true;
    if (!canonical) {
        api_journal(srv, req, resp);
        return;
    }
    /* one item with a key of usual length (the gateway's case) is written
     * on the stack */
    char one[2048];
    const char *text = one;
    size_t len;
    wbuf_t b = WBUF_INIT;
    if (!batch && ITEM_TEXT_MAX((uint64_t)items[0].klen) <= sizeof(one)) {
        len = (size_t)(item_text(one, &items[0]) - one);
    } else {
        if (batch) {
            static const char head[] = "{\"requests\":[";
            wbuf_put_bytes(&b, head, sizeof(head) - 1);
            for (size_t i = 0; i < n; i++) {
                if (i)
                    wbuf_put_u8(&b, ',');
                put_item_text(&b, &items[i]);
            }
            wbuf_put_bytes(&b, "]}", 2);
        } else {
            put_item_text(&b, &items[0]);
        }
        text = (const char *)b.data;
        len = b.len;
    }
    if (!b.oom)
        api_journal_as(srv, req, resp, API_POST, "/throttle", NULL, "application/json", text, len);
    wbuf_free(&b);
}

/* ------------------------------------------------------------------------ */
/* The engine                                                               */
/* ------------------------------------------------------------------------ */

static bool algo_conflict(api_resp_t *resp, const rl_item_t *it, const throttle_t *t)
{
    if (!t || throttle_algo(t) == it->p.algo)
        return false;
    api_error(resp, API_E_WRONGTYPE,
              "key '%.*s' holds %s limiter state; this request uses %s (DELETE /throttle/{key} resets it)",
              (int)(it->klen > 200 ? 200 : it->klen), it->key, throttle_algo_name(throttle_algo(t)),
              throttle_algo_name(it->p.algo));
    return true;
}

static int64_t expire_ms_of(int64_t expire_ns) { return rl_ceil_div(expire_ns, NS_PER_MS); }

static void count_metrics(const api_req_t *req, const rl_item_t *items, size_t n)
{
    if (req->replay)
        return;
    for (size_t i = 0; i < n; i++)
        if (items[i].policy)
            policy_count(items[i].policy, items[i].r.allowed ? POLICY_ALLOWED
                                          : items[i].shadow  ? POLICY_SHADOW_LIMITED
                                                             : POLICY_LIMITED);
}

/* The bytes committing `quantity` on `t` (NULL: a new key of klen bytes)
 * adds to the keyspace, and the size the state reaches. */
static uint64_t commit_growth(const throttle_t *t, const rl_item_t *it, int64_t now_ns, size_t *after)
{
    *after = throttle_bytes_after(t, &it->p, now_ns, it->quantity);
    size_t before = t ? throttle_type.size(t) : 0;
    uint64_t add = *after > before ? *after - before : 0;
    return t ? add : add + ks_entry_overhead(it->klen);
}

static bool run_one(api_server_t *srv, const api_req_t *req, api_resp_t *resp, rl_item_t *it)
{
    for (unsigned attempts = 0;;) {
        api_key_t h;
        if (!api_key_open(srv, req, resp, it->key, it->klen, &throttle_type, API_WRITE, &h))
            return false;
        throttle_t *t = api_key_value(&h);
        if (algo_conflict(resp, it, t)) {
            api_key_close(&h, false);
            return false;
        }
        if (throttle_check(t, &it->p, req->now_ns, it->quantity, &it->r)) {
            size_t after;
            uint64_t add = commit_growth(t, it, req->now_ns, &after);
            if (after > api_value_limit(srv, req) || add > api_room_now(srv, req)) {
                /* refused, or room to make without the lock (keeping this
                 * key): then decide again */
                ks_key_t kk = ks_key(srv->ks, it->key, it->klen);
                api_keep_t keep = { &kk, 1, t ? throttle_type.size(t) : 0 };
                api_key_close(&h, false);
                if (!api_value_fits(srv, req, resp, NULL, "the limiter's state", after) ||
                    !api_room_retry(srv, req, resp, add, &keep, &attempts))
                    return false;
                continue;
            }
            int64_t expire_ns;
            if (h.e) {
                if (!throttle_commit(&t, &it->p, req->now_ns, it->quantity, &expire_ns)) {
                    api_key_close(&h, false);
                    api_error(resp, API_E_OUT_OF_MEMORY, "out of memory recording the request");
                    return false;
                }
                ks_entry_changed(srv->ks, h.e);
            } else if (!throttle_commit(&t, &it->p, req->now_ns, it->quantity, &expire_ns) ||
                       !api_key_add(&h, &throttle_type, t, KS_NO_EXPIRY)) {
                throttle_free(t);
                api_key_close(&h, false);
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the limiter");
                return false;
            }
            ks_entry_set_expire(srv->ks, h.e, expire_ms_of(expire_ns));
            journal_items(srv, req, resp, it, 1, false);   /* canonical form: not the request as received */
        }
        api_key_close(&h, false);
        return true;
    }
}

/* Per distinct key of a batch. */
typedef struct slot {
    ks_entry_t *e;               /* stored entry, or NULL */
    throttle_t *work;            /* working copy once the batch changes the key */
    int64_t expire_ns;
    bool added;
} slot_t;

/* What the whole batch may add at most, once what it held so far did not
 * fit: each distinct key's working copy and its state at the most its
 * parameters allow (throttle_bytes_max), so that a batch that can never fit
 * is refused before anything is evicted for it. */
static uint64_t batch_bound(const rl_item_t *items, size_t n, const size_t *slot_of, const slot_t *slots,
                            uint64_t held)
{
    uint64_t *most = calloc(n, sizeof(*most)), bound = 0;
    if (!most)
        return held;
    for (size_t i = 0; i < n; i++) {
        uint64_t b = throttle_bytes_max(&items[i].p);
        if (b > most[slot_of[i]])
            most[slot_of[i]] = b;
    }
    for (size_t i = 0; i < n; i++) {
        if (slot_of[i] != i)
            continue;
        const throttle_t *cur = slots[i].e ? ks_entry_value(slots[i].e) : NULL;
        uint64_t size = cur ? throttle_type.size(cur) : 0;
        bound += cur ? size + (most[i] > size ? most[i] - size : 0) : most[i] + ks_entry_overhead(items[i].klen);
    }
    free(most);
    return bound > held ? bound : held;
}

/* A batch, all or nothing.  The working copies and what the commits add
 * are counted as they are made: when they would pass the room there is
 * (api_room_now), nothing is kept and *more says how many bytes to evict
 * for before trying again (false with no error set). */
static bool run_batch(api_server_t *srv, const api_req_t *req, api_resp_t *resp, rl_item_t *items, size_t n,
                      bool *all, uint64_t *more, uint64_t *pinned)
{
    ks_t *ks = srv->ks;
    int64_t now_ms = api_now_ms(req);
    ks_key_t *keys = malloc(n * sizeof(*keys));
    size_t *slot_of = malloc(n * sizeof(*slot_of));
    slot_t *slots = calloc(n, sizeof(*slots));
    bool ok = false;
    if (!keys || !slot_of || !slots) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = ks_key(ks, items[i].key, items[i].klen);
    if (!api_keys_distinct(keys, n, slot_of)) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    api_key_t h;
    if (!api_keys_lock(srv, req, resp, keys, n, &h))
        goto out;
    for (size_t i = 0; i < n; i++)
        if (slot_of[i] == i && !api_keys_find(&h, i, &throttle_type, API_READ, NULL, &slots[i].e))
            goto unlock;
    /* decide in order; later items on a key see what earlier ones recorded */
    *all = true;
    bool changed = false;
    uint64_t room = api_room_now(srv, req), held = 0;   /* held: copies and growth so far */
    for (size_t i = 0; i < n; i++) {
        rl_item_t *it = &items[i];
        slot_t *s = &slots[slot_of[i]];
        const throttle_t *cur = s->work ? s->work : s->e ? ks_entry_value(s->e) : NULL;
        if (algo_conflict(resp, it, cur))
            goto unlock;
        if (!throttle_check(cur, &it->p, req->now_ns, it->quantity, &it->r)) {
            if (!it->r.allowed && !it->shadow)
                *all = false;
            continue;
        }
        size_t after;
        uint64_t add = commit_growth(cur, it, req->now_ns, &after);
        if (!s->work && s->e)
            add += throttle_type.size(cur);   /* the working copy */
        if (!api_value_fits(srv, req, resp, NULL, "the limiter's state", after))
            goto unlock;
        held += add;
        /* with or without --maxmemory, one batch adds at most what one
         * request may read (10 000 sliding logs would take 8 GB) */
        if (!req->replay && held > api_work_limit(srv)) {
            api_error_field(resp, API_E_BAD_REQUEST, "requests",
                            "the batch would add more than %d x --max-value-size (%llu bytes) of limiter state; "
                            "split it into smaller requests",
                            API_WORK_VALUES, (unsigned long long)api_work_limit(srv));
            goto unlock;
        }
        if (held > room) {
            *more = batch_bound(items, n, slot_of, slots, held);
            for (size_t k = 0; k < n; k++)   /* the states it holds, kept while room is made */
                if (slot_of[k] == k && slots[k].e)
                    *pinned += throttle_type.size(ks_entry_value(slots[k].e));
            goto unlock;
        }
        if (!s->work && s->e && !(s->work = throttle_clone(ks_entry_value(s->e)))) {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            goto unlock;
        }
        if (!throttle_commit(&s->work, &it->p, req->now_ns, it->quantity, &s->expire_ns)) {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            goto unlock;
        }
        changed = true;
    }
    if (!*all) {
        /* nothing is recorded: report what the stored state allows now */
        for (size_t i = 0; i < n; i++) {
            rl_item_t *it = &items[i];
            if (!it->r.allowed || it->quantity == 0)
                continue;
            const slot_t *s = &slots[slot_of[i]];
            rl_result_t peek;
            throttle_check(s->e ? ks_entry_value(s->e) : NULL, &it->p, req->now_ns, 0, &peek);
            it->r.remaining = peek.remaining;
            it->r.reset_after_ns = peek.reset_after_ns;
        }
    } else if (changed) {
        /* new keys first: the only step that can fail, undone on failure */
        for (size_t i = 0; i < n; i++) {
            slot_t *s = &slots[i];
            if (!s->work || s->e)
                continue;
            s->e = ks_add(ks, &keys[i], &throttle_type, s->work, KS_NO_EXPIRY, now_ms);
            if (!s->e) {
                for (size_t k = 0; k < i; k++)
                    if (slots[k].added) {
                        ks_entry_delete(ks, slots[k].e);   /* frees the working copy */
                        slots[k].work = NULL;
                        slots[k].e = NULL;
                    }
                api_error(resp, API_E_OUT_OF_MEMORY, "out of memory storing the limiters");
                goto unlock;
            }
            s->added = true;
        }
        for (size_t i = 0; i < n; i++) {
            slot_t *s = &slots[i];
            if (!s->work)
                continue;
            if (!s->added) {
                ks_entry_prepare_write(ks, s->e);
                ks_entry_replace_value(ks, s->e, s->work);
            }
            s->work = NULL;   /* owned by the keyspace now */
            ks_entry_set_expire(ks, s->e, expire_ms_of(s->expire_ns));
        }
        journal_items(srv, req, resp, items, n, true);
    }
    ok = true;
unlock:
    api_key_close(&h, false);   /* journaled in canonical form above */
out:
    if (slots)
        for (size_t i = 0; i < n; i++)
            if (slots[i].work && !slots[i].added)
                throttle_free(slots[i].work);
    free(slots);
    free(slot_of);
    free(keys);
    return ok;
}

/* The items' keys share one slot this node serves (api_keys_allowed's
 * cluster half; run_batch's api_keys_lock checks it again under the locks). */
static bool cluster_check(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const rl_item_t *items, size_t n)
{
    ks_key_t *keys = calloc(n, sizeof(*keys));
    if (!keys) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        keys[i].p = items[i].key;
        keys[i].len = items[i].klen;
    }
    (void)srv;
    bool ok = api_cmd_answered(req, resp, cmd_cluster_keys_check(req->ctx, keys, n, false));
    free(keys);
    return ok;
}

bool rl_run(api_server_t *srv, const api_req_t *req, api_resp_t *resp, rl_item_t *items, size_t n, bool batch,
            bool *all_allowed)
{
    /* journal space for the canonical record first; room is made for what
     * the decisions add once they are known (run_one, run_batch) */
    for (size_t i = 0; i < n; i++)
        if (!api_auth_key_allowed(req, resp, items[i].key, items[i].klen))
            return false;   /* the token's prefixes before any eviction */
    if (srv->cluster && !cluster_check(srv, req, resp, items, n))
        return false;       /* and, in a cluster, the slot (api/cluster.h) */
    if (!api_journal_reserve_more(srv, req, resp, journal_items_bound(items, n)))
        return false;
    bool ok;
    if (n == 1 && !batch) {
        ok = run_one(srv, req, resp, &items[0]);
        *all_allowed = items[0].r.allowed || items[0].shadow;
    } else {
        ks_key_t *keys = malloc(n * sizeof(*keys));
        if (!keys) {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
            return false;
        }
        for (size_t i = 0; i < n; i++)
            keys[i] = ks_key(srv->ks, items[i].key, items[i].klen);
        uint64_t more = 0, pinned = 0;
        for (unsigned attempts = 0;; more = 0, pinned = 0) {
            ok = run_batch(srv, req, resp, items, n, all_allowed, &more, &pinned);
            api_keep_t keep = { keys, n, pinned };
            if (ok || !more || !api_room_retry(srv, req, resp, more, &keep, &attempts))
                break;
        }
        free(keys);
    }
    if (ok)
        count_metrics(req, items, n);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Answers                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct secs {
    int64_t retry_s, retry_ms, reset_s, reset_ms;
} secs_t;

static secs_t secs_of(const rl_result_t *r, bool allowed)
{
    secs_t s;
    s.retry_s = allowed ? RL_NEVER : rl_ceil_div(r->retry_after_ns, NS_PER_SEC);
    s.retry_ms = allowed ? RL_NEVER : rl_ceil_div(r->retry_after_ns, NS_PER_MS);
    s.reset_s = rl_ceil_div(r->reset_after_ns, NS_PER_SEC);
    s.reset_ms = rl_ceil_div(r->reset_after_ns, NS_PER_MS);
    return s;
}

/* Formatting without printf: these run on every gateway request. */
static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* Appends a header whose value the caller writes (at most 191 bytes). */
static char *header_start(api_resp_t *resp, const char *name)
{
    if (resp->nheaders == API_MAX_HEADERS)
        return NULL;
    api_header_t *h = &resp->headers[resp->nheaders++];
    h->name = name;
    return h->value;
}

/* A number formatted once and copied wherever the answer repeats it: the
 * limit, the remaining count and the reset are each in the body and twice
 * in the headers. */
typedef struct num {
    char s[API_I64_TEXT];
    size_t n;
} num_t;

static num_t num_of(int64_t v)
{
    num_t x;
    x.n = (size_t)(api_format_i64(x.s, v) - x.s);
    return x;
}

/* Needs the room api_format_i64 needs (API_I64_TEXT bytes at p): the copy
 * is of the whole buffer, a fixed size the compiler inlines. */
static char *put_num(char *p, const num_t *x)
{
    memcpy(p, x->s, sizeof(x->s));
    return p + x->n;
}

static void header_num(api_resp_t *resp, const char *name, const num_t *x)
{
    char *p = header_start(resp, name);
    if (p)
        *put_num(p, x) = '\0';
}

/* "name";<k1><v1><k2><v2> (policy names are short: POLICY_NAME_MAX). */
static void header_draft(api_resp_t *resp, const char *hname, const char *policy, const char *k1, const num_t *v1,
                         const char *k2, const num_t *v2)
{
    char *p = header_start(resp, hname);
    if (!p)
        return;
    *p++ = '"';
    p = put_str(p, policy);
    *p++ = '"';
    p = put_str(p, k1);
    p = put_num(p, v1);
    p = put_str(p, k2);
    *put_num(p, v2) = '\0';
}

/* What an answer repeats of a decision, each number formatted once. */
typedef struct nums {
    secs_t s;
    num_t limit, remaining, reset_s;
} nums_t;

static nums_t nums_of(const rl_result_t *r, bool allowed)
{
    nums_t x;
    x.s = secs_of(r, allowed);
    x.limit = num_of(r->limit);
    x.remaining = num_of(r->remaining);
    x.reset_s = num_of(x.s.reset_s);
    return x;
}

static void add_headers(api_resp_t *resp, const rl_item_t *it, bool allowed, const nums_t *x)
{
    const char *name = it->policy ? it->policy->name : DEFAULT_POLICY_NAME;
    num_t window_s = num_of(rl_ceil_div(throttle_window_ns(&it->p), NS_PER_SEC));
    header_num(resp, "RateLimit-Limit", &x->limit);
    header_num(resp, "RateLimit-Remaining", &x->remaining);
    header_num(resp, "RateLimit-Reset", &x->reset_s);
    header_draft(resp, "RateLimit-Policy", name, ";q=", &x->limit, ";w=", &window_s);
    header_draft(resp, "RateLimit", name, ";r=", &x->remaining, ";t=", &x->reset_s);
    if (!allowed && x->s.retry_s >= 0) {
        num_t retry = num_of(x->s.retry_s);
        header_num(resp, "Retry-After", &retry);
    }
}

void rl_answer(api_resp_t *resp, int status, const rl_item_t *it)
{
    const rl_result_t *r = &it->r;
    bool allowed = r->allowed || it->shadow;
    nums_t x = nums_of(r, allowed);
    char body[384], *p = body;
    p = put_str(p, allowed ? "{\"allowed\":true,\"limit\":" : "{\"allowed\":false,\"limit\":");
    p = put_num(p, &x.limit);
    p = put_str(p, ",\"remaining\":");
    p = put_num(p, &x.remaining);
    p = put_str(p, ",\"retry_after\":");
    p = api_format_i64(p, x.s.retry_s);
    p = put_str(p, ",\"reset_after\":");
    p = put_num(p, &x.reset_s);
    p = put_str(p, ",\"retry_after_ms\":");
    p = api_format_i64(p, x.s.retry_ms);
    p = put_str(p, ",\"reset_after_ms\":");
    p = api_format_i64(p, x.s.reset_ms);
    if (it->policy) {
        p = put_str(p, ",\"policy\":\"");
        p = put_str(p, it->policy->name);   /* [A-Za-z0-9_.-]: nothing to escape */
        *p++ = '"';
    }
    if (it->shadow && !r->allowed)
        p = put_str(p, ",\"shadow_limited\":true");
    *p++ = '}';
    api_body(resp, status, NULL, body, (size_t)(p - body));
    add_headers(resp, it, allowed, &x);
}

static json_t *result_json(const rl_item_t *it, bool with_key)
{
    bool allowed = it->r.allowed || it->shadow;
    secs_t s = secs_of(&it->r, allowed);
    json_t *o = json_object();
    if (with_key)
        json_object_set_new(o, "key", json_stringn(it->key, it->klen));
    if (it->policy)
        json_object_set_new(o, "policy", json_string(it->policy->name));
    json_object_set_new(o, "allowed", json_boolean(allowed));
    json_object_set_new(o, "limit", json_integer(it->r.limit));
    json_object_set_new(o, "remaining", json_integer(it->r.remaining));
    json_object_set_new(o, "retry_after", json_integer(s.retry_s));
    json_object_set_new(o, "reset_after", json_integer(s.reset_s));
    json_object_set_new(o, "retry_after_ms", json_integer(s.retry_ms));
    json_object_set_new(o, "reset_after_ms", json_integer(s.reset_ms));
    if (it->shadow && !it->r.allowed)
        json_object_set_new(o, "shadow_limited", json_true());
    return o;
}

/* The item that speaks for a batch: when refused, the limited item that
 * frees up last (one that can never fit first); when allowed, the one with
 * the fewest remaining. */
static const rl_item_t *deciding_item(const rl_item_t *items, size_t n, bool all)
{
    const rl_item_t *best = NULL;
    for (size_t i = 0; i < n; i++) {
        const rl_item_t *it = &items[i];
        if (!all) {
            if (it->r.allowed || it->shadow)
                continue;
            if (!best || (best->r.retry_after_ns != RL_NEVER &&
                          (it->r.retry_after_ns == RL_NEVER || it->r.retry_after_ns > best->r.retry_after_ns)))
                best = it;
        } else if (!best || it->r.remaining < best->r.remaining) {
            best = it;
        }
    }
    return best ? best : &items[0];
}

void rl_answer_batch(api_resp_t *resp, const rl_item_t *items, size_t n, bool all)
{
    const rl_item_t *d = deciding_item(items, n, all);
    json_t *o = result_json(d, false);
    json_object_del(o, "policy");
    json_object_del(o, "shadow_limited");
    json_object_set_new(o, "allowed", json_boolean(all));
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, result_json(&items[i], true));
    json_object_set_new(o, "results", arr);
    api_json(resp, 200, o);
    if (resp->status == 200) {
        rl_item_t shown = *d;
        shown.shadow = false;
        shown.r.allowed = all;
        nums_t x = nums_of(&shown.r, all);
        add_headers(resp, &shown, all, &x);
    }
}
