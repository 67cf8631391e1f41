/*
 * it_resp_ts.c - RedisTimeSeries's commands (TS.*) on the Redis port:
 * replies byte for byte as RedisTimeSeries 1.10 writes them under RESP2
 * and RESP3 (no redis-server here has the module: the expected bytes are
 * its reply.c's shapes and its tests' values, tests/flow of
 * github.com/RedisTimeSeries/RedisTimeSeries, cited case by case), its
 * error texts word for word, and Python's redis package (r.ts()) reading
 * them.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "it_ts_upstream_cases.h"
#include "resp_client.h"

RESP_SUITE(NULL)

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Commands and the bytes they must answer, sent on one connection. */
typedef struct script {
    buf_t cmds, want;
    int proto;
} script_t;

#define SEND(s, want_bytes, ...)                                                                                       \
    do {                                                                                                               \
        mb(&(s)->cmds, __VA_ARGS__, NULL);                                                                             \
        buf_puts(&(s)->want, want_bytes);                                                                              \
    } while (0)

/* memoryUsage's figure is tally's own: written "M" on both sides. */
static void mask_memory(buf_t *b)
{
    static const char tag[] = "memoryUsage\r\n:";
    for (char *p = strstr(b->p, tag); p; p = strstr(p, tag)) {
        p += sizeof(tag) - 1;
        char *e = strstr(p, "\r\n");
        assert_non_null(e);
        memmove(p + 1, e, strlen(e) + 1);
        *p = 'M';
        b->len = strlen(b->p);
    }
}

