/* cmd_devices.c — `vdev devices`: the physical devices, where GPUs come from
 * (or why there are none, and how to simulate some, or that VDEV_VISIBLE_DEVICES
 * hides them all), and the logical devices
 * start-up makes of them, with each one's policy, limit (its ceiling),
 * floor, priority and memory in use (and, for a card whose logical devices'
 * ceilings sum to more than its budget, that budget and the floors kept
 * aside),
 * and why a GPU's limit is less than its free memory (the driver reserve,
 * worked out from the free memory before start-up and the limit after),
 * what serves collectives between the GPUs (NCCL or vdev's ring, and why),
 * and the thread plan (vdev_thread_info): the CPUs, the products' budget and
 * how the streams share it, the threads an elementwise kernel uses. */
#include "cli.h"
#include "coll/coll.h"
#include "config/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *policy_name(enum vdev_memory_policy p)
{
    return p == VDEV_POLICY_PREALLOCATE ? "preallocate" : "grow";
}

/* The thread plan in words: "Threads: ..." and one line on how it is used. */
static void print_threads(const struct vdev_thread_info *t)
{
    const char *b = getenv("OPENBLAS_NUM_THREADS"), *o = getenv("OMP_NUM_THREADS");
    printf("\nThreads: %d CPU%s", t->cpus, t->cpus == 1 ? "" : "s");
    if (t->cgroup_cpus)
        printf(" (cgroup quota %d)", t->cgroup_cpus);
    printf(", budget for products %d (OPENBLAS_NUM_THREADS%s%s, OMP_NUM_THREADS%s%s)%s\n",
           t->blas_budget, b ? "=" : " unset", b ? b : "", o ? "=" : " unset", o ? o : "",
           t->blas_budget > t->cpus ? ", capped at the CPUs" : "");
    if (t->streams == 1)
        printf("  1 stream runs products: each split over %d thread%s of vdev's pool "
               "(OpenBLAS itself on one)\n",
               t->blas_threads, t->blas_threads == 1 ? "" : "s");
    else
        printf("  %d streams run products: one thread each, at most %d at once\n", t->streams,
               t->concurrent_products);
    if (t->deterministic)
        printf("  determinism switch on: each product cut into blocks fixed by its shape, "
               "the same bits with any thread count\n");
    printf("  large elementwise kernels: %d thread%s per stream\n", t->kernel_threads,
           t->kernel_threads == 1 ? "" : "s");
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* Says where a GPU's limit comes from: its free memory less the reserve
 * TensorFlow leaves to the driver and libraries (MinSystemMemory), the
 * reserve TF_DEVICE_MIN_SYS_MEMORY_IN_MB sets, or a fraction of its total.
 * The reserve shown is free memory before start-up less the budget of each
 * card in use (its logical devices share it, one or several, split or not). */
static void explain_limits(const struct vdev_physical_device *phys, int n_phys,
                           const struct vdev_logical_device *logi,
                           const struct vdev_memory_limits *ml, int n_log)
{
    /* As start-up read them: a cluster file's value replaces the
     * environment's (and hides TF_GPU_MEMORY_FRACTION), and is named as
     * start-up's messages name it. */
    const char *min_sys = vdev_config_getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB");
    if (min_sys && !*min_sys)
        min_sys = NULL; /* empty: unset, as in TensorFlow */
    /* a fraction of 0 is none (start-up checked the text already) */
    const char *vd = vdev_config_getenv("VDEV_MEMORY_FRACTION");
    const char *tf = vdev_config_getenv("TF_GPU_MEMORY_FRACTION");
    const char *frac_var = vd && strtod(vd, NULL) > 0   ? "VDEV_MEMORY_FRACTION"
                           : tf && strtod(tf, NULL) > 0 ? "TF_GPU_MEMORY_FRACTION"
                                                        : NULL;
    if (frac_var && !min_sys) {
        char label[1200];
        printf("\nA GPU's limit is %s=%s of its total memory (without it, its free\n"
               "memory less the reserve TensorFlow leaves to the driver and libraries).\n",
               vdev_config_var_label(frac_var, label, sizeof label),
               vdev_config_getenv(frac_var));
        return;
    }
    char reserves[256] = "", b[32];
    uint64_t first = 0;
    int n_whole = 0, same = 1;
    for (int i = 0; i < n_log; i++) {
        if (logi[i].type != VDEV_DEVICE_GPU)
            continue;
        /* once per card: at its first logical device */
        int first_on_card = 1;
        for (int j = 0; j < i; j++)
            first_on_card &= !(logi[j].type == VDEV_DEVICE_GPU &&
                               logi[j].physical_index == logi[i].physical_index);
        const struct vdev_physical_device *p = NULL;
        for (int j = 0; j < n_phys; j++)
            if (phys[j].type == VDEV_DEVICE_GPU && phys[j].index == logi[i].physical_index)
                p = &phys[j];
        if (!first_on_card || !p || p->free_bytes < ml[i].card_budget_bytes)
            continue;
        uint64_t reserve = p->free_bytes - ml[i].card_budget_bytes;
        if (n_whole++ == 0)
            first = reserve;
        same &= reserve / 1024 == first / 1024;
        size_t len = strlen(reserves);
        snprintf(reserves + len, sizeof reserves - len, "%s%s on GPU %d", len ? ", " : "",
                 vdev_format_bytes(reserve, b, sizeof b), p->index);
    }
    if (min_sys) {
        /* as start-up read it (blanks around the number, -0 and 007 allowed) */
        long long mb = strtoll(min_sys, NULL, 10);
        printf("\nA GPU's limit is its free memory less the %lld MiB that\n"
               "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=%lld leaves to the driver and libraries.\n",
               mb, mb);
        return;
    }
    printf("\nA GPU's limit is its free memory less the reserve TensorFlow also leaves to the\n"
           "driver and libraries (its MinSystemMemory): 1536 MiB for compute capability 8.0\n"
           "and later (simulated GPUs report 8.0), 1050 MiB for 7.x, 500 MiB before, and\n"
           "225 MiB when less than 2 GiB is free");
    if (n_whole > 0 && same && first == 0)
        printf("; here none%s (a reserve not smaller than the free memory is not\n"
               "taken: the GPU keeps all of it)",
               n_whole > 1 ? " on each GPU" : "");
    else if (n_whole > 0 && same)
        printf("; here %s%s", vdev_format_bytes(first, b, sizeof b),
               n_whole > 1 ? " on each GPU" : "");
    else if (n_whole > 0)
        printf("; here %s", reserves);
    printf(".\nTF_DEVICE_MIN_SYS_MEMORY_IN_MB=N leaves N MiB instead.\n");
}

/* For each card whose logical devices' limits (ceilings) sum to more than
 * its budget, one line: the budget they share, the floors kept aside, and
 * that the rest goes first come, each up to its limit. */
static void print_shared(const struct vdev_logical_device *logi,
                         const struct vdev_memory_limits *ml, int n_log)
{
    char b1[32], b2[32];
    for (int i = 0; i < n_log; i++) {
        if (logi[i].type != VDEV_DEVICE_GPU)
            continue;
        int first = 1, n = 0;
        uint64_t ceilings = 0;
        for (int j = 0; j < n_log; j++)
            if (logi[j].type == VDEV_DEVICE_GPU &&
                logi[j].physical_index == logi[i].physical_index) {
                first &= j >= i;
                ceilings += ml[j].ceiling_bytes;
                n++;
            }
        if (!first || ceilings <= ml[i].card_budget_bytes)
            continue;
        printf("  /physical_device:GPU:%d: %d logical devices share a budget of %s; floors %s "
               "kept aside, the rest first come, each up to its LIMIT\n",
               logi[i].physical_index, n, vdev_format_bytes(ml[i].card_budget_bytes, b1, sizeof b1),
               vdev_format_bytes(ml[i].card_floors_bytes, b2, sizeof b2));
    }
}

static int fail(const char *what)
{
    fprintf(stderr, "vdev devices: %s%s%s\n", what, *what ? ": " : "", vdev_last_error());
    return 1;
}

int vdev_cmd_devices(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: vdev devices [--json]\n\n"
                   "Lists the physical devices (backend, model, total and free memory), says\n"
                   "where the GPUs come from or why there are none, then starts the runtime\n"
                   "with the configuration of the environment and lists the logical devices\n"
                   "(policy, limit: its ceiling, floor, priority, memory reserved and in use)\n"
                   "and the thread plan (how many threads products and elementwise kernels\n"
                   "use).\n\n"
                   "  --json   one JSON object: {\"gpu_backend\", \"no_gpu_reason\",\n"
                   "           \"physical\": [...], \"logical\": [...], \"collectives\",\n"
                   "           \"threads\": {...}}; no_gpu_reason is \"\" when there is a\n"
                   "           logical GPU, else why there is none (no GPU found, or\n"
                   "           VDEV_VISIBLE_DEVICES hiding every GPU)\n");
            return 0;
        } else {
            fprintf(stderr, "vdev devices: unknown option '%s' (see 'vdev devices --help')\n",
                    argv[i]);
            return 2;
        }
    }
    struct vdev_physical_device phys[130];
    int n_phys;
    if (vdev_list_physical_devices(phys, 130, &n_phys) != VDEV_OK)
        return fail("");
    const char *reason = vdev_gpu_absence_reason();
    char reason_copy[256];
    snprintf(reason_copy, sizeof reason_copy, "%s", reason);
    const char *gpu_backend = n_phys > 1 ? phys[1].backend : "none";
    /* Free memory before start-up, which the limits come from. */
    struct vdev_physical_device before[130];
    int n_before = n_phys < 130 ? n_phys : 130;
    memcpy(before, phys, (size_t)n_before * sizeof *before);

    struct vdev_logical_device logi[130];
    int n_log;
    if (vdev_list_logical_devices(logi, 130, &n_log) != VDEV_OK)
        return fail("start-up failed");
    struct vdev_memory_info mi[130];
    struct vdev_memory_limits ml[130];
    for (int i = 0; i < n_log && i < 130; i++)
        if (vdev_memory_info(logi[i].name, &mi[i]) != VDEV_OK ||
            vdev_memory_get_limits(logi[i].name, &ml[i]) != VDEV_OK)
            return fail(logi[i].name);
    /* Again after start-up, so FREE shows what preallocation took. */
    if (vdev_list_physical_devices(phys, 130, &n_phys) != VDEV_OK)
        return fail("");
    /* GPUs there but none made into a logical device: VDEV_VISIBLE_DEVICES (or a cluster
     * file's visible_devices, named as start-up names it) hides them all. */
    int n_log_gpus = 0;
    for (int i = 0; i < n_log && i < 130; i++)
        n_log_gpus += logi[i].type == VDEV_DEVICE_GPU;
    if (n_phys > 1 && n_log_gpus == 0) {
        char label[1200];
        const char *vis = vdev_config_getenv("VDEV_VISIBLE_DEVICES");
        if (vis)
            snprintf(reason_copy, sizeof reason_copy, "%s=\"%.64s\" hides every GPU",
                     vdev_config_var_label("VDEV_VISIBLE_DEVICES", label, sizeof label), vis);
        else
            snprintf(reason_copy, sizeof reason_copy, "no GPU is visible");
    }
    char coll[400] = "";
    if (n_phys > 1)
        vdev_coll_library_status(coll, sizeof coll);
    struct vdev_thread_info th;
    if (vdev_thread_info(&th) != VDEV_OK)
        return fail("the thread plan");

    if (json) {
        printf("{\"gpu_backend\": ");
        json_str(gpu_backend);
        printf(", \"no_gpu_reason\": ");
        json_str(reason_copy);
        printf(", \"physical\": [");
        for (int i = 0; i < n_phys; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(phys[i].name);
            printf(", \"backend\": ");
            json_str(phys[i].backend);
            printf(", \"model\": ");
            json_str(phys[i].model);
            printf(", \"total_bytes\": %llu, \"free_bytes\": %llu}",
                   (unsigned long long)phys[i].total_bytes, (unsigned long long)phys[i].free_bytes);
        }
        printf("], \"logical\": [");
        for (int i = 0; i < n_log; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(logi[i].name);
            printf(", \"physical_index\": %d, \"backend\": ", logi[i].physical_index);
            json_str(logi[i].backend);
            printf(", \"policy\": \"%s\", \"limit_bytes\": %llu, \"reserved_bytes\": %llu, "
                   "\"in_use_bytes\": %llu, \"floor_bytes\": %llu, \"priority\": \"%s\", "
                   "\"card_budget_bytes\": %llu}",
                   policy_name(logi[i].policy), (unsigned long long)logi[i].limit_bytes,
                   (unsigned long long)mi[i].bytes_reserved, (unsigned long long)mi[i].bytes_in_use,
                   (unsigned long long)ml[i].floor_bytes, vdev_priority_name(ml[i].priority),
                   (unsigned long long)ml[i].card_budget_bytes);
        }
        printf("], \"collectives\": ");
        json_str(coll);
        printf(", \"threads\": {\"cpus\": %d, \"cgroup_cpus\": %d, \"budget\": %d, "
               "\"streams\": %d, \"threads_per_product\": %d, \"concurrent_products\": %d, "
               "\"kernel_threads\": %d, \"deterministic\": %s}",
               th.cpus, th.cgroup_cpus, th.blas_budget, th.streams, th.blas_threads,
               th.concurrent_products, th.kernel_threads, th.deterministic ? "true" : "false");
        printf("}\n");
        return 0;
    }

    char b1[32], b2[32], b3[32], b4[32], sim[1200];
    /* In a cluster (mpirun, a cluster file, TF_CONFIG), which task's devices
     * these are: every process prints its own table. */
    struct vdev_cluster_task task;
    if (vdev_cluster_task(&task) == VDEV_OK && strcmp(task.type, "localhost") != 0)
        printf("Task: %s (task %d of the %d %s tasks)\n", task.name, task.index,
               !strcmp(task.type, "chief") ? task.num_chief
               : !strcmp(task.type, "ps")  ? task.num_ps
                                           : task.num_workers,
               task.type);
    /* VDEV_SIM_GPUS, or the cluster file's sim_gpus that replaced it */
    vdev_config_var_label("VDEV_SIM_GPUS", sim, sizeof sim);
    if (n_phys > 1 && strcmp(gpu_backend, "sim") == 0)
        printf("GPUs: %d from the sim backend (simulated GPUs from %s)\n", n_phys - 1, sim);
    else if (n_phys > 1)
        printf("GPUs: %d from the %s backend\n", n_phys - 1, gpu_backend);
    if (n_phys > 1 && n_log_gpus == 0)
        printf("No logical GPU: %s; ops run on the CPU.\n", reason_copy);
    else if (n_phys <= 1)
        printf("GPUs: none (%s); ops run on the CPU.\n"
               "Simulated GPUs need no hardware: VDEV_SIM_GPUS=3x16GiB vdev devices\n",
               reason_copy);
    printf("\nPhysical devices\n");
    printf("  %-24s %-7s %-28s %12s %12s\n", "NAME", "BACKEND", "MODEL", "TOTAL", "FREE");
    for (int i = 0; i < n_phys; i++)
        printf("  %-24s %-7s %-28.28s %12s %12s\n", phys[i].name, phys[i].backend, phys[i].model,
               vdev_format_bytes(phys[i].total_bytes, b1, sizeof b1),
               vdev_format_bytes(phys[i].free_bytes, b2, sizeof b2));
    printf("\nLogical devices\n");
    printf("  %-16s %-10s %-7s %-12s %12s %12s %-8s %12s %12s\n", "NAME", "PHYSICAL", "BACKEND",
           "POLICY", "LIMIT", "FLOOR", "PRIORITY", "RESERVED", "IN USE");
    for (int i = 0; i < n_log; i++) {
        char phys_name[32];
        snprintf(phys_name, sizeof phys_name, "%s:%d",
                 logi[i].type == VDEV_DEVICE_GPU ? "GPU" : "CPU", logi[i].physical_index);
        printf("  %-16s %-10s %-7s %-12s %12s %12s %-8s %12s %12s\n", logi[i].name, phys_name,
               logi[i].backend, policy_name(logi[i].policy),
               vdev_format_bytes(logi[i].limit_bytes, b1, sizeof b1),
               vdev_format_bytes(ml[i].floor_bytes, b2, sizeof b2),
               vdev_priority_name(ml[i].priority),
               vdev_format_bytes(mi[i].bytes_reserved, b3, sizeof b3),
               vdev_format_bytes(mi[i].bytes_in_use, b4, sizeof b4));
    }
    print_shared(logi, ml, n_log < 130 ? n_log : 130);
    print_threads(&th);
    if (n_phys > 1) {
        printf("\nCollectives: %s\n", coll);
        if (n_log_gpus)
            explain_limits(before, n_before, logi, ml, n_log < 130 ? n_log : 130);
    }
    return 0;
}
