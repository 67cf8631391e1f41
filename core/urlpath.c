/*
 * urlpath.c - request paths normalised for rate-limit keys (core/urlpath.h
 * has the rules and why).
 */
#include <stdbool.h>
#include <string.h>

#include "core/urlpath.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte a path position stands for: a decoded escape, or the byte
 * itself.  Advances *i past it. */
static unsigned char next_byte(const char *in, size_t n, size_t *i)
{
    unsigned char c = (unsigned char)in[*i];
    if (c == '%' && *i + 2 < n && hexval(in[*i + 1]) >= 0 && hexval(in[*i + 2]) >= 0) {
        c = (unsigned char)(hexval(in[*i + 1]) << 4 | hexval(in[*i + 2]));
        *i += 3;
        return c;
    }
    *i += 1;
    return c;
}

/* Ends the segment that starts at out[start] (its '/'): trailing spaces
 * dropped, then "", "." and ".." resolved.  Returns the new length. */
static size_t segment_end(char *out, size_t start, size_t o)
{
    while (o > start + 1 && out[o - 1] == ' ')
        o--;
    size_t len = o - start - 1;
    if (len == 0 || (len == 1 && out[start + 1] == '.'))
        return start;
    if (len == 2 && out[start + 1] == '.' && out[start + 2] == '.') {
        /* the segment before this one starts at the previous '/' */
        while (start > 0 && out[--start] != '/')
            ;
        return start;
    }
    return o;
}

size_t urlpath_normalize(const char *in, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t end = 0;
    while (end < n && in[end] != '?' && in[end] != '#')
        end++;
    size_t o = 0, seg = 0;
    bool in_seg = false, params = false;
    for (size_t i = 0; i < end;) {
        unsigned char c = next_byte(in, end, &i);
        if (c == '/' || c == '\\') {
            if (in_seg)
                o = segment_end(out, seg, o);
            in_seg = false;
            continue;
        }
        if (!in_seg) {
            if (o + 1 > cap)
                return (size_t)-1;
            seg = o;
            out[o++] = '/';
            in_seg = true;
            params = false;
        }
        if (params || c == ';') {
            params = true;
            continue;
        }
        if (c < 0x20 || c == 0x7f || c == '%' || c == '?' || c == '#') {
            if (o + 3 > cap)
                return (size_t)-1;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
            continue;
        }
        if (o + 1 > cap)
            return (size_t)-1;
        out[o++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    if (in_seg)
        o = segment_end(out, seg, o);
    if (o == 0)
        out[o++] = '/';
    return o;
}
