/* test_coll_ring.c — vdev's ring collectives give the right values: all-reduce
 * (sum and mean) on 1 to 4 ranks of simulated GPUs, of logical devices of one
 * card and of logical CPUs, on sizes not divisible by the number of ranks, 1
 * and 0 elements, several slices and 64 MiB, on lists of tensors; every rank
 * gets the same bits and two runs give the same bits; broadcast, all-gather
 * and barrier; and the staging memory is the same on every rank and given
 * back. One host thread per rank, as NCCL and MPI ranks run. */
#define _GNU_SOURCE
#include "ranks.h"

#include <math.h>

#define SLICE 262144 /* elements in the ring's 1 MiB slice */

static char devname[RANKS_MAX][64];

/* The rank's value at element i: whole numbers, so every sum is exact in f32
 * whatever its order. */
static float whole(int r, uint64_t i) { return (float)((int64_t)((i * 7 + (uint64_t)r * 13) % 1000) - 500); }

/* Random values from a counter-based generator (splitmix64). */
static float rnd(int r, uint64_t i, uint64_t seed)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + ((uint64_t)r << 40) + i;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A tensor of shape [count] on device dev holding host data. */
static vdev_tensor_t *upload(const char *dev, const float *data, int64_t count)
{
    CHECK_OK(vdev_device_push(dev));
    int64_t shape[1] = {count};
    vdev_tensor_t *t = vdev_tensor_from_host(data, shape, 1, VDEV_F32);
    CHECK_OK(vdev_device_pop());
    CHECK(t != NULL);
    return t;
}

struct ar_arg {
    int n_tensors;
    enum vdev_reduce_op op;
};

static void do_all_reduce(struct rank_job *j)
{
    const struct ar_arg *a = j->arg;
    rank_record(j, vdev_comm_all_reduce(j->comm, j->rank, j->t, a->n_tensors, a->op));
}

/* Makes a communicator over devs[0..n). */
static vdev_comm_t *comm_over(int n)
{
    const char *names[RANKS_MAX];
    for (int r = 0; r < n; r++)
        names[r] = devname[r];
    vdev_comm_t *c = NULL;
    CHECK_OK(vdev_comm_new(names, n, &c));
    return c;
}

static void set_names(const char *prefix, int n)
{
    for (int r = 0; r < n; r++)
        snprintf(devname[r], sizeof devname[r], "%s:%d", prefix, r);
}

/* All-reduce of one tensor of `count` elements on n ranks: whole values,
 * compared bit for bit with the exact result (the mean divided once, in f32). */
static void exact_all_reduce(int n, uint64_t count, enum vdev_reduce_op op)
{
    vdev_comm_t *comm = comm_over(n);
    float *host = malloc((count ? count : 1) * sizeof *host);
    struct rank_job jobs[RANKS_MAX];
    memset(jobs, 0, sizeof jobs);
    struct ar_arg arg = {1, op};
    for (int r = 0; r < n; r++) {
        for (uint64_t i = 0; i < count; i++)
            host[i] = whole(r, i);
        jobs[r] = (struct rank_job){.rank = r, .n = n, .comm = comm, .arg = &arg};
        jobs[r].t[0] = upload(devname[r], host, (int64_t)count);
    }
    run_ranks(n, do_all_reduce, jobs);
    CHECK_RANKS(jobs, n, VDEV_OK, NULL);
    int bad = 0;
    for (int r = 0; r < n; r++) {
        CHECK_OK(vdev_tensor_to_host(jobs[r].t[0], host, count * 4));
        for (uint64_t i = 0; i < count && !bad; i++) {
            float s = 0;
            for (int q = 0; q < n; q++)
                s += whole(q, i);
            float want = op == VDEV_REDUCE_MEAN ? s / (float)n : s;
            if (memcmp(&want, &host[i], 4) != 0) {
                check_fail(__FILE__, __LINE__, "%s on %d ranks, %llu elements: rank %d element "
                           "%llu is %.9g, expected %.9g",
                           op == VDEV_REDUCE_MEAN ? "mean" : "sum", n, (unsigned long long)count,
                           r, (unsigned long long)i, host[i], want);
                bad = 1;
            }
        }
        vdev_tensor_free(jobs[r].t[0]);
    }
    if (!bad)
        check_passed++;
    free(host);
    vdev_comm_free(comm);
}

