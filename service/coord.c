/* coord.c - failover through etcd (coord.h says what and why). */
#include "service/coord.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/clock.h"
#include "service/etcd.h"
#include "service/log.h"
#include "service/repl_int.h"

#define COORD_STEP_MS 200            /* the thread's round */
#define COORD_MAX_SYNC CMD_REPL_REPLICAS_MAX

struct coord {
    repl_t *r;
    etcd_client_t *etcd;
    char self[OPTS_PEER_URL_MAX];
    char k_leader[400], k_member[1000], k_members[400], k_sync[400], k_floor[400];
    int64_t ttl_ms, ka_every_ms, margin_ms;
    int min_acks;

    pthread_t thread;
    bool thread_on;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;

    /* the thread's own */
    int64_t lease;
    int64_t ka_sent_ns;              /* send time of the last successful grant or keepalive */
    bool leader;                     /* this node holds P/leader under `lease` */
    uint64_t epoch;                  /* its create revision, while leader */
    char member_value[1200];         /* last published, and under which lease */
    bool vacant;                     /* the last read of P/leader found no key */
    int64_t member_lease;
    char sync_pub[COORD_MAX_SYNC][CMD_REPL_ID_MAX];
    int nsync_pub;
    bool sync_published;
    uint64_t rm_floor;               /* every counted replica must hold this before a removal is published */
    char last_state[300];            /* logged when it changes */
};

static void state(coord_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void state(coord_t *c, const char *fmt, ...)
{
    char s[sizeof(c->last_state)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s, sizeof(s), fmt, ap);
    va_end(ap);
    if (strcmp(s, c->last_state) != 0) {
        log_info("coordinator: %s", s);
        memcpy(c->last_state, s, sizeof(s));
        repl_coord_state(c->r, s);
    }
}

static int64_t deadline_of(const coord_t *c)
{
    return c->ka_sent_ns + (c->ttl_ms - c->margin_ms) * 1000000;
}

/* ------------------------------------------------------------- lease -- */

static void lease_step(coord_t *c)
{
    int64_t now = clock_mono_ns();
    if (!c->lease) {
        int64_t id = 0, ttl = 0;
        if (etcd_lease_grant(c->etcd, c->ttl_ms / 1000, &id, &ttl) == 0) {
            c->lease = id;
            c->ka_sent_ns = now;
            c->member_lease = 0;   /* publish again under the new lease */
        } else {
            state(c, "cannot reach etcd for a lease: %s", etcd_error(c->etcd));
        }
        return;
    }
    if (now - c->ka_sent_ns < c->ka_every_ms * 1000000)
        return;
    int64_t ttl = 0;
    if (etcd_lease_keepalive(c->etcd, c->lease, &ttl) != 0) {
        state(c, "cannot renew the lease: %s", etcd_error(c->etcd));
        return;
    }
    if (ttl <= 0) {
        /* expired - or a member that is behind (an old leader just resumed)
         * does not know it: a linearizable read of a key put under the
         * lease tells */
        const char *k = c->leader ? c->k_leader : c->member_lease == c->lease ? c->k_member : NULL;
        if (k) {
            etcd_kv_t kv;
            int found = 0;
            if (etcd_get(c->etcd, k, strlen(k), &kv, &found, NULL) != 0) {
                state(c, "cannot renew the lease: a member answered it is gone, and %s cannot be read: %s", k,
                      etcd_error(c->etcd));
                return;
            }
            bool alive = found && kv.lease == c->lease;
            if (found)
                etcd_kv_free(&kv);
            if (alive) {
                state(c, "an etcd member answered that lease %" PRId64 " is gone, but %s is still held under it", c->lease,
                      k);
                return;
            }
        }
        log_warn("coordinator: lease %" PRId64 " expired in etcd; taking a new one", c->lease);
        c->lease = 0;
        return;
    }
    c->ka_sent_ns = now;
}

/* ----------------------------------------------------------- members -- */

static void publish_member(coord_t *c, const repl_position_t *pos)
{
    if (!c->lease)
        return;
    json_t *o = json_pack("{s:s,s:I,s:I,s:b,s:s,s:s,s:s,s:b}", "url", c->self, "epoch", (json_int_t)pos->epoch,
                          "offset", (json_int_t)pos->offset, "led", pos->led, "role", repl_role_names[pos->role],
                          "replica_id", pos->replica_id, "primary", pos->primary, "vacant", c->vacant);
    char *v = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!v)
        return;
    if (c->member_lease != c->lease || strcmp(v, c->member_value) != 0) {
        if (etcd_put(c->etcd, c->k_member, strlen(c->k_member), v, strlen(v), c->lease, NULL) == 0) {
            snprintf(c->member_value, sizeof(c->member_value), "%s", v);
            c->member_lease = c->lease;
        }
    }
    free(v);
}

