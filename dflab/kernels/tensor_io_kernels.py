"""Kernels of ``dflab.ops.tensor_io_ops``: ``SerializeTensor``, ``ParseTensor``,
``WriteFile``, ``MatchingFiles`` and ``Timestamp`` (host only, as in TF).

Serialized tensors are TF's: ``Tensor::AsProtoTensorContent`` going out, and any valid
``TensorProto`` coming in (raw content or typed values, see ``dflab.lib.tensor_proto``).
"""

from __future__ import annotations

import glob
import os
import time

import numpy as np
from google.protobuf.message import DecodeError

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.kernels.registry import kernel
from dflab.lib import tensor_proto as _tp


def _bad(node, message):
    return errors.InvalidArgumentError(None, node, message)


def _text(value) -> str:
    v = np.asarray(value, dtype=object).reshape(-1)[0]
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def _bytes(value) -> bytes:
    v = np.asarray(value, dtype=object).reshape(-1)[0]
    return v.encode() if isinstance(v, str) else bytes(v)


@kernel("SerializeTensor", host_only=True)
def _serialize_tensor(node, ctx):
    def serialize_tensor(x):
        try:
            proto = _tp.as_proto_content(x)
        except errors.InvalidArgumentError as e:
            raise _bad(node, e.message) from None
        return np.array(proto.SerializeToString(), dtype=object)

    return serialize_tensor


@kernel("ParseTensor", host_only=True)
def _parse_tensor(node, ctx):
    out_type = _dt.as_dtype(node.attr["out_type"])

    def parse_tensor(serialized):
        try:
            proto = _tp.TensorProto.FromString(_bytes(serialized))
            value = _tp.make_ndarray(proto)
        except (DecodeError, TypeError, ValueError):
            raise _bad(node, "Could not parse `serialized` as TensorProto: "
                             f"'{_bytes(serialized)[:40]!r}'") from None
        found = _dt.string if value.dtype == object else _dt.as_dtype(value.dtype)
        if found != out_type:
            raise _bad(node, f"Type mismatch between parsed tensor ({found.name}) and dtype "
                             f"({out_type.name})")
        return value

    return parse_tensor


@kernel("WriteFile", host_only=True)
def _write_file(node, ctx):
    def write_file(filename, contents):
        name = _text(filename)
        try:
            folder = os.path.dirname(name)
            if folder:
                os.makedirs(folder, exist_ok=True)
            with open(name, "wb") as f:
                f.write(_bytes(contents))
        except OSError as e:
            raise errors.UnknownError(None, node, f"WriteFile: {name}: {e.strerror}") from None

    return write_file


@kernel("MatchingFiles", host_only=True)
def _matching_files(node, ctx):
    def matching_files(pattern):
        patterns = [p.decode("utf-8", "surrogateescape") if isinstance(p, bytes) else str(p)
                    for p in np.asarray(pattern, dtype=object).reshape(-1)]
        found = sorted({m for p in patterns for m in glob.glob(p)})
        out = np.empty(len(found), dtype=object)
        out[:] = [m.encode("utf-8", "surrogateescape") for m in found]
        return out

    return matching_files


@kernel("Timestamp", host_only=True)
def _timestamp(node, ctx):
    return lambda: np.float64(time.time())
