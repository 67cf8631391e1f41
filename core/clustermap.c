/*
 * clustermap.c - the --cluster file's parser (core/clustermap.h has the
 * format).  Line by line into a table of 16384 owners; then every slot must
 * have exactly one owner and every migrating range its owner as source.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clustermap.h"

#define NO_OWNER UINT16_MAX

typedef struct parser {
    cmap_t *m;
    size_t line;
    char *err;
    size_t errlen;
    size_t cap;
    int16_t from[SLOT_COUNT];    /* a migrating slot's source, as its 'migrate' line says */
} parser_t;

static bool fail(parser_t *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parser_t *ps, const char *fmt, ...)
{
    int n = snprintf(ps->err, ps->errlen, "line %zu: ", ps->line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < ps->errlen)
        vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* Splits line into at most max whitespace-separated words (in place). */
static size_t words(char *line, char **w, size_t max)
{
    size_t n = 0;
    char *p = line;
    while (*p) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        if (n == max)
            return max + 1;
        w[n++] = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (*p)
            *p++ = '\0';
    }
    return n;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > CMAP_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!*s || strlen(s) > 20)
        return false;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        unsigned d = (unsigned)(*p - '0');
        if (v > (max - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* "A-B" or "A", inside 0..SLOT_COUNT-1, A <= B. */
static bool parse_range(parser_t *ps, char *s, unsigned *lo, unsigned *hi)
{
    char *dash = strchr(s, '-');
    uint64_t a, b;
    if (dash)
        *dash = '\0';
    if (!parse_u64(s, SLOT_COUNT - 1, &a) || !parse_u64(dash ? dash + 1 : s, SLOT_COUNT - 1, &b) || a > b)
        return fail(ps, "'%s%s%s' is not a slot range (A-B with 0 <= A <= B <= %u)", s, dash ? "-" : "",
                    dash ? dash + 1 : "", SLOT_COUNT - 1);
    *lo = (unsigned)a;
    *hi = (unsigned)b;
    return true;
}

/* HOST:PORT, port 1..65535, at most CMAP_ADDR_MAX bytes. */
static bool addr_ok(const char *a)
{
    const char *colon = strrchr(a, ':');
    uint64_t port;
    return strlen(a) <= CMAP_ADDR_MAX && colon && colon != a && parse_u64(colon + 1, 65535, &port) && port != 0;
}

static int node_named(parser_t *ps, const char *name)
{
    int i = cmap_node_index(ps->m, name);
    if (i < 0)
        fail(ps, "no node '%s' (declare it with 'node %s HOST:PORT' first)", name, name);
    return i;
}

static bool parse_line(parser_t *ps, char *line, bool *have_epoch)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *w[5];
    size_t n = words(line, w, 4);
    cmap_t *m = ps->m;
    if (n == 0)
        return true;
    if (strcmp(w[0], "epoch") == 0) {
        if (n != 2 || !parse_u64(w[1], UINT64_MAX, &m->epoch))
            return fail(ps, "expected 'epoch N'");
        if (*have_epoch)
            return fail(ps, "a second 'epoch'");
        *have_epoch = true;
        return true;
    }
    if (strcmp(w[0], "node") == 0) {
        if (n != 3 && n != 4)
            return fail(ps, "expected 'node NAME HOST:PORT [resp=HOST:PORT]'");
        if (!name_ok(w[1]))
            return fail(ps, "node name '%s': 1 to %d letters, digits, '.', '_' or '-'", w[1], CMAP_NAME_MAX);
        if (cmap_node_index(m, w[1]) >= 0)
            return fail(ps, "node '%s' declared twice", w[1]);
        if (!addr_ok(w[2]))
            return fail(ps, "node address '%s' is not HOST:PORT", w[2]);
        if (n == 4 && (strncmp(w[3], "resp=", 5) != 0 || !addr_ok(w[3] + 5)))
            return fail(ps, "'%s' is not resp=HOST:PORT (the node's Redis port, --resp-port)", w[3]);
        if (m->nnodes == CMAP_MAX_NODES)
            return fail(ps, "more than %d nodes", CMAP_MAX_NODES);
        if (m->nnodes == ps->cap) {
            size_t cap = ps->cap ? ps->cap * 2 : 8;
            cmap_node_t *nodes = realloc(m->nodes, cap * sizeof(*nodes));
            if (!nodes)
                return fail(ps, "out of memory");
            m->nodes = nodes;
            ps->cap = cap;
        }
        snprintf(m->nodes[m->nnodes].name, sizeof(m->nodes[0].name), "%s", w[1]);
        snprintf(m->nodes[m->nnodes].addr, sizeof(m->nodes[0].addr), "%s", w[2]);
        snprintf(m->nodes[m->nnodes].resp, sizeof(m->nodes[0].resp), "%s", n == 4 ? w[3] + 5 : "");
        m->nnodes++;
        return true;
    }
    unsigned lo, hi;
    if (strcmp(w[0], "slots") == 0) {
        if (n != 3)
            return fail(ps, "expected 'slots NAME A-B'");
        int node = node_named(ps, w[1]);
        if (node < 0 || !parse_range(ps, w[2], &lo, &hi))
            return false;
        for (unsigned s = lo; s <= hi; s++) {
            if (m->owner[s] != NO_OWNER)
                return fail(ps, "slot %u is already owned by node '%s'", s, m->nodes[m->owner[s]].name);
            m->owner[s] = (uint16_t)node;
        }
        return true;
    }
    if (strcmp(w[0], "migrate") == 0) {
        if (n != 4)
            return fail(ps, "expected 'migrate A-B FROM TO'");
        int from, to;
        if (!parse_range(ps, w[1], &lo, &hi) || (from = node_named(ps, w[2])) < 0 || (to = node_named(ps, w[3])) < 0)
            return false;
        if (from == to)
            return fail(ps, "a slot cannot migrate from node '%s' to itself", w[2]);
        for (unsigned s = lo; s <= hi; s++) {
            if (m->migrating_to[s] >= 0)
                return fail(ps, "slot %u is already migrating", s);
            m->migrating_to[s] = (int16_t)to;
            ps->from[s] = (int16_t)from;   /* checked against the owner once every line is read */
        }
        return true;
    }
    return fail(ps, "unknown directive '%s' (epoch, node, slots, migrate)", w[0]);
}

int cmap_node_index(const cmap_t *m, const char *name)
{
    for (size_t i = 0; i < m->nnodes; i++)
        if (strcmp(m->nodes[i].name, name) == 0)
            return (int)i;
    return -1;
}

void cmap_free(cmap_t *m)
{
    if (!m)
        return;
    free(m->nodes);
    free(m->text);
    free(m);
}

cmap_t *cmap_parse(const char *text, size_t len, char *err, size_t errlen)
{
    parser_t *ps = calloc(1, sizeof(*ps));
    cmap_t *m = calloc(1, sizeof(*m));
    char *copy = malloc(len + 1), *lines = malloc(len + 1);
    if (!ps || !m || !copy || !lines) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    memcpy(lines, text, len);
    lines[len] = '\0';
    if (memchr(text, '\0', len)) {
        snprintf(err, errlen, "the map holds a NUL byte");
        goto fail;
    }
    for (unsigned s = 0; s < SLOT_COUNT; s++) {
        m->owner[s] = NO_OWNER;
        m->migrating_to[s] = -1;
        ps->from[s] = -1;
    }
    ps->m = m;
    ps->err = err;
    ps->errlen = errlen;
    bool have_epoch = false;
    char *p = lines;
    while (p) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        ps->line++;
        if (!parse_line(ps, p, &have_epoch))
            goto fail;
        p = nl ? nl + 1 : NULL;
    }
    ps->line = 0;
    if (!have_epoch) {
        snprintf(err, errlen, "no 'epoch N' line");
        goto fail;
    }
    for (unsigned s = 0; s < SLOT_COUNT; s++) {
        if (m->owner[s] == NO_OWNER) {
            unsigned e = s;
            while (e + 1 < SLOT_COUNT && m->owner[e + 1] == NO_OWNER)
                e++;
            snprintf(err, errlen, "slots %u-%u have no owner: every slot must be in one 'slots' line", s, e);
            goto fail;
        }
        if (ps->from[s] >= 0 && ps->from[s] != (int16_t)m->owner[s]) {
            snprintf(err, errlen, "slot %u migrates from node '%s', but node '%s' owns it", s,
                     m->nodes[ps->from[s]].name, m->nodes[m->owner[s]].name);
            goto fail;
        }
    }
    free(lines);
    free(ps);
    m->text = copy;
    m->text_len = len;
    return m;
fail:
    free(lines);
    free(copy);
    free(ps);
    if (m)
        free(m->nodes);
    free(m);
    return NULL;
}

