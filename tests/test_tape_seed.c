/* test_tape_seed.c — vdev_tape_gradient_seeded (TensorFlow's
 * output_gradients): the gradients of sum(loss * dloss) for a given dloss,
 * ones when it is NULL; a dloss on another device is copied to the loss's;
 * one-hot seeds give the rows of a Jacobian; a dloss of another shape or
 * dtype is VDEV_ERR_SHAPE with its message and every gradient NULL; an
 * unknown `unconnected` names the call. On the cpu backend and two
 * simulated GPUs. */
#define _GNU_SOURCE
#include "check.h"

#include <string.h>

static vdev_tensor_t *vec(const float *v, int64_t n)
{
    return vdev_tensor_from_host(v, &n, 1, VDEV_F32);
}

static int equals(vdev_tensor_t *t, const float *want, int n)
{
    float got[8];
    if (!t || n > 8 || vdev_tensor_to_host(t, got, sizeof(float) * (size_t)n) != VDEV_OK)
        return 0;
    return memcmp(got, want, sizeof(float) * (size_t)n) == 0;
}

/* y = x * x * w (x = [1, 2, 3], w = [2, 2, 2]): dy/dx is diagonal 2xw. */
static void test_seeds(const char *dev, const char *other)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    vdev_tensor_t *x = vdev_variable(vec((const float[]){1, 2, 3}, 3));
    vdev_tensor_t *w = vdev_variable(vec((const float[]){2, 2, 2}, 3));
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *y = vdev_mul(vdev_mul(x, x), w);
    vdev_tensor_t *g = NULL, *vars[2] = {x, w}, *gs[2];
    CHECK_OK(vdev_tape_gradient_seeded(t, y, vec((const float[]){1, 0, 2}, 3), &x, 1, &g,
                                       VDEV_UNCONNECTED_ZERO));
    CHECK(equals(g, (const float[]){4, 0, 24}, 3));
    CHECK_OK(vdev_tape_gradient_seeded(t, y, NULL, vars, 2, gs, VDEV_UNCONNECTED_ZERO));
    CHECK(equals(gs[0], (const float[]){4, 8, 12}, 3));
    CHECK(equals(gs[1], (const float[]){1, 4, 9}, 3));
    /* a seed on another device: copied to the loss's; the gradient stays home */
    if (other) {
        CHECK_OK(vdev_device_push(other));
        vdev_tensor_t *far = vec((const float[]){0, 1, 0}, 3);
        vdev_device_pop();
        CHECK_OK(vdev_tape_gradient_seeded(t, y, far, &x, 1, &g, VDEV_UNCONNECTED_ZERO));
        CHECK(equals(g, (const float[]){0, 8, 0}, 3));
        CHECK_STR(vdev_tensor_device(g), vdev_tensor_device(x));
    }
    /* one-hot seeds: the Jacobian's rows */
    for (int i = 0; i < 3; i++) {
        float e[3] = {0, 0, 0}, row[3] = {0, 0, 0};
        e[i] = 1;
        row[i] = 4.0f * (float)(i + 1);
        CHECK_OK(vdev_tape_gradient_seeded(t, y, vec(e, 3), &x, 1, &g, VDEV_UNCONNECTED_ZERO));
        CHECK(equals(g, row, 3));
    }
    /* wrong shape, wrong dtype: every gradient NULL */
    gs[0] = gs[1] = x;
    CHECK_ERR(vdev_tape_gradient_seeded(t, y, vec((const float[]){1, 1}, 2), vars, 2, gs,
                                        VDEV_UNCONNECTED_ZERO),
              VDEV_ERR_SHAPE,
              "vdev_tape_gradient_seeded: the loss's output gradient is float of shape[2] but "
              "the loss is float of shape[3]");
    CHECK(gs[0] == NULL && gs[1] == NULL);
    int64_t three = 3;
    CHECK_ERR(vdev_tape_gradient_seeded(t, y, vdev_tensor_zeros(&three, 1, VDEV_I32), &x, 1, &g,
                                        VDEV_UNCONNECTED_ZERO),
              VDEV_ERR_SHAPE,
              "vdev_tape_gradient_seeded: the loss's output gradient is int32 of shape[3] but "
              "the loss is float of shape[3]");
    CHECK_ERR(vdev_tape_gradient_seeded(t, y, NULL, &x, 1, &g, (enum vdev_unconnected)7),
              VDEV_ERR_INVALID_ARG,
              "vdev_tape_gradient_seeded: unconnected is 7, not VDEV_UNCONNECTED_ZERO or "
              "VDEV_UNCONNECTED_NONE");
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
    vdev_tensor_free(w);
    vdev_device_pop();
}

int main(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    test_seeds("CPU:0", NULL);
    CHECK_NO_LEAK("CPU:0");
    vdev_shutdown();

    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    test_seeds("GPU:0", "GPU:1");
    CHECK_NO_LEAK("GPU:0");
    CHECK_NO_LEAK("GPU:1");
    vdev_shutdown();
    return check_done();
}
