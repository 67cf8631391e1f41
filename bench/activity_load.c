/*
 * activity_load.c - the "daily logins of N users for a year" scenario, loaded
 * into Redis and into tallyd from the same generated data, then queried on
 * both: memory held, and the time to count distinct users over the last 7, 30
 * and 365 days.  Every count is checked to be the same on both sides.
 *
 *   activity_load TALLY_PORT REDIS_PORT VARIANT USERS DAYS
 *
 * VARIANT: p10 (each user active on a day with probability 10%), p1 (1%),
 * clustered (active users come in runs of consecutive ids, ~10% of ids).
 *
 * Redis side (the seed's design): one bit string per day, SET raw (1.25 MB for
 * 10M users); a window is BITOP OR into a scratch key + BITCOUNT.
 * tally side: POST /activity/{key}/import?day= with the day's ids as portable
 * Roaring bitmaps of at most 96 chunks (< 1 MiB, the default --max-body);
 * a window is GET /activity/{key}/count.
 *
 * Prints "name<TAB>value" lines for bench/suite_40_bits_activity.sh.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <roaring/roaring.h>

#include "core/activity.h"
#include "core/rng.h"

#define CHUNK_CONTAINERS 96            /* 96 x 8 KiB bitsets < 1 MiB per request */
#define KEY "act"

static void die(const char *msg)
{
    fprintf(stderr, "activity_load: %s (%s)\n", msg, strerror(errno));
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        c += w;
        n -= (size_t)w;
    }
}

/* A tiny buffered reader shared by both protocols. */
typedef struct conn {
    int fd;
    char *buf;
    size_t len, off, cap;
} conn_t;

static void fill(conn_t *c, size_t need)
{
    if (c->off == c->len)
        c->off = c->len = 0;
    while (c->len - c->off < need) {
        if (c->cap - c->len < 65536) {
            c->cap = c->cap * 2 + 65536;
            c->buf = realloc(c->buf, c->cap);
        }
        ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            die("read");
        c->len += (size_t)r;
    }
}

/* Reads up to and including "\r\n"; returns the line (NUL-terminated, valid
 * until the next read). */
