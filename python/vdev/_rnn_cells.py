"""Keras 2.11's recurrent cells and its generic ``RNN`` layer, exported by
``vdev.layers``: ``SimpleRNNCell``, ``LSTMCell`` and ``GRUCell`` (one step,
``cell(inputs, states) -> (output, new states)``, with the arithmetic,
weights, initializers and dropout of vdev's SimpleRNN, LSTM and GRU, whose
step they run: Keras's cells are those layers' cells), ``StackedRNNCells``
(cells one after the other, each step's output the next one's input, the
states all the cells' in order) and ``RNN(cell, return_sequences,
return_state, go_backwards, stateful, unroll, time_major)``, which runs a
cell over the steps as Keras's backend.rnn does: a mask skips steps
(the states kept, the last output repeated), ``initial_state``,
``stateful`` (vdev/_rnn_states.py), ``go_backwards``; the cell may also be a
list of cells (stacked) or a cell of one's own, any vdev layer with
``state_size`` (an int or a list of them) and ``__call__(inputs, states,
training=None)`` giving (output, new states). A cell's dropout masks are
drawn at the first step of each call and kept for its steps (Keras's
DropoutRNNCellMixin, reset by the RNN at each call). Keras's weight names
(``rnn/lstm_cell/kernel``), configs and errors in its words; unlike the
LSTM layer, whose input product is one for all steps, a cell multiplies
each step's input by the kernel (Keras's cells do).
"""

import inspect
import numbers
import threading

from . import _keras_masks, _lib, _ops, _rnn_states
from ._conv_layers import _base, _check_rank, _float_input
from ._core_layers import _resolve_training
from ._recurrent_layers import GRU, LSTM, SimpleRNN, _batch_major, _dispatch, _run_steps
from ._tensor import Tensor, zeros

__all__ = ["GRUCell", "LSTMCell", "RNN", "SimpleRNNCell", "StackedRNNCells"]

# the arguments of the recurrent layers that are not a cell's
_LAYER_ONLY = ("return_sequences", "return_state", "go_backwards", "stateful", "unroll",
               "time_major", "batch_input_shape")


def _sizes(state_size):
    """A cell's state sizes as a flat list of ints."""
    if isinstance(state_size, numbers.Integral):
        return [int(state_size)]
    return [n for s in state_size for n in _sizes(s)]


class _Cell(_base()):
    """A cell over one of vdev's recurrent layers (its weights and step)."""

    _layer = None  # the layer class

    def __init__(self, units, name=None, trainable=True, **kwargs):
        super().__init__(name, trainable)
        self._impl = self._layer(units, name=self.name, trainable=trainable, **kwargs)
        self._impl._weight_prefix = self.name
        # this call's dropout masks (drawn at its first step), per thread: the
        # replicas of a MirroredStrategy's step call one cell at once
        self._local = threading.local()

    def __getattr__(self, name):  # units, activation, kernel, ... are the layer's
        if name.startswith("__") or name in ("_impl", "_local"):
            raise AttributeError(name)
        return getattr(self._impl, name)

    @property
    def state_size(self):
        return self._impl.units if self._impl._states == 1 else [self._impl.units] * 2

    @property
    def output_size(self):
        return self._impl.units

    @property
    def built(self):
        return self._impl.built

    @property
    def variables(self):
        return self._impl.variables

    @property
    def trainable_variables(self):
        return self._impl.variables if self.trainable else []

    def build(self, input_shape):
        """The weights for inputs of that shape (its last size)."""
        features = input_shape if isinstance(input_shape, numbers.Integral) else \
            tuple(input_shape)[-1]
        self._impl.build(int(features))

    def _in_rnn(self, prefix):
        """The cell's weights named under its RNN's name, as Keras's."""
        if not self.built:
            self._impl._weight_prefix = "%s/%s" % (prefix, self.name)

    def reset_dropout_mask(self):
        """Keras's: the next step draws new masks (the RNN calls it at each
        call)."""
        self._local.masks = None

    reset_recurrent_dropout_mask = reset_dropout_mask

    def get_config(self):
        c = {k: v for k, v in self._impl.get_config().items() if k not in _LAYER_ONLY}
        c["name"] = self.name
        return c

    def __call__(self, inputs, states, training=None):
        impl = self._impl
        x = _float_input(impl._device, inputs)
        single = isinstance(states, Tensor)
        states = [states] if single else list(states)
        if x.ndim != 2:
            raise ValueError("vdev's %s takes one step's inputs [batch, features], not %s"
                             % (type(self).__name__, tuple(x.shape)))
        batch, features = (int(d) for d in x.shape)
        if not impl.built:
            impl.build(features)
        if getattr(self._local, "masks", None) is None:
            drop, rec = impl._dropout_masks(x, (batch, 1, features), _resolve_training(training),
                                            cell=True)
            if drop is not None:
                drop = [_ops.reshape(m, [batch, features]) for m in drop]
            self._local.masks = (drop, rec)
        drop, rec = self._local.masks
        u = impl.units
        if drop is not None and len(drop) > 1:
            xw = _ops.concat([_ops.matmul(_ops.multiply(x, m), impl.kernel[:, g * u:(g + 1) * u])
                              for g, m in enumerate(drop)], 1)
        else:
            xw = _ops.matmul(x if drop is None else _ops.multiply(x, drop[0]), impl.kernel)
        h, new = impl._step(impl._input_bias(xw), states, rec)
        return h, (new[0] if single else new)

    __call__._vdev_symbolic = True  # a cell is not called on symbolic tensors


