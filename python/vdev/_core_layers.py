"""Keras 2.11's core layers that hold no weights, exported by
``vdev.layers``: ``Dropout``, ``Reshape``, ``Permute``, ``Activation``,
``ReLU``, ``ELU``, ``LeakyReLU``, ``Softmax`` and ``Masking`` (Keras's masks:
vdev/_keras_masks.py), with Keras's arguments in its order
(then Keras's base-layer ``name``, ``trainable``, ``input_shape`` and
``dtype``, float32 only), its ``get_config`` keys, ``compute_output_shape``
and errors in its words, each composed of vdev's ops so its gradient is the
ops' own. The training flag is Keras's: a layer called with ``training=`` uses
it; called without, inside a model's call (``model(x, training=True)``, or
``fit``, which calls with ``training=True``, and ``evaluate`` / ``predict``,
which call with ``training=False``), it takes the model's; called alone, it
is inference. Dropout follows ``tf.nn.dropout``: the input times
``1 / (1 - rate)``, times a mask that keeps where a uniform draw in [0, 1) is
at least ``rate``; the draw is vdev.random's, its seed derived from the
layer's ``seed`` and the call's rank (or, with ``seed=None``, taken from
vdev.random's counter), so a program gives the same masks every run. A
comparison is composed of vdev's ops (vdev has no comparison op):
``min(relu(d * FLT_MAX * FLT_MAX + 1), 1)`` is exactly 1 for ``d >= 0`` and
0 for ``d < 0`` for every float32 ``d`` (the smallest nonzero ``d`` times
FLT_MAX twice is beyond 2**100).
"""

import contextlib
import contextvars
import hashlib
import numbers
import threading

import numpy as np

from . import _ops, _strategy_context, errors, random
from ._conv_layers import _base, _check_rank, _float32_only, _float_input, _input_shape
from ._device import current_device
from ._tensor import Tensor, int32

__all__ = ["Activation", "Dropout", "ELU", "LeakyReLU", "Masking", "Permute", "ReLU", "Reshape",
           "Softmax"]

# ---- the training flag (Keras's call context) ----

_training = contextvars.ContextVar("vdev_training", default=None)


@contextlib.contextmanager
def training_scope(training):
    """Within it, a layer called without ``training=`` takes this value, as
    Keras's layers inside a model's call take the model's (None: the
    enclosing one stays). Per thread: a replica's step sets its own."""
    if training is None:
        yield
        return
    token = _training.set(bool(training))
    try:
        yield
    finally:
        _training.reset(token)


def _resolve_training(training):
    """Keras's order: the call's argument, else the enclosing model call's,
    else inference."""
    if training is None:
        training = _training.get()
    return bool(training) if training is not None else False


# ---- composed comparisons ----

_FLT_MAX = float(np.finfo(np.float32).max)


def _step(d, strict):
    """1.0 where d > 0 (strict) or d >= 0, else 0.0, elementwise, from
    vdev's ops: d * FLT_MAX * FLT_MAX is +-inf or beyond +-2**100 for every
    nonzero float32 d (2**-149 at least), 0 for d = 0."""
    big = _ops.multiply(_ops.multiply(d, _FLT_MAX), _FLT_MAX)
    if not strict:
        big = _ops.add(big, 1.0)
    return _ops.minimum(_ops.relu(big), 1.0)


def _floatx(value):
    """Keras's cast_to_floatx: the float32 nearest value, as a Python float."""
    return float(np.float32(value))


class _Stateless(_base()):
    """A layer without weights, taking Keras's base-layer arguments. Like
    Dense, it remembers the device scope it was made in: an input that is
    not a tensor (a NumPy batch fit feeds) is made there unless a scope is
    open at the call, so a model built under ``vdev.device('GPU:1')`` whose
    first layer has no weights does not start its steps on GPU:0."""

    def __init__(self, name=None, trainable=True, input_shape=None, dtype=None, ndim=None):
        _float32_only(self, dtype)
        super().__init__(name, trainable)
        self._device = current_device()
        self._batch_input_shape = _input_shape(self, input_shape, ndim)

    def _config(self, **config):
        out = {"name": self.name, "trainable": self.trainable, "dtype": "float32"}
        out.update(config)
        return out

    def compute_output_shape(self, input_shape):
        """Keras's: the input shape."""
        return tuple(input_shape)


