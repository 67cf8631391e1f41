/* persist_load.c - loading the data directory (service/persist.h): the
 * snapshot, then the journals from its boundary on, replayed record by
 * record; and a replica's snapshot, loaded in place of the keyspace. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/keyspace.h"
#include "core/types.h"
#include "service/clock.h"
#include "service/log.h"
#include "service/persist_int.h"

static const char *const DAMAGE_HELP =
    "tallyd will not start on damaged data and has not modified the file. Inspect it with "
    "`tallyd --check FILE`; then restore it from a backup, or move it out of the data directory "
    "to start without what it holds";

struct replay_ctx {
    persist_t *p;
    const char *path;
    const journal_scan_t *sc;   /* its header is read before the first record */
};

/* snapfmt_scan callback of the loader: decodes and adds one key. */
static const char *load_record(void *ud, size_t off, const snap_record_t *r)
{
    (void)off;
    persist_t *p = ud;
    const ks_type_t *t = ks_type_by_tag(r->tag);
    if (!t)
        return "unknown type tag (written by a newer tally?)";
    const char *why = NULL;
    void *v = t->decode(r->value, r->vlen, &why);
    if (!v)
        return why ? why : "value does not decode";
    ks_key_t k = ks_key(p->ks, r->key, r->klen);
    ks_shard_t *sh = ks_shard_at(p->ks, k.shard);
    ks_shard_lock(sh);
    /* expired entries are kept: journal records before their expiry may read them */
    bool dup = ks_find(p->ks, &k, INT64_MIN) != NULL;
    ks_entry_t *ent = dup ? NULL : ks_add(p->ks, &k, t, v, r->expire_ms, clock_now_ns() / 1000000);
    ks_shard_unlock(sh);
    if (!ent) {
        t->free(v);
        return dup ? "duplicate key" : "out of memory";
    }
    return NULL;
}

/* Loads snapshot.tly (if any) into the keyspace; *seq receives its
 * journal_seq (0 when there is no snapshot). */
static bool load_snapshot(persist_t *p, uint64_t *seq, char *err, size_t errlen)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", p->dir, SNAPSHOT_NAME);
    *seq = 0;
    mapped_t m;
    int e = persist_map_file(path, &m);
    if (e == ENOENT)
        return true;
    if (e) {
        snprintf(err, errlen, "cannot read snapshot %s: %s", path, strerror(e));
        return false;
    }
    snap_scan_t sc;
    bool ok = snapfmt_scan(m.p, m.len, load_record, p, &sc);
    if (ok) {
        *seq = sc.h.journal_seq;
        p->loaded_keys = sc.records;
        log_info("loaded snapshot %s: %" PRIu64 " keys, %zu bytes, taken at %" PRId64 " ms", path, sc.records,
                 m.len, sc.h.created_ms);
    } else {
        snprintf(err, errlen, "snapshot %s is damaged at offset %zu: %s. %s", path, sc.bad_off, sc.why, DAMAGE_HELP);
    }
    persist_unmap_file(&m);
    return ok;
}

/* journalfmt_scan callback of the loader: re-executes one request. */
static const char *replay_record(void *ud, size_t off, const journal_req_t *q)
{
    struct replay_ctx *c = ud;
    if (!persist_record_known(q))
        return "unknown method in record";
    char where[640];
    snprintf(where, sizeof(where), "journal %s", c->path);
    uint64_t epoch;
    if (journalfmt_epoch_parse(q, &epoch) && epoch > c->p->journal_epoch)
        c->p->journal_epoch = epoch;
    persist_replay_request(c->p->srv, q, journalfmt_generation(&c->sc->h), where, off);   /* the rules that served it */
    return NULL;
}

/* Replays one journal file.  `newest` says no later file holds records (a
 * torn last record is allowed only there).  *sc receives the scan. */
