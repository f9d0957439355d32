"""Keras 2.11's normalization layers, exported by ``vdev.layers``:
``BatchNormalization`` and ``LayerNormalization``, composed from vdev's ops
(mean over axes, square, sqrt, broadcasting arithmetic), so their gradients
are the tape's. Keras's arguments come in Keras's order with its defaults;
the weights are made when the input shape is known (``input_shape``, else
the first call) on the device scope the layer was made in (mirrored under a
strategy's scope), in Keras's order: gamma, beta (trainable), then
BatchNormalization's moving_mean and moving_variance (non-trainable: no
optimizer sees them). A BatchNormalization called with ``training=True``
normalizes by the batch's mean and biased variance and updates its moving
statistics as Keras 2.11 does (see BatchNormalization); otherwise it uses
them. ``training=None`` takes the flag of the call it runs in: ``fit``'s
training step runs the model under ``training=True`` (``training_scope`` of
_core_layers, Keras's call context, which Dropout reads too), ``evaluate``
and ``predict`` under ``False``.
"""

import functools
import numbers

import numpy as np

from . import _core_layers, _ops, _strategy_context, initializers, random
from ._device import current_device, device
from ._tensor import Tensor, float32

__all__ = ["BatchNormalization", "LayerNormalization"]


def _training_value(layer, training):
    """Keras's _get_training_value: the flag given, else the call
    context's, else False (Keras's learning phase outside fit); always
    False for a frozen layer (``trainable = False``)."""
    return bool(layer.trainable) and _core_layers._resolve_training(training)


def _base():
    from .layers import Layer
    return Layer


def _builds_when_symbolic(body):
    """A layer's __call__ that builds the layer when it is first called on
    a symbolic tensor (Keras's _maybe_build, in a functional model's
    construction: its variables exist before fit reads them, and under a
    strategy's scope they are mirrored there), then records or computes
    the call as every vdev layer does (layers._symbolic_aware)."""
    from .layers import _NO_INPUTS, _symbolic_aware
    wrapped = _symbolic_aware(body)

    @functools.wraps(body)
    def __call__(self, inputs=_NO_INPUTS, *args, **kwargs):
        if not self.built and not isinstance(inputs, Tensor):
            from ._functional import KerasTensor
            if isinstance(inputs, KerasTensor):
                self.build(tuple(None if d is None else int(d) for d in inputs.shape))
        return wrapped(self, inputs, *args, **kwargs)
    __call__._vdev_symbolic = True
    return __call__


def _axis_arg(axis):
    """Keras's check of the ``axis`` argument: an int or a list/tuple of ints."""
    if isinstance(axis, (list, tuple)):
        return list(axis)
    if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
        return int(axis)
    raise TypeError("Expected an int or a list/tuple of ints for the argument 'axis', but "
                    "received: %r" % (axis,))


def _validate_axis(axis, input_shape):
    """Keras's tf_utils.validate_axis: the axes as a list of non-negative
    ints for inputs of input_shape's rank, with Keras's ValueErrors."""
    rank = len(input_shape)
    if not rank:
        raise ValueError("Input has undefined rank. Received: input_shape=%s"
                         % (tuple(input_shape),))
    axis = [axis] if isinstance(axis, int) else list(axis)
    axis = [rank + a if a < 0 else a for a in axis]
    for a in axis:
        if a < 0 or a >= rank:
            raise ValueError("Invalid value for `axis` argument. Expected 0 <= axis < "
                             "inputs.rank (with inputs.rank=%d). Received: axis=%s"
                             % (rank, tuple(axis)))
    if len(axis) != len(set(axis)):
        raise ValueError("Duplicate axis: %s" % (tuple(axis),))
    return axis


def _refuse(layer, **args):
    """vdev's refusal of what it lacks (regularizers, constraints, ...)."""
    for arg, (value, why) in args.items():
        if value is not None and value is not False:
            raise ValueError("vdev's %s takes %s=%s only, not %r: %s"
                             % (type(layer).__name__, arg,
                                "False" if isinstance(value, bool) else "None", value, why))


def _float32_only(layer, dtype):
    if dtype is not None and getattr(dtype, "name", dtype) != "float32":
        raise ValueError("vdev's %s takes dtype=None or 'float32' only, not %r: vdev's layers "
                         "compute in float32" % (type(layer).__name__, dtype))


