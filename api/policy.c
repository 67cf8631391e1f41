/*
 * policy.c - named rate-limit policies: the config file (parsed here, read by
 * service/app_files.c), key templates, algorithm parameters shared by
 * requests and policies, and per-policy decision counters.  See
 * api/ratelimit.h for the file format and the template language.
 *
 * Concurrency: the current set of policies is read under a rwlock held for
 * the whole request that uses it; a reload builds the new set outside the lock
 * and swaps it in under the write lock, so requests see either the old or the
 * new policies, never a mix.  Counters live in a table that only grows (one
 * entry per policy name ever loaded), so a reload keeps them.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/params.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/ratelimit.h"
#include "cmd/throttle.h"
#include "cmd/zone.h"
#include "core/lease.h"
#include "core/override.h"
#include "core/urlpath.h"

bool rl_deny_status_ok(int64_t s)
{
    static const int errors[] = { 400, 401, 404, 405, 409, 413, 414, 415 };
    if (s < 400 || s > 499)
        return false;
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (s == errors[i])
            return false;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Algorithm parameters                                                     */
/* ------------------------------------------------------------------------ */

static const char *const all_params[] = { "max_burst", "count_per_period", "period", "max_count", "capacity",
                                          "refill_rate", "calendar", "time_zone", "week_start", "anchor_day", NULL };
static const char *const gcra_params[] = { "max_burst", "count_per_period", "period", NULL };
static const char *const count_params[] = { "max_count", "period", NULL };
static const char *const fixed_params[] = { "max_count", "period", "calendar", "time_zone", "week_start", "anchor_day",
                                            NULL };
static const char *const bucket_params[] = { "capacity", "refill_rate", NULL };
/* A concurrency policy's: not among all_params, since a request's "ttl"
 * (a reservation's) is not a limit's parameter; only a policy's limits
 * (params_parse with policy) know them. */
static const char *const lease_params[] = { "limit", "ttl_ms", "ttl", NULL };

/* A policy's algorithm's name: core's, or "concurrency". */
static const char *algo_name(throttle_algo_t a)
{
    return a == RL_ALGO_CONCURRENCY ? RL_CONCURRENCY_NAME : throttle_algo_name(a);
}

/* A concurrency policy's "limit" and "ttl_ms" (or "ttl" in seconds, as
 * /lease takes them: exactly one). */
static bool lease_parse(const api_fields_t *f, throttle_params_t *p, api_err_t *err)
{
    int64_t limit = 0, ttl_ms = 0, ttl_s = 0;
    bool has_ms = false, has_s = false;
    if (!api_fields_int(f, "limit", true, 1, LEASE_MAX_LIMIT, &limit, NULL, err) ||
        !api_fields_int(f, "ttl_ms", false, 1, LEASE_MAX_TTL_MS, &ttl_ms, &has_ms, err) ||
        !api_fields_int(f, "ttl", false, 1, LEASE_MAX_TTL_MS / 1000, &ttl_s, &has_s, err))
        return false;
    if (has_ms && has_s) {
        api_err_set(err, API_E_BAD_REQUEST, "ttl_ms", "give 'ttl' or 'ttl_ms', not both");
        return false;
    }
    if (!has_ms && !has_s) {
        api_err_set(err, API_E_BAD_REQUEST, "ttl_ms",
                    "a concurrency policy needs 'ttl_ms' (or 'ttl' in seconds): how long an unreleased lease lives");
        return false;
    }
    p->u.win.max_count = limit;
    p->u.win.period_ns = (has_s ? ttl_s * 1000 : ttl_ms) * NS_PER_MS;
    return true;
}

bool rl_is_param_name(const char *name) { return api_name_listed(all_params, name); }

/* A fixed_window's calendar: "calendar" (day, week, month, quarter, year),
 * "time_zone" (an IANA name, default UTC), "week_start" (week only, default
 * monday), "anchor_day" (month, quarter and year, default 1); no "period". */
