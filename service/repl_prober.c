/* repl_prober.c - asking the other members of the group (--peers) which
 * epoch and role they have, and deciding on this round's answers only, by
 * the rules of service/repl.h: follow, be fenced, or become the primary. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "service/log.h"
#include "service/repl_int.h"

#define PROBE_RETRY_MS 500           /* probing or fenced: ask the peers again after */
#define PROBE_STEADY_MS 2000         /* a primary or a replica asks its peers this often */
#define PROBE_TIMEOUT_MS 1000        /* one peer's answer, at most */
#define PROBE_WAKE_MS 200            /* a round asked for by a caller's newer epoch: this long after the last,
                                        at the soonest (a stream of such polls costs a round per 200 ms) */

/* The member of the group whose URL is `url` (spelled as in --peers, no
 * trailing '/'), or -1: not a configured member. */
static int member_of(const repl_t *r, const char *url)
{
    for (int i = 0; i < r->ngroup; i++)
        if (!strcmp(r->group[i], url))
            return i;
    return -1;
}

/* Logs why member i's answer does not count ("" it counts), when that
 * changed since the round before: a peer down for an hour is one line, not
 * one every round (prober thread). */
static void tell_once(repl_t *r, int i, const char *why)
{
    if (!strncmp(r->told[i], why, sizeof(r->told[i]) - 1))
        return;
    if (why[0])
        log_warn("replication: an answer of the --peers does not count: %s", why);
    else
        log_info("replication: peer %s answers again", r->group[i]);
    snprintf(r->told[i], sizeof(r->told[i]), "%s", why);
}

/* One round: asks every member, then decides from this round's answers only
 * (role_mu held by the caller), by the rules of repl.h.  An answer counts
 * when it is signed for this round's question (service/peers.h); one that
 * carries this node's own stream id is this node (the first such entry is
 * left out of the group, any other never votes), and two entries answering
 * with one stream id are one node, counted once. */
