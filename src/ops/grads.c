/* grads.c — the gradient of every differentiable op, written with ops.
 *
 * The tape (src/autograd/tape.c) calls these inside a device scope set to the
 * forward op's device and a tensor scope of their own, so every op here runs
 * where the forward op ran and every temporary is freed when the function
 * returns; only din[k] survive (the tape keeps them). g->in[k] are the inputs
 * as the kernel saw them (already on the op's device), g->out the output,
 * g->dout the gradient of the output (the output's shape), g->p the
 * parameters the public function packed (without the broadcast mode that the
 * shape rule adds in i[3]: that is recomputed from the shapes here).
 *
 * din[k] is always a new tensor made here (a view or an op's output), never
 * dout itself, because the tape takes ownership of it. It stays NULL for an
 * input with no gradient (the labels of the cross-entropy), and for an input
 * whose bit in g->need is clear where that saves work (a matrix product, a
 * reduction of a broadcast operand): the tape needs no gradient there.
 *
 * Formulas (G = dout; reduce_to(T, x): T summed over the dimensions along
 * which x was broadcast, then given x's shape, as TensorFlow's
 * reshape(reduce_sum(T, rx), sx)):
 *   matmul  C = op(A) op(B): dA, dB by the four transpose cases below
 *   add/sub dA = reduce_to(G, a), dB = ±reduce_to(G, b)
 *   mul     dA = reduce_to(G b, a), dB = reduce_to(G a, b)
 *   div     dA = reduce_to(G / b, a), dB = -reduce_to(G y / b, b)
 *   max/min dA = reduce_to(G where a >= b (<=), a), dB = reduce_to(G elsewhere, b)
 *   where   dX = reduce_to(G where c, x), dY = reduce_to(G where not c, y)
 *   floormod dX = reduce_to(G, x), dY = -reduce_to(G floordiv(x, y), y)
 *   max/min over an axis: G shared among the elements equal to the result
 *   abs     dA = G sign(x); sign: zeros
 *   pow     dA = (G p) x^(p-1) (TensorFlow's grad * y * pow(x, y - 1))
 *   sqrt    dA = (0.5 G) / y (TensorFlow's SqrtGrad)
 *   exp     dA = G y; log dA = G / x
 *   erf     dA = G (2/sqrt(pi) exp(-x^2)) (TensorFlow's _ErfGrad)
 *   softplus dA = G / (exp(-x) + 1) (TensorFlow's SoftplusGrad)
 *   sum     dA = broadcast(G); mean dA = broadcast(G) / len
 *   mse     dpred = G 2 (pred - target) / n, dtarget = -dpred */
#include "ops/impl.h"

#include <string.h>

/* ---- helpers ---- */

/* The status after an op that returned t: VDEV_OK, or the op's error. */
static enum vdev_status status_of(const struct vdev_tens *t)
{
    if (t)
        return VDEV_OK;
    enum vdev_status st = vdev_last_status();
    return st != VDEV_OK ? st : vdev_error(VDEV_ERR_INTERNAL, "a gradient op failed silently");
}

/* 1 when the caller needs input k's gradient. */
#define NEED(k) ((g->need >> (k)) & 1u)

/* Both gradients of a two-input op, each checked where it was needed. */
static enum vdev_status status2_need(const struct vdev_grad_args *g, struct vdev_tens **din)
{
    enum vdev_status st = NEED(0) ? status_of(din[0]) : VDEV_OK;
    return st != VDEV_OK || !NEED(1) ? st : status_of(din[1]);
}

/* Ops on library tensors (a NULL input gives NULL, the error kept). */
static struct vdev_tens *op1(enum vdev_op op, const struct vdev_tens *x,
                             const struct vdev_op_params *p)
{
    const struct vdev_tens *in[1] = {x};
    return vdev_op_exec(op, in, 1, p);
}

static struct vdev_tens *op2(enum vdev_op op, const struct vdev_tens *x, const struct vdev_tens *y,
                             const struct vdev_op_params *p)
{
    const struct vdev_tens *in[2] = {x, y};
    return vdev_op_exec(op, in, 2, p);
}

static struct vdev_tens *op3(enum vdev_op op, const struct vdev_tens *x, const struct vdev_tens *y,
                             const struct vdev_tens *z)
{
    const struct vdev_tens *in[3] = {x, y, z};
    return vdev_op_exec(op, in, 3, NULL);
}

