/* test_grad.c — every differentiable op's gradient through the tape against
 * central finite differences, on the cpu backend and on a simulated GPU.
 *
 * Each case builds y = f(vars) with public ops, takes the loss
 * L = sum(y * W) with fixed random weights W (so the gradient flowing into f
 * is not all ones), and compares dL/dvar from vdev_tape_gradient with
 *     (L(var + eps e_i) - L(var - eps e_i)) / (2 eps)
 * for every element i, with eps = 1e-2 on f32 and
 *     |grad - fd| <= 2e-3 + 1e-2 |fd|.
 * (Truncation error is eps^2/6 |f'''|, about 1e-4 here; the float rounding of
 * L, about 1e-6 |L|, becomes 1e-4 after dividing by 2 eps.) Inputs are smooth
 * and away from kinks: relu inputs have |x| >= 0.2, log, pow and sqrt inputs
 * are positive, divisors are away from 0.
 *
 * Also: a variable used twice, a variable the loss does not use (zeros), a
 * summed gradient kept past a nested scope, a variable asked for twice,
 * gradients that run on the forward op's device whatever scope the caller
 * is in, and a second tape on a thread that already records. */
#define _GNU_SOURCE
#include "check.h"
#include "ops_rng.h"
#include "ops/ops.h" /* vdev_sqrt */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-2  /* finite-difference step */
#define ATOL 2e-3 /* |grad - fd| <= ATOL + RTOL |fd| */
#define RTOL 1e-2
#define MAXV 3 /* variables per case */


/* A case: the function of the variables, the variables' shapes and value
 * ranges, and the op's parameters. */
struct gcase {
    const char *name;
    vdev_tensor_t *(*f)(vdev_tensor_t *const *v, const struct gcase *c);
    int nv;
    int ndim[MAXV];
    int64_t shape[MAXV][4];
    float lo, hi; /* values of the variables */
    int away;     /* |x| >= lo with a random sign instead of [lo, hi) */
    int ta, tb;   /* matmul */
    int axis, keep;
    float s;                  /* scalar parameter */
    const vdev_tensor_t *aux; /* labels, a constant */
};

/* ---- the functions under test ----
 *
 * Each is y = op(variables) with the public API; the case's fields carry
 * the op's parameters (transposes, axis, scalar, labels). */

static vdev_tensor_t *f_matmul(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_matmul(v[0], v[1], c->ta, c->tb);
}
static vdev_tensor_t *f_add(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_add(v[0], v[1]);
}
static vdev_tensor_t *f_sub(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_sub(v[0], v[1]);
}
static vdev_tensor_t *f_mul(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_mul(v[0], v[1]);
}
static vdev_tensor_t *f_div(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_div(v[0], v[1]);
}
static vdev_tensor_t *f_add_scalar(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_add_scalar(v[0], c->s);
}
static vdev_tensor_t *f_mul_scalar(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_mul_scalar(v[0], c->s);
}
static vdev_tensor_t *f_pow_scalar(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_pow_scalar(v[0], c->s);
}
static vdev_tensor_t *f_sqrt(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_sqrt(v[0]);
}
static vdev_tensor_t *f_relu(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_relu(v[0]);
}
static vdev_tensor_t *f_tanh(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_tanh(v[0]);
}
static vdev_tensor_t *f_sigmoid(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_sigmoid(v[0]);
}
static vdev_tensor_t *f_exp(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_exp(v[0]);
}
static vdev_tensor_t *f_log(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_log(v[0]);
}
static vdev_tensor_t *f_erf(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_erf(v[0]);
}
static vdev_tensor_t *f_softplus(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_softplus(v[0]);
}
/* the fused LSTM cell: its ops on pre-activations z, and a whole step (the
 * gates read by both cell ops, c by the output's tanh) */
