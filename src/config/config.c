/* config.c — discovery of physical devices and the configuration calls.
 *
 * All state lives in one struct guarded by one mutex (internal.h). Discovery
 * happens once, on the first call that needs the physical devices; the
 * configuration calls only record what the user asked for, and the getters
 * report it; start-up (plan.c) reads the environment for whatever code left
 * unset, checks every rule, and freezes the result.
 *
 * Rules kept from TensorFlow: configuration is frozen at start-up
 * ("Physical devices cannot be modified after being initialized"), a call
 * that repeats the value in force is a no-op even then, visible GPUs are
 * numbered in physical order whatever order set_visible_devices lists them
 * in, a logical split of the CPU takes no memory limits, the driver reserve
 * (MinSystemMemory). Rules lifted: growth may differ between GPUs, growth
 * combines with logical devices, a fraction combines with logical devices (it
 * becomes their budget), limits beyond a card's budget fail at start-up, and
 * a malformed environment variable is an error rather than a logged warning.
 */
#define _GNU_SOURCE
#include "config/internal.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define MIB (1ull << 20)

static struct vdev_config_state S = {.lock = PTHREAD_MUTEX_INITIALIZER};

struct vdev_config_state *vdev_config_state(void) { return &S; }

static const char *const ALREADY = "Physical devices cannot be modified after being initialized";

/* ---- a child forked from a process whose runtime ran ---- */

static _Atomic long forked_from; /* that process (0: not such a child) */

void vdev_config_forked(long parent) { atomic_store(&forked_from, parent); }

enum vdev_status vdev_config_forked_error(const char *fn)
{
    return vdev_error(VDEV_ERR_UNSUPPORTED,
                      "%s: vdev was started in process %ld, from which this process was forked; "
                      "a forked child can neither use that runtime (its device streams and "
                      "worker threads stayed in the parent) nor start another: start vdev after "
                      "fork() in each process that uses it, or start children with spawn "
                      "(Python: multiprocessing.get_context('spawn'))",
                      fn, atomic_load(&forked_from));
}

/* The configuration such a child inherited is frozen for good: a change is
 * refused as its start-up is, not as if it could start later. */
static int forked(void) { return atomic_load(&forked_from) != 0; }

/* ---- discovery ---- */

static void reset_gpu_cfg(void)
{
    for (int i = 0; i < VDEV_MAX_GPUS; i++) {
        S.gpus[i].growth = -1;
        S.gpus[i].n_logical = 0;
        S.gpus[i].fraction = 0;
        S.gpus[i].split_set = 0;
        S.gpus[i].fraction_set = 0;
    }
    S.visible_set = 0;
    S.n_visible = 0;
    S.n_cpus = 0;
    S.cpus_set = 0;
}

static enum vdev_status discover_locked(void)
{
    if (S.discovered)
        return VDEV_OK;
    struct vdev_backend cpu = {0}, gpu = {0};
    /* the cluster file first: it may give this process its simulated GPUs */
    enum vdev_status st = vdev_cluster_load();
    if (st != VDEV_OK)
        return st;
    if ((st = vdev_backend_cpu_new(&cpu)) != VDEV_OK)
        return st;
    char reason[256] = "", label[1200];
    const char *sim = vdev_config_getenv("VDEV_SIM_GPUS");
    if (sim) {
        st = vdev_backend_sim_new(sim, vdev_config_var_label("VDEV_SIM_GPUS", label, sizeof label),
                                  &gpu);
        if (st != VDEV_OK) {
            vdev_backend_destroy(&cpu);
            return st;
        }
    } else {
        st = vdev_backend_cuda_new(&gpu, reason, sizeof reason);
        if (st != VDEV_OK) {
            memset(&gpu, 0, sizeof gpu);
            vdev_clear_error();
        } else if (vdev_backend_n_devices(&gpu) == 0) {
            snprintf(reason, sizeof reason, "CUDA plugin: no CUDA device found");
            vdev_backend_destroy(&gpu);
        }
    }
    int n = gpu.ops ? vdev_backend_n_devices(&gpu) : 0;
    if (n > VDEV_MAX_GPUS)
        n = VDEV_MAX_GPUS;
    S.cpu = cpu;
    S.gpu = gpu;
    S.n_gpus = n;
    vdev_strlcpy(S.absence, n ? "" : reason, sizeof S.absence);
    if (!n && !S.absence[0])
        vdev_strlcpy(S.absence, "no GPU backend found", sizeof S.absence);
    reset_gpu_cfg();
    S.discovered = 1;
    return VDEV_OK;
}

