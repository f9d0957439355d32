/* threads.c — the thread plan of host work (see threads.h): CPUs from the
 * affinity mask and the cgroup quota, the matrix-product budget from the
 * environment, streams from the runtime's devices; OpenBLAS kept at one
 * thread (vdev splits a product over its own pool instead: parallel.c), and a
 * gate around products that counts the ones running.
 *
 * The gate is one mutex: a product takes a slot when fewer than `permits`
 * run, and runs without the lock. When every slot is taken, it is queued
 * for a thread that holds a slot: that thread, having run its own product,
 * runs the queued ones before it gives its slot back, and the submitter
 * waits until its product is done (polling a while first where the plan
 * leaves a CPU no slot uses: product_start). So a slot never waits for a sleeping
 * thread to wake up (with a budget of one and three streams, a wake-up per
 * product left the one slot idle for tens of microseconds 24 times a
 * chain3 step). A queued product of a more important thread (a lower nice
 * value: a critical or high-priority device's stream) is not run by a less
 * important one: the slot is handed to its own thread instead, and such
 * products queue ahead of the others. The plan changes only when no
 * product runs: a product that finds it out of date (a new start-up, or the
 * determinism switch flipped) waits for the running ones to finish, makes
 * it, and goes on. The pool reads its part counts (a kernel's, a product's)
 * from atomics, updated with the plan.
 *
 * Why OpenBLAS runs single-threaded even with one stream: its idle threads
 * wait for the next product by spinning on sched_yield for about 2^28 cycles
 * (0.3.21's default THREAD_TIMEOUT), so between products they hold the other
 * cores. An Adam update right after a product ran 1.5-2x slower beside them
 * on the 2-core development machine, and the process used every core all the
 * time. vdev's pool splits the product instead, each part an OpenBLAS call
 * of its own, and its workers sleep after a short wait (parallel.c). In runs
 * that alternated the two ways in one process, chain3's step on the cpu
 * backend was faster this way (fastest of twelve turns, three runs: 5.70-
 * 5.94 ms against 6.36-6.51) and the MLP 1024-4096-4096-10's the same
 * within the noise.
 *
 * At exit, products stop: a program that returns from main without
 * vdev_shutdown() while a simulated GPU's stream still runs its queue would
 * otherwise have a product running while OpenBLAS is torn down (its
 * destructor frees the buffers sgemm works in: a crash). A destructor of
 * this library waits for the running products and holds every later one
 * back for good; the process ends around it. It runs after every exit
 * handler (atexit) and before OpenBLAS's destructor (the loader finalises a
 * library before the ones it depends on), so an exit handler of the
 * program may still use vdev: atexit(vdev_shutdown) with products queued,
 * or a last product read back, completes (an atexit handler of vdev's own
 * that held products back hung both for ever: tests/test_exit_product.c).
 * A child forked while products ran has none of their threads: a
 * pthread_atfork handler empties its copy of the gate (fork_child), so
 * neither its exit nor its own products wait for the parent's. */
#define _GNU_SOURCE
#include "ops/threads.h"

#include "base/base.h"
#include "config/config.h"
#include "runtime/runtime.h"

#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A product waiting for a slot: run by a slot's holder, or handed the slot. */
struct product_req {
    void (*fn)(void *);
    void *arg;
    int nice;     /* the submitting thread's nice value */
    int state;    /* REQ_WAITING, REQ_DONE (run for it), REQ_SLOT (its own now) */
    int sleeping; /* waits on cv (else it polls: the holder need not wake it) */
    pthread_cond_t cv;
    struct product_req *next;
};
enum { REQ_WAITING, REQ_DONE, REQ_SLOT };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;            /* broadcast when no product runs any more */
    struct product_req *queue;    /* by nice value, then submission order */
    _Atomic int in_flight;        /* products running (changed under the lock) */
    int peak_in_flight;           /* the most that ran at once (tests) */
    int exiting;                  /* the process is exiting: no new product starts */
    struct vdev_thread_plan plan; /* plan.key 0: none yet (generations start at 1) */
    _Atomic uint64_t key;         /* plan.key, for the lock-free check */
    _Atomic int kernel_parts;
    _Atomic int product_parts; /* plan.info.blas_threads */
} G = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* ---- the pieces ---- */

