/*
 * resp_micro.c - what reading a Redis protocol request costs: resp/parse.h
 * against hiredis's reader (redisReader, Debian's libhiredis-dev; `make
 * deps-bench` installs it), without the network.
 *
 * Two requests, as clients send them:
 *   set       *3 $3 SET $16 key:... $5 value           (redis-benchmark's SET)
 *   throttle  *6 $11 CL.THROTTLE $9 user:... 15 30 60 1 (redis-cell)
 * each read two ways:
 *   pipelined  1000 commands in one buffer, parsed to the end (-P 1000)
 *   single     one command per buffer, as an unpipelined client's read
 * and, for each, the command's arguments are summed so that nothing is
 * left unread.  hiredis's reader builds a reply tree (an array object and a
 * copy of every string) that is freed after each command, which is what a
 * server using it for requests would pay; tally's parser returns views.
 *
 * CPU time of this thread (other load does not count), three alternating
 * rounds, the fastest of each kept.  Prints "name ns_per_command" lines.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resp/parse.h"

#define PIPELINE 1000 /* commands per buffer, pipelined */
#define COMMANDS 2000000 /* commands per measurement */
#define ROUNDS 3

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* PIPELINE commands of one kind, keys varied; offsets of each in *at. */
static char *build(int throttle, size_t *len, size_t *at)
{
    size_t cap = PIPELINE * 128, n = 0;
    char *b = malloc(cap);
    for (int i = 0; i < PIPELINE; i++) {
        at[i] = n;
        if (throttle)
            n += (size_t)snprintf(b + n, cap - n,
                                  "*6\r\n$11\r\nCL.THROTTLE\r\n$9\r\nuser:%04d\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n"
                                  "$1\r\n1\r\n", i);
        else
            n += (size_t)snprintf(b + n, cap - n, "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$5\r\nvalue\r\n", i);
    }
    at[PIPELINE] = n;
    *len = n;
    return b;
}

static volatile size_t sink;

static double ours(const char *b, size_t len, const size_t *at, int single)
{
    resp_parser_t *p = resp_parser_new(NULL, NULL, NULL);
    size_t sum = 0;
    double t0 = now_ns();
    for (int done = 0; done < COMMANDS; done += PIPELINE) {
        if (single) {
            for (int i = 0; i < PIPELINE; i++) {
                size_t used;
                resp_cmd_t c;
                if (resp_parse(p, b + at[i], at[i + 1] - at[i], &used, &c) != RESP_CMD)
                    abort();
                for (size_t k = 0; k < c.argc; k++)
                    sum += c.argv[k].len + (unsigned char)c.argv[k].ptr[0];
            }
        } else {
            size_t off = 0, used;
            resp_cmd_t c;
            while (resp_parse(p, b + off, len - off, &used, &c) == RESP_CMD) {
                off += used;
                for (size_t k = 0; k < c.argc; k++)
                    sum += c.argv[k].len + (unsigned char)c.argv[k].ptr[0];
            }
        }
    }
    double t = (now_ns() - t0) / COMMANDS;
    sink = sum;
    resp_parser_free(p);
    return t;
}

static double hiredis(const char *b, size_t len, const size_t *at, int single)
{
    redisReader *r = redisReaderCreate();
    size_t sum = 0;
    double t0 = now_ns();
    for (int done = 0; done < COMMANDS; done += PIPELINE) {
        if (!single && redisReaderFeed(r, b, len) != REDIS_OK)
            abort();
        for (int i = 0; i < PIPELINE; i++) {
            if (single && redisReaderFeed(r, b + at[i], at[i + 1] - at[i]) != REDIS_OK)
                abort();
            void *v = NULL;
            if (redisReaderGetReply(r, &v) != REDIS_OK || !v)
                abort();
            redisReply *rep = v;
            for (size_t k = 0; k < rep->elements; k++)
                sum += rep->element[k]->len + (unsigned char)rep->element[k]->str[0];
            freeReplyObject(rep);
        }
    }
    double t = (now_ns() - t0) / COMMANDS;
    sink = sum;
    redisReaderFree(r);
    return t;
}

int main(void)
{
    static const char *kinds[] = {"set", "throttle"};
    static const char *modes[] = {"pipelined", "single"};
    for (int kind = 0; kind < 2; kind++) {
        size_t at[PIPELINE + 1], len;
        char *b = build(kind, &len, at);
        for (int single = 0; single < 2; single++) {
            double best_ours = 1e30, best_hiredis = 1e30;
            for (int round = 0; round < ROUNDS; round++) {
                double a = ours(b, len, at, single), h = hiredis(b, len, at, single);
                best_ours = a < best_ours ? a : best_ours;
                best_hiredis = h < best_hiredis ? h : best_hiredis;
            }
            printf("resp_%s_%s_tally %.1f\n", kinds[kind], modes[single], best_ours);
            printf("resp_%s_%s_hiredis %.1f\n", kinds[kind], modes[single], best_hiredis);
        }
        free(b);
    }
    return 0;
}
