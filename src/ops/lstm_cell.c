/* lstm_cell.c — the fused LSTM cell: three forward ops and their two
 * gradient ops, so that a recurrent layer's time step is its products, their
 * sum, LSTMGates, LSTMCellState, a Tanh and LSTMCellOutput instead of
 * thirteen ops, and its gradient some sixteen ops instead of twenty-five
 * (counted on a 20-step LSTM's backward pass).
 * z [..., 4u] holds the four gates' pre-activations in Keras's order (i, f,
 * g, o, each u wide; TensorFlow's LSTMBlockCell takes i, ci, f, o and gives
 * seven outputs, vdev's ops give one each):
 *   LSTMGates      (z) -> a = [s(z_i), s(z_f), tanh(z_g), s(z_o)]
 *   LSTMGatesGrad  (da, a) -> dz: da a (1 - a) on i, f, o; da (1 - a^2) on g
 *   LSTMCellState  (a, c_prev [..., u]) -> c = a_f c_prev + a_i a_g
 *   LSTMCellOutput (a, t [..., u]) -> h = a_o t, t = tanh(c) (the Tanh op)
 *   LSTMCellGrad   (dy, a, x), i[0] the part: 0 the state's da (dy = dc, x =
 *                  c_prev; the o quarter 0), 1 its dc_prev, 2 the output's da
 *                  (dy = dh, x = t; only the o quarter), 3 its dt.
 * Only LSTMGates computes a function (s and tanh as the backend's Sigmoid and
 * Tanh kernels do: the reference's in double, rounded once; the host's float
 * formulas of kernels_fast.c); the others are products and a sum in float,
 * as Mul and AddV2 round them, and SigmoidGrad's and TanhGrad's formulas on
 * the saved gates. So the ops give the bits of the ops they fuse (Sigmoid of
 * z, its slices, Tanh, Mul, AddV2), forward and backward: no value is
 * computed twice, and the gradient's sums add zeros to one term. */
#include "ops/impl.h"
#include "ops/parallel.h"

#include <math.h>

#define IN_F(k) ((const float *)a->in[k])
#define OUT_F(k) ((float *)a->out[k])

/* ---- shape rules ---- */

static enum vdev_status f32_inputs(const struct vdev_kernel_args *a)
{
    for (int k = 0; k < a->n_in; k++)
        if (a->in_dtype[k] != VDEV_F32)
            return vdev_dtype_error(a, k, VDEV_F32);
    return VDEV_OK;
}

static void out_like(struct vdev_kernel_args *a, int k)
{
    a->n_out = 1;
    a->out_ndim[0] = a->in_ndim[k];
    memcpy(a->out_shape[0], a->in_shape[k], sizeof a->out_shape[0]);
    a->out_dtype[0] = VDEV_F32;
}

/* Input k [..., 4u]: at least one axis, the last a multiple of 4. */
static int gates_shape(const struct vdev_kernel_args *a, int k)
{
    int nd = a->in_ndim[k];
    return nd >= 1 && a->in_shape[k][nd - 1] % 4 == 0;
}

/* LSTMGates: z -> z's shape. LSTMGatesGrad: (da, a), equal shapes -> a's. */
enum vdev_status vdev_shape_lstm_gates(struct vdev_kernel_args *a)
{
    enum vdev_status st = f32_inputs(a);
    if (st != VDEV_OK)
        return st;
    int ok = gates_shape(a, 0) && (a->n_in == 1 || a->in_ndim[1] == a->in_ndim[0]);
    for (int d = 0; ok && a->n_in == 2 && d < a->in_ndim[0]; d++)
        ok = a->in_shape[0][d] == a->in_shape[1][d];
    if (!ok)
        return vdev_shape_error(a, a->n_in == 1 ? "the last axis holds the gates i, f, g, o: a "
                                                  "multiple of 4"
                                                : "da must have a's shape, a multiple of 4 last");
    out_like(a, a->n_in - 1);
    return VDEV_OK;
}

