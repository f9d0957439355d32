"""Keras 2.11's merging layers (keras/layers/merging), for models of several
branches: ``Concatenate(axis=-1)``, ``Add``, ``Subtract``, ``Multiply`` and
``Average``, each called on a list of tensors (real or symbolic), with the
functional forms ``concatenate``, ``add``, ``subtract``, ``multiply`` and
``average``; and ``Lambda``, which makes any function of tensors a layer, so
that a vdev op can be used in a functional model. The merges compute with
vdev's ops in Keras's order (Add: ((x0 + x1) + x2) ...; Average: that sum
divided by the count), so a model gives the bits the same ops written out
give. Their shape checks are Keras's (``_Merge.build``,
``Concatenate.build``), with Keras's errors, made at every call."""

import numpy as np

from . import _ops
from ._device import current_device, device
from ._tensor import Tensor
from .layers import Layer

__all__ = ["Add", "Average", "Concatenate", "Lambda", "Maximum", "Minimum", "Multiply",
           "Subtract", "add", "average", "concatenate", "maximum", "minimum", "multiply",
           "subtract"]


def _shape_of(x):
    """x's shape as a tuple (None for an unknown size)."""
    return tuple(None if d is None else int(d) for d in (x.shape if hasattr(x, "shape")
                                                         else np.shape(x)))


def _shapes(inputs):
    """The input shapes as Keras's build gets them: a list of tuples for a
    list of tensors, one tuple for one tensor."""
    if isinstance(inputs, (list, tuple)):
        return [_shape_of(x) for x in inputs]
    return _shape_of(inputs)


def _tensors(inputs, layer_device=None):
    """The inputs as vdev tensors: a value (numpy, a list) is made beside the
    first tensor among them; when there is none, on the device scope open
    now, else on the one the layer was made in (Dense's rule), else the
    default."""
    first = next((x for x in inputs if isinstance(x, Tensor)), None)
    out = []
    for x in inputs:
        if not isinstance(x, Tensor):
            arr = np.asarray(x)
            if arr.dtype.kind in "fb":
                arr = arr.astype(np.float32)
            if first is not None:
                with _ops._near(first):
                    x = _ops.convert_to_tensor(arr)
            elif layer_device is not None and current_device() is None:
                with device(layer_device):
                    x = _ops.convert_to_tensor(arr)
            else:
                x = _ops.convert_to_tensor(arr)
        out.append(x)
    return out


def _as_shapes(input_shape):
    """A list of tuples for a list (or tuple) of shapes, else one tuple."""
    if isinstance(input_shape, (list, tuple)) and input_shape and isinstance(
            input_shape[0], (list, tuple)):
        return [tuple(s) for s in input_shape]
    return tuple(input_shape)


def _tensor_text(x):
    """Keras's format_argument_value of a tensor a call got."""
    shape = tuple(None if d is None else int(d) for d in x.shape)
    return "tf.Tensor(shape=%s, dtype=%s)" % (shape, x.dtype.name)


