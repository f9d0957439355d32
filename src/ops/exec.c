/* exec.c — the dispatcher every op goes through (see ops.h for the steps).
 *
 * The fast path matters: a one-element add on the cpu backend should cost a
 * few hundred nanoseconds, tensor included. So the dispatcher does no
 * allocation besides the output tensor, calls host kernels inline on the cpu
 * backend, and submits a fixed-size argument block to a GPU's stream. The
 * handle forms (vdev_op_run, vdev_op_run_inplace) add one lock-free lookup
 * per input and one check of the runtime generation per op. */
#include "ops/ops.h"
#include "runtime/observe.h"
#include "runtime/placement.h"

#include <stdlib.h>
#include <string.h>

_Thread_local struct vdev_tape_hook vdev_tape_hook;
_Thread_local int vdev_grad_home = VDEV_NO_GRAD_HOME;

/* A host kernel and its arguments, as one block submitted to a stream; when
 * observed, the kernel is timed on the thread that runs it. */
struct host_call {
    vdev_kernel_fn fn;
    const char *name;
    int16_t dev_id;
    int8_t timed;
    struct vdev_kernel_args a;
};
_Static_assert(sizeof(struct host_call) <= VDEV_HOST_ARG_MAX,
               "kernel arguments must fit a stream slot");
/* the placement summary's table has a row per op (an op past it would count
 * outside the table) */
_Static_assert(VDEV_OP_COUNT <= VDEV_MAX_OP_TYPES, "raise VDEV_MAX_OP_TYPES (placement.h)");

static void host_trampoline(void *arg)
{
    const struct host_call *c = arg;
    if (!c->timed) {
        c->fn(&c->a);
        return;
    }
    uint64_t t0 = vdev_observe_now();
    c->fn(&c->a);
    vdev_observe_op(c->a.op, c->name, c->dev_id, t0, vdev_observe_now());
}

void vdev_kernel_args_fill(struct vdev_kernel_args *a, enum vdev_op op,
                           const struct vdev_tens *const *in, int n_in,
                           const struct vdev_op_params *p)
{
    memset(a, 0, sizeof *a);
    a->op = (int)op;
    a->n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        a->in[i] = in[i]->data;
        a->in_ndim[i] = in[i]->ndim;
        a->in_dtype[i] = (int)in[i]->dtype;
        for (int d = 0; d < VDEV_MAX_DIMS; d++)
            a->in_shape[i][d] = in[i]->shape[d];
    }
    if (p) {
        memcpy(a->f, p->f, sizeof a->f);
        memcpy(a->i, p->i, sizeof a->i);
        memcpy(a->j, p->j, sizeof a->j);
    }
}

void vdev_kernel_args_init(struct vdev_kernel_args *a, enum vdev_op op,
                           const vdev_tensor_t *const *in, int n_in,
                           const struct vdev_op_params *p)
{
    const struct vdev_tens *t[VDEV_KERNEL_MAX_IN] = {0};
    for (int i = 0; i < n_in && i < VDEV_KERNEL_MAX_IN; i++) {
        t[i] = vdev_tens_peek(in[i]);
        VDEV_ASSERT(t[i]); /* the caller checked its handles */
    }
    vdev_kernel_args_fill(a, op, t, n_in, p);
}

static enum vdev_status dispatch(struct vdev_ldev *dev, const struct vdev_op_def *def,
                                 const struct vdev_kernel_args *ka)
{
    struct vdev_backend *b = dev->backend;
    int timed = vdev_observe_on();
    if (b->ops->run_kernel) {
        /* timed as submitted: the device's own timing needs its events */
        uint64_t t0 = timed ? vdev_observe_now() : 0;
        enum vdev_status st = b->ops->run_kernel(b->ctx, dev->bdev, ka);
        if (timed)
            vdev_observe_op(ka->op, def->name, dev->id, t0, vdev_observe_now());
        return st;
    }
    vdev_kernel_fn fn = def->host ? def->host : def->ref;
    if (!b->ops->is_gpu) {
        /* the cpu backend's stream is the calling thread */
        if (!timed) {
            fn(ka);
            return VDEV_OK;
        }
        uint64_t t0 = vdev_observe_now();
        fn(ka);
        vdev_observe_op(ka->op, def->name, dev->id, t0, vdev_observe_now());
        return VDEV_OK;
    }
    struct host_call c;
    c.fn = fn;
    c.name = def->name;
    c.dev_id = (int16_t)dev->id;
    c.timed = (int8_t)timed;
    c.a = *ka;
    return vdev_backend_submit_host(b, dev->bdev, host_trampoline, &c, sizeof c);
}