/* The gates a (input ka) [..., 4u] and x (input kx) [..., u] with the same
 * leading dimensions. */
static enum vdev_status check_ax(const struct vdev_kernel_args *a, int ka, int kx)
{
    enum vdev_status st = f32_inputs(a);
    if (st != VDEV_OK)
        return st;
    int nd = a->in_ndim[ka], ok = nd >= 1 && a->in_ndim[kx] == nd;
    for (int d = 0; ok && d < nd - 1; d++)
        ok = a->in_shape[ka][d] == a->in_shape[kx][d];
    if (!ok || a->in_shape[ka][nd - 1] != 4 * a->in_shape[kx][nd - 1])
        return vdev_shape_error(a, "the gates must have c's shape with a last axis 4 times c's: "
                                   "i, f, g, o");
    return VDEV_OK;
}

/* LSTMCellState, LSTMCellOutput: (a, x) -> x's shape. */
enum vdev_status vdev_shape_lstm_cell(struct vdev_kernel_args *a)
{
    enum vdev_status st = check_ax(a, 0, 1);
    if (st == VDEV_OK)
        out_like(a, 1);
    return st;
}

/* LSTMCellGrad: (dy, a, x), dy with x's shape -> a's (parts 0, 2) or x's. */
enum vdev_status vdev_shape_lstm_cell_grad(struct vdev_kernel_args *a)
{
    if (a->i[0] < 0 || a->i[0] > 3)
        return vdev_shape_error(a, "i[0] must be 0, 1, 2 or 3");
    enum vdev_status st = check_ax(a, 1, 2);
    if (st != VDEV_OK)
        return st;
    int ok = a->in_ndim[0] == a->in_ndim[2];
    for (int d = 0; ok && d < a->in_ndim[0]; d++)
        ok = a->in_shape[0][d] == a->in_shape[2][d];
    if (!ok)
        return vdev_shape_error(a, "dy must have c's shape");
    out_like(a, a->i[0] == 0 || a->i[0] == 2 ? 1 : 2);
    return VDEV_OK;
}

/* ---- the kernels' loops, over rows [lo, hi) of u units (no division per
 * element: the gates of row r are a[r 4u ...] in four quarters) ---- */

struct cell {
    const struct vdev_kernel_args *a;
    int64_t u;       /* units: a quarter of the gates' last axis */
    int fast;        /* LSTMGates: the host's functions, else the reference's */
};

/* The reference's Sigmoid (kernels_ref.c): in double, rounded once. */
static float sig_ref(float x)
{
    double u = x;
    if (u >= 0.0)
        return (float)(1.0 / (1.0 + exp(-u)));
    double e = exp(u);
    return (float)(e / (1.0 + e));
}

static void gates_part(void *vc, int64_t lo, int64_t hi)
{
    const struct cell *c = vc;
    const struct vdev_kernel_args *a = c->a;
    const int64_t u = c->u, w = 4 * u;
    for (int64_t r = lo; r < hi; r++) {
        const float *z = IN_F(0) + r * w;
        float *o = OUT_F(0) + r * w;
        for (int64_t j = 0; j < w; j++) {
            const float p = z[j];
            const int tanh_gate = j >= 2 * u && j < 3 * u;
            if (c->fast) /* kernels_fast.c's Sigmoid and Tanh */
                o[j] = tanh_gate ? tanhf(p) : 1.0f / (1.0f + expf(-p));
            else
                o[j] = tanh_gate ? (float)tanh((double)p) : sig_ref(p);
        }
    }
}

/* SigmoidGrad's and TanhGrad's formulas (kernels_ref.c), in double. */
static void gates_grad_part(void *vc, int64_t lo, int64_t hi)
{
    const struct cell *c = vc;
    const struct vdev_kernel_args *a = c->a;
    const int64_t u = c->u, w = 4 * u;
    for (int64_t r = lo; r < hi; r++) {
        const float *dy = IN_F(0) + r * w, *y = IN_F(1) + r * w;
        float *o = OUT_F(0) + r * w;
        for (int64_t j = 0; j < w; j++)
            o[j] = j >= 2 * u && j < 3 * u
                       ? (float)((double)dy[j] * (1.0 - (double)y[j] * y[j]))
                       : (float)((double)dy[j] * y[j] * (1.0 - (double)y[j]));
    }
}

