"""Keras 2.11's regularization and augmentation layers that draw noise in
training, exported by ``vdev.layers``: ``SpatialDropout1D(rate)`` and
``SpatialDropout2D(rate)`` (Dropout whose mask drops whole channels: noise
shape [batch, 1, channels] and [batch, 1, 1, channels]), ``GaussianNoise(
stddev)`` (x + N(0, stddev)), ``GaussianDropout(rate)`` (x * N(1,
sqrt(rate / (1 - rate))), for 0 < rate < 1) and ``RandomFlip(mode)`` (each
image flipped left-right and/or up-down where a uniform draw is below 0.5,
as tf.image.random_flip_left_right). In inference they give their input;
RandomFlip, as Keras's (its call's ``training`` defaults to True), flips
when called alone and not when a model runs in inference. The draws are
vdev.random's, each call's seed _Draws's (vdev/_core_layers.py) from the
layer's ``seed``; the noise layers pass masks on, as Keras's. Keras's
config keys and checks in its words.
"""

import numpy as np

from . import _ops, image, random
from ._conv_layers import _channels_last, _check_rank
from ._core_layers import Dropout, _Draws, _Stateless, _resolve_training, _step, _training
from ._keras_masks import select

__all__ = ["GaussianDropout", "GaussianNoise", "RandomFlip", "SpatialDropout1D",
           "SpatialDropout2D"]


class SpatialDropout1D(Dropout):
    """Keras's SpatialDropout1D: one draw per channel of each example."""

    def __init__(self, rate, noise_shape=None, seed=None, name=None, trainable=True,
                 input_shape=None, dtype=None):
        # noise_shape: taken (Dropout's config has it) and unused, as Keras's
        super().__init__(rate, None, seed, name, trainable, input_shape, dtype)

    def _noise_shape(self, shape):
        _check_rank(self, tuple(shape), 3)
        return [shape[0], 1, shape[2]]


class SpatialDropout2D(Dropout):
    """Keras's SpatialDropout2D (channels_last): one draw per channel of
    each image."""

    def __init__(self, rate, data_format=None, noise_shape=None, seed=None, name=None,
                 trainable=True, input_shape=None, dtype=None):
        _channels_last(self, data_format)
        super().__init__(rate, None, seed, name, trainable, input_shape, dtype)
        self.data_format = "channels_last"

    def _noise_shape(self, shape):
        _check_rank(self, tuple(shape), 4)
        return [shape[0], 1, 1, shape[3]]


class _Noise(_Stateless):
    supports_masking = True  # Keras's

    def _input(self, inputs):
        from ._conv_layers import _float_input
        return _float_input(self._device, inputs)


class GaussianNoise(_Noise):
    """Keras's GaussianNoise: in training, x plus normal noise of mean 0
    and standard deviation ``stddev``."""

    def __init__(self, stddev, seed=None, name=None, trainable=True, input_shape=None,
                 dtype=None):
        super().__init__(name, trainable, input_shape, dtype)
        self.stddev, self.seed = stddev, seed
        self._draws = _Draws(seed, b"vdev.GaussianNoise")

    def get_config(self):
        return self._config(stddev=self.stddev, seed=self.seed)

    def __call__(self, inputs, training=None):
        x = self._input(inputs)
        if not _resolve_training(training):
            return x
        with _ops._near(x):
            noise = random.normal([int(d) for d in x.shape], 0.0, float(self.stddev),
                                  seed=self._draws.next())
        return _ops.add(x, noise)


class GaussianDropout(_Noise):
    """Keras's GaussianDropout: in training and for 0 < rate < 1, x times
    normal noise of mean 1 and standard deviation sqrt(rate / (1 - rate))."""

    def __init__(self, rate, seed=None, name=None, trainable=True, input_shape=None,
                 dtype=None):
        super().__init__(name, trainable, input_shape, dtype)
        self.rate, self.seed = rate, seed
        self._draws = _Draws(seed, b"vdev.GaussianDropout")

    def get_config(self):
        return self._config(rate=self.rate, seed=self.seed)

    def __call__(self, inputs, training=None):
        x = self._input(inputs)
        if not 0 < self.rate < 1 or not _resolve_training(training):
            return x
        stddev = float(np.sqrt(self.rate / (1.0 - self.rate)))
        with _ops._near(x):
            noise = random.normal([int(d) for d in x.shape], 1.0, stddev,
                                  seed=self._draws.next())
        return _ops.multiply(x, noise)


_MODES = {"horizontal": (True, False), "vertical": (False, True),
          "horizontal_and_vertical": (True, True)}


class RandomFlip(_Stateless):
    """Keras's RandomFlip: images [batch, height, width, channels] (or one
    [height, width, channels]) flipped at random in training."""

    def __init__(self, mode="horizontal_and_vertical", seed=None, name=None, trainable=True,
                 input_shape=None, dtype=None):
        super().__init__(name, trainable, input_shape, dtype)
        if mode not in _MODES:
            raise ValueError("RandomFlip layer %s received an unknown mode argument %s"
                             % (self.name, mode))
        self.mode, self.seed = mode, seed
        self.horizontal, self.vertical = _MODES[mode]
        self._draws = _Draws(seed, b"vdev.RandomFlip")

    def get_config(self):
        return self._config(mode=self.mode, seed=self.seed)

    def _flip(self, x, flip):
        """x flipped by ``flip`` where a uniform draw (one per image) is
        below 0.5."""
        batch = [int(x.shape[0]), 1, 1, 1] if x.ndim == 4 else [1, 1, 1]
        with _ops._near(x):
            u = random.uniform(batch, seed=self._draws.next())
            chosen = _step(_ops.subtract(0.5, u), strict=True)  # 1 where u < 0.5
        return select(chosen, flip(x), x)

    def __call__(self, inputs, training=None):
        from ._conv_layers import _float_input
        x = _float_input(self._device, inputs)
        if x.ndim not in (3, 4):
            raise ValueError("vdev's RandomFlip takes images of 3 or 4 dimensions, not %s"
                             % (tuple(x.shape),))
        if training is None and _training.get() is None:
            training = True  # Keras's call default
        if not _resolve_training(training):
            return x
        if self.horizontal:
            x = self._flip(x, image.flip_left_right)
        if self.vertical:
            x = self._flip(x, image.flip_up_down)
        return x