/* The device of the variables an op's inputs derive from, or -1; in a
 * gradient, the home of the op it differentiates (vdev_grad_home). */
static int home_of(const struct vdev_tens *const *in, int n)
{
    if (vdev_grad_home != VDEV_NO_GRAD_HOME)
        return vdev_grad_home;
    for (int i = 0; i < n; i++)
        if (in[i]->is_variable)
            return in[i]->home;
    for (int i = 0; i < n; i++)
        if (in[i]->home >= 0)
            return in[i]->home;
    return -1;
}

/* VDEV_ERR_PLACEMENT under strict placement: input i of def is on another
 * device than dev, where the op runs (TensorFlow's words). */
static enum vdev_status strict_error(const struct vdev_op_def *def, int i,
                                     const struct vdev_tens *in, const struct vdev_ldev *dev)
{
    return vdev_error(VDEV_ERR_PLACEMENT,
                      "Tensors on conflicting devices: cannot compute %s as input #%d was "
                      "expected to be on %s but is actually on %s (operation running on %s). "
                      "Copy it explicitly with vdev_tensor_to() or vdev_identity() under a "
                      "device scope, or use VDEV_PLACEMENT=copy",
                      def->name, i, dev->long_name, in->dev->long_name, dev->long_name);
}

/* Brings every input to dev: copies (policy copy) or an error (strict).
 * tmp[i] is the copy made for input i (an input given twice shares the one
 * copy made for its first place); the caller passes tmp all NULL, so
 * whatever happens drop_tmp() may follow (it frees only what was made). */
static enum vdev_status gather_inputs(const struct vdev_op_def *def, struct vdev_ldev *dev,
                                      const struct vdev_tens *const *in, int n,
                                      const struct vdev_tens **use, struct vdev_tens **tmp,
                                      uint64_t *copied)
{
    *copied = 0;
    for (int i = 0; i < n; i++) {
        use[i] = in[i];
        if (in[i]->dev == dev)
            continue;
        /* Identity is the explicit copy, as in TensorFlow: exempt. */
        if (vdev_placement_policy_now() == VDEV_PLACEMENT_STRICT && def->n_in &&
            def != &vdev_op_defs[VDEV_OP_IDENTITY])
            return strict_error(def, i, in[i], dev);
        /* one input given twice (x + x) is copied once */
        int j = 0;
        while (j < i && !(in[j] == in[i] && tmp[j]))
            j++;
        if (j < i) {
            tmp[i] = tmp[j]; /* dropped once, by drop_tmp */
            use[i] = tmp[i];
            continue;
        }
        tmp[i] = vdev_tens_copy_to(in[i], dev);
        if (!tmp[i])
            return vdev_last_status();
        use[i] = tmp[i];
        *copied += in[i]->bytes;
    }
    return VDEV_OK;
}

/* Drops each tensor of tmp once: an entry that repeats an earlier one (the
 * shared copy of an input given twice) was dropped with it. A second
 * vdev_tens_drop would do nothing, its handle being dead already, so a
 * reference taken for the repeat would never be given back. */
static void drop_tmp(struct vdev_tens **tmp, int n)
{
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < i && tmp[j] != tmp[i])
            j++;
        if (tmp[i] && j == i)
            vdev_tens_drop(tmp[i]);
    }
}

/* ---- the values a tape record reads (tensor.h, "values a tape read") ---- */

