/*
 * rls.h - Envoy's rate limit service, protocol-neutral: envoyproxy/ratelimit's
 * configuration (its YAML, read as it is: domains, nested descriptors,
 * rate_limit {unit, requests_per_unit, name}, unlimited, shadow_mode,
 * replaces, detailed_metric, wildcard values; tally's extensions: a rule's
 * algorithm and window) and the ShouldRateLimit decision on the command
 * layer (each matched descriptor becomes a decision on its key, all of a
 * request's decisions one THROTTLE.BATCH: all or nothing by default).
 *
 * The gRPC front-end (grpc/, service/grpc_server.c) translates Envoy's
 * protobuf messages to rls_request_t and rls_result_t back; nothing here
 * knows HTTP/2 or protobuf.  The numbering of units and codes is Envoy's
 * (envoy.service.ratelimit.v3 / envoy.config.ratelimit.v3), so a
 * front-end copies them across.
 *
 * Lifetimes: an rls_set_t is immutable once loaded and reference-counted
 * (a reload swaps the current set; requests in flight keep theirs).
 * Strings in a request point into the front-end's decoded message; strings
 * in a result point into the set the decision used (held by the result
 * until rls_result_free) or into the result itself.
 */
#ifndef TALLY_RLS_H
#define TALLY_RLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/cmd.h"

/* envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit */
typedef enum rls_unit {
    RLS_UNIT_UNKNOWN = 0,
    RLS_UNIT_SECOND = 1,
    RLS_UNIT_MINUTE = 2,
    RLS_UNIT_HOUR = 3,
    RLS_UNIT_DAY = 4,
    RLS_UNIT_MONTH = 5,
    RLS_UNIT_YEAR = 6,
    RLS_UNIT_WEEK = 7,
} rls_unit_t;

/* envoy.service.ratelimit.v3.RateLimitResponse.Code */
typedef enum rls_code {
    RLS_CODE_UNKNOWN = 0,
    RLS_CODE_OK = 1,
    RLS_CODE_OVER_LIMIT = 2,
} rls_code_t;

typedef struct rls_str {
    const char *p;
    size_t len;
} rls_str_t;

/* A descriptor entry (envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry). */
typedef struct rls_entry {
    rls_str_t key, value;
} rls_entry_t;

/* A limit: the configured one, or a request's override
 * (RateLimitDescriptor.RateLimitOverride: requests_per_unit, unit). */
typedef struct rls_limit {
    rls_str_t name;              /* the rule's `name` (empty: none) */
    uint32_t requests_per_unit;
    rls_unit_t unit;
} rls_limit_t;

typedef struct rls_descriptor {
    const rls_entry_t *entries;
    size_t nentries;
    bool has_limit;              /* the request's override of the configured limit */
    rls_limit_t limit;
    bool has_hits_addend;        /* RateLimitDescriptor.hits_addend (a wrapper: set, even to 0) */
    uint64_t hits_addend;
} rls_descriptor_t;

typedef struct rls_request {
    rls_str_t domain;
    const rls_descriptor_t *descriptors;
    size_t n;
    uint32_t hits_addend;        /* RateLimitRequest.hits_addend: 0 means 1 */
    bool loading;                /* the front-end's gate says the keyspace is being replaced
                                    (cmd_admission_t.loading; as redis_run_handled's enter hook) */
} rls_request_t;

/* One descriptor's answer (RateLimitResponse.DescriptorStatus). */
typedef struct rls_status {
    rls_code_t code;
    bool has_limit;              /* current_limit present (no rule matched, or unlimited: absent) */
    rls_limit_t current_limit;
    uint32_t limit_remaining;
    bool has_reset;              /* duration_until_reset present */
    int64_t reset_ms;
} rls_status_t;

/* A header for the client (response_headers_to_add) or upstream. */
typedef struct rls_header {
    char *name, *value;
} rls_header_t;

typedef struct rls_result {
    rls_code_t overall;
    rls_status_t *statuses;      /* n, in the request's order */
    size_t n;
    rls_header_t *headers;       /* RateLimit / RateLimit-Policy (+ x-ratelimit-* when configured) */
    size_t nheaders;
    void *held;                  /* the set the decision used (rls_result_free releases it) */
} rls_result_t;

typedef struct rls_set rls_set_t;

/* Loads envoyproxy/ratelimit's configuration: a YAML file, or every
 * *.yaml / *.yml file of a directory (its runtime layout).  NULL with a
 * message naming the file, line and field on any error. */
rls_set_t *rls_set_load(const char *path, char *err, size_t errlen);
/* The same for one file's text already read (`name` names it in messages). */
rls_set_t *rls_set_parse(const char *name, const void *text, size_t len, char *err, size_t errlen);
void rls_set_retain(rls_set_t *s);
void rls_set_release(rls_set_t *s);
/* What a set holds (for the log line of a load or reload). */
size_t rls_set_domains(const rls_set_t *s);
size_t rls_set_rules(const rls_set_t *s);

/* The service: the current set (swapped by reloads), the command server
 * its decisions run on, its options. */
typedef struct rls rls_t;
typedef struct rls_options {
    bool charge_all;             /* envoyproxy/ratelimit's behaviour: every matched descriptor charged even
                                    when another is over its limit (default: all or nothing) */
    bool ratelimit_headers;      /* x-ratelimit-limit/-remaining/-reset as envoyproxy/ratelimit's
                                    RESPONSE_HEADERS_ENABLED (the IETF fields are always given) */
} rls_options_t;

/* Takes the caller's reference to `initial`.  The service makes its one
 * rls_t at start when --rls-config is given (service/rls_host.h:
 * rls_host_get() returns it, NULL without --rls-config), before the
 * listeners open: the gRPC server takes it from there; SIGHUP and POST
 * /admin/reload swap its set (rls_swap). */
rls_t *rls_new(cmd_server_t *srv, const rls_options_t *opt, rls_set_t *initial);
void rls_free(rls_t *r);
/* Replaces the current set (a reload; the old one stays with requests in
 * flight).  Takes the caller's reference to s. */
void rls_swap(rls_t *r, rls_set_t *s);
/* The current set, retained (release it), or NULL. */
rls_set_t *rls_current(rls_t *r);
/* Appends the decisions' Prometheus series (tally_rls_hits_total by domain,
 * rule and result; detailed_metric rules per value; at most 1024 series). */
void rls_metrics_render(rls_t *r, wbuf_t *out);

/* ShouldRateLimit.  ctx: a command context the front-end made for the
 * caller (cmd_ctx_init: token, time, front; the front-end ends it with
 * cmd_ctx_end after the answer's journal wait, as redis_run_handled does);
 * the decision calls cmd_admit once (access class ratelimit, the first
 * descriptor key: every key of a request carries the {domain} hash tag, so
 * they share its cluster slot) and cmd_call(CMD_THROTTLE_BATCH) once.  A
 * request with nothing to decide on state (no rule matched, unlimited) is
 * admitted by its access class alone.
 * true with *res filled (release with rls_result_free); false with
 * ctx->err set: a request Envoy's service answers with a gRPC error
 * (no domain, an empty descriptor list, a key refused). */
bool rls_should_rate_limit(rls_t *r, cmd_ctx_t *ctx, const rls_request_t *q, rls_result_t *res);
void rls_result_free(rls_result_t *res);

#endif
