/*
 * it_resp_geo.c - Redis's geo commands on the Redis port (redis/cmds_geo.c):
 * the same commands to redis-server and to tally, replies compared byte for
 * byte in RESP2 and in RESP3 (GEOADD with NX/XX/CH, GEOPOS, GEODIST in each
 * unit, GEOHASH, GEOSEARCH and GEOSEARCHSTORE with every option,
 * GEORADIUS, GEORADIUSBYMEMBER and their _RO, ZREM, ZCARD, ZSCORE, and
 * their errors), searches over a few hundred seeded random points, the
 * seed transcript through redis-cli, and Python's redis package's geo
 * helpers.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "redis_ref.h"
#include "resp_client.h"

RESP_SUITE_REF(NULL)

/* One command from a line of words separated by single spaces ("" for an
 * empty word is written as the two characters ''). */
static void line(buf_t *b, const char *s)
{
    const char *w[64];
    size_t len[64], n = 0;
    while (*s) {
        const char *e = strchr(s, ' ');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        assert_true(n < 64);
        w[n] = s;
        len[n] = l;
        if (l == 2 && s[0] == '\'' && s[1] == '\'')
            len[n] = 0;
        n++;
        s += l + (e != NULL);
    }
    char h[32];
    snprintf(h, sizeof(h), "*%zu\r\n", n);
    buf_puts(b, h);
    for (size_t i = 0; i < n; i++) {
        snprintf(h, sizeof(h), "$%zu\r\n", len[i]);
        buf_puts(b, h);
        buf_put(b, w[i], len[i]);
        buf_puts(b, "\r\n");
    }
}

static void lines(buf_t *b, const char *const *l)
{
    for (; *l; l++)
        line(b, *l);
}

/* Runs the commands in RESP2, then again in RESP3 (the state they leave
 * is the same on both sides, so the second run's answers are too). */
