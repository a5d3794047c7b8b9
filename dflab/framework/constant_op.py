"""``Const``: the graph's literal. Lives in the framework because ``convert_to_tensor`` needs it."""

from __future__ import annotations

import functools
import weakref

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops
from dflab.framework.registry import register_op
from dflab.framework.tensor_shape import TensorShape


def _const_infer(op):
    v = op._attrs["value"]
    return [(op._attrs["dtype"], TensorShape(v.shape))]


register_op("Const", _const_infer)


def _not_a_tensor(value) -> TypeError:
    return TypeError(f"Failed to convert elements of {value!r} to Tensor. Consider casting "
                     "elements to a supported type. See "
                     "https://www.tensorflow.org/api_docs/python/tf/dtypes for supported TF "
                     "dtypes.")


@functools.cache
def _int_range(np_dt) -> tuple[int, int]:
    info = np.iinfo(np_dt)
    return int(info.min), int(info.max)


def _python_ints(value) -> bool:
    """Whether ``value`` is a Python int or a non-empty list or tuple of Python ints."""
    if type(value) is int:
        return True
    if type(value) not in (list, tuple) or not value:
        return False
    for v in value:  # (a loop: ``all`` over a generator costs a short list twice as much)
        if type(v) is not int:
            return False
    return True


def _first_number(value):
    """The first element of a nested Python value that is a number and no bool (what TF's
    message names), as given (a ``np.int32`` stays one)."""
    if isinstance(value, (list, tuple)):
        for v in value:
            found = _first_number(v)
            if found is not None:
                return found
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        return None
    return value


def make_ndarray(value, dtype=None, shape=None, verify_shape=False) -> np.ndarray:
    """Convert a Python/NumPy value to a read-only ndarray of ``dtype``, checking lossy casts."""
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.dtype_of_value(value)
    np_dt = dt.base_dtype._np
    if dt.base_dtype is _dt.string:
        if value is None:
            raise ValueError("None values not supported.")
        arr = np.asarray(value, dtype=object)
        if arr.size and not all(isinstance(s, (str, bytes)) for s in arr.flat):
            # An object that is no number and no string is no tensor (None in a list, a dict,
            # an arbitrary object), rather than a string constant of its repr.
            raise _not_a_tensor(value)
        arr = np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])(
            arr) if arr.size else arr
    elif dt.is_integer and _python_ints(value):
        # Shapes, axes and sizes: a Python int or a short list of them, checked in Python (the
        # NumPy checks below cost several times the conversion).
        lo, hi = _int_range(np_dt)
        ints = (value,) if type(value) is int else value
        if min(ints) < lo or max(ints) > hi:
            raise TypeError(f"Value {value!r} is out of range for {dt.name}")
        arr = np.array(value, dtype=np_dt)
    else:
        src = np.asarray(value)
        if src.dtype == object:
            raise _not_a_tensor(value)
        if src.dtype.kind in "US":
            raise TypeError(f"Expected {dt.name}, got {value!r} of type 'str' instead.")
        if dt.is_bool:
            # A Python number is no bool (TF's ``tf.constant(1, tf.bool)`` is a TypeError);
            # a NumPy array is cast, as TF casts it (0.5 is True).
            if src.dtype.kind in "iuf" and src.size and \
                    not isinstance(value, (np.ndarray, np.generic)):
                first = _first_number(value)
                raise TypeError(f"Expected bool, but got {first} of type "
                                f"'{type(first).__name__}'.")
        elif dt.is_integer:
            # A Python float is no integer even where integral (TF's: ``int_tensor + 2.0`` is a
            # TypeError); a NumPy array is cast, as TF casts it, where its values are whole.
            # (floor and isfinite, not ``mod``: inf and NaN are no integers, and must not
            # raise a FloatingPointError under the caller's ``np.errstate``)
            if src.dtype.kind == "f" and src.size and (
                    not isinstance(value, (np.ndarray, np.generic))
                    or not (np.isfinite(src).all() and (np.floor(src) == src).all())):
                raise TypeError(f"Expected {dt.name}, got {value!r} of type "
                                f"'{type(value).__name__}' instead.")
        if dt.is_integer and src.dtype.kind in "iuf" and src.size:  # (floats: integral here)
            info = np.iinfo(np_dt)
            if src.max() > info.max or src.min() < info.min:
                raise TypeError(f"Value {value!r} is out of range for {dt.name}")
        arr = src.astype(np_dt, copy=True)
    if shape is not None:
        shape = [int(d) for d in (shape.as_list() if isinstance(shape, TensorShape) else shape)]
        n = int(np.prod(shape)) if shape else 1
        if arr.size == n:
            arr = arr.reshape(shape)
        elif arr.size == 1 and not verify_shape:
            arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
        elif arr.size < n and not verify_shape and arr.ndim <= 1:
            # TF pads a short list with its last value.
            flat = np.concatenate([arr.ravel(), np.full(n - arr.size, arr.ravel()[-1])])
            arr = flat.reshape(shape).astype(arr.dtype)
        else:
            raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, got {arr.shape}.")
    arr.flags.writeable = False
    _CONSTANT_VALUES[id(arr)] = arr
    return arr


# The arrays ``make_ndarray`` made, while they live: a constant's value is never written (a
# variable given one copies it first), so a kernel may remember what it read from one.
_CONSTANT_VALUES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def is_constant_value(array) -> bool:
    """Whether ``array`` is a constant's value (made by ``make_ndarray``), which nothing
    writes: what a kernel reads from it holds for as long as the array lives."""
    return _CONSTANT_VALUES.get(id(array)) is array


