"""Keras 2.11's recurrent layers ``SimpleRNN``, ``LSTM`` and ``GRU`` (GRU
with ``reset_after=True``, TensorFlow 2's default, and False), exported by
``vdev.layers``, over [batch, timesteps, features] (``time_major``:
[timesteps, batch, features]). Each step is the cell's arithmetic in Keras's
order, written with vdev's ops, so the tape differentiates through time:

  SimpleRNN  h = activation((x W + b) + h' U)
  LSTM       z = (x W + h' U) + b, split i, f, c, o;
             c = f(z1) c' + i(z0) act(z2) with f, i, o = recurrent_activation;
             h = o(z3) act(c)
  GRU        (x W + b_in) split z, r, h; (h' U + b_rec) split likewise;
             z = ract(xz + rz), r = ract(xr + rr),
             hh = act(xh + r * rh) (reset_after) or act(xh + (r h') U_h),
             h = z h' + (1 - z) hh

The input's product with W is one matrix product for all the steps (with
the bias where Keras adds it to that product), then a slice per step. The
weights, Keras's names, shapes and order: NAME/<cell>/kernel [features,
gates * units], NAME/<cell>/recurrent_kernel [units, gates * units] and
NAME/<cell>/bias ([gates * units], GRU reset_after [2, 3 * units]), made at
``input_shape`` or the first call on the layer's device (mirrored under a
strategy's scope; all or none), drawn with the layer's seed (the recurrent
kernel and the bias with seeds derived from it); Keras's defaults
(glorot_uniform, orthogonal, zeros; LSTM's unit_forget_bias puts ones in the
forget gate's bias). ``return_sequences``, ``return_state``,
``go_backwards`` (the outputs in the order of the steps taken, as Keras's),
``initial_state`` at the call; ``implementation`` 1 or 2 (the same
arithmetic without dropout).

``dropout`` and ``recurrent_dropout`` (clipped to [0, 1] as Keras's; a mask
is drawn only in training, where a rate of 1 is tf.nn.dropout's error) are
Keras's, which has two paths. The layers cuDNN could run (LSTM and GRU with
tanh, sigmoid, a bias, no recurrent dropout, not unrolled; GRU with
reset_after) drop elements of the whole input sequence, a mask of [batch,
steps, features]. The others (SimpleRNN, and LSTM and GRU with other
arguments) draw their masks once per call and use them at every step: with
implementation 2, one input mask of [batch, features]; with implementation
1 (which recurrent_dropout forces, as Keras's), a mask per gate, the input
product made per gate, and per gate the previous output times its
recurrent mask before the recurrent product. A mask is 1 / (1 - rate)
where kept, 0 where dropped; the seeds are _Draws's (vdev/_core_layers.py)
from the layer's seed, so a program gives the same masks every run and
replicas their own. ``stateful=True`` keeps each call's last states for the
next (vdev/_rnn_states.py).

A mask (the input's, vdev/_keras_masks.py, or ``mask=``: [batch, steps],
time_major [steps, batch]) skips steps as Keras's backend.rnn: a masked step
keeps the states and repeats the last output (0 before any step counted, or
always 0 with zero_output_for_mask, which Bidirectional sets for sequences);
the output keeps the mask with return_sequences. What vdev has not is a
ValueError naming it: regularizers and constraints.
"""

import contextlib
import hashlib
import numbers

from . import _keras_masks, _ops, _rnn_states, _strategy_context, initializers, random
from ._conv_layers import (_base, _check_rank, _float32_only, _float_input, _none_only,
                           _weighted_input)
from ._core_layers import _Draws, _dropout_mask, _dropout_seed, _resolve_training
from ._device import current_device, device
from ._tensor import Tensor, zeros

__all__ = ["GRU", "LSTM", "SimpleRNN"]


def _derived_seed(tag, seed):
    """A seed derived from the layer's: the first 8 bytes (little-endian)
    of BLAKE2b over the tag and the 64-bit seed, unrelated to every small
    seed and to the other weights' seeds."""
    h = hashlib.blake2b(tag + int(seed).to_bytes(8, "little"), digest_size=8)
    return int.from_bytes(h.digest(), "little")


