/*
 * config.c - envoyproxy/ratelimit's configuration, read as it is (its
 * src/config/config_impl.go is the reference), with libyaml.
 *
 *   domain: mongo_cps              one domain per file
 *   charge_all: false              tally: charge every descriptor, as envoyproxy/ratelimit
 *   descriptors:
 *     - key: database
 *       value: users               optional; omitted: one bucket per value sent
 *       rate_limit:                optional
 *         unit: second             second minute hour day week month year
 *         requests_per_unit: 500
 *         name: users_rule         optional; `replaces: [{name: ...}]` drops a named rule
 *         unlimited: false         true: no unit; answered OK without state
 *         algorithm: fixed_window  tally: sliding_window, sliding_log, gcra, token_bucket
 *         window: 90s              tally: a period of its own (s, m, h, d; the unit may go)
 *         calendar: month          tally: fixed_window per local day, week, month, quarter
 *                                  or year (core/calendar.h; the unit may go, or name
 *                                  the same period: day, week, month, year)
 *         time_zone: Europe/Paris  tally: the calendar's IANA zone (default UTC)
 *         week_start: monday       tally: week only (monday .. sunday, default monday)
 *         anchor_day: 1            tally: month, quarter, year (1..31, clamped to the
 *                                  month's last day; default 1)
 *       shadow_mode: false         decided and counted, never refuses
 *       detailed_metric: false     a metrics series per value sent
 *       descriptors: [...]         nested
 *
 * What envoyproxy/ratelimit refuses, this refuses (unknown keys, a list of
 * something other than maps, an empty domain or key, a duplicate domain or
 * composite key, a bad or missing unit, a unit with unlimited, an empty
 * replaces entry or one naming its own rule); what it accepts and ignores
 * (a known key at a level that has no use for it, metadata,
 * value_to_metric) this accepts and ignores.  quota_mode: true is refused:
 * tally does not implement it.  Every message names the file, the line and
 * the field.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "cmd/throttle.h"
#include "cmd/zone.h"
#include "rls/rls_int.h"

#define RLS_FILE_MAX (16 * 1024 * 1024)   /* a configuration is small; refuse anything absurd */
#define RLS_FILES_MAX 4096                /* files of one directory */

/* ============================================================ units == */

int64_t rls_unit_seconds(rls_unit_t u)
{
    switch (u) {
    case RLS_UNIT_SECOND: return 1;
    case RLS_UNIT_MINUTE: return 60;
    case RLS_UNIT_HOUR: return 3600;
    case RLS_UNIT_DAY: return 86400;
    case RLS_UNIT_WEEK: return 7 * 86400;
    case RLS_UNIT_MONTH: return 30 * 86400;    /* envoyproxy/ratelimit's fixed lengths */
    case RLS_UNIT_YEAR: return 365 * 86400;
    default: return 0;
    }
}

static const char *const unit_names[] = { "unknown", "second", "minute", "hour", "day", "month", "year", "week" };

const char *rls_unit_name(rls_unit_t u)
{
    return (unsigned)u < sizeof(unit_names) / sizeof(unit_names[0]) ? unit_names[u] : "unknown";
}

/* ====================================================== the set tree == */

static void rule_free(rls_rule_t *r)
{
    if (!r)
        return;
    free(r->name);
    for (size_t i = 0; i < r->nreplaces; i++)
        free(r->replaces[i]);
    free(r->replaces);
    free(r->full_key);
    free(r);
}

static void node_free(rls_node_t *n)
{
    for (size_t i = 0; i < n->nchildren; i++)
        node_free(&n->children[i]);
    free(n->children);
    free(n->key);
    free(n->value);
    free(n->final);
    rule_free(n->rule);
}

static void set_free(rls_set_t *s)
{
    for (size_t i = 0; i < s->ndomains; i++) {
        free(s->domains[i].name);
        node_free(&s->domains[i].root);
    }
    free(s->domains);
    free(s->rules);
    free(s);
}

