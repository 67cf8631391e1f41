/* repl_coord.c - what the coordinator (service/coord.c) reads from and
 * sets in replication (repl_int.h): this node's position for an election,
 * the deadline of the primary's lease, promotion under the leader key's
 * revision, and fencing when the lease lapsed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "service/file.h"
#include "service/repl_int.h"

/* The LEADER file: written when the coordinator promotes this node, so a
 * node restarted on its own journal knows it held every change of that
 * epoch it took (replicas journal nothing they replicate). */
uint64_t repl_coord_led_read(repl_t *r)
{
    char path[600], text[32] = "";
    snprintf(path, sizeof(path), "%s/LEADER", r->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    uint64_t e = 0;
    return repl_epoch_parse(text, n, &e) ? e : 0;
}

bool repl_coord_led_write(repl_t *r, uint64_t epoch, char *err, size_t errlen)
{
    char path[600], text[32];
    snprintf(path, sizeof(path), "%s/LEADER", r->dir);
    int n = snprintf(text, sizeof(text), "%llu\n", (unsigned long long)epoch);
    if (!file_replace(path, text, (size_t)n, FILE_MODE_PRIVATE)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return false;
    }
    return true;
}

void repl_coord_position(repl_t *r, repl_position_t *pos)
{
    memset(pos, 0, sizeof(*pos));
    pthread_mutex_lock(&r->mu);
    int role = atomic_load(&r->role);
    pos->role = role;
    pos->epoch = r->epoch;
    if (role == ROLE_PRIMARY || role == ROLE_FENCED) {
        /* its own stream: everything it took, up to the head */
        pos->offset = r->head;
        pos->led = true;
    } else if (role == ROLE_PROBING) {
        pos->led = r->led_epoch && r->led_epoch == r->epoch;   /* restarted on its own journal */
    } else if (r->follower) {
        cmd_repl_link_t link;
        replica_status(r->follower, &link);
        uint64_t e = replica_epoch(r->follower);
        pos->epoch = e > r->epoch ? e : r->epoch;
        pos->offset = link.synced ? link.offset : 0;   /* a position in its primary's stream, once loaded */
        memcpy(pos->replica_id, link.id, sizeof(pos->replica_id));
        snprintf(pos->primary, sizeof(pos->primary), "%s", r->primary);
    }
    pthread_mutex_unlock(&r->mu);
}

void repl_coord_state(repl_t *r, const char *text)
{
    pthread_mutex_lock(&r->mu);
    snprintf(r->coord_state, sizeof(r->coord_state), "%s", text);
    pthread_mutex_unlock(&r->mu);
}

void repl_coord_deadline(repl_t *r, int64_t deadline_ns)
{
    atomic_store(&r->lease_deadline, deadline_ns);
}
