"""Tridiagonal matrices (``tf.linalg.tridiagonal_matmul``, ``tridiagonal_solve`` and
``LinearOperatorTridiag``): the ``TridiagonalMatMul`` and ``TridiagonalSolve`` ops, their
gradients (TF's formulas), and the builders that accept TF's three formats of diagonals.

Formats: ``compact`` is one ``[..., 3, M]`` tensor of (superdiagonal, diagonal,
subdiagonal), the superdiagonal padded at its end and the subdiagonal at its start;
``sequence`` is those three as a list (the off-diagonals may be ``M - 1`` long);
``matrix`` is the dense ``[..., M, M]`` matrix, of which only the three diagonals are read.
Kernels in ``dflab.kernels.tridiagonal_kernels``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import ops as _ops
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape, broadcast_shapes
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops import special_math_ops as _sm
from dflab.ops.linalg_solve_ops import _float_or_complex
from dflab.ops.linear_operator import (
    LinearOperator,
    adjoint_matrix,
    dynamic_broadcast_shape,
    to_tensor,
)
from dflab.ops.matrix_ops import matrix_diag_part


# --- ops --------------------------------------------------------------------------------------
def _tridiagonal_matmul_infer(op):
    superdiag, maindiag, subdiag, rhs = op.inputs
    dt = _float_or_complex(op, rhs)
    for t in (superdiag, maindiag, subdiag):
        if t.dtype.base_dtype is not dt:
            raise TypeError(f"{op.type}: the diagonals and rhs must have the same dtype")
        if t.shape.ndims is not None and t.shape.ndims < 2:
            raise ValueError(f"{op.type}: the diagonals must have rank >= 2, got {t.shape}")
    return [(dt, rhs.shape)]


def _tridiagonal_solve_infer(op):
    diags, rhs = op.inputs
    dt = _float_or_complex(op, diags)
    if rhs.dtype.base_dtype is not dt:
        raise TypeError(f"{op.type}: diagonals and rhs must have the same dtype")
    if diags.shape.ndims is not None:
        d = diags.shape.as_list()
        if len(d) < 2:
            raise ValueError(f"{op.type}: Expected diagonals to have rank at least 2, got "
                             f"{len(d)}")
        if d[-2] is not None and d[-2] != 3:
            raise ValueError(f"{op.type}: Expected 3 diagonals got {d[-2]}")
    return [(dt, rhs.shape)]


register_op("TridiagonalMatMul", _tridiagonal_matmul_infer, expensive=True)
register_op("TridiagonalSolve", _tridiagonal_solve_infer, expensive=True)


def _shift(x, up):
    """Rows of ``x`` moved one up (the last row zero) or one down (the first row zero)."""
    zero = array_ops.zeros_like(x[..., :1, :])
    return array_ops.concat([x[..., 1:, :], zero] if up else [zero, x[..., :-1, :]], -2)


@RegisterGradient("TridiagonalMatMul")
def _tridiagonal_matmul_grad(op, grad):
    superdiag, maindiag, subdiag, rhs = op.inputs
    sup_c, main_c, sub_c = (array_ops.matrix_transpose(t, conjugate=True)
                            for t in (superdiag, maindiag, subdiag))
    rhs_c = _sm.conj(rhs)
    sup_g = _m.reduce_sum(_m.multiply(_shift(rhs_c, up=True), grad), axis=-1)
    main_g = _m.reduce_sum(_m.multiply(rhs_c, grad), axis=-1)
    sub_g = _m.reduce_sum(_m.multiply(_shift(rhs_c, up=False), grad), axis=-1)
    rhs_g = _m.add(_m.add(_shift(_m.multiply(sup_c, grad), up=False),
                          _m.multiply(main_c, grad)),
                   _shift(_m.multiply(sub_c, grad), up=True))
    return [array_ops.expand_dims(sup_g, -2), array_ops.expand_dims(main_g, -2),
            array_ops.expand_dims(sub_g, -2), rhs_g]


def _transpose_tridiagonal(diags):
    zero = array_ops.zeros_like(diags[..., 0, :1])
    superdiag = array_ops.concat([diags[..., 2, 1:], zero], -1)
    subdiag = array_ops.concat([zero, diags[..., 0, :-1]], -1)
    return array_ops.stack([superdiag, diags[..., 1, :], subdiag], axis=-2)


def _matmul_extracting_three_diagonals(x, y_tr):
    diag = _m.reduce_sum(_m.multiply(x, y_tr), axis=-1)
    superdiag = _m.reduce_sum(_m.multiply(x, _shift(y_tr, up=True)), axis=-1)
    subdiag = _m.reduce_sum(_m.multiply(x, _shift(y_tr, up=False)), axis=-1)
    return array_ops.stack([superdiag, diag, subdiag], axis=-2)


@RegisterGradient("TridiagonalSolve")
def _tridiagonal_solve_grad(op, grad):
    diags, x = op.inputs[0], op.outputs[0]
    grad_rhs = _solve_op(_transpose_tridiagonal(diags), grad,
                         op.get_attr("partial_pivoting"), op.get_attr("perturb_singular"))
    return [_m.negative(_matmul_extracting_three_diagonals(grad_rhs, x)), grad_rhs]


def _solve_op(diagonals, rhs, partial_pivoting, perturb_singular, name=None):
    return _ops.apply_op("TridiagonalSolve", [diagonals, rhs],
                         {"partial_pivoting": bool(partial_pivoting),
                          "perturb_singular": bool(perturb_singular)}, name).outputs[0]


# --- builders ---------------------------------------------------------------------------------
def _diagonals_of_matrix(m):
    """The compact ``[..., 3, M]`` diagonals of dense matrices ``m``."""
    main = matrix_diag_part(m)
    zero = array_ops.zeros_like(main[..., :1])
    superdiag = array_ops.concat([matrix_diag_part(m[..., :-1, 1:]), zero], -1)
    subdiag = array_ops.concat([zero, matrix_diag_part(m[..., 1:, :-1])], -1)
    return array_ops.stack([superdiag, main, subdiag], axis=-2)


def _check_matrix_square(diagonals):
    m1, m2 = diagonals.shape[-1].value, diagonals.shape[-2].value
    if m1 and m2 and m1 != m2:
        raise ValueError(f"Expected last two dimensions of diagonals to be same, got {m1} "
                         f"and {m2}")


def tridiagonal_matmul(diagonals, rhs, diagonals_format="compact", name=None):
    """``A @ rhs`` for tridiagonal ``A`` given by its diagonals (``[..., M, N]`` rhs)."""
    with _ops.name_scope(name, "tridiagonal_matmul"):
        if diagonals_format == "compact":
            diagonals = _ops.convert_to_tensor(diagonals, name="diagonals")
            parts = [diagonals[..., k, :] for k in range(3)]
        elif diagonals_format == "sequence":
            parts = [_ops.convert_to_tensor(d) for d in diagonals]
        elif diagonals_format == "matrix":
            diagonals = _ops.convert_to_tensor(diagonals, name="diagonals")
            _check_matrix_square(diagonals)
            compact = _diagonals_of_matrix(diagonals)
            parts = [compact[..., k, :] for k in range(3)]
        else:
            raise ValueError(f"Unrecognized diagonals_format: {diagonals_format}")
        rhs = _ops.convert_to_tensor(rhs, dtype=parts[1].dtype.base_dtype, name="rhs")
        parts = [array_ops.expand_dims(p, -2) for p in parts]
        return _ops.apply_op("TridiagonalMatMul", parts + [rhs], None, None).outputs[0]


def _pad_sequence(t, what, m, padding):
    n = t.shape[-1].value
    if not n or n == m:
        return t
    if n == m - 1:
        zero = array_ops.zeros_like(t[..., :1])
        return array_ops.concat([t, zero] if padding == "end" else [zero, t], -1)
    raise ValueError(f"Expected {what} to be have length {m} or {m - 1}, got {n}.")


def tridiagonal_solve(diagonals, rhs, diagonals_format="compact", transpose_rhs=False,
                      conjugate_rhs=False, name=None, partial_pivoting=True,
                      perturb_singular=False):
    """``X`` with ``A X = rhs`` for tridiagonal ``A`` (Gaussian elimination with partial
    pivoting, or the Thomas algorithm without); ``rhs`` is ``[..., M, K]`` or ``[..., M]``.
    A singular matrix gives NaNs (with a warning), as in TF."""
    if perturb_singular and not partial_pivoting:
        raise ValueError("partial_pivoting must be True if perturb_singular is.")
    if perturb_singular:
        raise NotImplementedError("dflab's tridiagonal_solve does not perturb singular "
                                  "matrices (perturb_singular=True)")
    if diagonals_format == "sequence":
        if not isinstance(diagonals, (tuple, list)) or len(diagonals) != 3:
            raise ValueError("Expected diagonals to be a sequence of length 3.")
        superdiag, maindiag, subdiag = (_ops.convert_to_tensor(d) for d in diagonals)
        if not subdiag.shape[:-1].is_compatible_with(maindiag.shape[:-1]) or \
                not superdiag.shape[:-1].is_compatible_with(maindiag.shape[:-1]):
            raise ValueError(f"Tensors representing the three diagonals must have the same "
                             f"shape,except for the last dimension, got {subdiag.shape}, "
                             f"{maindiag.shape}, {superdiag.shape}")
        m = maindiag.shape[-1].value
        subdiag = _pad_sequence(subdiag, "subdiagonal", m, "start")
        superdiag = _pad_sequence(superdiag, "superdiagonal", m, "end")
        diagonals = array_ops.stack([superdiag, maindiag, subdiag], axis=-2)
    elif diagonals_format == "matrix":
        diagonals = _ops.convert_to_tensor(diagonals, name="diagonals")
        _check_matrix_square(diagonals)
        diagonals = _diagonals_of_matrix(diagonals)
    elif diagonals_format != "compact":
        raise ValueError(f"Unrecognized diagonals_format: {diagonals_format}")
    return _solve_compact(diagonals, rhs, transpose_rhs, conjugate_rhs, partial_pivoting,
                          perturb_singular, name)


def _solve_compact(diagonals, rhs, transpose_rhs, conjugate_rhs, partial_pivoting,
                   perturb_singular, name):
    diagonals = _ops.convert_to_tensor(diagonals, name="diagonals")
    rhs = _ops.convert_to_tensor(rhs, dtype=diagonals.dtype.base_dtype, name="rhs")
    d_rank, r_rank = diagonals.shape.ndims, rhs.shape.ndims
    if d_rank:
        if d_rank < 2:
            raise ValueError(f"Expected diagonals to have rank at least 2, got {d_rank}")
        if r_rank and r_rank not in (d_rank, d_rank - 1):
            raise ValueError(f"Expected the rank of rhs to be {d_rank - 1} or {d_rank}, got "
                             f"{r_rank}")
        if r_rank and not diagonals.shape[:-2].is_compatible_with(rhs.shape[:d_rank - 2]):
            raise ValueError(f"Batch shapes {diagonals.shape[:-2]} and "
                             f"{rhs.shape[:d_rank - 2]} are incompatible")
        if diagonals.shape[-2].value and diagonals.shape[-2].value != 3:
            raise ValueError(f"Expected 3 diagonals got {diagonals.shape[-2].value}")

    def check_sizes(r):
        m, n = diagonals.shape[-1].value, r.shape[-2].value
        if m and n and m != n:
            raise ValueError(f"Expected number of left-hand sided and right-hand sides to be "
                             f"equal, got {m} and {n}")

    if r_rank and d_rank and r_rank == d_rank - 1:
        if conjugate_rhs:
            rhs = _sm.conj(rhs)
        rhs = array_ops.expand_dims(rhs, -1)
        check_sizes(rhs)
        return array_ops.squeeze(_solve_op(diagonals, rhs, partial_pivoting, perturb_singular,
                                           name), -1)
    if transpose_rhs:
        rhs = array_ops.matrix_transpose(rhs, conjugate=conjugate_rhs)
    elif conjugate_rhs:
        rhs = _sm.conj(rhs)
    check_sizes(rhs)
    return _solve_op(diagonals, rhs, partial_pivoting, perturb_singular, name)


# --- the operator -----------------------------------------------------------------------------
_FORMATS = ("compact", "matrix", "sequence")


def _roll_last(x, shift):
    """``x`` rolled by one along its last axis (``shift`` 1 or -1)."""
    if shift == 1:
        return array_ops.concat([x[..., -1:], x[..., :-1]], -1)
    return array_ops.concat([x[..., 1:], x[..., :1]], -1)


class LinearOperatorTridiag(LinearOperator):
    """A [batch] square tridiagonal matrix from its diagonals (TF's three formats)."""

    def __init__(self, diagonals, diagonals_format="compact", is_non_singular=None,
                 is_self_adjoint=None, is_positive_definite=None, is_square=None,
                 name="LinearOperatorTridiag"):
        params = dict(diagonals=diagonals, diagonals_format=diagonals_format,
                      is_non_singular=is_non_singular, is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        with _ops.name_scope(name):
            if diagonals_format not in _FORMATS:
                raise ValueError(f"Argument `diagonals_format` must be one of compact, matrix, "
                                 f"or sequence. Received : {diagonals_format}.")
            if diagonals_format == "sequence":
                self._diagonals = [to_tensor(d, name=f"diag_{i}")
                                   for i, d in enumerate(diagonals)]
                dtype = self._diagonals[0].dtype
            else:
                self._diagonals = to_tensor(diagonals, name="diagonals")
                dtype = self._diagonals.dtype
            self._diagonals_format = diagonals_format
            super().__init__(dtype=dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)

    @property
    def diagonals(self):
        return self._diagonals

    @property
    def diagonals_format(self):
        return self._diagonals_format

    def _shape(self):
        d = self._diagonals
        if self._diagonals_format == "matrix":
            return d.shape
        if self._diagonals_format == "compact":
            if d.shape.ndims is None:
                return TensorShape(None)
            v = d.shape[:-2].concatenate(d.shape[-1:])
        else:
            b = broadcast_shapes(d[0].shape[:-1], d[1].shape[:-1])
            b = broadcast_shapes(b, d[2].shape[:-1])
            v = b.concatenate(d[1].shape[-1:])
        return v.concatenate(v[-1:])

    def _shape_tensor(self, diagonals=None):
        d = self._diagonals if diagonals is None else diagonals
        if self._diagonals_format == "matrix":
            return array_ops.shape(d)
        if self._diagonals_format == "compact":
            v = array_ops.shape(d[..., 0, :])
        else:
            b = dynamic_broadcast_shape(array_ops.shape(d[0])[:-1], array_ops.shape(d[1])[:-1])
            b = dynamic_broadcast_shape(b, array_ops.shape(d[2])[:-1])
            v = array_ops.concat([b, array_ops.shape(d[1])[-1:]], 0)
        return array_ops.concat([v, v[-1:]], 0)

    def _adjoint_diagonals(self):
        d = self._diagonals
        if self._diagonals_format == "sequence":
            d = [_sm.conj(t) for t in reversed(d)]
            return [_roll_last(d[0], -1), d[1], _roll_last(d[2], 1)]
        if self._diagonals_format == "matrix":
            return adjoint_matrix(d)
        d = _sm.conj(d)
        superdiag, diag, subdiag = d[..., 0, :], d[..., 1, :], d[..., 2, :]
        return array_ops.stack([_roll_last(subdiag, -1), diag, _roll_last(superdiag, 1)],
                               axis=-2)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        d = self._adjoint_diagonals() if adjoint else self._diagonals
        x = adjoint_matrix(x) if adjoint_arg else x
        return tridiagonal_matmul(d, x, diagonals_format=self._diagonals_format)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        d = self._adjoint_diagonals() if adjoint else self._diagonals
        shape = self._shape_tensor(d)
        k = shape[-1:]
        rs = array_ops.shape(rhs)
        batch = dynamic_broadcast_shape(shape[:-2], rs[:-2])
        rhs = array_ops.broadcast_to(rhs, array_ops.concat([batch, rs[-2:]], 0))
        if self._diagonals_format == "matrix":
            d = array_ops.broadcast_to(d, array_ops.concat([batch, k, k], 0))
        elif self._diagonals_format == "compact":
            d = array_ops.broadcast_to(d, array_ops.concat([batch, [3], k], 0))
        else:
            d = [array_ops.broadcast_to(t, array_ops.concat([batch, k], 0)) for t in d]
        return tridiagonal_solve(d, rhs, diagonals_format=self._diagonals_format,
                                 transpose_rhs=adjoint_arg, conjugate_rhs=adjoint_arg)

    def _diag_part(self):
        if self._diagonals_format == "matrix":
            return matrix_diag_part(self._diagonals)
        if self._diagonals_format == "sequence":
            return array_ops.broadcast_to(self._diagonals[1], self.shape_tensor()[:-1])
        return self._diagonals[..., 1, :]

    def _to_dense(self):
        if self._diagonals_format == "matrix":
            return self._diagonals
        if self._diagonals_format == "compact":
            superdiag, diag, subdiag = (self._diagonals[..., k, :] for k in range(3))
        else:
            superdiag, diag, subdiag = self._diagonals
        return _dense_tridiagonal(superdiag, diag, subdiag)

    def _assert_self_adjoint(self):
        from dflab.ops import check_ops
        from dflab.ops.control_flow_ops import group
        from dflab.ops.linear_operator_basic import _assert_zero_imag

        diag_msg = ("This tridiagonal operator contained non-zero imaginary values on the "
                    "diagonal.")
        off_msg = "This tridiagonal operator has non-conjugate subdiagonal and superdiagonal."
        d = self._diagonals
        if self._diagonals_format == "matrix":
            return check_ops.assert_equal(d, adjoint_matrix(d),
                                          message="Matrix was not equal to its adjoint.")
        superdiag, diag, subdiag = (d[..., k, :] for k in range(3)) \
            if self._diagonals_format == "compact" else d
        sub = _roll_last(subdiag, -1)
        return group(_assert_zero_imag(diag, diag_msg),
                     check_ops.assert_equal(_sm.conj(sub[..., :-1]), superdiag[..., :-1],
                                            message=off_msg))


def _dense_tridiagonal(superdiag, diag, subdiag):
    """Dense matrices from compact-aligned diagonals (superdiag padded at the end, subdiag
    at the start), broadcast against each other."""
    from dflab.ops.matrix_ops import matrix_diag

    full = dynamic_broadcast_shape(dynamic_broadcast_shape(array_ops.shape(superdiag),
                                                           array_ops.shape(diag)),
                                   array_ops.shape(subdiag))
    superdiag, diag, subdiag = (array_ops.broadcast_to(t, full)
                                for t in (superdiag, diag, subdiag))
    # Shift each off-diagonal's column into place: sup[i] sits at (i, i + 1), sub[i] at
    # (i, i - 1); the padding entries fall off the edge.
    upper, lower = matrix_diag(superdiag), matrix_diag(subdiag)
    zero_col = array_ops.zeros_like(upper[..., :, :1])
    upper = array_ops.concat([zero_col, upper[..., :, :-1]], -1)
    lower = array_ops.concat([lower[..., :, 1:], zero_col], -1)
    dense = _m.add(_m.add(upper, matrix_diag(diag)), lower)
    return dense


# --- eigenvalues of symmetric tridiagonal matrices ----------------------------------------------
def eigh_tridiagonal(alpha, beta, eigvals_only=True, select="a", select_range=None, tol=None,
                     name=None):
    """Eigenvalues (ascending) and, unless ``eigvals_only``, eigenvectors (columns) of the
    Hermitian tridiagonal matrix with diagonal ``alpha`` ``[n]`` and superdiagonal ``beta``
    ``[n - 1]``. ``select``: ``"a"`` all, ``"i"`` those of indices ``select_range[0]`` to
    ``select_range[1]`` inclusive, ``"v"`` those in the interval ``select_range``.

    TF bisects with Sturm sequences and finds vectors by inverse iteration; dflab solves the
    dense matrix with ``self_adjoint_eig``, which gives the same values to rounding (``tol``,
    the bisection's tolerance, is not needed) and each vector up to its sign or phase."""
    from dflab.ops import check_ops
    from dflab.ops.array_ops import boolean_mask
    from dflab.ops.linalg_solve_ops import self_adjoint_eig, self_adjoint_eigvals

    with _ops.name_scope(name or "eigh_tridiagonal"):
        alpha = _ops.convert_to_tensor(alpha, name="alpha")
        n = alpha.shape[0].value
        if n is not None and n <= 1:
            return _sm.real(alpha) if alpha.dtype.base_dtype.is_complex else alpha
        beta = _ops.convert_to_tensor(beta, name="beta")
        if alpha.dtype.base_dtype != beta.dtype.base_dtype:
            raise ValueError("'alpha' and 'beta' must have the same type.")
        if select not in ("a", "i", "v"):
            raise ValueError("'select must have a value in {'a', 'i', 'v'}.")
        dtype = alpha.dtype.base_dtype
        if dtype.is_complex:
            alpha = _m.cast(_sm.real(alpha), dtype)
        zero = array_ops.zeros_like(beta[:1])
        matrix = _dense_tridiagonal(array_ops.concat([beta, zero], 0), alpha,
                                    array_ops.concat([zero, _sm.conj(beta)], 0))
        if eigvals_only:
            values, vectors = self_adjoint_eigvals(matrix), None
        else:
            values, vectors = self_adjoint_eig(matrix)
        if select == "i":
            check = check_ops.assert_less_equal(select_range[0], select_range[1],
                                                message="Got empty index range in "
                                                        "select_range.")
            with _ops.control_dependencies([check]):
                lo = array_ops.identity(_ops.convert_to_tensor(select_range[0]))
            hi = _ops.convert_to_tensor(select_range[1]) + 1
            values = values[lo:hi]
            vectors = None if vectors is None else vectors[:, lo:hi]
        elif select == "v":
            real = values.dtype.base_dtype
            lo = _ops.convert_to_tensor(select_range[0], dtype=real)
            hi = _ops.convert_to_tensor(select_range[1], dtype=real)
            check = check_ops.assert_less(lo, hi, message="Got empty interval in "
                                                          "select_range.")
            with _ops.control_dependencies([check]):
                values = array_ops.identity(values)
            # TF's Sturm counts take the eigenvalues in [lo, hi) widened by a few rounding
            # errors of the matrix's norm.
            bound = _m.reduce_max(_m.abs(values))
            slack = _m.multiply(_m.cast(n or array_ops.size(alpha), real),
                                _m.multiply(2.1 * float(np.finfo(real.as_numpy_dtype).eps),
                                            bound))
            keep = _m.logical_and(_m.greater_equal(values, _m.subtract(lo, slack)),
                                  _m.less(values, _m.add(hi, slack)))
            values = boolean_mask(values, keep)
            if vectors is not None:
                vectors = array_ops.transpose(boolean_mask(array_ops.transpose(vectors), keep))
        return values if eigvals_only else (values, vectors)


__all__ = ["tridiagonal_matmul", "tridiagonal_solve"]