def _input_shape(input_shape):
    if input_shape is None:
        return None
    if isinstance(input_shape, numbers.Integral):
        input_shape = (input_shape,)
    return (None,) + tuple(None if d is None else int(d) for d in input_shape)


def _as_input(layer, x):
    """x as a float32 tensor: a value made beside the layer's weights (or
    on its device scope when no scope is open), as Dense makes it."""
    if isinstance(x, Tensor):
        return x if x.dtype is float32 else _ops._cast(x, float32)
    first = layer._variables[0] if layer._variables else None
    if first is not None:
        with _ops._near(first):
            return _ops.convert_to_tensor(x, float32)
    if layer._device is not None and current_device() is None:
        with device(layer._device):
            return _ops.convert_to_tensor(x, float32)
    return _ops.convert_to_tensor(x, float32)


def _make_variables(layer, specs):
    """Makes one variable per (attribute, initializer, shape, trainable) of
    specs, named NAME/attribute, on the layer's device (mirrored under its
    strategy), all or none: the layer takes them only once every one is
    made, so a build that fails half-way leaves it unbuilt."""
    from .layers import _adopt, _initial
    where = layer._device or ("CPU:0" if layer._strategy is not None else None)
    scope = device(where) if where else None
    if scope:
        scope.__enter__()
    made = []
    try:
        for attr, init, shape, trainable in specs:
            t = _initial(init, tuple(shape))
            if layer._strategy is not None:
                from .distribute._values import mirror_tensor
                v = mirror_tensor(layer._strategy, t, trainable=trainable)
            else:
                v = _adopt(t)
                v.trainable = trainable
            v.name = "%s/%s" % (layer.name, attr)
            made.append((attr, v))
    finally:
        if scope:
            scope.__exit__(None, None, None)
    for attr, v in made:
        setattr(layer, attr, v)
    layer._variables = [v for _, v in made]


def _moments(x, shape, reduce_axes):
    """tf.nn.moments(x, reduce_axes, keepdims=True): the mean and the
    (biased) variance, mean((x - stop_gradient(mean))^2), each of x's rank
    with 1 on the reduced axes. The axes before (or after) all the others
    are reduced in one op on a 2-D view of x."""
    rank = len(shape)
    red = sorted(reduce_axes)
    kept = [d for d in range(rank) if d not in red]
    out_shape = [1 if d in red else shape[d] for d in range(rank)]
    if red and kept and (red == list(range(len(red))) or
                         red == list(range(rank - len(red), rank))):
        lead = red[0] == 0
        n_red = int(np.prod([shape[d] for d in red]))
        x2 = _ops.reshape(x, [n_red, -1] if lead else [-1, n_red])
        axis = 0 if lead else 1
        mean = _ops.reduce_mean(x2, axis, keepdims=True)
        dev = _ops.subtract(x2, _ops.stop_gradient(mean))
        var = _ops.reduce_mean(_ops.multiply(dev, dev), axis, keepdims=True)
        return _ops.reshape(mean, out_shape), _ops.reshape(var, out_shape)
    mean = _ops.reduce_mean(x, red, keepdims=True)
    dev = _ops.subtract(x, _ops.stop_gradient(mean))
    return mean, _ops.reduce_mean(_ops.multiply(dev, dev), red, keepdims=True)


def _rsqrt_plus(v, epsilon):
    """1 / sqrt(v + epsilon), elementwise."""
    return _ops.divide(1.0, _ops.sqrt(_ops.add(v, float(epsilon))))


def _batch_normalization(x, mean, variance, offset, scale, epsilon):
    """tf.nn.batch_normalization: x * inv + (offset - mean * inv), with inv
    = rsqrt(variance + epsilon) * scale (each may be None: no scale, no
    offset)."""
    inv = _rsqrt_plus(variance, epsilon)
    if scale is not None:
        inv = _ops.multiply(inv, scale)
    shift = _ops.negative(_ops.multiply(mean, inv)) if offset is None else \
        _ops.subtract(offset, _ops.multiply(mean, inv))
    return _ops.add(_ops.multiply(x, inv), shift)


