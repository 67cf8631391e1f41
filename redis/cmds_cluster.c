/* cmds_cluster.c - Redis Cluster's commands on tally's cluster map
 * (cmd/cluster.h, core/clustermap.h), so that cluster clients (redis-cli
 * -c, redis-py's RedisCluster, ...) route commands themselves:
 *
 *   CLUSTER SLOTS | SHARDS | NODES | MYID | KEYSLOT | INFO | HELP
 *   READONLY, READWRITE, ASKING
 *
 * and the checks redis_run makes before admission (redis_cluster_admit):
 * every key a command names in one slot (CROSSSLOT), that slot this node's
 * (MOVED; ASK while it migrates; ASKING honoured for the next command), and
 * on a replica, reads only after READONLY (else MOVED to the primary, as a
 * Redis Cluster replica answers).  The addresses named are the nodes' Redis
 * ports: the map's `resp=HOST:PORT` on each node line.
 *
 * A node's id (Redis's 40 hex digits) is derived from its name in the map,
 * so every node names every other the same way and ids survive restarts.
 * On a node without --cluster, CLUSTER answers Redis's "cluster support
 * disabled" error, READONLY too (ASKING and READWRITE as well), as Redis does.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <xxhash.h>

#include "cmd/cluster.h"
#include "core/slot.h"
#include "redis/redis_int.h"

#define ERR_DISABLED "ERR This instance has cluster support disabled"
#define NODE_ID_LEN 40

/* ------------------------------------------------------------------------ */
/* Nodes                                                                    */
/* ------------------------------------------------------------------------ */

/* A node's Redis Cluster id: 40 hex digits from its name. */
static void node_id(const char *name, char out[NODE_ID_LEN + 1])
{
    size_t n = strlen(name);
    XXH128_hash_t h = XXH3_128bits(name, n);
    uint32_t x = XXH32(name, n, 0x7a11);
    snprintf(out, NODE_ID_LEN + 1, "%016" PRIx64 "%016" PRIx64 "%08" PRIx32, h.high64, h.low64, x);
}

/* The host and port of "host:port" ("[v6]:port" loses its brackets). */
static bool split_addr(const char *addr, char *host, size_t hostlen, long *port)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || !addr[0])
        return false;
    const char *h = addr;
    size_t hl = (size_t)(colon - addr);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= hostlen)
        return false;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = strtol(colon + 1, NULL, 10);
    return true;
}

/* The map (read-locked until map_end), or NULL with the error answered:
 * cluster support off, no map yet, or a node without its Redis address. */
static const cmap_t *map_begin(redis_conn_t *c, int *self)
{
    cmd_cluster_t *cl = c->cfg->srv->cluster;
    if (!cl) {
        redis_err(c, ERR_DISABLED);
        return NULL;
    }
    const cmap_t *m = cmd_cluster_read(cl, self, NULL);
    if (!m) {
        cmd_cluster_read_end(cl);
        redis_err(c, "CLUSTERDOWN this node has no cluster map yet");
        return NULL;
    }
    for (size_t i = 0; i < m->nnodes; i++)
        if (!m->nodes[i].resp[0]) {
            cmd_cluster_read_end(cl);
            redis_err(c, "ERR the cluster map gives node '%s' no Redis address: add resp=HOST:PORT (its "
                         "--resp-port) to its node line", m->nodes[i].name);
            return NULL;
        }
    return m;
}

static void map_end(redis_conn_t *c) { cmd_cluster_read_end(c->cfg->srv->cluster); }

static void bulk_str(redis_conn_t *c, const char *s) { resp_reply_bulk(redis_conn_out(c), s, strlen(s)); }

/* ------------------------------------------------------------------------ */
/* CLUSTER                                                                  */
/* ------------------------------------------------------------------------ */

static unsigned count_runs(const cmap_t *m, int node)
{
    unsigned n = 0;
    for (unsigned s = 0; s < SLOT_COUNT;) {
        unsigned e = cmap_run_end(m, s, false);
        n += node < 0 || m->owner[s] == node;
        s = e + 1;
    }
    return n;
}

