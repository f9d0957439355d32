/* test_optimizer_resume.c — an optimizer's state saved in a checkpoint and
 * loaded into a fresh model and optimizer: training goes on bit for bit as if
 * it had never stopped (Adam, SGD with momentum; on a simulated GPU). The
 * state is the slots vdev_optimizer_slots gives (Adam's m and v, SGD's
 * momentum) and the iteration count (Adam's bias correction). Without the
 * slots, or without the count, the resumed run differs: the test checks that
 * too, so it cannot pass by accident. Then every bad argument of the three
 * calls, with its exact message, and the largest iteration count (an update
 * after it is refused, nothing changed).
 */
#define _GNU_SOURCE
#include "check.h"

#include "vdev/checkpoint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NV 4 /* W0 b0 W1 b1 */
#define EQ(a, b) CHECK((int64_t)(a) == (int64_t)(b))
/* The last failure: its code and exact message. */
#define LAST(code, msg)                                                                            \
    do {                                                                                           \
        CHECK(vdev_last_status() == (code));                                                       \
        CHECK_STR(vdev_last_error(), msg);                                                         \
    } while (0)
#define BATCH 16
#define MAXP 256

static const int64_t sizes[3] = {8, 12, 3};

/* The batch of step k: inputs and targets from the counter-based generator. */
static void batch(int k, vdev_tensor_t **x, vdev_tensor_t **y)
{
    *x = vdev_tensor_uniform((const int64_t[]){BATCH, 8}, 2, -1, 1, 1000 + (uint64_t)k);
    *y = vdev_tensor_uniform((const int64_t[]){BATCH, 3}, 2, -1, 1, 2000 + (uint64_t)k);
    CHECK(*x && *y);
}

static void step(vdev_mlp_t *m, vdev_optimizer_t *opt, int k)
{
    vdev_tensor_t *vars[NV], *grads[NV], *x, *y;
    CHECK(vdev_mlp_variables(m, vars, NV) == NV);
    batch(k, &x, &y);
    vdev_tape_t *tape = vdev_tape_begin();
    CHECK(tape != NULL);
    vdev_tensor_t *out = vdev_mlp_forward(m, x);
    vdev_tensor_t *loss = vdev_mse(out, y);
    CHECK(loss != NULL);
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, NV, grads));
    CHECK_OK(vdev_optimizer_apply(opt, vars, grads, NV));
    vdev_tape_end(tape);
    for (int i = 0; i < NV; i++)
        vdev_tensor_free(grads[i]);
    vdev_tensor_free(loss);
    vdev_tensor_free(out);
    vdev_tensor_free(x);
    vdev_tensor_free(y);
}

/* Every variable's values, end to end, into buf; returns how many floats. */
static size_t weights(vdev_mlp_t *m, float *buf)
{
    vdev_tensor_t *vars[NV];
    CHECK(vdev_mlp_variables(m, vars, NV) == NV);
    size_t n = 0;
    for (int i = 0; i < NV; i++) {
        size_t k = (size_t)vdev_tensor_numel(vars[i]);
        CHECK(n + k <= MAXP);
        CHECK_OK(vdev_tensor_to_host(vars[i], buf + n, k * sizeof(float)));
        n += k;
    }
    return n;
}

static vdev_optimizer_t *make(int adam)
{
    vdev_optimizer_t *o =
        adam ? vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f) : vdev_sgd_new(0.05f, 0.9f);
    CHECK(o != NULL);
    return o;
}

static vdev_mlp_t *model(uint64_t seed)
{
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_mlp_t *m = vdev_mlp_new(sizes, 3, VDEV_ACT_TANH, VDEV_ACT_NONE, seed);
    vdev_device_pop();
    CHECK(m != NULL);
    return m;
}

/* Names and tensors of the variables and their slots ("w0", "w0/m", ...). */
static int state(vdev_mlp_t *m, vdev_optimizer_t *o, char names[][32], vdev_tensor_t **t)
{
    vdev_tensor_t *vars[NV];
    CHECK(vdev_mlp_variables(m, vars, NV) == NV);
    int n = 0;
    for (int i = 0; i < NV; i++) {
        snprintf(names[n], 32, "var%d", i);
        t[n++] = vars[i];
        vdev_tensor_t *s[2];
        const char *sn[2];
        int k = vdev_optimizer_slots(o, vars[i], s, sn, 2);
        CHECK(k >= 1 && k <= 2);
        for (int j = 0; j < k; j++) {
            snprintf(names[n], 32, "var%d/%s", i, sn[j]);
            t[n++] = s[j];
        }
    }
    return n;
}

