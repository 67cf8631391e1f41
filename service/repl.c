/* repl.c - see repl.h for the protocol; this file is replication's
 * lifecycle (open, close, reload), the dispatch of the front-ends' calls,
 * and what /info and /metrics show.  The work is done in the files
 * repl_int.h lists. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "service/log.h"
#include "service/repl_int.h"

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */
/* ------------------------------------------------------------------------ */

repl_t *repl_open(const tally_opts_t *o, const repl_creds_t *c, cmd_server_t *srv, persist_t *p, char *err,
                  size_t errlen)
{
    repl_t *r = calloc(1, sizeof(*r));
    if (r)
        r->ring = malloc(o->repl_backlog);
    if (!r || !r->ring) {
        free(r);
        snprintf(err, errlen, "out of memory allocating the %zu-byte replication backlog", o->repl_backlog);
        return NULL;
    }
    r->srv = srv;
    r->p = p;
    r->cap = o->repl_backlog;
    r->min_acks = o->min_replicas_ack;
    r->ack_timeout_ms = o->min_replicas_timeout;
    snprintf(r->dir, sizeof(r->dir), "%s", o->data_dir);
    memcpy(r->token, c->token, sizeof(r->token));
    memcpy(r->secret, c->secret, sizeof(r->secret));
    r->secret_len = c->secret_len;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->role_mu, NULL);
    /* writers first: a taking back is not starved by a stream of changes */
    pthread_rwlockattr_t ga;
    pthread_rwlockattr_init(&ga);
    pthread_rwlockattr_setkind_np(&ga, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&r->gate, &ga);
    pthread_rwlockattr_destroy(&ga);
    r->doubt_tail = &r->doubt;
    pthread_cond_init(&r->grew, NULL);
    pthread_cond_init(&r->probe_cv, NULL);
    r->ngroup = opts_peers_split(o->peers, r->group, err, errlen);
    if (r->ngroup < 0) {
        r->ngroup = 0;
        repl_close(r);
        return NULL;
    }
    uint64_t file = 0, journaled = persist_journal_epoch(p);   /* the journal's: range-checked by its reader */
    if (!repl_epoch_read(o->data_dir, &file, err, errlen)) {
        repl_close(r);
        return NULL;
    }
    r->epoch = file > journaled ? file : journaled;
    if (journaled > file) {   /* the file is rewritten: the next snapshot drops the journal */
        log_warn("replication: the journal records epoch %" PRIu64 ", newer than the EPOCH file's %" PRIu64
                 ": epoch %" PRIu64 " holds", journaled, file, journaled);
        if (!repl_epoch_write(o->data_dir, journaled, err, errlen)) {
            repl_close(r);
            return NULL;
        }
    }
    persist_epoch_keep(p, r->epoch);
    r->coordinated = o->coordinator[0] != '\0';
    if (r->coordinated)
        r->led_epoch = repl_coord_led_read(r);
    repl_run_new(r);
    /* with --coordinator, etcd names the primary: no change before it does
     * (--peers is a view only: a node is a primary or a replica as started) */
    atomic_store(&r->role, r->coordinated ? ROLE_PROBING : ROLE_PRIMARY);
    snprintf(r->probe_state, sizeof(r->probe_state), "not asked yet");
    snprintf(r->coord_state, sizeof(r->coord_state), "not in touch with etcd yet");
    if (o->replica_of[0]) {
        pthread_mutex_lock(&r->role_mu);
        bool ok = repl_follow(r, o->replica_of, 0, err, errlen);
        pthread_mutex_unlock(&r->role_mu);
        if (!ok) {
            repl_close(r);
            return NULL;
        }
    }
    if (r->ngroup) {
        r->prober_on = pthread_create(&r->prober, NULL, repl_prober_main, r) == 0;
        if (!r->prober_on) {
            snprintf(err, errlen, "cannot start the thread that asks the --peers");
            repl_close(r);
            return NULL;
        }
    }
    return r;
}

void repl_close(repl_t *r)
{
    if (!r)
        return;
    atomic_store(&r->stopping, true);
    pthread_mutex_lock(&r->mu);
    r->closing = true;
    pthread_cond_broadcast(&r->probe_cv);
    pthread_mutex_unlock(&r->mu);
    if (r->prober_on)
        pthread_join(r->prober, NULL);   /* before the follower: it may start one */
    repl_follower_stop(r);
    pthread_mutex_lock(&r->mu);
    pthread_cond_broadcast(&r->grew);
    waiter_t *all = r->waiters;
    r->waiters = NULL;
    cmd_undo_t *doubt = r->doubt;
    r->doubt = NULL;
    pthread_mutex_unlock(&r->mu);
    repl_waiters_finish(all, false, "shutting down");
    cmd_undo_free(r->srv, doubt);
    pthread_rwlock_destroy(&r->gate);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->role_mu);
    pthread_cond_destroy(&r->grew);
    pthread_cond_destroy(&r->probe_cv);
    explicit_bzero(r->secret, sizeof(r->secret));
    explicit_bzero(r->token, sizeof(r->token));
    free(r->ring);
    free(r);
}

