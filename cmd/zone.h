/*
 * zone.h - time zones for calendar windows (core/calendar.h), by IANA name,
 * from the system's tzdata through GLib's GTimeZone.
 *
 * GTimeZone reads and parses the tzdata file (and its POSIX rule for the
 * years past the file's table); its objects are immutable and may be used
 * from any thread.  Its offset lookup walks the zone's intervals one by one
 * (~120 ns for Europe/Paris in 2026, more as years pass), and it has no
 * "next change" lookup, so each zone is loaded once into a sorted table of
 * its offset changes between CAL_MIN_S and CAL_MAX_S (1900-2200, found by
 * bisection on GLib's own intervals) that answers both in a binary search;
 * before and after that range the table's first and last offsets stand.
 *
 * Zones are loaded on first use and kept for the life of the process (one
 * per name, shared by every limit and thread; a few hundred names exist, and
 * only names that load are kept), so a request pays a lock-free hash lookup,
 * never a file read, after the first.
 *
 * A name must be a file of the tzdata directory ($TZDIR, else
 * /usr/share/zoneinfo): "Europe/Paris", "UTC", "Etc/GMT+3".  Offsets
 * ("+05:30") and POSIX TZ rules ("EST5EDT,M3.2.0,M11.1.0" is no file) are
 * refused, so a name means the same rules on every machine with the same
 * tzdata.
 *
 * This file and the tests are the only ones that include GLib; it is linked
 * into the command layer (libtallycmd) and everything above it.
 */
#ifndef TALLY_CMD_ZONE_H
#define TALLY_CMD_ZONE_H

#include <stddef.h>

#include "core/calendar.h"

/* The zone named `name` (n bytes), or NULL with *why saying why (unknown
 * name, bad characters, out of memory).  The zone lives until the process
 * ends. */
const cal_zone_t *cmd_zone_get(const char *name, size_t n, const char **why);

#endif
