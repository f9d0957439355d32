/* ops.h — the op table and the dispatcher.
 *
 * Each op has one row: its name (TensorFlow's op type where one exists, as
 * the placement log prints it), a shape rule, a CPU reference kernel (plain
 * loops, double accumulators: the specification), an optional faster host
 * kernel (OpenBLAS for matmul), and a gradient (or the no_grad mark).
 *
 * vdev_op_exec() is the one path every op takes (the public functions come
 * through vdev_op_run(), which turns their handles into tensors and back):
 *   1. NULL input -> NULL, the first error kept (a dead handle: an error);
 *   2. choose the device (placement.h); bring inputs on other devices there
 *      (policy copy, counted) or fail (policy strict);
 *   3. the shape rule gives the output's shape and type;
 *   4. allocate the output on the device;
 *   5. run the kernel on the device's stream: the backend's own kernel when it
 *      has a kernel table (CUDA), else the host kernel via submit_host;
 *   6. record the op (placement summary, log, audit) and, when a tape is
 *      recording and an input needs a gradient, on the tape; for such an op
 *      the reads of the inputs whose values its gradient reads (grad_reads)
 *      are counted before step 5, so that a later write in place keeps the
 *      value read (tensor.h, "values a tape read"). */
#ifndef VDEV_OPS_H
#define VDEV_OPS_H

#include "ops/op_ids.h"
#include "tensor/tensor.h"

#include <string.h>

struct vdev_op_params {
    double f[4];
    int64_t i[4];
    int64_t j[4]; /* more integers: StridedSlice's strides */
};

