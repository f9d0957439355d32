/* cuda_updates.cu — the optimizer updates of the CUDA plugin (SGD with
 * Nesterov momentum, Adam, AMSGrad's two halves, all with Keras's decoupled
 * weight decay) and the gradient clipping op, kept apart from the op table
 * of cuda_kernels.cu. Each kernel computes as its CPU reference
 * (src/ops/kernels_ref.c) does, value for value: the doubles where the
 * reference takes doubles, float where it rounds to float (the weight
 * decay, the clipping), so a simulated GPU, the CPU and a real GPU agree.
 * --fmad=false keeps the products and sums apart. */
#include "backend/cuda/cuda_device.cuh"

#include <cstring>

namespace vdev_cuda {

namespace {

/* A float carried in an op's i[] (the weight decay: ops/op_ids.h). */
float f32_of_param(int64_t bits)
{
    uint32_t u = (uint32_t)bits;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Keras's decoupled weight decay of one value, in float (vdev_decayed). */
__device__ float decayed(float v, float wd, float lr)
{
    if (wd == 0)
        return v;
    float d = v * wd;
    d = d * lr;
    return v - d;
}

/* As vdev_ref_sgd_update: with momentum 0, var -= lr g and the velocity is
 * neither read nor written; Nesterov steps by momentum velocity - lr g. */
__global__ void k_sgd(float *var, const float *g, float *vel, int64_t n, double lr, double mom,
                      int nesterov, float wd, float wlr)
{
    GRID_LOOP(i, n)
    {
        float w = decayed(var[i], wd, wlr);
        if (mom == 0) {
            var[i] = (float)((double)w - (float)(lr * g[i]));
        } else {
            float v = (float)(mom * vel[i] - lr * g[i]);
            vel[i] = v;
            double step = nesterov ? mom * v - lr * g[i] : (double)v;
            var[i] = (float)((double)w + step);
        }
    }
}

__global__ void k_adam(float *var, const float *g, float *m, float *v, int64_t n, double lr,
                       double b1, double b2, double eps, float wd, float wlr)
{
    GRID_LOOP(i, n)
    {
        double gi = g[i];
        m[i] = (float)(b1 * m[i] + (1.0 - b1) * gi);
        v[i] = (float)(b2 * v[i] + (1.0 - b2) * gi * gi);
        float w = decayed(var[i], wd, wlr);
        var[i] = (float)((double)w - lr * m[i] / (sqrt((double)v[i]) + eps));
    }
}

/* (m, grad, v, vhat): the moments, then vhat = max(vhat, v). */
__global__ void k_amsgrad_moments(float *m, const float *g, float *v, float *vh, int64_t n,
                                  double b1, double b2)
{
    GRID_LOOP(i, n)
    {
        double gi = g[i];
        m[i] = (float)(b1 * m[i] + (1.0 - b1) * gi);
        float vi = (float)(b2 * v[i] + (1.0 - b2) * gi * gi);
        v[i] = vi;
        vh[i] = vh[i] >= vi ? vh[i] : vi;
    }
}

/* (var, m, vhat): var -= lr_t m / (sqrt(vhat) + eps) after the decay. */
__global__ void k_amsgrad_apply(float *var, const float *m, const float *vh, int64_t n, double lr,
                                double eps, float wd, float wlr)
{
    GRID_LOOP(i, n)
    {
        float w = decayed(var[i], wd, wlr);
        var[i] = (float)((double)w - lr * m[i] / (sqrt((double)vh[i]) + eps));
    }
}

/* g * mul / div in float, then clamped to [-c, c] when c > 0. */
__global__ void k_clip(const float *x, float *o, int64_t n, float mul, float div, float c)
{
    GRID_LOOP(i, n)
    {
        float t = x[i] * mul;
        t = t / div;
        if (c > 0)
            t = t < -c ? -c : (t > c ? c : t);
        o[i] = t;
    }
}

} // namespace

int run_update(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    int64_t n = 1;
    for (int d = 0; d < a->in_ndim[0]; d++)
        n *= a->in_shape[0][d];
    float wd = f32_of_param(a->i[VDEV_UPDATE_WD]), wlr = f32_of_param(a->i[VDEV_UPDATE_WD_LR]);
    float *o[4] = {(float *)a->out[0], (float *)a->out[1], (float *)a->out[2],
                   (float *)a->out[3]};
    const float *g = (const float *)a->in[1];
    int grid = grid_for(n, kThreads, n_sm);
    switch (a->op) {
    case VDEV_OP_SGD_UPDATE:
        LAUNCH(grid, kThreads, s, k_sgd)(o[0], g, o[2], n, a->f[0], a->f[1], a->i[0] != 0, wd,
                                         wlr);
        return 1;
    case VDEV_OP_ADAM_UPDATE:
        LAUNCH(grid, kThreads, s, k_adam)(o[0], g, o[2], o[3], n, a->f[0], a->f[1], a->f[2],
                                          a->f[3], wd, wlr);
        return 1;
    case VDEV_OP_AMSGRAD_MOMENTS:
        LAUNCH(grid, kThreads, s, k_amsgrad_moments)(o[0], g, o[2], o[3], n, a->f[1], a->f[2]);
        return 1;
    case VDEV_OP_AMSGRAD_APPLY:
        LAUNCH(grid, kThreads, s, k_amsgrad_apply)(o[0], g, (const float *)a->in[2], n, a->f[0],
                                                   a->f[3], wd, wlr);
        return 1;
    case VDEV_OP_CLIP_GRAD:
        LAUNCH(grid, kThreads, s, k_clip)((const float *)a->in[0], o[0], n, (float)a->f[0],
                                          (float)a->f[1], (float)a->f[2]);
        return 1;
    default:
        return 0;
    }
}

} // namespace vdev_cuda
