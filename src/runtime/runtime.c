/* runtime.c — start-up, the logical devices and their lookup, out-of-memory
 * reports.
 *
 * vdev_init() freezes the configuration into a plan and builds the device
 * table from it. Each logical device's allocator takes its regions from the
 * backend of its physical device through a small region source; a
 * preallocating device reserves its floor here (a whole card, or a plain
 * limit, is its own floor), so a configuration that cannot be honoured fails
 * at start-up, not at the first large tensor. If any step fails, everything
 * built so far is torn down and the configuration is unfrozen, so the caller
 * can fix it and call vdev_init() again.
 *
 * Streams: each logical GPU gets a stream of its own from its card's
 * backend (stream_open, with the device's priority), so the logical devices
 * of one card run side by side, and its index becomes the device's bdev.
 * The device memory those streams take for themselves (the CUDA plugin's
 * scratch buffers and cuBLAS workspaces) comes out of the card's budget
 * before its pool is made, and on a backend that holds memory of its own
 * (CUDA: the context, the streams) no budget exceeds what the card has free
 * once they are open (a budget from a memory fraction is a share of the
 * card's total, of which the context has already taken its part), so a
 * logical device's limit is what its tensors can really get.
 *
 * Governance: each card gets a pool (src/alloc/govern.h) with its budget,
 * and each of its logical devices a member with its floor, ceiling and
 * priority; the logical CPUs share one pool over host memory. A card with
 * one logical device, on a backend whose own library can run collectives
 * (NCCL), gets one more member: the library's buffers (runtime_memory.c
 * charges it). The memory calls of the public API once the runtime runs,
 * vdev_memory_set_limits() and friends included, are in runtime_memory.c.
 *
 * fork(): a child of a process whose runtime runs gets none of its threads
 * (the streams' workers, the product pool), so whatever waits on them would
 * wait forever. A pthread_atfork handler marks such a child: its runtime is
 * stopped, not torn down (vdev_shutdown there gives nothing back, as the
 * memory is the parent's), and every call that needs it, vdev_init and
 * every use of a tensor included, fails with VDEV_ERR_UNSUPPORTED saying to
 * start vdev after fork() or to spawn children instead, as CUDA refuses a
 * forked child the parent's context. A child forked while no runtime runs
 * starts its own as any process does. */
#define _GNU_SOURCE
#include "runtime/metrics.h"
#include "runtime/observe.h"
#include "runtime/placement.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    pthread_mutex_t lock;
    _Atomic int initialized;
    int n;
    int n_cpus;
    struct vdev_ldev devs[VDEV_MAX_LDEVS];
    vdev_pool_t *pools[VDEV_MAX_GPUS]; /* per physical GPU in use */
    vdev_pool_t *cpu_pool;
    vdev_alloc_trace_t *trace;
    _Atomic uint32_t generation; /* counts start-ups; tensors remember theirs */
    _Atomic long forked_from;    /* vdev_runtime_forked_from */
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic int oom_report; /* VDEV_OOM_REPORT */

_Static_assert(VDEV_POOL_MAX_MEMBERS >= VDEV_MAX_LOGICAL_PER_GPU &&
                   VDEV_POOL_MAX_MEMBERS >= VDEV_MAX_LOGICAL_CPUS,
               "a card's pool holds every logical device of the card");

int vdev_runtime_oom_report(void)
{
    return atomic_load_explicit(&oom_report, memory_order_relaxed);
}

/* The calling thread's last out-of-memory report (VDEV_OOM_REPORT), kept for
 * vdev_last_oom_report(); a thread's is freed when the thread ends. */
static pthread_key_t report_key;
static pthread_once_t report_once = PTHREAD_ONCE_INIT;
static int report_key_ok;

static void report_key_make(void) { report_key_ok = pthread_key_create(&report_key, free) == 0; }