/* Before the kernel of an op that a tape records is queued: for each input
 * whose value the op's gradient reads, the read is counted at its owner's
 * version (ver[i], bit i of *reads), so a later in-place write saves the value
 * first. An input that cannot be counted (a write to it is under way on
 * another thread, or a DLPack consumer may write it unseen) is copied on dev
 * instead, and the kernel and the record read the copy: the same value. An
 * input copied from another device is the op's own already. */
static enum vdev_status track_reads(const struct vdev_op_def *def, struct vdev_ldev *dev,
                                    const struct vdev_tens **use, struct vdev_tens **tmp,
                                    int n, uint64_t *ver, unsigned *reads)
{
    unsigned todo = 0;
    for (int i = 0; i < n; i++)
        if (((def->grad_reads >> i) & 1u) && !tmp[i])
            todo |= 1u << i;
    for (int i = 0; i < n; i++) {
        if (!((todo >> i) & 1u))
            continue;
        /* inputs of one owner (x * x) read one version, or one copy */
        const struct vdev_tens *x = use[i], *o = x->base ? x->base : x;
        unsigned same = 0;
        int k = 0;
        for (int j = i; j < n; j++)
            if (((todo >> j) & 1u) && (use[j]->base ? use[j]->base : use[j]) == o) {
                same |= 1u << j;
                k++;
            }
        todo &= ~same;
        uint64_t v;
        int counted = vdev_tens_tape_read(x, k, &v);
        if (counted < 0)
            return VDEV_ERR_OOM;
        if (counted) {
            for (int j = i; j < n; j++)
                if ((same >> j) & 1u)
                    ver[j] = v;
            *reads |= same;
            continue;
        }
        struct vdev_tens *c = vdev_tens_copy_to(x, dev);
        if (!c)
            return vdev_last_status();
        tmp[i] = c;
        use[i] = c;
        for (int j = i + 1; j < n; j++) {
            if (!((same >> j) & 1u))
                continue;
            if (use[j] != x && !(tmp[j] = vdev_tens_view(c, use[j]->shape, use[j]->ndim)))
                return vdev_last_status();
            use[j] = tmp[j] ? tmp[j] : c;
        }
    }
    return VDEV_OK;
}

static void untrack_reads(const struct vdev_tens *const *use, int n, const struct vdev_tens *out,
                          const uint64_t *ver, unsigned reads)
{
    for (int i = 0; i < n; i++)
        if ((reads >> i) & 1u)
            vdev_tens_tape_unread(use[i], ver[i]);
    if (reads & VDEV_GRAD_OUT)
        vdev_tens_tape_unread(out, ver[VDEV_KERNEL_MAX_IN]);
}

/* After the kernel was queued: an input written since its read was counted
 * (another thread's write) may have been read before or after that write, so
 * the kernel runs again into the same output (no one has it yet), on the
 * values saved for the versions counted: the output and the gradient then
 * see the same values. Without them (out of memory), as it ran. */
static void rerun_if_written(struct vdev_ldev *dev, const struct vdev_op_def *def,
                             struct vdev_kernel_args *ka, const struct vdev_tens *const *use,
                             int n, const uint64_t *ver, unsigned reads)
{
    unsigned saved = 0;
    for (int round = 0; round <= n; round++) {
        unsigned moved = 0;
        for (int i = 0; i < n; i++)
            if (((reads & ~saved) >> i) & 1u && vdev_tens_version(use[i]) != ver[i])
                moved |= 1u << i;
        if (!moved)
            return;
        char msg[512];
        enum vdev_status code = vdev_last_status();
        vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
        const struct vdev_tens *val[VDEV_KERNEL_MAX_IN] = {0};
        int ok = 1;
        for (int i = 0; i < n; i++)
            if ((moved >> i) & 1u) {
                ok &= (val[i] = vdev_tens_value_at(use[i], ver[i], def->name)) != NULL;
                if (val[i])
                    ka->in[i] = val[i]->data;
            }
        if (ok)
            dispatch(dev, def, ka);
        for (int i = 0; i < n; i++)
            if (val[i] && val[i] != use[i] && use[i]->base) /* a view made by value_at */
                vdev_tens_drop(vdev_tens_mut(val[i]));
        vdev_error(code, "%s", msg);
        if (!ok)
            return;
        saved |= moved;
    }
}

