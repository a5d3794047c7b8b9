"""What the TF fixtures (``tests/fixtures/tf_api/cases_linear_operator.py``) cannot show:
which operator classes the operator algebra returns, a user's own ``LinearOperator``
subclass getting the dense fallbacks, blockwise arguments, dynamic shapes, and the
tridiagonal solver's warnings and refusals. Numbers against NumPy."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import dflab as tf
from dflab.lib.hash import siphash24

la = tf.linalg
RNG = np.random.default_rng(7)


def _run(*ts, feed=None):
    with tf.Session() as sess:
        return sess.run(list(ts), feed)


def test_operator_algebra_keeps_structure():
    d1, d2 = la.LinearOperatorDiag([1.0, 2.0]), la.LinearOperatorDiag([3.0, 4.0])
    ident = la.LinearOperatorIdentity(2)
    full = la.LinearOperatorFullMatrix([[2.0, 1.0], [0.0, 1.0]])
    assert isinstance(d1 @ d2, la.LinearOperatorDiag)
    assert isinstance(d1.solve(d2), la.LinearOperatorDiag)
    assert isinstance(d1.inverse(), la.LinearOperatorDiag)
    pd = la.LinearOperatorDiag([1.0, 2.0], is_positive_definite=True)
    assert isinstance(pd.cholesky(), la.LinearOperatorDiag)
    with pytest.raises(ValueError, match="Cholesky"):
        d1.cholesky()
    assert ident @ full is full and full @ ident is full
    assert ident.inverse() is ident and ident.adjoint() is ident
    assert isinstance(full @ d1, la.LinearOperatorComposition)
    assert full.H.H is full
    assert full.inverse().inverse() is full
    assert isinstance(full.solve(d1), la.LinearOperatorComposition)
    house = la.LinearOperatorHouseholder([1.0, 1.0])
    assert house.inverse() is house and house.adjoint() is house
    kron = la.LinearOperatorKronecker([full, d1])
    assert isinstance(kron.inverse(), la.LinearOperatorKronecker)
    blocks = la.LinearOperatorBlockDiag([full, d1])
    assert isinstance(blocks @ blocks, la.LinearOperatorBlockDiag)
    scaled = la.LinearOperatorScaledIdentity(2, 3.0)
    assert isinstance(scaled @ d1, la.LinearOperatorDiag)
    (dense,) = _run((d1 @ d2).to_dense())
    np.testing.assert_allclose(dense, np.diag([3.0, 8.0]))


class _Shift(la.LinearOperator):
    """A user's operator: the cyclic shift, defined only by its shape and matmul."""

    def __init__(self, n):
        super().__init__(dtype=tf.float64, is_non_singular=True, is_square=True, name="Shift")
        self._n = n

    def _shape(self):
        return tf.TensorShape([self._n, self._n])

    def _shape_tensor(self):
        return tf.constant([self._n, self._n])

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = tf.linalg.adjoint(x) if adjoint_arg else x
        k = 1 if adjoint else -1
        return tf.concat([x[k:], x[:k]], 0)


def test_user_subclass_gets_the_dense_fallbacks():
    op = _Shift(4)
    p = np.roll(np.eye(4), 1, axis=0)
    x = RNG.standard_normal((4, 2))
    dense, det, solved, diag, trace = _run(op.to_dense(), op.determinant(), op.solve(x),
                                           op.diag_part(), op.trace())
    np.testing.assert_allclose(dense, p)
    np.testing.assert_allclose(det, np.linalg.det(p))
    np.testing.assert_allclose(solved, np.linalg.solve(p, x))
    np.testing.assert_allclose(diag, np.zeros(4))
    assert trace == 0.0
    assert op.shape.as_list() == [4, 4] and op.batch_shape.as_list() == []
    assert "Shift" in repr(op)


