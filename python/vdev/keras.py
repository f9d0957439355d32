"""``vdev.keras``: Keras's namespace over vdev's modules, so a program
written for ``tf.keras`` reads the same with ``import vdev as tf``:
``tf.keras.layers``, ``models``, ``optimizers`` (and
``optimizers.schedules``), ``losses``, ``metrics``, ``callbacks``, ``activations``,
``initializers``, ``utils``, ``preprocessing.sequence.pad_sequences``,
``Input``, ``Model`` and ``Sequential``. Each name is vdev's own object
(``tf.keras.layers is vdev.layers``); what vdev lacks is missing here
too (an AttributeError), not a stand-in.
"""

import types

from . import (activations, callbacks, initializers, layers, losses, metrics, models,
               optimizers, utils)
from ._functional import Input
from .models import Model, Sequential

__all__ = ["Input", "Model", "Sequential", "activations", "callbacks", "initializers",
           "layers", "losses", "metrics", "models", "optimizers", "preprocessing", "utils"]

# tf.keras.preprocessing.sequence.pad_sequences (Keras's older home of it)
preprocessing = types.SimpleNamespace(sequence=types.SimpleNamespace(
    pad_sequences=utils.pad_sequences))