static struct vdev_tens *matmul(const struct vdev_tens *a, const struct vdev_tens *b, int ta,
                                int tb)
{
    struct vdev_op_params p = {.i = {ta, tb}};
    return op2(VDEV_OP_MATMUL, a, b, &p);
}

static struct vdev_tens *mul(const struct vdev_tens *a, const struct vdev_tens *b)
{
    return op2(VDEV_OP_MUL, a, b, NULL);
}

static struct vdev_tens *divide(const struct vdev_tens *a, const struct vdev_tens *b)
{
    return op2(VDEV_OP_DIV, a, b, NULL);
}

static struct vdev_tens *scale(const struct vdev_tens *a, float s)
{
    struct vdev_op_params p = {.f = {s}};
    return op1(VDEV_OP_MUL_SCALAR, a, &p);
}

/* dout passed on unchanged, as a new tensor the tape can own: a view when it
 * lives on the op's device, else a copy there. */
static struct vdev_tens *pass(const struct vdev_tens *dout)
{
    struct vdev_ldev *here = vdev_placement_scope_device();
    if (!here || here == dout->dev)
        return vdev_tens_view(dout, dout->shape, dout->ndim);
    return op1(VDEV_OP_IDENTITY, dout, NULL);
}

/* dy (the output's shape) summed down to input x's shape for a broadcasting
 * binary op: dy itself when the shapes are equal, a view with x's shape when
 * only leading 1s differ (the same elements), else REDUCE_ROWS. */
static struct vdev_tens *reduce_to(const struct vdev_tens *dy, const struct vdev_tens *x)
{
    if (!dy)
        return NULL;
    int same = dy->ndim == x->ndim;
    for (int d = 0; same && d < dy->ndim; d++)
        same = dy->shape[d] == x->shape[d];
    if (same)
        return pass(dy);
    if (dy->numel != x->numel)
        return op2(VDEV_OP_REDUCE_ROWS, dy, x, NULL);
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.f[0] = x->ndim;
    for (int d = 0; d < x->ndim; d++)
        p.i[d] = x->shape[d];
    return op1(VDEV_OP_RESHAPE, dy, &p);
}

/* ---- MATMUL ---- */

/* C = op(A) op(B), G = dC:
 *   C = A B      dA = G B^T      dB = A^T G
 *   C = A B^T    dA = G B        dB = G^T A
 *   C = A^T B    dA = B G^T      dB = A G
 *   C = A^T B^T  dA = B^T G^T    dB = G^T A^T */
GRAD(vdev_grad_matmul)
{
    const struct vdev_tens *A = g->in[0], *B = g->in[1], *G = g->dout;
    int ta = g->p.i[0] != 0, tb = g->p.i[1] != 0;
    int na = (int)NEED(0), nb = (int)NEED(1);
    if (!ta && !tb) {
        din[0] = na ? matmul(G, B, 0, 1) : NULL;
        din[1] = nb ? matmul(A, G, 1, 0) : NULL;
    } else if (!ta && tb) {
        din[0] = na ? matmul(G, B, 0, 0) : NULL;
        din[1] = nb ? matmul(G, A, 1, 0) : NULL;
    } else if (ta && !tb) {
        din[0] = na ? matmul(B, G, 0, 1) : NULL;
        din[1] = nb ? matmul(A, G, 0, 0) : NULL;
    } else {
        din[0] = na ? matmul(B, G, 1, 1) : NULL;
        din[1] = nb ? matmul(G, A, 1, 1) : NULL;
    }
    return status2_need(g, din);
}

/* The same four cases for each batch entry (BATCH_MATMUL); an operand
 * whose batch of 1 was broadcast gets its gradient summed over the batch. */
static struct vdev_tens *bmm(const struct vdev_tens *a, const struct vdev_tens *b, int ta, int tb)
{
    struct vdev_op_params p = {.i = {ta, tb}};
    return op2(VDEV_OP_BATCH_MATMUL, a, b, &p);
}

static struct vdev_tens *batch_sum_to(struct vdev_tens *d, const struct vdev_tens *x)
{
    if (!d || x->shape[0] != 1 || d->shape[0] == 1)
        return d;
    struct vdev_op_params p = {.i = {0, 1}}; /* axis 0, keepdims */
    return op1(VDEV_OP_SUM, d, &p);
}