static vdev_tensor_t *f_lstm_state(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_lstm_cell_state(vdev_lstm_gates(v[0]), v[1]);
}
static vdev_tensor_t *f_lstm_output(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_lstm_cell_output(vdev_lstm_gates(v[0]), v[1]);
}
static vdev_tensor_t *f_lstm_step(vdev_tensor_t *const *v, const struct gcase *c)
{
    vdev_tensor_t *a = vdev_lstm_gates(v[0]);
    return vdev_lstm_cell_output(a, vdev_tanh(vdev_lstm_cell_state(a, v[1])));
}
/* tf.where on a constant float mask (aux) of rows: a's rows and b's */
static vdev_tensor_t *f_select(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_mul(vdev_select_mask(c->aux, v[0], v[1]), v[0]);
}
/* the fused GRU cell: its gates, and a whole step (xw, inner, h_prev) */
static vdev_tensor_t *f_gru_gates(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_gru_gates(v[0], v[1]);
}
static vdev_tensor_t *f_gru_step(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_gru_cell_output(vdev_gru_gates(v[0], v[1]), v[2]);
}
static vdev_tensor_t *f_softmax(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_softmax(v[0]);
}
static vdev_tensor_t *f_log_softmax(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_log_softmax(v[0]);
}
/* axis 127 (VDEV_AXIS_ALL): over every element, a 0-dimensional result */
static vdev_tensor_t *f_sum(vdev_tensor_t *const *v, const struct gcase *c)
{
    return c->axis == 127 ? vdev_sum_all(v[0]) : vdev_sum(v[0], c->axis, c->keep);
}
static vdev_tensor_t *f_mean(vdev_tensor_t *const *v, const struct gcase *c)
{
    return c->axis == 127 ? vdev_mean_all(v[0]) : vdev_mean(v[0], c->axis, c->keep);
}
/* [r, c] -> [axis, -1] */
static vdev_tensor_t *f_reshape(vdev_tensor_t *const *v, const struct gcase *c)
{
    int64_t s[2] = {c->axis, -1};
    return vdev_reshape(v[0], s, 2);
}
static vdev_tensor_t *f_transpose(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_transpose(v[0]);
}
static vdev_tensor_t *f_mse(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_mse(v[0], v[1]);
}
/* the labels (aux) are a constant i32 tensor: no gradient */
static vdev_tensor_t *f_ce(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_softmax_cross_entropy(v[0], c->aux);
}
static vdev_tensor_t *f_identity(vdev_tensor_t *const *v, const struct gcase *c)
{
    return vdev_identity(v[0]);
}
/* A two-layer network: the chain rule through several ops. */
static vdev_tensor_t *f_mlp(vdev_tensor_t *const *v, const struct gcase *c)
{
    vdev_tensor_t *h = vdev_tanh(vdev_add(vdev_matmul(c->aux, v[0], false, false), v[1]));
    return vdev_log_softmax(vdev_matmul(h, v[2], false, false));
}

/* ---- the check ---- */

/* L = sum(f(v) * W); W from a fixed seed, of y's shape, so every
 * evaluation (taped or not) uses the same weights. */
static vdev_tensor_t *loss_of(const struct gcase *c, vdev_tensor_t *const *v)
{
    vdev_tensor_t *y = c->f(v, c);
    if (!y)
        return NULL;
    int64_t shape[4];
    int nd = vdev_tensor_ndim(y);
    for (int d = 0; d < nd; d++)
        shape[d] = vdev_tensor_dim(y, d);
    vdev_tensor_t *w = vdev_tensor_uniform(shape, nd, -1.0f, 1.0f, 1234);
    return vdev_sum_all(vdev_mul(y, w));
}

/* The loss as a number, without a tape; temporaries freed. */
static double loss_value(const struct gcase *c, vdev_tensor_t *const *v)
{
    vdev_scope_begin();
    double l = vdev_tensor_item(loss_of(c, v));
    vdev_scope_end();
    return l;
}

/* Makes the case's variables on the current device: uniform in [lo, hi),
 * or with |x| in [lo, hi) and a random sign when `away` (no kinks, no
 * division by values near 0). */
static void make_vars(const struct gcase *c, vdev_tensor_t **v)
{
    for (int k = 0; k < c->nv; k++) {
        int64_t n = 1;
        for (int d = 0; d < c->ndim[k]; d++)
            n *= c->shape[k][d];
        float *h = malloc((size_t)(n + 1) * 4);
        for (int64_t i = 0; i < n; i++) {
            h[i] = rng_uniform(c->lo, c->hi);
            if (c->away && (rng_next() & 1))
                h[i] = -h[i];
        }
        v[k] = vdev_variable(vdev_tensor_from_host(h, c->shape[k], c->ndim[k], VDEV_F32));
        free(h);
    }
}

/* The gradients from the tape against finite differences, on `dev`. Also
 * checks each gradient's shape and that it lives on its variable's device.
 * The perturbed variable is rewritten with vdev_assign (in place), so the
 * ops see the same tensor as the tape did. */
