/*
 * parse.c - the Redis protocol's requests (parse.h has the contract).
 *
 * State kept between calls is only about the command at the start of the
 * caller's buffer: which form it is, where parsing resumes, how far a line
 * end was already searched for, and the lengths of the arguments read so
 * far.  Pointers are made only when a command is complete, from offsets,
 * so the caller may move its buffer in between.
 */
#include "resp/parse.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGV_KEEP 1024     /* views kept between commands; a larger array is given back */
#define SCRATCH_KEEP 4096  /* scratch bytes kept between commands */
#define ARGV_FIRST 16      /* first size of the argument array */
#define ERR_MAX 64         /* the longest error text, and room for its NUL */

enum state {
    ST_START,   /* at the first byte of a command */
    ST_INLINE,  /* an inline line, its end not found yet */
    ST_COUNT,   /* a multibulk command's "*N" line */
    ST_ARGS,    /* its arguments */
    ST_FAILED,  /* after RESP_ERROR or RESP_NOMEM */
};

struct resp_parser {
    resp_limits_t lim;
    resp_mem_fn mem;
    void *ud;
    bool auth_required;
    enum state state;
    size_t scan;         /* bytes from the command's start already searched for the line end */
    size_t pos;          /* ST_ARGS: offset of the next "$N" line, or of the pending bulk's data */
    size_t first;        /* ST_ARGS: offset of the first "$N" line */
    long long remaining; /* ST_ARGS: arguments still to come */
    long long bulklen;   /* ST_ARGS: the pending bulk's length, -1 before its "$N" line */
    resp_arg_t *argv;    /* ST_ARGS: .len of each argument read; .ptr set when complete */
    size_t argc, cap;
    char *scratch;       /* decoded quoted inline arguments */
    size_t scratch_cap;
    char err[ERR_MAX];
    size_t errlen;
};

/* ------------------------------------------------------------ memory -- */

static size_t held_bytes(const resp_parser_t *p)
{
    return p->cap * sizeof(resp_arg_t) + p->scratch_cap;
}

static bool mem_ask(resp_parser_t *p, size_t want)
{
    return !p->mem || p->mem(p->ud, held_bytes(p), want);
}

static void mem_tell(resp_parser_t *p, size_t before)
{
    if (p->mem)
        p->mem(p->ud, before, held_bytes(p));
}

/* Room for `need` views, growing by doubling up to `most`; false when the
 * hook or malloc refuses. */
static bool argv_reserve(resp_parser_t *p, size_t need, size_t most)
{
    if (need <= p->cap)
        return true;
    size_t ncap = p->cap ? p->cap * 2 : ARGV_FIRST;
    if (ncap < need)
        ncap = need;
    if (ncap > most)
        ncap = most;
    if (!mem_ask(p, held_bytes(p) + (ncap - p->cap) * sizeof(resp_arg_t)))
        return false;
    resp_arg_t *a = realloc(p->argv, ncap * sizeof(resp_arg_t));
    if (!a) {
        if (p->mem) /* what was asked for is not held after all */
            p->mem(p->ud, held_bytes(p) + (ncap - p->cap) * sizeof(resp_arg_t), held_bytes(p));
        return false;
    }
    p->argv = a;
    p->cap = ncap;
    return true;
}

static bool scratch_reserve(resp_parser_t *p, size_t need)
{
    if (need <= p->scratch_cap)
        return true;
    if (!mem_ask(p, held_bytes(p) + (need - p->scratch_cap)))
        return false;
    char *s = realloc(p->scratch, need);
    if (!s) {
        if (p->mem)
            p->mem(p->ud, held_bytes(p) + (need - p->scratch_cap), held_bytes(p));
        return false;
    }
    p->scratch = s;
    p->scratch_cap = need;
    return true;
}

/* Between commands: gives back what one large command needed. */
static void shrink(resp_parser_t *p)
{
    size_t before = held_bytes(p);
    if (p->cap > ARGV_KEEP) {
        free(p->argv);
        p->argv = NULL;
        p->cap = 0;
    }
    if (p->scratch_cap > SCRATCH_KEEP) {
        free(p->scratch);
        p->scratch = NULL;
        p->scratch_cap = 0;
    }
    if (held_bytes(p) != before)
        mem_tell(p, before);
}