static bool calendar_parse(const api_fields_t *f, throttle_params_t *p, api_err_t *err)
{
    cal_spec_t *c = &p->cal;
    const char *s = NULL;
    size_t n = 0;
    if (!api_fields_string(f, "calendar", false, &s, &n, err))
        return false;
    if (!s) {
        const char *given = api_fields_get(f, "time_zone", &(api_field_t){ 0 })    ? "time_zone"
                            : api_fields_get(f, "week_start", &(api_field_t){ 0 }) ? "week_start"
                                                                                 : "anchor_day";
        api_err_set(err, API_E_BAD_REQUEST, given, "'%s' needs 'calendar' (day, week, month, quarter or year)", given);
        return false;
    }
    c->kind = (uint8_t)cal_kind_parse(s, n);
    if (!c->kind) {
        api_err_set(err, API_E_BAD_REQUEST, "calendar", "'calendar' must be day, week, month, quarter or year, not '%.*s'",
                    (int)(n > 40 ? 40 : n), s);
        return false;
    }
    api_field_t v;
    if (api_fields_get(f, "period", &v)) {
        api_err_set(err, API_E_BAD_REQUEST, "period",
                    "'period' cannot be given with 'calendar' (the calendar sets the window)");
        return false;
    }
    const char *tz = "UTC";
    size_t tzn = 3;
    s = NULL;
    if (!api_fields_string(f, "time_zone", false, &s, &n, err))
        return false;
    if (s)
        tz = s, tzn = n;
    const char *why = NULL;
    if (!(c->zone = cmd_zone_get(tz, tzn, &why))) {
        api_err_set(err, API_E_BAD_REQUEST, "time_zone", "'time_zone' '%.*s' %s", (int)(tzn > 64 ? 64 : tzn), tz, why);
        return false;
    }
    s = NULL;
    if (!api_fields_string(f, "week_start", false, &s, &n, err))
        return false;
    if (s && c->kind != CAL_WEEK) {
        api_err_set(err, API_E_BAD_REQUEST, "week_start", "'week_start' applies to the week calendar only");
        return false;
    }
    if (c->kind == CAL_WEEK) {
        c->week_start = s ? (uint8_t)cal_weekday_parse(s, n) : 1;
        if (!c->week_start) {
            api_err_set(err, API_E_BAD_REQUEST, "week_start", "'week_start' must be monday .. sunday, not '%.*s'",
                        (int)(n > 40 ? 40 : n), s);
            return false;
        }
    }
    bool anchored = c->kind == CAL_MONTH || c->kind == CAL_QUARTER || c->kind == CAL_YEAR;
    if (api_fields_get(f, "anchor_day", &v) && !anchored) {
        api_err_set(err, API_E_BAD_REQUEST, "anchor_day", "'anchor_day' applies to the month, quarter and year calendars only");
        return false;
    }
    if (anchored) {
        int64_t a = 1;
        if (!api_fields_int(f, "anchor_day", false, 1, 31, &a, NULL, err))
            return false;
        c->anchor_day = (uint8_t)a;
    }
    p->u.win.period_ns = cal_nominal_s((cal_kind_t)c->kind) * NS_PER_SEC;
    return true;
}

static bool params_parse(const api_fields_t *f, throttle_params_t *p, bool policy, api_err_t *err)
{
    memset(p, 0, sizeof(*p));
    p->algo = THROTTLE_GCRA;
    api_field_t v;
    if (api_fields_get(f, "algorithm", &v)) {
        if (v.type != API_F_STRING) {
            api_err_set(err, API_E_BAD_REQUEST, "algorithm", "'algorithm' must be a string");
            return false;
        }
        p->algo = throttle_algo_parse(v.s);
        if (!p->algo && !strcmp(v.s, RL_CONCURRENCY_NAME)) {
            if (!policy) {
                api_err_set(err, API_E_BAD_REQUEST, "algorithm",
                            "the concurrency algorithm is a policy's (its /hook acquires and releases leases) or "
                            "/lease/{key}'s, not a decision's");
                return false;
            }
            p->algo = RL_ALGO_CONCURRENCY;
        }
        if (!p->algo) {
            api_err_set(err, API_E_BAD_REQUEST, "algorithm",
                       "unknown algorithm '%s' (gcra, sliding_log, sliding_window, fixed_window, token_bucket%s)", v.s,
                       policy ? ", concurrency" : "");
            return false;
        }
    }
    const char *const *mine = p->algo == RL_ALGO_CONCURRENCY    ? lease_params
                              : p->algo == THROTTLE_GCRA          ? gcra_params
                              : p->algo == THROTTLE_TOKEN_BUCKET ? bucket_params
                              : p->algo == THROTTLE_FIXED_WINDOW ? fixed_params
                                                                 : count_params;
    const char *n;
    api_fields_iter_t iter = { 0 };
    while ((n = api_fields_next(f, &iter))) {
        bool known = api_name_listed(all_params, n) || (policy && api_name_listed(lease_params, n));
        if (!api_name_listed(mine, n) && known) {   /* mine first: the usual answer */
            char takes[128] = "";
            for (int i = 0; mine[i]; i++)
                snprintf(takes + strlen(takes), sizeof(takes) - strlen(takes), "%s%s", i ? ", " : "", mine[i]);
            api_err_set(err, API_E_BAD_REQUEST, n, "'%s' does not apply to the %s algorithm (it takes %s)", n,
                       algo_name(p->algo), takes);
            return false;
        }
    }
    if (p->algo == RL_ALGO_CONCURRENCY)
        return lease_parse(f, p, err);

    int64_t period_s = 0;
    switch (p->algo) {
    case THROTTLE_GCRA:
        if (!api_fields_int(f, "max_burst", true, 0, INT64_MAX, &p->u.gcra.max_burst, NULL, err) ||
            !api_fields_int(f, "count_per_period", true, 1, INT64_MAX, &p->u.gcra.count, NULL, err) ||
            !api_fields_int(f, "period", true, 1, CMD_THROTTLE_MAX_PERIOD_S, &period_s, NULL, err))
            return false;
        p->u.gcra.period_ns = period_s * NS_PER_SEC;
        break;
    case THROTTLE_SLIDING_LOG:
        if (!api_fields_int(f, "max_count", true, 1, INT64_MAX, &p->u.log.max_count, NULL, err) ||
            !api_fields_int(f, "period", true, 1, CMD_THROTTLE_MAX_PERIOD_S, &period_s, NULL, err))
            return false;
        p->u.log.period_ns = period_s * NS_PER_SEC;
        break;
    case THROTTLE_FIXED_WINDOW:
        if (api_fields_get(f, "calendar", &v) || api_fields_get(f, "time_zone", &v) ||
            api_fields_get(f, "week_start", &v) || api_fields_get(f, "anchor_day", &v)) {
            if (!api_fields_int(f, "max_count", true, 1, INT64_MAX, &p->u.win.max_count, NULL, err) ||
                !calendar_parse(f, p, err))
                return false;
            break;
        }
        /* fall through */
    case THROTTLE_SLIDING_WINDOW:
        if (!api_fields_int(f, "max_count", true, 1, INT64_MAX, &p->u.win.max_count, NULL, err) ||
            !api_fields_int(f, "period", true, 1, CMD_THROTTLE_MAX_PERIOD_S, &period_s, NULL, err))
            return false;
        p->u.win.period_ns = period_s * NS_PER_SEC;
        break;
    case THROTTLE_TOKEN_BUCKET: {
        if (!api_fields_int(f, "capacity", true, 1, INT64_MAX, &p->u.tb.capacity, NULL, err))
            return false;
        if (!api_fields_get(f, "refill_rate", &v)) {
            api_err_set(err, API_E_BAD_REQUEST, "refill_rate", "missing field 'refill_rate'");
            return false;
        }
        double rate;
        if (!api_field_number(&v, &rate) || !isfinite(rate) || rate < 0.000001 || rate > 1e12) {
            api_err_set(err, API_E_BAD_REQUEST, "refill_rate",
                       "'refill_rate' must be a number of tokens per second between 0.000001 and 10^12");
            return false;
        }
        p->u.tb.rate_micro = llround(rate * 1e6);
        break;
    }
    }
    const char *field = NULL;
    const char *why = throttle_validate(p, &field);
    if (why) {
        api_err_set(err, API_E_BAD_REQUEST, field, "'%s' %s", field, why);
        return false;
    }
    return true;
}