enum vdev_status vdev_config_discover(void)
{
    pthread_mutex_lock(&S.lock);
    enum vdev_status st = discover_locked();
    pthread_mutex_unlock(&S.lock);
    return st;
}

int vdev_config_n_gpus(void) { return S.n_gpus; }
struct vdev_backend *vdev_config_gpu_backend(void) { return S.gpu.ops ? &S.gpu : NULL; }
struct vdev_backend *vdev_config_cpu_backend(void) { return &S.cpu; }
int vdev_config_frozen(void) { return S.frozen; }

void vdev_config_reset(void)
{
    pthread_mutex_lock(&S.lock);
    if (S.discovered) {
        vdev_backend_destroy(&S.gpu);
        vdev_backend_destroy(&S.cpu);
    }
    S.discovered = 0;
    S.frozen = 0;
    S.n_gpus = 0;
    S.absence[0] = '\0';
    reset_gpu_cfg();
    vdev_cluster_forget();
    pthread_mutex_unlock(&S.lock);
}

VDEV_API const char *vdev_gpu_absence_reason(void)
{
    static _Thread_local char copy[256];
    if (vdev_config_discover() != VDEV_OK)
        return vdev_last_error();
    pthread_mutex_lock(&S.lock);
    vdev_strlcpy(copy, S.absence, sizeof copy);
    pthread_mutex_unlock(&S.lock);
    return copy;
}

VDEV_API enum vdev_status vdev_list_physical_devices(struct vdev_physical_device *out, int cap,
                                                     int *n)
{
    if (!n || cap < 0 || (cap > 0 && !out))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_list_physical_devices: bad arguments");
    enum vdev_status st = vdev_config_discover();
    if (st != VDEV_OK)
        return st;
    int total = 1 + S.n_gpus;
    for (int i = 0; i < total && i < cap; i++) {
        struct vdev_physical_device *d = &out[i];
        memset(d, 0, sizeof *d);
        struct vdev_backend *b = i == 0 ? &S.cpu : &S.gpu;
        int dev = i == 0 ? 0 : i - 1;
        struct vdev_backend_device_info info;
        st = vdev_backend_device_info(b, dev, &info);
        if (st != VDEV_OK)
            return st;
        d->type = i == 0 ? VDEV_DEVICE_CPU : VDEV_DEVICE_GPU;
        d->index = dev;
        snprintf(d->name, sizeof d->name, "/physical_device:%s:%d", i == 0 ? "CPU" : "GPU", dev);
        vdev_strlcpy(d->model, info.model, sizeof d->model);
        vdev_strlcpy(d->backend, b->ops->name, sizeof d->backend);
        d->cc_major = info.cc_major;
        d->cc_minor = info.cc_minor;
        st = vdev_backend_mem_info(b, dev, &d->free_bytes, &d->total_bytes);
        if (st != VDEV_OK)
            return st;
    }
    *n = total;
    return VDEV_OK;
}

/* ---- configuration calls ---- */

/* Resolves a physical device name to a GPU index, with TensorFlow's errors.
 * A logical name is refused: /device:GPU:N is the Nth logical GPU, which is
 * physical GPU N only without a split or a reordering of visible GPUs, and
 * TensorFlow's configuration calls take physical devices only. */