/* Keeps text (malloc'd) as the thread's report, or frees it. */
static void report_keep(char *text)
{
    pthread_once(&report_once, report_key_make);
    if (!report_key_ok) {
        free(text);
        return;
    }
    char *old = pthread_getspecific(report_key);
    if (pthread_setspecific(report_key, text) != 0) {
        free(text);
        return;
    }
    free(old);
}

VDEV_API const char *vdev_last_oom_report(void)
{
    pthread_once(&report_once, report_key_make);
    const char *text = report_key_ok ? pthread_getspecific(report_key) : NULL;
    return text ? text : "";
}

void vdev_runtime_oom_seen(struct vdev_ldev *d, uint64_t bytes,
                           const char *(*tag_of)(void *user, uint32_t handle), void *user)
{
    if (vdev_observe_on())
        vdev_observe_oom(d, bytes);
    if (!vdev_runtime_oom_report())
        return;
    /* The report is written once into memory, then to stderr and kept for the
     * thread; without the host memory for that, it goes to stderr alone. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        fprintf(f, "%s\n", vdev_last_error());
        vdev_alloc_dump(d->alloc, f, tag_of, user);
        if (fclose(f) != 0) {
            free(text);
            text = NULL;
        }
    }
    if (!text) {
        fprintf(stderr, "%s\n", vdev_last_error());
        vdev_alloc_dump(d->alloc, stderr, tag_of, user);
        return;
    }
    fputs(text, stderr);
    report_keep(text);
}

uint32_t vdev_runtime_generation(void)
{
    return atomic_load_explicit(&R.generation, memory_order_relaxed);
}

long vdev_runtime_forked_from(void)
{
    return atomic_load_explicit(&R.forked_from, memory_order_relaxed);
}

enum vdev_status vdev_runtime_forked_error(const char *fn)
{
    return vdev_config_forked_error(fn); /* the text lives with the layer below */
}

int vdev_runtime_refuse_forked(const char *fn)
{
    if (!vdev_runtime_forked_from())
        return 0;
    vdev_runtime_forked_error(fn);
    return 1;
}

/* In the child, single-threaded: a runtime that ran in the parent stops
 * here (see the opening comment). */
