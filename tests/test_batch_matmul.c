/* test_batch_matmul.c — vdev_batch_matmul (TensorFlow's BatchMatMulV2):
 * values against a direct loop in double written here, for batches of rank
 * 1 and 2, every adjoint pair, operands broadcast either way (a batch of 1,
 * a missing batch axis, a 2-D operand on either side, the one-MatMul path of
 * a 2-D y), empty batches, rows, columns and inner sizes; a simulated GPU's
 * bits against the CPU's; the gradients of both operands through the tape
 * against their formula in double (a broadcast operand's the sum over the
 * entries that used it); every refusal with its exact words; nothing left
 * allocated. */
#define _GNU_SOURCE
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct bcase {
    int nx, ny;
    int64_t sx[4], sy[4];
    int ax, ay; /* adjoints */
};

static int64_t numel(const int64_t *s, int n)
{
    int64_t k = 1;
    for (int d = 0; d < n; d++)
        k *= s[d];
    return k;
}

/* The output's batch (ob, nb axes), rows m, columns n, inner k; each batch
 * entry's offsets into x and y (in matrices). */
struct plan {
    int nb;
    int64_t ob[2], entries, m, n, k;
    int64_t *xe, *ye;
};

static void make_plan(const struct bcase *c, struct plan *p)
{
    p->nb = (c->nx > c->ny ? c->nx : c->ny) - 2;
    int64_t bx[2] = {1, 1}, by[2] = {1, 1};
    for (int d = 0; d < p->nb; d++) {
        int ix = d - (p->nb - (c->nx - 2)), iy = d - (p->nb - (c->ny - 2));
        bx[d] = ix >= 0 ? c->sx[ix] : 1;
        by[d] = iy >= 0 ? c->sy[iy] : 1;
        p->ob[d] = bx[d] == 1 ? by[d] : bx[d];
    }
    p->entries = 1;
    for (int d = 0; d < p->nb; d++)
        p->entries *= p->ob[d];
    p->m = c->ax ? c->sx[c->nx - 1] : c->sx[c->nx - 2];
    p->k = c->ax ? c->sx[c->nx - 2] : c->sx[c->nx - 1];
    p->n = c->ay ? c->sy[c->ny - 2] : c->sy[c->ny - 1];
    p->xe = calloc((size_t)(p->entries + 1), sizeof(int64_t));
    p->ye = calloc((size_t)(p->entries + 1), sizeof(int64_t));
    if (!p->xe || !p->ye)
        abort();
    for (int64_t e = 0; e < p->entries; e++) {
        int64_t i[2] = {0, 0}, r = e;
        for (int d = p->nb - 1; d >= 0; d--) {
            i[d] = r % p->ob[d];
            r /= p->ob[d];
        }
        int64_t xi = 0, yi = 0;
        for (int d = 0; d < p->nb; d++) {
            xi = xi * bx[d] + (bx[d] == 1 ? 0 : i[d]);
            yi = yi * by[d] + (by[d] == 1 ? 0 : i[d]);
        }
        p->xe[e] = xi;
        p->ye[e] = yi;
    }
}

/* Element (r, c) of op(matrix `e` of a [.., R, C] operand), op the adjoint
 * when adj. */
static double at(const float *v, int64_t e, int64_t rows, int64_t cols, int adj, int64_t r,
                 int64_t c)
{
    return adj ? v[e * rows * cols + c * cols + r] : v[e * rows * cols + r * cols + c];
}

static float *uniform(int64_t n, unsigned seed)
{
    float *v = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!v)
        abort();
    srand(seed);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
    return v;
}

/* One case on `dev`: values and both gradients; *bits gets the output (the
 * caller compares devices). */