/* Bytes with CR and LF written as \r and \n (a failure's message). */
static const char *shown(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    for (; *p && n + 3 < cap; p++) {
        if (*p == '\r' || *p == '\n') {
            out[n++] = '\\';
            out[n++] = *p == '\r' ? 'r' : 'n';
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return out;
}

/* Runs the script (after HELLO 3 when proto is 3, whose reply is left
 * out) and fails at the first byte that differs. */
static void run(script_t *s)
{
    buf_t got = exchange_proto(T.resp_port, s->proto, &s->cmds);
    buf_t g = { 0 };
    buf_puts(&g, got.p);
    mask_memory(&g);
    mask_memory(&s->want);
    size_t i = 0;
    while (i < g.len && i < s->want.len && g.p[i] == s->want.p[i])
        i++;
    if (i != g.len || i != s->want.len) {
        size_t from = i > 120 ? i - 120 : 0;
        char w[400], x[400];
        fail_msg("replies differ at byte %zu:\nwant: ...%s\ngot:  ...%s", i, shown(s->want.p + from, w, sizeof(w)),
                 shown(g.p + from, x, sizeof(x)));
    }
    free(g.p);
    free(got.p);
    free(s->cmds.p);
    free(s->want.p);
    memset(s, 0, sizeof(*s));
}

#define OK "+OK\r\n"
#define ERR(text) "-ERR TSDB: " text "\r\n"
#define WRONGTYPE "-ERR WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
#define NOKEY ERR("the key does not exist")

/* ------------------------------------------------------------------------ */
/* Writes                                                                   */
/* ------------------------------------------------------------------------ */

/* TS.CREATE / TS.ADD / TS.MADD / TS.INCRBY / TS.DECRBY / TS.ALTER / TS.DEL
 * and their replies (test_ts_create.py, test_ts_add.py, test_ts_madd.py,
 * test_ts_incrby.py, test_ts_alter.py, test_ts_delete.py). */
static void test_writes(void **state)
{
    (void)state;
    script_t s = { .proto = 2 };
    SEND(&s, OK, "TS.CREATE", "w:a", "RETENTION", "0", "CHUNK_SIZE", "128", "ENCODING", "UNCOMPRESSED",
         "DUPLICATE_POLICY", "LAST", "LABELS", "name", "brown", "color", "pink");
    SEND(&s, ERR("key already exists"), "TS.CREATE", "w:a");
    SEND(&s, ":1\r\n", "TS.ADD", "w:a", "1", "5");
    SEND(&s, ":1\r\n", "TS.ADD", "w:a", "1", "7");   /* DUPLICATE_POLICY LAST */
    SEND(&s, ":2\r\n", "ts.add", "w:a", "2", "2.5");
    SEND(&s, "*3\r\n:3\r\n:4\r\n-ERR TSDB: the key is not a TSDB key\r\n", "TS.MADD", "w:a", "3", "3", "w:a", "4",
         "4", "w:none", "5", "5");
    /* test_ts_madd.py test_madd: a sample refused among others */
    SEND(&s, OK, "TS.CREATE", "w:b");
    SEND(&s, ":10\r\n", "TS.ADD", "w:b", "10", "1");
    SEND(&s,
         "*3\r\n:11\r\n-ERR TSDB: Error at upsert, update is not supported when DUPLICATE_POLICY is set to BLOCK "
         "mode\r\n:12\r\n",
         "TS.MADD", "w:b", "11", "1", "w:b", "10", "2", "w:b", "12", "1");
    /* ON_DUPLICATE overrides the series' policy (test_duplicate_policy.py) */
    SEND(&s, ":10\r\n", "TS.ADD", "w:b", "10", "40", "ON_DUPLICATE", "SUM");
    SEND(&s, "*1\r\n*2\r\n:10\r\n+41\r\n", "TS.RANGE", "w:b", "10", "10");
    SEND(&s, ERR("Unknown DUPLICATE_POLICY"), "TS.ADD", "w:b", "10", "40", "ON_DUPLICATE", "nope");
    /* an existing series ignores creation options, even bad ones */
    SEND(&s, ":13\r\n", "TS.ADD", "w:b", "13", "1", "RETENTION", "x");
    SEND(&s, ERR("Couldn't parse RETENTION"), "TS.ADD", "w:new", "13", "1", "RETENTION", "x");
    /* TS.ADD creates with its options */
    SEND(&s, ":100\r\n", "TS.ADD", "w:c", "100", "1", "RETENTION", "50", "LABELS", "k", "v");
    SEND(&s, ERR("Timestamp is older than retention"), "TS.ADD", "w:c", "20", "1");
    /* TS.INCRBY / TS.DECRBY (test_ts_incrby.py) */
    SEND(&s, ":5\r\n", "TS.INCRBY", "w:i", "5", "TIMESTAMP", "5");
    SEND(&s, ":6\r\n", "TS.INCRBY", "w:i", "3", "TIMESTAMP", "6");
    SEND(&s, ":6\r\n", "TS.DECRBY", "w:i", "10", "TIMESTAMP", "6");
    SEND(&s, "*2\r\n:6\r\n+-2\r\n", "TS.GET", "w:i");
    SEND(&s, "-TSDB: timestamp must be equal to or higher than the maximum existing timestamp\r\n", "TS.INCRBY",
         "w:i", "1", "TIMESTAMP", "5");
    SEND(&s, ERR("invalid increase/decrease value"), "TS.INCRBY", "w:i", "x");
    SEND(&s, ERR("invalid timestamp"), "TS.INCRBY", "w:i", "1", "TIMESTAMP", "x");
    /* TS.ALTER (test_ts_alter.py) */
    SEND(&s, OK, "TS.ALTER", "w:a", "RETENTION", "10", "DUPLICATE_POLICY", "min", "LABELS", "x", "y");
    SEND(&s, NOKEY, "TS.ALTER", "w:none", "RETENTION", "10");
    /* TS.DEL (test_ts_delete.py) */
    SEND(&s, ":2\r\n", "TS.DEL", "w:b", "10", "11");
    SEND(&s, ":0\r\n", "TS.DEL", "w:b", "10", "11");
    SEND(&s, ":2\r\n", "TS.DEL", "w:b", "-", "+");
    SEND(&s, NOKEY, "TS.DEL", "w:none", "-", "+");
    SEND(&s, ERR("wrong fromTimestamp"), "TS.DEL", "w:b", "x", "+");
    SEND(&s, ERR("wrong toTimestamp"), "TS.DEL", "w:b", "-", "x");
    SEND(&s, "-ERR wrong number of arguments for 'TS.DEL' command\r\n", "TS.DEL", "w:b", "-");
    /* TYPE names the module's type */
    SEND(&s, "+TSDB-TYPE\r\n", "TYPE", "w:a");
    run(&s);
}

/* The errors of the writes' arguments (test_negative.py, test_ts_add.py,
 * test_ts_create.py), each changing nothing. */
static void test_write_errors(void **state)
{
    (void)state;
    script_t s = { .proto = 2 };
    SEND(&s, "-ERR wrong number of arguments for 'TS.CREATE' command\r\n", "TS.CREATE");
    SEND(&s, "-ERR wrong number of arguments for 'ts.add' command\r\n", "ts.add", "e:a", "1");
    SEND(&s, ERR("Couldn't parse RETENTION"), "TS.CREATE", "e:a", "RETENTION");
    SEND(&s, ERR("Couldn't parse RETENTION"), "TS.CREATE", "e:a", "RETENTION", "x");
    SEND(&s, "-TSDB: Couldn't parse RETENTION\r\n", "TS.CREATE", "e:a", "RETENTION", "-1");
    SEND(&s, ERR("Couldn't parse CHUNK_SIZE"), "TS.CREATE", "e:a", "CHUNK_SIZE", "x");
    SEND(&s, ERR("CHUNK_SIZE value must be a multiple of 8 in the range [48 .. 1048576]"), "TS.CREATE", "e:a",
         "CHUNK_SIZE", "20");
    SEND(&s, ERR("CHUNK_SIZE value must be a multiple of 8 in the range [48 .. 1048576]"), "TS.CREATE", "e:a",
         "CHUNK_SIZE", "130");
    SEND(&s, ERR("unknown ENCODING parameter"), "TS.CREATE", "e:a", "ENCODING", "bad");
    SEND(&s, "-ERR wrong number of arguments for 'TS.CREATE' command\r\n", "TS.CREATE", "e:a", "ENCODING");
    SEND(&s, ERR("Couldn't parse DUPLICATE_POLICY"), "TS.CREATE", "e:a", "DUPLICATE_POLICY");
    SEND(&s, ERR("Unknown DUPLICATE_POLICY"), "TS.CREATE", "e:a", "DUPLICATE_POLICY", "bad");
    SEND(&s, ERR("Couldn't parse LABELS"), "TS.CREATE", "e:a", "LABELS", "k", "");
    SEND(&s, ERR("Couldn't parse LABELS"), "TS.CREATE", "e:a", "LABELS", "k", "(a)");
    SEND(&s, ERR("invalid value"), "TS.ADD", "e:a", "1", "abc");
    SEND(&s, ERR("invalid value"), "TS.ADD", "e:a", "1", "+1");
    SEND(&s, ERR("invalid value"), "TS.ADD", "e:a", "1", ".5");
    SEND(&s, ERR("invalid value"), "TS.ADD", "e:a", "1", "01");
    SEND(&s, ERR("invalid value"), "TS.ADD", "e:a", "1", "1e");
    SEND(&s, ERR("invalid timestamp"), "TS.ADD", "e:a", "abc", "1");
    SEND(&s, ERR("invalid timestamp, must be a nonnegative integer"), "TS.ADD", "e:a", "-1", "1");
    SEND(&s, "-ERR wrong number of arguments for 'TS.MADD' command\r\n", "TS.MADD", "e:a", "1", "1", "e:a");
    SEND(&s, ":0\r\n", "EXISTS", "e:a");
    SEND(&s, ":1\r\n", "PFADD", "e:str", "a");
    SEND(&s, ERR("the key is not a TSDB key"), "TS.ADD", "e:str", "1", "1");
    SEND(&s, ERR("key already exists"), "TS.CREATE", "e:str");
    SEND(&s, WRONGTYPE, "TS.RANGE", "e:str", "-", "+");
    SEND(&s, WRONGTYPE, "TS.INFO", "e:str");
    SEND(&s, WRONGTYPE, "TS.GET", "e:str");
    SEND(&s, WRONGTYPE, "TS.INCRBY", "e:str", "1");
    SEND(&s, WRONGTYPE, "TS.INCRBY", "e:str", "x", "RETENTION", "y");   /* the type first */
    SEND(&s, ERR("Couldn't parse RETENTION"), "TS.INCRBY", "e:none", "x", "RETENTION", "y");
    SEND(&s, ERR("invalid increase/decrease value"), "TS.INCRBY", "e:none", "x");
    SEND(&s, ":0\r\n", "EXISTS", "e:none");
    /* the number at the start of the value is read ("2x" is 2) */
    SEND(&s, ":1\r\n", "TS.ADD", "e:p", "1", "2x");
    SEND(&s, ":2\r\n", "TS.ADD", "e:p", "2", "0x10");
    SEND(&s, ":3\r\n", "TS.ADD", "e:p", "3", "-1.5e2abc");
    SEND(&s, "*3\r\n*2\r\n:1\r\n+2\r\n*2\r\n:2\r\n+0\r\n*2\r\n:3\r\n+-150\r\n", "TS.RANGE", "e:p", "-", "+");
    run(&s);
}

/* ------------------------------------------------------------------------ */
/* Rules, TS.INFO                                                           */
/* ------------------------------------------------------------------------ */

/* TS.CREATERULE / TS.DELETERULE (test_ts_createrule.py,
 * test_ts_deleterule.py, test_ts_range.py test_errors) and TS.INFO's
 * fields (test_helper_classes.py TSInfo, test_ts_resp3.py). */
static void test_rules_info(void **state)
{
    (void)state;
    script_t s = { .proto = 2 };
    SEND(&s, OK, "TS.CREATE", "r:src", "LABELS", "name", "mush");
    SEND(&s, OK, "TS.CREATE", "r:dst");
    SEND(&s, OK, "TS.CREATE", "r:dst2");
    SEND(&s, OK, "TS.CREATERULE", "r:src", "r:dst", "AGGREGATION", "count", "10");
    SEND(&s, ERR("the destination key already has a src rule"), "TS.CREATERULE", "r:src", "r:dst", "AGGREGATION",
         "sum", "10");
    SEND(&s, ERR("the source key already has a source rule"), "TS.CREATERULE", "r:dst", "r:dst2", "AGGREGATION",
         "sum", "10");
    SEND(&s, ERR("the destination key already has a dst rule"), "TS.CREATERULE", "r:dst2", "r:src", "AGGREGATION",
         "sum", "10");
    SEND(&s, ERR("the source key and destination key should be different"), "TS.CREATERULE", "r:src", "r:src",
         "AGGREGATION", "sum", "10");
    SEND(&s, ERR("Unknown aggregation type"), "TS.CREATERULE", "r:src", "r:dst2", "AGGREGATION", "bad", "10");
    SEND(&s, ERR("Couldn't parse AGGREGATION"), "TS.CREATERULE", "r:src", "r:dst2", "AGGREGATION", "sum", "x");
    SEND(&s, ERR("bucketDuration must be greater than zero"), "TS.CREATERULE", "r:src", "r:dst2", "AGGREGATION",
         "sum", "0");
    SEND(&s, ERR("Couldn't parse alignTimestamp"), "TS.CREATERULE", "r:src", "r:dst2", "AGGREGATION", "avg", "5",
         "high");
    SEND(&s, "-ERR wrong number of arguments for 'TS.CREATERULE' command\r\n", "TS.CREATERULE", "r:src", "r:dst2",
         "sum", "10");
    SEND(&s, NOKEY, "TS.CREATERULE", "r:src", "r:none", "AGGREGATION", "sum", "10");
    SEND(&s, OK, "TS.CREATERULE", "r:src", "r:dst2", "AGGREGATION", "twa", "10", "5");
    /* samples 1..25 at value 5: the rule writes closed buckets */
    for (int t = 1; t <= 25; t++) {
        char ts[16];
        snprintf(ts, sizeof(ts), "%d", t);
        char want[16];
        snprintf(want, sizeof(want), ":%d\r\n", t);
        SEND(&s, want, "TS.ADD", "r:src", ts, "5");
    }
    SEND(&s, "*2\r\n*2\r\n:0\r\n+9\r\n*2\r\n:10\r\n+10\r\n", "TS.RANGE", "r:dst", "-", "+");
    SEND(&s, "*3\r\n*2\r\n:0\r\n+9\r\n*2\r\n:10\r\n+10\r\n*2\r\n:20\r\n+6\r\n", "TS.RANGE", "r:dst", "-", "+",
         "LATEST");
    SEND(&s, "*2\r\n:20\r\n+6\r\n", "TS.GET", "r:dst", "LATEST");
    SEND(&s, "*2\r\n:10\r\n+10\r\n", "TS.GET", "r:dst");
    SEND(&s, ERR("wrong 3rd argument"), "TS.GET", "r:dst", "x");
    SEND(&s,
         "*24\r\n+totalSamples\r\n:25\r\n+memoryUsage\r\n:0\r\n+firstTimestamp\r\n:1\r\n+lastTimestamp\r\n:25\r\n"
         "+retentionTime\r\n:0\r\n+chunkCount\r\n:1\r\n+chunkSize\r\n:4096\r\n+chunkType\r\n+compressed\r\n"
         "+duplicatePolicy\r\n$-1\r\n+labels\r\n*1\r\n*2\r\n$4\r\nname\r\n$4\r\nmush\r\n+sourceKey\r\n$-1\r\n"
         "+rules\r\n*2\r\n*4\r\n$5\r\nr:dst\r\n:10\r\n+COUNT\r\n:0\r\n*4\r\n$6\r\nr:dst2\r\n:10\r\n+TWA\r\n:5\r\n",
         "TS.INFO", "r:src");
    SEND(&s,
         "*28\r\n+totalSamples\r\n:2\r\n+memoryUsage\r\n:0\r\n+firstTimestamp\r\n:0\r\n+lastTimestamp\r\n:10\r\n"
         "+retentionTime\r\n:0\r\n+chunkCount\r\n:1\r\n+chunkSize\r\n:4096\r\n+chunkType\r\n+compressed\r\n"
         "+duplicatePolicy\r\n$-1\r\n+labels\r\n*0\r\n+sourceKey\r\n$5\r\nr:src\r\n+rules\r\n*0\r\n"
         "+keySelfName\r\n$5\r\nr:dst\r\n+Chunks\r\n*1\r\n*10\r\n+startTimestamp\r\n:0\r\n+endTimestamp\r\n:10\r\n"
         "+samples\r\n:2\r\n+size\r\n:4096\r\n+bytesPerSample\r\n$4\r\n2048\r\n",
         "TS.INFO", "r:dst", "DEBUG");
    /* an empty series: one empty chunk, as RedisTimeSeries creates one */
    SEND(&s, OK, "TS.CREATE", "r:empty", "DUPLICATE_POLICY", "SUM");
    SEND(&s,
         "*28\r\n+totalSamples\r\n:0\r\n+memoryUsage\r\n:0\r\n+firstTimestamp\r\n:0\r\n+lastTimestamp\r\n:0\r\n"
         "+retentionTime\r\n:0\r\n+chunkCount\r\n:1\r\n+chunkSize\r\n:4096\r\n+chunkType\r\n+compressed\r\n"
         "+duplicatePolicy\r\n+sum\r\n+labels\r\n*0\r\n+sourceKey\r\n$-1\r\n+rules\r\n*0\r\n"
         "+keySelfName\r\n$7\r\nr:empty\r\n+Chunks\r\n*1\r\n*10\r\n+startTimestamp\r\n:-1\r\n+endTimestamp\r\n:-1\r\n"
         "+samples\r\n:0\r\n+size\r\n:4096\r\n+bytesPerSample\r\n$1\r\n0\r\n",
         "TS.INFO", "r:empty", "DEBUG");
    SEND(&s, "*0\r\n", "TS.GET", "r:empty");
    SEND(&s, NOKEY, "TS.INFO", "r:none");
    SEND(&s, NOKEY, "TS.GET", "r:none");
    SEND(&s, ERR("compaction rule does not exist"), "TS.DELETERULE", "r:src", "r:empty");
    SEND(&s, NOKEY, "TS.DELETERULE", "r:none", "r:dst");
    SEND(&s, OK, "TS.DELETERULE", "r:src", "r:dst");
    SEND(&s, "-ERR wrong number of arguments for 'TS.DELETERULE' command\r\n", "TS.DELETERULE", "r:src");
    /* deleting before the retention window of a series with rules
     * (test_ts_delete.py test_del_outside_retention_period) */
    SEND(&s, OK, "TS.CREATE", "r:t1", "RETENTION", "20");
    SEND(&s, OK, "TS.CREATE", "r:t2", "RETENTION", "10");
    SEND(&s, OK, "TS.CREATERULE", "r:t1", "r:t2", "AGGREGATION", "sum", "10");
    SEND(&s, "*4\r\n:13\r\n:17\r\n:22\r\n:31\r\n", "TS.MADD", "r:t1", "13", "13", "r:t1", "17", "17", "r:t1", "22",
         "22", "r:t1", "31", "31");
    SEND(&s,
         ERR("When a series has compactions, deleting samples or compaction buckets beyond the series retention "
             "period is not possible"),
         "TS.DEL", "r:t1", "5", "25");
    run(&s);

    /* RESP3: maps (test_ts_resp3.py test_resp3) */
    s.proto = 3;
    SEND(&s,
         "%12\r\n+totalSamples\r\n:25\r\n+memoryUsage\r\n:0\r\n+firstTimestamp\r\n:1\r\n+lastTimestamp\r\n:25\r\n"
         "+retentionTime\r\n:0\r\n+chunkCount\r\n:1\r\n+chunkSize\r\n:4096\r\n+chunkType\r\n+compressed\r\n"
         "+duplicatePolicy\r\n_\r\n+labels\r\n%1\r\n$4\r\nname\r\n$4\r\nmush\r\n+sourceKey\r\n_\r\n"
         "+rules\r\n%1\r\n$6\r\nr:dst2\r\n*3\r\n:10\r\n+TWA\r\n:5\r\n",
         "TS.INFO", "r:src");
    SEND(&s, "*2\r\n:25\r\n,5\r\n", "TS.GET", "r:src");
    SEND(&s,
         "%14\r\n+totalSamples\r\n:0\r\n+memoryUsage\r\n:0\r\n+firstTimestamp\r\n:0\r\n+lastTimestamp\r\n:0\r\n"
         "+retentionTime\r\n:0\r\n+chunkCount\r\n:1\r\n+chunkSize\r\n:4096\r\n+chunkType\r\n+compressed\r\n"
         "+duplicatePolicy\r\n+sum\r\n+labels\r\n%0\r\n+sourceKey\r\n_\r\n+rules\r\n%0\r\n"
         "+keySelfName\r\n$7\r\nr:empty\r\n+Chunks\r\n*1\r\n%5\r\n+startTimestamp\r\n:-1\r\n+endTimestamp\r\n:-1\r\n"
         "+samples\r\n:0\r\n+size\r\n:4096\r\n+bytesPerSample\r\n,0\r\n",
         "TS.INFO", "r:empty", "DEBUG");
    run(&s);
}

/* ------------------------------------------------------------------------ */
/* Ranges                                                                   */
/* ------------------------------------------------------------------------ */

/* TS.RANGE / TS.REVRANGE: aggregations, ALIGN, EMPTY, BUCKETTIMESTAMP,
 * COUNT, FILTER_BY_TS / FILTER_BY_VALUE (test_ts_range.py test_empty,
 * test_bucket_timestamp, test_filter_by, test_range_count), values as the
 * module prints them. */
static void test_range(void **state)
{
    (void)state;
    script_t s = { .proto = 2 };
    static const char *const t1[][2] = { { "15", "1" }, { "17", "4" }, { "51", "3" }, { "73", "5" }, { "75", "3" } };
    for (size_t i = 0; i < 5; i++) {
        char want[16];
        snprintf(want, sizeof(want), ":%s\r\n", t1[i][0]);
        SEND(&s, want, "TS.ADD", "g:t1", t1[i][0], t1[i][1]);
    }
    SEND(&s,
         "*7\r\n*2\r\n:10\r\n+4\r\n*2\r\n:20\r\n+NaN\r\n*2\r\n:30\r\n+NaN\r\n*2\r\n:40\r\n+NaN\r\n*2\r\n:50\r\n+3\r\n"
         "*2\r\n:60\r\n+NaN\r\n*2\r\n:70\r\n+5\r\n",
         "TS.RANGE", "g:t1", "0", "100", "ALIGN", "0", "AGGREGATION", "max", "10", "EMPTY");
    SEND(&s,
         "*7\r\n*2\r\n:70\r\n+8\r\n*2\r\n:60\r\n+0\r\n*2\r\n:50\r\n+3\r\n*2\r\n:40\r\n+0\r\n*2\r\n:30\r\n+0\r\n"
         "*2\r\n:20\r\n+0\r\n*2\r\n:10\r\n+5\r\n",
         "TS.REVRANGE", "g:t1", "0", "100", "ALIGN", "0", "AGGREGATION", "sum", "10", "EMPTY");
    SEND(&s, "*3\r\n*2\r\n:15\r\n+4\r\n*2\r\n:55\r\n+3\r\n*2\r\n:75\r\n+5\r\n", "TS.RANGE", "g:t1", "0", "74",
         "ALIGN", "0", "AGGREGATION", "max", "10", "BUCKETTIMESTAMP", "~");
    SEND(&s, "*3\r\n*2\r\n:80\r\n+5\r\n*2\r\n:60\r\n+3\r\n*2\r\n:20\r\n+4\r\n", "TS.REVRANGE", "g:t1", "0", "100",
         "ALIGN", "0", "AGGREGATION", "max", "10", "BUCKETTIMESTAMP", "+");
    SEND(&s, "*2\r\n*2\r\n:15\r\n+1\r\n*2\r\n:17\r\n+4\r\n", "TS.RANGE", "g:t1", "-", "+", "COUNT", "2");
    SEND(&s, "*1\r\n*2\r\n:75\r\n+3\r\n", "TS.REVRANGE", "g:t1", "-", "+", "COUNT", "1");
    /* "AGGREGATION count": the word is the aggregation, COUNT comes later */
    SEND(&s, "*1\r\n*2\r\n:10\r\n+2\r\n", "TS.RANGE", "g:t1", "-", "+", "AGGREGATION", "count", "10", "COUNT",
         "1");
    SEND(&s, "*2\r\n*2\r\n:17\r\n+4\r\n*2\r\n:51\r\n+3\r\n", "TS.RANGE", "g:t1", "-", "+", "FILTER_BY_TS", "17",
         "51", "51", "73", "FILTER_BY_VALUE", "3", "4");
    /* buckets start at `from` (5): [5, 55) holds 15, 17 and 51 */
    SEND(&s, "*1\r\n*2\r\n:5\r\n+2.6666666666666665\r\n", "TS.RANGE", "g:t1", "5", "60", "ALIGN", "start",
         "AGGREGATION", "avg", "50");
    /* buckets end at `to` (75): 73 in [65, 75), 75 in [75, 85) */
    SEND(&s, "*2\r\n*2\r\n:65\r\n+0\r\n*2\r\n:75\r\n+0\r\n", "TS.RANGE", "g:t1", "0", "75", "ALIGN", "end",
         "AGGREGATION", "range", "10", "FILTER_BY_TS", "73", "75");
    SEND(&s, "*2\r\n*2\r\n:50\r\n+0\r\n*2\r\n:70\r\n+2\r\n", "TS.RANGE", "g:t1", "0", "100", "AGGREGATION",
         "range", "10",
         "ALIGN", "0", "FILTER_BY_VALUE", "3", "5", "FILTER_BY_TS", "51", "73", "75");
    SEND(&s, "*0\r\n", "TS.RANGE", "g:t1", "200", "300");
    /* values as RedisTimeSeries prints them (dragonbox's shortest digits) */
    static const char *const vals[][2] = {
        { "0.5", "5E-1" },   { "0.1", "1E-1" },     { "100", "100" },          { "1e16", "1E16" },
        { "1.5", "1.5" },    { "-2.25", "-2.25" },  { "123.456", "123.456" },  { "1e15", "1000000000000000" },
        { "0", "0" },        { "1e-5", "1E-5" },    { "3.3333333333333335", "3.3333333333333335" },
        { "nan", "NaN" },    { "12345678901234567", "12345678901234568" },
    };
    char want[64];
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char ts[24];
        snprintf(ts, sizeof(ts), "%zu", i + 1);
        snprintf(want, sizeof(want), ":%zu\r\n", i + 1);
        SEND(&s, want, "TS.ADD", "g:v", ts, vals[i][0]);
        snprintf(want, sizeof(want), "*1\r\n*2\r\n:%zu\r\n+%s\r\n", i + 1, vals[i][1]);
        SEND(&s, want, "TS.RANGE", "g:v", ts, ts);
    }
    run(&s);

    s.proto = 3;
    SEND(&s, "*2\r\n*2\r\n:15\r\n,1\r\n*2\r\n:17\r\n,4\r\n", "TS.RANGE", "g:t1", "-", "+", "COUNT", "2");
    SEND(&s, "*1\r\n*2\r\n:1\r\n,0.5\r\n", "TS.RANGE", "g:v", "1", "1");
    run(&s);
}

/* The errors of the ranges' arguments (test_ts_range.py, test_negative.py). */
static void test_range_errors(void **state)
{
    (void)state;
    script_t s = { .proto = 2 };
    SEND(&s, ":1\r\n", "TS.ADD", "q:a", "1", "1");
    SEND(&s, "-ERR wrong number of arguments for 'TS.RANGE' command\r\n", "TS.RANGE", "q:a", "-");
    SEND(&s, ERR("wrong fromTimestamp"), "TS.RANGE", "q:a", "x", "+");
    SEND(&s, ERR("wrong toTimestamp"), "TS.RANGE", "q:a", "-", "x");
    SEND(&s, NOKEY, "TS.RANGE", "q:none", "x", "+");   /* the key is opened first */
    SEND(&s, ERR("COUNT argument is missing"), "TS.RANGE", "q:a", "-", "+", "COUNT");
    SEND(&s, ERR("Couldn't parse COUNT"), "TS.RANGE", "q:a", "-", "+", "COUNT", "x");
    SEND(&s, ERR("Invalid COUNT value"), "TS.RANGE", "q:a", "-", "+", "COUNT", "0");
    SEND(&s, ERR("Couldn't parse AGGREGATION"), "TS.RANGE", "q:a", "-", "+", "AGGREGATION", "avg");
    SEND(&s, ERR("Unknown aggregation type"), "TS.RANGE", "q:a", "-", "+", "AGGREGATION", "bad", "10");
    SEND(&s, ERR("bucketDuration must be greater than zero"), "TS.RANGE", "q:a", "-", "+", "AGGREGATION", "avg",
         "-1");
    SEND(&s, ERR("EMPTY flag should be the 3rd or 5th flag after AGGREGATION flag"), "TS.RANGE", "q:a", "-", "+",
         "EMPTY", "AGGREGATION", "avg", "10");
    SEND(&s, ERR("BUCKETTIMESTAMP flag should be the 3rd or 4th flag after AGGREGATION flag"), "TS.RANGE", "q:a",
         "-", "+", "BUCKETTIMESTAMP", "mid", "AGGREGATION", "avg", "10");
    SEND(&s, ERR("unknown BUCKETTIMESTAMP parameter"), "TS.RANGE", "q:a", "0", "10", "AGGREGATION", "avg", "5",
         "BUCKETTIMESTAMP", "high");
    SEND(&s, ERR("ALIGN parameter can only be used with AGGREGATION"), "TS.RANGE", "q:a", "-", "+", "ALIGN", "0");
    SEND(&s, ERR("unknown ALIGN parameter"), "TS.RANGE", "q:a", "-", "+", "ALIGN", "x");
    SEND(&s, ERR("start alignment can only be used with explicit start timestamp"), "TS.RANGE", "q:a", "-", "+",
         "ALIGN", "start", "AGGREGATION", "avg", "10");
    SEND(&s, ERR("end alignment can only be used with explicit end timestamp"), "TS.RANGE", "q:a", "-", "+",
         "ALIGN", "end", "AGGREGATION", "avg", "10");
    SEND(&s, ERR("FILTER_BY_VALUE one or more arguments are missing"), "TS.RANGE", "q:a", "-", "+",
         "FILTER_BY_VALUE", "1");
    SEND(&s, ERR("Couldn't parse MIN"), "TS.RANGE", "q:a", "-", "+", "FILTER_BY_VALUE", "x", "1");
    SEND(&s, ERR("Couldn't parse MAX"), "TS.RANGE", "q:a", "-", "+", "FILTER_BY_VALUE", "1", "x");
    SEND(&s, ERR("FILTER_BY_TS one or more arguments are missing"), "TS.RANGE", "q:a", "-", "+", "FILTER_BY_TS");
    SEND(&s, ERR("FILTER_BY_TS one or more arguments are missing"), "TS.RANGE", "q:a", "-", "+", "FILTER_BY_TS",
         "x");
    run(&s);
}

/* ------------------------------------------------------------------------ */
/* test_ts_range.py's cases, as last session's HTTP tests hold them         */
/* ------------------------------------------------------------------------ */

/* A query parameter of an upstream case's path ("" absent). */
static void param(const char *path, const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    size_t n = strlen(name);
    for (const char *p = strchr(path, '?'); p; p = strchr(p + 1, '&')) {
        if (strncmp(p + 1, name, n) == 0 && p[1 + n] == '=') {
            const char *v = p + 2 + n;
            size_t len = strcspn(v, "&");
            snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), v);
            return;
        }
    }
}

