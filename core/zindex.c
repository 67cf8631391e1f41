/* zindex.c - see zindex.h. */
#include "core/zindex.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

#define LEAF_CAP 64                  /* entries per leaf: 1 KiB of scores + pointers */
#define INNER_CAP 64                 /* children per inner node */
#define LEAF_MIN (LEAF_CAP / 4)      /* below this a leaf merges or borrows */
#define INNER_MIN (INNER_CAP / 4)
#define MAX_DEPTH 24                 /* inner levels; 16^24 members would be needed to exceed it */
#define HASH_SEED 0x67656f7365747331ULL   /* "geosets1": the seed until zindex_set_seed (tests) */
#define MIN_SLOTS 8                  /* smallest hash table */

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

struct zindex {
    node_t *root;                    /* NULL when empty */
    leaf_t *first;                   /* leftmost leaf */
    elem_t **slots;                  /* hash table, nslots a power of two */
    size_t nslots;
    size_t count;
    size_t bytes;                    /* heap bytes owned, for zindex_memory */
    elem_t **loading;                /* zindex_load_*: the members so far, in order */
    size_t load_cap;                 /* room in loading */
};

static inline size_t elem_bytes(size_t len) { return sizeof(elem_t) + len; }

/* Redis's zset order: score, then member bytes (memcmp, shorter first).
 * e1 is a stored element; e2 may be NULL, a probe that sorts before every
 * member of score s2 (range scans seek by score alone). */
static inline int key_cmp(uint64_t s1, const elem_t *e1, uint64_t s2, const elem_t *e2)
{
    if (s1 != s2)
        return s1 < s2 ? -1 : 1;
    if (e1 == e2)
        return 0;
    if (!e2)
        return 1;
    size_t l = e1->len < e2->len ? e1->len : e2->len;
    int c = memcmp(e1->m, e2->m, l);
    if (c)
        return c < 0 ? -1 : 1;
    return e1->len < e2->len ? -1 : e1->len > e2->len;
}

/* ------------------------------------------------------------------------ */
/* Hash table: member -> element                                            */
/* ------------------------------------------------------------------------ */

/* The table's layout is never observable (lookups by member, walks by
 * score), so the seed can be anything: a secret one keeps clients from
 * choosing members that collide. */
static uint64_t hash_seed = HASH_SEED;

void zindex_set_seed(uint64_t seed) { hash_seed = seed; }

static uint32_t member_hash(const char *m, size_t len) { return (uint32_t)tally_xxh64(m, len, hash_seed); }

size_t zindex_probe_max(const zindex_t *z)
{
    if (!z->nslots)
        return 0;
    /* a run may wrap around the end: start after an empty slot */
    size_t start = 0, longest = 0, run = 0;
    while (start < z->nslots && z->slots[start])
        start++;
    if (start == z->nslots)
        return z->nslots;
    for (size_t k = 1; k <= z->nslots; k++) {
        size_t i = (start + k) % z->nslots;
        run = z->slots[i] ? run + 1 : 0;
        if (run > longest)
            longest = run;
    }
    return longest;
}

/* Slot of the member, or SIZE_MAX. */
static size_t slot_find(const zindex_t *z, const char *m, size_t len, uint32_t h)
{
    if (!z->nslots)
        return SIZE_MAX;
    size_t mask = z->nslots - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const elem_t *e = z->slots[i];
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

static bool table_resize(zindex_t *z, size_t nslots)
{
    elem_t **s = calloc(nslots, sizeof(*s));
    if (!s)
        return false;
    for (size_t i = 0; i < z->nslots; i++)
        if (z->slots[i])
            slot_put(s, nslots, z->slots[i]);
    free(z->slots);
    z->bytes = z->bytes - z->nslots * sizeof(*s) + nslots * sizeof(*s);
    z->slots = s;
    z->nslots = nslots;
    return true;
}

/* Room for one more member at load <= 3/4. */
static bool table_reserve(zindex_t *z)
{
    if ((z->count + 1) * 4 <= z->nslots * 3)
        return true;
    return table_resize(z, z->nslots ? z->nslots * 2 : MIN_SLOTS);
}

/* Backward-shift deletion: later members of the probe run move up so that
 * lookups never need tombstones. */
static void slot_delete(zindex_t *z, size_t i)
{
    size_t mask = z->nslots - 1, j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!z->slots[j])
            break;
        size_t k = z->slots[j]->hash & mask;   /* home of the member at j */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        z->slots[i] = z->slots[j];
        i = j;
    }
    z->slots[i] = NULL;
}

