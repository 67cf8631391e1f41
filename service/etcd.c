/* etcd's v3 API through its HTTP/JSON gateway (etcd.h says what and how). */
#include "service/etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ETCD_MAX_ENDPOINTS 16

struct etcd_client {
    char *hosts[ETCD_MAX_ENDPOINTS]; /* "host:port" */
    size_t nhosts;
    int tls;
    char *cacert, *cert, *key, *user, *password;
    long timeout_ms, connect_timeout_ms;
    pthread_mutex_t mu; /* current, token */
    size_t current;     /* the member that answered last */
    char *token;        /* authentication token, NULL until authenticated */
    int64_t max_term;   /* the highest raft term an answer carried */
};

static _Thread_local char etcd_err[256];

static void set_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(etcd_err, sizeof etcd_err, fmt, ap);
    va_end(ap);
}

const char *etcd_error(const etcd_client_t *c)
{
    (void)c;
    return etcd_err;
}

/* ------------------------------------------------------------- base64 -- */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const char *src, size_t len)
{
    const unsigned char *s = (const unsigned char *)src;
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    size_t i = 0;
    for (; i + 2 < len; i += 3) {
        *o++ = b64chars[s[i] >> 2];
        *o++ = b64chars[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
        *o++ = b64chars[((s[i + 1] & 15) << 2) | (s[i + 2] >> 6)];
        *o++ = b64chars[s[i + 2] & 63];
    }
    if (i < len) {
        *o++ = b64chars[s[i] >> 2];
        if (i + 1 < len) {
            *o++ = b64chars[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
            *o++ = b64chars[(s[i + 1] & 15) << 2];
        } else {
            *o++ = b64chars[(s[i] & 3) << 4];
            *o++ = '=';
        }
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

static int b64_val(int ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

/* Decodes into a NUL-terminated buffer (the NUL not counted in *len). */
static char *b64_decode(const char *src, size_t *len)
{
    size_t n = strlen(src);
    char *out = malloc(n / 4 * 3 + 4);
    if (!out)
        return NULL;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '=')
            break;
        int v = b64_val((unsigned char)src[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    *len = o;
    return out;
}

/* ----------------------------------------------------------- endpoints -- */

int etcd_parse_endpoints(const char *endpoints, int *tls, char *err, size_t errlen)
{
    etcd_config_t cfg = {.endpoints = endpoints};
    etcd_client_t *c = etcd_open(&cfg, err, errlen);
    if (!c)
        return -1;
    if (tls)
        *tls = c->tls;
    etcd_close(c);
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

etcd_client_t *etcd_open(const etcd_config_t *cfg, char *err, size_t errlen)
{
    const char *p = cfg->endpoints;
    if (!p || !*p) {
        snprintf(err, errlen, "no etcd endpoint given");
        return NULL;
    }
    etcd_client_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->tls = cfg->tls;
    if (!strncmp(p, "etcd://", 7)) {
        p += 7;
    } else if (!strncmp(p, "etcds://", 8)) {
        p += 8;
        c->tls = 1;
    } else if (strstr(p, "://")) {
        snprintf(err, errlen, "etcd endpoints '%s': the scheme must be etcd:// or etcds://", cfg->endpoints);
        free(c);
        return NULL;
    }
    if (!*p) {
        snprintf(err, errlen, "etcd endpoints '%s': no host:port", cfg->endpoints);
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        if (len == 0 || !colon || colon == p || end != p + len || port < 1 || port > 65535 ||
            memchr(p, '/', len) || memchr(p, '@', len)) {
            snprintf(err, errlen, "etcd endpoint '%.*s': expected host:port", (int)len, p);
            etcd_close(c);
            return NULL;
        }
        if (c->nhosts == ETCD_MAX_ENDPOINTS) {
            snprintf(err, errlen, "more than %d etcd endpoints", ETCD_MAX_ENDPOINTS);
            etcd_close(c);
            return NULL;
        }
        c->hosts[c->nhosts++] = strndup(p, len);
        p += len;
        if (*p == ',' && !*++p) {
            snprintf(err, errlen, "etcd endpoints '%s': empty endpoint after the last comma", cfg->endpoints);
            etcd_close(c);
            return NULL;
        }
    }
    if ((cfg->cert == NULL) != (cfg->key == NULL)) {
        snprintf(err, errlen, "an etcd client certificate needs its key, and the key its certificate");
        etcd_close(c);
        return NULL;
    }
    if ((cfg->user == NULL) != (cfg->password == NULL)) {
        snprintf(err, errlen, "an etcd user needs a password, and the password a user");
        etcd_close(c);
        return NULL;
    }
    c->cacert = dup_or_null(cfg->cacert);
    c->cert = dup_or_null(cfg->cert);
    c->key = dup_or_null(cfg->key);
    c->user = dup_or_null(cfg->user);
    c->password = dup_or_null(cfg->password);
    c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000;
    c->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms
                                                        : (c->timeout_ms < 1000 ? c->timeout_ms : 1000);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return c;
}

void etcd_close(etcd_client_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nhosts; i++)
        free(c->hosts[i]);
    free(c->cacert);
    free(c->cert);
    free(c->key);
    free(c->user);
    if (c->password) {
        memset(c->password, 0, strlen(c->password));
        free(c->password);
    }
    free(c->token);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ------------------------------------------------------------ requests -- */

typedef struct {
    char *data;
    size_t len, cap;
} buf_t;

static size_t buf_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
    buf_t *b = arg;
    size_t n = size * nmemb;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

static CURL *easy_for(etcd_client_t *c, size_t idx, const char *path, const char *body, long timeout_ms,
                      struct curl_slist **hdrs, char *url, size_t urllen, const char *token)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    snprintf(url, urllen, "%s://%s%s", c->tls ? "https" : "http", c->hosts[idx], path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
    if (timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->tls) {
        if (c->cacert)
            curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
        if (c->cert) {
            curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
            curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
        }
    }
    *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (token) {
        char auth[1024];
        snprintf(auth, sizeof auth, "Authorization: %s", token);
        *hdrs = curl_slist_append(*hdrs, auth);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    return h;
}

enum { R_OK, R_NEXT, R_FAIL, R_AUTH };

/* One POST to one member: R_OK with *out, R_NEXT (try another member),
 * R_FAIL (the request's own error), R_AUTH (the token was refused). */
static int post_one(etcd_client_t *c, size_t idx, const char *path, const char *body, const char *token, json_t **out)
{
    char url[512];
    struct curl_slist *hdrs = NULL;
    buf_t b = {0};
    CURL *h = easy_for(c, idx, path, body, c->timeout_ms, &hdrs, url, sizeof url, token);
    if (!h) {
        set_err("etcd: out of memory");
        return R_FAIL;
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        set_err("etcd %s: %s", c->hosts[idx], curl_easy_strerror(rc));
        free(b.data);
        return R_NEXT;
    }
    json_error_t jerr;
    json_t *j = b.len ? json_loadb(b.data, b.len, 0, &jerr) : NULL;
    free(b.data);
    if (status == 200 && j) {
        /* a streamed call (keepalive) wraps its answer in "result" */
        json_t *res = json_object_get(j, "result");
        if (res && json_is_object(res)) {
            json_incref(res);
            json_decref(j);
            j = res;
        }
        json_t *e = json_object_get(j, "error");
        if (!e) {
            /* a member of an older raft term than one already heard from is
             * a former leader that does not know it was replaced (etcd
             * before 3.4.25/3.5.8 renews leases there): another member */
            json_t *t = json_object_get(json_object_get(j, "header"), "raft_term");
            int64_t term = json_is_string(t) ? strtoll(json_string_value(t), NULL, 10)
                                             : json_is_integer(t) ? (int64_t)json_integer_value(t) : 0;
            pthread_mutex_lock(&c->mu);
            int64_t seen = c->max_term;
            if (term > c->max_term)
                c->max_term = term;
            pthread_mutex_unlock(&c->mu);
            if (term && term < seen) {
                set_err("etcd %s: answered from raft term %lld, older than %lld (a former leader)", c->hosts[idx],
                        (long long)term, (long long)seen);
                json_decref(j);
                return R_NEXT;
            }
            *out = j;
            return R_OK;
        }
    }
    const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
    if (!msg && j)
        msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    json_int_t code = j ? json_integer_value(json_object_get(j, "code")) : 0;
    if (!code && j)
        code = json_integer_value(json_object_get(json_object_get(j, "error"), "grpc_code"));
    set_err("etcd %s: %s (HTTP %ld)", c->hosts[idx], msg ? msg : "unreadable answer", status);
    json_decref(j);
    if (code == 16 || status == 401)
        return R_AUTH;
    /* Unavailable, DeadlineExceeded, Aborted, Internal and any 5xx: this
     * member cannot serve now; another may. */
    if (code == 14 || code == 4 || code == 10 || code == 13 || status >= 500 || status == 0)
        return R_NEXT;
    return R_FAIL;
}

static int authenticate(etcd_client_t *c, size_t idx)
{
    json_t *req = json_pack("{s:s,s:s}", "name", c->user, "password", c->password);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    json_t *resp = NULL;
    int r = body ? post_one(c, idx, "/v3/auth/authenticate", body, NULL, &resp) : R_FAIL;
    if (body) {
        memset(body, 0, strlen(body));
        free(body);
    }
    if (r != R_OK)
        return r == R_AUTH ? R_FAIL : r;
    const char *tok = json_string_value(json_object_get(resp, "token"));
    if (!tok) {
        set_err("etcd %s: authentication answered no token", c->hosts[idx]);
        json_decref(resp);
        return R_FAIL;
    }
    pthread_mutex_lock(&c->mu);
    free(c->token);
    c->token = strdup(tok);
    pthread_mutex_unlock(&c->mu);
    json_decref(resp);
    return R_OK;
}

/* Sends req to the members in turn from the current one; 0 with *out. */
static int call(etcd_client_t *c, const char *path, json_t *req, json_t **out)
{
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!body) {
        set_err("etcd: out of memory");
        return -1;
    }
    pthread_mutex_lock(&c->mu);
    size_t start = c->current;
    pthread_mutex_unlock(&c->mu);
    int result = -1;
    for (size_t k = 0; k < c->nhosts; k++) {
        size_t idx = (start + k) % c->nhosts;
        int r = R_NEXT;
        for (int round = 0; round < 2; round++) {
            char *tok = NULL;
            if (c->user) {
                pthread_mutex_lock(&c->mu);
                tok = c->token ? strdup(c->token) : NULL;
                pthread_mutex_unlock(&c->mu);
                if (!tok) {
                    r = authenticate(c, idx);
                    if (r != R_OK)
                        break;
                    pthread_mutex_lock(&c->mu);
                    tok = c->token ? strdup(c->token) : NULL;
                    pthread_mutex_unlock(&c->mu);
                }
            }
            r = post_one(c, idx, path, body, tok, out);
            free(tok);
            if (r != R_AUTH || !c->user)
                break;
            /* the token expired or the member restarted: authenticate again */
            pthread_mutex_lock(&c->mu);
            free(c->token);
            c->token = NULL;
            pthread_mutex_unlock(&c->mu);
        }
        if (r == R_OK) {
            pthread_mutex_lock(&c->mu);
            c->current = idx;
            pthread_mutex_unlock(&c->mu);
            result = 0;
            break;
        }
        if (r != R_NEXT)
            break;
    }
    free(body);
    return result;
}

/* -------------------------------------------------------------- decode -- */

static int64_t jint(json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_string(v))
        return (int64_t)strtoll(json_string_value(v), NULL, 10);
    return 0;
}

static int decode_bytes(json_t *o, const char *name, char **out, size_t *len)
{
    const char *s = json_string_value(json_object_get(o, name));
    *out = b64_decode(s ? s : "", len);
    if (!*out) {
        set_err("etcd: the answer's %s is not base64", name);
        return -1;
    }
    return 0;
}

static int decode_kv(json_t *o, etcd_kv_t *kv)
{
    memset(kv, 0, sizeof *kv);
    if (decode_bytes(o, "key", &kv->key, &kv->key_len) || decode_bytes(o, "value", &kv->value, &kv->value_len)) {
        etcd_kv_free(kv);
        return -1;
    }
    kv->create_revision = jint(o, "create_revision");
    kv->mod_revision = jint(o, "mod_revision");
    kv->version = jint(o, "version");
    kv->lease = jint(o, "lease");
    return 0;
}

static int decode_range(json_t *o, etcd_range_t *r)
{
    memset(r, 0, sizeof *r);
    r->revision = jint(json_object_get(o, "header"), "revision");
    r->count = json_object_get(o, "deleted") ? jint(o, "deleted") : jint(o, "count");
    json_t *kvs = json_object_get(o, "kvs");
    size_t n = json_array_size(kvs);
    if (n) {
        r->kvs = calloc(n, sizeof *r->kvs);
        if (!r->kvs) {
            set_err("etcd: out of memory");
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            if (decode_kv(json_array_get(kvs, i), &r->kvs[i])) {
                etcd_range_free(r);
                return -1;
            }
            r->n++;
        }
    }
    return 0;
}

void etcd_kv_free(etcd_kv_t *kv)
{
    if (!kv)
        return;
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof *kv);
}

void etcd_range_free(etcd_range_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        etcd_kv_free(&r->kvs[i]);
    free(r->kvs);
    memset(r, 0, sizeof *r);
}

void etcd_txn_free(etcd_txn_result_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        etcd_range_free(&t->results[i]);
    free(t->results);
    memset(t, 0, sizeof *t);
}

/* -------------------------------------------------------------- encode -- */

static int set_b64(json_t *o, const char *name, const char *s, size_t len)
{
    char *e = b64_encode(s ? s : "", s ? len : 0);
    if (!e)
        return -1;
    json_object_set_new(o, name, json_string(e));
    free(e);
    return 0;
}

static void set_i64(json_t *o, const char *name, int64_t v)
{
    char num[32];
    snprintf(num, sizeof num, "%" PRId64, v);
    json_object_set_new(o, name, json_string(num));
}

/* range_end for "every key starting with prefix": the prefix with its last
 * byte below 0xff incremented and what follows dropped ("\0": every key). */
static int set_prefix_end(json_t *o, const char *key, size_t len)
{
    char *end = malloc(len + 1);
    if (!end)
        return -1;
    memcpy(end, key, len);
    size_t n = len;
    while (n > 0 && (unsigned char)end[n - 1] == 0xff)
        n--;
    int r;
    if (n == 0) {
        r = set_b64(o, "range_end", "\0", 1);
    } else {
        end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
        r = set_b64(o, "range_end", end, n);
    }
    free(end);
    return r;
}

static json_t *key_req(const char *key, size_t key_len, int prefix)
{
    json_t *o = json_object();
    if (!o || set_b64(o, "key", key, key_len) || (prefix && set_prefix_end(o, key, key_len))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ------------------------------------------------------------------ kv -- */

int etcd_get(etcd_client_t *c, const char *key, size_t key_len, etcd_kv_t *kv, int *found, int64_t *revision)
{
    *found = 0;
    json_t *req = key_req(key, key_len, 0), *resp = NULL;
    if (!req || call(c, "/v3/kv/range", req, &resp))
        return -1;
    etcd_range_t r;
    int rc = decode_range(resp, &r);
    json_decref(resp);
    if (rc)
        return -1;
    if (revision)
        *revision = r.revision;
    if (r.n) {
        *kv = r.kvs[0];
        memset(&r.kvs[0], 0, sizeof r.kvs[0]);
        *found = 1;
    }
    etcd_range_free(&r);
    return 0;
}

int etcd_get_prefix(etcd_client_t *c, const char *prefix, size_t prefix_len, etcd_range_t *out)
{
    json_t *req = key_req(prefix, prefix_len, 1), *resp = NULL;
    if (!req || call(c, "/v3/kv/range", req, &resp))
        return -1;
    int rc = decode_range(resp, out);
    json_decref(resp);
    return rc;
}

int etcd_put(etcd_client_t *c, const char *key, size_t key_len, const char *value, size_t value_len, int64_t lease,
             int64_t *revision)
{
    json_t *req = key_req(key, key_len, 0), *resp = NULL;
    if (!req || set_b64(req, "value", value, value_len)) {
        json_decref(req);
        return -1;
    }
    if (lease)
        set_i64(req, "lease", lease);
    if (call(c, "/v3/kv/put", req, &resp))
        return -1;
    if (revision)
        *revision = jint(json_object_get(resp, "header"), "revision");
    json_decref(resp);
    return 0;
}

int etcd_delete(etcd_client_t *c, const char *key, size_t key_len, int prefix, int64_t *deleted)
{
    json_t *req = key_req(key, key_len, prefix), *resp = NULL;
    if (!req || call(c, "/v3/kv/deleterange", req, &resp))
        return -1;
    if (deleted)
        *deleted = jint(resp, "deleted");
    json_decref(resp);
    return 0;
}

static const char *target_names[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};
static const char *cmp_names[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
static const char *target_fields[] = {"version", "create_revision", "mod_revision", "value", "lease"};

static json_t *encode_ops(const etcd_op_t *ops, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const etcd_op_t *op = &ops[i];
        json_t *r = key_req(op->key, op->key_len, op->kind != ETCD_OP_PUT && op->prefix);
        if (!r) {
            json_decref(arr);
            return NULL;
        }
        const char *wrap = "request_range";
        if (op->kind == ETCD_OP_PUT) {
            wrap = "request_put";
            if (set_b64(r, "value", op->value, op->value_len)) {
                json_decref(r);
                json_decref(arr);
                return NULL;
            }
            if (op->lease)
                set_i64(r, "lease", op->lease);
        } else if (op->kind == ETCD_OP_DELETE) {
            wrap = "request_delete_range";
        }
        json_t *w = json_object();
        json_object_set_new(w, wrap, r);
        json_array_append_new(arr, w);
    }
    return arr;
}

int etcd_txn(etcd_client_t *c, const etcd_cmp_t *cmps, size_t ncmp, const etcd_op_t *success, size_t nsuccess,
             const etcd_op_t *failure, size_t nfailure, etcd_txn_result_t *out)
{
    memset(out, 0, sizeof *out);
    json_t *req = json_object(), *carr = json_array();
    json_object_set_new(req, "compare", carr);
    for (size_t i = 0; i < ncmp; i++) {
        const etcd_cmp_t *cp = &cmps[i];
        if ((unsigned)cp->target > ETCD_TARGET_LEASE || (unsigned)cp->op > ETCD_CMP_NOT_EQUAL) {
            set_err("etcd: invalid compare");
            json_decref(req);
            return -1;
        }
        json_t *o = key_req(cp->key, cp->key_len, 0);
        if (!o) {
            json_decref(req);
            set_err("etcd: out of memory");
            return -1;
        }
        json_object_set_new(o, "target", json_string(target_names[cp->target]));
        json_object_set_new(o, "result", json_string(cmp_names[cp->op]));
        if (cp->target == ETCD_TARGET_VALUE)
            set_b64(o, "value", cp->value, cp->value_len);
        else
            set_i64(o, target_fields[cp->target], cp->number);
        json_array_append_new(carr, o);
    }
    json_t *s = encode_ops(success, nsuccess), *f = encode_ops(failure, nfailure), *resp = NULL;
    if (!s || !f) {
        json_decref(s);
        json_decref(f);
        json_decref(req);
        set_err("etcd: out of memory");
        return -1;
    }
    json_object_set_new(req, "success", s);
    json_object_set_new(req, "failure", f);
    if (call(c, "/v3/kv/txn", req, &resp))
        return -1;
    out->succeeded = json_is_true(json_object_get(resp, "succeeded"));
    out->revision = jint(json_object_get(resp, "header"), "revision");
    json_t *rs = json_object_get(resp, "responses");
    size_t n = json_array_size(rs);
    if (n) {
        out->results = calloc(n, sizeof *out->results);
        if (!out->results) {
            json_decref(resp);
            set_err("etcd: out of memory");
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *one = json_array_get(rs, i), *body = NULL;
            if (!(body = json_object_get(one, "response_range")) && !(body = json_object_get(one, "response_put")))
                body = json_object_get(one, "response_delete_range");
            if (body && decode_range(body, &out->results[i])) {
                etcd_txn_free(out);
                json_decref(resp);
                return -1;
            }
            out->n++;
        }
    }
    json_decref(resp);
    return 0;
}

/* --------------------------------------------------------------- lease -- */

int etcd_lease_grant(etcd_client_t *c, int64_t ttl, int64_t *id, int64_t *granted_ttl)
{
    json_t *req = json_object(), *resp = NULL;
    set_i64(req, "TTL", ttl);
    if (call(c, "/v3/lease/grant", req, &resp))
        return -1;
    *id = jint(resp, "ID");
    if (granted_ttl)
        *granted_ttl = jint(resp, "TTL");
    json_decref(resp);
    if (!*id) {
        set_err("etcd: lease grant answered no lease");
        return -1;
    }
    return 0;
}

int etcd_lease_keepalive(etcd_client_t *c, int64_t id, int64_t *ttl)
{
    json_t *req = json_object(), *resp = NULL;
    set_i64(req, "ID", id);
    if (call(c, "/v3/lease/keepalive", req, &resp))
        return -1;
    if (ttl)
        *ttl = jint(resp, "TTL");
    json_decref(resp);
    return 0;
}

int etcd_lease_revoke(etcd_client_t *c, int64_t id)
{
    json_t *req = json_object(), *resp = NULL;
    set_i64(req, "ID", id);
    if (call(c, "/v3/lease/revoke", req, &resp)) {
        if (strstr(etcd_err, "lease not found"))
            return 0;
        return -1;
    }
    json_decref(resp);
    return 0;
}

/* --------------------------------------------------------------- watch -- */

typedef struct {
    buf_t line;
    etcd_watch_cb cb;
    void *arg;
    volatile int *stop;
    int64_t next;
    int done;      /* the callback said stop */
    int failed;    /* the stream said something we cannot go on from */
    int created;
} watch_ctx_t;

static int watch_message(watch_ctx_t *w, json_t *j)
{
    json_t *res = json_object_get(j, "result");
    if (!res) {
        const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        set_err("etcd watch: %s", msg ? msg : "unreadable message");
        w->failed = 1;
        return -1;
    }
    if (json_is_true(json_object_get(res, "created")))
        w->created = 1;
    if (json_is_true(json_object_get(res, "canceled"))) {
        const char *why = json_string_value(json_object_get(res, "cancel_reason"));
        int64_t compact = jint(res, "compact_revision");
        if (compact)
            set_err("etcd watch: revision %" PRId64 " was compacted", compact);
        else
            set_err("etcd watch cancelled: %s", why ? why : "no reason given");
        w->failed = 1;
        return -1;
    }
    json_t *evs = json_object_get(res, "events");
    int64_t rev = jint(json_object_get(res, "header"), "revision");
    for (size_t i = 0; i < json_array_size(evs); i++) {
        json_t *e = json_array_get(evs, i);
        etcd_kv_t kv;
        if (decode_kv(json_object_get(e, "kv"), &kv)) {
            w->failed = 1;
            return -1;
        }
        const char *type = json_string_value(json_object_get(e, "type"));
        etcd_event_t ev = {.kind = type && !strcmp(type, "DELETE") ? ETCD_EVENT_DELETE : ETCD_EVENT_PUT, .kv = &kv};
        int stop = w->cb(w->arg, &ev, kv.mod_revision);
        if (kv.mod_revision >= w->next)
            w->next = kv.mod_revision + 1;
        etcd_kv_free(&kv);
        if (stop) {
            w->done = 1;
            return -1;
        }
    }
    (void)rev;
    return 0;
}

static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
    watch_ctx_t *w = arg;
    size_t n = size * nmemb;
    if (buf_write(ptr, size, nmemb, &w->line) != n)
        return 0;
    char *nl;
    while ((nl = memchr(w->line.data, '\n', w->line.len))) {
        size_t len = (size_t)(nl - w->line.data);
        json_error_t jerr;
        json_t *j = len ? json_loadb(w->line.data, len, 0, &jerr) : NULL;
        memmove(w->line.data, nl + 1, w->line.len - len - 1);
        w->line.len -= len + 1;
        if (!len)
            continue;
        if (!j) {
            set_err("etcd watch: unreadable message");
            w->failed = 1;
            return 0;
        }
        int r = watch_message(w, j);
        json_decref(j);
        if (r)
            return 0;
    }
    return n;
}

static int watch_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    watch_ctx_t *w = arg;
    /* read atomically: another thread sets it (ThreadSanitizer) */
    return w->stop && __atomic_load_n(w->stop, __ATOMIC_ACQUIRE);
}

int etcd_watch(etcd_client_t *c, const char *key, size_t key_len, int prefix, int64_t start_revision,
               etcd_watch_cb cb, void *arg, volatile int *stop, int64_t *next_revision)
{
    json_t *cr = key_req(key, key_len, prefix);
    if (!cr) {
        set_err("etcd: out of memory");
        return -1;
    }
    if (start_revision > 0)
        set_i64(cr, "start_revision", start_revision);
    json_t *req = json_object();
    json_object_set_new(req, "create_request", cr);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!body) {
        set_err("etcd: out of memory");
        return -1;
    }
    watch_ctx_t w = {.cb = cb, .arg = arg, .stop = stop, .next = start_revision};
    pthread_mutex_lock(&c->mu);
    size_t start = c->current;
    pthread_mutex_unlock(&c->mu);
    int result = -1;
    for (size_t k = 0; k < c->nhosts && !w.created && !w.done && !w.failed; k++) {
        size_t idx = (start + k) % c->nhosts;
        char *tok = NULL;
        if (c->user) {
            pthread_mutex_lock(&c->mu);
            int have = c->token != NULL;
            pthread_mutex_unlock(&c->mu);
            if (!have && authenticate(c, idx) != R_OK)
                continue;
            pthread_mutex_lock(&c->mu);
            tok = c->token ? strdup(c->token) : NULL;
            pthread_mutex_unlock(&c->mu);
        }
        char url[512];
        struct curl_slist *hdrs = NULL;
        CURL *h = easy_for(c, idx, "/v3/watch", body, 0, &hdrs, url, sizeof url, tok);
        free(tok);
        if (!h) {
            set_err("etcd: out of memory");
            break;
        }
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, watch_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, watch_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, &w);
        CURLcode rc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdrs);
        if (w.done || (stop && __atomic_load_n(stop, __ATOMIC_ACQUIRE))) {
            result = 0;
            break;
        }
        if (!w.failed) {
            if (rc != CURLE_OK)
                set_err("etcd %s: watch: %s", c->hosts[idx], curl_easy_strerror(rc));
            else
                set_err("etcd %s: the watch stream ended (HTTP %ld)", c->hosts[idx], status);
        }
        if (status == 401 && c->user) {
            pthread_mutex_lock(&c->mu);
            free(c->token);
            c->token = NULL;
            pthread_mutex_unlock(&c->mu);
        }
    }
    free(w.line.data);
    free(body);
    if (next_revision)
        *next_revision = w.next;
    return result;
}
