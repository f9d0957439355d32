/* bench_tracegen.c — writes generated allocation traces (tests/tracegen.h)
 * into a folder, for bench_alloc and `vdev replay`:
 *
 *   bench_tracegen DIR [--inference N] [--random N] [--first SEED]
 *
 * writes DIR/inference-SEED.trace for N seeds (default 8) of the
 * convolutional-inference family and DIR/random-SEED.trace for N seeds
 * (default 0) of the random family, seeds counting from --first (default 1).
 * The same seed gives the same file on every machine. */
#define _POSIX_C_SOURCE 200809L
#include "../tests/tracegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_one(const char *dir, const char *kind, uint64_t seed)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s-%02llu.trace", dir, kind, (unsigned long long)seed);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    uint64_t n;
    if (!strcmp(kind, "inference")) {
        struct tg_inference o = {.seed = seed};
        n = tg_inference_trace(f, &o);
    } else {
        struct tg_random o = {.seed = seed};
        n = tg_random_trace(f, &o);
    }
    if (fclose(f) != 0 || n == 0) {
        fprintf(stderr, "bench_tracegen: writing %s failed\n", path);
        return 1;
    }
    printf("%s: %llu events\n", path, (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: bench_tracegen DIR [--inference N] [--random N] [--first SEED]\n");
        return 2;
    }
    long n_inf = 8, n_rand = 0, first = 1;
    for (int i = 2; i + 1 < argc + 1; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_tracegen: %s needs a number\n", argv[i]);
            return 2;
        }
        long v = strtol(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--inference"))
            n_inf = v;
        else if (!strcmp(argv[i], "--random"))
            n_rand = v;
        else if (!strcmp(argv[i], "--first"))
            first = v;
        else {
            fprintf(stderr, "bench_tracegen: unknown option %s\n", argv[i]);
            return 2;
        }
        i++;
    }
    int rc = 0;
    for (long s = first; s < first + n_inf; s++)
        rc |= write_one(argv[1], "inference", (uint64_t)s);
    for (long s = first; s < first + n_rand; s++)
        rc |= write_one(argv[1], "random", (uint64_t)s);
    return rc;
}