typedef struct member {
    char url[OPTS_PEER_URL_MAX];
    char replica_id[CMD_REPL_ID_MAX];
    uint64_t epoch, offset;
    bool led;
    bool vacant;                     /* published after it found no leader key, its position read since */
} member_t;

static bool member_parse(const etcd_kv_t *kv, member_t *m)
{
    json_error_t je;
    json_t *o = json_loadb(kv->value, kv->value_len, 0, &je);
    const char *url = json_string_value(json_object_get(o, "url"));
    const char *rid = json_string_value(json_object_get(o, "replica_id"));
    json_t *e = json_object_get(o, "epoch"), *off = json_object_get(o, "offset");
    bool ok = url && json_is_integer(e) && json_is_integer(off) && json_integer_value(e) >= 0 &&
              json_integer_value(off) >= 0;
    if (ok) {
        snprintf(m->url, sizeof(m->url), "%s", url);
        snprintf(m->replica_id, sizeof(m->replica_id), "%s", rid ? rid : "");
        m->epoch = (uint64_t)json_integer_value(e);
        m->offset = (uint64_t)json_integer_value(off);
        m->led = json_is_true(json_object_get(o, "led"));
        m->vacant = json_is_true(json_object_get(o, "vacant"));
    }
    json_decref(o);
    return ok;
}

/* a ranks above b */
static bool ranks_above(const member_t *a, const member_t *b)
{
    if (a->epoch != b->epoch)
        return a->epoch > b->epoch;
    if (a->offset != b->offset)
        return a->offset > b->offset;
    if (a->led != b->led)
        return a->led;
    return strcmp(a->url, b->url) < 0;
}

/* ----------------------------------------------------------- election -- */

static void become_leader(coord_t *c, uint64_t epoch)
{
    repl_t *r = c->r;
    char err[700];
    /* the key was put under a live lease: it covers this node until the
     * deadline of its last keepalive */
    repl_coord_deadline(r, deadline_of(c));
    pthread_mutex_lock(&r->role_mu);
    bool ok = repl_coord_promote(r, epoch, err, sizeof(err));
    pthread_mutex_unlock(&r->role_mu);
    if (!ok) {
        log_error("coordinator: won the election under epoch %" PRIu64 " but the promotion failed (%s): giving the "
                  "key up",
                  epoch, err);
        repl_coord_deadline(r, 0);
        etcd_lease_revoke(c->etcd, c->lease);
        c->lease = 0;
        return;
    }
    c->leader = true;
    c->epoch = epoch;
    c->nsync_pub = 0;
    c->sync_published = false;
    c->rm_floor = 0;
    log_info("coordinator: this node is the primary of %s under epoch %" PRIu64, c->k_leader, epoch);
    state(c, "primary under epoch %" PRIu64, epoch);
}

/* Raises etcd's revision above `known` (a data directory that has seen
 * epochs before etcd held the group): the next key created is above it. */
static bool raise_revision(coord_t *c, uint64_t known, int64_t revision)
{
    int rounds = 0;
    while ((uint64_t)revision + 1 <= known) {
        if (++rounds > 100000) {
            state(c, "etcd's revision %" PRId64 " is far below this node's epoch %" PRIu64 ": not raising it further",
                  revision, known);
            return false;
        }
        if (etcd_put(c->etcd, c->k_floor, strlen(c->k_floor), "1", 1, 0, &revision) != 0)
            return false;
    }
    return true;
}

