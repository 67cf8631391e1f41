/* log.c - see log.h.  One fprintf per line, so lines from threads never interleave. */
#include "service/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int current_level = LOG_INFO;
static const char *const names[] = { "ERROR", "WARN", "INFO", "DEBUG" };

void log_set_level(int level) { current_level = level; }

int log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

void log_msg(int level, const char *fmt, ...)
{
    if (level > current_level)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s\n", tm.tm_year + 1900, tm.tm_mon + 1,
            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, names[level], msg);
}
