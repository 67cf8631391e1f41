/* repl_stream.c - the primary's stream (service/repl.h): the backlog, a
 * ring of the records journaled since the first replica's snapshot, and
 * what replicas are served from it: a snapshot with its position, then the
 * records after their position, each poll acknowledging what it holds. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/persist_fmt.h"
#include "service/log.h"
#include "service/repl_int.h"

#define REPL_BATCH_BYTES (1u << 20)  /* records answered by one poll at most */

/* ------------------------------------------------------------------------ */
/* The backlog                                                              */
/* ------------------------------------------------------------------------ */

/* Copies n bytes of the stream at offset off (retained) out of the ring. */
static void ring_read(const repl_t *r, uint64_t off, void *dst, size_t n)
{
    size_t at = (size_t)(off % r->cap), first = n < r->cap - at ? n : (size_t)(r->cap - at);
    memcpy(dst, r->ring + at, first);
    memcpy((uint8_t *)dst + first, r->ring, n - first);
}

static void ring_write(repl_t *r, uint64_t off, const void *src, size_t n)
{
    size_t at = (size_t)(off % r->cap), first = n < r->cap - at ? n : (size_t)(r->cap - at);
    memcpy(r->ring + at, src, first);
    memcpy(r->ring, (const uint8_t *)src + first, n - first);
}

/* The framed size of the record at stream offset off (retained). */
static uint64_t record_size(const repl_t *r, uint64_t off)
{
    uint8_t len[4];
    ring_read(r, off, len, 4);
    return JOURNAL_FRAME_SIZE + ((uint64_t)len[0] | (uint64_t)len[1] << 8 | (uint64_t)len[2] << 16 |
                                 (uint64_t)len[3] << 24);
}

/* The server time (ms) of the record at off: its payload is kind, now_ns. */
int64_t repl_record_ms(const repl_t *r, uint64_t off)
{
    uint8_t b[8];
    ring_read(r, off + JOURNAL_FRAME_SIZE + 1, b, 8);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return (int64_t)v / 1000000;
}

void repl_append(repl_t *r, const journal_req_t *req)
{
    if (!atomic_load_explicit(&r->active, memory_order_relaxed))
        return;
    wbuf_t b = WBUF_INIT;
    journalfmt_put_request(&b, req);
    pthread_mutex_lock(&r->mu);
    if (b.oom || b.len > r->cap) {
        /* cannot be kept: every position before it is gone */
        r->tail = r->head = r->head + (b.oom ? 0 : b.len);
        log_warn("replication: a record of %zu bytes does not fit the backlog; replicas will resynchronise", b.len);
    } else {
        while (r->head + b.len - r->tail > r->cap)
            r->tail += record_size(r, r->tail);
        ring_write(r, r->head, b.data, b.len);
        r->head += b.len;
    }
    r->records++;
    pthread_cond_broadcast(&r->grew);
    pthread_mutex_unlock(&r->mu);
    wbuf_free(&b);
}

/* ------------------------------------------------------------------------ */
/* What replicas are served                                                 */
/* ------------------------------------------------------------------------ */

static peer_t *peer_get(repl_t *r, const char *id, int64_t now)
{
    for (int i = 0; i < r->npeers; i++)
        if (strcmp(r->peers[i].id, id) == 0)
            return &r->peers[i];
    int slot = r->npeers;
    if (slot == REPL_MAX_PEERS) {   /* the longest silent one makes room */
        slot = 0;
        for (int i = 1; i < r->npeers; i++)
            if (!r->peers[i].polling && r->peers[i].seen_ms < r->peers[slot].seen_ms)
                slot = i;
        if (r->peers[slot].polling || now - r->peers[slot].seen_ms <= REPL_PEER_ALIVE_MS)
            return NULL;
    } else {
        r->npeers++;
    }
    memset(&r->peers[slot], 0, sizeof(peer_t));
    snprintf(r->peers[slot].id, sizeof(r->peers[slot].id), "%s", id);
    return &r->peers[slot];
}

struct barrier {
    repl_t *r;
    uint64_t offset, records, epoch;
    char run[CMD_REPL_ID_MAX];
};

/* Runs with every shard locked: the snapshot shows the stream up to here. */
static void at_barrier(void *ud)
{
    struct barrier *b = ud;
    repl_t *r = b->r;
    pthread_mutex_lock(&r->mu);
    if (!atomic_load(&r->active)) {
        r->tail = r->head;
        atomic_store(&r->active, true);
    }
    b->offset = r->head;
    b->records = r->records;
    b->epoch = r->epoch;
    memcpy(b->run, r->run, sizeof(b->run));
    pthread_mutex_unlock(&r->mu);
}

static bool not_primary(repl_t *r, cmd_repl_result_t *out)
{
    int role = atomic_load(&r->role);
    if (role == ROLE_PRIMARY)
        return false;
    refuse(out, CMD_E_UNAVAILABLE, "this node is %s, not the primary: replicas follow the primary",
           role == ROLE_REPLICA ? "a replica" : "a fenced former primary");
    return true;
}

/* A request from a replica that knows a newer epoch than this node's: it
 * follows a node promoted since, not this one.  Refused with 409, and
 * nothing else: a caller's epoch never fences a node by itself (anyone with
 * a replicate token could send one); with --coordinator, etcd tells this
 * node whom to follow (mu held). */