/* 0 (error set, or kept for a NULL input) unless the op gets n_in inputs. */
static int check_inputs(const struct vdev_op_def *def, const struct vdev_tens *const *in, int n_in)
{
    if (n_in != def->n_in) {
        vdev_error(VDEV_ERR_INTERNAL, "%s takes %d inputs, given %d", def->name, def->n_in, n_in);
        return 0;
    }
    for (int i = 0; i < n_in; i++)
        if (!in[i])
            return 0; /* keep the first error */
    return 1;
}

struct vdev_tens *vdev_op_exec(enum vdev_op op, const struct vdev_tens *const *in, int n_in,
                               const struct vdev_op_params *p)
{
    const struct vdev_op_def *def = &vdev_op_defs[op];
    if (!check_inputs(def, in, n_in))
        return NULL;
    struct vdev_ldev *devs[VDEV_KERNEL_MAX_IN] = {0}; /* gcc -O2 cannot see n_in >= 1 */
    for (int i = 0; i < n_in; i++)
        devs[i] = in[i]->dev;
    /* An explicit copy (Identity) starts fresh data with no home. */
    int home = op == VDEV_OP_IDENTITY ? -1 : home_of(in, n_in);
    struct vdev_ldev *dev = vdev_placement_choose(devs, n_in, home);
    if (!dev)
        return NULL; /* a stale scope names no device: error set */
    /* recorded on the tape: an input needs a gradient */
    int rec = 0;
    if (vdev_tape_hook.tape && !(def->flags & VDEV_OP_NO_GRAD))
        for (int i = 0; i < n_in; i++)
            rec |= in[i]->requires_grad &&
                   (!vdev_tape_hook.wants || vdev_tape_hook.wants(vdev_tape_hook.tape, in[i]));
    const struct vdev_tens *use[VDEV_KERNEL_MAX_IN];
    struct vdev_tens *tmp[VDEV_KERNEL_MAX_IN] = {0};
    uint64_t copied, ver[VDEV_KERNEL_MAX_IN + 1] = {0};
    unsigned reads = 0;
    if (gather_inputs(def, dev, in, n_in, use, tmp, &copied) != VDEV_OK ||
        (rec && def->grad_reads && track_reads(def, dev, use, tmp, n_in, ver, &reads) != VDEV_OK)) {
        untrack_reads(use, n_in, NULL, ver, reads);
        drop_tmp(tmp, n_in);
        return NULL;
    }
    struct vdev_kernel_args ka;
    vdev_kernel_args_fill(&ka, op, use, n_in, p);
    if (def->shape(&ka) != VDEV_OK || (def->check && def->check(in, &ka) != VDEV_OK)) {
        untrack_reads(use, n_in, NULL, ver, reads);
        drop_tmp(tmp, n_in);
        return NULL;
    }
    struct vdev_tens *out;
    if (def->flags & VDEV_OP_VIEW) {
        /* A view of a variable would show its later writes; TensorFlow's
         * reshape of a variable is a value, so a variable is copied first. */
        const struct vdev_tens *src = use[0];
        struct vdev_tens *copy = NULL;
        if ((src->base ? src->base : src)->is_variable &&
            !(src = copy = vdev_tens_copy_to(src, dev))) {
            drop_tmp(tmp, n_in);
            return NULL;
        }
        out = vdev_tens_view(src, ka.out_shape[0], ka.out_ndim[0]);
        if (copy)
            vdev_tens_drop(copy); /* the view holds it */
    } else {
        vdev_tensor_op_tag = def->name;
        out = vdev_tens_new(dev, (enum vdev_dtype)ka.out_dtype[0], ka.out_shape[0],
                            ka.out_ndim[0]);
        if (out) {
            ka.out[0] = out->data;
            if (out->numel && dispatch(dev, def, &ka) != VDEV_OK) {
                vdev_tens_drop(out);
                out = NULL;
            } else if (out->numel) {
                if (reads)
                    rerun_if_written(dev, def, &ka, use, n_in, ver, reads);
                /* a copy of out elsewhere waits for this op, not for what follows */
                if (dev->backend->ops->stream_position)
                    atomic_store_explicit(
                        &out->produced_at,
                        dev->backend->ops->stream_position(dev->backend->ctx, dev->bdev),
                        memory_order_release);
            }
        }
    }
    if (!out) {
        untrack_reads(use, n_in, NULL, ver, reads);
        drop_tmp(tmp, n_in);
        return NULL;
    }
    out->home = (int16_t)home;
    vdev_placement_record((int)op, def->name, dev, home, copied);

    if (rec) {
        out->requires_grad = 1;
        /* no one else has out yet: counted, unless it is copied in place */
        int counted = (def->grad_reads & VDEV_GRAD_OUT)
                          ? vdev_tens_tape_read(out, 1, &ver[VDEV_KERNEL_MAX_IN])
                          : 0;
        if (counted < 0) {
            untrack_reads(use, n_in, NULL, ver, reads);
            drop_tmp(tmp, n_in);
            vdev_tens_drop(out);
            return NULL;
        }
        if (counted)
            reads |= VDEV_GRAD_OUT;
        struct vdev_op_record r;
        memset(&r, 0, sizeof r);
        r.op = op;
        r.n_in = n_in;
        for (int i = 0; i < n_in; i++) {
            r.in[i] = use[i];
            r.target[i] = in[i];
            r.in_ver[i] = (reads >> i) & 1u ? ver[i] : 0;
        }
        r.in_ver[VDEV_KERNEL_MAX_IN] = reads & VDEV_GRAD_OUT ? ver[VDEV_KERNEL_MAX_IN] : 0;
        r.in_read = reads; /* the record's now */
        r.out = out;
        if (p)
            r.p = *p;
        r.dev = dev;
        if (vdev_tape_hook.record(vdev_tape_hook.tape, &r) != VDEV_OK) {
            untrack_reads(use, n_in, out, ver, reads);
            drop_tmp(tmp, n_in);
            vdev_tens_drop(out);
            return NULL;
        }
    }
    if (atomic_load_explicit(&vdev_tens_host_exports_live, memory_order_relaxed))
        for (int i = 0; i < n_in; i++)
            vdev_tens_after_read_exported(in[i], dev);
    drop_tmp(tmp, n_in);
    return out;
}

