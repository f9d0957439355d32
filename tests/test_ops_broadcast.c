/* test_ops_broadcast.c — the binary ops (AddV2, Sub, Mul, RealDiv) broadcast
 * as NumPy and TensorFlow do, on the cpu backend and on a simulated GPU.
 *
 * For every form of ops_bcast.h (rank 1 against rank 2 in both orders,
 * [1,5] against [5,1], [3,1,5] against [4,5], 0-dimensional against anything,
 * 4-D, empty dimensions):
 *  - the output's rank is the larger of the two and each dimension NumPy's
 *    (add([5], [1,5]) is [1,5], not [5]);
 *  - every value is the float operation on the elements that broadcast to
 *    it, to the bit (the kernels compute in double and round once, which
 *    for + - * / is the float operation), through the dispatcher and through
 *    the reference and fast kernels called directly;
 *  - ReduceToShape, the op gradients use, sums dy over the dimensions along
 *    which each input was broadcast and gives that input's shape;
 * and shapes that do not broadcast are VDEV_ERR_SHAPE naming both. A
 * backend with kernels of its own (CUDA) is given every broadcast with its
 * mode (its kernels are checked against the reference by tests/cuda). The
 * gradients are test_grad_broadcast.c's. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/impl.h"
#include "ops_bcast.h"
#include "runtime/placement.h"
#include "runtime/runtime.h"
#include "ops_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const enum vdev_op BOPS[4] = {VDEV_OP_ADD, VDEV_OP_SUB, VDEV_OP_MUL, VDEV_OP_DIV};

/* The float operation, as TensorFlow's float kernels compute it. */
static float apply(enum vdev_op op, float u, float v)
{
    switch (op) {
    case VDEV_OP_ADD:
        return u + v;
    case VDEV_OP_SUB:
        return u - v;
    case VDEV_OP_MUL:
        return u * v;
    default:
        return u / v;
    }
}

/* n values with |x| in [0.5, 2) and a random sign (divisors away from 0). */
static float *values(int64_t n)
{
    float *h = malloc((size_t)(n + 1) * 4);
    if (!h)
        abort();
    for (int64_t i = 0; i < n; i++) {
        h[i] = rng_uniform(0.5f, 2.0f);
        if (rng_next() & 1)
            h[i] = -h[i];
    }
    return h;
}

/* got (no dims, numel n, values v) against the form's output shape and the
 * reference a op b; reports the first difference. */
static void check_result(const char *what, enum vdev_op op, const struct bform *f, int nd,
                         const int64_t *dims, const float *v, const float *ha, const float *hb)
{
    int ok = nd == f->no;
    for (int d = 0; ok && d < nd; d++)
        ok = dims[d] == f->so[d];
    if (!ok) {
        char got[96], want[96];
        check_fail(__FILE__, __LINE__, "%s %s %s: shape %s, expected %s", what,
                   vdev_op_defs[op].name, f->name, vdev_shape_str(dims, nd, got, sizeof got),
                   vdev_shape_str(f->so, f->no, want, sizeof want));
        return;
    }
    int64_t n = bshape_numel(f->so, f->no);
    for (int64_t i = 0; i < n; i++) {
        float u = ha[bshape_offset(f->sa, f->na, f->so, f->no, i)];
        float w = hb[bshape_offset(f->sb, f->nb, f->so, f->no, i)];
        float want = apply(op, u, w);
        if (memcmp(&want, &v[i], 4) != 0) {
            check_fail(__FILE__, __LINE__, "%s %s %s: element %lld is %.9g, expected %.9g", what,
                       vdev_op_defs[op].name, f->name, (long long)i, v[i], want);
            return;
        }
    }
    check_passed++;
}

/* The op through the public functions on dev, and the shape rule's output
 * and the kernels (reference, fast) called directly on host buffers. */
