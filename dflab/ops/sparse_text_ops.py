"""Ops whose inputs or outputs are ``SparseTensor``s of sequences: ``tf.edit_distance``
(Levenshtein distances between sparse sequences), TF1's ``tf.string_split`` /
``tf.strings.split`` (strings split into a ``[batch, tokens]`` ``SparseTensor``) and
``tf.sparse.cross`` (feature crosses as strings).

Schemas and builders; kernels in ``dflab.kernels.sparse_kernels``. The outputs match TF's
``EditDistance``, ``StringSplit``, ``StringSplitV2`` and ``SparseCrossV2`` op for op.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.sparse_tensor import SparseTensor
from dflab.framework.sparse_tensor import convert_to_sparse_tensor as _sparse
from dflab.framework.tensor_shape import TensorShape, unknown_shape
from dflab.ops import math_ops


def _edit_distance_infer(op):
    h_shape, t_shape = constant_value(op.inputs[2]), constant_value(op.inputs[5])
    if h_shape is None or t_shape is None:
        rank = op.inputs[2].shape.dims[0].value if op.inputs[2].shape.ndims else None
        out = unknown_shape() if rank is None else TensorShape([None] * (rank - 1))
    else:
        out = TensorShape([int(d) for d in np.maximum(h_shape[:-1], t_shape[:-1])])
    return [(_dt.float32, out)]


def _split_infer(op):
    return [(_dt.int64, TensorShape([None, 2])), (_dt.string, TensorShape([None])),
            (_dt.int64, TensorShape([2]))]


register_op("EditDistance", _edit_distance_infer)
register_op("StringSplit", _split_infer)
register_op("StringSplitV2", _split_infer)
for _name in ("EditDistance", "StringSplit", "StringSplitV2"):
    NotDifferentiable(_name)


def edit_distance(hypothesis, truth, normalize=True, name="edit_distance"):
    """The Levenshtein distance between each sequence (last dimension) of ``hypothesis`` and
    of ``truth``, divided by the truth's length when ``normalize`` (inf for an empty truth
    against a non-empty hypothesis)."""
    if not isinstance(hypothesis, SparseTensor) and not hasattr(hypothesis, "_fields"):
        raise TypeError("Hypothesis must be a SparseTensor.")
    if not isinstance(truth, SparseTensor) and not hasattr(truth, "_fields"):
        raise TypeError("Truth must be a SparseTensor.")
    hypothesis, truth = _sparse(hypothesis), _sparse(truth)
    if hypothesis.dtype.base_dtype is not truth.dtype.base_dtype:
        raise TypeError(f"Input 'truth_values' of 'EditDistance' Op has type "
                        f"{truth.dtype.name} that does not match type "
                        f"{hypothesis.dtype.name} of argument 'hypothesis_values'.")
    return _ops.apply_op("EditDistance", [hypothesis.indices, hypothesis.values,
                                          hypothesis.dense_shape, truth.indices,
                                          truth.values, truth.dense_shape],
                         {"normalize": bool(normalize)}, name).outputs[0]


def _split_result(op) -> SparseTensor:
    return SparseTensor(*op.outputs)


def string_split(source, sep=None, skip_empty=True, delimiter=None,
                 result_type="SparseTensor"):
    """TF1's ``tf.string_split``: each string of the vector ``source`` split at any byte of
    ``sep`` (a space by default; characters when empty), empty tokens skipped unless told
    otherwise, as a ``[len(source), longest]`` ``SparseTensor`` of tokens."""
    if sep is not None and delimiter is not None:
        raise ValueError("Cannot specify both 'sep' and 'delimiter'")
    sep = delimiter if sep is None else sep
    _sparse_only(result_type)
    source = _ops.convert_to_tensor(source, dtype=_dt.string, name="source")
    source.shape.with_rank(1)
    delim = _ops.convert_to_tensor(" " if sep is None else sep, dtype=_dt.string,
                                   name="delimiter")
    return _split_result(_ops.apply_op("StringSplit", [source, delim],
                                       {"skip_empty": bool(skip_empty)}, "StringSplit"))


def strings_split(input=None, sep=None, maxsplit=-1, result_type="SparseTensor",  # noqa: A002
                  source=None, name=None):
    """TF1's ``tf.strings.split``: Python's ``str.split(sep, maxsplit)`` of each string (on
    whitespace runs when ``sep`` is None or empty), as a ``SparseTensor`` of tokens."""
    if input is not None and source is not None:
        raise ValueError("Cannot specify both 'input' and 'source'")
    input = source if input is None else input  # noqa: A001
    _sparse_only(result_type)
    with _ops.name_scope(name, "StringSplit"):
        source_t = _ops.convert_to_tensor(input, dtype=_dt.string, name="input")
        if source_t.shape.ndims == 0:
            source_t = _ops.convert_to_tensor([input], dtype=_dt.string, name="input")
        source_t.shape.with_rank(1)
        sep_t = _ops.convert_to_tensor("" if sep is None else sep, dtype=_dt.string,
                                       name="sep")
        return _split_result(_ops.apply_op("StringSplitV2", [source_t, sep_t],
                                           {"maxsplit": int(maxsplit)}, "StringSplitV2"))


def _sparse_only(result_type) -> None:
    if result_type == "RaggedTensor":
        raise NotImplementedError("result_type='RaggedTensor' needs RaggedTensor, which dflab "
                                  "does not model; use the default 'SparseTensor'")
    if result_type != "SparseTensor":
        raise ValueError("result_type must be 'RaggedTensor' or 'SparseTensor'.")




def _cross_infer(op):
    return [(_dt.int64, TensorShape([None, 2])), (_dt.string, TensorShape([None])),
            (_dt.int64, TensorShape([2]))]


register_op("SparseCrossV2", _cross_infer)
NotDifferentiable("SparseCrossV2")


def sparse_cross(inputs, name=None, separator=None) -> SparseTensor:
    """The crosses of the features of each row of ``inputs`` (``SparseTensor``s and dense
    ``[batch, k]`` tensors): every combination, one feature of each input (sparse inputs
    first), joined by ``separator`` (``"_X_"``)."""
    if not isinstance(inputs, (tuple, list)):
        raise TypeError("Inputs must be a list")
    if not all(isinstance(i, (SparseTensor, _ops.Tensor)) for i in inputs):
        raise TypeError("All inputs must be Tensor or SparseTensor.")
    sparse = [i for i in inputs if isinstance(i, SparseTensor)]
    # Numbers are crossed as int64 (TF casts them), strings as they are.
    sparse = [s if s.dtype.base_dtype is _dt.string else s.with_values(
        math_ops.cast(s.values, _dt.int64)) for s in sparse]
    dense = [d if d.dtype.base_dtype is _dt.string else math_ops.cast(d, _dt.int64)
             for d in inputs if not isinstance(d, SparseTensor)]
    sep = _ops.convert_to_tensor("_X_" if separator is None else separator, _dt.string)
    op = _ops.apply_op("SparseCrossV2", [s.indices for s in sparse]
                       + [s.values for s in sparse] + [s.dense_shape for s in sparse]
                       + dense + [sep], {"N": len(sparse)}, name or "SparseCrossV2")
    return SparseTensor(*op.outputs)


__all__ = ["edit_distance", "string_split"]