static void test_sizes_sim(void)
{
    check_fresh("4x1GiB");
    set_names("GPU", 4);
    static const uint64_t sizes[] = {0, 1, 2, 7, 1000, SLICE + 1, 3 * SLICE + 5};
    for (int n = 1; n <= 4; n++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            exact_all_reduce(n, sizes[k], VDEV_REDUCE_SUM);
            exact_all_reduce(n, sizes[k], VDEV_REDUCE_MEAN);
        }
}

/* 64 MiB per rank on four simulated GPUs. */
static void test_64mib(void)
{
    check_fresh("4x1GiB");
    set_names("GPU", 4);
    exact_all_reduce(4, 16u << 20, VDEV_REDUCE_SUM);
    exact_all_reduce(3, 16u << 20, VDEV_REDUCE_MEAN);
}

/* Logical devices of one card (NCCL refuses two ranks on one GPU). */
static void test_one_card(void)
{
    check_fresh("1x4GiB");
    uint64_t limits[3] = {256ull << 20, 256ull << 20, 256ull << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 3));
    set_names("GPU", 3);
    exact_all_reduce(3, 7, VDEV_REDUCE_SUM);
    exact_all_reduce(3, 2 * SLICE + 3, VDEV_REDUCE_MEAN);
    exact_all_reduce(2, 1, VDEV_REDUCE_SUM);
}

/* Logical CPUs, as TensorFlow's strategy tests use them. */
static void test_logical_cpus(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 4));
    set_names("CPU", 4);
    for (int n = 1; n <= 4; n++) {
        exact_all_reduce(n, 11, VDEV_REDUCE_SUM);
        exact_all_reduce(n, SLICE + 3, VDEV_REDUCE_MEAN);
    }
}

/* Random values: within rounding of the exact sum, the same bits on every
 * rank, and the same bits in a second run. A list of three tensors (one
 * empty) is one flat array to the ring. */
static void random_run(int n, uint64_t seed, float *out /* [n][total] */)
{
    static const int64_t counts[3] = {5, 0, 300001};
    const int64_t total = 5 + 300001;
    vdev_comm_t *comm = comm_over(n);
    struct rank_job jobs[RANKS_MAX];
    struct ar_arg arg = {3, VDEV_REDUCE_SUM};
    float *host = malloc((size_t)total * sizeof *host);
    for (int r = 0; r < n; r++) {
        jobs[r] = (struct rank_job){.rank = r, .n = n, .comm = comm, .arg = &arg};
        int64_t off = 0;
        for (int k = 0; k < 3; k++) {
            for (int64_t i = 0; i < counts[k]; i++)
                host[i] = rnd(r, (uint64_t)(off + i), seed);
            jobs[r].t[k] = upload(devname[r], host, counts[k]);
            off += counts[k];
        }
    }
    run_ranks(n, do_all_reduce, jobs);
    CHECK_RANKS(jobs, n, VDEV_OK, NULL);
    for (int r = 0; r < n; r++) {
        int64_t off = 0;
        for (int k = 0; k < 3; k++) {
            CHECK_OK(vdev_tensor_to_host(jobs[r].t[k], out + (size_t)r * total + off,
                                         (size_t)counts[k] * 4));
            off += counts[k];
            vdev_tensor_free(jobs[r].t[k]);
        }
    }
    free(host);
    vdev_comm_free(comm);
}

static void test_random_deterministic(void)
{
    check_fresh("4x1GiB");
    set_names("GPU", 4);
    const size_t total = 5 + 300001;
    for (int n = 2; n <= 4; n++) {
        float *a = malloc((size_t)n * total * 4), *b = malloc((size_t)n * total * 4);
        random_run(n, 42, a);
        random_run(n, 42, b);
        CHECK(memcmp(a, b, (size_t)n * total * 4) == 0); /* run to run */
        for (int r = 1; r < n; r++)                      /* rank to rank */
            CHECK(memcmp(a, a + (size_t)r * total, total * 4) == 0);
        double worst = 0;
        for (size_t i = 0; i < total; i++) {
            double s = 0;
            for (int q = 0; q < n; q++)
                s += rnd(q, i, 42);
            double e = fabs((double)a[i] - s);
            if (e > worst)
                worst = e;
        }
        CHECK(worst <= 4 * 1.2e-7 * n); /* a few roundings of values below n in size */
        free(a);
        free(b);
    }
}