/* The key of a path /ts/{key}[/...] or /keys/{key}, %7B and %7D decoded. */
static void path_key(const char *path, char *out, size_t cap)
{
    const char *k = strchr(path + 1, '/') + 1;
    size_t n = 0;
    for (; *k && *k != '/' && *k != '?' && n + 1 < cap; k++) {
        if (strncmp(k, "%7B", 3) == 0 || strncmp(k, "%7D", 3) == 0) {
            out[n++] = k[2] == 'B' ? '{' : '}';
            k += 2;
        } else {
            out[n++] = *k;
        }
    }
    out[n] = '\0';
}

/* One reply of TS.RANGE ([[ts, "value"], ...]) as rows "ts,value;..."
 * into out; *p moves past it. */
static bool read_rows(const char **p, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    if (**p != '*')
        return false;
    long n = strtol(*p + 1, NULL, 10);
    *p = strstr(*p, "\r\n") + 2;
    for (long i = 0; i < n; i++) {
        long long t;
        char v[64];
        if (sscanf(*p, "*2\r\n:%lld\r\n+%63[^\r]\r\n", &t, v) != 2)
            return false;
        for (int k = 0; k < 3; k++)
            *p = strstr(*p, "\r\n") + 2;
        used += (size_t)snprintf(out + used, cap - used, "%s%lld,%s", i ? ";" : "", t, v);
        if (used >= cap)
            return false;
    }
    return true;
}

