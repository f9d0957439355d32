/* nn.c — the SGD and Adam optimizers, written with the public ops (the
 * layers and models are in layers.c).
 *
 * The optimizers keep their slots (velocity; Adam's m and v) beside each
 * variable on its device and update it in place with one fused op there.
 * An update makes every slot it needs before it changes anything, all or
 * none, so one that runs out of memory leaves the variables, the slots and
 * the step count as they were (vdev_optimizer_prepare makes them ahead for
 * the mirrored strategy, which takes them back with vdev_optimizer_unprepare
 * when another replica could not make its own).
 * vdev_optimizer_slots and the iteration count give that state to a
 * checkpoint, so a restored run goes on as if it had never stopped. Adam
 * follows TensorFlow: lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t),
 * m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, var -= lr_t m / (sqrt(v) + eps).
 * The hyperparameters may change between updates (vdev_sgd_set,
 * vdev_adam_set in vdev/nn.h, checked as the constructors check them); the
 * next update uses the new values. SGD without momentum has no velocity,
 * as Keras's makes no momentum slot: none is made, its update (var -= lr g)
 * runs with the variable in the velocity's place, which the kernels do not
 * touch without momentum, and switching momentum off frees the velocities
 * (but those vdev_optimizer_slots handed out, zeroed in place); momentum
 * switched on again makes them, zeros, as a fresh optimizer's. The slots
 * themselves are kept in slots.c, with the state shared in optim.h; each
 * call that takes an optimizer's lock first frees the slots of the
 * variables freed since, and their weight decay exclusions (optim_enter);
 * vdev_optimizer_apply, vdev_optimizer_prepare and vdev_optimizer_slots
 * refuse one of the optimizer's own slots as a variable.
 *
 * Optimizers, like layers and models, are checked handles (base/handles.h),
 * each kind in a table of its own, so a freed or foreign one is an error
 * (vdev_nn_object_of, vdev_nn_kill_handle: handles.c, shared with layers.c). They hold
 * public tensor handles and call the public ops, like any caller, and look
 * their variables up once per update to run the fused update op on the
 * library's tensors. */
#include "nn/optim.h"
#include "ops/ops.h"
#include "vdev/nn.h"

#include <math.h>
#include <string.h>

/* ---- optimizers ---- */

static struct vdev_handle_table optims = VDEV_HANDLE_TABLE("optimizer", 5, struct optim);

/* The weight decay's exclusions of the variables freed since (their handles
 * dead) go, at the same point as their slots: a dead handle never comes
 * back (the next tensor in its place in the table has another generation),
 * so such an entry excludes nothing, and kept it would make the list grow
 * with every variable a long run makes, excludes and frees. */
static void excl_prune(struct optim *o)
{
    int kept = 0;
    for (int i = 0; i < o->n_excl; i++)
        if (vdev_tens_peek(o->excl[i]))
            o->excl[kept++] = o->excl[i];
    o->n_excl = kept;
}

/* vdev_nn_enter for optimizer o (NULL passes through), then the records of
 * variables freed since its last call go, their slots freed
 * (vdev_nn_slots_prune). Here, under the optimizer's own lock, rather than
 * when the variable is freed: the tensor layer is below this one and knows
 * no optimizer, and a free that had to take the lock of every optimizer
 * keeping a slot for the variable would wait for their updates, and would
 * wait for itself when a pressure callback met inside an update frees a
 * variable. The weight decay's exclusions of those variables go too
 * (excl_prune). Every change to the records is made under this lock. */
static void *optim_enter(struct optim *o, struct vdev_nn_in *in, const char *fn)
{
    o = vdev_nn_enter(o, in, fn);
    if (o) {
        vdev_nn_slots_prune(o);
        excl_prune(o);
    }
    return o;
}

static vdev_optimizer_t *optim_new(enum opt_kind kind)
{
    uint64_t h;
    struct optim *o = vdev_handle_alloc(&optims, &h);
    if (!o)
        return NULL;
    memset(o, 0, sizeof *o);
    pthread_mutex_init(&o->head.lock, NULL);
    o->head.rgen = vdev_nn_runtime();
    o->kind = kind;
    return (vdev_optimizer_t *)(uintptr_t)h;
}