class SimpleRNNCell(_Cell):
    """Keras's SimpleRNNCell (SimpleRNN's step)."""

    _layer = SimpleRNN


class LSTMCell(_Cell):
    """Keras's LSTMCell (LSTM's step; states [h, c])."""

    _layer = LSTM


class GRUCell(_Cell):
    """Keras's GRUCell (GRU's step)."""

    _layer = GRU


class StackedRNNCells(_base()):
    """Keras's StackedRNNCells: the cells one after the other."""

    def __init__(self, cells, name=None, trainable=True):
        for cell in cells:
            if "state_size" not in dir(cell) or not callable(cell):
                raise ValueError("All cells must have a `call` method and a `state_size` "
                                 "attribute. Received cells: %s" % (cells,))
        super().__init__(name, trainable)
        self.cells = list(cells)

    def _sublayers(self):
        return self.cells

    @property
    def state_size(self):
        return [c.state_size for c in self.cells]

    @property
    def output_size(self):
        return self.cells[-1].output_size

    @property
    def built(self):
        return all(getattr(c, "built", True) for c in self.cells)

    @property
    def variables(self):
        return [v for c in self.cells for v in c.variables]

    def build(self, input_shape):
        features = tuple(input_shape)[-1]
        for c in self.cells:
            if hasattr(c, "build") and not getattr(c, "built", True):
                c.build(features)
            features = c.output_size

    def _in_rnn(self, prefix):
        for c in self.cells:
            if hasattr(c, "_in_rnn"):
                c._in_rnn("%s/%s" % (prefix, self.name))

    def reset_dropout_mask(self):
        for c in self.cells:
            if hasattr(c, "reset_dropout_mask"):
                c.reset_dropout_mask()

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "cells": [{"class_name": type(c).__name__, "config": c.get_config()}
                          for c in self.cells]}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["cells"] = [_cell_from_config(c) for c in config["cells"]]
        return cls(**config)

    def __call__(self, inputs, states, training=None):
        out, new, i = inputs, [], 0
        for c in self.cells:  # Keras's: each cell its states as a list
            n = len(_sizes(c.state_size))
            out, s = _call_cell(c, out, list(states[i:i + n]), training)
            new += [s] if isinstance(s, Tensor) else list(s)
            i += n
        return out, new

    __call__._vdev_symbolic = True


def _output_units(cell):
    """Keras's: the cell's output_size, else its first state's size."""
    size = getattr(cell, "output_size", None)
    return _sizes(size if size is not None else cell.state_size)[0]


def _call_cell(cell, inputs, states, training):
    """cell(inputs, states), with training when its call takes it (Keras's
    has_arg)."""
    if "training" in inspect.signature(type(cell).__call__).parameters:
        return cell(inputs, states, training=training)
    return cell(inputs, states)


def _cell_from_config(config):
    classes = {c.__name__: c for c in (SimpleRNNCell, LSTMCell, GRUCell, StackedRNNCells)}
    name = config["class_name"]
    if name not in classes:
        raise ValueError("vdev cannot make a cell of class %s from a config: give the RNN the "
                         "cell itself" % (name,))
    return classes[name].from_config(config["config"])


