"""``tf.linalg.LinearOperator``: a matrix-like object that knows its structure, so that
``matmul``, ``solve``, determinants and the rest can use it instead of a dense matrix.

As in TF, operators are plain Python objects over ordinary graph ops (nothing new reaches
the graph). The base class holds the shape bookkeeping, the hints (``is_non_singular``,
``is_self_adjoint``, ``is_positive_definite``, ``is_square``) and the generic dense
fallbacks; each subclass (``linear_operator_basic``, ``linear_operator_structured``)
overrides the methods its structure makes cheaper. Operator algebra (``A.matmul(B)``,
``A.solve(B)``, ``inverse``, ``adjoint``, ``cholesky``) returns operators, through the
``_linop_*`` methods that a subclass specialises (a diagonal times a diagonal is
diagonal, the identity is a no-op).

Invariant: every method returns what TF's does for the same operator (numbers, shapes,
hints, Python errors); only TF's composite-tensor and slicing machinery is absent.
"""

from __future__ import annotations

import contextlib

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value
from dflab.framework.tensor_shape import Dimension, TensorShape, broadcast_shapes
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops import matrix_ops as _mx
from dflab.ops.linalg_solve_ops import (
    cholesky,
    cholesky_solve,
    matrix_determinant,
    matrix_solve,
    self_adjoint_eigvals,
    slogdet,
    svd,
)

_FLOAT_AND_COMPLEX = (_dt.float16, _dt.float32, _dt.float64, _dt.complex64, _dt.complex128)


# --- helpers shared by the operators -----------------------------------------------------------
def real_dtype(dtype):
    """The real counterpart of a (complex) dtype."""
    return {_dt.complex64: _dt.float32, _dt.complex128: _dt.float64}.get(dtype, dtype)


def to_tensor(value, dtype=None, name=None):
    """A tensor of ``value`` (None stays None); variables are read."""
    if value is None:
        return None
    return _ops.convert_to_tensor(value, dtype=dtype, name=name)


def shape_tensor(shape, name=None):
    """``shape`` as an int32 tensor (an empty list too)."""
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    if isinstance(shape, (list, tuple)) and not shape:
        return _ops.convert_to_tensor(np.zeros([0], np.int32), name=name)
    if isinstance(shape, (list, tuple)) and all(isinstance(s, (int, np.integer))
                                                for s in shape):
        return _ops.convert_to_tensor(np.asarray(shape, np.int32), name=name)
    return _ops.convert_to_tensor(shape, name=name)


def dynamic_broadcast_shape(a, b):
    """The broadcast of two int shape tensors (TF's ``broadcast_dynamic_shape``), through the
    shape of a sum of zeros."""
    za = array_ops.zeros(a, dtype=_dt.int8)
    zb = array_ops.zeros(b, dtype=_dt.int8)
    return array_ops.shape(_m.add(za, zb))


def static_broadcast_shape(a: TensorShape, b: TensorShape) -> TensorShape:
    return broadcast_shapes(TensorShape(a), TensorShape(b))


def adjoint_matrix(x):
    return array_ops.matrix_transpose(x, conjugate=True)


def broadcast_matrix_batch_dims(batch_matrices):
    """The matrices with their batch dimensions broadcast against each other."""
    mats = [_ops.convert_to_tensor(m) for m in batch_matrices]
    for m in mats:
        if m.shape.ndims is not None and m.shape.ndims < 2:
            raise ValueError(f"Expected [batch] matrix to have at least two dimensions. "
                             f"Found: {m}.")
    if len(mats) < 2:
        return mats
    batch = mats[0].shape[:-2]
    for m in mats[1:]:
        batch = static_broadcast_shape(batch, m.shape[:-2])
    if batch.is_fully_defined():
        out = []
        for m in mats:
            if m.shape[:-2].as_list() != batch.as_list():
                m = array_ops.broadcast_to(m, array_ops.concat(
                    [shape_tensor(batch.as_list()), array_ops.shape(m)[-2:]], 0))
            out.append(m)
        return out
    dyn = array_ops.shape(mats[0])[:-2]
    for m in mats[1:]:
        dyn = dynamic_broadcast_shape(dyn, array_ops.shape(m)[:-2])
    return [array_ops.broadcast_to(m, array_ops.concat([dyn, array_ops.shape(m)[-2:]], 0))
            for m in mats]


