/*
 * harness.h - integration tests against a real tallyd process.
 *
 * tally_start() runs $TALLYD (the binary under test) on a port it picks
 * itself (--port 0; the harness reads the port from its log), in a fresh
 * temporary data directory unless told otherwise, and waits until /readyz
 * answers 200.  http() sends one request with libcurl and returns status,
 * headers, body and the body parsed as JSON when it is JSON.
 *
 * Tests use cmocka; helpers here abort the test (fail()) on harness errors.
 */
#ifndef TALLY_HARNESS_H
#define TALLY_HARNESS_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/types.h>
#include <cmocka.h>

typedef struct tally_proc {
    pid_t pid;
    int port;
    int resp_port;        /* --resp-port's, from the log (0: off) */
    char dir[256];        /* data directory */
    char log[300];        /* stderr of the process */
    bool own_dir;         /* created by the harness: removed by tally_cleanup */
    bool own_log;         /* log in a temporary file of its own (removed by tally_cleanup) */
    long log_start;       /* size of the log before this process started */
} tally_proc_t;

typedef struct http_resp {
    long status;
    char *body;
    size_t len;
    char *headers;        /* raw header block */
    json_t *json;         /* parsed body, or NULL */
} http_resp_t;

/* Makes a fresh temporary directory (under $TMPDIR or /tmp). */
void tmpdir_make(char *out, size_t n);
/* rm -rf */
void tmpdir_remove(const char *dir);

/* Starts tallyd.  dir NULL = new temporary data directory.  args: extra
 * flags, NULL-terminated (may be NULL).  Fails the test if it does not
 * become ready within 10 s. */
void tally_start(tally_proc_t *p, const char *dir, const char *const *args);
/* Like tally_start but returns as soon as the port is known (the process
 * listens before it has loaded its data), without waiting for /readyz. */
void tally_start_nowait(tally_proc_t *p, const char *dir, const char *const *args);
/* Like tally_start, but the process may also exit by itself (refusing to
 * start): returns -1 once it is ready, else its exit status. */
int tally_start_or_exit(tally_proc_t *p, const char *dir, const char *const *args);
/* Like tally_start but expects the process to exit by itself (refusing to
 * start); returns its exit status and leaves its log in p->log. */
int tally_start_expect_exit(tally_proc_t *p, const char *dir, const char *const *args);
/* Limits the size of files the next started tallyd may write (RLIMIT_FSIZE,
 * with SIGXFSZ ignored, so writes fail with EFBIG as on a full disk); 0 = no
 * limit. */
void tally_set_file_limit(long long bytes);
/* A TCP port on 127.0.0.1 that nothing listens on right now. */
int tally_free_port(void);
/* SIGTERM and wait; returns the exit status (or -signal). */
int tally_stop(tally_proc_t *p);
/* SIGKILL and wait. */
void tally_kill(tally_proc_t *p);
/* Calls fn with the fields of each thread's /proc/PID/task/TID/stat after
 * the command's ')' (" S 1 ...": the state is the 3rd field, nice the
 * 19th), until fn returns false; returns how many threads it visited. */
size_t tally_threads_each(pid_t pid, bool (*fn)(void *ud, const char *fields), void *ud);
/* SIGSTOP, and waits until every thread of tallyd has stopped: kill()
 * returns before that, and until a thread takes part in the stop it can
 * still wake on I/O and act (a replica can still acknowledge a record). */
void tally_pause(tally_proc_t *p);
/* SIGCONT. */
void tally_resume(tally_proc_t *p);
/* Stops if running and removes the data directory if the harness made it. */
void tally_cleanup(tally_proc_t *p);

/* The fixture of a suite whose tests all run against one default tallyd:
 * declares `static tally_proc_t name` and the cmocka group functions
 * setup (starts it) and teardown (stops it, removes its files). */
#define TALLY_ONE_SERVER_SUITE(name)                                                                                  \
    static tally_proc_t name;                                                                                         \
    static int setup(void **state)                                                                                    \
    {                                                                                                                 \
        (void)state;                                                                                                  \
        tally_start(&name, NULL, NULL);                                                                               \
        return 0;                                                                                                     \
    }                                                                                                                 \
    static int teardown(void **state)                                                                                 \
    {                                                                                                                 \
        (void)state;                                                                                                  \
        tally_cleanup(&name);                                                                                         \
        return 0;                                                                                                     \
    }
/* Runs `tallyd --check path` (the tallyd under test); returns its exit
 * status (-1 when it did not exit), and its output (stdout and stderr) in
 * out when out is not NULL. */
int tally_check(const char *path, char *out, size_t n);
/* Reads the whole log file (malloc'd). */
char *tally_log(const tally_proc_t *p);

/* One request.  body may be NULL; ctype NULL means application/json when a
 * body is given.  path includes the query string. */
http_resp_t http(const tally_proc_t *p, const char *method, const char *path, const char *body,
                 const char *ctype);
http_resp_t http_bin(const tally_proc_t *p, const char *method, const char *path, const void *body,
                     size_t len, const char *ctype);
/* With extra request headers: "Name: value" strings, NULL-terminated (a
 * header given as "Name:" removes one curl would send). */
http_resp_t http_h(const tally_proc_t *p, const char *method, const char *path, const char *body,
                   const char *ctype, const char *const *headers);
/* printf-style path and body. */
http_resp_t httpf(const tally_proc_t *p, const char *method, const char *body, const char *pathfmt, ...)
    __attribute__((format(printf, 4, 5)));
void http_free(http_resp_t *r);
/* Value of a response header (case-insensitive), copied into out; false if absent. */
bool http_header(const http_resp_t *r, const char *name, char *out, size_t n);

/* Assertions with useful messages. */
#define assert_status(r, s) assert_status_at((r), (s), __FILE__, __LINE__)
void assert_status_at(const http_resp_t *r, long status, const char *file, int line);
/* Error envelope with this code (and status). */
#define assert_error(r, s, code) assert_error_at((r), (s), (code), __FILE__, __LINE__)
void assert_error_at(const http_resp_t *r, long status, const char *code, const char *file, int line);
/* Integer member of the JSON body. */
long long json_int_of(const http_resp_t *r, const char *name);
bool json_bool_of(const http_resp_t *r, const char *name);
/* The JSON of a GET (owned by the caller); fails unless 200. */
json_t *http_get_json(const tally_proc_t *p, const char *path);
/* Fails unless the request answers `status` (and exactly `want_body`, when given). */
void http_expect(const tally_proc_t *p, const char *method, const char *path, const char *body, long status,
                 const char *want_body);

/* Whole files; any error fails the test.  file_read's buffer is malloc'd and
 * NUL-terminated (*len excludes the NUL). */
char *file_read(const char *path, size_t *len);
void file_write(const char *path, const void *data, size_t len);
/* Whether the file holds exactly these bytes (a missing file fails the test). */
bool file_equals(const char *path, const void *data, size_t len);

/* The record boundaries of a journal file's bytes, walked by their frames
 * (request and seal records alike) up to the first zero or overrunning
 * length, at most max records: offs (max + 1 entries) gets where each record
 * starts, then where the last one ends.  Returns the number of records. */
size_t journal_frames(const char *d, size_t len, size_t *offs, size_t max);

#endif
