/* repl_roles.c - this node's role (service/repl.h): following a primary,
 * a promotion under a new epoch, what a peer asking is told, and what the
 * command layer asks before a change. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "core/persist_fmt.h"
#include "service/log.h"
#include "service/repl_int.h"

const char *const repl_role_names[] = { "primary", "replica", "fenced", "probing" };

void repl_run_new(repl_t *r)
{
    uint8_t b[8] = { 0 };
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t t = (uint64_t)clock_now_ns();
        memcpy(b, &t, sizeof(b));
    }
    for (int i = 0; i < 8; i++)
        snprintf(r->run + 2 * i, 3, "%02x", b[i]);
}

/* Stops the follower, if any (without mu: the thread may be applying). */
uint64_t repl_follower_stop(repl_t *r)
{
    pthread_mutex_lock(&r->mu);
    replica_t *f = r->follower;
    r->follower = NULL;
    uint64_t epoch = r->epoch;
    pthread_mutex_unlock(&r->mu);
    if (f) {
        uint64_t seen = replica_epoch(f);
        replica_stop(f);
        if (seen > epoch)
            epoch = seen;
    }
    return epoch;
}

/* The highest epoch this node knows: its own, its follower's (mu held). */
uint64_t repl_known_epoch(repl_t *r)
{
    uint64_t e = r->epoch;
    if (r->follower) {
        uint64_t f = replica_epoch(r->follower);
        e = f > e ? f : e;
    }
    return e;
}

/* Makes this node a replica of `primary`; `epoch`: the highest epoch known
 * of it (0: none).  role_mu held. */
bool repl_follow(repl_t *r, const char *primary, uint64_t epoch_hint, char *err, size_t errlen)
{
    uint64_t epoch = repl_follower_stop(r);
    pthread_mutex_lock(&r->mu);
    atomic_store(&r->role, ROLE_REPLICA);
    snprintf(r->primary, sizeof(r->primary), "%s", primary);
    size_t pl = strlen(r->primary);
    while (pl && r->primary[pl - 1] == '/')   /* spelled as --peers and the peers' answers are compared */
        r->primary[--pl] = '\0';
    r->epoch = epoch > epoch_hint ? epoch : epoch_hint;
    r->follower = replica_start(primary, r->token, r->srv, r->p, r->epoch);   /* the token goes to `primary` only */
    bool ok = r->follower != NULL;
    pthread_cond_broadcast(&r->grew);
    pthread_mutex_unlock(&r->mu);
    if (!ok)
        snprintf(err, errlen, "out of memory starting the replication thread");
    else
        log_info("replication: following %s", primary);
    return ok;
}

/* Promotion under `epoch`: durable EPOCH, a snapshot of what was
 * replicated, the epoch record, then changes (role_mu held). */
static bool promote_to(repl_t *r, uint64_t epoch, char *err, size_t errlen)
{
    if (!repl_epoch_write(r->dir, epoch, err, errlen))
        return false;
    /* what was replicated becomes durable here before the first change */
    snapshot_stats_t st;
    if (!persist_snapshot(r->p, &st, err, errlen))
        return false;
    /* the epoch with the data: replayed at a restart, streamed to replicas */
    journal_req_t rec;
    char body[JOURNAL_EPOCH_BUF];
    if (!persist_epoch_append(r->p, epoch, &rec, body, err, errlen))
        return false;
    pthread_mutex_lock(&r->mu);
    r->epoch = epoch;
    if (r->coordinated)
        r->led_epoch = epoch;
    r->primary[0] = '\0';
    repl_run_new(r);
    r->tail = r->head;    /* positions of other streams mean nothing here */
    r->npeers = 0;
    atomic_store(&r->role, ROLE_PRIMARY);
    pthread_mutex_unlock(&r->mu);
    repl_append(r, &rec);
    log_info("replication: promoted to primary under epoch %" PRIu64, epoch);
    return true;
}