static void probe_round(repl_t *r)
{
    peer_answer_t *ans = r->answers;
    char token[sizeof(r->token)];
    uint8_t key[sizeof(r->secret)];
    pthread_mutex_lock(&r->mu);
    r->probe_now = false;
    memcpy(token, r->token, sizeof(token));
    size_t klen = r->secret_len;
    memcpy(key, r->secret, klen);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < r->ngroup; i++)
        peers_ask(r->group[i], token, key, klen, PROBE_TIMEOUT_MS, &r->stopping, &ans[i]);
    explicit_bzero(key, sizeof(key));
    explicit_bzero(token, sizeof(token));

    pthread_mutex_lock(&r->mu);
    int role = atomic_load(&r->role);
    uint64_t mine = repl_known_epoch(r), top = 0;
    int self = -1;
    for (int i = 0; i < r->ngroup && self < 0; i++)
        if (ans[i].answered && !strcmp(ans[i].run, r->run))
            self = i;
    int others = r->ngroup - (self >= 0), need = others / 2 + 1;
    int vote[OPTS_PEERS_MAX];    /* the member an answer names as the primary of its epoch, or -1 */
    int answered = 0, newer = 0, rivals = 0;
    char why[sizeof(r->told[0])] = "";   /* the last reason an answer did not count */
    for (int i = 0; i < r->ngroup; i++) {
        const peer_answer_t *a = &ans[i];
        vote[i] = -1;
        if (i == self)
            continue;
        char reason[sizeof(why)] = "";
        if (!a->answered)
            snprintf(reason, sizeof(reason), "%s", a->error);
        else if (!strcmp(a->run, r->run))
            snprintf(reason, sizeof(reason), "%s answers as this node (listed twice?): not counted", r->group[i]);
        for (int j = 0; j < i && !reason[0]; j++)
            if (j != self && ans[j].answered && !strcmp(ans[j].run, a->run))
                snprintf(reason, sizeof(reason), "%s answers as %s (one node listed twice?): counted once",
                         r->group[i], r->group[j]);
        tell_once(r, i, reason);
        if (reason[0]) {
            memcpy(why, reason, sizeof(why));
            continue;
        }
        answered++;
        top = a->epoch > top ? a->epoch : top;
        newer += a->epoch > mine;
        rivals += a->epoch == mine && !strcmp(a->role, "probing");
        if (!strcmp(a->role, "primary"))
            vote[i] = i;
        else if (!strcmp(a->role, "replica") && a->primary[0])
            vote[i] = member_of(r, a->primary);   /* -1 when it is not a configured member */
        if (vote[i] == self)
            vote[i] = -1;                          /* this node is not a primary to follow */
    }
    r->peer_epoch = top;   /* this round's, not kept: a promotion goes above it */
    /* the primary a majority agrees on: the newest epoch's */
    int best = -1, agree = 0;
    uint64_t best_epoch = 0;
    for (int i = 0; i < r->ngroup; i++) {
        if (vote[i] < 0)
            continue;
        int n = 0;
        for (int j = 0; j < r->ngroup; j++)
            n += vote[j] == vote[i] && ans[j].epoch == ans[i].epoch;
        if (n >= need && (best < 0 || ans[i].epoch > best_epoch)) {
            best = vote[i];
            best_epoch = ans[i].epoch;
            agree = n;
        }
    }
    const char *to = NULL;
    if (best >= 0 && role == ROLE_PRIMARY) {
        to = best_epoch > mine ? r->group[best] : NULL;
    } else if (best >= 0 && role == ROLE_REPLICA) {
        /* its own primary, a member, no longer says it is the primary: it
         * was replaced while this node was not told */
        int k = member_of(r, r->primary);
        bool stands = k < 0 || (ans[k].answered && !strcmp(ans[k].role, "primary"));
        if (strcmp(r->group[best], r->primary) != 0 && (best_epoch > mine || (best_epoch == mine && !stands)))
            to = r->group[best];
    } else if (best >= 0) {   /* probing or fenced: a primary of its epoch or newer */
        to = best_epoch >= mine ? r->group[best] : NULL;
    }
    int group_need = (others + 1) / 2 + 1;   /* of the whole group, this node included */
    if (!to && newer >= need && role != ROLE_REPLICA) {
        if (role != ROLE_FENCED) {
            atomic_store(&r->role, ROLE_FENCED);
            log_error("replication: %d of the %d other members of the group report an epoch newer than this "
                      "node's %" PRIu64 " (up to %" PRIu64 ") and no majority names its primary: fenced (no change "
                      "taken) until one does",
                      newer, others, mine, top);
        }
    } else if (!to && role == ROLE_FENCED) {
        atomic_store(&r->role, ROLE_PROBING);
        role = ROLE_PROBING;
        log_warn("replication: fewer than %d of the %d other members of the group report an epoch newer than "
                 "%" PRIu64 " now: the fence lifts, this node is probing again",
                 need, others, mine);
    }
    if (!to && role == ROLE_PROBING && newer == 0 && rivals == 0 && answered + 1 >= group_need) {
        atomic_store(&r->role, ROLE_PRIMARY);
        log_info("replication: %d of the %d nodes of the group answered, none of a newer epoch than %" PRIu64
                 ": this node is the primary",
                 answered + 1, others + 1, mine);
    }
    role = atomic_load(&r->role);
    char note[300] = "";
    if (newer && newer < need)
        snprintf(note, sizeof(note), "; %d of %d report a newer epoch (up to %" PRIu64 "), %d needed to act", newer,
                 others, top, need);
    else if (rivals)
        snprintf(note, sizeof(note), "; another node is probing under the same epoch");
    const char *sep = why[0] ? "; " : "";
    if (to)
        snprintf(r->probe_state, sizeof(r->probe_state),
                 "following %.300s (epoch %" PRIu64 ": %d of %d members agree)%s%.400s", to, best_epoch, agree, others,
                 sep, why);
    else if (role == ROLE_PROBING)
        snprintf(r->probe_state, sizeof(r->probe_state), "%d of %d nodes answered (%d needed)%s%s%.400s",
                 answered + 1, others + 1, group_need, note, sep, why);
    else if (role == ROLE_FENCED)
        snprintf(r->probe_state, sizeof(r->probe_state),
                 "fenced: %d of %d members report an epoch newer than %" PRIu64 " (up to %" PRIu64 "), and no %d "
                 "agree on its primary%s%.400s",
                 newer, others, mine, top, need, sep, why);
    else if (role == ROLE_REPLICA)
        snprintf(r->probe_state, sizeof(r->probe_state), "%d of %d nodes answered; this node follows %.300s%s%s%.400s",
                 answered + 1, others + 1, r->primary, note, sep, why);
    else
        snprintf(r->probe_state, sizeof(r->probe_state), "%d of %d nodes answered%s%s%.400s", answered + 1,
                 others + 1, note, sep, why);
    char target[OPTS_PEER_URL_MAX] = "";
    if (to)
        snprintf(target, sizeof(target), "%s", to);
    pthread_mutex_unlock(&r->mu);
    if (target[0]) {
        char err[200];
        log_warn("replication: %d of the %d other members of the group report %s as the primary of epoch %" PRIu64
                 " (this node knew %" PRIu64 "): this node follows it and takes no change",
                 agree, others, target, best_epoch, mine);
        if (!repl_follow(r, target, best_epoch, err, sizeof(err)))
            log_error("replication: %s", err);
    }
}

void *repl_prober_main(void *arg)
{
    repl_t *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->closing) {
        pthread_mutex_unlock(&r->mu);
        pthread_mutex_lock(&r->role_mu);
        probe_round(r);
        pthread_mutex_unlock(&r->role_mu);
        pthread_mutex_lock(&r->mu);
        int role = atomic_load(&r->role);
        int64_t done = mono_ms();
        int64_t next = done + (role == ROLE_PRIMARY || role == ROLE_REPLICA ? PROBE_STEADY_MS : PROBE_RETRY_MS);
        int64_t soonest = done + PROBE_WAKE_MS;   /* a caller's newer epoch asks for a round: not before */
        for (;;) {
            int64_t now = mono_ms();
            if (r->closing || now >= next || (r->probe_now && now >= soonest))
                break;
            cond_wait_ms(&r->probe_cv, &r->mu, (r->probe_now ? soonest : next) - now);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}
