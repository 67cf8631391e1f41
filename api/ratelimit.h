/*
 * ratelimit.h - the rate-limiting family of the API: named policies from a
 * config file, key templates, and the engine that runs one or several
 * limiter decisions atomically (api/throttle.c, api/hook.c, api/policy.c).
 *
 * Policies file (--config FILE, JSON; reloaded on SIGHUP):
 *
 *   {"policies": {
 *      "api":   {"algorithm": "gcra", "max_burst": 15, "count_per_period": 30, "period": 60,
 *                "key": "{header:X-Api-Key}"},
 *      "login": {"algorithm": "sliding_log", "max_count": 5, "period": 60,
 *                "key": "{ip}:{path}", "deny_status": 403, "shadow": true}}}
 *
 *   algorithm + its parameters   as in POST /throttle (default gcra); a
 *                fixed_window's calendar, time_zone, week_start, anchor_day too;
 *                or "concurrency" with "limit" (1..100 000) and "ttl_ms" (or
 *                "ttl" in seconds): a limit on requests in flight, whose hook
 *                acquires a lease (cmd/lease.h) and, given X-Tally-Release:
 *                <id>, releases it (api/lease.c, rl_lease_hook)
 *   key          template for the hook and key-less requests (default "{ip}")
 *   prefix       prepended to every key of the policy (default "<name>:"), so
 *                two policies never share a counter
 *   overrides    {"tenant": {limits}, ...}: limits (algorithm and parameters, the
 *                policy's algorithm) that replace the defaults for the keys
 *                whose template value is that tenant; live overrides set
 *                through PUT /policies/{policy}/overrides/{tenant} (state:
 *                api/override.c, cmd/override.h) replace these in turn
 *   shadow       decide and count, but always allow (default false)
 *   reservation_ttl, on_expiry   a reservation's defaults (docs/rate-limiting.md:
 *                "Reserve, settle, refund, probe"): 60 seconds, "keep"
 *   deny_status  status of a limited hook request (default 429; 403 for nginx
 *                auth_request; any 4xx that tally does not answer errors with,
 *                i.e. not 400, 401, 404, 405, 409, 413, 414 or 415, so that an
 *                error is never taken for "limited")
 *
 * Key templates: literal text with placeholders.
 *   {header:NAME}  that request header (empty counts as absent)
 *   {ip}           the client's address: the peer's, or, when the peer is in
 *                  --trusted-proxies, the rightmost X-Forwarded-For address not in
 *                  them (else X-Real-IP) - core/cidr.h; forged headers change nothing
 *   {path}         X-Forwarded-Uri (Traefik), else X-Original-URI (nginx), else the
 *                  hook path after /hook/{policy}; without the query string
 *   {method}       X-Forwarded-Method, else X-Original-Method, else the method
 *   {host}         X-Forwarded-Host, else Host
 *   {a|b|...}      the first of these sources that is present, e.g. {header:X-Api-Key|ip}
 * A template whose source is absent (no alternative present) is refused with
 * 400 naming the missing header: the request is not counted under a shared
 * fallback key by accident.  Write {header:X-Api-Key|ip} to fall back.
 */
#ifndef TALLY_API_RATELIMIT_H
#define TALLY_API_RATELIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "core/codec.h"
#include "core/throttle.h"

#define POLICY_NAME_MAX 64        /* policy names: [A-Za-z0-9_.-], in URLs and metric labels */
#define POLICY_METRICS_MAX 100    /* policies with their own labels in the per-limit metric; the rest: "other" */

/* ------------------------------------------------------------------------ */
/* Policies (service-facing)                                                */
/* ------------------------------------------------------------------------ */

/* Named rate-limit policies. */
typedef struct api_policies api_policies_t;

/* Creates an empty registry; NULL on allocation failure. */
api_policies_t *api_policies_create(void);
void api_policies_free(api_policies_t *reg);
/* Parses a policies file and, when it is valid, replaces the current
 * policies (requests in flight finish with the old ones; counters and
 * metrics of policies that keep their name carry over).  On error returns
 * false with "line L: reason" in err and changes nothing. */
bool api_policies_load(api_policies_t *reg, const char *text, size_t len, size_t *count, char *err,
                       size_t errlen);
/* Appends tally_ratelimit_decisions_total{policy,decision} lines. */
void api_policies_metrics(api_policies_t *reg, wbuf_t *out);

/* ------------------------------------------------------------------------ */
/* Policies (inside the API)                                                */
/* ------------------------------------------------------------------------ */