bool rl_params_parse(const api_fields_t *f, throttle_params_t *p, api_err_t *err)
{
    return params_parse(f, p, false, err);
}

bool rl_policy_params_parse(const api_fields_t *f, throttle_params_t *p, api_err_t *err)
{
    return params_parse(f, p, true, err);
}

/* ------------------------------------------------------------------------ */
/* Key templates                                                            */
/* ------------------------------------------------------------------------ */

enum { SRC_HEADER, SRC_IP, SRC_PATH, SRC_METHOD, SRC_HOST };

typedef struct tmpl_alt {
    int kind;
    char *header;                /* SRC_HEADER: the header name */
} tmpl_alt_t;

struct tmpl_part {
    char *lit;                   /* literal text, or NULL for a placeholder */
    size_t lit_len;
    tmpl_alt_t *alts;
    int nalts;
};

static void parts_free(tmpl_part_t *parts, int n)
{
    for (int i = 0; i < n; i++) {
        free(parts[i].lit);
        for (int k = 0; k < parts[i].nalts; k++)
            free(parts[i].alts[k].header);
        free(parts[i].alts);
    }
    free(parts);
}

static bool header_token(const char *s, size_t n)
{
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c)))
            return false;
    }
    return true;
}

/* Parses one source ("ip", "header:X-Api-Key", ...). */
static bool parse_alt(const char *s, size_t n, tmpl_alt_t *a, char *why, size_t wn)
{
    static const struct {
        const char *name;
        int kind;
    } plain[] = { { "ip", SRC_IP }, { "path", SRC_PATH }, { "method", SRC_METHOD }, { "host", SRC_HOST } };
    a->header = NULL;
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        if (strlen(plain[i].name) == n && memcmp(plain[i].name, s, n) == 0) {
            a->kind = plain[i].kind;
            return true;
        }
    if (n > 7 && memcmp(s, "header:", 7) == 0) {
        if (!header_token(s + 7, n - 7)) {
            snprintf(why, wn, "'%.*s' is not a valid header name", (int)(n - 7), s + 7);
            return false;
        }
        a->kind = SRC_HEADER;
        a->header = strndup(s + 7, n - 7);
        if (!a->header) {
            snprintf(why, wn, "out of memory");
            return false;
        }
        return true;
    }
    snprintf(why, wn, "unknown source '{%.*s}' (use {header:NAME}, {ip}, {path}, {method} or {host})", (int)n, s);
    return false;
}

/* Parses a template into parts; false with a reason. */
static bool tmpl_parse(const char *t, tmpl_part_t **out, int *nout, char *why, size_t wn)
{
    tmpl_part_t *parts = NULL;
    int n = 0;
    size_t len = strlen(t);
    if (len == 0) {
        snprintf(why, wn, "the key template is empty");
        return false;
    }
    for (size_t i = 0; i < len;) {
        tmpl_part_t *np = realloc(parts, sizeof(*parts) * (size_t)(n + 1));
        if (!np) {
            snprintf(why, wn, "out of memory");
            goto fail;
        }
        parts = np;
        tmpl_part_t *p = &parts[n];
        memset(p, 0, sizeof(*p));
        if (t[i] == '{') {
            const char *close = strchr(t + i, '}');
            if (!close) {
                snprintf(why, wn, "'{' at offset %zu is not closed", i);
                goto fail;
            }
            n++;
            size_t start = i + 1, end = (size_t)(close - t);
            if (end == start || memchr(t + start, '{', end - start)) {
                snprintf(why, wn, "empty or nested placeholder at offset %zu", i);
                goto fail;
            }
            for (size_t s = start; s <= end;) {
                size_t e = s;
                while (e < end && t[e] != '|')
                    e++;
                if (e == s) {
                    snprintf(why, wn, "empty alternative in placeholder at offset %zu", i);
                    goto fail;
                }
                tmpl_alt_t *na = realloc(p->alts, sizeof(*p->alts) * (size_t)(p->nalts + 1));
                if (!na) {
                    snprintf(why, wn, "out of memory");
                    goto fail;
                }
                p->alts = na;
                if (!parse_alt(t + s, e - s, &p->alts[p->nalts], why, wn))
                    goto fail;
                p->nalts++;
                s = e + 1;
            }
            i = end + 1;
        } else {
            size_t e = i;
            while (e < len && t[e] != '{' && t[e] != '}')
                e++;
            if (e < len && t[e] == '}') {
                snprintf(why, wn, "'}' at offset %zu has no '{'", e);
                n++;
                goto fail;
            }
            p->lit = strndup(t + i, e - i);
            p->lit_len = e - i;
            n++;
            if (!p->lit) {
                snprintf(why, wn, "out of memory");
                goto fail;
            }
            i = e;
        }
    }
    *out = parts;
    *nout = n;
    return true;
fail:
    parts_free(parts, n);
    return false;
}