/* A float carried in an op's i[] (the updates' weight decay), and back. */
static inline int64_t vdev_param_of_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (int64_t)u;
}
static inline float vdev_f32_of_param(int64_t bits)
{
    uint32_t u = (uint32_t)bits;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* What a gradient function gets: the forward op's inputs, output and
 * parameters, the gradient of its output, and which inputs' gradients the
 * caller needs (bit k: input k). A function may leave din[k] NULL for an
 * input whose bit is clear (the tape skips a product that feeds nothing it
 * was asked for); one that computes it anyway is correct, only slower. */
struct vdev_grad_args {
    enum vdev_op op;
    int n_in;
    unsigned need;
    const struct vdev_tens *in[VDEV_KERNEL_MAX_IN];
    const struct vdev_tens *out;
    const struct vdev_tens *dout;
    struct vdev_op_params p;
};

typedef void (*vdev_kernel_fn)(const struct vdev_kernel_args *a);
/* Fills din[k] for every input k that takes a gradient (NULL for the others,
 * e.g. labels), using ops; runs on the forward op's device. */
typedef enum vdev_status (*vdev_grad_fn)(const struct vdev_grad_args *g, struct vdev_tens **din);
/* Computes a->n_out, out_ndim/out_shape/out_dtype from the inputs and the
 * parameters; VDEV_ERR_SHAPE naming both shapes when they do not fit. */
typedef enum vdev_status (*vdev_shape_fn)(struct vdev_kernel_args *a);

#define VDEV_OP_NO_GRAD 1u  /* not differentiable (argmax, updates) */
#define VDEV_OP_VIEW 2u     /* output is a view of input 0 (reshape): no kernel */
#define VDEV_OP_INPLACE 4u  /* writes its inputs, no output (optimizer updates) */

struct vdev_op_def {
    const char *name;       /* "MatMul" */
    int n_in;
    unsigned flags;
    vdev_shape_fn shape;
    vdev_kernel_fn ref;     /* reference kernel: plain loops */
    vdev_kernel_fn host;    /* (optional) faster host kernel; default: ref */
    vdev_grad_fn grad;      /* NULL only with VDEV_OP_NO_GRAD */
    /* Bit i: grad reads input i's values, not only its shape (Mul reads both,
     * RealDiv b, Relu and Log x; AddV2, Sub, Identity, Reshape, Sum read
     * none); VDEV_GRAD_OUT: it reads the output's (Tanh, Exp, RealDiv...).
     * Only those reads are counted for the tape (tensor.h, "values a tape
     * read"): a write to a tensor that no gradient reads saves nothing, and
     * the gradient cannot fail for want of its value. */
    unsigned grad_reads;
    /* (optional) default: none. Checks of input values that no shape rule
     * sees (labels in range), run after the shape rule on the inputs as the
     * caller passed them; it reads them on the host where their backend
     * allows (cpu, sim) and accepts them unread elsewhere (CUDA). */
    enum vdev_status (*check)(const struct vdev_tens *const *in, const struct vdev_kernel_args *a);
};

/* grad_reads' bit for the output, after the inputs'. */
#define VDEV_GRAD_OUT (1u << VDEV_KERNEL_MAX_IN)

/* The table, indexed by enum vdev_op (ops_table.c). */
extern const struct vdev_op_def vdev_op_defs[VDEV_OP_COUNT];

/* Runs an op (see above); the new tensor belongs to the current scope. */
struct vdev_tens *vdev_op_exec(enum vdev_op op, const struct vdev_tens *const *in, int n_in,
                               const struct vdev_op_params *p);
/* Runs an in-place op on the device of in[0] (a variable); inputs on other
 * devices are brought there as for any op. */
enum vdev_status vdev_op_exec_inplace(enum vdev_op op, struct vdev_tens *const *in, int n_in,
                                      const struct vdev_op_params *p);
/* The same op on n operand lists ins[0..n) (n_in operands each, list k
 * with the parameters ps[k]), all or nothing as far as the checks go: every
 * list is checked (inputs, devices, strict placement, shapes) and every
 * input from another device copied before the first kernel runs, so a bad
 * list or a failed copy changes no operand. Only a kernel that fails once
 * running (a backend error) leaves the lists before it updated. */
enum vdev_status vdev_op_exec_inplace_all(enum vdev_op op, struct vdev_tens *const *const *ins,
                                          int n, int n_in, const struct vdev_op_params *const *ps);
/* The same with the caller's host scratch, at least
 * vdev_op_inplace_scratch_bytes(n) bytes aligned for pointers (NULL: taken
 * from the host when needed): then it allocates no host memory, so a caller
 * that made the scratch ahead cannot fail for want of it. Up to 32 lists
 * need none. */
enum vdev_status vdev_op_exec_inplace_all_in(enum vdev_op op, struct vdev_tens *const *const *ins,
                                             int n, int n_in,
                                             const struct vdev_op_params *const *ps,
                                             void *scratch);
size_t vdev_op_inplace_scratch_bytes(int n);
/* op on in[0..n_in) into out (made by the caller with the op's output
 * shape and dtype; the op runs on out's device): allocates nothing when
 * every input is on out's device. No tape records it. */
enum vdev_status vdev_op_exec_into(enum vdev_op op, const struct vdev_tens *const *in, int n_in,
                                   const struct vdev_op_params *p, struct vdev_tens *out);
/* Fills kernel args from tensors (shapes, pointers, dtypes). */
void vdev_kernel_args_fill(struct vdev_kernel_args *a, enum vdev_op op,
                           const struct vdev_tens *const *in, int n_in,
                           const struct vdev_op_params *p);

/* The same three on public handles, as the public functions and the tests
 * call them: a NULL input gives NULL (VDEV_ERR_INVALID_ARG from the in-place
 * form) with the error left as it was, a dead handle VDEV_ERR_INVALID_ARG. */
vdev_tensor_t *vdev_op_run(enum vdev_op op, const vdev_tensor_t *const *in, int n_in,
                           const struct vdev_op_params *p);
enum vdev_status vdev_op_run_inplace(enum vdev_op op, vdev_tensor_t *const *in, int n_in,
                                     const struct vdev_op_params *p);
/* Live handles only (the caller checked). */
void vdev_kernel_args_init(struct vdev_kernel_args *a, enum vdev_op op,
                           const vdev_tensor_t *const *in, int n_in,
                           const struct vdev_op_params *p);

/* Sqrt on a handle, as the public element-wise ops (ops_table.c): std::sqrt
 * per element, NaN below 0 (-inf included) and -0 for -0, where pow(x, 0.5)
 * gives +inf and +0. Exported from the shared library once include/vdev.h
 * declares it with VDEV_API; until then the tests and the library call it. */
vdev_tensor_t *vdev_sqrt(const vdev_tensor_t *a);

/* The BATCH_MATMUL op on two 3-D views [B,R,C] (a batch of 1 broadcast),
 * for vdev_batch_matmul (batch_matmul.c), which checks TensorFlow's rules
 * and makes the views. */
vdev_tensor_t *vdev_batch_matmul3(const vdev_tensor_t *x, const vdev_tensor_t *y, int ta, int tb);

/* Shape rules shared by many ops (exec.c). */
enum vdev_status vdev_shape_same_as_in0(struct vdev_kernel_args *a);   /* unary, f32 */
enum vdev_status vdev_shape_broadcast_b(struct vdev_kernel_args *a);   /* binary, f32 */
/* vdev_shape_broadcast_b's shapes and mode i[3], the dtypes unchecked, the
 * output of out_dtype (the comparisons' bool). */
enum vdev_status vdev_shape_broadcast_as(struct vdev_kernel_args *a, int out_dtype);
enum vdev_status vdev_shape_error(const struct vdev_kernel_args *a, const char *what);
/* VDEV_ERR_SHAPE for input k of the wrong dtype: "NAME: input #k (shape S)
 * is int32, expected float". */
enum vdev_status vdev_dtype_error(const struct vdev_kernel_args *a, int k, int want);
/* The same with the dtypes the op takes in words ("float or int32"). */
enum vdev_status vdev_dtypes_error(const struct vdev_kernel_args *a, int k, const char *want);

/* After an op on the tensors t[] that were found behind the handles in[]:
 * an op holds no reference to its inputs, so a free by another thread racing
 * it (a race in the caller's program) may have let a new tensor take the slot
 * the op then read. A freed handle stays dead, so checking each handle again
 * afterwards catches every such free: the op then fails (out dropped,
 * VDEV_ERR_INVALID_ARG "<op>: input #k was freed by another thread while the
 * op used it") instead of returning a result of another tensor's values.
 * vdev_op_freed_during is that failure (exec.c). */
vdev_tensor_t *vdev_op_freed_during(enum vdev_op op, int k, struct vdev_tens *out);
/* The first input whose handle no longer names its tensor, else -1. */
static inline int vdev_op_freed_input(const vdev_tensor_t *const *in, int n,
                                      const struct vdev_tens *const *t)
{
    for (int i = 0; i < n; i++)
        if (__builtin_expect(!vdev_handle_still(t[i], in[i]), 0))
            return i;
    return -1;
}
static inline vdev_tensor_t *vdev_op_result(enum vdev_op op, const vdev_tensor_t *const *in,
                                            int n, const struct vdev_tens *const *t,
                                            struct vdev_tens *out)
{
    int k = out ? vdev_op_freed_input(in, n, t) : -1;
    return k < 0 ? vdev_tens_handle(out) : vdev_op_freed_during(op, k, out);
}

/* A copy of t on d; with `record`, one a recording tape differentiates
 * through (vdev_tensor_to), else one it does not (vdev_stop_gradient). */
struct vdev_tens *vdev_op_copy_to(const struct vdev_tens *t, struct vdev_ldev *d, int record);

/* ---- the tape hook (src/autograd/ sets it) ---- */
struct vdev_op_record {
    enum vdev_op op;
    int n_in;
    const struct vdev_tens *in[VDEV_KERNEL_MAX_IN];     /* as the kernel read them (on dev) */
    const struct vdev_tens *target[VDEV_KERNEL_MAX_IN]; /* as the caller passed them: the
                                                           gradient flows to these */
    struct vdev_tens *out;
    struct vdev_op_params p;
    struct vdev_ldev *dev;  /* where it ran: its gradient runs there too */
    /* Bit i when the dispatcher counted the read of in[i] (the op's
     * grad_reads, vdev_tens_tape_read, before the kernel was queued), and the
     * version read; VDEV_GRAD_OUT and in_ver[VDEV_KERNEL_MAX_IN] for out.
     * The tape's to drop (vdev_tens_tape_unread) with the record once its
     * record() succeeds; the dispatcher's when that fails. */
    unsigned in_read;
    uint64_t in_ver[VDEV_KERNEL_MAX_IN + 1];
};
/* Thread-local: the recording tape and how it records; `paused`, the tape
 * vdev_tape_pause() paused on this thread (tape is then NULL: nothing
 * records). */
struct vdev_tape_hook {
    void *tape;
    enum vdev_status (*record)(void *tape, const struct vdev_op_record *r);
    /* NULL: every input that requires a gradient is recorded; else whether
     * input t is one the tape differentiates (a tape that watches only the
     * variables it was given: vdev_tape_watch) */
    int (*wants)(void *tape, const struct vdev_tens *t);
    void *paused;
};
extern _Thread_local struct vdev_tape_hook vdev_tape_hook;
/* Thread-local, for the tests: the entries the tape has compared while
 * looking tensors up (its hash probes, and every comparison of a search by
 * scan), so that a test can tell linear work from quadratic without a
 * clock. */
extern _Thread_local uint64_t vdev_tape_lookup_steps;
/* Thread-local: while the tape runs an op's gradient, that op's home (the
 * device of the variables it read, -1 for none), which every op of the
 * gradient takes as its own, so the placement audit credits dW = x^T.dY to
 * W's model and not to the model that made x; VDEV_NO_GRAD_HOME otherwise. */
#define VDEV_NO_GRAD_HOME (-2)
extern _Thread_local int vdev_grad_home;

#endif
