/* fuzz_journal.c - the journal decoder: header and framed records. */
#include <stdint.h>

#include "core/persist_fmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    journal_header_t h;
    const char *why;
    size_t off = 0;
    if (journalfmt_parse_header(data, size, &h, &why))
        off = JOURNAL_HEADER_SIZE;
    /* records are also parsed from the start, header or not */
    for (int pass = 0; pass < 2; pass++) {
        size_t o = pass ? 0 : off;
        while (o < size) {
            journal_req_t q;
            size_t used = 0;
            if (journalfmt_parse_record(data + o, size - o, &q, &used, &why) != PARSE_OK)
                break;
            volatile uint8_t sink = 0;
            for (size_t i = 0; i < q.path_len; i++)
                sink ^= (uint8_t)q.path[i];
            for (size_t i = 0; i < q.body_len; i++)
                sink ^= q.body[i];
            (void)sink;
            o += used;
        }
    }
    return 0;
}