/* [host, port, id, {}]: a node as CLUSTER SLOTS names it. */
static void slots_node(redis_conn_t *c, const cmap_node_t *nd)
{
    char host[CMAP_ADDR_MAX + 1], id[NODE_ID_LEN + 1];
    long port = 0;
    if (!split_addr(nd->resp, host, sizeof(host), &port))
        host[0] = '\0';
    node_id(nd->name, id);
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, 4);
    bulk_str(c, host);
    resp_reply_int(o, port);
    bulk_str(c, id);
    resp_reply_map(o, 0);
}

static void cluster_slots(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    const cmap_t *m = map_begin(c, NULL);
    if (!m)
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, count_runs(m, -1));
    for (unsigned s = 0; s < SLOT_COUNT;) {
        unsigned e = cmap_run_end(m, s, false);
        resp_reply_array(o, 3);
        resp_reply_int(o, s);
        resp_reply_int(o, e);
        slots_node(c, &m->nodes[m->owner[s]]);
        s = e + 1;
    }
    map_end(c);
}

static void cluster_shards(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    const cmap_t *m = map_begin(c, NULL);
    if (!m)
        return;
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, m->nnodes);
    for (size_t i = 0; i < m->nnodes; i++) {
        const cmap_node_t *nd = &m->nodes[i];
        resp_reply_map(o, 2);
        bulk_str(c, "slots");
        resp_reply_array(o, 2 * (size_t)count_runs(m, (int)i));
        for (unsigned s = 0; s < SLOT_COUNT;) {
            unsigned e = cmap_run_end(m, s, false);
            if (m->owner[s] == i) {
                resp_reply_int(o, s);
                resp_reply_int(o, e);
            }
            s = e + 1;
        }
        bulk_str(c, "nodes");
        resp_reply_array(o, 1);
        char host[CMAP_ADDR_MAX + 1], id[NODE_ID_LEN + 1];
        long port = 0;
        if (!split_addr(nd->resp, host, sizeof(host), &port))
            host[0] = '\0';
        node_id(nd->name, id);
        resp_reply_map(o, 7);
        bulk_str(c, "id");
        bulk_str(c, id);
        bulk_str(c, "port");
        resp_reply_int(o, port);
        bulk_str(c, "ip");
        bulk_str(c, host);
        bulk_str(c, "endpoint");
        bulk_str(c, host);
        bulk_str(c, "role");
        bulk_str(c, "master");
        bulk_str(c, "replication-offset");
        resp_reply_int(o, 0);
        bulk_str(c, "health");
        bulk_str(c, "online");
    }
    map_end(c);
}

/* Appends to b[*n..cap) (silently stops at the end: the caller sizes b). */
static void put(char *b, size_t cap, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *b, size_t cap, size_t *n, const char *fmt, ...)
{
    if (*n >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b + *n, cap - *n, fmt, ap);
    va_end(ap);
    if (w > 0)
        *n = *n + (size_t)w < cap ? *n + (size_t)w : cap;
}

