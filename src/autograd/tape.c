/* tape.c — the gradient tape.
 *
 * While a tape records, the dispatcher hands it every op with an input that
 * needs a gradient (ops.h, vdev_tape_hook). The tape keeps a reference to the
 * op's inputs and output, so they outlive the scopes that made them until the
 * tape ends. vdev_tape_gradient() walks the ops in reverse order: for each op
 * whose output has a gradient, it pushes the op's device as a device scope
 * and calls the op's gradient function, so every gradient op runs where its
 * forward op ran, whatever scope the caller is in. Gradients flow to the
 * tensors the caller passed (not to the copies the dispatcher made), and
 * gradients reaching one tensor from several ops are summed. Each op's
 * gradient temporaries are freed as soon as it is done; a gradient is freed as
 * soon as the op that produced its tensor has used it.
 *
 * Only what leads to the variables asked for is computed. Before the
 * backward walk, a forward pass over the recorded ops marks every tensor
 * that depends on one of those variables (a variable itself, or the output
 * of an op with a marked input); the walk skips ops whose output is not
 * marked, and asks each gradient function only for the inputs that are
 * (vdev_grad_args.need). So a model whose input came from another model (a
 * tensor that requires a gradient but is no variable of this call) costs no
 * product for that input's gradient, as in TensorFlow, whose tape also
 * computes only the paths between the target and the sources. The marks
 * live in a hash set beside the gradient map.
 *
 * The values read. A record carries the versions of the tensors whose values
 * its gradient reads, counted by the dispatcher before the op's kernel was
 * queued (ops.h, in_read and in_ver); the tape gives those counts back when
 * the record goes, so a value saved by a write in place (tensor.h, "values
 * a tape read") lives as long as a record that needs it. The gradient uses
 * the value each op read: the tensor itself while its version is unchanged,
 * else the saved value; a version that moves while the gradient's kernels
 * are queued (another thread's write) runs that gradient again (run_grad).
 *
 * Tapes are checked handles (base/handles.h): ending a tape twice, or asking
 * an ended tape for gradients, is an error, not a use of freed memory. A tape
 * records on the thread that began it; another thread may neither end it nor
 * ask it for gradients while it records (the recording thread would go on
 * writing to it), and a thread that exits while its tape records stops the
 * recording (a thread-exit destructor), so the tape can then be ended
 * anywhere. vdev_tape_pause() takes the tape off the thread's hook and
 * keeps it as the thread's paused tape (so a thread exit stops it too, and
 * no other tape begins meanwhile); vdev_tape_resume() puts it back.
 * vdev_tape_skip() keeps a variable off the tape (TensorFlow's
 * trainable=False) until vdev_tape_watch: then, or with
 * VDEV_TAPE_WATCH_EXPLICIT, the dispatcher asks the tape (wants) whether a
 * variable counts.
 * vdev_tape_release() lets go of a tape from any thread: one recording (or
 * paused) elsewhere is freed by its own thread at its next op, its next
 * vdev_tape_begin or its exit. A tape remembers the runtime it was begun
 * under: after vdev_shutdown() it can only be ended. */
#include "autograd/tape_sets.h"
#include "ops/ops.h"

#include <string.h>

struct tape {
    uint64_t handle;
    struct vdev_op_record *nodes;
    int n, cap;
    _Atomic int recording;
    _Atomic int released; /* vdev_tape_release: its thread ends it when it lets go */
    _Atomic int ending;   /* claimed by the one thread that ends a released tape */
    uintptr_t thread; /* the thread that records (vdev_thread_id) */
    uint32_t rgen;    /* the runtime generation it was begun under */
    int explicit_watch;     /* VDEV_TAPE_WATCH_EXPLICIT */
    struct varset watched;  /* given to vdev_tape_watch */
    struct varset skipped;  /* given to vdev_tape_skip: watched only once given to watch */
};

static struct vdev_handle_table tapes = VDEV_HANDLE_TABLE("tape", 2, struct tape);

_Thread_local uint64_t vdev_tape_lookup_steps;

static enum vdev_status record(void *vtape, const struct vdev_op_record *r);
static void end_if_released(struct tape *t);

/* The dispatcher's question for a tape that watches only what it was
 * given, or skips some variables: a variable counts when watched, or when
 * the tape watches every variable but those it skips; any other tensor that
 * needs a gradient came from a recorded op. */
