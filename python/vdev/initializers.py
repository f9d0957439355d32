"""Initializers, as ``tf.keras.initializers``: the classes (``Zeros``,
``Ones``, ``Constant``, ``RandomNormal``, ``RandomUniform``,
``TruncatedNormal``, ``VarianceScaling`` and its Glorot, He and LeCun forms,
``Orthogonal``)
with Keras's arguments, ``get_config``/``from_config``, and ``get``, which
takes Keras's string names ('glorot_uniform', 'he_normal', ..., and its
older 'uniform', 'normal', 'one' and 'zero'), Keras's serialized dict
({'class_name': 'GlorotUniform', 'config': {'seed': 1}}), an initializer,
or a callable ``f(shape, dtype=None)``. Keras's fan_in/fan_out:
a 2-D shape [in, out] gives fan_in = in, fan_out = out; a 1-D shape [n]
gives both n. The numbers come from vdev's counter-based generator (the same
for a seed on every device), not TensorFlow's. The truncated normal
(TruncatedNormal and the "normal" VarianceScaling, as Keras's, cut at two
standard deviations) draws normals and redraws those out of range with the
following seeds, on the host. As in Keras, the lower-case names (``zeros``,
``ones``, ``constant``, ``random_uniform``, ``glorot_uniform``, ...) are the
classes.
"""

import math

import numpy as np

from . import random
from ._tensor import constant as _constant, fill as _fill, float32, ones as _ones, zeros as _zeros

__all__ = ["Constant", "GlorotNormal", "GlorotUniform", "HeNormal", "HeUniform", "Initializer",
           "LecunNormal", "LecunUniform", "Ones", "Orthogonal", "RandomNormal", "RandomUniform",
           "TruncatedNormal", "VarianceScaling", "Zeros", "constant", "deserialize", "get",
           "glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "lecun_normal",
           "lecun_uniform", "ones", "orthogonal", "random_normal", "random_uniform", "serialize",
           "truncated_normal", "variance_scaling", "zeros"]


def _fans(shape):
    shape = tuple(int(d) for d in shape)
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    field = 1
    for d in shape[:-2]:
        field *= d
    return shape[-2] * field, shape[-1] * field


def _truncated(shape, mean, stddev, seed):
    """Normal(mean, stddev) cut at two standard deviations: each value out of
    range is drawn again, with the next seed."""
    s = random._seed(seed)
    out = random.normal(shape, 0.0, 1.0, seed=s).numpy()
    k = 1
    bad = np.abs(out) > 2
    while bad.any():
        more = random.normal(shape, 0.0, 1.0, seed=(s + k) & (2**64 - 1)).numpy()
        out[bad] = more[bad]
        bad = np.abs(out) > 2
        k += 1
    return _constant(np.asarray(out * stddev + mean, np.float32))


class Initializer:
    """The base: ``init(shape, dtype=None)`` gives a float32 tensor."""

    def __call__(self, shape, dtype=None):
        raise NotImplementedError

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        """The initializer of a get_config() dict, as Keras's: cls(**config)
        (a "dtype" key, which Keras 2's configs may carry, dropped)."""
        config = dict(config)
        config.pop("dtype", None)
        return cls(**config)


def _float(dtype):
    if dtype is not None and dtype not in ("float32", float32):
        raise TypeError("vdev initializers make float32 tensors, not %s" % (dtype,))


class Zeros(Initializer):
    """Tensors of zeros."""

    def __call__(self, shape, dtype=None):
        _float(dtype)
        return _zeros(tuple(shape))


class Ones(Initializer):
    """Tensors of ones."""

    def __call__(self, shape, dtype=None):
        _float(dtype)
        return _ones(tuple(shape))


class Constant(Initializer):
    """Tensors filled with ``value``."""

    def __init__(self, value=0):
        self.value = value

    def __call__(self, shape, dtype=None):
        _float(dtype)
        return _fill(tuple(shape), float(self.value))

    def get_config(self):
        return {"value": self.value}


