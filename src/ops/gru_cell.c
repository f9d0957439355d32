/* gru_cell.c — the fused GRU cell of Keras's GRU with reset_after (TensorFlow
 * 2's default, and cuDNN's arithmetic): two forward ops and their two
 * gradient ops, so that a time step is its recurrent product, the bias and
 * two ops instead of some eighteen. xw [..., 3u] holds the step's input
 * products with the input bias, inner [..., 3u] the recurrent product with
 * the recurrent bias, each in Keras's gate order z, r, h:
 *   GRUGates       (xw, inner) -> g = [z, r, hh]: z = s(xw_z + inner_z),
 *                  r = s(xw_r + inner_r), hh = tanh(xw_h + r inner_h)
 *   GRUGatesGrad   (dg, g, inner), i[0] 0: dxw, 1: dinner
 *   GRUCellOutput  (g, h_prev [..., u]) -> h = z h_prev + (1 - z) hh
 *   GRUCellGrad    (dh, g, h_prev), i[0] 0: dg (dz, 0, dhh), 1: dh_prev
 * Each value is the one the ops it fuses compute, rounding for rounding: the
 * sums and products in float, as AddV2, Sub and Mul round them, s and tanh as
 * the backend's Sigmoid and Tanh (the reference's in double, rounded once;
 * the host's float formulas of kernels_fast.c), and SigmoidGrad's and
 * TanhGrad's formulas on the saved gates; so the forward ops give the
 * composed ops' bits, and so do the gradients but for the sign of a zero
 * sum. */
#include "ops/impl.h"
#include "ops/parallel.h"

#include <math.h>

#define IN_F(k) ((const float *)a->in[k])
#define OUT_F(k) ((float *)a->out[k])

/* ---- shape rules ---- */

static int same_shape(const struct vdev_kernel_args *a, int i, int j)
{
    if (a->in_ndim[i] != a->in_ndim[j])
        return 0;
    for (int d = 0; d < a->in_ndim[i]; d++)
        if (a->in_shape[i][d] != a->in_shape[j][d])
            return 0;
    return 1;
}

static void out_like(struct vdev_kernel_args *a, int k)
{
    a->n_out = 1;
    a->out_ndim[0] = a->in_ndim[k];
    memcpy(a->out_shape[0], a->in_shape[k], sizeof a->out_shape[0]);
    a->out_dtype[0] = VDEV_F32;
}

/* All f32; inputs from k0 of one shape [..., 3u]; input kx (if any) [..., u]
 * with the same leading axes. */
static enum vdev_status check(struct vdev_kernel_args *a, int k0, int kx, const char *what)
{
    for (int k = 0; k < a->n_in; k++)
        if (a->in_dtype[k] != VDEV_F32)
            return vdev_dtype_error(a, k, VDEV_F32);
    int nd = a->in_ndim[k0], ok = nd >= 1 && a->in_shape[k0][nd - 1] % 3 == 0;
    for (int k = k0 + 1; ok && k < a->n_in; k++)
        ok = k == kx || same_shape(a, k0, k);
    if (ok && kx >= 0) {
        ok = a->in_ndim[kx] == nd && 3 * a->in_shape[kx][nd - 1] == a->in_shape[k0][nd - 1];
        for (int d = 0; ok && d < nd - 1; d++)
            ok = a->in_shape[kx][d] == a->in_shape[k0][d];
    }
    return ok ? VDEV_OK : vdev_shape_error(a, what);
}

/* GRUGates: (xw, inner), one shape [..., 3u] -> that shape. */
enum vdev_status vdev_shape_gru_gates(struct vdev_kernel_args *a)
{
    enum vdev_status st = check(a, 0, -1, "the gates' inputs must have one shape, a last axis of "
                                          "3 units: z, r, h");
    if (st == VDEV_OK)
        out_like(a, 0);
    return st;
}

/* GRUGatesGrad: (dg, g, inner), one shape -> that shape. */
enum vdev_status vdev_shape_gru_gates_grad(struct vdev_kernel_args *a)
{
    if (a->i[0] < 0 || a->i[0] > 1)
        return vdev_shape_error(a, "i[0] must be 0 or 1");
    enum vdev_status st = check(a, 0, -1, "dg, the gates and inner must have one shape, a last "
                                          "axis of 3 units");
    if (st == VDEV_OK)
        out_like(a, 0);
    return st;
}

/* GRUCellOutput: (g [..., 3u], h_prev [..., u]) -> h_prev's shape. */
enum vdev_status vdev_shape_gru_cell(struct vdev_kernel_args *a)
{
    enum vdev_status st = check(a, 0, 1, "the gates must have h's shape with a last axis 3 "
                                         "times h's: z, r, h");
    if (st == VDEV_OK)
        out_like(a, 1);
    return st;
}

