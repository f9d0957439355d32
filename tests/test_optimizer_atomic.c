/* test_optimizer_atomic.c — a failed vdev_optimizer_apply changes nothing:
 * when the optimizer cannot make the slots (velocity; Adam's m and v) of one
 * variable, when one gradient has the wrong shape or dtype or (strict
 * placement) sits on another device, or when a gradient from another device
 * cannot be copied for want of memory, no variable is updated and Adam's
 * step count and the slots stay (slots made by the failed call are freed),
 * so the update can be retried and gives what one successful update gives.
 * The mirrored strategy relies on it: it makes the slots on every replica
 * before any replica updates. */
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
    struct vdev_memory_info before, after;
    CHECK_OK(vdev_memory_info("GPU:0", &before));
    CHECK_STATUS(vdev_optimizer_apply(o, v, g, 2), VDEV_ERR_OOM);
    CHECK_MSG("OOM when allocating tensor with shape[700000] and type float");
    CHECK(first(v[0]) == 1.0f); /* the small variable was not updated */
    CHECK(first(v[1]) == 1.0f);
    /* and its slots, made before the big one's failed, were freed */
    CHECK_OK(vdev_memory_info("GPU:0", &after));
    CHECK_EQ_U64(after.bytes_in_use, before.bytes_in_use);
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

static vdev_optimizer_t *new_opt(int adam)
{
    return adam ? vdev_adam_new(0.1f, 0.9f, 0.999f, 1e-7f) : vdev_sgd_new(0.1f, 0.9f);
}

/* After a failed apply, v (two variables of ones) is unchanged, and one
 * good apply with gradients of 0.5 gives what a fresh optimizer's first
 * apply gives (the momentum, m and v, and Adam's step are untouched). */
static void unchanged_then_good(int adam, vdev_optimizer_t *o, vdev_tensor_t **v, int64_t n)
{
    CHECK(first(v[0]) == 1.0f);
    CHECK(first(v[1]) == 1.0f);
    vdev_tensor_t *g[2] = {filled(n, 0.5f), filled(n, 0.5f)};
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    vdev_tensor_t *w = vdev_variable(filled(n, 1));
    vdev_optimizer_t *o2 = new_opt(adam);
    CHECK_OK(vdev_optimizer_apply(o2, &w, &g[0], 1));
    CHECK(first(v[0]) == first(w));
    CHECK(first(v[1]) == first(w));
    CHECK(first(w) != 1.0f);
    vdev_optimizer_free(o2);
    vdev_tensor_free(w);
    vdev_tensor_free(g[0]);
    vdev_tensor_free(g[1]);
}

/* The second gradient is bad (shape, dtype, or on GPU:1 under strict
 * placement): the first variable must not move. The slots exist already
 * (a first failed apply made them), so only the checks stand between. */
static void bad_gradient(int adam)
{
    check_fresh("2x1GiB");
    const char *name = adam ? "ApplyAdam" : "ApplyMomentum";
    char want[400];
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v[2] = {vdev_variable(filled(4, 1)), vdev_variable(filled(4, 1))};
    vdev_tensor_t *g0 = filled(4, 0.5f), *g5 = filled(5, 0.5f);
    int64_t s4[1] = {4};
    vdev_tensor_t *gi = vdev_tensor_fill(s4, 1, VDEV_I32, 1);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *g1 = filled(4, 0.5f);
    CHECK_OK(vdev_device_pop());
    vdev_optimizer_t *o = new_opt(adam);

    CHECK_STATUS(vdev_optimizer_apply(o, v, (vdev_tensor_t *[2]){g0, g5}, 2), VDEV_ERR_SHAPE);
    snprintf(want, sizeof want, "%s: incompatible shapes [4] and [5]", name);
    CHECK_MSG(want);
    CHECK(first(v[0]) == 1.0f);

    CHECK_STATUS(vdev_optimizer_apply(o, v, (vdev_tensor_t *[2]){g0, gi}, 2), VDEV_ERR_SHAPE);
    snprintf(want, sizeof want, "%s: input #1 (shape [4]) is int32, expected float", name);
    CHECK_MSG(want);
    CHECK(first(v[0]) == 1.0f);

    CHECK_OK(vdev_set_placement_policy(VDEV_PLACEMENT_STRICT));
    CHECK_STATUS(vdev_optimizer_apply(o, v, (vdev_tensor_t *[2]){g0, g1}, 2), VDEV_ERR_PLACEMENT);
    snprintf(want, sizeof want,
             "Tensors on conflicting devices: cannot compute %s as input #1 was expected to be "
             "on /job:localhost/replica:0/task:0/device:GPU:0 but is actually on "
             "/job:localhost/replica:0/task:0/device:GPU:1",
             name);
    CHECK_MSG(want);
    CHECK_OK(vdev_set_placement_policy(VDEV_PLACEMENT_COPY));
    unchanged_then_good(adam, o, v, 4);
    vdev_optimizer_free(o);
    vdev_tensor_t *all[] = {v[0], v[1], g0, g5, gi, g1};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        vdev_tensor_free(all[i]);
}

