/* tensor.h — tensors inside the library: the struct, public handles,
 * creation on a given device, reference counting, views, copies between
 * devices, and scopes.
 *
 * Handles. The library works on `struct vdev_tens *`; callers hold
 * `vdev_tensor_t *` handles, encoded numbers of the tensor handle table
 * (base/handles.h) whose slots hold the structs. A public function turns its
 * handles into tensors at entry (vdev_tens_use, or vdev_tens_peek plus
 * vdev_tens_current on the op path) and returns vdev_tens_handle() of what it
 * made; the two types never mix, so the compiler finds a missed conversion.
 *
 * References. A tensor owns one block of its device's allocator, or is a view
 * (reshape) holding a reference to the tensor that owns the block. Its
 * creator holds the creation reference, the one the public handle stands
 * for: a scope, the caller, or (vdev_tens_disown) library code such as the
 * gradient tape. The tape holds one more reference for every tensor its
 * backward pass needs. Dropping the creation reference (vdev_tensor_free, a
 * scope's end) kills the handle at once, even while other references keep
 * the struct; the struct and its slot go when the last reference goes. The
 * block goes back to the allocator then: at once when only the device's own
 * stream used it (stream-ordered reuse), or after an event when another
 * device's stream read it (a cross-device copy).
 *
 * Runtimes. A tensor remembers the runtime generation it was made under;
 * after vdev_shutdown() its memory is gone, so using it is an error (freeing
 * it just gives its slot back). */
#ifndef VDEV_TENSOR_H
#define VDEV_TENSOR_H

#include "base/handles.h"
#include "runtime/placement.h"

#include <stdatomic.h>

struct vdev_tens {
    uint64_t handle;                /* its public handle (live while the creation
                                       reference is held) */
    _Atomic int refs;
    enum vdev_dtype dtype;
    int ndim;
    int64_t shape[VDEV_MAX_DIMS];   /* 1 beyond ndim */
    int64_t numel;
    uint64_t bytes;                 /* numel * 4 (a bool is a 32-bit word too) */
    struct vdev_ldev *dev;
    void *data;                     /* device address; NULL when numel == 0 */
    struct vdev_tens *base;         /* a view's owner (holds a reference), else NULL */
    /* Memory another framework owns (a DLPack import, dlpack.c): called with
     * ext_ctx when the last reference goes, whether or not the runtime still
     * runs; else NULL. Such a tensor owns no block. */
    void (*ext_release)(void *ext_ctx);
    void *ext_ctx;
    uint32_t block;                 /* allocator handle when it owns a block, else UINT32_MAX */
    uint32_t rgen;                  /* the runtime generation it was made under */
    int16_t home;                   /* device id of the variables it derives from, -1 none */
    _Atomic int16_t xstream;        /* id of another device whose stream read it, -1 none */
    _Atomic int16_t lazy_reader;    /* id of a device whose stream may still be reading it
                                       (a lazy copy: copy_contents), -1 none */
    _Atomic uint64_t produced_at;   /* its device's stream_position once the op that wrote
                                       it was queued; UINT64_MAX: unknown (all work so far) */
    _Atomic int host_exports;       /* live DLPack exports of this memory as host memory
                                       (the owner's count: dlpack.c) */
    /* Values a tape read (the owner's; see "values a tape read" below). */
    _Atomic uint64_t version;       /* in-place writes so far (vdev_tens_before_write) */
    int tape_readers;               /* live tape records that read the current version
                                       (under its tape lock) */
    struct vdev_snap *snaps;        /* earlier versions that live records read, each with
                                       its readers and saved value (under its tape lock) */
    struct vdev_snap *next_snap;    /* the entry a write of the current version will add to
                                       snaps, made with its first counted read, so that the
                                       write needs no host memory (under its tape lock) */
    _Atomic int exports;            /* live DLPack exports of its memory (dlpack.c) */
    _Atomic int writing;            /* writes begun and not yet queued (vdev_tens_write_begin) */
    uint8_t is_variable;
    uint8_t requires_grad;
    uint8_t kept;                   /* vdev_keep() called in the current scope */
    uint8_t host_written;           /* contents written by the host, no kernel wrote since */
    _Atomic uint8_t owner;          /* enum vdev_tens_owner: set once, before the handle
                                       is given out */
    /* Scope membership: only the thread whose scope holds the creation
     * reference changes these; other threads read scope_thread. */
    _Atomic uintptr_t scope_thread; /* that thread's id (vdev_thread_id), 0 when none */
    int scope_depth;                /* the frame holding it */
    struct vdev_tens *scope_prev, *scope_next;
};