static void forward_form(const char *dev, enum vdev_op op, const struct bform *f, int direct)
{
    int64_t na = bshape_numel(f->sa, f->na), nb = bshape_numel(f->sb, f->nb);
    int64_t no = bshape_numel(f->so, f->no);
    float *ha = values(na), *hb = values(nb), *out = malloc((size_t)(no + 1) * 4);
    if (!out)
        abort();
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    vdev_tensor_t *a = vdev_tensor_from_host(ha, f->sa, f->na, VDEV_F32);
    vdev_tensor_t *b = vdev_tensor_from_host(hb, f->sb, f->nb, VDEV_F32);
    vdev_tensor_t *(*fn[4])(const vdev_tensor_t *, const vdev_tensor_t *) = {vdev_add, vdev_sub,
                                                                             vdev_mul, vdev_div};
    vdev_tensor_t *y = fn[op - VDEV_OP_ADD](a, b);
    if (!y) {
        check_fail(__FILE__, __LINE__, "%s %s on %s: %s", vdev_op_defs[op].name, f->name, dev,
                   vdev_last_error());
    } else {
        int64_t dims[4] = {0};
        int nd = vdev_tensor_ndim(y);
        for (int d = 0; d < nd && d < 4; d++)
            dims[d] = vdev_tensor_dim(y, d);
        CHECK(vdev_tensor_numel(y) == no);
        CHECK_OK(vdev_tensor_to_host(y, out, (size_t)no * 4));
        CHECK_STR(vdev_tensor_device(y), vdev_tensor_device(a));
        check_result(dev, op, f, nd, dims, out, ha, hb);
    }
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());

    if (direct) {
        struct vdev_kernel_args ka;
        memset(&ka, 0, sizeof ka);
        ka.op = (int)op;
        ka.n_in = 2;
        ka.in[0] = ha;
        ka.in[1] = hb;
        ka.in_ndim[0] = f->na;
        ka.in_ndim[1] = f->nb;
        for (int d = 0; d < VDEV_MAX_DIMS; d++) {
            ka.in_shape[0][d] = d < f->na ? f->sa[d] : 1;
            ka.in_shape[1][d] = d < f->nb ? f->sb[d] : 1;
        }
        CHECK_OK(vdev_op_defs[op].shape(&ka));
        const vdev_kernel_fn kernels[2] = {vdev_op_defs[op].ref, vdev_op_defs[op].host};
        static const char *names[2] = {"reference kernel", "fast kernel"};
        for (int k = 0; k < 2; k++) {
            for (int64_t i = 0; i < no; i++)
                out[i] = NAN; /* every element must be written */
            ka.out[0] = out;
            kernels[k](&ka);
            check_result(names[k], op, f, ka.out_ndim[0], ka.out_shape[0], out, ha, hb);
        }
    }
    free(ha);
    free(hb);
    free(out);
}

/* ReduceToShape (dy, like) for like = each input of the form: like's shape,
 * and each element the sum of the elements of dy it was broadcast to. */
static void reduce_form(const char *dev, const struct bform *f)
{
    int64_t no = bshape_numel(f->so, f->no);
    float *dy = values(no);
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    vdev_tensor_t *tdy = vdev_tensor_from_host(dy, f->so, f->no, VDEV_F32);
    for (int side = 0; side < 2; side++) {
        const int64_t *s = side ? f->sb : f->sa;
        int n = side ? f->nb : f->na;
        int64_t nl = bshape_numel(s, n);
        vdev_tensor_t *like = vdev_tensor_zeros(s, n, VDEV_F32);
        const vdev_tensor_t *in[2] = {tdy, like};
        vdev_tensor_t *r = vdev_op_run(VDEV_OP_REDUCE_ROWS, in, 2, NULL);
        if (!r) {
            check_fail(__FILE__, __LINE__, "ReduceToShape %s side %d on %s: %s", f->name, side,
                       dev, vdev_last_error());
            continue;
        }
        int ok = vdev_tensor_ndim(r) == n;
        for (int d = 0; ok && d < n; d++)
            ok = vdev_tensor_dim(r, d) == s[d];
        double *want = calloc((size_t)(nl + 1), sizeof(double));
        float *got = malloc((size_t)(nl + 1) * 4);
        if (!want || !got)
            abort();
        for (int64_t i = 0; i < no; i++)
            want[bshape_offset(s, n, f->so, f->no, i)] += dy[i];
        CHECK_OK(vdev_tensor_to_host(r, got, (size_t)nl * 4));
        for (int64_t j = 0; ok && j < nl; j++)
            ok = fabs(got[j] - want[j]) <= 1e-6 * (1 + fabs(want[j]));
        if (ok)
            check_passed++;
        else
            check_fail(__FILE__, __LINE__, "ReduceToShape %s to input %d's shape on %s: wrong",
                       f->name, side, dev);
        free(want);
        free(got);
    }
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
    free(dy);
}

