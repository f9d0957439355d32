/* cli.h — the subcommands of the vdev command. Each takes argv with its own
 * name in argv[0] and returns the process exit status. */
#ifndef VDEV_CLI_H
#define VDEV_CLI_H

#include "vdev.h"

struct vdev_cli_command {
    const char *name, *summary;
    int (*run)(int argc, char **argv);
    /* Its options, space-separated, each ending in '=' when it takes a
     * value ("--report= --split"): main() splits "--report=DIR" into
     * "--report" "DIR" before run() sees it, and refuses "--split=x". */
    const char *options;
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

/* The blocks a trace says were live before it was recorded (its header's
 * pre_live_blocks and pre_live_bytes: the model's weights in the shared
 * traces), as `vdev fit` and `vdev replay` allocate them before the trace:
 * *n_blocks equal blocks of *each_bytes (pre_live_bytes shared out, rounded
 * up); 0 and 0 when the header gives neither, or both as 0. One given
 * without the other, a value that is not digits alone, more than
 * VDEV_CLI_MAX_PRE_LIVE_BLOCKS blocks, or bytes with no blocks (or blocks
 * with none) is VDEV_ERR_INVALID_ARG naming the trace's line 1. */
#define VDEV_CLI_MAX_PRE_LIVE_BLOCKS 1000000
struct vdev_trace;
/* The note `vdev replay` and `vdev fit` print on stderr for a trace whose
 * last line was cut short and dropped ("<tool>: note: <path>:<line>: the
 * last line '...' is cut short (no newline): dropped; N events read");
 * nothing for a whole trace. */
void vdev_cli_trace_cut_note(const char *tool, const struct vdev_trace *t);
enum vdev_status vdev_cli_trace_pre_live(const struct vdev_trace *t, uint32_t *n_blocks,
                                         uint64_t *each_bytes);
/* The smallest one-region capacity that serves t with its pre-live blocks
 * allocated first and never freed (t's own when it has none), measured as
 * `vdev replay` measures its min capacity. VDEV_OK, or the replay's error
 * (message set); `vdev replay` prints it, `vdev fit` rounds it to whole MiB
 * for the preallocation it assumes. */
enum vdev_status vdev_cli_min_capacity_with_pre_live(const struct vdev_trace *t, uint64_t *out);

#endif
