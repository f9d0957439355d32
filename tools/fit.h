/* fit.h — what `vdev fit` (cmd_fit.c) shares with its output (fit_print.c):
 * the models, one replay's outcome per model, the fit being answered and the
 * report of the searches, and the start orders both name. */
#ifndef VDEV_TOOLS_FIT_H
#define VDEV_TOOLS_FIT_H

#include "cli.h"
#include "config/config.h"

#include <stdint.h>

#define MIB (1ull << 20)
#define MAX_MODELS VDEV_MAX_LOGICAL_PER_GPU
/* Up to this many models every order of their starts is checked (720 runs
 * for 6); above it each model started first and each started last. */
#define ALL_ORDERS_UP_TO 6

struct model {
    const char *path;
    struct vdev_trace *t;
    uint64_t cut;                          /* events before the cut: up to the first peak */
    uint32_t n_pre;                        /* blocks live before recording */
    uint64_t pre_bytes;                    /* each of them */
    struct vdev_logical_device_config cfg; /* as asked (ceiling 0: the card's budget) */
};

/* What one replay found for one model. */
struct outcome {
    int fits;
    uint32_t failed_line;  /* the trace's line of the failed event; 0: a pre-live block */
    char error[512];
    uint64_t peak_in_use, peak_reserved;
};

struct fit {
    int n;
    struct model m[MAX_MODELS];
    uint64_t card;  /* total bytes */
    char label[96];
    int growth;
    uint64_t budget; /* of the card, as start-up computed it */
    /* The card is of compute capability 7 and the user set no reserve, so
     * each run on a card of 2 GiB or more sets TensorFlow's 1050 MiB (under
     * 2 GiB vdev's own reserve is TensorFlow's for any capability). */
    int cc7_reserve;
    int user_reserve; /* TF_DEVICE_MIN_SYS_MEMORY_IN_MB is set */
    int n_orders;     /* the start orders checked after the round robin */
    /* One trace, no --split, --preallocate: as a run with growth off, the
     * whole card's budget preallocated (a ceiling searched: preallocated). */
    int whole;
};

struct report {
    struct outcome o[MAX_MODELS];
    uint64_t smallest[MAX_MODELS]; /* 0: none */
    int searched;
    uint64_t card_grow, card_pre;
    uint64_t pre_cap[MAX_MODELS]; /* preallocation: each model's one-region limit */
    int bad_order;                /* the start order that failed (order_of), or -1 */
};

/* Whether every one of n models fits. */
int vdev_fit_all_fit(const struct outcome *o, int n);

/* The k-th start order of n models into perm (see cmd_fit.c). */
void vdev_fit_order_of(int n, int k, int *perm);

/* The answer, as one JSON object or as the table, on standard output. */
void vdev_fit_print_json(const struct fit *f, const struct report *r);
void vdev_fit_print_table(const struct fit *f, const struct report *r);

#endif