/* SGD's hyperparameters are valid (else VDEV_ERR_INVALID_ARG naming fn):
 * the one check of vdev_sgd_new and vdev_sgd_set. Each must be finite (an
 * infinite learning rate would pass ">= 0" and turn every weight into inf or
 * NaN at the first update), and is named when it is not. A learning rate of
 * 0 is taken, as Keras takes it: a warm-up schedule starts there, and the
 * update leaves the weights as they are. Momentum may be 1, as Keras's SGD
 * takes [0, 1]: the velocity then never decays. */
static int sgd_values_ok(const char *fn, float lr, float momentum)
{
    if (vdev_check_finite(fn, "learning rate", lr) != VDEV_OK ||
        vdev_check_finite(fn, "momentum", momentum) != VDEV_OK)
        return 0;
    if (!(lr >= 0) || !(momentum >= 0 && momentum <= 1)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: learning rate %g must be >= 0 and momentum %g in "
                                         "[0, 1]",
                   fn, lr, momentum);
        return 0;
    }
    return 1;
}

/* Adam's, for vdev_adam_new and vdev_adam_set: each finite (named when
 * not), then in range (the learning rate 0 too, as SGD's). */
static int adam_values_ok(const char *fn, float lr, float beta1, float beta2, float eps)
{
    if (vdev_check_finite(fn, "learning rate", lr) != VDEV_OK ||
        vdev_check_finite(fn, "beta1", beta1) != VDEV_OK ||
        vdev_check_finite(fn, "beta2", beta2) != VDEV_OK ||
        vdev_check_finite(fn, "epsilon", eps) != VDEV_OK)
        return 0;
    if (!(lr >= 0) || !(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !(eps > 0)) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "%s: needs learning rate >= 0, betas in [0, 1), epsilon > 0 (got %g, %g, %g, "
                   "%g)",
                   fn, lr, beta1, beta2, eps);
        return 0;
    }
    return 1;
}

VDEV_API vdev_optimizer_t *vdev_sgd_new(float lr, float momentum)
{
    if (vdev_runtime_refuse_forked("vdev_sgd_new")) /* no runtime can run here to apply it */
        return NULL;
    if (!sgd_values_ok("vdev_sgd_new", lr, momentum))
        return NULL;
    vdev_optimizer_t *h = optim_new(OPT_SGD);
    struct optim *o = vdev_handle_get(&optims, h);
    if (o) {
        o->lr = lr;
        o->momentum = momentum;
    }
    return h;
}

VDEV_API vdev_optimizer_t *vdev_adam_new(float lr, float beta1, float beta2, float eps)
{
    if (vdev_runtime_refuse_forked("vdev_adam_new")) /* no runtime can run here to apply it */
        return NULL;
    if (!adam_values_ok("vdev_adam_new", lr, beta1, beta2, eps))
        return NULL;
    vdev_optimizer_t *h = optim_new(OPT_ADAM);
    struct optim *o = vdev_handle_get(&optims, h);
    if (o) {
        o->lr = lr;
        o->beta1 = beta1;
        o->beta2 = beta2;
        o->eps = eps;
    }
    return h;
}

/* The live optimizer behind h for fn, of kind `kind`; NULL with
 * VDEV_ERR_INVALID_ARG naming what is wrong otherwise. */
static struct optim *optim_of_kind(vdev_optimizer_t *h, enum opt_kind kind, const char *fn)
{
    struct optim *o = vdev_nn_object_of(&optims, h, fn);
    if (o && o->kind != kind) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: the optimizer is %s, not %s", fn,
                   o->kind == OPT_ADAM ? "Adam" : "SGD", kind == OPT_ADAM ? "Adam" : "SGD");
        return NULL;
    }
    return o;
}

VDEV_API enum vdev_status vdev_sgd_set(vdev_optimizer_t *h, float lr, float momentum)
{
    struct vdev_nn_in in;
    struct optim *o = optim_of_kind(h, OPT_SGD, "vdev_sgd_set");
    if (!o || !sgd_values_ok("vdev_sgd_set", lr, momentum) ||
        !optim_enter(o, &in, "vdev_sgd_set"))
        return vdev_last_status();
    /* momentum off: no velocity from here on (freed; a slot handle given
     * out reads zeros), and momentum switched on again starts from zeros */
    enum vdev_status st =
        o->momentum != 0 && momentum == 0 ? vdev_nn_slots_momentum_off(o) : VDEV_OK;
    if (st == VDEV_OK) {
        o->lr = lr;
        o->momentum = momentum;
    }
    vdev_nn_leave(&in);
    return st;
}