void rls_set_retain(rls_set_t *s)
{
    if (s)
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void rls_set_release(rls_set_t *s)
{
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        set_free(s);
}

const rls_domain_t *rls_set_domain(const rls_set_t *s, const char *d, size_t dlen)
{
    for (size_t i = 0; i < s->ndomains; i++)
        if (strlen(s->domains[i].name) == dlen && memcmp(s->domains[i].name, d, dlen) == 0)
            return &s->domains[i];
    return NULL;
}

/* ========================================================== reading == */

typedef struct loader {
    const char *file;
    yaml_document_t *doc;
    rls_set_t *set;
    char *err;
    size_t errlen;
    bool failed;
} loader_t;

static bool fail(loader_t *L, const yaml_node_t *at, const char *field, const char *fmt, ...)
{
    if (L->failed)
        return false;
    L->failed = true;
    int n = snprintf(L->err, L->errlen, "%s:%lu: %s: ", L->file, at ? (unsigned long)at->start_mark.line + 1 : 1UL,
                     field);
    if (n >= 0 && (size_t)n < L->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(L->err + n, L->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return false;
}

static bool oom(loader_t *L, const yaml_node_t *at)
{
    return fail(L, at, "file", "out of memory");
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A scalar's text (NULL node: the field is absent or null). */
static bool get_str(loader_t *L, const yaml_node_t *v, const char *field, char **out)
{
    if (v->type != YAML_SCALAR_NODE)
        return fail(L, v, field, "must be a string");
    const char *s = scalar(v);
    bool null = v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"));
    free(*out);
    *out = NULL;
    if (null)
        return true;
    if (!(*out = strdup(s)))
        return oom(L, v);
    return true;
}

/* YAML 1.1's booleans (what gopkg.in/yaml.v2 reads). */
static bool get_bool(loader_t *L, const yaml_node_t *v, const char *field, bool *out)
{
    static const char *const yes[] = { "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON" };
    static const char *const no[] = { "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF" };
    const char *s = scalar(v);
    if (s) {
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
            if (!strcmp(s, yes[i])) {
                *out = true;
                return true;
            }
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
            if (!strcmp(s, no[i])) {
                *out = false;
                return true;
            }
    }
    return fail(L, v, field, "must be true or false, not '%s'", s ? s : "a list or map");
}

static bool get_u32(loader_t *L, const yaml_node_t *v, const char *field, uint32_t *out)
{
    const char *s = scalar(v);
    if (!s || !*s)
        return fail(L, v, field, "must be a whole number from 0 to 4294967295");
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (*s == '-' || *s == '+' || *end || errno || x > UINT32_MAX)
        return fail(L, v, field, "must be a whole number from 0 to 4294967295, not '%s'", s);
    *out = (uint32_t)x;
    return true;
}

/* tally's `window`: a whole number of seconds, minutes, hours or days ("90s", "15m", "2h", "1d"). */
static bool get_window(loader_t *L, const yaml_node_t *v, int64_t *out)
{
    const char *s = scalar(v);
    if (s && *s >= '0' && *s <= '9') {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(s, &end, 10);
        int64_t mul = !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600 : !strcmp(end, "d") ? 86400 : 0;
        if (!errno && mul && x >= 1 && x <= (unsigned long long)(CMD_THROTTLE_MAX_PERIOD_S / mul)) {
            *out = (int64_t)x * mul;
            return true;
        }
    }
    return fail(L, v, "window", "must be a whole number of seconds, minutes, hours or days up to 2305843009s "
                                "(e.g. 90s, 15m, 2h, 1d), not '%s'",
                s ? s : "a list or map");
}

/* envoyproxy/ratelimit's keys: valid at any level (it checks the set, not
 * where each appears), and tally's own. */
static const char *const known_keys[] = { "domain", "key", "value", "descriptors", "rate_limit", "unit",
                                          "requests_per_unit", "unlimited", "shadow_mode", "quota_mode", "name",
                                          "replaces", "detailed_metric", "value_to_metric", "share_threshold",
                                          "metadata" };

static bool check_keys(loader_t *L, const yaml_node_t *map, const char *const *ours, size_t nours)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(L->doc, p->key);
        const char *ks = scalar(k);
        if (!ks)
            return fail(L, k, "key", "config error, key is not of type string");
        bool ok = false;
        for (size_t i = 0; i < sizeof(known_keys) / sizeof(known_keys[0]) && !ok; i++)
            ok = !strcmp(ks, known_keys[i]);
        for (size_t i = 0; i < nours && !ok; i++)
            ok = !strcmp(ks, ours[i]);
        if (!ok)
            return fail(L, k, ks, "config error, unknown key '%s'", ks);
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++)
            if (!strcmp(scalar(yaml_document_get_node(L->doc, q->key)), ks))
                return fail(L, k, ks, "config error, key '%s' already set in this map", ks);
    }
    return true;
}

#define FOR_PAIRS(L, map, kname, val)                                                                        \
    for (yaml_node_pair_t *p_ = (map)->data.mapping.pairs.start; p_ < (map)->data.mapping.pairs.top; p_++)  \
        for (const char *kname = scalar(yaml_document_get_node((L)->doc, p_->key)); kname; kname = NULL)    \
            for (yaml_node_t *val = yaml_document_get_node((L)->doc, p_->value); val; val = NULL)

static bool is_null(const yaml_node_t *v)
{
    const char *s = scalar(v);
    return s && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && (!*s || !strcmp(s, "~") || !strcmp(s, "null"));
}

/* tally's calendar keys of a rate_limit (calendar, time_zone, week_start,
 * anchor_day) into r->cal; the checks that need them all come after. */
static bool get_calendar_key(loader_t *L, const char *k, const yaml_node_t *v, rls_rule_t *r, const char **tz)
{
    const char *s = scalar(v);
    if (!strcmp(k, "calendar")) {
        r->cal.kind = s ? (uint8_t)cal_kind_parse(s, strlen(s)) : 0;
        if (!r->cal.kind)
            return fail(L, v, "calendar", "must be day, week, month, quarter or year, not '%s'", s ? s : "a list or map");
    } else if (!strcmp(k, "time_zone")) {
        if (!s)
            return fail(L, v, "time_zone", "must be a string");
        *tz = s;
    } else if (!strcmp(k, "week_start")) {
        r->cal.week_start = s ? (uint8_t)cal_weekday_parse(s, strlen(s)) : 0;
        if (!r->cal.week_start)
            return fail(L, v, "week_start", "must be monday .. sunday, not '%s'", s ? s : "a list or map");
    } else {
        uint32_t a = 0;
        if (!get_u32(L, v, "anchor_day", &a))
            return false;
        if (a < 1 || a > 31)
            return fail(L, v, "anchor_day", "must be between 1 and 31, not %u", a);
        r->cal.anchor_day = (uint8_t)a;
    }
    return true;
}

/* A rule's calendar, given or not (*given): its keys together, its zone
 * loaded, and no window, other algorithm or other unit beside it. */
static bool check_calendar(loader_t *L, const yaml_node_t *m, rls_rule_t *r, const char *tz, bool given,
                           const char *unit)
{
    cal_spec_t *c = &r->cal;
    if (!c->kind) {
        if (given)
            return fail(L, m, tz ? "time_zone" : c->week_start ? "week_start" : "anchor_day",
                        "time_zone, week_start and anchor_day need calendar (day, week, month, quarter or year)");
        return true;
    }
    if (r->period_s)
        return fail(L, m, "window", "cannot be given with calendar (the calendar sets the window)");
    if (r->algo && r->algo != THROTTLE_FIXED_WINDOW)
        return fail(L, m, "algorithm", "calendar applies to fixed_window only, not %s", throttle_algo_name(r->algo));
    if (unit && strcasecmp(unit, cal_kind_name((cal_kind_t)c->kind)))
        return fail(L, m, "unit", "unit '%s' with calendar %s: leave unit out, or give the same period", unit,
                    cal_kind_name((cal_kind_t)c->kind));
    if (c->week_start && c->kind != CAL_WEEK)
        return fail(L, m, "week_start", "applies to calendar week only");
    if (c->anchor_day && (c->kind == CAL_DAY || c->kind == CAL_WEEK))
        return fail(L, m, "anchor_day", "applies to calendar month, quarter and year only");
    if (c->kind == CAL_WEEK && !c->week_start)
        c->week_start = 1;
    if (c->kind >= CAL_MONTH && !c->anchor_day)
        c->anchor_day = 1;
    const char *why = NULL;
    if (!(c->zone = cmd_zone_get(tz ? tz : "UTC", strlen(tz ? tz : "UTC"), &why)))
        return fail(L, m, "time_zone", "'%s' %s", tz ? tz : "UTC", why);
    r->algo = THROTTLE_FIXED_WINDOW;
    r->period_s = cal_nominal_s((cal_kind_t)c->kind);
    return true;
}

static bool load_rule(loader_t *L, const yaml_node_t *m, rls_rule_t *r, bool *has_unit)
{
    static const char *const ours[] = { "algorithm", "window", "calendar", "time_zone", "week_start", "anchor_day" };
    if (m->type != YAML_MAPPING_NODE)
        return fail(L, m, "rate_limit", "must be a map");
    if (!check_keys(L, m, ours, sizeof(ours) / sizeof(ours[0])))
        return false;
    char *unit = NULL;
    const char *tz = NULL;
    bool ok = true, cal_given = false;
    FOR_PAIRS(L, m, k, v) {
        if (!ok)
            break;
        if (!strcmp(k, "unit")) {
            ok = get_str(L, v, "unit", &unit);
        } else if (!strcmp(k, "requests_per_unit")) {
            ok = is_null(v) || get_u32(L, v, "requests_per_unit", &r->requests_per_unit);
        } else if (!strcmp(k, "unlimited")) {
            ok = is_null(v) || get_bool(L, v, "unlimited", &r->unlimited);
        } else if (!strcmp(k, "name")) {
            ok = get_str(L, v, "name", &r->name);
        } else if (!strcmp(k, "algorithm")) {
            const char *s = scalar(v);
            throttle_algo_t a = s ? throttle_algo_parse(s) : 0;
            if (!a)
                ok = fail(L, v, "algorithm",
                          "must be fixed_window, sliding_window, sliding_log, gcra or token_bucket, not '%s'",
                          s ? s : "a list or map");
            r->algo = a;
        } else if (!strcmp(k, "window")) {
            ok = get_window(L, v, &r->period_s);
        } else if (!strcmp(k, "calendar") || !strcmp(k, "time_zone") || !strcmp(k, "week_start") ||
                   !strcmp(k, "anchor_day")) {
            ok = get_calendar_key(L, k, v, r, &tz);
            cal_given = true;
        } else if (!strcmp(k, "replaces")) {
            if (is_null(v))
                continue;
            if (v->type != YAML_SEQUENCE_NODE) {
                ok = fail(L, v, "replaces", "must be a list of {name: ...}");
                break;
            }
            size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
            r->replaces = calloc(n ? n : 1, sizeof(char *));
            if (!r->replaces) {
                ok = oom(L, v);
                break;
            }
            for (size_t i = 0; i < n && ok; i++) {
                const yaml_node_t *e = yaml_document_get_node(L->doc, v->data.sequence.items.start[i]);
                if (e->type != YAML_MAPPING_NODE) {
                    ok = fail(L, e, "replaces", "config error, yaml file contains list of type other than map");
                    break;
                }
                if (!(ok = check_keys(L, e, NULL, 0)))
                    break;
                char *name = NULL;
                for (yaml_node_pair_t *q = e->data.mapping.pairs.start; q < e->data.mapping.pairs.top && ok; q++)
                    if (!strcmp(scalar(yaml_document_get_node(L->doc, q->key)), "name"))
                        ok = get_str(L, yaml_document_get_node(L->doc, q->value), "replaces.name", &name);
                r->replaces[r->nreplaces++] = name;
                if (ok && (!name || !*name))
                    ok = fail(L, e, "replaces", "should not have an empty replaces entry");
                else if (ok && r->name && !strcmp(name, r->name))
                    ok = fail(L, e, "replaces", "replaces should not contain name of same descriptor");
            }
        }
        /* other known keys: accepted and ignored, as envoyproxy/ratelimit does */
    }
    /* a rule's name may come after its replaces */
    for (size_t i = 0; ok && r->name && i < r->nreplaces; i++)
        if (r->replaces[i] && !strcmp(r->replaces[i], r->name))
            ok = fail(L, m, "replaces", "replaces should not contain name of same descriptor");
    if (ok)
        ok = check_calendar(L, m, r, tz, cal_given, unit);
    if (ok) {
        r->unit = RLS_UNIT_UNKNOWN;
        *has_unit = false;
        if (unit) {
            for (rls_unit_t u = RLS_UNIT_SECOND; u <= RLS_UNIT_WEEK; u++)
                if (!strcasecmp(unit, unit_names[u]))
                    r->unit = u;
            *has_unit = r->unit != RLS_UNIT_UNKNOWN;
        }
        if (r->unlimited) {
            if (*has_unit)
                ok = fail(L, m, "unit", "should not specify rate limit unit when unlimited");
        } else if (!*has_unit && !(r->period_s && !unit)) {
            ok = fail(L, m, "unit", "invalid rate limit unit '%s'", unit ? unit : "");
        }
    }
    if (ok && !r->unlimited) {
        if (!r->algo)
            r->algo = THROTTLE_FIXED_WINDOW;
        if (!r->period_s)
            r->period_s = rls_unit_seconds(r->unit);
        if (r->requests_per_unit) {   /* 0 refuses every hit, with no state (decide.c) */
            throttle_params_t tp;
            const char *field = NULL, *why;
            rls_params(r->algo, r->requests_per_unit, r->period_s, &tp);
            tp.cal = r->algo == THROTTLE_FIXED_WINDOW ? r->cal : tp.cal;
            if ((why = throttle_validate(&tp, &field)))
                ok = fail(L, m, "rate_limit", "requests_per_unit %u per %llds with %s: %s (%s)", r->requests_per_unit,
                          (long long)r->period_s, throttle_algo_name(r->algo), why, field ? field : "parameters");
        }
    }
    free(unit);
    return ok;
}

static bool load_descriptors(loader_t *L, rls_node_t *parent, const yaml_node_t *seq, const char *domain,
                             const char *parent_path);

static bool load_descriptor(loader_t *L, rls_node_t *n, const yaml_node_t *m, const char *domain,
                            const char *parent_path)
{
    if (m->type != YAML_MAPPING_NODE)
        return fail(L, m, "descriptors", "config error, yaml file contains list of type other than map");
    if (!check_keys(L, m, NULL, 0))
        return false;
    const yaml_node_t *rl = NULL, *subs = NULL;
    bool shadow = false, detailed = false, ok = true;
    FOR_PAIRS(L, m, k, v) {
        if (!ok)
            break;
        if (!strcmp(k, "key"))
            ok = get_str(L, v, "key", &n->key);
        else if (!strcmp(k, "value"))
            ok = get_str(L, v, "value", &n->value);
        else if (!strcmp(k, "rate_limit"))
            rl = is_null(v) ? NULL : v;
        else if (!strcmp(k, "descriptors"))
            subs = is_null(v) ? NULL : v;
        else if (!strcmp(k, "shadow_mode"))
            ok = is_null(v) || get_bool(L, v, "shadow_mode", &shadow);
        else if (!strcmp(k, "detailed_metric"))
            ok = is_null(v) || get_bool(L, v, "detailed_metric", &detailed);
        else if (!strcmp(k, "share_threshold"))
            ok = is_null(v) || get_bool(L, v, "share_threshold", &n->share_threshold);
        else if (!strcmp(k, "quota_mode")) {
            bool q = false;
            ok = is_null(v) || get_bool(L, v, "quota_mode", &q);
            if (ok && q)
                ok = fail(L, v, "quota_mode", "quota_mode is not supported by tally");
        }
    }
    if (!ok)
        return false;
    if (!n->key || !*n->key)
        return fail(L, m, "key", "descriptor has empty key");
    if (n->value && !*n->value) {
        free(n->value);
        n->value = NULL;
    }
    size_t kl = strlen(n->key), vl = n->value ? strlen(n->value) : 0;
    if (!(n->final = malloc(kl + 1 + vl + 1)))
        return oom(L, m);
    memcpy(n->final, n->key, kl + 1);
    if (n->value) {
        n->final[kl] = '_';
        memcpy(n->final + kl + 1, n->value, vl + 1);
    }
    n->wildcard = strchr(n->final, '*') != NULL;
    if (n->share_threshold && !n->wildcard)
        return fail(L, m, "share_threshold",
                    "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'",
                    n->final);
    size_t pl = strlen(parent_path);
    char *path = malloc(pl + 1 + strlen(n->final) + 1);
    if (!path)
        return oom(L, m);
    snprintf(path, pl + 1 + strlen(n->final) + 1, "%s.%s", parent_path, n->final);
    if (rl) {
        if (!(n->rule = calloc(1, sizeof(*n->rule)))) {
            free(path);
            return oom(L, rl);
        }
        bool has_unit;
        if (!load_rule(L, rl, n->rule, &has_unit)) {
            free(path);
            return false;
        }
        n->rule->domain = domain;
        n->rule->shadow = shadow;
        n->rule->detailed = detailed;
        n->rule->full_key = path;
        path = NULL;
        rls_rule_t **rules = realloc(L->set->rules, (L->set->nrules + 1) * sizeof(*rules));
        if (!rules)
            return oom(L, rl);
        L->set->rules = rules;
        rules[L->set->nrules++] = n->rule;
    }
    if (subs)
        ok = load_descriptors(L, n, subs, domain, n->rule ? n->rule->full_key : path);
    free(path);
    return ok;
}

static bool load_descriptors(loader_t *L, rls_node_t *parent, const yaml_node_t *seq, const char *domain,
                             const char *parent_path)
{
    if (seq->type != YAML_SEQUENCE_NODE)
        return fail(L, seq, "descriptors", "must be a list");
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (!n)
        return true;
    if (!(parent->children = calloc(n, sizeof(rls_node_t))))
        return oom(L, seq);
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *m = yaml_document_get_node(L->doc, seq->data.sequence.items.start[i]);
        rls_node_t *c = &parent->children[i];
        parent->nchildren = i + 1;
        if (!load_descriptor(L, c, m, domain, parent_path))
            return false;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(parent->children[j].final, c->final))
                return fail(L, m, "key", "duplicate descriptor composite key '%s.%s'", parent_path, c->final);
    }
    return true;
}

