/* test_optimizer_keras.c — Keras's other optimizer arguments in vdev's C
 * optimizer (vdev/nn.h): SGD's Nesterov momentum, Adam's AMSGrad (its third
 * slot "vhat" keeps the largest v), the decoupled weight decay, and the
 * gradient clipping (clipnorm, global_clipnorm, clipvalue, with Keras's
 * precedence; exclude_from_weight_decay in the same update; a NaN or an
 * infinity in a gradient under clipnorm, as tf.clip_by_norm), on a simulated
 * GPU (the host kernels) and on the CPU. The numbers are chosen so that
 * every step is exact in float where the test checks bits; AMSGrad's
 * variable is checked against the formula in double. The caller's gradients
 * are never written by the clipping. Every bad value and an optimizer of the
 * other kind get their exact message, and a refused call changes nothing. */
#include "check.h"
#include "vdev/nn.h"

#include <math.h>

#define N 4

static vdev_tensor_t *vec(float a, float b, float c, float d)
{
    const float h[N] = {a, b, c, d};
    int64_t shape[1] = {N};
    return vdev_tensor_from_host(h, shape, 1, VDEV_F32);
}

/* t holds exactly {a, b, c, d}. */
static void check_vec(vdev_tensor_t *t, float a, float b, float c, float d, int line)
{
    const float want[N] = {a, b, c, d};
    float h[N];
    if (vdev_tensor_to_host(t, h, sizeof h) != VDEV_OK) {
        check_fail(__FILE__, line, "cannot read the tensor: %s", vdev_last_error());
        return;
    }
    for (int i = 0; i < N; i++)
        if (h[i] != want[i]) {
            check_fail(__FILE__, line, "element %d is %.9g, expected %.9g", i, (double)h[i],
                       (double)want[i]);
            return;
        }
    check_passed++;
}
#define CHECK_VEC(t, a, b, c, d) check_vec((t), (a), (b), (c), (d), __LINE__)

/* t's elements are NaN where nan_mask's bit i is set, else exactly want. */
static void check_nan_vec(vdev_tensor_t *t, unsigned nan_mask, float want, int line)
{
    float h[N];
    if (vdev_tensor_to_host(t, h, sizeof h) != VDEV_OK) {
        check_fail(__FILE__, line, "cannot read the tensor: %s", vdev_last_error());
        return;
    }
    for (int i = 0; i < N; i++)
        if ((nan_mask >> i & 1) ? !isnan(h[i]) : h[i] != want) {
            check_fail(__FILE__, line, "element %d is %.9g, expected %s", i, (double)h[i],
                       (nan_mask >> i & 1) ? "NaN" : "the other value");
            return;
        }
    check_passed++;
}
#define CHECK_NAN_VEC(t, mask, want) check_nan_vec((t), (mask), (want), __LINE__)

/* v = 0 */
static void zero(vdev_tensor_t *v)
{
    vdev_tensor_t *z = vec(0, 0, 0, 0);
    CHECK_OK(vdev_assign(v, z));
    vdev_tensor_free(z);
}

/* One update of v by the gradient g, which stays as it was. */
static void step(vdev_optimizer_t *o, vdev_tensor_t *v, vdev_tensor_t *g)
{
    float before[N], after[N];
    CHECK_OK(vdev_tensor_to_host(g, before, sizeof before));
    CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
    CHECK_OK(vdev_tensor_to_host(g, after, sizeof after));
    CHECK(memcmp(before, after, sizeof before) == 0);
}

/* velocity = m velocity - lr g; Nesterov: var += m velocity - lr g. */
static void nesterov(void)
{
    vdev_tensor_t *v = vdev_variable(vec(1, 1, 1, 1)), *g = vec(0.5f, 0.5f, 0.5f, 0.5f);
    vdev_optimizer_t *o = vdev_sgd_new(0.5f, 0.5f);
    CHECK_OK(vdev_sgd_set_nesterov(o, true));
    step(o, v, g); /* vel -0.25; var += 0.5 * -0.25 - 0.25 (plain momentum: 0.75) */
    CHECK_VEC(v, 0.625f, 0.625f, 0.625f, 0.625f);
    step(o, v, g); /* vel -0.375; var += 0.5 * -0.375 - 0.25 */
    CHECK_VEC(v, 0.1875f, 0.1875f, 0.1875f, 0.1875f);
    CHECK_OK(vdev_sgd_set_nesterov(o, false));
    step(o, v, g); /* vel -0.4375, added as it is */
    CHECK_VEC(v, -0.25f, -0.25f, -0.25f, -0.25f);
    CHECK_ERR(vdev_adam_set_amsgrad(o, true), VDEV_ERR_INVALID_ARG,
              "vdev_adam_set_amsgrad: the optimizer is SGD, not Adam");
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    vdev_tensor_free(g);
}