static enum vdev_status physical_gpu(const char *name, int *gpu, int *is_cpu)
{
    struct vdev_device_name dn;
    if (!name)
        return vdev_error(VDEV_ERR_INVALID_ARG, "physical device name is NULL");
    if (vdev_parse_device_name(name, &dn) != VDEV_OK || !dn.has_index)
        return vdev_error(VDEV_ERR_NOT_FOUND, "Unrecognized device: %s", name);
    if (!dn.physical && dn.logical_form)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "'%s' is a logical device; configuration takes a physical device such "
                          "as /physical_device:%s:%d",
                          name, dn.type == VDEV_DEVICE_CPU ? "CPU" : "GPU", dn.index);
    if (dn.type == VDEV_DEVICE_CPU) {
        if (dn.index != 0)
            return vdev_error(VDEV_ERR_NOT_FOUND, "Unrecognized device: %s", name);
        *is_cpu = 1;
        *gpu = -1;
        return VDEV_OK;
    }
    if (dn.index >= S.n_gpus)
        return vdev_error(VDEV_ERR_NOT_FOUND, "Unrecognized device: %s (there %s %d GPU%s)",
                          name, S.n_gpus == 1 ? "is" : "are", S.n_gpus, S.n_gpus == 1 ? "" : "s");
    *is_cpu = 0;
    *gpu = dn.index;
    return VDEV_OK;
}

/* Takes the lock and discovers; on success the caller holds the lock. */
static enum vdev_status begin(void)
{
    pthread_mutex_lock(&S.lock);
    enum vdev_status st = discover_locked();
    if (st != VDEV_OK)
        pthread_mutex_unlock(&S.lock);
    return st;
}

static enum vdev_status end(enum vdev_status st)
{
    pthread_mutex_unlock(&S.lock);
    return st;
}

/* "1,0,1" into buf, for messages. */
static void format_list(const int *idx, int n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len + 16 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? "," : "", idx[i]);
}

VDEV_API enum vdev_status vdev_config_set_visible_devices(const int *idx, int n)
{
    if (n < 0 || (n > 0 && !idx))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_config_set_visible_devices: bad arguments");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    for (int i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= S.n_gpus)
            return end(vdev_error(VDEV_ERR_NOT_FOUND,
                                  "Unrecognized device: /physical_device:GPU:%d", idx[i]));
        for (int j = 0; j < i; j++)
            if (idx[j] == idx[i]) {
                char list[256];
                format_list(idx, n, list, sizeof list);
                return end(vdev_error(VDEV_ERR_INVALID_ARG,
                                      "the visible devices contained a duplicate entry: %s "
                                      "(GPU %d)",
                                      list, idx[i]));
            }
    }
    if (S.frozen && forked())
        return end(vdev_config_forked_error("vdev_config_set_visible_devices"));
    if (S.frozen) {
        /* Compared as listed, as TensorFlow compares its list. */
        int same = S.eff_n_visible == n;
        for (int i = 0; same && i < n; i++)
            same = S.eff_visible[i] == idx[i];
        if (same)
            return end(VDEV_OK);
        return end(vdev_error(VDEV_ERR_ALREADY_INITIALIZED,
                              "Visible devices cannot be modified after being initialized"));
    }
    S.visible_set = 1;
    S.n_visible = n;
    for (int i = 0; i < n; i++)
        S.visible[i] = idx[i];
    return end(VDEV_OK);
}

VDEV_API enum vdev_status vdev_config_set_memory_growth(const char *name, bool enable)
{
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    int gpu, is_cpu;
    if ((st = physical_gpu(name, &gpu, &is_cpu)) != VDEV_OK)
        return end(st);
    if (is_cpu)
        return end(vdev_error(VDEV_ERR_INVALID_ARG,
                              "Cannot set memory growth on non-GPU and non-Pluggable devices"));
    if (S.frozen && forked())
        return end(vdev_config_forked_error("vdev_config_set_memory_growth"));
    if (S.frozen) {
        /* As TensorFlow: repeating what code set is a no-op; anything else,
         * growth never set included (whatever is in force), is refused. */
        if (S.gpus[gpu].growth == (int)enable)
            return end(VDEV_OK);
        return end(vdev_error(VDEV_ERR_ALREADY_INITIALIZED, "%s", ALREADY));
    }
    S.gpus[gpu].growth = enable;
    return end(VDEV_OK);
}