/* ------------------------------------------------------------------------ */
/* B+tree: (score, member) order                                            */
/* ------------------------------------------------------------------------ */

/* First index in the leaf whose key is >= (s, e); e NULL: score >= s. */
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

/* The child whose range holds (s, e): the last i >= 1 with key[i] <= (s, e),
 * else 0.  e NULL: the child that may hold the first key with score >= s. */
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

typedef struct path {
    inner_t *node[MAX_DEPTH];
    int idx[MAX_DEPTH];
    int depth;
} path_t;

static leaf_t *descend(const zindex_t *z, uint64_t s, const elem_t *e, path_t *p)
{
    node_t *nd = z->root;
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

static leaf_t *leaf_new(zindex_t *z)
{
    leaf_t *l = malloc(sizeof(*l));
    if (l) {
        l->h.n = 0;
        l->h.leaf = 1;
        l->prev = l->next = NULL;
        z->bytes += sizeof(*l);
    }
    return l;
}

static inner_t *inner_new(zindex_t *z)
{
    inner_t *in = malloc(sizeof(*in));
    if (in) {
        in->h.n = 0;
        in->h.leaf = 0;
        z->bytes += sizeof(*in);
    }
    return in;
}

static void node_free(zindex_t *z, node_t *nd)
{
    z->bytes -= nd->leaf ? sizeof(leaf_t) : sizeof(inner_t);
    free(nd);
}

/* Nodes allocated before an insertion, so that it cannot fail half-way. */
typedef struct pool {
    leaf_t *leaf;
    inner_t *inner[MAX_DEPTH + 1];
    int ninner;
} pool_t;

static void pool_release(zindex_t *z, pool_t *pl)
{
    if (pl->leaf)
        node_free(z, &pl->leaf->h);
    for (int i = 0; i < pl->ninner; i++)
        node_free(z, &pl->inner[i]->h);
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
static bool tree_insert(zindex_t *z, uint64_t s, elem_t *e)
{
    if (!z->root) {
        leaf_t *l = leaf_new(z);
        if (!l)
            return false;
        leaf_insert_at(l, 0, s, e);
        z->root = &l->h;
        z->first = l;
        return true;
    }
    path_t p;
    leaf_t *l = descend(z, s, e, &p);

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
        if (!(pl.leaf = leaf_new(z)))
            return false;
        for (; pl.ninner < need; pl.ninner++)
            if (!(pl.inner[pl.ninner] = inner_new(z))) {
                pool_release(z, &pl);
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
    root->child[0] = z->root;
    root->score[0] = 0;
    root->e[0] = NULL;
    root->child[1] = right;
    root->score[1] = sep_s;
    root->e[1] = sep_e;
    root->h.n = 2;
    z->root = &root->h;
    return true;
}

/* Children j and j+1 of `in` after one of them fell below the minimum:
 * merge them when they fit in one node, else share their entries evenly. */
static void rebalance(zindex_t *z, inner_t *in, int j)
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
            node_free(z, b);
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
        node_free(z, b);
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
static void tree_fix_separator(zindex_t *z, uint64_t s, const elem_t *e)
{
    node_t *nd = z->root;
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
static void tree_delete(zindex_t *z, uint64_t s, elem_t *e)
{
    path_t p;
    leaf_t *l = descend(z, s, e, &p);
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
        rebalance(z, in, i > 0 ? i - 1 : 0);
        nd = &in->h;
    }
    /* Shrink from the top. */
    while (z->root && !z->root->leaf && z->root->n == 1) {
        node_t *old = z->root;
        z->root = ((inner_t *)old)->child[0];
        node_free(z, old);
    }
    if (z->root && z->root->leaf && z->root->n == 0) {
        node_free(z, z->root);
        z->root = NULL;
        z->first = NULL;
        return;
    }
    tree_fix_separator(z, s, e);
}

static void tree_free(zindex_t *z, node_t *nd)
{
    if (!nd)
        return;
    if (!nd->leaf) {
        inner_t *in = (inner_t *)nd;
        for (int i = 0; i < in->h.n; i++)
            tree_free(z, in->child[i]);
    }
    node_free(z, nd);
}

/* Builds the tree bottom-up from n elements in strictly increasing order,
 * filling nodes evenly.  Returns false on allocation failure (the partial
 * tree is freed, the elements are not). */
static bool tree_build(zindex_t *z, elem_t **es, size_t n)
{
    if (n == 0)
        return true;
    size_t nleaves = (n + LEAF_CAP - 1) / LEAF_CAP;
    node_t **level = calloc(nleaves, sizeof(*level));
    if (!level)
        return false;
    leaf_t *prev = NULL;
    size_t done = 0;
    for (size_t i = 0; i < nleaves; i++) {
        leaf_t *l = leaf_new(z);
        if (!l) {
            for (size_t k = 0; k < i; k++)
                node_free(z, level[k]);
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
    z->first = (leaf_t *)level[0];
    size_t count = nleaves;
    while (count > 1) {
        size_t nparents = (count + INNER_CAP - 1) / INNER_CAP;
        size_t used = 0;
        for (size_t i = 0; i < nparents; i++) {
            inner_t *in = inner_new(z);
            if (!in) {
                /* free this level's new parents and everything below */
                for (size_t k = 0; k < i; k++)
                    tree_free(z, level[k]);
                for (size_t k = used; k < count; k++)
                    tree_free(z, level[k]);
                free(level);
                z->first = NULL;
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
    z->root = level[0];
    free(level);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Set operations                                                           */
/* ------------------------------------------------------------------------ */

zindex_t *zindex_create(void)
{
    zindex_t *z = calloc(1, sizeof(*z));
    return z;
}

void zindex_free(zindex_t *z)
{
    if (!z)
        return;
    tree_free(z, z->root);
    for (size_t i = 0; i < z->nslots; i++)
        free(z->slots[i]);
    free(z->slots);
    free(z->loading);
    free(z);
}

size_t zindex_count(const zindex_t *z) { return z->count; }
size_t zindex_memory(const zindex_t *z) { return sizeof(*z) + z->bytes; }

uint64_t zindex_add_bound(const zindex_t *z, size_t n, uint64_t member_bytes)
{
    size_t count = z ? z->count : 0, nslots = z ? z->nslots : 0, slots = nslots;
    while ((uint64_t)(count + n) * 4 > (uint64_t)slots * 3)
        slots = slots ? slots * 2 : MIN_SLOTS;
    /* a larger table (the old one is freed once its members moved), and per
     * member its element, a leaf it may split off and an inner node such a
     * split may add; the tree's depth of inner nodes for a root split */
    uint64_t table = slots > nslots ? (uint64_t)(slots + nslots) * sizeof(elem_t *) : 0;
    return (z ? 0 : sizeof(zindex_t)) + table + member_bytes +
           (uint64_t)n * (elem_bytes(0) + sizeof(leaf_t) + sizeof(inner_t)) + 16 * sizeof(inner_t);
}

int zindex_set(zindex_t *z, const char *member, size_t len, uint64_t score, zindex_mode_t mode)
{
    uint32_t h = member_hash(member, len);
    size_t i = slot_find(z, member, len, h);
    if (i != SIZE_MAX) {
        elem_t *e = z->slots[i];
        if (mode == ZINDEX_SET_NX)
            return ZINDEX_SKIPPED;
        if (e->score == score)
            return ZINDEX_UNCHANGED;
        /* insert the new key first: only it can fail, and then nothing changed */
        uint64_t old = e->score;
        if (!tree_insert(z, score, e))
            return CORE_NOMEM;
        tree_delete(z, old, e);
        e->score = score;
        return ZINDEX_UPDATED;
    }
    if (mode == ZINDEX_SET_XX)
        return ZINDEX_SKIPPED;
    if (len > ZINDEX_MEMBER_MAX || !table_reserve(z))
        return CORE_NOMEM;
    elem_t *e = malloc(elem_bytes(len));
    if (!e)
        return CORE_NOMEM;
    e->score = score;
    e->hash = h;
    e->len = (uint16_t)len;
    memcpy(e->m, member, len);
    if (!tree_insert(z, score, e)) {
        free(e);
        return CORE_NOMEM;
    }
    slot_put(z->slots, z->nslots, e);
    z->count++;
    z->bytes += elem_bytes(len);
    return ZINDEX_ADDED;
}

bool zindex_score(const zindex_t *z, const char *member, size_t len, uint64_t *score)
{
    size_t i = slot_find(z, member, len, member_hash(member, len));
    if (i == SIZE_MAX)
        return false;
    *score = z->slots[i]->score;
    return true;
}

bool zindex_remove(zindex_t *z, const char *member, size_t len)
{
    size_t i = slot_find(z, member, len, member_hash(member, len));
    if (i == SIZE_MAX)
        return false;
    elem_t *e = z->slots[i];
    tree_delete(z, e->score, e);
    slot_delete(z, i);
    z->count--;
    z->bytes -= elem_bytes(e->len);
    free(e);
    /* give memory back when the set has shrunk a lot (failure is harmless) */
    if (z->nslots > MIN_SLOTS && z->count * 8 < z->nslots)
        table_resize(z, z->nslots / 2);
    return true;
}

/* First leaf position with score >= s, or (NULL, 0). */
static leaf_t *seek_score(const zindex_t *z, uint64_t s, int *pos)
{
    node_t *nd = z->root;
    if (!nd)
        return NULL;
    while (!nd->leaf) {
        inner_t *in = (inner_t *)nd;
        nd = in->child[inner_child(in, s, NULL)];
    }
    leaf_t *l = (leaf_t *)nd;
    int i = leaf_lower(l, s, NULL);
    while (l && i == l->h.n) {   /* all smaller: the answer starts in the next leaf */
        l = l->next;
        i = 0;
    }
    *pos = i;
    return l;
}

void zindex_range(const zindex_t *z, uint64_t min, uint64_t max, zindex_visit_fn fn, void *ud)
{
    int i;
    for (leaf_t *l = seek_score(z, min, &i); l; l = l->next, i = 0)
        for (; i < l->h.n; i++) {
            if (l->score[i] >= max)
                return;
            const elem_t *e = l->e[i];
            if (!fn(ud, l->score[i], e->m, e->len))
                return;
        }
}

void zindex_each(const zindex_t *z, zindex_visit_fn fn, void *ud)
{
    for (const leaf_t *l = z->first; l; l = l->next)
        for (int i = 0; i < l->h.n; i++)
            if (!fn(ud, l->score[i], l->e[i]->m, l->e[i]->len))
                return;
}

/* ------------------------------------------------------------------------ */
/* Bulk load                                                                */
/* ------------------------------------------------------------------------ */

zindex_t *zindex_load_begin(size_t n)
{
    zindex_t *z = zindex_create();
    if (!z)
        return NULL;
    size_t nslots = MIN_SLOTS;
    while (nslots * 3 < n * 4)
        nslots *= 2;
    if (!table_resize(z, nslots) || (n && !(z->loading = malloc(n * sizeof(*z->loading))))) {
        zindex_free(z);
        return NULL;
    }
    z->load_cap = n;
    return z;
}

core_status_t zindex_load_add(zindex_t *z, uint64_t score, const char *member, size_t len)
{
    if (len > ZINDEX_MEMBER_MAX || z->count == z->load_cap)
        return CORE_NOMEM;   /* more members than zindex_load_begin was told */
    elem_t *e = malloc(elem_bytes(len));
    if (!e)
        return CORE_NOMEM;
    e->score = score;
    e->len = (uint16_t)len;
    e->hash = member_hash(member, len);
    memcpy(e->m, member, len);
    core_status_t st = CORE_OK;
    if (z->count > 0 && key_cmp(z->loading[z->count - 1]->score, z->loading[z->count - 1], score, e) >= 0)
        st = CORE_UNORDERED;
    else if (slot_find(z, e->m, len, e->hash) != SIZE_MAX)
        st = CORE_DUPLICATE;
    if (st != CORE_OK) {
        free(e);
        return st;
    }
    slot_put(z->slots, z->nslots, e);
    z->loading[z->count++] = e;
    z->bytes += elem_bytes(len);
    return CORE_OK;
}

core_status_t zindex_load_end(zindex_t *z)
{
    bool ok = tree_build(z, z->loading, z->count);
    free(z->loading);
    z->loading = NULL;
    z->load_cap = 0;
    return ok ? CORE_OK : CORE_NOMEM;
}
