/*
 * router.c - matches a request against the route table and runs the handler.
 *
 * Matching works on decoded path segments.  A path that matches some route's
 * pattern but not with this method gets 405 with an Allow header; a path that
 * matches no pattern gets 404 naming the routes under its first segment
 * (GET / lists them all).  HEAD is served by a path's GET route: the handler
 * runs as for GET and the server sends no body (HTTP's rule for HEAD; the
 * Content-Length stays that of the GET answer).  Path segments are
 * percent-decoded one by one,
 * so `/uv/page%2Fhome` addresses the key "page/home".  Query strings are
 * decoded as HTML forms do ('+' is a space, %XX a byte), which is what HTTP
 * client libraries produce.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/request.h"
#include "api/respond.h"
#include "api/route.h"
#include "api/router.h"
#include "api/pattern.h"
#include "api/guard.h"
#include "api/auth.h"
#include "cmd/admit.h"
#include "cmd/def.h"

/* ------------------------------------------------------------------------ */
/* The table: the families' routes, flattened once                          */
/* ------------------------------------------------------------------------ */

static api_route_t *table;          /* every route, in family order */
static size_t nroutes;

static api_pattern_t *compiled;
static pthread_once_t compile_once = PTHREAD_ONCE_INIT;

/*
 * The routes a path can match, by its first segment: a request looks its
 * first segment up in a small hash table (one entry per distinct literal
 * first segment of a pattern) and tries only the routes listed there, in
 * table order, instead of every route.  A list holds the routes with that
 * literal first segment and those whose first segment is a parameter;
 * `wild` (for a first segment no pattern starts with) only the latter.  The
 * first route matching, and the first taking the method, are those of a
 * scan of the whole table.
 */
typedef struct route_list {
    const char *first;   /* the literal first segment, NULL: an empty slot */
    size_t first_len;
    uint32_t *idx;       /* indices in the table, ascending */
    size_t n;
} route_list_t;

static route_list_t *first_index;   /* open addressing, first_nslots a power of two */
static size_t first_nslots;
static route_list_t wild;

/* FNV-1a of a first segment, for first_index. */
static size_t first_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static bool first_is_param(const api_pattern_t *c) { return c->nseg == 0 || c->seg[0].param; }

/* The slot of a first segment in first_index: its list, or the empty slot
 * where it would go. */
static route_list_t *first_slot(const char *s, size_t n)
{
    size_t mask = first_nslots - 1;
    for (size_t h = first_hash(s, n) & mask;; h = (h + 1) & mask) {
        route_list_t *l = &first_index[h];
        if (!l->first || (l->first_len == n && memcmp(l->first, s, n) == 0))
            return l;
    }
}

/* Builds first_index and wild from the compiled table (at start-up). */
static void index_routes(void)
{
    size_t ndistinct = 0;
    for (size_t r = 0; r < nroutes; r++)
        ndistinct += !first_is_param(&compiled[r]);   /* an upper bound */
    for (first_nslots = 8; first_nslots < 2 * ndistinct; first_nslots *= 2)
        ;
    first_index = calloc(first_nslots, sizeof(*first_index));
    uint32_t *all = malloc((first_nslots + 1) * nroutes * sizeof(*all));
    if (!first_index || !all)
        abort();   /* at start-up, like the table itself */
    wild.idx = all;
    for (size_t r = 0; r < nroutes; r++)
        if (first_is_param(&compiled[r]))
            wild.idx[wild.n++] = (uint32_t)r;
    size_t used = 1;
    for (size_t r = 0; r < nroutes; r++) {
        const api_pattern_seg_t *f = &compiled[r].seg[0];
        if (first_is_param(&compiled[r]))
            continue;
        route_list_t *l = first_slot(f->text, f->len);
        if (l->first)
            continue;   /* listed with an earlier route */
        l->first = f->text;
        l->first_len = f->len;
        l->idx = all + used++ * nroutes;
        for (size_t k = r; k < nroutes; k++) {   /* no route before r starts with this literal */
            const api_pattern_t *c = &compiled[k];
            if (first_is_param(c) || (c->seg[0].len == f->len && memcmp(c->seg[0].text, f->text, f->len) == 0))
                l->idx[l->n++] = (uint32_t)k;
        }
        /* the parameter-first routes before r go in too, keeping table order */
        size_t before = 0;
        while (before < wild.n && wild.idx[before] < r)
            before++;
        if (before) {
            memmove(l->idx + before, l->idx, l->n * sizeof(*l->idx));
            memcpy(l->idx, wild.idx, before * sizeof(*l->idx));
            l->n += before;
        }
    }
}