VDEV_API enum vdev_status vdev_adam_set(vdev_optimizer_t *h, float lr, float beta1, float beta2,
                                        float eps)
{
    struct vdev_nn_in in;
    struct optim *o = optim_of_kind(h, OPT_ADAM, "vdev_adam_set");
    if (!o || !adam_values_ok("vdev_adam_set", lr, beta1, beta2, eps) ||
        !optim_enter(o, &in, "vdev_adam_set"))
        return vdev_last_status();
    o->lr = lr;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    vdev_nn_leave(&in);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_sgd_set_nesterov(vdev_optimizer_t *h, bool nesterov)
{
    struct vdev_nn_in in;
    struct optim *o = optim_of_kind(h, OPT_SGD, "vdev_sgd_set_nesterov");
    if (!optim_enter(o, &in, "vdev_sgd_set_nesterov"))
        return vdev_last_status();
    o->nesterov = nesterov;
    vdev_nn_leave(&in);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_adam_set_amsgrad(vdev_optimizer_t *h, bool amsgrad)
{
    struct vdev_nn_in in;
    struct optim *o = optim_of_kind(h, OPT_ADAM, "vdev_adam_set_amsgrad");
    if (!optim_enter(o, &in, "vdev_adam_set_amsgrad"))
        return vdev_last_status();
    o->amsgrad = amsgrad; /* vhat is made (zeros) by the next update that needs it */
    vdev_nn_leave(&in);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_optimizer_set_clipping(vdev_optimizer_t *h, float clipnorm,
                                                      float clipvalue, float global_clipnorm)
{
    static const char fn[] = "vdev_optimizer_set_clipping";
    struct optim *o = vdev_nn_object_of(&optims, h, fn);
    if (!o)
        return vdev_last_status();
    const float v[3] = {clipnorm, clipvalue, global_clipnorm};
    static const char *const names[3] = {"clipnorm", "clipvalue", "global_clipnorm"};
    for (int k = 0; k < 3; k++) {
        if (vdev_check_finite(fn, names[k], v[k]) != VDEV_OK)
            return vdev_last_status();
        if (v[k] < 0)
            return vdev_error(VDEV_ERR_INVALID_ARG, "%s: %s %g must be >= 0 (0: none)", fn,
                              names[k], v[k]);
    }
    if (clipnorm > 0 && global_clipnorm > 0)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s: At most one of `clipnorm` and `global_clipnorm` can be set. "
                          "Received: clipnorm=%g, global_clipnorm=%g.",
                          fn, clipnorm, global_clipnorm);
    struct vdev_nn_in in;
    if (!optim_enter(o, &in, fn))
        return vdev_last_status();
    o->clip.clipnorm = clipnorm;
    o->clip.clipvalue = clipvalue;
    o->clip.global_clipnorm = global_clipnorm;
    /* no clipping: no scratch for it (made again when clipping comes back) */
    for (int i = 0; !vdev_clip_on(&o->clip) && i < o->n_slots; i++)
        vdev_nn_slot_drop_clip(&o->slots[i]);
    vdev_nn_leave(&in);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_optimizer_set_weight_decay(vdev_optimizer_t *h, float weight_decay)
{
    struct optim *o = vdev_nn_object_of(&optims, h, "vdev_optimizer_set_weight_decay");
    if (!o)
        return vdev_last_status();
    struct vdev_nn_in in;
    if (vdev_check_finite("vdev_optimizer_set_weight_decay", "weight decay", weight_decay) !=
            VDEV_OK ||
        !optim_enter(o, &in, "vdev_optimizer_set_weight_decay"))
        return vdev_last_status();
    o->weight_decay = weight_decay;
    vdev_nn_leave(&in);
    return VDEV_OK;
}

/* Whether variable hvar is excluded from the weight decay. */
int vdev_nn_excluded(const struct optim *o, const vdev_tensor_t *hvar)
{
    for (int i = 0; i < o->n_excl; i++)
        if (o->excl[i] == hvar)
            return 1;
    return 0;
}

VDEV_API enum vdev_status vdev_optimizer_exclude_from_weight_decay(vdev_optimizer_t *h,
                                                                   vdev_tensor_t *const *vars,
                                                                   int n)
{
    static const char fn[] = "vdev_optimizer_exclude_from_weight_decay";
    struct optim *o = vdev_nn_object_of(&optims, h, fn);
    if (!o)
        return vdev_last_status();
    if (n < 0 || (n > 0 && !vars))
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: bad arguments (n %d, vars %s)", fn, n,
                          vars ? "set" : "NULL");
    for (int i = 0; i < n; i++) {
        const struct vdev_tens *v = vdev_tens_use(vars[i], fn);
        if (!v)
            return vdev_last_status();
        if (!v->is_variable)
            return vdev_error(VDEV_ERR_INVALID_ARG, "%s: tensor %d is not a variable", fn, i);
    }
    struct vdev_nn_in in;
    if (!optim_enter(o, &in, fn))
        return vdev_last_status();
    int need = o->n_excl + n;
    if (need > o->cap_excl) {
        int cap = need > 2 * o->cap_excl ? need : 2 * o->cap_excl;
        const vdev_tensor_t **e = vdev_realloc(o->excl, (size_t)cap * sizeof *e);
        if (!e) {
            vdev_nn_leave(&in);
            return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
        }
        o->excl = e;
        o->cap_excl = cap;
    }
    for (int i = 0; i < n; i++) {
        if (vdev_nn_excluded(o, vars[i]))
            continue;
        o->excl[o->n_excl++] = vars[i];
        for (int j = 0; j < o->n_slots; j++)
            if (o->slots[j].var == vars[i])
                o->slots[j].no_decay = 1;
    }
    vdev_nn_leave(&in);
    return VDEV_OK;
}

int vdev_nn_optimizer_n_excluded(vdev_optimizer_t *h)
{
    static const char fn[] = "vdev_nn_optimizer_n_excluded";
    struct vdev_nn_in in;
    struct optim *o = vdev_nn_enter(vdev_nn_object_of(&optims, h, fn), &in, fn);
    if (!o)
        return -1;
    int n = o->n_excl;
    vdev_nn_leave(&in);
    return n;
}

/* Checks an apply's arguments (grads may be NULL: prepare). */
static struct optim *apply_args(vdev_optimizer_t *h, vdev_tensor_t *const *vars,
                                vdev_tensor_t *const *grads, int n, int with_grads, const char *fn)
{
    struct optim *o = vdev_nn_object_of(&optims, h, fn);
    if (!o)
        return NULL;
    if (n < 0 || (n && (!vars || (with_grads && !grads)))) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: bad arguments (n %d, vars %s, grads %s)", fn, n,
                   vars ? "set" : "NULL", grads ? "set" : "NULL");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (with_grads && !grads[i]) {
            if (vdev_last_status() == VDEV_OK)
                vdev_error(VDEV_ERR_INVALID_ARG, "gradient %d is NULL", i);
            return NULL;
        }
        const struct vdev_tens *v = vdev_tens_use(vars[i], fn);
        if (!v || (with_grads && !vdev_tens_use(grads[i], fn)))
            return NULL;
        if (!v->is_variable) {
            vdev_error(VDEV_ERR_INVALID_ARG, "%s: tensor %d is not a variable", fn, i);
            return NULL;
        }
    }
    return o;
}