class _ForgetBias(initializers.Initializer):
    """LSTM's unit_forget_bias: the bias initializer's values for the input
    gate, ones for the forget gate, its values for the other two (Keras
    draws the first and the last part separately)."""

    def __init__(self, inner, units):
        self.inner, self.units = inner, units

    def __call__(self, shape, dtype=None):
        u = self.units
        parts = [self.inner((u,)), initializers.Ones()((u,)), self.inner((2 * u,))]
        return _ops.concat(parts, 0)


class _RNN(_base()):
    """The loop over the steps, the weights, the config; the subclasses
    give the cell (_step), its gates and its states."""

    _gates = 1
    _states = 1
    _cell = "simple_rnn_cell"
    _weight_prefix = None  # a cell's (vdev/_rnn_cells.py): its weights' names' start
    supports_masking = True  # Keras's (compute_mask below)
    _expects_mask = True
    zero_output_for_mask = False  # Keras's: Bidirectional sets it with return_sequences

    def _setup(self, a):
        """The arguments every recurrent layer takes, from its __init__'s
        locals() (SimpleRNN has no recurrent_activation)."""
        from .layers import _activation, _bias_seed
        cls = type(self).__name__
        _none_only(cls, **{arg: a[arg] for arg in (
            "kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
            "activity_regularizer", "kernel_constraint", "recurrent_constraint",
            "bias_constraint")})
        for arg in ("dropout", "recurrent_dropout"):
            if isinstance(a[arg], bool) or not isinstance(a[arg], numbers.Real):
                raise ValueError("vdev's %s takes a number for `%s`, not %r"
                                 % (cls, arg, a[arg]))
        _float32_only(self, a["dtype"])
        super().__init__(a["name"], a["trainable"])
        units = a["units"]
        if isinstance(units, bool) or not isinstance(units, numbers.Integral) or units <= 0:
            raise ValueError("Received an invalid value for argument `units`, expected a "
                             "positive integer, got %s." % (units,))
        self.units = int(units)
        self.activation = _activation(a["activation"])
        self.recurrent_activation = _activation(a.get("recurrent_activation"))
        self.use_bias = bool(a["use_bias"])
        self.seed = random._seed(a["seed"])
        self.kernel_initializer = initializers._get(a["kernel_initializer"], self.seed)
        self.recurrent_initializer = initializers._get(
            a["recurrent_initializer"], _derived_seed(b"vdev.RNN.recurrent_kernel:", self.seed))
        self.bias_initializer = initializers._get(a["bias_initializer"], _bias_seed(self.seed))
        if None in (self.kernel_initializer, self.recurrent_initializer, self.bias_initializer):
            raise ValueError("Could not interpret initializer identifier: None")
        # Keras's: clipped to [0, 1]; recurrent dropout forces implementation 1
        self.dropout = min(1.0, max(0.0, float(a["dropout"])))
        self.recurrent_dropout = min(1.0, max(0.0, float(a["recurrent_dropout"])))
        if self.recurrent_dropout != 0 and hasattr(self, "implementation"):
            self.implementation = 1
        self._draws = _Draws(self.seed, b"vdev.RNN.dropout")
        self.return_sequences = bool(a["return_sequences"])
        self.return_state = bool(a["return_state"])
        self.go_backwards = bool(a["go_backwards"])
        self.stateful = bool(a["stateful"])
        self._state_vars = None  # a stateful layer's states (vdev/_rnn_states.py)
        self.unroll = bool(a["unroll"])
        self.time_major = bool(a["time_major"])
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self.kernel = self.recurrent_kernel = self.bias = None
        self._batch_input_shape = _rnn_states.batch_input_shape(
            self, a["input_shape"], a["batch_input_shape"], a["batch_size"])
        if self._batch_input_shape is not None and self._batch_input_shape[-1] is not None:
            self.build(self._batch_input_shape[-1])

    @property
    def built(self):
        return self.kernel is not None

    def _bias_shape(self):
        return (self._gates * self.units,)

    def _bias_init(self):
        return self.bias_initializer

    def build(self, features):
        """Makes the kernel, the recurrent kernel and the bias on the
        layer's device (mirrored under its strategy), all or none."""
        from .layers import _adopt, _initial
        if self.kernel is not None:
            return
        if _strategy_context.replica() is not None:
            raise _strategy_context.variable_in_step_error(
                "layer %r is built" % self.name, "Give it input_shape (or call it once)")
        from . import _lib
        features = _lib.last_axis(features, "features", self)
        n = self._gates * self.units
        wanted = [("kernel", self.kernel_initializer, (features, n)),
                  ("recurrent_kernel", self.recurrent_initializer, (self.units, n))]
        if self.use_bias:
            wanted.append(("bias", self._bias_init(), self._bias_shape()))
        where = self._device or ("CPU:0" if self._strategy is not None else None)
        made = []
        with device(where) if where else contextlib.nullcontext():
            for suffix, init, shape in wanted:
                v = _adopt(_initial(init, shape), self._strategy)
                v.name = "%s/%s" % (self._weight_prefix or "%s/%s" % (self.name, self._cell),
                                    suffix)
                made.append(v)
        self.kernel, self.recurrent_kernel = made[0], made[1]
        self.bias = made[2] if self.use_bias else None
        self._variables = made

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, units), (batch, timesteps, units) with
        return_sequences (time_major: (timesteps, batch, units)), and with
        return_state a list of that and one (batch, units) per state."""
        if isinstance(input_shape, list):  # Keras's: [inputs, *initial_state]
            input_shape = input_shape[0]
        shape = tuple(input_shape)
        _check_rank(self, shape, 3)
        batch, steps = (shape[1], shape[0]) if self.time_major else (shape[0], shape[1])
        if self.return_sequences:
            out = (steps, batch, self.units) if self.time_major else (batch, steps, self.units)
        else:
            out = (batch, self.units)
        if self.return_state:
            return [out] + [(batch, self.units)] * self._states
        return out

    def get_config(self):
        from .layers import _activation_name
        c = {"name": self.name, "trainable": self.trainable, "dtype": "float32",
             "return_sequences": self.return_sequences, "return_state": self.return_state,
             "go_backwards": self.go_backwards, "stateful": self.stateful, "unroll": self.unroll,
             "time_major": self.time_major, "units": self.units,
             "activation": _activation_name(self.activation)}
        if self._gates > 1:
            c["recurrent_activation"] = _activation_name(self.recurrent_activation)
        c.update({"use_bias": self.use_bias,
                  "kernel_initializer": initializers.serialize(self.kernel_initializer),
                  "recurrent_initializer": initializers.serialize(self.recurrent_initializer),
                  "bias_initializer": initializers.serialize(self.bias_initializer)})
        c.update(self._extra_config())
        for k in ("kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                  "activity_regularizer", "kernel_constraint", "recurrent_constraint",
                  "bias_constraint"):
            c[k] = None
        c.update({"dropout": self.dropout, "recurrent_dropout": self.recurrent_dropout})
        if self.stateful and self._batch_input_shape is not None:  # its batch size kept
            c["batch_input_shape"] = self._batch_input_shape
        return c

    @classmethod
    def from_config(cls, config):
        return cls(**config)  # batch_input_shape as it is (a stateful layer's batch)

    def _state_sizes(self):
        return [self.units] * self._states

    def _anchor(self):
        """A tensor on the layer's device (its kernel), or None."""
        return self.kernel

    @property
    def states(self):
        """Keras's: a stateful layer's state variables ([batch, units] each,
        made at its first call), else None for each state."""
        return list(self._state_vars) if self._state_vars else [None] * self._states

    def reset_states(self, states=None):
        """Keras's: a stateful layer's states to zeros, or to ``states``."""
        _rnn_states.reset(self, states)

    def _extra_config(self):
        return {}

    def _act(self, x):
        return self.activation(x) if self.activation else x

    def _ract(self, x):
        return self.recurrent_activation(x) if self.recurrent_activation else x

    def _slice(self, z, k, n=1):
        """Columns [k units, (k + n) units) of z [batch, gates * units]."""
        u = self.units
        return z[:, k * u:(k + n) * u]

    def __call__(self, inputs, mask=None, training=None, initial_state=None):
        return _dispatch(self, _RNN._call, inputs, mask, training, initial_state)

    __call__._vdev_symbolic = True  # _dispatch records a functional model's calls

    def _call(self, inputs, mask=None, training=None, initial_state=None):
        if isinstance(inputs, (list, tuple)):  # Keras's: [inputs, *initial_state]
            inputs, initial_state = inputs[0], (list(inputs[1:]) or None)
        x, shape = _batch_major(self, _weighted_input(self, inputs))
        batch, steps, features = shape
        if self.kernel is None:
            self.build(features)
        elif features != int(self.kernel.shape[0]):
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "shape=%s, found shape=%s"
                             % (self.name, (None, None, int(self.kernel.shape[0])), shape))
        if self.stateful:  # the states the last call left, unless given
            initial_state = _rnn_states.before_call(self, batch, steps, features, initial_state)
        states = self._initial_states(initial_state, batch)
        if isinstance(mask, (list, tuple)):  # Keras's: the input's, the first
            mask = mask[0]
        if mask is not None:  # [batch, steps] (time_major: [steps, batch])
            mask = _keras_masks.as_mask(mask, x, (steps, batch) if self.time_major
                                        else (batch, steps))
            if self.time_major:
                mask = _ops.transpose(mask, (1, 0))
        drop, rec = self._dropout_masks(x, shape, _resolve_training(training))
        # every step's x W (+ b where the cell adds it there): one product,
        # or one per gate with a mask each
        if drop is not None and len(drop) > 1:
            u = self.units
            rows = [_ops.reshape(_ops.multiply(x, m), [batch * steps, features]) for m in drop]
            xw = _ops.concat([_ops.matmul(r, self.kernel[:, g * u:(g + 1) * u])
                              for g, r in enumerate(rows)], 1)
        else:
            if drop is not None:
                x = _ops.multiply(x, drop[0])
            xw = _ops.matmul(_ops.reshape(x, [batch * steps, features]), self.kernel)
        xw = self._input_bias(xw)
        xw = _ops.reshape(xw, [batch, steps, int(xw.shape[-1])])
        # from zero states, the last output kept is the first state kept:
        # the same selects, so it is taken from there (four ops fewer a step)
        from_zeros = initial_state is None and not self.zero_output_for_mask
        return _run_steps(self, lambda t, st: self._step(xw[:, t, :], st, rec), x, states,
                          mask, from_zeros, self.units)

    def compute_mask(self, inputs, mask=None):
        """Keras's: the input's mask for return_sequences, else None; with
        return_state, None for each state."""
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        out = mask if self.return_sequences else None
        return [out] + [None] * self._states if self.return_state else out

    def _cudnn_path(self):
        """Whether Keras's layer would take its cuDNN-capable path (which
        drops elements of the whole input sequence): never for SimpleRNN."""
        return False

    def _dropout_masks(self, x, shape, training, cell=False):
        """This call's dropout masks, Keras's (the module's opening):
        (input masks or None, recurrent masks or None), each a list, drawn
        only in training with a nonzero rate. Input masks are [batch, steps,
        features] on the cuDNN-capable path, else [batch, 1, features] (one
        per gate with implementation 1), broadcast over the steps; recurrent
        masks [batch, units], one per gate. A cell's (cell: Keras's cells
        have the cell path only)."""
        if not training or (self.dropout == 0 and self.recurrent_dropout == 0):
            return None, None
        batch, steps, features = shape
        seed = self._draws.next()
        n = self._gates

        def draw(k, dims, rate):
            return _dropout_mask(x, dims, rate, _dropout_seed(seed, b"vdev.RNN.mask:", k))

        drop = rec = None
        if self.dropout:
            if self._cudnn_path() and not cell:
                drop = [draw(0, (batch, steps, features), self.dropout)]
            else:
                count = n if getattr(self, "implementation", 2) == 1 else 1
                drop = [draw(k, (batch, 1, features), self.dropout) for k in range(count)]
        if self.recurrent_dropout:
            rec = [draw(n + k, (batch, self.units), self.recurrent_dropout) for k in range(n)]
        return drop, rec

    def _recurrent(self, h, rec, first, n):
        """h U over gates [first, first + n): one product, or with
        recurrent masks (implementation 1) a product per gate of h times
        that gate's mask, side by side."""
        u = self.units
        if rec is None:
            whole = first == 0 and n == self._gates
            return _ops.matmul(h, self.recurrent_kernel if whole
                               else self.recurrent_kernel[:, first * u:(first + n) * u])
        parts = [_ops.matmul(_ops.multiply(h, rec[g]), self.recurrent_kernel[:, g * u:(g + 1) * u])
                 for g in range(first, first + n)]
        return parts[0] if n == 1 else _ops.concat(parts, 1)

    def _initial_states(self, initial_state, batch):
        n = self._states
        if initial_state is None:
            with _ops._near(self.kernel):
                return [zeros((batch, self.units)) for _ in range(n)]
        if isinstance(initial_state, (Tensor,)) or not isinstance(initial_state, (list, tuple)):
            initial_state = [initial_state]
        if len(initial_state) != n:
            raise ValueError("An `initial_state` was passed that is not compatible with "
                             "`cell.state_size`. Received `state_spec`=%d states; however "
                             "`cell.state_size` is %s"
                             % (len(initial_state), [self.units] * n))
        out = []
        for s in initial_state:
            with _ops._near(self.kernel):
                s = _float_input(None, s)
            if tuple(int(d) for d in s.shape) != (batch, self.units):
                raise ValueError("vdev's %s: an initial state of shape %s for a batch of %d "
                                 "and %d units; each state is [batch, units]"
                                 % (type(self).__name__, tuple(int(d) for d in s.shape), batch,
                                    self.units))
            out.append(s)
        return out

    def _input_bias(self, xw):
        return xw