static const char *hdr(const api_req_t *req, const char *name)
{
    const char *v = req->header ? req->header(req->hctx, name) : NULL;
    return v && *v ? v : NULL;
}

/* The value of one source for this request, or NULL when absent. */
static const char *source_value(const tmpl_alt_t *a, const api_req_t *req, const char *rest, size_t rest_len,
                                size_t *n)
{
    const char *v;
    switch (a->kind) {
    case SRC_HEADER:
        v = hdr(req, a->header);
        if (v)
            *n = strlen(v);
        return v;
    case SRC_IP:
        /* the service applies --trusted-proxies (core/cidr.h) */
        if (req->client_ip && (v = req->client_ip(req->hctx)) && *v) {
            *n = strlen(v);
            return v;
        }
        return NULL;
    case SRC_PATH:
        if ((v = hdr(req, "X-Forwarded-Uri")) || (v = hdr(req, "X-Original-URI"))) {
            *n = strcspn(v, "?#");
            return *n ? v : NULL;
        }
        if (rest) {
            *n = rest_len;
            return rest;
        }
        return NULL;
    case SRC_METHOD:
        if ((v = hdr(req, "X-Forwarded-Method")) || (v = hdr(req, "X-Original-Method"))) {
            *n = strlen(v);
            return v;
        }
        v = api_method_name(req->method);
        *n = strlen(v);
        return v;
    case SRC_HOST:
        if ((v = hdr(req, "X-Forwarded-Host")) || (v = hdr(req, "Host"))) {
            *n = strlen(v);
            return v;
        }
        return NULL;
    }
    return NULL;
}

static const char *source_name(const tmpl_alt_t *a, char *buf, size_t n)
{
    switch (a->kind) {
    case SRC_HEADER: snprintf(buf, n, "the %s header", a->header); break;
    case SRC_IP: snprintf(buf, n, "a client address"); break;
    case SRC_PATH: snprintf(buf, n, "a path (X-Forwarded-Uri, X-Original-URI or /hook/{policy}/...)"); break;
    case SRC_METHOD: snprintf(buf, n, "a method"); break;
    default: snprintf(buf, n, "a host (X-Forwarded-Host or Host)"); break;
    }
    return buf;
}

bool policy_key(const policy_t *p, const api_req_t *req, const char *rest, size_t rest_len, char *out,
                size_t *len, api_err_t *err)
{
    size_t o = 0;
    memcpy(out, p->prefix, p->prefix_len);
    o = p->prefix_len;
    for (int i = 0; i < p->nparts; i++) {
        const tmpl_part_t *part = &p->parts[i];
        const char *v = part->lit;
        size_t n = part->lit_len;
        int k = 0;
        for (; !v && k < part->nalts; k++)
            v = source_value(&part->alts[k], req, rest, rest_len, &n);
        if (!v) {
            char what[128];
            api_err_set(err, API_E_BAD_REQUEST, "key", "policy '%s' takes its key from %s, which the request does not have",
                       p->name, source_name(&part->alts[part->nalts - 1], what, sizeof(what)));
            return false;
        }
        /* a path counts under one spelling however it is written (core/urlpath.h) */
        if (!part->lit && part->alts[k - 1].kind == SRC_PATH)
            n = urlpath_normalize(v, n, out + o, KS_KEY_MAX - o);
        else if (n <= KS_KEY_MAX - o)
            memcpy(out + o, v, n);
        else
            n = (size_t)-1;
        if (n == (size_t)-1) {
            api_err_set(err, API_E_BAD_REQUEST, "key", "policy '%s': the key would be longer than %d bytes", p->name,
                       KS_KEY_MAX);
            return false;
        }
        o += n;
    }
    out[o] = '\0';
    *len = o;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Registry                                                                 */
/* ------------------------------------------------------------------------ */

struct api_policies {
    pthread_rwlock_t lock;
    policy_t *set;               /* current policies */
    size_t n;
    policy_stats_t **stats;      /* every policy name ever loaded (grows only) */
    size_t nstats;
    pthread_mutex_t stats_lock;
};

/* ------------------------------------------------------------------------ */
/* Overrides: which limits a tenant gets                                    */
/* ------------------------------------------------------------------------ */

const char *policy_limit_name(policy_limit_t l)
{
    return l == POLICY_LIMIT_API ? "override" : l == POLICY_LIMIT_FILE ? "file-override" : "default";
}

static int tenant_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : an < bn ? -1 : an > bn ? 1 : 0;
}

