/* mpi_conv.c — the mirrored strategy's convolutional test net
 * (tests/test_mirrored_conv_net.h) trained across processes (mpi_tests.sh
 * conv): with --multi, a multi-worker mirrored strategy over this process's
 * first --replicas simulated GPUs; without, the one-process reference, a
 * mirrored strategy over that many devices. Every process trains 6 steps of
 * Adam on the same global batch of 16 rows, under the determinism switch,
 * and writes each step's loss and then its first local replica's
 * parameters, one hex float a line, to OUT.<worker index> (OUT.reference
 * without --multi). It fails (exit 1, the message on stderr) when its local
 * replicas differ from each other. (The loss is vdev_strategy_reduce's, the
 * job's sum.)
 *
 * Usage: mpi_conv [--multi] [--replicas N] --out OUT */
#define _GNU_SOURCE
#include "../test_mirrored_conv_net.h"

#include <stdio.h>

#define STEPS 6

static int die(const char *what)
{
    fprintf(stderr, "mpi_conv: %s: %s\n", what, vdev_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    int multi = 0, nloc = 1;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--multi"))
            multi = 1;
        else if (!strcmp(argv[i], "--replicas") && i + 1 < argc)
            nloc = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else
            out = NULL, i = argc;
    }
    if (!out || nloc < 1 || nloc > MAXR) {
        fprintf(stderr, "usage: mpi_conv [--multi] [--replicas 1-%d] --out OUT\n", MAXR);
        return 2;
    }
    static const char *const devs[MAXR] = {"GPU:0", "GPU:1", "GPU:2", "GPU:3"};
    vdev_config_set_deterministic(true);
    vdev_strategy_t *s;
    if ((multi ? vdev_multi_worker_mirrored_strategy_new(devs, nloc, &s)
               : vdev_mirrored_strategy_new(devs, nloc, &s)) != VDEV_OK)
        return die("making the strategy");
    struct net n = {.seed = 42, .adam = 1};
    if (vdev_strategy_run(s, build, &n, NULL) != VDEV_OK)
        return die("building the model");
    make_batch(&n, 16, 7);
    char path[512];
    struct vdev_cluster_task task;
    if (vdev_cluster_task(&task) != VDEV_OK)
        return die("vdev_cluster_task");
    if (multi)
        snprintf(path, sizeof path, "%s.%d", out, task.index);
    else
        snprintf(path, sizeof path, "%s.reference", out);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    for (int k = 0; k < STEPS; k++) {
        vdev_tensor_t *per[MAXR] = {NULL}; /* this worker's replicas */
        if (vdev_strategy_run(s, step, &n, per) != VDEV_OK)
            return die("a step");
        vdev_tensor_t *loss = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, per);
        if (!loss)
            return die("vdev_strategy_reduce");
        fprintf(f, "loss %d %a\n", k, (double)vdev_tensor_item(loss));
        vdev_tensor_free(loss);
        for (int r = 0; r < nloc; r++)
            vdev_tensor_free(per[r]);
    }
    /* the replica ids are global: this worker's are the ones it built */
    int first = 0;
    while (first < MAXR && !n.vars[first][0])
        first++;
    static float p[MAXR][NPARAM];
    for (int r = first; r < first + nloc && r < MAXR; r++)
        read_vars(n.vars[r], p[r - first]);
    for (int r = 1; r < nloc; r++)
        if (memcmp(p[r], p[0], sizeof p[0])) {
            fprintf(stderr, "mpi_conv: local replica %d differs from the first\n", r);
            return 1;
        }
    for (int i = 0; i < NPARAM; i++)
        fprintf(f, "%a\n", (double)p[0][i]);
    fclose(f);
    for (int r = 0; r < MAXR; r++) {
        for (int i = 0; i < NV; i++)
            vdev_tensor_free(n.vars[r][i]);
        vdev_optimizer_free(n.opt[r]);
    }
    vdev_tensor_free(n.x);
    vdev_tensor_free(n.y);
    vdev_strategy_free(s);
    vdev_shutdown();
    return check_failed ? 1 : 0;
}
