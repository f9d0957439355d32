/* bench_args.h — the options most benchmarks take: --quick (fewer
 * repetitions), --md FILE (write a markdown table there) and, for bench_ops,
 * --only NAME. One parser, so every benchmark spells and refuses them alike. */
#ifndef VDEV_BENCH_ARGS_H
#define VDEV_BENCH_ARGS_H

#include <stdio.h>
#include <string.h>

struct bench_args {
    int quick;
    const char *md;   /* NULL: no table */
    const char *only; /* NULL: everything (bench_ops) */
};

/* Parses argv into *a; --only is accepted when only_ok. 0 on success; on an
 * unknown option or one missing its value, prints the usage line of `name`
 * and returns 2 (the exit status to use). */
static inline int bench_args_parse(int argc, char **argv, const char *name, int only_ok,
                                   struct bench_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            a->quick = 1;
        else if (!strcmp(argv[i], "--md") && i + 1 < argc)
            a->md = argv[++i];
        else if (only_ok && !strcmp(argv[i], "--only") && i + 1 < argc)
            a->only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--md FILE]%s\n", name,
                    only_ok ? " [--only NAME]" : "");
            return 2;
        }
    }
    return 0;
}

#endif
