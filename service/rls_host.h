/*
 * rls_host.h - the service's side of Envoy's rate limit service (rls/rls.h):
 * --rls-config loaded at start (a bad file refuses to start), reloaded by
 * SIGHUP and POST /admin/reload (a bad file is refused with a log line and
 * the set loaded before stays), the decisions' series in /metrics.  The
 * set is loaded and checked with or without --grpc-port; the gRPC server
 * takes the rls_t from rls_host_get().
 */
#ifndef TALLY_RLS_HOST_H
#define TALLY_RLS_HOST_H

#include <stdbool.h>
#include <stddef.h>

#include "core/codec.h"
#include "rls/rls.h"
#include "service/options.h"

/* Loads o->rls_config (when given) and makes the service's rls_t on srv;
 * false with a message.  Nothing to do without --rls-config. */
bool rls_host_start(cmd_server_t *srv, const tally_opts_t *o, char *err, size_t errlen);
/* The service's rls_t; NULL without --rls-config. */
rls_t *rls_host_get(void);
/* Reloads --rls-config; false with its message appended to the one err
 * may already hold ("; " between them), the set loaded before staying.
 * Logs the outcome with `who` asked. */
bool rls_host_reload(const char *who, char *err, size_t errlen);
/* Appends the decisions' Prometheus series (none without --rls-config). */
void rls_host_metrics(wbuf_t *out);
void rls_host_stop(void);

#endif
