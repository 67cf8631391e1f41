/*
 * json_out.h - JSON text (api/json_out.c): compact text of a tree with
 * reals in shortest round-trip form, and the pieces answers built without
 * a tree write (strings, integers, doubles).
 */
#ifndef TALLY_API_JSON_OUT_H
#define TALLY_API_JSON_OUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codec.h"

/* Compact JSON text of v (reals in shortest round-trip form); malloc'd,
 * NULL on allocation failure. */
char *api_json_text(json_t *v, size_t *len);
/* Appends s[0..n) as a JSON string (quoted, escaped as api_json_text does). */
void api_json_put_string(wbuf_t *b, const char *s, size_t n);
/* The same at p, which has room for API_JSON_STRING_MAX(n) bytes; returns
 * the end of what it wrote. */
#define API_JSON_STRING_MAX(n) (6 * (n) + 2)
char *api_json_string_at(char *p, const char *s, size_t n);
/* v in decimal at p, which has room for API_I64_TEXT bytes (no NUL);
 * returns the end of what it wrote. */
#define API_I64_TEXT 20
char *api_format_i64(char *p, int64_t v);
/* Shortest text that reads back as v, always with '.' or an exponent. */
void api_format_double(double v, char *out, size_t n);

#endif
