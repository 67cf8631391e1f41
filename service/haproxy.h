/*
 * haproxy.h - HAProxy in front of a tally cluster: the configuration that
 * routes requests to the node owning their key's slot (`tallyd --cluster
 * FILE --haproxy-config`), the slot map file that configuration reads
 * (`--haproxy-slots`), the Lua script computing the slot (`--haproxy-lua`), and
 * the runtime update of that map over HAProxy's stats socket (what
 * tally-reshard does when a reshard flips the map), so HAProxy follows a
 * reshard without a reload.
 */
#ifndef TALLY_HAPROXY_H
#define TALLY_HAPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/clustermap.h"

/* Where the generated configuration has HAProxy read its slot map, and
 * open its admin socket, unless told otherwise. */
#define HAPROXY_MAP_DEFAULT "/etc/haproxy/tally-slots.map"
#define HAPROXY_SOCKET_DEFAULT "/run/haproxy/tally.sock"
/* The Lua script with the slot converter: this name, in the slot map
 * file's directory. */
#define HAPROXY_LUA_FILE "tally-slot.lua"

/* Writes the Lua script the configuration loads (lua.tally_slot: a routing
 * key's slot, core/slot.h's function) to out. */
void haproxy_lua_write(FILE *out);
/* Where the configuration loads it from, for a slot map file at map_path. */
void haproxy_lua_path(const char *map_path, char *out, size_t outlen);

/* Writes the configuration for map m (read from `source`, named in a
 * comment) to out: the slot map is read from map_path, the admin socket
 * listens at socket_path.  keyed: the path families whose second segment
 * is the key ("throttle|counter|..."), unkeyed: the two-segment paths of
 * those families that hold no key ("geo/nearby"), both "|" lists as the
 * route table gives them (api_keyed_paths). */
void haproxy_config_write(const cmap_t *m, const char *source, const char *map_path, const char *socket_path,
                          const char *keyed, const char *unkeyed, FILE *out);
/* Replaces the slot map file at path (a temporary file, fsync, rename: a
 * restarting HAProxy reads the old map or the new one, never half).  False
 * with a message. */
bool haproxy_map_save(const cmap_t *m, const char *path, char *err, size_t errlen);
/* Replaces a running HAProxy's copy of the slot map map_path (the file name
 * its configuration names) with m's ranges, atomically (prepare map, add map
 * @version, commit map), over its admin socket: a path (unix socket) or
 * host:port (a TCP `stats socket ipv4@...`).  False with a message. */
bool haproxy_runtime_set_map(const char *socket, const char *map_path, const cmap_t *m, char *err, size_t errlen);

/* Whether a running HAProxy can follow m: its admin socket answers, it
 * loaded the slot map map_path, and it has the backend of every node of m
 * (a node added to the map needs the configuration regenerated and HAProxy
 * reloaded first).  False with a message naming what is missing. */
bool haproxy_runtime_check(const char *socket, const char *map_path, const cmap_t *m, char *err, size_t errlen);


#endif
