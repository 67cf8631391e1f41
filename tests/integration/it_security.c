/*
 * it_security.c - the transport half of issue 15 against real tallyd
 * processes and libcurl:
 *
 *   TLS       certificates made here with openssl (a CA, a server pair, a
 *             client pair, a client of another CA, replacement pairs): HTTPS
 *             served, plain HTTP refused on the TLS port, TLS 1.1 refused
 *             (while the same client settings with TLS 1.2 succeed), mTLS
 *             (good cert, wrong CA, no cert), and the certificate reloaded
 *             on SIGHUP, on POST /admin/reload and on a file change - with a
 *             keep-alive connection opened before the reload still serving,
 *             and a bad pair refused while the old certificate stays;
 *   browsers  DNS-rebinding Host (421), cross-origin text/plain POST,
 *             form and multipart bodies (403/415), all changing nothing;
 *             CORS only with --allow-origin; the gateway hook exempt;
 *   proxies   {ip} behind --trusted-proxies: exactly the requests the
 *             Envoy and Traefik recipes of deploy/gateways send, replayed
 *             with forged X-Forwarded-For headers, are counted under the
 *             real client's key (nginx is run for real in it_gateway_nginx).
 */
#include <curl/curl.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static char dir[256];   /* certificates and files of the test */

/* ------------------------------------------------------------------------ */
/* Certificates                                                             */
/* ------------------------------------------------------------------------ */

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

/* An EC P-256 key and certificate `name`.{key,pem} with subject CN=cn,
 * signed by CA `ca` (NULL: self-signed, a CA). */
static void make_cert(const char *name, const char *cn, const char *ca)
{
    if (!ca) {
        sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key "
           "-out %s.pem -days 2 -subj /CN=%s 2>/dev/null",
           dir, name, name, cn);
        return;
    }
    sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key -out %s.csr "
       "-subj /CN=%s 2>/dev/null && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > %s.ext && "
       "openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key -CAcreateserial -out %s.pem -days 2 "
       "-extfile %s.ext 2>/dev/null",
       dir, name, name, cn, name, name, ca, ca, name, name);
}

static void path_of(char *out, size_t n, const char *file) { snprintf(out, n, "%s/%s", dir, file); }

/* ------------------------------------------------------------------------ */
/* An HTTPS client                                                          */
/* ------------------------------------------------------------------------ */

typedef struct tls_client {
    const char *cert, *key;      /* client certificate files (names in dir), or NULL */
    long max_version;            /* CURL_SSLVERSION_MAX_*, 0 = default */
    bool plain;                  /* http:// to the TLS port */
    const char *ciphers;         /* the only TLS 1.2 suites offered (OpenSSL names), or NULL */
} tls_client_t;

typedef struct tls_answer {
    CURLcode rc;
    long status;
    char subject[256];           /* the server certificate's subject */
    long connects;               /* new connections the request made (0: reused) */
    char body[512];              /* the answer's body (truncated) */
} tls_answer_t;

static size_t sink(char *p, size_t s, size_t n, void *ud)
{
    char *body = ud;
    size_t have = strlen(body), room = 511 - have, len = s * n;
    memcpy(body + have, p, len < room ? len : room);
    body[have + (len < room ? len : room)] = '\0';
    return s * n;
}

/* One request over `c` (a fresh handle when NULL, else reused so its
 * connection is kept alive between calls). */
static tls_answer_t tls_request(CURL *reuse, int port, const tls_client_t *cl, const char *method, const char *path,
                                const char *json)
{
    tls_answer_t a;
    memset(&a, 0, sizeof(a));
    CURL *c = reuse ? reuse : curl_easy_init();
    assert_non_null(c);
    char url[256], ca[400], cert[400], key[400];
    snprintf(url, sizeof(url), "%s://127.0.0.1:%d%s", cl->plain ? "http" : "https", port, path);
    path_of(ca, sizeof(ca), "ca.pem");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    curl_easy_setopt(c, CURLOPT_CERTINFO, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a.body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (cl->cert) {
        path_of(cert, sizeof(cert), cl->cert);
        path_of(key, sizeof(key), cl->key);
        curl_easy_setopt(c, CURLOPT_SSLCERT, cert);
        curl_easy_setopt(c, CURLOPT_SSLKEY, key);
    }
    if (cl->max_version) {
        /* OpenSSL 3 refuses TLS < 1.2 itself at its default security
         * level: level 0 makes the client willing, so a refusal is the
         * server's (the same settings with TLS 1.2 succeed) */
        curl_easy_setopt(c, CURLOPT_SSLVERSION, (long)(CURL_SSLVERSION_TLSv1_0 | cl->max_version));
        curl_easy_setopt(c, CURLOPT_SSL_CIPHER_LIST, cl->ciphers ? cl->ciphers : "DEFAULT:@SECLEVEL=0");
    }
    struct curl_slist *hs = NULL;
    if (json) {
        hs = curl_slist_append(hs, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    }
    a.rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &a.connects);
    struct curl_certinfo *ci = NULL;
    if (a.rc == CURLE_OK && curl_easy_getinfo(c, CURLINFO_CERTINFO, &ci) == CURLE_OK && ci && ci->num_of_certs > 0)
        for (struct curl_slist *s = ci->certinfo[0]; s; s = s->next)
            if (!strncmp(s->data, "Subject:", 8))
                snprintf(a.subject, sizeof(a.subject), "%s", s->data + 8);
    if (json) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
        curl_slist_free_all(hs);
    }
    if (!reuse)
        curl_easy_cleanup(c);
    return a;
}

