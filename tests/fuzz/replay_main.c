/*
 * replay_main.c - runs a libFuzzer target over saved inputs, without libFuzzer.
 *
 * `make test` builds every tests/fuzz/fuzz_*.c with this main() and feeds it
 * each file of its corpus and regression directories (inputs that once
 * crashed stay there forever), so the sanitizer build re-checks all of them.
 * `make fuzz` builds the same targets with clang's libFuzzer to find new ones.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 1;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0)
            continue;
        if (!S_ISDIR(sb.st_mode)) {
            files += run_file(argv[i]);
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char p[4096];
            snprintf(p, sizeof(p), "%s/%s", argv[i], de->d_name);
            files += run_file(p);
        }
        if (d)
            closedir(d);
    }
    /* the empty input always runs too */
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    printf("replayed %d inputs\n", files + 1);
    return 0;
}
