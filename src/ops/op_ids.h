/* op_ids.h — the numbers of the ops, shared by the op table (src/ops/) and
 * backends with kernel tables of their own (the CUDA plugin). Append only. */
#ifndef VDEV_OP_IDS_H
#define VDEV_OP_IDS_H

enum vdev_op {
    /* forward ops of the public API */
    VDEV_OP_MATMUL = 0,   /* i[0] trans_a, i[1] trans_b */
    VDEV_OP_ADD,          /* a, b broadcast as NumPy's; i[3] the mode (shape rule) */
    VDEV_OP_SUB,
    VDEV_OP_MUL,
    VDEV_OP_DIV,
    VDEV_OP_ADD_SCALAR,   /* f[0] */
    VDEV_OP_MUL_SCALAR,   /* f[0] */
    VDEV_OP_POW_SCALAR,   /* f[0] */
    VDEV_OP_RELU,
    VDEV_OP_TANH,
    VDEV_OP_SIGMOID,
    VDEV_OP_EXP,
    VDEV_OP_LOG,
    VDEV_OP_SOFTMAX,      /* last axis */
    VDEV_OP_LOG_SOFTMAX,  /* last axis */
    VDEV_OP_SUM,          /* i[0] axis (VDEV_AXIS_ALL: all), i[1] keepdims */
    VDEV_OP_MEAN,         /* same */
    VDEV_OP_RESHAPE,      /* a view: no kernel */
    /* j[0] 1: output axis d is input axis i[d] (i[0..rank) a permutation);
     * j[0] 0: 2-D, [m,n] -> [n,m] (the shape rule rewrites it as {1, 0}) */
    VDEV_OP_TRANSPOSE,
    VDEV_OP_MSE,
    VDEV_OP_SOFTMAX_CE,   /* logits [N,C] f32, labels [N] i32 */
    VDEV_OP_ARGMAX,       /* last axis, i32 out */
    VDEV_OP_IDENTITY,
    /* ops that gradients use */
    VDEV_OP_RELU_GRAD,    /* (dy, x) -> dy * (x > 0) */
    VDEV_OP_TANH_GRAD,    /* (dy, y) -> dy * (1 - y^2) */
    VDEV_OP_SIGMOID_GRAD, /* (dy, y) -> dy * y * (1 - y) */
    VDEV_OP_SOFTMAX_GRAD, /* (dy, y) -> y * (dy - sum(dy * y, last)) */
    VDEV_OP_LOG_SOFTMAX_GRAD, /* (dy, y=log_softmax) -> dy - exp(y) * sum(dy, last) */
    VDEV_OP_BROADCAST,    /* (x, like) -> x broadcast to like's shape; i[0] axis or ALL */
    VDEV_OP_MSE_GRAD,     /* (dy scalar, pred, target) -> dy * 2 (pred - target) / n */
    VDEV_OP_SOFTMAX_CE_GRAD, /* (dy scalar, logits, labels) -> dy (softmax - onehot) / N */
    VDEV_OP_REDUCE_ROWS,  /* (dy, like b) -> dy summed to b's broadcast shape */
    /* in-place updates of variables */
    /* (var, grad, velocity); f[0] lr, f[1] momentum, i[0] Nesterov; weight decay */
    VDEV_OP_SGD_UPDATE,
    /* (var, grad, m, v); f[0] lr_t, f[1] beta1, f[2] beta2, f[3] eps_hat; weight decay */
    VDEV_OP_ADAM_UPDATE,
    /* forward ops added later */
    VDEV_OP_SQRT,         /* std::sqrt: NaN below 0, -0 for -0 */
    /* Adam with AMSGrad in two in-place ops, as a kernel takes at most four
     * operands: the moments, then the variable */
    VDEV_OP_AMSGRAD_MOMENTS, /* (m, grad, v, vhat); f[1] beta1, f[2] beta2 */
    VDEV_OP_AMSGRAD_APPLY,   /* (var, m, vhat); f[0] lr_t, f[3] eps; weight decay */
    VDEV_OP_CLIP_GRAD,    /* (g) -> clamp(g * f[0] / f[1], +-f[2]) (f[2] 0: no clamp) */
    /* rows [i[0], i[0] + i[1]) of axis 0, any dtype: one contiguous range */
    VDEV_OP_SLICE,
    /* (dy, like x) -> x's shape: zeros, rows [i[0], i[0] + dy's rows) = dy */
    VDEV_OP_SLICE_GRAD,
    /* 2-D convolution and pooling, NHWC (conv.c); f[0] the padding (VDEV_PAD_*) */
    VDEV_OP_CONV2D,       /* (x, filter HWIO); i[0] stride h, i[1] stride w, i[3] determinism */
    VDEV_OP_MAX_POOL,     /* (x); i[0] ksize h, i[1] ksize w, i[2] stride h, i[3] stride w */
    VDEV_OP_AVG_POOL,     /* (x); as MAX_POOL (a mean over the window's valid elements) */
    VDEV_OP_CONV2D_BACKPROP_INPUT,  /* (x for its shape, filter, dy); as CONV2D */
    VDEV_OP_CONV2D_BACKPROP_FILTER, /* (x, filter for its shape, dy); as CONV2D */
    VDEV_OP_MAX_POOL_GRAD, /* (x, y, dy); as MAX_POOL: dy to each window's first max */
    VDEV_OP_AVG_POOL_GRAD, /* (x for its shape, dy); as MAX_POOL */
    /* strided slices (strided.c): per axis d, i[d] first index, j[d] stride, f[d] count */
    VDEV_OP_STRIDED_SLICE,      /* (x, any dtype) -> x's rank, the counts as shape */
    VDEV_OP_STRIDED_SLICE_GRAD, /* (dy, like x) -> zeros of x's shape, dy where x was taken */
    /* joins (concat.c), any dtype, 4 inputs of which the first i[1] (1..4)
     * are used (the others repeat input 0): i[0] the axis */
    VDEV_OP_CONCAT,       /* ConcatV2: along axis i[0] (0 <= i[0] < rank) */
    VDEV_OP_PACK,         /* Pack: a new axis i[0] (0 <= i[0] <= rank) of i[1] entries */
    /* gathers along axis 0 (gather.c) */
    VDEV_OP_GATHER,       /* GatherV2 (params f32/i32, indices i32) -> indices.shape + rest */
    /* (dy, indices, like params) -> zeros of params' shape, dy's rows added at the indices */
    VDEV_OP_GATHER_GRAD,
    /* elementwise extrema (maxmin.c), broadcast as ADD: NaN propagates */
    VDEV_OP_MAXIMUM,
    VDEV_OP_MINIMUM,
    /* (dy, x, y) -> dy's shape: dy where x >= y (i[0] 0, Maximum) or x <= y
     * (i[0] 1, Minimum), else 0, for x's share (i[1] 0); the rest for y's (i[1] 1) */
    VDEV_OP_MAXMIN_GRAD,
    /* depthwise 2-D convolution (conv_depthwise.c), NHWC, filter [KH,KW,C,M];
     * as CONV2D: i[0], i[1] the strides (equal), j[0], j[1] the dilations,
     * f[0] the padding */
    VDEV_OP_DEPTHWISE_CONV2D,                 /* (x, filter) -> [N,OH,OW,C*M] */
    VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT,  /* (x for its shape, filter, dy) */
    VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER, /* (x, filter for its shape, dy) */
    /* transposed 2-D convolution (conv_transpose.c): TensorFlow's
     * conv2d_transpose, Conv2DBackpropInput of (input, filter HWOI) into
     * the shape [i[2], j[2], j[3], f[1]]; strides, dilations, padding and
     * i[3] as CONV2D. Its kernels are CONV2D_BACKPROP_INPUT's on rewritten
     * arguments (conv_transpose.h) */
    VDEV_OP_CONV2D_TRANSPOSE,
    /* unary functions added later */
    VDEV_OP_ERF,          /* the error function (TensorFlow's Erf) */
    VDEV_OP_SOFTPLUS,     /* log(e^x + 1), TensorFlow's Softplus kernel's three ranges */
    /* batched products (batch_matmul.c): x [B,M,K] ([B,K,M] with i[0]) times
     * y [B,K,N] ([B,N,K] with i[1]) -> [B,M,N]; either batch may be 1 and is
     * then broadcast; i[2] the determinism switch, as MATMUL's */
    VDEV_OP_BATCH_MATMUL,
    /* the fused LSTM cell (lstm_cell.c): z [..., 4u] the pre-activations of
     * the gates i, f, g, o; a the gates */
    VDEV_OP_LSTM_GATES,       /* z -> a = [s(i), s(f), tanh(g), s(o)] */
    VDEV_OP_LSTM_GATES_GRAD,  /* (da, a) -> dz */
    VDEV_OP_LSTM_CELL_STATE,  /* (a, c_prev [..., u]) -> a_f c_prev + a_i a_g */
    VDEV_OP_LSTM_CELL_OUTPUT, /* (a, t = tanh(c) [..., u]) -> a_o t */
    /* (dy, a, x) -> i[0] 0: the state's da (x c_prev), 1: its dc_prev; 2: the
     * output's da (x t), 3: its dt */
    VDEV_OP_LSTM_CELL_GRAD,
    /* (acc, dy) in place: acc's elements a strided slice takes += dy's;
     * parameters as STRIDED_SLICE's (strided.c). The tape's sum of the
     * gradients of several slices of one tensor */
    VDEV_OP_STRIDED_SLICE_GRAD_ADD,
    /* the fused GRU cell, reset_after (gru_cell.c): xw, inner [..., 3u] the
     * step's input and recurrent products with their biases, gates z, r, h */
    VDEV_OP_GRU_GATES,       /* (xw, inner) -> g = [z, r, hh] */
    VDEV_OP_GRU_GATES_GRAD,  /* (dg, g, inner) -> i[0] 0: dxw, 1: dinner */
    VDEV_OP_GRU_CELL_OUTPUT, /* (g, h_prev [..., u]) -> z h_prev + (1 - z) hh */
    VDEV_OP_GRU_CELL_GRAD,   /* (dh, g, h_prev) -> i[0] 0: dg, 1: dh_prev */
    /* tf.where on float masks (select.c): (m, a, b) -> m != 0 ? a : b, m
     * broadcast to a's shape (same rank, axes 1 or a's) */
    VDEV_OP_SELECT_MASK,
    VDEV_OP_SELECT_MASK_GRAD, /* (m, dy) -> i[0] 0: where(m, dy, 0), 1: where(m, 0, dy) */
    /* comparisons and logic (compare.c): (x, y) of one dtype, broadcast as
     * AddV2's (mode i[3]) -> bool */
    VDEV_OP_EQUAL,
    VDEV_OP_NOT_EQUAL,
    VDEV_OP_LESS,
    VDEV_OP_LESS_EQUAL,
    VDEV_OP_GREATER,
    VDEV_OP_GREATER_EQUAL,
    VDEV_OP_LOGICAL_AND,
    VDEV_OP_LOGICAL_OR,
    VDEV_OP_LOGICAL_NOT, /* bool -> bool */
    VDEV_OP_CAST,        /* x -> x as dtype i[0] */
    /* tf.where (compare.c): (c bool, x, y), the three broadcast together ->
     * c ? x : y */
    VDEV_OP_SELECT_V2,
    /* extreme.c: reductions as SUM's parameters, f32 or i32 */
    VDEV_OP_MAX,
    VDEV_OP_MIN,
    VDEV_OP_ABS,  /* f32 or i32 */
    VDEV_OP_SIGN, /* f32 or i32 */
    /* floor.c: f32 (i32: the value) */
    VDEV_OP_FLOOR,
    VDEV_OP_CEIL,
    VDEV_OP_ROUND,
    VDEV_OP_FLOOR_DIV, /* (x, y) f32 or i32, broadcast as AddV2's */
    VDEV_OP_FLOOR_MOD,
    VDEV_OP_COUNT
};

#define VDEV_AXIS_ALL 127

/* The convolutions' and pools' padding, in f[0]: TensorFlow's "VALID" and
 * "SAME". */
#define VDEV_PAD_VALID 0
#define VDEV_PAD_SAME 1

/* The in-place updates' weight decay (Keras's decoupled weight_decay:
 * var -= var * wd * lr before the update) comes as the bits of two floats,
 * i[1] wd and i[2] lr, as Adam's f[] is full; wd 0 is none. */
#define VDEV_UPDATE_WD 1
#define VDEV_UPDATE_WD_LR 2

#endif
