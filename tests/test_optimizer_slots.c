/* test_optimizer_slots.c — SGD's velocity slot as a caller that keeps its
 * handle sees it (a checkpoint tracker keeps the handles vdev_optimizer_slots
 * gave it and saves what they hold): momentum 0 is no velocity, as in Keras.
 * Switching momentum off zeroes the slot at once, updates without momentum
 * leave it zeros and move the variable by exactly -lr g (rounded as float
 * arithmetic rounds it), and momentum switched on again starts from zeros,
 * in the same slot; every value is checked exactly against one worked out
 * here. With several variables on two devices, every slot is zeroed; a value
 * written into a kept handle while momentum is off is where momentum starts
 * from; the zeros are written in place, so switching off works on a full
 * device. */
#define _GNU_SOURCE
#include "check.h"
#include "vdev/nn.h"

#include <stdlib.h>

#define N 4
#define N_BIG 700000 /* 2.8 MB */

static vdev_tensor_t *filled(int64_t n, float v)
{
    int64_t shape[1] = {n};
    return vdev_tensor_fill(shape, 1, VDEV_F32, v);
}

/* Every element of t is `want` (exactly); says which one is not otherwise. */
static void check_all(vdev_tensor_t *t, float want, int line)
{
    int64_t n = vdev_tensor_numel(t);
    float *h = malloc((size_t)n * 4 + 4);
    if (!h || vdev_tensor_to_host(t, h, (size_t)n * 4) != VDEV_OK) {
        check_fail(__FILE__, line, "cannot read the tensor: %s", vdev_last_error());
        free(h);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        if (h[i] != want) {
            check_fail(__FILE__, line, "element %lld is %.9g, expected %.9g", (long long)i,
                       (double)h[i], (double)want);
            free(h);
            return;
        }
    free(h);
    check_passed++;
}
#define CHECK_ALL(t, want) check_all((t), (want), __LINE__)

/* One update of vars[0..n) by gradients of `grad`. */
static void step_n(vdev_optimizer_t *o, vdev_tensor_t **vars, int n, float grad)
{
    vdev_tensor_t *g[4];
    for (int i = 0; i < n; i++) {
        int64_t shape[8];
        int nd = vdev_tensor_ndim(vars[i]);
        for (int d = 0; d < nd; d++)
            shape[d] = vdev_tensor_dim(vars[i], d);
        g[i] = vdev_tensor_fill(shape, nd, VDEV_F32, grad);
    }
    CHECK_OK(vdev_optimizer_apply(o, vars, g, n));
    for (int i = 0; i < n; i++)
        vdev_tensor_free(g[i]);
}

static void step(vdev_optimizer_t *o, vdev_tensor_t *v, float grad)
{
    step_n(o, &v, 1, grad);
}

/* The velocity slot of v (momentum on). */
static vdev_tensor_t *velocity(vdev_optimizer_t *o, vdev_tensor_t *v)
{
    vdev_tensor_t *slot[2] = {NULL, NULL};
    const char *names[2] = {NULL, NULL};
    CHECK(vdev_optimizer_slots(o, v, slot, names, 2) == 1);
    CHECK_STR(names[0], "momentum");
    return slot[0];
}

/* A handle kept across momentum off and on again (every number exact in
 * float). */
static void kept_handle(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v = vdev_variable(filled(N, 1));
    vdev_optimizer_t *o = vdev_sgd_new(0.25f, 0.5f);
    step(o, v, 0.5f); /* vel = -0.125 */
    CHECK_ALL(v, 0.875f);
    vdev_tensor_t *kept = velocity(o, v);
    CHECK_ALL(kept, -0.125f);

    /* off: zeros at once, before any update */
    CHECK_OK(vdev_sgd_set(o, 0.25f, 0));
    CHECK_ALL(kept, 0.0f);
    vdev_tensor_t *slot[2];
    CHECK(vdev_optimizer_slots(o, v, slot, NULL, 2) == 0); /* no momentum: no state */
    step(o, v, 0.5f); /* var -= 0.25 * 0.5 */
    CHECK_ALL(v, 0.75f);
    CHECK_ALL(kept, 0.0f); /* not -lr g */
    step(o, v, -2.0f);
    CHECK_ALL(v, 1.25f);
    CHECK_ALL(kept, 0.0f);

    /* on again: from zeros, in the same slot */
    CHECK_OK(vdev_sgd_set(o, 0.5f, 0.5f));
    CHECK_ALL(kept, 0.0f);
    CHECK(velocity(o, v) == kept);
    step(o, v, 0.5f); /* vel = 0.5 * 0 - 0.25 */
    CHECK_ALL(v, 1.0f);
    CHECK_ALL(kept, -0.25f);
    step(o, v, 0.5f); /* vel = 0.5 * -0.25 - 0.25 = -0.375 */
    CHECK_ALL(v, 0.625f);
    CHECK_ALL(kept, -0.375f);

    /* off (the rate changed too) and on with an update between */
    CHECK_OK(vdev_sgd_set(o, 0.5f, 0));
    CHECK_ALL(kept, 0.0f);
    step(o, v, 0.5f);
    CHECK_ALL(v, 0.375f);
    CHECK_ALL(kept, 0.0f);
    CHECK_OK(vdev_sgd_set(o, 0.25f, 0.5f));
    step(o, v, 0.5f); /* vel = -0.125 */
    CHECK_ALL(v, 0.25f);
    CHECK_ALL(kept, -0.125f);
    CHECK(velocity(o, v) == kept);
    int64_t it = -1;
    CHECK_OK(vdev_optimizer_get_iterations(o, &it));
    CHECK_EQ_U64(it, 7);
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    CHECK_OK(vdev_device_pop());
}

/* Without momentum, var -= lr g with lr g rounded to float first (float
 * arithmetic, as TensorFlow's ApplyGradientDescent computes it): the same
 * bits whether the optimizer was made without momentum or switched off. */
static void plain_steps(void)
{
    check_fresh("1x1GiB");
    const float lr = 0.1f, g = 0.3f;
    volatile float prod = lr * g; /* rounded to float here */
    vdev_tensor_t *v[2] = {vdev_variable(filled(N, 1)), vdev_variable(filled(N, 1))};
    vdev_optimizer_t *plain = vdev_sgd_new(lr, 0), *off = vdev_sgd_new(lr, 0.9f);
    CHECK_OK(vdev_sgd_set(off, lr, 0));
    float want = 1.0f;
    for (int k = 0; k < 3; k++) {
        step(plain, v[0], g);
        step(off, v[1], g);
        want = want - prod;
        CHECK_ALL(v[0], want);
        CHECK_ALL(v[1], want);
    }
    vdev_optimizer_free(plain);
    vdev_optimizer_free(off);
    vdev_tensor_free(v[0]);
    vdev_tensor_free(v[1]);
}

/* Several variables, shapes and devices: switching off zeroes every slot
 * (zeros of one shape and device serve all such slots). */
static void many_slots(void)
{
    check_fresh("2x1GiB");
    int64_t sh[2] = {2, 3};
    vdev_tensor_t *v[4];
    CHECK_OK(vdev_device_push("GPU:0"));
    v[0] = vdev_variable(filled(N, 1));
    v[1] = vdev_variable(vdev_tensor_fill(sh, 2, VDEV_F32, 1));
    v[2] = vdev_variable(filled(N, 2));
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push("GPU:1"));
    v[3] = vdev_variable(filled(N, 1));
    CHECK_OK(vdev_device_pop());
    vdev_optimizer_t *o = vdev_sgd_new(0.25f, 0.5f);
    step_n(o, v, 4, 0.5f); /* vel = -0.125 everywhere */
    vdev_tensor_t *kept[4];
    for (int i = 0; i < 4; i++) {
        kept[i] = velocity(o, v[i]);
        CHECK_ALL(kept[i], -0.125f);
    }
    CHECK_OK(vdev_sgd_set(o, 0.25f, 0));
    for (int i = 0; i < 4; i++)
        CHECK_ALL(kept[i], 0.0f);
    step_n(o, v, 4, 0.5f);
    CHECK_ALL(v[0], 0.75f);
    CHECK_ALL(v[1], 0.75f);
    CHECK_ALL(v[2], 1.75f);
    CHECK_ALL(v[3], 0.75f);
    for (int i = 0; i < 4; i++)
        CHECK_ALL(kept[i], 0.0f);
    /* each slot stayed on its variable's device */
    CHECK_STR(vdev_tensor_device(kept[1]), "/device:GPU:0");
    CHECK_STR(vdev_tensor_device(kept[3]), "/device:GPU:1");
    vdev_optimizer_free(o);
    for (int i = 0; i < 4; i++)
        vdev_tensor_free(v[i]);
}

