/*
 * file.h - small files replaced whole and durably: the cluster map, the
 * HAProxy slot map, the replication EPOCH.  A reader, or a crash at any
 * instant, sees the old file or the new one, never a mixture.
 */
#ifndef TALLY_SERVICE_FILE_H
#define TALLY_SERVICE_FILE_H

#include <stdbool.h>
#include <stddef.h>

#define FILE_MODE_PRIVATE 0600       /* the data directory's files: only tallyd's user reads them */
#define FILE_MODE_SHARED 0644        /* maps other processes read (HAProxy, tally-reshard's readers) */

/* Replaces the file at path with len bytes of data: a temporary file
 * path.tmp (created with `mode`, before the umask) written and fsynced,
 * renamed over path, then its directory fsynced.  False with errno set
 * (path.tmp removed). */
bool file_replace(const char *path, const void *data, size_t len, unsigned mode);

/* True when the file at path exists and others (not its owner or group)
 * may read it: a secret there should be chmod o-r. */
bool file_readable_by_others(const char *path);

/* Writes all n bytes to fd (retrying short writes and EINTR); 0 or errno. */
int file_write_all(int fd, const void *data, size_t n);

/* fsyncs the directory dir (a rename in it becomes durable); 0 or errno. */
int file_fsync_dir(const char *dir);

#endif
