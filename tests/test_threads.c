/* test_threads.c — the thread plan (src/ops/threads.h, vdev_thread_info):
 * the user's OPENBLAS_NUM_THREADS / OMP_NUM_THREADS is a budget divided
 * among the streams that run products at the same time, never multiplied by
 * them.
 *
 *  - parsing of thread counts ("4", "4,2", junk);
 *  - the cgroup CPU quota, v2 (cpu.max) and v1 (cpu.cfs_quota_us), on fake
 *    trees: rounding up, no quota, the smallest along the path, a path not
 *    mounted (a container without a cgroup namespace);
 *  - the plan under each setting: the cpu backend alone (the whole budget
 *    per product, at most the CPUs, split by vdev's pool), three simulated GPUs with
 *    OPENBLAS_NUM_THREADS=2 (one thread per product, at most 2 products at
 *    once: the trap that made chain3 3-4x slower), logical CPUs, one GPU
 *    split in logical GPUs (one stream), OMP_NUM_THREADS alone, junk in the
 *    variables;
 *  - OpenBLAS's own count after a product (always 1: vdev splits products
 *    itself), and the most products seen running at once on three streams
 *    with a budget of 1;
 *  - the gate: with every slot taken, a product is run by the slot's holder
 *    (on its thread, the submitter waiting until it is done), and a product
 *    of a more important thread (lower nice value) is handed the slot and
 *    runs on its own thread; the products' results on three streams at a
 *    budget of one against a plain reference; a waiting product polls, then
 *    sleeps, and is woken either way;
 *  - the determinism switch: the same threads per product while it is on
 *    (its products are cut into blocks fixed by their shapes), OpenBLAS at
 *    one thread either way;
 *  - vdev_thread_info(NULL). */
#define _GNU_SOURCE
#include "check.h"
#include "ops/threads.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static char root[256];

/* Writes text to root/rel, making the folders on the way. */
static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int quota(const char *proc_text)
{
    put("proc_cgroup", proc_text);
    char proc[512], sys[512];
    snprintf(proc, sizeof proc, "%s/proc_cgroup", root);
    snprintf(sys, sizeof sys, "%s/sys", root);
    return vdev_threads_cgroup_cpus(proc, sys);
}

static void parse_counts(void)
{
    CHECK(vdev_threads_parse_count("4") == 4);
    CHECK(vdev_threads_parse_count(" 3 ") == 3);
    CHECK(vdev_threads_parse_count("4,2") == 4);
    CHECK(vdev_threads_parse_count(NULL) == 0);
    CHECK(vdev_threads_parse_count("") == 0);
    CHECK(vdev_threads_parse_count("0") == 0);
    CHECK(vdev_threads_parse_count("-2") == 0);
    CHECK(vdev_threads_parse_count("two") == 0);
    CHECK(vdev_threads_parse_count("2x") == 0);
    /* above the CPUs is not malformed: a ceiling, capped where it is used */
    CHECK(vdev_threads_parse_count("5000") == 5000);
    CHECK(vdev_threads_parse_count("2147483647") == INT_MAX);
    CHECK(vdev_threads_parse_count("2147483648") == INT_MAX);
    CHECK(vdev_threads_parse_count("99999999999999999999,2") == INT_MAX);
    CHECK(vdev_threads_parse_count("00012") == 12);
}

