/* ops_lstm_case.h — test_ops.c's cases of the fused LSTM cell (lstm_cell.c),
 * u the size's columns: LSTMGates on z [r, 4u], in 3-D [2, r, 4u] too, and
 * with pre-activations out to +-20 (saturated); LSTMGatesGrad on the 2-D and
 * 3-D shapes; LSTMCellState and LSTMCellOutput on gates a [.., 4u] and x
 * [.., u], 2-D and 3-D; LSTMCellGrad's four parts on both. ops_lstm_expect.h
 * has the expected values. */
#ifndef VDEV_TESTS_OPS_LSTM_CASE_H
#define VDEV_TESTS_OPS_LSTM_CASE_H

/* GATES: var 0 2-D, 1 3-D, 2 2-D in [-20, 20). The others: var & 1 (GRAD:
 * var >> 2) 3-D; GRAD's part var & 3. */
static int lstm_case(struct tcase *c, enum vdev_op op, int64_t r, int64_t u, int var)
{
    int gates = op == VDEV_OP_LSTM_GATES || op == VDEV_OP_LSTM_GATES_GRAD;
    int grad = op == VDEV_OP_LSTM_CELL_GRAD;
    int last = op == VDEV_OP_LSTM_GATES ? 2 : grad ? 7 : 1;
    if (var > last)
        return 0;
    int three = grad ? var >> 2 : op == VDEV_OP_LSTM_GATES ? var == 1 : var & 1;
    int nd = three ? 3 : 2, k = 0;
    int64_t zs[3] = {2, r, 4 * u}, cs[3] = {2, r, u};
    const int64_t *zsh = three ? zs : zs + 1, *csh = three ? cs : cs + 1;
    if (op == VDEV_OP_LSTM_GATES) {
        float span = var == 2 ? 20.0f : 3.0f;
        in_f(c, 0, zsh, nd, -span, span);
    } else if (gates) {
        in_f(c, 0, zsh, nd, -2, 2);
        in_f(c, 1, zsh, nd, -1, 1);
    } else {
        if (grad) {
            in_f(c, k++, csh, nd, -2, 2);
            c->p.i[0] = var & 3;
        }
        in_f(c, k++, zsh, nd, -1, 1);
        in_f(c, k, csh, nd, -2, 2);
    }
    snprintf(c->desc, sizeof c->desc, "%s gates [%s%lld,%lld] variant %d",
             vdev_op_defs[op].name, three ? "2," : "", (long long)r, (long long)(4 * u), var);
    return 1;
}
#endif
