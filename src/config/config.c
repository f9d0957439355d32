/* config.c — discovery of physical devices, configuration calls, environment
 * variables, and the start-up plan.
 *
 * All state lives in one struct guarded by one mutex. Discovery happens once,
 * on the first call that needs the physical devices; the configuration calls
 * only record what the user asked for; vdev_config_freeze() reads the
 * environment for whatever code left unset, checks every rule, and produces
 * the plan the runtime builds its logical devices from.
 *
 * Rules kept from TensorFlow: configuration is frozen at start-up
 * ("Physical devices cannot be modified after being initialized"), a call
 * that repeats the value in force is a no-op even then, logical GPUs are
 * numbered over visible GPUs in order, the driver reserve (MinSystemMemory).
 * Rules lifted: growth may differ between GPUs, growth combines with logical
 * devices, a fraction combines with logical devices (it becomes their
 * budget), limits beyond a card's budget fail at start-up, and a malformed
 * environment variable is an error rather than a logged warning.
 */
#define _GNU_SOURCE
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <string.h>

struct gpu_cfg {
    int growth;                   /* -1 unset, 0 off, 1 on */
    int n_logical;                /* 0: not split */
    uint64_t limits[VDEV_MAX_LOGICAL_PER_GPU];
    double fraction;              /* 0: unset */
};