/* Whether the rows got (values as the module prints them) are want's
 * (it_ts_upstream_cases.h: "nan" NaN; a leading '^' the first row only). */
static bool same_rows(const char *got, const char *want)
{
    bool first_only = want[0] == '^';
    want += first_only;
    for (;;) {
        if (!*want)
            return first_only || !*got;
        long long tg, tw;
        char vg[64], vw[64];
        if (sscanf(got, "%lld,%63[^;]", &tg, vg) != 2 || sscanf(want, "%lld,%63[^;]", &tw, vw) != 2 || tg != tw)
            return false;
        double g = strcmp(vg, "NaN") == 0 ? NAN : strtod(vg, NULL), w = strcmp(vw, "nan") == 0 ? NAN : strtod(vw, NULL);
        if (isnan(g) != isnan(w) || (!isnan(w) && g != w))
            return false;
        const char *ng = strchr(got, ';'), *nw = strchr(want, ';');
        if (!nw)
            return first_only || !ng;
        if (!ng)
            return false;
        got = ng + 1;
        want = nw + 1;
    }
}

/* The cases of test_ts_range.py (test_agg_twa, test_empty,
 * test_empty_gap_fill_*...) that last session's tests send over HTTP
 * (it_ts_upstream_cases.h), sent as the module's commands: TS.CREATE,
 * TS.ADD, DEL, TS.RANGE / TS.REVRANGE key from to [ALIGN a] AGGREGATION
 * agg bucket [EMPTY], with the upstream answers.  What RedisTimeSeries
 * 1.10 lacks (countNaN, countAll, several aggregations at once) is left
 * out. */
