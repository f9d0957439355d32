/* mpi_world.c — the process's MPI (see mpi_world.h): the plugin's loader,
 * the one start of MPI, the watchdog over blocking collectives, and the exit
 * handler that finalises MPI or, after a failure, ends the job.
 *
 * The plugin is found as the CUDA plugin is (vdev_plugin_dlopen:
 * $VDEV_MPI_PLUGIN, the installed plugin folder, the build tree's RUNPATH,
 * the loader's path) and asked for its table by its one symbol. Its table's
 * entries write one line into a buffer; the wrappers here make that line the
 * calling thread's error.
 *
 * The watchdog is a thread started with MPI. Each blocking collective arms a
 * slot with its deadline and a description before it calls MPI and disarms
 * it after; the thread sleeps until the earliest armed deadline (or a
 * change), and when one passes it prints "vdev: <what> did not finish within
 * N s (VDEV_MPI_TIMEOUT) ..." and calls MPI_Abort. A clean exit stops and
 * joins it before MPI is finalised. Everything here is one struct guarded
 * by one mutex.
 *
 * The exit. Open MPI's MPI_Finalize waits for every other process, so a
 * process that leaves early (a local error, exit() inside a step) must not
 * finalise: the others would wait in their next collective until
 * VDEV_MPI_TIMEOUT. The exit handler finalises only a clean exit: status 0
 * (read with glibc's on_exit) and no failure across processes (the plugin
 * then tells the others it leaves, so that one still waiting for it fails at
 * once); otherwise it ends the job (MPI_Abort with the exit status, or 1),
 * unless the job is this process alone (it finalises then: nobody waits).
 * Without on_exit the status is unknown, and a communicator across
 * processes still in use at exit counts as an early exit. A child that a
 * rank forks is no rank: its exit does neither. */
#define _GNU_SOURCE
#include "coll/mpi_world.h"

#include "backend/backend.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_SLOTS 32
#define VDEV_MPI_TIMEOUT_MIN_S 0.1
#define WHY 512

struct watch_slot {
    int armed;
    uint64_t deadline;
    char what[200];
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;            /* the watchdog's: armed slots changed */
    const struct vdev_mpi_ops *ops; /* the plugin's table, once loaded */
    int started;                    /* MPI started */
    int rank, size;
    uint64_t timeout_ns;
    int failed;
    char fail_msg[WHY];
    int live_comms;                 /* communicators made and not yet freed */
    int exit_registered;
    int watchdog_running;
    int watchdog_stop;              /* set at a clean exit: the watchdog returns */
    pthread_t watchdog;
    struct watch_slot slot[WATCH_SLOTS];
} W = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- VDEV_MPI_TIMEOUT ---- */

static enum vdev_status read_timeout(uint64_t *out)
{
    const char *v = getenv("VDEV_MPI_TIMEOUT");
    if (!v) {
        *out = (uint64_t)(VDEV_COMM_DEFAULT_TIMEOUT_S * 1e9);
        return VDEV_OK;
    }
    /* digits with at most one point: no signs, exponents, spaces or "nan" */
    int digits = 0, dots = 0, other = 0;
    for (const char *p = v; *p; p++) {
        if (*p >= '0' && *p <= '9')
            digits++;
        else if (*p == '.')
            dots++;
        else
            other++;
    }
    /* At least a tenth of a second: below it, a collective that every
     * process makes would fail only because its messages take that long. */
    double s = (digits && dots <= 1 && !other) ? strtod(v, NULL) : -1.0;
    if (!(s >= VDEV_MPI_TIMEOUT_MIN_S) || s > 1e9)
        return vdev_error(VDEV_ERR_CONFIG,
                          "VDEV_MPI_TIMEOUT=\"%s\": expected the seconds a process waits for "
                          "another, a decimal number from 0.1 to 1000000000 (such as 30 or 2.5)",
                          v);
    *out = (uint64_t)(s * 1e9);
    return VDEV_OK;
}

/* ---- the watchdog ---- */