static void state_part(void *vc, int64_t lo, int64_t hi)
{
    const struct cell *c = vc;
    const struct vdev_kernel_args *a = c->a;
    const int64_t u = c->u;
    for (int64_t r = lo; r < hi; r++) {
        const float *gi = IN_F(0) + r * 4 * u, *gf = gi + u, *gg = gi + 2 * u;
        const float *cp = IN_F(1) + r * u;
        float *o = OUT_F(0) + r * u;
        for (int64_t j = 0; j < u; j++) {
            float fc = gf[j] * cp[j];
            float ig = gi[j] * gg[j];
            o[j] = fc + ig;
        }
    }
}

static void output_part(void *vc, int64_t lo, int64_t hi)
{
    const struct cell *c = vc;
    const struct vdev_kernel_args *a = c->a;
    const int64_t u = c->u;
    for (int64_t r = lo; r < hi; r++) {
        const float *go = IN_F(0) + r * 4 * u + 3 * u, *t = IN_F(1) + r * u;
        float *o = OUT_F(0) + r * u;
        for (int64_t j = 0; j < u; j++)
            o[j] = go[j] * t[j];
    }
}

/* The parts; 0 and 2 write all four quarters of their rows' gates, as Mul's
 * gradient and the slices' zeros. */
static void grad_part(void *vc, int64_t lo, int64_t hi)
{
    const struct cell *c = vc;
    const struct vdev_kernel_args *a = c->a;
    const int64_t u = c->u;
    const int part = (int)a->i[0];
    for (int64_t r = lo; r < hi; r++) {
        const float *d = IN_F(0) + r * u, *g = IN_F(1) + r * 4 * u, *x = IN_F(2) + r * u;
        float *o = OUT_F(0) + (part == 0 || part == 2 ? r * 4 * u : r * u);
        switch (part) {
        case 0: /* dc -> da_i = dc a_g, da_f = dc c_prev, da_g = dc a_i, da_o = 0 */
            for (int64_t j = 0; j < u; j++) {
                o[j] = d[j] * g[2 * u + j];
                o[u + j] = d[j] * x[j];
                o[2 * u + j] = d[j] * g[j];
                o[3 * u + j] = 0.0f;
            }
            break;
        case 1: /* dc -> dc_prev = dc a_f */
            for (int64_t j = 0; j < u; j++)
                o[j] = d[j] * g[u + j];
            break;
        case 2: /* dh -> da_o = dh t, the others 0 */
            for (int64_t j = 0; j < u; j++) {
                o[j] = o[u + j] = o[2 * u + j] = 0.0f;
                o[3 * u + j] = d[j] * x[j];
            }
            break;
        default: /* dh -> dt = dh a_o */
            for (int64_t j = 0; j < u; j++)
                o[j] = d[j] * g[3 * u + j];
            break;
        }
    }
}

/* ---- kernels: the reference's one pass, the host's split over the cores
 * by rows, a part at least `min` gate elements ---- */

/* A part of LSTMGates: its sigmoids and tanhs cost some 6 ns an element in
 * float (libm's scalar expf and tanhf), so 4096 of them are worth a thread. */
#define GATES_MIN 4096

/* u a quarter of input kg's last axis; the rows its leading axes. */
static void run_min(const struct vdev_kernel_args *a, int fast, int kg, int64_t min,
                    void (*fn)(void *, int64_t, int64_t))
{
    struct cell c = {a, a->in_shape[kg][a->in_ndim[kg] - 1] / 4, fast};
    if (c.u == 0)
        return;
    int64_t rows = vdev_args_numel(a, kg) / (4 * c.u);
    if (rows == 0)
        return;
    if (fast)
        vdev_parallel_for_min(rows, (min + 4 * c.u - 1) / (4 * c.u), fn, &c);
    else
        fn(&c, 0, rows);
}