/* vdev_tensor_to and vdev_stop_gradient (ops_table.c): a copy of t on d. With
 * `record`, a recording tape that needs t's gradient records it as an
 * Identity, whose gradient passes dout back to t (on t's device, as every
 * gradient reaches its target), as TensorFlow differentiates its copies
 * between devices; it is not an op: placement logs and op counts leave it
 * out, and the copy is counted as one. Without `record`, gradients stop at
 * it (tf.stop_gradient). */
struct vdev_tens *vdev_op_copy_to(const struct vdev_tens *t, struct vdev_ldev *d, int record)
{
    struct vdev_tens *c = vdev_tens_copy_to(t, d);
    if (!c || !record || !vdev_tape_hook.tape || !t->requires_grad ||
        (vdev_tape_hook.wants && !vdev_tape_hook.wants(vdev_tape_hook.tape, t)))
        return c;
    c->requires_grad = 1;
    struct vdev_op_record r;
    memset(&r, 0, sizeof r);
    r.op = VDEV_OP_IDENTITY;
    r.n_in = 1;
    r.in[0] = r.target[0] = t;
    r.out = c;
    r.dev = d;
    if (vdev_tape_hook.record(vdev_tape_hook.tape, &r) != VDEV_OK) {
        vdev_tens_drop(c);
        return NULL;
    }
    return c;
}

/* What an in-place op checks before it touches anything: its inputs, the
 * written operands' device (in[0]'s), strict placement for the others, and
 * the shapes. VDEV_OK or the op's error. */