VDEV_API enum vdev_status vdev_config_get_memory_growth(const char *name, int *out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_config_get_memory_growth: out is NULL");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    int gpu, is_cpu;
    if ((st = physical_gpu(name, &gpu, &is_cpu)) != VDEV_OK)
        return end(st);
    if (is_cpu)
        return end(vdev_error(VDEV_ERR_INVALID_ARG,
                              "Cannot get memory growth on non-GPU and non-Pluggable devices"));
    *out = S.gpus[gpu].growth;
    return end(VDEV_OK);
}

/* The CPU split into n logical CPUs: no limits, as in TensorFlow. */
static enum vdev_status set_logical_cpus(const char *name, const uint64_t *limits, int n)
{
    for (int i = 0; limits && i < n; i++)
        if (limits[i] != 0)
            return vdev_error(VDEV_ERR_INVALID_ARG,
                              "Setting memory limit on CPU virtual devices is currently not "
                              "supported (logical device %d of %s has a limit of %llu bytes; "
                              "pass NULL or zeros)",
                              i, name, (unsigned long long)limits[i]);
    if (n > VDEV_MAX_LOGICAL_CPUS)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%d logical devices requested on %s; at most %d CPUs", n, name,
                          VDEV_MAX_LOGICAL_CPUS);
    int want = n ? n : 1;
    if (S.frozen && forked())
        return vdev_config_forked_error("vdev_config_set_logical_devices");
    if (S.frozen) {
        if (S.eff_n_cpus == want)
            return VDEV_OK;
        return vdev_error(VDEV_ERR_ALREADY_INITIALIZED,
                          "Virtual devices cannot be modified after being initialized");
    }
    S.n_cpus = n;
    S.cpus_set = 1;
    return VDEV_OK;
}

/* Checks one size of logical device i of `name` ("limit", "floor" or
 * "ceiling"): at least 1 MiB (TensorFlow takes MiB: 4096 meant as 4 GiB is
 * 4 KiB here); a floor or ceiling may be 0 (none, the card's budget). */
static enum vdev_status check_size(const char *name, int i, const char *what, uint64_t bytes)
{
    if (bytes == 0 && what[0] == 'l')
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "logical device %d of %s has a memory limit of 0 bytes: a limit is at "
                          "least 1 MiB",
                          i, name);
    if (bytes == 0 || bytes >= MIB)
        return VDEV_OK;
    return vdev_error(VDEV_ERR_INVALID_ARG,
                      "logical device %d of %s has a %s of %llu bytes, less than 1 MiB: %ss are "
                      "in bytes (did you mean %lluMiB, i.e. %lluull << 20?)",
                      i, name, what, (unsigned long long)bytes, what, (unsigned long long)bytes,
                      (unsigned long long)bytes);
}

/* Records a GPU's split (checked), or compares it with what is in force
 * after start-up. Lock held. */
