/*
 * dump.h - RedisBloom's SCANDUMP / LOADCHUNK over HTTP, for the filters
 * that have them (/bloom, /cuckoo): the adapter of the operations
 * BF.SCANDUMP, BF.LOADCHUNK, CF.SCANDUMP and CF.LOADCHUNK (cmd/filterdump.h
 * has their contract).
 *
 *   GET  /<family>/{key}/dump?cursor=C   -> 200 application/octet-stream
 *        the chunk's bytes; header Tally-Cursor: the chunk's cursor
 *   POST /<family>/{key}/load?cursor=C   <- application/octet-stream chunk
 *        -> 200 {"loaded":<bytes>}
 *
 * The bytes are RedisBloom's, unchanged (core/bloom.h and core/cuckoo.h
 * describe the format), so `BF.SCANDUMP` output loads here and a dump
 * taken here loads with `BF.LOADCHUNK`.  The cursor is RedisBloom's
 * iterator: dump at 0 answers the header with cursor 1; dump at C answers
 * the next chunk and its cursor, which is both what to load the chunk
 * with and where the next dump starts; cursor 0 and an empty body mean
 * the end.  Chunks here are at most API_DUMP_CHUNK bytes, so that each fits
 * the default --max-body when loaded back; RedisBloom cuts at 16 MiB, and
 * LOADCHUNK accepts any cut that stays inside one sub-filter, so a larger
 * RedisBloom chunk (cursor C, n bytes) may be sent in pieces: the piece of
 * m bytes at offset o of the chunk goes with cursor C - n + o + m.
 *
 * Load follows BF.LOADCHUNK: the header (cursor 1) creates the filter at
 * a missing key (404 for any other cursor there); on an existing filter
 * every chunk is written in place, and one that does not fit a
 * sub-filter's array is refused (400, nothing written).  The bytes are
 * untrusted: core validates the header completely (tests/fuzz/
 * fuzz_scandump); the filter it describes may not pass --max-value-size
 * (400), and room is made for it under --maxmemory before it is built
 * (507).  A load's record holds the key, the cursor and the chunk, so
 * replay rebuilds the same bytes.
 */
#ifndef TALLY_API_DUMP_H
#define TALLY_API_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/request.h"
#include "cmd/def.h"
#include "cmd/filterdump.h"

#define API_DUMP_CHUNK CMD_DUMP_CHUNK   /* half the default --max-body */

/* The bodies of GET .../dump and POST .../load, running `op` (a family's
 * SCANDUMP or LOADCHUNK: cmd/filterdump.h's arguments and result). */
void api_dump_serve(api_server_t *srv, api_req_t *req, api_resp_t *resp, const cmd_def_t *op);
void api_load_serve(api_server_t *srv, api_req_t *req, api_resp_t *resp, const cmd_def_t *op);

/* Sets a response body that the response takes over (malloc'd; NULL for
 * an empty one): api_body without the copy. */
void api_body_take(api_resp_t *resp, int status, const char *ctype, void *body, size_t len);

#endif
