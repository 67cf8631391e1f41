/* undo.c - pre-images of changes and taking a change back: see undo.h. */
#include "api/undo.h"

#include <stdlib.h>
#include <string.h>

#include "core/keydump.h"

/* The restoring record's size at most: PUT /keys/{key}/restore with its
 * query, media type and the dump as body (a deletion is smaller). */
static uint64_t record_bound(size_t klen, size_t dump_len)
{
    return JOURNAL_REQUEST_FIXED + 6 + 3 * (uint64_t)klen + 8 + 64 + 24 + dump_len;
}

static bool captured(const api_resp_t *resp, const ks_key_t *k)
{
    for (const api_undo_t *u = resp->undo; u; u = u->next)
        if (u->klen == k->len && memcmp(u->key, k->p, k->len) == 0)
            return true;
    return false;
}

bool api_undo_capture(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const api_key_t *owner,
                      const ks_key_t *keys, size_t n)
{
    int64_t now = api_now_ms(req);
    for (size_t i = 0; i < n; i++) {
        if (captured(resp, &keys[i]))
            continue;
        ks_entry_t *e = ks_find(srv->ks, &keys[i], now);
        wbuf_t d = WBUF_INIT;
        if (e)
            keydump_encode(ks_entry_type(e), ks_entry_value(e), KEYDUMP_NO_TTL, &d);
        api_undo_t *u = d.oom ? NULL : malloc(sizeof(*u) + keys[i].len);
        if (!u) {
            wbuf_free(&d);
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory keeping the key's state before the change "
                                                 "(--min-replicas-ack); the request was not applied");
            return false;
        }
        *u = (api_undo_t){ .dump = e ? d.data : NULL, .dump_len = e ? d.len : 0,
                           .expire_ms = e ? ks_entry_expire(e) : KS_NO_EXPIRY, .owner = owner,
                           .klen = keys[i].len };
        memcpy(u->key, keys[i].p, keys[i].len);
        uint64_t bytes = record_bound(u->klen, u->dump_len);
        const char *err = "journal unavailable";
        if (srv->hooks.journal_reserve && !srv->hooks.journal_reserve(srv->hooks.ud, bytes, &err)) {
            free(u->dump);
            free(u);
            api_error(resp, API_E_UNAVAILABLE,
                      "the change cannot be made durable: no journal space (%s); the request was not applied, "
                      "retry later",
                      err);
            return false;
        }
        u->held = srv->hooks.journal_reserve ? bytes : 0;
        u->next = resp->undo;
        resp->undo = u;
    }
    return true;
}

static void undo_free_one(api_server_t *srv, api_undo_t *u)
{
    if (u->held && srv->hooks.journal_release)
        srv->hooks.journal_release(srv->hooks.ud, u->held);
    free(u->dump);
    free(u);
}

void api_undo_drop(api_server_t *srv, api_resp_t *resp, const api_key_t *owner)
{
    api_undo_t **pp = &resp->undo;
    while (*pp) {
        api_undo_t *u = *pp;
        if (u->owner == owner) {
            *pp = u->next;
            undo_free_one(srv, u);
        } else {
            pp = &u->next;
        }
    }
}

void api_undo_free(api_server_t *srv, api_undo_t *list)
{
    while (list) {
        api_undo_t *next = list->next;
        undo_free_one(srv, list);
        list = next;
    }
}

bool api_undo_apply(api_server_t *srv, const api_undo_t *u, int64_t now_ns, uint64_t *lsn)
{
    int64_t now = now_ns / 1000000;
    /* a pre-image whose expiry has passed would be gone by now: absent */
    bool present = u->dump && (u->expire_ms == KS_NO_EXPIRY || u->expire_ms > now);
    const ks_type_t *type = NULL;
    void *value = NULL;
    int64_t dump_ttl;
    const char *why;
    if (present && !keydump_decode(u->dump, u->dump_len, &type, &value, &dump_ttl, &why))
        return false;   /* our own bytes: only memory can be missing */

    api_req_t req;
    api_req_init(&req, API_PUT, "", 0, now_ns);
    api_resp_t resp;
    api_resp_init(&resp);
    resp.journal_held = u->held;   /* what the restoring record may use (debug builds check) */

    ks_t *ks = srv->ks;
    ks_key_t k = ks_key(ks, u->key, u->klen);
    ks_shard_t *sh = ks_shard_at(ks, k.shard);
    ks_shard_lock(sh);
    ks_entry_t *e = ks_find(ks, &k, now);
    if (e)
        ks_entry_prepare_write(ks, e);   /* a snapshot in progress keeps what it saw */
    bool ok = true;
    if (present && e && ks_entry_type(e) == type) {
        ks_entry_replace_value(ks, e, value);
        ks_entry_set_expire(ks, e, u->expire_ms);
        ks_entry_changed(ks, e);
    } else {
        if (e)
            ks_entry_delete(ks, e);
        if (present && !ks_add(ks, &k, type, value, u->expire_ms, now)) {
            type->free(value);
            ok = false;
            present = false;   /* what did happen: the key is absent */
        }
    }
    api_journal_key_state(srv, &req, &resp, u->key, u->klen, present ? u->dump : NULL, u->dump_len,
                          u->expire_ms == KS_NO_EXPIRY ? 0 : u->expire_ms - now);
    ks_shard_unlock(sh);
    *lsn = resp.journal_lsn;
    return ok;
}
