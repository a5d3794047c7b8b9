"""Decompositions and solvers of batched matrices (``tf.linalg``; TF 1.x's ``tf.cholesky``,
``tf.matrix_inverse``, ``tf.svd`` …): Cholesky, determinants, inverse, solves (general,
triangular, least squares), QR, SVD, symmetric eigendecomposition, LU, matrix square root,
and composites built from them as TF builds them (``cholesky_solve``, ``logdet``, ``pinv``,
``matrix_rank``, ``lu_solve``, ``expm`` …).

Schemas, shape rules, gradients (TF's ``linalg_grad`` formulas) and builders side by side;
kernels in ``dflab.kernels.matrix_kernels``.
"""

from __future__ import annotations

import collections

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape, broadcast_shapes
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops.matrix_ops import (
    adjoint,
    band_part,
    eye,
    matrix_diag,
    matrix_diag_part,
    matrix_set_diag,
)


def _float_or_complex(op, t):
    dt = t.dtype.base_dtype
    if not (dt.is_floating or dt.is_complex):
        raise TypeError(f"{op.type}: Value passed has DataType {dt.name} not in the list of "
                        "allowed values: float16, float32, float64, complex64, complex128")
    return dt


def _square(op, t):
    dims = t.shape.with_rank_at_least(2).as_list() if t.shape.ndims is not None else None
    if dims is not None and None not in dims[-2:] and dims[-1] != dims[-2]:
        raise ValueError(f"{op.type}: Dimensions must be equal, but are {dims[-2]} and "
                         f"{dims[-1]} (a square matrix is needed)")
    return dims


def _same_as_input(op):
    x = op.inputs[0]
    dt = _float_or_complex(op, x)
    _square(op, x)
    return [(dt, x.shape)]


def _batch_scalar(op):
    x = op.inputs[0]
    dt = _float_or_complex(op, x)
    dims = _square(op, x)
    return [(dt, TensorShape(None if dims is None else dims[:-2]))]


register_op("Cholesky", _same_as_input)
register_op("MatrixInverse", _same_as_input)
register_op("MatrixSquareRoot", _same_as_input)
register_op("MatrixDeterminant", _batch_scalar)


def _slogdet_infer(op):
    (shape,) = [s for _, s in _batch_scalar(op)]
    dt = op.inputs[0].dtype.base_dtype
    return [(dt, shape), (dt, shape)]


register_op("LogMatrixDeterminant", _slogdet_infer)


def _solve_infer(op):
    a, b = op.inputs
    dt = _float_or_complex(op, a)
    if b.dtype.base_dtype is not dt:
        raise TypeError(f"{op.type}: matrix and rhs must have the same dtype")
    _square(op, a)
    if a.shape.ndims is None or b.shape.ndims is None:
        return [(dt, TensorShape(None))]
    sa, sb = a.shape.as_list(), b.shape.as_list()
    if sa[-1] is not None and sb[-2] is not None and sa[-1] != sb[-2]:
        raise ValueError(f"{op.type}: Dimensions must be equal, but are {sa[-1]} and "
                         f"{sb[-2]}")
    batch = broadcast_shapes(TensorShape(sa[:-2]), TensorShape(sb[:-2])) \
        if op.type == "MatrixTriangularSolve" else TensorShape(sa[:-2]).merge_with(
            TensorShape(sb[:-2]))
    return [(dt, batch.concatenate([sa[-1], sb[-1]]))]


register_op("MatrixSolve", _solve_infer)
register_op("MatrixTriangularSolve", _solve_infer)


def _lstsq_infer(op):
    a, b, _ = op.inputs
    dt = _float_or_complex(op, a)
    if a.shape.ndims is None or b.shape.ndims is None:
        return [(dt, TensorShape(None))]
    sa, sb = a.shape.as_list(), b.shape.as_list()
    return [(dt, TensorShape(sa[:-2]).concatenate([sa[-1], sb[-1]]))]


register_op("MatrixSolveLs", _lstsq_infer)


def _qr_infer(op):
    x = op.inputs[0]
    dt = _float_or_complex(op, x)
    if x.shape.ndims is None:
        return [(dt, TensorShape(None)), (dt, TensorShape(None))]
    dims = x.shape.with_rank_at_least(2).as_list()
    m, n = dims[-2], dims[-1]
    k = None if m is None or n is None else min(m, n)
    full = op.get_attr("full_matrices")
    q_cols, r_rows = (m, m) if full else (k, k)
    return [(dt, TensorShape(dims[:-2] + [m, q_cols])), (dt, TensorShape(dims[:-2] + [r_rows, n]))]