/* Keras's slot names: Adam's s[0..3), SGD's s[0]. */
static const char *const adam_names[] = {"m", "v", "vhat"}, *const sgd_names[] = {"momentum"};

/* The name of o's own slot h (a velocity or moment of one of its
 * variables), or NULL when h is none of them. Under o's lock. */
static const char *own_slot_name(const struct optim *o, const vdev_tensor_t *h)
{
    for (int i = 0; i < o->n_slots; i++)
        for (int k = 0; k < 3; k++)
            if (o->slots[i].s[k] == h)
                return o->kind == OPT_ADAM ? adam_names[k] : sgd_names[0];
    return NULL;
}

/* Whether one of vars[0..n) (their tensors t, or NULL to look them up) is
 * one of o's own slots, for fn: then VDEV_ERR_INVALID_ARG naming the first
 * (its index and slot name). A slot is the optimizer's state, not a
 * variable it trains: slots of it would be state of state, kept as long as
 * the optimizer. Under o's lock, before anything changes, so the call that
 * is refused makes no slot and updates nothing. Only a tensor marked as an
 * optimizer's slot is looked for among o's records (every slot is marked
 * when made), so an update of model variables costs one load each. */
static int own_slot_refused(const struct optim *o, vdev_tensor_t *const *vars,
                            struct vdev_tens *const *t, int n, const char *fn)
{
    for (int i = 0; i < n; i++) {
        const struct vdev_tens *v = t ? t[i] : vdev_tens_peek(vars[i]);
        if (!v || atomic_load_explicit(&v->owner, memory_order_relaxed) !=
                      VDEV_TENS_OWNER_OPTIMIZER)
            continue;
        const char *own = own_slot_name(o, vars[i]);
        if (own) {
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "%s: tensor %d is one of the optimizer's own slots (\"%s\"), not a "
                       "variable it updates",
                       fn, i, own);
            return 1;
        }
    }
    return 0;
}