bool repl_reload(repl_t *r, const tally_opts_t *o, char *err, size_t errlen)
{
    repl_creds_t *c = malloc(sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory reloading the replication credentials");
        return false;
    }
    bool ok = repl_creds_load(o, c, err, errlen);
    if (ok) {
        pthread_mutex_lock(&r->mu);
        memcpy(r->token, c->token, sizeof(r->token));
        memcpy(r->secret, c->secret, sizeof(r->secret));
        r->secret_len = c->secret_len;
        replica_t *f = r->follower;
        bool set = !f || replica_set_token(f, r->token);
        pthread_mutex_unlock(&r->mu);
        if (!set) {
            snprintf(err, errlen, "out of memory giving the follower its new token");
            ok = false;
        }
    }
    repl_creds_wipe(c);
    free(c);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                    */
/* ------------------------------------------------------------------------ */

void repl_run(repl_t *r, const cmd_repl_call_t *c, cmd_repl_result_t *out)
{
    memset(out, 0, sizeof(*out));
    out->ok = true;
    switch (c->op) {
    case CMD_REPL_SNAPSHOT:
        repl_serve_snapshot(r, c->epoch, out);
        break;
    case CMD_REPL_LOG:
        repl_serve_log(r, c, out);
        break;
    case CMD_REPL_EPOCH:
        repl_serve_epoch(r, out);
        break;
    case CMD_REPL_PROMOTE:
        pthread_mutex_lock(&r->role_mu);
        repl_serve_promote(r, out);
        pthread_mutex_unlock(&r->role_mu);
        break;
    case CMD_REPL_FOLLOW: {
        if (r->coordinated) {
            refuse(out, CMD_E_BAD_REQUEST, "this node runs with --coordinator: it follows the primary etcd elects");
            break;
        }
        char err[200];
        pthread_mutex_lock(&r->role_mu);
        bool ok = repl_follow(r, c->primary, 0, err, sizeof(err));
        pthread_mutex_unlock(&r->role_mu);
        if (!ok)
            refuse(out, CMD_E_OUT_OF_MEMORY, "%s", err);
        break;
    }
    }
}

/* ------------------------------------------------------------------------ */
/* /info, /metrics                                                          */
/* ------------------------------------------------------------------------ */

/* Lag of a peer (mu held): records and ms behind the stream's head. */
static void peer_lag(const repl_t *r, const peer_t *pe, int64_t now_ms, uint64_t *records, int64_t *ms)
{
    *records = r->records > pe->records ? r->records - pe->records : 0;
    *ms = 0;
    if (pe->acked < r->head && pe->acked >= r->tail) {
        int64_t t = repl_record_ms(r, pe->acked);
        *ms = now_ms > t ? now_ms - t : 0;
    }
}

void repl_status(repl_t *r, cmd_repl_status_t *st)
{
    memset(st, 0, sizeof(*st));
    pthread_mutex_lock(&r->mu);
    int role = repl_role_now(r);
    st->role = repl_role_names[role];
    st->epoch = r->epoch;
    memcpy(st->run, r->run, sizeof(st->run));
    st->offset = r->head;
    st->records = r->records;
    st->backlog_bytes = r->head - r->tail;
    st->backlog_capacity = r->cap;
    st->min_replicas_ack = r->min_acks;
    st->min_replicas_timeout_ms = r->ack_timeout_ms;
    st->has_primary = role == ROLE_REPLICA;
    if (st->has_primary)
        memcpy(st->primary, r->primary, sizeof(st->primary));
    st->ngroup = r->ngroup;
    for (int i = 0; i < r->ngroup; i++)
        memcpy(st->group[i], r->group[i], sizeof(st->group[i]));
    memcpy(st->peers_state, r->probe_state, sizeof(st->peers_state));
    st->coordinated = r->coordinated;
    memcpy(st->coordinator_state, r->coord_state, sizeof(st->coordinator_state));
    st->peers_epoch = r->peer_epoch;
    int64_t now = mono_ms(), wall = clock_now_ns() / 1000000;
    st->nreplicas = r->npeers;
    for (int i = 0; i < r->npeers; i++) {
        const peer_t *pe = &r->peers[i];
        cmd_repl_replica_t *o = &st->replicas[i];
        memcpy(o->id, pe->id, sizeof(o->id));
        memcpy(o->addr, pe->addr, sizeof(o->addr));
        o->connected = repl_peer_alive(pe, now);
        st->replicas_connected += o->connected;
        o->offset = pe->acked;
        o->records = pe->records;
        peer_lag(r, pe, wall, &o->lag_records, &o->lag_ms);
        o->last_seen_ms_ago = now - pe->seen_ms;
    }
    st->acks_timed_out = r->acks_timed_out;
    st->refused_too_few_replicas = r->refused_no_replicas;
    st->keys_taken_back = r->undone_keys;
    st->has_link = r->follower != NULL;
    if (r->follower)
        replica_status(r->follower, &st->link);
    pthread_mutex_unlock(&r->mu);
}

void repl_metrics(repl_t *r, wbuf_t *out)
{
    char line[1024];
    pthread_mutex_lock(&r->mu);
    int role = repl_role_now(r);
    int n = snprintf(line, sizeof(line),
                     "# HELP tally_replication_role This node's role (1 for the role it has).\n"
                     "# TYPE tally_replication_role gauge\n"
                     "tally_replication_role{role=\"primary\"} %d\n"
                     "tally_replication_role{role=\"replica\"} %d\n"
                     "tally_replication_role{role=\"fenced\"} %d\n"
                     "tally_replication_role{role=\"probing\"} %d\n"
                     "# HELP tally_replication_epoch Promotions this node knows of.\n"
                     "# TYPE tally_replication_epoch gauge\n"
                     "tally_replication_epoch %" PRIu64 "\n"
                     "# HELP tally_replication_offset Bytes of records in this primary's stream.\n"
                     "# TYPE tally_replication_offset counter\n"
                     "tally_replication_offset %" PRIu64 "\n",
                     role == ROLE_PRIMARY, role == ROLE_REPLICA, role == ROLE_FENCED, role == ROLE_PROBING, r->epoch,
                     r->head);
    wbuf_put_bytes(out, line, (size_t)n);
    int64_t now = mono_ms(), wall = clock_now_ns() / 1000000;
    int connected = 0;
    for (int i = 0; i < r->npeers; i++)
        connected += repl_peer_alive(&r->peers[i], now);
    n = snprintf(line, sizeof(line),
                 "# HELP tally_replicas_connected Replicas that polled the stream in the last 3 s.\n"
                 "# TYPE tally_replicas_connected gauge\n"
                 "tally_replicas_connected %d\n"
                 "# HELP tally_replication_acks_timed_out_total Changes answered 503 for want of acknowledgements.\n"
                 "# TYPE tally_replication_acks_timed_out_total counter\n"
                 "tally_replication_acks_timed_out_total %" PRIu64 "\n"
                 "# HELP tally_replication_keys_taken_back_total Keys restored because their changes timed out.\n"
                 "# TYPE tally_replication_keys_taken_back_total counter\n"
                 "tally_replication_keys_taken_back_total %" PRIu64 "\n"
                 "# HELP tally_replica_lag_records Records a replica is behind.\n"
                 "# TYPE tally_replica_lag_records gauge\n",
                 connected, r->acks_timed_out, r->undone_keys);
    wbuf_put_bytes(out, line, (size_t)n);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            static const char h[] = "# HELP tally_replica_lag_ms Age of the oldest record a replica has not acknowledged.\n"
                                    "# TYPE tally_replica_lag_ms gauge\n";
            wbuf_put_bytes(out, h, sizeof(h) - 1);
        }
        for (int i = 0; i < r->npeers; i++) {
            const peer_t *pe = &r->peers[i];
            if (!repl_peer_alive(pe, now))
                continue;
            uint64_t lr;
            int64_t lm;
            peer_lag(r, pe, wall, &lr, &lm);
            n = pass == 0 ? snprintf(line, sizeof(line), "tally_replica_lag_records{replica=\"%s\"} %" PRIu64 "\n", pe->id, lr)
                          : snprintf(line, sizeof(line), "tally_replica_lag_ms{replica=\"%s\"} %" PRId64 "\n", pe->id, lm);
            wbuf_put_bytes(out, line, (size_t)n);
        }
    }
    if (r->follower)
        replica_metrics(r->follower, out);
    pthread_mutex_unlock(&r->mu);
}