register_op("Qr", _qr_infer)


def _svd_infer(op):
    x = op.inputs[0]
    dt = _float_or_complex(op, x)
    if x.shape.ndims is None:
        return [(dt, TensorShape(None))] * 3
    dims = x.shape.with_rank_at_least(2).as_list()
    m, n = dims[-2], dims[-1]
    k = None if m is None or n is None else min(m, n)
    batch = dims[:-2]
    real = {_dt.complex64: _dt.float32, _dt.complex128: _dt.float64}.get(dt, dt)
    if not op.get_attr("compute_uv"):
        return [(real, TensorShape(batch + [k])), (dt, TensorShape([0])),
                (dt, TensorShape([0]))]
    full = op.get_attr("full_matrices")
    return [(real, TensorShape(batch + [k])), (dt, TensorShape(batch + [m, m if full else k])),
            (dt, TensorShape(batch + [n, n if full else k]))]


register_op("Svd", _svd_infer)


def _eigh_infer(op):
    x = op.inputs[0]
    dt = _float_or_complex(op, x)
    dims = _square(op, x)
    real = {_dt.complex64: _dt.float32, _dt.complex128: _dt.float64}.get(dt, dt)
    if dims is None:
        return [(real, TensorShape(None)), (dt, TensorShape(None))]
    v_shape = TensorShape(dims) if op.get_attr("compute_v") else TensorShape([0])
    return [(real, TensorShape(dims[:-1])), (dt, v_shape)]


register_op("SelfAdjointEigV2", _eigh_infer)


def _lu_infer(op):
    x = op.inputs[0]
    dt = _float_or_complex(op, x)
    dims = _square(op, x)
    return [(dt, x.shape), (op.get_attr("output_idx_type"),
                            TensorShape(None if dims is None else dims[:-1]))]


register_op("Lu", _lu_infer)
NotDifferentiable("Lu")


def _logm_infer(op):
    x = op.inputs[0]
    dt = x.dtype.base_dtype
    if not dt.is_complex:
        raise TypeError(f"Value passed to parameter 'input' has DataType {dt.name} not in list "
                        "of allowed values: complex64, complex128")
    _square(op, x)
    return [(dt, x.shape)]


# TF registers no gradient for MatrixLogarithm: tf.gradients through it is an error there too.
register_op("MatrixLogarithm", _logm_infer)


# --- builders -------------------------------------------------------------------------------------
def _unary(op_type, x, name, attrs=None):
    return _ops.apply_op(op_type, [_ops.convert_to_tensor(x)], attrs, name).outputs[0]


def cholesky(input, name=None):  # noqa: A002 - TF's name
    """The lower-triangular ``L`` with ``L @ L^H = input`` (symmetric positive definite)."""
    return _unary("Cholesky", input, name)


def matrix_inverse(input, adjoint=False, name=None):  # noqa: A002
    return _unary("MatrixInverse", input, name, {"adjoint": bool(adjoint)})


def matrix_determinant(input, name=None):  # noqa: A002
    return _unary("MatrixDeterminant", input, name)


# TF's result types of several outputs: named tuples (``qr(a).q``).
SlogdetOutput = collections.namedtuple("LogMatrixDeterminant", ["sign", "log_abs_determinant"])
QrOutput = collections.namedtuple("Qr", ["q", "r"])
LuOutput = collections.namedtuple("Lu", ["lu", "p"])


def slogdet(input, name=None):  # noqa: A002
    """(sign, log |det|) of each matrix."""
    op = _ops.apply_op("LogMatrixDeterminant", [_ops.convert_to_tensor(input)], None, name)
    return SlogdetOutput(op.outputs[0], op.outputs[1])


def matrix_square_root(input, name=None):  # noqa: A002
    """The principal square root of each matrix."""
    return _unary("MatrixSquareRoot", input, name)


def logm(input, name=None):  # noqa: A002
    """The principal logarithm of each (complex) matrix: the ``X`` with ``expm(X) = input``
    whose eigenvalues have imaginary parts in ``(-pi, pi]``."""
    return _unary("MatrixLogarithm", input, name)