static char *read_line(conn_t *c)
{
    for (size_t i = 0;; i++) {
        fill(c, i + 2);
        if (c->buf[c->off + i] == '\r' && c->buf[c->off + i + 1] == '\n') {
            char *s = c->buf + c->off;
            s[i] = '\0';
            c->off += i + 2;
            return s;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Redis (RESP)                                                             */
/* ------------------------------------------------------------------------ */

static void resp_send(conn_t *c, int argc, const char *const *argv, const size_t *lens)
{
    char hdr[64];
    int n = snprintf(hdr, sizeof(hdr), "*%d\r\n", argc);
    send_all(c->fd, hdr, (size_t)n);
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        n = snprintf(hdr, sizeof(hdr), "$%zu\r\n", l);
        send_all(c->fd, hdr, (size_t)n);
        send_all(c->fd, argv[i], l);
        send_all(c->fd, "\r\n", 2);
    }
}

/* Reads one reply: integers into *ival; bulk strings copied into *bulk
 * (malloc'd); errors are fatal. */
static void resp_read(conn_t *c, long long *ival, char **bulk)
{
    char *line = read_line(c);
    if (line[0] == '-') {
        fprintf(stderr, "redis: %s\n", line);
        exit(1);
    }
    if (line[0] == ':' && ival)
        *ival = strtoll(line + 1, NULL, 10);
    if (line[0] == '$') {
        long long n = strtoll(line + 1, NULL, 10);
        if (n >= 0) {
            fill(c, (size_t)n + 2);
            if (bulk) {
                *bulk = malloc((size_t)n + 1);
                memcpy(*bulk, c->buf + c->off, (size_t)n);
                (*bulk)[n] = '\0';
            }
            c->off += (size_t)n + 2;
        }
    }
}

static long long redis_used_memory(conn_t *c)
{
    const char *argv[] = { "INFO", "memory" };
    resp_send(c, 2, argv, NULL);
    char *info = NULL;
    resp_read(c, NULL, &info);
    const char *p = info ? strstr(info, "used_memory:") : NULL;
    long long v = p ? strtoll(p + 12, NULL, 10) : -1;
    free(info);
    return v;
}

/* ------------------------------------------------------------------------ */
/* tallyd (HTTP/1.1 keep-alive)                                             */
/* ------------------------------------------------------------------------ */

/* Sends a request and returns the status; the body goes to *body (valid
 * until the next call). */
static int http_req(conn_t *c, const char *method, const char *path, const void *body, size_t blen,
                    char **rbody)
{
    char hdr[512];
    int n = snprintf(hdr, sizeof(hdr),
                     "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, blen);
    send_all(c->fd, hdr, (size_t)n);
    if (blen)
        send_all(c->fd, body, blen);
    char *status = read_line(c);
    int code = atoi(strchr(status, ' ') + 1);
    size_t clen = 0;
    for (;;) {
        char *h = read_line(c);
        if (!*h)
            break;
        if (strncasecmp(h, "Content-Length:", 15) == 0)
            clen = (size_t)strtoull(h + 15, NULL, 10);
    }
    if (clen)
        fill(c, clen);
    static char *copy;
    free(copy);
    copy = malloc(clen + 1);
    memcpy(copy, c->buf + c->off, clen);
    copy[clen] = '\0';
    c->off += clen;
    if (rbody)
        *rbody = copy;
    return code;
}

static long long json_member(const char *body, const char *name)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", name);
    const char *p = strstr(body, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* ------------------------------------------------------------------------ */
/* Data                                                                     */
/* ------------------------------------------------------------------------ */

/* The ids active on `day` (ascending) into ids; returns how many. */
static size_t gen_day(const char *variant, int day, uint32_t users, uint32_t *ids)
{
    rng_t g;
    rng_seed(&g, 0x10adULL * 1000003 + (uint64_t)day * 7919 + (uint64_t)(unsigned char)variant[1]);
    size_t n = 0;
    if (strcmp(variant, "clustered") == 0) {
        /* runs of ~2000 active ids separated by gaps of ~18000: ~10% of ids */
        uint64_t id = rng_below(&g, 36000);
        while (id < users) {
            uint64_t len = 1 + rng_below(&g, 4000);
            for (uint64_t i = 0; i < len && id < users; i++)
                ids[n++] = (uint32_t)id++;
            id += 1 + rng_below(&g, 36000);
        }
        return n;
    }
    double p = strcmp(variant, "p1") == 0 ? 0.01 : 0.10;
    uint64_t thr = (uint64_t)(p * 4294967296.0);
    for (uint32_t u = 0; u < users; u += 2) {
        uint64_t r = rng_next(&g);
        if ((r & 0xffffffffu) < thr)
            ids[n++] = u;
        if ((r >> 32) < thr && u + 1 < users)
            ids[n++] = u + 1;
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: activity_load TALLY_PORT REDIS_PORT p10|p1|clustered USERS DAYS\n");
        return 2;
    }
    conn_t tally = { connect_to(atoi(argv[1])), NULL, 0, 0, 0 };
    conn_t redis = { connect_to(atoi(argv[2])), NULL, 0, 0, 0 };
    const char *variant = argv[3];
    uint32_t users = (uint32_t)strtoul(argv[4], NULL, 10);
    int days = atoi(argv[5]);
    int32_t first_day;
    activity_parse_day("2025-01-01", 10, &first_day);

    uint32_t *ids = malloc((size_t)users * sizeof(*ids));
    size_t slen = ((size_t)users + 7) / 8;
    uint8_t *str = malloc(slen);
    if (!ids || !str)
        die("malloc");
    long long redis_before = redis_used_memory(&redis);
    double t_redis = 0, t_tally = 0, t_gen = 0;
    uint64_t total_ids = 0;
    char path[256], key[64];
    for (int d = 0; d < days; d++) {
        double t0 = now_s();
        size_t n = gen_day(variant, d, users, ids);
        total_ids += n;
        memset(str, 0, slen);
        for (size_t i = 0; i < n; i++)
            str[ids[i] >> 3] |= (uint8_t)(0x80u >> (ids[i] & 7));
        double t1 = now_s();
        t_gen += t1 - t0;

        snprintf(key, sizeof(key), "%s:%d", variant, d);
        const char *sargv[] = { "SET", key, (const char *)str };
        const size_t slens[] = { 3, strlen(key), slen };
        resp_send(&redis, 3, sargv, slens);
        resp_read(&redis, NULL, NULL);
        double t2 = now_s();
        t_redis += t2 - t1;

        /* the day's bitmap in chunks of CHUNK_CONTAINERS containers */
        char dn[11];
        activity_format_day(first_day + d, dn);
        snprintf(path, sizeof(path), "/activity/%s/import?day=%s", KEY, dn);
        size_t lo = 0;
        while (lo < n) {
            uint64_t limit_hi = ((uint64_t)ids[lo] / (65536u * CHUNK_CONTAINERS) + 1) * (65536u * CHUNK_CONTAINERS);
            size_t hi = lo;
            while (hi < n && ids[hi] < limit_hi)
                hi++;
            double c0 = now_s();
            roaring_bitmap_t *bm = roaring_bitmap_create();
            roaring_bitmap_add_many(bm, hi - lo, ids + lo);
            roaring_bitmap_run_optimize(bm);
            size_t blen = roaring_bitmap_portable_size_in_bytes(bm);
            char *buf = malloc(blen);
            roaring_bitmap_portable_serialize(bm, buf);
            roaring_bitmap_free(bm);
            double c1 = now_s();
            t_gen += c1 - c0;
            char *rb;
            int code = http_req(&tally, "POST", path, buf, blen, &rb);
            free(buf);
            if (code != 200) {
                fprintf(stderr, "activity_load: import %s: %d %s\n", path, code, rb);
                return 1;
            }
            t_tally += now_s() - c1;
            lo = hi;
        }
    }
    long long redis_mem = redis_used_memory(&redis) - redis_before;
    char *rb;
    snprintf(path, sizeof(path), "/keys/%s", KEY);
    if (http_req(&tally, "GET", path, NULL, 0, &rb) != 200)
        die("GET /keys");
    long long tally_mem = json_member(rb, "memory_bytes");

    printf("ids_total\t%llu\n", (unsigned long long)total_ids);
    printf("generate_s\t%.2f\n", t_gen);
    printf("load_redis_s\t%.2f\n", t_redis);
    printf("load_tally_s\t%.2f\n", t_tally);
    printf("memory_redis\t%lld\n", redis_mem);
    printf("memory_tally\t%lld\n", tally_mem);

    static const int windows[] = { 7, 30, 365 };
    for (size_t w = 0; w < sizeof(windows) / sizeof(windows[0]); w++) {
        int W = windows[w];
        if (W > days)
            continue;
        int reps_redis = W >= 100 ? 3 : 7, reps_tally = 15;
        double tr[16], tt[16];
        long long cnt_redis = -1, cnt_tally = -1;
        const char **bargv = malloc((size_t)(W + 3) * sizeof(*bargv));
        char **names = malloc((size_t)W * sizeof(*names));
        bargv[0] = "BITOP";
        bargv[1] = "OR";
        bargv[2] = "scratch";
        for (int i = 0; i < W; i++) {
            names[i] = malloc(64);
            snprintf(names[i], 64, "%s:%d", variant, days - W + i);
            bargv[3 + i] = names[i];
        }
        for (int r = 0; r < reps_redis; r++) {
            double t0 = now_s();
            resp_send(&redis, W + 3, bargv, NULL);
            resp_read(&redis, NULL, NULL);
            const char *cargv[] = { "BITCOUNT", "scratch" };
            resp_send(&redis, 2, cargv, NULL);
            resp_read(&redis, &cnt_redis, NULL);
            tr[r] = now_s() - t0;
        }
        char f[11], t[11];
        activity_format_day(first_day + days - W, f);
        activity_format_day(first_day + days - 1, t);
        snprintf(path, sizeof(path), "/activity/%s/count?from=%s&to=%s", KEY, f, t);
        for (int r = 0; r < reps_tally; r++) {
            double t0 = now_s();
            if (http_req(&tally, "GET", path, NULL, 0, &rb) != 200)
                die("GET count");
            tt[r] = now_s() - t0;
            cnt_tally = json_member(rb, "users");
        }
        if (cnt_redis != cnt_tally) {
            fprintf(stderr, "activity_load: %d-day window: redis counts %lld, tally %lld\n", W, cnt_redis, cnt_tally);
            return 1;
        }
        printf("users_%d\t%lld\n", W, cnt_tally);
        printf("redis_ms_%d\t%.3f\n", W, median(tr, reps_redis) * 1e3);
        printf("tally_ms_%d\t%.3f\n", W, median(tt, reps_tally) * 1e3);
        for (int i = 0; i < W; i++)
            free(names[i]);
        free(names);
        free(bargv);
    }
    const char *dargv[] = { "DEL", "scratch" };
    resp_send(&redis, 2, dargv, NULL);
    resp_read(&redis, NULL, NULL);
    free(ids);
    free(str);
    return 0;
}