static void cluster_nodes(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    int self = -1;
    const cmap_t *m = map_begin(c, &self);
    if (!m)
        return;
    /* a line per node: its fields, then its ranges (at most 16384 runs in
     * all, each " LO-HI" at most 12 bytes), and this node's moving slots
     * (each " [S->-ID]" at most 52 bytes) */
    size_t cap = m->nnodes * (2 * CMAP_ADDR_MAX + 200) + (size_t)SLOT_COUNT * (12 + 52) + 64, n = 0;
    char *b = malloc(cap);
    if (!b) {
        map_end(c);
        redis_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    for (size_t i = 0; i < m->nnodes; i++) {
        const cmap_node_t *nd = &m->nodes[i];
        char id[NODE_ID_LEN + 1];
        node_id(nd->name, id);
        put(b, cap, &n, "%s %s@0 %smaster - 0 0 %" PRIu64 " connected", id, nd->resp, (int)i == self ? "myself," : "",
            m->epoch);
        for (unsigned s = 0; s < SLOT_COUNT;) {
            unsigned e = cmap_run_end(m, s, false);
            if (m->owner[s] == i) {
                if (s == e)
                    put(b, cap, &n, " %u", s);
                else
                    put(b, cap, &n, " %u-%u", s, e);
            }
            s = e + 1;
        }
        if ((int)i == self)
            for (unsigned s = 0; s < SLOT_COUNT; s++) {
                int to = m->migrating_to[s];
                if (to < 0)
                    continue;
                char other[NODE_ID_LEN + 1];
                if (m->owner[s] == i) {
                    node_id(m->nodes[to].name, other);
                    put(b, cap, &n, " [%u->-%s]", s, other);
                } else if (to == self) {
                    node_id(m->nodes[m->owner[s]].name, other);
                    put(b, cap, &n, " [%u-<-%s]", s, other);
                }
            }
        put(b, cap, &n, "\n");
    }
    map_end(c);
    resp_reply_verbatim(redis_conn_out(c), b, n, "txt");
    free(b);
}

static void cluster_myid(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    cmd_cluster_t *cl = c->cfg->srv->cluster;
    if (!cl) {
        redis_err(c, ERR_DISABLED);
        return;
    }
    const char *name = NULL;
    cmd_cluster_read(cl, NULL, &name);
    char id[NODE_ID_LEN + 1];
    node_id(name, id);
    cmd_cluster_read_end(cl);
    bulk_str(c, id);
}

static void cluster_keyslot(redis_conn_t *c, const resp_cmd_t *cmd)
{
    if (!c->cfg->srv->cluster) {
        redis_err(c, ERR_DISABLED);
        return;
    }
    resp_reply_int(redis_conn_out(c), slot_of(cmd->argv[2].ptr, cmd->argv[2].len));
}

static void cluster_info(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    cmd_cluster_t *cl = c->cfg->srv->cluster;
    if (!cl) {
        redis_err(c, ERR_DISABLED);
        return;
    }
    const cmap_t *m = cmd_cluster_read(cl, NULL, NULL);
    char b[1024];
    size_t n = 0;
    size_t owners = 0;
    if (m)
        for (size_t i = 0; i < m->nnodes; i++)
            owners += count_runs(m, (int)i) > 0;
    put(b, sizeof(b), &n,
        "cluster_state:%s\r\ncluster_slots_assigned:%u\r\ncluster_slots_ok:%u\r\ncluster_slots_pfail:0\r\n"
        "cluster_slots_fail:0\r\ncluster_known_nodes:%zu\r\ncluster_size:%zu\r\ncluster_current_epoch:%" PRIu64 "\r\n"
        "cluster_my_epoch:%" PRIu64 "\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n"
        "total_cluster_links_buffer_limit_exceeded:0\r\n",
        m ? "ok" : "fail", m ? SLOT_COUNT : 0, m ? SLOT_COUNT : 0, m ? m->nnodes : 0, owners, m ? m->epoch : 0,
        m ? m->epoch : 0);
    cmd_cluster_read_end(cl);
    resp_reply_verbatim(redis_conn_out(c), b, n, "txt");
}

static void cluster_help(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    static const char *const lines[] = {
        "CLUSTER <subcommand>: tally's cluster map as Redis Cluster clients read it.",
        "INFO",
        "    The cluster's state, slots, nodes and epoch.",
        "KEYSLOT <key>",
        "    The slot of <key>: CRC16 of the key or its {hash tag}, mod 16384.",
        "MYID",
        "    This node's id (from its name in the map).",
        "NODES",
        "    One line per node: id, Redis address, flags, epoch, slot ranges.",
        "SHARDS",
        "    Each node's slot ranges and address.",
        "SLOTS",
        "    Each slot range with its node's address and id.",
        "HELP",
        "    This text.",
    };
    resp_out_t *o = redis_conn_out(c);
    resp_reply_array(o, sizeof(lines) / sizeof(lines[0]));
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        resp_reply_simple(o, lines[i], strlen(lines[i]));
}

#define CL_STALE REDIS_CF_STALE
static const redis_cmd_t cluster_subs[] = {
    { "cluster|help", 2, REDIS_CF_LOADING | REDIS_CF_STALE, "@slow", 0, 0, 0, cluster_help, NULL },
    { "cluster|info", 2, CL_STALE, "@slow", 0, 0, 0, cluster_info, NULL },
    { "cluster|keyslot", 3, CL_STALE, "@slow", 0, 0, 0, cluster_keyslot, NULL },
    { "cluster|myid", 2, CL_STALE, "@slow", 0, 0, 0, cluster_myid, NULL },
    { "cluster|nodes", 2, CL_STALE, "@slow", 0, 0, 0, cluster_nodes, NULL },
    { "cluster|shards", 2, CL_STALE, "@slow", 0, 0, 0, cluster_shards, NULL },
    { "cluster|slots", 2, CL_STALE, "@slow", 0, 0, 0, cluster_slots, NULL },
    { NULL, 0, 0, NULL, 0, 0, 0, NULL, NULL },
};

static void cluster_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    const resp_arg_t *sub = &cmd->argv[1];
    for (const redis_cmd_t *r = cluster_subs; r->name; r++) {
        const char *name = r->name + sizeof("cluster|") - 1;   /* rows are named as Redis's: "cluster|slots" */
        if (sub->len != strlen(name) || strncasecmp(sub->ptr, name, sub->len) != 0)
            continue;
        if ((r->arity > 0 && (size_t)r->arity != cmd->argc) || (r->arity < 0 && cmd->argc < (size_t)-r->arity)) {
            redis_err(c, "ERR wrong number of arguments for '%s' command", r->name);
            return;
        }
        r->fn(c, cmd);
        return;
    }
    const char *z = memchr(sub->ptr, '\0', sub->len);
    size_t n = z ? (size_t)(z - sub->ptr) : sub->len;
    redis_err(c, "ERR unknown subcommand '%.*s'. Try CLUSTER HELP.", (int)(n > 128 ? 128 : n), sub->ptr);
}

