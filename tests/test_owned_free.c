/* test_owned_free.c — tensors the library gives out but keeps: an
 * optimizer's slots (vdev_optimizer_slots) and a model's variables
 * (vdev_mlp_variables). vdev_tensor_free refuses them with
 * VDEV_ERR_INVALID_ARG and a message that names the owner, and they stay:
 * the optimizer still updates, the model still runs. The owner's own free
 * frees them (their handles die, every byte comes back). And a model's
 * forward outside any scope leaves the caller nothing but its result. */
#include "check.h"
#include "tensor/tensor.h"

#include <math.h>

static const char *const SLOT_MSG =
    "vdev_tensor_free: the tensor is an optimizer's slot (vdev_optimizer_slots); it is freed "
    "with its optimizer (vdev_optimizer_free)";
static const char *const VAR_MSG =
    "vdev_tensor_free: the tensor is a model's variable (vdev_mlp_variables); it is freed with "
    "its model (vdev_mlp_free)";
static const char *const DEAD_MSG =
    "vdev_tensor_numel: not a live tensor (freed already, or not a tensor)";

/* vdev_tensor_free(t) is refused with msg, and t stays live. */
static void refused(vdev_tensor_t *t, const char *msg, int64_t numel)
{
    vdev_clear_error();
    vdev_tensor_free(t);
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), msg);
    CHECK_EQ_U64(vdev_tensor_numel(t), numel);
}

/* numel of t is refused: its handle died with its owner. */
static void dead(vdev_tensor_t *t)
{
    CHECK(vdev_tensor_numel(t) == -1);
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), DEAD_MSG);
}

static void optimizer_slots(void)
{
    int64_t s[1] = {4};
    for (int adam = 0; adam < 2; adam++) {
        vdev_tensor_t *v = vdev_variable(vdev_tensor_ones(s, 1, VDEV_F32));
        vdev_tensor_t *g = vdev_tensor_ones(s, 1, VDEV_F32);
        vdev_optimizer_t *o =
            adam ? vdev_adam_new(0.1f, 0.9f, 0.99f, 1e-7f) : vdev_sgd_new(0.1f, 0.9f);
        CHECK(v && g && o);
        vdev_tensor_t *sl[3] = {NULL, NULL, NULL};
        int n = vdev_optimizer_slots(o, v, sl, NULL, 3);
        CHECK(n == (adam ? 2 : 1));
        for (int k = 0; k < n; k++)
            refused(sl[k], SLOT_MSG, 4);
        /* the optimizer still has them */
        CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
        vdev_tensor_t *again[3] = {NULL, NULL, NULL};
        CHECK(vdev_optimizer_slots(o, v, again, NULL, 3) == n);
        for (int k = 0; k < n; k++)
            CHECK(again[k] == sl[k]);
        vdev_optimizer_free(o);
        for (int k = 0; k < n; k++)
            dead(sl[k]);
        vdev_tensor_free(v);
        vdev_tensor_free(g);
    }
    CHECK_NO_LEAK("GPU:0");
}

static void model_variables(void)
{
    int64_t sizes[3] = {4, 3, 2};
    vdev_mlp_t *m = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 1);
    CHECK(m != NULL);
    vdev_tensor_t *mv[4] = {NULL, NULL, NULL, NULL};
    CHECK(vdev_mlp_variables(m, mv, 4) == 4);
    static const int64_t numel[4] = {12, 3, 6, 2};
    for (int k = 0; k < 4; k++)
        refused(mv[k], VAR_MSG, numel[k]);
    int64_t xs[2] = {1, 4};
    CHECK_OK(vdev_scope_begin()); /* frees the forward's intermediates */
    vdev_tensor_t *y = vdev_mlp_forward(m, vdev_tensor_ones(xs, 2, VDEV_F32));
    CHECK(y != NULL);
    CHECK_EQ_U64(vdev_tensor_numel(y), 2);
    vdev_scope_end();
    vdev_clear_error();
    vdev_mlp_free(m);
    CHECK_EQ_U64(vdev_last_status(), VDEV_OK);
    for (int k = 0; k < 4; k++)
        dead(mv[k]);
    CHECK_NO_LEAK("GPU:0");
}

/* Outside any scope a forward leaves nothing but its result: the tensors
 * made on the way (each layer's product, sum and activation, and every
 * layer's output but the last) had no handle the caller could free. With a
 * tape, its gradients are still right (the tape keeps what it needs). */
static void forward_frees_intermediates(void)
{
    int64_t sizes[4] = {4, 8, 8, 2}, xs[2] = {3, 4};
    vdev_mlp_t *m = vdev_mlp_new(sizes, 4, VDEV_ACT_RELU, VDEV_ACT_TANH, 1);
    vdev_tensor_t *x = vdev_tensor_fill(xs, 2, VDEV_F32, 0.5f);
    CHECK(m != NULL && x != NULL);
    struct vdev_memory_info before, after;
    CHECK_OK(vdev_memory_info("GPU:0", &before));
    uint32_t n0 = vdev_handle_count(&vdev_tens_table);
    for (int i = 0; i < 3; i++) {
        vdev_tensor_t *y = vdev_mlp_forward(m, x);
        CHECK(y != NULL);
        CHECK_EQ_U64(vdev_handle_count(&vdev_tens_table), n0 + 1);
        vdev_tensor_free(y);
    }
    CHECK_EQ_U64(vdev_handle_count(&vdev_tens_table), n0);
    CHECK_OK(vdev_memory_info("GPU:0", &after));
    CHECK_EQ_U64(after.bytes_in_use, before.bytes_in_use);
    /* under a tape: d(sum y)/d b_last is the (1 - y^2) summed over the rows */
    vdev_tensor_t *mv[6];
    CHECK(vdev_mlp_variables(m, mv, 6) == 6);
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *y = vdev_mlp_forward(m, x), *loss = vdev_sum_all(y), *g[6];
    CHECK(t && y && loss);
    CHECK_OK(vdev_tape_gradient(t, loss, mv, 6, g));
    float yv[6], gb[2];
    CHECK_OK(vdev_tensor_to_host(y, yv, sizeof yv));
    CHECK_OK(vdev_tensor_to_host(g[5], gb, sizeof gb));
    for (int j = 0; j < 2; j++) {
        float want = 0;
        for (int r = 0; r < 3; r++)
            want += 1 - yv[r * 2 + j] * yv[r * 2 + j];
        CHECK(fabsf(gb[j] - want) < 1e-5f);
    }
    vdev_tape_end(t);
    for (int k = 0; k < 6; k++)
        vdev_tensor_free(g[k]);
    vdev_tensor_free(loss);
    vdev_tensor_free(y);
    vdev_tensor_free(x);
    vdev_mlp_free(m);
    CHECK_NO_LEAK("GPU:0");
}

int main(void)
{
    check_fresh("1x1GiB");
    optimizer_slots();
    model_variables();
    forward_frees_intermediates();
    vdev_shutdown();
    return check_done();
}