/* Who keeps a tensor whose handle the library gives out (vdev_optimizer_slots,
 * vdev_mlp_variables): vdev_tensor_free refuses it, naming the owner, whose
 * own free path frees it with vdev_tens_free_owned. */
enum vdev_tens_owner {
    VDEV_TENS_OWNER_NONE,
    VDEV_TENS_OWNER_OPTIMIZER, /* an optimizer's slot */
    VDEV_TENS_OWNER_MODEL,     /* a layer's (a model's) variable */
};
/* Marks live tensor h as owner's (NULL: nothing), before its handle is given
 * out. */
void vdev_tens_set_owner(vdev_tensor_t *h, enum vdev_tens_owner owner);
/* vdev_tensor_free for the owner of h, which it does not refuse. */
void vdev_tens_free_owned(vdev_tensor_t *h);

/* The tensor handle table (tensor.c). */
extern struct vdev_handle_table vdev_tens_table;

/* The public handle of t (NULL for NULL). */
static inline vdev_tensor_t *vdev_tens_handle(const struct vdev_tens *t)
{
    return t ? (vdev_tensor_t *)(uintptr_t)t->handle : NULL;
}

/* The tensor behind a live handle, or NULL (NULL, freed, foreign, garbage).
 * Lock-free; sets no error. */
static inline struct vdev_tens *vdev_tens_peek(const vdev_tensor_t *h)
{
    return (struct vdev_tens *)vdev_handle_get(&vdev_tens_table, h);
}

/* 1 when t's runtime still runs (its memory exists). */
static inline int vdev_tens_current(const struct vdev_tens *t)
{
    return t->rgen == vdev_runtime_generation() && vdev_is_initialized();
}

/* The tensor behind h, for use by the public function `fn`: NULL with
 * VDEV_ERR_INVALID_ARG and "<fn>: <why>" when h is NULL ("tensor is NULL"),
 * dead or foreign ("not a live tensor (freed already, or not a tensor)") or
 * of a runtime that was shut down. */
struct vdev_tens *vdev_tens_use(const vdev_tensor_t *h, const char *fn);
/* vdev_tens_use, and a reference for the caller (vdev_tens_release when
 * done), taken only while h is live: a free of h by another thread while the
 * caller writes or reads the tensor kills h but leaves the memory in place
 * until that release, so a racing free never sends the write or the read to
 * another tensor that took the memory. For the calls that write a tensor
 * the caller passed (vdev_assign, the optimizers' updates) or copy one out
 * (vdev_tensor_to_host); an ordinary op checks its inputs' handles again
 * after it ran instead (vdev_op_freed_input). */
struct vdev_tens *vdev_tens_hold(const vdev_tensor_t *h, const char *fn);
/* Sets the error for op input #k, handle h, which vdev_tens_peek or
 * vdev_tens_current refused. */
void vdev_tens_input_error(const vdev_tensor_t *h, const char *op, int k);

/* Bytes of one element: 4 for every dtype (a bool is a 32-bit word holding
 * 0 or 1, so every op that only moves elements serves it unchanged). */
static inline size_t vdev_dtype_size(enum vdev_dtype dt) { return 4; }
/* "float", "int32", "bool" (TensorFlow's words); "unknown" for a value that
 * is no dtype (callers pass valid ones). */
const char *vdev_dtype_name(enum vdev_dtype dt);

/* "[256,1024]" into buf; returns buf. */
char *vdev_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap);
/* VDEV_ERR_INVALID_ARG for ndim outside 0..4, a negative dimension, or a
 * shape past VDEV_MAX_NUMEL (vdev_shape_too_large's message, naming fn: the
 * public call or the op that makes the tensor; NULL names none). */
enum vdev_status vdev_shape_check(const char *fn, const int64_t *shape, int ndim);
/* The elements of a shape (1 for a scalar); for a shape vdev_shape_check
 * passed, or one known to fit, as the product is not checked. */