/* how: 0 everything restored, 1 without the slots, 2 without the count. */
static void resume(int adam, int how, const char *path)
{
    check_fresh("1x1GiB");
    /* the run that never stops */
    vdev_mlp_t *m = model(7);
    vdev_optimizer_t *o = make(adam);
    for (int k = 0; k < 12; k++)
        step(m, o, k);
    float full[MAXP];
    size_t np = weights(m, full);
    vdev_mlp_free(m);
    vdev_optimizer_free(o);

    /* six steps, a checkpoint, a new model and optimizer, six more */
    m = model(7);
    o = make(adam);
    for (int k = 0; k < 6; k++)
        step(m, o, k);
    int64_t it = -1;
    CHECK_OK(vdev_optimizer_get_iterations(o, &it));
    EQ(it, 6);
    char names[3 * NV][32], count[32];
    const char *np_[3 * NV];
    vdev_tensor_t *t[3 * NV];
    int n = state(m, o, names, t);
    EQ(n, adam ? 3 * NV : 2 * NV);
    for (int i = 0; i < n; i++)
        np_[i] = names[i];
    snprintf(count, sizeof count, "%" PRId64, it);
    const char *meta[2] = {"optimizer/iterations", count};
    CHECK_OK(vdev_checkpoint_save(path, np_, t, n, meta, 1));
    vdev_mlp_free(m);
    vdev_optimizer_free(o);

    m = model(99); /* other initial values: all must come from the file */
    o = make(adam);
    n = state(m, o, names, t);
    int keep = 0;
    for (int i = 0; i < n; i++)
        if (how != 1 || !strchr(names[i], '/')) {
            np_[keep] = names[i];
            t[keep++] = t[i];
        }
    CHECK_OK(vdev_checkpoint_load(path, np_, t, keep));
    char buf[32];
    CHECK_OK(vdev_checkpoint_metadata(path, "optimizer/iterations", buf, sizeof buf));
    if (how != 2)
        CHECK_OK(vdev_optimizer_set_iterations(o, strtoll(buf, NULL, 10)));
    for (int k = 6; k < 12; k++)
        step(m, o, k);
    float resumed[MAXP];
    CHECK(weights(m, resumed) == np);
    int same = memcmp(full, resumed, np * sizeof(float)) == 0;
    if (how == 0)
        CHECK(same);
    else if (how == 1 || adam) /* SGD does not read the count */
        CHECK(!same);
    else
        CHECK(same);
    vdev_mlp_free(m);
    vdev_optimizer_free(o);
}

