"""Resource variables as TF's: in-place operators refused with TF's text (``v += 1`` would
rebind the name and leave the variable as it was), and the small methods and behaviours of
TF's ``Variable`` eagerly. Expected values read off TensorFlow 2.21."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture
def eager():
    with eager_mode():
        yield


IN_PLACE = [
    (operator.iadd, "`variable += value` with `tf.Variable`s is not supported. Use "
     "`variable.assign_add(value)` to modify the variable, or `out = variable + value` if you "
     "need to get a new output Tensor."),
    (operator.isub, "`variable -= value` with `tf.Variable`s is not supported. Use "
     "`variable.assign_sub(value)` to modify the variable, or `out = variable * value` if you "
     "need to get a new output Tensor."),
    (operator.imul, "`var *= value` with `tf.Variable`s is not supported. Use "
     "`var.assign(var * value)` to modify the variable, or `out = var * value` if you need to "
     "get a new output Tensor."),
    (operator.itruediv, "`var /= value` with `tf.Variable`s is not supported. Use "
     "`var.assign(var / value)` to modify the variable, or `out = var / value` if you need to "
     "get a new output Tensor."),
    (operator.ipow, "`var **= value` with `tf.Variable`s is not supported. Use "
     "`var.assign(var ** value)` to modify the variable, or `out = var ** value` if you need "
     "to get a new output Tensor."),
]


@pytest.mark.parametrize("op,text", IN_PLACE)
def test_in_place_operators_on_a_variable_are_refused(eager, op, text):
    v = tf.Variable(2.0)
    with pytest.raises(RuntimeError) as info:
        op(v, 1.0)
    assert str(info.value) == text
    assert float(v.numpy()) == 2.0


def test_in_place_operators_in_a_graph():
    with tf.Graph().as_default():
        v = tf.Variable(2.0, use_resource=True)
        with pytest.raises(RuntimeError, match="variable.assign_add"):
            v += 1.0
        ref = tf.Variable(2.0, use_resource=False)
        ref += 1.0  # TF 1.x's reference variable: a new tensor, as TF's
        assert isinstance(ref, tf.Tensor)


def test_other_in_place_operators_make_a_tensor(eager):
    v = tf.Variable(7.0)
    w = v
    w //= 2.0  # TF defines no refusal for these: Python's rebinding
    assert float(w) == 3.0 and float(v.numpy()) == 7.0
    np.testing.assert_array_equal(v.numpy(), 7.0)


def test_assign_without_reading_returns_none_eagerly(eager):
    v = tf.Variable([1.0, 2.0])
    assert v.assign([3.0, 4.0], read_value=False) is None
    assert v.assign_add([1.0, 1.0], read_value=False) is None
    assert v.assign_sub([2.0, 2.0], read_value=False) is None
    np.testing.assert_array_equal(v.numpy(), [2.0, 3.0])


def test_assign_without_reading_returns_the_op_in_a_graph():
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0], use_resource=True)
        assert v.assign([3.0, 4.0], read_value=False).type == "AssignVariableOp"


def test_assign_of_the_wrong_shape_is_tfs_value_error(eager):
    with pytest.raises(ValueError) as info:
        tf.Variable([1.0, 2.0]).assign([1.0, 2.0, 3.0])
    assert str(info.value) == (
        "Cannot assign value to variable ' Variable:0': Shape mismatch.The variable shape "
        "(2,), and the assigned value shape (3,) are incompatible.")
    with pytest.raises(ValueError, match=r"' w:0'.*\(2, 3\).*\(3, 2\)"):
        tf.Variable(tf.zeros([2, 3]), name="w").assign(tf.zeros([3, 2]))


def _vector():
    return tf.Variable([1.0, 2.0, 3.0, 4.0])


def test_scatter_methods(eager):
    np.testing.assert_array_equal(_vector().scatter_nd_add([[0], [2]], [5.0, 6.0]).numpy(),
                                  [6.0, 2.0, 9.0, 4.0])
    np.testing.assert_array_equal(_vector().scatter_nd_sub([[0]], [5.0]).numpy(),
                                  [-4.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(_vector().scatter_nd_update([[1]], [9.0]).numpy(),
                                  [1.0, 9.0, 3.0, 4.0])
    np.testing.assert_array_equal(_vector().scatter_nd_max([[1], [2]], [9.0, 0.0]).numpy(),
                                  [1.0, 9.0, 3.0, 4.0])
    np.testing.assert_array_equal(_vector().scatter_nd_min([[1], [2]], [9.0, 0.0]).numpy(),
                                  [1.0, 2.0, 0.0, 4.0])
    delta = tf.IndexedSlices(tf.constant([9.0, 0.0]), tf.constant([1, 2]))
    np.testing.assert_array_equal(_vector().scatter_max(delta).numpy(), [1.0, 9.0, 3.0, 4.0])
    np.testing.assert_array_equal(_vector().scatter_min(delta).numpy(), [1.0, 2.0, 0.0, 4.0])
    m = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    rows = tf.IndexedSlices(tf.constant([[9.0], [8.0]]), tf.constant([[1], [0]]))
    np.testing.assert_array_equal(m.batch_scatter_update(rows).numpy(), [[1.0, 9.0], [8.0, 4.0]])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[0\] = \[9\]"):
        _vector().scatter_nd_add([[9]], [5.0])


def test_gather_nd_and_set_shape(eager):
    m = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(m.gather_nd([[0, 1], [1, 0]]).numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(m.gather_nd([[1]], name="g").numpy(), [[3.0, 4.0]])
    v = _vector()
    assert v.set_shape([4]) is None and v.set_shape(None) is None
    with pytest.raises(ValueError, match=r"Shapes \(4,\) and \(3,\) are not compatible"):
        v.set_shape([3])
    with tf.Graph().as_default():
        free = tf.Variable(tf.zeros([2]), validate_shape=False, use_resource=True)
        free.set_shape([2])
        assert free.shape.as_list() == [2]
