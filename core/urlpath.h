/*
 * urlpath.h - one spelling for every way of writing a request path, for the
 * {path} of a rate-limit key template (api/policy.c).
 *
 * A limit per path ("5 logins per 5 minutes per address and path") must not
 * be escaped by writing the path differently: /login/, //login, /./login,
 * /%6Cogin, /login;x, /login%20 and /LOGIN all reach a login handler on
 * some backend, so they must all count against the bucket of /login.
 * Merging two paths a backend tells apart only makes a limit stricter;
 * failing to merge two it confuses lets a client pass it.  So the rules err
 * on the side of merging:
 *
 *   1. the query and fragment go (from the first '?' or '#');
 *   2. %XX escapes are decoded (any byte, '/' included); the bytes that
 *      cannot be written plainly - controls (< 0x20, 0x7f), '%', '?' and
 *      '#' - are written back as %XX with upper-case hex, so the result
 *      decodes to itself (normalising twice changes nothing) and never holds
 *      a control byte; a '%' not followed by two hex digits is written %25;
 *   3. '\' is a '/' (IIS and some proxies treat it so);
 *   4. each segment loses everything from its first ';' (path parameters,
 *      ";jsessionid=...": servlet containers drop them) and its trailing
 *      spaces;
 *   5. empty segments (repeated or trailing slashes) go; "." segments go;
 *      ".." removes the segment before it (never above the root), as
 *      RFC 3986 section 5.2.4 removes dot segments;
 *   6. ASCII letters are folded to lower case (IIS, ASP.NET and many routers
 *      match paths without regard to case); other bytes (UTF-8) are kept.
 *
 * The result starts with '/' and has no trailing '/' (the root is "/").  It
 * is at most one byte longer than the input, except for a '%' that escapes
 * nothing, which takes three bytes ("%25").  Pure: no allocation, no locale.
 */
#ifndef TALLY_CORE_URLPATH_H
#define TALLY_CORE_URLPATH_H

#include <stddef.h>

/* Normalises the n bytes at `in` into out (cap bytes, cap >= 1).  Returns
 * the length of the normalised path (out is not NUL-terminated), or
 * (size_t)-1 when it does not fit in cap bytes. */
size_t urlpath_normalize(const char *in, size_t n, char *out, size_t cap);

#endif
