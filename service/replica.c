/* replica.c - see replica.h: the follower thread. */
#include "service/replica.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "core/persist_fmt.h"
#include "service/clock.h"
#include "service/log.h"

#define POLL_WAIT_MS 1000        /* a poll waits this long for a record */
#define RETRY_MS 500             /* after a failed exchange */
#define CONNECT_TIMEOUT_MS 2000

struct replica {
    cmd_server_t *srv;
    persist_t *p;
    char url[CMD_REPL_URL_MAX];
    char *auth;                  /* "Authorization: Bearer ..." or NULL (mu: a reload replaces it) */
    char id[CMD_REPL_ID_MAX];
    pthread_t thread;
    _Atomic bool stop;

    /* Thread-only: the exchange being read. */
    CURL *curl;
    wbuf_t body;
    char h_run[CMD_REPL_ID_MAX];
    uint64_t h_offset, h_records, h_epoch, h_head;
    bool h_bad;                  /* a position header is not a number, or the epoch is out of range */

    /* Position and status: written by the thread under mu, read by /info. */
    pthread_mutex_t mu;
    bool synced;                 /* has a position in `run` */
    char run[CMD_REPL_ID_MAX];
    uint64_t offset, records, epoch, head, head_records;
    bool linked;
    uint64_t full_syncs, resumes, applied;
    uint64_t snapshot_bytes;     /* the last snapshot loaded */
    int64_t snapshot_ms;         /* its fetch and load, in ms */
    int64_t last_ok_ms;
    char last_err[CMD_REPL_ERROR_MAX];
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    replica_t *f = ud;
    wbuf_put_bytes(&f->body, p, size * n);
    return f->body.oom ? 0 : size * n;
}

/* A header's decimal value; false when it is not one (or above max). */
static bool header_u64(const char *v, uint64_t max, uint64_t *out)
{
    uint64_t x = 0;
    if (*v < '0' || *v > '9')
        return false;
    for (; *v >= '0' && *v <= '9'; v++) {
        if (x > (max - (uint64_t)(*v - '0')) / 10)
            return false;
        x = x * 10 + (uint64_t)(*v - '0');
    }
    v += strspn(v, " \t");
    *out = x;
    return *v == '\0';
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    replica_t *f = ud;
    size_t len = size * n;
    char line[256];
    size_t l = len < sizeof(line) - 1 ? len : sizeof(line) - 1;
    memcpy(line, p, l);
    line[l] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    char *colon = strchr(line, ':');
    if (!colon)
        return len;
    *colon = '\0';
    const char *v = colon + 1 + strspn(colon + 1, " \t");
    if (!strcasecmp(line, "X-Tally-Repl-Run"))
        snprintf(f->h_run, sizeof(f->h_run), "%s", v);
    else if (!strcasecmp(line, "X-Tally-Repl-Offset"))
        f->h_bad |= !header_u64(v, UINT64_MAX, &f->h_offset);
    else if (!strcasecmp(line, "X-Tally-Repl-Records"))
        f->h_bad |= !header_u64(v, UINT64_MAX, &f->h_records);
    else if (!strcasecmp(line, "X-Tally-Repl-Epoch"))
        f->h_bad |= !header_u64(v, TALLY_EPOCH_MAX, &f->h_epoch);
    else if (!strcasecmp(line, "X-Tally-Repl-Head"))
        f->h_bad |= !header_u64(v, UINT64_MAX, &f->h_head);
    return len;
}

/* Aborts an exchange when the follower is told to stop. */
static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    replica_t *f = ud;
    return atomic_load(&f->stop) ? 1 : 0;
}

/* One GET of `path` on the primary; returns the HTTP status (0: no answer,
 * with last_err set). */