static void elect(coord_t *c, const repl_position_t *pos)
{
    if (!c->lease)
        return;
    etcd_range_t mr;
    if (etcd_get_prefix(c->etcd, c->k_members, strlen(c->k_members), &mr) != 0) {
        state(c, "no primary, and the members cannot be read: %s", etcd_error(c->etcd));
        return;
    }
    member_t me = {0}, best = {0};
    snprintf(me.url, sizeof(me.url), "%s", c->self);
    snprintf(me.replica_id, sizeof(me.replica_id), "%s", pos->replica_id);
    me.epoch = pos->epoch;
    me.offset = pos->offset;
    me.led = pos->led;
    best = me;
    member_t *ms = calloc(mr.n ? mr.n : 1, sizeof(*ms));
    size_t nm = 0;
    const member_t *stale = NULL;
    for (size_t i = 0; ms && i < mr.n; i++) {
        if (!member_parse(&mr.kvs[i], &ms[nm]) || !strcmp(ms[nm].url, c->self))
            continue;
        if (ranks_above(&ms[nm], &best))
            best = ms[nm];
        nm++;
    }
    /* Positions are compared only once each member has published one read
     * after it too found no leader key: the last primary stopped taking
     * changes before its key could go, so such a position holds every
     * change the member acknowledged; one published earlier may be short of
     * them (a member that could not reach etcd for a while), and the highest
     * position it hides would be lost. */
    for (size_t j = 0; j < nm && !stale; j++)
        if (!ms[j].vacant)
            stale = &ms[j];
    int64_t revision = mr.revision;
    etcd_range_free(&mr);
    if (!ms)
        return;
    if (stale) {
        state(c, "no primary; waiting for %s to publish its position since the leader key went", stale->url);
        free(ms);
        return;
    }
    if (strcmp(best.url, c->self) != 0) {
        state(c, "no primary; %s holds the highest position (epoch %" PRIu64 ", offset %" PRIu64
                 ") and may take the key",
              best.url, best.epoch, best.offset);
        free(ms);
        return;
    }
    /* --min-replicas-ack: a replica that acknowledged every answered change
     * must be among those that answer */
    etcd_kv_t skv;
    int found = 0;
    if (etcd_get(c->etcd, c->k_sync, strlen(c->k_sync), &skv, &found, NULL) != 0) {
        free(ms);
        return;
    }
    if (found) {
        json_error_t je;
        json_t *o = json_loadb(skv.value, skv.value_len, 0, &je);
        etcd_kv_free(&skv);
        json_t *list = json_object_get(o, "replicas");
        uint64_t sepoch = (uint64_t)json_integer_value(json_object_get(o, "epoch"));
        int k = (int)json_integer_value(json_object_get(o, "min_acks"));
        int n = (int)json_array_size(list), present = 0;
        for (int i = 0; i < n; i++) {
            const char *id = json_string_value(json_array_get(list, (size_t)i));
            if (!id || !id[0])
                continue;
            bool here = !strcmp(id, me.replica_id);
            for (size_t j = 0; j < nm && !here; j++) {
                here = !strcmp(id, ms[j].replica_id);
                /* a replica of the set's primary that publishes an older
                 * epoch saw no key before it followed that primary, and
                 * could not publish since: what it acknowledged is unknown */
                if (here && ms[j].epoch < sepoch && !stale)
                    stale = &ms[j];
            }
            present += here;
        }
        if (stale) {
            state(c, "no primary; waiting for %s, a replica counted under epoch %" PRIu64 ", to publish its position "
                     "in that epoch",
                  stale->url, sepoch);
            json_decref(o);
            free(ms);
            return;
        }
        json_decref(o);
        /* the set of the newest epoch any member knows binds (a set of a
         * newer epoch than every answering member's: none of its replicas
         * answers); the primary of that epoch itself - fenced, or restarted
         * on its journal - holds every change it answered */
        bool its_primary = best.led && best.epoch == sepoch;
        if (sepoch >= best.epoch && !its_primary && k > 0 && present < n - k + 1) {
            state(c, "no primary; only %d of the %d replicas that count for --min-replicas-ack %d under epoch %" PRIu64
                     " answer (%d needed): waiting, so no acknowledged change is lost",
                  present, n, k, sepoch, n - k + 1);
            free(ms);
            return;
        }
    }
    free(ms);
    if (!raise_revision(c, pos->epoch, revision))   /* pos->epoch: the highest this node knows */
        return;
    json_t *lv = json_pack("{s:s,s:I}", "url", c->self, "lease", (json_int_t)c->lease);
    char *v = lv ? json_dumps(lv, JSON_COMPACT) : NULL;
    json_decref(lv);
    if (!v)
        return;
    etcd_cmp_t absent = { .key = c->k_leader, .key_len = strlen(c->k_leader), .target = ETCD_TARGET_CREATE,
                          .op = ETCD_CMP_EQUAL, .number = 0 };
    etcd_op_t put = { .kind = ETCD_OP_PUT, .key = c->k_leader, .key_len = strlen(c->k_leader), .value = v,
                      .value_len = strlen(v), .lease = c->lease };
    etcd_op_t get = { .kind = ETCD_OP_GET, .key = c->k_leader, .key_len = strlen(c->k_leader) };
    etcd_txn_result_t t;
    int rc = etcd_txn(c->etcd, &absent, 1, &put, 1, &get, 1, &t);
    free(v);
    if (rc != 0) {
        state(c, "taking the leader key failed: %s", etcd_error(c->etcd));
        return;
    }
    uint64_t epoch = 0;
    if (t.succeeded) {
        epoch = (uint64_t)t.revision;
    } else if (t.n == 1 && t.results[0].n == 1 && t.results[0].kvs[0].lease == c->lease) {
        epoch = (uint64_t)t.results[0].kvs[0].create_revision;   /* a retried request that had succeeded */
    }
    etcd_txn_free(&t);
    if (epoch)
        become_leader(c, epoch);
}

