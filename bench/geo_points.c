/*
 * geo_points.c - the points of the geo benchmark, for both servers.
 *
 *   geo_points N DIR   writes N seeded random points around Beijing
 *                      (lon 115.5..117.5, lat 39..41: ~26 points per km^2 at
 *                      N = 1M, so a 1.1 km radius holds ~100) as
 *     DIR/redis.resp       GEOADD commands of 1000 points, RESP, for redis-cli --pipe
 *     DIR/tally-NNNN.json  POST /geo/{key} bodies of 10 000 points (the batch limit)
 *
 * Both files carry the same decimal text of the same doubles, so both
 * servers store exactly the same scores.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define KEY "bench:geo"
#define RESP_BATCH 1000     /* points per GEOADD */
#define JSON_BATCH 10000    /* points per POST (API_MAX_BATCH) */

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: geo_points N DIR\n");
        return 2;
    }
    long n = atol(argv[1]);
    char path[4096];
    snprintf(path, sizeof(path), "%s/redis.resp", argv[2]);
    FILE *resp = fopen(path, "w");
    if (!resp) {
        perror(path);
        return 1;
    }
    FILE *json = NULL;
    rng_t r;
    rng_seed(&r, 50);
    for (long i = 0; i < n; i++) {
        char lon[32], lat[32], name[32];
        snprintf(lon, sizeof(lon), "%.6f", 115.5 + 2 * rng_double(&r));
        snprintf(lat, sizeof(lat), "%.6f", 39 + 2 * rng_double(&r));
        snprintf(name, sizeof(name), "m%ld", i);
        if (i % RESP_BATCH == 0) {
            long k = n - i < RESP_BATCH ? n - i : RESP_BATCH;
            fprintf(resp, "*%ld\r\n$6\r\nGEOADD\r\n$%zu\r\n%s\r\n", 2 + 3 * k, strlen(KEY), KEY);
        }
        fprintf(resp, "$%zu\r\n%s\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n", strlen(lon), lon, strlen(lat), lat,
                strlen(name), name);
        if (i % JSON_BATCH == 0) {
            if (json) {
                fputs("]}\n", json);
                fclose(json);
            }
            snprintf(path, sizeof(path), "%s/tally-%04ld.json", argv[2], i / JSON_BATCH);
            if (!(json = fopen(path, "w"))) {
                perror(path);
                return 1;
            }
            fputs("{\"members\":[", json);
        } else {
            fputc(',', json);
        }
        fprintf(json, "{\"member\":\"%s\",\"lon\":%s,\"lat\":%s}", name, lon, lat);
    }
    if (json) {
        fputs("]}\n", json);
        fclose(json);
    }
    fclose(resp);
    return 0;
}
