/* test_optimizer_hyper.c — an optimizer's hyperparameters changed after it
 * was made (vdev_sgd_set, vdev_adam_set in vdev/nn.h) take effect on the
 * next update: every update below is checked exactly against the value
 * worked out by hand (the numbers are chosen so that every step is exact in
 * float); SGD's velocity starts from zeros when momentum is switched on after
 * it was off (with or without updates between: momentum 0 is no velocity),
 * and carries on when momentum stays on; momentum 1 (Keras's range is
 * [0, 1]) is taken, made or set, and keeps the whole velocity; a learning
 * rate of 0 (Keras takes it: a warm-up starts there) is taken, made or set,
 * and leaves the weights as they are; every bad
 * value, a NULL, freed or foreign handle and an optimizer of the other kind
 * get their exact message, and a refused call changes nothing. */
#include "check.h"
#include "vdev/nn.h"

#include <math.h>

#define N 4

static vdev_tensor_t *filled(float v)
{
    int64_t shape[1] = {N};
    return vdev_tensor_fill(shape, 1, VDEV_F32, v);
}

/* Every element of t is `want` (exactly); prints what it holds otherwise. */
static void check_all(vdev_tensor_t *t, float want, int line)
{
    float h[N];
    if (vdev_tensor_to_host(t, h, sizeof h) != VDEV_OK) {
        check_fail(__FILE__, line, "cannot read the tensor: %s", vdev_last_error());
        return;
    }
    for (int i = 0; i < N; i++)
        if (h[i] != want) {
            check_fail(__FILE__, line, "element %d is %.9g, expected %.9g", i, (double)h[i],
                       (double)want);
            return;
        }
    check_passed++;
}
#define CHECK_ALL(t, want) check_all((t), (want), __LINE__)

/* One update of v by the gradient g (a tensor of `grad`). */
static void step(vdev_optimizer_t *o, vdev_tensor_t *v, float grad)
{
    vdev_tensor_t *g = filled(grad);
    CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
    vdev_tensor_free(g);
}

/* SGD: velocity = momentum velocity - lr g; var += velocity. */
static void sgd(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v = vdev_variable(filled(1));
    vdev_optimizer_t *o = vdev_sgd_new(0.1f, 0);
    CHECK_OK(vdev_sgd_set(o, 0.25f, 0));
    step(o, v, 0.5f); /* 1 - 0.25 * 0.5 (0.95 with the rate it was made with) */
    CHECK_ALL(v, 0.875f);
    /* momentum on: the velocity starts from zeros, not from the -0.125 the
     * step without momentum left: vel = 0.5 * 0 - 0.5 * 0.5 */
    CHECK_OK(vdev_sgd_set(o, 0.5f, 0.5f));
    step(o, v, 0.5f);
    CHECK_ALL(v, 0.625f);
    step(o, v, 0.5f); /* vel = 0.5 * -0.25 - 0.25 = -0.375 */
    CHECK_ALL(v, 0.25f);
    CHECK_OK(vdev_sgd_set(o, 0.125f, 0.5f));
    step(o, v, 0.5f); /* vel = 0.5 * -0.375 - 0.125 * 0.5 = -0.25 */
    CHECK_ALL(v, 0.0f);
    vdev_tensor_t *slot[2];
    const char *names[2];
    CHECK(vdev_optimizer_slots(o, v, slot, names, 2) == 1);
    CHECK_STR(names[0], "momentum");
    CHECK_ALL(slot[0], -0.25f);
    /* off and on again with no update between: off is no velocity (the slot
     * reads zeros at once), so it starts over: vel = 0.5 * 0 - 0.25 */
    CHECK_OK(vdev_sgd_set(o, 0.5f, 0));
    CHECK_ALL(slot[0], 0.0f);
    CHECK_OK(vdev_sgd_set(o, 0.5f, 0.5f));
    step(o, v, 0.5f);
    CHECK_ALL(v, -0.25f);
    CHECK_ALL(slot[0], -0.25f);
    int64_t it = -1;
    CHECK_OK(vdev_optimizer_get_iterations(o, &it));
    CHECK_EQ_U64(it, 5);
    vdev_optimizer_free(o);

    /* momentum switched on, then the slots read before any update (what a
     * checkpoint saves): zeros, not the -0.125 of the update without it */
    vdev_tensor_t *w = vdev_variable(filled(1));
    o = vdev_sgd_new(0.25f, 0);
    step(o, w, 0.5f);
    CHECK_ALL(w, 0.875f);
    CHECK(vdev_optimizer_slots(o, w, slot, NULL, 2) == 0); /* no momentum: no slot */
    CHECK_OK(vdev_sgd_set(o, 0.25f, 0.5f));
    CHECK(vdev_optimizer_slots(o, w, slot, NULL, 2) == 1);
    CHECK_ALL(slot[0], 0.0f);
    vdev_tensor_t *kept = slot[0];
    step(o, w, 0.5f); /* vel = -0.125: w = 0.75; the slot's handle is the same */
    CHECK_ALL(w, 0.75f);
    CHECK(vdev_optimizer_slots(o, w, slot, NULL, 2) == 1);
    CHECK(slot[0] == kept);
    CHECK_ALL(kept, -0.125f);
    vdev_optimizer_free(o);

    /* momentum 1, made so and set so: the velocity never decays */
    vdev_tensor_t *u = vdev_variable(filled(1));
    o = vdev_sgd_new(0.25f, 1.0f);
    CHECK(o != NULL);
    step(o, u, 0.5f); /* vel = -0.125 */
    CHECK_ALL(u, 0.875f);
    step(o, u, 0.5f); /* vel = 1 * -0.125 - 0.125 = -0.25 */
    CHECK_ALL(u, 0.625f);
    CHECK_OK(vdev_sgd_set(o, 0.5f, 0.5f));
    CHECK_OK(vdev_sgd_set(o, 0.5f, 1.0f));
    step(o, u, 0.25f); /* vel = -0.25 - 0.125 = -0.375 */
    CHECK_ALL(u, 0.25f);
    vdev_optimizer_free(o);
    vdev_tensor_free(u);
    vdev_tensor_free(v);
    vdev_tensor_free(w);
    CHECK_OK(vdev_device_pop());
}

