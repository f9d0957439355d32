"""Models, as ``tf.keras``: ``Sequential``, and ``MLP``, a stack of Dense
layers with the seeds vdev's C ``vdev_mlp_new`` uses, so a model built here
starts from the same weights as the C model of the same seed (and trains to
the same numbers)."""

from . import _lib
from .layers import Dense, Layer, _dedup


class Sequential(Layer):
    def __init__(self, layers=None, name=None):
        super().__init__(name)
        self.layers = []
        for l in layers or []:
            self.add(l)

    def add(self, layer):
        if not callable(layer):
            raise TypeError("The added layer must be callable. Received: layer=%r" % (layer,))
        # As Keras: the same layer may come twice (its weights shared), two
        # layers of one name may not.
        name = getattr(layer, "name", None)
        if name is not None and any(l is not layer and getattr(l, "name", None) == name
                                    for l in self.layers):
            raise ValueError("All layers added to a Sequential model should have unique names. "
                             "Name \"%s\" is already the name of a layer in this model. Update "
                             "the `name` argument to pass a unique name." % (name,))
        self.layers.append(layer)

    def __call__(self, x):
        for l in self.layers:
            x = l(x)
        return x

    @property
    def variables(self):
        """Every layer's variables in order, each once: a layer used twice
        (shared weights) lists its variables at their first use, as Keras."""
        return _dedup(v for l in self.layers for v in getattr(l, "variables", []))

    @property
    def trainable_variables(self):
        return [v for v in self.variables if v.trainable]


class MLP(Sequential):
    """sizes[0] → sizes[1] → ... → sizes[-1]: `activation` after each layer
    but the last, `output_activation` after the last; layer i's seed is
    seed * 1000003 + i * 7919 + 1, as in vdev_mlp_new."""

    def __init__(self, sizes, activation="relu", output_activation=None, seed=0, name=None):
        sizes = [_lib.index(s, "an MLP's sizes") for s in sizes]
        if len(sizes) < 2:
            raise ValueError("an MLP needs at least two sizes, got %r" % (sizes,))
        layers = []
        for i in range(len(sizes) - 1):
            act = output_activation if i + 2 == len(sizes) else activation
            s = (_lib.index(seed, "seed") * 1000003 + i * 7919 + 1) & (2**64 - 1)
            layers.append(Dense(sizes[i + 1], activation=act, input_dim=sizes[i], seed=s,
                                name="dense_%d" % i))
        super().__init__(layers, name)
