/* tls.c - see tls.h. */
#include "service/tls.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "service/clock.h"
#include "service/file.h"
#include "service/log.h"

#define TLS_CHAIN_MAX 16                   /* certificates in a chain, ours or a client's */
#define TLS_FILE_MAX (1024 * 1024)         /* a PEM file is a few KB; refuse anything absurd */
#define TLS_POLL_NS 1000000000LL           /* how often files are checked for changes */
#define TLS_RETIRE_MARGIN_NS 5000000000LL  /* kept past --header-timeout before a retired generation is freed:
                                              a handshake step in progress when its connection was closed */

/* One set of credentials, immutable once published. */
typedef struct tls_gen {
    gnutls_pcert_st pcert[TLS_CHAIN_MAX];
    unsigned npcert;
    time_t not_after;                      /* the certificate's end of validity, -1 unknown */
    gnutls_privkey_t key;
    gnutls_x509_trust_list_t ca;           /* NULL without --tls-client-ca */
    char *text[3];                         /* the files' bytes (cert, key, CA), to see a change */
    size_t len[3];
    struct tls_gen *older;                 /* the generations it replaced, newest first */
    int64_t retired_ns;                    /* when a newer one replaced it (monotonic), 0 while current */
} tls_gen_t;

/* A file's identity, to notice a change without reading it. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool present;
} file_id_t;

struct tls {
    const char *path[3];                   /* --tls-cert, --tls-key, --tls-client-ca ("" for none) */
    pthread_mutex_t mu;                    /* one reload at a time; guards the fields below */
    file_id_t seen[3];
    int64_t next_poll_ns;
    int64_t retire_ns;                     /* how long a retired generation is kept (see tls.h) */
    /* for tls_session_new (the Redis port): credentials answering through
     * cert_callback, and TALLY_TLS_PRIORITIES parsed */
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
};

static const char *const file_flag[3] = { "--tls-cert", "--tls-key", "--tls-client-ca" };

/* The generation handshakes use (one per process: see tls.h). */
static _Atomic(tls_gen_t *) current;
/* Counters for /metrics. */
static _Atomic uint64_t reloads_ok, reloads_refused, clients_refused;

/* ------------------------------------------------------------------------ */
/* Generations                                                              */
/* ------------------------------------------------------------------------ */

static void gen_free(tls_gen_t *g)
{
    if (!g)
        return;
    for (unsigned i = 0; i < g->npcert; i++)
        gnutls_pcert_deinit(&g->pcert[i]);
    if (g->key)
        gnutls_privkey_deinit(g->key);
    if (g->ca)
        gnutls_x509_trust_list_deinit(g->ca, 1);
    for (int i = 0; i < 3; i++)
        if (g->text[i]) {
            gnutls_memset(g->text[i], 0, g->len[i]);   /* the key's bytes do not linger */
            free(g->text[i]);
        }
    free(g);
}

