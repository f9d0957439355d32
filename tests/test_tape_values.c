/* test_tape_values.c — a tape's gradients use the values its ops read, as
 * TensorFlow's and PyTorch's do, even when a variable is written in place
 * before the gradient is asked for; and a reshape of a variable is a value.
 *
 *  - two models on one tape (persistent use): the second model's update is
 *    applied, then the first model's gradient, which flows back through the
 *    second model's weights, is asked for: it must equal, bit for bit, the
 *    gradient taken before any update (it read the old weights);
 *  - vdev_assign between the forward pass and the gradient, twice: the
 *    gradient of sum(v*v) is 2*v as v was read, and one copy of v was saved
 *    (device memory grows by v's bytes once, not per write), and given back
 *    when the tape ends;
 *  - a tape ended before the update (a training loop) saves nothing;
 *  - the copy cannot be saved (the device is full): the write goes on and
 *    the gradient that needs the old value fails with VDEV_ERR_OOM and a
 *    message naming the op, the variable and the way out; nothing leaks;
 *  - vdev_reshape of a variable does not follow later writes (a reshape of
 *    a plain tensor stays a view: no memory).
 * Each check fails on the code before this: the gradient saw the new value
 * and the reshape was a view. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>
#include <string.h>

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    return vdev_memory_info(dev, &mi) == VDEV_OK ? mi.bytes_in_use : UINT64_MAX;
}

static vdev_tensor_t *from(const float *v, int64_t rows, int64_t cols)
{
    int64_t s[2] = {rows, cols};
    return vdev_tensor_from_host(v, s, cols ? 2 : 1, VDEV_F32);
}

static int equals(const vdev_tensor_t *t, const float *want, int n)
{
    float got[64];
    if (n > 64 || vdev_tensor_numel(t) != n ||
        vdev_tensor_to_host(t, got, (size_t)n * sizeof *got) != VDEV_OK)
        return 0;
    return memcmp(got, want, (size_t)n * sizeof *got) == 0;
}

static int same_bits(const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    float x[64], y[64];
    int64_t n = vdev_tensor_numel(a);
    return n > 0 && n <= 64 && n == vdev_tensor_numel(b) &&
           vdev_tensor_to_host(a, x, (size_t)n * sizeof *x) == VDEV_OK &&
           vdev_tensor_to_host(b, y, (size_t)n * sizeof *y) == VDEV_OK &&
           memcmp(x, y, (size_t)n * sizeof *x) == 0;
}

/* x [4,3] @ w1 [3,5] @ w2 [5,2] against t [4,2]: two "models" on one tape. */
static void two_models(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    float xv[12], w1v[15], w2v[10], tv[8];
    for (int i = 0; i < 12; i++)
        xv[i] = (float)((i * 7) % 5) * 0.25f - 0.5f;
    for (int i = 0; i < 15; i++)
        w1v[i] = (float)((i * 3) % 7) * 0.125f - 0.375f;
    for (int i = 0; i < 10; i++)
        w2v[i] = (float)((i * 5) % 9) * 0.1f - 0.4f;
    for (int i = 0; i < 8; i++)
        tv[i] = (float)(i % 3) - 1.0f;
    vdev_tensor_t *x = from(xv, 4, 3), *t = from(tv, 4, 2);
    vdev_tensor_t *w1 = vdev_variable(from(w1v, 3, 5)), *w2 = vdev_variable(from(w2v, 5, 2));
    CHECK(x && t && w1 && w2);

    /* the reference: both gradients from the values before any update */
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss =
        vdev_mse(vdev_matmul(vdev_matmul(x, w1, false, false), w2, false, false), t);
    vdev_tensor_t *want[2] = {NULL, NULL}, *vars[2] = {w1, w2};
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, 2, want));
    vdev_tape_end(tape);

    /* one tape, w2 updated between the two gradient calls */
    vdev_optimizer_t *sgd = vdev_sgd_new(0.5f, 0.0f);
    vdev_tensor_t *w2_before = from(w2v, 5, 2);
    vdev_tensor_t *zero = vdev_tensor_zeros((int64_t[]){5, 2}, 2, VDEV_F32);
    CHECK_OK(vdev_optimizer_apply(sgd, &w2, &zero, 1)); /* makes the optimizer's own state */
    CHECK_OK(vdev_scope_begin());
    tape = vdev_tape_begin();
    loss = vdev_mse(vdev_matmul(vdev_matmul(x, w1, false, false), w2, false, false), t);
    vdev_tensor_t *g2 = NULL, *g1 = NULL;
    CHECK_OK(vdev_tape_gradient(tape, loss, &w2, 1, &g2));
    CHECK(same_bits(g2, want[1]));
    uint64_t before = in_use(dev);
    CHECK_OK(vdev_optimizer_apply(sgd, &w2, &g2, 1));
    /* the update happened, and saved the w2 the tape read (40 bytes: one block) */
    CHECK(!same_bits(w2, w2_before));
    CHECK_EQ_U64(in_use(dev) - before, 256);
    CHECK_OK(vdev_tape_gradient(tape, loss, &w1, 1, &g1));
    CHECK(same_bits(g1, want[0]));
    vdev_tensor_free(g1);
    vdev_tape_end(tape);
    CHECK_EQ_U64(in_use(dev), before); /* the copy went with the tape */
    vdev_scope_end();
    vdev_optimizer_free(sgd);
    CHECK_OK(vdev_device_pop());
}

