"""Keras 2.11's dot-product and additive attention layers, exported by
``vdev.layers``: ``Attention(use_scale=False, score_mode="dot", dropout=0.0)``
(Luong's) and ``AdditiveAttention(use_scale=True, dropout=0.0)``
(Bahdanau's), called on ``[query, value]`` or ``[query, value, key]``
([batch, Tq, dim], [batch, Tv, dim]; the key defaults to the value), as
Keras's BaseDenseAttention computes them:

  Attention, dot      scores = scale * (query key^T)                [B, Tq, Tv]
  Attention, concat   scores = w * sum(tanh(scale * (q_i + k_j)))   over dim
  AdditiveAttention   scores = sum(scale * tanh(q_i + k_j))         over dim
  weights = softmax(scores - 1e9 * (1 - mask)) over Tv
  result  = weights value (times the query's mask)                  [B, Tq, dim]

The mask is the value's ([B, Tv]) and the causal one (use_causal_mask: step
i sees steps up to i), both keeping; the query's mask zeroes the result's
masked steps and is the output's mask. The masks are the inputs' own (Keras's
masks, vdev/_keras_masks.py) or ``mask=[query_mask, value_mask]``. Weights,
Keras's names, made at the first call or when a functional model is made on
the layer: Attention's ``scale`` (use_scale) and ``concat_score_weight``
(score_mode "concat"), scalars of 1; AdditiveAttention's ``scale`` [dim]
(glorot_uniform, drawn with the layer's seed). ``dropout`` drops the
weights in training (tf.nn.dropout; _Draws's seeds), the scores returned
(return_attention_scores) being the weights before it. Each piece is one of
vdev's ops (the products BatchMatMulV2), so the tape differentiates it on
every backend.
"""

import contextlib
import numbers

from . import _ops, _strategy_context, initializers, random
from ._conv_layers import _base, _float32_only, _float_input
from ._core_layers import _Draws, _check_rate, _keep, _resolve_training
from ._device import current_device, device
from ._keras_masks import as_mask, masked_call

__all__ = ["AdditiveAttention", "Attention"]


class _DenseAttention(_base()):
    """Keras's BaseDenseAttention: the masks, the softmax, the dropout;
    the subclasses give the scores and the weights."""

    supports_masking = True  # Keras's (compute_mask below)
    _expects_mask = True

    def __init__(self, dropout=0.0, seed=None, name=None, dtype=None, trainable=True):
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real):
            raise ValueError("vdev's %s takes a number for `dropout`, not %r"
                             % (type(self).__name__, dropout))
        _float32_only(self, dtype)
        super().__init__(name, trainable)
        self.dropout = float(dropout)
        self.seed = random._seed(seed)
        self._draws = _Draws(self.seed, b"vdev.%s.dropout" % type(self).__name__.encode())
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self._weights_made = False

    @property
    def built(self):
        return self._weights_made

    def _make(self, wanted):
        """The weights (name, initializer, shape), all or none, on the
        layer's device (mirrored under its strategy)."""
        from .layers import _adopt, _initial
        if _strategy_context.replica() is not None:
            raise _strategy_context.variable_in_step_error(
                "layer %r is built" % self.name, "Call it once before the step")
        where = self._device or ("CPU:0" if self._strategy is not None else None)
        made = []
        with device(where) if where else contextlib.nullcontext():
            for name, init, shape in wanted:
                v = _adopt(_initial(init, shape), self._strategy)
                v.name = "%s/%s" % (self.name, name)
                made.append(v)
        self._variables = made
        self._weights_made = True
        return made

    def _check_call(self, inputs, mask):
        """Keras's _validate_call_args, in its words."""
        cls = type(self).__name__
        if not isinstance(inputs, list):
            raise ValueError("%s layer must be called on a list of inputs, namely [query, value] "
                             "or [query, value, key]. Received: %s." % (cls, inputs))
        if len(inputs) < 2 or len(inputs) > 3:
            raise ValueError("%s layer accepts inputs list of length 2 or 3, namely [query, "
                             "value] or [query, value, key]. Received length: %d."
                             % (cls, len(inputs)))
        if mask:
            if not isinstance(mask, list):
                raise ValueError("%s layer mask must be a list, namely [query_mask, "
                                 "value_mask]. Received: %s." % (cls, mask))
            if len(mask) < 2 or len(mask) > len(inputs):
                raise ValueError("%s layer mask must be a list of length 2, namely "
                                 "[query_mask, value_mask]. Received length: %d."
                                 % (cls, len(mask)))

    def compute_mask(self, inputs, mask=None):
        """Keras's: the query's mask."""
        self._check_call(list(inputs) if isinstance(inputs, tuple) else inputs, mask)
        return mask[0] if mask else None

    def compute_output_shape(self, input_shape):
        """The query's shape with the value's last size (the layer built,
        as Keras builds it when a functional model is made on it)."""
        shapes = [tuple(s) for s in input_shape]
        if not self.built and shapes[1][-1] is not None:
            self.build(shapes)
        return shapes[0][:-1] + shapes[1][-1:]

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "dropout": self.dropout}

    def __call__(self, inputs, mask=None, training=None, return_attention_scores=False,
                 use_causal_mask=False):
        from . import _functional
        kwargs = {"mask": mask, "training": training, "use_causal_mask": use_causal_mask}
        if _functional.is_symbolic(inputs):
            if return_attention_scores or mask is not None:
                raise ValueError("vdev's %s in a functional model takes use_causal_mask and "
                                 "training, not return_attention_scores or mask= (the inputs' "
                                 "own masks apply; call it on tensors for those)"
                                 % type(self).__name__)
            return _functional.symbolic_call(self, inputs, (), {
                k: v for k, v in kwargs.items() if k != "mask" and v})
        kwargs["return_attention_scores"] = return_attention_scores
        return masked_call(_DenseAttention._call, self, inputs, (), kwargs)

    __call__._vdev_symbolic = True  # functional calls recorded above

    def _call(self, inputs, mask=None, training=None, return_attention_scores=False,
              use_causal_mask=False):
        if isinstance(inputs, tuple):
            inputs = list(inputs)
        self._check_call(inputs, mask)
        q, v = (_float_input(self._device, t) for t in inputs[:2])
        k = _float_input(self._device, inputs[2]) if len(inputs) > 2 else v
        for t, what in ((q, "query"), (v, "value"), (k, "key")):
            if t.ndim != 3:
                raise ValueError("vdev's %s takes a %s of 3 dimensions [batch, steps, dim], not "
                                 "%s" % (type(self).__name__, what, tuple(t.shape)))
        if not self.built:
            self.build([tuple(t.shape) for t in (q, v)])
        scores = self._scores(q, k)  # [B, Tq, Tv]
        b, tq, tv = (int(d) for d in scores.shape)
        q_mask = mask[0] if mask else None
        v_mask = mask[1] if mask else None
        keep = None
        if v_mask is not None:
            keep = _ops.reshape(as_mask(v_mask, scores, (b, tv)), [b, 1, tv])
        if use_causal_mask:
            import numpy as np
            with _ops._near(scores):
                tri = _ops.constant(np.tril(np.ones((1, tq, tv), np.float32)))
            keep = tri if keep is None else _ops.multiply(keep, tri)
        if keep is not None:  # Keras's: scores - 1e9 where not kept
            scores = _ops.subtract(scores, _ops.multiply(_ops.subtract(1.0, keep), 1.0e9))
        weights = _ops.softmax(scores)
        used = weights
        if self.dropout > 0 and _resolve_training(training):
            _check_rate(self.dropout)
            drop = _keep(weights, [b, tq, tv], self.dropout, self._draws.next())
            used = _ops.multiply(_ops.multiply(weights, 1.0 / (1.0 - self.dropout)), drop)
        result = _ops.matmul(used, v)
        if q_mask is not None:
            result = _ops.multiply(result, _ops.reshape(as_mask(q_mask, result, (b, tq)),
                                                        [b, tq, 1]))
        return (result, weights) if return_attention_scores else result

    def _expand(self, q, k):
        """q [B, Tq, 1, dim] + k [B, 1, Tv, dim]: [B, Tq, Tv, dim]."""
        b, tq, d = (int(x) for x in q.shape)
        tv = int(k.shape[1])
        return _ops.add(_ops.reshape(q, [b, tq, 1, d]), _ops.reshape(k, [b, 1, tv, d]))


