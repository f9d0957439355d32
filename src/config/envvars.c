/* envvars.c — the one table of every environment variable vdev reads, and the
 * start-up warning about variables that look like them.
 *
 * A misspelt variable is worse than a malformed one: getenv() never sees it,
 * so the setting silently does not apply. At start-up every VDEV_* variable
 * in the environment that is not in the table, and every TF_* variable within
 * a small edit distance of a TF_* variable in the table (TensorFlow has many
 * of its own that vdev has no business with), gets one warning on stderr
 * naming the closest variable vdev reads. The distance is Levenshtein's, over
 * names compared case-insensitively (getenv is case-sensitive, so
 * "VDEV_memory_growth" is unread and its closest name is found). TensorFlow's
 * own variables for its GPU allocator get a warning too, saying what vdev has
 * instead (TF_UNREAD). */
#define _GNU_SOURCE
#include "config/internal.h"

#include <ctype.h>
#include <string.h>

extern char **environ;

/* Every variable vdev reads, with what it takes and what it does. Keep in
 * step with the README's table of environment variables. */
static const struct vdev_envvar TABLE[] = {
    {"VDEV_SIM_GPUS", "3x16GiB, or 2x80GiB,1x24GiB, or 16GiB",
     "use that many simulated GPUs of those sizes instead of CUDA GPUs"},
    {"VDEV_VISIBLE_DEVICES", "0,2; empty or -1 hides every GPU",
     "the physical GPUs to use, numbered in the order listed (as CUDA_VISIBLE_DEVICES)"},
    {"VDEV_MEMORY_GROWTH", "true/false (any case), 1/0, or per GPU 0:true,1:false",
     "memory growth (on, the default) or preallocation (off)"},
    {"TF_FORCE_GPU_ALLOW_GROWTH", "true/false (any case), 1/0",
     "TensorFlow's name for memory growth on every GPU; must agree with VDEV_MEMORY_GROWTH"},
    {"VDEV_MEMORY_FRACTION", "a decimal in [0, 1], e.g. 0.5 (0: none)",
     "cap every GPU at that fraction of its total memory"},
    {"TF_GPU_MEMORY_FRACTION", "a decimal in [0, 1], e.g. 0.5 (0: none)",
     "the name popular guides use for VDEV_MEMORY_FRACTION; both set: they must agree"},
    {"VDEV_LOGICAL_DEVICES", "0:4GiB,2GiB;1:3GiB;cpu:4, or 0:4GiB@critical,2GiB..6GiB,..@low",
     "logical devices per physical GPU (limits of 1 MiB or more, or FLOOR..CEILING with an "
     "optional @low/normal/high/critical) and logical CPUs"},
    {"TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "whole MiB >= 0",
     "memory left to the driver on each GPU, instead of TensorFlow's default reserve"},
    {"VDEV_PLACEMENT", "copy (default), strict, tf; any case",
     "an input on another device is copied / is an error / unscoped ops go to the default "
     "device"},
    {"VDEV_SOFT_DEVICE_PLACEMENT", "1/0, true/false",
     "a device scope naming a device that does not exist runs its ops on the default device, "
     "with a warning, instead of failing"},
    {"VDEV_DETERMINISTIC", "1/0, true/false",
     "every op and collective gives the same bits run to run (enable_op_determinism)"},
    {"VDEV_LOG_DEVICE_PLACEMENT", "1/0, true/false",
     "print 'Executing op X in device Y' for every op"},
    {"VDEV_PLACEMENT_REPORT", "1/0, true/false",
     "print the placement summary and audit at vdev_shutdown() or exit"},
    {"VDEV_OOM_REPORT", "1/0, true/false",
     "after an out-of-memory failure, print the allocator's state"},
    {"VDEV_ALLOC_TRACE", "a file path; %p pid, %r MPI rank, %% a %",
     "write every allocation and free to that file"},
    {"VDEV_TRACE_FILE", "a file path; %p pid, %r MPI rank, %% a %",
     "write a profiler trace (Chrome trace event format), one file per process"},
    {"VDEV_METRICS_ADDR", "127.0.0.1:9400, [::1]:9400, localhost:9400",
     "serve Prometheus metrics on GET /metrics at that address"},
    {"VDEV_CUDA_PLUGIN", "a file path (empty: as unset)", "where to load the CUDA plugin from"},
    {"VDEV_NCCL_LIBRARY", "a file path",
     "the NCCL library the CUDA plugin loads (default: libnccl.so.2 from the loader's path, "
     "then the CUDA toolkit's library folder)"},
    {"NCCL_RUNTIME_CONNECT", "NCCL's own: 0 or 1",
     "set to 0 by the CUDA plugin when it opens, unless already set, so NCCL's buffers are "
     "allocated (and counted in the card's budget) when a communicator opens"},
    {"VDEV_CLUSTER_CONFIG", "a file path (JSON)",
     "the cluster file: each task's device configuration and the cluster's jobs (chief, worker, "
     "ps)"},
    {"TF_CONFIG", "{\"cluster\": {...}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
     "TensorFlow's cluster and this process's task, for the roles"},
    {"VDEV_MPI_TIMEOUT", "seconds from 0.1 to 1000000000, e.g. 30 or 2.5 (default 300)",
     "how long a process waits for another in a collective or for a parameter server"},
    {"VDEV_MPI_PLUGIN", "a file path (empty: as unset)", "where to load the MPI plugin from"},
    {"VDEV_TORCH_DEVICES", "0:GPU:1,1:GPU:2",
     "libvdev-torch-alloc.so: the vdev logical device of each PyTorch CUDA device index"},
    {"VDEV_LIBRARY", "a file path",
     "the Python package: the libvdev.so to load instead of the one installed beside it"},
    {"OPENBLAS_NUM_THREADS", "a whole number >= 1",
     "the threads for matrix products: a budget divided among the streams that run them at "
     "once, at most the CPUs (unset: OMP_NUM_THREADS, else the CPUs); vdev splits a product "
     "over its own threads, OpenBLAS runs on one"},
    {"OMP_NUM_THREADS", "a whole number >= 1",
     "the products' budget when OPENBLAS_NUM_THREADS is unset, and the size of vdev's pool for "
     "large elementwise kernels"},
};

