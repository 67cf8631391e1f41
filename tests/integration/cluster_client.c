/*
 * cluster_client.c - the tests' cluster client (cluster_client.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tests/integration/cluster_client.h"

static size_t on_body(char *p, size_t s, size_t n, void *ud)
{
    cc_resp_t *r = ud;
    char *q = realloc(r->body, r->len + s * n + 1);
    if (!q)
        return 0;
    memcpy(q + r->len, p, s * n);
    r->len += s * n;
    q[r->len] = '\0';
    r->body = q;
    return s * n;
}

static size_t on_header(char *p, size_t s, size_t n, void *ud)
{
    cc_resp_t *r = ud;
    size_t len = n * s, v = 15;
    if (len > 15 && strncasecmp(p, "X-Tally-Owner: ", 15) == 0) {
        while (v < len && p[v] != '\r' && p[v] != '\n')
            v++;
        snprintf(r->owner, sizeof(r->owner), "%.*s", (int)(v - 15), p + 15);
    }
    return len;
}

cc_resp_t cc_send(CURL *c, const char *addr, const char *method, const char *path, const void *body, size_t len,
                  const char *ctype, const char *rkey, bool asking)
{
    cc_resp_t r = { 0 };
    char url[1024], line[600];
    snprintf(url, sizeof(url), "http://%s%s", addr, path);
    struct curl_slist *h = curl_slist_append(NULL, "Expect:");
    if (body) {
        snprintf(line, sizeof(line), "Content-Type: %s", ctype ? ctype : "application/json");
        h = curl_slist_append(h, line);
    }
    if (rkey) {
        snprintf(line, sizeof(line), "X-Tally-Key: %s", rkey);
        h = curl_slist_append(h, line);
    }
    if (asking)
        h = curl_slist_append(h, "X-Tally-Asking: 1");
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    const char *code = r.body ? strstr(r.body, "\"code\":\"") : NULL;
    if (code) {
        const char *end = strchr(code + 8, '"');
        if (end)
            snprintf(r.code, sizeof(r.code), "%.*s", (int)(end - code - 8), code + 8);
    }
    return r;
}

cc_resp_t cc_call(CURL *c, const char *addr, const char *method, const char *path, const char *body,
                  const char *rkey)
{
    char at[128];
    snprintf(at, sizeof(at), "%s", addr);
    bool asking = false;
    int moved = 0, asks = 0;
    for (int hops = 0;; hops++) {
        cc_resp_t r = cc_send(c, at, method, path, body, body ? strlen(body) : 0, NULL, rkey, asking);
        if (r.status != 421 || hops == 5 || !r.owner[0]) {
            r.moved = moved;
            r.asks = asks;
            return r;
        }
        asking = strcmp(r.code, "ASK") == 0;
        if (asking)
            asks++;
        else
            moved++;
        snprintf(at, sizeof(at), "%s", r.owner);
        cc_free(&r);
    }
}

void cc_free(cc_resp_t *r)
{
    free(r->body);
    r->body = NULL;
}

long long cc_metric(const char *addr, const char *name)
{
    CURL *c = curl_easy_init();
    cc_resp_t r = cc_send(c, addr, "GET", "/metrics", NULL, 0, NULL, NULL, false);
    curl_easy_cleanup(c);
    long long v = -1;
    size_t n = strlen(name);
    for (const char *l = r.status == 200 ? r.body : NULL; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, name, n) == 0 && l[n] == ' ')
            v = atoll(l + n + 1);
    cc_free(&r);
    return v;
}
