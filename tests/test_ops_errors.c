/* test_ops_errors.c — what the ops do with input they cannot take, on the
 * cpu backend and on simulated GPUs: shape errors naming both shapes, NULL
 * chains keeping the first error, values with no defined answer (mean of
 * nothing, the gradient of bad labels, NaN in argmax), and OpenBLAS against
 * the reference kernel and a triple loop for every transpose combination. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops_rng.h"

/* ---- BLAS against the reference and a triple loop, on host buffers ---- */

/* vdev_host_matmul (sgemm) and vdev_ref_matmul on host buffers against a
 * triple loop here, for every transpose combination and shapes with 1s, odd
 * sizes and empty dimensions (k = 0 must give zeros, not leave memory). */
static void test_host_matmul(void)
{
    static const int64_t dims[][3] = {{1, 1, 1},    {2, 3, 4}, {7, 1, 5}, {5, 9, 1}, {31, 17, 23},
                                      {64, 65, 66}, {3, 0, 4}, {0, 3, 4}, {3, 4, 0}};
    for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++)
        for (int combo = 0; combo < 4; combo++) {
            int ta = combo & 1, tb = combo >> 1;
            int64_t m = dims[t][0], k = dims[t][1], n = dims[t][2];
            float *A = malloc((size_t)(m * k + 1) * 4), *B = malloc((size_t)(k * n + 1) * 4);
            float *cb = malloc((size_t)(m * n + 1) * 4), *cr = malloc((size_t)(m * n + 1) * 4);
            for (int64_t i = 0; i < m * k; i++)
                A[i] = rng_uniform(-1, 1);
            for (int64_t i = 0; i < k * n; i++)
                B[i] = rng_uniform(-1, 1);
            for (int64_t i = 0; i < m * n; i++)
                cb[i] = cr[i] = NAN; /* must be overwritten, also for k = 0 */
            struct vdev_kernel_args a;
            memset(&a, 0, sizeof a);
            a.op = VDEV_OP_MATMUL;
            a.n_in = 2;
            a.in[0] = A;
            a.in[1] = B;
            a.in_ndim[0] = a.in_ndim[1] = 2;
            a.in_shape[0][0] = ta ? k : m;
            a.in_shape[0][1] = ta ? m : k;
            a.in_shape[1][0] = tb ? n : k;
            a.in_shape[1][1] = tb ? k : n;
            a.in_shape[0][2] = a.in_shape[0][3] = a.in_shape[1][2] = a.in_shape[1][3] = 1;
            a.i[0] = ta;
            a.i[1] = tb;
            CHECK_OK(vdev_shape_matmul(&a));
            CHECK(a.out_shape[0][0] == m && a.out_shape[0][1] == n);
            a.out[0] = cb;
            vdev_host_matmul(&a);
            a.out[0] = cr;
            vdev_ref_matmul(&a);
            int ok = 1;
            for (int64_t i = 0; i < m && ok; i++)
                for (int64_t j = 0; j < n && ok; j++) {
                    double acc = 0, mag = 0;
                    for (int64_t p = 0; p < k; p++) {
                        double av = ta ? A[p * m + i] : A[i * k + p];
                        double bv = tb ? B[j * k + p] : B[p * n + j];
                        acc += av * bv;
                        mag += fabs(av * bv);
                    }
                    double tol_blas = 1e-7 + 4.0 * (double)k * ldexp(1.0, -24) * mag;
                    double tol_ref = 1e-7 + 1e-6 * fabs(acc);
                    ok = fabs(cb[i * n + j] - acc) <= tol_blas &&
                         fabs(cr[i * n + j] - acc) <= tol_ref &&
                         fabs(cb[i * n + j] - cr[i * n + j]) <= tol_blas + tol_ref;
                    if (!ok)
                        check_fail(__FILE__, __LINE__,
                                   "matmul m=%lld k=%lld n=%lld ta=%d tb=%d "
                                   "[%lld,%lld]: blas %.9g ref %.9g loop %.9g",
                                   (long long)m, (long long)k, (long long)n, ta, tb, (long long)i,
                                   (long long)j, cb[i * n + j], cr[i * n + j], acc);
                }
            if (ok)
                check_passed++;
            free(A);
            free(B);
            free(cb);
            free(cr);
        }
}

/* ---- errors ---- */

