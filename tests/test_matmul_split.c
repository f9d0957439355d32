/* test_matmul_split.c — a matrix product split over vdev's pool (the cpu
 * backend with a budget of two threads: kernels_host.c):
 *
 *  - the plan: two threads per product, OpenBLAS itself at one;
 *  - every transpose combination of products split by output columns (more
 *    columns than rows) and by rows (more rows), with edges that are not
 *    multiples of the 16-element grain, one too small to split (under two
 *    blocks of 2^21 multiply-adds), and one with a single block of columns:
 *    each element against a double-precision sum within sgemm's float
 *    error bound (4 k 2^-24 sum |a||b|, plus 1e-6); a block placed at the
 *    wrong offset or with the wrong operand slice fails it;
 *  - three threads multiplying on CPU:0 at once (the pool taken by one, the
 *    others running their products whole): every result right;
 *  - under the determinism switch a product too small for two blocks is one
 *    call: its bits equal one cblas_sgemm call on one thread, made here; a
 *    larger one is cut into blocks fixed by its shape: the same bits with a
 *    budget of two threads and of one. */
#define _GNU_SOURCE
#include "check.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* t's n floats copied to a new host buffer; NULL if t is NULL or the copy
 * fails. */
static float *host_of(const vdev_tensor_t *t, size_t n)
{
    float *p = t ? malloc(n * sizeof *p) : NULL;
    if (p && vdev_tensor_to_host(t, p, n * sizeof *p) != VDEV_OK) {
        free(p);
        p = NULL;
    }
    return p;
}

/* out = op(a) op(b) with op(a) [m,k], op(b) [k,n]; stored a is [k,m] when
 * ta, b is [n,k] when tb. Returns the number of bad elements (1 when the
 * product or a read-back failed). The harness's counters are not for other
 * threads: with `quiet` (a thread of concurrent_products) it reports nothing
 * and only returns its count. */
static int product_errors(int m, int k, int n, int ta, int tb, int quiet)
{
    int64_t sa[2] = {ta ? k : m, ta ? m : k}, sb[2] = {tb ? n : k, tb ? k : n};
    vdev_scope_begin();
    vdev_tensor_t *a = vdev_tensor_uniform(sa, 2, -1, 1, (uint64_t)(m * 31 + k));
    vdev_tensor_t *b = vdev_tensor_uniform(sb, 2, -1, 1, (uint64_t)(n * 17 + k));
    vdev_tensor_t *c = a && b ? vdev_matmul(a, b, ta, tb) : NULL;
    int bad = 0;
    float *x = host_of(a, (size_t)m * k), *y = host_of(b, (size_t)k * n);
    float *z = host_of(c, (size_t)m * n);
    if (x && y && z)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double sum = 0, mag = 0;
                for (int q = 0; q < k; q++) {
                    double u = x[ta ? q * m + i : i * k + q], v = y[tb ? j * k + q : q * n + j];
                    sum += u * v;
                    mag += fabs(u * v);
                }
                double tol = 4.0 * k * ldexp(1.0, -24) * mag + 1e-6;
                if (fabs(sum - (double)z[i * n + j]) > tol) {
                    if (!bad && !quiet)
                        check_fail(__FILE__, __LINE__,
                                   "%dx%dx%d ta %d tb %d: [%d,%d] = %.9g, expected %.9g", m, k,
                                   n, ta, tb, i, j, (double)z[i * n + j], sum);
                    bad++;
                }
            }
    else {
        if (!quiet)
            check_fail(__FILE__, __LINE__, "%dx%dx%d ta %d tb %d: %s", m, k, n, ta, tb,
                       vdev_last_error());
        bad = 1;
    }
    free(x);
    free(y);
    free(z);
    vdev_scope_end();
    return bad;
}

static int check_product(int m, int k, int n, int ta, int tb)
{
    return product_errors(m, k, n, ta, tb, 0);
}

static void split_products(void)
{
    /* m, k, n: columns split (n >= m), rows split (m > n), edges off the
     * grain (each at least 2 x 2^21 multiply-adds: two blocks), too small to
     * split (under 2 x 2^21), one block of columns. */
    const int shapes[][3] = {{45, 1500, 67}, {67, 1500, 45}, {64, 512, 512}, {300, 500, 33},
                             {130, 300, 130}, {33, 33, 33}, {16, 20000, 17}, {257, 64, 513}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++)
            CHECK(check_product(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1) == 0);
}

