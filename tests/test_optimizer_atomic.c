/* test_optimizer_atomic.c — a failed vdev_optimizer_apply changes nothing:
 * when the optimizer cannot make the slots (velocity; Adam's m and v) of one
 * variable, no variable is updated and Adam's step count stays, so the
 * update can be retried once memory is freed and gives what one successful
 * update gives. The mirrored strategy relies on it: it makes the slots on
 * every replica before any replica updates. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>

#define N_SMALL 16
#define N_BIG 700000 /* 2.8 MB */

static vdev_tensor_t *filled(int64_t n, float v)
{
    int64_t shape[1] = {n};
    return vdev_tensor_fill(shape, 1, VDEV_F32, v);
}

static float first(vdev_tensor_t *t)
{
    float *h = malloc((size_t)vdev_tensor_numel(t) * 4);
    float v = -1;
    if (vdev_tensor_to_host(t, h, (size_t)vdev_tensor_numel(t) * 4) == VDEV_OK)
        v = h[0];
    free(h);
    return v;
}

/* On a 16 MiB device (preallocated, so every byte is there) holding the
 * variables, their gradients and an 8.5 MiB filler, there is room for the
 * small variable's slots but not the big one's: the apply fails, nothing
 * changes; with the filler freed, it succeeds. */
static void one_optimizer(int adam)
{
    check_fresh("1x4GiB");
    uint64_t limits[1] = {16ull << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 1));
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    vdev_tensor_t *v[2] = {vdev_variable(filled(N_SMALL, 1)), vdev_variable(filled(N_BIG, 1))};
    vdev_tensor_t *g[2] = {filled(N_SMALL, 0.5f), filled(N_BIG, 0.5f)};
    void *filler;
    CHECK_OK(vdev_mem_alloc("GPU:0", 8704u << 10, &filler));
    vdev_optimizer_t *o = adam ? vdev_adam_new(0.1f, 0.9f, 0.999f, 1e-7f) : vdev_sgd_new(0.1f, 0.9f);
    CHECK_STATUS(vdev_optimizer_apply(o, v, g, 2), VDEV_ERR_OOM);
    CHECK_MSG("OOM when allocating tensor with shape[700000] and type float");
    CHECK(first(v[0]) == 1.0f); /* the small variable was not updated */
    CHECK(first(v[1]) == 1.0f);
    CHECK_OK(vdev_mem_free("GPU:0", filler));
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    /* what one successful update gives, from a fresh optimizer */
    vdev_tensor_t *w = vdev_variable(filled(N_SMALL, 1));
    vdev_optimizer_t *o2 = adam ? vdev_adam_new(0.1f, 0.9f, 0.999f, 1e-7f) : vdev_sgd_new(0.1f, 0.9f);
    CHECK_OK(vdev_optimizer_apply(o2, &w, &g[0], 1));
    CHECK(first(v[0]) == first(w));
    CHECK(first(v[0]) != 1.0f);
    vdev_optimizer_free(o);
    vdev_optimizer_free(o2);
    for (int i = 0; i < 2; i++) {
        vdev_tensor_free(v[i]);
        vdev_tensor_free(g[i]);
    }
    vdev_tensor_free(w);
}

int main(void)
{
    one_optimizer(0);
    one_optimizer(1);
    vdev_shutdown();
    return check_done();
}
