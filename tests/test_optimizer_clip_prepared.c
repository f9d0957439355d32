/* test_optimizer_clip_prepared.c — after vdev_optimizer_prepare, an update
 * with gradient clipping allocates nothing: the mirrored strategy prepares
 * every replica's update, agrees, then updates, and an out-of-memory error
 * while one replica clips would leave the replicas before it updated. Here
 * the device is filled after prepare, and each clipping mode (clipnorm,
 * global_clipnorm, clipvalue) still updates, to the same numbers as with
 * memory free, and leaves the memory in use as it was. Clipping switched on
 * after prepare makes its scratch at the next prepare; a variable passed
 * twice with clipping is refused with its message, nothing changed. */
#include "check.h"
#include "nn/nn.h"
#include "vdev/nn.h"

#include <math.h>

#define N 4
#define MAX_BLOCKS 1024

static vdev_tensor_t *vec(const float *h)
{
    int64_t shape[1] = {N};
    return vdev_tensor_from_host(h, shape, 1, VDEV_F32);
}

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_in_use;
}

/* One Adam update of two variables with clipping (clipnorm, clipvalue,
 * global_clipnorm), prepared, then run with the device full (full) or not;
 * the variables' values into out[2 * N]. */
static void run(float clipnorm, float clipvalue, float global, int full, float *out)
{
    static const float w0[N] = {1, 2, 3, 4}, g0[N] = {3, -4, 0, 0.25f};
    static const float w1[N] = {-1, 0, 1, 2}, g1[N] = {0, 0, 40, 0};
    vdev_tensor_t *v[2] = {vdev_variable(vec(w0)), vdev_variable(vec(w1))};
    vdev_tensor_t *g[2] = {vec(g0), vec(g1)};
    vdev_optimizer_t *o = vdev_adam_new(0.1f, 0.9f, 0.999f, 1e-7f);
    CHECK_OK(vdev_optimizer_set_clipping(o, clipnorm, clipvalue, global));
    CHECK_OK(vdev_optimizer_prepare(o, v, 2));
    void *blocks[MAX_BLOCKS];
    int nb = full ? check_fill_device("GPU:0", blocks, MAX_BLOCKS) : 0;
    uint64_t used = in_use("GPU:0");
    CHECK(!full || nb > 0);
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    CHECK_EQ_U64(in_use("GPU:0"), used);
    while (nb)
        vdev_mem_free("GPU:0", blocks[--nb]);
    for (int k = 0; k < 2; k++) {
        CHECK_OK(vdev_tensor_to_host(v[k], out + k * N, N * sizeof *out));
        vdev_tensor_free(v[k]);
        vdev_tensor_free(g[k]);
    }
    vdev_optimizer_free(o);
}

static void prepared_clipping_allocates_nothing(void)
{
    static const float modes[3][3] = {{1, 0, 0}, {0, 0.5f, 0}, {0, 0, 2.5f}};
    for (int m = 0; m < 3; m++) {
        float free_[2 * N], full[2 * N];
        run(modes[m][0], modes[m][1], modes[m][2], 0, free_);
        run(modes[m][0], modes[m][1], modes[m][2], 1, full);
        CHECK(memcmp(free_, full, sizeof full) == 0);
        CHECK(free_[0] != 1); /* it updated */
    }
}

/* Clipping switched on after a prepare: the next prepare makes its scratch
 * (an apply alone would too). */
static void clipping_switched_on_later(void)
{
    static const float w[N] = {0, 0, 0, 0}, gh[N] = {3, -4, 0, 0};
    vdev_tensor_t *v = vdev_variable(vec(w)), *g = vec(gh);
    vdev_optimizer_t *o = vdev_sgd_new(1, 0);
    CHECK_OK(vdev_optimizer_prepare(o, &v, 1));
    CHECK_OK(vdev_optimizer_set_clipping(o, 1, 0, 0));
    uint64_t before = in_use("GPU:0");
    CHECK_OK(vdev_optimizer_prepare(o, &v, 1));
    CHECK(in_use("GPU:0") > before); /* the scratch */
    void *blocks[MAX_BLOCKS];
    int nb = check_fill_device("GPU:0", blocks, MAX_BLOCKS);
    CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
    while (nb)
        vdev_mem_free("GPU:0", blocks[--nb]);
    float h[N];
    CHECK_OK(vdev_tensor_to_host(v, h, sizeof h));
    CHECK(h[0] == -0.6f && h[1] == 0.8f && h[2] == 0 && h[3] == 0);
    /* clipping off: its scratch goes */
    before = in_use("GPU:0");
    CHECK_OK(vdev_optimizer_set_clipping(o, 0, 0, 0));
    CHECK(in_use("GPU:0") < before);
    /* the same variable twice with clipping: refused, nothing changed */
    CHECK_OK(vdev_optimizer_set_clipping(o, 0, 0.5f, 0));
    vdev_tensor_t *vs[2] = {v, v}, *gs[2] = {g, g};
    CHECK_ERR(vdev_optimizer_apply(o, vs, gs, 2), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_apply: variables #0 and #1 are the same; with gradient clipping "
              "each variable may come once");
    float h2[N];
    CHECK_OK(vdev_tensor_to_host(v, h2, sizeof h2));
    CHECK(memcmp(h, h2, sizeof h) == 0);
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    vdev_tensor_free(g);
}

int main(void)
{
    check_fresh("1x1GiB");
    uint64_t limit = 4ull << 20;
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", &limit, 1));
    CHECK_OK(vdev_device_push("GPU:0"));
    prepared_clipping_allocates_nothing();
    clipping_switched_on_later();
    vdev_device_pop();
    vdev_shutdown();
    return check_done();
}