static enum vdev_status check_inplace(const struct vdev_op_def *def, struct vdev_tens *const *in,
                                      int n_in, const struct vdev_op_params *p)
{
    const struct vdev_tens *const *cin = (const struct vdev_tens *const *)in;
    if (!check_inputs(def, cin, n_in))
        return vdev_last_status() != VDEV_OK ? vdev_last_status()
                                             : vdev_error(VDEV_ERR_INVALID_ARG, "NULL tensor");
    struct vdev_ldev *dev = in[0]->dev;
    /* Written operands (all but input 1, the gradient) must live with the
     * variable: the kernel writes them on its device's stream. */
    for (int i = 0; i < n_in; i++)
        if (i != 1 && in[i]->dev != dev)
            return vdev_error(VDEV_ERR_PLACEMENT,
                              "%s: operand #%d is on %s but the variable is on %s; an update "
                              "writes its operands on the variable's device",
                              def->name, i, in[i]->dev->name, dev->name);
    if (vdev_placement_policy_now() == VDEV_PLACEMENT_STRICT)
        for (int i = 0; i < n_in; i++)
            if (in[i]->dev != dev)
                return strict_error(def, i, in[i], dev);
    /* The shape rule reads shapes and dtypes only, so the inputs as they are
     * (before any copy) answer it. */
    struct vdev_kernel_args ka;
    vdev_kernel_args_fill(&ka, (enum vdev_op)(def - vdev_op_defs), cin, n_in, p);
    return def->shape(&ka);
}

/* One checked in-place op with its inputs gathered: use[] (tmp[] the copies
 * made), then the kernel. */
struct inplace {
    const struct vdev_tens *use[VDEV_KERNEL_MAX_IN];
    struct vdev_tens *tmp[VDEV_KERNEL_MAX_IN];
    uint64_t copied;
};

static enum vdev_status run_inplace(const struct vdev_op_def *def, struct vdev_tens *const *in,
                                    int n_in, const struct vdev_op_params *p,
                                    const struct inplace *g)
{
    struct vdev_ldev *dev = in[0]->dev;
    for (int i = 0; i < n_in; i++)
        if (i != 1)
            vdev_tens_write_begin(in[i], dev);
    struct vdev_kernel_args ka;
    vdev_kernel_args_fill(&ka, (enum vdev_op)(def - vdev_op_defs), g->use, n_in, p);
    enum vdev_status st = def->shape(&ka);
    if (st == VDEV_OK) {
        /* The written operands are the inputs themselves. */
        for (int i = 0; i < n_in && i < VDEV_KERNEL_MAX_OUT; i++)
            ka.out[i] = in[i]->data;
        for (int i = 0; i < n_in; i++)
            if (i != 1)
                in[i]->host_written = 0;
        if (in[0]->numel)
            st = dispatch(dev, def, &ka);
    }
    for (int i = 0; i < n_in; i++)
        if (i != 1)
            vdev_tens_write_end(in[i]);
        else
            vdev_tens_after_read(in[i], dev);
    if (st == VDEV_OK)
        vdev_placement_record((int)(def - vdev_op_defs), def->name, dev,
                              home_of((const struct vdev_tens *const *)in, n_in), g->copied);
    return st;
}

enum vdev_status vdev_op_exec_inplace(enum vdev_op op, struct vdev_tens *const *in, int n_in,
                                      const struct vdev_op_params *p)
{
    return vdev_op_exec_inplace_all(op, &in, 1, n_in, &p);
}

#define INPLACE_ON_STACK 32

size_t vdev_op_inplace_scratch_bytes(int n)
{
    return n <= INPLACE_ON_STACK ? 0 : (size_t)n * sizeof(struct inplace);
}

enum vdev_status vdev_op_exec_inplace_all(enum vdev_op op, struct vdev_tens *const *const *ins,
                                          int n, int n_in, const struct vdev_op_params *const *ps)
{
    return vdev_op_exec_inplace_all_in(op, ins, n, n_in, ps, NULL);
}