static void run_case(const struct bcase *c, const char *dev, float **bits, int64_t *nout)
{
    struct plan p;
    make_plan(c, &p);
    int64_t xr = c->sx[c->nx - 2], xc = c->sx[c->nx - 1];
    int64_t yr = c->sy[c->ny - 2], yc = c->sy[c->ny - 1];
    int64_t nx = numel(c->sx, c->nx), ny = numel(c->sy, c->ny), no = p.entries * p.m * p.n;
    float *x = uniform(nx, 1), *y = uniform(ny, 2), *r = uniform(no, 3);
    double *want = calloc((size_t)(no + 1), sizeof(double));
    double *gx = calloc((size_t)(nx + 1), sizeof(double)), *gy = calloc((size_t)(ny + 1),
                                                                         sizeof(double));
    if (!want || !gx || !gy)
        abort();
    for (int64_t e = 0; e < p.entries; e++)
        for (int64_t i = 0; i < p.m; i++)
            for (int64_t j = 0; j < p.n; j++) {
                double s = 0;
                for (int64_t q = 0; q < p.k; q++) {
                    double a = at(x, p.xe[e], xr, xc, c->ax, i, q);
                    double b = at(y, p.ye[e], yr, yc, c->ay, q, j);
                    s += a * b;
                    double g = r[(e * p.m + i) * p.n + j];
                    /* d/dop(x)[i,q] = g b; d/dop(y)[q,j] = g a, back through op */
                    int64_t xo = p.xe[e] * xr * xc + (c->ax ? q * xc + i : i * xc + q);
                    int64_t yo = p.ye[e] * yr * yc + (c->ay ? j * yc + q : q * yc + j);
                    gx[xo] += g * b;
                    gy[yo] += g * a;
                }
                want[(e * p.m + i) * p.n + j] = s;
            }
    CHECK_OK(vdev_device_push(dev));
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *vx = vdev_variable(vdev_tensor_from_host(x, c->sx, c->nx, VDEV_F32));
    vdev_tensor_t *vy = vdev_variable(vdev_tensor_from_host(y, c->sy, c->ny, VDEV_F32));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *z = vdev_batch_matmul(vx, vy, c->ax, c->ay);
    CHECK(z != NULL);
    if (!z) {
        check_fail(__FILE__, __LINE__, "%s", vdev_last_error());
    } else {
        int64_t os[4];
        for (int d = 0; d < p.nb; d++)
            os[d] = p.ob[d];
        os[p.nb] = p.m, os[p.nb + 1] = p.n;
        CHECK(vdev_tensor_ndim(z) == p.nb + 2);
        for (int d = 0; d < p.nb + 2; d++)
            CHECK(vdev_tensor_dim(z, d) == os[d]);
        float *got = malloc((size_t)(no + 1) * sizeof(float));
        if (!got)
            abort();
        CHECK_OK(vdev_tensor_to_host(z, got, (size_t)no * sizeof(float)));
        int bad = 0;
        for (int64_t i = 0; i < no; i++)
            bad += fabs(got[i] - want[i]) > 1e-5 * (1 + fabs(want[i])) * (double)(p.k + 1);
        if (bad)
            check_fail(__FILE__, __LINE__, "%s: %d of %lld values off", dev, bad, (long long)no);
        CHECK(bad == 0);
        *bits = got;
        *nout = no;
        vdev_tensor_t *loss = vdev_sum_all(vdev_mul(z, vdev_tensor_from_host(r, os, p.nb + 2,
                                                                             VDEV_F32)));
        vdev_tensor_t *vars[2] = {vx, vy}, *g[2] = {NULL, NULL};
        CHECK_OK(vdev_tape_gradient(tape, loss, vars, 2, g));
        const double *wants[2] = {gx, gy};
        int64_t ns[2] = {nx, ny};
        for (int v = 0; v < 2; v++) {
            if (!g[v])
                continue;
            float *gv = malloc((size_t)(ns[v] + 1) * sizeof(float));
            if (!gv)
                abort();
            CHECK_OK(vdev_tensor_to_host(g[v], gv, (size_t)ns[v] * sizeof(float)));
            int gbad = 0;
            for (int64_t i = 0; i < ns[v]; i++)
                gbad += fabs(gv[i] - wants[v][i]) > 1e-5 * (1 + fabs(wants[v][i])) *
                                                        (double)(p.entries * p.n + p.m + 1);
            if (gbad)
                check_fail(__FILE__, __LINE__, "%s: gradient of operand %d: %d of %lld off", dev,
                           v, gbad, (long long)ns[v]);
            CHECK(gbad == 0);
            free(gv);
        }
    }
    vdev_tape_end(tape);
    vdev_scope_end();
    vdev_tensor_free(vx);
    vdev_tensor_free(vy);
    CHECK_OK(vdev_device_pop());
    free(x), free(y), free(r), free(want), free(gx), free(gy), free(p.xe), free(p.ye);
}

