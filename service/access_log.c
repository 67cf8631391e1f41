/* access_log.c - see access_log.h. */
#include "service/access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_fd = -1;
static char log_path[512];
static bool log_stdout;

static int open_append(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        snprintf(err, errlen, "--access-log %s: %s", path, strerror(errno));
    return fd;
}

bool access_log_open(const char *path, char *err, size_t errlen)
{
    if (strlen(path) >= sizeof(log_path)) {
        snprintf(err, errlen, "--access-log: path too long");
        return false;
    }
    log_stdout = strcmp(path, "-") == 0;
    int fd = log_stdout ? STDOUT_FILENO : open_append(path, err, errlen);
    if (fd < 0)
        return false;
    snprintf(log_path, sizeof(log_path), "%s", path);
    atomic_store(&log_fd, fd);
    return true;
}

bool access_log_enabled(void) { return atomic_load_explicit(&log_fd, memory_order_relaxed) >= 0; }

bool access_log_reopen(char *err, size_t errlen)
{
    int fd = atomic_load(&log_fd);
    if (fd < 0 || log_stdout)
        return true;
    int nfd = open_append(log_path, err, errlen);
    if (nfd < 0)
        return false;
    bool ok = dup2(nfd, fd) >= 0;
    if (!ok)
        snprintf(err, errlen, "--access-log %s: %s", log_path, strerror(errno));
    close(nfd);
    return ok;
}

void access_log_close(void)
{
    int fd = atomic_exchange(&log_fd, -1);
    if (fd >= 0 && !log_stdout)
        close(fd);
}

/* Appends s[0..n) as the inside of a JSON string: quotes, backslashes,
 * control characters and bytes beyond ASCII escaped (a raw path may hold
 * any byte); returns the new length, stopping before `cap`. */
static size_t put_json(char *out, size_t at, size_t cap, const char *s, size_t n)
{
    for (size_t i = 0; i < n && at + 7 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[at++] = '\\';
            out[at++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            at += (size_t)snprintf(out + at, cap - at, "\\u%04x", c);
        } else {
            out[at++] = (char)c;
        }
    }
    return at;
}

static size_t put_str(char *out, size_t at, size_t cap, const char *name, const char *v, size_t n)
{
    at += (size_t)snprintf(out + at, cap - at, ",\"%s\":", name);
    if (!v)
        return at + (size_t)snprintf(out + at, cap - at, "null");
    out[at++] = '"';
    at = put_json(out, at, cap - 1, v, n);
    out[at++] = '"';
    return at;
}

/* The line's start: {"time":"...","client":...,"token":... */
static size_t line_head(char *line, size_t cap, int64_t time_ns, const char *client, const char *token)
{
    struct tm tm;
    time_t sec = (time_t)(time_ns / 1000000000);
    gmtime_r(&sec, &tm);
    size_t at = (size_t)snprintf(line, cap, "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"", tm.tm_year + 1900,
                                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                                 (int)(time_ns / 1000000 % 1000));
    at = put_str(line, at, cap, "client", client, client ? strlen(client) : 0);
    return put_str(line, at, cap, "token", token, token ? strlen(token) : 0);
}

void access_log_write(int64_t time_ns, const char *client, const char *token, const char *method,
                      const char *path, size_t path_len, int status, int64_t duration_ns)
{
    access_log_write_refused(time_ns, client, token, method, path, path_len, status, duration_ns, NULL);
}

void access_log_write_refused(int64_t time_ns, const char *client, const char *token, const char *method,
                              const char *path, size_t path_len, int status, int64_t duration_ns,
                              const char *violated)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd < 0)
        return;
    char line[2048];
    const size_t cap = sizeof(line) - 96;   /* room for status, duration and the end */
    size_t at = line_head(line, cap, time_ns, client, token);
    at = put_str(line, at, cap, "method", method, strlen(method));
    at = put_str(line, at, cap, "path", path, path_len);
    if (violated && *violated) {
        /* "policy/limit,..." of [A-Za-z0-9_.-/,] (api/limiter.c): an array of its items */
        at += (size_t)snprintf(line + at, cap - at, ",\"violated\":[\"");
        for (const char *v = violated; *v && at < cap - 4; v++) {
            if (*v == ',') {
                memcpy(line + at, "\",\"", 3);
                at += 3;
            } else if (*v != '"' && *v != '\\' && (unsigned char)*v >= 0x20) {
                line[at++] = *v;
            }
        }
        line[at++] = '"';
        line[at++] = ']';
    }
    at += (size_t)snprintf(line + at, sizeof(line) - at, ",\"status\":%d,\"duration_ms\":%.3f}\n", status,
                           (double)duration_ns / 1e6);
    ssize_t w = write(fd, line, at);
    (void)w;   /* an access log that cannot be written must not stop serving */
}

void access_log_write_command(int64_t time_ns, const char *client, const char *token, const char *command,
                              size_t command_len, const char *key, size_t key_len, const char *outcome,
                              size_t outcome_len, int64_t duration_ns)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd < 0)
        return;
    char line[2048];
    const size_t cap = sizeof(line) - 160;   /* room for the outcome, duration and the end */
    size_t at = line_head(line, cap, time_ns, client, token);
    at = put_str(line, at, cap, "command", command, command_len);
    at = put_str(line, at, cap, "key", key, key_len);
    at = put_str(line, at, sizeof(line) - 64, "outcome", outcome, outcome_len < 40 ? outcome_len : 40);
    at += (size_t)snprintf(line + at, sizeof(line) - at, ",\"duration_ms\":%.3f}\n", (double)duration_ns / 1e6);
    ssize_t w = write(fd, line, at);
    (void)w;
}