/* The host scratch an update of n variables takes from the calling thread's
 * block (scratch.c) beyond its stack arrays: above APPLY_ON_STACK variables,
 * the held tensors (2n), the operand lists (7n), their pointers (2n), the
 * clipped gradients with their buffers (3n) and the parameters (n); above
 * 32, the in-place op's records after them. vdev_optimizer_prepare takes it
 * ahead, so the apply that follows on its thread allocates none. */
#define APPLY_ON_STACK 64
static size_t apply_scratch_bytes(int n)
{
    size_t ptrs = n > APPLY_ON_STACK ? 15 * (size_t)n : 0;
    return ptrs * sizeof(void *) + vdev_op_inplace_scratch_bytes(n);
}

enum vdev_status vdev_optimizer_prepare(vdev_optimizer_t *h, vdev_tensor_t *const *vars, int n)
{
    struct vdev_nn_in in;
    struct optim *o = optim_enter(apply_args(h, vars, NULL, n, 0, "vdev_optimizer_prepare"), &in,
                                    "vdev_optimizer_prepare");
    if (!o)
        return vdev_last_status() != VDEV_OK ? vdev_last_status() : VDEV_ERR_INVALID_ARG;
    /* the scratch the apply will take on this thread, then the slots */
    enum vdev_status st = VDEV_OK;
    size_t need = apply_scratch_bytes(n);
    if (own_slot_refused(o, vars, NULL, n, "vdev_optimizer_prepare"))
        st = VDEV_ERR_INVALID_ARG;
    else if (need && vdev_nn_scratch_reserve(need) != VDEV_OK) {
        vdev_error_prefix("vdev_optimizer_prepare");
        st = VDEV_ERR_OOM;
    } else {
        st = vdev_nn_slots_make(o, vars, NULL, n);
    }
    vdev_nn_leave(&in);
    return st;
}

void vdev_optimizer_unprepare(vdev_optimizer_t *h)
{
    struct vdev_nn_in in;
    struct optim *o = optim_enter(vdev_nn_object_of(&optims, h, "vdev_optimizer_unprepare"),
                                    &in, "vdev_optimizer_unprepare");
    if (!o)
        return;
    vdev_nn_slots_drop_pending(o);
    vdev_nn_leave(&in);
}

/* The update ops' parameters: the hyperparameters, Nesterov, and the
 * weight decay with the plain learning rate (Keras decays by wd lr, Adam's
 * too, not by its bias-corrected lr_t). */
static void update_params(const struct optim *o, struct vdev_op_params *p)
{
    memset(p, 0, sizeof *p);
    if (o->kind == OPT_ADAM) {
        double t = (double)(o->step + 1);
        p->f[0] = o->lr * sqrt(1.0 - pow(o->beta2, t)) / (1.0 - pow(o->beta1, t));
        p->f[1] = o->beta1;
        p->f[2] = o->beta2;
        p->f[3] = o->eps;
    } else {
        /* momentum 0: the kernel updates var alone (var -= lr g) */
        p->f[0] = o->lr;
        p->f[1] = o->momentum;
        p->i[0] = o->nesterov;
    }
    if (o->weight_decay != 0) {
        p->i[VDEV_UPDATE_WD] = vdev_param_of_f32(o->weight_decay);
        p->i[VDEV_UPDATE_WD_LR] = vdev_param_of_f32(o->lr);
    }
}

/* Runs the update of vars with gradients g (slots made): one fused op per
 * variable, or AMSGrad's two (the moments, then the variables). op_scratch:
 * the in-place op's records (vdev_op_inplace_scratch_bytes(n); NULL for up to
 * 32 variables, which need none). */
