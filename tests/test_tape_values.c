/* test_tape_values.c — a tape's gradients use the values its ops read, as
 * TensorFlow's and PyTorch's do, even when a variable is written in place
 * before the gradient is asked for; and a reshape of a variable is a value.
 *
 *  - two models on one tape (persistent use): the second model's update is
 *    applied, then the first model's gradient, which flows back through the
 *    second model's weights, is asked for: it must equal, bit for bit, the
 *    gradient taken before any update (it read the old weights);
 *  - vdev_assign between the forward pass and the gradient, twice: the
 *    gradient of sum(v*v) is 2*v as v was read, and one copy of v was saved
 *    (device memory grows by v's bytes once, not per write), and given back
 *    when the tape ends;
 *  - a tape ended before the update (a training loop) saves nothing;
 *  - the copy cannot be saved (the device is full): the write goes on and
 *    the gradient that needs the old value fails with VDEV_ERR_OOM and a
 *    message naming the op, the variable and the way out; nothing leaks;
 *    the write leaves the thread's error, OOM report and count of failed
 *    allocations (n_failed_allocs) as they were, and the gradient of an op
 *    that reads no value (AddV2) succeeds;
 *  - ops whose gradients read no input's value (AddV2, Sub, Reshape,
 *    Identity, Sum) save nothing when the input is written after them;
 *  - a tape that lives on while a training loop's tapes read v and update
 *    it keeps the one value it read, not one per update; two tapes that read
 *    two versions keep one copy each, each freed with its tape;
 *  - writes to what is not a variable: vdev_assign into a plain tensor an op
 *    read, into an op's output that its gradient reads (Exp), into a tensor
 *    read through a view made before it became a variable, and a DLPack
 *    consumer's writes through an export: the gradient still uses the
 *    values read;
 *  - vdev_reshape of a variable does not follow later writes (a reshape of
 *    a plain tensor stays a view: no memory).
 * Each check fails on the code before its fix (the review of d92eb75, notes/
 * review-tape.md: findings 2, 3 and 4): the gradient saw the new value, the
 * copies piled up, or the write saved a value no gradient reads. */
#define _GNU_SOURCE
#include "check.h"

#include <dlpack/dlpack.h>
#include <stdlib.h>
#include <string.h>

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    return vdev_memory_info(dev, &mi) == VDEV_OK ? mi.bytes_in_use : UINT64_MAX;
}

static vdev_tensor_t *from(const float *v, int64_t rows, int64_t cols)
{
    int64_t s[2] = {rows, cols};
    return vdev_tensor_from_host(v, s, cols ? 2 : 1, VDEV_F32);
}

static int equals(const vdev_tensor_t *t, const float *want, int n)
{
    float got[64];
    if (n > 64 || vdev_tensor_numel(t) != n ||
        vdev_tensor_to_host(t, got, (size_t)n * sizeof *got) != VDEV_OK)
        return 0;
    return memcmp(got, want, (size_t)n * sizeof *got) == 0;
}

static int same_bits(const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    float x[64], y[64];
    int64_t n = vdev_tensor_numel(a);
    return n > 0 && n <= 64 && n == vdev_tensor_numel(b) &&
           vdev_tensor_to_host(a, x, (size_t)n * sizeof *x) == VDEV_OK &&
           vdev_tensor_to_host(b, y, (size_t)n * sizeof *y) == VDEV_OK &&
           memcmp(x, y, (size_t)n * sizeof *x) == 0;
}