# ---- Dropout ----

_calls_lock = threading.Lock()


def _dropout_seed(seed, tag, key):
    """The seed of one Dropout draw: the first 8 bytes (little-endian) of
    BLAKE2b over tag, the layer's seed and key (8 bytes each, little-endian),
    so no two (seed, key) pairs share a draw, as seed + key would."""
    h = hashlib.blake2b(tag + int(seed).to_bytes(8, "little") + int(key).to_bytes(8, "little"),
                        digest_size=8)
    return int.from_bytes(h.digest(), "little")


class _Draws:
    """The seed of each random draw a layer makes (Dropout's masks, the
    recurrent layers' and MultiHeadAttention's): with a layer seed, draw k
    (counting the layer's draws) uses _dropout_seed(seed, TAG + b":", k);
    inside a step of strategy.run, _dropout_seed(seed, TAG + b".replica:", s)
    with s the replica's next seed=None draw (vdev.random), so replicas draw
    their own masks whatever the timing; without a layer seed, each draw's
    seed comes from vdev.random's counter."""

    def __init__(self, seed, tag):
        self.seed = None if seed is None else random._seed(seed)
        self.tag = tag
        self.calls = 0

    def next(self):
        if self.seed is None:
            return random._seed(None)
        ctx = _strategy_context.replica()
        if ctx is not None:
            return _dropout_seed(self.seed, self.tag + b".replica:", ctx._next_seed())
        with _calls_lock:
            k = self.calls
            self.calls += 1
        return _dropout_seed(self.seed, self.tag + b":", k)


def _check_rate(rate):
    """tf.nn.dropout's range, [0, 1), checked where a mask is drawn."""
    if not 0 <= rate < 1:
        raise ValueError("`rate` must be a scalar tensor or a float in the range [0, 1). "
                         "Received: rate=%s" % (rate,))


def _keep(near, shape, rate, seed):
    """tf.nn.dropout's mask of ``shape`` on near's device: 1.0 where a
    uniform draw in [0, 1) is at least ``rate``, else 0.0."""
    with _ops._near(near):
        u = random.uniform(shape, seed=seed)
        return _step(_ops.add(u, -float(rate)), strict=False)


def _dropout_mask(near, shape, rate, seed):
    """Keras's recurrent dropout mask (its dropout of a tensor of ones):
    1 / (1 - rate) where kept, 0 where dropped. A product x * mask has the
    bits of tf.nn.dropout's (x / (1 - rate)) * keep: keep is 0 or 1."""
    _check_rate(rate)
    return _ops.multiply(_keep(near, shape, rate, seed), 1.0 / (1.0 - rate))