static const policy_override_t *file_override(const policy_t *p, const char *t, size_t tlen)
{
    size_t lo = 0, hi = p->noverrides;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = tenant_cmp(p->overrides[mid].tenant, p->overrides[mid].tlen, t, tlen);
        if (c == 0)
            return &p->overrides[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* A member of a policy's limits: "algorithm" or one of the algorithms'
 * parameters (whatever rl_params_parse reads). */
static bool limit_field(const char *k)
{
    return !strcmp(k, "algorithm") || rl_is_param_name(k) || api_name_listed(lease_params, k);
}

bool policy_override_parse(const policy_t *p, json_t *o, throttle_params_t *out, api_err_t *err)
{
    if (!json_is_object(o)) {
        api_err_set(err, API_E_BAD_REQUEST, NULL, "an override is a JSON object of limits, as in the policies file");
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (!limit_field(k)) {
            api_err_set(err, API_E_BAD_REQUEST, k, "unknown field '%s' (an override holds 'algorithm' and its parameters)",
                       k);
            return false;
        }
    }
    const char *mine = algo_name(p->params.algo);
    json_t *a = json_object_get(o, "algorithm");
    if (!a) {
        json_object_set_new(o, "algorithm", json_string(mine));
    } else if (!json_is_string(a) || strcmp(json_string_value(a), mine) != 0) {
        api_err_set(err, API_E_BAD_REQUEST, "algorithm",
                   "an override of policy '%s' takes its algorithm, %s (a key keeps the algorithm that created it)",
                   p->name, mine);
        return false;
    }
    api_fields_t f = api_fields_json(o);
    return rl_policy_params_parse(&f, out, err);
}

bool policy_override_text(const char *text, size_t len, throttle_params_t *out, void *ud)
{
    (void)ud;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    bool ok = false;
    if (json_is_object(o) && json_is_string(json_object_get(o, "algorithm"))) {
        const char *k;
        json_t *v;
        ok = true;
        json_object_foreach(o, k, v) ok = ok && limit_field(k);
        api_fields_t f = api_fields_json(o);
        api_err_t e;
        ok = ok && rl_policy_params_parse(&f, out, &e);
    }
    json_decref(o);
    return ok;
}

policy_limit_t policy_limits(const policy_t *p, const char *tenant, size_t tlen, const throttle_params_t *api,
                             throttle_params_t *out)
{
    if (api && api->algo == p->params.algo) {
        *out = *api;
        return POLICY_LIMIT_API;
    }
    const policy_override_t *f = p->noverrides ? file_override(p, tenant, tlen) : NULL;
    if (f) {
        *out = f->params;
        return POLICY_LIMIT_FILE;
    }
    *out = p->params;
    return POLICY_LIMIT_DEFAULT;
}

static void overrides_free(policy_override_t *o, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(o[i].tenant);
    free(o);
}

static int override_order(const void *a, const void *b)
{
    const policy_override_t *x = a, *y = b;
    return tenant_cmp(x->tenant, x->tlen, y->tenant, y->tlen);
}

static void set_free(policy_t *set, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        overrides_free(set[i].overrides, set[i].noverrides);
        parts_free(set[i].parts, set[i].nparts);
        free(set[i].prefix);
    }
    free(set);
}

api_policies_t *api_policies_create(void)
{
    api_policies_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    /* writer-preferring: a reload must not starve behind a steady stream of
     * overlapping requests (readers never take the lock twice) */
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&r->lock, &a);
    pthread_rwlockattr_destroy(&a);
    pthread_mutex_init(&r->stats_lock, NULL);
    return r;
}

void api_policies_free(api_policies_t *r)
{
    if (!r)
        return;
    set_free(r->set, r->n);
    for (size_t i = 0; i < r->nstats; i++)
        free(r->stats[i]);
    free(r->stats);
    pthread_rwlock_destroy(&r->lock);
    pthread_mutex_destroy(&r->stats_lock);
    free(r);
}

void policies_read_lock(api_policies_t *r)
{
    if (r)
        pthread_rwlock_rdlock(&r->lock);
}

void policies_read_unlock(api_policies_t *r)
{
    if (r)
        pthread_rwlock_unlock(&r->lock);
}

const policy_t *policy_find(api_policies_t *r, const char *name)
{
    for (size_t i = 0; r && i < r->n; i++)
        if (strcmp(r->set[i].name, name) == 0)
            return &r->set[i];
    return NULL;
}