/* ----------------------------------------------------------- helpers -- */

/* Redis's string2ll: an optional '-', then 0 alone or a digit 1-9 and
 * digits, within a long long; nothing else. */
static bool read_ll(const char *s, size_t n, long long *out)
{
    if (n == 0 || n >= 21)
        return false;
    if (n == 1 && s[0] == '0') {
        *out = 0;
        return true;
    }
    size_t i = 0;
    bool neg = false;
    if (s[0] == '-') {
        neg = true;
        if (++i == n)
            return false;
    }
    if (s[i] < '1' || s[i] > '9')
        return false;
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (ULLONG_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1)
            return false;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)LLONG_MAX)
            return false;
        *out = (long long)v;
    }
    return true;
}

static size_t digits(unsigned long long v)
{
    size_t n = 1;
    while (v >= 10)
        v /= 10, n++;
    return n;
}

static resp_status_t fail(resp_parser_t *p, const char *text)
{
    p->errlen = strlen(text);
    memcpy(p->err, text, p->errlen + 1);
    p->state = ST_FAILED;
    return RESP_ERROR;
}

static resp_status_t nomem(resp_parser_t *p)
{
    p->state = ST_FAILED;
    return RESP_NOMEM;
}

enum line { LINE_MORE, LINE_FOUND, LINE_TOO_BIG };

/* Looks for `ch` in c[from..n), within max_inline bytes of `from` (a line
 * may be max_inline bytes long before its end), resuming where the last
 * call stopped (p->scan).  LINE_FOUND sets *at. */
static enum line find_end(resp_parser_t *p, const char *c, size_t n, size_t from, char ch, size_t *at)
{
    size_t window = from + p->lim.max_inline + 1; /* the end must be at an index below this */
    size_t stop = n < window ? n : window;
    size_t s = p->scan > from ? p->scan : from;
    if (s < stop) {
        const char *e = memchr(c + s, ch, stop - s);
        if (e) {
            *at = (size_t)(e - c);
            p->scan = *at;
            return LINE_FOUND;
        }
    }
    p->scan = stop;
    return n >= window ? LINE_TOO_BIG : LINE_MORE;
}

/* ----------------------------------------------------------- inline -- */

static bool is_space(char ch) /* isspace() in the C locale */
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
}

static int hex_val(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* sdssplitargs's rules on line[0..n) (n excludes the line end; a NUL ends
 * it too).  Plain words are views into the line; a word with quotes is
 * decoded into the scratch.  Returns RESP_CMD with p->argc words (0: a
 * blank line), RESP_ERROR or RESP_NOMEM. */
static resp_status_t split_line(resp_parser_t *p, const char *line, size_t n)
{
    const char *nul = memchr(line, '\0', n);
    if (nul)
        n = (size_t)(nul - line);
#define CH(k) ((k) < n ? line[k] : '\0')
    size_t most = n / 2 + 1; /* words in n bytes, each followed by a separator */
    size_t i = 0, used = 0;  /* used: scratch bytes written */
    p->argc = 0;
    for (;;) {
        while (i < n && is_space(line[i]))
            i++;
        if (i >= n)
            return RESP_CMD;
        if (!argv_reserve(p, p->argc + 1, most))
            return nomem(p);
        size_t start = i;
        while (i < n && line[i] != ' ' && line[i] != '\n' && line[i] != '\r' && line[i] != '\t' && line[i] != '"' &&
               line[i] != '\'')
            i++;
        if (i >= n || (line[i] != '"' && line[i] != '\'')) {
            p->argv[p->argc++] = (resp_arg_t){line + start, i - start};
            continue;
        }
        /* a quote: the word goes to the scratch, which one line always fits */
        if (!scratch_reserve(p, n))
            return nomem(p);
        char *out = p->scratch + used;
        size_t w = i - start;
        memcpy(out, line + start, w);
        bool inq = false, insq = false, done = false;
        while (!done) {
            char ch = CH(i);
            if (inq) {
                if (ch == '\\' && CH(i + 1) == 'x' && hex_val(CH(i + 2)) >= 0 && hex_val(CH(i + 3)) >= 0) {
                    out[w++] = (char)(hex_val(CH(i + 2)) * 16 + hex_val(CH(i + 3)));
                    i += 3;
                } else if (ch == '\\' && CH(i + 1)) {
                    i++;
                    switch (line[i]) {
                    case 'n': out[w++] = '\n'; break;
                    case 'r': out[w++] = '\r'; break;
                    case 't': out[w++] = '\t'; break;
                    case 'b': out[w++] = '\b'; break;
                    case 'a': out[w++] = '\a'; break;
                    default: out[w++] = line[i]; break;
                    }
                } else if (ch == '"') {
                    if (CH(i + 1) && !is_space(CH(i + 1)))
                        return fail(p, "Protocol error: unbalanced quotes in request");
                    done = true;
                } else if (!ch) {
                    return fail(p, "Protocol error: unbalanced quotes in request");
                } else {
                    out[w++] = ch;
                }
            } else if (insq) {
                if (ch == '\\' && CH(i + 1) == '\'') {
                    i++;
                    out[w++] = '\'';
                } else if (ch == '\'') {
                    if (CH(i + 1) && !is_space(CH(i + 1)))
                        return fail(p, "Protocol error: unbalanced quotes in request");
                    done = true;
                } else if (!ch) {
                    return fail(p, "Protocol error: unbalanced quotes in request");
                } else {
                    out[w++] = ch;
                }
            } else {
                switch (ch) {
                case ' ': case '\n': case '\r': case '\t': case '\0': done = true; break;
                case '"': inq = true; break;
                case '\'': insq = true; break;
                default: out[w++] = ch; break;
                }
            }
            if (CH(i))
                i++;
        }
        p->argv[p->argc++] = (resp_arg_t){out, w};
        used += w;
    }
#undef CH
}

