/*
 * it_resp_keys.c - the Redis port's keyspace commands and transactions:
 * KEYS, SCAN, DBSIZE, RANDOMKEY, DUMP/RESTORE, EXPIRE's NX/XX/GT/LT,
 * EXPIRETIME, and MULTI/EXEC/DISCARD, compared byte for byte with
 * redis-server (RESP2 and RESP3); SCAN's guarantee while the tables grow
 * and shrink; EXEC's atomicity against concurrent clients (a reader's own
 * transaction never sees two keys one transaction changes together apart,
 * and opposite key orders never deadlock); python3-redis's
 * pipeline(transaction=True); what EXEC changed surviving a kill -9.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "redis_ref.h"
#include "resp_client.h"

RESP_SUITE_REF("--shards", "16", "--threads", "4", NULL)

/* A connection to tally that redis_ref's reader can use. */
static redis_ref_t tally_client(int port)
{
    redis_ref_t c;
    memset(&c, 0, sizeof(c));
    c.port = port;
    c.fd = connect_to(port);
    assert_true(c.fd >= 0);
    return c;
}

static void client_close(redis_ref_t *c)
{
    close(c->fd);
    free(c->rbuf);
}

/* The elements of an array reply, sorted, as one "a,b,c" string. */
static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *sorted_list(resp_t *v)
{
    assert_int_equal(v->kind, RESP_ARRAY);
    char **s = calloc(v->n + 1, sizeof(*s));
    size_t len = 1;
    for (size_t i = 0; i < v->n; i++) {
        s[i] = v->elems[i]->str;
        len += v->elems[i]->len + 1;
    }
    qsort(s, v->n, sizeof(*s), str_cmp);
    char *out = calloc(len, 1);
    for (size_t i = 0; i < v->n; i++) {
        strcat(out, s[i]);
        if (i + 1 < v->n)
            strcat(out, ",");
    }
    free(s);
    return out;
}

/* ------------------------------------------------------------------------ */
/* Keyspace commands                                                        */
/* ------------------------------------------------------------------------ */

/* EXPIRE's options, EXPIRETIME, DBSIZE, DUMP's nil, RESTORE's checks, KEYS
 * and SCAN where the answer's order is fixed: the same bytes as Redis. */
