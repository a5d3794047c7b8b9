"""Matrix structure ops (``tf.linalg`` and TF 1.x's ``tf.matrix_*``): band parts, batched
diagonals (the main diagonal, ``k = 0``), tensor diagonals, cross products, and composites
built from them as TF builds them (``eye``, ``trace``, ``adjoint``, ``matvec``, ``norm``,
``normalize``).

Schemas, shape rules, gradients and builders side by side; kernels in
``dflab.kernels.matrix_kernels``. Decompositions and solvers are in ``linalg_solve_ops``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops
from dflab.ops import math_ops as _m


def _with_rank_at_least(t, n, what):
    if t.shape.ndims is not None and t.shape.ndims < n:
        raise ValueError(f"{what} must be at least rank {n}, got shape {t.shape}")


# --- band part --------------------------------------------------------------------------------
def _band_part_infer(op):
    x = op.inputs[0]
    _with_rank_at_least(x, 2, "input")
    return [(x.dtype.base_dtype, x.shape)]


register_op("MatrixBandPart", _band_part_infer)


@RegisterGradient("MatrixBandPart")
def _band_part_grad(op, grad):
    return [band_part(grad, op.inputs[1], op.inputs[2]), None, None]


def band_part(input, num_lower, num_upper, name=None):  # noqa: A002 - TF's name
    """Zero everything outside the band of ``num_lower`` sub- and ``num_upper`` super-
    diagonals (negative: keep the whole triangle)."""
    x = _ops.convert_to_tensor(input)
    lo = _ops.convert_to_tensor(num_lower, dtype=_dt.int64
                                if getattr(num_lower, "dtype", None) == _dt.int64 else _dt.int32)
    hi = _ops.convert_to_tensor(num_upper, dtype=lo.dtype.base_dtype)
    return _ops.apply_op("MatrixBandPart", [x, lo, hi], None, name).outputs[0]


# --- the main diagonal of batched matrices ------------------------------------------------------
def _diag_infer(op):
    d = op.inputs[0]
    _with_rank_at_least(d, 1, "diagonal")
    shape = d.shape
    if shape.ndims is None:
        return [(d.dtype.base_dtype, TensorShape(None))]
    dims = shape.as_list()
    return [(d.dtype.base_dtype, TensorShape(dims + [dims[-1]]))]


def _diag_part_infer(op):
    x = op.inputs[0]
    _with_rank_at_least(x, 2, "input")
    if x.shape.ndims is None:
        return [(x.dtype.base_dtype, TensorShape(None))]
    dims = x.shape.as_list()
    r, c = dims[-2], dims[-1]
    n = None if r is None or c is None else min(r, c)
    return [(x.dtype.base_dtype, TensorShape(dims[:-2] + [n]))]


def _set_diag_infer(op):
    x, d = op.inputs
    _with_rank_at_least(x, 2, "input")
    return [(x.dtype.base_dtype, x.shape)]


register_op("MatrixDiag", _diag_infer)
register_op("MatrixDiagPart", _diag_part_infer)
register_op("MatrixSetDiag", _set_diag_infer)


@RegisterGradient("MatrixDiag")
def _matrix_diag_grad(op, grad):
    return [matrix_diag_part(grad)]


@RegisterGradient("MatrixDiagPart")
def _matrix_diag_part_grad(op, grad):
    x = op.inputs[0]
    if x.shape.is_fully_defined() and x.shape.as_list()[-1] == x.shape.as_list()[-2]:
        return [matrix_diag(grad)]
    return [matrix_set_diag(array_ops.zeros_like(x), grad)]


@RegisterGradient("MatrixSetDiag")
def _matrix_set_diag_grad(op, grad):
    return [matrix_set_diag(grad, array_ops.zeros_like(op.inputs[1])),
            matrix_diag_part(grad)]


def _main_diagonal_only(k):
    if k not in (0, None) and not (isinstance(k, (list, tuple)) and list(k) in ([0], [0, 0])):
        raise NotImplementedError("dflab supports the main diagonal only (k=0)")


def matrix_diag(diagonal, name="diag", k=0, num_rows=-1, num_cols=-1, padding_value=0,
                align="RIGHT_LEFT"):
    """Square matrices with ``diagonal``'s last axis on their diagonals."""
    _main_diagonal_only(k)
    if num_rows != -1 or num_cols != -1:
        raise NotImplementedError("dflab's matrix_diag makes square matrices only")
    return _ops.apply_op("MatrixDiag", [_ops.convert_to_tensor(diagonal)], None,
                         name).outputs[0]


