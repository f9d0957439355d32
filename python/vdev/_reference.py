"""The object ``Tensor.ref()`` and ``Variable.ref()`` return, as
TensorFlow's: a hashable key that stands for one tensor or variable object,
for sets and dictionaries keyed by tensors. Two references are equal when
they refer to the same object (``is``), whatever the values; ``deref()``
gives the object back. Comparing a reference with something that is not one
is TensorFlow's TypeError (None is simply unequal). A reference holds its
object alive, as TensorFlow's does."""


class Reference:
    """A reference to one tensor or variable object (``t.ref()``)."""

    __slots__ = ("_obj", "__weakref__")

    def __init__(self, obj):
        self._obj = obj

    def deref(self):
        """The tensor or variable this reference refers to."""
        return self._obj

    def _other(self, other):
        if not isinstance(other, Reference):
            raise TypeError("Cannot compare wrapped object with unwrapped object")
        return other._obj

    def __eq__(self, other):
        return other is not None and self._obj is self._other(other)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __lt__(self, other):
        return id(self._obj) < id(self._other(other))

    def __gt__(self, other):
        return id(self._obj) > id(self._other(other))

    def __hash__(self):
        return id(self._obj)

    def __repr__(self):
        return "<Reference wrapping %r>" % (self._obj,)