static long exchange(replica_t *f, const char *path, long timeout_ms)
{
    char url[CMD_REPL_URL_MAX + 256];
    snprintf(url, sizeof(url), "%s%s", f->url, path);
    f->body.len = 0;
    f->body.oom = false;
    f->h_run[0] = '\0';
    f->h_offset = f->h_records = f->h_epoch = f->h_head = 0;
    f->h_bad = false;
    pthread_mutex_lock(&f->mu);
    struct curl_slist *hdrs = f->auth ? curl_slist_append(NULL, f->auth) : NULL;
    bool oom = f->auth && !hdrs;
    pthread_mutex_unlock(&f->mu);
    if (oom) {
        pthread_mutex_lock(&f->mu);
        snprintf(f->last_err, sizeof(f->last_err), "%s: out of memory", url);
        pthread_mutex_unlock(&f->mu);
        return 0;
    }
    curl_easy_setopt(f->curl, CURLOPT_URL, url);
    curl_easy_setopt(f->curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(f->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    CURLcode rc = curl_easy_perform(f->curl);
    curl_slist_free_all(hdrs);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(f->curl, CURLINFO_RESPONSE_CODE, &status);
    pthread_mutex_lock(&f->mu);
    if (rc != CURLE_OK) {
        snprintf(f->last_err, sizeof(f->last_err), "%s: %s", url, curl_easy_strerror(rc));
    } else if (status != 200) {
        snprintf(f->last_err, sizeof(f->last_err), "%s answered %ld: %.*s", url, status,
                 (int)(f->body.len < 160 ? f->body.len : 160), f->body.data ? (char *)f->body.data : "");
    } else if (f->h_bad) {   /* a primary that sends this is broken, or not a tally primary */
        snprintf(f->last_err, sizeof(f->last_err),
                 "%s: a X-Tally-Repl-* header is not a number, or an epoch above %" PRIu64 ": answer refused", url,
                 TALLY_EPOCH_MAX);
        status = 0;
    }
    pthread_mutex_unlock(&f->mu);
    return status;
}

static void epoch_seen(replica_t *f, uint64_t e)
{
    if (e > f->epoch)
        f->epoch = e;
}

/* Fetches and loads a snapshot: the position becomes its offset. */
static bool full_sync(replica_t *f)
{
    int64_t t0 = clock_mono_ns();
    char path[96];
    snprintf(path, sizeof(path), "/replication/snapshot?epoch=%" PRIu64, f->epoch);
    long st = exchange(f, path, 0);
    if (st != 200 || !f->h_run[0])
        return false;
    char err[300];
    if (!persist_load_snapshot_bytes(f->p, f->body.data, f->body.len, err, sizeof(err))) {
        pthread_mutex_lock(&f->mu);
        snprintf(f->last_err, sizeof(f->last_err), "%s", err);
        pthread_mutex_unlock(&f->mu);
        log_error("replication: %s", err);
        return false;
    }
    pthread_mutex_lock(&f->mu);
    memcpy(f->run, f->h_run, sizeof(f->run));
    f->offset = f->h_offset;
    f->records = f->h_records;
    f->head = f->h_offset;
    f->head_records = f->h_records;
    epoch_seen(f, f->h_epoch);
    f->synced = true;
    f->linked = true;
    f->full_syncs++;
    f->snapshot_bytes = f->body.len;
    f->snapshot_ms = (clock_mono_ns() - t0) / 1000000;
    f->last_ok_ms = clock_mono_ns() / 1000000;
    pthread_mutex_unlock(&f->mu);
    log_info("replication: loaded a snapshot of %zu bytes from %s in %.1f ms (stream %s at offset %" PRIu64 ")",
             f->body.len, f->url, (double)(clock_mono_ns() - t0) / 1e6, f->h_run, f->h_offset);
    /* the buffer of a large snapshot is not kept for the polls */
    wbuf_free(&f->body);
    f->body = (wbuf_t)WBUF_INIT;
    return true;
}

/* Applies the records of a poll's answer; false when they are damaged. */
static bool apply(replica_t *f)
{
    size_t off = 0;
    char where[CMD_REPL_URL_MAX + 32];
    snprintf(where, sizeof(where), "replication from %s", f->url);
    while (off < f->body.len) {
        journal_req_t q;
        size_t used = 0;
        const char *why = NULL;
        if (journalfmt_parse_record(f->body.data + off, f->body.len - off, &q, &used, &why) != PARSE_OK ||
            !persist_record_known(&q)) {
            log_error("replication: record at stream offset %" PRIu64 " is damaged (%s); fetching a snapshot",
                      f->offset + off, why ? why : "bad method");
            return false;
        }
        uint64_t epoch = 0;
        bool is_epoch = journalfmt_epoch_parse(&q, &epoch);   /* a promotion's record: learnt, not run */
        if (!is_epoch && journalfmt_is_epoch(&q)) {
            log_error("replication: the epoch record at stream offset %" PRIu64 " holds \"%.*s\", not an epoch "
                      "(0 to %" PRIu64 "); fetching a snapshot",
                      f->offset + off, (int)(q.body_len > 24 ? 24 : q.body_len), (const char *)q.body,
                      TALLY_EPOCH_MAX);
            return false;
        }
        persist_replay_request(f->srv, &q, 0, where, (size_t)(f->offset + off));
        off += used;
        /* the position moves per record: a stop between two is exact */
        pthread_mutex_lock(&f->mu);
        if (is_epoch)
            epoch_seen(f, epoch);
        f->offset += used;
        f->records++;
        f->applied++;
        pthread_mutex_unlock(&f->mu);
    }
    return true;
}

static void sleep_ms(replica_t *f, int ms)
{
    for (int i = 0; i < ms / 50 && !atomic_load(&f->stop); i++) {
        struct timespec ts = { 0, 50 * 1000000L };
        nanosleep(&ts, NULL);
    }
}

static void *follower_main(void *arg)
{
    replica_t *f = arg;
    bool failed = false;
    while (!atomic_load(&f->stop)) {
        if (!f->synced) {
            if (!full_sync(f)) {
                pthread_mutex_lock(&f->mu);
                f->linked = false;
                pthread_mutex_unlock(&f->mu);
                sleep_ms(f, RETRY_MS);
            }
            failed = false;
            continue;
        }
        char path[256];
        snprintf(path, sizeof(path), "/replication/log?run=%s&from=%" PRIu64 "&records=%" PRIu64 "&epoch=%" PRIu64
                 "&wait_ms=%d&id=%s",
                 f->run, f->offset, f->records, f->epoch, POLL_WAIT_MS, f->id);
        long st = exchange(f, path, POLL_WAIT_MS + 10000);
        if (st == 200) {
            bool ok = apply(f);
            pthread_mutex_lock(&f->mu);
            epoch_seen(f, f->h_epoch);
            f->head = f->h_head;
            f->head_records = f->h_records;
            f->linked = true;
            f->last_ok_ms = clock_mono_ns() / 1000000;
            if (failed)
                f->resumes++;
            if (!ok)
                f->synced = false;
            pthread_mutex_unlock(&f->mu);
            if (failed)
                log_info("replication: resumed from %s at offset %" PRIu64, f->url, f->offset);
            failed = false;
            continue;
        }
        pthread_mutex_lock(&f->mu);
        f->linked = false;
        if (st == 410)
            f->synced = false;   /* the position is gone: a new snapshot */
        pthread_mutex_unlock(&f->mu);
        if (!failed && !atomic_load(&f->stop))
            log_warn("replication: %s", f->last_err);
        failed = st != 410;
        if (st != 410)
            sleep_ms(f, RETRY_MS);
    }
    return NULL;
}

replica_t *replica_start(const char *primary, const char *token, cmd_server_t *srv, persist_t *p, uint64_t epoch)
{
    replica_t *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->srv = srv;
    f->p = p;
    f->epoch = epoch;
    snprintf(f->url, sizeof(f->url), "%s", primary);
    size_t ul = strlen(f->url);
    while (ul && f->url[ul - 1] == '/')
        f->url[--ul] = '\0';
    pthread_mutex_init(&f->mu, NULL);
    if (token[0] && !replica_set_token(f, token))
        goto fail;
    uint8_t b[6] = { 0 };
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        int64_t t = clock_now_ns();
        memcpy(b, &t, sizeof(b));
    }
    snprintf(f->id, sizeof(f->id), "r-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
    f->curl = curl_easy_init();
    if (!f->curl)
        goto fail;
    curl_easy_setopt(f->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(f->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(f->curl, CURLOPT_FOLLOWLOCATION, 0L);   /* a redirect is an error: the token stays here */
    curl_easy_setopt(f->curl, CURLOPT_PROXY, "");            /* no http_proxy from the environment */
    curl_easy_setopt(f->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
    curl_easy_setopt(f->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(f->curl, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(f->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(f->curl, CURLOPT_HEADERDATA, f);
    curl_easy_setopt(f->curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(f->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(f->curl, CURLOPT_XFERINFODATA, f);
    curl_easy_setopt(f->curl, CURLOPT_USERAGENT, "tallyd-replica");
    if (pthread_create(&f->thread, NULL, follower_main, f) != 0)
        goto fail;
    return f;
fail:
    if (f->curl)
        curl_easy_cleanup(f->curl);
    pthread_mutex_destroy(&f->mu);
    free(f->auth);
    free(f);
    return NULL;
}

bool replica_set_token(replica_t *f, const char *token)
{
    char *auth = NULL;
    if (token[0]) {
        size_t n = strlen(token) + 32;
        if (!(auth = malloc(n)))
            return false;
        snprintf(auth, n, "Authorization: Bearer %s", token);
    }
    pthread_mutex_lock(&f->mu);
    char *old = f->auth;
    f->auth = auth;
    pthread_mutex_unlock(&f->mu);
    free(old);
    return true;
}

void replica_stop(replica_t *f)
{
    if (!f)
        return;
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    curl_easy_cleanup(f->curl);
    wbuf_free(&f->body);
    pthread_mutex_destroy(&f->mu);
    free(f->auth);
    free(f);
}

uint64_t replica_epoch(replica_t *f)
{
    pthread_mutex_lock(&f->mu);
    uint64_t e = f->epoch;
    pthread_mutex_unlock(&f->mu);
    return e;
}

void replica_status(replica_t *f, cmd_repl_link_t *st)
{
    pthread_mutex_lock(&f->mu);
    int64_t now = clock_mono_ns() / 1000000;
    memcpy(st->id, f->id, sizeof(st->id));
    st->up = f->linked;
    st->synced = f->synced;
    memcpy(st->run, f->run, sizeof(st->run));
    st->offset = f->offset;
    st->records = f->records;
    st->lag_records = f->head_records > f->records ? f->head_records - f->records : 0;
    st->primary_epoch = f->epoch;
    st->full_syncs = f->full_syncs;
    st->resumes = f->resumes;
    st->applied = f->applied;
    st->last_ok_ms_ago = f->last_ok_ms ? now - f->last_ok_ms : -1;
    memcpy(st->last_error, f->last_err, sizeof(st->last_error));
    st->last_snapshot_bytes = f->snapshot_bytes;
    st->last_snapshot_ms = f->snapshot_ms;
    pthread_mutex_unlock(&f->mu);
}

void replica_metrics(replica_t *f, wbuf_t *out)
{
    char line[768];
    pthread_mutex_lock(&f->mu);
    int n = snprintf(line, sizeof(line),
                     "# HELP tally_replication_link_up 1 while this replica's last exchange with its primary succeeded.\n"
                     "# TYPE tally_replication_link_up gauge\n"
                     "tally_replication_link_up %d\n"
                     "# HELP tally_replication_full_syncs_total Snapshots this replica loaded from its primary.\n"
                     "# TYPE tally_replication_full_syncs_total counter\n"
                     "tally_replication_full_syncs_total %" PRIu64 "\n"
                     "# HELP tally_replication_applied_total Records this replica applied from the stream.\n"
                     "# TYPE tally_replication_applied_total counter\n"
                     "tally_replication_applied_total %" PRIu64 "\n",
                     f->linked, f->full_syncs, f->applied);
    pthread_mutex_unlock(&f->mu);
    wbuf_put_bytes(out, line, (size_t)n);
}