static void diff_both(const char *const *cmds)
{
    buf_t b = { 0 };
    lines(&b, cmds);
    resp_diff(R.port, T.resp_port, &b);
    free(resp3_diff(R.port, T.resp_port, &b).p);
    free(b.p);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

/* GEOADD, GEOPOS, GEOHASH, GEODIST, ZSCORE, ZCARD, ZREM and their errors. */
static void test_members(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    static const char *const cmds[] = {
        "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
        "GEOADD g 2.349014 48.864716 Paris -0.127758 51.507351 London",
        "GEOADD g NX 13.361389 38.115556 Palermo 12.496366 41.902782 Rome",
        "GEOADD g XX CH 13.361389 38.2 Palermo 0 0 New",
        "GEOADD g ch 13.361389 38.2 Palermo",
        "GEOADD g CH XX 13.4 38.2 Palermo",
        "GEOADD g xx ch nx 1 2 a",
        "GEOADD g NX XX 1 2 a",
        "GEOADD g 1 2",
        "GEOADD g 1 2 a 3",
        "GEOADD g NX CH 1 2",
        "GEOADD g NX CH CH",
        "GEOADD g 200 10 x",
        "GEOADD g 10 86 x",
        "GEOADD g -180.5 -86 x",
        "GEOADD g abc 10 x",
        "GEOADD g 10 1x x",
        "GEOADD g '' 10 x",
        "GEOADD g nan 10 x",
        "GEOADD g inf 10 x",
        "GEOADD g 1e1 1.5e1 sci",
        "GEOADD g 180 85.05112878 edge 0x10 0 hex",
        "GEOADD g -180 -85.05112878 edge2",
        "GEOADD g 1 2 dup 3 4 dup",
        "GEOADD g NX 5 5 dup",
        "GEOADD nx:k XX 1 2 a",
        "EXISTS nx:k",
        "GEOPOS g Palermo Catania nope",
        "GEOPOS g",
        "GEOPOS nokey a b",
        "GEOPOS g edge edge2 sci hex dup New",
        "GEOHASH g Palermo Catania nope edge edge2 sci",
        "GEOHASH nokey a",
        "GEOHASH g",
        "GEODIST g Palermo Catania",
        "GEODIST g Palermo Catania km",
        "GEODIST g Palermo Catania KM",
        "GEODIST g Palermo Catania mi",
        "GEODIST g Palermo Catania ft",
        "GEODIST g Palermo Catania M",
        "GEODIST g Palermo Catania yards",
        "GEODIST g Palermo nope",
        "GEODIST g nope Palermo km",
        "GEODIST nokey a b",
        "GEODIST nokey a b parsecs",
        "GEODIST g Palermo Catania km extra",
        "GEODIST g Palermo Palermo",
        "GEODIST g edge edge2 km",
        "GEODIST g Paris London mi",
        "GEODIST g",
        "ZSCORE g Palermo",
        "ZSCORE g edge",
        "ZSCORE g edge2",
        "ZSCORE g nope",
        "ZSCORE nokey a",
        "ZSCORE g",
        "ZCARD g",
        "ZCARD nokey",
        "ZCARD g x",
        "TYPE g",
        "GEOADD small 1 1 a 2 2 b",
        "ZREM small a nope",
        "ZCARD small",
        "ZREM small b",
        "EXISTS small",
        "ZREM small b",
        "ZREM nokey a",
        "ZREM g",
        "INCR w:n",
        "GEOADD w:n 1 2 a",
        "GEOPOS w:n a",
        "GEOHASH w:n a",
        "GEODIST w:n a b",
        "GEOSEARCH w:n FROMLONLAT 1 2 BYRADIUS 1 km",
        "GEORADIUS w:n 1 2 1 km",
        "ZCARD w:n",
        "ZSCORE w:n a",
        "ZREM w:n a",
        "PFADD w:h a",
        "GEOADD w:h 1 2 a",
        "ZSCORE w:h a",
        NULL,
    };
    diff_both(cmds);

    /* members tally's sets cannot hold: missing to every read, as in
     * Redis; GEOADD refuses them (checked apart: Redis stores them) */
    buf_t b = { 0 };
    mb(&b, "GEOPOS", "g", "", "Palermo", "a\xff", NULL);
    mb(&b, "GEOHASH", "g", "", "x\0y", NULL);
    mb(&b, "GEODIST", "g", "", "Palermo", NULL);
    mb(&b, "ZSCORE", "g", "", NULL);
    mb(&b, "ZREM", "g", "", "\xff", NULL);
    mb(&b, "ZREM", "w:n", "", NULL);
    mb(&b, "ZREM", "nokey", "", NULL);
    mb(&b, "GEOSEARCH", "g", "FROMMEMBER", "", "BYRADIUS", "1", "km", NULL);
    mb(&b, "GEORADIUSBYMEMBER", "g", "\xff", "1", "km", NULL);
    resp_diff(R.port, T.resp_port, &b);
    free(resp3_diff(R.port, T.resp_port, &b).p);
    free(b.p);

    int fd = connect_to(T.resp_port);
    b = (buf_t){ 0 };
    mb(&b, "GEOADD", "g", "1", "2", "", NULL);
    mb(&b, "GEOADD", "g", "1", "2", "ok", "1", "2", "a\xff", NULL);
    mb(&b, "ZCARD", "g", NULL);
    mb(&b, "GEORADIUSBYMEMBER", "g", "\xff", "1", "km", "STORE", "d", NULL);
    mb(&b, "GEORADIUS", "g", "15", "37", "200", "km", "STOREDIST", "d", NULL);
    mb(&b, "GEOSEARCHSTORE", "d", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STOREDIST", NULL);
    send_all(fd, b.p, b.len);
    expect_bytes(fd, "-ERR tally's geo members are 1 to 1024 bytes of UTF-8 text without NUL\r\n"
                     "-ERR tally's geo members are 1 to 1024 bytes of UTF-8 text without NUL\r\n"
                     ":10\r\n"
                     "-ERR could not decode requested zset member\r\n"
                     "-ERR tally does not take STOREDIST: it stores distances as a sorted set's scores, and "
                     "tally's sorted sets are geo sets (use STORE, or WITHDIST)\r\n"
                     "-ERR tally does not take STOREDIST: it stores distances as a sorted set's scores, and "
                     "tally's sorted sets are geo sets (use STORE, or WITHDIST)\r\n");
    close(fd);
    free(b.p);
}

/* GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER (and _RO): every
 * option, their errors and what STORE leaves. */
static void test_search(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    static const char *const cmds[] = {
        "GEOADD s 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 12.496366 41.902782 Rome",
        "GEOADD s 14.268124 40.851775 Naples 9.189982 45.464204 Milan 16.871871 41.117143 Bari",
        "GEOSEARCH s FROMMEMBER Palermo BYRADIUS 500 km ASC",
        "GEOSEARCH s FROMMEMBER Palermo BYRADIUS 500 km",
        "GEOSEARCH s frommember Palermo byradius 500 KM desc withcoord withdist withhash",
        "GEOSEARCH s FROMLONLAT 15 37 BYRADIUS 200 km ASC WITHDIST",
        "GEOSEARCH s FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD",
        "GEOSEARCH s FROMLONLAT 15 37 BYBOX 4000 4000 km COUNT 2",
        "GEOSEARCH s FROMLONLAT 15 37 BYBOX 4000 4000 km COUNT 2 ANY",
        "GEOSEARCH s FROMLONLAT 15 37 BYBOX 4000 4000 km COUNT 2 ANY DESC",
        "GEOSEARCH s FROMLONLAT 15 37 BYRADIUS 4000 km COUNT 3 DESC WITHHASH",
        "GEOSEARCH s FROMLONLAT 15 37 BYRADIUS 4000 km COUNT 100 WITHDIST",
        "GEOSEARCH s FROMLONLAT 15 37 BYRADIUS 400 mi WITHDIST",
        "GEOSEARCH s FROMLONLAT 15 37 BYRADIUS 4000000 ft WITHDIST ASC",
        "GEOSEARCH s FROMLONLAT 15 37 BYRADIUS 0 m",
        "GEOSEARCH s FROMMEMBER Palermo BYRADIUS 0 m WITHDIST",
        "GEOSEARCH s FROMMEMBER Palermo BYBOX 0 0 m",
        "GEOSEARCH s FROMLONLAT 0 0 BYRADIUS 1 m",
        "GEOSEARCH s FROMMEMBER Rome FROMMEMBER Milan BYRADIUS 100 km",
        "GEOSEARCH s FROMMEMBER Palermo BYRADIUS 10 km BYRADIUS 1000 km ASC",
        "GEOSEARCH s FROMMEMBER nope BYRADIUS 10 km",
        "GEOSEARCH nokey FROMMEMBER nope BYRADIUS 10 km",
        "GEOSEARCH nokey FROMLONLAT 1 2 BYBOX 1 1 km",
        "GEOSEARCH s FROMMEMBER Palermo BYRADIUS 10 km COUNT 0",
        "GEOSEARCH s FROMMEMBER Palermo BYRADIUS 10 km COUNT -1",
        "GEOSEARCH s FROMMEMBER Palermo BYRADIUS 10 km COUNT x",
        "GEOSEARCH s FROMMEMBER Palermo BYRADIUS 10 km COUNT",
        "GEOSEARCH s FROMMEMBER Palermo BYRADIUS 10 km ANY",
        "GEOSEARCH s BYRADIUS 10 km ASC ASC",
        "geosearch s BYRADIUS 10 km ASC ASC",
        "GEOSEARCH s FROMLONLAT 1 2 ASC ASC",
        "GeoSearch s FROMLONLAT 1 2 ASC ASC",
        "GEOSEARCH s FROMLONLAT 1 2 FROMMEMBER Palermo BYRADIUS 1 km",
        "GEOSEARCH s FROMMEMBER Palermo FROMLONLAT 1 2 BYRADIUS 1 km",
        "GEOSEARCH s FROMLONLAT 1 2 BYRADIUS 1 km BYBOX 1 1 km",
        "GEOSEARCH s FROMLONLAT 1 2 BYBOX 1 1 km BYRADIUS 1 km",
        "GEOSEARCH s FROMLONLAT 1 2 BYRADIUS -1 km",
        "GEOSEARCH s FROMLONLAT 1 2 BYRADIUS x km",
        "GEOSEARCH s FROMLONLAT 1 2 BYBOX x 1 km",
        "GEOSEARCH s FROMLONLAT 1 2 BYBOX 1 x km",
        "GEOSEARCH s FROMLONLAT 1 2 BYBOX -1 1 km",
        "GEOSEARCH s FROMLONLAT 1 2 BYBOX 1 -1 km",
        "GEOSEARCH s FROMLONLAT 1 2 BYRADIUS 1 yd",
        "GEOSEARCH s FROMLONLAT 1 2 BYBOX 1 1 yd",
        "GEOSEARCH s FROMLONLAT 200 2 BYRADIUS 1 km",
        "GEOSEARCH s FROMLONLAT a 2 BYRADIUS 1 km",
        "GEOSEARCH s FROMLONLAT 1 2 BYRADIUS 1 km STORE x",
        "GEOSEARCH s FROMLONLAT 1 2 BYRADIUS 1 km STOREDIST",
        "GEOSEARCH s FROMLONLAT 1 2 BYRADIUS 1 km NOSUCH",
        "GEOSEARCH s FROMLONLAT 1 2 BYRADIUS 1",
        "GEOSEARCH s FROMLONLAT 1 2 BYBOX 1 1",
        "GEOSEARCH s FROMLONLAT 1 BYRADIUS 1 km",
        "GEOSEARCHSTORE dst s FROMMEMBER Palermo BYRADIUS 500 km",
        "ZCARD dst",
        "GEOPOS dst Palermo Rome",
        "GEOSEARCHSTORE dst s FROMMEMBER Palermo BYRADIUS 500 km COUNT 1",
        "GEOSEARCH dst FROMLONLAT 13 38 BYRADIUS 5000 km",
        "GEOSEARCHSTORE dst s FROMLONLAT 0 0 BYRADIUS 1 m",
        "EXISTS dst",
        "GEOSEARCHSTORE dst s FROMMEMBER Palermo BYBOX 2000 2000 km DESC COUNT 3 ANY",
        "GEOSEARCH dst FROMLONLAT 13 38 BYRADIUS 5000 km ASC",
        "GEOSEARCHSTORE dst nokey FROMMEMBER a BYRADIUS 1 km",
        "EXISTS dst",
        "GEOSEARCHSTORE dst s FROMMEMBER Palermo BYRADIUS 500 km WITHDIST",
        "GEOSEARCHSTORE dst s FROMMEMBER nope BYRADIUS 500 km",
        "GEOSEARCHSTORE dst s BYRADIUS 500 km ASC ASC",
        "GEOSEARCHSTORE s s FROMMEMBER Rome BYRADIUS 300 km",
        "GEOSEARCH s FROMLONLAT 13 38 BYRADIUS 5000 km ASC",
        "GEOADD s 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 9.189982 45.464204 Milan",
        "GEORADIUS s 15 37 200 km",
        "GEORADIUS s 15 37 200 km WITHDIST WITHCOORD ASC",
        "GEORADIUS s 15 37 2000 km COUNT 1 DESC",
        "GEORADIUS s 15 37 2000 km COUNT 2 ANY WITHHASH",
        "GEORADIUS s 15 37 200 km STORE dst2",
        "GEOSEARCH dst2 FROMLONLAT 15 37 BYRADIUS 5000 km ASC WITHHASH",
        "GEORADIUS s 15 37 200 km STORE dst2 WITHDIST",
        "GEORADIUS s 15 37 0.001 km STORE dst2",
        "EXISTS dst2",
        "GEORADIUS s 15 37 200 km STORE",
        "GEORADIUS s 200 37 200 km",
        "GEORADIUS s 15 37 -2 km",
        "GEORADIUS s 15 37 x km",
        "GEORADIUS s 15 37 2 yd",
        "GEORADIUS s 15 37 2 km BYBOX 1 1 km",
        "GEORADIUS s 15 37 2 km FROMMEMBER Rome",
        "GEORADIUS s 15 37 2 km ANY",
        "GEORADIUS s 15 37 2 km COUNT 0",
        "GEORADIUS nokey 15 37 200 km",
        "GEORADIUS nokey 15 37 200 km STORE dst3",
        "GEORADIUS_RO s 15 37 200 km WITHHASH",
        "GEORADIUS_RO s 15 37 200 km STORE dst3",
        "GEORADIUS_RO s 15 37 200 km STOREDIST dst3",
        "GEORADIUS_RO s 15 37 2000 km COUNT 2 DESC WITHCOORD",
        "GEORADIUSBYMEMBER s Palermo 200 km WITHDIST",
        "GEORADIUSBYMEMBER s Palermo 2000 km WITHDIST WITHCOORD WITHHASH COUNT 2",
        "GEORADIUSBYMEMBER s nope 200 km",
        "GEORADIUSBYMEMBER nokey nope 200 km",
        "GEORADIUSBYMEMBER s Palermo 200 km STORE dst4",
        "GEOPOS dst4 Palermo Catania",
        "GEORADIUSBYMEMBER s Palermo 200 km STORE dst4 WITHHASH",
        "GEORADIUSBYMEMBER nokey nope 200 km STORE dst4",
        "EXISTS dst4",
        "GEORADIUSBYMEMBER s Palermo -1 km",
        "GEORADIUSBYMEMBER s Palermo 1 furlong",
        "GEORADIUSBYMEMBER_RO s Palermo 2000 km ASC",
        "GEORADIUSBYMEMBER_RO s Palermo 2000 km STORE dst5",
        "GEORADIUSBYMEMBER_RO s nope 2000 km",
        "GEORADIUS s 15 37",
        "GEORADIUSBYMEMBER s Palermo 1",
        "GEOSEARCHSTORE dst s FROMMEMBER Palermo",
        NULL,
    };
    diff_both(cmds);
}

/* ZRANGE (by rank, BYSCORE, REV, LIMIT, WITHSCORES), ZRANGEBYSCORE,
 * ZREVRANGE and ZREVRANGEBYSCORE on
 * geo sets, members at one place (equal scores) ordered by their bytes. */
static void test_zrange(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    static const char *const cmds[] = {
        "GEOADD z 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 12.496366 41.902782 Rome",
        "GEOADD z 1 1 b 1 1 a 1 1 c 180 85.05112878 edge -180 -85.05112878 edge2",
        "ZRANGE z 0 -1",
        "ZRANGE z 0 -1 WITHSCORES",
        "ZRANGE z 0 -1 REV withscores",
        "ZRANGE z 2 4",
        "ZRANGE z -3 -2 REV",
        "ZRANGE z -100 100",
        "ZRANGE z 5 2",
        "ZRANGE z 8 10",
        "ZRANGE z -1 -1",
        "ZRANGE z 0 -1 LIMIT 0 -1",
        "ZRANGE z 0 -1 LIMIT 0 2",
        "ZRANGE z 0 x",
        "ZRANGE z 0 1 NOSUCH",
        "ZRANGE z 0 1 REV REV",
        "ZRANGE z 0 1 BYSCORE BYSCORE",
        "ZRANGE z -inf +inf BYSCORE",
        "ZRANGE z -inf +inf BYSCORE WITHSCORES LIMIT 1 3",
        "ZRANGE z +inf -inf BYSCORE REV WITHSCORES",
        "ZRANGE z +inf -inf BYSCORE REV LIMIT 1 2",
        "ZRANGE z -inf +inf BYSCORE REV",
        "ZRANGE z 0 3480343273965391 BYSCORE",
        "ZRANGE z 0 (3480343273965391 BYSCORE",
        "ZRANGE z (3480343273965391 +inf BYSCORE",
        "ZRANGE z 3480343273965391 3480343273965391 BYSCORE",
        "ZRANGE z (3480343273965391 (3480343273965391 BYSCORE",
        "ZRANGE z 5 1 BYSCORE",
        "ZRANGE z -5 -1 BYSCORE",
        "ZRANGE z 1e20 1e30 BYSCORE",
        "ZRANGE z 0 1e30 BYSCORE LIMIT -1 2",
        "ZRANGE z 0 1e30 BYSCORE LIMIT 2 -5",
        "ZRANGE z 0 1e30 BYSCORE LIMIT 2 0",
        "ZRANGE z 0 1e30 BYSCORE LIMIT 100 1",
        "ZRANGE z 0 1e30 BYSCORE LIMIT 1",
        "ZRANGE z 0 1e30 BYSCORE LIMIT x 1",
        "ZRANGE z x 1 BYSCORE",
        "ZRANGE z nan 1 BYSCORE",
        "ZRANGE z '' 1e30 BYSCORE",
        "ZRANGE z ( 1e30 BYSCORE",
        "ZRANGE z 0 1 BYLEX WITHSCORES",
        "ZRANGE z 0 1 LIMIT 0 1",
        "ZRANGE nokey 0 -1",
        "ZRANGE nokey 0 -1 BYSCORE",
        "ZRANGEBYSCORE z -inf +inf",
        "ZRANGEBYSCORE z -inf +inf WITHSCORES LIMIT 2 2",
        "ZRANGEBYSCORE z 1000 3480343273965391",
        "ZRANGEBYSCORE z -inf +inf REV",
        "ZRANGEBYSCORE z -inf +inf BYSCORE",
        "ZRANGEBYSCORE z a b",
        "ZRANGEBYSCORE nokey 0 1",
        "ZRANGEBYSCORE z 0",
        "ZREVRANGE z 0 -1",
        "ZREVRANGE z 1 3 WITHSCORES",
        "ZREVRANGE z -2 -1",
        "ZREVRANGE z 0 1 REV",
        "ZREVRANGE z 0 1 BYSCORE",
        "ZREVRANGE z 0 1 LIMIT 0 1",
        "ZREVRANGE nokey 0 1",
        "ZREVRANGEBYSCORE z +inf -inf",
        "ZREVRANGEBYSCORE z +inf -inf WITHSCORES LIMIT 1 2",
        "ZREVRANGEBYSCORE z (3480343273965391 -inf",
        "ZREVRANGEBYSCORE z -inf +inf",
        "ZREVRANGEBYSCORE z +inf -inf REV",
        "ZREVRANGEBYSCORE z x 1",
        "INCR zz:n",
        "ZRANGE zz:n 0 -1",
        "ZRANGEBYSCORE zz:n 0 1",
        "ZREVRANGE zz:n 0 1",
        NULL,
    };
    diff_both(cmds);
}

/* Searches over 400 seeded random points in a small area: distances ties,
 * COUNT's partial sort, ANY's early stop and the cells' scan order all as
 * Redis. */
static void test_random_points(void **state)
{
    (void)state;
    if (!have_redis)
        skip();
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    buf_t b = { 0 };
    for (int batch = 0; batch < 4; batch++) {
        char words[100 * 3][32];
        const char *argv[2 + 100 * 3 + 1];
        argv[0] = "GEOADD";
        argv[1] = "rp";
        size_t n = 2;
        for (int i = 0; i < 100; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            double lon = 2.2 + (double)(seed >> 11) / 9007199254740992.0 * 0.4;
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            double lat = 48.7 + (double)(seed >> 11) / 9007199254740992.0 * 0.3;
            int k = batch * 100 + i;
            snprintf(words[3 * i], 32, "%.6f", lon);
            snprintf(words[3 * i + 1], 32, "%.6f", lat);
            snprintf(words[3 * i + 2], 32, "p%d", k);
            argv[n++] = words[3 * i];
            argv[n++] = words[3 * i + 1];
            argv[n++] = words[3 * i + 2];
        }
        /* a multibulk of n words */
        char h[32];
        snprintf(h, sizeof(h), "*%zu\r\n", n);
        buf_puts(&b, h);
        for (size_t i = 0; i < n; i++) {
            snprintf(h, sizeof(h), "$%zu\r\n", strlen(argv[i]));
            buf_puts(&b, h);
            buf_puts(&b, argv[i]);
            buf_puts(&b, "\r\n");
        }
    }
    /* two members at one place: equal distances */
    line(&b, "GEOADD rp 2.35 48.85 twinA 2.35 48.85 twinB 2.35 48.85 twinC");
    static const char *const searches[] = {
        "ZCARD rp",
        "GEOSEARCH rp FROMLONLAT 2.35 48.85 BYRADIUS 5 km ASC WITHDIST",
        "GEOSEARCH rp FROMLONLAT 2.35 48.85 BYRADIUS 5 km DESC WITHDIST WITHHASH WITHCOORD",
        "GEOSEARCH rp FROMLONLAT 2.35 48.85 BYRADIUS 5 km",
        "GEOSEARCH rp FROMLONLAT 2.35 48.85 BYRADIUS 8 km COUNT 7 WITHDIST",
        "GEOSEARCH rp FROMLONLAT 2.35 48.85 BYRADIUS 8 km COUNT 7 DESC",
        "GEOSEARCH rp FROMLONLAT 2.35 48.85 BYRADIUS 8 km COUNT 7 ANY",
        "GEOSEARCH rp FROMLONLAT 2.35 48.85 BYRADIUS 8 km COUNT 7 ANY ASC WITHDIST",
        "GEOSEARCH rp FROMMEMBER p17 BYBOX 6 3 km ASC WITHCOORD",
        "GEOSEARCH rp FROMMEMBER p17 BYBOX 6 3 km COUNT 5 DESC WITHDIST",
        "GEOSEARCH rp FROMMEMBER twinB BYRADIUS 2 mi COUNT 12 WITHDIST",
        "GEOSEARCH rp FROMLONLAT 2.4 48.9 BYBOX 30000 20000 ft WITHDIST",
        "GEORADIUS rp 2.3 48.8 3 km WITHDIST COUNT 20",
        "GEORADIUSBYMEMBER rp p250 2 km WITHDIST ASC",
        "GEOSEARCHSTORE rpd rp FROMLONLAT 2.35 48.85 BYRADIUS 4 km COUNT 50",
        "GEOSEARCH rpd FROMLONLAT 2.35 48.85 BYRADIUS 40 km WITHHASH",
        "GEOHASH rp p0 p1 p2 p399 twinA",
        "GEOPOS rp p0 p1 p2 p399 twinA",
        "GEODIST rp p0 p399 km",
        "GEODIST rp p1 p2 ft",
        "ZSCORE rp p3",
        NULL,
    };
    lines(&b, searches);
    resp_diff(R.port, T.resp_port, &b);
    /* again in RESP3, against the same state */
    buf_t s3 = { 0 };
    lines(&s3, searches);
    free(resp3_diff(R.port, T.resp_port, &s3).p);
    free(s3.p);
    free(b.p);
}

/* A multibulk GEOADD (or ZREM) of n members (the same position each). */
static void many(buf_t *b, const char *cmd, const char *key, size_t n)
{
    char h[48];
    bool add = strcmp(cmd, "GEOADD") == 0;
    snprintf(h, sizeof(h), "*%zu\r\n", 2 + n * (add ? 3 : 1));
    buf_puts(b, h);
    snprintf(h, sizeof(h), "$%zu\r\n%s\r\n", strlen(cmd), cmd);
    buf_puts(b, h);
    snprintf(h, sizeof(h), "$%zu\r\n%s\r\n", strlen(key), key);
    buf_puts(b, h);
    for (size_t i = 0; i < n; i++) {
        if (add)
            buf_puts(b, "$1\r\n1\r\n$1\r\n2\r\n");
        char m[24];
        int ml = snprintf(m, sizeof(m), "m%zu", i);
        snprintf(h, sizeof(h), "$%d\r\n%s\r\n", ml, m);
        buf_puts(b, h);
    }
}

/* A GEOADD or ZREM of more members than HTTP takes is refused, changing
 * nothing; 10 000 are taken. */
static void test_limits(void **state)
{
    (void)state;
    buf_t b = { 0 };
    many(&b, "GEOADD", "lim", 10001);
    many(&b, "GEOADD", "lim", 10000);
    many(&b, "ZREM", "lim", 10001);
    many(&b, "ZREM", "lim", 10000);
    mb(&b, "EXISTS", "lim", NULL);
    buf_t got = exchange(T.resp_port, b.p, b.len);
    buf_puts(&got, "");
    assert_string_equal(got.p, "-ERR tally takes at most 10000 members in one GEOADD\r\n"
                               ":10000\r\n"
                               "-ERR tally takes at most 10000 members in one ZREM\r\n"
                               ":10000\r\n"
                               ":0\r\n");
    free(got.p);
    free(b.p);
}

/* The seed transcript's geo part through redis-cli, printed as there. */
static void test_redis_cli_seed(void **state)
{
    (void)state;
    static const cli_case_t cases[] = {
        { "geoadd company 116.489033 40.007669 meituan", "(integer) 1\n" },
        { "geoadd company 116.562108 39.787602 jd 116.334255 40.027400 xiaomi", "(integer) 2\n" },
        { "geoadd company 116.48105 39.996794 juejin", "(integer) 1\n" },
        { "geodist company meituan juejin km", "\"1.3878\"\n" },
        { "geodist company jd meituan km", "\"25.2590\"\n" },
        { "geodist company jd xiaomi km", "\"33.0047\"\n" },
        { "geodist company meituan xiaomi km", "\"13.3659\"\n" },
        { "geopos company meituan", "1) 1) \"116.48903220891952515\"\n   2) \"40.00766997707732031\"\n" },
        { "geohash company jd", "1) \"wx4fk7jgtf0\"\n" },
        { "geohash company meituan", "1) \"wx4gdg0tx40\"\n" },
        { "georadiusbymember company meituan 20 km count 3 asc", "1) \"meituan\"\n2) \"juejin\"\n3) \"xiaomi\"\n" },
        { "georadiusbymember company meituan 20 km withcoord withdist withhash count 3 asc",
          "1) 1) \"meituan\"\n   2) \"0.0000\"\n   3) (integer) 4069887179083478\n"
          "   4) 1) \"116.48903220891952515\"\n      2) \"40.00766997707732031\"\n"
          "2) 1) \"juejin\"\n   2) \"1.3878\"\n   3) (integer) 4069887154388167\n"
          "   4) 1) \"116.48104995489120483\"\n      2) \"39.99679348858259686\"\n"
          "3) 1) \"xiaomi\"\n   2) \"13.3659\"\n   3) (integer) 4069880904286516\n"
          "   4) 1) \"116.33425265550613403\"\n      2) \"40.02740024658161389\"\n" },
        { "georadius company 116.514202 39.905409 20 km withdist count 3 asc",
          "1) 1) \"juejin\"\n   2) \"10.5501\"\n2) 1) \"meituan\"\n   2) \"11.5748\"\n"
          "3) 1) \"jd\"\n   2) \"13.7269\"\n" },
    };
    cli_expect(T.resp_port, "--no-raw", cases, sizeof(cases) / sizeof(cases[0]));
}

/* Python's redis package's geo helpers (Debian's python3-redis). */
static void test_python(void **state)
{
    (void)state;
    if (!have_python_redis())
        skip();   /* tools/deps.sh test installs python3-redis */
    char script[] =
        "import redis, sys\n"
        "r = redis.Redis(port=int(sys.argv[1]), decode_responses=True)\n"
        "assert r.geoadd('py:g', [13.361389, 38.115556, 'Palermo', 15.087269, 37.502669, 'Catania']) == 2\n"
        "assert r.geoadd('py:g', [13.361389, 38.115556, 'Palermo', 12.496366, 41.902782, 'Rome'], nx=True) == 1\n"
        "assert r.geoadd('py:g', [13.4, 38.2, 'Palermo', 1, 1, 'New'], xx=True, ch=True) == 1\n"
        "assert r.geodist('py:g', 'Palermo', 'Catania', unit='km') == 167.2511, r.geodist('py:g', 'Palermo', 'Catania', unit='km')\n"
        "assert r.geodist('py:g', 'Palermo', 'nope') is None\n"
        "pos = r.geopos('py:g', 'Catania', 'nope')\n"
        "assert pos[1] is None and abs(pos[0][0] - 15.087269) < 1e-5 and abs(pos[0][1] - 37.502669) < 1e-5, pos\n"
        "assert r.geohash('py:g', 'Catania', 'nope') == ['sqdtr74hyu0', None], r.geohash('py:g', 'Catania')\n"
        "res = r.geosearch('py:g', longitude=15, latitude=37, radius=200, unit='km', sort='ASC', withdist=True)\n"
        "assert [m for m, d in res] == ['Catania', 'Palermo'], res\n"
        "assert res[0][1] == 56.4413, res\n"
        "res = r.geosearch('py:g', member='Palermo', width=400, height=400, unit='km', sort='DESC', count=1)\n"
        "assert res == ['Catania'], res\n"
        "res = r.geosearch('py:g', member='Palermo', radius=1000, unit='km', count=2, any=True, withcoord=True, withhash=True)\n"
        "assert len(res) == 2 and all(len(x) == 3 for x in res), res\n"
        "assert r.geosearchstore('py:d', 'py:g', longitude=15, latitude=37, radius=200, unit='km') == 2\n"
        "assert r.zcard('py:d') == 2\n"
        "assert r.georadius('py:g', 15, 37, 200, unit='km', sort='ASC') == ['Catania', 'Palermo']\n"
        "res = r.georadius('py:g', 15, 37, 200, unit='km', withdist=True, withcoord=True, sort='ASC')\n"
        "assert res[0][0] == 'Catania' and res[0][1] == 56.4413 and len(res[0][2]) == 2, res\n"
        "assert r.georadius('py:g', 15, 37, 200, unit='km', store='py:d2') == 2\n"
        "assert r.georadiusbymember('py:g', 'Palermo', 200, unit='km', sort='ASC') == ['Palermo', 'Catania']\n"
        "assert r.georadiusbymember('py:g', 'Palermo', 200, unit='km', store='py:d3') == 2\n"
        "assert r.execute_command('GEORADIUS_RO', 'py:g', 15, 37, 200, 'km', 'ASC') == ['Catania', 'Palermo']\n"
        "assert r.execute_command('GEORADIUSBYMEMBER_RO', 'py:g', 'Rome', 10, 'km') == ['Rome']\n"
        "assert r.zscore('py:g', 'Rome') == 3480343273965391.0, r.zscore('py:g', 'Rome')\n"
        "assert r.zcard('py:g') == 3\n"
        "assert r.zrem('py:g', 'Rome', 'nope') == 1 and r.zcard('py:g') == 2\n"
        "assert r.zrange('py:g', 0, -1) == ['Palermo', 'Catania'], r.zrange('py:g', 0, -1)\n"
        "assert r.zrange('py:g', 0, 0, desc=True, withscores=True) == [('Catania', 3479447370796909.0)]\n"
        "assert r.zrangebyscore('py:g', '-inf', '+inf', start=1, num=1) == ['Catania']\n"
        "try:\n"
        "    r.geoadd('py:g', [200, 10, 'bad'])\n"
        "    raise SystemExit('no error')\n"
        "except redis.ResponseError as e:\n"
        "    assert str(e) == 'invalid longitude,latitude pair 200.000000,10.000000', str(e)\n"
        "try:\n"
        "    r.geosearch('py:g', member='nope', radius=1, unit='km')\n"
        "    raise SystemExit('no error')\n"
        "except redis.ResponseError as e:\n"
        "    assert str(e) == 'could not decode requested zset member', str(e)\n"
        "print('ok')\n";
    python_expect_ok(script, T.resp_port);
}

/* What the geo commands change is journaled as over HTTP: after a kill
 * (no final snapshot), the restarted server holds the same sets. */
static void test_durable_across_restart(void **state)
{
    (void)state;
    const char *args[] = { "--resp-port", "0", "--fsync", "always", NULL };
    tally_proc_t p;
    tally_start(&p, NULL, args);
    static const char *const cmds[] = {
        "GEOADD dur:g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 12.496366 41.902782 Rome",
        "GEOADD dur:g XX CH 13.4 38.2 Palermo",
        "ZREM dur:g Rome",
        "GEOSEARCHSTORE dur:s dur:g FROMMEMBER Palermo BYRADIUS 500 km",
        "GEORADIUSBYMEMBER dur:g Catania 10 km STORE dur:r",
        NULL,
    };
    buf_t b = { 0 };
    lines(&b, cmds);
    expect_reply(p.resp_port, &b, ":3\r\n:1\r\n:1\r\n:2\r\n:1\r\n");
    tally_proc_t q;
    resp_restart(&p, &q, args);
    static const char *const after[] = {
        "ZRANGE dur:g 0 -1 WITHSCORES",
        "ZRANGE dur:s 0 -1",
        "ZRANGE dur:r 0 -1",
        NULL,
    };
    b.len = 0;
    lines(&b, after);
    expect_reply(q.resp_port, &b, "*4\r\n$7\r\nPalermo\r\n$16\r\n3479101074822695\r\n"
                                  "$7\r\nCatania\r\n$16\r\n3479447370796909\r\n"
                                  "*2\r\n$7\r\nPalermo\r\n$7\r\nCatania\r\n"
                                  "*1\r\n$7\r\nCatania\r\n");
    free(b.p);
    resp_restart_end(&p, &q);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members),
        cmocka_unit_test(test_search),
        cmocka_unit_test(test_zrange),
        cmocka_unit_test(test_random_points),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_redis_cli_seed),
        cmocka_unit_test(test_python),
        cmocka_unit_test(test_durable_across_restart),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
