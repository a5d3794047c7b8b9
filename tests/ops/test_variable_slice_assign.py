"""Slice assignment of variables (``v[1:3].assign(x)``), as TF's: ``ResourceStridedSliceAssign``
for resource variables, eagerly and in graphs, and ``StridedSliceAssign`` on a reference
variable's reference (``tf.strided_slice(..., var=v)``); the value broadcast to the slice,
TF's error when it cannot be. Expected values read off TensorFlow 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture
def eager():
    with eager_mode():
        yield


def test_eager_slice_assignments(eager):
    v = tf.Variable([1.0, 2.0, 3.0])
    out = v[1].assign(10.0)
    np.testing.assert_array_equal(out.numpy(), [1.0, 10.0, 3.0])
    np.testing.assert_array_equal(v.numpy(), [1.0, 10.0, 3.0])
    steps = [
        (lambda: v[0:2].assign([7.0, 8.0]), [7.0, 8.0, 3.0]),
        (lambda: v[0:2].assign(5.0), [5.0, 5.0, 3.0]),  # broadcast
        (lambda: v[0:2].assign([6.0]), [6.0, 6.0, 3.0]),
        (lambda: v[2].assign(4), [6.0, 6.0, 4.0]),  # converted to the variable's dtype
        (lambda: v[::2].assign([0.0, 0.0]), [0.0, 6.0, 0.0]),
        (lambda: v[-1].assign(9.0), [0.0, 6.0, 9.0]),
        (lambda: v[3:].assign([]), [0.0, 6.0, 9.0]),
        (lambda: v[::-1].assign([1.0, 2.0, 3.0]), [3.0, 2.0, 1.0]),
    ]
    for assign, want in steps:
        np.testing.assert_array_equal(assign().numpy(), want)
    np.testing.assert_array_equal(v.numpy(), [3.0, 2.0, 1.0])


def test_eager_slice_assignments_in_two_dimensions(eager):
    m = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    m[1].assign([7.0, 8.0, 9.0])
    m[:, 1].assign([0.0, 0.0])
    m[..., 2].assign([5.0, 5.0])
    m[tf.newaxis, 0, 0].assign([1.0])
    m[tf.constant(0), 1].assign(-1.0)
    np.testing.assert_array_equal(m.numpy(), [[1.0, -1.0, 5.0], [7.0, 0.0, 5.0]])
    s = tf.Variable([b"a", b"b"])
    s[0].assign(b"z")
    assert list(s.numpy()) == [b"z", b"b"]
    i = tf.Variable([1, 2])
    np.testing.assert_array_equal(i[1].assign(5).numpy(), [1, 5])


def test_eager_slice_assignment_errors(eager):
    v = tf.Variable([1.0, 2.0, 3.0])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Cannot broadcast input shape \[3\] into final shape \[2\]"):
        v[0:2].assign([1.0, 2.0, 3.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="slice index 5 of dimension 0"):
        v[5].assign(9.0)
    with pytest.raises(AttributeError):
        tf.constant([1.0])[0].assign(2.0)  # a tensor's slice: nothing to assign to
    with pytest.raises(AttributeError):
        v[0:2][0].assign(2.0)  # a slice of a slice is a tensor's
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0, 3.0])


def test_a_variables_slice_is_still_a_tensor(eager):
    w = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        y = w[0] * 3.0 + tf.add(w[1], 1.0)
        w[1].assign(5.0)
    np.testing.assert_array_equal(tape.gradient(y, w).numpy(), [3.0, 1.0])
    assert repr(w[0]) == "<tf.Tensor: shape=(), dtype=float32, numpy=1.0>"
    assert isinstance(w[0], tf.Tensor) and float(w[1]) == 5.0


@pytest.mark.parametrize("use_resource", [True, False])
def test_slice_assignment_in_a_graph(use_resource):
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0, 3.0], use_resource=use_resource)
        a = tf.strided_slice(v, [1], [3], var=v, name="s").assign([7.0, 8.0])
        b = tf.strided_slice(v, [0], [1], shrink_axis_mask=1, var=v, name="t").assign(5.0)
        if use_resource:
            c = v[0:2].assign(tf.placeholder_with_default([1.0, 2.0, 3.0], [None]))
            assert a.op.type == "Identity"  # the variable read after the assignment
            assert a.op.control_inputs[0].type == "ResourceStridedSliceAssign"
        else:  # the reference variable's op outputs its reference, as TF 1.x's
            c = tf.strided_slice(v, [0], [2], var=v, name="u").assign(
                tf.placeholder_with_default([1.0, 2.0, 3.0], [None]))
            assert (a.name, a.dtype, a.op.type) == ("s_assign:0", tf.float32._as_ref(),
                                                    "StridedSliceAssign")
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(a), [1.0, 7.0, 8.0])
            np.testing.assert_array_equal(sess.run(b), [5.0, 7.0, 8.0])
            with pytest.raises(tf.errors.InvalidArgumentError, match="Cannot broadcast"):
                sess.run(c)
            np.testing.assert_array_equal(sess.run(v), [5.0, 7.0, 8.0])


def test_a_reference_variables_slice_assigns_and_load_assigns_eagerly():
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0, 3.0], use_resource=False)
        one = v[1].assign(10.0)
        two = v[0:2].assign([7.0, 8.0])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(one), [1.0, 10.0, 3.0])  # (TF 1.x's)
            np.testing.assert_array_equal(sess.run(two), [7.0, 8.0, 3.0])
            np.testing.assert_array_equal(sess.run(v[1:]), [8.0, 3.0])
    with eager_mode():
        w = tf.Variable([1.0, 2.0])
        assert w.load([3.0, 4.0]) is None  # assigned at once eagerly (TF's)
        np.testing.assert_array_equal(w.numpy(), [3.0, 4.0])
