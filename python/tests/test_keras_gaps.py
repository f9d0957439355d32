"""Small Keras / TensorFlow gaps closed as Keras 2.11 and TensorFlow have
them: the global pooling layers (GlobalAveragePooling1D/2D,
GlobalMaxPooling1D/2D) in a Sequential and a functional model; an int64 id
outside int32 given to vdev.gather, vdev.nn.embedding_lookup and fit under a
MirroredStrategy is TensorFlow's InvalidArgumentError naming the first id
outside the table, as vdev.layers.Embedding gives; Sequential's get_config /
from_config and clone_model; save_weights and save_checkpoint into a folder
that does not exist; Embedding's sizes checked as Keras 2.11 checks them;
the progress bar of an epoch that fit stopped early."""
import numpy as np
import pytest

import vdev
from vdev import layers
from vdev.errors import InvalidArgumentError

WIDE = np.array([[1, 2 ** 32], [3, 4]], np.int64)


# ---- int64 ids outside int32 ----

def test_gather_and_embedding_lookup_name_the_first_id_outside_the_table():
    p = vdev.constant(np.arange(30, dtype=np.float32).reshape(10, 3))
    for fn in (vdev.gather, vdev.nn.embedding_lookup):
        with pytest.raises(InvalidArgumentError) as e:
            fn(p, WIDE)
        assert str(e.value) == "indices[0,1] = 4294967296 is not in [0, 10)"
        with pytest.raises(InvalidArgumentError) as e:  # a list, an id in int32 first
            fn(p, [12, -2 ** 40])
        assert str(e.value) == "indices[0] = 12 is not in [0, 10)"
    # along another axis: the first id outside that axis's size
    with pytest.raises(InvalidArgumentError) as e:
        vdev.gather(p, np.array([2, 2 ** 31], np.int64), axis=1)
    assert str(e.value) == "indices[1] = 2147483648 is not in [0, 3)"
    # int64 ids inside int32 still gather
    got = vdev.gather(p, np.array([[9, 0]], np.int64)).numpy()
    np.testing.assert_array_equal(got, np.arange(30, dtype=np.float32).reshape(10, 3)[[[9, 0]]])


def test_fit_under_a_mirrored_strategy_names_the_replicas_first_id_outside_the_table():
    x = np.array([[1, 2], [3, 4], [5, 2 ** 32], [7, 8]], np.int64)
    y = np.zeros(4, np.int32)
    with vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"]).scope():
        model = vdev.models.Sequential([layers.Embedding(10, 3, input_length=2, seed=1),
                                        layers.Flatten(), layers.Dense(2, seed=2)])
        model.compile("sgd", vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(InvalidArgumentError) as e:
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    # rows 2 and 3 are the second replica's: its ids' row 0, as each
    # replica's GatherV2 names them in TensorFlow
    assert str(e.value) == "indices[0,1] = 4294967296 is not in [0, 10)"
    # in-range int64 ids still train
    model.fit(x % 10, y, batch_size=4, epochs=1, verbose=0)


# ---- Embedding's sizes ----

def test_embedding_sizes_are_checked_as_keras_2_11_checks_them():
    with pytest.raises(ValueError) as e:
        layers.Embedding(0, 3)
    assert str(e.value) == ("Both `input_dim` and `output_dim` should be positive, Received "
                            "input_dim = 0 and output_dim = 3")
    with pytest.raises(ValueError) as e:
        layers.Embedding(10, -2.5)
    assert str(e.value) == ("Both `input_dim` and `output_dim` should be positive, Received "
                            "input_dim = 10 and output_dim = -2.5")
    # a positive float passes Keras's check and is refused where the table
    # is made (TensorShape's TypeError; vdev makes it with the layer)
    for args, shown in (((10.0, 3), "10.0"), ((10, np.float32(3)), "3.0")):
        with pytest.raises(TypeError) as e:
            layers.Embedding(*args)
        assert str(e.value) == ("Dimension value must be integer or None or have an __index__ "
                                "method, got value '%s' with type '%r'"
                                % (shown, type(args[0] if shown == "10.0" else args[1])))
    assert layers.Embedding(np.int64(4), 2).embeddings.shape == (4, 2)
