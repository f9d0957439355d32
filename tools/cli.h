/* cli.h — the subcommands of the vdev command. Each takes argv with its own
 * name in argv[0] and returns the process exit status. */
#ifndef VDEV_CLI_H
#define VDEV_CLI_H

#include "vdev.h"

struct vdev_cli_command {
    const char *name, *summary;
    int (*run)(int argc, char **argv);
};

int vdev_cmd_devices(int argc, char **argv);
int vdev_cmd_replay(int argc, char **argv);
int vdev_cmd_plot(int argc, char **argv);
int vdev_cmd_demo(int argc, char **argv);
int vdev_cmd_top(int argc, char **argv);
int vdev_cmd_fit(int argc, char **argv);

#endif