enum vdev_status vdev_op_exec_inplace_all_in(enum vdev_op op, struct vdev_tens *const *const *ins,
                                             int n, int n_in,
                                             const struct vdev_op_params *const *ps,
                                             void *scratch)
{
    const struct vdev_op_def *def = &vdev_op_defs[op];
    enum vdev_status st = VDEV_OK;
    for (int k = 0; k < n && st == VDEV_OK; k++)
        st = check_inplace(def, ins[k], n_in, ps[k]);
    if (st != VDEV_OK || n <= 0)
        return st;
    /* on the stack for a model's usual number of variables (an optimizer
     * step comes here once), else in the caller's scratch or allocated */
    struct inplace small[INPLACE_ON_STACK];
    struct inplace *g = n <= INPLACE_ON_STACK ? small
                        : scratch                ? scratch
                                                 : vdev_malloc((size_t)n * sizeof *g);
    if (!g)
        return vdev_error(VDEV_ERR_OOM, "%s: out of host memory for %d updates", def->name, n);
    memset(g, 0, (size_t)n * sizeof *g);
    /* Every copy before any kernel: a copy that fails (device memory) leaves
     * every operand as it was. */
    int k = 0;
    for (; k < n && st == VDEV_OK; k++)
        st = gather_inputs(def, ins[k][0]->dev, (const struct vdev_tens *const *)ins[k], n_in,
                           g[k].use, g[k].tmp, &g[k].copied);
    for (int j = 0; j < n && st == VDEV_OK; j++)
        st = run_inplace(def, ins[j], n_in, ps[j], &g[j]);
    for (int j = 0; j < k; j++)
        drop_tmp(g[j].tmp, n_in);
    if (g != small && g != scratch)
        free(g);
    return st;
}

/* An op into out, a tensor the caller made (the op's output shape and
 * dtype) on the device where it runs: nothing allocated once every input is
 * on out's device (an input elsewhere is copied there, as for any op). Not
 * recorded on a tape: for the library's own scratch work (the optimizers'
 * gradient clipping), whose inputs need no gradient. */
enum vdev_status vdev_op_exec_into(enum vdev_op op, const struct vdev_tens *const *in, int n_in,
                                   const struct vdev_op_params *p, struct vdev_tens *out)
{
    const struct vdev_op_def *def = &vdev_op_defs[op];
    if (!check_inputs(def, in, n_in))
        return vdev_last_status() != VDEV_OK ? vdev_last_status()
                                             : vdev_error(VDEV_ERR_INVALID_ARG, "NULL tensor");
    if (def->flags & VDEV_OP_VIEW)
        return vdev_error(VDEV_ERR_INTERNAL, "%s is a view: nothing to run into", def->name);
    struct vdev_ldev *dev = out->dev;
    const struct vdev_tens *use[VDEV_KERNEL_MAX_IN];
    struct vdev_tens *tmp[VDEV_KERNEL_MAX_IN] = {0};
    uint64_t copied;
    enum vdev_status st = gather_inputs(def, dev, in, n_in, use, tmp, &copied);
    struct vdev_kernel_args ka;
    if (st == VDEV_OK) {
        vdev_kernel_args_fill(&ka, op, use, n_in, p);
        st = def->shape(&ka);
    }
    if (st == VDEV_OK &&
        (ka.out_dtype[0] != (int)out->dtype || ka.out_ndim[0] != out->ndim ||
         memcmp(ka.out_shape[0], out->shape, (size_t)out->ndim * sizeof out->shape[0])))
        st = vdev_error(VDEV_ERR_INTERNAL, "%s: the output made for it has another shape",
                        def->name);
    if (st == VDEV_OK) {
        vdev_tens_write_begin(out, dev);
        ka.out[0] = out->data;
        out->host_written = 0;
        if (out->numel)
            st = dispatch(dev, def, &ka);
        vdev_tens_write_end(out);
        for (int i = 0; i < n_in; i++)
            vdev_tens_after_read(in[i], dev);
    }
    if (st == VDEV_OK)
        vdev_placement_record((int)op, def->name, dev, home_of(in, n_in), copied);
    drop_tmp(tmp, n_in);
    return st;
}

/* ---- the handle forms ---- */

/* The tensors behind n handles: 0 with the error kept for a NULL one, set
 * for a dead or stale one. */
