/* cmd_demo.c — `vdev demo`: runs the examples/ programs, compiled into the
 * vdev command (the same source files, without their main()).
 *
 *   vdev demo [options]                three chained models on three GPUs
 *   vdev demo --tf-placement [opts]    the bug report under TensorFlow's rule
 *   vdev demo --split [opts]           two models on one GPU with hard limits
 *   vdev demo --priority [--steps N]   a critical model keeps its share while two
 *                                      others grow and shrink (examples/priority.c)
 *   vdev demo --mirrored [opts]        one model data-parallel on every GPU
 *
 * The scenarios but --priority take the same options (examples/demo.c
 * parses them, holds the usage of every scenario and sizes the devices).
 * This file picks the scenario and handles --help and
 * --report DIR: the run writes its profiler trace to DIR/run.json (unless
 * VDEV_TRACE_FILE is set), then it is drawn as DIR/memory.svg and
 * DIR/placement.svg (tools/cmd_plot.c). Usage errors print one line
 * "vdev demo: ..." and the usage on stderr and exit 2.
 *
 * Standard output is line-buffered, so that a line of progress is out before
 * an error that follows it on stderr, whatever both are redirected to.
 * Ctrl-C ends every run the same way: what the run printed is out, one line
 * "vdev demo: interrupted" on stderr, and the process ends by SIGINT
 * (status 130 in a shell). During a --report run it still gives the
 * pictures: SIGINT wakes a
 * thread of its own (the run's threads block it), which closes the trace
 * where the run is (its whole events, then its end: valid JSON), draws it,
 * and then ends the process by SIGINT, as Ctrl-C would have (a second Ctrl-C
 * while it draws ends it at once). The run goes on meanwhile (a scenario
 * has no way to be stopped between steps), untraced, until its next line of
 * progress, which waits for stdout, held by the drawing thread to the end
 * so that the report's lines come whole. A lock decides who
 * writes the report: the interrupt when it comes first, else the run once
 * it is over (then Ctrl-C just ends the process, as before).
 *
 * SIGTERM (kill, a service manager, a container's stop) ends a run the same
 * way, with "terminated" where Ctrl-C says "interrupted", and the process
 * then ends by SIGTERM (status 143 in a shell): killed by it at once, a
 * --report run left its trace cut mid-event and no pictures. */
#define _GNU_SOURCE
#include "../examples/demo.h"
#include "cli.h"
#include "plot.h"
#include "alloc/alloc.h"
#include "runtime/observe.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Draws the trace of the run into dir; returns 0 or 1. A picture that could
 * not be written is removed (no empty or partial file is left behind) and
 * named on stderr. */
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
            unlink(out);
            fprintf(stderr, "vdev demo: --report: %s\n", err);
            rc = 1;
        } else {
            printf("Report: %s\n", out);
        }
    }
    return rc;
}

/* Ctrl-C during a run (see the top of the file). */
static struct {
    pthread_mutex_t lock; /* held by whoever writes the report */
    sem_t wake;           /* posted by the handler: SIGINT or SIGTERM came */
    volatile sig_atomic_t sig; /* the first of them, set before the post */
    const char *dir;      /* --report's, or NULL; set before the thread starts */
} I = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void on_sigint(int sig)
{
    int e = errno;
    if (!I.sig)
        I.sig = sig;
    sem_post(&I.wake); /* async-signal-safe */
    errno = e;
}

/* SIGINT and SIGTERM, the signals that end a run (the ones not ignored). */
static void run_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