static int watches(const struct tape *t, const struct vdev_tens *x)
{
    if (!x->is_variable || varset_has(&t->watched, x))
        return 1;
    return !t->explicit_watch && !varset_has(&t->skipped, x);
}

static int wants(void *vtape, const struct vdev_tens *x) { return watches(vtape, x); }

/* Puts t on this thread's hook: it records from now on. */
static void hook_on(struct tape *t)
{
    vdev_tape_hook.tape = t;
    vdev_tape_hook.record = record;
    vdev_tape_hook.wants = t->explicit_watch || t->skipped.n ? wants : NULL;
}

static enum vdev_status record(void *vtape, const struct vdev_op_record *r)
{
    struct tape *t = vtape;
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 256;
        struct vdev_op_record *nodes = vdev_realloc(t->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes)
            return vdev_error(VDEV_ERR_OOM, "out of host memory recording an op on the tape");
        t->nodes = nodes;
        t->cap = cap;
    }
    /* with the reads the dispatcher counted (in_read, in_ver): released with it */
    t->nodes[t->n++] = *r;
    for (int i = 0; i < r->n_in; i++) {
        vdev_tens_retain(r->in[i]);
        vdev_tens_retain(r->target[i]);
    }
    vdev_tens_retain(r->out);
    end_if_released(t); /* its owner let it go on another thread: drop it with this op */
    return VDEV_OK;
}

static void release_nodes(struct tape *t)
{
    for (int k = 0; k < t->n; k++) {
        struct vdev_op_record *r = &t->nodes[k];
        for (int i = 0; i < r->n_in; i++) {
            if ((r->in_read >> i) & 1u)
                vdev_tens_tape_unread(r->in[i], r->in_ver[i]);
            vdev_tens_release(r->in[i]);
            vdev_tens_release(r->target[i]);
        }
        if (r->in_read & VDEV_GRAD_OUT)
            vdev_tens_tape_unread(r->out, r->in_ver[VDEV_KERNEL_MAX_IN]);
        vdev_tens_release(r->out);
    }
    t->n = 0;
}

/* Stops t's recording (paused or not); the caller is t's thread, or t
 * records no more. */
static void stop(struct tape *t)
{
    if (vdev_tape_hook.tape == t) {
        vdev_tape_hook.tape = NULL;
        vdev_tape_hook.record = NULL;
        vdev_tape_hook.wants = NULL;
    }
    if (vdev_tape_hook.paused == t)
        vdev_tape_hook.paused = NULL;
    atomic_store(&t->recording, 0);
}

/* Frees a tape whose handle is dead (vdev_handle_kill), once: its records,
 * the variables it watches, its slot. */
static void finish(struct tape *t)
{
    release_nodes(t); /* tensors of a runtime that was shut down just give their slots back */
    free(t->nodes);
    t->nodes = NULL;
    vdev_varset_free(&t->watched);
    vdev_varset_free(&t->skipped);
    t->cap = 0;
    vdev_handle_release(&tapes, t);
}

/* On the released tape's thread (or with t stopped): stops it and, unless
 * the releasing thread claimed it first, frees it. The flags are sequentially
 * consistent: the releaser sets `released` then reads `recording`, this side
 * clears `recording` then reads `released`, so one of them sees the other, and
 * `ending` lets only one free it. */
static void end_released(struct tape *t)
{
    stop(t);
    if (atomic_exchange(&t->ending, 1) == 0)
        finish(t);
}

/* On t's thread (t may be NULL): ends t when another thread released it. */
static void end_if_released(struct tape *t)
{
    if (t && atomic_load(&t->released))
        end_released(t);
}

/* ---- a thread that exits while its tape records stops it ---- */

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_made; /* written once under exit_once */

static void at_thread_exit(void *unused)
{
    VDEV_UNUSED(unused);
    struct tape *t[2] = {vdev_tape_hook.tape, vdev_tape_hook.paused};
    for (int i = 0; i < 2; i++)
        if (t[i]) {
            stop(t[i]);
            end_if_released(t[i]);
        }
}

static void make_exit_key(void)
{
    exit_key_made = pthread_key_create(&exit_key, at_thread_exit) == 0;
}

/* ---- the public calls ---- */

/* The tape behind handle h for `fn`, or NULL with VDEV_ERR_INVALID_ARG. */
static struct tape *tape_of(const vdev_tape_t *h, const char *fn)
{
    struct tape *t = vdev_handle_get(&tapes, h);
    if (!t)
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: %s", fn,
                   h ? "not a live tape (ended already, or not a tape)" : "tape is NULL");
    return t;
}

