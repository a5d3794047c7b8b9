"""TF's ``TensorProto`` bytes for the tensors sparse serialization carries: written and read
here in protobuf's wire format, as ``Tensor::AsProtoTensorContent`` writes them (the dtype,
the shape, the elements as ``tensor_content``; strings there as TF's string list: every
length as a varint, then every string's bytes).

Invariant: ``encode`` gives byte for byte what TF 2.21 gives for the same array (checked
against TF in ``tests/fixtures/tf_api/cases_sparse.py``), and ``decode(encode(a))`` is ``a``.
Only the fields ``encode`` writes, and the typed repeated fields TF may write for small
tensors, are read.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.lib import protos

# dflab dtype name -> TF's DataType enum name.
_TYPE_NAMES = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "int32": "DT_INT32",
               "uint8": "DT_UINT8", "int16": "DT_INT16", "int8": "DT_INT8",
               "string": "DT_STRING", "complex64": "DT_COMPLEX64", "int64": "DT_INT64",
               "bool": "DT_BOOL", "uint16": "DT_UINT16", "complex128": "DT_COMPLEX128",
               "float16": "DT_HALF", "uint32": "DT_UINT32", "uint64": "DT_UINT64"}
_BY_NUMBER = {protos.data_type_enum(v): k for k, v in _TYPE_NAMES.items()}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode(value: np.ndarray, dtype) -> bytes:
    """The serialized ``TensorProto`` of ``value`` (of dflab dtype ``dtype``)."""
    dtype = _dt.as_dtype(dtype).base_dtype
    value = np.asarray(value)
    shape = b"".join(_field(2, _varint(1 << 3) + _varint(int(d)) if d else b"")
                     for d in value.shape)
    out = _varint(1 << 3) + _varint(protos.data_type_enum(_TYPE_NAMES[dtype.name]))
    out += _field(2, shape)
    if dtype is _dt.string:
        items = [v if isinstance(v, bytes) else str(v).encode() for v in value.ravel()]
        content = b"".join(_varint(len(v)) for v in items) + b"".join(items)
    else:
        content = np.ascontiguousarray(value, dtype=np.dtype(dtype._np).newbyteorder("<"))
        content = content.tobytes()
    if content:
        out += _field(4, content)
    return out


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def _fields(data: bytes):
    """(field number, wire type, value) of each field: ints for varints, bytes otherwise."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 2:
            n, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + n], pos + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            value, pos = data[pos:pos + n], pos + n
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def decode(data: bytes) -> tuple[str | None, np.ndarray]:
    """(dflab dtype name, array) of a serialized ``TensorProto``; raises ValueError when
    the bytes are not one."""
    dtype_number, dims, content, strings = 0, [], b"", []
    try:
        for number, wire, value in _fields(data):
            if number == 1 and wire == 0:
                dtype_number = value
            elif number == 2 and wire == 2:
                for sub, sub_wire, dim in _fields(value):
                    if sub == 2 and sub_wire == 2:
                        size = [v for n, w, v in _fields(dim) if n == 1 and w == 0]
                        dims.append(size[0] if size else 0)
            elif number == 4 and wire == 2:
                content = value
            elif number == 8 and wire == 2:
                strings.append(bytes(value))
    except (IndexError, ValueError) as e:
        raise ValueError(f"Could not parse a TensorProto: {e}") from None
    name = _BY_NUMBER.get(dtype_number)
    if name is None:
        raise ValueError(f"Unsupported or invalid dtype {dtype_number} in a TensorProto")
    count = int(np.prod(dims)) if dims else 1
    if name == "string":
        if content:
            lengths, pos = [], 0
            for _ in range(count):
                n, pos = _read_varint(content, pos)
                lengths.append(n)
            for n in lengths:
                strings.append(bytes(content[pos:pos + n]))
                pos += n
        arr = np.empty(count, dtype=object)
        arr[:] = strings[:count] + [b""] * (count - len(strings[:count]))
        return name, arr.reshape(dims)
    np_type = np.dtype(_dt.as_dtype(name)._np).newbyteorder("<")
    arr = np.frombuffer(content, dtype=np_type) if content else np.zeros(count, np_type)
    if arr.size != count:
        raise ValueError(f"A TensorProto of shape {dims} holds {arr.size} elements")
    return name, arr.astype(np_type.newbyteorder("="), copy=True).reshape(dims)
