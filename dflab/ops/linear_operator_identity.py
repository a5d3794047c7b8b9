"""The operators of ``tf.linalg`` whose shape is given by arguments:
``LinearOperatorIdentity``, ``LinearOperatorScaledIdentity`` (``multiplier * I``) and
``LinearOperatorZeros``.

Their products and solves never build a matrix: the identity passes its argument through
(broadcast to its batch shape), the scaled identity multiplies or divides by the
multiplier, zeros gives zeros of the product's shape, as in TF.
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
from dflab.ops.linear_operator import (
    LinearOperator,
    adjoint_matrix,
    combined_commuting_positive_definite_hint,
    combined_commuting_self_adjoint_hint,
    combined_non_singular_hint,
    real_dtype,
    shape_tensor,
    static_broadcast_shape,
    static_value,
    to_tensor,
)
from dflab.ops.linear_operator_basic import LinearOperatorDiag, _assert_zero_imag


# --- identity, scaled identity, zeros ---------------------------------------------------------
def _dimension_arg(value, what):
    """A shape argument as an int tensor and its build-time value (or None), checked as TF
    checks it."""
    if isinstance(value, LinearOperator) or hasattr(value, "initial_value"):
        raise TypeError(f"Argument {what} cannot be reference type. Found: {type(value)}.")
    t = shape_tensor(value, name=what)
    if not t.dtype.base_dtype.is_integer:
        raise TypeError(f"Argument {what} must be integer type.  Found: {t}")
    v = static_value(t)
    return t, v


def _check_scalar_dim(value, what):
    if value is None:
        return
    if np.ndim(value) != 0:
        raise ValueError(f"Argument {what} must be a 0-D Tensor.  Found: {value}")
    if value < 0:
        raise ValueError(f"Argument {what} must be non-negative.  Found: {value}")


def _check_batch_shape(value):
    if value is None:
        return
    if np.ndim(value) != 1:
        raise ValueError(f"Argument batch_shape must be a 1-D Tensor.  Found: {value}")
    if np.any(np.asarray(value) < 0):
        raise ValueError(f"Argument batch_shape must be non-negative.  Found:{value}")


class _ShapedByArguments(LinearOperator):
    """Identity, zeros: operators whose shape is given by arguments, not by a tensor."""

    def _init_shape(self, num_rows, num_columns, batch_shape):
        self._num_rows, self._num_rows_static = _dimension_arg(num_rows, "num_rows")
        _check_scalar_dim(self._num_rows_static, "num_rows")
        if num_columns is None:
            self._num_columns, self._num_columns_static = self._num_rows, self._num_rows_static
        else:
            self._num_columns, self._num_columns_static = _dimension_arg(num_columns,
                                                                         "num_columns")
            _check_scalar_dim(self._num_columns_static, "num_columns")
        self._batch_shape_arg = None
        if batch_shape is not None:
            self._batch_shape_arg, self._batch_shape_static = _dimension_arg(batch_shape,
                                                                             "batch_shape")
            _check_batch_shape(self._batch_shape_static)

    def _shape(self):
        matrix = TensorShape([None if self._num_rows_static is None
                              else int(self._num_rows_static),
                              None if self._num_columns_static is None
                              else int(self._num_columns_static)])
        if self._batch_shape_arg is None:
            return matrix
        if self._batch_shape_static is None:
            return TensorShape(None)
        return TensorShape([int(v) for v in self._batch_shape_static]).concatenate(matrix)

    def _shape_tensor(self):
        matrix = array_ops.stack([self._num_rows, self._num_columns])
        if self._batch_shape_arg is None:
            return matrix
        return array_ops.concat([self._batch_shape_arg, matrix], 0)

    def _possibly_broadcast_batch_shape(self, x):
        if self._batch_shape_arg is None:
            return x
        special = self.batch_shape.concatenate([1, 1])
        if special.is_fully_defined():
            if static_broadcast_shape(x.shape, special).as_list() == x.shape.as_list() and \
                    x.shape.is_fully_defined():
                return x
            return _m.add(x, array_ops.zeros(special.as_list(), dtype=self.dtype))
        special = array_ops.concat([self.batch_shape_tensor(), [1, 1]], 0)
        return _m.add(x, array_ops.zeros(special, dtype=self.dtype))

    def _min_matrix_dim(self):
        d, r = self.domain_dimension.value, self.range_dimension.value
        return None if d is None or r is None else min(d, r)

    def _min_matrix_dim_tensor(self):
        return _m.reduce_min(self.shape_tensor()[-2:])

    def _filled_diag(self, fill):
        if self.shape.is_fully_defined():
            shape = self.batch_shape.as_list() + [self._min_matrix_dim()]
        else:
            shape = array_ops.concat([self.batch_shape_tensor(),
                                      array_ops.reshape(self._min_matrix_dim_tensor(), [1])], 0)
        return fill(shape, dtype=self.dtype)

    def _batch_fill(self, fill):
        shape = self.batch_shape.as_list() if self.batch_shape.is_fully_defined() else \
            self.batch_shape_tensor()
        return fill(shape, dtype=self.dtype)


class LinearOperatorIdentity(_ShapedByArguments):
    """The [batch] identity ``num_rows x num_rows``."""

    _is_identity = True

    def __init__(self, num_rows, batch_shape=None, dtype=None, is_non_singular=True,
                 is_self_adjoint=True, is_positive_definite=True, is_square=True,
                 assert_proper_shapes=False, name="LinearOperatorIdentity"):
        params = dict(num_rows=num_rows, batch_shape=batch_shape, dtype=dtype,
                      is_non_singular=is_non_singular, is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square,
                      assert_proper_shapes=assert_proper_shapes, name=name)
        dtype = _dt.as_dtype(dtype or _dt.float32)
        self._assert_proper_shapes = assert_proper_shapes
        with _ops.name_scope(name):
            if not is_self_adjoint:
                raise ValueError("An identity operator is always self adjoint.")
            if not is_non_singular:
                raise ValueError("An identity operator is always non-singular.")
            if not is_positive_definite:
                raise ValueError("An identity operator is always positive-definite.")
            if not is_square:
                raise ValueError("An identity operator is always square.")
            super().__init__(dtype=dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)
            self._init_shape(num_rows, None, batch_shape)

    def _linop_adjoint(self):
        return self

    def _linop_inverse(self):
        return self

    def _linop_cholesky(self):
        return LinearOperatorIdentity(num_rows=self._num_rows, batch_shape=self._batch_shape_arg,
                                      dtype=self.dtype)

    def _linop_matmul(self, left, right):
        return right

    def _linop_solve(self, left, right):
        return right

    def _assert_non_singular(self):
        from dflab.ops.control_flow_ops import no_op

        return no_op("assert_non_singular")

    def _assert_positive_definite(self):
        from dflab.ops.control_flow_ops import no_op

        return no_op("assert_positive_definite")

    def _assert_self_adjoint(self):
        from dflab.ops.control_flow_ops import no_op

        return no_op("assert_self_adjoint")

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = adjoint_matrix(x) if adjoint_arg else x
        return self._possibly_broadcast_batch_shape(x)

    def _determinant(self):
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _log_abs_determinant(self):
        return array_ops.zeros(self.batch_shape_tensor(), dtype=self.dtype)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._matmul(rhs, adjoint_arg=adjoint_arg)

    def _trace(self):
        ones = self._batch_fill(array_ops.ones)
        n = self._min_matrix_dim()
        if n is None:
            n = _m.cast(self._min_matrix_dim_tensor(), self.dtype)
        return _m.multiply(ones, n)

    def _diag_part(self):
        return self._filled_diag(array_ops.ones)

    def add_to_tensor(self, mat, name="add_to_tensor"):
        with self._name_scope(name):
            mat = _ops.convert_to_tensor(mat, name="mat")
            return _mx.matrix_set_diag(mat, _m.add(1, _mx.matrix_diag_part(mat)))

    def _eigvals(self):
        return self._filled_diag(array_ops.ones)

    def _cond(self):
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _to_dense(self):
        if self.shape.is_fully_defined():
            return _ops.convert_to_tensor(np.broadcast_to(
                np.eye(self.domain_dimension.value, dtype=self.dtype.as_numpy_dtype),
                self.shape.as_list()).copy())
        return super()._to_dense()


class LinearOperatorScaledIdentity(_ShapedByArguments):
    """``multiplier * I``, batched by ``multiplier``'s shape."""

    _is_scaled_identity = True

    def __init__(self, num_rows, multiplier, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=True, assert_proper_shapes=False,
                 name="LinearOperatorScaledIdentity"):
        params = dict(num_rows=num_rows, multiplier=multiplier, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square,
                      assert_proper_shapes=assert_proper_shapes, name=name)
        self._assert_proper_shapes = assert_proper_shapes
        with _ops.name_scope(name):
            self._multiplier = to_tensor(multiplier, name="multiplier")
            if not self._multiplier.dtype.base_dtype.is_complex:
                if is_self_adjoint is False:
                    raise ValueError("A real diagonal operator is always self adjoint.")
                is_self_adjoint = True
            if not is_square:
                raise ValueError("A ScaledIdentity operator is always square.")
            super().__init__(dtype=self._multiplier.dtype.base_dtype,
                             is_non_singular=is_non_singular, is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)
            self._init_shape(num_rows, None, None)
            self._num_rows_cast_to_dtype = _m.cast(self._num_rows, self.dtype)
            self._num_rows_cast_to_real_dtype = _m.cast(self._num_rows, real_dtype(self.dtype))

    @property
    def multiplier(self):
        return self._multiplier

    def _shape(self):
        n = None if self._num_rows_static is None else int(self._num_rows_static)
        return self._multiplier.shape.concatenate([n, n])

    def _shape_tensor(self):
        return array_ops.concat([array_ops.shape(self._multiplier),
                                 array_ops.stack([self._num_rows, self._num_rows])], 0)

    def _assert_non_singular(self):
        from dflab.ops import check_ops

        return check_ops.assert_positive(_m.abs(self.multiplier),
                                         message="LinearOperator was singular")

    def _assert_positive_definite(self):
        from dflab.ops import check_ops

        return check_ops.assert_positive(_sm.real(self.multiplier),
                                         message="LinearOperator was not positive definite.")

    def _assert_self_adjoint(self):
        return _assert_zero_imag(self.multiplier, "LinearOperator was not self-adjoint")

    def _multiplier_matrix(self, conjugate=False):
        m = self.multiplier[..., None, None]
        return _sm.conj(m) if conjugate else m

    def _linop_adjoint(self):
        mult = _sm.conj(self.multiplier) if self.dtype.is_complex else self.multiplier
        return LinearOperatorScaledIdentity(self._num_rows, mult,
                                            is_non_singular=self.is_non_singular,
                                            is_self_adjoint=self.is_self_adjoint,
                                            is_positive_definite=self.is_positive_definite)

    def _linop_cholesky(self):
        return LinearOperatorScaledIdentity(self._num_rows, _m.sqrt(self.multiplier),
                                            is_non_singular=True, is_self_adjoint=True,
                                            is_positive_definite=True)

    def _linop_inverse(self):
        return LinearOperatorScaledIdentity(
            self._num_rows, _m.divide(_ops.convert_to_tensor(1.0, self.dtype), self.multiplier),
            is_non_singular=self.is_non_singular, is_self_adjoint=True,
            is_positive_definite=self.is_positive_definite)

    def _commuting(self, left, right, combine):
        hints = dict(is_non_singular=combined_non_singular_hint(left, right),
                     is_self_adjoint=combined_commuting_self_adjoint_hint(left, right),
                     is_positive_definite=combined_commuting_positive_definite_hint(left, right))
        if isinstance(right, LinearOperatorScaledIdentity):
            return LinearOperatorScaledIdentity(left.domain_dimension_tensor(),
                                                combine(right.multiplier, left.multiplier),
                                                **hints)
        if isinstance(right, LinearOperatorDiag):
            return LinearOperatorDiag(combine(right.diag, left.multiplier), is_square=True,
                                      **hints)
        return None

    def _linop_matmul(self, left, right):
        return self._commuting(left, right, _m.multiply) or super()._linop_matmul(left, right)

    def _linop_solve(self, left, right):
        return self._commuting(left, right, _m.divide) or super()._linop_solve(left, right)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = adjoint_matrix(x) if adjoint_arg else x
        return _m.multiply(x, self._multiplier_matrix(conjugate=adjoint))

    def _determinant(self):
        return _m.pow(self.multiplier, self._num_rows_cast_to_dtype)

    def _log_abs_determinant(self):
        return _m.multiply(self._num_rows_cast_to_real_dtype,
                           _m.log(_m.abs(self.multiplier)))

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        rhs = adjoint_matrix(rhs) if adjoint_arg else rhs
        return _m.divide(rhs, self._multiplier_matrix(conjugate=adjoint))

    def _trace(self):
        ones = self._batch_fill(array_ops.ones)
        n = self._min_matrix_dim()
        if n is None:
            n = _m.cast(self._min_matrix_dim_tensor(), self.dtype)
        return _m.multiply(_m.multiply(self.multiplier, n), ones)

    def _diag_part(self):
        return _m.multiply(self._filled_diag(array_ops.ones), self.multiplier[..., None])

    def add_to_tensor(self, mat, name="add_to_tensor"):
        with self._name_scope(name):
            mat = _ops.convert_to_tensor(mat, name="mat")
            return _mx.matrix_set_diag(mat, _m.add(self.multiplier[..., None],
                                                   _mx.matrix_diag_part(mat)))

    def _eigvals(self):
        return self._diag_part()

    def _cond(self):
        return array_ops.where(_m.equal(self._multiplier, 0.0),
                               array_ops.fill(array_ops.shape(self._multiplier),
                                              _ops.convert_to_tensor(np.nan, self.dtype)),
                               array_ops.ones_like(self._multiplier))


