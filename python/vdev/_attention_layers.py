"""Keras 2.11's ``MultiHeadAttention`` over [batch, steps, features] inputs,
exported by ``vdev.layers``: the query, key and value projected per head,
scaled dot-product attention, and the heads projected back, as Keras's
layer computes it (its default attention axes):

  q = query W_q + b_q   [B, T, H, key_dim]   (W_q [dim_q, H, key_dim])
  k = key W_k + b_k     [B, S, H, key_dim]   (key defaults to value)
  v = value W_v + b_v   [B, S, H, value_dim]
  scores = (q / sqrt(key_dim)) k^T per head [B, H, T, S]
  probs = softmax(scores + (1 - mask) * -1e9) over S (no mask: plain)
  out = (probs v, the heads side by side) W_o + b_o   [B, T, dim_out]

Each projection is one MatMul of the input viewed as rows against the kernel
viewed as a matrix (Reshape views), the per-head products one BatchMatMulV2
op each (vdev_batch_matmul); so the tape differentiates it and every backend runs it with kernels
already tested. The weights, Keras's names, shapes and order:
NAME/query/kernel [dim_q, H, key_dim] and /bias [H, key_dim], likewise key
and value (value_dim), NAME/attention_output/kernel [H, value_dim, dim_out]
and /bias [dim_out], made at the first call (on the layer's device, mirrored
under a strategy's scope), or when a functional model is built on it, each
kernel drawn with its own seed derived from the layer's. attention_mask
([B, T, S], 1 keeps) and use_causal_mask (step t sees steps up to t) as
Keras's, and so are the query's, value's and key's own masks
(vdev/_keras_masks.py: the query's on its steps, the others' on theirs), the
output keeping the query's; return_attention_scores gives (output, probs). ``dropout`` is
Keras's: in training, the probabilities times 1 / (1 - rate) and a mask
(tf.nn.dropout's) before the product with v, the scores returned being the
probabilities before it; each call's seed is _Draws's (vdev/_core_layers.py)
from the layer's seed. In a functional model, ``layer(query, value)``
records both inputs. What vdev has not is a ValueError naming it:
attention_axes other than the default, inputs of another rank, regularizers
and constraints.
"""

import contextlib
import math
import numbers

import numpy as np

from . import _functional, _ops, _strategy_context, initializers, random
from ._conv_layers import _base, _float32_only, _float_input, _none_only
from ._core_layers import _Draws, _check_rate, _keep, _resolve_training
from ._keras_masks import mask_of
from ._device import current_device, device
from ._recurrent_layers import _derived_seed

__all__ = ["MultiHeadAttention"]

_PARTS = ("query", "key", "value", "attention_output")


