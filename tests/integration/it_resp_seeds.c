/*
 * it_resp_seeds.c - the seeds' redis-cli transcripts replayed verbatim
 * through redis-cli against tally's Redis port: the same commands, the same
 * printed answers (tests/fixtures/seeds/redis_cli.txt holds them as the seed
 * prints them; where ../shared/seeds is beside the checkout, each of its
 * lines is checked to be the seed's own, so the fixture cannot drift from
 * the document it copies).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "resp_client.h"

#define PROMPT "127.0.0.1:6379> "
#define FIXTURE "tests/fixtures/seeds/redis_cli.txt"
#define SEED "../shared/seeds/000_72f66106eaf3e653.txt"

RESP_SUITE(NULL)

/* The lines of a file (NULL-terminated; trailing newlines dropped). */
static char **read_lines(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (*n + 2 > cap) {
            cap = cap ? cap * 2 : 256;
            v = realloc(v, cap * sizeof(*v));
            assert_non_null(v);
        }
        v[(*n)++] = strdup(line);
    }
    free(line);
    fclose(f);
    if (v)
        v[*n] = NULL;
    return v;
}

static void free_lines(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Runs `redis-cli --no-raw -p PORT words...` (the words of cmd split at
 * spaces, as redis-cli's prompt splits them); its output in out. */
static void cli(const char *cmd, char *out, size_t cap)
{
    char sh[2048];
    int n = snprintf(sh, sizeof(sh), "redis-cli --no-raw -p %d", T.resp_port);
    char *copy = strdup(cmd), *save = NULL;
    for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
        n += snprintf(sh + n, sizeof(sh) - (size_t)n, " '%s'", w);
    free(copy);
    snprintf(sh + n, sizeof(sh) - (size_t)n, " 2>&1");
    FILE *p = popen(sh, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, cap - 1, p);
    out[got] = '\0';
    pclose(p);
}

/* Every command of the fixture through redis-cli, each printed answer
 * compared with the transcript's lines. */
static void test_transcripts(void **state)
{
    (void)state;
    if (system("redis-cli --version >/dev/null 2>&1") != 0)
        skip();   /* tools/deps.sh installs redis-tools */
    size_t n;
    char **v = read_lines(FIXTURE, &n);
    assert_non_null(v);
    size_t commands = 0;
    for (size_t i = 0; i < n; i++) {
        char out[8192];
        if (strncmp(v[i], "#setup ", 7) == 0) {
            cli(v[i] + 7, out, sizeof(out));
            continue;
        }
        if (strncmp(v[i], PROMPT, strlen(PROMPT)) != 0)
            continue;
        const char *cmd = v[i] + strlen(PROMPT);
        char want[8192];
        size_t wl = 0;
        size_t j = i + 1;
        for (; j < n && v[j][0] && v[j][0] != '#' && strncmp(v[j], PROMPT, strlen(PROMPT)) != 0; j++)
            wl += (size_t)snprintf(want + wl, sizeof(want) - wl, "%s\n", v[j]);
        want[wl] = '\0';
        cli(cmd, out, sizeof(out));
        if (strcmp(out, want) != 0)
            fail_msg("redis-cli %s\nprinted:\n%s\nthe seed shows:\n%s", cmd, out, want);
        commands++;
        i = j - 1;
    }
    assert_true(commands >= 40);
    free_lines(v, n);
}

/* The fixture's transcript lines are the seed's own, at the lines it says. */
static void test_fixture_is_the_seed(void **state)
{
    (void)state;
    size_t sn, fn;
    char **seed = read_lines(SEED, &sn);
    if (!seed)
        skip();   /* ../shared is beside the checkout in CI and here, not in every copy */
    char **fx = read_lines(FIXTURE, &fn);
    assert_non_null(fx);
    size_t at = 0;   /* the seed's line the next fixture line is */
    for (size_t i = 0; i < fn; i++) {
        if (strncmp(fx[i], "#seed ", 6) == 0) {
            at = (size_t)strtoul(fx[i] + 6, NULL, 10) - 1;
            continue;
        }
        if (!fx[i][0] || fx[i][0] == '#' || !at)
            continue;
        /* the seed's line (a command and its first answer are one line once, at 104) */
        while (at < sn && strcmp(seed[at], PROMPT) == 0)
            at++;
        assert_true(at < sn);
        if (strcmp(fx[i], seed[at]) != 0 && strncmp(seed[at], fx[i], strlen(fx[i])) != 0 &&
            !strstr(seed[at], fx[i]))
            fail_msg("fixture line %zu \"%s\" is not the seed's line %zu \"%s\"", i + 1, fx[i], at + 1, seed[at]);
        if (strcmp(fx[i], seed[at]) == 0 || strstr(seed[at], fx[i]) + strlen(fx[i]) == seed[at] + strlen(seed[at]))
            at++;
    }
    free_lines(seed, sn);
    free_lines(fx, fn);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_is_the_seed),
        cmocka_unit_test(test_transcripts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
