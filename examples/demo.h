/* demo.h — what the demo programs (chain3.c, tf_placement.c, split.c,
 * mirrored.c) share: the options every scenario takes and their usage, and,
 * for the three-model ones, the choice of devices from what the machine has.
 * Written with the public header alone, like the programs; examples/demo.c
 * implements it. */
#ifndef VDEV_EXAMPLES_DEMO_H
#define VDEV_EXAMPLES_DEMO_H

#include "vdev.h"

enum demo_scenario {
    DEMO_CHAIN3 = 0,
    DEMO_TF_PLACEMENT,
    DEMO_SPLIT,
    DEMO_MIRRORED, /* options and usage only: it chooses its devices itself */
    DEMO_SCENARIO_COUNT
};

struct demo_opts {
    char prog[64];        /* "vdev demo" under the vdev command, else the program's name */
    int under_vdev;       /* run by the vdev command (`vdev demo`) */
    long epochs, steps;   /* epochs, and training steps in each */
    long batch;           /* examples per step */
    long seed;            /* seed of the data and the weights */
    int log_placement;    /* --log-placement given */
    int vdev_placement;   /* --vdev-placement given (--tf-placement only) */
};

/* Parses argv (argv[0] is "demo" under the vdev command, else the program's
 * path) with the scenario's defaults. Returns -1 to go on; 0 after --help
 * (the usage on stdout); 2 after a usage error, having printed one line
 * "PROG: what is wrong" and the usage on stderr. The usage is `vdev demo`'s
 * under the vdev command, else the program's own: the options it takes
 * (--vdev-placement only for DEMO_TF_PLACEMENT; the scenario switches and
 * --report DIR are the vdev command's), with its defaults. */
int demo_parse(int argc, char **argv, enum demo_scenario sc, struct demo_opts *o);

/* The usage of `vdev demo`: every scenario (--priority's too) and option. */
void demo_usage(FILE *f);

/* What VDEV_SIM_GPUS a scenario sets where there is no GPU ("3x16GiB"). */
const char *demo_simulated_gpus(enum demo_scenario sc);

/* The devices a scenario runs on, after demo_start(). */
struct demo_devices {
    int n;                    /* devices the models use: 3, or 2 for DEMO_SPLIT */
    char name[3][64];         /* "/device:GPU:0", ... (model k uses name[k]) */
    uint64_t limit_bytes[3];  /* each one's memory limit */
};

/* Starts the runtime on devices sized from what the machine has, and prints
 * what it chose. With no GPU at all (and VDEV_SIM_GPUS unset) it simulates
 * them: three 16 GiB GPUs, or one 8 GiB GPU for DEMO_SPLIT. Otherwise it
 * reads each visible GPU's budget (free memory less the driver reserve, or
 * what the environment configures) and, for three models: gives one to each
 * of three or more GPUs; with two GPUs splits the first into two logical
 * GPUs; with one splits it into three. DEMO_SPLIT splits the first GPU into
 * two logical GPUs of 4 GiB and 2 GiB, or 2/3 and 1/3 of a smaller budget.
 * Returns 0, or 1 after printing "PROG: why" on stderr (no visible GPU, a
 * budget too small for the models at this batch, start-up failed). Not for
 * DEMO_MIRRORED. */
int demo_start(const struct demo_opts *o, enum demo_scenario sc, struct demo_devices *d);

/* Says on stderr that no GPU is visible ("PROG: no GPU is visible
 * (VDEV_VISIBLE_DEVICES=... hides the N GPUs there are); ..."), n_gpus the
 * GPUs there are; made: they are the simulated ones the demo set up for want
 * of a GPU ("hides the N simulated GPUs the demo would make"); simulated ones
 * of the user's VDEV_SIM_GPUS are said to be so. Returns 1, the exit status. */
int demo_no_gpu(const char *prog, int n_gpus, int made);
/* Where the runtime started serves its metrics (VDEV_METRICS_ADDR, port 0
 * as the port it picked): one line "Metrics: http://HOST:PORT/metrics" on
 * stdout; nothing when it serves none. */
void demo_say_metrics(void);

/* Bytes one model needs at a batch, with room for the allocator's regions:
 * the estimate demo_start() checks the limits against. */
uint64_t demo_model_bytes(enum demo_scenario sc, long batch);

#endif
