/* fronts.c - see fronts.h. */
#include <stdio.h>
#include <string.h>

#include "service/fronts.h"
#include "service/grpc_server.h"
#include "service/log.h"
#include "service/resp_server.h"

static resp_server_t *resp;
static grpc_server_t *grpc;

bool fronts_start(const tally_opts_t *o, cmd_server_t *srv, const fronts_hooks_t *h, char *at, size_t atlen,
                  char *err, size_t errlen)
{
    at[0] = '\0';
    if (o->resp_port >= 0) {
        if (!(resp = resp_server_start(o, srv, h, err, errlen)))
            return false;
        snprintf(at, atlen, "; Redis protocol on %s:%d%s", o->bind, resp_server_port(resp), h->tls ? " over TLS" : "");
    }
    if (o->grpc_port >= 0) {
        if (!(grpc = grpc_server_start(o, srv, h, err, errlen))) {
            fronts_stop();
            return false;
        }
        size_t used = strlen(at);
        snprintf(at + used, atlen - used, "; gRPC on %s:%d%s", o->bind, grpc_server_port(grpc),
                 h->tls ? " over TLS (ALPN h2)" : " (HTTP/2)");
    }
    return true;
}

void fronts_set_ready(bool ready)
{
    if (resp)
        resp_server_set_ready(resp, ready);
    if (grpc)
        grpc_server_set_ready(grpc, ready);
}

void fronts_set_loading(bool loading)
{
    if (resp)
        resp_server_set_loading(resp, loading);
    if (grpc)
        grpc_server_set_loading(grpc, loading);
}

void fronts_quiesce(void)
{
    if (resp)
        resp_server_quiesce(resp);
    if (grpc)
        grpc_server_quiesce(grpc);
}

bool fronts_drain(int seconds)
{
    if (!grpc || grpc_server_drain(grpc, seconds))
        return true;
    log_warn("gRPC connections still open after %d s; closing them", seconds);
    return false;
}

void fronts_stop(void)
{
    resp_server_stop(resp);
    resp = NULL;
    grpc_server_stop(grpc);
    grpc = NULL;
}