static bool stale(repl_t *r, uint64_t epoch, cmd_repl_result_t *out)
{
    if (epoch <= r->epoch)
        return false;
    if (epoch > r->stale_logged) {
        r->stale_logged = epoch;
        log_warn("replication: a replica asked with epoch %" PRIu64 ", newer than this node's %" PRIu64 "; refused "
                 "(409). %s",
                 epoch, r->epoch,
                 r->coordinated ? "The coordinator names the primary this node follows"
                                : "This node stays as it is: if another node was promoted, make this one its replica "
                                  "(POST /admin/replicate?primary=URL), or run the group with --coordinator");
    }
    refuse(out, CMD_E_CONFLICT,
           "this node's epoch %" PRIu64 " is older than %" PRIu64 ": follow the primary of the newer epoch", r->epoch,
           epoch);
    return true;
}

void repl_serve_snapshot(repl_t *r, uint64_t epoch, cmd_repl_result_t *out)
{
    pthread_mutex_lock(&r->mu);
    bool refused = stale(r, epoch, out) || not_primary(r, out);
    pthread_mutex_unlock(&r->mu);
    if (refused)
        return;
    wbuf_t b = WBUF_INIT;
    struct barrier bar = { .r = r };
    char err[256];
    if (!persist_snapshot_to_buffer(r->p, &b, at_barrier, &bar, err, sizeof(err))) {
        wbuf_free(&b);
        refuse(out, CMD_E_INTERNAL, "%s", err);
        return;
    }
    out->data = b.data;   /* the caller's from now on */
    out->len = b.len;
    memcpy(out->run, bar.run, sizeof(out->run));
    out->offset = bar.offset;
    out->records = bar.records;
    out->epoch = bar.epoch;
    log_info("replication: snapshot of %zu bytes sent at offset %" PRIu64, b.len, bar.offset);
}

void repl_serve_log(repl_t *r, const cmd_repl_call_t *c, cmd_repl_result_t *out)
{
    pthread_mutex_lock(&r->mu);
    int64_t now = mono_ms();
    if (stale(r, c->epoch, out)) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (not_primary(r, out)) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (strcmp(c->run, r->run) != 0 || c->from < r->tail || c->from > r->head || !atomic_load(&r->active)) {
        pthread_mutex_unlock(&r->mu);
        refuse(out, CMD_E_GONE, "position %s/%" PRIu64 " is not in this primary's backlog: fetch a snapshot", c->run,
               c->from);
        return;
    }
    peer_t *pe = peer_get(r, c->id, now);
    if (!pe) {
        pthread_mutex_unlock(&r->mu);
        refuse(out, CMD_E_UNAVAILABLE, "too many replicas (at most %d)", REPL_MAX_PEERS);
        return;
    }
    snprintf(pe->addr, sizeof(pe->addr), "%s", c->addr);
    pe->acked = c->from;
    pe->records = c->records;
    pe->seen_ms = now;
    pe->polling = true;
    waiter_t *acked = NULL;
    cmd_undo_t *safe = repl_safe_advance(r, now);
    repl_waiters_take(r, &acked, false, now);
    /* wait for a record */
    int64_t deadline = now + c->wait_ms;
    while (r->head == c->from && !r->closing && atomic_load(&r->role) == ROLE_PRIMARY &&
           strcmp(c->run, r->run) == 0 && mono_ms() < deadline) {
        if (acked) {   /* answer the acknowledged changes before sleeping */
            pthread_mutex_unlock(&r->mu);
            repl_acked_finish(r, acked);
            acked = NULL;
            pthread_mutex_lock(&r->mu);
            continue;
        }
        int64_t left = deadline - mono_ms();
        cond_wait_ms(&r->grew, &r->mu, left > 100 ? 100 : left < 1 ? 1 : left);
    }
    bool gone = strcmp(c->run, r->run) != 0 || c->from < r->tail;
    wbuf_t b = WBUF_INIT;
    uint64_t off = c->from;
    if (!gone) {
        while (off < r->head && b.len < REPL_BATCH_BYTES) {
            uint64_t n = record_size(r, off);
            wbuf_reserve(&b, b.len + n);
            if (b.oom)
                break;
            ring_read(r, off, b.data + b.len, n);
            b.len += n;
            off += n;
        }
    }
    uint64_t head = r->head, records = r->records, epoch = r->epoch;
    pe = peer_get(r, c->id, mono_ms());
    if (pe) {
        pe->polling = false;
        pe->seen_ms = mono_ms();
    }
    pthread_mutex_unlock(&r->mu);
    repl_acked_finish(r, acked);
    cmd_undo_free(r->srv, safe);
    if (gone || b.oom) {
        wbuf_free(&b);
        if (gone)
            refuse(out, CMD_E_GONE, "position %s/%" PRIu64 " left the backlog: fetch a snapshot", c->run, c->from);
        else
            refuse(out, CMD_E_OUT_OF_MEMORY, "out of memory reading the backlog");
        return;
    }
    if (b.len) {
        out->data = b.data;   /* the caller's from now on */
        out->len = b.len;
    } else {
        wbuf_free(&b);
    }
    out->offset = head;
    out->records = records;
    out->epoch = epoch;
}