/* The second gradient is on GPU:1 and GPU:0 has room for the slots the
 * apply makes but not for that gradient's copy: the copy fails before any
 * kernel runs, so the first variable stays. */
static void copy_fails(int adam)
{
    check_fresh("2x1GiB");
    uint64_t limits[1] = {32ull << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 1));
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v[2] = {vdev_variable(filled(N_BIG, 1)), vdev_variable(filled(N_BIG, 1))};
    vdev_tensor_t *g0 = filled(N_BIG, 0.5f);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *g1 = filled(N_BIG, 0.5f);
    CHECK_OK(vdev_device_pop());
    vdev_optimizer_t *o = new_opt(adam);
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    /* room for the slots (one or two per variable, N_BIG floats rounded to
     * 256 bytes) and 1 MiB more: less than the 2.8 MB copy of g1 */
    uint64_t slots = (adam ? 4u : 2u) * (((uint64_t)N_BIG * 4 + 255) / 256 * 256);
    uint64_t room = mi.bytes_limit - mi.bytes_in_use;
    void *filler = NULL;
    CHECK(room > slots + (2u << 20));
    CHECK_OK(vdev_mem_alloc("GPU:0", room - slots - (1u << 20), &filler));
    CHECK_STATUS(vdev_optimizer_apply(o, v, (vdev_tensor_t *[2]){g0, g1}, 2), VDEV_ERR_OOM);
    CHECK_MSG("OOM when allocating tensor with shape[700000] and type float");
    CHECK_OK(vdev_mem_free("GPU:0", filler));
    vdev_tensor_free(g0);
    vdev_tensor_free(g1);
    unchanged_then_good(adam, o, v, N_BIG);
    vdev_optimizer_free(o);
    vdev_tensor_free(v[0]);
    vdev_tensor_free(v[1]);
}

/* More variables than the lists kept on the stack (64 for the optimizer,
 * 32 for the updates): the heap serves, every variable updated, and a bad
 * last gradient still changes none. */
static void many_variables(void)
{
    check_fresh(NULL);
    enum { N = 70 };
    vdev_tensor_t *v[N], *g[N];
    for (int i = 0; i < N; i++) {
        v[i] = vdev_variable(filled(3, 1));
        g[i] = filled(3, 0.5f);
    }
    vdev_optimizer_t *o = new_opt(0);
    vdev_tensor_t *last = g[N - 1];
    g[N - 1] = filled(4, 0.5f);
    CHECK_STATUS(vdev_optimizer_apply(o, v, g, N), VDEV_ERR_SHAPE);
    int unchanged = 1;
    for (int i = 0; i < N; i++)
        unchanged &= first(v[i]) == 1.0f;
    CHECK(unchanged);
    vdev_tensor_free(g[N - 1]);
    g[N - 1] = last;
    CHECK_OK(vdev_optimizer_apply(o, v, g, N));
    int moved = 1;
    for (int i = 0; i < N; i++)
        moved &= first(v[i]) == 1.0f - 0.1f * 0.5f;
    CHECK(moved);
    vdev_optimizer_free(o);
    for (int i = 0; i < N; i++) {
        vdev_tensor_free(v[i]);
        vdev_tensor_free(g[i]);
    }
}

int main(void)
{
    one_optimizer(0);
    one_optimizer(1);
    bad_gradient(0);
    bad_gradient(1);
    copy_fails(0);
    copy_fails(1);
    many_variables();
    vdev_shutdown();
    return check_done();
}
