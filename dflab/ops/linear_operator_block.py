"""The block and low-rank operators of ``tf.linalg``: ``LinearOperatorBlockDiag`` (a direct
sum), ``LinearOperatorBlockLowerTriangular`` and ``LinearOperatorLowRankUpdate``
(``L + U D V^H``).

The block operators split their argument into blocks along the rows, apply their blocks
(forward substitution for a lower-triangular solve) and concatenate; an argument given as
a list of blocks gives a list back, as in TF. The low-rank update solves through the
Woodbury identity and takes its determinant through the matrix determinant lemma, both on
the small "capacitance" matrix ``D^-1 + V^H L^-1 U``.
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import Dimension, TensorShape
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops import special_math_ops as _sm
from dflab.ops.linalg_solve_ops import cholesky, cholesky_solve, matrix_determinant
from dflab.ops.linear_operator import (
    LinearOperator,
    adjoint_matrix,
    broadcast_matrix_batch_dims,
    check_compatible,
    combined_non_singular_hint,
    matrix_solve_with_broadcast,
    split_arg_into_blocks,
    static_broadcast_shape,
)
from dflab.ops.linear_operator_basic import LinearOperatorDiag
from dflab.ops.linear_operator_identity import LinearOperatorIdentity
from dflab.ops.linear_operator_structured import (
    _batch_shape_of,
    _batch_shape_tensor_of,
    _hints_shared_by_all,
    _same_dtype,
)
from dflab.ops.matrix_ops import matrix_diag_part


def _dims_agree_or_raise(right, left, message):
    r, d = right.range_dimension.value, left.domain_dimension.value
    if r is not None and d is not None and r != d:
        raise ValueError(message.format(d, r))


def _is_nested(x):
    return isinstance(x, (list, tuple))


def arg_is_blockwise(block_dimensions, arg, arg_split_dim):
    """Whether ``arg`` is a list of per-block tensors rather than one tensor (TF's rule,
    which looks at the blocks' sizes where a list could be either)."""
    if not (isinstance(arg, (tuple, list)) and len(arg) == len(block_dimensions)):
        return False
    if not any(_is_nested(x) for x in arg):
        return True
    arg_dims = [_ops.convert_to_tensor(x).shape[arg_split_dim].value for x in arg]
    self_dims = [Dimension(d).value for d in block_dimensions]
    if all(d is None for d in self_dims):
        if len(arg_dims) == 1:
            return False
        if any(d != arg_dims[0] for d in arg_dims):
            return True
        raise ValueError("Parsing of the input structure is ambiguous. Please input a "
                         "blockwise iterable of `Tensor`s or a single `Tensor`.")
    if all(s == a or s is None for s, a in zip(self_dims, arg_dims)):
        return True
    total = sum(s for s in self_dims if s is not None)
    if all(a == arg_dims[0] for a in arg_dims) and arg_dims[0] >= total:
        return False
    raise ValueError("Input dimension does not match operator dimension.")


class _Blockwise(LinearOperator):
    """What the two block operators share: their diagonal blocks' dimensions, and the
    parsing of an argument given whole or as a list of blocks."""

    def _block_range_dimensions(self):
        return [op.range_dimension for op in self._diagonal_operators]

    def _block_domain_dimensions(self):
        return [op.domain_dimension for op in self._diagonal_operators]

    def _block_range_dimension_tensors(self):
        return [op.range_dimension_tensor() for op in self._diagonal_operators]

    def _block_domain_dimension_tensors(self):
        return [op.domain_dimension_tensor() for op in self._diagonal_operators]

    def _blocks_of(self, x, block_dims, arg_dim, op_dim, adjoint_arg):
        """(blocks split along the rows with any ``adjoint_arg`` applied, was a list)."""
        if arg_is_blockwise(block_dims, x, arg_dim):
            blocks = []
            for dim, block in zip(block_dims, x):
                if not isinstance(block, LinearOperator):
                    block = _ops.convert_to_tensor(block)
                    self._check_input_dtype(block)
                    check_compatible(dim, block.shape[arg_dim])
                    block = adjoint_matrix(block) if adjoint_arg else block
                blocks.append(block)
            return blocks, True
        x = _ops.convert_to_tensor(x, name="x")
        self._check_input_dtype(x)
        check_compatible(op_dim, x.shape[arg_dim])
        x = adjoint_matrix(x) if adjoint_arg else x
        return split_arg_into_blocks(self._block_domain_dimensions(),
                                     self._block_domain_dimension_tensors, x, axis=-2), False

    @staticmethod
    def _join(results, blockwise):
        if blockwise:
            return results
        return array_ops.concat(broadcast_matrix_batch_dims(results), axis=-2)

    def matmul(self, x, adjoint=False, adjoint_arg=False, name="matmul"):
        if isinstance(x, LinearOperator):
            return super().matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg, name=name)
        with self._name_scope(name):
            dims = self._block_range_dimensions() if adjoint else \
                self._block_domain_dimensions()
            op_dim = self.range_dimension if adjoint else self.domain_dimension
            blocks, blockwise = self._blocks_of(x, dims, -1 if adjoint_arg else -2, op_dim,
                                                adjoint_arg)
            return self._join(self._matmul_blocks(blocks, adjoint), blockwise)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self.matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def matvec(self, x, adjoint=False, name="matvec"):
        with self._name_scope(name):
            dims = self._block_range_dimensions() if adjoint else \
                self._block_domain_dimensions()
            if arg_is_blockwise(dims, x, -1):
                ys = self.matmul([array_ops.expand_dims(_ops.convert_to_tensor(b), -1)
                                  for b in x], adjoint=adjoint)
                return [array_ops.squeeze(y, axis=-1) for y in ys]
            x = _ops.convert_to_tensor(x, name="x")
            self._check_input_dtype(x)
            check_compatible(self.range_dimension if adjoint else self.domain_dimension,
                             x.shape[-1])
            return array_ops.squeeze(self.matmul(array_ops.expand_dims(x, -1),
                                                 adjoint=adjoint), axis=-1)

    def solve(self, rhs, adjoint=False, adjoint_arg=False, name="solve"):
        self._check_solvable()
        if isinstance(rhs, LinearOperator):
            return super().solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg, name=name)
        with self._name_scope(name):
            dims = self._block_domain_dimensions() if adjoint else \
                self._block_range_dimensions()
            op_dim = self.domain_dimension if adjoint else self.range_dimension
            blocks, blockwise = self._blocks_of(rhs, dims, -1 if adjoint_arg else -2, op_dim,
                                                adjoint_arg)
            return self._join(self._solve_blocks(blocks, adjoint), blockwise)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self.solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def solvevec(self, rhs, adjoint=False, name="solve"):
        with self._name_scope(name):
            dims = self._block_domain_dimensions() if adjoint else \
                self._block_range_dimensions()
            if arg_is_blockwise(dims, rhs, -1):
                xs = self.solve([array_ops.expand_dims(_ops.convert_to_tensor(b), -1)
                                 for b in rhs], adjoint=adjoint)
                return [array_ops.squeeze(x, axis=-1) for x in xs]
            rhs = _ops.convert_to_tensor(rhs, name="rhs")
            self._check_input_dtype(rhs)
            check_compatible(self.domain_dimension if adjoint else self.range_dimension,
                             rhs.shape[-1])
            return array_ops.squeeze(self.solve(array_ops.expand_dims(rhs, -1),
                                                adjoint=adjoint), axis=-1)

    def _stack_diagonal(self, method):
        parts = broadcast_matrix_batch_dims([method(op)[..., None]
                                             for op in self._diagonal_operators])
        return array_ops.squeeze(array_ops.concat(parts, axis=-2), axis=-1)

    def _dense_rows(self, rows_of_blocks):
        """Dense rows ``[blocks..., zeros]`` padded to the full width, stacked."""
        rows, num_cols = [], 0
        width = self.domain_dimension_tensor()
        for leading, blocks in rows_of_blocks:
            batch_row = array_ops.shape(blocks[0])[:-1]
            num_cols = _m.add(num_cols, array_ops.shape(blocks[-1])[-1])
            pieces = []
            if leading is not None:
                pieces.append(array_ops.zeros(array_ops.concat(
                    [batch_row, array_ops.reshape(leading, [1])], 0), dtype=self.dtype))
            pieces += list(blocks)
            pieces.append(array_ops.zeros(array_ops.concat(
                [batch_row, array_ops.reshape(_m.subtract(width, num_cols), [1])], 0),
                dtype=self.dtype))
            rows.append(array_ops.concat(pieces, axis=-1))
        mat = array_ops.concat(rows, axis=-2)
        mat.set_shape(self.shape)
        return mat


