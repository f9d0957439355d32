/* ops_convt_case.h — test_ops.c's cases of the transposed 2-D convolution
 * (VDEV_OP_CONV2D_TRANSPOSE): the shapes of the convolution cases of
 * ops_cases_shaped.h (every size, stride, padding and dilation there), the
 * input being the convolution's output-shaped dy and the output's shape its
 * x's. Included by ops_cases.h after ops_cases_shaped.h, whose conv_case()
 * it uses; ops_convt_expect.h has the expected values. */
#ifndef VDEV_TESTS_OPS_CONVT_CASE_H
#define VDEV_TESTS_OPS_CONVT_CASE_H

/* The case of Conv2DBackpropInput (x, filter, dy) as (dy, filter) into x's shape. */
static int convt_case(struct tcase *c, int size, int var)
{
    if (!conv_case(c, VDEV_OP_CONV2D_BACKPROP_INPUT, size, var))
        return 0;
    const int64_t *x = c->in[0].shape;
    c->p.i[2] = x[0];
    c->p.j[2] = x[1];
    c->p.j[3] = x[2];
    c->p.f[1] = (double)x[3];
    free(c->in[0].data);
    c->in[0] = c->in[2];
    memset(&c->in[2], 0, sizeof c->in[2]);
    c->n_in = 2;
    c->op = VDEV_OP_CONV2D_TRANSPOSE;
    char desc[sizeof c->desc];
    memcpy(desc, c->desc, sizeof desc);
    snprintf(c->desc, sizeof c->desc, "Conv2DTranspose of %.120s", desc);
    return 1;
}
#endif