static void test_upstream_range_cases(void **state)
{
    (void)state;
    size_t checked = 0;
    for (size_t i = 0; i < sizeof(upstream_range_cases) / sizeof(upstream_range_cases[0]); i++) {
        const upstream_case_t *uc = &upstream_range_cases[i];
        char key[128], from[32], to[32], agg[32], bucket[32], align[32], empty[8];
        path_key(uc->path, key, sizeof(key));
        buf_t b = { 0 };
        size_t replies = 1;
        if (strcmp(uc->method, "PUT") == 0) {
            mb(&b, "TS.CREATE", key, NULL);
        } else if (strcmp(uc->method, "DELETE") == 0) {
            mb(&b, "DEL", key, NULL);
        } else if (strcmp(uc->method, "POST") == 0) {
            replies = 0;
            for (const char *p = strstr(uc->body, "[["); p && (p = strchr(p + 1, '[')); replies++) {
                char t[32], v[32];
                if (sscanf(p, "[%31[0-9],%31[^]]]", t, v) != 2)
                    fail_msg("case %zu: %s", i, uc->body);
                char *val = v[0] == '"' ? v + 1 : v;
                val[strcspn(val, "\"")] = '\0';
                mb(&b, "TS.ADD", key, t, val, NULL);
            }
        } else {
            param(uc->path, "from", from, sizeof(from));
            param(uc->path, "to", to, sizeof(to));
            param(uc->path, "agg", agg, sizeof(agg));
            param(uc->path, "bucket_ms", bucket, sizeof(bucket));
            param(uc->path, "align", align, sizeof(align));
            param(uc->path, "empty", empty, sizeof(empty));
            if (strcmp(agg, "countNaN") == 0 || strcmp(agg, "countAll") == 0 || strchr(agg, ',') ||
                strstr(agg, "%2C"))
                continue;
            const char *w[16];
            size_t n = 0;
            w[n++] = strstr(uc->path, "/revrange") ? "TS.REVRANGE" : "TS.RANGE";
            w[n++] = key;
            w[n++] = from;
            w[n++] = to;
            if (align[0]) {
                w[n++] = "ALIGN";
                w[n++] = align;
            }
            w[n++] = "AGGREGATION";
            w[n++] = agg;
            w[n++] = bucket;
            if (strcmp(empty, "true") == 0)
                w[n++] = "EMPTY";
            while (n < 16)
                w[n++] = NULL;
            mb(&b, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], NULL);
        }
        buf_t got = exchange(T.resp_port, b.p, b.len);
        const char *p = got.p;
        if (uc->want) {
            char rows[4096];
            if (!read_rows(&p, rows, sizeof(rows)) || !same_rows(rows, uc->want))
                fail_msg("case %zu (%s): got %s, want %s", i, uc->path, got.p, uc->want);
            checked++;
        } else {
            for (size_t k = 0; k < replies; k++, p = strstr(p, "\r\n") + 2)
                if (*p == '-')
                    fail_msg("case %zu (%s %s): %s", i, uc->method, uc->path, p);
        }
        free(got.p);
        free(b.p);
    }
    assert_true(checked > 150);
}

