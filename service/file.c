/* file.c - small files replaced whole and durably: see file.h. */
#include "service/file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int file_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int rc = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

int file_write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

bool file_replace(const char *path, const void *data, size_t len, unsigned mode)
{
    size_t n = strlen(path) + 5;
    char *tmp = malloc(n), *dir = strdup(path);
    if (!tmp || !dir) {
        free(tmp);
        free(dir);
        errno = ENOMEM;
        return false;
    }
    snprintf(tmp, n, "%s.tmp", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else
        slash[slash == dir] = '\0';   /* "/name": the root */
    int e = 0, fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        e = errno;
    if (!e)
        e = file_write_all(fd, data, len);
    if (!e && fsync(fd) != 0)
        e = errno;
    if (fd >= 0 && close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (!e)
        e = file_fsync_dir(dir);
    if (e)
        unlink(tmp);
    free(tmp);
    free(dir);
    errno = e;
    return !e;
}

bool file_readable_by_others(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && (sb.st_mode & S_IROTH);
}
