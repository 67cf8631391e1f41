/* harness.c - see harness.h. */
#include "tests/integration/harness.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/persist_fmt.h"

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fail_msg("%s", msg);
    abort();   /* not reached: fail_msg longjmps */
}

void tmpdir_make(char *out, size_t n)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, n, "%s/tally-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(out))
        die("mkdtemp: %s", strerror(errno));
}

void tmpdir_remove(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "harness: could not remove %s\n", dir);
}

char *tally_log(const tally_proc_t *p)
{
    FILE *f = fopen(p->log, "r");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static long long file_limit;

/* A hung test must fail rather than stall CI: every integration test
 * program dies after 20 minutes. */
__attribute__((constructor)) static void watchdog(void) { alarm(1200); }

/* Every tallyd this test process started, so that a failed test (cmocka
 * longjmps past its cleanup) never leaves one running. */
#define MAX_CHILDREN 256
static pid_t children[MAX_CHILDREN];

static void kill_children(void)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] > 0 && kill(children[i], 0) == 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
        }
}

static void remember_child(pid_t pid)
{
    static bool registered;
    if (!registered) {
        atexit(kill_children);
        registered = true;
    }
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] <= 0 || kill(children[i], 0) != 0) {
            children[i] = pid;
            return;
        }
}

void tally_set_file_limit(long long bytes) { file_limit = bytes; }

/* The tallyd under test: $TALLYD, else the optimised build. */
static const char *tallyd_path(void)
{
    const char *bin = getenv("TALLYD");
    return bin ? bin : "build/release/tallyd";
}