GRAD(vdev_grad_batch_matmul)
{
    const struct vdev_tens *A = g->in[0], *B = g->in[1], *G = g->dout;
    int ta = g->p.i[0] != 0, tb = g->p.i[1] != 0;
    int na = (int)NEED(0), nb = (int)NEED(1);
    struct vdev_tens *da = NULL, *db = NULL;
    if (!ta && !tb) {
        da = na ? bmm(G, B, 0, 1) : NULL;
        db = nb ? bmm(A, G, 1, 0) : NULL;
    } else if (!ta && tb) {
        da = na ? bmm(G, B, 0, 0) : NULL;
        db = nb ? bmm(G, A, 1, 0) : NULL;
    } else if (ta && !tb) {
        da = na ? bmm(B, G, 0, 1) : NULL;
        db = nb ? bmm(A, G, 0, 0) : NULL;
    } else {
        da = na ? bmm(B, G, 1, 1) : NULL;
        db = nb ? bmm(G, A, 1, 1) : NULL;
    }
    din[0] = na ? batch_sum_to(da, A) : NULL;
    din[1] = nb ? batch_sum_to(db, B) : NULL;
    return status2_need(g, din);
}

/* ---- binary elementwise ---- */

GRAD(vdev_grad_add)
{
    din[0] = NEED(0) ? reduce_to(g->dout, g->in[0]) : NULL;
    din[1] = NEED(1) ? reduce_to(g->dout, g->in[1]) : NULL;
    return status2_need(g, din);
}

GRAD(vdev_grad_sub)
{
    din[0] = NEED(0) ? reduce_to(g->dout, g->in[0]) : NULL;
    din[1] = NEED(1) ? scale(reduce_to(g->dout, g->in[1]), -1.0f) : NULL;
    return status2_need(g, din);
}

GRAD(vdev_grad_mul)
{
    din[0] = NEED(0) ? reduce_to(mul(g->dout, g->in[1]), g->in[0]) : NULL;
    din[1] = NEED(1) ? reduce_to(mul(g->dout, g->in[0]), g->in[1]) : NULL;
    return status2_need(g, din);
}

/* TensorFlow's _MaximumMinimumGrad: the mask x >= y (Maximum) or x <= y
 * (Minimum) sends G to x where it holds and to y elsewhere (a NaN operand
 * fails the mask: y's), each share then summed to its input's shape. */
static enum vdev_status grad_extremum(const struct vdev_grad_args *g, struct vdev_tens **din,
                                      int minimum)
{
    for (int k = 0; k < 2; k++) {
        if (!NEED(k))
            continue;
        struct vdev_op_params p;
        memset(&p, 0, sizeof p);
        p.i[0] = minimum;
        p.i[1] = k;
        const struct vdev_tens *in[3] = {g->dout, g->in[0], g->in[1]};
        din[k] = reduce_to(vdev_op_exec(VDEV_OP_MAXMIN_GRAD, in, 3, &p), g->in[k]);
    }
    return status2_need(g, din);
}

GRAD(vdev_grad_maximum) { return grad_extremum(g, din, 0); }
GRAD(vdev_grad_minimum) { return grad_extremum(g, din, 1); }

/* SelectV2 and SelectByMask (c, x, y), TensorFlow's _SelectGradV2: dx =
 * reduce_to(where(c, G, 0), x), dy = reduce_to(where(c, 0, G), y); none for
 * the condition. (SelectByMask's x and y have G's shape: reduce_to passes
 * the share on.) */
GRAD(vdev_grad_select)
{
    enum vdev_status st = VDEV_OK;
    for (int k = 1; k < 3 && st == VDEV_OK; k++) {
        if (!NEED(k))
            continue;
        struct vdev_op_params p;
        memset(&p, 0, sizeof p);
        p.i[0] = k - 1;
        din[k] = reduce_to(op2(VDEV_OP_SELECT_MASK_GRAD, g->in[0], g->dout, &p), g->in[k]);
        st = status_of(din[k]);
    }
    return st;
}

/* FloorMod (x, y), TensorFlow's _FloorModGrad: dx = reduce_to(G, x), dy =
 * reduce_to(-G floordiv(x, y), y). */
GRAD(vdev_grad_floor_mod)
{
    const struct vdev_tens *x = g->in[0], *y = g->in[1];
    din[0] = NEED(0) ? reduce_to(g->dout, x) : NULL;
    din[1] = NEED(1) ? reduce_to(scale(mul(g->dout, op2(VDEV_OP_FLOOR_DIV, x, y, NULL)), -1.0f), y)
                     : NULL;
    return status2_need(g, din);
}