/* x [4,3] @ w1 [3,5] @ w2 [5,2] against t [4,2]: two "models" on one tape. */
static void two_models(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    float xv[12], w1v[15], w2v[10], tv[8];
    for (int i = 0; i < 12; i++)
        xv[i] = (float)((i * 7) % 5) * 0.25f - 0.5f;
    for (int i = 0; i < 15; i++)
        w1v[i] = (float)((i * 3) % 7) * 0.125f - 0.375f;
    for (int i = 0; i < 10; i++)
        w2v[i] = (float)((i * 5) % 9) * 0.1f - 0.4f;
    for (int i = 0; i < 8; i++)
        tv[i] = (float)(i % 3) - 1.0f;
    vdev_tensor_t *x = from(xv, 4, 3), *t = from(tv, 4, 2);
    vdev_tensor_t *w1 = vdev_variable(from(w1v, 3, 5)), *w2 = vdev_variable(from(w2v, 5, 2));
    CHECK(x && t && w1 && w2);

    /* the reference: both gradients from the values before any update */
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss =
        vdev_mse(vdev_matmul(vdev_matmul(x, w1, false, false), w2, false, false), t);
    vdev_tensor_t *want[2] = {NULL, NULL}, *vars[2] = {w1, w2};
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, 2, want));
    vdev_tape_end(tape);

    /* one tape, w2 updated between the two gradient calls */
    vdev_optimizer_t *sgd = vdev_sgd_new(0.5f, 0.0f);
    vdev_tensor_t *w2_before = from(w2v, 5, 2);
    vdev_tensor_t *zero = vdev_tensor_zeros((int64_t[]){5, 2}, 2, VDEV_F32);
    CHECK_OK(vdev_optimizer_apply(sgd, &w2, &zero, 1)); /* makes the optimizer's own state */
    CHECK_OK(vdev_scope_begin());
    tape = vdev_tape_begin();
    loss = vdev_mse(vdev_matmul(vdev_matmul(x, w1, false, false), w2, false, false), t);
    vdev_tensor_t *g2 = NULL, *g1 = NULL;
    CHECK_OK(vdev_tape_gradient(tape, loss, &w2, 1, &g2));
    CHECK(same_bits(g2, want[1]));
    uint64_t before = in_use(dev);
    CHECK_OK(vdev_optimizer_apply(sgd, &w2, &g2, 1));
    /* the update happened, and saved the w2 the tape read (40 bytes: one block) */
    CHECK(!same_bits(w2, w2_before));
    CHECK_EQ_U64(in_use(dev) - before, 256);
    CHECK_OK(vdev_tape_gradient(tape, loss, &w1, 1, &g1));
    CHECK(same_bits(g1, want[0]));
    vdev_tensor_free(g1);
    vdev_tape_end(tape);
    CHECK_EQ_U64(in_use(dev), before); /* the copy went with the tape */
    vdev_scope_end();
    vdev_optimizer_free(sgd);
    CHECK_OK(vdev_device_pop());
}

/* sum(v*v) recorded, then v assigned twice: the gradient is 2*old. */
static void assigned(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    const float old[4] = {1, 2, 3, 4}, new1[4] = {10, 20, 30, 40}, new2[4] = {-1, -1, -1, -1};
    vdev_tensor_t *v = vdev_variable(from(old, 4, 0));
    vdev_tensor_t *a = from(new1, 4, 0), *b = from(new2, 4, 0);
    CHECK(v && a && b);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *sq = vdev_mul(v, v), *l = vdev_sum(sq, -1, false);
    uint64_t recorded = in_use(dev);
    CHECK_OK(vdev_assign(v, a));
    uint64_t one = in_use(dev);
    CHECK_EQ_U64(one - recorded, 256); /* v's 16 bytes, saved once */
    CHECK_OK(vdev_assign(v, b));
    CHECK_EQ_U64(in_use(dev), one); /* nobody read the value overwritten now */
    vdev_tensor_t *g = NULL;
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    const float want[4] = {2, 4, 6, 8};
    CHECK(equals(g, want, 4));
    CHECK(equals(v, new2, 4));
    vdev_tensor_free(g);
    vdev_tensor_free(sq);
    vdev_tensor_free(l);
    vdev_tape_end(tape);
    CHECK_EQ_U64(in_use(dev), one - 3 * 256); /* the copy, v*v and the sum are gone */

    /* a tape ended before the write saves nothing */
    tape = vdev_tape_begin();
    sq = vdev_mul(v, v);
    l = vdev_sum(sq, -1, false);
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    vdev_tape_end(tape);
    uint64_t ended = in_use(dev);
    CHECK_OK(vdev_assign(v, a));
    CHECK_EQ_U64(in_use(dev), ended);
    CHECK_OK(vdev_device_pop());
}