static void *watchdog_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&W.lock);
    while (!W.watchdog_stop) {
        uint64_t first = UINT64_MAX;
        int which = -1;
        for (int i = 0; i < WATCH_SLOTS; i++)
            if (W.slot[i].armed && W.slot[i].deadline < first) {
                first = W.slot[i].deadline;
                which = i;
            }
        if (which >= 0 && vdev_now_ns() >= first) {
            char what[200];
            vdev_strlcpy(what, W.slot[which].what, sizeof what);
            double s = (double)W.timeout_ns / 1e9;
            const struct vdev_mpi_ops *ops = W.ops;
            pthread_mutex_unlock(&W.lock);
            fprintf(stderr,
                    "vdev: %s did not finish within %g s (VDEV_MPI_TIMEOUT): a process of the job "
                    "stopped or died; ending the job\n",
                    what, s);
            fflush(stderr);
            ops->abort(1);
            return NULL; /* not reached: MPI_Abort ends the process */
        }
        if (which < 0) {
            pthread_cond_wait(&W.cond, &W.lock);
        } else {
            struct timespec ts = {(time_t)(first / 1000000000ull), (long)(first % 1000000000ull)};
            pthread_cond_timedwait(&W.cond, &W.lock, &ts);
        }
    }
    pthread_mutex_unlock(&W.lock);
    return NULL;
}

/* Stops the watchdog and joins it (an exit that finalises MPI or returns:
 * no thread of vdev's outlives the job's end). Not from the watchdog
 * itself, whose MPI_Abort may run the exit handlers. */
static void watchdog_join(void)
{
    pthread_mutex_lock(&W.lock);
    int running = W.watchdog_running && !pthread_equal(W.watchdog, pthread_self());
    if (running) {
        W.watchdog_stop = 1;
        pthread_cond_signal(&W.cond);
    }
    pthread_mutex_unlock(&W.lock);
    if (!running)
        return;
    pthread_join(W.watchdog, NULL);
    pthread_mutex_lock(&W.lock);
    W.watchdog_running = 0;
    W.watchdog_stop = 0;
    pthread_mutex_unlock(&W.lock);
}

/* A free slot armed with now + timeout, or -1 when every slot is taken
 * (then the call runs unwatched). */
static int watch_arm(const char *what)
{
    pthread_mutex_lock(&W.lock);
    int s = -1;
    for (int i = 0; i < WATCH_SLOTS && s < 0; i++)
        if (!W.slot[i].armed)
            s = i;
    if (s >= 0) {
        W.slot[s].armed = 1;
        W.slot[s].deadline = vdev_now_ns() + W.timeout_ns;
        vdev_strlcpy(W.slot[s].what, what ? what : "a collective", sizeof W.slot[s].what);
        pthread_cond_signal(&W.cond);
    }
    pthread_mutex_unlock(&W.lock);
    return s;
}

static void watch_disarm(int s)
{
    if (s < 0)
        return;
    pthread_mutex_lock(&W.lock);
    W.slot[s].armed = 0;
    pthread_cond_signal(&W.cond);
    pthread_mutex_unlock(&W.lock);
}

/* ---- start and exit ---- */

static _Atomic long started_pid; /* the process that started MPI (0: none) */

/* status: the process's exit status, or -1 when unknown (no on_exit). */
static void exit_with(int status)
{
    /* A child forked from a rank is no rank: finalising (which waits for
     * the other ranks) or ending the job is the parent's to do. */
    if (atomic_load_explicit(&started_pid, memory_order_relaxed) != (long)getpid())
        return;
    pthread_mutex_lock(&W.lock);
    const struct vdev_mpi_ops *ops = W.started ? W.ops : NULL;
    int failed = W.failed, live = W.live_comms, rank = W.rank, size = W.size;
    char msg[WHY];
    vdev_strlcpy(msg, W.fail_msg, sizeof msg);
    pthread_mutex_unlock(&W.lock);
    if (!ops) {
        watchdog_join();
        return;
    }
    int code = status > 0 ? status : 1;
    if (size == 1 && !failed) {
        /* A job of one process (mpirun -np 1, or started without mpirun):
         * no other process waits for it, and MPI_Abort would only add
         * Open MPI's report to the program's own message. */
        watchdog_join();
        ops->finalize();
        return;
    }
    if (failed) {
        fprintf(stderr, "vdev: ending the job (MPI_Abort) after: %s\n", msg);
    } else if (status > 0) {
        fprintf(stderr,
                "vdev: rank %d exits with status %d; ending the job (MPI_Abort) so that no "
                "other process waits for it\n",
                rank, status);
    } else if (status < 0 && live > 0) {
        fprintf(stderr,
                "vdev: rank %d exits with a communicator across processes still in use; "
                "ending the job (MPI_Abort) so that no other process waits for it\n",
                rank);
    } else {
        watchdog_join();
        ops->finalize();
        return;
    }
    fflush(stderr);
    ops->abort(code);
}

#ifdef __GLIBC__
static void at_exit(int status, void *arg)
{
    (void)arg;
    exit_with(status & 0xff);
}
#define VDEV_REGISTER_EXIT() on_exit(at_exit, NULL)
#else
static void at_exit(void) { exit_with(-1); }
#define VDEV_REGISTER_EXIT() atexit(at_exit)
#endif