/* A 2-D f32 zeros tensor on the current device. */
static vdev_tensor_t *zeros2(int64_t r, int64_t c)
{
    int64_t s[2] = {r, c};
    return vdev_tensor_zeros(s, 2, VDEV_F32);
}

/* Shape errors are VDEV_ERR_SHAPE naming the op and both shapes, for public
 * and internal ops; a NULL input gives NULL and keeps the first error. */
static void test_shape_errors(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    vdev_tensor_t *a34 = zeros2(3, 4), *b56 = zeros2(5, 6), *b45 = zeros2(4, 5);
    int64_t s3[3] = {2, 3, 4}, s5[1] = {5}, s0[2] = {5, 0};
    vdev_tensor_t *t3 = vdev_tensor_zeros(s3, 3, VDEV_F32);
    vdev_tensor_t *lab5 = vdev_tensor_zeros(s5, 1, VDEV_I32);

    vdev_clear_error();
    /* TensorFlow's MatMul kernel's words, after the op's name */
    CHECK(vdev_matmul(a34, b56, false, false) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK(strcmp(vdev_last_error(),
                 "MatMul: Matrix size-incompatible: In[0]: [3,4], In[1]: [5,6]") == 0);
    CHECK(vdev_matmul(a34, b45, false, false) != NULL);
    CHECK(vdev_matmul(a34, b45, true, false) == NULL);
    CHECK(strcmp(vdev_last_error(),
                 "MatMul: Matrix size-incompatible: In[0]: [3,4], In[1]: [4,5]") == 0);
    CHECK(vdev_matmul(t3, b45, false, false) == NULL);
    CHECK(strcmp(vdev_last_error(),
                 "MatMul: In[0] is not a matrix. Instead it has shape [2,3,4]") == 0);
    CHECK(vdev_matmul(b45, vdev_tensor_zeros(s5, 1, VDEV_F32), false, false) == NULL);
    CHECK(strcmp(vdev_last_error(), "MatMul: In[1] is not a matrix. Instead it has shape [5]") ==
          0);

    static const char *names[4] = {"AddV2", "Sub", "Mul", "RealDiv"};
    vdev_tensor_t *(*bin[4])(const vdev_tensor_t *, const vdev_tensor_t *) = {vdev_add, vdev_sub,
                                                                              vdev_mul, vdev_div};
    for (int i = 0; i < 4; i++) {
        vdev_clear_error();
        CHECK(bin[i](a34, b56) == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
        CHECK_MSG(names[i]);
        CHECK_MSG("[3,4]");
        CHECK_MSG("[5,6]");
    }
    CHECK(vdev_add(a34, lab5) == NULL); /* i32 into a float op */
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    /* a dtype mismatch names the input and its dtype, not the shapes */
    int64_t s34[2] = {3, 4};
    vdev_tensor_t *i34 = vdev_tensor_zeros(s34, 2, VDEV_I32);
    char want[128];
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 2; k++) {
            vdev_clear_error();
            CHECK(bin[i](k ? a34 : i34, k ? i34 : a34) == NULL);
            CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
            /* AddV2, Sub and Mul take int32 too: input 0's dtype is the one
             * input 1 must have (TensorFlow's rule); RealDiv takes float */
            if (i < 3 && k == 0)
                snprintf(want, sizeof want,
                         "%s: input #1 (shape [3,4]) is float, expected int32", names[i]);
            else
                snprintf(want, sizeof want,
                         "%s: input #%d (shape [3,4]) is int32, expected float", names[i], k);
            CHECK(strcmp(vdev_last_error(), want) == 0);
        }
    CHECK(vdev_exp(i34) == NULL);
    CHECK(strcmp(vdev_last_error(), "Exp: input #0 (shape [3,4]) is int32, expected float") == 0);
    CHECK(vdev_relu(i34) == NULL);
    CHECK(strcmp(vdev_last_error(), "Relu: input #0 (shape [3,4]) is int32, expected float") == 0);

    int64_t ns[2] = {5, 6}, bad[2] = {-1, -1}, inf[2] = {-1, 5};
    /* TensorFlow's Reshape kernel's words */
#define RS "Reshape: Input to reshape is a tensor with "
    CHECK(vdev_reshape(a34, ns, 2) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK(strcmp(vdev_last_error(), RS "12 values, but the requested shape has 30") == 0);
    CHECK(vdev_reshape(a34, bad, 2) == NULL);
    CHECK(strcmp(vdev_last_error(), "Reshape: Only one input size may be -1, not both 0 and 1") ==
          0);
    CHECK(vdev_reshape(a34, inf, 2) == NULL);
    CHECK(strcmp(vdev_last_error(),
                 RS "12 values, but the requested shape requires a multiple of 5") == 0);
    int64_t neg[2] = {3, -4};
    CHECK(vdev_reshape(a34, neg, 2) == NULL);
    CHECK(strcmp(vdev_last_error(), "Reshape: Size 1 must be non-negative, not -4") == 0);
    /* a 0 in the new shape leaves the input's 0 dimensions out of the count
     * the -1 is inferred from: [0,3] to [0,-1] is [0,3], to [-1,0] [3,0], as
     * TensorFlow gives; 12 elements to [-1,0] have nowhere to go */
    int64_t z_inf[2] = {0, -1}, inf_z[2] = {-1, 0};
    vdev_tensor_t *e03 = zeros2(0, 3);
    vdev_tensor_t *r = vdev_reshape(e03, z_inf, 2);
    CHECK(r && vdev_tensor_dim(r, 0) == 0 && vdev_tensor_dim(r, 1) == 3);
    r = vdev_reshape(e03, inf_z, 2);
    CHECK(r && vdev_tensor_dim(r, 0) == 3 && vdev_tensor_dim(r, 1) == 0);
    CHECK(vdev_reshape(a34, inf_z, 2) == NULL);
    CHECK(strcmp(vdev_last_error(), RS "12 values, but the requested shape has 0") == 0);
#undef RS
    CHECK(vdev_reshape(a34, ns, 5) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "Reshape: tensors have 0 to 4 dimensions, not 5");
    /* a NULL shape is named as such, not as a count of dimensions */
    CHECK(vdev_reshape(a34, NULL, 2) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "Reshape: shape is NULL and ndim 2");

    CHECK(vdev_transpose(t3) == NULL);
    CHECK_MSG("[2,3,4]");
    CHECK(vdev_mse(a34, b56) == NULL);
    CHECK_MSG("[3,4]");
    CHECK_MSG("[5,6]");
    /* the cross-entropy's shape rules in the order and words of TensorFlow's
     * kernel, zero classes refused even with no row */
#define XE "SparseSoftmaxCrossEntropyWithLogits: "
    CHECK(vdev_softmax_cross_entropy(a34, lab5) == NULL);
    CHECK(strcmp(vdev_last_error(), XE "logits and labels must have the same first dimension, "
                                       "got logits shape [3,4] and labels shape [5]") == 0);
    CHECK(vdev_softmax_cross_entropy(t3, lab5) == NULL);
    CHECK(strcmp(vdev_last_error(), XE "logits must be 2-D, but got shape [2,3,4]") == 0);
    CHECK(vdev_softmax_cross_entropy(b56, zeros2(5, 1)) == NULL); /* float labels: dtype first */
    CHECK_MSG("int32");
    int64_t s51[2] = {5, 1};
    CHECK(vdev_softmax_cross_entropy(b56, vdev_tensor_zeros(s51, 2, VDEV_I32)) == NULL);
    CHECK(strcmp(vdev_last_error(), XE "labels must be 1-D, but got shape [5,1]") == 0);
    CHECK(vdev_softmax_cross_entropy(zeros2(5, 0), lab5) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK(strcmp(vdev_last_error(),
                 XE "Must have at least one class, but got logits shape [5,0]") == 0);
    int64_t s00[1] = {0};
    CHECK(vdev_softmax_cross_entropy(zeros2(0, 0), vdev_tensor_zeros(s00, 1, VDEV_I32)) == NULL);
    CHECK(strcmp(vdev_last_error(),
                 XE "Must have at least one class, but got logits shape [0,0]") == 0);
#undef XE
    CHECK(vdev_softmax_cross_entropy(a34, a34) == NULL); /* float labels */
    CHECK_MSG("int32");
    /* Softmax needs an axis, as TensorFlow's kernels say; an empty one is fine. */
    vdev_tensor_t *scalar = vdev_tensor_zeros(NULL, 0, VDEV_F32);
    CHECK(vdev_softmax(scalar) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK(strcmp(vdev_last_error(), "Softmax: logits must have >= 1 dimension, got []") == 0);
    CHECK(vdev_log_softmax(scalar) == NULL);
    CHECK(strcmp(vdev_last_error(), "LogSoftmax: logits must have >= 1 dimension, got []") == 0);
    int64_t s30[2] = {3, 0};
    vdev_tensor_t *empty = vdev_softmax(vdev_tensor_zeros(s30, 2, VDEV_F32));
    CHECK(empty != NULL && vdev_tensor_numel(empty) == 0 && vdev_tensor_dim(empty, 1) == 0);
    vdev_clear_error();
    CHECK(vdev_sum(a34, 2, false) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    /* TensorFlow's words, its unclosed parenthesis included */
    CHECK(strcmp(vdev_last_error(),
                 "Sum: Invalid reduction dimension (2 for input with 2 dimension(s)") == 0);
    CHECK(vdev_mean(a34, -3, true) == NULL);
    CHECK(strcmp(vdev_last_error(),
                 "Mean: Invalid reduction dimension (-3 for input with 2 dimension(s)") == 0);
    CHECK(vdev_sum(vdev_tensor_zeros(NULL, 0, VDEV_F32), 0, false) == NULL);
    CHECK(strcmp(vdev_last_error(),
                 "Sum: Invalid reduction dimension (0 for input with 0 dimension(s)") == 0);
    CHECK(vdev_sum(a34, -2, false) != NULL);
    CHECK(vdev_argmax(zeros2(5, 0)) == NULL);
    CHECK(strcmp(vdev_last_error(), "ArgMax: Reduction axis 1 is empty in shape [5,0]") == 0);
    CHECK(vdev_tensor_zeros(s0, 2, VDEV_F32) != NULL);

    /* internal ops: BROADCAST, REDUCE_ROWS, MSE_GRAD, updates; the error of
     * a 3-input op names the two inputs that disagree */
    const vdev_tensor_t *bc[2] = {b45, a34};
    struct vdev_op_params p = {.i = {0}};
    CHECK(vdev_op_run(VDEV_OP_BROADCAST, bc, 2, &p) == NULL);
    CHECK_MSG("[4,5]");
    CHECK_MSG("[3,4]");
    int64_t s2v[1] = {2};
    const vdev_tensor_t *bca[2] = {vdev_tensor_zeros(s2v, 1, VDEV_F32), a34};
    p.i[0] = VDEV_AXIS_ALL; /* over everything: x must have one element */
    CHECK(vdev_op_run(VDEV_OP_BROADCAST, bca, 2, &p) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_MSG("[2]");
    p.i[0] = 2; /* no axis 2 in [3,4] */
    CHECK(vdev_op_run(VDEV_OP_BROADCAST, bc, 2, &p) == NULL);
    CHECK_MSG("axis 2");
    const vdev_tensor_t *rr[2] = {a34, b56};
    CHECK(vdev_op_run(VDEV_OP_REDUCE_ROWS, rr, 2, NULL) == NULL);
    CHECK_MSG("[5,6]");
    vdev_tensor_t *one = vdev_tensor_ones(NULL, 0, VDEV_F32);
    const vdev_tensor_t *mg[3] = {one, a34, b56};
    CHECK(vdev_op_run(VDEV_OP_MSE_GRAD, mg, 3, NULL) == NULL);
    CHECK_MSG("[3,4]");
    CHECK_MSG("[5,6]");
    vdev_tensor_t *up[3] = {a34, a34, b56};
    struct vdev_op_params lr = {.f = {0.1, 0.0}};
    CHECK_STATUS(vdev_op_run_inplace(VDEV_OP_SGD_UPDATE, up, 3, &lr), VDEV_ERR_SHAPE);
    CHECK_MSG("[3,4]");
    CHECK_MSG("[5,6]");

    /* the fused LSTM cell: z's last axis 4 times c's, the leading ones equal */
    vdev_tensor_t *z28 = zeros2(2, 8), *c23 = zeros2(2, 3), *c32 = zeros2(3, 2);
    vdev_clear_error();
    CHECK(vdev_lstm_cell_state(z28, c23) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK(strcmp(vdev_last_error(), "LSTMCellState: incompatible shapes [2,8] and [2,3] (the "
                                     "gates must have c's shape with a last axis 4 times c's: i, "
                                     "f, g, o)") == 0);
    CHECK(vdev_lstm_cell_output(z28, c32) == NULL);
    CHECK(strcmp(vdev_last_error(), "LSTMCellOutput: incompatible shapes [2,8] and [3,2] (the "
                                    "gates must have c's shape with a last axis 4 times c's: i, "
                                    "f, g, o)") == 0);
    int64_t s27[2] = {2, 7};
    CHECK(vdev_lstm_gates(vdev_tensor_zeros(s27, 2, VDEV_F32)) == NULL);
    CHECK(strcmp(vdev_last_error(), "LSTMGates: bad input shape [2,7] (the last axis holds the "
                                    "gates i, f, g, o: a multiple of 4)") == 0);
    CHECK(vdev_lstm_gates(vdev_tensor_zeros(NULL, 0, VDEV_F32)) == NULL);
    CHECK_MSG("LSTMGates: bad input shape []");
    const vdev_tensor_t *gg[2] = {z28, zeros2(2, 4)};
    CHECK(vdev_op_run(VDEV_OP_LSTM_GATES_GRAD, gg, 2, NULL) == NULL);
    CHECK_MSG("(da must have a's shape, a multiple of 4 last)");
    vdev_tensor_t *g29 = zeros2(2, 9);
    CHECK(vdev_gru_gates(zeros2(2, 6), g29) == NULL);
    CHECK(strcmp(vdev_last_error(), "GRUGates: incompatible shapes [2,6] and [2,9] (the gates' "
                                    "inputs must have one shape, a last axis of 3 units: z, r, "
                                    "h)") == 0);
    CHECK(vdev_gru_gates(z28, z28) == NULL);
    CHECK_MSG("GRUGates: incompatible shapes [2,8] and [2,8]");
    CHECK(vdev_gru_cell_output(g29, zeros2(2, 2)) == NULL);
    CHECK(strcmp(vdev_last_error(), "GRUCellOutput: incompatible shapes [2,9] and [2,2] (the "
                                    "gates must have h's shape with a last axis 3 times h's: z, "
                                    "r, h)") == 0);
    CHECK(vdev_gru_cell_output(g29, c23) != NULL);
    vdev_tensor_t *v23 = zeros2(2, 3), *v24 = zeros2(2, 4);
    CHECK(vdev_select_mask(zeros2(2, 1), v23, v24) == NULL);
    CHECK(strcmp(vdev_last_error(), "SelectByMask: the values' shapes [2,3] and [2,4] differ") ==
          0);
    CHECK(vdev_select_mask(zeros2(2, 2), v23, v23) == NULL);
    CHECK(strcmp(vdev_last_error(), "SelectByMask: incompatible shapes [2,2] and [2,3] (the mask "
                                    "must broadcast to the values' shape (at most their rank, "
                                    "each axis 1 or theirs))") == 0);
    CHECK(vdev_select_mask(zeros2(1, 3), v23, v23) != NULL);
    CHECK(vdev_select_mask(t3, v23, v23) == NULL);
    CHECK_MSG("[2,3,4]");
    CHECK(vdev_lstm_cell_state(z28, t3) == NULL);
    CHECK_MSG("[2,3,4]");
    int64_t s22[2] = {2, 2};
    CHECK(vdev_lstm_cell_state(z28, vdev_tensor_zeros(s22, 2, VDEV_I32)) == NULL);
    CHECK(strcmp(vdev_last_error(),
                 "LSTMCellState: input #1 (shape [2,2]) is int32, expected float") == 0);
    const vdev_tensor_t *lg[3] = {c23, z28, c23};
    CHECK(p.i[0] == 2); /* the gradient's part 2, the output's dz */
    CHECK(vdev_op_run(VDEV_OP_LSTM_CELL_GRAD, lg, 3, &p) == NULL); /* [2,3] is no c of z28 */
    CHECK_MSG("LSTMCellGrad: incompatible shapes [2,3] and [2,8]");
    vdev_tensor_t *c22 = zeros2(2, 2);
    const vdev_tensor_t *lg2[3] = {c23, z28, c22};
    CHECK(vdev_op_run(VDEV_OP_LSTM_CELL_GRAD, lg2, 3, &p) == NULL);
    CHECK_MSG("dy must have c's shape");
    const vdev_tensor_t *lg3[3] = {c22, z28, c22};
    CHECK(vdev_op_run(VDEV_OP_LSTM_CELL_GRAD, lg3, 3, &p) != NULL);
    p.i[0] = 4;
    CHECK(vdev_op_run(VDEV_OP_LSTM_CELL_GRAD, lg3, 3, &p) == NULL);
    CHECK_MSG("i[0] must be 0, 1, 2 or 3");

    /* NULL inputs: NULL out, the first error kept, through public ops of
     * one and two inputs and internal ops alike */
    vdev_clear_error();
    vdev_tensor_t *chain = vdev_relu(vdev_matmul(a34, b56, false, false));
    CHECK(chain == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_MSG("MatMul");
    CHECK_MSG("[5,6]");
    chain = vdev_sum_all(vdev_add(vdev_tanh(vdev_reshape(a34, ns, 2)), a34));
    CHECK(chain == NULL);
    CHECK_MSG("Reshape");
    CHECK(vdev_mse(NULL, a34) == NULL);
    CHECK_MSG("Reshape");
    CHECK(vdev_softmax_cross_entropy(a34, NULL) == NULL);
    CHECK_MSG("Reshape");
    const vdev_tensor_t *nul[2] = {a34, NULL};
    CHECK(vdev_op_run(VDEV_OP_REDUCE_ROWS, nul, 2, NULL) == NULL);
    CHECK_MSG("Reshape");
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* ---- values with no defined answer, and stability ---- */

/* An f32 tensor from host values on the current device. */
static vdev_tensor_t *from(const float *v, const int64_t *shape, int ndim)
{
    return vdev_tensor_from_host(v, shape, ndim, VDEV_F32);
}

/* The documented answers where mathematics has none (see kernels_ref.c),
 * and numerical stability at extreme inputs. */
static void test_special_values(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    int64_t s23[2] = {2, 3}, s2[1] = {2}, s05[2] = {0, 5};
    float x[6] = {1, 2, 3, 4, 5, 6};
    int32_t bad[2] = {0, 3}, neg[2] = {-1, 0}, good[2] = {2, 0};
    vdev_tensor_t *lg = from(x, s23, 2);
    vdev_tensor_t *lb = vdev_tensor_from_host(bad, s2, 1, VDEV_I32);
    vdev_tensor_t *ln = vdev_tensor_from_host(neg, s2, 1, VDEV_I32);
    vdev_tensor_t *lgood = vdev_tensor_from_host(good, s2, 1, VDEV_I32);
    /* a label outside [0, C) is an error where the host reads the labels
     * (test_ops_inputs.c has the details) */
    CHECK(vdev_softmax_cross_entropy(lg, lb) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_MSG("Received a label value of 3 which is outside the valid range of [0, 3)");
    CHECK(vdev_softmax_cross_entropy(lg, ln) == NULL);
    CHECK_MSG("Received a label value of -1 which is outside the valid range of [0, 3)");
    float ce = vdev_tensor_item(vdev_softmax_cross_entropy(lg, lgood));
    double l0 = log(exp(1.0) + exp(2.0) + exp(3.0));
    double want = ((l0 - 3.0) + (l0 + 3.0 - 4.0)) / 2.0;
    CHECK(fabs(ce - want) < 1e-6);
    /* the gradient of a bad row is NaN, good rows are finite */
    vdev_tensor_t *one = vdev_tensor_ones(NULL, 0, VDEV_F32);
    const vdev_tensor_t *gi[3] = {one, lg, lb};
    vdev_tensor_t *g = vdev_op_run(VDEV_OP_SOFTMAX_CE_GRAD, gi, 3, NULL);
    float gv[6];
    CHECK_OK(vdev_tensor_to_host(g, gv, sizeof gv));
    CHECK(!isnan(gv[0]) && !isnan(gv[2]) && isnan(gv[3]) && isnan(gv[5]));

    /* mean of nothing is NaN (0/0, tf.reduce_mean), sum of nothing is 0;
     * over axis 0 of [0,5] every one of the 5 means is of nothing. The MSE
     * loss of an empty batch is 0 (Keras's divide_no_nan; test_ops_losses.c
     * has the details) */
    vdev_tensor_t *empty = vdev_tensor_zeros(s05, 2, VDEV_F32);
    CHECK(isnan(vdev_tensor_item(vdev_mean_all(empty))));
    CHECK(vdev_tensor_item(vdev_sum_all(empty)) == 0.0f);
    CHECK(vdev_tensor_item(vdev_mse(empty, empty)) == 0.0f);
    vdev_tensor_t *m0 = vdev_mean(empty, 0, false);
    float mv[5];
    CHECK_OK(vdev_tensor_to_host(m0, mv, sizeof mv));
    CHECK(isnan(mv[0]) && isnan(mv[4]));
    CHECK(vdev_tensor_numel(vdev_mean(empty, 1, false)) == 0);

    /* argmax: first of equal maxima; a NaN is the maximum (first NaN) */
    float ties[6] = {1, 3, 3, NAN, 2, NAN};
    vdev_tensor_t *am = vdev_argmax(from(ties, s23, 2));
    int32_t ai[2];
    CHECK_OK(vdev_tensor_to_host(am, ai, sizeof ai));
    CHECK(ai[0] == 1 && ai[1] == 0);
    CHECK(vdev_tensor_dtype(am) == VDEV_I32);
    CHECK(vdev_tensor_ndim(am) == 1 && vdev_tensor_dim(am, 0) == 2);

    /* reshape and transpose keep an i32 tensor's dtype and words */
    int32_t iw[6] = {-7, 1 << 30, 3, 0, -1, 42}, ib[6];
    int64_t s32[2] = {3, 2};
    vdev_tensor_t *it = vdev_tensor_from_host(iw, s23, 2, VDEV_I32);
    vdev_tensor_t *ir = vdev_reshape(it, s32, 2);
    CHECK(vdev_tensor_dtype(ir) == VDEV_I32 && vdev_tensor_dim(ir, 0) == 3);
    CHECK_OK(vdev_tensor_to_host(ir, ib, sizeof ib));
    CHECK(!memcmp(ib, iw, sizeof iw));
    CHECK_OK(vdev_tensor_to_host(vdev_transpose(it), ib, sizeof ib));
    CHECK(ib[0] == -7 && ib[1] == 0 && ib[2] == 1 << 30 && ib[5] == 42);

    /* relu's gradient at exactly 0 is 0 (TensorFlow's convention), also at -0 */
    int64_t s4[1] = {4};
    float rx[4] = {0.0f, -0.0f, 1.0f, -1.0f}, rdy[4] = {1, 1, 1, 1}, rg[4];
    const vdev_tensor_t *rgi[2] = {from(rdy, s4, 1), from(rx, s4, 1)};
    CHECK_OK(vdev_tensor_to_host(vdev_op_run(VDEV_OP_RELU_GRAD, rgi, 2, NULL), rg, sizeof rg));
    CHECK(rg[0] == 0.0f && rg[1] == 0.0f && rg[2] == 1.0f && rg[3] == 0.0f);

    /* relu passes NaN; softmax of huge values stays finite */
    float rv[2] = {NAN, -1};
    float ro[2];
    CHECK_OK(vdev_tensor_to_host(vdev_relu(from(rv, s2, 1)), ro, sizeof ro));
    CHECK(isnan(ro[0]) && ro[1] == 0.0f);
    float big[6] = {1e30f, 1e30f, -1e30f, 88, 89, 90};
    float so[6];
    CHECK_OK(vdev_tensor_to_host(vdev_softmax(from(big, s23, 2)), so, sizeof so));
    CHECK(fabs(so[0] - 0.5) < 1e-6 && so[2] == 0.0f);
    CHECK(fabs(so[3] + so[4] + so[5] - 1.0) < 1e-6);
    CHECK_OK(vdev_tensor_to_host(vdev_log_softmax(from(big, s23, 2)), so, sizeof so));
    CHECK(fabs(so[0] + log(2.0)) < 1e-6 && isfinite(so[5]));
    /* sigmoid at extremes: no overflow, no NaN */
    float sx[2] = {-200, 200};
    CHECK_OK(vdev_tensor_to_host(vdev_sigmoid(from(sx, s2, 1)), ro, sizeof ro));
    CHECK(ro[0] == 0.0f && ro[1] == 1.0f);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}


/* ---- a run ---- */

int main(void)
{
    /* host-only: no runtime needed */
    test_host_matmul();

    check_fresh(NULL);
    CHECK_OK(vdev_init());
    test_shape_errors("CPU:0");
    test_special_values("CPU:0");
    /* with no device scope, ops on CPU tensors run on the CPU */
    vdev_scope_begin();
    vdev_tensor_t *t = vdev_relu(zeros2(2, 2));
    CHECK_STR(vdev_tensor_device(t), "/device:CPU:0");
    vdev_scope_end();

    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    test_shape_errors("GPU:0");
    test_special_values("GPU:1");
    /* nothing leaked */
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    CHECK_OK(vdev_memory_info("GPU:1", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    CHECK_OK(vdev_memory_info("CPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    vdev_shutdown();
    return check_done();
}
