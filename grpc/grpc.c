/* grpc.c - see grpc.h: gRPC's framing and headers, and Envoy's rate limit
 * messages to and from rls/rls.h's types. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "grpc/grpc.h"
#include "grpc/health/v1/health.pb-c.h"

/* ------------------------------------------------------------------------ */
/* Framing and headers                                                      */
/* ------------------------------------------------------------------------ */

grpc_frame_t grpc_frame_parse(const uint8_t *body, size_t len, size_t max, const uint8_t **msg, size_t *mlen)
{
    if (len < 5)
        return GRPC_FRAME_SHORT;
    if (body[0] > 1)
        return GRPC_FRAME_BAD_FLAG;
    size_t n = (size_t)body[1] << 24 | (size_t)body[2] << 16 | (size_t)body[3] << 8 | body[4];
    if (n > max)
        return GRPC_FRAME_TOO_LARGE;
    if (body[0] == 1)
        return GRPC_FRAME_COMPRESSED;
    if (len - 5 < n)
        return GRPC_FRAME_SHORT;
    if (len - 5 > n)
        return GRPC_FRAME_EXTRA;
    *msg = body + 5;
    *mlen = n;
    return GRPC_FRAME_ONE;
}

void grpc_frame_prefix(uint8_t out[5], size_t mlen)
{
    out[0] = 0;
    out[1] = (uint8_t)(mlen >> 24);
    out[2] = (uint8_t)(mlen >> 16);
    out[3] = (uint8_t)(mlen >> 8);
    out[4] = (uint8_t)mlen;
}

bool grpc_timeout_parse(const char *v, size_t len, int64_t *ns)
{
    if (len < 2 || len > 9)   /* at most 8 digits and the unit */
        return false;
    int64_t n = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        n = n * 10 + (v[i] - '0');
    }
    int64_t mul;
    switch (v[len - 1]) {
    case 'H': mul = 3600LL * 1000000000LL; break;
    case 'M': mul = 60LL * 1000000000LL; break;
    case 'S': mul = 1000000000LL; break;
    case 'm': mul = 1000000LL; break;
    case 'u': mul = 1000LL; break;
    case 'n': mul = 1; break;
    default: return false;
    }
    *ns = n > INT64_MAX / mul ? INT64_MAX : n * mul;   /* 99999999 hours does not fit: "forever" */
    return true;
}

void grpc_message_encode(const char *msg, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (!outlen)
        return;
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        bool plain = *p >= 0x20 && *p <= 0x7e && *p != '%';
        size_t need = plain ? 1 : 3;
        if (o + need >= outlen)
            break;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
}

grpc_code_t grpc_code_of(cmd_code_t code)
{
    switch (code) {
    case CMD_E_BAD_REQUEST:
    case CMD_E_URI_TOO_LONG:
    case CMD_E_UNSUPPORTED_MEDIA_TYPE:
    case CMD_E_METHOD_NOT_ALLOWED:
    case CMD_E_MISDIRECTED:
        return GRPC_INVALID_ARGUMENT;
    case CMD_E_UNAUTHORIZED: return GRPC_UNAUTHENTICATED;
    case CMD_E_FORBIDDEN: return GRPC_PERMISSION_DENIED;
    case CMD_E_NOT_FOUND: return GRPC_NOT_FOUND;
    case CMD_E_EXISTS: return GRPC_ALREADY_EXISTS;
    case CMD_E_WRONGTYPE:
    case CMD_E_PRECONDITION_FAILED:
    case CMD_E_CROSSSLOT:
        return GRPC_FAILED_PRECONDITION;
    case CMD_E_PAYLOAD_TOO_LARGE:
    case CMD_E_OUT_OF_MEMORY:
    case CMD_E_NO_SPACE:
    case CMD_E_TOO_MANY_REQUESTS:
        return GRPC_RESOURCE_EXHAUSTED;
    case CMD_E_REQUEST_TIMEOUT: return GRPC_DEADLINE_EXCEEDED;
    case CMD_E_UNAVAILABLE:
    case CMD_E_READONLY:
    case CMD_E_MOVED:
    case CMD_E_ASK:
    case CMD_E_TRYAGAIN:
        return GRPC_UNAVAILABLE;
    case CMD_E_CONFLICT: return GRPC_ABORTED;
    case CMD_E_GONE: return GRPC_OUT_OF_RANGE;
    case CMD_E_INTERNAL:
    case CMD_E__COUNT:
        break;
    }
    return GRPC_INTERNAL;
}