def _fused_normalization(x, mean, variance, offset, scale, epsilon):
    """TensorFlow's fused kernel: (x - mean) * (rsqrt(variance + epsilon)
    * scale) + offset."""
    inv = _rsqrt_plus(variance, epsilon)
    if scale is not None:
        inv = _ops.multiply(inv, scale)
    y = _ops.multiply(_ops.subtract(x, mean), inv)
    return y if offset is None else _ops.add(y, offset)


def _shape_of(x):
    return tuple(int(d) for d in x.shape)


class BatchNormalization(_base()):
    """Keras 2.11's BatchNormalization: ``gamma * (x - mean) / sqrt(var +
    epsilon) + beta`` per feature of ``axis``, with the batch's mean and
    biased variance over every other axis when training, the moving ones
    otherwise. Each training call updates the moving statistics as Keras's
    two paths do. Fused (Keras's choice for 4-D inputs normalized on axis 1
    or 3, unless ``fused=False``): ``moving = (1 - f) * moving + f *
    batch`` with f = 1 - momentum in float32, the variance's batch value
    Bessel-corrected (times n / (n - 1), n the values per feature), as
    TensorFlow's FusedBatchNormV3. Otherwise (any other rank or axis):
    ``moving -= (moving - batch) * (1 - momentum)`` with the biased
    variance, as Keras's _assign_moving_average. Under a MirroredStrategy
    each replica normalizes by its own rows, and the moving statistics, one
    MirroredVariable each, take the mean over the replicas of what each
    replica's update gives (what Keras's ON_READ variables, aggregated by
    MEAN, read)."""

    supports_masking = True  # Keras's: the mask passed on

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, renorm=False, renorm_clipping=None,
                 renorm_momentum=0.99, fused=None, trainable=True, virtual_batch_size=None,
                 adjustment=None, name=None, input_shape=None, seed=None, dtype=None):
        self.axis = _axis_arg(axis)
        _float32_only(self, dtype)
        axes = [self.axis] if isinstance(self.axis, int) else self.axis
        if fused:  # Keras's _raise_if_fused_cannot_be_used
            if renorm:
                raise ValueError("Passing both `fused=True` and `renorm=True` is not supported")
            if len(axes) > 1 or axes[0] not in (-4, -3, -1, 1, 3, 4):
                raise ValueError("Passing `fused=True` is only supported when axis is 1 or 3 "
                                 "for input rank = 4 or 1 or 4 for input rank = 5. Got axis %s"
                                 % (axes,))
            if virtual_batch_size is not None:
                raise ValueError("Passing `fused=True` is not supported when "
                                 "`virtual_batch_size` is specified.")
            if adjustment is not None:
                raise ValueError("Passing `fused=True` is not supported when `adjustment` is "
                                 "specified.")
        _refuse(self, beta_regularizer=(beta_regularizer, "vdev has no regularizers"),
                gamma_regularizer=(gamma_regularizer, "vdev has no regularizers"),
                beta_constraint=(beta_constraint, "vdev has no weight constraints"),
                gamma_constraint=(gamma_constraint, "vdev has no weight constraints"),
                renorm=(bool(renorm) or None, "vdev has no batch renormalization"),
                renorm_clipping=(renorm_clipping, "vdev has no batch renormalization"),
                virtual_batch_size=(virtual_batch_size, "vdev has no ghost batches"),
                adjustment=(adjustment, "vdev has no training-time adjustment"))
        super().__init__(name, trainable)
        if fused is None and (len(axes) > 1 or axes[0] not in (-4, -3, -1, 1, 3, 4)):
            fused = False  # as Keras's V2 __init__
        self.fused = fused
        self.momentum = momentum
        self.epsilon = epsilon
        self.center = center
        self.scale = scale
        self.renorm = False
        self.renorm_momentum = renorm_momentum
        self.virtual_batch_size = None
        self.adjustment = None
        self.seed = random._seed(seed)
        from .layers import _bias_seed
        seeds = [self.seed]
        for _ in range(3):
            seeds.append(_bias_seed(seeds[-1]))
        self.gamma_initializer = initializers._get(gamma_initializer, seeds[0])
        self.beta_initializer = initializers._get(beta_initializer, seeds[1])
        self.moving_mean_initializer = initializers._get(moving_mean_initializer, seeds[2])
        self.moving_variance_initializer = initializers._get(moving_variance_initializer,
                                                             seeds[3])
        if None in (self.gamma_initializer, self.beta_initializer,
                    self.moving_mean_initializer, self.moving_variance_initializer):
            raise ValueError("Could not interpret initializer identifier: None")
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self.gamma = self.beta = self.moving_mean = self.moving_variance = None
        self._spec = None  # (rank, {axis: size}) once built: Keras's InputSpec
        self._batch_input_shape = _input_shape(input_shape)
        if self._batch_input_shape is not None:
            self.build(self._batch_input_shape)

    @property
    def built(self):
        return self._spec is not None

    def build(self, input_shape):
        """Makes gamma, beta, moving_mean and moving_variance for inputs of
        input_shape (the batch size may be None), as Keras's build: the
        axes checked, then the fused path chosen by the rank."""
        if self.built:
            return
        if _strategy_context.replica() is not None:
            raise _strategy_context.variable_in_step_error(
                "layer %r is built" % self.name, "Give it input_shape (or call it once)")
        shape = tuple(input_shape)
        axis = _validate_axis(self.axis, shape)
        rank = len(shape)
        fused = self.fused
        if fused in (None, True):
            if fused is None:
                fused = rank in (4, 5)
            elif rank not in (4, 5):
                raise ValueError("Batch normalization layers with `fused=True` only support 4D "
                                 "or 5D input tensors. Received tensor with shape: %s"
                                 % (shape,))
        if fused and not (axis in ([1], [3]) and rank == 4 or axis in ([1], [4]) and rank == 5):
            if rank == 5:
                fused = False
            else:
                raise ValueError("Unsupported axis. The use of `fused=True` is only possible "
                                 "with `axis=1` or `axis=3` for 4D input tensors. Received: "
                                 "axis=%s" % (tuple(axis),))
        sizes = {a: shape[a] for a in axis}
        if any(v is None for v in sizes.values()):
            raise ValueError("Input has undefined `axis` dimension. Received input with shape "
                             "%s and axis=%s" % (shape, tuple(axis)))
        param = ((sizes[axis[0]],) if len(axis) == 1 else
                 tuple(sizes.get(d, 1) for d in range(rank)))
        specs = []
        if self.scale:
            specs.append(("gamma", self.gamma_initializer, param, True))
        if self.center:
            specs.append(("beta", self.beta_initializer, param, True))
        specs.append(("moving_mean", self.moving_mean_initializer, param, False))
        specs.append(("moving_variance", self.moving_variance_initializer, param, False))
        _make_variables(self, specs)
        self.axis = axis
        self.fused = bool(fused)
        self._param_shape = param
        self._spec = (rank, sizes)

    def compute_output_shape(self, input_shape):
        """Keras's: the input shape."""
        return tuple(input_shape)

    def get_config(self):
        """Keras 2.11's BatchNormalization config (the initializers
        serialized; None for the regularizers and constraints vdev has
        not); ``axis`` is the list of axes once the layer is built, as
        Keras's."""
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "axis": self.axis, "momentum": self.momentum, "epsilon": self.epsilon,
                "center": self.center, "scale": self.scale,
                "beta_initializer": initializers.serialize(self.beta_initializer),
                "gamma_initializer": initializers.serialize(self.gamma_initializer),
                "moving_mean_initializer": initializers.serialize(
                    self.moving_mean_initializer),
                "moving_variance_initializer": initializers.serialize(
                    self.moving_variance_initializer),
                "beta_regularizer": None, "gamma_regularizer": None,
                "beta_constraint": None, "gamma_constraint": None}

    def _check_input(self, shape):
        """Keras's InputSpec(ndim=rank, axes={axis: size}) check."""
        rank, sizes = self._spec
        if len(shape) != rank:
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "ndim=%d, found ndim=%d. Full shape received: %s"
                             % (self.name, rank, len(shape), shape))
        for a, v in sizes.items():
            if shape[a] != v:
                raise ValueError('Input 0 of layer "%s" is incompatible with the layer: '
                                 "expected axis %d of input shape to have value %d, but "
                                 "received input with shape %s" % (self.name, a, v, shape))

    def _broadcast(self, v, rank):
        """A parameter-shaped tensor shaped to broadcast against inputs of
        rank: as it is when the axis is the last one, else 1 on every other
        axis."""
        if v is None or len(self._param_shape) == rank or self.axis == [rank - 1]:
            return v
        shape = [1] * rank
        shape[self.axis[0]] = self._param_shape[0]
        return _ops.reshape(v, shape)

    @_builds_when_symbolic
    def __call__(self, inputs, training=None, mask=None):
        """The inputs normalized (see the class); ``training=None`` takes
        the call context's flag (fit's training step: True), else False.
        ``mask`` is None only (Keras's call takes none; an input's mask
        passes on)."""
        if mask is not None:
            raise ValueError("vdev's BatchNormalization takes mask=None only: Keras's call "
                             "takes no mask (an input's mask passes on)")
        x = _as_input(self, inputs)
        shape = _shape_of(x)
        if not self.built:
            self.build((None,) + shape[1:] if shape else shape)
        self._check_input(shape)
        training = _training_value(self, training)
        rank = len(shape)
        gamma, beta = self._broadcast(self.gamma, rank), self._broadcast(self.beta, rank)
        if not training:
            mean = self._broadcast(self.moving_mean, rank)
            var = self._broadcast(self.moving_variance, rank)
            return self._normalize(x, mean, var, beta, gamma)
        red = [d for d in range(rank) if d not in self.axis]
        mean, var = _moments(x, shape, red)
        out = self._normalize(x, mean, var, beta, gamma)
        n = int(np.prod([shape[d] for d in red])) if red else 1
        self._update(_ops.reshape(_ops.stop_gradient(mean), list(self._param_shape)),
                     _ops.reshape(_ops.stop_gradient(var), list(self._param_shape)), n)
        return out

    def _normalize(self, x, mean, var, beta, gamma):
        if self.fused:
            return _fused_normalization(x, mean, var, beta, gamma, self.epsilon)
        return _batch_normalization(x, mean, var, beta, gamma, self.epsilon)

    def _new_moving(self, mean, var, n):
        """The moving statistics after one update by a batch's (mean,
        biased variance) over n values per feature: tensors."""
        mm, mv = self.moving_mean, self.moving_variance
        if self.fused:
            f = np.float32(1.0 - self.momentum)  # exponential_avg_factor, float32
            adjust = np.float32(n) / np.float32(n - 1 if n > 1 else 1)  # Bessel's correction
            if f == 1:
                return mean, _ops.multiply(var, float(adjust))
            keep = float(np.float32(1) - f)
            new_mean = _ops.add(_ops.multiply(mm, keep), _ops.multiply(mean, float(f)))
            new_var = _ops.add(_ops.multiply(mv, keep),
                               _ops.multiply(var, float(np.float32(f * adjust))))
            return new_mean, new_var
        decay = float(np.float32(1.0 - self.momentum))
        return (_ops.subtract(mm, _ops.multiply(_ops.subtract(mm, mean), decay)),
                _ops.subtract(mv, _ops.multiply(_ops.subtract(mv, var), decay)))

    def _update(self, mean, var, n):
        from .distribute._values import MirroredVariable
        ctx = _strategy_context.replica()
        mirrored = isinstance(self.moving_mean, MirroredVariable)
        if ctx is not None and not (mirrored and self.moving_mean._strategy is ctx.strategy):
            raise RuntimeError(
                "BatchNormalization layer %r, made outside the strategy's scope(), is called "
                "with training=True inside strategy.run: every replica would update the one "
                "copy of its moving statistics. Make the layer under strategy.scope()"
                % self.name)
        new_mean, new_var = self._new_moving(mean, var, n)
        if ctx is None:
            self.moving_mean.assign(new_mean)
            self.moving_variance.assign(new_var)
            return
        # every replica's copy takes the mean over the replicas of their
        # updates (the copies stay identical: Keras's MEAN read of them)
        new_mean, new_var = ctx.all_reduce("MEAN", [new_mean, new_var])
        r = ctx.replica_id_in_sync_group
        self.moving_mean.values[r].assign(new_mean)
        self.moving_variance.values[r].assign(new_var)


