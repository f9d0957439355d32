/* test_grad_prune.c — the tape computes only the gradients that lead to the
 * variables asked for.
 *
 * A model whose input is another model's output (a tensor that requires a
 * gradient but is not a variable of this call) must not pay for that
 * input's gradient: the second model of a chain runs 5 matrix products in
 * its backward pass (3 weight gradients, 2 input gradients between its
 * layers), not 6. The counts come from the placement record
 * (vdev_placement_op_count), and the gradients must equal, bit for bit, those
 * of the same model fed a plain tensor. Also: asking for the input as well
 * brings the sixth product back; asking for an intermediate result and a
 * variable behind it; a variable the loss does not depend on still gets
 * zeros; a gradient through a broadcast add whose operand is not asked for,
 * and a mean squared error whose target depends on a variable. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>
#include <string.h>

static uint64_t matmuls(void) { return vdev_placement_op_count("MatMul", NULL); }

/* Bits of a tensor (f32), into a new buffer the caller frees. */
static float *bits(const vdev_tensor_t *t)
{
    int64_t n = vdev_tensor_numel(t);
    float *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    if (b && vdev_tensor_to_host(t, b, (size_t)n * sizeof *b) != VDEV_OK) {
        free(b);
        return NULL;
    }
    return b;
}

static int same_bits(const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    int64_t n = vdev_tensor_numel(a);
    if (n != vdev_tensor_numel(b) || n < 0)
        return 0;
    float *x = bits(a), *y = bits(b);
    int same = x && y && memcmp(x, y, (size_t)n * sizeof *x) == 0;
    free(x);
    free(y);
    return same;
}

/* Model 2 of a chain: its input comes from model 1 (requires a gradient). */
static void chained_input(const char *dev)
{
    check_fresh("2x1GiB");
    int64_t s1[4] = {16, 32, 32, 8}, s2[4] = {8, 24, 24, 4}, xs[2] = {5, 16}, ts[2] = {5, 4};
    vdev_device_push(dev);
    vdev_mlp_t *m1 = vdev_mlp_new(s1, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, 1);
    vdev_mlp_t *m2 = vdev_mlp_new(s2, 4, VDEV_ACT_TANH, VDEV_ACT_NONE, 2);
    vdev_tensor_t *x = vdev_tensor_uniform(xs, 2, -1, 1, 3);
    vdev_tensor_t *tgt = vdev_tensor_uniform(ts, 2, -1, 1, 4);
    CHECK(m1 && m2 && x && tgt);
    vdev_tensor_t *v2[6];
    CHECK(vdev_mlp_variables(m2, v2, 6) == 6);

    vdev_scope_begin();
    /* Model 1 runs under a tape of its own, so its output requires a
     * gradient, as in a chain where each model trains. */
    vdev_tape_t *tape1 = vdev_tape_begin();
    vdev_tensor_t *h = vdev_mlp_forward(m1, x);
    vdev_tape_end(tape1);
    vdev_tensor_t *plain = vdev_tensor_to(h, dev); /* the same values, no gradient */
    CHECK(h && plain);

    /* Fed model 1's output: 5 products backward, not 6. */
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_mse(vdev_mlp_forward(m2, h), tgt);
    CHECK(loss != NULL);
    vdev_tensor_t *g[6];
    uint64_t before = matmuls();
    CHECK_OK(vdev_tape_gradient(tape, loss, v2, 6, g));
    CHECK_EQ_U64(matmuls() - before, 5);
    vdev_tape_end(tape);

    /* Fed a plain tensor: the same 5 products and the same bits. */
    tape = vdev_tape_begin();
    loss = vdev_mse(vdev_mlp_forward(m2, plain), tgt);
    vdev_tensor_t *gp[6];
    before = matmuls();
    CHECK_OK(vdev_tape_gradient(tape, loss, v2, 6, gp));
    CHECK_EQ_U64(matmuls() - before, 5);
    vdev_tape_end(tape);
    for (int i = 0; i < 6; i++)
        CHECK(same_bits(g[i], gp[i]));

    /* Asked for the input too: its product comes back, and the variables'
     * gradients do not change. */
    tape = vdev_tape_begin();
    loss = vdev_mse(vdev_mlp_forward(m2, h), tgt);
    vdev_tensor_t *v7[7] = {v2[0], v2[1], v2[2], v2[3], v2[4], v2[5], h}, *g7[7];
    before = matmuls();
    CHECK_OK(vdev_tape_gradient(tape, loss, v7, 7, g7));
    CHECK_EQ_U64(matmuls() - before, 6);
    vdev_tape_end(tape);
    for (int i = 0; i < 6; i++)
        CHECK(same_bits(g[i], g7[i]));
    CHECK(vdev_tensor_dim(g7[6], 0) == 5 && vdev_tensor_dim(g7[6], 1) == 8);

    /* Asked for the last layer's weights only: 1 product (no input
     * gradient flows back through the earlier layers). */
    tape = vdev_tape_begin();
    loss = vdev_mse(vdev_mlp_forward(m2, h), tgt);
    vdev_tensor_t *g1[1];
    before = matmuls();
    CHECK_OK(vdev_tape_gradient(tape, loss, &v2[4], 1, g1));
    CHECK_EQ_U64(matmuls() - before, 1);
    vdev_tape_end(tape);
    CHECK(same_bits(g1[0], g[4]));
    vdev_scope_end();
    vdev_device_pop();
    vdev_mlp_free(m1);
    vdev_mlp_free(m2);
    vdev_tensor_free(x);
    vdev_tensor_free(tgt);
}

