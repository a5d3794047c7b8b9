"""NumPy arrays to and from TF's ``TensorProto``, byte for byte as TF writes them.

Three writers, as in TF: ``make_tensor_proto`` (Python's ``tf.make_tensor_proto``: raw
``tensor_content`` for more than one element of a number type, the typed ``*_val`` fields
otherwise, and a single value broadcast over a larger ``shape``), ``as_proto_content`` (what
the ``SerializeTensor`` kernel writes: raw content for every number type, ``string_val`` for
strings) and ``as_proto_tensor_content`` (the C++ ``Tensor::AsProtoTensorContent`` behind
sparse serialization: raw content for every type, strings as TF's string list: every length
as a varint, then every string's bytes). ``make_ndarray`` reads any of them (TF's
``MakeNdarray``: a short ``*_val`` list is padded with its last value).
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.lib import protos
from dflab.lib.io.tensor_bundle import dtype_enum, dtype_of_enum

# Number types whose many-element protos carry raw bytes (TF's _TENSOR_CONTENT_TYPES).
# (Not uint16, bool, complex or strings: those always go to their *_val field.)
_CONTENT_TYPES = frozenset(["float16", "float32", "float64", "int32", "uint8", "int16", "int8",
                            "int64", "uint32", "uint64"])

# dtype name -> the TensorProto field its values go to when not raw content.
_VAL_FIELDS = {"float32": "float_val", "float64": "double_val", "int32": "int_val",
               "uint8": "int_val", "int16": "int_val", "int8": "int_val", "uint16": "int_val",
               "int64": "int64_val", "uint32": "uint32_val", "uint64": "uint64_val",
               "bool": "bool_val", "complex64": "scomplex_val", "complex128": "dcomplex_val",
               "float16": "half_val", "string": "string_val"}


def _dense_dims(values) -> list:
    """The shape a nested list describes, following first elements (TF's
    ``_GetDenseDimensions``)."""
    if isinstance(values, (list, tuple)) and values:
        return [len(values)] + _dense_dims(values[0])
    if isinstance(values, (list, tuple)):
        return [0]
    if isinstance(values, np.ndarray):
        return list(values.shape)
    return []


def _as_array(values, dtype):
    """``values`` as an array, with TF's defaults: float64 -> float32, and int64 -> int32
    when every value fits, unless ``dtype`` says otherwise."""
    if isinstance(values, (np.ndarray, np.generic)):
        arr = values.astype(dtype.as_numpy_dtype) if dtype is not None and \
            dtype is not _dt.string else np.asarray(values)
        if arr.dtype.kind == "U":
            arr = arr.astype(object)
        return arr
    if values is None:
        raise ValueError("None values not supported.")
    np_dt = None if dtype is None or dtype is _dt.string else dtype.as_numpy_dtype
    if np_dt is not None:
        _check_compatible(values, dtype)
    arr = np.array(values, dtype=np_dt)
    if list(arr.shape) != _dense_dims(values):
        raise ValueError(f"Expected values {values} to be a dense tensor with shape "
                         f"{_dense_dims(values)}, but got shape {list(arr.shape)}.")
    if arr.dtype.kind in "US":
        arr = np.array(values, dtype=object)
    if dtype is None and arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif dtype is None and arr.dtype == np.int64:
        narrow = arr.astype(np.int32)
        if np.array_equal(narrow, arr):
            arr = narrow
    return arr


def _check_compatible(values, dtype) -> None:
    """TF's ``_AssertCompatible``: no silent float -> int or string -> number conversion."""
    try:
        kind = np.array(values).dtype.kind
    except ValueError:
        return  # ragged: reported by the caller
    if (dtype.is_integer and kind in "fc") or (dtype.is_floating and kind == "c") or \
            ((dtype.is_integer or dtype.is_floating or dtype.is_complex) and kind in "USO"):
        raise TypeError(f"Expected {dtype.name}, got {values!r} of type "
                        f"'{type(values).__name__}' instead.")


def _dtype_of(arr):
    if arr.dtype == object:
        return _dt.string
    return _dt.as_dtype(arr.dtype)


def _set_shape(proto, shape) -> None:
    proto.tensor_shape.SetInParent()
    for d in shape:
        proto.tensor_shape.dim.add().size = int(d)


def _append_values(proto, dtype, flat) -> None:
    field = _VAL_FIELDS.get(dtype.name)
    if field is None:
        raise TypeError(f"Element type not supported in TensorProto: {dtype.name}.")
    if dtype.name == "float16":
        values = np.asarray(flat, np.float16).view(np.uint16).tolist()
    elif dtype.is_complex:
        pairs = np.asarray(flat)
        values = np.stack([pairs.real, pairs.imag], -1).ravel().tolist()
    elif dtype is _dt.string:
        values = [v.encode() if isinstance(v, str) else bytes(v) for v in flat]
    else:
        values = np.asarray(flat).tolist()
    getattr(proto, field).extend(values)