class Dropout(_Stateless):
    """Keras's Dropout: with ``training`` true, each input unit set to 0
    with probability ``rate`` and the others scaled by 1 / (1 - rate)
    (``tf.nn.dropout``); otherwise the input as it is. ``noise_shape``
    shapes the mask (a ``None`` taking the input's size), broadcast over the
    input as TensorFlow's. Each call's seed is _Draws's with the tag
    b"vdev.Dropout" (call k of a seeded layer: _dropout_seed(seed,
    b"vdev.Dropout:", k)); ``seed=None`` takes it from vdev.random's
    counter."""

    supports_masking = True  # Keras's: the mask passed on

    def __init__(self, rate, noise_shape=None, seed=None, name=None, trainable=True,
                 input_shape=None, dtype=None):
        if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
            raise ValueError("vdev's Dropout takes a number for `rate`, not %r" % (rate,))
        if not 0 <= rate <= 1:
            raise ValueError("Invalid value %s received for `rate`, expected a value between 0 "
                             "and 1." % (rate,))
        super().__init__(name, trainable, input_shape, dtype)
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed
        self._draws = _Draws(seed, b"vdev.Dropout")

    def get_config(self):
        return self._config(rate=self.rate, noise_shape=self.noise_shape, seed=self.seed)

    def _noise_shape(self, shape):
        """Keras's _get_noise_shape then TensorFlow's broadcast: the mask's
        shape, padded with leading 1s to the input's rank; an entry neither
        1 nor the input's size is TensorFlow's InvalidArgumentError."""
        if self.noise_shape is None:
            return shape
        noise = [shape[i] if v is None and i < len(shape) else v
                 for i, v in enumerate(self.noise_shape)]
        padded = [1] * (len(shape) - len(noise)) + noise
        if len(noise) > len(shape) or any(n not in (1, s) for n, s in zip(padded, shape)):
            raise errors.InvalidArgumentError(
                "Incompatible shapes: [%s] vs. [%s]" % (",".join(str(d) for d in shape),
                                                        ",".join(str(d) for d in noise)),
                "VDEV_ERR_INVALID_ARG")
        return padded

    def __call__(self, inputs, training=None):
        x = _float_input(self._device, inputs)
        if not _resolve_training(training):
            return _ops.identity(x)  # Keras's tf.identity
        rate = self.rate
        _check_rate(rate)
        if rate == 0:
            return x  # tf.nn.dropout's: the input itself
        shape = [int(d) for d in x.shape]
        noise = self._noise_shape(shape)
        keep = _keep(x, noise, rate, self._draws.next())
        with _ops._near(x):
            for axis, (n, s) in enumerate(zip(noise, shape)):
                if n != s:  # broadcast the mask along the axis (a row of 1 taken s times)
                    keep = _ops.gather(keep, _ops.convert_to_tensor([0] * s, int32), axis=axis)
        scaled = _ops.multiply(x, 1.0 / (1.0 - rate))
        return _ops.multiply(scaled, keep)


# ---- Reshape and Permute ----

def _shape_input(layer, inputs):
    """The input of a layer that moves elements only: an int32 tensor stays
    int32 (Keras casts floating inputs only, as vdev's Flatten)."""
    if isinstance(inputs, Tensor) and inputs.dtype is int32:
        return inputs
    return _float_input(layer._device, inputs)


class Reshape(_Stateless):
    """Keras's Reshape: each example to ``target_shape`` (one entry may be
    -1), the batch kept; a view."""

    def __init__(self, target_shape, name=None, trainable=True, input_shape=None, dtype=None):
        super().__init__(name, trainable, input_shape, dtype)
        self.target_shape = tuple(target_shape)

    def _fix_unknown_dimension(self, input_shape, output_shape):
        """Keras's: output_shape with its -1 worked out from input_shape
        (both without the batch); Keras's ValueErrors."""
        output_shape = list(output_shape)
        msg = ("total size of new array must be unchanged, input_shape = %s, output_shape = %s"
               % (input_shape, output_shape))
        known, unknown = 1, None
        for index, dim in enumerate(output_shape):
            if dim < 0:
                if unknown is not None:
                    raise ValueError("There must be at most one unknown dimension in "
                                     "output_shape. Received: output_shape=%s." % (output_shape,))
                unknown = index
            else:
                known *= dim
        original = int(np.prod(input_shape, dtype=int))
        if unknown is not None:
            if known == 0 or original % known != 0:
                raise ValueError(msg)
            output_shape[unknown] = original // known
        elif original != known:
            raise ValueError(msg)
        return output_shape

    def compute_output_shape(self, input_shape):
        """Keras's: (batch,) + target_shape, the -1 worked out when the
        input's sizes are known, else None."""
        shape = list(input_shape)
        if None in shape[1:]:
            return (shape[0],) + tuple(None if s == -1 else s for s in self.target_shape)
        return (shape[0],) + tuple(self._fix_unknown_dimension(shape[1:], self.target_shape))

    def get_config(self):
        return self._config(target_shape=self.target_shape)

    def __call__(self, inputs, training=None):
        x = _shape_input(self, inputs)
        batch = int(x.shape[0]) if x.ndim else 1
        return _ops.reshape(x, [batch] + list(self.target_shape))  # TensorFlow's errors