void policy_count(const policy_t *p, policy_limit_t limit, policy_decision_t d)
{
    atomic_fetch_add_explicit(&p->stats->by_limit[limit][d], 1, memory_order_relaxed);
    _Atomic uint64_t *c = d == POLICY_ALLOWED ? &p->stats->allowed
                          : d == POLICY_LIMITED ? &p->stats->limited
                                                : &p->stats->shadow_limited;
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static policy_stats_t *stats_for(api_policies_t *r, const char *name)
{
    pthread_mutex_lock(&r->stats_lock);
    policy_stats_t *s = NULL;
    for (size_t i = 0; i < r->nstats && !s; i++)
        if (strcmp(r->stats[i]->name, name) == 0)
            s = r->stats[i];
    if (!s) {
        policy_stats_t **ns = realloc(r->stats, sizeof(*ns) * (r->nstats + 1));
        if (ns) {
            r->stats = ns;
            s = calloc(1, sizeof(*s));
            if (s) {
                snprintf(s->name, sizeof(s->name), "%s", name);
                r->stats[r->nstats++] = s;
            }
        }
    }
    pthread_mutex_unlock(&r->stats_lock);
    return s;
}

/* tally_ratelimit_limit_decisions_total{policy,limit,decision}: which of
 * a policy's limits decided - its defaults, the file's override of a
 * tenant, or a live one.  Tenants are never labels; the first
 * POLICY_METRICS_MAX policies of the file have their own, the others are
 * summed under policy="other": at most (POLICY_METRICS_MAX + 1) x 3 x 3
 * series. */
static void limit_metrics(api_policies_t *r, wbuf_t *out)
{
    static const char head[] = "# HELP tally_ratelimit_limit_decisions_total Rate-limit decisions by policy and by the "
                               "limit that decided: the policy's default, a tenant's override from the policies "
                               "file, or a live override set through the API.\n"
                               "# TYPE tally_ratelimit_limit_decisions_total counter\n";
    static const char *const dnames[3] = { "allowed", "limited", "shadow_limited" };
    if (!r->n)
        return;
    wbuf_put_bytes(out, head, sizeof(head) - 1);
    uint64_t other[3][3] = { { 0 } };
    for (size_t i = 0; i < r->n; i++) {
        const policy_stats_t *s = r->set[i].stats;
        for (int l = 0; l < POLICY_LIMIT_COUNT; l++)
            for (int d = 0; d < 3; d++) {
                uint64_t v = atomic_load_explicit(&s->by_limit[l][d], memory_order_relaxed);
                if (i >= POLICY_METRICS_MAX) {
                    other[l][d] += v;
                    continue;
                }
                char line[256];
                int len = snprintf(line, sizeof(line),
                                   "tally_ratelimit_limit_decisions_total{policy=\"%s\",limit=\"%s\",decision=\"%s\"} "
                                   "%llu\n",
                                   s->name, policy_limit_name((policy_limit_t)l), dnames[d], (unsigned long long)v);
                wbuf_put_bytes(out, line, (size_t)len);
            }
    }
    if (r->n > POLICY_METRICS_MAX)
        for (int l = 0; l < POLICY_LIMIT_COUNT; l++)
            for (int d = 0; d < 3; d++) {
                char line[256];
                int len = snprintf(line, sizeof(line),
                                   "tally_ratelimit_limit_decisions_total{policy=\"other\",limit=\"%s\",decision=\"%s\"} "
                                   "%llu\n",
                                   policy_limit_name((policy_limit_t)l), dnames[d], (unsigned long long)other[l][d]);
                wbuf_put_bytes(out, line, (size_t)len);
            }
}

void api_policies_metrics(api_policies_t *r, wbuf_t *out)
{
    if (!r)
        return;
    static const char head[] = "# HELP tally_ratelimit_decisions_total Rate-limit decisions by policy: allowed, limited, "
                               "and limited but allowed because the policy is in shadow mode.\n"
                               "# TYPE tally_ratelimit_decisions_total counter\n";
    pthread_rwlock_rdlock(&r->lock);
    if (r->n)
        wbuf_put_bytes(out, head, sizeof(head) - 1);
    for (size_t i = 0; i < r->n; i++) {
        const policy_stats_t *s = r->set[i].stats;
        char line[512];
        int len = snprintf(line, sizeof(line),
                           "tally_ratelimit_decisions_total{policy=\"%s\",decision=\"allowed\"} %llu\n"
                           "tally_ratelimit_decisions_total{policy=\"%s\",decision=\"limited\"} %llu\n"
                           "tally_ratelimit_decisions_total{policy=\"%s\",decision=\"shadow_limited\"} %llu\n",
                           s->name, (unsigned long long)atomic_load(&s->allowed), s->name,
                           (unsigned long long)atomic_load(&s->limited), s->name,
                           (unsigned long long)atomic_load(&s->shadow_limited));
        wbuf_put_bytes(out, line, (size_t)len);
    }
    limit_metrics(r, out);
    pthread_rwlock_unlock(&r->lock);
}

/* ------------------------------------------------------------------------ */
/* The policies file                                                        */
/* ------------------------------------------------------------------------ */

/* Line (1-based) of the member at the path keys[0..n) of nested objects in
 * the (already valid) JSON text: where its key starts.  Falls back to the
 * deepest ancestor found, then to line 1.  Keys are compared as written
 * (escapes are not decoded), which is exact for plain names. */
static int json_member_line(const char *s, size_t len, const char *const *keys, int n)
{
    enum { MAXD = 8 };
    bool is_obj[MAXD + 1] = { false };
    bool expect_key[MAXD + 1] = { false };
    int matched[MAXD + 1];   /* matched[d]: path keys[0..d) match the enclosing members */
    int depth = 0, line = 1, best_line = 1, best = 0;
    matched[0] = 1;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\n') {
            line++;
        } else if (c == '{' || c == '[') {
            if (depth < MAXD) {
                depth++;
                is_obj[depth] = c == '{';
                expect_key[depth] = c == '{';
                matched[depth] = 0;
            } else {
                depth++;
            }
        } else if (c == '}' || c == ']') {
            depth--;
            if (depth < 0)
                return best_line;
        } else if (c == ',' && depth <= MAXD && depth > 0) {
            if (is_obj[depth])
                expect_key[depth] = true;
        } else if (c == ':' && depth <= MAXD && depth > 0) {
            expect_key[depth] = false;
        } else if (c == '"') {
            size_t st = ++i;
            while (i < len && s[i] != '"') {
                if (s[i] == '\\')
                    i++;
                i++;
            }
            if (depth > 0 && depth <= MAXD && is_obj[depth] && expect_key[depth]) {
                /* a member key at this depth: does it extend the path? */
                int d = depth;   /* keys[d-1] */
                bool parent_ok = d == 1 || matched[d - 1];
                bool hit = parent_ok && d <= n && strlen(keys[d - 1]) == i - st &&
                           memcmp(keys[d - 1], s + st, i - st) == 0;
                /* matched[d] tells the children of this member that their parents match */
                matched[d] = hit;
                if (hit && d > best) {
                    best = d;
                    best_line = line;
                    if (d == n)
                        return line;
                }
            }
        }
    }
    return best_line;
}

