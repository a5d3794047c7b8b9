"""The operators of ``tf.linalg`` defined by one tensor: ``LinearOperatorFullMatrix``,
``Diag``, ``LowerTriangular``, ``Householder``, ``Permutation`` and ``Toeplitz``
(``Identity``, ``ScaledIdentity`` and ``Zeros`` are in ``linear_operator_identity``,
``Tridiag`` in ``tridiagonal_ops``).

Each overrides the base class's dense fallbacks with what its structure allows (a diagonal
solve divides, a triangular one substitutes, a permutation gathers rows), as TF's do, so the
numbers agree with TF's to rounding. Toeplitz products use the dense matrix where TF embeds
it in a circulant and uses FFTs (dflab has no FFT yet): the same result, computed in
``O(n^2)``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops import matrix_ops as _mx
from dflab.ops import special_math_ops as _sm
from dflab.ops.linalg_solve_ops import matrix_triangular_solve
from dflab.ops.linear_operator import (
    _FLOAT_AND_COMPLEX,
    LinearOperator,
    adjoint_matrix,
    combined_commuting_positive_definite_hint,
    combined_commuting_self_adjoint_hint,
    combined_non_singular_hint,
    dynamic_broadcast_shape,
    real_dtype,
    register_operator,
    static_broadcast_shape,
    static_value,
    to_tensor,
)


def _vector_shape(v):
    """``[..., n]`` -> ``[..., n, n]``."""
    return v.shape.concatenate(v.shape[-1:]) if v.shape.ndims is not None else TensorShape(None)


def _vector_shape_tensor(v):
    s = array_ops.shape(v)
    return array_ops.concat([s, s[-1:]], 0)


def _at_least(t, rank, what):
    if t.shape.ndims is not None and t.shape.ndims < rank:
        raise ValueError(f"Argument {what} must have at least {rank} dimension"
                         f"{'s' if rank > 1 else ''}.  Found: {t}")


# --- full matrix ------------------------------------------------------------------------------
class LinearOperatorFullMatrix(LinearOperator):
    """A [batch] dense matrix as an operator."""

    def __init__(self, matrix, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorFullMatrix"):
        params = dict(matrix=matrix, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        with _ops.name_scope(name):
            self._matrix = to_tensor(matrix, name="matrix")
            if self._matrix.dtype.base_dtype not in _FLOAT_AND_COMPLEX:
                raise TypeError(f"Argument `matrix` must have dtype in "
                                f"{[d.name for d in _FLOAT_AND_COMPLEX]}. Received: "
                                f"{self._matrix.dtype.name}.")
            if self._matrix.shape.ndims is not None and self._matrix.shape.ndims < 2:
                raise ValueError(f"Argument `matrix` must have at least 2 dimensions. "
                                 f"Received: {self._matrix}.")
            super().__init__(dtype=self._matrix.dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)

    @property
    def matrix(self):
        return self._matrix

    def _shape(self):
        return self._matrix.shape

    def _shape_tensor(self):
        return array_ops.shape(self._matrix)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return _m.matmul(self._matrix, x, adjoint_a=adjoint, adjoint_b=adjoint_arg)

    def _to_dense(self):
        return self._matrix


# --- diagonal ---------------------------------------------------------------------------------
class LinearOperatorDiag(LinearOperator):
    """A [batch] square diagonal matrix, from its diagonal ``[..., n]``."""

    def __init__(self, diag, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorDiag"):
        params = dict(diag=diag, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        with _ops.name_scope(name):
            self._diag = to_tensor(diag, name="diag")
            if self._diag.shape.ndims is not None and self._diag.shape.ndims < 1:
                raise ValueError(f"Argument diag must have at least 1 dimension.  Found: "
                                 f"{self._diag}")
            if not self._diag.dtype.base_dtype.is_complex:
                if is_self_adjoint is False:
                    raise ValueError("A real diagonal operator is always self adjoint.")
                is_self_adjoint = True
            if is_square is False:
                raise ValueError("Only square diagonal operators currently supported.")
            super().__init__(dtype=self._diag.dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=True,
                             parameters=params, name=name)

    @property
    def diag(self):
        return self._diag

    def _shape(self):
        return _vector_shape(self._diag)

    def _shape_tensor(self):
        return _vector_shape_tensor(self._diag)

    def _linop_inverse(self):
        return LinearOperatorDiag(_m.divide(_ops.convert_to_tensor(1.0, self.dtype), self.diag),
                                  is_non_singular=self.is_non_singular,
                                  is_self_adjoint=self.is_self_adjoint,
                                  is_positive_definite=self.is_positive_definite,
                                  is_square=True)

    def _commuting_hints(self, left, right):
        return dict(is_non_singular=combined_non_singular_hint(left, right),
                    is_self_adjoint=combined_commuting_self_adjoint_hint(left, right),
                    is_positive_definite=combined_commuting_positive_definite_hint(left, right))

    def _linop_matmul(self, left, right):
        hints = self._commuting_hints(left, right)
        if isinstance(right, LinearOperatorDiag):
            return LinearOperatorDiag(_m.multiply(left.diag, right.diag), is_square=True,
                                      **hints)
        if getattr(right, "_is_scaled_identity", False):
            return LinearOperatorDiag(_m.multiply(left.diag, right.multiplier), is_square=True,
                                      **hints)
        if isinstance(right, LinearOperatorLowerTriangular):
            hints["is_positive_definite"] = None
            return LinearOperatorLowerTriangular(
                _m.multiply(left.diag[..., None], right.to_dense()), is_square=True, **hints)
        return super()._linop_matmul(left, right)

    def _linop_solve(self, left, right):
        hints = self._commuting_hints(left, right)
        if isinstance(right, LinearOperatorDiag):
            return LinearOperatorDiag(_m.divide(right.diag, left.diag), is_square=True, **hints)
        if getattr(right, "_is_scaled_identity", False):
            return LinearOperatorDiag(_m.divide(right.multiplier, left.diag), is_square=True,
                                      **hints)
        if isinstance(right, LinearOperatorLowerTriangular):
            hints["is_positive_definite"] = None
            return LinearOperatorLowerTriangular(
                _m.divide(right.to_dense(), left.diag[..., None]), is_square=True, **hints)
        return super()._linop_solve(left, right)

    def _linop_adjoint(self):
        d = _sm.conj(self.diag) if self.dtype.is_complex else self.diag
        return LinearOperatorDiag(d, is_non_singular=self.is_non_singular,
                                  is_self_adjoint=self.is_self_adjoint,
                                  is_positive_definite=self.is_positive_definite, is_square=True)

    def _linop_cholesky(self):
        return LinearOperatorDiag(_m.sqrt(self.diag), is_non_singular=True,
                                  is_self_adjoint=True, is_positive_definite=True,
                                  is_square=True)

    def _assert_non_singular(self):
        from dflab.ops import check_ops

        return check_ops.assert_less(
            _ops.convert_to_tensor(0, real_dtype(self.dtype)), _m.abs(self._diag),
            message="Singular operator:  Diagonal contained zero values.")

    def _assert_positive_definite(self):
        from dflab.ops import check_ops

        what = "Diagonal operator had diagonal entries with non-positive real part" \
            if self.dtype.is_complex else \
            "Real diagonal operator had non-positive diagonal entries"
        return check_ops.assert_positive(_sm.real(self._diag),
                                         message=f"{what}, thus was not positive definite.")

    def _assert_self_adjoint(self):
        return _assert_zero_imag(self._diag, "This diagonal operator contained non-zero "
                                             "imaginary values.   Thus it was not self-adjoint.")

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        d = _sm.conj(self._diag) if adjoint else self._diag
        x = adjoint_matrix(x) if adjoint_arg else x
        return _m.multiply(array_ops.expand_dims(d, -1), x)

    def _matvec(self, x, adjoint=False):
        return _m.multiply(_sm.conj(self._diag) if adjoint else self._diag, x)

    def _determinant(self):
        return _m.reduce_prod(self._diag, axis=[-1])

    def _log_abs_determinant(self):
        log_det = _m.reduce_sum(_m.log(_m.abs(self._diag)), axis=[-1])
        return _m.cast(log_det, self.dtype) if self.dtype.is_complex else log_det

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        d = _sm.conj(self._diag) if adjoint else self._diag
        rhs = adjoint_matrix(rhs) if adjoint_arg else rhs
        return _m.multiply(rhs, array_ops.expand_dims(
            _m.divide(_ops.convert_to_tensor(1.0, self.dtype), d), -1))

    def _to_dense(self):
        return _mx.matrix_diag(self._diag)

    def _diag_part(self):
        return self.diag

    def _add_to_tensor(self, x):
        return _mx.matrix_set_diag(x, _m.add(self._diag, _mx.matrix_diag_part(x)))

    def _eigvals(self):
        return self.diag

    def _cond(self):
        a = _m.abs(self.diag)
        return _m.divide(_m.reduce_max(a, axis=-1), _m.reduce_min(a, axis=-1))


def _assert_zero_imag(x, message):
    from dflab.ops import check_ops
    from dflab.ops.control_flow_ops import no_op

    if not x.dtype.base_dtype.is_complex:
        return no_op()
    return check_ops.assert_equal(_ops.convert_to_tensor(0, real_dtype(x.dtype.base_dtype)),
                                  _sm.imag(x), message=message)


# --- lower triangular ---------------------------------------------------------------------------
@register_operator
class LinearOperatorLowerTriangular(LinearOperator):
    """The lower triangle of a [batch] square matrix (what lies above is ignored)."""

    def __init__(self, tril, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None,
                 name="LinearOperatorLowerTriangular"):
        params = dict(tril=tril, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        if is_square is False:
            raise ValueError("Only square lower triangular operators supported at this time.")
        with _ops.name_scope(name):
            self._tril = to_tensor(tril, name="tril")
            if self._tril.shape.ndims is not None and self._tril.shape.ndims < 2:
                raise ValueError(f"Argument tril must have at least 2 dimensions.  Found: "
                                 f"{self._tril}")
            super().__init__(dtype=self._tril.dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=True,
                             parameters=params, name=name)

    @property
    def tril(self):
        return self._tril

    def _get_tril(self):
        return _mx.band_part(self._tril, -1, 0)

    def _get_diag(self):
        return _mx.matrix_diag_part(self._tril)

    def _shape(self):
        return self._tril.shape

    def _shape_tensor(self):
        return array_ops.shape(self._tril)

    def _assert_non_singular(self):
        from dflab.ops import check_ops

        return check_ops.assert_less(
            _ops.convert_to_tensor(0, real_dtype(self.dtype)), _m.abs(self._get_diag()),
            message="Singular operator:  Diagonal contained zero values.")

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return _m.matmul(self._get_tril(), x, adjoint_a=adjoint, adjoint_b=adjoint_arg)

    def _linop_matmul(self, left, right):
        if isinstance(right, LinearOperatorDiag):
            return LinearOperatorLowerTriangular(
                _m.multiply(left.to_dense(), right.diag[..., None, :]),
                is_non_singular=combined_non_singular_hint(right, left),
                is_self_adjoint=combined_commuting_self_adjoint_hint(right, left),
                is_positive_definite=None, is_square=True)
        return super()._linop_matmul(left, right)

    def _determinant(self):
        return _m.reduce_prod(self._get_diag(), axis=[-1])

    def _log_abs_determinant(self):
        return _m.reduce_sum(_m.log(_m.abs(self._get_diag())), axis=[-1])

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        rhs = adjoint_matrix(rhs) if adjoint_arg else rhs
        return matrix_triangular_solve(self._get_tril(), rhs, lower=True, adjoint=adjoint)

    def _to_dense(self):
        return self._get_tril()

    def _eigvals(self):
        return self._get_diag()


# --- Householder reflection -------------------------------------------------------------------
class LinearOperatorHouseholder(LinearOperator):
    """``I - 2 v v^H / |v|^2``, the reflection through the hyperplane orthogonal to ``v``."""

    def __init__(self, reflection_axis, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorHouseholder"):
        params = dict(reflection_axis=reflection_axis, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        with _ops.name_scope(name):
            self._reflection_axis = to_tensor(reflection_axis, name="reflection_axis")
            _at_least(self._reflection_axis, 1, "reflection_axis")
            if is_self_adjoint is False:
                raise ValueError("A Householder operator is always self adjoint.")
            if is_positive_definite is True:
                raise ValueError("A Householder operator is always non-positive definite.")
            if is_square is False:
                raise ValueError("A Householder operator is always square.")
            super().__init__(dtype=self._reflection_axis.dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=True, is_positive_definite=False, is_square=True,
                             parameters=params, name=name)

    @property
    def reflection_axis(self):
        return self._reflection_axis

    def _shape(self):
        return _vector_shape(self._reflection_axis)

    def _shape_tensor(self):
        return _vector_shape_tensor(self._reflection_axis)

    def _assert_non_singular(self):
        from dflab.ops.control_flow_ops import no_op

        return no_op("assert_non_singular")

    def _assert_positive_definite(self):
        from dflab.framework import errors

        raise errors.InvalidArgumentError(
            None, None, "Householder operators are always non-positive definite.")

    def _assert_self_adjoint(self):
        from dflab.ops.control_flow_ops import no_op

        return no_op("assert_self_adjoint")

    def _linop_adjoint(self):
        return self

    def _linop_inverse(self):
        return self

    def _unit_axis(self):
        from dflab.ops.nn_impl import l2_normalize

        return l2_normalize(self._reflection_axis, axis=-1)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = adjoint_matrix(x) if adjoint_arg else x
        mat = self._unit_axis()[..., None]
        dot = _m.matmul(mat, x, adjoint_a=True)
        return _m.subtract(x, _m.multiply(_m.multiply(2, mat), dot))

    def _trace(self):
        shape = self.shape_tensor()
        n = _m.cast(_m.subtract(self._domain_dimension_tensor(shape=shape), 2), self.dtype)
        return _m.multiply(n, array_ops.ones(self._batch_shape_tensor(shape=shape),
                                             dtype=self.dtype))

    def _determinant(self):
        return _m.negative(array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype))

    def _log_abs_determinant(self):
        return array_ops.zeros(self.batch_shape_tensor(), dtype=self.dtype)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._matmul(rhs, adjoint, adjoint_arg)

    def _to_dense(self):
        mat = self._unit_axis()[..., None]
        matrix = _m.multiply(-2, _m.matmul(mat, mat, adjoint_b=True))
        return _mx.matrix_set_diag(matrix, _m.add(1.0, _mx.matrix_diag_part(matrix)))

    def _diag_part(self):
        v = self._unit_axis()
        return _m.subtract(1.0, _m.multiply(_m.multiply(2, v), _sm.conj(v)))

    def _eigvals(self):
        s = array_ops.shape(self._reflection_axis)
        ones = array_ops.ones(array_ops.concat([s[:-1], [s[-1] - 1]], 0), dtype=self.dtype)
        neg = _m.negative(array_ops.ones(array_ops.concat([s[:-1], [1]], 0), dtype=self.dtype))
        return array_ops.concat([neg, ones], -1)

    def _cond(self):
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)


# --- permutation ------------------------------------------------------------------------------
class LinearOperatorPermutation(LinearOperator):
    """The permutation matrix ``P`` with ``P @ x = x[perm]`` (rows), batched by ``perm``."""

    def __init__(self, perm, dtype=_dt.float32, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorPermutation"):
        params = dict(perm=perm, dtype=dtype, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        with _ops.name_scope(name):
            self._perm = to_tensor(perm, name="perm")
            self._check_perm(self._perm)
            if is_non_singular is False:
                raise ValueError(f"A Permutation operator is always non-singular. Expected "
                                 f"argument `is_non_singular` to be True. Received: "
                                 f"{is_non_singular}.")
            if is_square is False:
                raise ValueError(f"A Permutation operator is always square. Expected argument "
                                 f"`is_square` to be True. Received: {is_square}.")
            super().__init__(dtype=dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=True,
                             parameters=params, name=name)

    @staticmethod
    def _check_perm(perm):
        if perm.shape.ndims is not None and perm.shape.ndims < 1:
            raise ValueError(f"Argument `perm` must have at least 1 dimension. "
                             f"Received: {perm}.")
        if not perm.dtype.base_dtype.is_integer:
            raise TypeError(f"Argument `perm` must be integer dtype. Received: {perm}.")
        value = static_value(perm)
        if value is not None:
            n = value.shape[-1]
            if np.any(np.sort(value, axis=-1) != np.arange(0, n)):
                raise ValueError(f"Argument `perm` must be a vector of unique integers from 0 "
                                 f"to {n - 1}.")

    @property
    def perm(self):
        return self._perm

    def _shape(self):
        return _vector_shape(self._perm)

    def _shape_tensor(self):
        return _vector_shape_tensor(self._perm)

    def _assert_non_singular(self):
        from dflab.ops.control_flow_ops import no_op

        return no_op("assert_non_singular")

    def _domain_dimension_tensor(self, shape=None):
        return array_ops.shape(self._perm)[-1]

    def _inverse_perm(self, perm):
        """``argsort(perm)``: the position of each index in ``perm``."""
        n = array_ops.shape(perm)[-1]
        hits = _m.equal(perm[..., None, :], _m.cast(_m.range(n), perm.dtype)[:, None])
        return _m.cast(_m.argmax(_m.cast(hits, _dt.int32), axis=-1), perm.dtype)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        perm = self._perm
        if adjoint and not self.is_self_adjoint:
            perm = self._inverse_perm(perm)
        x = adjoint_matrix(x) if adjoint_arg else x
        xs = array_ops.shape(x)
        batch = dynamic_broadcast_shape(xs[:-1], array_ops.shape(perm))
        k = xs[-1]
        full = array_ops.concat([batch, array_ops.reshape(k, [1])], 0)
        x = array_ops.broadcast_to(x, full)
        perm = array_ops.broadcast_to(perm, batch)
        # Gather rows of all the matrices at once: row i of matrix b is row b * m + i.
        m = array_ops.shape(x)[-2]
        perm = array_ops.reshape(perm, array_ops.stack([-1, m]))
        offsets = _m.multiply(_m.cast(_m.range(array_ops.shape(perm)[0]), perm.dtype),
                              _m.cast(m, perm.dtype))
        rows = array_ops.reshape(_m.add(perm, offsets[:, None]), [-1])
        y = array_ops.gather(array_ops.reshape(x, array_ops.stack([-1, k])), rows)
        return array_ops.reshape(y, full)

    def _log_abs_determinant(self):
        return array_ops.zeros(self.batch_shape_tensor(), dtype=self.dtype)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._matmul(rhs, adjoint=not adjoint, adjoint_arg=adjoint_arg)

    def _to_dense(self):
        n = self._domain_dimension_tensor()
        return _m.cast(_m.equal(_m.cast(_m.range(0, n), self._perm.dtype),
                                self._perm[..., None]), self.dtype)

    def _diag_part(self):
        n = self._domain_dimension_tensor()
        return _m.cast(_m.equal(_m.cast(_m.range(0, n), self._perm.dtype), self._perm),
                       self.dtype)

    def _cond(self):
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)


# --- Toeplitz ---------------------------------------------------------------------------------
class LinearOperatorToeplitz(LinearOperator):
    """The Toeplitz matrix with first column ``col`` and first row ``row`` (``row[0]`` is
    ignored: the diagonal is ``col[0]``)."""

    def __init__(self, col, row, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorToeplitz"):
        params = dict(col=col, row=row, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        with _ops.name_scope(name):
            self._row = to_tensor(row, name="row")
            self._col = to_tensor(col, name="col")
            for what, t in (("row", self._row), ("col", self._col)):
                if t.shape.ndims is not None and t.shape.ndims < 1:
                    raise ValueError(f"Argument {what} must have at least 1 dimension.  "
                                     f"Found: {t}")
            r, c = self._row.shape[-1].value, self._col.shape[-1].value
            if r is not None and c is not None and r != c:
                raise ValueError("Expected square matrix, got row and col with mismatched "
                                 "dimensions.")
            if is_square is False:
                raise ValueError("Only square Toeplitz operators currently supported.")
            super().__init__(dtype=self._row.dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=True,
                             parameters=params, name=name)

    @property
    def col(self):
        return self._col

    @property
    def row(self):
        return self._row

    def _shape(self):
        v = static_broadcast_shape(self._row.shape, self._col.shape)
        return v.concatenate(v[-1:]) if v.ndims is not None else v

    def _shape_tensor(self):
        v = dynamic_broadcast_shape(array_ops.shape(self._row), array_ops.shape(self._col))
        return array_ops.concat([v, v[-1:]], 0)

    def _assert_self_adjoint(self):
        from dflab.ops import check_ops

        return check_ops.assert_equal(self.row, self.col, message="row and col are not the "
                                      "same, and so this operator is not self-adjoint.")

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return _m.matmul(self._to_dense(), x, adjoint_a=adjoint, adjoint_b=adjoint_arg)

    def _trace(self):
        return _m.multiply(_m.cast(self.domain_dimension_tensor(), self.dtype),
                           self.col[..., 0])

    def _diag_part(self):
        return _m.multiply(self.col[..., 0:1],
                           array_ops.ones(array_ops.reshape(self.domain_dimension_tensor(),
                                                            [1]), self.dtype))

    def _to_dense(self):
        total = dynamic_broadcast_shape(array_ops.shape(self._row), array_ops.shape(self._col))
        n = array_ops.shape(self._row)[-1]
        row = array_ops.broadcast_to(self._row, total)
        col = array_ops.broadcast_to(self._col, total)
        elements = array_ops.concat([array_ops.reverse(col, axis=[-1]), row[..., 1:]], -1)
        indices = _m.mod(_m.add(_m.range(0, n), _m.range(n - 1, -1, -1)[:, None]),
                         2 * n - 1)
        dense = array_ops.gather(elements, indices, axis=-1)
        dense.set_shape(self.shape)
        return dense


__all__: list = []