class Permute(_Stateless):
    """Keras's Permute: the axes after the batch reordered, ``dims`` counted
    from 1 (``vdev.transpose`` with ``(0,) + dims``)."""

    def __init__(self, dims, name=None, trainable=True, input_shape=None, dtype=None):
        self.dims = tuple(dims)
        if sorted(dims) != list(range(1, len(dims) + 1)):
            raise ValueError("Invalid permutation argument `dims` for Permute Layer. The set of "
                             "indices in `dims` must be consecutive and start from 1. Received "
                             "dims=%s" % (dims,))
        super().__init__(name, trainable, input_shape, dtype, ndim=len(self.dims) + 1)

    def compute_output_shape(self, input_shape):
        """Keras's: the input shape with its axes permuted (the batch first)."""
        shape = tuple(input_shape)
        _check_rank(self, shape, len(self.dims) + 1)
        return (shape[0],) + tuple(shape[d] for d in self.dims)

    def get_config(self):
        return self._config(dims=self.dims)

    def __call__(self, inputs, training=None):
        x = _shape_input(self, inputs)
        _check_rank(self, tuple(int(d) for d in x.shape), len(self.dims) + 1)
        return _ops.transpose(x, (0,) + self.dims)


# ---- activations ----

class Activation(_Stateless):
    """Keras's Activation: ``activation(inputs)``, a name Dense takes (one of
    Keras's activations, vdev/activations.py, "linear" or None) or a
    callable."""

    supports_masking = True  # Keras's: the mask passed on

    def __init__(self, activation, name=None, trainable=True, input_shape=None, dtype=None):
        from .layers import _activation
        super().__init__(name, trainable, input_shape, dtype)
        self.activation = _activation(activation)

    def get_config(self):
        from .layers import _activation_name
        return self._config(activation=_activation_name(self.activation))

    def __call__(self, inputs, training=None):
        x = _float_input(self._device, inputs)
        # None (linear, or fit's copy taking the logits) is the input itself
        return self.activation(x) if self.activation else x


class ReLU(_Stateless):
    """Keras's ReLU, backend.relu's ops: max(x, 0); with ``max_value`` m,
    clipped to [0, m] (m = 6: relu6, whose gradient is 0 at 6); with
    ``threshold`` t, x where x > t else 0; with ``negative_slope`` a,
    a * (x - t) below t (a alone: tf.nn.leaky_relu)."""

    supports_masking = True  # Keras's: the mask passed on

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, name=None,
                 trainable=True, input_shape=None, dtype=None):
        if max_value is not None and max_value < 0.0:
            raise ValueError("max_value of a ReLU layer cannot be a negative value. Received: %s"
                             % (max_value,))
        if negative_slope is None or negative_slope < 0.0:
            raise ValueError("negative_slope of a ReLU layer cannot be a negative value. "
                             "Received: %s" % (negative_slope,))
        if threshold is None or threshold < 0.0:
            raise ValueError("threshold of a ReLU layer cannot be a negative value. Received: %s"
                             % (threshold,))
        super().__init__(name, trainable, input_shape, dtype)
        self.max_value = None if max_value is None else _floatx(max_value)
        self.negative_slope = _floatx(negative_slope)
        self.threshold = _floatx(threshold)

    def get_config(self):
        return self._config(max_value=self.max_value, negative_slope=self.negative_slope,
                            threshold=self.threshold)

    def __call__(self, inputs, training=None):
        return _relu(_float_input(self._device, inputs), self.negative_slope, self.max_value,
                     self.threshold)