/* The routes a request's path may match (its first segment decoded). */
static const route_list_t *route_candidates(const api_req_t *req)
{
    const route_list_t *l = first_slot(req->seg[0], req->seg_len[0]);
    return l->first ? l : &wild;
}

static void compile_routes(void)
{
    for (size_t f = 0; f < api_nfamilies; f++)
        nroutes += api_families[f]->nroutes;
    table = malloc(nroutes * sizeof(*table));
    compiled = calloc(nroutes, sizeof(*compiled));
    if (!table || !compiled)
        abort();   /* at start-up: nothing can be served without the table */
    size_t r = 0;
    for (size_t f = 0; f < api_nfamilies; f++)
        for (size_t i = 0; i < api_families[f]->nroutes; i++, r++) {
            table[r] = api_families[f]->routes[i];
            const cmd_def_t *op = table[r].cmd;
            if (op) {
                /* the operation's access and its writing, said once (cmd/def.h) */
                if (table[r].access != API_ACCESS_UNSET || table[r].flags & (API_ROUTE_READS | API_ROUTE_WRITES))
                    abort();   /* written twice */
                table[r].access = op->access;
                table[r].flags |= op->flags & CMD_F_WRITE ? API_ROUTE_WRITES : API_ROUTE_READS;
            }
            if (table[r].access == API_ACCESS_UNSET || table[r].access >= API_ACCESS__COUNT)
                abort();   /* a route without an access class (api/route.h): never served */
            api_pattern_compile(&compiled[r], table[r].pattern);
        }
    index_routes();
}

size_t api_route_count(void)
{
    pthread_once(&compile_once, compile_routes);
    return nroutes;
}

api_route_meta_t api_route_meta(size_t i)
{
    pthread_once(&compile_once, compile_routes);
    api_route_meta_t m = { table[i].pattern, api_method_name(table[i].method), table[i].access,
                           (table[i].flags & API_ROUTE_BINARY) != 0, table[i].cmd ? table[i].cmd->name : NULL };
    return m;
}

/* Appends "|" (unless first) and n bytes of t to out; false when out is full. */
static bool list_add(char *out, size_t cap, size_t *used, const char *t, size_t n)
{
    size_t need = (*used ? 1 : 0) + n;
    if (*used + need >= cap)
        return false;
    if (*used)
        out[(*used)++] = '|';
    memcpy(out + *used, t, n);
    *used += n;
    out[*used] = 0;
    return true;
}

/* Whether out (a "|" list) already holds t. */
static bool list_has(const char *out, const char *t, size_t n)
{
    for (const char *p = out; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, t, n) == 0)
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
}