class SimpleRNN(_RNN):
    """Keras's SimpleRNN: h = activation(x W + b + h' U)."""

    def __init__(self, units, activation="tanh", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.0,
                 recurrent_dropout=0.0, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False, time_major=False,
                 input_shape=None, seed=None, name=None, dtype=None, trainable=True,
                 batch_input_shape=None, batch_size=None):
        self._setup(locals())

    def _input_bias(self, xw):
        return _ops.add(xw, self.bias) if self.bias is not None else xw

    def _step(self, xw_t, states, rec):
        h = self._act(_ops.add(xw_t, self._recurrent(states[0], rec, 0, 1)))
        return h, [h]


class LSTM(_RNN):
    """Keras's LSTM (gates i, f, c, o)."""

    _gates = 4
    _states = 2
    _cell = "lstm_cell"

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", unit_forget_bias=True, kernel_regularizer=None,
                 recurrent_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, recurrent_constraint=None, bias_constraint=None,
                 dropout=0.0, recurrent_dropout=0.0, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, time_major=False, unroll=False,
                 input_shape=None, seed=None, name=None, dtype=None, trainable=True,
                 implementation=2, batch_input_shape=None, batch_size=None):
        self.unit_forget_bias = bool(unit_forget_bias)
        self.implementation = _implementation(implementation)
        self._setup(locals())

    def _bias_init(self):
        if self.unit_forget_bias:
            return _ForgetBias(self.bias_initializer, self.units)
        return self.bias_initializer

    def _extra_config(self):
        return {"unit_forget_bias": self.unit_forget_bias,
                "implementation": self.implementation}

    def _cudnn_path(self):
        return _cudnn_args(self)

    def _input_bias(self, xw):
        # implementation 1 adds the bias to the input's product, as Keras's
        if self.bias is not None and self.implementation == 1:
            return _ops.add(xw, self.bias)
        return xw

    def _step(self, xw_t, states, rec):
        h_prev, c_prev = states
        z = _ops.add(xw_t, self._recurrent(h_prev, rec, 0, 4))
        if self.bias is not None and self.implementation == 2:
            z = _ops.add(z, self.bias)
        if _fused_cell(self):  # four ops (src/ops/lstm_cell.c), the bits of those below
            a = _ops.lstm_gates(z)
            c = _ops.lstm_cell_state(a, c_prev)
            h = _ops.lstm_cell_output(a, _ops.tanh(c))
            return h, [h, c]
        # the recurrent activation of all four gates at once, then sliced
        # (element by element the same values, two ops fewer a step)
        g = self._ract(z)
        i, f, o = self._slice(g, 0), self._slice(g, 1), self._slice(g, 3)
        c = _ops.add(_ops.multiply(f, c_prev), _ops.multiply(i, self._act(self._slice(z, 2))))
        h = _ops.multiply(o, self._act(c))
        return h, [h, c]