def matrix_diag_part(input, name="diag_part", k=0, padding_value=0,  # noqa: A002
                     align="RIGHT_LEFT"):
    """The main diagonals of a batch of matrices."""
    _main_diagonal_only(k)
    return _ops.apply_op("MatrixDiagPart", [_ops.convert_to_tensor(input)], None,
                         name).outputs[0]


def matrix_set_diag(input, diagonal, name="set_diag", k=0, align="RIGHT_LEFT"):  # noqa: A002
    """``input`` with its main diagonals replaced by ``diagonal``."""
    _main_diagonal_only(k)
    x = _ops.convert_to_tensor(input)
    d = _ops.convert_to_tensor(diagonal, dtype=x.dtype.base_dtype)
    return _ops.apply_op("MatrixSetDiag", [x, d], None, name).outputs[0]


# --- tensor diagonals ---------------------------------------------------------------------------
def _tensor_diag_infer(op):
    x = op.inputs[0]
    if x.shape.ndims is None:
        return [(x.dtype.base_dtype, TensorShape(None))]
    dims = x.shape.as_list()
    return [(x.dtype.base_dtype, TensorShape(dims + dims))]


def _tensor_diag_part_infer(op):
    x = op.inputs[0]
    if x.shape.ndims is None:
        return [(x.dtype.base_dtype, TensorShape(None))]
    if x.shape.ndims % 2:
        raise ValueError(f"diag_part's input must have an even rank, got shape {x.shape}")
    dims = x.shape.as_list()
    half = len(dims) // 2
    out = [a if a is not None else b for a, b in zip(dims[:half], dims[half:])]
    return [(x.dtype.base_dtype, TensorShape(out))]


register_op("Diag", _tensor_diag_infer)
register_op("DiagPart", _tensor_diag_part_infer)


@RegisterGradient("Diag")
def _tensor_diag_grad(op, grad):
    return [diag_part(grad)]


@RegisterGradient("DiagPart")
def _tensor_diag_part_grad(op, grad):
    return [diag(grad)]


def diag(diagonal, name=None):
    """``out[i1..ik, i1..ik] = diagonal[i1..ik]``, zeros elsewhere (rank doubles)."""
    return _ops.apply_op("Diag", [_ops.convert_to_tensor(diagonal)], None, name).outputs[0]


def diag_part(input, name=None):  # noqa: A002
    """The inverse of ``diag``: ``out[i..] = input[i.., i..]``."""
    return _ops.apply_op("DiagPart", [_ops.convert_to_tensor(input)], None, name).outputs[0]


# --- cross product ------------------------------------------------------------------------------
def _cross_infer(op):
    a, b = op.inputs
    if a.dtype.base_dtype is not b.dtype.base_dtype:
        raise TypeError("cross: a and b must have the same dtype")
    shape = a.shape.merge_with(b.shape)
    if shape.ndims is not None and shape.as_list()[-1] not in (None, 3):
        raise ValueError(f"Dimension must be 3 but is {shape.as_list()[-1]}")
    return [(a.dtype.base_dtype, shape)]


register_op("Cross", _cross_infer)


@RegisterGradient("Cross")
def _cross_grad(op, grad):
    u, v = op.inputs
    return [cross(v, grad), cross(grad, u)]


def cross(a, b, name=None):
    """Pairwise cross products of 3-vectors along the last axis."""
    a, b = _m._pair(a, b)
    return _ops.apply_op("Cross", [a, b], None, name).outputs[0]


# --- composites ---------------------------------------------------------------------------------
def eye(num_rows, num_columns=None, batch_shape=None, dtype=_dt.float32, name=None):
    """Identity matrices (``num_rows x num_columns``, batched by ``batch_shape``)."""
    with _ops.name_scope(name, "eye", [num_rows, num_columns, batch_shape]):
        dtype = _dt.as_dtype(dtype).base_dtype
        static_batch = batch_shape is None or (isinstance(batch_shape, (list, tuple)) and all(
            isinstance(v, (int, np.integer)) for v in batch_shape))
        if static_batch and all(isinstance(v, (int, np.integer)) or v is None
                                for v in (num_rows, num_columns)):
            cols = num_rows if num_columns is None else num_columns
            value = np.eye(num_rows, cols, dtype=dtype.as_numpy_dtype)
            if batch_shape is not None:
                value = np.broadcast_to(value, list(batch_shape) + [num_rows, cols]).copy()
            return _ops.convert_to_tensor(value, dtype=dtype)
        rows = _ops.convert_to_tensor(num_rows, dtype=_dt.int32)
        cols = rows if num_columns is None else _ops.convert_to_tensor(num_columns, _dt.int32)
        n = _m.minimum(rows, cols)
        batch = [] if batch_shape is None else [_ops.convert_to_tensor(batch_shape, _dt.int32)]
        ones = array_ops.ones(array_ops.concat(batch + [array_ops.reshape(n, [1])], 0),
                              dtype=dtype)
        square = matrix_diag(ones)
        pad = array_ops.stack([_m.subtract(rows, n), _m.subtract(cols, n)])
        lead = array_ops.zeros(array_ops.stack([array_ops.rank(square) - 2, 2]), _dt.int32)
        paddings = array_ops.concat([lead, array_ops.stack([[0, pad[0]], [0, pad[1]]])], 0)
        return array_ops.pad(square, paddings)