static struct {
    pthread_mutex_t lock;
    int discovered;
    int frozen;
    struct vdev_backend cpu;
    struct vdev_backend gpu;      /* ops NULL when there are no GPUs */
    int n_gpus;
    char absence[256];
    struct gpu_cfg gpus[VDEV_MAX_GPUS];
    int visible_set;
    int n_visible;
    int visible[VDEV_MAX_GPUS];
    /* What start-up put in force, from code, environment and defaults (valid
     * while frozen): a later call that repeats it is a no-op, as TensorFlow
     * allows, even where the value came from the environment. growth is 0 or
     * 1 here; fraction 0 means none. */
    struct gpu_cfg eff[VDEV_MAX_GPUS];
    int eff_n_visible;
    int eff_visible[VDEV_MAX_GPUS];
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const ALREADY = "Physical devices cannot be modified after being initialized";

/* ---- discovery ---- */

static void reset_gpu_cfg(void)
{
    for (int i = 0; i < VDEV_MAX_GPUS; i++) {
        S.gpus[i].growth = -1;
        S.gpus[i].n_logical = 0;
        S.gpus[i].fraction = 0;
    }
    S.visible_set = 0;
    S.n_visible = 0;
}

static enum vdev_status discover_locked(void)
{
    if (S.discovered)
        return VDEV_OK;
    struct vdev_backend cpu = {0}, gpu = {0};
    enum vdev_status st = vdev_backend_cpu_new(&cpu);
    if (st != VDEV_OK)
        return st;
    char reason[256] = "";
    const char *sim = getenv("VDEV_SIM_GPUS");
    if (sim) {
        st = vdev_backend_sim_new(sim, "VDEV_SIM_GPUS", &gpu);
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

/* Resolves a physical device name to a GPU index, with TensorFlow's errors. */
static enum vdev_status physical_gpu(const char *name, int *gpu, int *is_cpu)
{
    struct vdev_device_name dn;
    if (!name)
        return vdev_error(VDEV_ERR_INVALID_ARG, "physical device name is NULL");
    if (vdev_parse_device_name(name, &dn) != VDEV_OK)
        return vdev_error(VDEV_ERR_NOT_FOUND, "Unrecognized device: %s", name);
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

VDEV_API enum vdev_status vdev_config_set_visible_devices(const int *idx, int n)
{
    if (n < 0 || (n > 0 && !idx))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_config_set_visible_devices: bad arguments");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    for (int i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= S.n_gpus)
            return end(vdev_error(VDEV_ERR_NOT_FOUND, "Unrecognized device: /physical_device:GPU:%d",
                                  idx[i]));
        for (int j = 0; j < i; j++)
            if (idx[j] == idx[i])
                return end(vdev_error(VDEV_ERR_INVALID_ARG,
                                      "GPU %d is listed twice in the visible devices", idx[i]));
    }
    if (S.frozen) {
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
    if (S.frozen) {
        if (S.eff[gpu].growth == (int)enable)
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

VDEV_API enum vdev_status vdev_config_set_logical_devices(const char *name, const uint64_t *limits,
                                                          int n)
{
    if (n < 0 || (n > 0 && !limits))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_config_set_logical_devices: bad arguments");
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    int gpu, is_cpu;
    if ((st = physical_gpu(name, &gpu, &is_cpu)) != VDEV_OK)
        return end(st);
    if (is_cpu)
        return end(vdev_error(VDEV_ERR_INVALID_ARG,
                              "Setting memory limit on CPU virtual devices is currently not "
                              "supported"));
    if (n > VDEV_MAX_LOGICAL_PER_GPU)
        return end(vdev_error(VDEV_ERR_INVALID_ARG,
                              "%d logical devices requested on %s; at most %d per GPU", n, name,
                              VDEV_MAX_LOGICAL_PER_GPU));
    for (int i = 0; i < n; i++)
        if (limits[i] < 256)
            return end(vdev_error(VDEV_ERR_INVALID_ARG,
                                  "Setting memory limit is required for GPU virtual devices: "
                                  "logical device %d of %s has a limit of %llu bytes (at least "
                                  "256)",
                                  i, name, (unsigned long long)limits[i]));
    struct gpu_cfg *g = &S.gpus[gpu];
    if (S.frozen) {
        const struct gpu_cfg *e = &S.eff[gpu];
        int same = e->n_logical == n;
        for (int i = 0; same && i < n; i++)
            same = e->limits[i] == limits[i];
        if (same)
            return end(VDEV_OK);
        return end(vdev_error(VDEV_ERR_ALREADY_INITIALIZED,
                              "Virtual devices cannot be modified after being initialized"));
    }
    g->n_logical = n;
    for (int i = 0; i < n; i++)
        g->limits[i] = limits[i];
    return end(VDEV_OK);
}

VDEV_API enum vdev_status vdev_config_set_memory_fraction(const char *name, double fraction)
{
    if (!(fraction >= 0.0 && fraction <= 1.0))
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "memory fraction %g is outside (0, 1] (0 removes it)", fraction);
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
    if (S.frozen) {
        int same = 1;
        for (int i = lo; i < hi; i++)
            same = same && S.eff[i].fraction == fraction;
        if (same)
            return end(VDEV_OK);
        return end(vdev_error(VDEV_ERR_ALREADY_INITIALIZED, "%s", ALREADY));
    }
    for (int i = lo; i < hi; i++)
        S.gpus[i].fraction = fraction;
    return end(VDEV_OK);
}

/* ---- environment ---- */

enum vdev_status vdev_config_parse_bool(const char *var, const char *v, int *out)
{
    *out = 0; /* written on every path, so callers never read an unset value */
    if (vdev_strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0) {
        *out = 1;
        return VDEV_OK;
    }
    if (vdev_strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0) {
        *out = 0;
        return VDEV_OK;
    }
    return vdev_error(VDEV_ERR_CONFIG,
                      "%s=\"%s\" could not be parsed: valid values are true or false (any case), "
                      "1 or 0",
                      var, v);
}

/* Reads the "N:" that starts a per-GPU part of a variable: digits (no sign,
 * no space), then ':'. Returns N and sets *after to what follows the ':', or
 * returns -1 when the part does not start that way. */
static long part_gpu(char *part, char **after)
{
    char *c = part;
    long gpu = 0;
    if (!isdigit((unsigned char)*c))
        return -1;
    for (; isdigit((unsigned char)*c); c++) {
        gpu = gpu * 10 + (*c - '0');
        if (gpu > 1000000)
            return -1;
    }
    if (*c != ':')
        return -1;
    *after = c + 1;
    return gpu;
}

/* VDEV_MEMORY_GROWTH: "true" for every GPU, or per GPU "0:true,1:false".
 * Parts are split with strsep, so an empty part ("0:true,") is an error
 * rather than skipped. */
static enum vdev_status env_growth(const char *var, const char *v, int growth[VDEV_MAX_GPUS])
{
    if (!strchr(v, ':')) {
        int b;
        enum vdev_status st = vdev_config_parse_bool(var, v, &b);
        if (st != VDEV_OK)
            return st;
        for (int i = 0; i < VDEV_MAX_GPUS; i++)
            growth[i] = b;
        return VDEV_OK;
    }
    char buf[512];
    if (strlen(v) >= sizeof buf)
        return vdev_error(VDEV_ERR_CONFIG, "%s is too long", var);
    vdev_strlcpy(buf, v, sizeof buf);
    int seen[VDEV_MAX_GPUS] = {0};
    char *rest = buf;
    for (char *part; (part = strsep(&rest, ",")) != NULL;) {
        char *val;
        long gpu = part_gpu(part, &val);
        if (gpu < 0)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": bad part '%s' (expected true, false, or per GPU "
                              "0:true,1:false)",
                              var, v, part);
        if (gpu >= S.n_gpus)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": there is no GPU %ld (%d GPUs)", var,
                              v, gpu, S.n_gpus);
        if (seen[gpu])
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": GPU %ld is given twice", var, v, gpu);
        seen[gpu] = 1;
        int b;
        if (vdev_config_parse_bool(var, val, &b) != VDEV_OK)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": bad value '%s' for GPU %ld (true, "
                                               "false, 1 or 0)",
                              var, v, val, gpu);
        growth[gpu] = b;
    }
    return VDEV_OK;
}

/* A decimal fraction such as 0.5 or 1: digits and at most one '.', nothing
 * else (strtod alone would also take " 0.5", "5e-1", "0x0.8p0" and "nan"). */
static enum vdev_status env_fraction(const char *var, const char *v, double *out)
{
    int digits = 0, dots = 0;
    const char *q = v;
    for (; *q; q++) {
        if (isdigit((unsigned char)*q))
            digits++;
        else if (*q == '.')
            dots++;
        else
            break;
    }
    double f = (digits && dots <= 1 && !*q) ? strtod(v, NULL) : -1.0;
    if (!(f > 0.0 && f <= 1.0))
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s=\"%s\" is not a fraction in (0, 1] (e.g. 0.5 for half of each "
                          "GPU's total memory)",
                          var, v);
    *out = f;
    return VDEV_OK;
}

