"""Keras 2.11's ``RepeatVector(n)``, ``PReLU``, ``UnitNormalization`` and
``CategoryEncoding``, exported by ``vdev.layers`` (the last two described
at their classes). RepeatVector gives [batch, features] inputs n steps,
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

__all__ = ["CategoryEncoding", "PReLU", "RepeatVector", "UnitNormalization"]


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


class UnitNormalization(_Stateless):
    """Keras's UnitNormalization(axis=-1): each input divided by its L2
    norm over ``axis`` (an int or a list), tf.math.l2_normalize's way: the
    sum of squares held at 1e-12 at least."""

    def __init__(self, axis=-1, name=None, trainable=True, input_shape=None, dtype=None):
        super().__init__(name, trainable, input_shape, dtype)
        if isinstance(axis, (list, tuple)):
            self.axis = list(axis)
        elif isinstance(axis, int):
            self.axis = axis
        else:
            raise TypeError("Invalid value for `axis` argument: expected an int or a list/tuple "
                            "of ints. Received: axis=%s" % (axis,))

    supports_masking = True  # Keras's

    def get_config(self):
        return self._config(axis=self.axis)

    def __call__(self, inputs, training=None):
        x = _float_input(self._device, inputs)
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        ss = _ops.multiply(x, x)
        for a in sorted((a % x.ndim for a in axes), reverse=True):
            ss = _ops.reduce_sum(ss, axis=a, keepdims=True)
        return _ops.divide(x, _ops.sqrt(_ops.maximum(ss, 1e-12)))


class CategoryEncoding(_Stateless):
    """Keras's CategoryEncoding(num_tokens, output_mode="multi_hot"): int
    ids in [0, num_tokens) as one-hot, multi-hot or count rows (float32),
    Keras's encode_categorical_inputs (a scalar is one sample; one_hot gives
    inputs without a last axis of 1 one; rank 2 at most), ``count_weights``
    at the call for "count"; computed on the host (the ids are read there),
    made on the layer's device. An id outside the range is Keras's error."""

    def __init__(self, num_tokens=None, output_mode="multi_hot", sparse=False, name=None,
                 trainable=True, input_shape=None, dtype=None):
        if output_mode == "binary":  # Keras's older name
            output_mode = "multi_hot"
        if output_mode not in ("count", "one_hot", "multi_hot"):
            raise ValueError("Unknown value for `output_mode`. Expected one of ('count', "
                             "'one_hot', 'multi_hot'). Received: output_mode=%s"
                             % (output_mode,))
        if num_tokens is None:
            raise ValueError("num_tokens must be set to use this layer. If the number of tokens "
                             "is not known beforehand, use the IntegerLookup layer instead.")
        if num_tokens < 1:
            raise ValueError("`num_tokens` must be >= 1. Received: num_tokens=%s."
                             % (num_tokens,))
        if sparse:
            raise ValueError("vdev's CategoryEncoding takes sparse=False only: vdev has no "
                             "sparse tensors")
        super().__init__(name, trainable, input_shape, dtype)
        self.num_tokens, self.output_mode, self.sparse = int(num_tokens), output_mode, False

    def get_config(self):
        return self._config(num_tokens=self.num_tokens, output_mode=self.output_mode,
                            sparse=False)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        if not shape:
            return (self.num_tokens,)
        if self.output_mode == "one_hot" and shape[-1] != 1:
            return shape + (self.num_tokens,)
        return shape[:-1] + (self.num_tokens,)

    def __call__(self, inputs, count_weights=None, training=None):
        import numpy as np
        from ._tensor import Tensor, float32
        ids = np.asarray(inputs.numpy() if isinstance(inputs, Tensor) else inputs)
        if count_weights is not None and self.output_mode != "count":
            raise ValueError("`count_weights` is not used when `output_mode` is not `'count'`. "
                             "Received `count_weights=%s`." % (count_weights,))
        if ids.size and (ids.max() >= self.num_tokens or ids.min() < 0):
            from . import errors
            raise errors.InvalidArgumentError(
                "Input values must be in the range 0 <= values < num_tokens with "
                "num_tokens=%d" % (self.num_tokens,), "VDEV_ERR_INVALID_ARG")
        a = ids.astype(np.int64)
        w = None if count_weights is None else np.asarray(
            count_weights.numpy() if isinstance(count_weights, Tensor) else count_weights,
            np.float32)
        shape = a.shape
        if a.ndim == 0:
            a = a[None]
            w = None if w is None else w.reshape(1)
        if self.output_mode == "one_hot" and a.shape[-1] != 1:
            a = a[..., None]
            w = None if w is None else w[..., None]
        if a.ndim > 2:
            raise ValueError("When output_mode is not `'int'`, maximum supported output rank "
                             "is 2. Received output_mode %s and input shape %s, which would "
                             "result in output rank %d." % (self.output_mode, shape, a.ndim))
        rows = a if a.ndim == 2 else a[None]
        ws = None if w is None else (w if w.ndim == 2 else w[None])
        out = np.zeros((rows.shape[0], self.num_tokens), np.float32)
        for r in range(rows.shape[0]):
            np.add.at(out[r], rows[r], 1.0 if ws is None else ws[r])
        if self.output_mode != "count":
            out = np.minimum(out, 1.0)
        out = out if a.ndim == 2 else out[0]
        with device(self._device) if self._device and current_device() is None \
                else contextlib.nullcontext():
            return _ops.convert_to_tensor(out, float32)