static int lookup(const struct vdev_op_def *def, const vdev_tensor_t *const *in, int n,
                  const struct vdev_tens **t)
{
    if (n < 0 || n > VDEV_KERNEL_MAX_IN) {
        vdev_error(VDEV_ERR_INTERNAL, "%s takes %d inputs, given %d", def->name, def->n_in, n);
        return 0;
    }
    uint32_t gen = vdev_runtime_generation();
    int running = vdev_is_initialized();
    for (int i = 0; i < n; i++) {
        if (!in[i])
            return 0; /* keep the first error */
        t[i] = vdev_tens_peek(in[i]);
        if (!t[i] || t[i]->rgen != gen || !running) {
            vdev_tens_input_error(in[i], def->name, i);
            return 0;
        }
    }
    return 1;
}

vdev_tensor_t *vdev_op_freed_during(enum vdev_op op, int k, struct vdev_tens *out)
{
    if (out)
        vdev_tens_drop(out);
    vdev_error(VDEV_ERR_INVALID_ARG,
               "%s: input #%d was freed by another thread while the op used it",
               vdev_op_defs[op].name, k);
    return NULL;
}

vdev_tensor_t *vdev_op_run(enum vdev_op op, const vdev_tensor_t *const *in, int n_in,
                           const struct vdev_op_params *p)
{
    const struct vdev_tens *t[VDEV_KERNEL_MAX_IN];
    if (!lookup(&vdev_op_defs[op], in, n_in, t))
        return NULL;
    return vdev_op_result(op, in, n_in, t, vdev_op_exec(op, t, n_in, p));
}

enum vdev_status vdev_op_run_inplace(enum vdev_op op, vdev_tensor_t *const *in, int n_in,
                                     const struct vdev_op_params *p)
{
    const struct vdev_tens *t[VDEV_KERNEL_MAX_IN];
    if (!lookup(&vdev_op_defs[op], (const vdev_tensor_t *const *)in, n_in, t))
        return vdev_last_status() != VDEV_OK ? vdev_last_status()
                                             : vdev_error(VDEV_ERR_INVALID_ARG, "NULL tensor");
    struct vdev_tens *w[VDEV_KERNEL_MAX_IN];
    for (int i = 0; i < n_in; i++)
        w[i] = vdev_tens_mut(t[i]);
    enum vdev_status st = vdev_op_exec_inplace(op, w, n_in, p);
    int k = st == VDEV_OK ? vdev_op_freed_input((const vdev_tensor_t *const *)in, n_in, t) : -1;
    if (k >= 0)
        vdev_op_freed_during(op, k, NULL);
    return k >= 0 ? VDEV_ERR_INVALID_ARG : st;
}

/* ---- shape rules shared by many ops ---- */

enum vdev_status vdev_shape_error(const struct vdev_kernel_args *a, const char *what)
{
    char s0[96], s1[96] = "";
    vdev_shape_str(a->in_shape[0], a->in_ndim[0], s0, sizeof s0);
    if (a->n_in > 1)
        vdev_shape_str(a->in_shape[1], a->in_ndim[1], s1, sizeof s1);
    if (a->n_in > 1)
        return vdev_error(VDEV_ERR_SHAPE, "%s: incompatible shapes %s and %s (%s)",
                          vdev_op_defs[a->op].name, s0, s1, what);
    return vdev_error(VDEV_ERR_SHAPE, "%s: bad input shape %s (%s)", vdev_op_defs[a->op].name, s0,
                      what);
}

enum vdev_status vdev_dtype_error(const struct vdev_kernel_args *a, int k, int want)
{
    return vdev_dtypes_error(a, k, vdev_dtype_name((enum vdev_dtype)want));
}

enum vdev_status vdev_dtypes_error(const struct vdev_kernel_args *a, int k, const char *want)
{
    char s[96];
    vdev_shape_str(a->in_shape[k], a->in_ndim[k], s, sizeof s);
    return vdev_error(VDEV_ERR_SHAPE, "%s: input #%d (shape %s) is %s, expected %s",
                      vdev_op_defs[a->op].name, k, s,
                      vdev_dtype_name((enum vdev_dtype)a->in_dtype[k]), want);
}
