/* comm.c — communicators: making one over a list of logical devices (and
 * choosing the implementation that serves them: nccl.c, else the ring), the
 * public vdev_comm_*
 * calls, and vdev_coll_tensors, which turns a rank's tensors into the
 * buffers of a call (coll.h) for the public calls and the strategy alike.
 *
 * Public communicators are checked handles (base/handles.h), as tensors are:
 * a freed or foreign handle is refused without touching freed memory. The
 * handle's payload points to the communicator, so a strategy can hand out a
 * handle to a communicator it owns (vdev_strategy_communicator) and kill it
 * before freeing the communicator.
 *
 * A rank's own problem with its arguments (a dead tensor, one on another
 * device) is not returned at once: the rank still enters the call with the
 * problem as its status, so that every rank fails the call together instead
 * of waiting for it. Only a bad communicator or rank, which leave no call to
 * enter, fail alone. */
#include "coll/coll.h"

#include <math.h>
#include <string.h>

struct comm_slot {
    struct vdev_coll_comm *c;
    int owned;                 /* freed with the handle (vdev_comm_new), else borrowed */
};

static struct vdev_handle_table comms = VDEV_HANDLE_TABLE("communicator", 13, struct comm_slot);

const char *vdev_coll_kind_name(enum vdev_coll_kind k)
{
    static const char *const names[VDEV_COLL_KIND_COUNT] = {"all-reduce", "broadcast",
                                                            "all-gather", "barrier"};
    return (unsigned)k < VDEV_COLL_KIND_COUNT ? names[k] : "collective";
}

/* ---- making and freeing ---- */

/* TensorFlow's tuple of names, "('/job:...', '/job:...')", into buf. */
static void tuple_of(struct vdev_ldev *const *devs, int n, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s'%s'", i ? ", " : "", devs[i]->long_name);
    if (k < cap)
        snprintf(buf + k, cap - k, n == 1 ? ",)" : ")");
}

enum vdev_status vdev_coll_comm_make(struct vdev_ldev *const *devs, int n,
                                     struct vdev_coll_comm **out)
{
    /* NCCL where it serves (nccl.c); the ring serves every set of devices
     * vdev has (one backend). */
    enum vdev_status st = vdev_coll_nccl_make(devs, n, out);
    if (st != VDEV_ERR_UNSUPPORTED)
        return st;
    return vdev_coll_comm_make_with(&vdev_coll_ring_ops, devs, n, out);
}

enum vdev_status vdev_coll_comm_make_with(const struct vdev_coll_ops *ops,
                                          struct vdev_ldev *const *devs, int n,
                                          struct vdev_coll_comm **out)
{
    *out = NULL;
    if (!ops || ops->api_version != VDEV_COLL_API_VERSION)
        return vdev_error(VDEV_ERR_UNSUPPORTED, "a collectives implementation of API version %d; "
                                                "vdev needs %d",
                          ops ? ops->api_version : -1, VDEV_COLL_API_VERSION);
    if (n < 1)
        return vdev_error(VDEV_ERR_INVALID_ARG, "Must specify at least one device.");
    if (n > VDEV_COLL_MAX_RANKS)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%d devices: a communicator has at most %d", n,
                          VDEV_COLL_MAX_RANKS);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (devs[i] == devs[j]) {
                char t[400];
                tuple_of(devs, n, t, sizeof t);
                return vdev_error(VDEV_ERR_INVALID_ARG,
                                  "No duplicates allowed in `devices` argument: %s", t);
            }
    for (int i = 1; i < n; i++)
        if (devs[i]->backend != devs[0]->backend)
            return vdev_error(VDEV_ERR_UNSUPPORTED,
                              "collectives need devices of one backend: %s is on the %s backend, "
                              "%s on the %s backend",
                              devs[0]->name, devs[0]->backend->ops->name, devs[i]->name,
                              devs[i]->backend->ops->name);
    struct vdev_coll_comm *c = vdev_calloc(1, sizeof *c);
    struct vdev_ldev **d = vdev_calloc((size_t)n, sizeof *d);
    if (!c || !d) {
        free(c);
        free(d);
        return vdev_error(VDEV_ERR_OOM, "out of host memory making a communicator");
    }
    memcpy(d, devs, (size_t)n * sizeof *d);
    c->n = n;
    c->n_global = n;
    c->first = 0;
    c->devs = d;
    c->rgen = vdev_runtime_generation();
    atomic_init(&c->timeout_ns, (uint64_t)(VDEV_COMM_DEFAULT_TIMEOUT_S * 1e9));
    c->ops = ops;
    enum vdev_status st = c->ops->create(c, &c->ctx);
    if (st != VDEV_OK) {
        free(d);
        free(c);
        return st;
    }
    *out = c;
    return VDEV_OK;
}

