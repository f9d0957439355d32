"""Keras 2.11's ``Bidirectional(layer, merge_mode="concat",
backward_layer=None)`` wrapper of a recurrent layer, exported by
``vdev.layers``: a forward copy and a backward copy of the layer (made anew
from its config, as Keras's, the backward one with go_backwards flipped,
unless backward_layer is given), named forward_NAME and backward_NAME, their
weights under the wrapper's name (BIDIRECTIONAL/forward_lstm/lstm_cell/
kernel, ...). A call runs both on the inputs, turns the backward outputs
back into time order when they are sequences (a StridedSlice of stride -1
along the time axis), and merges them: "concat" (the last axis), "sum",
"ave", "mul", or None (the two as a list); with return_state the states
follow, the forward layer's first. initial_state is a list of the forward
layer's states then the backward one's. A mask (the input's, or ``mask=``)
goes to both layers, which give 0 at masked steps when returning sequences
(Keras's zero_output_for_mask); the output keeps it with return_sequences.
Keras's checks and words.
"""

from . import _ops
from ._conv_layers import _base, _float32_only, _input_shape
from ._recurrent_layers import _RNN, _dispatch

__all__ = ["Bidirectional"]

_MODES = ("sum", "mul", "ave", "concat", None)


def _copy(layer, go_backwards=None):
    """A new layer of layer's class and config (go_backwards flipped when
    asked), unbuilt, as Keras's _recreate_layer_from_config."""
    config = layer.get_config()
    shape = config.pop("batch_input_shape", None)  # kept, not built here (named below)
    if go_backwards is not None:
        config["go_backwards"] = go_backwards
    copy = type(layer).from_config(config)
    copy._batch_input_shape = shape
    return copy