/* sum(v*v) recorded, then v assigned twice: the gradient is 2*old. */
static void assigned(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    const float old[4] = {1, 2, 3, 4}, new1[4] = {10, 20, 30, 40}, new2[4] = {-1, -1, -1, -1};
    vdev_tensor_t *v = vdev_variable(from(old, 4, 0));
    vdev_tensor_t *a = from(new1, 4, 0), *b = from(new2, 4, 0);
    CHECK(v && a && b);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *sq = vdev_mul(v, v), *l = vdev_sum(sq, -1, false);
    uint64_t recorded = in_use(dev);
    CHECK_OK(vdev_assign(v, a));
    uint64_t one = in_use(dev);
    CHECK_EQ_U64(one - recorded, 256); /* v's 16 bytes, saved once */
    CHECK_OK(vdev_assign(v, b));
    CHECK_EQ_U64(in_use(dev), one); /* nobody read the value overwritten now */
    vdev_tensor_t *g = NULL;
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    const float want[4] = {2, 4, 6, 8};
    CHECK(equals(g, want, 4));
    CHECK(equals(v, new2, 4));
    vdev_tensor_free(g);
    vdev_tensor_free(sq);
    vdev_tensor_free(l);
    vdev_tape_end(tape);
    CHECK_EQ_U64(in_use(dev), one - 3 * 256); /* the copy, v*v and the sum are gone */

    /* a tape ended before the write saves nothing */
    tape = vdev_tape_begin();
    sq = vdev_mul(v, v);
    l = vdev_sum(sq, -1, false);
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    vdev_tape_end(tape);
    uint64_t ended = in_use(dev);
    CHECK_OK(vdev_assign(v, a));
    CHECK_EQ_U64(in_use(dev), ended);
    CHECK_OK(vdev_device_pop());
}

/* The copy cannot be made: the gradient that needs it fails, clearly. */
static void no_room(void)
{
    check_fresh("1x4MiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    int64_t s[1] = {100000}, small[1] = {16384}; /* 400 KB; 64 KiB */
    vdev_tensor_t *v = vdev_variable(vdev_tensor_fill(s, 1, VDEV_F32, 1.0));
    vdev_tensor_t *value = vdev_tensor_fill(s, 1, VDEV_F32, 2.0);
    CHECK(v && value);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *sq = vdev_mul(v, v), *l = vdev_sum(sq, -1, false);
    CHECK(sq && l);
    /* fill the card with 64 KiB blocks: no 400 KB block is left */
    CHECK_OK(vdev_scope_begin());
    int n = 0;
    while (n < 1000 && vdev_tensor_fill(small, 1, VDEV_F32, 0.0))
        n++;
    CHECK(n > 0 && n < 1000);
    CHECK_OK(vdev_assign(v, value)); /* the write goes on */
    vdev_scope_end();
    float *host = malloc(100000 * sizeof *host);
    CHECK(host && vdev_tensor_to_host(v, host, 100000 * sizeof *host) == VDEV_OK &&
          host[0] == 2.0f && host[99999] == 2.0f);
    free(host);
    vdev_tensor_t *g = (vdev_tensor_t *)1;
    CHECK_STATUS(vdev_tape_gradient(tape, l, &v, 1, &g), VDEV_ERR_OOM);
    CHECK_MSG("Mul read a variable of shape[100000] on /job:localhost/replica:0/task:0/"
              "device:GPU:0 that was written before the gradient was asked for, and its "
              "value then could not be kept (out of memory); end the tape or take the "
              "gradients before updating the variable");
    CHECK(g == NULL);
    vdev_tape_end(tape);
    vdev_tensor_free(l);
    vdev_tensor_free(sq);
    vdev_tensor_free(value);
    vdev_tensor_free(v);
    CHECK_EQ_U64(in_use("GPU:0"), 0);
    CHECK_OK(vdev_device_pop());
}

/* A reshape of a variable is its value then; of a plain tensor, a view. */
static void reshape_is_a_value(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    const float old[4] = {1, 2, 3, 4}, new1[4] = {9, 9, 9, 9};
    vdev_tensor_t *v = vdev_variable(from(old, 4, 0)), *a = from(new1, 4, 0);
    int64_t s[2] = {2, 2};
    vdev_tensor_t *r = vdev_reshape(v, s, 2);
    CHECK(r && vdev_tensor_dim(r, 0) == 2);
    CHECK_OK(vdev_assign(v, a));
    CHECK(equals(r, old, 4));
    vdev_optimizer_t *sgd = vdev_sgd_new(1.0f, 0.0f);
    CHECK_OK(vdev_optimizer_apply(sgd, &v, &a, 1));
    CHECK(equals(r, old, 4));
    vdev_optimizer_free(sgd);
    /* a plain tensor's reshape takes no memory */
    uint64_t before = in_use(dev);
    vdev_tensor_t *view = vdev_reshape(a, s, 2);
    CHECK(view != NULL);
    CHECK_EQ_U64(in_use(dev), before);
    /* and the gradient still flows to the variable, from the value read:
     * d sum(r*r)/dv = 2v as it was */
    vdev_tensor_t *o = from(old, 4, 0);
    CHECK_OK(vdev_assign(v, o));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *r2 = vdev_reshape(v, s, 2);
    vdev_tensor_t *l = vdev_sum(vdev_mul(r2, r2), -1, false), *g = NULL;
    CHECK_OK(vdev_assign(v, a));
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    const float want[4] = {2, 4, 6, 8};
    CHECK(equals(g, want, 4));
    CHECK(vdev_tensor_ndim(g) == 1); /* the variable's shape, not the reshape's */
    vdev_tape_end(tape);
    CHECK_OK(vdev_device_pop());
}

int main(void)
{
    two_models("GPU:0");
    two_models("CPU:0");
    assigned("GPU:1");
    assigned("CPU:0");
    no_room();
    reshape_is_a_value("GPU:0");
    reshape_is_a_value("CPU:0");
    vdev_shutdown();
    return check_done();
}
