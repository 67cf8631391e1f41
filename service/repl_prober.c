/* repl_prober.c - asking the other members of the group (--peers) which
 * epoch and role they have: a read-only view for /info (peers_state,
 * peers_epoch).  No answer changes this node's role or epoch. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "service/log.h"
#include "service/repl_int.h"

#define PROBE_STEADY_MS 1000         /* every node asks its peers this often */
#define PROBE_TIMEOUT_MS 1000        /* one peer's answer, at most */

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

/* One round: asks every member, then describes this round's answers only.
 * An answer counts
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
    memcpy(token, r->token, sizeof(token));
    size_t klen = r->secret_len;
    memcpy(key, r->secret, klen);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < r->ngroup; i++)
        peers_ask(r->group[i], token, key, klen, PROBE_TIMEOUT_MS, &r->stopping, &ans[i]);
    explicit_bzero(key, sizeof(key));
    explicit_bzero(token, sizeof(token));

    pthread_mutex_lock(&r->mu);
    uint64_t mine = repl_known_epoch(r), top = 0;
    int self = -1;
    for (int i = 0; i < r->ngroup && self < 0; i++)
        if (ans[i].answered && !strcmp(ans[i].run, r->run))
            self = i;
    int others = r->ngroup - (self >= 0);
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
    /* A view, not a decision: nothing here changes this node's role or
     * epoch (failover is the coordinator's: service/coord.h). */
    int primaries = 0;
    char names[400] = "";
    for (int i = 0; i < r->ngroup; i++)
        if (vote[i] == i) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof(names) - l, "%s%s (epoch %" PRIu64 ")", primaries ? ", " : "", r->group[i],
                     ans[i].epoch);
            primaries++;
        }
    char note[300] = "";
    if (newer)
        snprintf(note, sizeof(note), "; %d report an epoch newer than this node's %" PRIu64 " (up to %" PRIu64 ")",
                 newer, mine, top);
    else if (rivals)
        snprintf(note, sizeof(note), "; another node is probing under the same epoch");
    const char *sep = why[0] ? "; " : "";
    snprintf(r->probe_state, sizeof(r->probe_state), "%d of %d nodes answered; primaries among the others: %s%s%s%.400s",
             answered + 1, others + 1, primaries ? names : "none", note, sep, why);
    pthread_mutex_unlock(&r->mu);
}

void *repl_prober_main(void *arg)
{
    repl_t *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->closing) {
        pthread_mutex_unlock(&r->mu);
        probe_round(r);
        pthread_mutex_lock(&r->mu);
        int64_t next = mono_ms() + PROBE_STEADY_MS;
        for (;;) {
            int64_t now = mono_ms();
            if (r->closing || now >= next)
                break;
            cond_wait_ms(&r->probe_cv, &r->mu, next - now);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}