/* Several threads multiplying on CPU:0 at once: one takes the pool and
 * splits its product, the others find it busy and run theirs whole; every
 * result still right. */
static _Atomic int concurrent_bad;

static void *multiply_thread(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int r = 0; r < 6; r++) {
        int t = (id + r) & 3;
        if (product_errors(64 + 16 * id, 300, 96 + 8 * r, t & 1, t >> 1, 1) != 0)
            atomic_fetch_add(&concurrent_bad, 1);
    }
    return NULL;
}

static void concurrent_products(void)
{
    CHECK(check_run_threads(3, multiply_thread) == 3);
    CHECK(atomic_load(&concurrent_bad) == 0);
}

/* Under the switch, a product of 256x512x512 (four blocks fixed by its
 * shape) with the budget of two, and again after a restart with a budget of
 * one: the same bits, and right. */
static void deterministic_any_threads(void)
{
    enum { M = 256, K = 512, N = 512 };
    float *got[2] = {NULL, NULL};
    for (int run = 0; run < 2; run++) {
        vdev_shutdown();
        setenv("OPENBLAS_NUM_THREADS", run ? "1" : "2", 1);
        setenv("VDEV_DETERMINISTIC", "1", 1);
        CHECK_OK(vdev_init());
        struct vdev_thread_info t;
        CHECK_OK(vdev_thread_info(&t));
        CHECK(t.deterministic && t.blas_threads == (run ? 1 : 2));
        int64_t sa[2] = {M, K}, sb[2] = {K, N};
        vdev_scope_begin();
        vdev_tensor_t *a = vdev_tensor_uniform(sa, 2, -1, 1, 5);
        vdev_tensor_t *b = vdev_tensor_uniform(sb, 2, -1, 1, 6);
        got[run] = host_of(vdev_matmul(a, b, false, true), (size_t)M * N);
        vdev_scope_end();
        CHECK(got[run] != NULL);
    }
    if (got[0] && got[1])
        CHECK(memcmp(got[0], got[1], (size_t)M * N * sizeof(float)) == 0);
    free(got[0]);
    free(got[1]);
    unsetenv("VDEV_DETERMINISTIC");
    /* and right, split or not */
    CHECK(product_errors(M, K, N, 0, 1, 0) == 0);
}

/* Under the switch, a product too small for two blocks: one call on one
 * thread, bit for bit. */
static void deterministic_unsplit(void)
{
    vdev_config_set_deterministic(true);
    enum { M = 64, K = 200, N = 300 };
    int64_t sa[2] = {M, K}, sb[2] = {K, N};
    vdev_scope_begin();
    vdev_tensor_t *a = vdev_tensor_uniform(sa, 2, -1, 1, 3), *b = vdev_tensor_uniform(sb, 2, -1, 1, 4);
    vdev_tensor_t *c = vdev_matmul(a, b, false, false);
    float *x = host_of(a, (size_t)M * K), *y = host_of(b, (size_t)K * N);
    float *z = host_of(c, (size_t)M * N), *want = malloc((size_t)M * N * sizeof *want);
    CHECK(x && y && z && want);
    if (x && y && z && want) {
        CHECK(openblas_get_num_threads() == 1);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, x, K, y, N, 0.0f,
                    want, N);
        CHECK(memcmp(z, want, (size_t)M * N * sizeof *z) == 0);
    }
    free(x);
    free(y);
    free(z);
    free(want);
    vdev_scope_end();
    vdev_config_set_deterministic(false);
}

int main(void)
{
    check_fresh(NULL);
    setenv("OPENBLAS_NUM_THREADS", "2", 1);
    setenv("OMP_NUM_THREADS", "2", 1);
    struct vdev_thread_info t;
    CHECK_OK(vdev_thread_info(&t));
    if (t.cpus < 2) {
        printf("SKIP: one CPU: the budget of 2 is capped at 1, no product is split\n");
        vdev_shutdown();
        return 77;
    }
    CHECK(t.blas_threads == 2 && t.streams == 1);
    split_products();
    concurrent_products();
    CHECK(openblas_get_num_threads() == 1);
    deterministic_unsplit();
    deterministic_any_threads();
    vdev_shutdown();
    return check_done();
}