/* Loads the plugin's table (lock held). */
static enum vdev_status load_locked(void)
{
    if (W.ops)
        return VDEV_OK;
    char reason[WHY];
    void *h;
    enum vdev_status st = vdev_plugin_dlopen(VDEV_MPI_PLUGIN_NAME, "VDEV_MPI_PLUGIN",
                                             "MPI plugin", &h, reason, sizeof reason);
    if (st != VDEV_OK)
        return st;
    vdev_mpi_plugin_open_fn open_fn;
    *(void **)(&open_fn) = dlsym(h, VDEV_MPI_PLUGIN_SYMBOL);
    if (!open_fn) {
        st = vdev_error(VDEV_ERR_BACKEND, "MPI plugin: %s lacks the symbol %s",
                        vdev_plugin_file(h, VDEV_MPI_PLUGIN_NAME), VDEV_MPI_PLUGIN_SYMBOL);
        dlclose(h);
        return st;
    }
    const struct vdev_mpi_ops *ops = NULL;
    reason[0] = '\0';
    st = open_fn(VDEV_MPI_API_VERSION, &ops, reason, sizeof reason);
    if (st != VDEV_OK || !ops || ops->api_version != VDEV_MPI_API_VERSION)
        /* the plugin stays loaded: nothing of it is in use, but closing
         * MPI's libraries is not always safe */
        return vdev_error(st != VDEV_OK ? st : VDEV_ERR_BACKEND, "MPI plugin: %s",
                          reason[0] ? reason : "API version mismatch");
    W.ops = ops;
    return VDEV_OK;
}

enum vdev_status vdev_mpi_world_start(void)
{
    pthread_mutex_lock(&W.lock);
    enum vdev_status st = VDEV_OK;
    if (W.started)
        goto out;
    uint64_t t = 0;
    if ((st = read_timeout(&t)) != VDEV_OK || (st = load_locked()) != VDEV_OK)
        goto out;
    if (!W.watchdog_running) {
        pthread_condattr_t ca;
        int ok = pthread_condattr_init(&ca) == 0 &&
                 pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                 pthread_cond_init(&W.cond, &ca) == 0;
        pthread_condattr_destroy(&ca);
        ok = ok && pthread_create(&W.watchdog, NULL, watchdog_main, NULL) == 0;
        if (ok)
            (void)pthread_setname_np(W.watchdog, "vdev-mpi-watch");
        if (!ok) {
            st = vdev_error(VDEV_ERR_BACKEND, "cannot start the MPI watchdog thread");
            goto out;
        }
        W.watchdog_running = 1;
    }
    char why[WHY] = "";
    int rank = 0, size = 1;
    st = W.ops->init(&rank, &size, why, sizeof why);
    if (st != VDEV_OK) {
        st = vdev_error(st, "MPI: %s", why);
        goto out;
    }
    W.timeout_ns = t;
    W.rank = rank;
    W.size = size;
    W.started = 1;
    atomic_store_explicit(&started_pid, (long)getpid(), memory_order_relaxed);
    if (!W.exit_registered && VDEV_REGISTER_EXIT() == 0)
        W.exit_registered = 1;
out:
    pthread_mutex_unlock(&W.lock);
    return st;
}

int vdev_mpi_world_rank(void)
{
    pthread_mutex_lock(&W.lock);
    int r = W.rank;
    pthread_mutex_unlock(&W.lock);
    return r;
}

int vdev_mpi_world_size(void)
{
    pthread_mutex_lock(&W.lock);
    int n = W.started ? W.size : 0;
    pthread_mutex_unlock(&W.lock);
    return n;
}

const char *vdev_mpi_world_library(void)
{
    pthread_mutex_lock(&W.lock);
    const char *s = W.started ? W.ops->library() : "";
    pthread_mutex_unlock(&W.lock);
    return s;
}

uint64_t vdev_mpi_timeout_ns(void)
{
    pthread_mutex_lock(&W.lock);
    uint64_t t = W.timeout_ns;
    pthread_mutex_unlock(&W.lock);
    return t;
}

uint64_t vdev_mpi_deadline(void) { return vdev_now_ns() + vdev_mpi_timeout_ns(); }

void vdev_mpi_world_fail(const char *why)
{
    pthread_mutex_lock(&W.lock);
    if (!W.failed) {
        W.failed = 1;
        vdev_strlcpy(W.fail_msg, why ? why : "an MPI failure", sizeof W.fail_msg);
    }
    pthread_mutex_unlock(&W.lock);
}

