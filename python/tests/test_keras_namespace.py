"""vdev.keras: tf.keras's names over vdev's own modules, so a tf.keras
program runs with `import vdev as tf`; a name vdev lacks is an
AttributeError, not a stand-in."""
import numpy as np
import pytest

import vdev
import vdev as tf


def test_names_are_vdevs_own():
    assert tf.keras.layers is vdev.layers and tf.keras.models is vdev.models
    assert tf.keras.optimizers.schedules.ExponentialDecay is \
        vdev.optimizers.schedules.ExponentialDecay
    assert tf.keras.Sequential is vdev.models.Sequential and tf.keras.Input is vdev.Input
    assert tf.keras.Model is vdev.Model
    assert tf.keras.preprocessing.sequence.pad_sequences is vdev.utils.pad_sequences
    assert tf.keras.metrics.AUC is vdev.metrics.AUC
    with pytest.raises(AttributeError):
        tf.keras.mixed_precision


def test_a_tf_keras_program():
    x = np.random.default_rng(1).uniform(-1, 1, (64, 3)).astype(np.float32)
    y = (x.sum(1) > 0).astype(np.int32)
    with tf.device("/GPU:1"):
        model = tf.keras.Sequential([
            tf.keras.layers.Dense(16, activation="relu", input_shape=(3,)),
            tf.keras.layers.Dropout(0.1),
            tf.keras.layers.Dense(2)])
        model.compile(optimizer=tf.keras.optimizers.Adam(
            tf.keras.optimizers.schedules.ExponentialDecay(0.05, 10, 0.9)),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"])
        hist = model.fit(x, y, epochs=10, verbose=0,
                         callbacks=[tf.keras.callbacks.EarlyStopping(monitor="loss")])
    assert hist.history["accuracy"][-1] > 0.8
    assert vdev.placement.op_count(device="/device:GPU:0") == 0