static void test_keys_differential(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    buf_t b = { 0 };
    mb(&b, "INCR", "x:n", NULL);
    mb(&b, "PFADD", "x:h", "a", NULL);
    /* NX XX GT LT, alone and together, on keys with and without an expiry */
    mb(&b, "EXPIRE", "x:n", "100", "NX", NULL);
    mb(&b, "EXPIRE", "x:n", "100", "NX", NULL);
    mb(&b, "TTL", "x:n", NULL);
    mb(&b, "EXPIRE", "x:n", "200", "xx", NULL);
    mb(&b, "TTL", "x:n", NULL);
    mb(&b, "EXPIRE", "x:h", "200", "XX", NULL);
    mb(&b, "EXPIRE", "x:h", "200", "GT", NULL);   /* no expiry counts as infinite */
    mb(&b, "TTL", "x:h", NULL);
    mb(&b, "EXPIRE", "x:h", "300", "LT", NULL);
    mb(&b, "TTL", "x:h", NULL);
    mb(&b, "EXPIRE", "x:h", "400", "LT", NULL);
    mb(&b, "EXPIRE", "x:h", "400", "GT", NULL);
    mb(&b, "TTL", "x:h", NULL);
    mb(&b, "EXPIRE", "x:h", "100", "GT", NULL);
    mb(&b, "PEXPIRE", "x:h", "100000", "XX", "LT", NULL);
    mb(&b, "TTL", "x:h", NULL);
    mb(&b, "EXPIRE", "x:h", "500", "XX", "GT", NULL);
    mb(&b, "TTL", "x:h", NULL);
    mb(&b, "EXPIREAT", "x:n", "4102444800", "GT", NULL);
    mb(&b, "EXPIRETIME", "x:n", NULL);
    mb(&b, "PEXPIRETIME", "x:n", NULL);
    mb(&b, "PEXPIREAT", "x:n", "4102444800123", "LT", NULL);
    mb(&b, "PEXPIREAT", "x:n", "4102444800001", "GT", NULL);
    mb(&b, "PEXPIRETIME", "x:n", NULL);
    mb(&b, "EXPIRETIME", "x:n", NULL);
    mb(&b, "EXPIRETIME", "x:none", NULL);
    mb(&b, "PEXPIRETIME", "x:none", NULL);
    mb(&b, "EXPIRE", "x:none", "10", "NX", NULL);
    mb(&b, "EXPIRE", "x:n", "10", "NX", "XX", NULL);
    mb(&b, "EXPIRE", "x:n", "10", "NX", "GT", NULL);
    mb(&b, "EXPIRE", "x:n", "10", "LT", "NX", NULL);
    mb(&b, "EXPIRE", "x:n", "10", "GT", "LT", NULL);
    mb(&b, "EXPIRE", "x:n", "10", "XX", "XX", NULL);
    mb(&b, "EXPIRE", "x:n", "10", "FOO", NULL);
    mb(&b, "EXPIRE", "x:n", "x", "FOO", NULL);
    mb(&b, "EXPIRE", "x:n", "x", "NX", NULL);
    mb(&b, "EXPIRE", "x:n", "9223372036854775807", "NX", NULL);
    mb(&b, "EXPIRE", "x:n", "-1", "NX", NULL);   /* has an expiry: NX fails, nothing deleted */
    mb(&b, "EXISTS", "x:n", NULL);
    mb(&b, "EXPIRE", "x:n", "-1", "GT", NULL);   /* in the past: not later */
    mb(&b, "EXISTS", "x:n", NULL);
    mb(&b, "EXPIRE", "x:n", "-1", "LT", NULL);   /* earlier: deleted */
    mb(&b, "EXISTS", "x:n", NULL);
    mb(&b, "INCR", "x:p", NULL);
    mb(&b, "PEXPIREAT", "x:p", "1", "NX", NULL);   /* no expiry yet: deleted */
    mb(&b, "EXISTS", "x:p", NULL);
    mb(&b, "INCR", "x:p", NULL);
    mb(&b, "EXPIRE", "x:p", "0", "LT", NULL);   /* no expiry is infinite: 0 is earlier */
    mb(&b, "EXISTS", "x:p", NULL);
    /* DBSIZE, KEYS and SCAN with one match */
    mb(&b, "DBSIZE", NULL);
    mb(&b, "DBSIZE", "x", NULL);
    mb(&b, "KEYS", "x:h", NULL);
    mb(&b, "KEYS", "x:?", NULL);
    mb(&b, "KEYS", "x:[a-h]", NULL);
    mb(&b, "KEYS", "x:[^h]", NULL);
    mb(&b, "KEYS", "nomatch*", NULL);
    mb(&b, "KEYS", NULL);
    mb(&b, "SCAN", "0", "MATCH", "x:*", "COUNT", "1000", NULL);
    mb(&b, "SCAN", "0", "MATCH", "x:h", "TYPE", "string", "COUNT", "1000", NULL);
    mb(&b, "SCAN", "0", "MATCH", "x:h", "TYPE", "STRING", "COUNT", "1000", NULL);
    mb(&b, "SCAN", "0", "MATCH", "x:h", "TYPE", "zset", "COUNT", "1000", NULL);
    mb(&b, "SCAN", "0", "MATCH", "x:h", "TYPE", "nosuchtype", "COUNT", "1000", NULL);
    mb(&b, "SCAN", "x", NULL);
    mb(&b, "SCAN", " 0", NULL);
    mb(&b, "SCAN", "99999999999999999999999", NULL);
    mb(&b, "SCAN", "0", "COUNT", "0", NULL);
    mb(&b, "SCAN", "0", "COUNT", "x", NULL);
    mb(&b, "SCAN", "0", "COUNT", NULL);
    mb(&b, "SCAN", "0", "NOSUCH", "1", NULL);
    mb(&b, "SCAN", "0", "MATCH", "x:h", "MATCH", NULL);
    mb(&b, "SCAN", NULL);
    /* DUMP, RESTORE's checks in Redis's order (a payload neither takes) */
    mb(&b, "DUMP", "x:none", NULL);
    mb(&b, "DUMP", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", NULL);
    mb(&b, "RESTORE", "x:h", "x", "garbage", NULL);
    mb(&b, "RESTORE", "x:new", "x", "garbage", NULL);
    mb(&b, "RESTORE", "x:new", "-1", "garbage", NULL);
    mb(&b, "RESTORE", "x:new", "0", "garbage", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "REPLACE", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "ABSTTL", "REPLACE", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "NOSUCH", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "IDLETIME", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "IDLETIME", "-1", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "IDLETIME", "x", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "FREQ", "256", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "FREQ", "1", "IDLETIME", "1", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "IDLETIME", "1", "FREQ", "1", NULL);
    mb(&b, "RESTORE", "x:h", "0", "garbage", "IDLETIME", "5", NULL);
    mb(&b, "RESTORE", "x:h", "0", NULL);
    mb(&b, "DEL", "x:h", NULL);
    mb(&b, "WATCH", NULL);
    resp_diff(R.port, T.resp_port, &b);
    free(b.p);
}

/* Redis's glob rules: every pattern finds the same keys in both. */
static void test_keys_patterns(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    static const char *const keys[] = { "g:hello", "g:hallo", "g:hxllo", "g:hllo", "g:heeeello", "g:h*llo",
                                        "g:h?llo", "g:h[a]llo", "g:h\\llo", "g:a-b", "g:]", "g:^x", "g:",
                                        "g:abc", "g:ABC", "g:\xc3\xa9t\xc3\xa9" };
    static const char *const pats[] = {
        "g:*", "g:h?llo", "g:h*llo", "g:h[ae]llo", "g:h[^e]llo", "g:h[a-b]llo", "g:h[b-a]llo", "g:h\\*llo",
        "g:h\\?llo", "g:h[\\a]llo", "g:[", "g:[]", "g:[]]", "g:]", "g:[a-", "g:[a-]", "g:a[-]b", "g:a-b",
        "g:\\", "g:*\\", "g:h[", "g:h[a", "g:**llo", "g:*l*l*o", "g:*x*", "g:", "g:?", "g:[^a-z]*", "g:*[A-Z]",
        "g:^*", "*", "?", "g:h\\[a]llo", "g:[\xc3]*", "g:[a-\xff]*", "*o", "g:h?*", "g:??????????", "g:*é",
    };
    redis_ref_t t = tally_client(T.resp_port);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        resp_free(redis_cmd(&R, "INCR", keys[i], NULL));
        resp_free(redis_cmd(&t, "INCR", keys[i], NULL));
    }
    for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
        resp_t *a = redis_cmd(&R, "KEYS", pats[i], NULL), *b = redis_cmd(&t, "KEYS", pats[i], NULL);
        char *sa = sorted_list(a), *sb = sorted_list(b);
        if (strcmp(sa, sb) != 0)
            fail_msg("KEYS %s: redis [%s], tally [%s]", pats[i], sa, sb);
        free(sa);
        free(sb);
        resp_free(a);
        resp_free(b);
        /* SCAN MATCH walks to the same set */
        char cursor[32] = "0";
        size_t found = 0;
        resp_t *k = redis_cmd(&t, "KEYS", pats[i], NULL);
        do {
            resp_t *s = redis_cmd(&t, "SCAN", cursor, "MATCH", pats[i], "COUNT", "3", NULL);
            assert_int_equal(s->kind, RESP_ARRAY);
            snprintf(cursor, sizeof(cursor), "%s", s->elems[0]->str);
            found += s->elems[1]->n;
            resp_free(s);
        } while (strcmp(cursor, "0") != 0);
        assert_int_equal(found, k->n);
        resp_free(k);
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        resp_free(redis_cmd(&R, "DEL", keys[i], NULL));
        resp_free(redis_cmd(&t, "DEL", keys[i], NULL));
    }
    client_close(&t);
}

