"""The operators of ``tf.linalg`` built from other operators: ``LinearOperatorAdjoint``,
``Inversion``, ``Composition``, ``Kronecker``, ``BlockDiag``, ``BlockLowerTriangular`` and
``LowRankUpdate``.

Each works through its parts' own methods (a composition's solve is its factors' solves in
turn, a Kronecker product's matmul reshapes and applies one factor at a time, a low-rank
update solves through the Woodbury identity), as TF's do. The block operators also take
and give their arguments as lists of blocks, as in TF.
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import Dimension, TensorShape
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops import special_math_ops as _sm
from dflab.ops.linear_operator import (
    LinearOperator,
    adjoint_matrix,
    check_compatible,
    is_aat_form,
    register_operator,
    shape_tensor,
    static_broadcast_shape,
    use_operator_or_provided_hint_unless_contradicting,
)
from dflab.ops.linear_operator_basic import (
    LinearOperatorLowerTriangular,
)


def _same_dtype(operators, message):
    dtype = operators[0].dtype
    for op in operators:
        if op.dtype != dtype:
            raise TypeError(message.format(
                "   ".join(str((o.name, o.dtype)) for o in operators)))
    return dtype


def _hints_kept_by(operator, relation, is_square, is_non_singular, is_self_adjoint,
                   is_positive_definite):
    """The hints of an operator's adjoint or inverse (``relation``), which has each hint that
    ``operator`` has: the given hint or ``operator``'s, a ValueError where they contradict."""
    combine = use_operator_or_provided_hint_unless_contradicting
    what = "An operator is {0} if and only if its " + relation + " is {0}."
    is_square = combine(operator, "is_square", is_square, what.format("square"))
    is_non_singular = combine(operator, "is_non_singular", is_non_singular,
                              what.format("non-singular"))
    is_self_adjoint = combine(operator, "is_self_adjoint", is_self_adjoint,
                              what.format("self-adjoint"))
    is_positive_definite = combine(operator, "is_positive_definite", is_positive_definite,
                                   what.format("positive-definite"))
    return is_square, is_non_singular, is_self_adjoint, is_positive_definite


def _hints_shared_by_all(operators, is_non_singular, is_self_adjoint, is_positive_definite):
    """The given hints, each set to True where every operator has it: a direct sum or a
    Kronecker product keeps what all its factors are."""
    given = (is_non_singular, is_self_adjoint, is_positive_definite)
    hints = ("is_non_singular", "is_self_adjoint", "is_positive_definite")
    return tuple(True if all(getattr(op, hint) for op in operators) else value
                 for hint, value in zip(hints, given))


def _batch_shape_of(operators):
    batch = operators[0].batch_shape
    for op in operators[1:]:
        batch = static_broadcast_shape(batch, op.batch_shape)
    return batch


def _batch_shape_tensor_of(operators):
    zeros = array_ops.zeros(operators[0].batch_shape_tensor())
    for op in operators[1:]:
        zeros = _m.add(zeros, array_ops.zeros(op.batch_shape_tensor()))
    return array_ops.shape(zeros)