/* VDEV_OK when this thread may do what `verb` says to t (stop it, pause
 * it, ...): t records here, or no more. */
static enum vdev_status check_thread(const struct tape *t, const char *fn, const char *verb)
{
    if (atomic_load(&t->recording) && t->thread != vdev_thread_id())
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s: the tape is recording on another thread; only that thread may %s",
                          fn, verb);
    return VDEV_OK;
}

/* VDEV_ERR_INVALID_ARG when t was begun under a runtime that is gone;
 * VDEV_ERR_UNSUPPORTED, the fork error, in a forked child. */
static enum vdev_status check_runtime(const struct tape *t, const char *fn)
{
    if (vdev_runtime_forked_from()) /* the parent's: its devices stayed there */
        return vdev_runtime_forked_error(fn);
    if (t->rgen != vdev_runtime_generation() || !vdev_is_initialized())
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s: the tape belongs to a runtime that was shut down (begun before "
                          "vdev_shutdown)",
                          fn);
    return VDEV_OK;
}

VDEV_API vdev_tape_t *vdev_tape_begin(void) { return vdev_tape_begin_ex(0); }

VDEV_API vdev_tape_t *vdev_tape_begin_ex(unsigned flags)
{
    if (vdev_runtime_refuse_forked("vdev_tape_begin_ex")) /* before "already recording" */
        return NULL;
    if (flags & ~(unsigned)VDEV_TAPE_WATCH_EXPLICIT) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tape_begin_ex: unknown flags 0x%x",
                   flags & ~(unsigned)VDEV_TAPE_WATCH_EXPLICIT);
        return NULL;
    }
    /* a tape released on another thread (vdev_tape_release) gives way */
    end_if_released(vdev_tape_hook.tape);
    end_if_released(vdev_tape_hook.paused);
    if (vdev_tape_hook.tape) {
        vdev_error(VDEV_ERR_INVALID_ARG, "a tape is already recording on this thread");
        return NULL;
    }
    if (vdev_tape_hook.paused) {
        vdev_error(VDEV_ERR_INVALID_ARG, "a tape is paused on this thread (vdev_tape_pause): one "
                                         "tape records on a thread at a time, paused or not");
        return NULL;
    }
    if (vdev_init() != VDEV_OK)
        return NULL;
    uint64_t h;
    struct tape *t = vdev_handle_alloc(&tapes, &h);
    if (!t)
        return NULL;
    t->handle = h;
    t->nodes = NULL;
    t->n = t->cap = 0;
    t->thread = vdev_thread_id();
    t->rgen = vdev_runtime_generation();
    t->explicit_watch = (flags & VDEV_TAPE_WATCH_EXPLICIT) != 0;
    memset(&t->watched, 0, sizeof t->watched);
    memset(&t->skipped, 0, sizeof t->skipped);
    t->watched.hold = 1; /* the skipped are not held: their owners free them */
    atomic_init(&t->recording, 1);
    atomic_init(&t->released, 0);
    atomic_init(&t->ending, 0);
    pthread_once(&exit_once, make_exit_key);
    if (exit_key_made)
        pthread_setspecific(exit_key, t); /* any non-NULL value arms the destructor */
    hook_on(t);
    return (vdev_tape_t *)(uintptr_t)h;
}

VDEV_API void vdev_tape_end(vdev_tape_t *h)
{
    if (!h)
        return;
    struct tape *t = tape_of(h, "vdev_tape_end");
    /* in a forked child, a tape of any of the parent's threads just goes */
    if (!t || (!vdev_runtime_forked_from() &&
               check_thread(t, "vdev_tape_end", "stop it") != VDEV_OK))
        return;
    if (!vdev_handle_kill(&tapes, t, (uint64_t)(uintptr_t)h)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tape_end: not a live tape (ended already, or not "
                                         "a tape)");
        return;
    }
    stop(t);
    finish(t);
}

VDEV_API void vdev_tape_release(vdev_tape_t *h)
{
    if (!h)
        return;
    struct tape *t = tape_of(h, "vdev_tape_release");
    if (!t)
        return;
    if (!vdev_handle_kill(&tapes, t, (uint64_t)(uintptr_t)h)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tape_release: not a live tape (ended already, "
                                         "or not a tape)");
        return;
    }
    if (!atomic_load(&t->recording) || t->thread == vdev_thread_id()) {
        stop(t);
        finish(t);
        return;
    }
    atomic_store(&t->released, 1);
    if (!atomic_load(&t->recording) && atomic_exchange(&t->ending, 1) == 0)
        finish(t); /* its thread stopped it meanwhile, before it could see the flag */
}

