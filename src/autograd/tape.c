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
 * soon as the op that produced its tensor has used it. */
#include "ops/ops.h"

#include <string.h>

struct vdev_tape {
    struct vdev_op_record *nodes;
    int n, cap;
    int recording;
};

/* Gradients by tensor: open addressing over tensor pointers. */
struct gmap {
    const vdev_tensor_t **keys;
    vdev_tensor_t **vals;
    size_t cap;
};

static size_t gmap_slot(const struct gmap *m, const vdev_tensor_t *k)
{
    size_t h = ((uintptr_t)k >> 4) * 0x9e3779b97f4a7c15ull;
    size_t i = h & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static enum vdev_status record(void *vtape, const struct vdev_op_record *r)
{
    struct vdev_tape *t = vtape;
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 256;
        struct vdev_op_record *nodes = realloc(t->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes)
            return vdev_error(VDEV_ERR_OOM, "out of host memory recording an op on the tape");
        t->nodes = nodes;
        t->cap = cap;
    }
    t->nodes[t->n++] = *r;
    for (int i = 0; i < r->n_in; i++) {
        vdev_tensor_retain(r->in[i]);
        vdev_tensor_retain(r->target[i]);
    }
    vdev_tensor_retain(r->out);
    return VDEV_OK;
}

static void release_nodes(struct vdev_tape *t)
{
    for (int k = 0; k < t->n; k++) {
        struct vdev_op_record *r = &t->nodes[k];
        for (int i = 0; i < r->n_in; i++) {
            vdev_tensor_release(r->in[i]);
            vdev_tensor_release(r->target[i]);
        }
        vdev_tensor_release(r->out);
    }
    t->n = 0;
}

VDEV_API vdev_tape_t *vdev_tape_begin(void)
{
    if (vdev_tape_hook.tape) {
        vdev_error(VDEV_ERR_INVALID_ARG, "a tape is already recording on this thread");
        return NULL;
    }
    if (vdev_init() != VDEV_OK)
        return NULL;
    struct vdev_tape *t = calloc(1, sizeof *t);
    if (!t) {
        vdev_error(VDEV_ERR_OOM, "out of host memory for a tape");
        return NULL;
    }
    t->recording = 1;
    vdev_tape_hook.tape = t;
    vdev_tape_hook.record = record;
    return t;
}

static void stop(struct vdev_tape *t)
{
    if (t->recording && vdev_tape_hook.tape == t) {
        vdev_tape_hook.tape = NULL;
        vdev_tape_hook.record = NULL;
    }
    t->recording = 0;
}

VDEV_API void vdev_tape_end(vdev_tape_t *t)
{
    if (!t)
        return;
    stop(t);
    release_nodes(t);
    free(t->nodes);
    free(t);
}

/* Adds g (owned by the caller, out of any scope) to the map entry of key. */
static enum vdev_status accumulate(struct gmap *m, const vdev_tensor_t *key, vdev_tensor_t *g)
{
    size_t i = gmap_slot(m, key);
    if (!m->keys[i] || !m->vals[i]) {
        m->keys[i] = key;
        m->vals[i] = g;
        return VDEV_OK;
    }
    const vdev_tensor_t *pair[2] = {m->vals[i], g};
    vdev_tensor_t *sum = vdev_op_run(VDEV_OP_ADD, pair, 2, NULL);
    vdev_tensor_release(g);
    if (!sum)
        return vdev_last_status();
    vdev_tensor_free(m->vals[i]);
    vdev_keep(sum);
    m->vals[i] = sum;
    return VDEV_OK;
}

/* Takes t out of the current scope: the map becomes its only owner. */
static vdev_tensor_t *own(vdev_tensor_t *t)
{
    vdev_tensor_retain(t);
    vdev_tensor_free(t); /* drops the scope's reference, keeps ours */
    return t;
}

