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