static void gradcheck(const char *dev, const struct gcase *c)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_tensor_t *v[MAXV] = {0}, *g[MAXV] = {0};
    make_vars(c, v);
    vdev_scope_begin();
    vdev_tape_t *tape = vdev_tape_begin();
    CHECK(tape != NULL);
    vdev_tensor_t *loss = loss_of(c, v);
    enum vdev_status st = vdev_tape_gradient(tape, loss, v, c->nv, g);
    vdev_tape_end(tape);
    if (st != VDEV_OK) {
        check_fail(__FILE__, __LINE__, "%s on %s: %s", c->name, dev, vdev_last_error());
        goto out;
    }
    for (int k = 0; k < c->nv; k++) {
        int64_t n = vdev_tensor_numel(v[k]);
        CHECK(vdev_tensor_numel(g[k]) == n && vdev_tensor_ndim(g[k]) == c->ndim[k]);
        CHECK_STR(vdev_tensor_device(g[k]), vdev_tensor_device(v[k]));
        float *x = malloc((size_t)n * 4), *gx = malloc((size_t)n * 4);
        CHECK_OK(vdev_tensor_to_host(v[k], x, (size_t)n * 4));
        CHECK_OK(vdev_tensor_to_host(g[k], gx, (size_t)n * 4));
        int ok = 1;
        /* one central difference per element; stop at the first mismatch */
        for (int64_t i = 0; i < n && ok; i++) {
            float x0 = x[i];
            double l[2];
            for (int side = 0; side < 2; side++) {
                x[i] = (float)(x0 + (side ? -EPS : EPS));
                vdev_scope_begin();
                CHECK_OK(
                    vdev_assign(v[k], vdev_tensor_from_host(x, c->shape[k], c->ndim[k], VDEV_F32)));
                vdev_scope_end();
                l[side] = loss_value(c, v);
            }
            x[i] = x0;
            double fd = (l[0] - l[1]) / (2 * EPS);
            if (!(fabs(gx[i] - fd) <= ATOL + RTOL * fabs(fd))) {
                check_fail(__FILE__, __LINE__,
                           "%s on %s: d/d var%d[%lld] = %.6g, finite "
                           "difference %.6g",
                           c->name, dev, k, (long long)i, gx[i], fd);
                ok = 0;
            }
        }
        /* restore the variable before the next one is perturbed */
        vdev_scope_begin();
        CHECK_OK(vdev_assign(v[k], vdev_tensor_from_host(x, c->shape[k], c->ndim[k], VDEV_F32)));
        vdev_scope_end();
        if (ok)
            check_passed++;
        free(x);
        free(gx);
    }
out:
    vdev_scope_end();
    for (int k = 0; k < c->nv; k++)
        vdev_tensor_free(v[k]);
    CHECK_OK(vdev_device_pop());
}

/* A one-variable case with an [r, c] variable; callers adjust the rest. */
static struct gcase one(const char *name,
                        vdev_tensor_t *(*f)(vdev_tensor_t *const *, const struct gcase *),
                        int64_t r, int64_t c, float lo, float hi)
{
    struct gcase g;
    memset(&g, 0, sizeof g);
    g.name = name;
    g.f = f;
    g.nv = 1;
    g.ndim[0] = 2;
    g.shape[0][0] = r;
    g.shape[0][1] = c;
    g.lo = lo;
    g.hi = hi;
    return g;
}

/* Every differentiable op (see the table in ops_table.c), in each of its
 * modes, on `dev`. */