class GRU(_RNN):
    """Keras's GRU (gates z, r, h); reset_after=True (TensorFlow 2's
    default) applies the reset gate after the recurrent product, with a
    bias [2, 3 units] (input's, recurrent's)."""

    _gates = 3
    _cell = "gru_cell"

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.0,
                 recurrent_dropout=0.0, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False, time_major=False,
                 reset_after=True, input_shape=None, seed=None, name=None, dtype=None,
                 trainable=True, implementation=2, batch_input_shape=None, batch_size=None):
        self.reset_after = bool(reset_after)
        self.implementation = _implementation(implementation)
        self._setup(locals())

    def _bias_shape(self):
        n = 3 * self.units
        return (2, n) if self.reset_after else (n,)

    def _extra_config(self):
        return {"implementation": self.implementation, "reset_after": self.reset_after}

    def _cudnn_path(self):
        return self.reset_after and _cudnn_args(self)

    def _input_bias(self, xw):
        if self.bias is None:
            return xw
        b = self.bias[0] if self.reset_after else self.bias
        return _ops.add(xw, b)

    def _step(self, xw_t, states, rec):
        h_prev = states[0]
        u = self.units
        if self.reset_after:
            inner = self._recurrent(h_prev, rec, 0, 3)
            if self.bias is not None:
                inner = _ops.add(inner, self.bias[1])
            if _fused_cell(self):  # two ops (src/ops/gru_cell.c), the bits of those below
                h = _ops.gru_cell_output(_ops.gru_gates(xw_t, inner), h_prev)
                return h, [h]
            xh = self._slice(xw_t, 2)
            # z and r together (adjacent columns: the same values, fewer ops)
            zr = self._ract(_ops.add(self._slice(xw_t, 0, 2), self._slice(inner, 0, 2)))
            z, r = self._slice(zr, 0), self._slice(zr, 1)
            hh = self._act(_ops.add(xh, _ops.multiply(r, self._slice(inner, 2))))
        else:
            xh = self._slice(xw_t, 2)
            xz, xr = self._slice(xw_t, 0), self._slice(xw_t, 1)
            inner = self._recurrent(h_prev, rec, 0, 2)
            rz, rr = self._slice(inner, 0), self._slice(inner, 1)
            z = self._ract(_ops.add(xz, rz))
            r = self._ract(_ops.add(xr, rr))
            h_h = h_prev if rec is None else _ops.multiply(h_prev, rec[2])
            rh = _ops.matmul(_ops.multiply(r, h_h), self.recurrent_kernel[:, 2 * u:])
            hh = self._act(_ops.add(xh, rh))
        # z h' + (1 - z) hh
        h = _ops.add(_ops.multiply(z, h_prev), _ops.multiply(_ops.subtract(1.0, z), hh))
        return h, [h]