/* ----------------------------------------------------------- the sync set -- */

static bool in_list(char (*list)[CMD_REPL_ID_MAX], int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], id))
            return true;
    return false;
}

/* The connected replicas of the published set count from now on (again,
 * for one that stopped polling and came back). */
static void sync_count(coord_t *c)
{
    repl_t *r = c->r;
    pthread_mutex_lock(&r->mu);
    int64_t now = mono_ms();
    for (int i = 0; i < r->npeers; i++)
        if (repl_peer_alive(&r->peers[i], now) && in_list(c->sync_pub, c->nsync_pub, r->peers[i].id))
            r->peers[i].counted = true;
    pthread_mutex_unlock(&r->mu);
}

static void sync_step(coord_t *c)
{
    if (c->min_acks == 0)
        return;
    repl_t *r = c->r;
    char want[COORD_MAX_SYNC][CMD_REPL_ID_MAX];
    int nwant = 0, holders = 0;
    pthread_mutex_lock(&r->mu);
    int64_t now = mono_ms();
    for (int i = 0; i < r->npeers; i++) {
        peer_t *pe = &r->peers[i];
        bool alive = repl_peer_alive(pe, now);
        if (pe->counted && !alive) {
            pe->counted = false;   /* stops counting at once; published once enough others hold rm_floor */
            c->rm_floor = r->safe > c->rm_floor ? r->safe : c->rm_floor;
        }
        if (alive && nwant < COORD_MAX_SYNC)
            snprintf(want[nwant++], CMD_REPL_ID_MAX, "%s", pe->id);
        holders += pe->counted && alive && pe->acked >= c->rm_floor;
    }
    pthread_mutex_unlock(&r->mu);
    /* a replica leaves the published set only once every change answered
     * so far is held by min_acks replicas that stay in it (then |S| - k + 1
     * answering members of the new set include one of them) */
    bool caught = c->rm_floor == 0 || holders >= c->min_acks;
    char next[COORD_MAX_SYNC][CMD_REPL_ID_MAX];
    int nnext = 0;
    for (int i = 0; i < nwant; i++)
        memcpy(next[nnext++], want[i], CMD_REPL_ID_MAX);
    if (!caught)
        for (int i = 0; i < c->nsync_pub && nnext < COORD_MAX_SYNC; i++)
            if (!in_list(next, nnext, c->sync_pub[i]))
                memcpy(next[nnext++], c->sync_pub[i], CMD_REPL_ID_MAX);
    bool same = c->sync_published && nnext == c->nsync_pub;
    for (int i = 0; same && i < nnext; i++)
        same = in_list(c->sync_pub, c->nsync_pub, next[i]);
    if (same) {
        sync_count(c);
        return;
    }
    json_t *list = json_array();
    for (int i = 0; i < nnext; i++)
        json_array_append_new(list, json_string(next[i]));
    json_t *o = json_pack("{s:I,s:i,s:o}", "epoch", (json_int_t)c->epoch, "min_acks", c->min_acks, "replicas", list);
    char *v = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!v)
        return;
    /* only while this node still holds the leader key of its epoch */
    etcd_cmp_t mine = { .key = c->k_leader, .key_len = strlen(c->k_leader), .target = ETCD_TARGET_CREATE,
                        .op = ETCD_CMP_EQUAL, .number = (int64_t)c->epoch };
    etcd_op_t put = { .kind = ETCD_OP_PUT, .key = c->k_sync, .key_len = strlen(c->k_sync), .value = v,
                      .value_len = strlen(v) };
    etcd_txn_result_t t;
    int rc = etcd_txn(c->etcd, &mine, 1, &put, 1, NULL, 0, &t);
    free(v);
    if (rc != 0)
        return;
    bool ok = t.succeeded;
    etcd_txn_free(&t);
    if (!ok)
        return;
    memcpy(c->sync_pub, next, sizeof(next[0]) * (size_t)nnext);
    c->nsync_pub = nnext;
    c->sync_published = true;
    sync_count(c);
}

