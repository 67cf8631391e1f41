/* peers.c - see peers.h: one GET /replication/epoch per peer. */
#include "service/peers.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/codec.h"

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    wbuf_t *b = ud;
    if (b->len + size * n > 65536)   /* an epoch answer is a few bytes */
        return 0;
    wbuf_put_bytes(b, p, size * n);
    return b->oom ? 0 : size * n;
}

/* Reads the JSON answer into *out; false when it is not one. */
static bool answer_parse(const wbuf_t *b, peer_answer_t *out)
{
    json_error_t je;
    json_t *j = json_loadb(b->data ? (const char *)b->data : "", b->len, 0, &je);
    const char *role = NULL, *run = "";
    json_t *primary = NULL;   /* a string, or null on a node that follows none */
    json_int_t epoch = -1;
    bool ok = j && json_unpack(j, "{s:s,s:I,s?o,s?s}", "role", &role, "epoch", &epoch, "primary", &primary, "run", &run) == 0 &&
              epoch >= 0 && strlen(role) < sizeof(out->role);
    if (ok) {
        snprintf(out->role, sizeof(out->role), "%s", role);
        out->epoch = (uint64_t)epoch;
        snprintf(out->primary, sizeof(out->primary), "%s", json_is_string(primary) ? json_string_value(primary) : "");
        snprintf(out->run, sizeof(out->run), "%s", run);
        size_t l = strlen(out->primary);
        while (l && out->primary[l - 1] == '/')
            out->primary[--l] = '\0';
    } else {
        snprintf(out->error, sizeof(out->error), "not an epoch answer: %.*s", (int)(b->len < 120 ? b->len : 120),
                 b->data ? (const char *)b->data : "");
    }
    json_decref(j);
    return ok;
}

/* Aborts the exchange once the caller is told to stop. */
static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load((const _Atomic bool *)ud) ? 1 : 0;
}

void peers_ask(const char *url, const char *token, long timeout_ms, const _Atomic bool *stop, peer_answer_t *out)
{
    memset(out, 0, sizeof(*out));
    char full[API_REPL_URL_MAX + 32], auth[320];
    snprintf(full, sizeof(full), "%s/replication/epoch", url);
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(out->error, sizeof(out->error), "out of memory");
        return;
    }
    struct curl_slist *hdrs = NULL;
    if (token[0]) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(NULL, auth);
    }
    wbuf_t b = WBUF_INIT;
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tallyd-peer");
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)stop);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK)
        snprintf(out->error, sizeof(out->error), "%s: %s", full, curl_easy_strerror(rc));
    else if (status != 200)
        snprintf(out->error, sizeof(out->error), "%s answered %ld: %.*s", full, status,
                 (int)(b.len < 120 ? b.len : 120), b.data ? (const char *)b.data : "");
    else
        out->answered = answer_parse(&b, out);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    wbuf_free(&b);
}
