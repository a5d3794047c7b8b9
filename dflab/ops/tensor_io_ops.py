"""Tensors to and from bytes and files: ``SerializeTensor``/``ParseTensor`` (a tensor as a
serialized ``TensorProto``, TF's bytes), ``WriteFile``, ``MatchingFiles`` and ``Timestamp``;
and the Python-side ``make_tensor_proto``/``make_ndarray``.

Kernels in ``dflab.kernels.tensor_io_kernels`` (host only, as TF registers them); the proto
conversions live in ``dflab.lib.tensor_proto``. None of these ops has a gradient.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.lib import tensor_proto as _tp


def _scalar_string(op, t, what):
    if t.dtype.base_dtype is not _dt.string:
        raise TypeError(f"{op.type}: {what} must be a string, got {t.dtype.base_dtype.name}")
    if not t.shape.is_compatible_with(TensorShape([])):
        raise ValueError(f"Shape must be rank 0 but is rank {t.shape.ndims} for {what} of "
                         f"'{op.type}'")


def _serialize_infer(op):
    return [(_dt.string, TensorShape([]))]


def _parse_infer(op):
    _scalar_string(op, op.inputs[0], "serialized")
    return [(_dt.as_dtype(op.get_attr("out_type")), TensorShape(None))]


def _write_file_infer(op):
    _scalar_string(op, op.inputs[0], "filename")
    _scalar_string(op, op.inputs[1], "contents")
    return []


def _matching_files_infer(op):
    pattern = op.inputs[0]
    if pattern.dtype.base_dtype is not _dt.string:
        raise TypeError(f"MatchingFiles: pattern must be a string, got "
                        f"{pattern.dtype.base_dtype.name}")
    if pattern.shape.ndims is not None and pattern.shape.ndims > 1:
        raise ValueError(f"Shape must be at most rank 1 but is rank {pattern.shape.ndims}")
    return [(_dt.string, TensorShape([None]))]


register_op("SerializeTensor", _serialize_infer)
register_op("ParseTensor", _parse_infer)
register_op("WriteFile", _write_file_infer, stateful=True)
register_op("MatchingFiles", _matching_files_infer)
register_op("Timestamp", lambda op: [(_dt.float64, TensorShape([]))], stateful=True)
for _t in ("SerializeTensor", "ParseTensor", "WriteFile", "MatchingFiles", "Timestamp"):
    NotDifferentiable(_t)


def serialize_tensor(tensor, name=None):
    """A string scalar: ``tensor`` as a serialized ``TensorProto`` (TF's bytes)."""
    return _ops.apply_op_output("SerializeTensor", [tensor], None, name)


def parse_tensor(serialized, out_type, name=None):
    """The tensor a serialized ``TensorProto`` holds; it must be of dtype ``out_type``."""
    return _ops.apply_op_output("ParseTensor", [_ops.convert_to_tensor(serialized,
                                                                       _dt.string)],
                                {"out_type": _dt.as_dtype(out_type).base_dtype}, name)


def write_file(filename, contents, name=None):
    """An op writing the string ``contents`` to ``filename`` (creating its directories)."""
    return _ops.apply_op("WriteFile", [_ops.convert_to_tensor(filename, _dt.string),
                                       _ops.convert_to_tensor(contents, _dt.string)],
                         None, name)


def matching_files(pattern, name=None):
    """The sorted names of the files matching the glob ``pattern`` (or any of a vector of
    patterns)."""
    return _ops.apply_op_output("MatchingFiles", [_ops.convert_to_tensor(pattern,
                                                                         _dt.string)],
                                None, name)


def timestamp(name=None):
    """The time when the op runs, in seconds since the epoch (float64)."""
    return _ops.apply_op_output("Timestamp", [], None, name)


def make_tensor_proto(values, dtype=None, shape=None, verify_shape=False,
                      allow_broadcast=False):
    """A ``TensorProto`` of ``values`` (a NumPy array, nested list or number; an eager
    tensor's value), the proto TF builds for them."""
    if isinstance(values, _ops.Tensor):
        if not getattr(values, "is_eager", False):
            raise TypeError(f"Failed to convert a graph tensor to a TensorProto: {values}. "
                            "Evaluate it first.")
        values = values._numpy()  # read only: no copy
    return _tp.make_tensor_proto(values, dtype, shape, verify_shape, allow_broadcast)


def make_ndarray(tensor) -> np.ndarray:
    """The NumPy array a ``TensorProto`` holds."""
    return _tp.make_ndarray(tensor)


__all__ = ["serialize_tensor", "parse_tensor", "write_file", "matching_files", "timestamp",
           "make_tensor_proto", "make_ndarray"]