class LinearOperatorZeros(_ShapedByArguments):
    """The [batch] zero matrix ``num_rows x num_columns``."""

    _is_zeros = True

    def __init__(self, num_rows, num_columns=None, batch_shape=None, dtype=None,
                 is_non_singular=False, is_self_adjoint=True, is_positive_definite=False,
                 is_square=True, assert_proper_shapes=False, name="LinearOperatorZeros"):
        params = dict(num_rows=num_rows, num_columns=num_columns, batch_shape=batch_shape,
                      dtype=dtype, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square,
                      assert_proper_shapes=assert_proper_shapes, name=name)
        dtype = _dt.as_dtype(dtype or _dt.float32)
        self._assert_proper_shapes = assert_proper_shapes
        with _ops.name_scope(name):
            if not is_self_adjoint and is_square:
                raise ValueError("A zero operator is always self adjoint.")
            if is_non_singular:
                raise ValueError("A zero operator is always singular.")
            if is_positive_definite:
                raise ValueError("A zero operator is always not positive-definite.")
            super().__init__(dtype=dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)
            self._init_shape(num_rows, num_columns, batch_shape)
            r, c = self._num_rows_static, self._num_columns_static
            if r is not None and c is not None and is_square and r != c:
                raise ValueError(f"LinearOperatorZeros initialized as is_square=True, but got "
                                 f"num_rows({r}) != num_columns({c})")

    def _assert_non_singular(self):
        from dflab.framework import errors

        raise errors.InvalidArgumentError(None, None,
                                          "Zero operators are always non-invertible.")

    def _assert_positive_definite(self):
        from dflab.framework import errors

        raise errors.InvalidArgumentError(None, None,
                                          "Zero operators are always non-positive definite.")

    def _assert_self_adjoint(self):
        from dflab.ops.control_flow_ops import no_op

        return no_op("assert_self_adjoint")

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        xs = array_ops.shape(x)
        if self.is_square:
            out = array_ops.concat([xs[:-2], array_ops.stack([xs[-1], xs[-2]])], 0) \
                if adjoint_arg else xs
        else:
            n = self._num_columns if adjoint else self._num_rows
            m = xs[-2] if adjoint_arg else xs[-1]
            out = array_ops.concat([xs[:-2], array_ops.stack([n, m])], 0)
        return self._possibly_broadcast_batch_shape(array_ops.zeros(out, dtype=x.dtype))

    def _linop_matmul(self, left, right):
        if not left.is_square or not right.is_square:
            raise ValueError("Matmul with non-square `LinearOperator`s or non-square "
                             "`LinearOperatorZeros` not supported at this time.")
        return left

    def _determinant(self):
        return self._batch_fill(array_ops.zeros)

    def _trace(self):
        return self._batch_fill(array_ops.zeros)

    def _diag_part(self):
        return self._filled_diag(array_ops.zeros)

    def add_to_tensor(self, mat, name="add_to_tensor"):
        return self._possibly_broadcast_batch_shape(_ops.convert_to_tensor(mat))

    def _eigvals(self):
        return self._filled_diag(array_ops.zeros)


__all__: list = []