/* SCAN's cursor: every key present for the whole walk is returned at least
 * once while others are added and deleted (the tables grow and shrink). */
static void test_scan_guarantee(void **state)
{
    (void)state;
    redis_ref_t t = tally_client(T.resp_port);
    enum { STAY = 3000, CHURN = 6000 };
    char key[32];
    for (int i = 0; i < STAY; i++) {
        snprintf(key, sizeof(key), "s:stay:%d", i);
        redis_send(&t, 2, (const char *const[]){ "INCR", key }, NULL);
    }
    for (int i = 0; i < STAY; i++)
        resp_free(redis_read(&t));
    unsigned char *seen = calloc(STAY, 1);
    char cursor[32] = "0";
    int churn = 0, pages = 0;
    do {
        resp_t *s = redis_cmd(&t, "SCAN", cursor, "COUNT", "50", NULL);
        assert_int_equal(s->kind, RESP_ARRAY);
        snprintf(cursor, sizeof(cursor), "%s", s->elems[0]->str);
        for (size_t i = 0; i < s->elems[1]->n; i++) {
            int id;
            if (sscanf(s->elems[1]->elems[i]->str, "s:stay:%d", &id) == 1)
                seen[id] = 1;
        }
        resp_free(s);
        /* between pages: grow by 200 keys, or delete them again */
        for (int j = 0; j < 200; j++, churn++) {
            int id = churn % CHURN;
            snprintf(key, sizeof(key), "s:churn:%d", id);
            bool add = (churn / CHURN) % 2 == 0;
            redis_send(&t, 2, (const char *const[]){ add ? "INCR" : "DEL", key }, NULL);
        }
        for (int j = 0; j < 200; j++)
            resp_free(redis_read(&t));
        pages++;
    } while (strcmp(cursor, "0") != 0);
    assert_true(pages > 10);
    for (int i = 0; i < STAY; i++)
        if (!seen[i])
            fail_msg("SCAN missed s:stay:%d", i);
    free(seen);
    /* KEYS: each once; DBSIZE counts them */
    resp_t *k = redis_cmd(&t, "KEYS", "s:stay:*", NULL);
    assert_int_equal(k->n, STAY);
    resp_free(k);
    resp_t *d = redis_cmd(&t, "DBSIZE", NULL);
    assert_true(d->integer >= STAY);
    resp_free(d);
    /* RANDOMKEY: a key that exists */
    for (int i = 0; i < 20; i++) {
        resp_t *r = redis_cmd(&t, "RANDOMKEY", NULL);
        assert_int_equal(r->kind, RESP_BULK);
        resp_t *e = redis_cmd(&t, "EXISTS", r->str, NULL);
        assert_int_equal(e->integer, 1);
        resp_free(e);
        resp_free(r);
    }
    /* SCAN TYPE: the counters are strings, a HyperLogLog too, none is a zset */
    resp_free(redis_cmd(&t, "PFADD", "s:stay:hll", "a", NULL));
    resp_t *z = redis_cmd(&t, "SCAN", "0", "TYPE", "zset", "COUNT", "10000", NULL);
    assert_int_equal(z->elems[1]->n, 0);
    resp_free(z);
    for (int i = 0; i < STAY; i++) {
        snprintf(key, sizeof(key), "s:stay:%d", i);
        redis_send(&t, 2, (const char *const[]){ "DEL", key }, NULL);
    }
    for (int i = 0; i < STAY; i++)
        resp_free(redis_read(&t));
    for (int i = 0; i < CHURN; i++) {
        snprintf(key, sizeof(key), "s:churn:%d", i);
        redis_send(&t, 2, (const char *const[]){ "DEL", key }, NULL);
    }
    for (int i = 0; i < CHURN; i++)
        resp_free(redis_read(&t));
    resp_free(redis_cmd(&t, "DEL", "s:stay:hll", NULL));
    client_close(&t);
}