bool api_keyed_paths(char *families, size_t fcap, char *literals, size_t lcap)
{
    pthread_once(&compile_once, compile_routes);
    size_t fu = 0, lu = 0;
    families[0] = literals[0] = 0;
    for (size_t r = 0; r < nroutes; r++) {   /* /F/{key}...: F is keyed */
        const api_pattern_t *c = &compiled[r];
        if (c->nseg >= 2 && !c->seg[0].param && c->seg[1].param && strncmp(c->seg[1].text, "key", 3) == 0 &&
            c->seg[1].len == 3 && !list_has(families, c->seg[0].text, c->seg[0].len) &&
            !list_add(families, fcap, &fu, c->seg[0].text, c->seg[0].len))
            return false;
    }
    for (size_t r = 0; r < nroutes; r++) {   /* /F/literal of a keyed F: its second segment is no key */
        const api_pattern_t *c = &compiled[r];
        if (c->nseg != 2 || c->rest || c->seg[0].param || c->seg[1].param ||
            !list_has(families, c->seg[0].text, c->seg[0].len))
            continue;
        char path[128];
        int n = snprintf(path, sizeof(path), "%.*s/%.*s", (int)c->seg[0].len, c->seg[0].text, (int)c->seg[1].len,
                         c->seg[1].text);
        if (n < 0 || (size_t)n >= sizeof(path) || !list_add(literals, lcap, &lu, path, (size_t)n))
            return false;
    }
    return true;
}

bool api_path_operational(const char *path, size_t len)
{
    pthread_once(&compile_once, compile_routes);
    for (size_t r = 0; r < nroutes; r++)
        if ((table[r].flags & API_ROUTE_OPERATIONAL) && strlen(table[r].pattern) == len &&
            memcmp(table[r].pattern, path, len) == 0)
            return true;
    return false;
}

