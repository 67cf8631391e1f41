/* peers.c - see peers.h: one signed GET /replication/epoch per peer. */
#include "service/peers.h"

#include <curl/curl.h>
#include <jansson.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "core/codec.h"
#include "core/persist_fmt.h"

#define ANSWER_MAX 8192              /* an epoch answer is a few hundred bytes */

/* ------------------------------------------------------------------------ */
/* Signatures                                                               */
/* ------------------------------------------------------------------------ */

static void mac_of(const uint8_t *key, size_t klen, const char *nonce, const void *body, size_t blen,
                   uint8_t out[SHA256_DIGEST_SIZE])
{
    struct hmac_sha256_ctx c;
    hmac_sha256_set_key(&c, klen, key);
    hmac_sha256_update(&c, strlen(nonce), (const uint8_t *)nonce);
    hmac_sha256_update(&c, 1, (const uint8_t *)"\n");
    hmac_sha256_update(&c, blen, body);
    hmac_sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

void peers_sign(const uint8_t *key, size_t klen, const char *nonce, const void *body, size_t blen,
                char out[PEERS_SIG_LEN + 1])
{
    uint8_t mac[SHA256_DIGEST_SIZE];
    mac_of(key, klen, nonce, body, blen, mac);
    size_t n = sizeof(PEERS_SIG_SCHEME) - 1;
    memcpy(out, PEERS_SIG_SCHEME, n);
    for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(out + n + 2 * i, 3, "%02x", mac[i]);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Whether `sig` is the signature of body for nonce, compared in constant
 * time (nettle's memeql_sec); *why says what is wrong otherwise. */
static bool signature_ok(const uint8_t *key, size_t klen, const char *nonce, const char *sig, const void *body,
                         size_t blen, const char **why)
{
    size_t n = sizeof(PEERS_SIG_SCHEME) - 1;
    if (!sig) {
        *why = "the answer is not signed (does that node run with the group's --peer-secret-file?)";
        return false;
    }
    uint8_t got[SHA256_DIGEST_SIZE], want[SHA256_DIGEST_SIZE];
    bool form = strlen(sig) == PEERS_SIG_LEN && strncasecmp(sig, PEERS_SIG_SCHEME, n) == 0;
    for (size_t i = 0; form && i < SHA256_DIGEST_SIZE; i++) {
        int hi = hexval((unsigned char)sig[n + 2 * i]), lo = hexval((unsigned char)sig[n + 2 * i + 1]);
        form = hi >= 0 && lo >= 0;
        got[i] = (uint8_t)(form ? hi << 4 | lo : 0);
    }
    if (!form) {
        *why = "the answer's " PEERS_SIG_HEADER " is not hmac-sha256= and 64 hex digits";
        return false;
    }
    mac_of(key, klen, nonce, body, blen, want);
    if (!memeql_sec(got, want, SHA256_DIGEST_SIZE)) {
        *why = "the answer's signature does not match (another --peer-secret-file, or an answer to another "
               "question: replayed or altered)";
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Answers                                                                  */
/* ------------------------------------------------------------------------ */

static bool role_known(const char *role)
{
    return !strcmp(role, "primary") || !strcmp(role, "replica") || !strcmp(role, "fenced") ||
           !strcmp(role, "probing");
}

/* Reads the JSON answer into *out; false with out->error when it is not one. */
static bool answer_parse(const void *body, size_t blen, peer_answer_t *out)
{
    json_error_t je;
    json_t *j = json_loadb(body, blen, JSON_REJECT_DUPLICATES, &je);
    const char *role = NULL, *run = NULL;
    json_t *primary = NULL;   /* a string, or null on a node that follows none */
    json_int_t epoch = -1;
    const char *why = NULL;
    if (!j || json_unpack(j, "{s:s,s:I,s:s,s:o}", "role", &role, "epoch", &epoch, "run", &run, "primary", &primary) != 0)
        why = "not an epoch answer ({\"role\",\"epoch\",\"run\",\"primary\"})";
    else if (!role_known(role))
        why = "an unknown role";
    else if (epoch < 0 || (uint64_t)epoch > TALLY_EPOCH_MAX)
        why = "an epoch out of range (0 to 9007199254740991)";
    else if (!json_is_null(primary) && !json_is_string(primary))
        why = "a primary that is neither a URL nor null";
    else if (json_is_string(primary) && json_string_length(primary) >= sizeof(out->primary))
        why = "a primary URL too long";
    else if (strlen(run) >= sizeof(out->run) || strlen(run) == 0)
        why = "a stream id (run) empty or too long";
    if (why) {
        snprintf(out->error, sizeof(out->error), "%s: %.*s", why, (int)(blen < 120 ? blen : 120),
                 (const char *)body);
        json_decref(j);
        return false;
    }
    snprintf(out->role, sizeof(out->role), "%s", role);
    out->epoch = (uint64_t)epoch;
    snprintf(out->primary, sizeof(out->primary), "%s", json_is_string(primary) ? json_string_value(primary) : "");
    snprintf(out->run, sizeof(out->run), "%s", run);
    size_t l = strlen(out->primary);
    while (l && out->primary[l - 1] == '/')
        out->primary[--l] = '\0';
    json_decref(j);
    return true;
}

bool peers_answer_read(const uint8_t *key, size_t klen, const char *nonce, const char *sig, const void *body,
                       size_t blen, peer_answer_t *out)
{
    memset(out, 0, sizeof(*out));
    const char *why = NULL;
    if (!signature_ok(key, klen, nonce, sig, body, blen, &why)) {
        snprintf(out->error, sizeof(out->error), "%s", why);
        return false;
    }
    out->answered = answer_parse(body, blen, out);
    return out->answered;
}

/* ------------------------------------------------------------------------ */
/* Asking                                                                   */
/* ------------------------------------------------------------------------ */

/* What one exchange collects. */
typedef struct exchange {
    wbuf_t body;
    char sig[PEERS_SIG_LEN + 2];   /* one byte more: a longer value is seen as such */
    int sigs;                      /* signature headers received (more than one: refused) */
} exchange_t;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    exchange_t *x = ud;
    if (x->body.len + size * n > ANSWER_MAX)
        return 0;
    wbuf_put_bytes(&x->body, p, size * n);
    return x->body.oom ? 0 : size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    exchange_t *x = ud;
    size_t len = size * n, name = sizeof(PEERS_SIG_HEADER) - 1;
    if (len > name && p[name] == ':' && strncasecmp(p, PEERS_SIG_HEADER, name) == 0) {
        const char *v = p + name + 1;
        size_t vl = len - name - 1;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        if (vl >= sizeof(x->sig))
            vl = sizeof(x->sig) - 1;
        memcpy(x->sig, v, vl);
        x->sig[vl] = '\0';
        x->sigs++;
    }
    return len;
}

/* Aborts the exchange once the caller is told to stop. */
static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load((const _Atomic bool *)ud) ? 1 : 0;
}

void peers_ask(const char *url, const char *token, const uint8_t *key, size_t klen, long timeout_ms,
               const _Atomic bool *stop, peer_answer_t *out)
{
    memset(out, 0, sizeof(*out));
    uint8_t rnd[PEERS_NONCE_BYTES];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        snprintf(out->error, sizeof(out->error), "no random bytes for a nonce (getrandom failed)");
        return;
    }
    char nonce[2 * PEERS_NONCE_BYTES + 1];
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(nonce + 2 * i, 3, "%02x", rnd[i]);
    char full[CMD_REPL_URL_MAX + 64];
    snprintf(full, sizeof(full), "%s/replication/epoch?nonce=%s", url, nonce);
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(out->error, sizeof(out->error), "out of memory");
        return;
    }
    struct curl_slist *hdrs = NULL;
    if (token[0]) {
        size_t al = strlen(token) + 32;
        char *auth = malloc(al);
        if (auth) {
            snprintf(auth, al, "Authorization: Bearer %s", token);
            hdrs = curl_slist_append(NULL, auth);
            free(auth);
        }
        if (!hdrs) {
            snprintf(out->error, sizeof(out->error), "out of memory");
            curl_easy_cleanup(c);
            return;
        }
    }
    exchange_t x = { .body = WBUF_INIT };
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);   /* a redirect is no answer: the token stays here */
    curl_easy_setopt(c, CURLOPT_PROXY, "");            /* no http_proxy from the environment */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tallyd-peer");
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)stop);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    const char *body = x.body.data ? (const char *)x.body.data : "";
    if (rc != CURLE_OK) {
        snprintf(out->error, sizeof(out->error), "%s: %s", url, curl_easy_strerror(rc));
    } else if (status != 200) {
        snprintf(out->error, sizeof(out->error), "%s answered %ld: %.*s", url, status,
                 (int)(x.body.len < 120 ? x.body.len : 120), body);
    } else if (x.sigs > 1) {
        snprintf(out->error, sizeof(out->error), "%s: the answer has %d %s headers", url, x.sigs, PEERS_SIG_HEADER);
    } else if (!peers_answer_read(key, klen, nonce, x.sigs ? x.sig : NULL, body, x.body.len, out)) {
        char why[sizeof(out->error)];
        snprintf(why, sizeof(why), "%s", out->error);
        snprintf(out->error, sizeof(out->error), "%.300s: %.480s", url, why);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    wbuf_free(&x.body);
}