/* DUMP and RESTORE with tally's payloads: the value, its expiry, REPLACE,
 * ABSTTL; Redis's payload refused with Redis's words. */
static void test_dump_restore(void **state)
{
    (void)state;
    redis_ref_t t = tally_client(T.resp_port);
    resp_free(redis_cmd(&t, "PFADD", "d:h", "a", "b", "c", NULL));
    resp_free(redis_cmd(&t, "INCRBY", "d:n", "42", NULL));
    resp_free(redis_cmd(&t, "EXPIRE", "d:n", "1000", NULL));
    resp_t *dh = redis_cmd(&t, "DUMP", "d:h", NULL), *dn = redis_cmd(&t, "DUMP", "d:n", NULL);
    assert_int_equal(dh->kind, RESP_BULK);
    assert_int_equal(memcmp(dh->str, "TALLYDMP", 8), 0);
    const char *argv[8];
    size_t lens[8];
#define RESTORE(...)                                                                   \
    do {                                                                               \
        const char *w[] = { __VA_ARGS__ };                                             \
        int n = (int)(sizeof(w) / sizeof(w[0]));                                       \
        for (int i = 0; i < n; i++) {                                                  \
            argv[i] = w[i];                                                            \
            lens[i] = strlen(w[i]);                                                    \
        }                                                                              \
        argv[3] = pay->str;                                                            \
        lens[3] = pay->len;                                                            \
        r = redis_cmdv(&t, n, argv, lens);                                             \
    } while (0)
    resp_t *r, *pay = dh;
    RESTORE("RESTORE", "d:h2", "0", "");
    assert_string_equal(r->str, "OK");
    resp_free(r);
    RESTORE("RESTORE", "d:h2", "0", "");
    assert_string_equal(r->str, "BUSYKEY Target key name already exists.");
    resp_free(r);
    RESTORE("RESTORE", "d:h2", "5000", "", "REPLACE");
    assert_string_equal(r->str, "OK");
    resp_free(r);
    resp_t *c = redis_cmd(&t, "PFCOUNT", "d:h2", NULL);
    assert_int_equal(c->integer, 3);
    resp_free(c);
    c = redis_cmd(&t, "PTTL", "d:h2", NULL);
    assert_true(c->integer > 4000 && c->integer <= 5000);
    resp_free(c);
    pay = dn;   /* no TTL given: none (as Redis's RESTORE 0) */
    RESTORE("RESTORE", "d:n2", "0", "");
    resp_free(r);
    c = redis_cmd(&t, "GET", "d:n2", NULL);
    assert_string_equal(c->str, "42");
    resp_free(c);
    c = redis_cmd(&t, "TTL", "d:n2", NULL);
    assert_int_equal(c->integer, -1);
    resp_free(c);
    RESTORE("RESTORE", "d:n3", "4102444800000", "", "ABSTTL");
    resp_free(r);
    c = redis_cmd(&t, "EXPIRETIME", "d:n3", NULL);
    assert_int_equal(c->integer, 4102444800);
    resp_free(c);
    RESTORE("RESTORE", "d:n3", "1", "", "ABSTTL", "REPLACE");   /* expired already: deleted */
    assert_string_equal(r->str, "OK");
    resp_free(r);
    c = redis_cmd(&t, "EXISTS", "d:n3", NULL);
    assert_int_equal(c->integer, 0);
    resp_free(c);
    RESTORE("RESTORE", "d:n3", "1", "", "ABSTTL");
    assert_string_equal(r->str, "OK");
    resp_free(r);
    c = redis_cmd(&t, "EXISTS", "d:n3", NULL);
    assert_int_equal(c->integer, 0);
    resp_free(c);
    /* a byte changed: the checksum refuses it */
    char *bad = malloc(dh->len);
    memcpy(bad, dh->str, dh->len);
    bad[dh->len / 2] ^= 1;
    resp_t fake = { .kind = RESP_BULK, .str = bad, .len = dh->len };
    pay = &fake;
    RESTORE("RESTORE", "d:bad", "0", "");
    assert_string_equal(r->str, "ERR DUMP payload version or checksum are wrong");
    resp_free(r);
    free(bad);
    /* Redis's own payload: refused the same way */
    if (have_redis) {
        resp_free(redis_cmd(&R, "SET", "d:redis", "v", NULL));
        resp_t *rd = redis_cmd(&R, "DUMP", "d:redis", NULL);
        pay = rd;
        RESTORE("RESTORE", "d:redis", "0", "");
        assert_string_equal(r->str, "ERR DUMP payload version or checksum are wrong");
        resp_free(r);
        /* and Redis refuses tally's */
        argv[0] = "RESTORE";
        argv[1] = "d:tally";
        argv[2] = "0";
        argv[3] = dh->str;
        lens[0] = 7, lens[1] = 7, lens[2] = 1, lens[3] = dh->len;
        r = redis_cmdv(&R, 4, argv, lens);
        assert_string_equal(r->str, "ERR DUMP payload version or checksum are wrong");
        resp_free(r);
        resp_free(rd);
        resp_free(redis_cmd(&R, "DEL", "d:redis", NULL));
    }
#undef RESTORE
    resp_free(dh);
    resp_free(dn);
    resp_free(redis_cmd(&t, "DEL", "d:h", "d:h2", "d:n", "d:n2", NULL));
    client_close(&t);
}

