/* test_restart_handles.c — optimizers and models made before vdev_shutdown()
 * are refused afterwards, even after a new vdev_init(), as tensors, tapes and
 * strategies are: their slots and variables were the old runtime's. Every
 * call names itself and what the handle is ("...: the optimizer belongs to
 * a runtime that was shut down (made before vdev_shutdown)"); an old
 * optimizer never updates a new variable. Their frees still free them and
 * leave the new runtime's memory as it was. An optimizer made while no
 * runtime runs belongs to the next one to start. */
#include "check.h"

#define SHUT(fn, what) fn ": the " what " belongs to a runtime that was shut down (made before " \
                       "vdev_shutdown)"

static uint64_t in_use(void)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    return mi.bytes_in_use;
}

static void across_restart(void)
{
    int64_t s[1] = {4}, sizes[3] = {4, 3, 2};
    vdev_tensor_t *v = vdev_variable(vdev_tensor_ones(s, 1, VDEV_F32));
    vdev_tensor_t *g = vdev_tensor_ones(s, 1, VDEV_F32);
    vdev_optimizer_t *o = vdev_adam_new(0.1f, 0.9f, 0.99f, 1e-7f);
    vdev_mlp_t *m = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 1);
    CHECK(v && g && o && m);
    CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
    vdev_shutdown();

    int64_t it = -1;
    CHECK_ERR(vdev_optimizer_get_iterations(o, &it), VDEV_ERR_INVALID_ARG,
              SHUT("vdev_optimizer_get_iterations", "optimizer"));
    CHECK_OK(vdev_init());
    CHECK_ERR(vdev_optimizer_get_iterations(o, &it), VDEV_ERR_INVALID_ARG,
              SHUT("vdev_optimizer_get_iterations", "optimizer"));
    CHECK(it == -1);
    CHECK_ERR(vdev_optimizer_set_iterations(o, 3), VDEV_ERR_INVALID_ARG,
              SHUT("vdev_optimizer_set_iterations", "optimizer"));
    CHECK_ERR(vdev_adam_set(o, 0.1f, 0.9f, 0.99f, 1e-7f), VDEV_ERR_INVALID_ARG,
              SHUT("vdev_adam_set", "optimizer"));

    /* an old optimizer and a new variable: nothing moves */
    vdev_tensor_t *nv = vdev_variable(vdev_tensor_ones(s, 1, VDEV_F32));
    vdev_tensor_t *ng = vdev_tensor_ones(s, 1, VDEV_F32);
    CHECK(nv && ng);
    CHECK_ERR(vdev_optimizer_apply(o, &nv, &ng, 1), VDEV_ERR_INVALID_ARG,
              SHUT("vdev_optimizer_apply", "optimizer"));
    float f[4] = {0, 0, 0, 0};
    CHECK_OK(vdev_tensor_to_host(nv, f, sizeof f));
    CHECK(f[0] == 1 && f[3] == 1);
    vdev_tensor_t *sl[2];
    CHECK(vdev_optimizer_slots(o, nv, sl, NULL, 2) == -1);
    CHECK_STR(vdev_last_error(), SHUT("vdev_optimizer_slots", "optimizer"));

    vdev_tensor_t *vs[4];
    CHECK(vdev_mlp_variables(m, vs, 4) == -1);
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), SHUT("vdev_mlp_variables", "model"));
    int64_t xs[2] = {1, 4};
    vdev_tensor_t *x = vdev_tensor_ones(xs, 2, VDEV_F32);
    CHECK(vdev_mlp_forward(m, x) == NULL);
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), SHUT("vdev_mlp_forward", "model"));

    /* the frees free them, and nothing of the new runtime */
    uint64_t before = in_use();
    vdev_clear_error();
    vdev_optimizer_free(o);
    vdev_mlp_free(m);
    vdev_tensor_free(v);
    vdev_tensor_free(g);
    CHECK_EQ_U64(vdev_last_status(), VDEV_OK);
    CHECK_EQ_U64(in_use(), before);
    vdev_optimizer_free(o);
    CHECK_STR(vdev_last_error(),
              "vdev_optimizer_free: not a live optimizer (freed already, or not an optimizer)");
    vdev_mlp_free(m);
    CHECK_STR(vdev_last_error(), "vdev_mlp_free: not a live model (freed already, or not a model)");

    /* a new optimizer updates the new variable */
    vdev_optimizer_t *o2 = vdev_sgd_new(0.5f, 0);
    CHECK_OK(vdev_optimizer_apply(o2, &nv, &ng, 1));
    CHECK_OK(vdev_tensor_to_host(nv, f, sizeof f));
    CHECK(f[0] == 0.5f);
    vdev_optimizer_free(o2);
    vdev_tensor_free(x);
    vdev_tensor_free(nv);
    vdev_tensor_free(ng);
    CHECK_NO_LEAK("GPU:0");
}

/* Made while no runtime runs (before the first start-up, and between a
 * shutdown and the next): the next runtime's. */
static void made_before_init(void)
{
    int64_t s[1] = {4};
    for (int round = 0; round < 2; round++) {
        vdev_shutdown();
        CHECK(!vdev_is_initialized());
        vdev_optimizer_t *o = vdev_sgd_new(0.5f, 0);
        CHECK(o != NULL);
        CHECK(!vdev_is_initialized()); /* making it starts nothing */
        CHECK_OK(vdev_sgd_set(o, 0.5f, 0)); /* nor does setting it */
        CHECK(!vdev_is_initialized());
        vdev_tensor_t *v = vdev_variable(vdev_tensor_ones(s, 1, VDEV_F32));
        vdev_tensor_t *g = vdev_tensor_ones(s, 1, VDEV_F32);
        CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
        int64_t it = 0;
        CHECK_OK(vdev_optimizer_get_iterations(o, &it));
        CHECK(it == 1);
        vdev_optimizer_free(o);
        vdev_tensor_free(v);
        vdev_tensor_free(g);
    }
}

int main(void)
{
    check_fresh("1x1GiB");
    across_restart();
    made_before_init();
    vdev_shutdown();
    return check_done();
}