/* VDEV_LOGICAL_DEVICES="0:4GiB,2GiB;1:3GiB". Empty groups and empty limits
 * ("0:4GiB,", "0:4GiB;") are errors. */
static enum vdev_status env_logical(const char *var, const char *v, struct gpu_cfg *cfg,
                                    int set[VDEV_MAX_GPUS])
{
    char buf[1024];
    if (strlen(v) >= sizeof buf)
        return vdev_error(VDEV_ERR_CONFIG, "%s is too long", var);
    if (!*v)
        return vdev_error(VDEV_ERR_CONFIG, "%s is empty (expected e.g. 0:4GiB,2GiB;1:3GiB)",
                          var);
    vdev_strlcpy(buf, v, sizeof buf);
    char *rest = buf;
    for (char *grp; (grp = strsep(&rest, ";")) != NULL;) {
        char *lims;
        long gpu = part_gpu(grp, &lims);
        if (gpu < 0)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": bad part '%s' (expected GPU:LIMIT[,LIMIT...], e.g. "
                              "0:4GiB,2GiB;1:3GiB)",
                              var, v, grp);
        if (gpu >= S.n_gpus)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": there is no GPU %ld (%d GPUs)", var,
                              v, gpu, S.n_gpus);
        if (set[gpu])
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": GPU %ld is given twice", var, v, gpu);
        set[gpu] = 1;
        struct gpu_cfg *g = &cfg[gpu];
        g->n_logical = 0;
        if (!*lims)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": GPU %ld has no limits", var, v, gpu);
        for (char *lim; (lim = strsep(&lims, ",")) != NULL;) {
            uint64_t bytes;
            if (vdev_parse_bytes(lim, &bytes) != VDEV_OK || bytes < 256)
                return vdev_error(VDEV_ERR_CONFIG,
                                  "%s=\"%s\": bad limit '%s' for GPU %ld (a size such as 4GiB)",
                                  var, v, lim, gpu);
            if (g->n_logical == VDEV_MAX_LOGICAL_PER_GPU)
                return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": more than %d logical devices on "
                                                   "GPU %ld",
                                  var, v, VDEV_MAX_LOGICAL_PER_GPU, gpu);
            g->limits[g->n_logical++] = bytes;
        }
    }
    return VDEV_OK;
}