def _relu(x, alpha=0.0, max_value=None, threshold=0.0):
    """Keras 2.11's backend.relu, step by step, with vdev's ops."""
    if alpha != 0.0:
        if max_value is None and threshold == 0:
            # tf.nn.leaky_relu: x > 0 ? x : alpha * x; gradient alpha at 0
            return _ops.add(_ops.relu(x), _ops.multiply(_ops.minimum(x, 0.0), alpha))
        neg = _ops.negative(x)
        negative_part = _ops.relu(_ops.add(neg, threshold) if threshold != 0 else neg)
    clip_max = max_value is not None
    if threshold != 0:
        # x * cast(x > threshold): the mask a constant of the tape
        above = _step(_ops.add(_ops.stop_gradient(x), -threshold), strict=True)
        x = _ops.multiply(x, above)
    elif max_value == 6:
        # tf.nn.relu6: its gradient is 0 at 6, as minimum(6, y)'s for y
        x = _ops.minimum(6.0, _ops.relu(x))
        clip_max = False
    else:
        x = _ops.relu(x)
    if clip_max:
        # tf.clip_by_value(x, 0, max_value): minimum, then maximum
        x = _ops.maximum(_ops.minimum(x, max_value), 0.0)
    if alpha != 0.0:
        x = _ops.subtract(x, _ops.multiply(negative_part, alpha))
    return x


class ELU(_Stateless):
    """Keras's ELU: x where x > 0, else alpha * (exp(x) - 1) (backend.elu;
    the gradient at 0 is alpha, tf.where's branch there)."""

    supports_masking = True  # Keras's: the mask passed on

    def __init__(self, alpha=1.0, name=None, trainable=True, input_shape=None, dtype=None):
        if alpha is None:
            raise ValueError("Alpha of an ELU layer cannot be None, expecting a float. "
                             "Received: %s" % (alpha,))
        super().__init__(name, trainable, input_shape, dtype)
        self.alpha = _floatx(alpha)

    def get_config(self):
        return self._config(alpha=float(self.alpha))

    def __call__(self, inputs, training=None):
        from .activations import elu
        return elu(_float_input(self._device, inputs), self.alpha)


class LeakyReLU(_Stateless):
    """Keras's LeakyReLU: x where x > 0, else alpha * x (tf.nn.leaky_relu,
    any alpha; the gradient alpha at 0, as TensorFlow's)."""

    supports_masking = True  # Keras's: the mask passed on

    def __init__(self, alpha=0.3, name=None, trainable=True, input_shape=None, dtype=None):
        if alpha is None:
            raise ValueError("The alpha value of a Leaky ReLU layer cannot be None, Expecting a "
                             "float. Received: %s" % (alpha,))
        super().__init__(name, trainable, input_shape, dtype)
        self.alpha = _floatx(alpha)

    def get_config(self):
        return self._config(alpha=float(self.alpha))

    def __call__(self, inputs, training=None):
        x = _float_input(self._device, inputs)
        return _ops.add(_ops.relu(x), _ops.multiply(_ops.minimum(x, 0.0), self.alpha))


