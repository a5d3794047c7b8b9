"""Sparse ops on coordinate lists (indices, values, dense shape): ``SparseToDense`` first.

Schema, shape rule, gradient and builder side by side; kernels in
``dflab.kernels.sparse_kernels``. Indices are int32 or int64 ``[N, rank]`` (or a vector for a
rank-1 output, or a scalar), values ``[N]`` or a scalar for all.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value_as_shape
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops
from dflab.ops import math_ops as _m


def _sparse_to_dense_infer(op):
    indices, shape, values, default = op.inputs
    if indices.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"sparse_indices must be int32 or int64, got {indices.dtype.name}")
    if values.dtype.base_dtype is not default.dtype.base_dtype:
        raise TypeError(f"sparse_values ({values.dtype.base_dtype.name}) and default_value "
                        f"({default.dtype.base_dtype.name}) must have the same type")
    default.shape.with_rank(0)
    return [(values.dtype.base_dtype, constant_value_as_shape(shape)
             if shape.shape.ndims == 1 else TensorShape([]))]


register_op("SparseToDense", _sparse_to_dense_infer)


@RegisterGradient("SparseToDense")
def _sparse_to_dense_grad(op, grad):
    indices = op.inputs[0]
    values_grad = array_ops.gather_nd(grad, indices)
    default_grad = _m.subtract(_m.reduce_sum(grad), _m.reduce_sum(values_grad))
    return [None, None, values_grad, default_grad]


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices=True, name=None):
    """A dense tensor of ``output_shape`` holding ``sparse_values`` at ``sparse_indices`` and
    ``default_value`` elsewhere. With ``validate_indices`` the indices must be in range,
    sorted in row-major order and not repeated; without it a repeated index keeps its last
    value."""
    indices = _ops.convert_to_tensor(sparse_indices)
    if indices.dtype.base_dtype not in (_dt.int32, _dt.int64):
        indices = _m.cast(indices, _dt.int64)
    values = _ops.convert_to_tensor(sparse_values)
    shape = _ops.convert_to_tensor(output_shape, dtype=indices.dtype.base_dtype)
    default = _ops.convert_to_tensor(default_value, dtype=values.dtype.base_dtype)
    return _ops.apply_op("SparseToDense", [indices, shape, values, default],
                         {"validate_indices": bool(validate_indices)}, name).outputs[0]


__all__ = ["sparse_to_dense"]