/* ------------------------------------------------------------------------ */
/* MULTI / EXEC / DISCARD                                                   */
/* ------------------------------------------------------------------------ */

static void multi_cases(buf_t *b)
{
    mb(b, "EXEC", NULL);
    mb(b, "DISCARD", NULL);
    mb(b, "MULTI", NULL);
    mb(b, "INCR", "m:a", NULL);
    mb(b, "INCRBY", "m:b", "5", NULL);
    mb(b, "GET", "m:a", NULL);
    mb(b, "GET", "m:none", NULL);
    mb(b, "PFADD", "m:h", "x", NULL);
    mb(b, "INCR", "m:h", NULL);   /* an error at run time: its element, the rest run */
    mb(b, "EXPIRE", "m:a", "100", "NX", NULL);
    mb(b, "TTL", "m:a", NULL);
    mb(b, "EXISTS", "m:a", "m:b", "m:none", NULL);
    mb(b, "PING", NULL);
    mb(b, "ECHO", "hi", NULL);
    mb(b, "KEYS", "m:a", NULL);   /* keys by a pattern: EXEC holds every shard */
    mb(b, "SCAN", "0", "MATCH", "m:[ac]", "TYPE", "string", "COUNT", "1000", NULL);
    mb(b, "DUMP", "m:none", NULL);
    mb(b, "EXEC", NULL);
    mb(b, "MULTI", NULL);
    mb(b, "EXEC", NULL);   /* empty */
    mb(b, "MULTI", NULL);
    mb(b, "MULTI", NULL);   /* nested: an error, the transaction goes on */
    mb(b, "INCR", "m:a", NULL);
    mb(b, "EXEC", NULL);
    mb(b, "MULTI", NULL);
    mb(b, "INCR", "m:a", NULL);
    mb(b, "NOSUCH", "x", NULL);   /* refused while queued: EXEC aborts */
    mb(b, "INCR", "m:a", NULL);
    mb(b, "EXEC", NULL);
    mb(b, "GET", "m:a", NULL);
    mb(b, "MULTI", NULL);
    mb(b, "INCR", NULL);   /* arity */
    mb(b, "EXEC", NULL);
    mb(b, "EXEC", NULL);
    mb(b, "MULTI", NULL);
    mb(b, "INCR", "m:a", NULL);
    mb(b, "DISCARD", NULL);
    mb(b, "DISCARD", NULL);
    mb(b, "GET", "m:a", NULL);
    mb(b, "MULTI", NULL);
    mb(b, "WATCH", "m:a", NULL);   /* inside MULTI: Redis's error, not queued */
    mb(b, "INCR", "m:a", NULL);
    mb(b, "EXEC", NULL);
    mb(b, "MULTI", NULL);
    mb(b, "multi", "x", NULL);   /* MULTI's own arity error while queuing */
    mb(b, "EXEC", NULL);
    mb(b, "MULTI", NULL);
    mb(b, "AUTH", "secret", NULL);   /* connection commands queue and run in EXEC */
    mb(b, "AUTH", "default", "x", NULL);
    mb(b, "SELECT", "0", NULL);
    mb(b, "CLIENT", "SETNAME", "tx", NULL);
    mb(b, "CLIENT", "GETNAME", NULL);
    mb(b, "DEL", "m:a", "m:b", "m:h", NULL);
    mb(b, "EXEC", NULL);
    mb(b, "MULTI", NULL);
    mb(b, "INCR", "m:q", NULL);
    mb(b, "RESET", NULL);   /* discards */
    mb(b, "EXEC", NULL);
    mb(b, "EXISTS", "m:q", NULL);
}