/* The copy cannot be made: the gradient that needs it fails, clearly; the
 * write succeeds and says nothing of it. */
static void no_room(void)
{
    check_fresh("1x4MiB");
    setenv("VDEV_OOM_REPORT", "1", 1);
    CHECK_OK(vdev_device_push("GPU:0"));
    int64_t s[1] = {100000}, small[1] = {16384}; /* 400 KB; 64 KiB */
    vdev_tensor_t *v = vdev_variable(vdev_tensor_fill(s, 1, VDEV_F32, 1.0));
    vdev_tensor_t *value = vdev_tensor_fill(s, 1, VDEV_F32, 2.0);
    vdev_tensor_t *c = vdev_tensor_fill(s, 1, VDEV_F32, 3.0);
    CHECK(v && value && c);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *sq = vdev_mul(v, v), *l = vdev_sum(sq, -1, false);
    vdev_tensor_t *sum = vdev_add(v, c), *la = vdev_sum(sum, -1, false);
    CHECK(sq && l && sum && la);
    /* fill the card with 64 KiB blocks: no 400 KB block is left */
    CHECK_OK(vdev_scope_begin());
    int n = 0;
    while (n < 1000 && vdev_tensor_fill(small, 1, VDEV_F32, 0.0))
        n++;
    CHECK(n > 0 && n < 1000);
    const char *full = "OOM when allocating tensor with shape[16384] and type float";
    CHECK(!strncmp(vdev_last_oom_report(), full, strlen(full)));
    CHECK(vdev_tensor_dim(v, 3) == -1); /* an error of the program's own, before */
    char err[512];
    snprintf(err, sizeof err, "%s", vdev_last_error());
    struct vdev_memory_info before, after;
    CHECK_OK(vdev_memory_info("GPU:0", &before));
    CHECK(before.n_failed_allocs == 1); /* the program's own fill */
    CHECK_OK(vdev_assign(v, value)); /* the write goes on */
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG); /* and leaves both as they were */
    CHECK_STR(vdev_last_error(), err);
    CHECK(!strncmp(vdev_last_oom_report(), full, strlen(full)));
    CHECK_OK(vdev_memory_info("GPU:0", &after)); /* the copy's failure is not the program's */
    CHECK_EQ_U64(after.n_failed_allocs, before.n_failed_allocs);
    CHECK_EQ_U64(after.n_allocs_total, before.n_allocs_total);
    vdev_scope_end();
    float *host = malloc(100000 * sizeof *host);
    CHECK(host && vdev_tensor_to_host(v, host, 100000 * sizeof *host) == VDEV_OK &&
          host[0] == 2.0f && host[99999] == 2.0f);
    free(host);
    vdev_tensor_t *g = (vdev_tensor_t *)1;
    CHECK_STATUS(vdev_tape_gradient(tape, l, &v, 1, &g), VDEV_ERR_OOM);
    CHECK_MSG("Mul read a variable of shape[100000] on /job:localhost/replica:0/task:0/"
              "device:GPU:0 that was written before the gradient was asked for, and its "
              "value then could not be kept (out of memory); end the tape or take the "
              "gradients before updating the variable");
    CHECK(g == NULL);
    /* AddV2's gradient reads no value: it needs none saved */
    CHECK_OK(vdev_tape_gradient(tape, la, &v, 1, &g));
    host = malloc(100000 * sizeof *host);
    CHECK(host && vdev_tensor_to_host(g, host, 100000 * sizeof *host) == VDEV_OK &&
          host[0] == 1.0f && host[99999] == 1.0f);
    free(host);
    vdev_tensor_free(g);
    vdev_tape_end(tape);
    vdev_tensor_free(la);
    vdev_tensor_free(sum);
    vdev_tensor_free(c);
    vdev_tensor_free(l);
    vdev_tensor_free(sq);
    vdev_tensor_free(value);
    vdev_tensor_free(v);
    CHECK_EQ_U64(in_use("GPU:0"), 0);
    CHECK_OK(vdev_device_pop());
}