void vdev_coll_comm_free(struct vdev_coll_comm *c)
{
    if (!c)
        return;
    c->ops->destroy(c->ctx);
    free(c->devs);
    free(c);
}

vdev_comm_t *vdev_coll_comm_publish(struct vdev_coll_comm *c)
{
    uint64_t h;
    struct comm_slot *s = vdev_handle_alloc(&comms, &h);
    if (!s)
        return NULL;
    s->c = c;
    s->owned = 0;
    return (vdev_comm_t *)(uintptr_t)h;
}

void vdev_coll_comm_unpublish(vdev_comm_t *h)
{
    struct comm_slot *s = vdev_handle_get(&comms, h);
    if (s)
        vdev_handle_release(&comms, s);
}

/* The communicator behind h for `fn`, or NULL with VDEV_ERR_INVALID_ARG. */
static struct vdev_coll_comm *comm_of(const vdev_comm_t *h, const char *fn)
{
    struct comm_slot *s = vdev_handle_get(&comms, h);
    if (!s) {
        vdev_error(VDEV_ERR_INVALID_ARG, h ? "%s: not a live communicator (freed already, or "
                                             "not a communicator)"
                                           : "%s: communicator is NULL",
                   fn);
        return NULL;
    }
    if (vdev_runtime_refuse_forked(fn)) /* the parent's: its devices stayed there */
        return NULL;
    if (s->c->rgen != vdev_runtime_generation() || !vdev_is_initialized()) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: the communicator belongs to a runtime that was "
                                         "shut down (made before vdev_shutdown)",
                   fn);
        return NULL;
    }
    return s->c;
}

VDEV_API enum vdev_status vdev_comm_new(const char *const *devices, int n, vdev_comm_t **out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_comm_new: out is NULL");
    *out = NULL;
    if (n < 0 || (n > 0 && !devices))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_comm_new: devices is %s and n %d",
                          devices ? "set" : "NULL", n);
    if (n == 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "Must specify at least one device.");
    if (n > VDEV_COLL_MAX_RANKS)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_comm_new: %d devices; at most %d", n,
                          VDEV_COLL_MAX_RANKS);
    struct vdev_ldev *devs[VDEV_COLL_MAX_RANKS];
    for (int i = 0; i < n; i++) {
        enum vdev_status st = vdev_runtime_find(devices[i], &devs[i]);
        if (st != VDEV_OK)
            return st;
    }
    struct vdev_coll_comm *c;
    enum vdev_status st = vdev_coll_comm_make(devs, n, &c);
    if (st != VDEV_OK)
        return st;
    uint64_t h;
    struct comm_slot *s = vdev_handle_alloc(&comms, &h);
    if (!s) {
        vdev_coll_comm_free(c);
        return VDEV_ERR_OOM;
    }
    s->c = c;
    s->owned = 1;
    *out = (vdev_comm_t *)(uintptr_t)h;
    return VDEV_OK;
}

VDEV_API void vdev_comm_free(vdev_comm_t *h)
{
    if (!h)
        return;
    struct comm_slot *s = vdev_handle_get(&comms, h);
    if (!s) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_comm_free: not a live communicator (freed "
                                         "already, or not a communicator)");
        return;
    }
    if (!s->owned) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_comm_free: the communicator belongs to a "
                                         "strategy; vdev_strategy_free frees it");
        return;
    }
    if (!vdev_handle_kill(&comms, s, (uint64_t)(uintptr_t)h)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_comm_free: not a live communicator (freed "
                                         "already, or not a communicator)");
        return;
    }
    struct vdev_coll_comm *c = s->c;
    vdev_handle_release(&comms, s);
    if (vdev_runtime_forked_from())
        return; /* a forked child: its buffers and streams are the parent's; the handle goes */
    /* after a shutdown its devices are gone, but its host state is not */
    vdev_coll_comm_free(c);
}