static void test_multi_differential(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    buf_t b = { 0 };
    multi_cases(&b);
    mb(&b, "MULTI", NULL);
    mb(&b, "INCR", "m:z", NULL);
    mb(&b, "QUIT", NULL);   /* runs at once; the transaction goes with the connection */
    resp_diff(R.port, T.resp_port, &b);
    free(b.p);
}

/* Skips one RESP3 reply at p: its end. */
static const char *skip_reply(const char *p)
{
    char t = *p;
    const char *nl = strstr(p, "\r\n");
    assert_non_null(nl);
    long n = strtol(p + 1, NULL, 10);
    p = nl + 2;
    switch (t) {
    case '$':
    case '=':
    case '!':
        return n < 0 ? p : p + n + 2;
    case '*':
    case '~':
    case '>':
        for (long i = 0; i < n; i++)
            p = skip_reply(p);
        return p;
    case '%':
    case '|':
        for (long i = 0; i < 2 * n; i++)
            p = skip_reply(p);
        return p;
    default:
        return p;
    }
}

/* After HELLO 3: EXEC's array and what it holds in RESP3's forms (HELLO's
 * own map names the server: skipped on both sides). */
static void test_multi_resp3(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    buf_t b = { 0 };
    mb(&b, "HELLO", "3", NULL);
    multi_cases(&b);
    buf_t want = exchange(R.port, b.p, b.len), got = exchange(T.resp_port, b.p, b.len);
    const char *w = skip_reply(want.p), *g = skip_reply(got.p);
    if (strcmp(w, g) != 0)
        fail_msg("RESP3 replies differ:\nredis:\n%s\ntally:\n%s", w, g);
    free(want.p);
    free(got.p);
    free(b.p);
}

/* A line-at-a-time reader for the threads (no cmocka asserts off the main
 * thread): the next reply line, without its CRLF. */
typedef struct lines {
    int fd;
    char buf[4096];
    size_t len, off;
} lines_t;

static bool line_next(lines_t *l, char *out, size_t cap)
{
    for (;;) {
        char *nl = memchr(l->buf + l->off, '\n', l->len - l->off);
        if (nl) {
            size_t n = (size_t)(nl - (l->buf + l->off));
            size_t c = n > 0 && l->buf[l->off + n - 1] == '\r' ? n - 1 : n;
            if (c >= cap)
                c = cap - 1;
            memcpy(out, l->buf + l->off, c);
            out[c] = '\0';
            l->off += n + 1;
            return true;
        }
        if (l->off) {
            memmove(l->buf, l->buf + l->off, l->len - l->off);
            l->len -= l->off;
            l->off = 0;
        }
        if (l->len == sizeof(l->buf))
            return false;
        ssize_t r = recv(l->fd, l->buf + l->len, sizeof(l->buf) - l->len, 0);
        if (r <= 0)
            return false;
        l->len += (size_t)r;
    }
}

enum { WRITERS = 4, READERS = 3, ROUNDS = 400 };

typedef struct worker {
    int port;
    int id;
    atomic_bool *stop;
    atomic_int *bad;             /* an unexpected reply, or a != b */
    atomic_long *checks;
    char why[512];
} worker_t;

/* A writer: MULTI INCR a INCR b EXEC (half of them in the other key order,
 * and half with a multi-key PFMERGE of both's neighbours, so that opposite
 * orders meet). */
