/* mirrored_model.h — the model the mirrored strategy's tests train: an MLP
 * regression (8 -> 16 -> 4, ReLU) with a per-example mean squared error,
 * TensorFlow's compute_average_loss, and SGD; built on every replica from the
 * same seed and broadcast from replica 0, as a program would. Also the same
 * step on one device with the whole batch, the reference a mirrored step
 * must equal, and helpers that read a model's variables to the host. */
#ifndef VDEV_TESTS_MIRRORED_MODEL_H
#define VDEV_TESTS_MIRRORED_MODEL_H

#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MM_IN 8
#define MM_OUT 4
#define MM_MAX_REPLICAS 8
#define MM_NV 4 /* W0, b0, W1, b1 */

static const int64_t mm_sizes[3] = {MM_IN, 16, MM_OUT};

struct mm {
    vdev_mlp_t *mlp[MM_MAX_REPLICAS];
    vdev_optimizer_t *opt[MM_MAX_REPLICAS];
    vdev_tensor_t *vars[MM_MAX_REPLICAS][MM_NV];
    vdev_tensor_t *x, *y;        /* the global batch, on CPU:0 */
    uint64_t seed;
    float lr;
    int adam;
    int64_t rows[MM_MAX_REPLICAS]; /* rows each replica got in the last step */
    int no_update;               /* evaluate only: loss, no update */
};

/* Builds replica r's model on its device from the seed, then makes every
 * replica's variables replica 0's. */
static inline enum vdev_status mm_build(vdev_replica_context_t *ctx, void *u)
{
    struct mm *m = u;
    int r = vdev_replica_id(ctx);
    m->mlp[r] = vdev_mlp_new(mm_sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, m->seed);
    if (!m->mlp[r])
        return vdev_last_status();
    m->opt[r] = m->adam ? vdev_adam_new(m->lr, 0.9f, 0.999f, 1e-7f) : vdev_sgd_new(m->lr, 0);
    if (!m->opt[r])
        return vdev_last_status();
    vdev_mlp_variables(m->mlp[r], m->vars[r], MM_NV);
    return vdev_replica_broadcast(ctx, m->vars[r], MM_NV, 0);
}

/* mean((pred - y)^2, axis 1): the per-example loss, [rows]. */
static inline vdev_tensor_t *mm_per_example(vdev_mlp_t *mlp, const vdev_tensor_t *x,
                                     const vdev_tensor_t *y)
{
    vdev_tensor_t *d = vdev_sub(vdev_mlp_forward(mlp, x), y);
    return vdev_mean(vdev_mul(d, d), 1, false);
}

/* One training step on this replica's rows; returns the replica's share of
 * the loss. */
static inline enum vdev_status mm_step(vdev_replica_context_t *ctx, void *u)
{
    struct mm *m = u;
    int r = vdev_replica_id(ctx);
    vdev_tensor_t *x = vdev_replica_batch(ctx, m->x), *y = vdev_replica_batch(ctx, m->y);
    if (!x || !y)
        return vdev_last_status();
    m->rows[r] = vdev_tensor_dim(x, 0);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss =
        vdev_replica_compute_average_loss(ctx, mm_per_example(m->mlp[r], x, y), 0);
    vdev_tensor_t *grads[MM_NV];
    enum vdev_status st = loss ? vdev_tape_gradient(tape, loss, m->vars[r], MM_NV, grads)
                               : vdev_last_status();
    vdev_tape_end(tape);
    if (st == VDEV_OK && !m->no_update)
        st = vdev_replica_apply_gradients(ctx, m->opt[r], m->vars[r], grads, MM_NV);
    if (st == VDEV_OK)
        st = vdev_replica_return(ctx, loss);
    return st;
}

/* The global batch: x uniform in [-1, 1], y a fixed function of x. */
static inline void mm_batch(struct mm *m, int64_t rows, uint64_t seed)
{
    vdev_tensor_free(m->x);
    vdev_tensor_free(m->y);
    float *x = malloc((size_t)rows * MM_IN * 4), *y = malloc((size_t)rows * MM_OUT * 4);
    uint64_t z = seed * 2654435761u + 1;
    for (int64_t i = 0; i < rows * MM_IN; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(z >> 11) / 9007199254740992.0 * 2 - 1);
    }
    for (int64_t i = 0; i < rows; i++)
        for (int k = 0; k < MM_OUT; k++)
            y[i * MM_OUT + k] = x[i * MM_IN + k] * x[i * MM_IN + k + 4] - 0.5f * x[i * MM_IN + 7 - k];
    int64_t xs[2] = {rows, MM_IN}, ys[2] = {rows, MM_OUT};
    CHECK_OK(vdev_device_push("CPU:0"));
    m->x = vdev_tensor_from_host(x, xs, 2, VDEV_F32);
    m->y = vdev_tensor_from_host(y, ys, 2, VDEV_F32);
    CHECK_OK(vdev_device_pop());
    CHECK(m->x && m->y);
    free(x);
    free(y);
}

/* The same model on one device, one step on the whole batch: the
 * reference. Returns the loss. */
static inline float mm_single_step(const char *dev, struct mm *m, vdev_mlp_t **mlp, vdev_optimizer_t **opt,
                            vdev_tensor_t **vars)
{
    float out = NAN;
    CHECK_OK(vdev_device_push(dev));
    if (!*mlp) {
        *mlp = vdev_mlp_new(mm_sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, m->seed);
        *opt = m->adam ? vdev_adam_new(m->lr, 0.9f, 0.999f, 1e-7f) : vdev_sgd_new(m->lr, 0);
        vdev_mlp_variables(*mlp, vars, MM_NV);
    }
    vdev_scope_begin();
    vdev_tensor_t *x = vdev_identity(m->x), *y = vdev_identity(m->y);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_div(vdev_sum_all(mm_per_example(*mlp, x, y)),
                                   vdev_tensor_fill(NULL, 0, VDEV_F32,
                                                    (double)vdev_tensor_dim(m->x, 0)));
    vdev_tensor_t *grads[MM_NV];
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, MM_NV, grads));
    vdev_tape_end(tape);
    CHECK_OK(vdev_optimizer_apply(*opt, vars, grads, MM_NV));
    out = vdev_tensor_item(loss);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
    return out;
}

#define MM_PARAMS (MM_IN * 16 + 16 + 16 * MM_OUT + MM_OUT)

/* Every variable of a model, flat, into out[MM_PARAMS]. */
static inline void mm_read(vdev_tensor_t *const *vars, float *out)
{
    size_t off = 0;
    for (int i = 0; i < MM_NV; i++) {
        size_t n = (size_t)vdev_tensor_numel(vars[i]);
        CHECK_OK(vdev_tensor_to_host(vars[i], out + off, n * 4));
        off += n;
    }
}

/* The largest |a - b| over the parameters. */
static inline double mm_max_diff(const float *a, const float *b)
{
    double worst = 0;
    for (int i = 0; i < MM_PARAMS; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        worst = d > worst ? d : worst;
    }
    return worst;
}

static inline void mm_free(struct mm *m, int n)
{
    for (int r = 0; r < n; r++) {
        vdev_mlp_free(m->mlp[r]);
        vdev_optimizer_free(m->opt[r]);
        m->mlp[r] = NULL;
        m->opt[r] = NULL;
    }
    vdev_tensor_free(m->x);
    vdev_tensor_free(m->y);
    m->x = m->y = NULL;
}

#endif