static pid_t spawn(tally_proc_t *p, const char *dir, const char *const *args)
{
    const char *bin = tallyd_path();
    char dircopy[256] = "";
    if (dir)
        snprintf(dircopy, sizeof(dircopy), "%s", dir);   /* dir may be p->dir itself */
    memset(p, 0, sizeof(*p));
    if (dir) {
        snprintf(p->dir, sizeof(p->dir), "%s", dircopy);
    } else {
        tmpdir_make(p->dir, sizeof(p->dir));
        p->own_dir = true;
    }
    if (p->dir[0] == '/') {
        snprintf(p->log, sizeof(p->log), "%s.log", p->dir);
    } else {
        /* A relative or empty data directory (a test of how tallyd refuses
         * it) must not leave its log in the current directory. */
        const char *base = getenv("TMPDIR");
        snprintf(p->log, sizeof(p->log), "%s/tally-test-XXXXXX.log", base && *base ? base : "/tmp");
        int fd = mkstemps(p->log, 4);
        if (fd < 0)
            die("mkstemps: %s", strerror(errno));
        close(fd);
        p->own_log = true;
    }
    FILE *lf = fopen(p->log, "r");
    if (lf) {
        fseek(lf, 0, SEEK_END);
        p->log_start = ftell(lf);
        fclose(lf);
    }
    const char *argv[64];
    int n = 0;
    argv[n++] = bin;
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--bind";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--data-dir";
    argv[n++] = p->dir;
    argv[n++] = "--threads";
    argv[n++] = "2";
    /* $TALLYD_ARGS: flags for every tallyd of the run (the ThreadSanitizer
     * run passes --shards 32: its deadlock detector holds at most 64 locks) */
    static char extra[256];
    const char *env = getenv("TALLYD_ARGS");
    snprintf(extra, sizeof(extra), "%s", env ? env : "");
    for (char *save = NULL, *t = strtok_r(extra, " ", &save); t && n < 40; t = strtok_r(NULL, " ", &save))
        argv[n++] = t;
    for (int i = 0; args && args[i] && n < 62; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        if (file_limit > 0) {
            struct rlimit rl = { (rlim_t)file_limit, (rlim_t)file_limit };
            setrlimit(RLIMIT_FSIZE, &rl);
            signal(SIGXFSZ, SIG_IGN);
        }
        execv(bin, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    p->pid = pid;
    remember_child(pid);
    return pid;
}

static int wait_status(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return -WTERMSIG(st);
}

/* Finds "listening on ADDR:PORT" (the last one) in the log. */
static int port_from_log(const tally_proc_t *p)
{
    char *log = tally_log(p);
    int port = 0;
    size_t skip = strlen(log) >= (size_t)p->log_start ? (size_t)p->log_start : 0;
    for (char *s = log + skip; (s = strstr(s, "listening on ")); s++) {
        char *colon = strchr(s + 13, ' ');
        if (!colon)
            break;
        char *c = colon;
        while (c > s && *c != ':')
            c--;
        port = atoi(c + 1);
    }
    free(log);
    return port;
}

/* Finds "Redis protocol on ADDR:PORT" (--resp-port) in the log: 0 when
 * the port is off. */
static int resp_port_from_log(const tally_proc_t *p)
{
    char *log = tally_log(p);
    int port = 0;
    size_t skip = strlen(log) >= (size_t)p->log_start ? (size_t)p->log_start : 0;
    for (char *s = log + skip; (s = strstr(s, "Redis protocol on ")); s++) {
        char *end = strchr(s + 18, ';');
        if (!end)
            break;
        char *c = end;
        while (c > s && *c != ':')
            c--;
        port = atoi(c + 1);
    }
    free(log);
    return port;
}

/* Starts tallyd; returns -1 once it is ready (or listening, without
 * wait_ready), or its exit status when it exits first and may_exit. */
static int start_or_exit(tally_proc_t *p, const char *dir, const char *const *args, bool wait_ready, bool may_exit)
{
    spawn(p, dir, args);
    struct timespec ts = { 0, 2 * 1000000L };
    for (int i = 0; i < 5000; i++) {
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            p->pid = 0;
            if (may_exit)
                return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            char *log = tally_log(p);
            die("tallyd exited during start-up; log:\n%s", log);
        }
        if (!p->port) {
            p->port = port_from_log(p);
            p->resp_port = p->port ? resp_port_from_log(p) : 0;
        }
        if (p->port && !wait_ready)
            return -1;
        if (p->port) {
            http_resp_t r = http(p, "GET", "/readyz", NULL, NULL);
            long s = r.status;
            http_free(&r);
            if (s == 200)
                return -1;
        }
        nanosleep(&ts, NULL);
    }
    char *log = tally_log(p);
    die("tallyd did not become ready in 10 s; log:\n%s", log);
}

void tally_start(tally_proc_t *p, const char *dir, const char *const *args) { start_or_exit(p, dir, args, true, false); }
void tally_start_nowait(tally_proc_t *p, const char *dir, const char *const *args)
{
    start_or_exit(p, dir, args, false, false);
}
int tally_start_or_exit(tally_proc_t *p, const char *dir, const char *const *args)
{
    return start_or_exit(p, dir, args, true, true);
}

int tally_start_expect_exit(tally_proc_t *p, const char *dir, const char *const *args)
{
    spawn(p, dir, args);
    for (int i = 0; i < 1000; i++) {
        int st;
        pid_t w = waitpid(p->pid, &st, WNOHANG);
        if (w == p->pid) {
            p->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
        }
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    kill(p->pid, SIGKILL);
    wait_status(p->pid);
    p->pid = 0;
    die("tallyd was expected to refuse to start but kept running");
}

int tally_stop(tally_proc_t *p)
{
    if (!p->pid)
        return 0;
    kill(p->pid, SIGTERM);
    int st = wait_status(p->pid);
    p->pid = 0;   /* the port is kept: client threads may still read it */
    if (st < 0) {
        /* a stop that dies on a signal (an abort, a crash): its log is the
         * only evidence, and tally_cleanup removes it, so show its end now */
        char *log = tally_log(p);
        size_t n = strlen(log);
        print_error("tallyd died of signal %d on SIGTERM; the end of its log (%s):\n%s\n", -st, p->log,
                    log + (n > 6000 ? n - 6000 : 0));
        free(log);
    }
    return st;
}

void tally_kill(tally_proc_t *p)
{
    if (!p->pid)
        return;
    kill(p->pid, SIGKILL);
    wait_status(p->pid);
    p->pid = 0;   /* the port is kept: client threads may still read it */
}

size_t tally_threads_each(pid_t pid, bool (*fn)(void *ud, const char *fields), void *ud)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    size_t visited = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char stat[1024], name[sizeof(path) + sizeof(e->d_name) + 8];
        snprintf(name, sizeof(name), "%s/%s/stat", path, e->d_name);
        FILE *f = fopen(name, "r");
        if (!f)
            continue;   /* the thread ended meanwhile */
        size_t n = fread(stat, 1, sizeof(stat) - 1, f);
        fclose(f);
        stat[n] = '\0';
        const char *close = strrchr(stat, ')');
        if (!close)
            continue;
        visited++;
        if (!fn(ud, close + 1))
            break;
    }
    closedir(d);
    return visited;
}