int vdev_threads_parse_count(const char *v)
{
    if (!v)
        return 0;
    while (isspace((unsigned char)*v))
        v++;
    if (!isdigit((unsigned char)*v))
        return 0;
    /* Any whole number: the count is a ceiling, capped at the CPUs where it
     * is used (as OpenBLAS caps its threads), so one beyond an int (even
     * beyond 64 bits) is read as INT_MAX, not refused. */
    int n = 0;
    const char *end = v;
    for (; isdigit((unsigned char)*end); end++) {
        int d = *end - '0';
        n = n > (INT_MAX - d) / 10 ? INT_MAX : n * 10 + d;
    }
    while (isspace((unsigned char)*end))
        end++;
    if ((*end && *end != ',') || n < 1)
        return 0;
    return n;
}

/* The quota in whole CPUs from one cgroup folder: v2's cpu.max ("max 100000"
 * or "150000 100000"), else v1's cpu.cfs_quota_us / cpu.cfs_period_us (-1:
 * none). 0: none, or nothing readable. */
/* dir/name opened for reading, or NULL (also for a path too long). */
static FILE *open_in(const char *dir, const char *name)
{
    char path[PATH_MAX + 32];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    return n > 0 && (size_t)n < sizeof path ? fopen(path, "r") : NULL;
}

static int quota_in(const char *dir)
{
    long long quota = -1, period = 0;
    FILE *f = open_in(dir, "cpu.max");
    if (f) {
        char q[32] = "";
        if (fscanf(f, "%31s %lld", q, &period) == 2 && strcmp(q, "max") != 0)
            quota = strtoll(q, NULL, 10);
        fclose(f);
    } else {
        if ((f = open_in(dir, "cpu.cfs_quota_us"))) {
            if (fscanf(f, "%lld", &quota) != 1)
                quota = -1;
            fclose(f);
        }
        if ((f = open_in(dir, "cpu.cfs_period_us"))) {
            if (fscanf(f, "%lld", &period) != 1)
                period = 0;
            fclose(f);
        }
    }
    if (quota <= 0 || period <= 0)
        return 0;
    long long cpus = (quota + period - 1) / period;
    return cpus > INT_MAX ? INT_MAX : (int)cpus;
}

/* The smallest quota from dir up to stop (both included; dir lies under
 * stop), 0 when none. */
static int quota_up(char *dir, size_t stop_len)
{
    int best = 0;
    for (;;) {
        int q = quota_in(dir);
        if (q && (!best || q < best))
            best = q;
        if (strlen(dir) <= stop_len)
            return best;
        char *slash = strrchr(dir + stop_len, '/');
        if (!slash)
            return best;
        *slash = '\0';
    }
}

int vdev_threads_cgroup_cpus(const char *proc_cgroup, const char *root)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return 0;
    char line[1024], dir[PATH_MAX];
    int best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        /* "ID:CONTROLLERS:PATH"; v2 has ID 0 and no controllers. */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        const char *ctl = c1 + 1, *path = c2 + 1;
        if (strcmp(path, "/") == 0)
            path = "";
        const char *subs[3] = {NULL, NULL, NULL};
        if (!*ctl && !strcmp(line, "0")) {
            subs[0] = ""; /* v2: one hierarchy at the root */
        } else {
            int has_cpu = 0;
            char ctls[256];
            vdev_strlcpy(ctls, ctl, sizeof ctls);
            for (char *save, *t = strtok_r(ctls, ",", &save); t; t = strtok_r(NULL, ",", &save))
                has_cpu |= !strcmp(t, "cpu");
            if (!has_cpu)
                continue;
            subs[0] = "/cpu";
            subs[1] = "/cpu,cpuacct";
            subs[2] = "/cpuacct,cpu";
        }
        for (int s = 0; s < 3 && subs[s]; s++) {
            /* The process's own folder and those above it; inside a container
             * without a cgroup namespace the path names the host's folders,
             * which are not mounted: then the mount's root alone. */
            int n = snprintf(dir, sizeof dir, "%s%s%s", root, subs[s], path);
            if (n < 0 || (size_t)n >= sizeof dir)
                continue;
            size_t stop = strlen(root) + strlen(subs[s]);
            int q = quota_up(dir, stop);
            if (q && (!best || q < best))
                best = q;
        }
    }
    fclose(f);
    return best;
}

