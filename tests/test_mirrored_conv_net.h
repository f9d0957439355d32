/* test_mirrored_conv_net.h — the small convolutional net that the mirrored
 * strategy's conv tests train (test_mirrored_conv.c, and across processes
 * tests/mpi/mpi_conv.c): conv2d 3x3 SAME + bias, ReLU, a 2x2 max or average
 * pool, flatten, dense, per-example softmax cross-entropy over one-hot
 * labels, TensorFlow's compute_average_loss, and SGD with momentum or Adam;
 * built on every replica from one seed and broadcast from replica 0. Also
 * the global batch (on CPU:0, its class a fixed function of the input) and
 * a helper that reads a replica's variables to the host. */
#ifndef VDEV_TESTS_MIRRORED_CONV_NET_H
#define VDEV_TESTS_MIRRORED_CONV_NET_H

#include "check.h"

#include <stdlib.h>
#include <string.h>

#define NV 4 /* filter [3,3,CI,CO], conv bias [CO], dense [FLAT,NCLS], bias [NCLS] */
#define HW 8
#define CI 2
#define CO 4
#define NCLS 3
#define FLAT ((HW / 2) * (HW / 2) * CO)
#define NPARAM (9 * CI * CO + CO + FLAT * NCLS + NCLS)
#define MAXR 4

struct net {
    vdev_tensor_t *vars[MAXR][NV];
    vdev_optimizer_t *opt[MAXR];
    vdev_tensor_t *x, *y; /* the global batch on CPU:0; y one-hot */
    uint64_t seed;
    int adam, avg_pool;
};

static inline enum vdev_status make_vars(vdev_tensor_t **v, uint64_t seed)
{
    int64_t fs[4] = {3, 3, CI, CO}, cb[1] = {CO}, ws[2] = {FLAT, NCLS}, bs[1] = {NCLS};
    v[0] = vdev_variable(vdev_tensor_uniform(fs, 4, -0.3f, 0.3f, seed));
    v[1] = vdev_variable(vdev_tensor_uniform(cb, 1, -0.1f, 0.1f, seed + 1));
    v[2] = vdev_variable(vdev_tensor_uniform(ws, 2, -0.2f, 0.2f, seed + 2));
    v[3] = vdev_variable(vdev_tensor_uniform(bs, 1, -0.1f, 0.1f, seed + 3));
    for (int i = 0; i < NV; i++)
        if (!v[i])
            return vdev_last_status();
    return VDEV_OK;
}

/* -sum(y * log_softmax(dense(flatten(pool(relu(conv(x) + b)))))), [rows] */
static inline vdev_tensor_t *per_example(const struct net *n, vdev_tensor_t *const *v,
                                         const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    vdev_tensor_t *h = vdev_relu(vdev_add(vdev_conv2d(x, v[0], 1, 1, "SAME"), v[1]));
    h = n->avg_pool ? vdev_avg_pool2d(h, 2, 2, 2, 2, "VALID")
                    : vdev_max_pool2d(h, 2, 2, 2, 2, "VALID");
    int64_t fs[2] = {x ? vdev_tensor_dim(x, 0) : 0, FLAT};
    vdev_tensor_t *logits = vdev_add(vdev_matmul(vdev_reshape(h, fs, 2), v[2], false, false), v[3]);
    return vdev_mul_scalar(vdev_sum(vdev_mul(vdev_log_softmax(logits), y), 1, false), -1.0f);
}

static inline vdev_optimizer_t *make_opt(const struct net *n)
{
    return n->adam ? vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f) : vdev_sgd_new(0.1f, 0.5f);
}

static inline enum vdev_status build(vdev_replica_context_t *ctx, void *u)
{
    struct net *n = u;
    int r = vdev_replica_id(ctx);
    enum vdev_status st = make_vars(n->vars[r], n->seed);
    if (st != VDEV_OK)
        return st;
    if (!(n->opt[r] = make_opt(n)))
        return vdev_last_status();
    return vdev_replica_broadcast(ctx, n->vars[r], NV, 0);
}

static inline enum vdev_status step(vdev_replica_context_t *ctx, void *u)
{
    struct net *n = u;
    int r = vdev_replica_id(ctx);
    vdev_tensor_t *x = vdev_replica_batch(ctx, n->x), *y = vdev_replica_batch(ctx, n->y);
    if (!x || !y)
        return vdev_last_status();
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss =
        vdev_replica_compute_average_loss(ctx, per_example(n, n->vars[r], x, y), 0);
    vdev_tensor_t *grads[NV];
    enum vdev_status st =
        loss ? vdev_tape_gradient(tape, loss, n->vars[r], NV, grads) : vdev_last_status();
    vdev_tape_end(tape);
    if (st == VDEV_OK)
        st = vdev_replica_apply_gradients(ctx, n->opt[r], n->vars[r], grads, NV);
    return st == VDEV_OK ? vdev_replica_return(ctx, loss) : st;
}

/* A global batch of `rows` on CPU:0, the class a fixed function of x. */
static inline void make_batch(struct net *n, int64_t rows, uint64_t seed)
{
    vdev_tensor_free(n->x);
    vdev_tensor_free(n->y);
    int64_t xs[4] = {rows, HW, HW, CI}, ys[2] = {rows, NCLS};
    size_t per = HW * HW * CI;
    float *xh = malloc((size_t)rows * per * sizeof *xh);
    float *yh = calloc((size_t)rows * NCLS, sizeof *yh);
    CHECK(xh && yh);
    vdev_device_push("CPU:0");
    n->x = vdev_tensor_uniform(xs, 4, -1, 1, seed);
    CHECK_OK(vdev_tensor_to_host(n->x, xh, (size_t)rows * per * sizeof *xh));
    for (int64_t i = 0; i < rows; i++) {
        float s = 0;
        for (size_t k = 0; k < per; k++)
            s += xh[(size_t)i * per + k] * (float)((int)(k % 7) - 3);
        yh[i * NCLS + (s > 2 ? 0 : s < -2 ? 1 : 2)] = 1;
    }
    n->y = vdev_tensor_from_host(yh, ys, 2, VDEV_F32);
    vdev_device_pop();
    CHECK(n->x && n->y);
    free(xh);
    free(yh);
}

static inline void read_vars(vdev_tensor_t *const *v, float *out)
{
    size_t off = 0;
    for (int i = 0; i < NV; i++) {
        size_t k = (size_t)vdev_tensor_numel(v[i]);
        CHECK_OK(vdev_tensor_to_host(v[i], out + off, k * sizeof *out));
        off += k;
    }
    CHECK(off == NPARAM);
}

#endif /* VDEV_TESTS_MIRRORED_CONV_NET_H */