static enum vdev_status run_updates(struct optim *o, vdev_tensor_t *const *vars,
                                    struct vdev_tens *const *hv, vdev_tensor_t *const *g,
                                    vdev_tensor_t *const *grads, struct vdev_tens *const *hg,
                                    int n, struct vdev_tens **lists, struct vdev_tens ***pins,
                                    const struct vdev_op_params **ps, void *op_scratch)
{
    struct vdev_op_params p, p_nowd;
    update_params(o, &p);
    p_nowd = p;
    p_nowd.i[VDEV_UPDATE_WD] = p_nowd.i[VDEV_UPDATE_WD_LR] = 0;
    int ams = o->kind == OPT_ADAM && o->amsgrad;
    int k_in = o->kind == OPT_ADAM ? 4 : 3;
    for (int i = 0; i < n; i++) {
        struct vdev_tens *var = hv[i];
        struct slot *s = vdev_nn_slot_of(o, vars[i], var); /* made before: a lookup */
        struct vdev_tens **l = lists + (size_t)i * 7, **l2 = l + 4;
        l[0] = ams ? vdev_tens_peek(s->s[0]) : var;
        l[1] = g[i] == grads[i] ? hg[i] : vdev_tens_peek(g[i]); /* the caller's, or clipped */
        /* SGD without momentum has no velocity: the variable stands in its
         * place, which the kernels neither read nor write then (a velocity
         * handed out is left alone, its version and stream too) */
        l[2] = o->kind == OPT_SGD && o->momentum == 0 ? var
                                                      : vdev_tens_peek(s->s[ams ? 1 : 0]);
        if (k_in == 4)
            l[3] = vdev_tens_peek(s->s[ams ? 2 : 1]);
        l2[0] = var;
        l2[1] = ams ? vdev_tens_peek(s->s[0]) : NULL;
        l2[2] = ams ? vdev_tens_peek(s->s[2]) : NULL;
        pins[i] = l;
        pins[n + i] = l2;
        ps[i] = s->no_decay ? &p_nowd : &p;
    }
    enum vdev_op op = ams                     ? VDEV_OP_AMSGRAD_MOMENTS
                      : o->kind == OPT_ADAM ? VDEV_OP_ADAM_UPDATE
                                            : VDEV_OP_SGD_UPDATE;
    enum vdev_status st = vdev_op_exec_inplace_all_in(
        op, (struct vdev_tens *const *const *)pins, n, k_in, ps, op_scratch);
    /* AMSGrad's second op reads only what the first checked and brought to
     * each variable's device: only a backend failure stops it. It works in
     * the same scratch as the first (done with it now), so it takes no host
     * memory either: a failure there, with the moments already moved by the
     * first op, would leave the update half made (the same update made again
     * would move them twice). */
    if (st == VDEV_OK && ams)
        st = vdev_op_exec_inplace_all_in(VDEV_OP_AMSGRAD_APPLY,
                                         (struct vdev_tens *const *const *)(pins + n), n, 3, ps,
                                         op_scratch);
    return st;
}

/* vdev_optimizer_apply with the variables and gradients held (their
 * tensors hv and hg, which stay valid where a racing free kills a handle). */