static void *on_interrupt(void *arg)
{
    (void)arg;
    /* this thread takes SIGINT and SIGTERM; the run's threads block them */
    sigset_t set;
    run_signals(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    while (sem_wait(&I.wake) != 0) {
    }
    int sig = I.sig ? I.sig : SIGINT;
    const char *what = sig == SIGTERM ? "terminated" : "interrupted";
    /* from now on a Ctrl-C (or a SIGTERM) ends the process at once; one
     * ignored stays ignored */
    for (int k = 0; k < 2; k++) {
        struct sigaction cur;
        int s = k ? SIGTERM : SIGINT;
        if (sigaction(s, NULL, &cur) == 0 && cur.sa_handler == on_sigint)
            signal(s, SIG_DFL);
    }
    char trace[4200];
    if (pthread_mutex_trylock(&I.lock) != 0) {
        /* the run is over (and its report is being written): just end */
    } else if (!I.dir) {
        /* the run's lines so far are out (the lock waits for one being
         * written); the run, which goes on, prints no more */
        flockfile(stdout);
        fflush(stdout);
        fprintf(stderr, "\nvdev demo: %s\n", what);
    } else if (vdev_trace_path(trace, sizeof trace) == VDEV_OK && trace[0]) {
        /* stdout is this thread's until the end: the run, which goes on,
         * waits at its next line of progress instead of splitting the
         * report's lines (the report starts on a line of its own) */
        flockfile(stdout);
        fprintf(stderr,
                "\nvdev demo: %s: closing the trace %s where the run is and drawing it "
                "(%s again quits at once)\n",
                what, trace, sig == SIGTERM ? "a second SIGTERM or Ctrl-C" : "Ctrl-C");
        vdev_observe_shutdown(); /* its whole events, then its end */
        write_report(I.dir, trace);
    } else {
        fprintf(stderr, "\nvdev demo: %s before the run's trace was opened: nothing to draw\n",
                what);
    }
    /* the allocation trace's lines so far (VDEV_ALLOC_TRACE): whole lines, so
     * that `vdev replay` and `vdev fit` read it */
    vdev_alloc_trace_flush_all();
    fflush(stdout);
    fflush(stderr);
    raise(sig);
    return NULL;
}

/* Hands SIGINT and SIGTERM to a thread that ends the run (and draws the
 * report where dir is not NULL). Both are blocked in this thread, so in
 * every thread the run starts; a thread started before (a BLAS pool) may
 * still take one, and its handler wakes that thread all the same. A signal
 * that is ignored (SIGINT in a background job) stays ignored.
 * 0, or -1 when it could not be set up (the run goes on as without it). */
static int catch_interrupt(const char *dir)
{
    struct sigaction old_int, old_term, sa = {.sa_handler = on_sigint, .sa_flags = SA_RESTART};
    if (sigaction(SIGINT, NULL, &old_int) != 0 || sigaction(SIGTERM, NULL, &old_term) != 0 ||
        (old_int.sa_handler == SIG_IGN && old_term.sa_handler == SIG_IGN))
        return -1;
    I.dir = dir;
    if (sem_init(&I.wake, 0, 0) != 0)
        return -1;
    sigset_t set, old_mask;
    run_signals(&set);
    sigemptyset(&sa.sa_mask);
    pthread_t t;
    if (pthread_sigmask(SIG_BLOCK, &set, &old_mask) != 0)
        return -1;
    if (pthread_create(&t, NULL, on_interrupt, NULL) != 0) {
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
        return -1;
    }
    pthread_detach(t);
    if (old_int.sa_handler != SIG_IGN)
        sigaction(SIGINT, &sa, NULL);
    if (old_term.sa_handler != SIG_IGN)
        sigaction(SIGTERM, &sa, NULL);
    return 0;
}

int vdev_example_chain3(int argc, char **argv);
int vdev_example_tf_placement(int argc, char **argv);
int vdev_example_split(int argc, char **argv);
int vdev_example_priority(int argc, char **argv);
int vdev_example_mirrored(int argc, char **argv);

static int usage_error(const char *what)
{
    fprintf(stderr, "vdev demo: %s\n\n", what);
    demo_usage(stderr);
    return 2;
}

int vdev_cmd_demo(int argc, char **argv)
{
    const char *dir = NULL;
    int (*run)(int, char **) = vdev_example_chain3;
    const char *scenario = NULL;
    int n = 1; /* argv without the scenario flag and --report DIR, for the scenario */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            demo_usage(stdout);
            printf("\nPlacement: the default scenario copies each model's output to the next\n"
                   "model's GPU itself, so it runs under every VDEV_PLACEMENT, strict included.\n"
                   "--tf-placement sets its rule in code, whatever VDEV_PLACEMENT says\n"
                   "(--vdev-placement: the copy policy).\n");
            return 0;
        }
        if (!strcmp(a, "--tf-placement") || !strcmp(a, "--split") || !strcmp(a, "--priority") ||
            !strcmp(a, "--mirrored")) {
            if (scenario && strcmp(scenario, a)) {
                char what[96];
                snprintf(what, sizeof what, "%s and %s are two scenarios: choose one", scenario, a);
                return usage_error(what);
            }
            scenario = a;
            run = a[2] == 't'   ? vdev_example_tf_placement
                  : a[2] == 's' ? vdev_example_split
                  : a[2] == 'p' ? vdev_example_priority
                                : vdev_example_mirrored;
        } else if (!strcmp(a, "--report")) {
            if (i + 1 >= argc || !argv[i + 1][0] || argv[i + 1][0] == '-')
                return usage_error("--report needs a directory");
            dir = argv[++i];
        } else {
            argv[n++] = argv[i];
        }
    }
    argc = n;
    argv[argc] = NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!dir) {
        catch_interrupt(NULL);
        int rc = run(argc, argv);
        pthread_mutex_lock(&I.lock); /* an interrupt from now on just ends */
        return rc;
    }
    /* The folder must be one this run can write in: it is named here, not
     * the VDEV_TRACE_FILE that start-up would fail to open in it. */
    struct stat st;
    if (make_dir(dir) != 0) {
        fprintf(stderr, "vdev demo: --report: cannot create directory %s: %s\n", dir,
                strerror(errno));
        return 1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "vdev demo: --report: %s is not a directory\n", dir);
        return 1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "vdev demo: --report: cannot write in directory %s: %s\n", dir,
                strerror(errno));
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
    catch_interrupt(dir);
    int rc = run(argc, argv);
    /* the report is the run's to write now, unless an interrupt took it
     * first (then this waits for the end that it brings) */
    pthread_mutex_lock(&I.lock);
    /* the file written: VDEV_TRACE_FILE with its placeholders expanded */
    if (rc == 0 && vdev_trace_path(trace, sizeof trace) == VDEV_OK && !trace[0]) {
        fprintf(stderr, "vdev demo: --report: no trace was written\n");
        rc = 1;
    }
    vdev_shutdown(); /* closes the trace */
    if (rc != 0)
        return rc;
    return write_report(dir, trace);
}