VDEV_API int vdev_comm_size(const vdev_comm_t *h)
{
    const struct vdev_coll_comm *c = comm_of(h, "vdev_comm_size");
    return c ? c->n : -1;
}

VDEV_API const char *vdev_comm_device(const vdev_comm_t *h, int rank)
{
    const struct vdev_coll_comm *c = comm_of(h, "vdev_comm_device");
    if (!c)
        return NULL;
    if (rank < 0 || rank >= c->n) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_comm_device: rank %d of a communicator of %d "
                                         "ranks",
                   rank, c->n);
        return NULL;
    }
    return c->devs[rank]->name;
}

VDEV_API const char *vdev_comm_implementation(const vdev_comm_t *h)
{
    const struct vdev_coll_comm *c = comm_of(h, "vdev_comm_implementation");
    return c ? c->ops->name : NULL;
}

VDEV_API enum vdev_status vdev_comm_set_timeout(vdev_comm_t *h, double seconds)
{
    struct vdev_coll_comm *c = comm_of(h, "vdev_comm_set_timeout");
    if (!c)
        return vdev_last_status(); /* invalid, or a forked child */
    if (!(seconds > 0) || !isfinite(seconds) || seconds > 1e9)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_comm_set_timeout: %g seconds (a timeout "
                                                "is > 0 and at most 1e9)",
                          seconds);
    uint64_t ns = (uint64_t)(seconds * 1e9);
    atomic_store_explicit(&c->timeout_ns, ns ? ns : 1, memory_order_relaxed);
    return VDEV_OK;
}

/* ---- calls ---- */

/* Whether a call writes the rank's tensor #i: every one of an all-reduce,
 * a broadcast's but the root's (which the others read), an all-gather's
 * output (#1) and not its input. */
static int writes(const struct vdev_coll_comm *c, int rank, enum vdev_coll_kind kind, int root,
                  int i)
{
    if (kind == VDEV_COLL_BROADCAST)
        return c->first + rank != root;
    return kind != VDEV_COLL_ALL_GATHER || i == 1;
}