class LayerNormalization(_base()):
    """Keras 2.11's LayerNormalization: each example normalized over
    ``axis`` by its own mean and biased variance, ``gamma * (x - mean) /
    sqrt(var + epsilon) + beta`` (gamma and beta of the axes' sizes), the
    same in training and inference. As Keras's, the fused form (axes that
    end at the last one, epsilon >= 1.001e-5) is computed as (x - mean) *
    rsqrt(var + epsilon), then times gamma plus beta; otherwise as
    tf.nn.batch_normalization."""

    supports_masking = True  # Keras's: the mask passed on

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", beta_regularizer=None,
                 gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 input_shape=None, seed=None, name=None, dtype=None, trainable=True):
        self.axis = _axis_arg(axis)
        _float32_only(self, dtype)
        _refuse(self, beta_regularizer=(beta_regularizer, "vdev has no regularizers"),
                gamma_regularizer=(gamma_regularizer, "vdev has no regularizers"),
                beta_constraint=(beta_constraint, "vdev has no weight constraints"),
                gamma_constraint=(gamma_constraint, "vdev has no weight constraints"))
        super().__init__(name, trainable)
        self.epsilon = epsilon
        self.center = center
        self.scale = scale
        self.seed = random._seed(seed)
        from .layers import _bias_seed
        self.gamma_initializer = initializers._get(gamma_initializer, self.seed)
        self.beta_initializer = initializers._get(beta_initializer, _bias_seed(self.seed))
        if self.gamma_initializer is None or self.beta_initializer is None:
            raise ValueError("Could not interpret initializer identifier: None")
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self.gamma = self.beta = None
        self._fused = None
        self._batch_input_shape = _input_shape(input_shape)
        if self._batch_input_shape is not None:
            self.build(self._batch_input_shape)

    @property
    def built(self):
        return self._fused is not None

    def build(self, input_shape):
        """Makes gamma and beta (shape: the sizes of the axes) for inputs
        of input_shape, after Keras's axis checks."""
        if self.built:
            return
        if _strategy_context.replica() is not None:
            raise _strategy_context.variable_in_step_error(
                "layer %r is built" % self.name, "Give it input_shape (or call it once)")
        shape = tuple(input_shape)
        axis = _validate_axis(self.axis, shape)
        param = tuple(shape[d] for d in axis)
        if None in param:
            raise ValueError("Input has undefined `axis` dimension. Received input with shape "
                             "%s and axis=%s" % (shape, tuple(axis)))
        specs = []
        if self.scale:
            specs.append(("gamma", self.gamma_initializer, param, True))
        if self.center:
            specs.append(("beta", self.beta_initializer, param, True))
        _make_variables(self, specs)
        self.axis = axis
        rank = len(shape)
        s = sorted(axis)
        self._fused = (s[-1] == rank - 1 and s[-1] - s[0] == len(s) - 1
                       and not self.epsilon < 1.001e-5)

    def compute_output_shape(self, input_shape):
        """Keras's: the input shape."""
        return tuple(input_shape)

    def get_config(self):
        """Keras 2.11's LayerNormalization config."""
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "axis": self.axis, "epsilon": self.epsilon, "center": self.center,
                "scale": self.scale,
                "beta_initializer": initializers.serialize(self.beta_initializer),
                "gamma_initializer": initializers.serialize(self.gamma_initializer),
                "beta_regularizer": None, "gamma_regularizer": None,
                "beta_constraint": None, "gamma_constraint": None}

    @_builds_when_symbolic
    def __call__(self, inputs, training=None, mask=None):
        """The inputs normalized over ``axis``, example by example;
        ``training`` changes nothing, ``mask`` is None only."""
        if mask is not None:
            raise ValueError("vdev's LayerNormalization takes mask=None only: Keras's call "
                             "takes no mask (an input's mask passes on)")
        x = _as_input(self, inputs)
        shape = _shape_of(x)
        if not self.built:
            self.build((None,) + shape[1:] if shape else shape)
        rank = len(shape)
        if any(a >= rank for a in self.axis):
            _validate_axis(self.axis, shape)  # Keras's error for an axis past the rank
        bshape = [1] * rank
        for d in self.axis:
            bshape[d] = shape[d]

        def broadcast(v):
            if v is None or len(v.shape) == rank or self.axis == [rank - 1]:
                return v
            return _ops.reshape(v, bshape)

        gamma, beta = broadcast(self.gamma), broadcast(self.beta)
        mean, var = _moments(x, shape, self.axis)
        if not self._fused:
            return _batch_normalization(x, mean, var, beta, gamma, self.epsilon)
        y = _ops.multiply(_ops.subtract(x, mean), _rsqrt_plus(var, self.epsilon))
        if gamma is not None:
            y = _ops.multiply(y, gamma)
        return y if beta is None else _ops.add(y, beta)
