/*
 * grpc.h - gRPC's bytes and Envoy's rate limit messages, translated only:
 * no sockets, no HTTP/2 (service/grpc_server.c owns those), no decision
 * (rls/ makes it on the command layer).
 *
 *   a stream's body      5-byte prefix (compressed flag, big-endian length)
 *                        + one protobuf message (grpc_frame_parse)
 *   grpc-timeout         "<1-8 digits><H|M|S|m|u|n>" (grpc_timeout_parse)
 *   grpc-message         percent-encoded (grpc_message_encode)
 *   RateLimitRequest  -> rls_request_t (grpc_rls_decode; its strings point
 *                        into the decoded message, freed by grpc_rls_req_free)
 *   rls_result_t      -> RateLimitResponse, framed (grpc_rls_encode)
 *   cmd_err_t         -> a gRPC status (grpc_code_of)
 *   grpc.health.v1    HealthCheckRequest / HealthCheckResponse
 *
 * The messages are protobuf-c's, generated at build time from proto/
 * (Envoy's package, message and field numbers in tally's own files).
 */
#ifndef TALLY_GRPC_H
#define TALLY_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd/err.h"
#include "rls/rls.h"

/* gRPC's status codes (grpc/doc/statuscodes.md). */
typedef enum grpc_code {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_UNKNOWN = 2,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_NOT_FOUND = 5,
    GRPC_ALREADY_EXISTS = 6,
    GRPC_PERMISSION_DENIED = 7,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_ABORTED = 10,
    GRPC_OUT_OF_RANGE = 11,
    GRPC_UNIMPLEMENTED = 12,
    GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14,
    GRPC_DATA_LOSS = 15,
    GRPC_UNAUTHENTICATED = 16,
} grpc_code_t;

/* The largest message accepted (gRPC's default receive limit, 4 MiB). */
#define GRPC_MAX_MESSAGE (4u << 20)
/* Envoy sends a handful; a request with more is refused before any work. */
#define GRPC_MAX_DESCRIPTORS 256
#define GRPC_MAX_ENTRIES 64

typedef enum grpc_frame {
    GRPC_FRAME_ONE,              /* exactly one whole message */
    GRPC_FRAME_SHORT,            /* fewer bytes than the prefix says (truncated) */
    GRPC_FRAME_EXTRA,            /* bytes after the first message (a unary call has one) */
    GRPC_FRAME_COMPRESSED,       /* the compressed flag: tally accepts identity only */
    GRPC_FRAME_BAD_FLAG,         /* a flag byte other than 0 or 1 */
    GRPC_FRAME_TOO_LARGE,        /* the prefix says more than max */
} grpc_frame_t;

/* The message a unary call's whole body holds. */
grpc_frame_t grpc_frame_parse(const uint8_t *body, size_t len, size_t max, const uint8_t **msg, size_t *mlen);
/* Writes the 5-byte prefix of an uncompressed message of mlen bytes. */
void grpc_frame_prefix(uint8_t out[5], size_t mlen);

/* grpc-timeout's value in nanoseconds; false when malformed. */
bool grpc_timeout_parse(const char *v, size_t len, int64_t *ns);

/* grpc-message's percent-encoding of msg (every byte outside 0x20-0x7e,
 * and '%'), into out (NUL-terminated, cut short to fit). */
void grpc_message_encode(const char *msg, char *out, size_t outlen);

/* The status answering a command-layer refusal. */
grpc_code_t grpc_code_of(cmd_code_t code);
/* The canonical name of a status ("RESOURCE_EXHAUSTED"). */
const char *grpc_code_name(grpc_code_t code);

/* A decoded RateLimitRequest: q is the request rls_should_rate_limit takes. */
typedef struct grpc_rls_req {
    rls_request_t q;
    void *msg;                   /* the protobuf-c message q's strings point into */
    rls_descriptor_t *descs;
    rls_entry_t *entries;
} grpc_rls_req_t;

/* Decodes a RateLimitRequest; false with a message (a malformed message,
 * too many descriptors or entries, an unknown unit in an override). */
bool grpc_rls_decode(const uint8_t *p, size_t n, grpc_rls_req_t *out, char *err, size_t errlen);
void grpc_rls_req_free(grpc_rls_req_t *r);

/* A RateLimitResponse for res, framed (prefix included): malloc'd, *len
 * bytes; NULL when out of memory. */
uint8_t *grpc_rls_encode(const rls_result_t *res, size_t *len);

/* grpc.health.v1: the service a HealthCheckRequest names (a malloc'd
 * string, "" for the server as a whole); NULL when malformed. */
char *grpc_health_decode(const uint8_t *p, size_t n);
/* HealthCheckResponse.ServingStatus */
enum { GRPC_HEALTH_SERVING = 1, GRPC_HEALTH_NOT_SERVING = 2, GRPC_HEALTH_SERVICE_UNKNOWN = 3 };
/* A framed HealthCheckResponse (malloc'd); NULL when out of memory. */
uint8_t *grpc_health_encode(int status, size_t *len);

#endif