/* Sets err to "line L: ..." for the member path. */
static void cfg_err(char *err, size_t errlen, const char *text, size_t len, const char *policy, const char *field,
                    const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void cfg_err(char *err, size_t errlen, const char *text, size_t len, const char *policy, const char *field,
                    const char *fmt, ...)
{
    const char *path[3] = { "policies", policy, field };
    int n = policy ? (field && *field ? 3 : 2) : (field && *field ? 1 : 0);
    if (!policy && field && *field)
        path[0] = field;
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    int line = n ? json_member_line(text, len, path, n) : 1;
    if (policy)
        snprintf(err, errlen, "line %d: policy '%s': %s", line, policy, msg);
    else
        snprintf(err, errlen, "line %d: %s", line, msg);
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > POLICY_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return false;
    }
    return true;
}

/* A reservation's defaults: "reservation_ttl" (seconds) and "on_expiry". */
static bool parse_reservation_defaults(json_t *o, policy_t *p, const char *name, const char *text, size_t len,
                                       char *err, size_t errlen)
{
    json_t *ttl = json_object_get(o, "reservation_ttl"), *ex = json_object_get(o, "on_expiry");
    p->reservation_ttl_s = 60;
    p->on_expiry = THROTTLE_EXPIRY_KEEP;
    if (ttl) {
        if (!json_is_integer(ttl) || json_integer_value(ttl) < 1 ||
            json_integer_value(ttl) > THROTTLE_MAX_RESERVE_TTL_NS / NS_PER_SEC) {
            cfg_err(err, errlen, text, len, name, "reservation_ttl",
                    "'reservation_ttl' must be an integer between 1 and 604800 (seconds)");
            return false;
        }
        p->reservation_ttl_s = json_integer_value(ttl);
    }
    if (ex) {
        const char *s = json_string_value(ex);
        if (!s || (strcmp(s, "keep") != 0 && strcmp(s, "refund") != 0)) {
            cfg_err(err, errlen, text, len, name, "on_expiry", "'on_expiry' must be \"keep\" or \"refund\"");
            return false;
        }
        p->on_expiry = s[0] == 'r' ? THROTTLE_EXPIRY_REFUND : THROTTLE_EXPIRY_KEEP;
    }
    return true;
}