static enum vdev_status apply_held(struct optim *o, vdev_tensor_t *const *vars,
                                   vdev_tensor_t *const *grads, struct vdev_tens *const *hv,
                                   struct vdev_tens *const *hg, int n, void **arena)
{
    /* Every slot first: a slot that cannot be made fails the call before any
     * variable (or Adam's step count) changes. */
    enum vdev_status mst = vdev_nn_slots_make(o, vars, hv, n);
    if (mst != VDEV_OK)
        return mst;
    vdev_nn_slots_commit(o); /* the optimizer's now, whatever the update does */
    /* The operand lists of every update (up to 4 operands, and AMSGrad's
     * second op's 3), then one call that checks them all (shapes, dtypes,
     * devices) and copies every gradient from elsewhere before the first
     * variable changes: a bad gradient fails the call with no variable, slot
     * or step count changed. On the stack for a model's usual number of
     * variables (this runs every training step), else in the thread's
     * scratch (apply_scratch_bytes), after the held tensors. */
    struct vdev_tens *lists_s[APPLY_ON_STACK * 7], **ins[2 * APPLY_ON_STACK];
    vdev_tensor_t *clip_s[3 * APPLY_ON_STACK];
    const struct vdev_op_params *ps_s[APPLY_ON_STACK];
    int big = n > APPLY_ON_STACK;
    void **a = big ? arena + 2 * (size_t)n : NULL;
    struct vdev_tens **lists = big ? (struct vdev_tens **)a : lists_s;
    struct vdev_tens ***pins = big ? (struct vdev_tens ***)(a + 7 * (size_t)n) : ins;
    vdev_tensor_t **clipped = big ? (vdev_tensor_t **)(a + 9 * (size_t)n) : clip_s;
    const struct vdev_op_params **ps =
        big ? (const struct vdev_op_params **)(a + 12 * (size_t)n) : ps_s;
    void *op_scratch = big ? (void *)(a + 13 * (size_t)n) : arena;
    enum vdev_status st = VDEV_OK;
    /* Keras clips the gradients first, into the scratch made with the slots
     * (the caller's gradients stay): nothing allocated here */
    /* one scratch per variable: with clipping, a variable comes once */
    for (int i = 0; st == VDEV_OK && vdev_clip_on(&o->clip) && i < n; i++)
        for (int j = 0; j < i && st == VDEV_OK; j++)
            if (vars[j] == vars[i])
                st = vdev_error(VDEV_ERR_INVALID_ARG,
                                "vdev_optimizer_apply: variables #%d and #%d are the same; with "
                                "gradient clipping each variable may come once",
                                j, i);
    if (st == VDEV_OK) {
        vdev_tensor_t **bufs = clipped + n, **sums = clipped + 2 * (size_t)n;
        for (int i = 0; i < n; i++) {
            struct slot *s = vdev_nn_slot_of(o, vars[i], hv[i]); /* a lookup */
            bufs[i] = s->clip[0];
            sums[i] = s->clip[1];
        }
        st = vdev_clip_gradients(&o->clip, grads, hg, n, bufs, sums, clipped);
    }
    if (st == VDEV_OK) {
        st = run_updates(o, vars, hv, clipped, grads, hg, n, lists, pins, ps, op_scratch);
        /* A step counts once its updates were submitted (a backend failure
         * part way counts too: some variables moved with this step's Adam
         * factor). */
        if (st == VDEV_OK || vdev_last_status() == VDEV_ERR_BACKEND)
            o->step++;
    }
    return st;
}

VDEV_API enum vdev_status vdev_optimizer_apply(vdev_optimizer_t *h, vdev_tensor_t *const *vars,
                                               vdev_tensor_t *const *grads, int n)
{
    static const char fn[] = "vdev_optimizer_apply";
    /* Each variable and gradient held for the update, before anything of
     * them is read: a free of one by another thread (the caller's race)
     * kills its handle, but its memory stays until the update is queued, so
     * no write lands in a tensor that took that memory; the freed handle
     * then fails the call. Arguments that are not handles at all are
     * apply_args's to refuse. */
    int ptrs = n >= 0 && (n == 0 || (vars && grads));
    for (int i = 0; ptrs && i < n; i++)
        ptrs = vars[i] && grads[i];
    size_t need = ptrs ? apply_scratch_bytes(n) : 0;
    void **arena = need ? vdev_nn_scratch_take(need) : NULL;
    if (need && !arena) {
        vdev_error_prefix("%s", fn);
        return VDEV_ERR_OOM;
    }
    struct vdev_tens *held_s[2 * APPLY_ON_STACK];
    struct vdev_tens **held = !ptrs                 ? NULL
                              : n > APPLY_ON_STACK ? (struct vdev_tens **)arena
                                                   : held_s;
    /* variable i, then gradient i: the order apply_args checks them in */
    int k = 0; /* pairs held */
    enum vdev_status st = VDEV_OK;
    for (; ptrs && k < n; k++) {
        if (!(held[k] = vdev_tens_hold(vars[k], fn))) {
            st = vdev_last_status();
            break;
        }
        if (!(held[n + k] = vdev_tens_hold(grads[k], fn))) {
            st = vdev_last_status();
            vdev_tens_release(held[k]);
            break;
        }
    }
    struct vdev_nn_in in;
    struct optim *o = st == VDEV_OK ? optim_enter(apply_args(h, vars, grads, n, 1, fn), &in, fn)
                                    : NULL;
    if (st == VDEV_OK && !o)
        st = vdev_last_status() != VDEV_OK ? vdev_last_status() : VDEV_ERR_INVALID_ARG;
    /* one of its own slots as a variable: refused before any slot is made */
    if (st == VDEV_OK && own_slot_refused(o, vars, held, n, fn))
        st = VDEV_ERR_INVALID_ARG;
    /* the count the update would take it to does not exist (set_iterations
     * allows any count >= 0, as a checkpoint may hold one) */
    if (st == VDEV_OK && o->step == INT64_MAX)
        st = vdev_error(VDEV_ERR_INVALID_ARG,
                        "%s: the iteration count is %lld, the largest an int64 holds: no update "
                        "can be counted after it",
                        fn, (long long)o->step);
    if (st == VDEV_OK)
        st = apply_held(o, vars, grads, held, held + n, n, arena);
    if (o)
        vdev_nn_leave(&in);
    for (int i = 0; i < n && st == VDEV_OK; i++)
        if (!vdev_handle_still(held[i], vars[i]) || !vdev_handle_still(held[n + i], grads[i]))
            st = vdev_error(VDEV_ERR_INVALID_ARG,
                            "%s: %s #%d was freed by another thread during the update", fn,
                            vdev_handle_still(held[i], vars[i]) ? "gradient" : "variable", i);
    while (k-- > 0) {
        vdev_tens_release(held[k]);
        vdev_tens_release(held[n + k]);
    }
    vdev_nn_scratch_give(arena);
    return st;
}

