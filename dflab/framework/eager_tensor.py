"""``EagerTensor``: a tensor that holds its value, the result of an op run eagerly.

Eager execution (``dflab.eager``) runs each op as it is called and wraps every output in an
``EagerTensor``: a ``Tensor`` (so builders, ``isinstance`` checks and the operator overloads
work unchanged) that carries the array its kernel produced, on the device that produced it.
It has no op and no graph position: ``op`` and ``name`` raise ``AttributeError`` as TF's
eager tensors do and ``graph`` is None, except for a resource handle, whose ``op`` is the
small record of the ``VarHandleOp`` that made it (shape and dtype rules read a variable's
dtype and shape through it). Values are host NumPy arrays on host devices and the device's
arrays elsewhere; ``numpy()`` brings them to the host.

Invariant: an eager tensor's value never changes (kernels never write into their inputs, and
variable state lives behind handles; tensors may share one array, a reshape's result its
input's). So ``numpy()`` hands out a copy, as TF 2's does: the caller may change it in place.
dflab's own code reads the value itself (``_numpy()``, ``value_in_memory()``, the kernels'
``_value``) and pays no copy; ``np.asarray(t)`` gives the array itself, as TF's does.
"""

from __future__ import annotations

import operator

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import object_identity
from dflab.framework import ops as _ops
from dflab.framework.tensor import Tensor
from dflab.framework.tensor_shape import TensorShape