# --- adjoint and inversion -----------------------------------------------------------------------
@register_operator
class LinearOperatorAdjoint(LinearOperator):
    """``A^H`` of an operator ``A``, through ``A``'s own ``adjoint=True`` methods."""

    def __init__(self, operator, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None):
        params = dict(operator=operator, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        self._operator = operator
        is_square, is_non_singular, is_self_adjoint, is_positive_definite = _hints_kept_by(
            operator, "adjoint", is_square, is_non_singular, is_self_adjoint, is_positive_definite)
        name = operator.name + "_adjoint" if name is None else name
        with _ops.name_scope(name):
            super().__init__(dtype=operator.dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)

    @property
    def operator(self):
        return self._operator

    def _linop_adjoint(self):
        return self.operator

    def _assert_non_singular(self):
        return self.operator.assert_non_singular()

    def _assert_positive_definite(self):
        return self.operator.assert_positive_definite()

    def _assert_self_adjoint(self):
        return self.operator.assert_self_adjoint()

    def _shape(self):
        s = self.operator.shape
        if s.ndims is None:
            return s
        return s[:-2].concatenate([s[-1], s[-2]])

    def _shape_tensor(self):
        s = self.operator.shape_tensor()
        return array_ops.concat([s[:-2], array_ops.stack([s[-1], s[-2]])], 0)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self.operator.matmul(x, adjoint=not adjoint, adjoint_arg=adjoint_arg)

    def _matvec(self, x, adjoint=False):
        return self.operator.matvec(x, adjoint=not adjoint)

    def _determinant(self):
        if self.is_self_adjoint:
            return self.operator.determinant()
        return _sm.conj(self.operator.determinant())

    def _log_abs_determinant(self):
        return self.operator.log_abs_determinant()

    def _trace(self):
        if self.is_self_adjoint:
            return self.operator.trace()
        return _sm.conj(self.operator.trace())

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self.operator.solve(rhs, adjoint=not adjoint, adjoint_arg=adjoint_arg)

    def _solvevec(self, rhs, adjoint=False):
        return self.operator.solvevec(rhs, adjoint=not adjoint)

    def _to_dense(self):
        if self.is_self_adjoint:
            return self.operator.to_dense()
        return adjoint_matrix(self.operator.to_dense())

    def _eigvals(self):
        e = self.operator.eigvals()
        return e if self.operator.is_self_adjoint else _sm.conj(e)

    def _cond(self):
        return self.operator.cond()


@register_operator
class LinearOperatorInversion(LinearOperator):
    """``A^-1`` of an operator ``A``: its matmul is ``A``'s solve and its solve ``A``'s
    matmul."""

    def __init__(self, operator, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None):
        params = dict(operator=operator, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        self._operator = operator
        if operator.is_non_singular is False or is_non_singular is False:
            raise ValueError(f"Argument `is_non_singular` or argument `operator` must have "
                             f"supplied hint `is_non_singular` equal to `True` or `None`. Found "
                             f"`operator.is_non_singular`: {operator.is_non_singular}, "
                             f"`is_non_singular`: {is_non_singular}.")
        if operator.is_square is False or is_square is False:
            raise ValueError(f"Argument `is_square` or argument `operator` must have supplied "
                             f"hint `is_square` equal to `True` or `None`. Found "
                             f"`operator.is_square`: {operator.is_square}, `is_square`: "
                             f"{is_square}.")
        is_square, is_non_singular, is_self_adjoint, is_positive_definite = _hints_kept_by(
            operator, "inverse", is_square, is_non_singular, is_self_adjoint, is_positive_definite)
        name = operator.name + "_inv" if name is None else name
        with _ops.name_scope(name):
            super().__init__(dtype=operator.dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)

    @property
    def operator(self):
        return self._operator

    def _linop_inverse(self):
        return self.operator

    def _linop_solve(self, left, right):
        return left.operator.matmul(right)

    def _assert_non_singular(self):
        return self.operator.assert_non_singular()

    def _assert_positive_definite(self):
        return self.operator.assert_positive_definite()

    def _assert_self_adjoint(self):
        return self.operator.assert_self_adjoint()

    def _shape(self):
        return self.operator.shape

    def _shape_tensor(self):
        return self.operator.shape_tensor()

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self.operator.solve(x, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _determinant(self):
        return _m.divide(_ops.convert_to_tensor(1.0, self.dtype), self.operator.determinant())

    def _log_abs_determinant(self):
        return _m.multiply(-1.0, self.operator.log_abs_determinant())

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self.operator.matmul(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _eigvals(self):
        return _m.divide(_ops.convert_to_tensor(1.0, self.dtype), self.operator.eigvals())

    def _cond(self):
        return self.operator.cond()


# --- composition ------------------------------------------------------------------------------
@register_operator
class LinearOperatorComposition(LinearOperator):
    """``A1 @ A2 @ ... @ An``, applied factor by factor."""

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None):
        params = dict(operators=operators, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        operators = list(operators)
        if not operators:
            raise ValueError(f"Expected a non-empty list of operators. Found: {operators}")
        self._operators = operators
        dtype = _same_dtype(operators, "Expected all operators to have the same dtype.  "
                                       "Found {}")
        if all(op.is_non_singular for op in operators):
            if is_non_singular is False:
                raise ValueError("The composition of non-singular operators is always "
                                 "non-singular.")
            is_non_singular = True
        aat = is_aat_form(operators)
        if (len(operators) == 1 and operators[0].is_self_adjoint) or aat:
            if is_self_adjoint is False:
                raise ValueError("The composition was determined to be self-adjoint but user "
                                 "provided incorrect `False` hint.")
            is_self_adjoint = True
        if aat:
            if is_square is False:
                raise ValueError("The composition was determined have the form A @ A.H, hence "
                                 "it must be square. The user provided an incorrect `False` "
                                 "hint.")
            is_square = True
            if is_non_singular:
                if is_positive_definite is False:
                    raise ValueError("The composition was determined to be non-singular and "
                                     "have the form A @ A.H, hence it must be "
                                     "positive-definite. The user provided an incorrect "
                                     "`False` hint.")
                is_positive_definite = True
        name = "_o_".join(op.name for op in operators) if name is None else name
        with _ops.name_scope(name):
            super().__init__(dtype=dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)

    @property
    def operators(self):
        return self._operators

    def _shape(self):
        domain = self.operators[0].domain_dimension
        for op in self.operators[1:]:
            check_compatible(domain, op.range_dimension)
            domain = op.domain_dimension
        matrix = TensorShape([self.operators[0].range_dimension,
                              self.operators[-1].domain_dimension])
        return _batch_shape_of(self.operators).concatenate(matrix)

    def _shape_tensor(self):
        matrix = array_ops.stack([self.operators[0].range_dimension_tensor(),
                                  self.operators[-1].domain_dimension_tensor()])
        return array_ops.concat([_batch_shape_tensor_of(self.operators), matrix], 0)

    def _linop_cholesky(self):
        ops_ = self.operators
        if not (len(ops_) == 2 and is_aat_form(ops_) and
                isinstance(ops_[0], LinearOperatorLowerTriangular)):
            return super()._linop_cholesky()
        left = ops_[0]
        if left.is_positive_definite:
            return left
        sign = array_ops.expand_dims(_m.sign(left.diag_part()), -2)
        return LinearOperatorLowerTriangular(
            _m.divide(left.tril, sign), is_non_singular=left.is_non_singular,
            is_self_adjoint=left.is_self_adjoint,
            is_positive_definite=True if left.is_positive_definite else None, is_square=True)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        order = self.operators if adjoint else list(reversed(self.operators))
        result = order[0].matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)
        for op in order[1:]:
            result = op.matmul(result, adjoint=adjoint)
        return result

    def _determinant(self):
        result = self.operators[0].determinant()
        for op in self.operators[1:]:
            result = _m.multiply(result, op.determinant())
        return result

    def _log_abs_determinant(self):
        result = self.operators[0].log_abs_determinant()
        for op in self.operators[1:]:
            result = _m.add(result, op.log_abs_determinant())
        return result

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        order = list(reversed(self.operators)) if adjoint else self.operators
        x = order[0].solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)
        for op in order[1:]:
            x = op.solve(x, adjoint=adjoint)
        return x

    def _assert_non_singular(self):
        from dflab.ops.control_flow_ops import group

        if all(op.is_square for op in self.operators):
            return group(*[op.assert_non_singular() for op in self.operators])
        return super()._assert_non_singular()


# --- Kronecker product ------------------------------------------------------------------------
def _dim_value(dim, tensor_fn):
    v = Dimension(dim).value
    return v if v is not None else tensor_fn()


class LinearOperatorKronecker(LinearOperator):
    """The Kronecker product ``A1 ⊗ A2 ⊗ ... ⊗ An``, applied one factor at a time."""

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None):
        params = dict(operators=operators, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        operators = list(operators)
        if not operators:
            raise ValueError(f"Argument `operators` must be a list of >=1 operators. "
                             f"Received: {operators}.")
        self._operators = operators
        dtype = _same_dtype(operators, "Expected every operation in argument `operators` to "
                                       "have the same dtype. Received {}.")
        for hint, value, what in (("is_non_singular", is_non_singular, "non-singular"),
                                  ("is_self_adjoint", is_self_adjoint, "self-adjoint"),
                                  ("is_positive_definite", is_positive_definite,
                                   "positive-definite")):
            if all(getattr(op, hint) for op in operators):
                if value is False:
                    raise ValueError(f"The Kronecker product of {what} operators is always "
                                     f"{what}. Expected argument `{hint}` to be True. "
                                     f"Received: {value}.")
        is_non_singular, is_self_adjoint, is_positive_definite = _hints_shared_by_all(
            operators, is_non_singular, is_self_adjoint, is_positive_definite)
        name = "_x_".join(op.name for op in operators) if name is None else name
        with _ops.name_scope(name):
            super().__init__(dtype=dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)

    @property
    def operators(self):
        return self._operators

    def _shape(self):
        domain, rng = self.operators[0].domain_dimension, self.operators[0].range_dimension
        for op in self.operators[1:]:
            domain = domain * op.domain_dimension
            rng = rng * op.range_dimension
        return _batch_shape_of(self.operators).concatenate(TensorShape([rng, domain]))

    def _shape_tensor(self):
        domain = self.operators[0].domain_dimension_tensor()
        rng = self.operators[0].range_dimension_tensor()
        for op in self.operators[1:]:
            domain = _m.multiply(domain, op.domain_dimension_tensor())
            rng = _m.multiply(rng, op.range_dimension_tensor())
        return array_ops.concat([_batch_shape_tensor_of(self.operators),
                                 array_ops.stack([rng, domain])], 0)

    def _linop_adjoint(self):
        return LinearOperatorKronecker([op.adjoint() for op in self.operators],
                                       is_non_singular=self.is_non_singular,
                                       is_self_adjoint=self.is_self_adjoint,
                                       is_positive_definite=self.is_positive_definite,
                                       is_square=True)

    def _linop_cholesky(self):
        return LinearOperatorKronecker([op.cholesky() for op in self.operators],
                                       is_non_singular=True, is_self_adjoint=None,
                                       is_square=True)

    def _linop_inverse(self):
        return LinearOperatorKronecker([op.inverse() for op in self.operators],
                                       is_non_singular=self.is_non_singular,
                                       is_self_adjoint=self.is_self_adjoint,
                                       is_positive_definite=self.is_positive_definite,
                                       is_square=True)

    def _apply_factorwise(self, x, fn, adjoint=False, adjoint_arg=False):
        """Apply ``fn`` (a factor's matmul or solve) factor by factor, last first: each
        step views the argument as ``[..., rest, d]`` with ``d`` that factor's size."""
        out = x
        if adjoint_arg:
            if self.dtype.is_complex:
                out = _sm.conj(out)
        else:
            out = array_ops.matrix_transpose(out)
        for o in reversed(self.operators):
            d = _dim_value(o.range_dimension if adjoint else o.domain_dimension,
                           o.range_dimension_tensor if adjoint else o.domain_dimension_tensor)
            s = out.shape
            if s.ndims is not None and s[-2].value is not None and s[-1].value is not None \
                    and isinstance(d, int):
                shape = s[:-2].as_list() + [s[-2].value * s[-1].value // d, d]
                if None in shape:
                    dyn = array_ops.shape(out)
                    shape = array_ops.concat([dyn[:-2], shape_tensor(shape[-2:])], 0)
            else:
                dyn = array_ops.shape(out)
                shape = array_ops.concat([dyn[:-2], array_ops.stack(
                    [_m.floordiv(_m.multiply(dyn[-2], dyn[-1]), d), d])], 0)
            out = array_ops.reshape(out, shape)
            if self.dtype.is_complex:
                out = _sm.conj(out)
            out = fn(o, out, adjoint=adjoint, adjoint_arg=True)
        col = array_ops.shape(x)[-2] if adjoint_arg else array_ops.shape(x)[-1]
        row = self.domain_dimension_tensor() if adjoint else self.range_dimension_tensor()
        out = array_ops.reshape(out, array_ops.concat(
            [array_ops.shape(out)[:-2], array_ops.stack([row, col])], 0))
        if x.shape.is_fully_defined():
            cols = x.shape[-2] if adjoint_arg else x.shape[-1]
            batch = static_broadcast_shape(x.shape[:-2], self.batch_shape)
            rows = self.domain_dimension if adjoint else self.range_dimension
            out.set_shape(batch.concatenate([rows, cols]))
        return out

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self._apply_factorwise(
            x, lambda o, v, adjoint, adjoint_arg: o.matmul(v, adjoint=adjoint,
                                                           adjoint_arg=adjoint_arg),
            adjoint, adjoint_arg)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._apply_factorwise(
            rhs, lambda o, v, adjoint, adjoint_arg: o.solve(v, adjoint=adjoint,
                                                            adjoint_arg=adjoint_arg),
            adjoint, adjoint_arg)

    def _power(self, op):
        total = self.domain_dimension_tensor()
        return _m.cast(_m.truediv(total, op.domain_dimension_tensor()), op.dtype)

    def _determinant(self):
        det = None
        for op in self.operators:
            term = _m.pow(op.determinant(), self._power(op))
            det = term if det is None else _m.multiply(det, term)
        return det

    def _log_abs_determinant(self):
        total = None
        for op in self.operators:
            term = _m.multiply(op.log_abs_determinant(), self._power(op))
            total = term if total is None else _m.add(total, term)
        return total

    def _trace(self):
        result = self.operators[0].trace()
        for op in self.operators[1:]:
            result = _m.multiply(result, op.trace())
        return result

    def _diag_part(self):
        d = self.operators[0].diag_part()
        for op in self.operators[1:]:
            d = _m.multiply(d[..., :, None], op.diag_part()[..., None, :])
            d = array_ops.reshape(d, array_ops.concat([array_ops.shape(d)[:-2], [-1]], 0))
        return d

    def _to_dense(self):
        product = self.operators[0].to_dense()
        for op in self.operators[1:]:
            product = _m.multiply(product[..., :, None, :, None],
                                  op.to_dense()[..., None, :, None, :])
            s = array_ops.shape(product)
            product = array_ops.reshape(product, array_ops.concat(
                [s[:-4], array_ops.stack([_m.multiply(s[-4], s[-3]),
                                          _m.multiply(s[-2], s[-1])])], 0))
        product.set_shape(self.shape)
        return product

    def _eigvals(self):
        vals = [op.eigvals() for op in self.operators]
        product = vals[0]
        for v in vals[1:]:
            product = _m.multiply(product[..., None], v[..., None, :])
            product = array_ops.reshape(product, array_ops.concat(
                [array_ops.shape(product)[:-2], [-1]], 0))
        return product

    def _assert_non_singular(self):
        from dflab.framework import errors
        from dflab.ops.control_flow_ops import group

        if all(op.is_square for op in self.operators):
            return group(*[op.assert_non_singular() for op in self.operators])
        raise errors.InvalidArgumentError(
            None, None, "All Kronecker factors must be square for the product to be "
            "invertible. Expected hint `is_square` to be True for every operator in argument "
            "`operators`.")


__all__: list = []