GRAD(vdev_grad_div)
{
    din[0] = NEED(0) ? reduce_to(divide(g->dout, g->in[1]), g->in[0]) : NULL;
    din[1] = NEED(1) ? scale(reduce_to(divide(mul(g->dout, g->out), g->in[1]), g->in[1]), -1.0f)
                     : NULL;
    return status2_need(g, din);
}

/* ---- unary elementwise ---- */

GRAD(vdev_grad_add_scalar)
{
    din[0] = pass(g->dout);
    return status_of(din[0]);
}

GRAD(vdev_grad_mul_scalar)
{
    din[0] = scale(g->dout, (float)g->p.f[0]);
    return status_of(din[0]);
}

/* d x^p = p x^(p-1), as TensorFlow's Pow gradient computes it in float:
 * (G p) pow(x, p - 1), with p - 1 rounded to float. So p = 0 gives 0 * x^-1:
 * zeros, but NaN at x = 0 (0 * inf) as in TensorFlow. p = 1 passes G on
 * (G 1 x^0 is G for every x, NaN included, since pow(x, 0) = 1). */
GRAD(vdev_grad_pow_scalar)
{
    float p = (float)g->p.f[0];
    if (p == 1.0f) {
        din[0] = pass(g->dout);
    } else {
        struct vdev_op_params pm1 = {.f = {p - 1.0f}};
        din[0] = mul(scale(g->dout, p), op1(VDEV_OP_POW_SCALAR, g->in[0], &pm1));
    }
    return status_of(din[0]);
}

/* y = sqrt(x): dA = (0.5 G) / y, TensorFlow's SqrtGrad (inf at x = 0). */
GRAD(vdev_grad_sqrt)
{
    din[0] = divide(scale(g->dout, 0.5f), g->out);
    return status_of(din[0]);
}

GRAD(vdev_grad_relu)
{
    din[0] = op2(VDEV_OP_RELU_GRAD, g->dout, g->in[0], NULL);
    return status_of(din[0]);
}

GRAD(vdev_grad_tanh)
{
    din[0] = op2(VDEV_OP_TANH_GRAD, g->dout, g->out, NULL);
    return status_of(din[0]);
}

GRAD(vdev_grad_sigmoid)
{
    din[0] = op2(VDEV_OP_SIGMOID_GRAD, g->dout, g->out, NULL);
    return status_of(din[0]);
}

GRAD(vdev_grad_exp)
{
    din[0] = mul(g->dout, g->out);
    return status_of(din[0]);
}

/* d erf(x) = 2/sqrt(pi) e^(-x^2), as TensorFlow's _ErfGrad: grad times
 * (the constant times exp(-square(x))). */
GRAD(vdev_grad_erf)
{
    const struct vdev_tens *x = g->in[0];
    struct vdev_op_params neg = {.f = {-1.0f}};
    din[0] = mul(g->dout, scale(op1(VDEV_OP_EXP, op1(VDEV_OP_MUL_SCALAR, mul(x, x), &neg), NULL),
                                1.1283791670955126f));
    return status_of(din[0]);
}

/* d softplus(x) = sigmoid(x), as TensorFlow's SoftplusGrad computes it:
 * grad / (exp(-x) + 1) (0 where exp(-x) overflows). */
GRAD(vdev_grad_softplus)
{
    struct vdev_op_params one = {.f = {1.0f}};
    din[0] = divide(g->dout,
                    op1(VDEV_OP_ADD_SCALAR, op1(VDEV_OP_EXP, scale(g->in[0], -1.0f), NULL), &one));
    return status_of(din[0]);
}

GRAD(vdev_grad_log)
{
    din[0] = divide(g->dout, g->in[0]);
    return status_of(din[0]);
}

GRAD(vdev_grad_softmax)
{
    din[0] = op2(VDEV_OP_SOFTMAX_GRAD, g->dout, g->out, NULL);
    return status_of(din[0]);
}

GRAD(vdev_grad_log_softmax)
{
    din[0] = op2(VDEV_OP_LOG_SOFTMAX_GRAD, g->dout, g->out, NULL);
    return status_of(din[0]);
}

/* ---- reductions ---- */

