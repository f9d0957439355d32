"""vdev.TensorShape: a tensor's shape as a tuple of ints, with the parts of
tf.TensorShape that a known shape has: ``as_list()``, ``rank``,
``num_elements()``, ``is_compatible_with``, ``concatenate`` and ``+``, and
TensorFlow's equality, which reads the other side as a shape (so that
``t.shape == [2, 3]`` holds). Sizes are read as TensorFlow's Dimension
reads them: an int, None, or anything with ``__index__`` (a float is a
TypeError, a negative size a ValueError). vdev has no shape of unknown rank."""


def _dim(d):
    """One size, as tf.compat.v1.Dimension reads it: an int >= 0 or None."""
    if not isinstance(d, int) and d is not None:
        try:
            d = int(d.__index__())
        except AttributeError:
            raise TypeError("Dimension value must be integer or None or have an __index__ "
                            "method, got value '{0!r}' with type '{1!r}'".format(d, type(d))
                            ) from None
    if d is not None and d < 0:
        raise ValueError("Dimension %d must be >= 0" % d)
    return d


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
        if isinstance(dims, (tuple, list)):
            return super().__new__(cls, [_dim(d) for d in dims])
        try:
            it = iter(dims)
        except TypeError:
            return super().__new__(cls, [_dim(dims)])  # TensorFlow's: one size is 1-d
        sizes = []
        for d in it:
            try:
                sizes.append(_dim(d))
            except TypeError as e:  # TensorFlow's text, its missing space included
                raise TypeError("Failed to convert '{0!r}' to a shape: '{1!r}'could not be "
                                "converted to a dimension. A shape should either be single "
                                "dimension (e.g. 10), or an iterable of dimensions (e.g. "
                                "[1, 10, None]).".format(dims, d)) from e
        return super().__new__(cls, sizes)

    def is_compatible_with(self, other):
        """Same rank and equal sizes, a None size matching any, as
        TensorFlow's (other: a TensorShape, list or tuple)."""
        other = other if isinstance(other, TensorShape) else TensorShape(other)
        return len(self) == len(other) and all(
            a is None or b is None or a == b for a, b in zip(self, other))

    # Equality and + as TensorFlow's: the other side is read as a shape, so
    # that ``t.shape == [2, 3]`` holds (a bare tuple would say False) and
    # ``== [2.0, 3.0]`` does not (a float is no size); a negative size is
    # TensorFlow's ValueError.
    def __eq__(self, other):
        if other is None:  # TensorShape(None): an unknown rank, never a known shape
            return False
        try:
            other = other if isinstance(other, TensorShape) else TensorShape(other)
        except TypeError:
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
    def dims(self):
        """The sizes as a list (ints, None for an unknown size), as
        ``as_list()``; TensorFlow's deprecated ``dims`` gives them as
        ``tf.compat.v1.Dimension`` objects, which vdev does not have."""
        return list(self)

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