VDEV_API int vdev_optimizer_slots(vdev_optimizer_t *h, vdev_tensor_t *var, vdev_tensor_t **out,
                                  const char **names, int cap)
{
    static const char fn[] = "vdev_optimizer_slots";
    struct vdev_nn_in in;
    struct optim *o = apply_args(h, &var, NULL, 1, 0, fn);
    if (!o || !vdev_nn_out_fits(out, cap, fn) || !optim_enter(o, &in, fn))
        return -1;
    if (own_slot_refused(o, &var, NULL, 1, fn)) {
        vdev_nn_leave(&in);
        return -1;
    }
    int n = vdev_nn_slots_used(o);
    struct slot *sl = n ? vdev_nn_slot_of(o, var, vdev_tens_peek(var)) : NULL;
    if (sl) {
        /* given out: the caller's handles stay valid until the optimizer
         * is freed (SGD's velocity too, zeroed instead of freed when
         * momentum is switched off) */
        sl->pending = 0;
        sl->given |= (1u << n) - 1;
    }
    for (int k = 0; sl && k < n && k < cap; k++) {
        out[k] = sl->s[k];
        if (names)
            names[k] = o->kind == OPT_ADAM ? adam_names[k] : sgd_names[k];
    }
    vdev_nn_leave(&in);
    return n && !sl ? -1 : n;
}

VDEV_API enum vdev_status vdev_optimizer_slots_release(vdev_optimizer_t *h, vdev_tensor_t *var)
{
    static const char fn[] = "vdev_optimizer_slots_release";
    struct vdev_nn_in in;
    struct optim *o = var ? apply_args(h, &var, NULL, 1, 0, fn) : vdev_nn_object_of(&optims, h, fn);
    if (!o || !optim_enter(o, &in, fn))
        return vdev_last_status();
    vdev_nn_slots_release(o, var);
    vdev_nn_leave(&in);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_optimizer_get_iterations(const vdev_optimizer_t *h, int64_t *out)
{
    const struct optim *o = vdev_nn_object_of(&optims, h, "vdev_optimizer_get_iterations");
    if (!o)
        return vdev_last_status();
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_optimizer_get_iterations: out is NULL");
    *out = o->step;
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_optimizer_set_iterations(vdev_optimizer_t *h, int64_t n)
{
    struct optim *o = vdev_nn_object_of(&optims, h, "vdev_optimizer_set_iterations");
    if (!o)
        return vdev_last_status();
    if (n < 0)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "vdev_optimizer_set_iterations: %lld updates is negative",
                          (long long)n);
    o->step = n;
    return VDEV_OK;
}

VDEV_API void vdev_optimizer_free(vdev_optimizer_t *h)
{
    if (!h)
        return;
    struct optim *o = vdev_nn_object_any(&optims, h, "vdev_optimizer_free");
    if (!o || !vdev_nn_kill_handle(&optims, o, h, "vdev_optimizer_free"))
        return;
    vdev_nn_slots_free(o);
    free(o->excl);
    pthread_mutex_destroy(&o->head.lock);
    vdev_handle_release(&optims, o);
}