enum vdev_status vdev_coll_tensors(struct vdev_coll_comm *c, int rank, enum vdev_coll_kind kind,
                                   enum vdev_reduce_op op, int root,
                                   struct vdev_tens *const *tensors, int n, const char *what,
                                   enum vdev_status status, const char *why, int *origin)
{
    struct vdev_coll_buf stack_bufs[16], *bufs = stack_bufs;
    char msg[512];
    const struct vdev_ldev *dev = c->devs[rank];
    if (status == VDEV_OK && n > (int)VDEV_ARRAY_LEN(stack_bufs)) {
        bufs = vdev_malloc((size_t)n * sizeof *bufs);
        if (!bufs) {
            bufs = stack_bufs;
            status = VDEV_ERR_OOM;
            snprintf(msg, sizeof msg, "%s: out of host memory for %d tensors", what, n);
            why = msg;
        }
    }
    for (int i = 0; status == VDEV_OK && i < n; i++) {
        const struct vdev_tens *t = tensors[i];
        if (t->dev != dev) {
            status = VDEV_ERR_INVALID_ARG;
            snprintf(msg, sizeof msg, "%s: tensor #%d is on %s, not on the rank's device %s", what,
                     i, t->dev->name, dev->name);
        } else if (kind == VDEV_COLL_ALL_REDUCE && t->dtype != VDEV_F32) {
            status = VDEV_ERR_INVALID_ARG;
            snprintf(msg, sizeof msg, "%s: tensor #%d is %s; all-reduce takes float tensors",
                     what, i, vdev_dtype_name(t->dtype));
        } else {
            struct vdev_coll_buf *b = &bufs[i];
            b->data = t->data;
            b->count = (uint64_t)t->numel;
            b->dtype = t->dtype;
            b->ndim = t->ndim;
            memcpy(b->shape, t->shape, sizeof b->shape);
            continue;
        }
        why = msg;
    }
    if (status == VDEV_OK && kind == VDEV_COLL_ALL_GATHER) {
        const struct vdev_tens *in = tensors[0], *out = tensors[1];
        if (out->numel != in->numel * c->n_global) {
            status = VDEV_ERR_INVALID_ARG;
            snprintf(msg, sizeof msg, "%s: out has %lld elements; gathering %lld elements from %d "
                                      "ranks needs %lld",
                     what, (long long)out->numel, (long long)in->numel, c->n_global,
                     (long long)(in->numel * c->n_global));
            why = msg;
        } else if (out->dtype != in->dtype) {
            status = VDEV_ERR_INVALID_ARG;
            snprintf(msg, sizeof msg, "%s: out is %s but in is %s", what,
                     vdev_dtype_name(out->dtype), vdev_dtype_name(in->dtype));
            why = msg;
        }
    }
    /* Collectives write in place, as any in-place write (tensor.h): begun
     * once the rank's own checks passed (a local failure changes nothing),
     * so a tape that read a tensor keeps the value it read, and one that
     * reads it meanwhile reads a copy; ended once the call returned, failed
     * or not (its copies and kernels are queued by then). */
    int begun = status == VDEV_OK;
    for (int i = 0; begun && i < n; i++)
        if (writes(c, rank, kind, root, i))
            vdev_tens_write_begin(tensors[i], dev);
    struct vdev_coll_call call = {.kind = kind,
                                  .op = op,
                                  .root = root,
                                  .bufs = bufs,
                                  .n_bufs = status == VDEV_OK ? n : 0,
                                  .what = what,
                                  .status = status,
                                  .why = why};
    enum vdev_status st = c->ops->run(c->ctx, rank, &call, origin);
    if (bufs != stack_bufs)
        free(bufs);
    /* What the call wrote (or may have written, when it failed while data
     * moved) was written by copies and kernels, not by the host. */
    for (int i = 0; begun && i < n; i++)
        if (writes(c, rank, kind, root, i)) {
            vdev_tens_mut(tensors[i])->host_written = 0;
            vdev_tens_write_end(tensors[i]);
        }
    /* What it only read (a broadcast's root, an all-gather's in) may be
     * exported as host memory, whose consumer may write it as soon as the
     * call returns: the reads queued on the streams (this rank's and, through
     * the events the contract has the rank's stream wait on, every other
     * rank's) must be done by then (vdev_tens_after_read). The written ones
     * waited in vdev_tens_write_end. One load while nothing is exported. */
    if (begun && atomic_load_explicit(&vdev_tens_host_exports_live, memory_order_relaxed))
        for (int i = 0; i < n; i++)
            if (!writes(c, rank, kind, root, i))
                vdev_tens_after_read_exported(tensors[i], dev);
    return st;
}

/* The comm and rank of a public call, or NULL (error set). */
static struct vdev_coll_comm *call_comm(const vdev_comm_t *h, int rank, const char *fn)
{
    struct vdev_coll_comm *c = comm_of(h, fn);
    if (c && (rank < 0 || rank >= c->n)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: rank %d of a communicator of %d ranks", fn, rank,
                   c->n);
        return NULL;
    }
    return c;
}

/* The tensors behind n handles; a local failure (status and message) when
 * one cannot be used. */
static enum vdev_status tensors_of(vdev_tensor_t *const *h, int n, const char *fn,
                                   struct vdev_tens **t, char *msg, size_t cap)
{
    if (n < 0 || (n > 0 && !h)) {
        snprintf(msg, cap, "%s: tensors is %s and n %d", fn, h ? "set" : "NULL", n);
        return VDEV_ERR_INVALID_ARG;
    }
    for (int i = 0; i < n; i++) {
        t[i] = vdev_tens_use(h[i], fn);
        if (!t[i]) {
            snprintf(msg, cap, "tensor #%d: %s", i, vdev_last_error());
            return VDEV_ERR_INVALID_ARG;
        }
    }
    return VDEV_OK;
}

