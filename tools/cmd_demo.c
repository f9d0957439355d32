/* cmd_demo.c — `vdev demo`: runs the examples/ programs, compiled into the
 * vdev command (the same source files, without their main()).
 *
 *   vdev demo [options]                three chained models on three GPUs
 *   vdev demo --tf-placement [opts]    the bug report under TensorFlow's rule
 *   vdev demo --split [opts]           two models on one GPU with hard limits
 *
 * With --report DIR (any scenario) the run writes its profiler trace to
 * DIR/run.json (unless VDEV_TRACE_FILE is set) and then draws it as
 * DIR/memory.svg and DIR/placement.svg (tools/cmd_plot.c). */
#define _GNU_SOURCE
#include "cli.h"
#include "plot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Creates dir and its parents (mkdir -p). */
static int make_dir(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return -1;
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* Draws the trace of the run into dir; returns 0 or 1. */
static int write_report(const char *dir, const char *trace)
{
    static const struct {
        const char *file;
        enum vdev_plot_kind kind;
    } pics[] = {{"memory.svg", VDEV_PLOT_MEMORY}, {"placement.svg", VDEV_PLOT_PLACEMENT}};
    int rc = 0;
    printf("\nReport: trace %s\n", trace);
    for (size_t i = 0; i < sizeof pics / sizeof pics[0]; i++) {
        char out[4200], err[512];
        snprintf(out, sizeof out, "%s/%s", dir, pics[i].file);
        if (vdev_plot_file(trace, out, pics[i].kind, err, sizeof err) != 0) {
            fprintf(stderr, "demo: --report: %s\n", err);
            rc = 1;
        } else {
            printf("Report: %s\n", out);
        }
    }
    return rc;
}

int vdev_example_chain3(int argc, char **argv);
int vdev_example_tf_placement(int argc, char **argv);
int vdev_example_split(int argc, char **argv);

static int run_scenario(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        int (*run)(int, char **) = NULL;
        if (!strcmp(argv[i], "--tf-placement"))
            run = vdev_example_tf_placement;
        else if (!strcmp(argv[i], "--split"))
            run = vdev_example_split;
        if (run) {
            /* drop the scenario flag, keep the others */
            for (int j = i; j + 1 < argc; j++)
                argv[j] = argv[j + 1];
            return run(argc - 1, argv);
        }
    }
    return vdev_example_chain3(argc, argv);
}

int vdev_cmd_demo(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            int rc = run_scenario(argc, argv);
            printf("\nEvery scenario also takes --report DIR: writes the run's profiler trace to\n"
                   "DIR/run.json (unless VDEV_TRACE_FILE is set) and draws DIR/memory.svg and\n"
                   "DIR/placement.svg from it (see 'vdev plot').\n");
            return rc;
        }
        if (!strcmp(argv[i], "--report")) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "demo: --report needs a directory (see --help)\n");
                return 2;
            }
            dir = argv[i + 1];
            for (int j = i; j + 2 < argc; j++)
                argv[j] = argv[j + 2];
            argc -= 2;
            i--;
        }
    }
    if (!dir)
        return run_scenario(argc, argv);
    if (make_dir(dir) != 0) {
        fprintf(stderr, "demo: --report: cannot create directory %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char trace[4200];
    const char *set = getenv("VDEV_TRACE_FILE");
    if (set && *set) {
        snprintf(trace, sizeof trace, "%s", set);
    } else {
        snprintf(trace, sizeof trace, "%s/run.json", dir);
        setenv("VDEV_TRACE_FILE", trace, 1);
    }
    int rc = run_scenario(argc, argv);
    vdev_shutdown(); /* closes the trace */
    if (rc != 0)
        return rc;
    return write_report(dir, trace);
}
