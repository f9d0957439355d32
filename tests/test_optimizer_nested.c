/* test_optimizer_nested.c — an optimizer update made from a pressure callback
 * that another update set off (vdev/govern.h: the callback runs on the
 * allocating thread and may call vdev). An update of more variables than its
 * stack arrays hold works in its thread's scratch block (src/nn/scratch.c);
 * the inner update, larger still, must not move that block under the outer
 * one, which goes on using it once its slots are made. The card: one
 * simulated GPU of 32 MiB split in two logical devices without floors. GPU:1
 * holds the outer update's 70 variables and gradients (its regions full);
 * GPU:0 has taken 16 MiB and freed it (a cached region); the outer update's
 * velocities then find the card full (CARD_FULL on GPU:1), whose callback runs an update of 100
 * variables on CPU:0, and are then served by lending GPU:0's cached region.
 * Both updates must give what a plain SGD step gives, and under the
 * AddressSanitizer build a moved block would be a use after free. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>

#define MIB (1ull << 20)
#define N_OUTER 70
#define N_INNER 100
#define OUTER_LEN 24576 /* 96 KiB a variable: 6.6 MiB of velocities */

static vdev_tensor_t *inner_v[N_INNER], *inner_g[N_INNER];
static vdev_optimizer_t *inner_opt;
static int calls, inner_done;

static void on_pressure(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)device, (void)bytes, (void)user;
    if (what != VDEV_PRESSURE_CARD_FULL || calls++)
        return;
    inner_done = vdev_optimizer_apply(inner_opt, inner_v, inner_g, N_INNER) == VDEV_OK;
}

static vdev_tensor_t *filled(int64_t n, float v)
{
    const int64_t shape[1] = {n};
    return vdev_tensor_fill(shape, 1, VDEV_F32, v);
}

int main(void)
{
    check_fresh("1x32MiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "0", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:..,..", 1);
    CHECK_OK(vdev_init());

    CHECK_OK(vdev_device_push("CPU:0"));
    for (int i = 0; i < N_INNER; i++) {
        inner_v[i] = vdev_variable(filled(4, 1.0f));
        inner_g[i] = filled(4, 0.5f);
    }
    CHECK_OK(vdev_device_pop());
    inner_opt = vdev_sgd_new(0.5f, 0.0f); /* no slots: nothing on the card */

    vdev_tensor_t *v[N_OUTER], *g[N_OUTER];
    CHECK_OK(vdev_device_push("GPU:1"));
    for (int i = 0; i < N_OUTER; i++) {
        v[i] = vdev_variable(filled(OUTER_LEN, 1.0f));
        g[i] = filled(OUTER_LEN, 0.25f);
        CHECK(v[i] && g[i]);
    }
    CHECK_OK(vdev_device_pop());
    void *cached;
    CHECK_OK(vdev_mem_alloc("GPU:0", 16 * MIB, &cached));
    CHECK_OK(vdev_mem_free("GPU:0", cached));

    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure, NULL));
    vdev_optimizer_t *outer = vdev_sgd_new(1.0f, 0.5f); /* a velocity per variable */
    CHECK_OK(vdev_optimizer_apply(outer, v, g, N_OUTER));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", NULL, NULL));

    /* The callback ran the inner update in the middle of the outer one. */
    CHECK(calls >= 1);
    CHECK(inner_done);
    struct vdev_memory_limits lim;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &lim));
    CHECK(lim.n_lends >= 1); /* the outer update's velocities came from GPU:0's region */
    /* SGD with momentum from zero velocity: var -= lr g; the inner: 1 - 0.5 * 0.5 */
    for (int i = 0; i < N_OUTER; i++)
        CHECK(check_all_equal(v[i], 0.75f));
    for (int i = 0; i < N_INNER; i++)
        CHECK(check_all_equal(inner_v[i], 0.75f));
    printf("outer update of %d variables; the card was full %d time(s) and an update of %d "
           "variables ran in the callback\n",
           N_OUTER, calls, N_INNER);

    vdev_optimizer_free(outer);
    vdev_optimizer_free(inner_opt);
    for (int i = 0; i < N_OUTER; i++) {
        vdev_tensor_free(v[i]);
        vdev_tensor_free(g[i]);
    }
    for (int i = 0; i < N_INNER; i++) {
        vdev_tensor_free(inner_v[i]);
        vdev_tensor_free(inner_g[i]);
    }
    vdev_shutdown();
    return check_done();
}