class RNN(_base()):
    """Keras's RNN layer over a cell (see the module)."""

    supports_masking = True  # Keras's (compute_mask below)
    _expects_mask = True
    zero_output_for_mask = False

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False,
                 stateful=False, unroll=False, time_major=False, input_shape=None,
                 batch_input_shape=None, batch_size=None, name=None, dtype=None,
                 trainable=True):
        if isinstance(cell, (list, tuple)):
            cell = StackedRNNCells(cell)
        if not callable(cell):
            raise ValueError("Argument `cell` should have a `call` method. The RNN was passed: "
                             "cell=%s" % (cell,))
        if "state_size" not in dir(cell):
            raise ValueError("The RNN cell should have a `state_size` attribute (tuple of "
                             "integers, one integer per RNN state). Received: cell=%s"
                             % (cell,))
        super().__init__(name, trainable)
        self.cell = cell
        self.return_sequences, self.return_state = bool(return_sequences), bool(return_state)
        self.go_backwards, self.stateful = bool(go_backwards), bool(stateful)
        self.unroll, self.time_major = bool(unroll), bool(time_major)
        self._device = getattr(getattr(cell, "_impl", cell), "_device", None)
        self._strategy = getattr(getattr(cell, "_impl", cell), "_strategy", None)
        self._state_vars = None
        self._ran = False
        self._batch_input_shape = _rnn_states.batch_input_shape(
            self, input_shape, batch_input_shape, batch_size)
        if self._batch_input_shape is not None and self._batch_input_shape[-1] is not None:
            self.build(self._batch_input_shape[-1])

    # ---- weights and states ----
    def _sublayers(self):
        return [self.cell]

    @property
    def variables(self):
        return list(getattr(self.cell, "variables", []))

    @property
    def built(self):
        """The cell's, or (a cell of one's own without ``built``) whether
        it has run: it makes its weights then."""
        return getattr(self.cell, "built", self._ran)

    def build(self, features):
        if hasattr(self.cell, "_in_rnn"):  # its weights named under the layer's name now
            self.cell._in_rnn(self.name)
        if hasattr(self.cell, "build") and not self.built:
            self.cell.build((None, _lib.last_axis(features, "features", self)))

    def _state_sizes(self):
        return _sizes(self.cell.state_size)

    def _anchor(self):
        vs = self.variables
        return vs[0] if vs else None

    @property
    def states(self):
        return list(self._state_vars) if self._state_vars else [None] * len(self._state_sizes())

    def reset_states(self, states=None):
        """Keras's: a stateful RNN's states to zeros, or to ``states``."""
        _rnn_states.reset(self, states)

    # ---- shapes, masks, config ----
    def compute_output_shape(self, input_shape):
        if isinstance(input_shape, list):
            input_shape = input_shape[0]
        shape = tuple(input_shape)
        _check_rank(self, shape, 3)
        batch, steps = (shape[1], shape[0]) if self.time_major else (shape[0], shape[1])
        units = _output_units(self.cell)
        out = ((steps, batch, units) if self.time_major else (batch, steps, units)) \
            if self.return_sequences else (batch, units)
        if self.return_state:
            return [out] + [(batch, n) for n in self._state_sizes()]
        return out

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        out = mask if self.return_sequences else None
        return [out] + [None] * len(self._state_sizes()) if self.return_state else out

    def get_config(self):
        if not hasattr(self.cell, "get_config"):
            raise NotImplementedError("Layer RNN's cell %s has no get_config" % (self.cell,))
        c = {"name": self.name, "trainable": self.trainable, "dtype": "float32",
             "return_sequences": self.return_sequences, "return_state": self.return_state,
             "go_backwards": self.go_backwards, "stateful": self.stateful,
             "unroll": self.unroll, "time_major": self.time_major,
             "cell": {"class_name": type(self.cell).__name__, "config": self.cell.get_config()}}
        if self.stateful and self._batch_input_shape is not None:
            c["batch_input_shape"] = self._batch_input_shape
        return c

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["cell"] = _cell_from_config(config["cell"])
        return cls(**config)

    # ---- the call ----
    def __call__(self, inputs, mask=None, training=None, initial_state=None):
        return _dispatch(self, RNN._call, inputs, mask, training, initial_state)

    __call__._vdev_symbolic = True  # _dispatch records a functional model's calls

    def _initial_states(self, initial_state, batch, near):
        sizes = self._state_sizes()
        if initial_state is None:
            with _ops._near(near):
                return [zeros((batch, n)) for n in sizes]
        given = [initial_state] if isinstance(initial_state, Tensor) or not isinstance(
            initial_state, (list, tuple)) else list(initial_state)
        if len(given) != len(sizes):
            raise ValueError("An `initial_state` was passed that is not compatible with "
                             "`cell.state_size`. Received `state_spec`=%d states; however "
                             "`cell.state_size` is %s" % (len(given), self.cell.state_size))
        out = []
        for s, n in zip(given, sizes):
            with _ops._near(near):
                s = _float_input(None, s)
            if tuple(int(d) for d in s.shape) != (batch, n):
                raise ValueError("vdev's RNN: an initial state of shape %s where the cell's "
                                 "is %s" % (tuple(int(d) for d in s.shape), (batch, n)))
            out.append(s)
        return out

    def _call(self, inputs, mask=None, training=None, initial_state=None):
        if isinstance(inputs, (list, tuple)):  # Keras's: [inputs, *initial_state]
            inputs, initial_state = inputs[0], (list(inputs[1:]) or None)
        x, shape = _batch_major(self, _float_input(self._device, inputs))
        batch, steps, features = shape
        self.build(features)
        if self.stateful:
            initial_state = _rnn_states.before_call(self, batch, steps, features, initial_state)
        states = self._initial_states(initial_state, batch, x)
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        if mask is not None:
            mask = _keras_masks.as_mask(mask, x, (steps, batch) if self.time_major
                                        else (batch, steps))
            if self.time_major:
                mask = _ops.transpose(mask, (1, 0))
        if hasattr(self.cell, "reset_dropout_mask"):
            self.cell.reset_dropout_mask()  # Keras's: new masks each call

        def step(t, st):  # Keras's: the states as a list, new ones made a list
            out, new = _call_cell(self.cell, x[:, t, :], list(st), training)
            return out, [new] if isinstance(new, Tensor) else list(new)
        units = _output_units(self.cell)
        self._ran = True
        return _run_steps(self, step, x, states, mask, False, units)