VDEV_API enum vdev_status vdev_tape_gradient(vdev_tape_t *t, const vdev_tensor_t *loss,
                                             vdev_tensor_t *const *vars, int n_vars,
                                             vdev_tensor_t **grads)
{
    if (!t || n_vars < 0 || (n_vars && (!vars || !grads)))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tape_gradient: bad arguments");
    /* On any failure every gradient is NULL, early returns included. */
    for (int i = 0; i < n_vars; i++)
        grads[i] = NULL;
    stop(t);
    if (!loss)
        return vdev_last_status() != VDEV_OK ? vdev_last_status()
                                             : vdev_error(VDEV_ERR_INVALID_ARG, "loss is NULL");
    if (!vdev_tensor_valid(loss))
        return VDEV_ERR_INVALID_ARG;
    if (loss->numel != 1 || loss->dtype != VDEV_F32)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "vdev_tape_gradient: the loss must be a one-element float tensor");
    for (int i = 0; i < n_vars; i++)
        if (!vdev_tensor_valid(vars[i]))
            return VDEV_ERR_INVALID_ARG;

    struct gmap m;
    m.cap = 64;
    while (m.cap < (size_t)(2 * t->n + 2 * n_vars + 4))
        m.cap *= 2;
    m.keys = calloc(m.cap, sizeof *m.keys);
    m.vals = calloc(m.cap, sizeof *m.vals);
    if (!m.keys || !m.vals) {
        free(m.keys);
        free(m.vals);
        return vdev_error(VDEV_ERR_OOM, "out of host memory computing gradients");
    }

    enum vdev_status st = VDEV_OK;
    vdev_placement_push_dev(loss->dev);
    vdev_tensor_t *seed = vdev_tensor_ones(loss->shape, loss->ndim, VDEV_F32);
    vdev_placement_pop_dev();
    if (!seed) {
        st = vdev_last_status();
        goto done;
    }
    m.keys[gmap_slot(&m, loss)] = loss;
    m.vals[gmap_slot(&m, loss)] = own(seed);

    for (int k = t->n - 1; k >= 0 && st == VDEV_OK; k--) {
        const struct vdev_op_record *r = &t->nodes[k];
        size_t slot = gmap_slot(&m, r->out);
        if (!m.keys[slot] || !m.vals[slot])
            continue;
        vdev_tensor_t *dout = m.vals[slot];
        const struct vdev_op_def *def = &vdev_op_defs[r->op];
        struct vdev_grad_args ga;
        memset(&ga, 0, sizeof ga);
        ga.op = r->op;
        ga.n_in = r->n_in;
        for (int i = 0; i < r->n_in; i++)
            ga.in[i] = r->in[i];
        ga.out = r->out;
        ga.dout = dout;
        ga.p = r->p;
        vdev_tensor_t *din[VDEV_KERNEL_MAX_IN] = {0};

        vdev_placement_push_dev(r->dev);
        vdev_scope_begin();
        st = def->grad(&ga, din);
        for (int i = 0; i < r->n_in; i++)
            if (din[i])
                vdev_keep(din[i]);
        vdev_scope_end(); /* frees the gradient's temporaries, passes din up */
        for (int i = 0; i < r->n_in; i++) {
            if (!din[i])
                continue;
            vdev_tensor_t *g = own(din[i]);
            if (st == VDEV_OK && r->target[i]->requires_grad)
                st = accumulate(&m, r->target[i], g);
            else
                vdev_tensor_release(g);
        }
        vdev_placement_pop_dev();
        /* Node k is the only producer of r->out and earlier nodes cannot read
         * it, so its gradient is complete and no longer needed, unless the
         * caller asked for it. */
        int wanted = 0;
        for (int i = 0; i < n_vars; i++)
            wanted |= vars[i] == r->out;
        if (!wanted) {
            vdev_tensor_release(m.vals[slot]);
            m.vals[slot] = NULL;
        }
    }

    for (int i = 0; i < n_vars && st == VDEV_OK; i++) {
        size_t slot = gmap_slot(&m, vars[i]);
        if (m.keys[slot] && m.vals[slot]) {
            vdev_tensor_t *g = m.vals[slot];
            if (g->dev != vars[i]->dev) {
                /* A variable used on another device: its gradient comes home. */
                grads[i] = vdev_tensor_copy_to(g, vars[i]->dev);
            } else {
                vdev_tensor_retain(g);
                vdev_tensor_scope_add(g); /* the caller's scope owns it now */
                grads[i] = g;
            }
        } else {
            vdev_placement_push_dev(vars[i]->dev);
            grads[i] = vdev_tensor_zeros(vars[i]->shape, vars[i]->ndim, vars[i]->dtype);
            vdev_placement_pop_dev();
        }
        if (!grads[i])
            st = vdev_last_status();
    }
done:
    for (size_t i = 0; i < m.cap; i++)
        if (m.vals[i])
            vdev_tensor_release(m.vals[i]);
    free(m.keys);
    free(m.vals);
    if (st != VDEV_OK)
        for (int i = 0; i < n_vars; i++) {
            vdev_tensor_free(grads[i]);
            grads[i] = NULL;
        }
    return st;
}
