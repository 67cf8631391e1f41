/*
 * file.h - small files replaced whole and durably: the cluster map, the
 * HAProxy slot map, the replication EPOCH.  A reader, or a crash at any
 * instant, sees the old file or the new one, never a mixture.
 */
#ifndef TALLY_SERVICE_FILE_H
#define TALLY_SERVICE_FILE_H

#include <stdbool.h>
#include <stddef.h>

/* Replaces the file at path with len bytes of data: a temporary file
 * path.tmp written and fsynced, renamed over path, then its directory
 * fsynced.  False with errno set (path.tmp removed). */
bool file_replace(const char *path, const void *data, size_t len);

/* Writes all n bytes to fd (retrying short writes and EINTR); 0 or errno. */
int file_write_all(int fd, const void *data, size_t n);

/* fsyncs the directory dir (a rename in it becomes durable); 0 or errno. */
int file_fsync_dir(const char *dir);

#endif