bool repl_coord_promote(repl_t *r, uint64_t epoch, char *err, size_t errlen)
{
    uint64_t known = repl_follower_stop(r);
    if (epoch <= known || epoch > TALLY_EPOCH_MAX) {
        snprintf(err, errlen, "epoch %" PRIu64 " is not above the %" PRIu64 " this node knows, or past %" PRIu64,
                 epoch, known, TALLY_EPOCH_MAX);
        return false;
    }
    return repl_coord_led_write(r, epoch, err, errlen) && promote_to(r, epoch, err, errlen);
}

void repl_coord_fence(repl_t *r)
{
    if (atomic_load(&r->role) == ROLE_PRIMARY) {
        atomic_store(&r->role, ROLE_FENCED);
        pthread_mutex_lock(&r->mu);
        pthread_cond_broadcast(&r->grew);
        pthread_mutex_unlock(&r->mu);
        log_error("replication: this primary's lease in the coordinator lapsed: fenced (no change taken) until the "
                  "coordinator names the primary to follow");
    }
}

/* role_mu held. */
void repl_serve_promote(repl_t *r, cmd_repl_result_t *out)
{
    if (r->coordinated) {
        refuse(out, CMD_E_BAD_REQUEST, "this node runs with --coordinator: etcd elects the primary, not this request");
        return;
    }
    if (atomic_load(&r->role) == ROLE_PRIMARY) {
        out->epoch = r->epoch;
        out->promoted = false;
        return;
    }
    uint64_t epoch = repl_follower_stop(r);
    pthread_mutex_lock(&r->mu);
    epoch = epoch > r->peer_epoch ? epoch : r->peer_epoch;   /* above its own and its peers' last answers */
    pthread_mutex_unlock(&r->mu);
    if (epoch >= TALLY_EPOCH_MAX) {
        refuse(out, CMD_E_INTERNAL,
               "promotion failed, this node takes no changes: the next epoch would pass the largest, %" PRIu64
               " (this node or a peer reports %" PRIu64 ")",
               TALLY_EPOCH_MAX, epoch);
        return;
    }
    epoch++;
    char err[700];
    if (!promote_to(r, epoch, err, sizeof(err))) {
        refuse(out, CMD_E_INTERNAL, "promotion failed, this node takes no changes: %s", err);
        return;
    }
    out->epoch = epoch;
    out->promoted = true;
}

/* What a peer asks (the front-end has repl_sign sign its answer). */
void repl_serve_epoch(repl_t *r, cmd_repl_result_t *out)
{
    pthread_mutex_lock(&r->mu);
    int role = repl_role_now(r);
    out->role = repl_role_names[role];
    out->epoch = repl_known_epoch(r);
    memcpy(out->run, r->run, sizeof(out->run));
    out->has_primary = role == ROLE_REPLICA;
    if (out->has_primary)
        memcpy(out->primary, r->primary, sizeof(out->primary));
    pthread_mutex_unlock(&r->mu);
}

_Static_assert(PEERS_SIG_LEN + 1 <= CMD_REPL_SIG_MAX, "a signature fits the front-end's buffer");

bool repl_sign(repl_t *r, const char *nonce, const void *body, size_t len, char out[CMD_REPL_SIG_MAX])
{
    pthread_mutex_lock(&r->mu);
    bool sign = r->secret_len > 0;
    if (sign)
        peers_sign(r->secret, r->secret_len, nonce, body, len, out);
    pthread_mutex_unlock(&r->mu);
    return sign;
}

bool repl_lease_ok(repl_t *r)
{
    return !r->coordinated || clock_mono_ns() < atomic_load(&r->lease_deadline);
}

int repl_role_now(repl_t *r)
{
    int role = atomic_load_explicit(&r->role, memory_order_relaxed);
    return role == ROLE_PRIMARY && !repl_lease_ok(r) ? ROLE_FENCED : role;
}

bool repl_writable(repl_t *r, char *primary, size_t n)
{
    int role = repl_role_now(r);
    if (role == ROLE_PRIMARY)
        return true;
    pthread_mutex_lock(&r->mu);
    snprintf(primary, n, "%s", role == ROLE_REPLICA ? r->primary : "");
    pthread_mutex_unlock(&r->mu);
    return false;
}

const char *repl_role(repl_t *r)
{
    return repl_role_names[repl_role_now(r)];
}
