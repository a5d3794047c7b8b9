"""``tf.sets``: set operations over the last dimension of dense or sparse tensors
(``set_intersection``, ``set_union``, ``set_difference``, ``set_size`` and their short
spellings). Each position of the leading dimensions holds one set; results are
``SparseTensor``s whose rows list each result set's values in sorted order.

Schemas and builders; kernels in ``dflab.kernels.sparse_kernels``. Not differentiable.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.sparse_tensor import SparseTensor, convert_to_tensor_or_sparse_tensor
from dflab.framework.tensor_shape import TensorShape, unknown_shape

_VALID = (_dt.int8, _dt.int16, _dt.int32, _dt.int64, _dt.uint8, _dt.uint16, _dt.string)


def _set_op_infer(op):
    first = op.inputs[0]
    if op.type == "DenseToDenseSetOperation":
        a, b = first.shape, op.inputs[1].shape
        if a.ndims is not None and b.ndims is not None:
            # As TF's shape rule: the sets' positions (all but the last dimension) agree.
            if a.ndims != b.ndims or not a[:-1].is_compatible_with(b[:-1]):
                raise ValueError(f"Shapes {a} and {b} must agree in all but the last "
                                 f"dimension for '{op.name}' (set1, set2)")
    rank = first.shape.ndims if op.type.startswith("Dense") else (
        first.shape.dims[1].value if first.shape.ndims == 2 else None)
    dtype = (first if op.type.startswith("Dense") else op.inputs[1]).dtype.base_dtype
    return [(_dt.int64, TensorShape([None, rank])), (dtype, TensorShape([None])),
            (_dt.int64, TensorShape([rank]))]


def _set_size_infer(op):
    rank = op.inputs[2].shape.dims[0].value if op.inputs[2].shape.ndims == 1 else None
    return [(_dt.int32, unknown_shape() if rank is None else TensorShape([None] * (rank - 1)))]


for _name in ("DenseToDenseSetOperation", "DenseToSparseSetOperation",
              "SparseToSparseSetOperation"):
    register_op(_name, _set_op_infer)
    NotDifferentiable(_name)
register_op("SetSize", _set_size_infer)
NotDifferentiable("SetSize")


def set_size(a, validate_indices=True):
    """The number of unique values in each set (last dimension) of the ``SparseTensor``
    ``a``: int32, of ``a``'s leading shape."""
    a = convert_to_tensor_or_sparse_tensor(a, name="a")
    if not isinstance(a, SparseTensor):
        raise TypeError(f"Expected `SparseTensor`, got {a}.")
    if a.values.dtype.base_dtype not in _VALID:
        raise TypeError(f"Invalid dtype `{a.values.dtype.name}` not in supported dtypes.")
    return _ops.apply_op("SetSize", [a.indices, a.values, a.dense_shape],
                         {"validate_indices": bool(validate_indices)}, "SetSize").outputs[0]


def _operands(a, b):
    a = convert_to_tensor_or_sparse_tensor(a, name="a")
    if a.dtype.base_dtype not in _VALID:
        raise TypeError(f"'a' has invalid dtype `{a.dtype.name}` not in supported dtypes.")
    b = convert_to_tensor_or_sparse_tensor(b, name="b")
    if b.dtype.base_dtype is not a.dtype.base_dtype:
        raise TypeError(f"Types don't match, {a.dtype.name} vs {b.dtype.name}.")
    if isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        return b, a, True  # the kernels take a dense first operand only
    return a, b, False


def _set_operation(a, b, how, validate_indices):
    attrs = {"set_operation": how, "validate_indices": bool(validate_indices)}
    if isinstance(a, SparseTensor):
        op = _ops.apply_op("SparseToSparseSetOperation",
                           [a.indices, a.values, a.dense_shape, b.indices, b.values,
                            b.dense_shape], attrs, "SparseToSparseSetOperation")
    elif isinstance(b, SparseTensor):
        op = _ops.apply_op("DenseToSparseSetOperation", [a, b.indices, b.values,
                                                         b.dense_shape], attrs,
                           "DenseToSparseSetOperation")
    else:
        op = _ops.apply_op("DenseToDenseSetOperation", [a, b], attrs,
                           "DenseToDenseSetOperation")
    return SparseTensor(*op.outputs)


def set_intersection(a, b, validate_indices=True) -> SparseTensor:
    """The values in both ``a``'s and ``b``'s set, per position."""
    a, b, _ = _operands(a, b)
    return _set_operation(a, b, "intersection", validate_indices)


def set_union(a, b, validate_indices=True) -> SparseTensor:
    """The values in ``a``'s or ``b``'s set, per position."""
    a, b, _ = _operands(a, b)
    return _set_operation(a, b, "union", validate_indices)


def set_difference(a, b, aminusb=True, validate_indices=True) -> SparseTensor:
    """The values of ``a``'s set not in ``b``'s (or the other way with ``aminusb=False``)."""
    a, b, flipped = _operands(a, b)
    if flipped:
        aminusb = not aminusb
    return _set_operation(a, b, "a-b" if aminusb else "b-a", validate_indices)