def constant(value, dtype=None, shape=None, name="Const", verify_shape=False) -> ops.Tensor:
    g = ops.get_default_graph()
    if g.executes_eagerly:  # a value, not an op: no creation site to find
        if shape is None and (dtype is None or type(dtype) is _dt.DType):
            key = _literal_key(value)
            if key is not None:
                return g.literal(key, dtype)
        return eager_constant(g, value, dtype, shape, verify_shape)
    arr = make_ndarray(value, dtype, shape, verify_shape)
    dt = _dt.as_dtype(dtype).base_dtype if dtype is not None else _dt.as_dtype(arr.dtype)
    op = g._create_op("Const", [], {"value": arr, "dtype": dt}, name, site=ops._user_site())
    return op._outputs[0]


def eager_constant(context, value, dtype=None, shape=None, verify_shape=False):
    """``constant(...)`` executing eagerly in ``context``, made anew (not from its cache)."""
    arr = make_ndarray(value, dtype, shape, verify_shape)
    dt = _dt.as_dtype(dtype).base_dtype if dtype is not None else _dt.as_dtype(arr.dtype)
    return context.constant_tensor(arr, dt)


def _literal_key(value):
    """``value`` as the key of a literal an eager context keeps its tensor of (``scalar``): a
    Python number, or a short list or tuple of Python ints or of such rows (a shape, axes,
    sizes, paddings), as a tuple; None for anything else. Making such a tensor costs a small
    op several times over (2.7 us for a number, 6 us for ``[2, 3]``). Floats in lists are
    left out: equal keys would merge 0.0 and -0.0."""
    t = type(value)
    if t is int or t is float or t is bool:
        return value
    if not ((t is list or t is tuple) and 0 < len(value) <= 8):
        return None
    if _python_ints(value):
        return tuple(value)
    for row in value:
        if type(row) is int or not _python_ints(row) or len(row) > 8:
            return None
    return tuple(map(tuple, value))


def builder_constant(value, dtype=None, name="Const") -> ops.Tensor:
    """``constant(value, dtype, name=name)`` for a tensor a builder passes to its own op (a
    shape, paddings, a fill value): executing eagerly, the context's cached tensor for a
    literal (``EagerContext.scalar``), not the new one ``tf.constant`` hands a user
    (``EagerContext.literal``): nobody holds it to watch it."""
    g = ops.get_default_graph()
    if g.executes_eagerly and (dtype is None or type(dtype) is _dt.DType):
        key = _literal_key(value)
        if key is not None:
            return g.scalar(key, dtype)
    return constant(value, dtype=dtype, name=name)


def index_constant(value, dtype=_dt.int32) -> ops.Tensor:
    """``constant(value, dtype)`` for a shape, axes or a size a builder passes (an int, or a
    tuple of ints): executing eagerly, the context's cached tensor of that value
    (``EagerContext.scalar``), so that ``reshape(x, [-1])`` or ``reduce_sum(x, 1)`` in a loop
    does not rebuild it."""
    g = ops.get_default_graph()
    if g.executes_eagerly:
        return g.scalar(value, dtype)
    return constant(value, dtype=dtype)


def constant_value(tensor):
    """The value of ``tensor`` if it can be computed at graph-build time, else None.

    Used by shape functions (``reshape(x, [2, -1])``, ``fill(dims, v)``…) to infer static shapes.
    """
    if not isinstance(tensor, ops.Tensor):
        return None
    if tensor.is_eager:  # an eager tensor's value is known
        return None if tensor.dtype.base_dtype.name == "resource" else \
            np.asarray(tensor.numpy())
    op = tensor.op
    if op.type == "Const":
        return op._attrs["value"]
    if op.type == "Shape" and op.inputs[0].shape.is_fully_defined():
        return np.array(op.inputs[0].shape.as_list(), dtype=op._attrs["out_type"]._np)
    if op.type == "Size" and op.inputs[0].shape.is_fully_defined():
        return np.array(op.inputs[0].shape.num_elements(), dtype=op._attrs["out_type"]._np)
    if op.type == "Rank" and op.inputs[0].shape.ndims is not None:
        return np.array(op.inputs[0].shape.ndims, dtype=np.int32)
    if op.type == "Identity":
        return constant_value(op.inputs[0])
    if op.type == "Cast":
        v = constant_value(op.inputs[0])
        return None if v is None else v.astype(op._attrs["DstT"]._np)
    if op.type == "Pack":
        vals = [constant_value(t) for t in op.inputs]
        if any(v is None for v in vals):
            return None
        return np.stack(vals, axis=op._attrs.get("axis", 0))
    if op.type == "ConcatV2":
        vals = [constant_value(t) for t in op.inputs]
        if any(v is None for v in vals):
            return None
        return np.concatenate(vals[:-1], axis=int(vals[-1]))
    return None


def constant_value_as_shape(tensor) -> TensorShape:
    """A partial shape from a 1-D shape tensor: known entries where they can be computed."""
    v = constant_value(tensor)
    if v is not None:
        return TensorShape([None if d == -1 else int(d) for d in np.ravel(v)])
    if tensor.op.type == "Pack":
        dims = []
        for t in tensor.op.inputs:
            c = constant_value(t)
            dims.append(None if c is None or int(c) == -1 else int(c))
        return TensorShape(dims)
    if tensor.op.type == "Shape":
        return tensor.op.inputs[0].shape
    n = tensor.shape.as_tuple()
    if n is not None and len(n) == 1 and n[0] is not None:
        return TensorShape([None] * n[0])
    return TensorShape(None)


ops._constant_builder = constant