/* t for vdev_tape_pause/resume/watch (fn): live, begun under this runtime,
 * and recording (or paused) on this thread; else NULL with the error, whose
 * verb says what only the tape's thread may do. */
static struct tape *own_tape(vdev_tape_t *h, const char *fn, const char *verb)
{
    struct tape *t = tape_of(h, fn);
    if (!t)
        return NULL;
    if (check_runtime(t, fn) != VDEV_OK)
        return NULL;
    if (!atomic_load(&t->recording)) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "%s: the tape is not recording (a gradient call stopped it, or its thread "
                   "ended)",
                   fn);
        return NULL;
    }
    return check_thread(t, fn, verb) == VDEV_OK ? t : NULL;
}

VDEV_API enum vdev_status vdev_tape_pause(vdev_tape_t *h)
{
    struct tape *t = own_tape(h, "vdev_tape_pause", "pause or resume it");
    if (!t)
        return vdev_last_status();
    if (vdev_tape_hook.paused == t)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tape_pause: the tape is paused already");
    vdev_tape_hook.tape = NULL;
    vdev_tape_hook.record = NULL;
    vdev_tape_hook.paused = t;
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_tape_resume(vdev_tape_t *h)
{
    struct tape *t = own_tape(h, "vdev_tape_resume", "pause or resume it");
    if (!t)
        return vdev_last_status();
    if (vdev_tape_hook.paused != t)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tape_resume: the tape is not paused");
    vdev_tape_hook.paused = NULL;
    hook_on(t);
    return VDEV_OK;
}

/* Adds variable v to out (n so far, cap) unless seen; its handle only while
 * it is live (the caller may have freed it). Returns the new n. */
static int list_variable(const struct tape *t, struct tset *seen, const struct vdev_tens *v,
                         vdev_tensor_t **out, int cap, int n)
{
    if (!v->is_variable || tset_has(seen, v) || !watches(t, v))
        return n;
    tset_add(seen, v);
    vdev_tensor_t *h = vdev_tens_handle(v);
    if (vdev_tens_peek(h) != v)
        return n;
    if (n < cap)
        out[n] = h;
    return n + 1;
}

VDEV_API int vdev_tape_watched_variables(vdev_tape_t *h, vdev_tensor_t **out, int cap)
{
    static const char fn[] = "vdev_tape_watched_variables";
    struct tape *t = tape_of(h, fn);
    if (!t)
        return -1;
    if (vdev_runtime_refuse_forked(fn))
        return -1;
    if (cap < 0 || (cap > 0 && !out)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: bad arguments (out %s, cap %d)", fn,
                   out ? "set" : "NULL", cap);
        return -1;
    }
    if (check_thread(t, fn, "list what it watches") != VDEV_OK)
        return -1;
    /* a set of every candidate: the watched ones and every record's inputs */
    size_t want = (size_t)t->watched.n + 1;
    for (int k = 0; k < t->n; k++)
        want += (size_t)t->nodes[k].n_in;
    size_t scap = 16;
    while (scap < 2 * want)
        scap *= 2;
    struct tset seen = {vdev_calloc(scap, sizeof *seen.keys), scap};
    if (!seen.keys) {
        vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
        return -1;
    }
    int n = 0;
    if (!t->explicit_watch) /* the variables read, but those skipped and not watched */
        for (int k = 0; k < t->n; k++)
            for (int i = 0; i < t->nodes[k].n_in; i++)
                n = list_variable(t, &seen, t->nodes[k].target[i], out, cap, n);
    for (int i = 0; i < t->watched.n; i++)
        n = list_variable(t, &seen, t->watched.list[i], out, cap, n);
    free(seen.keys);
    return n;
}

/* The variable behind var for vdev_tape_watch and vdev_tape_skip (fn), on a
 * tape this thread records (or paused); else NULL with the error. */
static const struct vdev_tens *own_variable(vdev_tape_t *h, const vdev_tensor_t *var,
                                            const char *fn, struct tape **tp)
{
    struct tape *t = *tp = own_tape(h, fn, "watch variables for it");
    const struct vdev_tens *v = t ? vdev_tens_use(var, fn) : NULL;
    if (v && !v->is_variable) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "%s: not a variable (the tape differentiates with respect to variables; a "
                   "tensor it computes from watched ones needs no watch)",
                   fn);
        return NULL;
    }
    return v;
}