/* ------------------------------------------------------------- a round -- */

static void lose_leadership(coord_t *c, const char *why)
{
    if (!c->leader)
        return;
    c->leader = false;
    repl_coord_deadline(c->r, 0);
    pthread_mutex_lock(&c->r->role_mu);
    repl_coord_fence(c->r);
    pthread_mutex_unlock(&c->r->role_mu);
    log_error("coordinator: no longer the primary of epoch %" PRIu64 ": %s", c->epoch, why);
}

static void round_once(coord_t *c)
{
    repl_t *r = c->r;
    lease_step(c);
    if (c->leader) {
        if (!c->lease)
            lose_leadership(c, "its lease expired in etcd");
        else
            repl_coord_deadline(r, deadline_of(c));
    }
    etcd_kv_t kv;
    int found = 0;
    bool read = etcd_get(c->etcd, c->k_leader, strlen(c->k_leader), &kv, &found, NULL) == 0;
    if (read)
        c->vacant = !found;
    /* the position is read after the key: one published as vacant holds
     * everything this member acknowledged before the last primary's key went */
    repl_position_t pos;
    repl_coord_position(r, &pos);
    publish_member(c, &pos);
    if (!read) {
        state(c, "cannot read %s: %s", c->k_leader, etcd_error(c->etcd));
        return;   /* a leader's deadline runs out by itself */
    }
    if (!found) {
        lose_leadership(c, "its key is gone from etcd");
        elect(c, &pos);
        return;
    }
    json_error_t je;
    json_t *o = json_loadb(kv.value, kv.value_len, 0, &je);
    char url[OPTS_PEER_URL_MAX] = "";
    const char *u = json_string_value(json_object_get(o, "url"));
    if (u)
        snprintf(url, sizeof(url), "%s", u);
    json_decref(o);
    uint64_t epoch = (uint64_t)kv.create_revision;
    int64_t lease = kv.lease;
    etcd_kv_free(&kv);
    if (c->leader && lease == c->lease && epoch == c->epoch) {
        state(c, "primary under epoch %" PRIu64, epoch);
        sync_step(c);
        return;
    }
    lose_leadership(c, "another node holds its key");
    if (!url[0] || (!strcmp(url, c->self))) {
        /* a key of this node's previous run: it lapses with that lease */
        state(c, "the leader key names this node under another lease (an earlier run): waiting for it to lapse");
        return;
    }
    if (pos.role == ROLE_REPLICA && !strcmp(pos.primary, url))
        return;
    char err[200];
    pthread_mutex_lock(&r->role_mu);
    bool ok = repl_follow(r, url, epoch, err, sizeof(err));
    pthread_mutex_unlock(&r->role_mu);
    if (ok)
        state(c, "following %s, the primary of epoch %" PRIu64, url, epoch);
    else
        log_error("coordinator: %s", err);
}