static void *writer(void *ud)
{
    worker_t *w = ud;
    lines_t l = { .fd = connect_to(w->port) };
    char line[256];
    for (int i = 0; i < ROUNDS && !atomic_load(w->bad); i++) {
        /* a wide window between the two INCRs: a reader would fall in it
         * if EXEC did not hold the keys */
        static const char mid[] = "PFMERGE at:h1 at:h2\r\nPFADD at:h1 a b c d e f g h\r\nPFCOUNT at:h1 at:h2\r\n"
                                  "PFMERGE at:h2 at:h1\r\nPFADD at:h2 a b c d e f g h\r\nPFCOUNT at:h2 at:h1\r\n";
        char tx[1024];
        snprintf(tx, sizeof(tx), "MULTI\r\nINCR %s\r\n%s%s%sINCR %s\r\nEXEC\r\n", (i + w->id) % 2 ? "at:a" : "at:b",
                 mid, mid, mid, (i + w->id) % 2 ? "at:b" : "at:a");
        send_all(l.fd, tx, strlen(tx));
        /* +OK, +QUEUED x20, *20, :n, (+OK :0 :n) x6, :n */
        const char *want[64];
        size_t nw = 0;
        want[nw++] = "+OK";
        for (int k = 0; k < 20; k++)
            want[nw++] = "+QUEUED";
        want[nw++] = "*20";
        want[nw++] = ":";
        for (int k = 0; k < 6; k++) {
            want[nw++] = "+OK";
            want[nw++] = ":";
            want[nw++] = ":";
        }
        want[nw++] = ":";
        for (size_t k = 0; k < nw; k++)
            if (!line_next(&l, line, sizeof(line)) || strncmp(line, want[k], strlen(want[k])) != 0) {
                snprintf(w->why, sizeof(w->why), "writer %d: got \"%s\", want \"%s\"", w->id, line, want[k]);
                atomic_store(w->bad, 1);
                break;
            }
    }
    close(l.fd);
    return NULL;
}

/* A reader: its own MULTI GET a GET b EXEC never sees them differ. */
static void *reader(void *ud)
{
    worker_t *w = ud;
    lines_t l = { .fd = connect_to(w->port) };
    char line[256], a[64], b[64];
    static const char tx[] = "MULTI\r\nGET at:a\r\nGET at:b\r\nEXEC\r\n";
    while (!atomic_load(w->stop) && !atomic_load(w->bad)) {
        send_all(l.fd, tx, sizeof(tx) - 1);
        bool ok = line_next(&l, line, sizeof(line)) && !strcmp(line, "+OK") &&
                  line_next(&l, line, sizeof(line)) && !strcmp(line, "+QUEUED") &&
                  line_next(&l, line, sizeof(line)) && !strcmp(line, "+QUEUED") &&
                  line_next(&l, line, sizeof(line)) && !strcmp(line, "*2") && line_next(&l, line, sizeof(line)) &&
                  line[0] == '$' && line_next(&l, a, sizeof(a)) && line_next(&l, line, sizeof(line)) &&
                  line[0] == '$' && line_next(&l, b, sizeof(b));
        if (!ok || strcmp(a, b) != 0) {
            snprintf(w->why, sizeof(w->why), "reader: %s (a %s, b %s)", ok ? "a != b" : "bad reply", a, b);
            atomic_store(w->bad, 1);
            break;
        }
        atomic_fetch_add(w->checks, 1);
    }
    close(l.fd);
    return NULL;
}

/* EXEC holds its keys' locks for the whole queue: many clients change two
 * keys together (in both orders, with a multi-key operation between, which
 * must not deadlock) while readers' own transactions check they are never
 * apart; then a and b are exactly what every transaction added. */
