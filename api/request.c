/*
 * request.c - a request and its response as the HTTP adapter holds them:
 * methods by name, and their setting up and release (api/request.h).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api/request.h"

/* ------------------------------------------------------------------------ */
/* Methods                                                                  */
/* ------------------------------------------------------------------------ */

static const struct {
    api_method_t m;
    const char *name;
} method_names[] = {
    { API_GET, "GET" },       { API_HEAD, "HEAD" },   { API_POST, "POST" },
    { API_PUT, "PUT" },       { API_DELETE, "DELETE" }, { API_PATCH, "PATCH" },
    { API_OPTIONS, "OPTIONS" }, { API_ANY, "ANY" },
};

const char *api_method_name(api_method_t m)
{
    for (size_t i = 0; i < sizeof(method_names) / sizeof(method_names[0]); i++)
        if (method_names[i].m == m)
            return method_names[i].name;
    return "OTHER";
}

api_method_t api_method_parse(const char *s)
{
    /* every request comes through here: GET and POST without a scan */
    if (s[0] == 'G' && s[1] == 'E' && s[2] == 'T' && s[3] == '\0')
        return API_GET;
    if (s[0] == 'P' && s[1] == 'O' && s[2] == 'S' && s[3] == 'T' && s[4] == '\0')
        return API_POST;
    for (size_t i = 0; i < sizeof(method_names) / sizeof(method_names[0]); i++)
        if (method_names[i].m != API_ANY && strcmp(method_names[i].name, s) == 0)
            return method_names[i].m;
    return API_OTHER;
}

void api_req_init(api_req_t *req, api_method_t method, const char *path, size_t path_len, int64_t now_ns)
{
    memset(req, 0, offsetof(api_req_t, params_inline));   /* the inline room is written before it is read */
    req->method = method;
    req->path = path;
    req->path_len = path_len;
    req->now_ns = now_ns;
}

void api_resp_init(api_resp_t *resp)
{
    /* not memset: the header array is large and written only as used */
    resp->status = 0;
    resp->ctype = NULL;
    resp->body = NULL;
    resp->len = 0;
    resp->nheaders = 0;
    resp->journal_lsn = 0;
    resp->repl_pos = 0;
    resp->deferred = NULL;
    resp->deferred_arg = NULL;
    resp->route_index = -1;
    resp->violated[0] = '\0';
    resp->token_name[0] = '\0';
}

void api_req_release(api_req_t *req)
{
    if (req->arena != req->arena_inline)
        free(req->arena);
    req->arena = NULL;
    req->nseg = 0;
    if (req->params != req->params_inline)
        free(req->params);
    req->params = NULL;
    req->params_cap = 0;
    req->nparams = 0;
    json_decref(req->json);
    req->json = NULL;
}

void api_resp_release(api_resp_t *resp)
{
    if (resp->body)   /* usually handed to libmicrohttpd already; free(NULL) costs jemalloc a call */
        free(resp->body);
    resp->body = NULL;
}
