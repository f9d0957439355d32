/* test_sgd_slots.c — SGD without momentum keeps no velocity, as Keras's SGD
 * makes no momentum slot, and so takes no device memory beyond the variables
 * and gradients: measured exactly (bytes in use on a simulated GPU) after
 * updates without momentum, with it, with it switched off (the velocities
 * freed at once) and on again (made, zeros, at the next update), on one
 * device and on both replicas of a mirrored strategy. The values are checked
 * bit for bit: momentum switched on mid-run gives from then on what a fresh
 * momentum optimizer gives, and off then on again what a plain optimizer
 * then a fresh momentum one give. A velocity that vdev_optimizer_slots
 * handed out stays (zeros) when momentum is switched off, its handle valid,
 * while the others are freed, until the caller gives it back
 * (vdev_optimizer_slots_release: freed then, and one given back before
 * momentum is switched off is freed as one never handed out; Adam's slots
 * stay; each bad argument with its message); a failed update that would
 * make velocities makes none. Every tensor is freed at the end (bytes in use
 * back to 0). */
#define _GNU_SOURCE
#include "check.h"
#include "vdev/nn.h"

#include <stdint.h>
#include <stdlib.h>

#define ROWS 64
#define COLS 48
#define NUMEL (ROWS * COLS)
#define BYTES ((uint64_t)NUMEL * 4) /* 12 KiB: a multiple of 256, no rounding */

static const int64_t shape[2] = {ROWS, COLS};

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    if (vdev_memory_info(dev, &mi) != VDEV_OK)
        return UINT64_MAX;
    return mi.bytes_in_use;
}

/* A tensor of pseudo-random values in [-1, 1) from seed k on the current
 * device (not round numbers: the updates round). */
static vdev_tensor_t *values(uint64_t k)
{
    return vdev_tensor_uniform(shape, 2, -1.0f, 1.0f, k);
}

/* Whether a and b hold the same bits. */
static int same_bits(vdev_tensor_t *a, vdev_tensor_t *b)
{
    static float ha[NUMEL], hb[NUMEL];
    if (vdev_tensor_to_host(a, ha, sizeof ha) != VDEV_OK ||
        vdev_tensor_to_host(b, hb, sizeof hb) != VDEV_OK)
        return 0;
    return memcmp(ha, hb, sizeof ha) == 0;
}

/* Whether every element of t is 0. */
static int all_zero(vdev_tensor_t *t)
{
    static float h[NUMEL];
    if (vdev_tensor_to_host(t, h, sizeof h) != VDEV_OK)
        return 0;
    for (int i = 0; i < NUMEL; i++)
        if (h[i] != 0)
            return 0;
    return 1;
}

static void apply1(vdev_optimizer_t *o, vdev_tensor_t *v, vdev_tensor_t *g)
{
    CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
}

/* Updates without momentum add nothing to the variable and gradient in
 * use; with momentum, one velocity the variable's size. */
static void plain_memory(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v = vdev_variable(values(1)), *g = values(2);
    CHECK_EQ_U64(in_use("GPU:0"), 2 * BYTES);
    vdev_optimizer_t *o = vdev_sgd_new(0.1f, 0);
    for (int k = 0; k < 3; k++) {
        apply1(o, v, g);
        CHECK_EQ_U64(in_use("GPU:0"), 2 * BYTES); /* the variable's and the gradient's only */
    }
    vdev_tensor_t *slot[1] = {NULL};
    CHECK(vdev_optimizer_slots(o, v, slot, NULL, 1) == 0);
    CHECK_EQ_U64(in_use("GPU:0"), 2 * BYTES); /* asking made nothing */
    /* with clipping: its scratch (the clipped gradient and a norm), no velocity */
    CHECK_OK(vdev_optimizer_set_clipping(o, 1.0f, 0, 0));
    apply1(o, v, g);
    CHECK_EQ_U64(in_use("GPU:0"), 3 * BYTES + 256);
    CHECK_OK(vdev_optimizer_set_clipping(o, 0, 0, 0));
    CHECK_EQ_U64(in_use("GPU:0"), 2 * BYTES);
    vdev_optimizer_free(o);

    o = vdev_sgd_new(0.1f, 0.9f); /* the measure sees a velocity */
    apply1(o, v, g);
    CHECK_EQ_U64(in_use("GPU:0"), 3 * BYTES);
    vdev_optimizer_free(o);
    CHECK_EQ_U64(in_use("GPU:0"), 2 * BYTES);
    vdev_tensor_free(v);
    vdev_tensor_free(g);
    CHECK_EQ_U64(in_use("GPU:0"), 0);
    CHECK_OK(vdev_device_pop());
}

