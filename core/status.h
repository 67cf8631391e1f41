/*
 * status.h - the one status enum of core/.
 *
 * A core function that can fail for a reason the caller must tell apart
 * returns a core_status_t, or a family result whose negative values are
 * core_status_t (bloom_add: 1 added, 0 present, CORE_NOMEM, CORE_FULL).
 * Whatever the status, a function that fails leaves its structure as it was
 * (batches roll back).  api/ maps each status to an HTTP error code in one
 * place (api_status_code in api/respond.c); the message text stays with the
 * family, which knows what was being done.
 */
#ifndef TALLY_CORE_STATUS_H
#define TALLY_CORE_STATUS_H

typedef enum core_status {
    CORE_OK = 0,
    CORE_NOMEM = -1,       /* an allocation failed */
    CORE_FULL = -2,        /* at a limit of the structure itself (non-scaling filter, sub-filter cap) */
    CORE_TOO_OLD = -3,     /* older than the retention window allows */
    CORE_DUPLICATE = -4,   /* the place is taken and the policy refuses a second value */
    CORE_OVERFLOW = -5,    /* the result would not be finite / would exceed the type's range */
    CORE_UNORDERED = -6,   /* input that must come in order did not */
    CORE_LIMIT = -7,       /* growing further would pass a limit (memory limit, expansion cap) */
    CORE_BUDGET = -8,      /* the change needs more bytes than the caller's max_bytes allows: it asks
                              for room (or refuses the value's size), then tries again */
} core_status_t;

#endif
