"""approx_max_k / approx_min_k where TF's CPU kernel has none (the minimum, a dimension other
than the last): exact results against NumPy, ties to the lower index, and the gradient."""

import numpy as np
import pytest
from op_test_util import check_grads

import dflab as tf


def run(t):
    with tf.Session() as s:
        return s.run(t)


def _reference(x, k, axis, largest):
    moved = np.moveaxis(x, axis, -1)
    key = -moved if largest else moved
    idx = np.argsort(key, axis=-1, kind="stable")[..., :k]
    vals = np.take_along_axis(moved, idx, -1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis).astype(np.int32)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("largest", [True, False])
def test_against_numpy(axis, largest):
    x = np.round(np.random.default_rng(3).standard_normal((4, 6, 5)), 1).astype(np.float32)
    fn = tf.nn.approx_max_k if largest else tf.nn.approx_min_k
    vals, idx = run(list(fn(x, 3, reduction_dimension=axis)))
    want_vals, want_idx = _reference(x, 3, axis, largest)
    np.testing.assert_array_equal(vals, want_vals)
    np.testing.assert_array_equal(idx, want_idx)  # rounded values tie: lower index first
    assert idx.dtype == np.int32


def test_gradient_routes_to_the_selected_entries():
    x = np.random.default_rng(4).standard_normal((3, 7)).astype(np.float32)
    p = tf.placeholder(tf.float32, x.shape)
    vals, idx = tf.nn.approx_min_k(p, 2, reduction_dimension=1)
    g = tf.gradients(tf.reduce_sum(vals * [[1.0, 2.0]]), p)[0]
    with tf.Session() as s:
        got, where = s.run([g, idx], {p: x})
    want = np.zeros_like(x)
    for r in range(3):
        want[r, where[r, 0]] += 1.0
        want[r, where[r, 1]] += 2.0
    np.testing.assert_array_equal(got, want)


def test_float64_is_refused_and_k_is_checked():
    with pytest.raises(TypeError):
        tf.nn.approx_max_k(np.zeros((2, 3)), 1)
    with pytest.raises(ValueError):
        tf.nn.approx_min_k(np.zeros((2, 3), np.float32), 4)


def test_gradient_along_the_first_axis_by_finite_differences():
    # float16/32 only: differences in float32 with a coarse step.
    x = np.random.default_rng(5).permutation(20).reshape(5, 4).astype(np.float32)
    check_grads(lambda a: tf.nn.approx_max_k(a, 2, reduction_dimension=0)[0], [x],
                delta=1e-2, rtol=1e-2, atol=1e-3)