static void fork_child(void)
{
    if (atomic_load_explicit(&R.initialized, memory_order_relaxed) &&
        !atomic_load_explicit(&R.forked_from, memory_order_relaxed)) {
        atomic_store_explicit(&R.forked_from, (long)getppid(), memory_order_relaxed);
        vdev_config_forked((long)getppid()); /* its configuration stays frozen for good */
    }
    atomic_store_explicit(&R.initialized, 0, memory_order_release);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void watch_fork(void) { pthread_atfork(NULL, NULL, fork_child); }

/* ---- region source over a backend device ---- */

static enum vdev_status src_reserve(void *ctx, uint64_t bytes, void **base)
{
    struct vdev_ldev *d = ctx;
    return d->backend->ops->reserve(d->backend->ctx, d->bdev, bytes, base);
}

static void src_release(void *ctx, void *base, uint64_t bytes)
{
    struct vdev_ldev *d = ctx;
    d->backend->ops->release(d->backend->ctx, d->bdev, base, bytes);
}

static enum vdev_status src_extend(void *ctx, void *base, uint64_t old_bytes, uint64_t new_bytes)
{
    struct vdev_ldev *d = ctx;
    return d->backend->ops->extend(d->backend->ctx, d->bdev, base, old_bytes, new_bytes);
}

/* Waits for the device's stream, so that regions can be handed back while no
 * queued kernel still uses a block freed in them (the allocator calls it once
 * before collecting empty regions; stream threads never take the allocator's
 * lock, so waiting under it cannot deadlock). */
static void src_sync(void *ctx)
{
    struct vdev_ldev *d = ctx;
    vdev_backend_synchronize(d->backend, d->bdev);
}

static int src_event_done(void *ctx, void *ev)
{
    struct vdev_ldev *d = ctx;
    return d->backend->ops->event_done(d->backend->ctx, ev);
}

static void src_event_wait(void *ctx, void *ev)
{
    struct vdev_ldev *d = ctx;
    d->backend->ops->event_wait(d->backend->ctx, ev);
}

static void src_event_drop(void *ctx, void *ev)
{
    struct vdev_ldev *d = ctx;
    d->backend->ops->event_drop(d->backend->ctx, ev);
}

/* ---- start-up and shutdown ---- */

static void teardown_locked(void)
{
    vdev_metrics_shutdown(); /* first: a scrape reads the devices */
    /* Every stream first: one may still copy from another device's memory. */
    for (int i = 0; i < R.n; i++)
        if (R.devs[i].backend)
            vdev_backend_synchronize(R.devs[i].backend, R.devs[i].bdev);
    for (int i = 0; i < R.n; i++) {
        struct vdev_ldev *d = &R.devs[i];
        vdev_alloc_destroy(d->alloc);
        d->alloc = NULL;
        if (d->own_stream)
            d->backend->ops->stream_close(d->backend->ctx, d->bdev);
        d->own_stream = 0;
    }
    for (int g = 0; g < VDEV_MAX_GPUS; g++) {
        vdev_pool_destroy(R.pools[g]);
        R.pools[g] = NULL;
    }
    vdev_runtime_lib_forget();
    vdev_runtime_tags_forget();
    vdev_pool_destroy(R.cpu_pool);
    R.cpu_pool = NULL;
    vdev_observe_shutdown();
    R.n = 0;
    R.n_cpus = 0;
    vdev_placement_reset();
    vdev_alloc_trace_close(R.trace);
    R.trace = NULL;
}

/* One logical device: its member of the card's pool, then its allocator
 * (a preallocating one reserves its floor; with no floor it grows). */
static enum vdev_status add_device(struct vdev_backend *b, int bdev, int own_stream,
                                   enum vdev_device_type type, int index, int physical,
                                   uint64_t limit, uint64_t floor, enum vdev_priority priority,
                                   enum vdev_memory_policy policy, int is_split, vdev_pool_t *pool)
{
    struct vdev_ldev *d = &R.devs[R.n];
    memset(d, 0, sizeof *d);
    d->id = R.n;
    d->type = type;
    d->index = index;
    d->physical = physical;
    d->backend = b;
    d->bdev = bdev;
    d->policy = policy;
    d->limit_bytes = limit;
    d->is_split = is_split;
    const char *tn = type == VDEV_DEVICE_GPU ? "GPU" : "CPU";
    snprintf(d->name, sizeof d->name, "/device:%s:%d", tn, index);
    /* TensorFlow's full name: this task's in a cluster (config/cluster.c) */
    struct vdev_cluster_view cv;
    vdev_cluster_get(&cv);
    snprintf(d->long_name, sizeof d->long_name, "%s/device:%s:%d", cv.name, tn, index);
    d->pool = pool;
    enum vdev_status st = vdev_pool_add(pool, d->name, floor, limit, priority, &d->member);
    if (st != VDEV_OK)
        return st;
    struct vdev_alloc_config cfg = {
        .name = d->name,
        .limit_bytes = limit,
        .policy = policy == VDEV_POLICY_PREALLOCATE && floor == 0 ? VDEV_POLICY_GROW : policy,
        .pool = pool,
        .member = d->member,
        .prealloc_bytes = floor,
        .source = {.reserve = src_reserve,
                   .release = src_release,
                   .extend = b->ops->extend ? src_extend : NULL,
                   .sync = src_sync,
                   .event_done = src_event_done,
                   .event_wait = src_event_wait,
                   .event_drop = src_event_drop,
                   .ctx = d},
        .trace = R.trace,
    };
    st = vdev_alloc_new(&cfg, &d->alloc);
    if (st != VDEV_OK) {
        char b1[32];
        vdev_error_prefix("%s: cannot %s its %s", d->name,
                          cfg.policy == VDEV_POLICY_PREALLOCATE ? "preallocate" : "set up",
                          vdev_format_bytes(cfg.policy == VDEV_POLICY_PREALLOCATE ? floor : limit,
                                            b1, sizeof b1));
        return st;
    }
    vdev_pool_attach(pool, d->member, d->alloc);
    d->own_stream = own_stream;
    R.n++;
    return VDEV_OK;
}

/* The pool of physical GPU `gpu`, made on first use with `budget`. */
static enum vdev_status card_pool(int gpu, uint64_t budget, vdev_pool_t **out)
{
    if (!R.pools[gpu]) {
        char name[64];
        snprintf(name, sizeof name, "/physical_device:GPU:%d", gpu);
        enum vdev_status st = vdev_pool_new(name, budget, &R.pools[gpu]);
        if (st != VDEV_OK)
            return st;
    }
    *out = R.pools[gpu];
    return VDEV_OK;
}

/* Streams of the plan's logical GPUs, opened before any pool is made. */
struct plan_streams {
    int q[VDEV_MAX_GPUS * 2];         /* each logical GPU's stream (bdev) */
    unsigned char opened[VDEV_MAX_GPUS * 2]; /* opened here; closed on failure unless added */
    uint64_t held[VDEV_MAX_GPUS];     /* device memory the streams of each card took */
    int on_card[VDEV_MAX_GPUS];       /* logical GPUs of each card */
    uint64_t free_now[VDEV_MAX_GPUS]; /* free on each card once its streams are open */
};

/* Opens a stream for every logical GPU of the plan (with its priority), or
 * gives each its card's index where the backend has no stream_open. */
static enum vdev_status open_streams(const struct vdev_plan *plan, struct plan_streams *ps)
{
    memset(ps, 0, sizeof *ps);
    const struct vdev_backend *b = plan->gpu;
    for (int i = 0; i < plan->n_devices; i++) {
        const struct vdev_plan_device *p = &plan->devices[i];
        ps->on_card[p->physical]++;
        ps->q[i] = p->physical;
        if (!b->ops->stream_open)
            continue;
        uint64_t held = 0;
        enum vdev_status st =
            b->ops->stream_open(b->ctx, p->physical, (int)p->priority, &ps->q[i], &held);
        if (st != VDEV_OK) {
            vdev_error_prefix("/device:GPU:%d: cannot open its stream", i);
            return st;
        }
        ps->opened[i] = 1;
        ps->held[p->physical] += held;
    }
    /* What each card really has free now, on a backend that holds device
     * memory of its own (the CUDA plugin: its context, the streams just
     * opened): a budget from a memory fraction is a share of the card's
     * total, of which the context has taken its part. Simulated GPUs have
     * no context: there a fraction stays a share of the total, as in
     * TensorFlow, and memory others hold makes preallocation fail. */
    for (int g = 0; g < VDEV_MAX_GPUS; g++) {
        ps->free_now[g] = UINT64_MAX;
        if (!ps->on_card[g] || !b->ops->held_bytes)
            continue;
        uint64_t total = 0;
        enum vdev_status st = vdev_backend_mem_info(b, g, &ps->free_now[g], &total);
        if (st != VDEV_OK) {
            vdev_error_prefix("/physical_device:GPU:%d: cannot read its free memory", g);
            return st;
        }
    }
    return VDEV_OK;
}

/* Closes the streams open_streams opened that no device took over. */
static void close_streams(const struct vdev_plan *plan, struct plan_streams *ps)
{
    for (int i = 0; i < plan->n_devices; i++)
        if (ps->opened[i]) {
            plan->gpu->ops->stream_close(plan->gpu->ctx, ps->q[i]);
            ps->opened[i] = 0;
        }
}

/* The budget of card gpu once its streams' own memory is out of it, or
 * VDEV_ERR_CONFIG when they take all of it. */
static enum vdev_status card_budget(const struct vdev_plan *plan, const struct plan_streams *ps,
                                    int gpu, uint64_t *out)
{
    uint64_t budget = plan->card_budget[gpu], held = ps->held[gpu];
    if (held >= budget) {
        char b1[32], b2[32];
        return vdev_error(VDEV_ERR_CONFIG,
                          "/physical_device:GPU:%d: the streams of its %d logical device%s take "
                          "%s of device memory (scratch buffers, cuBLAS workspaces), all of its "
                          "budget of %s",
                          gpu, ps->on_card[gpu], ps->on_card[gpu] == 1 ? "" : "s",
                          vdev_format_bytes(held, b1, sizeof b1),
                          vdev_format_bytes(budget, b2, sizeof b2));
    }
    budget -= held;
    /* never more than the card has free: the limit is what tensors can get */
    if (budget > ps->free_now[gpu])
        budget = ps->free_now[gpu];
    *out = budget & ~(uint64_t)255;
    return VDEV_OK;
}

/* Adds plan device i (stream ps->q[i]) to its card's pool: its ceiling and
 * floor at most the card's budget left after the streams (a whole card's
 * limit is that budget); floors that no longer fit say what took the rest. */
static enum vdev_status add_gpu(const struct vdev_plan *plan, struct plan_streams *ps, int i)
{
    const struct vdev_plan_device *p = &plan->devices[i];
    uint64_t budget = 0;
    vdev_pool_t *pool = NULL;
    enum vdev_status st = card_budget(plan, ps, p->physical, &budget);
    if (st == VDEV_OK)
        st = card_pool(p->physical, budget, &pool);
    if (st != VDEV_OK)
        return st;
    uint64_t limit = p->limit_bytes < budget ? p->limit_bytes : budget;
    uint64_t floor = p->floor_bytes < limit ? p->floor_bytes : limit;
    st = add_device(plan->gpu, ps->q[i], ps->opened[i], VDEV_DEVICE_GPU, i, p->physical, limit,
                    floor, p->priority, p->policy, p->is_split, pool);
    if (st == VDEV_OK) {
        ps->opened[i] = 0; /* the device closes it at teardown */
    } else if (ps->held[p->physical] && vdev_last_status() == VDEV_ERR_CONFIG) {
        char b1[32];
        vdev_error_prefix("after %s for the streams of its logical devices (scratch buffers, "
                          "cuBLAS workspaces)",
                          vdev_format_bytes(ps->held[p->physical], b1, sizeof b1));
    }
    return st;
}

/* The library's member of each card with one logical device on a backend
 * whose library runs collectives: a floor of 0 until a communicator charges
 * it. */
static enum vdev_status add_lib_members(const struct vdev_plan *plan,
                                        const struct plan_streams *ps)
{
    if (!plan->gpu || !plan->gpu->ops->coll_open)
        return VDEV_OK;
    for (int g = 0; g < VDEV_MAX_GPUS; g++) {
        if (!R.pools[g] || ps->on_card[g] != 1)
            continue;
        enum vdev_status st = vdev_runtime_lib_add(g, R.pools[g]);
        if (st != VDEV_OK)
            return st;
    }
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_init(void)
{
    if (atomic_load_explicit(&R.initialized, memory_order_acquire))
        return VDEV_OK;
    if (vdev_runtime_forked_from())
        return vdev_runtime_forked_error("vdev_init");
    pthread_once(&fork_once, watch_fork);
    pthread_mutex_lock(&R.lock);
    if (R.initialized) {
        pthread_mutex_unlock(&R.lock);
        return VDEV_OK;
    }
    struct vdev_plan *plan = vdev_calloc(1, sizeof *plan);
    if (!plan) {
        pthread_mutex_unlock(&R.lock);
        return vdev_error(VDEV_ERR_OOM, "out of host memory at start-up");
    }
    enum vdev_status st = vdev_config_freeze(plan);
    if (st != VDEV_OK)
        goto fail_plan;
    vdev_runtime_lib_forget();
    if (plan->alloc_trace_path[0] &&
        (st = vdev_alloc_trace_open(plan->alloc_trace_path, &R.trace)) != VDEV_OK) {
        vdev_error_prefix("VDEV_ALLOC_TRACE");
        goto fail;
    }
    /* The logical CPUs, each its own allocator over host memory, sharing
     * the host's memory with no floors. */
    st = vdev_pool_new("/physical_device:CPU:0", plan->cpu_limit_bytes, &R.cpu_pool);
    for (int i = 0; st == VDEV_OK && i < plan->n_cpus; i++)
        st = add_device(plan->cpu, 0, 0, VDEV_DEVICE_CPU, i, 0, plan->cpu_limit_bytes, 0,
                        VDEV_PRIORITY_NORMAL, VDEV_POLICY_GROW, plan->n_cpus > 1, R.cpu_pool);
    R.n_cpus = R.n;
    /* The logical GPUs: their streams first (what the streams take comes out
     * of the budgets), then the pools and the devices. */
    struct plan_streams *ps = vdev_calloc(1, sizeof *ps);
    if (st == VDEV_OK && !ps)
        st = vdev_error(VDEV_ERR_OOM, "out of host memory at start-up");
    if (st == VDEV_OK && plan->n_devices)
        st = open_streams(plan, ps);
    for (int i = 0; st == VDEV_OK && i < plan->n_devices; i++)
        st = add_gpu(plan, ps, i);
    if (st == VDEV_OK && plan->n_devices)
        st = add_lib_members(plan, ps);
    if (ps && plan->n_devices)
        close_streams(plan, ps);
    free(ps);
    if (st != VDEV_OK)
        goto fail;
    if ((st = vdev_placement_init_env()) != VDEV_OK)
        goto fail;
    if ((st = vdev_config_determinism_init_env()) != VDEV_OK)
        goto fail;
    if ((st = vdev_observe_init()) != VDEV_OK)
        goto fail;
    const char *oom = getenv("VDEV_OOM_REPORT");
    int report = 0;
    if (oom && (st = vdev_config_parse_bool("VDEV_OOM_REPORT", oom, &report)) != VDEV_OK)
        goto fail;
    atomic_store(&oom_report, report);
    if ((st = vdev_metrics_init_env()) != VDEV_OK)
        goto fail;
    free(plan);
    atomic_fetch_add_explicit(&R.generation, 1, memory_order_relaxed);
    atomic_store_explicit(&R.initialized, 1, memory_order_release);
    pthread_mutex_unlock(&R.lock);
    return VDEV_OK;
fail:
    teardown_locked();
    vdev_config_unfreeze();
fail_plan:
    free(plan);
    pthread_mutex_unlock(&R.lock);
    return st;
}

VDEV_API bool vdev_is_initialized(void)
{
    return atomic_load_explicit(&R.initialized, memory_order_acquire) != 0;
}

VDEV_API void vdev_shutdown(void)
{
    if (vdev_runtime_forked_from())
        return; /* the parent's runtime: nothing of it to give back here */
    if (vdev_is_initialized() && vdev_runtime_holders_release() != VDEV_OK)
        return; /* refused: a holder's blocks are live (vdev_last_error says) */
    vdev_placement_report_if_asked();
    pthread_mutex_lock(&R.lock);
    teardown_locked();
    atomic_store_explicit(&R.initialized, 0, memory_order_release);
    pthread_mutex_unlock(&R.lock);
    vdev_placement_forget_settings();
    vdev_config_determinism_forget();
    vdev_config_reset();
}

enum vdev_status vdev_runtime_ensure(void) { return vdev_init(); }

int vdev_runtime_n_devices(void) { return R.n; }

struct vdev_ldev *vdev_runtime_device(int id)
{
    return (id >= 0 && id < R.n) ? &R.devs[id] : NULL;
}

int vdev_runtime_n_cpus(void) { return R.n_cpus; }

struct vdev_ldev *vdev_runtime_default_device(void)
{
    return R.n > R.n_cpus ? &R.devs[R.n_cpus] : &R.devs[0];
}

struct vdev_ldev *vdev_runtime_lookup(enum vdev_device_type type, int index)
{
    if (index < 0)
        return NULL;
    if (type == VDEV_DEVICE_CPU)
        return index < R.n_cpus ? &R.devs[index] : NULL;
    return index < R.n - R.n_cpus ? &R.devs[R.n_cpus + index] : NULL;
}

enum vdev_status vdev_runtime_unknown_device(enum vdev_device_type type, int index)
{
    int cpu = type == VDEV_DEVICE_CPU;
    int have = cpu ? R.n_cpus : R.n - R.n_cpus;
    struct vdev_cluster_view cv; /* the task's name, as its devices' (add_device) */
    vdev_cluster_get(&cv);
    return vdev_error(VDEV_ERR_NOT_FOUND, "%s/device:%s:%d unknown device (there %s %d %s%s)",
                      cv.name, cpu ? "CPU" : "GPU", index, have == 1 ? "is" : "are", have,
                      cpu ? "CPU device" : "logical GPU", have == 1 ? "" : "s");
}

/* TensorFlow's words (tfe_wrapper.cc GetMatchedDevice) before the parser's
 * message: a name that does not parse, or names another job. */
static enum vdev_status failed_parsing(const char *name)
{
    enum vdev_status st = vdev_last_status();
    if (name && st == VDEV_ERR_INVALID_ARG)
        vdev_error_prefix("Failed parsing device name: '%s'", name);
    else if (name && st == VDEV_ERR_NOT_FOUND)
        vdev_error_prefix("No matching devices found for '%s'", name);
    return st;
}

enum vdev_status vdev_runtime_find(const char *name, struct vdev_ldev **out)
{
    *out = NULL;
    struct vdev_device_name dn;
    enum vdev_status st = vdev_parse_device_name(name, &dn);
    if (st != VDEV_OK)
        return failed_parsing(name);
    if (!dn.has_index && !dn.physical)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "Failed parsing device name: '%s'. Note a valid device string should at "
                          "least contain a device type and a device index, like \"GPU:0\".",
                          name);
    if ((st = vdev_init()) != VDEV_OK)
        return st;
    if (dn.physical)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "'%s' is a physical device; ops and memory queries take a logical "
                          "device such as /device:GPU:0",
                          name);
    *out = vdev_runtime_lookup(dn.type, dn.index);
    if (*out)
        return VDEV_OK;
    vdev_runtime_unknown_device(dn.type, dn.index);
    vdev_error_prefix("No matching devices found for '%s'", name);
    return VDEV_ERR_NOT_FOUND;
}

