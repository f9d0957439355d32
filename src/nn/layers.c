/* layers.c — dense layers and multi-layer perceptrons, written with the
 * public ops. A layer's variables are made on the device scope current when
 * the layer is made, so `vdev_device_push("GPU:1"); m = vdev_mlp_new(...);
 * vdev_device_pop()` puts a whole model on GPU:1. The forward pass pushes no
 * scope: an unscoped op follows its variables (placement.h), so the model
 * runs where it lives. Layers and models are checked handles, each kind in a
 * table of its own (nn.c's vdev_nn_object_of and vdev_nn_kill_handle name
 * what is wrong with a freed or foreign one). The objects' locks
 * (vdev_nn_enter: an optimizer's updates one at a time) are here too. */
#include "nn/nn.h"
#include "ops/ops.h"
#include "vdev/nn.h"

#include <math.h>
#include <string.h>

/* ---- dense layers ---- */

struct dense {
    struct vdev_nn_head head;   /* first (vdev_nn_object_of) */
    vdev_tensor_t *w, *b;       /* [in, out], [out]: variables */
    enum vdev_activation act;
};

static struct vdev_handle_table denses = VDEV_HANDLE_TABLE("dense layer", 3, struct dense);

VDEV_API vdev_dense_t *vdev_dense_new(int64_t in, int64_t out, enum vdev_activation act,
                                      uint64_t seed)
{
    if (vdev_runtime_refuse_forked("vdev_dense_new")) /* its variables could not be made here */
        return NULL;
    if (in <= 0 || out <= 0 || (unsigned)act >= VDEV_ACT_COUNT) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_dense_new: bad sizes (%lld, %lld) or activation "
                                         "(%d)",
                   (long long)in, (long long)out, (int)act);
        return NULL;
    }
    if (in > INT64_MAX / 2 || out > INT64_MAX / 2) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_dense_new: sizes (%lld, %lld) are too large",
                   (long long)in, (long long)out);
        return NULL;
    }
    uint64_t h;
    struct dense *l = vdev_handle_alloc(&denses, &h);
    if (!l)
        return NULL;
    /* Glorot (Xavier) uniform: U(-r, r) with r = sqrt(6 / (fan_in + fan_out)). */
    float r = (float)sqrt(6.0 / (double)(in + out));
    int64_t ws[2] = {in, out}, bs[1] = {out};
    l->w = vdev_variable(vdev_tensor_uniform(ws, 2, -r, r, seed));
    l->b = l->w ? vdev_variable(vdev_tensor_zeros(bs, 1, VDEV_F32)) : NULL;
    l->act = act;
    if (!l->w || !l->b) {
        vdev_tensor_free(l->w);
        vdev_handle_release(&denses, l);
        return NULL;
    }
    /* given out by vdev_mlp_variables: a caller's free is refused */
    vdev_tens_set_owner(l->w, VDEV_TENS_OWNER_MODEL);
    vdev_tens_set_owner(l->b, VDEV_TENS_OWNER_MODEL);
    l->head.rgen = vdev_nn_runtime(); /* the variables' */
    return (vdev_dense_t *)(uintptr_t)h;
}

static vdev_tensor_t *activate(vdev_tensor_t *x, enum vdev_activation act)
{
    switch (act) {
    case VDEV_ACT_RELU:
        return vdev_relu(x);
    case VDEV_ACT_TANH:
        return vdev_tanh(x);
    case VDEV_ACT_SIGMOID:
        return vdev_sigmoid(x);
    default:
        return x;
    }
}

VDEV_API vdev_tensor_t *vdev_dense_forward(vdev_dense_t *h, const vdev_tensor_t *x)
{
    const struct dense *l = vdev_nn_object_of(&denses, h, "vdev_dense_forward");
    if (!l)
        return NULL;
    /* The intermediates are freed here (a tape that recorded them holds its
     * own references): outside a scope the caller has no handle to them. */
    vdev_tensor_t *m = vdev_matmul(x, l->w, false, false);
    if (!m)
        return NULL;
    vdev_tensor_t *z = vdev_add(m, l->b);
    vdev_tensor_free(m);
    if (!z)
        return NULL;
    vdev_tensor_t *y = activate(z, l->act);
    if (y != z)
        vdev_tensor_free(z);
    return y;
}

VDEV_API void vdev_dense_free(vdev_dense_t *h)
{
    if (!h)
        return;
    struct dense *l = vdev_nn_object_any(&denses, h, "vdev_dense_free");
    if (!l || !vdev_nn_kill_handle(&denses, l, h, "vdev_dense_free"))
        return;
    vdev_tens_free_owned(l->w);
    vdev_tens_free_owned(l->b);
    vdev_handle_release(&denses, l);
}

/* ---- MLPs ---- */