static void run(const struct vdev_kernel_args *a, int fast, int kg,
                void (*fn)(void *, int64_t, int64_t))
{
    run_min(a, fast, kg, VDEV_PARALLEL_MIN, fn);
}

KERNEL(vdev_ref_lstm_gates) { run(a, 0, 0, gates_part); }
KERNEL(vdev_fast_lstm_gates) { run_min(a, 1, 0, GATES_MIN, gates_part); }
KERNEL(vdev_ref_lstm_gates_grad) { run(a, 0, 1, gates_grad_part); }
KERNEL(vdev_fast_lstm_gates_grad) { run(a, 1, 1, gates_grad_part); }
KERNEL(vdev_ref_lstm_cell_state) { run(a, 0, 0, state_part); }
KERNEL(vdev_fast_lstm_cell_state) { run(a, 1, 0, state_part); }
KERNEL(vdev_ref_lstm_cell_output) { run(a, 0, 0, output_part); }
KERNEL(vdev_fast_lstm_cell_output) { run(a, 1, 0, output_part); }
KERNEL(vdev_ref_lstm_cell_grad) { run(a, 0, 1, grad_part); }
KERNEL(vdev_fast_lstm_cell_grad) { run(a, 1, 1, grad_part); }

/* ---- gradients ---- */

static enum vdev_status status_of(const struct vdev_tens *t)
{
    if (t)
        return VDEV_OK;
    enum vdev_status st = vdev_last_status();
    return st != VDEV_OK ? st : vdev_error(VDEV_ERR_INTERNAL, "a gradient op failed silently");
}

/* LSTMGates': LSTMGatesGrad of the saved gates (its output). */
GRAD(vdev_grad_lstm_gates)
{
    const struct vdev_tens *in[2] = {g->dout, g->out};
    din[0] = vdev_op_exec(VDEV_OP_LSTM_GATES_GRAD, in, 2, NULL);
    return status_of(din[0]);
}

/* LSTMCellState's (parts 0, 1) and LSTMCellOutput's (2, 3): each input's
 * gradient one LSTMCellGrad, where the caller needs it. */
GRAD(vdev_grad_lstm_cell)
{
    const int base = g->op == VDEV_OP_LSTM_CELL_OUTPUT ? 2 : 0;
    for (int k = 0; k < 2; k++) {
        if (!((g->need >> k) & 1u))
            continue;
        struct vdev_op_params p;
        memset(&p, 0, sizeof p);
        p.i[0] = base + k;
        const struct vdev_tens *in[3] = {g->dout, g->in[0], g->in[1]};
        din[k] = vdev_op_exec(VDEV_OP_LSTM_CELL_GRAD, in, 3, &p);
        enum vdev_status st = status_of(din[k]);
        if (st != VDEV_OK)
            return st;
    }
    return VDEV_OK;
}

/* ---- the public functions ---- */

VDEV_API vdev_tensor_t *vdev_lstm_gates(const vdev_tensor_t *z)
{
    return vdev_op_run(VDEV_OP_LSTM_GATES, &z, 1, NULL);
}

VDEV_API vdev_tensor_t *vdev_lstm_cell_state(const vdev_tensor_t *gates,
                                             const vdev_tensor_t *c_prev)
{
    const vdev_tensor_t *in[2] = {gates, c_prev};
    return vdev_op_run(VDEV_OP_LSTM_CELL_STATE, in, 2, NULL);
}

VDEV_API vdev_tensor_t *vdev_lstm_cell_output(const vdev_tensor_t *gates,
                                              const vdev_tensor_t *tanh_c)
{
    const vdev_tensor_t *in[2] = {gates, tanh_c};
    return vdev_op_run(VDEV_OP_LSTM_CELL_OUTPUT, in, 2, NULL);
}