static void *coord_main(void *arg)
{
    coord_t *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        pthread_mutex_unlock(&c->mu);
        round_once(c);
        pthread_mutex_lock(&c->mu);
        if (c->stop)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += COORD_STEP_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ------------------------------------------------------------ lifecycle -- */

etcd_client_t *coord_etcd_open(const tally_opts_t *o, long timeout_ms, char *err, size_t errlen)
{
    char why[512], password[512] = "";
    if (o->coordinator_password_file[0] &&
        !repl_secret_read("--coordinator-password-file", o->coordinator_password_file, password, sizeof(password),
                          err, errlen))
        return NULL;
    etcd_config_t cfg = {
        .endpoints = o->coordinator,
        .cacert = o->coordinator_cacert[0] ? o->coordinator_cacert : NULL,
        .cert = o->coordinator_cert[0] ? o->coordinator_cert : NULL,
        .key = o->coordinator_key[0] ? o->coordinator_key : NULL,
        .user = o->coordinator_user[0] ? o->coordinator_user : NULL,
        .password = o->coordinator_user[0] ? password : NULL,
        .timeout_ms = timeout_ms,
        .connect_timeout_ms = timeout_ms,
    };
    etcd_client_t *e = etcd_open(&cfg, why, sizeof(why));
    explicit_bzero(password, sizeof(password));
    if (!e)
        snprintf(err, errlen, "--coordinator %.300s: %.500s", o->coordinator, why);
    return e;
}

coord_t *coord_open(const tally_opts_t *o, repl_t *r, char *err, size_t errlen)
{
    coord_t *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->r = r;
    snprintf(c->self, sizeof(c->self), "%s", o->advertise_url);
    size_t sl = strlen(c->self);
    while (sl && c->self[sl - 1] == '/')
        c->self[--sl] = '\0';
    char prefix[sizeof(o->coordinator_prefix)];
    snprintf(prefix, sizeof(prefix), "%s", o->coordinator_prefix);
    size_t pl = strlen(prefix);
    while (pl > 1 && prefix[pl - 1] == '/')
        prefix[--pl] = '\0';
    snprintf(c->k_leader, sizeof(c->k_leader), "%s/leader", prefix);
    snprintf(c->k_members, sizeof(c->k_members), "%s/members/", prefix);
    snprintf(c->k_member, sizeof(c->k_member), "%s/members/%s", prefix, c->self);
    snprintf(c->k_sync, sizeof(c->k_sync), "%s/sync", prefix);
    snprintf(c->k_floor, sizeof(c->k_floor), "%s/epoch-floor", prefix);
    c->ttl_ms = (int64_t)o->coordinator_ttl * 1000;
    c->ka_every_ms = c->ttl_ms / 4;
    c->margin_ms = c->ttl_ms / 5;
    c->min_acks = o->min_replicas_ack;
    long timeout = c->ttl_ms / 4 < 300 ? 300 : c->ttl_ms / 4;
    c->etcd = coord_etcd_open(o, timeout, err, errlen);
    if (!c->etcd) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, coord_main, c) != 0) {
        snprintf(err, errlen, "cannot start the coordinator's thread");
        coord_close(c);
        return NULL;
    }
    c->thread_on = true;
    log_info("coordinator: %s, group %s, this node %s, lease %d s", o->coordinator, prefix, c->self,
             o->coordinator_ttl);
    return c;
}

void coord_close(coord_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->thread_on)
        pthread_join(c->thread, NULL);
    if (c->leader)
        repl_coord_deadline(c->r, 0);
    if (c->lease)   /* the key and the position go now: the others need not wait for the TTL */
        etcd_lease_revoke(c->etcd, c->lease);
    etcd_close(c->etcd);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}