static void put_text(wbuf_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_text(wbuf_t *out, const char *fmt, ...)
{
    char line[CMAP_NAME_MAX * 2 + CMAP_ADDR_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0)
        wbuf_put_bytes(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

unsigned cmap_run_end(const cmap_t *m, unsigned s, bool migration)
{
    unsigned e = s;
    while (e + 1 < SLOT_COUNT && m->owner[e + 1] == m->owner[s] &&
           (!migration || m->migrating_to[e + 1] == m->migrating_to[s]))
        e++;
    return e;
}

void cmap_format(const cmap_t *m, wbuf_t *out)
{
    put_text(out, "epoch %" PRIu64 "\n", m->epoch);
    for (size_t i = 0; i < m->nnodes; i++)
        put_text(out, "node %s %s%s%s\n", m->nodes[i].name, m->nodes[i].addr, m->nodes[i].resp[0] ? " resp=" : "",
                 m->nodes[i].resp);
    for (unsigned s = 0; s < SLOT_COUNT;) {
        unsigned e = cmap_run_end(m, s, false);
        put_text(out, "slots %s %u-%u\n", m->nodes[m->owner[s]].name, s, e);
        s = e + 1;
    }
    for (unsigned s = 0; s < SLOT_COUNT;) {
        unsigned e = cmap_run_end(m, s, true);
        if (m->migrating_to[s] >= 0)
            put_text(out, "migrate %u-%u %s %s\n", s, e, m->nodes[m->owner[s]].name,
                     m->nodes[m->migrating_to[s]].name);
        s = e + 1;
    }
}

void cmap_format_haproxy(const cmap_t *m, wbuf_t *out)
{
    for (unsigned s = 0; s < SLOT_COUNT;) {
        unsigned e = cmap_run_end(m, s, false);
        put_text(out, "%u:%u " CMAP_HAPROXY_BACKEND "%s\n", s, e, m->nodes[m->owner[s]].name);
        s = e + 1;
    }
}
