/* nn.c — dense layers, multi-layer perceptrons, and the SGD and Adam
 * optimizers, written with the public ops.
 *
 * A layer's variables are made on the device scope current when the layer is
 * made, so `vdev_device_push("GPU:1"); m = vdev_mlp_new(...); vdev_device_pop()`
 * puts a whole model on GPU:1. The forward pass pushes no scope: an unscoped
 * op follows its variables (placement.h), so the model runs where it lives.
 *
 * The optimizers keep their slots (velocity; Adam's m and v) beside each
 * variable on its device and update it in place with one fused op there. Adam
 * follows TensorFlow: lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t),
 * m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, var -= lr_t m / (sqrt(v) + eps). */
#include "ops/ops.h"

#include <math.h>
#include <string.h>

/* ---- dense layers ---- */

struct vdev_dense {
    vdev_tensor_t *w, *b;       /* [in, out], [out] */
    enum vdev_activation act;
};

VDEV_API vdev_dense_t *vdev_dense_new(int64_t in, int64_t out, enum vdev_activation act,
                                      uint64_t seed)
{
    if (in <= 0 || out <= 0 || (unsigned)act >= VDEV_ACT_COUNT) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_dense_new: bad sizes (%lld, %lld) or activation",
                   (long long)in, (long long)out);
        return NULL;
    }
    vdev_dense_t *l = calloc(1, sizeof *l);
    if (!l) {
        vdev_error(VDEV_ERR_OOM, "out of host memory for a dense layer");
        return NULL;
    }
    /* Glorot (Xavier) uniform: U(-r, r) with r = sqrt(6 / (fan_in + fan_out)). */
    float r = (float)sqrt(6.0 / (double)(in + out));
    int64_t ws[2] = {in, out}, bs[1] = {out};
    l->w = vdev_variable(vdev_tensor_uniform(ws, 2, -r, r, seed));
    l->b = vdev_variable(vdev_tensor_zeros(bs, 1, VDEV_F32));
    l->act = act;
    if (!l->w || !l->b) {
        vdev_dense_free(l);
        return NULL;
    }
    return l;
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

VDEV_API vdev_tensor_t *vdev_dense_forward(vdev_dense_t *l, const vdev_tensor_t *x)
{
    if (!l) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_dense_forward: layer is NULL");
        return NULL;
    }
    return activate(vdev_add(vdev_matmul(x, l->w, false, false), l->b), l->act);
}

VDEV_API void vdev_dense_free(vdev_dense_t *l)
{
    if (!l)
        return;
    vdev_tensor_free(l->w);
    vdev_tensor_free(l->b);
    free(l);
}

/* ---- MLPs ---- */

struct vdev_mlp {
    int n_layers;
    vdev_dense_t **layers;
};

VDEV_API vdev_mlp_t *vdev_mlp_new(const int64_t *sizes, int n_sizes, enum vdev_activation hidden,
                                  enum vdev_activation output, uint64_t seed)
{
    if (!sizes || n_sizes < 2) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_mlp_new: needs at least two sizes");
        return NULL;
    }
    vdev_mlp_t *m = calloc(1, sizeof *m);
    if (!m || !(m->layers = calloc((size_t)n_sizes - 1, sizeof *m->layers))) {
        free(m);
        vdev_error(VDEV_ERR_OOM, "out of host memory for an MLP");
        return NULL;
    }
    m->n_layers = n_sizes - 1;
    for (int i = 0; i < m->n_layers; i++) {
        enum vdev_activation act = i + 1 == m->n_layers ? output : hidden;
        /* a different stream of random numbers per layer */
        m->layers[i] = vdev_dense_new(sizes[i], sizes[i + 1], act,
                                      seed * 1000003ull + (uint64_t)i * 7919ull + 1);
        if (!m->layers[i]) {
            vdev_mlp_free(m);
            return NULL;
        }
    }
    return m;
}

VDEV_API vdev_tensor_t *vdev_mlp_forward(vdev_mlp_t *m, const vdev_tensor_t *x)
{
    if (!m) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_mlp_forward: model is NULL");
        return NULL;
    }
    const vdev_tensor_t *h = x;
    vdev_tensor_t *y = NULL;
    for (int i = 0; i < m->n_layers; i++)
        h = y = vdev_dense_forward(m->layers[i], h);
    return y;
}

VDEV_API int vdev_mlp_variables(const vdev_mlp_t *m, vdev_tensor_t **out, int cap)
{
    if (!m)
        return 0;
    int n = 0;
    for (int i = 0; i < m->n_layers; i++) {
        if (n < cap)
            out[n] = m->layers[i]->w;
        n++;
        if (n < cap)
            out[n] = m->layers[i]->b;
        n++;
    }
    return n;
}

VDEV_API void vdev_mlp_free(vdev_mlp_t *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_layers; i++)
        vdev_dense_free(m->layers[i]);
    free(m->layers);
    free(m);
}

/* ---- optimizers ---- */

enum opt_kind { OPT_SGD, OPT_ADAM };

struct slot {
    const vdev_tensor_t *var;   /* not owned */
    vdev_tensor_t *s[2];        /* SGD: velocity; Adam: m, v */
};