static void all_cases(const char *dev)
{
    struct gcase c;
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();

    /* matmul, every transpose combination: A [3,4] B [4,5] as stored */
    for (int combo = 0; combo < 4; combo++) {
        c = one("matmul", f_matmul, 0, 0, -1, 1);
        c.nv = 2;
        c.ta = combo & 1;
        c.tb = combo >> 1;
        c.ndim[1] = 2;
        c.shape[0][0] = c.ta ? 4 : 3;
        c.shape[0][1] = c.ta ? 3 : 4;
        c.shape[1][0] = c.tb ? 5 : 4;
        c.shape[1][1] = c.tb ? 4 : 5;
        gradcheck(dev, &c);
    }

    /* binary ops with every shape of b: [3,4], [4], [1,4], [1], []; the
     * broadcast ones check REDUCE_ROWS in the gradient of b */
    vdev_tensor_t *(*bin[4])(vdev_tensor_t *const *, const struct gcase *) = {f_add, f_sub, f_mul,
                                                                              f_div};
    static const char *bin_names[4] = {"add", "sub", "mul", "div"};
    for (int op = 0; op < 4; op++)
        for (int mode = 0; mode < 5; mode++) {
            c = one(bin_names[op], bin[op], 3, 4, 0.5f, 2.0f);
            c.away = 1; /* divisors away from 0 */
            c.nv = 2;
            static const int nb[5] = {2, 1, 2, 1, 0};
            c.ndim[1] = nb[mode];
            c.shape[1][0] = mode == 0 ? 3 : mode == 1 ? 4 : 1;
            c.shape[1][1] = mode == 0 || mode == 2 ? 4 : 1;
            gradcheck(dev, &c);
        }

    c = one("add_scalar", f_add_scalar, 3, 4, -2, 2);
    c.s = 0.5f;
    gradcheck(dev, &c);
    c = one("mul_scalar", f_mul_scalar, 3, 4, -2, 2);
    c.s = -1.5f;
    gradcheck(dev, &c);
    /* pow: p = 0 (zeros away from x = 0) and p = 1 (dout passed on) too */
    static const float pw[6] = {2, 3, 0.5f, -1, 0, 1};
    for (int i = 0; i < 6; i++) {
        c = one("pow_scalar", f_pow_scalar, 3, 4, 0.5f, 2.0f);
        c.s = pw[i];
        gradcheck(dev, &c);
    }
    c = one("sqrt", f_sqrt, 3, 4, 0.5f, 3.0f);
    gradcheck(dev, &c);
    /* |x| >= 0.2 keeps x +- EPS on one side of relu's kink */
    c = one("relu", f_relu, 3, 4, 0.2f, 2.0f);
    c.away = 1;
    gradcheck(dev, &c);
    c = one("tanh", f_tanh, 3, 4, -2, 2);
    gradcheck(dev, &c);
    c = one("sigmoid", f_sigmoid, 3, 4, -3, 3);
    gradcheck(dev, &c);
    c = one("exp", f_exp, 3, 4, -1, 1.5f);
    gradcheck(dev, &c);
    c = one("log", f_log, 3, 4, 0.5f, 3);
    gradcheck(dev, &c);
    c = one("erf", f_erf, 3, 4, -2, 2);
    gradcheck(dev, &c);
    /* between TensorFlow's switches at +-13.94, and across both */
    c = one("softplus", f_softplus, 3, 4, -3, 3);
    gradcheck(dev, &c);
    c = one("softplus", f_softplus, 3, 4, -16, 16);
    gradcheck(dev, &c);
    /* z [3,8] (2 units), c [3,2]; then z [2,3,12] (3-D, 3 units) */
    vdev_tensor_t *(*lstm[3])(vdev_tensor_t *const *, const struct gcase *) = {
        f_lstm_state, f_lstm_output, f_lstm_step};
    for (int k = 0; k < 6; k++) {
        c = one("lstm cell", lstm[k % 3], 3, 8, -2, 2);
        c.nv = 2;
        c.ndim[1] = 2;
        c.shape[1][0] = 3;
        c.shape[1][1] = 2;
        if (k >= 3) {
            c.ndim[0] = c.ndim[1] = 3;
            c.shape[0][0] = c.shape[1][0] = 2;
            c.shape[0][1] = c.shape[1][1] = 3;
            c.shape[0][2] = 12;
            c.shape[1][2] = 3;
        }
        gradcheck(dev, &c);
    }
    /* xw, inner [3,6] (2 units), h_prev [3,2] */
    for (int k = 0; k < 2; k++) {
        c = one("gru cell", k ? f_gru_step : f_gru_gates, 3, 6, -2, 2);
        c.nv = k ? 3 : 2;
        c.ndim[1] = c.ndim[2] = 2;
        c.shape[1][0] = c.shape[2][0] = 3;
        c.shape[1][1] = 6;
        c.shape[2][1] = 2;
        gradcheck(dev, &c);
    }
    c = one("softmax", f_softmax, 3, 5, -2, 2);
    gradcheck(dev, &c);
    c = one("log_softmax", f_log_softmax, 3, 5, -2, 2);
    gradcheck(dev, &c);

    /* sum and mean over 0, 1, -1, all, with and without keepdims; 3-D axis 1 */
    static const int axes[4] = {0, 1, -1, 127};
    for (int red = 0; red < 2; red++)
        for (int i = 0; i < 8; i++) {
            c = one(red ? "mean" : "sum", red ? f_mean : f_sum, 3, 4, -2, 2);
            c.axis = axes[i / 2];
            c.keep = i & 1;
            gradcheck(dev, &c);
        }
    for (int red = 0; red < 2; red++) {
        c = one(red ? "mean 3-D" : "sum 3-D", red ? f_mean : f_sum, 2, 3, -2, 2);
        c.ndim[0] = 3;
        c.shape[0][2] = 4;
        c.axis = 1;
        gradcheck(dev, &c);
    }

    c = one("reshape", f_reshape, 3, 4, -2, 2);
    c.axis = 2; /* [3,4] -> [2,-1] */
    gradcheck(dev, &c);
    c = one("transpose", f_transpose, 3, 4, -2, 2);
    gradcheck(dev, &c);
    c = one("identity", f_identity, 3, 4, -2, 2);
    gradcheck(dev, &c);
    /* mse: both the prediction and the target are variables */
    c = one("mse", f_mse, 3, 4, -2, 2);
    c.nv = 2;
    c.ndim[1] = 2;
    c.shape[1][0] = 3;
    c.shape[1][1] = 4;
    gradcheck(dev, &c);

    int32_t lab[4] = {0, 4, 2, 2};
    int64_t s4[1] = {4};
    c = one("softmax_cross_entropy", f_ce, 4, 5, -2, 2);
    c.aux = vdev_tensor_from_host(lab, s4, 1, VDEV_I32);
    gradcheck(dev, &c);

    /* where(mask [4,1], a, b) * a, a and b [4,3]: each gets its rows' share */
    float rows[4] = {1, 0, 1, 0};
    int64_t s41[2] = {4, 1};
    c = one("select_mask", f_select, 4, 3, -2, 2);
    c.nv = 2;
    c.ndim[1] = 2;
    c.shape[1][0] = 4;
    c.shape[1][1] = 3;
    c.aux = vdev_tensor_from_host(rows, s41, 2, VDEV_F32);
    gradcheck(dev, &c);

    /* a small network: x [4,3] constant, W1 [3,5], b1 [5], W2 [5,2] */
    int64_t sx[2] = {4, 3};
    c = one("mlp", f_mlp, 3, 5, -1, 1);
    c.nv = 3;
    c.ndim[1] = 1;
    c.shape[1][0] = 5;
    c.ndim[2] = 2;
    c.shape[2][0] = 5;
    c.shape[2][1] = 2;
    c.aux = vdev_tensor_uniform(sx, 2, -1, 1, 77);
    gradcheck(dev, &c);

    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* ---- the tape's bookkeeping ---- */

/* A 2-D f32 variable from host values on the current device. */
static vdev_tensor_t *var_from(const float *h, int64_t r, int64_t c)
{
    int64_t s[2] = {r, c};
    return vdev_variable(vdev_tensor_from_host(h, s, 2, VDEV_F32));
}

/* Gradients reaching one variable from several ops (and from both inputs
 * of one op) are summed; a variable the loss does not use gets zeros of its
 * shape on its device. Exact: every value is small and binary. */
static void test_used_twice_and_unused(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    float h[6] = {1, -2, 3, 0.5f, -0.25f, 4};
    vdev_tensor_t *x = var_from(h, 2, 3), *u = var_from(h, 3, 2);
    vdev_scope_begin();
    vdev_tape_t *t = vdev_tape_begin();
    /* L = sum(x * x) + sum(2 x): dL/dx = 2 x + 2, exactly */
    vdev_tensor_t *loss =
        vdev_add(vdev_sum_all(vdev_mul(x, x)), vdev_sum_all(vdev_mul_scalar(x, 2)));
    vdev_tensor_t *vars[2] = {x, u}, *g[2];
    CHECK_OK(vdev_tape_gradient(t, loss, vars, 2, g));
    vdev_tape_end(t);
    float gx[6], gu[6];
    CHECK_OK(vdev_tensor_to_host(g[0], gx, sizeof gx));
    CHECK_OK(vdev_tensor_to_host(g[1], gu, sizeof gu));
    int ok = 1;
    for (int i = 0; i < 6; i++)
        ok = ok && gx[i] == 2 * h[i] + 2 && gu[i] == 0.0f;
    CHECK(ok);
    CHECK(vdev_tensor_ndim(g[1]) == 2 && vdev_tensor_dim(g[1], 0) == 3);
    CHECK_STR(vdev_tensor_device(g[1]), vdev_tensor_device(u));
    /* TensorFlow's UnconnectedGradients.NONE: NULL for u, x's gradient the same */
    t = vdev_tape_begin();
    loss = vdev_add(vdev_sum_all(vdev_mul(x, x)), vdev_sum_all(vdev_mul_scalar(x, 2)));
    vdev_tensor_t *gn[2];
    CHECK_OK(vdev_tape_gradient_ex(t, loss, vars, 2, gn, VDEV_UNCONNECTED_NONE));
    CHECK(gn[0] != NULL && gn[1] == NULL);
    float gx2[6];
    CHECK_OK(vdev_tensor_to_host(gn[0], gx2, sizeof gx2));
    CHECK(memcmp(gx, gx2, sizeof gx) == 0);
    CHECK_OK(vdev_tape_gradient_ex(t, loss, vars, 2, gn, VDEV_UNCONNECTED_ZERO));
    CHECK(gn[1] != NULL && vdev_tensor_dim(gn[1], 1) == 2);
    gn[1] = u;
    CHECK_STATUS(vdev_tape_gradient_ex(t, loss, vars, 2, gn, (enum vdev_unconnected)2),
                 VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tape_gradient_ex: unconnected is 2, not "
                                 "VDEV_UNCONNECTED_ZERO or VDEV_UNCONNECTED_NONE");
    CHECK(gn[0] == NULL && gn[1] == NULL);
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
    vdev_tensor_free(u);
    CHECK_OK(vdev_device_pop());
}

/* A loss of several elements stands for their sum, as in TensorFlow: the
 * gradients of y = x @ w equal those of sum(y), bit for bit (the same ops
 * after the seed); an int32 loss is refused naming its dtype. */
static void test_nonscalar_loss(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    float hx[6] = {1, -2, 3, 0.5f, -0.25f, 4}, hw[6] = {0.5f, 1, -1, 2, 0.25f, -3};
    vdev_tensor_t *x = var_from(hx, 2, 3), *w = var_from(hw, 3, 2);
    vdev_scope_begin();
    vdev_tensor_t *vars[2] = {x, w}, *g[2], *gs[2];
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *y = vdev_matmul(x, w, false, false);
    CHECK_OK(vdev_tape_gradient(t, y, vars, 2, g));
    vdev_tape_end(t);
    t = vdev_tape_begin();
    vdev_tensor_t *ys = vdev_sum_all(vdev_matmul(x, w, false, false));
    CHECK_OK(vdev_tape_gradient(t, ys, vars, 2, gs));
    vdev_tape_end(t);
    for (int k = 0; k < 2; k++) {
        float a[6], b[6];
        CHECK_OK(vdev_tensor_to_host(g[k], a, sizeof a));
        CHECK_OK(vdev_tensor_to_host(gs[k], b, sizeof b));
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    /* d sum(x @ w) / dx[i][j] = sum_k w[j][k]: row j of w summed */
    float gx[6];
    CHECK_OK(vdev_tensor_to_host(g[0], gx, sizeof gx));
    CHECK(gx[0] == 1.5f && gx[1] == 1.0f && gx[2] == -2.75f && gx[3] == 1.5f);
    int64_t s2[1] = {2};
    vdev_tensor_t *li = vdev_tensor_zeros(s2, 1, VDEV_I32);
    t = vdev_tape_begin();
    CHECK_STATUS(vdev_tape_gradient(t, li, vars, 2, g), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tape_gradient: the loss is int32; gradients are of float "
                                 "tensors");
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
    vdev_tensor_free(w);
    CHECK_OK(vdev_device_pop());
}

/* The gradient of a broadcast row (a bias) sums many rows: 100,000 rows of
 * 1/400,000 each must give 0.25 to float precision (a float running sum
 * was 1e-3 off here, and stopped growing at 2^24). */
static void test_bias_gradient_many_rows(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    const int64_t R = 100000;
    int64_t xs[2] = {R, 4}, bs[1] = {4};
    vdev_tensor_t *b = vdev_variable(vdev_tensor_zeros(bs, 1, VDEV_F32));
    vdev_scope_begin();
    vdev_tensor_t *x = vdev_tensor_fill(xs, 2, VDEV_F32, 0.5f), *g;
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_mean_all(vdev_add(x, b));
    CHECK_OK(vdev_tape_gradient(t, loss, &b, 1, &g));
    vdev_tape_end(t);
    float h[4];
    CHECK_OK(vdev_tensor_to_host(g, h, sizeof h));
    for (int k = 0; k < 4; k++)
        CHECK(fabs(h[k] - 0.25) <= 0.25 * 1e-6);
    vdev_scope_end();
    vdev_tensor_free(b);
    CHECK_OK(vdev_device_pop());
}

/* A summed gradient handed out inside nested scopes and kept past the inner
 * one stays valid in the outer scope and is freed by it; a variable asked
 * for twice gets the same values twice, each its own tensor. */
static void test_kept_gradient(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    uint64_t base = mi.bytes_in_use;
    float h[6] = {1, -2, 3, 0.5f, -0.25f, 4};
    vdev_tensor_t *x = var_from(h, 2, 3);
    CHECK_OK(vdev_scope_begin());
    CHECK_OK(vdev_scope_begin());
    vdev_tape_t *t = vdev_tape_begin();
    /* L = sum(x * x) + sum(2 x): the gradient is a sum of several ops' */
    vdev_tensor_t *loss =
        vdev_add(vdev_sum_all(vdev_mul(x, x)), vdev_sum_all(vdev_mul_scalar(x, 2)));
    vdev_tensor_t *vars[2] = {x, x}, *g[2] = {NULL, NULL};
    CHECK_OK(vdev_tape_gradient(t, loss, vars, 2, g));
    vdev_tape_end(t);
    CHECK(g[0] != NULL && g[1] != NULL && g[0] != g[1]);
    vdev_keep(g[0]);
    vdev_scope_end();
    float gx[6];
    CHECK_OK(vdev_tensor_to_host(g[0], gx, sizeof gx));
    int ok = 1;
    for (int i = 0; i < 6; i++)
        ok = ok && gx[i] == 2 * h[i] + 2;
    CHECK(ok);
    CHECK(vdev_tensor_ndim(g[1]) == -1); /* not kept: freed with the inner scope */
    vdev_scope_end();
    CHECK(vdev_tensor_ndim(g[0]) == -1);
    vdev_tensor_free(x);
    CHECK_OK(vdev_memory_info(dev, &mi));
    CHECK_EQ_U64(mi.bytes_in_use, base);
    CHECK_OK(vdev_device_pop());
}

/* Forward on GPU:1, gradient asked for under a CPU:0 scope: every gradient
 * op runs on GPU:1 and the gradients live there. */
static void test_gradient_device(void)
{
    float h[12];
    for (int i = 0; i < 12; i++)
        h[i] = rng_uniform(-1, 1);
    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *w = var_from(h, 3, 4);
    vdev_scope_begin();
    int64_t sx[2] = {2, 3};
    vdev_tensor_t *xin = vdev_tensor_uniform(sx, 2, -1, 1, 5);
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_mean_all(vdev_relu(vdev_matmul(xin, w, false, false)));
    CHECK_OK(vdev_device_pop());
    vdev_placement_reset();
    CHECK_OK(vdev_device_push("CPU:0"));
    vdev_tensor_t *g = NULL;
    CHECK_OK(vdev_tape_gradient(t, loss, &w, 1, &g));
    CHECK_OK(vdev_device_pop());
    vdev_tape_end(t);
    CHECK_STR(vdev_tensor_device(g), "/device:GPU:1");
    CHECK(vdev_placement_op_count("ReluGrad", "/device:GPU:1") == 1);
    CHECK(vdev_placement_op_count("MatMul", "/device:GPU:1") >= 1);
    CHECK(vdev_placement_op_count(NULL, "/device:CPU:0") == 0);
    CHECK(vdev_placement_op_count(NULL, "/device:GPU:0") == 0);
    vdev_scope_end();
    vdev_tensor_free(w);
}

/* A copy between devices (vdev_tensor_to) passes the gradient back, to the
 * source's device, as TensorFlow's copies do; it is a copy, not an op (no
 * Identity counted, its bytes counted as copied). vdev_stop_gradient's copy
 * stops it. w = [1, 2, 3] on GPU:0, h = w*w: sum((h on GPU:1)^2) has the
 * gradient 4w^3, through CPU:0 and back too; sum(stop(h) * h) has 2w^3. */
/* Ends tape t after checking that d loss / d w is k w^3 (w = [1, 2, 3]),
 * handed back on w's device, GPU:0. */
static void check_cubed(vdev_tape_t *t, const vdev_tensor_t *loss, vdev_tensor_t *w, float k)
{
    vdev_tensor_t *g = NULL;
    CHECK_OK(vdev_tape_gradient(t, loss, &w, 1, &g));
    vdev_tape_end(t);
    float got[3];
    CHECK_OK(vdev_tensor_to_host(g, got, sizeof got));
    CHECK(got[0] == k && got[1] == 8 * k && got[2] == 27 * k);
    CHECK_STR(vdev_tensor_device(g), "/device:GPU:0");
}

static void test_copy_gradient(void)
{
    static const float w0[3] = {1, 2, 3};
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *w = var_from(w0, 1, 3);
    CHECK_OK(vdev_device_pop());
    static const char *const via[2][2] = {{"GPU:1", NULL}, {"CPU:0", "GPU:1"}};
    for (int k = 0; k < 2; k++) {
        vdev_scope_begin();
        vdev_placement_reset();
        vdev_tape_t *t = vdev_tape_begin();
        vdev_tensor_t *h = vdev_mul(w, w);
        vdev_tensor_t *h1 = vdev_tensor_to(h, via[k][0]);
        if (via[k][1])
            h1 = vdev_tensor_to(h1, via[k][1]);
        CHECK_STR(vdev_tensor_device(h1), "/device:GPU:1");
        CHECK(vdev_placement_op_count("Identity", NULL) == 0); /* a copy, not an op */
        check_cubed(t, vdev_sum_all(vdev_mul(h1, h1)), w, 4);
        CHECK_EQ_U64(vdev_placement_bytes_copied("GPU:0", via[k][0]), 12);
        vdev_scope_end();
    }
    vdev_scope_begin();
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *h = vdev_mul(w, w);
    vdev_tensor_t *s = vdev_stop_gradient(h);
    CHECK_STR(vdev_tensor_device(s), "/device:GPU:0");
    check_cubed(t, vdev_sum_all(vdev_mul(s, h)), w, 2);
    /* A copy made while no tape records needs no gradient. */
    vdev_tensor_t *c = vdev_tensor_to(w, "GPU:1"), *g = NULL;
    t = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_sum_all(vdev_mul(c, c));
    CHECK_OK(vdev_tape_gradient_ex(t, loss, &w, 1, &g, VDEV_UNCONNECTED_NONE));
    CHECK(g == NULL); /* not reached */
    vdev_tape_end(t);
    CHECK(vdev_stop_gradient(NULL) == NULL);
    vdev_scope_end();
    vdev_tensor_free(w);
}

/* One tape records per thread at a time; bad losses fail cleanly with
 * every gradient NULL. */
static void test_tape_twice(void)
{
    vdev_tape_t *t = vdev_tape_begin();
    CHECK(t != NULL);
    vdev_clear_error();
    CHECK(vdev_tape_begin() == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_MSG("already recording");
    vdev_tape_end(t);
    t = vdev_tape_begin(); /* recording again once the first has ended */
    CHECK(t != NULL);
    vdev_tape_end(t);
    /* a loss that is not float */
    t = vdev_tape_begin();
    int64_t s[1] = {2};
    vdev_tensor_t *x = vdev_variable(vdev_tensor_ones(s, 1, VDEV_F32)), *g = NULL;
    vdev_scope_begin();
    g = x; /* must be set to NULL on failure */
    CHECK_STATUS(vdev_tape_gradient(t, vdev_tensor_zeros(s, 1, VDEV_I32), &x, 1, &g),
                 VDEV_ERR_INVALID_ARG);
    CHECK(g == NULL);
    vdev_scope_end();
    vdev_tape_end(t);
    vdev_tensor_free(x);
}

int main(void)
{
    rng_state = 0x9e3779b97f4a7c15ull; /* this test's own seed (ops_rng.h's generator) */
    /* the cpu backend alone */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    all_cases("CPU:0");
    test_used_twice_and_unused("CPU:0");
    test_nonscalar_loss("CPU:0");
    test_bias_gradient_many_rows("CPU:0");
    test_kept_gradient("CPU:0");
    test_tape_twice();
    CHECK_NO_LEAK("CPU:0");

    /* two simulated GPUs: the gradients run on the sim worker threads */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    all_cases("GPU:0");
    test_used_twice_and_unused("GPU:1");
    test_nonscalar_loss("GPU:0");
    test_bias_gradient_many_rows("GPU:1");
    test_kept_gradient("GPU:1");
    test_gradient_device();
    test_copy_gradient();
    CHECK_NO_LEAK("GPU:0");
    CHECK_NO_LEAK("GPU:1");
    CHECK_NO_LEAK("CPU:0");
    vdev_shutdown();
    return check_done();
}