static bool load_root(loader_t *L, const yaml_node_t *root)
{
    static const char *const ours[] = { "charge_all" };
    const yaml_node_t *descs = NULL, *at = root;
    char *domain = NULL;
    bool charge_all = false, ok = true;
    if (root) {
        if (root->type != YAML_MAPPING_NODE && !is_null(root))
            return fail(L, root, "file", "must be a map with `domain` and `descriptors`");
        if (root->type == YAML_MAPPING_NODE) {
            if (!check_keys(L, root, ours, 1))
                return false;
            FOR_PAIRS(L, root, k, v) {
                if (!ok)
                    break;
                if (!strcmp(k, "domain")) {
                    ok = get_str(L, v, "domain", &domain);
                    at = v;
                } else if (!strcmp(k, "descriptors")) {
                    descs = is_null(v) ? NULL : v;
                } else if (!strcmp(k, "charge_all")) {
                    ok = get_bool(L, v, "charge_all", &charge_all);
                }
            }
        }
    }
    if (ok && (!domain || !*domain))
        ok = fail(L, at, "domain", "config file cannot have empty domain");
    if (ok && domain[0] == '}')   /* the keys' hash tag {domain} would be empty: one slot per key, not per domain */
        ok = fail(L, at, "domain", "must not start with '}' (tally's keys carry the domain as their cluster hash tag)");
    if (ok && rls_set_domain(L->set, domain, strlen(domain)))
        ok = fail(L, at, "domain", "duplicate domain '%s' in config file", domain);
    if (!ok) {
        free(domain);
        return false;
    }
    rls_domain_t *ds = realloc(L->set->domains, (L->set->ndomains + 1) * sizeof(*ds));
    if (!ds) {
        free(domain);
        return oom(L, at);
    }
    L->set->domains = ds;
    rls_domain_t *d = &ds[L->set->ndomains++];
    memset(d, 0, sizeof(*d));
    d->name = domain;
    d->charge_all = charge_all;
    return !descs || load_descriptors(L, &d->root, descs, domain, domain);
}

