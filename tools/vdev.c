/* vdev.c — the vdev command: one binary with subcommands.
 *
 *   vdev devices [--json]        physical and logical devices
 *   vdev replay [--json] TRACE   replay an allocation trace against the allocator
 *   vdev fit --card C TRACE...   will these models fit this card (replayed together)
 *   vdev plot [--placement] TRACE -o OUT.svg   draw a profiler trace
 *   vdev demo [...]              the main job (see cmd_demo.c)
 *   vdev top [--url U] [--once]  live memory and op rates from a metrics endpoint
 *
 * Options that take a value are written "--name VALUE" or "--name=VALUE"
 * (split here, before the command reads them: expand_equals()).
 *
 * Every subcommand prints one line "vdev <cmd>: <error>" on stderr and exits
 * non-zero on bad input: 2 for usage errors, 1 for everything else. Standard
 * output is checked here, once, for every command: when what it printed
 * could not be written (a full disk, a closed pipe), one line
 * "vdev <cmd>: write error on standard output: <why>" and exit status 1. */
#include "cli.h"
#include "config/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct vdev_cli_command commands[] = {
    {"devices", "list physical and logical devices, memory and policies", vdev_cmd_devices,
     "--json --help"},
    {"replay", "replay an allocation trace and measure the allocator", vdev_cmd_replay,
     "--json --quiet --repeats= --help"},
    {"fit", "will these models fit this card: replay their traces together, before they run",
     vdev_cmd_fit, "--json --no-search --preallocate --card= --split= --help"},
    {"top", "live view of memory, ops and copies per device from a metrics endpoint",
     vdev_cmd_top, "--once --url= --interval= --help"},
    {"plot", "draw a trace (VDEV_TRACE_FILE) as SVG: memory over time, ops per device",
     vdev_cmd_plot, "--placement --memory --output= --help"},
#ifdef VDEV_HAVE_DEMO
    {"demo", "train three chained models on three GPUs (the main job)", vdev_cmd_demo,
     "--tf-placement --split --priority --mirrored --report= --epochs= --steps= --batch= "
     "--seed= --log-placement --vdev-placement --help"},
#endif
};

static void usage(FILE *f)
{
    fprintf(f, "usage: vdev [--version] [--help] <command> [<args>]\n\n"
               "vdev runs several models on several GPUs without them stepping on each other.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'vdev <command> --help' describes a command and its options; an option that\n"
               "takes a value is written --name VALUE or --name=VALUE.\n\n"
               "Environment (the README's \"Configuration\" has every value). Read at start-up,\n"
               "a malformed value is an error that names the variable, except:\n"
               "VDEV_MPI_TIMEOUT, VDEV_TORCH_DEVICES and NCCL_RUNTIME_CONNECT are read and\n"
               "checked only when used; a malformed OPENBLAS_NUM_THREADS or OMP_NUM_THREADS\n"
               "is ignored with a warning; VDEV_LIBRARY is read by the Python package:\n");
    /* The library's own table of the variables it reads (src/config/envvars.c);
     * tests/cli_devices.sh checks that each getenv() of src/ and tools/ is in it. */
    int n;
    const struct vdev_envvar *env = vdev_config_envvars(&n);
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-31s %s\n  %-31s   values: %s\n", env[i].name, env[i].description, "",
                env[i].values);
}

/* The reason of the first write error on standard output (-1: unknown), or 0. */
static int stdout_errno;

int vdev_cli_write_error(FILE *f)
{
    errno = 0;
    if (fflush(f) == 0 && !ferror(f))
        return 0;
    int e = errno;
    if (!e) {
        clearerr(f);
        errno = 0;
        if (fputc('\n', f) == EOF || fflush(f) != 0)
            e = errno;
    }
    return e ? e : -1;
}

int vdev_cli_flush(void)
{
    int e = vdev_cli_write_error(stdout);
    if (e && !stdout_errno)
        stdout_errno = e;
    return e ? -1 : 0;
}

/* How `name` (the part of "--name=value" before '=', n bytes) appears in
 * the command's option list: 2 takes a value, 1 a flag, 0 not known. */
static int option_kind(const char *list, const char *name, size_t n)
{
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, " ");
        int value = len > 0 && p[len - 1] == '=';
        if (len - (size_t)value == n && !strncmp(p, name, n))
            return value ? 2 : 1;
        p += len;
        p += *p == ' ';
    }
    return 0;
}

/* Splits each "--name=value" of argv[1..] whose --name takes a value into
 * two arguments, in a new array (*out, to free; argv itself is kept). A
 * flag given a value ("--json=1") is a usage error (-1, reported here); an
 * unknown "--name=value" is left whole for the command to refuse by its
 * own words. Returns the new argc, or -1. */
static int expand_equals(const struct vdev_cli_command *c, int argc, char **argv, char ***out)
{
    char **v = calloc((size_t)argc * 2 + 1, sizeof *v);
    if (!v) {
        fprintf(stderr, "vdev %s: out of host memory\n", c->name);
        return -1;
    }
    int n = 0;
    v[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        char *a = argv[i], *eq = strchr(a, '=');
        int kind = a[0] == '-' && a[1] == '-' && eq ? option_kind(c->options, a, (size_t)(eq - a))
                                                    : 0;
        if (kind == 1) {
            fprintf(stderr, "vdev %s: %.*s takes no value ('%s') (see 'vdev %s --help')\n",
                    c->name, (int)(eq - a), a, a, c->name);
            free(v);
            return -1;
        }
        if (kind == 2) {
            *eq = '\0'; /* argv's strings are the process's to change */
            v[n++] = a;
            v[n++] = eq + 1;
        } else {
            v[n++] = a;
        }
    }
    v[n] = NULL;
    *out = v;
    return n;
}

/* Runs the command line; returns the exit status. *who is the name its
 * errors go under ("vdev" or "vdev <cmd>"). */
static int dispatch(int argc, char **argv, char *who, size_t cap)
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
                    snprintf(who, cap, "vdev %s", commands[i].name);
                    return commands[i].run(2, hv);
                }
            fprintf(stderr, "vdev: unknown command '%s' (see 'vdev --help')\n", argv[2]);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        if (argc > 2) {
            fprintf(stderr, "vdev: --version takes no argument, not '%s' (see 'vdev --help')\n",
                    argv[2]);
            return 2;
        }
        printf("vdev %d.%d.%d\n", VDEV_VERSION_MAJOR, VDEV_VERSION_MINOR, VDEV_VERSION_PATCH);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) {
            snprintf(who, cap, "vdev %s", commands[i].name);
            char **v;
            int n = expand_equals(&commands[i], argc - 1, argv + 1, &v);
            if (n < 0)
                return 2;
            int rc = commands[i].run(n, v);
            free(v);
            return rc;
        }
    fprintf(stderr, "vdev: unknown command '%s' (see 'vdev --help')\n", cmd);
    return 2;
}

int main(int argc, char **argv)
{
    char who[64] = "vdev";
    int rc = dispatch(argc, argv, who, sizeof who);
    /* What the command printed must have reached standard output: flush it,
     * and say so when it did not (exit status 1). (Not closed: the library's
     * exit handlers may still print, on stderr.) */
    int bad = vdev_cli_flush() != 0, e = stdout_errno;
    if (bad) {
        if (e > 0)
            fprintf(stderr, "%s: write error on standard output: %s\n", who, strerror(e));
        else
            fprintf(stderr, "%s: write error on standard output\n", who);
        return rc ? rc : 1;
    }
    return rc;
}