typedef struct policy_stats {
    char name[POLICY_NAME_MAX + 1];
    _Atomic uint64_t allowed, limited, shadow_limited;
    _Atomic uint64_t by_limit[3][3];   /* [policy_limit_t][policy_decision_t] */
} policy_stats_t;

typedef struct tmpl_part tmpl_part_t;

/* A tenant's limits from the policies file ("overrides"). */
typedef struct policy_override {
    char *tenant;
    size_t tlen;
    throttle_params_t params;
} policy_override_t;

typedef struct policy {
    char name[POLICY_NAME_MAX + 1];
    throttle_params_t params;
    tmpl_part_t *parts;
    int nparts;
    char *prefix;
    size_t prefix_len;
    bool shadow;
    int deny_status;
    policy_override_t *overrides;   /* the file's, sorted by tenant */
    size_t noverrides;
    policy_stats_t *stats;
    int64_t reservation_ttl_s;   /* a reservation's ttl when the request gives none (default 60) */
    uint8_t on_expiry;           /* throttle_expiry_t: its expiry when the request gives none (default keep) */
} policy_t;

/* Which limits a decision ran by: the policy's, the file's override for
 * the tenant, or the live one set through the API (which wins). */
typedef enum { POLICY_LIMIT_DEFAULT = 0, POLICY_LIMIT_FILE, POLICY_LIMIT_API } policy_limit_t;
#define POLICY_LIMIT_COUNT 3
/* "default", "file-override", "override": the name a refusal and the metrics give. */
const char *policy_limit_name(policy_limit_t l);

/* The limits of `tenant` (the key's part after the policy's prefix) under
 * policy p into *out: the live override `api` (NULL: none; one of another
 * algorithm, left by a reload that changed the policy's, does not apply),
 * else the file's override, else the policy's defaults. */
policy_limit_t policy_limits(const policy_t *p, const char *tenant, size_t tlen, const throttle_params_t *api,
                             throttle_params_t *out);
/* A live override's stored text (canonical JSON holding its "algorithm")
 * read back as parameters; false for text that does not read.  The
 * signature of core/override.h's override_parse_fn (ud unused). */
bool policy_override_text(const char *text, size_t len, throttle_params_t *out, void *ud);
/* Reads an override's limits: a JSON object of the policies file's limit
 * members ("algorithm", optional, must be the policy's, and its
 * parameters); sets "algorithm" in o when absent, so that o is the
 * override's whole form.  True with *out; false with *err naming the
 * member. */
bool policy_override_parse(const policy_t *p, json_t *o, throttle_params_t *out, api_err_t *err);

/* The policies are read under a shared lock, held from lookup until the
 * request is answered (a reload waits for it). NULL-safe. */
void policies_read_lock(api_policies_t *reg);
void policies_read_unlock(api_policies_t *reg);
const policy_t *policy_find(api_policies_t *reg, const char *name);

/* What a decision counts as in the metrics. */
typedef enum { POLICY_ALLOWED, POLICY_LIMITED, POLICY_SHADOW_LIMITED } policy_decision_t;
void policy_count(const policy_t *p, policy_limit_t limit, policy_decision_t d);

/* Builds the policy's key (prefix + template) for this request into out
 * (KS_KEY_MAX + 1 bytes).  `rest` is the hook path after /hook/{policy}
 * (NULL outside the hook).  False with *err when a source is absent or the key
 * is too long. */
bool policy_key(const policy_t *p, const api_req_t *req, const char *rest, size_t rest_len, char *out,
                size_t *len, api_err_t *err);

/* A concurrency policy's limits ride in throttle_params_t, so that the
 * file's and the live overrides keep one form: algo RL_ALGO_CONCURRENCY
 * (outside core's throttle_algo_t values: no limiter ever sees it; the
 * decision operations are the leases', never a throttle's), u.win.max_count
 * the limit (1..LEASE_MAX_LIMIT), u.win.period_ns the lease ttl. */
#define RL_ALGO_CONCURRENCY ((throttle_algo_t)64)
#define RL_CONCURRENCY_NAME "concurrency"
static inline bool rl_is_concurrency(const throttle_params_t *p) { return p->algo == RL_ALGO_CONCURRENCY; }
static inline int64_t rl_lease_limit(const throttle_params_t *p) { return p->u.win.max_count; }
static inline int64_t rl_lease_ttl_ms(const throttle_params_t *p) { return p->u.win.period_ns / NS_PER_MS; }

/* The hook of a concurrency policy (called by api/hook.c with the policies
 * read-locked): acquires a lease on the key the template builds, or, given
 * X-Tally-Release: <id>, releases that lease (api/lease.c). */
void rl_lease_hook(api_server_t *srv, api_req_t *req, api_resp_t *resp, const policy_t *p, const char *rest,
                   size_t rest_len);