/* tally_threads_each: false (stop) at the first thread not stopped */
static bool thread_stopped(void *ud, const char *fields)
{
    bool *all = ud;
    *all = fields[0] == ' ' && (fields[1] == 'T' || fields[1] == 't');
    return *all;
}

/* Whether every thread of process `pid` is stopped (state T or t). */
static bool all_threads_stopped(pid_t pid)
{
    bool all = false;
    return tally_threads_each(pid, thread_stopped, &all) > 0 && all;
}

void tally_pause(tally_proc_t *p)
{
    if (kill(p->pid, SIGSTOP) != 0)
        die("SIGSTOP to tallyd %d: %s", (int)p->pid, strerror(errno));
    for (int i = 0; i < 2000; i++) {
        if (all_threads_stopped(p->pid))
            return;
        struct timespec ts = { 0, 5 * 1000000L };
        nanosleep(&ts, NULL);
    }
    die("tallyd %d did not stop within 10 s of SIGSTOP", (int)p->pid);
}

void tally_resume(tally_proc_t *p)
{
    if (kill(p->pid, SIGCONT) != 0)
        die("SIGCONT to tallyd %d: %s", (int)p->pid, strerror(errno));
}

/* A sanitizer report anywhere in a tallyd log fails the test that ran it,
 * and the run: cmocka leaves a failure in a group's teardown (where the
 * last tallyd of a suite stops) out of the status it returns, so the
 * process exits 1 at its end whatever main returns. */
static bool sanitizer_reported;

static void exit_failed_on_report(void)
{
    if (sanitizer_reported)
        _exit(1);
}

static void check_sanitizers(const tally_proc_t *p)
{
    char *log = tally_log(p);
    const char *bad = strstr(log, "ERROR: AddressSanitizer");
    if (!bad)
        bad = strstr(log, "ERROR: LeakSanitizer");
    if (!bad)
        bad = strstr(log, "runtime error:");
    if (!bad)
        bad = strstr(log, "WARNING: ThreadSanitizer");
    if (bad) {
        print_error("tallyd sanitizer report in %s:\n%.4000s\n", p->log, bad);
        free(log);
        if (!sanitizer_reported) {
            sanitizer_reported = true;
            atexit(exit_failed_on_report);
        }
        fail();
    }
    free(log);
}

int tally_check(const char *path, char *out, size_t n)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s --check %s 2>&1", tallyd_path(), path);
    FILE *f = popen(cmd, "r");
    if (!f)
        die("%s: %s", cmd, strerror(errno));
    char sink[4096];
    if (out && n) {
        size_t got = fread(out, 1, n - 1, f);
        out[got] = '\0';
    }
    while (fread(sink, 1, sizeof(sink), f) > 0)
        ;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void tally_cleanup(tally_proc_t *p)
{
    if (p->pid)
        tally_stop(p);   /* a clean exit lets LeakSanitizer report */
    if (p->log[0])
        check_sanitizers(p);
    if (p->own_dir || p->own_log)
        unlink(p->log);
    if (p->own_dir)
        tmpdir_remove(p->dir);
}