/* dout repeated along the reduced axis (or everywhere) to x's shape. */
static struct vdev_tens *spread(const struct vdev_grad_args *g)
{
    struct vdev_op_params p = {.i = {g->p.i[0]}};
    return op2(VDEV_OP_BROADCAST, g->dout, g->in[0], &p);
}

GRAD(vdev_grad_sum)
{
    din[0] = spread(g);
    return status_of(din[0]);
}

/* As sum, divided by the number of elements each output averaged. */
GRAD(vdev_grad_mean)
{
    const struct vdev_tens *x = g->in[0];
    int64_t len = x->numel, ax = g->p.i[0];
    if (ax != VDEV_AXIS_ALL) {
        if (ax < 0)
            ax += x->ndim;
        len = (ax >= 0 && ax < x->ndim) ? x->shape[ax] : 1;
    }
    /* len == 0: x is empty, so is its gradient; the scale does not matter. */
    din[0] = scale(spread(g), len ? (float)(1.0 / (double)len) : 0.0f);
    return status_of(din[0]);
}

/* Max and Min (extreme.c), TensorFlow's _MinOrMaxGrad: ind = (x == y
 * broadcast), dx = ind / (the count of ind over the axis, broadcast) * G
 * broadcast: ties share G, a row whose result is NaN gets 0/0. */
GRAD(vdev_grad_extreme)
{
    const struct vdev_tens *x = g->in[0];
    struct vdev_op_params bp, sp, cp;
    memset(&bp, 0, sizeof bp);
    bp.i[0] = g->p.i[0];
    sp = bp;
    sp.i[1] = g->p.i[1];
    memset(&cp, 0, sizeof cp);
    cp.i[0] = VDEV_F32;
    struct vdev_tens *ind = op1(VDEV_OP_CAST, op2(VDEV_OP_EQUAL, x,
                                                  op2(VDEV_OP_BROADCAST, g->out, x, &bp), NULL),
                                &cp);
    struct vdev_tens *cnt = op2(VDEV_OP_BROADCAST, op1(VDEV_OP_SUM, ind, &sp), x, &bp);
    din[0] = mul(divide(ind, cnt), op2(VDEV_OP_BROADCAST, g->dout, x, &bp));
    return status_of(din[0]);
}

/* Abs: G sign(x); Sign: zeros (TensorFlow's _SignGrad). */
GRAD(vdev_grad_abs)
{
    din[0] = mul(g->dout, op1(VDEV_OP_SIGN, g->in[0], NULL));
    return status_of(din[0]);
}

GRAD(vdev_grad_sign)
{
    const struct vdev_tens *x = g->in[0];
    din[0] = vdev_tens_filled(x->dev, VDEV_F32, x->shape, x->ndim, 0.0);
    return status_of(din[0]);
}

/* ---- layout ---- */

GRAD(vdev_grad_reshape)
{
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.f[0] = g->in[0]->ndim;
    for (int i = 0; i < g->in[0]->ndim; i++)
        p.i[i] = g->in[0]->shape[i];
    din[0] = op1(VDEV_OP_RESHAPE, g->dout, &p);
    return status_of(din[0]);
}

GRAD(vdev_grad_identity)
{
    din[0] = pass(g->dout);
    return status_of(din[0]);
}

/* Rows [b, b + n) of x: zeros of x's shape with dout in those rows. */
GRAD(vdev_grad_slice)
{
    struct vdev_op_params p = {.i = {g->p.i[0]}};
    din[0] = op2(VDEV_OP_SLICE_GRAD, g->dout, g->in[0], &p);
    return status_of(din[0]);
}

/* ---- losses ---- */

/* dtarget = -dpred: dpred is made even when only dtarget is needed. */
GRAD(vdev_grad_mse)
{
    struct vdev_tens *dpred = op3(VDEV_OP_MSE_GRAD, g->dout, g->in[0], g->in[1]);
    din[0] = NEED(0) ? dpred : NULL;
    din[1] = NEED(1) ? scale(dpred, -1.0f) : NULL;
    enum vdev_status st = status_of(dpred);
    return st != VDEV_OK ? st : status2_need(g, din);
}

/* The labels take no gradient: din[1] stays NULL. */
GRAD(vdev_grad_softmax_ce)
{
    din[0] = op3(VDEV_OP_SOFTMAX_CE_GRAD, g->dout, g->in[0], g->in[1]);
    return status_of(din[0]);
}