class RandomUniform(Initializer):
    """Uniform in [minval, maxval), drawn with ``seed`` (None: vdev.random's)."""

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def __call__(self, shape, dtype=None):
        _float(dtype)
        return random.uniform(tuple(shape), self.minval, self.maxval, seed=self.seed)

    def get_config(self):
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed}


class RandomNormal(Initializer):
    """Normal with that mean and standard deviation, drawn with ``seed``."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape, dtype=None):
        _float(dtype)
        return random.normal(tuple(shape), self.mean, self.stddev, seed=self.seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed}


class TruncatedNormal(RandomNormal):
    """Normal with that mean and standard deviation, values beyond two
    standard deviations drawn again, as Keras's."""

    def __call__(self, shape, dtype=None):
        _float(dtype)
        return _truncated(tuple(shape), self.mean, self.stddev, self.seed)


class VarianceScaling(Initializer):
    """Keras's: ``scale`` divided by the fan (``mode``: 'fan_in', 'fan_out',
    'fan_avg') is the variance of a truncated normal, a normal or a uniform
    (``distribution``) draw."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None):
        if scale <= 0.0:
            raise ValueError("`scale` must be positive float. Received: scale=%s." % (scale,))
        if mode not in {"fan_in", "fan_out", "fan_avg"}:
            raise ValueError("Invalid `mode` argument: %s. Please use one of the "
                             "{'fan_in', 'fan_out', 'fan_avg'}." % (mode,))
        distribution = distribution.lower()
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in {"uniform", "truncated_normal", "untruncated_normal"}:
            raise ValueError("Invalid `distribution` argument: %s.Allowed distributions: "
                             "{'uniform', 'truncated_normal', 'untruncated_normal'}."
                             % (distribution,))
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed

    def __call__(self, shape, dtype=None):
        _float(dtype)
        shape = tuple(shape)
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}
        scale = self.scale / max(1.0, n[self.mode])
        if self.distribution == "truncated_normal":
            # the stddev of a unit normal cut at +-2
            return _truncated(shape, 0.0, math.sqrt(scale) / 0.87962566103423978, self.seed)
        if self.distribution == "untruncated_normal":
            return random.normal(shape, 0.0, math.sqrt(scale), seed=self.seed)
        # 3 scale / n in one division: Glorot's limit is sqrt(6 / (in + out)) exactly
        limit = math.sqrt(3.0 * self.scale / max(1.0, n[self.mode]))
        return random.uniform(shape, -limit, limit, seed=self.seed)

    def get_config(self):
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed}


class Orthogonal(Initializer):
    """Keras's Orthogonal: a normal draw of shape (max(rows, cols),
    min(rows, cols)) (rows the product of all dimensions but the last),
    its QR factorization's Q with each column's sign made that of R's
    diagonal (unique, so uniformly distributed), transposed when rows <
    cols, times ``gain``, reshaped. The factorization runs on the host in
    double (NumPy's), the result rounded to float32."""

    def __init__(self, gain=1.0, seed=None):
        self.gain, self.seed = gain, seed

    def __call__(self, shape, dtype=None):
        _float(dtype)
        shape = tuple(int(d) for d in shape)
        if len(shape) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional. "
                             "Received: shape=%s of rank %d." % (shape, len(shape)))
        rows = 1
        for d in shape[:-1]:
            rows *= d
        cols = shape[-1]
        a = random.normal((max(rows, cols), min(rows, cols)), 0.0, 1.0,
                          seed=self.seed).numpy().astype(np.float64)
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        return _constant(np.asarray(self.gain * q.reshape(shape), np.float32))

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed}


def _vs(name, scale, mode, distribution):
    def __init__(self, seed=None):
        VarianceScaling.__init__(self, scale, mode, distribution, seed)

    def get_config(self):
        return {"seed": self.seed}
    doc = ("Keras's %s: VarianceScaling(scale=%s, mode=%r, distribution=%r) with ``seed``."
           % (name, scale, mode, distribution))
    return type(name, (VarianceScaling,), {"__init__": __init__, "get_config": get_config,
                                           "__doc__": doc})