const char *grpc_code_name(grpc_code_t code)
{
    static const char *const names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
        "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
        "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    };
    return (unsigned)code < sizeof(names) / sizeof(names[0]) ? names[code] : "UNKNOWN";
}

/* ------------------------------------------------------------------------ */
/* RateLimitRequest -> rls_request_t                                        */
/* ------------------------------------------------------------------------ */

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest pb_req_t;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor pb_desc_t;

static rls_str_t str_of(const char *s) { return (rls_str_t){ s ? s : "", s ? strlen(s) : 0 }; }

bool grpc_rls_decode(const uint8_t *p, size_t n, grpc_rls_req_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    pb_req_t *m = envoy__service__ratelimit__v3__rate_limit_request__unpack(NULL, n, p);
    if (!m) {
        snprintf(err, errlen, "the RateLimitRequest is not a valid protobuf message");
        return false;
    }
    out->msg = m;
    if (m->n_descriptors > GRPC_MAX_DESCRIPTORS) {
        snprintf(err, errlen, "descriptors: %zu of them, more than the %d a request may have", m->n_descriptors,
                 GRPC_MAX_DESCRIPTORS);
        goto fail;
    }
    size_t nent = 0;
    for (size_t i = 0; i < m->n_descriptors; i++) {
        const pb_desc_t *d = m->descriptors[i];
        if (d->n_entries > GRPC_MAX_ENTRIES) {
            snprintf(err, errlen, "descriptors[%zu].entries: %zu of them, more than the %d a descriptor may have", i,
                     d->n_entries, GRPC_MAX_ENTRIES);
            goto fail;
        }
        if (d->limit && ((unsigned)d->limit->unit > RLS_UNIT_WEEK || d->limit->unit == 0)) {
            snprintf(err, errlen, "descriptors[%zu].limit.unit: %d is not a unit (SECOND 1 ... YEAR 6, WEEK 7)", i,
                     (int)d->limit->unit);
            goto fail;
        }
        nent += d->n_entries;
    }
    out->descs = calloc(m->n_descriptors ? m->n_descriptors : 1, sizeof(*out->descs));
    out->entries = calloc(nent ? nent : 1, sizeof(*out->entries));
    if (!out->descs || !out->entries) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    size_t e = 0;
    for (size_t i = 0; i < m->n_descriptors; i++) {
        const pb_desc_t *d = m->descriptors[i];
        rls_descriptor_t *r = &out->descs[i];
        r->entries = &out->entries[e];
        r->nentries = d->n_entries;
        for (size_t j = 0; j < d->n_entries; j++, e++) {
            out->entries[e].key = str_of(d->entries[j]->key);
            out->entries[e].value = str_of(d->entries[j]->value);
        }
        if (d->limit) {
            r->has_limit = true;
            r->limit.requests_per_unit = d->limit->requests_per_unit;
            r->limit.unit = (rls_unit_t)d->limit->unit;
            r->limit.name = str_of(NULL);
        }
        if (d->hits_addend) {
            r->has_hits_addend = true;
            r->hits_addend = d->hits_addend->value;
        }
    }
    out->q.domain = str_of(m->domain);
    out->q.descriptors = out->descs;
    out->q.n = m->n_descriptors;
    out->q.hits_addend = m->hits_addend;
    return true;
fail:
    grpc_rls_req_free(out);
    return false;
}