/* A value written into a kept handle while momentum is off (a checkpoint
 * restored through the handles) is where momentum starts from. */
static void written_while_off(void)
{
    check_fresh("1x1GiB");
    vdev_tensor_t *v = vdev_variable(filled(N, 1));
    vdev_optimizer_t *o = vdev_sgd_new(0.25f, 0.5f);
    vdev_tensor_t *kept = velocity(o, v);
    CHECK_OK(vdev_sgd_set(o, 0.25f, 0));
    step(o, v, 0.5f);
    CHECK_ALL(v, 0.875f);
    vdev_tensor_t *saved = filled(N, -0.5f);
    CHECK_OK(vdev_assign(kept, saved));
    vdev_tensor_free(saved);
    step(o, v, 0.5f); /* momentum off: the slot is not read */
    CHECK_ALL(v, 0.75f);
    CHECK_ALL(kept, -0.5f); /* nor written */
    CHECK_OK(vdev_sgd_set(o, 0.25f, 0.5f));
    step(o, v, 0.5f); /* vel = 0.5 * -0.5 - 0.125 = -0.375 */
    CHECK_ALL(v, 0.375f);
    CHECK_ALL(kept, -0.375f);
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
}

/* Switching off on a full device: the slots are zeroed in place, so it
 * needs no memory and succeeds. A 16 MiB device (preallocated) holds the
 * variables, their velocities and a filler that leaves less free than the
 * big slot's 2.67 MiB (zeros made aside, as before, would not fit). */
