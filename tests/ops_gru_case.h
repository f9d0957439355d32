/* ops_gru_case.h — test_ops.c's cases of the fused GRU cell (gru_cell.c), u
 * the size's columns: GRUGates on xw and inner [r, 3u], in 3-D [2, r, 3u]
 * too, and with pre-activations out to +-20 (saturated); GRUGatesGrad's two
 * parts; GRUCellOutput on gates [.., 3u] and h_prev [.., u]; GRUCellGrad's
 * two parts, 2-D and 3-D. ops_gru_expect.h has the expected values. */
#ifndef VDEV_TESTS_OPS_GRU_CASE_H
#define VDEV_TESTS_OPS_GRU_CASE_H

/* GATES: var 0 2-D, 1 3-D, 2 2-D in [-20, 20). OUTPUT: var 1 3-D. The grads:
 * var & 1 the part (i[0]), var & 2 3-D. */
static int gru_case(struct tcase *c, enum vdev_op op, int64_t r, int64_t u, int var)
{
    int grad = op == VDEV_OP_GRU_GATES_GRAD || op == VDEV_OP_GRU_CELL_GRAD;
    if (var > (grad || op == VDEV_OP_GRU_GATES ? (grad ? 3 : 2) : 1))
        return 0;
    int three = grad ? (var & 2) != 0 : var == 1, nd = three ? 3 : 2;
    int64_t gs[3] = {2, r, 3 * u}, hs[3] = {2, r, u};
    const int64_t *g = three ? gs : gs + 1, *h = three ? hs : hs + 1;
    if (grad)
        c->p.i[0] = var & 1;
    switch (op) {
    case VDEV_OP_GRU_GATES: {
        float span = var == 2 ? 20.0f : 3.0f;
        in_f(c, 0, g, nd, -span, span);
        in_f(c, 1, g, nd, -span, span);
        break;
    }
    case VDEV_OP_GRU_GATES_GRAD: /* (dg, g, inner) */
        in_f(c, 0, g, nd, -2, 2);
        in_f(c, 1, g, nd, -1, 1);
        in_f(c, 2, g, nd, -2, 2);
        break;
    case VDEV_OP_GRU_CELL_OUTPUT: /* (g, h_prev) */
        in_f(c, 0, g, nd, -1, 1);
        in_f(c, 1, h, nd, -2, 2);
        break;
    default: /* GRU_CELL_GRAD: (dh, g, h_prev) */
        in_f(c, 0, h, nd, -2, 2);
        in_f(c, 1, g, nd, -1, 1);
        in_f(c, 2, h, nd, -2, 2);
        break;
    }
    snprintf(c->desc, sizeof c->desc, "%s gates [%s%lld,%lld] variant %d",
             vdev_op_defs[op].name, three ? "2," : "", (long long)r, (long long)(3 * u), var);
    return 1;
}
#endif