VDEV_API enum vdev_status vdev_tape_watch(vdev_tape_t *h, const vdev_tensor_t *var)
{
    struct tape *t;
    const struct vdev_tens *v = own_variable(h, var, "vdev_tape_watch", &t);
    if (!v)
        return vdev_last_status();
    if (watches(t, v))
        return VDEV_OK; /* every variable but those skipped is watched, or this one is */
    return vdev_varset_add(&t->watched, v, "vdev_tape_watch");
}

VDEV_API enum vdev_status vdev_tape_skip(vdev_tape_t *h, const vdev_tensor_t *var)
{
    struct tape *t;
    const struct vdev_tens *v = own_variable(h, var, "vdev_tape_skip", &t);
    if (!v)
        return vdev_last_status();
    if (t->explicit_watch || varset_has(&t->watched, v))
        return VDEV_OK; /* it watches only what it is given, or was given v */
    enum vdev_status st = vdev_varset_add(&t->skipped, v, "vdev_tape_skip");
    if (st == VDEV_OK && vdev_tape_hook.tape == t)
        hook_on(t); /* asks wants from now on */
    return st;
}

/* Node k's output gradient (in slot) is complete and no longer needed once
 * k has run or been skipped, since node k is the only producer of out and
 * earlier nodes cannot read it: it is released unless the caller asked for
 * out itself as one of the variables (the set `asked`). */
static void gmap_drop_unasked(struct gmap *m, size_t slot, const struct vdev_tens *out,
                              const struct tset *asked)
{
    if (tset_has(asked, out))
        return;
    vdev_tens_release(m->vals[slot]);
    m->vals[slot] = NULL;
}

/* Adds g (the map's own reference) to the map entry of key. */
static enum vdev_status accumulate(struct gmap *m, const struct vdev_tens *key,
                                   struct vdev_tens *g)
{
    size_t i = gmap_slot(m, key);
    if (!m->keys[i] || !m->vals[i]) {
        m->keys[i] = key;
        m->vals[i] = g;
        return VDEV_OK;
    }
    const struct vdev_tens *pair[2] = {m->vals[i], g};
    struct vdev_tens *sum = vdev_op_exec(VDEV_OP_ADD, pair, 2, NULL);
    vdev_tens_release(g);
    if (!sum)
        return vdev_last_status();
    vdev_tens_disown(sum); /* out of the caller's scope: the map's reference */
    vdev_tens_release(m->vals[i]);
    m->vals[i] = sum;
    return VDEV_OK;
}

/* A strided slice's gradient added in place to its input's sum (one
 * StridedSliceGradAdd over the slice's elements) instead of StridedSliceGrad's
 * zeros of the whole input and an AddV2 of the whole: a recurrent layer's T
 * steps, each slicing its step of one [batch, T, ...] tensor, otherwise write
 * and add T whole copies. Only where the sum is the map's alone (one
 * reference, its own memory, no view, export or tape read of it), of the
 * input's shape on the slice's device as the slice's gradient is, and no tape
 * records (an outer tape would record the sum's ops). The same values but for
 * the sign of a zero sum outside the slice (AddV2 of +0 makes -0 +0). 1 when
 * it was added (*st its status), 0 for the general path. */
static int slice_grad_in_place(struct gmap *m, const struct vdev_op_record *r,
                               struct vdev_tens *dout, enum vdev_status *st)
{
    if (r->op != VDEV_OP_STRIDED_SLICE || vdev_tape_hook.tape)
        return 0;
    size_t i = gmap_slot(m, r->target[0]);
    struct vdev_tens *sum = m->keys[i] ? m->vals[i] : NULL;
    const struct vdev_tens *x = r->in[0];
    if (!sum || sum->base || sum->ext_release || sum->dev != r->dev || dout->dev != r->dev ||
        sum->dtype != VDEV_F32 || sum->ndim != x->ndim || atomic_load(&sum->refs) != 1 ||
        sum->tape_readers ||
        sum->snaps || atomic_load(&sum->exports) || atomic_load(&sum->host_exports))
        return 0;
    for (int d = 0; d < x->ndim; d++)
        if (sum->shape[d] != x->shape[d])
            return 0;
    struct vdev_tens *in[2] = {sum, dout};
    *st = vdev_op_exec_inplace(VDEV_OP_STRIDED_SLICE_GRAD_ADD, in, 2, &r->p);
    return 1;
}