/* True for a status a limited request may be answered with (see deny_status). */
bool rl_deny_status_ok(int64_t status);

/* Reads "algorithm" (default gcra) and that algorithm's parameters from f (a
 * JSON object or a query: api_fields_t); a parameter of another algorithm is
 * refused, naming it. */
bool rl_params_parse(const api_fields_t *f, throttle_params_t *p, api_err_t *err);
/* rl_params_parse for a policy's limits (the file's, its overrides, live
 * overrides): the rate algorithms, and "concurrency". */
bool rl_policy_params_parse(const api_fields_t *f, throttle_params_t *p, api_err_t *err);
/* True if `name` is one of the algorithm parameter names. */
bool rl_is_param_name(const char *name);

/* ------------------------------------------------------------------------ */
/* The engine                                                               */
/* ------------------------------------------------------------------------ */

typedef struct rl_item {
    const policy_t *policy;      /* NULL for a request with explicit parameters */
    policy_limit_t limit;        /* with a policy: whose limits p are */
    const char *key;             /* the full key (policy prefix included) */
    size_t klen;
    char *key_buf;               /* owned storage of key when it was built */
    throttle_params_t p;
    int64_t quantity;
    bool shadow;                 /* decide but always allow */
    bool problem;                /* a refusal is answered as application/problem+json (set by rl_run:
                                    the client's Accept asks for it) */
    rl_result_t r;               /* filled by rl_run */
} rl_item_t;

/* Resolves one request ({"key", params...} or {"policy", "key"?}) from its
 * fields: a JSON object, or the query of GET /throttle/{key}, which give the
 * same answers and errors.  `path_key` (may be NULL) is the key from the URL,
 * used instead of a "key" member.  `rest` as for policy_key.  `fields_checked`: the caller already
 * refused members that are not request fields.  Call with the policies
 * read-locked. */
bool rl_item_parse(api_server_t *srv, const api_req_t *req, const api_fields_t *f, const char *path_key,
                   size_t path_klen, const char *rest, size_t rest_len, bool fields_checked, rl_item_t *it,
                   api_err_t *err);
/* What a flat source (api_fields_t of kind API_FIELDS_FLAT) names, in one
 * pass over its members: a policy, a batch.  False (and both false) for a
 * source of another kind, which may name anything.  The policies need to
 * be read-locked only for a request that may name one: a lock and its
 * release cost about 70 instructions of a decision's few thousand. */
bool rl_fields_name(const api_fields_t *f, bool *policy, bool *requests);
/* rl_item_parse of fields that rl_fields_name found naming no policy, the
 * fields checked already: no policies are looked at (nor need a lock). */
bool rl_item_parse_unnamed(const api_req_t *req, const api_fields_t *f, const char *path_key, size_t path_klen,
                           rl_item_t *it, api_err_t *err);
/* The item of a request decided by policy `p` alone (the gateway hook): the
 * key built by the policy's template from the request into `room` (KS_KEY_MAX
 * + 1 bytes, the caller's: no allocation), quantity 1 - what rl_item_parse
 * makes of {"policy": p's name}, without the tree.  Call with the policies
 * read-locked. */
bool rl_item_of_policy(const policy_t *p, const api_req_t *req, const char *rest, size_t rest_len, char *room,
                       rl_item_t *it, api_err_t *err);
void rl_item_release(rl_item_t *it);
/* Sets the item's key: the policy's prefix (plen may be 0) then key,
 * checked by the key rules; false with *err set. */
bool rl_item_key(rl_item_t *it, const char *prefix, size_t plen, const char *key, size_t klen, api_err_t *err);

/* Decides every item atomically under the locks of all their keys: when all
 * allow (a shadow item always does), every item is recorded; otherwise none
 * is.  One item is its algorithm's decision operation, several (or `batch`)
 * THROTTLE.BATCH (cmd/throttle.h), journaled with the resolved keys and
 * parameters.  Counts policy metrics.  Returns false with an error response
 * (nothing changed); true with each item's r filled and *all_allowed set. */
bool rl_run(api_server_t *srv, const api_req_t *req, api_resp_t *resp, rl_item_t *items, size_t n,
            bool batch, bool *all_allowed);

/* The decision of one item as JSON body + RateLimit headers. */
void rl_answer(api_resp_t *resp, int status, const rl_item_t *it);
/* The decision of a batch (all allowed or not): the deciding item's fields,
 * every item's in "results", the deciding item's headers. */
void rl_answer_batch(api_resp_t *resp, const rl_item_t *items, size_t n, bool all);

#endif