class Attention(_DenseAttention):
    """Keras's Attention (Luong-style): dot-product or "concat" scores."""

    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None, name=None,
                 dtype=None, trainable=True):
        if score_mode not in ("dot", "concat"):
            raise ValueError('Received: score_mode=%s. Acceptable values are: ["dot", "concat"]'
                             % (score_mode,))
        super().__init__(dropout, seed, name, dtype, trainable)
        self.use_scale = bool(use_scale)
        self.score_mode = score_mode
        self.scale = self.concat_score_weight = None

    def build(self, input_shape):
        """Keras's weights: scale and concat_score_weight, scalars of 1."""
        if self.built:
            return
        wanted = []
        if self.use_scale:
            wanted.append(("scale", initializers.Ones(), ()))
        if self.score_mode == "concat":
            wanted.append(("concat_score_weight", initializers.Ones(), ()))
        made = iter(self._make(wanted))
        self.scale = next(made) if self.use_scale else None
        self.concat_score_weight = next(made) if self.score_mode == "concat" else None

    def _scores(self, q, k):
        if self.score_mode == "dot":
            scores = _ops.matmul(q, k, transpose_b=True)
            return _ops.multiply(scores, self.scale) if self.scale is not None else scores
        s = self._expand(q, k)
        if self.scale is not None:
            s = _ops.multiply(self.scale, s)
        return _ops.multiply(self.concat_score_weight,
                             _ops.reduce_sum(_ops.tanh(s), axis=-1))

    def get_config(self):
        return dict(super().get_config(), use_scale=self.use_scale, score_mode=self.score_mode)


class AdditiveAttention(_DenseAttention):
    """Keras's AdditiveAttention (Bahdanau-style): sum(scale * tanh(q + k))."""

    def __init__(self, use_scale=True, dropout=0.0, seed=None, name=None, dtype=None,
                 trainable=True):
        super().__init__(dropout, seed, name, dtype, trainable)
        self.use_scale = bool(use_scale)
        self.scale = None

    def build(self, input_shape):
        """Keras's weight: scale [the value's dim], glorot_uniform."""
        if self.built:
            return
        dim = int(tuple(input_shape[1])[-1])
        wanted = ([("scale", initializers._get("glorot_uniform", self.seed), (dim,))]
                  if self.use_scale else [])
        made = self._make(wanted)
        self.scale = made[0] if made else None

    def _scores(self, q, k):
        t = _ops.tanh(self._expand(q, k))
        if self.scale is not None:
            t = _ops.multiply(self.scale, t)
        return _ops.reduce_sum(t, axis=-1)

    def get_config(self):
        return dict(super().get_config(), use_scale=self.use_scale)
