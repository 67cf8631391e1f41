/*
 * auth.c - tokens over HTTP: the token file read (JSON) into the command
 * layer's set (cmd/access.h), and the router's check of the Authorization
 * header, answered as RFC 6750 says (401 / 403 with WWW-Authenticate).
 * The token file arrives as text (service/ reads it).
 */
#include "api/params.h"
#include "api/pattern.h"
#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > API_TOKEN_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._:@-", c)) ||
            c == 0)
            return false;
    }
    return true;
}

/* A string member of a token (required). */
static const char *member_string(json_t *o, const char *name, size_t i, size_t *len, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, name);
    if (!v || !json_is_string(v)) {
        snprintf(err, errlen, "tokens[%zu].%s: %s", i, name, v ? "must be a string" : "is required");
        return NULL;
    }
    *len = json_string_length(v);
    return json_string_value(v);
}

static bool parse_scopes(json_t *arr, size_t i, unsigned *out, char *err, size_t errlen)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        snprintf(err, errlen, "tokens[%zu].scopes: %s", i,
                 !arr ? "is required (read, write, ratelimit, admin, replicate)"
                      : "must be a non-empty array of read, write, ratelimit, admin, replicate");
        return false;
    }
    *out = 0;
    size_t j;
    json_t *s;
    json_array_foreach(arr, j, s) {
        unsigned bit = json_is_string(s) ? cmd_scope_bit(json_string_value(s), json_string_length(s)) : 0;
        if (!bit) {
            snprintf(err, errlen,
                     "tokens[%zu].scopes[%zu]: %s%.40s%s is not a scope (read, write, ratelimit, admin, replicate)",
                     i, j, json_is_string(s) ? "\"" : "", json_is_string(s) ? json_string_value(s) : "a non-string",
                     json_is_string(s) ? "\"" : "");
            return false;
        }
        if (*out & bit) {
            snprintf(err, errlen, "tokens[%zu].scopes[%zu]: \"%s\" is listed twice", i, j, json_string_value(s));
            return false;
        }
        *out |= bit;
    }
    return true;
}

static bool parse_prefixes(json_t *arr, size_t i, api_token_t *t, char *err, size_t errlen)
{
    if (!arr)
        return true;
    size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
    if (n == 0 || n > API_TOKEN_PREFIXES_MAX) {
        snprintf(err, errlen,
                 "tokens[%zu].prefixes: must be an array of 1 to %d key prefixes (leave it out to allow every key)", i,
                 API_TOKEN_PREFIXES_MAX);
        return false;
    }
    t->prefixes = calloc(n, sizeof(*t->prefixes));
    t->prefix_len = calloc(n, sizeof(*t->prefix_len));
    if (!t->prefixes || !t->prefix_len) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    for (size_t j = 0; j < n; j++) {
        json_t *s = json_array_get(arr, j);
        const char *why;
        if (!json_is_string(s) || !api_key_ok(json_string_value(s), json_string_length(s), &why)) {
            snprintf(err, errlen, "tokens[%zu].prefixes[%zu]: %s", i, j,
                     json_is_string(s) ? why : "must be a string (the start of the keys allowed)");
            return false;
        }
        t->prefix_len[j] = json_string_length(s);
        t->prefixes[j] = malloc(t->prefix_len[j] + 1);
        if (!t->prefixes[j]) {
            snprintf(err, errlen, "out of memory");
            return false;
        }
        memcpy(t->prefixes[j], json_string_value(s), t->prefix_len[j] + 1);
        t->nprefixes = j + 1;
    }
    return true;
}

static bool parse_token(json_t *o, size_t i, api_token_t *t, char *err, size_t errlen)
{
    if (!json_is_object(o)) {
        snprintf(err, errlen, "tokens[%zu]: must be an object {\"name\",\"sha256\",\"scopes\",\"prefixes\"}", i);
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (strcmp(k, "name") && strcmp(k, "sha256") && strcmp(k, "scopes") && strcmp(k, "prefixes")) {
            snprintf(err, errlen, "tokens[%zu]: unknown member \"%.60s\" (name, sha256, scopes, prefixes)", i, k);
            return false;
        }
    }
    size_t nlen, hlen;
    const char *name = member_string(o, "name", i, &nlen, err, errlen);
    if (!name)
        return false;
    if (!name_ok(name, nlen)) {
        snprintf(err, errlen, "tokens[%zu].name: 1 to %d letters, digits or ._:@- characters", i,
                 API_TOKEN_NAME_MAX);
        return false;
    }
    memcpy(t->name, name, nlen + 1);
    const char *hex = member_string(o, "sha256", i, &hlen, err, errlen);
    if (!hex)
        return false;
    bool hex_ok = hlen == 2 * API_TOKEN_SHA256_LEN;
    for (size_t j = 0; hex_ok && j < API_TOKEN_SHA256_LEN; j++) {
        int hi = hexval(hex[2 * j]), lo = hexval(hex[2 * j + 1]);
        hex_ok = hi >= 0 && lo >= 0;
        if (hex_ok)
            t->sha256[j] = (uint8_t)(hi << 4 | lo);
    }
    if (!hex_ok) {
        snprintf(err, errlen, "tokens[%zu].sha256: must be the 64 hex digits of the token's SHA-256 "
                 "(print it with: tallyd --hash-token < token-file)", i);
        return false;
    }
    return parse_scopes(json_object_get(o, "scopes"), i, &t->scopes, err, errlen) &&
           parse_prefixes(json_object_get(o, "prefixes"), i, t, err, errlen);
}