/* Read slot i of r: input i, or the output (VDEV_GRAD_OUT's bit). */
static const struct vdev_tens *read_slot(const struct vdev_op_record *r, int i)
{
    return i == VDEV_KERNEL_MAX_IN ? r->out : r->in[i];
}

/* Runs r's gradient on the values its op read (tensor.h, "values a tape
 * read"): a tensor written since the read gives the value saved before the
 * write. Another thread's write may land after that choice and before the
 * gradient's kernels are queued, so the versions are checked again once they
 * are; the gradient then runs again with the saved values of those that
 * moved (each time at least one more, so it ends). In the caller's scope:
 * what a run that is dropped made goes with the scope. */
static enum vdev_status run_grad(const struct vdev_op_def *def, const struct vdev_op_record *r,
                                 struct vdev_grad_args *ga, struct vdev_tens **din)
{
    unsigned saved = 0; /* slots given the value saved for them */
    for (;;) {
        for (int i = 0; i <= VDEV_KERNEL_MAX_IN; i++) {
            if (!((r->in_read >> i) & 1u) || ((saved >> i) & 1u))
                continue;
            const struct vdev_tens *x = read_slot(r, i);
            const struct vdev_tens *v = vdev_tens_value_at(x, r->in_ver[i], def->name);
            if (!v)
                return vdev_last_status();
            if (v != x)
                saved |= 1u << i;
            if (i == VDEV_KERNEL_MAX_IN)
                ga->out = v;
            else
                ga->in[i] = v;
        }
        enum vdev_status st = def->grad(ga, din);
        unsigned moved = 0;
        for (int i = 0; i <= VDEV_KERNEL_MAX_IN; i++)
            if (((r->in_read & ~saved) >> i) & 1u &&
                vdev_tens_version(read_slot(r, i)) != r->in_ver[i])
                moved |= 1u << i;
        if (st != VDEV_OK || !moved)
            return st;
        for (int i = 0; i < r->n_in; i++)
            if (din[i]) {
                vdev_tens_drop(din[i]);
                din[i] = NULL;
            }
    }
}

/* vdev_tape_gradient and vdev_tape_gradient_ex: `none` gives NULL instead of
 * zeros for a variable the loss does not reach; fn names the call. */