/* An intermediate result and a variable behind it, asked for together. */
static void intermediate(void)
{
    check_fresh(NULL);
    int64_t ws[2] = {3, 4}, xs[2] = {2, 3};
    float wv[12], xv[6];
    for (int i = 0; i < 12; i++)
        wv[i] = 0.1f * (float)(i - 5);
    for (int i = 0; i < 6; i++)
        xv[i] = 0.3f * (float)(i + 1);
    vdev_tensor_t *w = vdev_variable(vdev_tensor_from_host(wv, ws, 2, VDEV_F32));
    vdev_tensor_t *x = vdev_tensor_from_host(xv, xs, 2, VDEV_F32);
    vdev_tensor_t *unused = vdev_variable(vdev_tensor_from_host(xv, xs, 2, VDEV_F32));
    CHECK(w && x && unused);
    vdev_scope_begin();
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = vdev_matmul(x, w, false, false); /* [2,4] */
    vdev_tensor_t *loss = vdev_sum_all(vdev_mul(y, y));
    vdev_tensor_t *vars[3] = {y, w, unused}, *g[3];
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, 3, g));
    vdev_tape_end(tape);
    /* dL/dy = 2y; dL/dw = x^T 2y; the unused variable: zeros. */
    float yv[8], gy[8], gw[12], gu[6];
    CHECK_OK(vdev_tensor_to_host(y, yv, sizeof yv));
    CHECK_OK(vdev_tensor_to_host(g[0], gy, sizeof gy));
    CHECK_OK(vdev_tensor_to_host(g[1], gw, sizeof gw));
    CHECK_OK(vdev_tensor_to_host(g[2], gu, sizeof gu));
    int ok = 1;
    for (int i = 0; i < 8; i++)
        ok &= gy[i] == 2.0f * yv[i];
    CHECK(ok);
    ok = 1;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) {
            double want = 0;
            for (int k = 0; k < 2; k++)
                want += (double)xv[k * 3 + r] * 2.0 * yv[k * 4 + c];
            double d = gw[r * 4 + c] - want;
            ok &= d < 1e-5 && d > -1e-5;
        }
    CHECK(ok);
    ok = 1;
    for (int i = 0; i < 6; i++)
        ok &= gu[i] == 0.0f;
    CHECK(ok);
    vdev_scope_end();
    vdev_tensor_free(w);
    vdev_tensor_free(x);
    vdev_tensor_free(unused);
}