def make_tensor_proto(values, dtype=None, shape=None, verify_shape=False,
                      allow_broadcast=False):
    """A ``TensorProto`` holding ``values`` (TF's ``tf.make_tensor_proto``, same bytes)."""
    if allow_broadcast and verify_shape:
        raise ValueError("allow_broadcast and verify_shape are not both allowed.")
    if isinstance(values, protos.TensorProto):
        return values
    dtype = _dt.as_dtype(dtype).base_dtype if dtype else None
    if shape is not None and int(np.prod(shape, dtype=np.int64)) == 0:
        arr = np.empty(shape, dtype=object if dtype is _dt.string else
                       (dtype.as_numpy_dtype if dtype is not None else np.float32))
    else:
        arr = _as_array(values, dtype)
    found = _dtype_of(arr)
    if dtype is not None and dtype != found:
        raise TypeError(f"`dtype` {dtype!r} is not compatible with {values} of dtype "
                        f"{arr.dtype}.")
    if shape is None:
        shape, same_size, size = arr.shape, True, arr.size
    else:
        shape = [int(d) for d in shape]
        size = int(np.prod(shape, dtype=np.int64))
        same_size = size == arr.size
        if allow_broadcast:
            if arr.shape not in ((1,), ()) and arr.size != size:
                raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, but got "
                                f"{arr.shape}.")
        else:
            if verify_shape and arr.shape != tuple(shape):
                raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, but got "
                                f"{arr.shape}.")
            if arr.size > size:
                raise ValueError(f"Too many elements provided. Takes at most {size:d}, but "
                                 f"got {arr.size:d}.")
    proto = protos.TensorProto(dtype=dtype_enum(found))
    _set_shape(proto, shape)
    if same_size and found.name in _CONTENT_TYPES and size > 1:
        proto.tensor_content = np.ascontiguousarray(arr).tobytes()
        return proto
    _append_values(proto, found, arr.ravel())
    return proto


def as_proto_content(arr) -> protos.TensorProto:
    """``arr`` as TF's ``Tensor::AsProtoTensorContent`` writes it: raw little-endian
    content for numbers and bools, ``string_val`` for strings."""
    arr = np.asarray(arr)
    dtype = _dtype_of(arr)
    proto = protos.TensorProto(dtype=dtype_enum(dtype))
    _set_shape(proto, arr.shape)
    if dtype is _dt.string:
        _append_values(proto, dtype, arr.ravel())
    elif arr.size:
        proto.tensor_content = np.ascontiguousarray(arr).tobytes()
    return proto


def as_proto_tensor_content(arr, dtype=None) -> protos.TensorProto:
    """``arr`` (as ``dtype`` where given) as TF's ``Tensor::AsProtoTensorContent`` writes it:
    everything in ``tensor_content``, strings as TF's string list."""
    dtype = _dt.as_dtype(dtype).base_dtype if dtype is not None else _dtype_of(np.asarray(arr))
    if dtype is not _dt.string:
        return as_proto_content(np.asarray(arr, dtype=dtype.as_numpy_dtype))
    arr = np.asarray(arr, dtype=object)
    proto = protos.TensorProto(dtype=dtype_enum(dtype))
    _set_shape(proto, arr.shape)
    items = [v if isinstance(v, bytes) else str(v).encode() for v in arr.ravel()]
    proto.tensor_content = b"".join(_varint(len(v)) for v in items) + b"".join(items)
    return proto


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _string_list(content: bytes, count: int) -> list:
    """The strings of TF's string list (``count`` varint lengths, then the bytes)."""
    lengths, pos = [], 0
    for _ in range(count):
        n = shift = 0
        while True:
            byte = content[pos]
            pos += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        lengths.append(n)
    out = []
    for n in lengths:
        if pos + n > len(content):
            raise ValueError("a string list shorter than its lengths")
        out.append(bytes(content[pos:pos + n]))
        pos += n
    return out


def make_ndarray(tensor) -> np.ndarray:
    """The array a ``TensorProto`` holds (TF's ``tf.make_ndarray``); strings as bytes."""
    shape = [d.size for d in tensor.tensor_shape.dim]
    count = int(np.prod(shape, dtype=np.int64))
    dtype = dtype_of_enum(tensor.dtype)
    if dtype is None:
        raise TypeError(f"Unsupported tensor type: {tensor.dtype}.")
    if tensor.tensor_content and dtype is _dt.string:
        values = np.empty(count, dtype=object)
        values[:] = _string_list(tensor.tensor_content, count)
        return values.reshape(shape)
    if tensor.tensor_content:
        return np.frombuffer(tensor.tensor_content, dtype=dtype.as_numpy_dtype).copy() \
            .reshape(shape)
    if dtype is _dt.string:
        values = list(tensor.string_val)
        if count > len(values):
            values += [values[-1] if values else b""] * (count - len(values))
        return np.array(values, dtype=object).reshape(shape)
    raw = list(getattr(tensor, _VAL_FIELDS[dtype.name]))
    if dtype.name == "float16":
        values = np.array(raw, np.uint16).view(np.float16)
    elif dtype.is_complex:
        parts = np.array(raw, np.float64).reshape(-1, 2)
        values = (parts[:, 0] + 1j * parts[:, 1]).astype(dtype.as_numpy_dtype)
    else:
        values = np.array(raw, dtype=dtype.as_numpy_dtype)
    if values.size == 0:
        return np.zeros(shape, dtype.as_numpy_dtype)
    if values.size != count:
        values = np.pad(values, (0, count - values.size), "edge")
    return values.reshape(shape)


def __getattr__(name: str):
    # ``TensorProto`` is protobuf's class, made when first asked for (dflab.lib.protos is
    # loaded on first use).
    if name == "TensorProto":
        return protos.TensorProto
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
