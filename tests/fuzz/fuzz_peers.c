/*
 * fuzz_peers.c - what a node reads of its peers and of its own EPOCH file:
 * peers_answer_read (service/peers.h: a signature header, then a JSON
 * answer) and repl_epoch_parse (service/repl.h), on hostile bytes.
 *
 * Input: the nonce, a newline, the signature header's value, a newline,
 * then the answer's body.  The answer is read twice: with the signature
 * given (almost never right: it must count as no answer), and signed
 * correctly, so that the JSON reader behind the check is reached.  Every
 * answer taken must hold what the reader promises (a known role, an epoch
 * of at most TALLY_EPOCH_MAX, a stream id, strings that fit); every refusal
 * must say why.  The whole input is also an EPOCH file's text and an epoch
 * record's body: both readers refuse anything above TALLY_EPOCH_MAX.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/persist_fmt.h"
#include "service/peers.h"
#include "service/repl.h"

static const uint8_t KEY[] = "fuzz_peers: a group secret of 32 bytes or more";

static void check(const peer_answer_t *a)
{
    if (!a->answered) {
        if (!a->error[0] || !memchr(a->error, '\0', sizeof(a->error)))
            abort();   /* a refusal says why */
        return;
    }
    if (a->epoch > TALLY_EPOCH_MAX || !memchr(a->role, '\0', sizeof(a->role)) ||
        !memchr(a->primary, '\0', sizeof(a->primary)) || !memchr(a->run, '\0', sizeof(a->run)) || !a->run[0])
        abort();
    if (strcmp(a->role, "primary") && strcmp(a->role, "replica") && strcmp(a->role, "fenced") &&
        strcmp(a->role, "probing"))
        abort();
    size_t l = strlen(a->primary);
    if (l && a->primary[l - 1] == '/')
        abort();   /* a primary's URL is compared without its trailing '/' */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the EPOCH file and the epoch record agree on what an epoch is */
    uint64_t file = 0, rec = 0;
    bool in_file = repl_epoch_parse((const char *)data, size, &file);
    if (in_file && file > TALLY_EPOCH_MAX)
        abort();
    char buf[JOURNAL_EPOCH_BUF];
    journal_req_t q;
    journalfmt_epoch_request(0, 0, 2, buf, &q);
    q.body = data;
    q.body_len = size;
    bool in_record = journalfmt_epoch_parse(&q, &rec);
    if (in_record && (rec > TALLY_EPOCH_MAX || !in_file || rec != file))
        abort();

    const uint8_t *nl1 = memchr(data, '\n', size);
    if (!nl1)
        return 0;
    const uint8_t *nl2 = memchr(nl1 + 1, '\n', size - (size_t)(nl1 + 1 - data));
    if (!nl2)
        return 0;
    char *nonce = strndup((const char *)data, (size_t)(nl1 - data));
    char *sig = strndup((const char *)nl1 + 1, (size_t)(nl2 - nl1 - 1));
    const uint8_t *body = nl2 + 1;
    size_t blen = size - (size_t)(body - data);
    peer_answer_t a;
    bool taken = peers_answer_read(KEY, sizeof(KEY) - 1, nonce, sig[0] ? sig : NULL, body, blen, &a);
    if (taken != a.answered)
        abort();
    check(&a);
    /* the same answer, signed as a peer holding the secret signs it */
    char good[PEERS_SIG_LEN + 1];
    peers_sign(KEY, sizeof(KEY) - 1, nonce, body, blen, good);
    if (strlen(good) != PEERS_SIG_LEN)
        abort();
    peers_answer_read(KEY, sizeof(KEY) - 1, nonce, good, body, blen, &a);
    check(&a);
    /* a signature for another nonce never counts */
    char *other = malloc(strlen(nonce) + 2);
    memcpy(other, nonce, strlen(nonce));
    memcpy(other + strlen(nonce), "0", 2);
    if (peers_answer_read(KEY, sizeof(KEY) - 1, other, good, body, blen, &a))
        abort();
    free(other);
    free(nonce);
    free(sig);
    return 0;
}
