"""Keras's Embedding layer, exported by ``vdev.layers``: a table
``embeddings`` [input_dim, output_dim] whose rows are looked up at the
integer inputs (``vdev.nn.embedding_lookup``, one GatherV2 op), so an input
of shape (batch, ...) gives (batch, ..., output_dim). The table is made when
the layer is made (its shape does not depend on the input), as a Keras
Sequential model builds its first layer, on the device scope the layer was
made in (mirrored under a strategy's scope), drawn by
embeddings_initializer ('uniform', Keras's default: RandomUniform(-0.05,
0.05)) with the layer's seed. Float inputs are cast to int32 as Keras casts
them (truncated toward zero); an int64 id outside int32 is TensorFlow's
InvalidArgumentError for the first id outside the table ("indices[0,1] =
4294967296 is not in [0, 10)"), as Keras, which keeps int64 ids, gets.
Keras's arguments are taken in Keras's order
and checked as Keras checks them (a positive float size passes Keras's
check and is TensorShape's TypeError when the table is made, here with the
layer); ``mask_zero=True`` gives the output Keras's mask, the ids other
than 0 (vdev/_keras_masks.py; read on the host: the ids are where the
lookup's input comes from); what vdev has not (regularizers, constraints,
sparse) is a ValueError naming it, as Dense refuses its. Its gradient is dense (TensorFlow's is IndexedSlices): every row of
the table, zeros where no input looked, so a training step holds one more
tensor the table's size (two under a MirroredStrategy: the gradient and its
all-reduced sum) besides the optimizer's slots.
"""

import numbers

from . import _ops, _strategy_context, initializers, nn, random
from ._device import current_device, device
from ._tensor import Tensor, int32

__all__ = ["Embedding"]


def _base():
    from .layers import Layer
    return Layer


def _dimension(value):
    """A size of the table as TensorFlow's TensorShape takes it when Keras
    makes the weight: anything with __index__ (an int, a NumPy int, a
    bool), else TensorFlow's TypeError."""
    try:
        return int(value.__index__())
    except AttributeError:
        raise TypeError("Dimension value must be integer or None or have an __index__ method, "
                        "got value '{0!r}' with type '{1!r}'".format(value, type(value))) \
            from None


class Embedding(_base()):
    """Rows of ``embeddings`` [input_dim, output_dim] at the integer inputs,
    as Keras's Embedding."""

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform",
                 embeddings_regularizer=None, activity_regularizer=None,
                 embeddings_constraint=None, mask_zero=False, input_length=None, sparse=False,
                 input_shape=None, seed=None, name=None, dtype=None, trainable=True):
        from ._conv_layers import _float32_only, _none_only
        _none_only("Embedding", embeddings_regularizer=embeddings_regularizer,
                   activity_regularizer=activity_regularizer,
                   embeddings_constraint=embeddings_constraint)
        if sparse:
            raise ValueError("vdev's Embedding takes sparse=False only: its gradient is a "
                             "dense tensor")
        _float32_only(self, dtype)
        # Keras 2.11's check, as it is: a positive float passes here and is
        # refused when the table is made (below: TensorShape's TypeError)
        if input_dim <= 0 or output_dim <= 0:
            raise ValueError("Both `input_dim` and `output_dim` should be positive, Received "
                             "input_dim = %s and output_dim = %s" % (input_dim, output_dim))
        dims = _dimension(input_dim), _dimension(output_dim)
        super().__init__(name, trainable)
        self.input_dim, self.output_dim = dims
        self.mask_zero = bool(mask_zero)
        self.supports_masking = self.mask_zero  # Keras's
        self.input_length = input_length
        if input_shape is None:  # as Keras: input_length, else one unknown axis
            if isinstance(input_length, (list, tuple)):
                input_shape = tuple(input_length)
            else:
                input_shape = (input_length,) if input_length else (None,)
        elif isinstance(input_shape, numbers.Integral):
            input_shape = (input_shape,)
        self._batch_input_shape = (None,) + tuple(None if d is None else int(d)
                                                  for d in input_shape)
        self.seed = random._seed(seed)
        self.embeddings_initializer = initializers._get(embeddings_initializer, self.seed)
        if self.embeddings_initializer is None:
            raise ValueError("Could not interpret initializer identifier: None")
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self.embeddings = None
        self.build()

    @property
    def built(self):
        return self.embeddings is not None

    def build(self, input_shape=None):
        """Makes ``embeddings`` [input_dim, output_dim], named
        NAME/embeddings, on the layer's device (mirrored under its
        strategy: drawn on the host, then copied to each replica)."""
        from .layers import _adopt, _initial
        if self.embeddings is not None:
            return
        where = self._device or ("CPU:0" if self._strategy is not None else None)
        scope = device(where) if where else None
        if scope:
            scope.__enter__()
        try:
            e = _adopt(_initial(self.embeddings_initializer, (self.input_dim, self.output_dim)),
                       self._strategy)
        finally:
            if scope:
                scope.__exit__(None, None, None)
        e.name = self.name + "/embeddings"
        self.embeddings = e
        self._variables = [e]

    def compute_output_shape(self, input_shape):
        """Keras's: input_shape + (output_dim,), input_length filling the
        sizes the shape leaves unknown; Keras's ValueError where they
        disagree."""
        shape = tuple(input_shape)
        if self.input_length is None:
            return shape + (self.output_dim,)
        lens = list(self.input_length) if isinstance(self.input_length, (list, tuple)) \
            else [self.input_length]
        bad = ValueError('"input_length" is %s, but received input has shape %s'
                         % (self.input_length, shape))
        if len(lens) != len(shape) - 1:
            raise bad
        for i, (s1, s2) in enumerate(zip(lens, shape[1:])):
            if s1 is not None and s2 is not None and s1 != s2:
                raise bad
            if s1 is None:
                lens[i] = s2
        return (shape[0],) + tuple(lens) + (self.output_dim,)

    def compute_mask(self, inputs, mask=None):
        """Keras's: None without mask_zero, else True where an id is not 0
        (a bool tensor of the inputs' shape)."""
        if not self.mask_zero:
            return None
        import numpy as np
        ids = inputs.numpy() if isinstance(inputs, Tensor) else np.asarray(inputs)
        with _ops._near(self.embeddings):
            return _ops.constant(np.asarray(ids != 0, dtype=bool))

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "batch_input_shape": self._batch_input_shape,
                "input_dim": self.input_dim, "output_dim": self.output_dim,
                "embeddings_initializer": initializers.serialize(self.embeddings_initializer),
                "embeddings_regularizer": None, "activity_regularizer": None,
                "embeddings_constraint": None, "mask_zero": self.mask_zero,
                "input_length": self.input_length}

    @classmethod
    def from_config(cls, config):
        from .layers import _keras_config
        return cls(**_keras_config(config))

    def __call__(self, inputs, training=None, mask=None):
        x = inputs
        if not isinstance(x, Tensor):
            _ops._check_wide_ids(x, self.input_dim)
            with _ops._near(self.embeddings):
                x = _ops.convert_to_tensor(x)
        if x.dtype is not int32:  # Keras's cast of float ids
            x = _ops._cast(x, int32)
        out = nn.embedding_lookup(self.embeddings, x)
        if self.mask_zero:
            out._keras_mask = self.compute_mask(inputs)
        return out