static enum vdev_status gradient(vdev_tape_t *htape, const vdev_tensor_t *hloss,
                                 const vdev_tensor_t *hseed, vdev_tensor_t *const *hvars,
                                 int n_vars, vdev_tensor_t **grads, int none, const char *fn)
{
    if (!htape)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: tape is NULL", fn);
    if (n_vars < 0 || (n_vars && (!hvars || !grads)))
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s: n_vars %d with vars %s and grads %s (n_vars >= 0; both set when "
                          "n_vars > 0)",
                          fn, n_vars, hvars ? "set" : "NULL", grads ? "set" : "NULL");
    /* On any failure every gradient is NULL, early returns included. */
    for (int i = 0; i < n_vars; i++)
        grads[i] = NULL;
    struct tape *t = tape_of(htape, fn);
    if (!t)
        return VDEV_ERR_INVALID_ARG;
    if (vdev_runtime_forked_from()) /* before the thread's check: the parent's threads */
        return vdev_runtime_forked_error(fn);
    enum vdev_status st = check_thread(t, fn, "stop it");
    if (st != VDEV_OK)
        return st;
    if (vdev_tape_hook.paused != t) /* a paused tape stays paused: it may resume */
        stop(t);
    if (check_runtime(t, fn) != VDEV_OK)
        return VDEV_ERR_INVALID_ARG;
    if (!hloss)
        return vdev_last_status() != VDEV_OK ? vdev_last_status()
                                             : vdev_error(VDEV_ERR_INVALID_ARG, "loss is NULL");
    const struct vdev_tens *loss = vdev_tens_use(hloss, fn);
    if (!loss)
        return vdev_last_status();
    /* A loss of several elements stands for their sum, as in TensorFlow: the
     * seed below is ones of the loss's shape. */
    if (loss->dtype != VDEV_F32)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s: the loss is %s; gradients are of float tensors", fn,
                          vdev_dtype_name(loss->dtype));
    /* The loss's own gradient (TensorFlow's output_gradients), else ones. */
    const struct vdev_tens *dloss = NULL;
    if (hseed) {
        if (!(dloss = vdev_tens_use(hseed, fn)))
            return vdev_last_status();
        if (dloss->dtype != VDEV_F32 || dloss->ndim != loss->ndim ||
            memcmp(dloss->shape, loss->shape, sizeof(int64_t) * (size_t)loss->ndim)) {
            char s1[96], s2[96];
            return vdev_error(VDEV_ERR_SHAPE,
                              "%s: the loss's output gradient is %s of shape%s but the loss is "
                              "float of shape%s",
                              fn, vdev_dtype_name(dloss->dtype),
                              vdev_shape_str(dloss->shape, dloss->ndim, s1, sizeof s1),
                              vdev_shape_str(loss->shape, loss->ndim, s2, sizeof s2));
        }
    }

    struct gmap m;
    m.cap = 64;
    while (m.cap < (size_t)(2 * t->n + 2 * n_vars + 4))
        m.cap *= 2;
    m.keys = vdev_calloc(m.cap, sizeof *m.keys);
    m.vals = vdev_calloc(m.cap, sizeof *m.vals);
    struct tset leads = {vdev_calloc(m.cap, sizeof *leads.keys), m.cap};
    struct tset asked = {vdev_calloc(m.cap, sizeof *asked.keys), m.cap};
    const struct vdev_tens **vars = vdev_malloc(((size_t)n_vars + 1) * sizeof *vars);
    if (!m.keys || !m.vals || !leads.keys || !asked.keys || !vars) {
        free(m.keys);
        free(m.vals);
        free(leads.keys);
        free(asked.keys);
        free(vars);
        return vdev_error(VDEV_ERR_OOM, "out of host memory computing gradients");
    }
    for (int i = 0; i < n_vars && st == VDEV_OK; i++)
        if (!(vars[i] = vdev_tens_use(hvars[i], fn)))
            st = VDEV_ERR_INVALID_ARG;
        else
            tset_add(&asked, vars[i]);
    if (st != VDEV_OK)
        goto done;
    /* Mark what depends on a requested variable, in recording order (one
     * the tape watches: not one it skips, nor with VDEV_TAPE_WATCH_EXPLICIT
     * one it was not given). */
    for (int i = 0; i < n_vars; i++)
        if (watches(t, vars[i]))
            tset_add(&leads, vars[i]);
    for (int k = 0; k < t->n; k++) {
        const struct vdev_op_record *r = &t->nodes[k];
        for (int i = 0; i < r->n_in; i++)
            if (tset_has(&leads, r->target[i])) {
                tset_add(&leads, r->out);
                break;
            }
    }

    struct vdev_tens *seed;
    if (dloss && dloss->dev == loss->dev) {
        seed = vdev_tens_peek(hseed); /* dloss itself, as the map's value */
        if (seed != dloss) {          /* freed by another thread meanwhile */
            st = vdev_error(VDEV_ERR_INVALID_ARG, "%s: the output gradient was freed", fn);
            goto done;
        }
        vdev_tens_retain(seed); /* the map's reference */
    } else {
        seed = dloss ? vdev_tens_copy_to(dloss, loss->dev)
                     : vdev_tens_filled(loss->dev, VDEV_F32, loss->shape, loss->ndim, 1.0);
        if (!seed) {
            st = vdev_last_status();
            goto done;
        }
        vdev_tens_disown(seed);
    }
    m.keys[gmap_slot(&m, loss)] = loss;
    m.vals[gmap_slot(&m, loss)] = seed;

    for (int k = t->n - 1; k >= 0 && st == VDEV_OK; k--) {
        const struct vdev_op_record *r = &t->nodes[k];
        size_t slot = gmap_slot(&m, r->out);
        if (!m.keys[slot] || !m.vals[slot])
            continue;
        const struct vdev_op_def *def = &vdev_op_defs[r->op];
        struct vdev_grad_args ga;
        memset(&ga, 0, sizeof ga);
        ga.op = r->op;
        ga.n_in = r->n_in;
        for (int i = 0; i < r->n_in; i++) {
            ga.in[i] = r->in[i];
            if (r->target[i]->requires_grad && tset_has(&leads, r->target[i]))
                ga.need |= 1u << i;
        }
        if (!ga.need) {
            /* Nothing asked for lies behind this op. */
            gmap_drop_unasked(&m, slot, r->out, &asked);
            continue;
        }
        if (ga.need == 1u && slice_grad_in_place(&m, r, m.vals[slot], &st)) {
            gmap_drop_unasked(&m, slot, r->out, &asked);
            continue;
        }
        ga.out = r->out;
        ga.dout = m.vals[slot];
        ga.p = r->p;
        struct vdev_tens *din[VDEV_KERNEL_MAX_IN] = {0};

        if ((st = vdev_scope_begin()) != VDEV_OK) {
            vdev_scope_end(); /* consumes the failed begin */
            break;
        }
        vdev_placement_push_dev(r->dev);
        /* the gradient's ops belong where the op they differentiate does */
        int outer_home = vdev_grad_home;
        vdev_grad_home = r->out->home;
        st = run_grad(def, r, &ga, din);
        vdev_grad_home = outer_home;
        for (int i = 0; i < r->n_in; i++)
            if (din[i])
                din[i]->kept = 1;
        vdev_scope_end(); /* frees the gradient's temporaries, passes din up */
        for (int i = 0; i < r->n_in; i++) {
            if (!din[i])
                continue;
            vdev_tens_disown(din[i]); /* the map's reference now */
            if (st == VDEV_OK && ((ga.need >> i) & 1u))
                st = accumulate(&m, r->target[i], din[i]);
            else
                vdev_tens_release(din[i]);
        }
        vdev_placement_pop_dev();
        gmap_drop_unasked(&m, slot, r->out, &asked);
    }

    for (int i = 0; i < n_vars && st == VDEV_OK; i++) {
        size_t slot = gmap_slot(&m, vars[i]);
        struct vdev_tens *g;
        if (m.keys[slot] && m.vals[slot] && watches(t, vars[i])) {
            g = m.vals[slot];
            /* A variable used on another device: its gradient comes home. */
            g = g->dev != vars[i]->dev ? vdev_tens_copy_to(g, vars[i]->dev) : vdev_tens_publish(g);
        } else if (none) {
            continue; /* unconnected: NULL, as TensorFlow's None */
        } else {
            g = vdev_tens_filled(vars[i]->dev, vars[i]->dtype, vars[i]->shape, vars[i]->ndim, 0.0);
        }
        if (!g)
            st = vdev_last_status();
        grads[i] = vdev_tens_handle(g);
    }