static bool replay_journal(persist_t *p, uint64_t seq, bool newest, journal_scan_t *sc, size_t *len, char *err,
                           size_t errlen)
{
    char path[600];
    persist_journal_path(p, seq, path, sizeof(path));
    mapped_t m;
    int e = persist_map_file(path, &m);
    if (e) {
        snprintf(err, errlen, "cannot read journal %s: %s", path, strerror(e));
        return false;
    }
    *len = m.len;
    struct replay_ctx c = { p, path, sc };
    bool ok = journalfmt_scan(m.p, m.len, replay_record, &c, sc);
    if (ok && sc->h.seq != seq) {
        ok = sc->ok = false;
        sc->bad_off = 0;
        sc->why = "header sequence number does not match the file name";
    }
    ok = ok && journalfmt_check_place(sc, m.len, newest);
    if (ok) {
        char end[256];
        persist_describe_end(sc, end, sizeof(end));
        p->replayed_records += sc->records;
        if (sc->end == JEND_TORN)
            log_warn("replayed journal %s: %" PRIu64 " records; %s", path, sc->records, end);
        else
            log_info("replayed journal %s: %" PRIu64 " records; %s", path, sc->records, end);
    } else {
        snprintf(err, errlen, "journal %s is damaged at offset %zu: %s. %s", path, sc->bad_off, sc->why,
                 DAMAGE_HELP);
    }
    persist_unmap_file(&m);
    return ok;
}

/* Loads snapshot.tly, replays the journals from its boundary on (sealing
 * one a crash left open), removes those it already holds, and sets
 * p->next_seq; false with err naming the file, the offset and what to do. */
bool persist_load(persist_t *p, char *err, size_t errlen)
{
    char path[600];
    uint64_t snap_seq;
    if (!load_snapshot(p, &snap_seq, err, errlen))
        return false;

    uint64_t *seqs = NULL;
    size_t nseq = 0;
    int e = persist_list_journals(p, &seqs, &nseq);
    if (e) {
        snprintf(err, errlen, "cannot list data directory %s: %s", p->dir, strerror(e));
        return false;
    }
    /* Journals from the snapshot's boundary on must be contiguous.  Without a
     * snapshot nothing was ever allowed to delete a journal, so they start at 1. */
    uint64_t start = snap_seq ? snap_seq : 1;
    size_t first = 0;
    while (first < nseq && seqs[first] < start)
        first++;
    uint64_t expect = start;
    for (size_t i = first; i < nseq; i++, expect++) {
        if (seqs[i] != expect) {
            char want[600];
            persist_journal_path(p, expect, want, sizeof(want));
            snprintf(err, errlen,
                     "journal %s is missing, but later journals exist: the changes it held would be lost. "
                     "tallyd will not start; restore the file (or the snapshot that covered it), or, to accept "
                     "the loss, move every journal before the first present one out of the data directory",
                     want);
            free(seqs);
            return false;
        }
    }
    /* The newest journal holding records: the rules of the newest journal
     * apply to it and to every (empty) one after it.  Found once, walking
     * back from the last file, not once per journal. */
    size_t last_data = first;
    for (size_t k = nseq; k-- > first + 1;) {
        persist_journal_path(p, seqs[k], path, sizeof(path));
        if (persist_journal_has_records(path)) {
            last_data = k;
            break;
        }
    }
    for (size_t i = first; i < nseq; i++) {
        bool newest = i >= last_data;
        journal_scan_t sc;
        size_t len;
        if (!replay_journal(p, seqs[i], newest, &sc, &len, err, errlen)) {
            free(seqs);
            return false;
        }
        /* a journal left open by a crash is closed before a new one starts */
        bool open_end = sc.end != JEND_SEALED && (journalfmt_layout(&sc.h) == JOURNAL_LAYOUT_2 || sc.data_end != len);
        int se = p->journal_on && open_end ? persist_seal_journal(p, seqs[i], &sc, err, errlen) : 0;
        if (se && persist_space_error(se) && i + 1 == nseq) {
            /* the last journal: its seal waits for space with the next one */
            p->seal_deferred = true;
            p->seal_seq = seqs[i];
            p->seal_sc = sc;
        } else if (se) {
            free(seqs);
            return false;
        }
    }
    uint64_t next = nseq && seqs[nseq - 1] >= start ? seqs[nseq - 1] + 1 : start;
    /* journals before the snapshot's boundary are already in it */
    for (size_t i = 0; i < first; i++) {
        persist_journal_path(p, seqs[i], path, sizeof(path));
        if (unlink(path) == 0)
            log_info("removed %s (already in the snapshot)", path);
    }
    free(seqs);

    p->next_seq = next;
    return true;
}

