/*
 * err.h - what went wrong, said once for every protocol.
 *
 * A refused request is a code - the class of failure a client tells apart -
 * and a message written for a person, naming the field at fault when there
 * is one.  Every check and every operation of the command layer fills a
 * cmd_err_t; each front-end turns it into its protocol's own form: the HTTP
 * adapter into a status and the JSON envelope (api/respond.c), the Redis
 * protocol into its error prefixes (-WRONGTYPE, -OOM, -MOVED...).
 *
 * The messages are the ones tally has always answered over HTTP, byte for
 * byte: a front-end may replace them (Redis clients expect Redis's texts),
 * never the reverse.
 */
#ifndef TALLY_CMD_ERR_H
#define TALLY_CMD_ERR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* One code per failure class a client tells apart.  The HTTP status of
 * each is in api/respond.c's table; the values are not stored anywhere. */
typedef enum cmd_code {
    CMD_E_BAD_REQUEST = 0,       /* a parameter is malformed or out of range (the message names it) */
    CMD_E_UNAUTHORIZED,          /* no token, or an unknown one */
    CMD_E_FORBIDDEN,             /* the token lacks the scope, or the key is outside its prefixes */
    CMD_E_NOT_FOUND,             /* a key that must exist does not; an unknown route */
    CMD_E_METHOD_NOT_ALLOWED,
    CMD_E_WRONGTYPE,             /* the key holds another type */
    CMD_E_EXISTS,                /* creating what exists */
    CMD_E_PAYLOAD_TOO_LARGE,
    CMD_E_URI_TOO_LONG,
    CMD_E_UNSUPPORTED_MEDIA_TYPE,
    CMD_E_OUT_OF_MEMORY,         /* --maxmemory, or an allocation failed */
    CMD_E_INTERNAL,
    CMD_E_UNAVAILABLE,           /* not applied, retry: no journal space, too few replicas, loading, fenced */
    CMD_E_NO_SPACE,              /* a snapshot on a full disk */
    CMD_E_REQUEST_TIMEOUT,       /* the request stopped arriving */
    CMD_E_MISDIRECTED,           /* a Host a loopback-bound tallyd does not serve */
    CMD_E_TOO_MANY_REQUESTS,     /* too many unknown tokens from one address */
    CMD_E_READONLY,              /* a change sent to a replica (names its primary) */
    CMD_E_GONE,                  /* a replication position the primary no longer holds */
    CMD_E_CONFLICT,              /* a replication request from a newer epoch than this node's */
    CMD_E_CROSSSLOT,             /* a request's keys span cluster slots */
    CMD_E_MOVED,                 /* another node owns the key's slot (names it) */
    CMD_E_ASK,                   /* the key's slot is migrating and the key has left (names the target) */
    CMD_E_TRYAGAIN,              /* a migrating slot holds only some of the request's keys */
    CMD_E_PRECONDITION_FAILED,   /* a conditional delete of a value that changed */
    CMD_E__COUNT
} cmd_code_t;

/* A failure, described before it is answered (jansson's json_error_t is
 * the model).  A field name longer than the buffer (an unknown field the
 * client sent) is borrowed, not copied: it points into the request, which
 * outlives the answer. */
typedef struct cmd_err {
    cmd_code_t code;
    char field[80];              /* the offending field; "" for none */
    const char *long_field;      /* the field when it does not fit in field[]; else NULL */
    char message[512];
    /* What a front-end tells the client besides the message (each cleared
     * by cmd_err_set, then set by the check that needs it): */
    char where[512];             /* MOVED / ASK: the owner's host:port; READONLY: the primary's base URL */
    char node[64];               /* MOVED / ASK: the owner's node name */
    int slot;                    /* MOVED / ASK: the key's cluster slot (-1: none) */
    uint64_t epoch;              /* MOVED / ASK: the epoch of the cluster map that says so */
    int retry_after;             /* seconds a client should wait before retrying (0: none said) */
    const char *scope;           /* FORBIDDEN for a scope: the scope lacked (NULL: a key prefix, or none) */
} cmd_err_t;

/* Fills err (printf-style message); field may be NULL. */
void cmd_err_set(cmd_err_t *err, cmd_code_t code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The field of err, or NULL when it names none. */
const char *cmd_err_field(const cmd_err_t *err);

/* The code answering a core status (the one mapping of core_status_t;
 * CORE_OK maps to CMD_E_INTERNAL: it is no error to answer). */
cmd_code_t cmd_status_code(core_status_t st);

#endif
