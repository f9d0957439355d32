/* scope.c — scopes that free temporaries: vdev_scope_begin/end, vdev_keep,
 * and which thread's scope holds a tensor.
 *
 * Each thread has a stack of up to 64 open scopes (frames). A frame is an
 * intrusive doubly linked list threaded through the tensors it holds
 * (scope_prev/scope_next in struct vdev_tens), in the order they were made,
 * so adding a tensor to a scope, taking one out (vdev_tensor_free,
 * vdev_variable) and moving kept tensors to the enclosing scope are O(1) and
 * never allocate: a scope cannot fail for want of memory, and a thread owns
 * no buffer that could leak. A tensor records the id of the thread whose
 * scope holds it; only that thread may take it out, since the list is that
 * thread's own, so freeing it from another thread is an error rather than a
 * dangling link.
 *
 * A thread that exits with scopes still open has them closed by a
 * thread-exit destructor (a pthread key), which frees what they hold as
 * vdev_scope_end would.
 *
 * Nesting beyond 64 is an error. A begin that failed still gets its end
 * from a caller that pairs them blindly, so failed begins are counted and
 * each end first consumes one of them, doing nothing; once a begin has
 * failed, further begins fail too until their ends have been seen, which
 * keeps the pairing exact. */
#include "tensor/tensor.h"

#define MAX_SCOPES 64

struct frame {
    struct vdev_tens *head, *tail; /* oldest first */
};

static _Thread_local struct frame frames[MAX_SCOPES];
static _Thread_local int depth;         /* open scopes */
static _Thread_local int failed_begins; /* begins refused whose ends are still to come */
static _Thread_local int exit_hook_armed;
_Thread_local char vdev_thread_anchor; /* its address identifies the thread */

/* Appends t to frame d of this thread. */
static void link_into(struct vdev_tens *t, int d)
{
    struct frame *f = &frames[d];
    t->scope_depth = d;
    t->scope_next = NULL;
    t->scope_prev = f->tail;
    if (f->tail)
        f->tail->scope_next = t;
    else
        f->head = t;
    f->tail = t;
    atomic_store_explicit(&t->scope_thread, vdev_thread_id(), memory_order_relaxed);
}

void vdev_tens_scope_add(struct vdev_tens *t)
{
    if (depth)
        link_into(t, depth - 1);
}

void vdev_tens_scope_unlink(struct vdev_tens *t)
{
    struct frame *f = &frames[t->scope_depth];
    if (t->scope_prev)
        t->scope_prev->scope_next = t->scope_next;
    else
        f->head = t->scope_next;
    if (t->scope_next)
        t->scope_next->scope_prev = t->scope_prev;
    else
        f->tail = t->scope_prev;
    t->scope_prev = t->scope_next = NULL;
    atomic_store_explicit(&t->scope_thread, 0, memory_order_relaxed);
}

enum vdev_status vdev_tens_foreign_scope(const char *fn)
{
    return vdev_error(VDEV_ERR_INVALID_ARG,
                      "%s: the tensor is held by a scope of another thread; only that thread may "
                      "free it or take it out (vdev_keep it there, or free it there)",
                      fn);
}

enum vdev_status vdev_tens_scope_take(struct vdev_tens *t, const char *fn)
{
    uintptr_t owner = atomic_load_explicit(&t->scope_thread, memory_order_relaxed);
    if (!owner)
        return VDEV_OK;
    if (owner != vdev_thread_id())
        return vdev_tens_foreign_scope(fn);
    vdev_tens_scope_unlink(t);
    return VDEV_OK;
}

/* ---- closing scopes when a thread exits ---- */

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_made; /* written once under exit_once */

static void at_thread_exit(void *unused)
{
    VDEV_UNUSED(unused);
    failed_begins = 0;
    while (depth)
        vdev_scope_end();
}

static void make_exit_key(void) { exit_key_made = pthread_key_create(&exit_key, at_thread_exit) == 0; }

/* The first scope of a thread arms the destructor (tried again on the next
 * scope if the system refused; a thread without it only loses the clean-up
 * of scopes left open at its exit). */
static void arm_exit_hook(void)
{
    pthread_once(&exit_once, make_exit_key);
    if (exit_key_made && pthread_setspecific(exit_key, &vdev_thread_anchor) == 0)
        exit_hook_armed = 1;
}

/* ---- the public calls ---- */

VDEV_API enum vdev_status vdev_scope_begin(void)
{
    if (failed_begins || depth == MAX_SCOPES) {
        failed_begins++;
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "tensor scopes nested deeper than %d (the matching vdev_scope_end "
                          "does nothing)",
                          MAX_SCOPES);
    }
    if (!exit_hook_armed)
        arm_exit_hook();
    frames[depth].head = frames[depth].tail = NULL;
    depth++;
    return VDEV_OK;
}

VDEV_API void vdev_scope_end(void)
{
    if (failed_begins) {
        failed_begins--;
        return;
    }
    if (depth == 0) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_scope_end without a matching vdev_scope_begin");
        return;
    }
    struct frame *f = &frames[--depth];
    struct vdev_tens *t = f->head;
    f->head = f->tail = NULL;
    while (t) {
        struct vdev_tens *next = t->scope_next;
        t->scope_prev = t->scope_next = NULL;
        if (t->kept) {
            /* to the enclosing scope, or to the caller outside every scope */
            t->kept = 0;
            if (depth)
                link_into(t, depth - 1);
            else
                atomic_store_explicit(&t->scope_thread, 0, memory_order_relaxed);
        } else {
            /* The scope's creation reference goes, and the handle with it. */
            int killed = vdev_handle_kill(&vdev_tens_table, t, t->handle);
            atomic_store_explicit(&t->scope_thread, 0, memory_order_relaxed);
            if (killed)
                vdev_tens_release(t);
        }
        t = next;
    }
}

VDEV_API vdev_tensor_t *vdev_keep(vdev_tensor_t *h)
{
    if (!h)
        return NULL;
    struct vdev_tens *t = vdev_tens_use(h, "vdev_keep");
    if (!t)
        return NULL;
    uintptr_t owner = atomic_load_explicit(&t->scope_thread, memory_order_relaxed);
    if (owner && owner != vdev_thread_id()) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "vdev_keep: the tensor is held by a scope of another thread; keep it there");
        return NULL;
    }
    if (owner)
        t->kept = 1;
    return h;
}