static void cgroups(void)
{
    snprintf(root, sizeof root, "/tmp/vdev_test_threads_%d", (int)getpid());
    mkdir(root, 0755);
    /* v2: the process's folder and its parent */
    put("sys/cpu.max", "max 100000\n");
    put("sys/box/cpu.max", "max 100000\n");
    put("sys/box/app/cpu.max", "150000 100000\n");
    CHECK(quota("0::/box/app\n") == 2); /* 1.5 CPUs, rounded up */
    put("sys/box/cpu.max", "100000 100000\n");
    CHECK(quota("0::/box/app\n") == 1); /* the parent's is smaller */
    put("sys/box/app/cpu.max", "max 100000\n");
    put("sys/box/cpu.max", "max 100000\n");
    CHECK(quota("0::/box/app\n") == 0); /* no quota anywhere */
    put("sys/cpu.max", "300000 100000\n");
    CHECK(quota("0::/\n") == 3); /* a container: its root */
    CHECK(quota("0::/not/mounted/here\n") == 3); /* the host's path: the root's quota */
    put("sys/cpu.max", "max 100000\n");
    CHECK(quota("0::/not/mounted/here\n") == 0);
    /* v1: cpu,cpuacct; -1 is no quota */
    put("sys/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put("sys/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    put("sys/cpu,cpuacct/job/cpu.cfs_quota_us", "250000\n");
    put("sys/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
    const char *v1 = "12:memory:/job\n4:cpu,cpuacct:/job\n1:name=systemd:/job\n";
    CHECK(quota(v1) == 3);
    put("sys/cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
    CHECK(quota(v1) == 0);
    CHECK(quota("4:cpuset:/job\n") == 0); /* no cpu controller */
    CHECK(quota("garbage\n") == 0);
    char missing[512];
    snprintf(missing, sizeof missing, "%s/no_such_file", root);
    CHECK(vdev_threads_cgroup_cpus(missing, root) == 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}

/* A fresh start with the given environment (NULL: unset), then one product
 * on dev so that OpenBLAS's count follows the plan. */
static struct vdev_thread_info start(const char *sim, const char *logical, const char *blas,
                                     const char *omp, const char *dev)
{
    check_fresh(sim);
    if (logical)
        setenv("VDEV_LOGICAL_DEVICES", logical, 1);
    if (blas)
        setenv("OPENBLAS_NUM_THREADS", blas, 1);
    else
        unsetenv("OPENBLAS_NUM_THREADS");
    if (omp)
        setenv("OMP_NUM_THREADS", omp, 1);
    else
        unsetenv("OMP_NUM_THREADS");
    struct vdev_thread_info t;
    memset(&t, 0xff, sizeof t);
    CHECK_OK(vdev_thread_info(&t));
    vdev_scope_begin();
    int64_t s[2] = {8, 8};
    vdev_device_push(dev);
    vdev_tensor_t *a = vdev_tensor_uniform(s, 2, -1, 1, 1);
    CHECK(vdev_tensor_item(vdev_sum_all(vdev_matmul(a, a, false, false))) ==
          vdev_tensor_item(vdev_sum_all(vdev_matmul(a, a, false, false))));
    vdev_device_pop();
    vdev_scope_end();
    return t;
}

static int cpus_allowed(void)
{
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
    int n = CPU_COUNT(&set);
    int q = vdev_threads_cgroup_cpus("/proc/self/cgroup", "/sys/fs/cgroup");
    return q && q < n ? q : n;
}

static void plans(void)
{
    int cpus = cpus_allowed();
    /* The cpu backend alone: one stream, the whole budget per product. */
    struct vdev_thread_info t = start(NULL, NULL, "3", NULL, "CPU:0");
    CHECK(t.cpus == cpus);
    CHECK(t.blas_budget == 3 && t.streams == 1 && t.blas_threads == (cpus < 3 ? cpus : 3));
    CHECK(t.concurrent_products == 0 && !t.deterministic);
    CHECK(t.kernel_threads == (cpus > 1 ? cpus : 1));
    CHECK(openblas_get_num_threads() == 1); /* vdev splits products itself */

    /* Three simulated GPUs with the user's 2: one thread per product, two
     * products at a time, the pool not split further than the CPUs allow. */
    t = start("3x1GiB", NULL, "2", NULL, "GPU:1");
    CHECK(t.blas_budget == 2 && t.streams == 3 && t.blas_threads == 1);
    CHECK(t.concurrent_products == (cpus < 2 ? cpus : 2));
    CHECK(t.kernel_threads == (cpus / 3 > 1 ? cpus / 3 : 1));
    CHECK(openblas_get_num_threads() == 1);

    /* Unset: the CPUs are the budget. */
    t = start("3x1GiB", NULL, NULL, NULL, "GPU:0");
    CHECK(t.blas_budget == cpus && t.streams == 3 && t.blas_threads == 1);
    CHECK(t.concurrent_products == cpus);

    /* One GPU split into three logical GPUs: a stream each, so three. */
    t = start("1x8GiB", "0:1GiB,1GiB,1GiB", "2", NULL, "GPU:2");
    CHECK(t.streams == 3 && t.blas_threads == 1 && t.concurrent_products == (cpus < 2 ? cpus : 2));
    CHECK(openblas_get_num_threads() == 1);

    /* Logical CPUs: replicas' threads run products side by side. */
    t = start(NULL, "cpu:2", "2", NULL, "CPU:1");
    CHECK(t.streams == 2 && t.blas_threads == 1 && t.concurrent_products == (cpus < 2 ? cpus : 2));

    /* OMP_NUM_THREADS alone: the budget, and the pool's size. */
    t = start(NULL, NULL, NULL, "4,2", "CPU:0");
    CHECK(t.blas_budget == 4 && t.blas_threads == (cpus < 4 ? cpus : 4));
    CHECK(t.kernel_threads == (cpus < 4 ? cpus : 4)); /* a ceiling, as for products */
    CHECK(openblas_get_num_threads() == 1);
    t = start("2x1GiB", NULL, NULL, "4", "GPU:0");
    CHECK(t.blas_budget == 4 && t.streams == 2);
    CHECK(t.kernel_threads == ((cpus < 4 ? cpus : 4) / 2 > 1 ? (cpus < 4 ? cpus : 4) / 2 : 1));
    t = start(NULL, NULL, NULL, "4096", "CPU:0");
    CHECK(t.kernel_threads == cpus);

    /* Junk is ignored, as OpenBLAS ignores it: OMP_NUM_THREADS, else the CPUs. */
    t = start(NULL, NULL, "lots", "2", "CPU:0");
    CHECK(t.blas_budget == 2);
    t = start(NULL, NULL, "0", NULL, "CPU:0");
    CHECK(t.blas_budget == cpus);
}

/* Three streams and a budget of one: products one at a time. */
static void one_at_a_time(void)
{
    start("3x1GiB", NULL, "1", NULL, "GPU:0");
    const char *dev[3] = {"GPU:0", "GPU:1", "GPU:2"};
    vdev_tensor_t *a[3];
    int64_t s[2] = {160, 160};
    for (int k = 0; k < 3; k++) {
        vdev_device_push(dev[k]);
        a[k] = vdev_tensor_uniform(s, 2, -1, 1, (uint64_t)k + 1);
        vdev_device_pop();
    }
    vdev_threads_peak_products(); /* from here on */
    vdev_scope_begin();
    for (int i = 0; i < 40; i++)
        for (int k = 0; k < 3; k++) {
            vdev_device_push(dev[k]);
            vdev_matmul(a[k], a[k], false, false);
            vdev_device_pop();
        }
    for (int k = 0; k < 3; k++)
        vdev_tensor_item(vdev_sum_all(a[k])); /* waits for each stream */
    vdev_scope_end();
    CHECK(vdev_threads_peak_products() == 1);
    for (int k = 0; k < 3; k++)
        vdev_tensor_free(a[k]);
}

/* A product for the gate's tests: records the thread it ran on; `hold`
 * keeps it running until the test lets it go. */
struct probe {
    atomic_int hold, running, ran;
    pthread_t on;
};

static void probe_fn(void *varg)
{
    struct probe *p = varg;
    p->on = pthread_self();
    atomic_store(&p->running, 1);
    while (atomic_load(&p->hold))
        usleep(100);
    atomic_store(&p->ran, 1);
}

struct submitter {
    struct probe *p;
    int nice_delta; /* applied to this thread before it submits */
    pthread_t self;
    int nice_ok, done_on_return; /* checked by the main thread after the join */
};

static void *submit_main(void *varg)
{
    struct submitter *s = varg;
    s->self = pthread_self();
    s->nice_ok = 1;
    if (s->nice_delta) {
        pid_t tid = (pid_t)syscall(SYS_gettid);
        errno = 0;
        int now = getpriority(PRIO_PROCESS, (id_t)tid);
        s->nice_ok = errno == 0 && setpriority(PRIO_PROCESS, (id_t)tid, now + s->nice_delta) == 0;
    }
    vdev_threads_product_run(0, probe_fn, s->p);
    s->done_on_return = atomic_load(&s->p->ran) == 1;
    return NULL;
}

static void wait_until(atomic_int *flag)
{
    for (int i = 0; i < 600000 && !atomic_load(flag); i++) /* 60 s: a hang */
        usleep(100);
    CHECK(atomic_load(flag));
}

static void wait_queued(int n)
{
    for (int i = 0; i < 600000 && vdev_threads_queued() != n; i++) /* 60 s: a hang */
        usleep(100);
    CHECK(vdev_threads_queued() == n);
}

/* Budget 1 on three streams: one slot. A holds it; B (as important) queues
 * and is run by A's thread; then C (a nice value raised by 5) holds it and
 * D (the process's nice value: more important) queues, and gets the slot to
 * run on its own thread. */
static void gate(void)
{
    struct vdev_thread_info t = start("3x1GiB", NULL, "1", NULL, "GPU:0");
    CHECK(t.concurrent_products == 1);
    vdev_threads_plan();
    struct probe pa = {.hold = 1}, pb = {0};
    struct submitter sa = {.p = &pa}, sb = {.p = &pb};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, submit_main, &sa) == 0);
    wait_until(&pa.running);
    CHECK(pthread_create(&tb, NULL, submit_main, &sb) == 0);
    wait_queued(1);
    CHECK(!atomic_load(&pb.running));
    /* B polls for a while (a CPU is left over: 1 slot), then sleeps; A's
     * thread wakes it when its product is done. */
    for (int i = 0; i < 600000 && vdev_threads_sleepers() != 1; i++) /* 60 s: a hang */
        usleep(100);
    CHECK(vdev_threads_sleepers() == 1);
    atomic_store(&pa.hold, 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(sa.done_on_return && sb.done_on_return);
    CHECK(atomic_load(&pb.ran) && pthread_equal(pb.on, sa.self));
    CHECK(vdev_threads_queued() == 0);

    struct probe pc = {.hold = 1}, pd = {0};
    struct submitter sc = {.p = &pc, .nice_delta = 5}, sd = {.p = &pd};
    pthread_t tc, td;
    CHECK(pthread_create(&tc, NULL, submit_main, &sc) == 0);
    wait_until(&pc.running);
    CHECK(pthread_create(&td, NULL, submit_main, &sd) == 0);
    wait_queued(1);
    /* D is let go while it may still be polling: it sees the slot itself. */
    atomic_store(&pc.hold, 0);
    pthread_join(tc, NULL);
    pthread_join(td, NULL);
    CHECK(sc.nice_ok && sc.done_on_return && sd.done_on_return);
    CHECK(atomic_load(&pd.ran) && pthread_equal(pd.on, sd.self));
    CHECK(vdev_threads_peak_products() == 1);
}

/* Products on three streams at a budget of one, whichever thread ran each:
 * every result against a plain sum in double precision. */
static void gate_results(void)
{
    start("3x1GiB", NULL, "1", NULL, "GPU:0");
    enum { N = 96 };
    const char *dev[3] = {"GPU:0", "GPU:1", "GPU:2"};
    vdev_tensor_t *a[3], *out[3][8];
    int64_t s[2] = {N, N};
    vdev_scope_begin();
    for (int k = 0; k < 3; k++) {
        vdev_device_push(dev[k]);
        a[k] = vdev_tensor_uniform(s, 2, -1, 1, (uint64_t)k + 7);
        for (int i = 0; i < 8; i++)
            out[k][i] = vdev_matmul(a[k], a[k], i & 1, i & 2);
        vdev_device_pop();
    }
    static float x[N * N], y[N * N];
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        CHECK_OK(vdev_tensor_to_host(a[k], x, sizeof x));
        for (int v = 0; v < 8; v++) {
            int ta = v & 1, tb = (v & 2) != 0;
            CHECK_OK(vdev_tensor_to_host(out[k][v], y, sizeof y));
            for (int i = 0; i < N; i++)
                for (int j = 0; j < N; j++) {
                    double sum = 0;
                    for (int q = 0; q < N; q++)
                        sum += (double)x[ta ? q * N + i : i * N + q] *
                               (double)x[tb ? j * N + q : q * N + j];
                    bad += fabs(sum - (double)y[i * N + j]) > 1e-4 * (1 + fabs(sum));
                }
        }
    }
    CHECK(bad == 0);
    vdev_scope_end();
}

static void determinism(void)
{
    int two = cpus_allowed() < 2 ? 1 : 2; /* the budget of 2, capped at the CPUs */
    struct vdev_thread_info t0 = start(NULL, NULL, "2", NULL, "CPU:0");
    CHECK(t0.blas_threads == two && openblas_get_num_threads() == 1);
    vdev_config_set_deterministic(true);
    struct vdev_thread_info t;
    CHECK_OK(vdev_thread_info(&t));
    CHECK(t.deterministic && t.blas_threads == two && t.blas_budget == 2);
    int64_t s[2] = {8, 8};
    vdev_scope_begin();
    vdev_tensor_t *a = vdev_tensor_uniform(s, 2, -1, 1, 1);
    vdev_tensor_item(vdev_sum_all(vdev_matmul(a, a, false, false)));
    CHECK(openblas_get_num_threads() == 1);
    vdev_config_set_deterministic(false);
    vdev_tensor_item(vdev_sum_all(vdev_matmul(a, a, false, false)));
    CHECK(openblas_get_num_threads() == 1);
    vdev_scope_end();
    CHECK_OK(vdev_thread_info(&t));
    CHECK(!t.deterministic && t.blas_threads == two);
}

int main(void)
{
    parse_counts();
    cgroups();
    plans();
    one_at_a_time();
    gate();
    gate_results();
    determinism();
    CHECK_STATUS(vdev_thread_info(NULL), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("vdev_thread_info: out is NULL");
    vdev_shutdown();
    return check_done();
}