static const tls_client_t good = { "client.pem", "client.key", 0, false, NULL };

/* Waits until the TLS server answers /readyz (tally_start_nowait only
 * waits for the port). */
static void wait_tls_ready(const tally_proc_t *p, const tls_client_t *cl)
{
    for (int i = 0; i < 1000; i++) {
        tls_answer_t a = tls_request(NULL, p->port, cl, "GET", "/readyz", NULL);
        if (a.rc == CURLE_OK && a.status == 200)
            return;
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    fail_msg("tallyd did not become ready over TLS; log:\n%s", tally_log(p));
}

/* Waits until new handshakes show a certificate whose subject contains cn. */
static void wait_subject(int port, const tls_client_t *cl, const char *cn, int seconds)
{
    tls_answer_t a;
    for (int i = 0; i < seconds * 20; i++) {
        a = tls_request(NULL, port, cl, "GET", "/healthz", NULL);
        if (a.rc == CURLE_OK && strstr(a.subject, cn))
            return;
        struct timespec ts = { 0, 50 * 1000000L };
        nanosleep(&ts, NULL);
    }
    fail_msg("the server still shows '%s' (rc %d), not %s", a.subject, (int)a.rc, cn);
}

static bool log_has(const tally_proc_t *p, const char *what)
{
    char *log = tally_log(p);
    bool yes = strstr(log, what) != NULL;
    free(log);
    return yes;
}

static int setup(void **state)
{
    (void)state;
    if (system("openssl version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "it_security: openssl is not installed (make deps installs the Debian package)\n");
        return -1;
    }
    tmpdir_make(dir, sizeof(dir));
    make_cert("ca", "tally-test-ca", NULL);
    make_cert("other-ca", "another-ca", NULL);
    make_cert("server", "first.tally.test", "ca");
    make_cert("client", "a-client", "ca");
    make_cert("stranger", "a-stranger", "other-ca");
    make_cert("second", "second.tally.test", "ca");
    make_cert("third", "third.tally.test", "ca");
    /* an RSA pair: the one kind of key a static-RSA suite could use */
    sh("cd %s && openssl req -newkey rsa:2048 -nodes -keyout rsa.key -out rsa.csr -subj /CN=rsa.tally.test "
       "2>/dev/null && openssl x509 -req -in rsa.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out rsa.pem "
       "-days 2 -extfile server.ext 2>/dev/null",
       dir);
    /* the live files, overwritten by the reload tests */
    sh("cd %s && cp server.pem live.pem && cp server.key live.key", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (dir[0])
        tmpdir_remove(dir);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* TLS                                                                      */
/* ------------------------------------------------------------------------ */

/* Starts tallyd over TLS with the live files (and client CAs when mtls). */
static void start_tls(tally_proc_t *p, bool mtls)
{
    char cert[400], key[400], ca[400];
    path_of(cert, sizeof(cert), "live.pem");
    path_of(key, sizeof(key), "live.key");
    path_of(ca, sizeof(ca), "ca.pem");
    const char *args[] = { "--in-memory", "--tls-cert", cert, "--tls-key", key,
                           mtls ? "--tls-client-ca" : NULL, ca, NULL };
    tally_start_nowait(p, NULL, args);
    wait_tls_ready(p, &good);
}

static void test_tls_serves_and_refuses(void **state)
{
    (void)state;
    tally_proc_t p;
    start_tls(&p, false);
    tls_client_t anon = { NULL, NULL, 0, false, NULL };
    tls_answer_t a = tls_request(NULL, p.port, &anon, "POST", "/throttle",
                                 "{\"key\":\"tls\",\"max_burst\":1,\"count_per_period\":1,\"period\":60}");
    assert_int_equal(a.rc, CURLE_OK);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.subject, "first.tally.test"));
    /* plain HTTP on the TLS port: no answer */
    tls_client_t plain = { NULL, NULL, 0, true, NULL };
    a = tls_request(NULL, p.port, &plain, "GET", "/healthz", NULL);
    if (a.rc == CURLE_OK && a.status == 200)
        fail_msg("plain HTTP was answered on the TLS port");
    /* TLS 1.1 refused; the same client settings with TLS 1.2 are served */
    tls_client_t old = { NULL, NULL, CURL_SSLVERSION_MAX_TLSv1_1, false, NULL };
    a = tls_request(NULL, p.port, &old, "GET", "/healthz", NULL);
    assert_int_not_equal(a.rc, CURLE_OK);
    tls_client_t v12 = { NULL, NULL, CURL_SSLVERSION_MAX_TLSv1_2, false, NULL };
    a = tls_request(NULL, p.port, &v12, "GET", "/healthz", NULL);
    assert_int_equal(a.rc, CURLE_OK);
    assert_int_equal(a.status, 200);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

/* TLS 1.2 offers only forward-secret AEAD suites (ECDHE with AES-GCM or
 * ChaCha20-Poly1305): no CBC, no SHA-1 MAC, no static RSA key exchange -
 * with an EC and with an RSA certificate.  The client offers exactly one
 * suite, so a handshake that succeeds proves the server accepts it. */
static void test_tls_suites(void **state)
{
    (void)state;
    static const struct {
        const char *cert, *suite;
        bool served;
    } cases[] = {
        { "live", "ECDHE-ECDSA-AES128-GCM-SHA256", true },
        { "live", "ECDHE-ECDSA-CHACHA20-POLY1305", true },
        { "live", "ECDHE-ECDSA-AES128-SHA", false },      /* CBC, SHA-1 */
        { "live", "ECDHE-ECDSA-AES256-SHA384", false },   /* CBC */
        { "rsa", "ECDHE-RSA-AES256-GCM-SHA384", true },
        { "rsa", "AES256-GCM-SHA384", false },            /* static RSA: no forward secrecy */
        { "rsa", "AES128-SHA", false },                   /* static RSA, CBC, SHA-1 */
        { "rsa", "ECDHE-RSA-AES128-SHA", false },         /* CBC, SHA-1 */
    };
    for (int k = 0; k < 2; k++) {
        const char *which = k ? "rsa" : "live";
        char cert[400], key[400], certf[64], keyf[64];
        snprintf(certf, sizeof(certf), "%s.pem", which);
        snprintf(keyf, sizeof(keyf), "%s.key", which);
        path_of(cert, sizeof(cert), certf);
        path_of(key, sizeof(key), keyf);
        const char *args[] = { "--in-memory", "--tls-cert", cert, "--tls-key", key, NULL };
        tally_proc_t p;
        tally_start_nowait(&p, NULL, args);
        wait_tls_ready(&p, &good);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            if (strcmp(cases[i].cert, which))
                continue;
            tls_client_t one = { NULL, NULL, CURL_SSLVERSION_MAX_TLSv1_2, false, cases[i].suite };
            tls_answer_t a = tls_request(NULL, p.port, &one, "GET", "/healthz", NULL);
            if (cases[i].served && (a.rc != CURLE_OK || a.status != 200))
                fail_msg("%s certificate: TLS 1.2 suite %s refused (curl %d)", which, cases[i].suite, a.rc);
            if (!cases[i].served && a.rc == CURLE_OK)
                fail_msg("%s certificate: TLS 1.2 suite %s was served", which, cases[i].suite);
        }
        assert_int_equal(tally_stop(&p), 0);
        tally_cleanup(&p);
    }
}

static void test_mtls(void **state)
{
    (void)state;
    tally_proc_t p;
    start_tls(&p, true);
    tls_answer_t a = tls_request(NULL, p.port, &good, "POST", "/counter/mtls", "{\"by\":1}");
    assert_int_equal(a.rc, CURLE_OK);
    assert_int_equal(a.status, 200);
    /* no client certificate, or one from another CA: the handshake fails,
     * no request reaches a handler (the counter stays at 1) */
    tls_client_t none = { NULL, NULL, 0, false, NULL }, stranger = { "stranger.pem", "stranger.key", 0, false, NULL };
    for (int i = 0; i < 2; i++) {
        a = tls_request(NULL, p.port, i ? &stranger : &none, "POST", "/counter/mtls", "{\"by\":1}");
        if (a.rc == CURLE_OK)
            fail_msg("a client %s was answered %ld", i ? "of another CA" : "without a certificate", a.status);
    }
    a = tls_request(NULL, p.port, &good, "POST", "/counter/mtls", "{\"by\":0}");
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "\"value\":1"));
    assert_true(log_has(&p, "client certificate was refused"));
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

/* Reloads: SIGHUP, a bad pair (refused, old kept), POST /admin/reload, a
 * file change; a keep-alive connection opened first keeps serving. */
static void test_tls_reload(void **state)
{
    (void)state;
    sh("cd %s && cp server.pem live.pem && cp server.key live.key", dir);
    tally_proc_t p;
    start_tls(&p, true);
    CURL *kept = curl_easy_init();
    tls_answer_t a = tls_request(kept, p.port, &good, "GET", "/healthz", NULL);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.subject, "first.tally.test"));

    /* SIGHUP: new handshakes get the new certificate */
    sh("cd %s && cp second.pem live.pem && cp second.key live.key", dir);
    kill(p.pid, SIGHUP);
    wait_subject(p.port, &good, "second.tally.test", 5);
    assert_true(log_has(&p, "SIGHUP: TLS certificate reloaded"));
    /* the connection opened before the reload is still open and serving */
    a = tls_request(kept, p.port, &good, "POST", "/counter/kept", "{\"by\":1}");
    assert_int_equal(a.rc, CURLE_OK);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.connects, 0);

    /* a key that is not the certificate's: refused, the old one stays */
    sh("cd %s && cp third.pem live.pem && cp server.key live.key", dir);
    kill(p.pid, SIGHUP);
    for (int i = 0; i < 200 && !log_has(&p, "is not the private key of the certificate"); i++)
        usleep(10000);
    assert_true(log_has(&p, "keeping the TLS certificate loaded before"));
    a = tls_request(NULL, p.port, &good, "GET", "/healthz", NULL);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.subject, "second.tally.test"));
    /* POST /admin/reload says so too */
    a = tls_request(NULL, p.port, &good, "POST", "/admin/reload", NULL);
    assert_int_equal(a.status, 400);

    /* fixing the files is noticed without a signal */
    sh("cd %s && cp third.key live.key", dir);
    wait_subject(p.port, &good, "third.tally.test", 5);
    assert_true(log_has(&p, "a TLS file changed: TLS certificate reloaded"));
    a = tls_request(kept, p.port, &good, "GET", "/healthz", NULL);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.connects, 0);
    curl_easy_cleanup(kept);

    /* POST /admin/reload with good files */
    sh("cd %s && cp server.pem live.pem && cp server.key live.key && touch -d '2000-01-01' live.pem live.key", dir);
    a = tls_request(NULL, p.port, &good, "POST", "/admin/reload", NULL);
    assert_int_equal(a.status, 200);
    wait_subject(p.port, &good, "first.tally.test", 5);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