/* A reshape of a variable is its value then; of a plain tensor, a view. */
static void reshape_is_a_value(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    const float old[4] = {1, 2, 3, 4}, new1[4] = {9, 9, 9, 9};
    vdev_tensor_t *v = vdev_variable(from(old, 4, 0)), *a = from(new1, 4, 0);
    int64_t s[2] = {2, 2};
    vdev_tensor_t *r = vdev_reshape(v, s, 2);
    CHECK(r && vdev_tensor_dim(r, 0) == 2);
    CHECK_OK(vdev_assign(v, a));
    CHECK(equals(r, old, 4));
    vdev_optimizer_t *sgd = vdev_sgd_new(1.0f, 0.0f);
    CHECK_OK(vdev_optimizer_apply(sgd, &v, &a, 1));
    CHECK(equals(r, old, 4));
    vdev_optimizer_free(sgd);
    /* a plain tensor's reshape takes no memory */
    uint64_t before = in_use(dev);
    vdev_tensor_t *view = vdev_reshape(a, s, 2);
    CHECK(view != NULL);
    CHECK_EQ_U64(in_use(dev), before);
    /* and the gradient still flows to the variable, from the value read:
     * d sum(r*r)/dv = 2v as it was */
    vdev_tensor_t *o = from(old, 4, 0);
    CHECK_OK(vdev_assign(v, o));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *r2 = vdev_reshape(v, s, 2);
    vdev_tensor_t *l = vdev_sum(vdev_mul(r2, r2), -1, false), *g = NULL;
    CHECK_OK(vdev_assign(v, a));
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    const float want[4] = {2, 4, 6, 8};
    CHECK(equals(g, want, 4));
    CHECK(vdev_tensor_ndim(g) == 1); /* the variable's shape, not the reshape's */
    vdev_tape_end(tape);
    CHECK_OK(vdev_device_pop());
}

/* AddV2, Sub, Reshape, Identity and Sum read v, but their gradients read no
 * value: a write after them saves nothing (before: a copy of v). */
static void values_not_read(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    const float old[4] = {1, 2, 3, 4}, new1[4] = {10, 20, 30, 40}, cv[4] = {5, 5, 5, 5};
    vdev_tensor_t *v = vdev_variable(from(old, 4, 0)), *a = from(new1, 4, 0), *c = from(cv, 4, 0);
    CHECK(v && a && c);
    CHECK_OK(vdev_scope_begin());
    vdev_tape_t *tape = vdev_tape_begin();
    int64_t s2[2] = {2, 2};
    vdev_tensor_t *l1 = vdev_add(vdev_sum_all(vdev_add(v, c)), vdev_sum_all(vdev_sub(c, v)));
    vdev_tensor_t *l2 =
        vdev_add(vdev_sum_all(vdev_reshape(v, s2, 2)), vdev_sum_all(vdev_identity(v)));
    vdev_tensor_t *l = vdev_add(l1, l2), *g = NULL;
    uint64_t before = in_use(dev);
    CHECK_OK(vdev_assign(v, a));
    CHECK_EQ_U64(in_use(dev), before);
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g)); /* 1 - 1 + 1 + 1 */
    const float two[4] = {2, 2, 2, 2};
    CHECK(equals(g, two, 4));
    vdev_tape_end(tape);
    /* Mul's gradient reads its inputs: that write saves v */
    tape = vdev_tape_begin();
    l = vdev_sum_all(vdev_mul(v, c));
    before = in_use(dev);
    CHECK_OK(vdev_assign(v, c));
    CHECK_EQ_U64(in_use(dev) - before, 256);
    vdev_tape_end(tape);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* 1024 elements of t all equal to x. */