static enum vdev_status set_gpu_split(const char *name, int gpu, int n, const uint64_t *floors,
                                      const uint64_t *ceilings, const enum vdev_priority *prios)
{
    if (n > VDEV_MAX_LOGICAL_PER_GPU)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%d logical devices requested on %s; at most %d per GPU", n, name,
                          VDEV_MAX_LOGICAL_PER_GPU);
    for (int i = 0; i < n; i++) {
        if ((unsigned)prios[i] >= VDEV_PRIORITY_COUNT)
            return vdev_error(VDEV_ERR_INVALID_ARG,
                              "logical device %d of %s has priority %d (low, normal, high or "
                              "critical)",
                              i, name, (int)prios[i]);
        if (ceilings[i] && floors[i] > ceilings[i]) {
            char b1[32], b2[32];
            return vdev_error(VDEV_ERR_INVALID_ARG,
                              "logical device %d of %s has a floor of %s above its ceiling of %s",
                              i, name, vdev_format_bytes(floors[i], b1, sizeof b1),
                              vdev_format_bytes(ceilings[i], b2, sizeof b2));
        }
    }
    enum vdev_priority res[VDEV_MAX_LOGICAL_PER_GPU];
    for (int i = 0; i < n; i++)
        res[i] = prios[i] == VDEV_PRIORITY_DEFAULT ? VDEV_PRIORITY_NORMAL : prios[i];
    struct vdev_gpu_cfg *g = &S.gpus[gpu];
    if (S.frozen && forked())
        return vdev_config_forked_error("vdev_config_set_logical_devices");
    if (S.frozen) {
        /* In force: ceilings of 0 were resolved to the card's budget. */
        const struct vdev_gpu_cfg *e = &S.eff[gpu];
        int same = e->n_logical == n;
        for (int i = 0; same && i < n; i++)
            same = e->limits[i] == (ceilings[i] ? ceilings[i] : S.eff_budget[gpu]) &&
                   e->floors[i] == floors[i] && e->prios[i] == res[i];
        if (same)
            return VDEV_OK;
        return vdev_error(VDEV_ERR_ALREADY_INITIALIZED,
                          "Virtual devices cannot be modified after being initialized");
    }
    g->n_logical = n;
    g->split_set = 1;
    for (int i = 0; i < n; i++) {
        g->limits[i] = ceilings[i];
        g->floors[i] = floors[i];
        g->prios[i] = res[i];
    }
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_config_set_logical_devices(const char *name, const uint64_t *limits,
                                                          int n)
{
    if (n < 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_config_set_logical_devices: bad arguments");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    int gpu, is_cpu;
    if ((st = physical_gpu(name, &gpu, &is_cpu)) != VDEV_OK)
        return end(st);
    if (is_cpu)
        return end(set_logical_cpus(name, limits, n));
    if (n > 0 && !limits)
        return end(vdev_error(VDEV_ERR_INVALID_ARG,
                              "vdev_config_set_logical_devices: bad arguments (limits NULL for "
                              "%d GPU logical devices)",
                              n));
    if (n > VDEV_MAX_LOGICAL_PER_GPU)
        return end(vdev_error(VDEV_ERR_INVALID_ARG,
                              "%d logical devices requested on %s; at most %d per GPU", n, name,
                              VDEV_MAX_LOGICAL_PER_GPU));
    enum vdev_priority prios[VDEV_MAX_LOGICAL_PER_GPU];
    for (int i = 0; i < n; i++) {
        if ((st = check_size(name, i, "limit", limits[i])) != VDEV_OK)
            return end(st);
        prios[i] = VDEV_PRIORITY_NORMAL;
    }
    /* A plain limit is a fixed share: floor and ceiling alike. */
    return end(set_gpu_split(name, gpu, n, limits, limits, prios));
}

VDEV_API enum vdev_status vdev_config_set_logical_devices_ex(
    const char *name, const struct vdev_logical_device_config *devs, int n)
{
    if (n < 0 || (n > 0 && !devs))
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "vdev_config_set_logical_devices_ex: bad arguments (%s)",
                          n < 0 ? "n < 0" : "devs NULL");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    int gpu, is_cpu;
    if ((st = physical_gpu(name, &gpu, &is_cpu)) != VDEV_OK)
        return end(st);
    if (is_cpu) {
        for (int i = 0; i < n; i++) {
            if (devs[i].floor_bytes || devs[i].ceiling_bytes)
                return end(vdev_error(VDEV_ERR_INVALID_ARG,
                                      "Setting memory limit on CPU virtual devices is currently "
                                      "not supported (logical device %d of %s has a floor of "
                                      "%llu and a ceiling of %llu bytes; pass zeros)",
                                      i, name, (unsigned long long)devs[i].floor_bytes,
                                      (unsigned long long)devs[i].ceiling_bytes));
            if (devs[i].priority != VDEV_PRIORITY_DEFAULT)
                return end(vdev_error(VDEV_ERR_INVALID_ARG,
                                      "Setting experimental_priority on CPU virtual devices is "
                                      "currently not supported (logical device %d of %s; set "
                                      "it at run time with vdev_memory_set_priority)",
                                      i, name));
        }
        return end(set_logical_cpus(name, NULL, n));
    }
    if (n > VDEV_MAX_LOGICAL_PER_GPU)
        return end(vdev_error(VDEV_ERR_INVALID_ARG,
                              "%d logical devices requested on %s; at most %d per GPU", n, name,
                              VDEV_MAX_LOGICAL_PER_GPU));
    uint64_t floors[VDEV_MAX_LOGICAL_PER_GPU], ceilings[VDEV_MAX_LOGICAL_PER_GPU];
    enum vdev_priority prios[VDEV_MAX_LOGICAL_PER_GPU];
    for (int i = 0; i < n; i++) {
        if ((st = check_size(name, i, "floor", devs[i].floor_bytes)) != VDEV_OK ||
            (st = check_size(name, i, "ceiling", devs[i].ceiling_bytes)) != VDEV_OK)
            return end(st);
        floors[i] = devs[i].floor_bytes;
        ceilings[i] = devs[i].ceiling_bytes;
        prios[i] = devs[i].priority;
    }
    return end(set_gpu_split(name, gpu, n, floors, ceilings, prios));
}