def _arg_text(x):
    """Keras's format_argument_value over a call's argument, a numpy array
    as the tensor Keras makes of it."""
    if isinstance(x, dict):
        return {k: _arg_text(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_arg_text(v) for v in x)
    return _tensor_text(x) if hasattr(x, "shape") and hasattr(x, "dtype") else repr(x)


def _call_error(layer, error, message, arguments):
    """Keras 2.11's inject_argument_info_in_traceback: the error an
    exception raised inside layer's call becomes, its message between the
    layer's name and the call's arguments (name, value text) in Keras's
    words."""
    name = 'layer "%s" (type %s)' % (layer.name, type(layer).__name__)
    return error("Exception encountered when calling %s.\n\n%s\n\nCall arguments received by "
                 "%s:\n%s" % (name, message, name, "\n".join(
                     "  \u2022 %s=%s" % (k, v) for k, v in arguments)))


def _float32_only(layer, dtype):
    if dtype is not None and getattr(dtype, "name", dtype) != "float32":
        raise ValueError("vdev's %s takes dtype=None or 'float32' only, not %r: vdev's layers "
                         "compute in float32" % (type(layer).__name__, dtype))


class _Merge(Layer):
    """Keras's _Merge: an element-wise function of a list of tensors of
    compatible shapes."""

    supports_masking = True  # Keras's (compute_mask below)

    def __init__(self, name=None, trainable=True, dtype=None):
        _float32_only(self, dtype)
        super().__init__(name, trainable)
        self._device = current_device()  # where NumPy inputs are made (Dense's rule)

    def _mask_checks(self, inputs, mask):
        """Keras's _Merge.compute_mask checks, in its words; False when no
        input has a mask."""
        if mask is None:
            return False
        if not isinstance(mask, (tuple, list)):
            raise ValueError("`mask` should be a list. Received: mask=%s" % (mask,))
        if not isinstance(inputs, (tuple, list)):
            raise ValueError("`inputs` should be a list. Received: inputs=%s" % (inputs,))
        if len(mask) != len(inputs):
            raise ValueError("The lists `inputs` and `mask` should have the same length. "
                             "Received: inputs=%s of length %d, and mask=%s of length %d"
                             % (inputs, len(inputs), mask, len(mask)))
        return any(m is not None for m in mask)

    def compute_mask(self, inputs, mask=None):
        """Keras's: where every input's mask keeps (LogicalAnd of the bool
        masks), None when no input has one."""
        if not self._mask_checks(inputs, mask):
            return None
        from ._keras_masks import as_bool
        from ._logic_ops import logical_and
        masks = [as_bool(m) for m in mask if m is not None]
        out = masks[0]
        for m in masks[1:]:
            out = logical_and(out, m)
        return out

    def _elemwise_shape(self, shape1, shape2):
        """Keras's _compute_elemwise_op_output_shape (shapes without the
        batch axis)."""
        if None in (shape1, shape2):
            return None
        if len(shape1) < len(shape2):
            return self._elemwise_shape(shape2, shape1)
        if not shape2:
            return shape1
        out = list(shape1[:-len(shape2)])
        for i, j in zip(shape1[-len(shape2):], shape2):
            if i is None or j is None:
                out.append(None)
            elif i == 1:
                out.append(j)
            elif j == 1:
                out.append(i)
            else:
                if i != j:
                    raise ValueError("Inputs have incompatible shapes. Received shapes %s and %s"
                                     % (shape1, shape2))
                out.append(i)
        return tuple(out)

    def _check(self, input_shape):
        """Keras's _Merge.build: the shape checks, in its words."""
        if not isinstance(input_shape, list) or not input_shape or not isinstance(
                input_shape[0], tuple):
            raise ValueError("A merge layer should be called on a list of inputs. Received: "
                             "input_shape=%s (not a list of shapes)" % (input_shape,))
        batch_sizes = {s[0] for s in input_shape if s} - {None}
        if len(batch_sizes) > 1:
            raise ValueError("Cannot merge tensors with different batch sizes. Got tensors with "
                             "shapes %s" % (input_shape,))
        out = input_shape[0][1:]
        for s in input_shape[1:]:
            out = self._elemwise_shape(out, s[1:])
        return out

    def compute_output_shape(self, input_shape):
        """Keras's: the inputs' shapes broadcast, the batch size theirs."""
        input_shape = _as_shapes(input_shape)
        out = self._check(input_shape)
        batch_sizes = {s[0] for s in input_shape if s is not None} - {None}
        batch = list(batch_sizes)[0] if len(batch_sizes) == 1 else None
        return (batch,) + tuple(out)

    _op = "AddV2"  # the TensorFlow op of Keras's merge function

    def _check_dtypes(self, inputs):
        """Keras's merge of symbolic tensors of two dtypes (int32 and
        float32): its merge function's op refuses them as the model is made
        (each input beside the first's dtype, which the result keeps), the
        TypeError in Keras's words."""
        first = inputs[0].dtype
        for x in inputs[1:]:
            if x.dtype != first:
                raise _call_error(self, TypeError, "Input 'y' of '%s' Op has type %s that does "
                                  "not match type %s of argument 'x'." % (
                                      self._op, x.dtype.name, first.name),
                                  [("inputs", type(inputs)(map(_tensor_text, inputs)))])

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32"}

    def __call__(self, inputs, training=None, mask=None):
        """The merge of inputs, a list of tensors (or values); ``training``
        and ``mask`` change nothing."""
        shapes = _shapes(inputs)
        self.compute_output_shape(shapes)
        xs = _tensors(inputs, self._device)
        ranks = [len(s) for s in shapes]
        if len(set(ranks)) > 1:
            # Keras's reshape: the inputs of lower rank gain axes of 1 at
            # axis 1 until every input has the highest rank
            top = max(ranks)
            xs = [x if len(s) == top else
                  _ops.reshape(x, [s[0]] + [1] * (top - len(s)) + list(s[1:]))
                  for x, s in zip(xs, shapes)]
        return self._merge_function(xs)


class Add(_Merge):
    """Keras's Add: the element-wise sum of the inputs, ((x0 + x1) + x2) ..."""

    def _merge_function(self, inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = _ops.add(out, x)
        return out


class Subtract(_Merge):
    """Keras's Subtract: inputs[0] - inputs[1], of exactly two inputs."""

    _op = "Sub"

    def _check(self, input_shape):
        out = super()._check(input_shape)
        if len(input_shape) != 2:
            raise ValueError("A `Subtract` layer should be called on exactly 2 inputs. "
                             "Received: input_shape=%s" % (input_shape,))
        return out

    def _merge_function(self, inputs):
        return _ops.subtract(inputs[0], inputs[1])


class Multiply(_Merge):
    """Keras's Multiply: the element-wise product, ((x0 * x1) * x2) ..."""

    _op = "Mul"

    def _merge_function(self, inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = _ops.multiply(out, x)
        return out


class Average(_Merge):
    """Keras's Average: the inputs' sum (Add's order) divided by their
    count."""

    def _merge_function(self, inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = _ops.add(out, x)
        return _ops.divide(out, float(len(inputs)))


class Maximum(_Merge):
    """Keras's Maximum: the element-wise maximum, max(max(x0, x1), x2) ...
    (vdev.maximum: NaN propagates, as TensorFlow's)."""

    _op = "Maximum"

    def _merge_function(self, inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = _ops.maximum(out, x)
        return out


class Minimum(_Merge):
    """Keras's Minimum: the element-wise minimum, min(min(x0, x1), x2) ..."""

    _op = "Minimum"

    def _merge_function(self, inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = _ops.minimum(out, x)
        return out


class Concatenate(_Merge):
    """Keras's Concatenate: the inputs joined along ``axis`` (the last by
    default), every other size equal."""

    def __init__(self, axis=-1, name=None, trainable=True, dtype=None):
        super().__init__(name, trainable, dtype)
        self.axis = axis

    def _check(self, input_shape):
        """Keras's Concatenate.build: its shape checks, in its words."""
        if not isinstance(input_shape, list) or len(input_shape) < 1 or not isinstance(
                input_shape[0], tuple):
            raise ValueError("A `Concatenate` layer should be called on a list of at least 1 "
                             "input. Received: input_shape=%s" % (input_shape,))
        if all(s is None for s in input_shape):
            return
        reduced = [list(s) for s in input_shape]
        shape_set = set()
        for r in reduced:
            del r[self.axis]
            shape_set.add(tuple(r))
        if len(shape_set) != 1:
            msg = ("A `Concatenate` layer requires inputs with matching shapes except for the "
                   "concatenation axis. Received: input_shape=%s" % (input_shape,))
            ranks = {len(s) for s in shape_set}
            if len(ranks) != 1:
                raise ValueError(msg)
            (rank,) = ranks
            for axis in range(rank):
                dims = {s[axis] for s in shape_set if s[axis] is not None}
                if len(dims) > 1:
                    raise ValueError(msg)

    def compute_output_shape(self, input_shape):
        """Keras's: the first input's shape, its size on axis the sum of
        the inputs' (None when one is unknown)."""
        shapes = _as_shapes(input_shape)
        self._check(shapes)
        out = list(shapes[0])
        for s in shapes[1:]:
            if out[self.axis] is None or s[self.axis] is None:
                out[self.axis] = None
                break
            out[self.axis] += s[self.axis]
        return tuple(out)

    def _check_dtypes(self, inputs):
        """Keras's: tf.concat of tensors of two dtypes, its TypeError."""
        names = [x.dtype.name for x in inputs]
        if len(set(names)) > 1:
            raise _call_error(self, TypeError, "Tensors in list passed to 'values' of 'ConcatV2' "
                              "Op have types [%s] that don't all match." % ", ".join(names),
                              [("inputs", type(inputs)(map(_tensor_text, inputs)))])

    def get_config(self):
        return dict(super().get_config(), axis=self.axis)

    def compute_mask(self, inputs, mask=None):
        """Keras's: each input's mask (ones for an input without one, a
        mask of lower rank given a last axis of 1) concatenated along axis,
        then kept where all of the last axis keeps."""
        if not self._mask_checks(inputs, mask):
            return None
        from ._keras_masks import as_bool
        from ._logic_ops import reduce_all
        from ._tensor import bool_, ones
        parts = []
        for x, m in zip(_tensors(inputs, self._device), mask):
            if m is None:
                with _ops._near(x):
                    m = ones(tuple(int(d) for d in x.shape), bool_)
            else:
                m = as_bool(m)
                if m.ndim < x.ndim:
                    m = _ops.reshape(m, [int(d) for d in m.shape] + [1])
            parts.append(m)
        return reduce_all(_ops.concat(parts, self.axis), axis=-1)

    def __call__(self, inputs, training=None, mask=None):
        """vdev.concat of inputs (a list of tensors or values) along axis."""
        shapes = _shapes(inputs)
        self._check(shapes)
        return _ops.concat(_tensors(inputs, self._device), self.axis)


def concatenate(inputs, axis=-1, **kwargs):
    """Keras's functional form: ``Concatenate(axis=axis, **kwargs)(inputs)``."""
    return Concatenate(axis=axis, **kwargs)(inputs)


def add(inputs, **kwargs):
    """Keras's functional form: ``Add(**kwargs)(inputs)``."""
    return Add(**kwargs)(inputs)


def subtract(inputs, **kwargs):
    """Keras's functional form: ``Subtract(**kwargs)(inputs)``."""
    return Subtract(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    """Keras's functional form: ``Multiply(**kwargs)(inputs)``."""
    return Multiply(**kwargs)(inputs)


def average(inputs, **kwargs):
    """Keras's functional form: ``Average(**kwargs)(inputs)``."""
    return Average(**kwargs)(inputs)


def maximum(inputs, **kwargs):
    """Keras's functional form: ``Maximum(**kwargs)(inputs)``."""
    return Maximum(**kwargs)(inputs)


def minimum(inputs, **kwargs):
    """Keras's functional form: ``Minimum(**kwargs)(inputs)``."""
    return Minimum(**kwargs)(inputs)


class Lambda(Layer):
    """Keras's Lambda: ``function(inputs, **arguments)`` as a layer, so a
    vdev op (vdev.add, vdev.reshape, ...) can take a functional model's
    symbolic tensors: ``Lambda(lambda t: vdev.add(t, 1.0))(x)``. Its output
    shape is ``output_shape`` when given (a tuple without the batch axis, or
    a function of the input shape), else found by calling the function once
    on zeros of the input's shape (batch 1). Variables the function uses are
    not the model's (Keras's rule too)."""

    def __init__(self, function, output_shape=None, mask=None, arguments=None, name=None,
                 trainable=True, dtype=None):
        _float32_only(self, dtype)
        if mask is not None:
            raise ValueError("vdev's Lambda takes mask=None only: its output has no mask")
        if not callable(function):
            raise TypeError("Lambda takes a function, not %r" % (function,))
        super().__init__(name, trainable)
        self.function = function
        self.arguments = dict(arguments or {})
        self._output_shape = output_shape

    def compute_output_shape(self, input_shape):
        """output_shape's, else NotImplementedError (the shape is then found
        by a call on zeros)."""
        if self._output_shape is None:
            raise NotImplementedError
        if callable(self._output_shape):
            return self._output_shape(input_shape)
        batch = input_shape[0][0] if isinstance(input_shape, list) else input_shape[0]
        return (batch,) + tuple(self._output_shape)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "function": self.function, "output_shape": self._output_shape,
                "arguments": dict(self.arguments)}

    def __call__(self, inputs, training=None, mask=None):
        return self.function(inputs, **self.arguments)
