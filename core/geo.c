/* geo.c - see geo.h. */
#include "core/geo.h"

#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "core/hash.h"

#define GEO_ENC_VERSION 1            /* first byte of every encoding */
#define LEAF_CAP 64                  /* entries per leaf: 1 KiB of scores + pointers */
#define INNER_CAP 64                 /* children per inner node */
#define LEAF_MIN (LEAF_CAP / 4)      /* below this a leaf merges or borrows */
#define INNER_MIN (INNER_CAP / 4)
#define MAX_DEPTH 24                 /* inner levels; 16^24 members would be needed to exceed it */
#define HASH_SEED 0x67656f7365747331ULL   /* "geosets1": layout only, never observable */
#define MIN_SLOTS 8                  /* smallest hash table */
#define SCORE_LIMIT (1ULL << 54)     /* 27 + 27 bits: the largest cell index GEOADD can produce */

/* ------------------------------------------------------------------------ */
/* Representation                                                           */
/* ------------------------------------------------------------------------ */

typedef struct elem {
    uint64_t score;                  /* current score (the tree keeps its own copy) */
    uint32_t hash;                   /* of the member bytes */
    uint16_t len;
    char m[];
} elem_t;

typedef struct node {
    uint16_t n;                      /* entries (leaf) or children (inner) */
    uint8_t leaf;
} node_t;

typedef struct leaf {
    node_t h;
    struct leaf *prev, *next;
    uint64_t score[LEAF_CAP];
    elem_t *e[LEAF_CAP];
} leaf_t;

/* Child i (i >= 1) holds keys >= (score[i], e[i]) and every key of child
 * i-1 is below it; (score[0], e[0]) is only meaningful transiently.  Every
 * separator equals a key currently in the tree (see tree_fix_separator). */
typedef struct inner {
    node_t h;
    uint64_t score[INNER_CAP];
    elem_t *e[INNER_CAP];
    node_t *child[INNER_CAP];
} inner_t;

struct geo {
    node_t *root;                    /* NULL when empty */
    leaf_t *first;                   /* leftmost leaf */
    elem_t **slots;                  /* hash table, nslots a power of two */
    size_t nslots;
    size_t count;
    size_t bytes;                    /* heap bytes owned, for geo_memory */
};

static inline size_t elem_bytes(size_t len) { return sizeof(elem_t) + len; }

/* Redis's zset order: score, then member bytes (memcmp, shorter first). */
static inline int key_cmp(uint64_t s1, const elem_t *e1, uint64_t s2, const elem_t *e2)
{
    if (s1 != s2)
        return s1 < s2 ? -1 : 1;
    if (e1 == e2)
        return 0;
    size_t l = e1->len < e2->len ? e1->len : e2->len;
    int c = memcmp(e1->m, e2->m, l);
    if (c)
        return c < 0 ? -1 : 1;
    return e1->len < e2->len ? -1 : e1->len > e2->len;
}

/* ------------------------------------------------------------------------ */
/* Hash table: member -> element                                            */
/* ------------------------------------------------------------------------ */

static uint32_t member_hash(const char *m, size_t len) { return (uint32_t)tally_xxh64(m, len, HASH_SEED); }

/* Slot of the member, or SIZE_MAX. */
static size_t slot_find(const geo_t *g, const char *m, size_t len, uint32_t h)
{
    if (!g->nslots)
        return SIZE_MAX;
    size_t mask = g->nslots - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const elem_t *e = g->slots[i];
        if (!e)
            return SIZE_MAX;
        if (e->hash == h && e->len == len && memcmp(e->m, m, len) == 0)
            return i;
    }
}

static void slot_put(elem_t **slots, size_t nslots, elem_t *e)
{
    size_t mask = nslots - 1, i = e->hash & mask;
    while (slots[i])
        i = (i + 1) & mask;
    slots[i] = e;
}

static bool table_resize(geo_t *g, size_t nslots)
{
    elem_t **s = calloc(nslots, sizeof(*s));
    if (!s)
        return false;
    for (size_t i = 0; i < g->nslots; i++)
        if (g->slots[i])
            slot_put(s, nslots, g->slots[i]);
    free(g->slots);
    g->bytes = g->bytes - g->nslots * sizeof(*s) + nslots * sizeof(*s);
    g->slots = s;
    g->nslots = nslots;
    return true;
}

/* Room for one more member at load <= 3/4. */
static bool table_reserve(geo_t *g)
{
    if ((g->count + 1) * 4 <= g->nslots * 3)
        return true;
    return table_resize(g, g->nslots ? g->nslots * 2 : MIN_SLOTS);
}

/* Backward-shift deletion: later members of the probe run move up so that
 * lookups never need tombstones. */
static void slot_delete(geo_t *g, size_t i)
{
    size_t mask = g->nslots - 1, j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!g->slots[j])
            break;
        size_t k = g->slots[j]->hash & mask;   /* home of the member at j */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        g->slots[i] = g->slots[j];
        i = j;
    }
    g->slots[i] = NULL;
}