/* ------------------------------------------------------------------------ */
/* HTTP                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct growbuf {
    char *p;
    size_t len;
} growbuf_t;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    growbuf_t *b = ud;
    size_t n = size * nmemb;
    b->p = realloc(b->p, b->len + n + 1);
    memcpy(b->p + b->len, ptr, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

/* One easy handle per thread, cleaned up when the thread exits. */
static pthread_key_t curl_key;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_release(void *c) { curl_easy_cleanup(c); }

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_key_create(&curl_key, curl_release);
}

static CURL *curl_for_thread(void)
{
    pthread_once(&curl_once, curl_init_once);
    CURL *c = pthread_getspecific(curl_key);
    if (!c) {
        c = curl_easy_init();
        pthread_setspecific(curl_key, c);
    }
    curl_easy_reset(c);
    return c;
}

static http_resp_t http_full(const tally_proc_t *p, const char *method, const char *path, const void *body,
                             size_t len, const char *ctype, const char *const *extra);

http_resp_t http_bin(const tally_proc_t *p, const char *method, const char *path, const void *body,
                     size_t len, const char *ctype)
{
    return http_full(p, method, path, body, len, ctype, NULL);
}

http_resp_t http_h(const tally_proc_t *p, const char *method, const char *path, const char *body,
                   const char *ctype, const char *const *headers)
{
    return http_full(p, method, path, body, body ? strlen(body) : 0, ctype, headers);
}

static http_resp_t http_full(const tally_proc_t *p, const char *method, const char *path, const void *body,
                             size_t len, const char *ctype, const char *const *extra)
{
    http_resp_t r;
    memset(&r, 0, sizeof(r));
    CURL *c = curl_for_thread();
    char url[70000];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", p->port, path);
    growbuf_t b = { NULL, 0 }, h = { NULL, 0 };
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    struct curl_slist *hdrs = NULL;
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        char ct[200];
        snprintf(ct, sizeof(ct), "Content-Type: %s", ctype ? ctype : "application/json");
        hdrs = curl_slist_append(hdrs, ct);
    }
    hdrs = curl_slist_append(hdrs, "Expect:");
    for (int i = 0; extra && extra[i]; i++)
        hdrs = curl_slist_append(hdrs, extra[i]);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        free(b.p);
        free(h.p);
        r.status = -1;
        return r;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    r.body = b.p ? b.p : strdup("");
    r.len = b.len;
    r.headers = h.p ? h.p : strdup("");
    json_error_t je;
    r.json = r.len ? json_loadb(r.body, r.len, 0, &je) : NULL;
    return r;
}

http_resp_t http(const tally_proc_t *p, const char *method, const char *path, const char *body,
                 const char *ctype)
{
    return http_bin(p, method, path, body, body ? strlen(body) : 0, ctype);
}

http_resp_t httpf(const tally_proc_t *p, const char *method, const char *body, const char *pathfmt, ...)
{
    char path[65536];
    va_list ap;
    va_start(ap, pathfmt);
    vsnprintf(path, sizeof(path), pathfmt, ap);
    va_end(ap);
    return http(p, method, path, body, NULL);
}