/* ------------------------------------------------------------------------ */
/* READONLY, READWRITE, ASKING                                              */
/* ------------------------------------------------------------------------ */

static void readonly_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    if (!c->cfg->srv->cluster) {
        redis_err(c, ERR_DISABLED);
        return;
    }
    c->readonly = true;
    redis_ok(c);
}

static void readwrite_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    if (!c->cfg->srv->cluster) {
        redis_err(c, ERR_DISABLED);
        return;
    }
    c->readonly = false;
    redis_ok(c);
}

static void asking_command(redis_conn_t *c, const resp_cmd_t *cmd)
{
    (void)cmd;
    if (!c->cfg->srv->cluster) {
        redis_err(c, ERR_DISABLED);
        return;
    }
    c->asking = true;   /* for the next command only (conn.c's dispatch) */
    redis_ok(c);
}

/* ------------------------------------------------------------------------ */
/* The checks before admission                                              */
/* ------------------------------------------------------------------------ */

struct key_walk {
    ks_key_t keys[2];            /* the first key, and the first in another slot */
    size_t n;
    unsigned slot;
};

static bool visit_key(void *ud, const char *key, size_t len)
{
    struct key_walk *w = ud;
    unsigned s = slot_of(key, len);
    if (w->n == 0) {
        w->slot = s;
    } else if (s == w->slot) {
        return true;
    }
    w->keys[w->n].p = key;
    w->keys[w->n].len = len;
    w->n++;
    return w->n < 2;   /* a second slot: CROSSSLOT, no need to look further */
}

