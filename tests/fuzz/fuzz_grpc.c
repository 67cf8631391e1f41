/*
 * fuzz_grpc.c - the gRPC message decoder (grpc/grpc.h) on bytes the fuzzer
 * shapes: a stream's body as it arrives over HTTP/2.
 *
 *   - grpc_frame_parse on the body: a message is reported only when the
 *     prefix says exactly the bytes that follow, within the 4 MiB limit;
 *   - grpc_rls_decode on the message (and on the raw bytes): refused, or a
 *     request whose descriptors and entries stay within their limits, every
 *     string inside the decoded message's memory and of its stated length;
 *   - the decoded request answered (a status per descriptor carrying its
 *     override, a header per entry) and encoded by grpc_rls_encode: the
 *     answer parses back (protobuf-c) to the same codes, limits and headers;
 *   - grpc_health_decode, grpc_timeout_parse and grpc_message_encode on the
 *     same bytes: no crash, and grpc-message's encoding is printable ASCII.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "grpc/grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_grpc: %s\n", what);
        abort();
    }
}

static void round_trip(const grpc_rls_req_t *r)
{
    const rls_request_t *q = &r->q;
    rls_status_t *st = calloc(q->n ? q->n : 1, sizeof(*st));
    rls_header_t *h = calloc(q->n ? q->n : 1, sizeof(*h));
    check(st && h, "out of memory");
    size_t nh = 0;
    for (size_t i = 0; i < q->n; i++) {
        const rls_descriptor_t *d = &q->descriptors[i];
        st[i].code = d->has_limit ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK;
        st[i].has_limit = d->has_limit;
        st[i].current_limit = d->limit;
        st[i].current_limit.name = d->nentries ? d->entries[0].value : (rls_str_t){ "", 0 };
        st[i].limit_remaining = (uint32_t)d->hits_addend;
        st[i].has_reset = d->has_hits_addend;
        st[i].reset_ms = (int64_t)(d->hits_addend % 100000000);
        if (d->nentries && d->entries[0].key.len) {
            h[nh].name = strndup(d->entries[0].key.p, d->entries[0].key.len);
            h[nh].value = strndup(d->entries[0].value.p, d->entries[0].value.len);
            nh++;
        }
    }
    rls_result_t res = { RLS_CODE_OK, st, q->n, h, nh, NULL };
    size_t len = 0;
    uint8_t *out = grpc_rls_encode(&res, &len);
    check(out != NULL, "encode failed");
    const uint8_t *msg;
    size_t mlen;
    check(grpc_frame_parse(out, len, SIZE_MAX, &msg, &mlen) == GRPC_FRAME_ONE, "the answer's framing");
    Envoy__Service__Ratelimit__V3__RateLimitResponse *m =
        envoy__service__ratelimit__v3__rate_limit_response__unpack(NULL, mlen, msg);
    check(m != NULL, "the answer does not parse");
    check(m->n_statuses == q->n && m->n_response_headers_to_add == nh, "the answer's counts");
    for (size_t i = 0; i < q->n; i++) {
        const Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus *s = m->statuses[i];
        check((int)s->code == (int)st[i].code, "a status's code");
        check(!!s->current_limit == st[i].has_limit, "a status's limit");
        if (s->current_limit)
            check(s->current_limit->requests_per_unit == st[i].current_limit.requests_per_unit &&
                      (int)s->current_limit->unit == (int)st[i].current_limit.unit,
                  "a status's limit values");
        check(s->limit_remaining == st[i].limit_remaining, "a status's remaining");
        check(!!s->duration_until_reset == st[i].has_reset, "a status's reset");
        if (s->duration_until_reset)
            check(s->duration_until_reset->seconds * 1000 + s->duration_until_reset->nanos / 1000000 == st[i].reset_ms,
                  "a status's reset value");
    }
    for (size_t i = 0; i < nh; i++)
        check(strcmp(m->response_headers_to_add[i]->key, h[i].name) == 0 &&
                  strcmp(m->response_headers_to_add[i]->value, h[i].value) == 0,
              "a header");
    envoy__service__ratelimit__v3__rate_limit_response__free_unpacked(m, NULL);
    free(out);
    for (size_t i = 0; i < nh; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
    free(st);
}

static void decode(const uint8_t *p, size_t n)
{
    grpc_rls_req_t r;
    char err[256];
    if (!grpc_rls_decode(p, n, &r, err, sizeof(err))) {
        check(err[0] != '\0', "a refusal without a message");
        return;
    }
    check(r.q.n <= GRPC_MAX_DESCRIPTORS, "too many descriptors");
    check(r.q.domain.p && strlen(r.q.domain.p) == r.q.domain.len, "the domain's length");
    for (size_t i = 0; i < r.q.n; i++) {
        const rls_descriptor_t *d = &r.q.descriptors[i];
        check(d->nentries <= GRPC_MAX_ENTRIES, "too many entries");
        check(!d->has_limit || (d->limit.unit >= RLS_UNIT_SECOND && d->limit.unit <= RLS_UNIT_WEEK), "a unit");
        for (size_t j = 0; j < d->nentries; j++)
            check(strlen(d->entries[j].key.p) == d->entries[j].key.len &&
                      strlen(d->entries[j].value.p) == d->entries[j].value.len,
                  "an entry's length");
    }
    round_trip(&r);
    grpc_rls_req_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *msg = NULL;
    size_t mlen = 0;
    grpc_frame_t f = grpc_frame_parse(data, size, GRPC_MAX_MESSAGE, &msg, &mlen);
    if (f == GRPC_FRAME_ONE) {
        check(size == mlen + 5 && msg == data + 5 && data[0] == 0, "a message that is not the whole body");
        decode(msg, mlen);
        char *svc = grpc_health_decode(msg, mlen);
        free(svc);
    }
    decode(data, size);

    int64_t ns;
    if (grpc_timeout_parse((const char *)data, size, &ns))
        check(ns >= 0, "a negative timeout");
    char *text = malloc(size + 1);
    check(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    char enc[128];
    grpc_message_encode(text, enc, sizeof(enc));
    for (const char *p = enc; *p; p++)
        check(*p >= 0x20 && *p <= 0x7e, "grpc-message holds a byte it must encode");
    free(text);
    return 0;
}