class Bidirectional(_base()):
    """Keras's Bidirectional wrapper of a SimpleRNN, LSTM or GRU."""

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None,
                 input_shape=None, name=None, dtype=None, trainable=True):
        from .layers import Layer
        if not isinstance(layer, Layer):
            raise ValueError("Please initialize `Bidirectional` layer with a "
                             "`tf.keras.layers.Layer` instance. Received: %s" % (layer,))
        if backward_layer is not None and not isinstance(backward_layer, Layer):
            raise ValueError("`backward_layer` need to be a `tf.keras.layers.Layer` instance. "
                             "Received: %s" % (backward_layer,))
        if merge_mode not in _MODES:
            raise ValueError("Invalid merge mode. Received: %s. Merge mode should be one of "
                             "{'sum', 'mul', 'ave', 'concat', None}" % (merge_mode,))
        from ._rnn_cells import RNN
        kinds = (_RNN, RNN)
        if not isinstance(layer, kinds) or (backward_layer is not None and
                                            not isinstance(backward_layer, kinds)):
            raise ValueError("vdev's Bidirectional wraps vdev's SimpleRNN, LSTM, GRU or RNN, "
                             "not %s" % type(layer if not isinstance(layer, kinds) else
                                             backward_layer).__name__)
        if weights is not None:
            raise ValueError("vdev's Bidirectional takes weights=None only; set the weights "
                             "of the built layer instead")
        _float32_only(self, dtype)
        super().__init__(name or None, trainable)
        self.forward_layer = _copy(layer)
        if backward_layer is None:
            self.backward_layer = _copy(layer, go_backwards=not layer.go_backwards)
        else:
            self.backward_layer = backward_layer
            if backward_layer.go_backwards == layer.go_backwards:
                raise ValueError("Forward layer and backward layer should have different "
                                 "`go_backwards` value.forward_layer.go_backwards = %s, "
                                 "backward_layer.go_backwards = %s"
                                 % (layer.go_backwards, backward_layer.go_backwards))
            for attr in ("return_sequences", "return_state"):
                if getattr(layer, attr) != getattr(backward_layer, attr):
                    raise ValueError("Forward layer and backward layer are expected to have "
                                     "the same value for attribute \"%s\", got \"%s\" for "
                                     "forward layer and \"%s\" for backward layer"
                                     % (attr, getattr(layer, attr),
                                        getattr(backward_layer, attr)))
        self._given_backward = backward_layer is not None
        self.layer = layer
        self.forward_layer.name = "forward_" + self.forward_layer.name
        self.backward_layer.name = "backward_" + self.backward_layer.name
        self.merge_mode = merge_mode
        for sub in (self.forward_layer, self.backward_layer):  # Keras's
            sub.zero_output_for_mask = sub.return_sequences
        self.return_sequences = layer.return_sequences
        self.return_state = layer.return_state
        self.stateful = layer.stateful
        self._batch_input_shape = _input_shape(self, input_shape, 3)
        if self._batch_input_shape is not None and self._batch_input_shape[-1] is not None:
            self.build(self._batch_input_shape[-1])

    supports_masking = True  # Keras's (compute_mask below)
    _expects_mask = True

    def compute_mask(self, inputs, mask=None):
        """Keras's: the input's mask for each output that is a sequence,
        None for the others and the states."""
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        if self.return_sequences:
            out = [mask, mask] if self.merge_mode is None else mask
        else:
            out = [None, None] if self.merge_mode is None else None
        if self.return_state:
            states = [None] * (2 * len(self.forward_layer._state_sizes()))
            return (out if isinstance(out, list) else [out]) + states
        return out

    def _sublayers(self):
        return [self.forward_layer, self.backward_layer]

    def reset_states(self, states=None):
        """Keras's: both layers' states, zeros (or ``states``: the forward
        layer's, then the backward one's)."""
        if states is None:
            self.forward_layer.reset_states()
            self.backward_layer.reset_states()
            return
        n = len(states) // 2
        self.forward_layer.reset_states(states[:n])
        self.backward_layer.reset_states(states[n:])

    @property
    def variables(self):
        return self.forward_layer.variables + self.backward_layer.variables

    @property
    def built(self):
        return self.forward_layer.built and self.backward_layer.built

    def build(self, features):
        """Builds both layers, their weights named under the wrapper's."""
        for sub in (self.forward_layer, self.backward_layer):
            if not sub.built:
                sub.build(features)
                for v in sub.variables:
                    v.name = "%s/%s" % (self.name, v.name)

    def compute_output_shape(self, input_shape):
        """Keras's: the forward layer's, the last axis doubled by concat;
        a list of two with merge_mode None; the states after."""
        out = self.forward_layer.compute_output_shape(input_shape)
        states = []
        if self.return_state:
            out, states = out[0], list(out[1:])
            states = states + states
        if self.merge_mode == "concat":
            out = tuple(out[:-1]) + (None if out[-1] is None else 2 * out[-1],)
            outs = [out]
        elif self.merge_mode is None:
            outs = [out, out]
        else:
            outs = [out]
        if self.return_state or self.merge_mode is None:
            return outs + states
        return outs[0]

    def get_config(self):
        c = {"name": self.name, "trainable": self.trainable, "dtype": "float32",
             "layer": {"class_name": type(self.layer).__name__,
                       "config": self.layer.get_config()},
             "merge_mode": self.merge_mode}
        if self._given_backward:
            c["backward_layer"] = {"class_name": type(self.backward_layer).__name__,
                                   "config": self.backward_layer.get_config()}
        return c

    @classmethod
    def from_config(cls, config):
        from .layers import _keras_config
        from .models import _layer_from_config
        config = _keras_config(config)
        config["layer"] = _layer_from_config(config["layer"])
        if config.get("backward_layer") is not None:
            config["backward_layer"] = _layer_from_config(config["backward_layer"])
        return cls(**config)

    def __call__(self, inputs, mask=None, training=None, initial_state=None):
        return _dispatch(self, Bidirectional._call, inputs, mask, training, initial_state)

    __call__._vdev_symbolic = True  # _dispatch records a functional model's calls

    def _call(self, inputs, mask=None, training=None, initial_state=None):
        if isinstance(inputs, (list, tuple)):  # Keras's: [inputs, *initial_state]
            inputs, initial_state = inputs[0], (list(inputs[1:]) or None)
        fwd_state = bwd_state = None
        if initial_state is not None:
            n = len(initial_state) // 2
            if len(initial_state) % 2:
                raise ValueError("When passing `initial_state` to a Bidirectional RNN, the state "
                                 "should be a list containing the states of the underlying "
                                 "RNNs. Received: %s" % (initial_state,))
            fwd_state, bwd_state = list(initial_state[:n]), list(initial_state[n:])
        if not self.built:
            x = _ops._t(inputs)
            if x.ndim >= 1:
                self.build(int(x.shape[-1]))
        y = self.forward_layer(inputs, mask=mask, training=training, initial_state=fwd_state)
        y_rev = self.backward_layer(inputs, mask=mask, training=training,
                                    initial_state=bwd_state)
        states = []
        if self.return_state:
            states = list(y[1:]) + list(y_rev[1:])
            y, y_rev = y[0], y_rev[0]
        if self.return_sequences:
            time_axis = 0 if self.forward_layer.time_major else 1
            y_rev = y_rev[::-1] if time_axis == 0 else y_rev[:, ::-1]
        if self.merge_mode == "concat":
            out = _ops.concat([y, y_rev], -1)
        elif self.merge_mode == "sum":
            out = _ops.add(y, y_rev)
        elif self.merge_mode == "ave":
            out = _ops.divide(_ops.add(y, y_rev), 2.0)
        elif self.merge_mode == "mul":
            out = _ops.multiply(y, y_rev)
        else:
            out = [y, y_rev]
        if self.return_state:
            return (out if self.merge_mode is None else [out]) + states
        return out