class EagerTensor(Tensor):
    """A tensor with a concrete value (see the module docstring)."""

    __slots__ = ("_value", "_device_obj", "_name")

    is_eager = True

    def __init__(self, value, dtype: _dt.DType, device, op=None, name=None):
        self._value = value
        self._dtype = dtype
        self._device_obj = device
        self._op = op
        self._name = name
        self._shape = None

    def set_source(self, op, name: str) -> None:
        """Name a resource handle and record the op that made it (``VarHandleOp``'s record,
        whose attributes carry the variable's dtype and shape)."""
        self._op = op
        self._name = name

    # Tensor's ``dtype`` read without a Python frame: eager dispatch reads it for every input.
    dtype = property(operator.attrgetter("_dtype"), doc="The tensor's ``DType``.")

    # --- what differs from a graph tensor -----------------------------------------------------
    @property
    def op(self):
        if self._op is None:
            raise AttributeError("Tensor.op is meaningless when eager execution is enabled.")
        return self._op

    @property
    def name(self) -> str:
        if self._name is None:
            raise AttributeError("Tensor.name is meaningless when eager execution is enabled.")
        return self._name

    @property
    def graph(self):
        """None: an eager tensor belongs to no graph (a graph that reads one captures it; a
        resource handle answers its eager context)."""
        if self._op is not None:
            return self._op.graph
        return None

    @property
    def device(self) -> str:
        return self._device_obj.name if self._device_obj is not None else ""

    @property
    def device_object(self):
        """The runtime device holding the value."""
        return self._device_obj

    @property
    def backing_device(self) -> str:
        return self.device

    @property
    def shape(self) -> TensorShape:
        shape = self._shape
        if shape is None:
            shape = self._shape = TensorShape(np.shape(self._value))
        return shape

    def get_shape(self) -> TensorShape:
        return self.shape

    def set_shape(self, shape) -> None:
        if not self.shape.is_compatible_with(shape):
            raise ValueError(f"Tensor's shape {self.shape} is not compatible with supplied "
                             f"shape {shape}")

    @property
    def ndim(self) -> int:
        return np.ndim(self._value)

    def consumers(self) -> list:
        return []

    def eval(self, feed_dict=None, session=None):
        return self.numpy()

    def numpy(self):
        """A copy of the value as a NumPy array on the host (a NumPy scalar, or ``bytes``,
        for a 0-d tensor), the caller's to change."""
        value = self._value
        if isinstance(value, np.ndarray):
            return value[()] if value.ndim == 0 else value.copy()
        return self._numpy()  # a scalar, or a device's value brought to a new host array

    def _numpy(self):
        """The value on the host without a copy (the tensor's own array, which must not be
        written to), for dflab's code and for printing."""
        value = self._value
        dev = self._device_obj
        if dev is not None and not isinstance(value, (np.ndarray, np.generic)):
            value = dev.to_host(value)
        if isinstance(value, np.ndarray) and value.ndim == 0:
            return value[()]
        return value

    def value_in_memory(self):
        """The value as its device holds it (a device array on an accelerator)."""
        return self._value

    # --- Python conversions: eager tensors are values ------------------------------------------
    def __array__(self, dtype=None, copy=None):
        arr = np.asarray(self._numpy())
        if dtype is not None:
            return arr.astype(dtype, copy=bool(copy))
        if copy:
            return arr.copy()
        if arr.flags.writeable:  # TF's: the tensor's own array, which no one may write to
            arr = arr.view()
            arr.flags.writeable = False
        return arr

    def __bool__(self):
        value = self._numpy()
        if np.size(value) == 0:  # TF's: an empty tensor is false (NumPy's is an error)
            return False
        return bool(value)

    def __int__(self):
        return int(self._numpy())

    def __float__(self):
        return float(self._numpy())

    def __complex__(self):
        return complex(self._numpy())

    def __index__(self):
        if not self._dtype.is_integer:
            raise TypeError(f"Only integer tensors can be used as indices, not "
                            f"{self._dtype.name}")
        return int(self._numpy())

    def __len__(self):
        shape = np.shape(self._value)
        if not shape:
            raise TypeError("Scalar tensor has no `len()`")
        return shape[0]

    def __iter__(self):
        shape = np.shape(self._value)
        if not shape:
            raise TypeError("Cannot iterate over a scalar tensor.")
        return (self[i] for i in range(shape[0]))

    def __format__(self, spec):
        # TF's: the value formatted (``f"{loss}"`` is ``0.25``, ``f"{loss:.3f}"`` ``0.250``),
        # not the ``tf.Tensor(...)`` that ``str`` gives.
        if self._dtype is _dt.resource:
            return format("<unprintable>", spec)
        return format(self._numpy(), spec)

    def ref(self):
        """A hashable reference to this tensor (TF's ``Tensor.ref()``): ``deref()`` gives it
        back; references are equal when they wrap the same tensor."""
        return object_identity.Reference(self)

    experimental_ref = ref

    def cpu(self):
        """A copy of the tensor on the host's CPU (TF's: an ``Identity`` placed there)."""
        with _ops.device("/cpu:0"):
            return _ops.apply_op_output("Identity", [self], None, "Identity")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __repr__(self):
        return (f"<tf.Tensor: shape={_shape_text(self)}, dtype={self._dtype.name}, "
                f"numpy={_numpy_repr(self)}>")

    def __str__(self):
        text = _numpy_str(self)
        sep = "\n" if "\n" in text else ""
        return f"tf.Tensor({sep}{text}, shape={_shape_text(self)}, dtype={self._dtype.name})"

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": repr(self)}


def _shape_text(t: EagerTensor) -> str:
    dims = tuple(int(d) for d in np.shape(t._value))
    return str(dims)


def _host(t: EagerTensor):
    return np.asarray(t._numpy()) if t._dtype is not _dt.resource else None


def _numpy_repr(t: EagerTensor) -> str:
    if t._dtype is _dt.resource:
        return "<unprintable>"
    return numpy_text(t._numpy())


def numpy_text(value) -> str:
    """A value as TF's ``repr`` of a tensor or variable shows it after ``numpy=``: a scalar as
    Python's, an array as NumPy's, on a line of its own when it takes several."""
    if isinstance(value, np.ndarray):
        text = repr(value)
    elif isinstance(value, np.generic):
        text = repr(value.item())
    else:  # bytes
        text = repr(value)
    return "\n" + text if "\n" in text else text


def _numpy_str(t: EagerTensor) -> str:
    if t._dtype is _dt.resource:
        return "<ResourceHandle>"
    value = t._numpy()
    return str(value) if not isinstance(value, np.generic) else str(np.asarray(value))


def is_eager(x) -> bool:
    """Whether ``x`` is an eager tensor."""
    return getattr(x, "is_eager", False) is True