class MultiHeadAttention(_base()):
    """Keras's MultiHeadAttention (3-D inputs, the default attention axes)."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 output_shape=None, attention_axes=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 seed=None, name=None, dtype=None, trainable=True):
        _none_only("MultiHeadAttention", kernel_regularizer=kernel_regularizer,
                   bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                   kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real):
            raise ValueError("vdev's MultiHeadAttention takes a number for `dropout`, not %r"
                             % (dropout,))
        if not 0 <= dropout <= 1:  # Keras's Dropout layer's check, made at build there
            raise ValueError("Invalid value %s received for `rate`, expected a value between 0 "
                             "and 1." % (dropout,))
        if attention_axes is not None and tuple(np.atleast_1d(attention_axes)) not in ((1,), (-2,)):
            raise ValueError("vdev's MultiHeadAttention attends over the steps of [batch, steps, "
                             "features] inputs (attention_axes None), not %r" % (attention_axes,))
        _float32_only(self, dtype)
        super().__init__(name, trainable)
        for arg, x in (("num_heads", num_heads), ("key_dim", key_dim),
                       ("value_dim", key_dim if value_dim is None else value_dim)):
            if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x <= 0:
                raise ValueError("vdev's MultiHeadAttention takes a positive int %s, not %r"
                                 % (arg, x))
        self.num_heads, self.key_dim = int(num_heads), int(key_dim)
        self.value_dim = self.key_dim if value_dim is None else int(value_dim)
        self.dropout = float(dropout)
        self.use_bias = bool(use_bias)
        if output_shape is not None and not isinstance(output_shape, numbers.Integral):
            shape = tuple(output_shape)
            if len(shape) != 1:
                raise ValueError("vdev's MultiHeadAttention takes an output_shape of one size "
                                 "(the output's features), not %r" % (output_shape,))
            output_shape = shape[0]
        self._output_dim = None if output_shape is None else int(output_shape)
        self.attention_axes = attention_axes
        self.seed = random._seed(seed)
        self._draws = _Draws(_derived_seed(b"vdev.MultiHeadAttention.dropout:", self.seed),
                             b"vdev.MultiHeadAttention.dropout")
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        from .layers import _bias_seed
        self._inits = {}
        for part in _PARTS:  # each kernel its own draw (Keras clones the initializer)
            s = _derived_seed(b"vdev.MultiHeadAttention.%s:" % part.encode(), self.seed)
            self._inits[part] = (initializers._get(kernel_initializer, s),
                                 initializers._get(bias_initializer, _bias_seed(s)))
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self._weights = None

    @property
    def built(self):
        return self._weights is not None

    def build(self, query_dim, value_dim, key_dim=None):
        """Makes the eight weights (four without biases), all or none."""
        from .layers import _adopt, _initial
        if self._weights is not None:
            return
        if _strategy_context.replica() is not None:
            raise _strategy_context.variable_in_step_error(
                "layer %r is built" % self.name, "Call it once before the step")
        key_dim = value_dim if key_dim is None else key_dim
        h = self.num_heads
        out_dim = self._output_dim or query_dim
        shapes = {"query": ((query_dim, h, self.key_dim), (h, self.key_dim)),
                  "key": ((key_dim, h, self.key_dim), (h, self.key_dim)),
                  "value": ((value_dim, h, self.value_dim), (h, self.value_dim)),
                  "attention_output": ((h, self.value_dim, out_dim), (out_dim,))}
        where = self._device or ("CPU:0" if self._strategy is not None else None)
        made = {}
        with device(where) if where else contextlib.nullcontext():
            for part in _PARTS:
                kinit, binit = self._inits[part]
                kshape, bshape = shapes[part]
                kv = _adopt(_initial(kinit, kshape), self._strategy)
                kv.name = "%s/%s/kernel" % (self.name, part)
                bv = None
                if self.use_bias:
                    bv = _adopt(_initial(binit, bshape), self._strategy)
                    bv.name = "%s/%s/bias" % (self.name, part)
                made[part] = (kv, bv)
        self._weights = made
        self._variables = [v for part in _PARTS for v in made[part] if v is not None]

    def compute_output_shape(self, input_shape):
        """Keras's: the query's shape with the output's features last."""
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        q = tuple(shapes[0])
        return q[:-1] + (self._output_dim or q[-1],)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "num_heads": self.num_heads, "key_dim": self.key_dim,
                "value_dim": self.value_dim, "dropout": self.dropout, "use_bias": self.use_bias,
                "output_shape": self._output_dim, "attention_axes": self.attention_axes,
                "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "kernel_regularizer": None, "bias_regularizer": None,
                "activity_regularizer": None, "kernel_constraint": None,
                "bias_constraint": None}

    def _project(self, x, part, heads_out=True):
        """x [B, T, d] through part's kernel: [B, T, H, dim] (heads_out), or
        for the output x [B, T, H, dv] to [B, T, dim_out]."""
        kernel, bias = self._weights[part]
        ks = tuple(int(d) for d in kernel.shape)
        b, t = int(x.shape[0]), int(x.shape[1])
        if heads_out:
            rows = _ops.reshape(x, [b * t, ks[0]])
            y = _ops.matmul(rows, _ops.reshape(kernel, [ks[0], ks[1] * ks[2]]))
            if bias is not None:
                y = _ops.add(y, _ops.reshape(bias, [ks[1] * ks[2]]))
            return _ops.reshape(y, [b, t, ks[1], ks[2]])
        rows = _ops.reshape(x, [b * t, ks[0] * ks[1]])
        y = _ops.matmul(rows, _ops.reshape(kernel, [ks[0] * ks[1], ks[2]]))
        if bias is not None:
            y = _ops.add(y, bias)
        return _ops.reshape(y, [b, t, ks[2]])

    def __call__(self, query, value=None, key=None, attention_mask=None,
                 return_attention_scores=False, training=None, use_causal_mask=False):
        if isinstance(query, (list, tuple)) and value is None:  # a functional model's call
            query, value, key = (list(query) + [None])[:3]
        if value is None:
            raise ValueError("vdev's MultiHeadAttention takes query and value")
        parts = [query, value] + ([key] if key is not None else [])
        if _functional.is_symbolic(parts):
            shapes = [tuple(t.shape) for t in parts]
            if not self.built:
                self.build(*(int(s[-1]) for s in shapes))
            kwargs = {"return_attention_scores": return_attention_scores,
                      "use_causal_mask": use_causal_mask}
            if attention_mask is not None or return_attention_scores:
                raise ValueError("vdev's MultiHeadAttention in a functional model takes "
                                 "use_causal_mask, not attention_mask or "
                                 "return_attention_scores (call it on tensors for those)")
            return _functional.symbolic_call(self, parts, (), kwargs)
        auto = [mask_of(t) for t in (query, value, key)]  # Keras's masks of the inputs
        q = _float_input(self._device, query)
        v = _float_input(self._device, value)
        k = v if key is None else _float_input(self._device, key)
        for t, what in ((q, "query"), (v, "value"), (k, "key")):
            if t.ndim != 3:
                raise ValueError("vdev's MultiHeadAttention takes a %s of 3 dimensions [batch, "
                                 "steps, features], not %s" % (what, tuple(t.shape)))
        if not self.built:
            self.build(int(q.shape[-1]), int(v.shape[-1]), int(k.shape[-1]))
        qh = self._project(q, "query")  # [B, T, H, kd]
        kh = self._project(k, "key")  # [B, S, H, kd]
        vh = self._project(v, "value")  # [B, S, H, vd]
        qh = _ops.multiply(qh, 1.0 / math.sqrt(float(self.key_dim)))
        qh, kh, vh = (_ops.transpose(x, (0, 2, 1, 3)) for x in (qh, kh, vh))
        scores = _ops.matmul(qh, kh, transpose_b=True)  # [B, H, T, S]
        mask = self._mask(attention_mask, use_causal_mask, scores, auto)
        if mask is not None:
            scores = _ops.add(scores, _ops.multiply(_ops.subtract(1.0, mask), -1e9))
        probs = _ops.softmax(scores)
        dropped = self._drop(probs, training)
        out = _ops.transpose(_ops.matmul(dropped, vh), (0, 2, 1, 3))  # [B, T, H, vd]
        out = self._project(out, "attention_output", heads_out=False)
        if auto[0] is not None:  # Keras's compute_mask: the query's
            out._keras_mask = auto[0]
        return (out, probs) if return_attention_scores else out

    # query and value both symbolic: recorded here, as one list (the base's
    # wrapper would record the query alone)
    __call__._vdev_symbolic = True

    def _drop(self, probs, training):
        """Keras's dropout of the probabilities (its Dropout layer's:
        tf.nn.dropout), in training with a nonzero rate."""
        if not _resolve_training(training) or self.dropout == 0:
            return probs
        _check_rate(self.dropout)
        keep = _keep(probs, [int(d) for d in probs.shape], self.dropout, self._draws.next())
        return _ops.multiply(_ops.multiply(probs, 1.0 / (1.0 - self.dropout)), keep)

    def _mask(self, attention_mask, causal, scores, auto=(None, None, None)):
        """The mask [B, 1, T, S] (1 keeps), or None: Keras's
        _compute_attention_mask, attention_mask and the inputs' masks
        (the query's [B, T], the value's and key's [B, S]) and the causal
        one all keeping."""
        b, _, t, s = (int(d) for d in scores.shape)
        m = None
        q_mask, v_mask, k_mask = (None if a is None else a.numpy() != 0 for a in auto)
        if q_mask is not None:
            m = q_mask[:, :, None].astype(np.float32)
        for other in (v_mask, k_mask):
            if other is not None:
                o = other[:, None, :].astype(np.float32)
                m = o if m is None else m * o
        if m is not None:
            m = np.broadcast_to(m, (b, t, s))
        if attention_mask is not None:
            given = (np.asarray(attention_mask.numpy() if hasattr(attention_mask, "numpy")
                                else attention_mask) != 0).astype(np.float32)  # Keras's bool cast
            if given.shape != (b, t, s):
                raise ValueError("vdev's MultiHeadAttention takes an attention_mask of shape "
                                 "[batch, query steps, key steps] = %s, not %s"
                                 % ((b, t, s), given.shape))
            m = given if m is None else m * given
        if causal:
            tri = np.tril(np.ones((t, s), np.float32))
            m = tri[None] if m is None else m * tri[None]
        if m is None:
            return None
        with _ops._near(scores):
            return _ops.constant(m.reshape(m.shape[0], 1, t, s))