/* Binary ops whose second operand is not asked for, and an MSE whose
 * target depends on a variable: each gradient still exact. */
static void partial_binary(void)
{
    check_fresh(NULL);
    int64_t s[2] = {2, 3}, r[1] = {3};
    float av[6] = {1, -2, 3, 4, -5, 6}, bv[3] = {0.5f, 2, -1};
    vdev_tensor_t *a = vdev_variable(vdev_tensor_from_host(av, s, 2, VDEV_F32));
    vdev_tensor_t *b = vdev_variable(vdev_tensor_from_host(bv, r, 1, VDEV_F32));
    CHECK(a && b);
    vdev_scope_begin();
    struct {
        const char *name;
        int op;
    } ops[4] = {{"add", 0}, {"sub", 1}, {"mul", 2}, {"div", 3}};
    for (int k = 0; k < 4; k++) {
        for (int which = 0; which < 2; which++) {
            vdev_tape_t *tape = vdev_tape_begin();
            vdev_tensor_t *y = ops[k].op == 0   ? vdev_add(a, b)
                               : ops[k].op == 1 ? vdev_sub(a, b)
                               : ops[k].op == 2 ? vdev_mul(a, b)
                                                : vdev_div(a, b);
            vdev_tensor_t *loss = vdev_sum_all(y);
            vdev_tensor_t *v = which ? b : a, *g = NULL;
            CHECK_OK(vdev_tape_gradient(tape, loss, &v, 1, &g));
            vdev_tape_end(tape);
            float gv[6];
            CHECK_OK(vdev_tensor_to_host(g, gv, (size_t)vdev_tensor_numel(g) * 4));
            int ok = 1;
            for (int i = 0; i < (which ? 3 : 6); i++) {
                double want;
                if (!which)
                    want = ops[k].op <= 1 ? 1.0 : ops[k].op == 2 ? bv[i % 3] : 1.0 / bv[i % 3];
                else {
                    want = 0;
                    for (int row = 0; row < 2; row++) {
                        double x = av[row * 3 + i];
                        want += ops[k].op == 0   ? 1.0
                                : ops[k].op == 1 ? -1.0
                                : ops[k].op == 2 ? x
                                                 : -x / ((double)bv[i] * bv[i]);
                    }
                }
                double d = gv[i] - want;
                ok &= d < 1e-5 * (1 + (want < 0 ? -want : want)) &&
                      d > -1e-5 * (1 + (want < 0 ? -want : want));
            }
            if (!ok)
                printf("  %s, gradient of %s wrong\n", ops[k].name, which ? "b" : "a");
            CHECK(ok);
        }
    }
    /* MSE(a, 2a): the gradient flows through both operands. d/da of
     * mean((a - 2a)^2) = mean(2 (a - 2a) (1 - 2)) = 2a / n per element. */
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_mse(a, vdev_mul_scalar(a, 2.0f)), *g = NULL;
    CHECK_OK(vdev_tape_gradient(tape, loss, &a, 1, &g));
    vdev_tape_end(tape);
    float gv[6];
    CHECK_OK(vdev_tensor_to_host(g, gv, sizeof gv));
    int ok = 1;
    for (int i = 0; i < 6; i++) {
        double d = gv[i] - 2.0 * av[i] / 6.0;
        ok &= d < 1e-6 && d > -1e-6;
    }
    CHECK(ok);
    vdev_scope_end();
    vdev_tensor_free(a);
    vdev_tensor_free(b);
}

int main(void)
{
    chained_input("CPU:0");
    chained_input("GPU:1");
    intermediate();
    partial_binary();
    vdev_shutdown();
    return check_done();
}