/* Momentum switched on mid-run gives, bit for bit, what a fresh momentum
 * optimizer gives from the same weights (its velocity starts from zeros);
 * switched off, what a plain optimizer gives; on again (another momentum),
 * a fresh momentum optimizer's again; all with one optimizer, no slot
 * handed out. The velocity's memory follows: made at the first update with
 * momentum, freed the moment momentum is switched off. */
static void one_optimizer(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    const float lr = 0.05f;
    const float moms[5] = {0, 0.9f, 0, 0.5f, 0};
    vdev_tensor_t *v = vdev_variable(values(4)), *ref = vdev_variable(values(4));
    vdev_optimizer_t *o = vdev_sgd_new(lr, 0);
    uint64_t seed = 100;
    for (int phase = 0; phase < 5; phase++) {
        CHECK_OK(vdev_sgd_set(o, lr, moms[phase]));
        vdev_optimizer_t *r = vdev_sgd_new(lr, moms[phase]);
        CHECK_EQ_U64(in_use("GPU:0"), 2 * BYTES);
        for (int k = 0; k < 4; k++) {
            vdev_tensor_t *g = values(seed++);
            apply1(o, v, g);
            apply1(r, ref, g);
            CHECK(same_bits(v, ref));
            CHECK_EQ_U64(in_use("GPU:0"), 3 * BYTES + (moms[phase] != 0 ? 2 * BYTES : 0));
            vdev_tensor_free(g);
        }
        vdev_optimizer_free(r);
    }
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    vdev_tensor_free(ref);
    CHECK_EQ_U64(in_use("GPU:0"), 0);
    CHECK_OK(vdev_device_pop());
}

/* A velocity handed out stays when momentum is switched off, zeroed, its
 * handle valid (vdev/nn.h's contract); the velocity of a variable never
 * handed out is freed. On again, both start from zeros. */
static void kept_handle(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v[2] = {vdev_variable(values(5)), vdev_variable(values(6))};
    vdev_tensor_t *g[2] = {values(7), values(8)};
    vdev_optimizer_t *o = vdev_sgd_new(0.1f, 0.9f);
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    CHECK_EQ_U64(in_use("GPU:0"), 6 * BYTES);
    vdev_tensor_t *kept[1] = {NULL};
    const char *names[1] = {NULL};
    CHECK(vdev_optimizer_slots(o, v[0], kept, names, 1) == 1);
    CHECK_STR(names[0], "momentum");
    CHECK(!all_zero(kept[0]));
    CHECK_OK(vdev_sgd_set(o, 0.1f, 0));
    CHECK_EQ_U64(in_use("GPU:0"), 5 * BYTES); /* v[1]'s freed, v[0]'s kept */
    CHECK(all_zero(kept[0]));
    CHECK(vdev_tensor_numel(kept[0]) == NUMEL); /* a live handle */
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    CHECK_EQ_U64(in_use("GPU:0"), 5 * BYTES);
    CHECK(all_zero(kept[0])); /* without momentum, neither read nor written */
    vdev_tensor_t *none[1];
    CHECK(vdev_optimizer_slots(o, v[1], none, NULL, 1) == 0);

    /* on again: v[1]'s made (zeros) at the next update, v[0]'s reused */
    CHECK_OK(vdev_sgd_set(o, 0.1f, 0.9f));
    CHECK_EQ_U64(in_use("GPU:0"), 5 * BYTES);
    vdev_optimizer_t *f = vdev_sgd_new(0.1f, 0.9f);
    vdev_tensor_t *r[2] = {vdev_variable(values(1)), vdev_variable(values(1))};
    CHECK_OK(vdev_assign(r[0], v[0]));
    CHECK_OK(vdev_assign(r[1], v[1]));
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    CHECK_OK(vdev_optimizer_apply(f, r, g, 2));
    CHECK(same_bits(v[0], r[0]));
    CHECK(same_bits(v[1], r[1]));
    vdev_tensor_t *again[1];
    CHECK(vdev_optimizer_slots(o, v[0], again, NULL, 1) == 1);
    CHECK(again[0] == kept[0]);
    vdev_optimizer_free(f);
    vdev_optimizer_free(o);
    for (int i = 0; i < 2; i++) {
        vdev_tensor_free(v[i]);
        vdev_tensor_free(g[i]);
        vdev_tensor_free(r[i]);
    }
    CHECK_EQ_U64(in_use("GPU:0"), 0);
    CHECK_OK(vdev_device_pop());
}

