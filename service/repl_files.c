/* repl_files.c - what replication keeps in files (service/repl.h): the
 * data directory's EPOCH, and the credentials it reads: the replica token
 * and the group's secret. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/persist_fmt.h"
#include "service/file.h"
#include "service/log.h"
#include "service/repl_int.h"

#define EPOCH_NAME "EPOCH"

/* ------------------------------------------------------------------------ */
/* The epoch file                                                           */
/* ------------------------------------------------------------------------ */

/* Reads EPOCH: 0 when there is none; false with err when it holds
 * anything but a decimal epoch up to TALLY_EPOCH_MAX and a newline. */
bool repl_epoch_read(const char *dir, uint64_t *epoch, char *err, size_t errlen)
{
    char path[600], text[40];
    snprintf(path, sizeof(path), "%s/%s", dir, EPOCH_NAME);
    *epoch = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return true;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return false;
    }
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    bool rerr = ferror(f);
    fclose(f);
    text[n] = '\0';
    if (rerr) {
        snprintf(err, errlen, "cannot read %s", path);
        return false;
    }
    if (!repl_epoch_parse(text, n, epoch)) {
        if (n && text[n - 1] == '\n')
            text[--n] = '\0';   /* shown as it reads, without its line end */
        for (size_t i = 0; i < n; i++)
            if (text[i] < 0x20 || text[i] > 0x7e)
                text[i] = '?';
        snprintf(err, errlen,
                 "%s holds \"%.24s%s\", not an epoch (a decimal number from 0 to %" PRIu64 "): restore it, or remove "
                 "it if the journal holds the promotion's epoch record (a restart then rewrites it)",
                 path, text, n > 24 ? "..." : "", TALLY_EPOCH_MAX);
        return false;
    }
    return true;
}

bool repl_epoch_parse(const char *text, size_t len, uint64_t *epoch)
{
    if (len && text[len - 1] == '\n')
        len--;
    uint64_t v = 0;
    bool ok = len > 0;   /* leading zeros allowed, as the epoch record allows them */
    for (size_t i = 0; ok && i < len; i++) {
        ok = text[i] >= '0' && text[i] <= '9' && v <= (TALLY_EPOCH_MAX - (uint64_t)(text[i] - '0')) / 10;
        v = v * 10 + (uint64_t)(text[i] - '0');
    }
    if (ok)
        *epoch = v;
    return ok;
}

/* Writes EPOCH durably (file_replace). */
bool repl_epoch_write(const char *dir, uint64_t epoch, char *err, size_t errlen)
{
    char path[600], text[32];
    snprintf(path, sizeof(path), "%s/%s", dir, EPOCH_NAME);
    int n = snprintf(text, sizeof(text), "%" PRIu64 "\n", epoch);
    if (!file_replace(path, text, (size_t)n, FILE_MODE_PRIVATE)) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Credentials: the replica token and the group's secret                    */
/* ------------------------------------------------------------------------ */

/* Reads a credential file whole into buf (at most max bytes, one trailing
 * newline - or CRLF - trimmed): a regular file that other users cannot
 * read and only its owner can write; readable by its group is allowed with
 * a warning (a Kubernetes Secret mounted with an fsGroup is).  False with
 * err naming the flag and the file. */
static bool cred_read(const char *flag, const char *path, uint8_t *buf, size_t max, size_t *len, char *err,
                      size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s %s: not a regular file", flag, path);
        close(fd);
        return false;
    }
    if (st.st_mode & (S_IROTH | S_IWOTH | S_IWGRP)) {
        snprintf(err, errlen, "%s %s: mode %04o lets other users %s it: chmod 600 %s (or 640 for a group that must "
                 "read it)", flag, path, (unsigned)(st.st_mode & 07777),
                 st.st_mode & (S_IWOTH | S_IWGRP) ? "change" : "read", path);
        close(fd);
        return false;
    }
    if (st.st_mode & S_IRGRP)
        log_warn("%s %s: readable by its group (mode %04o): every member of the group can read it", flag, path,
                 (unsigned)(st.st_mode & 07777));
    size_t n = 0;
    for (;;) {
        uint8_t extra;
        ssize_t got = n < max ? read(fd, buf + n, max - n) : read(fd, &extra, 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
            close(fd);
            return false;
        }
        if (got == 0)
            break;
        if (n == max) {
            snprintf(err, errlen, "%s %s: longer than %zu bytes", flag, path, max);
            close(fd);
            return false;
        }
        n += (size_t)got;
    }
    close(fd);
    if (n && buf[n - 1] == '\n')
        n--;
    if (n && buf[n - 1] == '\r')
        n--;
    *len = n;
    return true;
}

/* A bearer token goes into a header: printable ASCII, no space. */
static bool token_ok(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            return false;
    return n > 0;
}

bool repl_creds_load(const tally_opts_t *o, repl_creds_t *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    if (o->replica_token_file[0]) {
        size_t n = 0;
        if (!cred_read("--replica-token-file", o->replica_token_file, (uint8_t *)c->token, CMD_TOKEN_MAX_LEN, &n,
                       err, errlen))
            return false;
        c->token[n] = '\0';
        if (!token_ok(c->token, n) || strlen(c->token) != n) {
            snprintf(err, errlen,
                     "--replica-token-file %s: %s (one line: the token, as a client sends it after \"Bearer \")",
                     o->replica_token_file, n ? "holds a space, a control character or a second line" : "is empty");
            repl_creds_wipe(c);
            return false;
        }
    } else if (o->replica_token[0]) {
        if (!token_ok(o->replica_token, strlen(o->replica_token))) {
            snprintf(err, errlen, "--replica-token: a space or a control character cannot be part of a bearer token");
            return false;
        }
        snprintf(c->token, sizeof(c->token), "%s", o->replica_token);
    }
    if (o->peer_secret_file[0]) {
        if (!cred_read("--peer-secret-file", o->peer_secret_file, c->secret, sizeof(c->secret), &c->secret_len, err,
                       errlen)) {
            repl_creds_wipe(c);
            return false;
        }
        if (c->secret_len < PEERS_SECRET_MIN) {
            snprintf(err, errlen,
                     "--peer-secret-file %s: %zu bytes; the group's secret needs at least %d (make one with: head -c "
                     "32 /dev/urandom | base64 > FILE; chmod 600 FILE; the same file on every node)",
                     o->peer_secret_file, c->secret_len, PEERS_SECRET_MIN);
            repl_creds_wipe(c);
            return false;
        }
    }
    return true;
}

void repl_creds_wipe(repl_creds_t *c) { explicit_bzero(c, sizeof(*c)); }

bool repl_secret_read(const char *flag, const char *path, char *buf, size_t max, char *err, size_t errlen)
{
    size_t len = 0;
    if (max < 2 || !cred_read(flag, path, (uint8_t *)buf, max - 1, &len, err, errlen))
        return false;
    buf[len] = '\0';
    if (strlen(buf) != len) {
        snprintf(err, errlen, "%s %s: holds a NUL byte", flag, path);
        explicit_bzero(buf, max);
        return false;
    }
    return true;
}

bool repl_reloadable(const tally_opts_t *o) { return o->replica_token_file[0] || o->peer_secret_file[0]; }
