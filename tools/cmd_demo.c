/* cmd_demo.c — `vdev demo`: runs the examples/ programs, compiled into the
 * vdev command (the same source files, without their main()).
 *
 *   vdev demo [options]                three chained models on three GPUs
 *   vdev demo --tf-placement [opts]    the bug report under TensorFlow's rule
 *   vdev demo --split [opts]           two models on one GPU with hard limits */
#include "cli.h"

#include <string.h>

int vdev_example_chain3(int argc, char **argv);
int vdev_example_tf_placement(int argc, char **argv);
int vdev_example_split(int argc, char **argv);

int vdev_cmd_demo(int argc, char **argv)
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
