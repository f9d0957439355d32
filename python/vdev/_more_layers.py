"""Keras 2.11's ``RepeatVector(n)`` and ``PReLU``, exported by
``vdev.layers``. RepeatVector gives [batch, features] inputs n steps,
[batch, n, features] (a GatherV2 of row 0, n times: its gradient the sum
over the steps), as Keras's backend.repeat. PReLU is relu(x) - alpha *
relu(-x) with a learnt ``alpha`` of the input's shape without the batch
(``shared_axes`` of size 1, shared), Keras's weight ``NAME/alpha`` drawn by
``alpha_initializer`` ('zeros') on the layer's device (mirrored under a
strategy's scope), made at ``input_shape``, in a model, or at the first
call. Keras's config keys, checks and errors in its words; regularizers and
constraints only None.
"""

import contextlib
import numbers

from . import _ops, _strategy_context, initializers
from ._conv_layers import _base, _check_rank, _float32_only, _float_input, _none_only
from ._core_layers import _Stateless
from ._device import current_device, device
from ._tensor import int32

__all__ = ["PReLU", "RepeatVector"]


class RepeatVector(_Stateless):
    """Keras's RepeatVector: [batch, features] to [batch, n, features]."""

    def __init__(self, n, name=None, trainable=True, input_shape=None, dtype=None):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError("Expected an integer value for `n`, got %s." % (type(n),))
        super().__init__(name, trainable, input_shape, dtype, ndim=2)
        self.n = int(n)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        _check_rank(self, shape, 2)
        return (shape[0], self.n, shape[1])

    def get_config(self):
        return self._config(n=self.n)

    def __call__(self, inputs, training=None):
        x = _float_input(self._device, inputs)
        shape = tuple(int(d) for d in x.shape)
        _check_rank(self, shape, 2)
        rows = _ops.reshape(x, [shape[0], 1, shape[1]])
        with _ops._near(x):
            steps = _ops.convert_to_tensor([0] * self.n, int32)
        return _ops.gather(rows, steps, axis=1)


class PReLU(_base()):
    """Keras's parametric ReLU."""

    supports_masking = True  # Keras's

    def __init__(self, alpha_initializer="zeros", alpha_regularizer=None, alpha_constraint=None,
                 shared_axes=None, input_shape=None, seed=None, name=None, dtype=None,
                 trainable=True):
        _none_only("PReLU", alpha_regularizer=alpha_regularizer,
                   alpha_constraint=alpha_constraint)
        _float32_only(self, dtype)
        super().__init__(name, trainable)
        self.alpha_initializer = initializers._get(alpha_initializer, seed)
        if self.alpha_initializer is None:
            raise ValueError("Could not interpret initializer identifier: None")
        if shared_axes is None:
            self.shared_axes = None
        elif not isinstance(shared_axes, (list, tuple)):
            self.shared_axes = [shared_axes]
        else:
            self.shared_axes = list(shared_axes)
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self.alpha = None
        self._batch_input_shape = None
        if input_shape is not None:
            self._batch_input_shape = (None,) + tuple(input_shape)
            self.build(self._batch_input_shape)

    @property
    def built(self):
        return self.alpha is not None

    def build(self, input_shape):
        """Keras's: alpha of the input's shape without the batch, 1 on the
        shared axes."""
        from .layers import _adopt, _initial
        if self.alpha is not None:
            return
        shape = list(input_shape[1:])
        for i in self.shared_axes or []:
            shape[i - 1] = 1
        if None in shape:
            raise ValueError("vdev's PReLU needs the input's sizes (but the batch's) to make "
                             "alpha, not %s" % (tuple(input_shape),))
        where = self._device or ("CPU:0" if self._strategy is not None else None)
        with device(where) if where else contextlib.nullcontext():
            alpha = _adopt(_initial(self.alpha_initializer, tuple(shape)), self._strategy)
        alpha.name = self.name + "/alpha"
        self.alpha = alpha
        self._variables = [alpha]

    def compute_output_shape(self, input_shape):
        """The input's shape (the layer built for it, as a model builds it)."""
        if not self.built:
            self.build(tuple(input_shape))
        return tuple(input_shape)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "alpha_initializer": initializers.serialize(self.alpha_initializer),
                "alpha_regularizer": None, "alpha_constraint": None,
                "shared_axes": self.shared_axes}

    def __call__(self, inputs, training=None):
        x = _float_input(self._device, inputs)
        if not self.built:
            self.build(tuple(int(d) for d in x.shape))
        want = [int(d) for d in self.alpha.shape]
        got = [int(d) for d in x.shape[1:]]
        if len(got) != len(want) or any(a not in (1, b) for a, b in zip(want, got)):
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "shape=%s, found shape=%s"
                             % (self.name, (None,) + tuple(want), tuple(int(d) for d in x.shape)))
        pos = _ops.relu(x)
        neg = _ops.multiply(_ops.negative(self.alpha), _ops.relu(_ops.negative(x)))
        return _ops.add(pos, neg)