/* A velocity given back (vdev_optimizer_slots_release) is the optimizer's
 * alone again: one kept (zeros) while momentum is off is freed at once, one
 * given back while momentum is on is freed when it is switched off, as if
 * never handed out; NULL gives back every variable's. Adam's slots stay. */
static void released(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v[2] = {vdev_variable(values(5)), vdev_variable(values(6))};
    vdev_tensor_t *g[2] = {values(7), values(8)};
    vdev_optimizer_t *o = vdev_sgd_new(0.1f, 0.9f);
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    vdev_tensor_t *out[2];
    CHECK(vdev_optimizer_slots(o, v[0], out, NULL, 1) == 1);
    CHECK(vdev_optimizer_slots(o, v[1], out + 1, NULL, 1) == 1);
    CHECK_OK(vdev_sgd_set(o, 0.1f, 0));
    CHECK_EQ_U64(in_use("GPU:0"), 6 * BYTES); /* both kept, zeros */
    CHECK_OK(vdev_optimizer_slots_release(o, v[0]));
    CHECK_EQ_U64(in_use("GPU:0"), 5 * BYTES); /* v[0]'s freed at once */
    CHECK_OK(vdev_optimizer_slots_release(o, v[0])); /* nothing left: nothing done */
    CHECK_OK(vdev_optimizer_slots_release(o, NULL));
    CHECK_EQ_U64(in_use("GPU:0"), 4 * BYTES);
    vdev_tensor_t *none[1];
    CHECK(vdev_optimizer_slots(o, v[1], none, NULL, 1) == 0);

    /* on again; given out, then back: switching off frees them */
    CHECK_OK(vdev_sgd_set(o, 0.1f, 0.9f));
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    CHECK_EQ_U64(in_use("GPU:0"), 6 * BYTES);
    CHECK(vdev_optimizer_slots(o, v[0], out, NULL, 1) == 1);
    CHECK(vdev_optimizer_slots(o, v[1], out + 1, NULL, 1) == 1);
    CHECK_OK(vdev_optimizer_slots_release(o, v[1]));
    CHECK_EQ_U64(in_use("GPU:0"), 6 * BYTES); /* momentum on: kept, in use */
    CHECK_OK(vdev_sgd_set(o, 0.1f, 0));
    CHECK_EQ_U64(in_use("GPU:0"), 5 * BYTES); /* v[1]'s freed, v[0]'s kept */
    CHECK(all_zero(out[0]));

    /* bad arguments, each with its message; nothing changed */
    CHECK_ERR(vdev_optimizer_slots_release(NULL, NULL), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_slots_release: optimizer is NULL");
    CHECK_ERR(vdev_optimizer_slots_release(o, g[0]), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_slots_release: tensor 0 is not a variable");
    vdev_tensor_t *dead = vdev_variable(values(9));
    vdev_tensor_free(dead);
    CHECK_ERR(vdev_optimizer_slots_release(o, dead), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_slots_release: not a live tensor (freed already, or not a tensor)");
    CHECK_EQ_U64(in_use("GPU:0"), 5 * BYTES);

    /* Adam: given back, its slots stay (it keeps them until it is freed) */
    vdev_optimizer_t *a = vdev_adam_new(0.001f, 0.9f, 0.999f, 1e-7f);
    CHECK_OK(vdev_optimizer_apply(a, v, g, 2));
    CHECK_EQ_U64(in_use("GPU:0"), 9 * BYTES);
    vdev_tensor_t *mv[2];
    CHECK(vdev_optimizer_slots(a, v[0], mv, NULL, 2) == 2);
    CHECK_OK(vdev_optimizer_slots_release(a, NULL));
    CHECK_EQ_U64(in_use("GPU:0"), 9 * BYTES);
    CHECK(vdev_tensor_numel(mv[1]) == NUMEL); /* still the optimizer's */
    vdev_optimizer_free(a);
    vdev_optimizer_free(o);
    CHECK_ERR(vdev_optimizer_slots_release(o, NULL), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_slots_release: not a live optimizer (freed already, or not an "
              "optimizer)");
    for (int i = 0; i < 2; i++) {
        vdev_tensor_free(v[i]);
        vdev_tensor_free(g[i]);
    }
    CHECK_EQ_U64(in_use("GPU:0"), 0);
    CHECK_OK(vdev_device_pop());
}

/* Momentum switched on, then an update whose velocities do not all fit: it
 * fails with nothing changed (no velocity kept, the variables as they
 * were), and succeeds once there is room. A 1 MiB device (the smallest
 * logical device) holds two variables and their gradients, and a filler
 * leaves room for one velocity only. */
static void on_without_room(void)
{
    check_fresh("1x1GiB");
    uint64_t limits[1] = {1u << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 1));
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v[2] = {vdev_variable(values(9)), vdev_variable(values(10))};
    vdev_tensor_t *g[2] = {values(11), values(12)};
    vdev_optimizer_t *o = vdev_sgd_new(0.1f, 0);
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    CHECK_EQ_U64(in_use("GPU:0"), 4 * BYTES);
    void *filler = NULL;
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    /* room for one and a half velocities, in one block */
    uint64_t fill = (mi.largest_free_block - BYTES - BYTES / 2) / 256 * 256;
    CHECK_OK(vdev_mem_alloc("GPU:0", fill, &filler));
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK(mi.largest_free_block >= BYTES && mi.largest_free_block < 2 * BYTES);
    uint64_t before = in_use("GPU:0");
    CHECK_OK(vdev_sgd_set(o, 0.1f, 0.9f));
    CHECK_STATUS(vdev_optimizer_apply(o, v, g, 2), VDEV_ERR_OOM);
    CHECK_EQ_U64(in_use("GPU:0"), before); /* no velocity kept */
    vdev_tensor_t *none[1];
    int64_t it = -1;
    CHECK_OK(vdev_optimizer_get_iterations(o, &it));
    CHECK_EQ_U64(it, 1);
    CHECK_OK(vdev_mem_free("GPU:0", filler));
    CHECK_OK(vdev_optimizer_apply(o, v, g, 2));
    CHECK_EQ_U64(in_use("GPU:0"), 6 * BYTES);
    CHECK(vdev_optimizer_slots(o, v[1], none, NULL, 1) == 1);
    vdev_optimizer_free(o);
    for (int i = 0; i < 2; i++) {
        vdev_tensor_free(v[i]);
        vdev_tensor_free(g[i]);
    }
    CHECK_EQ_U64(in_use("GPU:0"), 0);
    CHECK_OK(vdev_device_pop());
}

/* ---- the mirrored strategy ---- */

struct rep {
    vdev_tensor_t *var[2], *grad[2];
    vdev_optimizer_t *opt[2];
    float momentum;
};

static enum vdev_status build(vdev_replica_context_t *ctx, void *u)
{
    struct rep *m = u;
    int r = vdev_replica_id(ctx);
    m->var[r] = vdev_keep(vdev_variable(values(20)));
    m->grad[r] = vdev_keep(values(21 + (uint64_t)r)); /* each replica's own */
    m->opt[r] = vdev_sgd_new(0.05f, m->momentum);
    return m->var[r] && m->grad[r] && m->opt[r] ? VDEV_OK : vdev_last_status();
}

static enum vdev_status step(vdev_replica_context_t *ctx, void *u)
{
    struct rep *m = u;
    int r = vdev_replica_id(ctx);
    return vdev_replica_apply_gradients(ctx, m->opt[r], &m->var[r], &m->grad[r], 1);
}

/* Under a mirrored strategy over two simulated GPUs, each replica's device
 * holds its variable and gradient only after steps without momentum (the
 * strategy prepares no velocity), and one velocity more with momentum
 * switched on; the replicas stay equal to one device updated with the
 * summed gradient by a plain then a fresh momentum optimizer, bit for bit. */
static void mirrored(void)
{
    check_fresh("2x1GiB");
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_strategy_t *s = NULL;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 2, &s));
    struct rep m = {.momentum = 0};
    CHECK_OK(vdev_strategy_run(s, build, &m, NULL));
    /* the reference, on CPU:0: the gradients summed as the all-reduce sums
     * two (a + b, exact in either order) */
    CHECK_OK(vdev_device_push("CPU:0"));
    vdev_tensor_t *ref = vdev_variable(values(20));
    vdev_tensor_t *ga = values(21), *gb = values(22);
    vdev_tensor_t *sum = vdev_add(ga, gb);
    vdev_optimizer_t *plain = vdev_sgd_new(0.05f, 0), *fresh = vdev_sgd_new(0.05f, 0.9f);
    CHECK_OK(vdev_device_pop());
    for (int k = 0; k < 6; k++) {
        if (k == 3)
            for (int r = 0; r < 2; r++)
                CHECK_OK(vdev_sgd_set(m.opt[r], 0.05f, 0.9f));
        CHECK_OK(vdev_strategy_run(s, step, &m, NULL));
        apply1(k < 3 ? plain : fresh, ref, sum);
        for (int r = 0; r < 2; r++) {
            CHECK_EQ_U64(in_use(devs[r]), k < 3 ? 2 * BYTES : 3 * BYTES);
            CHECK(same_bits(m.var[r], ref));
        }
    }
    for (int r = 0; r < 2; r++)
        CHECK_OK(vdev_sgd_set(m.opt[r], 0.05f, 0));
    for (int r = 0; r < 2; r++)
        CHECK_EQ_U64(in_use(devs[r]), 2 * BYTES);
    CHECK_OK(vdev_strategy_run(s, step, &m, NULL));
    apply1(plain, ref, sum);
    for (int r = 0; r < 2; r++) {
        CHECK_EQ_U64(in_use(devs[r]), 2 * BYTES);
        CHECK(same_bits(m.var[r], ref));
    }
    for (int r = 0; r < 2; r++) {
        vdev_optimizer_free(m.opt[r]);
        vdev_tensor_free(m.var[r]);
        vdev_tensor_free(m.grad[r]);
        CHECK_EQ_U64(in_use(devs[r]), 0);
    }
    vdev_optimizer_free(plain);
    vdev_optimizer_free(fresh);
    vdev_tensor_free(ref);
    vdev_tensor_free(ga);
    vdev_tensor_free(gb);
    vdev_tensor_free(sum);
    vdev_strategy_free(s);
}

int main(void)
{
    plain_memory();
    one_optimizer();
    kept_handle();
    released();
    on_without_room();
    mirrored();
    return check_done();
}