GlorotUniform = _vs("GlorotUniform", 1.0, "fan_avg", "uniform")
GlorotNormal = _vs("GlorotNormal", 1.0, "fan_avg", "truncated_normal")
HeNormal = _vs("HeNormal", 2.0, "fan_in", "truncated_normal")
HeUniform = _vs("HeUniform", 2.0, "fan_in", "uniform")
LecunNormal = _vs("LecunNormal", 1.0, "fan_in", "truncated_normal")
LecunUniform = _vs("LecunUniform", 1.0, "fan_in", "uniform")

_NAMES = {
    "zeros": Zeros, "ones": Ones, "constant": Constant,
    "random_normal": RandomNormal, "random_uniform": RandomUniform,
    "truncated_normal": TruncatedNormal, "variance_scaling": VarianceScaling,
    "glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal,
    "he_normal": HeNormal, "he_uniform": HeUniform,
    "lecun_normal": LecunNormal, "lecun_uniform": LecunUniform, "orthogonal": Orthogonal,
}
for _c in list(_NAMES.values()):
    _NAMES[_c.__name__] = _c
# Keras's older names, which its get and deserialize still take ('uniform' is
# the default initializer of Keras's Embedding)
_NAMES.update(uniform=RandomUniform, normal=RandomNormal, one=Ones, zero=Zeros)


def _get(identifier, seed):
    """get(), with a string's initializer given the seed (a Dense layer's)."""
    if isinstance(identifier, str) and identifier in _NAMES:
        c = _NAMES[identifier]
        try:
            return c(seed=seed)
        except TypeError:  # Zeros, Ones, Constant: no seed
            return c()
    return get(identifier)


def _unknown(name):
    return ValueError("Unknown initializer: '%s'. Please ensure you are using a "
                      "`keras.utils.custom_object_scope` and that this object is included in "
                      "the scope. See https://www.tensorflow.org/guide/keras/save_and_serialize"
                      "#registering_the_custom_object for details." % (name,))


def deserialize(config, custom_objects=None):
    """An initializer from Keras's serialized form: its name, or
    {'class_name': 'GlorotUniform', 'config': {'seed': 1}} (the class's
    from_config of that config), as Keras's deserialize."""
    custom_objects = custom_objects or {}
    if isinstance(config, str):
        c = custom_objects.get(config) or _NAMES.get(config)
        if c is None:
            raise _unknown(config)
        return c() if isinstance(c, type) else c
    if not isinstance(config, dict) or "class_name" not in config or "config" not in config:
        raise ValueError("Improper config format for %s. Expecting python dict contains "
                         "`class_name` and `config` as keys" % (config,))
    name = config["class_name"]
    c = custom_objects.get(name) or _NAMES.get(name)
    if c is None:
        raise _unknown(name)
    if hasattr(c, "from_config"):
        return c.from_config(config["config"])
    return c(**config["config"])


def serialize(initializer):
    """Keras's serialized form: {'class_name': ..., 'config': get_config()}."""
    return {"class_name": type(initializer).__name__, "config": initializer.get_config()}


def get(identifier):
    """An initializer, as Keras's get: None gives None; a dict is
    deserialized ({'class_name': ..., 'config': {...}}); a string is Keras's
    name (its snake_case or class name); a class is made with no arguments;
    another callable is kept. An unknown name is Keras's "Unknown
    initializer" ValueError; any other value "Could not interpret initializer
    identifier"."""
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        return deserialize({"class_name": identifier, "config": {}})
    if callable(identifier):
        return identifier() if isinstance(identifier, type) else identifier
    raise ValueError("Could not interpret initializer identifier: %s" % (identifier,))

# the lower-case aliases Keras exports (tf.keras.initializers.glorot_uniform,
# tf.keras.initializers.zeros...): the classes
zeros, ones, constant, variance_scaling = Zeros, Ones, Constant, VarianceScaling
glorot_uniform, glorot_normal = GlorotUniform, GlorotNormal
he_normal, he_uniform, lecun_normal, lecun_uniform = HeNormal, HeUniform, LecunNormal, LecunUniform
orthogonal = Orthogonal
random_normal, random_uniform, truncated_normal = RandomNormal, RandomUniform, TruncatedNormal
