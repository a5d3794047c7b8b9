"""``Tensor.ref()`` and ``Variable.ref()``: TF's ``Reference``, a hashable stand-in for a
tensor or variable compared by identity (a dict or set key where the object itself would
compare by value, as TF 2's tensors do), turned back into the object by ``deref()``."""

from __future__ import annotations


class Reference:
    """Wraps ``obj``: equal to another ``Reference`` exactly when both wrap the same object;
    hashed by that object's identity."""

    __slots__ = ("_wrapped",)

    def __init__(self, obj):
        self._wrapped = obj

    def deref(self):
        """The wrapped tensor or variable."""
        return self._wrapped

    def __eq__(self, other):
        if not isinstance(other, Reference):
            raise TypeError("Cannot compare wrapped object with unwrapped object")
        return self._wrapped is other._wrapped

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return id(self._wrapped)

    def __repr__(self):
        return f"<Reference wrapping {self._wrapped!r}>"