/* VDEV_VISIBLE_DEVICES="0,2"; "" hides every GPU, as CUDA_VISIBLE_DEVICES. */
static enum vdev_status env_visible(const char *var, const char *v, int *vis, int *n_out)
{
    int n = 0;
    const char *p = v;
    while (*p) {
        char *end;
        errno = 0;
        long idx = strtol(p, &end, 10);
        if (end == p || errno || idx < 0 || !isdigit((unsigned char)*p) ||
            (*end && *end != ','))
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": bad entry at '%s' (expected GPU indices such as 0,2)",
                              var, v, p);
        if (idx >= S.n_gpus)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": there is no GPU %ld (%d GPUs)", var, v,
                              idx, S.n_gpus);
        for (int j = 0; j < n; j++)
            if (vis[j] == idx)
                return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": GPU %ld is listed twice", var, v,
                                  idx);
        vis[n++] = (int)idx;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": trailing ','", var, v);
    }
    *n_out = n;
    return VDEV_OK;
}

/* TensorFlow's MinSystemMemory: the memory left to the driver and libraries. */
static uint64_t min_system_memory(uint64_t free_bytes, int cc_major)
{
    if (free_bytes < (2ull << 30))
        return 225ull << 20;
    if (cc_major <= 6)
        return 500ull << 20;
    if (cc_major == 7)
        return 1050ull << 20;
    return 1536ull << 20;
}

static enum vdev_status env_min_sys(uint64_t *out, int *set)
{
    const char *v = getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB");
    *set = 0;
    if (!v)
        return VDEV_OK;
    char *end;
    errno = 0;
    long long mb = isdigit((unsigned char)v[0]) ? strtoll(v, &end, 10) : -1;
    if (mb < 0 || *end || errno)
        return vdev_error(VDEV_ERR_CONFIG,
                          "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"%s\" is not a whole number of MiB >= 0",
                          v);
    if ((unsigned long long)mb > (UINT64_MAX >> 20))
        return vdev_error(VDEV_ERR_CONFIG, "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"%s\" is too large", v);
    *out = (uint64_t)mb << 20;
    *set = 1;
    return VDEV_OK;
}

enum vdev_status vdev_config_gpu_budget(int gpu, double fraction, uint64_t *budget,
                                        uint64_t *free_out, uint64_t *reserve_out)
{
    uint64_t free_bytes, total;
    struct vdev_backend_device_info info;
    enum vdev_status st = vdev_backend_mem_info(&S.gpu, gpu, &free_bytes, &total);
    if (st == VDEV_OK)
        st = vdev_backend_device_info(&S.gpu, gpu, &info);
    if (st != VDEV_OK)
        return st;
    uint64_t reserve = min_system_memory(free_bytes, info.cc_major);
    int set;
    uint64_t user_reserve;
    if ((st = env_min_sys(&user_reserve, &set)) != VDEV_OK)
        return st;
    if (set) {
        /* TensorFlow ignores a reserve that leaves nothing, with a warning; it
         * cannot be honoured, so here it is an error. */
        if (user_reserve >= free_bytes) {
            char b1[32], b2[32];
            return vdev_error(VDEV_ERR_CONFIG,
                              "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"%s\" reserves %s, which leaves "
                              "nothing of the %s free on /physical_device:GPU:%d",
                              getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB"),
                              vdev_format_bytes(user_reserve, b1, sizeof b1),
                              vdev_format_bytes(free_bytes, b2, sizeof b2), gpu);
        }
        reserve = user_reserve;
    }
    uint64_t b;
    if (fraction > 0 && !set)
        b = (uint64_t)((double)total * fraction);
    else
        b = free_bytes > reserve ? free_bytes - reserve : free_bytes;
    *budget = b & ~(uint64_t)255;
    if (free_out)
        *free_out = free_bytes;
    if (reserve_out)
        *reserve_out = (fraction > 0 && !set) ? 0 : reserve;
    return VDEV_OK;
}

/* ---- the plan ---- */

static enum vdev_status build_plan(struct vdev_plan *plan)
{
    enum vdev_status st;
    memset(plan, 0, sizeof *plan);
    plan->cpu = &S.cpu;
    plan->gpu = S.gpu.ops ? &S.gpu : NULL;
    uint64_t cpu_free, cpu_total;
    if ((st = vdev_backend_mem_info(&S.cpu, 0, &cpu_free, &cpu_total)) != VDEV_OK)
        return st;
    plan->cpu_limit_bytes = cpu_total & ~(uint64_t)255;