/* Adam, TensorFlow's: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), m = b1 m +
 * (1 - b1) g, v = b2 v + (1 - b2) g^2, var -= lr_t m / (sqrt(v) + eps). */
static void adam(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *v = vdev_variable(filled(1));
    vdev_optimizer_t *o = vdev_adam_new(0.1f, 0.9f, 0.999f, 1e-7f);
    CHECK_OK(vdev_adam_set(o, 0.25f, 0.5f, 0.75f, 1.0f));
    /* t = 1: lr_t = 0.25 * 0.5 / 0.5 = 0.25; m = 1, v = 1;
     * var = 1 - 0.25 * 1 / (1 + 1) */
    step(o, v, 2.0f);
    CHECK_ALL(v, 0.875f);
    /* t = 2 with betas 0: lr_t = 0.5; m = 2, v = 4; var -= 0.5 * 2 / (2 + 2) */
    CHECK_OK(vdev_adam_set(o, 0.5f, 0, 0, 2.0f));
    step(o, v, 2.0f);
    CHECK_ALL(v, 0.625f);
    vdev_tensor_t *slot[2];
    const char *names[2];
    CHECK(vdev_optimizer_slots(o, v, slot, names, 2) == 2);
    CHECK_ALL(slot[0], 2.0f);
    CHECK_ALL(slot[1], 4.0f);
    int64_t it = -1;
    CHECK_OK(vdev_optimizer_get_iterations(o, &it));
    CHECK_EQ_U64(it, 2);
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    CHECK_OK(vdev_device_pop());
}

/* Refused calls: each gets its exact message and changes nothing (the next
 * update uses the values in force before). */