static void bad_arguments(void)
{
    check_fresh("1x1GiB");
    vdev_optimizer_t *adam = make(1), *plain = vdev_sgd_new(0.1f, 0);
    CHECK(plain != NULL);
    vdev_tensor_t *v = vdev_variable(vdev_tensor_zeros((const int64_t[]){3}, 1, VDEV_F32));
    vdev_tensor_t *c = vdev_tensor_zeros((const int64_t[]){3}, 1, VDEV_F32);
    CHECK(v && c);
    vdev_tensor_t *out[2] = {NULL, NULL};
    const char *names[2] = {NULL, NULL};
    /* SGD without momentum keeps nothing from step to step */
    EQ(vdev_optimizer_slots(plain, v, out, names, 2), 0);
    /* the number alone, then the slots */
    EQ(vdev_optimizer_slots(adam, v, NULL, NULL, 0), 2);
    EQ(vdev_optimizer_slots(adam, v, out, NULL, 1), 2);
    CHECK(out[0] != NULL && out[1] == NULL);
    EQ(vdev_optimizer_slots(adam, v, out, names, 2), 2);
    CHECK_STR(names[0], "m");
    CHECK_STR(names[1], "v");
    EQ(vdev_tensor_numel(out[1]), 3);

    EQ(vdev_optimizer_slots(adam, c, out, names, 2), -1);
    LAST(VDEV_ERR_INVALID_ARG, "vdev_optimizer_slots: tensor 0 is not a variable");
    EQ(vdev_optimizer_slots(adam, v, out, names, -1), -1);
    LAST(VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_slots: out is set and cap -1 (out may be NULL only with cap 0)");
    EQ(vdev_optimizer_slots(adam, v, NULL, names, 2), -1);
    LAST(VDEV_ERR_INVALID_ARG,
              "vdev_optimizer_slots: out is NULL and cap 2 (out may be NULL only with cap 0)");
    EQ(vdev_optimizer_slots(adam, NULL, out, names, 2), -1);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);

    int64_t it = 5;
    CHECK_STATUS(vdev_optimizer_get_iterations(adam, NULL), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_optimizer_get_iterations: out is NULL");
    CHECK_STATUS(vdev_optimizer_set_iterations(adam, -1), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_optimizer_set_iterations: -1 updates is negative");
    CHECK_OK(vdev_optimizer_get_iterations(adam, &it));
    EQ(it, 0);
    CHECK_OK(vdev_optimizer_set_iterations(adam, 41));
    CHECK_OK(vdev_optimizer_get_iterations(adam, &it));
    EQ(it, 41);

    vdev_optimizer_free(adam);
    CHECK_STATUS(vdev_optimizer_get_iterations(adam, &it), VDEV_ERR_INVALID_ARG);
    CHECK_STATUS(vdev_optimizer_set_iterations(adam, 1), VDEV_ERR_INVALID_ARG);
    EQ(vdev_optimizer_slots(adam, v, out, names, 2), -1);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    vdev_optimizer_free(plain);
    vdev_tensor_free(v);
    vdev_tensor_free(c);
}

/* The largest count: an update from INT64_MAX - 1 counts to INT64_MAX (Adam's
 * factor finite), and one more is refused with nothing changed, where the
 * count used to overflow and Adam wrote NaN. */
static void largest_count(void)
{
    check_fresh("1x1GiB");
    for (int adam = 0; adam < 2; adam++) {
        vdev_optimizer_t *o = make(adam);
        vdev_tensor_t *v = vdev_variable(vdev_tensor_ones((const int64_t[]){4}, 1, VDEV_F32));
        vdev_tensor_t *g = vdev_tensor_ones((const int64_t[]){4}, 1, VDEV_F32);
        CHECK(o && v && g);
        int64_t it = 0;
        CHECK_OK(vdev_optimizer_set_iterations(o, INT64_MAX - 1));
        CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
        CHECK_OK(vdev_optimizer_get_iterations(o, &it));
        EQ(it, INT64_MAX);
        float before[4], after[4];
        CHECK_OK(vdev_tensor_to_host(v, before, sizeof before));
        CHECK(before[0] < 1 && before[0] > 0); /* moved, and finite */
        CHECK_ERR(vdev_optimizer_apply(o, &v, &g, 1), VDEV_ERR_INVALID_ARG,
                  "vdev_optimizer_apply: the iteration count is 9223372036854775807, the "
                  "largest an int64 holds: no update can be counted after it");
        CHECK_OK(vdev_optimizer_get_iterations(o, &it));
        EQ(it, INT64_MAX);
        CHECK_OK(vdev_tensor_to_host(v, after, sizeof after));
        CHECK(memcmp(before, after, sizeof after) == 0);
        /* a smaller count set again updates again */
        CHECK_OK(vdev_optimizer_set_iterations(o, 7));
        CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
        CHECK_OK(vdev_optimizer_get_iterations(o, &it));
        EQ(it, 8);
        vdev_optimizer_free(o);
        vdev_tensor_free(v);
        vdev_tensor_free(g);
    }
}

int main(void)
{
    char dir[] = "/tmp/vdev-resume-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    for (int adam = 0; adam < 2; adam++)
        for (int how = 0; how < 3; how++)
            resume(adam, how, path);
    bad_arguments();
    largest_count();
    unlink(path);
    rmdir(dir);
    check_fresh(NULL);
    return check_done();
}