/* A call on a list of tensor handles (all-reduce, broadcast). */
static enum vdev_status call_list(vdev_comm_t *h, int rank, enum vdev_coll_kind kind,
                                  enum vdev_reduce_op op, int root, vdev_tensor_t *const *tensors,
                                  int n, const char *fn)
{
    struct vdev_coll_comm *c = call_comm(h, rank, fn);
    if (!c)
        return vdev_last_status(); /* invalid, or a forked child */
    char msg[512] = "";
    struct vdev_tens *stack_t[16] = {0}, **t = stack_t;
    enum vdev_status status = VDEV_OK;
    if (kind == VDEV_COLL_ALL_REDUCE && (unsigned)op >= VDEV_REDUCE_OP_COUNT) {
        status = VDEV_ERR_INVALID_ARG;
        snprintf(msg, sizeof msg, "%s: unknown reduce op %d", fn, (int)op);
    } else if (kind == VDEV_COLL_BROADCAST && (root < 0 || root >= c->n_global)) {
        status = VDEV_ERR_INVALID_ARG;
        snprintf(msg, sizeof msg, "%s: root %d of a communicator of %d ranks", fn, root,
                 c->n_global);
    } else if (n > (int)VDEV_ARRAY_LEN(stack_t) && !(t = vdev_malloc((size_t)n * sizeof *t))) {
        t = stack_t;
        status = VDEV_ERR_OOM;
        snprintf(msg, sizeof msg, "%s: out of host memory for %d tensors", fn, n);
    } else {
        status = tensors_of(tensors, n, fn, t, msg, sizeof msg);
    }
    int origin;
    enum vdev_status st = vdev_coll_tensors(c, rank, kind, op, root, t, n, fn, status,
                                            status == VDEV_OK ? NULL : msg, &origin);
    if (t != stack_t)
        free(t);
    return st;
}

VDEV_API enum vdev_status vdev_comm_all_reduce(vdev_comm_t *comm, int rank,
                                               vdev_tensor_t *const *tensors, int n,
                                               enum vdev_reduce_op op)
{
    return call_list(comm, rank, VDEV_COLL_ALL_REDUCE, op, 0, tensors, n, "vdev_comm_all_reduce");
}

VDEV_API enum vdev_status vdev_comm_broadcast(vdev_comm_t *comm, int rank,
                                              vdev_tensor_t *const *tensors, int n, int root)
{
    return call_list(comm, rank, VDEV_COLL_BROADCAST, VDEV_REDUCE_SUM, root, tensors, n,
                     "vdev_comm_broadcast");
}

VDEV_API enum vdev_status vdev_comm_all_gather(vdev_comm_t *comm, int rank,
                                               const vdev_tensor_t *in, vdev_tensor_t *out)
{
    const char *fn = "vdev_comm_all_gather";
    struct vdev_coll_comm *c = call_comm(comm, rank, fn);
    if (!c)
        return vdev_last_status(); /* invalid, or a forked child */
    char msg[512] = "";
    vdev_tensor_t *h[2] = {(vdev_tensor_t *)(uintptr_t)in, out};
    struct vdev_tens *t[2];
    enum vdev_status status = tensors_of(h, 2, fn, t, msg, sizeof msg);
    int origin;
    return vdev_coll_tensors(c, rank, VDEV_COLL_ALL_GATHER, VDEV_REDUCE_SUM, 0, t, 2, fn, status,
                             status == VDEV_OK ? NULL : msg, &origin);
}

VDEV_API enum vdev_status vdev_comm_barrier(vdev_comm_t *comm, int rank)
{
    struct vdev_coll_comm *c = call_comm(comm, rank, "vdev_comm_barrier");
    if (!c)
        return vdev_last_status(); /* invalid, or a forked child */
    int origin;
    return vdev_coll_tensors(c, rank, VDEV_COLL_BARRIER, VDEV_REDUCE_SUM, 0, NULL, 0,
                             "vdev_comm_barrier", VDEV_OK, NULL, &origin);
}

VDEV_API enum vdev_status vdev_comm_abort(vdev_comm_t *comm, int rank, enum vdev_status code,
                                          const char *reason)
{
    struct vdev_coll_comm *c = call_comm(comm, rank, "vdev_comm_abort");
    if (!c)
        return vdev_last_status(); /* invalid, or a forked child */
    if (code == VDEV_OK || (unsigned)code >= VDEV_STATUS_COUNT)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_comm_abort: code %d is not an error",
                          (int)code);
    c->ops->abort(c->ctx, rank, code, reason);
    return VDEV_OK;
}