/* vhat = max(vhat, v); var -= lr_t m / (sqrt(vhat) + eps). */
static void amsgrad(void)
{
    vdev_tensor_t *v = vdev_variable(vec(1, 1, 1, 1));
    vdev_tensor_t *g1 = vec(1, 1, 1, 1), *g0 = vec(0, 0, 0, 0);
    const double lr = 0.125, b1 = 0.5, b2 = 0.5, eps = 1e-7;
    vdev_optimizer_t *o = vdev_adam_new((float)lr, (float)b1, (float)b2, (float)eps);
    CHECK_OK(vdev_adam_set_amsgrad(o, true));
    step(o, v, g1); /* m 0.5, v 0.5, vhat 0.5 */
    step(o, v, g0); /* m 0.25, v 0.25, vhat stays 0.5 */
    vdev_tensor_t *s[3];
    const char *names[3];
    CHECK(vdev_optimizer_slots(o, v, s, names, 3) == 3);
    CHECK_STR(names[0], "m");
    CHECK_STR(names[1], "v");
    CHECK_STR(names[2], "vhat");
    CHECK_VEC(s[0], 0.25f, 0.25f, 0.25f, 0.25f);
    CHECK_VEC(s[1], 0.25f, 0.25f, 0.25f, 0.25f);
    CHECK_VEC(s[2], 0.5f, 0.5f, 0.5f, 0.5f);
    double w = 1;
    w = (float)(w - lr * sqrt(1 - b2) / (1 - b1) * 0.5 / (sqrt(0.5) + eps));
    w = (float)(w - lr * sqrt(1 - b2 * b2) / (1 - b1 * b1) * 0.25 / (sqrt(0.5) + eps));
    float h[N];
    CHECK_OK(vdev_tensor_to_host(v, h, sizeof h));
    CHECK(fabs(h[0] - w) <= 1e-6 && h[3] == h[0]);
    CHECK_ERR(vdev_sgd_set_nesterov(o, true), VDEV_ERR_INVALID_ARG,
              "vdev_sgd_set_nesterov: the optimizer is Adam, not SGD");
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    vdev_tensor_free(g1);
    vdev_tensor_free(g0);
}

