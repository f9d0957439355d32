/* test_autograd_skip.c — vdev_tape_skip, a variable the tape does not watch
 * until vdev_tape_watch (TensorFlow's trainable=False: its tape watches only
 * trainable variables when an op reads them). Ops that read skipped
 * variables alone are not recorded (the tape holds none of their tensors),
 * so the loss reaches neither them nor what they compute; a skipped variable
 * watched later counts from the watch on; one beside a watched variable in
 * an op gets no gradient from it; vdev_tape_watched_variables leaves it out
 * until watched; a skip while paused takes effect at the resume; a no-op
 * with VDEV_TAPE_WATCH_EXPLICIT; the errors with their exact messages. On
 * the cpu backend and on a simulated GPU. */
#include "check.h"

static float value(vdev_tensor_t *t)
{
    float v = -1.0f;
    if (!t || vdev_tensor_to_host(t, &v, sizeof v) != VDEV_OK)
        return -2.0f;
    return v;
}

static vdev_tensor_t *scalar_var(float v)
{
    int64_t s[1] = {1};
    return vdev_variable(vdev_tensor_from_host(&v, s, 1, VDEV_F32));
}

/* f skipped (3), w watched (5): loss = f*3 (before f's watch) + f*f + f*w.
 * d/df = 2f + w = 11 (f*3 is a constant), d/dw = f = 3. */
static void test_skip_then_watch(const char *dev)
{
    vdev_scope_begin();
    CHECK_OK(vdev_device_push(dev));
    vdev_tensor_t *f = scalar_var(3.0f), *w = scalar_var(5.0f);
    vdev_tape_t *t = vdev_tape_begin();
    CHECK_OK(vdev_tape_skip(t, f));
    CHECK_OK(vdev_tape_skip(t, f)); /* twice: a no-op */
    vdev_tensor_t *a = vdev_mul_scalar(f, 3.0f);
    vdev_tensor_t *h = vdev_mul(f, f); /* f alone: not recorded, so h is a constant */
    vdev_tensor_t *fw = vdev_mul(f, w); /* recorded for w: f gets no gradient from it */
    vdev_tensor_t *vars[3] = {f, w, h}, *g[3] = {NULL, NULL, NULL};
    CHECK_OK(vdev_tape_gradient_ex(t, vdev_add(vdev_add(a, h), fw), vars, 3, g,
                                   VDEV_UNCONNECTED_NONE));
    CHECK(g[0] == NULL && value(g[1]) == 3.0f && g[2] == NULL);
    vdev_tensor_t *listed[2] = {NULL, NULL};
    CHECK(vdev_tape_watched_variables(t, listed, 2) == 1 && listed[0] == w);
    vdev_tape_end(t);

    t = vdev_tape_begin();
    CHECK_OK(vdev_tape_skip(t, f));
    a = vdev_mul_scalar(f, 3.0f);
    CHECK_OK(vdev_tape_watch(t, f)); /* counts from here on */
    CHECK_OK(vdev_tape_skip(t, f));  /* watched already: a no-op */
    vdev_tensor_t *loss = vdev_add(vdev_add(a, vdev_mul(f, f)), vdev_mul(f, w));
    CHECK_OK(vdev_tape_gradient(t, loss, vars, 2, g));
    CHECK(value(g[0]) == 11.0f && value(g[1]) == 3.0f);
    CHECK(vdev_tape_watched_variables(t, listed, 2) == 2);
    vdev_tape_end(t);
    CHECK_OK(vdev_device_pop());
    vdev_scope_end();
    vdev_tensor_free(f);
    vdev_tensor_free(w);
}

/* A skip while paused counts from the resume; with VDEV_TAPE_WATCH_EXPLICIT
 * it is a no-op (the tape watches only what it is given). */
static void test_paused_and_explicit(void)
{
    vdev_scope_begin();
    vdev_tensor_t *f = scalar_var(2.0f);
    vdev_tape_t *t = vdev_tape_begin();
    CHECK_OK(vdev_tape_pause(t));
    CHECK_OK(vdev_tape_skip(t, f));
    CHECK_OK(vdev_tape_resume(t));
    vdev_tensor_t *g = f;
    CHECK_OK(vdev_tape_gradient_ex(t, vdev_mul(f, f), &f, 1, &g, VDEV_UNCONNECTED_NONE));
    CHECK(g == NULL);
    vdev_tape_end(t);
    t = vdev_tape_begin_ex(VDEV_TAPE_WATCH_EXPLICIT);
    CHECK_OK(vdev_tape_watch(t, f));
    CHECK_OK(vdev_tape_skip(t, f));
    CHECK_OK(vdev_tape_gradient(t, vdev_mul(f, f), &f, 1, &g));
    CHECK(value(g) == 4.0f);
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(f);
}