/* CPUs in the affinity mask (the online CPUs when it cannot be read). */
static int affinity_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- the plan ---- */

static uint64_t key_now(int deterministic)
{
    return ((uint64_t)vdev_runtime_generation() << 1) | (deterministic ? 1u : 0u);
}

/* Host threads that may run products at the same time: one per simulated
 * GPU stream (each logical GPU has a stream of its own, so a card split
 * three ways counts three), plus the logical CPUs when there are several. */
static int count_streams(void)
{
    int streams = 0, cpus = 0;
    const struct vdev_backend *seen_b[VDEV_MAX_LDEVS];
    int seen_d[VDEV_MAX_LDEVS], n_seen = 0;
    for (int i = 0; i < vdev_runtime_n_devices(); i++) {
        const struct vdev_ldev *d = vdev_runtime_device(i);
        const struct vdev_backend_ops *o = d->backend->ops;
        if (!o->is_gpu) {
            cpus++;
            continue;
        }
        if (!o->host_addressable || o->run_kernel)
            continue; /* a real GPU: its products are not host threads */
        int dup = 0;
        for (int k = 0; k < n_seen && !dup; k++)
            dup = seen_b[k] == d->backend && seen_d[k] == d->bdev;
        if (dup || n_seen == VDEV_MAX_LDEVS)
            continue;
        seen_b[n_seen] = d->backend;
        seen_d[n_seen++] = d->bdev;
        streams++;
    }
    if (cpus > 1)
        streams += cpus;
    return streams > 0 ? streams : 1;
}

/* A thread count from the environment (0: unset or junk). Junk is ignored,
 * as OpenBLAS and OpenMP ignore it, but said once a process: a budget the
 * user meant to set and did not is not silent. */
static atomic_flag warned_blas = ATOMIC_FLAG_INIT, warned_omp = ATOMIC_FLAG_INIT;

static int count_from_env(const char *var, atomic_flag *warned)
{
    const char *v = getenv(var);
    int n = vdev_threads_parse_count(v);
    if (v && !n && !atomic_flag_test_and_set(warned))
        vdev_log_warning("%s=\"%s\" is not a whole number >= 1, so it is ignored (as OpenBLAS "
                         "and OpenMP ignore it)",
                         var, v);
    return n;
}

static void make_plan(struct vdev_thread_plan *p, int deterministic)
{
    struct vdev_thread_info *t = &p->info;
    memset(p, 0, sizeof *p);
    int aff = affinity_cpus();
    t->cgroup_cpus = vdev_threads_cgroup_cpus("/proc/self/cgroup", "/sys/fs/cgroup");
    t->cpus = t->cgroup_cpus && t->cgroup_cpus < aff ? t->cgroup_cpus : aff;
    int blas_env = count_from_env("OPENBLAS_NUM_THREADS", &warned_blas);
    int omp_env = count_from_env("OMP_NUM_THREADS", &warned_omp);
    t->blas_budget = blas_env ? blas_env : omp_env ? omp_env : t->cpus;
    t->streams = vdev_is_initialized() ? count_streams() : 1;
    t->deterministic = deterministic != 0;
    /* vdev splits a product over its pool, OpenBLAS computing each part
     * single-threaded (apply_plan): never OpenBLAS's own threads. The budget
     * is a ceiling: beyond the CPUs, a product's blocks or concurrent
     * products would only share them by time slices (chain3 with a budget of
     * 4 on 2 CPUs: 10.9 ms a step against 5.8 with 2). */
    int usable = t->blas_budget < t->cpus ? t->blas_budget : t->cpus;
    /* Under the determinism switch too: its products are cut into blocks
     * fixed by their shapes (kernels_host.c), whatever runs them. */
    t->blas_threads = t->streams >= 2 ? 1 : usable;
    t->concurrent_products = t->streams >= 2 ? usable : 0;
    int pool = omp_env && omp_env < t->cpus ? omp_env : t->cpus; /* a ceiling too */
    t->kernel_threads = pool / t->streams > 1 ? pool / t->streams : 1;
    p->key = key_now(deterministic);
}