/* How many retired certificate generations the log says were freed. */
static int freed_generations(const tally_proc_t *p)
{
    char *log = tally_log(p);
    int total = 0;
    for (const char *s = log; (s = strstr(s, "tls: freed ")); s++)
        total += atoi(s + strlen("tls: freed "));
    free(log);
    return total;
}

/* Retired certificates are freed once no handshake can still use them
 * (--header-timeout plus 5 s); handshakes go on with the current one. */
static void test_tls_retired_freed(void **state)
{
    (void)state;
    sh("cd %s && cp server.pem live.pem && cp server.key live.key", dir);
    char cert[400], key[400];
    path_of(cert, sizeof(cert), "live.pem");
    path_of(key, sizeof(key), "live.key");
    const char *args[] = { "--in-memory", "--tls-cert", cert, "--tls-key", key, "--header-timeout", "1",
                           "--log-level", "debug", NULL };
    tally_proc_t p;
    tally_start_nowait(&p, NULL, args);
    wait_tls_ready(&p, &good);
    sh("cd %s && cp second.pem live.pem && cp second.key live.key", dir);
    kill(p.pid, SIGHUP);
    wait_subject(p.port, &good, "second.tally.test", 5);
    sh("cd %s && cp third.pem live.pem && cp third.key live.key", dir);
    kill(p.pid, SIGHUP);
    wait_subject(p.port, &good, "third.tally.test", 5);
    for (int i = 0; i < 200 && freed_generations(&p) < 2; i++) {
        tls_answer_t a = tls_request(NULL, p.port, &good, "GET", "/healthz", NULL);
        assert_int_equal(a.status, 200);
        usleep(100000);
    }
    assert_int_equal(freed_generations(&p), 2);
    wait_subject(p.port, &good, "third.tally.test", 1);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

static void test_tls_bad_start(void **state)
{
    (void)state;
    char cert[400], key[400], other[400];
    path_of(cert, sizeof(cert), "server.pem");
    path_of(key, sizeof(key), "server.key");
    path_of(other, sizeof(other), "client.key");
    tally_proc_t p;
    const char *mismatch[] = { "--in-memory", "--tls-cert", cert, "--tls-key", other, NULL };
    assert_int_equal(tally_start_expect_exit(&p, NULL, mismatch), 1);
    assert_true(log_has(&p, "is not the private key of the certificate"));
    tally_cleanup(&p);
    const char *alone[] = { "--in-memory", "--tls-cert", cert, NULL };
    assert_int_equal(tally_start_expect_exit(&p, NULL, alone), 2);
    tally_cleanup(&p);
    const char *missing[] = { "--in-memory", "--tls-cert", cert, "--tls-key", "/nonexistent/key.pem", NULL };
    assert_int_equal(tally_start_expect_exit(&p, NULL, missing), 1);
    assert_true(log_has(&p, "--tls-key /nonexistent/key.pem"));
    tally_cleanup(&p);
    (void)key;
}

/* ------------------------------------------------------------------------ */
/* Browsers                                                                 */
/* ------------------------------------------------------------------------ */

static long status_of(tally_proc_t *p, const char *method, const char *path, const char *body, const char *ctype,
                      const char *const *headers, const char *code)
{
    http_resp_t r = http_h(p, method, path, body, ctype, headers);
    long s = r.status;
    if (code && !strstr(r.body ? r.body : "", code))
        fail_msg("%s %s: expected code %s, got %ld %s", method, path, code, s, r.body);
    http_free(&r);
    return s;
}

static void test_dns_rebinding(void **state)
{
    (void)state;
    tally_proc_t p;
    const char *args[] = { "--in-memory", "--allow-host", "tally.internal", NULL };
    tally_start(&p, NULL, args);
    const char *evil[] = { "Host: attacker.example:8080", NULL };
    assert_int_equal(status_of(&p, "GET", "/keys", NULL, NULL, evil, "MISDIRECTED_REQUEST"), 421);
    assert_int_equal(status_of(&p, "POST", "/counter/rebind", "{\"by\":1}", NULL, evil, "MISDIRECTED_REQUEST"), 421);
    assert_int_equal(status_of(&p, "GET", "/keys/rebind", NULL, NULL, NULL, NULL), 404);   /* nothing made */
    /* near misses of the literals the guard answers without parsing */
    static const char *const near[] = { "Host: 127.0.0.1:80:80", "Host: 127.0.0.1x", "Host: localhostx:80",
                                        "Host: 127.0.0.1.evil.example", "Host: localhost:80:80" };
    for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
        const char *h[] = { near[i], NULL };
        if (status_of(&p, "GET", "/healthz", NULL, NULL, h, NULL) != 421)
            fail_msg("%s was not refused", near[i]);
    }
    static const char *const ok[] = { "Host: localhost:8080", "Host: 127.0.0.1", "Host: [::1]:8080",
                                      "Host: LOCALHOST", "Host: tally.internal:80", "Host: 10.1.2.3",
                                      "Host: 127.0.0.1:8080", "Host: localhost", "Host: localhost.:8080" };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        const char *h[] = { ok[i], NULL };
        if (status_of(&p, "GET", "/healthz", NULL, NULL, h, NULL) != 200)
            fail_msg("%s was refused", ok[i]);
    }
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

