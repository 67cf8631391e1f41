/*
 * key.c - the key handle: how every handler reaches a value in the keyspace.
 *
 * A handler that reads or changes one key makes two calls around its work:
 *
 *     api_key_t h;
 *     if (!api_key_open(srv, req, resp, key, klen, &bloom_type, API_WRITE, &h))
 *         return;                      404 / 409 answered, nothing locked
 *     bloom_t *b = api_key_value(&h);  NULL: the key does not exist
 *     ... change b, or api_key_add / api_key_replace / api_key_delete ...
 *     api_key_close(&h, changed);      re-measured and journaled if changed, unlocked
 *
 * api_key_open locks the key's shard, finds the key (an expired one is
 * gone), checks its type (409 WRONGTYPE naming both types), answers 404 when
 * the key must exist, and with API_WRITE prepares the entry for modification
 * (the snapshot in progress keeps its old state first).  api_key_close does
 * the rest of the handler contract in api.h under the lock: the memory charge
 * follows the value, and the request is journaled only when state changed.
 *
 * Both check the caller's token prefixes first (api/auth.h): a key outside
 * them is a 403 before anything is locked or looked at.  In a cluster, the
 * keys' slot is checked once their shards are locked (api/cluster.h): a
 * slot of another node is a 421 before the key is looked at.
 *
 * With --min-replicas-ack, api_keys_lock also keeps each key's state as
 * it was when locked, so that a change the replicas did not confirm can be
 * taken back (api/undo.h); api_key_close drops it when nothing changed.
 *
 * Requests on several keys (unions, BITOP, merges) lock them all at once
 * with api_keys_lock, which orders the shard locks so that two such requests
 * never deadlock, and then look each key up with api_keys_find in the order
 * their errors should be reported; the same api_key_close ends them.
 */
#include <string.h>

#include "api/api.h"
#include "api/cluster.h"
#include "api/undo.h"

/* The family whose keys hold `type` (it names the type in messages). */
static const api_family_t *family_of(const ks_type_t *type)
{
    for (size_t i = 0; type && i < api_nfamilies; i++)
        if (api_families[i]->type == type)
            return api_families[i];
    return NULL;
}

static const char *type_noun(const ks_type_t *type)
{
    const api_family_t *f = family_of(type);
    return f ? f->noun : "a value";
}

static void answer_missing(api_resp_t *resp, const ks_type_t *type)
{
    const api_family_t *f = family_of(type);
    if (!type || (f && f->missing))
        api_error(resp, API_E_NOT_FOUND, "%s", type ? f->missing : "no such key");
    else
        api_error(resp, API_E_NOT_FOUND, "no such key (create the %s with PUT /%s/{key})", type->name, type->name);
}

/* The 409 naming both types ("key holds a counter (counter), not a geo set
 * (geo)"); `role` (may be NULL) names the key of a multi-key request
 * ("sources[1]"). */
static void answer_wrongtype(api_resp_t *resp, const ks_entry_t *e, const ks_type_t *wanted, const char *role)
{
    const ks_type_t *held = ks_entry_type(e);
    api_error(resp, API_E_WRONGTYPE, "%s%skey holds %s (%s), not %s (%s)", role ? role : "", role ? ": " : "",
              type_noun(held), held->name, type_noun(wanted), wanted->name);
}

/* ------------------------------------------------------------------------ */
/* The handle                                                               */
/* ------------------------------------------------------------------------ */

bool api_keys_lock(api_server_t *srv, const api_req_t *req, api_resp_t *resp, ks_key_t *keys, size_t n,
                   api_key_t *h)
{
    h->locked = false;
    if (!api_auth_keys_allowed(req, resp, keys, n))
        return false;
    h->srv = srv;
    h->req = req;
    h->resp = resp;
    h->keys = keys;
    h->n = n;
    h->e = NULL;
    h->locked = true;
    if (n == 1)
        ks_shard_lock(ks_shard_at(srv->ks, keys[0].shard));
    else
        ks_lock_keys(srv->ks, keys, n);
    if (!api_cluster_keys_check(srv, req, resp, keys, n, true)) {
        api_key_close(h, false);   /* another node's slot, or keys that have left it */
        return false;
    }
    if (resp->undo_on && !api_undo_capture(srv, req, resp, h, keys, n)) {
        api_key_close(h, false);   /* nothing changed yet: refused */
        return false;
    }
    return true;
}

