/* persist_files.c - the data directory's files (service/persist.h): the
 * names of journals and their sequence numbers, mapping a file to read it,
 * creating a journal with its header, sealing one a crash left open. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "service/file.h"
#include "service/persist_int.h"

int persist_map_file(const char *path, mapped_t *m)
{
    m->p = NULL;
    m->len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    m->len = (size_t)sb.st_size;
    if (m->len > 0) {
        void *p = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return e;
        }
        madvise(p, m->len, MADV_SEQUENTIAL);
        m->p = p;
    }
    close(fd);
    return 0;
}

void persist_unmap_file(mapped_t *m)
{
    if (m->p)
        munmap(m->p, m->len);
    m->p = NULL;
}

void persist_journal_path(const persist_t *p, uint64_t seq, char *out, size_t n)
{
    snprintf(out, n, "%s/journal.%010" PRIu64 ".tlj", p->dir, seq);
}

bool persist_parse_journal_name(const char *name, uint64_t *seq)
{
    unsigned long long s;
    int used = 0;
    if (sscanf(name, "journal.%llu.tlj%n", &s, &used) != 1 || name[used] != '\0' || s == 0)
        return false;
    *seq = s;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The journal sequence numbers present, sorted. */
int persist_list_journals(const persist_t *p, uint64_t **out, size_t *n)
{
    DIR *d = opendir(p->dir);
    if (!d)
        return errno;
    uint64_t *v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t seq;
        if (!persist_parse_journal_name(de->d_name, &seq))
            continue;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            uint64_t *nv = realloc(v, cap * sizeof(*v));
            if (!nv) {
                free(v);
                closedir(d);
                return ENOMEM;
            }
            v = nv;
        }
        v[cnt++] = seq;
    }
    closedir(d);
    if (cnt)
        qsort(v, cnt, sizeof(*v), cmp_u64);
    *out = v;
    *n = cnt;
    return 0;
}

/* Creates journal.<seq>.tlj with its header, synced with its directory.  The
 * header is written to a temporary name first and renamed, so a journal file
 * always has its header: a journal without one is damage, never "a crash
 * while creating it".  0, or the errno with err set. */
int persist_create_journal(persist_t *p, uint64_t seq, int *fd_out, char *err, size_t errlen)
{
    char path[600], tmp[640];
    persist_journal_path(p, seq, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    unlink(tmp);
    /* read-write: the journal writes through a shared mapping */
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, FILE_MODE_PRIVATE);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot create journal %s: %s", tmp, strerror(e));
        return e;
    }
    wbuf_t b = WBUF_INIT;
    journal_header_t h = { JOURNAL_VERSION, 0, seq };
    journalfmt_put_header(&b, &h);
    int e = b.oom ? ENOMEM : file_write_all(fd, b.data, b.len);
    wbuf_free(&b);
    /* the first page reserved before the file is visible: a journal of
     * fewer bytes was cut (core/persist_fmt.h) */
    if (!e)
        e = posix_fallocate(fd, 0, JOURNAL_PAGE);
    if (!e && fdatasync(fd) != 0)
        e = errno;
    if (!e && access(path, F_OK) == 0)
        e = EEXIST;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (!e)
        e = file_fsync_dir(p->dir);
    if (e) {
        snprintf(err, errlen, "cannot write journal %s: %s", path, strerror(e));
        close(fd);
        unlink(tmp);
        return e;
    }
    *fd_out = fd;
    return 0;
}

/* Does the journal file hold any record (or anything that is not one)?
 * Decides whether the journal before it counts as the newest. */
bool persist_journal_has_records(const char *path)
{
    mapped_t m;
    if (persist_map_file(path, &m) != 0)
        return true;   /* unreadable: treat as holding data, so we refuse */
    journal_scan_t sc;
    bool has = !journalfmt_scan(m.p, m.len, NULL, NULL, &sc) || sc.records > 0;
    persist_unmap_file(&m);
    return has;
}

/* What a scan found past the last record, in words that say whether anything
 * was lost (nothing, in every case that is accepted). */
void persist_describe_end(const journal_scan_t *s, char *out, size_t n)
{
    switch (s->end) {
    case JEND_SEALED:
        snprintf(out, n, "sealed at offset %zu (next journal %" PRIu64 ")", s->data_end, s->next_seq);
        break;
    case JEND_RESERVE:
        snprintf(out, n, "not sealed (the process stopped without closing it); %zu bytes of unused reserved "
                 "space after offset %zu, nothing lost", s->tail_bytes, s->data_end);
        break;
    case JEND_TORN:
        snprintf(out, n, "a write interrupted by a crash at offset %zu (%zu bytes incl. reserved space): a change "
                 "that was never acknowledged, dropped", s->data_end, s->tail_bytes);
        break;
    case JEND_EOF:
        snprintf(out, n, "not sealed, ends at offset %zu", s->data_end);
        break;
    }
}

/* Closes a journal left open by a crash: the seal goes where its data ends
 * (over a torn record and the unused reserve), the file is cut there and
 * synced.  Layout-1 files (journal version 1) are only cut. */
int persist_seal_journal(persist_t *p, uint64_t seq, const journal_scan_t *sc, char *err, size_t errlen)
{
    char path[600];
    persist_journal_path(p, seq, path, sizeof(path));
    int fd = open(path, O_RDWR | O_CLOEXEC);
    int e = fd < 0 ? errno : 0;
    uint64_t end = sc->data_end;
    if (!e && journalfmt_layout(&sc->h) == JOURNAL_LAYOUT_2) {
        wbuf_t b = WBUF_INIT;
        journalfmt_put_seal(&b, sc->records, sc->data_end, seq + 1);
        e = b.oom ? ENOMEM : (pwrite(fd, b.data, b.len, (off_t)end) == (ssize_t)b.len ? 0 : (errno ? errno : EIO));
        end += b.len;
        wbuf_free(&b);
    }
    if (!e && ftruncate(fd, (off_t)end) != 0)
        e = errno;
    if (!e && fdatasync(fd) != 0)
        e = errno;
    if (fd >= 0)
        close(fd);
    if (e)
        snprintf(err, errlen, "cannot seal journal %s: %s", path, strerror(e));
    return e;
}