/* ---- public queries ---- */

VDEV_API enum vdev_status vdev_list_logical_devices(struct vdev_logical_device *out, int cap,
                                                    int *n)
{
    if (!n || cap < 0 || (cap > 0 && !out))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_list_logical_devices: bad arguments");
    enum vdev_status st = vdev_init();
    if (st != VDEV_OK)
        return st;
    for (int i = 0; i < R.n && i < cap; i++) {
        const struct vdev_ldev *d = &R.devs[i];
        struct vdev_logical_device *o = &out[i];
        memset(o, 0, sizeof *o);
        vdev_strlcpy(o->name, d->name, sizeof o->name);
        o->type = d->type;
        o->index = d->index;
        o->physical_index = d->physical;
        vdev_strlcpy(o->backend, d->backend->ops->name, sizeof o->backend);
        o->policy = d->policy;
        struct vdev_alloc_stats s;
        vdev_alloc_get_stats(d->alloc, &s);
        o->limit_bytes = s.bytes_limit; /* the ceiling now: it may change at run time */
    }
    *n = R.n;
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_device_canonical_name(const char *device, char *out, size_t cap)
{
    struct vdev_ldev *d = NULL;
    if (!out || cap == 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_device_canonical_name: no output buffer");
    enum vdev_status st = vdev_runtime_find(device, &d);
    if (st != VDEV_OK)
        return st;
    size_t need = strlen(d->name) + 1;
    if (need > cap) {
        out[0] = 0;
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "vdev_device_canonical_name: \"%s\" needs %zu bytes, out holds %zu",
                          d->name, need, cap);
    }
    memcpy(out, d->name, need);
    return VDEV_OK;
}