/* An inline command at c[0..n): RESP_CMD (p->argc may be 0: skip it) with
 * *end the bytes it took, RESP_MORE, or an error. */
static resp_status_t parse_inline(resp_parser_t *p, const char *c, size_t n, size_t *end)
{
    size_t lf;
    switch (find_end(p, c, n, 0, '\n', &lf)) {
    case LINE_MORE: return RESP_MORE;
    case LINE_TOO_BIG: return fail(p, "Protocol error: too big inline request");
    case LINE_FOUND: break;
    }
    size_t len = lf > 0 && c[lf - 1] == '\r' ? lf - 1 : lf;
    *end = lf + 1;
    return split_line(p, c, len);
}

/* -------------------------------------------------------- multibulk -- */

static resp_status_t parse_multibulk(resp_parser_t *p, const char *c, size_t n, size_t *end)
{
    size_t cr;
    long long ll;
    if (p->state == ST_COUNT) {
        switch (find_end(p, c, n, 0, '\r', &cr)) {
        case LINE_MORE: return RESP_MORE;
        case LINE_TOO_BIG: return fail(p, "Protocol error: too big mbulk count string");
        case LINE_FOUND: break;
        }
        if (n - cr < 2)
            return RESP_MORE;
        if (!read_ll(c + 1, cr - 1, &ll) || (ll > 0 && (unsigned long long)ll > p->lim.max_args))
            return fail(p, "Protocol error: invalid multibulk length");
        if (ll > RESP_UNAUTH_MAX_ARGS && p->auth_required)
            return fail(p, "Protocol error: unauthenticated multibulk length");
        p->pos = p->first = cr + 2;
        if (ll <= 0) {
            p->argc = 0;
            *end = p->pos;
            return RESP_CMD;
        }
        p->remaining = ll;
        p->bulklen = -1;
        p->argc = 0;
        p->scan = p->pos;
        p->state = ST_ARGS;
    }
    while (p->remaining > 0) {
        if (p->bulklen < 0) {
            switch (find_end(p, c, n, p->pos, '\r', &cr)) {
            case LINE_MORE: return RESP_MORE;
            case LINE_TOO_BIG: return fail(p, "Protocol error: too big bulk count string");
            case LINE_FOUND: break;
            }
            if (n - cr < 2)
                return RESP_MORE;
            if (c[p->pos] != '$') {
                char got = c[p->pos] == '\r' || c[p->pos] == '\n' ? ' ' : c[p->pos];
                p->errlen = (size_t)snprintf(p->err, sizeof(p->err), "Protocol error: expected '$', got '%c'", got);
                if (got == '\0') /* as Redis would print it: the text stops at the NUL */
                    p->errlen = strlen(p->err);
                p->state = ST_FAILED;
                return RESP_ERROR;
            }
            if (!read_ll(c + p->pos + 1, cr - p->pos - 1, &ll) || ll < 0 ||
                (unsigned long long)ll > p->lim.max_bulk)
                return fail(p, "Protocol error: invalid bulk length");
            if (ll > RESP_UNAUTH_MAX_BULK && p->auth_required)
                return fail(p, "Protocol error: unauthenticated bulk length");
            p->pos = cr + 2;
            p->bulklen = ll;
        }
        /* the data and the two bytes after it */
        if (n - p->pos < (unsigned long long)p->bulklen + 2)
            return RESP_MORE;
        size_t most = p->argc + (size_t)p->remaining;
        if (!argv_reserve(p, p->argc + 1, most))
            return nomem(p);
        p->argv[p->argc++].len = (size_t)p->bulklen;
        p->pos += (size_t)p->bulklen + 2;
        p->bulklen = -1;
        p->remaining--;
        p->scan = p->pos;
    }
    /* complete: each argument's data follows its "$N\r?" line, N printed
     * in its canonical form (read_ll accepts no other) */
    size_t off = p->first;
    for (size_t i = 0; i < p->argc; i++) {
        off += 1 + digits(p->argv[i].len) + 2;
        p->argv[i].ptr = c + off;
        off += p->argv[i].len + 2;
    }
    *end = p->pos;
    return RESP_CMD;
}

