/* fuzz_journal.c - the journal reader (journalfmt_scan, the one start-up and
 * `tallyd --check` use) on any bytes, in both places a file can sit, plus
 * the record decoder from offset 0, header or not, the epoch record's
 * reader on every record (never above TALLY_EPOCH_MAX; a file holding a
 * damaged one is refused), and, for a command record, its operation's
 * argument decoder (cmd/def.h: what replay runs before the operation). */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cmd/def.h"
#include "core/persist_fmt.h"

/* ud: non-NULL when called by journalfmt_scan, which refuses a file holding
 * a damaged epoch record before passing it on. */
static const char *touch(void *ud, size_t off, const journal_req_t *q)
{
    (void)off;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < q->path_len; i++)
        sink ^= (uint8_t)q->path[i];
    for (size_t i = 0; i < q->body_len; i++)
        sink ^= q->body[i];
    uint64_t epoch = 0;   /* a promotion's epoch record, as replay reads it */
    bool parsed = journalfmt_epoch_parse(q, &epoch);
    if (parsed && (!journalfmt_is_epoch(q) || epoch > TALLY_EPOCH_MAX))
        abort();          /* only an epoch record parses as one, and never above the largest epoch */
    if (ud && journalfmt_is_epoch(q) && !parsed)
        abort();          /* the scan stops at a damaged one */
    sink ^= (uint8_t)epoch;
    const cmd_def_t *def = q->kind == JOURNAL_REC_COMMAND ? cmd_def_by_id(q->op) : NULL;
    if (def && def->decode) {
        alignas(max_align_t) unsigned char args[CMD_ARGS_MAX];
        rbuf_t in = rbuf_make(q->body, q->body_len);
        const char *why;
        if (def->decode(&in, args, &why))
            sink ^= args[0];
    }
    (void)sink;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    journal_scan_t s;
    static int from_scan;
    if (journalfmt_scan(data, size, touch, &from_scan, &s)) {
        if (s.data_end > size || s.data_end + s.tail_bytes > size)
            abort();   /* the scan never reports beyond the bytes */
        journal_scan_t older = s;
        journalfmt_check_place(&s, size, true);
        journalfmt_check_place(&older, size, false);
    } else if (s.bad_off > size || !s.why) {
        abort();       /* damage is always located inside the file and named */
    }
    size_t o = 0;
    while (o < size) {
        journal_req_t q;
        size_t used = 0;
        const char *why;
        if (journalfmt_parse_record(data + o, size - o, &q, &used, &why) != PARSE_OK)
            break;
        touch(NULL, o, &q);
        o += used;
    }
    return 0;
}