def trace(x, name=None):
    """The sum of each matrix's main diagonal."""
    with _ops.name_scope(name, "Trace", [x]) as scope:
        x = _ops.convert_to_tensor(x, name="x")
        return _m.reduce_sum(matrix_diag_part(x), [-1], name=scope)


def adjoint(matrix, name=None):
    """The conjugate transpose of the last two axes."""
    with _ops.name_scope(name, "adjoint", [matrix]):
        matrix = _ops.convert_to_tensor(matrix, name="matrix")
        return array_ops.matrix_transpose(matrix, conjugate=True)


def matvec(a, b, transpose_a=False, adjoint_a=False, a_is_sparse=False, b_is_sparse=False,
           name=None):
    """``a @ b`` for matrices ``a`` and vectors ``b`` (the last axis)."""
    with _ops.name_scope(name, "MatVec", [a, b]):
        b = _ops.convert_to_tensor(b)
        out = _m.matmul(a, array_ops.expand_dims(b, -1), transpose_a=transpose_a,
                        adjoint_a=adjoint_a)
        return array_ops.squeeze(out, axis=-1)


def _norm_axes(tensor, axis):
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)):
        return list(axis)
    return int(axis)


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None,  # noqa: A002
         keep_dims=None):
    """Vector norms (``ord`` 1, 2, inf, any p, "euclidean") over one axis or all, and
    matrix norms ("fro", "euclidean", 1, inf) over a pair of axes."""
    keepdims = bool(keepdims if keep_dims is None else keep_dims)
    axis = _norm_axes(tensor, axis)
    is_matrix = isinstance(axis, list) and len(axis) == 2
    if isinstance(axis, list) and len(axis) == 1:
        axis = axis[0]
    supported = ("fro", "euclidean", 1, np.inf) if is_matrix else ("euclidean", "fro")
    if is_matrix and ord not in supported:
        raise ValueError(f"'ord' must be a supported matrix norm in {supported}, got {ord}")
    if not is_matrix and isinstance(axis, list):
        raise ValueError(f"'axis' must be None, an integer, or a pair, got {axis}")
    if not is_matrix and not (ord in supported or (isinstance(ord, (int, float)) and
                                                    ord > 0)):
        raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
    with _ops.name_scope(name, "norm", [tensor]):
        t = _ops.convert_to_tensor(tensor)
        if ord in ("fro", "euclidean", 2, 2.0) and not (is_matrix and ord in (2, 2.0)):
            squares = _m.square(_m.abs(t)) if t.dtype.base_dtype.is_complex else _m.square(t)
            result = _m.sqrt(_m.reduce_sum(squares, axis, keepdims=True))
        elif is_matrix:
            rows, cols = axis
            if ord == 1:
                result = _m.reduce_max(_m.reduce_sum(_m.abs(t), rows, keepdims=True), cols,
                                       keepdims=True)
            else:
                result = _m.reduce_max(_m.reduce_sum(_m.abs(t), cols, keepdims=True), rows,
                                       keepdims=True)
        elif ord == np.inf:
            result = _m.reduce_max(_m.abs(t), axis, keepdims=True)
        else:
            p = _ops.convert_to_tensor(float(ord), dtype=t.dtype.base_dtype
                                       if not t.dtype.base_dtype.is_complex else _dt.float32)
            result = _m.pow(_m.reduce_sum(_m.pow(_m.abs(t), p), axis, keepdims=True),
                            _m.reciprocal(p))
        if not keepdims:
            result = array_ops.squeeze(result, axis)
        return result


def normalize(tensor, ord="euclidean", axis=None, name=None):  # noqa: A002
    """(``tensor / norm``, ``norm``)."""
    with _ops.name_scope(name, "normalize", [tensor]):
        t = _ops.convert_to_tensor(tensor)
        n = norm(t, ord=ord, axis=axis, keepdims=True)
        return _m.truediv(t, n), n


matrix_band_part = band_part  # TF 1.x's top-level spelling

__all__ = ["cross", "diag", "diag_part", "eye", "matrix_band_part", "matrix_diag",
           "matrix_diag_part", "matrix_set_diag", "norm", "trace"]