/* A fraction whose budget is below 1 MiB on GPU `gpu` holds nothing. */
static enum vdev_status check_fraction(int gpu, double fraction)
{
    uint64_t fr, total;
    enum vdev_status st = vdev_backend_mem_info(&S.gpu, gpu, &fr, &total);
    if (st != VDEV_OK)
        return st;
    uint64_t b = vdev_config_fraction_budget(total, fraction);
    if (b >= MIB)
        return VDEV_OK;
    char b1[32], b2[32], least[32];
    vdev_config_min_fraction(total, least, sizeof least);
    return vdev_error(VDEV_ERR_INVALID_ARG,
                      "memory fraction %g gives /physical_device:GPU:%d a budget of %s (%g of its "
                      "%s), less than 1 MiB: the smallest useful value is %s",
                      fraction, gpu, vdev_format_bytes(b, b1, sizeof b1), fraction,
                      vdev_format_bytes(total, b2, sizeof b2), least);
}

/* The shortest decimal that reads back as f ("1.0000001", not %g's "1"). */
static void format_double(double f, char *out, size_t cap)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, f);
        if (strtod(out, NULL) == f)
            return;
    }
}

VDEV_API enum vdev_status vdev_config_set_memory_fraction(const char *name, double fraction)
{
    if (!(fraction >= 0.0 && fraction <= 1.0)) {
        char text[40];
        if (isnan(fraction)) /* printf's "nan" may carry the sign bit: "-nan" */
            snprintf(text, sizeof text, "nan (not a number)");
        else
            format_double(fraction, text, sizeof text);
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "memory fraction %s is outside (0, 1] (0 removes it)", text);
    }
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    int lo = 0, hi = S.n_gpus;
    if (name) {
        int gpu, is_cpu;
        if ((st = physical_gpu(name, &gpu, &is_cpu)) != VDEV_OK)
            return end(st);
        if (is_cpu)
            return end(vdev_error(VDEV_ERR_INVALID_ARG,
                                  "Cannot set a memory fraction on non-GPU devices"));
        lo = gpu;
        hi = gpu + 1;
    }
    for (int i = lo; fraction > 0 && i < hi; i++)
        if ((st = check_fraction(i, fraction)) != VDEV_OK)
            return end(st);
    if (S.frozen && forked())
        return end(vdev_config_forked_error("vdev_config_set_memory_fraction"));
    if (S.frozen) {
        int same = 1;
        for (int i = lo; i < hi; i++)
            same = same && S.eff[i].fraction == fraction;
        if (same)
            return end(VDEV_OK);
        return end(vdev_error(VDEV_ERR_ALREADY_INITIALIZED, "%s", ALREADY));
    }
    for (int i = lo; i < hi; i++) {
        S.gpus[i].fraction = fraction;
        S.gpus[i].fraction_set = 1;
    }
    return end(VDEV_OK);
}

/* ---- getters ---- */

VDEV_API enum vdev_status vdev_config_get_visible_devices(int *gpu_indices, int cap, int *n)
{
    if (!n || cap < 0 || (cap > 0 && !gpu_indices))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_config_get_visible_devices: bad arguments");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    struct vdev_config_resolved *r = NULL;
    const int *vis = S.eff_visible;
    int count = S.eff_n_visible;
    if (!S.frozen) {
        if (!(r = vdev_malloc(sizeof *r)))
            return end(vdev_error(VDEV_ERR_OOM, "vdev_config_get_visible_devices: out of host "
                                                "memory resolving the configuration"));
        if ((st = vdev_config_resolve_locked(r)) != VDEV_OK) {
            free(r);
            return end(st);
        }
        vis = r->visible;
        count = r->n_visible;
    }
    for (int i = 0; i < count && i < cap; i++)
        gpu_indices[i] = vis[i];
    *n = count;
    free(r);
    return end(VDEV_OK);
}