    const char *trace = getenv("VDEV_ALLOC_TRACE");
    if (trace) {
        if (!*trace)
            return vdev_error(VDEV_ERR_CONFIG, "VDEV_ALLOC_TRACE is empty (expected a file path)");
        if (strlen(trace) >= sizeof plan->alloc_trace_path)
            return vdev_error(VDEV_ERR_CONFIG, "VDEV_ALLOC_TRACE is too long");
        vdev_strlcpy(plan->alloc_trace_path, trace, sizeof plan->alloc_trace_path);
    }

    /* Environment, validated in full even where code overrides it. */
    int env_grow[VDEV_MAX_GPUS];
    for (int i = 0; i < VDEV_MAX_GPUS; i++)
        env_grow[i] = -1;
    const char *tf_grow = getenv("TF_FORCE_GPU_ALLOW_GROWTH");
    const char *vd_grow = getenv("VDEV_MEMORY_GROWTH");
    if (tf_grow) {
        int b;
        if ((st = vdev_config_parse_bool("TF_FORCE_GPU_ALLOW_GROWTH", tf_grow, &b)) != VDEV_OK)
            return st;
        for (int i = 0; i < VDEV_MAX_GPUS; i++)
            env_grow[i] = b;
    }
    if (vd_grow) {
        int g2[VDEV_MAX_GPUS];
        for (int i = 0; i < VDEV_MAX_GPUS; i++)
            g2[i] = -1;
        if ((st = env_growth("VDEV_MEMORY_GROWTH", vd_grow, g2)) != VDEV_OK)
            return st;
        for (int i = 0; i < VDEV_MAX_GPUS; i++) {
            if (g2[i] < 0)
                continue;
            if (env_grow[i] >= 0 && env_grow[i] != g2[i])
                return vdev_error(VDEV_ERR_CONFIG,
                                  "TF_FORCE_GPU_ALLOW_GROWTH=\"%s\" and VDEV_MEMORY_GROWTH=\"%s\" "
                                  "disagree for GPU %d",
                                  tf_grow, vd_grow, i);
            env_grow[i] = g2[i];
        }
    }
    double env_frac = 0;
    const char *vd_frac = getenv("VDEV_MEMORY_FRACTION");
    const char *tf_frac = getenv("TF_GPU_MEMORY_FRACTION");
    if (vd_frac && (st = env_fraction("VDEV_MEMORY_FRACTION", vd_frac, &env_frac)) != VDEV_OK)
        return st;
    if (tf_frac) {
        double f2;
        if ((st = env_fraction("TF_GPU_MEMORY_FRACTION", tf_frac, &f2)) != VDEV_OK)
            return st;
        if (vd_frac && f2 != env_frac)
            return vdev_error(VDEV_ERR_CONFIG,
                              "VDEV_MEMORY_FRACTION=\"%s\" and TF_GPU_MEMORY_FRACTION=\"%s\" "
                              "disagree; set one",
                              vd_frac, tf_frac);
        env_frac = f2;
    }
    struct gpu_cfg env_cfg[VDEV_MAX_GPUS];
    int env_split[VDEV_MAX_GPUS] = {0};
    const char *vd_log = getenv("VDEV_LOGICAL_DEVICES");
    if (vd_log && (st = env_logical("VDEV_LOGICAL_DEVICES", vd_log, env_cfg, env_split)) != VDEV_OK)
        return st;
    /* Visible devices: code, else environment (validated even when code
     * overrides it), else every GPU. */
    int env_vis[VDEV_MAX_GPUS], env_n_vis = 0;
    const char *vd_vis = getenv("VDEV_VISIBLE_DEVICES");
    if (vd_vis && (st = env_visible("VDEV_VISIBLE_DEVICES", vd_vis, env_vis, &env_n_vis)) != VDEV_OK)
        return st;
    int *vis = S.eff_visible, n_vis = S.n_gpus;
    if (S.visible_set) {
        n_vis = S.n_visible;
        memcpy(vis, S.visible, sizeof(int) * (size_t)n_vis);
    } else if (vd_vis) {
        n_vis = env_n_vis;
        memcpy(vis, env_vis, sizeof(int) * (size_t)n_vis);
    } else {
        for (int i = 0; i < n_vis; i++)
            vis[i] = i;
    }
    S.eff_n_visible = n_vis;
    int min_sys_set;
    uint64_t min_sys;
    if ((st = env_min_sys(&min_sys, &min_sys_set)) != VDEV_OK)
        return st;