/* var -= var wd lr, then the update. */
static void weight_decay(void)
{
    vdev_tensor_t *v = vdev_variable(vec(1, 2, -4, 0)), *g = vec(0.5f, 0, 0, 0.5f);
    vdev_optimizer_t *o = vdev_sgd_new(0.5f, 0);
    CHECK_OK(vdev_optimizer_set_weight_decay(o, 0.5f));
    step(o, v, g); /* var * 0.75, then - 0.5 g */
    CHECK_VEC(v, 0.5f, 1.5f, -3.0f, -0.25f);
    CHECK_ERR(vdev_optimizer_set_weight_decay(o, NAN), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_set_weight_decay: weight decay is NaN, not a finite number");
    step(o, v, g); /* the refused value changed nothing */
    CHECK_VEC(v, 0.125f, 1.125f, -2.25f, -0.4375f);
    CHECK_OK(vdev_optimizer_set_weight_decay(o, 0));
    step(o, v, g);
    CHECK_VEC(v, -0.125f, 1.125f, -2.25f, -0.6875f);
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    vdev_tensor_free(g);
}

/* exclude_from_weight_decay: in one update, the variables excluded are not
 * decayed and the others are; with global_clipnorm the norm is over both
 * (one update); the bad arguments get their messages and change nothing. */
static void exclude_from_decay(void)
{
    vdev_tensor_t *k = vdev_variable(vec(1, 2, -4, 0)), *b = vdev_variable(vec(1, 2, -4, 0));
    vdev_tensor_t *g = vec(0.5f, 0, 0, 0.5f), *c = vec(1, 1, 1, 1);
    vdev_optimizer_t *o = vdev_sgd_new(0.5f, 0);
    CHECK_OK(vdev_optimizer_set_weight_decay(o, 0.5f));
    vdev_tensor_t *vs[2] = {k, b}, *gs[2] = {g, g};
    CHECK_OK(vdev_optimizer_apply(o, vs, gs, 2)); /* both decayed: no slot yet excluded */
    CHECK_VEC(k, 0.5f, 1.5f, -3.0f, -0.25f);
    CHECK_VEC(b, 0.5f, 1.5f, -3.0f, -0.25f);
    /* after the slots exist (the flag reaches them), listed twice */
    vdev_tensor_t *ex[2] = {b, b};
    CHECK_OK(vdev_optimizer_exclude_from_weight_decay(o, ex, 2));
    CHECK_OK(vdev_optimizer_apply(o, vs, gs, 2));
    CHECK_VEC(k, 0.125f, 1.125f, -2.25f, -0.4375f); /* var * 0.75 - 0.5 g */
    CHECK_VEC(b, 0.25f, 1.5f, -3.0f, -0.5f);        /* var - 0.5 g */
    int64_t it = -1;
    CHECK_OK(vdev_optimizer_get_iterations(o, &it));
    CHECK(it == 2);
    /* errors: nothing changes */
    CHECK_ERR(vdev_optimizer_exclude_from_weight_decay(NULL, ex, 1), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_exclude_from_weight_decay: optimizer is NULL");
    CHECK_ERR(vdev_optimizer_exclude_from_weight_decay(o, NULL, 1), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_exclude_from_weight_decay: bad arguments (n 1, vars NULL)");
    CHECK_ERR(vdev_optimizer_exclude_from_weight_decay(o, ex, -1), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_exclude_from_weight_decay: bad arguments (n -1, vars set)");
    vdev_tensor_t *bad[2] = {k, c};
    CHECK_ERR(vdev_optimizer_exclude_from_weight_decay(o, bad, 2), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_exclude_from_weight_decay: tensor 1 is not a variable");
    CHECK_OK(vdev_optimizer_apply(o, vs, gs, 2)); /* k is still decayed */
    CHECK_VEC(k, -0.15625f, 0.84375f, -1.6875f, -0.578125f);
    CHECK_VEC(b, 0.0f, 1.5f, -3.0f, -0.75f);
    vdev_optimizer_free(o);
    /* a fresh optimizer: excluded before any slot; global_clipnorm over both */
    o = vdev_sgd_new(1.0f, 0);
    CHECK_OK(vdev_optimizer_set_weight_decay(o, 0.5f));
    CHECK_OK(vdev_optimizer_exclude_from_weight_decay(o, &k, 1));
    CHECK_OK(vdev_optimizer_set_clipping(o, 0, 0, 0.5f));
    vdev_tensor_t *g3 = vec(0, 0, 0, 0.5f), *g4 = vec(0, 0, 0, 0.5f);
    vdev_tensor_t *gs2[2] = {g3, g4};
    zero(k);
    zero(b);
    CHECK_OK(vdev_optimizer_apply(o, vs, gs2, 2));
    /* the global norm is sqrt(0.5) over both: each gradient scaled by
     * 0.5 / sqrt(0.5); zeros stay zeros under the decay */
    float h[N];
    CHECK_OK(vdev_tensor_to_host(k, h, sizeof h));
    CHECK(fabsf(h[3] + 0.5f * 0.5f / sqrtf(0.5f)) < 1e-6f);
    CHECK_OK(vdev_tensor_to_host(b, h, sizeof h));
    CHECK(fabsf(h[3] + 0.5f * 0.5f / sqrtf(0.5f)) < 1e-6f);
    vdev_optimizer_free(o);
    CHECK_ERR(vdev_optimizer_exclude_from_weight_decay(o, &k, 1), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_exclude_from_weight_decay: not a live optimizer (freed already, "
              "or not an optimizer)");
    vdev_tensor_free(k);
    vdev_tensor_free(b);
    vdev_tensor_free(g);
    vdev_tensor_free(g3);
    vdev_tensor_free(g4);
    vdev_tensor_free(c);
}

/* The clipped gradient g' of SGD(lr 1) is -(the change of a zero var). */
static void clipping(void)
{
    vdev_tensor_t *v = vdev_variable(vec(0, 0, 0, 0)), *g = vec(3, -4, 0, 0.25f);
    vdev_optimizer_t *o = vdev_sgd_new(1, 0);
    /* clipnorm 1: g / |g| (|g| 5.00625); with clipvalue too, clipnorm wins */
    CHECK_OK(vdev_optimizer_set_clipping(o, 1, 0.1f, 0));
    step(o, v, g);
    float n = sqrtf(25.0625f);
    CHECK_VEC(v, -(3 / n), 4 / n, 0, -(0.25f / n));
    /* clipvalue 0.5 */
    zero(v);
    CHECK_OK(vdev_optimizer_set_clipping(o, 0, 0.5f, 0));
    step(o, v, g);
    CHECK_VEC(v, -0.5f, 0.5f, 0, -0.25f);
    /* a norm under the limit: g * c / c */
    zero(v);
    CHECK_OK(vdev_optimizer_set_clipping(o, 10, 0, 0));
    step(o, v, g);
    CHECK_VEC(v, -3, 4, 0, -0.25f);
    /* tf.clip_by_norm with a NaN in g: the norm is NaN and tf.maximum(NaN, c)
     * is NaN, so every element is NaN (not g * c / c for the others) */
    vdev_tensor_t *gn = vec(NAN, 1, 1, 0), *gi = vec(INFINITY, 1, -1, 0);
    zero(v);
    CHECK_OK(vdev_optimizer_set_clipping(o, 1, 0, 0));
    step(o, v, gn);
    CHECK_NAN_VEC(v, 0xf, 0);
    /* an infinity: the norm is inf, so g * c / inf: NaN there, 0 elsewhere */
    zero(v);
    step(o, v, gi);
    CHECK_NAN_VEC(v, 0x1, 0);
    vdev_tensor_free(gn);
    vdev_tensor_free(gi);
    /* global_clipnorm 2.5 over two gradients of norm 3 and 4: scale 0.5 */
    vdev_tensor_t *v2 = vdev_variable(vec(0, 0, 0, 0)), *g2 = vec(0, 0, 4, 0);
    vdev_tensor_t *g1 = vec(3, 0, 0, 0);
    vdev_tensor_t *vs[2] = {v, v2}, *gs[2] = {g1, g2};
    zero(v);
    CHECK_OK(vdev_optimizer_set_clipping(o, 0, 0, 2.5f));
    CHECK_OK(vdev_optimizer_apply(o, vs, gs, 2));
    CHECK_VEC(v, -1.5f, 0, 0, 0);
    CHECK_VEC(v2, 0, 0, -2, 0);
    CHECK_VEC(g1, 3, 0, 0, 0);
    /* bad values: named, and nothing changes */
    CHECK_ERR(vdev_optimizer_set_clipping(o, 1, 0, 2), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_set_clipping: At most one of `clipnorm` and `global_clipnorm` "
              "can be set. Received: clipnorm=1, global_clipnorm=2.");
    CHECK_ERR(vdev_optimizer_set_clipping(o, 0, -1, 0), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_set_clipping: clipvalue -1 must be >= 0 (0: none)");
    CHECK_ERR(vdev_optimizer_set_clipping(o, INFINITY, 0, 0), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_set_clipping: clipnorm is inf, not a finite number");
    CHECK_OK(vdev_optimizer_apply(o, vs, gs, 2)); /* still global_clipnorm 2.5 */
    CHECK_VEC(v, -3, 0, 0, 0);
    CHECK_VEC(v2, 0, 0, -4, 0);
    CHECK_ERR(vdev_optimizer_set_clipping(NULL, 0, 0, 0), VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_set_clipping: optimizer is NULL");
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    vdev_tensor_free(v2);
    vdev_tensor_free(g);
    vdev_tensor_free(g1);
    vdev_tensor_free(g2);
}

int main(void)
{
    static const char *const devs[] = {"GPU:0", "CPU:0"};
    for (int d = 0; d < 2; d++) {
        check_fresh("1x1GiB");
        CHECK_OK(vdev_device_push(devs[d]));
        nesterov();
        amsgrad();
        weight_decay();
        exclude_from_decay();
        clipping();
        vdev_device_pop();
        vdev_shutdown();
    }
    return check_done();
}
