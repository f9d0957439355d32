"""Keras 2.11's stateful recurrent layers (``stateful=True``): each call
starts from the states the last one left, sample i of a batch continuing
sample i of the one before, until ``reset_states()`` zeroes them (or sets
given values); ``model.reset_states()`` resets every stateful layer of a
model. The states are variables of [batch, units] on the layer's device,
made at the first call (or reset), outside the layer's weights and the
tape (a batch's gradient stops at its first step, as Keras's truncated
backpropagation); a call reads a copy of them and writes its last states
back after its steps. The batch size is fixed: from ``batch_input_shape``
(or ``input_shape`` and ``batch_size``), an Input's ``batch_size`` in a
functional model, else the first call's; another batch size is Keras's
input-compatibility ValueError, a stateful layer whose model cannot know
its batch size Keras's "needs to know its batch size" ValueError. One
device only: under a MirroredStrategy a stateful layer is a ValueError.
"""

import numpy as np

from . import _ops, _strategy_context
from ._conv_layers import _input_shape
from ._tensor import Tensor, Variable, zeros

_NO_BATCH = ("If a RNN is stateful, it needs to know its batch size. Specify the batch size of "
             "your input tensors: \n- If using a Sequential model, specify the batch size by "
             "passing a `batch_input_shape` argument to your first layer.\n- If using the "
             "functional API, specify the batch size by passing a `batch_shape` argument to "
             "your Input layer.")


def batch_input_shape(layer, input_shape, batch_shape, batch_size):
    """Keras's base layer: batch_input_shape as given, else (batch_size,) +
    input_shape; None when neither shape is given."""
    if batch_shape is not None:
        batch_shape = tuple(batch_shape)
        return (batch_shape[0],) + _input_shape(layer, batch_shape[1:], 3)[1:]
    shape = _input_shape(layer, input_shape, 3)
    return None if shape is None else (batch_size,) + shape[1:]


def _batch(layer):
    """The batch size the layer's states have: its variables', else its
    batch input shape's (axis 1 when time-major, as Keras's), else None."""
    if layer._state_vars:
        return int(layer._state_vars[0].shape[0])
    shape = layer._batch_input_shape
    if shape is None:
        return None
    return shape[1] if layer.time_major else shape[0]


def know_batch(layer, shape):
    """A stateful layer (or Bidirectional of one) built by its model for
    inputs of ``shape``: Keras's error when the batch size is unknown, else
    that batch size kept for its states."""
    time_major = getattr(layer, "time_major", False) or getattr(
        getattr(layer, "forward_layer", None), "time_major", False)
    batch = shape[1] if time_major else shape[0]
    if batch is None:
        raise ValueError(_NO_BATCH)
    for sub in getattr(layer, "_sublayers", lambda: [])() or [layer]:
        if sub._batch_input_shape is None or sub._batch_input_shape[0 + time_major] is None:
            sub._batch_input_shape = tuple(shape)


def _make(layer, batch):
    """Zero states [batch, size] (the layer's state sizes), not trainable,
    on the layer's device (its weights', or where vdev puts a new tensor now
    before it has any)."""
    import contextlib
    from ._device import device
    anchor = layer._anchor()
    if layer._device:
        where = device(layer._device)
    elif anchor is not None:
        where = _ops._near(anchor)
    else:
        where = contextlib.nullcontext()
    with where:
        layer._state_vars = [Variable(zeros((batch, size)), trainable=False)
                             for size in layer._state_sizes()]


def before_call(layer, batch, steps, features, initial_state):
    """The states a call of a stateful layer starts from (copies of the
    variables unless initial_state is given), the variables made at the
    first call; another batch size is Keras's input check."""
    if _strategy_context.replica() is not None or layer._strategy is not None:
        raise ValueError("vdev's stateful %s runs on one device: its states are one batch's, "
                         "not a MirroredStrategy's replicas'" % type(layer).__name__)
    expected = _batch(layer)
    if expected is not None and expected != batch:
        spec = (None, expected, features) if layer.time_major else (expected, None, features)
        found = (steps, batch, features) if layer.time_major else (batch, steps, features)
        raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                         "shape=%s, found shape=%s" % (layer.name, spec, found))
    if layer._state_vars is None:
        _make(layer, batch)
    if initial_state is not None:
        return initial_state
    return [_ops.identity(v) for v in layer._state_vars]


def after_call(layer, states):
    """The call's last states into the layer's variables."""
    for v, s in zip(layer._state_vars, states):
        v.assign(s)


def reset(layer, states=None):
    """Keras's RNN.reset_states: zeros, or the values given, checked."""
    if not layer.stateful:
        raise AttributeError("Layer must be stateful.")
    batch = _batch(layer)
    if not batch:
        raise ValueError(_NO_BATCH)
    if layer._state_vars is None:
        _make(layer, batch)
    if states is None:
        for v in layer._state_vars:
            v.assign(np.zeros(tuple(int(d) for d in v.shape), np.float32))
        return
    given = list(states) if isinstance(states, (list, tuple)) else [states]
    if len(given) != len(layer._state_vars):
        raise ValueError("Layer %s expects %d states, but it received %d state values. States "
                         "received: %s" % (layer.name, len(layer._state_vars), len(given), states))
    values = []
    for i, (value, v) in enumerate(zip(given, layer._state_vars)):
        a = value.numpy() if isinstance(value, Tensor) else np.asarray(value, np.float32)
        want = tuple(int(d) for d in v.shape)
        if tuple(a.shape) != want:
            raise ValueError("State %d is incompatible with layer %s: expected shape=%s but "
                             "found shape=%s" % (i, layer.name, want, tuple(a.shape)))
        values.append(a.astype(np.float32))
    for v, a in zip(layer._state_vars, values):
        v.assign(a)