struct mlp {
    struct vdev_nn_head head;   /* first (vdev_nn_object_of) */
    int n_layers;
    vdev_dense_t **layers;      /* handles, owned */
};

static struct vdev_handle_table mlps = VDEV_HANDLE_TABLE("model", 4, struct mlp);

/* Frees what an MLP holds (the layers made so far) and its slot. */
static void mlp_destroy(struct mlp *m)
{
    for (int i = 0; i < m->n_layers; i++)
        vdev_dense_free(m->layers[i]);
    free(m->layers);
    vdev_handle_release(&mlps, m);
}

VDEV_API vdev_mlp_t *vdev_mlp_new(const int64_t *sizes, int n_sizes, enum vdev_activation hidden,
                                  enum vdev_activation output, uint64_t seed)
{
    if (vdev_runtime_refuse_forked("vdev_mlp_new")) /* its variables could not be made here */
        return NULL;
    if (!sizes || n_sizes < 2) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_mlp_new: needs at least two sizes");
        return NULL;
    }
    if ((unsigned)hidden >= VDEV_ACT_COUNT || (unsigned)output >= VDEV_ACT_COUNT) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_mlp_new: unknown activation (hidden %d, output %d)",
                   (int)hidden, (int)output);
        return NULL;
    }
    uint64_t h;
    struct mlp *m = vdev_handle_alloc(&mlps, &h);
    if (!m)
        return NULL;
    m->n_layers = 0;
    m->layers = vdev_calloc((size_t)n_sizes - 1, sizeof *m->layers);
    if (!m->layers) {
        vdev_handle_release(&mlps, m);
        vdev_error(VDEV_ERR_OOM, "out of host memory for an MLP");
        return NULL;
    }
    for (int i = 0; i < n_sizes - 1; i++) {
        enum vdev_activation act = i + 2 == n_sizes ? output : hidden;
        /* a different stream of random numbers per layer */
        m->layers[i] = vdev_dense_new(sizes[i], sizes[i + 1], act,
                                      seed * 1000003ull + (uint64_t)i * 7919ull + 1);
        if (!m->layers[i]) {
            mlp_destroy(m);
            return NULL;
        }
        m->n_layers = i + 1;
    }
    m->head.rgen = vdev_nn_runtime(); /* the layers' */
    return (vdev_mlp_t *)(uintptr_t)h;
}

VDEV_API vdev_tensor_t *vdev_mlp_forward(vdev_mlp_t *hm, const vdev_tensor_t *x)
{
    const struct mlp *m = vdev_nn_object_of(&mlps, hm, "vdev_mlp_forward");
    if (!m)
        return NULL;
    vdev_tensor_t *y = NULL; /* the last layer's output, this call's own */
    for (int i = 0; i < m->n_layers; i++) {
        vdev_tensor_t *next = vdev_dense_forward(m->layers[i], y ? y : x);
        vdev_tensor_free(y); /* the next layer's input, made here (NULL: none) */
        if (!next)
            return NULL;
        y = next;
    }
    return y;
}

VDEV_API int vdev_mlp_variables(const vdev_mlp_t *hm, vdev_tensor_t **out, int cap)
{
    const struct mlp *m = vdev_nn_object_of(&mlps, hm, "vdev_mlp_variables");
    if (!m)
        return -1;
    if (!vdev_nn_out_fits(out, cap, "vdev_mlp_variables"))
        return -1;
    int n = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const struct dense *l = vdev_handle_get(&denses, m->layers[i]); /* owned: always live */
        if (n < cap)
            out[n] = l->w;
        n++;
        if (n < cap)
            out[n] = l->b;
        n++;
    }
    return n;
}

VDEV_API void vdev_mlp_free(vdev_mlp_t *hm)
{
    if (!hm)
        return;
    struct mlp *m = vdev_nn_object_any(&mlps, hm, "vdev_mlp_free");
    if (!m || !vdev_nn_kill_handle(&mlps, m, hm, "vdev_mlp_free"))
        return;
    mlp_destroy(m);
}

/* ---- the objects' locks (nn.h) ---- */

static _Thread_local struct vdev_nn_in *nn_in; /* innermost first */

void *vdev_nn_enter(void *obj, struct vdev_nn_in *in, const char *fn)
{
    struct vdev_nn_head *head = obj;
    for (const struct vdev_nn_in *i = nn_in; head && i; i = i->outer)
        if (i->obj == head) {
            vdev_error(VDEV_ERR_INVALID_ARG, "%s: called during an update by the same "
                                             "optimizer on this thread (a pressure callback)",
                       fn);
            return NULL;
        }
    if (head) {
        pthread_mutex_lock(&head->lock);
        *in = (struct vdev_nn_in){head, nn_in};
        nn_in = in;
    }
    return obj;
}

void vdev_nn_leave(struct vdev_nn_in *in)
{
    nn_in = in->outer;
    pthread_mutex_unlock(&in->obj->lock);
}