/* Whether the route may change state: it needs journal space first. */
static bool route_writes(const api_route_t *r)
{
    if (r->flags & (API_ROUTE_WRITES | API_ROUTE_READS))
        return r->flags & API_ROUTE_WRITES;
    return r->method != API_GET && r->method != API_HEAD;
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Everything a request decodes (path segments, query names and values) goes
 * into one arena: decoding never makes a string longer, so the raw path and
 * query lengths plus a NUL per piece bound its size.  A typical request's
 * fits the room inside api_req_t (arena_inline, params_inline): nothing is
 * allocated.  Each of the path and the query is decoded in one pass, split
 * and unescaped together.
 */

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

/* The byte of the escape "%XY" at s[i] (i < n, s[i] == '%'), or -1 when the
 * two hex digits are not both there before n. */
static int pct_byte(const char *s, size_t i, size_t n)
{
    int hi, lo;
    if (n - i < 3 || (hi = hexval(s[i + 1])) < 0 || (lo = hexval(s[i + 2])) < 0)
        return -1;
    return hi << 4 | lo;
}

/* The bytes a decoding loop must look at, by what is decoded: a bit each
 * (DEC_PATH: a path segment ends at '/'; DEC_NAME: a query name at '&' or
 * '='; DEC_VALUE: a query value at '&'; '%' starts an escape everywhere,
 * '+' is a space in the query).  One table lookup per byte. */
enum { DEC_PATH = 1, DEC_NAME = 2, DEC_VALUE = 4 };
static const uint8_t dec_special[256] = {
    ['%'] = DEC_PATH | DEC_NAME | DEC_VALUE,
    ['/'] = DEC_PATH,
    ['&'] = DEC_NAME | DEC_VALUE,
    ['='] = DEC_NAME,
    ['+'] = DEC_NAME | DEC_VALUE,
};

/* Decodes s from *i up to n or the first byte ending a piece of kind `dec`
 * (above) into out, NUL-terminated; *i is left on that byte (or n).
 * Returns the length, or -1 on a bad escape. */
static long pct_decode_until(const char *s, size_t *i, size_t n, unsigned dec, char *out)
{
    size_t j = 0, k = *i;
    for (;;) {
        size_t run = k;   /* plain bytes are copied a run at a time */
        while (k < n && !(dec_special[(unsigned char)s[k]] & dec))
            k++;
        memcpy(out + j, s + run, k - run);
        j += k - run;
        if (k == n)
            break;
        unsigned char c = (unsigned char)s[k];
        if (c == '%') {
            int b = pct_byte(s, k, n);
            if (b < 0)
                return -1;
            c = (unsigned char)b;
            k += 3;
        } else if (c == '+') {
            c = ' ';
            k++;
        } else {
            break;   /* the end of the piece */
        }
        out[j++] = (char)c;
    }
    out[j] = '\0';
    *i = k;
    return (long)j;
}

static bool split_path(api_req_t *req, api_resp_t *resp, char **arena)
{
    const char *p = req->path;
    size_t n = req->path_len;
    if (n == 0 || p[0] != '/') {
        api_error(resp, API_E_BAD_REQUEST, "the request path must start with '/'");
        return false;
    }
    size_t i = 1;
    for (;;) {
        if (req->nseg == API_MAX_SEGMENTS) {
            api_error(resp, API_E_NOT_FOUND, "no route has more than %d path segments (GET / lists every route)",
                      API_MAX_SEGMENTS);
            return false;
        }
        long len = pct_decode_until(p, &i, n, DEC_PATH, *arena);
        if (len < 0) {
            api_error(resp, API_E_BAD_REQUEST, "malformed percent-encoding in the path");
            return false;
        }
        req->seg[req->nseg] = *arena;
        req->seg_len[req->nseg] = (size_t)len;
        req->nseg++;
        *arena += len + 1;
        if (i >= n)
            break;
        i++;   /* skip '/' */
    }
    return true;
}

/* Room for one more query parameter: params_inline first, then the heap,
 * doubling.  False when memory runs out. */
static bool params_grow(api_req_t *req)
{
    if (req->nparams < req->params_cap)
        return true;
    if (!req->params) {
        req->params = req->params_inline;
        req->params_cap = API_INLINE_PARAMS;
        return true;
    }
    int cap = req->params_cap * 2;
    api_param_t *p = req->params == req->params_inline ? malloc((size_t)cap * sizeof(*p))
                                                       : realloc(req->params, (size_t)cap * sizeof(*p));
    if (!p)
        return false;
    if (req->params == req->params_inline)
        memcpy(p, req->params_inline, sizeof(req->params_inline));
    req->params = p;
    req->params_cap = cap;
    return true;
}

static bool parse_query(api_req_t *req, api_resp_t *resp, char **arena)
{
    if (!req->query || req->query_len == 0)
        return true;
    const char *q = req->query;
    size_t n = req->query_len;
    if (n + 1 > API_MAX_PARAMS) {   /* only then can there be more than the limit */
        size_t count = 1;
        for (const char *a = q, *e = q + n; (a = memchr(a, '&', (size_t)(e - a))) != NULL; a++)
            count++;
        if (count > API_MAX_PARAMS) {
            api_error(resp, API_E_BAD_REQUEST, "too many query parameters (at most %d)", API_MAX_PARAMS);
            return false;
        }
    }
    for (size_t i = 0; i <= n; i++) {   /* i on the '&' ending the previous parameter */
        if (i == n || q[i] == '&') {
            if (i == n)
                break;
            continue;   /* "a=1&&b=2", or a trailing '&' */
        }
        if (!params_grow(req)) {
            api_error(resp, API_E_OUT_OF_MEMORY, "out of memory decoding the query");
            return false;
        }
        api_param_t *pp = &req->params[req->nparams];
        long nlen = pct_decode_until(q, &i, n, DEC_NAME, *arena);
        pp->name = *arena;
        *arena += nlen + 1;
        long vlen = -1;
        if (nlen >= 0) {
            if (i < n && q[i] == '=')
                i++;
            vlen = pct_decode_until(q, &i, n, DEC_VALUE, *arena);
        }
        pp->value = *arena;
        *arena += vlen + 1;
        if (nlen < 0 || vlen < 0) {
            api_error(resp, API_E_BAD_REQUEST, "malformed percent-encoding in the query string");
            return false;
        }
        pp->vlen = (size_t)vlen;
        req->nparams++;
        if (i >= n)
            break;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Matching                                                                 */
/* ------------------------------------------------------------------------ */

/* A route serves this method: its own, any (ANY), or HEAD on a GET route. */
static bool method_matches(api_method_t route, api_method_t m)
{
    return route == API_ANY || route == m || (route == API_GET && m == API_HEAD);
}

/* The 404 for a path no pattern matches: which routes exist under its first
 * segment, so a typo shows its neighbours. */
static void not_found(const api_req_t *req, api_resp_t *resp)
{
    char list[320] = "";
    size_t used = 0;
    int shown = 0;
    const char *prev = NULL;
    for (size_t r = 0; r < nroutes; r++) {
        const api_pattern_seg_t *first = &compiled[r].seg[0];
        if (req->nseg == 0 || first->param || first->len == 0 || first->len != req->seg_len[0] ||
            memcmp(first->text, req->seg[0], first->len) != 0)
            continue;
        const char *pat = table[r].pattern;
        if (prev && strcmp(prev, pat) == 0)
            continue;   /* the same pattern with another method */
        prev = pat;
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", shown ? ", " : "", pat);
        if (n < 0 || (size_t)n >= sizeof(list) - used) {
            list[used] = '\0';
            snprintf(list + used, sizeof(list) - used, ", ...");
            break;
        }
        used += (size_t)n;
        shown++;
    }
    int plen = req->path_len > 120 ? 120 : (int)req->path_len;
    if (shown)
        api_error(resp, API_E_NOT_FOUND, "no route matches %.*s%s; routes under /%.*s: %s (GET / lists every route)",
                  plen, req->path, req->path_len > 120 ? "..." : "", (int)req->seg_len[0], req->seg[0], list);
    else
        api_error(resp, API_E_NOT_FOUND, "no route matches %.*s%s; GET / lists every route", plen, req->path,
                  req->path_len > 120 ? "..." : "");
}

/* The methods of the routes matching the path (the first at `first`), HEAD
 * with GET: "GET, HEAD, PUT". */
static void path_methods(const api_req_t *req, size_t first, char *allow, size_t n)
{
    allow[0] = '\0';
    for (size_t i = first; i < nroutes; i++) {
        if (!api_pattern_matches(&compiled[i], req))
            continue;
        size_t al = strlen(allow);
        snprintf(allow + al, n - al, "%s%s%s", al ? ", " : "", api_method_name(table[i].method),
                 table[i].method == API_GET ? ", HEAD" : "");
    }
}

/* The 405 for a path whose routes (the first at `first`) all want another
 * method: the Allow header lists their methods. */
static void not_allowed(const api_req_t *req, api_resp_t *resp, size_t first)
{
    char allow[128];
    path_methods(req, first, allow, sizeof(allow));
    api_error(resp, API_E_METHOD_NOT_ALLOWED, "method %s is not allowed here; allowed: %s",
              api_method_name(req->method), allow);
    api_add_header(resp, "Allow", "%s", allow);
}

/* The journal space a change secures when it is admitted: its operation's
 * record holds what the request says, typed (a resolved key, a policy's
 * parameters, a deletion), within twice the request's size plus a page;
 * operations whose records can be larger reserve the rest themselves
 * before they change anything (cmd_journal_reserve_more), and debug builds
 * stop on a record larger than what was secured. */
static uint64_t journal_bound(const api_req_t *req)
{
    return 2 * (64 + (uint64_t)req->path_len + req->query_len + req->body_len + (req->ctype ? strlen(req->ctype) : 0)) +
           4096;
}

/* What a cluster's proxy routed by, from the request's headers: its
 * X-Tally-Key (the key a policy's template resolves to) and X-Tally-Asking
 * (a migration's ASK). */
static void cluster_headers(api_req_t *req)
{
    cmd_ctx_t *ctx = req->ctx;
    const char *asking = req->header ? req->header(req->hctx, "X-Tally-Asking") : NULL;
    ctx->routing_key = req->header ? req->header(req->hctx, "X-Tally-Key") : NULL;
    ctx->asking = asking && strcmp(asking, "1") == 0;
}

/* Routes and runs the request (api_dispatch without the CORS headers). */
static void dispatch(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    pthread_once(&compile_once, compile_routes);
    /* the decoded path takes at most path_len bytes with its NULs; a query
     * of n bytes at most n + n/2 + 1 (a NUL after each name and value, and
     * a parameter is at least one byte and a '&') */
    size_t need = req->path_len + req->query_len + req->query_len / 2 + API_MAX_SEGMENTS + 4;
    req->arena = need <= sizeof(req->arena_inline) ? req->arena_inline : malloc(need);
    if (!req->arena) {
        api_error(resp, API_E_OUT_OF_MEMORY, "out of memory decoding the request");
        return;
    }
    char *arena = req->arena;
    if (!split_path(req, resp, &arena))
        return;

    const api_route_t *match = NULL;
    const route_list_t *cand = route_candidates(req);
    for (size_t k = 0; k < cand->n; k++) {
        size_t i = cand->idx[k];
        if (!api_pattern_matches(&compiled[i], req))
            continue;
        if (resp->route_index < 0)
            resp->route_index = (int)i;
        if (method_matches(table[i].method, req->method)) {
            match = &table[i];
            resp->route_index = (int)i;
            break;
        }
    }
    /* a browser's request is refused before anything runs (api/guard.h) */
    if (srv->guard) {
        char allow[128] = "";
        if (req->method == API_OPTIONS && resp->route_index >= 0)
            path_methods(req, (size_t)resp->route_index, allow, sizeof(allow));
        if (!api_guard_request(srv->guard, req, resp->route_index >= 0 ? &table[resp->route_index] : NULL, match,
                               allow, resp))
            return;
    }
    if (!match) {
        if (resp->route_index >= 0)
            not_allowed(req, resp, (size_t)resp->route_index);
        else
            not_found(req, resp);
        return;
    }
    req->route = match;
    req->pattern = &compiled[match - table];
    cmd_ctx_t *ctx = req->ctx;
    ctx->what_verb = api_method_name(match->method);
    ctx->what_name = match->pattern;
    /* who is asking, before anything is decoded further (api/auth.h) */
    if (!api_auth_identify(srv, req, resp))
        return;
    if (srv->cluster && !req->replay)
        cluster_headers(req);
    /* admitted once, in the command layer's order (cmd/admit.h): scope,
     * the path key's prefixes and slot, loading, writable, journal space -
     * a change that cannot be made durable is refused before anything is
     * touched */
    bool writes = route_writes(match);
    cmd_admission_t adm = { .access = match->access, .writes = writes, .loading = req->loading };
    if (!(match->flags & API_ROUTE_KEY_TEMPLATE))   /* a policy's input is checked once resolved, by the handler */
        adm.key = api_path_param(req, "key", &adm.klen);
    if (writes)
        adm.journal_bytes = journal_bound(req);
    if (api_cmd_answered(req, resp, cmd_admit(ctx, &adm)) && parse_query(req, resp, &arena))
        match->handler(srv, req, resp);
    cmd_ctx_end(ctx);
    api_auth_done(req);
}

void api_dispatch(api_server_t *srv, api_req_t *req, api_resp_t *resp)
{
    api_resp_init(resp);
    cmd_ctx_t ctx;
    cmd_ctx_init(&ctx, srv, req->now_ns, req->replay, req->gen);
    ctx.front = resp;
    req->ctx = &ctx;
    dispatch(srv, req, resp);
    resp->journal_lsn = ctx.journal_lsn;
    resp->repl_pos = ctx.repl_pos;
    req->ctx = NULL;
    if (srv->guard)
        api_guard_cors(srv->guard, req, resp->route_index >= 0 ? &table[resp->route_index] : NULL, resp);
}
