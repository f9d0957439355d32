/* test_grad_broadcast.c — the gradients of the broadcasting binary ops
 * (AddV2, Sub, Mul, RealDiv) through the tape, for every form of
 * ops_bcast.h, on the cpu backend and on a simulated GPU.
 *
 * As in test_grad.c: y = a op b with both operands variables, the loss
 * L = sum(y * W) with fixed random weights W of y's shape, and dL/da, dL/db
 * from vdev_tape_gradient against central finite differences
 *     (L(v + eps e_i) - L(v - eps e_i)) / (2 eps),  eps = 1e-2,
 *     |grad - fd| <= 2e-3 + 1e-2 |fd|,
 * for every element. Each gradient must have its input's shape exactly (a
 * gradient summed over the broadcast dimensions and given the input's rank,
 * as TensorFlow's reshape(reduce_sum(g, rx), sx)), on its input's device.
 * Forms with an empty output give zeros of each input's shape. Also: one
 * variable broadcast twice, its two gradients summed. */
#define _GNU_SOURCE
#include "check.h"
#include "ops_bcast.h"
#include "tensor/tensor.h"
#include "ops_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-2
#define ATOL 2e-3
#define RTOL 1e-2

typedef vdev_tensor_t *(*binop)(const vdev_tensor_t *, const vdev_tensor_t *);
static const binop BIN[4] = {vdev_add, vdev_sub, vdev_mul, vdev_div};
static const char *const BIN_NAMES[4] = {"add", "sub", "mul", "div"};

/* L = sum(op(a, b) * W); W from a fixed seed, of the output's shape. */
static vdev_tensor_t *loss_of(int op, const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    vdev_tensor_t *y = BIN[op](a, b);
    if (!y)
        return NULL;
    int64_t s[4] = {0};
    int nd = vdev_tensor_ndim(y);
    for (int d = 0; d < nd && d < 4; d++)
        s[d] = vdev_tensor_dim(y, d);
    return vdev_sum_all(vdev_mul(y, vdev_tensor_uniform(s, nd, -1.0f, 1.0f, 4321)));
}

static double loss_value(int op, const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    vdev_scope_begin();
    double l = vdev_tensor_item(loss_of(op, a, b));
    vdev_scope_end();
    return l;
}

/* A variable of shape (s, n), |x| in [0.5, 2) with a random sign; its
 * values in h (n elements, at least one word). */
static vdev_tensor_t *make_var(const int64_t *s, int n, float *h)
{
    int64_t e = bshape_numel(s, n);
    for (int64_t i = 0; i < e; i++) {
        h[i] = rng_uniform(0.5f, 2.0f);
        if (rng_next() & 1)
            h[i] = -h[i];
    }
    return vdev_variable(vdev_tensor_from_host(h, s, n, VDEV_F32));
}

static int same_shape(const vdev_tensor_t *t, const int64_t *s, int n)
{
    if (vdev_tensor_ndim(t) != n)
        return 0;
    for (int d = 0; d < n; d++)
        if (vdev_tensor_dim(t, d) != s[d])
            return 0;
    return 1;
}