def matrix_solve_with_broadcast(matrix, rhs, adjoint=False):
    """``matrix_solve`` with the batch dimensions of both sides broadcast."""
    matrix = _ops.convert_to_tensor(matrix, name="matrix")
    rhs = _ops.convert_to_tensor(rhs, dtype=matrix.dtype.base_dtype, name="rhs")
    matrix, rhs = broadcast_matrix_batch_dims([matrix, rhs])
    return matrix_solve(matrix, rhs, adjoint=adjoint)


def split_arg_into_blocks(block_dims, block_dims_fn, arg, axis=-1):
    sizes = [Dimension(d).value for d in block_dims]
    if any(d is None for d in sizes):
        sizes = block_dims_fn()
    return array_ops.split(arg, sizes, axis=axis)


def use_operator_or_provided_hint_unless_contradicting(operator, hint_attr_name,
                                                       provided_hint_value, message):
    op_hint = getattr(operator, hint_attr_name)
    if op_hint is False and provided_hint_value:
        raise ValueError(message)
    if op_hint and provided_hint_value is False:
        raise ValueError(message)
    if op_hint or provided_hint_value:
        return True
    if op_hint is False or provided_hint_value is False:
        return False
    return None


def is_adjoint_pair(x, y):
    if x is y:
        if x.is_self_adjoint is False:
            return False
        if x.is_self_adjoint:
            return True
    return x.H is y or y.H is x