struct bc_arg {
    int root, n_tensors;
};

static void do_broadcast(struct rank_job *j)
{
    const struct bc_arg *a = j->arg;
    rank_record(j, vdev_comm_broadcast(j->comm, j->rank, j->t, a->n_tensors, a->root));
}

static void test_broadcast(void)
{
    check_fresh("4x1GiB");
    set_names("GPU", 4);
    for (int n = 1; n <= 4; n++)
        for (int root = 0; root < n; root += n > 1 ? n - 1 : 1) {
            vdev_comm_t *comm = comm_over(n);
            struct rank_job jobs[RANKS_MAX];
            struct bc_arg arg = {root, 2};
            const int64_t big = SLICE * 2 + 9, is[2] = {3, 7};
            float *f = malloc(big * 4);
            int32_t iv[21];
            for (int r = 0; r < n; r++) {
                jobs[r] = (struct rank_job){.rank = r, .n = n, .comm = comm, .arg = &arg};
                for (int64_t i = 0; i < big; i++)
                    f[i] = (float)(r * 1000000 + i);
                for (int i = 0; i < 21; i++)
                    iv[i] = r * 100 + i;
                jobs[r].t[0] = upload(devname[r], f, big);
                CHECK_OK(vdev_device_push(devname[r]));
                jobs[r].t[1] = vdev_tensor_from_host(iv, is, 2, VDEV_I32);
                CHECK_OK(vdev_device_pop());
            }
            run_ranks(n, do_broadcast, jobs);
            CHECK_RANKS(jobs, n, VDEV_OK, NULL);
            int ok = 1;
            for (int r = 0; r < n; r++) {
                CHECK_OK(vdev_tensor_to_host(jobs[r].t[0], f, big * 4));
                CHECK_OK(vdev_tensor_to_host(jobs[r].t[1], iv, sizeof iv));
                for (int64_t i = 0; i < big; i++)
                    ok &= f[i] == (float)(root * 1000000 + i);
                for (int i = 0; i < 21; i++)
                    ok &= iv[i] == root * 100 + i;
                vdev_tensor_free(jobs[r].t[0]);
                vdev_tensor_free(jobs[r].t[1]);
            }
            CHECK(ok);
            free(f);
            vdev_comm_free(comm);
        }
}

static void do_gather(struct rank_job *j)
{
    rank_record(j, vdev_comm_all_gather(j->comm, j->rank, j->t[0], j->t[1]));
}

/* all_gather stacks every rank's rows along axis 0, in rank order. */
static void gather_case(int n, int64_t rows, int64_t cols, enum vdev_dtype dt)
{
    vdev_comm_t *comm = comm_over(n);
    struct rank_job jobs[RANKS_MAX];
    int64_t c = rows * cols;
    int32_t *v = malloc((size_t)(c * n + 1) * 4);
    for (int r = 0; r < n; r++) {
        jobs[r] = (struct rank_job){.rank = r, .n = n, .comm = comm};
        for (int64_t i = 0; i < c; i++) {
            if (dt == VDEV_I32)
                v[i] = r * 100000000 + (int32_t)i;
            else
                ((float *)v)[i] = (float)(r * 1000 + i % 1000);
        }
        int64_t in_shape[2] = {rows, cols}, out_shape[2] = {rows * n, cols};
        CHECK_OK(vdev_device_push(devname[r]));
        jobs[r].t[0] = vdev_tensor_from_host(v, in_shape, 2, dt);
        jobs[r].t[1] = vdev_tensor_zeros(out_shape, 2, dt);
        CHECK_OK(vdev_device_pop());
    }
    run_ranks(n, do_gather, jobs);
    CHECK_RANKS(jobs, n, VDEV_OK, NULL);
    int ok = 1;
    for (int r = 0; r < n; r++) {
        CHECK_OK(vdev_tensor_to_host(jobs[r].t[1], v, (size_t)(c * n) * 4));
        for (int q = 0; q < n; q++)
            for (int64_t i = 0; i < c; i++)
                ok &= dt == VDEV_I32 ? v[q * c + i] == q * 100000000 + (int32_t)i
                                     : ((float *)v)[q * c + i] == (float)(q * 1000 + i % 1000);
        vdev_tensor_free(jobs[r].t[0]);
        vdev_tensor_free(jobs[r].t[1]);
    }
    if (ok)
        check_passed++;
    else
        check_fail(__FILE__, __LINE__, "all-gather of [%lld,%lld] %s on %d ranks: wrong values",
                   (long long)rows, (long long)cols, dt == VDEV_I32 ? "int32" : "float", n);
    free(v);
    vdev_comm_free(comm);
}