/* One YAML text (the first document, as gopkg.in/yaml.v2 reads). */
static bool load_text(rls_set_t *set, const char *file, const void *text, size_t len, char *err, size_t errlen)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errlen, "%s: out of memory", file);
        return false;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(err, errlen, "%s:%lu: yaml: error loading config file: %s%s%s", file,
                 (unsigned long)(parser.problem_mark.line + 1), parser.problem ? parser.problem : "malformed",
                 parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return false;
    }
    loader_t L = { file, &doc, set, err, errlen, false };
    bool ok = load_root(&L, yaml_document_get_root_node(&doc));
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return ok;
}

static bool load_file(rls_set_t *set, const char *file, char *err, size_t errlen)
{
    FILE *f = fopen(file, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", file, strerror(errno));
        return false;
    }
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    bool ok = true;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            unsigned char *b = cap <= RLS_FILE_MAX + 1 ? realloc(buf, cap) : NULL;
            if (!b) {
                snprintf(err, errlen, "%s: larger than %d bytes", file, RLS_FILE_MAX);
                ok = false;
                break;
            }
            buf = b;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) {
                snprintf(err, errlen, "%s: %s", file, strerror(errno));
                ok = false;
            }
            break;
        }
    }
    fclose(f);
    ok = ok && load_text(set, file, buf ? buf : (unsigned char *)"", len, err, errlen);
    free(buf);
    return ok;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool yaml_name(const char *n)
{
    size_t l = strlen(n);
    return n[0] != '.' && ((l > 5 && !strcmp(n + l - 5, ".yaml")) || (l > 4 && !strcmp(n + l - 4, ".yml")));
}