/* ------------------------------------------------------------------------ */
/* A replica's snapshot                                                     */
/* ------------------------------------------------------------------------ */

/* ks_shard_scan callback of persist_load_snapshot_bytes: collects entries. */
struct entry_list {
    ks_entry_t **v;
    size_t n, cap;
    bool oom;
};

static void collect_entry(void *ud, ks_entry_t *e)
{
    struct entry_list *l = ud;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        ks_entry_t **v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = e;
}

/* persist_load_snapshot_bytes, the keyspace closed to requests. */
static bool load_replacing(persist_t *p, const uint8_t *bytes, size_t len, char *err, size_t errlen)
{
    snap_scan_t sc;
    struct entry_list l = { 0 };
    for (unsigned i = 0; i < ks_shard_count(p->ks); i++) {
        ks_shard_t *sh = ks_shard_at(p->ks, i);
        ks_shard_lock(sh);
        uint64_t cursor = 0;
        do
            ks_shard_scan(p->ks, sh, &cursor, 1024, INT64_MIN, collect_entry, &l);
        while (cursor && !l.oom);
        for (size_t k = 0; k < l.n; k++)
            ks_entry_delete(p->ks, l.v[k]);
        l.n = 0;
        ks_shard_unlock(sh);
        if (l.oom)
            break;
    }
    free(l.v);
    if (l.oom) {
        snprintf(err, errlen, "out of memory clearing the keyspace");
        return false;
    }
    if (!snapfmt_scan(bytes, len, load_record, p, &sc)) {
        snprintf(err, errlen, "snapshot from the primary does not load at offset %zu: %s", sc.bad_off, sc.why);
        return false;
    }
    p->loaded_keys = sc.records;
    return true;
}

bool persist_load_snapshot_bytes(persist_t *p, const uint8_t *bytes, size_t len, char *err, size_t errlen)
{
    snap_scan_t sc;
    if (!snapfmt_scan(bytes, len, NULL, NULL, &sc)) {
        snprintf(err, errlen, "snapshot from the primary is damaged at offset %zu: %s", sc.bad_off, sc.why);
        return false;
    }
    /* every key goes, shard by shard; then the snapshot's keys come in.
     * Meanwhile no request reads: the data routes are refused (503; a
     * change the replica's 421) until the load is complete - and stay
     * closed if it fails halfway, until a later load succeeds, since the
     * keyspace then holds neither state.  Nor is a
     * snapshot taken (snap_mu): it would hold a keyspace half replaced.  The
     * gate closes first: a request it waits for may itself wait for snap_mu,
     * as /info does. */
    if (p->load_gate)
        p->load_gate(p->load_gate_ud, true);
    pthread_mutex_lock(&p->snap_mu);
    bool ok = load_replacing(p, bytes, len, err, errlen);
    pthread_mutex_unlock(&p->snap_mu);
    if (ok && p->load_gate)
        p->load_gate(p->load_gate_ud, false);
    return ok;
}

void persist_set_load_gate(persist_t *p, void (*gate)(void *ud, bool loading), void *ud)
{
    p->load_gate = gate;
    p->load_gate_ud = ud;
}