/* GRUCellGrad: (dh, g, h_prev) -> g's shape (i[0] 0) or h's (1). */
enum vdev_status vdev_shape_gru_cell_grad(struct vdev_kernel_args *a)
{
    if (a->i[0] < 0 || a->i[0] > 1)
        return vdev_shape_error(a, "i[0] must be 0 or 1");
    enum vdev_status st = check(a, 1, 2, "the gates must have h's shape with a last axis 3 "
                                         "times h's: z, r, h");
    if (st == VDEV_OK && !same_shape(a, 0, 2))
        st = vdev_shape_error(a, "dh must have h's shape");
    if (st == VDEV_OK)
        out_like(a, a->i[0] == 0 ? 1 : 2);
    return st;
}

/* ---- the kernels' loops, over rows [lo, hi) of u units ---- */

struct cell {
    const struct vdev_kernel_args *a;
    int64_t u;
    int fast; /* GRUGates: the host's functions, else the reference's */
};

static float sig(float p, int fast)
{
    if (fast) /* kernels_fast.c's */
        return 1.0f / (1.0f + expf(-p));
    double u = p; /* kernels_ref.c's */
    if (u >= 0.0)
        return (float)(1.0 / (1.0 + exp(-u)));
    double e = exp(u);
    return (float)(e / (1.0 + e));
}

static float th(float p, int fast) { return fast ? tanhf(p) : (float)tanh((double)p); }

static float sigmoid_grad(float dy, float y) { return (float)((double)dy * y * (1.0 - (double)y)); }
static float tanh_grad(float dy, float y) { return (float)((double)dy * (1.0 - (double)y * y)); }

static void gates_part(void *vc, int64_t lo, int64_t hi)
{
    const struct cell *c = vc;
    const struct vdev_kernel_args *a = c->a;
    const int64_t u = c->u;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = IN_F(0) + r * 3 * u, *in = IN_F(1) + r * 3 * u;
        float *g = OUT_F(0) + r * 3 * u;
        for (int64_t j = 0; j < u; j++) {
            float pz = x[j] + in[j], pr = x[u + j] + in[u + j];
            float z = sig(pz, c->fast), rg = sig(pr, c->fast);
            float rh = rg * in[2 * u + j];
            float ph = x[2 * u + j] + rh;
            g[j] = z;
            g[u + j] = rg;
            g[2 * u + j] = th(ph, c->fast);
        }
    }
}

/* dg -> part 0 dxw = [dpz, dpr, dph], part 1 dinner = [dpz, dpr, dph r]:
 * dph = TanhGrad(dhh, hh), dpr = SigmoidGrad(dr + dph inner_h, r), dpz =
 * SigmoidGrad(dz, z). */
static void gates_grad_part(void *vc, int64_t lo, int64_t hi)
{
    const struct cell *c = vc;
    const struct vdev_kernel_args *a = c->a;
    const int64_t u = c->u;
    const int part = (int)a->i[0];
    for (int64_t r = lo; r < hi; r++) {
        const float *dg = IN_F(0) + r * 3 * u, *g = IN_F(1) + r * 3 * u;
        const float *in = IN_F(2) + r * 3 * u;
        float *o = OUT_F(0) + r * 3 * u;
        for (int64_t j = 0; j < u; j++) {
            float dph = tanh_grad(dg[2 * u + j], g[2 * u + j]);
            float drh = dph * in[2 * u + j];
            float dr = dg[u + j] + drh;
            o[j] = sigmoid_grad(dg[j], g[j]);
            o[u + j] = sigmoid_grad(dr, g[u + j]);
            o[2 * u + j] = part == 0 ? dph : dph * g[u + j];
        }
    }
}

static void output_part(void *vc, int64_t lo, int64_t hi)
{
    const struct cell *c = vc;
    const struct vdev_kernel_args *a = c->a;
    const int64_t u = c->u;
    for (int64_t r = lo; r < hi; r++) {
        const float *g = IN_F(0) + r * 3 * u, *hp = IN_F(1) + r * u;
        float *o = OUT_F(0) + r * u;
        for (int64_t j = 0; j < u; j++) {
            float zh = g[j] * hp[j];
            float omz = 1.0f - g[j];
            float oh = omz * g[2 * u + j];
            o[j] = zh + oh;
        }
    }
}