void http_free(http_resp_t *r)
{
    free(r->body);
    free(r->headers);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

bool http_header(const http_resp_t *r, const char *name, char *out, size_t n)
{
    size_t nl = strlen(name);
    for (const char *s = r->headers; s && *s;) {
        const char *eol = strstr(s, "\r\n");
        size_t len = eol ? (size_t)(eol - s) : strlen(s);
        if (len > nl && s[nl] == ':' && strncasecmp(s, name, nl) == 0) {
            const char *v = s + nl + 1;
            while (*v == ' ')
                v++;
            size_t vl = (size_t)(s + len - v);
            if (vl >= n)
                vl = n - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return true;
        }
        if (!eol)
            break;
        s = eol + 2;
    }
    return false;
}

void assert_status_at(const http_resp_t *r, long status, const char *file, int line)
{
    if (r->status != status) {
        print_error("expected HTTP %ld, got %ld: %s\n", status, r->status, r->body ? r->body : "");
        _fail(file, line);
    }
}

void assert_error_at(const http_resp_t *r, long status, const char *code, const char *file, int line)
{
    assert_status_at(r, status, file, line);
    json_t *e = r->json ? json_object_get(r->json, "error") : NULL;
    const char *c = e ? json_string_value(json_object_get(e, "code")) : NULL;
    const char *m = e ? json_string_value(json_object_get(e, "message")) : NULL;
    if (!c || strcmp(c, code) != 0 || !m || !*m) {
        print_error("expected error envelope with code %s, got: %s\n", code, r->body ? r->body : "");
        _fail(file, line);
    }
}

long long json_int_of(const http_resp_t *r, const char *name)
{
    json_t *v = r->json ? json_object_get(r->json, name) : NULL;
    if (!json_is_integer(v))
        die("response has no integer '%s': %s", name, r->body ? r->body : "");
    return json_integer_value(v);
}

bool json_bool_of(const http_resp_t *r, const char *name)
{
    json_t *v = r->json ? json_object_get(r->json, name) : NULL;
    if (!json_is_boolean(v))
        die("response has no boolean '%s': %s", name, r->body ? r->body : "");
    return json_is_true(v);
}

/* The JSON of a GET (owned by the caller); fails unless 200. */
json_t *http_get_json(const tally_proc_t *p, const char *path)
{
    http_resp_t r = http(p, "GET", path, NULL, NULL);
    if (r.status != 200 || !r.json)
        fail_msg("GET %s: %ld %s", path, r.status, r.body);
    json_t *j = json_incref(r.json);
    http_free(&r);
    return j;
}

/* Fails unless the request answers `status` (and exactly `want_body`, when given). */
void http_expect(const tally_proc_t *p, const char *method, const char *path, const char *body, long status,
                 const char *want_body)
{
    http_resp_t r = http(p, method, path, body, NULL);
    if (r.status != status || (want_body && strcmp(r.body, want_body) != 0))
        fail_msg("%s %s %s: got %ld %s, want %ld %s", method, path, body ? body : "", r.status, r.body, status,
                 want_body ? want_body : "");
    http_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Files                                                                    */
/* ------------------------------------------------------------------------ */

char *file_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc((size_t)n + 1);
    if (!data || n < 0 || fread(data, 1, (size_t)n, f) != (size_t)n)
        die("%s: cannot read", path);
    fclose(f);
    data[n] = '\0';
    *len = (size_t)n;
    return data;
}

void file_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        die("%s: cannot write: %s", path, strerror(errno));
}

bool file_equals(const char *path, const void *data, size_t len)
{
    size_t n;
    char *now = file_read(path, &n);
    bool same = n == len && memcmp(now, data, len) == 0;
    free(now);
    return same;
}

/* ------------------------------------------------------------------------ */
/* Journal files                                                            */
/* ------------------------------------------------------------------------ */

size_t journal_frames(const char *d, size_t len, size_t *offs, size_t max)
{
    size_t off = JOURNAL_HEADER_SIZE, n = 0;
    while (off + JOURNAL_FRAME_SIZE <= len && n < max) {
        uint32_t plen = (uint32_t)(unsigned char)d[off] | (uint32_t)(unsigned char)d[off + 1] << 8 |
                        (uint32_t)(unsigned char)d[off + 2] << 16 | (uint32_t)(unsigned char)d[off + 3] << 24;
        if (plen == 0 || off + JOURNAL_FRAME_SIZE + plen > len)
            break;
        offs[n++] = off;
        off += JOURNAL_FRAME_SIZE + plen;
    }
    offs[n] = off;
    return n;
}

int tally_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr *)&a, &n) != 0)
        fail_msg("tally_free_port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}
