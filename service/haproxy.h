/*
 * haproxy.h - the HAProxy configuration that routes requests to the node
 * owning their key's slot (`tallyd --cluster FILE --haproxy-config`).
 */
#ifndef TALLY_HAPROXY_H
#define TALLY_HAPROXY_H

#include <stdio.h>

#include "core/clustermap.h"

/* Writes the configuration for map m (read from `source`, named in a
 * comment) to out. */
void haproxy_config_write(const cmap_t *m, const char *source, FILE *out);

#endif