# --- block diagonal ---------------------------------------------------------------------------
class LinearOperatorBlockDiag(_Blockwise):
    """The direct sum of operators: ``[[A1, 0, ...], [0, A2, ...], ...]``."""

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=True, name=None):
        params = dict(operators=operators, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        operators = list(operators)
        if not operators:
            raise ValueError(f"Expected a non-empty list of operators. Found: {operators}")
        self._operators = self._diagonal_operators = operators
        dtype = _same_dtype(operators, "Expected all operators to have the same dtype.  "
                                       "Found {}")
        given = {"is_non_singular": is_non_singular, "is_self_adjoint": is_self_adjoint,
                 "is_positive_definite": is_positive_definite}
        for hint, what in (("is_non_singular", "non-singular"),
                           ("is_self_adjoint", "self-adjoint"),
                           ("is_positive_definite", "positive definite")):
            if all(getattr(op, hint) for op in operators) and given[hint] is False:
                raise ValueError(f"The direct sum of {what} operators is always {what}.")
        is_non_singular, is_self_adjoint, is_positive_definite = _hints_shared_by_all(
            operators, is_non_singular, is_self_adjoint, is_positive_definite)
        name = "_ds_".join(op.name for op in operators) if name is None else name
        with _ops.name_scope(name):
            super().__init__(dtype=dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)

    @property
    def operators(self):
        return self._operators

    def _shape(self):
        domain = sum(self._block_domain_dimensions(), Dimension(0))
        rng = sum(self._block_range_dimensions(), Dimension(0))
        return _batch_shape_of(self.operators).concatenate(TensorShape([rng, domain]))

    def _shape_tensor(self):
        domain = _m.add_n(self._block_domain_dimension_tensors())
        rng = _m.add_n(self._block_range_dimension_tensors())
        return array_ops.concat([_batch_shape_tensor_of(self.operators),
                                 array_ops.stack([rng, domain])], 0)

    def _blockwise(self, method, **hints):
        return LinearOperatorBlockDiag([getattr(op, method)() for op in self.operators],
                                       is_square=True, **hints)

    def _linop_adjoint(self):
        return self._blockwise("adjoint", is_non_singular=self.is_non_singular,
                               is_self_adjoint=self.is_self_adjoint,
                               is_positive_definite=self.is_positive_definite)

    def _linop_cholesky(self):
        return self._blockwise("cholesky", is_non_singular=True, is_self_adjoint=None)

    def _linop_inverse(self):
        return self._blockwise("inverse", is_non_singular=self.is_non_singular,
                               is_self_adjoint=self.is_self_adjoint,
                               is_positive_definite=self.is_positive_definite)

    def _pairwise(self, left, right, method, what):
        if len(left.operators) != len(right.operators):
            raise ValueError(f"Can not efficiently {what} when number of blocks differ.")
        for o1, o2 in zip(left.operators, right.operators):
            _dims_agree_or_raise(o2, o1, "Blocks are incompatible. Expected `x` to have "
                                         "dimension {} but got {}.")
        return LinearOperatorBlockDiag(
            [getattr(o1, method)(o2) for o1, o2 in zip(left.operators, right.operators)],
            is_non_singular=combined_non_singular_hint(left, right), is_self_adjoint=None,
            is_positive_definite=None, is_square=True)

    def _linop_matmul(self, left, right):
        if isinstance(right, LinearOperatorBlockDiag):
            return self._pairwise(left, right, "matmul",
                                  "multiply two `LinearOperatorBlockDiag`s together")
        return super()._linop_matmul(left, right)

    def _linop_solve(self, left, right):
        if isinstance(right, LinearOperatorBlockDiag):
            return self._pairwise(left, right, "solve", "solve `LinearOperatorBlockDiag`")
        return super()._linop_solve(left, right)

    def _matmul_blocks(self, blocks, adjoint):
        return [op.matmul(b, adjoint=adjoint) for op, b in zip(self.operators, blocks)]

    def _solve_blocks(self, blocks, adjoint):
        return [op.solve(b, adjoint=adjoint) for op, b in zip(self.operators, blocks)]

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

    def _all_square(self, what):
        if not all(op.is_square for op in self.operators):
            raise NotImplementedError(f"`{what}` not implemented for an operator whose blocks "
                                      "are not square.")

    def _diag_part(self):
        self._all_square("diag_part")
        return self._stack_diagonal(lambda op: op.diag_part())

    def _trace(self):
        self._all_square("trace")
        result = self.operators[0].trace()
        for op in self.operators[1:]:
            result = _m.add(result, op.trace())
        return result

    def _eigvals(self):
        self._all_square("eigvals")
        return self._stack_diagonal(lambda op: op.eigvals())

    def _to_dense(self):
        blocks = broadcast_matrix_batch_dims([op.to_dense() for op in self.operators])
        rows, before = [], _ops.convert_to_tensor(0)
        for block in blocks:
            rows.append((before, [block]))
            before = _m.add(before, array_ops.shape(block)[-1])
        return self._dense_rows(rows)

    def _group(self, method):
        from dflab.ops.control_flow_ops import group

        return group(*[getattr(op, method)() for op in self.operators])

    def _assert_non_singular(self):
        return self._group("assert_non_singular")

    def _assert_self_adjoint(self):
        return self._group("assert_self_adjoint")

    def _assert_positive_definite(self):
        return self._group("assert_positive_definite")


# --- block lower triangular ---------------------------------------------------------------------
class LinearOperatorBlockLowerTriangular(_Blockwise):
    """A square block lower-triangular operator from the rows of its blocks:
    ``operators[i]`` holds the ``i + 1`` blocks of row ``i`` (the last one diagonal)."""

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None,
                 name="LinearOperatorBlockLowerTriangular"):
        params = dict(operators=operators, is_non_singular=is_non_singular,
                      is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        operators = [list(row) for row in operators]
        if not operators:
            raise ValueError(f"Argument `operators` must be a list of >=1 operators. "
                             f"Received: {operators}.")
        self._operators = operators
        self._diagonal_operators = [row[-1] for row in operators]
        dtype = operators[0][0].dtype
        for i, row in enumerate(operators):
            for op in row:
                if op.dtype != dtype:
                    raise TypeError(f"Expected all operators to have the same dtype.  Found "
                                    f"{[(o.name, o.dtype) for o in row]} in row {i} and "
                                    f"{dtype} in row 0.")
        is_non_singular = self._validate_non_singular(is_non_singular)
        for i, row in enumerate(operators):
            if len(row) != i + 1:
                raise ValueError(f"Argument `operators[{i}]` must contain `{i + 1}` blocks. "
                                 f"Received: {len(row)} blocks.")
        self._validate_operator_dimensions()
        if is_square is False:
            raise ValueError(f"`LinearOperatorBlockLowerTriangular` must be square. Expected "
                             f"argument `is_square` to be True. Received: {is_square}.")
        for i, op in enumerate(self._diagonal_operators):
            if op.is_square is False:
                raise ValueError(f"Matrices on the diagonal (the final elements of each "
                                 f"row-partition in the `operators` list) must be square. "
                                 f"Expected argument `operators[{i}][-1].is_square` to be "
                                 f"True. Received: {op.is_square}.")
        with _ops.name_scope(name):
            super().__init__(dtype=dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=True,
                             parameters=params, name=name)

    def _validate_operator_dimensions(self):
        ops_ = self._operators
        for i in range(1, len(ops_)):
            for j in range(i):
                op, above, right = ops_[i][j], ops_[i - 1][j], ops_[i][j + 1]
                if op.domain_dimension.value is not None and \
                        above.domain_dimension.value is not None and \
                        op.domain_dimension.value != above.domain_dimension.value:
                    raise ValueError(f"Argument `operators[{i}][{j}].domain_dimension` "
                                     f"({op.domain_dimension}) must be the same as "
                                     f"`operators[{i - 1}][{j}].domain_dimension` "
                                     f"({above.domain_dimension}).")
                if op.range_dimension.value is not None and \
                        right.range_dimension.value is not None and \
                        op.range_dimension.value != right.range_dimension.value:
                    raise ValueError(f"Argument `operators[{i}][{j}].range_dimension` "
                                     f"({op.range_dimension}) must be the same as "
                                     f"`operators[{i}][{j + 1}].range_dimension` "
                                     f"({right.range_dimension}).")

    def _validate_non_singular(self, is_non_singular):
        if all(op.is_non_singular for op in self._diagonal_operators):
            if is_non_singular is False:
                raise ValueError(f"A blockwise lower-triangular operator with non-singular "
                                 f"operators on the main diagonal is always non-singular. "
                                 f"Expected argument `is_non_singular` to be True. Received: "
                                 f"{is_non_singular}.")
            return True
        if any(op.is_non_singular is False for op in self._diagonal_operators):
            if is_non_singular is True:
                raise ValueError(f"A blockwise lower-triangular operator with a singular "
                                 f"operator on the main diagonal is always singular. Expected "
                                 f"argument `is_non_singular` to be True. Received: "
                                 f"{is_non_singular}.")
            return False
        return is_non_singular

    @property
    def operators(self):
        return self._operators

    def _all_operators(self):
        return [op for row in self._operators for op in row]

    def _shape(self):
        domain = sum(self._block_domain_dimensions(), Dimension(0))
        rng = sum(self._block_range_dimensions(), Dimension(0))
        return _batch_shape_of(self._all_operators()).concatenate(TensorShape([domain, rng]))

    def _shape_tensor(self):
        domain = _m.add_n(self._block_domain_dimension_tensors())
        rng = _m.add_n(self._block_range_dimension_tensors())
        return array_ops.concat([_batch_shape_tensor_of(self._all_operators()),
                                 array_ops.stack([domain, rng])], 0)

    def _matmul_blocks(self, blocks, adjoint):
        ops_ = self._operators
        n = len(ops_)
        results = []
        if adjoint:
            for i in range(n):
                y = ops_[i][i].matmul(blocks[i], adjoint=True)
                for j in range(i + 1, n):
                    y = _m.add(y, ops_[j][i].matmul(blocks[j], adjoint=True))
                results.append(y)
        else:
            for row in ops_:
                y = row[0].matmul(blocks[0])
                for j, op in enumerate(row[1:]):
                    y = _m.add(y, op.matmul(blocks[j + 1]))
                results.append(y)
        return results

    def _solve_blocks(self, blocks, adjoint):
        ops_ = self._operators
        n = len(ops_)
        if adjoint:  # back substitution through the upper-triangular adjoint
            solutions = [None] * n
            for i in reversed(range(n)):
                y = blocks[i]
                for j in range(i + 1, n):
                    y = _m.subtract(y, ops_[j][i].matmul(solutions[j], adjoint=True))
                solutions[i] = self._diagonal_operators[i].solve(y, adjoint=True)
            return solutions
        solutions = []
        for row, y in zip(ops_, blocks):
            for i, op in enumerate(row[:-1]):
                y = _m.subtract(y, op.matmul(solutions[i]))
            solutions.append(row[-1].solve(y))
        return solutions

    def _determinant(self):
        if all(op.is_positive_definite for op in self._diagonal_operators):
            return _m.exp(self._log_abs_determinant())
        result = self._diagonal_operators[0].determinant()
        for op in self._diagonal_operators[1:]:
            result = _m.multiply(result, op.determinant())
        return result

    def _log_abs_determinant(self):
        result = self._diagonal_operators[0].log_abs_determinant()
        for op in self._diagonal_operators[1:]:
            result = _m.add(result, op.log_abs_determinant())
        return result

    def _diag_part(self):
        return self._stack_diagonal(lambda op: op.diag_part())

    def _eigvals(self):
        return self._stack_diagonal(lambda op: op.eigvals())

    def _trace(self):
        result = self._diagonal_operators[0].trace()
        for op in self._diagonal_operators[1:]:
            result = _m.add(result, op.trace())
        return result

    def _to_dense(self):
        flat = broadcast_matrix_batch_dims([op.to_dense() for op in self._all_operators()])
        rows = [(None, flat[i * (i + 1) // 2:(i + 1) * (i + 2) // 2])
                for i in range(len(self._operators))]
        return self._dense_rows(rows)

    def _assert_non_singular(self):
        from dflab.ops.control_flow_ops import group

        return group(*[op.assert_non_singular() for op in self._diagonal_operators])


# --- low-rank update --------------------------------------------------------------------------
class LinearOperatorLowRankUpdate(LinearOperator):
    """``A = L + U D V^H``: a base operator ``L`` plus a rank-``k`` update (``D`` diagonal,
    the identity by default; ``V = U`` by default)."""

    def __init__(self, base_operator, u, diag_update=None, v=None,
                 is_diag_update_positive=None, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None,
                 name="LinearOperatorLowRankUpdate"):
        params = dict(base_operator=base_operator, u=u, diag_update=diag_update, v=v,
                      is_diag_update_positive=is_diag_update_positive,
                      is_non_singular=is_non_singular, is_self_adjoint=is_self_adjoint,
                      is_positive_definite=is_positive_definite, is_square=is_square, name=name)
        dtype = base_operator.dtype
        if diag_update is None:
            if is_diag_update_positive is False:
                raise ValueError("Default diagonal is the identity, which is positive.  "
                                 "However, user set 'is_diag_update_positive' to False.")
            is_diag_update_positive = True
        self._use_cholesky = bool(base_operator.is_positive_definite and
                                  base_operator.is_self_adjoint and is_diag_update_positive and
                                  v is None)
        if base_operator.is_self_adjoint and v is None and not dtype.is_complex:
            if is_self_adjoint is False:
                raise ValueError("A = L + UDU^H, with L self-adjoint and D real diagonal.  "
                                 "Since UDU^H is self-adjoint, this must be a self-adjoint "
                                 "operator.")
            is_self_adjoint = True
        if self._use_cholesky:
            if is_positive_definite is False or is_self_adjoint is False or \
                    is_non_singular is False:
                raise ValueError("Arguments imply this is self-adjoint positive-definite "
                                 "operator.")
            is_positive_definite = True
            is_self_adjoint = True
        with _ops.name_scope(name):
            self._u = _ops.convert_to_tensor(u, name="u")
            self._v = self._u if v is None else _ops.convert_to_tensor(v, name="v")
            self._diag_update = None if diag_update is None else \
                _ops.convert_to_tensor(diag_update, name="diag_update")
            self._base_operator = base_operator
            super().__init__(dtype=dtype, is_non_singular=is_non_singular,
                             is_self_adjoint=is_self_adjoint,
                             is_positive_definite=is_positive_definite, is_square=is_square,
                             parameters=params, name=name)
            if self._diag_update is not None:
                self._diag_operator = LinearOperatorDiag(
                    self._diag_update, is_positive_definite=is_diag_update_positive)
            else:
                r = self._u.shape[-1].value
                self._diag_operator = LinearOperatorIdentity(
                    num_rows=array_ops.shape(self._u)[-1] if r is None else r, dtype=dtype)
            self._is_diag_update_positive = is_diag_update_positive
            self._check_shapes()

    def _check_shapes(self):
        uv = static_broadcast_shape(self._u.shape, self._v.shape)
        batch = static_broadcast_shape(self._base_operator.batch_shape, uv[:-2])
        check_compatible(self._base_operator.domain_dimension, uv[-2])
        if self._diag_update is not None:
            check_compatible(uv[-1], self._diag_update.shape[-1])
            static_broadcast_shape(batch, self._diag_update.shape[:-1])

    @property
    def u(self):
        return self._u

    @property
    def v(self):
        return self._v

    @property
    def is_diag_update_positive(self):
        return self._is_diag_update_positive

    @property
    def diag_update(self):
        return self._diag_update

    @property
    def diag_operator(self):
        return self._diag_operator

    @property
    def base_operator(self):
        return self._base_operator

    def _assert_self_adjoint(self):
        if self._u is self._v and self._diag_update is None:
            return self._base_operator.assert_self_adjoint()
        return super()._assert_self_adjoint()

    def _shape(self):
        batch = static_broadcast_shape(self._base_operator.batch_shape,
                                       self._diag_operator.batch_shape)
        batch = static_broadcast_shape(batch, self._u.shape[:-2])
        batch = static_broadcast_shape(batch, self._v.shape[:-2])
        return batch.concatenate(self._base_operator.shape[-2:])

    def _shape_tensor(self):
        zeros = _m.add(array_ops.zeros(self._base_operator.batch_shape_tensor()),
                       array_ops.zeros(self._diag_operator.batch_shape_tensor()))
        zeros = _m.add(zeros, array_ops.zeros(array_ops.shape(self._u)[:-2]))
        zeros = _m.add(zeros, array_ops.zeros(array_ops.shape(self._v)[:-2]))
        return array_ops.concat([array_ops.shape(zeros),
                                 self._base_operator.shape_tensor()[-2:]], 0)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        u, v = self._u, self._v
        lead = self._base_operator.matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)
        left, right = (v, u) if adjoint else (u, v)
        rh_x = _m.matmul(right, x, adjoint_a=True, adjoint_b=adjoint_arg)
        d_rh_x = self._diag_operator.matmul(rh_x, adjoint=adjoint)
        return _m.add(lead, _m.matmul(left, d_rh_x))

    def _make_capacitance(self, u, v):
        linv_u = self._base_operator.solve(u)
        vh_linv_u = _m.matmul(v, linv_u, adjoint_a=True)
        return self._diag_operator.inverse().add_to_tensor(vh_linv_u)

    def _determinant(self):
        if self.is_positive_definite:
            return _m.exp(self.log_abs_determinant())
        det_c = matrix_determinant(self._make_capacitance(self._u, self._v))
        return _m.multiply(_m.multiply(det_c, self._diag_operator.determinant()),
                           self._base_operator.determinant())

    def _diag_part(self):
        product = _m.multiply(self._u, _sm.conj(self._v))
        if self._diag_update is not None:
            product = _m.multiply(product, array_ops.expand_dims(self._diag_update, -2))
        return _m.add(_m.reduce_sum(product, axis=-1), self._base_operator.diag_part())

    def _log_abs_determinant(self):
        cap = self._make_capacitance(self._u, self._v)
        if self._use_cholesky:
            log_c = _m.multiply(2.0, _m.reduce_sum(_m.log(matrix_diag_part(cholesky(cap))),
                                                   axis=[-1]))
        else:
            log_c = _m.log(_m.abs(matrix_determinant(cap)))
            if self.dtype.is_complex:
                log_c = _m.cast(log_c, self.dtype)
        return _m.add(_m.add(log_c, self._diag_operator.log_abs_determinant()),
                      self._base_operator.log_abs_determinant())

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        if self._base_operator.is_non_singular is False:
            raise ValueError("Solve not implemented unless this is a perturbation of a "
                             "non-singular LinearOperator.")
        base = self._base_operator
        # A^H = L^H + V D^H U^H: the roles of u and v swap, and the capacitance is solved
        # adjoint.
        u, v = (self._v, self._u) if adjoint else (self._u, self._v)
        capacitance = self._make_capacitance(self._u, self._v)
        linv_rhs = base.solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)
        vh_linv_rhs = _m.matmul(v, linv_rhs, adjoint_a=True)
        if self._use_cholesky:
            chol, vh_linv_rhs = broadcast_matrix_batch_dims([cholesky(capacitance),
                                                             vh_linv_rhs])
            cap_inv = cholesky_solve(chol, vh_linv_rhs)
        else:
            cap_inv = matrix_solve_with_broadcast(capacitance, vh_linv_rhs, adjoint=adjoint)
        correction = base.solve(_m.matmul(u, cap_inv), adjoint=adjoint)
        return _m.subtract(linv_rhs, correction)


__all__: list = []