/* The checks on the keys walked (w), for a command that writes or not. */
static bool keys_check(redis_conn_t *c, cmd_ctx_t *ctx, const struct key_walk *w, bool writes)
{
    cmd_cluster_t *cl = c->cfg->srv->cluster;
    if (w->n == 0)
        return true;
    if (!cmd_cluster_keys_check(ctx, w->keys, w->n, false))
        return false;
    /* a replica serves reads after READONLY; else, as a Redis Cluster
     * replica, it sends the client to the slot's primary */
    const cmd_hooks_t *h = &c->cfg->srv->hooks;
    const char *role = h->role ? h->role(h->ud) : "primary";
    if (strcmp(role, "primary") == 0 || (c->readonly && !writes))
        return true;
    const cmap_t *m = cmd_cluster_read(cl, NULL, NULL);
    if (m) {
        const cmap_node_t *nd = &m->nodes[m->owner[w->slot]];
        cmd_fail(ctx, CMD_E_MOVED, NULL, "slot %u is served by the primary of node %s at %s", w->slot, nd->name,
                 nd->addr);
        snprintf(ctx->err.where, sizeof(ctx->err.where), "%s", nd->addr);
        snprintf(ctx->err.node, sizeof(ctx->err.node), "%s", nd->name);
        ctx->err.slot = (int)w->slot;
        ctx->err.epoch = m->epoch;
    }
    cmd_cluster_read_end(cl);
    return m == NULL;
}

bool redis_cluster_admit(redis_conn_t *c, cmd_ctx_t *ctx, const cmd_def_t *def, const void *args)
{
    ctx->asking = c->asking_now;
    if (!c->cfg->srv->cluster || !def->keys)
        return true;
    struct key_walk w = { .n = 0 };
    def->keys(args, visit_key, &w);
    return keys_check(c, ctx, &w, (def->flags & CMD_F_WRITE) != 0);
}

bool redis_cluster_route(redis_conn_t *c, const redis_cmd_t *rc, const resp_cmd_t *cmd)
{
    if (!c->cfg->srv->cluster || rc->first <= 0 || cmd->argc <= (size_t)rc->first)
        return true;
    size_t last = rc->last >= 0 ? (size_t)rc->last : (size_t)((long)cmd->argc + rc->last);
    if (last >= cmd->argc)
        last = cmd->argc - 1;
    size_t step = rc->step > 0 ? (size_t)rc->step : 1;
    struct key_walk w = { .n = 0 };
    for (size_t i = (size_t)rc->first; i <= last; i += step)
        if (!visit_key(&w, cmd->argv[i].ptr, cmd->argv[i].len))
            break;
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, c->cfg->srv, c->cfg->hooks.now_ns(), false, 0);
    ctx.token = c->token;
    ctx.what_verb = "";
    ctx.what_name = rc->name;
    ctx.asking = c->asking_now;
    bool ok = keys_check(c, &ctx, &w, (rc->flags & REDIS_CF_WRITE) != 0);
    if (!ok)
        redis_answer_err(c, &ctx.err);
    cmd_ctx_end(&ctx);
    return ok;
}

void redis_cluster_redirect(redis_conn_t *c, const cmd_err_t *e)
{
    const char *kind = e->code == CMD_E_MOVED ? "MOVED" : "ASK";
    cmd_cluster_t *cl = c->cfg->srv->cluster;
    const cmap_t *m = cl ? cmd_cluster_read(cl, NULL, NULL) : NULL;
    int i = m ? cmap_node_index(m, e->node) : -1;
    char where[CMAP_ADDR_MAX + 1] = "";
    if (i >= 0)
        snprintf(where, sizeof(where), "%s", m->nodes[i].resp);
    if (cl)
        cmd_cluster_read_end(cl);
    if (where[0])
        redis_err(c, "%s %d %s", kind, e->slot, where);
    else
        redis_err(c, "CLUSTERDOWN slot %d is served by node '%s', which the cluster map gives no Redis address "
                     "(resp=HOST:PORT on its node line)", e->slot, e->node);
}

#define CONN_FLAGS REDIS_CF_LOADING | REDIS_CF_STALE | REDIS_CF_FAST
static const redis_cmd_t commands[] = {
    { "asking", 1, REDIS_CF_FAST, "@fast @connection", 0, 0, 0, asking_command, NULL },
    { "cluster", -2, 0, "@slow", 0, 0, 0, cluster_command, cluster_subs },
    { "readonly", 1, CONN_FLAGS, "@fast @connection", 0, 0, 0, readonly_command, NULL },
    { "readwrite", 1, CONN_FLAGS, "@fast @connection", 0, 0, 0, readwrite_command, NULL },
};
REDIS_COMMANDS(cluster);