def _batch_major(layer, x):
    """(x as [batch, steps, features], that shape): a time-major layer's
    input transposed, the rank checked (Keras's InputSpec)."""
    shape = tuple(int(d) for d in x.shape)
    _check_rank(layer, shape, 3)
    if layer.time_major:
        x = _ops.transpose(x, (1, 0, 2))
        shape = (shape[1], shape[0], shape[2])
    return x, shape


def _run_steps(layer, step, x, states, mask, from_zeros, units):
    """Keras's backend.rnn over x's steps ([batch, steps, ...], batch-major),
    backwards with layer.go_backwards: step(t, states) gives (output, new
    states); a masked step keeps the states and repeats the last output (0
    before any, or always 0 with zero_output_for_mask), from_zeros taking
    that output from the first state (the same selects: true of a layer
    whose output is its first state, started from zeros). Then Keras's
    outputs: the sequence (time-major back when the layer is) or the last
    output, the states after it with return_state; a stateful layer's
    states kept (vdev/_rnn_states.py)."""
    batch, steps = int(x.shape[0]), int(x.shape[1])
    order = range(steps - 1, -1, -1) if layer.go_backwards else range(steps)
    outputs = []
    last = None
    for t in order:
        h, new = step(t, states)
        if mask is not None:
            m = mask[:, t:t + 1]
            states = [_keras_masks.select(m, a, b) for a, b in zip(new, states)]
            if from_zeros:
                h = last = states[0]
            else:
                if last is None:
                    with _ops._near(h):
                        zero = last = zeros(tuple(int(d) for d in h.shape))
                h = last = _keras_masks.select(m, h, zero if layer.zero_output_for_mask
                                               else last)
        else:
            states, last = list(new), h
        if layer.return_sequences:
            outputs.append(h)
    if layer.return_sequences:
        if outputs:
            out = _ops.stack(outputs, axis=1)
        else:
            with _ops._near(x):
                out = zeros((batch, 0, units))
        if layer.time_major:
            out = _ops.transpose(out, (1, 0, 2))
    elif last is None:  # no steps: Keras's last output is the first state
        out = states[0]
    else:  # the last output: with a mask, the last step's kept (Keras's)
        out = last
    if layer.stateful:
        _rnn_states.after_call(layer, states)
    if layer.return_state:
        return [out] + list(states)
    return out


