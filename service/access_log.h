/*
 * access_log.h - `--access-log FILE|-`: one JSON line per answered request,
 *
 *   {"time":"2026-11-24T22:45:01.123Z","client":"10.0.0.7","token":"gateway",
 *    "method":"POST","path":"/throttle","status":200,"duration_ms":0.21}
 *
 * (a rate-limit refusal adds "violated":["policy/limit",...] before
 * "status": the policy and which of its limits refused, api/limiter.c),
 *
 * and for each command on the Redis port (--resp-port):
 *
 *   {"time":"2026-11-24T22:45:01.123Z","client":"10.0.0.7","token":"gateway",
 *    "command":"cl.throttle","key":"user123","outcome":"ok","duration_ms":0.01}
 *
 * (`key` its first key, null when it has none; `outcome` "ok" or the
 * error's code as Redis sends it: "ERR", "WRONGTYPE", "NOAUTH"...).
 * `token` is the name of the caller's token (null without one); never a
 * body, a query string or a token value.  Each line is one write(2) on a
 * file opened O_APPEND, so lines from worker threads never interleave.
 * SIGHUP reopens the file (after logrotate moved it): the new descriptor
 * replaces the old one with dup2, so a writer never sees a closed one.
 * Process-wide: there is one access log.
 */
#ifndef TALLY_ACCESS_LOG_H
#define TALLY_ACCESS_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opens the log ("-" is standard output); false with a message. */
bool access_log_open(const char *path, char *err, size_t errlen);
bool access_log_enabled(void);
/* Reopens the file at its path (a no-op for "-"); false with a message (the
 * old file stays in use). */
bool access_log_reopen(char *err, size_t errlen);
void access_log_close(void);
/* Writes one line; client and token may be NULL, path is the raw path
 * (without the query string), time_ns the wall clock at the answer. */
void access_log_write(int64_t time_ns, const char *client, const char *token, const char *method,
                      const char *path, size_t path_len, int status, int64_t duration_ns);
/* The same with the limits a rate-limit refusal names ("policy/limit"
 * joined by ','; NULL or "" none), as "violated":["policy/limit",...]. */
void access_log_write_refused(int64_t time_ns, const char *client, const char *token, const char *method,
                              const char *path, size_t path_len, int status, int64_t duration_ns,
                              const char *violated);
/* A Redis command's line (strings with lengths: raw arguments; key may be
 * NULL). */
void access_log_write_command(int64_t time_ns, const char *client, const char *token, const char *command,
                              size_t command_len, const char *key, size_t key_len, const char *outcome,
                              size_t outcome_len, int64_t duration_ns);

#endif