/* dh -> part 0 dg = [dh h_prev - dh hh, 0, dh (1 - z)], part 1 dh_prev = dh z. */
static void cell_grad_part(void *vc, int64_t lo, int64_t hi)
{
    const struct cell *c = vc;
    const struct vdev_kernel_args *a = c->a;
    const int64_t u = c->u;
    const int part = (int)a->i[0];
    for (int64_t r = lo; r < hi; r++) {
        const float *d = IN_F(0) + r * u, *g = IN_F(1) + r * 3 * u, *hp = IN_F(2) + r * u;
        float *o = OUT_F(0) + (part == 0 ? r * 3 * u : r * u);
        for (int64_t j = 0; j < u; j++) {
            if (part == 1) {
                o[j] = d[j] * g[j];
                continue;
            }
            float dzh = d[j] * hp[j];
            float domz = d[j] * g[2 * u + j];
            float omz = 1.0f - g[j];
            o[j] = dzh + -domz;
            o[u + j] = 0.0f;
            o[2 * u + j] = d[j] * omz;
        }
    }
}

/* ---- kernels ---- */

/* A part of GRUGates: some 6 ns of sigmoids and tanh an element, so 4096
 * are worth a thread; the others split at VDEV_PARALLEL_MIN elements. */
#define GATES_MIN 4096

/* u a third of input kg's last axis; the rows its leading axes. */
static void run(const struct vdev_kernel_args *a, int fast, int kg, int64_t min,
                void (*fn)(void *, int64_t, int64_t))
{
    struct cell c = {a, a->in_shape[kg][a->in_ndim[kg] - 1] / 3, fast};
    if (c.u == 0)
        return;
    int64_t rows = vdev_args_numel(a, kg) / (3 * c.u);
    if (rows == 0)
        return;
    if (fast)
        vdev_parallel_for_min(rows, (min + 3 * c.u - 1) / (3 * c.u), fn, &c);
    else
        fn(&c, 0, rows);
}

KERNEL(vdev_ref_gru_gates) { run(a, 0, 0, GATES_MIN, gates_part); }
KERNEL(vdev_fast_gru_gates) { run(a, 1, 0, GATES_MIN, gates_part); }
KERNEL(vdev_ref_gru_gates_grad) { run(a, 0, 0, VDEV_PARALLEL_MIN, gates_grad_part); }
KERNEL(vdev_fast_gru_gates_grad) { run(a, 1, 0, VDEV_PARALLEL_MIN, gates_grad_part); }
KERNEL(vdev_ref_gru_cell_output) { run(a, 0, 0, VDEV_PARALLEL_MIN, output_part); }
KERNEL(vdev_fast_gru_cell_output) { run(a, 1, 0, VDEV_PARALLEL_MIN, output_part); }
KERNEL(vdev_ref_gru_cell_grad) { run(a, 0, 1, VDEV_PARALLEL_MIN, cell_grad_part); }
KERNEL(vdev_fast_gru_cell_grad) { run(a, 1, 1, VDEV_PARALLEL_MIN, cell_grad_part); }

/* ---- gradients ---- */

static enum vdev_status status_of(const struct vdev_tens *t)
{
    if (t)
        return VDEV_OK;
    enum vdev_status st = vdev_last_status();
    return st != VDEV_OK ? st : vdev_error(VDEV_ERR_INTERNAL, "a gradient op failed silently");
}

/* Each input's gradient one grad op (part = the input), where needed:
 * GRUGates' reads its output and inner, GRUCellOutput's its inputs. */
GRAD(vdev_grad_gru)
{
    const int gates = g->op == VDEV_OP_GRU_GATES;
    for (int k = 0; k < 2; k++) {
        if (!((g->need >> k) & 1u))
            continue;
        struct vdev_op_params p;
        memset(&p, 0, sizeof p);
        p.i[0] = k;
        const struct vdev_tens *in[3] = {g->dout, gates ? g->out : g->in[0], g->in[1]};
        din[k] = vdev_op_exec(gates ? VDEV_OP_GRU_GATES_GRAD : VDEV_OP_GRU_CELL_GRAD, in, 3, &p);
        enum vdev_status st = status_of(din[k]);
        if (st != VDEV_OK)
            return st;
    }
    return VDEV_OK;
}

/* ---- the public functions ---- */

VDEV_API vdev_tensor_t *vdev_gru_gates(const vdev_tensor_t *xw, const vdev_tensor_t *inner)
{
    const vdev_tensor_t *in[2] = {xw, inner};
    return vdev_op_run(VDEV_OP_GRU_GATES, in, 2, NULL);
}

VDEV_API vdev_tensor_t *vdev_gru_cell_output(const vdev_tensor_t *gates,
                                             const vdev_tensor_t *h_prev)
{
    const vdev_tensor_t *in[2] = {gates, h_prev};
    return vdev_op_run(VDEV_OP_GRU_CELL_OUTPUT, in, 2, NULL);
}