static int all_equal(const vdev_tensor_t *t, float x)
{
    static float h[1024];
    if (vdev_tensor_numel(t) != 1024 || vdev_tensor_to_host(t, h, sizeof h) != VDEV_OK)
        return 0;
    for (int i = 0; i < 1024; i++)
        if (h[i] != x)
            return 0;
    return 1;
}

/* Tape A read v and lives on; each step of a loop runs a tape that reads v
 * and ends, then updates v. Only the value A read is kept: memory stays as
 * after the first step (before: one more copy of v, 4 KiB, each step, until
 * A ended). Then two tapes that read two versions keep a copy each, and each
 * copy goes with its tape. */
static void retained(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    int64_t s[1] = {1024};
    vdev_tensor_t *v = vdev_variable(vdev_tensor_fill(s, 1, VDEV_F32, 1.0));
    vdev_optimizer_t *sgd = vdev_sgd_new(0.25f, 0.0f);
    vdev_tape_t *A = vdev_tape_begin();
    vdev_tensor_t *la = vdev_sum_all(vdev_mul(v, v)), *ga = NULL;
    CHECK_OK(vdev_tape_gradient(A, la, &v, 1, &ga)); /* A records no more, and lives on */
    uint64_t step0 = 0;
    for (int i = 0; i < 6; i++) {
        CHECK_OK(vdev_scope_begin());
        vdev_tape_t *B = vdev_tape_begin();
        vdev_tensor_t *lb = vdev_sum_all(vdev_mul(v, v)), *gb = NULL;
        CHECK_OK(vdev_tape_gradient(B, lb, &v, 1, &gb));
        vdev_tape_end(B);
        CHECK_OK(vdev_optimizer_apply(sgd, &v, &gb, 1));
        vdev_scope_end();
        if (i == 0)
            step0 = in_use(dev);
        else
            CHECK_EQ_U64(in_use(dev), step0);
    }
    vdev_tensor_free(ga);
    CHECK_OK(vdev_tape_gradient(A, la, &v, 1, &ga));
    CHECK(all_equal(ga, 2.0f)); /* 2 v as A read it */
    vdev_tensor_free(ga);
    uint64_t live = in_use(dev);
    vdev_tape_end(A);
    CHECK_EQ_U64(live - in_use(dev), 4096); /* its copy of v */

    /* two tapes, two versions read */
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *x = vdev_tensor_fill(s, 1, VDEV_F32, 3.0);
    vdev_tensor_t *y = vdev_tensor_fill(s, 1, VDEV_F32, 5.0);
    A = vdev_tape_begin();
    la = vdev_sum_all(vdev_mul(v, v));
    CHECK_OK(vdev_tape_gradient(A, la, &v, 1, &ga));
    vdev_tensor_free(ga);
    CHECK_OK(vdev_assign(v, x));
    vdev_tape_t *B = vdev_tape_begin();
    vdev_tensor_t *lb = vdev_sum_all(vdev_mul(v, v)), *gb = NULL;
    CHECK_OK(vdev_tape_gradient(B, lb, &v, 1, &gb));
    vdev_tensor_free(gb);
    uint64_t read = in_use(dev);
    CHECK_OK(vdev_assign(v, y));
    CHECK_EQ_U64(in_use(dev) - read, 4096); /* B's version; A's was saved already */
    vdev_tape_end(A);
    CHECK_EQ_U64(in_use(dev) - read, 0);    /* A's copy went with A */
    CHECK_OK(vdev_tape_gradient(B, lb, &v, 1, &gb));
    CHECK(all_equal(gb, 6.0f)); /* 2 x */
    vdev_tensor_free(gb);
    vdev_tape_end(B);
    CHECK_EQ_U64(in_use(dev) - read, -4096ull);
    vdev_scope_end();
    vdev_optimizer_free(sgd);
    CHECK_OK(vdev_device_pop());
}