/* The split of device `name` in force (after start-up) or that start-up
 * would put in force: *count logical devices (0: not split; the CPU unsplit
 * is no configuration, as one GPU unsplit is) and *g the GPU's
 * configuration, NULL for the CPU. Lock held; *r is to be freed by the
 * caller. */
static enum vdev_status split_of(const char *name, struct vdev_config_resolved **r,
                                 const struct vdev_gpu_cfg **g, int *count)
{
    *r = NULL;
    int gpu = 0, is_cpu = 0; /* set by physical_gpu on success */
    enum vdev_status st = physical_gpu(name, &gpu, &is_cpu);
    if (st != VDEV_OK)
        return st;
    *g = is_cpu ? NULL : &S.eff[gpu];
    int n_cpus = S.eff_n_cpus;
    if (!S.frozen) {
        if (!(*r = vdev_malloc(sizeof **r)))
            return vdev_error(VDEV_ERR_OOM, "%s: out of host memory resolving the configuration",
                              name);
        if ((st = vdev_config_resolve_locked(*r)) != VDEV_OK) {
            free(*r);
            *r = NULL;
            return st;
        }
        *g = is_cpu ? NULL : &(*r)->gpu[gpu];
        n_cpus = (*r)->n_cpus;
    }
    *count = is_cpu ? (n_cpus > 1 ? n_cpus : 0) : (*g)->n_logical;
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_config_get_logical_devices(const char *name, uint64_t *limits,
                                                          int cap, int *n)
{
    if (!n || cap < 0 || (cap > 0 && !limits))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_config_get_logical_devices: bad arguments");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    struct vdev_config_resolved *r;
    const struct vdev_gpu_cfg *g;
    int count;
    if ((st = split_of(name, &r, &g, &count)) != VDEV_OK)
        return end(st);
    for (int i = 0; i < count && i < cap; i++)
        limits[i] = g ? g->limits[i] : 0;
    *n = count;
    free(r);
    return end(VDEV_OK);
}

VDEV_API enum vdev_status
vdev_config_get_logical_devices_ex(const char *name, struct vdev_logical_device_config *devs,
                                   int cap, int *n)
{
    if (!n || cap < 0 || (cap > 0 && !devs))
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "vdev_config_get_logical_devices_ex: bad arguments");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    struct vdev_config_resolved *r;
    const struct vdev_gpu_cfg *g;
    int count;
    if ((st = split_of(name, &r, &g, &count)) != VDEV_OK)
        return end(st);
    for (int i = 0; i < count && i < cap; i++) {
        memset(&devs[i], 0, sizeof devs[i]);
        devs[i].priority = VDEV_PRIORITY_NORMAL;
        if (g) {
            devs[i].floor_bytes = g->floors[i];
            devs[i].ceiling_bytes = g->limits[i];
            devs[i].priority = g->prios[i];
        }
    }
    *n = count;
    free(r);
    return end(VDEV_OK);
}

VDEV_API enum vdev_status vdev_device_details(const char *name, struct vdev_device_details *out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_device_details: out is NULL");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    int gpu, is_cpu;
    if ((st = physical_gpu(name, &gpu, &is_cpu)) != VDEV_OK)
        return end(st);
    struct vdev_device_details d;
    memset(&d, 0, sizeof d);
    if (!is_cpu) {
        struct vdev_backend_device_info info;
        if ((st = vdev_backend_device_info(&S.gpu, gpu, &info)) != VDEV_OK)
            return end(st);
        vdev_strlcpy(d.device_name, info.model, sizeof d.device_name);
        d.cc_major = info.cc_major;
        d.cc_minor = info.cc_minor;
    }
    *out = d;
    return end(VDEV_OK);
}