bool api_keys_allowed(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const ks_key_t *keys, size_t n)
{
    return api_auth_keys_allowed(req, resp, keys, n) && api_cluster_keys_check(srv, req, resp, keys, n, false);
}

bool api_keys_find(api_key_t *h, size_t i, const ks_type_t *type, unsigned flags, const char *role,
                   ks_entry_t **out)
{
    ks_entry_t *e = ks_find(h->srv->ks, &h->keys[i], api_now_ms(h->req));
    if (!e && (flags & API_MUST_EXIST)) {
        api_key_close(h, false);
        answer_missing(h->resp, type);
        return false;
    }
    if (e && type && ks_entry_type(e) != type) {
        api_key_close(h, false);
        answer_wrongtype(h->resp, e, type, role);
        return false;
    }
    if (e && (flags & API_WRITE))
        ks_entry_prepare_write(h->srv->ks, e);
    if (flags & API_WRITE || h->n == 1)
        h->e = e;
    if (out)
        *out = e;
    return true;
}

bool api_key_open(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t len,
                  const ks_type_t *type, unsigned flags, api_key_t *h)
{
    h->key = ks_key(srv->ks, key, len);
    return api_keys_lock(srv, req, resp, &h->key, 1, h) && api_keys_find(h, 0, type, flags, NULL, NULL);
}

bool api_key_add(api_key_t *h, const ks_type_t *type, void *value, int64_t expire_ms)
{
    ks_entry_t *e = ks_add(h->srv->ks, &h->keys[0], type, value, expire_ms, api_now_ms(h->req));
    if (!e)
        return false;
    h->e = e;
    return true;
}

void api_key_replace(api_key_t *h, void *value) { ks_entry_replace_value(h->srv->ks, h->e, value); }

void api_key_delete(api_key_t *h)
{
    ks_entry_delete(h->srv->ks, h->e);
    h->e = NULL;
}

void api_key_close(api_key_t *h, bool changed)
{
    if (!h->locked)
        return;
    if (changed) {
        if (h->e)
            ks_entry_changed(h->srv->ks, h->e);
        api_journal(h->srv, h->req, h->resp);
    }
    h->locked = false;
    if (h->n == 1)
        ks_shard_unlock(ks_shard_at(h->srv->ks, h->keys[0].shard));
    else
        ks_unlock_keys(h->srv->ks, h->keys, h->n);
    if (h->resp->undo)
        api_undo_drop(h->srv, h->resp, h);   /* pre-images of a lock that journaled nothing */
}

/* ------------------------------------------------------------------------ */
/* Whole requests: info and create                                          */
/* ------------------------------------------------------------------------ */

void api_answer_info(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                     const ks_type_t *type, json_t *(*info)(const void *value))
{
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, type, API_MUST_EXIST, &h))
        return;
    json_t *answer = info(api_key_value(&h));
    api_key_close(&h, false);
    if (answer)
        api_json(resp, 200, answer);
    else
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory");
}

void api_create_key(api_server_t *srv, const api_req_t *req, api_resp_t *resp, const char *key, size_t klen,
                    const ks_type_t *type, void *value, json_t *(*info)(const void *value))
{
    if (!value) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory creating the %s", type->name);
        return;
    }
    api_key_t h;
    if (!api_key_open(srv, req, resp, key, klen, type, API_READ, &h)) {
        type->free(value);
        return;
    }
    if (h.e) {
        api_key_close(&h, false);
        type->free(value);
        api_error(resp, API_E_EXISTS, "a %s already exists at this key", type->name);
        return;
    }
    if (!api_key_add(&h, type, value, KS_NO_EXPIRY)) {
        api_key_close(&h, false);
        type->free(value);
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory creating the %s", type->name);
        return;
    }
    json_t *answer = info ? info(value) : json_pack("{s:b}", "created", 1);
    api_key_close(&h, true);
    api_json(resp, 201, answer);
}
