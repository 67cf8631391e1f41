/*
 * metrics.h - request counters and latency histograms, by route.
 *
 * Counters are relaxed atomics indexed by route (the route table's index, and
 * one slot for requests that matched no route) and by a small table of status
 * codes, so recording a request is a few uncontended increments.
 */
#ifndef TALLY_METRICS_H
#define TALLY_METRICS_H

#include <stdint.h>

#include "core/codec.h"

void metrics_init(void);
/* route: index in the route table or -1; duration in ns. */
void metrics_record(int route, int status, int64_t duration_ns);
/* Appends tally_http_* families in Prometheus text format. */
void metrics_render(wbuf_t *out);
uint64_t metrics_total_requests(void);

#endif
