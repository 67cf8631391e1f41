/* persist_check.c - `tallyd --check FILE` (service/persist.h): a snapshot
 * or a journal verified by the same reader as start-up (core/persist_fmt.h),
 * without loading it into a server, and what it holds. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/def.h"
#include "core/keyspace.h"
#include "core/types.h"
#include "service/persist_int.h"

#define CMD_CHECK_OPS 1024   /* operation ids --check counts one by one (cmd/def.h) */

struct check_ctx {
    uint64_t per_type[TYPE_TAG_MAX + 1], bytes_type[TYPE_TAG_MAX + 1];
    uint64_t with_ttl;
    uint64_t by_method[256];         /* HTTP request records, by method (persist_method_name) */
    uint64_t by_op[CMD_CHECK_OPS];   /* command records, by operation id */
    char why[256];
};

/* snapfmt_scan callback of --check: decodes the value (as the loader does). */
static const char *check_record(void *ud, size_t off, const snap_record_t *r)
{
    (void)off;
    struct check_ctx *c = ud;
    const ks_type_t *t = ks_type_by_tag(r->tag);
    if (!t)
        return "unknown type tag (written by a newer tally?)";
    const char *why = NULL;
    void *v = t->decode(r->value, r->vlen, &why);
    if (!v) {
        snprintf(c->why, sizeof(c->why), "key '%.*s': %s", (int)(r->klen > 64 ? 64 : r->klen), r->key,
                 why ? why : "value does not decode");
        return c->why;
    }
    t->free(v);
    c->per_type[r->tag]++;
    c->bytes_type[r->tag] += r->vlen;
    if (r->expire_ms)
        c->with_ttl++;
    return NULL;
}

static int check_snapshot(const char *path, const mapped_t *m, FILE *out)
{
    struct check_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return 2;
    snap_scan_t sc;
    int rc = 0;
    if (!snapfmt_scan(m->p, m->len, check_record, c, &sc)) {
        fprintf(out, "snapshot %s\nDAMAGED at offset %zu: %s\n", path, sc.bad_off, sc.why);
        rc = 1;
    } else {
        fprintf(out, "snapshot %s\n  format version %u, taken at %" PRId64 " ms, journal_seq %" PRIu64 "\n", path,
                sc.h.version, sc.h.created_ms, sc.h.journal_seq);
        fprintf(out, "  %" PRIu64 " keys (%" PRIu64 " with expiry), %zu bytes, checksums OK\n", sc.records,
                c->with_ttl, m->len);
        for (unsigned t = 0; t <= TYPE_TAG_MAX; t++)
            if (c->per_type[t])
                fprintf(out, "  %-10s %10" PRIu64 " keys %14" PRIu64 " value bytes\n", ks_type_by_tag(t)->name,
                        c->per_type[t], c->bytes_type[t]);
        fprintf(out, "OK\n");
    }
    free(c);
    return rc;
}

/* journalfmt_scan callback of --check: counts by method. */
static const char *check_request(void *ud, size_t off, const journal_req_t *q)
{
    (void)off;
    struct check_ctx *c = ud;
    if (q->kind == JOURNAL_REC_COMMAND) {
        if (!cmd_def_by_id(q->op) || q->op >= CMD_CHECK_OPS)
            return "unknown operation in a command record (a record of a newer tally)";
        c->by_op[q->op]++;
        return NULL;
    }
    if (!persist_record_known(q))
        return "unknown method in record";
    c->by_method[q->method]++;
    return NULL;
}

/* Is a later journal (journal.<seq+1>...) next to this one holding records?
 * Decides whether the rules of the newest or of an older journal apply. */
static bool check_later_records(const char *path, uint64_t seq)
{
    persist_t tmp;
    snprintf(tmp.dir, sizeof(tmp.dir), "%.500s", path);
    char *slash = strrchr(tmp.dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(tmp.dir, sizeof(tmp.dir), ".");
    uint64_t *seqs;
    size_t n;
    if (persist_list_journals(&tmp, &seqs, &n) != 0)
        return false;
    bool later = false;
    for (size_t i = 0; i < n && !later; i++) {
        if (seqs[i] <= seq)
            continue;
        char jp[600];
        persist_journal_path(&tmp, seqs[i], jp, sizeof(jp));
        later = persist_journal_has_records(jp);
    }
    free(seqs);
    return later;
}

static int check_journal(const char *path, const mapped_t *m, FILE *out)
{
    struct check_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return 2;
    journal_scan_t sc;
    bool ok = journalfmt_scan(m->p, m->len, check_request, c, &sc);
    uint64_t name_seq;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (ok && persist_parse_journal_name(base, &name_seq) && name_seq != sc.h.seq) {
        ok = sc.ok = false;
        sc.bad_off = 0;
        sc.why = "header sequence number does not match the file name";
    }
    bool newest = !ok || !check_later_records(path, sc.h.seq);
    ok = ok && journalfmt_check_place(&sc, m->len, newest);
    fprintf(out, "journal %s\n", path);
    int rc = 0;
    if (!ok) {
        fprintf(out, "DAMAGED at offset %zu: %s\n", sc.bad_off, sc.why);
        rc = 1;
    } else {
        fprintf(out, "  format version %u (layout %u, replayed by generation %u's rules), sequence %" PRIu64 " (%s)\n",
                sc.h.version, journalfmt_layout(&sc.h), journalfmt_generation(&sc.h), sc.h.seq,
                newest ? "the newest journal with records" : "later journals hold records");
        fprintf(out, "  %" PRIu64 " records", sc.records);
        if (sc.records)
            fprintf(out, " from %" PRId64 " ms to %" PRId64 " ms", sc.first_ns / 1000000, sc.last_ns / 1000000);
        fprintf(out, "\n");
        for (unsigned i = 0; i < 256; i++)
            if (c->by_method[i])
                fprintf(out, "  %-7s %" PRIu64 "\n", persist_method_name(i), c->by_method[i]);
        for (unsigned i = 0; i < CMD_CHECK_OPS; i++)
            if (c->by_op[i])
                fprintf(out, "  %-7s %" PRIu64 "\n", cmd_def_by_id((uint16_t)i)->name, c->by_op[i]);
        char end[256];
        persist_describe_end(&sc, end, sizeof(end));
        fprintf(out, "  end: %s\n", end);
        fprintf(out, "OK\n");
    }
    free(c);
    return rc;
}

int persist_check(const char *path, FILE *out)
{
    mapped_t m;
    int e = persist_map_file(path, &m);
    if (e) {
        fprintf(out, "cannot read %s: %s\n", path, strerror(e));
        return 2;
    }
    int rc;
    if (m.len >= 8 && memcmp(m.p, SNAP_MAGIC, 8) == 0)
        rc = check_snapshot(path, &m, out);
    else if (m.len >= 8 && memcmp(m.p, JOURNAL_MAGIC, 8) == 0)
        rc = check_journal(path, &m, out);
    else {
        fprintf(out, "%s\nDAMAGED at offset 0: %s\n", path,
                m.len == 0 ? "empty file" : "neither a tally snapshot nor a journal (bad magic)");
        rc = 1;
    }
    persist_unmap_file(&m);
    return rc;
}