static void test_all_gather(void)
{
    check_fresh("4x1GiB");
    set_names("GPU", 4);
    for (int n = 1; n <= 4; n++) {
        gather_case(n, 2, 3, VDEV_F32);
        gather_case(n, 1, 1, VDEV_I32);
        gather_case(n, 0, 3, VDEV_F32);
    }
    gather_case(3, 3, 100001, VDEV_I32); /* several slices per rank */
    check_fresh(NULL);
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 3));
    set_names("CPU", 3);
    gather_case(3, 4, 5, VDEV_F32);
}

static void do_barriers(struct rank_job *j)
{
    enum vdev_status st = VDEV_OK;
    for (int k = 0; k < 5 && st == VDEV_OK; k++)
        st = vdev_comm_barrier(j->comm, j->rank);
    rank_record(j, st);
}

static void test_barrier(void)
{
    check_fresh("3x1GiB");
    set_names("GPU", 3);
    vdev_comm_t *comm = comm_over(3);
    struct rank_job jobs[3];
    for (int r = 0; r < 3; r++)
        jobs[r] = (struct rank_job){.rank = r, .n = 3, .comm = comm};
    run_ranks(3, do_barriers, jobs);
    CHECK_RANKS(jobs, 3, VDEV_OK, NULL);
    CHECK_STR(vdev_comm_implementation(comm), "ring");
    CHECK(vdev_comm_size(comm) == 3);
    CHECK_STR(vdev_comm_device(comm, 2), "/device:GPU:2");
    vdev_comm_free(comm);
}

/* The staging buffer is taken on every rank's own device, the same size on
 * each, and given back: no device holds more than another. */
static void test_memory_balance(void)
{
    check_fresh("3x1GiB");
    set_names("GPU", 3);
    vdev_comm_t *comm = comm_over(3);
    struct rank_job jobs[3];
    struct ar_arg arg = {1, VDEV_REDUCE_SUM};
    float *host = calloc(3 * SLICE + 1, 4);
    uint64_t base[3];
    for (int r = 0; r < 3; r++) {
        jobs[r] = (struct rank_job){.rank = r, .n = 3, .comm = comm, .arg = &arg};
        jobs[r].t[0] = upload(devname[r], host, 3 * SLICE + 1);
        CHECK_OK(vdev_memory_reset_peak(devname[r]));
        struct vdev_memory_info mi;
        CHECK_OK(vdev_memory_info(devname[r], &mi));
        base[r] = mi.bytes_in_use;
    }
    run_ranks(3, do_all_reduce, jobs);
    CHECK_RANKS(jobs, 3, VDEV_OK, NULL);
    uint64_t extra[3];
    for (int r = 0; r < 3; r++) {
        CHECK_OK(vdev_tensor_to_host(jobs[r].t[0], host, (3 * SLICE + 1) * 4)); /* waits */
        struct vdev_memory_info mi;
        CHECK_OK(vdev_memory_info(devname[r], &mi));
        CHECK_EQ_U64(mi.bytes_in_use, base[r]);
        extra[r] = mi.peak_bytes_in_use - base[r];
        vdev_tensor_free(jobs[r].t[0]);
    }
    CHECK_EQ_U64(extra[0], 1u << 20); /* one slice of staging, on each */
    CHECK_EQ_U64(extra[1], extra[0]);
    CHECK_EQ_U64(extra[2], extra[0]);
    free(host);
    vdev_comm_free(comm);
}

int main(void)
{
    test_sizes_sim();
    test_64mib();
    test_one_card();
    test_logical_cpus();
    test_random_deterministic();
    test_broadcast();
    test_all_gather();
    test_barrier();
    test_memory_balance();
    vdev_shutdown();
    return check_done();
}