api_tokens_t *api_tokens_parse(const char *text, size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "line %d, column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    api_tokens_t *t = NULL;
    json_t *arr = json_is_object(root) ? json_object_get(root, "tokens") : NULL;
    json_t *deny_all = json_is_object(root) ? json_object_get(root, "deny_all") : NULL;
    if (!arr || !json_is_array(arr) || json_object_size(root) != 1 + (deny_all != NULL)) {
        snprintf(err, errlen, "the file must be an object with one member, \"tokens\": an array of tokens "
                 "(and, for an empty array only, \"deny_all\": true)");
        goto out;
    }
    size_t n = json_array_size(arr);
    /* An empty list refuses every request, admin included (SIGHUP is then
     * the only way back): taken only when the file says it means it. */
    if (deny_all && (!json_is_true(deny_all) || n)) {
        snprintf(err, errlen, "deny_all: only true, and only with an empty \"tokens\" array");
        goto out;
    }
    if (n == 0 && !deny_all) {
        snprintf(err, errlen, "tokens: the array is empty, which would refuse every request (admin included, "
                 "so only SIGHUP could load tokens again); write \"deny_all\": true beside it to mean that");
        goto out;
    }
    if (n > API_TOKENS_MAX) {
        snprintf(err, errlen, "tokens: at most %d tokens", API_TOKENS_MAX);
        goto out;
    }
    if (!(t = cmd_tokens_new(n))) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        t->n = i + 1;
        if (!parse_token(json_array_get(arr, i), i, &t->v[i], err, errlen))
            goto fail;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(t->v[j].name, t->v[i].name) == 0) {
                snprintf(err, errlen, "tokens[%zu].name: \"%s\" is also the name of tokens[%zu]", i, t->v[i].name, j);
                goto fail;
            }
            if (memcmp(t->v[j].sha256, t->v[i].sha256, API_TOKEN_SHA256_LEN) == 0) {
                snprintf(err, errlen, "tokens[%zu].sha256: the same token as tokens[%zu] (\"%s\")", i, j,
                         t->v[j].name);
                goto fail;
            }
        }
    }
    cmd_tokens_index(t);
    goto out;
fail:
    cmd_tokens_release(t);
    t = NULL;
out:
    json_decref(root);
    return t;
}

/* ------------------------------------------------------------------------ */
/* Checking a request                                                       */
/* ------------------------------------------------------------------------ */

/* The token of an `Authorization: Bearer <token>` header (RFC 6750 §2.1:
 * the scheme is case-insensitive); NULL when the header has another form. */
static const char *bearer_of(const char *h, size_t *len)
{
    static const char scheme[] = "bearer";
    for (size_t i = 0; i < 6; i++)   /* ASCII case folding: no locale on the hot path */
        if ((h[i] | 0x20) != scheme[i])
            return NULL;
    if (h[6] != ' ' && h[6] != '\t')
        return NULL;
    const char *p = h + 6;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0 || n > API_TOKEN_MAX_LEN)
        return NULL;
    *len = n;
    return p;
}

static void unauthorized(api_resp_t *resp, const char *error, const char *msg)
{
    api_error(resp, API_E_UNAUTHORIZED, "%s", msg);
    if (error)
        api_add_header(resp, "WWW-Authenticate", "Bearer realm=\"tally\", error=\"%s\"", error);
    else
        api_add_header(resp, "WWW-Authenticate", "Bearer realm=\"tally\"");
}

/* The client address of a request (NULL when unknown), asked only when a
 * failure is involved: most requests never need it. */
static const char *client_addr(void *ud)
{
    const api_req_t *req = ud;
    return req->client_ip ? req->client_ip(req->hctx) : NULL;
}

bool api_auth_identify(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_auth_t *a = srv->auth;
    api_access_t access = req->route->access;
    if (!a || req->replay || access == API_ACCESS_PUBLIC || (access == API_ACCESS_METRICS && cmd_auth_metrics_public(a)))
        return true;
    const char *h = req->header ? req->header(req->hctx, "Authorization") : NULL;
    if (!h) {
        cmd_auth_count_refusal(CMD_REFUSED_UNAUTHORIZED);
        unauthorized(resp, NULL, "this route needs a token: send Authorization: Bearer <token>");
        return false;
    }
    size_t tlen = 0;
    const char *tok = bearer_of(h, &tlen);
    const cmd_token_t *t;
    cmd_ctx_t *ctx = req->ctx;
    if (!cmd_auth_identify(a, tok, tlen, client_addr, req, req->now_ns, &req->tokens, &t, &ctx->err)) {
        if (ctx->err.code == API_E_UNAUTHORIZED)
            unauthorized(resp, "invalid_token", ctx->err.message);
        else
            api_cmd_error(resp, &ctx->err);
        return false;
    }
    ctx->token = t;
    memcpy(resp->token_name, t->name, strlen(t->name) + 1);   /* names fit: API_TOKEN_NAME_MAX */
    return true;
}

void api_auth_done(api_req_t *req)
{
    cmd_tokens_release(req->tokens);
    req->tokens = NULL;
    req->ctx->token = NULL;
}