struct vdev_optimizer {
    enum opt_kind kind;
    float lr, momentum, beta1, beta2, eps;
    int64_t step;               /* Adam: updates applied */
    struct slot *slots;
    int n_slots, cap_slots;
};

VDEV_API vdev_optimizer_t *vdev_sgd_new(float lr, float momentum)
{
    if (!(lr > 0) || !(momentum >= 0 && momentum < 1)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_sgd_new: learning rate %g must be > 0 and "
                                         "momentum %g in [0, 1)",
                   lr, momentum);
        return NULL;
    }
    vdev_optimizer_t *o = calloc(1, sizeof *o);
    if (!o) {
        vdev_error(VDEV_ERR_OOM, "out of host memory for an optimizer");
        return NULL;
    }
    o->kind = OPT_SGD;
    o->lr = lr;
    o->momentum = momentum;
    return o;
}

VDEV_API vdev_optimizer_t *vdev_adam_new(float lr, float beta1, float beta2, float eps)
{
    if (!(lr > 0) || !(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !(eps > 0)) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "vdev_adam_new: needs learning rate > 0, betas in [0, 1), epsilon > 0 (got "
                   "%g, %g, %g, %g)",
                   lr, beta1, beta2, eps);
        return NULL;
    }
    vdev_optimizer_t *o = calloc(1, sizeof *o);
    if (!o) {
        vdev_error(VDEV_ERR_OOM, "out of host memory for an optimizer");
        return NULL;
    }
    o->kind = OPT_ADAM;
    o->lr = lr;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    return o;
}

/* The slots of var, made (zeros, on var's device) on first use. */
static struct slot *slot_of(vdev_optimizer_t *o, const vdev_tensor_t *var)
{
    for (int i = 0; i < o->n_slots; i++)
        if (o->slots[i].var == var)
            return &o->slots[i];
    if (o->n_slots == o->cap_slots) {
        int cap = o->cap_slots ? 2 * o->cap_slots : 16;
        struct slot *s = realloc(o->slots, (size_t)cap * sizeof *s);
        if (!s) {
            vdev_error(VDEV_ERR_OOM, "out of host memory for optimizer slots");
            return NULL;
        }
        o->slots = s;
        o->cap_slots = cap;
    }
    struct slot *s = &o->slots[o->n_slots];
    memset(s, 0, sizeof *s);
    s->var = var;
    int n = o->kind == OPT_ADAM ? 2 : 1;
    vdev_placement_push_dev(var->dev);
    for (int k = 0; k < n; k++)
        s->s[k] = vdev_variable(vdev_tensor_zeros(var->shape, var->ndim, VDEV_F32));
    vdev_placement_pop_dev();
    for (int k = 0; k < n; k++)
        if (!s->s[k]) {
            for (int j = 0; j < n; j++)
                vdev_tensor_free(s->s[j]);
            return NULL;
        }
    /* slots are state, not trainable */
    for (int k = 0; k < n; k++)
        s->s[k]->requires_grad = 0;
    o->n_slots++;
    return s;
}

VDEV_API enum vdev_status vdev_optimizer_apply(vdev_optimizer_t *o, vdev_tensor_t *const *vars,
                                               vdev_tensor_t *const *grads, int n)
{
    if (!o || n < 0 || (n && (!vars || !grads)))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_optimizer_apply: bad arguments");
    for (int i = 0; i < n; i++) {
        if (!grads[i])
            return vdev_last_status() != VDEV_OK
                       ? vdev_last_status()
                       : vdev_error(VDEV_ERR_INVALID_ARG, "gradient %d is NULL", i);
        if (!vdev_tensor_valid(vars[i]) || !vdev_tensor_valid(grads[i]))
            return VDEV_ERR_INVALID_ARG;
        if (!vars[i]->is_variable)
            return vdev_error(VDEV_ERR_INVALID_ARG,
                              "vdev_optimizer_apply: tensor %d is not a variable", i);
    }
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    if (o->kind == OPT_ADAM) {
        o->step++;
        double t = (double)o->step;
        p.f[0] = o->lr * sqrt(1.0 - pow(o->beta2, t)) / (1.0 - pow(o->beta1, t));
        p.f[1] = o->beta1;
        p.f[2] = o->beta2;
        p.f[3] = o->eps;
    } else {
        p.f[0] = o->lr;
        p.f[1] = o->momentum;
    }
    for (int i = 0; i < n; i++) {
        struct slot *s = slot_of(o, vars[i]);
        if (!s)
            return vdev_last_status();
        enum vdev_status st;
        if (o->kind == OPT_ADAM) {
            vdev_tensor_t *in[4] = {vars[i], grads[i], s->s[0], s->s[1]};
            st = vdev_op_run_inplace(VDEV_OP_ADAM_UPDATE, in, 4, &p);
        } else {
            vdev_tensor_t *in[3] = {vars[i], grads[i], s->s[0]};
            st = vdev_op_run_inplace(VDEV_OP_SGD_UPDATE, in, 3, &p);
        }
        if (st != VDEV_OK)
            return st;
    }
    return VDEV_OK;
}

VDEV_API void vdev_optimizer_free(vdev_optimizer_t *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->n_slots; i++) {
        vdev_tensor_free(o->slots[i].s[0]);
        vdev_tensor_free(o->slots[i].s[1]);
    }
    free(o->slots);
    free(o);
}
