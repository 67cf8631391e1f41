/*
 * ts_filter_model.h - the brute-force model of one RedisTimeSeries label
 * filter (l=v, l!=v, l=, l!=, l=(a,b), l!=(a,b)), read from its text, for the
 * unit test of core/ts's matcher and the integration test of /mts: a series
 * with labels names[i] = values[i] passes it or not.
 */
#ifndef TALLY_TS_FILTER_MODEL_H
#define TALLY_TS_FILTER_MODEL_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static inline bool ts_filter_model(const char *f, const char *const *names, const char *const *values, size_t n)
{
    const char *ne = strstr(f, "!="), *eq = strchr(f, '=');
    bool negate = ne && ne < eq;
    size_t nl = (size_t)((negate ? ne : eq) - f);
    const char *rest = eq + 1;
    const char *have = NULL;
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == nl && strncmp(names[i], f, nl) == 0)
            have = values[i];
    if (!*rest)
        return negate ? have != NULL : have == NULL;
    bool in = false;
    if (*rest == '(') {
        char buf[64];
        snprintf(buf, sizeof(buf), "%.*s", (int)(strlen(rest) - 2), rest + 1);
        for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            in |= have && strcmp(t, have) == 0;
    } else {
        in = have && strcmp(rest, have) == 0;
    }
    return negate ? !in : in;
}

#endif