/* ----------------------------------------------------------- public -- */

resp_limits_t resp_limits_default(void)
{
    return (resp_limits_t){RESP_MAX_ARGS_DEFAULT, RESP_MAX_BULK_DEFAULT, RESP_MAX_INLINE_DEFAULT};
}

resp_parser_t *resp_parser_new(const resp_limits_t *lim, resp_mem_fn mem, void *ud)
{
    resp_parser_t *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->lim = lim ? *lim : resp_limits_default();
    if (p->lim.max_args < 1)
        p->lim.max_args = 1;
    if (p->lim.max_args > INT_MAX) /* Redis's own ceiling */
        p->lim.max_args = INT_MAX;
    if (p->lim.max_inline < 16)
        p->lim.max_inline = 16;
    if (p->lim.max_inline > SIZE_MAX / 4) /* offsets plus the limit stay within size_t */
        p->lim.max_inline = SIZE_MAX / 4;
    p->mem = mem;
    p->ud = ud;
    p->state = ST_START;
    return p;
}

void resp_parser_free(resp_parser_t *p)
{
    if (!p)
        return;
    size_t before = held_bytes(p);
    free(p->argv);
    free(p->scratch);
    p->argv = NULL;
    p->scratch = NULL;
    p->cap = p->scratch_cap = 0;
    if (before)
        mem_tell(p, before);
    free(p);
}

void resp_parser_require_auth(resp_parser_t *p, bool required)
{
    p->auth_required = required;
}

resp_status_t resp_parse(resp_parser_t *p, const char *buf, size_t len, size_t *used, resp_cmd_t *cmd)
{
    *used = 0;
    if (p->state == ST_FAILED)
        return p->errlen ? RESP_ERROR : RESP_NOMEM;
    if (p->state == ST_START)
        shrink(p);
    size_t base = 0; /* start of the current command in buf */
    for (;;) {
        const char *c = buf + base;
        size_t n = len - base;
        if (p->state == ST_START) {
            if (n == 0)
                return RESP_MORE;
            p->state = c[0] == '*' ? ST_COUNT : ST_INLINE;
            p->scan = 0;
        }
        size_t end = 0;
        resp_status_t st = p->state == ST_INLINE ? parse_inline(p, c, n, &end) : parse_multibulk(p, c, n, &end);
        if (st != RESP_CMD)
            return st;
        base += end;
        *used = base;
        p->state = ST_START;
        if (p->argc > 0) {
            cmd->argc = p->argc;
            cmd->argv = p->argv;
            return RESP_CMD;
        }
    }
}

const char *resp_parser_error(const resp_parser_t *p, size_t *len)
{
    if (len)
        *len = p->errlen;
    return p->err;
}

size_t resp_parser_mem(const resp_parser_t *p)
{
    return held_bytes(p);
}