class Softmax(_Stateless):
    """Keras's Softmax over ``axis`` (an int, or a list of one; vdev's
    softmax runs over the last axis, so another one is brought last with a
    transpose, as TensorFlow's softmax does, and back). A call's ``mask``
    (1 keep, 0 mask, the input's shape) adds -1e9 to the masked logits
    first, as Keras's."""

    supports_masking = True  # Keras's: the mask passed on,
    _expects_mask = True  # and the inputs' masks its call's

    def __init__(self, axis=-1, name=None, trainable=True, input_shape=None, dtype=None):
        super().__init__(name, trainable, input_shape, dtype)
        self.axis = axis

    def get_config(self):
        return self._config(axis=self.axis)

    def _over_last_axis(self):
        axis = self.axis
        if isinstance(axis, (list, tuple)) and len(axis) == 1:
            axis = axis[0]
        return not isinstance(axis, bool) and isinstance(axis, numbers.Integral) and axis == -1

    @property
    def activation(self):
        """What fit's string cross-entropy takes the logits of, as a
        Dense's ``activation`` (vdev/_fit.py): vdev's softmax for a layer
        over the last axis (axis=-1), whose input Keras's loss takes as the
        logits (it finds the Softmax op); None for another axis (Keras and
        vdev then compute from the probabilities, clipped), and in fit's
        copy of the layer, which gives the logits (its input, masked)."""
        if self.__dict__.get("_gives_logits"):
            return None
        return _ops.softmax if self._over_last_axis() else None

    @activation.setter
    def activation(self, value):
        if value is not None:
            raise ValueError("vdev's Softmax takes activation = None only (fit's copy of the "
                             "layer, which gives the logits), not %r" % (value,))
        self._gives_logits = True

    def _axis(self, ndim):
        axis = self.axis
        if isinstance(axis, (list, tuple)):
            if len(axis) != 1:
                raise ValueError("vdev's Softmax takes one axis, not %r: vdev has no "
                                 "reduce_logsumexp for the softmax over several" % (axis,))
            axis = axis[0]
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise TypeError("vdev's Softmax takes an int axis, not %r" % (axis,))
        if not -ndim <= axis < ndim:
            raise errors.InvalidArgumentError(
                "`axis` must be in the range [%d, %d) where %d is the number of dimensions in "
                "the input. Received: axis=%d" % (-ndim, ndim, ndim, axis),
                "VDEV_ERR_INVALID_ARG")
        return int(axis) % ndim

    def __call__(self, inputs, mask=None, training=None):
        x = _float_input(self._device, inputs)
        if mask is not None:
            with _ops._near(x):
                m = _ops.convert_to_tensor(np.asarray(
                    mask.numpy() if isinstance(mask, Tensor) else mask).astype(np.float32))
            x = _ops.add(x, _ops.multiply(_ops.subtract(1.0, m), -1e9))
        if self.__dict__.get("_gives_logits"):
            return x  # fit's copy: the logits
        axis = self._axis(x.ndim)
        last = x.ndim - 1
        if axis == last:
            return _ops.softmax(x)
        perm = list(range(x.ndim))
        perm[axis], perm[last] = last, axis
        return _ops.transpose(_ops.softmax(_ops.transpose(x, perm)), perm)


# ---- Masking (Keras's masks: vdev/_keras_masks.py) ----

class Masking(_Stateless):
    """Keras's Masking(mask_value=0.0): a step whose features all equal
    ``mask_value`` is masked: the output is the input times 0 there (1
    elsewhere), its mask [batch, steps] 1 where any feature differs."""

    supports_masking = True

    def __init__(self, mask_value=0.0, name=None, trainable=True, input_shape=None, dtype=None):
        super().__init__(name, trainable, input_shape, dtype)
        self.mask_value = mask_value

    def get_config(self):
        return self._config(mask_value=self.mask_value)

    def _any(self, x):
        """[..., 1] bool: whether any feature differs from mask_value, as
        Keras's reduce_any(not_equal(x, mask_value), -1, keepdims=True) (a
        NaN feature differs)."""
        from ._logic_ops import not_equal, reduce_any
        return reduce_any(not_equal(x, float(self.mask_value)), axis=-1, keepdims=True)

    def compute_mask(self, inputs, mask=None):
        """Keras's: any feature other than mask_value, over the last axis."""
        keep = self._any(_float_input(self._device, inputs))
        return _ops.reshape(keep, [int(d) for d in keep.shape[:-1]])

    def __call__(self, inputs, training=None):
        from ._logic_ops import cast
        x = _float_input(self._device, inputs)
        keep = self._any(x)
        out = _ops.multiply(x, cast(keep, "float32"))
        out._keras_mask = _ops.reshape(keep, [int(d) for d in keep.shape[:-1]])
        return out