/* Shapes that do not broadcast: VDEV_ERR_SHAPE naming the op and both. */
static void incompatible(const char *dev)
{
    static const struct {
        int na;
        int64_t sa[3];
        int nb;
        int64_t sb[3];
        const char *msg;
    } bad[] = {
        {1, {3}, 1, {4}, "incompatible shapes [3] and [4]"},
        {2, {2, 3}, 2, {3, 2}, "incompatible shapes [2,3] and [3,2]"},
        {3, {3, 1, 5}, 2, {4, 4}, "incompatible shapes [3,1,5] and [4,4]"},
        {2, {0, 3}, 2, {2, 3}, "incompatible shapes [0,3] and [2,3]"},
    };
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vdev_tensor_t *a = vdev_tensor_zeros(bad[i].sa, bad[i].na, VDEV_F32);
        vdev_tensor_t *b = vdev_tensor_zeros(bad[i].sb, bad[i].nb, VDEV_F32);
        vdev_clear_error();
        CHECK(vdev_mul(a, b) == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
        CHECK_MSG("Mul: ");
        CHECK_MSG(bad[i].msg);
        CHECK_MSG("neither is 1");
    }
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* The bias of a dense layer, b [n] added to x [m,n], keeps x's shape; so
 * does x [m,n] + [1,n]: nothing that relied on these changes. */
static void dense_bias(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    int64_t sx[2] = {4, 3}, sb[1] = {3}, sb2[2] = {1, 3};
    vdev_tensor_t *x = vdev_tensor_ones(sx, 2, VDEV_F32);
    vdev_tensor_t *y = vdev_add(x, vdev_tensor_ones(sb, 1, VDEV_F32));
    vdev_tensor_t *y2 = vdev_add(x, vdev_tensor_ones(sb2, 2, VDEV_F32));
    CHECK(y && vdev_tensor_ndim(y) == 2 && vdev_tensor_dim(y, 0) == 4 &&
          vdev_tensor_dim(y, 1) == 3);
    CHECK(y2 && vdev_tensor_ndim(y2) == 2 && vdev_tensor_dim(y2, 0) == 4);
    CHECK(vdev_tensor_item(vdev_sum_all(y)) == 24.0f);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* A backend with a kernel table of its own (CUDA) is given every broadcast,
 * with vdev_shape_broadcast_b's mode in i[3] (0 the same shape, 1 a row, 2
 * one element, 3 numpy's rule in general, which its kernels read through
 * strides as the reference does). Played by the simulated GPU with a kernel
 * table that records the modes it is given and writes nothing. */
static int table_calls;
static int64_t table_modes[16];
static enum vdev_status counting_kernel(void *ctx, int dev, const struct vdev_kernel_args *a)
{
    (void)ctx;
    (void)dev;
    if (table_calls < 16)
        table_modes[table_calls] = a->i[3];
    table_calls++;
    return VDEV_OK;
}

static void device_kernel_table(void)
{
    CHECK_OK(vdev_device_push("GPU:0"));
    struct vdev_ldev *d = vdev_placement_scope_device();
    CHECK(d != NULL);
    if (!d) {
        vdev_device_pop();
        return;
    }
    const struct vdev_backend_ops *saved = d->backend->ops;
    static struct vdev_backend_ops ops;
    ops = *saved;
    ops.run_kernel = counting_kernel;
    vdev_scope_begin();
    int64_t s35[2] = {3, 5}, s5[1] = {5}, s15[2] = {1, 5}, s31[2] = {3, 1};
    vdev_tensor_t *a35 = vdev_tensor_zeros(s35, 2, VDEV_F32);
    vdev_tensor_t *b5 = vdev_tensor_zeros(s5, 1, VDEV_F32);
    vdev_tensor_t *b15 = vdev_tensor_zeros(s15, 2, VDEV_F32);
    vdev_tensor_t *b31 = vdev_tensor_zeros(s31, 2, VDEV_F32);
    vdev_tensor_t *one = vdev_tensor_ones(NULL, 0, VDEV_F32);
    d->backend->ops = &ops;
    table_calls = 0;
    CHECK(vdev_add(a35, b5) != NULL);  /* a row */
    CHECK(vdev_add(b5, b15) != NULL);  /* the same elements: [5] and [1,5] */
    CHECK(vdev_sub(a35, one) != NULL); /* one element */
    CHECK(vdev_add(a35, a35) != NULL); /* the same shape */
    vdev_tensor_t *c = vdev_add(b5, a35); /* the first operand broadcast */
    vdev_tensor_t *m = vdev_mul(a35, b31); /* a column */
    CHECK(c && vdev_tensor_dim(c, 0) == 3 && vdev_tensor_dim(c, 1) == 5);
    CHECK(m && vdev_tensor_dim(m, 0) == 3 && vdev_tensor_dim(m, 1) == 5);
    const vdev_tensor_t *rr[2] = {a35, b31};
    CHECK(vdev_op_run(VDEV_OP_REDUCE_ROWS, rr, 2, NULL) != NULL);
    const int64_t want[7] = {1, 0, 2, 0, 3, 3, 3};
    CHECK(table_calls == 7);
    for (int i = 0; i < 7 && i < table_calls; i++)
        CHECK(table_modes[i] == want[i]);
    d->backend->ops = saved;
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

static void all_forms(const char *dev, int direct)
{
    for (int op = 0; op < 4; op++)
        for (int i = 0; i < N_BFORMS; i++)
            forward_form(dev, BOPS[op], &BFORMS[i], direct);
    for (int i = 0; i < N_BFORMS; i++)
        reduce_form(dev, &BFORMS[i]);
    incompatible(dev);
    dense_bias(dev);
}

int main(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    all_forms("CPU:0", 1);
    /* a simulated GPU runs the same host kernels on its stream's thread */
    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    all_forms("GPU:0", 0);
    device_kernel_table();
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    vdev_shutdown();
    return check_done();
}