static inline int64_t vdev_shape_numel(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* The most elements a tensor holds, and the most any product of its leading
 * dimensions reaches: 2^60 - 1, so its bytes stay below 2^62 and adding two
 * byte counts cannot overflow. vdev_shape_check refuses a shape past it. */
#define VDEV_MAX_NUMEL (INT64_MAX / 8)
/* VDEV_ERR_INVALID_ARG "fn: shape [..] is too large (2^60 elements or more)"
 * (no "fn: " when fn is NULL); the error of a shape past VDEV_MAX_NUMEL. */
enum vdev_status vdev_shape_too_large(const char *fn, const int64_t *shape, int ndim);

/* The op the next tensors of this thread are made by (a static string; for
 * the out-of-memory report). */
extern _Thread_local const char *vdev_tensor_op_tag;

/* Casts away const for library-internal bookkeeping (reference counts,
 * stream marks) on tensors taken as const. */
static inline struct vdev_tens *vdev_tens_mut(const struct vdev_tens *t)
{
    return (struct vdev_tens *)(uintptr_t)t;
}

/* ---- life cycle (tensor.c) ---- */

/* A new tensor on dev with uninitialised contents, registered with the
 * current scope. OOM names the shape, type and device. */
struct vdev_tens *vdev_tens_new(struct vdev_ldev *dev, enum vdev_dtype dtype,
                                const int64_t *shape, int ndim);
/* A view of t with another shape (same numel), registered with the scope. */
struct vdev_tens *vdev_tens_view(const struct vdev_tens *t, const int64_t *shape, int ndim);
/* A tensor on dev over memory it does not own (`data`, numel * 4 bytes),
 * registered with the current scope; release(ctx) runs when its last
 * reference goes. NULL (nothing called) when no handle is left. */
struct vdev_tens *vdev_tens_wrap(struct vdev_ldev *dev, enum vdev_dtype dtype,
                                 const int64_t *shape, int ndim, void *data,
                                 void (*release)(void *ctx), void *ctx);
/* A copy of t on dst, counted in the placement record. */
struct vdev_tens *vdev_tens_copy_to(const struct vdev_tens *t, struct vdev_ldev *dst);
/* Copies src's contents into dst's memory (same bytes), ordered on both
 * streams (copies.c). fresh: dst was just made, so nothing else reads or
 * writes it; otherwise the write to dst is begun here (vdev_tens_write_begin)
 * and the caller ends it (vdev_tens_write_end). */
enum vdev_status vdev_tens_copy_contents(const struct vdev_tens *src, struct vdev_tens *dst,
                                         int fresh);
/* A new tensor on dev with every element `value` (a valid value of dtype). */
struct vdev_tens *vdev_tens_filled(struct vdev_ldev *dev, enum vdev_dtype dtype,
                                   const int64_t *shape, int ndim, double value);

void vdev_tens_retain(const struct vdev_tens *t);
void vdev_tens_release(const struct vdev_tens *t);
/* Drops the creation reference of a tensor this thread made (out of its
 * scope, handle killed, reference released): the internal vdev_tensor_free. */
void vdev_tens_drop(struct vdev_tens *t);
/* The creation reference becomes the caller's own reference: t leaves its
 * scope and its handle dies; release it with vdev_tens_release. */
void vdev_tens_disown(struct vdev_tens *t);
/* Hands a tensor the library holds to the API caller: a new creation
 * reference in the current scope, with a live handle. Returns t, or a view of
 * it when t's handle is live already (each handle stands for one creation
 * reference), or NULL on failure. */
struct vdev_tens *vdev_tens_publish(struct vdev_tens *t);

/* Notes that the stream of device `reader` reads t's memory. */
void vdev_tens_mark_read_by(const struct vdev_tens *t, const struct vdev_ldev *reader);
/* Before a write to t's memory is queued on the stream of `writer` (NULL: the
 * host, or code outside vdev, writes it): bumps the version of t's owner,
 * first saving its value when live tape records read it (see "values a tape
 * read" below; the copy's failure leaves the thread's error as it was), and
 * waits, on that stream (or on the host), for a stream that may still be
 * reading t after a lazy copy. Every path that writes into an existing
 * tensor calls it: in-place ops, vdev_assign, collectives, the parameter
 * server's pulls, DLPack export. */
void vdev_tens_before_write(const struct vdev_tens *t, const struct vdev_ldev *writer);
/* vdev_tens_before_write for a write that says when it is queued, by
 * vdev_tens_write_end (which also does vdev_tens_after_write): until then, a
 * tape's read of t is of a copy, since it may come before or after the
 * write (exec.c). Paths that can, use these: in-place ops, vdev_assign,
 * collectives, the parameter server's pulls. */
void vdev_tens_write_begin(const struct vdev_tens *t, const struct vdev_ldev *writer);
void vdev_tens_write_end(const struct vdev_tens *t);
/* After a write to t was queued: when t's memory is exported to another
 * framework as host memory (a simulated GPU's, dlpack.c), waits for t's
 * stream, since such a consumer has no stream to wait on and reads at once. */
void vdev_tens_after_write(const struct vdev_tens *t);
/* Live DLPack exports of memory as host memory, over all tensors (dlpack.c):
 * while 0, vdev_tens_after_read costs one load. */
extern _Atomic int vdev_tens_host_exports_live;
void vdev_tens_after_read_exported(const struct vdev_tens *t, const struct vdev_ldev *reader);
/* After a read of t was queued on reader's stream (an op's input, a copy's
 * source, a collective's input: comm.c, replica.c): when t's memory is
 * exported as host memory, waits for that stream, since the consumer may
 * write the memory at once and the read must see the values it had when it
 * was issued. */
static inline void vdev_tens_after_read(const struct vdev_tens *t, const struct vdev_ldev *reader)
{
    if (atomic_load_explicit(&vdev_tens_host_exports_live, memory_order_relaxed))
        vdev_tens_after_read_exported(t, reader);
}

/* ---- values a tape read (tensor.c) ----
 *
 * A tape keeps the inputs of the ops it records, and one of them may be
 * written in place (vdev_assign, an optimizer step, a collective) before the
 * tape is asked for gradients. TensorFlow's gradients use the value the op
 * read, as PyTorch's do. So every tensor that owns memory (a view's base) has
 * a version, bumped by each in-place write (vdev_tens_before_write), and a
 * count of the live tape records that read each version: the dispatcher
 * counts a read (vdev_tens_tape_read) before the op's kernel is queued, for
 * the inputs whose values the op's gradient reads (vdev_op_def.grad_reads),
 * and the tape drops it (vdev_tens_tape_unread) when the record goes. A
 * write to a version that live records read first saves its value, a copy
 * on the tensor's device queued before the write, which goes when the last
 * of those records goes; a write to a version that no record read saves
 * nothing. The gradient takes the tensor itself while its version is the
 * one read, else the saved copy (vdev_tens_value_at). A program that ends
 * its tape before it updates, as training loops do, never pays for a copy.
 * Versions and counts are under a lock per owner (a striped table), taken
 * only while a tape records or when a tensor is written in place. */
/* Before the kernel that reads t for a live tape record is queued: counts n
 * reads of the version t's owner has now (*version) and returns 1; or counts
 * nothing and returns 0 while a write to it is under way (write_begin) or a
 * DLPack export of it lives, when the caller reads a copy of t instead; or,
 * counting nothing, -1 with VDEV_ERR_OOM when the host has no memory for the
 * entry that a later write would save the value in (made with a version's
 * first read, so that a write never loses a value a record read). */
int vdev_tens_tape_read(const struct vdev_tens *t, int n, uint64_t *version);
/* The record that read t at `version` is gone; the last one frees the value
 * saved for it. */
void vdev_tens_tape_unread(const struct vdev_tens *t, uint64_t version);
/* The version of t's owner now. */
static inline uint64_t vdev_tens_version(const struct vdev_tens *t)
{
    return atomic_load_explicit(&(t->base ? t->base : t)->version, memory_order_acquire);
}
/* The value t had at `version`: t itself while unchanged, else the copy
 * saved before the write (a view of it, in the current scope, for a view);
 * NULL with VDEV_ERR_OOM, naming `op`, when that copy could not be made. */
const struct vdev_tens *vdev_tens_value_at(const struct vdev_tens *t, uint64_t version,
                                           const char *op);

/* The device where a new tensor with no inputs goes. */
struct vdev_ldev *vdev_tens_creation_device(void);

/* ---- scopes (scope.c) ---- */

/* An id of the calling thread, never 0, unique among live threads: the
 * address of a thread-local byte (scope.c). */
extern _Thread_local char vdev_thread_anchor;
static inline uintptr_t vdev_thread_id(void) { return (uintptr_t)&vdev_thread_anchor; }
/* Registers t with the calling thread's innermost scope (which then holds
 * the creation reference); nothing outside any scope. Cannot fail. */
void vdev_tens_scope_add(struct vdev_tens *t);
/* Takes t out of the scope holding it (nothing if none). VDEV_ERR_INVALID_ARG,
 * naming `fn`, when another thread's scope holds it: only that thread may. */
enum vdev_status vdev_tens_scope_take(struct vdev_tens *t, const char *fn);
/* Sets VDEV_ERR_INVALID_ARG for `fn` given a tensor of another thread's scope. */
enum vdev_status vdev_tens_foreign_scope(const char *fn);
/* Removes t from this thread's scope that holds it (the caller checked). */
void vdev_tens_scope_unlink(struct vdev_tens *t);

#endif