/* A directory's *.yaml / *.yml files, in name order (hidden files skipped). */
static bool load_dir(rls_set_t *set, const char *path, DIR *d, char *err, size_t errlen)
{
    char **names = NULL;
    size_t n = 0;
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (!yaml_name(e->d_name))
            continue;
        char **nn = n < RLS_FILES_MAX ? realloc(names, (n + 1) * sizeof(*nn)) : NULL;
        if (!nn || !(nn[n] = malloc(strlen(path) + 1 + strlen(e->d_name) + 1))) {
            if (nn)
                names = nn;
            snprintf(err, errlen, "%s: more than %d files, or out of memory", path, RLS_FILES_MAX);
            ok = false;
            break;
        }
        names = nn;
        sprintf(names[n], "%s/%s", path, e->d_name);
        n++;
    }
    if (ok)
        qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; ok && i < n; i++)
        ok = load_file(set, names[i], err, errlen);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return ok;
}

rls_set_t *rls_set_parse(const char *name, const void *text, size_t len, char *err, size_t errlen)
{
    rls_set_t *set = calloc(1, sizeof(*set));
    if (!set) {
        snprintf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    atomic_init(&set->refs, 1);
    if (len > RLS_FILE_MAX) {
        snprintf(err, errlen, "%s: larger than %d bytes", name, RLS_FILE_MAX);
        set_free(set);
        return NULL;
    }
    if (!load_text(set, name, len ? text : (const void *)"", len, err, errlen)) {
        set_free(set);
        return NULL;
    }
    return set;
}

rls_set_t *rls_set_load(const char *path, char *err, size_t errlen)
{
    rls_set_t *set = calloc(1, sizeof(*set));
    if (!set) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    atomic_init(&set->refs, 1);
    DIR *d = opendir(path);
    bool ok;
    if (d) {
        ok = load_dir(set, path, d, err, errlen);
        closedir(d);
    } else if (errno == ENOTDIR) {
        ok = load_file(set, path, err, errlen);
    } else {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        ok = false;
    }
    if (!ok) {
        set_free(set);
        return NULL;
    }
    return set;
}