/* ------------------------------------------------------------------------ */
/* Queries by labels                                                        */
/* ------------------------------------------------------------------------ */

/* TS.QUERYINDEX / TS.MGET / TS.MRANGE / TS.MREVRANGE with GROUPBY, RESP2
 * and RESP3 (test_ts_mget.py, test_ts_mrange.py, test_ts_mrange_groupby.py,
 * test_ts_queryindex.py, test_ts_resp3.py test_resp3_mrange). */
static void test_multi(void **state)
{
    (void)state;
    script_t s = { .proto = 2 };
    static const char *const series[][3] = { { "m:t3", "bush", "2" }, { "m:t4", "bush", "6" },
                                             { "m:t5", "rush", "2" }, { "m:t6", "rush", "6" } };
    for (size_t i = 0; i < 4; i++) {
        SEND(&s, OK, "TS.CREATE", series[i][0], "LABELS", "name", series[i][1], "kind", "m");
        SEND(&s, ":1\r\n", "TS.ADD", series[i][0], "1", series[i][2]);
        SEND(&s, ":2\r\n", "TS.ADD", series[i][0], "2", series[i][2]);
    }
    SEND(&s, "*2\r\n$4\r\nm:t3\r\n$4\r\nm:t4\r\n", "TS.QUERYINDEX", "name=bush");
    SEND(&s, "*4\r\n$4\r\nm:t3\r\n$4\r\nm:t4\r\n$4\r\nm:t5\r\n$4\r\nm:t6\r\n", "TS.QUERYINDEX", "kind=m",
         "name!=x");
    SEND(&s, "*0\r\n", "TS.QUERYINDEX", "name=nobody");
    SEND(&s, ERR("please provide at least one matcher"), "TS.QUERYINDEX", "name!=bush");
    SEND(&s, ERR("failed parsing labels"), "TS.QUERYINDEX", "name");
    SEND(&s, "-ERR wrong number of arguments for 'TS.QUERYINDEX' command\r\n", "TS.QUERYINDEX");
    SEND(&s,
         "*2\r\n*3\r\n$4\r\nm:t3\r\n*0\r\n*2\r\n:2\r\n+2\r\n*3\r\n$4\r\nm:t4\r\n*0\r\n*2\r\n:2\r\n+6\r\n",
         "TS.MGET", "FILTER", "name=bush");
    SEND(&s,
         "*2\r\n*3\r\n$4\r\nm:t5\r\n*2\r\n*2\r\n$4\r\nname\r\n$4\r\nrush\r\n*2\r\n$4\r\nkind\r\n$1\r\nm\r\n"
         "*2\r\n:2\r\n+2\r\n"
         "*3\r\n$4\r\nm:t6\r\n*2\r\n*2\r\n$4\r\nname\r\n$4\r\nrush\r\n*2\r\n$4\r\nkind\r\n$1\r\nm\r\n"
         "*2\r\n:2\r\n+6\r\n",
         "TS.MGET", "WITHLABELS", "FILTER", "name=rush", "name!=x", "name=(rush,x)", "kind=m", "name!=(a,b)",
         "name=(rush)", "kind!=", "x=", "name=rush");
    SEND(&s,
         "*2\r\n*3\r\n$4\r\nm:t5\r\n*2\r\n*2\r\n$4\r\nkind\r\n$1\r\nm\r\n*2\r\n$4\r\nfame\r\n$-1\r\n"
         "*2\r\n:2\r\n+2\r\n"
         "*3\r\n$4\r\nm:t6\r\n*2\r\n*2\r\n$4\r\nkind\r\n$1\r\nm\r\n*2\r\n$4\r\nfame\r\n$-1\r\n"
         "*2\r\n:2\r\n+6\r\n",
         "TS.MGET", "SELECTED_LABELS", "kind", "fame", "FILTER", "name=rush", "x=");
    /* names are selected in any case, shown as the series has them */
    SEND(&s,
         "*2\r\n*3\r\n$4\r\nm:t3\r\n*1\r\n*2\r\n$4\r\nname\r\n$4\r\nbush\r\n*2\r\n:2\r\n+2\r\n"
         "*3\r\n$4\r\nm:t4\r\n*1\r\n*2\r\n$4\r\nname\r\n$4\r\nbush\r\n*2\r\n:2\r\n+6\r\n",
         "TS.MGET", "SELECTED_LABELS", "NAME", "FILTER", "name=bush", "v=");
    SEND(&s, "*0\r\n", "TS.MGET", "FILTER", "name=nobody");
    SEND(&s, ERR("cannot accept WITHLABELS and SELECT_LABELS together"), "TS.MGET", "WITHLABELS",
         "SELECTED_LABELS", "a", "FILTER", "name=bush");
    SEND(&s, ERR("SELECT_LABELS should have at least 1 parameter"), "TS.MGET", "SELECTED_LABELS", "FILTER",
         "name=bush");
    SEND(&s, "-ERR wrong number of arguments for 'TS.MGET' command\r\n", "TS.MGET", "name=bush", "x");
    SEND(&s, ERR("please provide at least one matcher"), "TS.MGET", "FILTER", "name!=bush");
    SEND(&s,
         "*2\r\n*3\r\n$4\r\nm:t3\r\n*1\r\n*2\r\n$4\r\nname\r\n$4\r\nbush\r\n*1\r\n*2\r\n:0\r\n+2\r\n"
         "*3\r\n$4\r\nm:t4\r\n*1\r\n*2\r\n$4\r\nname\r\n$4\r\nbush\r\n*1\r\n*2\r\n:0\r\n+6\r\n",
         "TS.MRANGE", "-", "+", "SELECTED_LABELS", "name", "AGGREGATION", "max", "10", "FILTER", "name=bush");
    SEND(&s,
         "*2\r\n*3\r\n$4\r\nm:t5\r\n*0\r\n*2\r\n*2\r\n:2\r\n+2\r\n*2\r\n:1\r\n+2\r\n"
         "*3\r\n$4\r\nm:t6\r\n*0\r\n*2\r\n*2\r\n:2\r\n+6\r\n*2\r\n:1\r\n+6\r\n",
         "TS.MREVRANGE", "-", "+", "FILTER", "name=rush");
    /* GROUPBY: "label=value" series with __reducer__ and __source__ labels */
    SEND(&s,
         "*2\r\n*3\r\n$9\r\nname=bush\r\n*3\r\n*2\r\n$4\r\nname\r\n$4\r\nbush\r\n*2\r\n$11\r\n__reducer__\r\n"
         "$3\r\nmax\r\n*2\r\n$10\r\n__source__\r\n$9\r\nm:t3,m:t4\r\n*2\r\n*2\r\n:1\r\n+6\r\n*2\r\n:2\r\n+6\r\n"
         "*3\r\n$9\r\nname=rush\r\n*3\r\n*2\r\n$4\r\nname\r\n$4\r\nrush\r\n*2\r\n$11\r\n__reducer__\r\n"
         "$3\r\nmax\r\n*2\r\n$10\r\n__source__\r\n$9\r\nm:t5,m:t6\r\n*2\r\n*2\r\n:1\r\n+6\r\n*2\r\n:2\r\n+6\r\n",
         "TS.MRANGE", "-", "+", "WITHLABELS", "FILTER", "name=(rush,bush)", "GROUPBY", "name", "REDUCE", "max");
    SEND(&s,
         "*1\r\n*3\r\n$9\r\nname=bush\r\n*0\r\n*1\r\n*2\r\n:2\r\n+8\r\n",
         "TS.MREVRANGE", "-", "+", "COUNT", "1", "FILTER", "name=bush", "GROUPBY", "name", "REDUCE", "sum");
    SEND(&s,
         "*1\r\n*3\r\n$9\r\nname=bush\r\n*2\r\n*2\r\n$11\r\n__reducer__\r\n$3\r\nsum\r\n*2\r\n$4\r\nkind\r\n$-1\r\n"
         "*1\r\n*2\r\n:2\r\n+8\r\n",
         "TS.MREVRANGE", "-", "+", "COUNT", "1", "SELECTED_LABELS", "__REDUCER__", "kind", "FILTER", "name=bush",
         "GROUPBY", "name", "REDUCE", "sum");
    SEND(&s, ERR("missing FILTER argument"), "TS.MRANGE", "-", "+", "name=bush");
    SEND(&s, ERR("GROUPBY should always come after filter"), "TS.MRANGE", "-", "+", "GROUPBY", "name", "FILTER",
         "name=bush");
    SEND(&s, ERR("missing labels for filter argument"), "TS.MRANGE", "-", "+", "FILTER", "GROUPBY", "name",
         "REDUCE", "max");
    SEND(&s, ERR("Invalid reducer type"), "TS.MRANGE", "-", "+", "FILTER", "name=bush", "GROUPBY", "name",
         "REDUCE", "first");
    SEND(&s, "-ERR wrong number of arguments for 'TS.MRANGE' command\r\n", "TS.MRANGE", "-", "+", "FILTER",
         "name=bush", "GROUPBY", "name");
    SEND(&s, ERR("wrong fromTimestamp"), "TS.MRANGE", "x", "+", "FILTER", "name=bush");
    run(&s);

    s.proto = 3;
    SEND(&s, "~2\r\n$4\r\nm:t3\r\n$4\r\nm:t4\r\n", "TS.QUERYINDEX", "name=bush");
    SEND(&s,
         "%2\r\n$4\r\nm:t3\r\n*2\r\n%0\r\n*2\r\n:2\r\n,2\r\n$4\r\nm:t4\r\n*2\r\n%0\r\n*2\r\n:2\r\n,6\r\n",
         "TS.MGET", "FILTER", "name=bush");
    SEND(&s,
         "%2\r\n$4\r\nm:t5\r\n*2\r\n%2\r\n$4\r\nname\r\n$4\r\nrush\r\n$4\r\nkind\r\n$1\r\nm\r\n*2\r\n:2\r\n,2\r\n"
         "$4\r\nm:t6\r\n*2\r\n%2\r\n$4\r\nname\r\n$4\r\nrush\r\n$4\r\nkind\r\n$1\r\nm\r\n*2\r\n:2\r\n,6\r\n",
         "TS.MGET", "WITHLABELS", "FILTER", "name=rush", "x=");
    SEND(&s,
         "%2\r\n$4\r\nm:t3\r\n*3\r\n%1\r\n$4\r\nname\r\n$4\r\nbush\r\n%1\r\n$11\r\naggregators\r\n*0\r\n"
         "*2\r\n*2\r\n:1\r\n,2\r\n*2\r\n:2\r\n,2\r\n"
         "$4\r\nm:t4\r\n*3\r\n%1\r\n$4\r\nname\r\n$4\r\nbush\r\n%1\r\n$11\r\naggregators\r\n*0\r\n"
         "*2\r\n*2\r\n:1\r\n,6\r\n*2\r\n:2\r\n,6\r\n",
         "TS.MRANGE", "-", "+", "SELECTED_LABELS", "name", "FILTER", "name=bush");
    SEND(&s,
         "%2\r\n$4\r\nm:t5\r\n*3\r\n%1\r\n$4\r\nfame\r\n_\r\n%1\r\n$11\r\naggregators\r\n*1\r\n$3\r\nsum\r\n"
         "*1\r\n*2\r\n:0\r\n,4\r\n"
         "$4\r\nm:t6\r\n*3\r\n%1\r\n$4\r\nfame\r\n_\r\n%1\r\n$11\r\naggregators\r\n*1\r\n$3\r\nsum\r\n"
         "*1\r\n*2\r\n:0\r\n,12\r\n",
         "TS.MRANGE", "-", "+", "SELECTED_LABELS", "fame", "AGGREGATION", "sum", "10", "FILTER", "name=rush", "x=",
         "kind=m");
    SEND(&s,
         "%2\r\n$9\r\nname=bush\r\n*4\r\n%1\r\n$4\r\nname\r\n$4\r\nbush\r\n%1\r\n$8\r\nreducers\r\n*1\r\n"
         "$5\r\ncount\r\n%1\r\n$7\r\nsources\r\n*2\r\n$4\r\nm:t3\r\n$4\r\nm:t4\r\n"
         "*2\r\n*2\r\n:1\r\n,2\r\n*2\r\n:2\r\n,2\r\n"
         "$9\r\nname=rush\r\n*4\r\n%1\r\n$4\r\nname\r\n$4\r\nrush\r\n%1\r\n$8\r\nreducers\r\n*1\r\n"
         "$5\r\ncount\r\n%1\r\n$7\r\nsources\r\n*2\r\n$4\r\nm:t5\r\n$4\r\nm:t6\r\n"
         "*2\r\n*2\r\n:1\r\n,2\r\n*2\r\n:2\r\n,2\r\n",
         "TS.MRANGE", "-", "+", "WITHLABELS", "FILTER", "name=(rush,bush)", "GROUPBY", "name", "REDUCE", "COUNT");
    SEND(&s,
         "%1\r\n$9\r\nname=bush\r\n*4\r\n%1\r\n$4\r\nfame\r\n_\r\n%1\r\n$8\r\nreducers\r\n*1\r\n"
         "$3\r\nsum\r\n%1\r\n$7\r\nsources\r\n*2\r\n$4\r\nm:t3\r\n$4\r\nm:t4\r\n"
         "*2\r\n*2\r\n:1\r\n,8\r\n*2\r\n:2\r\n,8\r\n",
         "TS.MRANGE", "-", "+", "SELECTED_LABELS", "fame", "FILTER", "name=bush", "GROUPBY", "name", "REDUCE", "sum");
    SEND(&s,
         "%1\r\n$9\r\nname=bush\r\n*4\r\n%0\r\n%1\r\n$8\r\nreducers\r\n*1\r\n"
         "$3\r\nmin\r\n%1\r\n$7\r\nsources\r\n*2\r\n$4\r\nm:t3\r\n$4\r\nm:t4\r\n"
         "*2\r\n*2\r\n:1\r\n,2\r\n*2\r\n:2\r\n,2\r\n",
         "TS.MRANGE", "-", "+", "FILTER", "name=bush", "GROUPBY", "name", "REDUCE", "min");
    run(&s);
}

