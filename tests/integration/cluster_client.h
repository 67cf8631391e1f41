/*
 * cluster_client.h - a client of a tally cluster for the integration tests
 * (deploy/cluster/README.md, "Clients during a move"): one request to one
 * address, and the loop a cluster client runs around it - follow 421 MOVED
 * to the owner, 421 ASK to the target once with X-Tally-Asking: 1 - exactly
 * what a Redis Cluster client does.
 */
#ifndef TALLY_CLUSTER_CLIENT_H
#define TALLY_CLUSTER_CLIENT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct cc_resp {
    long status;          /* 0: no answer (transport error) */
    char owner[128];      /* X-Tally-Owner of a 421 */
    char code[24];        /* the error envelope's code */
    char *body;           /* NUL-terminated (malloc'd; cc_free) */
    size_t len;
    int moved, asks;      /* 421s followed by cc_call */
} cc_resp_t;

/* One request to host:port addr.  body NULL: none; ctype NULL:
 * application/json.  rkey: an X-Tally-Key header (NULL: none); asking: send
 * X-Tally-Asking: 1.  The handle is reused (curl_easy_reset). */
cc_resp_t cc_send(CURL *c, const char *addr, const char *method, const char *path, const void *body, size_t len,
                  const char *ctype, const char *rkey, bool asking);
/* cc_send to addr, following at most 5 421s (MOVED: resend to the owner;
 * ASK: resend there once with X-Tally-Asking: 1). */
cc_resp_t cc_call(CURL *c, const char *addr, const char *method, const char *path, const char *body,
                  const char *rkey);
void cc_free(cc_resp_t *r);
/* A sample of addr's /metrics: the value of the line "name{labels} V" (name
 * given with its labels exactly as printed); -1 when absent. */
long long cc_metric(const char *addr, const char *name);

#endif