done:
    for (size_t i = 0; i < m.cap; i++)
        if (m.vals[i])
            vdev_tens_release(m.vals[i]);
    free(m.keys);
    free(m.vals);
    free(leads.keys);
    free(asked.keys);
    free(vars);
    if (st != VDEV_OK)
        for (int i = 0; i < n_vars; i++) {
            vdev_tensor_free(grads[i]);
            grads[i] = NULL;
        }
    return st;
}

VDEV_API enum vdev_status vdev_tape_gradient(vdev_tape_t *tape, const vdev_tensor_t *loss,
                                             vdev_tensor_t *const *vars, int n,
                                             vdev_tensor_t **grads)
{
    return gradient(tape, loss, NULL, vars, n, grads, 0, "vdev_tape_gradient");
}

static enum vdev_status gradient_unconnected(vdev_tape_t *tape, const vdev_tensor_t *loss,
                                             const vdev_tensor_t *dloss,
                                             vdev_tensor_t *const *vars, int n,
                                             vdev_tensor_t **grads,
                                             enum vdev_unconnected unconnected, const char *fn)
{
    if ((unsigned)unconnected > VDEV_UNCONNECTED_NONE) {
        for (int i = 0; grads && i < n; i++)
            grads[i] = NULL;
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s: unconnected is %d, not VDEV_UNCONNECTED_ZERO or "
                          "VDEV_UNCONNECTED_NONE",
                          fn, (int)unconnected);
    }
    return gradient(tape, loss, dloss, vars, n, grads, unconnected == VDEV_UNCONNECTED_NONE, fn);
}

VDEV_API enum vdev_status vdev_tape_gradient_ex(vdev_tape_t *tape, const vdev_tensor_t *loss,
                                                vdev_tensor_t *const *vars, int n,
                                                vdev_tensor_t **grads,
                                                enum vdev_unconnected unconnected)
{
    return gradient_unconnected(tape, loss, NULL, vars, n, grads, unconnected,
                                "vdev_tape_gradient_ex");
}

VDEV_API enum vdev_status vdev_tape_gradient_seeded(vdev_tape_t *tape, const vdev_tensor_t *loss,
                                                    const vdev_tensor_t *dloss,
                                                    vdev_tensor_t *const *vars, int n,
                                                    vdev_tensor_t **grads,
                                                    enum vdev_unconnected unconnected)
{
    return gradient_unconnected(tape, loss, dloss, vars, n, grads, unconnected,
                                "vdev_tape_gradient_seeded");
}