/* ------------------------------------------------------------------------ */
/* Python's redis package                                                   */
/* ------------------------------------------------------------------------ */

/* redis-py's r.ts() reads every reply (Debian's python3-redis 4.3.4). */
static void test_python_ts(void **state)
{
    (void)state;
    if (!have_python_redis())
        skip();   /* tools/deps.sh test installs python3-redis */
    char script[] =
        "import redis, sys\n"
        "r = redis.Redis(port=int(sys.argv[1]))\n"
        "ts = r.ts()\n"
        "assert ts.create('py:t1', labels={'room': 'kitchen', 'kind': 'temp'}) is True\n"
        "assert ts.create('py:t2', retention_msecs=0, labels={'room': 'hall', 'kind': 'temp'}) is True\n"
        "assert ts.add('py:t1', 1000, 21.5) == 1000\n"
        "assert ts.add('py:t1', 2000, 22) == 2000\n"
        "assert ts.add('py:t1', 2000, 30, duplicate_policy='max') == 2000\n"
        "assert ts.madd([('py:t1', 3000, 23.25), ('py:t2', 1000, 18), ('py:t2', 1500, 19)]) == [3000, 1000, 1500]\n"
        "assert ts.incrby('py:c', 5, timestamp=100) == 100\n"
        "assert ts.decrby('py:c', 2, timestamp=200) == 200\n"
        "assert ts.get('py:c') == (200, 3.0)\n"
        "assert ts.get('py:t1') == (3000, 23.25)\n"
        "assert ts.range('py:t1', '-', '+') == [(1000, 21.5), (2000, 30.0), (3000, 23.25)]\n"
        "a = ts.range('py:t1', 0, 10000, aggregation_type='avg', bucket_size_msec=2000)\n"
        "assert a == [(0, 21.5), (2000, 26.625)], a\n"
        "assert ts.revrange('py:t1', '-', '+', count=2) == [(3000, 23.25), (2000, 30.0)]\n"
        "m = ts.mrange('-', '+', filters=['kind=temp'], with_labels=True)\n"
        "assert m == [{'py:t1': [{'room': 'kitchen', 'kind': 'temp'}, [(1000, 21.5), (2000, 30.0), (3000, 23.25)]]},\n"
        "             {'py:t2': [{'room': 'hall', 'kind': 'temp'}, [(1000, 18.0), (1500, 19.0)]]}], m\n"
        "m = ts.mrange('-', '+', filters=['room=hall'], aggregation_type='max', bucket_size_msec=5000)\n"
        "assert m == [{'py:t2': [{}, [(0, 19.0)]]}], m\n"
        "g = ts.mget(['kind=temp'], with_labels=True)\n"
        "assert g == [{'py:t1': [{'room': 'kitchen', 'kind': 'temp'}, 3000, 23.25]},\n"
        "             {'py:t2': [{'room': 'hall', 'kind': 'temp'}, 1500, 19.0]}], g\n"
        "assert ts.mget(['room=hall']) == [{'py:t2': [{}, 1500, 19.0]}]\n"
        "assert ts.queryindex(['kind=temp']) == ['py:t1', 'py:t2']\n"
        "assert ts.create('py:agg') and ts.createrule('py:t1', 'py:agg', 'sum', 1000)\n"
        "ts.add('py:t1', 5000, 1)\n"
        "ts.add('py:t1', 6000, 2)\n"
        "assert ts.range('py:agg', '-', '+') == [(5000, 1.0)]\n"
        "i = ts.info('py:t1')\n"
        "assert i.total_samples == 5 and i.retention_msecs == 0 and i.first_time_stamp == 1000\n"
        "assert i.lastTimeStamp == 6000 and i.labels == {'room': 'kitchen', 'kind': 'temp'}\n"
        "assert i.rules == [[b'py:agg', 1000, b'SUM', 0]], i.rules\n"
        "assert ts.info('py:agg').source_key == b'py:t1'\n"
        "assert ts.deleterule('py:t1', 'py:agg') is True\n"
        "assert ts.delete('py:t1', 0, 1500) == 1\n"
        "assert ts.alter('py:t1', labels={'x': 'y'}) is True and ts.info('py:t1').labels == {'x': 'y'}\n"
        "try:\n"
        "    ts.add('py:t1', 5000, 9)\n"
        "    assert False\n"
        "except redis.ResponseError as e:\n"
        "    assert str(e).startswith('TSDB: Error at upsert'), str(e)\n"
        "import time\n"
        "before = int(time.time() * 1000)\n"
        "t = ts.add('py:now', '*', 1)\n"
        "assert ts.create('py:now2') is True\n"
        "m = ts.madd([('py:now2', '*', 2)])\n"
        "after = int(time.time() * 1000)\n"
        "assert before - 1000 <= t <= after + 1000 and t <= m[0] <= after + 1000, (before, t, m, after)\n"
        "print('ok')\n";
    python_expect_ok(script, T.resp_port);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes),       cmocka_unit_test(test_write_errors), cmocka_unit_test(test_rules_info),
        cmocka_unit_test(test_range),        cmocka_unit_test(test_range_errors),
        cmocka_unit_test(test_upstream_range_cases), cmocka_unit_test(test_multi),
        cmocka_unit_test(test_python_ts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
