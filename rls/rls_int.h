/*
 * rls_int.h - what rls/'s files share: the loaded configuration as a tree
 * (config.c builds it from envoyproxy/ratelimit's YAML, decide.c walks it)
 * and the metrics' series (metrics.c).  The calls run one way:
 * decide.c -> metrics.c, decide.c -> config.c (the tree's readers).
 *
 *   rls_set
 *     domains[]        one per file (a `domain:` may appear in one file only)
 *       root           a node without key: its children are the top level
 *         children[]   `key` / `value` / rate_limit / descriptors, in file order
 */
#ifndef TALLY_RLS_INT_H
#define TALLY_RLS_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/throttle.h"
#include "rls/rls.h"

/* A configured limit (a descriptor's rate_limit). */
typedef struct rls_rule {
    bool unlimited;
    uint32_t requests_per_unit;
    rls_unit_t unit;              /* RLS_UNIT_UNKNOWN: only a `window` was given */
    char *name;                   /* NULL: none */
    char **replaces;
    size_t nreplaces;
    bool shadow;                  /* the descriptor's shadow_mode */
    bool detailed;                /* the descriptor's detailed_metric */
    throttle_algo_t algo;         /* tally: `algorithm` (fixed_window unless given) */
    int64_t period_s;             /* the unit's length, or tally's `window` */
    cal_spec_t cal;               /* tally: `calendar` (fixed_window; kind CAL_NONE: none), its zone and anchors */
    const char *domain;           /* its domain's name (the domain's) */
    char *full_key;               /* envoyproxy/ratelimit's stats key: domain.key_value.key2 (as configured) */
    size_t series;                /* its metrics series (metrics.c), set when the set is attached */
} rls_rule_t;

typedef struct rls_node rls_node_t;
struct rls_node {
    char *key;                    /* NULL: a domain's root */
    char *value;                  /* NULL: no `value` (one bucket per value the request sends) */
    char *final;                  /* key, or key_value: what envoyproxy/ratelimit looks up */
    bool wildcard;                /* final holds a '*' */
    bool share_threshold;         /* a wildcard's values share one bucket */
    rls_rule_t *rule;             /* NULL: no rate_limit here */
    rls_node_t *children;
    size_t nchildren;
};

typedef struct rls_domain {
    char *name;
    bool charge_all;              /* tally: `charge_all: true` beside `domain` */
    rls_node_t root;
} rls_domain_t;

struct rls_set {
    atomic_uint refs;
    rls_domain_t *domains;
    size_t ndomains;
    rls_rule_t **rules;           /* every rule, in load order (metrics) */
    size_t nrules;
};

/* The domain named `d`, or NULL. */
const rls_domain_t *rls_set_domain(const rls_set_t *s, const char *d, size_t dlen);

/* The length in seconds of a unit (envoyproxy/ratelimit's UnitToDivider:
 * a month is 30 days, a year 365); 0 for RLS_UNIT_UNKNOWN. */
int64_t rls_unit_seconds(rls_unit_t u);
/* "second", ... ; "unknown". */
const char *rls_unit_name(rls_unit_t u);

/* A rule's algorithm with requests_per_unit over period_s as core's
 * parameters: fixed_window, sliding_window and sliding_log count
 * requests_per_unit per period; gcra spaces them by period /
 * requests_per_unit with a burst of requests_per_unit; token_bucket holds
 * requests_per_unit tokens refilled over the period (rounded up to a
 * micro-token per second).  requests_per_unit >= 1. */
void rls_params(throttle_algo_t algo, uint32_t rpu, int64_t period_s, throttle_params_t *p);

/* ---------------------------------------------------------- metrics -- */

#define RLS_SERIES_MAX 1024        /* series kept (rules + detailed_metric values): bounds /metrics */

typedef struct rls_series {
    char *domain, *key;           /* NULL: a free slot */
    _Atomic uint64_t total_hits, over_limit, within_limit, shadow_mode;
} rls_series_t;

typedef struct rls_metrics rls_metrics_t;

rls_metrics_t *rls_metrics_new(void);
void rls_metrics_free(rls_metrics_t *m);
/* The series of (domain, key), made when there is room; RLS_SERIES_MAX
 * (the overflow series) once every slot is taken. */
size_t rls_metrics_series(rls_metrics_t *m, const char *domain, const char *key, size_t klen);
rls_series_t *rls_metrics_at(rls_metrics_t *m, size_t i);
void rls_metrics_render_into(rls_metrics_t *m, void *wbuf);

#endif