/* Makes the plan for `det` current; the lock is held and no product runs. */
static void apply_plan(int det)
{
    make_plan(&G.plan, det);
    if (openblas_get_num_threads() != 1)
        openblas_set_num_threads(1);
    atomic_store_explicit(&G.kernel_parts, G.plan.info.kernel_threads, memory_order_relaxed);
    atomic_store_explicit(&G.product_parts, G.plan.info.blas_threads, memory_order_relaxed);
    atomic_store_explicit(&G.key, G.plan.key, memory_order_release);
}

/* fork(): the gate is taken around the fork, so the child's copy is
 * consistent; there, the products the parent's threads were running or
 * waiting for are no work of the child's (their threads are not there to
 * finish them, their requests lie on those threads' stacks): none runs or
 * waits, and the condition variable, which may count the parent's waiters,
 * starts anew. Without this, a child forked while a product ran waited for
 * it for ever in at_unload (or in any product it ran). */
static void fork_prepare(void) { pthread_mutex_lock(&G.lock); }

static void fork_parent(void) { pthread_mutex_unlock(&G.lock); }

static void fork_child(void)
{
    G.queue = NULL;
    atomic_store_explicit(&G.in_flight, 0, memory_order_relaxed);
    G.peak_in_flight = 0;
    pthread_cond_init(&G.cv, NULL);
    pthread_mutex_unlock(&G.lock);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void watch_fork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

struct vdev_thread_plan vdev_threads_plan(void)
{
    int det = vdev_deterministic();
    pthread_once(&fork_once, watch_fork); /* watched from the gate's first use */
    pthread_mutex_lock(&G.lock);
    while (G.plan.key != key_now(det) && G.in_flight)
        pthread_cond_wait(&G.cv, &G.lock);
    if (G.plan.key != key_now(det))
        apply_plan(det);
    struct vdev_thread_plan p = G.plan;
    pthread_mutex_unlock(&G.lock);
    return p;
}

/* See the top of the file: after the exit handlers, before OpenBLAS goes. */
__attribute__((destructor)) static void at_unload(void)
{
    if (vdev_runtime_forked_from())
        return; /* the products in flight at fork() are the parent's */
    pthread_mutex_lock(&G.lock);
    G.exiting = 1;
    while (G.in_flight)
        pthread_cond_wait(&G.cv, &G.lock);
    pthread_mutex_unlock(&G.lock);
}

/* This thread's nice value, read once (a stream's worker sets its own when
 * it starts, before its first product). */
static int thread_nice(void)
{
    static _Thread_local int known, nice;
    if (!known) {
        errno = 0;
        int v = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
        nice = errno ? 0 : v;
        known = 1;
    }
    return nice;
}

/* How long a request for a slot polls before it sleeps (product_start). */
#define POLL_NS 1000000

/* Queues r behind every request at least as important (lock held). */
static void queue_put(struct product_req *r)
{
    struct product_req **at = &G.queue;
    while (*at && (*at)->nice <= r->nice)
        at = &(*at)->next;
    r->next = *at;
    *at = r;
}

/* Takes a slot for a product of `det`'s plan, or queues `fn` for a holder
 * of one: returns 1 when the caller holds a slot (and must run fn, then
 * product_finish), 0 when fn has been run for it. Lock held throughout. */
static int product_start(int det, void (*fn)(void *), void *arg)
{
    uint64_t key = key_now(det);
    for (;;) {
        if (G.exiting) { /* held back until the process is gone */
            pthread_cond_wait(&G.cv, &G.lock);
            continue;
        }
        if (G.plan.key != key) {
            if (G.in_flight) {
                pthread_cond_wait(&G.cv, &G.lock);
                continue;
            }
            apply_plan(det);
        }
        int permits = G.plan.info.concurrent_products;
        if (!permits || G.in_flight < permits)
            break;
        /* Every slot is taken, and each holder runs the queue before it lets
         * go (the plan cannot change meanwhile: that waits for no product to
         * run), so the request is run or handed a slot. */
        struct product_req r = {.fn = fn, .arg = arg, .nice = thread_nice(), .state = REQ_WAITING};
        pthread_cond_init(&r.cv, NULL);
        queue_put(&r);
        /* Where the plan leaves a CPU that no slot uses, the request polls
         * for a while, yielding that CPU to any other work, before it
         * sleeps: waking a sleeper costs the holder a system call, and the
         * sleeper a trip through the scheduler, on every product handed
         * back (chain3 on three simulated GPUs with a budget of one
         * product at a time: 6.44 ms a step sleeping, 6.13 polling, fastest
         * of ten turns). Where the slots use every CPU, a poller would take
         * time from the products themselves: it sleeps at once. */
        uint64_t poll_until = permits < G.plan.info.cpus ? vdev_now_ns() + POLL_NS : 0;
        for (unsigned i = 0; r.state == REQ_WAITING; i++) {
            if (poll_until && ((i & 15) || vdev_now_ns() < poll_until)) {
                pthread_mutex_unlock(&G.lock);
                sched_yield();
                pthread_mutex_lock(&G.lock);
                continue;
            }
            r.sleeping = 1;
            pthread_cond_wait(&r.cv, &G.lock);
        }
        pthread_cond_destroy(&r.cv);
        return r.state == REQ_SLOT;
    }
    if (++G.in_flight > G.peak_in_flight)
        G.peak_in_flight = G.in_flight;
    return 1;
}

/* The caller's product has run: runs the queued ones it may, hands its slot
 * to a more important one or gives it back (lock held). */
static void product_finish(void)
{
    int mine = thread_nice();
    while (G.queue && !G.exiting) {
        struct product_req *r = G.queue;
        G.queue = r->next;
        if (r->nice < mine) {
            r->state = REQ_SLOT; /* in_flight stays: the slot changes hands */
            if (r->sleeping)
                pthread_cond_signal(&r->cv);
            return;
        }
        pthread_mutex_unlock(&G.lock);
        r->fn(r->arg);
        pthread_mutex_lock(&G.lock);
        r->state = REQ_DONE;
        if (r->sleeping)
            pthread_cond_signal(&r->cv);
    }
    if (--G.in_flight == 0)
        pthread_cond_broadcast(&G.cv);
}

void vdev_threads_product_run(int det, void (*fn)(void *), void *arg)
{
    pthread_once(&fork_once, watch_fork);
    pthread_mutex_lock(&G.lock);
    if (product_start(det, fn, arg)) {
        pthread_mutex_unlock(&G.lock);
        fn(arg);
        pthread_mutex_lock(&G.lock);
        product_finish();
    }
    pthread_mutex_unlock(&G.lock);
}

int vdev_threads_peak_products(void)
{
    pthread_mutex_lock(&G.lock);
    int peak = G.peak_in_flight;
    G.peak_in_flight = G.in_flight;
    pthread_mutex_unlock(&G.lock);
    return peak;
}

int vdev_threads_queued(void)
{
    pthread_mutex_lock(&G.lock);
    int n = 0;
    for (const struct product_req *r = G.queue; r; r = r->next)
        n++;
    pthread_mutex_unlock(&G.lock);
    return n;
}

int vdev_threads_sleepers(void)
{
    pthread_mutex_lock(&G.lock);
    int n = 0;
    for (const struct product_req *r = G.queue; r; r = r->next)
        n += r->sleeping;
    pthread_mutex_unlock(&G.lock);
    return n;
}

int vdev_threads_product_parts(void)
{
    return atomic_load_explicit(&G.product_parts, memory_order_relaxed);
}

int vdev_threads_kernel_parts(void)
{
    uint64_t key = key_now(vdev_deterministic());
    if (atomic_load_explicit(&G.key, memory_order_acquire) != key)
        vdev_threads_plan();
    return atomic_load_explicit(&G.kernel_parts, memory_order_relaxed);
}

/* ---- the public query ---- */

VDEV_API enum vdev_status vdev_thread_info(struct vdev_thread_info *out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_thread_info: out is NULL");
    enum vdev_status st = vdev_runtime_ensure();
    if (st != VDEV_OK)
        return st;
    *out = vdev_threads_plan().info;
    return VDEV_OK;
}