def test_block_operators_take_and_give_lists_of_blocks():
    a = RNG.standard_normal((2, 2)) + 3 * np.eye(2)
    d = np.array([2.0, 5.0, 4.0])
    op = la.LinearOperatorBlockDiag([la.LinearOperatorFullMatrix(a), la.LinearOperatorDiag(d)])
    x1, x2 = RNG.standard_normal((2, 1)), RNG.standard_normal((3, 1))
    ys = op.matmul([x1, x2])
    assert isinstance(ys, list) and len(ys) == 2
    y1, y2, s1, s2 = _run(*ys, *op.solve([x1, x2]))
    np.testing.assert_allclose(y1, a @ x1)
    np.testing.assert_allclose(y2, d[:, None] * x2)
    np.testing.assert_allclose(s1, np.linalg.solve(a, x1))
    np.testing.assert_allclose(s2, x2 / d[:, None])


def test_dynamic_batch_shapes():
    m = tf.placeholder(tf.float64, [None, 3, 3])
    op = la.LinearOperatorFullMatrix(m)
    assert op.batch_shape.as_list() == [None]
    value = RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    shape, det, rank = _run(op.shape_tensor(), op.determinant(), op.tensor_rank_tensor(),
                            feed={m: value})
    assert list(shape) == [2, 3, 3] and rank == 3
    np.testing.assert_allclose(det, np.linalg.det(value))
    ident = la.LinearOperatorIdentity(3, batch_shape=[2], dtype=tf.float64)
    (composed,) = _run((op @ ident).to_dense(), feed={m: value})
    np.testing.assert_allclose(composed, value)


def test_eigh_tridiagonal_interval_with_fed_values():
    alpha = tf.placeholder(tf.float64, [5])
    beta = tf.placeholder(tf.float64, [4])
    a, b = RNG.standard_normal(5), RNG.standard_normal(4)
    full = np.diag(a) + np.diag(b, 1) + np.diag(b, -1)
    want = np.linalg.eigvalsh(full)
    (inside,) = _run(la.eigh_tridiagonal(alpha, beta, select="v",
                                         select_range=[want[1] - 1e-3, want[3] + 1e-3]),
                     feed={alpha: a, beta: b})
    np.testing.assert_allclose(inside, want[1:4])


def test_tridiagonal_solve_refusals_and_singular_warning(caplog):
    d = tf.constant(np.zeros((3, 3)))
    rhs = tf.constant(np.ones((3, 1)))
    with pytest.raises(ValueError, match="partial_pivoting must be True"):
        la.tridiagonal_solve(d, rhs, partial_pivoting=False, perturb_singular=True)
    with pytest.raises(NotImplementedError, match="perturb_singular"):
        la.tridiagonal_solve(d, rhs, perturb_singular=True)
    with caplog.at_level(logging.WARNING, logger="dflab"):
        (x,) = _run(la.tridiagonal_solve(d, rhs))
    assert np.isnan(x).all()
    assert "not invertible" in caplog.text


def test_tridiagonal_solve_matches_dense_solve_in_a_batch():
    diags = RNG.standard_normal((4, 3, 6))
    rhs = RNG.standard_normal((4, 6, 2))
    dense = np.zeros((4, 6, 6))
    i = np.arange(6)
    dense[:, i, i] = diags[:, 1]
    dense[:, i[:-1], i[1:]] = diags[:, 0, :-1]
    dense[:, i[1:], i[:-1]] = diags[:, 2, 1:]
    got, prod = _run(la.tridiagonal_solve(diags, rhs), la.tridiagonal_matmul(diags, rhs))
    np.testing.assert_allclose(got, np.linalg.solve(dense, rhs), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(prod, dense @ rhs)


def test_siphash_reference_vector():
    # The SipHash-2-4 paper's vector: key 00..0f, messages 00, 00 01, ... (64-bit outputs).
    key = (int.from_bytes(bytes(range(8)), "little"), int.from_bytes(bytes(range(8, 16)),
                                                                      "little"))
    assert siphash24(key, b"") == 0x726FDB47DD0E0E31
    assert siphash24(key, bytes(range(15))) == 0xA129CA6149BE45E5