static bool parse_policy(api_policies_t *reg, const char *name, json_t *o, policy_t *p, const char *text, size_t len,
                         char *err, size_t errlen)
{
    static const char *const fields[] = { "algorithm", "max_burst", "count_per_period", "period", "max_count",
                                          "capacity", "refill_rate", "key", "prefix", "shadow", "deny_status",
                                          "overrides", "reservation_ttl", "on_expiry", "calendar", "time_zone",
                                          "week_start", "anchor_day", "limit", "ttl_ms", "ttl", NULL };
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    if (!name_ok(name)) {
        cfg_err(err, errlen, text, len, name, NULL,
                "a policy name is 1 to %d characters of letters, digits, '_', '-' and '.'", POLICY_NAME_MAX);
        return false;
    }
    if (!json_is_object(o)) {
        cfg_err(err, errlen, text, len, name, NULL, "must be an object");
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (!api_name_listed(fields, k)) {
            cfg_err(err, errlen, text, len, name, k, "unknown field '%s'", k);
            return false;
        }
    }
    api_err_t e;
    api_fields_t src = api_fields_json(o);
    if (!rl_policy_params_parse(&src, &p->params, &e)) {
        cfg_err(err, errlen, text, len, name, e.field, "%s", e.message);
        return false;
    }
    if (rl_is_concurrency(&p->params)) {
        /* a lease is granted or not: no shadow mode, no reservations */
        static const char *const rate_only[] = { "shadow", "reservation_ttl", "on_expiry", NULL };
        for (int i = 0; rate_only[i]; i++)
            if (json_object_get(o, rate_only[i])) {
                cfg_err(err, errlen, text, len, name, rate_only[i],
                        "'%s' does not apply to a concurrency policy (it takes limit, ttl_ms or ttl, key, prefix, "
                        "deny_status and overrides)",
                        rate_only[i]);
                return false;
            }
    }
    json_t *key = json_object_get(o, "key");
    const char *tmpl = "{ip}";
    if (key) {
        if (!json_is_string(key)) {
            cfg_err(err, errlen, text, len, name, "key", "'key' must be a string (a key template)");
            return false;
        }
        tmpl = json_string_value(key);
    }
    char why[300];
    if (!tmpl_parse(tmpl, &p->parts, &p->nparts, why, sizeof(why))) {
        cfg_err(err, errlen, text, len, name, key ? "key" : NULL, "key template \"%s\": %s", tmpl, why);
        return false;
    }
    json_t *prefix = json_object_get(o, "prefix");
    if (prefix && !json_is_string(prefix)) {
        cfg_err(err, errlen, text, len, name, "prefix", "'prefix' must be a string");
        return false;
    }
    if (prefix) {
        p->prefix = strdup(json_string_value(prefix));
    } else {
        p->prefix = malloc(strlen(name) + 2);
        if (p->prefix)
            sprintf(p->prefix, "%s:", name);
    }
    if (!p->prefix) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    p->prefix_len = strlen(p->prefix);
    if (p->prefix_len >= KS_KEY_MAX) {
        cfg_err(err, errlen, text, len, name, "prefix", "'prefix' is longer than keys may be");
        return false;
    }
    json_t *shadow = json_object_get(o, "shadow");
    if (shadow && !json_is_boolean(shadow)) {
        cfg_err(err, errlen, text, len, name, "shadow", "'shadow' must be true or false");
        return false;
    }
    p->shadow = shadow && json_is_true(shadow);
    json_t *deny = json_object_get(o, "deny_status");
    p->deny_status = 429;
    if (deny) {
        if (!json_is_integer(deny) || !rl_deny_status_ok(json_integer_value(deny))) {
            cfg_err(err, errlen, text, len, name, "deny_status",
                    "'deny_status' must be a 4xx status tally does not use for errors (e.g. 429, or 403 for nginx "
                    "auth_request; not 400, 401, 404, 405, 409, 413, 414 or 415)");
            return false;
        }
        p->deny_status = (int)json_integer_value(deny);
    }
    json_t *ov = json_object_get(o, "overrides");
    if (ov) {
        if (!json_is_object(ov)) {
            cfg_err(err, errlen, text, len, name, "overrides",
                    "'overrides' must be an object of tenants and their limits");
            return false;
        }
        if (json_object_size(ov) > OVERRIDE_MAX_ENTRIES) {
            cfg_err(err, errlen, text, len, name, "overrides", "at most %d overrides per policy",
                    OVERRIDE_MAX_ENTRIES);
            return false;
        }
        p->overrides = calloc(json_object_size(ov) ? json_object_size(ov) : 1, sizeof(*p->overrides));
        if (!p->overrides) {
            snprintf(err, errlen, "out of memory");
            return false;
        }
        json_object_foreach(ov, k, v) {
            size_t tl = strlen(k);
            if (tl == 0 || tl > OVERRIDE_TENANT_MAX) {
                cfg_err(err, errlen, text, len, name, "overrides", "override '%s': a tenant is 1 to %d bytes", k,
                        OVERRIDE_TENANT_MAX);
                return false;
            }
            policy_override_t *po = &p->overrides[p->noverrides];
            if (!policy_override_parse(p, v, &po->params, &e)) {
                cfg_err(err, errlen, text, len, name, "overrides", "override '%s': %s", k, e.message);
                return false;
            }
            po->tenant = strdup(k);
            if (!po->tenant) {
                snprintf(err, errlen, "out of memory");
                return false;
            }
            po->tlen = tl;
            p->noverrides++;
        }
        qsort(p->overrides, p->noverrides, sizeof(*p->overrides), override_order);
    }
    if (!parse_reservation_defaults(o, p, name, text, len, err, errlen))
        return false;
    p->stats = stats_for(reg, name);
    if (!p->stats) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    return true;
}

bool api_policies_load(api_policies_t *reg, const char *text, size_t len, size_t *count, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "line %d column %d: %s", je.line, je.column, je.text);
        return false;
    }
    policy_t *set = NULL;
    size_t n = 0;
    bool ok = false;
    if (!json_is_object(root)) {
        snprintf(err, errlen, "line 1: the file must hold a JSON object {\"policies\": {...}}");
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "policies") != 0) {
            cfg_err(err, errlen, text, len, NULL, k, "unknown field '%s' (the file holds {\"policies\": {...}})", k);
            goto done;
        }
    }
    json_t *pol = json_object_get(root, "policies");
    if (!json_is_object(pol)) {
        cfg_err(err, errlen, text, len, NULL, pol ? "policies" : NULL, "'policies' must be an object of named policies");
        goto done;
    }
    set = calloc(json_object_size(pol) ? json_object_size(pol) : 1, sizeof(*set));
    if (!set) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    json_object_foreach(pol, k, v) {
        if (!parse_policy(reg, k, v, &set[n], text, len, err, errlen)) {
            n++;
            goto done;
        }
        n++;
    }
    ok = true;
done:
    json_decref(root);
    if (!ok) {
        set_free(set, n);
        return false;
    }
    pthread_rwlock_wrlock(&reg->lock);
    policy_t *old = reg->set;
    size_t oldn = reg->n;
    reg->set = set;
    reg->n = n;
    pthread_rwlock_unlock(&reg->lock);
    set_free(old, oldn);
    *count = n;
    return true;
}