int vdev_mpi_world_failed(void)
{
    pthread_mutex_lock(&W.lock);
    int f = W.failed;
    pthread_mutex_unlock(&W.lock);
    return f;
}

/* ---- calls ---- */

/* The table, for a started world (the callers hold a communicator, which
 * only a started world makes). */
static const struct vdev_mpi_ops *ops(void)
{
    pthread_mutex_lock(&W.lock);
    const struct vdev_mpi_ops *o = W.ops;
    pthread_mutex_unlock(&W.lock);
    return o;
}

/* A plugin failure as this thread's error: "MPI: <why>". */
static enum vdev_status mpi_error(enum vdev_status st, const char *why)
{
    return vdev_error(st, "MPI: %s", why);
}

enum vdev_status vdev_mpi_comm_new(vdev_mpi_comm_t **out)
{
    *out = NULL;
    enum vdev_status st = vdev_mpi_world_start();
    if (st != VDEV_OK)
        return st;
    char why[WHY] = "";
    st = ops()->comm_dup(out, why, sizeof why);
    if (st != VDEV_OK)
        return mpi_error(st, why);
    pthread_mutex_lock(&W.lock);
    W.live_comms++;
    pthread_mutex_unlock(&W.lock);
    return VDEV_OK;
}

void vdev_mpi_comm_free(vdev_mpi_comm_t *c, int spent)
{
    if (!c)
        return;
    ops()->comm_free(c, spent);
    pthread_mutex_lock(&W.lock);
    W.live_comms--;
    pthread_mutex_unlock(&W.lock);
}

enum vdev_status vdev_mpi_exchange(vdev_mpi_comm_t *c, int tag, const void *mine, void *all,
                                   size_t bytes, uint64_t deadline, unsigned char *arrived)
{
    char why[WHY] = "";
    enum vdev_status st = ops()->exchange(c, tag, mine, all, bytes, deadline, arrived, why,
                                          sizeof why);
    return st == VDEV_OK ? VDEV_OK : mpi_error(st, why);
}

enum vdev_status vdev_mpi_allreduce(vdev_mpi_comm_t *c, void *buf, uint64_t count,
                                    enum vdev_mpi_type type, enum vdev_mpi_op op,
                                    const char *what)
{
    char why[WHY] = "";
    int s = watch_arm(what);
    enum vdev_status st = ops()->allreduce(c, buf, count, type, op, why, sizeof why);
    watch_disarm(s);
    return st == VDEV_OK ? VDEV_OK : mpi_error(st, why);
}

enum vdev_status vdev_mpi_bcast(vdev_mpi_comm_t *c, void *buf, uint64_t bytes, int root,
                                const char *what)
{
    char why[WHY] = "";
    int s = watch_arm(what);
    enum vdev_status st = ops()->bcast(c, buf, bytes, root, why, sizeof why);
    watch_disarm(s);
    return st == VDEV_OK ? VDEV_OK : mpi_error(st, why);
}

enum vdev_status vdev_mpi_allgatherv(vdev_mpi_comm_t *c, const void *in, void *out,
                                     const uint64_t *bytes, const char *what)
{
    char why[WHY] = "";
    int s = watch_arm(what);
    enum vdev_status st = ops()->allgatherv(c, in, out, bytes, why, sizeof why);
    watch_disarm(s);
    return st == VDEV_OK ? VDEV_OK : mpi_error(st, why);
}

enum vdev_status vdev_mpi_send(vdev_mpi_comm_t *c, const void *buf, uint64_t bytes, int dest,
                               int tag, uint64_t deadline)
{
    char why[WHY] = "";
    enum vdev_status st = ops()->send(c, buf, bytes, dest, tag, deadline, why, sizeof why);
    return st == VDEV_OK ? VDEV_OK : mpi_error(st, why);
}

enum vdev_status vdev_mpi_probe(vdev_mpi_comm_t *c, int src, int tag, uint64_t deadline,
                                int *src_out, int *tag_out, uint64_t *bytes_out)
{
    char why[WHY] = "";
    enum vdev_status st =
        ops()->probe(c, src, tag, deadline, src_out, tag_out, bytes_out, why, sizeof why);
    return st == VDEV_OK ? VDEV_OK : mpi_error(st, why);
}

enum vdev_status vdev_mpi_recv(vdev_mpi_comm_t *c, void *buf, uint64_t cap_bytes)
{
    char why[WHY] = "";
    enum vdev_status st = ops()->recv(c, buf, cap_bytes, why, sizeof why);
    return st == VDEV_OK ? VDEV_OK : mpi_error(st, why);
}
