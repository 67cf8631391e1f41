/*
 * tls.h - HTTPS for tallyd: the certificate, its key and the client CAs,
 * loaded from files and swapped without dropping anything.
 *
 * libmicrohttpd runs TLS with GnuTLS.  Instead of handing it the PEM once
 * (MHD_OPTION_HTTPS_MEM_CERT), tallyd answers each handshake itself
 * (MHD_OPTION_HTTPS_CERT_CALLBACK, gnutls_certificate_retrieve_function2)
 * with the current credentials: a generation holding the parsed
 * certificate chain, the private key and, with --tls-client-ca, the trust
 * list client certificates are checked against.  A reload parses the files
 * into a new generation and, only if the certificate and key parse and
 * belong together (their public keys are the same) and the CA file holds at
 * least one certificate, publishes it with one atomic store; the listening
 * socket, open connections and requests in flight are untouched, and new
 * handshakes get the new certificate.  A bad file is refused, logged, and
 * the current generation stays.  A handshake that began with a generation
 * may still use it after a reload, and GnuTLS gives no signal when it is
 * done, so a retired generation is freed only --header-timeout plus 5 s
 * after it was replaced: by then every connection that was
 * handshaking with it has been closed by server_tick (a connection that
 * has not sent a complete request head within --header-timeout is).  Files
 * whose bytes did not change make no new generation.
 *
 * Reloads happen on SIGHUP and POST /admin/reload (tls_reload), and when a
 * file's identity (device, inode, size, modification time) changes, polled
 * about once a second by tls_tick: a Kubernetes Secret volume's atomic
 * symlink swap and cert-manager renewals are picked up by themselves.
 *
 * Protocol versions: TLS 1.2 and 1.3 only, forward-secret AEAD suites only
 * (TALLY_TLS_PRIORITIES), and no
 * session tickets: every connection makes a full handshake against the
 * current certificate and CAs, so a reload applies to all new connections
 * and a resumed session never skips the client-certificate check (tallyd's
 * clients keep connections alive, so resumption would save little).  With
 * --tls-client-ca each handshake requires a client certificate
 * (GNUTLS_CERT_REQUIRE) and verifies its chain against those CAs (validity
 * dates, signatures, TLS client purpose when the certificate names
 * purposes); a client without one fails the handshake and never sends a
 * request.
 *
 * The Redis port (service/resp_server.c) runs its own GnuTLS sessions
 * (tls_session_new) on the same credentials: the same certificate callback,
 * client-certificate check, priorities and lack of tickets, so a reload
 * reaches its new handshakes too.  Its listener closes a connection whose
 * handshake is not done within --header-timeout, which keeps the retired
 * generations' grace period above true for it as well.
 *
 * One TLS configuration per process (GnuTLS's callback has no user
 * pointer): tls_open once, tls_close at exit.
 */
#ifndef TALLY_TLS_H
#define TALLY_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/codec.h"
#include "service/options.h"

/* GnuTLS priorities: TLS 1.3, and TLS 1.2 with forward-secret AEAD suites
 * only - ECDHE key exchange (no static RSA, no finite-field DHE) with
 * AES-GCM or ChaCha20-Poly1305 (no CBC, no SHA-1 MAC), no SHA-1 signatures
 * - and no session tickets (see above).  `gnutls-cli --list --priority ...`
 * prints the suites; it_security's test_tls_suites checks them. */
#define TALLY_TLS_PRIORITIES                                                                                 \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA:-DHE-RSA:-DHE-DSS:-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:" \
    "+CHACHA20-POLY1305:-MAC-ALL:+AEAD:-SIGN-RSA-SHA1:-SIGN-ECDSA-SHA1:%NO_TICKETS"

typedef struct tls tls_t;

/* Loads --tls-cert, --tls-key and --tls-client-ca.  NULL with a message
 * naming the file when one is unreadable or invalid, or the key is not the
 * certificate's. */
tls_t *tls_open(const tally_opts_t *o, char *err, size_t errlen);
/* Re-reads the files; `who` (e.g. "SIGHUP") goes in the log line.  True when
 * the files are valid (new or unchanged); false with a message when refused
 * (the credentials in use stay). */
bool tls_reload(tls_t *t, const char *who, char *err, size_t errlen);
/* Housekeeping (every ~100 ms): about once a second, reloads when a file
 * changed on disk. */
void tls_tick(tls_t *t);
/* The certificate callback to give libmicrohttpd (a
 * gnutls_certificate_retrieve_function2 *), serving tls_open's credentials. */
void *tls_cert_callback(void);
/* A server session (GNUTLS_NONBLOCK) on the connected socket fd with the
 * credentials and priorities HTTPS uses; 0 with *out (gnutls_deinit it),
 * or a GnuTLS error code. */
struct gnutls_session_int;
int tls_session_new(tls_t *t, int fd, struct gnutls_session_int **out);
/* Appends the TLS metrics: the served certificate's expiry time
 * (tally_tls_certificate_expiry_timestamp_seconds), reloads by result and
 * client certificates refused. */
void tls_metrics(tls_t *t, wbuf_t *out);
/* Frees every generation; call after the HTTP server stopped. */
void tls_close(tls_t *t);

#endif
