"""Sparse tensors as strings: ``tf.serialize_sparse``, ``tf.serialize_many_sparse`` and
``tf.deserialize_many_sparse`` (also under ``tf.io``), TF's way of passing a ``SparseTensor``
through a string tensor (a queue, a file). Each ``SparseTensor`` is three serialized
``TensorProto``s (indices, values, dense shape), byte for byte TF's.

Schemas and builders; kernels in ``dflab.kernels.sparse_text_kernels``. Only the string
form (``out_type=tf.string``) is offered: TF's variant form holds C++ tensors.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.sparse_tensor import SparseTensor
from dflab.framework.sparse_tensor import convert_to_sparse_tensor as _sparse
from dflab.framework.tensor_shape import TensorShape


def _serialize_infer(op):
    return [(_dt.string, TensorShape([3]))]


def _serialize_many_infer(op):
    return [(_dt.string, TensorShape([None, 3]))]


def _deserialize_infer(op):
    return [(_dt.int64, TensorShape([None, None])), (op.get_attr("dtype"), TensorShape([None])),
            (_dt.int64, TensorShape([None]))]


register_op("SerializeSparse", _serialize_infer)
register_op("SerializeManySparse", _serialize_many_infer)
register_op("DeserializeManySparse", _deserialize_infer)
for _name in ("SerializeSparse", "SerializeManySparse", "DeserializeManySparse"):
    NotDifferentiable(_name)


def _string_only(out_type) -> None:
    if _dt.as_dtype(out_type).base_dtype is not _dt.string:
        raise NotImplementedError("Only out_type=tf.string is offered: a variant holds C++ "
                                  "tensors, which dflab does not model")


def serialize_sparse(sp_input, name=None, out_type=_dt.string):
    """``sp_input`` as a ``[3]`` string tensor (its indices, values and shape)."""
    _string_only(out_type)
    sp_input = _sparse(sp_input)
    return _ops.apply_op("SerializeSparse", [sp_input.indices, sp_input.values,
                                             sp_input.dense_shape],
                         {"T": sp_input.dtype.base_dtype, "out_type": _dt.string},
                         name or "SerializeSparse").outputs[0]


def serialize_many_sparse(sp_input, name=None, out_type=_dt.string):
    """Each minibatch entry (first dimension) of ``sp_input`` as a row of an ``[N, 3]``
    string tensor."""
    _string_only(out_type)
    sp_input = _sparse(sp_input)
    return _ops.apply_op("SerializeManySparse", [sp_input.indices, sp_input.values,
                                                 sp_input.dense_shape],
                         {"T": sp_input.dtype.base_dtype, "out_type": _dt.string},
                         name or "SerializeManySparse").outputs[0]


def deserialize_many_sparse(serialized_sparse, dtype, rank=None, name=None) -> SparseTensor:
    """The ``SparseTensor`` of an ``[N, 3]`` string tensor of serialized ``SparseTensor``s,
    stacked along a new first dimension (the others the largest of the parts')."""
    serialized_sparse = _ops.convert_to_tensor(serialized_sparse, dtype=_dt.string,
                                               name="serialized_sparse")
    indices, values, shape = _ops.apply_op(
        "DeserializeManySparse", [serialized_sparse], {"dtype": _dt.as_dtype(dtype).base_dtype},
        name or "DeserializeManySparse").outputs
    indices.set_shape([None, rank])
    shape.set_shape([rank])
    return SparseTensor(indices, values, shape)


__all__ = ["deserialize_many_sparse", "serialize_many_sparse", "serialize_sparse"]
