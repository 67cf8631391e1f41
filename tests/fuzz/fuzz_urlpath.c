/*
 * fuzz_urlpath.c - the {path} of rate-limit keys (core/urlpath.h), which a
 * client writes through X-Forwarded-Uri, X-Original-URI or the hook's path.
 * Input: the path bytes.  Checked: the result fits the bound the header
 * states, is canonical (a leading '/', no trailing '/', no empty, "." or ".."
 * segment, no ';', '?', '#', '\' or control byte, no upper-case letter
 * outside an escape), normalising it again changes nothing, and a buffer
 * one byte too small is refused rather than overrun.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/urlpath.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    const char *in = (const char *)data;
    size_t cap = 3 * size + 1;
    char *once = malloc(cap), *twice = malloc(cap);
    if (!once || !twice)
        abort();
    size_t a = urlpath_normalize(in, size, once, cap);
    if (a == (size_t)-1 || a == 0 || a > cap || once[0] != '/' || (a > 1 && once[a - 1] == '/'))
        abort();
    for (size_t i = 0; i < a; i++) {
        unsigned char c = (unsigned char)once[i];
        bool hex_digit = (i >= 1 && once[i - 1] == '%') || (i >= 2 && once[i - 2] == '%');
        if (c < 0x20 || c == 0x7f || c == ';' || c == '?' || c == '#' || c == '\\' ||
            (c >= 'A' && c <= 'Z' && !hex_digit))
            abort();
        if (c == '/') {
            size_t e = i + 1;
            while (e < a && once[e] != '/')
                e++;
            size_t len = e - i - 1;
            if ((len == 0 && a > 1) || (len == 1 && once[i + 1] == '.') ||
                (len == 2 && once[i + 1] == '.' && once[i + 2] == '.'))
                abort();
        }
    }
    size_t b = urlpath_normalize(once, a, twice, cap);
    if (b != a || memcmp(once, twice, a) != 0)
        abort();
    /* one byte short: refused, and nothing written past the end */
    if (a > 1) {
        char *tight = malloc(a - 1);
        if (!tight)
            abort();
        if (urlpath_normalize(in, size, tight, a - 1) != (size_t)-1)
            abort();
        free(tight);
    }
    free(once);
    free(twice);
    return 0;
}