static void test_multi_atomic(void **state)
{
    (void)state;
    redis_ref_t t = tally_client(T.resp_port);
    resp_free(redis_cmd(&t, "INCR", "at:a", NULL));
    resp_free(redis_cmd(&t, "INCR", "at:b", NULL));
    resp_free(redis_cmd(&t, "PFADD", "at:h1", "x", NULL));
    resp_free(redis_cmd(&t, "PFADD", "at:h2", "y", NULL));
    atomic_bool stop = false;
    atomic_int bad = 0;
    atomic_long checks = 0;
    pthread_t th[WRITERS + READERS];
    worker_t w[WRITERS + READERS];
    for (int i = 0; i < WRITERS + READERS; i++) {
        w[i] = (worker_t){ .port = T.resp_port, .id = i, .stop = &stop, .bad = &bad, .checks = &checks };
        assert_int_equal(pthread_create(&th[i], NULL, i < WRITERS ? writer : reader, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop, true);
    for (int i = WRITERS; i < WRITERS + READERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < WRITERS + READERS; i++)
        if (w[i].why[0])
            fail_msg("%s", w[i].why);
    assert_int_equal(atomic_load(&bad), 0);
    assert_true(atomic_load(&checks) > 0);
    resp_t *a = redis_cmd(&t, "GET", "at:a", NULL), *b = redis_cmd(&t, "GET", "at:b", NULL);
    char want[32];
    snprintf(want, sizeof(want), "%d", 1 + WRITERS * ROUNDS);
    assert_string_equal(a->str, want);
    assert_string_equal(b->str, want);
    resp_free(a);
    resp_free(b);
    resp_free(redis_cmd(&t, "DEL", "at:a", "at:b", "at:h1", "at:h2", NULL));
    client_close(&t);
}

/* python3-redis: r.pipeline(transaction=True) sends MULTI ... EXEC and
 * reads EXEC's array as the commands' results. */
static void test_python_transaction(void **state)
{
    (void)state;
    if (!have_python_redis())
        skip();
    static const char script[] =
        "import sys, redis\n"
        "r = redis.Redis(port=int(sys.argv[1]))\n"
        "p = r.pipeline(transaction=True)\n"
        "p.incr('py:a')\n"
        "p.incrby('py:b', 5)\n"
        "p.pfadd('py:h', 'x', 'y')\n"
        "p.expire('py:a', 100, nx=True)\n"
        "p.expire('py:a', 100, nx=True)\n"
        "p.get('py:a')\n"
        "res = p.execute()\n"
        "assert res == [1, 5, 1, True, False, b'1'], res\n"
        "p = r.pipeline(transaction=True)\n"
        "p.incr('py:a')\n"
        "p.execute_command('NOSUCH')\n"
        "try:\n"
        "    p.execute()\n"
        "    raise SystemExit('no error')\n"
        "except redis.exceptions.ResponseError as e:\n"
        "    assert 'NOSUCH' in str(e) or 'unknown command' in str(e), e\n"
        "assert r.get('py:a') == b'1'\n"
        "p = r.pipeline(transaction=True)\n"
        "p.incr('py:a')\n"
        "p.pfadd('py:a', 'z')\n"
        "res = p.execute(raise_on_error=False)\n"
        "assert res[0] == 2 and isinstance(res[1], redis.exceptions.ResponseError), res\n"
        "assert r.expiretime('py:a') > 0\n"
        "assert r.dbsize() >= 3\n"
        "assert set(r.keys('py:*')) == {b'py:a', b'py:b', b'py:h'}, r.keys('py:*')\n"
        "assert set(r.scan_iter('py:*', count=2)) == {b'py:a', b'py:b', b'py:h'}\n"
        "d = r.dump('py:h')\n"
        "assert r.restore('py:h2', 0, d) in (True, b'OK') and r.pfcount('py:h2') == 2\n"
        "r.delete('py:a', 'py:b', 'py:h', 'py:h2')\n"
        "print('ok')\n";
    python_expect_ok(script, T.resp_port);
}

/* What EXEC changed is journaled as it ran and answered once durable: a
 * kill -9 right after the answer loses none of it. */
static void test_multi_durable(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--fsync", "always", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    buf_t b = { 0 };
    mb(&b, "RANDOMKEY", NULL);   /* an empty keyspace: nil */
    mb(&b, "MULTI", NULL);
    mb(&b, "INCRBY", "dx:n", "41", NULL);
    mb(&b, "INCR", "dx:n", NULL);
    mb(&b, "PFADD", "dx:h", "a", "b", NULL);
    mb(&b, "EXPIRE", "dx:h", "100000", "NX", NULL);
    mb(&b, "EXPIREAT", "dx:n", "4102444800", "GT", NULL);   /* no expiry is infinite: not later */
    mb(&b, "INCR", "dx:gone", NULL);
    mb(&b, "PEXPIRE", "dx:gone", "-5", "LT", NULL);
    mb(&b, "EXEC", NULL);
    expect_reply(p.resp_port, &b, "$-1\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n"
                                  "+QUEUED\r\n*7\r\n:41\r\n:42\r\n:1\r\n:1\r\n:0\r\n:1\r\n:1\r\n");
    tally_proc_t q;
    resp_restart(&p, &q, args);
    b.len = 0;
    mb(&b, "GET", "dx:n", NULL);
    mb(&b, "PFCOUNT", "dx:h", NULL);
    mb(&b, "TTL", "dx:n", NULL);
    mb(&b, "EXISTS", "dx:gone", NULL);
    mb(&b, "DBSIZE", NULL);
    buf_t got = exchange(q.resp_port, b.p, b.len);
    assert_int_equal(strncmp(got.p, "$2\r\n42\r\n:2\r\n:-1\r\n:0\r\n:2\r\n", 27), 0);
    free(got.p);
    b.len = 0;
    mb(&b, "TTL", "dx:h", NULL);
    got = exchange(q.resp_port, b.p, b.len);
    long ttl = strtol(got.p + 1, NULL, 10);
    assert_true(ttl > 99000 && ttl <= 100000);
    free(got.p);
    free(b.p);
    int rc = tally_stop(&q);
    if (rc != 0) {
        char *log = tally_log(&q);
        fprintf(stderr, "%s\n", log ? log : "");
        fail_msg("tallyd exited with %d", rc);
    }
    tally_cleanup(&q);
    tally_cleanup(&p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_differential),
        cmocka_unit_test(test_keys_patterns),
        cmocka_unit_test(test_scan_guarantee),
        cmocka_unit_test(test_dump_restore),
        cmocka_unit_test(test_multi_differential),
        cmocka_unit_test(test_multi_resp3),
        cmocka_unit_test(test_multi_atomic),
        cmocka_unit_test(test_python_transaction),
        cmocka_unit_test(test_multi_durable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