static void test_browser_bodies(void **state)
{
    (void)state;
    tally_proc_t p;
    tally_start(&p, NULL, NULL);
    /* a page's cross-origin "simple" POST: refused by its Origin */
    const char *page[] = { "Origin: https://attacker.example", NULL };
    assert_int_equal(status_of(&p, "POST", "/counter/csrf", "{\"by\":1}", "text/plain", page, "FORBIDDEN"), 403);
    assert_int_equal(status_of(&p, "POST", "/throttle",
                               "{\"key\":\"csrf\",\"max_burst\":0,\"count_per_period\":1,\"period\":60}",
                               "text/plain;charset=UTF-8", page, "FORBIDDEN"),
                     403);
    assert_int_equal(status_of(&p, "PUT", "/counter/csrf", "{}", NULL, page, "FORBIDDEN"), 403);
    /* the same bodies without Origin: their types are refused */
    static const char *const bad[] = { "text/plain", "application/x-www-form-urlencoded",
                                       "multipart/form-data; boundary=x", "" /* no Content-Type */ };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (status_of(&p, "POST", "/counter/csrf", "{\"by\":1}", bad[i], NULL, "UNSUPPORTED_MEDIA_TYPE") != 415)
            fail_msg("Content-Type '%s' was not refused", bad[i]);
    /* nothing changed */
    assert_int_equal(status_of(&p, "GET", "/keys/csrf", NULL, NULL, NULL, NULL), 404);
    http_resp_t t = http(&p, "POST", "/throttle",
                         "{\"key\":\"csrf\",\"max_burst\":0,\"count_per_period\":1,\"period\":60}", NULL);
    assert_status(&t, 200);
    assert_true(json_bool_of(&t, "allowed"));   /* its one request was not taken by the refused ones */
    http_free(&t);
    /* a key's deletion from a page: refused, the key stays */
    assert_int_equal(status_of(&p, "POST", "/counter/keep", "{\"by\":5}", NULL, NULL, NULL), 200);
    assert_int_equal(status_of(&p, "DELETE", "/keys/keep", NULL, NULL, page, "FORBIDDEN"), 403);
    assert_int_equal(status_of(&p, "GET", "/keys/keep", NULL, NULL, NULL, NULL), 200);
    /* JSON types and bodiless changes pass; bytes routes want bytes */
    assert_int_equal(status_of(&p, "POST", "/counter/ok", "{\"by\":1}", "application/json; charset=utf-8", NULL, NULL),
                     200);
    assert_int_equal(status_of(&p, "POST", "/counter/ok", "{\"by\":1}", "application/merge-patch+json", NULL, NULL),
                     200);
    assert_int_equal(status_of(&p, "DELETE", "/keys/ok", NULL, "", NULL, NULL), 200);
    http_resp_t r = http_bin(&p, "PUT", "/bits/raw", "hi", 2, "application/octet-stream");
    assert_status(&r, 200);
    http_free(&r);
    assert_int_equal(status_of(&p, "PUT", "/bits/raw", "hi", NULL, NULL, "UNSUPPORTED_MEDIA_TYPE"), 415);
    /* no CORS without --allow-origin: a preflight is refused */
    const char *pre[] = { "Origin: https://app.example", "Access-Control-Request-Method: POST", NULL };
    assert_int_equal(status_of(&p, "OPTIONS", "/counter/x", NULL, NULL, pre, "FORBIDDEN"), 403);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

static void test_cors(void **state)
{
    (void)state;
    tally_proc_t p;
    const char *args[] = { "--in-memory", "--allow-origin", "https://app.example, http://localhost:3000", NULL };
    tally_start(&p, NULL, args);
    const char *pre[] = { "Origin: https://app.example", "Access-Control-Request-Method: POST",
                          "Access-Control-Request-Headers: content-type", NULL };
    http_resp_t r = http_h(&p, "OPTIONS", "/counter/cors", NULL, NULL, pre);
    assert_status(&r, 204);
    char v[192];
    assert_true(http_header(&r, "Access-Control-Allow-Origin", v, sizeof(v)));
    assert_string_equal(v, "https://app.example");
    assert_true(http_header(&r, "Access-Control-Allow-Methods", v, sizeof(v)));
    assert_non_null(strstr(v, "POST"));
    assert_true(http_header(&r, "Access-Control-Allow-Headers", v, sizeof(v)));
    assert_non_null(strstr(v, "Content-Type"));
    http_free(&r);
    const char *from[] = { "Origin: https://app.example", NULL };
    r = http_h(&p, "POST", "/counter/cors", "{\"by\":2}", NULL, from);
    assert_status(&r, 200);
    assert_true(http_header(&r, "Access-Control-Allow-Origin", v, sizeof(v)));
    assert_string_equal(v, "https://app.example");
    assert_true(http_header(&r, "Vary", v, sizeof(v)));
    assert_true(http_header(&r, "Access-Control-Expose-Headers", v, sizeof(v)));
    assert_non_null(strstr(v, "RateLimit-Remaining"));
    http_free(&r);
    /* an allowed origin still sends JSON */
    assert_int_equal(status_of(&p, "POST", "/counter/cors", "{\"by\":2}", "text/plain", from, "UNSUPPORTED"), 415);
    /* another origin: refused, preflight included */
    const char *other[] = { "Origin: https://app.example.evil", "Access-Control-Request-Method: POST", NULL };
    assert_int_equal(status_of(&p, "OPTIONS", "/counter/cors", NULL, NULL, other, "FORBIDDEN"), 403);
    assert_int_equal(status_of(&p, "POST", "/counter/cors", "{\"by\":2}", NULL, other, "FORBIDDEN"), 403);
    r = http(&p, "GET", "/counter/cors", NULL, NULL);
    assert_int_equal(json_int_of(&r, "value"), 2);
    http_free(&r);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
    /* a malformed origin is refused at start */
    const char *bad[] = { "--in-memory", "--allow-origin", "app.example/path", NULL };
    assert_int_equal(tally_start_expect_exit(&p, NULL, bad), 1);
    tally_cleanup(&p);
}

/* ------------------------------------------------------------------------ */
/* Proxies                                                                  */
/* ------------------------------------------------------------------------ */

static const char PER_IP[] = "{\"policies\":{\"per_ip\":{\"algorithm\":\"fixed_window\",\"max_count\":2,"
                             "\"period\":3600,\"key\":\"{ip}\",\"deny_status\":429}}}";

static void start_with_policy(tally_proc_t *p, const char *trusted)
{
    char cfg[400];
    path_of(cfg, sizeof(cfg), "per_ip.json");
    file_write(cfg, PER_IP, strlen(PER_IP));
    const char *args[] = { "--in-memory", "--config", cfg, trusted ? "--trusted-proxies" : NULL, trusted, NULL };
    tally_start(p, NULL, args);
}

/* Three hook requests with the given header sets: 200, 200, 429. */
static void three_hits(tally_proc_t *p, const char *const hs[3][6])
{
    for (int i = 0; i < 3; i++) {
        long want = i < 2 ? 200 : 429;
        long got = status_of(p, "GET", "/hook/per_ip/orders", NULL, NULL, hs[i], NULL);
        if (got != want)
            fail_msg("hook request %d (%s): expected %ld, got %ld", i, hs[i][0], want, got);
    }
}

static void key_exists(tally_proc_t *p, const char *key, bool yes)
{
    char path[200];
    snprintf(path, sizeof(path), "/keys/per_ip:%s", key);
    long s = status_of(p, "GET", path, NULL, NULL, NULL, NULL);
    if (s != (yes ? 200 : 404))
        fail_msg("key per_ip:%s: %ld", key, s);
}

/* Envoy (deploy/gateways/envoy/envoy.yaml: use_remote_address: true,
 * xff_num_trusted_hops: 0) appends the address it saw to the client's
 * X-Forwarded-For and asks the hook from its own address (here 127.0.0.1,
 * trusted); the Host is the client's.  Forged left parts change nothing. */
static void test_envoy_replay(void **state)
{
    (void)state;
    tally_proc_t p;
    start_with_policy(&p, "127.0.0.1/32,::1");
    const char *hs[3][6] = {
        { "x-forwarded-for: 203.0.113.7", "Host: shop.example.com", "x-envoy-internal: false", NULL },
        { "x-forwarded-for: 198.51.100.1,203.0.113.7", "Host: shop.example.com", NULL },
        { "x-forwarded-for: 10.0.0.1, 127.0.0.1, 203.0.113.7", "Host: shop.example.com",
          "Origin: https://shop.example.com", NULL },
    };
    three_hits(&p, hs);
    key_exists(&p, "203.0.113.7", true);
    key_exists(&p, "198.51.100.1", false);
    key_exists(&p, "10.0.0.1", false);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

/* Traefik ForwardAuth (deploy/gateways/traefik: trustForwardHeader: false)
 * sets X-Forwarded-For to the client's address alone; with
 * trustForwardHeader: true it appends it to what the client sent. */
static void test_traefik_replay(void **state)
{
    (void)state;
    tally_proc_t p;
    start_with_policy(&p, "127.0.0.0/8");
    const char *hs[3][6] = {
        { "X-Forwarded-For: 203.0.113.8", "X-Forwarded-Method: GET", "X-Forwarded-Uri: /orders",
          "X-Forwarded-Host: shop.example.com", NULL },
        { "X-Forwarded-For: 198.51.100.9, 203.0.113.8", "X-Forwarded-Uri: /orders", NULL },
        { "X-Forwarded-For: 203.0.113.8", "X-Real-IP: 198.51.100.10", NULL },
    };
    three_hits(&p, hs);
    key_exists(&p, "203.0.113.8", true);
    key_exists(&p, "198.51.100.9", false);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
}

/* Without --trusted-proxies (or from a peer outside them) forwarding
 * headers are ignored: the key is the peer's address, whatever is sent. */
/* Every file of the data directory is the owner's alone (0600; a directory
 * tallyd creates, 0700), whatever the umask lets through; secrets others may
 * read are named in the log. */
static void test_file_modes(void **state)
{
    (void)state;
    mode_t old = umask(0);   /* the most permissive umask: the modes are tallyd's own */
    char data[400], tokens[400], key[400], cert[400];
    snprintf(data, sizeof(data), "%s/modes-data", dir);
    snprintf(tokens, sizeof(tokens), "%s/modes-tokens.json", dir);
    sh("printf '{\"tokens\":[{\"name\":\"t\",\"sha256\":\"%%s\",\"scopes\":[\"admin\"]}]}' "
       "\"$(printf secret | %s --hash-token)\" > %s && chmod 0644 %s",
       getenv("TALLYD") ? getenv("TALLYD") : "build/release/tallyd", tokens, tokens);
    path_of(cert, sizeof(cert), "live.pem");
    snprintf(key, sizeof(key), "%s/modes.key", dir);
    sh("cp %s/live.key %s && chmod 0644 %s", dir, key, key);
    tally_proc_t p;
    const char *args[] = { "--data-dir", data, "--tokens", tokens, "--tls-cert", cert, "--tls-key", key, NULL };
    tally_start_nowait(&p, NULL, args);
    const char *tok_warn = "can be read by every user of this machine: it holds only hashes";
    const char *key_warn = "can be read by every user of this machine: chmod o-r it (0600";
    for (int i = 0; i < 400 && !(log_has(&p, tok_warn) && log_has(&p, key_warn)); i++)
        usleep(25000);
    assert_true(log_has(&p, tok_warn));
    assert_true(log_has(&p, key_warn));
    tally_kill(&p);
    tally_cleanup(&p);
    umask(0);
    const char *plain[] = { "--data-dir", data, NULL };
    tally_start(&p, NULL, plain);
    http_expect(&p, "POST", "/uv/modes", "{\"items\":[\"a\"]}", 200, NULL);
    http_expect(&p, "POST", "/admin/snapshot", NULL, 200, NULL);
    http_expect(&p, "POST", "/uv/modes", "{\"items\":[\"b\"]}", 200, NULL);
    struct stat sb;
    assert_int_equal(stat(data, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    DIR *d = opendir(data);
    assert_non_null(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char f[700];
        snprintf(f, sizeof(f), "%s/%s", data, e->d_name);
        assert_int_equal(stat(f, &sb), 0);
        if ((sb.st_mode & 0777) != 0600)
            fail_msg("%s: mode %o, not 0600", f, (unsigned)(sb.st_mode & 0777));
        files++;
    }
    closedir(d);
    assert_true(files >= 3);   /* the lock, a snapshot, a journal */
    umask(old);
    assert_int_equal(tally_stop(&p), 0);
    tally_cleanup(&p);
    sh("rm -rf %s %s %s", data, tokens, key);
}

static void test_untrusted_peer(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        tally_proc_t p;
        start_with_policy(&p, t ? "10.0.0.0/8" : NULL);
        const char *hs[3][6] = {
            { "X-Forwarded-For: 198.51.100.1", NULL },
            { "X-Forwarded-For: 198.51.100.2", "X-Real-IP: 198.51.100.3", NULL },
            { "X-Real-IP: 198.51.100.4", NULL },
        };
        three_hits(&p, hs);
        key_exists(&p, "127.0.0.1", true);
        key_exists(&p, "198.51.100.1", false);
        assert_true(log_has(&p, "not in --trusted-proxies"));
        assert_int_equal(tally_stop(&p), 0);
        tally_cleanup(&p);
    }
    tally_proc_t p;
    const char *bad[] = { "--in-memory", "--trusted-proxies", "10.0.0.0/33", NULL };
    assert_int_equal(tally_start_expect_exit(&p, NULL, bad), 2);
    tally_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_serves_and_refuses),
        cmocka_unit_test(test_tls_suites),
        cmocka_unit_test(test_mtls),
        cmocka_unit_test(test_tls_reload),
        cmocka_unit_test(test_tls_retired_freed),
        cmocka_unit_test(test_tls_bad_start),
        cmocka_unit_test(test_dns_rebinding),
        cmocka_unit_test(test_browser_bodies),
        cmocka_unit_test(test_cors),
        cmocka_unit_test(test_envoy_replay),
        cmocka_unit_test(test_traefik_replay),
        cmocka_unit_test(test_file_modes),
        cmocka_unit_test(test_untrusted_peer),
    };
    return cmocka_run_group_tests_name("security: TLS, browsers, proxies (integration)", tests, setup, teardown);
}