def _dispatch(layer, call, inputs, mask, training, initial_state):
    """A recurrent layer's (or Bidirectional's) call, as Keras's RNN.__call__:
    on symbolic tensors (a functional model's construction), initial states
    given as symbolic tensors join the inputs ([inputs, *states], so the
    model's graph reaches them), the layer is built for the input's
    features and the call recorded; on values, call with Keras's masks
    (vdev/_keras_masks.py)."""
    from . import _functional
    states = initial_state
    if states is not None and not isinstance(states, (list, tuple)):
        states = [states]
    first = inputs[0] if isinstance(inputs, (list, tuple)) and inputs else inputs
    if _functional.is_symbolic(inputs) or (states and _functional.is_symbolic(list(states))):
        full = [inputs] + list(states) if states else inputs
        features = tuple(first.shape)[-1] if hasattr(first, "shape") else None
        if getattr(layer, "stateful", False):  # Keras's: it must know its batch size
            _rnn_states.know_batch(layer, tuple(first.shape))
        if not layer.built and features is not None:
            layer.build(int(features))
        kwargs = {k: v for k, v in (("mask", mask), ("training", training)) if v is not None}
        return _functional.symbolic_call(layer, full, (), kwargs)
    return _keras_masks.masked_call(call, layer, inputs, (), {
        "mask": mask, "training": training, "initial_state": initial_state})


def _fused_cell(layer):
    """Whether an LSTM's or GRU's step may be the fused cell's ops: its
    activations the Tanh and Sigmoid ops (by name or function)."""
    from . import activations
    return (layer.activation in (_ops.tanh, activations.tanh)
            and layer.recurrent_activation in (_ops.sigmoid, activations.sigmoid))


def _cudnn_args(layer):
    """Keras's _could_use_gpu_kernel for LSTM and GRU: tanh, sigmoid, no
    recurrent dropout, not unrolled, a bias."""
    from .layers import _activation_name
    return (_activation_name(layer.activation) == "tanh"
            and _activation_name(layer.recurrent_activation) == "sigmoid"
            and layer.recurrent_dropout == 0 and not layer.unroll and layer.use_bias)


def _implementation(mode):
    """Keras's implementation (1: a product per gate, 2: one for all): the
    same arithmetic without dropout; with it, 1 draws a mask per gate."""
    if mode not in (1, 2):
        raise ValueError("vdev's recurrent layers take implementation=1 or 2, not %r" % (mode,))
    return int(mode)