const struct vdev_envvar *vdev_config_envvars(int *n)
{
    if (n)
        *n = (int)VDEV_ARRAY_LEN(TABLE);
    return TABLE;
}

/* Levenshtein distance, case-insensitive, of names up to 127 characters
 * (longer ones are far from every name in the table anyway). */
static int distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 127 || lb > 127)
        return 1000;
    int row[128];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The table's name closest to `name` among those with the same prefix
 * ("VDEV_" or "TF_"), and its distance; the first in the table on a tie. */
static const char *closest(const char *name, const char *prefix, int *dist)
{
    const char *best = NULL;
    *dist = 1000;
    for (size_t i = 0; i < VDEV_ARRAY_LEN(TABLE); i++) {
        if (strncmp(TABLE[i].name, prefix, strlen(prefix)) != 0)
            continue;
        int d = distance(name, TABLE[i].name);
        if (d < *dist) {
            *dist = d;
            best = TABLE[i].name;
        }
    }
    return best;
}

static int known(const char *name)
{
    for (size_t i = 0; i < VDEV_ARRAY_LEN(TABLE); i++)
        if (strcmp(TABLE[i].name, name) == 0)
            return 1;
    return 0;
}

/* A TF_* variable this close to one vdev reads is taken for a typo of it. */
#define TF_TYPO_DISTANCE 2

/* TensorFlow's variables for its GPU allocator: they are about the memory vdev
 * manages, so one set in the belief that it applies is the trap the typo
 * warning closes; vdev does not read them, and says what it has instead. */
static const struct {
    const char *name, *instead;
} TF_UNREAD[] = {
    {"TF_GPU_ALLOCATOR", "vdev has one allocator of its own"},
    {"TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC", "vdev has one allocator of its own"},
    {"TF_ENABLE_GPU_GARBAGE_COLLECTION",
     "vdev always gives empty regions back before an out-of-memory error, and "
     "vdev_memory_release_cached() on request"},
    {"TF_GPU_HOST_MEM_LIMIT_IN_MB", "vdev keeps no pool of pinned host memory to limit"},
    {"TF_DETERMINISTIC_ALLOCATOR",
     "vdev's allocator places the same requests the same way on every run"},
    {"TF_BFC_MEMORY_DUMP",
     "VDEV_OOM_REPORT=1 prints the allocator's state after an out-of-memory error, and "
     "VDEV_ALLOC_TRACE records every allocation"},
};

static const char *tf_unread(const char *name)
{
    for (size_t i = 0; i < VDEV_ARRAY_LEN(TF_UNREAD); i++)
        if (strcmp(TF_UNREAD[i].name, name) == 0)
            return TF_UNREAD[i].instead;
    return NULL;
}

void vdev_config_warn_unknown_env(void)
{
    for (char **e = environ; e && *e; e++) {
        char name[256];
        size_t len = strcspn(*e, "=");
        if (len >= sizeof name)
            continue;
        memcpy(name, *e, len);
        name[len] = '\0';
        int vdev = vdev_strncasecmp(name, "VDEV_", 5) == 0;
        int tf = vdev_strncasecmp(name, "TF_", 3) == 0;
        if ((!vdev && !tf) || known(name))
            continue;
        const char *instead = tf ? tf_unread(name) : NULL;
        if (instead) {
            vdev_log_warning("%s is set but vdev does not read it (TensorFlow's allocator "
                             "setting): %s",
                             name, instead);
            continue;
        }
        int d;
        const char *near = closest(name, vdev ? "VDEV_" : "TF_", &d);
        if (!near || (tf && d > TF_TYPO_DISTANCE))
            continue;
        vdev_log_warning("%s is set but vdev reads no such variable, so it is ignored; did you "
                         "mean %s?",
                         name, near);
    }
}