def _solve(op_type, matrix, rhs, attrs, name):
    a = _ops.convert_to_tensor(matrix)
    b = _ops.convert_to_tensor(rhs, dtype=a.dtype.base_dtype)
    return _ops.apply_op(op_type, [a, b], attrs, name).outputs[0]


def matrix_solve(matrix, rhs, adjoint=False, name=None):
    """``X`` with ``matrix @ X = rhs`` (``matrix^H`` with ``adjoint``)."""
    return _solve("MatrixSolve", matrix, rhs, {"adjoint": bool(adjoint)}, name)


def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """The solve against the lower (or upper) triangle of ``matrix``; batch dims broadcast."""
    return _solve("MatrixTriangularSolve", matrix, rhs,
                  {"lower": bool(lower), "adjoint": bool(adjoint)}, name)


def matrix_solve_ls(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """Least-squares solutions ``argmin |matrix X - rhs|^2 + l2 |X|^2`` (the normal
    equations through Cholesky with ``fast``; a complete orthogonal decomposition
    otherwise)."""
    a = _ops.convert_to_tensor(matrix)
    b = _ops.convert_to_tensor(rhs, dtype=a.dtype.base_dtype)
    l2 = _ops.convert_to_tensor(l2_regularizer, dtype=_dt.float64)
    return _ops.apply_op("MatrixSolveLs", [a, b, l2], {"fast": bool(fast)}, name).outputs[0]


def qr(input, full_matrices=False, name=None):  # noqa: A002
    """(q, r) with ``q`` orthonormal columns and ``r`` upper triangular."""
    op = _ops.apply_op("Qr", [_ops.convert_to_tensor(input)],
                       {"full_matrices": bool(full_matrices)}, name)
    return QrOutput(op.outputs[0], op.outputs[1])


def svd(tensor, full_matrices=False, compute_uv=True, name=None):
    """Singular values ``s`` (descending) and, with ``compute_uv``, ``u`` and ``v`` (not
    ``v^H``) with ``tensor = u @ diag(s) @ v^H``: returns (s, u, v) or s."""
    op = _ops.apply_op("Svd", [_ops.convert_to_tensor(tensor)],
                       {"full_matrices": bool(full_matrices), "compute_uv": bool(compute_uv)},
                       name)
    s, u, v = op.outputs
    return (s, u, v) if compute_uv else s


def self_adjoint_eig(tensor, name=None):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric/Hermitian matrices."""
    op = _ops.apply_op("SelfAdjointEigV2", [_ops.convert_to_tensor(tensor)],
                       {"compute_v": True}, name)
    return op.outputs[0], op.outputs[1]


def self_adjoint_eigvals(tensor, name=None):
    op = _ops.apply_op("SelfAdjointEigV2", [_ops.convert_to_tensor(tensor)],
                       {"compute_v": False}, name)
    return op.outputs[0]


def lu(input, output_idx_type=_dt.int32, name=None):  # noqa: A002
    """(lu, p): ``L`` (unit diagonal, below) and ``U`` packed in one matrix, and the row
    permutation ``p`` with ``input[p] = L @ U`` (partial pivoting)."""
    op = _ops.apply_op("Lu", [_ops.convert_to_tensor(input)],
                       {"output_idx_type": _dt.as_dtype(output_idx_type).base_dtype}, name)
    return LuOutput(op.outputs[0], op.outputs[1])


# --- gradients (TF's formulas) ----------------------------------------------------------------
def _scale_batch(values, like):
    """``values`` (batch shape) as ``[..., 1, 1]`` to scale ``like``'s matrices."""
    return array_ops.reshape(values, array_ops.concat([array_ops.shape(values), [1, 1]], 0))


@RegisterGradient("MatrixInverse")
def _inverse_grad(op, grad):
    ainv = op.outputs[0]
    adj = op.get_attr("adjoint")
    return [_m.negative(_m.matmul(ainv, _m.matmul(grad, ainv, adjoint_a=adj,
                                                  adjoint_b=not adj), adjoint_a=not adj))]


@RegisterGradient("MatrixDeterminant")
def _determinant_grad(op, grad):
    a, c = op.inputs[0], op.outputs[0]
    return [_m.multiply(_scale_batch(_m.multiply(grad, c), a), matrix_inverse(a, adjoint=True))]


@RegisterGradient("LogMatrixDeterminant")
def _slogdet_grad(op, _grad_sign, grad_log):
    a = op.inputs[0]
    return [_m.multiply(_scale_batch(grad_log, a), matrix_inverse(a, adjoint=True))]


@RegisterGradient("Cholesky")
def _cholesky_grad(op, grad):
    chol = op.outputs[0]
    n = array_ops.shape(chol)[-1]
    batch = array_ops.shape(chol)[:-2]
    identity = eye(n, batch_shape=batch, dtype=chol.dtype.base_dtype)
    l_inverse = matrix_triangular_solve(chol, identity)
    middle = _m.matmul(chol, grad, adjoint_a=True)
    middle = matrix_set_diag(middle, _m.multiply(0.5, matrix_diag_part(middle)))
    middle = band_part(middle, -1, 0)
    grad_a = _m.matmul(_m.matmul(l_inverse, middle, adjoint_a=True), l_inverse)
    grad_a = _m.add(grad_a, adjoint(grad_a))
    return [_m.multiply(grad_a, 0.5)]


@RegisterGradient("MatrixSolve")
def _solve_grad(op, grad):
    a = op.inputs[0]
    adj = op.get_attr("adjoint")
    c = op.outputs[0]
    grad_b = matrix_solve(a, grad, adjoint=not adj)
    grad_a = _m.matmul(c, grad_b, adjoint_b=True) if adj else _m.matmul(grad_b, c,
                                                                        adjoint_b=True)
    return [_m.negative(grad_a), grad_b]


@RegisterGradient("MatrixTriangularSolve")
def _triangular_solve_grad(op, grad):
    a, b = op.inputs
    adj, lower = op.get_attr("adjoint"), op.get_attr("lower")
    c = op.outputs[0]
    grad_b = matrix_triangular_solve(a, grad, lower=lower, adjoint=not adj)
    grad_a = _m.matmul(c, grad_b, adjoint_b=True) if adj else _m.matmul(grad_b, c,
                                                                        adjoint_b=True)
    grad_a = _m.negative(grad_a)
    grad_a = band_part(grad_a, -1, 0) if lower else band_part(grad_a, 0, -1)
    if a.shape.is_fully_defined() and b.shape.is_fully_defined() and \
            a.shape.as_list()[:-2] == b.shape.as_list()[:-2]:
        return [grad_a, grad_b]
    # Only batch dims can have been broadcast: the generic helper sums over them.
    return [_m._unbroadcast(grad_a, a), _m._unbroadcast(grad_b, b)]


def _safe_reciprocal(x, epsilon=1e-20):
    return _m.multiply(x, _m.reciprocal(_m.add(_m.multiply(x, x), epsilon)))


@RegisterGradient("SelfAdjointEigV2")
def _eigh_grad(op, grad_e, grad_v):
    e = op.outputs[0]
    if op.get_attr("compute_v"):
        v = op.outputs[1]
        f = matrix_set_diag(
            _safe_reciprocal(_m.subtract(array_ops.expand_dims(e, -2),
                                         array_ops.expand_dims(e, -1))),
            array_ops.zeros_like(e))
        grad_a = _m.matmul(v, _m.matmul(
            _m.add(matrix_diag(grad_e), _m.multiply(f, _m.matmul(v, grad_v, adjoint_a=True))),
            v, adjoint_b=True))
    else:
        _, v = self_adjoint_eig(op.inputs[0])
        grad_a = _m.matmul(v, _m.matmul(matrix_diag(grad_e), v, adjoint_b=True))
    grad_a = band_part(_m.add(grad_a, adjoint(grad_a)), -1, 0)
    return [matrix_set_diag(grad_a, _m.multiply(0.5, matrix_diag_part(grad_a)))]


def _triangular_solve_right(x, r):
    """``x @ inverse(r)^H`` for upper-triangular ``r``."""
    return adjoint(matrix_triangular_solve(r, adjoint(x), lower=False, adjoint=False))


def _qr_grad_square_or_deep(q, r, dq, dr):
    qdq = _m.matmul(q, dq, adjoint_a=True)
    qdq_ = _m.subtract(qdq, adjoint(qdq))
    rdr = _m.matmul(r, dr, adjoint_b=True)
    rdr_ = _m.subtract(rdr, adjoint(rdr))
    tril = band_part(_m.add(qdq_, rdr_), -1, 0)
    grad_a = _m.matmul(q, _m.add(dr, _triangular_solve_right(tril, r)))
    grad_b = _triangular_solve_right(_m.subtract(dq, _m.matmul(q, qdq)), r)
    return _m.add(grad_a, grad_b)


@RegisterGradient("Qr")
def _qr_grad(op, dq, dr):
    q, r = op.outputs
    rs, qs = r.shape.as_list(), q.shape.as_list()
    if None in (rs[-2], rs[-1]):
        raise NotImplementedError("QrGrad not implemented with dynamic shapes.")
    if rs[-2] > rs[-1] and qs[-2] == qs[-1]:
        raise NotImplementedError("QrGrad not implemented when nrows > ncols and "
                                  "full_matrices is true.")
    num_rows, num_cols = qs[-2], rs[-1]
    if num_rows >= num_cols:
        return [_qr_grad_square_or_deep(q, r, dq, dr)]
    a = op.inputs[0]
    y = a[..., :, num_rows:]
    u = r[..., :, :num_rows]
    dv = dr[..., :, num_rows:]
    du = dr[..., :, :num_rows]
    dy = _m.matmul(q, dv)
    dx = _qr_grad_square_or_deep(q, u, _m.add(dq, _m.matmul(y, dv, adjoint_b=True)), du)
    return [array_ops.concat([dx, dy], axis=-1)]


@RegisterGradient("Svd")
def _svd_grad(op, grad_s, grad_u, grad_v):
    a = op.inputs[0]
    a_shape = a.shape.with_rank_at_least(2)
    grad_s = _m.cast(grad_s, a.dtype.base_dtype)
    grad_s_mat = matrix_diag(grad_s)
    if not op.get_attr("compute_uv"):
        _, u, v = svd(a, compute_uv=True)
        out = _m.matmul(u, _m.matmul(grad_s_mat, v, adjoint_b=True))
        out.set_shape(a_shape)
        return [out]
    full = op.get_attr("full_matrices")
    m, n = a_shape.as_list()[-2:]
    if m is None or n is None:
        raise NotImplementedError("SVD gradient has not been implemented for input with "
                                  "unknown inner matrix shape.")
    s = _m.cast(op.outputs[0], a.dtype.base_dtype)
    u, v = op.outputs[1], op.outputs[2]
    use_adjoint = m > n
    if use_adjoint:
        m, n = n, m
        u, v = v, u
        grad_u, grad_v = grad_v, grad_u
    if full and abs(m - n) > 1:
        raise NotImplementedError("svd gradient is not implemented for abs(m - n) > 1 when "
                                  "full_matrices is True.")
    s_mat = matrix_diag(s)
    s2 = _m.square(s)
    f = matrix_set_diag(_safe_reciprocal(_m.subtract(array_ops.expand_dims(s2, -2),
                                                     array_ops.expand_dims(s2, -1))),
                        array_ops.zeros_like(s))
    s_inv_mat = matrix_diag(_safe_reciprocal(s))
    v1 = v[..., :, :m]
    grad_v1 = grad_v[..., :, :m]
    u_gu = _m.matmul(u, grad_u, adjoint_a=True)
    v_gv = _m.matmul(v1, grad_v1, adjoint_a=True)
    f_u = _m.multiply(f, u_gu)
    f_v = _m.multiply(f, v_gv)
    term1_nouv = _m.add(_m.add(grad_s_mat, _m.matmul(_m.add(f_u, adjoint(f_u)), s_mat)),
                        _m.matmul(s_mat, _m.add(f_v, adjoint(f_v))))
    term1 = _m.matmul(u, _m.matmul(term1_nouv, v1, adjoint_b=True))
    if m == n:
        before = term1
    else:
        gv1t = array_ops.matrix_transpose(grad_v1, conjugate=True)
        gv1t_v1 = _m.matmul(gv1t, v1)
        term2_nous = _m.subtract(gv1t, _m.matmul(gv1t_v1, v1, adjoint_b=True))
        if full:
            v2 = v[..., :, m:n]
            grad_v2 = grad_v[..., :, m:n]
            v1t_gv2 = _m.matmul(v1, grad_v2, adjoint_a=True)
            term2_nous = _m.subtract(term2_nous, _m.matmul(v1t_gv2, v2, adjoint_b=True))
        term2 = _m.matmul(_m.matmul(u, s_inv_mat), term2_nous)
        before = _m.add(term1, term2)
    out = array_ops.matrix_transpose(before, conjugate=True) if use_adjoint else before
    out.set_shape(a_shape)
    return [out]


@RegisterGradient("MatrixSolveLs")
def _lstsq_grad(op, grad):
    a, b, l2 = op.inputs
    x = op.outputs[0]
    fast = op.get_attr("fast")
    if not fast:
        raise NotImplementedError("Gradient not defined for fast=False")
    dims = a.shape.as_list()
    lam = _m.cast(l2, a.dtype.base_dtype)
    if None not in dims[-2:] and dims[-2] >= dims[-1]:
        # Overdetermined: x = (A^H A + l2 I)^-1 A^H b.
        chol = _regularized_gramian_cholesky(a, lam, first_kind=True)
        z = cholesky_solve(chol, grad)
        xzt = _m.matmul(x, z, adjoint_b=True)
        zx_sym = _m.add(xzt, adjoint(xzt))
        grad_a = _m.add(_m.negative(_m.matmul(a, zx_sym)), _m.matmul(b, z, adjoint_b=True))
        grad_b = _m.matmul(a, z)
        return [grad_a, grad_b, None]
    # Underdetermined: x = A^H (A A^H + l2 I)^-1 b.
    chol = _regularized_gramian_cholesky(a, lam, first_kind=False)
    grad_b = cholesky_solve(chol, _m.matmul(a, grad))
    tmp = cholesky_solve(chol, b)
    a1 = _m.matmul(tmp, a, adjoint_a=True)
    a1 = _m.negative(_m.matmul(grad_b, a1))
    a2 = _m.subtract(grad, _m.matmul(a, grad_b, adjoint_a=True))
    a2 = _m.matmul(tmp, a2, adjoint_b=True)
    return [_m.add(a1, a2), grad_b, None]


def _regularized_gramian_cholesky(a, lam, first_kind):
    gram = _m.matmul(a, a, adjoint_a=first_kind, adjoint_b=not first_kind)
    n = array_ops.shape(gram)[-1]
    identity = eye(n, batch_shape=array_ops.shape(gram)[:-2], dtype=a.dtype.base_dtype)
    return cholesky(_m.add(gram, _m.multiply(lam, identity)))


@RegisterGradient("MatrixSquareRoot")
def _sqrtm_grad(op, grad):
    # d(sqrtm(A)) solves S dS + dS S = dA: the gradient solves S^H G + G S^H = grad, a
    # Sylvester equation, through the Kronecker sum of S^H with itself.
    s = op.outputs[0]
    shape = array_ops.shape(s)
    n = s.shape.as_list()[-1]
    if n is None:
        raise NotImplementedError("MatrixSquareRoot gradient needs a static matrix size")
    st = adjoint(s)
    identity = eye(n, dtype=s.dtype.base_dtype)
    kron = _m.add(_kron(identity, st), _kron(array_ops.matrix_transpose(s), identity))
    flat = array_ops.reshape(grad, array_ops.concat([shape[:-2], [n * n, 1]], 0))
    sol = matrix_solve(kron, flat)
    return [array_ops.reshape(sol, shape)]


def _kron(a, b):
    """Kronecker products of matching (batched) matrices ``a [..., p, q]``, ``b [..., r, s]``
    with the column-stacking convention of vec (row-major reshapes here)."""
    from dflab.ops.linalg_ops import einsum

    p, q = a.shape.as_list()[-2:]
    r, s = b.shape.as_list()[-2:]
    k = einsum("...ij,...kl->...ikjl", a, b)
    return array_ops.reshape(k, array_ops.concat([array_ops.shape(k)[:-4], [p * r, q * s]], 0))


# --- composites ---------------------------------------------------------------------------------
def cholesky_solve(chol, rhs, name=None):
    """Solve ``A X = rhs`` given ``chol``, the Cholesky factor of ``A``."""
    with _ops.name_scope(name, "cholesky_solve", [chol, rhs]):
        y = matrix_triangular_solve(chol, rhs, adjoint=False, lower=True)
        return matrix_triangular_solve(chol, y, adjoint=True, lower=True)


def logdet(matrix, name=None):
    """``log(det(matrix))`` of Hermitian positive definite matrices, through Cholesky."""
    with _ops.name_scope(name, "logdet", [matrix]):
        chol = cholesky(matrix)
        return _m.multiply(2.0, _m.reduce_sum(_m.log(_m.real(matrix_diag_part(chol))
                                                     if chol.dtype.base_dtype.is_complex
                                                     else matrix_diag_part(chol)), axis=[-1]))


def pinv(a, rcond=None, validate_args=False, name=None):
    """The Moore-Penrose pseudo-inverse, through the SVD; singular values below ``rcond``
    times the largest are dropped (``rcond`` defaults to 10 eps max(m, n))."""
    with _ops.name_scope(name or "pinv"):
        a = _ops.convert_to_tensor(a, name="a")
        dt = a.dtype.base_dtype
        if rcond is None:
            dims = a.shape.as_list()
            size = max(dims[-2], dims[-1])
            rcond = 10.0 * size * float(np.finfo(dt.as_numpy_dtype).eps)
        rcond = _ops.convert_to_tensor(rcond, dtype=dt, name="rcond")
        s, u, v = svd(a, full_matrices=False, compute_uv=True)
        cutoff = _m.multiply(rcond, _m.reduce_max(s, axis=-1))
        s = array_ops.where(_m.greater(s, array_ops.expand_dims(cutoff, -1)), s,
                            array_ops.fill(array_ops.shape(s), _ops.convert_to_tensor(
                                np.inf, dtype=dt)))
        return _m.matmul(_m.divide(v, array_ops.expand_dims(s, -2)), u, adjoint_b=True)


def matrix_rank(a, tol=None, validate_args=False, name=None):
    """The number of singular values above ``tol`` (default eps max(m, n) max(s))."""
    with _ops.name_scope(name or "matrix_rank"):
        a = _ops.convert_to_tensor(a, name="a")
        s = svd(a, compute_uv=False)
        if tol is None:
            dims = a.shape.as_list()
            eps = float(np.finfo(a.dtype.base_dtype.as_numpy_dtype).eps)
            tol = _m.multiply(eps * max(dims[-2], dims[-1]),
                              _m.reduce_max(s, axis=-1, keepdims=True))
        return _m.reduce_sum(_m.cast(_m.greater(s, tol), _dt.int32), axis=-1)


def lu_reconstruct(lower_upper, perm, validate_args=False, name=None):
    """``input`` back from ``lu``'s (lu, p)."""
    with _ops.name_scope(name or "lu_reconstruct"):
        lower_upper = _ops.convert_to_tensor(lower_upper, name="lower_upper")
        perm = _ops.convert_to_tensor(perm, name="perm")
        dt = lower_upper.dtype.base_dtype
        n = array_ops.shape(lower_upper)[-1]
        batch = array_ops.shape(lower_upper)[:-2]
        lower = _m.add(band_part(lower_upper, -1, 0),
                       _m.subtract(eye(n, batch_shape=batch, dtype=dt),
                                   matrix_diag(matrix_diag_part(lower_upper))))
        upper = band_part(lower_upper, 0, -1)
        # input[perm] = L U: the permutation matrix's transpose puts the rows back.
        return _m.matmul(_permutation_matrix(perm, dt), _m.matmul(lower, upper),
                         adjoint_a=True)


def _permutation_matrix(perm, dtype):
    """``P`` with ``P @ x = x[perm]`` (batched): row ``i`` is one-hot at ``perm[i]``."""
    return array_ops.one_hot(perm, array_ops.shape(perm)[-1], dtype=dtype)


def lu_solve(lower_upper, perm, rhs, validate_args=False, name=None):
    """Solve ``A X = rhs`` given ``lu(A)``."""
    with _ops.name_scope(name or "lu_solve"):
        lower_upper = _ops.convert_to_tensor(lower_upper, name="lower_upper")
        perm = _ops.convert_to_tensor(perm, name="perm")
        rhs = _ops.convert_to_tensor(rhs, dtype=lower_upper.dtype.base_dtype, name="rhs")
        permuted = _m.matmul(_permutation_matrix(perm, rhs.dtype.base_dtype), rhs)
        n = array_ops.shape(lower_upper)[-1]
        batch = array_ops.shape(lower_upper)[:-2]
        dt = lower_upper.dtype.base_dtype
        lower = _m.add(band_part(lower_upper, -1, 0),
                       _m.subtract(eye(n, batch_shape=batch, dtype=dt),
                                   matrix_diag(matrix_diag_part(lower_upper))))
        y = matrix_triangular_solve(lower, permuted, lower=True, adjoint=False)
        return matrix_triangular_solve(lower_upper, y, lower=False, adjoint=False)


def lu_matrix_inverse(lower_upper, perm, validate_args=False, name=None):
    """``inverse(A)`` given ``lu(A)``."""
    with _ops.name_scope(name or "lu_matrix_inverse"):
        lower_upper = _ops.convert_to_tensor(lower_upper, name="lower_upper")
        shape = array_ops.shape(lower_upper)
        return lu_solve(lower_upper, perm,
                        eye(shape[-1], batch_shape=shape[:-2],
                            dtype=lower_upper.dtype.base_dtype))


def expm(input, name=None):  # noqa: A002
    """The matrix exponential: a [13/13] Padé approximant after scaling by a power of two,
    then repeated squaring (the method TF uses)."""
    with _ops.name_scope(name, "matrix_exponential", [input]):
        x = _ops.convert_to_tensor(input, name="input")
        dims = x.shape.as_list()
        if None in dims:
            raise NotImplementedError("expm needs a static shape")
        flat = array_ops.reshape(x, [-1, dims[-2], dims[-1]])
        l1 = _m.reduce_max(_m.reduce_sum(_m.abs(flat), axis=-2), axis=-1)
        theta = 5.371920351148152
        squarings = _m.maximum(_m.floor(_m.divide(_m.log(_m.divide(l1, theta)),
                                                  np.log(2.0))), 0.0)
        scale = _m.pow(_ops.convert_to_tensor(2.0, dtype=x.dtype.base_dtype),
                       _m.negative(squarings))
        scaled = _m.multiply(flat, array_ops.reshape(scale, [-1, 1, 1]))
        u, v = _pade13(scaled, dims[-1])
        result = matrix_solve(_m.add(_m.negative(u), v), _m.add(u, v))
        max_squarings = _m.reduce_max(squarings)

        def body(i, r):
            squared = _m.matmul(r, r)
            keep = _m.less(_m.cast(i, squarings.dtype.base_dtype), squarings)
            return i + 1, array_ops.where(keep, squared, r)

        from dflab.ops.control_flow_ops import while_loop

        _, result = while_loop(lambda i, r: _m.less(_m.cast(i, max_squarings.dtype.base_dtype),
                                                    max_squarings), body,
                               [_ops.convert_to_tensor(0), result])
        return array_ops.reshape(result, dims)


_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)


