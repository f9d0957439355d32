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

/* Flushes standard output (for a command that shows something before it
 * ends, as `vdev top` does); a failure is remembered, and main() reports it
 * with its reason when the command returns. 0, or -1 on a write error. */
int vdev_cli_flush(void);

/* Flushes f and says whether everything written to it got there: 0, or the
 * reason of the failure (an errno; -1 when none is known). When the write
 * that failed was an earlier, buffered one, its errno is long gone: one more
 * byte (the output is bad anyway) is written to learn it. */
int vdev_cli_write_error(FILE *f);

#endif
