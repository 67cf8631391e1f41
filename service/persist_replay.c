/* persist_replay.c - one journal record re-executed (service/persist.h):
 * an operation of the command table directly, an HTTP request - the records
 * of older kinds, which are HTTP requests - through the HTTP adapter, as it
 * served it.  The only file of persistence that knows the HTTP adapter. */
#include <stdio.h>
#include <string.h>

#include "api/request.h"
#include "api/router.h"
#include "cmd/def.h"
#include "service/log.h"
#include "service/persist_int.h"

static const char *replay_header(void *hctx, const char *name)
{
    (void)hctx;
    (void)name;
    return NULL;
}

void persist_replay_request(cmd_server_t *srv, const journal_req_t *q, unsigned gen, const char *where, size_t off)
{
    if (q->kind == JOURNAL_REC_COMMAND) {
        /* an operation of the command table, run directly (cmd/def.h) */
        cmd_err_t err;
        if (!cmd_replay(srv, q, gen, &err)) {
            const cmd_def_t *def = cmd_def_by_id(q->op);
            log_warn("%s offset %zu: %s replayed with an error: %s", where, off, def ? def->name : "an operation",
                     err.message);
        }
        return;
    }
    if (journalfmt_is_epoch(q))
        return;   /* not a request: the caller reads it (persist_open, the replica) */
    char ctype[256];
    size_t cl = q->ctype_len < sizeof(ctype) - 1 ? q->ctype_len : sizeof(ctype) - 1;
    memcpy(ctype, q->ctype, cl);
    ctype[cl] = '\0';
    api_req_t req;
    api_req_init(&req, (api_method_t)q->method, q->path, q->path_len, q->now_ns);
    req.query = q->query;
    req.query_len = q->query_len;
    req.ctype = cl ? ctype : NULL;
    req.body = q->body;
    req.body_len = q->body_len;
    req.header = replay_header;
    req.replay = true;
    req.gen = gen;
    api_resp_t resp;
    api_dispatch(srv, &req, &resp);
    if (resp.status >= 400)
        log_warn("%s offset %zu: %s %.*s replayed with status %d: %.*s", where, off, api_method_name(req.method),
                 (int)q->path_len, q->path, resp.status, (int)resp.len, resp.body ? resp.body : "");
    api_resp_release(&resp);
    api_req_release(&req);
}

bool persist_record_known(const journal_req_t *q)
{
    return q->kind != JOURNAL_REC_REQUEST || (q->method >= API_GET && q->method <= API_OTHER);
}

const char *persist_method_name(unsigned method)
{
    return method >= API_GET && method <= API_OTHER ? api_method_name((api_method_t)method) : NULL;
}

void persist_epoch_record(uint64_t epoch, int64_t now_ns, char *buf, journal_req_t *out)
{
    journalfmt_epoch_request(epoch, now_ns, API_POST, buf, out);   /* core does not know the API's numbers */
}