static void gradcheck(const char *dev, int op, const struct bform *f)
{
    CHECK_OK(vdev_device_push(dev));
    const int64_t *shape[2] = {f->sa, f->sb};
    int nd[2] = {f->na, f->nb};
    float *h[2];
    vdev_tensor_t *v[2], *g[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        h[k] = malloc((size_t)(bshape_numel(shape[k], nd[k]) + 1) * 4);
        if (!h[k])
            abort();
        v[k] = make_var(shape[k], nd[k], h[k]);
    }
    vdev_scope_begin();
    vdev_tape_t *tape = vdev_tape_begin();
    CHECK(tape != NULL);
    vdev_tensor_t *loss = loss_of(op, v[0], v[1]);
    enum vdev_status st = vdev_tape_gradient(tape, loss, v, 2, g);
    vdev_tape_end(tape);
    if (st != VDEV_OK) {
        check_fail(__FILE__, __LINE__, "%s %s on %s: %s", BIN_NAMES[op], f->name, dev,
                   vdev_last_error());
        goto out;
    }
    int empty = bshape_numel(f->so, f->no) == 0;
    for (int k = 0; k < 2; k++) {
        char want[96], got[96];
        int64_t gs[4] = {0};
        for (int d = 0; d < vdev_tensor_ndim(g[k]) && d < 4; d++)
            gs[d] = vdev_tensor_dim(g[k], d);
        if (!same_shape(g[k], shape[k], nd[k])) {
            check_fail(__FILE__, __LINE__, "%s %s on %s: d/d input %d has shape %s, expected %s",
                       BIN_NAMES[op], f->name, dev, k,
                       vdev_shape_str(gs, vdev_tensor_ndim(g[k]), got, sizeof got),
                       vdev_shape_str(shape[k], nd[k], want, sizeof want));
            continue;
        }
        CHECK_STR(vdev_tensor_device(g[k]), vdev_tensor_device(v[k]));
        int64_t n = bshape_numel(shape[k], nd[k]);
        float *gx = malloc((size_t)(n + 1) * 4);
        if (!gx)
            abort();
        CHECK_OK(vdev_tensor_to_host(g[k], gx, (size_t)n * 4));
        int ok = 1;
        for (int64_t i = 0; i < n && ok; i++) {
            double fd = 0.0; /* an empty output: L = 0 whatever the inputs */
            if (!empty) {
                float x0 = h[k][i];
                double l[2];
                for (int side = 0; side < 2; side++) {
                    h[k][i] = (float)(x0 + (side ? -EPS : EPS));
                    vdev_scope_begin();
                    CHECK_OK(vdev_assign(v[k], vdev_tensor_from_host(h[k], shape[k], nd[k],
                                                                     VDEV_F32)));
                    vdev_scope_end();
                    l[side] = loss_value(op, v[0], v[1]);
                }
                h[k][i] = x0;
                fd = (l[0] - l[1]) / (2 * EPS);
            }
            if (!(fabs(gx[i] - fd) <= ATOL + RTOL * fabs(fd))) {
                check_fail(__FILE__, __LINE__,
                           "%s %s on %s: d/d input %d [%lld] = %.6g, finite difference %.6g",
                           BIN_NAMES[op], f->name, dev, k, (long long)i, gx[i], fd);
                ok = 0;
            }
        }
        vdev_scope_begin();
        CHECK_OK(vdev_assign(v[k], vdev_tensor_from_host(h[k], shape[k], nd[k], VDEV_F32)));
        vdev_scope_end();
        if (ok)
            check_passed++;
        free(gx);
    }
out:
    vdev_scope_end();
    for (int k = 0; k < 2; k++) {
        vdev_tensor_free(v[k]);
        free(h[k]);
    }
    CHECK_OK(vdev_device_pop());
}

/* v [5] broadcast twice: L = sum((v + b) * v) with b [3,1]: dL/dv sums over
 * the rows of both uses, dL/dv_j = sum_r (2 v_j + b_r), dL/db_r =
 * sum_j v_j. Small binary values: exact. */
static void used_twice(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    float hv[5] = {1, -2, 0.5f, 4, -0.25f}, hb[3] = {2, -1, 0.5f};
    int64_t sv[1] = {5}, sb[2] = {3, 1};
    vdev_tensor_t *v = vdev_variable(vdev_tensor_from_host(hv, sv, 1, VDEV_F32));
    vdev_tensor_t *b = vdev_variable(vdev_tensor_from_host(hb, sb, 2, VDEV_F32));
    vdev_scope_begin();
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *y = vdev_mul(vdev_add(v, b), v); /* [3,5] */
    CHECK(y && vdev_tensor_ndim(y) == 2 && vdev_tensor_dim(y, 0) == 3);
    vdev_tensor_t *vars[2] = {v, b}, *g[2] = {NULL, NULL};
    CHECK_OK(vdev_tape_gradient(t, vdev_sum_all(y), vars, 2, g));
    vdev_tape_end(t);
    float gv[5], gb[3];
    CHECK(g[0] && same_shape(g[0], sv, 1) && g[1] && same_shape(g[1], sb, 2));
    CHECK_OK(vdev_tensor_to_host(g[0], gv, sizeof gv));
    CHECK_OK(vdev_tensor_to_host(g[1], gb, sizeof gb));
    int ok = 1;
    for (int j = 0; j < 5; j++)
        ok = ok && gv[j] == 3 * 2 * hv[j] + (hb[0] + hb[1] + hb[2]);
    for (int r = 0; r < 3; r++)
        ok = ok && gb[r] == hv[0] + hv[1] + hv[2] + hv[3] + hv[4];
    CHECK(ok);
    vdev_scope_end();
    vdev_tensor_free(v);
    vdev_tensor_free(b);
    CHECK_OK(vdev_device_pop());
}

static void all_forms(const char *dev)
{
    for (int op = 0; op < 4; op++)
        for (int i = 0; i < N_BFORMS; i++)
            gradcheck(dev, op, &BFORMS[i]);
    used_twice(dev);
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
}

int main(void)
{
    rng_state = 0x6a09e667f3bcc909ull;
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    all_forms("CPU:0");
    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    all_forms("GPU:0");
    vdev_shutdown();
    return check_done();
}