static void test_values_and_gradients(void)
{
    static const struct bcase cases[] = {
        {3, 3, {2, 3, 4}, {2, 4, 5}, 0, 0},
        {3, 3, {2, 4, 3}, {2, 4, 5}, 1, 0},
        {3, 3, {2, 3, 4}, {2, 5, 4}, 0, 1},
        {3, 3, {2, 4, 3}, {2, 5, 4}, 1, 1},
        {3, 2, {3, 2, 4}, {4, 5}, 0, 0},       /* y without a batch: one MatMul */
        {3, 2, {3, 2, 4}, {5, 4}, 0, 1},
        {3, 2, {3, 4, 2}, {4, 5}, 1, 0},       /* adjointed x: entry by entry */
        {2, 3, {3, 4}, {2, 4, 5}, 0, 0},       /* x without a batch */
        {3, 3, {1, 3, 4}, {3, 4, 2}, 0, 0},    /* a batch of 1 broadcast */
        {4, 3, {2, 1, 3, 4}, {3, 4, 2}, 0, 0}, /* [2,1] against [3] */
        {4, 4, {2, 3, 2, 3}, {1, 3, 3, 2}, 0, 0},
        {4, 2, {2, 2, 3, 4}, {4, 2}, 0, 0},
        {3, 3, {2, 3, 0}, {2, 0, 4}, 0, 0},    /* no inner size: zeros */
        {3, 3, {2, 0, 4}, {2, 4, 3}, 0, 0},    /* no rows */
        {3, 3, {0, 3, 4}, {0, 4, 2}, 0, 0},    /* no batch entry */
        {3, 3, {0, 3, 4}, {1, 4, 2}, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        float *cpu = NULL, *gpu = NULL;
        int64_t n1 = 0, n2 = 0;
        run_case(&cases[i], "CPU:0", &cpu, &n1);
        run_case(&cases[i], "GPU:0", &gpu, &n2);
        CHECK(n1 == n2);
        if (cpu && gpu && n1 == n2)
            CHECK(memcmp(cpu, gpu, (size_t)n1 * sizeof(float)) == 0);
        free(cpu);
        free(gpu);
    }
}

/* The ops it is made of, on the operands' device: one BatchMatMulV2 for
 * equal batches or a broadcast single one, one MatMul for a y without a
 * batch, a MatMul per entry for batches broadcast both ways. */
static void test_ops_and_device(void)
{
    CHECK_OK(vdev_scope_begin());
    const int64_t sx[3] = {3, 2, 4}, sy[3] = {3, 4, 5}, s2[2] = {4, 5}, s1[3] = {1, 4, 5};
    const int64_t sx4[4] = {2, 1, 2, 4};
    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *x = vdev_tensor_fill(sx, 3, VDEV_F32, 1), *y = vdev_tensor_fill(sy, 3, VDEV_F32, 2);
    vdev_tensor_t *y2 = vdev_tensor_fill(s2, 2, VDEV_F32, 2), *y1 = vdev_tensor_fill(s1, 3, VDEV_F32, 2);
    vdev_tensor_t *x4 = vdev_tensor_fill(sx4, 4, VDEV_F32, 1);
    CHECK_OK(vdev_device_pop());
    const char *g1 = "/device:GPU:1";
    uint64_t mm = vdev_placement_op_count("MatMul", g1);
    uint64_t bm = vdev_placement_op_count("BatchMatMulV2", g1);
    vdev_tensor_t *z = vdev_batch_matmul(x, y, 0, 0);
    CHECK(z && strstr(vdev_tensor_device(z), "GPU:1") && check_all_equal(z, 8));
    CHECK(vdev_placement_op_count("BatchMatMulV2", g1) == bm + 1);
    CHECK(vdev_batch_matmul(x, y1, 0, 0) != NULL); /* a batch of 1: the same op */
    CHECK(vdev_placement_op_count("BatchMatMulV2", g1) == bm + 2);
    CHECK(vdev_placement_op_count("MatMul", g1) == mm);
    vdev_tensor_t *z2 = vdev_batch_matmul(x, y2, 0, 0); /* one MatMul */
    CHECK(z2 && check_all_equal(z2, 8));
    CHECK(vdev_placement_op_count("MatMul", g1) == mm + 1);
    vdev_tensor_t *z4 = vdev_batch_matmul(x4, y, 0, 0); /* [2,1] against [3]: 6 entries */
    CHECK(z4 && vdev_tensor_dim(z4, 0) == 2 && vdev_tensor_dim(z4, 1) == 3 &&
          check_all_equal(z4, 8));
    CHECK(vdev_placement_op_count("MatMul", g1) == mm + 7);
    vdev_scope_end();
}

/* vdev_matmul_nd: MatMul for matrices (and MatMul's errors for lower
 * ranks or a freed handle), BatchMatMulV2 when either has rank 3 or 4. */
static void test_matmul_nd(void)
{
    CHECK_OK(vdev_scope_begin());
    const int64_t s2[2] = {2, 3}, s2b[2] = {3, 4}, s3[3] = {2, 2, 3}, s1[1] = {3};
    vdev_tensor_t *a = vdev_tensor_fill(s2, 2, VDEV_F32, 1), *b = vdev_tensor_fill(s2b, 2, VDEV_F32, 2);
    vdev_tensor_t *c = vdev_tensor_fill(s3, 3, VDEV_F32, 1), *v = vdev_tensor_fill(s1, 1, VDEV_F32, 1);
    uint64_t mm = vdev_placement_op_count("MatMul", NULL);
    uint64_t bm = vdev_placement_op_count("BatchMatMulV2", NULL);
    vdev_tensor_t *z = vdev_matmul_nd(a, b, 0, 0);
    CHECK(z && vdev_tensor_ndim(z) == 2 && check_all_equal(z, 6));
    CHECK(vdev_placement_op_count("MatMul", NULL) == mm + 1);
    vdev_tensor_t *z3 = vdev_matmul_nd(c, b, 0, 0); /* y without batch: one MatMul */
    CHECK(z3 && vdev_tensor_ndim(z3) == 3 && check_all_equal(z3, 6));
    vdev_tensor_t *z4 = vdev_matmul_nd(c, c, 0, 1);
    CHECK(z4 && vdev_tensor_dim(z4, 0) == 2 && check_all_equal(z4, 3));
    CHECK(vdev_placement_op_count("BatchMatMulV2", NULL) == bm + 1);
    CHECK_FAILS(vdev_matmul_nd(v, b, 0, 0), VDEV_ERR_SHAPE,
                "MatMul: In[0] is not a matrix. Instead it has shape [3]");
    CHECK_FAILS(vdev_matmul_nd(v, c, 0, 0), VDEV_ERR_SHAPE,
                "BatchMatMulV2: In[0] ndims must be >= 2: 1");
    vdev_tensor_t *dead = vdev_tensor_fill(s2, 2, VDEV_F32, 1);
    vdev_tensor_free(dead);
    CHECK(vdev_matmul_nd(dead, b, 0, 0) == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("MatMul");
    vdev_scope_end();
}

static void test_errors(void)
{
    CHECK_OK(vdev_scope_begin());
    const int64_t s1[1] = {4}, a[3] = {2, 3, 4}, b[3] = {3, 4, 5}, c[3] = {2, 5, 6}, d[2] = {2, 2};
    vdev_tensor_t *v1 = vdev_tensor_fill(s1, 1, VDEV_F32, 1);
    vdev_tensor_t *ta = vdev_tensor_fill(a, 3, VDEV_F32, 1), *tb = vdev_tensor_fill(b, 3, VDEV_F32, 1);
    vdev_tensor_t *tc = vdev_tensor_fill(c, 3, VDEV_F32, 1), *ti = vdev_tensor_fill(d, 2, VDEV_I32, 1);
    vdev_tensor_t *tf = vdev_tensor_fill(d, 2, VDEV_F32, 1);
    CHECK_FAILS(vdev_batch_matmul(v1, ta, 0, 0), VDEV_ERR_SHAPE,
                "BatchMatMulV2: In[0] ndims must be >= 2: 1");
    CHECK_FAILS(vdev_batch_matmul(ta, v1, 0, 0), VDEV_ERR_SHAPE,
                "BatchMatMulV2: In[1] ndims must be >= 2: 1");
    CHECK_FAILS(vdev_batch_matmul(ta, tb, 0, 0), VDEV_ERR_SHAPE,
                "BatchMatMulV2: In[0] and In[1] must have compatible batch dimensions: [2,3,4] vs. "
                "[3,4,5]");
    CHECK_FAILS(vdev_batch_matmul(ta, tc, 0, 0), VDEV_ERR_SHAPE,
                "BatchMatMulV2: Matrix size-incompatible: In[0]: [2,3,4], In[1]: [2,5,6]");
    CHECK_FAILS(vdev_batch_matmul(ta, ta, 0, 0), VDEV_ERR_SHAPE,
                "BatchMatMulV2: Matrix size-incompatible: In[0]: [2,3,4], In[1]: [2,3,4]");
    CHECK_FAILS(vdev_batch_matmul(tf, ti, 0, 0), VDEV_ERR_INVALID_ARG,
                "BatchMatMulV2: input #1 (shape [2,2]) is int32, expected float");
    vdev_tensor_t *z = vdev_batch_matmul(ta, ta, 0, 1); /* [2,3,4] x [2,4,3] adjointed */
    CHECK(z && vdev_tensor_dim(z, 1) == 3 && vdev_tensor_dim(z, 2) == 3);
    vdev_clear_error();
    CHECK(vdev_batch_matmul(NULL, ta, 0, 0) == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_OK);
    vdev_tensor_t *dead = vdev_tensor_fill(a, 3, VDEV_F32, 1);
    vdev_tensor_free(dead);
    CHECK(vdev_batch_matmul(dead, ta, 0, 0) == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("vdev_batch_matmul: ");
    vdev_scope_end();
}

int main(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    test_values_and_gradients();
    test_ops_and_device();
    test_matmul_nd();
    test_errors();
    CHECK_NO_LEAK("CPU:0");
    CHECK_NO_LEAK("GPU:0");
    CHECK_NO_LEAK("GPU:1");
    vdev_shutdown();
    return check_done();
}