/* Reads a whole file (NUL-terminated); NULL with a message. */
static char *file_slurp(const char *flag, const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(TLS_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, TLS_FILE_MAX + 1, f) : 0;
    bool bad = !buf || ferror(f) || n > TLS_FILE_MAX;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s %s: %s", flag, path, !buf ? "out of memory" : n > TLS_FILE_MAX ? "larger than 1 MiB" : "read error");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The SHA-256 key id of a public key; false on failure. */
static bool key_id(gnutls_pubkey_t pub, unsigned char id[32])
{
    size_t n = 32;
    return gnutls_pubkey_get_key_id(pub, GNUTLS_KEYID_USE_SHA256, id, &n) == 0 && n == 32;
}

/* Parses the files' bytes (already in g->text) into g; false with a message. */
static bool gen_parse(const struct tls *t, tls_gen_t *g, char *err, size_t errlen)
{
    gnutls_datum_t d = { (unsigned char *)g->text[0], (unsigned)g->len[0] };
    unsigned n = TLS_CHAIN_MAX;
    int r = gnutls_pcert_list_import_x509_raw(g->pcert, &n, &d, GNUTLS_X509_FMT_PEM, 0);
    if (r < 0 || n == 0) {
        snprintf(err, errlen, "--tls-cert %s: %s", t->path[0], r < 0 ? gnutls_strerror(r) : "no certificate in it");
        return false;
    }
    g->npcert = n;
    d = (gnutls_datum_t){ (unsigned char *)g->text[1], (unsigned)g->len[1] };
    if ((r = gnutls_privkey_init(&g->key)) < 0 ||
        (r = gnutls_privkey_import_x509_raw(g->key, &d, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        snprintf(err, errlen, "--tls-key %s: %s", t->path[1], gnutls_strerror(r));
        return false;
    }
    gnutls_pubkey_t pub;
    unsigned char a[32], b[32];
    bool same = false;
    if (gnutls_pubkey_init(&pub) == 0) {
        same = gnutls_pubkey_import_privkey(pub, g->key, 0, 0) == 0 && key_id(pub, a) &&
               key_id(g->pcert[0].pubkey, b) && memcmp(a, b, 32) == 0;
        gnutls_pubkey_deinit(pub);
    }
    if (!same) {
        snprintf(err, errlen, "--tls-key %s is not the private key of the certificate in --tls-cert %s", t->path[1],
                 t->path[0]);
        return false;
    }
    if (t->path[2][0]) {
        d = (gnutls_datum_t){ (unsigned char *)g->text[2], (unsigned)g->len[2] };
        if ((r = gnutls_x509_trust_list_init(&g->ca, 0)) < 0 ||
            (r = gnutls_x509_trust_list_add_trust_mem(g->ca, &d, NULL, GNUTLS_X509_FMT_PEM, 0, 0)) <= 0) {
            snprintf(err, errlen, "--tls-client-ca %s: %s", t->path[2],
                     r < 0 ? gnutls_strerror(r) : "no CA certificate in it");
            return false;
        }
    }
    return true;
}

/* The certificate's subject and end of validity, for the log; fills
 * g->not_after. */
static void gen_describe(tls_gen_t *g, char *out, size_t n)
{
    gnutls_x509_crt_t crt;
    snprintf(out, n, "a certificate");
    g->not_after = -1;
    if (gnutls_pcert_export_x509(&g->pcert[0], &crt) < 0)
        return;
    char dn[256];
    size_t dnlen = sizeof(dn);
    if (gnutls_x509_crt_get_dn(crt, dn, &dnlen) < 0)
        snprintf(dn, sizeof(dn), "?");
    time_t until = gnutls_x509_crt_get_expiration_time(crt);
    g->not_after = until;
    struct tm tm;
    char when[32] = "?";
    if (until != (time_t)-1 && gmtime_r(&until, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(out, n, "'%s' (%u in the chain, valid until %s)", dn, g->npcert, when);
    gnutls_x509_crt_deinit(crt);
}

/* ------------------------------------------------------------------------ */
/* Handshakes                                                               */
/* ------------------------------------------------------------------------ */

/* GnuTLS's verification of a client's certificate (during the handshake;
 * non-zero fails it). */
static int verify_client(gnutls_session_t s)
{
    tls_gen_t *g = atomic_load_explicit(&current, memory_order_acquire);
    unsigned n = 0;
    const gnutls_datum_t *raw = gnutls_certificate_get_peers(s, &n);
    if (!g || !g->ca || !raw || n == 0) {
        log_debug("tls: a client sent no certificate; handshake refused");
        return -1;
    }
    if (n > TLS_CHAIN_MAX)
        n = TLS_CHAIN_MAX;
    gnutls_x509_crt_t chain[TLS_CHAIN_MAX];
    unsigned have = 0;
    for (; have < n; have++)
        if (gnutls_x509_crt_init(&chain[have]) < 0 ||
            gnutls_x509_crt_import(chain[have], &raw[have], GNUTLS_X509_FMT_DER) < 0) {
            if (have < n && chain[have])
                gnutls_x509_crt_deinit(chain[have]);
            break;
        }
    unsigned status = GNUTLS_CERT_INVALID;
    gnutls_typed_vdata_st purpose = { GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0 };
    int r = have == n ? gnutls_x509_trust_list_verify_crt2(g->ca, chain, n, &purpose, 1, 0, &status, NULL) : -1;
    for (unsigned i = 0; i < have; i++)
        gnutls_x509_crt_deinit(chain[i]);
    if (r < 0 || status != 0) {
        gnutls_datum_t why = { NULL, 0 };
        if (r >= 0)
            gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &why, 0);
        atomic_fetch_add(&clients_refused, 1);
        log_info("tls: a client certificate was refused: %s", why.data ? (char *)why.data : "unreadable chain");
        gnutls_free(why.data);
        return -1;
    }
    return 0;
}

/* gnutls_certificate_retrieve_function2: the current credentials. */
static int cert_callback(gnutls_session_t s, const gnutls_datum_t *req_ca_dn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                         unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
    (void)req_ca_dn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    tls_gen_t *g = atomic_load_explicit(&current, memory_order_acquire);
    if (!g)
        return -1;
    *pcert = g->pcert;
    *pcert_length = g->npcert;
    *privkey = g->key;
    if (g->ca) {
        /* the certificate request goes out later in this handshake */
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_function(s, verify_client);
    }
    return 0;
}

void *tls_cert_callback(void) { return (void *)(gnutls_certificate_retrieve_function2 *)cert_callback; }

int tls_session_new(tls_t *t, int fd, struct gnutls_session_int **out)
{
    gnutls_session_t s;
    int r = gnutls_init(&s, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
    if (r < 0)
        return r;
    if ((r = gnutls_priority_set(s, t->prio)) < 0 ||
        (r = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, t->cred)) < 0) {
        gnutls_deinit(s);
        return r;
    }
    gnutls_transport_set_int(s, fd);
    *out = s;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Loading and reloading                                                    */
/* ------------------------------------------------------------------------ */

static void file_id_of(const char *path, file_id_t *id)
{
    struct stat st;
    memset(id, 0, sizeof(*id));
    if (!path[0] || stat(path, &st) != 0)
        return;
    id->present = true;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtime = st.st_mtim;
}

static bool file_id_equal(const file_id_t *a, const file_id_t *b)
{
    return a->present == b->present && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Loads the files into a new generation and publishes it; t->mu held.
 * *changed tells whether a new generation was published, described in
 * what[] (for the log). */
static bool load(struct tls *t, bool *changed, char *what, size_t whatlen, char *err, size_t errlen)
{
    *changed = false;
    for (int i = 0; i < 3; i++)
        file_id_of(t->path[i], &t->seen[i]);
    tls_gen_t *g = calloc(1, sizeof(*g));
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    for (int i = 0; i < 3; i++)
        if (t->path[i][0] && !(g->text[i] = file_slurp(file_flag[i], t->path[i], &g->len[i], err, errlen))) {
            gen_free(g);
            return false;
        }
    tls_gen_t *cur = atomic_load_explicit(&current, memory_order_acquire);
    bool same = cur != NULL;
    for (int i = 0; same && i < 3; i++)
        same = g->len[i] == cur->len[i] && (!g->len[i] || memcmp(g->text[i], cur->text[i], g->len[i]) == 0);
    if (same) {
        gen_free(g);
        return true;
    }
    if (!gen_parse(t, g, err, errlen)) {
        gen_free(g);
        return false;
    }
    if (file_readable_by_others(t->path[1]))
        log_warn("--tls-key %s can be read by every user of this machine: chmod o-r it (0600, or 0640 with "
                 "a group tallyd is in)", t->path[1]);
    gen_describe(g, what, whatlen);   /* before publishing: g is immutable after */
    g->older = cur;
    if (cur)
        cur->retired_ns = clock_mono_ns();   /* only tls_tick reads it, under t->mu */
    atomic_store_explicit(&current, g, memory_order_release);
    *changed = true;
    return true;
}

tls_t *tls_open(const tally_opts_t *o, char *err, size_t errlen)
{
    struct tls *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->path[0] = o->tls_cert;
    t->path[1] = o->tls_key;
    t->path[2] = o->tls_client_ca;
    t->retire_ns = (int64_t)o->header_timeout * 1000000000LL + TLS_RETIRE_MARGIN_NS;
    pthread_mutex_init(&t->mu, NULL);
    bool changed;
    char what[400];
    int r = gnutls_certificate_allocate_credentials(&t->cred);
    if (r < 0 || (r = gnutls_priority_init(&t->prio, TALLY_TLS_PRIORITIES, NULL)) < 0) {
        snprintf(err, errlen, "TLS: %s", gnutls_strerror(r));
        if (t->cred)
            gnutls_certificate_free_credentials(t->cred);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return NULL;
    }
    gnutls_certificate_set_retrieve_function2(t->cred, cert_callback);
    if (!load(t, &changed, what, sizeof(what), err, errlen)) {
        gnutls_priority_deinit(t->prio);
        gnutls_certificate_free_credentials(t->cred);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return NULL;
    }
    log_info("tls: serving HTTPS (TLS 1.2 and 1.3, no session resumption) with %s%s", what,
             o->tls_client_ca[0] ? "; client certificates required (--tls-client-ca)" : "");
    t->next_poll_ns = clock_mono_ns() + TLS_POLL_NS;
    return t;
}

bool tls_reload(tls_t *t, const char *who, char *err, size_t errlen)
{
    pthread_mutex_lock(&t->mu);
    bool changed;
    char what[400];
    bool ok = load(t, &changed, what, sizeof(what), err, errlen);
    pthread_mutex_unlock(&t->mu);
    atomic_fetch_add(ok ? &reloads_ok : &reloads_refused, 1);
    if (!ok) {
        log_error("%s: %s; keeping the TLS certificate loaded before", who, err);
    } else if (changed) {
        log_info("%s: TLS certificate reloaded: now serving %s", who, what);
    } else {
        log_debug("%s: TLS files unchanged", who);
    }
    return ok;
}

void tls_tick(tls_t *t)
{
    int64_t now = clock_mono_ns();
    if (now < t->next_poll_ns)
        return;
    t->next_poll_ns = now + TLS_POLL_NS;
    bool moved = false;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < 3; i++) {
        file_id_t id;
        file_id_of(t->path[i], &id);
        moved |= !file_id_equal(&id, &t->seen[i]);
    }
    /* retired generations past their grace period go, with all older ones */
    tls_gen_t *cur = atomic_load_explicit(&current, memory_order_acquire);
    unsigned freed = 0;
    for (tls_gen_t *g = cur; g && g->older; g = g->older)
        if (now - g->older->retired_ns > t->retire_ns) {
            tls_gen_t *old = g->older;
            g->older = NULL;
            while (old) {
                tls_gen_t *next = old->older;
                gen_free(old);
                freed++;
                old = next;
            }
            break;
        }
    if (freed)
        log_debug("tls: freed %u retired certificate generation%s", freed, freed == 1 ? "" : "s");
    pthread_mutex_unlock(&t->mu);
    if (moved) {
        char err[600];
        tls_reload(t, "a TLS file changed", err, sizeof(err));
    }
}

void tls_metrics(tls_t *t, wbuf_t *out)
{
    (void)t;
    tls_gen_t *g = atomic_load_explicit(&current, memory_order_acquire);
    char buf[1024];
    int n = snprintf(buf, sizeof(buf),
                     "# HELP tally_tls_certificate_expiry_timestamp_seconds End of validity of the certificate "
                     "served (Unix time).\n"
                     "# TYPE tally_tls_certificate_expiry_timestamp_seconds gauge\n"
                     "tally_tls_certificate_expiry_timestamp_seconds %lld\n"
                     "# HELP tally_tls_reloads_total Reloads of the TLS files (SIGHUP, POST /admin/reload, a "
                     "file change), by result.\n"
                     "# TYPE tally_tls_reloads_total counter\n"
                     "tally_tls_reloads_total{result=\"ok\"} %llu\n"
                     "tally_tls_reloads_total{result=\"refused\"} %llu\n"
                     "# HELP tally_tls_client_certificates_refused_total Client certificates refused by the "
                     "--tls-client-ca check (a client sending none fails in GnuTLS, uncounted).\n"
                     "# TYPE tally_tls_client_certificates_refused_total counter\n"
                     "tally_tls_client_certificates_refused_total %llu\n",
                     g ? (long long)g->not_after : -1LL, (unsigned long long)atomic_load(&reloads_ok),
                     (unsigned long long)atomic_load(&reloads_refused),
                     (unsigned long long)atomic_load(&clients_refused));
    wbuf_put_bytes(out, buf, (size_t)n);
}

void tls_close(tls_t *t)
{
    if (!t)
        return;
    tls_gen_t *g = atomic_exchange(&current, NULL);
    while (g) {
        tls_gen_t *older = g->older;
        gen_free(g);
        g = older;
    }
    gnutls_priority_deinit(t->prio);
    gnutls_certificate_free_credentials(t->cred);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