/* Writes to what is not a variable, after the tape read it: the gradient of
 * sum(x * w) with respect to w is x as it was read (1 2 3 4), whatever is
 * written into x afterwards (10 20 30 40). */
static void not_variables(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    const float xo[4] = {1, 2, 3, 4}, xn[4] = {10, 20, 30, 40}, one[4] = {1, 1, 1, 1};
    int64_t s2[2] = {2, 2};
    vdev_tensor_t *w = vdev_variable(from(one, 4, 0)), *nx = from(xn, 4, 0), *g = NULL;
    vdev_tensor_t *w2 = vdev_variable(from(one, 2, 2));
    CHECK(w && nx && w2);

    /* vdev_assign into a plain tensor (before: 10 20 30 40) */
    vdev_tensor_t *x = from(xo, 4, 0);
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *l = vdev_sum_all(vdev_mul(x, w));
    CHECK_OK(vdev_assign(x, nx));
    CHECK_OK(vdev_tape_gradient(t, l, &w, 1, &g));
    CHECK(equals(g, xo, 4));
    vdev_tape_end(t);

    /* into an op's output that its gradient reads: d sum(exp(w)) / dw is
     * exp(w) as computed, e (before: the value written) */
    t = vdev_tape_begin();
    vdev_tensor_t *e = vdev_exp(w);
    l = vdev_sum_all(e);
    CHECK_OK(vdev_assign(e, nx));
    CHECK_OK(vdev_tape_gradient(t, l, &w, 1, &g));
    float got[4];
    CHECK(vdev_tensor_to_host(g, got, sizeof got) == VDEV_OK && got[0] > 2.718f &&
          got[0] < 2.7183f && got[3] == got[0]);
    vdev_tape_end(t);

    /* through a view made while x was a plain tensor, then x a variable
     * (before: the view's owner was not followed) */
    x = from(xo, 4, 0);
    vdev_tensor_t *y = vdev_reshape(x, s2, 2);
    CHECK(vdev_variable(x) == x);
    t = vdev_tape_begin();
    l = vdev_sum_all(vdev_mul(y, w2));
    CHECK_OK(vdev_assign(x, nx));
    CHECK_OK(vdev_tape_gradient(t, l, &w2, 1, &g));
    CHECK(equals(g, xo, 4));
    vdev_tape_end(t);

    /* a DLPack consumer writes through an export made before the tape
     * (vdev.h: writes through the export are writes to the tensor) */
    x = vdev_variable(from(xo, 4, 0));
    DLManagedTensor *m = NULL;
    CHECK_OK(vdev_tensor_to_dlpack(x, &m));
    CHECK(m && m->dl_tensor.device.device_type == kDLCPU);
    t = vdev_tape_begin();
    vdev_tensor_t *sq = vdev_mul(x, x);
    l = vdev_sum_all(sq);
    float y4[4];
    CHECK_OK(vdev_tensor_to_host(sq, y4, sizeof y4)); /* Mul has run */
    for (int i = 0; m && i < 4; i++)
        ((float *)m->dl_tensor.data)[i] = 100.0f;
    CHECK_OK(vdev_tape_gradient(t, l, &x, 1, &g));
    const float twice[4] = {2, 4, 6, 8}, squares[4] = {1, 4, 9, 16};
    CHECK(equals(g, twice, 4)); /* before: 200 200 200 200 */
    CHECK(equals(sq, squares, 4));
    vdev_tape_end(t);
    if (m)
        m->deleter(m);
    vdev_tensor_free(x);
    CHECK_OK(vdev_device_pop());
}

int main(void)
{
    two_models("GPU:0");
    two_models("CPU:0");
    assigned("GPU:1");
    assigned("CPU:0");
    no_room();
    values_not_read("GPU:0");
    values_not_read("CPU:0");
    retained("GPU:1");
    retained("CPU:0");
    not_variables("GPU:0");
    not_variables("CPU:0");
    reshape_is_a_value("GPU:0");
    reshape_is_a_value("CPU:0");
    vdev_shutdown();
    return check_done();
}