static void full_device(void)
{
    check_fresh("1x4GiB");
    uint64_t limits[1] = {16ull << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 1));
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v[2] = {vdev_variable(filled(N, 1)), vdev_variable(filled(N_BIG, 1))};
    vdev_optimizer_t *o = vdev_sgd_new(0.25f, 0.5f);
    /* the slots before the gradients, so that the gradients' memory, once
     * freed, joins the free space after it in one block */
    vdev_tensor_t *kept[2] = {velocity(o, v[0]), velocity(o, v[1])};
    step_n(o, v, 2, 0.5f); /* vel = -0.125 */
    void *filler;
    CHECK_OK(vdev_mem_alloc("GPU:0", 8704u << 10, &filler));
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK(mi.largest_free_block < (uint64_t)N_BIG * 4);
    uint64_t in_use = mi.bytes_in_use;
    CHECK_OK(vdev_sgd_set(o, 0.5f, 0));
    CHECK_ALL(kept[0], 0.0f);
    CHECK_ALL(kept[1], 0.0f);
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, in_use);
    CHECK_EQ_U64(mi.n_failed_allocs, 0);
    CHECK_OK(vdev_mem_free("GPU:0", filler));
    step_n(o, v, 2, 0.5f); /* no momentum: 0.875 - 0.5 * 0.5 */
    CHECK_ALL(v[0], 0.625f);
    CHECK_ALL(v[1], 0.625f);
    CHECK_ALL(kept[0], 0.0f);
    vdev_optimizer_free(o);
    vdev_tensor_free(v[0]);
    vdev_tensor_free(v[1]);
    CHECK_OK(vdev_device_pop());
}

int main(void)
{
    kept_handle();
    plain_steps();
    many_slots();
    written_while_off();
    full_device();
    return check_done();
}