def is_aat_form(operators):
    operators = list(operators)
    if not operators:
        raise ValueError("AAT form is undefined for empty operators")
    if len(operators) % 2:
        return False
    return all(is_adjoint_pair(operators[i], operators[-1 - i])
               for i in range(len(operators) // 2))


# --- hints of products (TF's property_hint_util) ------------------------------------------------
def combined_commuting_self_adjoint_hint(a, b):
    if a.is_self_adjoint and b.is_self_adjoint:
        return True
    if (a.is_self_adjoint is True and b.is_self_adjoint is False) or (
            a.is_self_adjoint is False and b.is_self_adjoint is True):
        return False
    return None


def is_square_hint(a, b):
    if a.is_square and b.is_square:
        return True
    if a.is_square is False and b.is_square is False:
        m, n = a.range_dimension, b.domain_dimension
        if m.value is not None and n.value is not None:
            return m.value == n.value
    if a.is_square != b.is_square and a.is_square is not None and b.is_square is not None:
        return False
    return None


def combined_commuting_positive_definite_hint(a, b):
    if a.is_positive_definite is True and a.is_self_adjoint is True and \
            b.is_positive_definite is True and b.is_self_adjoint is True:
        return True
    return None


def combined_non_singular_hint(a, b):
    if a.is_non_singular is False or b.is_non_singular is False:
        return False
    return a.is_non_singular and b.is_non_singular


def _product_hints(left, right):
    is_square = is_square_hint(left, right)
    hints = dict(is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=is_square)
    if is_square:
        hints["is_non_singular"] = combined_non_singular_hint(left, right)
    elif is_square is False:
        hints.update(is_non_singular=False, is_self_adjoint=False, is_positive_definite=False)
    return hints


def _dims_agree(right, left, what):
    r, d = right.range_dimension.value, left.domain_dimension.value
    if r is not None and d is not None and r != d:
        raise ValueError(f"Operators are incompatible. Expected `{what}` to have dimension "
                         f"{d} but got {r}.")


def check_compatible(dim, other):
    """TF's ``Dimension.assert_is_compatible_with``."""
    a, b = Dimension(dim), Dimension(other)
    if not a.is_compatible_with(b):
        raise ValueError(f"Dimensions {a} and {b} are not compatible")


# --- the operators the base class makes (registered by their modules) --------------------------
# The base class's algebra returns subclasses (a product is a composition, an inverse an
# inversion): they register here when their modules load, so this module imports none of
# them. ``dflab.ops.api`` loads them all.
_SUBCLASSES: dict = {}


def register_operator(cls):
    """Class decorator: ``LinearOperatorFoo`` becomes what ``_made("Foo")`` returns."""
    _SUBCLASSES[cls.__name__[len("LinearOperator"):]] = cls
    return cls


def _made(kind):
    try:
        return _SUBCLASSES[kind]
    except KeyError:
        raise RuntimeError(f"LinearOperator{kind} is not loaded: import dflab") from None


# --- the base class ------------------------------------------------------------------------------
class LinearOperator:
    """A [batch of] linear operator(s) ``A`` of shape ``[B1, ..., Bb, M, N]``: the base
    class of ``tf.linalg``'s structured operators. Subclasses implement ``_shape``,
    ``_shape_tensor`` and ``_matmul``, and whichever of the rest their structure makes
    cheaper."""

    def __init__(self, dtype, graph_parents=None, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None, parameters=None):
        if is_positive_definite:
            if is_non_singular is False:
                raise ValueError("A positive definite matrix is always non-singular.")
            is_non_singular = True
        if is_non_singular:
            if is_square is False:
                raise ValueError("A non-singular matrix is always square.")
            is_square = True
        if is_self_adjoint:
            if is_square is False:
                raise ValueError("A self-adjoint matrix is always square.")
            is_square = True
        self._is_square_set_or_implied_by_hints = is_square
        self._graph_parents = []
        if graph_parents is not None:
            for i, t in enumerate(graph_parents):
                if t is None or not _ops.is_tensor_like(t):
                    raise ValueError(f"Graph parent item {i} is not a Tensor; {t}.")
            self._graph_parents = list(graph_parents)
        self._dtype = _dt.as_dtype(dtype).base_dtype if dtype else dtype
        self._is_non_singular = is_non_singular
        self._is_self_adjoint = is_self_adjoint
        self._is_positive_definite = is_positive_definite
        self._parameters = dict(parameters or {})
        self._name = name or type(self).__name__

    @contextlib.contextmanager
    def _name_scope(self, name=None):
        full = self.name if name is None else f"{self.name}/{name}"
        with _ops.name_scope(full) as scope:
            yield scope

    # --- properties --------------------------------------------------------------------------
    @property
    def parameters(self):
        return dict(self._parameters)

    @property
    def dtype(self):
        return self._dtype

    @property
    def name(self):
        return self._name

    @property
    def graph_parents(self):
        return self._graph_parents

    @property
    def is_non_singular(self):
        return self._is_non_singular

    @property
    def is_self_adjoint(self):
        return self._is_self_adjoint

    @property
    def is_positive_definite(self):
        return self._is_positive_definite

    @property
    def is_square(self):
        """True/False from the hints, else whether the static shape is square."""
        auto = self.domain_dimension == self.range_dimension
        if self._is_square_set_or_implied_by_hints is False and auto:
            raise ValueError("User set is_square hint to False, but the operator was square.")
        if self._is_square_set_or_implied_by_hints is None:
            return auto
        return self._is_square_set_or_implied_by_hints

    # --- shapes ------------------------------------------------------------------------------
    def _shape(self):
        raise NotImplementedError("_shape is not implemented.")

    @property
    def shape(self) -> TensorShape:
        return self._shape()

    def _shape_tensor(self):
        raise NotImplementedError("_shape_tensor is not implemented.")

    def shape_tensor(self, name="shape_tensor"):
        with self._name_scope(name):
            if self.shape.is_fully_defined():
                return shape_tensor(self.shape.as_list())
            return self._shape_tensor()

    @property
    def batch_shape(self) -> TensorShape:
        return self.shape[:-2]

    def batch_shape_tensor(self, name="batch_shape_tensor"):
        with self._name_scope(name):
            return self._batch_shape_tensor()

    def _batch_shape_tensor(self, shape=None):
        if self.batch_shape.is_fully_defined():
            return shape_tensor(self.batch_shape.as_list(), name="batch_shape")
        shape = self.shape_tensor() if shape is None else shape
        return shape[:-2]

    @property
    def tensor_rank(self):
        return self.shape.ndims

    def tensor_rank_tensor(self, name="tensor_rank_tensor"):
        with self._name_scope(name):
            if self.tensor_rank is not None:
                return _ops.convert_to_tensor(self.tensor_rank)
            return array_ops.size(self.shape_tensor())

    @property
    def domain_dimension(self) -> Dimension:
        if self.shape.ndims is None:
            return Dimension(None)
        return self.shape.dims[-1]

    def domain_dimension_tensor(self, name="domain_dimension_tensor"):
        with self._name_scope(name):
            return self._domain_dimension_tensor()

    def _domain_dimension_tensor(self, shape=None):
        if self.domain_dimension.value is not None:
            return _ops.convert_to_tensor(self.domain_dimension.value)
        shape = self.shape_tensor() if shape is None else shape
        return shape[-1]

    @property
    def range_dimension(self) -> Dimension:
        if self.shape.dims:
            return self.shape.dims[-2]
        return Dimension(None)

    def range_dimension_tensor(self, name="range_dimension_tensor"):
        with self._name_scope(name):
            return self._range_dimension_tensor()

    def _range_dimension_tensor(self, shape=None):
        if self.range_dimension.value is not None:
            return _ops.convert_to_tensor(self.range_dimension.value)
        shape = self.shape_tensor() if shape is None else shape
        return shape[-2]

    # --- assertions --------------------------------------------------------------------------
    def _assert_non_singular(self):
        from dflab.ops import check_ops

        if self._can_use_cholesky():
            return self.assert_positive_definite()
        s = svd(self.to_dense(), compute_uv=False)
        cond = _m.divide(_m.reduce_max(s, axis=-1), _m.reduce_min(s, axis=-1))
        eps = float(np.finfo(self.dtype.as_numpy_dtype).eps)
        n = _m.cast(_m.maximum(self.range_dimension_tensor(), self.domain_dimension_tensor()),
                    real_dtype(self.dtype))
        limit = _m.reciprocal(_m.multiply(_m.maximum(n, 100.0), eps))
        return check_ops.assert_less(cond, limit,
                                     message="Singular matrix up to precision epsilon.")

    def assert_non_singular(self, name="assert_non_singular"):
        with self._name_scope(name):
            return self._assert_non_singular()

    def _assert_positive_definite(self):
        from dflab.ops import check_ops

        if self.is_self_adjoint:
            return check_ops.assert_positive(
                _mx.matrix_diag_part(cholesky(self.to_dense())),
                message="Matrix was not positive definite.")
        raise NotImplementedError("assert_positive_definite is not implemented.")

    def assert_positive_definite(self, name="assert_positive_definite"):
        with self._name_scope(name):
            return self._assert_positive_definite()

    def _assert_self_adjoint(self):
        from dflab.ops import check_ops

        dense = self.to_dense()
        return check_ops.assert_equal(dense, adjoint_matrix(dense),
                                      message="Matrix was not equal to its adjoint.")

    def assert_self_adjoint(self, name="assert_self_adjoint"):
        with self._name_scope(name):
            return self._assert_self_adjoint()

    def _check_input_dtype(self, arg):
        if arg.dtype.base_dtype != self.dtype:
            raise TypeError(f"Expected argument to have dtype {self.dtype}.  Found: "
                            f"{arg.dtype} in tensor {arg}")

    # --- products and solves -------------------------------------------------------------------
    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        raise NotImplementedError("_matmul is not implemented.")

    def matmul(self, x, adjoint=False, adjoint_arg=False, name="matmul"):
        """``A @ x`` (``A^H`` with ``adjoint``, ``x^H`` with ``adjoint_arg``); an operator
        ``x`` gives an operator."""
        if isinstance(x, LinearOperator):
            left = self.adjoint() if adjoint else self
            right = x.adjoint() if adjoint_arg else x
            _dims_agree(right, left, "x")
            with self._name_scope(name):
                return self._linop_matmul(left, right)
        with self._name_scope(name):
            x = _ops.convert_to_tensor(x, name="x")
            self._check_input_dtype(x)
            self_dim = -2 if adjoint else -1
            arg_dim = -1 if adjoint_arg else -2
            check_compatible(self.shape[self_dim], x.shape[arg_dim])
            return self._matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _linop_matmul(self, left, right):
        if getattr(right, "_is_identity", False):
            return left
        if getattr(right, "_is_zeros", False):
            if not right.is_square or not left.is_square:
                raise ValueError("Matmul with non-square `LinearOperator`s or non-square "
                                 "`LinearOperatorZeros` not supported at this time.")
            return right
        return _made("Composition")(operators=[left, right], **_product_hints(left, right))

    def __matmul__(self, other):
        return self.matmul(other)

    def _matvec(self, x, adjoint=False):
        y = self.matmul(array_ops.expand_dims(x, -1), adjoint=adjoint)
        return array_ops.squeeze(y, axis=-1)

    def matvec(self, x, adjoint=False, name="matvec"):
        """``A @ x`` for [batch] vectors ``x``."""
        with self._name_scope(name):
            x = _ops.convert_to_tensor(x, name="x")
            self._check_input_dtype(x)
            check_compatible(self.shape[-2 if adjoint else -1], x.shape[-1])
            return self._matvec(x, adjoint=adjoint)

    def _can_use_cholesky(self):
        return self.is_self_adjoint and self.is_positive_definite

    def _dense_solve(self, rhs, adjoint=False, adjoint_arg=False):
        if self.is_square is False:
            raise NotImplementedError("Solve is not yet implemented for non-square "
                                      "operators.")
        rhs = adjoint_matrix(rhs) if adjoint_arg else rhs
        if self._can_use_cholesky():
            chol, rhs = broadcast_matrix_batch_dims([cholesky(self.to_dense()), rhs])
            return cholesky_solve(chol, rhs)
        return matrix_solve_with_broadcast(self.to_dense(), rhs, adjoint=adjoint)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._dense_solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _check_solvable(self):
        if self.is_non_singular is False:
            raise NotImplementedError("Exact solve not implemented for an operator that is "
                                      "expected to be singular.")
        if self.is_square is False:
            raise NotImplementedError("Exact solve not implemented for an operator that is "
                                      "expected to not be square.")

    def solve(self, rhs, adjoint=False, adjoint_arg=False, name="solve"):
        """``X`` with ``A X = rhs`` (``A^H`` with ``adjoint``); an operator ``rhs`` gives an
        operator."""
        self._check_solvable()
        if isinstance(rhs, LinearOperator):
            left = self.adjoint() if adjoint else self
            right = rhs.adjoint() if adjoint_arg else rhs
            _dims_agree(right, left, "rhs")
            with self._name_scope(name):
                return self._linop_solve(left, right)
        with self._name_scope(name):
            rhs = _ops.convert_to_tensor(rhs, name="rhs")
            self._check_input_dtype(rhs)
            self_dim = -1 if adjoint else -2
            arg_dim = -1 if adjoint_arg else -2
            check_compatible(self.shape[self_dim], rhs.shape[arg_dim])
            return self._solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _linop_solve(self, left, right):
        if getattr(right, "_is_identity", False):
            return left.inverse()
        return _made("Composition")(operators=[_made("Inversion")(left), right],
                                    **_product_hints(left, right))

    def _solvevec(self, rhs, adjoint=False):
        x = self.solve(array_ops.expand_dims(rhs, -1), adjoint=adjoint)
        return array_ops.squeeze(x, axis=-1)

    def solvevec(self, rhs, adjoint=False, name="solve"):
        """``x`` with ``A x = rhs`` for [batch] vectors."""
        with self._name_scope(name):
            rhs = _ops.convert_to_tensor(rhs, name="rhs")
            self._check_input_dtype(rhs)
            check_compatible(self.shape[-1 if adjoint else -2], rhs.shape[-1])
            return self._solvevec(rhs, adjoint=adjoint)

    # --- determinants ------------------------------------------------------------------------
    def _determinant(self):
        if self._can_use_cholesky():
            return _m.exp(self.log_abs_determinant())
        return matrix_determinant(self.to_dense())

    def determinant(self, name="det"):
        if self.is_square is False:
            raise NotImplementedError("Determinant not implemented for an operator that is "
                                      "expected to not be square.")
        with self._name_scope(name):
            return self._determinant()

    def _log_abs_determinant(self):
        if self._can_use_cholesky():
            diag = _mx.matrix_diag_part(cholesky(self.to_dense()))
            return _m.multiply(2.0, _m.reduce_sum(_m.log(diag), axis=[-1]))
        _, log_abs_det = slogdet(self.to_dense())
        return log_abs_det

    def log_abs_determinant(self, name="log_abs_det"):
        if self.is_square is False:
            raise NotImplementedError("Determinant not implemented for an operator that is "
                                      "expected to not be square.")
        with self._name_scope(name):
            return self._log_abs_determinant()

    # --- derived operators ---------------------------------------------------------------------
    def adjoint(self, name="adjoint"):
        """The operator ``A^H`` (``self`` when self-adjoint)."""
        if self.is_self_adjoint is True:
            return self
        with self._name_scope(name):
            return self._linop_adjoint()

    H = property(adjoint, None)

    def _linop_adjoint(self):
        return _made("Adjoint")(self, is_non_singular=self.is_non_singular,
                                is_self_adjoint=self.is_self_adjoint,
                                is_positive_definite=self.is_positive_definite,
                                is_square=self.is_square)

    def inverse(self, name="inverse"):
        """The operator ``A^-1``."""
        if self.is_square is False:
            raise ValueError("Cannot take the Inverse: This operator represents a non square "
                             "matrix.")
        if self.is_non_singular is False:
            raise ValueError("Cannot take the Inverse: This operator represents a singular "
                             "matrix.")
        with self._name_scope(name):
            return self._linop_inverse()

    def _linop_inverse(self):
        return _made("Inversion")(self, is_non_singular=self.is_non_singular,
                                  is_self_adjoint=self.is_self_adjoint,
                                  is_positive_definite=self.is_positive_definite,
                                  is_square=self.is_square)

    def cholesky(self, name="cholesky"):
        """The lower-triangular operator ``L`` with ``A = L L^H``."""
        if not self._can_use_cholesky():
            raise ValueError("Cannot take the Cholesky decomposition: Not a positive definite "
                             "self adjoint matrix.")
        with self._name_scope(name):
            return self._linop_cholesky()

    def _linop_cholesky(self):
        return _made("LowerTriangular")(cholesky(self.to_dense()), is_non_singular=True,
                                        is_self_adjoint=False, is_square=True)

    # --- dense views -------------------------------------------------------------------------
    def _to_dense(self):
        batch = self.batch_shape.as_list() if self.batch_shape.is_fully_defined() else \
            self.batch_shape_tensor()
        n = self.domain_dimension.value
        if n is None:
            n = self.domain_dimension_tensor()
        return self.matmul(_mx.eye(n, batch_shape=batch, dtype=self.dtype))

    def to_dense(self, name="to_dense"):
        """The operator as a dense [batch] matrix."""
        with self._name_scope(name):
            return self._to_dense()

    def _diag_part(self):
        return _mx.matrix_diag_part(self.to_dense())

    def diag_part(self, name="diag_part"):
        with self._name_scope(name):
            return self._diag_part()

    def _trace(self):
        return _m.reduce_sum(self.diag_part(), axis=-1)

    def trace(self, name="trace"):
        with self._name_scope(name):
            return self._trace()

    def _add_to_tensor(self, x):
        return _m.add(self.to_dense(), x)

    def add_to_tensor(self, x, name="add_to_tensor"):
        """``A + x`` as a dense tensor."""
        with self._name_scope(name):
            x = _ops.convert_to_tensor(x, name="x")
            self._check_input_dtype(x)
            return self._add_to_tensor(x)

    def _eigvals(self):
        return self_adjoint_eigvals(self.to_dense())

    def eigvals(self, name="eigvals"):
        if not self.is_self_adjoint:
            raise NotImplementedError("Only self-adjoint matrices are supported.")
        with self._name_scope(name):
            return self._eigvals()

    def _cond(self):
        if not self.is_self_adjoint:
            vals = svd(self.to_dense(), compute_uv=False)
        else:
            vals = _m.abs(self._eigvals())
        return _m.divide(_m.reduce_max(vals, axis=-1), _m.reduce_min(vals, axis=-1))

    def cond(self, name="cond"):
        with self._name_scope(name):
            return self._cond()

    def __repr__(self):
        return (f"<{type(self).__name__} {self.name!r} shape={self.shape} "
                f"dtype={self.dtype.name if self.dtype else None}>")


def static_value(t):
    """The build-time value of tensor ``t`` (or None)."""
    return constant_value(t) if isinstance(t, _ops.Tensor) else None


__all__: list = []