/* The tape does not hold the variables it skips: one freed while the tape
 * lives gives its memory back at once, and variables made after it (at its
 * address, when the allocator reuses it) are watched as any other. */
static void test_skipped_are_not_held(void)
{
    static const int64_t big[1] = {1 << 20};
    struct vdev_memory_info m0, m1;
    CHECK_OK(vdev_memory_info("CPU:0", &m0));
    vdev_tape_t *t = vdev_tape_begin();
    for (int k = 0; k < 20; k++) {
        vdev_tensor_t *f = vdev_variable(vdev_tensor_fill(big, 1, VDEV_F32, 1.0));
        CHECK_OK(vdev_tape_skip(t, f));
        vdev_tensor_free(f);
        CHECK_OK(vdev_memory_info("CPU:0", &m1));
        CHECK(m1.bytes_in_use == m0.bytes_in_use);
        vdev_tensor_t *w = scalar_var(2.0f), *g = NULL;
        vdev_tensor_t *loss = vdev_mul(w, w);
        CHECK_OK(vdev_tape_gradient_ex(t, loss, &w, 1, &g, VDEV_UNCONNECTED_NONE));
        CHECK(value(g) == 4.0f);
        vdev_tensor_free(g);
        vdev_tensor_free(loss);
        vdev_tensor_free(w);
        vdev_tape_end(t);
        t = vdev_tape_begin();
    }
    vdev_tape_end(t);
}

static void test_errors(void)
{
    vdev_scope_begin();
    vdev_tensor_t *f = scalar_var(2.0f);
    int64_t s[1] = {1};
    float one = 1.0f;
    vdev_tensor_t *c = vdev_tensor_from_host(&one, s, 1, VDEV_F32);
    vdev_tape_t *t = vdev_tape_begin();
    CHECK_ERR(vdev_tape_skip(t, c), VDEV_ERR_INVALID_ARG,
              "vdev_tape_skip: not a variable (the tape differentiates with respect to "
              "variables; a tensor it computes from watched ones needs no watch)");
    CHECK_ERR(vdev_tape_skip(t, NULL), VDEV_ERR_INVALID_ARG, "vdev_tape_skip: tensor is NULL");
    vdev_tensor_t *g = NULL;
    CHECK_OK(vdev_tape_gradient(t, vdev_mul(f, f), &f, 1, &g));
    CHECK_ERR(vdev_tape_skip(t, f), VDEV_ERR_INVALID_ARG,
              "vdev_tape_skip: the tape is not recording (a gradient call stopped it, or its "
              "thread ended)");
    /* the gradient call's bad arguments, each named */
    CHECK_ERR(vdev_tape_gradient(NULL, f, &f, 1, &g), VDEV_ERR_INVALID_ARG,
              "vdev_tape_gradient: tape is NULL");
    CHECK_ERR(vdev_tape_gradient(t, f, &f, -1, &g), VDEV_ERR_INVALID_ARG,
              "vdev_tape_gradient: n_vars -1 with vars set and grads set (n_vars >= 0; both "
              "set when n_vars > 0)");
    CHECK_ERR(vdev_tape_gradient_ex(t, f, NULL, 1, &g, VDEV_UNCONNECTED_NONE),
              VDEV_ERR_INVALID_ARG,
              "vdev_tape_gradient_ex: n_vars 1 with vars NULL and grads set (n_vars >= 0; both "
              "set when n_vars > 0)");
    vdev_tape_end(t);
    CHECK_ERR(vdev_tape_skip(t, f), VDEV_ERR_INVALID_ARG,
              "vdev_tape_skip: not a live tape (ended already, or not a tape)");
    vdev_scope_end();
    vdev_tensor_free(f);
}

int main(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    test_skip_then_watch("CPU:0");
    test_paused_and_explicit();
    test_skipped_are_not_held();
    test_errors();
    CHECK_NO_LEAK("CPU:0");
    vdev_shutdown();

    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    test_skip_then_watch("GPU:0");
    CHECK_NO_LEAK("GPU:0");
    vdev_shutdown();
    return check_done();
}