/* ------------------------------------------------------------------------ */
/* B+tree: (score, member) order                                            */
/* ------------------------------------------------------------------------ */

/* First index in the leaf whose key is >= (s, e). */
static int leaf_lower(const leaf_t *l, uint64_t s, const elem_t *e)
{
    int lo = 0, hi = l->h.n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (key_cmp(l->score[mid], l->e[mid], s, e) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* First index whose score is >= s (e ignored: for range scans). */
static int leaf_lower_score(const leaf_t *l, uint64_t s)
{
    int lo = 0, hi = l->h.n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (l->score[mid] < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The child whose range holds (s, e): the last i >= 1 with key[i] <= (s, e),
 * else 0. */
static int inner_child(const inner_t *in, uint64_t s, const elem_t *e)
{
    int lo = 1, hi = in->h.n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (key_cmp(in->score[mid], in->e[mid], s, e) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* The child that may hold the first key with score >= s. */
static int inner_child_score(const inner_t *in, uint64_t s)
{
    int lo = 1, hi = in->h.n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (in->score[mid] < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

typedef struct path {
    inner_t *node[MAX_DEPTH];
    int idx[MAX_DEPTH];
    int depth;
} path_t;

static leaf_t *descend(const geo_t *g, uint64_t s, const elem_t *e, path_t *p)
{
    node_t *nd = g->root;
    p->depth = 0;
    while (!nd->leaf) {
        inner_t *in = (inner_t *)nd;
        int i = inner_child(in, s, e);
        p->node[p->depth] = in;
        p->idx[p->depth] = i;
        p->depth++;
        nd = in->child[i];
    }
    return (leaf_t *)nd;
}

static leaf_t *leaf_new(geo_t *g)
{
    leaf_t *l = malloc(sizeof(*l));
    if (l) {
        l->h.n = 0;
        l->h.leaf = 1;
        l->prev = l->next = NULL;
        g->bytes += sizeof(*l);
    }
    return l;
}

static inner_t *inner_new(geo_t *g)
{
    inner_t *in = malloc(sizeof(*in));
    if (in) {
        in->h.n = 0;
        in->h.leaf = 0;
        g->bytes += sizeof(*in);
    }
    return in;
}

static void node_free(geo_t *g, node_t *nd)
{
    g->bytes -= nd->leaf ? sizeof(leaf_t) : sizeof(inner_t);
    free(nd);
}

/* Nodes allocated before an insertion, so that it cannot fail half-way. */
typedef struct pool {
    leaf_t *leaf;
    inner_t *inner[MAX_DEPTH + 1];
    int ninner;
} pool_t;

static void pool_release(geo_t *g, pool_t *pl)
{
    if (pl->leaf)
        node_free(g, &pl->leaf->h);
    for (int i = 0; i < pl->ninner; i++)
        node_free(g, &pl->inner[i]->h);
}

/* Inserts (s, e) into a leaf with room. */
static void leaf_insert_at(leaf_t *l, int pos, uint64_t s, elem_t *e)
{
    int n = l->h.n;
    memmove(&l->score[pos + 1], &l->score[pos], (size_t)(n - pos) * sizeof(l->score[0]));
    memmove(&l->e[pos + 1], &l->e[pos], (size_t)(n - pos) * sizeof(l->e[0]));
    l->score[pos] = s;
    l->e[pos] = e;
    l->h.n++;
}

static void inner_insert_at(inner_t *in, int pos, uint64_t s, elem_t *e, node_t *child)
{
    int n = in->h.n;
    memmove(&in->score[pos + 1], &in->score[pos], (size_t)(n - pos) * sizeof(in->score[0]));
    memmove(&in->e[pos + 1], &in->e[pos], (size_t)(n - pos) * sizeof(in->e[0]));
    memmove(&in->child[pos + 1], &in->child[pos], (size_t)(n - pos) * sizeof(in->child[0]));
    in->score[pos] = s;
    in->e[pos] = e;
    in->child[pos] = child;
    in->h.n++;
}

/* Inserts (s, e), which must not be in the tree.  Returns false (nothing
 * changed) when a node cannot be allocated. */
static bool tree_insert(geo_t *g, uint64_t s, elem_t *e)
{
    if (!g->root) {
        leaf_t *l = leaf_new(g);
        if (!l)
            return false;
        leaf_insert_at(l, 0, s, e);
        g->root = &l->h;
        g->first = l;
        return true;
    }
    path_t p;
    leaf_t *l = descend(g, s, e, &p);

    /* Count the splits this insertion will cause and allocate for them. */
    pool_t pl = { NULL, { NULL }, 0 };
    if (l->h.n == LEAF_CAP) {
        int need = 0, d = p.depth - 1;
        while (d >= 0 && p.node[d]->h.n == INNER_CAP) {
            need++;
            d--;
        }
        if (d < 0)
            need++;   /* the root splits: a new root */
        if (!(pl.leaf = leaf_new(g)))
            return false;
        for (; pl.ninner < need; pl.ninner++)
            if (!(pl.inner[pl.ninner] = inner_new(g))) {
                pool_release(g, &pl);
                return false;
            }
    }

    int pos = leaf_lower(l, s, e);
    if (l->h.n < LEAF_CAP) {
        leaf_insert_at(l, pos, s, e);
        return true;
    }
    /* Split the leaf in halves, then insert into the proper half. */
    leaf_t *r = pl.leaf;
    int half = LEAF_CAP / 2;
    memcpy(r->score, &l->score[half], (size_t)(LEAF_CAP - half) * sizeof(r->score[0]));
    memcpy(r->e, &l->e[half], (size_t)(LEAF_CAP - half) * sizeof(r->e[0]));
    r->h.n = (uint16_t)(LEAF_CAP - half);
    l->h.n = (uint16_t)half;
    r->next = l->next;
    r->prev = l;
    if (l->next)
        l->next->prev = r;
    l->next = r;
    if (pos <= half)
        leaf_insert_at(l, pos, s, e);
    else
        leaf_insert_at(r, pos - half, s, e);
    uint64_t sep_s = r->score[0];
    elem_t *sep_e = r->e[0];
    node_t *right = &r->h;
    int used = 0;

    /* Push the new right sibling up, splitting full parents. */
    for (int d = p.depth - 1; d >= 0; d--) {
        inner_t *in = p.node[d];
        int at = p.idx[d] + 1;
        if (in->h.n < INNER_CAP) {
            inner_insert_at(in, at, sep_s, sep_e, right);
            return true;
        }
        inner_t *nr = pl.inner[used++];
        int ih = INNER_CAP / 2;
        memcpy(nr->score, &in->score[ih], (size_t)(INNER_CAP - ih) * sizeof(nr->score[0]));
        memcpy(nr->e, &in->e[ih], (size_t)(INNER_CAP - ih) * sizeof(nr->e[0]));
        memcpy(nr->child, &in->child[ih], (size_t)(INNER_CAP - ih) * sizeof(nr->child[0]));
        nr->h.n = (uint16_t)(INNER_CAP - ih);
        in->h.n = (uint16_t)ih;
        if (at <= ih)
            inner_insert_at(in, at, sep_s, sep_e, right);
        else
            inner_insert_at(nr, at - ih, sep_s, sep_e, right);
        sep_s = nr->score[0];
        sep_e = nr->e[0];
        right = &nr->h;
    }
    /* The root split. */
    inner_t *root = pl.inner[used++];
    root->child[0] = g->root;
    root->score[0] = 0;
    root->e[0] = NULL;
    root->child[1] = right;
    root->score[1] = sep_s;
    root->e[1] = sep_e;
    root->h.n = 2;
    g->root = &root->h;
    return true;
}

/* Children j and j+1 of `in` after one of them fell below the minimum:
 * merge them when they fit in one node, else share their entries evenly. */
static void rebalance(geo_t *g, inner_t *in, int j)
{
    node_t *a = in->child[j], *b = in->child[j + 1];
    if (a->leaf) {
        leaf_t *la = (leaf_t *)a, *lb = (leaf_t *)b;
        int na = la->h.n, nb = lb->h.n;
        if (na + nb <= LEAF_CAP) {
            memcpy(&la->score[na], lb->score, (size_t)nb * sizeof(lb->score[0]));
            memcpy(&la->e[na], lb->e, (size_t)nb * sizeof(lb->e[0]));
            la->h.n = (uint16_t)(na + nb);
            la->next = lb->next;
            if (lb->next)
                lb->next->prev = la;
            node_free(g, b);
            goto drop_child;
        }
        int ta = (na + nb) / 2;
        if (na < ta) {   /* move the first ta - na of b to the end of a */
            int k = ta - na;
            memcpy(&la->score[na], lb->score, (size_t)k * sizeof(lb->score[0]));
            memcpy(&la->e[na], lb->e, (size_t)k * sizeof(lb->e[0]));
            memmove(lb->score, &lb->score[k], (size_t)(nb - k) * sizeof(lb->score[0]));
            memmove(lb->e, &lb->e[k], (size_t)(nb - k) * sizeof(lb->e[0]));
        } else {         /* move the last na - ta of a to the front of b */
            int k = na - ta;
            memmove(&lb->score[k], lb->score, (size_t)nb * sizeof(lb->score[0]));
            memmove(&lb->e[k], lb->e, (size_t)nb * sizeof(lb->e[0]));
            memcpy(lb->score, &la->score[ta], (size_t)k * sizeof(lb->score[0]));
            memcpy(lb->e, &la->e[ta], (size_t)k * sizeof(lb->e[0]));
        }
        la->h.n = (uint16_t)ta;
        lb->h.n = (uint16_t)(na + nb - ta);
        in->score[j + 1] = lb->score[0];
        in->e[j + 1] = lb->e[0];
        return;
    }

    inner_t *ia = (inner_t *)a, *ib = (inner_t *)b;
    int na = ia->h.n, nb = ib->h.n;
    /* b's first child is bounded by the parent's separator */
    ib->score[0] = in->score[j + 1];
    ib->e[0] = in->e[j + 1];
    if (na + nb <= INNER_CAP) {
        memcpy(&ia->score[na], ib->score, (size_t)nb * sizeof(ib->score[0]));
        memcpy(&ia->e[na], ib->e, (size_t)nb * sizeof(ib->e[0]));
        memcpy(&ia->child[na], ib->child, (size_t)nb * sizeof(ib->child[0]));
        ia->h.n = (uint16_t)(na + nb);
        node_free(g, b);
        goto drop_child;
    }
    int ta = (na + nb) / 2;
    if (na < ta) {
        int k = ta - na;
        memcpy(&ia->score[na], ib->score, (size_t)k * sizeof(ib->score[0]));
        memcpy(&ia->e[na], ib->e, (size_t)k * sizeof(ib->e[0]));
        memcpy(&ia->child[na], ib->child, (size_t)k * sizeof(ib->child[0]));
        memmove(ib->score, &ib->score[k], (size_t)(nb - k) * sizeof(ib->score[0]));
        memmove(ib->e, &ib->e[k], (size_t)(nb - k) * sizeof(ib->e[0]));
        memmove(ib->child, &ib->child[k], (size_t)(nb - k) * sizeof(ib->child[0]));
    } else {
        int k = na - ta;
        memmove(&ib->score[k], ib->score, (size_t)nb * sizeof(ib->score[0]));
        memmove(&ib->e[k], ib->e, (size_t)nb * sizeof(ib->e[0]));
        memmove(&ib->child[k], ib->child, (size_t)nb * sizeof(ib->child[0]));
        memcpy(ib->score, &ia->score[ta], (size_t)k * sizeof(ib->score[0]));
        memcpy(ib->e, &ia->e[ta], (size_t)k * sizeof(ib->e[0]));
        memcpy(ib->child, &ia->child[ta], (size_t)k * sizeof(ib->child[0]));
    }
    ia->h.n = (uint16_t)ta;
    ib->h.n = (uint16_t)(na + nb - ta);
    in->score[j + 1] = ib->score[0];
    in->e[j + 1] = ib->e[0];
    return;

drop_child: {
        int n = in->h.n;
        memmove(&in->score[j + 1], &in->score[j + 2], (size_t)(n - j - 2) * sizeof(in->score[0]));
        memmove(&in->e[j + 1], &in->e[j + 2], (size_t)(n - j - 2) * sizeof(in->e[0]));
        memmove(&in->child[j + 1], &in->child[j + 2], (size_t)(n - j - 2) * sizeof(in->child[0]));
        in->h.n--;
    }
}

/* Replaces every separator equal to the removed key (s, e) by the smallest
 * key of the subtree it bounds, so no separator refers to a key that has
 * left the tree (its element may be freed next).  Such a separator lies on
 * the search path of (s, e). */
static void tree_fix_separator(geo_t *g, uint64_t s, const elem_t *e)
{
    node_t *nd = g->root;
    while (nd && !nd->leaf) {
        inner_t *in = (inner_t *)nd;
        int i = inner_child(in, s, e);
        if (i > 0 && in->e[i] == e && in->score[i] == s) {
            node_t *c = in->child[i];
            while (!c->leaf)
                c = ((inner_t *)c)->child[0];
            in->score[i] = ((leaf_t *)c)->score[0];
            in->e[i] = ((leaf_t *)c)->e[0];
        }
        nd = in->child[i];
    }
}

/* Removes (s, e), which must be in the tree. */
static void tree_delete(geo_t *g, uint64_t s, elem_t *e)
{
    path_t p;
    leaf_t *l = descend(g, s, e, &p);
    int pos = leaf_lower(l, s, e);
    int n = l->h.n;
    memmove(&l->score[pos], &l->score[pos + 1], (size_t)(n - pos - 1) * sizeof(l->score[0]));
    memmove(&l->e[pos], &l->e[pos + 1], (size_t)(n - pos - 1) * sizeof(l->e[0]));
    l->h.n--;

    node_t *nd = &l->h;
    for (int d = p.depth - 1; d >= 0; d--) {
        int min = nd->leaf ? LEAF_MIN : INNER_MIN;
        if (nd->n >= min)
            break;
        inner_t *in = p.node[d];
        int i = p.idx[d];
        rebalance(g, in, i > 0 ? i - 1 : 0);
        nd = &in->h;
    }
    /* Shrink from the top. */
    while (g->root && !g->root->leaf && g->root->n == 1) {
        node_t *old = g->root;
        g->root = ((inner_t *)old)->child[0];
        node_free(g, old);
    }
    if (g->root && g->root->leaf && g->root->n == 0) {
        node_free(g, g->root);
        g->root = NULL;
        g->first = NULL;
        return;
    }
    tree_fix_separator(g, s, e);
}

static void tree_free(geo_t *g, node_t *nd)
{
    if (!nd)
        return;
    if (!nd->leaf) {
        inner_t *in = (inner_t *)nd;
        for (int i = 0; i < in->h.n; i++)
            tree_free(g, in->child[i]);
    }
    node_free(g, nd);
}

/* Builds the tree bottom-up from n elements in strictly increasing order,
 * filling nodes evenly.  Returns false on allocation failure (the partial
 * tree is freed, the elements are not). */
static bool tree_build(geo_t *g, elem_t **es, size_t n)
{
    if (n == 0)
        return true;
    size_t nleaves = (n + LEAF_CAP - 1) / LEAF_CAP;
    node_t **level = malloc(nleaves * sizeof(*level));
    if (!level)
        return false;
    leaf_t *prev = NULL;
    size_t done = 0;
    for (size_t i = 0; i < nleaves; i++) {
        leaf_t *l = leaf_new(g);
        if (!l) {
            for (size_t k = 0; k < i; k++)
                node_free(g, level[k]);
            free(level);
            return false;
        }
        size_t take = (n - done) / (nleaves - i);
        for (size_t k = 0; k < take; k++) {
            l->score[k] = es[done + k]->score;
            l->e[k] = es[done + k];
        }
        l->h.n = (uint16_t)take;
        done += take;
        l->prev = prev;
        if (prev)
            prev->next = l;
        prev = l;
        level[i] = &l->h;
    }
    g->first = (leaf_t *)level[0];
    size_t count = nleaves;
    while (count > 1) {
        size_t nparents = (count + INNER_CAP - 1) / INNER_CAP;
        size_t used = 0;
        for (size_t i = 0; i < nparents; i++) {
            inner_t *in = inner_new(g);
            if (!in) {
                /* free this level's new parents and everything below */
                for (size_t k = 0; k < i; k++)
                    tree_free(g, level[k]);
                for (size_t k = used; k < count; k++)
                    tree_free(g, level[k]);
                free(level);
                g->first = NULL;
                return false;
            }
            size_t take = (count - used) / (nparents - i);
            for (size_t k = 0; k < take; k++) {
                node_t *c = level[used + k];
                node_t *lm = c;   /* leftmost leaf: its first key bounds c */
                while (!lm->leaf)
                    lm = ((inner_t *)lm)->child[0];
                in->child[k] = c;
                in->score[k] = ((leaf_t *)lm)->score[0];
                in->e[k] = ((leaf_t *)lm)->e[0];
            }
            in->h.n = (uint16_t)take;
            used += take;
            level[i] = &in->h;
        }
        count = nparents;
    }
    g->root = level[0];
    free(level);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Set operations                                                           */
/* ------------------------------------------------------------------------ */

geo_t *geo_create(void)
{
    geo_t *g = calloc(1, sizeof(*g));
    return g;
}

void geo_free(geo_t *g)
{
    if (!g)
        return;
    tree_free(g, g->root);
    for (size_t i = 0; i < g->nslots; i++)
        free(g->slots[i]);
    free(g->slots);
    free(g);
}

size_t geo_count(const geo_t *g) { return g->count; }
size_t geo_memory(const geo_t *g) { return sizeof(*g) + g->bytes; }

int geo_set(geo_t *g, const char *member, size_t len, uint64_t score, geo_add_mode_t mode)
{
    uint32_t h = member_hash(member, len);
    size_t i = slot_find(g, member, len, h);
    if (i != SIZE_MAX) {
        elem_t *e = g->slots[i];
        if (mode == GEO_ADD_NX)
            return GEO_SET_SKIPPED;
        if (e->score == score)
            return GEO_SET_UNCHANGED;
        /* insert the new key first: only it can fail, and then nothing changed */
        uint64_t old = e->score;
        if (!tree_insert(g, score, e))
            return CORE_NOMEM;
        tree_delete(g, old, e);
        e->score = score;
        return GEO_SET_UPDATED;
    }
    if (mode == GEO_ADD_XX)
        return GEO_SET_SKIPPED;
    if (len > GEO_MEMBER_MAX || !table_reserve(g))
        return CORE_NOMEM;
    elem_t *e = malloc(elem_bytes(len));
    if (!e)
        return CORE_NOMEM;
    e->score = score;
    e->hash = h;
    e->len = (uint16_t)len;
    memcpy(e->m, member, len);
    if (!tree_insert(g, score, e)) {
        free(e);
        return CORE_NOMEM;
    }
    slot_put(g->slots, g->nslots, e);
    g->count++;
    g->bytes += elem_bytes(len);
    return GEO_SET_ADDED;
}

bool geo_score(const geo_t *g, const char *member, size_t len, uint64_t *score)
{
    size_t i = slot_find(g, member, len, member_hash(member, len));
    if (i == SIZE_MAX)
        return false;
    *score = g->slots[i]->score;
    return true;
}

bool geo_remove(geo_t *g, const char *member, size_t len)
{
    size_t i = slot_find(g, member, len, member_hash(member, len));
    if (i == SIZE_MAX)
        return false;
    elem_t *e = g->slots[i];
    tree_delete(g, e->score, e);
    slot_delete(g, i);
    g->count--;
    g->bytes -= elem_bytes(e->len);
    free(e);
    /* give memory back when the set has shrunk a lot (failure is harmless) */
    if (g->nslots > MIN_SLOTS && g->count * 8 < g->nslots)
        table_resize(g, g->nslots / 2);
    return true;
}

/* First leaf position with score >= s, or (NULL, 0). */
static leaf_t *seek_score(const geo_t *g, uint64_t s, int *pos)
{
    node_t *nd = g->root;
    if (!nd)
        return NULL;
    while (!nd->leaf) {
        inner_t *in = (inner_t *)nd;
        nd = in->child[inner_child_score(in, s)];
    }
    leaf_t *l = (leaf_t *)nd;
    int i = leaf_lower_score(l, s);
    while (l && i == l->h.n) {   /* all smaller: the answer starts in the next leaf */
        l = l->next;
        i = 0;
    }
    *pos = i;
    return l;
}

void geo_range(const geo_t *g, uint64_t min, uint64_t max, geo_visit_fn fn, void *ud)
{
    int i;
    for (leaf_t *l = seek_score(g, min, &i); l; l = l->next, i = 0)
        for (; i < l->h.n; i++) {
            if (l->score[i] >= max)
                return;
            const elem_t *e = l->e[i];
            if (!fn(ud, l->score[i], e->m, e->len))
                return;
        }
}

/* ------------------------------------------------------------------------ */
/* Search (GEOSEARCH / GEORADIUS)                                           */
/* ------------------------------------------------------------------------ */

typedef struct hits {
    geo_hit_t *a;
    size_t n, cap;
    bool oom;
} hits_t;

static bool hits_push(hits_t *h, const elem_t *e, uint64_t score, double lon, double lat, double dist)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        geo_hit_t *a = realloc(h->a, cap * sizeof(*a));
        if (!a) {
            h->oom = true;
            return false;
        }
        h->a = a;
        h->cap = cap;
    }
    h->a[h->n++] = (geo_hit_t){ e->m, e->len, score, lon, lat, dist };
    return true;
}

/* Candidates with min <= score < max that fall in the shape, in order;
 * stops once `limit` (0 = none) hits are collected. */
static void scan_cell(const geo_t *g, const geo_matcher_t *mt, uint64_t min, uint64_t max, hits_t *h,
                      uint64_t limit)
{
    int i;
    for (leaf_t *l = seek_score(g, min, &i); l; l = l->next, i = 0)
        for (; i < l->h.n; i++) {
            uint64_t score = l->score[i];
            if (score >= max)
                return;
            double lon, lat, dist;
            if (geo_matcher_score(mt, score, &lon, &lat, &dist) && !hits_push(h, l->e[i], score, lon, lat, dist))
                return;
            if (h->n && limit && h->n >= limit)
                return;
        }
}

/* Sorting works on (distance, index) pairs, then permutes the hits: the
 * permutation depends only on the comparisons, never on the element size,
 * and small elements sort much faster. */
typedef struct sortkey {
    double dist;
    size_t idx;
} sortkey_t;

static int dist_asc(const void *a, const void *b)
{
    double x = ((const sortkey_t *)a)->dist, y = ((const sortkey_t *)b)->dist;
    return x > y ? 1 : x == y ? 0 : -1;
}

static int dist_desc(const void *a, const void *b) { return -dist_asc(a, b); }

static inline void sk_swap(sortkey_t *a, sortkey_t *b)
{
    sortkey_t t = *a;
    *a = *b;
    *b = t;
}

static inline void sk_vecswap(sortkey_t *a, sortkey_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sk_swap(&a[i], &b[i]);
}

static size_t med3(const sortkey_t *a, size_t i, size_t j, size_t k, int (*cmp)(const void *, const void *))
{
    return cmp(&a[i], &a[j]) < 0 ? (cmp(&a[j], &a[k]) < 0 ? j : (cmp(&a[i], &a[k]) < 0 ? k : i))
                                 : (cmp(&a[j], &a[k]) > 0 ? j : (cmp(&a[i], &a[k]) < 0 ? i : k));
}

static void insertion_sort(sortkey_t *a, size_t n, int (*cmp)(const void *, const void *))
{
    for (size_t m = 1; m < n; m++)
        for (size_t l = m; l > 0 && cmp(&a[l - 1], &a[l]) > 0; l--)
            sk_swap(&a[l], &a[l - 1]);
}

/* Bentley & McIlroy's quicksort ("Engineering a Sort Function", 1993) as
 * NetBSD's libc has it, recursing only into partitions that overlap the
 * wanted index range [lo, hi] (absolute indexes; `base` is a's offset).
 * Redis uses this for COUNT; its exact comparisons and swaps decide the
 * order of equal distances, so they are reproduced step by step.  Measured
 * against redis-server 7.0: it never takes the original's shortcut to
 * insertion sort when a partition pass swapped nothing, so neither do we. */
static void pqsort_range(sortkey_t *a, size_t n, size_t base, size_t lo, size_t hi,
                         int (*cmp)(const void *, const void *))
{
    for (;;) {
        if (n < 7) {
            insertion_sort(a, n, cmp);
            return;
        }
        size_t pm = n / 2;
        if (n > 7) {
            size_t pl = 0, pn = n - 1;
            if (n > 40) {
                size_t d = n / 8;
                pl = med3(a, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(a, pm - d, pm, pm + d, cmp);
                pn = med3(a, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(a, pl, pm, pn, cmp);
        }
        sk_swap(&a[0], &a[pm]);
        /* [0] pivot | [1, pa) equal | [pa, pb) less | (pc, pd] greater | (pd, n) equal */
        ptrdiff_t pa = 1, pb = 1, pc = (ptrdiff_t)n - 1, pd = (ptrdiff_t)n - 1;
        for (;;) {
            int r;
            while (pb <= pc && (r = cmp(&a[pb], &a[0])) <= 0) {
                if (r == 0) {
                    sk_swap(&a[pa], &a[pb]);
                    pa++;
                }
                pb++;
            }
            while (pb <= pc && (r = cmp(&a[pc], &a[0])) >= 0) {
                if (r == 0) {
                    sk_swap(&a[pc], &a[pd]);
                    pd--;
                }
                pc--;
            }
            if (pb > pc)
                break;
            sk_swap(&a[pb], &a[pc]);
            pb++;
            pc--;
        }
        ptrdiff_t pn = (ptrdiff_t)n;
        ptrdiff_t r = pa < pb - pa ? pa : pb - pa;
        sk_vecswap(a, a + (pb - r), (size_t)r);
        r = (pd - pc) < (pn - pd - 1) ? (pd - pc) : (pn - pd - 1);
        sk_vecswap(a + pb, a + (pn - r), (size_t)r);
        size_t left = (size_t)(pb - pa), right = (size_t)(pd - pc);
        if (left > 1 && !(hi < base || lo >= base + left))
            pqsort_range(a, left, base, lo, hi, cmp);
        if (right <= 1)
            return;
        a += n - right;
        base += n - right;
        n = right;
        if (hi < base || lo >= base + n)
            return;
    }
}

/* Sorts hits[0..n) by distance as Redis does: libc qsort for a full sort,
 * pqsort when only the first `returned` are wanted.  Returns false on
 * allocation failure (hits untouched). */
static bool sort_hits(geo_hit_t *hits, size_t n, size_t returned, bool desc)
{
    sortkey_t *k = malloc(n * sizeof(*k));
    geo_hit_t *tmp = malloc(returned * sizeof(*tmp));
    if (!k || !tmp) {
        free(k);
        free(tmp);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        k[i] = (sortkey_t){ hits[i].dist, i };
    int (*cmp)(const void *, const void *) = desc ? dist_desc : dist_asc;
    if (returned == n)
        qsort(k, n, sizeof(*k), cmp);
    else
        pqsort_range(k, n, 0, 0, returned - 1, cmp);
    for (size_t i = 0; i < returned; i++)
        tmp[i] = hits[k[i].idx];
    memcpy(hits, tmp, returned * sizeof(*tmp));
    free(tmp);
    free(k);
    return true;
}

void geo_pqsort(geo_hit_t *a, size_t n, bool desc, size_t lo, size_t hi)
{
    sortkey_t *k = malloc(n * sizeof(*k));
    geo_hit_t *tmp = malloc(n * sizeof(*tmp));
    if (!k || !tmp)
        abort();   /* test helper */
    for (size_t i = 0; i < n; i++)
        k[i] = (sortkey_t){ a[i].dist, i };
    pqsort_range(k, n, 0, lo, hi, desc ? dist_desc : dist_asc);
    for (size_t i = 0; i < n; i++)
        tmp[i] = a[k[i].idx];
    memcpy(a, tmp, n * sizeof(*tmp));
    free(tmp);
    free(k);
}

bool geo_search(const geo_t *g, const geo_query_t *q, geo_hit_t **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (!g->root)
        return true;
    geo_cells_t c;
    geo_search_cells(&q->shape, &c);
    hits_t h = { NULL, 0, 0, false };
    uint64_t limit = q->any ? q->count : 0;
    geo_matcher_t mt;
    geo_matcher_init(&mt, &q->shape);
    int last = 0;
    for (int i = 0; i < 9; i++) {
        geohash_t cell = c.cell[i];
        if (cell.bits == 0 && cell.step == 0)
            continue;   /* pruned */
        /* with huge radii neighbours coincide: skip a repeat of the last cell scanned */
        if (last && cell.bits == c.cell[last].bits && cell.step == c.cell[last].step)
            continue;
        if (h.n && limit && h.n >= limit)
            break;
        uint64_t min, max;
        geohash_score_range(cell, &min, &max);
        scan_cell(g, &mt, min, max, &h, limit);
        if (h.oom) {
            free(h.a);
            return false;
        }
        last = i;
    }

    geo_sort_t sort = q->sort;
    if (q->count && sort == GEO_SORT_NONE && !q->any)
        sort = GEO_SORT_ASC;   /* COUNT means the nearest ones */
    size_t returned = (q->count == 0 || h.n < q->count) ? h.n : (size_t)q->count;
    if (sort != GEO_SORT_NONE && h.n > 0 && !sort_hits(h.a, h.n, returned, sort == GEO_SORT_DESC)) {
        free(h.a);
        return false;
    }
    for (size_t i = 0; i < returned; i++)
        h.a[i].dist /= q->shape.to_m;
    *out = h.a;
    *nout = returned;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Keyspace type                                                            */
/* ------------------------------------------------------------------------ */

static void type_free(void *v) { geo_free(v); }
static size_t type_size(const void *v) { return geo_memory(v); }

static void type_encode(const void *v, wbuf_t *out)
{
    const geo_t *g = v;
    wbuf_put_u8(out, GEO_ENC_VERSION);
    wbuf_put_u64(out, g->count);
    for (const leaf_t *l = g->first; l; l = l->next)
        for (int i = 0; i < l->h.n; i++) {
            wbuf_put_u64(out, l->score[i]);
            wbuf_put_u16(out, l->e[i]->len);
            wbuf_put_bytes(out, l->e[i]->m, l->e[i]->len);
        }
}

static void *decode_fail(geo_t *g, elem_t **es, size_t n, const char *msg, const char **why)
{
    if (g && g->slots)
        memset(g->slots, 0, g->nslots * sizeof(*g->slots));   /* the elements are freed below */
    for (size_t i = 0; i < n; i++)
        free(es[i]);
    free(es);
    geo_free(g);
    *why = msg;
    return NULL;
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint64_t count = rbuf_u64(&r);
    if (r.err) {
        *why = "geo: truncated header";
        return NULL;
    }
    if (ver != GEO_ENC_VERSION) {
        *why = "geo: unknown encoding version";
        return NULL;
    }
    if (count > rbuf_left(&r) / 11) {   /* each member takes >= 8 + 2 + 1 bytes */
        *why = "geo: member count exceeds the data";
        return NULL;
    }
    geo_t *g = geo_create();
    elem_t **es = count ? malloc((size_t)count * sizeof(*es)) : NULL;
    if (!g || (count && !es))
        return decode_fail(g, es, 0, "out of memory", why);
    size_t nslots = MIN_SLOTS;
    while (nslots * 3 < count * 4)
        nslots *= 2;
    if (!table_resize(g, nslots))
        return decode_fail(g, es, 0, "out of memory", why);
    for (size_t i = 0; i < count; i++) {
        uint64_t score = rbuf_u64(&r);
        uint16_t mlen = rbuf_u16(&r);
        const uint8_t *m = rbuf_bytes(&r, mlen);
        if (!m)
            return decode_fail(g, es, i, "geo: truncated member", why);
        if (score >= SCORE_LIMIT || (uint64_t)(double)score != score)
            return decode_fail(g, es, i, "geo: score is not a geohash", why);
        if (mlen == 0 || mlen > GEO_MEMBER_MAX || !codec_text_ok(m, mlen))
            return decode_fail(g, es, i, "geo: bad member", why);
        elem_t *e = malloc(elem_bytes(mlen));
        if (!e)
            return decode_fail(g, es, i, "out of memory", why);
        e->score = score;
        e->len = mlen;
        e->hash = member_hash((const char *)m, mlen);
        memcpy(e->m, m, mlen);
        es[i] = e;
        if (i > 0 && key_cmp(es[i - 1]->score, es[i - 1], score, e) >= 0)
            return decode_fail(g, es, i + 1, "geo: members out of order", why);
        if (slot_find(g, e->m, mlen, e->hash) != SIZE_MAX)
            return decode_fail(g, es, i + 1, "geo: duplicate member", why);
        slot_put(g->slots, g->nslots, e);
        g->count++;
        g->bytes += elem_bytes(mlen);
    }
    if (!rbuf_done(&r))
        return decode_fail(g, es, count, "geo: trailing bytes", why);
    if (!tree_build(g, es, count))
        return decode_fail(g, es, count, "out of memory", why);
    free(es);
    return g;
}

const ks_type_t geo_type = {
    .tag = TYPE_TAG_GEO,
    .name = "geo",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