void grpc_rls_req_free(grpc_rls_req_t *r)
{
    if (r->msg)
        envoy__service__ratelimit__v3__rate_limit_request__free_unpacked(r->msg, NULL);
    free(r->descs);
    free(r->entries);
    memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------------------ */
/* rls_result_t -> RateLimitResponse                                        */
/* ------------------------------------------------------------------------ */

typedef Envoy__Service__Ratelimit__V3__RateLimitResponse pb_resp_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus pb_status_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit pb_limit_t;
typedef Envoy__Config__Core__V3__HeaderValue pb_header_t;

/* protobuf-c's strings are NUL-terminated: a length-delimited one is copied. */
static char *cstr(rls_str_t s)
{
    char *p = malloc(s.len + 1);
    if (p) {
        memcpy(p, s.p ? s.p : "", s.len);
        p[s.len] = '\0';
    }
    return p;
}

uint8_t *grpc_rls_encode(const rls_result_t *res, size_t *len)
{
    pb_resp_t m = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__INIT;
    size_t n = res->n, nh = res->nheaders;
    pb_status_t *st = calloc(n ? n : 1, sizeof(*st));
    pb_status_t **stp = calloc(n ? n : 1, sizeof(*stp));
    pb_limit_t *lim = calloc(n ? n : 1, sizeof(*lim));
    char **names = calloc(n ? n : 1, sizeof(*names));
    Google__Protobuf__Duration *dur = calloc(n ? n : 1, sizeof(*dur));
    pb_header_t *hv = calloc(nh ? nh : 1, sizeof(*hv));
    pb_header_t **hvp = calloc(nh ? nh : 1, sizeof(*hvp));
    uint8_t *out = NULL;
    bool ok = st && stp && lim && names && dur && hv && hvp;
    for (size_t i = 0; ok && i < n; i++) {
        const rls_status_t *s = &res->statuses[i];
        pb_status_t init = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__DESCRIPTOR_STATUS__INIT;
        st[i] = init;
        stp[i] = &st[i];
        st[i].code = (Envoy__Service__Ratelimit__V3__RateLimitResponse__Code)s->code;
        st[i].limit_remaining = s->limit_remaining;
        if (s->has_limit) {
            pb_limit_t li = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__INIT;
            lim[i] = li;
            if (!(names[i] = cstr(s->current_limit.name))) {
                ok = false;
                break;
            }
            lim[i].name = names[i];
            lim[i].requests_per_unit = s->current_limit.requests_per_unit;
            lim[i].unit = (Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit__Unit)s->current_limit.unit;
            st[i].current_limit = &lim[i];
        }
        if (s->has_reset) {
            Google__Protobuf__Duration di = GOOGLE__PROTOBUF__DURATION__INIT;
            int64_t ms = s->reset_ms < 0 ? 0 : s->reset_ms;
            di.seconds = ms / 1000;
            di.nanos = (int32_t)(ms % 1000) * 1000000;
            dur[i] = di;
            st[i].duration_until_reset = &dur[i];
        }
    }
    for (size_t i = 0; ok && i < nh; i++) {
        pb_header_t hi = ENVOY__CONFIG__CORE__V3__HEADER_VALUE__INIT;
        hv[i] = hi;
        hv[i].key = res->headers[i].name;
        hv[i].value = res->headers[i].value;
        hvp[i] = &hv[i];
    }
    if (ok) {
        m.overall_code = (Envoy__Service__Ratelimit__V3__RateLimitResponse__Code)res->overall;
        m.n_statuses = n;
        m.statuses = stp;
        m.n_response_headers_to_add = nh;
        m.response_headers_to_add = hvp;
        size_t sz = envoy__service__ratelimit__v3__rate_limit_response__get_packed_size(&m);
        out = malloc(sz + 5);
        if (out) {
            grpc_frame_prefix(out, sz);
            envoy__service__ratelimit__v3__rate_limit_response__pack(&m, out + 5);
            *len = sz + 5;
        }
    }
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(st);
    free(stp);
    free(lim);
    free(names);
    free(dur);
    free(hv);
    free(hvp);
    return out;
}

/* ------------------------------------------------------------------------ */
/* grpc.health.v1                                                           */
/* ------------------------------------------------------------------------ */

char *grpc_health_decode(const uint8_t *p, size_t n)
{
    Grpc__Health__V1__HealthCheckRequest *m = grpc__health__v1__health_check_request__unpack(NULL, n, p);
    if (!m)
        return NULL;
    char *s = strdup(m->service ? m->service : "");
    grpc__health__v1__health_check_request__free_unpacked(m, NULL);
    return s;
}

uint8_t *grpc_health_encode(int status, size_t *len)
{
    Grpc__Health__V1__HealthCheckResponse m = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    m.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
    size_t sz = grpc__health__v1__health_check_response__get_packed_size(&m);
    uint8_t *out = malloc(sz + 5);
    if (!out)
        return NULL;
    grpc_frame_prefix(out, sz);
    grpc__health__v1__health_check_response__pack(&m, out + 5);
    *len = sz + 5;
    return out;
}
