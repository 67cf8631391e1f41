/*
 * peers.h - asking the other nodes of a replication group (--peers) which
 * epoch and role they have: GET /replication/epoch over HTTP (libcurl), and
 * whether the answer is theirs.
 *
 * This is the evidence a node weighs before it changes its role
 * (service/repl_prober.c decides, and only on a majority of the group): a peer
 * promoted under a newer epoch, or following another node, means this node
 * was replaced.  It is a question, not a vote: nothing here elects anyone.
 *
 * Authentication.  Every node of a group holds the same secret
 * (--peer-secret-file, at least PEERS_SECRET_MIN bytes).  The asker sends a
 * fresh nonce of 128 random bits (getrandom) with each question:
 *
 *     GET /replication/epoch?nonce=<32 hex digits>
 *
 * and the answering node signs
 *
 *     HMAC-SHA256(secret, nonce || "\n" || the exact bytes of its body)
 *
 * in the header `X-Tally-Peer-Signature: hmac-sha256=<64 hex digits>`.  The
 * asker recomputes it and compares in constant time.  An answer without the
 * header, with another signature (another secret, or an answer signed for
 * another nonce: replayed), or whose body is not a well-formed epoch answer
 * (an epoch above TALLY_EPOCH_MAX included) is no answer at all: `answered`
 * stays false and `error` says why.  The signature covers the answer, not
 * the asker: the bearer token (the `replicate` scope) is what a node
 * presents to be answered.
 *
 * Only configured URLs are asked, and no redirect is followed (a 3xx is no
 * answer); the environment's proxies (http_proxy, ...) are not used, so the
 * bearer token goes to the configured host and nowhere else.
 */
#ifndef TALLY_PEERS_H
#define TALLY_PEERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/repl.h"

#define PEERS_SECRET_MIN 32          /* bytes of --peer-secret-file: 256 bits, HMAC-SHA256's key size */
#define PEERS_SECRET_MAX 4096        /* a longer file is not a secret but a mistake */
#define PEERS_SIG_HEADER "X-Tally-Peer-Signature"
#define PEERS_SIG_SCHEME "hmac-sha256="
#define PEERS_SIG_LEN (sizeof(PEERS_SIG_SCHEME) - 1 + 64)   /* the header's value, without the NUL */
#define PEERS_NONCE_BYTES 16         /* 128 bits: 32 hex digits (CMD_REPL_NONCE_MIN) */

/* One peer's answer. */
typedef struct peer_answer {
    bool answered;               /* a 200 with a well-formed body, signed for this question */
    char role[16];               /* "primary", "replica", "fenced", "probing" */
    uint64_t epoch;              /* the highest epoch the peer knows (<= TALLY_EPOCH_MAX) */
    char primary[CMD_REPL_URL_MAX];  /* a replica's primary ("" unknown / not a replica) */
    char run[CMD_REPL_ID_MAX];   /* the peer's stream id (tells a node listed among its own peers) */
    char error[800];             /* why there is no answer */
} peer_answer_t;

/* The value of the signature header for `body`, answering `nonce`:
 * PEERS_SIG_SCHEME then 64 lowercase hex digits (out: PEERS_SIG_LEN + 1). */
void peers_sign(const uint8_t *key, size_t klen, const char *nonce, const void *body, size_t blen,
                char out[PEERS_SIG_LEN + 1]);

/* Reads an answer to the question carrying `nonce`: `sig` is the signature
 * header's value (NULL: absent), body the exact bytes received.  Fills *out
 * (answered, or error naming why not) and returns out->answered.  Pure: no
 * I/O (tests/fuzz/fuzz_peers drives it). */
bool peers_answer_read(const uint8_t *key, size_t klen, const char *nonce, const char *sig, const void *body,
                       size_t blen, peer_answer_t *out);

/* Asks `url` (a base URL) with bearer `token` ("" none) and a fresh nonce,
 * checking the answer with `key` (klen bytes), waiting at most timeout_ms,
 * or until *stop turns true (a shutdown).  Always fills *out. */
void peers_ask(const char *url, const char *token, const uint8_t *key, size_t klen, long timeout_ms,
               const _Atomic bool *stop, peer_answer_t *out);

#endif
