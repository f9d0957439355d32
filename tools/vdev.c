/* vdev.c — the vdev command: one binary with subcommands.
 *
 *   vdev devices [--json]        physical and logical devices
 *   vdev replay [--json] TRACE   replay an allocation trace against the allocator
 *   vdev plot [--placement] TRACE -o OUT.svg   draw a profiler trace
 *   vdev demo [...]              the main job (see cmd_demo.c)
 *   vdev top [--url U] [--once]  live memory and op rates from a metrics endpoint
 *
 * Every subcommand prints one line "vdev <cmd>: <error>" on stderr and exits
 * non-zero on bad input: 2 for usage errors, 1 for everything else. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const struct vdev_cli_command commands[] = {
    {"devices", "list physical and logical devices, memory and policies", vdev_cmd_devices},
    {"replay", "replay an allocation trace and measure the allocator", vdev_cmd_replay},
    {"top", "live view of memory, ops and copies per device from a metrics endpoint",
     vdev_cmd_top},
    {"plot", "draw a trace (VDEV_TRACE_FILE) as SVG: memory over time, ops per device",
     vdev_cmd_plot},
#ifdef VDEV_HAVE_DEMO
    {"demo", "train three chained models on three GPUs (the main job)", vdev_cmd_demo},
#endif
};

/* Every environment variable vdev reads, with what it does (the README's
 * "Environment variables" has the values in full). tests/cli_devices.sh
 * checks that each getenv() of src/ and tools/ is listed here. */
static const struct {
    const char *name, *what;
} env_vars[] = {
    {"VDEV_SIM_GPUS", "simulated GPUs instead of CUDA ones: 3x16GiB or 2x80GiB,1x24GiB"},
    {"VDEV_VISIBLE_DEVICES", "the physical GPUs to use: 0,2 (empty: none)"},
    {"VDEV_MEMORY_GROWTH", "grow on demand (true, the default) or preallocate (false)"},
    {"TF_FORCE_GPU_ALLOW_GROWTH", "TensorFlow's name for memory growth: true or false"},
    {"VDEV_MEMORY_FRACTION", "cap each GPU at this fraction of its total memory: 0.5"},
    {"TF_GPU_MEMORY_FRACTION", "the same, under the name popular guides use"},
    {"VDEV_LOGICAL_DEVICES", "logical GPUs with memory limits per GPU: 0:4GiB,2GiB;1:3GiB"},
    {"TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "MiB left to the driver on each GPU (default 225 to 1536)"},
    {"VDEV_PLACEMENT", "an input on another device: copy (default), strict (error), tf"},
    {"VDEV_LOG_DEVICE_PLACEMENT", "1: print the device every op runs on"},
    {"VDEV_PLACEMENT_REPORT", "1: print ops per device and the placement audit at exit"},
    {"VDEV_OOM_REPORT", "1: print the allocator's state after an out-of-memory error"},
    {"VDEV_ALLOC_TRACE", "FILE: write every allocation and free (for vdev replay)"},
    {"VDEV_TRACE_FILE", "FILE: write a profiler trace (for vdev plot and Perfetto)"},
    {"VDEV_METRICS_ADDR", "HOST:PORT: serve Prometheus metrics on /metrics (for vdev top)"},
    {"VDEV_CUDA_PLUGIN", "FILE: the CUDA plugin to load instead of the one built"},
    {"OPENBLAS_NUM_THREADS", "OpenBLAS threads (unset: all cores, or 1 with two or more"},
    {"", "simulated GPUs, whose streams are threads already)"},
    {"OMP_NUM_THREADS", "read by OpenBLAS when OPENBLAS_NUM_THREADS is unset"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: vdev [--version] [--help] <command> [<args>]\n\n"
               "vdev runs several models on several GPUs without them stepping on each other.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'vdev <command> --help' describes a command and its options.\n\n"
               "Environment (read at start-up; the README's \"Configuration\" has every value,\n"
               "and a malformed one is an error that names the variable):\n");
    for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++)
        fprintf(f, "  %-31s %s\n", env_vars[i].name, env_vars[i].what);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        if (argc > 2 && strcmp(cmd, "help") == 0) {
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    char *hv[] = {argv[2], (char *)"--help", NULL};
                    return commands[i].run(2, hv);
                }
            fprintf(stderr, "vdev: unknown command '%s' (see 'vdev --help')\n", argv[2]);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("vdev %d.%d.%d\n", VDEV_VERSION_MAJOR, VDEV_VERSION_MINOR, VDEV_VERSION_PATCH);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "vdev: unknown command '%s' (see 'vdev --help')\n", cmd);
    return 2;
}