static void refused(void)
{
    check_fresh("1x1GiB");
    vdev_tensor_t *v = vdev_variable(filled(1));
    vdev_optimizer_t *s = vdev_sgd_new(0.25f, 0.5f);
    vdev_optimizer_t *a = vdev_adam_new(0.25f, 0.5f, 0.75f, 1.0f);
    CHECK(s && a);

    CHECK_ERR(vdev_sgd_set(s, -1.5f, 0.5f), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: learning rate -1.5 must be >= 0 and momentum 0.5 in [0, 1]");
    CHECK_ERR(vdev_sgd_set(s, -1e-30f, 0.5f), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: learning rate -1e-30 must be >= 0 and momentum 0.5 in [0, 1]");
    /* NaN and infinities are named, not compared (inf would pass ">= 0") */
    CHECK_ERR(vdev_sgd_set(s, NAN, 0.5f), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: learning rate is NaN, not a finite number");
    CHECK_ERR(vdev_sgd_set(s, INFINITY, 0.5f), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: learning rate is inf, not a finite number");
    CHECK_ERR(vdev_sgd_set(s, -INFINITY, 0.5f), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: learning rate is -inf, not a finite number");
    CHECK_ERR(vdev_sgd_set(s, 0.5f, INFINITY), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: momentum is inf, not a finite number");
    CHECK_ERR(vdev_sgd_set(s, 0.5f, 1.5f), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: learning rate 0.5 must be >= 0 and momentum 1.5 in [0, 1]");
    CHECK_ERR(vdev_sgd_set(s, 0.5f, -0.25f), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: learning rate 0.5 must be >= 0 and momentum -0.25 in [0, 1]");
    CHECK_ERR(vdev_sgd_set(s, 0.5f, NAN), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: momentum is NaN, not a finite number");
    CHECK_ERR(vdev_sgd_set(NULL, 0.5f, 0), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: optimizer is NULL");
    CHECK_ERR(vdev_sgd_set(a, 0.5f, 0), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: the optimizer is Adam, not SGD");
    CHECK_ERR(vdev_sgd_set((vdev_optimizer_t *)v, 0.5f, 0), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: not a live optimizer (freed already, or not an optimizer)");
    /* the handle is checked before the values */
    CHECK_ERR(vdev_sgd_set(NULL, 0, 2), VDEV_ERR_INVALID_ARG, "vdev_sgd_set: optimizer is NULL");

#define ADAM_MSG(got)                                                                              \
    "vdev_adam_set: needs learning rate >= 0, betas in [0, 1), epsilon > 0 (got " got ")"
    const char *adam_msg[] = {
        ADAM_MSG("-0.5, 0.5, 0.75, 1"),   ADAM_MSG("0.5, 1, 0.75, 1"),
        ADAM_MSG("0.5, -0.5, 0.75, 1"), ADAM_MSG("0.5, 0.5, 1, 1"),
        "vdev_adam_set: beta2 is NaN, not a finite number", ADAM_MSG("0.5, 0.5, 0.75, 0"),
        ADAM_MSG("0.5, 0.5, 0.75, -1"), "vdev_adam_set: learning rate is NaN, not a finite number",
    };
    CHECK_ERR(vdev_adam_set(a, -0.5f, 0.5f, 0.75f, 1), VDEV_ERR_INVALID_ARG, adam_msg[0]);
    CHECK_ERR(vdev_adam_set(a, 0.5f, 1, 0.75f, 1), VDEV_ERR_INVALID_ARG, adam_msg[1]);
    CHECK_ERR(vdev_adam_set(a, 0.5f, -0.5f, 0.75f, 1), VDEV_ERR_INVALID_ARG, adam_msg[2]);
    CHECK_ERR(vdev_adam_set(a, 0.5f, 0.5f, 1, 1), VDEV_ERR_INVALID_ARG, adam_msg[3]);
    CHECK_ERR(vdev_adam_set(a, 0.5f, 0.5f, NAN, 1), VDEV_ERR_INVALID_ARG, adam_msg[4]);
    CHECK_ERR(vdev_adam_set(a, 0.5f, 0.5f, 0.75f, 0), VDEV_ERR_INVALID_ARG, adam_msg[5]);
    CHECK_ERR(vdev_adam_set(a, 0.5f, 0.5f, 0.75f, -1), VDEV_ERR_INVALID_ARG, adam_msg[6]);
    CHECK_ERR(vdev_adam_set(a, NAN, 0.5f, 0.75f, 1), VDEV_ERR_INVALID_ARG, adam_msg[7]);
    CHECK_ERR(vdev_adam_set(a, INFINITY, 0.5f, 0.75f, 1), VDEV_ERR_INVALID_ARG,
              "vdev_adam_set: learning rate is inf, not a finite number");
    CHECK_ERR(vdev_adam_set(a, 0.5f, -INFINITY, 0.75f, 1), VDEV_ERR_INVALID_ARG,
              "vdev_adam_set: beta1 is -inf, not a finite number");
    CHECK_ERR(vdev_adam_set(a, 0.5f, 0.5f, 0.75f, INFINITY), VDEV_ERR_INVALID_ARG,
              "vdev_adam_set: epsilon is inf, not a finite number");
    CHECK_ERR(vdev_adam_set(a, 0.5f, 0.5f, 0.75f, NAN), VDEV_ERR_INVALID_ARG,
              "vdev_adam_set: epsilon is NaN, not a finite number");
    CHECK_ERR(vdev_adam_set(NULL, 0.5f, 0.5f, 0.75f, 1), VDEV_ERR_INVALID_ARG,
              "vdev_adam_set: optimizer is NULL");
    CHECK_ERR(vdev_adam_set(s, 0.5f, 0.5f, 0.75f, 1), VDEV_ERR_INVALID_ARG,
              "vdev_adam_set: the optimizer is SGD, not Adam");

    /* the constructors' own messages, from the same check */
    CHECK(vdev_sgd_new(-1, 1) == NULL);
    CHECK_STR(vdev_last_error(),
              "vdev_sgd_new: learning rate -1 must be >= 0 and momentum 1 in [0, 1]");
    CHECK(vdev_sgd_new(0.5f, 1.0001f) == NULL);
    CHECK_STR(vdev_last_error(),
              "vdev_sgd_new: learning rate 0.5 must be >= 0 and momentum 1.0001 in [0, 1]");
    CHECK(vdev_sgd_new(INFINITY, 0) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_sgd_new: learning rate is inf, not a finite number");
    CHECK(vdev_sgd_new(0.5f, NAN) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_sgd_new: momentum is NaN, not a finite number");
    CHECK(vdev_adam_new(INFINITY, 0.9f, 0.999f, 1e-7f) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_adam_new: learning rate is inf, not a finite number");
    CHECK(vdev_adam_new(0.5f, 0.5f, NAN, 1) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_adam_new: beta2 is NaN, not a finite number");
    CHECK(vdev_adam_new(0.5f, 0.5f, 0.75f, 0) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_adam_new: needs learning rate >= 0, betas in [0, 1), "
                                 "epsilon > 0 (got 0.5, 0.5, 0.75, 0)");
    CHECK(vdev_adam_new(-0.001f, 0.9f, 0.999f, 1e-7f) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_adam_new: needs learning rate >= 0, betas in [0, 1), "
                                 "epsilon > 0 (got -0.001, 0.9, 0.999, 1e-07)");

    /* nothing changed: SGD (0.25, 0.5) from ones: vel = -0.125 */
    step(s, v, 0.5f);
    CHECK_ALL(v, 0.875f);
    /* Adam (0.25, 0.5, 0.75, 1) at t = 1: 0.875 - 0.125 */
    step(a, v, 2.0f);
    CHECK_ALL(v, 0.75f);

    /* freed handles */
    vdev_optimizer_free(s);
    vdev_optimizer_free(a);
    CHECK_ERR(vdev_sgd_set(s, 0.5f, 0), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set: not a live optimizer (freed already, or not an optimizer)");
    CHECK_ERR(vdev_adam_set(a, 0.5f, 0.5f, 0.75f, 1), VDEV_ERR_INVALID_ARG,
              "vdev_adam_set: not a live optimizer (freed already, or not an optimizer)");
    vdev_tensor_free(v);
}

/* A learning rate of 0 is taken, as Keras takes it (a warm-up schedule
 * starts there), by the constructors and the setters: the update leaves the
 * weights as they are, and the next rate takes over. */
static void zero_learning_rate(void)
{
    check_fresh("1x1GiB");
    vdev_tensor_t *v = vdev_variable(filled(1));
    vdev_optimizer_t *s = vdev_sgd_new(0, 0);
    CHECK(s != NULL);
    step(s, v, 0.5f);
    CHECK_ALL(v, 1.0f);
    CHECK_OK(vdev_sgd_set(s, 0, 0.5f)); /* velocity 0.5 * 0 - 0 * 0.5 */
    step(s, v, 0.5f);
    CHECK_ALL(v, 1.0f);
    CHECK_OK(vdev_sgd_set(s, 0.25f, 0.5f)); /* velocity -0.125 */
    step(s, v, 0.5f);
    CHECK_ALL(v, 0.875f);
    CHECK_OK(vdev_sgd_set(s, -0.0f, 0.5f)); /* -0 is 0: velocity 0.5 * -0.125 */
    step(s, v, 0.5f);
    CHECK_ALL(v, 0.8125f);

    /* Adam with betas 0 and epsilon 2: m = g = 2, sqrt(v) = 2, lr_t = lr,
     * so an update is lr * 2 / (2 + 2) */
    vdev_optimizer_t *a = vdev_adam_new(0, 0, 0, 2);
    CHECK(a != NULL);
    step(a, v, 2.0f);
    CHECK_ALL(v, 0.8125f);
    CHECK_OK(vdev_adam_set(a, 0.25f, 0, 0, 2));
    step(a, v, 2.0f);
    CHECK_ALL(v, 0.6875f);
    CHECK_OK(vdev_adam_set(a, 0, 0, 0, 2));
    step(a, v, 2.0f);
    CHECK_ALL(v, 0.6875f);
    vdev_optimizer_free(s);
    vdev_optimizer_free(a);
    vdev_tensor_free(v);
}

int main(void)
{
    sgd();
    adam();
    refused();
    zero_learning_rate();
    return check_done();
}