def _pade13(a, n):
    b = _PADE13
    identity = eye(n, dtype=a.dtype.base_dtype)
    a2 = _m.matmul(a, a)
    a4 = _m.matmul(a2, a2)
    a6 = _m.matmul(a4, a2)
    tmp_u = _m.add(_m.add(_m.multiply(b[13], a6), _m.multiply(b[11], a4)),
                   _m.multiply(b[9], a2))
    u = _m.matmul(a6, tmp_u)
    u = _m.add(u, _m.add(_m.add(_m.add(_m.multiply(b[7], a6), _m.multiply(b[5], a4)),
                                _m.multiply(b[3], a2)), _m.multiply(b[1], identity)))
    u = _m.matmul(a, u)
    tmp_v = _m.add(_m.add(_m.multiply(b[12], a6), _m.multiply(b[10], a4)),
                   _m.multiply(b[8], a2))
    v = _m.matmul(a6, tmp_v)
    v = _m.add(v, _m.add(_m.add(_m.add(_m.multiply(b[6], a6), _m.multiply(b[4], a4)),
                                _m.multiply(b[2], a2)), _m.multiply(b[0], identity)))
    return u, v


__all__ = ["cholesky", "cholesky_solve", "matrix_determinant", "matrix_inverse",
           "matrix_solve", "matrix_solve_ls", "matrix_square_root", "matrix_triangular_solve",
           "qr", "self_adjoint_eig", "self_adjoint_eigvals", "svd"]
