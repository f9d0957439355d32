/* conv_grads.c — the gradients of 2-D convolution and pooling, written with
 * their gradient ops as TensorFlow's are (nn_grad.py): Conv2D's input gets
 * Conv2DBackpropInput (dy through the filter, back onto the input's pixels)
 * and its filter Conv2DBackpropFilter (the input's windows against dy);
 * MaxPool's input gets MaxPoolGrad (dy to each window's first maximum, read
 * from the input and the pooled output) and AvgPool's AvgPoolGrad (dy spread
 * evenly over each window's elements inside the input). Each runs where the
 * forward op ran, with its parameters (strides, window, padding); the shape
 * rules of the gradient ops check dy against the forward output's shape.
 * As grads.c, din[k] is NULL where the caller's need bit is clear. */
#include "ops/impl.h"

static enum vdev_status status_of(const struct vdev_tens *t)
{
    if (t)
        return VDEV_OK;
    enum vdev_status st = vdev_last_status();
    return st != VDEV_OK ? st : vdev_error(VDEV_ERR_INTERNAL, "a gradient op failed silently");
}

#define NEED(k) ((g->need >> (k)) & 1u)

static struct vdev_tens *op3(enum vdev_op op, const struct vdev_tens *x, const struct vdev_tens *y,
                             const struct vdev_tens *z, const struct vdev_op_params *p)
{
    const struct vdev_tens *in[3] = {x, y, z};
    return vdev_op_exec(op, in, z ? 3 : 2, p);
}

GRAD(vdev_grad_conv2d)
{
    const struct vdev_tens *x = g->in[0], *f = g->in[1], *dy = g->dout;
    din[0] = NEED(0) ? op3(VDEV_OP_CONV2D_BACKPROP_INPUT, x, f, dy, &g->p) : NULL;
    din[1] = NEED(1) ? op3(VDEV_OP_CONV2D_BACKPROP_FILTER, x, f, dy, &g->p) : NULL;
    enum vdev_status st = NEED(0) ? status_of(din[0]) : VDEV_OK;
    return st != VDEV_OK || !NEED(1) ? st : status_of(din[1]);
}

GRAD(vdev_grad_max_pool)
{
    din[0] = op3(VDEV_OP_MAX_POOL_GRAD, g->in[0], g->out, g->dout, &g->p);
    return status_of(din[0]);
}

GRAD(vdev_grad_avg_pool)
{
    din[0] = op3(VDEV_OP_AVG_POOL_GRAD, g->in[0], g->dout, NULL, &g->p);
    return status_of(din[0]);
}
