"""vdev.TensorShape: a tensor's shape as a tuple of ints, with the parts of
tf.TensorShape that a known shape has: ``as_list()``, ``rank``,
``num_elements()``, ``is_compatible_with``, ``concatenate`` and ``+``, and
TensorFlow's equality, which reads the other side as a shape (so that
``t.shape == [2, 3]`` holds). vdev has no shape of unknown rank."""


class TensorShape(tuple):
    """A tensor's shape: a tuple of ints, with ``tf.TensorShape``'s
    ``as_list()`` and ``rank``. ``TensorShape(dims)`` takes a list or tuple
    of sizes, or one int (a 1-d shape), as TensorFlow's; vdev has no shape
    of unknown rank, so ``TensorShape(None)`` is a ValueError."""

    def __new__(cls, dims=()):
        if dims is None:
            raise ValueError("vdev has no TensorShape of unknown rank (TensorShape(None)): "
                             "every vdev tensor and variable has a known shape; give the "
                             "sizes, e.g. TensorShape([2, 3])")
        try:
            dims = iter(dims)
        except TypeError:
            dims = (dims,)  # TensorFlow's: one size is a 1-d shape
        return super().__new__(cls, dims)

    def is_compatible_with(self, other):
        """Same rank and equal sizes, a None size matching any, as
        TensorFlow's (other: a TensorShape, list or tuple)."""
        other = other if isinstance(other, TensorShape) else TensorShape(other)
        return len(self) == len(other) and all(
            a is None or b is None or a == b for a, b in zip(self, other))

    # Equality and + as TensorFlow's: the other side is read as a shape, so
    # that ``t.shape == [2, 3]`` holds (a bare tuple would say False).
    def __eq__(self, other):
        try:
            other = other if isinstance(other, TensorShape) else TensorShape(other)
        except (TypeError, ValueError):  # None (unknown rank) included: unequal
            return NotImplemented
        return tuple.__eq__(self, other)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = tuple.__hash__

    def concatenate(self, other):
        """This shape's sizes, then other's (a TensorShape, list or tuple)."""
        return TensorShape(tuple(self) + tuple(TensorShape(other)))

    def __add__(self, other):
        return self.concatenate(other)

    def __radd__(self, other):
        return TensorShape(other).concatenate(self)

    def __getitem__(self, key):
        """A size (an int), or for a slice a TensorShape, as TensorFlow's."""
        got = tuple.__getitem__(self, key)
        return TensorShape(got) if isinstance(key, slice) else got

    def is_fully_defined(self):
        return None not in self

    def as_list(self):
        return list(self)

    @property
    def rank(self):
        return len(self)

    @property
    def ndims(self):
        return len(self)

    def num_elements(self):
        n = 1
        for d in self:
            n *= d
        return n

    def __repr__(self):
        return "TensorShape(%s)" % list(self)