    /* Merge, for every GPU (what is in force after start-up): code first,
     * then environment, then defaults. */
    for (int gpu = 0; gpu < S.n_gpus; gpu++) {
        const struct gpu_cfg *c = &S.gpus[gpu];
        struct gpu_cfg *e = &S.eff[gpu];
        e->growth = c->growth >= 0 ? c->growth : env_grow[gpu] >= 0 ? env_grow[gpu] : 1;
        e->fraction = c->fraction > 0 ? c->fraction : env_frac;
        const struct gpu_cfg *src = (c->n_logical == 0 && env_split[gpu]) ? &env_cfg[gpu] : c;
        e->n_logical = src->n_logical;
        memcpy(e->limits, src->limits, sizeof(uint64_t) * (size_t)src->n_logical);
    }

    /* The plan: the visible GPUs in order, each one's logical devices. */
    for (int k = 0; k < n_vis; k++) {
        int gpu = vis[k];
        const struct gpu_cfg *e = &S.eff[gpu];
        double frac = e->fraction;
        int n_log = e->n_logical;
        const uint64_t *limits = e->limits;
        uint64_t budget, free_bytes, reserve;
        if ((st = vdev_config_gpu_budget(gpu, frac, &budget, &free_bytes, &reserve)) != VDEV_OK)
            return st;
        enum vdev_memory_policy pol = e->growth ? VDEV_POLICY_GROW : VDEV_POLICY_PREALLOCATE;
        int n_new = n_log ? n_log : 1;
        if (plan->n_devices + n_new > (int)VDEV_ARRAY_LEN(plan->devices))
            return vdev_error(VDEV_ERR_CONFIG,
                              "/physical_device:GPU:%d: more than %d logical GPUs in all", gpu,
                              (int)VDEV_ARRAY_LEN(plan->devices));
        char b1[32], b2[32], b3[32], b4[32];
        if (n_log == 0) {
            struct vdev_plan_device *d = &plan->devices[plan->n_devices++];
            d->physical = gpu;
            d->limit_bytes = budget;
            d->policy = pol;
            d->is_split = 0;
            continue;
        }
        uint64_t sum = 0;
        for (int i = 0; i < n_log; i++) {
            uint64_t l = limits[i] & ~(uint64_t)255;
            sum = sum > UINT64_MAX - l ? UINT64_MAX : sum + l;
        }
        if (sum > budget) {
            char how[160];
            uint64_t fr_now, total = 0;
            if (vdev_backend_mem_info(&S.gpu, gpu, &fr_now, &total) != VDEV_OK)
                total = 0;
            if (frac > 0 && !min_sys_set)
                snprintf(how, sizeof how, "%.3g of its %s total", frac,
                         vdev_format_bytes(total, b3, sizeof b3));
            else
                snprintf(how, sizeof how, "%s free less the %s driver reserve",
                         vdev_format_bytes(free_bytes, b3, sizeof b3),
                         vdev_format_bytes(reserve, b4, sizeof b4));
            return vdev_error(VDEV_ERR_CONFIG,
                              "/physical_device:GPU:%d: its %d logical devices' limits sum to %s "
                              "(%llu bytes), more than the card's budget of %s (%llu bytes: %s)",
                              gpu, n_log, vdev_format_bytes(sum, b1, sizeof b1),
                              (unsigned long long)sum, vdev_format_bytes(budget, b2, sizeof b2),
                              (unsigned long long)budget, how);
        }
        for (int i = 0; i < n_log; i++) {
            struct vdev_plan_device *d = &plan->devices[plan->n_devices++];
            d->physical = gpu;
            d->limit_bytes = limits[i] & ~(uint64_t)255;
            d->policy = pol;
            d->is_split = 1;
        }
    }
    return VDEV_OK;
}

enum vdev_status vdev_config_freeze(struct vdev_plan *plan)
{
    enum vdev_status st = begin();
    if (st != VDEV_OK)
        return st;
    st = build_plan(plan);
    if (st == VDEV_OK)
        S.frozen = 1;
    return end(st);
}

void vdev_config_unfreeze(void)
{
    pthread_mutex_lock(&S.lock);
    S.frozen = 0;
    pthread_mutex_unlock(&S.lock);
}
