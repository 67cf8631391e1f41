/*
 * auth.h - who may call what over HTTP: the token file (`--tokens FILE`)
 * read into the command layer's token set, and the router's check of a
 * request's `Authorization: Bearer <token>`.  The model - scopes, access
 * classes, key prefixes, the failure limit - and every check are the
 * command layer's (cmd/access.h, which has the whole contract).
 *
 * The token file is JSON (api_tokens_parse reads text; service/ reads the
 * file and reloads it on SIGHUP and POST /admin/reload):
 *
 *   {"tokens":[{"name":"gateway","sha256":"<hex SHA-256 of the token>",
 *               "scopes":["ratelimit"],"prefixes":["api:"]}, ...]}
 *
 * Answers: no token, or one not known -> 401 with WWW-Authenticate: Bearer;
 * a known token without the scope or outside its prefixes -> 403 naming what
 * is missing (WWW-Authenticate: insufficient_scope for a scope); too many
 * unknown tokens from one address -> 429 with Retry-After.  All come before
 * the handler runs, so a refused request changes nothing and journals
 * nothing.
 */
#ifndef TALLY_AUTH_H
#define TALLY_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "api/request.h"
#include "cmd/access.h"

typedef cmd_auth_t api_auth_t;                /* tokens and who may do what (cmd/access.h) */
typedef cmd_token_t api_token_t;

#define API_SCOPE_READ CMD_SCOPE_READ
#define API_SCOPE_WRITE CMD_SCOPE_WRITE
#define API_SCOPE_RATELIMIT CMD_SCOPE_RATELIMIT
#define API_SCOPE_ADMIN CMD_SCOPE_ADMIN
#define API_SCOPE_REPLICATE CMD_SCOPE_REPLICATE
#define API_SCOPES_ALL CMD_SCOPES_ALL
#define API_TOKEN_SHA256_LEN CMD_TOKEN_SHA256_LEN
#define API_TOKEN_MAX_LEN CMD_TOKEN_MAX_LEN
#define API_TOKENS_MAX CMD_TOKENS_MAX
#define API_TOKEN_PREFIXES_MAX CMD_TOKEN_PREFIXES_MAX

/* Parses a token file's text.  Returns the set (one reference, the
 * caller's) or NULL with a message naming the offending member
 * ("tokens[2].scopes[0]: unknown scope ..."); duplicate names or hashes, an
 * unknown member, a bad hash, an empty scope list and an empty prefix are
 * refused, and so is an empty token list (it would refuse every request,
 * admin included) unless the file also holds "deny_all": true. */
api_tokens_t *api_tokens_parse(const char *text, size_t len, char *err, size_t errlen);
#define api_tokens_release cmd_tokens_release
#define api_token_hash cmd_token_hash
#define api_token_hash_hex cmd_token_hash_hex
#define api_auth_create cmd_auth_create
#define api_auth_free cmd_auth_free
#define api_auth_install cmd_auth_install
#define api_auth_token_count cmd_auth_token_count
#define api_auth_metrics cmd_auth_metrics
#define api_access_name cmd_access_name
#define api_access_scopes cmd_access_scopes

/* Who is asking: the router's call after the route is matched, for a route
 * that needs a token (authentication on, not a replay, not public).  True
 * with ctx->token set (the token set then held until api_auth_done), or
 * with none needed; false with 401 or 429 set and nothing held.  What the
 * token may do - its scopes and prefixes - is checked when the request is
 * admitted (cmd/admit.h). */
bool api_auth_identify(api_server_t *srv, api_req_t *req, api_resp_t *resp);
void api_auth_done(api_req_t *req);

/* Whether the caller may see server details (/info): authentication off,
 * replay, or a token with scope admin. */
static inline bool api_auth_admin(const api_req_t *req) { return cmd_access_admin(req->ctx); }

#endif
